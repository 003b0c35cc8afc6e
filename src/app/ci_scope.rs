//! Which CI a worker may ask about through its channel (`orch ci status|logs`, answered by its
//! supervisor as orch): its own commits only. A CI log carries what the commit's code printed
//! and the commit's files; another worker's is that worker's to read, not this one's.
//!
//! Its own: its repository, and a commit it pushed (recorded as its push, or on its branch of
//! the local forge's remote — a worker asks right after its push, before its supervisor may
//! have recorded it), or the base commit it started from (public: it is in its clone).

use crate::store::Store;
use crate::store::workers as ws;
use std::path::Path;
use std::time::{Duration, Instant};

/// How long a question about a commit not (yet) known as the worker's waits for its push to be
/// recorded before it is refused.
const PUSH_RECORDED_WITHIN: Duration = Duration::from_secs(10);

/// `Ok` when worker `id` may ask about `sha` of `repo`; else why not, for the worker.
/// `remote`: the local forge's bare remote of its repository, when the worker pushes there.
pub fn own_commit(
    state_dir: &Path,
    id: &str,
    remote: Option<&Path>,
    repo: &str,
    sha: &str,
) -> Result<(), String> {
    let deadline = Instant::now() + PUSH_RECORDED_WITHIN;
    let unreachable = |e: crate::store::StoreError| {
        format!(
            "not answered: {} ({e})",
            crate::report_wire::STATE_UNREACHABLE
        )
    };
    let mut store = Store::open(state_dir).map_err(unreachable)?;
    loop {
        let (w, pushed) = store
            .read(|tx| Ok((ws::get_worker(tx, id)?, ws::push_of(tx, id, sha)?)))
            .map_err(unreachable)?;
        let Some(w) = w else {
            return Err(format!("not answered: no worker {id}"));
        };
        if w.repo != repo {
            return Err(format!(
                "not answered: {id} works on {}; orch answers a worker's CI questions about its own repository only, not {repo}",
                w.repo
            ));
        }
        let full = sha.len() == 40;
        if (full && w.base_sha == sha)
            || pushed.is_some()
            || (full && remote.is_some_and(|r| on_branch(r, &w.branch, sha)))
        {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!(
                "not answered: {sha} is not a commit {id} pushed to {repo} (orch answers a worker's CI questions about its own commits only: give the full SHA of one of them)"
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Whether `sha` is in the history of `branch` on the bare repository `remote`.
fn on_branch(remote: &Path, branch: &str, sha: &str) -> bool {
    let Ok(repo) = git2::Repository::open_bare(remote) else {
        return false;
    };
    let (Ok(tip), Ok(oid)) = (
        repo.refname_to_id(&format!("refs/heads/{branch}")),
        git2::Oid::from_str(sha),
    ) else {
        return false;
    };
    tip == oid || repo.graph_descendant_of(tip, oid).unwrap_or(false)
}
