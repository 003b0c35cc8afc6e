//! Containment: nothing a worker starts outlives it — not a `setsid` daemon, not a double-fork
//! daemon — whether it finishes (DONE), is cancelled, or every orch process of the run is
//! killed with SIGKILL at once. Each case runs twice: with a cgroup per worker (where this
//! machine allows it) and with `ORCH_CGROUPS=off` (the subreaper guard and the environment
//! mark alone, what a machine without a writable cgroup2 gets).
//!
//! The worker is `tests/workers/daemonise.sh`; it writes the pids of its tree for the test.

use crate::support::sampler::orch_processes;
use crate::support::{
    DEADLINE, Org, RepoSpec, Spec, assert_clean, kill9, output_text, poll, poll_until,
};
use orch::process::proc_stat;
use std::time::{Duration, Instant};

/// Whether this machine gives workers cgroups (a writable cgroup2 with `cgroup.kill`).
fn machine_has_cgroups() -> bool {
    let dir = tempfile::tempdir().unwrap();
    match orch::contain::Cgroup::for_worker(dir.path(), "probe-00000000") {
        Some(cg) => {
            cg.kill_and_remove(Duration::from_secs(5));
            true
        }
        None => false,
    }
}

/// The worker's process group (its guard's pid).
fn pgid(org: &Org, id: &str) -> Option<i32> {
    Some(org.worker(id).worker_pid.expect("a worker was started") as i32)
}

fn org(repos: &[&str], cgroups: bool) -> Org {
    let mut spec = Spec::local("daemonise.sh");
    for r in repos {
        spec = spec.repo(RepoSpec::new(r));
    }
    let mut org = Org::new(spec);
    if !cgroups {
        org.set_env(orch::contain::CGROUPS_ENV, "off");
    }
    org
}

/// The worker's tree as it wrote it: `(role, pid, start ticks)`.
struct Tree {
    id: String,
    procs: Vec<(String, i32, u64)>,
}

impl Tree {
    fn read(org: &Org, id: &str) -> Tree {
        let path = org.out.join(format!("pids-{id}"));
        let text = poll_until(
            &format!("{id} to write the pids of its tree"),
            DEADLINE,
            || std::fs::read_to_string(&path).ok(),
            || org.diag(id),
        );
        let procs: Vec<(String, i32, u64)> = text
            .lines()
            .filter_map(|l| {
                let (role, pid) = l.split_once(' ')?;
                let pid: i32 = pid.trim().parse().ok()?;
                let start = proc_stat(pid)?.start_ticks;
                Some((role.to_string(), pid, start))
            })
            .collect();
        assert_eq!(procs.len(), 4, "{id}: all four alive at first: {text}");
        Tree {
            id: id.into(),
            procs,
        }
    }

    /// Roles and pids of the members still alive (zombies count as dead).
    fn alive(&self) -> Vec<(String, i32)> {
        self.procs
            .iter()
            .filter(|(_, pid, start)| orch::process::process_alive(*pid, Some(*start)))
            .map(|(r, p, _)| (r.clone(), *p))
            .collect()
    }

    fn pid(&self, role: &str) -> i32 {
        self.procs.iter().find(|p| p.0 == role).unwrap().1
    }

    /// Waits (bounded) until none is alive; panics with the survivors otherwise.
    fn wait_all_dead(&self, org: &Org, what: &str, limit: Duration) {
        poll_until(
            &format!("every process of {}'s tree to be gone {what}", self.id),
            limit,
            || self.alive().is_empty().then_some(()),
            || format!("alive: {:?}\n{}", self.alive(), org.diag(&self.id)),
        );
    }
}

/// The worker's cgroup while it runs: recorded, and holding the whole tree.
fn check_cgroup(org: &Org, tree: &Tree, cgroups: bool) -> Option<std::path::PathBuf> {
    let record = org.state.join(&tree.id).join(orch::contain::CGROUP_RECORD);
    if !cgroups {
        assert!(!record.exists(), "ORCH_CGROUPS=off: no cgroup");
        return None;
    }
    let dir = std::path::PathBuf::from(std::fs::read_to_string(&record).expect("cgroup recorded"));
    let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap();
    for (role, pid, _) in &tree.procs {
        assert!(
            procs.lines().any(|l| l.trim() == pid.to_string()),
            "{role} {pid} is not in {}: {procs}",
            dir.display()
        );
    }
    Some(dir)
}

fn done_case(cgroups: bool) {
    let org = org(&["alpha"], cgroups);
    let id = org.spawn_detached("alpha", "finish the feature");
    let tree = Tree::read(&org, &id);
    let cgroup = check_cgroup(&org, &tree, cgroups);
    org.wait_done(&id);
    // The supervisor let go only after the tree was gone.
    tree.wait_all_dead(&org, "after DONE", Duration::from_secs(2));
    if let Some(dir) = cgroup {
        assert!(!dir.exists(), "{} removed", dir.display());
    }
    assert_clean(pgid(&org, &tree.id));
}

