//! Waves run by cron: one tick reconciles (resumes orphans), records the wave on first sight,
//! starts what the scheduler (`wave::schedule::decide`) says may run now — detached — and
//! returns. `--until-done` is ticks in a loop. Also the plan (estimates from history), the
//! status of a wave, and its cancel.
//!
//! A tick holds an advisory lock on `<state dir>/waves/<name>.lock` (flock, released when the
//! process ends however it ends): a tick that finds it taken skips. Each worker a wave starts
//! carries the task id `<wave>:<task>`, so a tick that died between the spawn and the link is
//! repaired by the next one, and never starts a task twice.

use super::spawn::{SpawnRequest, Spawned, prepare};
use super::{Error, Loaded, Result, start_detached};
use crate::config::ConfigError;
use crate::milestone::Milestone;
use crate::store::waves::{self as wv, WaveRow, WaveTaskRow};
use crate::store::workers::{self as ws, AlertRecord, WorkerRecord};
use crate::store::{Store, now_ms};
use crate::wave::plan::Plan;
use crate::wave::schedule::{TaskState, WaveState, decide, free_slots};
use crate::wave::{Dag, TaskDef, Wave, WaveError};
use serde::Serialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A task without an estimate and no DONE history on its repository.
pub const DEFAULT_ESTIMATE: Duration = Duration::from_secs(30 * 60);
/// How recent another wave's tick must be for its waiting tasks to count in the fair share.
const FAIR_WINDOW_MS: i64 = 60 * 60 * 1000;

/// Reads and validates a wave file against the organisation.
pub fn load(l: &Loaded, path: &Path) -> Result<Wave> {
    Wave::load(path, &l.config.graph).map_err(|e| match e {
        WaveError::Read { path, source } => Error::io("cannot read", path, source),
        WaveError::Invalid(d) => Error::Config(ConfigError::Invalid(d)),
    })
}

/// The worker's task id for a wave's task (its first attempt).
pub fn task_key(wave: &str, id: &str) -> String {
    format!("{wave}:{id}")
}

/// The worker's task id for attempt `attempt` of a wave's task (`orch wave retry`).
pub fn attempt_key(wave: &str, id: &str, attempt: i64) -> String {
    if attempt <= 1 {
        task_key(wave, id)
    } else {
        format!("{wave}:{id}#{attempt}")
    }
}

/// Each repository's median time from spawn to DONE, from the database.
pub fn history(store: &mut Store) -> Result<HashMap<String, Duration>> {
    let rows = store.read(wv::done_durations)?;
    let mut by: HashMap<String, Vec<i64>> = HashMap::new();
    for (repo, ms) in rows {
        by.entry(repo).or_default().push(ms);
    }
    Ok(by
        .into_iter()
        .map(|(repo, mut v)| {
            v.sort_unstable();
            (repo, Duration::from_millis(v[v.len() / 2] as u64))
        })
        .collect())
}

/// Estimates in ms, task order, and whether each came from the file.
pub fn estimates(
    tasks: &[TaskDef],
    history: &HashMap<String, Duration>,
) -> Vec<(u64, &'static str)> {
    tasks
        .iter()
        .map(|t| match (t.estimate, history.get(&t.repo)) {
            (Some(e), _) => (e.as_millis() as u64, "file"),
            (None, Some(h)) => (h.as_millis() as u64, "history"),
            (None, None) => (DEFAULT_ESTIMATE.as_millis() as u64, "default"),
        })
        .collect()
}

#[derive(Debug, Clone, Serialize)]
pub struct PlanReport {
    pub wave: String,
    pub max_parallel: usize,
    pub tasks: Vec<TaskDef>,
    pub estimates_ms: Vec<u64>,
    pub estimate_sources: Vec<&'static str>,
    pub plan: Plan,
}

