use super::plan::{Slot, phase_plan, plan, simulate};
use super::schedule::{TaskState, WaveState, decide, free_slots};
use super::*;
use crate::lock::{ChainLock, HolderKind};
use proptest::prelude::*;

fn seed() -> RepoGraph {
    RepoGraph::seed_organisation()
}

fn parse(text: &str) -> Result<Wave, Diagnostics> {
    Wave::parse(text, Path::new("/w/wave.yaml"), &seed())
}

#[test]
fn a_task_carries_its_files_requirements_scope_and_output_format() {
    let w = parse(
        r#"name: w
tasks:
  - id: ax
    repo: alphavm
    task: "Implement AX token types"
    files: [src/token.rs, tests/token.rs]
    requirements: ["no unsafe", "parse in O(n)"]
    scope: {in: [src/token.rs], out: [src/vm]}
    output_format: "one commit with tests"
  - {id: plain, repo: sdk, task: "Docs"}
"#,
    )
    .unwrap();
    assert_eq!(
        w.tasks[0].specifics.with_task(&w.tasks[0].task),
        "Implement AX token types\nFILES: src/token.rs, tests/token.rs\nREQUIREMENTS: no unsafe; parse in O(n)\nIN SCOPE: src/token.rs\nOUT OF SCOPE: src/vm\nOUTPUT FORMAT: one commit with tests"
    );
    // Without specifics a task and its recorded definition are as before.
    assert!(w.tasks[1].specifics.is_empty());
    assert!(!w.tasks[1].definition().contains("specifics"));
    assert_eq!(w.tasks[1].specifics.with_task("Docs"), "Docs");
    let e = errors("name: w\ntasks:\n  - {id: a, repo: sdk, task: x, scope: {inside: [a]}}\n");
    assert!(e.iter().any(|e| e.contains("inside")), "{e:?}");
}

fn errors(text: &str) -> Vec<String> {
    parse(text)
        .unwrap_err()
        .0
        .iter()
        .map(|d| d.to_string())
        .collect()
}

const GOOD: &str = r#"name: wave-3
tasks:
  - id: core-api
    repo: acdc-core
    task: "Core API"
    estimate: 30m
  - id: ax-types
    repo: alphavm
    task: "Implement AX token types"
    plan: plans/ax.md
    component: ax
    estimate: 45m
  - id: net
    repo: adnet
    task: "Network"
  - id: sdk-docs
    repo: sdk
    task: "Docs"
    after: [ax-types]
  - id: core-2
    repo: acdc-core
    task: "Core again"
"#;

#[test]
fn a_good_wave_parses() {
    let w = parse(GOOD).unwrap();
    assert_eq!(w.name, "wave-3");
    assert_eq!(w.tasks.len(), 5);
    assert_eq!(w.tasks[1].plan.as_deref(), Some("plans/ax.md"));
    assert_eq!(
        w.tasks[1].estimate,
        Some(std::time::Duration::from_secs(45 * 60))
    );
    assert_eq!(w.tasks[3].after, ["ax-types"]);
}

#[test]
fn waits_are_bottom_up_in_file_order_and_after() {
    let w = parse(GOOD).unwrap();
    let d = Dag::build(&w.tasks, &seed()).unwrap();
    // core-2 follows core-api (one repository, file order).
    assert_eq!(d.preds[4], [0]);
    // ax-types waits for the last task on acdc-core: core-2 (and so for core-api too).
    assert_eq!(d.preds[1], [4]);
    // adnet waits for alphavm's task (and acdc-core's last); deltavm has none.
    assert_eq!(d.preds[2], [1, 4]);
    // sdk has no dependencies, only its `after`.
    assert_eq!(d.preds[3], [1]);
    let order_pos = |i: usize| d.order.iter().position(|&x| x == i).unwrap();
    for (i, p) in d.preds.iter().enumerate() {
        for &j in p {
            assert!(order_pos(j) < order_pos(i));
        }
    }
}

