//! DONE: reached with CI's proof and the worker's word, held for an operator's approval when
//! the change touches protected paths, and taken back when the branch moves before landing.

use super::super::{Effect, LandState, Milestone, Progress, Severity};
use super::{HELD_STOP, alert, transition, violation};
use crate::ci::verdict::VerdictKind;
use crate::config::LandPolicy;
use crate::contract::Contract;

/// A green change the worker called finished, which touches protected paths nobody approved
/// for this commit: BLOCKED (the lock kept) until an operator approves it — CI that a worker
/// could edit is no proof of its work.
fn hold(contract: &Contract, p: &mut Progress, worker: &str, now: i64, fx: &mut Vec<Effect>) {
    let Some(sha) = p.tracked_sha.clone() else {
        return;
    };
    let files = p.protected.join(", ");
    let reason = format!("touches protected paths: {files}; needs `orch approve {worker}`");
    if transition(contract, p, Milestone::Blocked, &reason, now, fx) {
        p.held = Some(sha.clone());
        p.end_reason = Some(reason);
        fx.push(Effect::StopWorker {
            immediate: false,
            reason: HELD_STOP.into(),
        });
        fx.push(alert(
            Severity::Warning,
            "protected_paths",
            format!(
                "worker {worker}: CI is green for {}, but its change touches protected paths ({files}): not DONE without an operator's approval; the lock is kept — `orch approve {worker}` shows the diff and approves this commit",
                sha.short()
            ),
        ));
    }
}

/// An operator's approval of the commit at `sha`: a worker held on it goes on to DONE; a
/// worker still at work on it keeps the approval for when it claims DONE. Any other commit
/// is refused (an approval is bound to the commit the operator saw).
pub(super) fn approve(
    contract: &Contract,
    p: &mut Progress,
    worker: &str,
    sha: &crate::sha::Sha,
    by: &str,
    now: i64,
    fx: &mut Vec<Effect>,
) {
    let refuse = |fx: &mut Vec<Effect>, why: String| {
        fx.push(violation(
            "approval_refused",
            format!("approval of {} by {by} refused: {why}", sha.short()),
        ));
    };
    if p.tracked_sha.as_ref() != Some(sha) {
        let tracked = p.tracked_sha.as_ref().map(|s| s.short().to_string());
        return refuse(
            fx,
            format!(
                "the worker's change is at {}",
                tracked.as_deref().unwrap_or("no pushed commit")
            ),
        );
    }
    if p.protected.is_empty() {
        return refuse(
            fx,
            "its change touches no protected path: nothing to approve".into(),
        );
    }
    match p.milestone {
        Milestone::Blocked if p.held.as_ref() == Some(sha) => {
            if p.verdict != Some(VerdictKind::Green) {
                return refuse(fx, "its CI is no longer green".into());
            }
            p.approved = Some(sha.clone());
            fx.push(alert(
                Severity::Info,
                "approved",
                format!(
                    "worker {worker}: {by} approved {} (touches {})",
                    sha.short(),
                    p.protected.join(", ")
                ),
            ));
            fx.push(Effect::ResolveAlert {
                kind: "protected_paths".into(),
            });
            finish_done(contract, p, worker, now, fx);
            if p.milestone == Milestone::Done {
                p.held = None;
            } else {
                p.approved = None;
            }
        }
        Milestone::PushedToCi | Milestone::FixingCi | Milestone::Paused => {
            p.approved = Some(sha.clone());
            fx.push(alert(
                Severity::Info,
                "approved",
                format!(
                    "worker {worker}: {by} approved {} ahead of DONE (touches {})",
                    sha.short(),
                    p.protected.join(", ")
                ),
            ));
            fx.push(Effect::Checkpoint);
        }
        m => refuse(fx, format!("the worker is {m}, not held for approval")),
    }
}

