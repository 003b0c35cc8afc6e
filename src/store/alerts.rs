//! Alerts in SQLite beyond the plain record: de-duplication (a repeat count on the first
//! record within the window), resolution, and the delivery outbox — one row per (alert,
//! sink), claimed by one process at a time, retried until delivered or given up.
//!
//! Rows are created by whoever drains the outbox (`app::deliver`), from the sinks configured
//! then; an alert is `settled` once no row of it is pending.

use super::sql::{OptionalExtension, Tx, params};
use serde::Serialize;

/// What recording an alert came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Recorded {
    /// A new alert (to be delivered).
    New(i64),
    /// The same (worker or repository, kind) was raised within the window and is not
    /// resolved: its repeat count went up; nothing is sent again.
    Repeat { id: i64, repeats: i64 },
}

/// Records `a`, or counts it as a repeat of the same (worker — else repository —, kind)
/// raised since `a.at_ms - window_ms` and not resolved.
pub fn record(tx: &Tx, a: &AlertRecord, window_ms: i64) -> super::sql::Result<Recorded> {
    let since = a.at_ms - window_ms;
    let previous: Option<(i64, i64)> = match &a.worker_id {
        Some(w) => tx
            .query_row(
                "SELECT id, repeats FROM alerts WHERE worker_id = ?1 AND kind = ?2 AND at_ms >= ?3
                 AND resolved_ms IS NULL ORDER BY id DESC LIMIT 1",
                params![w, a.kind, since],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?,
        None => tx
            .query_row(
                "SELECT id, repeats FROM alerts WHERE worker_id IS NULL AND repo IS NOT DISTINCT FROM ?1 AND kind = ?2
                 AND at_ms >= ?3 AND resolved_ms IS NULL ORDER BY id DESC LIMIT 1",
                params![a.repo, a.kind, since],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?,
    };
    if let Some((id, repeats)) = previous {
        tx.execute(
            "UPDATE alerts SET repeats = repeats + 1, last_ms = ?2 WHERE id = ?1",
            params![id, a.at_ms],
        )?;
        return Ok(Recorded::Repeat {
            id,
            repeats: repeats + 1,
        });
    }
    let id = tx.query_row(
        "INSERT INTO alerts (at_ms, severity, worker_id, repo, kind, message, repeats, last_ms, settled)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, 1, ?1, 0) RETURNING id",
        params![a.at_ms, a.severity, a.worker_id, a.repo, a.kind, a.message],
        |r| r.get(0),
    )?;
    Ok(Recorded::New(id))
}

/// Marks the open alerts of `kind` about `worker` resolved (the condition ended); how many.
pub fn resolve(tx: &Tx, worker: &str, kind: &str, now_ms: i64) -> super::sql::Result<usize> {
    tx.execute(
        "UPDATE alerts SET resolved_ms = ?3 WHERE worker_id = ?1 AND kind = ?2 AND resolved_ms IS NULL",
        params![worker, kind, now_ms],
    )
}

/// Whether an alert of `kind` about `worker` (open or resolved, at any time) has `needle` in
/// its message: the same condition (e.g. the same moved head) was told already.
pub fn mentioned(tx: &Tx, worker: &str, kind: &str, needle: &str) -> super::sql::Result<bool> {
    tx.query_row(
        "SELECT EXISTS (SELECT 1 FROM alerts WHERE worker_id = ?1 AND kind = ?2
         AND message LIKE ?3)",
        params![worker, kind, format!("%{needle}%")],
        |r| r.get(0),
    )
}

/// Resolves the open alerts of `kind` about `repo`, whoever raised them (a FATAL cleared).
pub fn resolve_repo(tx: &Tx, repo: &str, kind: &str, now_ms: i64) -> super::sql::Result<usize> {
    tx.execute(
        "UPDATE alerts SET resolved_ms = ?3 WHERE repo = ?1 AND kind = ?2 AND resolved_ms IS NULL",
        params![repo, kind, now_ms],
    )
}

fn alert_of(r: &super::sql::Row) -> super::sql::Result<AlertRecord> {
    Ok(AlertRecord {
        id: r.get(0)?,
        at_ms: r.get(1)?,
        severity: r.get(2)?,
        worker_id: r.get(3)?,
        repo: r.get(4)?,
        kind: r.get(5)?,
        message: r.get(6)?,
        repeats: r.get(7)?,
        resolved_ms: r.get(8)?,
    })
}

const ALERT_COLUMNS: &str =
    "a.id, a.at_ms, a.severity, a.worker_id, a.repo, a.kind, a.message, a.repeats, a.resolved_ms";

/// Alerts whose delivery rows are not all settled yet (oldest first).
pub fn unsettled(tx: &Tx, limit: i64) -> super::sql::Result<Vec<AlertRecord>> {
    let mut stmt = tx.prepare_cached(&format!(
        "SELECT {ALERT_COLUMNS} FROM alerts a WHERE a.settled = 0 ORDER BY a.id LIMIT ?1"
    ))?;
    stmt.query_map([limit], alert_of)?.collect()
}

/// Creates the missing delivery rows of alert `id` for `sinks` (pending, due at `now_ms`),
/// and settles the alert if none is pending.
pub fn ensure_deliveries(
    tx: &Tx,
    id: i64,
    sinks: &[String],
    now_ms: i64,
) -> super::sql::Result<()> {
    for s in sinks {
        tx.execute(
            "INSERT INTO alert_deliveries (alert_id, sink, state, next_ms) VALUES (?1, ?2, 'pending', ?3) ON CONFLICT DO NOTHING",
            params![id, s, now_ms],
        )?;
    }
    settle(tx, id)
}

/// Marks alert `id` settled when none of its delivery rows is pending.
pub fn settle(tx: &Tx, id: i64) -> super::sql::Result<()> {
    tx.execute(
        "UPDATE alerts SET settled = 1 WHERE id = ?1 AND NOT EXISTS
           (SELECT 1 FROM alert_deliveries WHERE alert_id = ?1 AND state = 'pending')",
        [id],
    )?;
    Ok(())
}

/// A delivery this process claimed: send it, then [`finish`] it.
#[derive(Debug, Clone)]
pub struct Due {
    pub alert: AlertRecord,
    pub sink: String,
    /// Attempts made before this one.
    pub attempts: i64,
}

/// Claims up to `limit` pending deliveries that are due (`next_ms <= now_ms`, or all of them
/// with `every_pending`) and not claimed by another process (or whose claim expired), for
/// `claim_ms`.
pub fn claim_due(
    tx: &Tx,
    now_ms: i64,
    pid: i64,
    claim_ms: i64,
    every_pending: bool,
    limit: i64,
) -> super::sql::Result<Vec<Due>> {
    let mut stmt = tx.prepare_cached(&format!(
        "SELECT {ALERT_COLUMNS}, d.sink, d.attempts FROM alert_deliveries d JOIN alerts a ON a.id = d.alert_id
         WHERE d.state = 'pending' AND (d.next_ms <= ?1 OR ?2)
           AND (d.claimed_until_ms IS NULL OR d.claimed_until_ms < ?1)
         ORDER BY d.next_ms, d.alert_id LIMIT ?3"
    ))?;
    let due: Vec<Due> = stmt
        .query_map(params![now_ms, every_pending, limit], |r| {
            Ok(Due {
                alert: alert_of(r)?,
                sink: r.get(9)?,
                attempts: r.get(10)?,
            })
        })?
        .collect::<super::sql::Result<_>>()?;
    for d in &due {
        tx.execute(
            "UPDATE alert_deliveries SET claimed_by = ?3, claimed_until_ms = ?4 WHERE alert_id = ?1 AND sink = ?2",
            params![d.alert.id, d.sink, pid, now_ms + claim_ms],
        )?;
    }
    Ok(due)
}

/// How one attempt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptEnd {
    Delivered,
    /// Failed; tried again at `next_ms`.
    Retry {
        error: String,
        next_ms: i64,
    },
    /// Failed for the last time.
    GiveUp {
        why: String,
    },
}

