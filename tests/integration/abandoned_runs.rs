//! A run orch started is cancelled once nothing waits for it (issue 34): a dependent's check
//! run whose verdict was decided early (a required job red) still had a slow job going after
//! the landing ended `broken` — for as long as that job liked. Once the landing's supervisor
//! lets go, the run is cancelled and its jobs' processes are gone.

use crate::support::{DEADLINE, Org, RepoSpec, Spec, job, poll_until, processes_under};

/// A process of the slow job (its command line names this marker).
const SLOW: &str = "sleep 6001";

fn slow_jobs(org: &Org) -> Vec<(i32, String)> {
    processes_under(&org.state)
        .into_iter()
        .filter(|(_, cmd)| cmd.contains(SLOW))
        .collect()
}

#[test]
fn a_dependents_check_run_is_cancelled_when_the_landing_is_over() {
    let spec = Spec::local("happy.sh")
        .repo(RepoSpec::new("core").standard_ci("true"))
        .repo(
            RepoSpec::new("vm")
                .deps(&["core"])
                // Red with core's change (its feature.txt), green without it: the change is
                // what broke vm.
                .job(job("test", "[ ! -e \"$ORCH_UPSTREAMS/core/feature.txt\" ]"))
                // Slow only on the check's run: the run of vm's head without the change (its
                // baseline, `orch/baseline/…`) is green at once, so the change is blamed.
                .job(job(
                    "slow",
                    &format!("case \"$ORCH_CI_REF\" in */verify/*) exec {SLOW} ;; esac"),
                ))
                .job(job("radicle-push", "true").needs(&["test"])),
        )
        // orch's default: each landing checks its direct dependents.
        .downstream(None);
    let org = Org::new(spec);
    let (out, id) = org.spawn_foreground("core", "a core change vm's red test will blame");
    assert!(out.status.success(), "{}", org.diag(&id));
    org.wait_milestone(&id, "DONE", DEADLINE);
    let l = org.worker(&id).progress.landing.clone().expect("a landing");
    assert_eq!(
        l.state,
        orch::milestone::LandState::Broken,
        "vm's check decided red: {l:?}"
    );
    org.wait_supervisor_gone(&id);
    poll_until(
        "vm's check run to be cancelled, its slow job gone",
        DEADLINE,
        || slow_jobs(&org).is_empty().then_some(()),
        || format!("still running: {:?}\n{}", slow_jobs(&org), org.diag(&id)),
    );
}

/// Only what broke is blamed (issue 36 item 3): vm is red on its base head with core's change
/// and without it — the local forge runs vm's head once more with core pinned to the base the
/// change was built on. The landing ends landed, vm's chain is not held, no breakage alert;
/// a warning says vm was red already.
#[test]
fn a_dependent_already_red_without_the_change_is_not_blamed() {
    let spec = Spec::local("happy.sh")
        .repo(RepoSpec::new("core").standard_ci("true"))
        .repo(RepoSpec::new("vm").deps(&["core"]).standard_ci("exit 1"))
        .downstream(None);
    let org = Org::new(spec);
    let (out, id) = org.spawn_foreground("core", "a core change vm was red before");
    assert!(out.status.success(), "{}", org.diag(&id));
    org.wait_supervisor_gone(&id);
    let l = org.worker(&id).progress.landing.clone().expect("a landing");
    assert_eq!(
        l.state,
        orch::milestone::LandState::Landed,
        "{l:?}\n{}",
        org.diag(&id)
    );
    assert!(l.downstream[0].already_red.is_some(), "{l:?}");
    let alerts = org.alerts(&id);
    let kinds: Vec<&str> = alerts.iter().filter_map(|a| a["kind"].as_str()).collect();
    assert!(kinds.contains(&"downstream_already_red"), "{kinds:?}");
    assert!(!kinds.contains(&"downstream_breakage"), "{kinds:?}");
    assert!(org.locks_of(&id).is_empty());
    assert!(
        org.run(&["can-spawn", "vm"]).status.success(),
        "vm's chain is not held"
    );
}
