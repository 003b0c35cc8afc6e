//! `/api/waves`: each wave as `orch wave status --json` says it, with what the board draws
//! beside it — planned against actual (a Gantt chart), what each task still to start waits
//! for, and the critical path as it stands. Pure: built from the wave's view, the locks and
//! the agent's rate limit; [`boards`] reads those for every wave.

use super::Error;
use crate::app::Loaded;
use crate::app::wave::WaveView;
use crate::operator::view::human_duration;
use crate::operator::view::locks::LockView;
use crate::operator::view::wave::WaveStatusView;
use schemars::JsonSchema;
use serde::Serialize;

/// One wave on the board.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct WaveBoardView {
    /// `orch wave status <name> --json`.
    pub status: WaveStatusView,
    /// When a tick first saw the wave: the Gantt chart's zero.
    #[schemars(extend("format" = "date-time"))]
    pub started_at: String,
    /// One bar per task, in the wave's order.
    pub gantt: Vec<GanttBar>,
    /// The critical path as it stands (task ids, first first): the longest chain of waits by
    /// what each task took, takes so far or (not started) is estimated to take.
    pub critical_path: Vec<String>,
    /// Its length in seconds.
    pub critical_path_s: f64,
}

/// `/api/waves`: every wave orch has run.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[serde(transparent)]
pub struct WavesAnswer(pub Vec<WaveBoardView>);

impl crate::operator::view::View for WavesAnswer {
    const NAME: &'static str = "board-waves";
}

/// A task's planned and actual time, in seconds after the wave's start.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct GanttBar {
    pub id: String,
    /// The scheduler's plan over simulated time (estimates, `worker.max_parallel` slots).
    pub planned_start_s: f64,
    pub planned_end_s: f64,
    /// null: not started.
    pub actual_start_s: Option<f64>,
    /// null: not started or still running.
    pub actual_end_s: Option<f64>,
    pub critical: bool,
    /// Why a task not started is not running yet, in words (null: started, or the wave is
    /// cancelled).
    pub waits_for: Option<String>,
}

/// What the board knows beside the waves: the chain locks held, whether two repositories'
/// chains overlap, and until when the agent is rate-limited (reset time, detail).
pub struct Around<'a, F: Fn(&str, &str) -> bool> {
    pub locks: &'a [LockView],
    pub conflicts: F,
    pub limit: Option<(String, String)>,
    pub max_parallel: usize,
}

