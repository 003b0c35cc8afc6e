//! `orch can-spawn`, `orch hold`, `orch unhold`, `orch fatal`: the chain locks (and fatal
//! holds) seen by operators.

use super::{Ctx, Failure, Outcome, operator_name};
use crate::lock::blockers;
use crate::operator::holds::{hold_view, unhold_view};
use crate::operator::view::locks::{BlockerView, CanSpawnView};
use crate::operator::view::print_json;

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

pub fn fatal(
    ctx: &Ctx,
    target: &str,
    reason: Option<String>,
    clear: bool,
    by: Option<String>,
    json_out: bool,
) -> Outcome {
    use crate::operator::view::locks::{FatalAction, FatalClearedView, FatalShownView, FatalView};
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
