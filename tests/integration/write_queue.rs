//! Writers wait fairly, and no stopped process holds them past a bound (issue 34 item 5).
//!
//! orch's writers on a host take turns in a queue before `BEGIN IMMEDIATE`
//! (`store::write_queue`): a waiter is woken the moment the turn is free, and gives up only
//! when the queue stood still for its whole patience. An orch process stopped while holding
//! the turn is ended once its bound is reached: a supervisor when its lease lapsed, any other
//! command after a few seconds. Before, a stopped writer kept SQLite's write lock for as long
//! as it stayed stopped and every other orch process on the host failed "database is busy".
//! (200 spawns at once at the default busy timeout: `spawn_race.rs`.)

use crate::support::{Org, RepoSpec, Spec, output_text, poll};
use std::process::Stdio;
use std::time::Duration;

fn org() -> Org {
    Org::new(
        Spec::local("idle.sh")
            .repo(RepoSpec::new("core").standard_ci("true"))
            .repo(RepoSpec::new("tools").standard_ci("true")),
    )
}

/// Waits until `pid` is inside a write transaction on `org`'s database, then stops it there (a stop
/// that lands just after its turn ended is undone, and the next turn waited for).
fn stop_inside_its_turn(org: &Org, pid: i32) {
    let db = org.state.join(orch::store::DB_FILE);
    // Inside its transaction: it holds SQLite's write lock (and, before it, orch's turn).
    let inside = || orch::store::health::writers(&db).contains(&pid);
    let stopped = poll(Duration::from_secs(90), || {
        poll(Duration::from_secs(30), || inside().then_some(()))?;
        // SAFETY: signals to a process this test started.
        unsafe { libc::kill(pid, libc::SIGSTOP) };
        // The stop takes effect when the signal is delivered: look once it has.
        poll(Duration::from_secs(10), || {
            orch::process::proc_stat(pid)
                .is_some_and(|s| s.state == 'T')
                .then_some(())
        })?;
        if inside() {
            return Some(());
        }
        unsafe { libc::kill(pid, libc::SIGCONT) };
        None
    });
    assert!(
        stopped.is_some(),
        "process {pid} was never stopped inside its turn"
    );
}

/// An operator's `orch hold` stopped (as by ctrl-Z) inside its write transaction: another
/// command on an independent chain still goes through at the default busy timeout, the
/// stopped one is ended (its transaction rolled back: it took no lock), and the next command
/// finds the database whole.
#[test]
fn an_orch_command_stopped_inside_a_write_holds_the_others_only_for_its_bound() {
    let org = org();
    // The database exists before the stopped command opens it (its first write is then one
    // of its own, not the schema's).
    let first = org.run(&["hold", "tools", "--reason", "first"]);
    assert!(first.status.success(), "{}", output_text(&first));
    let out = org.run(&["unhold", "tools"]);
    assert!(out.status.success(), "{}", output_text(&out));

    let mut stuck = org
        .cmd(&["hold", "core", "--reason", "a freeze that stops halfway"])
        // Every write transaction of this process stays open ten minutes.
        .env("ORCH_TEST_HOLD_WRITE_MS", "600000")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("orch hold starts");
    let pid = stuck.id() as i32;
    stop_inside_its_turn(&org, pid);

    // A person's command, at the default busy timeout (10 s).
    let out = org.run(&["hold", "tools", "--reason", "the release"]);
    assert!(
        out.status.success(),
        "a stopped writer held every other orch command:\n{}",
        output_text(&out)
    );
    let status = stuck.wait().expect("the stopped orch hold is reaped");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        status.signal(),
        Some(libc::SIGKILL),
        "the stopped writer was not ended: {status:?}"
    );
    let v = org.json(&["status", "--json"]);
    let locks = v["locks"].to_string();
    assert!(
        locks.contains("tools") && !locks.contains("a freeze that stops halfway"),
        "the ended writer's transaction must have rolled back: {v:#}"
    );
    let check = org.run(&["unhold", "tools"]);
    assert!(check.status.success(), "{}", output_text(&check));
}

/// A supervisor stopped inside a write transaction holds the turn; a spawn on an independent
/// repository waits for its lease to lapse (the supervisor has lost its worker then), ends it
/// and goes through — it does not fail "busy" after 10 s behind a process that will never
/// continue on its own.
#[test]
fn a_supervisor_stopped_inside_a_write_holds_a_spawn_only_until_its_lease_lapsed() {
    let mut org = org();
    // Each lease renewal (every 5 s) holds its write transaction open for 4 s.
    org.set_env("ORCH_TEST_HOLD_RENEWAL_MS", "4000");
    let id = org.spawn_detached("core", "idle");
    let stale = org.worker(&id).supervisor_pid.expect("a supervisor") as i32;
    stop_inside_its_turn(&org, stale);

    let mut cmd = org.cmd(&["spawn", "--repo", "tools", "--task", "other", "--json"]);
    cmd.env_remove("ORCH_TEST_HOLD_RENEWAL_MS");
    let out = cmd.output().expect("orch spawn runs");
    assert!(
        out.status.success(),
        "a stopped supervisor held the spawn:\n{}",
        output_text(&out)
    );
    assert!(
        !orch::process::process_alive(stale, None),
        "the stopped supervisor {stale} still exists"
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let other = v["worker_id"].as_str().unwrap().to_string();
    for w in [&id, &other] {
        let _ = org.run(&["cancel", w, "--reason", "test over"]);
    }
}
