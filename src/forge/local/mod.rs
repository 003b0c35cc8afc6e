//! The local forge (`forge.kind: local`): CI with no server.
//!
//! Each repository gets a bare remote at `<state>/forge/<repo>.git` whose `pre-receive` hook
//! refuses a worker's push to anything but its own branch (`branches.rs`) and whose
//! `post-receive` hook runs `orch __local-forge post-receive …`. The hook records one run per pushed branch in
//! SQLite (`local_runs`/`local_jobs`, jobs snapshotted from `ci.jobs`) and starts a detached
//! runner (`orch __local-forge run … --run-id N`), so the push returns at once. The runner
//! takes one of `forge.max_concurrent_runs` slots (flock on `<state>/forge/slots/<i>.lock`,
//! shared by all repositories), checks the pushed commit out in a fresh directory, its
//! upstreams beside it (at the run's pins or their base heads, recorded), and runs the
//! jobs one at a time in declaration order, respecting `needs`, each in its own process group
//! with its timeout. Statuses use Forgejo's words and the run's status is aggregated the way
//! Forgejo does it.
//!
//! Layout under the state directory:
//! ```text
//! forge/<repo>.git                        bare remote (push here)
//! forge/logs/<repo>/<number>/<job>.log    job output (stdout + stderr)
//! forge/logs/<repo>/<number>/runner.log   the runner's own messages
//! forge/work/<run id>/                    the run's directory ($ORCH_UPSTREAMS; removed after):
//! forge/work/<run id>/<repo>/             its checkout, the jobs' working directory
//! forge/work/<run id>/<upstream>/         each upstream's checkout (`upstreams.rs`)
//! forge/slots/<i>.lock                    concurrency slots
//! ```
//!
//! A runner that dies leaves its run unfinished; every [`LocalForge::runs`] call (and every
//! runner start) finds runs whose runner process is gone and marks their unfinished jobs
//! `failure` ("runner died"). A run whose runner never started (its hook was killed in
//! between), and a push of one of orch's branches (`orch/…`) whose hook never recorded a
//! run, are started by the next [`LocalForge::runs`] call of a forge built
//! [`recovering`](LocalForge::recovering) — the processes that own those pushes (supervisors,
//! `resume`). A read-only question (`orch ci status`) never starts a run.

pub mod branches;
mod cli;
pub(crate) mod db;
mod protected_overlay;
mod protected_push;
mod remote;
mod runner;
mod start;
mod upstreams;

pub use cli::internal_main;
pub use db::UpstreamRow;

pub(crate) use remote::{git, scrub_env};

use crate::ci::CiRun;
use crate::config::{Config, ConfigError, Repo, UnknownRepo};
use crate::forge::{BlockingKind, Forge, ForgeError};
use crate::store::{Store, StoreError, now_ms};
use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The argv[1] under which orch's hidden local-forge commands live.
pub const INTERNAL_COMMAND: &str = "__local-forge";

