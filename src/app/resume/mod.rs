//! Crash recovery: find workers whose supervisor is gone, claim each, ask CI about its last
//! pushed SHA, and reconcile it — the decision is pure (`decide.rs`), its transition goes
//! through the journal, and a worker that goes on gets a new supervisor.
//!
//! Safe to run from several processes at once: each orphan is claimed in its own
//! `BEGIN IMMEDIATE` transaction that re-checks it is still orphaned, so exactly one resumer
//! wins it. The winner holds the lease until the supervisor it starts takes it over.
//!
//! Files: `decide.rs` (the reconcile table, pure), `worktree.rs` (git repair and unreported
//! pushes), `rebuild.rs` (the database from checkpoint files), `trust.rs` (what a rebuild may
//! believe of a checkpoint; live supervisors of the state directory).
//! Also `landed.rs` (a DONE whose change is on its base branch, on git's word) and `waves.rs` (waves
//! from their checkpoints, checked against the workers rebuilt).
//!
//! Rebuilt from checkpoint files, the database holds evidence, not truth (ARCHITECTURE.md,
//! invariant 3): never beside a live supervisor; a DONE only on CI's fresh green, or — its landing
//! recorded as done — on git's word that the landed commit is on the base branch with the DONE
//! commit in its history, or its very change; a checkpoint orch would not have written, an
//! unreadable one or a missing one is refused by name and its chain held for an operator
//! (`trust.rs`); a wave's checkpoint only where its tasks' workers are the ones orch started for
//! each task and attempt (`waves.rs`).

pub mod decide;
mod landed;
mod rebuild;
mod trust;
mod waves;
mod worktree;

pub use decide::Action;
pub use rebuild::{Rebuilt, rebuild_from_checkpoints};
pub use trust::RefusedCheckpoint;

use super::journal::{self, Committed, Entry, Fact, Writer};
use super::relive;
use super::supervisor::LEASE_MS;
use super::{Loaded, Result, start_detached};
use crate::ci::CiRun;
use crate::ci::verdict::{CiPolicy, Verdict};
use crate::forge::follow::CiFollower;
use crate::forge::{AnyForge, ForgeError};
use crate::milestone::Milestone;
use crate::sha::Sha;
use crate::store::workers::{self as ws, VerdictRow, WorkerRecord};
use crate::store::{Store, now_ms};
use decide::{Case, SeenVerdict, decide, resume_note, why_ended};
use serde::Serialize;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How many CI queries a resume runs at once.
pub const CI_CONCURRENCY: usize = 16;

#[derive(Debug, Clone, Serialize)]
pub struct Reconciled {
    pub worker_id: String,
    pub repo: String,
    pub before: Milestone,
    pub after: Milestone,
    pub action: Action,
    pub detail: String,
    /// Left as it was because it cannot go on yet (its program is not installed): the
    /// resume as a whole is a "no" an operator must see.
    pub held_back: bool,
}

/// Claims every orphan it can and reconciles it. `start_supervisors: false` is for tests and
/// measurements that only want the decisions.
pub fn resume(l: &Loaded, start_supervisors: bool) -> Result<Vec<Reconciled>> {
    let result = resume_orphans(l, start_supervisors);
    // DONE workers have no supervisor: a branch of theirs moved without a push (no hook ran)
    // is seen here, by cron's resume, and its alert delivered below.
    if let Ok(mut store) = l.store() {
        super::done_branch::look(l, &mut store);
    }
    deliver_alerts(l);
    result
}

/// This node's heartbeat: resume's first write (cron runs it on every node, with or without
/// workers). A supervisor stopped inside a write transaction does not hold it up past its
/// lease: the store's write queue ends it (`store::write_queue`).
fn beat(l: &Loaded, store: &mut Store) -> Result<()> {
    let slots = l.config.worker.max_parallel;
    let beat = |store: &mut Store| {
        store.write(|tx| {
            crate::store::nodes::beat(tx, crate::node::name(), crate::node::place(), slots)
        })
    };
    let clash = beat(store)?;
    // Two hosts under one name would take each other's workers for orphans (a pid there
    // names nothing here): nothing is resumed until each host has a name of its own.
    match clash {
        Some(c) => Err(super::Error::Refused(c.to_string())),
        None => Ok(()),
    }
}

