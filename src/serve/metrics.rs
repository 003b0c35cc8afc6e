//! `/metrics` in Prometheus' text exposition format (0.0.4), by its naming guide: the `orch_`
//! prefix, base units, `_total` on counters, and no worker-id or SHA labels (their number
//! grows without bound). Every figure is read from the store at scrape time: the process
//! keeps no state of its own, so any number of `orch serve` processes say the same.

use crate::milestone::Milestone;
use crate::operator::board::{BoardView, Need};
use crate::store::board::Figures;
use std::fmt::Write;

/// The metric families `/metrics` always has, in its order (docs/metrics.md lists each with
/// its type and labels; a test holds the two together).
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
    ("orch_spend_tokens_total", "counter"),
    ("orch_fatal_holds", "gauge"),
    ("orch_ci_wait_seconds", "histogram"),
    ("orch_wave_tasks", "gauge"),
    ("orch_wave_last_success_timestamp_seconds", "gauge"),
    ("orch_forge_request_errors_total", "counter"),
    ("orch_node_heartbeat_age_seconds", "gauge"),
    ("orch_node_workers", "gauge"),
];

/// The upper bounds (seconds) of `orch_ci_wait_seconds`' buckets: from a quick job to a slow
/// queue.
pub const CI_WAIT_BUCKETS: &[f64] = &[
    30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0, 7200.0,
];

/// What `/metrics` reads from the store, after change `version` of the board's watcher.
pub struct Read {
    pub version: u64,
    pub at: std::time::Instant,
    pub figures: Figures,
    pub board: BoardView,
    pub waves: Vec<WaveFigures>,
}

/// How long a read is served again while the store has not changed (a safety net: the
/// watcher's version says when it did).
pub const REUSE: std::time::Duration = std::time::Duration::from_secs(30);

/// What a wave's metrics are read from: its name, each task's progress (`pending`,
/// `running`, `done`, `stopped`) and, when every task is done, when the last one ended.
pub struct WaveFigures {
    pub name: String,
    pub progress: Vec<&'static str>,
    pub succeeded_ms: Option<i64>,
}

impl WaveFigures {
    pub fn of(w: &crate::app::wave::WaveView) -> Self {
        WaveFigures {
            name: w.name.clone(),
            progress: w.tasks.iter().map(|t| t.progress).collect(),
            succeeded_ms: w
                .all_done
                .then(|| w.tasks.iter().filter_map(|t| t.ended_ms).max())
                .flatten(),
        }
    }
}

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

