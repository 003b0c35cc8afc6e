//! Alerts that reach people: a real HTTP receiver on loopback and a command sink, fed from the
//! durable outbox (retries, give-up, delivery after a crash by `orch resume`), de-duplication
//! within `alerts.dedup_window`, and no secret in any file orch wrote.

use crate::support::{DEADLINE, Org, RepoSpec, Spec, files_under, kill9, poll_until};
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

/// One request the receiver took: the status it answered and the JSON body.
#[derive(Debug, Clone)]
pub(crate) struct Hit {
    pub(crate) status: u16,
    pub(crate) body: Value,
}

/// A tiny HTTP/1.1 receiver on loopback: answers each POST with the next scripted status
/// (200 once the script is used up) and records what it got.
pub(crate) struct Receiver {
    port: u16,
    hits: Arc<Mutex<Vec<Hit>>>,
}

impl Receiver {
    pub(crate) fn start(script: &[u16]) -> Receiver {
        Receiver::on(TcpListener::bind("127.0.0.1:0").unwrap(), script)
    }

    fn on(listener: TcpListener, script: &[u16]) -> Receiver {
        let port = listener.local_addr().unwrap().port();
        let hits = Arc::new(Mutex::new(Vec::new()));
        let (h, mut script) = (hits.clone(), script.to_vec());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut len = 0usize;
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        break;
                    }
                    let l = line.to_ascii_lowercase();
                    if let Some(v) = l.strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap_or(0);
                    }
                    if line == "\r\n" {
                        break;
                    }
                }
                let mut body = vec![0u8; len];
                let _ = reader.read_exact(&mut body);
                let status = if script.is_empty() {
                    200
                } else {
                    script.remove(0)
                };
                let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
                h.lock().unwrap().push(Hit { status, body });
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                );
            }
        });
        Receiver { port, hits }
    }

    pub(crate) fn url(&self) -> String {
        format!(
            "http://127.0.0.1:{}/hooks/T0/B1/s3cr3t-path-{}",
            self.port, self.port
        )
    }

    pub(crate) fn hits(&self) -> Vec<Hit> {
        self.hits.lock().unwrap().clone()
    }

    /// Bodies of the requests answered 200 whose `kind` is `kind`.
    pub(crate) fn delivered(&self, kind: &str) -> Vec<Value> {
        self.hits()
            .into_iter()
            .filter(|h| h.status == 200 && h.body["kind"] == kind)
            .map(|h| h.body)
            .collect()
    }
}

pub(crate) const HOOK_VAR: &str = "E2E_ALERT_WEBHOOK";

fn org_with(worker: &str, alerts: &str, url: &str) -> Org {
    let spec = Spec::local(worker)
        .repo(RepoSpec::new("alpha"))
        .alerts(alerts);
    let mut org = Org::new(spec);
    org.set_env(HOOK_VAR, url);
    org
}

/// `orch alerts --json`, the alerts of `kind`.
fn alerts_of(org: &Org, kind: &str) -> Vec<Value> {
    org.json(&["alerts", "--json"])["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["kind"] == kind)
        .cloned()
        .collect()
}

/// The delivery of the (first) alert of `kind` to `sink`, once it is no longer pending.
fn settled_delivery(org: &Org, kind: &str, sink: &str) -> Value {
    poll_until(
        &format!("the {kind} alert to be settled at {sink}"),
        DEADLINE,
        || {
            let a = alerts_of(org, kind).into_iter().next()?;
            let d = a["deliveries"]
                .as_array()?
                .iter()
                .find(|d| d["sink"] == sink)?
                .clone();
            (d["state"] != "pending").then_some(d)
        },
        || org.dump(),
    )
}

#[test]
fn an_alert_reaches_the_webhook_after_two_500s_and_the_command_sink_gets_its_json() {
    let rx = Receiver::start(&[500, 500]);
    let out = tempfile::tempdir().unwrap();
    let cmd_file = out.path().join("alert.json");
    let alerts = format!(
        "  retry_initial: 100ms\n  sinks:\n    - webhook: {{url_env: {HOOK_VAR}}}\n    - command: [sh, -c, {}]\n      min_severity: warning\n    - command: [sh, -c, 'cat >> {}']\n      min_severity: critical\n",
        serde_json::to_string(&format!("cat > '{}'", cmd_file.display())).unwrap(),
        out.path().join("critical-only.json").display()
    );
    let org = org_with("exit3.sh", &alerts, &rx.url());
    let (_, id) = org.spawn_foreground("alpha", "give up");

    let d = settled_delivery(&org, "worker_exited", &format!("webhook:{HOOK_VAR}"));
    assert_eq!(d["state"], "delivered", "{d:#}");
    assert_eq!(d["attempts"], 3, "{d:#}");
    let statuses: Vec<u16> = rx
        .hits()
        .iter()
        .filter(|h| h.body["kind"] == "worker_exited")
        .map(|h| h.status)
        .collect();
    assert_eq!(statuses, vec![500, 500, 200]);
    let got = &rx.delivered("worker_exited")[0];
    let text = got["text"].as_str().unwrap();
    assert!(
        text.contains(&id) && text.contains("worker_exited"),
        "{got:#}"
    );
    assert_eq!(got["worker_id"], id.as_str());
    assert_eq!(got["severity"], "warning");

    // The command sink: the same JSON on stdin.
    let d = settled_delivery(&org, "worker_exited", "command:sh");
    assert_eq!(d["state"], "delivered", "{d:#}");
    let sent: Value = serde_json::from_slice(&std::fs::read(&cmd_file).unwrap()).unwrap();
    assert_eq!(sent["kind"], "worker_exited");
    assert_eq!(sent["worker_id"], id.as_str());
    assert!(sent["text"].as_str().is_some());
    // A warning is below the third sink's min_severity: no delivery row, nothing run.
    let a = &alerts_of(&org, "worker_exited")[0];
    assert!(
        !a["deliveries"]
            .as_array()
            .unwrap()
            .iter()
            .any(|d| d["sink"] == "command:sh#2"),
        "{a:#}"
    );
    assert!(!out.path().join("critical-only.json").exists());

    // The webhook's URL is in no file orch wrote.
    let secret = rx.url();
    for f in files_under(&org.state) {
        let bytes = std::fs::read(&f).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(&secret),
            "{} holds the webhook URL",
            f.display()
        );
    }
}

