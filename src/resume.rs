//! Crash recovery: find workers whose supervisor is gone and reconcile each from the CI verdict
//! of its last pushed SHA, per the contract (CHECKPOINTING.resumption):
//! passed → DONE (lock released); failed → FIXING_CI with a replacement worker; running or
//! pending → PUSHED_TO_CI with a new supervisor; nothing pushed → WORKING with a replacement.
//!
//! Safe to run from several processes at once: each orphan is claimed in its own
//! `BEGIN IMMEDIATE` transaction that re-checks it is still orphaned, so exactly one resumer
//! wins it. The winner holds the lease until the supervisor it starts takes it over.

use crate::cli::workers::{Loaded, start_detached};
use crate::forge::follow::CiFollower;
use crate::forge::verdict::{CiPolicy, Verdict, VerdictKind};
use crate::forge::{AnyForge, CiRun, ForgeError};
use crate::gitops;
use crate::milestone::{Channel, Effect, Event, Milestone, Progress, step};
use crate::store::workers::{self as ws, AlertRecord, WorkerRecord};
use crate::store::{Store, StoreError, now_ms, release_in};
use crate::supervisor::LEASE_MS;
use serde::Serialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
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
    /// done | respawned | following | failed | unchanged
    pub action: String,
    pub detail: String,
}

/// A worker needs a resumer when it is still in progress and nobody supervises it: its lease
/// ran out, or the process holding it is gone (or is a different process with a reused pid).
/// BLOCKED and BLOCKED_PERMISSION wait for an operator; terminal states are final.
pub fn orphaned(w: &WorkerRecord, now: i64) -> bool {
    if !matches!(
        w.milestone(),
        Milestone::Working | Milestone::PushedToCi | Milestone::FixingCi
    ) {
        return false;
    }
    match w.supervisor_pid {
        None => true,
        Some(pid) => {
            w.lease_until_ms.unwrap_or(0) <= now
                || !crate::process::process_alive(pid as i32, w.supervisor_start.map(|s| s as u64))
        }
    }
}

