//! Chain locks: who may work where. The pure part — given the active locks, which of them
//! block a repository — lives here; taking and releasing locks atomically is in the store.
//!
//! A lock on X covers X's chain: X, everything X depends on and everything that depends on X,
//! transitively. Two locks conflict when either repository is in the other's chain; the
//! relation is symmetric, so checking the requested repository's chain is enough.

use crate::graph::{Relation, RepoGraph};
use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum HolderKind {
    /// An operator's freeze (`orch hold`).
    Hold,
    /// A worker; released on verified DONE, cancel, or a forced release.
    Worker,
}

impl HolderKind {
    pub fn as_str(self) -> &'static str {
        match self {
            HolderKind::Hold => "hold",
            HolderKind::Worker => "worker",
        }
    }

    pub fn parse(s: &str) -> Option<HolderKind> {
        match s {
            "hold" => Some(HolderKind::Hold),
            "worker" => Some(HolderKind::Worker),
            _ => None,
        }
    }
}

/// An active chain lock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ChainLock {
    pub id: i64,
    pub repo: String,
    /// `hold:<name>` for operator holds, the worker id for workers.
    pub holder: String,
    pub kind: HolderKind,
    pub reason: Option<String>,
    pub by: Option<String>,
    pub acquired_ms: i64,
}

/// An active lock that stops a worker from starting on some repository.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Blocker {
    /// The locked repository.
    pub repo: String,
    pub holder: String,
    pub kind: HolderKind,
    /// How the locked repository relates to the one asked about.
    pub relation: Relation,
}

impl Blocker {
    /// "alphavm is held by hold:release-1.2 — a dependency of adnet"
    pub fn describe(&self, asked: &str) -> String {
        let verb = match self.kind {
            HolderKind::Hold => "held by",
            HolderKind::Worker => "being worked on by",
        };
        let why = match self.relation {
            Relation::Itself => format!("{asked} itself"),
            Relation::Dependency => format!("a dependency of {asked}"),
            Relation::Dependent => format!("depends on {asked}"),
            Relation::Unknown => "a repository repos.yaml does not name (renamed or removed since its lock was taken): its chain is unknown, so it blocks every repository until its lock is released".to_string(),
        };
        format!("{} is {verb} {} — {why}", self.repo, self.holder)
    }
}

/// The active locks that block a new lock on `repo`, sorted by repository name. Each lock
/// costs one O(1) look-up in the graph's reachability index.
pub fn blockers(graph: &RepoGraph, repo: &str, active: &[ChainLock]) -> Vec<Blocker> {
    if active.is_empty() {
        return Vec::new();
    }
    // A lock on a repository that is no longer in repos.yaml blocks everything: its chain is
    // unknown (a rename keeps the clone and its live worker under a new name), so editing the
    // file never silently frees a chain.
    let chain = graph.chain_of(repo);
    let mut out: Vec<Blocker> = active
        .iter()
        .filter_map(|l| {
            let relation = if graph.contains(&l.repo) || l.repo == repo {
                chain.relation(&l.repo)?
            } else {
                Relation::Unknown
            };
            Some(Blocker {
                relation,
                repo: l.repo.clone(),
                holder: l.holder.clone(),
                kind: l.kind,
            })
        })
        .collect();
    out.sort_by(|a, b| a.repo.cmp(&b.repo));
    out
}

