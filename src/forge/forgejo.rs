//! The Forgejo forge: CI state over Forgejo's REST API.
//!
//! Which endpoints answer depends on the server version (see
//! `shared/reference/forgejo-actions-api.md` §1), so the version is probed once per client
//! (`GET /api/v1/version`) and the best path is used:
//!
//! | Forgejo | Path | Requests per look at a commit |
//! |---|---|---|
//! | ≥ 16 | `runs?head_sha=` + `runs/{id}/jobs` per push run | 1 + push runs |
//! | 12–15 | `runs?head_sha=` + `tasks` pages (only if a push run exists) | 1 + pages |
//! | 8–11 | `tasks` pages only (no SHA filter: filtered here) | pages |
//!
//! Errors follow the contract taxonomy: connection errors, timeouts, 429 and 5xx are
//! retried per [`RetryPolicy`] and then reported as [`ForgeError::Transient`]; 401, 403, 404
//! and other 4xx are [`ForgeError::Blocking`]; undecodable bodies are
//! [`ForgeError::Malformed`]. The token only ever goes into the `Authorization` header: it is
//! never logged, and server bodies are scrubbed of it before they reach an error message.

use super::{BlockingKind, Forge, ForgeError};
use crate::ci::{CiJob, CiRun, JobStatus};
use crate::config::Repo;
use crate::contract::RetryPolicy;
use crate::secret::Secret;
use reqwest::header::{AUTHORIZATION, HeaderValue, RETRY_AFTER};
use serde::de::DeserializeOwned;
use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::OnceCell;

/// Page size for `/actions/tasks` and `/actions/runs` (Forgejo's default maximum).
pub const PAGE_LIMIT: usize = 50;
/// At most this many `/actions/tasks` pages are read for one commit.
pub const MAX_TASK_PAGES: u32 = 20;
/// Allowance for the clock difference between orch's host and the server when the push
/// time bounds task paging on the tasks-only path.
pub const CLOCK_SKEW_MS: i64 = 5 * 60_000;

/// The wire shapes of the Forgejo API (reference §2), decoded leniently: every field has a
/// default, lists that may be `null` are `Option`, times stay strings (see [`parse_time_ms`]).
pub mod wire {
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
}

/// A Forgejo server version (`major.minor.patch` of the `/version` answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ForgejoVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl ForgejoVersion {
    /// Parses the leading `major[.minor[.patch]]` of e.g. `11.0.1+gitea-1.22.0` or
    /// `16.0.0-dev-12-gabc`; `None` if it does not start with a number.
    pub fn parse(text: &str) -> Option<ForgejoVersion> {
        let text = text.trim();
        let text = text.strip_prefix('v').unwrap_or(text);
        let mut parts = [0u32; 3];
        let mut rest = text;
        for (i, slot) in parts.iter_mut().enumerate() {
            let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
            if digits == 0 {
                if i == 0 {
                    return None;
                }
                break;
            }
            *slot = rest[..digits].parse().ok()?;
            rest = &rest[digits..];
            match rest.strip_prefix('.') {
                Some(r) => rest = r,
                None => break,
            }
        }
        Some(ForgejoVersion {
            major: parts[0],
            minor: parts[1],
            patch: parts[2],
        })
    }
}

impl fmt::Display for ForgejoVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// How CI state is read from a given server version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ApiPath {
    /// Forgejo 8–11: `/actions/tasks` only.
    TasksOnly,
    /// Forgejo 12–15: `/actions/runs?head_sha=` plus `/actions/tasks`.
    RunsAndTasks,
    /// Forgejo ≥ 16: `/actions/runs?head_sha=` plus `/actions/runs/{id}/jobs`.
    RunsAndJobs,
}

impl ApiPath {
    /// `None` below Forgejo 8 (no Actions API).
    pub fn for_version(v: ForgejoVersion) -> Option<ApiPath> {
        match v.major {
            0..=7 => None,
            8..=11 => Some(ApiPath::TasksOnly),
            12..=15 => Some(ApiPath::RunsAndTasks),
            _ => Some(ApiPath::RunsAndJobs),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ApiPath::TasksOnly => "tasks",
            ApiPath::RunsAndTasks => "runs+tasks",
            ApiPath::RunsAndJobs => "runs+jobs",
        }
    }
}

