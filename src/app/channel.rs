//! The report channel: how a worker speaks to its own supervisor, identified by the kernel.
//!
//! Each supervisor listens on a Unix socket of its own (an abstract name with 128 random bits,
//! given to its worker as `ORCH_REPORT_SOCKET`). `orch report` run by the worker connects to it
//! and sends one JSON line; the supervisor asks the kernel who is speaking (`SO_PEERCRED`: the
//! peer's pid and uid, not a word the peer chose) and takes the report only from a process of
//! its own worker — a descendant of the worker's guard, in the cgroup of this supervisor's
//! life of the worker where it has one, running as the worker's uid. Anything else (another
//! worker pointing at this socket, a process that left the worker's cgroup) is refused and
//! raised as a critical alert by the supervisor. Environment variables name the socket, never
//! who speaks: `ORCH_WORKER_ID=<victim> orch report …` is refused by the victim's supervisor.
//!
//! A report taken here becomes a request row in the inbox like every other request (so the
//! journal rule and the answers stay one path), and the supervisor applies only report rows
//! its own channel queued: a report row written into the database by anyone else is refused
//! and alerted. Operator commands run from inside a worker are refused by the command itself
//! (`inside_worker`) and told to the worker's supervisor over the same socket.

use super::inbox::{self, ANSWER_WAIT};
pub use crate::report_wire::{
    CiQuestion, CommandOutput, GUARD_CHANNEL_ARG, GUARD_WORKER_ARG, GitService, MAX_MESSAGE,
    Message, RELAYING, Reply, SOCKET_ENV, send,
};
use crate::store::Store;
use crate::store::workers::RequestKind;
use std::collections::HashSet;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::fd::AsRawFd;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long a connection may take to send its message.
const READ_LIMIT: Duration = Duration::from_secs(10);
/// Connections handled at once; more wait in the listen backlog.
const MAX_AT_ONCE: usize = 8;

/// A process that spoke on a channel it does not belong to, or a report row nobody's
/// channel queued: the supervisor raises it as a critical alert.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trespass {
    pub kind: String,
    pub message: String,
}

/// Who may speak on a channel: the worker run the supervisor started last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Speaker {
    /// The guard's pid: every process of the worker descends from it (it is their subreaper).
    pub guard_pid: i32,
    /// The last two components of the worker's cgroup (`orch-<tag>/<id>.<pid>`), when it has one.
    pub cgroup_tail: Option<String>,
    /// The uid the worker runs as.
    pub uid: u32,
}

#[derive(Default)]
struct Shared {
    speaker: Mutex<Option<Speaker>>,
    /// Report rows this channel queued (the supervisor applies no other report row).
    queued: Mutex<HashSet<i64>>,
    trespasses: Mutex<Vec<Trespass>>,
}

/// The worker's remote on the local forge, reached through the channel when the worker runs
/// as an account of its own (it cannot read or write orch's files): the supervisor runs
/// `git receive-pack` / `upload-pack` on it as orch, and the remote's `pre-receive` hook judges
/// the push as the worker's (`PUSH_FOR_ENV`).
#[derive(Debug, Clone)]
pub struct GitRelay {
    /// The bare repository of the worker's repository on the local forge.
    pub remote: PathBuf,
    /// Where the hook writes why it refused a push (one file per push, this path plus a
    /// suffix): the supervisor raises the alert.
    pub refusals: PathBuf,
    /// The workers' branches (`orch/…`) it sees on the remote: its own, and those of the
    /// earlier attempts of its task it may build on (`store::supersede::earlier_branches`).
    /// Every other worker's branch is hidden from it (issue 34: workers do not read each
    /// other through orch).
    pub shown: Vec<String>,
}

use crate::report_wire::{PUSH_FOR_ENV, PUSH_REFUSALS_ENV};

/// How a supervisor answers its worker's CI questions (`Message::Ci`): by running `orch ci
/// status|logs` itself, as orch, for this state directory and configuration.
#[derive(Debug, Clone)]
pub struct CiAnswers {
    pub exe: PathBuf,
    pub config: PathBuf,
    /// The contract file, when it is not the built-in one.
    pub contract: Option<PathBuf>,
}

