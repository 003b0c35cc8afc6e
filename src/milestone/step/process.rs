//! The worker's process and its agent, as orch sees them: permission denials in its output,
//! its exit, the agent's own account of why it ended, a spawn that failed, a resumed life.

use super::super::{Effect, Event, Milestone, Progress, Severity};
use super::{alert, block_permission, transition};
use crate::ci::verdict::VerdictKind;
use crate::contract::Contract;

// A transition's effects stay in the arm of its event: as a match guard they would be
// carried out while the event is matched.
#[allow(clippy::collapsible_match)]
pub(super) fn on_process(
    contract: &Contract,
    p: &mut Progress,
    worker: &str,
    event: &Event,
    now: i64,
    fx: &mut Vec<Effect>,
) {
    match event {
        Event::PermissionDenial { line } => {
            p.permission_denials += 1;
            if p.permission_denials >= contract.permission.max_denials {
                let why = format!(
                    "{} permission denials, last: {}",
                    p.permission_denials, line
                );
                block_permission(contract, p, worker, &why, now, fx);
            }
        }
        Event::WorkerExited { code } => {
            if p.milestone == Milestone::PushedToCi && *code == Some(0) {
                // The worker ended its turn after a push: its word that the work is done.
                // DONE comes with a green verdict read after the exit (the supervisor asks
                // again: the branch head too), never on one read before it.
                p.turn_ended = true;
                fx.push(Effect::Checkpoint);
                return;
            }
            // An agent's run already classified (`AgentEnded`) keeps its reason and alert.
            let classified = p
                .end_reason
                .as_deref()
                .is_some_and(|r| r.starts_with("agent (transient)"));
            // Any other end at work is a crash, after a push too: the worker gave no word (a
            // DONE claim, or the end of its turn), and a green push is not DONE without it, so
            // CI decides nothing more for this life. Said at once, in every milestone alike;
            // the supervisor then leaves the worker to `orch resume` — a replacement, as the
            // contract's `on_worker_crash` — its lock kept for it.
            if !classified && p.milestone.at_work() {
                let how = code
                    .map(|c| format!("exit code {c}"))
                    .unwrap_or_else(|| "a signal".into());
                let pushed = match (&p.tracked_sha, p.milestone) {
                    (Some(sha), Milestone::PushedToCi) => format!(
                        " after pushing {} (CI {}: DONE needs its word too)",
                        sha.short(),
                        p.verdict.map_or("not yet known", VerdictKind::as_str)
                    ),
                    _ => String::new(),
                };
                p.end_reason = Some(format!("worker exited ({how}) in {}", p.milestone));
                fx.push(alert(
                    Severity::Warning,
                    "worker_exited",
                    format!(
                        "worker {worker} exited ({how}) in {}{pushed} without finishing; lock kept for its replacement — `orch resume` gives its task to one (within worker.max_respawns)",
                        p.milestone
                    ),
                ));
                fx.push(Effect::Checkpoint);
            }
        }
        Event::AgentEnded { blocking, detail } => {
            if *blocking {
                let reason = format!("agent: {detail}");
                if transition(contract, p, Milestone::Blocked, &reason, now, fx) {
                    p.end_reason = Some(reason);
                    fx.push(alert(
                        Severity::Critical,
                        "agent_blocked",
                        format!(
                            "worker {worker}: {detail} — BLOCKED, lock kept; fix it, then `orch respawn {worker}`"
                        ),
                    ));
                }
            } else {
                p.end_reason = Some(format!("agent (transient): {detail}"));
                fx.push(alert(
                    Severity::Warning,
                    "agent_transient",
                    format!("worker {worker}: {detail} — `orch resume` gives it to a replacement"),
                ));
            }
        }
        Event::QuickExit { signature } => {
            if !p.milestone.at_work() {
                return;
            }
            if p.quick_failure.as_deref() == Some(signature.as_str()) {
                let why = format!(
                    "setup failure: the worker fails at once, the same way, on every start ({signature}); fix worker.command or what it needs, then `orch respawn {worker}`"
                );
                super::fail(contract, p, worker, &why, "setup_failure", now, fx);
            } else {
                p.quick_failure = Some(signature.clone());
                fx.push(Effect::Checkpoint);
            }
        }
        Event::SpawnFailed { reason } => {
            // Nothing ran, so nothing to stop and nobody to alert: the lock is given back.
            if transition(contract, p, Milestone::Failed, reason, now, fx) {
                p.end_reason = Some(reason.clone());
                fx.push(Effect::ReleaseLock {
                    reason: reason.clone(),
                });
            }
        }
        Event::Resumed { replacement } => {
            // The life before counts up to its last sign of progress; the time nobody
            // supervised the worker is not its own.
            let last = p.last_progress_ms;
            p.life.restart(last, now);
            let m = p.milestone;
            p.enter(contract, m, now);
            if *replacement {
                p.end_reason = None;
                p.permission_denials = 0;
                p.turn_ended = false;
            }
            fx.push(Effect::Checkpoint);
        }
        // Any other event is another family's: `apply` dispatches by family.
        _ => {}
    }
}
