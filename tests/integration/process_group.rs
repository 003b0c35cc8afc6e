//! Process groups: whole trees stop, stubborn children are killed, nothing is left behind.

use crate::support::{live_members as members, poll_until};
use orch::process::{GroupChild, GroupOptions, group_alive, proc_stat, spawn_in_group};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

fn sh(script: &str) -> Command {
    let mut c = Command::new("sh");
    c.arg("-c").arg(script);
    c
}

/// Waits (10 s at most) until `sh` and its two children run in group `pgid`.
fn wait_three_members(pgid: i32) {
    poll_until(
        "sh and both sleeps to be running",
        Duration::from_secs(10),
        || (members(pgid).len() >= 3).then_some(()),
        || format!("{:?}", members(pgid)),
    );
}

/// The leader is reaped: no zombie of it is left (its /proc entry is gone or belongs to a
/// different process that reused the pid).
fn assert_reaped(pid: u32, started: u64) {
    match proc_stat(pid as i32) {
        None => {}
        Some(st) => assert!(
            st.start_ticks != started,
            "leader {pid} still exists in state {}",
            st.state
        ),
    }
}

fn spawn(script: &str) -> (GroupChild, u64) {
    let c = spawn_in_group(&mut sh(script), &GroupOptions::default()).unwrap();
    let started = proc_stat(c.pid() as i32).unwrap().start_ticks;
    (c, started)
}

#[test]
fn terminate_stops_the_whole_tree() {
    let (mut c, started) = spawn("sleep 300 & sleep 300 & wait");
    let pgid = c.pgid();
    wait_three_members(pgid);
    let t0 = Instant::now();
    let status = c.terminate(Duration::from_secs(10)).unwrap();
    assert!(
        t0.elapsed() < Duration::from_secs(9),
        "SIGTERM should suffice"
    );
    assert!(!status.success());
    assert!(!group_alive(pgid), "left alive: {:?}", members(pgid));
    assert!(members(pgid).is_empty());
    assert_reaped(c.pid(), started);
}

#[test]
fn child_ignoring_sigterm_is_killed_after_the_grace() {
    // The ignored disposition is inherited by the grandchild `sleep` too.
    let (mut c, started) = spawn("trap '' TERM; sleep 300 & sleep 300; wait");
    let pgid = c.pgid();
    wait_three_members(pgid);
    let grace = Duration::from_millis(300);
    let t0 = Instant::now();
    let status = c.terminate(grace).unwrap();
    assert!(
        t0.elapsed() >= grace,
        "must wait out the grace before SIGKILL"
    );
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(9), "{status:?}");
    assert!(!group_alive(pgid), "left alive: {:?}", members(pgid));
    assert_reaped(c.pid(), started);
}

#[test]
fn terminate_sweeps_grandchildren_after_the_leader_exited() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("bg");
    let script = format!("sleep 300 & echo $! > '{}'; exit 0", marker.display());
    let (mut c, started) = spawn(&script);
    let pgid = c.pgid();
    let status = c.wait_timeout(Duration::from_secs(10)).unwrap().unwrap();
    assert!(status.success());
    poll_until(
        "the background pid file",
        Duration::from_secs(5),
        || Path::new(&marker).exists().then_some(()),
        String::new,
    );
    assert!(
        group_alive(pgid),
        "the orphaned sleep keeps the group alive"
    );
    let again = c.terminate(Duration::from_secs(5)).unwrap();
    assert_eq!(again.code(), Some(0), "the leader's real status is kept");
    assert!(!group_alive(pgid), "left alive: {:?}", members(pgid));
    assert_reaped(c.pid(), started);
}

#[test]
fn signal_group_reaches_every_member() {
    let (mut c, _) = spawn("sleep 300 & sleep 300 & wait");
    let pgid = c.pgid();
    wait_three_members(pgid);
    c.signal_group(orch::process::Signal::KILL).unwrap();
    poll_until(
        "the group to die",
        Duration::from_secs(10),
        || (!group_alive(pgid)).then_some(()),
        || format!("{:?}", members(pgid)),
    );
    assert!(c.wait_timeout(Duration::from_secs(10)).unwrap().is_some());
}

#[test]
fn parent_death_signal_kills_the_child() {
    // PR_SET_PDEATHSIG fires when the spawning *thread* exits, which lets a test observe it
    // without a helper process: spawn from a thread that then ends.
    let (pid, started) = std::thread::spawn(|| {
        let c = spawn_in_group(
            &mut sh("exec sleep 300"),
            &GroupOptions {
                die_with_parent: true,
            },
        )
        .unwrap();
        let pid = c.pid() as i32;
        let started = proc_stat(pid).unwrap().start_ticks;
        std::mem::forget(c); // no Drop: only the death signal may kill it
        (pid, started)
    })
    .join()
    .unwrap();
    poll_until(
        "the child to be killed when its parent thread exited",
        Duration::from_secs(10),
        || {
            proc_stat(pid)
                .is_none_or(|s| s.start_ticks != started || s.is_dead())
                .then_some(())
        },
        || format!("{:?}", proc_stat(pid).map(|s| s.state)),
    );
    // Reap the zombie we own.
    let _ = rustix::process::waitpid(
        rustix::process::Pid::from_raw(pid),
        rustix::process::WaitOptions::empty(),
    );
    assert_reaped(pid as u32, started);
}
