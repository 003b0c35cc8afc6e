//! Workers in the store: their records, the history's pages, their progress and bookkeeping.
//! Their leases (`lease.rs`), event log (`events.rs`), request inbox (`requests.rs`) and pushes
//! (`pushes.rs`) are submodules, re-exported here; their alerts are `store::alerts`'.
//!
//! **History costs what is live** (invariant 16). A worker has *ended* when it is terminal and
//! no change of it is still landing ([`ended`]); `workers.ended_ms` is written with its progress
//! in the same statement and read through partial indexes. Commands that load the organisation
//! read live workers and, for display, a bounded page of ended ones — never every row
//! (`list_workers` is for tests, rebuilds and benchmarks).

use super::sql::{OptionalExtension, Tx, params};
use super::{Store, StoreError, now_ms};
use crate::ci::CiRun;
use crate::ci::verdict::VerdictKind;
use crate::milestone::{Milestone, Progress};
use crate::sha::Sha;
use serde::Serialize;
use std::path::{Path, PathBuf};

mod events;
mod lease;
mod pushes;
mod requests;

pub use super::alerts::{AlertRecord, add_alert, alerts};
pub use events::{WorkerEvent, add_event, events_since, worker_events, worker_events_after};
pub use lease::{Lease, claim_lease, fence_of, keep_claim, renew_lease, set_lease};
pub use pushes::{
    PushRecord, VerdictRow, first_pushed_ms, others_pushes, push_of, pushes,
    record_observed_verdict, record_push, record_verdict, recorded_verdict, with_latest_verdict,
};
pub use requests::{
    Request, RequestKind, add_request, finish_request, get_request, pending_requests,
};

/// One worker as stored.
#[derive(Debug, Clone, Serialize)]
pub struct WorkerRecord {
    pub id: String,
    pub repo: String,
    pub task: String,
    pub task_id: Option<String>,
    pub component: Option<String>,
    pub plan: Option<String>,
    pub progress: Progress,
    pub branch: String,
    pub base_sha: String,
    pub worktree: String,
    pub remote: String,
    /// YYYY-MM-DD of creation: names the checkpoint file.
    pub day: String,
    pub supervisor_pid: Option<i64>,
    pub supervisor_start: Option<i64>,
    pub lease_until_ms: Option<i64>,
    pub worker_pid: Option<i64>,
    pub worker_running: bool,
    pub exit_code: Option<i64>,
    pub respawns: i64,
    pub resume_note: Option<String>,
    pub created_ms: i64,
    pub updated_ms: i64,
    /// When it ended for good ([`ended`]), as stored; `None` while it is live. Written with its
    /// progress (the value given to [`insert_worker`] is not read).
    pub ended_ms: Option<i64>,
    /// The model its agent runs with, chosen at spawn and kept for every respawn and resume
    /// (`config::model`); `None`: the agent's own default.
    pub model: Option<String>,
    /// Why that model: `task`, `override:<condition>`, `repo`, `worker`.
    pub model_source: Option<String>,
    /// The node of the lease's holder (`crate::node`): its pid means something only there.
    pub node: Option<String>,
    /// The fencing token: one more with each acquisition of the lease ([`claim_lease`]).
    /// Every write of the supervisor holding it checks it first (`Store::fence`).
    pub fence: i64,
}

/// Whether a worker whose state is `p` has ended for good: terminal, and no change of it still
/// on its way to the base branch (a DONE worker whose change is landing is live: its
/// supervisor still works and its lock is held). Nothing happens to an ended worker any more,
/// so commands that load the organisation skip it (`ended_ms`, indexed).
pub fn ended(p: &Progress) -> bool {
    p.milestone.is_terminal() && !p.landing_active()
}

impl WorkerRecord {
    pub fn milestone(&self) -> Milestone {
        self.progress.milestone
    }

    /// The lease of whoever supervises (or last supervised) the worker.
    pub fn lease(&self) -> Option<Lease> {
        self.supervisor_pid.map(|pid| Lease {
            pid,
            start: self.supervisor_start,
            until_ms: self.lease_until_ms.unwrap_or(0),
            node: self.node.clone(),
            fence: self.fence,
        })
    }

    /// Is the worker's supervisor alive: its lease valid and its process the same one?
    /// The worker's branch in the clone (its worktree's): `branch` itself, except for a
    /// `land: direct` worker, whose `branch` is the base branch it pushes to on the forge and
    /// whose local branch is `orch/<id>` (the clone's own base branch is never the worker's).
    pub fn local_branch(&self) -> String {
        if self.branch.starts_with("orch/") {
            self.branch.clone()
        } else {
            format!("orch/{}", self.id)
        }
    }

