//! Who waits for whom in a wave. A task on repository X waits for every task of the wave on
//! X's dependencies (transitively): bottom-up. Tasks on one repository run in file order.
//! `after` adds waits beyond the repository graph.
//!
//! Because two repositories conflict under the chain lock exactly when one is in the other's
//! chain, every pair of wave tasks whose chain locks would conflict is ordered here: inside a
//! wave, the waits imply the locks (other waves, holds and hand-spawned workers do not).

use super::TaskDef;
use crate::graph::RepoGraph;
use std::collections::HashMap;

/// The wave's task graph, by task index (file order).
#[derive(Debug, Clone)]
pub struct Dag {
    /// `preds[i]`: the tasks `i` waits for directly (sorted, no duplicates).
    pub preds: Vec<Vec<usize>>,
    /// `succs[i]`: the tasks that wait for `i` directly.
    pub succs: Vec<Vec<usize>>,
    /// A topological order (every task after what it waits for).
    pub order: Vec<usize>,
    pub repos: Vec<String>,
}

impl Dag {
    /// Builds the graph; `Err(cycle)` names a cycle (task indices, first repeated last).
    /// Unknown `after` ids are ignored (validation reports them).
    pub fn build(tasks: &[TaskDef], graph: &RepoGraph) -> Result<Dag, Vec<usize>> {
        let n = tasks.len();
        let mut preds: Vec<Vec<usize>> = vec![Vec::new(); n];
        let mut by_repo: HashMap<&str, Vec<usize>> = HashMap::new();
        for (i, t) in tasks.iter().enumerate() {
            by_repo.entry(t.repo.as_str()).or_default().push(i);
        }
        let ids: HashMap<&str, usize> = tasks
            .iter()
            .enumerate()
            .map(|(i, t)| (t.id.as_str(), i))
            .collect();
        for (repo, list) in &by_repo {
            // The first task on a repository waits for the last task on each of its
            // dependencies (tasks on one repository are a chain, so that is all of them).
            let first = list[0];
            for d in graph.deps(repo) {
                if let Some(on_dep) = by_repo.get(d.as_str()) {
                    preds[first].push(*on_dep.last().expect("non-empty"));
                }
            }
            for w in list.windows(2) {
                preds[w[1]].push(w[0]);
            }
        }
        for (i, t) in tasks.iter().enumerate() {
            for a in &t.after {
                if let Some(&j) = ids.get(a.as_str())
                    && j != i
                {
                    preds[i].push(j);
                }
            }
        }
        let mut succs: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (i, p) in preds.iter_mut().enumerate() {
            p.sort_unstable();
            p.dedup();
            for &j in p.iter() {
                succs[j].push(i);
            }
        }
        // Kahn's algorithm, smallest index first for a stable order.
        let mut missing: Vec<usize> = preds.iter().map(Vec::len).collect();
        let mut ready: std::collections::BinaryHeap<std::cmp::Reverse<usize>> = (0..n)
            .filter(|&i| missing[i] == 0)
            .map(std::cmp::Reverse)
            .collect();
        let mut order = Vec::with_capacity(n);
        while let Some(std::cmp::Reverse(i)) = ready.pop() {
            order.push(i);
            for &s in &succs[i] {
                missing[s] -= 1;
                if missing[s] == 0 {
                    ready.push(std::cmp::Reverse(s));
                }
            }
        }
        if order.len() < n {
            return Err(find_cycle(&preds, &missing));
        }
        Ok(Dag {
            preds,
            succs,
            order,
            repos: tasks.iter().map(|t| t.repo.clone()).collect(),
        })
    }

    pub fn len(&self) -> usize {
        self.preds.len()
    }

    pub fn is_empty(&self) -> bool {
        self.preds.is_empty()
    }

    /// Each task's remaining critical path: its estimate plus the longest chain of tasks that
    /// wait for it (the "bottom level" of list scheduling).
    pub fn bottom_levels(&self, est: &[u64]) -> Vec<u64> {
        let mut level = vec![0u64; self.len()];
        for &i in self.order.iter().rev() {
            let tail = self.succs[i].iter().map(|&s| level[s]).max().unwrap_or(0);
            level[i] = est[i] + tail;
        }
        level
    }

