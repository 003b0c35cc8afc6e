//! The supervisor: one `orch` process per worker that owns the worker's process group, feeds
//! every event into the state machine, follows CI for the tracked SHA, and carries out the
//! machine's effects. It renews a lease in SQLite so that `orch resume` can tell when it is
//! gone.
//!
//! Threads: the main thread owns the worker (so its parent-death signal stays armed), two
//! reader threads pump stdout/stderr into the worker log and send only what matters (milestone
//! lines, permission denials, coalesced activity) over a bounded channel. Memory therefore
//! stays bounded whatever the worker prints: a line is cut at `MAX_LINE` for parsing, the log
//! file at `MAX_LOG_BYTES`.

use crate::config::Config;
use crate::contract::Contract;
use crate::forge::follow::CiFollower;
use crate::forge::verdict::{Verdict, VerdictKind};
use crate::forge::{CiRun, Forge, ForgeError};
use crate::gitops;
use crate::milestone::{
    Channel, Effect, Event, LineSignal, Milestone, Progress, parse_line, sha_in, step,
};
use crate::process::{GroupChild, GroupOptions, Signal, spawn_in_group};
use crate::store::workers::{self as ws, AlertRecord, WorkerRecord};
use crate::store::{Store, StoreError, now_ms, release_in};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, SyncSender, channel, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Names the pid whose lease a new supervisor may take over (its spawner).
pub const LEASE_FROM_ENV: &str = "ORCH_LEASE_FROM";

/// A supervisor that has not renewed its lease for this long is considered gone.
pub const LEASE_MS: i64 = 15_000;
const RENEW_EVERY_MS: i64 = 3_000;
/// Longest part of a line kept for milestone parsing (the log gets every byte).
pub const MAX_LINE: usize = 16 * 1024;
/// A worker log stops growing here; the rest of the output is counted and discarded.
pub const MAX_LOG_BYTES: u64 = 64 * 1024 * 1024;

/// Paths and inputs a supervisor needs; also what it passes on to workers.
pub struct Env<'a> {
    pub config: &'a Config,
    pub contract: &'a Contract,
    pub state_dir: &'a Path,
    pub config_path: &'a Path,
    pub contract_path: &'a Path,
    /// The orch binary workers call for `orch report` / `orch ci status`.
    pub orch_exe: &'a Path,
}

#[derive(Debug, thiserror::Error)]
pub enum SuperviseError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("no worker {0}")]
    UnknownWorker(String),
    #[error("worker {id} is already supervised by pid {pid}")]
    AlreadySupervised { id: String, pid: i64 },
    #[error("cannot start worker {id} ({argv}): {source}")]
    Start {
        id: String,
        argv: String,
        source: std::io::Error,
    },
}

/// The session directory of a worker: prompt, CI guide, worker.log, supervisor.log.
pub fn session_dir(state_dir: &Path, worker: &str) -> PathBuf {
    state_dir.join(worker)
}

enum Msg {
    Signal(LineSignal, String),
    Activity,
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

/// Reads one stream of the worker until EOF. Runs on its own thread.
fn pump(
    mut stream: impl Read,
    tx: SyncSender<Msg>,
    log: Arc<Mutex<LogSink>>,
    patterns: Vec<String>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut line: Vec<u8> = Vec::with_capacity(1024);
    let mut last_activity = std::time::Instant::now() - Duration::from_secs(10);
    loop {
        let n = match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        log.lock().expect("log lock").write(&buf[..n]);
        for &b in &buf[..n] {
            if b == b'\n' {
                let text = String::from_utf8_lossy(&line).into_owned();
                line.clear();
                if let Some(sig) = parse_line(&text, &patterns) {
                    // Blocking send: if the supervisor is busy the worker waits on its pipe,
                    // which is what bounds memory.
                    if tx.send(Msg::Signal(sig, text)).is_err() {
                        return;
                    }
                }
            } else if line.len() < MAX_LINE {
                line.push(b);
            }
        }
        if last_activity.elapsed() >= Duration::from_secs(1) {
            last_activity = std::time::Instant::now();
            let _ = tx.try_send(Msg::Activity);
        }
    }
    if !line.is_empty() {
        let text = String::from_utf8_lossy(&line).into_owned();
        if let Some(sig) = parse_line(&text, &patterns) {
            let _ = tx.send(Msg::Signal(sig, text));
        }
    }
}

/// How a worker's process group is stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// SIGKILL to the whole group at once (permission rule, lost lease).
    Kill,
    /// SIGTERM to the group, `worker.stop_grace`, then SIGKILL (timeout, cancel).
    Terminate,
    /// DONE: give the worker the grace period to exit by itself first.
    LetFinish,
}

/// A CI query for the CI thread.
struct CiQuery {
    /// Numbers the query; its answer carries the number back.
    n: u64,
    repo: crate::config::Repo,
    sha: String,
    pushed_ms: Option<i64>,
}

