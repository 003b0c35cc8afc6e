//! Fatal holds: a chain halted by a FATAL (`orch fatal`, a worker's `orch report FATAL`, a
//! secret in a pushed diff) until an operator clears it. One row per halted repository; the
//! chain it covers is the graph's (`RepoGraph::chain_of`), decided by whoever reads it.
//!
//! **A FATAL halts its chain until a person clears it** (ARCHITECTURE.md, invariant 18). A hold
//! is taken by `orch fatal`, by a worker's `orch report FATAL` and by a push whose commits add a
//! secret (`Event::Push { secrets }` → `Effect::HoldFatal`, in the worker's journal entry). It
//! is not a chain lock — the chain's workers keep theirs — but a stop over them: every
//! supervisor reads the holds over its worker's chain with its inbox and applies `Event::Fatal`
//! (PAUSED, `Progress::halted` set); while halted, `step` lets no event out of PAUSED and
//! nothing becomes DONE; only `Event::FatalCleared` does. `spawn` refuses in its lock
//! transaction, the wave scheduler sees the holds as locks, `respawn` refuses, `resume` does not
//! count a halted worker as an orphan, a landing takes no step. orch never reverts for a FATAL:
//! it offers the revert. A commit whose history carries a secret is never DONE, cleared or not.

use super::sql::{OptionalExtension, Tx, params};
use crate::graph::RepoGraph;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FatalHold {
    /// The repository whose chain is halted.
    pub repo: String,
    pub reason: String,
    /// Who reported it: an operator's name, or `worker <id>` / `orch` for its own detection.
    pub by: String,
    /// The worker whose report (or push) raised it, if one did.
    pub worker_id: Option<String>,
    pub at_ms: i64,
}

fn row(r: &super::sql::Row) -> super::sql::Result<FatalHold> {
    Ok(FatalHold {
        repo: r.get(0)?,
        reason: r.get(1)?,
        by: r.get(2)?,
        worker_id: r.get(3)?,
        at_ms: r.get(4)?,
    })
}

/// Every fatal hold, oldest first.
pub fn all(tx: &Tx) -> super::sql::Result<Vec<FatalHold>> {
    tx.prepare_cached(
        "SELECT repo, reason, by, worker_id, at_ms FROM fatal_holds ORDER BY at_ms, repo",
    )?
    .query_map([], row)?
    .collect()
}

/// The fatal holds whose chain covers `repo` (a hold on X covers X, its dependencies and its
/// dependents, transitively — a chain lock's reach). A hold on a repository the graph no
/// longer names covers everything: its chain is unknown.
pub fn covering(tx: &Tx, graph: &RepoGraph, repo: &str) -> super::sql::Result<Vec<FatalHold>> {
    let holds = all(tx)?;
    if holds.is_empty() {
        return Ok(holds);
    }
    Ok(covering_in(graph, repo, holds))
}

/// [`covering`] over holds already read. Pure.
pub fn covering_in(graph: &RepoGraph, repo: &str, holds: Vec<FatalHold>) -> Vec<FatalHold> {
    let chain = graph.chain_of(repo);
    holds
        .into_iter()
        .filter(|h| h.repo == repo || !graph.contains(&h.repo) || chain.contains(&h.repo))
        .collect()
}

/// The holds as what blocks a new lock on `repo` (`spawn`, `can-spawn`, a wave's scheduler):
/// each named by its reason. Pure.
pub fn as_locks(holds: &[FatalHold]) -> Vec<crate::lock::ChainLock> {
    holds
        .iter()
        .map(|h| crate::lock::ChainLock {
            id: 0,
            repo: h.repo.clone(),
            holder: format!("FATAL ({})", crate::text::escape(&h.reason)),
            kind: crate::lock::HolderKind::Hold,
            reason: Some(h.reason.clone()),
            by: Some(h.by.clone()),
            acquired_ms: h.at_ms,
        })
        .collect()
}

/// Records a fatal hold on `repo`'s chain; a hold already there is kept (the first reason
/// stands) and returned as `false`.
pub fn add(tx: &Tx, h: &FatalHold) -> super::sql::Result<bool> {
    let n = tx.execute(
        "INSERT INTO fatal_holds (repo, reason, by, worker_id, at_ms) VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING",
        params![h.repo, h.reason, h.by, h.worker_id, h.at_ms],
    )?;
    Ok(n == 1)
}

