//! CI as orch sees it, whichever forge reports it: runs, jobs and their statuses in Forgejo's
//! words, and the verdict (`verdict.rs`) — pure data and pure functions, no client, no HTTP.
//!
//! Statuses use Forgejo's words everywhere (`waiting`, `running`, `success`, `failure`,
//! `cancelled`, `skipped`, `blocked`, `unknown`), including the local forge's.

pub mod verdict;

/// A job's (or run's) status, as Forgejo names it (`models/actions/status.go`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
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
#[derive(
    Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[schemars(deny_unknown_fields)]
pub struct CiJob {
    pub name: String,
    pub status: JobStatus,
    /// 1-based attempt number of this (latest) attempt.
    pub attempt: u32,
    /// The forge's job id (Forgejo ≥ 16 job id, or the local forge's), for log retrieval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<i64>,
    /// Still running past its own time limit (the local forge, whose runner enforces each
    /// job's `timeout`: only a stuck runner lets a job run past it; Forgejo's API does not
    /// tell a job's limit).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub past_limit: bool,
}

/// One workflow run triggered by a commit.
#[derive(
    Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[schemars(deny_unknown_fields)]
pub struct CiRun {
    /// The forge's run id (database id on Forgejo; not the number shown in the UI).
    pub id: i64,
    /// The per-repository run number humans see (`index_in_repo` / `run_number`).
    pub number: i64,
    /// The trigger event (`push`, `workflow_dispatch`, …). Only `push` runs count as proof.
    pub event: String,
    /// The run's aggregate status when the forge reports one (not on the tasks-only path).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<JobStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The latest attempt of each job the forge knows about. A job no runner has picked up
    /// may be absent (Forgejo < 16): absent means pending, never failed.
    pub jobs: Vec<CiJob>,
    /// The ref the run was pushed to (`refs/heads/main`) when the forge says: one commit can
    /// have runs on several branches (a dependent's base head, checked again on a
    /// verification branch with an upstream's change), which mean different things.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git_ref: Option<String>,
}
