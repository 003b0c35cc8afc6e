//! Temp organisations, the one harness of the integration tests: real git repositories, a
//! repos.yaml, a test copy of the contract, scripted workers from `tests/workers/`, the real
//! `orch` binary driven as a user would, and helpers to read the database, wait for things,
//! kill processes with SIGKILL and find anything a run left alive.
//!
//! ```ignore
//! use crate::support::{Org, RepoSpec, Spec, job};
//! let org = Org::new(Spec::local("happy.sh").repo(RepoSpec::new("alpha").job(job("test", "true"))));
//! let (out, id) = org.spawn_foreground("alpha", "add a feature");
//! // the crash-safety suites: gated CI, `resume_worker.sh`, a respawn bound
//! let org = Org::new(Spec::resumable(&[("core", &[]), ("vm", &["core"])]));
//! ```
//!
//! Layout of the temporary directory:
//! ```text
//! repos.yaml, worker-completion.yaml   the organisation and the test contract
//! repos/<name>/     the clones (main + one commit); on Forgejo clones of origins/<name>.git
//! state/            orch's state directory (orch.db, checkpoints, sessions, forge/)
//! out/              `$E2E_OUT` of the workers (tests/workers/lib.sh): dumps, release files
//! ctl/              the workers' control directory, their `$1` (tests/workers/chaos_lib.sh):
//!                   prompts/, lives/, marks/, gates/
//! ```
//!
//! Everything a test waits for is polled with a deadline ([`poll_until`]); nothing sleeps a
//! fixed time. [`assert_clean`] is the after-test check: no process of the worker's group is
//! left (not even a zombie) and no zombie child of the test process lingers.
//!
//! Included once by the integration test crate (`tests/support/mod.rs`) and, with `#[path]`,
//! by `benches/supervisors.rs`: it must compile on its own (no `super::` or `crate::`).
#![allow(dead_code)]

use orch::config::Config;
use orch::store::Store;
use orch::store::workers::{self as ws, PushRecord, WorkerEvent, WorkerRecord};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// The binary under test.
pub const ORCH: &str = env!("CARGO_BIN_EXE_orch");

/// Deadline for things that take a second or two when the machine is idle (two cores, debug
/// binaries, tests in parallel: generous on purpose; a passing run never waits for it).
pub const DEADLINE: Duration = Duration::from_secs(60);

/// The variable through which the tests give workers a directory outside the state
/// directory (for dumps such as `env`, and for release files).
pub const OUT_VAR: &str = "E2E_OUT";

/// The contract the repository ships.
pub fn shipped_contract() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("contracts/worker-completion.yaml")
}

/// Absolute path of a scripted worker in `tests/workers/`.
pub fn worker_script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/workers")
        .join(name)
}

#[path = "git.rs"]
mod git_cmd;
// Not every includer uses every helper (benches/supervisors.rs).
#[allow(unused_imports)]
pub use git_cmd::{commit_file, git, init_repo, push_head};

// ---- waiting ---------------------------------------------------------------------------------

/// Polls `f` until it returns `Some`, for at most `limit`; `None` when time ran out. The one
/// polling loop: 5 ms between the first tries, backing off to 50 ms.
pub fn poll<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let deadline = Instant::now() + limit;
    let mut pause = Duration::from_millis(5);
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(50));
    }
}

/// Polls `f` until it returns `Some`, or panics naming `what` (plus `diag()`) after `limit`.
pub fn poll_until<T>(
    what: &str,
    limit: Duration,
    f: impl FnMut() -> Option<T>,
    diag: impl FnOnce() -> String,
) -> T {
    poll(limit, f)
        .unwrap_or_else(|| panic!("timed out after {limit:?} waiting for {what}\n{}", diag()))
}

// ---- processes -------------------------------------------------------------------------------

/// `(state, ppid, pgrp, session)` of `pid`, from `/proc/<pid>/stat`.
fn stat(pid: i32) -> Option<(char, i32, i32, i32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let f: Vec<&str> = text[text.rfind(')')? + 1..].split_whitespace().collect();
    Some((
        f.first()?.chars().next()?,
        f.get(1)?.parse().ok()?,
        f.get(2)?.parse().ok()?,
        f.get(3)?.parse().ok()?,
    ))
}

/// `(pid, state, ppid, pgrp)` of every process, from `/proc/*/stat`.
pub fn processes() -> Vec<(i32, char, i32, i32)> {
    pids()
        .into_iter()
        .filter_map(|pid| stat(pid).map(|(state, ppid, pgrp, _)| (pid, state, ppid, pgrp)))
        .collect()
}

/// Every pid in `/proc`.
fn pids() -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()))
        .collect()
}

/// Every process (zombies included) whose process group is `pgid`.
pub fn group_members(pgid: i32) -> Vec<(i32, char)> {
    processes()
        .into_iter()
        .filter(|p| p.3 == pgid)
        .map(|p| (p.0, p.1))
        .collect()
}

/// Pids of the live (not zombie, not dead) processes in group `pgid`.
pub fn live_members(pgid: i32) -> Vec<i32> {
    group_members(pgid)
        .into_iter()
        .filter(|(_, s)| !matches!(s, 'Z' | 'X' | 'x'))
        .map(|(p, _)| p)
        .collect()
}

/// Taken for reading by a test while children of the test process it started may stay
/// unreaped for a while (several started at once and waited for in turn, a driver loop that
/// reaps between other work); for writing by [`assert_clean`] while it looks for zombie
/// children. All the tests share one process: without this, one test's children waiting to
/// be reaped would count as another test's zombies.
static LATE_REAPING: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// Held (see [`LATE_REAPING`]) for as long as the caller has children it reaps late.
pub fn reaping_late() -> std::sync::RwLockReadGuard<'static, ()> {
    LATE_REAPING
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Reaps the zombie children of the test process that led their own session: local-forge CI
/// runners that a test started by calling the forge in this process (`local_forge`,
/// `ci_cli`). The library never waits for a runner, by design (it is detached, and outside
/// the tests its starter exits at once); nothing in the tests waits for one either, and no
/// other child of the test process leads a session.
fn reap_detached_children() {
    let me = std::process::id() as i32;
    for pid in pids() {
        if stat(pid)
            .is_some_and(|(state, ppid, _, session)| state == 'Z' && ppid == me && session == pid)
        {
            // SAFETY: waitpid on one pid, no status wanted; WNOHANG never blocks.
            unsafe {
                libc::waitpid(pid, std::ptr::null_mut(), libc::WNOHANG);
            }
        }
    }
}

fn zombie_children_of_me() -> Vec<i32> {
    let me = std::process::id() as i32;
    processes()
        .into_iter()
        .filter(|p| p.2 == me && p.1 == 'Z')
        .map(|p| p.0)
        .collect()
}

