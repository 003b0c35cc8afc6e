//! Views of workers: `status` and `sessions list` here (a worker, its landing, its spending);
//! one worker's session and log lines in `session.rs`, the actions on workers in `actions.rs`,
//! `resume` in `resume.rs`, `alerts` in `alerts.rs` — re-exported, so each is
//! `view::workers::<View>`.

mod actions;
mod alerts;
mod resume;
mod session;

pub use actions::{
    ApproveView, CancelView, GcView, ReleaseView, ReportView, RespawnView, SpawnView,
};
pub use alerts::{AlertEntry, AlertsView, DeliveryView};
pub use resume::{RebuiltView, ReconciledView, RefusedView, ResumeView};
pub use session::{EventView, LogLineView, PushView, ReturnView, SessionView};

use super::locks::{BlockerView, LockView};
use super::{Table, View, at, human_duration, secs_between};
use crate::alerts::AlertLine;
use crate::app::logs::Entry;
use crate::app::operator::Supervision;
use crate::ci::CiRun;
use crate::ci::verdict::VerdictKind;
use crate::milestone::Milestone;
use crate::sha::Sha;
use crate::store::usage::{Tokens, Usage};
use crate::store::workers::{PushRecord, WorkerEvent, WorkerRecord};
use crate::text::escape as esc;
use schemars::JsonSchema;
use serde::Serialize;

/// What a worker's agent spent, summed over its runs.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct UsageView {
    /// Dollars (0 when the agent reports no dollar figure: Codex).
    pub cost_usd: f64,
    pub tokens: Tokens,
    pub total_tokens: u64,
    /// Agent runs that reported usage.
    pub runs: u32,
}

impl UsageView {
    /// `None`: its agent reported nothing.
    pub fn of(u: Option<&Usage>) -> Option<Self> {
        match u {
            Some(u) if u.invocations > 0 || u.tokens.total() > 0 => Some(UsageView {
                cost_usd: u.cost_usd,
                tokens: u.tokens,
                total_tokens: u.tokens.total(),
                runs: u.invocations,
            }),
            _ => None,
        }
    }
}

/// "$0.0151, 12.3k tokens (2 runs)", or "-".
pub fn usage_text(u: Option<&Usage>) -> String {
    match u {
        Some(u) if u.invocations > 0 || u.tokens.total() > 0 => {
            crate::app::supervisor::agent::spend::describe(u)
        }
        _ => "-".into(),
    }
}

/// Who supervises a worker now, as a stable word.
#[derive(Debug, Clone, Copy, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SupervisionView {
    /// The worker has ended.
    Ended,
    Alive,
    /// Alive, but its lease lapsed (it cannot write to the state directory).
    LeaseLapsed,
    /// Gone: `orch resume` takes the worker over.
    Gone,
    /// Nobody: the worker waits for an operator (`orch respawn`, `orch cancel`).
    AwaitsOperator,
    /// Nobody, and nobody will: another attempt superseded it (`superseded` says which); it is
    /// not respawned or approved (`orch cancel` ends it).
    Superseded,
}

impl From<Supervision> for SupervisionView {
    fn from(s: Supervision) -> Self {
        match s {
            Supervision::Ended => SupervisionView::Ended,
            Supervision::Alive => SupervisionView::Alive,
            Supervision::LeaseLapsed => SupervisionView::LeaseLapsed,
            Supervision::Gone => SupervisionView::Gone,
            Supervision::AwaitsOperator => SupervisionView::AwaitsOperator,
        }
    }
}

impl SupervisionView {
    pub fn column(self) -> &'static str {
        match self {
            SupervisionView::Ended => "-",
            SupervisionView::Alive => "alive",
            SupervisionView::LeaseLapsed => "alive, lease lapsed",
            SupervisionView::Gone => "GONE (orch resume)",
            SupervisionView::AwaitsOperator => "none (orch respawn)",
            SupervisionView::Superseded => "none (superseded)",
        }
    }

    pub fn sentence(self) -> &'static str {
        match self {
            SupervisionView::Ended => "not running (the worker has ended)",
            SupervisionView::Alive => "alive",
            SupervisionView::LeaseLapsed => {
                "alive, but its lease lapsed (it cannot write to the state directory: disk full?); `orch resume` would take the worker over"
            }
            SupervisionView::Gone => "not running (`orch resume` takes the worker over)",
            SupervisionView::AwaitsOperator => {
                "not running (the worker waits for an operator: `orch respawn <id> --note …` gives it another go, `orch cancel <id>` ends it)"
            }
            SupervisionView::Superseded => {
                "not running (superseded by another attempt of its task: it is not respawned or approved; `orch cancel <id>` ends it)"
            }
        }
    }
}

