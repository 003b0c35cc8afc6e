//! Landing, the supervisor's part: after DONE (worker stopped, chain lock still held) it
//! carries the verified change to the base branch and reports what it saw to the machine as
//! `LandEvent`s (`milestone::landing` decides; the journal writes). The git work is
//! `gitops::{is_ancestor, integrate, push_commit}`; CI goes through the supervisor's CI thread
//! like every other question to the forge.
//!
//! One step per call, each durable before the next: a crash anywhere leaves a state `orch
//! resume` continues from (a move that happened but was not recorded is found again: the DONE
//! commit is then in the base branch's history, `OnBase`), and nothing lands twice (a
//! compare-and-swap on the base head the move was decided on).

use super::Supervisor;
use super::ci::CiAnswer;
use crate::config::LandMethod;
use crate::forge::Forge;
use crate::gitops::{self, Integrate, Integration};
use crate::milestone::{Event, LandEvent, LandState, Landing};
use crate::sha::Sha;
use crate::store::now_ms;

/// The least time between two landing steps (a fast local forge is not hammered).
const LAND_EVERY_MS: i64 = 200;

impl<F: Forge + 'static> Supervisor<'_, F> {
    /// The landing branch of this worker (integrations are verified there before the base
    /// branch may move to them).
    fn land_branch(&self) -> String {
        format!("{}-land", self.w.branch)
    }

    /// One landing step when one is due: move the base (Pending), or ask CI about the
    /// integration (Verifying) or the base branch at the landed commit (BaseCi).
    pub(super) fn land_tick(&mut self, now: i64) {
        if !self.w.progress.landing_active() || now < self.next_land_ms {
            return;
        }
        let Some(l) = self.w.progress.landing.clone() else {
            return;
        };
        let every = (self.env.config.ci.poll_interval.as_millis() as i64).max(LAND_EVERY_MS);
        match l.state {
            LandState::Pending => {
                self.next_land_ms = now + LAND_EVERY_MS;
                self.land_move(&l);
            }
            LandState::Downstream => {
                if !self.ci.idle() {
                    return;
                }
                self.next_land_ms = now + every;
                if let Some(d) = l.downstream.iter().find(|d| d.sha.is_none()) {
                    let repo = d.repo.clone();
                    self.check_start(&repo);
                } else if let Some(d) = l.downstream.iter().find(|d| d.verdict.is_none())
                    && let (Some(sha), Some(repo)) =
                        (d.sha.clone(), self.env.config.repo(&d.repo).cloned())
                {
                    self.follower.forget(&repo.name, &sha);
                    let branch = self.verify_branch();
                    self.ci.ask(repo, sha, &branch, None);
                }
            }
            LandState::Verifying | LandState::BaseCi => {
                let (sha, branch) = match l.state {
                    LandState::Verifying => (l.candidate.clone(), self.land_branch()),
                    _ => (l.landed.clone(), self.base_branch()),
                };
                let Some(sha) = sha else {
                    return;
                };
                if !self.ci.idle() {
                    return;
                }
                let Some(repo) = self.env.config.repo(&self.w.repo).cloned() else {
                    return;
                };
                self.next_land_ms = now + every;
                // The base branch's own run is what counts now: a verdict cached from the
                // worker's branch must not stand for it.
                self.follower.forget(&repo.name, &sha);
                self.ci.ask(repo, sha, &branch, Some(now_ms()));
            }
            _ => {}
        }
    }

    fn base_branch(&self) -> String {
        self.env
            .config
            .repo(&self.w.repo)
            .map(|r| r.branch.clone())
            .unwrap_or_else(|| "main".into())
    }

    /// The branch a dependent's base head is pushed to for its CI to run with this change.
    fn verify_branch(&self) -> String {
        format!("orch/verify/{}", self.w.id)
    }

