//! After the base branch's CI is green: each dependent's CI on its base head with the landed
//! change; all green frees the chain, a red one holds the dependent's chain (or reverts).

use super::super::{Effect, Severity};
use super::{LandEvent, LandState, Landing, note, red_jobs};
use crate::ci::verdict::VerdictKind;

pub(super) fn on_check(l: &mut Landing, worker: &str, e: &LandEvent, fx: &mut Vec<Effect>) {
    match e {
        LandEvent::CheckStarted { repo, sha } => {
            if let Some(d) = l.downstream.iter_mut().find(|d| &d.repo == repo)
                && l.state == LandState::Downstream
            {
                d.sha = Some(sha.clone());
                d.verdict = None;
                fx.push(Effect::Checkpoint);
            }
        }
        LandEvent::CheckVerdict {
            repo,
            sha,
            kind,
            failed_jobs,
            detail,
        } => {
            if l.state != LandState::Downstream || !kind.is_terminal() {
                return;
            }
            let landed = l.landed.clone().unwrap_or_else(|| sha.clone());
            let Some(d) = l
                .downstream
                .iter_mut()
                .find(|d| &d.repo == repo && d.sha.as_ref() == Some(sha))
            else {
                return;
            };
            d.verdict = Some(*kind);
            d.failed_jobs = failed_jobs.clone();
            if *kind != VerdictKind::Green && l.revert_on_breakage {
                let jobs = red_jobs(failed_jobs, detail);
                l.state = LandState::Reverting;
                l.attempts = 0;
                let why = format!(
                    "{repo} is red on its base head {} with {} landed ({jobs}): reverting it",
                    sha.short(),
                    landed.short()
                );
                note(l, why);
                fx.push(Effect::alert(
                    Severity::Critical,
                    "downstream_breakage",
                    format!(
                        "worker {worker}'s change {} broke {repo}: its CI on its base head {} is red ({jobs}); orch reverts the change (verified like any landing), the chain lock held until then",
                        landed.short(),
                        sha.short()
                    ),
                ));
            } else if *kind != VerdictKind::Green {
                l.state = LandState::Broken;
                let jobs = red_jobs(failed_jobs, detail);
                let why = format!(
                    "{repo} is red on its base head {} with {} landed ({jobs})",
                    sha.short(),
                    landed.short()
                );
                note(l, why.clone());
                fx.push(Effect::alert(
                    Severity::Critical,
                    "downstream_breakage",
                    format!(
                        "worker {worker}'s change {} broke {repo}: its CI on its base head {} is red ({jobs}); {repo}'s chain is held (`orch unhold {repo}` once it is fixed), the change stays landed",
                        landed.short(),
                        sha.short()
                    ),
                ));
                // The change's lock goes and the hold on the broken chain comes in one
                // transaction: nothing starts on the dependent in between.
                fx.push(Effect::ReleaseLock {
                    reason: format!("DONE and landed {landed}; {repo} broke on it: held"),
                });
                fx.push(Effect::HoldChain {
                    repo: repo.clone(),
                    reason: format!(
                        "downstream breakage: {} broke {repo} ({jobs})",
                        landed.short()
                    ),
                });
            } else if l
                .downstream
                .iter()
                .all(|d| d.verdict == Some(VerdictKind::Green))
            {
                l.state = LandState::Landed;
                note(
                    l,
                    format!(
                        "landed {}: base branch and dependents' CI green",
                        landed.short()
                    ),
                );
                fx.push(Effect::ReleaseLock {
                    reason: format!(
                        "DONE and landed: base branch CI green for {landed}, dependents green"
                    ),
                });
            }
        }
        // Any other event is another family's: `step` dispatches by family.
        _ => {}
    }
}
