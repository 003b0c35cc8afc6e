//! Several nodes on one PostgreSQL store, on one machine: three state directories (and so
//! three worktree roots), three node names, one database, one shared local forge
//! (`forge.path`). A chain lock taken on one node blocks its chain on the others; `orch nodes`
//! lists each; `orch status` names each worker's node; a supervisor of one node stopped past
//! its lease is taken over by another node's `orch resume`, and once continued it writes
//! nothing (fencing) and stops its worker; a node killed outright is failed over, its
//! worker's worktree made again on the new node from what it pushed.
//!
//! Needs a server: `ORCH_TEST_PG_URL` (see pg_store.rs); skipped aloud without one.

use crate::pg_store::{OwnCluster, fresh_database};
use crate::support::{Org, RepoSpec, Spec, output_text, poll};
use serde_json::Value;
use std::path::PathBuf;
use std::process::Output;
use std::time::Duration;

/// The organisation of node "a" (`org.state`), with nodes "b" and "c" beside it.
struct Nodes {
    org: Org,
}

impl Nodes {
    fn new(test: &str, spec: Spec) -> Option<Nodes> {
        Some(Nodes::on(fresh_database(test)?, spec))
    }

    /// The three nodes on the database at `url`.
    fn on(url: String, spec: Spec) -> Nodes {
        let mut spec = spec;
        spec.store = Some(format!("{{url: \"{url}\"}}"));
        let mut org = Org::new(spec);
        // One local forge for every node (each state directory's forge/ links to it).
        let shared = org.root.join("shared-forge");
        let yaml = std::fs::read_to_string(&org.config_path).unwrap();
        let yaml = yaml.replacen(
            "forge: {kind: local,",
            &format!("forge: {{kind: local, path: \"{}\",", shared.display()),
            1,
        );
        assert!(yaml.contains("shared-forge"), "{yaml}");
        std::fs::write(&org.config_path, yaml).unwrap();
        org.set_env("ORCH_NODE", "a");
        Nodes { org }
    }

    fn state(&self, node: &str) -> PathBuf {
        if node == "a" {
            self.org.state.clone()
        } else {
            self.org.root.join(format!("state-{node}"))
        }
    }

    /// `orch <args>` run on `node`.
    fn run(&self, node: &str, args: &[&str]) -> Output {
        self.org
            .cmd(args)
            .env("ORCH_STATE_DIR", self.state(node))
            .env("ORCH_NODE", node)
            .output()
            .expect("orch runs")
    }

    fn json(&self, node: &str, args: &[&str], code: i32) -> Value {
        let out = self.run(node, args);
        assert_eq!(
            out.status.code(),
            Some(code),
            "orch {args:?} on {node}: {}",
            output_text(&out)
        );
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("orch {args:?} on {node}: {e}: {}", output_text(&out)))
    }

    fn spawn(&self, node: &str, repo: &str) -> String {
        let v = self.json(
            node,
            &["spawn", "--repo", repo, "--task", "work", "--json"],
            0,
        );
        v["worker_id"].as_str().unwrap().to_string()
    }

    /// `orch resume --json` on `node` until it takes `id` over (within `limit`).
    fn take_over(&self, node: &str, id: &str, limit: Duration) -> Value {
        poll(limit, || {
            let v = self.json(node, &["resume", "--json"], 0);
            crate::support::resumed_entry(&v, id).is_some().then_some(v)
        })
        .unwrap_or_else(|| panic!("node {node} never took {id} over\n{}", self.org.diag(id)))
    }
}

/// The one worker of each task of wave `wave` (`orch wave status --json`'s `v`), each DONE:
/// a task started twice, or a worker not DONE, fails the test. `(task key, its worker)`.
fn each_task_done_by_one_worker(
    workers: &[orch::store::workers::WorkerRecord],
    wave: &str,
    v: &Value,
) -> Vec<(String, orch::store::workers::WorkerRecord)> {
    v["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let key = format!("{wave}:{}", t["id"].as_str().unwrap());
            let of_task: Vec<_> = workers
                .iter()
                .filter(|w| w.task_id.as_deref() == Some(key.as_str()))
                .collect();
            assert_eq!(of_task.len(), 1, "{key} started once: {of_task:?}");
            assert_eq!(
                of_task[0].milestone(),
                orch::milestone::Milestone::Done,
                "{key}"
            );
            let w = of_task[0].clone();
            (key, w)
        })
        .collect()
}

