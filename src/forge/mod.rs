//! Forges: where CI runs. One trait, two implementations — Forgejo over HTTP and the local
//! forge — so the supervisor never knows which one it talks to.
//!
//! Statuses use Forgejo's words everywhere (`waiting`, `running`, `success`, `failure`,
//! `cancelled`, `skipped`, `blocked`, `unknown`), including the local forge's.

pub mod follow;
pub mod forgejo;
pub mod local;
pub mod verdict;

use crate::config::Repo;
use std::future::Future;
use std::time::Duration;

/// A job's (or run's) status, as Forgejo names it (`models/actions/status.go`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobStatus {
    Unknown,
    Waiting,
    Running,
    Success,
    Failure,
    Cancelled,
    Skipped,
    Blocked,
}

impl JobStatus {
    /// Parses Forgejo's status word; anything else is `Unknown` (never a failure).
    pub fn parse(s: &str) -> JobStatus {
        match s {
            "waiting" => JobStatus::Waiting,
            "running" => JobStatus::Running,
            "success" => JobStatus::Success,
            "failure" => JobStatus::Failure,
            "cancelled" => JobStatus::Cancelled,
            "skipped" => JobStatus::Skipped,
            "blocked" => JobStatus::Blocked,
            _ => JobStatus::Unknown,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Unknown => "unknown",
            JobStatus::Waiting => "waiting",
            JobStatus::Running => "running",
            JobStatus::Success => "success",
            JobStatus::Failure => "failure",
            JobStatus::Cancelled => "cancelled",
            JobStatus::Skipped => "skipped",
            JobStatus::Blocked => "blocked",
        }
    }

    /// Forgejo's `IsDone()`: success, failure, cancelled, skipped.
    pub fn is_done(self) -> bool {
        matches!(
            self,
            JobStatus::Success | JobStatus::Failure | JobStatus::Cancelled | JobStatus::Skipped
        )
    }
}

impl std::fmt::Display for JobStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The latest known attempt of one job of a run.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CiJob {
    pub name: String,
    pub status: JobStatus,
    /// 1-based attempt number of this (latest) attempt.
    pub attempt: u32,
    /// The forge's job id (Forgejo ≥ 16 job id, or the local forge's), for log retrieval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<i64>,
}

/// One workflow run triggered by a commit.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CiRun {
    /// The forge's run id (database id on Forgejo; not the number shown in the UI).
    pub id: i64,
    /// The per-repository run number humans see (`index_in_repo` / `run_number`).
    pub number: i64,
    /// The trigger event (`push`, `workflow_dispatch`, …). Only `push` runs count as proof.
    pub event: String,
    /// The run's aggregate status when the forge reports one (not on the tasks-only path).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub status: Option<JobStatus>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The latest attempt of each job the forge knows about. A job no runner has picked up
    /// may be absent (Forgejo < 16): absent means pending, never failed.
    pub jobs: Vec<CiJob>,
}

/// Backoff for transient forge errors (from the contract's failure taxonomy).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    pub initial: Duration,
    pub max: Duration,
    pub multiplier: f64,
    /// Retries after the first attempt.
    pub max_retries: u32,
}

impl RetryPolicy {
    /// The delay before retry number `n` (0-based).
    pub fn delay(&self, n: u32) -> Duration {
        let d = self.initial.as_secs_f64() * self.multiplier.powi(n as i32);
        Duration::from_secs_f64(d.min(self.max.as_secs_f64()))
    }
}

