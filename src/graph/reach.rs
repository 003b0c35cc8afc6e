//! The reachability index: each repository's chain (its transitive dependencies and dependents)
//! as one bitset row, built once per graph on the first chain question, so `chain_of`,
//! `relation` and `conflicts` are O(1).

use super::*;

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
pub(super) struct Reach {
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
    pub(super) fn build(graph: &DiGraph<String, ()>) -> Reach {
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
    pub(super) fn closure<'a>(
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
    pub(super) fn relation(&self, a: usize, b: usize) -> Option<Relation> {
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
    pub(super) graph: &'g RepoGraph,
    pub(super) name: &'g str,
    /// `None`: `name` is not in the graph (only the same name relates to it).
    pub(super) node: Option<(usize, &'g Reach)>,
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
