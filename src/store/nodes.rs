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
    /// Where it last beat from (`node::place`: host, boot, PID namespace).
    pub place: Option<String>,
    /// Live workers whose lease this node holds (or last held).
    pub workers: i64,
    /// Of those, the ones whose lease ran out without being given up: their supervisor is
    /// gone (the node died, or is cut off) and another node's resume may take them over. A
    /// worker whose supervisor ended it properly (BLOCKED, waiting for an operator) gave its
    /// lease up and is not counted.
    pub lapsed: i64,
}

/// How long a node's heartbeat keeps its name to its place: another place beating under the
/// name within this time is a second host under one name (a node that moved — a restored VM,
/// a new container — may take the name once its old place has been quiet this long).
pub const NAME_HELD_MS: i64 = 60_000;

/// Another place beat under this node's name lately: where, and how long ago (ms).
#[derive(Debug, Clone, PartialEq)]
pub struct NameClash {
    pub name: String,
    pub place: String,
    pub age_ms: i64,
}

impl std::fmt::Display for NameClash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "node name {:?} is in use by another host: {} beat under it {} s ago, and this process runs at {}. Each host needs a node name of its own (node.name in repos.yaml, or ORCH_NODE): under one name, each would judge the other's leases by process ids that mean nothing on its own host",
            self.name,
            crate::text::escape(&self.place),
            self.age_ms / 1000,
            crate::node::place()
        )
    }
}

/// Whether another place than `place` beat under node `name` within [`NAME_HELD_MS`].
pub fn clash(tx: &Tx, name: &str, place: &str) -> super::sql::Result<Option<NameClash>> {
    use super::sql::OptionalExtension;
    let now = tx.clock_ms()?;
    let row: Option<(Option<String>, i64)> = tx
        .prepare_cached("SELECT place, heartbeat_ms FROM nodes WHERE name = ?1")?
        .query_row([name], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    Ok(match row {
        Some((Some(other), at)) if other != place && now - at < NAME_HELD_MS => Some(NameClash {
            name: name.to_string(),
            place: other,
            age_ms: now - at,
        }),
        _ => None,
    })
}

/// Records that node `name` is alive now (on the database's clock) at `place`
/// (`node::place`), with its slots and this process's version; at most once per
/// [`BEAT_EVERY_MS`] per node. Writes nothing when another place holds the name
/// ([`clash`]): that is returned, for the caller to refuse or to say.
pub fn beat(
    tx: &Tx,
    name: &str,
    place: &str,
    slots: usize,
) -> super::sql::Result<Option<NameClash>> {
    if let Some(c) = clash(tx, name, place)? {
        return Ok(Some(c));
    }
    let now = tx.clock_ms()?;
    tx.prepare_cached(
        "INSERT INTO nodes (name, version, slots, started_ms, heartbeat_ms, place)
         VALUES (?1, ?2, ?3, ?4, ?4, ?6)
         ON CONFLICT (name) DO UPDATE SET version = excluded.version, slots = excluded.slots,
           heartbeat_ms = excluded.heartbeat_ms, place = excluded.place
         WHERE nodes.heartbeat_ms <= excluded.heartbeat_ms - ?5
            OR nodes.version <> excluded.version OR nodes.slots <> excluded.slots
            OR nodes.place IS NULL OR nodes.place <> excluded.place",
    )?
    .execute(params![
        name,
        env!("CARGO_PKG_VERSION"),
        slots as i64,
        now,
        BEAT_EVERY_MS,
        place
    ])?;
    Ok(None)
}

/// Every node that ever beat, by name, with its live workers.
pub fn list(tx: &Tx) -> super::sql::Result<Vec<NodeRow>> {
    let now = tx.clock_ms()?;
    let mut stmt = tx.prepare_cached(
        "SELECT n.name, n.version, n.slots, n.started_ms, n.heartbeat_ms, n.place,
           (SELECT COUNT(*) FROM workers w WHERE w.node = n.name AND w.ended_ms IS NULL),
           (SELECT COUNT(*) FROM workers w WHERE w.node = n.name AND w.ended_ms IS NULL
              AND w.lease_until_ms > 0 AND w.lease_until_ms < ?1)
         FROM nodes n ORDER BY n.name",
    )?;
    stmt.query_map([now], |r| {
        Ok(NodeRow {
            name: r.get(0)?,
            version: r.get(1)?,
            slots: r.get(2)?,
            started_ms: r.get(3)?,
            heartbeat_ms: r.get(4)?,
            place: r.get(5)?,
            workers: r.get(6)?,
            lapsed: r.get(7)?,
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
