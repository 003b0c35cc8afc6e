//! Rebuilding a lost or unreadable database from the checkpoint files (`orch resume
//! --from-checkpoints`): workers, their pushes and verdicts, the locks they held, and the
//! operator holds (`holds.yaml`; one that cannot be taken again is said loudly: a report line,
//! a critical alert, exit 1). An unreadable database is moved aside, never deleted.
//!
//! Checkpoints are evidence, not truth (`trust.rs`): nothing is rebuilt while a supervisor
//! of the state directory is alive; a checkpoint that is not what orch would have written
//! is refused, named, and its chain held for an operator; a session directory left without
//! its checkpoint is treated the same; a DONE is kept only when CI proves its SHA green
//! again, and is otherwise rebuilt as PUSHED_TO_CI (WORKING when nothing was pushed) with
//! its chain locked, for supervision to verify.

use super::trust;
use super::trust::RefusedCheckpoint;
use crate::app::{Error, Loaded, Result};
use crate::checkpoint::Checkpoint;
use crate::ci::verdict::VerdictKind;
use crate::lock::HolderKind;
use crate::milestone::{Milestone, Progress};
use crate::store::workers::{self as ws, VerdictRow, WorkerRecord};
use crate::store::{ActiveLocks, LockAttempt, Store, StoreError, now_ms};
use serde::Serialize;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The holder of the chains held in place of refused checkpoints.
pub const HOLDER: &str = "hold:orch-resume";

#[derive(Debug, Clone, Serialize)]
pub struct Rebuilt {
    /// Where an unreadable database was moved, if it was.
    pub moved_aside: Option<PathBuf>,
    pub workers: usize,
    pub locks: usize,
    /// Handled, worth knowing: a lock that conflicts, a worker already in the database.
    pub problems: Vec<String>,
    /// Workers whose checkpoint said DONE and whose SHA CI did not prove green again: rebuilt
    /// as PUSHED_TO_CI (WORKING when nothing was pushed), so that supervision verifies them.
    pub unproven_done: Vec<String>,
    /// Checkpoints (and sessions left without one) that were not rebuilt.
    pub refused: Vec<RefusedCheckpoint>,
    /// Operator holds taken again from the holds file, each as a sentence.
    pub holds: Vec<String>,
    /// Waves put back from their checkpoints (`<state>/waves/`), each as a sentence.
    pub waves: Vec<String>,
    /// Operator holds that could not be taken again (or a holds file that could not be read),
    /// each as a sentence: an operator must look (each is a critical `hold_lost` alert too).
    pub lost_holds: Vec<String>,
}

/// What the rebuild does about a worker's lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lock {
    None,
    /// Its checkpoint says it held one: a conflict is a problem.
    Held,
    /// A DONE CI did not prove: its chain stays locked unless someone else already holds it.
    IfFree,
}