#[test]
fn bad_waves_are_refused_with_positions() {
    let e = errors(
        r#"name: w
tasks:
  - id: a
    repo: nope
    task: x
  - id: a
    repo: sdk
    task: y
    estimate: soon
  - id: b
    repo: sdk
    task: z
    after: [ghost]
"#,
    );
    let all = e.join("\n");
    assert!(
        all.contains("/w/wave.yaml:4:11: task a: unknown repository \"nope\""),
        "{all}"
    );
    assert!(
        all.contains("/w/wave.yaml:6:9: duplicate task id a (first at line 3:9)"),
        "{all}"
    );
    assert!(
        all.contains("/w/wave.yaml:9:15: task a: estimate:"),
        "{all}"
    );
    assert!(
        all.contains("/w/wave.yaml:13:13: task b: `after` names \"ghost\""),
        "{all}"
    );
    let e = errors("name: w\ntasks:\n  - {id: a, repo: sdk, task: x, colour: red}\n");
    assert!(e[0].contains("colour"), "{e:?}");
    assert_eq!(errors("name: w\ntasks: []\n").len(), 1);
}

#[test]
fn cycles_through_after_are_refused() {
    let e = errors(
        r#"name: w
tasks:
  - {id: a, repo: sdk, task: x, after: [b]}
  - {id: b, repo: adl, task: y, after: [a]}
"#,
    );
    assert_eq!(e.len(), 1, "{e:?}");
    assert!(
        e[0].contains("cycle through `after`: a waits for b waits for a"),
        "{e:?}"
    );
    // A cycle with the repository graph: core waits (after) for a task on its dependent.
    let e = errors(
        r#"name: w
tasks:
  - {id: core, repo: acdc-core, task: x, after: [vm]}
  - {id: vm, repo: alphavm, task: y}
"#,
    );
    assert!(e[0].contains("cycle through `after`"), "{e:?}");
    // And with file order on one repository.
    let e = errors(
        r#"name: w
tasks:
  - {id: first, repo: sdk, task: x, after: [second]}
  - {id: second, repo: sdk, task: y}
"#,
    );
    assert!(
        e[0].contains("first waits for second waits for first"),
        "{e:?}"
    );
}

fn lock(repo: &str) -> ChainLock {
    ChainLock {
        id: 1,
        repo: repo.into(),
        holder: "other".into(),
        kind: HolderKind::Worker,
        reason: None,
        by: None,
        acquired_ms: 0,
    }
}

fn seed_wave() -> (Wave, Dag, Vec<u64>) {
    let text = r#"name: seed
tasks:
  - {id: core, repo: acdc-core, task: t, estimate: 10m}
  - {id: sdk, repo: sdk, task: t, estimate: 5m}
  - {id: avm, repo: alphavm, task: t, estimate: 30m}
  - {id: dvm, repo: deltavm, task: t, estimate: 5m}
  - {id: adl, repo: adl, task: t, estimate: 5m}
  - {id: net, repo: adnet, task: t, estimate: 20m}
  - {id: aos, repo: alphaos, task: t, estimate: 5m}
  - {id: dos, repo: deltaos, task: t, estimate: 40m}
  - {id: ex, repo: adl-examples, task: t, estimate: 5m}
  - {id: acdc, repo: ac-dc, task: t, estimate: 5m}
"#;
    let w = parse(text).unwrap();
    let d = Dag::build(&w.tasks, &seed()).unwrap();
    let est = w
        .tasks
        .iter()
        .map(|t| t.estimate.unwrap().as_millis() as u64)
        .collect();
    (w, d, est)
}

