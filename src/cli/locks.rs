//! `orch can-spawn`, `orch hold`, `orch unhold`, `orch fatal`: the chain locks (and fatal
//! holds) seen by operators.

use super::view::locks::{BlockerView, CanSpawnView, HoldView, LockView, UnholdView};
use super::view::print_json;
use super::{Ctx, Failure, Outcome, operator_name};
use crate::config::Config;
use crate::lock::{HolderKind, blockers};
use crate::store::{LockAttempt, Store, now_ms};
use std::path::Path;

pub fn can_spawn(ctx: &Ctx, repo: &str, json: bool) -> Outcome {
    let l = ctx.load()?;
    let config = &l.config;
    config.require_repo(repo)?;
    let mut store = ctx.existing_store(config)?;
    let (mut active, drifts) = match &mut store {
        Some(store) => (
            store.locks()?,
            store.read(|tx| crate::app::drift::drift_in(tx, config))?,
        ),
        None => (Vec::new(), Vec::new()),
    };
    // A fatal hold blocks as spawn finds it: in the chain.
    if let Some(store) = &mut store {
        let fatal = store.read(|tx| crate::store::fatal::covering(tx, &config.graph, repo))?;
        active.extend(crate::store::fatal::as_locks(&fatal));
    }
    let mut blocking = blockers(&config.graph, repo, &active);
    blocking.extend(crate::app::drift::same_clone_blockers(
        &drifts, config, repo,
    ));
    let mut views = BlockerView::all(&blocking, repo);
    views.extend(
        red_upstream(ctx, &l, store.as_mut(), repo)
            .map(|red| BlockerView::upstream_red(&red, repo)),
    );
    let view = CanSpawnView {
        repo: repo.to_string(),
        can_spawn: views.is_empty(),
        blockers: views,
    };
    if json {
        print_json(&view);
    } else {
        print!("{}", view.human());
    }
    Ok(if view.can_spawn { 0 } else { 1 })
}

/// The red upstream `spawn` would refuse `repo` for (`app::cascade`), asked the same way: the
/// shared rows where orch has state (polled when stale), else the forge directly — except the
/// local forge, where nothing can have run yet (and asking would create its state).
fn red_upstream(
    ctx: &Ctx,
    l: &crate::app::Loaded,
    store: Option<&mut crate::store::Store>,
    repo: &str,
) -> Option<crate::store::upstream::UpstreamRow> {
    if crate::app::cascade::upstreams(&l.config, repo).is_empty()
        || (store.is_none() && l.config.forge.kind == crate::config::ForgeKind::Local)
    {
        return None;
    }
    match l.query_follower(super::ci::notice(ctx)) {
        Ok(follower) => crate::app::cascade::red_upstream(store, &follower, &l.config, repo),
        Err(e) => {
            // As spawn does: a forge it cannot build is no refusal, only a warning.
            ctx.warn(format!("cannot check upstream CI: {e}"));
            None
        }
    }
}

pub fn hold(ctx: &Ctx, repo: &str, reason: &str, by: Option<String>, json: bool) -> Outcome {
    let config = ctx.config()?;
    let view = hold_view(
        &config,
        &ctx.state_dir(&config),
        repo,
        reason,
        &operator_name(by),
    )?;
    if json {
        print_json(&view);
    } else {
        print!("{}", view.human());
    }
    Ok(if view.held { 0 } else { 1 })
}

/// `orch hold`'s work and answer (the board's hold goes through here too): the hold is taken
/// as `hold:<by>`, `by` kept in the lock and the lock history. `held: false` names what is in
/// its way.
pub fn hold_view(
    config: &Config,
    state_dir: &Path,
    repo: &str,
    reason: &str,
    by: &str,
) -> Result<HoldView, Failure> {
    config.require_repo(repo)?;
    if reason.trim().is_empty() {
        return Err(Failure::bad_input(
            "--reason must say why the chain is held",
        ));
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

pub fn unhold(ctx: &Ctx, repo: &str, json: bool) -> Outcome {
    let config = ctx.config()?;
    let view = unhold_view(&config, &ctx.state_dir(&config), repo, &operator_name(None))?;
    if json {
        print_json(&view);
    } else {
        print!("{}", view.human());
    }
    Ok(0)
}

/// `orch unhold`'s work and answer (the board's unhold goes through here too), `by` kept in
/// the lock history.
pub fn unhold_view(
    config: &Config,
    state_dir: &Path,
    repo: &str,
    by: &str,
) -> Result<UnholdView, Failure> {
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
            Err(Failure::no(match fatal.first() {
                Some(h) => format!(
                    "{repo} is not held by a lock, but its chain is halted by a FATAL on {}: `orch fatal --clear {}` ends it",
                    h.repo, h.repo
                ),
                None => format!("{repo} is not held"),
            }))
        }
        Err(Some(lock)) => Err(Failure::no(format!(
            "{repo} is locked by worker {}, not by a hold; use `orch cancel {}` or `orch release {} --force --reason …`",
            lock.holder, lock.holder, lock.holder
        ))),
    }
}

pub fn fatal(
    ctx: &Ctx,
    target: &str,
    reason: Option<String>,
    clear: bool,
    by: Option<String>,
    json_out: bool,
) -> Outcome {
    use super::view::locks::{FatalAction, FatalClearedView, FatalShownView, FatalView};
    let l = ctx.load()?;
    let by = operator_name(by);
    let view = if clear {
        let (cleared, handed) = crate::app::fatal::clear(&l, target, &by)?;
        FatalView {
            repo: cleared.hold.repo.clone(),
            action: FatalAction::Cleared,
            holds: Vec::new(),
            cleared: Some(FatalClearedView::of(&cleared)),
            handed,
        }
    } else {
        let (action, shown) = match reason {
            Some(r) if r.trim().is_empty() => {
                return Err(Failure::bad_input("--reason must say what went wrong"));
            }
            Some(r) => (
                FatalAction::Raised,
                vec![crate::app::fatal::raise(&l, target, &r, &by)?],
            ),
            None => (FatalAction::Shown, crate::app::fatal::show(&l, target)?),
        };
        let (repo, last) = crate::app::fatal::last_cleared(&l, target)?;
        FatalView {
            repo,
            action,
            holds: shown.iter().map(FatalShownView::of).collect(),
            cleared: last.as_ref().map(FatalClearedView::of),
            handed: Vec::new(),
        }
    };
    if json_out {
        print_json(&view);
    } else {
        print!("{}", view.human());
    }
    // Asked about a chain no FATAL stops: a valid question whose answer is no.
    Ok(
        if view.action == FatalAction::Shown && view.holds.is_empty() {
            1
        } else {
            0
        },
    )
}
