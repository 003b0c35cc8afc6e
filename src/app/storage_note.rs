//! The note a supervisor stopped for storage leaves for whoever can write the store later.
//!
//! A full (or damaged) state directory takes the store with it: the supervisor sends its
//! `storage` alert to the sinks directly and tries for a while to record the stop, then exits.
//! If space comes back only after that, nothing in the store would say the worker was ever
//! stopped. So each supervisor allocates a small note file in its session directory while
//! the disk has room (`prepare`), and on a storage failure overwrites it in place — blocks
//! already allocated need no free space (`leave`). Whoever next writes the store (the
//! supervisor itself if space comes back in time, else `orch resume`) records the note as a
//! `storage` event and a `storage` alert, once (`take`), and zeroes it. The alert is recorded
//! resolved: the state directory is writable again, and resume continues the worker; the
//! open alert was the one sent directly when it happened.

use crate::store::workers::{self as ws, AlertRecord, WorkerRecord};
use crate::store::{Store, StoreError, fmt_ms, now_ms};
use std::io::{Read, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

const NOTE: &str = "storage.note";
/// The note's size: its blocks are allocated up front; what is written never grows it.
const SIZE: usize = 4096;

fn path(state_dir: &Path, worker: &str) -> PathBuf {
    crate::checkpoint::session_dir(state_dir, worker).join(NOTE)
}

/// What a stopped supervisor leaves: when, and why the state could not be written.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Note {
    pub at_ms: i64,
    pub why: String,
}

/// Allocates `worker`'s note (zeros, synced) unless it is there already — a note left by a
/// previous supervisor is kept until it is recorded. Without room it is left out (logged).
pub fn prepare(state_dir: &Path, worker: &str) {
    let p = path(state_dir, worker);
    if std::fs::metadata(&p).is_ok_and(|m| m.len() == SIZE as u64) {
        return;
    }
    let made = std::fs::File::create(&p)
        .and_then(|mut f| f.write_all(&[0u8; SIZE]).and_then(|()| f.sync_all()));
    if let Err(e) = made {
        tracing::warn!(worker, path = %p.display(), error = %e, "cannot allocate the storage note: a storage failure that outlasts the supervisor will be recorded by no one");
        let _ = std::fs::remove_file(&p);
    }
}

/// Writes `note` over `worker`'s allocated note, in place (never creating or growing it).
pub fn leave(state_dir: &Path, worker: &str, note: &Note) -> std::io::Result<()> {
    let mut note = note.clone();
    let mut text = serde_json::to_vec(&note).map_err(std::io::Error::other)?;
    while text.len() > SIZE - 1 && !note.why.is_empty() {
        let mut keep = note.why.len() / 2;
        while !note.why.is_char_boundary(keep) {
            keep -= 1;
        }
        note.why.truncate(keep);
        text = serde_json::to_vec(&note).map_err(std::io::Error::other)?;
    }
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(path(state_dir, worker))?;
    f.write_all_at(&text, 0)?;
    f.sync_data()
}

/// The note `worker`'s supervisor left, if one is pending.
fn read(state_dir: &Path, worker: &str) -> Option<Note> {
    let mut bytes = Vec::new();
    std::fs::File::open(path(state_dir, worker))
        .and_then(|mut f| f.read_to_end(&mut bytes))
        .ok()?;
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    if end == 0 {
        return None;
    }
    match serde_json::from_slice(&bytes[..end]) {
        Ok(n) => Some(n),
        Err(e) => {
            tracing::warn!(worker, error = %e, "unreadable storage note: ignored");
            None
        }
    }
}

fn clear(state_dir: &Path, worker: &str) {
    let cleared = std::fs::OpenOptions::new()
        .write(true)
        .open(path(state_dir, worker))
        .and_then(|f| f.write_all_at(&[0u8; SIZE], 0).and_then(|()| f.sync_data()));
    if let Err(e) = cleared {
        tracing::warn!(worker, error = %e, "cannot clear the storage note (it is recorded once only)");
    }
}

