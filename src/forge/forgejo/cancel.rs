//! Cancelling the runs nothing waits for any more (issue 34: every run orch starts is cancelled
//! once nothing waits for it). Forgejo ≥ 16 has `POST …/actions/runs/{run_id}/cancel`
//! (`routers/api/v1/api.go`: `reqToken(), reqRepoWriter(unit.TypeActions)`, 204 also for a
//! finished run). orch pushed the branch, so it knows the commit: the runs are found by
//! `head_sha` (every version from 12) and kept when their `prettyref` is the abandoned branch —
//! never a base branch's run of the same commit (a fast-forward landing puts the candidate on
//! the base too). Below 16 there is no such route: nothing is asked, nothing cancelled.

use super::{ApiPath, ForgejoForge};
use crate::ci::JobStatus;
use crate::forge::{Abandoned, BlockingKind, ForgeError};

/// How long a supervisor letting go waits for the forge, all requests together.
const CANCEL_BOUND: std::time::Duration = std::time::Duration::from_secs(20);

impl ForgejoForge {
    /// [`crate::forge::Forge::cancel_runs_of_refs`] for Forgejo: blocking, on a runtime of its
    /// own (a supervisor calls it from its main thread as it lets go).
    pub(super) fn cancel_abandoned(
        &self,
        abandoned: &[Abandoned],
    ) -> Result<Vec<String>, ForgeError> {
        let with_sha: Vec<(&Abandoned, &str)> = abandoned
            .iter()
            .filter_map(|a| a.sha.as_deref().map(|s| (a, s)))
            .collect();
        if with_sha.is_empty() {
            return Ok(Vec::new());
        }
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| ForgeError::Transient {
                message: format!("no runtime: {e}"),
                attempts: 0,
            })?;
        rt.block_on(async {
            match tokio::time::timeout(CANCEL_BOUND, self.cancel_all(&with_sha)).await {
                Ok(r) => r,
                Err(_) => Err(ForgeError::Transient {
                    message: format!("no answer within {CANCEL_BOUND:?}"),
                    attempts: 0,
                }),
            }
        })
    }

    async fn cancel_all(
        &self,
        abandoned: &[(&Abandoned, &str)],
    ) -> Result<Vec<String>, ForgeError> {
        if self.api_path().await? != ApiPath::RunsAndJobs {
            return Ok(Vec::new()); // Forgejo < 16: no cancel route.
        }
        let mut cancelled = Vec::new();
        for (a, sha) in abandoned {
            let sha = sha.to_ascii_lowercase();
            let Some(runs) = self.fetch_runs(&a.repo, &sha).await? else {
                return Ok(cancelled);
            };
            for run in runs
                .iter()
                .filter(|r| r.prettyref == a.branch && !JobStatus::parse(&r.status).is_done())
            {
                let path = format!(
                    "{}/actions/runs/{}/cancel",
                    self.repo_path_named(&a.repo),
                    run.id
                );
                let (status, body) = self.post(&path, &serde_json::json!({})).await?;
                match status {
                    200..=299 => {
                        cancelled.push(format!("{} #{} ({})", a.repo, run.index_in_repo, a.branch))
                    }
                    // A dev build of 16 before the route landed.
                    404 if body.trim_start().starts_with("404 page not found") => {
                        return Ok(cancelled);
                    }
                    _ => {
                        return Err(ForgeError::Blocking {
                            kind: match status {
                                401 => BlockingKind::BadToken,
                                403 => BlockingKind::NoAccess,
                                404 => BlockingKind::NotFound,
                                _ => BlockingKind::Other,
                            },
                            message: format!(
                                "Forgejo refused to cancel run #{} of {}/{} ({status}): {}",
                                run.index_in_repo,
                                self.full_name_of(&a.repo),
                                a.branch,
                                self.scrub(body.trim())
                            ),
                        });
                    }
                }
            }
        }
        Ok(cancelled)
    }
}
