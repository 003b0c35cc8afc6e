//! The worker process as its supervisor sees it: started under the guard in its own process
//! group with a clean environment, its prompt on stdin, its output pumped by two reader threads
//! into `worker.log` and — only what matters — into the supervisor's input channel; stopped as
//! a whole tree: its own cgroup where the machine allows it, the guard's descendants (daemons
//! included) everywhere (see `contain.rs` and `guard.rs`).
//!
//! Memory stays bounded whatever the worker prints: a line is cut at `MAX_LINE` for parsing,
//! the log file at `MAX_LOG_BYTES`, and the channel is bounded (a busy supervisor makes the
//! worker wait on its pipe).

use super::agent::line::LineFilter;
use super::agent::{self, StreamParser};
use super::bell::Bell;
use super::input::Input;
use super::{Env, SuperviseError, session_dir};
use crate::app::channel::{Channel, GUARD_CHANNEL_ARG, GUARD_WORKER_ARG, SOCKET_ENV, Speaker};
use crate::config::agent::{ArgvValues, expand};
use crate::contain::{self, Cgroup};
use crate::process::{GroupChild, GroupOptions, Signal, spawn_in_group};
use crate::store::workers::WorkerRecord;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Longest part of a line kept for milestone parsing (the log gets every byte).
pub const MAX_LINE: usize = 16 * 1024;
/// A worker log stops growing here; the rest of the output is counted and discarded.
pub const MAX_LOG_BYTES: u64 = 64 * 1024 * 1024;
/// How many inputs the readers may queue before the worker waits on its pipe.
const CHANNEL_BOUND: usize = 256;
/// How long a supervisor waits for its guard to kill the tree and exit before it SIGKILLs
/// what is left of the group itself (the guard needs milliseconds; more only under load).
const GUARD_EXIT_WAIT: Duration = Duration::from_secs(3);
/// How long the last sweep waits for a cgroup to empty after `cgroup.kill`.
const CGROUP_EMPTY_WAIT: Duration = Duration::from_secs(5);

/// How a worker's process group is stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// SIGKILL to the whole group at once (permission rule, lost lease).
    Kill,
    /// SIGTERM to the group, `worker.stop_grace`, then SIGKILL (timeout, cancel).
    Terminate,
    /// This long for the worker to exit by itself (its last word said), then SIGKILL to the
    /// whole group — no signal it could act on first (a worker that reported BLOCKED).
    KillAfter(Duration),
}

/// How one run of the worker starts: its conversation, and what goes on its stdin.
#[derive(Debug, Clone)]
pub struct Launch {
    pub session_id: String,
    /// Continue the conversation `session_id` (the agent started it before).
    pub resume: bool,
    /// The text for stdin instead of `prompt.md` (a continued conversation gets the resume
    /// note as its new message).
    pub message: Option<String>,
}

/// A running worker: its group (led by the guard), its cgroup if it has one, and the channel
/// its readers feed.
pub struct WorkerProcess {
    child: GroupChild,
    output: Option<Receiver<Input>>,
    cgroup: Option<Cgroup>,
    /// Whether the tree runs in a PID namespace of its own: then the guard's end is the tree's
    /// (the kernel's), and no mark is swept — marks are per worker id, and would reach a
    /// replacement's processes if this supervisor is a stale one.
    pidns: bool,
    /// What finds the tree's leftovers without a cgroup (see `contain::marked_processes`).
    state_dir: PathBuf,
    session: PathBuf,
    id: String,
}

