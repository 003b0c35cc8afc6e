//! Waves run by cron: one tick reconciles (resumes orphans), records the wave on first sight,
//! starts what the scheduler (`wave::schedule::decide`) says may run now — detached — and
//! returns. `--until-done` is ticks in a loop. Also the plan (estimates from history), the
//! status of a wave, its cancel and its retries.
//!
//! Files: `tick.rs` (a tick), `status.rs` (a wave's tasks and their state), `plan.rs` (the
//! plan), `actions.rs` (cancel, retry); re-exported here, so each is `app::wave::<name>`.
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

mod actions;
mod plan;
mod status;
mod tick;

pub use actions::{CancelReport, RetryReport, cancel, retriable, retry, retry_in};
pub use plan::{DEFAULT_ESTIMATE, PlanReport, estimates, history, plan};
use status::{RecordedWave, load_recorded, notice_merged_by_hand, task_label, view};
pub use status::{TaskView, WaveView, names, status, statuses};
pub use tick::{Started, TickLock, TickReport, tick, try_tick_lock};

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
