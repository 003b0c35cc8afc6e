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
use crate::app::channel::{Channel, Speaker};
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
mod launch;
use launch::{argv_for, guard_command, sandbox_plan, set_worker_env};

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
        let (mut cmd, pidns) = guard_command(
            env,
            w,
            &argv,
            cgroup.as_ref(),
            channel,
            sandbox.as_ref(),
            account.as_ref(),
        )
        .map_err(refuse)?;
        set_worker_env(&mut cmd, env, w, launch, channel, account.as_ref(), &dir);
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
        let rx =
            start_pumps(&mut child, env, &dir, &prompt, stdin_text, bell).map_err(start_error)?;
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

/// Starts the threads around the worker's pipes: its stdin fed `stdin_text`, its stdout and
/// stderr parsed into the loop's input (and logged); its exit watched. The input's receiver.
fn start_pumps(
    child: &mut GroupChild,
    env: &Env,
    dir: &std::path::Path,
    prompt: &[u8],
    stdin_text: Vec<u8>,
    bell: &Arc<Bell>,
) -> std::io::Result<Receiver<Input>> {
    let agent_kind = env.config.worker.agent;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(crate::store::workers::WORKER_LOG))?;
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
        &[prompt, &ci_guide, &handoff],
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
    Ok(rx)
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
