//! A run's upstream workspace on the local forge (see [`crate::upstreams`]): which commit of
//! each upstream the run is about, recorded with the run, and a cheap checkout of each beside
//! the run's own.
//!
//! Commits: the run's pins (recorded when it was created), else the upstream's base branch
//! head in its bare remote when the runner starts; both are written to
//! `local_run_upstreams` before any checkout, so a verdict names what it was built against.
//!
//! Checkouts: `git clone --shared` from the bare remote and a detached checkout — objects
//! borrowed, only the work tree written. A job confined to a worker's account or a sandbox
//! cannot read the bare remote those objects are borrowed from (orch's state), so there each
//! checkout gets its own copy of them (`git repack -a -d`, the alternates dropped): a Cargo
//! git dependency fetches from it.

use super::db::{self, RunRow};
use super::{Layout, git};
use crate::config::Config;
use crate::store::Store;
use crate::upstreams::{Listing, Upstream, choose_commits};
use std::path::Path;
use std::time::Instant;

/// A prepared workspace: its listing file and the lines the jobs' logs start with.
pub(super) struct Prepared {
    pub(super) list: std::path::PathBuf,
    pub(super) lines: Vec<String>,
}

/// The upstreams of `repo`, each after the ones it depends on (repos.yaml's graph).
fn upstream_order(config: &Config, repo: &str) -> Vec<String> {
    let deps = config.graph.deps(repo);
    config
        .graph
        .layers()
        .into_iter()
        .flatten()
        .filter(|r| deps.contains(r))
        .collect()
}

/// The head of `branch` in the bare remote `remote` (none: no remote, no such branch).
fn base_head(remote: &Path, branch: &str) -> Option<String> {
    if !remote.is_dir() {
        return None;
    }
    let spec = format!("refs/heads/{branch}^{{commit}}");
    git(Some(remote), ["rev-parse", "--verify", "-q", spec.as_str()])
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Chooses, records and checks out the upstreams of `run` into `dir` (the run's directory,
/// which holds its own checkout too) and writes the listing there. `confined`: the jobs run
/// as a worker's account or in a sandbox (see the module's doc).
pub(super) fn prepare(
    layout: &Layout,
    store: &mut Store,
    config: &Config,
    run: &RunRow,
    dir: &Path,
    confined: bool,
) -> Result<Prepared, String> {
    let started = Instant::now();
    let order = upstream_order(config, &run.repo);
    let branch_of = |r: &str| {
        config
            .repo(r)
            .map(|c| c.branch.clone())
            .unwrap_or_else(|| "main".into())
    };
    let recorded = super::db::lasting(|| store.read(|tx| db::load_upstreams(tx, run.id)))
        .map_err(|e| format!("cannot read the run's upstream commits: {e}"))?;
    // Already recorded (pins; a runner that starts over): kept, so the run stays about them.
    let known: Vec<(String, String)> = recorded
        .iter()
        .map(|u| (u.repo.clone(), u.sha.clone()))
        .collect();
    let heads = |r: &str| base_head(&layout.remote(r), &branch_of(r));
    let chosen = choose_commits(&order, &known, &heads);
    let mut lines = Vec::new();
    let found: Vec<(String, String)> = chosen
        .iter()
        .filter_map(|(r, c)| match c {
            Some((sha, false)) => Some((r.clone(), sha.clone())),
            _ => None,
        })
        .collect();
    let rows = super::db::lasting(|| store.write(|tx| db::record_upstreams(tx, run.id, &found)))
        .map_err(|e| format!("cannot record the run's upstream commits: {e}"))?;
    let mut listing = Listing {
        repo: run.repo.clone(),
        upstreams: Vec::new(),
    };
    for (repo, choice) in &chosen {
        if choice.is_none() {
            lines.push(format!(
                "orch: upstream {repo} has no branch {} on this forge: not in $ORCH_UPSTREAMS",
                branch_of(repo)
            ));
            continue;
        }
        let Some(row) = rows.iter().find(|u| &u.repo == repo) else {
            continue;
        };
        let path = dir.join(repo);
        checkout(&layout.remote(repo), &path, &row.sha, confined)
            .map_err(|e| format!("checkout of upstream {repo} at {} failed: {e}", row.sha))?;
        listing.upstreams.push(Upstream {
            repo: repo.clone(),
            sha: row.sha.clone(),
            path,
            pinned: row.pinned,
            branch: branch_of(repo),
        });
    }
    let list = listing.write(dir)?;
    if !listing.upstreams.is_empty() {
        lines.insert(
            0,
            format!(
                "orch: upstreams in $ORCH_UPSTREAMS ({} ms): {}",
                started.elapsed().as_millis(),
                listing.summary()
            ),
        );
    }
    Ok(Prepared { list, lines })
}

/// `sha` of the bare remote `remote`, checked out detached in `path`.
fn checkout(remote: &Path, path: &Path, sha: &str, self_contained: bool) -> Result<(), String> {
    git(
        None,
        [
            "clone".as_ref(),
            "-q".as_ref(),
            "--no-checkout".as_ref(),
            "--shared".as_ref(),
            remote.as_os_str(),
            path.as_os_str(),
        ],
    )?;
    git(Some(path), ["checkout", "-q", "--detach", sha])?;
    if self_contained {
        git(Some(path), ["repack", "-a", "-d", "-q"])?;
        let alternates = path.join(".git/objects/info/alternates");
        std::fs::remove_file(&alternates)
            .map_err(|e| format!("cannot remove {}: {e}", alternates.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstreams_come_after_what_they_depend_on() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("repos.yaml");
        std::fs::write(
            &file,
            "forge: {kind: local}\nrepos:\n  net: {deps: [vm, core]}\n  vm: {deps: [core]}\n  core: {}\n  docs: {}\n",
        )
        .unwrap();
        let config = Config::load(&file).unwrap();
        assert_eq!(upstream_order(&config, "net"), ["core", "vm"]);
        assert_eq!(upstream_order(&config, "vm"), ["core"]);
        assert!(upstream_order(&config, "core").is_empty());
    }
}