/// (query number, SHA, result).
type CiAnswer = (u64, String, Result<(Verdict, Vec<CiRun>), ForgeError>);

/// Runs CI queries off the main loop: a slow or failing forge (timeouts, retries with backoff)
/// must never delay reading the worker's output or the permission rule.
fn spawn_ci_thread<F: Forge + 'static>(
    follower: Arc<CiFollower<F>>,
) -> (Sender<CiQuery>, Receiver<CiAnswer>) {
    let (qtx, qrx) = channel::<CiQuery>();
    let (atx, arx) = channel::<CiAnswer>();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a current-thread runtime builds");
        while let Ok(q) = qrx.recv() {
            let r = rt.block_on(follower.poll(&q.repo, &q.sha, q.pushed_ms, now_ms()));
            if atx.send((q.n, q.sha, r)).is_err() {
                return;
            }
        }
    });
    (qtx, arx)
}

/// The outcome of a claim that will be answered later.
const DEFERRED: &str = "deferred";

/// How long a DONE claim waits for a fresh verdict before it is judged on what is known.
const DONE_VERDICT_WAIT_MS: i64 = 60_000;

/// A DONE claim waiting for the answer of a CI query sent after it was made.
struct PendingDone {
    via: Channel,
    request: Option<i64>,
    /// Only an answer to a query numbered above this is fresh enough to judge the claim.
    after_query: u64,
    deadline_ms: i64,
}

struct Supervisor<'a, F: Forge> {
    env: &'a Env<'a>,
    follower: Arc<CiFollower<F>>,
    ci_tx: Sender<CiQuery>,
    ci_rx: Receiver<CiAnswer>,
    /// The query the CI thread is answering: (SHA, sent at, its number).
    ci_in_flight: Option<(String, i64, u64)>,
    /// How many CI queries were sent so far (numbers the queries).
    ci_sent: u64,
    /// DONE claims waiting for a fresh verdict.
    pending_done: Vec<PendingDone>,
    /// Another supervisor took the worker over: this one must stop without acting.
    lease_lost: bool,
    store: Store,
    w: WorkerRecord,
    child: Option<GroupChild>,
    rx: Option<Receiver<Msg>>,
    next_poll_ms: i64,
    forge_failures: u32,
    forge_alerted: bool,
    last_renew_ms: i64,
    last_checkpoint_ms: i64,
    dirty: bool,
    /// The worktree's HEAD when last looked at: a new commit is progress.
    last_head: Option<String>,
    last_head_check_ms: i64,
}

/// Supervises worker `id` until it ends: returns its final (or stopping) milestone.
pub fn supervise<F: Forge + 'static>(
    env: &Env,
    follower: Arc<CiFollower<F>>,
    id: &str,
) -> Result<Milestone, SuperviseError> {
    supervise_then(env, follower, id, || {})
}

/// Like [`supervise`], calling `on_claimed` once this process holds the worker's lease (the
/// resume pass a supervisor runs for other workers must not see its own worker as orphaned).
pub fn supervise_then<F: Forge + 'static>(
    env: &Env,
    follower: Arc<CiFollower<F>>,
    id: &str,
    on_claimed: impl FnOnce() + Send,
) -> Result<Milestone, SuperviseError> {
    let mut store = Store::open(env.state_dir)?;
    let me = std::process::id() as i64;
    let my_start = crate::process::proc_stat(me as i32).map(|s| s.start_ticks as i64);
    // The process that started us (spawn, resume) hands its lease over.
    let handoff: Option<i64> = std::env::var(LEASE_FROM_ENV)
        .ok()
        .and_then(|v| v.parse().ok());
    // Claim the lease: exactly one supervisor per worker.
    let w = store.write(|tx| {
        let Some(w) = ws::get_worker(tx, id)? else {
            return Ok(Err(SuperviseError::UnknownWorker(id.to_string())));
        };
        if let Some(pid) = w.supervisor_pid
            && pid != me
            && Some(pid) != handoff
            && w.lease_until_ms.unwrap_or(0) > now_ms()
            && crate::process::process_alive(pid as i32, w.supervisor_start.map(|s| s as u64))
        {
            return Ok(Err(SuperviseError::AlreadySupervised {
                id: id.to_string(),
                pid,
            }));
        }
        ws::claim_lease(tx, id, me, my_start, now_ms() + LEASE_MS)?;
        Ok(Ok(ws::get_worker(tx, id)?.expect("just read")))
    })??;
    // Orphans of the worker (processes it started that outlived their parent) are reparented
    // to us rather than to init, so we can reap them: no zombies after a worker ends.
    let _ = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
    let (ci_tx, ci_rx) = spawn_ci_thread(follower.clone());
    let s = Supervisor {
        env,
        follower,
        ci_tx,
        ci_rx,
        ci_in_flight: None,
        ci_sent: 0,
        pending_done: Vec::new(),
        lease_lost: false,
        store,
        w,
        child: None,
        rx: None,
        next_poll_ms: 0,
        forge_failures: 0,
        forge_alerted: false,
        last_renew_ms: now_ms(),
        last_checkpoint_ms: now_ms(),
        dirty: false,
        last_head: None,
        last_head_check_ms: 0,
    };
    // `on_claimed` (the resume pass for other orphans) runs beside supervision, not before it:
    // it may wait for the supervisors it starts to take over, and meanwhile this worker must
    // start and this lease be renewed. The scope joins it before the process can exit, so its
    // claims are handed over, never dropped.
    std::thread::scope(|scope| {
        scope.spawn(on_claimed);
        // Owned by this closure: should supervision panic, unwinding drops it here (its worker
        // group is killed) before the scope waits for the resume pass.
        let mut s = s;
        let result = s.run();
        s.finish();
        result
    })
}

