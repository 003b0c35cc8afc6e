//! Cleaning up what orch left in the user's clones: the worktree and the `orch/<id>` branch of
//! each DONE or CANCELLED worker whose commits are on the remote, and the `orch` remote of a
//! clone where nothing of orch's remains. Unpushed work is never removed: a worktree with
//! uncommitted changes or a branch with a commit the remote does not have is kept, with why.
//! A worker whose supervisor is alive is never touched.

use super::Loaded;
use crate::config::{ForgeKind, Repo};
use crate::gitops;
use crate::milestone::Milestone;
use crate::store::workers::WorkerRecord;
use crate::store::{Store, now_ms};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What gc did (or, with `dry_run`, would do) to one worker's leftovers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Worktree and branch removed (or to be removed).
    Remove,
    /// Left in place; `reason` says why.
    Keep,
    /// Removal was attempted and git refused or failed; `reason` says why.
    Failed,
}

/// One DONE or CANCELLED worker that still has something in its clone.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct WorkerGc {
    pub worker_id: String,
    pub repo: String,
    pub milestone: String,
    /// The clone it was made in; `null` when it cannot be known (its repository is no longer
    /// in repos.yaml and its worktree does not name it).
    pub clone: Option<String>,
    /// The worktree, when it is still there (registered or on disk).
    pub worktree: Option<String>,
    /// `orch/<id>`, when the branch still exists.
    pub branch: Option<String>,
    pub action: Action,
    pub reason: Option<String>,
}

