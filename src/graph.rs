//! The repository dependency graph: transitive closures, chains, layers, critical paths.
//!
//! Pure: built from (name, direct deps) pairs, no I/O. Edges point from a dependency to the
//! repository that depends on it, so "dependents" are reachable forwards and "dependencies"
//! backwards.
//!
//! Chain questions ("does a lock on b block a?") are answered in O(1) from a reachability
//! index (`Reach`), built once per graph on the first such question; the listings (`deps`,
//! `dependents`, `chain`) still walk the graph, their cost being the size of their answer.
//! Also here: the text, DOT and Mermaid renderings, and the spec's seed organisation
//! (`seed_organisation`, for tests and benchmarks).

use petgraph::Direction;
use petgraph::graph::{DiGraph, NodeIndex};
use std::collections::{BTreeSet, HashMap};
use std::sync::OnceLock;
use std::time::Duration;

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

/// Every node's chain as one bitset row: bit `j` of row `i` says node `j` is something node `i`
/// depends on or something that depends on it, transitively. The relation is symmetric, so a
/// question about `a` reads only `a`'s row, which stays in cache across all the locks it is
/// checked against. Which of the two `j` is follows from the topological order of the nodes'
/// strongly connected components (a dependency's comes first).
///
/// n² bits: 10,000 repositories take 12.5 MB (100 take 1.3 kB; twice that for a moment while
/// it is built), built in 13–31 ms on 2 loaded cores (BENCHMARKS.md; microseconds for a
/// hundred): one pass over the components dependencies first for the dependencies, one the
/// other way for the dependents, each row the union of its direct neighbours' rows. Walking the
/// graph per question instead visited a median of 3,311 of 10,000 nodes and zeroed a 10 kB mark
/// vector every time (24–80 µs): the build is worth some hundreds of walks, so a process that
/// asks only a few questions of a huge graph pays more than it did.
#[derive(Clone)]
struct Reach {
    /// u64 words per row.
    words: usize,
    rows: Vec<u64>,
    /// Per node, the topological position of its component.
    order: Vec<u32>,
}

impl std::fmt::Debug for Reach {
    // Not the bits: a debug print of a big graph would be megabytes.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Reach({} nodes)", self.order.len())
    }
}

impl Reach {
    fn build(graph: &DiGraph<String, ()>) -> Reach {
        let n = graph.node_count();
        let words = n.div_ceil(64);
        // Tarjan yields components in postorder: each after every component it reaches, i.e.
        // after its dependents. Reversed, each comes after its dependencies. Members of one
        // component (a cycle, which validation refuses but a graph can hold) reach each other
        // and share one row.
        let mut sccs = petgraph::algo::tarjan_scc(graph);
        sccs.reverse();
        let mut order = vec![0u32; n];
        for (pos, scc) in sccs.iter().enumerate() {
            for m in scc {
                order[m.index()] = pos as u32;
            }
        }
        let deps = Self::closure(graph, words, sccs.iter(), Direction::Incoming);
        let mut rows = Self::closure(graph, words, sccs.iter().rev(), Direction::Outgoing);
        for (r, d) in rows.iter_mut().zip(&deps) {
            *r |= d;
        }
        Reach { words, rows, order }
    }

    /// One row per node: everything reachable along `dir`, the components visited so that
    /// every neighbour along `dir` comes first.
    fn closure<'a>(
        graph: &DiGraph<String, ()>,
        words: usize,
        sccs: impl Iterator<Item = &'a Vec<NodeIndex>>,
        dir: Direction,
    ) -> Vec<u64> {
        let mut rows = vec![0u64; graph.node_count() * words];
        let mut row = vec![0u64; words];
        for scc in sccs {
            row.fill(0);
            for &m in scc {
                for d in graph.neighbors_directed(m, dir) {
                    let di = d.index();
                    row[di / 64] |= 1 << (di % 64);
                    // A row of the same component is not built yet (all zero): its members
                    // are covered by the edges inside the component, which set their bits.
                    for (w, x) in row.iter_mut().zip(&rows[di * words..(di + 1) * words]) {
                        *w |= x;
                    }
                }
            }
            for &m in scc {
                let mi = m.index();
                rows[mi * words..(mi + 1) * words].copy_from_slice(&row);
            }
        }
        rows
    }

    /// How `b` relates to `a`. A node on a cycle through `a` is both; it is reported as a
    /// dependency, as the walk this replaced did.
    fn relation(&self, a: usize, b: usize) -> Option<Relation> {
        if a == b {
            Some(Relation::Itself)
        } else if self.rows[a * self.words + b / 64] >> (b % 64) & 1 == 0 {
            None
        } else if self.order[b] <= self.order[a] {
            Some(Relation::Dependency)
        } else {
            Some(Relation::Dependent)
        }
    }
}