/// The bare repository of `repo` on the local forge of `state_dir` (made by the first spawn).
/// Makes the state directory's `forge/` the directory `forge.path` names: a symbolic link to
/// it, so that every process of this node — hooks, runners, supervisors, which all find the
/// forge from the state directory — uses the one every node sharing the store reaches. A
/// state directory whose forge is already elsewhere (its own directory, a link to another)
/// is refused with what to do, never moved.
pub fn settle_dir(state_dir: &Path, shared: Option<&Path>) -> Result<(), String> {
    let here = state_dir.join("forge");
    let link = std::fs::read_link(&here).ok();
    let Some(shared) = shared else {
        return match link {
            Some(to) => Err(format!(
                "{} is a link to the shared local forge {}, but repos.yaml names no forge.path: put it back (forge: {{path: {}}}) or remove the link to start a forge of this node's own",
                here.display(),
                to.display(),
                to.display()
            )),
            None => Ok(()),
        };
    };
    std::fs::create_dir_all(shared)
        .map_err(|e| format!("cannot create forge.path {}: {e}", shared.display()))?;
    let shared = std::fs::canonicalize(shared)
        .map_err(|e| format!("cannot resolve forge.path {}: {e}", shared.display()))?;
    match link {
        Some(to) if std::fs::canonicalize(&to).ok().as_deref() == Some(shared.as_path()) => Ok(()),
        Some(to) => Err(format!(
            "{} is a link to the local forge {}, but forge.path names {}: point the link there (or put forge.path back)",
            here.display(),
            to.display(),
            shared.display()
        )),
        // No link: make it. What is there instead is judged only after the attempt, from
        // what the attempt found — a look before it could see nothing, then another process's
        // new link (commands started at once on a node's first run).
        None => {
            crate::store::ensure_private_dir(state_dir).map_err(|e| e.to_string())?;
            match std::os::unix::fs::symlink(&shared, &here) {
                Ok(()) => Ok(()),
                // Another process of this node made it meanwhile: the same link is fine.
                Err(_)
                    if std::fs::read_link(&here).is_ok()
                        && std::fs::canonicalize(&here).ok().as_deref()
                            == Some(shared.as_path()) =>
                {
                    Ok(())
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(format!(
                    "{} holds this node's own local forge, but forge.path names {}: move what it holds there and remove it, or leave forge.path out",
                    here.display(),
                    shared.display()
                )),
                Err(e) => Err(format!(
                    "cannot link {} to {}: {e}",
                    here.display(),
                    shared.display()
                )),
            }
        }
    }
}

pub fn remote_path(state_dir: &Path, repo: &str) -> PathBuf {
    Layout::new(state_dir).remote(repo)
}

/// How long a run may exist without a runner before it counts as never started: the hook
/// that recorded it was killed before starting its runner (a pusher killed mid-push). Such a
/// run is started again, as a Forgejo job waits for a runner; it is not failed, since
/// nothing of it ran.
const RUNNER_START_GRACE_MS: i64 = 10_000;

#[derive(Debug, thiserror::Error)]
pub enum LocalForgeError {
    #[error("{context}: {error}")]
    Io { context: String, error: io::Error },
    #[error("{context}: {message}")]
    Git { context: String, message: String },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    UnknownRepo(#[from] UnknownRepo),
    #[error(
        "the local forge has no remote for {repo} at {path} (orch creates it before the first worker starts)"
    )]
    NoRemote { repo: String, path: PathBuf },
    #[error("{0}")]
    Usage(String),
}

fn io_err(context: impl Into<String>) -> impl FnOnce(io::Error) -> LocalForgeError {
    let context = context.into();
    move |error| LocalForgeError::Io { context, error }
}

impl From<LocalForgeError> for ForgeError {
    fn from(e: LocalForgeError) -> ForgeError {
        match e {
            // A busy database, or one out of reach (PostgreSQL restarting): waited out as a
            // forge that does not answer for a while is, never an operator's problem.
            LocalForgeError::Store(ref s)
                if matches!(s, StoreError::Locked { .. }) || s.is_unreachable() =>
            {
                ForgeError::Transient {
                    message: e.to_string(),
                    attempts: 1,
                }
            }
            LocalForgeError::NoRemote { .. } => ForgeError::Blocking {
                kind: BlockingKind::NotFound,
                message: e.to_string(),
            },
            _ => ForgeError::Blocking {
                kind: BlockingKind::Other,
                message: e.to_string(),
            },
        }
    }
}

/// Where the local forge keeps things under the state directory.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    state_dir: PathBuf,
}

impl Layout {
    pub(crate) fn new(state_dir: &Path) -> Layout {
        Layout {
            state_dir: std::path::absolute(state_dir).unwrap_or_else(|_| state_dir.to_path_buf()),
        }
    }
    pub(crate) fn forge_dir(&self) -> PathBuf {
        self.state_dir.join("forge")
    }
    pub(crate) fn remote(&self, repo: &str) -> PathBuf {
        self.forge_dir().join(format!("{repo}.git"))
    }
    pub(crate) fn logs_dir(&self, repo: &str, number: i64) -> PathBuf {
        self.forge_dir()
            .join("logs")
            .join(repo)
            .join(number.to_string())
    }
    pub(crate) fn job_log(&self, repo: &str, number: i64, job: &str) -> PathBuf {
        self.logs_dir(repo, number).join(format!("{job}.log"))
    }
    pub(crate) fn work_dir(&self, run_id: i64) -> PathBuf {
        self.forge_dir().join("work").join(run_id.to_string())
    }
    pub(crate) fn slots_dir(&self) -> PathBuf {
        self.forge_dir().join("slots")
    }
}

