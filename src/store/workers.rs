//! Workers, their leases, their event log, the request inbox and pushes in the store.
//!
//! **One supervisor per worker** (ARCHITECTURE.md, invariant 9). A lease in the worker row
//! (node, pid, process start time, expiry on the database's clock, fencing token). The spawner
//! holds it from the transaction that creates the worker until its supervisor takes it over
//! (`ORCH_LEASE_FROM`), renewing it meanwhile from a thread (`app::hold_lease_until_handover`);
//! `orch resume` claims orphans in a transaction that re-checks them and keeps each claim until
//! the supervisor it started has taken it over or has exited (`resume::ClaimsKept`, held by
//! `orch respawn` and `orch approve` too). Leases are taken and moved only through
//! [`claim_lease`], [`set_lease`], [`keep_claim`] and [`renew_lease`]; whether one is live is
//! `Lease::is_live` alone (another node's lease by its expiry alone). A lease holder's journal
//! entries are written with `Writer::Owner`, which writes nothing once another process owns the
//! worker. **Fencing:** each claim adds one to the worker's `fence`; a supervisor's store is
//! fenced with its token (`Store::fence`), and every write transaction of that store reads the
//! token first and writes nothing when it moved on (`StoreError::Fenced`; the supervisor then
//! kills its worker and exits). A stopped writer cannot keep the write lock either: PostgreSQL
//! ends a session idle in a transaction after 15 s (`pg::IDLE_IN_TRANSACTION`); on SQLite the
//! write queue ends an orch process stopped holding its turn (`write_queue.rs`). **Nodes:**
//! orphan sweeps and kills touch only this node's workers; `worker.max_parallel` counts this
//! node's lock holders (`nodes::lock_holders_on`), `worker.max_parallel_total` every node's.
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

/// One process's claim to supervise a worker: its node, pid, process start time (so a reused
/// pid is not mistaken for it), expiry and fencing token. Renewed by its holder; given up by
/// setting it to 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub pid: i64,
    pub start: Option<i64>,
    pub until_ms: i64,
    /// `None`: taken before nodes were recorded (by a process of this host).
    pub node: Option<String>,
    pub fence: i64,
}

impl Lease {
    /// Valid at `now` and held by a process that is still the one that took it. A lease of
    /// another node is judged by its expiry alone: its pid names nothing here.
    pub fn is_live(&self, now: i64) -> bool {
        self.until_ms > now
            && (!self.is_here()
                || crate::process::process_alive(self.pid as i32, self.start.map(|s| s as u64)))
    }

    /// Taken by a process of this node (whose pid this process can look at).
    pub fn is_here(&self) -> bool {
        self.node
            .as_deref()
            .is_none_or(|n| n == crate::node::name())
    }

