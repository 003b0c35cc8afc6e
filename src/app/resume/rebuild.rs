//! Rebuilding a lost or unreadable database from the checkpoint files (`orch resume
//! --from-checkpoints`): workers, their pushes and verdicts, and the locks they held. An
//! unreadable database is moved aside, never deleted.

use crate::app::{Error, Loaded, Result};
use crate::ci::verdict::VerdictKind;
use crate::milestone::Progress;
use crate::store::workers::{self as ws, VerdictRow, WorkerRecord};
use crate::store::{Store, StoreError};
use serde::Serialize;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Serialize)]
pub struct Rebuilt {
    /// Where an unreadable database was moved, if it was.
    pub moved_aside: Option<PathBuf>,
    pub workers: usize,
    pub locks: usize,
    pub problems: Vec<String>,
}

/// Opens the store, or moves an unreadable database aside (never deleting it) and starts a
/// fresh one; then inserts every worker, push and held lock recorded in the checkpoint files.
pub fn rebuild_from_checkpoints(l: &Loaded) -> Result<Rebuilt> {
    let db = l.state_dir.join(crate::store::DB_FILE);
    let mut moved_aside = None;
    let mut store = match Store::open(&l.state_dir) {
        Ok(mut s) => {
            let n = s.workers().map(|w| w.len());
            match n {
                Ok(0) => s,
                Ok(n) => {
                    return Err(Error::Refused(format!(
                        "the database {} is readable and holds {n} workers; --from-checkpoints only rebuilds a missing or unreadable database (run `orch resume` instead)",
                        db.display()
                    )));
                }
                Err(e) => {
                    drop(s);
                    moved_aside = Some(move_aside(&db, &e.to_string())?);
                    Store::open(&l.state_dir)?
                }
            }
        }
        Err(e @ StoreError::Locked { .. }) => return Err(e.into()),
        Err(e) => {
            moved_aside = Some(move_aside(&db, &e.to_string())?);
            Store::open(&l.state_dir)?
        }
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(&l.state_dir)
        .map_err(|e| Error::io("cannot read the state directory", &l.state_dir, e))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_str().is_some_and(|s| s.ends_with(".checkpoint.yaml")))
        .collect();
    files.sort();
    let mut problems = Vec::new();
    let mut checkpoints = Vec::new();
    for f in files {
        match crate::checkpoint::read(&f) {
            Ok(cp) => checkpoints.push(cp),
            Err(e) => problems.push(format!("skipped unreadable checkpoint {e}")),
        }
    }
    let mut workers = 0;
    let mut locks = 0;
    for cp in checkpoints {
        let progress: Progress = match serde_json::from_str(&cp.progress_json) {
            Ok(p) => p,
            Err(e) => {
                problems.push(format!(
                    "{}: progress unreadable ({e}); skipped",
                    cp.worker_id
                ));
                continue;
            }
        };
        let day = cp_day(&cp.timestamp, cp.created_ms);
        let rec = WorkerRecord {
            id: cp.worker_id.clone(),
            repo: cp.repo_name.clone(),
            task: cp.task.clone(),
            task_id: cp.task_id.clone(),
            component: cp.component_id.clone(),
            plan: cp.plan.clone(),
            progress,
            branch: cp.branch.clone(),
            base_sha: cp.base_sha.clone(),
            worktree: cp.worktree.clone(),
            remote: cp.remote.clone(),
            day,
            supervisor_pid: None,
            supervisor_start: None,
            lease_until_ms: Some(0),
            worker_pid: None,
            worker_running: false,
            exit_code: None,
            respawns: cp.respawns,
            resume_note: None,
            created_ms: cp.created_ms,
            updated_ms: cp.updated_ms,
        };
        let graph = &l.config.graph;
        let outcome = store.write(|tx| {
            if ws::get_worker(tx, &rec.id)?.is_some() {
                return Ok(Err(format!("{}: already in the database; skipped", rec.id)));
            }
            ws::insert_worker(tx, &rec)?;
            ws::add_event(
                tx,
                &rec.id,
                "rebuilt",
                rec.progress.milestone,
                "rebuilt from its checkpoint file",
            )?;
            for ci in &cp.ci_runs {
                let pushed = jiff::Timestamp::strptime("%Y-%m-%dT%H:%M:%S%.fZ", &ci.pushed_at)
                    .map(|t| t.as_millisecond())
                    .unwrap_or(rec.created_ms);
                ws::record_push(tx, &rec.id, &ci.sha, pushed)?;
                if let Some(kind) = ci.verdict.as_deref().and_then(VerdictKind::parse) {
                    let row = VerdictRow {
                        kind,
                        detail: ci.detail.as_deref().unwrap_or(""),
                        failed_jobs: &ci.jobs_failed,
                        runs: None,
                    };
                    ws::record_verdict(tx, &rec.id, &ci.sha, row)?;
                }
            }
            if cp.lock_held {
                match crate::store::try_lock_in(
                    tx,
                    graph,
                    &rec.repo,
                    &rec.id,
                    crate::lock::HolderKind::Worker,
                    Some(&rec.task),
                    Some("orch resume"),
                )? {
                    crate::store::LockAttempt::Acquired(_) => return Ok(Ok(true)),
                    crate::store::LockAttempt::Blocked(b) => {
                        let names: Vec<String> = b.iter().map(|x| x.describe(&rec.repo)).collect();
                        return Ok(Err(format!(
                            "{}: its lock conflicts with {}; left without a lock",
                            rec.id,
                            names.join("; ")
                        )));
                    }
                }
            }
            Ok(Ok(false))
        });
        match outcome? {
            Ok(held) => {
                workers += 1;
                locks += held as usize;
            }
            Err(p) => problems.push(p),
        }
    }
    Ok(Rebuilt {
        moved_aside,
        workers,
        locks,
        problems,
    })
}

fn cp_day(_timestamp: &str, created_ms: i64) -> String {
    jiff::Timestamp::from_millisecond(created_ms)
        .map(|t| t.strftime("%Y-%m-%d").to_string())
        .unwrap_or_else(|_| "1970-01-01".into())
}

/// Renames an unreadable database (and its WAL/SHM files) out of the way.
fn move_aside(db: &Path, why: &str) -> Result<PathBuf> {
    let stamp = jiff::Timestamp::now()
        .strftime("%Y%m%dT%H%M%SZ")
        .to_string();
    let target = db.with_file_name(format!("orch.db.unreadable-{stamp}"));
    if db.exists() {
        std::fs::rename(db, &target).map_err(|e| Error::io("cannot move aside", db, e))?;
    }
    for suffix in ["-wal", "-shm"] {
        let side = PathBuf::from(format!("{}{suffix}", db.display()));
        if side.exists() {
            let _ = std::fs::rename(
                &side,
                PathBuf::from(format!("{}{suffix}", target.display())),
            );
        }
    }
    tracing::warn!(
        "database {} was unreadable ({why}); moved to {}",
        db.display(),
        target.display()
    );
    Ok(target)
}
