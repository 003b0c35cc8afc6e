//! `repos.yaml`: the repositories, their dependencies, the forge, worker and alert settings.
//!
//! Loading is two steps: the YAML is read into `raw` types that keep source positions, then
//! `validate` turns them into a [`Config`], collecting every problem (with file:line:column)
//! instead of stopping at the first one.

pub mod agent;
pub mod model;
mod raw;
mod shape;
mod validate;

pub use agent::Agent;

use crate::diag::{Diagnostic, Diagnostics};
use crate::graph::RepoGraph;
use crate::yaml::from_yaml_str;
use raw::RawConfig;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::time::Duration;
use validate::validate;

/// The longest repository name orch accepts, so that every file it names after a worker
/// fits in a file name (255 bytes). The longest is the temporary file a checkpoint is
/// written through: `<YYYY-MM-DD>-<repo>-<8 hex>.checkpoint.tmp.<pid>` (worker ids are
/// `<repo>-<8 hex>`, see `app::spawn`; pids have at most 10 digits).
pub const MAX_REPO_NAME: usize =
    255 - "YYYY-MM-DD-".len() - "-0123abcd".len() - ".checkpoint.tmp.".len() - "4294967295".len();

/// `path` without `.` and `..` components, lexically.
fn normalize(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// `path` as the file system resolves it: its longest existing ancestor canonicalised
/// (symlinks followed), the rest appended lexically. (The one helper here that reads the
/// file system, for `Config::load` and for checks of paths found in state files.)
pub(crate) fn resolve_on_disk(path: &Path) -> PathBuf {
    let path = normalize(path);
    let mut existing = path.as_path();
    let mut rest = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(existing) {
            let mut out = real;
            for r in rest.iter().rev() {
                out.push(r);
            }
            return out;
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                existing = parent;
            }
            _ => return path,
        }
    }
}

/// Which forge runs CI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ForgeKind {
    /// The embedded default: bare remotes under the state directory, jobs run locally.
    Local,
    /// A Forgejo (or Gitea) server reached over HTTP.
    Forgejo,
}

impl ForgeKind {
    pub const ALL: [ForgeKind; 2] = [ForgeKind::Local, ForgeKind::Forgejo];

    pub fn parse(s: &str) -> Option<ForgeKind> {
        ForgeKind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ForgeKind::Local => "local",
            ForgeKind::Forgejo => "forgejo",
        }
    }
}

/// Local forge: how old a branch ref without a CI run must be before the push counts as one
/// whose hook was lost, unless `forge.lost_hook_grace` says otherwise. Long enough that a hook
/// which is merely slow is not raced.
pub const LOST_HOOK_GRACE: Duration = Duration::from_secs(5);

/// How long an interactive command retries an unreachable forge, unless
/// `forge.give_up_after` says otherwise: a person is waiting, and exit 3 tells a script to
/// retry later.
pub const GIVE_UP_AFTER: Duration = Duration::from_secs(10);

#[derive(Debug, Clone)]
pub struct ForgeConfig {
    pub kind: ForgeKind,
    pub url: Option<String>,
    pub owner: Option<String>,
    /// The NAME of the environment variable holding the token, never the token.
    pub token_env: Option<String>,
    /// A file holding the token (mode 0600 or stricter), resolved against repos.yaml's
    /// directory: the token then never passes through any process's environment.
    pub token_file: Option<PathBuf>,
    pub request_timeout: Duration,
    /// How long a command someone waits on (`ci status`, `ci logs`) keeps retrying a forge
    /// that does not answer before it gives up (exit 3). Supervisors and `resume` follow the
    /// contract's patient transient back-off instead.
    pub give_up_after: Duration,
    /// Local forge: how many runs may execute at once across all repositories.
    pub max_concurrent_runs: usize,
    /// Local forge: how old a branch ref without a CI run must be before its push counts as
    /// one whose hook was lost (and its run is started then).
    pub lost_hook_grace: Duration,
    /// Local forge: where its bare remotes, logs and job directories live, when not in the
    /// state directory (`forge/`): one directory every node sharing a store reaches
    /// (resolved against repos.yaml's directory).
    pub path: Option<PathBuf>,
}

