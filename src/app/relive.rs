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

/// Gives back a lock `hold_chain` took for a start that did not happen (audited).
pub fn give_back(tx: &Tx, id: &str, chain: Chain, why: &str) -> Result<()> {
    if chain == Chain::Taken {
        release_in(tx, id, Some(why), Some("orch"))?;
    }
    Ok(())
}
