//! Pull requests as the [`Forge`](super::Forge) trait answers them, whichever forge has them
//! (`land.policy: pull_request`; Forgejo today): what orch reads of one, and how a merge ended.

/// What orch reads of a pull request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullRequest {
    pub number: i64,
    /// The head branch's tip now (Forgejo reads it live).
    pub head_sha: String,
    /// False while the server is still checking, on a conflict, or for a work-in-progress
    /// title; never about approvals or status checks (those refuse the merge itself).
    pub mergeable: bool,
    pub merged: bool,
    pub merge_commit_sha: Option<String>,
    pub html_url: Option<String>,
}

/// How a merge request ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MergeAnswer {
    Merged,
    /// The server is still checking (405 "Please try again later"): ask again later.
    NotYet(String),
    /// Refused for good (branch protection, head out of date, not allowed, …): the server's
    /// words, for the alert.
    Refused {
        status: u16,
        message: String,
    },
}