#[derive(Debug, Clone)]
pub struct CiConfig {
    pub sync_job: String,
    /// `None`: every job of the push-triggered run is required.
    pub required_jobs: Option<Vec<String>>,
    /// How long a pushed SHA may go without a push-triggered run before the verdict is `no_run`.
    pub start_timeout: Duration,
    pub poll_interval: Duration,
    /// `ci.protected_paths` as written (`None`: not written — each repository gets the
    /// defaults, see [`Repo::protected_paths`]).
    pub protected_paths: Option<Vec<crate::protect::Pattern>>,
}

#[derive(Debug, Clone)]
pub struct WorkerConfig {
    /// Which agent the command runs: how its output is read, how a respawn resumes it.
    pub agent: Agent,
    /// The argv template (placeholders such as `{session_id}`: see `agent::PLACEHOLDERS`).
    pub command: Vec<String>,
    /// This node's slots: workers it supervises at once.
    pub max_parallel: usize,
    /// The organisation's: workers at once on every node together (nodes sharing a store);
    /// `None`, no limit but each node's.
    pub max_parallel_total: Option<usize>,
    pub env_passthrough: Vec<String>,
    pub max_respawns: u32,
    /// Time between SIGTERM and SIGKILL when a worker's process group is stopped.
    pub stop_grace: Duration,
    /// Budget per task (summed across respawns): past it the worker is stopped and FAILED.
    pub max_cost_usd: Option<f64>,
    pub max_tokens: Option<u64>,
    /// The unprivileged accounts workers run as (`worker.user`: one; `worker.users`: a pool,
    /// one account per live worker), by name or number: orch's database, state and processes
    /// are then not theirs (see `account.rs`). Empty: orch's own user.
    pub users: Vec<String>,
    /// `worker.sandbox`: each worker in a mount namespace of its own that hides orch's state
    /// directory (but its workspace), the repositories' clones, orch's home's credentials and
    /// the cgroup tree, with a `/proc` of its PID namespace alone (see `sandbox.rs`): the
    /// separation `worker.user` gives, for an orch that runs unprivileged.
    pub sandbox: bool,
    /// `worker.hide`: more paths a sandboxed worker must not see.
    pub hide: Vec<PathBuf>,
    /// `worker.model`: the model every worker's agent runs with unless a repository, a task
    /// or an override says otherwise (None: the agent's own default, no model argument).
    pub model: Option<String>,
    /// `worker.model_overrides`: a stronger model per condition of the contract's
    /// `override_to_opus` (see `model::choose`).
    pub model_overrides: model::ModelOverrides,
}

impl WorkerConfig {
    /// Whether workers work in a workspace of their own, cut off from orch's files: they run
    /// as accounts of their own (`worker.user(s)`) or in a sandbox (`worker.sandbox`). Their
    /// pushes, fetches and CI questions then go through their supervisor.
    pub fn separate(&self) -> bool {
        self.accounts() || self.sandbox
    }

    /// Whether workers run as accounts of their own (`worker.user` / `worker.users`).
    pub fn accounts(&self) -> bool {
        !self.users.is_empty()
    }
}

/// Where an alert is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SinkKind {
    /// POST of the alert as JSON (with a `text` field) to the URL in the variable `url_env`.
    Webhook { url_env: String },
    /// The command, with the alert as JSON on its stdin.
    Command { argv: Vec<String> },
}

/// Alert severities, in order (the same words as `milestone::Severity`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum AlertLevel {
    Info,
    Warning,
    Critical,
}

impl AlertLevel {
    pub fn parse(s: &str) -> Option<AlertLevel> {
        match s {
            "info" => Some(AlertLevel::Info),
            "warning" => Some(AlertLevel::Warning),
            "critical" => Some(AlertLevel::Critical),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            AlertLevel::Info => "info",
            AlertLevel::Warning => "warning",
            AlertLevel::Critical => "critical",
        }
    }
}

