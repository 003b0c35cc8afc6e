//! repos.yaml changed under live locks: checked on every load of the store. Two live locks
//! whose chains now overlap (an edge added between their repositories), or a lock whose
//! worker works in the clone repos.yaml now names another repository (one clone under two
//! names), are raised as one critical alert each (de-duplicated like every alert) — the
//! workers are left running: the operator decides. New spawns stay out of those chains: the
//! overlapping locks already block them under the current graph, and a repository whose clone
//! a live worker works in is blocked by that worker (`same_clone_blockers`).

use crate::config::Config;
use crate::lock::{Blocker, ChainLock, Drift, HolderKind, drift};
use crate::store::sql::Tx;
use crate::store::workers::{self as ws, AlertRecord};
use crate::store::{Store, active_locks, now_ms};
use std::path::{Path, PathBuf};

/// The clone a worktree belongs to, from its `.git` file (`gitdir: <clone>/.git/worktrees/<id>`).
fn clone_of_worktree(worktree: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(worktree.join(".git")).ok()?;
    let gitdir = PathBuf::from(text.strip_prefix("gitdir:")?.trim());
    let dot_git = gitdir.parent()?.parent()?;
    let clone = dot_git.parent()?;
    std::fs::canonicalize(clone).ok()
}

/// What drifted, read in `tx`.
pub fn drift_in(tx: &Tx, config: &Config) -> crate::store::sql::Result<Vec<Drift>> {
    let locks = active_locks(tx)?;
    if locks.is_empty() {
        return Ok(Vec::new());
    }
    let worktrees = ws::worktrees_of_lock_holders(tx)?;
    let with_clones: Vec<(ChainLock, Option<PathBuf>)> = locks
        .into_iter()
        .map(|l| {
            let clone = (l.kind == HolderKind::Worker)
                .then(|| worktrees.get(&l.holder))
                .flatten()
                .and_then(|wt| clone_of_worktree(Path::new(wt)));
            (l, clone)
        })
        .collect();
    let clones: Vec<(String, PathBuf)> = config
        .repos
        .iter()
        .map(|r| {
            (
                r.name.clone(),
                std::fs::canonicalize(&r.path).unwrap_or_else(|_| r.path.clone()),
            )
        })
        .collect();
    Ok(drift(&config.graph, &clones, &with_clones))
}

/// The live locks that keep a new spawn on `repo` off a clone one of their workers works in.
pub fn same_clone_blockers(drifts: &[Drift], config: &Config, repo: &str) -> Vec<Blocker> {
    let chain = config.graph.chain_of(repo);
    drifts
        .iter()
        .filter_map(|d| match d {
            Drift::SameClone { lock, name, .. } if chain.contains(name.as_str()) => Some(Blocker {
                repo: lock.repo.clone(),
                holder: lock.holder.clone(),
                kind: lock.kind,
                relation: crate::graph::Relation::SameClone,
            }),
            _ => None,
        })
        .collect()
}

/// Raises each drift as a critical alert (once per window: repeats are counted) and writes
/// the new ones to `alerts.jsonl`. Nothing is stopped.
pub fn raise(store: &mut Store, state_dir: &Path, drifts: &[Drift]) {
    let window = store.alert_window().as_millis() as i64;
    let mut fresh = Vec::new();
    for d in drifts {
        let holder = match d {
            Drift::Conflict { a, .. } => a,
            Drift::SameClone { lock, .. } => lock,
        };
        let alert = AlertRecord {
            id: 0,
            at_ms: now_ms(),
            severity: "critical".into(),
            worker_id: (holder.kind == HolderKind::Worker).then(|| holder.holder.clone()),
            repo: Some(holder.repo.clone()),
            kind: "config_drift".into(),
            message: format!(
                "{}; new workers stay out of these chains, and the workers already running were left alone: stop one (`orch cancel`) or put repos.yaml back",
                d.describe()
            ),
            repeats: 1,
            resolved_ms: None,
        };
        if let Ok(crate::store::alerts::Recorded::New(id)) =
            store.write(|tx| crate::store::alerts::record(tx, &alert, window))
        {
            fresh.push(AlertRecord { id, ..alert });
        }
    }
    if !fresh.is_empty() {
        crate::alerts::append_jsonl(state_dir, &fresh);
    }
}