/// Records `note` about `w` — a `storage` event and a resolved `storage` alert, in one
/// transaction — unless it is recorded already (the supervisor and a resume may both try).
/// True when recorded now.
pub fn record(
    store: &mut Store,
    state_dir: &Path,
    w: &WorkerRecord,
    note: &Note,
) -> Result<bool, StoreError> {
    let detail = format!("supervisor stopped at {}: {}", fmt_ms(note.at_ms), note.why);
    let message = format!(
        "{} (at {}): the supervisor of {} stopped its worker, since nothing it did could be recorded. Recorded once the state directory was writable again: `orch resume` continues the worker from its last recorded state (cron runs it; run it if no cron does).",
        note.why,
        fmt_ms(note.at_ms),
        w.id
    );
    let now = now_ms();
    let alert = AlertRecord {
        id: 0,
        at_ms: now,
        severity: "critical".into(),
        worker_id: Some(w.id.clone()),
        repo: Some(w.repo.clone()),
        kind: "storage".into(),
        message,
        repeats: 1,
        resolved_ms: None,
    };
    let milestone = w.milestone();
    let recorded = store.write(|tx| {
        if ws::worker_events(tx, &w.id)?
            .iter()
            .any(|e| e.kind == "storage" && e.detail == detail)
        {
            return Ok(None);
        }
        ws::add_event(tx, &w.id, "storage", milestone, &detail)?;
        let id = match crate::store::alerts::record(tx, &alert, 0)? {
            crate::store::alerts::Recorded::New(id) => Some(id),
            crate::store::alerts::Recorded::Repeat { .. } => None,
        };
        crate::store::alerts::resolve(tx, &w.id, "storage", now)?;
        Ok(Some(id))
    })?;
    let Some(id) = recorded else {
        return Ok(false);
    };
    if let Some(id) = id {
        crate::alerts::append_jsonl(
            state_dir,
            &[AlertRecord {
                id,
                resolved_ms: Some(now),
                ..alert
            }],
        );
    }
    Ok(true)
}

/// Records the note `w`'s supervisor left, if any, and clears it. True when recorded now.
pub fn take(store: &mut Store, state_dir: &Path, w: &WorkerRecord) -> Result<bool, StoreError> {
    let Some(note) = read(state_dir, &w.id) else {
        return Ok(false);
    };
    let recorded = record(store, state_dir, w, &note)?;
    clear(state_dir, &w.id);
    Ok(recorded)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_is_written_in_place_read_back_and_cleared() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("w1")).unwrap();
        assert_eq!(read(dir.path(), "w1"), None);
        // Without an allocated note nothing is created on a full disk's behalf.
        let note = Note {
            at_ms: 7,
            why: "no space left (ENOSPC)".into(),
        };
        assert!(leave(dir.path(), "w1", &note).is_err());
        prepare(dir.path(), "w1");
        assert_eq!(read(dir.path(), "w1"), None, "allocated: zeros");
        leave(dir.path(), "w1", &note).unwrap();
        let p = path(dir.path(), "w1");
        assert_eq!(std::fs::metadata(&p).unwrap().len(), SIZE as u64);
        prepare(dir.path(), "w1");
        assert_eq!(
            read(dir.path(), "w1"),
            Some(note),
            "kept by the next supervisor"
        );
        let long = Note {
            at_ms: 8,
            why: "é".repeat(SIZE),
        };
        leave(dir.path(), "w1", &long).unwrap();
        let back = read(dir.path(), "w1").unwrap();
        assert!(back.why.len() < SIZE && long.why.starts_with(&back.why));
        assert_eq!(
            std::fs::metadata(&p).unwrap().len(),
            SIZE as u64,
            "never grown"
        );
        clear(dir.path(), "w1");
        assert_eq!(read(dir.path(), "w1"), None);
    }
}
