//! Sending one alert to one sink: a webhook (HTTP POST of the JSON payload) or a command (the
//! payload on its stdin, in its own process group, bounded by a timeout). An attempt ends
//! delivered, failed (try again later) or refused for good; error texts never hold the
//! webhook's URL (it is a secret of the operator's: Slack-style URLs carry their token).

use crate::process::{GroupOptions, Signal, spawn_in_group};
use std::io::Write;
use std::time::Duration;

/// How an attempt failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendError {
    /// Worth another try: 5xx, 408/429, a timeout, a refused connection, a non-zero exit.
    Retry(String),
    /// Retrying will not help (a 4xx, a command that cannot be started, no URL).
    Permanent(String),
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SendError::Retry(m) | SendError::Permanent(m) => f.write_str(m),
        }
    }
}

/// POSTs `body` (JSON) to `url` within `timeout`.
pub async fn webhook(
    url: &str,
    body: &serde_json::Value,
    timeout: Duration,
) -> Result<(), SendError> {
    let client = reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout)
        .build()
        .map_err(|e| {
            SendError::Permanent(format!("cannot build an HTTP client: {}", e.without_url()))
        })?;
    let response = client
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| {
            let kind = if e.is_timeout() {
                "timed out"
            } else if e.is_connect() {
                "cannot connect"
            } else {
                "request failed"
            };
            SendError::Retry(format!("{kind}: {}", e.without_url()))
        })?;
    let status = response.status();
    if status.is_success() {
        return Ok(());
    }
    let what = format!("the webhook answered HTTP {}", status.as_u16());
    if status.is_server_error() || status.as_u16() == 408 || status.as_u16() == 429 {
        Err(SendError::Retry(what))
    } else {
        Err(SendError::Permanent(what))
    }
}

/// Runs `argv` with `body` on its stdin, in its own process group, without the variables in
/// `scrub`; the whole group is killed if it outlives `timeout`.
pub fn command(
    argv: &[String],
    body: &serde_json::Value,
    timeout: Duration,
    scrub: &[&str],
) -> Result<(), SendError> {
    let mut cmd = std::process::Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    for v in scrub {
        cmd.env_remove(v);
    }
    let mut child = spawn_in_group(&mut cmd, &GroupOptions::default())
        .map_err(|e| SendError::Permanent(format!("cannot start {}: {e}", argv[0])))?;
    if let Some(mut stdin) = child.child_mut().stdin.take() {
        let text = body.to_string();
        // A command that does not read its stdin must not stall delivery (nor kill orch
        // with SIGPIPE: the write sees EPIPE, see main.rs).
        std::thread::spawn(move || {
            let _ = stdin.write_all(text.as_bytes());
        });
    }
    match child.wait_timeout(timeout) {
        Ok(Some(status)) if status.success() => Ok(()),
        Ok(Some(status)) => Err(SendError::Retry(match status.code() {
            Some(c) => format!("{} exited with code {c}", argv[0]),
            None => format!("{} was killed by a signal", argv[0]),
        })),
        Ok(None) => {
            let _ = child.signal_group(Signal::KILL);
            let _ = child.wait();
            Err(SendError::Retry(format!(
                "{} did not finish within {}",
                argv[0],
                crate::duration::format(timeout)
            )))
        }
        Err(e) => Err(SendError::Retry(format!("waiting for {}: {e}", argv[0]))),
    }
}
