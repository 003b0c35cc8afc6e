//! A worker made live again by an operator: `orch respawn` of a BLOCKED, BLOCKED_PERMISSION
//! or PAUSED worker, `orch approve` of a held one whose change then lands, the reassignment of
//! a FAILED one's task. Two rules, kept in the transaction that claims the worker:
//!
//! - an attempt another one superseded (`store::supersede`: its task reassigned, its wave task
//!   retried, or done by a later worker of the task) is refused, naming what replaced it;
//! - a worker process runs only while its chain lock is held by it: the lock is verified held,
//!   or taken again as a spawn takes one (nothing in its chain, a free slot) — else refused,
//!   nothing started. A lock taken here is given back (`give_back`) when what was to start
//!   does not.

use super::Error;
use crate::config::Config;
use crate::lock::HolderKind;
use crate::store::sql::{Result, Tx};
use crate::store::supersede::{self, Superseded};
use crate::store::workers::WorkerRecord;
use crate::store::{LockAttempt, holds_lock, release_in, retake_in, try_lock_in};

/// The refusal of making `w` live again when another attempt superseded it (`verb`: what was
/// asked, "respawned", "approved", "reassigned").
pub fn refuse_superseded(tx: &Tx, w: &WorkerRecord, verb: &str) -> Result<Option<Error>> {
    Ok(supersede::of(tx, w)?.map(|s| refusal(&w.id, verb, &s)))
}

/// The words of that refusal.
pub fn refusal(id: &str, verb: &str, s: &Superseded) -> Error {
    Error::No(format!(
        "{id} not {verb}: it was superseded {}; only a task's latest attempt goes on",
        s.describe()
    ))
}

/// How a claim holds its worker's chain lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Chain {
    /// It held it already.
    Held,
    /// Taken again by this claim (given back if nothing starts).
    Taken,
}

/// In the claim's transaction: `w`'s chain lock, held by it already or taken now — all or
/// nothing, as a spawn takes one: refused (nothing taken) when its chain is locked by another
/// or no slot is free (`worker.max_parallel`).
pub fn hold_chain(
    tx: &Tx,
    config: &Config,
    w: &WorkerRecord,
    verb: &str,
    by: &str,
) -> Result<std::result::Result<Chain, Error>> {
    if holds_lock(tx, &w.id)? {
        return Ok(Ok(Chain::Held));
    }
    let why = |what: String| {
        Error::No(format!(
            "{} not {verb}: it holds no chain lock (released: `orch wave retry`, `orch release --force`) and {what}",
            w.id
        ))
    };
    if let Some(full) = super::spawn::Capacity::check(tx, &config.worker)? {
        return Ok(Err(why(format!(
            "cannot take it again: {}",
            full.describe()
        ))));
    }
    let reason = format!("taken again: {verb} by {by}");
    let blocked = match try_lock_in(
        tx,
        &config.graph,
        &w.repo,
        &w.id,
        HolderKind::Worker,
        Some(&reason),
        Some(by),
    )? {
        LockAttempt::Acquired(_) => return Ok(Ok(Chain::Taken)),
        LockAttempt::Blocked(b) => b,
    };
    // Its own row deleted outside orch (the history's last word an acquire) counts it as
    // holding its chain: only the others block it.
    let others: Vec<_> = blocked.into_iter().filter(|b| b.holder != w.id).collect();
    if others.is_empty()
        && let LockAttempt::Acquired(_) = retake_in(tx, &config.graph, &w.repo, &w.id, &reason)?
    {
        return Ok(Ok(Chain::Taken));
    }
    Ok(Err(why(format!(
        "its chain is locked: {}",
        others
            .iter()
            .map(|b| b.describe(&w.repo))
            .collect::<Vec<_>>()
            .join("; ")
    ))))
}

