//! Reassignment (the contract's `on_timeout_actions.escalate.reassign_task`: "Critical path,
//! spawn new worker"): a stopped worker's task goes to a new worker, told the previous one's
//! checkpoint. Three ways in: a milestone timeout with `on_timeout: reassign` or on a wave's
//! critical path (its supervisor, once the worker's processes are gone), `orch respawn` of a
//! FAILED worker (an operator), and `orch wave retry` (the next tick's start of the task).
//!
//! The chain lock is never dropped on the way: a previous worker that still holds it hands it
//! over inside the new worker's lock transaction (`SpawnRequest::take_over`); one whose lock
//! was released (an operator's `release --force`) is replaced only if the chain can be taken
//! again, all or nothing, as any spawn.

use super::Loaded;
use super::journal;
use super::spawn::{SpawnRequest, Spawned, prepare};
use crate::checkpoint::Checkpoint;
use crate::store::workers::{self as ws, WorkerRecord};
use crate::store::{Store, now_ms};

/// What the new worker is told of the one before it (rendered into its prompt): who it was,
/// why it stopped, and its checkpoint — summary, commits, files, CI — with where its pushed
/// work is.
pub fn handoff(state_dir: &std::path::Path, old: &WorkerRecord, cp: &Checkpoint) -> String {
    let why = old
        .progress
        .end_reason
        .clone()
        .unwrap_or_else(|| "no reason recorded".into());
    let mut s = format!(
        "REASSIGNED: you take this task over from worker {} ({}: {why}). Its checkpoint ({}):\n",
        old.id,
        cp.current_milestone,
        crate::checkpoint::path_for(state_dir, old).display()
    );
    s.push_str(&format!("- summary: {}\n", cp.context_summary));
    if let Some(said) = &cp.worker_summary {
        s.push_str(&format!("- it said: {}\n", crate::text::escape(said)));
    }
    for d in &cp.decisions_made {
        s.push_str(&format!("- its decision: {}\n", crate::text::escape(d)));
    }
    let shorts: Vec<&str> = cp.commits.iter().map(|c| crate::sha::short(c)).collect();
    s.push_str(&format!(
        "- commits: {}; files modified: {}\n",
        if shorts.is_empty() {
            "none".to_string()
        } else {
            shorts.join(", ")
        },
        if cp.files_modified.is_empty() {
            "none".to_string()
        } else {
            cp.files_modified.join(", ")
        }
    ));
    if let Some(ci) = cp.ci_runs.last() {
        s.push_str(&format!(
            "- last CI: {} {}{}\n",
            crate::sha::short(&ci.sha),
            ci.verdict.as_deref().unwrap_or("pending"),
            if ci.jobs_failed.is_empty() {
                String::new()
            } else {
                format!(" (failed: {})", ci.jobs_failed.join(", "))
            }
        ));
    }
    if cp.tracked_sha.is_some() {
        s.push_str(&format!(
            "Its pushed work is branch {} on remote {} (`git fetch {} {}`): build on it or start again, as its state suggests.\n",
            old.branch, old.remote, old.remote, old.branch
        ));
    }
    s
}

/// The spawn of `old`'s task for a new worker told `handoff`: the same task, repository,
/// component, plan, landing and model; the reassignments counted on.
pub fn request(old: &WorkerRecord, handoff: String) -> SpawnRequest {
    SpawnRequest {
        repo: old.repo.clone(),
        task: old.task.clone(),
        task_id: old.task_id.clone(),
        component: old.component.clone(),
        plan: old.plan.clone(),
        take_over: None,
        handoff: Some(handoff),
        land: old.progress.landing.as_ref().map(|l| l.policy),
        model: crate::config::model::ModelChoice::recorded(
            old.model.as_deref(),
            old.model_source.as_deref(),
        ),
        reassignments: old.progress.reassignments + 1,
        reassign_on_timeout: old.progress.reassign_on_timeout,
    }
}

/// Whether `w` is a stopped worker whose task may go to a new worker: FAILED (its DONE or
/// CANCELLED task has nothing left to do, and a BLOCKED one is respawned in place).
pub fn reassignable(w: &WorkerRecord) -> bool {
    w.milestone() == crate::milestone::Milestone::Failed && !w.progress.landing_active()
}

