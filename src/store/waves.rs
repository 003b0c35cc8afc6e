//! Waves in SQLite: a wave as first seen by a tick, its tasks (their definitions as started),
//! which worker runs each, and the alert raised once for a task that stopped the wave.

use super::sql::{OptionalExtension, Tx, params};
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub struct WaveRow {
    pub name: String,
    pub file: String,
    pub created_ms: i64,
    pub updated_ms: i64,
    pub finished_ms: Option<i64>,
    pub cancelled_ms: Option<i64>,
    pub cancelled_by: Option<String>,
    /// Ready tasks the wave could not start at its last tick (fair sharing between waves).
    pub ready_waiting: i64,
}

#[derive(Debug, Clone, Serialize)]
pub struct WaveTaskRow {
    pub wave: String,
    pub id: String,
    pub seq: i64,
    /// The task's definition as JSON (`wave::TaskDef`, without its estimate).
    pub definition: String,
    pub estimate_ms: Option<i64>,
    pub worker_id: Option<String>,
    pub started_ms: Option<i64>,
    pub alerted_ms: Option<i64>,
    /// 1, or more after `orch wave retry`.
    pub attempt: i64,
}

const WAVE_COLS: &str =
    "name, file, created_ms, updated_ms, finished_ms, cancelled_ms, cancelled_by, ready_waiting";
const TASK_COLS: &str =
    "wave, id, seq, definition, estimate_ms, worker_id, started_ms, alerted_ms, attempt";

fn row_to_wave(r: &super::sql::Row) -> super::sql::Result<WaveRow> {
    Ok(WaveRow {
        name: r.get(0)?,
        file: r.get(1)?,
        created_ms: r.get(2)?,
        updated_ms: r.get(3)?,
        finished_ms: r.get(4)?,
        cancelled_ms: r.get(5)?,
        cancelled_by: r.get(6)?,
        ready_waiting: r.get(7)?,
    })
}

fn row_to_task(r: &super::sql::Row) -> super::sql::Result<WaveTaskRow> {
    Ok(WaveTaskRow {
        wave: r.get(0)?,
        id: r.get(1)?,
        seq: r.get(2)?,
        definition: r.get(3)?,
        estimate_ms: r.get(4)?,
        worker_id: r.get(5)?,
        started_ms: r.get(6)?,
        alerted_ms: r.get(7)?,
        attempt: r.get(8)?,
    })
}

pub fn get_wave(tx: &Tx, name: &str) -> super::sql::Result<Option<WaveRow>> {
    tx.prepare_cached(&format!("SELECT {WAVE_COLS} FROM waves WHERE name = ?1"))?
        .query_row([name], row_to_wave)
        .optional()
}

/// The wave files recorded (as each wave names its file): what every tick reads again, which
/// a worker must not be able to change (the sandbox, `worker.users`).
pub fn wave_files(tx: &Tx) -> super::sql::Result<Vec<std::path::PathBuf>> {
    Ok(list_waves(tx)?.into_iter().map(|w| w.file.into()).collect())
}

pub fn list_waves(tx: &Tx) -> super::sql::Result<Vec<WaveRow>> {
    let mut stmt = tx.prepare_cached(&format!(
        "SELECT {WAVE_COLS} FROM waves ORDER BY created_ms, name"
    ))?;
    stmt.query_map([], row_to_wave)?.collect()
}

/// Records the wave on first sight; later, notes the file it was read from. True on first sight.
pub fn record_wave(tx: &Tx, name: &str, file: &str, now: i64) -> super::sql::Result<bool> {
    let inserted = tx.execute(
        "INSERT INTO waves (name, file, created_ms, updated_ms) VALUES (?1, ?2, ?3, ?3) ON CONFLICT DO NOTHING",
        params![name, file, now],
    )?;
    if inserted == 0 {
        tx.execute(
            "UPDATE waves SET file = ?2, updated_ms = ?3 WHERE name = ?1",
            params![name, file, now],
        )?;
    }
    Ok(inserted == 1)
}

pub fn wave_tasks(tx: &Tx, wave: &str) -> super::sql::Result<Vec<WaveTaskRow>> {
    let mut stmt = tx.prepare_cached(&format!(
        "SELECT {TASK_COLS} FROM wave_tasks WHERE wave = ?1 ORDER BY seq, id"
    ))?;
    stmt.query_map([wave], row_to_task)?.collect()
}