/// `orch respawn`'s claim of a BLOCKED, BLOCKED_PERMISSION or PAUSED worker nobody supervises,
/// by process `me` (started at `my_start`): refused under a FATAL, for another milestone, while
/// supervised, when superseded, and when its chain lock is neither held nor free to take again;
/// else its lease is `me`'s and its chain lock its own, in this one transaction.
pub fn claim_respawn(
    tx: &Tx,
    config: &Config,
    id: &str,
    me: i64,
    my_start: Option<i64>,
    by: &str,
) -> Result<std::result::Result<(WorkerRecord, Chain), Error>> {
    use crate::milestone::Milestone;
    use crate::store::workers as ws;
    let Some(w) = ws::get_worker(tx, id)? else {
        return Ok(Err(Error::Refused(format!("no worker {id}"))));
    };
    let fatal = crate::store::fatal::covering(tx, &config.graph, &w.repo)?;
    if let Some(h) = fatal.first() {
        return Ok(Err(Error::No(format!(
            "{id} is halted by a FATAL on {}'s chain ({}): no worker there goes on until an operator clears it (`orch fatal --clear {}`)",
            h.repo,
            crate::text::escape(&h.reason),
            h.repo
        ))));
    }
    if !matches!(
        w.milestone(),
        Milestone::Blocked | Milestone::BlockedPermission | Milestone::Paused
    ) {
        let hint = if w.orphaned(crate::store::now_ms()) {
            " (its supervisor is gone: orch resume replaces it)"
        } else {
            ""
        };
        // A valid question whose answer is no (as cancelling an ended worker).
        return Ok(Err(Error::No(format!(
            "{id} is {}: only a BLOCKED, BLOCKED_PERMISSION or PAUSED worker is respawned{hint}",
            w.milestone()
        ))));
    }
    if w.supervised(tx.clock_ms()?) {
        return Ok(Err(Error::No(format!(
            "{id} is still held by process {}",
            w.supervisor_pid.unwrap_or_default()
        ))));
    }
    // Never a second worker on a task another attempt took over, and never a worker
    // without its chain lock: both decided in this claim's transaction.
    if let Some(e) = refuse_superseded(tx, &w, "respawned")? {
        return Ok(Err(e));
    }
    let chain = match hold_chain(tx, config, &w, "respawned", by)? {
        Ok(chain) => chain,
        Err(e) => return Ok(Err(e)),
    };
    ws::claim_lease(tx, id, me, my_start, super::supervisor::LEASE_MS)?;
    Ok(Ok((w, chain)))
}

/// What `claim_approve` hands on: the worker, the step's state and effects, and how it holds
/// its chain lock when its change is to land.
pub type ApproveClaim = (
    WorkerRecord,
    crate::milestone::Progress,
    Vec<crate::milestone::Effect>,
    Option<Chain>,
);

/// `orch approve`'s claim of a held worker nobody supervises, by process `me`: refused while
/// supervised and when superseded; a change the approval sends on to land needs its chain
/// lock, held or taken again here (else refused, nothing claimed).
#[allow(clippy::too_many_arguments)]
pub fn claim_approve(
    tx: &Tx,
    config: &Config,
    contract: &crate::contract::Contract,
    id: &str,
    event: &crate::milestone::Event,
    me: i64,
    my_start: Option<i64>,
    by: &str,
) -> Result<std::result::Result<ApproveClaim, Error>> {
    use crate::milestone::step;
    use crate::store::workers as ws;
    let Some(w) = ws::get_worker(tx, id)? else {
        return Ok(Err(Error::Refused(format!("no worker {id}"))));
    };
    if w.supervised(tx.clock_ms()?) {
        return Ok(Err(Error::No(format!(
            "{id} was taken over by process {} meanwhile: approve again",
            w.supervisor_pid.unwrap_or_default()
        ))));
    }
    if let Some(e) = refuse_superseded(tx, &w, "approved")? {
        return Ok(Err(e));
    }
    let (after, effects) = step(contract, id, &w.progress, event, crate::store::now_ms());
    // A change that is to land gets a supervisor of its own: the chain lock is its, held
    // or taken in this very transaction, or nothing starts.
    let chain = if after.landing_active() {
        match hold_chain(tx, config, &w, "approved", by)? {
            Ok(chain) => Some(chain),
            Err(e) => return Ok(Err(e)),
        }
    } else {
        None
    };
    ws::claim_lease(tx, id, me, my_start, super::supervisor::LEASE_MS)?;
    Ok(Ok((w, after, effects, chain)))
}

/// Gives back a lock `hold_chain` took for a start that did not happen (audited).
pub fn give_back(tx: &Tx, id: &str, chain: Chain, why: &str) -> Result<()> {
    if chain == Chain::Taken {
        release_in(tx, id, Some(why), Some("orch"))?;
    }
    Ok(())
}

#[cfg(test)]
#[path = "relive_tests.rs"]
mod tests;