/// The `orch` remote of one clone.
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct RemoteGc {
    pub repo: String,
    pub clone: String,
    pub remote: String,
    pub action: Action,
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct GcReport {
    pub dry_run: bool,
    pub workers: Vec<WorkerGc>,
    pub remotes: Vec<RemoteGc>,
    /// A remote could not be fetched (its work could not be checked, so it was kept): the
    /// command's answer is "unavailable", a retry may do more.
    pub unreachable: Vec<String>,
}

impl GcReport {
    /// Did removing anything fail (git refused, an I/O error)?
    pub fn any_failed(&self) -> bool {
        self.workers.iter().any(|w| w.action == Action::Failed)
            || self.remotes.iter().any(|r| r.action == Action::Failed)
    }
}

/// The prefix of every branch orch creates in a clone.
const BRANCH_PREFIX: &str = "orch/";

/// Cleans up (or with `dry_run` only lists) the leftovers of finished workers in `loaded`'s
/// clones. `store` is `None` where orch has no state yet (nothing to clean).
pub fn run(loaded: &Loaded, store: Option<&mut Store>, dry_run: bool) -> super::Result<GcReport> {
    let mut report = GcReport {
        dry_run,
        workers: Vec::new(),
        remotes: Vec::new(),
        unreachable: Vec::new(),
    };
    let Some(store) = store else {
        return Ok(report);
    };
    let workers = store.workers()?;
    let now = now_ms();
    // One fetch per clone and remote: Err(why) when it could not be fetched.
    let mut fetched: BTreeMap<(PathBuf, String), Result<(), String>> = BTreeMap::new();
    // Branches gc removes (or would remove) per clone, for the remote decision below.
    let mut removed_branches: BTreeMap<PathBuf, Vec<String>> = BTreeMap::new();
    for w in &workers {
        if !matches!(w.milestone(), Milestone::Done | Milestone::Cancelled) {
            continue;
        }
        let Some(repo) = loaded.config.repo(&w.repo) else {
            report.workers.extend(unconfigured(w, now));
            continue;
        };
        let Some(mut item) = inspect(w, repo) else {
            continue;
        };
        if w.supervised(now) {
            item.action = Action::Keep;
            item.reason = Some("its supervisor is still running".into());
            report.workers.push(item);
            continue;
        }
        let key = (repo.path.clone(), w.remote.clone());
        let fetch = fetched
            .entry(key)
            .or_insert_with(|| gitops::fetch(&repo.path, &w.remote).map_err(|e| e.to_string()))
            .clone();
        if let Err(why) = fetch {
            let msg = format!("remote {} of {}: {why}", w.remote, repo.path.display());
            if !report.unreachable.contains(&msg) {
                report.unreachable.push(msg);
            }
            item.action = Action::Keep;
            item.reason = Some(format!(
                "cannot fetch remote {} to check its commits are there",
                w.remote
            ));
            report.workers.push(item);
            continue;
        }
        match unpushed_work(w, &repo.path, &item) {
            Err(why) => {
                item.action = Action::Keep;
                item.reason = Some(why);
            }
            Ok(Some(why)) => {
                item.action = Action::Keep;
                item.reason = Some(why);
            }
            Ok(None) => {
                item.action = Action::Remove;
                if !dry_run && let Err(why) = remove(w, &repo.path, &item) {
                    item.action = Action::Failed;
                    item.reason = Some(why);
                }
                if item.action == Action::Remove {
                    removed_branches
                        .entry(repo.path.clone())
                        .or_default()
                        .push(w.local_branch());
                }
            }
        }
        report.workers.push(item);
    }
    if loaded.config.forge.kind == ForgeKind::Local {
        report.remotes = remotes(loaded, &workers, &removed_branches, dry_run);
    }
    Ok(report)
}

/// What is left of `w` in its clone; `None` when nothing is (already cleaned up).
fn inspect(w: &WorkerRecord, repo: &Repo) -> Option<WorkerGc> {
    let worktree = PathBuf::from(&w.worktree);
    let registered = gitops::worktrees(&repo.path)
        .map(|all| all.iter().any(|(_, p)| same_path(p, &worktree)))
        .unwrap_or(false);
    let has_worktree = registered || worktree.exists();
    let branch = gitops::branch_tip(&repo.path, &w.local_branch())
        .ok()
        .flatten();
    if !has_worktree && branch.is_none() {
        return None;
    }
    Some(WorkerGc {
        worker_id: w.id.clone(),
        repo: w.repo.clone(),
        milestone: w.milestone().as_str().to_string(),
        clone: Some(repo.path.display().to_string()),
        worktree: has_worktree.then(|| w.worktree.clone()),
        branch: branch.map(|_| w.local_branch()),
        action: Action::Keep,
        reason: None,
    })
}

/// A finished worker of a repository repos.yaml no longer names: gc has no clone to fetch
/// into and judge its work by, so it keeps everything and says how to clean up by hand. Its
/// worktree names its clone; `None` once the worktree is gone (gc removed it while the
/// repository was configured, or someone did by hand), so a repository removed long ago is
/// not reported on every run.
fn unconfigured(w: &WorkerRecord, now: i64) -> Option<WorkerGc> {
    let worktree = Path::new(&w.worktree);
    if !worktree.is_dir() {
        return None;
    }
    let clone = gitops::git(
        worktree,
        &["rev-parse", "--path-format=absolute", "--git-common-dir"],
    )
    .ok()
    .map(PathBuf::from)
    .map(|dir| match dir.parent() {
        Some(parent) if dir.file_name() == Some(std::ffi::OsStr::new(".git")) => {
            parent.to_path_buf()
        }
        _ => dir,
    });
    let branch = match &clone {
        Some(c) => gitops::branch_tip(c, &w.local_branch())
            .ok()
            .flatten()
            .map(|_| w.local_branch()),
        // Unknown: name it anyway, it may be there.
        None => Some(w.local_branch()),
    };
    let how = match &clone {
        Some(c) => {
            let c = c.display();
            let mut how = format!("git -C {c} worktree remove {}", w.worktree);
            if let Some(b) = &branch {
                how.push_str(&format!(" && git -C {c} branch -D {b}"));
            }
            how
        }
        None => format!(
            "rm -r {}, then `git branch -D {}` in its clone",
            w.worktree,
            w.local_branch()
        ),
    };
    Some(WorkerGc {
        worker_id: w.id.clone(),
        repo: w.repo.clone(),
        milestone: w.milestone().as_str().to_string(),
        clone: clone.map(|c| c.display().to_string()),
        worktree: Some(w.worktree.clone()),
        branch,
        action: Action::Keep,
        reason: Some(if w.supervised(now) {
            "its supervisor is still running".into()
        } else {
            format!(
                "repository {} is no longer in repos.yaml; clean up by hand (nothing was fetched: check its commits are pushed first): {how}",
                w.repo
            )
        }),
    })
}

fn same_path(a: &Path, b: &Path) -> bool {
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    a == b || canon(a) == canon(b)
}

/// Why `w`'s leftovers hold work that exists nowhere else, if they do: uncommitted changes in
/// its worktree, or commits (of its branch or its worktree's HEAD) the remote does not have.
/// An error reading them is a reason to keep too.
fn unpushed_work(
    w: &WorkerRecord,
    clone: &Path,
    item: &WorkerGc,
) -> Result<Option<String>, String> {
    let worktree = Path::new(&w.worktree);
    let mut tips = Vec::new();
    if worktree.exists() {
        let changes = gitops::uncommitted_changes(worktree)
            .map_err(|e| format!("cannot read the worktree's state: {e}"))?;
        if !changes.is_empty() {
            return Ok(Some(format!(
                "uncommitted changes in its worktree ({}: {})",
                plural(changes.len(), "file", "files"),
                changes
                    .iter()
                    .take(3)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        if let Ok(head) = gitops::head(worktree) {
            tips.push(head);
        }
    }
    if item.branch.is_some() {
        let elsewhere: Vec<PathBuf> = gitops::checked_out_in(clone, &w.local_branch())
            .map_err(|e| e.to_string())?
            .into_iter()
            .filter(|p| !same_path(p, worktree))
            .collect();
        if let Some(p) = elsewhere.first() {
            return Ok(Some(format!(
                "its branch is checked out in {}",
                p.display()
            )));
        }
    }
    if item.branch.is_some()
        && let Some(tip) =
            gitops::branch_tip(clone, &w.local_branch()).map_err(|e| e.to_string())?
    {
        tips.push(tip);
    }
    tips.dedup();
    let missing = gitops::commits_not_on_remote(clone, &tips, &w.remote, &w.base_sha)
        .map_err(|e| format!("cannot compare with remote {}: {e}", w.remote))?;
    if missing.is_empty() {
        return Ok(None);
    }
    Ok(Some(format!(
        "{} not on remote {} (newest {}): push or delete it yourself",
        plural(missing.len(), "commit", "commits"),
        w.remote,
        crate::sha::short(&missing[0])
    )))
}

/// Removes the worktree, then the branch (only while it still points where it was checked).
fn remove(w: &WorkerRecord, clone: &Path, item: &WorkerGc) -> Result<(), String> {
    let tip = gitops::branch_tip(clone, &w.local_branch()).map_err(|e| e.to_string())?;
    if item.worktree.is_some() {
        gitops::remove_worktree(clone, Path::new(&w.worktree)).map_err(|e| e.to_string())?;
    }
    if let Some(tip) = tip {
        gitops::delete_branch_at(clone, &w.local_branch(), &tip).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// The `orch` remote of each clone where nothing of orch's is left (no `orch/*` branch, once
/// this run's removals are counted, and no worktree in the state directory). Only a remote
/// that points at this state directory's local forge is orch's.
fn remotes(
    loaded: &Loaded,
    workers: &[WorkerRecord],
    removed: &BTreeMap<PathBuf, Vec<String>>,
    dry_run: bool,
) -> Vec<RemoteGc> {
    let forge = crate::forge::local::LocalForge::new(&loaded.state_dir, &loaded.config);
    let remote = super::spawn::LOCAL_REMOTE;
    let mut out = Vec::new();
    for repo in loaded.config.repos.iter() {
        // A worker still going (a spawn half-way included) may need the remote any moment.
        if workers
            .iter()
            .any(|w| w.repo == repo.name && !w.milestone().is_terminal())
        {
            continue;
        }
        let Ok(Some(url)) = gitops::remote_url(&repo.path, remote) else {
            continue;
        };
        if !same_path(Path::new(&url), &forge.remote_path(&repo.name)) {
            continue;
        }
        let gone = removed.get(&repo.path).cloned().unwrap_or_default();
        let left: Vec<String> = match gitops::branches_with_prefix(&repo.path, BRANCH_PREFIX) {
            Ok(b) => b.into_iter().filter(|b| !gone.contains(b)).collect(),
            Err(_) => continue,
        };
        let worktrees_left = gitops::worktrees(&repo.path)
            .map(|all| {
                all.iter()
                    .filter(|(_, p)| p.starts_with(&loaded.state_dir))
                    .filter(|(name, _)| !gone.contains(&format!("{BRANCH_PREFIX}{name}")))
                    .count()
            })
            .unwrap_or(1);
        if !left.is_empty() || worktrees_left > 0 {
            continue;
        }
        let mut item = RemoteGc {
            repo: repo.name.clone(),
            clone: repo.path.display().to_string(),
            remote: remote.to_string(),
            action: Action::Remove,
            reason: None,
        };
        if !dry_run && let Err(e) = gitops::remove_remote(&repo.path, remote) {
            item.action = Action::Failed;
            item.reason = Some(e.to_string());
        }
        out.push(item);
    }
    out
}

/// "1 file", "3 files".
fn plural(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}