/// A supervisor's end of its worker's channel.
pub struct Channel {
    name: String,
    shared: Arc<Shared>,
}

impl Channel {
    /// Binds a fresh channel for worker `id` and serves it on a thread for the life of the
    /// process. `ring` wakes the supervisor when a trespass was queued for it.
    pub fn open(
        state_dir: &Path,
        id: &str,
        alert_window: Duration,
        relay: Option<GitRelay>,
        ci: Option<CiAnswers>,
        ring: impl Fn() + Send + Sync + 'static,
    ) -> io::Result<Channel> {
        let name = format!("orch-report-{}", random_hex()?);
        let addr = SocketAddr::from_abstract_name(name.as_bytes())?;
        let listener = UnixListener::bind_addr(&addr)?;
        let shared = Arc::new(Shared::default());
        let server = Server {
            state_dir: state_dir.to_path_buf(),
            id: id.to_string(),
            alert_window,
            relay,
            ci,
            shared: shared.clone(),
            ring: Arc::new(ring),
            busy: Arc::new(AtomicUsize::new(0)),
        };
        std::thread::Builder::new()
            .name("report-channel".into())
            .spawn(move || server.serve(listener))?;
        Ok(Channel {
            name: format!("@{name}"),
            shared,
        })
    }

    /// `ORCH_REPORT_SOCKET`'s value for the worker.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The worker run that may speak from now on.
    pub fn admit(&self, speaker: Speaker) {
        *lock(&self.shared.speaker) = Some(speaker);
    }

    /// Whether report row `request` came through this channel.
    pub fn queued(&self, request: i64) -> bool {
        lock(&self.shared.queued).contains(&request)
    }

    /// The trespasses seen since the last call.
    pub fn trespasses(&self) -> Vec<Trespass> {
        std::mem::take(&mut *lock(&self.shared.trespasses))
    }

