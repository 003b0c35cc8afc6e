//! Waves rebuilt from their checkpoints (`checkpoint::waves`): the wave as recorded, its tasks'
//! definitions, the attempt each is at and that attempt's worker — so that `orch wave status`
//! answers as before and the next tick neither starts a task twice nor pins a retried task to
//! its stopped attempt.
//!
//! As with worker checkpoints (`trust.rs`), the file is evidence: it is believed only where it
//! agrees with what orch would have written and with the workers the rebuild trusts. A task's
//! worker must be the one orch started for that task and attempt (its task id
//! `<wave>:<task>[#n]`, its repository and its task text); a task past its first attempt must
//! not have a previous attempt that is still going or DONE (a retry is given only to a stopped
//! task); the definitions must read as tasks of configured repositories that wait in no cycle.
//! A wave that fails any of these is not rebuilt, and said so by name.

use super::trust::RefusedCheckpoint;
use crate::app::Loaded;
use crate::app::wave::{attempt_key, retriable};
use crate::checkpoint::waves::{self as cw, WaveCheckpoint};
use crate::store::workers::WorkerRecord;
use crate::wave::{Dag, TaskDef};
use std::collections::{HashMap, HashSet};
use std::path::Path;

/// What the wave checkpoints of the state directory give a rebuild.
#[derive(Debug, Default)]
pub struct Recorded {
    /// Waves to put back.
    pub waves: Vec<WaveCheckpoint>,
    /// Handled, worth knowing.
    pub problems: Vec<String>,
    pub refused: Vec<RefusedCheckpoint>,
}

/// Reads and checks every wave checkpoint against `workers`, the workers the rebuild trusts.
pub fn read(l: &Loaded, workers: &[&WorkerRecord]) -> Recorded {
    let by_id: HashMap<&str, &WorkerRecord> = workers.iter().map(|w| (w.id.as_str(), *w)).collect();
    let mut out = Recorded::default();
    for file in cw::files(&l.state_dir) {
        let checked = cw::read(&file)
            .map_err(|e| {
                let e = e
                    .strip_prefix(&format!("{}: ", file.display()))
                    .unwrap_or(&e)
                    .to_string();
                format!("unreadable ({e})")
            })
            .and_then(|cp| check(l, &file, &cp, &by_id).map(|problems| (cp, problems)));
        match checked {
            Ok((cp, problems)) => {
                out.problems.extend(problems);
                out.waves.push(cp);
            }
            Err(why) => out.refused.push(RefusedCheckpoint {
                file,
                worker_id: None,
                why: format!("{why}; the wave was not rebuilt"),
                held: None,
            }),
        }
    }
    out
}

/// Checks wave checkpoint `cp`, read from `file`: the problems it leaves (a task's worker the
/// rebuild does not have), or why it cannot be believed.
fn check(
    l: &Loaded,
    file: &Path,
    cp: &WaveCheckpoint,
    workers: &HashMap<&str, &WorkerRecord>,
) -> Result<Vec<String>, String> {
    let esc = |s: &str| crate::text::escape(s).into_owned();
    if cw::file_wave(file) != Some(cp.name.as_str()) {
        return Err(format!(
            "it names wave \"{}\" but its file is another wave's",
            esc(&cp.name)
        ));
    }
    if !crate::diag::valid_name(&cp.name) {
        return Err(format!("\"{}\" is not a wave name", esc(&cp.name)));
    }
    let mut defs = Vec::with_capacity(cp.tasks.len());
    let mut ids = HashSet::new();
    for t in &cp.tasks {
        let def: TaskDef = serde_json::from_str(&t.definition).map_err(|e| {
            format!(
                "task \"{}\": its definition is unreadable ({e})",
                esc(&t.id)
            )
        })?;
        if def.id != t.id || !ids.insert(t.id.as_str()) {
            return Err(format!(
                "task \"{}\" is recorded twice or under another id",
                esc(&t.id)
            ));
        }
        if l.config.repo(&def.repo).is_none() {
            return Err(format!(
                "task {}: unknown repository \"{}\" (not in {})",
                esc(&t.id),
                esc(&def.repo),
                l.config.file.display()
            ));
        }
        if t.attempt < 1 {
            return Err(format!(
                "task {}: attempt {} is not one",
                esc(&t.id),
                t.attempt
            ));
        }
        defs.push(def);
    }
    if Dag::build(&defs, &l.config.graph).is_err() {
        return Err("its tasks wait for each other in a cycle".into());
    }
    let mut problems = Vec::new();
    for (t, def) in cp.tasks.iter().zip(&defs) {
        let key = attempt_key(&cp.name, &t.id, t.attempt);
        if let Some(id) = &t.worker {
            match workers.get(id.as_str()) {
                Some(w) => {
                    let task = def.specifics.with_task(&def.task);
                    if w.task_id.as_deref() != Some(key.as_str())
                        || w.repo != def.repo
                        || w.task != task
                    {
                        return Err(format!(
                            "task {} names worker {}, which is not the worker orch started for it ({key} on {})",
                            esc(&t.id),
                            esc(id),
                            def.repo
                        ));
                    }
                }
                None => problems.push(format!(
                    "wave {}: task {}'s worker {} was not rebuilt (its checkpoint is missing or refused): the task shows PENDING",
                    cp.name,
                    t.id,
                    esc(id)
                )),
            }
        }
        if t.attempt > 1 {
            // The previous attempt's workers (a replacement carries its predecessor's key): one
            // of them stopped, or nothing gave the task another go. None left (pruned): nothing
            // to tell.
            let before = attempt_key(&cp.name, &t.id, t.attempt - 1);
            let mut previous: Vec<&WorkerRecord> = workers
                .values()
                .filter(|w| w.task_id.as_deref() == Some(before.as_str()))
                .copied()
                .collect();
            previous.sort_by(|a, b| (b.created_ms, &b.id).cmp(&(a.created_ms, &a.id)));
            if let Some(w) = previous.first()
                && !previous.iter().any(|w| retriable(w))
            {
                return Err(format!(
                    "task {} is at attempt {} but attempt {}'s worker {} is {}: a task gets another go only once its attempt stopped",
                    esc(&t.id),
                    t.attempt,
                    t.attempt - 1,
                    w.id,
                    w.milestone()
                ));
            }
        }
    }
    Ok(problems)
}

/// Puts the checked waves back (in the rebuild's transaction); each one rebuilt as a sentence.
pub fn restore(
    tx: &crate::store::sql::Tx,
    waves: &[WaveCheckpoint],
    problems: &mut Vec<String>,
) -> crate::store::sql::Result<Vec<String>> {
    let mut said = Vec::new();
    for cp in waves {
        let (row, tasks) = cp.rows();
        if crate::store::waves::restore_wave(tx, &row, &tasks)? {
            let started = tasks.iter().filter(|t| t.worker_id.is_some()).count();
            said.push(format!(
                "wave {}: {} task(s), {started} started",
                cp.name,
                tasks.len()
            ));
        } else {
            problems.push(format!(
                "wave {}: already in the database; skipped",
                cp.name
            ));
        }
    }
    Ok(said)
}