/// Opens the store, or moves an unreadable database aside (never deleting it) and starts a
/// fresh one; then inserts every worker, push and held lock recorded in the checkpoint files
/// it can trust, and holds the chains of those it cannot.
pub fn rebuild_from_checkpoints(l: &Loaded) -> Result<Rebuilt> {
    let live = trust::live_supervisors(&l.state_dir);
    if !live.is_empty() {
        let list: Vec<String> = live
            .iter()
            .map(|(pid, cmd)| format!("pid {pid} ({})", crate::text::escape(cmd)))
            .collect();
        return Err(Error::Refused(format!(
            "{} supervisor(s) of {} are alive: {}; --from-checkpoints would start second ones beside them. Stop them first, or run `orch resume` without --from-checkpoints",
            live.len(),
            l.state_dir.display(),
            list.join(", ")
        )));
    }
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
    // The operator holds: a rebuilt database that forgot one would end a freeze unseen.
    let mut lost_holds = Vec::new();
    let (recorded_holds, recorded_fatal) = match crate::checkpoint::read_holds(&l.state_dir) {
        Ok(h) => h.map_or_else(Default::default, |h| (h.holds, h.fatal)),
        Err(why) => {
            let file = crate::checkpoint::holds_path(&l.state_dir);
            let kept = move_holds_aside(&file);
            lost_holds.push(format!(
                "{} could not be read ({why}){kept}: the operator holds it recorded (a release freeze?) were not taken again; take them again with `orch hold <repo> --reason …`",
                file.display()
            ));
            Default::default()
        }
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(&l.state_dir)
        .map_err(|e| Error::io("cannot read the state directory", &l.state_dir, e))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_str().is_some_and(|s| s.ends_with(".checkpoint.yaml")))
        .collect();
    files.sort();
    let mut refused = Vec::new();
    let mut trusted: Vec<(Checkpoint, WorkerRecord)> = Vec::new();
    let mut named = BTreeSet::new();
    for f in files {
        let file_id = trust::file_id(&f);
        if let Some((_, id)) = &file_id {
            named.insert(id.clone());
        }
        let checked = crate::checkpoint::read(&f)
            .map_err(|e| {
                let e = e
                    .strip_prefix(&format!("{}: ", f.display()))
                    .unwrap_or(&e)
                    .to_string();
                format!("unreadable ({e})")
            })
            .and_then(|cp| trust::check(l, &f, &cp).map(|p| (cp, p)));
        match (checked, file_id) {
            (Ok((cp, progress)), Some((day, _))) => {
                let rec = record(&cp, progress, day);
                trusted.push((cp, rec));
            }
            (Err(why), id) => refused.push(RefusedCheckpoint {
                file: f,
                worker_id: id.map(|(_, id)| id),
                why,
                held: None,
            }),
            // `check` refuses a file name without an id.
            (Ok(_), None) => unreachable!("a trusted checkpoint has a well-formed file name"),
        }
    }
    // A worker whose checkpoint is gone still left its session directory.
    for (id, dir) in trust::session_dirs(&l.state_dir) {
        if !named.contains(&id) {
            refused.push(RefusedCheckpoint {
                file: dir,
                worker_id: Some(id),
                why: "this worker session has no checkpoint file (deleted?); nothing of it was rebuilt".into(),
                held: None,
            });
        }
    }

    // The waves, checked against the workers trusted as their checkpoints recorded them (a
    // retried task's stopped attempt included, before any DONE is proven again below).
    let super::waves::Recorded {
        waves: recorded_waves,
        problems: wave_problems,
        refused: wave_refused,
    } = {
        let recs: Vec<&WorkerRecord> = trusted.iter().map(|(_, r)| r).collect();
        super::waves::read(l, &recs)
    };
    refused.extend(wave_refused);

    // A DONE stays DONE on git's word that its change is on the base branch (`landed.rs`),
    // else only on CI's word, asked again now.
    let done: Vec<WorkerRecord> = trusted
        .iter()
        .filter(|(_, r)| r.milestone() == Milestone::Done)
        .map(|(_, r)| r.clone())
        .collect();
    let on_base = super::landed::on_base(l, &done);
    let is_on_base = |id: &str| matches!(on_base.get(id), Some(Ok(_)));
    let unlanded: Vec<WorkerRecord> = done.into_iter().filter(|w| !is_on_base(&w.id)).collect();
    let mut proofs = super::poll_tracked(l, &unlanded);
    let mut unproven_done = Vec::new();
    let mut plan: Vec<(Checkpoint, WorkerRecord, Lock, Option<super::Polled>)> = Vec::new();
    for (cp, mut rec) in trusted {
        // A green verdict only ever comes from CI, never from a file.
        if rec.progress.verdict == Some(VerdictKind::Green) && rec.milestone() != Milestone::Done {
            rec.progress.verdict = None;
        }
        if rec.milestone() != Milestone::Done {
            let lock = if cp.lock_held { Lock::Held } else { Lock::None };
            plan.push((cp, rec, lock, None));
            continue;
        }
        if is_on_base(&rec.id) {
            // Landed: the recorded landing stands, and its lock went when it landed.
            plan.push((cp, rec, Lock::None, None));
            continue;
        }
        let proof = proofs.remove(&rec.id);
        let green = matches!(&proof, Some((sha, Ok((v, _))))
            if v.kind == VerdictKind::Green && rec.progress.tracked_sha.as_ref() == Some(sha));
        if green {
            // A verified change still landing keeps its chain lock: the lock is what lets its
            // landing move the base (without it the landing would read as released by an
            // operator: `rebuild::a_landing_cut_by_a_lost_database_lands_after_the_rebuild`).
            let lock = if cp.lock_held && rec.progress.landing_active() {
                Lock::Held
            } else {
                Lock::None
            };
            plan.push((cp, rec, lock, proof));
            continue;
        }
        let seen = match (&rec.progress.tracked_sha, &proof) {
            (None, _) => "nothing was pushed".to_string(),
            (Some(sha), Some((_, Ok((v, _))))) => format!("CI for {} is {}", sha.short(), v.kind),
            (Some(sha), Some((_, Err(e)))) => {
                format!("CI for {} cannot be read ({e})", sha.short())
            }
            (Some(sha), None) => format!("CI for {} was not asked", sha.short()),
        };
        let seen = match on_base.get(&rec.id) {
            Some(Err(why)) => format!("{seen}, and its landing is not believed: {why}"),
            _ => seen,
        };
        demote(l, &mut rec.progress);
        unproven_done.push(format!(
            "{}: its checkpoint says DONE but {seen}; rebuilt as {} for supervision to verify",
            rec.id,
            rec.milestone()
        ));
        plan.push((cp, rec, Lock::IfFree, proof.filter(|(_, r)| r.is_ok())));
    }
    // Locks the checkpoints say were held first, then the chains of unproven DONEs if free.
    plan.sort_by_key(|(_, _, lock, _)| match lock {
        Lock::Held => 0,
        Lock::None => 1,
        Lock::IfFree => 2,
    });

    // One transaction for the whole rebuild: the active locks are read once (`ActiveLocks`),
    // not once per worker, and a rebuild that fails half-way leaves no half-filled database
    // behind (which --from-checkpoints would then refuse to rebuild).
    let (problems, workers, locks, holds, lost, waves) = store.write(|tx| {
        let mut held = ActiveLocks::read(tx)?;
        let mut problems = wave_problems.clone();
        let mut workers = 0;
        let mut locks = 0;
        // Holds first: an operator's freeze only stops work, and is what a rebuild must not
        // lose; a worker's lock that conflicts with one is a problem said below.
        let (mut holds, mut lost) = (Vec::new(), Vec::new());
        for h in &recorded_holds {
            match take_hold_again(l, &mut held, h)? {
                Ok(said) => holds.push(said),
                Err(said) => lost.push(said),
            }
        }
        // Fatal holds stop work over locks, never conflict with one: always taken again.
        for f in &recorded_fatal {
            crate::store::fatal::add(tx, &f.to_hold())?;
            holds.push(format!(
                "{}'s chain halted again (FATAL by {}): {}",
                f.repo,
                crate::text::escape(&f.by),
                crate::text::escape(&f.reason)
            ));
        }
        for (cp, rec, lock, proof) in &plan {
            // Only an unproven DONE wishes for a lock only if free.
            let note = if *lock == Lock::IfFree {
                "rebuilt from its checkpoint file; it said DONE, which CI did not prove again"
            } else {
                "rebuilt from its checkpoint file"
            };
            match insert(l, tx, &mut held, cp, rec, *lock, proof.as_ref(), note)? {
                Inserted::Yes { held, problem } => {
                    workers += 1;
                    locks += held as usize;
                    problems.extend(problem);
                }
                Inserted::No(p) => problems.push(p),
            }
        }
        // After the workers: a wave's tasks name them.
        let waves = super::waves::restore(tx, &recorded_waves, &mut problems)?;
        for r in &mut refused {
            hold_for(l, &mut held, r)?;
        }
        // Deliberately rebuilt: a database with no workers beside checkpoints it refused is
        // what the operator chose, not one that lost its contents (see `Loaded::store`).
        crate::store::set_meta(tx, crate::store::REBUILT_META, crate::store::now_ms())?;
        Ok((problems, workers, locks, holds, lost, waves))
    })?;
    lost_holds.extend(lost);
    crate::app::journal::write_holds(&mut store, &l.state_dir);
    raise_lost_holds(&mut store, &l.state_dir, &lost_holds);
    Ok(Rebuilt {
        moved_aside,
        workers,
        locks,
        problems,
        unproven_done,
        refused,
        holds,
        waves,
        lost_holds,
    })
}