/// The after-test check. `pgid` is the worker's process group (its `worker_pid`), if a worker
/// ran. Waits (bounded) for the group to be empty — no live member and no zombie: a zombie
/// means orch did not reap it — then checks that no zombie child of the test process stays.
/// Tests run in parallel threads of this process, so a zombie of another test's
/// `Command::output()` can exist for an instant: only one that persists counts; tests that
/// reap their children late are waited for ([`reaping_late`]).
pub fn assert_clean(pgid: Option<i32>) {
    if let Some(pgid) = pgid {
        assert!(pgid > 1, "bad worker pgid {pgid}");
        poll_until(
            &format!("process group {pgid} to be empty"),
            DEADLINE,
            || group_members(pgid).is_empty().then_some(()),
            || format!("members: {:?}", group_members(pgid)),
        );
    }
    let _alone = LATE_REAPING
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    reap_detached_children();
    let mut lasting = zombie_children_of_me();
    poll_until(
        "no lasting zombie children of the test process",
        Duration::from_secs(2),
        || {
            reap_detached_children();
            let now = zombie_children_of_me();
            lasting.retain(|p| now.contains(p));
            lasting.is_empty().then_some(())
        },
        || {
            format!(
                "zombie children of the test process: {:?}",
                zombie_children_of_me()
            )
        },
    );
}

/// `VmHWM` and `VmRSS` of `pid` in KiB.
pub fn memory_kib(pid: i32) -> Option<(u64, u64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
    };
    Some((field("VmHWM:")?, field("VmRSS:")?))
}

pub fn kill9(pid: i32) {
    if pid > 1 {
        // SAFETY: kill(2) with a positive pid signals that one process only.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
}

pub fn cmdline(pid: i32) -> Option<String> {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    Some(
        String::from_utf8_lossy(&raw)
            .split('\0')
            .filter(|s| !s.is_empty())
            .collect::<Vec<_>>()
            .join(" "),
    )
}

/// Live (non-zombie) processes other than this one whose command line or working directory
/// mentions `dir`.
pub fn processes_under(dir: &Path) -> Vec<(i32, String)> {
    let needle = dir.display().to_string();
    let me = std::process::id() as i32;
    let mut out = Vec::new();
    for pid in pids() {
        if pid == me || !orch::process::process_alive(pid, None) {
            continue;
        }
        let cmd = cmdline(pid).unwrap_or_default();
        let cwd = std::fs::read_link(format!("/proc/{pid}/cwd"))
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        if cmd.contains(&needle) || cwd.starts_with(&needle) {
            out.push((pid, format!("{cmd}  (cwd {cwd})")));
        }
    }
    out
}

/// A pid that belonged to a process which has exited, with that process's start time.
pub fn dead_pid() -> (i64, i64) {
    let mut c = Command::new("true").spawn().unwrap();
    let pid = c.id() as i32;
    // Readable until reaped (running or zombie).
    let start = orch::process::proc_stat(pid)
        .map(|s| s.start_ticks as i64)
        .unwrap_or(1);
    c.wait().unwrap();
    (pid as i64, start)
}

// ---- orch ------------------------------------------------------------------------------------

/// `orch` with no `ORCH_*` variable inherited from whoever runs the tests, and no stdin.
pub fn orch_cmd() -> Command {
    // `ORCH_UNDER_TEST=<binary>` runs a test against another build (an older commit's, to show
    // that a test fails without the change it comes with).
    let mut c = Command::new(std::env::var_os("ORCH_UNDER_TEST").unwrap_or_else(|| ORCH.into()));
    for (k, _) in std::env::vars_os() {
        if k.to_str().is_some_and(|k| k.starts_with("ORCH_")) {
            c.env_remove(k);
        }
    }
    c.stdin(std::process::Stdio::null());
    c
}

/// stdout then stderr of a finished command, as text.
pub fn output_text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The `resumed` entry of `id` in an `orch resume --json` answer.
pub fn resumed_entry<'a>(answer: &'a Value, id: &str) -> Option<&'a Value> {
    answer["resumed"]
        .as_array()?
        .iter()
        .find(|r| r["worker_id"] == id)
}

/// The status of `job` in the CI runs JSON of a push record.
pub fn job_status(push: &PushRecord, job: &str) -> Option<String> {
    push.runs
        .as_ref()?
        .iter()
        .flat_map(|r| &r.jobs)
        .find(|j| j.name == job)
        .map(|j| j.status.as_str().to_string())
}

// ---- the organisation ------------------------------------------------------------------------

/// One `ci.jobs` entry of the local forge.
#[derive(Debug, Clone)]
pub struct Job {
    pub name: String,
    pub run: String,
    pub needs: Vec<String>,
    /// None: orch's default.
    pub timeout: Option<String>,
}

/// A job with no `needs` and a 60 s timeout.
pub fn job(name: &str, run: &str) -> Job {
    Job {
        name: name.into(),
        run: run.into(),
        needs: Vec::new(),
        timeout: Some("60s".into()),
    }
}

impl Job {
    pub fn needs(mut self, needs: &[&str]) -> Job {
        self.needs = needs.iter().map(|s| s.to_string()).collect();
        self
    }

    pub fn timeout(mut self, timeout: Option<&str>) -> Job {
        self.timeout = timeout.map(str::to_string);
        self
    }

    /// The entry as a YAML flow mapping under `ci: jobs:` (the command as a JSON = YAML
    /// double-quoted string).
    pub fn yaml(&self) -> String {
        let mut s = format!(
            "        - {{name: {}, run: {}",
            self.name,
            yaml_str(&self.run)
        );
        if !self.needs.is_empty() {
            s.push_str(&format!(", needs: [{}]", self.needs.join(", ")));
        }
        if let Some(t) = &self.timeout {
            s.push_str(&format!(", timeout: {t}"));
        }
        s.push_str("}\n");
        s
    }
}

#[derive(Debug, Clone)]
pub struct RepoSpec {
    pub name: String,
    pub deps: Vec<String>,
    pub jobs: Vec<Job>,
}

impl RepoSpec {
    pub fn new(name: &str) -> RepoSpec {
        RepoSpec {
            name: name.into(),
            deps: Vec::new(),
            jobs: Vec::new(),
        }
    }

    pub fn deps(mut self, deps: &[&str]) -> RepoSpec {
        self.deps = deps.iter().map(|s| s.to_string()).collect();
        self
    }

    pub fn job(mut self, j: Job) -> RepoSpec {
        self.jobs.push(j);
        self
    }

    /// `test` runs `test_cmd`; `radicle-push` (the sync job) needs it and succeeds.
    pub fn standard_ci(self, test_cmd: &str) -> RepoSpec {
        self.job(job("test", test_cmd))
            .job(job("radicle-push", "true").needs(&["test"]))
    }
}