/// One worker as `status` and `sessions` show it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct WorkerView {
    pub worker_id: String,
    pub repo: String,
    pub task: String,
    pub task_id: Option<String>,
    pub component: Option<String>,
    pub milestone: Milestone,
    /// When it reached its milestone.
    #[schemars(extend("format" = "date-time"))]
    pub since: String,
    /// Seconds in its milestone.
    pub age_s: u64,
    #[schemars(extend("format" = "date-time"))]
    pub created_at: String,
    pub branch: String,
    pub base_sha: String,
    /// The last pushed (and verified) commit; CI is followed for it alone.
    pub tracked_sha: Option<Sha>,
    pub verdict: Option<VerdictKind>,
    pub failed_jobs: Vec<String>,
    pub fix_attempts: u32,
    /// The fix attempts it may make (`FIXING_CI.max_attempts`): `fix_attempts` of this.
    pub fix_attempts_max: u32,
    /// How far CI for the tracked commit has got (null: no push run seen yet): the jobs of
    /// its push runs that passed, out of all, and those running now.
    pub ci_jobs: Option<crate::ci::verdict::JobTally>,
    /// CI restarts in this PUSHED_TO_CI stint (stuck CI is restarted once).
    pub ci_restarts: u32,
    /// The deadlock indicators that held at the last check (`worker_idle`, `no_commits`,
    /// `ci_stuck_in_pending`, `api_errors`); each one raised an alert.
    pub deadlock: Vec<String>,
    /// Why it stopped, when it did.
    pub end_reason: Option<String>,
    pub worker_running: bool,
    pub supervisor_alive: bool,
    pub supervision: SupervisionView,
    pub respawns: i64,
    /// What its agent spent (null: nothing reported).
    pub usage: Option<UsageView>,
    /// The agent's conversation id.
    pub session_id: Option<String>,
    /// `<wave>:<task>` when a wave started it.
    pub wave: Option<String>,
    /// How its change reaches the base branch (null: a worker from before landing existed).
    pub landing: Option<LandingView>,
    /// The protected files (`ci.protected_paths`) its tracked commit's change touches.
    pub protected: Vec<String>,
    /// The green commit held for an operator's approval (`orch approve`): BLOCKED until then.
    pub held_sha: Option<Sha>,
    /// The commit an operator approved (a later push needs a new approval).
    pub approved_sha: Option<Sha>,
    /// The model its agent runs with (null: the agent's own default), chosen at spawn.
    pub model: Option<String>,
    /// Why that model: `task` (its own `model:`), `override:<condition>`
    /// (`worker.model_overrides`), `repo`, `worker`.
    pub model_source: Option<String>,
    /// Stopped by a FATAL on its chain (the reason): it goes on only once an operator clears
    /// the hold (`orch fatal --clear`).
    pub halted: Option<String>,
    /// The node whose process supervises it, or last did (`orch nodes`; null: recorded before
    /// nodes were).
    pub node: Option<String>,
    /// What superseded it, in words (a later attempt of its task, the worker its task was
    /// reassigned to, a later worker that did it): it is not respawned or approved. Null: not
    /// superseded (or not a stopped worker, where it is not looked at).
    pub superseded: Option<String>,
}

