//! Forges: where CI runs. One trait, two implementations — Forgejo over HTTP and the local
//! forge — so the supervisor never knows which one it talks to.
//!
//! Statuses use Forgejo's words everywhere (`waiting`, `running`, `success`, `failure`,
//! `cancelled`, `skipped`, `blocked`, `unknown`), including the local forge's.

pub mod follow;
pub mod forgejo;
mod host;
pub mod local;
pub mod pull;

use crate::ci::CiRun;
use crate::config::Repo;
pub use host::{ensure_host_remote, has_pull_requests, host_remote, keeps_repositories_here};
use pull::{MergeAnswer, PullRequest};
use std::future::Future;

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

    /// The worker event a supervisor records for a CI query that failed this way (after the
    /// client's retries): what `/metrics` counts as forge request errors, by kind.
    pub fn event_kind(&self) -> &'static str {
        match self {
            ForgeError::Transient { .. } => "forge_error_transient",
            ForgeError::Blocking { .. } => "forge_error_blocking",
            ForgeError::Malformed { .. } => "forge_error_malformed",
        }
    }

    /// Every [`ForgeError::event_kind`], with the `kind` label `/metrics` gives it.
    pub const EVENT_KINDS: [(&'static str, &'static str); 3] = [
        ("forge_error_transient", "transient"),
        ("forge_error_blocking", "blocking"),
        ("forge_error_malformed", "malformed"),
    ];
}

/// How a command someone waits on treats a forge that does not answer: each request gives
/// up `give_up_after` after its first attempt (attempts are cut short to fit), and the first
/// failure of an outage is told through `notice` at once, so nobody waits in silence.
/// Without it (supervisors, `resume`) the contract's transient back-off alone decides.
#[derive(Clone)]
pub struct Patience {
    pub give_up_after: std::time::Duration,
    pub notice: std::sync::Arc<dyn Fn(&str) + Send + Sync>,
}

impl std::fmt::Debug for Patience {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Patience")
            .field("give_up_after", &self.give_up_after)
            .finish_non_exhaustive()
    }
}

/// What [`Forge::push_run_states`] reports: (run id, aggregate status) per push run.
pub type RunStates = Vec<(i64, Option<crate::ci::JobStatus>)>;

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

    /// A cheap look (one request where the forge allows it) at the push runs of `sha`:
    /// (run id, aggregate status) of each run the forge can report this way. A decided red
    /// or sync_not_done is re-checked with it: a rerun queued in place changes a run's status.
    /// `None`: the forge has no look cheaper than [`runs_for_commit`](Self::runs_for_commit)
    /// (its decided verdicts are final).
    fn push_run_states(
        &self,
        _repo: &Repo,
        _sha: &str,
    ) -> impl Future<Output = Result<Option<RunStates>, ForgeError>> + Send {
        async { Ok(None) }
    }

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

    /// Opens a pull request from `head` into `base` (or finds the open one): forges that have
    /// them (`land.policy: pull_request`).
    fn open_pull(
        &self,
        _repo: &Repo,
        _head: &str,
        _base: &str,
        _title: &str,
        _body: &str,
    ) -> impl Future<Output = Result<PullRequest, ForgeError>> + Send {
        async { Err(no_pulls()) }
    }

    /// Pull request `number`.
    fn pull(
        &self,
        _repo: &Repo,
        _number: i64,
    ) -> impl Future<Output = Result<PullRequest, ForgeError>> + Send {
        async { Err(no_pulls()) }
    }

    /// Merges pull request `number` pinned to `head_commit_id`.
    fn merge_pull(
        &self,
        _repo: &Repo,
        _number: i64,
        _style: &str,
        _head_commit_id: &str,
        _title: &str,
    ) -> impl Future<Output = Result<MergeAnswer, ForgeError>> + Send {
        async { Err(no_pulls()) }
    }

    /// Runs CI for `sha` of `repo` (pushed to `git_ref`) again in place, its unfinished runs
    /// cancelled first, and says what was done. `None`: this forge cannot rerun a run (Forgejo:
    /// its API has no rerun endpoint), so the caller starts CI again with a new push. Blocking:
    /// a supervisor calls it from its own thread.
    fn rerun(&self, _repo: &str, _git_ref: &str, _sha: &str) -> Option<Result<String, ForgeError>> {
        None
    }

    /// Runs CI for `sha` of `repo` as if pushed to `branch`, its upstreams at the commits
    /// `pins` (repository → commit; the others at their base heads): a run orch starts itself,
    /// e.g. a dependent's base head without an upstream's change, to know whether it was red
    /// already. `None`: this forge cannot (on Forgejo a run follows a push). Blocking, as
    /// [`Self::rerun`].
    fn start_pinned_run(
        &self,
        _repo: &str,
        _branch: &str,
        _sha: &str,
        _pins: &[(String, String)],
    ) -> Option<Result<(), ForgeError>> {
        None
    }

    /// Cancels the unfinished runs of the branches `abandoned`, which nothing waits for any
    /// more, with `note` on their jobs where the forge keeps one; returns the runs cancelled,
    /// in words. Blocking, as [`Self::rerun`]. A forge that cannot cancel a run cancels none.
    fn cancel_runs_of_refs(
        &self,
        _abandoned: &[Abandoned],
        _note: &str,
    ) -> Result<Vec<String>, ForgeError> {
        Ok(Vec::new())
    }
}

