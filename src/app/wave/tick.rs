//! One tick of a wave: the advisory lock (one tick per wave at a time, across nodes), the wave
//! recorded on first sight and a changed started task refused, what the scheduler picks started
//! through `spawn::prepare`, and one alert per stopped task.

use super::*;

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

/// How recent another wave's tick must be for its waiting tasks to count in the fair share.
const FAIR_WINDOW_MS: i64 = 60 * 60 * 1000;

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
    match crate::app::resume::resume(l, true) {
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
        crate::app::resume::deliver_alerts(l);
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
    w: &mut RecordedWave,
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
                    Some((prev, _)) => crate::app::journal::checkpoint_of(store, &prev)?,
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
                    .map(|(prev, cp)| crate::app::reassign::handoff(&l.state_dir, prev, cp)),
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
                    crate::app::wait_taken_over(store, &rec.id);
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
fn alert_stopped(l: &Loaded, store: &mut Store, w: &RecordedWave) -> Result<Vec<String>> {
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
