//! Cleaning up what orch left in the user's clones: the worktree and the `orch/<id>` branch of
//! each DONE or CANCELLED worker whose commits are on the remote, and the `orch` remote of a
//! clone where nothing of orch's remains. Unpushed work is never removed: a worktree with
//! uncommitted changes or a branch with a commit the remote does not have is kept, with why.
//! A worker whose supervisor is alive is never touched.
//!
//! Then the history's retention: ended workers older than `history.keep` lose their records
//! (`prune`, with `store::history`), unless something still needs them.

use super::Loaded;
use crate::config::Repo;
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
    /// The history pruned after `history.keep`.
    pub history: HistoryGc,
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
/// clones, then prunes the history older than `history.keep`. `store` is `None` where orch
/// has no state yet (nothing to clean).
///
/// Only ended workers not yet found clean are looked at (`cleaned_ms`, set when nothing of a
/// worker is left in its clone), so a run's cost follows the workers that ended since the last
/// one, not the whole history.
pub fn run(loaded: &Loaded, store: Option<&mut Store>, dry_run: bool) -> super::Result<GcReport> {
    let mut report = GcReport {
        dry_run,
        workers: Vec::new(),
        remotes: Vec::new(),
        unreachable: Vec::new(),
        history: HistoryGc::new(loaded.config.history.keep, now_ms()),
    };
    let Some(store) = store else {
        return Ok(report);
    };
    let (workers, live) = store.read(|tx| {
        Ok((
            crate::store::history::uncleaned(tx)?,
            crate::store::workers::live_workers(tx)?,
        ))
    })?;
    let now = now_ms();
    // Workers nothing of which is (or, after this run, will be) left in their clone.
    let mut clean: Vec<String> = Vec::new();
    // One fetch per clone and remote: Err(why) when it could not be fetched.
    let mut fetched: BTreeMap<(PathBuf, String), Result<(), String>> = BTreeMap::new();
    // Branches gc removes (or would remove) per clone, for the remote decision below.
    let mut removed_branches: BTreeMap<PathBuf, Vec<String>> = BTreeMap::new();
    for w in &workers {
        let removable = matches!(w.milestone(), Milestone::Done | Milestone::Cancelled);
        let Some(repo) = loaded.config.repo(&w.repo) else {
            match unconfigured(w, now) {
                Some(item) if removable => report.workers.push(item),
                Some(_) => {}
                None => clean.push(w.id.clone()),
            }
            continue;
        };
        let Some(mut item) = inspect(w, repo) else {
            clean.push(w.id.clone());
            continue;
        };
        if !removable {
            continue; // FAILED: its worktree is left for a person to look at
        }
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
                    clean.push(w.id.clone());
                    removed_branches
                        .entry(repo.path.clone())
                        .or_default()
                        .push(w.local_branch());
                }
            }
        }
        report.workers.push(item);
    }
    if !dry_run && !clean.is_empty() {
        store.write(|tx| {
            for id in &clean {
                crate::store::history::mark_cleaned(tx, id, now)?;
            }
            Ok(())
        })?;
    }
    if crate::forge::keeps_repositories_here(&loaded.config) {
        report.remotes = remotes(loaded, &live, &removed_branches, dry_run);
    }
    report.history = prune(loaded, store, &clean, dry_run)?;
    Ok(report)
}

/// What pruning the history did (or, with `dry_run`, would do).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct HistoryGc {
    /// `history.keep`, in seconds.
    pub keep_s: u64,
    /// Workers that ended before this may be pruned.
    #[schemars(extend("format" = "date-time"))]
    pub cutoff: String,
    /// Ended workers whose records went (or would go): database rows and session directory.
    pub pruned: Vec<PrunedWorker>,
    /// Workers old enough that were kept, and why.
    pub kept: Vec<KeptWorker>,
    /// Finished or cancelled waves pruned with their workers.
    pub waves: Vec<String>,
    /// Alerts whose delivery was over (every sink delivered) pruned with their workers or
    /// for their age, and their delivered outbox rows.
    pub alerts: usize,
    pub deliveries: usize,
}

