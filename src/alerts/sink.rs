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

/// Marks every process an alert command starts (see [`command`]).
pub const SINK_MARK_ENV: &str = "ORCH_ALERT_SINK";

/// Runs `argv` with `body` on its stdin, in its own process group, without the variables in
/// `scrub`; the whole group is killed if it outlives `timeout`. Nothing it started outlives
/// it: where the machine allows, it runs as pid 1 of a PID namespace of its own
/// (`pidns::run_as_init`), so the kernel kills whatever it left when it ends; everywhere, what
/// is left of its group is killed, and so is every process carrying its mark
/// (`ORCH_ALERT_SINK=<this run>` in the environment), such as a daemon it forked into a
/// session of its own.
pub fn command(
    argv: &[String],
    body: &serde_json::Value,
    timeout: Duration,
    scrub: &[&str],
) -> Result<(), SendError> {
    static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mark = format!(
        "{}-{}-{}",
        std::process::id(),
        RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        crate::store::now_ms()
    );
    let result = run_command(argv, body, timeout, scrub, &mark);
    // Its leftovers: bounded, a handful of passes (a daemon may fork again meanwhile).
    for _ in 0..20 {
        let left = crate::contain::processes_with(SINK_MARK_ENV, &mark);
        if left.is_empty() {
            break;
        }
        crate::contain::kill_all(&left);
        std::thread::sleep(Duration::from_millis(5));
    }
    result
}

fn run_command(
    argv: &[String],
    body: &serde_json::Value,
    timeout: Duration,
    scrub: &[&str],
    mark: &str,
) -> Result<(), SendError> {
    let mut cmd = std::process::Command::new(&argv[0]);
    cmd.env(SINK_MARK_ENV, mark);
    cmd.args(&argv[1..])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    for v in scrub {
        cmd.env_remove(v);
    }
    // As pid 1 of a PID namespace of its own: a daemon it forks dies with it (by the kernel),
    // even one that cleaned its environment of the mark.
    if crate::pidns::usable().is_some() {
        crate::pidns::run_as_init(&mut cmd);
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
    let waited = child.wait_timeout(timeout);
    if matches!(waited, Ok(Some(_))) {
        // Ended: what it left running in its group goes with it.
        let _ = child.signal_group(Signal::KILL);
    }
    match waited {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs an alert command that forks a setsid daemon (`prefix` goes before its `setsid`)
    /// and returns the daemon's pid if it outlived the command (looked at for up to 10 s).
    fn daemon_outlives_its_alert_command(prefix: &str) -> Option<i32> {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("daemon.pid");
        // The daemon writes its pid as /proc names it (in a namespace its own $$ is not).
        let script = format!(
            "{prefix}setsid sh -c 'read -r p _ </proc/self/stat; echo $p > {p}; exec sleep 300' </dev/null >/dev/null 2>&1 & cat >/dev/null; while [ ! -s {p} ]; do sleep 0.01; done",
            p = pidfile.display()
        );
        let argv: Vec<String> = ["sh", "-c", &script]
            .iter()
            .map(|s| s.to_string())
            .collect();
        command(
            &argv,
            &serde_json::json!({"a": 1}),
            Duration::from_secs(30),
            &[],
        )
        .unwrap();
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while crate::process::process_alive(pid, None) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        crate::process::process_alive(pid, None).then_some(pid)
    }

    #[test]
    fn a_daemon_an_alert_command_forks_does_not_outlive_it() {
        let left = daemon_outlives_its_alert_command("");
        assert!(
            left.is_none(),
            "the daemon {left:?} outlived its alert command"
        );
    }

    /// A daemon that drops the mark from its environment (`env -i`) is found by no scan: only
    /// the alert command's PID namespace ends it.
    #[test]
    fn a_daemon_without_the_mark_dies_with_its_alert_command_in_a_pid_namespace() {
        if crate::pidns::usable().is_none() {
            eprintln!("no PID namespaces on this machine: skipped");
            return;
        }
        let left = daemon_outlives_its_alert_command("env -i ");
        assert!(
            left.is_none(),
            "the daemon {left:?} outlived its alert command"
        );
    }
}
