//! Chain locks in SQLite: atomic acquire and release, each recorded in `lock_history`.

use super::{Store, StoreError, now_ms};
use crate::graph::RepoGraph;
use crate::lock::{Blocker, ChainLock, HolderKind, blockers};
use rusqlite::{OptionalExtension, Transaction, params};

pub type LockRow = ChainLock;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockAttempt {
    Acquired(ChainLock),
    Blocked(Vec<Blocker>),
}

/// One acquire or release, in commit order (`seq`).
#[derive(Debug, Clone, serde::Serialize)]
pub struct LockHistoryEntry {
    pub seq: i64,
    pub lock_id: i64,
    pub action: String,
    pub repo: String,
    pub holder: String,
    pub kind: String,
    pub reason: Option<String>,
    pub by: Option<String>,
    pub pid: i64,
    pub at_ms: i64,
}

fn row_to_lock(r: &rusqlite::Row) -> rusqlite::Result<ChainLock> {
    let kind: String = r.get(3)?;
    Ok(ChainLock {
        id: r.get(0)?,
        repo: r.get(1)?,
        holder: r.get(2)?,
        kind: HolderKind::parse(&kind).unwrap_or(HolderKind::Worker),
        reason: r.get(4)?,
        by: r.get(5)?,
        acquired_ms: r.get(6)?,
    })
}

/// All active locks, by repository.
pub fn active_locks(tx: &Transaction) -> rusqlite::Result<Vec<ChainLock>> {
    let mut stmt = tx.prepare_cached(
        "SELECT id, repo, holder, kind, reason, by, acquired_ms FROM locks ORDER BY repo",
    )?;
    stmt.query_map([], row_to_lock)?.collect()
}

/// Whether `holder` (a worker id) holds a chain lock.
pub fn holds_lock(tx: &Transaction, holder: &str) -> rusqlite::Result<bool> {
    let n: i64 = tx
        .prepare_cached("SELECT COUNT(*) FROM locks WHERE holder = ?1")?
        .query_row([holder], |r| r.get(0))?;
    Ok(n > 0)
}

/// How many workers hold chain locks (what `worker.max_parallel` bounds).
pub fn worker_lock_count(tx: &Transaction) -> rusqlite::Result<usize> {
    let n: i64 = tx
        .prepare_cached("SELECT COUNT(*) FROM locks WHERE kind = 'worker'")?
        .query_row([], |r| r.get(0))?;
    Ok(n as usize)
}

/// Takes `repo`'s chain lock inside an already-open IMMEDIATE transaction, or reports what
/// blocks it. Callers that must record more in the same transaction (spawn) use this.
pub fn try_lock_in(
    tx: &Transaction,
    graph: &RepoGraph,
    repo: &str,
    holder: &str,
    kind: HolderKind,
    reason: Option<&str>,
    by: Option<&str>,
) -> rusqlite::Result<LockAttempt> {
    let active = active_locks(tx)?;
    let blocking = blockers(graph, repo, &active);
    if !blocking.is_empty() {
        return Ok(LockAttempt::Blocked(blocking));
    }
    let now = now_ms();
    tx.prepare_cached("INSERT INTO locks (repo, holder, kind, reason, by, acquired_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6)")?
        .execute(params![repo, holder, kind.as_str(), reason, by, now])?;
    let id = tx.last_insert_rowid();
    record(
        tx,
        id,
        "acquire",
        repo,
        holder,
        kind.as_str(),
        reason,
        by,
        now,
    )?;
    Ok(LockAttempt::Acquired(ChainLock {
        id,
        repo: repo.to_string(),
        holder: holder.to_string(),
        kind,
        reason: reason.map(str::to_string),
        by: by.map(str::to_string),
        acquired_ms: now,
    }))
}

/// Releases the lock held by `holder`, if any, recording why and by whom.
pub fn release_in(
    tx: &Transaction,
    holder: &str,
    reason: Option<&str>,
    by: Option<&str>,
) -> rusqlite::Result<Option<ChainLock>> {
    let lock = tx
        .prepare_cached(
            "SELECT id, repo, holder, kind, reason, by, acquired_ms FROM locks WHERE holder = ?1",
        )?
        .query_row([holder], row_to_lock)
        .optional()?;
    if let Some(l) = &lock {
        tx.execute("DELETE FROM locks WHERE id = ?1", [l.id])?;
        record(
            tx,
            l.id,
            "release",
            &l.repo,
            &l.holder,
            l.kind.as_str(),
            reason,
            by,
            now_ms(),
        )?;
    }
    Ok(lock)
}

#[allow(clippy::too_many_arguments)]
fn record(
    tx: &Transaction,
    lock_id: i64,
    action: &str,
    repo: &str,
    holder: &str,
    kind: &str,
    reason: Option<&str>,
    by: Option<&str>,
    at_ms: i64,
) -> rusqlite::Result<()> {
    tx.execute(
        "INSERT INTO lock_history (lock_id, action, repo, holder, kind, reason, by, pid, at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        params![
            lock_id,
            action,
            repo,
            holder,
            kind,
            reason,
            by,
            std::process::id(),
            at_ms
        ],
    )?;
    Ok(())
}