/// A worker's landing (see README, "From DONE to the base branch").
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct LandingView {
    /// planned (not DONE yet), pending, verifying, base_ci, landed, waiting (land: none),
    /// conflict, refused.
    pub state: crate::milestone::LandState,
    /// merge or none.
    pub policy: String,
    /// merge, rebase or squash (how an integration is built).
    pub method: String,
    /// The verified DONE commit.
    pub done_sha: Option<Sha>,
    /// The integration being verified on `orch/<id>-land`.
    pub candidate_sha: Option<Sha>,
    /// The commit the base branch was moved to (or found at).
    pub landed_sha: Option<Sha>,
    pub attempts: u32,
    /// What happened last (a conflict's files, a refusal's reason).
    pub detail: Option<String>,
    /// One phrase: `landed 1a2b3c4`, `conflict: …`.
    pub summary: String,
    /// `pull_request`: the pull request orch opened, and its page.
    pub pull: Option<i64>,
    pub pull_url: Option<String>,
    /// The dependents checked on the landed change (`downstream.depth`).
    pub downstream: Vec<crate::milestone::DownstreamCheck>,
}

impl LandingView {
    pub fn of(l: &crate::milestone::Landing) -> Self {
        LandingView {
            state: l.state,
            policy: l.policy.as_str().to_string(),
            method: l.method.as_str().to_string(),
            done_sha: l.done_sha.clone(),
            candidate_sha: l.candidate.clone(),
            landed_sha: l.landed.clone(),
            attempts: l.attempts,
            detail: l.detail.clone(),
            summary: l.summary(),
            pull: l.pull,
            pull_url: l.pull_url.clone(),
            downstream: l.downstream.clone(),
        }
    }
}

impl WorkerView {
    pub fn of(
        w: &WorkerRecord,
        u: Option<&Usage>,
        wave: Option<String>,
        fix_attempts_max: u32,
        now_ms: i64,
    ) -> Self {
        let p = &w.progress;
        WorkerView {
            worker_id: w.id.clone(),
            repo: w.repo.clone(),
            task: w.task.clone(),
            task_id: w.task_id.clone(),
            component: w.component.clone(),
            milestone: p.milestone,
            since: at(p.since_ms),
            age_s: secs_between(p.since_ms, now_ms),
            created_at: at(w.created_ms),
            branch: w.branch.clone(),
            base_sha: w.base_sha.clone(),
            tracked_sha: p.tracked_sha.clone(),
            verdict: p.verdict,
            failed_jobs: p.failed_jobs.clone(),
            fix_attempts: p.fix_attempts,
            fix_attempts_max,
            ci_jobs: p.ci_jobs.clone(),
            ci_restarts: p.ci_restarts,
            // Indicators are about a worker at work: an ended one's last check is history.
            deadlock: if p.milestone.at_work() {
                p.deadlock.clone()
            } else {
                Vec::new()
            },
            end_reason: p.end_reason.clone(),
            worker_running: w.worker_running,
            supervisor_alive: w.supervised(now_ms),
            supervision: crate::app::operator::supervision(w, now_ms).into(),
            respawns: w.respawns,
            usage: UsageView::of(u),
            session_id: u.and_then(|u| u.session_id.clone()),
            wave,
            landing: p.landing.as_ref().map(LandingView::of),
            protected: p.protected.clone(),
            held_sha: p.held.clone().filter(|_| p.milestone == Milestone::Blocked),
            approved_sha: p.approved.clone(),
            model: w.model.clone(),
            model_source: w.model_source.clone(),
            halted: p.halted.clone(),
            node: w.node.clone(),
            superseded: None,
        }
    }

    /// The view of a worker another attempt superseded (`by`, in words): nobody will supervise
    /// it again.
    pub fn superseded(mut self, by: Option<String>) -> Self {
        if by.is_some() && matches!(self.supervision, SupervisionView::AwaitsOperator) {
            self.supervision = SupervisionView::Superseded;
        }
        self.superseded = by;
        self
    }
}

impl WorkerView {
    /// The milestone, with the fix attempt while fixing (`FIXING_CI 2/5`).
    pub fn milestone_column(&self) -> String {
        let m = if self.milestone == Milestone::FixingCi {
            format!(
                "{} {}/{}",
                self.milestone, self.fix_attempts, self.fix_attempts_max
            )
        } else {
            self.milestone.as_str().to_string()
        };
        if self.halted.is_some() {
            format!("{m} (FATAL)")
        } else {
            m
        }
    }

