//! The journal: the one way a worker's transition becomes durable.
//!
//! Whoever moves a worker — its supervisor, a resumer, an operator's cancel, a spawn that
//! failed — runs `milestone::step` and hands the result here as one [`Entry`]: the state after
//! the step, every effect, and the facts observed beside it (a CI answer, a worker process that
//! started or ended, a resumer's bookkeeping, the answer to a request). [`commit`] writes all
//! of it in one transaction: the state, the event log, lock release, tracked SHA, verdicts,
//! alerts, request answers. Only after the commit does it write the views (`alerts.jsonl`, the
//! checkpoint file), which can always be rebuilt from the database.
//!
//! The journal carries out every durable effect. What is left — stopping, suspending or
//! continuing a process group, following CI for a new SHA — needs the process that owns the
//! worker, and only the supervisor does that (`supervisor::Supervisor::apply`).
//!
//! **A lock is freed only by DONE (verified, and landed) or an operator — and only once the
//! worker is gone** (ARCHITECTURE.md, invariant 2). DONE needs the worker's word (a claim, or the
//! end of its turn after a push) and CI's (the branch head green, sync job `success`); a green
//! head while the worker works on is PUSHED_TO_CI, verified green. With `land: merge` the lock of a
//! DONE worker is held through its landing and released in the transaction that records the base
//! branch's CI green for the landed commit (and its dependents' CI, `downstream.depth`). A lock is
//! also *handed over*, never dropped: a change that broke a dependent frees its lock in the
//! transaction that takes an operator hold on the dependent's chain; a fix worker or a conflict's
//! replacement takes a hold or a worker's lock over inside its own lock transaction
//! (`spawn::SpawnRequest::take_over`). `orch unhold` refuses to release a worker's lock. A step
//! that releases a lock (DONE, a cancel) stops the worker's tree first (`supervisor/act.rs`); its
//! exit is written in the same transaction as the release, so the lock and the `max_parallel`
//! slot stay taken until no process of the worker is left. A worker still running when its DONE
//! is accepted has been frozen since its claim and is killed; one that printed DONE gets up to
//! 1 s (`DONE_EXIT_GRACE`) to exit by itself before it is frozen, an agent whose commit turned
//! green up to 3 s (`AGENT_DONE_GRACE`) to end its turn — the branch head is read after the
//! freeze, so nothing pushed meanwhile slips under the DONE. A worker that reports BLOCKED keeps
//! its lock and is stopped at once (up to 300 ms, `BLOCKED_EXIT_GRACE`, then its tree is killed).
//! Other stops (timeout, cancel) are SIGTERM, `worker.stop_grace`, SIGKILL, then the release.

use crate::milestone::{Effect, Milestone, Progress};
use crate::store::workers::{self as ws, AlertRecord, VerdictRow, WorkerRecord};
use crate::store::{LockAttempt, Store, StoreError, holds_lock, now_ms, release_in, try_lock_in};
use std::path::Path;

/// Who writes, and so which check guards the write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Writer {
    /// The process holding the worker's lease (a supervisor, a resumer that claimed it, the
    /// spawner before the hand-over): nothing is written once another process owns it.
    Owner(i64),
    /// An operator acting on a worker that has no live supervisor.
    Operator,
}

impl Writer {
    /// This process, as the holder of the worker's lease.
    pub fn me() -> Writer {
        Writer::Owner(crate::pidns::host_pid() as i64)
    }
}

/// Something observed beside a transition, recorded in the same transaction.
#[derive(Debug, Clone)]
pub enum Fact<'a> {
    /// A push orch found itself (a resumer reading the remote), recorded before its verdict.
    Push { sha: &'a str, pushed_ms: i64 },
    /// orch's CI verdict for one of the worker's pushes (tracked or not).
    Verdict { sha: &'a str, row: VerdictRow<'a> },
    /// The worker process started.
    WorkerStarted { pid: i64 },
    /// The worker process ended.
    WorkerExited { code: Option<i32> },
    /// Nothing of the worker runs any more (stopped by someone other than a supervisor).
    WorkerStopped,
    /// A resumer reconciled the worker: replacements so far, what the next one is told, and
    /// whether the lease stays (a supervisor is about to take over) or is given up.
    Resumed {
        respawns: i64,
        replacement_note: Option<&'a str>,
        why: &'a str,
        keep_lease: bool,
    },
    /// An entry in the worker's event log that no effect produces.
    Logged { kind: &'static str, detail: String },
}

/// The answer to an inbox request, written with the transition it caused.
#[derive(Debug, Clone, Copy)]
pub struct Answer<'a> {
    pub request: i64,
    pub outcome: &'a str,
    pub refused: bool,
}

