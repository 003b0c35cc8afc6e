//! What an operator does to a worker: cancel, respawn, release its lock — the work and the
//! answer, the same whether asked by `orch cancel` / `respawn` / `release --force` or by the
//! board's buttons, `by` named in the worker's history.

use super::Error;
use super::view::wave::{WaveCancelView, WaveRetryView};
use super::view::workers::{CancelView, ReleaseView, RespawnView};
use crate::app::Loaded;
use crate::app::operator::{self, ANSWER_WAIT, Cancelled};
use crate::app::wave;

/// `orch cancel`'s work and answer (the board's cancel goes through here too), `by` named
/// in the worker's history.
pub fn cancel_view(
    l: &Loaded,
    id: &str,
    reason: Option<String>,
    by: String,
) -> Result<CancelView, Error> {
    let reason = reason.unwrap_or_else(|| "cancelled by operator".into());
    let (state, outcome) = match operator::cancel(l, id, by.clone(), reason)? {
        Cancelled::BySupervisor(outcome) => ("by_supervisor", outcome),
        Cancelled::Queued => {
            // The supervisor runs but is slow (a held database, a full disk): transient.
            return Err(Error::unavailable(format!(
                "{id}: the supervisor did not answer within {}s; the cancel stays queued",
                ANSWER_WAIT.as_secs()
            )));
        }
        Cancelled::Offline(_) => ("offline", "CANCELLED, lock released".to_string()),
    };
    Ok(CancelView {
        worker_id: id.to_string(),
        cancelled: true,
        by,
        how: state.to_string(),
        outcome,
    })
}

/// `orch respawn`'s work and answer (the board's respawn goes through here too), `by` named
/// in the worker's history.
pub fn respawn_view(l: &Loaded, id: &str, note: &str, by: String) -> Result<RespawnView, Error> {
    let mut store = l.store()?;
    // A FAILED worker's task goes to a new worker told its checkpoint (it cannot go on
    // itself: FAILED is terminal); a BLOCKED or PAUSED one goes on in place.
    if store
        .worker(id)?
        .is_some_and(|w| crate::app::reassign::reassignable(&w))
    {
        let rec = crate::app::reassign::reassign(
            l,
            &mut store,
            id,
            crate::app::reassign::By::Operator { name: &by, note },
        )?;
        return Ok(RespawnView {
            worker_id: id.to_string(),
            milestone: rec.milestone(),
            by,
            new_worker: Some(rec.id),
        });
    }
    drop(store);
    let m = crate::app::resume::respawn(l, id, &by, note)?;
    Ok(RespawnView {
        worker_id: id.to_string(),
        milestone: m,
        by,
        new_worker: None,
    })
}

/// `orch release --force`'s work and answer (the board's release goes through here too):
/// `by` and `reason` kept in the lock history and the worker's history.
pub fn release_view(l: &Loaded, id: &str, reason: &str, by: String) -> Result<ReleaseView, Error> {
    if reason.trim().is_empty() {
        return Err(Error::bad_input(
            "--reason must say why the lock is released",
        ));
    }
    match operator::release(l, id, &by, reason)? {
        Some(lock) => Ok(ReleaseView {
            worker_id: id.to_string(),
            released: true,
            repo: lock.repo.clone(),
            by,
            reason: reason.to_string(),
        }),
        None => Err(Error::no(format!("{id} holds no lock"))),
    }
}

/// `orch wave retry`'s work and answer for a recorded wave (the board's retry goes through
/// here too), `by` named in the previous worker's history.
pub fn wave_retry_view(
    l: &Loaded,
    name: &str,
    task: &str,
    by: &str,
) -> Result<WaveRetryView, Error> {
    Ok(WaveRetryView::of(&wave::retry(l, name, task, by)?))
}

/// `orch wave cancel`'s work and answer for a recorded wave (the board's goes through here
/// too), `by` recorded on the wave and in each cancelled worker's history.
pub fn wave_cancel_view(l: &Loaded, name: &str, by: String) -> Result<WaveCancelView, Error> {
    Ok(WaveCancelView::of(&wave::cancel(l, name, by)?))
}
