//! Wave checkpoints: `<state>/waves/<name>.checkpoint.yaml`, a view of a wave's rows (the wave
//! as first seen, its tasks' definitions as recorded, which attempt each is at and which worker
//! runs that attempt), written after every change to them, so that `orch resume
//! --from-checkpoints` gives a rebuilt database its waves back. Without them a rebuilt database
//! forgot every wave: `orch wave status` no longer knew it, and the next tick linked a retried
//! task to its stopped first attempt again (the worker carrying `<wave>:<task>`) and stopped
//! the wave.
//!
//! Written by orch alone, in a directory of orch's state (workers with an account of their own
//! cannot write it); what a rebuild believes of one is checked against the workers it rebuilt
//! (`app::resume::waves`).

use crate::store::Store;
use crate::store::waves::{self as wv, WaveRow, WaveTaskRow};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

const SUFFIX: &str = ".checkpoint.yaml";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WaveCheckpoint {
    pub name: String,
    /// The wave file it was last read from.
    pub file: String,
    pub created_ms: i64,
    pub updated_ms: i64,
    #[serde(default)]
    pub finished_ms: Option<i64>,
    #[serde(default)]
    pub cancelled_ms: Option<i64>,
    #[serde(default)]
    pub cancelled_by: Option<String>,
    #[serde(default)]
    pub ready_waiting: i64,
    pub tasks: Vec<TaskCheckpoint>,
}

/// One task as recorded: its definition as started, its attempt and that attempt's worker.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TaskCheckpoint {
    pub id: String,
    pub seq: i64,
    /// `wave::TaskDef` as JSON, as the database keeps it.
    pub definition: String,
    #[serde(default)]
    pub estimate_ms: Option<i64>,
    /// 1, or more after `orch wave retry`.
    pub attempt: i64,
    /// The worker of the current attempt (none: not started yet).
    #[serde(default)]
    pub worker: Option<String>,
    #[serde(default)]
    pub started_ms: Option<i64>,
    /// When the alert for it having stopped was raised (raised once).
    #[serde(default)]
    pub alerted_ms: Option<i64>,
}

impl WaveCheckpoint {
    pub fn of(row: &WaveRow, tasks: &[WaveTaskRow]) -> WaveCheckpoint {
        WaveCheckpoint {
            name: row.name.clone(),
            file: row.file.clone(),
            created_ms: row.created_ms,
            updated_ms: row.updated_ms,
            finished_ms: row.finished_ms,
            cancelled_ms: row.cancelled_ms,
            cancelled_by: row.cancelled_by.clone(),
            ready_waiting: row.ready_waiting,
            tasks: tasks
                .iter()
                .map(|t| TaskCheckpoint {
                    id: t.id.clone(),
                    seq: t.seq,
                    definition: t.definition.clone(),
                    estimate_ms: t.estimate_ms,
                    attempt: t.attempt,
                    worker: t.worker_id.clone(),
                    started_ms: t.started_ms,
                    alerted_ms: t.alerted_ms,
                })
                .collect(),
        }
    }

    /// The rows it records, as the store keeps them.
    pub fn rows(&self) -> (WaveRow, Vec<WaveTaskRow>) {
        let row = WaveRow {
            name: self.name.clone(),
            file: self.file.clone(),
            created_ms: self.created_ms,
            updated_ms: self.updated_ms,
            finished_ms: self.finished_ms,
            cancelled_ms: self.cancelled_ms,
            cancelled_by: self.cancelled_by.clone(),
            ready_waiting: self.ready_waiting,
        };
        let tasks = self
            .tasks
            .iter()
            .map(|t| WaveTaskRow {
                wave: self.name.clone(),
                id: t.id.clone(),
                seq: t.seq,
                definition: t.definition.clone(),
                estimate_ms: t.estimate_ms,
                worker_id: t.worker.clone(),
                started_ms: t.started_ms,
                alerted_ms: t.alerted_ms,
                attempt: t.attempt,
            })
            .collect();
        (row, tasks)
    }
}

/// Where wave checkpoints live (beside the waves' tick locks).
pub fn dir(state_dir: &Path) -> PathBuf {
    state_dir.join("waves")
}

pub fn path_for(state_dir: &Path, wave: &str) -> PathBuf {
    dir(state_dir).join(format!("{wave}{SUFFIX}"))
}

/// The wave a checkpoint file is named after.
pub fn file_wave(file: &Path) -> Option<&str> {
    file.file_name()?
        .to_str()?
        .strip_suffix(SUFFIX)
        .filter(|n| !n.is_empty())
}

