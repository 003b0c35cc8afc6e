//! The Forgejo forge: CI state over Forgejo's REST API.
//!
//! Which endpoints answer depends on the server version (see
//! `shared/reference/forgejo-actions-api.md` §1 and its appendix), so the version is probed
//! once per client (`GET /api/v1/version`) and the best path for it is tried first:
//!
//! | Forgejo | Path | Requests per look at a commit |
//! |---|---|---|
//! | ≥ 16 | `runs?head_sha=` + `runs/{id}/jobs` per push run | 1 + push runs |
//! | 12–15 | `runs?head_sha=` + `tasks` pages (only if a push run exists); commit statuses only when the run status contradicts the tasks | 1 + pages (+1) |
//! | 8–11 | `tasks` pages (no SHA filter: filtered here) + the commit's statuses | pages + 1 |
//!
//! The version only says what to try: dev builds report the next major before its routes
//! exist, and a plain `go build` reports `development`. A route the router does not know
//! answers a plain-text 404; the client then falls back one path and remembers it.
//!
//! Only runs triggered by a push count (`trigger_event`, no schedule id): a cron run that a
//! push re-registered claims `event: "push"`. Reruns happen in place, so a task can be stale;
//! [`runs`] tells which from the run status (12–15) or the commit statuses (8–11).
//!
//! Errors follow the contract taxonomy: connection errors, timeouts, 429 and 5xx are
//! retried per [`RetryPolicy`] and then reported as [`ForgeError::Transient`]; 401, 403, 404
//! and other 4xx are [`ForgeError::Blocking`]; undecodable bodies are
//! [`ForgeError::Malformed`]. The token only ever goes into the `Authorization` header: it is
//! never logged, and server bodies are scrubbed of it before they reach an error message.

mod cancel;
mod http;
mod protections;
mod pulls;
mod runs;
pub mod wire;

use super::pull::{MergeAnswer, PullRequest};
use super::{BlockingKind, Forge, ForgeError, Patience};
use crate::ci::CiRun;
use crate::config::Repo;
use crate::contract::RetryPolicy;
use crate::secret::Secret;
use http::Target;
use reqwest::header::HeaderValue;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::OnceCell;

/// Page size for `/actions/tasks` and `/actions/runs` (Forgejo's default maximum).
pub const PAGE_LIMIT: usize = 50;
/// At most this many `/actions/tasks` pages are read for one commit.
pub const MAX_TASK_PAGES: u32 = 20;
/// Allowance for the clock difference between orch's host and the server when the push
/// time bounds task paging on the tasks-only path.
pub const CLOCK_SKEW_MS: i64 = 5 * 60_000;

/// A Forgejo server version (`major.minor.patch` of the `/version` answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ForgejoVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
    /// A build from source without a release tag (`development`): treated as the newest.
    pub development: bool,
}

impl ForgejoVersion {
    /// Parses the leading `major[.minor[.patch]]` of e.g. `11.0.1+gitea-1.22.0` or
    /// `16.0.0-dev-12-gabc`, and `development` (a plain `go build`); `None` otherwise.
    pub fn parse(text: &str) -> Option<ForgejoVersion> {
        let text = text.trim();
        if text.starts_with("development") {
            return Some(ForgejoVersion {
                major: 0,
                minor: 0,
                patch: 0,
                development: true,
            });
        }
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
            development: false,
        })
    }
}

impl fmt::Display for ForgejoVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.development {
            return f.write_str("development");
        }
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// How CI state is read from a given server version (ordered: each falls back to the one
/// before it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ApiPath {
    /// Forgejo 8–11: `/actions/tasks` only.
    TasksOnly,
    /// Forgejo 12–15: `/actions/runs?head_sha=` plus `/actions/tasks`.
    RunsAndTasks,
    /// Forgejo ≥ 16: `/actions/runs?head_sha=` plus `/actions/runs/{id}/jobs`.
    RunsAndJobs,
}

impl ApiPath {
    /// The path to try first; `None` below Forgejo 8 (no Actions API).
    pub fn for_version(v: ForgejoVersion) -> Option<ApiPath> {
        if v.development {
            return Some(ApiPath::RunsAndJobs);
        }
        match v.major {
            0..=7 => None,
            8..=11 => Some(ApiPath::TasksOnly),
            12..=15 => Some(ApiPath::RunsAndTasks),
            _ => Some(ApiPath::RunsAndJobs),
        }
    }

    /// The path one step older (where a missing route falls back to).
    pub fn fallback(self) -> Option<ApiPath> {
        match self {
            ApiPath::RunsAndJobs => Some(ApiPath::RunsAndTasks),
            ApiPath::RunsAndTasks => Some(ApiPath::TasksOnly),
            ApiPath::TasksOnly => None,
        }
    }

    fn code(self) -> u8 {
        match self {
            ApiPath::TasksOnly => 0,
            ApiPath::RunsAndTasks => 1,
            ApiPath::RunsAndJobs => 2,
        }
    }