/// One configured alert sink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertSink {
    pub kind: SinkKind,
    /// Its name in the outbox and in `orch alerts` (`webhook:VAR`, `command:prog`; `#n` added
    /// when two sinks would share a name). Never the URL.
    pub label: String,
    /// Alerts below this severity are not sent here.
    pub min_severity: AlertLevel,
    /// How long one delivery may take.
    pub timeout: Duration,
}

impl AlertSink {
    /// Whether an alert of `severity` goes to this sink (unknown severities do).
    pub fn wants(&self, severity: &str) -> bool {
        AlertLevel::parse(severity).is_none_or(|s| s >= self.min_severity)
    }
}

/// How alerts are de-duplicated and delivered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertsConfig {
    pub sinks: Vec<AlertSink>,
    /// The same (worker or repository, kind) within this window is recorded once, with a
    /// repeat count, and not sent again.
    pub dedup_window: Duration,
    /// The wait before the second attempt of a failed delivery; doubled after each failure
    /// (at most `MAX_RETRY_WAIT`).
    pub retry_initial: Duration,
    /// A delivery is given up after this many attempts (recorded with why).
    pub max_attempts: u32,
}

pub const DEDUP_WINDOW: Duration = Duration::from_secs(15 * 60);
pub const MAX_RETRY_WAIT: Duration = Duration::from_secs(5 * 60);

impl Default for AlertsConfig {
    fn default() -> Self {
        AlertsConfig {
            sinks: Vec::new(),
            dedup_window: DEDUP_WINDOW,
            retry_initial: Duration::from_secs(2),
            max_attempts: 8,
        }
    }
}

/// A CI job of the local forge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobSpec {
    pub name: String,
    pub run: String,
    pub needs: Vec<String>,
    pub timeout: Option<Duration>,
    /// `ci.env` with the job's own `env` over it: set in the job's environment.
    pub env: Vec<(String, String)>,
}

#[derive(Debug, Clone)]
pub struct Repo {
    pub name: String,
    /// Absolute path of the local clone.
    pub path: PathBuf,
    pub branch: String,
    /// Direct dependencies, as written (the graph computes closures).
    pub deps: Vec<String>,
    pub jobs: Vec<JobSpec>,
    /// How DONE work on this repository reaches its base branch (`land:`, the repository's
    /// over the organisation's).
    pub land: LandConfig,
    /// The paths a worker's change may not touch without an operator's approval
    /// (`ci.protected_paths`: the repository's own, else the organisation's, else the
    /// workflow directories and the scripts its jobs run).
    pub protected_paths: Vec<crate::protect::Pattern>,
    /// `model`: the model its workers run with, over `worker.model`.
    pub model: Option<String>,
}

/// `land.policy`: what orch does with a DONE worker's branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LandPolicy {
    /// orch moves the base branch to the verified change (fast-forward, or an integration
    /// verified by its own CI first) with a compare-and-swap, then waits for the base
    /// branch's CI of that commit; the chain lock is held until then.
    Merge,
    /// orch does not land: the change waits on its branch for a person (dependents in a
    /// wave wait until it is on the base branch).
    None,
    /// Forgejo: orch opens a pull request from the worker's branch and merges it through the
    /// API, pinned to the head commit it verified; a refusal (branch protection, approvals)
    /// is the server's to say, and leaves the landing `refused` with an alert.
    PullRequest,
    /// The contract's `branch_strategy: main`: the worker pushes to the base branch itself
    /// (only the chain lock makes that safe); DONE is judged on the base head.
    Direct,
}

impl LandPolicy {
    pub fn as_str(self) -> &'static str {
        match self {
            LandPolicy::Merge => "merge",
            LandPolicy::None => "none",
            LandPolicy::PullRequest => "pull_request",
            LandPolicy::Direct => "direct",
        }
    }
}

