//! The protected paths of a run's checkout (`ci.protected_paths`) put back to the base
//! branch's versions before any job runs: a pushed change to the scripts CI runs must not
//! grade itself.

use super::db::RunRow;
use super::git;
use crate::config::Config;
use std::path::Path;

/// Puts the repository's protected paths (`ci.protected_paths`) back to the base branch's
/// versions — the base as this forge has it — before any job runs: a pushed change to the
/// scripts CI runs (`ci/test.sh` → `exit 0`) must not grade itself. A protected file the push
/// added is removed; one it changed or deleted is restored. Returns the line each job log
/// starts with (`None`: nothing is protected, the push changes none of it, or this is the
/// base branch's own run).
pub(super) fn overlay_protected(
    config: &Config,
    run: &RunRow,
    work: &Path,
) -> Result<Option<String>, String> {
    let Some(repo) = config.repo(&run.repo) else {
        return Ok(None);
    };
    if repo.protected_paths.is_empty() || run.git_ref == format!("refs/heads/{}", repo.branch) {
        return Ok(None);
    }
    let base_ref = format!("refs/remotes/origin/{}^{{commit}}", repo.branch);
    let Ok(base) = git(
        Some(work),
        ["rev-parse", "--verify", "-q", base_ref.as_str()],
    ) else {
        return Ok(Some(format!(
            "orch: the base branch {} is not on this forge: the protected paths ({}) run as pushed",
            repo.branch,
            protected_list(repo)
        )));
    };
    let base = base.trim().to_string();
    let list = |commit: &str| -> Result<Vec<String>, String> {
        let out = git(Some(work), ["ls-tree", "-r", "-z", "--name-only", commit])?;
        let names = out.split('\0').filter(|n| !n.is_empty());
        Ok(crate::protect::touched(&repo.protected_paths, names))
    };
    let in_base = list(&base)?;
    let pushed = list(&run.sha)?;
    let mut candidates: Vec<String> = in_base.iter().chain(&pushed).cloned().collect();
    candidates.sort();
    candidates.dedup();
    let differing: Vec<String> = if candidates.is_empty() {
        Vec::new()
    } else {
        let mut args = vec![
            "--literal-pathspecs",
            "diff",
            "--name-only",
            "-z",
            "--no-renames",
        ];
        args.extend([base.as_str(), run.sha.as_str(), "--"]);
        args.extend(candidates.iter().map(String::as_str));
        git(Some(work), args)?
            .split('\0')
            .filter(|n| !n.is_empty())
            .map(str::to_string)
            .collect()
    };
    let (restore, remove): (Vec<String>, Vec<String>) =
        differing.iter().cloned().partition(|f| in_base.contains(f));
    if !restore.is_empty() {
        let mut args = vec!["--literal-pathspecs", "checkout", "-q", base.as_str(), "--"];
        args.extend(restore.iter().map(String::as_str));
        git(Some(work), args)?;
    }
    for f in &remove {
        let path = work.join(f);
        if path.exists() || path.is_symlink() {
            std::fs::remove_file(&path).map_err(|e| format!("cannot remove {f}: {e}"))?;
        }
    }
    if differing.is_empty() {
        return Ok(None); // the pushed versions are the base's: nothing to say
    }
    let short = crate::sha::short(&base);
    let mut parts = Vec::new();
    if !restore.is_empty() {
        parts.push(format!("restored {}", restore.join(", ")));
    }
    if !remove.is_empty() {
        parts.push(format!(
            "removed {} (not on the base branch)",
            remove.join(", ")
        ));
    }
    let what = parts.join("; ");
    Ok(Some(format!(
        "orch: the protected paths ({}) run as the base branch {} has them at {short}: {what}",
        protected_list(repo),
        repo.branch
    )))
}

fn protected_list(repo: &crate::config::Repo) -> String {
    repo.protected_paths
        .iter()
        .map(|p| p.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}