/// Whoever runs next delivers what a dead process left in the outbox (and what this resume
/// raised): every pending delivery gets one attempt now, within a bounded time.
pub fn deliver_alerts(l: &Loaded) {
    let cfg = &l.config.alerts;
    if cfg.sinks.is_empty() {
        return;
    }
    let budget = cfg
        .sinks
        .iter()
        .map(|s| s.timeout)
        .max()
        .unwrap_or_default()
        * 2
        + std::time::Duration::from_secs(1);
    let scrub = super::deliver::scrub_list(&l.config);
    let scrub: Vec<&str> = scrub.iter().map(String::as_str).collect();
    let drained = l.store().map_err(|e| e.to_string()).and_then(|mut store| {
        super::deliver::drain(
            &mut store,
            cfg,
            &scrub,
            true,
            std::time::Instant::now() + budget,
        )
        .map_err(|e| e.to_string())
    });
    match drained {
        Ok(d) if d != Default::default() => tracing::info!(?d, "alerts delivered by resume"),
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "resume could not deliver alerts"),
    }
}

fn resume_orphans(l: &Loaded, start_supervisors: bool) -> Result<Vec<Reconciled>> {
    let mut store = l.store()?;
    beat(l, &mut store)?;
    let me = crate::pidns::host_pid() as i64;
    let my_start = crate::process::proc_stat(me as i32).map(|s| s.start_ticks as i64);
    let workers = store.live_workers()?;
    // A supervisor stopped for storage that could not record it before it exited left a note.
    for w in &workers {
        if let Err(e) = super::storage_note::take(&mut store, &l.state_dir, w) {
            tracing::warn!(worker = %w.id, error = %e, "cannot record its supervisor's storage note");
        }
    }
    refresh_stale_checkpoints(l, &mut store, &workers);
    // While the agent's API is rate-limited, a worker that needs a new agent run waits for
    // the reset (one following CI is still followed).
    let agent = l.config.worker.agent.as_str();
    let limited = store
        .read(|tx| crate::store::usage::agent_limit(tx, agent, now_ms()))
        .ok()
        .flatten();
    let candidates: Vec<String> = workers
        .into_iter()
        .filter(|w| w.orphaned(now_ms()))
        .filter(|w| {
            limited.is_none()
                || !matches!(
                    w.milestone(),
                    Milestone::Working | Milestone::FixingCi | Milestone::Paused
                )
        })
        .map(|w| w.id)
        .collect();
    // Claimed in transactions of up to CLAIM_BATCH workers (not one each: a thousand orphans
    // after a host crash), each re-checking under the write lock that its workers are still
    // orphaned, so that exactly one resumer wins each.
    let mut claimed: Vec<(WorkerRecord, bool)> = Vec::new();
    for batch in candidates.chunks(CLAIM_BATCH) {
        let won = store.write(|tx| {
            let mut won = Vec::new();
            for id in batch {
                let Some(w) = ws::get_worker(tx, id)? else {
                    continue;
                };
                if !w.orphaned(tx.clock_ms()?) {
                    continue; // another resumer (or a new supervisor) got there first
                }
                // A worker process runs only while its chain lock is held by it: an orphan
                // whose lock is gone (released by an operator while it ran) takes it again
                // here, in its claim, or is left alone — never replaced beside another
                // worker of its chain.
                if let Err(e) = relive::hold_chain(tx, &l.config, &w, "resumed", "orch resume")? {
                    tracing::warn!(worker = %id, "{e}");
                    continue;
                }
                ws::claim_lease(tx, id, me, my_start, LEASE_MS)?;
                let from = w.lease().filter(|l| !l.is_here()).and_then(|l| l.node);
                let mut w = w;
                let detail = match &from {
                    // Taken over from another node (dead, or cut off past its lease): the
                    // worktree there is out of reach; this node's is made from what was pushed.
                    Some(node) => {
                        let here = trust::expected_worktree(&l.state_dir, id);
                        w.worktree = here.display().to_string();
                        ws::set_worktree(tx, id, &w.worktree)?;
                        format!(
                            "claimed by orch resume (pid {me}) on node {} from node {node}",
                            crate::node::name()
                        )
                    }
                    None => format!("claimed by orch resume (pid {me})"),
                };
                ws::add_event(tx, id, "resume_claimed", w.milestone(), &detail)?;
                // The record as the dead supervisor left it: it says why the worker stopped.
                won.push((w, from.is_some()));
            }
            Ok(won)
        })?;
        claimed.extend(won);
    }
    let (claimed, moved): (Vec<WorkerRecord>, Vec<bool>) = claimed.into_iter().unzip();
    if claimed.is_empty() {
        return Ok(Vec::new());
    }
    // Kept for the whole pass: making worktrees and handing clones over for many workers
    // takes longer than a lease.
    let _kept = ClaimsKept::start(&l.state_dir, claimed.iter().map(|w| w.id.clone()).collect());
    if let Some(stall) = crate::fault::resume_stall() {
        std::thread::sleep(stall);
    }
    // A dead supervisor's worker dies with it (parent-death signal); make sure — its cgroup,
    // its group, what left the group — so that a replacement never runs beside its
    // predecessor, and it is gone before anything of its worktree is touched (see
    // clear_stale_git_locks).
    super::orphans::kill_trees(&l.state_dir, &claimed, true);
    for (w, moved) in claimed.iter().zip(&moved) {
        // Only a worker that will run again needs its worktree (and only WORKING can lack one:
        // the spawner died before making it); PUSHED_TO_CI workers need nothing but CI — unless
        // it came from another node, whose worktree this one cannot reach.
        if *moved
            || matches!(
                w.milestone(),
                Milestone::Working | Milestone::FixingCi | Milestone::Paused
            )
        {
            // What goes wrong is logged here and decided by `reconcile`, which holds a
            // replacement back when its worktree is still unusable.
            let _ = worktree::ensure_worktree(l, w);
        }
    }
    let mut found = worktree::unreported_pushes(l, &mut store, &claimed);
    // CI is asked on a thread while the answers already in are reconciled here: the pass
    // takes about as long as the slower of the two, not their sum.
    let jobs = ci_jobs(l, &claimed, &found);
    let polled_ids: std::collections::HashSet<String> = jobs.iter().map(|j| j.0.clone()).collect();
    let mut waiting: HashMap<String, WorkerRecord> = HashMap::new();
    let mut out = Vec::new();
    let mut started = Vec::new();
    std::thread::scope(|scope| {
        let (tx, rx) = std::sync::mpsc::channel();
        scope.spawn(move || poll_all(l, jobs, tx));
        let mut settle = |w: WorkerRecord, polled: Option<Polled>| {
            let push = found.remove(&w.id);
            let supervisors = start_supervisors.then_some(&mut started);
            match reconcile(l, &mut store, w, push, polled, supervisors) {
                Ok(r) => out.push(r),
                Err(e) => tracing::error!(error = %e, "resume could not reconcile a worker"),
            }
        };
        for w in claimed {
            if polled_ids.contains(&w.id) {
                waiting.insert(w.id.clone(), w);
            } else {
                settle(w, None);
            }
        }
        for (id, polled) in rx {
            if let Some(w) = waiting.remove(&id) {
                settle(w, Some(polled));
            }
        }
        // A poll that never answered (its task panicked): judged on what is known.
        for (_, w) in waiting.drain() {
            settle(w, None);
        }
    });
    await_handover(&mut store, started, me);
    Ok(out)
}