/// `land.method`: how an integration is built when the base branch moved since the worker
/// started (a base that did not move is fast-forwarded, whatever the method).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LandMethod {
    /// A merge commit of the worker's branch into the base head.
    Merge,
    /// The worker's commits replayed onto the base head.
    Rebase,
    /// One commit with the worker's whole change on the base head.
    Squash,
}

impl LandMethod {
    pub fn as_str(self) -> &'static str {
        match self {
            LandMethod::Merge => "merge",
            LandMethod::Rebase => "rebase",
            LandMethod::Squash => "squash",
        }
    }
}

/// `history:`: how long the records of ended workers are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HistoryConfig {
    /// An ended worker's records (its database rows, its session directory) are pruned by
    /// `orch gc` this long after it ended.
    pub keep: std::time::Duration,
}

/// `history.keep` when repos.yaml does not say.
pub const HISTORY_KEEP: std::time::Duration = std::time::Duration::from_secs(30 * 24 * 3600);

impl Default for HistoryConfig {
    fn default() -> Self {
        HistoryConfig { keep: HISTORY_KEEP }
    }
}

/// `downstream:`: after a change lands on X, X's dependents' CI is run on their base heads
/// with the new X (up to `depth` levels up the graph; 0: no check).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DownstreamConfig {
    pub depth: u32,
    pub on_breakage: OnBreakage,
}

impl Default for DownstreamConfig {
    fn default() -> Self {
        DownstreamConfig {
            depth: 1,
            on_breakage: OnBreakage::Hold,
        }
    }
}

/// What a red dependent after a landing leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnBreakage {
    /// An operator hold on the broken dependent's chain (nothing starts there until a person
    /// looks), taken in the transaction that frees the landing's lock.
    Hold,
    /// The hold, handed over at once to a fix worker on the dependent (the failing jobs' logs
    /// in its prompt), which is itself landed and checked like any change.
    Fix,
    /// orch lands a revert of the breaking change (verified like any landing), the chain lock
    /// held until the base branch's CI is green with it; the task is shown `reverted`.
    Revert,
}

impl Config {
    /// The repositories that depend on `repo` directly or through up to `depth` levels, in
    /// breadth-first order.
    pub fn dependents_within(&self, repo: &str, depth: u32) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let mut frontier = vec![repo.to_string()];
        for _ in 0..depth {
            let mut next = Vec::new();
            for r in &self.repos {
                if r.deps.iter().any(|d| frontier.contains(d))
                    && r.name != repo
                    && !out.contains(&r.name)
                {
                    out.push(r.name.clone());
                    next.push(r.name.clone());
                }
            }
            if next.is_empty() {
                break;
            }
            frontier = next;
        }
        out
    }
}

/// The landing settings of one repository.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LandConfig {
    pub policy: LandPolicy,
    pub method: LandMethod,
    /// Integrations built (the base moved again while one was verified) before orch gives up
    /// with an alert.
    pub max_attempts: u32,
    pub on_conflict: OnConflict,
}

/// `land.on_conflict`: what a change that does not merge with the moved base leads to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnConflict {
    /// The contract's `merge_conflict_with_main: blocking`: the chain lock is kept, an alert
    /// goes out, a person integrates.
    Block,
    /// A replacement worker on the same task, told which files conflict, takes the chain lock
    /// over (no gap) and redoes the change on the current base.
    Fix,
}

impl LandConfig {
    /// The defaults: the local forge lands (`merge`: nothing reaches the base branch that
    /// CI has not proven); on Forgejo orch leaves the base branch to people unless told.
    pub fn default_for(kind: ForgeKind) -> LandConfig {
        LandConfig {
            policy: match kind {
                ForgeKind::Local => LandPolicy::Merge,
                ForgeKind::Forgejo => LandPolicy::None,
            },
            method: LandMethod::Merge,
            max_attempts: 3,
            on_conflict: OnConflict::Block,
        }
    }
}

