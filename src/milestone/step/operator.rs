//! An operator's actions on one worker: cancel it, fail it, respawn it (refused under a FATAL).

use super::super::{Effect, Event, Milestone, Progress};
use super::{fail, transition, violation};
use crate::contract::Contract;

// A transition's effects stay in the arm of its event: as a match guard they would be
// carried out while the event is matched.
#[allow(clippy::collapsible_match)]
pub(super) fn on_operator(
    contract: &Contract,
    p: &mut Progress,
    worker: &str,
    event: &Event,
    now: i64,
    fx: &mut Vec<Effect>,
) {
    match event {
        Event::Cancel { by, reason } => {
            if transition(
                contract,
                p,
                Milestone::Cancelled,
                &format!("cancelled by {by}: {reason}"),
                now,
                fx,
            ) {
                p.end_reason = Some(format!("cancelled by {by}: {reason}"));
                fx.push(Effect::StopWorker {
                    immediate: false,
                    reason: "cancelled".into(),
                });
                fx.push(Effect::ReleaseLock {
                    reason: format!("cancelled by {by}: {reason}"),
                });
            }
        }
        Event::Fail { kind, reason } => fail(contract, p, worker, reason, kind, now, fx),
        Event::Respawn { by, .. } if p.halted.is_some() => {
            fx.push(violation(
                "halted",
                format!(
                    "respawn by {by} refused: the chain is halted by a FATAL ({}); `orch fatal --clear` first",
                    p.halted.as_deref().unwrap_or_default()
                ),
            ));
        }
        Event::Respawn { by, note } => {
            if matches!(
                p.milestone,
                Milestone::Blocked | Milestone::BlockedPermission | Milestone::Paused
            ) {
                let to = if p.tracked_sha.is_some() {
                    Milestone::FixingCi
                } else {
                    Milestone::Working
                };
                let reason = if note.is_empty() {
                    format!("respawned by {by}")
                } else {
                    format!("respawned by {by}: {note}")
                };
                if transition(contract, p, to, &reason, now, fx) {
                    p.end_reason = None;
                    p.permission_denials = 0;
                    p.turn_ended = false;
                    p.held = None;
                    p.respawned += 1;
                }
            }
        }
        // Any other event is another family's: `apply` dispatches by family.
        _ => {}
    }
}