/// Takes a recorded hold again: `Ok` says it was (or is still) held, `Err` why it could not be.
fn take_hold_again(
    l: &Loaded,
    held: &mut ActiveLocks,
    h: &crate::checkpoint::HeldChain,
) -> crate::store::sql::Result<std::result::Result<String, String>> {
    let what = format!(
        "{} on {} ({}, by {}, since {})",
        h.holder,
        h.repo,
        h.reason.as_deref().unwrap_or("no reason given"),
        h.by.as_deref().unwrap_or("?"),
        h.acquired_at
    );
    if l.config.repo(&h.repo).is_none() {
        return Ok(Err(format!(
            "{what}: {} does not name {} any more; the hold was not taken again",
            l.config.file.display(),
            h.repo
        )));
    }
    let attempt = held.try_lock(
        &l.config.graph,
        &h.repo,
        &h.holder,
        HolderKind::Hold,
        h.reason.as_deref(),
        h.by.as_deref(),
    )?;
    Ok(match attempt {
        LockAttempt::Acquired(_) => Ok(what),
        // Still there: the database kept it.
        LockAttempt::Blocked(b) if b.iter().all(|x| x.holder == h.holder && x.repo == h.repo) => {
            Ok(what)
        }
        LockAttempt::Blocked(b) => {
            let names: Vec<String> = b.iter().map(|x| x.describe(&h.repo)).collect();
            Err(format!(
                "{what}: its chain is locked by others now ({}); the hold was not taken again",
                names.join("; ")
            ))
        }
    })
}

