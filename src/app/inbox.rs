//! A request to a worker's supervisor through the inbox (the `requests` table): queued, the
//! supervisor's doorbell rung, then its answer waited for. Used by operators' requests
//! (`app::operator`) and by the report channel (`app::channel`).

use super::{Error, Result};
use crate::store::Store;
use crate::store::workers::{self as ws, RequestKind};
use std::time::{Duration, Instant};

/// How long a request waits for the supervisor's answer.
pub const ANSWER_WAIT: Duration = Duration::from_secs(60);

/// The supervisor's answer to a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answered {
    pub outcome: String,
    pub refused: bool,
}

/// Queues a request for `worker`'s supervisor and waits up to `limit` for its answer.
/// `Ok(None)`: the request stays queued, unanswered. An unknown worker is bad input.
pub fn ask(
    store: &mut Store,
    worker: &str,
    kind: &RequestKind,
    limit: Duration,
) -> Result<Option<Answered>> {
    ask_then(store, worker, kind, limit, |_| {})
}

/// Like [`ask`], calling `queued` with the request's id before the row is committed (the
/// report channel marks the rows it queued before its supervisor can read them).
pub fn ask_then(
    store: &mut Store,
    worker: &str,
    kind: &RequestKind,
    limit: Duration,
    queued: impl Fn(i64),
) -> Result<Option<Answered>> {
    match ask_inner(store, worker, kind, limit, queued, false)? {
        Asked::Answered(a) => Ok(Some(a)),
        Asked::Queued | Asked::Gone => Ok(None),
    }
}

/// What became of an operator's request to a supervisor (see [`ask_supervisor`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Asked {
    Answered(Answered),
    /// The supervisor runs but did not answer in time: the request stays queued.
    Queued,
    /// The supervisor ended without answering (it stopped just as the request was queued —
    /// its worker reported BLOCKED, say): the request was withdrawn, so that no later
    /// supervisor applies it; the caller acts without one.
    Gone,
}

/// Like [`ask`], but a supervisor that ends without answering is noticed at once, not after
/// `limit`: an operator's request then falls back to what it does for an unsupervised worker.
pub fn ask_supervisor(
    store: &mut Store,
    worker: &str,
    kind: &RequestKind,
    limit: Duration,
) -> Result<Asked> {
    ask_inner(store, worker, kind, limit, |_| {}, true)
}

fn ask_inner(
    store: &mut Store,
    worker: &str,
    kind: &RequestKind,
    limit: Duration,
    queued: impl Fn(i64),
    withdraw_when_gone: bool,
) -> Result<Asked> {
    let rid = store.write(|tx| {
        if ws::get_worker(tx, worker)?.is_none() {
            return Ok(None);
        }
        let rid = ws::add_request(tx, worker, kind)?;
        queued(rid);
        Ok(Some(rid))
    })?;
    let rid = rid.ok_or_else(|| Error::Refused(format!("no worker {worker}")))?;
    // This node's doorbell: a supervisor on another node finds the request by its polling.
    if let Some(state_dir) = store.state_dir() {
        crate::wake::ring(state_dir, worker, crate::wake::Ring::Inbox);
    }
    let deadline = Instant::now() + limit;
    loop {
        if let Some(r) = store.read(|tx| ws::get_request(tx, rid))?
            && r.processed_ms.is_some()
        {
            let outcome = r.outcome.unwrap_or_default();
            // Rows answered by an orch that did not record `refused` say so in their text.
            let refused = r.refused.unwrap_or_else(|| outcome.starts_with("refused"));
            return Ok(Asked::Answered(Answered { outcome, refused }));
        }
        if withdraw_when_gone
            && store
                .worker(worker)?
                .is_none_or(|w| !w.supervised(crate::store::now_ms()))
        {
            // Withdrawn only if still unanswered (one transaction): an answer written just
            // before is read on the next turn.
            let withdrawn = store.write(|tx| {
                ws::finish_request(
                    tx,
                    rid,
                    "withdrawn: the supervisor ended before it answered",
                    true,
                )
            })?;
            if withdrawn {
                return Ok(Asked::Gone);
            }
            continue;
        }
        if Instant::now() >= deadline {
            return Ok(Asked::Queued);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