/// Inserts a task, or rewrites one not started yet.
pub fn put_task(
    tx: &Tx,
    wave: &str,
    id: &str,
    seq: i64,
    definition: &str,
    estimate_ms: Option<i64>,
) -> super::sql::Result<()> {
    tx.execute(
        "INSERT INTO wave_tasks (wave, id, seq, definition, estimate_ms) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (wave, id) DO UPDATE SET seq = excluded.seq, estimate_ms = excluded.estimate_ms,
           definition = CASE WHEN wave_tasks.worker_id IS NULL THEN excluded.definition ELSE wave_tasks.definition END",
        params![wave, id, seq, definition, estimate_ms],
    )?;
    Ok(())
}

/// Puts a wave back as a checkpoint recorded it, with its tasks (`orch resume
/// --from-checkpoints`, on a database that has no wave of that name: false, nothing written,
/// when it has one).
pub fn restore_wave(tx: &Tx, wave: &WaveRow, tasks: &[WaveTaskRow]) -> super::sql::Result<bool> {
    let inserted = tx.execute(
        &format!(
            "INSERT INTO waves ({WAVE_COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) ON CONFLICT DO NOTHING"
        ),
        params![
            wave.name,
            wave.file,
            wave.created_ms,
            wave.updated_ms,
            wave.finished_ms,
            wave.cancelled_ms,
            wave.cancelled_by,
            wave.ready_waiting
        ],
    )?;
    if inserted == 0 {
        return Ok(false);
    }
    for t in tasks {
        tx.execute(
            &format!(
                "INSERT INTO wave_tasks ({TASK_COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)"
            ),
            params![
                wave.name,
                t.id,
                t.seq,
                t.definition,
                t.estimate_ms,
                t.worker_id,
                t.started_ms,
                t.alerted_ms,
                t.attempt
            ],
        )?;
    }
    Ok(true)
}

/// Drops a task that left the file, unless it was started (then it stays part of the wave).
pub fn drop_unstarted_task(tx: &Tx, wave: &str, id: &str) -> super::sql::Result<bool> {
    Ok(tx.execute(
        "DELETE FROM wave_tasks WHERE wave = ?1 AND id = ?2 AND worker_id IS NULL",
        params![wave, id],
    )? == 1)
}

pub fn set_task_worker(
    tx: &Tx,
    wave: &str,
    id: &str,
    worker: &str,
    started_ms: i64,
) -> super::sql::Result<()> {
    tx.execute(
        "UPDATE wave_tasks SET worker_id = ?3, started_ms = ?4 WHERE wave = ?1 AND id = ?2",
        params![wave, id, worker, started_ms],
    )?;
    Ok(())
}

/// The newest worker started for `task_id` (how a spawn whose link was never written is found).
pub fn worker_for_task_id(tx: &Tx, task_id: &str) -> super::sql::Result<Option<(String, i64)>> {
    tx.prepare_cached(
        "SELECT id, created_ms FROM workers WHERE task_id = ?1 ORDER BY created_ms DESC, id DESC LIMIT 1",
    )?
    .query_row([task_id], |r| Ok((r.get(0)?, r.get(1)?)))
    .optional()
}

/// Gives a started task another go: its next attempt, not started yet (the previous worker
/// stays in the workers' history). Returns the new attempt number.
pub fn retry_task(tx: &Tx, wave: &str, id: &str) -> super::sql::Result<i64> {
    tx.execute(
        "UPDATE wave_tasks SET attempt = attempt + 1, worker_id = NULL, started_ms = NULL,
           alerted_ms = NULL WHERE wave = ?1 AND id = ?2",
        params![wave, id],
    )?;
    tx.query_row(
        "SELECT attempt FROM wave_tasks WHERE wave = ?1 AND id = ?2",
        params![wave, id],
        |r| r.get(0),
    )
}

/// The wave task run by worker `old` is run by `new` from now on (a replacement that took the
/// task over: `land.on_conflict: fix`).
pub fn relink_task_worker(tx: &Tx, old: &str, new: &str, now: i64) -> super::sql::Result<usize> {
    tx.execute(
        "UPDATE wave_tasks SET worker_id = ?2, started_ms = ?3, alerted_ms = NULL WHERE worker_id = ?1",
        params![old, new, now],
    )
}

/// Marks the task alerted; false if it already was (the alert is raised once).
pub fn mark_alerted(tx: &Tx, wave: &str, id: &str, now: i64) -> super::sql::Result<bool> {
    Ok(tx.execute(
        "UPDATE wave_tasks SET alerted_ms = ?3 WHERE wave = ?1 AND id = ?2 AND alerted_ms IS NULL",
        params![wave, id, now],
    )? == 1)
}