impl WorkerProcess {
    /// Starts the configured worker command for `w` under `orch __guard`, which leads the
    /// group and takes it down if this supervisor dies (see process.rs).
    pub fn start(
        env: &Env,
        w: &WorkerRecord,
        launch: &Launch,
        bell: &Arc<Bell>,
        channel: Option<&Channel>,
    ) -> Result<WorkerProcess, SuperviseError> {
        let dir = session_dir(env.state_dir, &w.id);
        let _ = std::fs::create_dir_all(&dir);
        let agent_kind = env.config.worker.agent;
        let argv = argv_for(env, w, launch);
        let start_error = |source| SuperviseError::Start {
            id: w.id.clone(),
            argv: argv.join(" "),
            source,
        };
        let prompt = std::fs::read(dir.join("prompt.md")).unwrap_or_default();
        let stdin_text = launch
            .message
            .as_ref()
            .map(|m| m.clone().into_bytes())
            .unwrap_or_else(|| prompt.clone());
        // `worker.user(s)`: the worker runs as the account its workspace was made for (refused
        // here rather than run as orch).
        // `worker.user(s)` / `worker.sandbox`: the worker works in a workspace of its own, and
        // runs as the account it was made for (refused here rather than run as orch).
        let wt = std::path::Path::new(&w.worktree);
        let workspace = crate::account::workspace_dir(env.state_dir, &w.id);
        let refuse =
            |e: String| start_error(std::io::Error::new(std::io::ErrorKind::PermissionDenied, e));
        if env.config.worker.separate() && wt.parent() != Some(workspace.as_path()) {
            return Err(refuse(format!(
                "worker {} was started before worker.user or worker.sandbox was set: its worktree {} is orch's, not a workspace of its own (cancel it, or unset them until it ends)",
                w.id, w.worktree
            )));
        }
        let account = if env.config.worker.accounts() {
            let a = crate::account::of_workspace(&workspace, &env.config.worker.users)
                .map_err(refuse)?
                .ok_or_else(|| refuse(format!("its workspace {} is gone", workspace.display())))?;
            crate::account::usable(&a.uid.to_string()).map_err(refuse)?;
            Some(a)
        } else {
            None
        };
        let sandbox = if env.config.worker.sandbox {
            Some(sandbox_plan(env, &workspace, &argv).map_err(refuse)?)
        } else {
            None
        };
        let cgroup = Cgroup::for_worker(env.state_dir, &w.id);
        if let Some(cg) = &cgroup
            && let Err(e) = cg.record(&dir)
        {
            tracing::warn!(worker = %w.id, error = %e, "cannot record the worker's cgroup");
        }
        let mut cmd = std::process::Command::new(env.orch_exe);
        cmd.arg(crate::guard::GUARD_COMMAND)
            .arg("--parent")
            .arg(std::process::id().to_string());
        if let Some(cg) = &cgroup {
            cmd.arg("--cgroup").arg(cg.dir());
        }
        // Named in the guard's argv, which every process can read: an orch command run inside
        // the worker finds its worker and channel from its ancestry, whatever its environment.
        cmd.arg(GUARD_WORKER_ARG).arg(&w.id);
        if let Some(ch) = channel {
            cmd.arg(GUARD_CHANNEL_ARG).arg(ch.name());
        }
        // The kernel's bound: the guard's death ends everything in the worker's namespace.
        let pidns = crate::pidns::usable().is_some();
        if pidns {
            cmd.arg("--pidns");
        }
        // Codex's workspace-write sandbox (bubblewrap, codex-cli 0.169.0) clones its command
        // into new namespaces and then opens `/proc/<its pid>/ns` — a pid of the worker's
        // namespace: looked up in the host's `/proc` it is another process or none, bwrap
        // fails ("open /proc/<pid>/ns/ns failed"), its cloned child waits for it for ever and
        // Codex reports the command still running. So a Codex worker gets the `/proc` of its
        // own namespace (and the mount namespace it needs) even without a sandbox; orch
        // commands in it find their worker from its init's argv, as in a sandbox.
        if pidns
            && sandbox.is_none()
            && env.config.worker.agent == crate::config::agent::Agent::Codex
        {
            cmd.arg(crate::sandbox::OWN_PROC_ARG);
        }
        if let Some(plan) = &sandbox {
            // The sandbox is made by the namespace's init: no namespace, no worker.
            if !pidns {
                return Err(refuse(
                    "worker.sandbox needs a PID namespace for the worker: this machine gives none (see `orch check`)".into(),
                ));
            }
            cmd.args(plan.args());
        }
        if let Some(a) = &account {
            cmd.arg(crate::account::USER_ARG).arg(a.arg());
        }
        cmd.arg("--")
            .args(&argv)
            .current_dir(&w.worktree)
            .env_clear()
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        for var in &env.config.worker.env_passthrough {
            if Some(var) == env.config.forge.token_env.as_ref() {
                continue; // never the forge token, whatever the configuration says
            }
            if let Some(v) = std::env::var_os(var) {
                cmd.env(var, v);
            }
        }
        // `orch report` / `orch ci status` work as written in the prompt: the running orch's
        // directory comes first on the worker's PATH.
        cmd.env("PATH", worker_path(env.orch_exe, cmd_path(&cmd)));
        // The built-in contract has no file: `orch report` finds it the same way.
        if !env.contract.is_built_in() {
            cmd.env("ORCH_CONTRACT", env.contract_path);
        }
        cmd.env("ORCH_WORKER_ID", &w.id)
            .env("ORCH_REPO", &w.repo)
            .env("ORCH_TASK", &w.task)
            .env("ORCH_CI_GUIDE", dir.join("ci-guide.md"))
            .env("ORCH_HANDOFF", dir.join(super::HANDOFF_FILE))
            .env("ORCH_STATE_DIR", env.state_dir)
            .env("ORCH_CONFIG", env.config_path)
            .env("ORCH_BRANCH", &w.branch)
            .env(
                "ORCH_BASE_BRANCH",
                env.config
                    .repo(&w.repo)
                    .map(|r| r.branch.as_str())
                    .unwrap_or("main"),
            )
            .env("ORCH_PUSH_REMOTE", &w.remote)
            .env("ORCH_BIN", env.orch_exe)
            .env("ORCH_SESSION_ID", &launch.session_id)
            // Where it stands: a replacement of a worker that pushed continues in FIXING_CI or
            // PUSHED_TO_CI, and must not report WORKING again (a violation). Which replacement
            // it is counts an operator's respawns as well as the crash replacements.
            .env("ORCH_MILESTONE", w.progress.milestone.to_string())
            .env(
                "ORCH_REPLACEMENT",
                (w.respawns + i64::from(w.progress.respawned)).to_string(),
            );
        if let Some(ch) = channel {
            cmd.env(SOCKET_ENV, ch.name());
        }
        if w.branch != w.local_branch() {
            // `land: direct`: the local branch `orch/<id>` tracks the base branch, and git's
            // default `push.default=simple` refuses a plain `git push` to a branch of another
            // name. `upstream` sends it where the policy wants (the tracked base); set for the
            // worker's processes only, never in the clone's config (people push from it too).
            // After any keys `worker.env_passthrough` brought, which stay.
            let n = cmd
                .get_envs()
                .find(|(k, _)| *k == "GIT_CONFIG_COUNT")
                .and_then(|(_, v)| v?.to_str()?.parse::<usize>().ok())
                .unwrap_or(0);
            cmd.env("GIT_CONFIG_COUNT", (n + 1).to_string())
                .env(format!("GIT_CONFIG_KEY_{n}"), "push.default")
                .env(format!("GIT_CONFIG_VALUE_{n}"), "upstream");
        }
        if env.config.worker.separate() {
            // Its own home (agents keep their configuration there) and its own copy of the CI
            // guide: orch's session directory is not its to read.
            cmd.env("HOME", crate::account::worker_home(wt))
                .env("ORCH_CI_GUIDE", crate::account::worker_ci_guide(wt))
                .env("ORCH_HANDOFF", crate::account::worker_handoff(wt))
                .env(crate::report_wire::CI_VIA_ENV, "channel");
        }
        if env.config.store.is_some() {
            // The shared database's URL is not the worker's to have: its CI questions go to
            // its supervisor, as a worker of another account's do.
            cmd.env(crate::report_wire::CI_VIA_ENV, "channel");
        }
        if let Some(a) = &account {
            cmd.env("USER", &a.name).env("LOGNAME", &a.name);
        }
        let mut child = spawn_in_group(
            &mut cmd,
            &GroupOptions {
                die_with_parent: true,
            },
        )
        .map_err(start_error)?;
        if let Some(ch) = channel {
            // From now on this run's processes, and only they, speak on the channel.
            ch.admit(Speaker {
                guard_pid: child.pid() as i32,
                cgroup_tail: cgroup.as_ref().and_then(|cg| {
                    let life = cg.dir().file_name()?.to_str()?;
                    let tag = cg.dir().parent()?.file_name()?.to_str()?;
                    Some(format!("{tag}/{life}"))
                }),
                uid: account
                    .as_ref()
                    .map_or_else(|| rustix::process::geteuid().as_raw(), |a| a.uid),
            });
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join(crate::store::workers::WORKER_LOG))
            .map_err(start_error)?;
        let log = Arc::new(Mutex::new(LogSink {
            written: log.metadata().map(|m| m.len()).unwrap_or(0),
            file: log,
            truncated: false,
        }));
        let (tx, rx) = sync_channel(CHANNEL_BOUND);
        let ci_guide = std::fs::read(dir.join("ci-guide.md")).unwrap_or_default();
        let handoff = std::fs::read(dir.join(super::HANDOFF_FILE)).unwrap_or_default();
        let filter = Arc::new(LineFilter::new(
            env.contract.permission.patterns.clone(),
            &[&prompt, &ci_guide, &handoff],
        ));
        let c = child.child_mut();
        if let Some(mut stdin) = c.stdin.take() {
            // A worker that never reads its stdin must not block the supervisor, and one that
            // exits before reading it must not kill it: orch runs with SIGPIPE's default
            // disposition (main.rs), so the write must see EPIPE instead. SIGPIPE from a
            // write is thread-directed: blocking it in this thread alone is enough.
            std::thread::spawn(move || {
                block_sigpipe_in_this_thread();
                let _ = stdin.write_all(&stdin_text);
            });
        }
        let (out_parser, err_parser) = agent::parsers(agent_kind, filter);
        if let Some(out) = c.stdout.take() {
            let (tx, log, bell) = (tx.clone(), log.clone(), bell.clone());
            std::thread::spawn(move || pump(out, tx, log, out_parser, bell));
        }
        if let Some(err) = c.stderr.take() {
            let bell = bell.clone();
            std::thread::spawn(move || pump(err, tx, log, err_parser, bell));
        }
        watch_exit(child.pid() as i32, bell.clone());
        Ok(WorkerProcess {
            child,
            output: Some(rx),
            cgroup,
            pidns,
            state_dir: env.state_dir.to_path_buf(),
            session: dir,
            id: w.id.clone(),
        })
    }