/// A fatal hold an operator cleared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClearedHold {
    pub hold: FatalHold,
    pub cleared_by: String,
    pub cleared_ms: i64,
}

/// Clears the fatal hold on `repo` (the one that was there, if any), recording who cleared
/// it and when.
pub fn clear(
    tx: &Tx,
    repo: &str,
    by: &str,
    now_ms: i64,
) -> super::sql::Result<Option<ClearedHold>> {
    let h = tx
        .prepare_cached(
            "SELECT repo, reason, by, worker_id, at_ms FROM fatal_holds WHERE repo = ?1",
        )?
        .query_row([repo], row)
        .optional()?;
    if let Some(h) = &h {
        tx.execute("DELETE FROM fatal_holds WHERE repo = ?1", [repo])?;
        tx.execute(
            "INSERT INTO fatal_cleared (repo, reason, by, worker_id, at_ms, cleared_by, cleared_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![h.repo, h.reason, h.by, h.worker_id, h.at_ms, by, now_ms],
        )?;
    }
    Ok(h.map(|hold| ClearedHold {
        hold,
        cleared_by: by.to_string(),
        cleared_ms: now_ms,
    }))
}

/// The last cleared fatal hold among `repos`, if any.
pub fn last_cleared(tx: &Tx, repos: &[String]) -> super::sql::Result<Option<ClearedHold>> {
    let mut last: Option<ClearedHold> = None;
    let mut q = tx.prepare_cached(
        "SELECT repo, reason, by, worker_id, at_ms, cleared_by, cleared_ms FROM fatal_cleared
         WHERE repo = ?1 ORDER BY cleared_ms DESC, id DESC LIMIT 1",
    )?;
    for repo in repos {
        let found = q
            .query_row([repo], |r| {
                Ok(ClearedHold {
                    hold: row(r)?,
                    cleared_by: r.get(5)?,
                    cleared_ms: r.get(6)?,
                })
            })
            .optional()?;
        if let Some(c) = found
            && last.as_ref().is_none_or(|l| c.cleared_ms > l.cleared_ms)
        {
            last = Some(c);
        }
    }
    Ok(last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    #[test]
    fn a_hold_covers_its_chain_and_is_cleared_once() {
        crate::store::conformance::each_backend(
            "a_hold_covers_its_chain_and_is_cleared_once",
            |s| {
                let g = RepoGraph::new([
                    ("core".to_string(), vec![]),
                    ("vm".to_string(), vec!["core".to_string()]),
                    ("os".to_string(), vec!["core".to_string()]),
                    ("web".to_string(), vec![]),
                ]);
                let h = FatalHold {
                    repo: "vm".into(),
                    reason: "secret committed".into(),
                    by: "alice".into(),
                    worker_id: None,
                    at_ms: 5,
                };
                assert!(s.write(|tx| add(tx, &h)).unwrap());
                assert!(!s.write(|tx| add(tx, &h)).unwrap(), "the first stands");
                let cov = |s: &mut Store, r: &str| s.read(|tx| covering(tx, &g, r)).unwrap().len();
                assert_eq!(cov(s, "vm"), 1);
                assert_eq!(cov(s, "core"), 1, "a dependency");
                assert_eq!(cov(s, "os"), 0, "a sibling is not in vm's chain");
                assert_eq!(cov(s, "web"), 0);
                let cleared = s.write(|tx| clear(tx, "vm", "bob", 9)).unwrap();
                assert_eq!(cleared.map(|c| c.hold), Some(h.clone()));
                assert_eq!(s.write(|tx| clear(tx, "vm", "carol", 10)).unwrap(), None);
                assert_eq!(cov(s, "vm"), 0);
                let chain = ["core".to_string(), "vm".to_string()];
                let last = s.read(|tx| last_cleared(tx, &chain)).unwrap();
                assert_eq!(
                    last,
                    Some(ClearedHold {
                        hold: h,
                        cleared_by: "bob".into(),
                        cleared_ms: 9
                    })
                );
            },
        );
    }
}
