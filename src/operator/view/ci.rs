//! Views of a commit's CI: `ci status` and `ci logs`.

use super::View;
use crate::ci::CiRun;
use crate::ci::verdict::VerdictKind;
use schemars::JsonSchema;
use serde::Serialize;

/// `orch ci status --json`: orch's verdict on a commit and the runs it judged.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct CiStatusView {
    pub repo: String,
    pub sha: String,
    pub verdict: VerdictKind,
    pub runs: Vec<CiRun>,
    pub failed_jobs: Vec<String>,
    pub detail: String,
    /// Set when the answer is the verdict orch's supervisor recorded (the caller has no
    /// forge credentials): when it was recorded.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(extend("format" = "date-time"))]
    pub recorded_at: Option<String>,
}

impl View for CiStatusView {
    const NAME: &'static str = "ci-status";
}

impl CiStatusView {
    pub fn human(&self) -> String {
        let mut out = format!(
            "{} {}: {}\n",
            self.repo,
            crate::sha::short_to(&self.sha, 12),
            self.verdict
        );
        if !self.detail.is_empty() {
            out.push_str(&format!("  {}\n", self.detail));
        }
        if let Some(at) = &self.recorded_at {
            out.push_str(&format!("  (as last recorded by orch at {at})\n"));
        }
        for run in &self.runs {
            out.push_str(&format!(
                "  run #{} ({}, {})\n",
                run.number,
                run.event,
                run.status.map(|s| s.as_str()).unwrap_or("-")
            ));
            if run.jobs.is_empty() {
                continue;
            }
            let mut t = super::Table::new(["JOB", "STATUS", "ATTEMPT"]);
            for job in &run.jobs {
                t.row([
                    crate::text::escape(&job.name).into_owned(),
                    job.status.to_string(),
                    job.attempt.to_string(),
                ]);
            }
            t.right(2);
            for line in t.render().lines() {
                out.push_str(&format!("    {line}\n"));
            }
        }
        if !self.failed_jobs.is_empty() {
            out.push_str(&format!("  failed: {}\n", self.failed_jobs.join(", ")));
        }
        out
    }
}

/// One job's log (null: the forge keeps none for it).
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct JobLog {
    pub job: String,
    pub log: Option<String>,
}

/// `orch ci logs --json`.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct CiLogsView {
    pub repo: String,
    pub sha: String,
    pub jobs: Vec<JobLog>,
}

impl View for CiLogsView {
    const NAME: &'static str = "ci-logs";
}
