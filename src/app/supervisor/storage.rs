//! A state directory the supervisor cannot write (full, read-only, or a damaged database):
//! named, alerted without the disk, and the worker stopped — a supervisor that cannot write
//! can neither release a lock nor record DONE, so its worker must not go on unrecorded. Its
//! lease then lapses, and `orch resume` takes the worker over once the state is writable.

use super::{SuperviseError, Supervisor, worker::Stop};
use crate::forge::Forge;
use crate::store::{StoreError, now_ms};
use std::time::{Duration, Instant};

/// How long a stopped supervisor keeps trying to record why it stopped (space may come back).
const RECORD_FOR: Duration = Duration::from_secs(30);

/// Why `e` means the state cannot be written at all; `None` for anything a retry may mend
/// (a busy database, one failed statement).
pub(super) fn unwritable(e: &StoreError) -> Option<String> {
    match e {
        StoreError::NoSpace { .. } | StoreError::Damaged { .. } | StoreError::Corrupt { .. } => {
            Some(e.to_string())
        }
        _ => None,
    }
}

/// Why the store's database file is damaged, if it is (see `store::health`). A store a
/// server keeps has no file here: the server answers for its own (its errors come as errors).
pub(super) fn damaged(store: &crate::store::Store) -> Option<String> {
    let db = store.database_file()?;
    let facts = crate::store::health::facts(db).ok().flatten();
    let why = match facts {
        Some(f) => crate::store::health::damage(&f)?,
        None => "it is gone (deleted or moved)".to_string(),
    };
    Some(format!("database {} is damaged: {why}", db.display()))
}

impl<F: Forge + 'static> Supervisor<'_, F> {
    /// Stops the worker, says why in the log and to the alert sinks directly (the outbox is
    /// in the state that cannot be written), records an event if space comes back soon, and
    /// returns the error the process exits with (3, unavailable).
    pub(super) fn stop_for_storage(&mut self, why: String) -> SuperviseError {
        let id = self.w.id.clone();
        tracing::error!(
            worker = %id,
            "{why}: this supervisor cannot record its worker's progress, release its lock or record DONE; stopping the worker (its lease lapses; `orch resume` takes it over once the state directory is writable again)"
        );
        self.stop_worker(Stop::Terminate);
        let message = format!(
            "{why}. The supervisor of {id} stopped its worker (nothing it does could be recorded); the chain lock stays taken. Free space (or make the state directory writable), then run `orch resume`: the worker continues from its last recorded state. This alert was sent directly to the sinks: the alert outbox could not be written."
        );
        let alert = crate::store::workers::AlertRecord {
            id: 0,
            at_ms: now_ms(),
            severity: "critical".into(),
            worker_id: Some(id.clone()),
            repo: Some(self.w.repo.clone()),
            kind: "storage".into(),
            message,
            repeats: 1,
            resolved_ms: None,
        };
        for (sink, result) in crate::app::deliver::send_direct(self.env.config, &alert) {
            match result {
                Ok(()) => tracing::info!(worker = %id, sink, "storage alert sent directly"),
                Err(e) => {
                    tracing::error!(worker = %id, sink, error = %e, "storage alert not delivered")
                }
            }
        }
        // Noted in place (no free space needed) for whoever writes the store next, then
        // recorded — an event and a resolved alert — once it can be written (the disk may be
        // freed while this waits); else `orch resume` records the note (`storage_note`).
        let note = crate::app::storage_note::Note {
            at_ms: now_ms(),
            why: why.clone(),
        };
        if let Err(e) = crate::app::storage_note::leave(self.env.state_dir, &id, &note) {
            tracing::error!(worker = %id, error = %e, "the storage failure could not be noted for `orch resume`");
        }
        let deadline = Instant::now() + RECORD_FOR;
        // (Never into a damaged file: it is rebuilt from the checkpoints, not written to.)
        while damaged(&self.store).is_none() {
            let w = self.w.clone();
            match crate::app::storage_note::take(&mut self.store, self.env.state_dir, &w).and_then(
                |taken| {
                    if taken {
                        return Ok(());
                    }
                    // No note (it could not be written): the stop is recorded all the same.
                    crate::app::storage_note::record(&mut self.store, self.env.state_dir, &w, &note)
                        .map(|_| ())
                },
            ) {
                Ok(()) => {
                    tracing::info!(worker = %id, "storage failure recorded as an event and an alert");
                    break;
                }
                Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_secs(1)),
                Err(e) => {
                    tracing::error!(worker = %id, error = %e, "the storage failure could not be recorded: `orch resume` records it once the state is writable");
                    break;
                }
            }
        }
        SuperviseError::Storage(why)
    }
}
