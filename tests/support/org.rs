//! Temp organisations for end-to-end tests: real git repositories, a repos.yaml, a test copy
//! of the contract with short timeouts, and the real `orch` binary driven as a user would.
//!
//! ```ignore
//! #[path = "support/org.rs"]
//! mod org;
//! let org = org::Org::new(org::Spec::local("happy.sh").repo(org::RepoSpec::new("alpha").job(org::job("test", "true"))));
//! let (out, id) = org.spawn_foreground("alpha", "add a feature");
//! ```
//!
//! Everything a test waits for is polled with a deadline ([`poll_until`]); nothing sleeps a
//! fixed time. [`assert_clean`] is the after-test check: no process of the worker's group is
//! left (not even a zombie) and no zombie child of the test process lingers.
#![allow(dead_code)]

use orch::store::Store;
use orch::store::workers::{WorkerEvent, WorkerRecord};
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

/// Absolute path of a scripted worker in `tests/workers/`.
pub fn worker_script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/workers")
        .join(name)
}

#[path = "git.rs"]
mod git_cmd;
pub use git_cmd::git;

/// Polls `f` until it returns `Some`, or panics naming `what` (plus `diag()`) after `limit`.
pub fn poll_until<T>(
    what: &str,
    limit: Duration,
    mut f: impl FnMut() -> Option<T>,
    diag: impl FnOnce() -> String,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = f() {
            return v;
        }
        if Instant::now() >= deadline {
            panic!("timed out after {limit:?} waiting for {what}\n{}", diag());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

// ---- /proc -----------------------------------------------------------------------------------

/// `(pid, state, ppid, pgrp)` of every process, from `/proc/*/stat`.
pub fn processes() -> Vec<(i32, char, i32, i32)> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(close) = text.rfind(')') else {
            continue;
        };
        let f: Vec<&str> = text[close + 1..].split_whitespace().collect();
        if let (Some(state), Some(ppid), Some(pgrp)) = (
            f.first().and_then(|s| s.chars().next()),
            f.get(1).and_then(|s| s.parse().ok()),
            f.get(2).and_then(|s| s.parse().ok()),
        ) {
            out.push((pid, state, ppid, pgrp));
        }
    }
    out
}

