//! The command line: argument parsing, global options, and dispatch to command handlers.
//!
//! Exit codes: 0 success / yes, 1 a negative answer or a task that ended not DONE, 2 bad input
//! or usage, 3 the forge or another dependency unreachable, or the system could not do the job
//! (a locked database, an I/O failure): a retry may work. The table is in README.md.
//! Tables go to stdout, logs to stderr.

mod ci;
mod complete;
mod demo;
mod gc;
mod init;
mod locks;
mod logs;
pub(crate) mod nodes;
mod show;
mod wave;
pub(crate) mod workers;

use crate::config::{Config, ConfigError};
use crate::contract::{Contract, ContractError};
use crate::store::{Store, StoreError};
use clap::{Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

#[derive(Debug, Parser)]
#[command(
    name = "orch",
    version,
    about = "Dependency-aware orchestrator for coding workers, gated on Forgejo CI"
)]
pub struct Cli {
    /// repos.yaml describing repositories, dependencies, forge and workers [default: the
    /// first repos.yaml found in the current directory or a directory above it].
    #[arg(long, global = true, env = "ORCH_CONFIG")]
    pub config: Option<PathBuf>,
    /// State directory (SQLite database, checkpoints, logs) [default: sessions/ beside repos.yaml].
    #[arg(long, global = true, env = "ORCH_STATE_DIR")]
    pub state_dir: Option<PathBuf>,
    /// Worker completion contract [default: contracts/worker-completion.yaml beside repos.yaml].
    #[arg(long, global = true, env = "ORCH_CONTRACT")]
    pub contract: Option<PathBuf>,
    /// Log format on stderr.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// More logs (-v: debug, -vv: trace).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Only errors on stderr.
    #[arg(short, long, global = true)]
    pub quiet: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub enum GraphFormat {
    Text,
    Dot,
    Mermaid,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Validate repos.yaml and the contract; report every problem (exit 2 if any).
    Check {
        /// One JSON object: ok, problems (file, line, column, message), warnings.
        #[arg(long)]
        json: bool,
    },
    /// Show repositories, their dependencies, chains and layers.
    Graph {
        /// text (for people), dot (Graphviz) or json.
        #[arg(long, value_enum, default_value_t = GraphFormat::Text)]
        format: GraphFormat,
    },
    /// Exit 0 if a worker could start on REPO now, 1 if not (naming every blocker).
    CanSpawn {
        repo: String,
        /// Answer as one JSON object instead of text (its schema: docs/schema/).
        #[arg(long)]
        json: bool,
    },
    /// Take REPO's chain lock for a human (a freeze during a release).
    Hold {
        repo: String,
        /// Why (shown to anyone blocked by this hold).
        #[arg(long)]
        reason: String,
        /// Who holds it; the holder is shown as hold:<by> [default: $USER].
        #[arg(long)]
        by: Option<String>,
        /// Answer as one JSON object instead of text (its schema: docs/schema/).
        #[arg(long)]
        json: bool,
    },
    /// FATAL on a chain (a secret committed, data corruption, a breaking change to a stable
    /// interface): with --reason, stop every worker in TARGET's chain (a repository, or a
    /// worker's) and let none start or go on until --clear; alone, show the hold and what the
    /// chain landed since its task began, with the commands that revert it (orch never does).
    Fatal {
        /// A repository, or a worker id (its repository's chain).
        target: String,
        /// Why: what went wrong (never a secret's value).
        #[arg(long, conflicts_with = "clear")]
        reason: Option<String>,
        /// End the fatal hold: the chain's workers go on.
        #[arg(long)]
        clear: bool,
        /// Who reports or clears it [default: $USER].
        #[arg(long)]
        by: Option<String>,
        /// Answer as one JSON object instead of text (its schema: docs/schema/).
        #[arg(long)]
        json: bool,
    },
    /// Release an operator hold on REPO.
    Unhold {
        repo: String,
        /// Answer as one JSON object instead of text (its schema: docs/schema/).
        #[arg(long)]
        json: bool,
    },
    /// Start a worker on REPO (takes the chain lock; detached unless --foreground).
    Spawn {
        /// The repository to work on (its name in repos.yaml).
        #[arg(long)]
        repo: String,
        /// What the worker is to do (the prompt's task; up to 64 KiB).
        #[arg(long)]
        task: String,
        /// The task's id in your tracker or wave file.
        #[arg(long = "id")]
        task_id: Option<String>,
        /// The part of the repository the task is about (named in the prompt).
        #[arg(long)]
        component: Option<String>,
        /// Path of the plan the worker should follow.
        #[arg(long)]
        plan: Option<String>,
        /// Queue until the chain is free instead of exiting 1.
        #[arg(long)]
        wait: bool,
        /// With --wait: give up after this long (e.g. 30m).
        #[arg(long, value_parser = parse_duration)]
        wait_timeout: Option<std::time::Duration>,
        /// Supervise in this process; exit 0 on DONE, 1 on any other end.
        #[arg(long)]
        foreground: bool,
        /// The model the worker's agent runs with, over repos.yaml's choice.
        #[arg(long)]
        model: Option<String>,
        /// The task's complexity: `high` picks worker.model_overrides.complexity_high.
        #[arg(long, value_parser = ["low", "medium", "high"])]
        complexity: Option<String>,
        /// Picks worker.model_overrides.security_sensitive.
        #[arg(long)]
        security_sensitive: bool,
        /// A file the task creates or changes (repeatable): shown to the worker with its task.
        #[arg(long = "file")]
        files: Vec<String>,
        /// A technical requirement (repeatable).
        #[arg(long = "requirement")]
        requirements: Vec<String>,
        /// What the worker may touch (repeatable).
        #[arg(long)]
        scope_in: Vec<String>,
        /// What the worker must leave alone (repeatable).
        #[arg(long)]
        scope_out: Vec<String>,
        /// The form its result should take (e.g. "a PR-ready commit with tests").
        #[arg(long)]
        output_format: Option<String>,
        /// Answer as one JSON object instead of text (its schema: docs/schema/).
        #[arg(long)]
        json: bool,
    },
    /// Report a milestone (run by workers, over the channel their supervisor gave them).
    Report {
        milestone: String,
        /// The commit the milestone is about (PUSHED_TO_CI, DONE; default: HEAD).
        #[arg(long)]
        sha: Option<String>,
        /// The CI job a FIXING_CI report is about.
        #[arg(long)]
        job: Option<String>,
        /// A word for the people reading the worker's history (why BLOCKED, what was fixed).
        #[arg(long)]
        note: Option<String>,
        /// Why (FATAL: what went wrong — a secret committed, data corruption, a breaking
        /// change to a stable interface; never the secret itself).
        #[arg(long)]
        reason: Option<String>,
        /// Answer as one JSON object instead of text (its schema: docs/schema/).
        #[arg(long)]
        json: bool,
    },
    /// Live workers and the last ended ones, with milestone, age, last SHA and its verdict;
    /// locks and holds.
    Status {
        /// Answer as one JSON object instead of text (its schema: docs/schema/).
        #[arg(long)]
        json: bool,
        /// Refresh every 2 seconds.
        #[arg(long)]
        watch: bool,
        #[command(flatten)]
        history: HistoryArgs,
    },
    /// The nodes (hosts) sharing this organisation's store: heartbeat age, live workers, slots,
    /// version.
    Nodes {
        /// Answer as one JSON object instead of text (its schema: docs/schema/).
        #[arg(long)]
        json: bool,
    },
    /// Worker sessions: list, or show one with its events.
    Sessions {
        #[command(subcommand)]
        command: SessionsCommand,
    },
    /// Stop a worker (CANCELLED) and release its lock.
    Cancel {
        id: String,
        /// Why (kept in the worker's history).
        #[arg(long)]
        reason: Option<String>,
        /// Who did it, for the audit trail [default: $USER].
        #[arg(long)]
        by: Option<String>,
        /// Answer as one JSON object instead of text (its schema: docs/schema/).
        #[arg(long)]
        json: bool,
    },
    /// Give a BLOCKED or BLOCKED_PERMISSION worker another go: a replacement continues its
    /// work (FIXING_CI when it pushed, else WORKING), told `--note`. A FAILED worker's task is
    /// reassigned: a new worker takes it (and its chain lock) over, told its checkpoint.
    Respawn {
        id: String,
        /// What the replacement is told (e.g. what the operator changed).
        #[arg(long, default_value = "")]
        note: String,
        /// Who did it, for the audit trail [default: $USER].
        #[arg(long)]
        by: Option<String>,
        /// Answer as one JSON object instead of text (its schema: docs/schema/).
        #[arg(long)]
        json: bool,
    },
    /// Approve a worker's change that touches protected paths (ci.protected_paths): shows the
    /// diff of those files, then lets the worker held on that commit reach DONE (audited; a
    /// later push needs a new approval).
    Approve {
        id: String,
        /// The commit to approve (at least 7 hex digits): refused unless it is the worker's
        /// change, so that what is approved is what was looked at.
        #[arg(long)]
        sha: Option<String>,
        /// Show the diff only; approve nothing.
        #[arg(long)]
        dry_run: bool,
        /// Answer as one JSON object instead of text (its schema: docs/schema/).
        #[arg(long)]
        json: bool,
    },
    /// Release a worker's chain lock without a verified DONE (audited).
    Release {
        id: String,
        /// Required: releasing a lock without a verified DONE is never a default.
        #[arg(long)]
        force: bool,
        /// Why (kept in the lock history and the worker's history).
        #[arg(long)]
        reason: String,
        /// Who did it, for the audit trail [default: $USER].
        #[arg(long)]
        by: Option<String>,
        /// Answer as one JSON object instead of text (its schema: docs/schema/).
        #[arg(long)]
        json: bool,
    },
    /// CI of a commit as orch judges it.
    Ci {
        #[command(subcommand)]
        command: CiCommand,
    },
    /// Take over workers whose supervisor is gone and reconcile them from CI.
    Resume {
        /// Rebuild a missing or unreadable database from sessions/*.checkpoint.yaml first.
        #[arg(long)]
        from_checkpoints: bool,
        /// Answer as one JSON object instead of text (its schema: docs/schema/).
        #[arg(long)]
        json: bool,
    },
    /// Alerts recorded by orch (newest last).
    Alerts {
        /// Only alerts newer than this (e.g. 1h, 30m) [default: 24h].
        #[arg(long, value_parser = parse_duration)]
        since: Option<std::time::Duration>,
        /// Answer as one JSON object instead of text (its schema: docs/schema/).
        #[arg(long)]
        json: bool,
    },
    /// Waves: many tasks run by cron ticks, bottom-up, critical path first.
    Wave {
        #[command(subcommand)]
        command: wave::WaveCommand,
    },
    /// Internal: supervise a worker (started by `orch spawn`).
    #[command(name = "__supervise", hide = true)]
    Supervise { id: String },
    /// Internal: the repositories or worker ids a shell completes (see `completions`).
    #[command(name = "__complete", hide = true)]
    Complete {
        #[arg(value_enum)]
        kind: complete::Kind,
    },
    /// Run a throwaway example organisation end to end on the local forge.
    Demo {
        /// Keep the temporary directory for inspection.
        #[arg(long)]
        keep: bool,
        /// Print the outcome as one JSON object (the timeline goes to stderr).
        #[arg(long)]
        json: bool,
    },
    /// Write a commented repos.yaml for the git repositories in DIR (default: here).
    Init {
        dir: Option<PathBuf>,
        /// Also write the contract and prompt templates under contracts/, to tune them.
        #[arg(long)]
        with_contract: bool,
        /// Replace an existing repos.yaml (and contract files).
        #[arg(long)]
        force: bool,
        /// Write the demo organisation instead (repositories with CI on the local forge, a
        /// scripted worker, repos.yaml, a wave file): one that runs as it is.
        #[arg(long)]
        example: bool,
        /// Answer as one JSON object instead of text (its schema: docs/schema/).
        #[arg(long)]
        json: bool,
    },
    /// Remove the worktrees and orch/<id> branches of DONE and CANCELLED workers whose commits
    /// are on the remote (never unpushed work), and the `orch` remote once nothing of orch's is
    /// left in a clone.
    Gc {
        /// List what would be removed; change nothing.
        #[arg(long)]
        dry_run: bool,
        /// Answer as one JSON object instead of text (its schema: docs/schema/).
        #[arg(long)]
        json: bool,
    },
    /// A worker's output with its milestones and other events interleaved where they happened.
    Logs {
        id: String,
        /// Follow the log until the worker has ended (DONE, FAILED, CANCELLED).
        #[arg(short, long)]
        follow: bool,
        /// One JSON object per line: {"type":"log","text"} or {"type":"event",…}.
        #[arg(long)]
        json: bool,
        /// The agent's output exactly as written (Claude's and Codex's JSON events are
        /// otherwise shown as readable lines).
        #[arg(long)]
        raw: bool,
    },
    /// Serve the operator's board: a live page, a read-only JSON API (the views of the
    /// commands' --json), server-sent events and Prometheus /metrics.
    Serve {
        /// Where to listen; beyond loopback only with serve.token_env set (port 0: any free
        /// port; the address is printed on stdout).
        #[arg(long, default_value = "127.0.0.1:7878")]
        listen: String,
    },
    /// Print shell completions.
    Completions { shell: clap_complete::Shell },
}

/// Which workers `status` and `sessions list` show: every live one, and ended ones newest
/// first — the last `DEFAULT_ENDED` unless told otherwise.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct HistoryArgs {
    /// Every ended worker, not only the last 20.
    #[arg(long, conflicts_with = "limit")]
    pub all: bool,
    /// Only ended workers that ended since then: a duration back from now (2d, 12h) or a date
    /// (2025-01-31, local midnight; or RFC 3339, 2025-01-31T12:00:00Z). Lifts the default limit.
    #[arg(long, value_parser = parse_since)]
    pub since: Option<i64>,
    /// Only workers a wave started (its tasks, every attempt).
    #[arg(long)]
    pub wave: Option<String>,
    /// Only workers of this repository.
    #[arg(long)]
    pub repo: Option<String>,
    /// Ended workers per page [default: 20].
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub limit: Option<u32>,
    /// The next page: the `next` of the previous --json answer (ended workers only).
    #[arg(long)]
    pub after: Option<String>,
}

