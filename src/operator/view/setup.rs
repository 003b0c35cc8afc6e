//! Views of setting up: what `orch init` wrote (and where), and `orch demo`'s summary.

use super::View;
use crate::ci::verdict::VerdictKind;
use crate::milestone::Milestone;
use crate::sha::Sha;
use schemars::JsonSchema;
use serde::Serialize;

/// What `orch init` did with one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FileAction {
    Written,
    /// It existed and `--force` was not given.
    Kept,
}

/// What a file `orch init` writes is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FileKind {
    /// repos.yaml.
    Config,
    /// The completion contract (`--with-contract`).
    Contract,
    /// A prompt template (`--with-contract`).
    Prompt,
    /// A git repository of the example organisation (`--example`).
    Repository,
    /// The example's scripted worker (`--example`).
    Worker,
    /// The example's wave file (`--example`).
    Wave,
}

/// One file (or, for a repository, directory) `orch init` wrote or kept.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct InitFile {
    pub path: String,
    pub kind: FileKind,
    pub action: FileAction,
}

/// A repository repos.yaml names, and its clone.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct InitRepo {
    pub name: String,
    pub path: String,
}

/// `orch init --json`: what was written, where.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct InitView {
    /// The directory written into (absolute).
    pub dir: String,
    /// `--example`: the demo organisation was written.
    pub example: bool,
    /// repos.yaml's path.
    pub config: String,
    pub repos: Vec<InitRepo>,
    /// In the order written.
    pub files: Vec<InitFile>,
    /// What to do next, as a sentence.
    pub next: String,
}

impl View for InitView {
    const NAME: &'static str = "init";
}

/// One task of `orch demo`'s first part, as verified from the records.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct DemoWorker {
    pub repo: String,
    /// `null` when it was never spawned (the demo timed out first).
    pub worker_id: Option<String>,
    pub milestone: Option<Milestone>,
    /// The last commit it pushed.
    pub sha: Option<Sha>,
    /// CI's verdict on that commit.
    pub verdict: Option<VerdictKind>,
    /// The sync job's (radicle-push) status on that commit.
    pub sync_job: Option<String>,
    /// Times it went back to fix CI.
    pub fix_attempts: u32,
    /// DONE, CI green and the sync job successful.
    pub verified: bool,
}

/// `orch demo`'s second part: the next round of work as one wave run by ticks.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct DemoWave {
    pub name: String,
    pub tasks: usize,
    pub done: usize,
    pub ticks: usize,
    pub all_done: bool,
}

/// `orch demo --json`: its outcome as one object (the live timeline goes to stderr).
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct DemoView {
    /// Every task DONE and verified, the wave's too (the exit code is 0 exactly then).
    pub ok: bool,
    pub elapsed_s: f64,
    /// The throwaway organisation's directory.
    pub dir: String,
    /// Whether `dir` is still there (`--keep`, or the demo failed).
    pub kept: bool,
    pub workers: Vec<DemoWorker>,
    /// `null` when part one did not verify (the wave is not run then).
    pub wave: Option<DemoWave>,
    /// Chain locks held at the end (0 when everything was released).
    pub locks_held: usize,
}

impl View for DemoView {
    const NAME: &'static str = "demo";
}
