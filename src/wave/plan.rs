//! The planner: the wave run in simulated time with `m` slots by the scheduler of
//! `schedule.rs`, its makespan, the lower bound no schedule can beat, and what the seed's
//! phase plan (layer by layer, each layer waiting for the previous one) would take.
//!
//! Times are milliseconds from the wave's start.

use super::dag::Dag;
use super::schedule::{TaskState, WaveState, decide};
use crate::graph::RepoGraph;
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

/// Waves up to this many tasks get their exact width (Dilworth); larger ones a bound.
pub const EXACT_WIDTH_LIMIT: usize = 2_000;

#[derive(Debug, Clone, Copy, Serialize)]
pub struct Slot {
    pub task: usize,
    pub start_ms: u64,
    pub end_ms: u64,
}

/// LB = max(longest task, critical path, total work / min(m, width)).
#[derive(Debug, Clone, Serialize)]
pub struct LowerBound {
    pub longest_task_ms: u64,
    pub critical_path_ms: u64,
    pub total_work_ms: u64,
    /// The largest set of tasks that may run at once (exact up to [`EXACT_WIDTH_LIMIT`]
    /// tasks). Above it: the most the schedule ran at once when that reaches `m` (then
    /// min(m, width) is exact), else the number of tasks (LB stays a lower bound).
    pub width: usize,
    pub width_exact: bool,
    pub slots: usize,
    pub lb_ms: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct Plan {
    /// In start order.
    pub slots: Vec<Slot>,
    pub makespan_ms: u64,
    pub bound: LowerBound,
    /// makespan / LB (1.0 for an empty wave).
    pub ratio: f64,
    /// The seed's phase plan: each layer of the repository graph after the previous one.
    pub phase_makespan_ms: u64,
    pub phases: usize,
}

/// Runs the scheduler over simulated time: at each moment a task ends, `decide` picks what
/// starts. Only tasks whose state is `Pending` in `initial` are scheduled (others are DONE or
/// excluded).
pub fn simulate(dag: &Dag, est: &[u64], m: usize, initial: Vec<TaskState>) -> Vec<Slot> {
    let priority = dag.bottom_levels(est);
    let mut state = WaveState::new(dag, initial, priority);
    let graph = RepoGraph::new(std::iter::empty::<(String, Vec<String>)>());
    let mut running: BinaryHeap<Reverse<(u64, usize)>> = BinaryHeap::new();
    let mut out = Vec::new();
    let mut now = 0u64;
    loop {
        let free = m.saturating_sub(running.len());
        for i in decide(dag, &state, &graph, &[], free) {
            state.start(i);
            running.push(Reverse((now + est[i], i)));
            out.push(Slot {
                task: i,
                start_ms: now,
                end_ms: now + est[i],
            });
        }
        let Some(Reverse((t, i))) = running.pop() else {
            break;
        };
        now = t;
        state.finish(dag, i, true);
        // Every task ending at the same moment frees its slot before the next decision.
        while let Some(&Reverse((t2, j))) = running.peek() {
            if t2 != now {
                break;
            }
            running.pop();
            state.finish(dag, j, true);
        }
    }
    out
}

/// The phase of each task in the seed's plan: its repository's layer, pushed later by `after`
/// waits on other repositories' tasks.
pub fn phases(dag: &Dag, graph: &RepoGraph) -> Vec<usize> {
    let layer: HashMap<String, usize> = graph
        .layers()
        .into_iter()
        .enumerate()
        .flat_map(|(k, l)| l.into_iter().map(move |r| (r, k)))
        .collect();
    let mut phase = vec![0usize; dag.len()];
    for &i in &dag.order {
        let mut p = layer.get(&dag.repos[i]).copied().unwrap_or(0);
        for &j in &dag.preds[i] {
            let step = usize::from(dag.repos[j] != dag.repos[i]);
            p = p.max(phase[j] + step);
        }
        phase[i] = p;
    }
    phase
}

/// The seed's phase plan: each phase scheduled with `m` slots, starting when the previous
/// phase has finished. Returns (makespan, number of phases).
pub fn phase_plan(dag: &Dag, graph: &RepoGraph, est: &[u64], m: usize) -> (u64, usize) {
    let phase = phases(dag, graph);
    let count = phase.iter().map(|p| p + 1).max().unwrap_or(0);
    let mut total = 0u64;
    for k in 0..count {
        let initial: Vec<TaskState> = phase
            .iter()
            .map(|&p| match p.cmp(&k) {
                std::cmp::Ordering::Less => TaskState::Done,
                std::cmp::Ordering::Equal => TaskState::Pending,
                std::cmp::Ordering::Greater => TaskState::Stopped,
            })
            .collect();
        let slots = simulate(dag, est, m, initial);
        total += slots.iter().map(|s| s.end_ms).max().unwrap_or(0);
    }
    (total, count)
}

/// The largest number of tasks running at one moment in `slots`.
fn max_concurrency(slots: &[Slot]) -> usize {
    let mut edges: Vec<(u64, i32)> = slots
        .iter()
        .flat_map(|s| [(s.start_ms, 1), (s.end_ms, -1)])
        .collect();
    // Ends before starts at the same moment.
    edges.sort_by_key(|&(t, d)| (t, d));
    let (mut cur, mut best) = (0i32, 0i32);
    for (_, d) in edges {
        cur += d;
        best = best.max(cur);
    }
    best as usize
}

pub fn lower_bound(dag: &Dag, est: &[u64], m: usize, slots: &[Slot]) -> LowerBound {
    let longest = est.iter().copied().max().unwrap_or(0);
    let critical = dag.critical_path(est);
    let total: u64 = est.iter().sum();
    let seen = max_concurrency(slots);
    let (width, exact) = match dag.width(EXACT_WIDTH_LIMIT) {
        Some(w) => (w, true),
        // The schedule ran `seen` tasks at once, none waiting for another: width >= seen, and
        // once seen reaches m, min(m, width) = m exactly. Below that, n keeps LB a bound.
        None if seen >= m => (seen, false),
        None => (dag.len(), false),
    };
    let k = m.min(width).max(1) as u64;
    let lb = longest.max(critical).max(total.div_ceil(k));
    LowerBound {
        longest_task_ms: longest,
        critical_path_ms: critical,
        total_work_ms: total,
        width,
        width_exact: exact,
        slots: m,
        lb_ms: lb,
    }
}

/// The whole plan of a wave with `m` slots and the given estimates (ms, in task order).
pub fn plan(dag: &Dag, graph: &RepoGraph, est: &[u64], m: usize) -> Plan {
    let m = m.max(1);
    let slots = simulate(dag, est, m, vec![TaskState::Pending; dag.len()]);
    let makespan = slots.iter().map(|s| s.end_ms).max().unwrap_or(0);
    let bound = lower_bound(dag, est, m, &slots);
    let (phase_makespan, phases) = phase_plan(dag, graph, est, m);
    Plan {
        ratio: if bound.lb_ms == 0 {
            1.0
        } else {
            makespan as f64 / bound.lb_ms as f64
        },
        slots,
        makespan_ms: makespan,
        bound,
        phase_makespan_ms: phase_makespan,
        phases,
    }
}

/// An ASCII Gantt chart: one row per task (in start order), `width` columns for the makespan.
pub fn gantt(plan: &Plan, labels: &[String], width: usize) -> String {
    let span = plan.makespan_ms.max(1);
    let label_w = labels.iter().map(|l| l.len()).max().unwrap_or(4).min(28);
    let col = |t: u64| ((t as u128 * width as u128) / span as u128) as usize;
    let mut s = String::new();
    for slot in &plan.slots {
        let (a, b) = (
            col(slot.start_ms),
            col(slot.end_ms).max(col(slot.start_ms) + 1),
        );
        let mut row = String::with_capacity(width);
        for c in 0..width {
            row.push(if c >= a && c < b { '#' } else { '.' });
        }
        let mut label = labels[slot.task].clone();
        label.truncate(label_w);
        s.push_str(&format!("{label:<label_w$} |{row}|\n"));
    }
    s.push_str(&format!(
        "{:<label_w$} 0{:>w$}\n",
        "",
        crate::duration::format(std::time::Duration::from_millis(plan.makespan_ms.max(1))),
        w = width + 1
    ));
    s
}