/// A server time (RFC 3339 with offset) in epoch milliseconds; `None` when absent,
/// unparsable or the epoch itself (Forgejo's "unset").
pub fn parse_time_ms(text: Option<&str>) -> Option<i64> {
    let ts: jiff::Timestamp = text?.trim().parse().ok()?;
    let ms = ts.as_millisecond();
    (ms != 0).then_some(ms)
}

/// [`Forge`] over Forgejo's HTTP API. One client per server; cheap to share by reference.
pub struct ForgejoForge {
    /// `<base>/api/v1`, no trailing slash.
    api: String,
    owner: String,
    token: Option<Secret>,
    auth: Option<HeaderValue>,
    client: reqwest::Client,
    request_timeout: Duration,
    retry: RetryPolicy,
    version: OnceCell<(ForgejoVersion, ApiPath)>,
    requests: AtomicU64,
}

impl fmt::Debug for ForgejoForge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ForgejoForge")
            .field("api", &self.api)
            .field("owner", &self.owner)
            .field("token", &self.token.as_ref().map(|_| "[redacted]"))
            .field("request_timeout", &self.request_timeout)
            .field("retry", &self.retry)
            .field("version", &self.version.get())
            .field("requests", &self.requests_made())
            .finish()
    }
}

/// Where a request is aimed, for error messages.
#[derive(Clone, Copy)]
struct Target<'a> {
    /// `owner/name` when the request is about a repository.
    repo: Option<&'a str>,
    /// A 404 is an answer (`Ok(None)`), not an error.
    missing_ok: bool,
}

