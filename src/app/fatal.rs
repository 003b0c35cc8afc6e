//! FATAL (`failure_taxonomy.fatal`: `halt_all_workers_in_chain`, `require:
//! human_intervention`, `consider_revert`): an operator's `orch fatal`, and its clearing.
//!
//! A fatal hold (`store::fatal`) is recorded on a repository's chain; every supervisor in the
//! chain sees it at its next look (all doorbells are rung) and stops its worker as a cascade
//! pauses one — processes stopped, timers frozen, lock kept (`milestone::Event::Fatal`). While
//! it stands nothing starts (`spawn`, a wave's tick) or goes on (`respawn`, `resume`, a
//! landing) in the chain. orch never reverts on its own: what the chain landed since the task
//! began is offered, with the commands that revert it ([`landed_since`]).
//!
//! A worker's `orch report FATAL` and a secret in a pushed diff take the same hold through the
//! worker's own journal entry (`Effect::HoldFatal`).

use super::journal::{self, Entry, Writer};
use super::{Error, Loaded, Result};
use crate::milestone::{Event, LandState, step};
use crate::store::fatal::{self as sf, FatalHold};
use crate::store::workers::{self as ws, AlertRecord, WorkerRecord};
use crate::store::{Store, now_ms};

/// What an operator names: a repository, or a worker (its repository's chain).
fn target(l: &Loaded, store: &mut Store, name: &str) -> Result<(String, Option<WorkerRecord>)> {
    if l.config.repo(name).is_some() {
        return Ok((name.to_string(), None));
    }
    match store.worker(name)? {
        Some(w) => Ok((w.repo.clone(), Some(w))),
        None => Err(Error::Refused(format!(
            "{name} is neither a repository in {} nor a worker",
            l.config.file.display()
        ))),
    }
}

/// A change the chain landed on a base branch, and how to revert it by hand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LandedChange {
    pub worker: String,
    pub repo: String,
    pub branch: String,
    /// The base head before the change, and the commit the base was moved to.
    pub from: String,
    pub landed: String,
    pub moved_ms: i64,
    /// The commands that revert it (orch runs none of them).
    pub revert: String,
}

/// What the chain of `repo` landed on its base branches since `since_ms`, oldest first.
pub fn landed_since(
    l: &Loaded,
    store: &mut Store,
    repo: &str,
    since_ms: i64,
) -> Result<Vec<LandedChange>> {
    let chain = l.config.graph.chain_of(repo);
    let workers = store.read(|tx| {
        let mut all = ws::live_workers(tx)?;
        all.extend(ws::ended_updated_since(tx, since_ms)?);
        Ok(all)
    })?;
    let mut out: Vec<LandedChange> = workers
        .iter()
        .filter(|w| w.repo == repo || chain.contains(&w.repo))
        .filter_map(|w| {
            let land = w.progress.landing.as_ref()?;
            let moved = land.moved_ms?;
            if moved < since_ms
                || !matches!(
                    land.state,
                    LandState::BaseCi | LandState::Downstream | LandState::Landed | LandState::Broken
                )
            {
                return None;
            }
            let landed = land.landed.as_ref()?.to_string();
            let from = land
                .onto
                .as_ref()
                .map(|s| s.to_string())
                .unwrap_or_else(|| w.base_sha.clone());
            let cfg = l.config.repo(&w.repo)?;
            let path = cfg.path.display();
            let (remote, branch) = (&w.remote, &cfg.branch);
            // As `on_breakage: revert` builds it (`gitops::revert`): a landed merge against its
            // first parent, else every commit the move brought.
            let what = if crate::gitops::is_merge(&cfg.path, &landed) == Some(true) {
                format!("-m 1 {}", crate::sha::short(&landed))
            } else {
                format!(
                    "{}..{}",
                    crate::sha::short(&from),
                    crate::sha::short(&landed)
                )
            };
            let revert = format!(
                "git -C {path} fetch {remote} && git -C {path} checkout {branch} && git -C {path} merge --ff-only {remote}/{branch} && git -C {path} revert --no-edit {what} && git -C {path} push {remote} {branch}"
            );
            Some(LandedChange {
                worker: w.id.clone(),
                repo: w.repo.clone(),
                branch: branch.clone(),
                from,
                landed,
                moved_ms: moved,
                revert,
            })
        })
        .collect();
    out.sort_by_key(|c| c.moved_ms);
    out.dedup_by(|a, b| a.worker == b.worker);
    Ok(out)
}

