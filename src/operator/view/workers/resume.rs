//! What `orch resume` prints: the orphans reconciled and refused, a rebuild from checkpoints.

use super::*;

/// What happened to one orphaned worker.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ReconciledView {
    pub worker_id: String,
    pub repo: String,
    pub before: Milestone,
    pub after: Milestone,
    pub action: crate::app::resume::Action,
    pub detail: String,
}

/// A checkpoint that was not rebuilt.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct RefusedView {
    /// The checkpoint file, or the session directory that has none.
    pub file: String,
    pub worker_id: Option<String>,
    pub why: String,
    /// The repository whose chain is held until an operator has looked.
    pub held: Option<String>,
    /// All of it as a sentence.
    pub text: String,
}

/// What `--from-checkpoints` rebuilt.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct RebuiltView {
    /// Where an unreadable database was moved, if it was.
    pub moved_aside: Option<String>,
    pub workers: usize,
    pub locks: usize,
    pub problems: Vec<String>,
    /// Workers whose checkpoint said DONE and whose commit CI did not prove green again.
    pub unproven_done: Vec<String>,
    pub refused: Vec<RefusedView>,
    /// Operator holds taken again from `holds.yaml`.
    pub holds: Vec<String>,
    /// Waves put back from their checkpoints (`<state>/waves/<name>.checkpoint.yaml`).
    pub waves: Vec<String>,
    /// Operator holds that could not be taken again (or an unreadable `holds.yaml`): an
    /// operator must look; the command exits 1.
    pub lost_holds: Vec<String>,
}

impl From<&crate::app::resume::Rebuilt> for RebuiltView {
    fn from(r: &crate::app::resume::Rebuilt) -> Self {
        RebuiltView {
            moved_aside: r.moved_aside.as_ref().map(|p| p.display().to_string()),
            workers: r.workers,
            locks: r.locks,
            problems: r.problems.clone(),
            unproven_done: r.unproven_done.clone(),
            refused: r
                .refused
                .iter()
                .map(|x| RefusedView {
                    file: x.file.display().to_string(),
                    worker_id: x.worker_id.clone(),
                    why: x.why.clone(),
                    held: x.held.clone(),
                    text: x.describe(),
                })
                .collect(),
            holds: r.holds.clone(),
            waves: r.waves.clone(),
            lost_holds: r.lost_holds.clone(),
        }
    }
}

impl RebuiltView {
    pub fn human(&self) -> String {
        let mut out = String::new();
        if let Some(p) = &self.moved_aside {
            out.push_str(&format!(
                "the unreadable database was moved to {} (not deleted)\n",
                esc(p)
            ));
        }
        out.push_str(&format!(
            "rebuilt {} worker(s) and {} lock(s) from checkpoint files\n",
            self.workers, self.locks
        ));
        for p in &self.problems {
            out.push_str(&format!("  warning: {}\n", esc(p)));
        }
        for u in &self.unproven_done {
            out.push_str(&format!("  not proven: {}\n", esc(u)));
        }
        for x in &self.refused {
            out.push_str(&format!("  REFUSED {}\n", esc(&x.text)));
        }
        for h in &self.holds {
            out.push_str(&format!("  held again: {}\n", esc(h)));
        }
        for w in &self.waves {
            out.push_str(&format!("  {}\n", esc(w)));
        }
        for h in &self.lost_holds {
            out.push_str(&format!("  LOST HOLD {}\n", esc(h)));
        }
        out
    }
}

/// `orch resume --json`.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ResumeView {
    /// Set with `--from-checkpoints`.
    pub rebuilt: Option<RebuiltView>,
    pub resumed: Vec<ReconciledView>,
}

impl View for ResumeView {
    const NAME: &'static str = "resume";
}

impl ResumeView {
    pub fn human_resumed(&self) -> String {
        if self.resumed.is_empty() {
            return "no orphaned workers\n".into();
        }
        let mut t = Table::new(["WORKER", "REPO", "BEFORE", "AFTER", "ACTION", "DETAIL"]);
        for r in &self.resumed {
            t.row([
                esc(&r.worker_id).into_owned(),
                esc(&r.repo).into_owned(),
                r.before.to_string(),
                r.after.to_string(),
                serde_json::to_value(r.action)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default(),
                esc(&r.detail).into_owned(),
            ]);
        }
        t.render()
    }
}