impl ForgejoForge {
    /// `base_url` is the server root (`https://forgejo.example`, sub-paths allowed; a
    /// trailing `/api/v1` is accepted too). `owner` owns every repository; the repository
    /// name on the forge is `repo.name`.
    pub fn new(
        base_url: &str,
        owner: &str,
        token: Option<Secret>,
        request_timeout: Duration,
        retry: RetryPolicy,
    ) -> Result<Self, ForgeError> {
        let other = |message: String| ForgeError::Blocking {
            kind: BlockingKind::Other,
            message,
        };
        let base = base_url.trim().trim_end_matches('/');
        let parsed = reqwest::Url::parse(base)
            .map_err(|e| other(format!("forge.url \"{base}\" is not a valid URL: {e}")))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(other(format!(
                "forge.url \"{base}\" must start with http:// or https://"
            )));
        }
        if owner.trim().is_empty() {
            return Err(other("forge.owner is empty".into()));
        }
        let api = if base.ends_with("/api/v1") {
            base.to_string()
        } else {
            format!("{base}/api/v1")
        };
        let auth = match &token {
            None => None,
            Some(t) => {
                let mut v = HeaderValue::from_str(&format!("token {}", t.expose())).map_err(
                    |_| ForgeError::Blocking {
                        kind: BlockingKind::BadToken,
                        message: "the forge token contains characters that cannot be sent in an HTTP header: check the variable named by forge.token_env".into(),
                    },
                )?;
                v.set_sensitive(true);
                Some(v)
            }
        };
        let client = reqwest::Client::builder()
            .user_agent(concat!("orch/", env!("CARGO_PKG_VERSION")))
            .timeout(request_timeout)
            .connect_timeout(request_timeout)
            // Our own retry loop decides (and counts) every request.
            .retry(reqwest::retry::never())
            .build()
            .map_err(|e| other(format!("cannot build the HTTP client: {e}")))?;
        Ok(ForgejoForge {
            api,
            owner: owner.to_string(),
            token,
            auth,
            client,
            request_timeout,
            retry,
            version: OnceCell::new(),
            requests: AtomicU64::new(0),
        })
    }

    /// HTTP requests actually sent by this client so far (retries and the version probe
    /// included).
    pub fn requests_made(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// The server version, probed on first use and cached for the client's lifetime.
    pub async fn version(&self) -> Result<ForgejoVersion, ForgeError> {
        Ok(self.detect().await?.0)
    }

    /// The API path this client uses for the server's version.
    pub async fn api_path(&self) -> Result<ApiPath, ForgeError> {
        Ok(self.detect().await?.1)
    }

    async fn detect(&self) -> Result<(ForgejoVersion, ApiPath), ForgeError> {
        self.version
            .get_or_try_init(|| async {
                let path = "/version";
                let body = self
                    .get(
                        path,
                        &[],
                        Target {
                            repo: None,
                            missing_ok: false,
                        },
                    )
                    .await?
                    .unwrap_or_default();
                let v: wire::ServerVersion = self.decode(&body, path)?;
                let version = ForgejoVersion::parse(&v.version).ok_or_else(|| {
                    ForgeError::Malformed {
                        message: format!(
                            "GET /api/v1/version: \"{}\" is not a version number",
                            self.scrub(&v.version)
                        ),
                    }
                })?;
                let path = ApiPath::for_version(version).ok_or_else(|| {
                    ForgeError::Blocking {
                        kind: BlockingKind::Other,
                        message: format!(
                            "the forge reports version {} ({}): orch needs Forgejo 8 or newer for the Actions API (Gitea is not supported)",
                            version,
                            self.scrub(v.version.trim())
                        ),
                    }
                })?;
                tracing::debug!(%version, path = path.as_str(), "forgejo version detected");
                Ok((version, path))
            })
            .await
            .copied()
    }

    fn scrub(&self, text: &str) -> String {
        match &self.token {
            Some(t) => t.scrub(text),
            None => text.to_string(),
        }
    }

    fn repo_path(&self, repo: &Repo) -> String {
        format!("/repos/{}/{}", encode(&self.owner), encode(&repo.name))
    }

    fn full_name(&self, repo: &Repo) -> String {
        format!("{}/{}", self.owner, repo.name)
    }

    /// One GET with retries. `Ok(None)` only for a 404 when `target.missing_ok`.
    async fn get(
        &self,
        path: &str,
        query: &[(&str, String)],
        target: Target<'_>,
    ) -> Result<Option<String>, ForgeError> {
        let shown = format!("/api/v1{path}");
        let mut url = reqwest::Url::parse(&format!("{}{}", self.api, path)).map_err(|e| {
            ForgeError::Blocking {
                kind: BlockingKind::Other,
                message: format!("cannot build the URL for GET {shown}: {e}"),
            }
        })?;
        if !query.is_empty() {
            let mut pairs = url.query_pairs_mut();
            for (k, v) in query {
                pairs.append_pair(k, v);
            }
        }
        let mut retries = 0u32;
        loop {
            self.requests.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(method = "GET", path = %shown, retry = retries, "forgejo request");
            let mut req = self.client.get(url.clone());
            if let Some(auth) = &self.auth {
                req = req.header(AUTHORIZATION, auth.clone());
            }
            let mut wait = None;
            let failure = match req.send().await {
                Err(e) => self.describe_transport(&e, &shown),
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    match status {
                        200..=299 => match resp.text().await {
                            Ok(body) => return Ok(Some(body)),
                            Err(e) => self.describe_transport(&e, &shown),
                        },
                        404 if target.missing_ok => return Ok(None),
                        429 | 500..=599 => {
                            wait = resp
                                .headers()
                                .get(RETRY_AFTER)
                                .and_then(|v| v.to_str().ok())
                                .and_then(|v| v.trim().parse::<u64>().ok())
                                .map(Duration::from_secs);
                            format!("GET {shown} answered HTTP {status}")
                        }
                        _ => {
                            let body = resp.text().await.unwrap_or_default();
                            return Err(self.classify(status, &shown, &body, target));
                        }
                    }
                }
            };
            if retries >= self.retry.max_retries {
                tracing::debug!(path = %shown, retries, "forgejo request failed for good");
                return Err(ForgeError::Transient {
                    message: self.scrub(&failure),
                    attempts: retries,
                });
            }
            let mut delay = self.retry.delay(retries);
            if let Some(w) = wait {
                delay = delay.max(w.min(self.retry.max));
            }
            tracing::debug!(path = %shown, ?delay, "transient forge error, will retry");
            tokio::time::sleep(delay).await;
            retries += 1;
        }
    }

    fn describe_transport(&self, e: &reqwest::Error, shown: &str) -> String {
        let mut causes = Vec::new();
        let mut src = std::error::Error::source(e);
        while let Some(s) = src {
            causes.push(s.to_string());
            src = s.source();
        }
        let cause = causes.last().cloned().unwrap_or_else(|| e.to_string());
        let text = if e.is_timeout() {
            format!(
                "GET {shown} timed out after {}",
                crate::duration::format(self.request_timeout)
            )
        } else if e.is_connect() {
            format!("cannot connect to the forge for GET {shown}: {cause}")
        } else {
            format!("GET {shown} failed: {cause}")
        };
        self.scrub(&text)
    }

    fn classify(&self, status: u16, shown: &str, body: &str, target: Target<'_>) -> ForgeError {
        let server = server_message(body)
            .map(|m| format!(" (server says: {})", self.scrub(&m)))
            .unwrap_or_default();
        let (kind, message) = match status {
            401 if self.token.is_some() => (
                BlockingKind::BadToken,
                "Forgejo rejected the token (401): check the variable named by forge.token_env"
                    .to_string(),
            ),
            401 => (
                BlockingKind::BadToken,
                format!(
                    "Forgejo requires a token (401) for GET {shown}: set forge.token_env to the name of a variable holding a read:repository token"
                ),
            ),
            403 => (
                BlockingKind::NoAccess,
                format!(
                    "Forgejo denied access (403) to {}: the token needs read:repository and read access to Actions{server}",
                    target.repo.unwrap_or("the server")
                ),
            ),
            404 => (
                BlockingKind::NotFound,
                match target.repo {
                    Some(r) => format!(
                        "repository {r} not found, Actions disabled, or no access (404 on GET {shown})"
                    ),
                    None => format!(
                        "GET {shown} not found (404): is forge.url the root of a Forgejo server?"
                    ),
                },
            ),
            _ => (
                BlockingKind::Other,
                format!("Forgejo answered HTTP {status} to GET {shown}{server}"),
            ),
        };
        ForgeError::Blocking { kind, message }
    }

    fn decode<T: DeserializeOwned>(&self, body: &str, path: &str) -> Result<T, ForgeError> {
        serde_json::from_str(body).map_err(|e| ForgeError::Malformed {
            message: self.scrub(&format!("GET /api/v1{path}: {e}")),
        })
    }

    async fn get_json<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &[(&str, String)],
        repo: &str,
    ) -> Result<T, ForgeError> {
        let target = Target {
            repo: Some(repo),
            missing_ok: false,
        };
        let body = self.get(path, query, target).await?.unwrap_or_default();
        self.decode(&body, path)
    }

    /// The runs of `sha` (Forgejo ≥ 12), newest (highest id) first.
    async fn fetch_runs(&self, repo: &Repo, sha: &str) -> Result<Vec<wire::ActionRun>, ForgeError> {
        let path = format!("{}/actions/runs", self.repo_path(repo));
        let query = [
            ("head_sha", sha.to_string()),
            ("limit", PAGE_LIMIT.to_string()),
        ];
        let list: wire::ListActionRunResponse =
            self.get_json(&path, &query, &self.full_name(repo)).await?;
        let mut runs: Vec<wire::ActionRun> = list
            .workflow_runs
            .unwrap_or_default()
            .into_iter()
            .filter(|r| same_sha(&r.commit_sha, sha))
            .collect();
        // Before v15 the order is whatever the database returns.
        runs.sort_by_key(|r| std::cmp::Reverse(r.id));
        Ok(runs)
    }

    /// The jobs of run `run_id` (Forgejo ≥ 16).
    async fn fetch_jobs(
        &self,
        repo: &Repo,
        run_id: i64,
    ) -> Result<Vec<wire::ActionRunJob>, ForgeError> {
        let path = format!("{}/actions/runs/{run_id}/jobs", self.repo_path(repo));
        let jobs: Option<Vec<wire::ActionRunJob>> =
            self.get_json(&path, &[], &self.full_name(repo)).await?;
        Ok(jobs.unwrap_or_default())
    }

    /// The tasks of `sha`, newest first, paging `/actions/tasks` (which has no SHA filter)
    /// until a page reaches tasks created before `stop_before_ms`, the list is exhausted, or
    /// [`MAX_TASK_PAGES`] pages were read.
    async fn fetch_tasks(
        &self,
        repo: &Repo,
        sha: &str,
        stop_before_ms: Option<i64>,
    ) -> Result<Vec<wire::ActionTask>, ForgeError> {
        let path = format!("{}/actions/tasks", self.repo_path(repo));
        let full_name = self.full_name(repo);
        let mut ours = Vec::new();
        let mut ids = HashSet::new();
        let mut listed = 0usize;
        for page in 1..=MAX_TASK_PAGES {
            let query = [
                ("page", page.to_string()),
                ("limit", PAGE_LIMIT.to_string()),
            ];
            let list: wire::ActionTaskResponse = self.get_json(&path, &query, &full_name).await?;
            let entries = list.workflow_runs.unwrap_or_default();
            let n = entries.len();
            let mut past = false;
            for t in entries {
                if let (Some(bound), Some(created)) =
                    (stop_before_ms, parse_time_ms(t.created_at.as_deref()))
                    && created < bound
                {
                    past = true;
                }
                if same_sha(&t.head_sha, sha) && ids.insert(t.id) {
                    ours.push(t);
                }
            }
            listed += n;
            if n == 0 || past || listed as i64 >= list.total_count {
                break;
            }
            if page == MAX_TASK_PAGES {
                tracing::warn!(
                    repo = %full_name,
                    pages = MAX_TASK_PAGES,
                    "stopped paging /actions/tasks: the commit's tasks may be older than {} tasks",
                    listed
                );
            }
        }
        ours.sort_by_key(|t| std::cmp::Reverse(t.id));
        Ok(ours)
    }

    async fn runs_tasks_only(
        &self,
        repo: &Repo,
        sha: &str,
        pushed_ms: Option<i64>,
    ) -> Result<Vec<CiRun>, ForgeError> {
        let bound = pushed_ms.map(|p| p.saturating_sub(CLOCK_SKEW_MS));
        let tasks = self.fetch_tasks(repo, sha, bound).await?;
        let mut runs: BTreeMap<i64, CiRun> = BTreeMap::new();
        for (number, group) in group_tasks(&tasks) {
            let first = group[0];
            runs.insert(
                number,
                CiRun {
                    id: number,
                    number,
                    event: first.event.clone(),
                    status: None,
                    workflow: non_empty(&first.workflow_id),
                    url: non_empty(&first.url),
                    jobs: jobs_from_tasks(&group),
                },
            );
        }
        Ok(runs.into_values().rev().collect())
    }

    async fn runs_with_tasks(
        &self,
        repo: &Repo,
        sha: &str,
        pushed_ms: Option<i64>,
    ) -> Result<Vec<CiRun>, ForgeError> {
        let runs = self.fetch_runs(repo, sha).await?;
        let push_runs: Vec<&wire::ActionRun> = runs.iter().filter(|r| r.event == "push").collect();
        let mut by_number: BTreeMap<i64, Vec<CiJob>> = BTreeMap::new();
        if !push_runs.is_empty() {
            // Tasks of our runs are created after the runs; fall back to the push time.
            let bound = push_runs
                .iter()
                .filter_map(|r| parse_time_ms(r.created.as_deref()))
                .min()
                .map(|c| c - 1_000)
                .or(pushed_ms.map(|p| p.saturating_sub(CLOCK_SKEW_MS)));
            let tasks = self.fetch_tasks(repo, sha, bound).await?;
            for (number, group) in group_tasks(&tasks) {
                by_number.insert(number, jobs_from_tasks(&group));
            }
        }
        Ok(runs
            .iter()
            .map(|r| CiRun {
                id: r.id,
                number: r.index_in_repo,
                event: r.event.clone(),
                status: Some(JobStatus::parse(&r.status)),
                workflow: non_empty(&r.workflow_id),
                url: non_empty(&r.html_url),
                jobs: by_number.remove(&r.index_in_repo).unwrap_or_default(),
            })
            .collect())
    }

    async fn runs_with_jobs(&self, repo: &Repo, sha: &str) -> Result<Vec<CiRun>, ForgeError> {
        let runs = self.fetch_runs(repo, sha).await?;
        let mut out = Vec::with_capacity(runs.len());
        for r in &runs {
            // Only push runs count; do not spend requests on the others.
            let jobs = if r.event == "push" {
                self.fetch_jobs(repo, r.id)
                    .await?
                    .into_iter()
                    .map(|j| CiJob {
                        status: JobStatus::parse(&j.status),
                        attempt: u32::try_from(j.attempt.unwrap_or(0).max(1)).unwrap_or(u32::MAX),
                        id: Some(j.id),
                        name: j.name,
                    })
                    .collect()
            } else {
                Vec::new()
            };
            out.push(CiRun {
                id: r.id,
                number: r.index_in_repo,
                event: r.event.clone(),
                status: Some(JobStatus::parse(&r.status)),
                workflow: non_empty(&r.workflow_id),
                url: non_empty(&r.html_url),
                jobs,
            });
        }
        Ok(out)
    }
}