impl<F: Forge + 'static> Supervisor<'_, F> {
    fn run(&mut self) -> Result<Milestone, SuperviseError> {
        if self.w.milestone().is_terminal() {
            return Ok(self.w.milestone());
        }
        if matches!(self.w.milestone(), Milestone::Working | Milestone::FixingCi) {
            self.start_worker()?;
        }
        self.checkpoint();
        let mut last_tick = 0i64;
        let mut last_inbox = 0i64;
        loop {
            self.drain_output(Duration::from_millis(100));
            let now = now_ms();
            let exited = match &mut self.child {
                Some(child) => child.try_wait().ok().flatten(),
                None => None,
            };
            if let Some(status) = exited {
                // Sweep the group (background processes the worker left behind must not
                // outlive it; with them gone the readers reach EOF), then take every line the
                // readers still hold: a worker's last lines are often its last claim, and up
                // to a channel's worth of them can still be queued.
                if let Some(mut child) = self.child.take() {
                    let _ = child.terminate(Duration::from_millis(500));
                }
                self.reap_orphans();
                // Bounded (a process that left the group may hold the pipe) yet well inside the lease.
                let until = std::time::Instant::now() + Duration::from_secs(10);
                while !self.drain_output(Duration::from_millis(50))
                    && std::time::Instant::now() < until
                {
                    if now_ms() - self.last_renew_ms >= RENEW_EVERY_MS && !self.renew_lease() {
                        break; // lost: the check below stops this supervisor
                    }
                }
                self.rx = None;
                let code = status.code();
                self.set_worker_exited(code);
                self.apply(Event::WorkerExited { code }, None);
            }
            if now - last_inbox >= 250 {
                last_inbox = now;
                self.process_requests();
            }
            self.take_ci_answers();
            if self.should_poll(now) {
                self.poll_ci(false);
            }
            self.judge_overdue_done_claims(now);
            if now - last_tick >= 1000 {
                last_tick = now;
                self.reap_orphans();
                self.notice_commits(now);
                self.apply(Event::Tick, None);
                if self.dirty {
                    self.persist_progress();
                }
                if now - self.last_checkpoint_ms
                    >= self.env.contract.checkpoint_interval.as_millis() as i64
                {
                    self.checkpoint();
                }
                if self.lease_lost
                    || (now - self.last_renew_ms >= RENEW_EVERY_MS && !self.renew_lease())
                {
                    self.lease_lost = true;
                    tracing::warn!(worker = %self.w.id, "lease taken over by another supervisor; stopping");
                    self.stop_worker(Stop::Kill);
                    return Ok(self.w.milestone());
                }
            }
            if self.child.is_none() && self.done_supervising() {
                return Ok(self.w.milestone());
            }
        }
    }

    /// Nothing left to do once the worker is gone, unless CI for a pushed SHA is undecided.
    /// `no_run` (no push run within `ci.start_timeout`) needs a new push, which only a worker
    /// can make: stop, so that `orch resume` gives it to a replacement (a push whose
    /// post-receive hook died with its worker never gets a run on the local forge).
    fn done_supervising(&self) -> bool {
        let p = &self.w.progress;
        if p.milestone.is_terminal() {
            return true;
        }
        p.milestone != Milestone::PushedToCi
            || p.verdict
                .is_some_and(|v| v.is_terminal() || v == VerdictKind::NoRun)
    }

