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
    /// An operator command that refused to run inside the worker: the supervisor alerts.
    RefusedCommand { command: String },
    /// A push of the worker's that the local forge refused (`forge/local/branches.rs`).
    RefusedPush { repo: String, refusals: Vec<String> },
}

/// What the supervisor answers.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Reply {
    /// The worker the channel belongs to (who the kernel says spoke).
    pub worker_id: String,
    /// applied, refused, queued or not_applied.
    pub state: String,
    pub outcome: String,
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
    let _ = conn.set_read_timeout(Some(ANSWER_LIMIT));
    let mut text = String::new();
    BufReader::new(conn.take(MAX_MESSAGE)).read_line(&mut text)?;
    serde_json::from_str(text.trim_end()).map_err(|e| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("the supervisor's answer is not one orch understands: {e}"),
        )
    })
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
