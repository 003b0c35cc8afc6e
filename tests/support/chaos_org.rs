//! A throwaway organisation for the crash-safety suites (`tests/resume.rs`, `tests/chaos.rs`):
//! git clones whose CI runs on the embedded local forge, a repos.yaml, scripted workers from
//! `tests/workers/`, the real `orch` binary, and helpers to read the database, kill processes
//! with SIGKILL and find anything a run left alive.
//!
//! Layout of the temporary directory:
//! ```text
//! repos.yaml
//! repos/<name>/     the clones (main + one commit)
//! state/            orch's state directory (orch.db, checkpoints, sessions, forge/)
//! ctl/              the workers' control directory: prompts/, lives/, marks/, gates/
//! ```
//! CI of every repository: `check` (passes when `status.txt` says `good`; optionally waits for
//! a gate file first) and the sync job `radicle-push` (needs check).
#![allow(dead_code)]

use orch::config::Config;
use orch::store::Store;
use orch::store::workers::{self as ws, PushRecord, WorkerEvent, WorkerRecord};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

pub const ORCH: &str = env!("CARGO_BIN_EXE_orch");

pub fn contract_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("contracts/worker-completion.yaml")
}

pub fn worker_script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/workers")
        .join(name)
}

/// How the `check` job behaves before judging `status.txt`.
#[derive(Debug, Clone, Copy)]
pub enum Ci {
    /// Waits until `ctl/gates/all` or `ctl/gates/<repo>` exists: CI stays `running` as long
    /// as the test wants.
    Gated,
    /// Sleeps this long.
    Sleep(Duration),
}

pub struct OrgSpec<'a> {
    /// Repository name and its direct dependencies.
    pub repos: &'a [(&'a str, &'a [&'a str])],
    /// A script under `tests/workers/`.
    pub worker: &'a str,
    pub ci: Ci,
    pub max_parallel: usize,
    pub max_respawns: u32,
    /// `ci.start_timeout`: a pushed SHA without a push run after this is `no_run`.
    pub start_timeout: &'a str,
    /// `forge.lost_hook_grace`: a pushed ref this old without a CI run gets its run started.
    pub lost_hook_grace: &'a str,
}

impl Default for OrgSpec<'_> {
    fn default() -> Self {
        OrgSpec {
            repos: &[],
            worker: "resume_worker.sh",
            ci: Ci::Gated,
            max_parallel: 8,
            max_respawns: 2,
            start_timeout: "2m",
            lost_hook_grace: "5s",
        }
    }
}

pub struct Org {
    dir: Option<tempfile::TempDir>,
    pub root: PathBuf,
    pub config_path: PathBuf,
    pub state: PathBuf,
    pub ctl: PathBuf,
    pub config: Config,
}

#[path = "git.rs"]
mod git_cmd;
use git_cmd::git;

fn yaml_str(s: &str) -> String {
    // A JSON string is a YAML double-quoted string.
    serde_json::to_string(s).unwrap()
}

impl Org {
    pub fn new(spec: &OrgSpec) -> Org {
        let dir = tempfile::Builder::new()
            .prefix("orch-chaos-")
            .tempdir()
            .unwrap();
        let root = dir.path().to_path_buf();
        let state = root.join("state");
        let ctl = root.join("ctl");
        for d in ["prompts", "lives", "marks", "gates"] {
            std::fs::create_dir_all(ctl.join(d)).unwrap();
        }
        let mut y = format!(
            "forge: {{kind: local, max_concurrent_runs: 8, lost_hook_grace: {}}}\n\
             ci: {{sync_job: radicle-push, poll_interval: 300ms, start_timeout: {}}}\n\
             worker:\n  command: [sh, {}, {}]\n  env_passthrough: [HOME, PATH]\n  stop_grace: 1s\n  max_parallel: {}\n  max_respawns: {}\n\
             repos:\n",
            spec.lost_hook_grace,
            spec.start_timeout,
            yaml_str(&worker_script(spec.worker).display().to_string()),
            yaml_str(&ctl.display().to_string()),
            spec.max_parallel,
            spec.max_respawns,
        );
        for (name, deps) in spec.repos {
            let clone = root.join("repos").join(name);
            std::fs::create_dir_all(&clone).unwrap();
            git(&clone, &["init", "-q", "-b", "main"]);
            std::fs::write(clone.join("README"), format!("{name}\n")).unwrap();
            git(&clone, &["add", "README"]);
            git(&clone, &["commit", "-q", "-m", "initial"]);
            let wait = match spec.ci {
                Ci::Gated => format!(
                    "while [ ! -e '{g}/all' ] && [ ! -e '{g}/{name}' ]; do sleep 0.05; done; ",
                    g = ctl.join("gates").display()
                ),
                Ci::Sleep(d) => format!("sleep {:.3}; ", d.as_secs_f64()),
            };
            let check = format!("{wait}grep -qx good status.txt");
            y.push_str(&format!(
                "  {name}:\n    path: repos/{name}\n    deps: [{}]\n    ci:\n      jobs:\n        - {{name: check, run: {}, timeout: 2m}}\n        - {{name: radicle-push, run: \"true\", needs: [check], timeout: 1m}}\n",
                deps.join(", "),
                yaml_str(&check),
            ));
        }
        let config_path = root.join("repos.yaml");
        std::fs::write(&config_path, y).unwrap();
        let config = Config::load(&config_path).unwrap();
        Org {
            dir: Some(dir),
            root,
            config_path,
            state,
            ctl,
            config,
        }
    }