    fn from_code(c: u8) -> ApiPath {
        match c {
            0 => ApiPath::TasksOnly,
            1 => ApiPath::RunsAndTasks,
            _ => ApiPath::RunsAndJobs,
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
    /// The server's base URL as messages show it (no user or password).
    server: String,
    patience: Option<Patience>,
    /// Whether the current outage has been told (reset by an answer).
    outage_told: AtomicBool,
    owner: String,
    token: Option<Secret>,
    auth: Option<HeaderValue>,
    client: reqwest::Client,
    request_timeout: Duration,
    retry: RetryPolicy,
    version: OnceCell<(ForgejoVersion, ApiPath)>,
    /// The newest path this server has shown it supports (lowered when a route is missing).
    cap: AtomicU8,
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
        let mut shown = parsed.clone();
        let _ = shown.set_username("");
        let _ = shown.set_password(None);
        let server = shown
            .as_str()
            .trim_end_matches('/')
            .trim_end_matches("/api/v1")
            .to_string();
        let auth = match &token {
            None => None,
            Some(t) => {
                let mut v = HeaderValue::from_str(&format!("token {}", t.expose())).map_err(
                    |_| ForgeError::Blocking {
                        kind: BlockingKind::BadToken,
                        message: "the forge token contains characters that cannot be sent in an HTTP header: check forge.token_file or the variable named by forge.token_env".into(),
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
            server,
            patience: None,
            outage_told: AtomicBool::new(false),
            owner: owner.to_string(),
            token,
            auth,
            client,
            request_timeout,
            retry,
            version: OnceCell::new(),
            cap: AtomicU8::new(ApiPath::RunsAndJobs.code()),
            requests: AtomicU64::new(0),
        })
    }

    /// Gives up on an unanswering forge after `patience.give_up_after` per request and
    /// tells the first failure of an outage (commands someone waits on).
    pub fn with_patience(mut self, patience: Patience) -> Self {
        self.patience = Some(patience);
        self
    }

    /// The server's base URL as messages show it.
    pub fn server(&self) -> &str {
        &self.server
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

    /// The API path this client uses: the version's, or an older one once a route of it
    /// turned out to be missing.
    pub async fn api_path(&self) -> Result<ApiPath, ForgeError> {
        let by_version = self.detect().await?.1;
        Ok(by_version.min(ApiPath::from_code(self.cap.load(Ordering::Relaxed))))
    }

    /// Remembers that `path` is not available on this server (its route answered a
    /// plain-text 404); returns the path to use instead.
    pub(super) fn route_missing(&self, path: ApiPath, route: &str) -> Result<ApiPath, ForgeError> {
        let Some(older) = path.fallback() else {
            return Err(self.no_route(route));
        };
        self.cap.fetch_min(older.code(), Ordering::Relaxed);
        tracing::info!(
            route,
            from = path.as_str(),
            to = older.as_str(),
            "forgejo route missing: falling back"
        );
        Ok(older)
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
                            needs: None,
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
        self.repo_path_named(&repo.name)
    }

    fn repo_path_named(&self, name: &str) -> String {
        format!("/repos/{}/{}", encode(&self.owner), encode(name))
    }

    fn full_name(&self, repo: &Repo) -> String {
        self.full_name_of(&repo.name)
    }

    fn full_name_of(&self, name: &str) -> String {
        format!("{}/{}", self.owner, name)
    }
}

impl Forge for ForgejoForge {
    fn cancel_runs_of_refs(
        &self,
        abandoned: &[crate::forge::Abandoned],
        _note: &str,
    ) -> Result<Vec<String>, ForgeError> {
        // Forgejo keeps no note on a cancelled job.
        self.cancel_abandoned(abandoned)
    }

    async fn open_pull(
        &self,
        repo: &Repo,
        head: &str,
        base: &str,
        title: &str,
        body: &str,
    ) -> Result<PullRequest, ForgeError> {
        ForgejoForge::open_pull(self, repo, head, base, title, body).await
    }

    async fn pull(&self, repo: &Repo, number: i64) -> Result<PullRequest, ForgeError> {
        ForgejoForge::pull(self, repo, number).await
    }

    async fn merge_pull(
        &self,
        repo: &Repo,
        number: i64,
        style: &str,
        head_commit_id: &str,
        title: &str,
    ) -> Result<MergeAnswer, ForgeError> {
        ForgejoForge::merge_pull(self, repo, number, style, head_commit_id, title).await
    }

    async fn runs_for_commit(
        &self,
        repo: &Repo,
        sha: &str,
        pushed_ms: Option<i64>,
    ) -> Result<Vec<CiRun>, ForgeError> {
        check_sha(sha)?;
        // Forgejo stores lowercase SHAs and matches `head_sha` exactly.
        let sha = sha.to_ascii_lowercase();
        let sha = sha.as_str();
        let mut path = self.api_path().await?;
        loop {
            let got = match path {
                ApiPath::TasksOnly => self.runs_tasks_only(repo, sha, pushed_ms).await,
                ApiPath::RunsAndTasks => self.runs_with_tasks(repo, sha, pushed_ms).await,
                ApiPath::RunsAndJobs => self.runs_with_jobs(repo, sha).await,
            };
            match got? {
                Some(runs) => return Ok(runs),
                None => path = self.route_missing(path, "…/actions/runs")?,
            }
        }
    }

    async fn push_run_states(
        &self,
        repo: &Repo,
        sha: &str,
    ) -> Result<Option<crate::forge::RunStates>, ForgeError> {
        check_sha(sha)?;
        let sha = sha.to_ascii_lowercase();
        self.run_states(repo, &sha).await
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
            needs: None,
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
        let sha = sha.to_ascii_lowercase();
        if self.api_path().await? != ApiPath::RunsAndJobs {
            return Ok(None); // Forgejo < 16 has no logs API.
        }
        let Some(mut runs) = self.fetch_runs(&repo.name, &sha).await? else {
            self.route_missing(ApiPath::RunsAndJobs, "…/actions/runs")?;
            return Ok(None);
        };
        // Only push runs count (a cron run that claims `push` is not the commit's CI),
        // newest first.
        runs.retain(runs::is_push);
        runs.sort_by_key(|r| std::cmp::Reverse(r.id));
        for r in &runs {
            let Some(jobs) = self.fetch_jobs(repo, r.id).await? else {
                self.route_missing(ApiPath::RunsAndJobs, "…/actions/runs/{id}/jobs")?;
                return Ok(None);
            };
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
                needs: None,
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

#[cfg(test)]
mod tests;
