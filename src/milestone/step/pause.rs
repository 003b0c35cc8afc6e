//! The chain's pauses and halts: a red upstream pauses a worker at work and its going green
//! again resumes it; a FATAL halts every worker of the chain until an operator clears it.

use super::super::{Effect, Event, Milestone, Progress, Severity};
use super::ci::count_fix_attempt;
use super::done::finish_done;
use super::{alert, transition};
use crate::ci::verdict::VerdictKind;
use crate::contract::Contract;

// A transition's effects stay in the arm of its event: as a match guard they would be
// carried out while the event is matched.
#[allow(clippy::collapsible_match)]
pub(super) fn on_pause(
    contract: &Contract,
    p: &mut Progress,
    worker: &str,
    event: &Event,
    now: i64,
    fx: &mut Vec<Effect>,
) {
    match event {
        Event::Pause { reason } => {
            let from = p.milestone;
            // Only a worker at work is paused; BLOCKED ones wait for an operator anyway.
            if matches!(
                from,
                Milestone::Working | Milestone::PushedToCi | Milestone::FixingCi
            ) {
                let clock = super::super::PausedClock {
                    elapsed_ms: now - p.since_ms,
                    left_ms: p.deadline_ms.map(|d| (d - now).max(0)),
                    warned: p.warned,
                    extended: p.extended,
                };
                if transition(contract, p, Milestone::Paused, reason, now, fx) {
                    p.deadline_ms = None;
                    p.paused_clock = Some(clock);
                    fx.push(Effect::SuspendWorker);
                    fx.push(alert(
                        Severity::Warning,
                        "paused",
                        format!(
                            "worker {worker} paused in {from}: {reason}; its processes are stopped and its timers frozen until the upstream is green again"
                        ),
                    ));
                }
            }
        }
        Event::Resume => unpause(contract, p, worker, "upstream green again", now, fx),
        Event::Unpaused { reason } => unpause(contract, p, worker, reason, now, fx),
        Event::Fatal { reason, raised } => fatal(contract, p, worker, reason, *raised, now, fx),
        Event::FatalCleared { by, upstream_red } => {
            if p.halted.take().is_some() {
                fx.push(Effect::ResolveAlert {
                    kind: "halted".into(),
                });
                fx.push(Effect::Checkpoint);
                if *upstream_red {
                    // Still below a red upstream: the cascade keeps it PAUSED.
                } else {
                    let why = format!("fatal hold cleared by {by}");
                    unpause(contract, p, worker, &why, now, fx);
                }
            }
        }
        // Any other event is another family's: `apply` dispatches by family.
        _ => {}
    }
}

/// Back from PAUSED to where the worker was, its timers going on where they stopped: the
/// upstream is green again, or a resumer takes over a worker whose supervisor died paused
/// (its new supervisor checks the upstream again). A verdict that came meanwhile is acted on.
fn unpause(
    contract: &Contract,
    p: &mut Progress,
    worker: &str,
    reason: &str,
    now: i64,
    fx: &mut Vec<Effect>,
) {
    // A fatal hold outranks every other way out of PAUSED: only its clearing ends it.
    if p.milestone == Milestone::Paused && p.halted.is_none() {
        let back = p.paused_from.unwrap_or(Milestone::Working);
        if transition(contract, p, back, reason, now, fx) {
            p.paused_from = None;
            if let Some(c) = p.paused_clock.take() {
                // The timers go on where they stopped.
                p.since_ms = now - c.elapsed_ms;
                p.deadline_ms = c.left_ms.map(|l| now + l);
                p.warned = c.warned;
                p.extended = c.extended;
            }
            fx.push(Effect::ContinueWorker);
            fx.push(Effect::ResolveAlert {
                kind: "paused".into(),
            });
            fx.push(alert(
                Severity::Info,
                "resumed",
                format!("worker {worker} resumed in {back}: {reason}"),
            ));
            // A verdict that came while paused is acted on now.
            if back == Milestone::PushedToCi {
                match p.verdict {
                    Some(VerdictKind::Green) if p.turn_ended => {
                        finish_done(contract, p, worker, now, fx)
                    }
                    Some(VerdictKind::Red) => {
                        let why = format!("CI red: {}", p.failed_jobs.join(", "));
                        if transition(contract, p, Milestone::FixingCi, &why, now, fx) {
                            count_fix_attempt(contract, p, worker, now, fx);
                        }
                    }
                    _ => {}
                }
            }
        }
    }
}

/// FATAL over the worker's chain (`failure_taxonomy.fatal`: `halt_all_workers_in_chain`,
/// `require: human_intervention`): the worker is stopped as a cascade pauses it — its
/// processes stopped, its timers frozen, its lock kept: nothing lost — and stays so until an
/// operator clears the hold. `raised`: this worker is where it came from (its report, its
/// push), so its step takes the hold and raises the critical alert.
pub(super) fn fatal(
    contract: &Contract,
    p: &mut Progress,
    worker: &str,
    reason: &str,
    raised: bool,
    now: i64,
    fx: &mut Vec<Effect>,
) {
    if p.halted.is_some() && !raised {
        return;
    }
    p.halted = Some(reason.to_string());
    if raised {
        fx.push(Effect::HoldFatal {
            reason: reason.to_string(),
        });
        fx.push(alert(
            Severity::Critical,
            "fatal",
            format!(
                "FATAL from worker {worker}: {reason} — every worker in its chain is stopped (locks kept) and none resumes until an operator clears the hold: `orch fatal {worker}` shows it and what the chain landed (to revert by hand: orch never reverts on its own), `orch fatal --clear {worker}` ends it"
            ),
        ));
    }
    let from = p.milestone;
    if from.at_work() {
        let clock = super::super::PausedClock {
            elapsed_ms: now - p.since_ms,
            left_ms: p.deadline_ms.map(|d| (d - now).max(0)),
            warned: p.warned,
            extended: p.extended,
        };
        if transition(
            contract,
            p,
            Milestone::Paused,
            &format!("FATAL: {reason}"),
            now,
            fx,
        ) {
            p.deadline_ms = None;
            p.paused_clock = Some(clock);
            fx.push(Effect::SuspendWorker);
        }
    }
    fx.push(alert(
        Severity::Warning,
        "halted",
        format!(
            "worker {worker} halted in {from}: FATAL in its chain ({reason}); its processes are stopped and its timers frozen until an operator clears the hold"
        ),
    ));
    fx.push(Effect::Checkpoint);
}
