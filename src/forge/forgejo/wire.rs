//! The wire shapes of the Forgejo API (reference §2), decoded leniently: every field has a
//! default, lists that may be `null` are `Option`, times stay strings (see
//! [`parse_time_ms`](super::parse_time_ms)).

use serde::Deserialize;

/// `GET /api/v1/version`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ServerVersion {
    pub version: String,
}

/// `GET …/actions/tasks`: the key is `workflow_runs` although the entries are tasks.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ActionTaskResponse {
    pub workflow_runs: Option<Vec<ActionTask>>,
    pub total_count: i64,
}

/// One attempt of one job (`modules/structs/repo_actions.go`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ActionTask {
    pub id: i64,
    /// The job's display name.
    pub name: String,
    pub head_branch: String,
    pub head_sha: String,
    /// The run's `index_in_repo`, not its id.
    pub run_number: i64,
    pub event: String,
    pub display_title: String,
    pub status: String,
    /// The workflow file name, e.g. `ci.yml`.
    pub workflow_id: String,
    /// Web UI URL of the run.
    pub url: String,
    pub created_at: Option<String>,
    pub updated_at: Option<String>,
    /// The task's start, despite the name.
    pub run_started_at: Option<String>,
}

/// `GET …/actions/runs` (Forgejo ≥ 12).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ListActionRunResponse {
    pub workflow_runs: Option<Vec<ActionRun>>,
    pub total_count: i64,
}

/// One run (`modules/structs/action.go`). `repository` and `trigger_user` are ignored.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ActionRun {
    pub id: i64,
    pub title: String,
    pub workflow_id: String,
    /// The run number humans see (= tasks' `run_number`).
    pub index_in_repo: i64,
    /// No json tag on the Go side, hence the capitals.
    #[serde(rename = "ScheduleID")]
    pub schedule_id: i64,
    pub prettyref: String,
    /// The SHA: Forgejo runs have no `head_sha` field.
    pub commit_sha: String,
    pub event: String,
    pub trigger_event: String,
    pub status: String,
    pub started: Option<String>,
    pub stopped: Option<String>,
    pub created: Option<String>,
    pub updated: Option<String>,
    /// Nanoseconds; absent when zero.
    pub duration: Option<i64>,
    pub html_url: String,
}

/// `GET …/actions/runs/{id}/jobs` (Forgejo ≥ 16): a bare array of these.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ActionRunJob {
    pub id: i64,
    pub run_id: i64,
    /// 0 (or null) when never picked up.
    pub attempt: Option<i64>,
    pub handle: Option<String>,
    pub repo_id: i64,
    pub owner_id: i64,
    pub name: String,
    pub needs: Option<Vec<String>>,
    pub runs_on: Option<Vec<String>>,
    /// 0 when never picked up or reset by a rerun.
    pub task_id: Option<i64>,
    pub status: String,
}

/// `GET …/commits/{ref}/status`: the latest status of each context (a page of them).
/// A commit without statuses answers an all-empty object (`statuses: null`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct CombinedStatus {
    pub state: String,
    pub sha: String,
    /// The number of statuses on this page.
    pub total_count: i64,
    pub statuses: Option<Vec<CommitStatus>>,
}

/// One commit status (`modules/structs/status.go`): the key is `status`, not `state`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct CommitStatus {
    pub id: i64,
    /// `pending`, `success`, `error`, `failure`, `warning` or (Forgejo ≥ 16) `skipped`.
    pub status: String,
    /// Relative web path `/<owner>/<repo>/actions/runs/<run number>/jobs/<job index>` for
    /// statuses written by Forgejo Actions.
    pub target_url: String,
    pub description: String,
    /// `"<workflow name> / <job name> (<event>)"` for Forgejo Actions.
    pub context: String,
    pub created_at: Option<String>,
}

/// `GET …/branch_protections`: a bare array of these (`structs.BranchProtection`, the same
/// fields v8–v16). Only what orch judges is kept.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct BranchProtection {
    /// Deprecated: the rule name when it is not a glob, else empty.
    pub branch_name: String,
    /// A branch name or a glob (gobwas/glob, `/` as separator).
    pub rule_name: String,
    pub enable_push: bool,
    pub enable_push_whitelist: bool,
    /// Only users who can read the repository are listed (`getWhitelistEntities`).
    pub push_whitelist_usernames: Option<Vec<String>>,
    pub push_whitelist_teams: Option<Vec<String>>,
    pub push_whitelist_deploy_keys: bool,
    pub enable_merge_whitelist: bool,
    pub merge_whitelist_usernames: Option<Vec<String>>,
    pub merge_whitelist_teams: Option<Vec<String>>,
    /// Gitea's (1.23+); no Forgejo v8–v16 sends it.
    pub enable_force_push: Option<bool>,
}

/// `GET /api/v1/user`: the token's account (`structs.User`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct User {
    pub id: i64,
    /// The user name.
    pub login: String,
}
