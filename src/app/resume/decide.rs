//! The reconcile decision, pure: from an orphaned worker's state, what its remote shows and
//! what CI says, to the events that move it and what happens next (the contract's
//! CHECKPOINTING.resumption):
//!
//! | CI of the last pushed SHA        | the worker becomes                      | action    |
//! |----------------------------------|-----------------------------------------|-----------|
//! | green, the worker's word given   | DONE, lock released (landing follows)    | done      |
//! | green, no word (died mid-turn)   | PUSHED_TO_CI, a replacement finishes     | respawned |
//! | red                              | FIXING_CI, a replacement fixes it        | respawned |
//! | pending / running / unknown      | PUSHED_TO_CI: a new supervisor follows   | following |
//! |                                  | (the worker ended its turn), else a      | respawned |
//! |                                  | replacement goes on beside CI            |           |
//! | sync_not_done / no_run           | FIXING_CI, a replacement pushes again    | respawned |
//! | nothing pushed                   | WORKING, a replacement continues         | respawned |
//! | any replacement past the limit   | FAILED, lock kept for an operator        | failed    |
//! | FIXING_CI attempts exhausted     | FAILED                                   | failed    |
//!
//! A push the dead worker made but never reported counts as reported. A worker whose
//! supervisor died while it was PAUSED is first taken back to where it was.

use crate::ci::verdict::VerdictKind;
use crate::contract::Contract;
use crate::milestone::{Channel, Effect, Event, Milestone, Progress, step};
use crate::sha::{Sha, short};
use crate::store::workers::WorkerRecord;
use serde::Serialize;

/// What happens to a worker after it is reconciled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// CI proved it DONE.
    Done,
    /// A replacement worker continues its work.
    Respawned,
    /// A new supervisor follows CI for its pushed SHA.
    Following,
    /// It ends FAILED (replacements or fix attempts exhausted).
    Failed,
    /// It stays as it is (e.g. BLOCKED, waiting for an operator).
    Unchanged,
}

impl Action {
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Done => "done",
            Action::Respawned => "respawned",
            Action::Following => "following",
            Action::Failed => "failed",
            Action::Unchanged => "unchanged",
        }
    }

    /// Someone goes on supervising the worker (so the resumer keeps its lease for them).
    pub fn continues(self) -> bool {
        matches!(self, Action::Respawned | Action::Following)
    }
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// CI's answer for the SHA a resumer asked about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenVerdict {
    pub sha: Sha,
    pub kind: VerdictKind,
    pub failed_jobs: Vec<String>,
    pub detail: String,
}

/// What a resumer knows about one orphan.
#[derive(Debug, Clone)]
pub struct Case<'a> {
    pub worker: &'a str,
    pub progress: &'a Progress,
    pub respawns: i64,
    pub max_respawns: u32,
    /// A push on the worker's remote branch that it never reported: (SHA, push time).
    pub unreported_push: Option<(Sha, i64)>,
    /// The protected files the unreported push's change touches (see `Progress::protected`).
    pub unreported_protected: Vec<String>,
    /// The secrets the unreported push's commits add (see `Progress::secrets`).
    pub unreported_secrets: Vec<String>,
    /// CI for the tracked (or newly found) SHA; `None` when nothing was pushed or the forge
    /// could not be read.
    pub verdict: Option<SeenVerdict>,
    /// Why the previous worker is gone.
    pub why: &'a str,
}

#[derive(Debug, Clone)]
pub struct Decision {
    pub events: Vec<Event>,
    pub progress: Progress,
    pub effects: Vec<Effect>,
    pub action: Action,
    /// Replacements after this one (one more when this decision starts a replacement).
    pub respawns: i64,
}

/// Decides one orphan's fate. Pure: the same case and time give the same decision.
pub fn decide(contract: &Contract, case: &Case, now: i64) -> Decision {
    let mut d = Decision {
        events: Vec::new(),
        progress: case.progress.clone(),
        effects: Vec::new(),
        action: Action::Unchanged,
        respawns: case.respawns,
    };
    let apply = |d: &mut Decision, event: Event| {
        let (p, fx) = step(contract, case.worker, &d.progress, &event, now);
        d.progress = p;
        d.effects.extend(fx);
        d.events.push(event);
    };
    // A worker whose supervisor died while it was PAUSED goes back to where it was; its new
    // supervisor watches the upstream again (and pauses it anew while it is red).
    if d.progress.milestone == Milestone::Paused {
        let unpaused = Event::Unpaused {
            reason: "its supervisor died while it was paused; a new one checks the upstream again"
                .into(),
        };
        apply(&mut d, unpaused);
    }
    if let Some((sha, pushed_ms)) = &case.unreported_push {
        let push = Event::Push {
            sha: sha.clone(),
            pushed_ms: *pushed_ms,
            via: Channel::Output,
            protected: case.unreported_protected.clone(),
            secrets: case.unreported_secrets.clone(),
        };
        apply(&mut d, push);
    }
    if let Some(v) = &case.verdict {
        let verdict = Event::Verdict {
            sha: v.sha.clone(),
            kind: v.kind,
            failed_jobs: v.failed_jobs.clone(),
            detail: v.detail.clone(),
            jobs: None,
        };
        apply(&mut d, verdict);
    }
    // A pushed SHA whose sync job did not run (or that never got a run) needs a new push:
    // that is work for a replacement, counted as a fix attempt.
    if d.progress.milestone == Milestone::PushedToCi
        && matches!(
            d.progress.verdict,
            Some(VerdictKind::SyncNotDone | VerdictKind::NoRun)
        )
    {
        let claim = Event::Claim {
            milestone: Milestone::FixingCi,
            note: "resume: a new push is needed".into(),
            via: Channel::Report,
        };
        apply(&mut d, claim);
    }
    d.action = match d.progress.milestone {
        // DONE with its change still to land: a new supervisor lands it.
        Milestone::Done if d.progress.landing_active() => Action::Following,
        Milestone::Done => Action::Done,
        Milestone::Failed => Action::Failed,
        // Its worker ended its turn: CI alone is awaited. Else the worker died mid-turn
        // (green or not, DONE needs its word): a replacement finishes the task.
        Milestone::PushedToCi if d.progress.turn_ended => Action::Following,
        Milestone::PushedToCi => Action::Respawned,
        Milestone::Working | Milestone::FixingCi => Action::Respawned,
        _ => Action::Unchanged,
    };
    if d.action == Action::Respawned {
        if d.respawns >= case.max_respawns as i64 {
            let fail = Event::Fail {
                kind: "respawns_exhausted".into(),
                reason: format!(
                    "respawns exhausted ({} of {}); last: {}",
                    d.respawns, case.max_respawns, case.why
                ),
            };
            apply(&mut d, fail);
            d.action = Action::Failed;
        } else {
            d.respawns += 1;
        }
    }
    if d.action.continues() {
        // Fresh timers for the milestone; a replacement starts with a clean slate.
        let resumed = Event::Resumed {
            replacement: d.action == Action::Respawned,
        };
        apply(&mut d, resumed);
    }
    d
}

