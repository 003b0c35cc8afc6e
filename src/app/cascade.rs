//! Cascade protection: the CI of the base branch of every repository a worker's repository
//! depends on (transitively). A red upstream pauses the downstream workers (their supervisors
//! watch, `supervisor::cascade`) and stops new ones: `spawn` refuses a repository below a red
//! one, with the reason, so waves do not start tasks there either.
//!
//! The verdicts are shared through SQLite (`store::upstream`): a watcher reads the row; when it
//! is older than `ci.poll_interval` it claims the next poll, asks the forge (head of the base
//! branch, CI for that commit) and writes the row. However many workers depend on a
//! repository, it is polled once per interval.
//!
//! A worker below a red repository is PAUSED (tree stopped with SIGSTOP, then its cgroup
//! frozen; its milestone clock saved in `Progress::paused_clock` and restored when it goes on).
//! `spawn` refuses (exit 1, the reason) rather than starting a worker PAUSED, so waves and
//! `--wait` retry later; `can-spawn` answers the same ([`red_upstream`]: the shared rows, or the
//! forge directly where nothing ran yet), the red repository an `upstream_red` blocker. A poll
//! the forge failed holds the row's claim for a growing back-off and is recorded as the
//! worker's `forge_error_<kind>` event.

use crate::config::{Config, Repo};
use crate::forge::Forge;
use crate::forge::follow::CiFollower;
use crate::store::upstream::{self as su, UpstreamRow};
use crate::store::{Store, now_ms};

/// How long a claimed poll may take before another watcher may claim it.
const POLL_LEASE_MS: i64 = 30_000;

/// The first red upstream among `rows`: the one that makes a downstream worker stop. Pure.
pub fn first_red(rows: &[UpstreamRow]) -> Option<&UpstreamRow> {
    rows.iter().find(|r| r.verdict.as_deref() == Some("red"))
}

/// Why a red upstream stops downstream work, e.g. "acdc-core main is red: test". Pure.
pub fn reason(r: &UpstreamRow) -> String {
    let what = if r.failed_jobs.is_empty() {
        r.detail.clone().unwrap_or_else(|| "CI failed".into())
    } else {
        r.failed_jobs.join(", ")
    };
    format!("{} {} is red: {what}", r.repo, r.branch)
}

/// Why `rows` make a downstream worker stop (the first red upstream). Pure.
pub fn red_reason(rows: &[UpstreamRow]) -> Option<String> {
    first_red(rows).map(reason)
}

/// The repositories whose base-branch CI a worker on `repo` depends on.
pub fn upstreams<'a>(config: &'a Config, repo: &str) -> Vec<&'a Repo> {
    config
        .graph
        .deps(repo)
        .iter()
        .filter_map(|d| config.repo(d))
        .collect()
}

/// Whether [`status`] asked the forge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Asked {
    /// The row was fresh: another process's poll was answered.
    Fresh,
    /// Another process holds the claim on the next poll (asking, or backing off a failure).
    Claimed,
    Answered,
    Failed,
}

/// The base-branch CI of `repo`: the shared row if it is fresh, else polled now by this
/// process (if it wins the claim; otherwise the row as it is, possibly stale or absent). A
/// poll the forge failed is told to `failed` (once per poll, however many watch the row),
/// which says how long to keep the claim (nobody asks the failing forge again meanwhile;
/// zero lets it go at once).
pub fn status<F: Forge>(
    store: &mut Store,
    follower: &CiFollower<F>,
    rt: &tokio::runtime::Runtime,
    repo: &Repo,
    max_age_ms: i64,
    failed: &mut dyn FnMut(&crate::forge::ForgeError) -> std::time::Duration,
) -> (Option<UpstreamRow>, Asked) {
    let now = now_ms();
    let row = store.read(|tx| su::get(tx, &repo.name)).ok().flatten();
    if row
        .as_ref()
        .is_some_and(|r| r.checked_ms >= now - max_age_ms)
    {
        return (row, Asked::Fresh);
    }
    let me = crate::pidns::host_pid() as i64;
    let claimed = store
        .write(|tx| {
            su::claim_poll(
                tx,
                &repo.name,
                &repo.branch,
                me,
                now,
                max_age_ms,
                POLL_LEASE_MS,
            )
        })
        .unwrap_or(false);
    if !claimed {
        return (row, Asked::Claimed);
    }
    // Only the forge's answer is awaited: the store is used outside the runtime (PostgreSQL's
    // client blocks on a runtime of its own, which cannot run inside another).
    match rt.block_on(poll(follower, repo)) {
        Ok(new) => {
            if let Err(e) = store.write(|tx| su::put(tx, &new)) {
                tracing::warn!(repo = %repo.name, error = %e, "cannot record upstream CI");
            }
            (Some(new), Asked::Answered)
        }
        Err(e) => {
            tracing::debug!(repo = %repo.name, error = %e, "cannot read upstream CI");
            let hold = failed(&e).as_millis() as i64;
            let _ = store.write(|tx| {
                if hold > 0 {
                    su::hold_claim(tx, &repo.name, me, now_ms() + hold)
                } else {
                    su::release_claim(tx, &repo.name)
                }
            });
            (row, Asked::Failed)
        }
    }
}