impl HistoryArgs {
    /// The operator API's selection these arguments make.
    pub fn history(&self) -> crate::operator::workers::History {
        crate::operator::workers::History {
            all: self.all,
            since: self.since,
            wave: self.wave.clone(),
            repo: self.repo.clone(),
            limit: self.limit,
            after: self.after.clone(),
        }
    }
}

/// `--since`: a duration back from now, a date (local midnight) or an RFC 3339 time, as
/// milliseconds since the epoch.
pub fn parse_since(s: &str) -> Result<i64, String> {
    if let Ok(d) = parse_duration(s) {
        return Ok(crate::store::now_ms().saturating_sub(d.as_millis() as i64));
    }
    if let Ok(t) = s.trim().parse::<jiff::Timestamp>() {
        return Ok(t.as_millisecond());
    }
    if let Ok(d) = s.trim().parse::<jiff::civil::Date>()
        && let Ok(z) = d.to_zoned(jiff::tz::TimeZone::system())
    {
        return Ok(z.timestamp().as_millisecond());
    }
    Err(format!(
        "\"{s}\" is neither a duration (2d, 12h, 30m) nor a date (2025-01-31, or 2025-01-31T12:00:00Z)"
    ))
}

#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// Live workers and the last ended ones (filters as for `orch status`).
    List {
        /// Answer as one JSON object instead of text (its schema: docs/schema/).
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        history: HistoryArgs,
    },
    Show {
        id: String,
        /// Answer as one JSON object instead of text (its schema: docs/schema/).
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum CiCommand {
    /// The verdict for a commit: green, red, pending, running, sync_not_done or no_run.
    Status {
        /// The repository (its name in repos.yaml).
        #[arg(long)]
        repo: String,
        /// The commit (at least 7 hex digits).
        #[arg(long)]
        sha: String,
        /// Answer as one JSON object instead of text (its schema: docs/schema/).
        #[arg(long)]
        json: bool,
        /// Poll until the verdict is decided.
        #[arg(long)]
        wait: bool,
        /// With --wait: give up after this long [default: 30m].
        #[arg(long, value_parser = parse_duration)]
        timeout: Option<std::time::Duration>,
    },
    /// Job logs, where the forge keeps them.
    Logs {
        /// The repository (its name in repos.yaml).
        #[arg(long)]
        repo: String,
        /// The commit (at least 7 hex digits).
        #[arg(long)]
        sha: String,
        /// One job's log only (default: every job's).
        #[arg(long)]
        job: Option<String>,
        /// Answer as one JSON object instead of text (its schema: docs/schema/).
        #[arg(long)]
        json: bool,
    },
    /// Inside a local-forge CI job: run a command with the build resolving each upstream
    /// package to its checkout in $ORCH_UPSTREAMS (Cargo patches, pip installs, npm installs,
    /// go.work), without editing a tracked file.
    WithUpstreams {
        /// The command and its arguments (after `--`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        command: Vec<String>,
    },
}

/// A duration on the command line: [`crate::duration::parse_decimal`].
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    crate::duration::parse_decimal(s)
}

