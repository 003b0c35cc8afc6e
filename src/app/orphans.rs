//! Orphaned worker trees: a worker whose supervisor is dead but some of whose processes still
//! run. Its guard normally kills the tree when the supervisor dies (parent-death signal), and
//! the worker command dies with its guard; but when every orch process dies at once (kill -9
//! of all of them, the OOM killer, a crash of the install) the guard is gone too and what the
//! worker started lives on. Whichever orch process notices first kills it: every command that
//! loads the organisation ([`sweep`], from `cli::Ctx::load`) and `orch resume`, before it
//! claims anything.
//!
//! A tree is found by its cgroup (recorded in the worker's session directory), by its process
//! group (the guard's pid; killed only if a live member carries the worker's id, since a dead
//! guard's pgid can be reused), and by the worker's `ORCH_WORKER_ID` in the environment of
//! what left the group (`contain::marked_processes`). A pass records what it swept, so a dead
//! tree costs later commands one small file read. Locks are none of this module's business:
//! trees are killed, records are not written (resume reconciles them).
//!
//! **Bound.** When every orch process is killed at once, the worker command dies at once
//! (its parent-death signal, from the guard); everything else it started dies during the
//! next orch command run on the state directory (`orch status`, `orch resume`, a worker's
//! `orch report`, a new supervisor…), before that command does its own work: a `cgroup.kill`
//! and a wait until the cgroup is empty, or a few `/proc` scans without a cgroup.

use super::supervisor::session_dir;
use crate::contain::{self, Cgroup};
use crate::process::{group_alive, process_alive, signal_group};
use crate::store::Store;
use crate::store::workers::WorkerRecord;
use std::path::Path;
use std::time::{Duration, Instant};

/// The file (in the worker's session directory) naming the supervisor and guard whose
/// orphaned tree was swept.
const SWEPT: &str = "orphan-swept";

/// How long one tree may take to die before the sweep moves on.
const TREE_LIMIT: Duration = Duration::from_secs(3);

/// Whether `w`'s supervisor, the process holding its lease, is alive (same process).
fn supervisor_alive(w: &WorkerRecord) -> bool {
    w.supervisor_pid
        .is_some_and(|p| process_alive(p as i32, w.supervisor_start.map(|s| s as u64)))
}

/// A worker whose tree may have been left running: it had a worker process, and whoever
/// held its lease is dead. Only a worker of this node: another node's pids name nothing here.
pub fn candidate(w: &WorkerRecord) -> bool {
    here(w) && w.worker_pid.is_some() && !supervisor_alive(w)
}

/// Whether `w` was supervised on this node (or before nodes were recorded): its pids and its
/// session's cgroup are this host's.
fn here(w: &WorkerRecord) -> bool {
    w.lease().is_none_or(|l| l.is_here())
}

/// What identifies one orphaning: the dead supervisor and the guard it had started.
fn swept_key(w: &WorkerRecord) -> String {
    format!(
        "{} {} {}",
        w.supervisor_pid.unwrap_or(0),
        w.supervisor_start.unwrap_or(0),
        w.worker_pid.unwrap_or(0)
    )
}

/// Kills every orphaned worker tree of the state directory; how many trees had something
/// left to kill. Cheap when there is none: one read of the live worker rows (and of ended ones
/// whose worker's exit was never recorded; an ended worker's recorded exit came after its tree
/// was swept), and per worker whose
/// supervisor is gone a `kill(-pgid, 0)` and a file lookup or two; the `/proc` scans run only
/// for a worker whose supervisor died while it ran, once. Does nothing for a state directory without a database
/// (it creates nothing).
pub fn sweep(state_dir: &Path) -> usize {
    if !crate::store::has_state(state_dir) {
        return 0;
    }
    let Ok(mut store) = Store::open(state_dir) else {
        return 0;
    };
    // Live workers and ended ones whose exit was never recorded: never the whole history.
    let Ok(workers) = store.read(crate::store::workers::sweep_candidates) else {
        return 0;
    };
    let mut killed = 0;
    for w in workers.iter().filter(|w| candidate(w)) {
        let session = session_dir(state_dir, &w.id);
        let group = w
            .worker_pid
            .is_some_and(|p| i32::try_from(p).is_ok_and(group_alive));
        if !w.worker_running && !group && !session.join(contain::CGROUP_RECORD).exists() {
            // Its supervisor recorded the exit after sweeping the tree (and removing its
            // cgroup): nothing can be left.
            continue;
        }
        let key = swept_key(w);
        if std::fs::read_to_string(session.join(SWEPT)).is_ok_and(|k| k == key) {
            continue;
        }
        // Right before acting: still the same orphan (a resumer may have claimed it and a
        // new life be starting under the same id).
        match store.worker(&w.id) {
            Ok(Some(now)) if candidate(&now) && swept_key(&now) == key => {}
            _ => continue,
        }
        if kill_tree(state_dir, w, false) > 0 {
            killed += 1;
            tracing::warn!(worker = %w.id, "killed the processes its dead supervisor had left running");
        }
        let _ = std::fs::write(session.join(SWEPT), &key);
    }
    killed
}

