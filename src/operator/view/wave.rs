//! Views of waves: `wave plan`, `wave run --tick`, the lines of `wave run --until-done`, and
//! `wave status`.

use super::{Table, View, at, human_ms, secs};
use crate::app::wave::{CancelReport, PlanReport, TaskView, TickReport, WaveView};
use crate::text::escape as esc;
use schemars::JsonSchema;
use serde::Serialize;

/// One task in the simulated schedule; offsets in seconds from the wave's start.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct PlannedTask {
    pub task: String,
    pub repo: String,
    pub estimate_s: f64,
    /// file, history or default.
    pub estimate_source: String,
    pub start_s: f64,
    pub end_s: f64,
}

/// LB = max(longest task, critical path, total work / min(slots, width)), in seconds.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct LowerBoundView {
    pub lb_s: f64,
    pub longest_task_s: f64,
    pub critical_path_s: f64,
    pub total_work_s: f64,
    /// The largest set of tasks that may run at once.
    pub width: usize,
    /// Whether `width` is exact (else an upper estimate; LB stays a lower bound).
    pub width_exact: bool,
    pub slots: usize,
}

/// The seed's phase plan: each layer of the repository graph after the previous one.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct PhasePlanView {
    pub makespan_s: f64,
    pub phases: usize,
}

/// `orch wave plan --json`.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct PlanView {
    pub wave: String,
    pub max_parallel: usize,
    /// In start order.
    pub schedule: Vec<PlannedTask>,
    pub makespan_s: f64,
    pub lower_bound: LowerBoundView,
    /// makespan / lower bound (1.0 for an empty wave).
    pub ratio: f64,
    pub phase_plan: PhasePlanView,
    /// 1 - makespan / phase plan's makespan.
    pub improvement_over_phase_plan: f64,
}

impl View for PlanView {
    const NAME: &'static str = "wave-plan";
}

impl PlanView {
    pub fn of(r: &PlanReport) -> Self {
        let p = &r.plan;
        let b = &p.bound;
        PlanView {
            wave: r.wave.clone(),
            max_parallel: r.max_parallel,
            schedule: p
                .slots
                .iter()
                .map(|s| PlannedTask {
                    task: r.tasks[s.task].id.clone(),
                    repo: r.tasks[s.task].repo.clone(),
                    estimate_s: secs(r.estimates_ms[s.task]),
                    estimate_source: r.estimate_sources[s.task].to_string(),
                    start_s: secs(s.start_ms),
                    end_s: secs(s.end_ms),
                })
                .collect(),
            makespan_s: secs(p.makespan_ms),
            lower_bound: LowerBoundView {
                lb_s: secs(b.lb_ms),
                longest_task_s: secs(b.longest_task_ms),
                critical_path_s: secs(b.critical_path_ms),
                total_work_s: secs(b.total_work_ms),
                width: b.width,
                width_exact: b.width_exact,
                slots: b.slots,
            },
            ratio: p.ratio,
            phase_plan: PhasePlanView {
                makespan_s: secs(p.phase_makespan_ms),
                phases: p.phases,
            },
            improvement_over_phase_plan: if p.phase_makespan_ms == 0 {
                0.0
            } else {
                1.0 - p.makespan_ms as f64 / p.phase_makespan_ms as f64
            },
        }
    }

    /// The schedule table.
    pub fn human_table(&self) -> String {
        let mut t = Table::new(["TASK", "REPO", "ESTIMATE", "FROM", "START", "END"]);
        for s in &self.schedule {
            t.row([
                esc(&s.task).into_owned(),
                esc(&s.repo).into_owned(),
                human_s(s.estimate_s),
                s.estimate_source.clone(),
                human_s(s.start_s),
                human_s(s.end_s),
            ]);
        }
        t.right(2).right(4).right(5);
        t.render()
    }
}

