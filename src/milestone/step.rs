//! `step`: the transition function of the worker state machine. Pure: the same contract,
//! state, event and time always give the same state and effects.

use super::{Effect, Event, LandEvent, Milestone, Progress, Severity};
use crate::contract::Contract;
// `fix_timeout` counts a timed-out fix attempt as `ci` counts a red one.
use ci::escalate_if_due;

mod ci;
mod done;
mod fix_timeout;
mod operator;
mod pause;
mod process;
mod report;
mod timers;

fn violation(kind: &str, detail: String) -> Effect {
    Effect::Violation {
        kind: kind.to_string(),
        detail,
    }
}

fn alert(severity: Severity, kind: &str, message: String) -> Effect {
    Effect::alert(severity, kind, message)
}

/// Moves `p` to `to` if the contract allows it; otherwise records an illegal transition.
pub(super) fn transition(
    contract: &Contract,
    p: &mut Progress,
    to: Milestone,
    reason: &str,
    now: i64,
    fx: &mut Vec<Effect>,
) -> bool {
    let from = p.milestone;
    if !contract.allows(from.as_str(), to.as_str()) {
        fx.push(violation(
            "illegal_transition",
            format!("{from} -> {to} is not allowed by the contract ({reason})"),
        ));
        return false;
    }
    if to == Milestone::Paused {
        p.paused_from = Some(from);
    }
    if from == to {
        // A repeated milestone (progress note, new push) keeps its clock.
        p.last_progress_ms = now;
    } else {
        p.enter(contract, to, now);
        fx.push(Effect::Transition {
            from,
            to,
            reason: reason.to_string(),
        });
        fx.push(Effect::Checkpoint);
    }
    true
}

/// Applies one event. Pure: same inputs, same outputs.
pub fn step(
    contract: &Contract,
    worker: &str,
    state: &Progress,
    event: &Event,
    now: i64,
) -> (Progress, Vec<Effect>) {
    let (mut p, fx) = apply(contract, worker, state, event, now);
    // The whole-life clock runs in the states at work and stands still in the others,
    // whichever event moved the worker between them.
    p.life.follow(p.milestone.at_work(), now);
    (p, fx)
}