/// `orch respawn`: an operator gives a BLOCKED, BLOCKED_PERMISSION or PAUSED worker that no
/// supervisor follows another go. The worker is claimed like an orphan, whatever is left of
/// its tree is killed, it moves to FIXING_CI (it pushed work: CI decides again) or WORKING,
/// and a replacement starts under a new supervisor with a prompt that carries `note` and what
/// the previous worker did. Returns the milestone it continues in.
pub fn respawn(l: &Loaded, id: &str, by: &str, note: &str) -> Result<Milestone> {
    use crate::milestone::{Event, step};
    if let Some(missing) = super::spawn::program_missing(&l.config) {
        return Err(super::Error::Refused(format!(
            "{id} not respawned: {missing}"
        )));
    }
    let mut store = l.store()?;
    let me = crate::pidns::host_pid() as i64;
    let my_start = crate::process::proc_stat(me as i32).map(|s| s.start_ticks as i64);
    let claimed = store.write(|tx| relive::claim_respawn(tx, &l.config, id, me, my_start, by))?;
    let (mut w, chain) = claimed?;
    // Kept until the new supervisor has it: the clone may be made again and handed over.
    let _kept = ClaimsKept::start(&l.state_dir, vec![id.to_string()]);
    super::orphans::kill_tree(&l.state_dir, &w, true);
    if let Err(why) = worktree::ensure_worktree(l, &w) {
        // Given back at once: the operator mends what is named, then respawns again.
        store.write(|tx| {
            ws::set_lease(tx, id, me, None)?;
            relive::give_back(tx, id, chain, "respawn did not start: its worktree")
        })?;
        return Err(super::Error::Refused(format!("{id} not respawned: {why}")));
    }
    let event = Event::Respawn {
        by: by.to_string(),
        note: note.to_string(),
    };
    let (after, effects) = step(&l.contract, id, &w.progress, &event, now_ms());
    let why = why_ended(&w);
    let wt = std::path::Path::new(&w.worktree);
    let commits = crate::gitops::commits_since(wt, &w.base_sha).unwrap_or_default();
    let files = crate::gitops::files_modified(wt, &w.base_sha).unwrap_or_default();
    // The replacement it starts is numbered as `ORCH_REPLACEMENT` numbers it.
    let mut told = resume_note(
        &after,
        &why,
        w.respawns + i64::from(after.respawned),
        l.config.worker.max_respawns,
        &commits,
        &files,
    );
    if !note.is_empty() {
        told = format!("An operator ({by}) asks you to go on: {note}\n{told}");
    }
    let mut entry = Entry::new(&w, "orch respawn").step(&after, &effects);
    entry.checkpoint = true;
    entry.facts.push(Fact::Resumed {
        respawns: w.respawns,
        replacement_note: Some(&told),
        why: &why,
        keep_lease: true,
    });
    if journal::commit(&mut store, &l.state_dir, Writer::me(), &entry)? == Committed::NotOwner {
        return Err(super::Error::Refused(format!(
            "{id}: another process took it over meanwhile"
        )));
    }
    w.progress = after.clone();
    let session = super::supervisor::session_dir(&l.state_dir, id);
    let upstream = super::spawn::handoff_context(&mut store, &l.config, &w.repo, &w.id);
    super::spawn::render_prompts(&l.config, &l.contract, &w, &session, &told, &upstream)
        .map_err(super::Error::Refused)?;
    let child = start_detached(l, id)?;
    await_handover(&mut store, vec![(id.to_string(), child)], me);
    Ok(after.milestone)
}