/// Chain questions about one repository (`RepoGraph::chain_of`): O(1) each.
#[derive(Debug, Clone, Copy)]
pub struct ChainOf<'g> {
    graph: &'g RepoGraph,
    name: &'g str,
    /// `None`: `name` is not in the graph (only the same name relates to it).
    node: Option<(usize, &'g Reach)>,
}

impl ChainOf<'_> {
    /// How `other` relates to the repository asked about (`None`: not in its chain). A name
    /// that is not in the graph relates only to itself.
    pub fn relation(&self, other: &str) -> Option<Relation> {
        match (self.node, self.graph.index.get(other)) {
            (Some((a, reach)), Some(b)) => reach.relation(a, b.index()),
            _ => (other == self.name).then_some(Relation::Itself),
        }
    }

    /// Whether `other` is in the chain (or is the repository itself).
    pub fn contains(&self, other: &str) -> bool {
        self.relation(other).is_some()
    }
}

/// How a repository relates to the one a chain is computed for.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Relation {
    /// The repository itself.
    #[serde(rename = "self")]
    Itself,
    /// Something it depends on, transitively.
    Dependency,
    /// Something that depends on it, transitively.
    Dependent,
    /// A repository repos.yaml does not name (renamed or removed since its lock was taken):
    /// its chain cannot be known, so a lock on it conflicts with everything.
    Unknown,
    /// A lock whose worker works in the clone repos.yaml now names the repository asked about
    /// (one clone under two names since the lock was taken): never from the graph, only from
    /// `lock::drift`.
    #[serde(rename = "same_clone")]
    SameClone,
}