    /// The group leader's pid (the group id).
    pub fn pid(&self) -> i64 {
        self.child.pid() as i64
    }

    /// The worker's exit status, if it has exited.
    pub fn try_wait(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Sends `sig` to the group; SIGKILL kills the whole tree at once (see [`Self::kill_now`]).
    pub fn signal(&self, sig: Signal) {
        if sig == Signal::KILL {
            self.kill_now();
        } else {
            let _ = self.child.signal_group(sig);
        }
    }

    /// Freezes the worker's tree while a DONE claim is judged: its cgroup (daemons included)
    /// where it has one, and its process group; the guard, which leads the group, is let go
    /// on at once (it must still be able to stop the tree).
    pub fn freeze(&self) {
        if let Some(cg) = &self.cgroup {
            let _ = cg.set_frozen(true);
        }
        let _ = self.child.signal_group(Signal::STOP);
        let _ = self.child.signal_leader(Signal::CONT);
    }

    /// Lets a frozen tree go on.
    pub fn thaw(&self) {
        if let Some(cg) = &self.cgroup {
            let _ = cg.set_frozen(false);
        }
        let _ = self.child.signal_group(Signal::CONT);
    }

    /// Cascade pause: every process of the tree stopped (SIGSTOP — state `T` — to the group
    /// and to whatever of its cgroup left the group), then its cgroup frozen too. The stop
    /// lands first: a task frozen before it takes its SIGSTOP would sit in the freezer (`S`)
    /// instead. The guard, which leads the group, is let go on at once.
    pub fn pause(&self) {
        let _ = self.child.signal_group(Signal::STOP);
        let _ = self.child.signal_leader(Signal::CONT);
        let Some(cg) = &self.cgroup else {
            return;
        };
        let stop_all = || {
            let procs = cg.procs();
            for &p in &procs {
                if let Some(pid) = rustix::process::Pid::from_raw(p) {
                    let _ = rustix::process::kill_process(pid, Signal::STOP);
                }
            }
            procs
        };
        let until = std::time::Instant::now() + Duration::from_millis(500);
        loop {
            let procs = stop_all();
            let stopped = procs.iter().all(|&p| {
                crate::process::proc_stat(p).is_none_or(|s| s.state == 'T' || s.is_dead())
            });
            if stopped || std::time::Instant::now() >= until {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = cg.set_frozen(true);
    }

    /// Ends a cascade pause: the cgroup thawed, every process continued.
    pub fn unpause(&self) {
        if let Some(cg) = &self.cgroup {
            let _ = cg.set_frozen(false);
            for p in cg.procs() {
                if let Some(pid) = rustix::process::Pid::from_raw(p) {
                    let _ = rustix::process::kill_process(pid, Signal::CONT);
                }
            }
        }
        let _ = self.child.signal_group(Signal::CONT);
    }

    /// Kills the whole tree now: `cgroup.kill`, and SIGUSR1 to the guard, which kills every
    /// descendant (daemons included) and then itself. A group SIGKILL would kill the guard
    /// first and let daemons outside the group live.
    pub fn kill_now(&self) {
        // The request first: the guard then sees it before the worker's exit, and ends as a
        // killed tree (no exit code), not as a worker that exited.
        let _ = self.child.signal_leader(Signal::USR1);
        if let Some(cg) = &self.cgroup {
            let _ = cg.kill();
        }
    }

    /// What the readers sent, waiting up to `wait` for the first input; `None` once both
    /// readers are done (EOF) and everything was taken.
    pub fn output(&mut self, wait: Duration) -> Option<Vec<Input>> {
        let rx = self.output.as_ref()?;
        let mut inputs = Vec::new();
        let mut closed = false;
        match rx.recv_timeout(wait) {
            Ok(i) => inputs.push(i),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => closed = true,
        }
        while inputs.len() < CHANNEL_BOUND {
            match rx.try_recv() {
                Ok(i) => inputs.push(i),
                Err(_) => break,
            }
        }
        if closed {
            // Both readers are done: later calls answer None at once.
            self.output = None;
        }
        Some(inputs)
    }

    /// Stops the tree (the worker already exited: sweeps what it left behind, so that the
    /// readers reach EOF); returns its exit code.
    pub fn stop(mut self, how: Stop, grace: Duration) -> Option<i32> {
        match how {
            Stop::Kill => self.kill_now(),
            Stop::Terminate => self.terminate(grace),
            Stop::KillAfter(wait) => {
                if !matches!(self.child.wait_timeout(wait), Ok(Some(_))) {
                    self.kill_now();
                }
            }
        }
        self.finish()
    }

    /// SIGTERM to the group (the guard leaves it to the worker), `grace` for the worker to
    /// exit — the guard then stops what it left and exits — else the whole tree is killed.
    fn terminate(&mut self, grace: Duration) {
        let _ = self.child.signal_group(Signal::TERM);
        let _ = self.child.signal_group(Signal::CONT);
        if !matches!(self.child.wait_timeout(grace), Ok(Some(_))) {
            self.kill_now();
        }
    }

    /// Waits for the guard to exit (it stops the whole tree first), then the backstops: SIGKILL
    /// to what is left of the group, `cgroup.kill` until the cgroup is empty (then it is
    /// removed), or — without a cgroup — the processes marked as this worker's.
    fn finish(&mut self) -> Option<i32> {
        if !matches!(self.child.wait_timeout(GUARD_EXIT_WAIT), Ok(Some(_))) {
            tracing::warn!(worker = %self.id, "its guard did not exit in time; killing its group");
        }
        let status = self.child.terminate(Duration::from_millis(200));
        self.sweep_leftovers();
        status.ok().and_then(|s| s.code())
    }

    fn sweep_leftovers(&mut self) {
        match &self.cgroup {
            Some(cg) => {
                if cg.kill_and_remove(CGROUP_EMPTY_WAIT) {
                    Cgroup::forget(&self.session);
                } else {
                    tracing::warn!(worker = %self.id, cgroup = %cg.dir().display(), "its cgroup did not empty");
                }
            }
            // The guard is reaped (`finish`): its init died with it, and the kernel ended the
            // namespace. Nothing to look for by mark.
            None if self.pidns => {}
            None => {
                let n = contain::kill_marked(
                    &self.state_dir,
                    &self.id,
                    contain::now_ticks(),
                    Duration::from_secs(2),
                );
                if n > 0 {
                    tracing::warn!(worker = %self.id, killed = n, "killed processes of the worker that had left its guard");
                }
            }
        }
    }

    /// Sweeps the tree of a worker that exited (background processes it left must not
    /// outlive it), keeping the readers so that its last lines can still be taken.
    pub fn sweep(&mut self) {
        self.finish();
    }
}

/// The PATH `cmd` would give the worker so far (the passed-through one), if any.
/// What worker `argv` must not see in its sandbox (`worker.sandbox`), refused when something
/// it needs would be hidden (orch's binary, the worker command, the configuration or the
/// contract orch's commands read inside it), or when it could redirect orch's configuration
/// through a symlink (`sandbox::fixed::redirectable`).
fn sandbox_plan(
    env: &Env,
    workspace: &std::path::Path,
    argv: &[String],
) -> Result<crate::sandbox::Plan, String> {
    let contract = (!env.contract.is_built_in()).then_some(env.contract_path);
    // The wave files orch's ticks read (a relative one taken from repos.yaml's directory,
    // which is read-only to the worker anyway).
    let waves: Vec<std::path::PathBuf> = crate::store::Store::open(env.state_dir)
        .and_then(|mut s| s.read(crate::store::waves::list_waves))
        .map_err(|e| format!("worker.sandbox: cannot read the recorded wave files: {e}"))?
        .into_iter()
        .map(|w| w.file.into())
        .collect();
    let plan = crate::sandbox::for_config(env.config, env.state_dir, workspace, contract, &waves);
    let mut needed = vec![
        ("orch's binary", env.orch_exe.to_path_buf()),
        ("the configuration", env.config_path.to_path_buf()),
    ];
    if !env.contract.is_built_in() {
        needed.push(("the contract", env.contract_path.to_path_buf()));
    }
    if let Some(program) = argv.first().filter(|p| p.starts_with('/')) {
        needed.push(("the worker command", program.into()));
    }
    // A mount fixes what a symlink points at, not where it points.
    if let Some(why) = crate::sandbox::fixed::redirectable(env.config, contract)
        .into_iter()
        .next()
    {
        return Err(why);
    }
    for (what, path) in needed {
        if plan.hides(&path) {
            return Err(format!(
                "worker.sandbox would hide {what} ({}) from the worker: move it out of the state directory, the clones and worker.hide",
                path.display()
            ));
        }
    }
    Ok(plan)
}

fn cmd_path(cmd: &std::process::Command) -> Option<std::ffi::OsString> {
    cmd.get_envs()
        .find(|(k, _)| *k == "PATH")
        .and_then(|(_, v)| v.map(|v| v.to_os_string()))
}

/// The worker's PATH: the directory of `orch_exe` first, then `inherited` (or the usual system
/// directories when PATH is not passed through).
fn worker_path(
    orch_exe: &std::path::Path,
    inherited: Option<std::ffi::OsString>,
) -> std::ffi::OsString {
    let mut dirs: Vec<std::path::PathBuf> = orch_exe
        .parent()
        .map(|d| d.to_path_buf())
        .into_iter()
        .collect();
    match inherited {
        Some(p) => dirs.extend(std::env::split_paths(&p)),
        None => dirs.extend(["/usr/local/bin", "/usr/bin", "/bin"].map(std::path::PathBuf::from)),
    }
    std::env::join_paths(dirs).unwrap_or_default()
}

/// Appends worker output to `worker.log`, up to `MAX_LOG_BYTES`.
struct LogSink {
    file: std::fs::File,
    written: u64,
    truncated: bool,
}

impl LogSink {
    fn write(&mut self, bytes: &[u8]) {
        if self.truncated {
            return;
        }
        let room = MAX_LOG_BYTES.saturating_sub(self.written) as usize;
        let take = bytes.len().min(room);
        let _ = self.file.write_all(&bytes[..take]);
        self.written += take as u64;
        if take < bytes.len() {
            self.truncated = true;
            let _ = writeln!(
                self.file,
                "\n[orch] worker.log truncated at {MAX_LOG_BYTES} bytes; further output discarded"
            );
        }
    }
}

/// Reads one stream of the worker until EOF, each line through the agent's parser. Runs on
/// its own thread.
fn pump(
    mut stream: impl Read,
    tx: SyncSender<Input>,
    log: Arc<Mutex<LogSink>>,
    mut parser: Box<dyn StreamParser>,
    bell: Arc<Bell>,
) {
    // Whatever ends the pump (end of file, a gone supervisor), the loop hears of it.
    struct RingOnEnd(Arc<Bell>);
    impl Drop for RingOnEnd {
        fn drop(&mut self) {
            self.0.ring();
        }
    }
    let _ring = RingOnEnd(bell.clone());
    let mut buf = vec![0u8; 64 * 1024];
    let mut line: Vec<u8> = Vec::with_capacity(1024);
    let mut last_activity = std::time::Instant::now() - Duration::from_secs(10);
    let raw_progress = parser.bytes_are_progress();
    loop {
        let n = match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        log.lock().expect("log lock").write(&buf[..n]);
        let mut progress = raw_progress;
        for &b in &buf[..n] {
            if b == b'\n' {
                let text = String::from_utf8_lossy(&line).into_owned();
                line.clear();
                let parsed = parser.line(&text);
                progress |= parsed.progress;
                for input in parsed.inputs {
                    // Blocking send: if the supervisor is busy the worker waits on its pipe,
                    // which is what bounds memory.
                    if tx.send(input).is_err() {
                        return;
                    }
                    bell.ring();
                }
            } else if line.len() < MAX_LINE {
                line.push(b);
            }
        }
        if progress && last_activity.elapsed() >= Duration::from_secs(1) {
            last_activity = std::time::Instant::now();
            if tx.try_send(Input::Activity).is_ok() {
                bell.ring();
            }
        }
    }
    if !line.is_empty() {
        let text = String::from_utf8_lossy(&line).into_owned();
        for input in parser.line(&text).inputs {
            let _ = tx.send(input);
        }
    }
}

/// The worker's argv: `worker.command` with its placeholders filled in for this run.
fn argv_for(env: &Env, w: &WorkerRecord, launch: &Launch) -> Vec<String> {
    let wt = std::path::Path::new(&w.worktree);
    let argv = &env.config.worker.command;
    let uses = |p: &str| argv.iter().any(|a| a.contains(p));
    // Asked of git only when the command wants them.
    let git_dir = if uses("{git_dir}") {
        crate::gitops::git(
            wt,
            &["rev-parse", "--path-format=absolute", "--git-common-dir"],
        )
        .unwrap_or_else(|_| format!("{}/.git", w.worktree))
    } else {
        String::new()
    };
    let worktree_git_dir = if uses("{worktree_git_dir}") {
        crate::gitops::git(wt, &["rev-parse", "--path-format=absolute", "--git-dir"])
            .unwrap_or_else(|_| format!("{}/.git", w.worktree))
    } else {
        String::new()
    };
    let remote = if env.config.worker.separate() {
        // Its clone's remote is reached through its supervisor (the relay), never on disk:
        // the bare remote is orch's, hidden from a sandboxed worker and closed to an account's,
        // and an agent sandbox that binds it (Codex's `--add-dir {remote}`) fails to start a
        // command. Its own worktree instead, which it writes already.
        w.worktree.clone()
    } else if uses("{remote}") {
        crate::gitops::git(wt, &["remote", "get-url", &w.remote])
            .unwrap_or_else(|_| w.remote.clone())
    } else {
        String::new()
    };
    let values = ArgvValues {
        session_id: &launch.session_id,
        resume: launch.resume,
        worktree: &w.worktree,
        git_dir: &git_dir,
        worktree_git_dir: &worktree_git_dir,
        remote: &remote,
        worker_id: &w.id,
        model: w.model.as_deref(),
    };
    expand(env.config.worker.agent, argv, &values)
}

/// Rings `bell` once the worker's group leader `pid` has exited (a worker whose leftovers keep
/// its pipes open must still be noticed at once). Waits without reaping (`WNOWAIT`): the
/// leader's status stays for `GroupChild` to collect.
fn watch_exit(pid: i32, bell: Arc<Bell>) {
    let _ = std::thread::Builder::new()
        .name("worker-exit".into())
        .spawn(move || {
            loop {
                // SAFETY: waitid on a zeroed siginfo_t it fills in; no reaping (WNOWAIT).
                let rc = unsafe {
                    let mut info: libc::siginfo_t = std::mem::zeroed();
                    libc::waitid(
                        libc::P_PID,
                        pid as libc::id_t,
                        &mut info,
                        libc::WEXITED | libc::WNOWAIT,
                    )
                };
                if rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                    break; // exited, or already reaped (ECHILD)
                }
            }
            bell.ring();
        });
}

/// Whether this process has a child that exited and waits to be reaped (one system call,
/// nothing reaped): the tick looks for orphans only then.
pub fn zombie_child() -> bool {
    // SAFETY: waitid on a zeroed siginfo_t it fills in; WNOHANG | WNOWAIT: no wait, no reaping.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let rc = libc::waitid(
            libc::P_ALL,
            0,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        );
        rc == 0 && info.si_pid() != 0
    }
}

