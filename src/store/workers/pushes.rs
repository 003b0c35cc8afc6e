//! A worker's pushes and the CI verdicts recorded for them.

use super::*;

/// A pushed SHA and orch's verdict for it.
#[derive(Debug, Clone, Serialize)]
pub struct PushRecord {
    pub sha: Sha,
    pub pushed_ms: i64,
    pub verdict: Option<VerdictKind>,
    pub detail: Option<String>,
    pub failed_jobs: Vec<String>,
    /// The CI runs orch judged, when known.
    pub runs: Option<Vec<CiRun>>,
    pub checked_ms: Option<i64>,
}

/// A verdict as recorded against a push.
#[derive(Debug, Clone, Copy)]
pub struct VerdictRow<'a> {
    pub kind: VerdictKind,
    pub detail: &'a str,
    pub failed_jobs: &'a [String],
    /// The runs it was judged on (None: not known, e.g. rebuilt from a checkpoint).
    pub runs: Option<&'a [CiRun]>,
}

impl<'a> VerdictRow<'a> {
    pub fn of(v: &'a crate::ci::verdict::Verdict, runs: &'a [CiRun]) -> VerdictRow<'a> {
        VerdictRow {
            kind: v.kind,
            detail: &v.detail,
            failed_jobs: &v.failed_jobs,
            runs: Some(runs),
        }
    }

    fn params(&self) -> (String, String) {
        (
            serde_json::to_string(self.failed_jobs).expect("strings serialise"),
            self.runs
                .map(|r| serde_json::to_string(r).expect("runs serialise"))
                .unwrap_or_else(|| "null".into()),
        )
    }
}

const PUSH_COLUMNS: &str = "sha, pushed_ms, verdict, detail, failed_jobs, runs, checked_ms";

fn row_to_push(r: &crate::store::sql::Row) -> crate::store::sql::Result<PushRecord> {
    let verdict: Option<String> = r.get(2)?;
    let failed: Option<String> = r.get(4)?;
    let runs: Option<String> = r.get(5)?;
    Ok(PushRecord {
        sha: r.get(0)?,
        pushed_ms: r.get(1)?,
        verdict: verdict.as_deref().and_then(VerdictKind::parse),
        detail: r.get(3)?,
        failed_jobs: failed
            .and_then(|f| serde_json::from_str(&f).ok())
            .unwrap_or_default(),
        runs: runs.and_then(|x| serde_json::from_str(&x).ok()),
        checked_ms: r.get(6)?,
    })
}

pub fn record_push(
    tx: &Tx,
    worker: &str,
    sha: &str,
    pushed_ms: i64,
) -> crate::store::sql::Result<()> {
    tx.prepare_cached(
        "INSERT INTO pushes (worker_id, sha, pushed_ms) VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING",
    )?
    .execute(params![worker, sha, pushed_ms])?;
    Ok(())
}

pub fn record_verdict(
    tx: &Tx,
    worker: &str,
    sha: &str,
    v: VerdictRow,
) -> crate::store::sql::Result<()> {
    let (failed, runs) = v.params();
    tx.prepare_cached(
        "UPDATE pushes SET verdict = ?3, detail = ?4, failed_jobs = ?5, runs = ?6, checked_ms = ?7 WHERE worker_id = ?1 AND sha = ?2",
    )?
    .execute(params![worker, sha, v.kind.as_str(), v.detail, failed, runs, now_ms()])?;
    Ok(())
}

/// Records a verdict orch observed for `sha` (e.g. by `orch ci status`) in the push history of
/// whichever worker pushed it. Returns how many records were updated.
pub fn record_observed_verdict(
    tx: &Tx,
    sha: &str,
    v: VerdictRow,
) -> crate::store::sql::Result<usize> {
    let (failed, runs) = v.params();
    tx.prepare_cached("UPDATE pushes SET verdict = ?2, detail = ?3, failed_jobs = ?4, runs = ?5, checked_ms = ?6 WHERE sha = ?1")?
        .execute(params![sha, v.kind.as_str(), v.detail, failed, runs, now_ms()])
}

/// The push record of `worker` for `sha`, if it pushed it.
pub fn push_of(tx: &Tx, worker: &str, sha: &str) -> crate::store::sql::Result<Option<PushRecord>> {
    tx.prepare_cached(&format!(
        "SELECT {PUSH_COLUMNS} FROM pushes WHERE worker_id = ?1 AND sha = ?2"
    ))?
    .query_row([worker, sha], row_to_push)
    .optional()
}

/// `w` as shown to people: its verdict (and failed jobs, detail) the latest recorded for its
/// tracked commit. A worker's progress keeps the verdict it had when it last moved, and a
/// settled one (FAILED, BLOCKED, waiting for an operator) no longer hears CI, while a later
/// answer — the supervisor's last look, `orch ci status` — is still recorded against the push.
pub fn with_latest_verdict(tx: &Tx, w: &mut WorkerRecord) -> crate::store::sql::Result<()> {
    let Some(sha) = &w.progress.tracked_sha else {
        return Ok(());
    };
    if let Some(push) = push_of(tx, &w.id, sha)?
        && let Some(kind) = push.verdict
    {
        w.progress.verdict = Some(kind);
        w.progress.failed_jobs = push.failed_jobs;
        w.progress.verdict_detail = push.detail;
    }
    Ok(())
}

pub fn pushes(tx: &Tx, worker: &str) -> crate::store::sql::Result<Vec<PushRecord>> {
    let mut stmt = tx.prepare_cached(&format!(
        "SELECT {PUSH_COLUMNS} FROM pushes WHERE worker_id = ?1 ORDER BY rowid"
    ))?;
    stmt.query_map([worker], row_to_push)?.collect()
}

/// What the other workers of `repo` pushed: (worker, SHA). A push a worker claims must be
/// none of these, nor in their history.
pub fn others_pushes(
    tx: &Tx,
    repo: &str,
    worker: &str,
) -> crate::store::sql::Result<Vec<(String, String)>> {
    let mut stmt = tx.prepare_cached(
        "SELECT p.worker_id, p.sha FROM pushes p JOIN workers w ON w.id = p.worker_id \
         WHERE w.repo = ?1 AND p.worker_id != ?2 ORDER BY p.rowid",
    )?;
    stmt.query_map([repo, worker], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect()
}

/// The latest verdict any worker recorded for `sha` (lets `orch ci status` answer a worker
/// without the forge token, which workers never hold).
pub fn recorded_verdict(tx: &Tx, sha: &str) -> crate::store::sql::Result<Option<PushRecord>> {
    tx.query_row(
        &format!("SELECT {PUSH_COLUMNS} FROM pushes WHERE sha = ?1 AND verdict IS NOT NULL ORDER BY checked_ms DESC LIMIT 1"),
        [sha],
        row_to_push,
    )
    .optional()
}

/// When `sha` was first pushed by any worker (bounds a forge's paging and the no-run timeout).
pub fn first_pushed_ms(tx: &Tx, sha: &str) -> crate::store::sql::Result<Option<i64>> {
    tx.query_row(
        "SELECT MIN(pushed_ms) FROM pushes WHERE sha = ?1",
        [sha],
        |row| row.get(0),
    )
}