/// What every event is checked against first (a landing's, the worker's account, a moved DONE
/// branch, a finished worker), then one handler per family of events: the worker's word
/// (`report`), CI (`ci`), its process (`process`), the clocks (`timers`), an operator's
/// actions (`operator`), the chain's pauses and halts (`pause`), DONE's approval (`done`).
fn apply(
    contract: &Contract,
    worker: &str,
    state: &Progress,
    event: &Event,
    now: i64,
) -> (Progress, Vec<Effect>) {
    let mut p = state.clone();
    let mut fx = Vec::new();
    if let Event::Land(e) = event {
        // Landing goes on after DONE (the one terminal state with work left for orch).
        if p.landing_active()
            || (p.milestone == Milestone::Done && matches!(e, LandEvent::OnBase { .. }))
        {
            super::landing::step(&mut p, worker, e, now, &mut fx);
        }
        return (p, fx);
    }
    // The worker's account of its work moves nothing, and may come with (or just after) the
    // DONE orch already saw: kept in any state.
    match event {
        Event::Summary { text } => {
            p.summary = Some(text.clone());
            return (p, fx);
        }
        Event::Decision { text } => {
            if !p.decisions.contains(text) && p.decisions.len() < super::MAX_DECISIONS {
                p.decisions.push(text.clone());
            }
            return (p, fx);
        }
        _ => {}
    }
    if let Event::DoneBranchMoved { done, head } = event {
        done::done_branch_moved(contract, &mut p, worker, done, head.as_ref(), now, &mut fx);
        return (p, fx);
    }
    if p.milestone.is_terminal() {
        // Nothing moves a finished worker; say so when a worker keeps talking.
        if let Event::Claim { .. }
        | Event::Push { .. }
        | Event::DoneClaim { .. }
        | Event::DoneRefused { .. } = event
            && p.milestone != Milestone::Done
        {
            fx.push(violation(
                "after_terminal",
                format!("worker is already {}", p.milestone),
            ));
        }
        return (p, fx);
    }
    match event {
        Event::Output | Event::Commit => p.last_progress_ms = now,
        Event::Summary { .. } | Event::Decision { .. } => {}
        Event::Claim { .. }
        | Event::Push { .. }
        | Event::PushRejected { .. }
        | Event::DoneRefused { .. }
        | Event::DoneClaim { .. } => {
            report::on_report(contract, &mut p, worker, event, now, &mut fx)
        }
        Event::Approve { sha, by } => {
            done::approve(contract, &mut p, worker, sha, by, now, &mut fx)
        }
        Event::Verdict { .. } => ci::on_verdict(contract, &mut p, worker, event, now, &mut fx),
        Event::PermissionDenial { .. }
        | Event::WorkerExited { .. }
        | Event::AgentEnded { .. }
        | Event::QuickExit { .. }
        | Event::SpawnFailed { .. }
        | Event::Resumed { .. } => {
            process::on_process(contract, &mut p, worker, event, now, &mut fx)
        }
        Event::Tick => timers::tick(contract, &mut p, worker, now, &mut fx),
        Event::DeadlockCheck {
            worker_running,
            last_commit_ms,
            forge_failures,
        } => timers::deadlock(
            contract,
            &mut p,
            worker,
            *worker_running,
            *last_commit_ms,
            *forge_failures,
            now,
            &mut fx,
        ),
        Event::Cancel { .. } | Event::Fail { .. } | Event::Respawn { .. } => {
            operator::on_operator(contract, &mut p, worker, event, now, &mut fx)
        }
        Event::Pause { .. }
        | Event::Resume
        | Event::Unpaused { .. }
        | Event::Fatal { .. }
        | Event::FatalCleared { .. } => {
            pause::on_pause(contract, &mut p, worker, event, now, &mut fx)
        }
        Event::AgentWarning { kind, message } => {
            fx.push(alert(Severity::Warning, kind, message.clone()));
        }
        Event::Trespass { kind, message } => {
            fx.push(alert(Severity::Critical, kind, message.clone()));
        }
        Event::ForgeUnavailable { kind, message } => {
            fx.push(alert(Severity::Critical, kind, message.clone()));
        }
        Event::Land(_) | Event::DoneBranchMoved { .. } => {} // handled above
    }
    (p, fx)
}

/// The reason of the stop of a worker that reported BLOCKED (its processes killed at once).
pub const BLOCKED_STOP: &str = "blocked";

/// The reason of the hold a change touching protected paths is kept in (BLOCKED).
pub const HELD_STOP: &str = "held for approval";

fn block_permission(
    contract: &Contract,
    p: &mut Progress,
    worker: &str,
    why: &str,
    now: i64,
    fx: &mut Vec<Effect>,
) {
    if transition(contract, p, Milestone::BlockedPermission, why, now, fx) {
        p.end_reason = Some(format!("permission: {why}"));
        fx.push(Effect::StopWorker {
            immediate: true,
            reason: "permission denied".into(),
        });
        fx.push(alert(
            Severity::Critical,
            "blocked_permission",
            format!("worker {worker} ended on a permission failure ({why}); lock kept until an operator acts"),
        ));
    }
}

fn fail(
    contract: &Contract,
    p: &mut Progress,
    worker: &str,
    why: &str,
    kind: &str,
    now: i64,
    fx: &mut Vec<Effect>,
) {
    let next = format!(
        "orch stops its processes and keeps the lock until an operator acts (orch release {worker} --force --reason …)"
    );
    fail_then(contract, p, worker, why, kind, &next, now, fx);
}

/// FAILED, its alert saying what orch does `next` (the lock kept, or handed over).
#[allow(clippy::too_many_arguments)]
fn fail_then(
    contract: &Contract,
    p: &mut Progress,
    worker: &str,
    why: &str,
    kind: &str,
    next: &str,
    now: i64,
    fx: &mut Vec<Effect>,
) {
    let from = p.milestone;
    if transition(contract, p, Milestone::Failed, why, now, fx) {
        p.end_reason = Some(why.to_string());
        fx.push(Effect::StopWorker {
            immediate: false,
            reason: why.to_string(),
        });
        fx.push(alert(
            Severity::Critical,
            kind,
            format!("worker {worker} FAILED in {from}: {why}; {next}"),
        ));
    }
}
