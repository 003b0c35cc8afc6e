//! Carrying out one step of the state machine for the supervisor: the transition goes to the
//! journal in one transaction (with the facts observed beside it and the answer to the request
//! that caused it); then the effects only the worker's owner can carry out — stopping or
//! signalling its process group, following CI for a new SHA.

use super::journal::{self, Answer, Committed, Entry, Fact, Writer};
use super::worker::{Stop, reap_orphans};
use super::{Outcome, Supervisor};
use crate::forge::Forge;
use crate::milestone::{Effect, Event, step};
use crate::process::Signal;
use crate::store::{Store, now_ms};
use std::path::Path;

impl<F: Forge + 'static> Supervisor<'_, F> {
    /// Runs one event through the state machine, commits the result (with `facts` and the
    /// answer to `request`) through the journal, then carries out the effects only the
    /// worker's owner can: stopping or signalling its group, following CI for a new SHA.
    pub(super) fn apply(
        &mut self,
        event: Event,
        request: Option<i64>,
        facts: Vec<Fact>,
    ) -> Outcome {
        let before = self.w.progress.clone();
        let (after, effects) = step(self.env.contract, &self.w.id, &before, &event, now_ms());
        let outcome = outcome_of(&event, after != before, &effects);
        if effects.is_empty() && request.is_none() && facts.is_empty() {
            // Bookkeeping only (the time of the last progress, a repeated claim): written with
            // the next tick, so a worker repeating itself costs no write per line.
            self.books.dirty |= after != before;
            self.w.progress = after;
            return outcome;
        }
        // The permission rule's stop lands before anything is written: the group gets no more
        // time to act while SQLite and the checkpoint are busy. (stop_worker below reaps it.)
        if effects.iter().any(|e| {
            matches!(
                e,
                Effect::StopWorker {
                    immediate: true,
                    ..
                }
            )
        }) && let Some(w) = &self.worker
        {
            w.signal(Signal::KILL);
        }
        // Stop, then release: a step that releases the lock (DONE, a cancel) stops the worker's
        // group first, and its exit goes into the same transaction as the release. Until then
        // the lock — and the `max_parallel` slot — stays taken: no worker on a dependent
        // repository starts beside this one's processes.
        let mut facts = facts;
        if self.worker.is_some()
            && effects
                .iter()
                .any(|e| matches!(e, Effect::ReleaseLock { .. } | Effect::Land))
        {
            let how = effects
                .iter()
                .find_map(|e| match e {
                    Effect::StopWorker { immediate, reason } => Some(stop_how(*immediate, reason)),
                    _ => None,
                })
                .unwrap_or(Stop::Terminate);
            if let Some(fact) = self.end_worker(how) {
                facts.push(fact);
            }
        }
        let text = outcome.to_string();
        let mut entry = Entry::new(&self.w, "orch").step(&after, &effects);
        entry.graph = Some(&self.env.config.graph);
        entry.expect = Some(&self.written);
        entry.facts = facts;
        entry.answer = request.map(|r| Answer {
            request: r,
            outcome: &text,
            refused: outcome.is_refusal(),
        });
        // A transition is committed before anything acts on it: a database out of reach is
        // waited for (the entry tried again whole), never skipped — a supervisor that stopped
        // its worker for a BLOCKED the database never heard of would leave resume the older
        // state to act on.
        // While it waits the worker's group is held still (unless a pause or a DONE judgement
        // holds it already): no permission rule, timeout or cancel can act meanwhile, and an
        // agent left running unsupervised would go on spending.
        let hold = (!self.ci.frozen && before.milestone != crate::milestone::Milestone::Paused)
            .then_some(self.worker.as_ref())
            .flatten();
        match commit_lasting(
            &mut self.store,
            self.env.state_dir,
            &entry,
            &mut self.storage_failure,
            hold,
        ) {
            Some(Committed::NotOwner) => {
                // Another supervisor owns the worker now (this one's lease expired): its state
                // is not ours to change, nor its worker ours to act on.
                self.lease.lost = true;
                return Outcome::LeaseLost;
            }
            Some(Committed::Written) => self.written = after.clone(),
            None => {}
        }
        self.w.progress = after;
        self.books.dirty = false;
        if effects.iter().any(|e| matches!(e, Effect::Alert { .. })) {
            self.io.deliverer.poke();
        }
        if effects.contains(&Effect::Checkpoint) {
            self.books.last_checkpoint_ms = now_ms();
        }
        for e in &effects {
            match e {
                Effect::Transition { from, to, reason } => {
                    tracing::info!(worker = %self.w.id, "{from} -> {to}: {reason}");
                }
                Effect::StopWorker { immediate, reason } => {
                    tracing::info!(worker = %self.w.id, reason, "stopping worker");
                    self.stop_worker(stop_how(*immediate, reason));
                }
                Effect::SuspendWorker => self.pause_worker(),
                Effect::ContinueWorker => self.continue_worker(),
                Effect::Track { sha } => {
                    if let Some(old) = &before.tracked_sha
                        && old != sha
                    {
                        self.ci.follower.forget(&self.w.repo, old);
                        // Its record still wants its verdict (the history `sessions show`
                        // and the checkpoint tell): asked once more when the link is idle.
                        if !before.verdict.is_some_and(|v| v.is_terminal()) {
                            self.ci.replaced.push(old.clone());
                        }
                    }
                    self.ci.next_poll_ms = 0;
                }
                Effect::Land => self.land.next_land_ms = 0,
                Effect::RestartCi { sha, .. } => self.restart_ci(sha),
                // After StopWorker (effects in order): no process of this worker is left.
                Effect::Reassign => self.reassign_task(),
                // Durable effects: carried out by the journal.
                Effect::Landing { .. }
                | Effect::HoldChain { .. }
                | Effect::HoldFatal { .. }
                | Effect::Violation { .. }
                | Effect::Alert { .. }
                | Effect::ResolveAlert { .. }
                | Effect::ReleaseLock { .. }
                | Effect::Checkpoint => {}
            }
        }
        outcome
    }

