//! The supervisor's lease on its worker: exactly one supervisor per worker. Claimed when
//! supervision starts (taking it over from the spawner or resumer that started this process),
//! renewed every few seconds, given up when supervision ends. `orch resume` treats a worker
//! whose lease ran out, or whose holder is gone, as orphaned.

use super::SuperviseError;
use crate::store::workers::{self as ws, WorkerRecord};
use crate::store::{Store, now_ms};

/// Names the pid whose lease a new supervisor may take over (its spawner).
pub const LEASE_FROM_ENV: &str = "ORCH_LEASE_FROM";
/// A supervisor that has not renewed its lease for this long is considered gone.
pub const LEASE_MS: i64 = 15_000;
/// How often a holder renews.
pub const RENEW_EVERY_MS: i64 = 5_000;

/// This process's pid, as leases record it.
pub fn me() -> i64 {
    crate::pidns::host_pid() as i64
}

/// Takes the lease on worker `id` for this process, unless another live process holds it
/// (the process that started this one, named by `ORCH_LEASE_FROM`, hands its lease over).
/// From then on every write of `store` carries the lease's fencing token.
pub fn claim(store: &mut Store, id: &str) -> Result<(WorkerRecord, i64), SuperviseError> {
    let me = me();
    let my_start = crate::process::proc_stat(me as i32).map(|s| s.start_ticks as i64);
    let handoff: Option<i64> = std::env::var(LEASE_FROM_ENV)
        .ok()
        .and_then(|v| v.parse().ok());
    let claimed = store.write(|tx| {
        let Some(w) = ws::get_worker(tx, id)? else {
            return Ok(Err(SuperviseError::UnknownWorker(id.to_string())));
        };
        let now = tx.clock_ms()?;
        if let Some(lease) = w.lease()
            && !lease.held_by(me)
            && !handoff.is_some_and(|from| lease.held_by(from))
            && lease.is_live(now)
        {
            return Ok(Err(SuperviseError::AlreadySupervised {
                id: id.to_string(),
                pid: lease.pid,
            }));
        }
        let fence = ws::claim_lease(tx, id, me, my_start, LEASE_MS)?;
        Ok(Ok((ws::get_worker(tx, id)?.expect("just read"), fence)))
    })??;
    store.fence(id, claimed.1);
    Ok(claimed)
}

/// Renews the lease when due.
#[derive(Debug)]
pub struct LeaseKeeper {
    worker: String,
    fence: i64,
    last_renew_ms: i64,
}

impl LeaseKeeper {
    pub fn new(worker: &str, fence: i64) -> LeaseKeeper {
        LeaseKeeper {
            worker: worker.to_string(),
            fence,
            last_renew_ms: now_ms(),
        }
    }

    pub fn due(&self, now: i64) -> bool {
        now - self.last_renew_ms >= RENEW_EVERY_MS
    }

    /// Extends the lease (and this node's heartbeat); false when another process holds it
    /// now; `Err` (why) when the state cannot be written at all (full, read-only, damaged).
    pub fn renew(&mut self, store: &mut Store, slots: usize) -> Result<bool, String> {
        self.last_renew_ms = now_ms();
        let renewed = store.write(|tx| {
            let held = ws::renew_lease(tx, &self.worker, self.fence, Some(LEASE_MS))?;
            if let Some(hold) = crate::fault::hold_renewal() {
                std::thread::sleep(hold);
            }
            // A clash is not this supervisor's to settle: spawns and resumes on this node
            // refuse it.
            if held
                && let Some(clash) =
                    crate::store::nodes::beat(tx, crate::node::name(), crate::node::place(), slots)?
            {
                tracing::error!(worker = %self.worker, "{clash}");
            }
            Ok(held)
        });
        match renewed {
            Ok(held) => Ok(held),
            Err(crate::store::StoreError::Fenced { .. }) => Ok(false),
            Err(e) => match super::storage::unwritable(&e) {
                Some(why) => Err(why),
                None => {
                    tracing::warn!(worker = %self.worker, error = %e, "cannot renew the lease; trying again in a second");
                    // Again in a second, not at the next interval: a database back from a
                    // restart must see the lease renewed before it lapses.
                    self.last_renew_ms = now_ms() - RENEW_EVERY_MS + 1_000;
                    Ok(true) // a busy database is not a lost lease
                }
            },
        }
    }

    /// Gives the lease up (the worker looks orphaned at once to the next resumer).
    pub fn give_up(&self, store: &mut Store) {
        let _ = store.write(|tx| ws::renew_lease(tx, &self.worker, self.fence, None));
    }
}
