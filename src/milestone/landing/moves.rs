//! Carrying the change to the base branch: found there already, fast-forwarded, or an
//! integration built and moved by compare-and-swap (or a pull request merged); a lost race
//! tries again, a refusal or a conflict keeps the lock for a person.

use super::super::{Effect, Severity};
use super::{LandEvent, LandState, Landing, note};

pub(super) fn on_move(
    l: &mut Landing,
    worker: &str,
    e: &LandEvent,
    now: i64,
    fx: &mut Vec<Effect>,
) {
    match e {
        LandEvent::OnBase { head } => match l.state {
            LandState::Waiting => {
                l.state = LandState::Landed;
                l.landed = Some(head.clone());
                note(
                    l,
                    format!("merged by hand: on the base branch at {}", head.short()),
                );
            }
            LandState::Pending | LandState::Verifying => {
                // Already there (a person merged it, or a landing that died after its move):
                // what remains is the base branch's CI for its head, whose own run may be among
                // the runs already.
                l.state = LandState::BaseCi;
                l.landed = Some(head.clone());
                l.base_runs_before = None;
                l.moved_ms = None;
                note(l, format!("already on the base branch at {}", head.short()));
            }
            _ => {}
        },
        LandEvent::Moved {
            to,
            how,
            from,
            runs_before,
        } => {
            if !matches!(l.state, LandState::Pending | LandState::Verifying) {
                return;
            }
            l.state = LandState::BaseCi;
            l.landed = Some(to.clone());
            l.candidate = None;
            l.base_runs_before = Some(*runs_before);
            l.moved_ms = Some(now);
            if let Some(f) = from {
                l.onto = Some(f.clone());
            }
            note(l, format!("base moved to {} ({how})", to.short()));
        }
        LandEvent::Built { candidate, onto } => {
            l.attempts += 1;
            l.state = LandState::Verifying;
            l.candidate = Some(candidate.clone());
            l.onto = Some(onto.clone());
            note(
                l,
                format!(
                    "integration {} built on {} (attempt {} of {})",
                    candidate.short(),
                    onto.short(),
                    l.attempts,
                    l.max_attempts
                ),
            );
        }
        LandEvent::Lost { reason } => {
            if l.attempts >= l.max_attempts {
                l.state = LandState::Refused;
                note(
                    l,
                    format!("gave up after {} attempts: {reason}", l.attempts),
                );
                fx.push(Effect::alert(
                    Severity::Critical,
                    "landing_refused",
                    format!(
                        "worker {worker}: landing gave up after {} attempts ({reason}); the change is DONE on its branch, the chain lock is kept: merge it by hand, then `orch release {worker} --force --reason landed`",
                        l.attempts
                    ),
                ));
            } else {
                // A fast-forward that lost counts as an attempt too.
                if l.candidate.is_none() {
                    l.attempts += 1;
                }
                l.state = LandState::Pending;
                l.candidate = None;
                note(l, format!("the base moved: {reason}; integrating again"));
            }
        }
        LandEvent::PullOpened { number, url }
            if l.state == LandState::Pending && l.pull != Some(*number) =>
        {
            l.pull = Some(*number);
            l.pull_url = url.clone();
            let detail = format!(
                "pull request #{number} opened{}",
                url.as_deref()
                    .map(|u| format!(" ({u})"))
                    .unwrap_or_default()
            );
            note(l, detail.clone());
            fx.push(Effect::Landing {
                from: LandState::Pending,
                to: LandState::Pending,
                detail,
            });
            fx.push(Effect::Checkpoint);
        }
        LandEvent::Refused { reason } => {
            l.state = LandState::Refused;
            note(l, reason.clone());
            fx.push(Effect::alert(
                Severity::Critical,
                "landing_refused",
                format!(
                    "worker {worker}: the forge refused to land its verified change: {reason}; the change is DONE on its branch, the chain lock is kept: land it by hand, then `orch release {worker} --force --reason landed`"
                ),
            ));
        }
        LandEvent::Conflict { detail } => {
            l.state = LandState::Conflict;
            note(l, detail.clone());
            fx.push(Effect::alert(
                Severity::Critical,
                "landing_conflict",
                format!(
                    "worker {worker}: its verified change does not land on the base branch: {detail}; the chain lock is kept — integrate the base branch by hand and merge, then `orch release {worker} --force --reason landed`"
                ),
            ));
        }
        // Another family's event (`step` dispatches by family), or one that does not apply in
        // the landing's state.
        _ => {}
    }
}