/// A branch orch pushed whose runs nothing waits for any more: a landing's integration branch,
/// a downstream check's verification branch, a worker's own branch once it let go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Abandoned {
    pub repo: String,
    /// The branch (`orch/w-1-land`), not the full ref.
    pub branch: String,
    /// The commit orch pushed there, when known: a forge that lists runs by commit (Forgejo)
    /// finds them by it and cancels none without it.
    pub sha: Option<String>,
}

fn no_pulls() -> ForgeError {
    ForgeError::Blocking {
        kind: BlockingKind::Other,
        message:
            "this forge has no pull requests (land.policy pull_request needs forge.kind: forgejo)"
                .into(),
    }
}

/// The forge chosen by `forge.kind`, so callers need not be generic over it.
// One per process, built once and shared by reference: its size costs nothing.
#[allow(clippy::large_enum_variant)]
pub enum AnyForge {
    Forgejo(forgejo::ForgejoForge),
    Local(local::LocalForge),
}

impl AnyForge {
    /// Builds the configured forge for a process that owns workers' pushes (a supervisor,
    /// `resume`, `spawn`): on the local forge it starts the CI a lost hook did not. Commands
    /// that only ask turn it into [`AnyForge::for_query`]. Forgejo needs its token variable set.
    pub fn from_config(
        config: &crate::config::Config,
        contract: &crate::contract::Contract,
        state_dir: &std::path::Path,
    ) -> Result<AnyForge, String> {
        match config.forge.kind {
            // Built for the processes that own workers' pushes (supervisors, resume, spawn).
            crate::config::ForgeKind::Local => Ok(AnyForge::Local(
                local::LocalForge::new(state_dir, config).recovering(),
            )),
            crate::config::ForgeKind::Forgejo => {
                let token = crate::token::forge_token(config).map_err(|e| e.to_string())?;
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

impl AnyForge {
    /// The forge as a command someone waits on uses it (`ci status`, `ci logs`): Forgejo gives
    /// up per `patience` and tells an outage at once; the local forge only reads — it starts
    /// no run, not even for a push whose hook was lost (that is its owners' job: supervisors
    /// and `resume`).
    pub fn for_query(self, patience: Patience) -> AnyForge {
        match self {
            AnyForge::Forgejo(f) => AnyForge::Forgejo(f.with_patience(patience)),
            AnyForge::Local(f) => AnyForge::Local(f.read_only()),
        }
    }
}

impl AnyForge {
    /// Why no CI run will ever come for `sha`, where the forge can know it (the local forge:
    /// only pushes start runs). `None`: one may still come.
    pub fn no_run_coming(&self, repo: &Repo, sha: &str) -> Option<String> {
        match self {
            AnyForge::Forgejo(_) => None,
            AnyForge::Local(f) => f.no_run_coming(&repo.name, sha),
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

    async fn push_run_states(
        &self,
        repo: &Repo,
        sha: &str,
    ) -> Result<Option<RunStates>, ForgeError> {
        match self {
            AnyForge::Forgejo(f) => f.push_run_states(repo, sha).await,
            AnyForge::Local(f) => f.push_run_states(repo, sha).await,
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

    async fn open_pull(
        &self,
        repo: &Repo,
        head: &str,
        base: &str,
        title: &str,
        body: &str,
    ) -> Result<PullRequest, ForgeError> {
        match self {
            AnyForge::Forgejo(f) => f.open_pull(repo, head, base, title, body).await,
            AnyForge::Local(_) => Err(no_pulls()),
        }
    }

    async fn pull(&self, repo: &Repo, number: i64) -> Result<PullRequest, ForgeError> {
        match self {
            AnyForge::Forgejo(f) => f.pull(repo, number).await,
            AnyForge::Local(_) => Err(no_pulls()),
        }
    }

    async fn merge_pull(
        &self,
        repo: &Repo,
        number: i64,
        style: &str,
        head_commit_id: &str,
        title: &str,
    ) -> Result<MergeAnswer, ForgeError> {
        match self {
            AnyForge::Forgejo(f) => {
                f.merge_pull(repo, number, style, head_commit_id, title)
                    .await
            }
            AnyForge::Local(_) => Err(no_pulls()),
        }
    }

    fn rerun(&self, repo: &str, git_ref: &str, sha: &str) -> Option<Result<String, ForgeError>> {
        match self {
            AnyForge::Forgejo(f) => f.rerun(repo, git_ref, sha),
            AnyForge::Local(f) => Forge::rerun(f, repo, git_ref, sha),
        }
    }

    fn start_pinned_run(
        &self,
        repo: &str,
        branch: &str,
        sha: &str,
        pins: &[(String, String)],
    ) -> Option<Result<(), ForgeError>> {
        match self {
            AnyForge::Forgejo(f) => f.start_pinned_run(repo, branch, sha, pins),
            AnyForge::Local(f) => Forge::start_pinned_run(f, repo, branch, sha, pins),
        }
    }

    fn cancel_runs_of_refs(
        &self,
        abandoned: &[Abandoned],
        note: &str,
    ) -> Result<Vec<String>, ForgeError> {
        match self {
            AnyForge::Forgejo(f) => Forge::cancel_runs_of_refs(f, abandoned, note),
            AnyForge::Local(f) => Forge::cancel_runs_of_refs(f, abandoned, note),
        }
    }
}