/// `store:` of repos.yaml, validated: exactly one of `url` (with no password in it) and
/// `url_env`; the password, when not in the variable's URL, in `password_env`. Where it leads
/// (and how the secret is found) is the store's to say (`store::location`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StoreConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url_env: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password_env: Option<String>,
}

/// True when a URL's userinfo (`user:password@`) or a `password=` pair carries a password.
pub fn url_has_password(url: &str) -> bool {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = &rest[..rest.find(['/', '?']).unwrap_or(rest.len())];
    let in_userinfo = authority
        .rfind('@')
        .is_some_and(|at| authority[..at].contains(':'));
    let in_query = url.split_once('?').is_some_and(|(_, q)| {
        q.split('&')
            .any(|kv| kv.split_once('=').is_some_and(|(k, _)| k == "password"))
    });
    in_userinfo || in_query
}

pub fn url_is_postgres(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// `serve:`: the board (`orch serve`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServeConfig {
    /// The NAME of the environment variable holding the board's bearer token: needed to
    /// listen beyond loopback and for actions. The token itself is never in repos.yaml.
    pub token_env: Option<String>,
}

#[derive(Debug, Clone)]
pub struct Config {
    /// The repos.yaml this was loaded from (absolute).
    pub file: PathBuf,
    pub forge: ForgeConfig,
    pub ci: CiConfig,
    pub worker: WorkerConfig,
    pub alerts: AlertsConfig,
    /// What orch checks after a change lands.
    pub downstream: DownstreamConfig,
    /// How long ended workers' records are kept (`orch gc` prunes them after).
    pub history: HistoryConfig,
    /// The board's settings.
    pub serve: ServeConfig,
    /// Where orch's state lives: `None` is the state directory's SQLite file.
    pub store: Option<StoreConfig>,
    /// `node.name`: this host's name among the nodes sharing the store (`crate::node`:
    /// `ORCH_NODE` overrides it, the host's name stands in for it).
    pub node_name: Option<String>,
    /// In declaration order.
    pub repos: Vec<Repo>,
    pub graph: RepoGraph,
}

/// The file orch looks for when no `--config` is given.
pub const CONFIG_FILE: &str = "repos.yaml";

/// The first `repos.yaml` in `start` or a directory above it (as git and cargo search).
pub fn find_upward(start: &Path) -> Option<PathBuf> {
    start
        .ancestors()
        .map(|d| d.join(CONFIG_FILE))
        .find(|f| f.is_file())
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(
        "no repos.yaml in {} or any directory above it; run orch inside your organisation's directory, pass --config FILE (or set ORCH_CONFIG), or make one: `orch init` (in the directory that holds your clones) or `orch init --example` (a demo organisation to try orch on)",
        start.display()
    )]
    NotFound { start: PathBuf },
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Invalid(Diagnostics),
}

