//! Leases: who supervises a worker, on which node, until when, under which fencing token.
//!
//! **One supervisor per worker** (ARCHITECTURE.md, invariant 9). A lease in the worker row
//! (node, pid, process start time, expiry on the database's clock, fencing token). The spawner
//! holds it from the transaction that creates the worker until its supervisor takes it over
//! (`ORCH_LEASE_FROM`), renewing it meanwhile from a thread (`app::hold_lease_until_handover`);
//! `orch resume` claims orphans in a transaction that re-checks them and keeps each claim until
//! the supervisor it started has taken it over or has exited (`resume::ClaimsKept`, held by
//! `orch respawn` and `orch approve` too). Leases are taken and moved only through
//! [`claim_lease`], [`set_lease`], [`keep_claim`] and [`renew_lease`] (here); whether one is live is
//! `Lease::is_live` alone (another node's lease by its expiry alone). A lease holder's journal
//! entries are written with `Writer::Owner`, which writes nothing once another process owns the
//! worker. **Fencing:** each claim adds one to the worker's `fence`; a supervisor's store is
//! fenced with its token (`Store::fence`), and every write transaction of that store reads the
//! token first and writes nothing when it moved on (`StoreError::Fenced`; the supervisor then
//! kills its worker and exits). A stopped writer cannot keep the write lock either: PostgreSQL
//! ends a session idle in a transaction after 15 s (`pg::IDLE_IN_TRANSACTION`); on SQLite the
//! write queue ends an orch process stopped holding its turn (`write_queue.rs`). **Nodes:**
//! orphan sweeps and kills touch only this node's workers; `worker.max_parallel` counts this
//! node's lock holders (`nodes::lock_holders_on`), `worker.max_parallel_total` every node's.

use super::*;

/// One process's claim to supervise a worker: its node, pid, process start time (so a reused
/// pid is not mistaken for it), expiry and fencing token. Renewed by its holder; given up by
/// setting it to 0.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub pid: i64,
    pub start: Option<i64>,
    pub until_ms: i64,
    /// `None`: taken before nodes were recorded (by a process of this host).
    pub node: Option<String>,
    pub fence: i64,
}

impl Lease {
    /// Valid at `now` and held by a process that is still the one that took it. A lease of
    /// another node is judged by its expiry alone: its pid names nothing here.
    pub fn is_live(&self, now: i64) -> bool {
        self.until_ms > now
            && (!self.is_here()
                || crate::process::process_alive(self.pid as i32, self.start.map(|s| s as u64)))
    }

    /// Taken by a process of this node (whose pid this process can look at).
    pub fn is_here(&self) -> bool {
        self.node
            .as_deref()
            .is_none_or(|n| n == crate::node::name())
    }

    /// Held by process `pid` of this node.
    pub fn held_by(&self, pid: i64) -> bool {
        self.pid == pid && self.is_here()
    }
}

/// Makes process `pid` (started at `start` ticks) of this node the worker's supervisor, with
/// a lease of `for_ms` on the database's clock and the next fencing token, which it returns.
/// Callers check in the same transaction that they may.
pub fn claim_lease(
    tx: &Tx,
    id: &str,
    pid: i64,
    start: Option<i64>,
    for_ms: i64,
) -> crate::store::sql::Result<i64> {
    let until = tx.clock_ms()? + for_ms;
    tx.prepare_cached(
        "UPDATE workers SET supervisor_pid = ?2, supervisor_start = ?3, lease_until_ms = ?4,
           node = ?5, fence = fence + 1 WHERE id = ?1 RETURNING fence",
    )?
    .query_row(params![id, pid, start, until, crate::node::name()], |r| {
        r.get(0)
    })
}

/// A lease's expiry `for_ms` from now on the database's clock; `None`: given up (0).
fn lease_until(tx: &Tx, for_ms: Option<i64>) -> crate::store::sql::Result<i64> {
    Ok(match for_ms {
        Some(ms) => tx.clock_ms()? + ms,
        None => 0,
    })
}

/// Moves the lease of process `pid` of this node on the worker to `for_ms` from the database's
/// clock (`None`: gives it up). False when that process no longer holds it.
pub fn set_lease(
    tx: &Tx,
    id: &str,
    pid: i64,
    for_ms: Option<i64>,
) -> crate::store::sql::Result<bool> {
    let until = lease_until(tx, for_ms)?;
    let n = tx
        .prepare_cached(
            "UPDATE workers SET lease_until_ms = ?3
             WHERE id = ?1 AND supervisor_pid = ?2 AND (node IS NULL OR node = ?4)",
        )?
        .execute(params![id, pid, until, crate::node::name()])?;
    Ok(n == 1)
}

/// [`set_lease`] for a claim not given back: one given back meanwhile (`set_lease(.., None)`:
/// its lease 0) is left so, whatever the clock says. False when that process no longer holds
/// it, or gave it back.
pub fn keep_claim(tx: &Tx, id: &str, pid: i64, for_ms: i64) -> crate::store::sql::Result<bool> {
    let until = lease_until(tx, Some(for_ms))?;
    let n = tx
        .prepare_cached(
            "UPDATE workers SET lease_until_ms = ?3
             WHERE id = ?1 AND supervisor_pid = ?2 AND (node IS NULL OR node = ?4)
               AND lease_until_ms <> 0",
        )?
        .execute(params![id, pid, until, crate::node::name()])?;
    Ok(n == 1)
}

/// Moves the lease taken with fencing token `fence` to `for_ms` from the database's clock
/// (`None`: gives it up). False when the lease was taken again since (by anyone, anywhere).
pub fn renew_lease(
    tx: &Tx,
    id: &str,
    fence: i64,
    for_ms: Option<i64>,
) -> crate::store::sql::Result<bool> {
    let until = lease_until(tx, for_ms)?;
    let n = tx
        .prepare_cached("UPDATE workers SET lease_until_ms = ?3 WHERE id = ?1 AND fence = ?2")?
        .execute(params![id, fence, until])?;
    Ok(n == 1)
}

/// The worker's fencing token now (`None`: no such worker).
pub fn fence_of(tx: &Tx, id: &str) -> crate::store::sql::Result<Option<i64>> {
    tx.prepare_cached("SELECT fence FROM workers WHERE id = ?1")?
        .query_row([id], |r| r.get(0))
        .optional()
}