    pub fn supervised(&self, now: i64) -> bool {
        self.lease().is_some_and(|l| l.is_live(now))
    }

    /// Whether it needs a resumer: still in progress and nobody supervises it — its lease ran
    /// out, or the process holding it is gone (or is a different process with a reused pid). A
    /// PAUSED worker needs one too (its supervisor watched the upstream). BLOCKED and
    /// BLOCKED_PERMISSION wait for an operator; terminal states are final.
    pub fn orphaned(&self, now: i64) -> bool {
        // Halted by a FATAL: it waits for an operator (`orch fatal --clear` continues it).
        if self.progress.halted.is_some() && !self.progress.landing_active() {
            return false;
        }
        (matches!(
            self.milestone(),
            Milestone::Working | Milestone::PushedToCi | Milestone::FixingCi | Milestone::Paused
        ) || self.progress.landing_active())
            && !self.supervised(now)
    }
}

pub(super) const COLUMNS: &str = "id, repo, task, task_id, component, plan, progress, branch, base_sha, worktree, remote, day, \
    supervisor_pid, supervisor_start, lease_until_ms, worker_pid, worker_running, exit_code, respawns, resume_note, \
    created_ms, updated_ms, ended_ms, model, model_source, node, fence";

/// How many columns [`COLUMNS`] names: a query selecting more reads them from this index on.
pub(super) const COLUMN_COUNT: usize = 27;

pub(super) fn row_to_worker(r: &super::sql::Row) -> super::sql::Result<WorkerRecord> {
    let progress: String = r.get(6)?;
    let progress: Progress =
        serde_json::from_str(&progress).map_err(|e| super::sql::Error::Conversion {
            column: 6,
            source: super::sql::FromSqlError::Other(Box::new(e)),
        })?;
    Ok(WorkerRecord {
        id: r.get(0)?,
        repo: r.get(1)?,
        task: r.get(2)?,
        task_id: r.get(3)?,
        component: r.get(4)?,
        plan: r.get(5)?,
        progress,
        branch: r.get(7)?,
        base_sha: r.get(8)?,
        worktree: r.get(9)?,
        remote: r.get(10)?,
        day: r.get(11)?,
        supervisor_pid: r.get(12)?,
        supervisor_start: r.get(13)?,
        lease_until_ms: r.get(14)?,
        worker_pid: r.get(15)?,
        worker_running: r.get::<_, i64>(16)? != 0,
        exit_code: r.get(17)?,
        respawns: r.get(18)?,
        resume_note: r.get(19)?,
        created_ms: r.get(20)?,
        updated_ms: r.get(21)?,
        ended_ms: r.get(22)?,
        model: r.get(23)?,
        model_source: r.get(24)?,
        node: r.get(25)?,
        fence: r.get(26)?,
    })
}

/// Whether the database holds any worker at all.
pub fn any_worker(tx: &Tx) -> super::sql::Result<bool> {
    tx.prepare_cached("SELECT EXISTS (SELECT 1 FROM workers)")?
        .query_row([], |r| r.get(0))
}

pub fn insert_worker(tx: &Tx, w: &WorkerRecord) -> super::sql::Result<()> {
    // Cached: spawn's lock transaction runs it, and a rebuild once per worker.
    tx.prepare_cached(
        &format!("INSERT INTO workers ({COLUMNS}, milestone) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27, ?28)"),
    )?
    .execute(params![
            w.id,
            w.repo,
            w.task,
            w.task_id,
            w.component,
            w.plan,
            serde_json::to_string(&w.progress).expect("progress serialises"),
            w.branch,
            w.base_sha,
            w.worktree,
            w.remote,
            w.day,
            w.supervisor_pid,
            w.supervisor_start,
            w.lease_until_ms,
            w.worker_pid,
            w.worker_running as i64,
            w.exit_code,
            w.respawns,
            w.resume_note,
            w.created_ms,
            w.updated_ms,
            ended(&w.progress).then_some(w.updated_ms),
            w.model,
            w.model_source,
            w.node,
            w.fence,
            w.progress.milestone.as_str()
        ])?;
    Ok(())
}

pub fn get_worker(tx: &Tx, id: &str) -> super::sql::Result<Option<WorkerRecord>> {
    tx.prepare_cached(&format!("SELECT {COLUMNS} FROM workers WHERE id = ?1"))?
        .query_row([id], row_to_worker)
        .optional()
}

