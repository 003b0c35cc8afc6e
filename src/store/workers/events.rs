//! A worker's event log: each event placed at the length its log had when it was recorded.

use super::*;

/// Records an event with the worker log's length at this moment: everything in the log
/// before that offset was written before the event, so `orch logs` places it there — also
/// across crashes and respawns (the log is only ever appended to).
pub fn add_event(
    tx: &Tx,
    worker: &str,
    kind: &str,
    milestone: Milestone,
    detail: &str,
) -> crate::store::sql::Result<()> {
    let log_bytes = tx
        .path()
        .and_then(|db| Path::new(db).parent())
        .and_then(|state| std::fs::metadata(worker_log(state, worker)).ok())
        .map(|m| m.len() as i64)
        .unwrap_or(0);
    tx.prepare_cached("INSERT INTO worker_events (worker_id, at_ms, kind, milestone, detail, log_bytes) VALUES (?1, ?2, ?3, ?4, ?5, ?6)")?
        .execute(params![worker, now_ms(), kind, milestone.as_str(), detail, log_bytes])?;
    Ok(())
}

#[derive(Debug, Clone, Serialize)]
pub struct WorkerEvent {
    pub seq: i64,
    pub worker_id: String,
    pub at_ms: i64,
    pub kind: String,
    pub milestone: String,
    pub detail: String,
    /// The worker log's length when the event was recorded (`None`: recorded before orch
    /// kept it).
    #[serde(skip)]
    pub log_bytes: Option<i64>,
}

fn row_to_event(r: &crate::store::sql::Row) -> crate::store::sql::Result<WorkerEvent> {
    Ok(WorkerEvent {
        seq: r.get(0)?,
        worker_id: r.get(1)?,
        at_ms: r.get(2)?,
        kind: r.get(3)?,
        milestone: r.get(4)?,
        detail: r.get(5)?,
        log_bytes: r.get(6)?,
    })
}

pub fn events_since(tx: &Tx, after_seq: i64) -> crate::store::sql::Result<Vec<WorkerEvent>> {
    let mut stmt = tx.prepare_cached(
        "SELECT seq, worker_id, at_ms, kind, milestone, detail, log_bytes FROM worker_events WHERE seq > ?1 ORDER BY seq",
    )?;
    stmt.query_map([after_seq], row_to_event)?.collect()
}

pub fn worker_events(tx: &Tx, worker: &str) -> crate::store::sql::Result<Vec<WorkerEvent>> {
    worker_events_after(tx, worker, 0)
}

/// `worker`'s events after `after_seq`, in order.
pub fn worker_events_after(
    tx: &Tx,
    worker: &str,
    after_seq: i64,
) -> crate::store::sql::Result<Vec<WorkerEvent>> {
    let mut stmt = tx.prepare_cached(
        "SELECT seq, worker_id, at_ms, kind, milestone, detail, log_bytes FROM worker_events WHERE worker_id = ?1 AND seq > ?2 ORDER BY seq",
    )?;
    stmt.query_map(params![worker, after_seq], row_to_event)?
        .collect()
}
