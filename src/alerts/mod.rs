//! Alerts outside SQLite: every new alert recorded there is also appended, after the commit,
//! as one JSON line to `sessions/alerts.jsonl` for humans and log shippers; and the payload
//! that sinks receive (`sink.rs` sends it; `app::deliver` drains the outbox).

pub mod done_branch;
pub mod sink;

use crate::store::fmt_ms;
use crate::store::workers::AlertRecord;
use std::io::Write;
use std::path::Path;

pub const ALERTS_FILE: &str = "alerts.jsonl";

/// One alert as orch writes it out: a line of alerts.jsonl, an entry of `orch alerts --json`
/// (with its deliveries) and the fields of a sink's payload — one type, so the three cannot
/// drift apart. Times are RFC 3339.
#[derive(Debug, Clone, PartialEq, serde::Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct AlertLine {
    /// The alert's id in the database.
    pub id: i64,
    /// When it was raised.
    #[schemars(extend("format" = "date-time"))]
    pub at: String,
    /// info, warning or error.
    pub severity: String,
    pub worker_id: Option<String>,
    pub repo: Option<String>,
    /// What happened, as a stable word (e.g. `blocked`, `worker_exited`, `done_without_ci_proof`).
    pub kind: String,
    pub message: String,
    /// How often it was raised within the de-duplication window (1: once).
    pub repeats: i64,
    /// When the condition ended (a paused worker resumed), if it did.
    #[schemars(extend("format" = "date-time"))]
    pub resolved_at: Option<String>,
}

impl From<&AlertRecord> for AlertLine {
    fn from(a: &AlertRecord) -> Self {
        AlertLine {
            id: a.id,
            at: fmt_ms(a.at_ms),
            severity: a.severity.clone(),
            worker_id: a.worker_id.clone(),
            repo: a.repo.clone(),
            kind: a.kind.clone(),
            message: a.message.clone(),
            repeats: a.repeats,
            resolved_at: a.resolved_ms.map(fmt_ms),
        }
    }
}

pub fn append_jsonl(state_dir: &Path, alerts: &[AlertRecord]) {
    if alerts.is_empty() {
        return;
    }
    let mut text = String::new();
    for a in alerts {
        let line = serde_json::to_string(&AlertLine::from(a)).expect("an alert serialises");
        text.push_str(&line);
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
/// the alert's fields as alerts.jsonl has them.
pub fn payload(a: &AlertRecord) -> serde_json::Value {
    let subject = a
        .worker_id
        .as_deref()
        .or(a.repo.as_deref())
        .unwrap_or("orch");
    let mut v = serde_json::to_value(AlertLine::from(a)).expect("an alert serialises");
    v["text"] = serde_json::Value::String(format!(
        "[orch {}] {} ({}): {}",
        a.severity, subject, a.kind, a.message
    ));
    v
}