/// The worktree of every worker that holds a lock, by worker id (one light read for the
/// drift check on every load).
pub fn worktrees_of_lock_holders(
    tx: &Tx,
) -> super::sql::Result<std::collections::HashMap<String, String>> {
    let mut stmt = tx
        .prepare_cached("SELECT w.id, w.worktree FROM locks l JOIN workers w ON w.id = l.holder")?;
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect()
}

/// The DONE workers of repository `repo`, most recently updated first, at most `limit`.
pub fn recent_done_of(tx: &Tx, repo: &str, limit: usize) -> super::sql::Result<Vec<WorkerRecord>> {
    tx.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM workers WHERE repo = ?1 AND milestone = 'DONE'
         ORDER BY updated_ms DESC LIMIT ?2"
    ))?
    .query_map(params![repo, limit as i64], row_to_worker)?
    .collect()
}

/// Every worker ever recorded (and not pruned), oldest first. The whole history: for tests,
/// rebuilds and measurements, never a command's hot path (see [`live_workers`]).
pub fn list_workers(tx: &Tx) -> super::sql::Result<Vec<WorkerRecord>> {
    let mut stmt = tx.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM workers ORDER BY created_ms, id"
    ))?;
    stmt.query_map([], row_to_worker)?.collect()
}

/// The workers that have not ended ([`ended`]), oldest first: what resume, the orphan sweep
/// and every view of the organisation start from. Read through the partial index
/// `workers_live`, so its cost does not grow with the history.
pub fn live_workers(tx: &Tx) -> super::sql::Result<Vec<WorkerRecord>> {
    let mut stmt = tx.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM workers WHERE ended_ms IS NULL ORDER BY created_ms, id"
    ))?;
    stmt.query_map([], row_to_worker)?.collect()
}

/// The workers whose tree may have been left running by a dead supervisor
/// (`app::orphans::sweep`): live ones that had a worker process, and ended ones whose
/// worker's exit was never recorded (an ended worker's exit, once recorded, came after its
/// tree was swept by whoever recorded it). (`+ended_ms`: the second half is read through the
/// small `workers_running` index, not by walking every ended worker's.)
pub fn sweep_candidates(tx: &Tx) -> super::sql::Result<Vec<WorkerRecord>> {
    let mut stmt = tx.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM workers WHERE ended_ms IS NULL AND worker_pid IS NOT NULL
         UNION ALL
         SELECT {COLUMNS} FROM workers WHERE worker_running = 1 AND +ended_ms IS NOT NULL"
    ))?;
    stmt.query_map([], row_to_worker)?.collect()
}

/// Ended workers updated at or after `since_ms` (resume refreshes their checkpoints).
pub fn ended_updated_since(tx: &Tx, since_ms: i64) -> super::sql::Result<Vec<WorkerRecord>> {
    let mut stmt = tx.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM workers WHERE updated_ms >= ?1 AND ended_ms IS NOT NULL"
    ))?;
    stmt.query_map([since_ms], row_to_worker)?.collect()
}

/// Whether any worker of `repo` is in the history (on the `workers_repo` index).
pub fn any_worker_of(tx: &Tx, repo: &str) -> super::sql::Result<bool> {
    tx.prepare_cached("SELECT EXISTS (SELECT 1 FROM workers WHERE repo = ?1)")?
        .query_row([repo], |r| r.get(0))
}

/// Which workers a history listing (`orch status`, `orch sessions list`) shows.
#[derive(Debug, Clone, Default)]
pub struct HistoryFilter {
    pub repo: Option<String>,
    /// Workers a wave started: its tasks' workers and every attempt (task id `<wave>:…`).
    pub wave: Option<String>,
    /// Ended workers only if they ended at or after this (live ones are always shown).
    pub ended_since_ms: Option<i64>,
}

/// Where a page of ended workers (newest ended first) stops: the last one shown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    pub ended_ms: i64,
    pub id: String,
}

impl Cursor {
    /// `<ended_ms>:<worker id>`, what `--after` takes back.
    pub fn encode(&self) -> String {
        format!("{}:{}", self.ended_ms, self.id)
    }

    pub fn parse(s: &str) -> Option<Cursor> {
        let (ms, id) = s.split_once(':')?;
        let ended_ms = ms.parse().ok()?;
        (!id.is_empty()).then(|| Cursor {
            ended_ms,
            id: id.to_string(),
        })
    }