#[test]
fn the_longest_remaining_critical_path_goes_first() {
    let (_, d, est) = seed_wave();
    let prio = d.bottom_levels(&est);
    let mut st = WaveState::new(&d, vec![TaskState::Pending; d.len()], prio.clone());
    // Only core and sdk are ready; with one slot core (10m + the 55m behind it) beats sdk (5m).
    assert_eq!(decide(&d, &st, &seed(), &[], 1), [0]);
    st.start(0);
    st.finish(&d, 0, true);
    // Ready: sdk, avm, dvm, adl. avm leads 30+20+5 = 55m, dvm 5+40 = 45m: avm, then dvm.
    assert_eq!(prio[2], 55 * 60_000);
    assert_eq!(prio[3], 45 * 60_000);
    assert_eq!(decide(&d, &st, &seed(), &[], 2), [2, 3]);
    // A lock held elsewhere on alphavm's chain skips avm, and the slot goes to the next.
    assert_eq!(decide(&d, &st, &seed(), &[lock("alphaos")], 2), [3, 4]);
    // Never more than the free slots; none when there are none.
    assert_eq!(decide(&d, &st, &seed(), &[], 0), Vec::<usize>::new());
    assert_eq!(decide(&d, &st, &seed(), &[], 10).len(), 4);
}

#[test]
fn a_stopped_task_holds_its_dependents_back() {
    let (_, d, est) = seed_wave();
    let mut st = WaveState::new(&d, vec![TaskState::Pending; d.len()], d.bottom_levels(&est));
    st.start(0);
    st.finish(&d, 0, true);
    st.start(2);
    st.finish(&d, 2, false); // avm FAILED
    let ready: Vec<usize> = st.ready().collect();
    assert!(!ready.contains(&5) && !ready.contains(&6));
    assert_eq!(st.held_back_by(&d, 9), [2]); // ac-dc ← adnet ← alphavm
    assert_eq!(st.waiting_on(&d, 6), [2]);
    for i in [1, 3, 4] {
        st.start(i);
        st.finish(&d, i, true);
    }
    for i in [7, 8] {
        st.start(i);
        st.finish(&d, i, true);
    }
    assert!(st.finished() && !st.all_done());
}

#[test]
fn fair_share_between_waves() {
    assert_eq!(free_slots(4, 0, 0, 0), 4);
    assert_eq!(free_slots(4, 3, 0, 0), 1);
    assert_eq!(free_slots(4, 0, 0, 1), 2);
    assert_eq!(free_slots(4, 2, 2, 1), 0);
    assert_eq!(free_slots(1, 0, 0, 3), 1);
}

#[test]
fn the_seed_plan_beats_the_phase_plan() {
    let (_, d, est) = seed_wave();
    let p = plan(&d, &seed(), &est, 4);
    // Critical path: core 10 → dvm 5 → dos 40 = 55 ... or core → avm 30 → net 20 → acdc 5 = 65.
    assert_eq!(p.bound.critical_path_ms, 65 * 60_000);
    assert_eq!(p.makespan_ms, p.bound.lb_ms);
    assert_eq!(p.phases, 4);
    // Phases: 10 | 30 | 40 | 5 = 85m.
    assert_eq!(p.phase_makespan_ms, 85 * 60_000);
    assert!(p.ratio >= 1.0);
    let g = plan::gantt(
        &p,
        &d.repos.iter().map(|r| r.to_string()).collect::<Vec<_>>(),
        40,
    );
    assert_eq!(g.lines().count(), 11, "{g}");
}

