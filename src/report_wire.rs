//! What a worker and its supervisor say on the report channel (`app::channel` serves it):
//! one JSON line each way, and the worker's side of it (`send`). A lower floor than the
//! server, so that orch's helpers running inside a worker (the local forge's hook) speak it too.

use crate::milestone::Milestone;
use serde::{Deserialize, Serialize};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixStream};
use std::time::Duration;

/// The environment variable that names a worker's channel (`@<abstract name>`).
pub const SOCKET_ENV: &str = "ORCH_REPORT_SOCKET";
/// The guard's argv words that name its worker and the worker's channel: read from `/proc` by
/// orch commands run inside a worker (`contain::worker_of_self`), whatever their environment.
pub const GUARD_WORKER_ARG: &str = "--worker";
pub const GUARD_CHANNEL_ARG: &str = "--channel";

/// Longest message either side takes.
pub const MAX_MESSAGE: u64 = 64 * 1024;
/// How long `send` waits for the answer (a report waits for the supervisor's verdict).
const ANSWER_LIMIT: Duration = Duration::from_secs(90);

/// What a worker process sends.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Message {
    /// A milestone report (`orch report`).
    Report {
        milestone: Milestone,
        sha: Option<String>,
        job: Option<String>,
        note: Option<String>,
    },
    /// `orch report FATAL --reason …`: the worker halts its chain (a secret committed, data
    /// corruption, a breaking change to a stable interface).
    Fatal { reason: String },
    /// An operator command that refused to run inside the worker: the supervisor alerts.
    RefusedCommand { command: String },
    /// A push of the worker's that the local forge refused (`forge/local/branches.rs`).
    RefusedPush { repo: String, refusals: Vec<String> },
    /// `orch ci status` / `orch ci logs` asked by a worker that cannot read orch's state (it
    /// runs as an account of its own): its supervisor runs the command as orch and answers
    /// with its output.
    Ci(CiQuestion),
    /// A git transport to the worker's own remote on the local forge (`orch __git-relay`, the
    /// worker clone's `receivepack`/`uploadpack` when it runs as an account of its own): after
    /// the reply `relaying`, the connection carries git's protocol both ways, and the
    /// supervisor runs `git <service>` on the remote as orch — the remote's hooks judge the
    /// push as the worker's.
    Git {
        service: GitService,
        /// The worker's `GIT_PROTOCOL` (e.g. `version=2`), passed on when well formed.
        protocol: Option<String>,
    },
}

/// A CI question a worker asks through its supervisor (the fields of `orch ci status` and
/// `orch ci logs`; the supervisor builds the command line itself).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum CiQuestion {
    Status {
        repo: String,
        sha: String,
        json: bool,
        wait: bool,
        timeout_s: Option<u64>,
    },
    Logs {
        repo: String,
        sha: String,
        job: Option<String>,
        json: bool,
    },
}

impl CiQuestion {
    /// The `orch` arguments that ask it (values joined to their flags: a value never reads as
    /// an option).
    pub fn args(&self) -> Vec<String> {
        let mut a = vec!["ci".to_string()];
        match self {
            CiQuestion::Status {
                repo,
                sha,
                json,
                wait,
                timeout_s,
            } => {
                a.extend([
                    "status".into(),
                    format!("--repo={repo}"),
                    format!("--sha={sha}"),
                ]);
                if *json {
                    a.push("--json".into());
                }
                if *wait {
                    a.push("--wait".into());
                    if let Some(t) = timeout_s {
                        a.push(format!("--timeout={t}s"));
                    }
                }
            }
            CiQuestion::Logs {
                repo,
                sha,
                job,
                json,
            } => {
                a.extend([
                    "logs".into(),
                    format!("--repo={repo}"),
                    format!("--sha={sha}"),
                ]);
                if let Some(j) = job {
                    a.push(format!("--job={j}"));
                }
                if *json {
                    a.push("--json".into());
                }
            }
        }
        a
    }
}

/// What a command run for a worker printed, and its exit code.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct CommandOutput {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// Longest answer to a CI question (job logs can be long).
pub const MAX_CI_ANSWER: u64 = 16 * 1024 * 1024;

