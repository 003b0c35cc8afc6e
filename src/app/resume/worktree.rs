//! The worker's git state as a resumer finds it: a worktree a killed spawner left half-made,
//! lock files a killed worker left behind, and pushes it made but never reported.

use crate::app::Loaded;
use crate::gitops;
use crate::sha::Sha;
use crate::store::now_ms;
use crate::store::workers::WorkerRecord;
use std::path::{Path, PathBuf};

/// Recreates the worktree and prompts when the spawner died before making them (or hands a
/// worker of another account its clone again); `Err` (why) when the worker could not work in
/// it: a replacement started there would only fail its task.
pub fn ensure_worktree(l: &Loaded, w: &WorkerRecord) -> Result<(), String> {
    // A spawner killed inside `git worktree add -b` left its branch's lock file: cleared
    // first (every caller has killed what was left of the worker).
    clear_stale_git_locks(l, w);
    let wt = Path::new(&w.worktree);
    let Some(repo) = l.config.repo(&w.repo) else {
        return Err(format!("repository {} is not in repos.yaml", w.repo));
    };
    // A spawner killed between making a worker's own clone and handing it over leaves a
    // usable clone that is still orch's: its worker (another account) could not commit in it.
    // One killed inside the hand-over left its mark: part of the clone (or its home) is orch's.
    let session = crate::app::supervisor::session_dir(&l.state_dir, &w.id);
    if l.config.worker.separate()
        && worktree_usable(wt)
        && (crate::app::spawn::hand_over_unfinished(&session)
            || (l.config.worker.accounts()
                && crate::account::owner_of(wt) == Some(rustix::process::geteuid().as_raw())))
    {
        // Its prompts first: the hand-over copies its CI guide.
        ensure_prompts(l, w);
        if let Err(e) = crate::app::spawn::hand_over_again(&l.config, &l.state_dir, w) {
            tracing::error!(worker = %w.id, error = %e, "cannot hand its clone over to its account");
            return Err(format!(
                "its clone cannot be handed over to its account: {e}"
            ));
        }
    }
    if !worktree_usable(wt) {
        // Only ever a worktree where orch makes them: never move a directory elsewhere.
        let expected = super::trust::expected_worktree(&l.state_dir, &w.id);
        let own_clone = super::trust::expected_own_clone(&l.state_dir, &w.id);
        let found = crate::config::resolve_on_disk(wt);
        if found != expected && found != own_clone {
            tracing::error!(worker = %w.id, "its worktree {} is not {}: left alone", wt.display(), expected.display());
            return Err(format!(
                "its worktree {} is unusable and not where orch makes worktrees ({}): left alone",
                wt.display(),
                expected.display()
            ));
        }
        if wt.exists() {
            // A spawner killed inside `git worktree add` leaves a half-made worktree (a `.git`
            // file whose git directory has no HEAD, or no index yet): set it aside, never
            // delete, and make it again.
            let aside = wt.with_file_name(format!("worktree.unusable-{}", now_ms()));
            match std::fs::rename(wt, &aside) {
                Ok(()) => {
                    tracing::warn!(worker = %w.id, "the worktree was unusable; moved to {}", aside.display())
                }
                Err(e) => {
                    tracing::error!(worker = %w.id, error = %e, "cannot move the unusable worktree aside")
                }
            }
        }
        if found == own_clone {
            // A worker of another account: a clone of its own, made again and handed over —
            // after its prompts (a spawner killed before it made its session directory left
            // neither, and the hand-over copies the CI guide).
            ensure_prompts(l, w);
            if let Err(e) = crate::app::spawn::remake_own_clone(&l.config, &l.state_dir, w) {
                tracing::error!(worker = %w.id, error = %e, "cannot make its clone again");
                return Err(format!("its clone cannot be made again: {e}"));
            }
            return Ok(());
        }
        let _ = gitops::git(&repo.path, &["worktree", "prune"]);
        let local = w.local_branch();
        let mut branch_exists = gitops::resolve(&repo.path, &format!("refs/heads/{local}")).is_ok();
        if !branch_exists {
            // Taken over from another node (or a clone that lost the branch): what the worker
            // pushed is its work; the base only when it pushed nothing.
            let refspec = format!("refs/heads/{}:refs/heads/{local}", w.branch);
            branch_exists = gitops::git(&repo.path, &["fetch", "--quiet", &w.remote, &refspec])
                .is_ok()
                && gitops::resolve(&repo.path, &format!("refs/heads/{local}")).is_ok();
        }
        let result = if branch_exists {
            gitops::git(&repo.path, &["worktree", "add", &w.worktree, &local])
                .or_else(|e| {
                    // Checked out in its predecessor's worktree, of a node that lost the
                    // worker (one clone shared by several nodes' state directories): the
                    // branch is this worker's alone, and that worktree is no one's now.
                    tracing::warn!(worker = %w.id, error = %e, "worktree add refused; adding it over its predecessor's registration");
                    gitops::git(&repo.path, &["worktree", "add", "--force", &w.worktree, &local])
                })
                .map(|_| ())
        } else {
            gitops::create_worktree(&repo.path, &w.id, &local, &w.base_sha, wt)
        };
        if let Err(e) =
            result.and_then(|_| gitops::set_upstream_to(&repo.path, &local, &w.remote, &w.branch))
        {
            tracing::error!(worker = %w.id, error = %e, "cannot recreate the worktree");
            return Err(format!("its worktree cannot be made again: {e}"));
        }
    }
    ensure_prompts(l, w);
    Ok(())
}

