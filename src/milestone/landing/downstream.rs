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
            already_red,
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
            // Only a green → red transition the change caused is a breakage: a dependent red
            // on its base head without the change is said as such, and blamed on nothing.
            let blamed = *kind != VerdictKind::Green && already_red.is_none();
            if let (false, Some(before)) = (*kind == VerdictKind::Green, already_red) {
                d.already_red = Some(before.clone());
                let jobs = red_jobs(failed_jobs, detail);
                note(
                    l,
                    format!(
                        "{repo} was already red on its base head {} without {} ({before}); red with it too ({jobs}): not blamed on the change",
                        sha.short(),
                        landed.short()
                    ),
                );
                fx.push(Effect::alert(
                    Severity::Warning,
                    "downstream_already_red",
                    format!(
                        "{repo} is red on its base head {} with or without worker {worker}'s change {} ({before}): not a breakage of the change; nothing held",
                        sha.short(),
                        landed.short()
                    ),
                ));
            }
            if blamed && l.revert_on_breakage {
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
            } else if blamed {
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
                .all(|d| d.verdict == Some(VerdictKind::Green) || d.already_red.is_some())
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sha::Sha;

    fn checking(deps: &[&str]) -> Landing {
        let mut l = Landing::planned(
            &crate::config::LandConfig::default_for(crate::config::ForgeKind::Local),
            deps.iter().map(|d| d.to_string()).collect(),
        );
        l.state = LandState::Downstream;
        l.landed = Some(Sha::from("c".repeat(40)));
        for d in &mut l.downstream {
            d.sha = Some(Sha::from("d".repeat(40)));
        }
        l
    }

    fn verdict(repo: &str, kind: VerdictKind, already_red: Option<&str>) -> LandEvent {
        LandEvent::CheckVerdict {
            repo: repo.into(),
            sha: Sha::from("d".repeat(40)),
            kind,
            failed_jobs: vec!["test".into()],
            detail: String::new(),
            already_red: already_red.map(str::to_string),
        }
    }

    fn kinds(fx: &[Effect]) -> Vec<String> {
        fx.iter()
            .filter_map(|e| match e {
                Effect::Alert { kind, .. } => Some(kind.clone()),
                Effect::HoldChain { .. } => Some("hold".into()),
                Effect::ReleaseLock { .. } => Some("release".into()),
                _ => None,
            })
            .collect()
    }

    /// Only a green → red transition the change caused is a breakage (issue 36 item 3): a
    /// dependent red on its base head without the change is said, not blamed nor held, and the
    /// landing ends once the others are green.
    #[test]
    fn a_dependent_already_red_without_the_change_is_not_blamed() {
        let mut l = checking(&["vm", "os"]);
        let mut fx = Vec::new();
        on_check(
            &mut l,
            "w1",
            &verdict(
                "vm",
                VerdictKind::Red,
                Some("its base CI without the change: red"),
            ),
            &mut fx,
        );
        assert_eq!(l.state, LandState::Downstream, "{:?}", l.detail);
        assert_eq!(kinds(&fx), ["downstream_already_red"]);
        assert!(l.downstream[0].already_red.is_some());
        let mut fx = Vec::new();
        on_check(
            &mut l,
            "w1",
            &verdict("os", VerdictKind::Green, None),
            &mut fx,
        );
        assert_eq!(l.state, LandState::Landed, "{:?}", l.detail);
        assert_eq!(kinds(&fx), ["release"]);

        // The same red with a green (or unknown) base is the change's: blamed and held.
        let mut l = checking(&["vm"]);
        let mut fx = Vec::new();
        on_check(
            &mut l,
            "w1",
            &verdict("vm", VerdictKind::Red, None),
            &mut fx,
        );
        assert_eq!(l.state, LandState::Broken);
        assert_eq!(kinds(&fx), ["downstream_breakage", "release", "hold"]);
    }
}
