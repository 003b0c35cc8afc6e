//! Chain locks in SQLite: atomic acquire and release, each recorded in `lock_history`.
//!
//! Cost per lock transaction (schema 10): two pages written (the lock's, the history row's),
//! the locked repositories' names read and each checked in O(1) against the graph's
//! reachability index, every statement prepared once per connection (`prepare_cached`).
//!
//! **The chain lock** (ARCHITECTURE.md, invariant 1). A lock on X covers X and its transitive
//! dependencies and dependents. It is taken only inside one write transaction (`BEGIN IMMEDIATE`,
//! or PostgreSQL's write lock) that reads all active locks and finds no blocker, so two processes
//! can never both win conflicting locks (a pass that takes many locks in one transaction reads
//! them once: [`ActiveLocks`]). Every acquire and release appends to `lock_history` in the same
//! transaction (`seq` is the commit order; a lock's id is its acquire's `seq`); replaying it
//! ([`first_conflict`]) proves no two conflicting locks ever overlapped. A worker is made live
//! only with its lock, in the transaction that makes it live: a start takes lock and record
//! together (`app::spawn::record_in`: spawn, a wave's tick, a reassignment, a fix worker, a
//! conflict's replacement); `orch respawn`, an offline `orch approve` whose change is to land and
//! `orch resume`'s claim of an orphan verify the worker holds its lock or take it again, all or
//! nothing (`app::relive::hold_chain`). An attempt another one superseded (`store::supersede`) is
//! never respawned, approved or reassigned. `app/relive_tests.rs` checks this over random
//! sequences of those operations. (`orch release --force` refuses a worker at work or PAUSED:
//! a worker runs only while it holds its chain lock.)

use super::sql::{OptionalExtension, Tx, params};
use super::{Store, StoreError, now_ms};
use crate::graph::RepoGraph;
use crate::lock::{Blocker, ChainLock, HolderKind, blockers, is_blocked};

pub type LockRow = ChainLock;

/// The pid each `lock_history` row records: this process's, as the host sees it. How a process
/// learns that is containment's business (`pidns::host_pid`: it may run in a PID namespace),
/// not the store's, so the process's entry point tells the store once ([`set_writer_pid`]).
/// A library user that does not (a test, a bench) records the pid of its own namespace.
static WRITER_PID: std::sync::OnceLock<u32> = std::sync::OnceLock::new();

/// Sets the pid this process's lock history rows record (first call wins; see `WRITER_PID`).
pub fn set_writer_pid(pid: u32) {
    let _ = WRITER_PID.set(pid);
}

fn writer_pid() -> u32 {
    WRITER_PID.get().copied().unwrap_or_else(std::process::id)
}

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

