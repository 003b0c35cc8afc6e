//! What people (and workers, through their report channel) ask of one worker: a claim, a
//! cancel or an approval goes to the worker's supervisor through the requests inbox and waits
//! for its answer; a worker with no live supervisor is cancelled or approved here, through the
//! journal; a lock can be forced free, with an audit record.

use super::journal::{self, Committed, Entry, Fact, Writer};
use super::{Error, Loaded, Result};
use crate::forge::Forge;
use crate::lock::ChainLock;
use crate::milestone::{Event, Milestone, step};
use crate::sha::Sha;
use crate::store::workers::{self as ws, RequestKind, WorkerRecord};
use crate::store::{Store, now_ms, release_in};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use super::inbox::{ANSWER_WAIT, Answered, Asked, ask, ask_supervisor, ask_then};

/// Who looks after a worker, as `orch status`, `sessions show` and `orch report` see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Supervision {
    /// Terminal: nobody needs to.
    Ended,
    /// A supervisor holds a live lease.
    Alive,
    /// The lease ran out but its holder still runs (it cannot write: a full disk, a
    /// database held too long); the next `orch resume` takes the worker over.
    LeaseLapsed,
    /// Nobody, and `orch resume` takes it over.
    Gone,
    /// Nobody, and nobody should: BLOCKED, BLOCKED_PERMISSION or PAUSED wait for an operator.
    AwaitsOperator,
}

pub fn supervision(w: &WorkerRecord, now: i64) -> Supervision {
    if w.milestone().is_terminal() {
        Supervision::Ended
    } else if w.supervised(now) {
        Supervision::Alive
    } else if w.lease().is_some_and(|l| {
        l.until_ms > 0 && crate::process::process_alive(l.pid as i32, l.start.map(|s| s as u64))
    }) {
        Supervision::LeaseLapsed
    } else if w.orphaned(now) {
        Supervision::Gone
    } else {
        Supervision::AwaitsOperator
    }
}

/// Where a worker stands for a report that came without its channel (none is recorded): its
/// milestone and who looks after it.
pub fn unreported(store: &mut Store, worker: &str) -> Result<(Milestone, Supervision)> {
    let Some(w) = store.worker(worker)? else {
        return Err(Error::Refused(format!("no worker {worker}")));
    };
    Ok((w.milestone(), supervision(&w, now_ms())))
}

/// What came of a cancel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cancelled {
    /// The supervisor applied it and answered.
    BySupervisor(String),
    /// The supervisor did not answer in time; the request stays queued.
    Queued,
    /// No supervisor was alive: stopped and recorded here.
    Offline(Milestone),
}

/// Cancels worker `id`: through its supervisor when one is alive, else here.
pub fn cancel(l: &Loaded, id: &str, by: String, reason: String) -> Result<Cancelled> {
    let mut store = l.store()?;
    let w = loop {
        let Some(w) = store.worker(id)? else {
            return Err(Error::Refused(format!("no worker {id}")));
        };
        if w.milestone().is_terminal() {
            return Err(Error::No(format!(
                "{id} has already ended ({}): nothing to cancel",
                w.milestone()
            )));
        }
        if !w.supervised(now_ms()) {
            break w;
        }
        let kind = RequestKind::Cancel {
            by: by.clone(),
            reason: reason.clone(),
        };
        match ask_supervisor(&mut store, id, &kind, ANSWER_WAIT)? {
            Asked::Answered(a) => return Ok(Cancelled::BySupervisor(a.outcome)),
            Asked::Queued => return Ok(Cancelled::Queued),
            // Its supervisor ended meanwhile (a worker that reported BLOCKED is stopped and
            // left to an operator): the worker is read again and cancelled here.
            Asked::Gone => continue,
        }
    };
    // No supervisor: stop whatever is left of the worker ourselves, before the lock goes.
    if let Some(pid) = w.worker_pid
        && crate::process::group_alive(pid as i32)
    {
        let _ = crate::process::signal_group(pid as i32, crate::process::Signal::TERM);
        let deadline = Instant::now() + l.config.worker.stop_grace;
        while crate::process::group_alive(pid as i32) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = crate::process::signal_group(pid as i32, crate::process::Signal::KILL);
    }
    // What left the group (daemons) and its cgroup.
    super::orphans::kill_tree(&l.state_dir, &w, false);
    let event = Event::Cancel { by, reason };
    let (after, effects) = step(&l.contract, id, &w.progress, &event, now_ms());
    let entry = Entry::new(&w, "orch")
        .step(&after, &effects)
        .fact(Fact::WorkerStopped);
    // The cancel's transition asks for a checkpoint: the journal writes it.
    let _ = journal::commit(&mut store, &l.state_dir, Writer::Operator, &entry)?;
    Ok(Cancelled::Offline(after.milestone))
}