    /// Which tasks lie on a critical path of the whole wave: a longest chain of waits by
    /// estimates (every one of them when several are equally long). A task is on one when the
    /// longest chain ending at it (its own estimate included) and the longest starting at it
    /// add up, less its estimate counted twice, to the critical path.
    pub fn on_critical_path(&self, est: &[u64]) -> Vec<bool> {
        let bottom = self.bottom_levels(est);
        let mut top = vec![0u64; self.len()];
        for &i in &self.order {
            let head = self.preds[i].iter().map(|&p| top[p]).max().unwrap_or(0);
            top[i] = head + est[i];
        }
        let cp = bottom.iter().copied().max().unwrap_or(0);
        (0..self.len())
            .map(|i| top[i] + bottom[i] - est[i] == cp)
            .collect()
    }

    /// One longest chain of waits weighted by `dur` (ms per task: what a task took, or is
    /// expected to take), first task first: the wave's critical path as it stands. Ties go to
    /// the task first in the wave.
    pub fn critical_chain(&self, dur: &[u64]) -> Vec<usize> {
        // finish[i]: the longest chain ending at i, i included; from[i]: its predecessor there.
        let mut finish = vec![0u64; self.len()];
        let mut from = vec![None; self.len()];
        for &i in &self.order {
            let best = self.preds[i]
                .iter()
                .copied()
                .max_by_key(|&p| (finish[p], std::cmp::Reverse(p)));
            finish[i] = dur[i] + best.map_or(0, |p| finish[p]);
            from[i] = best;
        }
        let Some(mut at) = (0..self.len()).max_by_key(|&i| (finish[i], std::cmp::Reverse(i)))
        else {
            return Vec::new();
        };
        let mut chain = vec![at];
        while let Some(p) = from[at] {
            chain.push(p);
            at = p;
        }
        chain.reverse();
        chain
    }

    /// The longest chain of waits, weighted by estimates.
    pub fn critical_path(&self, est: &[u64]) -> u64 {
        self.bottom_levels(est).into_iter().max().unwrap_or(0)
    }

    /// The largest set of tasks that may run at once (no two ordered), by Dilworth's theorem:
    /// n minus a maximum matching of the comparability graph. `None` when the wave is larger
    /// than `limit` tasks (the closure would cost too much).
    pub fn width(&self, limit: usize) -> Option<usize> {
        let n = self.len();
        if n > limit {
            return None;
        }
        let words = n.div_ceil(64);
        let mut reach = vec![0u64; n * words];
        for &i in self.order.iter().rev() {
            for &s in &self.succs[i] {
                reach[i * words + s / 64] |= 1 << (s % 64);
                for w in 0..words {
                    let v = reach[s * words + w];
                    reach[i * words + w] |= v;
                }
            }
        }
        let adj: Vec<Vec<usize>> = (0..n)
            .map(|i| {
                let mut out = Vec::new();
                for w in 0..words {
                    let mut bits = reach[i * words + w];
                    while bits != 0 {
                        let b = bits.trailing_zeros() as usize;
                        out.push(w * 64 + b);
                        bits &= bits - 1;
                    }
                }
                out
            })
            .collect();
        Some(n - max_matching(n, &adj))
    }
}