/// A human duration from (fractional) seconds.
pub fn human_s(s: f64) -> String {
    human_ms((s * 1000.0).round() as u64)
}

/// A task a tick started.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct StartedView {
    pub task: String,
    pub repo: String,
    pub worker: String,
}

/// A task a tick could not start, and why.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct NotStartedView {
    pub task: String,
    pub why: String,
}

/// `orch wave run --tick --json`.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct TickView {
    pub wave: String,
    /// Another tick of this wave held its lock: this one did nothing.
    pub skipped: bool,
    /// The wave was recorded by this tick.
    pub first_sight: bool,
    /// Tasks that joined the wave (its file gained them).
    pub added: Vec<String>,
    /// Orphaned workers taken over.
    pub resumed: usize,
    pub started: Vec<StartedView>,
    pub failed_to_start: Vec<NotStartedView>,
    /// Why the tasks ready to start wait (the worker's program is not installed); the next
    /// tick tries again.
    pub waiting: Option<String>,
    /// Alerts raised by this tick.
    pub alerts: Vec<String>,
    /// The wave after the tick (null when skipped).
    pub status: Option<WaveStatusView>,
}

impl View for TickView {
    const NAME: &'static str = "wave-tick";
}

impl TickView {
    pub fn human(&self) -> String {
        let mut out = String::new();
        let name = esc(&self.wave);
        if self.skipped {
            return format!("wave {name}: another tick of this wave is still running; skipped\n");
        }
        if self.first_sight {
            out.push_str(&format!("wave {name}: first tick; recorded\n"));
        }
        for a in &self.added {
            out.push_str(&format!("wave {name}: task {} joined\n", esc(a)));
        }
        if self.resumed > 0 {
            out.push_str(&format!(
                "resumed {}\n",
                super::plural(self.resumed, "orphaned worker", "orphaned workers")
            ));
        }
        for s in &self.started {
            out.push_str(&format!(
                "started {} on {} (worker {})\n",
                esc(&s.task),
                esc(&s.repo),
                esc(&s.worker)
            ));
        }
        for f in &self.failed_to_start {
            out.push_str(&format!(
                "could not start {}: {}\n",
                esc(&f.task),
                esc(&f.why)
            ));
        }
        if let Some(why) = &self.waiting {
            out.push_str(&format!("wave {name}: ready tasks wait: {}\n", esc(why)));
        }
        for a in &self.alerts {
            out.push_str(&format!("alert: {}\n", esc(a)));
        }
        if let Some(v) = &self.status {
            out.push_str(&v.summary());
            out.push('\n');
            if !v.finished {
                for t in &v.tasks {
                    if t.waiting_on.iter().any(|w| w.state != "PENDING") {
                        out.push_str(&format!("  {} {}\n", esc(&t.id), esc(&t.waiting_text())));
                    }
                }
            }
        }
        out
    }
}

impl TickView {
    pub fn of(r: &TickReport) -> Self {
        TickView {
            wave: r.wave.clone(),
            skipped: r.skipped,
            first_sight: r.first_sight,
            added: r.added.clone(),
            resumed: r.resumed,
            started: r
                .started
                .iter()
                .map(|s| StartedView {
                    task: s.task.clone(),
                    repo: s.repo.clone(),
                    worker: s.worker.clone(),
                })
                .collect(),
            failed_to_start: r
                .failed_to_start
                .iter()
                .map(|(task, why)| NotStartedView {
                    task: task.clone(),
                    why: why.clone(),
                })
                .collect(),
            waiting: r.waiting.clone(),
            alerts: r.alerts.clone(),
            status: r.view.as_ref().map(WaveStatusView::of),
        }
    }
}

/// One line of `orch wave run --until-done --json`: a task changed state. The last line is
/// the wave's status (wave-status).
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct RunLineView {
    /// Seconds since the run began.
    pub elapsed_s: f64,
    pub task: String,
    pub repo: String,
    pub state: String,
    pub worker: Option<String>,
}