#[test]
fn daemons_die_when_the_worker_is_done_cgroup() {
    if !machine_has_cgroups() {
        eprintln!("no usable cgroup2 here: the subreaper variant covers this machine");
        return;
    }
    done_case(true);
}

#[test]
fn daemons_die_when_the_worker_is_done_subreaper() {
    done_case(false);
}

fn cancel_case(cgroups: bool) {
    let org = org(&["alpha"], cgroups);
    let id = org.spawn_detached("alpha", "wait for the test");
    let tree = Tree::read(&org, &id);
    let cgroup = check_cgroup(&org, &tree, cgroups);
    let out = org.run(&["cancel", &id]);
    assert!(out.status.success(), "{}", output_text(&out));
    org.wait_supervisor_gone(&id);
    tree.wait_all_dead(&org, "after orch cancel", Duration::from_secs(2));
    if let Some(dir) = cgroup {
        assert!(!dir.exists(), "{} removed", dir.display());
    }
    assert_eq!(org.worker(&id).milestone().as_str(), "CANCELLED");
    assert_clean(pgid(&org, &tree.id));
}

#[test]
fn daemons_die_when_the_worker_is_cancelled_cgroup() {
    if !machine_has_cgroups() {
        eprintln!("no usable cgroup2 here: the subreaper variant covers this machine");
        return;
    }
    cancel_case(true);
}

#[test]
fn daemons_die_when_the_worker_is_cancelled_subreaper() {
    cancel_case(false);
}

fn kill_all_case(cgroups: bool) {
    let repos = ["alpha", "beta", "gamma"];
    let org = org(&repos, cgroups);
    let ids: Vec<String> = repos
        .iter()
        .map(|r| org.spawn_detached(r, "wait for the test"))
        .collect();
    let trees: Vec<Tree> = ids.iter().map(|id| Tree::read(&org, id)).collect();
    for t in &trees {
        check_cgroup(&org, t, cgroups);
    }
    let victims = orch_processes(&org);
    let roles = |needle: &str| victims.iter().filter(|v| v.1.contains(needle)).count();
    assert_eq!(roles("__supervise"), ids.len(), "{victims:#?}");
    assert_eq!(roles("__guard"), ids.len(), "{victims:#?}");
    // At once, so that none can react to another's death: every orch process but the guards
    // is stopped first, then the guards are killed, then the rest. (Stopping a guard would
    // be wrong: when its group is orphaned with a stopped member, the kernel sends the whole
    // group SIGHUP and SIGCONT, a rescue no real kill gives.)
    let (guards, others): (Vec<_>, Vec<_>) = victims.iter().partition(|v| v.1.contains("__guard"));
    for (pid, _) in &others {
        // SAFETY: kill(2) of one positive pid of this test's run.
        unsafe {
            libc::kill(*pid, libc::SIGSTOP);
        }
    }
    let t0 = Instant::now();
    for (pid, _) in guards.iter().chain(&others) {
        kill9(*pid);
    }
    // The worker command dies with its guard (parent-death signal), no orch process needed.
    for t in &trees {
        let leader = t.pid("worker");
        poll_until(
            &format!("{}'s worker command to die with its guard", t.id),
            Duration::from_secs(5),
            || (!t.alive().iter().any(|(_, p)| *p == leader)).then_some(()),
            || format!("alive: {:?}", t.alive()),
        );
    }
    let leader_ms = t0.elapsed().as_millis();
    // SIGKILL is delivered at once, but a process takes a moment to be gone.
    poll_until(
        "every killed orch process to be gone",
        Duration::from_secs(5),
        || orch_processes(&org).is_empty().then_some(()),
        || format!("{:?}", orch_processes(&org)),
    );
    let left_without_orch: usize = trees.iter().map(|t| t.alive().len()).sum();
    // The next orch command kills the rest.
    let t1 = Instant::now();
    let out = org.run(&["status"]);
    assert!(out.status.success(), "{}", output_text(&out));
    let status_ms = t1.elapsed().as_millis();
    for t in &trees {
        t.wait_all_dead(&org, "after the next orch command", Duration::from_secs(2));
    }
    let all_ms = t1.elapsed().as_millis();
    println!(
        "containment ({}): {} orch processes killed at once; worker commands dead after {leader_ms} ms; \
         {left_without_orch} other processes left until the next orch command; `orch status` took \
         {status_ms} ms, every tree gone {all_ms} ms after it started",
        if cgroups { "cgroup" } else { "subreaper" },
        victims.len()
    );
    assert!(
        poll(Duration::from_secs(5), || org
            .leftovers()
            .is_empty()
            .then_some(()))
        .is_some(),
        "left running: {:#?}",
        org.leftovers()
    );
    for t in &trees {
        assert_clean(pgid(&org, &t.id));
    }
}

#[test]
fn killing_every_orch_process_at_once_leaves_no_orphan_cgroup() {
    if !machine_has_cgroups() {
        eprintln!("no usable cgroup2 here: the subreaper variant covers this machine");
        return;
    }
    kill_all_case(true);
}

#[test]
fn killing_every_orch_process_at_once_leaves_no_orphan_subreaper() {
    kill_all_case(false);
}