/// Moves an unreadable holds file aside (never deleted: it is the evidence) before the rebuilt
/// database's holds are written in its place; says where, for the report.
fn move_holds_aside(file: &Path) -> String {
    let stamp = jiff::Timestamp::now()
        .strftime("%Y%m%dT%H%M%SZ")
        .to_string();
    let target = file.with_file_name(format!(
        "{}.unreadable-{stamp}",
        crate::checkpoint::HOLDS_FILE
    ));
    match std::fs::rename(file, &target) {
        Ok(()) => format!("; moved to {}", target.display()),
        Err(_) => String::new(),
    }
}

/// Each hold the rebuild lost is a critical alert (de-duplicated like every alert).
fn raise_lost_holds(store: &mut Store, state_dir: &Path, lost: &[String]) {
    let window = store.alert_window().as_millis() as i64;
    let mut fresh = Vec::new();
    for message in lost {
        let alert = crate::store::workers::AlertRecord {
            id: 0,
            at_ms: now_ms(),
            severity: "critical".into(),
            worker_id: None,
            repo: None,
            kind: "hold_lost".into(),
            message: format!("orch resume --from-checkpoints: {message}"),
            repeats: 1,
            resolved_ms: None,
        };
        if let Ok(crate::store::alerts::Recorded::New(id)) =
            store.write(|tx| crate::store::alerts::record(tx, &alert, window))
        {
            fresh.push(crate::store::workers::AlertRecord { id, ..alert });
        }
    }
    if !fresh.is_empty() {
        crate::alerts::append_jsonl(state_dir, &fresh);
    }
}

/// A DONE that CI did not prove: PUSHED_TO_CI for its tracked SHA (WORKING when there is
/// none), fresh timers, no verdict.
fn demote(l: &Loaded, p: &mut Progress) {
    let to = if p.tracked_sha.is_some() {
        Milestone::PushedToCi
    } else {
        Milestone::Working
    };
    p.enter(&l.contract, to, now_ms());
    p.verdict = None;
    p.failed_jobs.clear();
    p.verdict_detail = None;
    p.end_reason = None;
    // Its worker had given its word (it was DONE): CI alone is to be proven again.
    p.turn_ended = p.tracked_sha.is_some();
    if let Some(l) = p.landing.as_mut() {
        l.replan();
    }
}

/// The worker record a trusted checkpoint describes (no supervisor: its lease is lapsed).
fn record(cp: &Checkpoint, progress: Progress, day: String) -> WorkerRecord {
    WorkerRecord {
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
        ended_ms: None,
        model: cp.model.clone(),
        model_source: cp.model_source.clone(),
        node: None,
        // Above any token of the lost database's leases (each counted from 0 by claims): a
        // supervisor of the old file still running can never match a claim of the new one.
        fence: crate::store::now_ms(),
    }
}

enum Inserted {
    /// Rebuilt; `problem` says why without the lock it wished for.
    Yes { held: bool, problem: Option<String> },
    /// Not rebuilt, and why.
    No(String),
}

