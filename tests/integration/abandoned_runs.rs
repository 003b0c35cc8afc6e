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
                .job(job("test", "exit 1"))
                .job(job("slow", &format!("exec {SLOW}")))
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