/// The holder of the operator hold orch takes on a chain that worker `worker`'s landed change
/// broke (one per breaking change, so a fix takes over exactly that one).
pub fn breakage_holder(worker: &str) -> String {
    format!("hold:orch-downstream-{worker}")
}

/// One transition of one worker, or facts alone (`after: None`).
#[derive(Debug, Clone)]
pub struct Entry<'a> {
    pub worker: &'a str,
    pub repo: &'a str,
    /// The milestone events are logged under: the state after the step, else the current one.
    pub milestone: Milestone,
    /// The state after the step; `None` leaves the stored state as it is.
    pub after: Option<&'a Progress>,
    pub effects: &'a [Effect],
    pub facts: Vec<Fact<'a>>,
    pub answer: Option<Answer<'a>>,
    /// Named as the releaser in the lock history ("orch", "orch resume").
    pub by: &'a str,
    /// Appended to transition events (" (resume)").
    pub note: &'a str,
    /// Write the checkpoint file after the commit even if no effect asks for it.
    pub checkpoint: bool,
    /// The organisation's graph, for an entry that takes a hold (`Effect::HoldChain`).
    pub graph: Option<&'a crate::graph::RepoGraph>,
    /// The worker's row as this writer last wrote it (its supervisor's): a commit that finds
    /// anything else there — written by someone else since — raises a critical
    /// [`STATE_TAMPERED`] alert in the same transaction, then writes its own state over it. A
    /// forgery made between the supervisor's periodic look and its next write is never
    /// overwritten unseen.
    pub expect: Option<&'a Progress>,
}

impl<'a> Entry<'a> {
    /// An entry about `w` (as its writer knows it) by `by`: no step, no facts yet.
    pub fn new(w: &'a WorkerRecord, by: &'a str) -> Entry<'a> {
        Entry {
            worker: &w.id,
            repo: &w.repo,
            milestone: w.progress.milestone,
            after: None,
            effects: &[],
            facts: Vec::new(),
            answer: None,
            by,
            note: "",
            checkpoint: false,
            graph: None,
            expect: None,
        }
    }

    pub fn step(mut self, after: &'a Progress, effects: &'a [Effect]) -> Entry<'a> {
        self.milestone = after.milestone;
        self.after = Some(after);
        self.effects = effects;
        self
    }

    pub fn fact(mut self, fact: Fact<'a>) -> Entry<'a> {
        self.facts.push(fact);
        self
    }
}

/// What came of a commit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use]
pub enum Committed {
    Written,
    /// Another process owns the worker now: nothing was written.
    NotOwner,
}

/// The kind of the alert raised when a worker's row was written by someone else than its
/// owner (see [`changed_behind`]).
pub const STATE_TAMPERED: &str = "state_tampered";

/// The alert's text for a worker's row `changed` behind its supervisor, which holds `mine`.
pub fn tampered_message(id: &str, changed: &str, mine: Milestone) -> String {
    format!(
        "worker {id}'s row in orch's database was changed by someone else than its supervisor ({changed}; it is {mine}): written outside orch; put back"
    )
}

/// What differs between the worker's row as stored (`milestone` column, progress JSON; None:
/// no row) and the progress its supervisor last wrote, in words; None when nothing does.
/// Only this worker's supervisor writes its row while it lives (the journal rule), so any
/// difference was written by someone else.
pub fn changed_behind(stored: Option<&(String, String)>, written: &Progress) -> Option<String> {
    let Some((column, progress)) = stored else {
        return Some("its row is gone".into());
    };
    let mut changed = Vec::new();
    if column != written.milestone.as_str() {
        changed.push(format!("milestone column {}", crate::text::escape(column)));
    }
    let mine = serde_json::to_value(written).expect("progress serialises");
    match serde_json::from_str::<serde_json::Value>(progress) {
        Ok(serde_json::Value::Object(theirs)) => {
            let empty = serde_json::Map::new();
            let ours = mine.as_object().unwrap_or(&empty);
            let mut keys: Vec<&String> = ours.keys().chain(theirs.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                if ours.get(k) != theirs.get(k) {
                    let said = theirs.get(k).map_or("removed".to_string(), |v| {
                        format!("{}", crate::text::escape(&truncate(&v.to_string(), 80)))
                    });
                    changed.push(format!("{k}: {said}"));
                }
            }
        }
        _ => changed.push("its progress is not orch's JSON".into()),
    }
    (!changed.is_empty()).then(|| changed.join(", "))
}