impl View for RunLineView {
    const NAME: &'static str = "wave-run-line";
}

impl RunLineView {
    /// One line of the timeline (a stream: padded, as later lines are not known yet).
    pub fn human(&self) -> String {
        let what = match (&self.worker, self.state.as_str()) {
            (Some(w), "WORKING") => format!("started (worker {w})"),
            (_, s) => s.to_string(),
        };
        format!(
            "[{:>7.1}s] {:<20} {:<16} {}\n",
            self.elapsed_s,
            esc(&self.task),
            esc(&self.repo),
            esc(&what)
        )
    }
}

/// A task another one waits for, and that task's state.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct WaitingOn {
    pub task: String,
    pub state: String,
}

/// One task of a wave.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct WaveTaskView {
    pub id: String,
    pub repo: String,
    pub task: String,
    /// PENDING, or its worker's milestone.
    pub state: String,
    pub worker: Option<String>,
    #[schemars(extend("format" = "date-time"))]
    pub started_at: Option<String>,
    #[schemars(extend("format" = "date-time"))]
    pub ended_at: Option<String>,
    pub estimate_s: f64,
    /// file, history or default.
    pub estimate_source: String,
    /// Seconds it ran (so far, while it runs).
    pub actual_s: Option<f64>,
    /// What it waits for that is not DONE; a stopped task further up is named too.
    pub waiting_on: Vec<WaitingOn>,
}

impl WaveTaskView {
    /// "waiting on core-api (FAILED), util (PENDING)", or "".
    pub fn waiting_text(&self) -> String {
        if self.waiting_on.is_empty() {
            return String::new();
        }
        format!(
            "waiting on {}",
            self.waiting_on
                .iter()
                .map(|w| format!("{} ({})", w.task, w.state))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }

    pub fn of(t: &TaskView) -> Self {
        WaveTaskView {
            id: t.id.clone(),
            repo: t.repo.clone(),
            task: t.task.clone(),
            state: t.state.clone(),
            worker: t.worker.clone(),
            started_at: t.started_ms.map(at),
            ended_at: t.ended_ms.map(at),
            estimate_s: secs(t.estimate_ms),
            estimate_source: t.estimate_source.to_string(),
            actual_s: t.actual_ms.map(|a| secs(a.max(0) as u64)),
            waiting_on: t
                .waiting_on
                .iter()
                .map(|(task, state)| WaitingOn {
                    task: task.clone(),
                    state: state.clone(),
                })
                .collect(),
        }
    }
}

/// `orch wave status --json`, and the last line of `wave run --until-done --json`.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct WaveStatusView {
    pub name: String,
    pub file: String,
    pub cancelled: bool,
    pub tasks: Vec<WaveTaskView>,
    /// How many tasks are DONE.
    pub done: usize,
    pub all_done: bool,
    /// Nothing runs and nothing more can start.
    pub finished: bool,
}

impl View for WaveStatusView {
    const NAME: &'static str = "wave-status";
}

impl WaveStatusView {
    pub fn of(v: &WaveView) -> Self {
        WaveStatusView {
            name: v.name.clone(),
            file: v.file.clone(),
            cancelled: v.cancelled,
            tasks: v.tasks.iter().map(WaveTaskView::of).collect(),
            done: v.done,
            all_done: v.all_done,
            finished: v.finished,
        }
    }

    /// "wave w: 3/9 DONE, 2 running — in progress".
    pub fn summary(&self) -> String {
        let running = self
            .tasks
            .iter()
            .filter(|t| t.worker.is_some() && t.ended_at.is_none())
            .count();
        let state = if self.cancelled {
            "cancelled"
        } else if self.all_done {
            "finished, nothing to do"
        } else if self.finished {
            "stopped: every remaining task waits on one that did not end DONE"
        } else {
            "in progress"
        };
        format!(
            "wave {}: {}/{} DONE, {} running — {}",
            esc(&self.name),
            self.done,
            self.tasks.len(),
            running,
            state
        )
    }