/// Hopcroft–Karp on a bipartite graph with `n` left and `n` right vertices.
fn max_matching(n: usize, adj: &[Vec<usize>]) -> usize {
    const NIL: usize = usize::MAX;
    let mut left = vec![NIL; n];
    let mut right = vec![NIL; n];
    let mut dist = vec![0usize; n];
    let mut matched = 0;
    loop {
        // BFS layers from free left vertices.
        let mut queue = std::collections::VecDeque::new();
        for u in 0..n {
            if left[u] == NIL {
                dist[u] = 0;
                queue.push_back(u);
            } else {
                dist[u] = usize::MAX;
            }
        }
        let mut found = false;
        while let Some(u) = queue.pop_front() {
            for &v in &adj[u] {
                let w = right[v];
                if w == NIL {
                    found = true;
                } else if dist[w] == usize::MAX {
                    dist[w] = dist[u] + 1;
                    queue.push_back(w);
                }
            }
        }
        if !found {
            return matched;
        }
        // DFS along the layers (iterative, to stay off the stack for long chains).
        let mut it = vec![0usize; n];
        for u0 in 0..n {
            if left[u0] != NIL {
                continue;
            }
            let mut stack = vec![u0];
            let mut path_end = None;
            while let Some(&u) = stack.last() {
                if it[u] >= adj[u].len() {
                    dist[u] = usize::MAX;
                    stack.pop();
                    continue;
                }
                let v = adj[u][it[u]];
                it[u] += 1;
                let w = right[v];
                if w == NIL {
                    path_end = Some(v);
                    break;
                }
                if dist[w] == dist[u] + 1 {
                    stack.push(w);
                }
            }
            if let Some(mut v) = path_end {
                // Flip the path: each u on the stack takes the v it reached through.
                while let Some(u) = stack.pop() {
                    let prev = left[u];
                    left[u] = v;
                    right[v] = u;
                    v = prev;
                }
                matched += 1;
            }
        }
    }
}

/// A cycle among the tasks Kahn's algorithm could not order.
fn find_cycle(preds: &[Vec<usize>], missing: &[usize]) -> Vec<usize> {
    let stuck: Vec<bool> = missing.iter().map(|&m| m > 0).collect();
    let start = stuck.iter().position(|&s| s).expect("a stuck task");
    // Walk waits among stuck tasks until one repeats.
    let mut seen: HashMap<usize, usize> = HashMap::new();
    let mut path = Vec::new();
    let mut cur = start;
    loop {
        if let Some(&at) = seen.get(&cur) {
            let mut cycle = path[at..].to_vec();
            cycle.push(cur);
            return cycle;
        }
        seen.insert(cur, path.len());
        path.push(cur);
        cur = *preds[cur]
            .iter()
            .find(|&&p| stuck[p])
            .expect("a stuck task waits for a stuck task");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A graph from its predecessor lists (in a topological order already).
    fn dag(preds: &[&[usize]]) -> Dag {
        let n = preds.len();
        let mut succs = vec![Vec::new(); n];
        for (i, ps) in preds.iter().enumerate() {
            for &p in *ps {
                succs[p].push(i);
            }
        }
        Dag {
            preds: preds.iter().map(|p| p.to_vec()).collect(),
            succs,
            order: (0..n).collect(),
            repos: vec!["r".into(); n],
        }
    }

    #[test]
    fn the_critical_chain_follows_the_longest_durations() {
        // 0 → {1, 2} → 3, and 4 alone.
        let d = dag(&[&[], &[0], &[0], &[1, 2], &[]]);
        assert_eq!(d.critical_chain(&[10, 5, 30, 1, 20]), vec![0, 2, 3]);
        // What a task actually took moves the path: 1 ran long.
        assert_eq!(d.critical_chain(&[10, 50, 30, 1, 20]), vec![0, 1, 3]);
        // A lone long task is the path by itself.
        assert_eq!(d.critical_chain(&[10, 5, 30, 1, 100]), vec![4]);
        // Ties: the task first in the wave.
        assert_eq!(d.critical_chain(&[1, 5, 5, 1, 0]), vec![0, 1, 3]);
        assert_eq!(dag(&[]).critical_chain(&[]), Vec::<usize>::new());
        // It agrees with the estimates' critical path length.
        let est = [10, 5, 30, 1, 20];
        let chain = d.critical_chain(&est);
        assert_eq!(
            chain.iter().map(|&i| est[i]).sum::<u64>(),
            d.critical_path(&est)
        );
        let on = d.on_critical_path(&est);
        assert!(chain.iter().all(|&i| on[i]));
    }
}