/// Records the end of an attempt at (alert, sink) and settles the alert if it can.
pub fn finish(
    tx: &Tx,
    alert_id: i64,
    sink: &str,
    end: &AttemptEnd,
    now_ms: i64,
) -> super::sql::Result<()> {
    match end {
        AttemptEnd::Delivered => tx.execute(
            "UPDATE alert_deliveries SET state = 'delivered', attempts = attempts + 1, done_ms = ?3,
               claimed_by = NULL, claimed_until_ms = NULL WHERE alert_id = ?1 AND sink = ?2",
            params![alert_id, sink, now_ms],
        )?,
        AttemptEnd::Retry { error, next_ms } => tx.execute(
            "UPDATE alert_deliveries SET attempts = attempts + 1, last_error = ?3, next_ms = ?4,
               claimed_by = NULL, claimed_until_ms = NULL WHERE alert_id = ?1 AND sink = ?2",
            params![alert_id, sink, error, next_ms],
        )?,
        AttemptEnd::GiveUp { why } => tx.execute(
            "UPDATE alert_deliveries SET state = 'given_up', attempts = attempts + 1, last_error = ?3,
               done_ms = ?4, claimed_by = NULL, claimed_until_ms = NULL WHERE alert_id = ?1 AND sink = ?2",
            params![alert_id, sink, why, now_ms],
        )?,
    };
    settle(tx, alert_id)
}