/// The worker's branch moved away from its DONE commit `done` (to `head`; None: deleted).
///
/// Before the landing moved the base (pending, or an integration under verification), DONE is
/// taken back: the worker is BLOCKED with the reason, its lock kept, its landing back to
/// planned (nothing lands), and a critical alert names both commits. Why BLOCKED and not
/// PUSHED_TO_CI for the new head: the contract's DONE is terminal and lets no transition out,
/// and PUSHED_TO_CI is a worker's own push (`git_push_complete`, `new_push`) — but the worker
/// was stopped at DONE (`StopWorker`, its processes ended with its guard), so whoever moved the
/// branch is not the worker, and verifying that head would make someone else's commit this
/// worker's DONE. Someone else's push is a `blocking` failure in the contract's taxonomy
/// (`pause_and_escalate`, worker state BLOCKED: "cannot proceed without external resolution"),
/// and from BLOCKED the contract's own way on is an operator's: `orch respawn` (BLOCKED ->
/// FIXING_CI: the worker pushes again and CI verifies anew) or `orch cancel`.
/// After the base moved (base CI, downstream, landed…) or with `land: none`, what lands or
/// landed is the verified commit: an alert only.
pub(super) fn done_branch_moved(
    contract: &Contract,
    p: &mut Progress,
    worker: &str,
    done: &crate::sha::Sha,
    head: Option<&crate::sha::Sha>,
    now: i64,
    fx: &mut Vec<Effect>,
) {
    if p.milestone != Milestone::Done || p.tracked_sha.as_ref() != Some(done) || head == Some(done)
    {
        return;
    }
    let moved = match head {
        Some(h) => format!("moved from {} to {}", done.as_str(), h.as_str()),
        None => format!("deleted (it was at {})", done.as_str()),
    };
    let landing = p.landing.as_ref().map(|l| l.state);
    if !matches!(landing, Some(LandState::Pending | LandState::Verifying)) {
        let stage = landing.map_or("no landing".to_string(), |s| s.to_string());
        fx.push(alert(
            Severity::Critical,
            "done_branch_moved",
            format!(
                "worker {worker}'s branch was {moved} after DONE (landing: {stage}): DONE stays the verified commit {}; find out who pushed",
                done.short()
            ),
        ));
        return;
    }
    let reason = format!(
        "its branch was {moved} after DONE, before its landing: not landed; `orch respawn {worker}` to verify again, or `orch cancel {worker}`"
    );
    // Out of a terminal state, which the contract's transitions never allow: this is the one
    // exception (see above), so it does not go through `transition`.
    let from = p.milestone;
    p.enter(contract, Milestone::Blocked, now);
    fx.push(Effect::Transition {
        from,
        to: Milestone::Blocked,
        reason: reason.clone(),
    });
    p.end_reason = Some(reason);
    if let Some(l) = p.landing.as_mut() {
        l.replan();
    }
    // The move itself, under the kind a push seen by the forge's hook raises (a repeat of it
    // then): a ref moved without a push runs no hook, and this look is what sees it.
    fx.push(alert(
        Severity::Critical,
        "done_branch_moved",
        format!("worker {worker}'s branch was {moved} after DONE, before its landing"),
    ));
    fx.push(alert(
        Severity::Critical,
        "done_reopened",
        format!(
            "worker {worker} is DONE no more: its branch was {moved} before its landing; BLOCKED, its lock kept, nothing lands until `orch respawn {worker}` (CI verifies again) or `orch cancel {worker}`"
        ),
    ));
    fx.push(Effect::Checkpoint);
}

pub(super) fn finish_done(
    contract: &Contract,
    p: &mut Progress,
    worker: &str,
    now: i64,
    fx: &mut Vec<Effect>,
) {
    if !p.secrets.is_empty() || p.halted.is_some() {
        // A commit carrying a secret never lands, and nothing becomes DONE under a FATAL.
        let why = if p.secrets.is_empty() {
            format!(
                "the chain is halted by a FATAL ({})",
                p.halted.as_deref().unwrap_or_default()
            )
        } else {
            format!(
                "its history carries secrets ({}): rewrite the branch without them and push again",
                p.secrets.join("; ")
            )
        };
        fx.push(violation(
            "done_refused",
            format!("worker {worker}: not DONE: {why}"),
        ));
        return;
    }
    if p.needs_approval() {
        return hold(contract, p, worker, now, fx);
    }
    let sha = p
        .tracked_sha
        .as_ref()
        .map(|s| s.to_string())
        .unwrap_or_default();
    if transition(
        contract,
        p,
        Milestone::Done,
        &format!(
            "CI green for {} (sync job success)",
            crate::sha::short(&sha)
        ),
        now,
        fx,
    ) {
        p.end_reason = Some("done".into());
        let lands = match p.landing.as_mut() {
            Some(l) => {
                l.done_sha = p.tracked_sha.clone();
                l.state = match l.policy {
                    LandPolicy::Merge | LandPolicy::PullRequest | LandPolicy::Direct => {
                        LandState::Pending
                    }
                    LandPolicy::None => LandState::Waiting,
                };
                l.policy != LandPolicy::None
            }
            None => false,
        };
        if lands {
            // The chain lock is held until the change is on the base branch and the base
            // branch's CI for it is green (see `landing`): dependents build on it.
            fx.push(Effect::Land);
        } else {
            fx.push(Effect::ReleaseLock {
                reason: format!("DONE: CI verified green for {sha}"),
            });
        }
        fx.push(Effect::StopWorker {
            immediate: false,
            reason: "done".into(),
        });
    }
}