/// Checkpoint files are views written after each commit: a process killed in between (a
/// supervisor right after committing DONE) leaves a file older than its database row, and
/// nobody would write it again for a worker that is not resumed. Rewrites those of workers
/// no live supervisor writes (orphans get theirs when reconciled).
/// The `store_meta` key of the last refresh of ended workers' checkpoints.
const CHECKPOINTS_CHECKED: &str = "checkpoints_checked_ms";

/// How far before the last refresh the next one looks again: a transaction that stamped its
/// `updated_ms` just before a refresh may commit just after it read.
const CHECKPOINT_MARGIN_MS: i64 = 60_000;

/// Rewrites the checkpoint of each worker nobody supervises whose file is older than its row
/// (a process that died between a commit and its view): the live workers given, and the ended
/// ones updated since the last refresh (minus a margin) — an ended worker is never updated
/// again, so the history is looked at once, not at every resume.
fn refresh_stale_checkpoints(l: &Loaded, store: &mut Store, live: &[WorkerRecord]) {
    let started = now_ms();
    let last = store
        .read(|tx| crate::store::meta(tx, CHECKPOINTS_CHECKED))
        .ok()
        .flatten()
        .unwrap_or(0);
    let ended = store
        .read(|tx| ws::ended_updated_since(tx, last - CHECKPOINT_MARGIN_MS))
        .unwrap_or_default();
    for w in live.iter().chain(&ended) {
        if w.orphaned(now_ms()) || w.supervised(now_ms()) {
            continue;
        }
        let written_ms = std::fs::metadata(crate::checkpoint::path_for(&l.state_dir, w))
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_millis() as i64);
        if written_ms.is_none_or(|t| t < w.updated_ms) {
            journal::write_checkpoint(store, &l.state_dir, &w.id);
        }
    }
    // One small write, and only when the mark moves by more than the margin.
    if started - last > CHECKPOINT_MARGIN_MS {
        let _ = store.write(|tx| crate::store::set_meta(tx, CHECKPOINTS_CHECKED, started));
    }
}