    /// The worker timed out FAILED with its task to be reassigned: a new worker takes the task
    /// and the chain lock over, told this one's checkpoint (`app::reassign`); recorded either way.
    pub(super) fn reassign_task(&mut self) {
        if self.worker.is_some() {
            // Never beside this worker's processes (the step stops them first).
            self.stop_worker(Stop::Terminate);
        }
        // Its record as committed (and its checkpoint) is what the new worker is told.
        if self.books.dirty {
            self.persist_progress();
        }
        let loaded = crate::app::Loaded {
            config: self.env.config.clone(),
            contract: self.env.contract.clone(),
            state_dir: self.env.state_dir.to_path_buf(),
            config_path: self.env.config_path.to_path_buf(),
            contract_path: self.env.contract_path.to_path_buf(),
        };
        let detail = match crate::app::reassign::reassign(
            &loaded,
            &mut self.store,
            &self.w.id,
            crate::app::reassign::By::Supervisor,
        ) {
            Ok(rec) => format!("task reassigned to worker {}", rec.id),
            Err(e) => format!("task not reassigned: {e}; the lock stays for an operator"),
        };
        tracing::info!(worker = %self.w.id, "{detail}");
        self.record(vec![Fact::Logged {
            kind: "reassign",
            detail,
        }]);
    }

    /// Records facts alone (no event for the machine).
    pub(super) fn record(&mut self, facts: Vec<Fact>) {
        let mut entry = Entry::new(&self.w, "orch");
        entry.facts = facts;
        let _ = commit(
            &mut self.store,
            self.env.state_dir,
            &entry,
            &mut self.storage_failure,
        );
    }

    /// Answers a request that no transition answered.
    pub(super) fn answer(&mut self, request: i64, outcome: &Outcome) {
        let text = outcome.to_string();
        let mut entry = Entry::new(&self.w, "orch");
        entry.answer = Some(Answer {
            request,
            outcome: &text,
            refused: outcome.is_refusal(),
        });
        let _ = commit(
            &mut self.store,
            self.env.state_dir,
            &entry,
            &mut self.storage_failure,
        );
    }

