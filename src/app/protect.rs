//! Which protected files (`ci.protected_paths`) a worker's change touches, and their diff for
//! the operator who approves it. The change is the worker's commit against its merge base
//! with the base commit orch recorded at spawn — not a ref of the worktree, which the worker
//! can move (a base ref set to its own head would make every change look empty).

use crate::config::Config;
use crate::sha::Sha;
use crate::store::workers::WorkerRecord;
use std::path::Path;

/// The protected files the change at `head` touches, sorted (empty: none, or no protection
/// configured). When the change cannot be read, the answer fails closed: one entry saying
/// why, so that DONE waits for an operator who can look.
pub fn touched(config: &Config, w: &WorkerRecord, head: &Sha) -> Vec<String> {
    let Some(repo) = config.repo(&w.repo) else {
        return Vec::new(); // an unknown repository is refused long before a push
    };
    if repo.protected_paths.is_empty() {
        return Vec::new();
    }
    match crate::gitops::changed_since_merge_base(Path::new(&w.worktree), &w.base_sha, head) {
        Ok((_, changed)) => {
            crate::protect::touched(&repo.protected_paths, changed.iter().map(String::as_str))
        }
        Err(e) => vec![format!("(the files changed cannot be listed: {e})")],
    }
}

/// How many secrets a push's scan names at most (the first ones are enough to act on).
const SECRETS_NAMED: usize = 5;

/// The secrets the commits of the change at `head` add (`gitops::secrets_since_merge_base`:
/// the forge token this process holds, private key headers, well-known key formats), each as
/// `file:line: kind` — never the value. Like [`touched`], a change that cannot be read fails
/// closed: one entry saying why, and the push is FATAL until an operator looks.
pub fn secrets(config: &Config, w: &WorkerRecord, head: &Sha) -> Vec<String> {
    let token = crate::token::forge_token(config).ok().flatten();
    match crate::gitops::secrets_since_merge_base(
        Path::new(&w.worktree),
        &w.base_sha,
        head,
        token.as_ref(),
        SECRETS_NAMED,
    ) {
        Ok(found) => found.iter().map(ToString::to_string).collect(),
        Err(e) => vec![format!(
            "(the commits cannot be scanned for secrets: {})",
            token
                .as_ref()
                .map_or(e.to_string(), |t| t.scrub(&e.to_string()))
        )],
    }
}

/// What an operator sees before approving a change.
#[derive(Debug, Clone)]
pub struct ProtectedDiff {
    pub merge_base: String,
    /// The protected files the change touches.
    pub files: Vec<String>,
    /// `git diff --stat` of those files, and the patch (untrusted text: escape to print).
    pub stat: String,
    pub patch: String,
}

/// The diff of the protected files the change at `head` touches.
pub fn diff(config: &Config, w: &WorkerRecord, head: &Sha) -> Result<ProtectedDiff, String> {
    let repo = config
        .repo(&w.repo)
        .ok_or_else(|| format!("repository {} is not in {}", w.repo, config.file.display()))?;
    let wt = Path::new(&w.worktree);
    let (merge_base, changed) = crate::gitops::changed_since_merge_base(wt, &w.base_sha, head)
        .map_err(|e| format!("cannot read the change at {}: {e}", head.short()))?;
    let files = crate::protect::touched(&repo.protected_paths, changed.iter().map(String::as_str));
    let (stat, patch) = if files.is_empty() {
        (String::new(), String::new())
    } else {
        crate::gitops::diff_of_files(wt, &merge_base, head, &files)
            .map_err(|e| format!("cannot show the diff of {}: {e}", head.short()))?
    };
    Ok(ProtectedDiff {
        merge_base,
        files,
        stat,
        patch,
    })
}