/// How many orphans one claim transaction takes (short enough not to hold the write lock
/// against supervisors for long).
const CLAIM_BATCH: usize = 100;

/// This process's claims on workers, renewed on a thread of its own (one transaction every
/// `RENEW_EVERY_MS` for all of them) until dropped: a claim that lapsed in the middle of a long
/// pass would make its worker look orphaned to the next resumer, which would claim it too. A
/// claim handed over to the worker's new supervisor, or given back (its lease set to 0), is no
/// longer renewed; one that lapsed while this process was stalled is, unless taken meanwhile.
pub(crate) struct ClaimsKept {
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ClaimsKept {
    pub(crate) fn start(state_dir: &std::path::Path, mut ids: Vec<String>) -> ClaimsKept {
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let state_dir = state_dir.to_path_buf();
        let me = crate::pidns::host_pid() as i64;
        let every = Duration::from_millis(super::supervisor::RENEW_EVERY_MS as u64);
        let thread = std::thread::Builder::new()
            .name("claims-kept".into())
            .spawn(move || {
                let mut store = match Store::open(&state_dir) {
                    Ok(s) => s,
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot keep resume's claims: they last one lease");
                        return;
                    }
                };
                while !ids.is_empty() {
                    match stopped.recv_timeout(every) {
                        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                        _ => return,
                    }
                    let kept = store.write(|tx| {
                        let mut kept = Vec::with_capacity(ids.len());
                        for id in &ids {
                            kept.push(ws::keep_claim(tx, id, me, LEASE_MS)?);
                        }
                        Ok(kept)
                    });
                    match kept {
                        Ok(kept) => {
                            let mut kept = kept.into_iter();
                            ids.retain(|_| kept.next().unwrap_or(false));
                        }
                        Err(e) => tracing::warn!(error = %e, "cannot renew resume's claims"),
                    }
                }
            })
            .ok();
        ClaimsKept {
            stop: Some(stop),
            thread,
        }
    }
}