fn truncate(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// Commits `entry` in one transaction, then writes the views.
pub fn commit(
    store: &mut Store,
    state_dir: &Path,
    writer: Writer,
    entry: &Entry,
) -> Result<Committed, StoreError> {
    let now = now_ms();
    let id = entry.worker;
    let alerts = alert_records(entry, now);
    let milestone = entry.milestone;
    let window_ms = store.alert_window().as_millis() as i64;
    let mut fresh: Vec<AlertRecord> = Vec::new();
    // The caller's own look found the forgery: its alert is among the effects already.
    let looks = !alerts.iter().any(|a| a.kind == STATE_TAMPERED);
    let written = store.write(|tx| {
        fresh.clear();
        let mut alerts = alerts.clone();
        if let (Some(expect), Some(_), true) = (entry.expect, entry.after, looks)
            && let Some(changed) = changed_behind(ws::stored_state(tx, id)?.as_ref(), expect)
        {
            alerts.push(AlertRecord {
                id: 0,
                at_ms: now,
                severity: crate::milestone::Severity::Critical.as_str().into(),
                worker_id: Some(id.to_string()),
                repo: Some(entry.repo.to_string()),
                kind: STATE_TAMPERED.into(),
                message: tampered_message(id, &changed, expect.milestone),
                repeats: 1,
                resolved_ms: None,
            });
        }
        if let Some(after) = entry.after {
            match writer {
                Writer::Owner(pid) => {
                    if !ws::save_progress_as(tx, id, pid, after)? {
                        return Ok(Committed::NotOwner);
                    }
                }
                Writer::Operator => ws::save_progress(tx, id, after)?,
            }
        }
        // A worker whose exit is committed with its lock's release was stopped by orch (a
        // DONE, a cancel), not failing on its own.
        let stopped_by_orch = entry
            .effects
            .iter()
            .any(|e| matches!(e, Effect::ReleaseLock { .. } | Effect::Land));
        // The transition first: what happened with it (a worker stopped at DONE, its exit)
        // reads after it in the worker's history.
        for e in entry.effects {
            if let Effect::Transition { from, to, reason } = e {
                ws::add_event(
                    tx,
                    id,
                    "transition",
                    *to,
                    &format!("{from} -> {to}: {reason}{}", entry.note),
                )?;
            }
        }
        for fact in &entry.facts {
            record_fact(tx, id, milestone, fact, stopped_by_orch)?;
        }
        for e in entry.effects {
            record_effect(tx, entry, e, now)?;
        }
        // De-duplicated: a repeat within the window counts, and is neither sent nor
        // appended to alerts.jsonl again.
        for a in &alerts {
            if let crate::store::alerts::Recorded::New(new) =
                crate::store::alerts::record(tx, a, window_ms)?
            {
                // A deadlock indicator that fires is in the worker's timeline too (`logs`).
                if a.kind.starts_with("deadlock_") {
                    ws::add_event(tx, id, "deadlock", milestone, &a.message)?;
                }
                fresh.push(AlertRecord {
                    id: new,
                    ..a.clone()
                });
            }
        }
        if let Some(a) = entry.answer {
            ws::finish_request(tx, a.request, a.outcome, a.refused)?;
        }
        Ok(Committed::Written)
    })?;
    if written == Committed::Written {
        after_commit(store, state_dir, entry, &fresh);
    }
    Ok(written)
}

/// The alerts among `entry`'s effects, as records to write at `now`.
fn alert_records(entry: &Entry, now: i64) -> Vec<AlertRecord> {
    entry
        .effects
        .iter()
        .filter_map(|e| match e {
            Effect::Alert {
                severity,
                kind,
                message,
            } => Some(AlertRecord {
                id: 0,
                at_ms: now,
                severity: severity.as_str().into(),
                worker_id: Some(entry.worker.to_string()),
                repo: Some(entry.repo.to_string()),
                kind: kind.clone(),
                message: message.clone(),
                repeats: 1,
                resolved_ms: None,
            }),
            _ => None,
        })
        .collect()
}

/// Writes what effect `e` of `entry` leaves in the store (inside the entry's transaction).
fn record_effect(
    tx: &crate::store::sql::Tx,
    entry: &Entry,
    e: &Effect,
    now: i64,
) -> crate::store::sql::Result<()> {
    let (id, milestone) = (entry.worker, entry.milestone);
    match e {
        Effect::Transition { .. } => {}
        Effect::Violation { kind, detail } => {
            ws::add_event(tx, id, "violation", milestone, &format!("{kind}: {detail}"))?
        }
        Effect::ReleaseLock { reason } => {
            release_in(tx, id, Some(reason), Some(entry.by))?;
            ws::add_event(tx, id, "lock_released", milestone, reason)?;
        }
        Effect::Track { sha } => {
            let pushed = entry.after.and_then(|p| p.pushed_ms).unwrap_or(now);
            ws::record_push(tx, id, sha, pushed)?;
        }
        Effect::HoldChain { repo, reason } => {
            let held = match entry.graph {
                Some(g) => try_lock_in(
                    tx,
                    g,
                    repo,
                    &breakage_holder(id),
                    crate::lock::HolderKind::Hold,
                    Some(reason),
                    Some(entry.by),
                )?,
                None => LockAttempt::Blocked(Vec::new()),
            };
            let detail = match held {
                LockAttempt::Acquired(_) => format!("{repo}'s chain held: {reason}"),
                LockAttempt::Blocked(b) => format!(
                    "{repo}'s chain could not be held ({}): {reason}",
                    b.iter()
                        .map(|x| x.describe(repo))
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
            };
            ws::add_event(tx, id, "hold", milestone, &detail)?;
        }
        Effect::HoldFatal { reason } => {
            let hold = crate::store::fatal::FatalHold {
                repo: entry.repo.to_string(),
                reason: reason.clone(),
                by: format!("worker {id}"),
                worker_id: Some(id.to_string()),
                at_ms: now,
            };
            let detail = if crate::store::fatal::add(tx, &hold)? {
                format!("{}'s chain halted (FATAL): {reason}", entry.repo)
            } else {
                format!(
                    "{}'s chain was already halted (FATAL); this one too: {reason}",
                    entry.repo
                )
            };
            ws::add_event(tx, id, "fatal", milestone, &detail)?;
        }
        Effect::Landing { from, to, detail } => ws::add_event(
            tx,
            id,
            "landing",
            milestone,
            &format!("{from} -> {to}: {detail}{}", entry.note),
        )?,
        Effect::RestartCi { sha, why } => ws::add_event(
            tx,
            id,
            "ci_restart",
            milestone,
            &format!("CI for {} is stuck ({why}): restarted once", sha.short()),
        )?,
        Effect::Alert { .. } => {} // below, with the records built above
        Effect::ResolveAlert { kind } => {
            crate::store::alerts::resolve(tx, id, kind, now)?;
        }
        // The owning process's part: see `supervisor::Supervisor::apply`.
        Effect::StopWorker { .. }
        | Effect::Land
        | Effect::Reassign
        | Effect::SuspendWorker
        | Effect::ContinueWorker
        | Effect::Checkpoint => {}
    }
    Ok(())
}

/// The views written after `entry`'s commit — alerts.jsonl (its `fresh` alerts), the
/// checkpoint, the holds file — and the doorbells it rings.
fn after_commit(store: &mut Store, state_dir: &Path, entry: &Entry, fresh: &[AlertRecord]) {
    let id = entry.worker;
    crate::alerts::append_jsonl(state_dir, fresh);
    // A lock released or a state changed: a wave waiting to start its next task looks now.
    if entry.effects.iter().any(|e| {
        matches!(
            e,
            Effect::ReleaseLock { .. } | Effect::Transition { .. } | Effect::Landing { .. }
        )
    }) {
        crate::wake::ring_all(state_dir, crate::wake::Ring::Progress);
    }
    if entry.checkpoint || entry.effects.contains(&Effect::Checkpoint) {
        write_checkpoint(store, state_dir, id);
    }
    if entry
        .effects
        .iter()
        .any(|e| matches!(e, Effect::HoldChain { .. } | Effect::HoldFatal { .. }))
    {
        write_holds(store, state_dir);
    }
    if entry
        .effects
        .iter()
        .any(|e| matches!(e, Effect::HoldFatal { .. }))
    {
        // Every supervisor in the chain stops its worker at its next look: now.
        crate::wake::ring_all(state_dir, crate::wake::Ring::Inbox);
    }
}

fn record_fact(
    tx: &crate::store::sql::Tx,
    id: &str,
    milestone: Milestone,
    fact: &Fact,
    stopped_by_orch: bool,
) -> crate::store::sql::Result<()> {
    match fact {
        Fact::Push { sha, pushed_ms } => ws::record_push(tx, id, sha, *pushed_ms),
        Fact::Verdict { sha, row } => ws::record_verdict(tx, id, sha, *row),
        Fact::WorkerStarted { pid } => {
            ws::mark_worker_started(tx, id, *pid)?;
            ws::add_event(tx, id, "started", milestone, &format!("worker pid {pid}"))
        }
        Fact::WorkerExited { code } => {
            ws::mark_worker_exited(tx, id, *code)?;
            // Killed by a signal (no code, or a shell's 128+N) as the lock is released: orch's stop.
            if stopped_by_orch && code.is_none_or(|c| c > 128) {
                let how = code.map_or_else(String::new, |c| format!(" (exit code {c})"));
                return ws::add_event(
                    tx,
                    id,
                    "stopped",
                    milestone,
                    &format!("stopped by orch at {milestone}{how}"),
                );
            }
            let how = code.map_or_else(
                || "killed by a signal".to_string(),
                |c| format!("exit code {c}"),
            );
            ws::add_event(tx, id, "exited", milestone, &how)
        }
        Fact::WorkerStopped => ws::mark_worker_stopped(tx, id),
        Fact::Resumed {
            respawns,
            replacement_note,
            why,
            keep_lease,
        } => {
            if replacement_note.is_some() {
                ws::add_event(
                    tx,
                    id,
                    "respawn",
                    milestone,
                    &format!("replacement {respawns}: the previous worker ended because {why}"),
                )?;
            }
            ws::record_resumed(tx, id, *respawns, *replacement_note, *keep_lease)
        }
        Fact::Logged { kind, detail } => ws::add_event(tx, id, kind, milestone, detail),
    }
}

/// Writes the holds file (`checkpoint::HOLDS_FILE`) from the database's holds, after a commit
/// that took or released one (a view, like a checkpoint: best effort, logged when it fails).
///
/// Writers take turns (a lock file) and each reads the database inside its turn: two commands
/// that each read and then wrote could otherwise leave the older reading last — a file naming a
/// hold released since, which the damaged-database check then takes for lost contents.
pub fn write_holds(store: &mut Store, state_dir: &Path) {
    let turn = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(state_dir.join(HOLDS_TURN))
        .and_then(|f| {
            rustix::fs::flock(&f, rustix::fs::FlockOperation::LockExclusive)?;
            Ok(f)
        });
    if let Err(e) = &turn {
        tracing::warn!(error = %e, "could not take turns writing {}", crate::checkpoint::HOLDS_FILE);
    }
    let read = store.read(|tx| {
        Ok((
            crate::store::active_locks(tx)?,
            crate::store::fatal::all(tx)?,
        ))
    });
    match read {
        Ok((locks, fatal)) => {
            if let Err(e) = crate::checkpoint::write_holds(state_dir, &locks, &fatal) {
                tracing::error!(error = %e, "could not write {}", crate::checkpoint::HOLDS_FILE);
            }
        }
        Err(e) => tracing::error!(error = %e, "could not read the holds to checkpoint them"),
    }
    drop(turn);
}

/// The lock file writers of the holds file take turns on.
const HOLDS_TURN: &str = "holds.lock";

/// Writes the checkpoint file of `id` from the database's view of it (a view: best effort,
/// logged when it fails; the database stays the truth).
pub fn write_checkpoint(store: &mut Store, state_dir: &Path, id: &str) -> Option<String> {
    match checkpoint_of(store, id) {
        Ok(Some((w, cp))) => {
            if let Err(e) = crate::checkpoint::write(state_dir, &w, &cp) {
                tracing::error!(worker = %id, error = %e, "could not write checkpoint");
                // A file system that refuses writes is named with the file (the caller may
                // have to stop: see the supervisor's `stop_for_storage`).
                return crate::store::errno_name(&e).map(|errno| {
                    format!(
                        "{} writing {} ({errno})",
                        crate::store::errno_words(errno),
                        crate::checkpoint::path_for(state_dir, &w).display()
                    )
                });
            }
        }
        Ok(None) => {}
        Err(e) => {
            tracing::error!(worker = %id, error = %e, "could not read the worker for its checkpoint")
        }
    }
    None
}

/// Worker `id` and its checkpoint as the database has it now (what its file shows once
/// written); `None`: no such worker.
pub fn checkpoint_of(
    store: &mut Store,
    id: &str,
) -> Result<Option<(WorkerRecord, crate::checkpoint::Checkpoint)>, StoreError> {
    let read = store.read(|tx| {
        let Some(w) = ws::get_worker(tx, id)? else {
            return Ok(None);
        };
        Ok(Some((w, ws::pushes(tx, id)?, holds_lock(tx, id)?)))
    })?;
    Ok(read.map(|(w, pushes, held)| {
        let cp = crate::checkpoint::build(&w, &pushes, held);
        (w, cp)
    }))
}

#[cfg(test)]
mod tests;