    pub fn of(w: &WorkerRecord) -> Option<Cursor> {
        w.ended_ms.map(|ended_ms| Cursor {
            ended_ms,
            id: w.id.clone(),
        })
    }
}

/// The WHERE clause (after `live`) and its parameters for `f`.
fn filter_sql(f: &HistoryFilter, live: bool) -> (String, Vec<super::sql::Value>) {
    use super::sql::Value;
    let mut sql = String::from(if live {
        "ended_ms IS NULL"
    } else {
        "ended_ms IS NOT NULL"
    });
    let mut params: Vec<Value> = Vec::new();
    if let Some(repo) = &f.repo {
        params.push(Value::Text(repo.clone()));
        sql.push_str(&format!(" AND repo = ?{}", params.len()));
    }
    if let Some(wave) = &f.wave {
        // `<wave>:` up to (not including) `<wave>;` — every task id of the wave, on the index.
        params.push(Value::Text(format!("{wave}:")));
        params.push(Value::Text(format!("{wave};")));
        params.push(Value::Text(wave.clone()));
        let n = params.len();
        sql.push_str(&format!(
            " AND ((task_id >= ?{} AND task_id < ?{}) OR id IN (SELECT worker_id FROM wave_tasks WHERE wave = ?{n}))",
            n - 2,
            n - 1
        ));
    }
    if let (Some(since), false) = (f.ended_since_ms, live) {
        params.push(Value::Integer(since));
        sql.push_str(&format!(" AND ended_ms >= ?{}", params.len()));
    }
    (sql, params)
}

/// The live workers `f` selects, oldest first.
pub fn live_workers_where(tx: &Tx, f: &HistoryFilter) -> super::sql::Result<Vec<WorkerRecord>> {
    let (filter, params) = filter_sql(f, true);
    tx.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM workers WHERE {filter} ORDER BY created_ms, id"
    ))?
    .query_map(params, row_to_worker)?
    .collect()
}

/// The ended workers `f` selects, newest ended first, after `after` (a previous page's last),
/// at most `limit`.
pub fn ended_workers(
    tx: &Tx,
    f: &HistoryFilter,
    after: Option<&Cursor>,
    limit: Option<usize>,
) -> super::sql::Result<Vec<WorkerRecord>> {
    let (mut filter, mut params) = filter_sql(f, false);
    if let Some(c) = after {
        params.push(super::sql::Value::Integer(c.ended_ms));
        params.push(super::sql::Value::Text(c.id.clone()));
        let n = params.len();
        filter.push_str(&format!(" AND (ended_ms, id) < (?{}, ?{n})", n - 1));
    }
    params.push(super::sql::Value::Integer(
        // No limit: the largest (a negative LIMIT is SQLite's alone).
        limit.map_or(i64::MAX, |l| l.min(i64::MAX as usize) as i64),
    ));
    tx.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM workers WHERE {filter} ORDER BY ended_ms DESC, id DESC LIMIT ?{}",
        params.len()
    ))?
    .query_map(params, row_to_worker)?
    .collect()
}

/// How many ended workers `f` selects after `after` (counted on the index, no row read).
pub fn count_ended(
    tx: &Tx,
    f: &HistoryFilter,
    after: Option<&Cursor>,
) -> super::sql::Result<usize> {
    let (mut filter, mut params) = filter_sql(f, false);
    if let Some(c) = after {
        params.push(super::sql::Value::Integer(c.ended_ms));
        params.push(super::sql::Value::Text(c.id.clone()));
        let n = params.len();
        filter.push_str(&format!(" AND (ended_ms, id) < (?{}, ?{n})", n - 1));
    }
    let n: i64 = tx
        .prepare_cached(&format!("SELECT COUNT(*) FROM workers WHERE {filter}"))?
        .query_row(params, |r| r.get(0))?;
    Ok(n as usize)
}

/// Moves the worker's worktree to `path` (a node taking it over makes its own).
pub fn set_worktree(tx: &Tx, id: &str, path: &str) -> super::sql::Result<()> {
    tx.prepare_cached("UPDATE workers SET worktree = ?2 WHERE id = ?1")?
        .execute(params![id, path])?;
    Ok(())
}

/// [`save_progress`] by the worker's supervisor of record only: false (and nothing written)
/// when process `pid` no longer owns the worker (another supervisor claimed it).
pub fn save_progress_as(tx: &Tx, id: &str, pid: i64, p: &Progress) -> super::sql::Result<bool> {
    let n = tx
        .prepare_cached(
            "UPDATE workers SET progress = ?2, milestone = ?3, updated_ms = ?4,
               ended_ms = CASE WHEN ?6 THEN COALESCE(ended_ms, ?4) ELSE NULL END
             WHERE id = ?1 AND supervisor_pid = ?5",
        )?
        .execute(params![
            id,
            serde_json::to_string(p).expect("progress serialises"),
            p.milestone.as_str(),
            now_ms(),
            pid,
            ended(p)
        ])?;
    Ok(n == 1)
}

