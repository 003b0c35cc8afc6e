//! Runs started by orch itself rather than by a push's hook: a run of a commit with its
//! upstreams pinned (`LocalForge::start_run`), and what a run was built against.

use super::{LocalForgeError, cli, db};

impl super::LocalForge {
    /// Records and starts a run of `repo`'s jobs for `sha` (pushed to `git_ref`) with the
    /// upstream commits `pins` (repository → commit; the other upstreams at their base heads
    /// when the run starts). Returns what was done, in words.
    pub fn start_run(
        &self,
        repo: &str,
        git_ref: &str,
        sha: &str,
        pins: &[(String, String)],
    ) -> Result<Vec<String>, LocalForgeError> {
        let input = format!("{} {sha} {git_ref}\n", "0".repeat(40));
        cli::start_runs(
            &self.layout.state_dir,
            &self.config_file,
            repo,
            &input,
            &self.exe,
            &cli::Start {
                only_if_absent: false,
                runner: cli::Runner::Start,
                pins,
            },
        )
    }

    /// The upstream commits the newest run of `sha` in `repo` was built against, by repository
    /// (pinned with the run, or the base heads its runner found); empty before its runner
    /// started or without upstreams.
    pub fn run_upstreams(
        &self,
        repo: &str,
        sha: &str,
    ) -> Result<Vec<db::UpstreamRow>, LocalForgeError> {
        self.with_store(|store| {
            Ok(
                store.read(|tx| match db::runs_for_sha(tx, repo, sha)?.first() {
                    Some((run, _)) => db::load_upstreams(tx, run.id),
                    None => Ok(Vec::new()),
                })?,
            )
        })
    }
}