impl HistoryGc {
    fn new(keep: std::time::Duration, now: i64) -> Self {
        HistoryGc {
            keep_s: keep.as_secs(),
            cutoff: crate::store::fmt_ms(now - keep.as_millis() as i64),
            pruned: Vec::new(),
            kept: Vec::new(),
            waves: Vec::new(),
            alerts: 0,
            deliveries: 0,
        }
    }
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct PrunedWorker {
    pub worker_id: String,
    pub repo: String,
    pub milestone: String,
    #[schemars(extend("format" = "date-time"))]
    pub ended_at: String,
    /// Its session directory (removed with it).
    pub session: String,
}

#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct KeptWorker {
    pub worker_id: String,
    pub repo: String,
    pub milestone: String,
    pub reason: String,
}

/// Prunes the records of workers that ended before `history.keep` ago: never one holding a
/// chain lock, one with anything left in its clone (its worktree may hold work), or one a wave
/// not finished (or finished within `keep`) names — a wave goes whole, with its workers.
/// Alerts whose delivery is not over stay (their delivery reads only their own rows). The
/// files go first (the checkpoint, which `resume --from-checkpoints` would rebuild the worker
/// from, and the session directory), then the rows in one transaction: a crash in between
/// leaves rows the next run prunes, never files without a row the database knows.
fn prune(
    loaded: &Loaded,
    store: &mut Store,
    clean_now: &[String],
    dry_run: bool,
) -> super::Result<HistoryGc> {
    use crate::store::history as h;
    let now = now_ms();
    let keep = loaded.config.history.keep;
    let mut out = HistoryGc::new(keep, now);
    let cutoff = now - keep.as_millis().min(i64::MAX as u128) as i64;
    let candidates = store.read(|tx| h::candidates(tx, cutoff))?;
    let mut why_kept: BTreeMap<String, String> = BTreeMap::new();
    for c in &candidates {
        let id = &c.worker.id;
        if c.holds_lock {
            why_kept.insert(
                id.clone(),
                "it holds a chain lock (orch release --force)".into(),
            );
        } else if !c.cleaned && !clean_now.contains(id) {
            why_kept.insert(
                id.clone(),
                "its worktree or branch is still in its clone (orch gc removes a DONE or CANCELLED worker's once its commits are on the remote; a FAILED one's is left to you)".into(),
            );
        }
    }
    // A wave goes whole: when it finished or was cancelled before the cutoff and every worker
    // it names may go.
    let by_id: BTreeMap<&str, &h::Candidate> = candidates
        .iter()
        .map(|c| (c.worker.id.as_str(), c))
        .collect();
    let mut waves: BTreeMap<String, Option<Vec<String>>> = BTreeMap::new();
    for c in &candidates {
        for wave in &c.waves {
            if !waves.contains_key(wave) {
                let members = store.read(|tx| h::wave_done_before(tx, wave, cutoff))?;
                waves.insert(wave.clone(), members);
            }
        }
    }
    let mut waves_pruned = Vec::new();
    for (wave, members) in &waves {
        let whole = members.as_ref().is_some_and(|m| {
            m.iter().all(|id| {
                by_id
                    .get(id.as_str())
                    .is_some_and(|_| !why_kept.contains_key(id))
            })
        });
        if whole {
            waves_pruned.push(wave.clone());
            continue;
        }
        let reason = match members {
            None => format!("wave {wave} is in progress or ended within history.keep"),
            Some(_) => format!("wave {wave} has a worker that is kept"),
        };
        for id in members.iter().flatten() {
            why_kept.entry(id.clone()).or_insert_with(|| reason.clone());
        }
        for c in candidates.iter().filter(|c| c.waves.contains(wave)) {
            why_kept
                .entry(c.worker.id.clone())
                .or_insert_with(|| reason.clone());
        }
    }
    let mut going = Vec::new();
    for c in &candidates {
        let w = &c.worker;
        match why_kept.get(&w.id) {
            Some(reason) => out.kept.push(KeptWorker {
                worker_id: w.id.clone(),
                repo: w.repo.clone(),
                milestone: w.milestone().as_str().to_string(),
                reason: reason.clone(),
            }),
            None => {
                out.pruned.push(PrunedWorker {
                    worker_id: w.id.clone(),
                    repo: w.repo.clone(),
                    milestone: w.milestone().as_str().to_string(),
                    ended_at: crate::store::fmt_ms(w.ended_ms.unwrap_or(w.updated_ms)),
                    session: super::supervisor::session_dir(&loaded.state_dir, &w.id)
                        .display()
                        .to_string(),
                });
                going.push(w);
            }
        }
    }
    out.waves = waves_pruned.clone();
    let delete = |tx: &crate::store::sql::Tx| {
        let mut d = h::Deleted::default();
        let mut kept = Vec::new();
        for w in &going {
            if !h::delete_worker(tx, &w.id, &mut d)? {
                kept.push(w.id.clone());
            }
        }
        for wave in &waves_pruned {
            h::delete_wave(tx, wave)?;
        }
        let (a, dl) = h::delete_old_repo_alerts(tx, cutoff)?;
        d.alerts += a;
        d.deliveries += dl;
        Ok((d, kept))
    };
    if dry_run {
        // The same deletions in a transaction that is never committed (`read` rolls back):
        // the counts are exactly what a run would delete.
        let (d, _) = store.read(delete)?;
        out.alerts = d.alerts;
        out.deliveries = d.deliveries;
        return Ok(out);
    }
    for wave in &waves_pruned {
        // A rebuild would give back a pruned wave whose workers it no longer has.
        let _ = std::fs::remove_file(crate::checkpoint::waves::path_for(&loaded.state_dir, wave));
    }
    for w in &going {
        let _ = std::fs::remove_file(crate::checkpoint::path_for(&loaded.state_dir, w));
        let session = super::supervisor::session_dir(&loaded.state_dir, &w.id);
        if let Err(e) = std::fs::remove_dir_all(&session)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(worker = %w.id, error = %e, "could not remove its session directory");
        }
    }
    let deleted = store.write(|tx| {
        let r = delete(tx)?;
        if !going.is_empty() {
            // On a shared store the other nodes keep the checkpoint files of the workers
            // pruned here: said, so that none of them takes an emptied history for a
            // database that lost its contents.
            crate::store::set_meta(tx, crate::store::PRUNED_META, now)?;
        }
        Ok(r)
    })?;
    let (d, changed) = deleted;
    out.pruned.retain(|p| !changed.contains(&p.worker_id));
    out.alerts = d.alerts;
    out.deliveries = d.deliveries;
    Ok(out)
}

