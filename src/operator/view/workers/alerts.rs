//! What `orch alerts` prints: each alert with its deliveries.

use super::*;

/// One sink's delivery of an alert.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct DeliveryView {
    pub sink: String,
    /// pending, delivered or given_up.
    pub state: String,
    pub attempts: i64,
    pub last_error: Option<String>,
    /// When a pending delivery is tried next.
    #[schemars(extend("format" = "date-time"))]
    pub next_attempt_at: Option<String>,
    /// When it was delivered or given up.
    #[schemars(extend("format" = "date-time"))]
    pub done_at: Option<String>,
}

/// An alert with its deliveries.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct AlertEntry {
    /// The alert as alerts.jsonl has it.
    #[serde(flatten)]
    pub alert: AlertLine,
    pub deliveries: Vec<DeliveryView>,
}

/// `orch alerts --json`: newest last.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct AlertsView {
    pub alerts: Vec<AlertEntry>,
}

impl View for AlertsView {
    const NAME: &'static str = "alerts";
}

impl AlertsView {
    pub fn human(&self) -> String {
        let mut out = String::new();
        let mut t = Table::new(["AT", "SEVERITY", "KIND", "WORKER", "MESSAGE"]);
        for e in &self.alerts {
            let a = &e.alert;
            let repeats = if a.repeats > 1 {
                format!(" (x{})", a.repeats)
            } else {
                String::new()
            };
            let resolved = if a.resolved_at.is_some() {
                " [resolved]"
            } else {
                ""
            };
            t.row([
                a.at.clone(),
                esc(&a.severity).into_owned(),
                esc(&a.kind).into_owned(),
                esc(a.worker_id.as_deref().unwrap_or("-")).into_owned(),
                format!("{}{repeats}{resolved}", esc(&a.message)),
            ]);
        }
        // Deliveries go under their alert, so the rows are laid out by the table and the
        // delivery lines inserted after each.
        let table = t.render();
        let mut lines = table.lines();
        if let Some(h) = lines.next() {
            out.push_str(h);
            out.push('\n');
        }
        for (e, row) in self.alerts.iter().zip(lines) {
            out.push_str(row);
            out.push('\n');
            for d in &e.deliveries {
                let plural = |n: i64| super::super::plural(n as usize, "attempt", "attempts");
                let detail = match (d.state.as_str(), &d.last_error) {
                    ("delivered", _) => format!("delivered after {}", plural(d.attempts)),
                    ("pending", Some(err)) => format!(
                        "pending: {}, last error: {}; next at {}",
                        plural(d.attempts),
                        esc(err),
                        d.next_attempt_at.as_deref().unwrap_or("-")
                    ),
                    ("pending", None) => "pending".to_string(),
                    (_, err) => format!("given up: {}", esc(err.as_deref().unwrap_or("-"))),
                };
                out.push_str(&format!("    -> {} {detail}\n", esc(&d.sink)));
            }
        }
        out
    }
}
