//! `/metrics` in Prometheus' text exposition format (0.0.4), by its naming guide: the `orch_`
//! prefix, base units, `_total` on counters, and no worker-id or SHA labels (their number
//! grows without bound). Every figure is read from the store at scrape time: the process
//! keeps no state of its own, so any number of `orch serve` processes say the same.

use super::board::{BoardView, Need};
use crate::milestone::Milestone;
use crate::store::board::Figures;
use std::fmt::Write;

/// The metric families `/metrics` always has (README, "The board", lists them).
pub const FAMILIES: &[(&str, &str)] = &[
    ("orch_build_info", "gauge"),
    ("orch_workers", "gauge"),
    ("orch_attention_workers", "gauge"),
    ("orch_locks_held", "gauge"),
    ("orch_lock_waits", "gauge"),
    ("orch_ci_verdicts_total", "counter"),
    ("orch_respawns_total", "counter"),
    ("orch_violations_total", "counter"),
    ("orch_alert_deliveries_total", "counter"),
    ("orch_outbox_pending", "gauge"),
    ("orch_outbox_oldest_pending_age_seconds", "gauge"),
    ("orch_spend_usd_total", "counter"),
    ("orch_fatal_holds", "gauge"),
];

/// A label value escaped as the text format wants it (`\\`, `\"`, `\n`).
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

struct Out(String);

impl Out {
    fn family(&mut self, name: &str, help: &str) {
        let kind = FAMILIES
            .iter()
            .find(|(n, _)| *n == name)
            .map_or("untyped", |(_, k)| k);
        let _ = writeln!(self.0, "# HELP {name} {help}");
        let _ = writeln!(self.0, "# TYPE {name} {kind}");
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.0.push_str(name);
        if !labels.is_empty() {
            let parts: Vec<String> = labels
                .iter()
                .map(|(k, v)| format!("{k}=\"{}\"", label(v)))
                .collect();
            let _ = write!(self.0, "{{{}}}", parts.join(","));
        }
        let _ = writeln!(self.0, " {value}");
    }
}

/// The exposition of `f` (read at `now_ms`) and the board's groups.
pub fn render(f: &Figures, board: &BoardView, now_ms: i64) -> String {
    let mut o = Out(String::new());
    o.family(
        "orch_build_info",
        "The orch version serving these metrics (always 1).",
    );
    o.sample(
        "orch_build_info",
        &[("version", env!("CARGO_PKG_VERSION"))],
        1.0,
    );

    o.family(
        "orch_workers",
        "Workers in the history kept, by milestone (orch gc prunes ended ones).",
    );
    for m in Milestone::ALL {
        let n = f
            .workers_by_milestone
            .iter()
            .find(|(name, _)| name == m.as_str())
            .map_or(0, |(_, n)| *n);
        o.sample("orch_workers", &[("milestone", m.as_str())], n as f64);
    }

    o.family(
        "orch_attention_workers",
        "Cards on the attention board, by what they need (human, ci_red, waiting, working, awaiting_ci, landing, done).",
    );
    for need in Need::ALL {
        let key = serde_json::to_value(need)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        o.sample(
            "orch_attention_workers",
            &[("need", &key)],
            board.count(need) as f64,
        );
    }

    o.family(
        "orch_locks_held",
        "Chain locks held now, by holder kind (worker, hold).",
    );
    for kind in ["worker", "hold"] {
        let n = f
            .locks_by_kind
            .iter()
            .find(|(k, _)| k == kind)
            .map_or(0, |(_, n)| *n);
        o.sample("orch_locks_held", &[("kind", kind)], n as f64);
    }

    o.family(
        "orch_lock_waits",
        "Wave tasks that cannot start because their chain is locked.",
    );
    o.sample("orch_lock_waits", &[], board.count(Need::Waiting) as f64);

    o.family(
        "orch_ci_verdicts_total",
        "Pushed commits by orch's CI verdict (green, red, ...).",
    );
    for (verdict, n) in &f.ci_verdicts {
        o.sample("orch_ci_verdicts_total", &[("verdict", verdict)], *n as f64);
    }

    o.family("orch_respawns_total", "Worker respawns.");
    o.sample("orch_respawns_total", &[], f.respawns as f64);

    o.family(
        "orch_violations_total",
        "Contract violations recorded in workers' histories.",
    );
    o.sample("orch_violations_total", &[], f.violations as f64);

    o.family(
        "orch_alert_deliveries_total",
        "Alert deliveries that ended, by sink and result (delivered, given_up).",
    );
    for (sink, state, n) in f.deliveries.iter().filter(|(_, s, _)| s != "pending") {
        o.sample(
            "orch_alert_deliveries_total",
            &[("sink", sink), ("result", state)],
            *n as f64,
        );
    }

    o.family(
        "orch_outbox_pending",
        "Alert deliveries waiting in the outbox.",
    );
    o.sample("orch_outbox_pending", &[], f.outbox_pending as f64);

    o.family(
        "orch_outbox_oldest_pending_age_seconds",
        "Age of the oldest alert still waiting for a delivery (0: none).",
    );
    let age = f
        .outbox_oldest_ms
        .map_or(0.0, |ms| (now_ms - ms).max(0) as f64 / 1000.0);
    o.sample("orch_outbox_oldest_pending_age_seconds", &[], age);

    o.family(
        "orch_spend_usd_total",
        "US dollars the workers' agents spent (history kept).",
    );
    o.sample("orch_spend_usd_total", &[], f.spend_usd);

    o.family("orch_fatal_holds", "Chains halted by a fatal hold.");
    o.sample("orch_fatal_holds", &[], f.fatal_holds as f64);
    o.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_has_help_and_type_and_samples_parse() {
        let f = Figures {
            workers_by_milestone: vec![("WORKING".into(), 2)],
            deliveries: vec![
                ("hook \"a\"".into(), "delivered".into(), 3),
                ("x".into(), "pending".into(), 1),
            ],
            outbox_pending: 1,
            outbox_oldest_ms: Some(1_000),
            spend_usd: 0.25,
            ..Figures::default()
        };
        let board = BoardView { groups: Vec::new() };
        let text = render(&f, &board, 3_500);
        let mut typed = Vec::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                typed.push(rest.split(' ').next().unwrap().to_string());
                continue;
            }
            if line.starts_with("# HELP ") {
                continue;
            }
            let (name_labels, value) = line.rsplit_once(' ').unwrap();
            let name = name_labels.split('{').next().unwrap();
            assert!(typed.last().is_some_and(|t| t == name), "{line}");
            value.parse::<f64>().unwrap();
        }
        let names: Vec<&str> = FAMILIES.iter().map(|(n, _)| *n).collect();
        assert_eq!(typed, names);
        assert!(text.contains("orch_workers{milestone=\"WORKING\"} 2\n"));
        assert!(text.contains("orch_workers{milestone=\"FAILED\"} 0\n"));
        assert!(text.contains(
            "orch_alert_deliveries_total{sink=\"hook \\\"a\\\"\",result=\"delivered\"} 3\n"
        ));
        assert!(text.contains("orch_outbox_oldest_pending_age_seconds 2.5\n"));
        assert!(text.contains("orch_spend_usd_total 0.25\n"));
        for (n, kind) in FAMILIES {
            assert_eq!(n.ends_with("_total"), *kind == "counter", "{n}");
        }
    }
}