/// Saves the state machine's state whoever holds the lease (an operator acting on a worker
/// that has no live supervisor).
pub fn save_progress(tx: &Tx, id: &str, p: &Progress) -> super::sql::Result<()> {
    tx.prepare_cached(
        "UPDATE workers SET progress = ?2, milestone = ?3, updated_ms = ?4,
           ended_ms = CASE WHEN ?5 THEN COALESCE(ended_ms, ?4) ELSE NULL END WHERE id = ?1",
    )?
    .execute(params![
        id,
        serde_json::to_string(p).expect("progress serialises"),
        p.milestone.as_str(),
        now_ms(),
        ended(p)
    ])?;
    Ok(())
}

/// The worker's state as its row holds it: the `milestone` column (what queries select on)
/// and the progress (None: no such row). How a supervisor finds its row changed by someone
/// else (`app::supervisor::own_rows`).
pub fn stored_state(tx: &Tx, id: &str) -> super::sql::Result<Option<(String, String)>> {
    tx.prepare_cached("SELECT milestone, progress FROM workers WHERE id = ?1")?
        .query_row(params![id], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()
}

/// The worker process `pid` started.
pub fn mark_worker_started(tx: &Tx, id: &str, pid: i64) -> super::sql::Result<()> {
    tx.prepare_cached(
        "UPDATE workers SET worker_pid = ?2, worker_running = 1, exit_code = NULL WHERE id = ?1",
    )?
    .execute(params![id, pid])?;
    Ok(())
}

/// The worker process ended (`code` None: by a signal, or unknown).
pub fn mark_worker_exited(tx: &Tx, id: &str, code: Option<i32>) -> super::sql::Result<()> {
    tx.prepare_cached("UPDATE workers SET worker_running = 0, exit_code = ?2 WHERE id = ?1")?
        .execute(params![id, code])?;
    Ok(())
}

/// Nothing of the worker runs any more (it was stopped by someone other than its supervisor).
pub fn mark_worker_stopped(tx: &Tx, id: &str) -> super::sql::Result<()> {
    tx.prepare_cached("UPDATE workers SET worker_running = 0 WHERE id = ?1")?
        .execute([id])?;
    Ok(())
}

/// A resumer's bookkeeping for a worker it reconciled: how many replacements it had, what
/// the next one is told (`note`; kept when None), no worker process of its own any more, and
/// the lease kept (for the supervisor about to take over) or given up.
pub fn record_resumed(
    tx: &Tx,
    id: &str,
    respawns: i64,
    note: Option<&str>,
    keep_lease: bool,
) -> super::sql::Result<()> {
    tx.prepare_cached(
        "UPDATE workers SET respawns = ?2, resume_note = COALESCE(?3, resume_note), worker_running = 0, worker_pid = NULL,
             lease_until_ms = CASE WHEN ?4 THEN lease_until_ms ELSE 0 END WHERE id = ?1",
    )?
    .execute(params![id, respawns, note, keep_lease])?;
    Ok(())
}

/// The file a worker's supervisor appends its output to: `<state_dir>/<worker>/worker.log`
/// (its session directory, `app::supervisor::session_dir`).
pub fn worker_log(state_dir: &Path, worker: &str) -> PathBuf {
    state_dir.join(worker).join(WORKER_LOG)
}

pub const WORKER_LOG: &str = "worker.log";

impl Store {
    pub fn worker(&mut self, id: &str) -> Result<Option<WorkerRecord>, StoreError> {
        self.read(|tx| get_worker(tx, id))
    }

    /// Every worker of the history (see [`list_workers`]).
    pub fn workers(&mut self) -> Result<Vec<WorkerRecord>, StoreError> {
        self.read(list_workers)
    }

    /// The workers that have not ended (see [`live_workers`]).
    pub fn live_workers(&mut self) -> Result<Vec<WorkerRecord>, StoreError> {
        self.read(live_workers)
    }
}

#[cfg(test)]
mod column_tests {
    #[test]
    fn the_column_count_is_the_columns_named() {
        assert_eq!(super::COLUMNS.split(',').count(), super::COLUMN_COUNT);
    }
}