/// Why `old`'s task may not go to a new worker, if it may not: not FAILED (or landing), its
/// task reassigned already (once: that worker or its successors have it), or another attempt
/// superseded it (`orch wave retry`, a later worker that did the task) — a second copy of the
/// task otherwise.
pub fn refusal_in(
    tx: &crate::store::sql::Tx,
    old: &WorkerRecord,
) -> crate::store::sql::Result<Option<super::Error>> {
    use super::Error;
    if !reassignable(old) {
        return Ok(Some(Error::No(format!(
            "{} is {}: only a FAILED worker's task is reassigned",
            old.id,
            old.milestone()
        ))));
    }
    if let Some(e) = ws::worker_events(tx, &old.id)?
        .into_iter()
        .rfind(|e| e.kind == "reassigned")
    {
        return Ok(Some(Error::No(format!(
            "{}: its {}",
            old.id,
            crate::text::escape(&e.detail)
        ))));
    }
    super::relive::refuse_superseded(tx, old, "reassigned")
}

/// Who reassigns a task.
#[derive(Debug, Clone, Copy)]
pub enum By<'a> {
    /// The previous worker's own supervisor, at its timeout (it holds the worker's lease,
    /// and its processes are gone): within `worker.max_respawns`.
    Supervisor,
    /// An operator (`orch respawn`), with a note for the new worker: the worker must be one
    /// nobody supervises; the operator's word is not bounded by `worker.max_respawns`.
    Operator { name: &'a str, note: &'a str },
}

/// Hands worker `old_id`'s task to a new worker (see the module's comment); returns the new
/// worker once its supervisor has taken it over. Refused (the reason) when `old_id` is not a
/// FAILED worker, is supervised by another, when the task's lives are used up (orch's own
/// reassignment), and when the chain cannot be taken.
pub fn reassign(
    l: &Loaded,
    store: &mut Store,
    old_id: &str,
    by: By,
) -> Result<WorkerRecord, super::Error> {
    use super::Error;
    let Some((old, cp)) = journal::checkpoint_of(store, old_id)? else {
        return Err(Error::Refused(format!("no worker {old_id}")));
    };
    if let Some(e) = store.read(|tx| refusal_in(tx, &old))? {
        return Err(e);
    }
    let (by, note) = match by {
        By::Supervisor => ("orch", ""),
        By::Operator { name, note } => {
            if old.supervised(now_ms()) {
                return Err(Error::No(format!(
                    "{old_id} is still held by process {}",
                    old.supervisor_pid.unwrap_or_default()
                )));
            }
            (name, note)
        }
    };
    let max = l.config.worker.max_respawns;
    if by == "orch" && old.progress.reassignments >= max {
        return Err(Error::No(format!(
            "task of {old_id} reassigned {} time(s) already (worker.max_respawns {max}); an operator may still `orch respawn {old_id}`",
            old.progress.reassignments
        )));
    }
    let mut told = handoff(&l.state_dir, &old, &cp);
    if !note.is_empty() {
        told = format!("An operator ({by}) says: {note}\n{told}");
    }
    let mut req = request(&old, told);
    // Its lock, if it still holds one, is handed over in the new worker's lock transaction.
    if cp.lock_held {
        req.take_over = Some(old.id.clone());
    }
    let rec = match prepare(&l.config, &l.contract, &l.state_dir, store, &req)
        .map_err(|e| Error::Refused(e.to_string()))?
    {
        Spawned::Ready(rec) => rec,
        Spawned::Blocked(b) => {
            return Err(Error::No(format!(
                "task of {old_id} not reassigned: its chain is locked ({})",
                b.iter()
                    .map(|x| x.describe(&old.repo))
                    .collect::<Vec<_>>()
                    .join("; ")
            )));
        }
        Spawned::AtCapacity(full) => {
            return Err(Error::No(format!(
                "task of {old_id} not reassigned: {}",
                full.describe()
            )));
        }
    };
    let detail = format!(
        "{}{} by {by}",
        crate::store::supersede::REASSIGNED_TO,
        rec.id
    );
    store.write(|tx| {
        // A wave's task follows its new worker (as a conflict's replacement does).
        crate::store::waves::relink_task_worker(tx, &old.id, &rec.id, now_ms())?;
        ws::add_event(tx, &old.id, "reassigned", old.milestone(), &detail)
    })?;
    journal::write_checkpoint(store, &l.state_dir, &old.id);
    crate::checkpoint::waves::save_of_worker(store, &l.state_dir, &rec.id);
    super::start_detached(l, &rec.id)?;
    super::wait_taken_over(store, &rec.id);
    Ok(*rec)
}