/// Every process (zombies included) whose process group is `pgid`.
pub fn group_members(pgid: i32) -> Vec<(i32, char)> {
    processes()
        .into_iter()
        .filter(|p| p.3 == pgid)
        .map(|p| (p.0, p.1))
        .collect()
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
/// `Command::output()` can exist for an instant: only one that persists counts.
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
    let first = zombie_children_of_me();
    if first.is_empty() {
        return;
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut lasting = first;
    while !lasting.is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        let now = zombie_children_of_me();
        lasting.retain(|p| now.contains(p));
    }
    assert!(
        lasting.is_empty(),
        "zombie children of the test process: {lasting:?}"
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

// ---- the organisation ------------------------------------------------------------------------

/// One `ci.jobs` entry of the local forge.
#[derive(Debug, Clone)]
pub struct Job {
    pub name: String,
    pub run: String,
    pub needs: Vec<String>,
}

pub fn job(name: &str, run: &str) -> Job {
    Job {
        name: name.into(),
        run: run.into(),
        needs: Vec::new(),
    }
}

impl Job {
    pub fn needs(mut self, needs: &[&str]) -> Job {
        self.needs = needs.iter().map(|s| s.to_string()).collect();
        self
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
    /// A Forgejo at `url`; each repository's clone gets a local bare `origin`.
    Forgejo {
        url: String,
        owner: String,
        token_env: String,
        token: String,
    },
}

/// What goes into repos.yaml and the test contract.
#[derive(Debug, Clone)]
pub struct Spec {
    pub forge: ForgeSpec,
    pub repos: Vec<RepoSpec>,
    /// File name in `tests/workers/`, or an absolute path.
    pub worker: String,
    pub required_jobs: Option<Vec<String>>,
    pub poll_interval: String,
    pub start_timeout: String,
    pub stop_grace: String,
    pub max_parallel: usize,
    /// `(milestone, timeout, warning_at)` overrides of `timeouts.per_milestone`.
    pub timeouts: Vec<(String, String, String)>,
    pub progress_window: Option<String>,
}

impl Spec {
    pub fn local(worker: &str) -> Spec {
        Spec {
            forge: ForgeSpec::Local(4),
            repos: Vec::new(),
            worker: worker.into(),
            required_jobs: None,
            poll_interval: "200ms".into(),
            start_timeout: "60s".into(),
            stop_grace: "1s".into(),
            max_parallel: 8,
            timeouts: Vec::new(),
            progress_window: None,
        }
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
}

pub struct Org {
    _tmp: tempfile::TempDir,
    pub root: PathBuf,
    pub config: PathBuf,
    pub state: PathBuf,
    pub contract: PathBuf,
    /// Outside the state directory; workers see it as `$E2E_OUT`.
    pub out: PathBuf,
    pub spec: Spec,
    env: Vec<(String, String)>,
}

fn yaml_str(s: &str) -> String {
    serde_json::to_string(s).unwrap()
}

impl Org {
    pub fn new(spec: Spec) -> Org {
        let tmp = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(tmp.path()).unwrap();
        let out = root.join("out");
        std::fs::create_dir_all(&out).unwrap();
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
                yaml.push_str(&format!(
                    "forge: {{kind: local, max_concurrent_runs: {max}}}\n"
                ));
            }
            ForgeSpec::Forgejo {
                url,
                owner,
                token_env,
                token,
            } => {
                yaml.push_str(&format!(
                    "forge: {{kind: forgejo, url: {}, owner: {owner}, token_env: {token_env}, request_timeout: 5s}}\n",
                    yaml_str(url)
                ));
                env.push((token_env.clone(), token.clone()));
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
        yaml.push_str(&format!(
            "worker:\n  command: [sh, {}]\n  env_passthrough: [HOME, PATH, {OUT_VAR}]\n  stop_grace: {}\n  max_parallel: {}\n",
            yaml_str(&worker.display().to_string()),
            spec.stop_grace,
            spec.max_parallel
        ));
        yaml.push_str("repos:\n");
        for r in &spec.repos {
            let clone = root.join("clones").join(&r.name);
            match &spec.forge {
                ForgeSpec::Local(_) => init_repo(&clone, &r.name),
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
            // refuses to spawn there): scenarios that do not care get a passing pair.
            let default_jobs = [
                Job {
                    name: "check".into(),
                    run: "true".into(),
                    needs: vec![],
                },
                Job {
                    name: "radicle-push".into(),
                    run: "true".into(),
                    needs: vec!["check".into()],
                },
            ];
            let jobs: &[Job] = if r.jobs.is_empty() && matches!(spec.forge, ForgeSpec::Local(_)) {
                &default_jobs
            } else {
                &r.jobs
            };
            if !jobs.is_empty() {
                yaml.push_str("    ci:\n      jobs:\n");
                for j in jobs {
                    yaml.push_str(&format!(
                        "        - {{name: {}, run: {}, needs: [{}], timeout: 60s}}\n",
                        j.name,
                        yaml_str(&j.run),
                        j.needs.join(", ")
                    ));
                }
            }
        }
        let config = root.join("repos.yaml");
        std::fs::write(&config, &yaml).unwrap();
        let contract = root.join("worker-completion.yaml");
        std::fs::write(&contract, test_contract(&spec)).unwrap();
        let org = Org {
            _tmp: tmp,
            state: root.join("state"),
            root,
            config,
            contract,
            out,
            spec,
            env,
        };
        let check = org.run(&["check"]);
        assert!(
            check.status.success(),
            "orch check refused the test organisation:\n{}\n{}\n--- repos.yaml\n{yaml}",
            String::from_utf8_lossy(&check.stdout),
            String::from_utf8_lossy(&check.stderr)
        );
        org
    }

    pub fn clone_path(&self, repo: &str) -> PathBuf {
        self.root.join("clones").join(repo)
    }

    pub fn origin_path(&self, repo: &str) -> PathBuf {
        self.root.join("origins").join(format!("{repo}.git"))
    }

    /// `orch --config … --state-dir … --contract … <args>` with the test's variables, and no
    /// `ORCH_*` inherited from whoever runs the tests.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(ORCH);
        c.arg("--config")
            .arg(&self.config)
            .arg("--state-dir")
            .arg(&self.state)
            .arg("--contract")
            .arg(&self.contract)
            .args(args)
            .stdin(std::process::Stdio::null());
        for (k, _) in std::env::vars_os() {
            if k.to_str().is_some_and(|k| k.starts_with("ORCH_")) {
                c.env_remove(k);
            }
        }
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().expect("orch runs")
    }

    /// Runs `orch <args>` expecting a JSON line on stdout.
    pub fn json(&self, args: &[&str]) -> Value {
        let out = self.run(args);
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text
            .lines()
            .rev()
            .find(|l| l.starts_with('{'))
            .unwrap_or_else(|| {
                panic!(
                    "orch {args:?} printed no JSON (exit {:?}):\n{text}\n{}",
                    out.status.code(),
                    String::from_utf8_lossy(&out.stderr)
                )
            });
        serde_json::from_str(line).unwrap()
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

    /// `orch spawn --json` (detached); returns the worker id once the worker runs.
    pub fn spawn_detached(&self, repo: &str, task: &str) -> String {
        let out = self.run(&["spawn", "--repo", repo, "--task", task, "--json"]);
        assert!(
            out.status.success(),
            "spawn failed (exit {:?}):\n{}\n{}",
            out.status.code(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["milestone"], "WORKING");
        assert_eq!(v["repo"], repo);
        v["worker_id"].as_str().unwrap().to_string()
    }

    pub fn store(&self) -> Store {
        Store::open(&self.state).unwrap()
    }

    pub fn worker(&self, id: &str) -> WorkerRecord {
        self.store().worker(id).unwrap().expect("worker exists")
    }

    pub fn events(&self, id: &str) -> Vec<WorkerEvent> {
        self.store()
            .read(|tx| orch::store::workers::worker_events(tx, id))
            .unwrap()
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

    /// `orch sessions show <id> --json`.
    pub fn show(&self, id: &str) -> Value {
        self.json(&["sessions", "show", id, "--json"])
    }

    /// Lines of `alerts.jsonl` for worker `id`.
    pub fn alerts(&self, id: &str) -> Vec<Value> {
        std::fs::read_to_string(self.state.join("alerts.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).expect("alerts.jsonl holds JSON lines"))
            .filter(|a| a["worker"] == id)
            .collect()
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
    pub fn wait_milestone(&self, id: &str, m: &str) -> WorkerRecord {
        poll_until(
            &format!("{id} to reach {m}"),
            DEADLINE,
            || {
                let w = self.worker(id);
                (w.progress.milestone.as_str() == m).then_some(w)
            },
            || self.diag(id),
        )
    }

    /// Creates the file a worker waiting in `await_release` (tests/workers/lib.sh) looks for.
    pub fn release(&self, id: &str) {
        std::fs::write(self.out.join(format!("release-{id}")), "go").unwrap();
    }

    /// Everything useful when a test fails: the session, the logs.
    pub fn diag(&self, id: &str) -> String {
        let show = self.run(&["sessions", "show", id]);
        let sup =
            std::fs::read_to_string(self.state.join(id).join("supervisor.log")).unwrap_or_default();
        let mut log = self.worker_log(id);
        if log.len() > 4000 {
            log = format!("…{}", &log[log.len() - 4000..]);
        }
        format!(
            "--- sessions show\n{}{}\n--- worker.log\n{log}\n--- supervisor.log\n{sup}",
            String::from_utf8_lossy(&show.stdout),
            String::from_utf8_lossy(&show.stderr)
        )
    }
}

/// A repository with a `main` branch and one commit.
fn init_repo(dir: &Path, name: &str) {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    std::fs::write(dir.join("README"), format!("{name}\n")).unwrap();
    git(dir, &["add", "README"]);
    git(dir, &["commit", "-q", "-m", "initial"]);
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

/// The seed contract with the test's timeouts. Values are replaced in place, by key, inside
/// `timeouts:`, so the test keeps working when other parts of the contract change; a key that is
/// not found fails loudly.
fn test_contract(spec: &Spec) -> String {
    let original = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("contracts/worker-completion.yaml"),
    )
    .unwrap();
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
    lines.join("\n") + "\n"
}
