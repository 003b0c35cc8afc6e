//! What the actions on a worker print: `spawn`, `report`, `cancel`, `approve`, `respawn`,
//! `release`, and `gc` of finished ones.

use super::*;

/// `orch spawn --json`: the worker started, or why none could start.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct SpawnView {
    pub spawned: bool,
    pub repo: String,
    pub worker_id: Option<String>,
    /// WORKING for a detached spawn; where it ended with `--foreground`.
    pub milestone: Option<Milestone>,
    /// The locks in the way.
    pub blockers: Vec<BlockerView>,
    /// Every reason it could not start, as sentences.
    pub reasons: Vec<String>,
}

impl View for SpawnView {
    const NAME: &'static str = "spawn";
}

impl SpawnView {
    pub fn started(repo: &str, worker_id: &str, milestone: Milestone) -> Self {
        SpawnView {
            spawned: true,
            repo: repo.to_string(),
            worker_id: Some(worker_id.to_string()),
            milestone: Some(milestone),
            blockers: Vec::new(),
            reasons: Vec::new(),
        }
    }

    pub fn human(&self) -> String {
        match (&self.worker_id, self.milestone) {
            (Some(id), Some(m)) if self.spawned => format!("{} {} {m}\n", esc(id), self.repo),
            _ => {
                let mut out = format!("not spawned: a worker cannot start on {} now\n", self.repo);
                for r in &self.reasons {
                    out.push_str(&format!("  {}\n", esc(r)));
                }
                out
            }
        }
    }
}

/// `orch report --json`.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ReportView {
    pub worker_id: String,
    /// The milestone reported, or FATAL.
    pub milestone: String,
    /// applied, refused, queued or not_applied.
    pub state: String,
    pub outcome: String,
}

impl View for ReportView {
    const NAME: &'static str = "report";
}

impl ReportView {
    /// "<MILESTONE> <outcome>", never "<MILESTONE>: …": a worker's stdout is read for
    /// milestone lines, and an echoed "DONE: refused …" would count as a second claim.
    pub fn human(&self) -> String {
        format!("{} {}\n", self.milestone, esc(&self.outcome))
    }
}

/// `orch cancel --json`.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct CancelView {
    pub worker_id: String,
    pub cancelled: bool,
    pub by: String,
    /// by_supervisor, or offline (no supervisor ran: orch ended it itself).
    pub how: String,
    pub outcome: String,
}

impl View for CancelView {
    const NAME: &'static str = "cancel";
}

impl CancelView {
    pub fn human(&self) -> String {
        format!("{}: {}\n", esc(&self.worker_id), esc(&self.outcome))
    }
}

/// `orch approve --json`.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ApproveView {
    pub worker_id: String,
    /// The commit the approval is bound to (a later push needs a new approval).
    pub sha: Sha,
    /// The merge base the change is shown against.
    pub merge_base: Sha,
    /// The protected files the change touches.
    pub files: Vec<String>,
    /// `git diff --stat` of those files.
    pub stat: String,
    /// Their patch, as git prints it.
    pub diff: String,
    /// False with `--dry-run` (shown only), or when the approval was refused.
    pub approved: bool,
    /// Who approved: the operator's user name and uid.
    pub by: Option<String>,
    /// by_supervisor, offline (no supervisor ran: orch applied it itself), or dry_run.
    pub how: String,
    /// What came of it (the worker's milestone, or why it was refused).
    pub outcome: String,
}

impl View for ApproveView {
    const NAME: &'static str = "approve";
}

impl ApproveView {
    pub fn human(&self) -> String {
        let mut out = format!(
            "{} at {} touches protected paths: {}\n\n{}\n\n{}\n\n",
            esc(&self.worker_id),
            self.sha.short(),
            esc(&self.files.join(", ")),
            esc_lines(&self.stat),
            esc_lines(&self.diff)
        );
        out.push_str(&format!(
            "{}: {}\n",
            esc(&self.worker_id),
            esc(&self.outcome)
        ));
        out
    }
}

/// Untrusted multi-line text (a diff) escaped line by line: control characters shown, the
/// lines kept.
fn esc_lines(text: &str) -> String {
    text.lines()
        .map(|l| esc(l).into_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

/// `orch respawn --json`.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct RespawnView {
    pub worker_id: String,
    /// Where the replacement continues.
    pub milestone: Milestone,
    pub by: String,
    /// A FAILED worker's task goes to a new worker (reassigned, told its checkpoint): its id.
    pub new_worker: Option<String>,
}

impl View for RespawnView {
    const NAME: &'static str = "respawn";
}

impl RespawnView {
    pub fn human(&self) -> String {
        match &self.new_worker {
            Some(new) => format!(
                "{}: FAILED, its task reassigned by {} to worker {}, which starts in {}\n",
                esc(&self.worker_id),
                esc(&self.by),
                esc(new),
                self.milestone
            ),
            None => format!(
                "{}: respawned by {}, continues in {}\n",
                esc(&self.worker_id),
                esc(&self.by),
                self.milestone
            ),
        }
    }
}

/// `orch release --json`.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ReleaseView {
    pub worker_id: String,
    pub released: bool,
    pub repo: String,
    pub by: String,
    pub reason: String,
}

impl View for ReleaseView {
    const NAME: &'static str = "release";
}

impl ReleaseView {
    pub fn human(&self) -> String {
        format!(
            "released {}'s chain lock ({}) — by {}: {}\n",
            esc(&self.worker_id),
            esc(&self.repo),
            esc(&self.by),
            esc(&self.reason)
        )
    }
}

/// `orch gc --json`: what was removed (or, with `--dry-run`, would be) and what was kept, why.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(transparent)]
pub struct GcView(pub crate::app::gc::GcReport);

impl View for GcView {
    const NAME: &'static str = "gc";
}