    /// Records a trespass the supervisor found itself (e.g. a report row it did not queue).
    pub fn note(&self, t: Trespass) {
        lock(&self.shared.trespasses).push(t);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

struct Server {
    state_dir: PathBuf,
    id: String,
    alert_window: Duration,
    relay: Option<GitRelay>,
    ci: Option<CiAnswers>,
    shared: Arc<Shared>,
    ring: Arc<dyn Fn() + Send + Sync>,
    busy: Arc<AtomicUsize>,
}

/// What the server does with a connection after reading its message.
enum Next {
    Reply(Reply),
    /// Run git `service` on the worker's remote over this connection.
    Relay {
        service: GitService,
        protocol: Option<String>,
    },
}

impl Server {
    fn serve(self, listener: UnixListener) {
        let me = Arc::new(self);
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            // A report waits up to ANSWER_WAIT for the supervisor's answer: each connection
            // gets a thread, a bounded number at once.
            while me.busy.load(Ordering::SeqCst) >= MAX_AT_ONCE {
                std::thread::sleep(Duration::from_millis(20));
            }
            me.busy.fetch_add(1, Ordering::SeqCst);
            let server = me.clone();
            let spawned = std::thread::Builder::new()
                .name("report-conn".into())
                .spawn(move || {
                    server.handle(conn);
                    server.busy.fetch_sub(1, Ordering::SeqCst);
                });
            if spawned.is_err() {
                me.busy.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }

    fn handle(&self, mut conn: UnixStream) {
        let reply = match self.answer(&conn) {
            Ok(Next::Reply(r)) => r,
            Ok(Next::Relay { service, protocol }) => {
                self.relay(conn, service, protocol);
                return;
            }
            Err(outcome) => Reply {
                worker_id: self.id.clone(),
                output: None,
                state: "refused".into(),
                outcome,
            },
        };
        let _ = write_reply(&mut conn, &reply);
    }

    /// Runs git `service` on the worker's remote as orch, its stdin and stdout the connection's;
    /// a push the remote's hook refused becomes a `push_refused` alert.
    fn relay(&self, mut conn: UnixStream, service: GitService, protocol: Option<String>) {
        let Some(relay) = &self.relay else {
            return;
        };
        let refusals = PathBuf::from(format!(
            "{}.{}",
            relay.refusals.display(),
            random_hex().unwrap_or_default()
        ));
        let mut cmd = crate::gitops::service_command_showing(
            service.as_str(),
            &relay.remote,
            Some(&relay.shown),
        );
        if service == GitService::ReceivePack {
            cmd.env(PUSH_FOR_ENV, &self.id)
                .env(PUSH_REFUSALS_ENV, &refusals);
        }
        if let Some(p) = protocol.filter(|p| crate::report_wire::protocol_ok(p)) {
            cmd.env("GIT_PROTOCOL", p);
        }
        cmd.stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped());
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                let _ = write_reply(
                    &mut conn,
                    &Reply {
                        worker_id: self.id.clone(),
                        output: None,
                        state: "refused".into(),
                        outcome: format!("orch could not start git {}: {e}", service.as_str()),
                    },
                );
                return;
            }
        };
        let opened = write_reply(
            &mut conn,
            &Reply {
                worker_id: self.id.clone(),
                output: None,
                state: RELAYING.into(),
                outcome: format!("git {} on the worker's remote", service.as_str()),
            },
        );
        let (Some(mut stdin), Some(mut stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return;
        };
        // The worker's side may pause for as long as its git computes a pack.
        let _ = conn.set_read_timeout(None);
        if opened.is_ok()
            && let Ok(mut from_worker) = conn.try_clone()
        {
            let upstream = std::thread::spawn(move || {
                let _ = crate::report_wire::pass(&mut from_worker, &mut stdin);
                // stdin dropped here: git sees the end of the worker's side.
            });
            let _ = crate::report_wire::pass(&mut stdout, &mut conn);
            let _ = conn.shutdown(std::net::Shutdown::Both);
            let _ = upstream.join();
        } else {
            let _ = child.kill();
        }
        let _ = child.wait();
        if let Ok(text) = std::fs::read_to_string(&refusals) {
            let _ = std::fs::remove_file(&refusals);
            let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
            if !lines.is_empty() {
                self.trespass(
                    "push_refused",
                    format!(
                        "worker {} pushed where it may not (refused): {}",
                        self.id,
                        crate::text::escape(&lines.join("; "))
                    ),
                );
            }
        }
    }

    fn trespass(&self, kind: &str, message: String) {
        lock(&self.shared.trespasses).push(Trespass {
            kind: kind.into(),
            message,
        });
        (self.ring)();
    }

    fn answer(&self, conn: &UnixStream) -> Result<Next, String> {
        let cred = peer_cred(conn).map_err(|e| format!("cannot tell who is speaking: {e}"))?;
        let _ = conn.set_read_timeout(Some(READ_LIMIT));
        let mut text = String::new();
        BufReader::new(conn.take(MAX_MESSAGE))
            .read_line(&mut text)
            .map_err(|e| format!("cannot read the message: {e}"))?;
        let message: Message = serde_json::from_str(text.trim_end())
            .map_err(|e| format!("not a message orch understands: {e}"))?;
        let speaker = lock(&self.shared.speaker).clone();
        if let Err(why) = belongs(&cred, speaker.as_ref()) {
            let what = match &message {
                Message::Report { milestone, .. } => format!("report {milestone}"),
                Message::Fatal { .. } => "report FATAL".to_string(),
                Message::RefusedCommand { command } => format!("say it was refused `{command}`"),
                Message::RefusedPush { repo, .. } => format!("say a push to {repo} was refused"),
                Message::Git { service, .. } => format!("run git {}", service.as_str()),
                Message::Ci(_) => "ask about CI".to_string(),
            };
            self.trespass(
                "foreign_report",
                format!(
                    "a process that is not worker {}'s (pid {}, uid {}: {why}) tried to {what} on its channel; refused",
                    self.id, cred.pid, cred.uid
                ),
            );
            return Err(format!(
                "refused: this channel belongs to worker {}, and the kernel says you are not one of its processes ({why})",
                self.id
            ));
        }
        match message {
            Message::RefusedCommand { command } => {
                self.trespass(
                    "operator_command_from_worker",
                    format!(
                        "worker {} tried to run an operator command: `{command}` (refused: operator commands do not run inside a worker)",
                        self.id
                    ),
                );
                Ok(Next::Reply(Reply {
                    worker_id: self.id.clone(),
                    output: None,
                    state: "refused".into(),
                    outcome:
                        "operator commands do not run inside a worker; your supervisor was told"
                            .into(),
                }))
            }
            Message::RefusedPush { repo, refusals } => {
                self.trespass(
                    "push_refused",
                    format!(
                        "worker {} pushed where it may not, to {repo}'s remote (refused): {}",
                        self.id,
                        crate::text::escape(&refusals.join("; "))
                    ),
                );
                Ok(Next::Reply(Reply {
                    worker_id: self.id.clone(),
                    output: None,
                    state: "refused".into(),
                    outcome: "the push was refused; your supervisor was told".into(),
                }))
            }
            Message::Ci(question) => Ok(Next::Reply(self.ci(&question)?)),
            Message::Fatal { reason } => {
                self.report(RequestKind::Fatal { reason }).map(Next::Reply)
            }
            Message::Git { service, protocol } => {
                if self.relay.is_none() {
                    return Err(format!(
                        "worker {} reaches its remote directly: there is no git relay on this channel",
                        self.id
                    ));
                }
                Ok(Next::Relay { service, protocol })
            }
            Message::Report {
                milestone,
                sha,
                job,
                note,
            } => self
                .report(RequestKind::Report {
                    milestone,
                    sha,
                    job,
                    note,
                })
                .map(Next::Reply),
        }
    }

    /// Runs the worker's CI question as orch (`orch ci status|logs`) and answers with what it
    /// printed. The worker's identity goes with it (for the push history `ci status` keeps).
    fn ci(&self, question: &CiQuestion) -> Result<Reply, String> {
        let Some(ci) = &self.ci else {
            return Err(
                "this supervisor answers no CI questions: ask `orch ci status` directly".into(),
            );
        };
        // Its own commits only: another worker's CI log is that worker's (`ci_scope`).
        let (CiQuestion::Status { repo, sha, .. } | CiQuestion::Logs { repo, sha, .. }) = question;
        super::ci_scope::own_commit(
            &self.state_dir,
            &self.id,
            self.relay.as_ref().map(|r| r.remote.as_path()),
            repo,
            sha,
        )?;
        let mut cmd = std::process::Command::new(&ci.exe);
        cmd.arg("--config")
            .arg(&ci.config)
            .arg("--state-dir")
            .arg(&self.state_dir);
        if let Some(c) = &ci.contract {
            cmd.arg("--contract").arg(c);
        }
        cmd.args(question.args())
            .env_clear()
            .env("ORCH_WORKER_ID", &self.id)
            .stdin(std::process::Stdio::null());
        // The store's secret variables too (a PostgreSQL store's URL or password): the child
        // is orch's own process, and only what it prints reaches the worker.
        let store_vars = crate::store::location::secret_vars(&self.state_dir);
        for var in [
            "PATH",
            "HOME",
            "LANG",
            "ORCH_LOG",
            "ORCH_CGROUPS",
            "ORCH_PIDNS",
            crate::node::NODE_ENV,
        ]
        .into_iter()
        .chain(store_vars.iter().map(String::as_str))
        {
            if let Some(v) = std::env::var_os(var) {
                cmd.env(var, v);
            }
        }
        let out = cmd
            .output()
            .map_err(|e| format!("orch could not ask about CI: {e}"))?;
        Ok(Reply {
            worker_id: self.id.clone(),
            state: "answered".into(),
            outcome: String::new(),
            output: Some(CommandOutput {
                code: out.status.code().unwrap_or(3),
                stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            }),
        })
    }

    fn report(&self, kind: RequestKind) -> Result<Reply, String> {
        let mut store = Store::open(&self.state_dir)
            .map(|s| s.with_alert_window(self.alert_window))
            .map_err(|e| format!("not recorded: {e}"))?;
        let shared = self.shared.clone();
        let answered = inbox::ask_then(&mut store, &self.id, &kind, ANSWER_WAIT, |rid| {
            lock(&shared.queued).insert(rid);
        })
        .map_err(|e| format!("not recorded: {e}"))?;
        Ok(match answered {
            Some(a) => Reply {
                worker_id: self.id.clone(),
                output: None,
                state: if a.refused { "refused" } else { "applied" }.into(),
                outcome: a.outcome,
            },
            None => Reply {
                worker_id: self.id.clone(),
                output: None,
                state: "queued".into(),
                outcome: format!(
                    "recorded; the supervisor did not answer within {}s and will apply it",
                    ANSWER_WAIT.as_secs()
                ),
            },
        })
    }
}

fn write_reply(conn: &mut UnixStream, reply: &Reply) -> io::Result<()> {
    let mut line = serde_json::to_string(reply).unwrap_or_default();
    line.push('\n');
    conn.write_all(line.as_bytes())
}

/// The kernel's word on who is at the other end of a Unix socket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cred {
    pub pid: i32,
    pub uid: u32,
}

