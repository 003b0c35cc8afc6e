//! Nodes: the hosts sharing this store, each with its heartbeat (beaten by its supervisors'
//! lease renewals and by its commands that write), its slots (`worker.max_parallel`) and the
//! version of orch it runs. What `orch nodes` lists; a worker's node is its lease's.

use super::sql::{Tx, params};
use serde::Serialize;

/// How often a node's heartbeat row is rewritten at most: every supervisor renews its lease
/// each few seconds, and one row per node need not be written by each.
pub const BEAT_EVERY_MS: i64 = 4_000;

/// One node as stored, with the workers its processes supervise now.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NodeRow {
    pub name: String,
    pub version: String,
    /// Its `worker.max_parallel` when it last beat.
    pub slots: i64,
    pub started_ms: i64,
    pub heartbeat_ms: i64,
    /// Live workers whose lease this node holds (or last held).
    pub workers: i64,
}

/// Records that node `name` is alive now (on the database's clock), with its slots and this
/// process's version; at most once per [`BEAT_EVERY_MS`] per node.
pub fn beat(tx: &Tx, name: &str, slots: usize) -> super::sql::Result<()> {
    let now = tx.clock_ms()?;
    tx.prepare_cached(
        "INSERT INTO nodes (name, version, slots, started_ms, heartbeat_ms)
         VALUES (?1, ?2, ?3, ?4, ?4)
         ON CONFLICT (name) DO UPDATE SET version = excluded.version, slots = excluded.slots,
           heartbeat_ms = excluded.heartbeat_ms
         WHERE nodes.heartbeat_ms <= excluded.heartbeat_ms - ?5
            OR nodes.version <> excluded.version OR nodes.slots <> excluded.slots",
    )?
    .execute(params![
        name,
        env!("CARGO_PKG_VERSION"),
        slots as i64,
        now,
        BEAT_EVERY_MS
    ])?;
    Ok(())
}

/// Every node that ever beat, by name, with its live workers.
pub fn list(tx: &Tx) -> super::sql::Result<Vec<NodeRow>> {
    let mut stmt = tx.prepare_cached(
        "SELECT n.name, n.version, n.slots, n.started_ms, n.heartbeat_ms,
           (SELECT COUNT(*) FROM workers w WHERE w.node = n.name AND w.ended_ms IS NULL)
         FROM nodes n ORDER BY n.name",
    )?;
    stmt.query_map([], |r| {
        Ok(NodeRow {
            name: r.get(0)?,
            version: r.get(1)?,
            slots: r.get(2)?,
            started_ms: r.get(3)?,
            heartbeat_ms: r.get(4)?,
            workers: r.get(5)?,
        })
    })?
    .collect()
}

/// Workers holding a chain lock on any node: the organisation's slots taken
/// (`worker.max_parallel_total`).
pub fn lock_holders_all(tx: &Tx) -> super::sql::Result<usize> {
    let n: i64 = tx
        .prepare_cached("SELECT COUNT(*) FROM locks WHERE kind = 'worker'")?
        .query_row([], |r| r.get(0))?;
    Ok(n as usize)
}

/// Workers holding a chain lock whose lease is this node's: the slots it has taken (a worker
/// of a node that never recorded one counts here: it was started before nodes existed, on the
/// one host there was).
pub fn lock_holders_on(tx: &Tx, node: &str) -> super::sql::Result<usize> {
    let n: i64 = tx
        .prepare_cached(
            "SELECT COUNT(*) FROM locks l JOIN workers w ON w.id = l.holder
             WHERE l.kind = 'worker' AND (w.node IS NULL OR w.node = ?1)",
        )?
        .query_row([node], |r| r.get(0))?;
    Ok(n as usize)
}
