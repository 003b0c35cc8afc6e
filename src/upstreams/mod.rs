//! Upstream workspaces: a CI run's checkouts of the repositories its repository depends on,
//! and `orch ci with-upstreams`, which makes a build use them.
//!
//! The local forge's runner lays a run out as one directory, `$ORCH_UPSTREAMS`: the run's own
//! checkout at `$ORCH_UPSTREAMS/<repo>` (the jobs' working directory) and beside it one
//! checkout per upstream (transitively, as repos.yaml's `deps` say), each at the commit the
//! run is about, named as repos.yaml names it — so a path dependency `../core` resolves as it
//! does in a developer's sibling clones. [`Listing`] (`$ORCH_UPSTREAMS_LIST`,
//! `$ORCH_UPSTREAMS/.upstreams.json`) says which commit each one is.
//!
//! The wrapper ([`run::with_upstreams`]) then points each ecosystem's own override at them,
//! without editing a tracked file: Cargo ([`cargo`]), Python ([`python`]), npm ([`npm`]),
//! Go ([`go`]).

pub mod cargo;
pub mod go;
pub mod npm;
pub mod python;
mod run;

pub use run::with_upstreams;

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The directory of a run's checkouts (the run's own and its upstreams').
pub const DIR_VAR: &str = "ORCH_UPSTREAMS";
/// The [`Listing`] file of a run.
pub const LIST_VAR: &str = "ORCH_UPSTREAMS_LIST";
/// The [`Listing`]'s name in [`DIR_VAR`]'s directory (no repository name starts with a dot).
pub const LIST_FILE: &str = ".upstreams.json";

/// What a run's upstream workspace holds: written by the runner, read by the wrapper.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listing {
    /// The run's repository (its checkout is `<dir>/<repo>`).
    pub repo: String,
    /// Its upstreams, each after the ones it depends on.
    pub upstreams: Vec<Upstream>,
}

/// One upstream checkout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Upstream {
    /// Its name in repos.yaml (and its directory's).
    pub repo: String,
    /// The commit checked out.
    pub sha: String,
    /// Where: `<dir>/<repo>`.
    pub path: PathBuf,
    /// Pinned with the run (a change set's member, the landed commit a downstream check is
    /// about); otherwise the base branch's head when the run started.
    pub pinned: bool,
    /// The base branch whose head it was (or that a pin stands in for).
    pub branch: String,
}

impl Listing {
    /// The listing of the run whose workspace is `dir` (`$ORCH_UPSTREAMS`), from `list`
    /// (`$ORCH_UPSTREAMS_LIST`, by default `<dir>/.upstreams.json`).
    pub fn read(dir: &Path, list: Option<&Path>) -> Result<Listing, String> {
        let file = list
            .map(Path::to_path_buf)
            .unwrap_or_else(|| dir.join(LIST_FILE));
        let text = std::fs::read_to_string(&file)
            .map_err(|e| format!("cannot read the upstream listing {}: {e}", file.display()))?;
        serde_json::from_str(&text)
            .map_err(|e| format!("the upstream listing {} is not valid: {e}", file.display()))
    }

    /// Writes the listing to `<dir>/.upstreams.json` and returns that path.
    pub fn write(&self, dir: &Path) -> Result<PathBuf, String> {
        let file = dir.join(LIST_FILE);
        let text = serde_json::to_string_pretty(self).map_err(|e| e.to_string())?;
        std::fs::write(&file, text + "\n")
            .map_err(|e| format!("cannot write {}: {e}", file.display()))?;
        Ok(file)
    }