/// Kills whatever is left of worker `w`'s tree: its cgroup, its process group (without a
/// check that a member is the worker's when `trust_group`: the caller holds its lease and
/// knows the group), and the processes marked with its id that started before this call.
/// Returns how many processes (or cgroups) it found alive.
pub fn kill_tree(state_dir: &Path, w: &WorkerRecord, trust_group: bool) -> usize {
    if !here(w) {
        return 0;
    }
    let started_by = contain::now_ticks();
    let session = session_dir(state_dir, &w.id);
    let mut found = 0;
    let mut cgroup_held_it = false;
    if let Some(cg) = Cgroup::recorded(&session) {
        if cg.populated() {
            found += 1;
            cgroup_held_it = true;
        }
        if cg.kill_and_remove(TREE_LIMIT) {
            Cgroup::forget(&session);
        }
    }
    if let Some(pgid) = w.worker_pid.and_then(|p| i32::try_from(p).ok())
        && group_alive(pgid)
        && (trust_group || group_is_workers(pgid, state_dir, &w.id))
    {
        found += 1;
        let _ = signal_group(pgid, crate::process::Signal::KILL);
        let deadline = Instant::now() + TREE_LIMIT;
        while group_alive(pgid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    // A cgroup holds everything: the environment scan is for trees contained without one.
    if !cgroup_held_it {
        found += contain::kill_marked(state_dir, &w.id, started_by, TREE_LIMIT);
    }
    found
}

/// [`kill_tree`] for many workers at once (`orch resume` after a crash): each one's cgroup
/// and group as there, but what left a tree without a cgroup is found in one pass over the
/// processes for all of them, and killed until none is left (bounded), not one pass each.
pub fn kill_trees(state_dir: &Path, workers: &[WorkerRecord], trust_group: bool) {
    let started_by = contain::now_ticks();
    let mut scan: std::collections::HashSet<&str> = Default::default();
    let mut groups = Vec::new();
    for w in workers.iter().filter(|w| here(w)) {
        let session = session_dir(state_dir, &w.id);
        let mut cgroup_held_it = false;
        if let Some(cg) = Cgroup::recorded(&session) {
            cgroup_held_it = cg.populated();
            if cg.kill_and_remove(TREE_LIMIT) {
                Cgroup::forget(&session);
            }
        }
        if !cgroup_held_it {
            scan.insert(w.id.as_str());
        }
        if let Some(pgid) = w.worker_pid.and_then(|p| i32::try_from(p).ok())
            && group_alive(pgid)
        {
            groups.push((pgid, w.id.as_str()));
        }
    }
    // Marks are read once for everyone, before anything is killed (a group is checked
    // against them when not trusted).
    let marked = contain::marked_by_worker(state_dir, &scan, started_by);
    let procs = (!trust_group && !groups.is_empty()).then(contain::snapshot);
    for (pgid, id) in &groups {
        let ours = trust_group
            || procs.as_ref().is_some_and(|procs| {
                let pids = marked.get(*id).map(Vec::as_slice).unwrap_or(&[]);
                procs
                    .iter()
                    .any(|p| p.pgrp == *pgid && !p.dead && pids.contains(&p.pid))
            });
        if ours {
            let _ = signal_group(*pgid, crate::process::Signal::KILL);
        }
    }
    let deadline = Instant::now() + TREE_LIMIT;
    let mut left: Vec<i32> = marked.into_values().flatten().collect();
    while !left.is_empty() && Instant::now() < deadline {
        contain::kill_all(&left);
        std::thread::sleep(Duration::from_millis(5));
        left = contain::marked_by_worker(state_dir, &scan, started_by)
            .into_values()
            .flatten()
            .collect();
    }
    while groups.iter().any(|(g, _)| group_alive(*g)) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Whether a live member of group `pgid` carries worker `id`'s mark.
fn group_is_workers(pgid: i32, state_dir: &Path, id: &str) -> bool {
    let marked = contain::marked_processes(state_dir, id, u64::MAX);
    contain::snapshot()
        .iter()
        .any(|p| p.pgrp == pgid && !p.dead && marked.contains(&p.pid))
}
