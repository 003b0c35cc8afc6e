//! A wave's operator actions: `cancel`, and `retry` — attempt n of a stopped task; `retry_in`
//! releases the old attempt's lock and resolves its alerts asking for respawn or approval (it
//! is superseded).

use super::*;

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
    crate::app::journal::write_checkpoint(&mut store, &l.state_dir, &rec.id);
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
        let outcome = match crate::app::operator::cancel(
            l,
            &rec.id,
            by.clone(),
            format!("wave {name} cancelled"),
        ) {
            Ok(crate::app::operator::Cancelled::BySupervisor(o)) => o,
            Ok(crate::app::operator::Cancelled::Queued) => "cancel queued".into(),
            Ok(crate::app::operator::Cancelled::Offline(m)) => m.to_string(),
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
