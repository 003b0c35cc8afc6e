//! The scheduler: the state of a wave, the active chain locks and the free slots in, the tasks
//! to start now out. One decision for `orch wave plan` (simulated time) and `orch wave run`
//! (real time, each cron tick).
//!
//! Rule: among the ready tasks (everything they wait for is DONE), start the one with the
//! longest remaining critical path first (its estimate plus the longest chain of tasks that
//! wait for it; ties in file order), skipping only those a chain lock blocks, until the free
//! slots are used: a slot is never left idle while a ready task could take it.

use super::dag::Dag;
use crate::graph::RepoGraph;
use crate::lock::{ChainLock, is_blocked};
use std::cmp::Reverse;
use std::collections::BTreeSet;

/// Where a task stands, as the scheduler needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskState {
    /// Not started.
    Pending,
    /// A worker holds its chain lock and is on it.
    Running,
    Done,
    /// Ended without DONE (FAILED, CANCELLED) or stuck (BLOCKED, BLOCKED_PERMISSION): the
    /// tasks that wait for it are held back.
    Stopped,
}

/// The wave's state: each task's state, and the ready set ordered by priority.
#[derive(Debug, Clone)]
pub struct WaveState {
    states: Vec<TaskState>,
    /// How many of each task's predecessors are not DONE.
    missing: Vec<usize>,
    priority: Vec<u64>,
    /// Pending tasks with nothing missing: highest priority first, then file order.
    ready: BTreeSet<(Reverse<u64>, usize)>,
}

impl WaveState {
    /// `states` in task order; `priority` from [`Dag::bottom_levels`].
    pub fn new(dag: &Dag, states: Vec<TaskState>, priority: Vec<u64>) -> WaveState {
        let missing: Vec<usize> = dag
            .preds
            .iter()
            .map(|p| p.iter().filter(|&&j| states[j] != TaskState::Done).count())
            .collect();
        let ready = (0..states.len())
            .filter(|&i| states[i] == TaskState::Pending && missing[i] == 0)
            .map(|i| (Reverse(priority[i]), i))
            .collect();
        WaveState {
            states,
            missing,
            priority,
            ready,
        }
    }

    pub fn states(&self) -> &[TaskState] {
        &self.states
    }

    pub fn state(&self, i: usize) -> TaskState {
        self.states[i]
    }

    /// Ready tasks in the order the scheduler considers them.
    pub fn ready(&self) -> impl Iterator<Item = usize> + '_ {
        self.ready.iter().map(|&(_, i)| i)
    }

    pub fn start(&mut self, i: usize) {
        self.ready.remove(&(Reverse(self.priority[i]), i));
        self.states[i] = TaskState::Running;
    }

    /// Task `i` ended: DONE frees what waits for it; anything else holds it back.
    pub fn finish(&mut self, dag: &Dag, i: usize, done: bool) {
        self.ready.remove(&(Reverse(self.priority[i]), i));
        if !done {
            self.states[i] = TaskState::Stopped;
            return;
        }
        self.states[i] = TaskState::Done;
        for &s in &dag.succs[i] {
            self.missing[s] -= 1;
            if self.missing[s] == 0 && self.states[s] == TaskState::Pending {
                self.ready.insert((Reverse(self.priority[s]), s));
            }
        }
    }

    /// Every task is DONE.
    pub fn all_done(&self) -> bool {
        self.states.iter().all(|s| *s == TaskState::Done)
    }

    /// Nothing runs and nothing can ever start (every task DONE, or held back by a stopped one).
    pub fn finished(&self) -> bool {
        self.ready.is_empty() && !self.states.contains(&TaskState::Running)
    }

    /// The tasks `i` waits for directly that are not DONE.
    pub fn waiting_on(&self, dag: &Dag, i: usize) -> Vec<usize> {
        dag.preds[i]
            .iter()
            .copied()
            .filter(|&j| self.states[j] != TaskState::Done)
            .collect()
    }

    /// The stopped tasks that hold `i` back, directly or through what it waits for.
    pub fn held_back_by(&self, dag: &Dag, i: usize) -> Vec<usize> {
        let mut seen = vec![false; self.states.len()];
        let mut stack = vec![i];
        let mut out = Vec::new();
        while let Some(x) = stack.pop() {
            for &p in &dag.preds[x] {
                if std::mem::replace(&mut seen[p], true) {
                    continue;
                }
                match self.states[p] {
                    TaskState::Stopped => out.push(p),
                    TaskState::Done => {}
                    _ => stack.push(p),
                }
            }
        }
        out.sort_unstable();
        out
    }
}

/// The tasks to start now: ready tasks by priority, each only if no active chain lock blocks
/// its repository (`locks`: everything held now, by anyone), at most `free` of them.
pub fn decide(
    dag: &Dag,
    state: &WaveState,
    graph: &RepoGraph,
    locks: &[ChainLock],
    free: usize,
) -> Vec<usize> {
    let mut out = Vec::new();
    if free == 0 {
        return out;
    }
    // The locks the chosen tasks will take count too (inside one wave they never conflict —
    // see dag.rs — but the rule should not depend on that).
    let mut held: Vec<&str> = locks.iter().map(|l| l.repo.as_str()).collect();
    for i in state.ready() {
        if is_blocked(graph, &dag.repos[i], held.iter().copied()) {
            continue;
        }
        out.push(i);
        if out.len() == free {
            break;
        }
        held.push(&dag.repos[i]);
    }
    out
}

/// How many slots one wave may fill now. `max`: `worker.max_parallel`; `running`: workers
/// running anywhere; `mine`: this wave's; `others_waiting`: other active waves that had a
/// ready task they could not start at their last tick. With no one else waiting a wave may
/// fill every free slot; otherwise it gets its share of `max` (at least one), so two waves
/// ticking at once split the slots instead of the first one taking them all.
pub fn free_slots(max: usize, running: usize, mine: usize, others_waiting: usize) -> usize {
    let free = max.saturating_sub(running);
    if others_waiting == 0 {
        return free;
    }
    let share = max.div_ceil(others_waiting + 1).max(1);
    free.min(share.saturating_sub(mine))
}