/// Renders the prompts again when the spawner died before writing them all (the prompt, the
/// CI guide, the handoff: a hand-over copies the last two into the workspace).
fn ensure_prompts(l: &Loaded, w: &WorkerRecord) {
    let session = crate::app::supervisor::session_dir(&l.state_dir, &w.id);
    let made = [
        "prompt.md",
        "ci-guide.md",
        crate::app::supervisor::HANDOFF_FILE,
    ]
    .iter()
    .all(|f| session.join(f).exists());
    if !made {
        if let Err(e) = std::fs::create_dir_all(&session) {
            tracing::error!(worker = %w.id, error = %e, "cannot make its session directory");
        }
        let upstream = l
            .store()
            .map(|mut s| crate::app::spawn::handoff_context(&mut s, &l.config, &w.repo, &w.id))
            .unwrap_or_default();
        let _ =
            crate::app::spawn::render_prompts(&l.config, &l.contract, w, &session, "", &upstream);
    }
}

/// The git directory of a worktree (from its `.git` file; a clone of its own — a worker of
/// another account's — has it in place).
fn worktree_git_dir(wt: &Path) -> Option<PathBuf> {
    if wt.join(".git").is_dir() {
        return Some(wt.join(".git"));
    }
    let text = std::fs::read_to_string(wt.join(".git")).ok()?;
    let gitdir = text.trim().strip_prefix("gitdir:")?;
    Some(wt.join(gitdir.trim()))
}

/// A worktree a worker can use: HEAD resolves and the checkout got as far as its index.
fn worktree_usable(wt: &Path) -> bool {
    gitops::head(wt).is_ok() && worktree_git_dir(wt).is_some_and(|d| d.join("index").exists())
}

/// Removes the lock files a worker killed inside a git command leaves behind, so that its
/// replacement can commit and push. Safe: the previous worker's group is dead, and its
/// worktree, branch and remote branch belong to this worker alone.
fn clear_stale_git_locks(l: &Loaded, w: &WorkerRecord) {
    let wt = Path::new(&w.worktree);
    let mut stale = Vec::new();
    let branch_lock = format!("refs/heads/{}.lock", w.local_branch());
    if own_clone(l, w) {
        // A clone of its own is the account's (its branch is in it too): walked from its
        // workspace by descriptors, no link on the way followed — root removes nothing else.
        let workspace = crate::account::workspace_dir(&l.state_dir, &w.id);
        let clone = wt
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("worktree");
        for lock in ["index.lock", "HEAD.lock", branch_lock.as_str()] {
            let rel = format!("{clone}/.git/{lock}");
            if crate::account::remove_inside(&workspace, &rel).unwrap_or(false) {
                tracing::warn!(worker = %w.id, "removed a stale git lock its previous worker left: {}", wt.join(".git").join(lock).display());
            }
        }
    } else if let Some(gitdir) = worktree_git_dir(wt) {
        stale.push(gitdir.join("index.lock"));
        stale.push(gitdir.join("HEAD.lock"));
    }
    if let Some(repo) = l.config.repo(&w.repo) {
        let common = repo.path.join(".git");
        let common = if common.is_dir() {
            common
        } else {
            repo.path.clone()
        };
        stale.push(common.join(&branch_lock));
        if l.config.forge.kind == crate::config::ForgeKind::Local {
            // The forge's, this worker's branch alone: a receive-pack its dead supervisor
            // relayed for it lost its pack's sender with the worker, and ends.
            stale.push(
                crate::forge::local::LocalForge::new(&l.state_dir, &l.config)
                    .remote_path(&w.repo)
                    .join(&branch_lock),
            );
        }
    }
    for p in stale {
        if p.exists() && std::fs::remove_file(&p).is_ok() {
            tracing::warn!(worker = %w.id, "removed a stale git lock its previous worker left: {}", p.display());
        }
    }
}

/// A push the worker made but never reported (it died first): the head of its branch moved
/// past the tracked SHA — also in PUSHED_TO_CI, where it replaces the tracked SHA (DONE is about
/// the branch head). Only new work counts (`gitops::why_not_new_work`; `others`: what the
/// other workers of the repository pushed). (SHA, its commit time.)
pub fn unreported_push(
    l: &Loaded,
    w: &WorkerRecord,
    others: &[(String, String)],
) -> Option<(Sha, i64)> {
    if !may_have_pushed(w) {
        return None;
    }
    let dir = fetch_dir(l, w);
    gitops::fetch(&dir, &w.remote).ok()?;
    unreported_push_fetched(w, &dir, others)
}