    /// The summary line and the task table.
    pub fn human(&self) -> String {
        format!("{}\n{}", self.summary(), self.human_table())
    }

    pub fn human_table(&self) -> String {
        let time = |t: &Option<String>| {
            t.as_deref()
                .and_then(|t| t.get(11..19))
                .unwrap_or("-")
                .to_string()
        };
        let mut t = Table::new([
            "TASK", "REPO", "STATE", "WORKER", "START", "END", "EST", "ACTUAL", "WAITING",
        ]);
        for task in &self.tasks {
            let waiting = task.waiting_text();
            t.row([
                esc(&task.id).into_owned(),
                esc(&task.repo).into_owned(),
                task.state.clone(),
                esc(task.worker.as_deref().unwrap_or("-")).into_owned(),
                time(&task.started_at),
                time(&task.ended_at),
                human_s(task.estimate_s),
                task.actual_s.map(human_s).unwrap_or_else(|| "-".into()),
                esc(&waiting).into_owned(),
            ]);
        }
        t.right(6).right(7);
        t.render()
    }
}

/// A wave's worker that was still going when the wave was cancelled, and what the cancel did.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct CancelledWorker {
    pub worker_id: String,
    pub outcome: String,
}

/// `orch wave retry --json`.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct WaveRetryView {
    pub wave: String,
    pub task: String,
    /// The worker of the attempt given up (it stays in the history).
    pub previous_worker: String,
    /// Where that attempt stood (FAILED, BLOCKED, …, or DONE with its landing).
    pub previous_state: String,
    /// Whether its chain lock was released.
    pub released_lock: bool,
    /// The attempt the next tick starts (its worker's task id is `<wave>:<task>#<attempt>`).
    pub attempt: i64,
}

impl View for WaveRetryView {
    const NAME: &'static str = "wave-retry";
}

impl WaveRetryView {
    pub fn of(r: &crate::app::wave::RetryReport) -> Self {
        WaveRetryView {
            wave: r.wave.clone(),
            task: r.task.clone(),
            previous_worker: r.previous_worker.clone(),
            previous_state: r.previous_state.clone(),
            released_lock: r.released_lock,
            attempt: r.attempt,
        }
    }

    pub fn human(&self) -> String {
        format!(
            "wave {}: task {} gets attempt {} at the next tick (previous worker {} was {}{})\n",
            esc(&self.wave),
            esc(&self.task),
            self.attempt,
            esc(&self.previous_worker),
            esc(&self.previous_state),
            if self.released_lock {
                "; its chain lock is released"
            } else {
                ""
            }
        )
    }
}

/// `orch wave cancel --json`.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct WaveCancelView {
    pub wave: String,
    /// False when the wave was already cancelled.
    pub newly_cancelled: bool,
    /// Its workers that were still going.
    pub workers: Vec<CancelledWorker>,
}

impl View for WaveCancelView {
    const NAME: &'static str = "wave-cancel";
}

impl WaveCancelView {
    pub fn of(r: &CancelReport) -> Self {
        WaveCancelView {
            wave: r.wave.clone(),
            newly_cancelled: r.newly_cancelled,
            workers: r
                .workers
                .iter()
                .map(|(w, o)| CancelledWorker {
                    worker_id: w.clone(),
                    outcome: o.clone(),
                })
                .collect(),
        }
    }

    pub fn human(&self) -> String {
        let mut out = format!(
            "wave {}: {}\n",
            esc(&self.wave),
            if self.newly_cancelled {
                "cancelled; no tick starts anything more"
            } else {
                "was already cancelled"
            }
        );
        for w in &self.workers {
            out.push_str(&format!("  {}: {}\n", esc(&w.worker_id), esc(&w.outcome)));
        }
        out
    }
}
