//! An operator's hold on a repository's chain: `orch hold` / `unhold` and the board's buttons
//! — the work and the answer, the hold taken as `hold:<by>`, `by` kept in the lock history.

use super::Error;
use super::view::locks::{BlockerView, HoldView, LockView, UnholdView};
use crate::config::Config;
use crate::lock::HolderKind;
use crate::store::{LockAttempt, Store, now_ms};
use std::path::Path;

/// `orch hold`'s work and answer (the board's hold goes through here too): the hold is taken
/// as `hold:<by>`, `by` kept in the lock and the lock history. `held: false` names what is in
/// its way.
pub fn hold_view(
    config: &Config,
    state_dir: &Path,
    repo: &str,
    reason: &str,
    by: &str,
) -> Result<HoldView, Error> {
    config.require_repo(repo)?;
    if reason.trim().is_empty() {
        return Err(Error::bad_input("--reason must say why the chain is held"));
    }
    let holder = format!("hold:{by}");
    let mut store = Store::open_settled(state_dir, config.store.as_ref())?;
    let attempt = store.try_lock(
        &config.graph,
        repo,
        &holder,
        HolderKind::Hold,
        Some(reason),
        Some(by),
    )?;
    if matches!(attempt, LockAttempt::Acquired(_)) {
        crate::app::journal::write_holds(&mut store, state_dir);
    }
    Ok(match attempt {
        LockAttempt::Acquired(lock) => HoldView {
            held: true,
            repo: repo.to_string(),
            lock: Some(LockView::of(&lock, now_ms())),
            chain: config.graph.chain(repo),
            blockers: Vec::new(),
        },
        LockAttempt::Blocked(blocking) => HoldView {
            held: false,
            repo: repo.to_string(),
            lock: None,
            chain: config.graph.chain(repo),
            blockers: BlockerView::all(&blocking, repo),
        },
    })
}

/// `orch unhold`'s work and answer (the board's unhold goes through here too), `by` kept in
/// the lock history.
pub fn unhold_view(
    config: &Config,
    state_dir: &Path,
    repo: &str,
    by: &str,
) -> Result<UnholdView, Error> {
    let mut store = Store::open_settled(state_dir, config.store.as_ref())?;
    match store.unhold(repo, Some(by))? {
        Ok(lock) => {
            crate::app::journal::write_holds(&mut store, state_dir);
            Ok(UnholdView {
                released: true,
                repo: repo.to_string(),
                lock: LockView::of(&lock, now_ms()),
            })
        }
        Err(None) => {
            let fatal = store.read(|tx| crate::store::fatal::covering(tx, &config.graph, repo))?;
            Err(Error::no(match fatal.first() {
                Some(h) => format!(
                    "{repo} is not held by a lock, but its chain is halted by a FATAL on {}: `orch fatal --clear {}` ends it",
                    h.repo, h.repo
                ),
                None => format!("{repo} is not held"),
            }))
        }
        Err(Some(lock)) => Err(Error::no(format!(
            "{repo} is locked by worker {}, not by a hold; use `orch cancel {}` or `orch release {} --force --reason …`",
            lock.holder, lock.holder, lock.holder
        ))),
    }
}