impl Config {
    /// Reads and validates `path`. Clone paths are compared as the file system resolves
    /// them (symlinks followed), so one clone under two names is refused.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let file = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        let bytes = std::fs::read(&file).map_err(|source| ConfigError::Read {
            path: file.clone(),
            source,
        })?;
        let text = crate::text::utf8(&bytes).map_err(|bad| {
            let pos = crate::yaml::Pos {
                line: bad.line,
                column: bad.column,
            };
            ConfigError::Invalid(Diagnostics(vec![Diagnostic::new(
                &file,
                Some(pos),
                bad.describe(&bytes),
            )]))
        })?;
        Config::parse(text, &file, &resolve_on_disk).map_err(ConfigError::Invalid)
    }

    /// Parses and validates `text` as if read from `file` (relative repo paths resolve
    /// against `file`'s directory; clone paths are compared lexically).
    pub fn from_str(text: &str, file: &Path) -> Result<Config, Diagnostics> {
        Config::parse(text, file, &normalize)
    }

    /// Every problem is reported in one run, in position order: the document is first read
    /// as a tree of keys and checked against the known keys and the shape of each value
    /// (wrong-typed values and required keys left out), then read into the typed shapes
    /// (which ignore unknown keys and the values set aside) and validated.
    fn parse(text: &str, file: &Path, resolve: validate::Resolve) -> Result<Config, Diagnostics> {
        let one =
            |e: crate::yaml::YamlError| Diagnostics(vec![Diagnostic::new(file, e.pos, e.message)]);
        let tree: serde_saphyr::Spanned<raw::Node> = from_yaml_str(text).map_err(one)?;
        let mut diags: Vec<Diagnostic> = raw::unknown_keys(&tree)
            .into_iter()
            .map(|(pos, message)| Diagnostic::new(file, pos, message))
            .collect();
        // Wrong-typed values and required keys left out are reported here; the values are
        // then set aside so the rest is still read.
        let misfits = shape::shape_problems(&tree);
        diags.extend(
            misfits
                .iter()
                .map(|w| Diagnostic::new(file, w.pos, w.message.clone())),
        );
        let text = &shape::set_aside(text, &misfits);
        let outcome = match from_yaml_str::<RawConfig>(text) {
            Ok(raw) => validate(raw, file, resolve),
            Err(e) => Err(Diagnostics(vec![Diagnostic::new(file, e.pos, e.message)])),
        };
        let mut diags = Diagnostics(diags);
        match outcome {
            Ok(config) if diags.0.is_empty() => return Ok(config),
            Ok(_) => {}
            Err(more) => diags.0.extend(more.0),
        }
        diags.sort();
        Err(diags)
    }

    /// The directory holding repos.yaml; relative paths in it are relative to this.
    pub fn root(&self) -> &Path {
        self.file.parent().unwrap_or(Path::new("."))
    }

    pub fn repo(&self, name: &str) -> Option<&Repo> {
        self.repos.iter().find(|r| r.name == name)
    }

    /// The repository named `name`, or an error listing the known ones.
    pub fn require_repo(&self, name: &str) -> Result<&Repo, UnknownRepo> {
        self.repo(name).ok_or_else(|| UnknownRepo {
            name: name.to_string(),
            file: self.file.clone(),
            known: self.graph.names().to_vec(),
        })
    }

    /// The model a worker on `repo` runs with for a task with `traits` (see `model::choose`).
    pub fn model_for(&self, repo: &str, traits: &model::TaskTraits) -> Option<model::ModelChoice> {
        model::choose(
            self.worker.model.as_deref(),
            &self.worker.model_overrides,
            self.repo(repo).and_then(|r| r.model.as_deref()),
            traits,
        )
    }

    /// On the local forge, why a worker on `repo` could never reach DONE (no CI jobs, or no
    /// sync job among them); `None` when it can.
    pub fn local_ci_gap(&self, repo: &Repo) -> Option<String> {
        if self.forge.kind != ForgeKind::Local {
            return None;
        }
        if repo.jobs.is_empty() {
            return Some(format!(
                "repository {} has no ci.jobs in {}: on the local forge its pushes start no CI run, so a worker could never reach DONE",
                repo.name,
                self.file.display()
            ));
        }
        if !repo.jobs.iter().any(|j| j.name == self.ci.sync_job) {
            return Some(format!(
                "repository {}'s ci.jobs in {} have no {} job (ci.sync_job): CI could never be green",
                repo.name,
                self.file.display(),
                self.ci.sync_job
            ));
        }
        None
    }
}

#[derive(Debug, Clone, thiserror::Error)]
#[error("unknown repository \"{name}\" (not in {file}; known: {known})", known = known.join(", "))]
pub struct UnknownRepo {
    pub name: String,
    pub file: PathBuf,
    pub known: Vec<String>,
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum MissingToken {
    #[error(
        "the forge token variable {var} is not set (named by forge.token_env in {file}); export it with a token that has read:repository"
    )]
    Unset { var: String, file: PathBuf },
    #[error("the forge token file {path} (forge.token_file in {file}) {why}")]
    File {
        path: PathBuf,
        file: PathBuf,
        why: String,
    },
}

#[cfg(test)]
mod tests;