fn row_to_lock(r: &super::sql::Row) -> super::sql::Result<ChainLock> {
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
pub fn active_locks(tx: &Tx) -> super::sql::Result<Vec<ChainLock>> {
    // `locks` is keyed by repository: this is its own order, no sort.
    let mut stmt = tx.prepare_cached(
        "SELECT id, repo, holder, kind, reason, by, acquired_ms FROM locks ORDER BY repo",
    )?;
    stmt.query_map([], row_to_lock)?.collect()
}

/// Whether `holder` (a worker id) holds a chain lock.
pub fn holds_lock(tx: &Tx, holder: &str) -> super::sql::Result<bool> {
    let n: i64 = tx
        .prepare_cached("SELECT COUNT(*) FROM locks WHERE holder = ?1")?
        .query_row([holder], |r| r.get(0))?;
    Ok(n > 0)
}

/// How many workers hold chain locks (what `worker.max_parallel` bounds).
pub fn worker_lock_count(tx: &Tx) -> super::sql::Result<usize> {
    let n: i64 = tx
        .prepare_cached("SELECT COUNT(*) FROM locks WHERE kind = 'worker'")?
        .query_row([], |r| r.get(0))?;
    Ok(n as usize)
}

/// Takes `repo`'s chain lock inside an already-open IMMEDIATE transaction, or reports what
/// blocks it. Callers that must record more in the same transaction (spawn) use this.
///
/// Reads only the locked repositories' names (no row is decoded further, nothing allocated)
/// and checks each against the graph's reachability index in O(1); the full rows are read
/// only to say what blocks.
pub fn try_lock_in(
    tx: &Tx,
    graph: &RepoGraph,
    repo: &str,
    holder: &str,
    kind: HolderKind,
    reason: Option<&str>,
    by: Option<&str>,
) -> super::sql::Result<LockAttempt> {
    let chain = graph.chain_of(repo);
    let mut blocked = false;
    {
        let mut stmt = tx.prepare_cached("SELECT repo FROM locks")?;
        stmt.for_each([], |r| {
            // A lock on a repository the graph does not know (renamed or removed under its
            // holder) blocks everything: its chain cannot be known (see `lock::blockers`).
            let held = r.get_ref(0)?.as_str()?;
            blocked = chain.contains(held) || !graph.contains(held);
            Ok(!blocked)
        })?;
    }
    if blocked {
        let active = active_locks(tx)?;
        return Ok(LockAttempt::Blocked(blockers(graph, repo, &active)));
    }
    // A live worker whose lock row is gone without a release in the history (deleted outside
    // orch) still holds its chain: nobody starts beside it.
    let unlocked: Vec<Blocker> = live_without_their_lock(tx)?
        .into_iter()
        .filter(|(_, held)| chain.contains(held.as_str()) || !graph.contains(held))
        .map(|(holder, held)| Blocker {
            relation: graph
                .relation(repo, &held)
                .unwrap_or(crate::graph::Relation::Unknown),
            repo: held,
            holder,
            kind: HolderKind::Worker,
        })
        .collect();
    if !unlocked.is_empty() {
        return Ok(LockAttempt::Blocked(unlocked));
    }
    Ok(LockAttempt::Acquired(insert_lock(
        tx, repo, holder, kind, reason, by,
    )?))
}

/// Live workers (not ended) that hold no lock row although the history's last word on their
/// lock is its acquire: a row deleted outside orch (`orch release --force` and every other
/// release write a release first). `(worker id, its repository)`.
pub fn live_without_their_lock(tx: &Tx) -> super::sql::Result<Vec<(String, String)>> {
    let mut stmt = tx.prepare_cached(
        "SELECT w.id, w.repo FROM workers w \
         WHERE w.ended_ms IS NULL \
           AND NOT EXISTS (SELECT 1 FROM locks l WHERE l.holder = w.id) \
           AND (SELECT h.action FROM lock_history h WHERE h.holder = w.id \
                ORDER BY h.seq DESC LIMIT 1) = 'acquire'",
    )?;
    stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect()
}

/// Takes `holder`'s lock on `repo` again after its row was deleted outside orch, if nothing
/// blocks it now (recorded as a new acquire with `reason`).
pub fn retake_in(
    tx: &Tx,
    graph: &RepoGraph,
    repo: &str,
    holder: &str,
    reason: &str,
) -> super::sql::Result<LockAttempt> {
    let active = active_locks(tx)?;
    let others: Vec<ChainLock> = active.into_iter().filter(|l| l.holder != holder).collect();
    let blocked = blockers(graph, repo, &others);
    if !blocked.is_empty() {
        return Ok(LockAttempt::Blocked(blocked));
    }
    Ok(LockAttempt::Acquired(insert_lock(
        tx,
        repo,
        holder,
        HolderKind::Worker,
        Some(reason),
        Some("orch"),
    )?))
}

/// The last thing the lock history says of `holder`'s lock: `acquire`, `release`, or nothing.
pub fn last_lock_action(tx: &Tx, holder: &str) -> super::sql::Result<Option<String>> {
    tx.prepare_cached(
        "SELECT action FROM lock_history WHERE holder = ?1 ORDER BY seq DESC LIMIT 1",
    )?
    .query_row([holder], |r| r.get(0))
    .optional()
}

/// Inserts a lock nothing blocks, with its acquire row; its id is that row's `seq`.
fn insert_lock(
    tx: &Tx,
    repo: &str,
    holder: &str,
    kind: HolderKind,
    reason: Option<&str>,
    by: Option<&str>,
) -> super::sql::Result<ChainLock> {
    let now = now_ms();
    let id = record(
        tx,
        None,
        "acquire",
        repo,
        holder,
        kind.as_str(),
        reason,
        by,
        now,
    )?;
    tx.prepare_cached(
        "INSERT INTO locks (repo, id, holder, kind, reason, by, acquired_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?
    .execute(params![repo, id, holder, kind.as_str(), reason, by, now])?;
    Ok(ChainLock {
        id,
        repo: repo.to_string(),
        holder: holder.to_string(),
        kind,
        reason: reason.map(str::to_string),
        by: by.map(str::to_string),
        acquired_ms: now,
    })
}

/// The active locks of one write transaction, read once, for a pass that takes many locks in
/// it (`orch resume --from-checkpoints` rebuilds every worker's): each acquire is checked
/// against this list, which it keeps current, instead of reading the table again — reading it
/// per acquire made n rebuilt locks cost n²/2 rows read. It borrows the transaction, so it
/// cannot outlive the write lock that keeps it true; every other change to `locks` in that
/// transaction must go through it too (a pass only acquires).
pub struct ActiveLocks<'t> {
    tx: &'t Tx<'t>,
    locks: Vec<ChainLock>,
}

impl<'t> ActiveLocks<'t> {
    pub fn read(tx: &'t Tx<'t>) -> super::sql::Result<ActiveLocks<'t>> {
        Ok(ActiveLocks {
            tx,
            locks: active_locks(tx)?,
        })
    }

    /// `try_lock_in` against the list read once.
    pub fn try_lock(
        &mut self,
        graph: &RepoGraph,
        repo: &str,
        holder: &str,
        kind: HolderKind,
        reason: Option<&str>,
        by: Option<&str>,
    ) -> super::sql::Result<LockAttempt> {
        if is_blocked(graph, repo, self.locks.iter().map(|l| l.repo.as_str())) {
            return Ok(LockAttempt::Blocked(blockers(graph, repo, &self.locks)));
        }
        let lock = insert_lock(self.tx, repo, holder, kind, reason, by)?;
        self.locks.push(lock.clone());
        Ok(LockAttempt::Acquired(lock))
    }
}

