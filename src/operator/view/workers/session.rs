//! What `sessions show` and `orch logs` print of one worker: its pushes, its events, its
//! return, its timeline's lines.

use super::*;

/// A pushed commit and orch's verdict for it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct PushView {
    pub sha: Sha,
    #[schemars(extend("format" = "date-time"))]
    pub pushed_at: String,
    /// null: not decided yet.
    pub verdict: Option<VerdictKind>,
    pub detail: Option<String>,
    pub failed_jobs: Vec<String>,
    /// The CI runs orch judged, when known.
    pub runs: Option<Vec<CiRun>>,
    #[schemars(extend("format" = "date-time"))]
    pub checked_at: Option<String>,
}

impl From<&PushRecord> for PushView {
    fn from(p: &PushRecord) -> Self {
        PushView {
            sha: p.sha.clone(),
            pushed_at: at(p.pushed_ms),
            verdict: p.verdict,
            detail: p.detail.clone(),
            failed_jobs: p.failed_jobs.clone(),
            runs: p.runs.clone(),
            checked_at: p.checked_ms.map(at),
        }
    }
}

/// One entry of a worker's history.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct EventView {
    pub seq: i64,
    #[schemars(extend("format" = "date-time"))]
    pub at: String,
    pub kind: String,
    /// The worker's milestone after it.
    pub milestone: String,
    pub detail: String,
}

impl From<&WorkerEvent> for EventView {
    fn from(e: &WorkerEvent) -> Self {
        EventView {
            seq: e.seq,
            at: at(e.at_ms),
            kind: e.kind.clone(),
            milestone: e.milestone.clone(),
            detail: e.detail.clone(),
        }
    }
}

/// `orch sessions show --json`: the worker, its pushes and its events.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct SessionView {
    #[serde(flatten)]
    pub worker: WorkerView,
    pub pushes: Vec<PushView>,
    pub events: Vec<EventView>,
    pub worktree: String,
    pub worker_log: String,
    pub checkpoint: String,
    /// What the worker returned, as its checkpoint has it (the contract's `worker_returns`).
    pub returned: ReturnView,
}

/// The contract's `worker_returns`, read from git and CI: files created and modified (every
/// file the change touches), the tests among them, the final CI run, a summary.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ReturnView {
    pub files_created: Vec<String>,
    pub files_modified: Vec<String>,
    pub tests_added: Vec<String>,
    pub final_ci: Option<String>,
    /// orch's account of where the work stands.
    pub summary: String,
    /// The worker's own account of its change: what it said with DONE.
    pub worker_summary: Option<String>,
    /// The decisions it reported (`DECISION:` lines), oldest first.
    pub decisions: Vec<String>,
}

impl View for SessionView {
    const NAME: &'static str = "sessions-show";
}

