//! What the app asks of the configured forge outside a forge client: where a clone pushes,
//! whether the forge's repositories are on this host, whether it has pull requests. Answered
//! here, from `forge.kind`, beside the construction of the forges ([`super::AnyForge`]), so
//! that nothing above names a forge kind or builds a forge implementation to ask.

use super::local;
use crate::config::{Config, ForgeKind, Repo};
use std::path::{Path, PathBuf};

/// Whether the configured forge keeps its repositories on this host, in orch's state directory
/// (the local forge): a worker of another account reaches them only through its supervisor's
/// relay. Otherwise a clone pushes to its own `origin` (Forgejo).
pub fn keeps_repositories_here(config: &Config) -> bool {
    config.forge.kind == ForgeKind::Local
}

/// The forge's repository of `repo` on this host, where it keeps one (see
/// [`keeps_repositories_here`]); not made here ([`ensure_host_remote`] makes it).
pub fn host_remote(config: &Config, state_dir: &Path, repo: &str) -> Option<PathBuf> {
    keeps_repositories_here(config).then(|| local::remote_path(state_dir, repo))
}

/// [`host_remote`], made (and seeded with `repo.branch`) on first use. `None` where the forge
/// keeps no repository on this host.
pub fn ensure_host_remote(
    config: &Config,
    state_dir: &Path,
    repo: &Repo,
) -> Result<Option<PathBuf>, String> {
    if !keeps_repositories_here(config) {
        return Ok(None);
    }
    local::LocalForge::new(state_dir, config)
        .ensure_remote(repo)
        .map(Some)
        .map_err(|e| format!("local forge for {}: {e}", repo.name))
}

/// Whether the configured forge has pull requests (`land.policy: pull_request` needs them).
pub fn has_pull_requests(config: &Config) -> bool {
    config.forge.kind == ForgeKind::Forgejo
}