    /// The verdict, with CI's substates while it is undecided (`running: ci 3/6 jobs,
    /// running build`) and a restart.
    pub fn ci_column(&self) -> String {
        let mut s = self.verdict.map(|v| v.as_str()).unwrap_or("-").to_string();
        if let Some(t) = &self.ci_jobs
            && !self.verdict.is_some_and(|v| v.is_terminal())
        {
            s.push_str(&format!(": {}", t.summary()));
        }
        if self.ci_restarts > 0 {
            s.push_str(" (restarted)");
        }
        s
    }
}

/// What the workers of one model spent (`status`: the workers it shows).
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct ModelSpendView {
    /// null: the agent's own default model.
    pub model: Option<String>,
    pub workers: usize,
    pub cost_usd: f64,
    pub total_tokens: u64,
}

impl ModelSpendView {
    /// One entry per model among `workers`, in the order first seen, with what each spent.
    pub fn of(workers: &[WorkerView]) -> Vec<ModelSpendView> {
        let mut out: Vec<ModelSpendView> = Vec::new();
        for w in workers {
            let at = match out.iter().position(|m| m.model == w.model) {
                Some(at) => at,
                None => {
                    out.push(ModelSpendView {
                        model: w.model.clone(),
                        workers: 0,
                        cost_usd: 0.0,
                        total_tokens: 0,
                    });
                    out.len() - 1
                }
            };
            let m = &mut out[at];
            m.workers += 1;
            if let Some(u) = &w.usage {
                m.cost_usd += u.cost_usd;
                m.total_tokens += u.total_tokens;
            }
        }
        out
    }

    /// "spent by model: opus $0.1200, 12.3k tokens (2 workers); …", or nothing when no
    /// worker shown has a model and none spent anything.
    pub fn line(all: &[ModelSpendView]) -> String {
        if all.iter().all(|m| m.model.is_none()) {
            return String::new();
        }
        let parts: Vec<String> = all
            .iter()
            .map(|m| {
                format!(
                    "{} ${:.4}, {} tokens ({} worker{})",
                    esc(m.model.as_deref().unwrap_or("agent default")),
                    m.cost_usd,
                    m.total_tokens,
                    m.workers,
                    if m.workers == 1 { "" } else { "s" }
                )
            })
            .collect();
        format!("spent by model: {}\n", parts.join("; "))
    }
}

/// `orch status --json`.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct StatusView {
    /// Every live worker (oldest first; on the first page only), then ended ones, newest
    /// ended first: the last 20 unless `--all`, `--since` or `--limit` say otherwise.
    pub workers: Vec<WorkerView>,
    pub locks: Vec<LockView>,
    /// Ended workers the filters select that this answer leaves out.
    pub more_ended: usize,
    /// Pass to `--after` for the next page (null: this was the last).
    pub next: Option<String>,
    /// What the workers shown spent, per model.
    pub spent_by_model: Vec<ModelSpendView>,
    /// The chains a FATAL halts (`orch fatal`), oldest first.
    pub fatal_holds: Vec<super::locks::FatalHoldView>,
}

/// The line under a listing that left ended workers out.
fn more_line(more: usize) -> String {
    if more == 0 {
        return String::new();
    }
    format!(
        "… {more} more ended; --all (or --since, --limit) shows {}\n",
        if more == 1 { "it" } else { "them" }
    )
}

impl View for StatusView {
    const NAME: &'static str = "status";
}