/// Every wave checkpoint file of the state directory, sorted.
pub fn files(state_dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir(state_dir)) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| file_wave(p).is_some())
        .collect();
    out.sort();
    out
}

/// Writes wave `name`'s checkpoint from the database (a view: best effort, logged when it
/// fails; the database stays the truth). A wave no longer recorded (pruned) loses its file.
///
/// Writers take turns (a lock file per wave) and read the database inside their turn, so the
/// last file written is never an older reading than one written before it (a tick and a
/// supervisor relinking a task may write at once).
pub fn save(store: &mut Store, state_dir: &Path, name: &str) {
    if let Err(e) = crate::store::ensure_private_dir(&dir(state_dir)) {
        tracing::error!(wave = name, error = %e, "could not write the wave's checkpoint");
        return;
    }
    let turn = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(dir(state_dir).join(format!("{name}.checkpoint.lock")))
        .and_then(|f| {
            rustix::fs::flock(&f, rustix::fs::FlockOperation::LockExclusive)?;
            Ok(f)
        });
    if let Err(e) = &turn {
        tracing::warn!(wave = name, error = %e, "could not take turns writing the wave's checkpoint");
    }
    let read = store.read(|tx| {
        Ok(match wv::get_wave(tx, name)? {
            Some(row) => Some((row, wv::wave_tasks(tx, name)?)),
            None => None,
        })
    });
    let path = path_for(state_dir, name);
    let written = match read {
        Ok(Some((row, tasks))) => crate::yaml::to_yaml_string(&WaveCheckpoint::of(&row, &tasks))
            .map_err(std::io::Error::other)
            .and_then(|text| super::write_atomic(&path, text.as_bytes())),
        Ok(None) => match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        },
        Err(e) => {
            tracing::error!(wave = name, error = %e, "could not read the wave to checkpoint it");
            Ok(())
        }
    };
    if let Err(e) = written {
        tracing::error!(wave = name, file = %path.display(), error = %e, "could not write the wave's checkpoint");
    }
    drop(turn);
}

/// Saves the checkpoint of the wave whose task worker `id` runs, if a wave started it.
pub fn save_of_worker(store: &mut Store, state_dir: &Path, id: &str) {
    match store.read(|tx| wv::wave_task_of(tx, id)) {
        Ok(Some((wave, _))) => save(store, state_dir, &wave),
        Ok(None) => {}
        Err(e) => tracing::error!(worker = id, error = %e, "could not find the wave of a worker"),
    }
}

/// Reads a wave checkpoint file; an error names the file and what is wrong with it.
pub fn read(path: &Path) -> Result<WaveCheckpoint, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    crate::yaml::from_yaml_str(&text).map_err(|e| format!("{}: {}", path.display(), e.message))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wave_checkpoint_is_written_read_back_and_named_after_its_wave() {
        let dir = tempfile::tempdir().unwrap();
        let row = WaveRow {
            name: "w1".into(),
            file: "/x/w1.yaml".into(),
            created_ms: 1,
            updated_ms: 2,
            finished_ms: Some(3),
            cancelled_ms: None,
            cancelled_by: None,
            ready_waiting: 0,
        };
        let task = WaveTaskRow {
            wave: "w1".into(),
            id: "core-1".into(),
            seq: 0,
            definition: r#"{"id":"core-1","repo":"core","task":"t","after":[]}"#.into(),
            estimate_ms: Some(60_000),
            worker_id: Some("core-0123abcd".into()),
            started_ms: Some(5),
            alerted_ms: None,
            attempt: 2,
        };
        let cp = WaveCheckpoint::of(&row, std::slice::from_ref(&task));
        let path = path_for(dir.path(), "w1");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let text = crate::yaml::to_yaml_string(&cp).unwrap();
        super::super::write_atomic(&path, text.as_bytes()).unwrap();
        assert_eq!(files(dir.path()), vec![path.clone()]);
        assert_eq!(file_wave(&path), Some("w1"));
        let back = read(&path).unwrap();
        assert_eq!(back, cp);
        let (r, t) = back.rows();
        assert_eq!((r.name.as_str(), r.finished_ms), ("w1", Some(3)));
        assert_eq!(t.len(), 1);
        assert_eq!(
            (
                t[0].attempt,
                t[0].worker_id.as_deref(),
                t[0].definition.as_str()
            ),
            (2, Some("core-0123abcd"), task.definition.as_str())
        );
        std::fs::write(&path, "name: [w1\n").unwrap();
        let err = read(&path).unwrap_err();
        assert!(err.contains("w1.checkpoint.yaml"), "{err}");
    }
}
