//! A new organisation with nothing but its repos.yaml: the contract is built in (a file beside
//! repos.yaml overrides it), so `check`, `spawn` and the worker's own `orch report` work.

use crate::support::{Org, RepoSpec, Spec, output_text};
use orch::milestone::Milestone;

/// `orch` as a new user runs it: no `--contract`, no `ORCH_CONTRACT`.
fn bare(org: &Org, args: &[&str]) -> std::process::Output {
    let mut c = org.cmd(args);
    c.env_remove("ORCH_CONTRACT");
    c.output().unwrap()
}

#[test]
fn without_a_contract_file_the_built_in_one_runs_a_worker_to_done() {
    let org = Org::new(
        Spec::local("happy.sh").repo(RepoSpec::new("alpha").standard_ci("test -f feature.txt")),
    );
    let beside = org
        .config_path
        .parent()
        .unwrap()
        .join("contracts/worker-completion.yaml");
    assert!(!beside.exists());
    let check = bare(&org, &["check"]);
    assert!(check.status.success(), "{}", output_text(&check));
    let out = bare(
        &org,
        &[
            "spawn",
            "--repo",
            "alpha",
            "--task",
            "first run",
            "--foreground",
            "--json",
        ],
    );
    assert!(out.status.success(), "{}", output_text(&out));
    let id = org.workers()[0].id.clone();
    let w = org.worker(&id);
    assert_eq!(w.progress.milestone, Milestone::Done, "{}", org.diag(&id));
    // The worker's `orch report` / `orch ci status` found it too: no contract error anywhere.
    let log = org.worker_log(&id);
    assert!(!log.contains("contract"), "{log}");
    let status = bare(&org, &["status"]);
    assert!(status.status.success(), "{}", output_text(&status));
}