/// Gives up every pending delivery to a sink that is no longer configured.
pub fn give_up_sink(
    tx: &Tx,
    alert_id: i64,
    sink: &str,
    why: &str,
    now_ms: i64,
) -> super::sql::Result<()> {
    finish(
        tx,
        alert_id,
        sink,
        &AttemptEnd::GiveUp { why: why.into() },
        now_ms,
    )
}

/// The delivery state of one alert at one sink, for `orch alerts`.
#[derive(Debug, Clone, Serialize)]
pub struct DeliveryRow {
    pub alert_id: i64,
    pub sink: String,
    /// pending | delivered | given_up
    pub state: String,
    pub attempts: i64,
    pub next_ms: i64,
    pub last_error: Option<String>,
    pub done_ms: Option<i64>,
}

/// The delivery rows of the alerts with ids in `from..`.
pub fn deliveries(tx: &Tx, from_id: i64) -> super::sql::Result<Vec<DeliveryRow>> {
    let mut stmt = tx.prepare_cached(
        "SELECT alert_id, sink, state, attempts, next_ms, last_error, done_ms FROM alert_deliveries
         WHERE alert_id >= ?1 ORDER BY alert_id, sink",
    )?;
    stmt.query_map([from_id], |r| {
        Ok(DeliveryRow {
            alert_id: r.get(0)?,
            sink: r.get(1)?,
            state: r.get(2)?,
            attempts: r.get(3)?,
            next_ms: r.get(4)?,
            last_error: r.get(5)?,
            done_ms: r.get(6)?,
        })
    })?
    .collect()
}

/// Whether any delivery is pending (cheap: the supervisor's delivery thread asks this often).
pub fn next_pending_ms(tx: &Tx) -> super::sql::Result<Option<i64>> {
    tx.query_row(
        "SELECT MIN(next_ms) FROM alert_deliveries WHERE state = 'pending'",
        [],
        |r| r.get(0),
    )
}

/// Whether some alert is not settled yet (its rows may still have to be created).
pub fn any_unsettled(tx: &Tx) -> super::sql::Result<bool> {
    tx.query_row(
        "SELECT EXISTS (SELECT 1 FROM alerts WHERE settled = 0)",
        [],
        |r| r.get(0),
    )
}

#[derive(Debug, Clone, Serialize)]
pub struct AlertRecord {
    pub id: i64,
    pub at_ms: i64,
    pub severity: String,
    pub worker_id: Option<String>,
    pub repo: Option<String>,
    pub kind: String,
    pub message: String,
    /// How often it was raised within the de-duplication window (1: once).
    pub repeats: i64,
    /// When the condition ended (a paused worker resumed), if it did.
    pub resolved_ms: Option<i64>,
}

pub fn add_alert(tx: &Tx, a: &AlertRecord) -> super::sql::Result<i64> {
    tx.query_row(
        "INSERT INTO alerts (at_ms, severity, worker_id, repo, kind, message) VALUES (?1, ?2, ?3, ?4, ?5, ?6) RETURNING id",
        params![a.at_ms, a.severity, a.worker_id, a.repo, a.kind, a.message],
        |r| r.get(0),
    )
}

pub fn alerts(tx: &Tx, since_ms: i64) -> super::sql::Result<Vec<AlertRecord>> {
    let mut stmt = tx.prepare_cached(
        "SELECT id, at_ms, severity, worker_id, repo, kind, message, repeats, resolved_ms FROM alerts WHERE at_ms >= ?1 OR last_ms >= ?1 ORDER BY id",
    )?;
    stmt.query_map([since_ms], |r| {
        Ok(AlertRecord {
            id: r.get(0)?,
            at_ms: r.get(1)?,
            severity: r.get(2)?,
            worker_id: r.get(3)?,
            repo: r.get(4)?,
            kind: r.get(5)?,
            message: r.get(6)?,
            repeats: r.get(7)?,
            resolved_ms: r.get(8)?,
        })
    })?
    .collect()
}