/// Inserts one worker with its pushes (and CI's fresh proof, if any) and its lock.
#[allow(clippy::too_many_arguments)]
fn insert(
    l: &Loaded,
    tx: &crate::store::sql::Tx,
    held: &mut ActiveLocks,
    cp: &Checkpoint,
    rec: &WorkerRecord,
    lock: Lock,
    proof: Option<&super::Polled>,
    note: &str,
) -> crate::store::sql::Result<Inserted> {
    let graph = &l.config.graph;
    if ws::get_worker(tx, &rec.id)?.is_some() {
        return Ok(Inserted::No(format!(
            "{}: already in the database; skipped",
            rec.id
        )));
    }
    ws::insert_worker(tx, rec)?;
    ws::add_event(tx, &rec.id, "rebuilt", rec.progress.milestone, note)?;
    for ci in &cp.ci_runs {
        let pushed = jiff::Timestamp::strptime("%Y-%m-%dT%H:%M:%S%.fZ", &ci.pushed_at)
            .map(|t| t.as_millisecond())
            .unwrap_or(rec.created_ms);
        ws::record_push(tx, &rec.id, &ci.sha, pushed)?;
        let kind = ci.verdict.as_deref().and_then(VerdictKind::parse);
        if let Some(kind) = kind.filter(|k| *k != VerdictKind::Green) {
            let row = VerdictRow {
                kind,
                detail: ci.detail.as_deref().unwrap_or(""),
                failed_jobs: &ci.jobs_failed,
                runs: None,
            };
            ws::record_verdict(tx, &rec.id, &ci.sha, row)?;
        }
    }
    if let Some((sha, Ok((v, runs)))) = proof {
        let pushed = rec.progress.pushed_ms.unwrap_or(rec.created_ms);
        ws::record_push(tx, &rec.id, sha, pushed)?;
        ws::record_verdict(tx, &rec.id, sha, VerdictRow::of(v, runs))?;
    }
    if lock == Lock::None {
        return Ok(Inserted::Yes {
            held: false,
            problem: None,
        });
    }
    match held.try_lock(
        graph,
        &rec.repo,
        &rec.id,
        HolderKind::Worker,
        Some(&rec.task),
        Some("orch resume"),
    )? {
        LockAttempt::Acquired(_) => Ok(Inserted::Yes {
            held: true,
            problem: None,
        }),
        LockAttempt::Blocked(b) => {
            let names: Vec<String> = b.iter().map(|x| x.describe(&rec.repo)).collect();
            let problem = match lock {
                Lock::IfFree => format!(
                    "{}: its chain is already locked ({}); it is verified without a lock",
                    rec.id,
                    names.join("; ")
                ),
                _ => format!(
                    "{}: its lock conflicts with {}; left without a lock",
                    rec.id,
                    names.join("; ")
                ),
            };
            Ok(Inserted::Yes {
                held: false,
                problem: Some(problem),
            })
        }
    }
}

/// Holds the chain of a refused checkpoint's repository (known from its worker id) for an
/// operator, unless another lock already covers it (then that worker could not have held
/// one either: chain locks never overlap).
fn hold_for(
    l: &Loaded,
    held: &mut ActiveLocks,
    r: &mut RefusedCheckpoint,
) -> crate::store::sql::Result<()> {
    let Some(id) = &r.worker_id else {
        return Ok(());
    };
    let Some(repo) = trust::repo_of_id(l, id) else {
        return Ok(());
    };
    let reason = format!(
        "the checkpoint of {id} could not be trusted ({}); see orch resume's report",
        r.why
    );
    let attempt = held.try_lock(
        &l.config.graph,
        repo,
        HOLDER,
        HolderKind::Hold,
        Some(&reason),
        Some("orch resume"),
    )?;
    match attempt {
        LockAttempt::Acquired(_) => r.held = Some(repo.to_string()),
        // Held already by the same hold (taken again from the holds file).
        LockAttempt::Blocked(b) if b.iter().all(|x| x.holder == HOLDER && x.repo == repo) => {
            r.held = Some(repo.to_string())
        }
        LockAttempt::Blocked(b) => {
            let names: Vec<String> = b.iter().map(|x| x.describe(repo)).collect();
            r.why.push_str(&format!(
                "; {repo}'s chain is already locked ({})",
                names.join("; ")
            ));
        }
    }
    Ok(())
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
