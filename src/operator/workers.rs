//! The workers as the operator sees them: `orch status` / `sessions list` (a page of live and
//! ended workers, the locks, the fatal holds) and `orch sessions show` (one worker) — the
//! views both the command line and the board answer with.

use super::Error;
use super::view::locks::LockView;
use super::view::workers::{
    EventView, ModelSpendView, PushView, ReturnView, SessionView, SessionsView, StatusView,
    WorkerView,
};
use crate::app::Loaded;
use crate::app::supervisor::session_dir;
use crate::store::usage::Usage;
use crate::store::workers as ws;
use crate::store::{Store, now_ms};
use crate::text::escape as esc;
use std::collections::HashMap;

/// Which workers `status`, `sessions list` and the board show: every live one, and ended ones
/// newest first — the last [`DEFAULT_ENDED`] unless told otherwise (`cli::HistoryArgs` is
/// this on the command line, the board's `Filter` in a query string).
#[derive(Debug, Clone, Default)]
pub struct History {
    /// Every ended worker, not only the last [`DEFAULT_ENDED`].
    pub all: bool,
    /// Only ended workers that ended since then (epoch milliseconds); lifts the default limit.
    pub since: Option<i64>,
    /// Only workers a wave started (its tasks, every attempt).
    pub wave: Option<String>,
    /// Only workers of this repository.
    pub repo: Option<String>,
    /// Ended workers per page.
    pub limit: Option<u32>,
    /// The next page: the `next` of the previous answer (ended workers only).
    pub after: Option<String>,
}

/// How many ended workers `status` and `sessions list` show by default.
pub const DEFAULT_ENDED: usize = 20;

/// One page of `status` / `sessions list`: the live workers (first page only) and ended ones
/// newest first, with what each spent and the wave task that started it — each read by its
/// worker's key, so the cost follows what is shown, not the history.
struct Page {
    workers: Vec<ws::WorkerRecord>,
    usage: HashMap<String, Usage>,
    waves: HashMap<String, String>,
    /// What superseded each stopped worker another attempt replaced, in words.
    superseded: HashMap<String, String>,
    /// Ended workers selected but not shown.
    more_ended: usize,
    /// The `--after` of the next page, when there is one.
    next: Option<String>,
}

/// What `args` select, checked: an unknown repository or wave, or a cursor that is not one, is
/// bad input.
pub struct Selection {
    filter: ws::HistoryFilter,
    after: Option<ws::Cursor>,
    limit: Option<usize>,
}

pub fn selection(l: &Loaded, store: &mut Store, args: &History) -> Result<Selection, Error> {
    let after = match &args.after {
        None => None,
        Some(a) => Some(ws::Cursor::parse(a).ok_or_else(|| {
            Error::bad_input(format!(
                "--after {}: not a cursor (pass the `next` of a previous --json answer)",
                esc(a)
            ))
        })?),
    };
    if let Some(repo) = &args.repo
        && l.config.repo(repo).is_none()
        && !store.read(|tx| ws::any_worker_of(tx, repo))?
    {
        return Err(Error::bad_input(format!(
            "--repo {}: no such repository in {} and no worker of it in the history",
            esc(repo),
            l.config.file.display()
        )));
    }
    if let Some(wave) = &args.wave
        && !store.read(|tx| crate::store::waves::wave_exists(tx, wave))?
    {
        return Err(Error::bad_input(format!(
            "--wave {}: no wave of that name has run here (orch wave status lists a wave by its file)",
            esc(wave)
        )));
    }
    let limit = match (args.all, args.limit) {
        (true, _) => None,
        (false, Some(n)) => Some(n as usize),
        (false, None) if args.since.is_some() => None,
        (false, None) => Some(DEFAULT_ENDED),
    };
    Ok(Selection {
        filter: ws::HistoryFilter {
            repo: args.repo.clone(),
            wave: args.wave.clone(),
            ended_since_ms: args.since,
        },
        after,
        limit,
    })
}

fn page(tx: &crate::store::sql::Tx, sel: &Selection) -> crate::store::sql::Result<Page> {
    // Pages after the first carry ended workers only: the live ones were on the first.
    let mut workers = if sel.after.is_none() {
        ws::live_workers_where(tx, &sel.filter)?
    } else {
        Vec::new()
    };
    let ended = ws::ended_workers(tx, &sel.filter, sel.after.as_ref(), sel.limit)?;
    let more_ended = match sel.limit {
        Some(n) if ended.len() == n => {
            ws::count_ended(tx, &sel.filter, sel.after.as_ref())?.saturating_sub(n)
        }
        _ => 0,
    };
    let next = (more_ended > 0)
        .then(|| ended.last().and_then(ws::Cursor::of))
        .flatten()
        .map(|c| c.encode());
    workers.extend(ended);
    let mut usage = HashMap::new();
    let mut waves = HashMap::new();
    let mut superseded = HashMap::new();
    for w in &mut workers {
        if let Some(s) = superseded_of(tx, w)? {
            superseded.insert(w.id.clone(), s);
        }
        ws::with_latest_verdict(tx, w)?;
        if let Some(u) = crate::store::usage::get_usage(tx, &w.id)? {
            usage.insert(w.id.clone(), u);
        }
        // The wave (and task) a worker runs for, as `<wave>:<task>`.
        if let Some((wave, task)) = crate::store::waves::wave_task_of(tx, &w.id)? {
            waves.insert(w.id.clone(), format!("{wave}:{task}"));
        }
    }
    Ok(Page {
        workers,
        usage,
        waves,
        superseded,
        more_ended,
        next,
    })
}