    /// Held by process `pid` of this node.
    pub fn held_by(&self, pid: i64) -> bool {
        self.pid == pid && self.is_here()
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

/// Makes process `pid` (started at `start` ticks) of this node the worker's supervisor, with
/// a lease of `for_ms` on the database's clock and the next fencing token, which it returns.
/// Callers check in the same transaction that they may.
pub fn claim_lease(
    tx: &Tx,
    id: &str,
    pid: i64,
    start: Option<i64>,
    for_ms: i64,
) -> super::sql::Result<i64> {
    let until = tx.clock_ms()? + for_ms;
    tx.prepare_cached(
        "UPDATE workers SET supervisor_pid = ?2, supervisor_start = ?3, lease_until_ms = ?4,
           node = ?5, fence = fence + 1 WHERE id = ?1 RETURNING fence",
    )?
    .query_row(params![id, pid, start, until, crate::node::name()], |r| {
        r.get(0)
    })
}

/// A lease's expiry `for_ms` from now on the database's clock; `None`: given up (0).
fn lease_until(tx: &Tx, for_ms: Option<i64>) -> super::sql::Result<i64> {
    Ok(match for_ms {
        Some(ms) => tx.clock_ms()? + ms,
        None => 0,
    })
}

/// Moves the lease of process `pid` of this node on the worker to `for_ms` from the database's
/// clock (`None`: gives it up). False when that process no longer holds it.
pub fn set_lease(tx: &Tx, id: &str, pid: i64, for_ms: Option<i64>) -> super::sql::Result<bool> {
    let until = lease_until(tx, for_ms)?;
    let n = tx
        .prepare_cached(
            "UPDATE workers SET lease_until_ms = ?3
             WHERE id = ?1 AND supervisor_pid = ?2 AND (node IS NULL OR node = ?4)",
        )?
        .execute(params![id, pid, until, crate::node::name()])?;
    Ok(n == 1)
}

/// [`set_lease`] for a claim not given back: one given back meanwhile (`set_lease(.., None)`:
/// its lease 0) is left so, whatever the clock says. False when that process no longer holds
/// it, or gave it back.
pub fn keep_claim(tx: &Tx, id: &str, pid: i64, for_ms: i64) -> super::sql::Result<bool> {
    let until = lease_until(tx, Some(for_ms))?;
    let n = tx
        .prepare_cached(
            "UPDATE workers SET lease_until_ms = ?3
             WHERE id = ?1 AND supervisor_pid = ?2 AND (node IS NULL OR node = ?4)
               AND lease_until_ms <> 0",
        )?
        .execute(params![id, pid, until, crate::node::name()])?;
    Ok(n == 1)
}

/// Moves the lease taken with fencing token `fence` to `for_ms` from the database's clock
/// (`None`: gives it up). False when the lease was taken again since (by anyone, anywhere).
pub fn renew_lease(tx: &Tx, id: &str, fence: i64, for_ms: Option<i64>) -> super::sql::Result<bool> {
    let until = lease_until(tx, for_ms)?;
    let n = tx
        .prepare_cached("UPDATE workers SET lease_until_ms = ?3 WHERE id = ?1 AND fence = ?2")?
        .execute(params![id, fence, until])?;
    Ok(n == 1)
}

/// Moves the worker's worktree to `path` (a node taking it over makes its own).
pub fn set_worktree(tx: &Tx, id: &str, path: &str) -> super::sql::Result<()> {
    tx.prepare_cached("UPDATE workers SET worktree = ?2 WHERE id = ?1")?
        .execute(params![id, path])?;
    Ok(())
}

/// The worker's fencing token now (`None`: no such worker).
pub fn fence_of(tx: &Tx, id: &str) -> super::sql::Result<Option<i64>> {
    tx.prepare_cached("SELECT fence FROM workers WHERE id = ?1")?
        .query_row([id], |r| r.get(0))
        .optional()
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

/// Records an event with the worker log's length at this moment: everything in the log
/// before that offset was written before the event, so `orch logs` places it there — also
/// across crashes and respawns (the log is only ever appended to).
pub fn add_event(
    tx: &Tx,
    worker: &str,
    kind: &str,
    milestone: Milestone,
    detail: &str,
) -> super::sql::Result<()> {
    let log_bytes = tx
        .path()
        .and_then(|db| Path::new(db).parent())
        .and_then(|state| std::fs::metadata(worker_log(state, worker)).ok())
        .map(|m| m.len() as i64)
        .unwrap_or(0);
    tx.prepare_cached("INSERT INTO worker_events (worker_id, at_ms, kind, milestone, detail, log_bytes) VALUES (?1, ?2, ?3, ?4, ?5, ?6)")?
        .execute(params![worker, now_ms(), kind, milestone.as_str(), detail, log_bytes])?;
    Ok(())
}

#[derive(Debug, Clone, Serialize)]
pub struct WorkerEvent {
    pub seq: i64,
    pub worker_id: String,
    pub at_ms: i64,
    pub kind: String,
    pub milestone: String,
    pub detail: String,
    /// The worker log's length when the event was recorded (`None`: recorded before orch
    /// kept it).
    #[serde(skip)]
    pub log_bytes: Option<i64>,
}

fn row_to_event(r: &super::sql::Row) -> super::sql::Result<WorkerEvent> {
    Ok(WorkerEvent {
        seq: r.get(0)?,
        worker_id: r.get(1)?,
        at_ms: r.get(2)?,
        kind: r.get(3)?,
        milestone: r.get(4)?,
        detail: r.get(5)?,
        log_bytes: r.get(6)?,
    })
}

pub fn events_since(tx: &Tx, after_seq: i64) -> super::sql::Result<Vec<WorkerEvent>> {
    let mut stmt = tx.prepare_cached(
        "SELECT seq, worker_id, at_ms, kind, milestone, detail, log_bytes FROM worker_events WHERE seq > ?1 ORDER BY seq",
    )?;
    stmt.query_map([after_seq], row_to_event)?.collect()
}

pub fn worker_events(tx: &Tx, worker: &str) -> super::sql::Result<Vec<WorkerEvent>> {
    worker_events_after(tx, worker, 0)
}

/// `worker`'s events after `after_seq`, in order.
pub fn worker_events_after(
    tx: &Tx,
    worker: &str,
    after_seq: i64,
) -> super::sql::Result<Vec<WorkerEvent>> {
    let mut stmt = tx.prepare_cached(
        "SELECT seq, worker_id, at_ms, kind, milestone, detail, log_bytes FROM worker_events WHERE worker_id = ?1 AND seq > ?2 ORDER BY seq",
    )?;
    stmt.query_map(params![worker, after_seq], row_to_event)?
        .collect()
}

/// What a request asks of a worker's supervisor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "request", rename_all = "snake_case")]
pub enum RequestKind {
    /// `orch report`: a worker's claim.
    Report {
        milestone: Milestone,
        sha: Option<String>,
        job: Option<String>,
        note: Option<String>,
    },
    /// `orch cancel`: an operator stops the worker.
    Cancel { by: String, reason: String },
    /// `orch approve`: an operator approves the change at `sha`, which touches protected
    /// paths.
    Approve { by: String, sha: String },
    /// `orch report FATAL --reason …`: the worker halts its chain.
    Fatal { reason: String },
    /// A row this orch does not understand (written by a newer one): refused, never dropped.
    Unknown { kind: String },
}

/// A claim or operator request waiting for the supervisor (the inbox).
#[derive(Debug, Clone, Serialize)]
pub struct Request {
    pub id: i64,
    pub worker_id: String,
    pub kind: RequestKind,
    pub created_ms: i64,
    pub processed_ms: Option<i64>,
    /// One line for whoever asked (what `orch report` prints).
    pub outcome: Option<String>,
    /// Whether the outcome is a refusal (what `orch report`'s exit code says).
    pub refused: Option<bool>,
}

fn row_to_request(r: &super::sql::Row) -> super::sql::Result<Request> {
    let kind: String = r.get(2)?;
    let milestone: Option<String> = r.get(3)?;
    let kind = match (
        kind.as_str(),
        milestone.as_deref().and_then(Milestone::parse),
    ) {
        ("report", Some(milestone)) => RequestKind::Report {
            milestone,
            sha: r.get(4)?,
            job: r.get(5)?,
            note: r.get(6)?,
        },
        ("approve", _) => match r.get::<_, Option<String>>(4)? {
            Some(sha) => RequestKind::Approve {
                by: r
                    .get::<_, Option<String>>(7)?
                    .unwrap_or_else(|| "operator".into()),
                sha,
            },
            None => RequestKind::Unknown { kind },
        },
        ("fatal", _) => RequestKind::Fatal {
            reason: r.get::<_, Option<String>>(6)?.unwrap_or_default(),
        },
        ("cancel", _) => RequestKind::Cancel {
            by: r
                .get::<_, Option<String>>(7)?
                .unwrap_or_else(|| "operator".into()),
            reason: r.get::<_, Option<String>>(6)?.unwrap_or_default(),
        },
        _ => RequestKind::Unknown { kind },
    };
    Ok(Request {
        id: r.get(0)?,
        worker_id: r.get(1)?,
        kind,
        created_ms: r.get(8)?,
        processed_ms: r.get(9)?,
        outcome: r.get(10)?,
        refused: r.get::<_, Option<i64>>(11)?.map(|v| v != 0),
    })
}

const REQUEST_COLUMNS: &str = "id, worker_id, kind, milestone, sha, job, note, by, created_ms, processed_ms, outcome, refused";

/// Queues a request for the worker's supervisor; returns its id.
pub fn add_request(tx: &Tx, worker: &str, kind: &RequestKind) -> super::sql::Result<i64> {
    let (word, milestone, sha, job, note, by) = match kind {
        RequestKind::Report {
            milestone,
            sha,
            job,
            note,
        } => (
            "report",
            Some(milestone.as_str()),
            sha.as_deref(),
            job.as_deref(),
            note.as_deref(),
            None,
        ),
        RequestKind::Cancel { by, reason } => (
            "cancel",
            None,
            None,
            None,
            Some(reason.as_str()),
            Some(by.as_str()),
        ),
        RequestKind::Approve { by, sha } => (
            "approve",
            None,
            Some(sha.as_str()),
            None,
            None,
            Some(by.as_str()),
        ),
        RequestKind::Fatal { reason } => ("fatal", None, None, None, Some(reason.as_str()), None),
        RequestKind::Unknown { kind } => (kind.as_str(), None, None, None, None, None),
    };
    tx.query_row(
        "INSERT INTO requests (worker_id, kind, milestone, sha, job, note, by, created_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) RETURNING id",
        params![worker, word, milestone, sha, job, note, by, now_ms()],
        |r| r.get(0),
    )
}

pub fn pending_requests(tx: &Tx, worker: &str) -> super::sql::Result<Vec<Request>> {
    let mut stmt = tx.prepare_cached(&format!(
        "SELECT {REQUEST_COLUMNS} FROM requests WHERE worker_id = ?1 AND processed_ms IS NULL ORDER BY id"
    ))?;
    stmt.query_map([worker], row_to_request)?.collect()
}

pub fn get_request(tx: &Tx, id: i64) -> super::sql::Result<Option<Request>> {
    tx.prepare_cached(&format!(
        "SELECT {REQUEST_COLUMNS} FROM requests WHERE id = ?1"
    ))?
    .query_row([id], row_to_request)
    .optional()
}

/// Answers a request, once: false (nothing written) if it was already answered.
pub fn finish_request(tx: &Tx, id: i64, outcome: &str, refused: bool) -> super::sql::Result<bool> {
    let n = tx
        .prepare_cached(
            "UPDATE requests SET processed_ms = ?2, outcome = ?3, refused = ?4 WHERE id = ?1 AND processed_ms IS NULL",
        )?
        .execute(params![id, now_ms(), outcome, refused])?;
    Ok(n == 1)
}

/// A pushed SHA and orch's verdict for it.
#[derive(Debug, Clone, Serialize)]
pub struct PushRecord {
    pub sha: Sha,
    pub pushed_ms: i64,
    pub verdict: Option<VerdictKind>,
    pub detail: Option<String>,
    pub failed_jobs: Vec<String>,
    /// The CI runs orch judged, when known.
    pub runs: Option<Vec<CiRun>>,
    pub checked_ms: Option<i64>,
}

/// A verdict as recorded against a push.
#[derive(Debug, Clone, Copy)]
pub struct VerdictRow<'a> {
    pub kind: VerdictKind,
    pub detail: &'a str,
    pub failed_jobs: &'a [String],
    /// The runs it was judged on (None: not known, e.g. rebuilt from a checkpoint).
    pub runs: Option<&'a [CiRun]>,
}

impl<'a> VerdictRow<'a> {
    pub fn of(v: &'a crate::ci::verdict::Verdict, runs: &'a [CiRun]) -> VerdictRow<'a> {
        VerdictRow {
            kind: v.kind,
            detail: &v.detail,
            failed_jobs: &v.failed_jobs,
            runs: Some(runs),
        }
    }

    fn params(&self) -> (String, String) {
        (
            serde_json::to_string(self.failed_jobs).expect("strings serialise"),
            self.runs
                .map(|r| serde_json::to_string(r).expect("runs serialise"))
                .unwrap_or_else(|| "null".into()),
        )
    }
}

const PUSH_COLUMNS: &str = "sha, pushed_ms, verdict, detail, failed_jobs, runs, checked_ms";

fn row_to_push(r: &super::sql::Row) -> super::sql::Result<PushRecord> {
    let verdict: Option<String> = r.get(2)?;
    let failed: Option<String> = r.get(4)?;
    let runs: Option<String> = r.get(5)?;
    Ok(PushRecord {
        sha: r.get(0)?,
        pushed_ms: r.get(1)?,
        verdict: verdict.as_deref().and_then(VerdictKind::parse),
        detail: r.get(3)?,
        failed_jobs: failed
            .and_then(|f| serde_json::from_str(&f).ok())
            .unwrap_or_default(),
        runs: runs.and_then(|x| serde_json::from_str(&x).ok()),
        checked_ms: r.get(6)?,
    })
}

pub fn record_push(tx: &Tx, worker: &str, sha: &str, pushed_ms: i64) -> super::sql::Result<()> {
    tx.prepare_cached(
        "INSERT INTO pushes (worker_id, sha, pushed_ms) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
    )?
    .execute(params![worker, sha, pushed_ms])?;
    Ok(())
}

pub fn record_verdict(tx: &Tx, worker: &str, sha: &str, v: VerdictRow) -> super::sql::Result<()> {
    let (failed, runs) = v.params();
    tx.prepare_cached(
        "UPDATE pushes SET verdict = ?3, detail = ?4, failed_jobs = ?5, runs = ?6, checked_ms = ?7 WHERE worker_id = ?1 AND sha = ?2",
    )?
    .execute(params![worker, sha, v.kind.as_str(), v.detail, failed, runs, now_ms()])?;
    Ok(())
}

/// Records a verdict orch observed for `sha` (e.g. by `orch ci status`) in the push history of
/// whichever worker pushed it. Returns how many records were updated.
pub fn record_observed_verdict(tx: &Tx, sha: &str, v: VerdictRow) -> super::sql::Result<usize> {
    let (failed, runs) = v.params();
    tx.prepare_cached("UPDATE pushes SET verdict = ?2, detail = ?3, failed_jobs = ?4, runs = ?5, checked_ms = ?6 WHERE sha = ?1")?
        .execute(params![sha, v.kind.as_str(), v.detail, failed, runs, now_ms()])
}

/// The push record of `worker` for `sha`, if it pushed it.
pub fn push_of(tx: &Tx, worker: &str, sha: &str) -> super::sql::Result<Option<PushRecord>> {
    tx.prepare_cached(&format!(
        "SELECT {PUSH_COLUMNS} FROM pushes WHERE worker_id = ?1 AND sha = ?2"
    ))?
    .query_row([worker, sha], row_to_push)
    .optional()
}

/// `w` as shown to people: its verdict (and failed jobs, detail) the latest recorded for its
/// tracked commit. A worker's progress keeps the verdict it had when it last moved, and a
/// settled one (FAILED, BLOCKED, waiting for an operator) no longer hears CI, while a later
/// answer — the supervisor's last look, `orch ci status` — is still recorded against the push.
pub fn with_latest_verdict(tx: &Tx, w: &mut WorkerRecord) -> super::sql::Result<()> {
    let Some(sha) = &w.progress.tracked_sha else {
        return Ok(());
    };
    if let Some(push) = push_of(tx, &w.id, sha)?
        && let Some(kind) = push.verdict
    {
        w.progress.verdict = Some(kind);
        w.progress.failed_jobs = push.failed_jobs;
        w.progress.verdict_detail = push.detail;
    }
    Ok(())
}

pub fn pushes(tx: &Tx, worker: &str) -> super::sql::Result<Vec<PushRecord>> {
    let mut stmt = tx.prepare_cached(&format!(
        "SELECT {PUSH_COLUMNS} FROM pushes WHERE worker_id = ?1 ORDER BY rowid"
    ))?;
    stmt.query_map([worker], row_to_push)?.collect()
}

/// What the other workers of `repo` pushed: (worker, SHA). A push a worker claims must be
/// none of these, nor in their history.
pub fn others_pushes(
    tx: &Tx,
    repo: &str,
    worker: &str,
) -> super::sql::Result<Vec<(String, String)>> {
    let mut stmt = tx.prepare_cached(
        "SELECT p.worker_id, p.sha FROM pushes p JOIN workers w ON w.id = p.worker_id \
         WHERE w.repo = ?1 AND p.worker_id != ?2 ORDER BY p.rowid",
    )?;
    stmt.query_map([repo, worker], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect()
}

/// The latest verdict any worker recorded for `sha` (lets `orch ci status` answer a worker
/// without the forge token, which workers never hold).
pub fn recorded_verdict(tx: &Tx, sha: &str) -> super::sql::Result<Option<PushRecord>> {
    tx.query_row(
        &format!("SELECT {PUSH_COLUMNS} FROM pushes WHERE sha = ?1 AND verdict IS NOT NULL ORDER BY checked_ms DESC LIMIT 1"),
        [sha],
        row_to_push,
    )
    .optional()
}

/// When `sha` was first pushed by any worker (bounds a forge's paging and the no-run timeout).
pub fn first_pushed_ms(tx: &Tx, sha: &str) -> super::sql::Result<Option<i64>> {
    tx.query_row(
        "SELECT MIN(pushed_ms) FROM pushes WHERE sha = ?1",
        [sha],
        |row| row.get(0),
    )
}

#[derive(Debug, Clone, Serialize)]
pub struct AlertRecord {
    pub id: i64,
    pub at_ms: i64,
    pub severity: String,
    pub worker_id: Option<String>,
    pub repo: Option<String>,
    pub kind: String,
    pub message: String,
    /// How often it was raised within the de-duplication window (1: once).
    pub repeats: i64,
    /// When the condition ended (a paused worker resumed), if it did.
    pub resolved_ms: Option<i64>,
}

pub fn add_alert(tx: &Tx, a: &AlertRecord) -> super::sql::Result<i64> {
    tx.query_row(
        "INSERT INTO alerts (at_ms, severity, worker_id, repo, kind, message) VALUES (?1, ?2, ?3, ?4, ?5, ?6) RETURNING id",
        params![a.at_ms, a.severity, a.worker_id, a.repo, a.kind, a.message],
        |r| r.get(0),
    )
}

pub fn alerts(tx: &Tx, since_ms: i64) -> super::sql::Result<Vec<AlertRecord>> {
    let mut stmt = tx.prepare_cached(
        "SELECT id, at_ms, severity, worker_id, repo, kind, message, repeats, resolved_ms FROM alerts WHERE at_ms >= ?1 OR last_ms >= ?1 ORDER BY id",
    )?;
    stmt.query_map([since_ms], |r| {
        Ok(AlertRecord {
            id: r.get(0)?,
            at_ms: r.get(1)?,
            severity: r.get(2)?,
            worker_id: r.get(3)?,
            repo: r.get(4)?,
            kind: r.get(5)?,
            message: r.get(6)?,
            repeats: r.get(7)?,
            resolved_ms: r.get(8)?,
        })
    })?
    .collect()
}

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