    /// Ends the worker's process group: at once (SIGKILL) or politely (SIGTERM → grace →
    /// SIGKILL).
    pub(super) fn stop_worker(&mut self, how: Stop) {
        if let Some(fact) = self.end_worker(how) {
            self.record(vec![fact]);
        }
    }

    /// Stops the worker's group and waits until it is gone; the fact to record (None: there
    /// was no worker).
    fn end_worker(&mut self, how: Stop) -> Option<Fact<'static>> {
        let worker = self.worker.take()?;
        let code = worker.stop(how, self.env.config.worker.stop_grace);
        reap_orphans(None);
        self.ci.frozen = false;
        Some(self.worker_gone(code))
    }

    /// The worker process is gone (exit `code`): what the supervisor knows of it, and the
    /// fact to record.
    pub(super) fn worker_gone(&mut self, code: Option<i32>) -> Fact<'static> {
        self.worker = None;
        self.w.worker_running = false;
        self.w.exit_code = code.map(i64::from);
        Fact::WorkerExited { code }
    }

    /// Cascade pause: the worker's whole tree stopped (state `T`), its cgroup frozen where it
    /// has one; the guard goes on.
    pub(super) fn pause_worker(&mut self) {
        if let Some(w) = &self.worker {
            w.pause();
        }
    }

    /// The pause lifted: the tree goes on, unless a DONE claim is being judged (then the
    /// judgement thaws it).
    pub(super) fn continue_worker(&mut self) {
        if !self.ci.frozen
            && let Some(w) = &self.worker
        {
            w.unpause();
        }
    }

    /// Writes bookkeeping progress that no transition wrote.
    pub(super) fn persist_progress(&mut self) {
        if self.check_own_row() {
            return; // its alert's commit wrote this state back
        }
        let mut entry = Entry::new(&self.w, "orch").step(&self.w.progress, &[]);
        entry.expect = Some(&self.written);
        match commit(
            &mut self.store,
            self.env.state_dir,
            &entry,
            &mut self.storage_failure,
        ) {
            Some(Committed::Written) => {
                self.books.dirty = false;
                self.written = self.w.progress.clone();
            }
            Some(Committed::NotOwner) => {
                self.books.dirty = false;
                self.lease.lost = true;
            }
            None => {} // tried again with the next tick
        }
    }

    pub(super) fn checkpoint(&mut self) {
        self.books.last_checkpoint_ms = now_ms();
        if let Some(why) =
            journal::write_checkpoint(&mut self.store, self.env.state_dir, &self.w.id)
        {
            self.storage_failure.get_or_insert(why);
        }
    }
}

/// How a `StopWorker` effect stops the group. DONE kills at once: the worker is frozen while
/// its claim is judged, and any time it ran after the judgement could be a push the DONE does
/// not cover (a worker that printed DONE had `DONE_EXIT_GRACE` to exit by itself first). So
/// does a DONE held for an operator's approval: the approval is of the commit judged. A
/// worker that reported BLOCKED is paused at once (`blocking: pause_and_escalate`): it gets
/// `BLOCKED_EXIT_GRACE` to exit by itself (a worker whose last word that was), then its whole
/// tree is killed — never a SIGTERM it could answer with `worker.stop_grace` of work (a push).
/// Its worktree and conversation are what `orch respawn` continues from.
fn stop_how(immediate: bool, reason: &str) -> Stop {
    if immediate || reason == "done" || reason == crate::milestone::HELD_STOP {
        Stop::Kill
    } else if reason == crate::milestone::BLOCKED_STOP {
        Stop::KillAfter(super::BLOCKED_EXIT_GRACE)
    } else {
        Stop::Terminate
    }
}

