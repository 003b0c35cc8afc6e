//! The repository dependency graph: transitive closures, chains, layers, critical paths.
//!
//! Pure: built from (name, direct deps) pairs, no I/O. Edges point from a dependency to the
//! repository that depends on it, so "dependents" are reachable forwards and "dependencies"
//! backwards.
//!
//! Chain questions ("does a lock on b block a?") are answered in O(1) from a reachability
//! index (`Reach`), built once per graph on the first such question; the listings (`deps`,
//! `dependents`, `chain`) still walk the graph, their cost being the size of their answer.
//! Also here: the spec's seed organisation (`seed_organisation`, for tests and benchmarks);
//! the index in `reach.rs`, the DOT and Mermaid renderings in `render.rs`.

use petgraph::Direction;
use petgraph::graph::{DiGraph, NodeIndex};
use std::collections::{BTreeSet, HashMap};
use std::sync::OnceLock;
use std::time::Duration;

mod reach;
mod render;

use reach::Reach;
pub use reach::{ChainOf, Relation};

#[derive(Debug, Clone)]
pub struct RepoGraph {
    graph: DiGraph<String, ()>,
    /// foldhash, not SipHash: a chain check hashes one name per active lock, the rest of it
    /// is one bit test. A look-up of a short name among 10,000 took 15–20 ns with SipHash and
    /// 7–8 ns with foldhash (2 cores, 2026-11-26). The names are the operator's
    /// configuration, not input an attacker chooses: flooding resistance buys nothing here.
    index: HashMap<String, NodeIndex, foldhash::fast::RandomState>,
    /// Sorted, for stable output.
    names: Vec<String>,
    /// Built on first use: a process that never asks a chain question (most commands) never
    /// pays for it.
    reach: OnceLock<Reach>,
}

impl RepoGraph {
    /// The seed organisation of the spec (the one repos.yaml describes): ten repositories, for
    /// tests, benchmarks and examples.
    pub fn seed_organisation() -> RepoGraph {
        const SEED: &[(&str, &[&str])] = &[
            ("acdc-core", &[]),
            ("alphavm", &["acdc-core"]),
            ("deltavm", &["acdc-core"]),
            ("adnet", &["alphavm", "deltavm", "acdc-core"]),
            ("alphaos", &["alphavm", "acdc-core"]),
            ("deltaos", &["deltavm", "acdc-core"]),
            ("ac-dc", &["adnet"]),
            ("adl", &["acdc-core"]),
            ("adl-examples", &["adl"]),
            ("sdk", &[]),
        ];
        RepoGraph::new(SEED.iter().map(|(n, d)| {
            (
                n.to_string(),
                d.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            )
        }))
    }

    /// Builds the graph. Dependencies on names that are not nodes are ignored (validation
    /// reports them); duplicate edges are collapsed.
    pub fn new<I, D>(repos: I) -> RepoGraph
    where
        I: IntoIterator<Item = (String, D)>,
        D: IntoIterator<Item = String>,
    {
        let repos: Vec<(String, Vec<String>)> = repos
            .into_iter()
            .map(|(n, d)| (n, d.into_iter().collect()))
            .collect();
        let mut graph = DiGraph::with_capacity(repos.len(), repos.len() * 2);
        let mut index = HashMap::with_capacity_and_hasher(repos.len(), Default::default());
        for (name, _) in &repos {
            index
                .entry(name.clone())
                .or_insert_with(|| graph.add_node(name.clone()));
        }
        for (name, deps) in &repos {
            let to = index[name];
            for d in deps {
                if let Some(&from) = index.get(d)
                    && graph.find_edge(from, to).is_none()
                {
                    graph.add_edge(from, to, ());
                }
            }
        }
        let mut names: Vec<String> = index.keys().cloned().collect();
        names.sort();
        RepoGraph {
            graph,
            index,
            names,
            reach: OnceLock::new(),
        }
    }

    fn reach(&self) -> &Reach {
        self.reach.get_or_init(|| Reach::build(&self.graph))
    }

    /// Chain questions about `name`, answered from the reachability index (built on the first
    /// call for this graph). This is the hot path of `can_spawn` and of every lock acquire.
    pub fn chain_of<'g>(&'g self, name: &'g str) -> ChainOf<'g> {
        ChainOf {
            graph: self,
            name,
            node: self.index.get(name).map(|i| (i.index(), self.reach())),
        }
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }

    pub fn contains(&self, name: &str) -> bool {
        self.index.contains_key(name)
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// A dependency cycle as a path that returns to its start (`a -> b -> a`), or `None`.
    /// A self-dependency is reported as `a -> a`.
    pub fn find_cycle(&self) -> Option<Vec<String>> {
        for scc in petgraph::algo::tarjan_scc(&self.graph) {
            let start = *scc.iter().min_by_key(|n| &self.graph[**n])?;
            let self_loop = self.graph.find_edge(start, start).is_some();
            if scc.len() == 1 && !self_loop {
                continue;
            }
            if self_loop {
                return Some(vec![self.graph[start].clone(), self.graph[start].clone()]);
            }
            let members: BTreeSet<NodeIndex> = scc.iter().copied().collect();
            // Shortest walk dependency-wise (incoming edges: "x depends on y") from `start`
            // back to itself, so the printed path reads "a depends on b depends on a".
            let mut parent: HashMap<NodeIndex, NodeIndex> = HashMap::new();
            let mut queue = std::collections::VecDeque::from([start]);
            let mut closing = None;
            'bfs: while let Some(cur) = queue.pop_front() {
                let mut nexts: Vec<NodeIndex> = self
                    .graph
                    .neighbors_directed(cur, Direction::Incoming)
                    .filter(|n| members.contains(n))
                    .collect();
                nexts.sort_by_key(|n| &self.graph[*n]);
                for next in nexts {
                    if next == start {
                        closing = Some(cur);
                        break 'bfs;
                    }
                    if next != start && !parent.contains_key(&next) {
                        parent.insert(next, cur);
                        queue.push_back(next);
                    }
                }
            }
            let mut rev = vec![start];
            let mut cur = closing?;
            while cur != start {
                rev.push(cur);
                cur = parent[&cur];
            }
            rev.push(start);
            rev.reverse();
            let path = rev;
            return Some(path.into_iter().map(|n| self.graph[n].clone()).collect());
        }
        None
    }