    /// `orch` with this organisation's config, state directory and contract.
    pub fn cmd(&self) -> Command {
        let mut c = Command::new(ORCH);
        c.env("ORCH_CONFIG", &self.config_path)
            .env("ORCH_STATE_DIR", &self.state)
            .env("ORCH_CONTRACT", contract_path())
            .env_remove("ORCH_WORKER_ID")
            .env_remove("ORCH_LOG")
            .stdin(std::process::Stdio::null());
        c
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().unwrap()
    }

    /// `orch spawn … --json`; returns the worker id (panics unless it started).
    pub fn spawn(&self, repo: &str, task: &str, task_id: &str) -> String {
        let out = self.run(&[
            "spawn", "--repo", repo, "--task", task, "--id", task_id, "--json",
        ]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "orch spawn {repo}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["worker_id"].as_str().unwrap().to_string()
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
            "orch {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "orch resume --json printed no JSON ({e}): {}",
                String::from_utf8_lossy(&out.stdout)
            )
        })
    }

    /// `orch <args> --json` parsed.
    pub fn json(&self, args: &[&str]) -> Value {
        let mut a = args.to_vec();
        a.push("--json");
        let out = self.run(&a);
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "orch {a:?}: no JSON ({e}): {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
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

    pub fn events(&self, id: &str) -> Vec<WorkerEvent> {
        self.store().read(|tx| ws::worker_events(tx, id)).unwrap()
    }

    pub fn count_events(&self, id: &str, kind: &str) -> usize {
        self.events(id).iter().filter(|e| e.kind == kind).count()
    }

    pub fn pushes(&self, id: &str) -> Vec<PushRecord> {
        self.store().read(|tx| ws::pushes(tx, id)).unwrap()
    }

    /// The repositories whose chain lock `id` holds.
    pub fn lock_of(&self, id: &str) -> Option<String> {
        self.store()
            .locks()
            .unwrap()
            .into_iter()
            .find(|l| l.holder == id)
            .map(|l| l.repo)
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

    /// Waits until `f` holds; on timeout panics with `what` and the organisation's state.
    pub fn wait_until(&self, what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
        let deadline = Instant::now() + timeout;
        loop {
            if f() {
                return;
            }
            if Instant::now() >= deadline {
                panic!(
                    "timed out after {timeout:?} waiting for {what}\n{}",
                    self.dump()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn wait_mark(&self, id: &str, life: usize, point: &str) {
        self.wait_until(
            &format!("{id} life {life} to reach {point}"),
            Duration::from_secs(60),
            || self.has_mark(id, life, point),
        );
    }

    pub fn wait_milestone(&self, id: &str, milestone: &str, timeout: Duration) {
        self.wait_until(&format!("{id} to reach {milestone}"), timeout, || {
            self.worker(id).milestone().as_str() == milestone
        });
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

    /// SIGKILLs every leftover, one pid at a time, until none is left (bounded).
    pub fn kill_leftovers(&self) {
        for _ in 0..20 {
            let left = self.leftovers();
            if left.is_empty() {
                return;
            }
            for (pid, _) in left {
                kill9(pid);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The state as text, for failure messages.
    pub fn dump(&self) -> String {
        let mut s = String::new();
        let out = self.run(&["status"]);
        s.push_str(&String::from_utf8_lossy(&out.stdout));
        s.push_str(&String::from_utf8_lossy(&out.stderr));
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
                    let p = self.state.join(&w.id).join(f);
                    if let Ok(text) = std::fs::read_to_string(&p) {
                        let tail: Vec<&str> = text.lines().rev().take(15).collect();
                        s.push_str(&format!("   -- {f} (last lines)\n"));
                        for l in tail.into_iter().rev() {
                            s.push_str(&format!("   | {l}\n"));
                        }
                    }
                }
            }
        }
        s
    }
}

impl Drop for Org {
    fn drop(&mut self) {
        self.kill_leftovers();
        if std::thread::panicking()
            && let Some(d) = self.dir.take()
        {
            let kept = d.keep();
            eprintln!("kept {} for inspection", kept.display());
        }
    }
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
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in entries.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
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
