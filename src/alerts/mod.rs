//! Alerts outside SQLite: every new alert recorded there is also appended, after the commit,
//! as one JSON line to `sessions/alerts.jsonl` for humans and log shippers; and the payload
//! that sinks receive (`sink.rs` sends it; `app::deliver` drains the outbox).

pub mod sink;

use crate::store::fmt_ms;
use crate::store::workers::AlertRecord;
use std::io::Write;
use std::path::Path;

pub const ALERTS_FILE: &str = "alerts.jsonl";

pub fn append_jsonl(state_dir: &Path, alerts: &[AlertRecord]) {
    if alerts.is_empty() {
        return;
    }
    let mut text = String::new();
    for a in alerts {
        let line = serde_json::json!({
            "time": fmt_ms(a.at_ms),
            "severity": a.severity,
            "worker": a.worker_id,
            "repo": a.repo,
            "kind": a.kind,
            "message": a.message,
        });
        text.push_str(&line.to_string());
        text.push('\n');
    }
    // One write call per batch with O_APPEND: lines from concurrent supervisors do not interleave.
    let result = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(state_dir.join(ALERTS_FILE))
        .and_then(|mut f| f.write_all(text.as_bytes()));
    if let Err(e) = result {
        tracing::error!(error = %e, "cannot append to {}", ALERTS_FILE);
    }
}

/// What a sink receives: a `text` line for chat-style receivers (Slack, Matrix, ntfy), and
/// the alert's fields.
pub fn payload(a: &AlertRecord) -> serde_json::Value {
    let subject = a
        .worker_id
        .as_deref()
        .or(a.repo.as_deref())
        .unwrap_or("orch");
    serde_json::json!({
        "text": format!("[orch {}] {} ({}): {}", a.severity, subject, a.kind, a.message),
        "id": a.id,
        "time": fmt_ms(a.at_ms),
        "severity": a.severity,
        "worker": a.worker_id,
        "repo": a.repo,
        "kind": a.kind,
        "message": a.message,
        "repeats": a.repeats,
    })
}