    fn closure(&self, name: &str, dir: Direction) -> Vec<NodeIndex> {
        let Some(&start) = self.index.get(name) else {
            return Vec::new();
        };
        let mut seen = vec![false; self.graph.node_count()];
        seen[start.index()] = true;
        let mut stack = vec![start];
        let mut out = Vec::new();
        while let Some(n) = stack.pop() {
            for m in self.graph.neighbors_directed(n, dir) {
                if !seen[m.index()] {
                    seen[m.index()] = true;
                    out.push(m);
                    stack.push(m);
                }
            }
        }
        out
    }

    fn sorted_names(&self, nodes: Vec<NodeIndex>) -> Vec<String> {
        let mut v: Vec<String> = nodes.into_iter().map(|n| self.graph[n].clone()).collect();
        v.sort();
        v
    }

    /// Everything `name` depends on, transitively, sorted.
    pub fn deps(&self, name: &str) -> Vec<String> {
        self.sorted_names(self.closure(name, Direction::Incoming))
    }

    /// Everything that depends on `name`, transitively, sorted.
    pub fn dependents(&self, name: &str) -> Vec<String> {
        self.sorted_names(self.closure(name, Direction::Outgoing))
    }

    /// Direct dependencies of `name`, sorted.
    pub fn direct_deps(&self, name: &str) -> Vec<String> {
        let Some(&n) = self.index.get(name) else {
            return Vec::new();
        };
        self.sorted_names(
            self.graph
                .neighbors_directed(n, Direction::Incoming)
                .collect(),
        )
    }

    /// The chain of `name`: its transitive dependencies and dependents (not `name` itself).
    pub fn chain(&self, name: &str) -> Vec<String> {
        let mut v = self.deps(name);
        v.extend(self.dependents(name));
        v.sort();
        v.dedup();
        v
    }

    /// How `other` relates to `name`, if it is in `name`'s chain.
    pub fn relation(&self, name: &str, other: &str) -> Option<Relation> {
        if !self.contains(name) {
            return None;
        }
        self.chain_of(name).relation(other)
    }

    /// Two repositories conflict when one is in the other's chain (or they are the same).
    pub fn conflicts(&self, a: &str, b: &str) -> bool {
        self.relation(a, b).is_some()
    }

    /// Topological layers: layer 0 holds the roots; a repository sits one layer above its
    /// deepest dependency. Each layer is sorted. Empty if the graph has a cycle.
    pub fn layers(&self) -> Vec<Vec<String>> {
        let Ok(order) = petgraph::algo::toposort(&self.graph, None) else {
            return Vec::new();
        };
        let mut depth = vec![0usize; self.graph.node_count()];
        for &n in &order {
            for m in self.graph.neighbors_directed(n, Direction::Outgoing) {
                depth[m.index()] = depth[m.index()].max(depth[n.index()] + 1);
            }
        }
        let max = depth.iter().copied().max().unwrap_or(0);
        let mut layers = vec![Vec::new(); if order.is_empty() { 0 } else { max + 1 }];
        for &n in &order {
            layers[depth[n.index()]].push(self.graph[n].clone());
        }
        for l in &mut layers {
            l.sort();
        }
        layers
    }

    /// The longest path through the graph when each repository takes `durations[name]`
    /// (missing: zero), as (path from root to leaf, total). Ties break by name for stability.
    pub fn critical_path(&self, durations: &HashMap<String, Duration>) -> (Vec<String>, Duration) {
        let Ok(order) = petgraph::algo::toposort(&self.graph, None) else {
            return (Vec::new(), Duration::ZERO);
        };
        let n = self.graph.node_count();
        let mut finish = vec![Duration::ZERO; n];
        let mut prev: Vec<Option<NodeIndex>> = vec![None; n];
        for &v in &order {
            let own = durations.get(&self.graph[v]).copied().unwrap_or_default();
            let mut best: Option<NodeIndex> = None;
            for u in self.graph.neighbors_directed(v, Direction::Incoming) {
                let better = match best {
                    None => true,
                    Some(b) => {
                        (finish[u.index()], &self.graph[b]) > (finish[b.index()], &self.graph[u])
                    }
                };
                if better {
                    best = Some(u);
                }
            }
            finish[v.index()] = own + best.map(|b| finish[b.index()]).unwrap_or_default();
            prev[v.index()] = best;
        }
        let Some(end) = order.iter().copied().max_by(|a, b| {
            finish[a.index()]
                .cmp(&finish[b.index()])
                .then_with(|| self.graph[*b].cmp(&self.graph[*a]))
        }) else {
            return (Vec::new(), Duration::ZERO);
        };
        let mut path = vec![end];
        let mut cur = end;
        while let Some(p) = prev[cur.index()] {
            path.push(p);
            cur = p;
        }
        path.reverse();
        (
            path.into_iter().map(|x| self.graph[x].clone()).collect(),
            finish[end.index()],
        )
    }
}

#[cfg(test)]
mod tests;