/// A random organisation and wave: repositories r0..rR (ri may depend on rj < i) and tasks on
/// them, with `after` only backwards in file order (so no cycles).
fn wave_strategy() -> impl Strategy<Value = (RepoGraph, Vec<TaskDef>, Vec<u64>, usize)> {
    (2usize..10, 1usize..30, 1usize..6)
        .prop_flat_map(|(r, n, m)| {
            let edges = proptest::collection::vec((0..r, 0..r), 0..r * 2);
            let tasks = proptest::collection::vec((0..r, 1u64..100, proptest::option::of(0..n)), n);
            (Just(r), edges, tasks, Just(m))
        })
        .prop_map(|(r, edges, tasks, m)| {
            let name = |i: usize| format!("r{i}");
            let graph = RepoGraph::new((0..r).map(|i| {
                (
                    name(i),
                    edges
                        .iter()
                        .filter(|(a, b)| *a == i && b < a)
                        .map(|(_, b)| name(*b))
                        .collect::<Vec<_>>(),
                )
            }));
            let defs: Vec<TaskDef> = tasks
                .iter()
                .enumerate()
                .map(|(i, (repo, _, after))| TaskDef {
                    id: format!("t{i}"),
                    repo: name(*repo),
                    task: "x".into(),
                    plan: None,
                    component: None,
                    estimate: None,
                    after: after
                        .filter(|&a| a < i)
                        .map(|a| vec![format!("t{a}")])
                        .unwrap_or_default(),
                    land: None,
                    model: None,
                    complexity: None,
                    security_sensitive: false,
                    specifics: TaskSpecifics::default(),
                })
                .collect();
            // `after` may close a cycle with the repository graph: such waves are refused, so
            // keep the waits of the repository graph only.
            let defs = if Dag::build(&defs, &graph).is_ok() {
                defs
            } else {
                defs.into_iter()
                    .map(|d| TaskDef {
                        after: Vec::new(),
                        ..d
                    })
                    .collect()
            };
            let est = tasks.iter().map(|t| t.1).collect();
            (graph, defs, est, m)
        })
}

/// Brute-force maximum antichain for small DAGs.
fn brute_width(d: &Dag) -> usize {
    let n = d.len();
    let mut reach = vec![vec![false; n]; n];
    for &i in d.order.iter().rev() {
        for &s in &d.succs[i] {
            reach[i][s] = true;
            let below = reach[s].clone();
            for (r, b) in reach[i].iter_mut().zip(below) {
                *r |= b;
            }
        }
    }
    let mut best = 0;
    for mask in 0u32..(1 << n) {
        let set: Vec<usize> = (0..n).filter(|i| mask & (1 << i) != 0).collect();
        if set.len() > best
            && set
                .iter()
                .all(|&a| set.iter().all(|&b| !reach[a][b] && !reach[b][a]))
        {
            best = set.len();
        }
    }
    best
}

fn check_schedule(
    graph: &RepoGraph,
    d: &Dag,
    est: &[u64],
    m: usize,
    slots: &[Slot],
) -> Result<(), TestCaseError> {
    prop_assert_eq!(slots.len(), d.len());
    let mut at = vec![None; d.len()];
    for s in slots {
        prop_assert!(at[s.task].is_none());
        at[s.task] = Some(*s);
        prop_assert_eq!(s.end_ms - s.start_ms, est[s.task]);
    }
    for s in slots {
        // Never before what it waits for has ended.
        for &p in &d.preds[s.task] {
            prop_assert!(at[p].unwrap().end_ms <= s.start_ms);
        }
        // Never beside a task whose chain lock conflicts.
        for o in slots {
            if o.task != s.task && o.start_ms < s.end_ms && s.start_ms < o.end_ms {
                prop_assert!(!graph.conflicts(&d.repos[s.task], &d.repos[o.task]));
            }
        }
    }
    // At every moment: at most m running, and never an idle slot while a ready task waits.
    let mut moments: Vec<u64> = slots.iter().map(|s| s.start_ms).collect();
    moments.extend(slots.iter().map(|s| s.end_ms));
    for t in moments {
        let running = slots
            .iter()
            .filter(|s| s.start_ms <= t && t < s.end_ms)
            .count();
        prop_assert!(running <= m);
        if running < m {
            let waiting_ready = slots.iter().any(|s| {
                s.start_ms > t && d.preds[s.task].iter().all(|&p| at[p].unwrap().end_ms <= t)
            });
            prop_assert!(!waiting_ready, "idle slot at {} while a task was ready", t);
        }
    }
    Ok(())
}