pub fn plan(l: &Loaded, wave: &Wave) -> Result<PlanReport> {
    // A plan only reads: where nothing ran yet there is no history, and no state is created.
    let hist = match l.existing_store()? {
        Some(mut store) => history(&mut store)?,
        None => HashMap::new(),
    };
    let est = estimates(&wave.tasks, &hist);
    let dag = Dag::build(&wave.tasks, &l.config.graph)
        .map_err(|_| Error::Refused("the wave's waits form a cycle".into()))?;
    let ms: Vec<u64> = est.iter().map(|e| e.0).collect();
    let plan = crate::wave::plan::plan(&dag, &l.config.graph, &ms, l.config.worker.max_parallel);
    Ok(PlanReport {
        wave: wave.name.clone(),
        max_parallel: l.config.worker.max_parallel,
        tasks: wave.tasks.clone(),
        estimates_ms: ms,
        estimate_sources: est.into_iter().map(|e| e.1).collect(),
        plan,
    })
}

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
struct Loaded2 {
    row: WaveRow,
    rows: Vec<WaveTaskRow>,
    tasks: Vec<TaskDef>,
    workers: Vec<Option<WorkerRecord>>,
    dag: Dag,
    state: WaveState,
    est: Vec<(u64, &'static str)>,
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
fn notice_merged_by_hand(l: &Loaded, store: &mut Store, workers: &[Option<WorkerRecord>]) -> bool {
    let mut found = false;
    use super::journal::{self, Entry, Writer};
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
fn task_label(l: &Loaded, w: &WorkerRecord) -> String {
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

fn load_recorded(l: &Loaded, store: &mut Store, name: &str) -> Result<Option<Loaded2>> {
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
    Ok(Some(Loaded2 {
        row,
        rows,
        tasks,
        workers,
        dag,
        state,
        est,
    }))
}

fn view(l: &Loaded, w: &Loaded2) -> WaveView {
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

#[derive(Debug, Clone, Serialize)]
pub struct Started {
    pub task: String,
    pub repo: String,
    pub worker: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct TickReport {
    pub wave: String,
    /// Another tick of this wave held its lock: this one did nothing.
    pub skipped: bool,
    pub first_sight: bool,
    pub added: Vec<String>,
    pub resumed: usize,
    pub started: Vec<Started>,
    /// Tasks that could not start (spawn setup failed): (task, why).
    pub failed_to_start: Vec<(String, String)>,
    /// Why ready tasks were not started and wait (the worker's program is not installed);
    /// the next tick tries again.
    pub waiting: Option<String>,
    /// Alerts raised by this tick (a task that stopped with tasks waiting for it).
    pub alerts: Vec<String>,
    pub view: Option<WaveView>,
}

/// How long a tick's claim in the store lasts unless renewed (each round of starts renews it):
/// a tick killed outright holds its wave on other nodes this long at most.
const TICK_CLAIM_MS: i64 = 120_000;

/// One tick of a wave held: an advisory lock on this node (flock; the kernel drops it with
/// the process) and a claim in the store for every node (`wave_ticks`), given up on drop.
pub struct TickLock {
    _file: std::fs::File,
    /// The connection the claim was taken on: renewed and given up on it.
    store: Store,
    wave: String,
}

impl TickLock {
    /// Extends the claim (a long tick: many starts, each waiting for its supervisor).
    fn renew(&mut self) {
        let (wave, pid) = (&self.wave, crate::pidns::host_pid() as i64);
        if let Err(e) = self
            .store
            .write(|tx| wv::claim_tick(tx, wave, crate::node::name(), pid, TICK_CLAIM_MS))
        {
            tracing::warn!(wave, error = %e, "cannot renew the tick's claim");
        }
    }
}

impl Drop for TickLock {
    fn drop(&mut self) {
        let (wave, pid) = (&self.wave, crate::pidns::host_pid() as i64);
        let _ = self
            .store
            .write(|tx| wv::release_tick(tx, wave, crate::node::name(), pid));
    }
}

pub fn try_tick_lock(state_dir: &Path, wave: &str) -> Result<Option<TickLock>> {
    let dir = state_dir.join("waves");
    crate::store::ensure_private_dir(&dir)?;
    let path: PathBuf = dir.join(format!("{wave}.lock"));
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| Error::io("cannot open", &path, e))?;
    match rustix::fs::flock(&file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => {}
        Err(rustix::io::Errno::WOULDBLOCK) => return Ok(None),
        Err(e) => return Err(Error::io("cannot lock", &path, e.into())),
    }
    // This node's lock held: now the store's claim, which another node's tick may hold.
    let pid = crate::pidns::host_pid() as i64;
    let mut store = Store::open(state_dir)?;
    let node = crate::node::name();
    let claimed = store.write(|tx| {
        if let Some((holder, holder_pid, _)) = wv::tick_holder(tx, wave)?
            && holder == node
            && holder_pid != pid
            && !crate::process::process_alive(holder_pid as i32, None)
        {
            // A tick of this node killed outright: its claim is no one's (this node's flock
            // says no other tick of it runs).
            wv::release_tick(tx, wave, node, holder_pid)?;
        }
        wv::claim_tick(tx, wave, node, pid, TICK_CLAIM_MS)
    })?;
    Ok(claimed.then(|| TickLock {
        _file: file,
        store,
        wave: wave.to_string(),
    }))
}

/// Records the file's tasks: new ones join, unstarted ones follow the file, a started one
/// whose definition changed is refused (nothing is written then).
fn record(store: &mut Store, wave: &Wave) -> Result<(bool, Vec<String>)> {
    let file = wave.file.display().to_string();
    let outcome = store.write(|tx| {
        let first = wv::record_wave(tx, &wave.name, &file, now_ms())?;
        let existing: HashMap<String, WaveTaskRow> = wv::wave_tasks(tx, &wave.name)?
            .into_iter()
            .map(|r| (r.id.clone(), r))
            .collect();
        let mut changed = Vec::new();
        let mut added = Vec::new();
        for (seq, t) in wave.tasks.iter().enumerate() {
            let def = t.definition();
            // A started task: linked, or a worker carries its key (a tick died before linking).
            let worker = match existing.get(&t.id).and_then(|r| r.worker_id.clone()) {
                Some(w) => Some(w),
                None => {
                    let attempt = existing.get(&t.id).map(|r| r.attempt).unwrap_or(1);
                    wv::worker_for_task_id(tx, &attempt_key(&wave.name, &t.id, attempt))?
                        .map(|x| x.0)
                }
            };
            match existing.get(&t.id) {
                Some(r) if worker.is_some() && r.definition != def => {
                    changed.push(describe_change(t, &r.definition, worker.as_deref()));
                    continue;
                }
                None => added.push(t.id.clone()),
                _ => {}
            }
            let est = t.estimate.map(|d| d.as_millis() as i64);
            // A tick of an unchanged file writes no task: a 200-task wave ticked every
            // minute would otherwise rewrite every row of it each time.
            let same = existing.get(&t.id).is_some_and(|r| {
                r.seq == seq as i64 && r.definition == def && r.estimate_ms == est
            });
            if !same {
                wv::put_task(tx, &wave.name, &t.id, seq as i64, &def, est)?;
            }
            if let Some(w) = worker
                && existing.get(&t.id).is_none_or(|r| r.worker_id.is_none())
            {
                let at = ws::get_worker(tx, &w)?.map(|r| r.created_ms).unwrap_or(0);
                wv::set_task_worker(tx, &wave.name, &t.id, &w, at)?;
            }
        }
        if !changed.is_empty() {
            return Ok(Err(changed));
        }
        for id in existing.keys() {
            if wave.index_of(id).is_none() {
                wv::drop_unstarted_task(tx, &wave.name, id)?;
            }
        }
        if first {
            added.clear();
        }
        Ok(Ok((first, added)))
    });
    match outcome? {
        Ok(x) => Ok(x),
        Err(changed) => Err(Error::Refused(format!(
            "{}: wave {} has started tasks whose definition changed; a started task cannot change (restore it, or give the new work a new id):\n  {}",
            wave.file.display(),
            wave.name,
            changed.join("\n  ")
        ))),
    }
}

fn describe_change(t: &TaskDef, recorded: &str, worker: Option<&str>) -> String {
    let was: Option<TaskDef> = serde_json::from_str(recorded).ok();
    let mut diffs = Vec::new();
    if let Some(was) = was {
        let mut field = |name: &str, a: String, b: String| {
            if a != b {
                diffs.push(format!("{name} {a:?} -> {b:?}"));
            }
        };
        field("repo", was.repo, t.repo.clone());
        field("task", was.task, t.task.clone());
        field(
            "plan",
            was.plan.unwrap_or_default(),
            t.plan.clone().unwrap_or_default(),
        );
        field(
            "component",
            was.component.unwrap_or_default(),
            t.component.clone().unwrap_or_default(),
        );
        field("after", was.after.join(","), t.after.join(","));
        field(
            "model",
            was.model.unwrap_or_default(),
            t.model.clone().unwrap_or_default(),
        );
        field(
            "task specifics",
            was.specifics.with_task(""),
            t.specifics.with_task(""),
        );
    }
    format!(
        "task {} (started as worker {}): {}",
        t.id,
        worker.unwrap_or("?"),
        crate::text::escape(&diffs.join("; "))
    )
}

/// One tick: reconcile, record, start what may run now (detached), return what it did.
pub fn tick(l: &Loaded, wave: &Wave) -> Result<TickReport> {
    let mut report = TickReport {
        wave: wave.name.clone(),
        skipped: false,
        first_sight: false,
        added: Vec::new(),
        resumed: 0,
        started: Vec::new(),
        failed_to_start: Vec::new(),
        waiting: None,
        alerts: Vec::new(),
        view: None,
    };
    let Some(mut lock) = try_tick_lock(&l.state_dir, &wave.name)? else {
        report.skipped = true;
        return Ok(report);
    };
    // Orphans hold locks the wave may wait for, and may be the wave's own workers.
    match super::resume::resume(l, true) {
        Ok(r) => report.resumed = r.len(),
        Err(e) => tracing::warn!(error = %e, "resume pass failed"),
    }
    let mut store = l.store()?;
    let (first, added) = record(&mut store, wave)?;
    report.first_sight = first;
    report.added = added;
    let mut w = load_recorded(l, &mut store, &wave.name)?.expect("recorded above");
    if notice_merged_by_hand(l, &mut store, &w.workers) {
        w = load_recorded(l, &mut store, &wave.name)?.expect("recorded above");
    }
    report.alerts = alert_stopped(l, &mut store, &w)?;
    if !report.alerts.is_empty() {
        // Delivered now rather than by whoever drains the outbox next.
        super::resume::deliver_alerts(l);
    }
    if w.row.cancelled_ms.is_none() && !w.state.finished() {
        start_ready(l, &mut store, &mut lock, &mut w, &mut report)?;
    }
    let ready_waiting = w.state.ready().count() as i64;
    let finished = w.state.finished().then(now_ms);
    store.write(|tx| {
        wv::set_progress(
            tx,
            &wave.name,
            ready_waiting,
            w.row.finished_ms.or(finished),
            now_ms(),
        )
    })?;
    // What a rebuild from checkpoints gives back: the wave as this tick left it.
    crate::checkpoint::waves::save(&mut store, &l.state_dir, &wave.name);
    report.view = Some(view(l, &w));
    Ok(report)
}

fn start_ready(
    l: &Loaded,
    store: &mut Store,
    lock: &mut TickLock,
    w: &mut Loaded2,
    report: &mut TickReport,
) -> Result<()> {
    let name = w.row.name.clone();
    // The model each task's worker runs with: its own, or an override for a condition that
    // holds (the wave's critical path, computed with the scheduler's estimates), else the
    // repository's or `worker.model`.
    let est: Vec<u64> = w.est.iter().map(|e| e.0).collect();
    let traits = crate::wave::model::traits(&w.tasks, &w.dag, &est);
    let models: Vec<_> = traits
        .iter()
        .zip(&w.tasks)
        .map(|(traits, t)| l.config.model_for(&t.repo, traits))
        .collect();
    loop {
        lock.renew();
        let (locks, running, all, others) = store.read(|tx| {
            // A fatal hold stops starts in its chain as a lock does: the scheduler skips them.
            let mut locks = crate::store::active_locks(tx)?;
            locks.extend(crate::store::fatal::as_locks(&crate::store::fatal::all(
                tx,
            )?));
            Ok((
                locks,
                crate::store::nodes::lock_holders_on(tx, crate::node::name())?,
                crate::store::nodes::lock_holders_all(tx)?,
                wv::others_waiting(tx, &name, now_ms() - FAIR_WINDOW_MS)?,
            ))
        })?;
        let mine = w
            .state
            .states()
            .iter()
            .filter(|s| **s == TaskState::Running)
            .count();
        let mut free = free_slots(l.config.worker.max_parallel, running, mine, others);
        // And the organisation's slots, every node's workers counted.
        if let Some(total) = l.config.worker.max_parallel_total {
            free = free.min(free_slots(total, all, mine, others));
        }
        let picks = decide(&w.dag, &w.state, &l.config.graph, &locks, free);
        if picks.is_empty() {
            return Ok(());
        }
        // Not a task's failure: they wait, nothing taken, until the program is installed.
        if let Some(why) = crate::app::spawn::program_missing(&l.config) {
            report.waiting = Some(why);
            return Ok(());
        }
        for i in picks {
            let t = w.tasks[i].clone();
            let attempt = w.rows[i].attempt;
            // A retried task's new worker is told its previous attempt's checkpoint.
            let previous = if attempt > 1 {
                let key = attempt_key(&name, &t.id, attempt - 1);
                match store.read(|tx| wv::worker_for_task_id(tx, &key))? {
                    Some((prev, _)) => super::journal::checkpoint_of(store, &prev)?,
                    None => None,
                }
            } else {
                None
            };
            let req = SpawnRequest {
                repo: t.repo.clone(),
                task: t.specifics.with_task(&t.task),
                task_id: Some(attempt_key(&name, &t.id, attempt)),
                component: t.component.clone(),
                plan: t.plan.clone(),
                land: t.land,
                model: models[i].clone(),
                handoff: previous
                    .as_ref()
                    .map(|(prev, cp)| super::reassign::handoff(&l.state_dir, prev, cp)),
                reassignments: previous
                    .as_ref()
                    .map_or(0, |(prev, _)| prev.progress.reassignments + 1),
                // The contract's `reassign_task`: "Critical path, spawn new worker".
                reassign_on_timeout: traits[i].critical_path,
                ..Default::default()
            };
            match prepare(&l.config, &l.contract, &l.state_dir, store, &req) {
                Ok(Spawned::Ready(rec)) => {
                    store.write(|tx| {
                        wv::set_task_worker(tx, &name, &t.id, &rec.id, rec.created_ms)
                    })?;
                    crate::checkpoint::waves::save(store, &l.state_dir, &name);
                    start_detached(l, &rec.id)?;
                    super::wait_taken_over(store, &rec.id);
                    w.state.start(i);
                    w.rows[i].worker_id = Some(rec.id.clone());
                    w.rows[i].started_ms = Some(rec.created_ms);
                    w.workers[i] = store.worker(&rec.id)?;
                    report.started.push(Started {
                        task: t.id.clone(),
                        repo: t.repo.clone(),
                        worker: rec.id.clone(),
                    });
                }
                // Someone else (another wave, a hand spawn) took the chain or the slot
                // between the read and the spawn: the next tick tries again.
                Ok(_) => return Ok(()),
                Err(e) => {
                    // The spawn recorded its worker FAILED (and released the lock): link it,
                    // so the task shows why and its dependents wait.
                    let key = attempt_key(&name, &t.id, w.rows[i].attempt);
                    store.write(|tx| {
                        if let Some((wid, at)) = wv::worker_for_task_id(tx, &key)? {
                            wv::set_task_worker(tx, &name, &t.id, &wid, at)?;
                        }
                        Ok(())
                    })?;
                    crate::checkpoint::waves::save(store, &l.state_dir, &name);
                    w.state.finish(&w.dag, i, false);
                    report.failed_to_start.push((t.id.clone(), e.to_string()));
                }
            }
        }
    }
}

/// Raises one alert per stopped task that holds others back (recorded like every alert: a
/// row in SQLite and a line in alerts.jsonl).
fn alert_stopped(l: &Loaded, store: &mut Store, w: &Loaded2) -> Result<Vec<String>> {
    let mut raised = Vec::new();
    for i in 0..w.tasks.len() {
        if w.state.state(i) != TaskState::Stopped || w.rows[i].alerted_ms.is_some() {
            continue;
        }
        let Some(rec) = &w.workers[i] else { continue };
        let held: Vec<&str> = (0..w.tasks.len())
            .filter(|&j| w.state.held_back_by(&w.dag, j).contains(&i))
            .map(|j| w.tasks[j].id.as_str())
            .collect();
        let message = format!(
            "wave {}: task {} ended {} (worker {}); {} held back: {}",
            w.row.name,
            w.tasks[i].id,
            rec.milestone(),
            rec.id,
            held.len(),
            if held.is_empty() {
                "-".to_string()
            } else {
                held.join(", ")
            }
        );
        let alert = AlertRecord {
            id: 0,
            at_ms: now_ms(),
            // A stopped task holds its wave up until a person acts: critical (one of the
            // documented severities, so `min_severity` filters it as it filters every alert).
            severity: "critical".into(),
            worker_id: Some(rec.id.clone()),
            repo: Some(rec.repo.clone()),
            kind: "wave_task_stopped".into(),
            message: message.clone(),
            repeats: 1,
            resolved_ms: None,
        };
        let fresh = store.write(|tx| {
            if !wv::mark_alerted(tx, &w.row.name, &w.tasks[i].id, now_ms())? {
                return Ok(None);
            }
            Ok(Some(ws::add_alert(tx, &alert)?))
        })?;
        if let Some(id) = fresh {
            let alert = AlertRecord { id, ..alert };
            crate::alerts::append_jsonl(&l.state_dir, std::slice::from_ref(&alert));
            raised.push(message);
        }
    }
    Ok(raised)
}

#[derive(Debug, Clone, Serialize)]
pub struct CancelReport {
    pub wave: String,
    pub newly_cancelled: bool,
    /// (worker, outcome)
    pub workers: Vec<(String, String)>,
}

/// Stops the wave: no tick starts anything more; its live workers are cancelled.
/// What `orch wave retry` did.
#[derive(Debug, Clone, Serialize)]
pub struct RetryReport {
    pub wave: String,
    pub task: String,
    /// The worker of the attempt given up, and where it stood.
    pub previous_worker: String,
    pub previous_state: String,
    /// Whether the previous worker's chain lock was released (FAILED and BLOCKED keep theirs).
    pub released_lock: bool,
    /// The attempt the next tick starts.
    pub attempt: i64,
}

/// Whether a task's worker `rec` stopped so that its task may get another go (`orch wave
/// retry`): FAILED, BLOCKED, BLOCKED_PERMISSION or CANCELLED, or DONE with a change that did not
/// land.
pub fn retriable(rec: &WorkerRecord) -> bool {
    use crate::milestone::LandState;
    let landing = rec.progress.landing.as_ref().map(|l| l.state);
    match rec.milestone() {
        Milestone::Failed
        | Milestone::Blocked
        | Milestone::BlockedPermission
        | Milestone::Cancelled => true,
        Milestone::Done => matches!(
            landing,
            Some(LandState::Conflict | LandState::Refused | LandState::Reverted)
        ),
        _ => false,
    }
}

/// Gives a stopped task of a wave another go: a FAILED, BLOCKED, BLOCKED_PERMISSION or
/// CANCELLED worker, or a DONE one whose change did not land (conflict, refused). Its chain lock
/// is released (audited) and the next tick starts attempt n+1 as a new worker; the old one stays
/// in the history. Refused while anything still supervises the worker, and in a cancelled wave.
pub fn retry(l: &Loaded, name: &str, task: &str, by: &str) -> Result<RetryReport> {
    // Not beside a tick of the same wave (it could be starting this very task).
    let deadline = Instant::now() + Duration::from_secs(30);
    let _lock = loop {
        if let Some(lock) = try_tick_lock(&l.state_dir, name)? {
            break lock;
        }
        if Instant::now() >= deadline {
            return Err(Error::No(format!(
                "wave {name}: a tick has held it for 30 s; try again"
            )));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut store = l.store()?;
    let Some(w) = load_recorded(l, &mut store, name)? else {
        return Err(Error::Refused(format!("no wave named {name} was ever run")));
    };
    if w.row.cancelled_ms.is_some() {
        return Err(Error::No(format!(
            "wave {name} is cancelled: nothing more starts in it"
        )));
    }
    let Some(i) = w.tasks.iter().position(|t| t.id == task) else {
        return Err(Error::Refused(format!("wave {name} has no task {task}")));
    };
    let Some(rec) = w.workers[i].clone() else {
        return Err(Error::No(format!(
            "task {task} of wave {name} has not started: nothing to retry"
        )));
    };
    if !retriable(&rec) {
        return Err(Error::No(format!(
            "task {task} of wave {name} is {}: only a FAILED, BLOCKED or CANCELLED task, or one whose change did not land, gets another go",
            task_label(l, &rec)
        )));
    }
    if rec.supervised(now_ms()) {
        return Err(Error::No(format!(
            "worker {} of task {task} is still supervised: `orch cancel {}` first",
            rec.id, rec.id
        )));
    }
    let (released, attempt) = store.write(|tx| retry_in(tx, name, task, &rec, by))?;
    super::journal::write_checkpoint(&mut store, &l.state_dir, &rec.id);
    // A rebuild that forgot the new attempt would pin the task to the stopped one again.
    crate::checkpoint::waves::save(&mut store, &l.state_dir, name);
    Ok(RetryReport {
        wave: name.to_string(),
        task: task.to_string(),
        previous_worker: rec.id.clone(),
        previous_state: task_label(l, &rec),
        released_lock: released,
        attempt,
    })
}

/// `retry`'s transaction: the stopped worker `rec`'s chain lock released (audited) and the
/// task's next attempt made the one to start; (lock released, that attempt). `rec` stays in
/// the history, superseded (`store::supersede`): never respawned or approved again.
pub fn retry_in(
    tx: &crate::store::sql::Tx,
    name: &str,
    task: &str,
    rec: &WorkerRecord,
    by: &str,
) -> crate::store::sql::Result<(bool, i64)> {
    let m = rec.milestone();
    let reason = format!("wave retry of {name}:{task} by {by}");
    let released = crate::store::release_in(tx, &rec.id, Some(&reason), Some(by))?;
    ws::add_event(tx, &rec.id, "wave_retry", m, &reason)?;
    if released.is_some() {
        ws::add_event(tx, &rec.id, "lock_released", m, &reason)?;
    }
    // Its open alerts that ask an operator to respawn or approve it are answered: the task
    // goes on in its next attempt, and those commands now refuse it.
    for kind in [
        "blocked",
        "agent_blocked",
        "done_reopened",
        "protected_paths",
    ] {
        crate::store::alerts::resolve(tx, &rec.id, kind, now_ms())?;
    }
    let attempt = wv::retry_task(tx, name, task)?;
    Ok((released.is_some(), attempt))
}

pub fn cancel(l: &Loaded, name: &str, by: String) -> Result<CancelReport> {
    let mut store = l.store()?;
    let Some(w) = load_recorded(l, &mut store, name)? else {
        return Err(Error::Refused(format!("no wave named {name} was ever run")));
    };
    let newly = store.write(|tx| wv::cancel_wave(tx, name, &by, now_ms()))?;
    crate::checkpoint::waves::save(&mut store, &l.state_dir, name);
    let mut workers = Vec::new();
    for rec in w.workers.iter().flatten() {
        if rec.milestone().is_terminal() {
            continue;
        }
        let outcome =
            match super::operator::cancel(l, &rec.id, by.clone(), format!("wave {name} cancelled"))
            {
                Ok(super::operator::Cancelled::BySupervisor(o)) => o,
                Ok(super::operator::Cancelled::Queued) => "cancel queued".into(),
                Ok(super::operator::Cancelled::Offline(m)) => m.to_string(),
                Err(e) => e.to_string(),
            };
        workers.push((rec.id.clone(), outcome));
    }
    Ok(CancelReport {
        wave: name.to_string(),
        newly_cancelled: newly,
        workers,
    })
}