/// Where orch fetches a worker's remote and reads what it pushed: its worktree (a linked
/// worktree of orch's clone, whose refs it shares) — or, for a worker of another account,
/// orch's own clone of the repository, which has the same remote: orch never runs git inside
/// a clone the account controls (its configuration, hooks and links would be followed by
/// root: a `FETCH_HEAD` linked to `/etc/shadow` would be written through).
fn fetch_dir(l: &Loaded, w: &WorkerRecord) -> PathBuf {
    if own_clone(l, w)
        && let Some(repo) = l.config.repo(&w.repo)
    {
        return repo.path.clone();
    }
    PathBuf::from(&w.worktree)
}

/// Whether `w` works in a clone of its own (a worker of another account, or sandboxed):
/// one orch must not run git in or follow links through.
fn own_clone(l: &Loaded, w: &WorkerRecord) -> bool {
    Path::new(&w.worktree) == super::trust::expected_own_clone(&l.state_dir, &w.id)
}

fn may_have_pushed(w: &WorkerRecord) -> bool {
    matches!(
        w.milestone(),
        crate::milestone::Milestone::Working
            | crate::milestone::Milestone::FixingCi
            | crate::milestone::Milestone::PushedToCi
    )
}

/// How many fetches `unreported_pushes` runs at once.
const FETCH_CONCURRENCY: usize = 8;

/// [`unreported_push`] for every claimed worker of a resume: one fetch per worktree's
/// repository and remote (the worktrees of a clone share its remote-tracking refs; concurrent
/// fetches into one clone would fight over its ref locks), up to `FETCH_CONCURRENCY`
/// repositories at once, then each branch looked at locally. Worker id → (SHA, commit time).
pub fn unreported_pushes(
    l: &Loaded,
    store: &mut crate::store::Store,
    claimed: &[WorkerRecord],
) -> std::collections::HashMap<String, (Sha, i64)> {
    // A worker without a worktree on disk has nothing to fetch into (nor anything of its own
    // to have pushed from).
    let candidates: Vec<&WorkerRecord> = claimed
        .iter()
        .filter(|w| may_have_pushed(w) && Path::new(&w.worktree).is_dir())
        .collect();
    // One worktree (or clone) per (repository, remote) to fetch through.
    let dirs: std::collections::HashMap<&str, PathBuf> = candidates
        .iter()
        .map(|w| (w.id.as_str(), fetch_dir(l, w)))
        .collect();
    let mut fetches: std::collections::BTreeMap<(&str, &str), &Path> = Default::default();
    for w in &candidates {
        fetches
            .entry((w.repo.as_str(), w.remote.as_str()))
            .or_insert(dirs[w.id.as_str()].as_path());
    }
    let fetches: Vec<((&str, &str), &Path)> = fetches.into_iter().collect();
    let fetched: std::collections::HashSet<(&str, &str)> = std::thread::scope(|scope| {
        let mut ok = std::collections::HashSet::new();
        for chunk in fetches.chunks(FETCH_CONCURRENCY) {
            let handles: Vec<_> = chunk
                .iter()
                .map(|(key, wt)| {
                    let (key, wt) = (*key, *wt);
                    scope.spawn(move || gitops::fetch(wt, key.1).is_ok().then_some(key))
                })
                .collect();
            ok.extend(handles.into_iter().filter_map(|h| h.join().ok().flatten()));
        }
        ok
    });
    let mut found = std::collections::HashMap::new();
    for w in candidates {
        let others = store
            .read(|tx| crate::store::workers::others_pushes(tx, &w.repo, &w.id))
            .unwrap_or_default();
        // A fetch that failed through another worktree is tried through the worker's own.
        let key = (w.repo.as_str(), w.remote.as_str());
        let dir = dirs[w.id.as_str()].as_path();
        let push = if fetched.contains(&key) {
            unreported_push_fetched(w, dir, &others)
        } else if fetches.iter().any(|(k, wt)| *k == key && *wt != dir) {
            unreported_push(l, w, &others)
        } else {
            None
        };
        if let Some(push) = push {
            found.insert(w.id.clone(), push);
        }
    }
    found
}

/// [`unreported_push`] once the remote was fetched into `wt` (see [`fetch_dir`]).
fn unreported_push_fetched(
    w: &WorkerRecord,
    wt: &Path,
    others: &[(String, String)],
) -> Option<(Sha, i64)> {
    let head = gitops::resolve(wt, &format!("refs/remotes/{}/{}", w.remote, w.branch)).ok()?;
    if head == w.base_sha || w.progress.tracked_sha.as_ref().is_some_and(|t| *t == head) {
        return None;
    }
    match gitops::why_not_new_work(wt, &w.remote, &head, &w.base_sha, others) {
        Ok(None) => {}
        Ok(Some(why)) => {
            tracing::warn!(worker = %w.id, "the head of {} is not counted as a push: {why}", w.branch);
            return None;
        }
        Err(e) => {
            tracing::warn!(worker = %w.id, error = %e, "cannot check the head of {}", w.branch);
            return None;
        }
    }
    let pushed_ms = gitops::commit_time_ms(wt, &head).unwrap_or_else(|_| now_ms());
    Some((Sha::from(head), pushed_ms))
}
