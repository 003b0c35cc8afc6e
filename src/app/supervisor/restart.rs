//! Restarting CI that is stuck at the PUSHED_TO_CI timeout (`check_ci_then_escalate`'s
//! `if_ci_stuck: restart_ci_and_wait`, decided by `milestone::step`): once, the way the forge
//! allows.
//!
//! - Forgejo: its API has no rerun endpoint in any version orch supports (v8 to v16: a rerun
//!   is only the web UI's `POST …/actions/runs/{n}/rerun`, behind a session and its CSRF
//!   token; `routers/api/v1/api.go` has none), so orch does what the contract does for a
//!   skipped sync job: an empty commit on the tracked one (same tree), pushed to the worker's
//!   own branch as a compare-and-swap on the tracked commit. The push gets a new push run (and
//!   cancels the stuck one of the same ref and workflow); the supervisor then sees the branch
//!   head move and follows CI for the new commit (new work: the worker's change unchanged).
//! - The local forge: a new run of the same commit, the stuck one cancelled first (its runner
//!   and jobs killed), so the verdict counts the new run (the newest of its workflow).
//!
//! Which way is the forge's to say ([`Forge::rerun`]: `None` where there is no rerun); the
//! supervisor names no forge kind.

use super::Supervisor;
use super::journal::Fact;
use crate::forge::Forge;
use crate::gitops;
use crate::sha::Sha;

impl<F: Forge + 'static> Supervisor<'_, F> {
    /// Restarts CI for `sha` and records what was done (or why it could not be).
    pub(super) fn restart_ci(&mut self, sha: &Sha) {
        let git_ref = format!("refs/heads/{}", self.w.branch);
        let rerun = self
            .ci
            .follower
            .forge()
            .rerun(&self.w.repo, &git_ref, sha.as_str());
        let outcome = match rerun {
            Some(done) => done.map_err(|e| e.to_string()),
            // This forge has no rerun: a new push of the same tree starts CI again.
            None => self.push_empty_commit(sha),
        };
        let fact = match outcome {
            Ok(detail) => Fact::Logged {
                kind: "ci_restart_done",
                detail,
            },
            Err(e) => {
                tracing::warn!(worker = %self.w.id, error = %e, "CI restart failed");
                Fact::Logged {
                    kind: "ci_restart_failed",
                    detail: format!("CI for {} could not be restarted: {e}", sha.short()),
                }
            }
        };
        self.record(vec![fact]);
        self.ci.follower.forget(&self.w.repo, sha);
        self.ci.head_may_have_moved = true;
        self.ci.next_poll_ms = 0;
    }

    /// A forge without a rerun (Forgejo): an empty commit on `sha`, pushed to the worker's
    /// branch if it is still at `sha`.
    fn push_empty_commit(&mut self, sha: &Sha) -> Result<String, String> {
        let repo = self
            .env
            .config
            .repo(&self.w.repo)
            .cloned()
            .ok_or_else(|| format!("repository {} is not configured", self.w.repo))?;
        let remote = crate::app::spawn::push_remote(self.env.config, self.env.state_dir, &repo)?;
        // The worker may have pushed from a clone of its own: the commit is on the remote.
        if gitops::resolve(&repo.path, &format!("{sha}^{{commit}}")).is_err() {
            gitops::fetch(&repo.path, &remote).map_err(|e| e.to_string())?;
        }
        let message = format!(
            "ci: restart CI (orch: the run for {} was stuck)",
            sha.short()
        );
        let tree = format!("{sha}^{{tree}}");
        let restart = gitops::git(
            &repo.path,
            &[
                "-c",
                "user.name=orch",
                "-c",
                "user.email=orch@localhost",
                "commit-tree",
                &tree,
                "-p",
                sha.as_str(),
                "-m",
                &message,
            ],
        )
        .map_err(|e| e.to_string())?
        .trim()
        .to_string();
        gitops::push_commit(&repo.path, &remote, &restart, &self.w.branch, Some(sha))
            .map_err(|e| format!("push of {} to {}: {e}", &restart[..12], self.w.branch))?;
        // The worker's own branch follows (same tree: its worktree stays clean), so its next
        // push is a fast-forward; only where the clone is orch's to write (no worker.user).
        if self.env.config.worker.users.is_empty() {
            let _ = gitops::git(
                std::path::Path::new(&self.w.worktree),
                &[
                    "update-ref",
                    &format!("refs/heads/{}", self.w.branch),
                    &restart,
                    sha.as_str(),
                ],
            );
        }
        Ok(format!(
            "CI for {} restarted: empty commit {} pushed to {} (Forgejo's API has no rerun)",
            sha.short(),
            &restart[..12],
            self.w.branch
        ))
    }

    /// The runs (on the local forge; on Forgejo ≥ 16 those of the commits orch pushed) this worker's
    /// supervision started that nothing waits for once it lets go: its landing's integration
    /// branch and its downstream checks (a dependent's run left going after a landing ended
    /// `broken` burned a core for 15 minutes), and — its change landed or the worker cancelled
    /// — its own branch's. Runs of a worker that may go on (BLOCKED, FAILED: a respawn follows
    /// the same commit) are left to finish.
    pub(super) fn cancel_abandoned_runs(&self) {
        use crate::forge::Abandoned;
        let id = &self.w.id;
        let sha = |s: &Option<crate::sha::Sha>| s.as_ref().map(|s| s.to_string());
        let mut refs = Vec::new();
        if let Some(l) = &self.w.progress.landing {
            refs.push(Abandoned {
                repo: self.w.repo.clone(),
                branch: format!("{}-land", self.w.branch),
                sha: sha(&l.candidate),
            });
            refs.extend(l.downstream.iter().flat_map(|d| {
                ["verify", "baseline"].map(|kind| Abandoned {
                    repo: d.repo.clone(),
                    branch: format!("orch/{kind}/{id}"),
                    sha: sha(&d.sha),
                })
            }));
        }
        // Its own branch — never a base branch a `land: direct` worker pushed to: the base's
        // runs are everyone's.
        if matches!(
            self.w.milestone(),
            crate::milestone::Milestone::Done | crate::milestone::Milestone::Cancelled
        ) && self.w.branch == self.w.local_branch()
        {
            refs.push(Abandoned {
                repo: self.w.repo.clone(),
                branch: self.w.branch.clone(),
                sha: sha(&self.w.progress.tracked_sha),
            });
        }
        let note = format!("cancelled: nothing waits for this run any more ({id} let go)");
        match self.ci.follower.forge().cancel_runs_of_refs(&refs, &note) {
            Ok(runs) if !runs.is_empty() => {
                tracing::info!(worker = %id, runs = %runs.join(", "), "runs nothing waits for cancelled");
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(worker = %id, error = %e, "cannot cancel the runs nothing waits for");
            }
        }
    }
}