impl StatusView {
    /// The human tables: the workers selected (live ones, the last ended), then the locks.
    /// `spent` gives each worker's spending text.
    pub fn human(&self, spent: impl Fn(&str) -> String) -> String {
        let mut out = String::new();
        let active: Vec<&WorkerView> = self.workers.iter().collect();
        if active.is_empty() {
            out.push_str("no workers\n");
        } else {
            // The node column once workers are supervised elsewhere than here (a shared store).
            let nodes = active
                .iter()
                .any(|w| w.node.as_deref().is_some_and(|n| n != crate::node::name()));
            let mut header = vec![
                "WORKER",
                "REPO",
                "MILESTONE",
                "AGE",
                "SHA",
                "CI",
                "SUPERVISOR",
                "SPENT",
                "MODEL",
                "WAVE",
                "LANDING",
            ];
            if nodes {
                header.push("NODE");
            }
            let mut t = Table::with_header(&header);
            for w in active {
                let landing = match &w.landing {
                    Some(l) if w.milestone == Milestone::Done => l.summary.clone(),
                    _ => "-".into(),
                };
                let mut row = vec![
                    esc(&w.worker_id).into_owned(),
                    esc(&w.repo).into_owned(),
                    w.milestone_column(),
                    human_duration(w.age_s),
                    w.tracked_sha
                        .as_ref()
                        .map(|s| s.short().to_string())
                        .unwrap_or_else(|| "-".into()),
                    esc(&w.ci_column()).into_owned(),
                    w.supervision.column().to_string(),
                    spent(&w.worker_id),
                    esc(w.model.as_deref().unwrap_or("-")).into_owned(),
                    esc(w.wave.as_deref().unwrap_or("-")).into_owned(),
                    esc(&landing).into_owned(),
                ];
                if nodes {
                    row.push(esc(w.node.as_deref().unwrap_or("-")).into_owned());
                }
                t.row(row);
            }
            t.right(3);
            out.push_str(&t.render());
            out.push_str(&ModelSpendView::line(&self.spent_by_model));
            for w in &self.workers {
                if !w.deadlock.is_empty() {
                    out.push_str(&format!(
                        "{}: deadlock indicators: {} (see `orch alerts`)\n",
                        esc(&w.worker_id),
                        w.deadlock.join(", ")
                    ));
                }
                if let Some(sha) = w.held_sha.as_ref().filter(|_| w.superseded.is_none()) {
                    out.push_str(&format!(
                        "{} is held at {}: its change touches protected paths ({}); `orch approve {}` shows the diff\n",
                        esc(&w.worker_id),
                        sha.short(),
                        esc(&w.protected.join(", ")),
                        esc(&w.worker_id)
                    ));
                }
            }
        }
        out.push_str(&more_line(self.more_ended));
        for h in &self.fatal_holds {
            out.push_str(&format!(
                "FATAL on {}'s chain by {} at {}: {} — nothing there starts or goes on until `orch fatal --clear {}`\n",
                esc(&h.repo),
                esc(&h.by),
                h.at,
                esc(&h.reason),
                esc(&h.repo)
            ));
        }
        out.push('\n');
        if self.locks.is_empty() {
            out.push_str("no locks held\n");
        } else {
            let mut t = Table::new(["LOCKED REPO", "HOLDER", "KIND", "AGE", "REASON"]);
            for lk in &self.locks {
                t.row([
                    esc(&lk.repo).into_owned(),
                    esc(&lk.holder).into_owned(),
                    lk.kind.as_str().to_string(),
                    human_duration(lk.age_s),
                    esc(lk.reason.as_deref().unwrap_or("-")).into_owned(),
                ]);
            }
            t.right(3);
            out.push_str(&t.render());
        }
        out
    }
}

/// `orch sessions list --json`.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct SessionsView {
    /// As `status`'s workers: live ones, then ended ones newest ended first.
    pub sessions: Vec<WorkerView>,
    /// Ended workers the filters select that this answer leaves out.
    pub more_ended: usize,
    /// Pass to `--after` for the next page (null: this was the last).
    pub next: Option<String>,
}

impl View for SessionsView {
    const NAME: &'static str = "sessions-list";
}

impl SessionsView {
    pub fn human(&self) -> String {
        if self.sessions.is_empty() {
            return format!("no sessions\n{}", more_line(self.more_ended));
        }
        let mut t = Table::new(["WORKER", "REPO", "MILESTONE", "CREATED", "TASK", "ENDED"]);
        for w in &self.sessions {
            t.row([
                esc(&w.worker_id).into_owned(),
                esc(&w.repo).into_owned(),
                w.milestone.as_str().to_string(),
                w.created_at.clone(),
                esc(&w.task).into_owned(),
                w.end_reason
                    .as_deref()
                    .map(|r| esc(r).into_owned())
                    .unwrap_or_else(|| "-".into()),
            ]);
        }
        t.render() + &more_line(self.more_ended)
    }
}