/// Why a forge could not answer, classified by the contract's failure taxonomy.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ForgeError {
    /// Connection errors, timeouts, 429, 502/503/504 — still failing after the retries.
    #[error("forge unavailable (transient, retried {attempts}x): {message}")]
    Transient { message: String, attempts: u32 },
    /// 401/403/404 and the like: retrying will not help, an operator must act.
    #[error("{message}")]
    Blocking { kind: BlockingKind, message: String },
    /// The forge answered with something that is not what its API returns.
    #[error("forge returned a malformed response: {message}")]
    Malformed { message: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockingKind {
    /// 401: the token is missing, wrong or expired.
    BadToken,
    /// 403: the token lacks access (e.g. no Actions read permission).
    NoAccess,
    /// 404: unknown repository, Actions disabled, or a private repository without access.
    NotFound,
    /// Anything else that retrying will not fix (e.g. 400, unsupported server version).
    Other,
}

impl ForgeError {
    pub fn is_blocking(&self) -> bool {
        matches!(self, ForgeError::Blocking { .. })
    }
}

/// What orch needs from a forge.
pub trait Forge: Send + Sync {
    /// The runs that the commit `sha` (full hex) triggered in `repo`, with the latest attempt
    /// of each of their jobs. `pushed_ms` (when known) bounds how far back a forge that has
    /// no SHA filter must page.
    fn runs_for_commit(
        &self,
        repo: &Repo,
        sha: &str,
        pushed_ms: Option<i64>,
    ) -> impl Future<Output = Result<Vec<CiRun>, ForgeError>> + Send;

    /// The commit at the head of `branch` on the forge, if the branch exists.
    fn branch_head(
        &self,
        repo: &Repo,
        branch: &str,
    ) -> impl Future<Output = Result<Option<String>, ForgeError>> + Send;

    /// The log of `job` for commit `sha`, where the forge keeps logs (`None` if it has none).
    fn job_log(
        &self,
        repo: &Repo,
        sha: &str,
        job: &str,
    ) -> impl Future<Output = Result<Option<String>, ForgeError>> + Send;
}

/// The forge chosen by `forge.kind`, so callers need not be generic over it.
pub enum AnyForge {
    Forgejo(forgejo::ForgejoForge),
    Local(local::LocalForge),
}

impl AnyForge {
    /// Builds the configured forge. Forgejo needs its token variable set.
    pub fn from_config(
        config: &crate::config::Config,
        contract: &crate::contract::Contract,
        state_dir: &std::path::Path,
    ) -> Result<AnyForge, String> {
        match config.forge.kind {
            crate::config::ForgeKind::Local => {
                Ok(AnyForge::Local(local::LocalForge::new(state_dir, config)))
            }
            crate::config::ForgeKind::Forgejo => {
                let token = config.forge_token().map_err(|e| e.to_string())?;
                let url = config.forge.url.as_deref().unwrap_or_default();
                let owner = config.forge.owner.as_deref().unwrap_or_default();
                forgejo::ForgejoForge::new(
                    url,
                    owner,
                    token,
                    config.forge.request_timeout,
                    contract.transient_backoff,
                )
                .map(AnyForge::Forgejo)
                .map_err(|e| e.to_string())
            }
        }
    }
}

impl Forge for AnyForge {
    async fn runs_for_commit(
        &self,
        repo: &Repo,
        sha: &str,
        pushed_ms: Option<i64>,
    ) -> Result<Vec<CiRun>, ForgeError> {
        match self {
            AnyForge::Forgejo(f) => f.runs_for_commit(repo, sha, pushed_ms).await,
            AnyForge::Local(f) => f.runs_for_commit(repo, sha, pushed_ms).await,
        }
    }

    async fn branch_head(&self, repo: &Repo, branch: &str) -> Result<Option<String>, ForgeError> {
        match self {
            AnyForge::Forgejo(f) => f.branch_head(repo, branch).await,
            AnyForge::Local(f) => f.branch_head(repo, branch).await,
        }
    }

    async fn job_log(
        &self,
        repo: &Repo,
        sha: &str,
        job: &str,
    ) -> Result<Option<String>, ForgeError> {
        match self {
            AnyForge::Forgejo(f) => f.job_log(repo, sha, job).await,
            AnyForge::Local(f) => f.job_log(repo, sha, job).await,
        }
    }
}