impl Relation {
    pub fn as_str(self) -> &'static str {
        match self {
            Relation::Itself => "self",
            Relation::Dependency => "dependency",
            Relation::Dependent => "dependent",
            Relation::Unknown => "unknown",
            Relation::SameClone => "same_clone",
        }
    }
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

    /// Graphviz DOT, edges from dependency to dependent. Every id is quoted (and escaped), so
    /// no repository name is read as a keyword (`node`, `graph`, `edge`, …) or split at a `.`
    /// or `-`.
    pub fn to_dot(&self) -> String {
        let q = |n: &str| format!("\"{}\"", n.replace('\\', "\\\\").replace('"', "\\\""));
        let mut s = String::from("digraph repos {\n  rankdir=BT;\n");
        for name in &self.names {
            s.push_str(&format!("  {};\n", q(name)));
        }
        for name in &self.names {
            for d in self.direct_deps(name) {
                s.push_str(&format!("  {} -> {};\n", q(name), q(&d)));
            }
        }
        s.push_str("}\n");
        s
    }

    /// Mermaid flowchart, arrows from a repository to what it depends on. Node ids are
    /// generated (`r0`, `r1`, … in the order of the names), never derived from a name: two
    /// names that differ only in punctuation (`core.x`, `core-x`) stay two nodes, and no
    /// name becomes a reserved word (`end`, `graph`, `subgraph`, `style`, `class`, `click`).
    /// The names are the quoted labels.
    pub fn to_mermaid(&self) -> String {
        let ids: HashMap<&str, String> = self
            .names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.as_str(), format!("r{i}")))
            .collect();
        // Mermaid's own escape for a quote inside a quoted label.
        let label = |n: &str| n.replace('"', "#quot;");
        let mut s = String::from("graph BT\n");
        for name in &self.names {
            s.push_str(&format!("  {}[\"{}\"]\n", ids[name.as_str()], label(name)));
        }
        for name in &self.names {
            for d in self.direct_deps(name) {
                if let Some(to) = ids.get(d.as_str()) {
                    s.push_str(&format!("  {} --> {to}\n", ids[name.as_str()]));
                }
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    pub(crate) fn seed() -> RepoGraph {
        RepoGraph::seed_organisation()
    }

    #[test]
    fn closures_are_transitive() {
        let g = seed();
        assert_eq!(
            g.deps("ac-dc"),
            ["acdc-core", "adnet", "alphavm", "deltavm"]
        );
        assert_eq!(g.dependents("alphavm"), ["ac-dc", "adnet", "alphaos"]);
        assert_eq!(
            g.dependents("acdc-core"),
            [
                "ac-dc",
                "adl",
                "adl-examples",
                "adnet",
                "alphaos",
                "alphavm",
                "deltaos",
                "deltavm"
            ]
        );
        assert!(g.chain("sdk").is_empty());
        assert!(!g.chain("adnet").contains(&"adnet".to_string()));
    }

    #[test]
    fn seed_repo_dependents_table_matches_direct_inverse() {
        // The seed's repo_dependents lists direct dependents; our closure must include them.
        let g = seed();
        for (repo, direct) in [
            (
                "acdc-core",
                vec!["alphavm", "deltavm", "adnet", "alphaos", "deltaos", "adl"],
            ),
            ("alphavm", vec!["adnet", "alphaos"]),
            ("deltavm", vec!["adnet", "deltaos"]),
            ("adnet", vec!["ac-dc"]),
            ("adl", vec!["adl-examples"]),
        ] {
            let all = g.dependents(repo);
            for d in direct {
                assert!(all.contains(&d.to_string()), "{d} depends on {repo}");
            }
        }
    }

    #[test]
    fn layers_put_roots_first() {
        let g = seed();
        assert_eq!(
            g.layers(),
            vec![
                vec!["acdc-core", "sdk"],
                vec!["adl", "alphavm", "deltavm"],
                vec!["adl-examples", "adnet", "alphaos", "deltaos"],
                vec!["ac-dc"],
            ]
        );
    }

    #[test]
    fn critical_path_follows_the_heaviest_chain() {
        let g = seed();
        let m = |s: u64| Duration::from_secs(s * 60);
        let d: HashMap<String, Duration> = [
            ("acdc-core", m(10)),
            ("alphavm", m(30)),
            ("deltavm", m(5)),
            ("adnet", m(20)),
            ("ac-dc", m(5)),
            ("sdk", m(100)),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        let (path, total) = g.critical_path(&d);
        assert_eq!(path, ["sdk"]);
        assert_eq!(total, m(100));
        let mut d2 = d.clone();
        d2.insert("sdk".into(), m(1));
        let (path, total) = g.critical_path(&d2);
        assert_eq!(path, ["acdc-core", "alphavm", "adnet", "ac-dc"]);
        assert_eq!(total, m(65));
    }

    #[test]
    fn cycles_are_found_and_printed() {
        let g = RepoGraph::new([
            ("alphavm".to_string(), vec!["adnet".to_string()]),
            ("adnet".to_string(), vec!["alphavm".to_string()]),
            ("x".to_string(), vec![]),
        ]);
        assert_eq!(g.find_cycle().unwrap(), ["adnet", "alphavm", "adnet"]);
        let g3 = RepoGraph::new([
            ("a".to_string(), vec!["b".to_string()]),
            ("b".to_string(), vec!["c".to_string()]),
            ("c".to_string(), vec!["a".to_string()]),
        ]);
        assert_eq!(g3.find_cycle().unwrap(), ["a", "b", "c", "a"]);
        assert!(seed().find_cycle().is_none());
    }

    fn punctuated() -> RepoGraph {
        RepoGraph::new([
            ("core.x".to_string(), vec![]),
            ("core-x".to_string(), vec!["core.x".to_string()]),
            (
                "end".to_string(),
                vec!["core-x".to_string(), "core.x".to_string()],
            ),
            ("graph".to_string(), vec!["end".to_string()]),
        ])
    }

    #[test]
    fn mermaid_ids_are_generated_and_names_are_quoted_labels() {
        let m = punctuated().to_mermaid();
        let lines: Vec<&str> = m.lines().collect();
        assert_eq!(lines[0], "graph BT");
        let nodes: Vec<&str> = lines
            .iter()
            .filter(|l| l.contains("[\""))
            .copied()
            .collect();
        assert_eq!(nodes.len(), 4, "core.x and core-x stay two nodes:\n{m}");
        let mut labels = Vec::new();
        let mut ids = std::collections::HashMap::new();
        for n in &nodes {
            let (id, rest) = n.trim().split_once('[').unwrap();
            assert!(
                id.starts_with('r') && id[1..].chars().all(|c| c.is_ascii_digit()),
                "generated id, not a name: {n}"
            );
            let label = rest.trim_end_matches(']').trim_matches('"');
            labels.push(label);
            ids.insert(label, id);
        }
        labels.sort();
        assert_eq!(labels, ["core-x", "core.x", "end", "graph"]);
        let edges: Vec<(&str, &str)> = lines
            .iter()
            .filter_map(|l| l.trim().split_once(" --> "))
            .collect();
        assert_eq!(edges.len(), 4, "{m}");
        assert!(edges.contains(&(ids["core-x"], ids["core.x"])), "{m}");
        assert!(edges.contains(&(ids["end"], ids["core.x"])), "{m}");
        assert!(edges.contains(&(ids["end"], ids["core-x"])), "{m}");
        assert!(edges.contains(&(ids["graph"], ids["end"])), "{m}");
        // No reserved word is ever a bare token: names only appear inside quotes.
        for l in &lines[1..] {
            let outside: String = l.split('"').step_by(2).collect();
            for word in [
                "end", "graph", "subgraph", "style", "class", "click", "core",
            ] {
                assert!(
                    !outside
                        .split(|c: char| !c.is_alphanumeric())
                        .any(|t| t == word),
                    "bare {word:?} in {l:?}"
                );
            }
        }
    }

    #[test]
    fn a_quote_in_a_name_cannot_end_a_label_or_an_id() {
        let g = RepoGraph::new([("a\"b".to_string(), vec![])]);
        assert_eq!(g.to_mermaid(), "graph BT\n  r0[\"a#quot;b\"]\n");
        assert!(g.to_dot().contains("  \"a\\\"b\";\n"), "{}", g.to_dot());
    }

    #[test]
    fn dot_quotes_every_id() {
        let d = punctuated().to_dot();
        assert!(d.contains("  \"end\";\n"), "{d}");
        assert!(d.contains("  \"core-x\" -> \"core.x\";\n"), "{d}");
        assert!(d.contains("  \"graph\" -> \"end\";\n"), "{d}");
        assert!(
            d.starts_with("digraph repos {\n") && d.ends_with("}\n"),
            "{d}"
        );
    }

    /// The plain walk the index replaced: `deps` and `dependents` still traverse the graph.
    fn walked(g: &RepoGraph, a: &str, b: &str) -> Option<Relation> {
        if a == b {
            Some(Relation::Itself)
        } else if g.deps(a).iter().any(|d| d == b) {
            Some(Relation::Dependency)
        } else if g.dependents(a).iter().any(|d| d == b) {
            Some(Relation::Dependent)
        } else {
            None
        }
    }

    /// Nodes 0..n; `edges` are (dependent, dependency) pairs.
    fn built(n: usize, edges: &[(usize, usize)]) -> RepoGraph {
        let name = |i: usize| format!("r{i}");
        RepoGraph::new((0..n).map(|i| {
            let deps: Vec<String> = edges
                .iter()
                .filter(|(a, _)| *a == i)
                .map(|(_, b)| name(*b))
                .collect();
            (name(i), deps)
        }))
    }

    fn assert_index_matches_walk(g: &RepoGraph) -> Result<(), TestCaseError> {
        for a in g.names() {
            let chain = g.chain_of(a);
            for b in g.names() {
                let want = walked(g, a, b);
                prop_assert_eq!(chain.relation(b), want, "{} to {}", b, a);
                prop_assert_eq!(g.relation(a, b), want, "{} to {}", b, a);
                prop_assert_eq!(g.conflicts(a, b), want.is_some());
            }
        }
        Ok(())
    }

    proptest! {
        /// The reachability index answers exactly what walking the graph answers, on random
        /// DAGs (node i may depend only on nodes < i; sizes across a 64-bit word boundary).
        #[test]
        fn index_equals_walk_on_random_dags(
            (n, edges) in (1usize..140).prop_flat_map(|n| {
                (Just(n), proptest::collection::vec((0..n, 0..n), 0..n * 3)
                    .prop_map(|v| v.into_iter().filter(|(a, b)| a > b).collect::<Vec<_>>()))
            })
        ) {
            assert_index_matches_walk(&built(n, &edges))?;
        }

        /// The same with cycles and self-dependencies, which validation refuses but a graph
        /// can hold (every member of a cycle reaches the others).
        #[test]
        fn index_equals_walk_with_cycles(
            (n, edges) in (1usize..40).prop_flat_map(|n| {
                (Just(n), proptest::collection::vec((0..n, 0..n), 0..n * 2))
            })
        ) {
            assert_index_matches_walk(&built(n, &edges))?;
        }
    }

    #[test]
    fn a_name_not_in_the_graph_relates_only_to_itself() {
        let g = seed();
        let chain = g.chain_of("gone");
        assert_eq!(chain.relation("gone"), Some(Relation::Itself));
        assert_eq!(chain.relation("acdc-core"), None);
        assert_eq!(g.chain_of("acdc-core").relation("gone"), None);
        assert_eq!(g.relation("gone", "gone"), None);
        let empty = RepoGraph::new(std::iter::empty::<(String, Vec<String>)>());
        assert_eq!(empty.chain_of("x").relation("x"), Some(Relation::Itself));
    }
}