/// Whether any active lock blocks a new lock on `repo` (`!blockers(..).is_empty()` without
/// building the list: stops at the first blocker, allocates nothing), among repositories the
/// graph knows: what a lock on a name it does not know means (everything is blocked) is for
/// the acquire and [`blockers`] to say; the wave scheduler plans with known names only.
pub fn is_blocked<'a>(
    graph: &RepoGraph,
    repo: &str,
    active_repos: impl IntoIterator<Item = &'a str>,
) -> bool {
    let chain = graph.chain_of(repo);
    active_repos.into_iter().any(|r| chain.contains(r))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    fn seed() -> RepoGraph {
        RepoGraph::seed_organisation()
    }

    fn held(repo: &str) -> ChainLock {
        ChainLock {
            id: 1,
            repo: repo.into(),
            holder: format!("w-{repo}"),
            kind: HolderKind::Worker,
            reason: None,
            by: None,
            acquired_ms: 0,
        }
    }

    fn can_spawn(g: &RepoGraph, repo: &str, active: &[&str]) -> bool {
        let locks: Vec<ChainLock> = active.iter().map(|r| held(r)).collect();
        let free = blockers(g, repo, &locks).is_empty();
        assert_eq!(free, !is_blocked(g, repo, active.iter().copied()));
        free
    }

    /// Contract, "SPAWN BLOCKING EXAMPLE": alphavm is active.
    #[test]
    fn seed_spawn_blocking_example() {
        let g = seed();
        assert!(can_spawn(&g, "deltavm", &["alphavm"]));
        assert!(!can_spawn(&g, "adnet", &["alphavm"]));
        assert!(!can_spawn(&g, "acdc-core", &["alphavm"]));
        assert!(!can_spawn(&g, "alphaos", &["alphavm"]));
        assert!(can_spawn(&g, "sdk", &["alphavm"]));
        let b = blockers(&g, "adnet", &[held("alphavm")]);
        assert_eq!(b[0].relation, Relation::Dependency);
        assert_eq!(
            b[0].describe("adnet"),
            "alphavm is being worked on by w-alphavm — a dependency of adnet"
        );
        let b = blockers(&g, "acdc-core", &[held("alphavm")]);
        assert_eq!(b[0].relation, Relation::Dependent);
        let b = blockers(&g, "alphavm", &[held("alphavm")]);
        assert_eq!(b[0].relation, Relation::Itself);
    }

    /// A lock taken on a repository that repos.yaml no longer names (renamed: the same clone
    /// and its live worker under another name) blocks everything: its chain is unknown.
    #[test]
    fn a_lock_on_a_repository_repos_yaml_no_longer_names_blocks_everything() {
        let g = seed();
        let b = blockers(&g, "sdk", &[held("ghost")]);
        assert_eq!(b.len(), 1);
        assert_eq!(b[0].relation, Relation::Unknown);
        assert!(
            b[0].describe("sdk").contains("does not name"),
            "{}",
            b[0].describe("sdk")
        );
        assert!(!blockers(&g, "alphavm", &[held("ghost"), held("sdk")]).is_empty());
    }

    /// Contract, PARALLEL SPAWN RULES, can_parallel. Every listed pair is a true sibling pair
    /// under the transitive rule, so both orders may run together.
    #[test]
    fn seed_can_parallel_pairs() {
        let g = seed();
        for (a, b) in [
            ("alphavm", "deltavm"),
            ("alphavm", "adl"),
            ("deltavm", "adl"),
            ("alphaos", "deltaos"),
        ] {
            assert!(can_spawn(&g, a, &[b]), "{a} with {b}");
            assert!(can_spawn(&g, b, &[a]), "{b} with {a}");
        }
        // [sdk, anything]: sdk is independent of every repository.
        for other in g.names() {
            if other != "sdk" {
                assert!(
                    can_spawn(&g, "sdk", &[other.as_str()]) && can_spawn(&g, other, &["sdk"]),
                    "sdk with {other}"
                );
            }
        }
    }

    /// Contract, PARALLEL SPAWN RULES, cannot_parallel: every pair is in each other's chain.
    #[test]
    fn seed_cannot_parallel_pairs() {
        let g = seed();
        for (a, b) in [
            ("alphavm", "adnet"),
            ("alphavm", "alphaos"),
            ("deltavm", "adnet"),
            ("deltavm", "deltaos"),
            ("acdc-core", "alphavm"),
            ("acdc-core", "deltavm"),
            ("adnet", "ac-dc"),
        ] {
            assert!(!can_spawn(&g, a, &[b]), "{a} with {b}");
            assert!(!can_spawn(&g, b, &[a]), "{b} with {a}");
        }
    }

    /// Where the seed's hand-written lists are not transitive, the transitive rule wins.
    #[test]
    fn seed_mistakes_under_the_transitive_rule() {
        let g = seed();
        // The seed's repo_dependents lists only direct dependents: alphavm -> [adnet, alphaos].
        // ac-dc depends on adnet which depends on alphavm, so the two must not run together,
        // though the seed's can_spawn pseudo-code (direct lists only) would allow it.
        assert!(!can_spawn(&g, "ac-dc", &["alphavm"]));
        assert!(!can_spawn(&g, "alphavm", &["ac-dc"]));
        // Likewise acdc-core's seed dependents omit ac-dc and adl-examples.
        assert!(!can_spawn(&g, "ac-dc", &["acdc-core"]));
        assert!(!can_spawn(&g, "adl-examples", &["acdc-core"]));
        // The seed's comment on [alphaos, deltaos] says "(if alphavm/deltavm done)": that
        // condition is not needed; the two are siblings whatever alphavm/deltavm do.
        assert!(can_spawn(&g, "alphaos", &["deltaos"]));
        // spawn_strategy says phase 2 repos [alphavm, deltavm, adl] "can_parallel: false (all
        // depend on acdc-core)", contradicting can_parallel: they are siblings and may run.
        assert!(can_spawn(&g, "adl", &["alphavm", "deltavm"]));
    }

    /// A random DAG: node i may depend only on nodes < i.
    fn dag_strategy() -> impl Strategy<Value = (usize, Vec<(usize, usize)>, Vec<usize>, usize)> {
        (2usize..24).prop_flat_map(|n| {
            let edges = proptest::collection::vec((0..n, 0..n), 0..n * 2)
                .prop_map(|v| v.into_iter().filter(|(a, b)| a > b).collect::<Vec<_>>());
            let holders = proptest::collection::vec(0..n, 0..5);
            (Just(n), edges, holders, 0..n)
        })
    }

    fn brute_reach(n: usize, edges: &[(usize, usize)], from: usize, to: usize) -> bool {
        // edges are (dependent, dependency): follow dependent -> dependency.
        let mut seen = vec![false; n];
        let mut stack = vec![from];
        while let Some(x) = stack.pop() {
            if x == to {
                return true;
            }
            if std::mem::replace(&mut seen[x], true) {
                continue;
            }
            for &(a, b) in edges {
                if a == x {
                    stack.push(b);
                }
            }
        }
        false
    }

    proptest! {
        #[test]
        fn closure_can_spawn_equals_brute_force((n, edges, holders, repo) in dag_strategy()) {
            let name = |i: usize| format!("r{i}");
            let g = RepoGraph::new((0..n).map(|i| {
                (name(i), edges.iter().filter(|(a, _)| *a == i).map(|(_, b)| name(*b)).collect::<Vec<_>>())
            }));
            let holders: Vec<usize> = holders.into_iter().collect::<HashSet<_>>().into_iter().collect();
            let locks: Vec<ChainLock> = holders.iter().map(|h| held(&name(*h))).collect();
            let fast = blockers(&g, &name(repo), &locks).is_empty();
            prop_assert_eq!(fast, !is_blocked(&g, &name(repo), locks.iter().map(|l| l.repo.as_str())));
            let brute = !holders.iter().any(|&h| {
                h == repo || brute_reach(n, &edges, repo, h) || brute_reach(n, &edges, h, repo)
            });
            prop_assert_eq!(fast, brute);
        }
    }
}
