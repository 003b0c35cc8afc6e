//! Issue 25, "nothing of a worker outlives its lock", against a worker set on escaping
//! (`tests/workers/escaper.sh`): it leaves its cgroup, starts a setsid + double-forked hopper
//! that re-forks every 200 µs and a looper that forks every 200 µs — both with a clean
//! environment, so no `ORCH_WORKER_ID` mark finds them — and kills what it can of its guard.
//! Each worker runs in a PID namespace of its own under orch's init: every one of those
//! processes is gone once its lock is released (DONE), once it is cancelled, and once every orch
//! process is killed at once — the last without any later orch command. Sampled from `/proc` by
//! the mark in their argv. Needs PID namespaces (root here and in CI); skipped with a message
//! elsewhere.

use crate::support::sampler::{Sampler, assert_none_after_release, orch_processes, with_argv};
use crate::support::{DEADLINE, Org, RepoSpec, Spec, kill9, output_text, poll, poll_until};
use std::time::Duration;

fn namespaces_here() -> bool {
    if orch::pidns::usable().is_none() {
        eprintln!("no PID namespaces on this machine (root or user namespaces needed): skipped");
        return false;
    }
    true
}

fn org() -> Org {
    Org::new(Spec::local("escaper.sh").repo(RepoSpec::new("alpha").standard_ci("true")))
}

fn marked(mark: &str) -> Vec<i32> {
    with_argv(mark)
}

/// Waits until the worker has started its escapers and attacked its guard; its mark.
fn wait_started(org: &Org, id: &str) -> String {
    let mark = format!("escaper-{id}");
    let started = org.out.join(format!("{mark}.started"));
    poll_until(
        &format!("{id} to start its escapers"),
        DEADLINE,
        || started.exists().then_some(()),
        || org.diag(id),
    );
    poll_until(
        "the escapers to run",
        DEADLINE,
        || (marked(&mark).len() >= 2).then_some(()),
        || format!("marked: {:?}\n{}", marked(&mark), org.diag(id)),
    );
    mark
}

fn assert_none_within(mark: &str, limit: Duration, when: &str, org: &Org, id: &str) {
    assert!(
        poll(limit, || marked(mark).is_empty().then_some(())).is_some(),
        "{when}: escapers alive: {:?}\n{}",
        marked(mark),
        org.diag(id)
    );
}

#[test]
fn no_escaper_is_alive_once_its_lock_is_released_after_done() {
    if !namespaces_here() {
        return;
    }
    let org = org();
    let id = org.spawn_detached("alpha", "finish the feature");
    let mark = format!("escaper-{id}");
    let sampler = Sampler::start(move || with_argv(&mark));
    wait_started(&org, &id);
    org.wait_done(&id);
    poll_until(
        "the lock released",
        DEADLINE,
        || org.locks_of(&id).is_empty().then_some(()),
        || org.diag(&id),
    );
    let seen = sampler.finish();
    assert!(!seen.is_empty(), "the sampler never saw the escapers");
    let _ = assert_none_after_release(&org, &id, &seen, "escapers");
    assert!(marked(&format!("escaper-{id}")).is_empty());
}

#[test]
fn no_escaper_is_alive_after_cancel() {
    if !namespaces_here() {
        return;
    }
    let org = org();
    let id = org.spawn_detached("alpha", "wait for the test");
    let mark = wait_started(&org, &id);
    let out = org.run(&["cancel", &id]);
    assert!(out.status.success(), "{}", output_text(&out));
    org.wait_supervisor_gone(&id);
    assert_none_within(
        &mark,
        Duration::from_secs(2),
        "after orch cancel",
        &org,
        &id,
    );
    assert_eq!(org.worker(&id).milestone().as_str(), "CANCELLED");
}

#[test]
fn no_escaper_is_alive_after_every_orch_process_is_killed_at_once_without_another_command() {
    if !namespaces_here() {
        return;
    }
    let org = org();
    let id = org.spawn_detached("alpha", "wait for the test");
    let mark = wait_started(&org, &id);
    // Its supervisor and guard (orch's init inside the namespace is the orch binary too:
    // killed with them, it would hide what the guard's death alone does — so it is spared).
    let victims: Vec<(i32, String)> = orch_processes(&org)
        .into_iter()
        .filter(|(_, cmd)| !cmd.contains(orch::pidns::INIT_COMMAND))
        .collect();
    assert!(
        victims.iter().any(|v| v.1.contains("__guard"))
            && victims.iter().any(|v| v.1.contains("__supervise")),
        "{victims:#?}"
    );
    for (pid, _) in &victims {
        kill9(*pid);
    }
    // No orch command runs from here on: the kernel alone ends the worker's namespace.
    assert_none_within(
        &mark,
        Duration::from_secs(5),
        "after kill -9 of every orch process",
        &org,
        &id,
    );
    poll_until(
        "every orch process of the run to be gone",
        Duration::from_secs(5),
        || orch_processes(&org).is_empty().then_some(()),
        || format!("{:?}", orch_processes(&org)),
    );
}
