//! A wave's status: its recorded tasks, each task's state (a task is complete when its change
//! has landed; with `land: none`, when a person merged it), the views `orch wave status` and
//! the board show.

use super::*;

/// One task as `orch wave status` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct TaskView {
    pub id: String,
    pub repo: String,
    pub task: String,
    /// PENDING, or the worker's milestone.
    pub state: String,
    pub worker: Option<String>,
    pub started_ms: Option<i64>,
    pub ended_ms: Option<i64>,
    pub estimate_ms: u64,
    pub estimate_source: &'static str,
    pub actual_ms: Option<i64>,
    /// What it waits for that is not DONE: (task id, its state); a stopped task further up
    /// is named too.
    pub waiting_on: Vec<(String, String)>,
    /// The scheduler's word for it: `pending`, `running`, `done` or `stopped`.
    pub progress: &'static str,
}

#[derive(Debug, Clone, Serialize)]
pub struct WaveView {
    pub name: String,
    pub file: String,
    pub cancelled: bool,
    pub tasks: Vec<TaskView>,
    pub done: usize,
    pub all_done: bool,
    /// Nothing runs and nothing more can start.
    pub finished: bool,
    /// When a tick first saw the wave.
    pub created_ms: i64,
    /// Each task's planned start and end (ms after the wave's start): the scheduler over
    /// simulated time with the estimates and `worker.max_parallel` slots.
    pub planned_ms: Vec<(u64, u64)>,
    /// The critical path as it stands (task indices, first first): the longest chain of
    /// waits by what each task took, takes so far or (not started) is estimated to take.
    pub critical_path: Vec<usize>,
}