/// Releases the lock held by `holder`, if any, recording why and by whom.
/// The PostgreSQL notification channel a released chain lock is announced on.
pub const LOCK_CHANNEL: &str = "orch_lock_released";

pub fn release_in(
    tx: &Tx,
    holder: &str,
    reason: Option<&str>,
    by: Option<&str>,
) -> super::sql::Result<Option<ChainLock>> {
    // One statement finds and deletes the lock: one lock, as before, though a hold's name can
    // hold several (`hold:orch-resume`); each release needs its own history row.
    let lock = tx
        .prepare_cached(
            "DELETE FROM locks WHERE repo = (SELECT repo FROM locks WHERE holder = ?1 LIMIT 1)
             RETURNING id, repo, holder, kind, reason, by, acquired_ms",
        )?
        .query_row([holder], row_to_lock)
        .optional()?;
    if let Some(l) = &lock {
        // Wakes whoever waits for a chain on another host (`spawn --wait`): sent at commit.
        tx.notify(LOCK_CHANNEL)?;
        record(
            tx,
            Some(l.id),
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

/// Appends one history row and returns its `seq`; an acquire (`lock_id` `None`) is its own
/// lock's id.
#[allow(clippy::too_many_arguments)]
fn record(
    tx: &Tx,
    lock_id: Option<i64>,
    action: &str,
    repo: &str,
    holder: &str,
    kind: &str,
    reason: Option<&str>,
    by: Option<&str>,
    at_ms: i64,
) -> super::sql::Result<i64> {
    // The rule an INTEGER PRIMARY KEY follows anyway (largest + 1), said here so that an
    // acquire knows its id before it writes the row, and `seq` stays the commit order.
    let seq: i64 = tx
        .prepare_cached("SELECT COALESCE(MAX(seq), 0) + 1 FROM lock_history")?
        .query_row([], |r| r.get(0))?;
    tx.prepare_cached(
        "INSERT INTO lock_history (seq, lock_id, action, repo, holder, kind, reason, by, pid, at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
    )?
    .execute(params![
        seq,
        lock_id.unwrap_or(seq),
        action,
        repo,
        holder,
        kind,
        reason,
        by,
        writer_pid(),
        at_ms
    ])?;
    Ok(seq)
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
                .prepare_cached(
                    "SELECT id, repo, holder, kind, reason, by, acquired_ms FROM locks WHERE repo = ?1",
                )?
                .query_row([repo], row_to_lock)
                .optional()?;
            match lock {
                Some(l) if l.kind == HolderKind::Hold => {
                    tx.prepare_cached("DELETE FROM locks WHERE repo = ?1")?
                        .execute([&l.repo])?;
                    record(
                        tx,
                        Some(l.id),
                        "release",
                        &l.repo,
                        &l.holder,
                        "hold",
                        Some("unhold"),
                        by,
                        now_ms(),
                    )?;
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
            let mut stmt = tx.prepare_cached(
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
                let chain = graph.chain_of(&e.repo);
                if let Some(other) = active.iter().find(|a| chain.contains(&a.repo)) {
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
        crate::store::conformance::each_backend("acquire_block_release_and_history", |s| {
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
        });
    }

    /// A hold's name may hold several chains: each release frees one, with its own history row.
    #[test]
    fn a_holder_of_several_locks_releases_them_one_at_a_time() {
        crate::store::conformance::each_backend(
            "a_holder_of_several_locks_releases_them_one_at_a_time",
            |s| {
                let g = graph();
                for repo in ["vm", "os"] {
                    let got = s.try_lock(&g, repo, "hold:x", HolderKind::Hold, None, None);
                    assert!(matches!(got.unwrap(), LockAttempt::Acquired(_)));
                }
                let first = s.release("hold:x", None, None).unwrap().unwrap();
                assert_eq!(s.locks().unwrap().len(), 1);
                let second = s.release("hold:x", None, None).unwrap().unwrap();
                assert_ne!(first.repo, second.repo);
                assert!(s.release("hold:x", None, None).unwrap().is_none());
                let h = s.lock_history().unwrap();
                let released: Vec<&str> = h
                    .iter()
                    .filter(|e| e.action == "release")
                    .map(|e| e.repo.as_str())
                    .collect();
                assert_eq!(released, [first.repo.as_str(), second.repo.as_str()]);
                assert!(first_conflict(&g, &h).is_none());
            },
        );
    }

    /// Pages one committed transaction appended to the WAL.
    fn wal_pages(s: &mut Store, f: impl FnOnce(&mut Store)) -> u64 {
        let wal = std::path::PathBuf::from(format!("{}-wal", s.path().display()));
        s.conn()
            .execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
            .unwrap();
        let page: i64 = s
            .conn()
            .query_row("PRAGMA page_size", [], |r| r.get(0))
            .unwrap();
        let page = page as u64;
        let frames = |len: u64| len.saturating_sub(32) / (page + 24);
        let before = frames(std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0));
        f(s);
        frames(std::fs::metadata(&wal).unwrap().len()) - before
    }

    /// What makes a lock cycle cost little more than a bare insert: an acquire writes the
    /// lock's page and the history row's page, a release the same two (schema 10), where it
    /// was five (AUTOINCREMENT's counter, the unique index, the history index).
    #[test]
    fn a_lock_transaction_writes_two_pages() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::open(dir.path()).unwrap();
        let g = graph();
        for _ in 0..3 {
            let acquire = wal_pages(&mut s, |s| {
                let got = s.try_lock(&g, "vm", "w", HolderKind::Worker, None, None);
                assert!(matches!(got.unwrap(), LockAttempt::Acquired(_)));
            });
            assert_eq!(acquire, 2);
            let release = wal_pages(&mut s, |s| {
                assert!(s.release("w", None, None).unwrap().is_some());
            });
            assert_eq!(release, 2);
        }
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