impl Store {
    /// Takes `repo`'s chain lock for `holder` in one `BEGIN IMMEDIATE` transaction.
    pub fn try_lock(
        &mut self,
        graph: &RepoGraph,
        repo: &str,
        holder: &str,
        kind: HolderKind,
        reason: Option<&str>,
        by: Option<&str>,
    ) -> Result<LockAttempt, StoreError> {
        self.write(|tx| try_lock_in(tx, graph, repo, holder, kind, reason, by))
    }

    /// Releases the operator hold on `repo`. Refuses to touch a worker's lock.
    pub fn unhold(
        &mut self,
        repo: &str,
        by: Option<&str>,
    ) -> Result<Result<ChainLock, Option<ChainLock>>, StoreError> {
        self.write(|tx| {
            let lock = tx
                .query_row(
                    "SELECT id, repo, holder, kind, reason, by, acquired_ms FROM locks WHERE repo = ?1",
                    [repo],
                    row_to_lock,
                )
                .optional()?;
            match lock {
                Some(l) if l.kind == HolderKind::Hold => {
                    tx.execute("DELETE FROM locks WHERE id = ?1", [l.id])?;
                    record(tx, l.id, "release", &l.repo, &l.holder, "hold", Some("unhold"), by, now_ms())?;
                    Ok(Ok(l))
                }
                other => Ok(Err(other)),
            }
        })
    }

    pub fn release(
        &mut self,
        holder: &str,
        reason: Option<&str>,
        by: Option<&str>,
    ) -> Result<Option<ChainLock>, StoreError> {
        self.write(|tx| release_in(tx, holder, reason, by))
    }

    pub fn locks(&mut self) -> Result<Vec<ChainLock>, StoreError> {
        self.read(active_locks)
    }

    pub fn lock_history(&mut self) -> Result<Vec<LockHistoryEntry>, StoreError> {
        self.read(|tx| {
            let mut stmt = tx.prepare(
                "SELECT seq, lock_id, action, repo, holder, kind, reason, by, pid, at_ms FROM lock_history ORDER BY seq",
            )?;
            stmt.query_map([], |r| {
                Ok(LockHistoryEntry {
                    seq: r.get(0)?,
                    lock_id: r.get(1)?,
                    action: r.get(2)?,
                    repo: r.get(3)?,
                    holder: r.get(4)?,
                    kind: r.get(5)?,
                    reason: r.get(6)?,
                    by: r.get(7)?,
                    pid: r.get(8)?,
                    at_ms: r.get(9)?,
                })
            })?
            .collect()
        })
    }
}

/// Replays the lock history in commit order and returns the first moment two conflicting
/// locks were held at once (the acquiring entry and the lock it collided with), if ever.
pub fn first_conflict(
    graph: &RepoGraph,
    history: &[LockHistoryEntry],
) -> Option<(LockHistoryEntry, LockHistoryEntry)> {
    let mut active: Vec<&LockHistoryEntry> = Vec::new();
    for e in history {
        match e.action.as_str() {
            "acquire" => {
                if let Some(other) = active
                    .iter()
                    .find(|a| a.repo == e.repo || graph.conflicts(&e.repo, &a.repo))
                {
                    return Some((e.clone(), (*other).clone()));
                }
                active.push(e);
            }
            _ => active.retain(|a| a.lock_id != e.lock_id),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph() -> RepoGraph {
        RepoGraph::new([
            ("core".to_string(), vec![]),
            ("vm".to_string(), vec!["core".to_string()]),
            ("os".to_string(), vec!["core".to_string()]),
        ])
    }

    #[test]
    fn acquire_block_release_and_history() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path()).unwrap();
        let g = graph();
        let LockAttempt::Acquired(l) = s
            .try_lock(&g, "vm", "hold:a", HolderKind::Hold, Some("r"), Some("me"))
            .unwrap()
        else {
            panic!()
        };
        assert!(matches!(
            s.try_lock(&g, "os", "w1", HolderKind::Worker, None, None)
                .unwrap(),
            LockAttempt::Acquired(_)
        ));
        let LockAttempt::Blocked(b) = s
            .try_lock(&g, "core", "w2", HolderKind::Worker, None, None)
            .unwrap()
        else {
            panic!()
        };
        assert_eq!(b.len(), 2);
        assert!(
            s.unhold("os", None).unwrap().is_err(),
            "unhold must not free a worker's lock"
        );
        assert_eq!(s.unhold("vm", None).unwrap().unwrap().id, l.id);
        assert_eq!(
            s.release("w1", Some("done"), None).unwrap().unwrap().repo,
            "os"
        );
        assert!(matches!(
            s.try_lock(&g, "core", "w2", HolderKind::Worker, None, None)
                .unwrap(),
            LockAttempt::Acquired(_)
        ));
        let h = s.lock_history().unwrap();
        assert_eq!(h.len(), 5);
        assert!(first_conflict(&g, &h).is_none());
    }

    #[test]
    fn database_file_is_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(&dir.path().join("state")).unwrap();
        let mode = std::fs::metadata(s.path()).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