proptest! {
    #[test]
    fn schedules_respect_waits_locks_and_slots((graph, defs, est, m) in wave_strategy()) {
        let d = Dag::build(&defs, &graph).unwrap();
        let slots = simulate(&d, &est, m, vec![TaskState::Pending; d.len()]);
        check_schedule(&graph, &d, &est, m, &slots)?;
        let p = plan(&d, &graph, &est, m);
        prop_assert!(p.makespan_ms >= p.bound.lb_ms);
        // The phase plan is a valid schedule too, so it can never beat LB.
        let (phase, _) = phase_plan(&d, &graph, &est, m);
        prop_assert!(phase >= p.bound.lb_ms);
    }

    #[test]
    fn width_is_the_largest_antichain((graph, defs, _est, _m) in wave_strategy()) {
        prop_assume!(defs.len() <= 14);
        let d = Dag::build(&defs, &graph).unwrap();
        prop_assert_eq!(d.width(1000).unwrap(), brute_width(&d));
    }

    #[test]
    fn decide_never_exceeds_slots_or_starts_unready(
        (graph, defs, est, m) in wave_strategy(),
        done_prefix in 0usize..30,
        holder in proptest::option::of(0usize..10),
    ) {
        let d = Dag::build(&defs, &graph).unwrap();
        // Some prefix of the topological order is DONE.
        let mut states = vec![TaskState::Pending; d.len()];
        for &i in d.order.iter().take(done_prefix) {
            states[i] = TaskState::Done;
        }
        let st = WaveState::new(&d, states.clone(), d.bottom_levels(&est));
        let locks: Vec<ChainLock> = holder
            .map(|h| format!("r{h}"))
            .filter(|r| graph.contains(r))
            .map(|r| lock(&r))
            .into_iter()
            .collect();
        let picked = decide(&d, &st, &graph, &locks, m);
        prop_assert!(picked.len() <= m);
        for &i in &picked {
            prop_assert_eq!(states[i], TaskState::Pending);
            prop_assert!(d.preds[i].iter().all(|&p| states[p] == TaskState::Done));
            prop_assert!(crate::lock::blockers(&graph, &d.repos[i], &locks).is_empty());
        }
        // Work-conserving: fewer picks than slots only when no other ready task is free.
        if picked.len() < m {
            for i in st.ready() {
                if !picked.contains(&i) {
                    prop_assert!(!crate::lock::blockers(&graph, &d.repos[i], &locks).is_empty());
                }
            }
        }
    }
}

#[test]
fn a_task_may_set_its_own_land_policy_and_a_wrong_one_is_named() {
    let g = RepoGraph::seed_organisation();
    let ok = Wave::parse(
        "name: w\ntasks:\n  - {id: a, repo: acdc-core, task: x, land: none}\n  - {id: b, repo: alphavm, task: y}\n",
        std::path::Path::new("w.yaml"),
        &g,
    )
    .unwrap();
    assert_eq!(ok.tasks[0].land, Some(crate::config::LandPolicy::None));
    assert_eq!(ok.tasks[1].land, None);
    // A task without its own land keeps the definition it had before the key existed.
    assert!(!ok.tasks[1].definition().contains("land"));
    let bad = Wave::parse(
        "name: w\ntasks:\n  - {id: a, repo: acdc-core, task: x, land: octopus}\n",
        std::path::Path::new("w.yaml"),
        &g,
    )
    .unwrap_err()
    .to_string();
    assert!(
        bad.contains("w.yaml:3:")
            && bad.contains("land must be merge, pull_request, direct or none"),
        "{bad}"
    );
}

#[test]
fn a_task_text_over_the_limit_is_refused_at_its_position() {
    let long = "x".repeat(crate::text::MAX_TASK_BYTES + 1);
    let e = errors(&format!(
        "name: w\ntasks:\n  - id: big\n    repo: sdk\n    task: {long}\n"
    ));
    let all = e.join("\n");
    assert!(
        all.contains(&format!(
            "/w/wave.yaml:5:11: task big: the task text is {} bytes",
            crate::text::MAX_TASK_BYTES + 1
        )),
        "{}",
        crate::text::escape(&all[..all.len().min(300)])
    );
}