/// The two git services a worker's clone speaks to its remote.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum GitService {
    ReceivePack,
    UploadPack,
}

impl GitService {
    /// The git subcommand (`receive-pack`, `upload-pack`).
    pub fn as_str(self) -> &'static str {
        match self {
            GitService::ReceivePack => "receive-pack",
            GitService::UploadPack => "upload-pack",
        }
    }

    pub fn parse(s: &str) -> Option<GitService> {
        match s.trim_start_matches("git-") {
            "receive-pack" => Some(GitService::ReceivePack),
            "upload-pack" => Some(GitService::UploadPack),
            _ => None,
        }
    }
}

/// Set by a supervisor's git relay for `git receive-pack`: the worker a relayed push is judged
/// as. Read by the local forge's hook only when the pushing process is not a worker's itself
/// (a worker of another account cannot run git on orch's remotes: only its supervisor's relay
/// can).
pub const PUSH_FOR_ENV: &str = "ORCH_PUSH_FOR";
/// Set by the relay: the file the hook writes its refusals to.
pub const PUSH_REFUSALS_ENV: &str = "ORCH_PUSH_REFUSALS";

/// What a supervisor's refusal of a CI question says when orch's state could not be read (a
/// shared database restarting): the worker's `orch ci status --wait` waits that out, as it
/// does when it asks directly; any other refusal is final.
pub const STATE_UNREACHABLE: &str = "orch's state is out of reach for now";

/// Set in the environment of a worker of another account: its `orch ci status` and `orch ci
/// logs` ask its supervisor over the channel (it cannot read orch's state or hold the token).
pub const CI_VIA_ENV: &str = "ORCH_CI_VIA";

/// The argv word that starts [`relay_main`].
pub const RELAY_COMMAND: &str = "__git-relay";

/// The reply state that opens a relayed git transport.
pub const RELAYING: &str = "relaying";

/// Whether a `GIT_PROTOCOL` value is one git itself would send (`version=2`,
/// `version=2:object-format=sha1`): nothing else is passed to orch's git.
pub fn protocol_ok(p: &str) -> bool {
    !p.is_empty()
        && p.len() <= 128
        && p.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"=:-_.".contains(&b))
}

/// What the supervisor answers.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Reply {
    /// The worker the channel belongs to (who the kernel says spoke).
    pub worker_id: String,
    /// applied, refused, queued or not_applied (`answered` for a CI question).
    pub state: String,
    pub outcome: String,
    /// A CI question's answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<CommandOutput>,
}

/// Sends `message` on the channel `socket` (`@name`) and returns the supervisor's reply.
pub fn send(socket: &str, message: &Message) -> io::Result<Reply> {
    let name = socket.strip_prefix('@').ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{SOCKET_ENV}={socket} is not a channel orch made (it starts with @)"),
        )
    })?;
    let addr = SocketAddr::from_abstract_name(name.as_bytes())?;
    let mut conn = UnixStream::connect_addr(&addr)?;
    let mut line = serde_json::to_string(message).map_err(io::Error::other)?;
    line.push('\n');
    conn.write_all(line.as_bytes())?;
    // A CI question may wait for CI (`--wait`): its own timeout bounds it.
    let (limit, wait) = match message {
        Message::Ci(_) => (MAX_CI_ANSWER, None),
        _ => (MAX_MESSAGE, Some(ANSWER_LIMIT)),
    };
    let _ = conn.set_read_timeout(wait);
    let mut text = String::new();
    BufReader::new(conn.take(limit)).read_line(&mut text)?;
    parse_reply(&text)
}

fn parse_reply(text: &str) -> io::Result<Reply> {
    serde_json::from_str(text.trim_end()).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("the supervisor's answer is not one orch understands: {e}"),
        )
    })
}

