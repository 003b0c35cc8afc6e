//! Pull requests on Forgejo, for `land.policy: pull_request`: open one from the worker's branch,
//! read it (head, mergeability, merged), merge it pinned to the head commit orch verified. The
//! shapes and refusals are Forgejo's own, v8–v16 (docs/forgejo-pulls.md, with file and line in
//! Forgejo's source): 201 on create, 409 when an open one exists for the same head and base
//! (its number is the `issue_id` in the message), 200 with an empty body on merge, 405 for the
//! refusals (already merged: an empty message; "Please try again later" while the server checks
//! mergeability or on conflict; `not allowed to merge [reason: …]` for branch protection), 409
//! `head out of date` when the pinned head is not the branch tip.

use super::ForgejoForge;
use super::http::server_message;
use crate::config::Repo;
use crate::forge::pull::{MergeAnswer, PullRequest};
use crate::forge::{BlockingKind, ForgeError};
use reqwest::header::AUTHORIZATION;
use serde::Deserialize;
use std::sync::atomic::Ordering;

#[derive(Deserialize)]
struct WireBranch {
    #[serde(default)]
    sha: String,
}

#[derive(Deserialize)]
struct WirePull {
    number: i64,
    head: WireBranch,
    #[serde(default)]
    mergeable: bool,
    #[serde(default)]
    merged: bool,
    #[serde(default)]
    merge_commit_sha: Option<String>,
    #[serde(default)]
    html_url: Option<String>,
}

impl From<WirePull> for PullRequest {
    fn from(w: WirePull) -> Self {
        PullRequest {
            number: w.number,
            head_sha: w.head.sha,
            mergeable: w.mergeable,
            merged: w.merged,
            merge_commit_sha: w.merge_commit_sha.filter(|s| !s.is_empty()),
            html_url: w.html_url,
        }
    }
}