impl Forge for ForgejoForge {
    async fn runs_for_commit(
        &self,
        repo: &Repo,
        sha: &str,
        pushed_ms: Option<i64>,
    ) -> Result<Vec<CiRun>, ForgeError> {
        check_sha(sha)?;
        match self.detect().await?.1 {
            ApiPath::TasksOnly => self.runs_tasks_only(repo, sha, pushed_ms).await,
            ApiPath::RunsAndTasks => self.runs_with_tasks(repo, sha, pushed_ms).await,
            ApiPath::RunsAndJobs => self.runs_with_jobs(repo, sha).await,
        }
    }

    async fn branch_head(&self, repo: &Repo, branch: &str) -> Result<Option<String>, ForgeError> {
        #[derive(serde::Deserialize, Default)]
        #[serde(default)]
        struct Branch {
            commit: Option<Commit>,
        }
        #[derive(serde::Deserialize, Default)]
        #[serde(default)]
        struct Commit {
            id: String,
        }
        let encoded: Vec<String> = branch.split('/').map(encode).collect();
        let path = format!("{}/branches/{}", self.repo_path(repo), encoded.join("/"));
        let full_name = self.full_name(repo);
        let target = Target {
            repo: Some(&full_name),
            missing_ok: true,
        };
        let Some(body) = self.get(&path, &[], target).await? else {
            return Ok(None);
        };
        let b: Branch = self.decode(&body, &path)?;
        match b.commit {
            Some(c) if !c.id.is_empty() => Ok(Some(c.id)),
            _ => Err(ForgeError::Malformed {
                message: format!("GET /api/v1{path}: no commit.id in the branch"),
            }),
        }
    }