/// The exposition of `f` (read at `now_ms`), the board's groups and the waves; `agent` is
/// the workers' agent kind (`worker.agent`).
pub fn render(
    f: &Figures,
    board: &BoardView,
    waves: &[WaveFigures],
    agent: &str,
    now_ms: i64,
) -> String {
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

    let model = |m: &Option<String>| m.clone().unwrap_or_else(|| "default".into());
    o.family(
        "orch_spend_usd_total",
        "US dollars the workers' agents spent (history kept), by agent and model (default: the agent's own).",
    );
    if f.spend_by_model.is_empty() {
        o.sample(
            "orch_spend_usd_total",
            &[("agent", agent), ("model", "default")],
            f.spend_usd,
        );
    }
    for m in &f.spend_by_model {
        o.sample(
            "orch_spend_usd_total",
            &[("agent", agent), ("model", &model(&m.model))],
            m.cost_usd,
        );
    }

    o.family(
        "orch_spend_tokens_total",
        "Tokens the workers' agents used (history kept), by agent, model and kind (input, output, cache_read, cache_write).",
    );
    for m in &f.spend_by_model {
        let name = model(&m.model);
        for (kind, n) in [
            ("input", m.input_tokens),
            ("output", m.output_tokens),
            ("cache_read", m.cache_read_tokens),
            ("cache_write", m.cache_write_tokens),
        ] {
            o.sample(
                "orch_spend_tokens_total",
                &[("agent", agent), ("model", &name), ("kind", kind)],
                n as f64,
            );
        }
    }

    o.family("orch_fatal_holds", "Chains halted by a fatal hold.");
    o.sample("orch_fatal_holds", &[], f.fatal_holds as f64);

    o.family(
        "orch_ci_wait_seconds",
        "Seconds from a push to orch's decided CI verdict on it (green, red, sync_not_done, no_run; history kept).",
    );
    let waits: Vec<f64> = f
        .ci_waits_ms
        .iter()
        .map(|&ms| ms.max(0) as f64 / 1000.0)
        .collect();
    for &le in CI_WAIT_BUCKETS {
        let n = waits.iter().filter(|&&w| w <= le).count();
        o.sample(
            "orch_ci_wait_seconds_bucket",
            &[("le", &le.to_string())],
            n as f64,
        );
    }
    o.sample(
        "orch_ci_wait_seconds_bucket",
        &[("le", "+Inf")],
        waits.len() as f64,
    );
    o.sample("orch_ci_wait_seconds_sum", &[], waits.iter().sum());
    o.sample("orch_ci_wait_seconds_count", &[], waits.len() as f64);

    o.family(
        "orch_wave_tasks",
        "Tasks of each wave orch has run, by progress (pending, running, done, stopped).",
    );
    for w in waves {
        for p in ["pending", "running", "done", "stopped"] {
            let n = w.progress.iter().filter(|&&x| x == p).count();
            o.sample(
                "orch_wave_tasks",
                &[("wave", &w.name), ("progress", p)],
                n as f64,
            );
        }
    }

    o.family(
        "orch_wave_last_success_timestamp_seconds",
        "When each wave whose tasks are all done had its last task end (Unix seconds).",
    );
    for w in waves {
        if let Some(ms) = w.succeeded_ms {
            o.sample(
                "orch_wave_last_success_timestamp_seconds",
                &[("wave", &w.name)],
                ms as f64 / 1000.0,
            );
        }
    }

    o.family(
        "orch_forge_request_errors_total",
        "Supervisors' CI queries to the forge that failed after the client's retries, by kind (transient, blocking, malformed; history kept).",
    );
    for (event, kind) in crate::forge::ForgeError::EVENT_KINDS {
        let n = f
            .forge_errors
            .iter()
            .find(|(k, _)| k == event)
            .map_or(0, |(_, n)| *n);
        o.sample(
            "orch_forge_request_errors_total",
            &[("kind", kind)],
            n as f64,
        );
    }

    o.family(
        "orch_node_heartbeat_age_seconds",
        "Seconds since each node's last heartbeat (a lease renewal, a resume), on the database's clock.",
    );
    for (node, beat_ms, _) in &f.nodes {
        o.sample(
            "orch_node_heartbeat_age_seconds",
            &[("node", node)],
            (now_ms - beat_ms).max(0) as f64 / 1000.0,
        );
    }
    o.family(
        "orch_node_workers",
        "Live workers whose lease each node holds.",
    );
    for (node, _, workers) in &f.nodes {
        o.sample("orch_node_workers", &[("node", node)], *workers as f64);
    }
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
            ci_waits_ms: vec![20_000, 90_000, 10_000_000],
            forge_errors: vec![("forge_error_transient".into(), 4)],
            nodes: vec![("build-01".into(), 1_000, 3)],
            spend_by_model: vec![crate::store::board::ModelSpend {
                model: Some("opus".into()),
                cost_usd: 0.25,
                input_tokens: 100,
                output_tokens: 7,
                ..Default::default()
            }],
            ..Figures::default()
        };
        let board = BoardView { groups: Vec::new() };
        let waves = [
            WaveFigures {
                name: "w1".into(),
                progress: vec!["done", "running", "pending"],
                succeeded_ms: None,
            },
            WaveFigures {
                name: "w2".into(),
                progress: vec!["done"],
                succeeded_ms: Some(1_700_000_000_000),
            },
        ];
        let text = render(&f, &board, &waves, "claude", 3_500);
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
            let family = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s))
                .filter(|f| FAMILIES.contains(&(f, "histogram")))
                .unwrap_or(name);
            assert!(typed.last().is_some_and(|t| t == family), "{line}");
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
        assert!(text.contains("orch_forge_request_errors_total{kind=\"transient\"} 4\n"));
        assert!(text.contains("orch_forge_request_errors_total{kind=\"blocking\"} 0\n"));
        assert!(text.contains("orch_node_heartbeat_age_seconds{node=\"build-01\"} 2.5\n"));
        assert!(text.contains("orch_node_workers{node=\"build-01\"} 3\n"));
        assert!(text.contains("orch_spend_usd_total{agent=\"claude\",model=\"opus\"} 0.25\n"));
        assert!(text.contains(
            "orch_spend_tokens_total{agent=\"claude\",model=\"opus\",kind=\"output\"} 7\n"
        ));
        assert!(text.contains("orch_ci_wait_seconds_bucket{le=\"30\"} 1\n"));
        assert!(text.contains("orch_ci_wait_seconds_bucket{le=\"120\"} 2\n"));
        assert!(text.contains("orch_ci_wait_seconds_bucket{le=\"+Inf\"} 3\n"));
        assert!(text.contains("orch_ci_wait_seconds_count 3\n"));
        assert!(text.contains("orch_ci_wait_seconds_sum 10110\n"));
        assert!(text.contains("orch_wave_tasks{wave=\"w1\",progress=\"running\"} 1\n"));
        assert!(text.contains("orch_wave_tasks{wave=\"w2\",progress=\"stopped\"} 0\n"));
        assert!(
            text.contains("orch_wave_last_success_timestamp_seconds{wave=\"w2\"} 1700000000\n")
        );
        assert!(!text.contains("orch_wave_last_success_timestamp_seconds{wave=\"w1\"}"));
        for (n, kind) in FAMILIES {
            assert_eq!(n.ends_with("_total"), *kind == "counter", "{n}");
        }
    }

    /// docs/metrics.md's table: `| `name` | type | labels | meaning |` rows, in order.
    pub fn documented(doc: &str) -> Vec<(String, String)> {
        doc.lines()
            .filter_map(|l| l.strip_prefix("| `orch_"))
            .map(|rest| {
                let mut cells = rest.split('|');
                let name = format!(
                    "orch_{}",
                    cells.next().unwrap().trim().trim_end_matches('`')
                );
                let kind = cells.next().unwrap().trim().to_string();
                (name, kind)
            })
            .collect()
    }

    #[test]
    fn every_family_is_documented_with_its_type_in_order() {
        let doc = include_str!("../../docs/metrics.md");
        let want: Vec<(String, String)> = FAMILIES
            .iter()
            .map(|(n, k)| (n.to_string(), k.to_string()))
            .collect();
        assert_eq!(documented(doc), want);
    }

    #[test]
    fn the_grafana_dashboard_is_json_and_queries_documented_metrics_only() {
        let dash: serde_json::Value =
            serde_json::from_str(include_str!("../../docs/grafana-orch.json")).unwrap();
        let names: Vec<&str> = FAMILIES.iter().map(|(n, _)| *n).collect();
        let panels = dash["panels"].as_array().unwrap();
        assert!(panels.len() >= 8);
        let mut used = std::collections::BTreeSet::new();
        for p in panels {
            for t in p["targets"].as_array().into_iter().flatten() {
                let expr = t["expr"].as_str().unwrap();
                let mut found = false;
                for word in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
                    if let Some(base) = word.strip_prefix("orch_").map(|_| {
                        ["_bucket", "_sum", "_count"]
                            .iter()
                            .find_map(|s| word.strip_suffix(s))
                            .unwrap_or(word)
                    }) {
                        assert!(
                            names.contains(&base),
                            "{expr}: {base} is not a metric of orch"
                        );
                        used.insert(base.to_string());
                        found = true;
                    }
                }
                assert!(found, "{expr}");
            }
        }
        for n in [
            "orch_ci_wait_seconds",
            "orch_spend_tokens_total",
            "orch_wave_tasks",
            "orch_build_info",
        ] {
            assert!(used.contains(n), "the dashboard does not show {n}");
        }
    }
}