/// The number of the existing pull request a 409 on create names (`issue_id: N`).
fn existing_number(message: &str) -> Option<i64> {
    let rest = message.split("issue_id: ").nth(1)?;
    rest.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

impl ForgejoForge {
    /// One write request (POST), no retries (a retried merge could merge twice): the status
    /// and body of any answer, an error only when none came.
    pub(super) async fn post(
        &self,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<(u16, String), ForgeError> {
        let shown = format!("/api/v1{path}");
        self.requests.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(method = "POST", path = %shown, "forgejo request");
        let mut req = self
            .client
            .post(format!("{}{}", self.api, path))
            .json(body)
            .timeout(self.request_timeout);
        if let Some(auth) = &self.auth {
            req = req.header(AUTHORIZATION, auth.clone());
        }
        match req.send().await {
            Ok(resp) => {
                let status = resp.status().as_u16();
                let text = resp.text().await.unwrap_or_default();
                Ok((status, text))
            }
            Err(e) => Err(ForgeError::Transient {
                message: self.scrub(&format!("POST {shown} failed: {e}")),
                attempts: 0,
            }),
        }
    }

    fn pulls_path(&self, repo: &Repo) -> String {
        format!("{}/pulls", self.repo_path(repo))
    }

    /// The pull request `number` of `repo`.
    pub async fn pull(&self, repo: &Repo, number: i64) -> Result<PullRequest, ForgeError> {
        let path = format!("{}/{number}", self.pulls_path(repo));
        let wire: WirePull = self.get_json(&path, &[], &self.full_name(repo)).await?;
        Ok(wire.into())
    }

    /// Opens a pull request from `head` into `base` (or finds the open one for them).
    pub async fn open_pull(
        &self,
        repo: &Repo,
        head: &str,
        base: &str,
        title: &str,
        body: &str,
    ) -> Result<PullRequest, ForgeError> {
        let path = self.pulls_path(repo);
        let payload = serde_json::json!({"head": head, "base": base, "title": title, "body": body});
        let (status, text) = self.post(&path, &payload).await?;
        match status {
            200 | 201 => {
                let wire: WirePull = self.decode(&text, &path)?;
                Ok(wire.into())
            }
            409 => {
                let message = server_message(&self.scrub(&text)).unwrap_or_default();
                match existing_number(&message) {
                    Some(n) => self.pull(repo, n).await,
                    None => Err(self.refusal(status, "POST", &path, &text)),
                }
            }
            _ => Err(self.refusal(status, "POST", &path, &text)),
        }
    }

    /// Merges pull request `number` with `style` (merge, rebase, squash), pinned to
    /// `head_commit_id`: a head that moved after orch verified it is refused by the server.
    pub async fn merge_pull(
        &self,
        repo: &Repo,
        number: i64,
        style: &str,
        head_commit_id: &str,
        title: &str,
    ) -> Result<MergeAnswer, ForgeError> {
        let path = format!("{}/{number}/merge", self.pulls_path(repo));
        let payload = serde_json::json!({
            "Do": style,
            "head_commit_id": head_commit_id,
            "MergeTitleField": title,
            "delete_branch_after_merge": false,
        });
        let (status, text) = self.post(&path, &payload).await?;
        let message = server_message(&self.scrub(&text)).unwrap_or_default();
        Ok(match status {
            200..=299 => MergeAnswer::Merged,
            405 if message.contains("try again later") => MergeAnswer::NotYet(message),
            // Already merged (an empty message): by this request before an answer was lost,
            // or by a person. What it merged is read from the pull request.
            405 if message.is_empty() && self.pull(repo, number).await?.merged => {
                MergeAnswer::Merged
            }
            401 | 403 | 404 | 405 | 409 | 422 => MergeAnswer::Refused {
                status,
                message: if message.is_empty() {
                    format!("HTTP {status}")
                } else {
                    message
                },
            },
            _ => return Err(self.refusal(status, "POST", &path, &text)),
        })
    }

    fn refusal(&self, status: u16, method: &str, path: &str, body: &str) -> ForgeError {
        let server = server_message(&self.scrub(body))
            .map(|m| format!(" (server says: {m})"))
            .unwrap_or_default();
        if status == 429 || status >= 500 {
            return ForgeError::Transient {
                message: format!("{method} /api/v1{path} answered HTTP {status}{server}"),
                attempts: 0,
            };
        }
        ForgeError::Blocking {
            kind: match status {
                401 => BlockingKind::BadToken,
                403 => BlockingKind::NoAccess,
                404 => BlockingKind::NotFound,
                _ => BlockingKind::Other,
            },
            message: format!(
                "Forgejo answered HTTP {status} to {method} /api/v1{path}{server} (the token needs write:repository to open and merge pull requests)"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pull_request_decodes_from_forgejos_shape() {
        // services/convert/pull.go (docs/forgejo-pulls.md §2): pointers without omitempty are
        // null until merged; `number` is the index, `url` varies by version, html_url never.
        let open: WirePull = serde_json::from_str(
            r#"{"id":12,"url":"https://host/o/r/pulls/3","number":3,"title":"Land #42","state":"open",
                "html_url":"https://host/o/r/pulls/3","mergeable":true,"merged":false,"merged_at":null,
                "merge_commit_sha":null,"merged_by":null,
                "base":{"label":"main","ref":"main","sha":"b1","repo_id":1,"repo":{}},
                "head":{"label":"orch/x","ref":"orch/x","sha":"h1","repo_id":1,"repo":{}},
                "merge_base":"b0","flow":0}"#,
        )
        .unwrap();
        let p = PullRequest::from(open);
        assert_eq!((p.number, p.head_sha.as_str()), (3, "h1"));
        assert!(p.mergeable && !p.merged && p.merge_commit_sha.is_none());
        let merged: WirePull = serde_json::from_str(
            r#"{"number":3,"state":"closed","mergeable":false,"merged":true,
                "merged_at":"2026-01-01T00:00:00Z","merge_commit_sha":"m1",
                "head":{"ref":"orch/x","sha":"h1"},"base":{"ref":"main","sha":"m1"}}"#,
        )
        .unwrap();
        let p = PullRequest::from(merged);
        assert!(p.merged);
        assert_eq!(p.merge_commit_sha.as_deref(), Some("m1"));
    }

    #[test]
    fn the_number_of_an_existing_pull_is_read_from_forgejos_409() {
        // models/issues/pull.go ErrPullRequestAlreadyExists.Error() (docs/forgejo-pulls.md).
        let m = "pull request already exists for these targets [id: 7, issue_id: 12, head_repo_id: 3, base_repo_id: 3, head_branch: orch/x, base_branch: main]";
        assert_eq!(existing_number(m), Some(12));
        assert_eq!(existing_number("something else"), None);
    }
}
