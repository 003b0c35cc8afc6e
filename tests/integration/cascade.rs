//! Cascade protection on the local forge: a red commit on an upstream repository's base
//! branch pauses the downstream worker (its processes stopped, state `T`) and keeps new
//! workers below it from starting; a green commit lets it go on to DONE.

use crate::support::{
    DEADLINE, Org, RepoSpec, Spec, held_still, output_text, poll_until, proc_state,
};

#[test]
fn a_red_upstream_pauses_the_downstream_worker_until_it_is_green_again() {
    let spec = Spec::local("cascade_wait.sh")
        .repo(RepoSpec::new("core").standard_ci("grep -qx good status.txt"))
        .repo(RepoSpec::new("vm").deps(&["core"]))
        .repo(RepoSpec::new("net").deps(&["core"]));
    let org = Org::new(spec);
    let id = org.spawn_detached("vm", "a feature on vm");
    let pid_file = org.out.join(format!("pid-{id}"));
    let pid: i32 = poll_until(
        "the worker to write its pid",
        DEADLINE,
        || std::fs::read_to_string(&pid_file).ok()?.trim().parse().ok(),
        || org.diag(&id),
    );

    org.push_to_base("core", "status.txt", "bad");
    let w = org.wait_milestone(&id, "PAUSED", DEADLINE);
    assert_eq!(
        w.progress.paused_from.map(|m| m.to_string()).as_deref(),
        Some("WORKING")
    );
    poll_until(
        "the worker's processes to be stopped",
        DEADLINE,
        || held_still(pid).then_some(()),
        || format!("state {:?}\n{}", proc_state(pid), org.diag(&id)),
    );
    let paused = org.alerts(&id);
    let paused = paused
        .iter()
        .find(|a| a["kind"] == "paused")
        .expect("a paused alert");
    assert!(
        paused["message"]
            .as_str()
            .unwrap()
            .contains("core main is red: test"),
        "{paused:#}"
    );

    // Nothing starts below the red repository.
    let out = org.run(&["spawn", "--repo", "net", "--task", "t"]);
    assert_eq!(out.status.code(), Some(1), "{}", output_text(&out));
    assert!(
        output_text(&out).contains("core main is red: test"),
        "{}",
        output_text(&out)
    );
    assert_eq!(org.workers().len(), 1, "no worker on net");

    org.push_to_base("core", "status.txt", "good");
    org.wait_milestone(&id, "WORKING", DEADLINE);
    poll_until(
        "the worker's processes to run again",
        DEADLINE,
        || (!held_still(pid)).then_some(()),
        || org.diag(&id),
    );
    org.release(&id);
    org.wait_done(&id);
    let alerts = org.json(&["alerts", "--json"]);
    let paused = alerts["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["kind"] == "paused")
        .expect("the paused alert")
        .clone();
    assert!(
        paused["resolved_at"]
            .as_str()
            .is_some_and(|t| t.parse::<jiff::Timestamp>().is_ok()),
        "{paused:#}"
    );
    let t: Vec<_> = org.transitions(&id);
    assert!(t.contains(&("WORKING".into(), "PAUSED".into())), "{t:?}");
    assert!(t.contains(&("PAUSED".into(), "WORKING".into())), "{t:?}");
}

/// `can-spawn` answers what `spawn` would do: below a red upstream it says no, with the
/// reason `spawn` gives (exit 1), and `--json` names the red repository as a blocker.
#[test]
fn can_spawn_says_no_below_a_red_upstream_with_spawns_reason() {
    let spec = Spec::local("cascade_wait.sh")
        .repo(RepoSpec::new("core").standard_ci("grep -qx good status.txt"))
        .repo(RepoSpec::new("net").deps(&["core"]));
    let org = Org::new(spec);
    let sha = org.push_to_base("core", "status.txt", "bad");
    poll_until(
        "core's base branch to be red",
        DEADLINE,
        || {
            let v = org.json(&["ci", "status", "--repo", "core", "--sha", &sha, "--json"]);
            (v["verdict"] == "red").then_some(())
        },
        || org.dump(),
    );

    let spawn = org.run(&["spawn", "--repo", "net", "--task", "t"]);
    assert_eq!(spawn.status.code(), Some(1), "{}", output_text(&spawn));
    assert!(
        output_text(&spawn).contains("core main is red: test"),
        "{}",
        output_text(&spawn)
    );

    let can = org.run(&["can-spawn", "net"]);
    assert_eq!(can.status.code(), Some(1), "{}", output_text(&can));
    let said = String::from_utf8_lossy(&can.stdout);
    assert!(said.starts_with("no:"), "{said}");
    assert!(said.contains("core main is red: test"), "{said}");

    let v = org.json(&["can-spawn", "net", "--json"]);
    assert_eq!(v["can_spawn"], false, "{v:#}");
    let blockers = v["blockers"].as_array().unwrap();
    assert_eq!(blockers.len(), 1, "{v:#}");
    let b = &blockers[0];
    assert_eq!(b["kind"], "upstream_red", "{v:#}");
    assert_eq!(b["repo"], "core", "{v:#}");
    assert_eq!(b["relation"], "dependency", "{v:#}");
    assert_eq!(b["holder"], sha.as_str(), "the red commit: {v:#}");
    assert!(
        b["text"]
            .as_str()
            .unwrap()
            .contains("core main is red: test"),
        "{v:#}"
    );
    // The red repository itself has nothing red above it.
    assert_eq!(org.run(&["can-spawn", "core"]).status.code(), Some(0));
    assert!(org.workers().is_empty(), "nothing started");
}
