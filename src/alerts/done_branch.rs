//! A DONE worker's branch moved (or deleted) on the forge afterwards: one critical
//! `done_branch_moved` alert naming both commits, however orch came to see it — the local
//! forge's post-receive hook (a push), or a look at the forge's heads (`app::done_branch`:
//! `orch status` and `orch resume`), which is the only way to see a ref moved without a push
//! (`git update-ref` on the server, a restored backup, an admin's API call).

use crate::milestone::Milestone;
use crate::store::workers::{AlertRecord, WorkerRecord};
use crate::store::{Store, StoreError};
use std::path::Path;

pub const KIND: &str = "done_branch_moved";

/// The head `new` (None: deleted) if it is a move of DONE worker `w`'s own branch away from
/// its DONE commit: only `orch/<id>` branches (with `land: direct` the branch is the base,
/// which other landings move).
fn moved_head<'a>(w: &WorkerRecord, new: Option<&'a str>) -> Option<Option<&'a str>> {
    if w.progress.milestone != Milestone::Done || w.branch != format!("orch/{}", w.id) {
        return None;
    }
    let done = w.progress.tracked_sha.as_ref()?;
    let new = new.filter(|n| !n.bytes().all(|b| b == b'0'));
    match new {
        Some(n) if done.as_str().eq_ignore_ascii_case(n) => None,
        n => Some(n),
    }
}

/// Raises the alert for `w`'s branch now at `new` (None or all zeros: deleted), unless it is
/// no move of a DONE branch, or this very head was alerted already (a push seen by the hook
/// and then again by a look: one alert per head, never one per look). Its message, when one
/// was raised.
pub fn raise(
    store: &mut Store,
    state_dir: &Path,
    w: &WorkerRecord,
    new: Option<&str>,
) -> Result<Option<String>, StoreError> {
    let (Some(new), Some(done)) = (moved_head(w, new), w.progress.tracked_sha.as_ref()) else {
        return Ok(None);
    };
    let (what, needle) = match new {
        Some(n) => {
            let short = crate::sha::short_to(n, 12).to_ascii_lowercase();
            (format!("moved to {short}"), short)
        }
        None => ("deleted".to_string(), "deleted".to_string()),
    };
    let message = format!(
        "worker {id} is DONE at {}, and its branch {branch} on {} was {what} afterwards: only the verified commit {} ever lands (never the branch's new head), and before its landing moves the base its supervisor takes DONE back (BLOCKED); find out who moved it",
        done.short(),
        w.repo,
        done.short(),
        id = w.id,
        branch = w.branch,
    );
    let alert = AlertRecord {
        id: 0,
        at_ms: crate::store::now_ms(),
        severity: "critical".into(),
        worker_id: Some(w.id.clone()),
        repo: Some(w.repo.clone()),
        kind: KIND.into(),
        message: message.clone(),
        repeats: 1,
        resolved_ms: None,
    };
    let recorded = store.write(|tx| {
        if crate::store::alerts::mentioned(tx, &w.id, KIND, &needle)? {
            return Ok(None);
        }
        // A head not told yet is news even within the de-duplication window (moved, then
        // deleted): never only a repeat count on the alert of another head.
        crate::store::alerts::record(tx, &alert, 0).map(Some)
    })?;
    match recorded {
        None => Ok(None),
        Some(crate::store::alerts::Recorded::New(aid)) => {
            super::append_jsonl(state_dir, &[AlertRecord { id: aid, ..alert }]);
            Ok(Some(message))
        }
        Some(_) => Ok(Some(message)),
    }
}