pub use crate::operator::view::plural;

/// A failure to report to the user, with the exit code it maps to.
#[derive(Debug)]
pub struct Failure {
    pub code: i32,
    pub message: String,
}

impl Failure {
    pub fn bad_input(message: impl Into<String>) -> Self {
        Failure {
            code: 2,
            message: message.into(),
        }
    }
    pub fn no(message: impl Into<String>) -> Self {
        Failure {
            code: 1,
            message: message.into(),
        }
    }
    /// The system could not do the job (a locked database, an I/O failure): not the
    /// user's input; retrying may work.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Failure {
            code: 3,
            message: message.into(),
        }
    }
}

// Every error a command meets is the operator API's first (one mapping of kinds: its
// `Error`), then an exit code.
impl From<ConfigError> for Failure {
    fn from(e: ConfigError) -> Self {
        crate::operator::Error::from(e).into()
    }
}
impl From<ContractError> for Failure {
    fn from(e: ContractError) -> Self {
        crate::operator::Error::from(e).into()
    }
}
impl From<StoreError> for Failure {
    fn from(e: StoreError) -> Self {
        crate::operator::Error::from(e).into()
    }
}
impl From<crate::config::UnknownRepo> for Failure {
    fn from(e: crate::config::UnknownRepo) -> Self {
        crate::operator::Error::from(e).into()
    }
}
impl From<std::io::Error> for Failure {
    fn from(e: std::io::Error) -> Self {
        crate::operator::Error::from(e).into()
    }
}
impl From<crate::app::Error> for Failure {
    fn from(e: crate::app::Error) -> Self {
        crate::operator::Error::from(e).into()
    }
}

