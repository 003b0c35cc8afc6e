//! Nothing a CI job starts outlives it: a job of the worker's change that `setsid`s a daemon
//! (the worker's code, run by orch's local forge) leaves nothing running once the job has
//! ended — not after the worker's run, not after the landing's runs — with a cgroup per job,
//! and without one (the guard and its PID namespace alone).

use crate::support::{DEADLINE, Org, RepoSpec, Spec, job, poll_until};

/// A job that starts a `setsid` daemon, waits until the daemon has written its (host) pid
/// under `marks`, and succeeds.
fn daemonising_job(marks: &std::path::Path) -> String {
    format!(
        "d={marks}/daemon.$(cat /proc/sys/kernel/random/uuid); \
         setsid sh -c 'read -r p _ </proc/self/stat; echo $p > \"$1\"; exec sleep 600' sh \"$d\" \
         </dev/null >/dev/null 2>&1 & \
         while [ ! -s \"$d\" ]; do sleep 0.05; done; echo daemon started",
        marks = marks.display()
    )
}

fn daemons(marks: &std::path::Path) -> Vec<i32> {
    std::fs::read_dir(marks)
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path()).ok())
        .filter_map(|t| t.trim().parse().ok())
        .collect()
}

fn alive(pid: i32) -> bool {
    orch::process::proc_stat(pid).is_some_and(|s| s.state != 'Z')
}

/// Kills what a failed run of the test left (the daemons sleep for 10 minutes).
struct Reap(std::path::PathBuf);

impl Drop for Reap {
    fn drop(&mut self) {
        for pid in daemons(&self.0).into_iter().filter(|p| alive(*p)) {
            crate::support::kill9(pid);
        }
    }
}

fn case(cgroups: bool) {
    let marks = tempfile::tempdir().unwrap();
    let _reap = Reap(marks.path().to_path_buf());
    let spec = Spec::local("happy.sh").repo(
        RepoSpec::new("alpha")
            .job(job("test", &daemonising_job(marks.path())))
            .job(job("radicle-push", "true").needs(&["test"])),
    );
    let mut org = Org::new(spec);
    if !cgroups {
        org.set_env(orch::contain::CGROUPS_ENV, "off");
    }
    let (out, id) = org.spawn_foreground("alpha", "add a feature");
    assert!(out.status.success(), "{}", org.diag(&id));
    org.wait_milestone(&id, "DONE", DEADLINE);
    let started = daemons(marks.path());
    assert!(
        !started.is_empty(),
        "the job started no daemon: {}",
        org.diag(&id)
    );
    poll_until(
        "every daemon a CI job started to be gone",
        DEADLINE,
        || {
            let left: Vec<i32> = daemons(marks.path())
                .into_iter()
                .filter(|p| alive(*p))
                .collect();
            left.is_empty().then_some(())
        },
        || {
            let left: Vec<String> = daemons(marks.path())
                .into_iter()
                .filter(|p| alive(*p))
                .map(|p| format!("{p}: {}", crate::support::cmdline(p).unwrap_or_default()))
                .collect();
            format!("daemons still running after their jobs ended: {left:?}")
        },
    );
}

#[test]
fn a_daemon_a_ci_job_starts_ends_with_its_job() {
    case(true);
}

#[test]
fn a_daemon_a_ci_job_starts_ends_with_its_job_without_cgroups() {
    case(false);
}