/// What is left of `w` in its clone; `None` when nothing is (already cleaned up).
fn inspect(w: &WorkerRecord, repo: &Repo) -> Option<WorkerGc> {
    let worktree = PathBuf::from(&w.worktree);
    let registered = gitops::worktrees(&repo.path)
        .map(|all| {
            all.iter()
                .any(|(_, p)| super::spawn::same_file(p, &worktree))
        })
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
            .filter(|p| !super::spawn::same_file(p, worktree))
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
    let worktree = Path::new(&w.worktree);
    if item.worktree.is_some() && worktree.join(".git").is_dir() {
        // A worker of another account's clone of its own (`worker.user`): its workspace
        // (clone, home, CI guide) goes whole; nothing of it is registered in the clone.
        let workspace = worktree.parent().unwrap_or(worktree);
        std::fs::remove_dir_all(workspace)
            .map_err(|e| format!("cannot remove {}: {e}", workspace.display()))?;
    } else if item.worktree.is_some() {
        gitops::remove_worktree(clone, worktree).map_err(|e| e.to_string())?;
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
    live: &[WorkerRecord],
    removed: &BTreeMap<PathBuf, Vec<String>>,
    dry_run: bool,
) -> Vec<RemoteGc> {
    let names = super::spawn::local_remote_names(&loaded.state_dir);
    let mut out = Vec::new();
    for (repo, remote) in loaded
        .config
        .repos
        .iter()
        .flat_map(|r| names.iter().map(move |n| (r, n.as_str())))
    {
        // A worker still going (a spawn half-way included, a change still landing) may need
        // the remote any moment. `live` holds only those.
        if live.iter().any(|w| w.repo == repo.name) {
            continue;
        }
        let Ok(Some(url)) = gitops::remote_url(&repo.path, remote) else {
            continue;
        };
        let Some(bare) = crate::forge::host_remote(&loaded.config, &loaded.state_dir, &repo.name)
        else {
            continue;
        };
        if !super::spawn::same_file(Path::new(&url), &bare) {
            continue;
        }
        let gone = removed.get(&repo.path).cloned().unwrap_or_default();
        let left: Vec<String> = match gitops::branches_with_prefix(&repo.path, BRANCH_PREFIX) {
            // Another state directory's branches push to its own remote: they do not keep
            // this one (a branch with no upstream might be anyone's, so it keeps it).
            Ok(b) => b
                .into_iter()
                .filter(|b| !gone.contains(b))
                .filter(|b| {
                    gitops::branch_remote(&repo.path, b)
                        .map_or(true, |r| r.is_none_or(|r| r == remote))
                })
                .collect(),
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