/// The operator API's error as the command line says it: bad input exits 2, what is not there
/// and a "no" exit 1, an unavailable system 3.
impl From<crate::operator::Error> for Failure {
    fn from(e: crate::operator::Error) -> Self {
        use crate::operator::Error;
        match e {
            Error::BadInput(m) => Failure::bad_input(m),
            Error::NotFound(m) | Error::No(m) => Failure::no(m),
            Error::Unavailable(m) => Failure::unavailable(m),
        }
    }
}

pub type Outcome = Result<i32, Failure>;

/// Resolved paths and lazily loaded inputs shared by the command handlers.
pub struct Ctx {
    /// `--config` / `ORCH_CONFIG`, else the repos.yaml found searching upward; when none was
    /// found, `repos.yaml` in the current directory (and `config_not_found` says so).
    pub config_path: PathBuf,
    /// Set when no repos.yaml was given and none was found: the directory the search began in.
    pub config_not_found: Option<PathBuf>,
    /// `-q`: no warnings on stderr, only errors.
    pub quiet: bool,
    pub state_dir_override: Option<PathBuf>,
    pub contract_override: Option<PathBuf>,
}

impl Ctx {
    pub fn config(&self) -> Result<Config, Failure> {
        Ok(self.load_config()?)
    }

    /// Reads repos.yaml, or says where it was looked for when no file was given or found.
    pub fn load_config(&self) -> Result<Config, ConfigError> {
        if let Some(start) = &self.config_not_found {
            return Err(ConfigError::NotFound {
                start: start.clone(),
            });
        }
        let config = Config::load(&self.config_path)?;
        // One process, one node: the first configuration loaded names it.
        crate::node::configure(config.node_name.as_deref());
        Ok(config)
    }