/// Claims every orphan it can and reconciles it. `start_supervisors: false` is for tests and
/// measurements that only want the decisions.
pub fn resume(l: &Loaded, start_supervisors: bool) -> Result<Vec<Reconciled>, String> {
    let mut store = l.store().map_err(|f| f.message)?;
    let me = std::process::id() as i64;
    let my_start = crate::process::proc_stat(me as i32).map(|s| s.start_ticks as i64);
    let workers = store.workers().map_err(|e| e.to_string())?;
    refresh_stale_checkpoints(l, &mut store, &workers);
    let candidates: Vec<String> = workers
        .into_iter()
        .filter(|w| orphaned(w, now_ms()))
        .map(|w| w.id)
        .collect();
    let mut claimed: Vec<WorkerRecord> = Vec::new();
    for id in candidates {
        let won = store
            .write(|tx| {
                let Some(w) = ws::get_worker(tx, &id)? else {
                    return Ok(None);
                };
                if !orphaned(&w, now_ms()) {
                    return Ok(None); // another resumer (or a new supervisor) got there first
                }
                ws::claim_lease(tx, &id, me, my_start, now_ms() + LEASE_MS)?;
                ws::add_event(
                    tx,
                    &id,
                    "resume_claimed",
                    w.milestone(),
                    &format!("claimed by orch resume (pid {me})"),
                )?;
                // The record as the dead supervisor left it: it says why the worker stopped.
                Ok(Some(w))
            })
            .map_err(|e| e.to_string())?;
        claimed.extend(won);
    }
    if claimed.is_empty() {
        return Ok(Vec::new());
    }
    // A dead supervisor's worker dies with it (parent-death signal); make sure, so that a
    // replacement never runs beside its predecessor.
    for w in &claimed {
        if let Some(pgid) = w.worker_pid
            && crate::process::group_alive(pgid as i32)
        {
            let _ = crate::process::signal_group(pgid as i32, crate::process::Signal::KILL);
            // Gone before anything of its worktree is touched (see clear_stale_git_locks).
            let deadline = Instant::now() + Duration::from_secs(2);
            while crate::process::group_alive(pgid as i32) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
    let mut pending_events: HashMap<String, Vec<Event>> = HashMap::new();
    for w in &mut claimed {
        // Only a worker that will run again needs its worktree (and only WORKING can lack one:
        // the spawner died before making it); PUSHED_TO_CI workers need nothing but CI.
        if matches!(w.milestone(), Milestone::Working | Milestone::FixingCi) {
            ensure_worktree(l, w);
        }
        if let Some(ev) = unreported_push(w) {
            pending_events.entry(w.id.clone()).or_default().push(ev);
        }
    }
    let verdicts = poll_all(l, &claimed, &pending_events);
    let mut out = Vec::new();
    let mut started = Vec::new();
    for w in claimed {
        let events = pending_events.remove(&w.id).unwrap_or_default();
        let verdict = verdicts.get(&w.id).cloned();
        let supervisors = start_supervisors.then_some(&mut started);
        match reconcile(l, &mut store, w, events, verdict, supervisors) {
            Ok(r) => out.push(r),
            Err(e) => tracing::error!(error = %e, "resume could not reconcile a worker"),
        }
    }
    await_handover(&mut store, started, me);
    Ok(out)
}

/// Checkpoint files are views written after each commit: a process killed in between (a
/// supervisor right after committing DONE) leaves a file older than its database row, and
/// nobody would write it again for a worker that is not resumed. Rewrites those of workers
/// no live supervisor writes (orphans get theirs when reconciled).
fn refresh_stale_checkpoints(l: &Loaded, store: &mut Store, workers: &[WorkerRecord]) {
    for w in workers {
        if orphaned(w, now_ms()) || crate::cli::workers::supervisor_alive(w) {
            continue;
        }
        let written_ms = std::fs::metadata(crate::checkpoint::path_for(&l.state_dir, w))
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map(|d| d.as_millis() as i64);
        if written_ms.is_none_or(|t| t < w.updated_ms) {
            crate::cli::workers::write_checkpoint(l, store, &w.id);
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
fn await_handover(store: &mut Store, mut started: Vec<(String, std::process::Child)>, me: i64) {
    let deadline = Instant::now() + HANDOVER_WAIT;
    let mut renewed = Instant::now();
    while !started.is_empty() {
        // The claims stay ours while we wait: an expired lease would make the workers look
        // orphaned to other resumers however alive this process is.
        if renewed.elapsed() >= Duration::from_secs(3) {
            renewed = Instant::now();
            for (id, _) in &started {
                let _ = store.write(|tx| ws::set_lease(tx, id, me, now_ms() + LEASE_MS));
            }
        }
        started.retain_mut(|(id, child)| {
            let taken = !matches!(store.worker(id), Ok(Some(w)) if w.supervisor_pid == Some(me));
            let exited = matches!(child.try_wait(), Ok(Some(_)) | Err(_));
            if exited && !taken {
                tracing::warn!(worker = %id, "its new supervisor exited before taking over");
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

/// Recreates the worktree and prompts when the spawner died before making them.
fn ensure_worktree(l: &Loaded, w: &WorkerRecord) {
    let wt = Path::new(&w.worktree);
    let Some(repo) = l.config.repo(&w.repo) else {
        return;
    };
    if !worktree_usable(wt) {
        if wt.exists() {
            // A spawner killed inside `git worktree add` leaves a half-made worktree (a `.git`
            // file whose git directory has no HEAD, or no index yet): set it aside, never
            // delete, and make it again.
            let aside = wt.with_file_name(format!("worktree.unusable-{}", now_ms()));
            match std::fs::rename(wt, &aside) {
                Ok(()) => {
                    tracing::warn!(worker = %w.id, "the worktree was unusable; moved to {}", aside.display())
                }
                Err(e) => {
                    tracing::error!(worker = %w.id, error = %e, "cannot move the unusable worktree aside")
                }
            }
        }
        let _ = gitops::git(&repo.path, &["worktree", "prune"]);
        let branch_exists =
            gitops::resolve(&repo.path, &format!("refs/heads/{}", w.branch)).is_ok();
        let result = if branch_exists {
            gitops::git(&repo.path, &["worktree", "add", &w.worktree, &w.branch]).map(|_| ())
        } else {
            gitops::create_worktree(&repo.path, &w.id, &w.branch, &w.base_sha, wt)
        };
        if let Err(e) = result.and_then(|_| gitops::set_upstream(&repo.path, &w.branch, &w.remote))
        {
            tracing::error!(worker = %w.id, error = %e, "cannot recreate the worktree");
        }
    }
    let session = crate::supervisor::session_dir(&l.state_dir, &w.id);
    if !session.join("prompt.md").exists() {
        let _ = crate::spawn::render_prompts(&l.config, &l.contract, w, &session, "");
    }
}

/// The git directory of a worktree (from its `.git` file).
fn worktree_git_dir(wt: &Path) -> Option<PathBuf> {
    let text = std::fs::read_to_string(wt.join(".git")).ok()?;
    let gitdir = text.trim().strip_prefix("gitdir:")?;
    Some(wt.join(gitdir.trim()))
}

/// A worktree a worker can use: HEAD resolves and the checkout got as far as its index.
fn worktree_usable(wt: &Path) -> bool {
    gitops::head(wt).is_ok() && worktree_git_dir(wt).is_some_and(|d| d.join("index").exists())
}

/// Removes the lock files a worker killed inside a git command leaves behind, so that its
/// replacement can commit and push. Safe: the previous worker's group is dead, and its
/// worktree, branch and remote branch belong to this worker alone.
fn clear_stale_git_locks(l: &Loaded, w: &WorkerRecord) {
    let wt = Path::new(&w.worktree);
    let mut stale = Vec::new();
    if let Some(gitdir) = worktree_git_dir(wt) {
        stale.push(gitdir.join("index.lock"));
        stale.push(gitdir.join("HEAD.lock"));
    }
    let branch_lock = format!("refs/heads/{}.lock", w.branch);
    if let Some(repo) = l.config.repo(&w.repo) {
        let common = repo.path.join(".git");
        let common = if common.is_dir() {
            common
        } else {
            repo.path.clone()
        };
        stale.push(common.join(&branch_lock));
        if l.config.forge.kind == crate::config::ForgeKind::Local {
            stale.push(
                crate::forge::local::LocalForge::new(&l.state_dir, &l.config)
                    .remote_path(&w.repo)
                    .join(&branch_lock),
            );
        }
    }
    for p in stale {
        if p.exists() && std::fs::remove_file(&p).is_ok() {
            tracing::warn!(worker = %w.id, "removed a stale git lock its previous worker left: {}", p.display());
        }
    }
}

/// A push the worker made but never reported (it died first): the remote branch is ahead of
/// the tracked SHA.
fn unreported_push(w: &WorkerRecord) -> Option<Event> {
    if !matches!(w.milestone(), Milestone::Working | Milestone::FixingCi) {
        return None;
    }
    let wt = Path::new(&w.worktree);
    gitops::fetch(wt, &w.remote).ok()?;
    let head = gitops::resolve(wt, &format!("refs/remotes/{}/{}", w.remote, w.branch)).ok()?;
    if head == w.base_sha || Some(&head) == w.progress.tracked_sha.as_ref() {
        return None;
    }
    let pushed_ms = gitops::commit_time_ms(wt, &head).unwrap_or_else(|_| now_ms());
    Some(Event::Push {
        sha: head,
        pushed_ms,
        via: Channel::Output,
    })
}

type Polled = Result<(Verdict, Vec<CiRun>), ForgeError>;

/// The verdict of each worker's (possibly newly found) tracked SHA, CI_CONCURRENCY at a time.
fn poll_all(
    l: &Loaded,
    workers: &[WorkerRecord],
    pending: &HashMap<String, Vec<Event>>,
) -> HashMap<String, (String, Polled)> {
    let mut jobs = Vec::new();
    for w in workers {
        let pushed = pending.get(&w.id).and_then(|evs| {
            evs.iter().find_map(|e| match e {
                Event::Push { sha, pushed_ms, .. } => Some((sha.clone(), *pushed_ms)),
                _ => None,
            })
        });
        let (sha, pushed_ms) = match (pushed, &w.progress.tracked_sha) {
            (Some((s, p)), _) => (s, Some(p)),
            (None, Some(s)) => (s.clone(), w.progress.pushed_ms),
            (None, None) => continue,
        };
        if let Some(repo) = l.config.repo(&w.repo) {
            jobs.push((w.id.clone(), repo.clone(), sha, pushed_ms));
        }
    }
    let mut out = HashMap::new();
    if jobs.is_empty() {
        return out;
    }
    let forge = match AnyForge::from_config(&l.config, &l.contract, &l.state_dir) {
        Ok(f) => f,
        Err(e) => {
            for (id, _, sha, _) in jobs {
                let err = ForgeError::Blocking {
                    kind: crate::forge::BlockingKind::Other,
                    message: e.clone(),
                };
                out.insert(id, (sha, Err(err)));
            }
            return out;
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
                out.insert(id, (sha, r));
            }
        }
    });
    out
}

/// Why the previous worker is gone, in words a replacement can use.
fn why_ended(w: &WorkerRecord) -> String {
    if let Some(r) = &w.progress.end_reason {
        return r.clone();
    }
    if w.worker_running {
        return match w.supervisor_pid {
            Some(pid) => format!("its supervisor (pid {pid}) died while it was running"),
            None => "its supervisor died while it was running".into(),
        };
    }
    match (w.exit_code, &w.progress.tracked_sha) {
        (Some(c), _) => format!("it exited with code {c} before finishing"),
        // A supervisor that only followed CI for a pushed SHA had no worker to lose.
        (None, Some(sha)) => format!(
            "orch was following CI for {} with no worker running when its supervisor died",
            &sha[..10.min(sha.len())]
        ),
        (None, None) => "it was never started (the spawning process died)".into(),
    }
}

/// What a replacement worker is told (rendered into its prompt's {{resume}}).
fn resume_note(l: &Loaded, w: &WorkerRecord, why: &str, n: i64) -> String {
    let wt = Path::new(&w.worktree);
    let commits = gitops::commits_since(wt, &w.base_sha).unwrap_or_default();
    let files = gitops::files_modified(wt, &w.base_sha).unwrap_or_default();
    let p = &w.progress;
    let mut s = format!(
        "RESUMING as replacement worker {n} of {}: the previous worker ended because {why}.\n",
        l.config.worker.max_respawns
    );
    if commits.is_empty() {
        s.push_str("Work so far: no commits on your branch yet.\n");
    } else {
        let shorts: Vec<&str> = commits.iter().map(|c| &c[..10.min(c.len())]).collect();
        s.push_str(&format!(
            "Work so far: {} commit(s) on your branch ({}); files: {}.\n",
            commits.len(),
            shorts.join(", "),
            if files.is_empty() {
                "-".into()
            } else {
                files.join(", ")
            }
        ));
    }
    let missing = match (&p.tracked_sha, p.verdict) {
        (None, _) => "push your work and report PUSHED_TO_CI".to_string(),
        (Some(sha), Some(VerdictKind::Red)) => format!(
            "CI is red for {} (failing: {}): fix it, push, report PUSHED_TO_CI",
            &sha[..10.min(sha.len())],
            if p.failed_jobs.is_empty() {
                "see orch ci status".into()
            } else {
                p.failed_jobs.join(", ")
            }
        ),
        (Some(sha), Some(VerdictKind::SyncNotDone)) => format!(
            "{} for {}: push a new commit (an empty commit is fine) and report PUSHED_TO_CI",
            p.verdict_detail
                .clone()
                .unwrap_or_else(|| "the sync job did not succeed".into()),
            &sha[..10.min(sha.len())]
        ),
        (Some(sha), Some(VerdictKind::NoRun)) => format!(
            "no push-triggered CI run appeared for {}: push again and report PUSHED_TO_CI",
            &sha[..10.min(sha.len())]
        ),
        (Some(sha), v) => format!(
            "CI for {} is {}: continue, push fixes if needed, report PUSHED_TO_CI",
            &sha[..10.min(sha.len())],
            v.map(VerdictKind::as_str).unwrap_or("unknown")
        ),
    };
    s.push_str(&format!(
        "Last CI: {}.\nStill missing: {missing}.\n",
        p.verdict.map(VerdictKind::as_str).unwrap_or("none")
    ));
    s
}

fn reconcile(
    l: &Loaded,
    store: &mut Store,
    mut w: WorkerRecord,
    mut events: Vec<Event>,
    polled: Option<(String, Polled)>,
    supervisors: Option<&mut Vec<(String, std::process::Child)>>,
) -> Result<Reconciled, String> {
    let before = w.milestone();
    let why = why_ended(&w);
    let mut detail = Vec::new();
    let mut forge_unreachable = false;
    if let Some((sha, result)) = &polled {
        match result {
            Ok((v, runs)) => {
                let id = w.id.clone();
                let runs_json = serde_json::to_value(runs).unwrap_or_default();
                let pushed = events.iter().find_map(|e| match e {
                    Event::Push { pushed_ms, .. } => Some(*pushed_ms),
                    _ => None,
                });
                // Record the newly found push first so the verdict has a row to land in, with
                // the push time the supervisor would have used (pushes are ordered by it).
                if let Some(pushed_ms) = pushed {
                    let _ = store.write(|tx| ws::record_push(tx, &id, sha, pushed_ms));
                }
                let _ = store.write(|tx| {
                    ws::record_verdict(
                        tx,
                        &id,
                        sha,
                        v.kind.as_str(),
                        &v.detail,
                        &v.failed_jobs,
                        &runs_json,
                    )
                });
                events.push(Event::Verdict {
                    sha: sha.clone(),
                    kind: v.kind,
                    failed_jobs: v.failed_jobs.clone(),
                    detail: v.detail.clone(),
                });
                detail.push(format!("CI {} for {}", v.kind, &sha[..10.min(sha.len())]));
            }
            Err(e) => {
                forge_unreachable = true;
                detail.push(format!("CI unknown ({e})"));
            }
        }
    }
    let mut progress = w.progress.clone();
    let mut effects = Vec::new();
    for ev in &events {
        let (p, fx) = step(&l.contract, &w.id, &progress, ev, now_ms());
        progress = p;
        effects.extend(fx);
    }
    // A pushed SHA whose sync job did not run (or that never got a run) needs a new push:
    // that is work for a replacement, counted as a fix attempt.
    if progress.milestone == Milestone::PushedToCi
        && matches!(
            progress.verdict,
            Some(VerdictKind::SyncNotDone | VerdictKind::NoRun)
        )
    {
        let (p, fx) = step(
            &l.contract,
            &w.id,
            &progress,
            &Event::Claim {
                milestone: Milestone::FixingCi,
                note: "resume: a new push is needed".into(),
                via: Channel::Report,
            },
            now_ms(),
        );
        progress = p;
        effects.extend(fx);
    }
    let mut action = match progress.milestone {
        Milestone::Done => "done",
        Milestone::Failed => "failed",
        Milestone::PushedToCi => "following",
        Milestone::Working | Milestone::FixingCi => "respawn",
        _ => "unchanged",
    }
    .to_string();
    let _ = forge_unreachable;
    let mut respawns = w.respawns;
    let mut note: Option<String> = None;
    if action == "respawn" {
        if respawns >= l.config.worker.max_respawns as i64 {
            let (p, fx) = step(
                &l.contract,
                &w.id,
                &progress,
                &Event::Fail {
                    kind: "respawns_exhausted".into(),
                    reason: format!(
                        "respawns exhausted ({} of {}); last: {why}",
                        respawns, l.config.worker.max_respawns
                    ),
                },
                now_ms(),
            );
            progress = p;
            effects.extend(fx);
            action = "failed".into();
        } else {
            respawns += 1;
            clear_stale_git_locks(l, &w);
            w.progress = progress.clone();
            let n = resume_note(l, &w, &why, respawns);
            note = Some(n);
            progress.end_reason = None;
            progress.permission_denials = 0;
            action = "respawned".into();
        }
    }
    // A resumed worker gets fresh timers for its milestone.
    if matches!(action.as_str(), "respawned" | "following") {
        let (m, now) = (progress.milestone, now_ms());
        progress.since_ms = now;
        progress.last_progress_ms = now;
        progress.extended = false;
        progress.warned = false;
        progress.deadline_ms = l
            .contract
            .timeouts
            .get(m.as_str())
            .map(|t| now + t.timeout.as_millis() as i64);
    }
    let keep_lease = supervisors.is_some() && matches!(action.as_str(), "respawned" | "following");
    persist(
        l,
        store,
        &w,
        &progress,
        &effects,
        respawns,
        note.as_deref(),
        keep_lease,
        &why,
    )?;
    w.progress = progress.clone();
    w.respawns = respawns;
    if let Some(n) = &note {
        let session = crate::supervisor::session_dir(&l.state_dir, &w.id);
        crate::spawn::render_prompts(&l.config, &l.contract, &w, &session, n)?;
    }
    crate::cli::workers::write_checkpoint(l, store, &w.id);
    if let Some(started) = supervisors.filter(|_| keep_lease) {
        let child = start_detached(l, &w.id).map_err(|f| f.message)?;
        started.push((w.id.clone(), child));
    }
    detail.push(format!("previous worker: {why}"));
    Ok(Reconciled {
        worker_id: w.id.clone(),
        repo: w.repo.clone(),
        before,
        after: progress.milestone,
        action,
        detail: detail.join("; "),
    })
}

#[allow(clippy::too_many_arguments)]
fn persist(
    l: &Loaded,
    store: &mut Store,
    w: &WorkerRecord,
    progress: &Progress,
    effects: &[Effect],
    respawns: i64,
    note: Option<&str>,
    keep_lease: bool,
    why: &str,
) -> Result<(), String> {
    let id = w.id.clone();
    let mut alerts = Vec::new();
    let result = store.write(|tx| {
        ws::save_progress(tx, &id, progress)?;
        for e in effects {
            match e {
                Effect::Transition { from, to, reason } => {
                    ws::add_event(tx, &id, "transition", *to, &format!("{from} -> {to}: {reason} (resume)"))?
                }
                Effect::Violation { kind, detail } => {
                    ws::add_event(tx, &id, "violation", progress.milestone, &format!("{kind}: {detail}"))?
                }
                Effect::ReleaseLock { reason } => {
                    release_in(tx, &id, Some(reason), Some("orch resume"))?;
                    ws::add_event(tx, &id, "lock_released", progress.milestone, reason)?;
                }
                Effect::Track { sha } => ws::record_push(tx, &id, sha, progress.pushed_ms.unwrap_or_else(now_ms))?,
                Effect::Alert { severity, kind, message } => {
                    let a = AlertRecord {
                        id: 0,
                        at_ms: now_ms(),
                        severity: severity.as_str().into(),
                        worker_id: Some(id.clone()),
                        repo: Some(w.repo.clone()),
                        kind: kind.clone(),
                        message: message.clone(),
                    };
                    ws::add_alert(tx, &a)?;
                    alerts.push(a);
                }
                _ => {}
            }
        }
        if note.is_some() {
            ws::add_event(tx, &id, "respawn", progress.milestone, &format!("replacement {respawns}: previous worker {why}"))?;
        }
        tx.execute(
            "UPDATE workers SET respawns = ?2, resume_note = COALESCE(?3, resume_note), worker_running = 0, worker_pid = NULL,
                 lease_until_ms = CASE WHEN ?4 THEN lease_until_ms ELSE 0 END WHERE id = ?1",
            rusqlite::params![id, respawns, note, keep_lease],
        )?;
        Ok(())
    });
    result.map_err(|e| e.to_string())?;
    crate::alerts::append_jsonl(&l.state_dir, &alerts);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Rebuilding the database from checkpoint files.

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
pub fn rebuild_from_checkpoints(l: &Loaded) -> Result<Rebuilt, String> {
    let db = l.state_dir.join(crate::store::DB_FILE);
    let mut moved_aside = None;
    let mut store = match Store::open(&l.state_dir) {
        Ok(mut s) => {
            let n = s.workers().map(|w| w.len());
            match n {
                Ok(0) => s,
                Ok(n) => {
                    return Err(format!(
                        "the database {} is readable and holds {n} workers; --from-checkpoints only rebuilds a missing or unreadable database (run `orch resume` instead)",
                        db.display()
                    ));
                }
                Err(e) => {
                    drop(s);
                    moved_aside = Some(move_aside(&db, &e.to_string())?);
                    Store::open(&l.state_dir).map_err(|e| e.to_string())?
                }
            }
        }
        Err(StoreError::Locked { path }) => {
            return Err(format!(
                "database {} is locked by another process; not touching it",
                path.display()
            ));
        }
        Err(e) => {
            moved_aside = Some(move_aside(&db, &e.to_string())?);
            Store::open(&l.state_dir).map_err(|e| e.to_string())?
        }
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(&l.state_dir)
        .map_err(|e| format!("{}: {e}", l.state_dir.display()))?
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
                if let Some(v) = &ci.verdict {
                    ws::record_verdict(
                        tx,
                        &rec.id,
                        &ci.sha,
                        v,
                        ci.detail.as_deref().unwrap_or(""),
                        &ci.jobs_failed,
                        &serde_json::Value::Null,
                    )?;
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
        match outcome.map_err(|e| e.to_string())? {
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
fn move_aside(db: &Path, why: &str) -> Result<PathBuf, String> {
    let stamp = jiff::Timestamp::now()
        .strftime("%Y%m%dT%H%M%SZ")
        .to_string();
    let target = db.with_file_name(format!("orch.db.unreadable-{stamp}"));
    if db.exists() {
        std::fs::rename(db, &target)
            .map_err(|e| format!("cannot move {} aside: {e}", db.display()))?;
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