/// Frees worker `id`'s chain lock without a verified DONE (audited in the lock history and
/// the worker's events). `None`: it holds no lock.
pub fn release(l: &Loaded, id: &str, by: &str, reason: &str) -> Result<Option<ChainLock>> {
    let mut store = l.store()?;
    if store.worker(id)?.is_none() {
        return Err(Error::Refused(format!("no worker {id}")));
    }
    let released = store
        .write(|tx| {
            // A worker runs only while its chain lock is held by it: the lock of one at work (or
            // frozen by a cascade, to go on once it clears) is not freed under it.
            if let Some(w) = ws::get_worker(tx, id)?
                && let Some(why) = at_work(&w)
            {
                return Ok(Err(why));
            }
            let lock = release_in(tx, id, Some(&format!("forced: {reason}")), Some(by))?;
            if lock.is_some()
                && let Some(w) = ws::get_worker(tx, id)?
            {
                ws::add_event(
                    tx,
                    id,
                    "lock_released",
                    w.progress.milestone,
                    &format!("forced by {by}: {reason}"),
                )?;
            }
            Ok(Ok(lock))
        })?
        .map_err(Error::No)?;
    if released.is_some() {
        journal::write_checkpoint(&mut store, &l.state_dir, id);
    }
    Ok(released)
}

/// Why worker `w`'s lock may not be forced free now: its process is at work (WORKING,
/// PUSHED_TO_CI, FIXING_CI with its process running) or frozen by a cascade pause (PAUSED: it
/// goes on when the pause clears). `None` for one that ended, is BLOCKED, or is DONE and
/// landing (a release is how an operator stops a landing).
fn at_work(w: &WorkerRecord) -> Option<String> {
    let m = w.progress.milestone;
    if !is_at_work(m, w.worker_running) {
        return None;
    }
    Some(format!(
        "{} is at work ({m}){}: a worker runs only while it holds its chain lock, so its lock is not freed under it. `orch cancel {}` stops it and frees the lock",
        w.id,
        w.worker_pid
            .map(|p| format!(", pid {p}"))
            .unwrap_or_default(),
        w.id
    ))
}

/// A worker at work — WORKING, PUSHED_TO_CI or FIXING_CI with its process running, or PAUSED
/// (held still, to go on) — keeps its chain lock: `orch release --force` refuses it, and the
/// board offers no Release for it (`board::every_view_renders_an_organisation_with_a_worker_in_every_state`).
pub fn is_at_work(m: Milestone, worker_running: bool) -> bool {
    m == Milestone::Paused
        || (matches!(
            m,
            Milestone::Working | Milestone::PushedToCi | Milestone::FixingCi
        ) && worker_running)
}

/// What an operator is shown before approving a change that touches protected paths: the
/// commit and the diff of those files.
#[derive(Debug, Clone)]
pub struct ToApprove {
    pub worker: WorkerRecord,
    pub sha: Sha,
    pub diff: super::protect::ProtectedDiff,
}

/// The change of worker `id` an approval would be bound to: its tracked commit (which
/// `sha`, a prefix of at least 7 hex digits, must name when given) and the diff of the
/// protected files it touches.
pub fn to_approve(l: &Loaded, id: &str, sha: Option<&str>) -> Result<ToApprove> {
    let mut store = l.store()?;
    let Some(w) = store.worker(id)? else {
        return Err(Error::Refused(format!("no worker {id}")));
    };
    // Not even shown: the change of an attempt another one replaced is not to be approved.
    if let Some(e) = store.read(|tx| super::relive::refuse_superseded(tx, &w, "approved"))? {
        return Err(e);
    }
    let p = &w.progress;
    let Some(tracked) = p.tracked_sha.clone() else {
        return Err(Error::No(format!(
            "{id} has pushed nothing yet: nothing to approve"
        )));
    };
    if let Some(given) = sha {
        let given = given.trim().to_ascii_lowercase();
        if given.len() < 7 || !given.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Error::Refused(format!(
                "--sha {given:?}: give at least 7 hex digits of the commit to approve"
            )));
        }
        if !tracked.starts_with(&given) {
            return Err(Error::No(format!(
                "{id}'s change is at {}, not {given}: an approval is bound to the commit shown (run `orch approve {id}` to see it)",
                tracked.short()
            )));
        }
    }
    if p.milestone.is_terminal() {
        return Err(Error::No(format!(
            "{id} has already ended ({}): nothing to approve",
            p.milestone
        )));
    }
    if p.protected.is_empty() {
        return Err(Error::No(format!(
            "{id}'s change at {} touches no protected path: nothing to approve",
            tracked.short()
        )));
    }
    let diff = super::protect::diff(&l.config, &w, &tracked).map_err(Error::Refused)?;
    Ok(ToApprove {
        worker: w,
        sha: tracked,
        diff,
    })
}