    /// Downstream: pushes dependent `dep`'s base head (fetched from the forge) to its
    /// verification branch, so that its CI runs with the landed upstream — never a new commit
    /// on the dependent's base.
    fn check_start(&mut self, dep: &str) {
        let Some(repo) = self.env.config.repo(dep).cloned() else {
            return;
        };
        let remote =
            match crate::app::spawn::push_remote(self.env.config, self.env.state_dir, &repo) {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(worker = %self.w.id, dep, error = %e, "downstream: no remote");
                    return;
                }
            };
        if let Err(e) = gitops::fetch(&repo.path, &remote) {
            tracing::warn!(worker = %self.w.id, dep, error = %e, "downstream: fetch failed");
            return;
        }
        let Ok(head) = gitops::base_sha(&repo.path, &remote, &repo.branch) else {
            return;
        };
        let branch = self.verify_branch();
        if let Err(e) = gitops::push_commit(&repo.path, &remote, &head, &branch, None) {
            tracing::warn!(worker = %self.w.id, dep, error = %e, "downstream: push failed");
            return;
        }
        let event = LandEvent::CheckStarted {
            repo: dep.to_string(),
            sha: Sha::from(head),
        };
        self.apply(Event::Land(event), None, Vec::new());
    }

    /// Whether `a` answers a landing question (then it is the landing's, not the worker's).
    pub(super) fn land_answer(&mut self, a: &CiAnswer) -> bool {
        let Some(l) = self.w.progress.landing.clone() else {
            return false;
        };
        if l.state == LandState::Downstream && self.w.progress.landing_active() {
            let Some(d) = l
                .downstream
                .iter()
                .find(|d| d.sha.as_ref() == Some(&a.sha) && d.verdict.is_none())
            else {
                return false;
            };
            if let Ok((v, _)) = &a.result
                && v.kind.is_terminal()
            {
                let event = LandEvent::CheckVerdict {
                    repo: d.repo.clone(),
                    sha: a.sha.clone(),
                    kind: v.kind,
                    failed_jobs: v.failed_jobs.clone(),
                    detail: v.detail.clone(),
                };
                self.apply(Event::Land(event), None, Vec::new());
            }
            return true;
        }
        let asked = match l.state {
            LandState::Verifying => l.candidate.as_ref(),
            LandState::BaseCi => l.landed.as_ref(),
            _ => None,
        };
        if !self.w.progress.landing_active() || asked != Some(&a.sha) {
            return false;
        }
        let Ok((v, _)) = &a.result else {
            return true; // asked again at the next step
        };
        let event = Event::Land(LandEvent::Verdict {
            sha: a.sha.clone(),
            kind: v.kind,
            failed_jobs: v.failed_jobs.clone(),
            detail: v.detail.clone(),
        });
        self.apply(event, None, Vec::new());
        if l.state == LandState::Verifying
            && v.kind == crate::ci::verdict::VerdictKind::Green
            && let (Some(candidate), Some(onto)) = (l.candidate, l.onto)
        {
            // Green on the landing branch: the base moves to it if it is still where the
            // integration was built.
            let how = format!("{} verified on {}", l.method.as_str(), self.land_branch());
            self.land_cas(&candidate, &onto, how);
        }
        true
    }

    /// Pending: fetch the base head; the change is on it already, or the base is
    /// fast-forwarded to it, or an integration is built for CI to verify.
    fn land_move(&mut self, l: &Landing) {
        let Some(repo) = self.env.config.repo(&self.w.repo).cloned() else {
            return;
        };
        let Some(done) = l.done_sha.clone() else {
            return;
        };
        let remote = self.w.remote.clone();
        if let Err(e) = gitops::fetch(&repo.path, &remote) {
            tracing::warn!(worker = %self.w.id, error = %e, "landing: fetch failed; trying again");
            return;
        }
        let base = match gitops::base_sha(&repo.path, &remote, &repo.branch) {
            Ok(b) => Sha::from(b),
            Err(e) => {
                tracing::warn!(worker = %self.w.id, error = %e, "landing: no base head");
                return;
            }
        };
        let on_base = gitops::is_ancestor(&repo.path, done.as_str(), base.as_str());
        let fast_forward = gitops::is_ancestor(&repo.path, base.as_str(), done.as_str());
        match (on_base, fast_forward) {
            (Ok(true), _) => {
                self.apply(
                    Event::Land(LandEvent::OnBase { head: base }),
                    None,
                    Vec::new(),
                );
            }
            (Ok(false), Ok(true)) => {
                // The base has not moved since the change was verified: its own green CI
                // is the proof.
                self.land_cas(&done, &base, "fast-forward".into());
            }
            (Ok(false), Ok(false)) => {
                let how = match l.method {
                    LandMethod::Merge => Integrate::Merge,
                    LandMethod::Rebase => Integrate::Rebase,
                    LandMethod::Squash => Integrate::Squash,
                };
                let scratch =
                    super::session_dir(self.env.state_dir, &self.w.id).join("land-worktree");
                let message = format!(
                    "Land {} ({}): {}",
                    self.w.branch,
                    self.w.id,
                    self.w.task.lines().next().unwrap_or("")
                );
                match gitops::integrate(
                    &repo.path,
                    &scratch,
                    base.as_str(),
                    done.as_str(),
                    how,
                    &message,
                ) {
                    Ok(Integration::Built(sha)) if sha == base.as_str() => {
                        // Nothing to integrate: the change is in the base already (a rebase or
                        // squash that landed before a crash, or the same change merged by hand).
                        self.apply(
                            Event::Land(LandEvent::OnBase { head: base }),
                            None,
                            Vec::new(),
                        );
                    }
                    Ok(Integration::Built(sha)) => {
                        let sha = Sha::from(sha);
                        let branch = self.land_branch();
                        if let Err(e) =
                            gitops::push_commit(&repo.path, &remote, sha.as_str(), &branch, None)
                        {
                            let reason = format!("pushing the integration failed: {e}");
                            self.apply(Event::Land(LandEvent::Lost { reason }), None, Vec::new());
                            return;
                        }
                        let built = LandEvent::Built {
                            candidate: sha,
                            onto: base,
                        };
                        self.apply(Event::Land(built), None, Vec::new());
                    }
                    Ok(Integration::Conflict(files)) => {
                        let detail = format!(
                            "{} of {} onto {} {} conflicts in {}",
                            l.method.as_str(),
                            done.short(),
                            repo.branch,
                            base.short(),
                            files.join(", ")
                        );
                        self.apply(
                            Event::Land(LandEvent::Conflict { detail }),
                            None,
                            Vec::new(),
                        );
                    }
                    Err(e) => {
                        let reason = format!("building the integration failed: {e}");
                        self.apply(Event::Land(LandEvent::Lost { reason }), None, Vec::new());
                    }
                }
            }
            (Err(e), _) | (_, Err(e)) => {
                tracing::warn!(worker = %self.w.id, error = %e, "landing: ancestry unknown");
            }
        }
    }

    /// Moves the base branch to `to` only if it is still at `expect` (compare-and-swap).
    fn land_cas(&mut self, to: &Sha, expect: &Sha, how: String) {
        let Some(repo) = self.env.config.repo(&self.w.repo).cloned() else {
            return;
        };
        let remote = self.w.remote.clone();
        let moved = gitops::push_commit(
            &repo.path,
            &remote,
            to.as_str(),
            &repo.branch,
            Some(expect.as_str()),
        );
        let event = match moved {
            Ok(()) => LandEvent::Moved {
                to: to.clone(),
                how,
            },
            Err(e) => LandEvent::Lost {
                reason: format!(
                    "{} is no longer at {} ({})",
                    repo.branch,
                    expect.short(),
                    crate::text::escape(&e.to_string())
                ),
            },
        };
        self.apply(Event::Land(event), None, Vec::new());
    }
}
