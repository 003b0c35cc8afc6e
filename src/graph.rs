//! The repository dependency graph: transitive closures, chains, layers, critical paths.
//!
//! Pure: built from (name, direct deps) pairs, no I/O. Edges point from a dependency to the
//! repository that depends on it, so "dependents" are reachable forwards and "dependencies"
//! backwards.

use petgraph::Direction;
use petgraph::graph::{DiGraph, NodeIndex};
use std::collections::{BTreeSet, HashMap};
use std::time::Duration;

#[derive(Debug, Clone)]
pub struct RepoGraph {
    graph: DiGraph<String, ()>,
    index: HashMap<String, NodeIndex>,
    /// Sorted, for stable output.
    names: Vec<String>,
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
}

impl Relation {
    pub fn as_str(self) -> &'static str {
        match self {
            Relation::Itself => "self",
            Relation::Dependency => "dependency",
            Relation::Dependent => "dependent",
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
        let mut index = HashMap::with_capacity(repos.len());
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

    /// How each of `others` relates to `name` (`None`: not in its chain), computed with one
    /// traversal each way over node indices — no per-repository allocation. This is the hot
    /// path of `can_spawn`.
    pub fn relations_to<'a>(
        &self,
        name: &str,
        others: impl IntoIterator<Item = &'a str>,
    ) -> Vec<Option<Relation>> {
        let Some(&start) = self.index.get(name) else {
            return others
                .into_iter()
                .map(|o| (o == name).then_some(Relation::Itself))
                .collect();
        };
        // 1 = dependency, 2 = dependent, 3 = itself.
        let mut mark = vec![0u8; self.graph.node_count()];
        mark[start.index()] = 3;
        for (dir, tag) in [(Direction::Incoming, 1u8), (Direction::Outgoing, 2u8)] {
            let mut stack = vec![start];
            while let Some(n) = stack.pop() {
                for m in self.graph.neighbors_directed(n, dir) {
                    if mark[m.index()] == 0 {
                        mark[m.index()] = tag;
                        stack.push(m);
                    }
                }
            }
        }
        others
            .into_iter()
            .map(|o| match self.index.get(o).map(|i| mark[i.index()]) {
                Some(1) => Some(Relation::Dependency),
                Some(2) => Some(Relation::Dependent),
                Some(3) => Some(Relation::Itself),
                _ => (o == name).then_some(Relation::Itself),
            })
            .collect()
    }

    /// How every repository in `name`'s chain relates to it, including `name` itself.
    pub fn chain_relations(&self, name: &str) -> HashMap<String, Relation> {
        let mut m = HashMap::new();
        if !self.contains(name) {
            return m;
        }
        m.insert(name.to_string(), Relation::Itself);
        for n in self.closure(name, Direction::Incoming) {
            m.insert(self.graph[n].clone(), Relation::Dependency);
        }
        for n in self.closure(name, Direction::Outgoing) {
            m.insert(self.graph[n].clone(), Relation::Dependent);
        }
        m
    }

    /// How `other` relates to `name`, if it is in `name`'s chain.
    pub fn relation(&self, name: &str, other: &str) -> Option<Relation> {
        if name == other {
            return self.contains(name).then_some(Relation::Itself);
        }
        self.chain_relations(name).get(other).copied()
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
}