    async fn job_log(
        &self,
        repo: &Repo,
        sha: &str,
        job: &str,
    ) -> Result<Option<String>, ForgeError> {
        check_sha(sha)?;
        if self.detect().await?.1 != ApiPath::RunsAndJobs {
            return Ok(None); // Forgejo < 16 has no logs API.
        }
        let mut runs = self.fetch_runs(repo, sha).await?;
        // Push runs first (they are the ones that count), newest first within each group.
        runs.sort_by_key(|r| (r.event != "push", std::cmp::Reverse(r.id)));
        for r in &runs {
            let jobs = self.fetch_jobs(repo, r.id).await?;
            let Some(j) = jobs
                .iter()
                .filter(|j| j.name == job)
                .max_by_key(|j| (j.attempt.unwrap_or(0), j.id))
            else {
                continue;
            };
            let path = format!("{}/actions/jobs/{}/logs", self.repo_path(repo), j.id);
            let full_name = self.full_name(repo);
            let target = Target {
                repo: Some(&full_name),
                missing_ok: true,
            };
            return Ok(self
                .get(&path, &[], target)
                .await?
                .map(|text| self.scrub(&text)));
        }
        Ok(None)
    }
}

fn check_sha(sha: &str) -> Result<(), ForgeError> {
    if (sha.len() == 40 || sha.len() == 64) && sha.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(())
    } else {
        Err(ForgeError::Blocking {
            kind: BlockingKind::Other,
            message: format!(
                "\"{}\" is not a full commit SHA (Forgejo matches full SHAs only)",
                sha.escape_debug()
            ),
        })
    }
}