    /// Prints a warning on stderr unless `-q`.
    pub fn warn(&self, message: impl std::fmt::Display) {
        if !self.quiet {
            eprintln!("warning: {message}");
        }
    }

    pub fn contract_path(&self, config: &Config) -> PathBuf {
        self.contract_override
            .clone()
            .unwrap_or_else(|| config.root().join("contracts/worker-completion.yaml"))
    }

    /// `--contract` when given; else `contracts/worker-completion.yaml` beside repos.yaml when
    /// it exists; else the built-in contract.
    pub fn contract(&self, config: &Config) -> Result<Contract, Failure> {
        Ok(match &self.contract_override {
            Some(p) => Contract::load(p)?,
            None => Contract::load_or_built_in(&self.contract_path(config))?,
        })
    }

    pub fn state_dir(&self, config: &Config) -> PathBuf {
        let dir = self
            .state_dir_override
            .clone()
            .unwrap_or_else(|| config.root().join("sessions"));
        std::path::absolute(&dir).unwrap_or(dir)
    }

    pub fn store(&self, config: &Config) -> Result<Store, Failure> {
        let dir = self.state_dir(config);
        crate::store::location::settle(&dir, config.store.as_ref())
            .map_err(crate::store::StoreError::from)?;
        Ok(Store::open(&dir)?)
    }

    /// The store when orch has state here, `None` where nothing ran yet: read-only commands
    /// never create it.
    pub fn existing_store(&self, config: &Config) -> Result<Option<Store>, Failure> {
        let dir = self.state_dir(config);
        let pointer =
            crate::store::location::pointer(&dir).map_err(crate::store::StoreError::from)?;
        match (&config.store, pointer) {
            // A database of its own: the state is there whether or not this host ran anything.
            (Some(store), _) => return Ok(Some(Store::open_postgres(store)?)),
            (None, Some(old)) => {
                return Err(crate::store::StoreError::from(
                    crate::store::location::LocationError::StoreDropped {
                        dir,
                        url: old.shown(),
                    },
                )
                .into());
            }
            (None, None) => {}
        }
        if dir.exists() && !dir.is_dir() || dir.join(crate::store::DB_FILE).exists() {
            return self.store(config).map(Some);
        }
        Ok(None)
    }

    /// The organisation, the contract and the state directory, for commands that run workers.
    pub fn load(&self) -> Result<crate::app::Loaded, Failure> {
        let config = self.config()?;
        // The token leaves the environment before anything else happens (see token.rs).
        crate::token::capture(
            config.forge.token_env.as_deref(),
            config.forge.token_file.as_deref(),
        );
        let contract = self.contract(&config)?;
        let state_dir = self.state_dir(&config);
        let contract_path = contract.file.clone();
        // Every process this command starts finds the store from the state directory.
        crate::store::location::settle(&state_dir, config.store.as_ref())
            .map_err(crate::store::StoreError::from)?;
        // And the local forge (a shared one: forge.path).
        if config.forge.kind == crate::config::ForgeKind::Local {
            crate::forge::local::settle_dir(&state_dir, config.forge.path.as_deref())
                .map_err(Failure::bad_input)?;
        }
        // Workers of another account: whatever orch makes is its own alone (a new file in the
        // state directory is never one a worker could open by its name).
        if config.worker.separate() {
            rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o077));
        }
        // Whichever orch process comes first kills worker trees whose supervisor died.
        // Not from inside a worker's PID namespace: it kills by the pids /proc shows, which
        // mean other processes (or none) there.
        if !crate::pidns::nested() {
            crate::app::orphans::sweep(&state_dir);
        }
        Ok(crate::app::Loaded {
            config_path: config.file.clone(),
            contract_path,
            state_dir,
            config,
            contract,
        })
    }
}