/// `orch __git-relay <service> [<path>]`: what git runs as the worker clone's `receivepack` or
/// `uploadpack` (it appends the remote's path, which is not used: the supervisor knows its
/// worker's remote). Asks the supervisor to run the service over the worker's channel, then
/// copies stdin to it and its output to stdout until it closes. Exit code: 0 when the relay
/// ran (git judges the transport itself), 128 when the supervisor refused (said on stderr).
pub fn relay_main(args: &[String]) -> i32 {
    let Some(service) = args.first().and_then(|s| GitService::parse(s)) else {
        eprintln!("usage: orch {RELAY_COMMAND} receive-pack|upload-pack [<path>]");
        return 2;
    };
    let Ok(socket) = std::env::var(SOCKET_ENV) else {
        eprintln!(
            "orch: {SOCKET_ENV} is not set: this remote is reached only by orch's workers, through their supervisor"
        );
        return 128;
    };
    let protocol = std::env::var("GIT_PROTOCOL")
        .ok()
        .filter(|p| protocol_ok(p));
    match relay(&socket, service, protocol) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("orch: the git relay to this worker's supervisor failed: {e}");
            128
        }
    }
}

fn relay(socket: &str, service: GitService, protocol: Option<String>) -> io::Result<i32> {
    let name = socket.strip_prefix('@').unwrap_or(socket);
    let addr = SocketAddr::from_abstract_name(name.as_bytes())?;
    let mut conn = UnixStream::connect_addr(&addr)?;
    let mut line =
        serde_json::to_string(&Message::Git { service, protocol }).map_err(io::Error::other)?;
    line.push('\n');
    conn.write_all(line.as_bytes())?;
    // The reply is read a byte at a time: what follows it is git's, and must not be buffered
    // away here.
    let _ = conn.set_read_timeout(Some(ANSWER_LIMIT));
    let mut reply = Vec::new();
    let mut byte = [0u8; 1];
    while reply.len() < MAX_MESSAGE as usize {
        if conn.read(&mut byte)? == 0 {
            break;
        }
        if byte[0] == b'\n' {
            break;
        }
        reply.push(byte[0]);
    }
    let reply = parse_reply(&String::from_utf8_lossy(&reply))?;
    if reply.state != RELAYING {
        eprintln!("orch: {}", reply.outcome);
        return Ok(128);
    }
    let _ = conn.set_read_timeout(None);
    let mut upstream = conn.try_clone()?;
    let to_remote = std::thread::spawn(move || {
        let _ = pass(&mut io::stdin().lock(), &mut upstream);
        let _ = upstream.shutdown(std::net::Shutdown::Write);
    });
    // git waits for each packet it is owed: every chunk goes out at once (std's stdout is
    // line-buffered, and a flush packet has no newline).
    pass(&mut conn, &mut io::stdout().lock())?;
    // git may still owe the remote its last packet (a fetch's closing flush): it gets to send
    // it, unless the remote is gone and git is waiting for nothing more.
    let _ = to_remote.join();
    Ok(0)
}

/// Copies `from` to `to` until the end, flushing every chunk as it comes.
pub fn pass(from: &mut impl Read, to: &mut impl Write) -> io::Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        to.write_all(&buf[..n])?;
        to.flush()?;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_is_one_json_line_both_ways() {
        let m = Message::Report {
            milestone: Milestone::Done,
            sha: Some("abc123".into()),
            job: None,
            note: Some("a\nb".into()),
        };
        let text = serde_json::to_string(&m).unwrap();
        assert!(!text.contains('\n'));
        assert_eq!(serde_json::from_str::<Message>(&text).unwrap(), m);
    }

    #[test]
    fn git_services_and_protocols_are_read_strictly() {
        assert_eq!(
            GitService::parse("git-receive-pack"),
            Some(GitService::ReceivePack)
        );
        assert_eq!(
            GitService::parse("upload-pack"),
            Some(GitService::UploadPack)
        );
        assert_eq!(GitService::parse("upload-archive"), None);
        assert!(protocol_ok("version=2"));
        assert!(protocol_ok("version=2:object-format=sha256"));
        assert!(!protocol_ok("version=2 ; rm -rf /"));
        assert!(!protocol_ok(""));
    }

    #[test]
    fn a_socket_name_without_the_at_sign_is_refused_by_name() {
        let e = send(
            "/tmp/x.sock",
            &Message::RefusedCommand {
                command: "x".into(),
            },
        )
        .unwrap_err();
        assert!(e.to_string().contains("ORCH_REPORT_SOCKET"), "{e}");
    }
}
