//! Cascade: the CI verdict of each repository's base branch, as last polled, shared by every
//! orch process that watches it. Whoever finds the row stale claims the next poll (a short
//! lease), so one poll per repository per interval serves every dependent worker.

use super::sql::{OptionalExtension, Tx, params};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamRow {
    pub repo: String,
    pub branch: String,
    /// The head of the base branch when polled (`None`: no such branch on the forge).
    pub sha: Option<String>,
    /// `ci::verdict::VerdictKind` as a word (`red`, `green`, `running`, …).
    pub verdict: Option<String>,
    pub failed_jobs: Vec<String>,
    pub detail: Option<String>,
    pub checked_ms: i64,
}

pub fn get(tx: &Tx, repo: &str) -> super::sql::Result<Option<UpstreamRow>> {
    tx.query_row(
        "SELECT repo, branch, sha, verdict, failed_jobs, detail, checked_ms FROM upstream_ci WHERE repo = ?1",
        [repo],
        |r| {
            let jobs: String = r.get(4)?;
            Ok(UpstreamRow {
                repo: r.get(0)?,
                branch: r.get(1)?,
                sha: r.get(2)?,
                verdict: r.get(3)?,
                failed_jobs: serde_json::from_str(&jobs).unwrap_or_default(),
                detail: r.get(5)?,
                checked_ms: r.get(6)?,
            })
        },
    )
    .optional()
}

/// Claims the next poll of `repo` for `pid` until `now + lease_ms`, if its row is older than
/// `max_age_ms` and nobody else holds the claim.
pub fn claim_poll(
    tx: &Tx,
    repo: &str,
    branch: &str,
    pid: i64,
    now: i64,
    max_age_ms: i64,
    lease_ms: i64,
) -> super::sql::Result<bool> {
    tx.execute(
        "INSERT INTO upstream_ci (repo, branch) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
        params![repo, branch],
    )?;
    let n = tx.execute(
        "UPDATE upstream_ci SET poller_pid = ?2, poll_until_ms = ?3 + ?5
         WHERE repo = ?1 AND checked_ms < ?3 - ?4 AND poll_until_ms < ?3",
        params![repo, pid, now, max_age_ms, lease_ms],
    )?;
    Ok(n == 1)
}

/// Records a poll's result and lets the claim go.
pub fn put(tx: &Tx, row: &UpstreamRow) -> super::sql::Result<()> {
    tx.execute(
        "INSERT INTO upstream_ci (repo, branch, sha, verdict, failed_jobs, detail, checked_ms, poller_pid, poll_until_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, NULL, 0)
         ON CONFLICT (repo) DO UPDATE SET branch = ?2, sha = ?3, verdict = ?4, failed_jobs = ?5,
           detail = ?6, checked_ms = ?7, poller_pid = NULL, poll_until_ms = 0",
        params![
            row.repo,
            row.branch,
            row.sha,
            row.verdict,
            serde_json::to_string(&row.failed_jobs).unwrap_or_else(|_| "[]".into()),
            row.detail,
            row.checked_ms
        ],
    )?;
    Ok(())
}

/// Lets a claim go without a result (the forge failed): the next watcher tries.
/// Keeps `pid`'s claim on the next poll of `repo` until `until_ms` (a poll the forge failed:
/// nobody asks it again before then).
pub fn hold_claim(tx: &Tx, repo: &str, pid: i64, until_ms: i64) -> super::sql::Result<()> {
    tx.execute(
        "UPDATE upstream_ci SET poll_until_ms = ?3 WHERE repo = ?1 AND poller_pid = ?2",
        params![repo, pid, until_ms],
    )?;
    Ok(())
}

pub fn release_claim(tx: &Tx, repo: &str) -> super::sql::Result<()> {
    tx.execute(
        "UPDATE upstream_ci SET poller_pid = NULL, poll_until_ms = 0 WHERE repo = ?1",
        [repo],
    )?;
    Ok(())
}