fn init_logging(cli: &Cli) {
    use tracing_subscriber::EnvFilter;
    let default = if cli.quiet {
        "error"
    } else {
        match cli.verbose {
            0 => "warn",
            1 => "debug",
            _ => "trace",
        }
    };
    let filter = EnvFilter::try_from_env("ORCH_LOG")
        .unwrap_or_else(|_| EnvFilter::new(format!("orch={default},warn")));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| LossyStderr)
        .with_ansi(
            std::io::IsTerminal::is_terminal(&std::io::stderr())
                && std::env::var_os("NO_COLOR").is_none(),
        );
    let _ = match cli.log_format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
}

/// Parses `std::env::args`, runs the command, and returns the process exit code.
pub fn main() -> i32 {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return code;
        }
    };
    init_logging(&cli);
    let (config_path, config_not_found) = match &cli.config {
        Some(p) => (p.clone(), None),
        None => {
            let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
            match crate::config::find_upward(&cwd) {
                Some(found) => (found, None),
                None => (PathBuf::from(crate::config::CONFIG_FILE), Some(cwd)),
            }
        }
    };
    let ctx = Ctx {
        config_path,
        config_not_found,
        quiet: cli.quiet,
        state_dir_override: cli.state_dir.clone(),
        contract_override: cli.contract.clone(),
    };
    match run(&ctx, cli.command) {
        Ok(code) => code,
        Err(f) => {
            // Not eprintln!: a stderr that cannot be written (a log file on a full disk) must
            // not turn the exit into a panic.
            let _ = std::io::Write::write_fmt(
                &mut std::io::stderr(),
                format_args!("orch: {}\n", f.message),
            );
            f.code
        }
    }
}

/// The command as an operator would name it, when it acts on orch's state (locks, workers,
/// waves, history): such a command does not run inside a worker.
fn operator_command(command: &Command) -> Option<&'static str> {
    Some(match command {
        Command::Hold { .. } => "hold",
        Command::Fatal { .. } => "fatal",
        Command::Unhold { .. } => "unhold",
        Command::Spawn { .. } => "spawn",
        Command::Cancel { .. } => "cancel",
        Command::Respawn { .. } => "respawn",
        Command::Approve { .. } => "approve",
        Command::Release { .. } => "release",
        Command::Resume { .. } => "resume",
        Command::Gc { .. } => "gc",
        Command::Supervise { .. } => "__supervise",
        Command::Wave { command } => match command {
            wave::WaveCommand::Run { .. } => "wave run",
            wave::WaveCommand::Retry { .. } => "wave retry",
            wave::WaveCommand::Cancel { .. } => "wave cancel",
            wave::WaveCommand::Plan { .. } | wave::WaveCommand::Status { .. } => return None,
        },
        _ => return None,
    })
}

/// Refuses an operator command run by a worker's process (found by the kernel's view of its
/// ancestry: the guard of a worker among them, whatever the environment says), and tells the
/// worker's supervisor, which raises an alert.
fn refuse_inside_worker(command: &Command) -> Result<(), Failure> {
    let Some(name) = operator_command(command) else {
        return Ok(());
    };
    let Some((worker, channel)) = crate::app::channel::inside_worker() else {
        return Ok(());
    };
    let typed: Vec<String> = std::env::args().skip(1).collect();
    let typed = crate::text::escape(&typed.join(" ")).into_owned();
    let told = channel
        .or_else(|| std::env::var(crate::app::channel::SOCKET_ENV).ok())
        .map(|socket| {
            crate::app::channel::send(
                &socket,
                &crate::app::channel::Message::RefusedCommand {
                    command: format!("orch {typed}"),
                },
            )
            .is_ok()
        })
        .unwrap_or(false);
    Err(Failure::no(format!(
        "refused: `orch {name}` is an operator command and this process runs inside worker {worker}; workers cannot act on orch or on other workers{}",
        if told {
            " (its supervisor raised an alert)"
        } else {
            ""
        }
    )))
}

/// stderr for log lines, never failing: a supervisor's stderr is its log file, and on a full
/// disk tracing's own complaint about a failed write (an `eprintln!`) would panic the process —
/// a supervisor dying with no word. A line that cannot be written is dropped.
struct LossyStderr;

impl std::io::Write for LossyStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let _ = std::io::Write::write_all(&mut std::io::stderr(), buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let _ = std::io::Write::flush(&mut std::io::stderr());
        Ok(())
    }
}

