//! `land: direct` on the local forge: a worker's push to the base branch may not touch the
//! protected paths (`ci.protected_paths`). Under the other policies the worker's branch is
//! judged by CI with the base's protected files overlaid (`runner::overlay_protected`) and a
//! change to them is held for `orch approve` before anything lands; under `direct` the push
//! *is* the landing, and the base's run would use the pushed scripts — the worker would grade
//! itself and the base would already have moved. So the `pre-receive` hook refuses such a push
//! before the base moves: the base's protected files stay the ones CI judged before the push.

use super::branches::{PusherRecord, RefUpdate};
use crate::config::Config;
use std::path::Path;
use std::process::Command;

/// Why each update of a direct worker's push to its base branch that changes protected files
/// is refused; empty when `rec`'s branch is not the repository's base branch (the other
/// policies: `branches::refusals` judges those) or nothing protected changes. The commits are
/// read in the hook's own repository (its quarantine holds the pushed objects).
pub fn refusals(
    config_file: &Path,
    who: &str,
    rec: &PusherRecord,
    repo_name: &str,
    updates: &[RefUpdate],
) -> Vec<String> {
    if rec.repo != repo_name || rec.branch.starts_with("orch/") {
        return Vec::new();
    }
    let base_ref = format!("refs/heads/{}", rec.branch);
    let to_base: Vec<&RefUpdate> = updates.iter().filter(|u| u.git_ref == base_ref).collect();
    if to_base.is_empty() {
        return Vec::new();
    }
    // Fails closed: a push that cannot be judged does not move the base.
    let config = match Config::load(config_file) {
        Ok(c) => c,
        Err(e) => {
            return vec![format!(
                "{base_ref}: cannot read orch's configuration {} to check ci.protected_paths ({e}): the base does not move",
                config_file.display()
            )];
        }
    };
    let Some(repo) = config.repo(repo_name) else {
        return vec![format!(
            "{base_ref}: repository {repo_name} is not in {}: the base does not move",
            config_file.display()
        )];
    };
    if repo.protected_paths.is_empty() || repo.branch != rec.branch {
        return Vec::new();
    }
    let list: Vec<String> = repo
        .protected_paths
        .iter()
        .map(ToString::to_string)
        .collect();
    to_base
        .into_iter()
        .filter_map(|u| {
            let why = match changed(&u.old, &u.new) {
                Ok(files) => {
                    let touched =
                        crate::protect::touched(&repo.protected_paths, files.iter().map(String::as_str));
                    if touched.is_empty() {
                        return None;
                    }
                    format!(
                        "worker {who} (land: direct) may not change protected paths on {}: {} (ci.protected_paths: {}). CI runs them, so the worker would grade itself; an operator pushes such a change",
                        rec.branch,
                        touched.join(", "),
                        list.join(", ")
                    )
                }
                Err(e) => format!(
                    "cannot list the files the push changes, to check ci.protected_paths ({}): {e}",
                    list.join(", ")
                ),
            };
            Some(format!("{base_ref}: {why}"))
        })
        .collect()
}

/// The files `new` changes against `old` (all of `new`'s files when `old` is the zero id: the
/// branch is created); nothing for a deletion (refused elsewhere).
fn changed(old: &str, new: &str) -> Result<Vec<String>, String> {
    let zero = |s: &str| s.bytes().all(|b| b == b'0');
    if zero(new) {
        return Ok(Vec::new());
    }
    let args: Vec<&str> = if zero(old) {
        vec!["ls-tree", "-r", "-z", "--name-only", new]
    } else {
        vec!["diff", "--name-only", "-z", "--no-renames", old, new, "--"]
    };
    let out = Command::new("git")
        .args(&args)
        .output()
        .map_err(|e| format!("cannot run git: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "git {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .split('\0')
        .filter(|n| !n.is_empty())
        .map(str::to_string)
        .collect())
}