#[derive(Debug, Clone)]
pub enum ForgeSpec {
    /// The embedded forge; `max_concurrent_runs`.
    Local(usize),
    /// A Forgejo at `url`; each repository's clone gets a local bare `origin`. An empty
    /// `token_env` puts the token in a file instead (`forge.token_file: forge-token`, mode 0600).
    Forgejo {
        url: String,
        owner: String,
        token_env: String,
        token: String,
    },
}

/// The CI of a local-forge repository that names no jobs of its own: `check`, and the sync
/// job `radicle-push` needing it.
#[derive(Debug, Clone, Copy)]
pub enum Ci {
    /// `check` passes at once (60 s timeouts): scenarios that do not care about CI.
    Pass,
    /// `check` waits until `ctl/gates/all` or `ctl/gates/<repo>` exists (CI stays `running`
    /// as long as the test wants), then passes when `status.txt` says `good`.
    Gated,
    /// `check` sleeps this long, then passes when `status.txt` says `good`.
    Sleep(Duration),
}

/// What goes into repos.yaml and the test contract.
#[derive(Debug, Clone)]
pub struct Spec {
    pub forge: ForgeSpec,
    pub repos: Vec<RepoSpec>,
    /// File name in `tests/workers/`, or an absolute path.
    pub worker: String,
    pub ci: Ci,
    pub required_jobs: Option<Vec<String>>,
    pub poll_interval: String,
    /// `ci.start_timeout`: a pushed SHA without a push run after this is `no_run`.
    pub start_timeout: String,
    /// `forge.lost_hook_grace` (local forge): a pushed ref this old without a CI run gets its
    /// run started. None: orch's default.
    pub lost_hook_grace: Option<String>,
    pub stop_grace: String,
    pub max_parallel: usize,
    /// `worker.max_respawns`; None: orch's default.
    pub max_respawns: Option<u32>,
    /// `(milestone, timeout, warning_at)` overrides of `timeouts.per_milestone`.
    pub timeouts: Vec<(String, String, String)>,
    pub progress_window: Option<String>,
    /// The `alerts:` section of repos.yaml, as YAML (indented two spaces below `alerts:`).
    pub alerts: Option<String>,
    /// `(key, value)` overrides of plain `key: value` lines inside the contract's
    /// `timeouts:` (e.g. `worker_idle`, `check_interval`).
    pub contract_keys: Vec<(String, String)>,
    /// The whole `worker:` section's entries (YAML lines indented by two), instead of the
    /// scripted worker's: real agents (`tests/integration/agents.rs`).
    pub worker_section: Option<String>,
    /// The top-level `land:` mapping (flow YAML, e.g. `{policy: none}`); None: orch's default.
    pub land: Option<String>,
    /// The top-level `downstream:` mapping; the harness's default `{depth: 0}` (no dependents'
    /// CI after a landing) keeps other suites' CI runs their own; None: orch's default.
    pub downstream: Option<String>,
    /// `worker.user`: workers run as this account (tests that set it need root; see
    /// `worker_account`). The test's directories are opened to it (root searchable, `out` and
    /// `ctl` writable).
    pub user: Vec<String>,
    /// The top-level `store:` mapping as written (None: the state directory's SQLite file).
    pub store: Option<String>,
}

impl Spec {
    /// The local forge (4 run slots), CI that passes unless a repository names its jobs.
    pub fn local(worker: &str) -> Spec {
        Spec {
            forge: ForgeSpec::Local(4),
            repos: Vec::new(),
            worker: worker.into(),
            ci: Ci::Pass,
            required_jobs: None,
            poll_interval: "200ms".into(),
            start_timeout: "60s".into(),
            lost_hook_grace: None,
            stop_grace: "1s".into(),
            max_parallel: 8,
            max_respawns: None,
            timeouts: Vec::new(),
            progress_window: None,
            alerts: None,
            contract_keys: Vec::new(),
            worker_section: None,
            land: None,
            downstream: Some("{depth: 0}".into()),
            store: None,
            user: Vec::new(),
        }
    }

    /// The crash-safety suites' organisation (`resume`, `chaos`): `repos` (name, direct
    /// dependencies) on the local forge (8 run slots, `lost_hook_grace` 5s), gated CI,
    /// `resume_worker.sh`, two respawns.
    pub fn resumable(repos: &[(&str, &[&str])]) -> Spec {
        let mut spec = Spec::local("resume_worker.sh");
        spec.forge = ForgeSpec::Local(8);
        spec.repos = repos
            .iter()
            .map(|(name, deps)| RepoSpec::new(name).deps(deps))
            .collect();
        spec.ci = Ci::Gated;
        spec.poll_interval = "300ms".into();
        spec.start_timeout = "2m".into();
        spec.lost_hook_grace = Some("5s".into());
        spec.max_respawns = Some(2);
        spec
    }

    pub fn repo(mut self, r: RepoSpec) -> Spec {
        self.repos.push(r);
        self
    }

    pub fn timeout(mut self, milestone: &str, timeout: &str, warning_at: &str) -> Spec {
        self.timeouts
            .push((milestone.into(), timeout.into(), warning_at.into()));
        self
    }

    /// The `alerts:` section of repos.yaml (its body, indented two spaces).
    pub fn alerts(mut self, yaml: &str) -> Spec {
        self.alerts = Some(yaml.into());
        self
    }

    /// Overrides `key: value` inside the test contract's `timeouts:`.
    pub fn contract_key(mut self, key: &str, value: &str) -> Spec {
        self.contract_keys.push((key.into(), value.into()));
        self
    }

    pub fn worker(mut self, worker: &str) -> Spec {
        self.worker = worker.into();
        self
    }

    pub fn ci(mut self, ci: Ci) -> Spec {
        self.ci = ci;
        self
    }

    /// `downstream:` as written (None: orch's default).
    pub fn downstream(mut self, downstream: Option<&str>) -> Spec {
        self.downstream = downstream.map(str::to_string);
        self
    }

    pub fn land(mut self, land: &str) -> Spec {
        self.land = Some(land.into());
        self
    }

    pub fn max_parallel(mut self, n: usize) -> Spec {
        self.max_parallel = n;
        self
    }

    /// Workers run as `account` (`worker.user`).
    pub fn user(self, account: &str) -> Spec {
        self.with_user(Some(account))
    }

    /// Workers run as `account` when one is given.
    pub fn with_user(mut self, account: Option<&str>) -> Spec {
        self.user = account.map(str::to_string).into_iter().collect();
        self
    }

    /// Workers run as accounts of this pool (`worker.users`), one per live worker.
    pub fn users(mut self, accounts: &[&str]) -> Spec {
        self.user = accounts.iter().map(|a| a.to_string()).collect();
        self
    }

    pub fn max_respawns(mut self, n: u32) -> Spec {
        self.max_respawns = Some(n);
        self
    }

    pub fn start_timeout(mut self, t: &str) -> Spec {
        self.start_timeout = t.into();
        self
    }