fn run(ctx: &Ctx, command: Command) -> Outcome {
    refuse_inside_worker(&command)?;
    match command {
        Command::Check { json } => show::check(ctx, json),
        Command::Graph { format } => show::graph(ctx, format),
        Command::CanSpawn { repo, json } => locks::can_spawn(ctx, &repo, json),
        Command::Hold {
            repo,
            reason,
            by,
            json,
        } => locks::hold(ctx, &repo, &reason, by, json),
        Command::Unhold { repo, json } => locks::unhold(ctx, &repo, json),
        Command::Fatal {
            target,
            reason,
            clear,
            by,
            json,
        } => locks::fatal(ctx, &target, reason, clear, by, json),
        Command::Status {
            json,
            watch,
            history,
        } => workers::status(ctx, json, watch, &history),
        Command::Nodes { json } => nodes::nodes(ctx, json),
        Command::Spawn {
            repo,
            task,
            task_id,
            component,
            plan,
            wait,
            wait_timeout,
            foreground,
            model,
            complexity,
            security_sensitive,
            files,
            requirements,
            scope_in,
            scope_out,
            output_format,
            json,
        } => workers::spawn(
            ctx,
            workers::SpawnArgs {
                request: crate::app::spawn::SpawnRequest {
                    repo,
                    task: crate::wave::TaskSpecifics {
                        files,
                        requirements,
                        scope_in,
                        scope_out,
                        output_format,
                    }
                    .with_task(&task),
                    task_id,
                    component,
                    plan,
                    ..Default::default()
                },
                wait,
                wait_timeout,
                foreground,
                json,
                model,
                complexity_high: complexity.as_deref() == Some("high"),
                security_sensitive,
            },
        ),
        Command::Report {
            milestone,
            sha,
            job,
            note,
            reason,
            json,
        } => workers::report(ctx, &milestone, sha, job, note.or(reason), json),
        Command::Sessions { command } => match command {
            SessionsCommand::List { json, history } => workers::sessions_list(ctx, json, &history),
            SessionsCommand::Show { id, json } => workers::sessions_show(ctx, &id, json),
        },
        Command::Cancel {
            id,
            reason,
            by,
            json,
        } => workers::cancel(ctx, &id, reason, by, json),
        Command::Respawn { id, note, by, json } => workers::respawn(ctx, &id, &note, by, json),
        Command::Approve {
            id,
            sha,
            dry_run,
            json,
        } => workers::approve(ctx, &id, sha.as_deref(), dry_run, json),
        Command::Release {
            id,
            force,
            reason,
            by,
            json,
        } => workers::release(ctx, &id, force, &reason, by, json),
        Command::Ci { command } => match command {
            CiCommand::Status {
                repo,
                sha,
                json,
                wait,
                timeout,
            } => ci::status(ctx, &repo, &sha, json, wait, timeout),
            CiCommand::Logs {
                repo,
                sha,
                job,
                json,
            } => ci::logs(ctx, &repo, &sha, job, json),
            CiCommand::WithUpstreams { command } => ci::with_upstreams(&command),
        },
        Command::Supervise { id } => workers::supervise_cmd(ctx, &id),
        Command::Alerts { since, json } => workers::alerts(ctx, since, json),
        Command::Serve { listen } => {
            crate::serve::run(ctx.load()?, &listen)?;
            Ok(0)
        }
        Command::Resume {
            from_checkpoints,
            json,
        } => workers::resume_cmd(ctx, from_checkpoints, json),
        Command::Wave { command } => wave::run(ctx, command),
        Command::Demo { keep, json } => demo::run(keep, json).map_err(Failure::no),
        Command::Init {
            dir,
            with_contract,
            force,
            example,
            json,
        } => {
            let dir = dir.as_deref().unwrap_or(std::path::Path::new("."));
            if example {
                init::example(dir, with_contract, force, json)
            } else {
                init::run(dir, with_contract, force, json)
            }
        }
        Command::Gc { dry_run, json } => gc::run(ctx, dry_run, json),
        Command::Logs {
            id,
            follow,
            json,
            raw,
        } => logs::run(ctx, &id, follow, json, raw),
        Command::Completions { shell } => {
            print!("{}", complete::script(shell, &mut completion_command()));
            Ok(0)
        }
        Command::Complete { kind } => Ok(complete::values(ctx, kind)),
    }
}

/// The command tree shells complete: the CLI without its hidden internal commands
/// (`__supervise`; `__local-forge` and `__guard` never reach clap), which `hide = true` keeps
/// out of `--help` but clap_complete would still list.
pub fn completion_command() -> clap::Command {
    use clap::CommandFactory;
    let full = Cli::command();
    let mut out = clap::Command::new("orch")
        .version(env!("CARGO_PKG_VERSION"))
        .args(full.get_arguments().cloned())
        .subcommand_required(full.is_subcommand_required_set())
        .subcommands(full.get_subcommands().filter(|s| !s.is_hide_set()).cloned());
    if let Some(about) = full.get_about() {
        out = out.about(about.clone());
    }
    out
}