/// Why the previous worker is gone, in words a replacement can use.
///
/// A supervisor that ends normally gives its lease up (expiry 0); one that died (killed,
/// crashed) leaves it to run out. Only the second is said to have died.
pub fn why_ended(w: &WorkerRecord) -> String {
    if let Some(r) = &w.progress.end_reason {
        return r.clone();
    }
    let stopped = w.lease_until_ms == Some(0);
    let supervisor = match w.supervisor_pid {
        Some(pid) => format!("its supervisor (pid {pid})"),
        None => "its supervisor".to_string(),
    };
    let ended = if stopped { "stopped" } else { "died" };
    if w.worker_running {
        return format!("{supervisor} {ended} while it was running");
    }
    match (w.exit_code, &w.progress.tracked_sha) {
        (Some(c), _) => format!("it exited with code {c} before finishing"),
        // Killed by a signal (no exit code) after it had started.
        (None, _) if w.worker_pid.is_some() => {
            format!("it was stopped by a signal before finishing ({supervisor} {ended})")
        }
        // A supervisor that only followed CI for a pushed SHA had no worker to lose.
        (None, Some(sha)) => format!(
            "orch was following CI for {} with no worker running when {supervisor} {ended}",
            sha.short()
        ),
        (None, None) if stopped => format!("{supervisor} stopped before starting it"),
        (None, None) => "it was never started (the spawning process died)".into(),
    }
}

/// What replacement number `n` is told (rendered into its prompt's {{resume}}), from the
/// state it inherits and the commits and files on its branch.
pub fn resume_note(
    p: &Progress,
    why: &str,
    n: i64,
    max_respawns: u32,
    commits: &[String],
    files: &[String],
) -> String {
    let mut s = format!(
        "RESUMING as replacement worker {n} of {max_respawns}: the previous worker ended because {why}.\n"
    );
    if commits.is_empty() {
        s.push_str("Work so far: no commits on your branch yet.\n");
    } else {
        let shorts: Vec<&str> = commits.iter().map(|c| short(c)).collect();
        s.push_str(&format!(
            "Work so far: {} commit(s) on your branch ({}); files: {}.\n",
            commits.len(),
            shorts.join(", "),
            if files.is_empty() {
                "-".into()
            } else {
                files.join(", ")
            }
        ));
    }
    let missing = match (&p.tracked_sha, p.verdict) {
        (None, _) => "push your work and report PUSHED_TO_CI".to_string(),
        (Some(sha), Some(VerdictKind::Red)) => format!(
            "CI is red for {} (failing: {}): fix it, push, report PUSHED_TO_CI",
            sha.short(),
            if p.failed_jobs.is_empty() {
                "see orch ci status".into()
            } else {
                p.failed_jobs.join(", ")
            }
        ),
        (Some(sha), Some(VerdictKind::SyncNotDone)) => format!(
            "{} for {}: push a new commit (an empty commit is fine) and report PUSHED_TO_CI",
            p.verdict_detail
                .clone()
                .unwrap_or_else(|| "the sync job did not succeed".into()),
            sha.short()
        ),
        (Some(sha), Some(VerdictKind::NoRun)) => format!(
            "no push-triggered CI run appeared for {}: push again and report PUSHED_TO_CI",
            sha.short()
        ),
        (Some(sha), Some(VerdictKind::Green)) => format!(
            "CI is green for {}: finish the task if anything is left (push, report PUSHED_TO_CI), then report DONE",
            sha.short()
        ),
        (Some(sha), v) => format!(
            "CI for {} is {}: continue, push fixes if needed, report PUSHED_TO_CI",
            sha.short(),
            v.map(VerdictKind::as_str).unwrap_or("unknown")
        ),
    };
    s.push_str(&format!(
        "Last CI: {}.\nStill missing: {missing}.\n",
        p.verdict.map(VerdictKind::as_str).unwrap_or("none")
    ));
    s
}

#[cfg(test)]
mod tests;
