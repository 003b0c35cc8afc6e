//! The worker's word: its milestone claims, its pushes (checked by the supervisor before they
//! arrive), and its DONE claims, refused without CI's proof.

use super::super::{Channel, Effect, Event, Milestone, Progress, Severity};
use super::ci::count_fix_attempt;
use super::done::finish_done;
use super::pause::fatal;
use super::{BLOCKED_STOP, alert, block_permission, transition, violation};
use crate::ci::verdict::VerdictKind;
use crate::contract::Contract;

pub(super) fn on_report(
    contract: &Contract,
    p: &mut Progress,
    worker: &str,
    event: &Event,
    now: i64,
    fx: &mut Vec<Effect>,
) {
    match event {
        Event::Claim {
            milestone,
            note,
            via,
        } => {
            p.last_progress_ms = now;
            match milestone {
                Milestone::BlockedPermission => {
                    block_permission(
                        contract,
                        p,
                        worker,
                        &format!("reported BLOCKED_PERMISSION: {note}"),
                        now,
                        fx,
                    );
                }
                Milestone::FixingCi => {
                    let entering = p.milestone != Milestone::FixingCi;
                    if transition(
                        contract,
                        p,
                        Milestone::FixingCi,
                        &format!("claimed {via}: {note}"),
                        now,
                        fx,
                    ) && entering
                    {
                        count_fix_attempt(contract, p, worker, now, fx);
                    }
                }
                Milestone::Blocked => blocked(contract, p, worker, note, now, fx),
                Milestone::Working => {
                    transition(contract, p, Milestone::Working, note, now, fx);
                }
                other => fx.push(violation(
                    "illegal_claim",
                    format!("{other} cannot be claimed this way ({via})"),
                )),
            }
        }
        Event::Push {
            sha,
            pushed_ms,
            via,
            protected,
            secrets,
        } => {
            let replaced = p.tracked_sha.clone();
            if transition(
                contract,
                p,
                Milestone::PushedToCi,
                &format!("pushed {} ({via})", sha.short()),
                now,
                fx,
            ) {
                p.tracked_sha = Some(sha.clone());
                p.pushed_ms = Some(*pushed_ms);
                p.protected = protected.clone();
                p.secrets = secrets.clone();
                p.verdict = None;
                p.failed_jobs.clear();
                p.verdict_detail = None;
                p.ci_jobs = None;
                if replaced.as_ref() != Some(sha) {
                    fx.push(Effect::Track { sha: sha.clone() });
                }
                fx.push(Effect::Checkpoint);
            }
            if !secrets.is_empty() {
                // orch's own FATAL: a secret on its way to the base branch. The commit never
                // becomes DONE (`finish_done`), and the chain stops until an operator, who
                // must rotate the secret anyway, clears the hold.
                let reason = format!(
                    "secret committed in {} ({}): {}",
                    sha.short(),
                    worker,
                    secrets.join("; ")
                );
                fatal(contract, p, worker, &reason, true, now, fx);
            }
        }
        Event::PushRejected {
            claimed,
            reason,
            via,
        } => {
            fx.push(violation(
                "push_not_verified",
                format!("PUSHED_TO_CI {claimed} ({via}) rejected: {reason}"),
            ));
        }
        Event::DoneRefused { reason, via } => {
            fx.push(violation(
                "done_without_ci_proof",
                format!("DONE claimed ({via}) but {reason}"),
            ));
            fx.push(alert(
                Severity::Warning,
                "done_without_ci_proof",
                format!("worker {worker} claimed DONE without CI proof: {reason}"),
            ));
        }
        Event::DoneClaim { via } => done_claim(contract, p, worker, *via, now, fx),
        // Any other event is another family's: `apply` dispatches by family.
        _ => {}
    }
}

/// The worker reported BLOCKED.
fn blocked(
    contract: &Contract,
    p: &mut Progress,
    worker: &str,
    note: &str,
    now: i64,
    fx: &mut Vec<Effect>,
) {
    // `blocking: pause_and_escalate`: the worker is stopped at once — whatever it would do next
    // (a push, a claim) is not done — its lock kept, its clocks frozen (BLOCKED is not at work,
    // and has no timeout) until an operator's `orch respawn` continues it.
    if transition(contract, p, Milestone::Blocked, note, now, fx) {
        p.end_reason = Some(format!("blocked: {note}"));
        fx.push(Effect::StopWorker {
            immediate: false,
            reason: BLOCKED_STOP.into(),
        });
        fx.push(alert(
            Severity::Warning,
            "blocked",
            format!(
                "worker {worker} is BLOCKED: {note}; orch stopped its processes and keeps its lock — `orch respawn {worker} --note …` continues it"
            ),
        ));
    }
}

/// The worker claimed DONE: DONE with CI's green verdict on its tracked commit, else refused
/// with what is missing.
fn done_claim(
    contract: &Contract,
    p: &mut Progress,
    worker: &str,
    via: Channel,
    now: i64,
    fx: &mut Vec<Effect>,
) {
    let green = p.milestone == Milestone::PushedToCi && p.verdict == Some(VerdictKind::Green);
    if green {
        finish_done(contract, p, worker, now, fx);
    } else {
        let missing = match (&p.tracked_sha, p.verdict) {
            (None, _) => {
                "no pushed commit is tracked yet: push, then report PUSHED_TO_CI".to_string()
            }
            (Some(sha), v) => format!(
                "CI for {} is {}{}",
                sha.short(),
                v.map(VerdictKind::as_str).unwrap_or("not yet known"),
                p.verdict_detail
                    .as_deref()
                    .map(|d| format!(": {d}"))
                    .unwrap_or_default()
            ),
        };
        fx.push(violation(
            "done_without_ci_proof",
            format!("DONE claimed ({via}) but {missing}"),
        ));
        fx.push(alert(
            Severity::Warning,
            "done_without_ci_proof",
            format!("worker {worker} claimed DONE without CI proof: {missing}"),
        ));
    }
}