/// What a claim or request came to: the last transition or refusal among the effects; else
/// taken when it changed something or was a claim, nothing otherwise.
fn outcome_of(event: &Event, changed: bool, effects: &[Effect]) -> Outcome {
    let decisive = effects.iter().rev().find_map(|e| match e {
        Effect::Transition { from, to, .. } => Some(Outcome::Moved {
            from: *from,
            to: *to,
        }),
        Effect::Violation { kind, detail } => Some(Outcome::Refused {
            kind: kind.clone(),
            detail: detail.clone(),
        }),
        _ => None,
    });
    decisive.unwrap_or(
        if changed
            || !effects.is_empty()
            || matches!(event, Event::Claim { .. } | Event::Push { .. })
        {
            Outcome::Accepted
        } else {
            Outcome::NoChange
        },
    )
}

/// How long a transition waits for a database out of reach before the supervisor gives up its
/// worker (as when its lease is taken over): the entry is retried whole meanwhile. A worker
/// left that long unrecorded is resume's to take over, from the state the database has.
const UNREACHABLE_PATIENCE: std::time::Duration = std::time::Duration::from_secs(300);

/// [`commit`], waiting out a database out of reach (PostgreSQL restarted, the network cut):
/// the same entry until it is written, refused by the fence (`NotOwner`: someone else holds
/// the worker now), or `UNREACHABLE_PATIENCE` has passed — then `NotOwner` too, so the
/// supervisor stops its worker rather than act on a transition nobody can see.
fn commit_lasting(
    store: &mut Store,
    state_dir: &Path,
    entry: &Entry,
    failed: &mut Option<String>,
    hold: Option<&super::worker::WorkerProcess>,
) -> Option<Committed> {
    let mut waited = false;
    let result = crate::store::StoreError::outlast(UNREACHABLE_PATIENCE, || {
        if waited && let Some(c) = landed(store, entry) {
            // The commit before made it, only its acknowledgement was lost: written again,
            // its own state would look like a forgery (and its events would be twice).
            return Ok(c);
        }
        let r = journal::commit(store, state_dir, Writer::me(), entry);
        if r.as_ref().is_err_and(|e| e.is_unreachable()) && !waited {
            waited = true;
            tracing::warn!(worker = %entry.worker, "the database is out of reach: the transition waits for it, the worker held still");
            if let Some(w) = hold {
                w.pause();
            }
        }
        r
    });
    if waited && let Some(w) = hold {
        w.unpause();
    }
    match result {
        Ok(c) => Some(c),
        Err(e) if e.is_unreachable() => {
            tracing::error!(worker = %entry.worker, error = %e, "the database stayed out of reach: giving the worker up to whoever resumes it");
            Some(Committed::NotOwner)
        }
        Err(e) => {
            not_persisted(entry, &e, failed);
            None
        }
    }
}

/// Whether `entry`'s state is the stored one already: a commit whose acknowledgement was lost
/// (the session cut after the server made it durable). Only a step that changes the state can
/// tell (`None` otherwise, and on any error: then the entry is tried again).
fn landed(store: &mut Store, entry: &Entry) -> Option<Committed> {
    let (after, expect) = (entry.after?, entry.expect?);
    if after == expect {
        return None;
    }
    let stored = store
        .read(|tx| crate::store::workers::stored_state(tx, entry.worker))
        .ok()?;
    journal::changed_behind(stored.as_ref(), after)
        .is_none()
        .then_some(Committed::Written)
}

/// Commits a supervisor's entry as the holder of the worker's lease; a failed write is logged
/// (`None`) and the supervisor goes on (bookkeeping is written again with the next tick) —
/// unless the state cannot be written at all (full, read-only, damaged): then `failed` says
/// why, and the loop stops (`Supervisor::stop_for_storage`).
fn commit(
    store: &mut Store,
    state_dir: &Path,
    entry: &Entry,
    failed: &mut Option<String>,
) -> Option<Committed> {
    journal::commit(store, state_dir, Writer::me(), entry)
        .inspect_err(|e| not_persisted(entry, e, failed))
        .ok()
}

/// A failed commit logged; `failed` says why when the state cannot be written at all.
fn not_persisted(entry: &Entry, e: &crate::store::StoreError, failed: &mut Option<String>) {
    tracing::error!(worker = %entry.worker, error = %e, "could not persist worker state");
    if let Some(why) = super::storage::unwritable(e) {
        failed.get_or_insert(why);
    }
}