pub fn set_progress(
    tx: &Tx,
    wave: &str,
    ready_waiting: i64,
    finished_ms: Option<i64>,
    now: i64,
) -> super::sql::Result<()> {
    tx.execute(
        "UPDATE waves SET ready_waiting = ?2, finished_ms = ?3, updated_ms = ?4 WHERE name = ?1",
        params![wave, ready_waiting, finished_ms, now],
    )?;
    Ok(())
}

pub fn cancel_wave(tx: &Tx, wave: &str, by: &str, now: i64) -> super::sql::Result<bool> {
    Ok(tx.execute(
        "UPDATE waves SET cancelled_ms = ?3, cancelled_by = ?2, updated_ms = ?3 WHERE name = ?1 AND cancelled_ms IS NULL",
        params![wave, by, now],
    )? == 1)
}

/// Other waves, not finished or cancelled, that had a ready task they could not start at a
/// tick within the last `window_ms`.
pub fn others_waiting(tx: &Tx, wave: &str, since_ms: i64) -> super::sql::Result<usize> {
    let n: i64 = tx
        .prepare_cached(
            "SELECT COUNT(*) FROM waves WHERE name != ?1 AND ready_waiting > 0
               AND finished_ms IS NULL AND cancelled_ms IS NULL AND updated_ms >= ?2",
        )?
        .query_row(params![wave, since_ms], |r| r.get(0))?;
    Ok(n as usize)
}

/// The wave and task id that started `worker`, if a wave did (on the `wave_tasks_worker` index).
pub fn wave_task_of(tx: &Tx, worker: &str) -> super::sql::Result<Option<(String, String)>> {
    tx.prepare_cached("SELECT wave, id FROM wave_tasks WHERE worker_id = ?1 LIMIT 1")?
        .query_row([worker], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()
}

/// Whether a wave of that name was ever recorded.
pub fn wave_exists(tx: &Tx, name: &str) -> super::sql::Result<bool> {
    tx.prepare_cached("SELECT EXISTS (SELECT 1 FROM waves WHERE name = ?1)")?
        .query_row([name], |r| r.get(0))
}

/// (repo, milliseconds from start to DONE) of every DONE worker: the planner's history.
pub fn done_durations(tx: &Tx) -> super::sql::Result<Vec<(String, i64)>> {
    let mut stmt = tx.prepare_cached(
        "SELECT repo, created_ms, progress FROM workers WHERE milestone = 'DONE'",
    )?;
    let rows = stmt.query_map([], |r| {
        let repo: String = r.get(0)?;
        let created: i64 = r.get(1)?;
        let progress: String = r.get(2)?;
        Ok((repo, created, progress))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (repo, created, progress) = row?;
        // `since_ms` of a DONE worker is when it became DONE.
        let done = serde_json::from_str::<serde_json::Value>(&progress)
            .ok()
            .and_then(|v| v.get("since_ms").and_then(|s| s.as_i64()));
        if let Some(done) = done
            && done > created
        {
            out.push((repo, done - created));
        }
    }
    Ok(out)
}

/// Claims the one running tick of `wave` for process `pid` of `node` for `for_ms` on the
/// database's clock (renewed by claiming again): false while another process — of any node —
/// holds an unexpired claim. Ticks started on several nodes at once start each task once.
pub fn claim_tick(
    tx: &Tx,
    wave: &str,
    node: &str,
    pid: i64,
    for_ms: i64,
) -> super::sql::Result<bool> {
    let now = tx.clock_ms()?;
    let n = tx
        .prepare_cached(
            "INSERT INTO wave_ticks (wave, node, pid, until_ms) VALUES (?1, ?2, ?3, ?4)
             ON CONFLICT (wave) DO UPDATE SET node = excluded.node, pid = excluded.pid,
               until_ms = excluded.until_ms
             WHERE wave_ticks.until_ms < ?5
                OR (wave_ticks.node = excluded.node AND wave_ticks.pid = excluded.pid)",
        )?
        .execute(params![wave, node, pid, now + for_ms, now])?;
    Ok(n == 1)
}

/// Gives a tick's claim up (only its holder's).
pub fn release_tick(tx: &Tx, wave: &str, node: &str, pid: i64) -> super::sql::Result<()> {
    tx.prepare_cached("DELETE FROM wave_ticks WHERE wave = ?1 AND node = ?2 AND pid = ?3")?
        .execute(params![wave, node, pid])?;
    Ok(())
}

/// Who holds `wave`'s tick claim: (node, pid, until), if anyone ever did.
pub fn tick_holder(tx: &Tx, wave: &str) -> super::sql::Result<Option<(String, i64, i64)>> {
    tx.prepare_cached("SELECT node, pid, until_ms FROM wave_ticks WHERE wave = ?1")?
        .query_row([wave], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .optional()
}