    pub fn lost_hook_grace(mut self, t: &str) -> Spec {
        self.lost_hook_grace = Some(t.into());
        self
    }

    /// The jobs of a local-forge repository that names none.
    fn default_jobs(&self, repo: &str, ctl: &Path) -> Vec<Job> {
        let status_check = |wait: String| {
            vec![
                job("check", &format!("{wait}grep -qx good status.txt")).timeout(Some("2m")),
                job("radicle-push", "true")
                    .needs(&["check"])
                    .timeout(Some("1m")),
            ]
        };
        match self.ci {
            Ci::Pass => vec![
                job("check", "true"),
                job("radicle-push", "true").needs(&["check"]),
            ],
            Ci::Gated => status_check(format!(
                "while [ ! -e '{g}/all' ] && [ ! -e '{g}/{repo}' ]; do sleep 0.05; done; ",
                g = ctl.join("gates").display()
            )),
            Ci::Sleep(d) => status_check(format!("sleep {:.3}; ", d.as_secs_f64())),
        }
    }
}

pub struct Org {
    dir: Option<tempfile::TempDir>,
    pub root: PathBuf,
    /// repos.yaml
    pub config_path: PathBuf,
    /// repos.yaml, loaded.
    pub config: Config,
    pub state: PathBuf,
    /// The test contract.
    pub contract: PathBuf,
    /// Outside the state directory; workers see it as `$E2E_OUT`.
    pub out: PathBuf,
    /// The workers' control directory (their `$1`).
    pub ctl: PathBuf,
    pub spec: Spec,
    env: Vec<(String, String)>,
    /// Every `orch` command runs as this uid and gid (an unprivileged orch: [`Org::run_as`]).
    run_as: Option<(u32, u32)>,
    /// Stops the base pusher (see [`base_pusher`]) when the organisation goes.
    base_pusher_stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

/// "Someone else" who pushes to a base branch for a scripted worker (`base_commit` in
/// tests/workers/land_worker.sh): a worker may not push there itself (the local forge's
/// pre-receive hook refuses it), so it asks, with a file `<out>/base-requests/<n>.req` (the
/// remote, the branch, a file, its content), and waits for `<n>.done`.
fn base_pusher(out: PathBuf, stop: std::sync::Arc<std::sync::atomic::AtomicBool>) {
    let dir = out.join("base-requests");
    std::fs::create_dir_all(&dir).unwrap();
    std::thread::spawn(move || {
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            let mut any = false;
            for e in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
                let path = e.path();
                if path.extension().is_none_or(|x| x != "req") {
                    continue;
                }
                any = true;
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                let f: Vec<&str> = text.lines().collect();
                let ok = f.len() >= 4
                    && {
                        let tmp = tempfile::tempdir().unwrap();
                        let script = "set -e; git clone -q \"$1\" \"$5/c\"; cd \"$5/c\"; printf '%s\\n' \"$4\" > \"$3\"; git add \"$3\"; git commit -q --allow-empty -m \"base: $3\"; git push -q origin HEAD:\"$2\"";
                        Command::new("sh")
                            .args(["-c", script, "sh", f[0], f[1], f[2], f[3]])
                            .arg(tmp.path())
                            .env("GIT_AUTHOR_NAME", "someone-else")
                            .env("GIT_AUTHOR_EMAIL", "else@example.invalid")
                            .env("GIT_COMMITTER_NAME", "someone-else")
                            .env("GIT_COMMITTER_EMAIL", "else@example.invalid")
                            .env("GIT_CONFIG_NOSYSTEM", "1")
                            .status()
                            .is_ok_and(|s| s.success())
                    };
                let _ = std::fs::remove_file(&path);
                // Whole or not at all: the worker reads it as soon as it exists (a file
                // created empty and written after was read as a failure now and then).
                let tmp = path.with_extension("done-tmp");
                std::fs::write(&tmp, if ok { "ok\n" } else { "failed\n" }).unwrap();
                std::fs::rename(&tmp, path.with_extension("done")).unwrap();
            }
            if !any {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    });
}

fn yaml_str(s: &str) -> String {
    // A JSON string is a YAML double-quoted string.
    serde_json::to_string(s).unwrap()
}

impl Org {
    pub fn new(spec: Spec) -> Org {
        let dir = tempfile::Builder::new()
            .prefix("orch-it-")
            .tempdir()
            .unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let out = root.join("out");
        std::fs::create_dir_all(&out).unwrap();
        let ctl = root.join("ctl");
        for d in ["prompts", "lives", "marks", "gates"] {
            std::fs::create_dir_all(ctl.join(d)).unwrap();
        }
        let worker = if spec.worker.starts_with('/') {
            PathBuf::from(&spec.worker)
        } else {
            worker_script(&spec.worker)
        };
        assert!(worker.exists(), "no worker script {}", worker.display());

        let mut yaml = String::new();
        let mut env = vec![(OUT_VAR.to_string(), out.display().to_string())];
        match &spec.forge {
            ForgeSpec::Local(max) => {
                yaml.push_str(&format!("forge: {{kind: local, max_concurrent_runs: {max}"));
                if let Some(grace) = &spec.lost_hook_grace {
                    yaml.push_str(&format!(", lost_hook_grace: {grace}"));
                }
                yaml.push_str("}\n");
            }
            ForgeSpec::Forgejo {
                url,
                owner,
                token_env,
                token,
            } => {
                let source = if token_env.is_empty() {
                    let file = root.join("forge-token");
                    std::fs::write(&file, format!("{token}\n")).unwrap();
                    std::fs::set_permissions(
                        &file,
                        std::os::unix::fs::PermissionsExt::from_mode(0o600),
                    )
                    .unwrap();
                    "token_file: forge-token".to_string()
                } else {
                    env.push((token_env.clone(), token.clone()));
                    format!("token_env: {token_env}")
                };
                yaml.push_str(&format!(
                    "forge: {{kind: forgejo, url: {}, owner: {owner}, {source}, request_timeout: 5s}}\n",
                    yaml_str(url)
                ));
            }
        }
        yaml.push_str(&format!(
            "ci: {{sync_job: radicle-push, poll_interval: {}, start_timeout: {}",
            spec.poll_interval, spec.start_timeout
        ));
        if let Some(req) = &spec.required_jobs {
            yaml.push_str(&format!(", required_jobs: [{}]", req.join(", ")));
        }
        yaml.push_str("}\n");
        match &spec.worker_section {
            Some(section) => yaml.push_str(&format!("worker:\n{section}")),
            None => yaml.push_str(&format!(
                "worker:\n  command: [sh, {}, {}]\n  env_passthrough: [HOME, PATH, {OUT_VAR}]\n  stop_grace: {}\n  max_parallel: {}\n",
                yaml_str(&worker.display().to_string()),
                yaml_str(&ctl.display().to_string()),
                spec.stop_grace,
                spec.max_parallel
            )),
        }
        if let Some(n) = spec.max_respawns {
            yaml.push_str(&format!("  max_respawns: {n}\n"));
        }
        if !spec.user.is_empty() {
            match spec.user.as_slice() {
                [one] => yaml.push_str(&format!("  user: {one}\n")),
                pool => yaml.push_str(&format!("  users: [{}]\n", pool.join(", "))),
            }
            // The account reaches the state directory through the test's directory, and
            // writes its answers and marks to `out` and `ctl`.
            use std::os::unix::fs::PermissionsExt;
            let mode = |p: &Path, m: u32| {
                std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap()
            };
            mode(&root, 0o711);
            mode(&out, 0o777);
            mode(&ctl, 0o777);
            for d in ["prompts", "lives", "marks", "gates", "spawns"] {
                std::fs::create_dir_all(ctl.join(d)).unwrap();
                mode(&ctl.join(d), 0o777);
            }
        }
        if let Some(alerts) = &spec.alerts {
            yaml.push_str("alerts:\n");
            yaml.push_str(alerts);
            if !alerts.ends_with('\n') {
                yaml.push('\n');
            }
        }
        if let Some(land) = &spec.land {
            yaml.push_str(&format!("land: {land}\n"));
        }
        if let Some(d) = &spec.downstream {
            yaml.push_str(&format!("downstream: {d}\n"));
        }
        if let Some(st) = &spec.store {
            yaml.push_str(&format!("store: {st}\n"));
        }
        yaml.push_str("repos:\n");
        for r in &spec.repos {
            let clone = root.join("repos").join(&r.name);
            match &spec.forge {
                ForgeSpec::Local(_) => {
                    init_repo(&clone, &r.name);
                    // The base is green by the status check's rule: a base-branch CI run
                    // (which the local forge starts for a pushed ref without one, and which
                    // the cascade watches) must not make every upstream look red.
                    if matches!(spec.ci, Ci::Gated | Ci::Sleep(_)) && r.jobs.is_empty() {
                        commit_file(&clone, "status.txt", "good\n", "the base is green");
                    }
                }
                ForgeSpec::Forgejo { .. } => {
                    let bare = root.join("origins").join(format!("{}.git", r.name));
                    init_bare_origin(&bare, &root.join("seed").join(&r.name), &r.name);
                    std::fs::create_dir_all(clone.parent().unwrap()).unwrap();
                    git(
                        &root,
                        &[
                            "clone",
                            "-q",
                            bare.to_str().unwrap(),
                            clone.to_str().unwrap(),
                        ],
                    );
                }
            }
            yaml.push_str(&format!(
                "  {}:\n    path: {}\n    deps: [{}]\n",
                r.name,
                yaml_str(&clone.display().to_string()),
                r.deps.join(", ")
            ));
            // On the local forge a repository without CI jobs could never reach DONE (orch
            // refuses to spawn there): it gets the jobs `spec.ci` says.
            let jobs = if r.jobs.is_empty() && matches!(spec.forge, ForgeSpec::Local(_)) {
                spec.default_jobs(&r.name, &ctl)
            } else {
                r.jobs.clone()
            };
            if !jobs.is_empty() {
                yaml.push_str("    ci:\n      jobs:\n");
                for j in &jobs {
                    yaml.push_str(&j.yaml());
                }
            }
        }
        let config_path = root.join("repos.yaml");
        std::fs::write(&config_path, &yaml).unwrap();
        let config = Config::load(&config_path).unwrap();
        let contract = root.join("worker-completion.yaml");
        std::fs::write(&contract, test_contract(&spec)).unwrap();
        let base_pusher_stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        base_pusher(out.clone(), base_pusher_stop.clone());
        let org = Org {
            base_pusher_stop,
            dir: Some(dir),
            state: root.join("state"),
            root,
            config_path,
            config,
            contract,
            out,
            ctl,
            spec,
            env,
            run_as: None,
        };
        let check = org.run(&["check"]);
        assert!(
            check.status.success(),
            "orch check refused the test organisation:\n{}\n--- repos.yaml\n{yaml}",
            output_text(&check)
        );
        org
    }

