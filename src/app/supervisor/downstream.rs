//! A dependent's downstream check as the supervisor judges it (issue 36: blame only what
//! broke): the verification branch's runs against the same head's runs without the change
//! (`ci::check::judge`) — its base branch's, or, when it has none (a head no push ran CI
//! for), a baseline run orch starts once itself: the dependent's head with this worker's
//! repository pinned to the base the change was built on (`Forge::start_pinned_run`; the
//! local forge can, Forgejo cannot: there the check's own word stands).

use super::Supervisor;
use crate::ci::CiRun;
use crate::ci::check::{Check, judge};
use crate::ci::verdict::{CiPolicy, Verdict, VerdictKind};
use crate::forge::Forge;
use crate::store::now_ms;

impl<F: Forge + 'static> Supervisor<'_, F> {
    /// The branch a dependent's baseline run (its head without the change) is recorded on.
    fn baseline_branch(&self) -> String {
        format!("orch/baseline/{}", self.w.id)
    }

    /// Dependent `dep`'s check from its runs on one commit: `None` until it can be said.
    /// `all`: the verdict over every run, which stands when no run names its branch.
    pub(super) fn check_verdict(
        &mut self,
        dep: &str,
        all: &Verdict,
        runs: &[CiRun],
    ) -> Option<(Verdict, Option<String>)> {
        if runs.iter().all(|r| r.git_ref.is_none()) {
            return all.kind.is_terminal().then(|| (all.clone(), None));
        }
        let base = self.env.config.repo(dep).map(|r| r.branch.clone())?;
        let (base_ref, baseline_ref) = (
            format!("refs/heads/{base}"),
            format!("refs/heads/{}", self.baseline_branch()),
        );
        let policy = CiPolicy::from(&self.env.config.ci);
        let verify_ref = format!("refs/heads/{}", self.verify_branch());
        match judge(
            runs,
            &verify_ref,
            &[base_ref.as_str(), baseline_ref.as_str()],
            &policy,
            now_ms(),
        ) {
            Check::Waiting => None,
            Check::Decided {
                verdict,
                already_red,
            } => {
                let without_known = runs.iter().any(|r| {
                    r.git_ref.as_deref() == Some(&base_ref)
                        || r.git_ref.as_deref() == Some(&baseline_ref)
                });
                if verdict.kind != VerdictKind::Green && !without_known && self.start_baseline(dep)
                {
                    return None; // judged once the baseline run has finished
                }
                Some((verdict, already_red))
            }
        }
    }

    /// Starts, once per dependent, the run of its checked head without the change; whether
    /// one was started (and is to be waited for).
    fn start_baseline(&mut self, dep: &str) -> bool {
        if !self.land.baselines.insert(dep.to_string()) {
            return false; // asked once: a run that never came leaves the check's own word
        }
        let Some(l) = self.w.progress.landing.as_ref() else {
            return false;
        };
        let (Some(onto), Some(sha)) = (
            l.onto.clone(),
            l.downstream
                .iter()
                .find(|d| d.repo == dep)
                .and_then(|d| d.sha.clone()),
        ) else {
            return false;
        };
        let pins = vec![(self.w.repo.clone(), onto.to_string())];
        let branch = self.baseline_branch();
        match self
            .ci
            .follower
            .forge()
            .start_pinned_run(dep, &branch, sha.as_str(), &pins)
        {
            None => false,
            Some(Ok(())) => {
                tracing::info!(worker = %self.w.id, dep, "downstream: {dep} is red with the change; its head runs once without it ({} at {})", self.w.repo, onto.short());
                true
            }
            Some(Err(e)) => {
                tracing::warn!(worker = %self.w.id, dep, error = %e, "downstream: cannot run the dependent's head without the change");
                false
            }
        }
    }
}