fn peer_cred(conn: &UnixStream) -> io::Result<Cred> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: a valid socket fd, a buffer of the size passed for SO_PEERCRED's `struct ucred`.
    let rc = unsafe {
        libc::getsockopt(
            conn.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Cred {
        pid: cred.pid,
        uid: cred.uid,
    })
}

/// Whether the peer `cred` is a process of the worker run `speaker`: the reason when not.
fn belongs(cred: &Cred, speaker: Option<&Speaker>) -> Result<(), String> {
    let Some(s) = speaker else {
        return Err("no worker runs under this supervisor".into());
    };
    if cred.uid != s.uid {
        return Err(format!("uid {} is not the worker's {}", cred.uid, s.uid));
    }
    let ancestry = crate::process::ancestry(cred.pid);
    if !ancestry.contains(&s.guard_pid) {
        return Err(format!(
            "not a descendant of the worker's guard {}",
            s.guard_pid
        ));
    }
    if let Some(tail) = &s.cgroup_tail {
        let path = std::fs::read_to_string(format!("/proc/{}/cgroup", cred.pid))
            .ok()
            .and_then(|t| crate::contain::unified_path(&t))
            .unwrap_or_default();
        if !cgroup_matches(&path, tail) {
            return Err(format!("in cgroup {path}, not the worker's"));
        }
    }
    Ok(())
}