    fn start_worker(&mut self) -> Result<(), SuperviseError> {
        let env = self.env;
        let dir = session_dir(env.state_dir, &self.w.id);
        let _ = std::fs::create_dir_all(&dir);
        let argv = &env.config.worker.command;
        let prompt = std::fs::read(dir.join("prompt.md")).unwrap_or_default();
        // The guard leads the group and takes it down if this supervisor dies (see process.rs).
        let mut cmd = std::process::Command::new(env.orch_exe);
        cmd.arg(crate::process::GUARD_COMMAND)
            .arg("--parent")
            .arg(std::process::id().to_string())
            .arg("--")
            .args(argv)
            .current_dir(&self.w.worktree)
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
        cmd.env("ORCH_WORKER_ID", &self.w.id)
            .env("ORCH_REPO", &self.w.repo)
            .env("ORCH_TASK", &self.w.task)
            .env("ORCH_CI_GUIDE", dir.join("ci-guide.md"))
            .env("ORCH_STATE_DIR", env.state_dir)
            .env("ORCH_CONFIG", env.config_path)
            .env("ORCH_CONTRACT", env.contract_path)
            .env("ORCH_BRANCH", &self.w.branch)
            .env("ORCH_PUSH_REMOTE", &self.w.remote)
            .env("ORCH_BIN", env.orch_exe);
        let mut child = spawn_in_group(
            &mut cmd,
            &GroupOptions {
                die_with_parent: true,
            },
        )
        .map_err(|source| SuperviseError::Start {
            id: self.w.id.clone(),
            argv: argv.join(" "),
            source,
        })?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("worker.log"))
            .map_err(|source| SuperviseError::Start {
                id: self.w.id.clone(),
                argv: argv.join(" "),
                source,
            })?;
        let log = Arc::new(Mutex::new(LogSink {
            written: log.metadata().map(|m| m.len()).unwrap_or(0),
            file: log,
            truncated: false,
        }));
        let (tx, rx) = sync_channel(256);
        let patterns = env.contract.permission.patterns.clone();
        let c = child.child_mut();
        if let Some(mut stdin) = c.stdin.take() {
            // A worker that never reads its stdin must not block the supervisor, and one that
            // exits before reading it must not kill it: orch runs with SIGPIPE's default
            // disposition (main.rs), so the write must see EPIPE instead. SIGPIPE from a
            // write is thread-directed: blocking it in this thread alone is enough.
            std::thread::spawn(move || {
                block_sigpipe_in_this_thread();
                let _ = stdin.write_all(&prompt);
            });
        }
        if let Some(out) = c.stdout.take() {
            let (tx, log, pats) = (tx.clone(), log.clone(), patterns.clone());
            std::thread::spawn(move || pump(out, tx, log, pats));
        }
        if let Some(err) = c.stderr.take() {
            std::thread::spawn(move || pump(err, tx, log, patterns));
        }
        let pid = child.pid() as i64;
        let id = self.w.id.clone();
        self.store.write(|tx| {
            tx.execute(
                "UPDATE workers SET worker_pid = ?2, worker_running = 1, exit_code = NULL WHERE id = ?1",
                rusqlite::params![id, pid],
            )?;
            ws::add_event(tx, &id, "started", self.w.progress.milestone, &format!("worker pid {pid}"))
        })?;
        self.w.worker_pid = Some(pid);
        self.w.worker_running = true;
        self.child = Some(child);
        self.rx = Some(rx);
        tracing::info!(worker = %self.w.id, pid, "worker started");
        Ok(())
    }

    /// A new commit in the worktree counts as progress (timeouts extend on recent progress).
    fn notice_commits(&mut self, now: i64) {
        if self.child.is_none() || now - self.last_head_check_ms < 5_000 {
            return;
        }
        self.last_head_check_ms = now;
        let Ok(head) = gitops::head(Path::new(&self.w.worktree)) else {
            return;
        };
        let changed = self.last_head.as_ref().is_some_and(|h| *h != head);
        self.last_head = Some(head);
        if changed {
            self.apply(Event::Commit, None);
            self.dirty = true;
        }
    }

    /// Reaps zombie children other than the worker leader (whose status `GroupChild` owns).
    fn reap_orphans(&self) {
        let me = std::process::id() as i32;
        let leader = self.child.as_ref().map(|c| c.pid() as i32);
        let my_group = rustix::process::getpgrp().as_raw_nonzero().get();
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return;
        };
        for entry in dir.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|n| n.parse::<i32>().ok())
            else {
                continue;
            };
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

    fn set_worker_exited(&mut self, code: Option<i32>) {
        self.w.worker_running = false;
        self.w.exit_code = code.map(i64::from);
        let id = self.w.id.clone();
        let m = self.w.progress.milestone;
        let _ = self.store.write(|tx| {
            tx.execute(
                "UPDATE workers SET worker_running = 0, exit_code = ?2 WHERE id = ?1",
                rusqlite::params![id, code],
            )?;
            ws::add_event(
                tx,
                &id,
                "exited",
                m,
                &format!(
                    "exit code {}",
                    code.map(|c| c.to_string()).unwrap_or("-".into())
                ),
            )
        });
    }

    /// Applies what the readers sent (waiting up to `wait` for the first message). Returns
    /// true once both readers are done (EOF) and nothing is left.
    fn drain_output(&mut self, wait: Duration) -> bool {
        let Some(rx) = &self.rx else {
            std::thread::sleep(wait);
            return true;
        };
        let mut msgs = Vec::new();
        let mut closed = false;
        match rx.recv_timeout(wait) {
            Ok(m) => msgs.push(m),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => closed = true,
        }
        while msgs.len() < 256 {
            match rx.try_recv() {
                Ok(m) => msgs.push(m),
                Err(_) => break,
            }
        }
        for m in msgs {
            match m {
                Msg::Activity => {
                    self.w.progress.last_progress_ms = now_ms();
                    self.dirty = true;
                }
                Msg::Signal(LineSignal::PermissionDenial, line) => {
                    self.apply(
                        Event::PermissionDenial {
                            line: truncate(&line, 300),
                        },
                        None,
                    );
                }
                Msg::Signal(LineSignal::Milestone { milestone, rest }, _) => {
                    let sha = if milestone == Milestone::PushedToCi {
                        sha_in(&rest)
                    } else {
                        None
                    };
                    self.claim(milestone, sha, rest, Channel::Output, None);
                }
            }
        }
        if closed {
            // Both readers are done (the worker closed its output or exited): later calls
            // sleep instead of spinning on a disconnected channel.
            self.rx = None;
        }
        closed
    }

    /// A worker's claim from either channel. Returns a one-line outcome for `orch report`.
    fn claim(
        &mut self,
        m: Milestone,
        sha: Option<String>,
        note: String,
        via: Channel,
        request: Option<i64>,
    ) -> String {
        let event = match m {
            Milestone::PushedToCi => self.verify_push(sha, via),
            Milestone::Done => {
                let p = &self.w.progress;
                if p.milestone == Milestone::PushedToCi
                    && p.verdict != Some(VerdictKind::Green)
                    && p.tracked_sha.is_some()
                {
                    // Judge DONE against a fresh look at CI, not a stale one: the claim waits
                    // for the answer of a query sent after it (see take_ci_answers) — not
                    // one already in flight, which may have read the forge before CI ended.
                    self.pending_done.push(PendingDone {
                        via,
                        request,
                        after_query: self.ci_sent,
                        deadline_ms: now_ms() + DONE_VERDICT_WAIT_MS,
                    });
                    self.poll_ci(true);
                    return DEFERRED.to_string();
                }
                Event::DoneClaim { via }
            }
            Milestone::Working
            | Milestone::FixingCi
            | Milestone::Blocked
            | Milestone::BlockedPermission => Event::Claim {
                milestone: m,
                note: truncate(&note, 500),
                via,
            },
            other => {
                let detail = format!("{other} cannot be reported by a worker");
                self.record_violation("illegal_claim", &detail);
                return format!("refused: {detail}");
            }
        };
        self.apply(event, request)
    }

    /// Resolves the claimed SHA in the worktree and checks it is on the remote.
    fn verify_push(&mut self, claimed: Option<String>, via: Channel) -> Event {
        let wt = PathBuf::from(&self.w.worktree);
        let spec = claimed.clone().unwrap_or_else(|| "HEAD".to_string());
        let full = match gitops::resolve(&wt, &spec) {
            Ok(s) => s,
            Err(e) => {
                return Event::PushRejected {
                    claimed: spec,
                    reason: e.to_string(),
                    via,
                };
            }
        };
        if let Err(e) = gitops::fetch(&wt, &self.w.remote) {
            return Event::PushRejected {
                claimed: spec,
                reason: format!("could not fetch {} to verify the push: {e}", self.w.remote),
                via,
            };
        }
        match gitops::on_remote(&wt, &self.w.remote, &full) {
            Ok(Some(_)) => {
                let pushed_ms = gitops::commit_time_ms(&wt, &full).unwrap_or_else(|_| now_ms());
                Event::Push {
                    sha: full,
                    pushed_ms: pushed_ms.min(now_ms()),
                    via,
                }
            }
            Ok(None) => Event::PushRejected {
                claimed: spec,
                reason: format!(
                    "commit {full} is not on any branch of remote {}",
                    self.w.remote
                ),
                via,
            },
            Err(e) => Event::PushRejected {
                claimed: spec,
                reason: e.to_string(),
                via,
            },
        }
    }

    fn should_poll(&self, now: i64) -> bool {
        let p = &self.w.progress;
        p.tracked_sha.is_some()
            && !p.milestone.is_terminal()
            && !p.verdict.is_some_and(VerdictKind::is_terminal)
            && now >= self.next_poll_ms
    }

    /// Sends a CI query for the tracked SHA to the CI thread (one at a time).
    fn poll_ci(&mut self, force: bool) {
        let Some(sha) = self.w.progress.tracked_sha.clone() else {
            return;
        };
        if self
            .ci_in_flight
            .as_ref()
            .is_some_and(|(s, _, _)| *s == sha)
        {
            return;
        }
        if !force && !self.should_poll(now_ms()) {
            return;
        }
        let Some(repo) = self.env.config.repo(&self.w.repo).cloned() else {
            return;
        };
        if force {
            // A DONE claim wants the forge's answer, not a cached one.
            self.follower.forget(&repo.name, &sha);
        }
        let q = CiQuery {
            n: self.ci_sent + 1,
            repo,
            sha: sha.clone(),
            pushed_ms: self.w.progress.pushed_ms,
        };
        if self.ci_tx.send(q).is_ok() {
            self.ci_sent += 1;
            self.ci_in_flight = Some((sha, now_ms(), self.ci_sent));
        }
    }

    /// Feeds the CI thread's answers to the machine, then judges DONE claims that waited.
    fn take_ci_answers(&mut self) {
        while let Ok((answered, sha, result)) = self.ci_rx.try_recv() {
            if self
                .ci_in_flight
                .as_ref()
                .is_some_and(|(_, _, n)| *n == answered)
            {
                self.ci_in_flight = None;
            }
            let about_tracked = self.w.progress.tracked_sha.as_deref() == Some(sha.as_str());
            let failed = result.is_err();
            let interval = self.env.config.ci.poll_interval.as_millis() as i64;
            match result {
                Ok((v, runs)) => {
                    self.forge_failures = 0;
                    self.forge_alerted = false;
                    self.next_poll_ms = now_ms() + interval;
                    // The SHA's own record always gets the answer; the machine only hears about
                    // the SHA it still tracks (a newer push may have replaced it meanwhile).
                    let id = self.w.id.clone();
                    let runs_json = serde_json::to_value(&runs).unwrap_or_default();
                    let _ = self.store.write(|tx| {
                        ws::record_verdict(
                            tx,
                            &id,
                            &sha,
                            v.kind.as_str(),
                            &v.detail,
                            &v.failed_jobs,
                            &runs_json,
                        )
                    });
                    if self.w.progress.tracked_sha.as_deref() != Some(sha.as_str()) {
                        continue;
                    }
                    self.apply(
                        Event::Verdict {
                            sha,
                            kind: v.kind,
                            failed_jobs: v.failed_jobs,
                            detail: v.detail,
                        },
                        None,
                    );
                }
                Err(e) => {
                    self.forge_failures += 1;
                    // Back off: blocking errors need a human; transient ones get longer pauses.
                    let factor = if e.is_blocking() {
                        6
                    } else {
                        1 + self.forge_failures.min(6) as i64
                    };
                    self.next_poll_ms = now_ms() + interval * factor;
                    let threshold = self.env.contract.deadlock.api_consecutive_failures;
                    if !self.forge_alerted && (e.is_blocking() || self.forge_failures >= threshold)
                    {
                        self.forge_alerted = true;
                        let kind = if matches!(e, ForgeError::Blocking { .. }) {
                            "forge_blocking"
                        } else {
                            "forge_unavailable"
                        };
                        let short = &sha[..10.min(sha.len())];
                        self.alert_only(
                            crate::milestone::Severity::Critical,
                            kind,
                            &format!("CI for {short} cannot be read: {e}"),
                        );
                    }
                    tracing::warn!(worker = %self.w.id, error = %e, "CI poll failed");
                }
            }
            // Claims this answer is fresh for are judged now (on what is known, if the forge
            // failed); the others wait for the query sent next.
            let (fresh, waiting): (Vec<_>, Vec<_>) = std::mem::take(&mut self.pending_done)
                .into_iter()
                .partition(|d| answered > d.after_query && (about_tracked || failed));
            self.pending_done = waiting;
            for d in fresh {
                self.apply(Event::DoneClaim { via: d.via }, d.request);
            }
            if !self.pending_done.is_empty() {
                self.poll_ci(true);
            }
        }
    }

    /// DONE claims whose fresh verdict did not come in time are judged on what is known.
    fn judge_overdue_done_claims(&mut self, now: i64) {
        if self.pending_done.iter().any(|d| now >= d.deadline_ms) {
            let (due, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut self.pending_done)
                .into_iter()
                .partition(|d| now >= d.deadline_ms);
            self.pending_done = keep;
            for d in due {
                self.apply(Event::DoneClaim { via: d.via }, d.request);
            }
        }
    }

    fn process_requests(&mut self) {
        let id = self.w.id.clone();
        let Ok(reqs) = self.store.read(|tx| ws::pending_requests(tx, &id)) else {
            return;
        };
        for r in reqs {
            if self.pending_done.iter().any(|d| d.request == Some(r.id)) {
                continue; // a deferred DONE report, answered when its fresh verdict arrives
            }
            let outcome = match r.kind.as_str() {
                "cancel" => {
                    let by = r.by.clone().unwrap_or_else(|| "operator".into());
                    let reason = r.note.clone().unwrap_or_default();
                    self.apply(Event::Cancel { by, reason }, Some(r.id))
                }
                "report" => match r.milestone.as_deref().and_then(Milestone::parse) {
                    Some(m) => {
                        let note = r.note.clone().unwrap_or_default();
                        let note = match &r.job {
                            Some(j) => format!("{j} - {note}"),
                            None => note,
                        };
                        self.claim(m, r.sha.clone(), note, Channel::Report, Some(r.id))
                    }
                    None => "refused: unknown milestone".to_string(),
                },
                other => format!("refused: unknown request kind {other}"),
            };
            if outcome == DEFERRED {
                continue; // answered when the fresh verdict arrives
            }
            let _ = self.store.write(|tx| {
                // apply() may already have written the outcome; only fill it if missing.
                match ws::get_request(tx, r.id)? {
                    Some(req) if req.processed_ms.is_none() => {
                        ws::finish_request(tx, r.id, &outcome)
                    }
                    _ => Ok(()),
                }
            });
        }
    }

    /// Runs one event through the state machine, persists the result in one transaction,
    /// then carries out the effects. Returns a one-line outcome.
    fn apply(&mut self, event: Event, request: Option<i64>) -> String {
        let now = now_ms();
        let before = self.w.progress.clone();
        let (after, effects) = step(self.env.contract, &self.w.id, &before, &event, now);
        if after == before && effects.is_empty() {
            if matches!(event, Event::Claim { .. } | Event::Push { .. }) {
                return "accepted".into();
            }
            return "no change".into();
        }
        if effects.is_empty() && request.is_none() {
            // Bookkeeping only (the time of the last progress, a repeated claim): written with
            // the next tick, so a worker repeating itself costs no write per line.
            self.w.progress = after;
            self.dirty = true;
            return "accepted".into();
        }
        self.w.progress = after.clone();
        let mut outcome = String::from("accepted");
        let mut alerts: Vec<AlertRecord> = Vec::new();
        let mut checkpoint = false;
        let id = self.w.id.clone();
        let repo = self.w.repo.clone();
        for e in &effects {
            match e {
                Effect::Transition { from, to, .. } => {
                    outcome = format!("accepted: {from} -> {to}")
                }
                Effect::Violation { kind, detail } => {
                    outcome = format!("refused ({kind}): {detail}")
                }
                Effect::Alert {
                    severity,
                    kind,
                    message,
                } => alerts.push(AlertRecord {
                    id: 0,
                    at_ms: now,
                    severity: severity.as_str().into(),
                    worker_id: Some(id.clone()),
                    repo: Some(repo.clone()),
                    kind: kind.clone(),
                    message: message.clone(),
                }),
                Effect::Checkpoint => checkpoint = true,
                _ => {}
            }
        }
        // The permission rule's stop lands before anything is written: the group gets no more
        // time to act while SQLite and the checkpoint are busy. (stop_worker below reaps it.)
        if effects.iter().any(|e| {
            matches!(
                e,
                Effect::StopWorker {
                    immediate: true,
                    ..
                }
            )
        }) {
            self.signal_worker(Signal::KILL);
        }
        let outcome_for_tx = outcome.clone();
        let me = std::process::id() as i64;
        let write = self.store.write(|tx| {
            if !ws::save_progress_as(tx, &id, me, &after)? {
                return Ok(false);
            }
            for e in &effects {
                match e {
                    Effect::Transition { from, to, reason } => {
                        ws::add_event(
                            tx,
                            &id,
                            "transition",
                            *to,
                            &format!("{from} -> {to}: {reason}"),
                        )?;
                    }
                    Effect::Violation { kind, detail } => {
                        ws::add_event(
                            tx,
                            &id,
                            "violation",
                            after.milestone,
                            &format!("{kind}: {detail}"),
                        )?;
                    }
                    Effect::ReleaseLock { reason } => {
                        release_in(tx, &id, Some(reason), Some("orch"))?;
                        ws::add_event(tx, &id, "lock_released", after.milestone, reason)?;
                    }
                    Effect::Track { sha } => {
                        ws::record_push(tx, &id, sha, after.pushed_ms.unwrap_or(now))?;
                    }
                    _ => {}
                }
            }
            for a in &alerts {
                ws::add_alert(tx, a)?;
            }
            if let Some(r) = request {
                ws::finish_request(tx, r, &outcome_for_tx)?;
            }
            Ok(true)
        });
        match write {
            Ok(true) => {}
            Ok(false) => {
                // Another supervisor owns the worker now (this one's lease expired): its state
                // is not ours to change, nor its worker ours to act on.
                self.w.progress = before;
                self.lease_lost = true;
                return "refused: its supervisor lost its lease".into();
            }
            Err(e) => tracing::error!(worker = %id, error = %e, "could not persist worker state"),
        }
        self.dirty = false;
        crate::alerts::append_jsonl(self.env.state_dir, &alerts);
        for e in &effects {
            match e {
                Effect::Transition { from, to, reason } => {
                    tracing::info!(worker = %id, "{from} -> {to}: {reason}");
                }
                Effect::StopWorker { immediate, reason } => {
                    tracing::info!(worker = %id, reason, "stopping worker");
                    let how = if *immediate {
                        Stop::Kill
                    } else if reason == "done" {
                        Stop::LetFinish
                    } else {
                        Stop::Terminate
                    };
                    self.stop_worker(how);
                }
                Effect::SuspendWorker => self.signal_worker(Signal::STOP),
                Effect::ContinueWorker => self.signal_worker(Signal::CONT),
                Effect::Track { sha } => {
                    if let Some(old) = &before.tracked_sha
                        && old != sha
                    {
                        self.follower.forget(&repo, old);
                    }
                    self.next_poll_ms = 0;
                }
                _ => {}
            }
        }
        if checkpoint {
            self.checkpoint();
        }
        outcome
    }

    fn record_violation(&mut self, kind: &str, detail: &str) {
        let id = self.w.id.clone();
        let m = self.w.progress.milestone;
        let _ = self
            .store
            .write(|tx| ws::add_event(tx, &id, "violation", m, &format!("{kind}: {detail}")));
    }

    fn alert_only(&mut self, severity: crate::milestone::Severity, kind: &str, message: &str) {
        let a = AlertRecord {
            id: 0,
            at_ms: now_ms(),
            severity: severity.as_str().into(),
            worker_id: Some(self.w.id.clone()),
            repo: Some(self.w.repo.clone()),
            kind: kind.into(),
            message: message.into(),
        };
        let _ = self.store.write(|tx| ws::add_alert(tx, &a).map(|_| ()));
        crate::alerts::append_jsonl(self.env.state_dir, std::slice::from_ref(&a));
    }

    /// Ends the worker's process group: at once (SIGKILL) or politely (SIGTERM → grace → SIGKILL).
    /// A worker that just reached DONE first gets the grace period to exit by itself.
    fn stop_worker(&mut self, how: Stop) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let grace = self.env.config.worker.stop_grace;
        let status = match how {
            Stop::Kill => {
                let _ = child.signal_group(Signal::KILL);
                child.terminate(Duration::from_millis(200))
            }
            Stop::Terminate => child.terminate(grace),
            Stop::LetFinish => match child.wait_timeout(grace) {
                Ok(Some(_)) => child.terminate(Duration::from_millis(200)),
                _ => child.terminate(grace),
            },
        };
        self.rx = None;
        self.reap_orphans();
        let code = status.ok().and_then(|s| s.code());
        self.set_worker_exited(code);
    }

    fn signal_worker(&mut self, sig: Signal) {
        if let Some(child) = &self.child {
            let _ = child.signal_group(sig);
        }
    }

    fn persist_progress(&mut self) {
        let id = self.w.id.clone();
        let p = self.w.progress.clone();
        let me = std::process::id() as i64;
        match self.store.write(|tx| ws::save_progress_as(tx, &id, me, &p)) {
            Ok(true) => self.dirty = false,
            Ok(false) => {
                self.dirty = false;
                self.lease_lost = true;
            }
            Err(_) => {}
        }
    }

    fn renew_lease(&mut self) -> bool {
        self.last_renew_ms = now_ms();
        let id = self.w.id.clone();
        let me = std::process::id() as i64;
        self.store
            .write(|tx| ws::set_lease(tx, &id, me, now_ms() + LEASE_MS))
            .unwrap_or(true) // a busy database is not a lost lease
    }

    /// Writes the checkpoint file from the database's view of the worker.
    fn checkpoint(&mut self) {
        self.last_checkpoint_ms = now_ms();
        let id = self.w.id.clone();
        let Ok((Some(w), pushes, held)) = self.store.read(|tx| {
            let w = ws::get_worker(tx, &id)?;
            let pushes = ws::pushes(tx, &id)?;
            let held: bool =
                tx.query_row("SELECT COUNT(*) FROM locks WHERE holder = ?1", [&id], |r| {
                    r.get::<_, i64>(0)
                })? > 0;
            Ok((w, pushes, held))
        }) else {
            return;
        };
        let cp = crate::checkpoint::build(&w, &pushes, held);
        if let Err(e) = crate::checkpoint::write(self.env.state_dir, &w, &cp) {
            tracing::error!(worker = %id, error = %e, "could not write checkpoint");
        }
    }

    /// Leaves the worker row consistent when the supervisor stops for any reason.
    fn finish(&mut self) {
        // DONE claims still waiting for a fresh verdict get their answer (on what is known)
        // rather than none; apply refuses them itself if the lease was lost.
        for d in std::mem::take(&mut self.pending_done) {
            self.apply(Event::DoneClaim { via: d.via }, d.request);
        }
        if self.child.is_some() {
            // Only reached on an error path: never leave a worker running unsupervised.
            self.stop_worker(Stop::Terminate);
        }
        if self.dirty {
            self.persist_progress();
        }
        let id = self.w.id.clone();
        let me = std::process::id() as i64;
        let _ = self.store.write(|tx| ws::set_lease(tx, &id, me, 0));
        self.checkpoint();
    }
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

fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

/// Initial progress for a new worker.
pub fn initial_progress(contract: &Contract) -> Progress {
    Progress::new(contract, now_ms())
}