#[test]
fn the_same_alert_twice_within_the_window_is_sent_once_with_a_repeat_count() {
    let rx = Receiver::start(&[]);
    let alerts = format!("  - webhook: {{url_env: {HOOK_VAR}}}\n");
    let org = org_with("done_twice.sh", &alerts, &rx.url());
    let id = org.spawn_detached("alpha", "claim DONE twice");
    org.wait_until("two DONE claims refused", DEADLINE, || {
        org.violations(&id)
            .iter()
            .filter(|v| v.starts_with("done_without_ci_proof"))
            .count()
            == 2
    });
    let d = settled_delivery(
        &org,
        "done_without_ci_proof",
        &format!("webhook:{HOOK_VAR}"),
    );
    assert_eq!(d["state"], "delivered");
    let recorded = alerts_of(&org, "done_without_ci_proof");
    assert_eq!(recorded.len(), 1, "{recorded:#?}");
    assert_eq!(recorded[0]["repeats"], 2);
    assert_eq!(rx.delivered("done_without_ci_proof").len(), 1);
    assert_eq!(org.alerts(&id).len(), 1, "alerts.jsonl holds it once");
    org.release(&id);
    org.wait_supervisor_gone(&id);
    assert_eq!(
        rx.delivered("done_without_ci_proof").len(),
        1,
        "never sent again"
    );
}

#[test]
fn an_alert_pending_when_its_supervisor_is_killed_is_delivered_by_orch_resume() {
    // The receiver is down: its port is reserved, then closed.
    let reserved = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = reserved.local_addr().unwrap().port();
    drop(reserved);
    let url = format!("http://127.0.0.1:{port}/hooks/T0/B1/s3cr3t-path-{port}");
    let alerts =
        format!("  retry_initial: 30s\n  sinks:\n    - webhook: {{url_env: {HOOK_VAR}}}\n");
    let org = org_with("done_twice.sh", &alerts, &url);
    let id = org.spawn_detached("alpha", "claim DONE twice");
    poll_until(
        "a failed delivery attempt",
        DEADLINE,
        || {
            let a = alerts_of(&org, "done_without_ci_proof")
                .into_iter()
                .next()?;
            let d = a["deliveries"].as_array()?.first()?.clone();
            (d["attempts"].as_i64()? >= 1 && d["state"] == "pending").then_some(())
        },
        || org.dump(),
    );
    let pid = org.supervisor_pid(&id);
    kill9(pid);
    org.wait_until("the supervisor to die", DEADLINE, || {
        !orch::process::process_alive(pid, None)
    });
    let rx = Receiver::on(TcpListener::bind(("127.0.0.1", port)).unwrap(), &[]);
    org.resume();
    let d = settled_delivery(
        &org,
        "done_without_ci_proof",
        &format!("webhook:{HOOK_VAR}"),
    );
    assert_eq!(d["state"], "delivered", "{d:#}");
    assert!(d["attempts"].as_i64().unwrap() >= 2, "{d:#}");
    let got = rx.delivered("done_without_ci_proof");
    assert_eq!(got.len(), 1, "{:#?}", rx.hits());
    assert_eq!(got[0]["worker_id"], id.as_str());
    org.release(&id);
}

#[test]
fn a_silent_worker_gets_the_idle_alert_once_at_the_configured_interval() {
    let spec = Spec::local("quiet.sh")
        .repo(RepoSpec::new("alpha"))
        .contract_key("check_interval", "1s")
        .contract_key("worker_idle", "2s");
    let org = Org::new(spec);
    let id = org.spawn_detached("alpha", "say nothing");
    // Checked every second: the first check after 2 s of silence raises it, later ones count
    // as repeats of the same alert.
    let idle = poll_until(
        "the idle alert to be raised twice",
        DEADLINE,
        || {
            let a = alerts_of(&org, "deadlock_idle").into_iter().next()?;
            (a["repeats"].as_i64()? >= 2).then_some(a)
        },
        || org.diag(&id),
    );
    let w = org.worker(&id);
    assert!(
        idle["at"]
            .as_str()
            .and_then(|t| t.parse::<jiff::Timestamp>().ok())
            .expect("an RFC 3339 time")
            .as_millisecond()
            - w.created_ms
            >= 2_000,
        "raised after worker_idle: {idle:#}"
    );
    assert!(
        idle["message"].as_str().unwrap().contains("no output for"),
        "{idle:#}"
    );
    assert!(
        idle["message"]
            .as_str()
            .unwrap()
            .contains("at the timeout orch"),
        "says what orch does next: {idle:#}"
    );
    let jsonl: Vec<_> = org
        .alerts(&id)
        .into_iter()
        .filter(|a| a["kind"] == "deadlock_idle")
        .collect();
    assert_eq!(jsonl.len(), 1, "recorded once: {jsonl:#?}");
    org.release(&id);
}
