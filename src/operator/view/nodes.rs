//! `orch nodes`: the hosts sharing the store.

use super::{Table, View, at, secs_between};
use crate::text::escape as esc;
use schemars::JsonSchema;
use serde::Serialize;

#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct NodesView {
    /// The node this command ran on (`ORCH_NODE`, `node.name`, else the host's name).
    pub this_node: String,
    /// Every node that ever beat, by name.
    pub nodes: Vec<NodeView>,
    /// Workers holding a chain lock, every node's together: what `worker.max_parallel_total`
    /// counts.
    pub running: i64,
    /// `worker.max_parallel_total`: the organisation's slots, every node together (none: no
    /// limit but each node's).
    pub max_parallel_total: Option<i64>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct NodeView {
    pub name: String,
    /// The host it last beat from (the first part of where its pids mean something: host,
    /// boot, PID namespace); null before it recorded one.
    pub host: Option<String>,
    /// The version of orch it ran at its last heartbeat.
    pub version: String,
    /// Its `worker.max_parallel`.
    pub slots: i64,
    /// Live workers whose lease it holds (or last held).
    pub workers: i64,
    #[schemars(extend("format" = "date-time"))]
    pub first_seen_at: String,
    /// Its last heartbeat: a supervisor's lease renewal, or a resume (cron).
    #[schemars(extend("format" = "date-time"))]
    pub heartbeat_at: String,
    /// Seconds since then, on the database's clock.
    pub heartbeat_age_s: u64,
    /// Some of its workers' leases ran out without being given up: their supervisors are gone
    /// (the node died, or is cut off), and another node's `orch resume` may take them over.
    pub lapsed: bool,
}

impl View for NodesView {
    const NAME: &'static str = "nodes";
}

impl NodesView {
    pub fn of(
        this: &str,
        rows: &[crate::store::nodes::NodeRow],
        now_ms: i64,
        running: usize,
        max_parallel_total: Option<usize>,
    ) -> NodesView {
        NodesView {
            this_node: this.to_string(),
            running: running as i64,
            max_parallel_total: max_parallel_total.map(|m| m as i64),
            nodes: rows
                .iter()
                .map(|n| NodeView {
                    name: n.name.clone(),
                    host: n
                        .place
                        .as_deref()
                        .and_then(|p| p.split('/').next())
                        .map(str::to_string),
                    version: n.version.clone(),
                    slots: n.slots,
                    workers: n.workers,
                    first_seen_at: at(n.started_ms),
                    heartbeat_at: at(n.heartbeat_ms),
                    heartbeat_age_s: secs_between(n.heartbeat_ms, now_ms),
                    lapsed: n.lapsed > 0,
                })
                .collect(),
        }
    }

    pub fn human(&self) -> String {
        if self.nodes.is_empty() {
            return format!(
                "no node has recorded a heartbeat yet (this one is {})\n",
                esc(&self.this_node)
            );
        }
        let mut t = Table::new(["NODE", "HOST", "HEARTBEAT", "WORKERS", "SLOTS", "VERSION"]);
        for n in &self.nodes {
            let mut name = esc(&n.name).into_owned();
            if n.name == self.this_node {
                name.push_str(" (this)");
            }
            if n.lapsed {
                name.push_str(" LAPSED");
            }
            t.row([
                name,
                esc(n.host.as_deref().unwrap_or("-")).into_owned(),
                format!("{} ago", super::human_duration(n.heartbeat_age_s)),
                n.workers.to_string(),
                n.slots.to_string(),
                esc(&n.version).into_owned(),
            ]);
        }
        t.right(3).right(4);
        let mut out = t.render();
        if let Some(max) = self.max_parallel_total {
            out.push_str(&format!(
                "organisation: {} of at most {max} workers running (worker.max_parallel_total)\n",
                self.running
            ));
        }
        if self.nodes.iter().any(|n| n.lapsed) {
            out.push_str("LAPSED: workers whose leases ran out (their supervisors are gone): `orch resume` on another node takes them over\n");
        }
        out
    }
}
