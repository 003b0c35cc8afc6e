//! The request inbox: what operators and a worker's report channel ask of its supervisor, and
//! the answers.

use super::*;

/// What a request asks of a worker's supervisor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "request", rename_all = "snake_case")]
pub enum RequestKind {
    /// `orch report`: a worker's claim.
    Report {
        milestone: Milestone,
        sha: Option<String>,
        job: Option<String>,
        note: Option<String>,
    },
    /// `orch cancel`: an operator stops the worker.
    Cancel { by: String, reason: String },
    /// `orch approve`: an operator approves the change at `sha`, which touches protected
    /// paths.
    Approve { by: String, sha: String },
    /// `orch report FATAL --reason …`: the worker halts its chain.
    Fatal { reason: String },
    /// A row this orch does not understand (written by a newer one): refused, never dropped.
    Unknown { kind: String },
}

/// A claim or operator request waiting for the supervisor (the inbox).
#[derive(Debug, Clone, Serialize)]
pub struct Request {
    pub id: i64,
    pub worker_id: String,
    pub kind: RequestKind,
    pub created_ms: i64,
    pub processed_ms: Option<i64>,
    /// One line for whoever asked (what `orch report` prints).
    pub outcome: Option<String>,
    /// Whether the outcome is a refusal (what `orch report`'s exit code says).
    pub refused: Option<bool>,
}

fn row_to_request(r: &crate::store::sql::Row) -> crate::store::sql::Result<Request> {
    let kind: String = r.get(2)?;
    let milestone: Option<String> = r.get(3)?;
    let kind = match (
        kind.as_str(),
        milestone.as_deref().and_then(Milestone::parse),
    ) {
        ("report", Some(milestone)) => RequestKind::Report {
            milestone,
            sha: r.get(4)?,
            job: r.get(5)?,
            note: r.get(6)?,
        },
        ("approve", _) => match r.get::<_, Option<String>>(4)? {
            Some(sha) => RequestKind::Approve {
                by: r
                    .get::<_, Option<String>>(7)?
                    .unwrap_or_else(|| "operator".into()),
                sha,
            },
            None => RequestKind::Unknown { kind },
        },
        ("fatal", _) => RequestKind::Fatal {
            reason: r.get::<_, Option<String>>(6)?.unwrap_or_default(),
        },
        ("cancel", _) => RequestKind::Cancel {
            by: r
                .get::<_, Option<String>>(7)?
                .unwrap_or_else(|| "operator".into()),
            reason: r.get::<_, Option<String>>(6)?.unwrap_or_default(),
        },
        _ => RequestKind::Unknown { kind },
    };
    Ok(Request {
        id: r.get(0)?,
        worker_id: r.get(1)?,
        kind,
        created_ms: r.get(8)?,
        processed_ms: r.get(9)?,
        outcome: r.get(10)?,
        refused: r.get::<_, Option<i64>>(11)?.map(|v| v != 0),
    })
}

const REQUEST_COLUMNS: &str = "id, worker_id, kind, milestone, sha, job, note, by, created_ms, processed_ms, outcome, refused";

/// Queues a request for the worker's supervisor; returns its id.
pub fn add_request(tx: &Tx, worker: &str, kind: &RequestKind) -> crate::store::sql::Result<i64> {
    let (word, milestone, sha, job, note, by) = match kind {
        RequestKind::Report {
            milestone,
            sha,
            job,
            note,
        } => (
            "report",
            Some(milestone.as_str()),
            sha.as_deref(),
            job.as_deref(),
            note.as_deref(),
            None,
        ),
        RequestKind::Cancel { by, reason } => (
            "cancel",
            None,
            None,
            None,
            Some(reason.as_str()),
            Some(by.as_str()),
        ),
        RequestKind::Approve { by, sha } => (
            "approve",
            None,
            Some(sha.as_str()),
            None,
            None,
            Some(by.as_str()),
        ),
        RequestKind::Fatal { reason } => ("fatal", None, None, None, Some(reason.as_str()), None),
        RequestKind::Unknown { kind } => (kind.as_str(), None, None, None, None, None),
    };
    tx.query_row(
        "INSERT INTO requests (worker_id, kind, milestone, sha, job, note, by, created_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) RETURNING id",
        params![worker, word, milestone, sha, job, note, by, now_ms()],
        |r| r.get(0),
    )
}

pub fn pending_requests(tx: &Tx, worker: &str) -> crate::store::sql::Result<Vec<Request>> {
    let mut stmt = tx.prepare_cached(&format!(
        "SELECT {REQUEST_COLUMNS} FROM requests WHERE worker_id = ?1 AND processed_ms IS NULL ORDER BY id"
    ))?;
    stmt.query_map([worker], row_to_request)?.collect()
}

pub fn get_request(tx: &Tx, id: i64) -> crate::store::sql::Result<Option<Request>> {
    tx.prepare_cached(&format!(
        "SELECT {REQUEST_COLUMNS} FROM requests WHERE id = ?1"
    ))?
    .query_row([id], row_to_request)
    .optional()
}

/// Answers a request, once: false (nothing written) if it was already answered.
pub fn finish_request(
    tx: &Tx,
    id: i64,
    outcome: &str,
    refused: bool,
) -> crate::store::sql::Result<bool> {
    let n = tx
        .prepare_cached(
            "UPDATE requests SET processed_ms = ?2, outcome = ?3, refused = ?4 WHERE id = ?1 AND processed_ms IS NULL",
        )?
        .execute(params![id, now_ms(), outcome, refused])?;
    Ok(n == 1)
}
