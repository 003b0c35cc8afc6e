//! Checking a worker's push before the state machine hears of it. The commit that counts is
//! the head of the worker's own branch on the forge — read by orch, never taken from the
//! worker — and it must be new work: not the base commit or in its history, not another
//! worker's push or in its history. A claim naming any other commit is refused.

use crate::config::Config;
use crate::gitops;
use crate::milestone::{Channel, Event};
use crate::sha::Sha;
use crate::store::now_ms;
use crate::store::workers::WorkerRecord;
use std::path::Path;

/// The head of the worker's branch on the forge as the CI thread read it: `Ok(None)` when the
/// branch is not there, `Err` with why it could not be read.
pub type ForgeHead = Result<Option<Sha>, String>;

/// The event a PUSHED_TO_CI claim for `claimed` (None: whatever the branch head is) becomes:
/// a verified `Push` of the branch head, or a `PushRejected` saying why. `others`: what the
/// other workers of the repository pushed (worker, SHA).
pub fn verify_push(
    config: &Config,
    w: &WorkerRecord,
    claimed: Option<String>,
    head: ForgeHead,
    others: &[(String, String)],
    via: Channel,
) -> Event {
    let spec = claimed
        .clone()
        .unwrap_or_else(|| "the branch head".to_string());
    let rejected = |reason: String| Event::PushRejected {
        claimed: spec.clone(),
        reason,
        via,
    };
    let head = match head {
        Ok(Some(h)) => h,
        Ok(None) => {
            return rejected(format!(
                "branch {} is not on the forge: push it (git push {} HEAD:{})",
                w.branch, w.remote, w.branch
            ));
        }
        Err(e) => {
            return rejected(format!(
                "the head of branch {} cannot be read from the forge: {e}",
                w.branch
            ));
        }
    };
    if let Some(c) = &claimed
        && !names(Path::new(&w.worktree), c, &head)
    {
        return rejected(format!(
            "the head of branch {} on the forge is {}, not {c}: a claim must name the commit at the head of the worker's own branch",
            w.branch,
            head.short()
        ));
    }
    push_of(config, w, &head, others, via).unwrap_or_else(rejected)
}

/// The `Push` of branch head `head` if it is new work of `w` (see the module doc), pushed at
/// its commit time (never in the future), with the protected files its change touches; why
/// not otherwise.
pub fn push_of(
    config: &Config,
    w: &WorkerRecord,
    head: &Sha,
    others: &[(String, String)],
    via: Channel,
) -> Result<Event, String> {
    new_work(w, head, others)?;
    let wt = Path::new(&w.worktree);
    let pushed_ms = gitops::commit_time_ms(wt, head).unwrap_or_else(|_| now_ms());
    Ok(Event::Push {
        sha: head.clone(),
        pushed_ms: pushed_ms.min(now_ms()),
        via,
        protected: crate::app::protect::touched(config, w, head),
        secrets: crate::app::protect::secrets(config, w, head),
    })
}

/// Whether `head` is new work of `w` (see the module doc); why not otherwise.
pub fn new_work(w: &WorkerRecord, head: &Sha, others: &[(String, String)]) -> Result<(), String> {
    match gitops::why_not_new_work(Path::new(&w.worktree), &w.remote, head, &w.base_sha, others) {
        Ok(None) => Ok(()),
        Ok(Some(why)) => Err(why),
        Err(e) => Err(format!("cannot check {}: {e}", head.short())),
    }
}

/// Whether the worker's `claimed` names `head`: a SHA prefix of at least 7 hex digits, or a
/// name (such as HEAD) that resolves to it in the worker's worktree.
fn names(worktree: &Path, claimed: &str, head: &Sha) -> bool {
    let c = claimed.trim().to_ascii_lowercase();
    if c.len() >= 7 && c.len() <= 64 && c.bytes().all(|b| b.is_ascii_hexdigit()) {
        return head.starts_with(&c);
    }
    gitops::resolve(worktree, claimed).is_ok_and(|full| *head == full)
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