/// When the task behind a fatal hold began: its worker's start, else the oldest live worker's
/// in the chain, else the hold itself.
fn task_began(l: &Loaded, store: &mut Store, h: &FatalHold) -> Result<i64> {
    if let Some(w) = h
        .worker_id
        .as_deref()
        .map(|id| store.worker(id))
        .transpose()?
        .flatten()
    {
        return Ok(w.created_ms);
    }
    let chain = l.config.graph.chain_of(&h.repo);
    Ok(store
        .live_workers()?
        .iter()
        .filter(|w| w.repo == h.repo || chain.contains(&w.repo))
        .map(|w| w.created_ms)
        .min()
        .unwrap_or(h.at_ms)
        .min(h.at_ms))
}

/// A fatal hold as an operator sees it: the hold, the live workers it stops, and what the
/// chain landed since its task began (to revert by hand).
#[derive(Debug, Clone)]
pub struct Shown {
    pub hold: FatalHold,
    /// Whether this command took it (false: it was there already).
    pub new: bool,
    pub workers: Vec<String>,
    pub landed: Vec<LandedChange>,
}

fn shown(l: &Loaded, store: &mut Store, hold: FatalHold, new: bool) -> Result<Shown> {
    let chain = l.config.graph.chain_of(&hold.repo);
    let workers = store
        .live_workers()?
        .into_iter()
        .filter(|w| w.repo == hold.repo || chain.contains(&w.repo))
        .map(|w| w.id)
        .collect();
    let since = task_began(l, store, &hold)?;
    let landed = landed_since(l, store, &hold.repo, since)?;
    Ok(Shown {
        hold,
        new,
        workers,
        landed,
    })
}

/// The fatal holds over `name`'s chain (a repository or a worker), each with what it stops.
pub fn show(l: &Loaded, name: &str) -> Result<Vec<Shown>> {
    let mut store = l.store()?;
    let (repo, _) = target(l, &mut store, name)?;
    let holds = store.read(|tx| sf::covering(tx, &l.config.graph, &repo))?;
    holds
        .into_iter()
        .map(|h| shown(l, &mut store, h, false))
        .collect()
}

/// `orch fatal <repo|worker> --reason …`: halts the chain (see the module doc) and raises the
/// critical alert, which offers the revert of what the chain landed.
pub fn raise(l: &Loaded, name: &str, reason: &str, by: &str) -> Result<Shown> {
    let mut store = l.store()?;
    let (repo, worker) = target(l, &mut store, name)?;
    let now = now_ms();
    let hold = FatalHold {
        repo: repo.clone(),
        reason: reason.to_string(),
        by: by.to_string(),
        worker_id: worker.as_ref().map(|w| w.id.clone()),
        at_ms: now,
    };
    let new = store.write(|tx| sf::add(tx, &hold))?;
    let hold = store
        .read(|tx| sf::covering(tx, &l.config.graph, &repo))?
        .into_iter()
        .find(|h| h.repo == repo)
        .unwrap_or(hold);
    let s = shown(l, &mut store, hold, new)?;
    if new {
        let offer = if s.landed.is_empty() {
            "the chain landed nothing since its task began".to_string()
        } else {
            format!(
                "the chain landed {} change(s) since its task began — orch reverts nothing on its own: `orch fatal {repo}` shows them and the commands that revert them",
                s.landed.len()
            )
        };
        let alert = AlertRecord {
            id: 0,
            at_ms: now,
            severity: "critical".into(),
            worker_id: s.hold.worker_id.clone(),
            repo: Some(repo.clone()),
            kind: "fatal".into(),
            message: format!(
                "FATAL on {repo}'s chain by {by}: {reason} — every worker in it is stopped ({}), locks kept; nothing starts or resumes there until `orch fatal --clear {repo}`; {offer}",
                if s.workers.is_empty() {
                    "none live".to_string()
                } else {
                    s.workers.join(", ")
                }
            ),
            repeats: 1,
            resolved_ms: None,
        };
        let window = store.alert_window().as_millis() as i64;
        let recorded = store.write(|tx| crate::store::alerts::record(tx, &alert, window))?;
        if let crate::store::alerts::Recorded::New(id) = recorded {
            crate::alerts::append_jsonl(&l.state_dir, &[AlertRecord { id, ..alert }]);
        }
        journal::write_holds(&mut store, &l.state_dir);
        halt_unsupervised(l, &mut store, &repo, &s.hold.reason)?;
        crate::wake::ring_all(&l.state_dir, crate::wake::Ring::Inbox);
    }
    Ok(s)
}