/// Whether unified-hierarchy `path` is the worker's cgroup (`…/<tail>`) or below it.
fn cgroup_matches(path: &str, tail: &str) -> bool {
    let with = format!("/{tail}");
    path.ends_with(&with) || path.contains(&format!("{with}/"))
}

fn random_hex() -> io::Result<String> {
    let mut b = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// The worker whose process this is, found from the kernel's view (its cgroup, the guard
/// among its ancestors), not from the environment: `(worker id, channel name)`.
pub fn inside_worker() -> Option<(String, Option<String>)> {
    crate::contain::worker_of_self().map(|w| (w.id, w.channel))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_worker_cgroup_is_matched_by_its_last_two_components() {
        let tail = "orch-0123456789abcdef/w-1.77";
        assert!(cgroup_matches("/a/orch-0123456789abcdef/w-1.77", tail));
        assert!(cgroup_matches("/a/orch-0123456789abcdef/w-1.77/sub", tail));
        assert!(!cgroup_matches("/a/orch-0123456789abcdef/w-1.778", tail));
        assert!(!cgroup_matches("/a/orch-0123456789abcdef", tail));
        assert!(!cgroup_matches("/", tail));
    }

    #[test]
    fn a_speaker_of_another_uid_or_no_speaker_is_refused() {
        let me = Cred {
            pid: std::process::id() as i32,
            uid: rustix::process::getuid().as_raw(),
        };
        assert!(belongs(&me, None).is_err());
        let other_uid = Speaker {
            guard_pid: 1,
            cgroup_tail: None,
            uid: me.uid + 1,
        };
        assert!(belongs(&me, Some(&other_uid)).unwrap_err().contains("uid"));
        // pid 1 is an ancestor of every process: this test process belongs to "guard 1".
        let init = Speaker {
            guard_pid: 1,
            cgroup_tail: None,
            uid: me.uid,
        };
        assert_eq!(belongs(&me, Some(&init)), Ok(()));
        let not_ancestor = Speaker {
            guard_pid: i32::MAX,
            cgroup_tail: None,
            uid: me.uid,
        };
        assert!(
            belongs(&me, Some(&not_ancestor))
                .unwrap_err()
                .contains("descendant")
        );
    }
}