/// Reaps zombie children other than the worker leader `leader` (whose status `GroupChild`
/// owns). Orphans of the worker are reparented to the supervisor (a subreaper), not to init.
pub fn reap_orphans(leader: Option<i64>) {
    let me = std::process::id() as i32;
    let leader = leader.map(|p| p as i32);
    let my_group = rustix::process::getpgrp().as_raw_nonzero().get();
    // Only this process's own children can be its zombies: read them from its threads'
    // `children` lists (a handful of entries) rather than every process on the host; the
    // host-wide scan is the fallback for a kernel without those files.
    let candidates = own_children().unwrap_or_else(every_pid);
    for pid in candidates {
        if Some(pid) == leader {
            continue;
        }
        // Children in our own group (git commands, run by a thread that waits for them
        // itself: the resume pass) are not orphans; reaping one would steal its status.
        if let Some(st) = crate::process::proc_stat(pid)
            && st.ppid == me
            && st.state == 'Z'
            && st.pgrp != my_group
            && let Some(p) = rustix::process::Pid::from_raw(pid)
        {
            let _ = rustix::process::waitpid(Some(p), rustix::process::WaitOptions::NOHANG);
        }
    }
}

/// The children of this process, from `/proc/self/task/<tid>/children` (every thread's:
/// an orphan reparented to a subreaper lands on one of its threads). `None` when the kernel
/// does not provide these files.
fn own_children() -> Option<Vec<i32>> {
    let mut out = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        match std::fs::read_to_string(task.path().join("children")) {
            Ok(text) => out.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok()),
            ),
            // A thread that ended since the listing has no file any more.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && task.path().exists() => {
                return None;
            }
            Err(_) => {}
        }
    }
    Some(out)
}

/// Every process id on the host (the fallback of [`own_children`]).
fn every_pid() -> Vec<i32> {
    std::fs::read_dir("/proc")
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()))
                .collect()
        })
        .unwrap_or_default()
}

/// Blocks SIGPIPE for the calling thread (a write to a closed pipe then fails with EPIPE).
fn block_sigpipe_in_this_thread() {
    // SAFETY: plain libc calls on a local, initialised signal set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGPIPE);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn the_running_orch_comes_first_on_the_workers_path() {
        let p = worker_path(
            Path::new("/opt/orch/bin/orch"),
            Some("/usr/bin:/bin".into()),
        );
        assert_eq!(p, "/opt/orch/bin:/usr/bin:/bin");
        let p = worker_path(Path::new("/opt/orch/bin/orch"), None);
        assert_eq!(p, "/opt/orch/bin:/usr/local/bin:/usr/bin:/bin");
    }
}