    /// Sets `key=value` for every later `orch` command of this organisation (and so for the
    /// supervisors they start).
    pub fn set_env(&mut self, key: &str, value: &str) {
        self.env.retain(|(k, _)| k != key);
        self.env.push((key.into(), value.into()));
    }

    /// From now on every `orch` command runs as account `name` (`uid`; orch unprivileged, as an operator
    /// without root runs it), the organisation's files given to it and its HOME
    /// `<root>/orch-home`. Read the state only through `orch` commands until the end: a
    /// database file root creates (SQLite's `-wal`/`-shm`) would not be the account's.
    pub fn run_as(&mut self, name: &str, uid: u32) {
        let gid = std::process::Command::new("id")
            .args(["-g", name])
            .output()
            .ok()
            .and_then(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .trim()
                    .parse::<u32>()
                    .ok()
            })
            .expect("the account's group");
        let home = self.root.join("orch-home");
        std::fs::create_dir_all(&home).unwrap();
        let own = std::process::Command::new("chown")
            .args(["-R", &format!("{uid}:{gid}")])
            .arg(&self.root)
            .output()
            .unwrap();
        assert!(own.status.success(), "{}", output_text(&own));
        self.set_env("HOME", &home.display().to_string());
        self.run_as = Some((uid, gid));
    }

    pub fn clone_path(&self, repo: &str) -> PathBuf {
        self.root.join("repos").join(repo)
    }

    pub fn origin_path(&self, repo: &str) -> PathBuf {
        self.root.join("origins").join(format!("{repo}.git"))
    }

