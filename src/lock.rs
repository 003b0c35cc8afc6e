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
            Relation::SameClone => format!("it works in the clone repos.yaml now names {asked} (one clone under two names since its lock was taken)"),
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

/// What a change of repos.yaml did to locks taken under the old one (pure; see [`drift`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Drift {
    /// Two live locks whose chains overlap under the current graph (an edge added between
    /// their repositories): `b`'s repository is `relation` of `a`'s.
    Conflict {
        a: ChainLock,
        b: ChainLock,
        relation: Relation,
    },
    /// A live lock whose clone (where its worker works) is the clone repos.yaml now names
    /// `name` (a rename, or paths swapped): a spawn on `name` would work on the same clone.
    SameClone {
        lock: ChainLock,
        name: String,
        clone: std::path::PathBuf,
    },
}

impl Drift {
    /// The repositories whose chains a new spawn must stay out of until an operator decides.
    pub fn repos(&self) -> [&str; 2] {
        match self {
            Drift::Conflict { a, b, .. } => [&a.repo, &b.repo],
            Drift::SameClone { lock, name, .. } => [&lock.repo, name],
        }
    }

    /// In words: "core (worker w1) and vm (worker w2) are both locked, but vm now depends on
    /// core (repos.yaml changed while they worked)".
    pub fn describe(&self) -> String {
        match self {
            Drift::Conflict { a, b, relation } => {
                let how = match relation {
                    Relation::Dependency => format!("{} is now a dependency of {}", b.repo, a.repo),
                    Relation::Dependent => format!("{} now depends on {}", b.repo, a.repo),
                    Relation::Itself | Relation::Unknown | Relation::SameClone => {
                        format!("{} and {} are now one chain", a.repo, b.repo)
                    }
                };
                format!(
                    "{} (held by {}) and {} (held by {}) are both locked, but {how}: repos.yaml changed while they worked",
                    a.repo, a.holder, b.repo, b.holder
                )
            }
            Drift::SameClone { lock, name, clone } => format!(
                "{} (held by {}) works in {}, the clone repos.yaml now names {name}: one clone under two names (renamed while it worked?)",
                lock.repo,
                lock.holder,
                clone.display()
            ),
        }
    }
}

/// Which live locks the current configuration no longer allows together: pairs whose chains
/// now overlap, and locks whose clone (`lock_clones`: the clone each lock's work is in, as
/// recorded when it was taken; `None` for a hold) is the clone of another configured name
/// (`clones`: every configured repository's clone). Locks on names the graph does not know are
/// left to [`blockers`] (they block everything already). Sorted, each pair once.
pub fn drift(
    graph: &RepoGraph,
    clones: &[(String, std::path::PathBuf)],
    locks: &[(ChainLock, Option<std::path::PathBuf>)],
) -> Vec<Drift> {
    let mut out = Vec::new();
    for (i, (a, _)) in locks.iter().enumerate() {
        if !graph.contains(&a.repo) {
            continue;
        }
        let chain = graph.chain_of(&a.repo);
        for (b, _) in &locks[i + 1..] {
            if !graph.contains(&b.repo) {
                continue;
            }
            if let Some(relation) = chain.relation(&b.repo) {
                out.push(Drift::Conflict {
                    a: a.clone(),
                    b: b.clone(),
                    relation,
                });
            }
        }
    }
    for (lock, clone) in locks {
        let Some(clone) = clone else { continue };
        for (name, path) in clones {
            if path == clone && *name != lock.repo {
                out.push(Drift::SameClone {
                    lock: lock.clone(),
                    name: name.clone(),
                    clone: clone.clone(),
                });
            }
        }
    }
    out
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

    fn graph(edges: &[(&str, &[&str])]) -> RepoGraph {
        RepoGraph::new(edges.iter().map(|(n, d)| {
            (
                n.to_string(),
                d.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            )
        }))
    }

    #[test]
    fn an_edge_added_between_two_live_locks_is_a_conflict_naming_both() {
        let before = graph(&[("core", &[]), ("vm", &[]), ("net", &[])]);
        let after = graph(&[("core", &[]), ("vm", &["core"]), ("net", &[])]);
        let locks = vec![
            (held("core"), None),
            (held("vm"), None),
            (held("net"), None),
        ];
        assert!(drift(&before, &[], &locks).is_empty());
        let found = drift(&after, &[], &locks);
        assert_eq!(found.len(), 1, "{found:?}");
        let Drift::Conflict { a, b, relation } = &found[0] else {
            panic!("{found:?}")
        };
        assert_eq!((a.repo.as_str(), b.repo.as_str()), ("core", "vm"));
        assert_eq!(*relation, Relation::Dependent);
        let words = found[0].describe();
        assert!(
            words.contains("w-core")
                && words.contains("w-vm")
                && words.contains("vm now depends on core"),
            "{words}"
        );
        assert_eq!(found[0].repos(), ["core", "vm"]);
        // A transitive overlap counts too: net below vm, vm below core.
        let deeper = graph(&[("core", &[]), ("vm", &["core"]), ("net", &["vm"])]);
        let locks = vec![(held("core"), None), (held("net"), None)];
        assert_eq!(drift(&deeper, &[], &locks).len(), 1);
    }

    #[test]
    fn a_lock_on_a_clone_another_name_now_points_at_is_named() {
        use std::path::PathBuf;
        let g = graph(&[("vm", &[]), ("vm2", &[]), ("net", &[])]);
        let clones = vec![
            ("vm".to_string(), PathBuf::from("/src/other")),
            ("vm2".to_string(), PathBuf::from("/src/vm")),
            ("net".to_string(), PathBuf::from("/src/net")),
        ];
        // The lock on vm was taken when vm was /src/vm.
        let locks = vec![
            (held("vm"), Some(PathBuf::from("/src/vm"))),
            (held("net"), Some(PathBuf::from("/src/net"))),
        ];
        let found = drift(&g, &clones, &locks);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].repos(), ["vm", "vm2"]);
        let words = found[0].describe();
        assert!(
            words.contains("/src/vm") && words.contains("vm2") && words.contains("w-vm"),
            "{words}"
        );
        // A lock on an unknown name is `blockers`' business (it blocks everything), and a
        // hold has no clone.
        let locks = vec![
            (held("gone"), Some(PathBuf::from("/src/vm"))),
            (held("vm2"), None),
        ];
        assert_eq!(
            drift(&g, &clones, &locks).len(),
            1,
            "the clone is still named twice"
        );
        let locks = vec![(held("gone"), None), (held("vm2"), None)];
        assert!(drift(&g, &clones, &locks).is_empty());
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