/// An empty SHA is unknown, never a match.
fn same_sha(a: &str, b: &str) -> bool {
    !a.is_empty() && a.eq_ignore_ascii_case(b)
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

/// Tasks (newest first) grouped by run number, each group newest first.
fn group_tasks(tasks: &[wire::ActionTask]) -> BTreeMap<i64, Vec<&wire::ActionTask>> {
    let mut groups: BTreeMap<i64, Vec<&wire::ActionTask>> = BTreeMap::new();
    for t in tasks {
        groups.entry(t.run_number).or_default().push(t);
    }
    for g in groups.values_mut() {
        g.sort_by_key(|t| std::cmp::Reverse(t.id));
    }
    groups
}

/// One job per name: the newest task is the latest attempt; the attempt number is the
/// number of tasks of that job.
fn jobs_from_tasks(group: &[&wire::ActionTask]) -> Vec<CiJob> {
    let mut jobs: Vec<CiJob> = Vec::new();
    for t in group {
        match jobs.iter_mut().find(|j| j.name == t.name) {
            Some(j) => j.attempt += 1,
            None => jobs.push(CiJob {
                name: t.name.clone(),
                status: JobStatus::parse(&t.status),
                attempt: 1,
                id: None,
            }),
        }
    }
    jobs
}

/// Percent-encodes one path segment.
fn encode(segment: &str) -> String {
    let mut out = String::with_capacity(segment.len());
    for b in segment.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The `message` of a Forgejo error body, or the start of a non-JSON body.
fn server_message(body: &str) -> Option<String> {
    let body = body.trim();
    if body.is_empty() {
        return None;
    }
    let text = match serde_json::from_str::<serde_json::Value>(body) {
        Ok(v) => v.get("message")?.as_str()?.to_string(),
        Err(_) => body.to_string(),
    };
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.is_empty() {
        return None;
    }
    Some(match one_line.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &one_line[..i]),
        None => one_line,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Option<(u32, u32, u32)> {
        ForgejoVersion::parse(s).map(|v| (v.major, v.minor, v.patch))
    }

    #[test]
    fn parses_versions() {
        assert_eq!(v("11.0.1+gitea-1.22.0"), Some((11, 0, 1)));
        assert_eq!(v("16.0.0-dev-123-gabcdef+gitea-1.22.0"), Some((16, 0, 0)));
        assert_eq!(v("v15.2"), Some((15, 2, 0)));
        assert_eq!(v("8"), Some((8, 0, 0)));
        assert_eq!(v(" 12.0.3 "), Some((12, 0, 3)));
        assert_eq!(v("dev"), None);
        assert_eq!(v(""), None);
    }

    #[test]
    fn picks_api_paths() {
        let p = |s: &str| ApiPath::for_version(ForgejoVersion::parse(s).unwrap());
        assert_eq!(p("7.0.5"), None);
        assert_eq!(p("1.22.0"), None);
        assert_eq!(p("8.0.0"), Some(ApiPath::TasksOnly));
        assert_eq!(p("11.0.1"), Some(ApiPath::TasksOnly));
        assert_eq!(p("12.0.0"), Some(ApiPath::RunsAndTasks));
        assert_eq!(p("15.0.3"), Some(ApiPath::RunsAndTasks));
        assert_eq!(p("16.0.0"), Some(ApiPath::RunsAndJobs));
        assert_eq!(p("17.1.0"), Some(ApiPath::RunsAndJobs));
    }

    #[test]
    fn epoch_times_are_unset() {
        assert_eq!(parse_time_ms(Some("1970-01-01T00:00:00Z")), None);
        assert_eq!(parse_time_ms(Some("1970-01-01T02:00:00+02:00")), None);
        assert_eq!(parse_time_ms(None), None);
        assert_eq!(parse_time_ms(Some("garbage")), None);
        assert_eq!(
            parse_time_ms(Some("2026-07-01T12:00:05+02:00")),
            parse_time_ms(Some("2026-07-01T10:00:05Z"))
        );
        assert_eq!(parse_time_ms(Some("1970-01-01T00:00:01Z")), Some(1000));
    }

    #[test]
    fn decodes_reference_shapes_leniently() {
        let run: wire::ActionRun = serde_json::from_str(
            r#"{"id":894,"repository":{"id":63,"...":"..."},"trigger_user":{"id":2},"ScheduleID":7,
                "commit_sha":"97f29ee599c373c729132a5c46a046978311e0ee","index_in_repo":3,
                "event":"push","status":"running","stopped":"1970-01-01T00:00:00Z"}"#,
        )
        .unwrap();
        assert_eq!(run.schedule_id, 7);
        assert_eq!(run.duration, None);
        assert_eq!(parse_time_ms(run.stopped.as_deref()), None);
        let jobs: Vec<wire::ActionRunJob> = serde_json::from_str(
            r#"[{"id":196,"run_id":793,"attempt":null,"name":"job2","needs":null,"runs_on":null,"task_id":0,"status":"waiting"}]"#,
        )
        .unwrap();
        assert_eq!(jobs[0].needs, None);
        assert_eq!(jobs[0].attempt, None);
        let tasks: wire::ActionTaskResponse =
            serde_json::from_str(r#"{"workflow_runs":null,"total_count":0}"#).unwrap();
        assert!(tasks.workflow_runs.is_none());
    }

    #[test]
    fn tasks_become_jobs_with_attempt_counts() {
        let t = |id: i64, run: i64, name: &str, status: &str| wire::ActionTask {
            id,
            name: name.into(),
            run_number: run,
            status: status.into(),
            ..Default::default()
        };
        let tasks = [
            t(9, 4, "build", "success"),
            t(8, 4, "radicle-push", "running"),
            t(5, 4, "build", "failure"),
            t(3, 2, "build", "success"),
        ];
        let groups = group_tasks(&tasks);
        let jobs = jobs_from_tasks(&groups[&4]);
        assert_eq!(jobs.len(), 2);
        assert_eq!(
            (jobs[0].name.as_str(), jobs[0].status, jobs[0].attempt),
            ("build", JobStatus::Success, 2)
        );
        assert_eq!(jobs[1].attempt, 1);
        assert_eq!(jobs_from_tasks(&groups[&2]).len(), 1);
    }

    #[test]
    fn encodes_segments_and_messages() {
        assert_eq!(encode("my repo/x"), "my%20repo%2Fx");
        assert_eq!(encode("a-b_c.d~"), "a-b_c.d~");
        assert_eq!(
            server_message(r#"{"message":"unknown status: foo","url":"x"}"#).as_deref(),
            Some("unknown status: foo")
        );
        assert_eq!(
            server_message("<html>\n bad </html>").as_deref(),
            Some("<html> bad </html>")
        );
        assert_eq!(server_message(""), None);
    }

    #[test]
    fn rejects_short_shas_and_bad_urls() {
        assert!(check_sha("abc123").unwrap_err().is_blocking());
        assert!(check_sha(&"a".repeat(40)).is_ok());
        let retry = RetryPolicy {
            initial: Duration::from_millis(1),
            max: Duration::from_millis(1),
            multiplier: 2.0,
            max_retries: 0,
        };
        assert!(ForgejoForge::new("ftp://x", "o", None, Duration::from_secs(1), retry).is_err());
        assert!(ForgejoForge::new("not a url", "o", None, Duration::from_secs(1), retry).is_err());
        let bad = Secret::new("tok\nSECRET".into());
        let err = ForgejoForge::new(
            "http://127.0.0.1:1",
            "o",
            Some(bad),
            Duration::from_secs(1),
            retry,
        )
        .unwrap_err();
        assert!(!err.to_string().contains("SECRET"), "{err}");
        let f = ForgejoForge::new(
            "http://127.0.0.1:1/",
            "o",
            Some(Secret::new("tok-SECRET-4b1d".into())),
            Duration::from_secs(1),
            retry,
        )
        .unwrap();
        let dbg = format!("{f:?}");
        assert!(!dbg.contains("tok-SECRET-4b1d"), "{dbg}");
        assert!(dbg.contains("http://127.0.0.1:1/api/v1"), "{dbg}");
    }
}