/// The operator's name for audit records: `--by`, else `$USER`, else "operator".
pub fn operator_name(by: Option<String>) -> String {
    by.filter(|b| !b.trim().is_empty())
        .or_else(|| std::env::var("USER").ok().filter(|u| !u.is_empty()))
        .unwrap_or_else(|| "operator".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The command line says each kind of the operator API's error as its exit code (README's
    /// table: 1 no, 2 bad input, 3 unavailable), the message unchanged.
    #[test]
    fn each_kind_of_operator_error_is_its_exit_code() {
        use crate::operator::Error;
        let cases = [
            (Error::bad_input("bad"), 2),
            (Error::not_found("gone"), 1),
            (Error::no("no"), 1),
            (Error::unavailable("later"), 3),
        ];
        for (e, code) in cases {
            let message = e.to_string();
            let f = Failure::from(e);
            assert_eq!((f.code, f.message.as_str()), (code, message.as_str()));
        }
    }

    /// Hidden internal commands appear in no shell's completions and nowhere in the tree
    /// they are generated from (nested commands included).
    #[test]
    fn completions_never_list_hidden_commands() {
        fn hidden(cmd: &clap::Command) -> Vec<String> {
            cmd.get_subcommands()
                .flat_map(|s| {
                    let mut v = hidden(s);
                    if s.is_hide_set() {
                        v.push(s.get_name().to_string());
                    }
                    v
                })
                .collect()
        }
        let tree = completion_command();
        assert!(hidden(&tree).is_empty(), "{:?}", hidden(&tree));
        assert!(tree.get_subcommands().any(|s| s.get_name() == "spawn"));
        for shell in [
            clap_complete::Shell::Bash,
            clap_complete::Shell::Zsh,
            clap_complete::Shell::Fish,
            clap_complete::Shell::Elvish,
            clap_complete::Shell::PowerShell,
        ] {
            let text = complete::script(shell, &mut completion_command());
            assert!(!text.contains("__supervise"), "{shell:?}");
            // `__complete` is only ever run by the script, never offered as a word.
            assert!(!text.contains("\"__complete\""), "{shell:?}");
            assert!(text.contains("can-spawn"), "{shell:?}");
            assert!(text.contains("config"), "{shell:?}");
        }
        // --help lists no hidden command either.
        use clap::CommandFactory;
        let help = Cli::command().render_long_help().to_string();
        assert!(!help.contains("__"), "{help}");
    }

    /// Every option a person may type says what it does in `--help` (`--json` had none).
    #[test]
    fn every_visible_option_has_help_text() {
        fn missing(cmd: &clap::Command, path: &str, out: &mut Vec<String>) {
            for a in cmd.get_arguments() {
                if a.is_hide_set() || a.is_positional() {
                    continue;
                }
                if a.get_help().is_none() && a.get_long_help().is_none() {
                    out.push(format!("{path} --{}", a.get_id()));
                }
            }
            for s in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
                missing(s, &format!("{path} {}", s.get_name()), out);
            }
        }
        use clap::CommandFactory;
        let mut out = Vec::new();
        missing(&Cli::command(), "orch", &mut out);
        assert!(out.is_empty(), "options without help text: {out:#?}");
    }

    /// `orch wave run FILE` alone names both ways to run it.
    #[test]
    fn a_wave_run_without_a_way_names_both() {
        use clap::Parser;
        let e = Cli::try_parse_from(["orch", "wave", "run", "w.yaml"]).unwrap_err();
        let text = e.render().to_string();
        assert!(
            text.contains("--tick") && text.contains("--until-done"),
            "{text}"
        );
        assert!(Cli::try_parse_from(["orch", "wave", "run", "w.yaml", "--until-done"]).is_ok());
        assert!(
            Cli::try_parse_from(["orch", "wave", "run", "w.yaml", "--tick", "--until-done"])
                .is_err()
        );
    }

    #[test]
    fn durations_on_the_command_line() {
        use std::time::Duration;
        let ok = |s: &str| parse_duration(s).unwrap();
        assert_eq!(ok("30m"), Duration::from_secs(1800));
        assert_eq!(ok("1.5h"), Duration::from_secs(5400));
        assert_eq!(ok("0.5d"), Duration::from_secs(43_200));
        assert_eq!(ok("1.5m30s"), Duration::from_secs(120));
        assert_eq!(ok("0.25s"), Duration::from_millis(250));
        for bad in [
            "1.5", "1.5x", ".5h", "1.h", "0.0h", "h", "", "-1.5h", "1..5h",
        ] {
            let e = parse_duration(bad).unwrap_err();
            assert!(!e.is_empty(), "{bad}");
        }
        assert!(
            parse_duration("1.5")
                .unwrap_err()
                .contains("ms, s, m, h or d")
        );
        assert!(
            parse_duration("2w")
                .unwrap_err()
                .contains("ms, s, m, h or d")
        );
    }

    #[test]
    fn plurals() {
        assert_eq!(plural(1, "repository", "repositories"), "1 repository");
        assert_eq!(plural(2, "repository", "repositories"), "2 repositories");
        assert_eq!(plural(0, "task", "tasks"), "0 tasks");
    }
}