/// The embedded forge. Cheap to clone (clones share one database connection).
#[derive(Clone)]
pub struct LocalForge {
    layout: Layout,
    config_file: PathBuf,
    exe: PathBuf,
    lost_hook_grace: Duration,
    /// Whether [`Self::runs`] starts the CI a lost or killed hook did not (owners only).
    recovers: bool,
    store: Arc<Mutex<Option<Store>>>,
}

/// The branches orch's workers push (`orch/<worker id>`): the only pushes whose lost CI orch
/// starts. Anything else in a remote (a base branch) was not pushed by a worker of orch.
const OWN_BRANCH_PREFIX: &str = "refs/heads/orch/";

impl std::fmt::Debug for LocalForge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalForge")
            .field("state_dir", &self.layout.state_dir)
            .field("config_file", &self.config_file)
            .field("exe", &self.exe)
            .finish()
    }
}

impl LocalForge {
    /// A forge under `state_dir` for the repositories of `config`. Hooks will run the current
    /// executable (`std::env::current_exe()`).
    pub fn new(state_dir: &Path, config: &Config) -> Self {
        LocalForge {
            layout: Layout::new(state_dir),
            config_file: std::path::absolute(&config.file).unwrap_or_else(|_| config.file.clone()),
            exe: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("orch")),
            lost_hook_grace: config.forge.lost_hook_grace,
            recovers: false,
            store: Arc::new(Mutex::new(None)),
        }
    }

    /// A forge for a process that owns workers' pushes: its [`Self::runs`] starts a run whose
    /// runner never started and the run of an `orch/…` push whose hook was lost.
    pub fn recovering(mut self) -> Self {
        self.recovers = true;
        self
    }

    /// A forge that only reads: no run is ever started from here.
    pub fn read_only(mut self) -> Self {
        self.recovers = false;
        self
    }

    /// Uses `exe` as the orch binary in hooks (tests point this at the built `orch`).
    pub fn with_exe(mut self, exe: impl Into<PathBuf>) -> Self {
        let exe = exe.into();
        self.exe = std::path::absolute(&exe).unwrap_or(exe);
        self
    }

    pub fn state_dir(&self) -> &Path {
        &self.layout.state_dir
    }

    /// The bare remote of `repo`: `<state_dir>/forge/<repo>.git`.
    pub fn remote_path(&self, repo: &str) -> PathBuf {
        self.layout.remote(repo)
    }

    fn with_store<T>(
        &self,
        f: impl FnOnce(&mut Store) -> Result<T, LocalForgeError>,
    ) -> Result<T, LocalForgeError> {
        let mut guard = self.store.lock().unwrap_or_else(|p| p.into_inner());
        if guard.is_none() {
            *guard = Some(Store::open(&self.layout.state_dir)?);
        }
        f(guard.as_mut().expect("store was just opened"))
    }

    /// Marks the unfinished jobs of runs whose runner process is gone as `failure`
    /// ("runner died"). Returns how many runs it finished. Called by [`Self::runs`].
    pub fn reap_dead_runners(&self) -> Result<usize, LocalForgeError> {
        self.with_store(|store| Ok(reap_dead_runners(store, &self.layout)?))
    }

    /// Starts a runner for every run recorded more than `RUNNER_START_GRACE_MS` ago that none
    /// has claimed. Two pollers may both start one: the runners' claim is a transaction, so
    /// the second sees the first and exits.
    fn start_unstarted_runs(
        &self,
        store: &mut Store,
        unfinished: &[db::RunRow],
    ) -> Result<(), LocalForgeError> {
        let now = now_ms();
        let unstarted = unfinished.iter().filter(|r| {
            r.runner_pid.is_none()
                && (now - r.created_ms > RUNNER_START_GRACE_MS
                    || r.note.as_deref() == Some(cli::RUNNER_FROM_OUTSIDE))
        });
        for run in unstarted {
            tracing::warn!(
                repo = %run.repo,
                run = run.number,
                "CI run recorded without a runner (its hook was killed); starting it now"
            );
            match cli::spawn_runner(
                &self.layout,
                &self.exe,
                &self.config_file,
                &run.repo,
                run.id,
                run.number,
            ) {
                Ok(pid) => store.write(|tx| db::set_runner_if_none(tx, run.id, pid as i64))?,
                Err(e) => {
                    let note = format!("runner could not start: {e}");
                    store.write(|tx| {
                        db::finish_unfinished_jobs(tx, run.id, crate::ci::JobStatus::Failure, &note)
                    })?;
                }
            }
        }
        Ok(())
    }

    /// The runs `sha` triggered in `repo`, newest first (synchronous [`Forge::runs_for_commit`]).
    pub fn runs(&self, repo: &str, sha: &str) -> Result<Vec<CiRun>, LocalForgeError> {
        let found = self.with_store(|store| {
            let unfinished = store.read(db::unfinished_runs)?;
            reap_runs(store, &self.layout, &unfinished)?;
            if self.recovers {
                self.start_unstarted_runs(store, &unfinished)?;
            }
            let runs = store.read(|tx| db::runs_for_sha(tx, repo, sha))?;
            Ok(runs
                .iter()
                .map(|(r, j)| db::to_ci_run(r, j))
                .collect::<Vec<_>>())
        })?;
        if found.is_empty() && self.recovers && self.recover_lost_push(repo, sha) {
            return self.with_store(|store| {
                let runs = store.read(|tx| db::runs_for_sha(tx, repo, sha))?;
                Ok(runs.iter().map(|(r, j)| db::to_ci_run(r, j)).collect())
            });
        }
        Ok(found)
    }

    /// A push whose hook never recorded a run: the pusher (a worker's whole process group) was
    /// killed while git ran the hook, after the ref was updated. The push happened, so its CI
    /// is due — like a forge redelivering a lost webhook. Only orch's own branches count (a
    /// base branch in the remote was not pushed by a worker), and only refs written more than
    /// `forge.lost_hook_grace` ago, so a hook that is merely slow is not raced.
    fn recover_lost_push(&self, repo: &str, sha: &str) -> bool {
        let remote = self.layout.remote(repo);
        let Ok(bare) = git2::Repository::open_bare(&remote) else {
            return false;
        };
        let Ok(branches) = bare.branches(Some(git2::BranchType::Local)) else {
            return false;
        };
        let mut input = String::new();
        for (b, _) in branches.flatten() {
            let Ok(name) = b.get().name().map(str::to_string) else {
                continue;
            };
            if !name.starts_with(OWN_BRANCH_PREFIX) {
                continue;
            }
            if b.get().target().map(|t| t.to_string()).as_deref() != Some(sha) {
                continue;
            }
            let written = std::fs::metadata(remote.join(&name)).and_then(|m| m.modified());
            let old_enough =
                written.is_ok_and(|t| t.elapsed().is_ok_and(|age| age >= self.lost_hook_grace));
            if old_enough {
                input.push_str(&format!("{} {sha} {name}\n", "0".repeat(40)));
            }
        }
        if input.is_empty() {
            return false;
        }
        tracing::warn!(
            repo,
            sha,
            "push without a CI run (its hook was lost); starting the run now"
        );
        cli::start_runs(
            &self.layout.state_dir,
            &self.config_file,
            repo,
            &input,
            &self.exe,
            &cli::Start {
                only_if_absent: true,
                runner: cli::Runner::Start,
                pins: &[],
            },
        )
        .is_ok()
    }

    /// Restarts CI for `sha` of `repo` (pushed to `git_ref`): every unfinished run of it is
    /// cancelled — its runner's group and its jobs' groups killed, its jobs `cancelled` — and
    /// a new run is recorded and started. The new run is the newest of its workflow, so the
    /// verdict counts it alone. Returns what was done, in words.
    pub fn restart_run(
        &self,
        repo: &str,
        git_ref: &str,
        sha: &str,
    ) -> Result<String, LocalForgeError> {
        let stuck = self.cancel_runs(
            |r| r.repo == repo && r.sha == sha,
            "cancelled: orch restarted CI (the run was stuck)",
        )?;
        // A run is about its upstreams' commits as much as its own: the restart keeps the
        // newest stuck run's pins.
        let pins = match stuck.last() {
            Some(run) => self.with_store(|store| {
                Ok(store
                    .read(|tx| db::load_upstreams(tx, run.id))?
                    .into_iter()
                    .filter(|u| u.pinned)
                    .map(|u| (u.repo, u.sha))
                    .collect::<Vec<_>>())
            })?,
            None => Vec::new(),
        };
        let lines = self.start_run(repo, git_ref, sha, &pins)?;
        let cancelled: Vec<String> = stuck.iter().map(|r| format!("#{}", r.number)).collect();
        Ok(format!(
            "CI for {} restarted: {}{}",
            crate::sha::short_to(sha, 12),
            if cancelled.is_empty() {
                String::new()
            } else {
                format!("run {} cancelled; ", cancelled.join(", "))
            },
            lines.join("; ")
        ))
    }

    /// Cancels every unfinished run of the git refs `refs` (any repository): nothing waits for
    /// them any more (their worker ended, its landing is over). Its runner's group and its
    /// jobs' groups are killed, its jobs recorded `cancelled` with `note`. Returns the runs.
    pub fn cancel_runs_of_refs(
        &self,
        abandoned: &[super::Abandoned],
        note: &str,
    ) -> Result<Vec<String>, LocalForgeError> {
        let picked = |r: &db::RunRow| {
            abandoned.iter().any(|a| {
                a.repo == r.repo && r.git_ref.strip_prefix("refs/heads/") == Some(a.branch.as_str())
            })
        };
        Ok(self
            .cancel_runs(picked, note)?
            .iter()
            .map(|r| format!("{} #{} ({})", r.repo, r.number, r.git_ref))
            .collect())
    }

    /// Cancels every unfinished run `which` picks (see [`Self::cancel_runs_of_refs`]).
    fn cancel_runs(
        &self,
        which: impl Fn(&db::RunRow) -> bool,
        note: &str,
    ) -> Result<Vec<db::RunRow>, LocalForgeError> {
        let stuck: Vec<db::RunRow> = self.with_store(|store| {
            Ok(store
                .read(db::unfinished_runs)?
                .into_iter()
                .filter(|r| which(r))
                .collect())
        })?;
        for run in &stuck {
            let jobs = self.with_store(|store| {
                Ok(store.write(|tx| {
                    let running: Vec<i64> = db::load_jobs(tx, run.id)?
                        .into_iter()
                        .filter(|j| j.status == crate::ci::JobStatus::Running)
                        .filter_map(|j| j.pid)
                        .collect();
                    db::finish_unfinished_jobs(tx, run.id, crate::ci::JobStatus::Cancelled, note)?;
                    Ok(running)
                })?)
            })?;
            // The runner led its own session (setsid): its group, then what is left of each
            // job group in that session (never a pgid reused by someone else).
            if let Some(pid) = run.runner_pid
                && runner_lives(run) == Some(true)
                && let Ok(sid) = i32::try_from(pid)
            {
                for pgid in jobs.into_iter().filter_map(|p| i32::try_from(p).ok()) {
                    if crate::process::group_in_session(pgid, sid) {
                        let _ = crate::process::signal_group(pgid, crate::process::Signal::KILL);
                    }
                }
                let _ = crate::process::signal_group(sid, crate::process::Signal::KILL);
            }
        }
        Ok(stuck)
    }

    /// Why no run will ever come for `sha` in `repo`, when none exists: the local forge starts
    /// runs only for pushes (its hook), and a lost hook's run only for a push of orch's own
    /// branches. `None` when the head of an `orch/…` branch is `sha` (its owner starts the
    /// run) or the remote cannot be read.
    pub fn no_run_coming(&self, repo: &str, sha: &str) -> Option<String> {
        let bare = git2::Repository::open_bare(self.layout.remote(repo)).ok()?;
        let branches = bare.branches(Some(git2::BranchType::Local)).ok()?;
        for (b, _) in branches.flatten() {
            let own = b
                .get()
                .name()
                .is_ok_and(|n| n.starts_with(OWN_BRANCH_PREFIX));
            if own && b.get().target().map(|t| t.to_string()).as_deref() == Some(sha) {
                return None;
            }
        }
        Some(format!(
            "no CI run for this commit, and none will start: the local forge runs CI for pushes to its remote of {repo}, and no push of orch's (an orch/… branch) has this commit at its head"
        ))
    }

    /// Polls until `sha` has at least one run in `repo` and every job of its runs is done,
    /// then returns the newest run; `None` if `deadline` passes first. (A run's status alone
    /// is no end marker: as on Forgejo it reads `failure` as soon as one job failed.)
    pub fn wait_for_run(
        &self,
        repo: &str,
        sha: &str,
        deadline: Instant,
    ) -> Result<Option<CiRun>, LocalForgeError> {
        loop {
            let runs = self.runs(repo, sha)?;
            if !runs.is_empty()
                && runs
                    .iter()
                    .all(|r| r.jobs.iter().all(|j| j.status.is_done()))
            {
                return Ok(runs.into_iter().next());
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The head commit of `branch` in the bare remote of `repo` (synchronous
    /// [`Forge::branch_head`]).
    pub fn branch_head_sync(
        &self,
        repo: &str,
        branch: &str,
    ) -> Result<Option<String>, LocalForgeError> {
        let remote = self.remote_path(repo);
        let git = git2::Repository::open_bare(&remote).map_err(|_| LocalForgeError::NoRemote {
            repo: repo.to_string(),
            path: remote.clone(),
        })?;
        let reference = match git.find_reference(&format!("refs/heads/{branch}")) {
            Ok(r) => r,
            Err(e) if e.code() == git2::ErrorCode::NotFound => return Ok(None),
            Err(e) => {
                return Err(LocalForgeError::Git {
                    context: format!("cannot read branch {branch} of {}", remote.display()),
                    message: e.message().to_string(),
                });
            }
        };
        let commit = reference
            .peel_to_commit()
            .map_err(|e| LocalForgeError::Git {
                context: format!("branch {branch} of {}", remote.display()),
                message: e.message().to_string(),
            })?;
        Ok(Some(commit.id().to_string()))
    }

    /// The log file of `job` in the newest run of `sha` that has such a job.
    pub fn job_log_path(
        &self,
        repo: &str,
        sha: &str,
        job: &str,
    ) -> Result<Option<PathBuf>, LocalForgeError> {
        Ok(self
            .find_job(repo, sha, job)?
            .map(|(number, _)| self.layout.job_log(repo, number, job)))
    }

    fn find_job(
        &self,
        repo: &str,
        sha: &str,
        job: &str,
    ) -> Result<Option<(i64, db::JobRow)>, LocalForgeError> {
        self.with_store(|store| {
            let runs = store.read(|tx| db::runs_for_sha(tx, repo, sha))?;
            Ok(runs.into_iter().find_map(|(run, jobs)| {
                jobs.into_iter()
                    .find(|j| j.name == job)
                    .map(|j| (run.number, j))
            }))
        })
    }

    /// The output of `job` in the newest run of `sha` (synchronous [`Forge::job_log`]). A job
    /// that never started (skipped, runner died) has no log file: its note is returned.
    pub fn read_job_log(
        &self,
        repo: &str,
        sha: &str,
        job: &str,
    ) -> Result<Option<String>, LocalForgeError> {
        let Some((number, row)) = self.find_job(repo, sha, job)? else {
            return Ok(None);
        };
        let path = self.layout.job_log(repo, number, job);
        match std::fs::read(&path) {
            Ok(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(row
                .note
                .map(|n| format!("orch: job {job} is {}: {n}\n", row.status))),
            Err(e) => Err(io_err(format!("cannot read {}", path.display()))(e)),
        }
    }
}

/// Runs `f` on tokio's blocking pool when inside a runtime (SQLite and git are blocking).
async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, LocalForgeError> + Send + 'static,
) -> Result<T, ForgeError> {
    if tokio::runtime::Handle::try_current().is_err() {
        return f().map_err(ForgeError::from);
    }
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r.map_err(ForgeError::from),
        Err(e) => Err(ForgeError::Blocking {
            kind: BlockingKind::Other,
            message: format!("local forge task failed: {e}"),
        }),
    }
}

impl Forge for LocalForge {
    fn runs_for_commit(
        &self,
        repo: &Repo,
        sha: &str,
        _pushed_ms: Option<i64>,
    ) -> impl Future<Output = Result<Vec<CiRun>, ForgeError>> + Send {
        let (this, repo, sha) = (self.clone(), repo.name.clone(), sha.to_string());
        async move { blocking(move || this.runs(&repo, &sha)).await }
    }

    fn branch_head(
        &self,
        repo: &Repo,
        branch: &str,
    ) -> impl Future<Output = Result<Option<String>, ForgeError>> + Send {
        let (this, repo, branch) = (self.clone(), repo.name.clone(), branch.to_string());
        async move { blocking(move || this.branch_head_sync(&repo, &branch)).await }
    }

    fn job_log(
        &self,
        repo: &Repo,
        sha: &str,
        job: &str,
    ) -> impl Future<Output = Result<Option<String>, ForgeError>> + Send {
        let (this, repo, sha, job) = (
            self.clone(),
            repo.name.clone(),
            sha.to_string(),
            job.to_string(),
        );
        async move { blocking(move || this.read_job_log(&repo, &sha, &job)).await }
    }

    fn rerun(&self, repo: &str, git_ref: &str, sha: &str) -> Option<Result<String, ForgeError>> {
        Some(
            self.restart_run(repo, git_ref, sha)
                .map_err(ForgeError::from),
        )
    }

    fn start_pinned_run(
        &self,
        repo: &str,
        branch: &str,
        sha: &str,
        pins: &[(String, String)],
    ) -> Option<Result<(), ForgeError>> {
        Some(
            self.start_run(repo, &format!("refs/heads/{branch}"), sha, pins)
                .map(|_| ())
                .map_err(ForgeError::from),
        )
    }

    fn cancel_runs_of_refs(
        &self,
        abandoned: &[super::Abandoned],
        note: &str,
    ) -> Result<Vec<String>, ForgeError> {
        LocalForge::cancel_runs_of_refs(self, abandoned, note).map_err(ForgeError::from)
    }
}

/// Finishes runs whose runner is gone (see [`LocalForge::reap_dead_runners`]).
pub(crate) fn reap_dead_runners(store: &mut Store, layout: &Layout) -> Result<usize, StoreError> {
    let runs = store.read(db::unfinished_runs)?;
    reap_runs(store, layout, &runs)
}

/// [`reap_dead_runners`] over runs already read.
fn reap_runs(store: &mut Store, layout: &Layout, runs: &[db::RunRow]) -> Result<usize, StoreError> {
    // Inside a worker's PID namespace (an `orch ci status` run by the worker) a runner's pid,
    // recorded as orch outside sees it, names another process or none: its runs are not
    // this process's to judge.
    if crate::pidns::nested() {
        return Ok(0);
    }
    let mut reaped = 0;
    for run in runs {
        let note = match run.runner_pid {
            Some(pid) if runner_lives(run) == Some(false) => {
                format!("runner died (pid {pid})")
            }
            // Never started: LocalForge::runs starts it (see start_unstarted_runs).
            _ => continue,
        };
        let orphans = store.write(|tx| match db::load_run(tx, run.id)? {
            Some(r) if r.finished_ms.is_none() && r.runner_pid == run.runner_pid => {
                let running: Vec<i64> = db::load_jobs(tx, run.id)?
                    .into_iter()
                    .filter(|j| j.status == crate::ci::JobStatus::Running)
                    .filter_map(|j| j.pid)
                    .collect();
                db::finish_unfinished_jobs(tx, run.id, crate::ci::JobStatus::Failure, &note)?;
                Ok(Some(running))
            }
            _ => Ok(None),
        })?;
        let Some(orphans) = orphans else { continue };
        reaped += 1;
        // The parent-death signal only reached each job's leader: kill what is left of the
        // job groups. The runner led its own session (setsid), so a group that still has a
        // member in that session is the job's, not a later reuse of the pgid.
        if let Some(sid) = run.runner_pid.and_then(|p| i32::try_from(p).ok()) {
            for pgid in orphans.into_iter().filter_map(|p| i32::try_from(p).ok()) {
                if crate::process::group_in_session(pgid, sid) {
                    let _ = crate::process::signal_group(pgid, crate::process::Signal::KILL);
                }
            }
        }
        let _ = std::fs::remove_dir_all(layout.work_dir(run.id));
    }
    Ok(reaped)
}

fn runner_alive(pid: i64, start: Option<i64>) -> bool {
    i32::try_from(pid).is_ok_and(|pid| crate::process::process_alive(pid, start.map(|s| s as u64)))
}

/// Whether `run`'s recorded runner lives: `None` when it has none, or when its pid was recorded
/// on another host (a forge directory several hosts share): only that host can tell, and a
/// runner judged dead from here would have its jobs failed — red CI for a run still running.
pub(super) fn runner_lives(run: &db::RunRow) -> Option<bool> {
    let pid = run.runner_pid?;
    if run
        .runner_host
        .as_deref()
        .is_some_and(|h| h != crate::node::hostname())
    {
        return None;
    }
    Some(runner_alive(pid, run.runner_start))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A node's first commands started at once all link its forge to the shared one: every
    /// one of them finds the link made by whichever came first, none calls it a forge of the
    /// node's own.
    #[test]
    fn commands_at_once_all_settle_on_the_shared_forge() {
        for _ in 0..20 {
            let root = tempfile::tempdir().unwrap();
            let (state, shared) = (root.path().join("state"), root.path().join("shared"));
            let barrier = std::sync::Barrier::new(8);
            std::thread::scope(|s| {
                for _ in 0..8 {
                    s.spawn(|| {
                        barrier.wait();
                        settle_dir(&state, Some(&shared)).unwrap();
                    });
                }
            });
            assert_eq!(
                std::fs::canonicalize(state.join("forge")).unwrap(),
                std::fs::canonicalize(&shared).unwrap()
            );
        }
    }

    /// A runner recorded on another host (a forge directory several hosts share) is never
    /// judged dead here, though its pid names no process on this one; this host's dead
    /// runner is reaped, its jobs failed.
    #[test]
    fn only_the_runners_own_host_reaps_it() {
        crate::store::conformance::each_backend("only_the_runners_own_host_reaps_it", |store| {
            let dir = tempfile::tempdir().unwrap();
            let layout = Layout::new(dir.path());
            let jobs = vec![crate::config::JobSpec {
                name: "check".into(),
                run: "true".into(),
                needs: Vec::new(),
                timeout: None,
                env: Vec::new(),
            }];
            let (elsewhere, _) = store
                .write(|tx| db::create_run(tx, "a", "refs/heads/x", "abc", &jobs, &[]))
                .unwrap();
            let (here, _) = store
                .write(|tx| db::create_run(tx, "a", "refs/heads/x", "def", &jobs, &[]))
                .unwrap();
            // A pid no process has (above the kernel's limit).
            let gone = 1 << 30;
            store
                .write(|tx| {
                    db::claim_runner(tx, elsewhere, gone, None)?;
                    tx.execute(
                        "UPDATE local_runs SET runner_host = 'another-host' WHERE id = ?1",
                        crate::params![elsewhere],
                    )?;
                    db::claim_runner(tx, here, gone, None)
                })
                .unwrap();
            assert_eq!(reap_dead_runners(store, &layout).unwrap(), 1);
            let mut status = |id| {
                store
                    .read(|tx| db::load_jobs(tx, id))
                    .unwrap()
                    .into_iter()
                    .map(|j| j.status)
                    .collect::<Vec<_>>()
            };
            assert_eq!(status(here), vec![crate::ci::JobStatus::Failure]);
            assert_eq!(status(elsewhere), vec![crate::ci::JobStatus::Waiting]);
        });
    }
}