/// What superseded `w`, in words — asked only of a stopped worker, the one an operator could
/// respawn or approve (`app::relive` refuses that for a superseded one; the views offer it not).
fn superseded_of(
    tx: &crate::store::sql::Tx,
    w: &ws::WorkerRecord,
) -> crate::store::sql::Result<Option<String>> {
    use crate::milestone::Milestone::*;
    if !matches!(w.milestone(), Blocked | BlockedPermission | Paused | Failed) {
        return Ok(None);
    }
    Ok(crate::store::supersede::of(tx, w)?.map(|s| s.describe()))
}

/// `orch status --json` for `args` at `now` (the board serves the same), with what each
/// worker shown spent for the human table; `None` where orch has not run yet.
pub fn status_view(l: &Loaded, args: &History) -> Result<Option<Status>, Error> {
    let Some(mut store) = l.existing_store()? else {
        return Ok(None);
    };
    let sel = selection(l, &mut store, args)?;
    Ok(Some(status_of(l, &mut store, &sel)?))
}

/// `status`'s view, and what each worker in it spent (for the human table).
pub type Status = (StatusView, HashMap<String, Usage>);

pub fn status_of(l: &Loaded, store: &mut Store, sel: &Selection) -> Result<Status, Error> {
    let (page, locks, fatal) = store.read(|tx| {
        Ok((
            page(tx, sel)?,
            crate::store::active_locks(tx)?,
            crate::store::fatal::all(tx)?,
        ))
    })?;
    let now = now_ms();
    let workers: Vec<WorkerView> = page
        .workers
        .iter()
        .map(|w| {
            WorkerView::of(
                w,
                page.usage.get(&w.id),
                page.waves.get(&w.id).cloned(),
                l.contract.fixing_ci_max_attempts,
                now,
            )
            .superseded(page.superseded.get(&w.id).cloned())
        })
        .collect();
    let view = StatusView {
        spent_by_model: ModelSpendView::of(&workers),
        workers,
        locks: locks.iter().map(|lk| LockView::of(lk, now)).collect(),
        more_ended: page.more_ended,
        next: page.next,
        fatal_holds: fatal
            .iter()
            .map(crate::operator::view::locks::FatalHoldView::of)
            .collect(),
    };
    Ok((view, page.usage))
}

/// `orch status --json` where nothing has run yet.
pub fn empty_status() -> StatusView {
    StatusView {
        workers: Vec::new(),
        locks: Vec::new(),
        more_ended: 0,
        next: None,
        spent_by_model: Vec::new(),
        fatal_holds: Vec::new(),
    }
}

/// `orch sessions show <id> --json` (the board's worker view serves the same), with what the
/// worker spent for the human text; `Ok(None)`: no such worker.
pub fn session_view(l: &Loaded, id: &str) -> Result<Option<(SessionView, Option<Usage>)>, Error> {
    let Some(mut store) = l.existing_store()? else {
        return Ok(None);
    };
    let Some((w, events, pushes, usage, superseded)) = store.read(|tx| {
        let Some(mut w) = ws::get_worker(tx, id)? else {
            return Ok(None);
        };
        ws::with_latest_verdict(tx, &mut w)?;
        let superseded = superseded_of(tx, &w)?;
        Ok(Some((
            w,
            ws::worker_events(tx, id)?,
            ws::pushes(tx, id)?,
            crate::store::usage::get_usage(tx, id)?,
            superseded,
        )))
    })?
    else {
        return Ok(None);
    };
    let cp = crate::checkpoint::path_for(&l.state_dir, &w);
    let log = session_dir(&l.state_dir, id).join("worker.log");
    let view = SessionView {
        worker: WorkerView::of(
            &w,
            usage.as_ref(),
            None,
            l.contract.fixing_ci_max_attempts,
            now_ms(),
        )
        .superseded(superseded),
        pushes: pushes.iter().map(PushView::from).collect(),
        events: events.iter().map(EventView::from).collect(),
        worktree: w.worktree.clone(),
        worker_log: log.display().to_string(),
        checkpoint: cp.display().to_string(),
        returned: {
            let c = crate::checkpoint::build(&w, &pushes, false);
            ReturnView {
                files_created: c.files_created,
                files_modified: c.files_modified,
                tests_added: c.tests_added,
                final_ci: c.final_ci,
                summary: c.context_summary,
                worker_summary: c.worker_summary,
                decisions: c.decisions_made,
            }
        },
    };
    Ok(Some((view, usage)))
}

/// `orch status --json` for `args`, the empty view where orch has not run yet: what the
/// board's `/api/workers` answers.
pub fn status_or_empty(l: &Loaded, args: &History) -> Result<StatusView, Error> {
    Ok(status_view(l, args)?
        .map(|(v, _)| v)
        .unwrap_or_else(empty_status))
}

/// `orch sessions list --json` of what `sel` selects: the workers only, without the locks.
pub fn sessions_view(
    l: &Loaded,
    store: &mut Store,
    sel: &Selection,
) -> Result<SessionsView, Error> {
    let page = store.read(|tx| page(tx, sel))?;
    let now = now_ms();
    Ok(SessionsView {
        sessions: page
            .workers
            .iter()
            .map(|w| {
                WorkerView::of(
                    w,
                    page.usage.get(&w.id),
                    None,
                    l.contract.fixing_ci_max_attempts,
                    now,
                )
                .superseded(page.superseded.get(&w.id).cloned())
            })
            .collect(),
        more_ended: page.more_ended,
        next: page.next,
    })
}