/// What came of an approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Approved {
    /// The supervisor applied (or refused) it and answered.
    BySupervisor(Answered),
    /// The supervisor did not answer in time; the request stays queued.
    Queued,
    /// No supervisor was alive: recorded here; the worker is now in this milestone (a DONE
    /// change that lands is handed to a new supervisor).
    Offline(Milestone),
}

/// Approves the change at `sha` of worker `id` (`by`: who, for the audit record): through
/// its supervisor when one is alive, else here, through the journal. Offline, the branch
/// head on the forge must still be `sha` (DONE is about the branch); a change that then
/// lands gets a supervisor of its own.
pub fn approve(l: &Loaded, id: &str, sha: &Sha, by: &str) -> Result<Approved> {
    let mut store = l.store()?;
    let Some(w) = store.worker(id)? else {
        return Err(Error::Refused(format!("no worker {id}")));
    };
    let audit = Fact::Logged {
        kind: "approval",
        detail: approval_detail(by, sha, &w),
    };
    if let Some(e) = store.read(|tx| super::relive::refuse_superseded(tx, &w, "approved"))? {
        return Err(e);
    }
    if w.supervised(now_ms()) {
        let kind = RequestKind::Approve {
            by: by.to_string(),
            sha: sha.to_string(),
        };
        store.write(|tx| {
            ws::add_event(
                tx,
                id,
                "approval",
                w.progress.milestone,
                &approval_detail(by, sha, &w),
            )
        })?;
        return Ok(match ask(&mut store, id, &kind, ANSWER_WAIT)? {
            Some(a) => Approved::BySupervisor(a),
            None => Approved::Queued,
        });
    }
    // No supervisor: the worker is held (BLOCKED). Its branch must still be at the commit
    // approved — a push made since is a change nobody has seen.
    let repo = l
        .config
        .require_repo(&w.repo)
        .map_err(|e| Error::Refused(e.to_string()))?;
    let forge = l.query_forge(Arc::new(|_: &str| {}))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Refused(format!("cannot start a runtime: {e}")))?;
    let head = rt
        .block_on(forge.branch_head(repo, &w.branch))
        .map_err(|e| {
            Error::No(format!(
                "the head of {id}'s branch {} cannot be read from the forge: {e}",
                w.branch
            ))
        })?;
    if head.as_deref() != Some(sha.as_str()) {
        return Err(Error::No(format!(
            "{id}'s branch {} on the forge is at {}, not the approved {}: `orch respawn {id}` lets a worker verify the new head",
            w.branch,
            head.as_deref().map(crate::sha::short).unwrap_or("nothing"),
            sha.short()
        )));
    }
    let me = std::process::id() as i64;
    let my_start = crate::process::proc_stat(me as i32).map(|s| s.start_ticks as i64);
    let event = Event::Approve {
        sha: sha.clone(),
        by: by.to_string(),
    };
    let claimed = store.write(|tx| {
        super::relive::claim_approve(tx, &l.config, &l.contract, id, &event, me, my_start, by)
    })?;
    let (w, after, effects, chain) = claimed?;
    // Kept until its new supervisor (if it gets one) has it.
    let _kept = super::resume::ClaimsKept::start(&l.state_dir, vec![id.to_string()]);
    if let Some(why) = effects.iter().find_map(|e| match e {
        crate::milestone::Effect::Violation { detail, .. } => Some(detail.clone()),
        _ => None,
    }) {
        let _ = store.write(|tx| {
            ws::set_lease(tx, id, me, None)?;
            match chain {
                Some(c) => super::relive::give_back(tx, id, c, "approval refused"),
                None => Ok(()),
            }
        });
        return Err(Error::No(why));
    }
    let entry = Entry::new(&w, "orch approve")
        .step(&after, &effects)
        .fact(audit);
    if journal::commit(&mut store, &l.state_dir, Writer::me(), &entry)? == Committed::NotOwner {
        return Err(Error::Refused(format!(
            "{id}: another process took it over meanwhile"
        )));
    }
    if after.landing_active() {
        // DONE with its change to land: a supervisor of its own carries it to the base.
        let child = super::start_detached(l, id)?;
        super::resume::await_handover(&mut store, vec![(id.to_string(), child)], me);
    } else {
        let _ = store.write(|tx| ws::set_lease(tx, id, me, None));
    }
    Ok(Approved::Offline(after.milestone))
}

fn approval_detail(by: &str, sha: &Sha, w: &WorkerRecord) -> String {
    format!(
        "{by} approves {} (touches {})",
        sha.short(),
        w.progress.protected.join(", ")
    )
}
