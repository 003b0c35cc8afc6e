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