/// The wave as recorded: its tasks (from the database), their workers and states.
pub(super) struct RecordedWave {
    pub(super) row: WaveRow,
    pub(super) rows: Vec<WaveTaskRow>,
    pub(super) tasks: Vec<TaskDef>,
    pub(super) workers: Vec<Option<WorkerRecord>>,
    pub(super) dag: Dag,
    pub(super) state: WaveState,
    pub(super) est: Vec<(u64, &'static str)>,
}

fn task_state(w: Option<&WorkerRecord>) -> TaskState {
    use crate::milestone::LandState;
    if let Some(w) = w
        && w.milestone() == Milestone::Done
    {
        // A task is complete when its change is on the base branch: dependents build on it.
        return match w.progress.landing.as_ref().map(|l| l.state) {
            // Broken: landed, and a dependent held for a person (its tasks wait on the hold).
            None | Some(LandState::Landed | LandState::Broken) => TaskState::Done,
            Some(LandState::Conflict | LandState::Refused | LandState::Reverted) => {
                TaskState::Stopped
            }
            Some(_) => TaskState::Running,
        };
    }
    match w.map(|w| w.milestone()) {
        None => TaskState::Pending,
        Some(Milestone::Done) => TaskState::Done,
        Some(
            Milestone::Working | Milestone::PushedToCi | Milestone::FixingCi | Milestone::Paused,
        ) => TaskState::Running,
        Some(_) => TaskState::Stopped,
    }
}

/// `land: none`: a DONE change waits on its branch until a person merges it. At every tick
/// the base branch is fetched and its history asked; a change found there is landed (its
/// dependents may start). True when one was.
pub(super) fn notice_merged_by_hand(
    l: &Loaded,
    store: &mut Store,
    workers: &[Option<WorkerRecord>],
) -> bool {
    let mut found = false;
    use crate::app::journal::{self, Entry, Writer};
    use crate::milestone::{Event, LandEvent, LandState, step};
    let mut fetched = std::collections::HashSet::new();
    for w in workers.iter().flatten() {
        let Some(landing) = &w.progress.landing else {
            continue;
        };
        let (LandState::Waiting, Some(done)) = (landing.state, &landing.done_sha) else {
            continue;
        };
        let Some(repo) = l.config.repo(&w.repo) else {
            continue;
        };
        if fetched.insert(repo.name.clone())
            && let Err(e) = crate::gitops::fetch(&repo.path, &w.remote)
        {
            tracing::warn!(repo = %repo.name, error = %e, "cannot fetch to look for merged changes");
        }
        let Ok(head) = crate::gitops::base_sha(&repo.path, &w.remote, &repo.branch) else {
            continue;
        };
        if !crate::gitops::is_ancestor(&repo.path, done.as_str(), &head).unwrap_or(false) {
            continue;
        }
        let event = Event::Land(LandEvent::OnBase {
            head: crate::sha::Sha::from(head),
        });
        let (after, effects) = step(&l.contract, &w.id, &w.progress, &event, now_ms());
        let entry = Entry::new(w, "orch wave").step(&after, &effects);
        match journal::commit(store, &l.state_dir, Writer::Operator, &entry) {
            Ok(_) => found = true,
            Err(e) => {
                tracing::warn!(worker = %w.id, error = %e, "cannot record a change merged by hand")
            }
        }
    }
    found
}

/// What a task's state says: the worker's milestone, and for a DONE change not on its base
/// branch yet, where its landing is (a dependent waits for it).
pub(super) fn task_label(l: &Loaded, w: &WorkerRecord) -> String {
    use crate::milestone::LandState;
    let m = w.milestone().as_str().to_string();
    let Some(landing) = w
        .progress
        .landing
        .as_ref()
        .filter(|_| w.milestone() == Milestone::Done)
    else {
        return m;
    };
    let base = l
        .config
        .repo(&w.repo)
        .map(|r| r.branch.clone())
        .unwrap_or_else(|| "main".into());
    match landing.state {
        LandState::Landed | LandState::Planned => m,
        LandState::Broken | LandState::Reverted => format!("{m}, {}", landing.summary()),
        LandState::Waiting => format!(
            "{m}, waiting for its change to reach {base}: land: none — merge {} or set land",
            w.branch
        ),
        _ => format!("{m}, landing: {}", landing.summary()),
    }
}

pub(super) fn load_recorded(
    l: &Loaded,
    store: &mut Store,
    name: &str,
) -> Result<Option<RecordedWave>> {
    let Some((row, rows, workers)) = store.read(|tx| {
        let Some(row) = wv::get_wave(tx, name)? else {
            return Ok(None);
        };
        let rows = wv::wave_tasks(tx, name)?;
        let mut workers = Vec::with_capacity(rows.len());
        for r in &rows {
            workers.push(match &r.worker_id {
                Some(id) => ws::get_worker(tx, id)?,
                None => None,
            });
        }
        Ok(Some((row, rows, workers)))
    })?
    else {
        return Ok(None);
    };
    let mut tasks = Vec::with_capacity(rows.len());
    for r in &rows {
        let mut t: TaskDef = serde_json::from_str(&r.definition).map_err(|e| {
            Error::Refused(format!(
                "wave {name}: task {} is recorded unreadably ({e})",
                r.id
            ))
        })?;
        t.estimate = r.estimate_ms.map(|ms| Duration::from_millis(ms as u64));
        tasks.push(t);
    }
    let dag = Dag::build(&tasks, &l.config.graph).map_err(|c| {
        Error::Refused(format!(
            "wave {name}: with repos.yaml as it is now its tasks wait in a cycle ({})",
            c.iter()
                .map(|&i| tasks[i].id.as_str())
                .collect::<Vec<_>>()
                .join(" waits for ")
        ))
    })?;
    let est = estimates(&tasks, &history(store)?);
    let ms: Vec<u64> = est.iter().map(|e| e.0).collect();
    let states = workers.iter().map(|w| task_state(w.as_ref())).collect();
    let state = WaveState::new(&dag, states, dag.bottom_levels(&ms));
    Ok(Some(RecordedWave {
        row,
        rows,
        tasks,
        workers,
        dag,
        state,
        est,
    }))
}

pub(super) fn view(l: &Loaded, w: &RecordedWave) -> WaveView {
    let now = now_ms();
    let label = |i: usize| match &w.workers[i] {
        Some(r) => task_label(l, r),
        None => "PENDING".to_string(),
    };
    let tasks: Vec<TaskView> = (0..w.tasks.len())
        .map(|i| {
            let t = &w.tasks[i];
            let rec = w.workers[i].as_ref();
            let ended = rec
                .filter(|r| task_state(Some(r)) != TaskState::Running)
                .map(|r| r.progress.since_ms);
            let started = w.rows[i].started_ms.or(rec.map(|r| r.created_ms));
            let mut waiting: Vec<usize> = if w.state.state(i) == TaskState::Pending {
                w.state.waiting_on(&w.dag, i)
            } else {
                Vec::new()
            };
            if w.state.state(i) == TaskState::Pending {
                for j in w.state.held_back_by(&w.dag, i) {
                    if !waiting.contains(&j) {
                        waiting.push(j);
                    }
                }
            }
            TaskView {
                id: t.id.clone(),
                repo: t.repo.clone(),
                task: t.task.clone(),
                state: label(i),
                worker: rec.map(|r| r.id.clone()),
                started_ms: started,
                ended_ms: ended,
                estimate_ms: w.est[i].0,
                estimate_source: w.est[i].1,
                actual_ms: started.map(|s| ended.unwrap_or(now) - s),
                waiting_on: waiting
                    .into_iter()
                    .map(|j| (w.tasks[j].id.clone(), label(j)))
                    .collect(),
                progress: match w.state.state(i) {
                    TaskState::Pending => "pending",
                    TaskState::Running => "running",
                    TaskState::Done => "done",
                    TaskState::Stopped => "stopped",
                },
            }
        })
        .collect();
    let done = w
        .state
        .states()
        .iter()
        .filter(|s| **s == TaskState::Done)
        .count();
    let est: Vec<u64> = w.est.iter().map(|e| e.0).collect();
    let mut planned_ms = vec![(0, 0); w.tasks.len()];
    for slot in crate::wave::plan::simulate(
        &w.dag,
        &est,
        l.config.worker.max_parallel.max(1),
        vec![TaskState::Pending; w.tasks.len()],
    ) {
        planned_ms[slot.task] = (slot.start_ms, slot.end_ms);
    }
    // A running task counts what it has taken so far, at least its estimate.
    let took: Vec<u64> = tasks
        .iter()
        .zip(&est)
        .map(|(t, &e)| match (t.actual_ms, t.ended_ms) {
            (Some(a), Some(_)) => a.max(0) as u64,
            (Some(a), None) => (a.max(0) as u64).max(e),
            _ => e,
        })
        .collect();
    let critical_path = w.dag.critical_chain(&took);
    WaveView {
        name: w.row.name.clone(),
        file: w.row.file.clone(),
        cancelled: w.row.cancelled_ms.is_some(),
        created_ms: w.row.created_ms,
        planned_ms,
        critical_path,
        done,
        all_done: w.state.all_done(),
        finished: w.state.finished()
            || (w.row.cancelled_ms.is_some() && !w.state.states().contains(&TaskState::Running)),
        tasks,
    }
}

/// The recorded wave `name` (None: never ticked).
pub fn status(l: &Loaded, name: &str) -> Result<Option<WaveView>> {
    let Some(mut store) = l.existing_store()? else {
        return Ok(None);
    };
    Ok(load_recorded(l, &mut store, name)?.map(|w| view(l, &w)))
}

/// [`status`] of every recorded wave, from one opening of the store (the board asks this at
/// each refresh).
pub fn statuses(l: &Loaded) -> Result<Vec<WaveView>> {
    let Some(mut store) = l.existing_store()? else {
        return Ok(Vec::new());
    };
    let mut out = Vec::new();
    for w in store.read(wv::list_waves)? {
        if let Some(rec) = load_recorded(l, &mut store, &w.name)? {
            out.push(view(l, &rec));
        }
    }
    Ok(out)
}

/// Every recorded wave's name.
pub fn names(l: &Loaded) -> Result<Vec<String>> {
    let Some(mut store) = l.existing_store()? else {
        return Ok(Vec::new());
    };
    Ok(store
        .read(wv::list_waves)?
        .into_iter()
        .map(|w| w.name)
        .collect())
}