/// Why task `i` of `w`, not started, does not run: an upstream task first, then a lock on
/// its chain, then the agent's rate limit, else a free slot.
fn waits_for<F: Fn(&str, &str) -> bool>(
    w: &WaveView,
    i: usize,
    around: &Around<F>,
) -> Option<String> {
    let t = &w.tasks[i];
    if t.worker.is_some() || w.cancelled {
        return None;
    }
    if !t.waiting_on.is_empty() {
        return Some(format!(
            "upstream: {}",
            t.waiting_on
                .iter()
                .map(|(task, state)| format!("{task} ({state})"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if let Some(lock) = around
        .locks
        .iter()
        .find(|l| (around.conflicts)(&t.repo, &l.repo))
    {
        return Some(format!(
            "the chain lock on {} held by {} for {}",
            lock.repo,
            lock.holder,
            human_duration(lock.age_s)
        ));
    }
    if let Some((until, detail)) = &around.limit {
        return Some(format!(
            "the agent's rate limit, reset at {until} ({detail})"
        ));
    }
    Some(format!(
        "a free slot at the next tick (worker.max_parallel: {})",
        around.max_parallel
    ))
}

pub fn build<F: Fn(&str, &str) -> bool>(w: &WaveView, around: &Around<F>) -> WaveBoardView {
    let secs = |ms: i64| (ms - w.created_ms).max(0) as f64 / 1000.0;
    let gantt = w
        .tasks
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let (ps, pe) = w.planned_ms.get(i).copied().unwrap_or((0, 0));
            GanttBar {
                id: t.id.clone(),
                planned_start_s: ps as f64 / 1000.0,
                planned_end_s: pe as f64 / 1000.0,
                actual_start_s: t.started_ms.map(secs),
                actual_end_s: t.ended_ms.map(secs),
                critical: w.critical_path.contains(&i),
                waits_for: waits_for(w, i, around),
            }
        })
        .collect();
    let path_ms: i64 = w
        .critical_path
        .iter()
        .map(|&i| {
            let t = &w.tasks[i];
            match (t.actual_ms, t.ended_ms) {
                (Some(a), Some(_)) => a.max(0),
                (Some(a), None) => a.max(t.estimate_ms as i64),
                _ => t.estimate_ms as i64,
            }
        })
        .sum();
    WaveBoardView {
        status: WaveStatusView::of(w),
        started_at: crate::store::fmt_ms(w.created_ms),
        gantt,
        critical_path: w
            .critical_path
            .iter()
            .map(|&i| w.tasks[i].id.clone())
            .collect(),
        critical_path_s: path_ms as f64 / 1000.0,
    }
}

/// Every wave with its Gantt chart, what its waiting tasks wait for and its critical path.
pub fn boards(l: &Loaded) -> Result<Vec<WaveBoardView>, Error> {
    let waves = crate::app::wave::statuses(l)?;
    let Some(mut store) = l.existing_store()?.filter(|_| !waves.is_empty()) else {
        return Ok(Vec::new());
    };
    let now = crate::store::now_ms();
    let locks: Vec<LockView> = store
        .locks()?
        .iter()
        .map(|lock| LockView::of(lock, now))
        .collect();
    let agent = l.config.worker.agent.as_str();
    let limit = store
        .read(|tx| crate::store::usage::agent_limit(tx, agent, now))?
        .map(|(until, detail)| (crate::store::fmt_ms(until), detail));
    let g = &l.config.graph;
    let around = Around {
        locks: &locks,
        conflicts: |a: &str, b: &str| {
            a == b || (g.contains(a) && g.contains(b) && g.conflicts(a, b))
        },
        limit,
        max_parallel: l.config.worker.max_parallel,
    };
    Ok(waves.iter().map(|w| build(w, &around)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::wave::TaskView;

    fn task(id: &str, repo: &str, worker: Option<&str>, started: Option<i64>) -> TaskView {
        TaskView {
            id: id.into(),
            repo: repo.into(),
            task: format!("{id} work"),
            state: if worker.is_some() {
                "WORKING"
            } else {
                "PENDING"
            }
            .into(),
            worker: worker.map(str::to_string),
            started_ms: started,
            ended_ms: None,
            estimate_ms: 60_000,
            estimate_source: "file",
            actual_ms: started.map(|s| 100_000 - s),
            waiting_on: Vec::new(),
            progress: if worker.is_some() {
                "running"
            } else {
                "pending"
            },
        }
    }

    fn wave() -> WaveView {
        let mut up = task("vm-1", "vm", None, None);
        up.waiting_on = vec![("core-1".into(), "WORKING".into())];
        WaveView {
            name: "w".into(),
            file: "w.yaml".into(),
            cancelled: false,
            tasks: vec![
                task("core-1", "core", Some("core-abc"), Some(10_000)),
                up,
                task("sdk-1", "sdk", None, None),
                task("util-1", "util", None, None),
            ],
            done: 0,
            all_done: false,
            finished: false,
            created_ms: 0,
            planned_ms: vec![(0, 60_000), (60_000, 120_000), (0, 60_000), (0, 60_000)],
            critical_path: vec![0, 1],
        }
    }

    fn lock(repo: &str, holder: &str) -> LockView {
        LockView {
            repo: repo.into(),
            holder: holder.into(),
            kind: crate::lock::HolderKind::Hold,
            reason: None,
            by: None,
            acquired_at: "2026-01-01T00:00:00Z".into(),
            age_s: 120,
        }
    }

    #[test]
    fn each_waiting_task_says_what_it_waits_for_and_the_path_is_timed() {
        let locks = [lock("sdk", "hold:ops")];
        let around = Around {
            locks: &locks,
            conflicts: |a: &str, b: &str| a == b,
            limit: None,
            max_parallel: 2,
        };
        let v = build(&wave(), &around);
        let waits: Vec<Option<&str>> = v.gantt.iter().map(|b| b.waits_for.as_deref()).collect();
        assert_eq!(
            waits,
            [
                None,
                Some("upstream: core-1 (WORKING)"),
                Some("the chain lock on sdk held by hold:ops for 2m"),
                Some("a free slot at the next tick (worker.max_parallel: 2)"),
            ]
        );
        assert_eq!(v.critical_path, ["core-1", "vm-1"]);
        // core-1 has run 90 s (more than its 60 s estimate), vm-1 is estimated at 60 s.
        assert_eq!(v.critical_path_s, 150.0);
        assert_eq!(v.gantt[0].actual_start_s, Some(10.0));
        assert_eq!(v.gantt[0].actual_end_s, None);
        assert_eq!(v.gantt[1].planned_start_s, 60.0);
        assert!(v.gantt[0].critical && v.gantt[1].critical && !v.gantt[2].critical);

        let limited = Around {
            locks: &[],
            conflicts: |_: &str, _: &str| false,
            limit: Some(("2026-01-01T01:00:00Z".into(), "429 from the API".into())),
            max_parallel: 2,
        };
        let v = build(&wave(), &limited);
        assert_eq!(
            v.gantt[3].waits_for.as_deref(),
            Some("the agent's rate limit, reset at 2026-01-01T01:00:00Z (429 from the API)")
        );
        let mut cancelled = wave();
        cancelled.cancelled = true;
        assert!(
            build(&cancelled, &limited)
                .gantt
                .iter()
                .all(|b| b.waits_for.is_none())
        );
    }
}