    /// `orch <args>` on this organisation (config, state directory and contract through
    /// `ORCH_CONFIG`, `ORCH_STATE_DIR`, `ORCH_CONTRACT`) with the test's variables.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = orch_cmd();
        c.env("ORCH_CONFIG", &self.config_path)
            .env("ORCH_STATE_DIR", &self.state)
            .env("ORCH_CONTRACT", &self.contract)
            .args(args);
        for (k, v) in &self.env {
            c.env(k, v);
        }
        if let Some((uid, gid)) = self.run_as {
            use std::os::unix::process::CommandExt;
            // SAFETY: only system calls between fork and exec.
            unsafe {
                c.pre_exec(move || {
                    if libc::setgroups(0, std::ptr::null()) != 0
                        || libc::setresgid(gid, gid, gid) != 0
                        || libc::setresuid(uid, uid, uid) != 0
                    {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
        }
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().expect("orch runs")
    }

    /// Runs `orch <args>` (which should include `--json`) and parses its JSON answer: the
    /// whole of stdout, or its last line that is a JSON object.
    pub fn json(&self, args: &[&str]) -> Value {
        let out = self.run(args);
        let text = String::from_utf8_lossy(&out.stdout);
        serde_json::from_str(&text)
            .ok()
            .or_else(|| {
                text.lines()
                    .rev()
                    .find(|l| l.starts_with('{'))
                    .and_then(|l| serde_json::from_str(l).ok())
            })
            .unwrap_or_else(|| {
                panic!(
                    "orch {args:?} printed no JSON (exit {:?}):\n{text}\n{}",
                    out.status.code(),
                    String::from_utf8_lossy(&out.stderr)
                )
            })
    }

    /// `orch spawn --foreground --json`: supervises in the test's thread until the worker ends.
    /// Returns the output and the worker id.
    pub fn spawn_foreground(&self, repo: &str, task: &str) -> (Output, String) {
        let out = self.run(&[
            "spawn",
            "--repo",
            repo,
            "--task",
            task,
            "--foreground",
            "--json",
        ]);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let v: Value = text
            .lines()
            .rev()
            .find_map(|l| serde_json::from_str(l).ok())
            .unwrap_or_else(|| {
                panic!(
                    "spawn --foreground printed no JSON (exit {:?}):\n{text}\n{}",
                    out.status.code(),
                    String::from_utf8_lossy(&out.stderr)
                )
            });
        let id = v["worker_id"].as_str().unwrap().to_string();
        (out, id)
    }

    /// `orch spawn … --json` (detached, with `--id task_id` if given), which must succeed;
    /// its answer.
    fn spawn_json(&self, repo: &str, task: &str, task_id: Option<&str>) -> Value {
        let mut args = vec!["spawn", "--repo", repo, "--task", task];
        if let Some(t) = task_id {
            args.extend(["--id", t]);
        }
        args.push("--json");
        let out = self.run(&args);
        assert!(
            out.status.success(),
            "orch spawn {repo} failed (exit {:?}):\n{}",
            out.status.code(),
            output_text(&out)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// `orch spawn --repo <r> --task <task> --json` for every repository at once (one process
    /// each, all started before any is waited for); their outputs, in `repos` order.
    pub fn spawn_at_once(&self, repos: &[String], task: &str) -> Vec<Output> {
        let children: Vec<_> = repos
            .iter()
            .map(|r| {
                // At the default busy timeout (10 s): writers queue fairly and wait as long as
                // the queue moves (issue 34 item 5), so hundreds at once on two cores are
                // refused none.
                self.cmd(&["spawn", "--repo", r, "--task", task, "--json"])
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .expect("orch spawn starts")
            })
            .collect();
        children
            .into_iter()
            .map(|c| c.wait_with_output().expect("orch spawn ends"))
            .collect()
    }

    /// `orch spawn --json` (detached); returns the worker id once the worker runs.
    pub fn spawn_detached(&self, repo: &str, task: &str) -> String {
        let v = self.spawn_json(repo, task, None);
        assert_eq!(v["milestone"], "WORKING");
        assert_eq!(v["repo"], repo);
        v["worker_id"].as_str().unwrap().to_string()
    }

    /// `orch spawn … --id task_id --json`; returns the worker id (panics unless it started).
    pub fn spawn(&self, repo: &str, task: &str, task_id: &str) -> String {
        self.spawn_json(repo, task, Some(task_id))["worker_id"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// `orch resume --json`, which must succeed.
    pub fn resume(&self) -> Value {
        self.resume_with(&[])
    }

    pub fn resume_with(&self, extra: &[&str]) -> Value {
        let mut args = vec!["resume", "--json"];
        args.extend_from_slice(extra);
        let out = self.run(&args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "orch {args:?}: {}",
            output_text(&out)
        );
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "orch resume --json printed no JSON ({e}): {}",
                String::from_utf8_lossy(&out.stdout)
            )
        })
    }

    pub fn store(&self) -> Store {
        Store::open(&self.state).unwrap()
    }

    pub fn worker(&self, id: &str) -> WorkerRecord {
        self.store().worker(id).unwrap().expect("worker exists")
    }

    pub fn workers(&self) -> Vec<WorkerRecord> {
        self.store().workers().unwrap()
    }

    /// What the worker's agent spent, and its conversation id.
    pub fn usage(&self, id: &str) -> Option<orch::store::usage::Usage> {
        self.store()
            .read(|tx| orch::store::usage::get_usage(tx, id))
            .unwrap()
    }

    pub fn events(&self, id: &str) -> Vec<WorkerEvent> {
        self.store().read(|tx| ws::worker_events(tx, id)).unwrap()
    }

    pub fn count_events(&self, id: &str, kind: &str) -> usize {
        self.events(id).iter().filter(|e| e.kind == kind).count()
    }

    /// `(from, to)` of every recorded transition, in order.
    pub fn transitions(&self, id: &str) -> Vec<(String, String)> {
        self.events(id)
            .iter()
            .filter(|e| e.kind == "transition")
            .map(|e| {
                let head = e.detail.split(':').next().unwrap_or("");
                let (from, to) = head.split_once(" -> ").unwrap_or((head, ""));
                (from.trim().to_string(), to.trim().to_string())
            })
            .collect()
    }

    pub fn violations(&self, id: &str) -> Vec<String> {
        self.events(id)
            .into_iter()
            .filter(|e| e.kind == "violation")
            .map(|e| e.detail)
            .collect()
    }

    pub fn pushes(&self, id: &str) -> Vec<PushRecord> {
        self.store().read(|tx| ws::pushes(tx, id)).unwrap()
    }

    /// `orch sessions show <id> --json`.
    pub fn show(&self, id: &str) -> Value {
        self.json(&["sessions", "show", id, "--json"])
    }

    /// The pushes of `orch sessions show <id>`, checked to be two: the first red (job `test`
    /// failed), the second green.
    pub fn red_then_green_pushes(&self, id: &str) -> Vec<Value> {
        let show = self.show(id);
        let pushes = show["pushes"].as_array().unwrap().clone();
        assert_eq!(pushes.len(), 2, "{show:#}");
        assert_eq!(pushes[0]["verdict"], "red");
        assert_eq!(pushes[0]["failed_jobs"], serde_json::json!(["test"]));
        assert_eq!(pushes[1]["verdict"], "green");
        pushes
    }

    /// Pushes a commit setting `file` to `content` onto `repo`'s base branch on the local
    /// forge (its bare remote, created if needed): the push starts CI like any other.
    pub fn push_to_base(&self, repo: &str, file: &str, content: &str) -> String {
        let r = self
            .config
            .repo(repo)
            .expect("a configured repository")
            .clone();
        let bare = orch::forge::local::LocalForge::new(&self.state, &self.config)
            .with_exe(ORCH)
            .ensure_remote(&r)
            .expect("the local forge's remote");
        let work = self.root.join("base-pushes").join(repo);
        if !work.exists() {
            std::fs::create_dir_all(work.parent().unwrap()).unwrap();
            git(
                &self.root,
                &[
                    "clone",
                    "-q",
                    bare.to_str().unwrap(),
                    work.to_str().unwrap(),
                ],
            );
        } else {
            git(&work, &["pull", "-q", "--ff-only"]);
        }
        let sha = commit_file(&work, file, content, &format!("{file}: {content}"));
        push_head(&work, &bare, &r.branch);
        sha
    }

    /// The head of `repo`'s base branch on the local forge (its bare remote, created if
    /// needed).
    pub fn git_base_head(&self, repo: &str) -> String {
        let r = self
            .config
            .repo(repo)
            .expect("a configured repository")
            .clone();
        let bare = orch::forge::local::LocalForge::new(&self.state, &self.config)
            .with_exe(ORCH)
            .ensure_remote(&r)
            .expect("the local forge's remote");
        let out = std::process::Command::new("git")
            .arg("--git-dir")
            .arg(&bare)
            .args(["rev-parse", &r.branch])
            .output()
            .expect("git runs");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    /// Lines of `alerts.jsonl` for worker `id`. The file is a view appended just after the
    /// commit that recorded its alerts: read once it holds (within a few seconds) every alert
    /// the database has for the worker, so a test that saw the commit's state sees its alerts.
    pub fn alerts(&self, id: &str) -> Vec<Value> {
        let read = || -> Vec<Value> {
            std::fs::read_to_string(self.state.join("alerts.jsonl"))
                .unwrap_or_default()
                .lines()
                .map(|l| serde_json::from_str::<Value>(l).expect("alerts.jsonl holds JSON lines"))
                .filter(|a| a["worker_id"] == id)
                .collect()
        };
        let recorded = Store::open(&self.state)
            .and_then(|mut s| s.read(|tx| ws::alerts(tx, 0)))
            .map(|all| {
                all.iter()
                    .filter(|a| a.worker_id.as_deref() == Some(id))
                    .count()
            })
            .unwrap_or(0);
        poll(Duration::from_secs(5), || {
            let lines = read();
            (lines.len() >= recorded).then_some(lines)
        })
        .unwrap_or_else(read)
    }

    pub fn worker_log_path(&self, id: &str) -> PathBuf {
        self.state.join(id).join("worker.log")
    }

    pub fn worker_log(&self, id: &str) -> String {
        String::from_utf8_lossy(&std::fs::read(self.worker_log_path(id)).unwrap_or_default())
            .into_owned()
    }

    /// Repositories whose lock worker `id` holds.
    pub fn locks_of(&self, id: &str) -> Vec<String> {
        self.store()
            .locks()
            .unwrap()
            .into_iter()
            .filter(|l| l.holder == id)
            .map(|l| l.repo)
            .collect()
    }

    /// The repository whose chain lock `id` holds.
    pub fn lock_of(&self, id: &str) -> Option<String> {
        self.locks_of(id).into_iter().next()
    }

    /// The checkpoint file `<state>/<YYYY-MM-DD>-<id>.checkpoint.yaml`, parsed.
    pub fn checkpoint(&self, id: &str) -> orch::checkpoint::Checkpoint {
        let w = self.worker(id);
        let path = self
            .state
            .join(format!("{}-{}.checkpoint.yaml", w.day, w.id));
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("checkpoint {}: {e}", path.display()));
        orch::yaml::from_yaml_str(&text).unwrap_or_else(|e| panic!("checkpoint YAML: {e}"))
    }

    /// Waits until `f` holds; on timeout panics with `what` and the organisation's state.
    pub fn wait_until(&self, what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
        poll_until(what, limit, || f().then_some(()), || self.dump());
    }

    /// Waits until the supervisor of `id` has let go of the worker (lease dropped) and its
    /// process is gone.
    pub fn wait_supervisor_gone(&self, id: &str) {
        poll_until(
            &format!("the supervisor of {id} to stop"),
            DEADLINE,
            || {
                let w = self.worker(id);
                let alive = w.supervisor_pid.is_some_and(|p| {
                    orch::process::process_alive(p as i32, w.supervisor_start.map(|s| s as u64))
                });
                (w.lease_until_ms == Some(0) && !alive).then_some(())
            },
            || self.diag(id),
        );
    }

    /// Waits until the worker's milestone is `m`.
    pub fn wait_milestone(&self, id: &str, m: &str, limit: Duration) -> WorkerRecord {
        poll_until(
            &format!("{id} to reach {m}"),
            limit,
            || {
                let w = self.worker(id);
                // DONE is settled once its landing (if any) is finished too.
                (w.progress.milestone.as_str() == m && !w.progress.landing_active()).then_some(w)
            },
            || self.diag(id),
        )
    }

    /// Waits until worker `id` is DONE and its supervisor has let go.
    pub fn wait_done(&self, id: &str) {
        self.wait_until(&format!("{id} DONE"), Duration::from_secs(90), || {
            let w = self.worker(id);
            w.milestone().as_str() == "DONE" && !w.supervised(orch::store::now_ms())
        });
    }

    /// Waits until every CI run of every repository is finished.
    pub fn wait_ci_idle(&self) {
        self.wait_until("every CI run to finish", Duration::from_secs(90), || {
            self.store()
                .read(|tx| {
                    tx.query_row(
                        "SELECT COUNT(*) FROM local_jobs WHERE status IN ('waiting', 'running', 'blocked', 'unknown')",
                        [],
                        |r| r.get::<_, i64>(0),
                    )
                })
                .unwrap_or(1)
                == 0
        });
    }

    /// Creates the file a worker waiting in `await_release` (tests/workers/lib.sh) looks for.
    pub fn release(&self, id: &str) {
        std::fs::write(self.out.join(format!("release-{id}")), "go").unwrap();
    }

    pub fn open_gate(&self, repo: &str) {
        std::fs::write(self.ctl.join("gates").join(repo), "").unwrap();
    }

    pub fn open_all_gates(&self) {
        self.open_gate("all");
    }

    /// How many times worker `id` was started.
    pub fn lives(&self, id: &str) -> usize {
        std::fs::read_to_string(self.ctl.join("lives").join(id))
            .map(|s| s.lines().count())
            .unwrap_or(0)
    }

    /// The prompt (stdin) the `life`-th start of worker `id` received.
    ///
    /// A worker counts its life before it has read its prompt, so this waits for the file
    /// (the worker saves it atomically) rather than racing the worker's `cat`.
    pub fn prompt(&self, id: &str, life: usize) -> String {
        let path = self.ctl.join("prompts").join(format!("{id}.{life}"));
        self.wait_until(
            &format!("prompt {life} of {id} to be saved"),
            Duration::from_secs(30),
            || path.exists(),
        );
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("prompt {life} of {id}: {e}"))
    }

    pub fn has_mark(&self, id: &str, life: usize, point: &str) -> bool {
        self.ctl
            .join("marks")
            .join(format!("{id}.{life}.{point}"))
            .exists()
    }

    pub fn wait_mark(&self, id: &str, life: usize, point: &str) {
        self.wait_until(
            &format!("{id} life {life} to reach {point}"),
            Duration::from_secs(60),
            || self.has_mark(id, life, point),
        );
    }

    /// The worker's supervisor: pid of a live `orch __supervise <id>` process (panics otherwise).
    pub fn supervisor_pid(&self, id: &str) -> i32 {
        let w = self.worker(id);
        let pid = w.supervisor_pid.expect("a supervisor pid is recorded") as i32;
        assert!(
            orch::process::process_alive(pid, w.supervisor_start.map(|s| s as u64)),
            "supervisor {pid} of {id} is not alive"
        );
        let cmdline = cmdline(pid).unwrap_or_default();
        assert!(
            cmdline.contains("__supervise") && cmdline.contains(id),
            "pid {pid} is not {id}'s supervisor: {cmdline}"
        );
        pid
    }

    /// SIGKILLs worker `id`'s supervisor and waits until it and the worker's group are gone.
    pub fn kill_supervisor(&self, id: &str) -> i32 {
        let pid = self.supervisor_pid(id);
        kill9(pid);
        self.wait_until(
            &format!("supervisor {pid} to die"),
            Duration::from_secs(10),
            || !orch::process::process_alive(pid, None),
        );
        if let Some(pgid) = self.worker(id).worker_pid {
            self.wait_until(
                &format!("worker group {pgid} to die with its supervisor"),
                Duration::from_secs(10),
                || !orch::process::group_alive(pgid as i32),
            );
        }
        pid
    }

    /// Live processes (zombies excluded) whose command line or working directory refers to
    /// this organisation's directory: supervisors, guards, workers, CI runners and jobs.
    pub fn leftovers(&self) -> Vec<(i32, String)> {
        processes_under(&self.root)
    }

    /// SIGKILLs every leftover, one pid at a time, until none is left (bounded; never panics).
    pub fn kill_leftovers(&self) {
        poll(Duration::from_secs(1), || {
            let left = self.leftovers();
            for (pid, _) in &left {
                kill9(*pid);
            }
            left.is_empty().then_some(())
        });
    }

    /// The last `n` lines of `<state>/<id>/<file>`, indented, under a heading.
    fn log_tail(&self, id: &str, file: &str, n: usize) -> String {
        let Ok(text) = std::fs::read_to_string(self.state.join(id).join(file)) else {
            return String::new();
        };
        let tail: Vec<&str> = text.lines().rev().take(n).collect();
        let mut s = format!("   -- {file} (last lines)\n");
        for l in tail.into_iter().rev() {
            s.push_str(&format!("   | {l}\n"));
        }
        s
    }

    /// Everything useful when a test about worker `id` fails: its session, its logs.
    pub fn diag(&self, id: &str) -> String {
        let show = self.run(&["sessions", "show", id]);
        format!(
            "--- sessions show\n{}\n{}{}",
            output_text(&show),
            self.log_tail(id, "worker.log", 60),
            self.log_tail(id, "supervisor.log", 200)
        )
    }

    /// The whole state as text, for failure messages.
    pub fn dump(&self) -> String {
        let mut s = output_text(&self.run(&["status"]));
        if let Ok(mut store) = Store::open(&self.state)
            && let Ok(workers) = store.workers()
        {
            for w in workers {
                s.push_str(&format!(
                    "\n== {} {} {} respawns {} sup {:?} lease {:?}\n",
                    w.id,
                    w.repo,
                    w.milestone(),
                    w.respawns,
                    w.supervisor_pid,
                    w.lease_until_ms.map(|l| l - orch::store::now_ms())
                ));
                if let Ok(evs) = store.read(|tx| ws::worker_events(tx, &w.id)) {
                    for e in evs {
                        s.push_str(&format!("   {} {} {}\n", e.kind, e.milestone, e.detail));
                    }
                }
                for f in ["supervisor.log", "worker.log"] {
                    s.push_str(&self.log_tail(&w.id, f, 15));
                }
            }
        }
        s
    }
}

impl Drop for Org {
    fn drop(&mut self) {
        self.base_pusher_stop
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.kill_leftovers();
        if std::thread::panicking()
            && let Some(d) = self.dir.take()
        {
            let kept = d.keep();
            eprintln!("kept {} for inspection", kept.display());
        }
    }
}

/// A bare repository with `main` holding one commit (made in `seed`).
fn init_bare_origin(bare: &Path, seed: &Path, name: &str) {
    std::fs::create_dir_all(bare).unwrap();
    git(bare, &["init", "-q", "--bare", "-b", "main"]);
    init_repo(seed, name);
    git(
        seed,
        &["push", "-q", bare.to_str().unwrap(), "main:refs/heads/main"],
    );
}

/// The shipped contract with the test's timeouts. Values are replaced in place, by key,
/// inside `timeouts:`, so the test keeps working when other parts of the contract change; a
/// key that is not found fails loudly.
pub fn test_contract(spec: &Spec) -> String {
    let original = std::fs::read_to_string(shipped_contract()).unwrap();
    let mut lines: Vec<String> = original.lines().map(str::to_string).collect();
    let timeouts = lines
        .iter()
        .position(|l| l.starts_with("timeouts:"))
        .expect("the contract has a timeouts: section");
    let find = |lines: &[String], key: &str| {
        lines
            .iter()
            .enumerate()
            .skip(timeouts)
            .find(|(_, l)| l.trim_start().starts_with(key))
            .map(|(i, _)| i)
            .unwrap_or_else(|| panic!("the contract's timeouts: has no {key}"))
    };
    // `field: value` inside a flow mapping line: replace value (up to `,` or ` }`).
    let set = |line: &mut String, field: &str, value: &str| {
        let at = line
            .find(&format!("{field}: "))
            .unwrap_or_else(|| panic!("no {field} in {line}"))
            + field.len()
            + 2;
        let end = line[at..]
            .find([',', '}'])
            .map(|e| at + e)
            .unwrap_or(line.len());
        line.replace_range(at..end, &format!("{value} "));
    };
    for (m, timeout, warning) in &spec.timeouts {
        let i = find(&lines, &format!("{m}:"));
        set(&mut lines[i], "timeout", timeout);
        set(&mut lines[i], "warning_at", warning);
    }
    if let Some(w) = &spec.progress_window {
        let i = find(&lines, "progress_window:");
        lines[i] = format!("  progress_window: {w}");
    }
    for (key, value) in &spec.contract_keys {
        let i = find(&lines, &format!("{key}:"));
        let indent = lines[i].len() - lines[i].trim_start().len();
        lines[i] = format!("{}{key}: {value}", " ".repeat(indent));
    }
    lines.join("\n") + "\n"
}
