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
    /// Live workers on every node together.
    pub workers: i64,
    /// `worker.max_parallel_total`: the organisation's slots, every node together (none: no
    /// limit but each node's).
    pub max_parallel_total: Option<i64>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct NodeView {
    pub name: String,
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
    /// It has live workers but has not beaten for longer than a lease: it is gone (or cut
    /// off), and its workers are due for another node's `orch resume` to take over.
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
        max_parallel_total: Option<usize>,
    ) -> NodesView {
        NodesView {
            this_node: this.to_string(),
            workers: rows.iter().map(|n| n.workers).sum(),
            max_parallel_total: max_parallel_total.map(|m| m as i64),
            nodes: rows
                .iter()
                .map(|n| NodeView {
                    name: n.name.clone(),
                    version: n.version.clone(),
                    slots: n.slots,
                    workers: n.workers,
                    first_seen_at: at(n.started_ms),
                    heartbeat_at: at(n.heartbeat_ms),
                    heartbeat_age_s: secs_between(n.heartbeat_ms, now_ms),
                    lapsed: n.workers > 0
                        && now_ms - n.heartbeat_ms > crate::app::supervisor::LEASE_MS,
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
        let mut t = Table::new(["NODE", "HEARTBEAT", "WORKERS", "SLOTS", "VERSION"]);
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
                format!("{} ago", super::human_duration(n.heartbeat_age_s)),
                n.workers.to_string(),
                n.slots.to_string(),
                esc(&n.version).into_owned(),
            ]);
        }
        t.right(2).right(3);
        let mut out = t.render();
        if let Some(max) = self.max_parallel_total {
            out.push_str(&format!(
                "organisation: {} of at most {max} workers (worker.max_parallel_total)\n",
                self.workers
            ));
        }
        if self.nodes.iter().any(|n| n.lapsed) {
            out.push_str("LAPSED: live workers, no heartbeat for longer than a lease: `orch resume` on another node takes them over\n");
        }
        out
    }
}