#[test]
fn the_helper_commands_are_the_real_ones() {
    assert!(orch::contain::HELPER_COMMANDS.contains(&orch::forge::local::INTERNAL_COMMAND));
}

/// A CI run the worker's push started (its runner is a child of the worker's `git push`)
/// outlives the worker: the runner leaves the worker's cgroup and the guard spares it.
fn ci_outlives_case(cgroups: bool) {
    let mut org = Org::new(crate::support::Spec::resumable(&[("core", &[])]));
    if !cgroups {
        org.set_env(orch::contain::CGROUPS_ENV, "off");
    }
    let id = org.spawn("core", "push-hang add the feature", "t-ci");
    org.wait_mark(&id, 1, "pushed");
    let runner = poll_until(
        "the CI runner the worker's push started",
        DEADLINE,
        || {
            org.leftovers()
                .into_iter()
                .find(|(_, cmd)| cmd.contains("__local-forge run"))
        },
        || org.diag(&id),
    )
    .0;
    let runner_start = proc_stat(runner).unwrap().start_ticks;
    let guard = pgid(&org, &id).unwrap();
    if orch::pidns::usable().is_some() {
        // The push came from the worker's PID namespace: its hook left the runner to the
        // supervisor, which started it outside that namespace (where it can outlive it).
        let ns = |pid: i32| std::fs::read_link(format!("/proc/{pid}/ns/pid")).ok();
        assert_eq!(
            ns(runner),
            ns(std::process::id() as i32),
            "{}",
            org.diag(&id)
        );
        assert!(
            !orch::contain::descendants(&orch::contain::snapshot(), guard, |_| false)
                .iter()
                .any(|p| p.pid == runner),
            "the runner is not in the worker's tree"
        );
    } else {
        // Its parent, the hook, has exited: it was reparented to the guard, a subreaper,
        // whose tree it is in (so the guard's kill must spare it).
        poll_until(
            "the runner to be reparented to the guard",
            DEADLINE,
            || (proc_stat(runner)?.ppid == guard).then_some(()),
            || format!("{:?}", proc_stat(runner)),
        );
    }
    if cgroups {
        let own = std::fs::read_to_string(format!("/proc/{runner}/cgroup")).unwrap();
        assert!(
            orch::contain::unified_path(&own)
                .and_then(|p| orch::contain::outside_worker_cgroup(&p))
                .is_none(),
            "the runner left the worker's cgroup: {own}"
        );
    }
    // The worker's tree dies with its supervisor; the runner does not.
    org.kill_supervisor(&id);
    // A later orch command's orphan sweep spares it too.
    let out = org.run(&["status"]);
    assert!(out.status.success(), "{}", output_text(&out));
    assert!(
        orch::process::process_alive(runner, Some(runner_start)),
        "the CI runner died with the worker\n{}",
        org.diag(&id)
    );
    org.resume();
    org.open_gate("core");
    org.wait_done(&id);
    // Its worker died mid-turn (no DONE, no end of turn): a replacement finished the task.
    assert_eq!(org.lives(&id), 2, "one replacement worker");
}

#[test]
fn ci_started_by_a_worker_outlives_it_cgroup() {
    if !machine_has_cgroups() {
        eprintln!("no usable cgroup2 here: the subreaper variant covers this machine");
        return;
    }
    ci_outlives_case(true);
}

#[test]
fn ci_started_by_a_worker_outlives_it_subreaper() {
    ci_outlives_case(false);
}

/// The supervisor alone is killed: its guard (parent-death signal) kills the whole tree,
/// daemons included, with no orch command needed.
fn supervisor_killed_case(cgroups: bool) {
    let org = org(&["alpha"], cgroups);
    let id = org.spawn_detached("alpha", "wait for the test");
    let tree = Tree::read(&org, &id);
    check_cgroup(&org, &tree, cgroups);
    let sup = org.supervisor_pid(&id);
    let t0 = Instant::now();
    kill9(sup);
    tree.wait_all_dead(
        &org,
        "after its supervisor was killed",
        Duration::from_secs(5),
    );
    println!(
        "containment ({}): supervisor killed; its whole tree gone after {} ms",
        if cgroups { "cgroup" } else { "subreaper" },
        t0.elapsed().as_millis()
    );
    if cgroups {
        let record = org.state.join(&id).join(orch::contain::CGROUP_RECORD);
        let dir = std::fs::read_to_string(record).unwrap();
        poll_until(
            "the guard to remove the worker's cgroup",
            Duration::from_secs(5),
            || (!std::path::Path::new(&dir).exists()).then_some(()),
            || dir.clone(),
        );
    }
    assert_clean(pgid(&org, &id));
}

#[test]
fn killing_the_supervisor_kills_the_whole_tree_cgroup() {
    if !machine_has_cgroups() {
        eprintln!("no usable cgroup2 here: the subreaper variant covers this machine");
        return;
    }
    supervisor_killed_case(true);
}

#[test]
fn killing_the_supervisor_kills_the_whole_tree_subreaper() {
    supervisor_killed_case(false);
}
