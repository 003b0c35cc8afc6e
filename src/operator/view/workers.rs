//! Views of workers: `status`, `sessions list|show`, `spawn`, `report`, `cancel`,
//! `respawn`, `release`, `resume` and `alerts`.

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

/// One sink's delivery of an alert.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct DeliveryView {
    pub sink: String,
    /// pending, delivered or given_up.
    pub state: String,
    pub attempts: i64,
    pub last_error: Option<String>,
    /// When a pending delivery is tried next.
    #[schemars(extend("format" = "date-time"))]
    pub next_attempt_at: Option<String>,
    /// When it was delivered or given up.
    #[schemars(extend("format" = "date-time"))]
    pub done_at: Option<String>,
}

/// An alert with its deliveries.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct AlertEntry {
    /// The alert as alerts.jsonl has it.
    #[serde(flatten)]
    pub alert: AlertLine,
    pub deliveries: Vec<DeliveryView>,
}

/// `orch alerts --json`: newest last.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct AlertsView {
    pub alerts: Vec<AlertEntry>,
}

impl View for AlertsView {
    const NAME: &'static str = "alerts";
}

impl AlertsView {
    pub fn human(&self) -> String {
        let mut out = String::new();
        let mut t = Table::new(["AT", "SEVERITY", "KIND", "WORKER", "MESSAGE"]);
        for e in &self.alerts {
            let a = &e.alert;
            let repeats = if a.repeats > 1 {
                format!(" (x{})", a.repeats)
            } else {
                String::new()
            };
            let resolved = if a.resolved_at.is_some() {
                " [resolved]"
            } else {
                ""
            };
            t.row([
                a.at.clone(),
                esc(&a.severity).into_owned(),
                esc(&a.kind).into_owned(),
                esc(a.worker_id.as_deref().unwrap_or("-")).into_owned(),
                format!("{}{repeats}{resolved}", esc(&a.message)),
            ]);
        }
        // Deliveries go under their alert, so the rows are laid out by the table and the
        // delivery lines inserted after each.
        let table = t.render();
        let mut lines = table.lines();
        if let Some(h) = lines.next() {
            out.push_str(h);
            out.push('\n');
        }
        for (e, row) in self.alerts.iter().zip(lines) {
            out.push_str(row);
            out.push('\n');
            for d in &e.deliveries {
                let plural = |n: i64| super::plural(n as usize, "attempt", "attempts");
                let detail = match (d.state.as_str(), &d.last_error) {
                    ("delivered", _) => format!("delivered after {}", plural(d.attempts)),
                    ("pending", Some(err)) => format!(
                        "pending: {}, last error: {}; next at {}",
                        plural(d.attempts),
                        esc(err),
                        d.next_attempt_at.as_deref().unwrap_or("-")
                    ),
                    ("pending", None) => "pending".to_string(),
                    (_, err) => format!("given up: {}", esc(err.as_deref().unwrap_or("-"))),
                };
                out.push_str(&format!("    -> {} {detail}\n", esc(&d.sink)));
            }
        }
        out
    }
}

/// `orch gc --json`: what was removed (or, with `--dry-run`, would be) and what was kept, why.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(transparent)]
pub struct GcView(pub crate::app::gc::GcReport);

impl View for GcView {
    const NAME: &'static str = "gc";
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