/// The base-branch CI of `repo` as last recorded, asking nobody.
pub fn recorded(store: &mut Store, repo: &Repo) -> Option<UpstreamRow> {
    store.read(|tx| su::get(tx, &repo.name)).ok().flatten()
}

/// The base-branch CI of `repo` asked of the forge now: its head, and CI for that commit.
async fn poll<F: Forge>(
    follower: &CiFollower<F>,
    repo: &Repo,
) -> Result<UpstreamRow, crate::forge::ForgeError> {
    let found = match follower.forge().branch_head(repo, &repo.branch).await? {
        Some(sha) => {
            let (v, _) = follower.poll(repo, &sha, None, now_ms()).await?;
            Some((sha, v))
        }
        None => None,
    };
    Ok(UpstreamRow {
        repo: repo.name.clone(),
        branch: repo.branch.clone(),
        sha: found.as_ref().map(|(s, _)| s.clone()),
        verdict: found.as_ref().map(|(_, v)| v.kind.as_str().to_string()),
        failed_jobs: found
            .as_ref()
            .map(|(_, v)| v.failed_jobs.clone())
            .unwrap_or_default(),
        detail: found.as_ref().map(|(_, v)| v.detail.clone()),
        checked_ms: now_ms(),
    })
}

/// Why a worker on `repo` must not start now (an upstream is red), polling what is stale.
pub fn spawn_refusal<F: Forge>(
    store: &mut Store,
    follower: &CiFollower<F>,
    config: &Config,
    repo: &str,
) -> Option<String> {
    red_upstream(Some(store), follower, config, repo).map(|r| reason(&r))
}

/// The red upstream that keeps a worker on `repo` from starting, if any: what [`spawn_refusal`]
/// refuses on. With a store, the shared rows (polled when stale, as spawn does); without one
/// (nothing ran here yet: `orch can-spawn`, which creates no state) the forge is asked directly.
pub fn red_upstream<F: Forge>(
    mut store: Option<&mut Store>,
    follower: &CiFollower<F>,
    config: &Config,
    repo: &str,
) -> Option<UpstreamRow> {
    let ups = upstreams(config, repo);
    if ups.is_empty() {
        return None;
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    let max_age = config.ci.poll_interval.as_millis() as i64;
    let mut rows: Vec<UpstreamRow> = Vec::new();
    for u in ups {
        match store.as_deref_mut() {
            // Asked for a person or a spawn: no worker's history to count a failure in.
            Some(store) => rows.extend(
                status(store, follower, &rt, u, max_age, &mut |_| {
                    std::time::Duration::ZERO
                })
                .0,
            ),
            None => match rt.block_on(poll(follower, u)) {
                Ok(row) => rows.push(row),
                Err(e) => {
                    tracing::debug!(repo = %u.name, error = %e, "cannot read upstream CI")
                }
            },
        }
    }
    first_red(&rows).cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(repo: &str, verdict: &str, jobs: &[&str]) -> UpstreamRow {
        UpstreamRow {
            repo: repo.into(),
            branch: "main".into(),
            sha: Some("a".repeat(40)),
            verdict: Some(verdict.into()),
            failed_jobs: jobs.iter().map(|s| s.to_string()).collect(),
            detail: None,
            checked_ms: 1,
        }
    }

    #[test]
    fn the_first_red_upstream_is_the_reason() {
        assert_eq!(red_reason(&[row("core", "green", &[])]), None);
        assert_eq!(red_reason(&[row("core", "running", &[])]), None);
        assert_eq!(
            red_reason(&[
                row("core", "green", &[]),
                row("acdc-core", "red", &["test"])
            ]),
            Some("acdc-core main is red: test".into())
        );
    }
}