impl SessionView {
    pub fn human(&self, spent: &str) -> String {
        let w = &self.worker;
        let mut out = String::new();
        let mut line = |k: &str, v: String| out.push_str(&format!("{k:<11}{v}\n"));
        line("worker", esc(&w.worker_id).into_owned());
        line(
            "repo",
            format!(
                "{} (branch {}, base {})",
                esc(&w.repo),
                esc(&w.branch),
                esc(crate::sha::short(&w.base_sha))
            ),
        );
        line("task", esc(&w.task).into_owned());
        line("milestone", format!("{} since {}", w.milestone, w.since));
        if let Some(r) = &w.end_reason {
            line("ended", esc(r).into_owned());
        }
        if !w.protected.is_empty() {
            let approval = match (&w.held_sha, &w.approved_sha, &w.tracked_sha) {
                (Some(h), _, _) if w.superseded.is_some() => {
                    format!("held at {}, superseded: not approved", h.short())
                }
                (Some(h), _, _) => format!("held at {}: `orch approve {}`", h.short(), w.worker_id),
                (None, Some(a), Some(t)) if a == t => format!("approved at {}", a.short()),
                _ => "DONE needs an operator's approval".into(),
            };
            line(
                "protected",
                format!("{} ({})", esc(&w.protected.join(", ")), esc(&approval)),
            );
        }
        if let Some(l) = w
            .landing
            .as_ref()
            .filter(|_| w.milestone == Milestone::Done)
        {
            let mut text = format!("{} ({})", l.summary, l.policy);
            for d in &l.downstream {
                text.push_str(&format!(
                    "; {}: {}",
                    d.repo,
                    d.verdict.map(|v| v.as_str()).unwrap_or("checking")
                ));
            }
            line("landing", esc(&text).into_owned());
        }
        if let Some(s) = &w.superseded {
            line("superseded", esc(s).into_owned());
        }
        line("supervisor", w.supervision.sentence().to_string());
        line("spent", spent.to_string());
        if let Some(m) = &w.model {
            line(
                "model",
                format!(
                    "{} ({})",
                    esc(m),
                    esc(w.model_source.as_deref().unwrap_or("-"))
                ),
            );
        }
        if let Some(s) = &w.session_id {
            line("session", esc(s).into_owned());
        }
        line("worktree", esc(&self.worktree).into_owned());
        line("log", esc(&self.worker_log).into_owned());
        line("checkpoint", esc(&self.checkpoint).into_owned());
        let r = &self.returned;
        let list = |v: &[String]| {
            if v.is_empty() {
                "-".to_string()
            } else {
                esc(&v.join(", ")).into_owned()
            }
        };
        out.push_str("returned:\n");
        out.push_str(&format!("  created    {}\n", list(&r.files_created)));
        out.push_str(&format!("  modified   {}\n", list(&r.files_modified)));
        out.push_str(&format!("  tests      {}\n", list(&r.tests_added)));
        out.push_str(&format!(
            "  final CI   {}\n",
            esc(r.final_ci.as_deref().unwrap_or("-"))
        ));
        out.push_str(&format!("  summary    {}\n", esc(&r.summary)));
        if let Some(said) = &r.worker_summary {
            out.push_str(&format!("  its words  {}\n", esc(said)));
        }
        for d in &r.decisions {
            out.push_str(&format!("  decision   {}\n", esc(d)));
        }
        if !self.pushes.is_empty() {
            out.push_str("pushes:\n");
            for ps in &self.pushes {
                out.push_str(&format!(
                    "  {} {}{}\n",
                    esc(ps.sha.short()),
                    ps.verdict.map(|v| v.as_str()).unwrap_or("pending"),
                    ps.detail
                        .as_deref()
                        .map(|d| format!(" — {}", esc(d)))
                        .unwrap_or_default()
                ));
            }
        }
        out.push_str("events:\n");
        let mut t = Table::new(["AT", "EVENT", "DETAIL"]);
        for e in &self.events {
            t.row([
                e.at.clone(),
                esc(&e.kind).into_owned(),
                esc(&e.detail).into_owned(),
            ]);
        }
        for l in t.render().lines() {
            out.push_str(&format!("  {l}\n"));
        }
        out
    }
}

/// One line of `orch logs --json`.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
#[schemars(deny_unknown_fields)]
pub enum LogLineView<'a> {
    /// A line of the worker's output, as written (untrusted).
    Log { text: &'a str },
    /// An event orch recorded: `at` RFC 3339, `milestone` the worker's after it.
    Event {
        seq: i64,
        #[schemars(extend("format" = "date-time"))]
        at: String,
        kind: &'a str,
        milestone: &'a str,
        detail: &'a str,
    },
}

impl View for LogLineView<'_> {
    const NAME: &'static str = "logs-line";
}

impl<'a> LogLineView<'a> {
    pub fn of(entry: &'a Entry) -> LogLineView<'a> {
        match entry {
            Entry::Line(text) => LogLineView::Log { text },
            Entry::Event(e) => LogLineView::Event {
                seq: e.seq,
                at: at(e.at_ms),
                kind: &e.kind,
                milestone: &e.milestone,
                detail: &e.detail,
            },
        }
    }
}