impl Drop for ClaimsKept {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// How long a resumer keeps its claims while a supervisor it started, still running, has not
/// taken over yet (a machine so loaded that this passes is one to hear about).
const HANDOVER_WAIT: Duration = Duration::from_secs(120);

/// Keeps this process (and so its claims) alive until each supervisor it started holds its
/// worker's lease or has exited. A claim whose holder exits before the handover makes the
/// worker look orphaned to any other resumer in between, which would claim it again and count
/// (and start) a second replacement. A supervisor that exits without taking over leaves the
/// worker to the next resume, as does one that takes longer than `HANDOVER_WAIT`.
pub(crate) fn await_handover(
    store: &mut Store,
    mut started: Vec<(String, std::process::Child)>,
    me: i64,
) {
    let deadline = Instant::now() + HANDOVER_WAIT;
    // The claims stay ours while we wait (an expired lease would make the workers look
    // orphaned to other resumers however alive this process is): every caller holds a
    // [`ClaimsKept`] for them until this returns.
    while !started.is_empty() {
        started.retain_mut(|(id, child)| {
            let taken = !matches!(store.worker(id), Ok(Some(w)) if w.lease().is_some_and(|l| l.held_by(me)));
            let exited = matches!(child.try_wait(), Ok(Some(_)) | Err(_));
            if exited && !taken {
                tracing::warn!(worker = %id, "its new supervisor exited before taking over");
                // Given back (the pass's keeper renews it no more): the next resume takes it.
                let _ = store.write(|tx| ws::set_lease(tx, id, me, None));
            }
            !(taken || exited)
        });
        if started.is_empty() || Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    for (id, _) in started {
        tracing::warn!(worker = %id, "its new supervisor did not take over within {}s", HANDOVER_WAIT.as_secs());
    }
}

type Polled = (Sha, Result<(Verdict, Vec<CiRun>), ForgeError>);

/// A CI query of a resume: worker, repository, SHA, when it was pushed.
type CiJob = (String, crate::config::Repo, Sha, Option<i64>);

/// What a resume asks CI about: each claimed worker's (possibly newly found) tracked SHA.
fn ci_jobs(
    l: &Loaded,
    workers: &[WorkerRecord],
    found: &HashMap<String, (Sha, i64)>,
) -> Vec<CiJob> {
    let mut jobs = Vec::new();
    for w in workers {
        if w.milestone().is_terminal() {
            // DONE with a landing to finish: its own CI is settled; the landing asks the
            // forge itself (and a base-branch run must not be recorded as its push's).
            continue;
        }
        let (sha, pushed_ms) = match (found.get(&w.id), &w.progress.tracked_sha) {
            (Some((s, p)), _) => (s.clone(), Some(*p)),
            (None, Some(s)) => (s.clone(), w.progress.pushed_ms),
            (None, None) => continue,
        };
        if let Some(repo) = l.config.repo(&w.repo) {
            jobs.push((w.id.clone(), repo.clone(), sha, pushed_ms));
        }
    }
    jobs
}

/// CI for the tracked commit of each of `workers`, DONE ones included: a rebuild's proof of a
/// DONE (resume's own polls leave DONE out, [`ci_jobs`]).
fn poll_tracked(l: &Loaded, workers: &[WorkerRecord]) -> HashMap<String, Polled> {
    let jobs = workers
        .iter()
        .filter_map(|w| {
            let sha = w.progress.tracked_sha.clone()?;
            let repo = l.config.repo(&w.repo)?.clone();
            Some((w.id.clone(), repo, sha, w.progress.pushed_ms))
        })
        .collect();
    let (tx, rx) = std::sync::mpsc::channel();
    poll_all(l, jobs, tx);
    rx.into_iter().collect()
}

/// Polls CI for each job, CI_CONCURRENCY at a time, sending each answer on `out` as it comes.
fn poll_all(l: &Loaded, jobs: Vec<CiJob>, out: std::sync::mpsc::Sender<(String, Polled)>) {
    if jobs.is_empty() {
        return;
    }
    let forge = match AnyForge::from_config(&l.config, &l.contract, &l.state_dir) {
        Ok(f) => f,
        Err(e) => {
            for (id, _, sha, _) in jobs {
                let err = ForgeError::Blocking {
                    kind: crate::forge::BlockingKind::Other,
                    message: e.clone(),
                };
                let _ = out.send((id, (sha, Err(err))));
            }
            return;
        }
    };
    let follower = Arc::new(CiFollower::new(forge, CiPolicy::from(&l.config.ci)));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime builds");
    rt.block_on(async {
        let limit = Arc::new(tokio::sync::Semaphore::new(CI_CONCURRENCY));
        let mut set = tokio::task::JoinSet::new();
        for (id, repo, sha, pushed_ms) in jobs {
            let follower = follower.clone();
            let limit = limit.clone();
            set.spawn(async move {
                let _permit = limit.acquire_owned().await.expect("semaphore open");
                let r = follower.poll(&repo, &sha, pushed_ms, now_ms()).await;
                (id, sha, r)
            });
        }
        while let Some(done) = set.join_next().await {
            if let Ok((id, sha, r)) = done {
                let _ = out.send((id, (sha, r)));
            }
        }
    });
}

/// Decides one claimed orphan's fate, commits it through the journal, and starts what
/// goes on (a replacement's prompt, a new supervisor).
fn reconcile(
    l: &Loaded,
    store: &mut Store,
    mut w: WorkerRecord,
    unreported_push: Option<(Sha, i64)>,
    polled: Option<Polled>,
    supervisors: Option<&mut Vec<(String, std::process::Child)>>,
) -> Result<Reconciled> {
    let before = w.milestone();
    let why = why_ended(&w);
    let mut detail = Vec::new();
    let verdict = match &polled {
        Some((sha, Ok((v, _)))) => {
            detail.push(format!("CI {} for {}", v.kind, sha.short()));
            Some(SeenVerdict {
                sha: sha.clone(),
                kind: v.kind,
                failed_jobs: v.failed_jobs.clone(),
                detail: v.detail.clone(),
            })
        }
        Some((_, Err(e))) => {
            detail.push(format!("CI unknown ({e})"));
            None
        }
        None => None,
    };
    let case = Case {
        worker: &w.id,
        progress: &w.progress,
        respawns: w.respawns,
        max_respawns: l.config.worker.max_respawns,
        unreported_push: unreported_push.clone(),
        unreported_protected: unreported_push
            .as_ref()
            .map(|(sha, _)| super::protect::touched(&l.config, &w, sha))
            .unwrap_or_default(),
        unreported_secrets: unreported_push
            .as_ref()
            .map(|(sha, _)| super::protect::secrets(&l.config, &w, sha))
            .unwrap_or_default(),
        verdict,
        why: &why,
    };
    let d = decide(&l.contract, &case, now_ms());
    // A replacement works where its predecessor did: made again if it is gone (a worker that
    // had pushed was not looked at before), and never started where it could not work.
    let unusable = || {
        super::spawn::program_missing(&l.config).or_else(|| worktree::ensure_worktree(l, &w).err())
    };
    if d.action == Action::Respawned
        && let Some(missing) = unusable()
    {
        // A replacement that cannot start (or cannot work) would only burn a respawn (exit
        // 127, or a task BLOCKED in a clone it cannot write) and end the task FAILED: nothing
        // is decided, its lock and work stay, and the claim is given back at once so that the
        // resume after the mend takes it.
        let me = crate::pidns::host_pid() as i64;
        store.write(|tx| ws::set_lease(tx, &w.id, me, None))?;
        return Ok(Reconciled {
            worker_id: w.id.clone(),
            repo: w.repo.clone(),
            before,
            after: before,
            action: Action::Unchanged,
            detail: format!(
                "not respawned: {missing}; its lock and work are kept: run `orch resume` again once that is mended"
            ),
            held_back: true,
        });
    }
    let note = (d.action == Action::Respawned).then(|| {
        let wt = std::path::Path::new(&w.worktree);
        let commits = crate::gitops::commits_since(wt, &w.base_sha).unwrap_or_default();
        let files = crate::gitops::files_modified(wt, &w.base_sha).unwrap_or_default();
        let max = l.config.worker.max_respawns;
        resume_note(&d.progress, &why, d.respawns, max, &commits, &files)
    });
    let keep_lease = supervisors.is_some() && d.action.continues();
    let mut entry = Entry::new(&w, "orch resume").step(&d.progress, &d.effects);
    entry.note = " (resume)";
    entry.checkpoint = true;
    // The newly found push first, so that its verdict has a row to land in, with the push
    // time the supervisor would have used (pushes are ordered by it).
    if let (Some((sha, pushed_ms)), Some((_, Ok(_)))) = (&unreported_push, &polled) {
        entry.facts.push(Fact::Push {
            sha,
            pushed_ms: *pushed_ms,
        });
    }
    if let Some((sha, Ok((v, runs)))) = &polled {
        entry.facts.push(Fact::Verdict {
            sha,
            row: VerdictRow::of(v, runs),
        });
    }
    entry.facts.push(Fact::Resumed {
        respawns: d.respawns,
        replacement_note: note.as_deref(),
        why: &why,
        keep_lease,
    });
    // This process claimed the worker's lease above: the write is guarded by it. The prompt
    // is rendered after the commit: a replacement is started only once both exist.
    if journal::commit(store, &l.state_dir, Writer::me(), &entry)? == Committed::NotOwner {
        return Err(super::Error::Refused(format!(
            "{}: another process took it over while it was being reconciled",
            w.id
        )));
    }
    w.progress = d.progress.clone();
    w.respawns = d.respawns;
    if let Some(n) = &note {
        let session = super::supervisor::session_dir(&l.state_dir, &w.id);
        super::spawn::render_prompts(
            &l.config,
            &l.contract,
            &w,
            &session,
            n,
            &super::spawn::handoff_context(store, &l.config, &w.repo, &w.id),
        )
        .map_err(super::Error::Refused)?;
    }
    if let Some(started) = supervisors.filter(|_| keep_lease) {
        let child = start_detached(l, &w.id)?;
        started.push((w.id.clone(), child));
    }
    detail.push(format!("previous worker: {why}"));
    Ok(Reconciled {
        worker_id: w.id.clone(),
        repo: w.repo.clone(),
        before,
        after: d.progress.milestone,
        action: d.action,
        detail: detail.join("; "),
        held_back: false,
    })
}