    /// One line for logs: `core 3b749ae650 (main head), vm 0c1d2e3f50 (pinned)`.
    pub fn summary(&self) -> String {
        if self.upstreams.is_empty() {
            return "none".into();
        }
        self.upstreams
            .iter()
            .map(|u| {
                let how = if u.pinned {
                    "pinned".to_string()
                } else {
                    format!("{} head", u.branch)
                };
                format!("{} {} ({how})", u.repo, crate::sha::short(&u.sha))
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// Which commit each upstream is checked out at: its pin when the run has one, else its base
/// head (`None`: no such branch on the forge — left out, and said). In `order`.
pub fn choose_commits(
    order: &[String],
    pins: &[(String, String)],
    heads: &dyn Fn(&str) -> Option<String>,
) -> Vec<(String, Option<(String, bool)>)> {
    order
        .iter()
        .map(|repo| {
            let chosen = match pins.iter().find(|(r, _)| r == repo) {
                Some((_, sha)) => Some((sha.clone(), true)),
                None => heads(repo).map(|sha| (sha, false)),
            };
            (repo.clone(), chosen)
        })
        .collect()
}

/// A job's command `run` made to build against the upstreams' checkouts (`orch init` writes
/// it for a repository with upstreams): the wrapper after what prepares the job's environment
/// (a virtual environment, `npm ci`, which would undo the wrapper's installs), around what
/// builds and tests.
pub fn wrap_command(run: &str) -> String {
    const WRAP: &str = "orch ci with-upstreams --";
    if let Some(rest) = run.strip_prefix("python3 -m venv .venv && ") {
        return format!("python3 -m venv .venv && . .venv/bin/activate && {WRAP} sh -c '{rest}'");
    }
    match run.rsplit_once(" && ") {
        Some((prepare, test)) => format!("{prepare} && {WRAP} {test}"),
        None => format!("{WRAP} {run}"),
    }
}

/// A job's command and the comment `orch init` writes above it.
pub struct Wrapped {
    pub run: String,
    pub note: String,
}

/// `orch init`'s guess for a repository with upstreams: [`wrap_command`], said in its note.
pub fn through_upstreams(run: &str, note: &str) -> Wrapped {
    Wrapped {
        run: wrap_command(run),
        note: format!(
            "{note}; built against the upstreams' checkouts (orch on the jobs' PATH; README, CI jobs on the local forge)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_is_wrapped_after_what_prepares_its_environment() {
        assert_eq!(
            wrap_command("cargo test"),
            "orch ci with-upstreams -- cargo test"
        );
        assert_eq!(
            wrap_command("npm ci && npm test"),
            "npm ci && orch ci with-upstreams -- npm test"
        );
        assert_eq!(
            wrap_command(
                "python3 -m venv .venv && .venv/bin/pip install -q -e . pytest && .venv/bin/python -m pytest"
            ),
            "python3 -m venv .venv && . .venv/bin/activate && orch ci with-upstreams -- sh -c '.venv/bin/pip install -q -e . pytest && .venv/bin/python -m pytest'"
        );
    }

    #[test]
    fn pins_win_over_base_heads_and_a_missing_branch_is_left_out() {
        let order = ["core".to_string(), "vm".to_string(), "lib".to_string()];
        let pins = [("vm".to_string(), "v-pinned".to_string())];
        let heads = |r: &str| (r != "lib").then(|| format!("{r}-head"));
        let chosen = choose_commits(&order, &pins, &heads);
        assert_eq!(
            chosen,
            [
                ("core".to_string(), Some(("core-head".to_string(), false))),
                ("vm".to_string(), Some(("v-pinned".to_string(), true))),
                ("lib".to_string(), None),
            ]
        );
    }

    #[test]
    fn a_listing_reads_back_what_was_written_and_sums_itself_up() {
        let dir = tempfile::tempdir().unwrap();
        let listing = Listing {
            repo: "net".into(),
            upstreams: vec![
                Upstream {
                    repo: "core".into(),
                    sha: "3b749ae6505828174e2bd36b4cb197ccae754780".into(),
                    path: dir.path().join("core"),
                    pinned: false,
                    branch: "main".into(),
                },
                Upstream {
                    repo: "vm".into(),
                    sha: "0c1d2e3f505828174e2bd36b4cb197ccae754780".into(),
                    path: dir.path().join("vm"),
                    pinned: true,
                    branch: "main".into(),
                },
            ],
        };
        let file = listing.write(dir.path()).unwrap();
        assert_eq!(file, dir.path().join(LIST_FILE));
        assert_eq!(Listing::read(dir.path(), None).unwrap(), listing);
        assert_eq!(
            listing.summary(),
            "core 3b749ae650 (main head), vm 0c1d2e3f50 (pinned)"
        );
        let err = Listing::read(&dir.path().join("nowhere"), None).unwrap_err();
        assert!(err.contains("cannot read the upstream listing"), "{err}");
    }
}
