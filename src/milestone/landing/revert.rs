//! `downstream.on_breakage: revert`: a landed change that broke a dependent is reverted on the
//! base branch, the revert built, verified and moved like any landing.

use super::super::{Effect, Severity};
use super::{LandEvent, LandState, Landing, note, red_jobs};
use crate::ci::verdict::VerdictKind;

/// An event of a revert: its build and move, the base moving under it (while Reverting), its CI
/// (while Reverting).
pub(super) fn on_revert(l: &mut Landing, worker: &str, e: &LandEvent, fx: &mut Vec<Effect>) {
    match e {
        LandEvent::RevertBuilt { sha, onto }
            if l.state == LandState::Reverting && l.reverted.is_none() =>
        {
            l.attempts += 1;
            l.revert = Some(sha.clone());
            l.onto = Some(onto.clone());
            let detail = format!(
                "revert {} built on {} (attempt {} of {})",
                sha.short(),
                onto.short(),
                l.attempts,
                l.max_attempts
            );
            note(l, detail.clone());
            fx.push(Effect::Landing {
                from: LandState::Reverting,
                to: LandState::Reverting,
                detail,
            });
            fx.push(Effect::Checkpoint);
        }
        LandEvent::RevertMoved { to }
            if l.state == LandState::Reverting && l.revert.as_ref() == Some(to) =>
        {
            l.reverted = Some(to.clone());
            let detail = format!("base moved to the revert {}", to.short());
            note(l, detail.clone());
            fx.push(Effect::Landing {
                from: LandState::Reverting,
                to: LandState::Reverting,
                detail,
            });
            fx.push(Effect::Checkpoint);
        }
        LandEvent::Lost { reason } => {
            if l.attempts >= l.max_attempts {
                l.state = LandState::Refused;
                note(
                    l,
                    format!("the revert gave up after {} attempts: {reason}", l.attempts),
                );
                fx.push(Effect::alert(
                    Severity::Critical,
                    "landing_refused",
                    format!(
                        "worker {worker}: the revert of its breaking change gave up ({reason}); the chain lock is kept for a person"
                    ),
                ));
            } else {
                l.revert = None;
                note(
                    l,
                    format!("the base moved: {reason}; building the revert again"),
                );
                fx.push(Effect::Checkpoint);
            }
        }
        LandEvent::Verdict {
            sha,
            kind,
            failed_jobs,
            detail,
        } => {
            let about_moved = l.reverted.as_ref() == Some(sha);
            let about_built = l.reverted.is_none() && l.revert.as_ref() == Some(sha);
            match kind {
                VerdictKind::Green if about_moved => {
                    l.state = LandState::Reverted;
                    let what = l
                        .landed
                        .clone()
                        .map(|s| s.short().to_string())
                        .unwrap_or_default();
                    note(
                        l,
                        format!(
                            "the change {what} was reverted by {} on the base branch (its CI green) after it broke a dependent",
                            sha.short()
                        ),
                    );
                    fx.push(Effect::alert(
                            Severity::Warning,
                            "reverted",
                            format!(
                                "worker {worker}'s change {what} is reverted on the base branch ({}): it broke a dependent; `orch wave retry` gives its task another go",
                                sha.short()
                            ),
                        ));
                    fx.push(Effect::ReleaseLock {
                        reason: format!("reverted: {} on the base branch, CI green", sha.short()),
                    });
                }
                VerdictKind::Red | VerdictKind::SyncNotDone if about_moved || about_built => {
                    l.state = LandState::Refused;
                    let why = format!(
                        "the revert {} is red ({}): a person must look",
                        sha.short(),
                        red_jobs(failed_jobs, detail)
                    );
                    note(l, why.clone());
                    fx.push(Effect::alert(
                        Severity::Critical,
                        "landing_refused",
                        format!("worker {worker}: {why}; the chain lock is kept"),
                    ));
                }
                _ => {}
            }
        }
        // Another family's event (`step` dispatches by family), or one that does not apply in
        // the landing's state.
        _ => {}
    }
}