/// How many times worker `id` moved to DONE.
fn done_transitions(n: &Nodes, id: &str) -> usize {
    n.org
        .transitions(id)
        .iter()
        .filter(|(_, to)| to == "DONE")
        .count()
}

fn stop(pid: i32, sig: i32) {
    // SAFETY: a signal to a process this test started (through orch).
    unsafe { libc::kill(pid, sig) };
}

#[test]
fn nodes_share_chain_locks_and_a_stopped_supervisor_is_fenced_after_its_takeover() {
    let spec = Spec::local("idle.sh")
        .repo(RepoSpec::new("core"))
        .repo(RepoSpec::new("vm").deps(&["core"]))
        .repo(RepoSpec::new("lib"));
    let Some(n) = Nodes::new("nodes_share_chain_locks…", spec) else {
        return;
    };
    let core = n.spawn("a", "core");
    // The chain lock is the database's: node b cannot start on core's chain.
    let refused = n.json("b", &["spawn", "--repo", "vm", "--task", "t", "--json"], 1);
    assert_eq!(refused["spawned"], false, "{refused}");
    assert_eq!(refused["blockers"][0]["holder"], core.as_str(), "{refused}");
    let lib = n.spawn("c", "lib");
    // Node b beats with a resume (cron's), though it supervises nothing.
    n.json("b", &["resume", "--json"], 0);

    let nodes = n.json("b", &["nodes", "--json"], 0);
    assert_eq!(nodes["this_node"], "b", "{nodes}");
    let by_name = |name: &str| {
        nodes["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no node {name}: {nodes}"))
    };
    assert_eq!(by_name("a")["workers"], 1, "{nodes}");
    assert_eq!(by_name("b")["workers"], 0, "{nodes}");
    assert_eq!(by_name("c")["workers"], 1, "{nodes}");
    // Three nodes on one host: each says which.
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    for name in ["a", "b", "c"] {
        assert_eq!(by_name(name)["host"], host.trim(), "{nodes}");
    }
    let status = n.json("b", &["status", "--json"], 0);
    let node_of = |id: &str| {
        status["workers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["worker_id"] == id)
            .map(|w| w["node"].clone())
    };
    assert_eq!(node_of(&core), Some(Value::from("a")), "{status}");
    assert_eq!(node_of(&lib), Some(Value::from("c")), "{status}");
    let table = output_text(&n.run("b", &["status"]));
    assert!(
        table.lines().next().unwrap_or("").contains("NODE"),
        "{table}"
    );

    // Node a's supervisor stops (SIGSTOP) past its lease: node b takes the worker over.
    let first = n.org.worker(&core);
    let stale = first.supervisor_pid.expect("a supervisor") as i32;
    let old_worker = first.worker_pid.expect("a worker") as i32;
    stop(stale, libc::SIGSTOP);
    // Node a beats no more while its worker lives: `orch nodes` marks it lapsed.
    let lapsed = poll(Duration::from_secs(60), || {
        let v = n.json("b", &["nodes", "--json"], 0);
        v["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x["name"] == "a" && x["lapsed"] == true)
            .then_some(v)
    });
    if lapsed.is_none() {
        stop(stale, libc::SIGCONT);
        panic!("node a never shown lapsed");
    }
    let lapsed = lapsed.unwrap();
    let b = lapsed["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["name"] == "b");
    assert_eq!(
        b.map(|x| x["lapsed"].clone()),
        Some(Value::from(false)),
        "{lapsed}"
    );
    n.take_over("b", &core, Duration::from_secs(90));
    let taken = poll(Duration::from_secs(60), || {
        let w = n.org.worker(&core);
        (w.node.as_deref() == Some("b")
            && w.supervisor_pid != Some(stale as i64)
            && w.worker_running
            && w.worker_pid.is_some_and(|p| p as i32 != old_worker))
        .then_some(w)
    });
    let Some(taken) = taken else {
        stop(stale, libc::SIGCONT);
        panic!("node b's supervisor did not start\n{}", n.org.diag(&core));
    };
    assert!(
        taken.fence > first.fence,
        "{} -> {}",
        first.fence,
        taken.fence
    );
    // Its worktree is node b's own.
    assert!(
        taken.worktree.starts_with(&*n.state("b").to_string_lossy()),
        "{}",
        taken.worktree
    );
    assert!(std::path::Path::new(&taken.worktree).join(".git").exists());
    let events_before = n.org.events(&core).len();

    // Continued, the stale supervisor writes nothing and stops its own worker.
    stop(stale, libc::SIGCONT);
    let gone = poll(Duration::from_secs(60), || {
        (!orch::process::process_alive(stale, None)).then_some(())
    });
    assert!(gone.is_some(), "the stale supervisor {stale} did not stop");
    let gone = poll(Duration::from_secs(30), || {
        (!orch::process::group_alive(old_worker)).then_some(())
    });
    assert!(gone.is_some(), "its worker {old_worker} still runs");
    let w = n.org.worker(&core);
    assert_eq!(
        (w.fence, w.supervisor_pid, w.node.as_deref()),
        (taken.fence, taken.supervisor_pid, Some("b")),
        "{}",
        n.org.diag(&core)
    );
    assert_eq!(w.progress.milestone, taken.progress.milestone);
    let events = n.org.events(&core);
    assert_eq!(
        events.len(),
        events_before,
        "written after the takeover: {:?}",
        &events[events_before.min(events.len())..]
    );
    assert!(
        orch::process::process_alive(w.worker_pid.unwrap() as i32, None),
        "node b's worker was stopped"
    );
    for (node, id) in [("b", &core), ("c", &lib)] {
        let out = n.run(node, &["cancel", id, "--reason", "test over"]);
        assert!(out.status.success(), "{}", output_text(&out));
    }
}

#[test]
fn a_node_killed_outright_is_failed_over_from_what_its_worker_pushed() {
    let spec = Spec::local("push_and_wait.sh").repo(RepoSpec::new("core"));
    let Some(n) = Nodes::new("a_node_killed_outright…", spec) else {
        return;
    };
    let id = n.spawn("a", "core");
    let pushed = poll(Duration::from_secs(60), || {
        n.org.worker(&id).progress.tracked_sha.clone()
    })
    .unwrap_or_else(|| panic!("no push\n{}", n.org.diag(&id)));
    // Every orch process of node a dies at once (its worker dies with its guard).
    let w = n.org.worker(&id);
    n.org.kill_supervisor(&id);
    assert!(w.worker_pid.is_some());
    let v = n.take_over("c", &id, Duration::from_secs(90));
    let entry = crate::support::resumed_entry(&v, &id).unwrap().clone();
    let w = n.org.worker(&id);
    assert_eq!(w.node.as_deref(), Some("c"), "{entry}\n{}", n.org.diag(&id));
    let events = n.org.events(&id);
    assert!(
        events
            .iter()
            .any(|e| e.kind == "resume_claimed" && e.detail.contains("from node a")),
        "{events:?}"
    );
    // Node c's worktree, made from the pushed branch.
    let wt = PathBuf::from(&w.worktree);
    assert!(wt.starts_with(n.state("c")), "{}", wt.display());
    let head = orch::gitops::head(&wt).unwrap_or_else(|e| panic!("{}: {e}", wt.display()));
    assert_eq!(head.to_string(), pushed.to_string(), "{}", n.org.diag(&id));
    n.org.release(&id);
    let out = n.run("c", &["cancel", &id, "--reason", "test over"]);
    assert!(out.status.success(), "{}", output_text(&out));
}

#[test]
fn a_wave_ticked_on_three_nodes_at_once_starts_each_task_once_bottom_up() {
    let spec = crate::wave::spec(crate::support::Ci::Pass);
    let Some(n) = Nodes::new("a_wave_ticked_on_three_nodes…", spec) else {
        return;
    };
    let file = crate::wave::wave_file(&n.org, "w3", "vm");
    let path = file.to_str().unwrap();
    let n = &n;
    let tick_all = || {
        let outs: Vec<Output> = std::thread::scope(|s| {
            let hs: Vec<_> = ["a", "b", "c"]
                .iter()
                .map(|node| s.spawn(move || n.run(node, &["wave", "run", path, "--tick"])))
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for o in &outs {
            assert_eq!(o.status.code(), Some(0), "{}", output_text(o));
        }
    };
    let finished = poll(Duration::from_secs(300), || {
        tick_all();
        let v = n.json("b", &["wave", "status", "w3", "--json"], 0);
        (v["finished"] == true).then_some(v)
    });
    let Some(v) = finished else {
        panic!(
            "the wave did not finish: {:#}",
            n.json("a", &["wave", "status", "w3", "--json"], 0)
        );
    };
    // Every task once, DONE, bottom-up, and never two workers on one chain.
    crate::wave::check_order_and_locks(&n.org, &file, &v);
    let workers = n.org.workers();
    each_task_done_by_one_worker(&workers, "w3", &v);
    let nodes: std::collections::BTreeSet<_> =
        workers.iter().filter_map(|w| w.node.clone()).collect();
    eprintln!("the wave's workers ran on nodes {nodes:?}");
}

/// Eighteen `orch spawn` and `orch hold` processes at once, six per node, on overlapping
/// chains of one database: the lock history replays without a conflicting grant, and what
/// is held now is a set of chains that do not touch.
#[test]
fn spawns_and_holds_racing_across_nodes_never_grant_overlapping_chains() {
    let spec = Spec::local("idle.sh")
        .repo(RepoSpec::new("core"))
        .repo(RepoSpec::new("vm").deps(&["core"]))
        .repo(RepoSpec::new("os").deps(&["vm"]))
        .repo(RepoSpec::new("util"))
        .repo(RepoSpec::new("net").deps(&["util"]))
        .repo(RepoSpec::new("sdk"));
    let Some(n) = Nodes::new("spawns_and_holds_racing…", spec) else {
        return;
    };
    let repos = ["core", "vm", "os", "util", "net", "sdk"];
    let n = &n;
    let barrier = std::sync::Barrier::new(18);
    let ready = &barrier;
    let outs: Vec<(String, Output)> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..18)
            .map(|i| {
                let node = ["a", "b", "c"][i % 3];
                let repo = repos[i % repos.len()];
                s.spawn(move || {
                    ready.wait();
                    let out = if i % 2 == 0 {
                        n.run(node, &["spawn", "--repo", repo, "--task", "race", "--json"])
                    } else {
                        let by = format!("racer-{i}");
                        n.run(
                            node,
                            &["hold", repo, "--reason", "race", "--by", &by, "--json"],
                        )
                    };
                    (format!("{node} #{i} {repo}"), out)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut granted = 0;
    for (who, o) in &outs {
        match o.status.code() {
            Some(0) => granted += 1,
            Some(1) => {} // blocked: the chain was taken
            _ => panic!("{who}: {}", output_text(o)),
        }
    }
    assert!(granted >= 1, "nothing granted");
    // Every node used the shared database, its first command an `orch hold` or not.
    for node in ["a", "b", "c"] {
        let db = n.state(node).join(orch::store::DB_FILE);
        assert!(
            !db.exists(),
            "node {node} made a database of its own: {}",
            db.display()
        );
    }
    let mut store = n.org.store();
    let history = store.lock_history().unwrap();
    assert!(
        orch::store::first_conflict(&n.org.config.graph, &history).is_none(),
        "{:?}",
        orch::store::first_conflict(&n.org.config.graph, &history)
    );
    let held = store.locks().unwrap();
    for (i, a) in held.iter().enumerate() {
        for b in &held[i + 1..] {
            assert!(
                !n.org.config.graph.conflicts(&a.repo, &b.repo),
                "{} and {} are both held",
                a.repo,
                b.repo
            );
        }
    }
    for w in n.org.workers() {
        let node = w.node.clone().unwrap_or_else(|| "a".into());
        let _ = n.run(&node, &["cancel", &w.id, "--reason", "test over"]);
    }
}

/// A hold taken on node c and released on node a: node c's holds file still names it (other
/// nodes do not rewrite it), and the database holds no worker — which on one machine would mean
/// a database that lost its contents. On a shared store node c goes on working.
#[test]
fn a_hold_released_on_another_node_leaves_the_first_nodes_commands_working() {
    let spec = Spec::local("idle.sh")
        .repo(RepoSpec::new("core"))
        .repo(RepoSpec::new("sdk"));
    let Some(n) = Nodes::new("a_hold_released_on_another_node…", spec) else {
        return;
    };
    let held = n.json("c", &["hold", "sdk", "--reason", "freeze", "--json"], 0);
    assert_eq!(held["held"], true, "{held}");
    let released = n.json("a", &["unhold", "sdk", "--json"], 0);
    assert_eq!(released["released"], true, "{released}");
    let file = std::fs::read_to_string(n.state("c").join("holds.yaml")).unwrap();
    assert!(file.contains("sdk"), "node c's own view: {file}");
    let status = n.json("c", &["status", "--json"], 0);
    assert_eq!(
        status["workers"].as_array().map(Vec::len),
        Some(0),
        "{status}"
    );
    let id = n.spawn("c", "sdk");
    n.run("c", &["cancel", &id, "--reason", "test over"]);
}

/// `worker.max_parallel_total: 2` over three nodes with 8 slots each: two workers on two nodes
/// fill the organisation, a third node's spawn is refused naming that limit, and a release on
/// any node frees its slot. `orch nodes` shows the total against the limit.
#[test]
fn the_organisations_limit_counts_every_nodes_workers() {
    let spec = Spec::local("idle.sh")
        .repo(RepoSpec::new("core"))
        .repo(RepoSpec::new("lib"))
        .repo(RepoSpec::new("sdk"));
    let Some(n) = Nodes::new("the_organisations_limit…", spec) else {
        return;
    };
    let yaml = std::fs::read_to_string(&n.org.config_path).unwrap();
    let yaml = yaml.replacen("worker:\n", "worker:\n  max_parallel_total: 2\n", 1);
    assert!(yaml.contains("max_parallel_total"), "{yaml}");
    std::fs::write(&n.org.config_path, yaml).unwrap();
    let core = n.spawn("a", "core");
    let lib = n.spawn("b", "lib");
    let refused = n.json("c", &["spawn", "--repo", "sdk", "--task", "t", "--json"], 1);
    assert_eq!(refused["spawned"], false, "{refused}");
    let why = refused.to_string();
    assert!(
        why.contains("worker.max_parallel_total reached: 2 of 2"),
        "{refused}"
    );
    let nodes = n.json("c", &["nodes", "--json"], 0);
    assert_eq!(nodes["running"], 2, "{nodes}");
    assert_eq!(nodes["max_parallel_total"], 2, "{nodes}");
    let table = output_text(&n.run("c", &["nodes"]));
    assert!(
        table.contains("organisation: 2 of at most 2 workers running"),
        "{table}"
    );
    // A slot freed on node b is free for node c.
    n.run("b", &["cancel", &lib, "--reason", "make room"]);
    let sdk = n.spawn("c", "sdk");
    for (node, id) in [("a", &core), ("c", &sdk)] {
        n.run(node, &["cancel", id, "--reason", "test over"]);
    }
}

/// Two hosts under one node name: while the other host's heartbeat is fresh, `orch spawn` and
/// `orch resume` on this one refuse (exit 2) naming both places, and start nothing; once the
/// other has been quiet for a minute the name moves here.
#[test]
fn a_node_name_another_host_beats_under_is_refused() {
    let spec = Spec::local("idle.sh").repo(RepoSpec::new("core"));
    let Some(n) = Nodes::new("a_node_name_another_host_beats_under…", spec) else {
        return;
    };
    // (Node a's resume points its state directory at the database the test reads.)
    for node in ["a", "b"] {
        n.json(node, &["resume", "--json"], 0);
    }
    let mut store = n.org.store();
    let elsewhere = "far-host/00000000-0000-0000-0000-000000000000/pid:[1]";
    let moved = store
        .write(|tx| tx.execute("UPDATE nodes SET place = ?1 WHERE name = 'b'", [elsewhere]))
        .unwrap();
    assert_eq!(moved, 1, "node b beat");
    for args in [
        &["spawn", "--repo", "core", "--task", "t"][..],
        &["resume"][..],
    ] {
        let out = n.run("b", args);
        let text = output_text(&out);
        assert_eq!(out.status.code(), Some(2), "orch {args:?}: {text}");
        assert!(
            text.contains("node name \"b\" is in use by another host: far-host/"),
            "{text}"
        );
    }
    assert!(n.org.workers().is_empty(), "nothing started");
    store
        .write(|tx| {
            tx.execute(
                "UPDATE nodes SET heartbeat_ms = heartbeat_ms - 61000 WHERE name = 'b'",
                [],
            )
        })
        .unwrap();
    let id = n.spawn("b", "core");
    n.run("b", &["cancel", &id, "--reason", "test over"]);
}

/// A node killed outright in the middle of a wave (every supervisor of node a, its workers
/// with them, their pushes' CI still running): after the leases lapse, the ticks of the other
/// nodes take its workers over, the wave finishes, and no task is started or DONE twice.
#[test]
fn a_node_killed_mid_wave_is_taken_over_and_the_wave_finishes_once() {
    let spec = crate::wave::spec(crate::support::Ci::Gated);
    let Some(n) = Nodes::new("a_node_killed_mid_wave…", spec) else {
        return;
    };
    let file = crate::wave::wave_file(&n.org, "wk", "vm");
    let path = file.to_str().unwrap();
    let tick = |node: &str| {
        let o = n.run(node, &["wave", "run", path, "--tick"]);
        assert_eq!(o.status.code(), Some(0), "{}", output_text(&o));
    };
    // Node a starts what it can; its workers push and wait for CI (held by the gate).
    tick("a");
    let on_a: Vec<String> = n
        .org
        .workers()
        .into_iter()
        .filter(|w| w.node.as_deref() == Some("a"))
        .map(|w| w.id)
        .collect();
    assert!(!on_a.is_empty(), "node a started nothing");
    for id in &on_a {
        poll(Duration::from_secs(60), || {
            n.org.worker(id).progress.tracked_sha.clone()
        })
        .unwrap_or_else(|| panic!("{id} never pushed\n{}", n.org.diag(id)));
    }
    // Node a dies: every supervisor killed at once (its workers die with their guards).
    for id in &on_a {
        n.org.kill_supervisor(id);
    }
    n.org.open_all_gates();
    let n = &n;
    let finished = poll(Duration::from_secs(300), || {
        std::thread::scope(|s| {
            let b = s.spawn(|| tick("b"));
            let c = s.spawn(|| tick("c"));
            b.join().unwrap();
            c.join().unwrap();
        });
        let v = n.json("b", &["wave", "status", "wk", "--json"], 0);
        (v["finished"] == true).then_some(v)
    });
    let Some(v) = finished else {
        panic!(
            "the wave did not finish: {:#}",
            n.json("b", &["wave", "status", "wk", "--json"], 0)
        );
    };
    crate::wave::check_order_and_locks(&n.org, &file, &v);
    for (key, w) in each_task_done_by_one_worker(&n.org.workers(), "wk", &v) {
        let done = done_transitions(n, &w.id);
        assert_eq!(done, 1, "{key}: DONE {done} times\n{}", n.org.diag(&w.id));
    }
    for id in &on_a {
        let w = n.org.worker(id);
        assert!(
            matches!(w.node.as_deref(), Some("b" | "c")),
            "{id} finished on {:?}",
            w.node
        );
    }
}

/// The database server restarted in the middle of a wave: stopped as a crash stops it (every
/// session cut, no checkpoint), down for 8 s, started again (recovering from its WAL). The
/// ticks that ran meanwhile fail and the next ones go on; supervisors, their workers' CI
/// questions and the CI jobs running meanwhile wait the database out; the wave finishes with
/// every task once and DONE once. The test's own cluster: the shared one serves other tests.
#[test]
fn the_database_restarted_mid_wave_loses_nothing() {
    let spec = crate::wave::spec(crate::support::Ci::Gated);
    let Some(cluster) = OwnCluster::start("the_database_restarted_mid_wave…") else {
        return;
    };
    let n = Nodes::on(cluster.url(), spec);
    let file = crate::wave::wave_file(&n.org, "wd", "vm");
    let path = file.to_str().unwrap();
    let n = &n;
    let tick_all = |must_pass: bool| {
        let outs: Vec<Output> = std::thread::scope(|s| {
            let hs: Vec<_> = ["a", "b", "c"]
                .iter()
                .map(|node| s.spawn(move || n.run(node, &["wave", "run", path, "--tick"])))
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for o in &outs {
            if must_pass {
                assert_eq!(o.status.code(), Some(0), "{}", output_text(o));
            }
        }
    };
    tick_all(true);
    // Workers at work on several nodes, their CI held: now the database goes.
    let started = poll(Duration::from_secs(60), || {
        let ws = n.org.workers();
        (ws.len() >= 2 && ws.iter().all(|w| w.progress.tracked_sha.is_some())).then_some(ws)
    })
    .unwrap_or_else(|| {
        let ws = n.org.workers();
        panic!(
            "the first workers did not push: {}",
            ws.iter()
                .map(|w| n.org.diag(&w.id))
                .collect::<Vec<_>>()
                .join("\n")
        )
    });
    cluster.crash();
    // Down for 8 s: ticks meanwhile fail (the database is unavailable), supervisors retry.
    let down_until = std::time::Instant::now() + Duration::from_secs(8);
    while std::time::Instant::now() < down_until {
        let o = n.run("b", &["wave", "run", path, "--tick"]);
        assert_ne!(
            o.status.code(),
            Some(0),
            "a tick passed with the database gone"
        );
    }
    cluster.start_server();
    n.org.open_all_gates();
    let finished = poll(Duration::from_secs(300), || {
        tick_all(false);
        let o = n.run("b", &["wave", "status", "wd", "--json"]);
        let v: Value = serde_json::from_slice(&o.stdout).ok()?;
        (v["finished"] == true).then_some(v)
    });
    let Some(v) = finished else {
        panic!(
            "the wave did not finish: {:#}",
            n.json("b", &["wave", "status", "wd", "--json"], 0)
        );
    };
    crate::wave::check_order_and_locks(&n.org, &file, &v);
    for (key, w) in each_task_done_by_one_worker(&n.org.workers(), "wd", &v) {
        assert_eq!(done_transitions(n, &w.id), 1, "{key}");
    }
    // Which of the workers at work when it went needed a replacement: said, not asserted. A
    // supervisor waits the outage out (its transitions are committed before they are acted
    // on, its worker's CI question and the runner wait too), but 8 s of outage after a
    // renewal up to 5 s old leaves its 15 s lease little room on a loaded machine: another
    // node may take it over, legitimately, nothing lost.
    for w in &started {
        let now = n.org.worker(&w.id);
        if now.respawns > 0 {
            eprintln!(
                "{}: replaced {} time(s) across the outage",
                w.id, now.respawns
            );
        }
    }
}