/// The chain's workers no supervisor looks after (BLOCKED, one whose supervisor died) are
/// halted here, through the journal: nobody resumes them before the hold is cleared.
fn halt_unsupervised(l: &Loaded, store: &mut Store, repo: &str, reason: &str) -> Result<()> {
    let chain = l.config.graph.chain_of(repo);
    let now = now_ms();
    for w in store.live_workers()? {
        if !(w.repo == repo || chain.contains(&w.repo))
            || w.supervised(now)
            || w.milestone().is_terminal()
            || w.progress.halted.is_some()
        {
            continue;
        }
        let event = Event::Fatal {
            reason: reason.to_string(),
            raised: false,
        };
        let (after, effects) = step(&l.contract, &w.id, &w.progress, &event, now);
        let entry = Entry::new(&w, "orch fatal").step(&after, &effects);
        let _ = journal::commit(store, &l.state_dir, Writer::Operator, &entry)?;
    }
    Ok(())
}

/// The repository `name` stands for, and the last fatal hold cleared over its chain.
pub fn last_cleared(l: &Loaded, name: &str) -> Result<(String, Option<sf::ClearedHold>)> {
    let mut store = l.store()?;
    let (repo, _) = target(l, &mut store, name)?;
    let of = l.config.graph.chain_of(&repo);
    let chain: Vec<String> = l
        .config
        .repos
        .iter()
        .map(|r| r.name.clone())
        .filter(|r| of.contains(r))
        .chain(std::iter::once(repo.clone()))
        .collect();
    let last = store.read(|tx| sf::last_cleared(tx, &chain))?;
    Ok((repo, last))
}

/// `orch fatal --clear <repo|worker>`: ends the fatal hold on that chain (the one on the
/// repository named, or the first over the worker's chain). Supervised workers go on at their
/// supervisor's next look; those without one are let go here and handed to `orch resume`.
/// Returns the hold cleared and the workers handed over.
pub fn clear(l: &Loaded, name: &str, by: &str) -> Result<(sf::ClearedHold, Vec<String>)> {
    let mut store = l.store()?;
    let (repo, _) = target(l, &mut store, name)?;
    let held = store.read(|tx| sf::covering(tx, &l.config.graph, &repo))?;
    let Some(on) = held
        .iter()
        .find(|h| h.repo == repo)
        .or(held.first())
        .map(|h| h.repo.clone())
    else {
        return Err(Error::No(format!(
            "{repo}'s chain is not halted by a FATAL"
        )));
    };
    let Some(cleared) = store.write(|tx| {
        let cleared = sf::clear(tx, &on, by, now_ms())?;
        if cleared.is_some() {
            crate::store::alerts::resolve_repo(tx, &on, "fatal", now_ms())?;
        }
        Ok(cleared)
    })?
    else {
        return Err(Error::No(format!("{on}'s chain is not halted by a FATAL")));
    };
    journal::write_holds(&mut store, &l.state_dir);
    // Workers no supervisor looks after, no longer under any hold: let go, then resumed.
    let now = now_ms();
    let mut handed = Vec::new();
    for w in store.live_workers()? {
        if w.progress.halted.is_none() || w.supervised(now) {
            continue;
        }
        let still = store.read(|tx| sf::covering(tx, &l.config.graph, &w.repo))?;
        if !still.is_empty() {
            continue;
        }
        let event = Event::FatalCleared {
            by: by.to_string(),
            upstream_red: false,
        };
        let (after, effects) = step(&l.contract, &w.id, &w.progress, &event, now);
        let entry = Entry::new(&w, "orch fatal --clear").step(&after, &effects);
        let _ = journal::commit(&mut store, &l.state_dir, Writer::Operator, &entry)?;
        handed.push(w.id.clone());
    }
    crate::wake::ring_all(&l.state_dir, crate::wake::Ring::Inbox);
    if !handed.is_empty() {
        super::resume::resume(l, true)?;
    }
    Ok((cleared, handed))
}
