//! Checking a worker's PUSHED_TO_CI claim before the state machine hears of it: the SHA (or
//! HEAD) must resolve in the worker's worktree and be on a branch of its remote.

use crate::gitops;
use crate::milestone::{Channel, Event};
use crate::sha::Sha;
use crate::store::now_ms;
use crate::store::workers::WorkerRecord;
use std::path::Path;

/// The event a PUSHED_TO_CI claim for `claimed` (None: HEAD) becomes: a verified `Push`, or a
/// `PushRejected` saying why.
pub fn verify_push(w: &WorkerRecord, claimed: Option<String>, via: Channel) -> Event {
    let wt = Path::new(&w.worktree);
    let spec = claimed.unwrap_or_else(|| "HEAD".to_string());
    let rejected = |reason: String| Event::PushRejected {
        claimed: spec.clone(),
        reason,
        via,
    };
    let full = match gitops::resolve(wt, &spec) {
        Ok(s) => s,
        Err(e) => return rejected(e.to_string()),
    };
    if let Err(e) = gitops::fetch(wt, &w.remote) {
        return rejected(format!(
            "could not fetch {} to verify the push: {e}",
            w.remote
        ));
    }
    match gitops::on_remote(wt, &w.remote, &full) {
        Ok(Some(_)) => {
            let pushed_ms = gitops::commit_time_ms(wt, &full).unwrap_or_else(|_| now_ms());
            Event::Push {
                sha: Sha::from(full),
                pushed_ms: pushed_ms.min(now_ms()),
                via,
            }
        }
        Ok(None) => rejected(format!(
            "commit {full} is not on any branch of remote {}",
            w.remote
        )),
        Err(e) => rejected(e.to_string()),
    }
}

/// Cuts `s` to at most `max` bytes (on a character boundary), marking the cut.
pub fn truncate(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}
