//! Unit and property tests of the CI verdict.

use super::*;
use JobStatus::*;
use proptest::prelude::*;

const MIN: i64 = 60_000;

fn policy() -> CiPolicy {
    CiPolicy {
        sync_job: "radicle-push".into(),
        required_jobs: None,
        start_timeout: Duration::from_secs(300),
    }
}

fn job(name: &str, status: JobStatus) -> CiJob {
    CiJob {
        name: name.into(),
        status,
        attempt: 1,
        id: None,
        past_limit: false,
    }
}

fn run(id: i64, event: &str, status: Option<JobStatus>, jobs: Vec<CiJob>) -> CiRun {
    CiRun {
        id,
        number: id,
        event: event.into(),
        status,
        workflow: Some("ci.yml".into()),
        url: None,
        git_ref: None,
        jobs,
    }
}

fn push(jobs: &[(&str, JobStatus)]) -> Vec<CiRun> {
    vec![run(
        1,
        "push",
        None,
        jobs.iter().map(|(n, s)| job(n, *s)).collect(),
    )]
}

fn v(runs: &[CiRun]) -> Verdict {
    verdict(runs, &policy(), Some(0), MIN)
}

#[test]
fn kind_names_and_terminality() {
    let all = [
        (VerdictKind::Pending, "pending", false),
        (VerdictKind::Running, "running", false),
        (VerdictKind::Green, "green", true),
        (VerdictKind::Red, "red", true),
        (VerdictKind::SyncNotDone, "sync_not_done", true),
        (VerdictKind::NoRun, "no_run", false),
    ];
    for (k, s, t) in all {
        assert_eq!(k.as_str(), s);
        assert_eq!(k.to_string(), s);
        assert_eq!(serde_json::to_value(k).unwrap(), serde_json::json!(s));
        assert_eq!(k.is_terminal(), t, "{s}");
    }
}

#[test]
fn policy_from_config() {
    let c = CiConfig {
        sync_job: "sync".into(),
        required_jobs: Some(vec!["build".into()]),
        start_timeout: Duration::from_secs(7),
        poll_interval: Duration::from_secs(1),
        protected_paths: None,
    };
    let p = CiPolicy::from(&c);
    assert_eq!(p.sync_job, "sync");
    assert_eq!(p.required_jobs, Some(vec!["build".to_string()]));
    assert_eq!(p.start_timeout, Duration::from_secs(7));
}

#[test]
fn all_success_is_green() {
    let out = v(&push(&[("build", Success), ("radicle-push", Success)]));
    assert_eq!(out.kind, VerdictKind::Green, "{out:?}");
    assert!(out.failed_jobs.is_empty());
    assert_eq!(out.sync_status, Some(Success));
    assert!(out.detail.contains("succeeded"), "{}", out.detail);
}

#[test]
fn verdict_serializes() {
    let out = v(&push(&[("build", Failure), ("radicle-push", Skipped)]));
    let json = serde_json::to_value(&out).unwrap();
    assert_eq!(json["kind"], "red");
    assert_eq!(json["failed_jobs"], serde_json::json!(["build"]));
    assert_eq!(json["sync_status"], "skipped");
}

#[test]
fn failed_job_is_red_and_sorted() {
    let out = v(&push(&[
        ("zeta", Failure),
        ("alpha", Cancelled),
        ("mid", Success),
        ("radicle-push", Skipped),
    ]));
    assert_eq!(out.kind, VerdictKind::Red);
    assert_eq!(out.failed_jobs, vec!["alpha", "zeta"]);
    assert_eq!(out.sync_status, Some(Skipped));
    assert!(
        out.detail.contains("radicle-push skipped"),
        "{}",
        out.detail
    );
}

#[test]
fn red_does_not_wait_for_running_jobs() {
    let out = v(&push(&[
        ("build", Failure),
        ("test", Running),
        ("radicle-push", Waiting),
    ]));
    assert_eq!(out.kind, VerdictKind::Red);
    assert_eq!(out.failed_jobs, vec!["build"]);
}

#[test]
fn sync_failure_is_red() {
    let out = v(&push(&[("build", Success), ("radicle-push", Failure)]));
    assert_eq!(out.kind, VerdictKind::Red);
    assert_eq!(out.failed_jobs, vec!["radicle-push"]);
}

#[test]
fn sync_cancelled_with_other_failure_is_red_listing_both() {
    let out = v(&push(&[("build", Failure), ("radicle-push", Cancelled)]));
    assert_eq!(out.kind, VerdictKind::Red);
    assert_eq!(out.failed_jobs, vec!["build", "radicle-push"]);
}

#[test]
fn skipped_required_job_is_red() {
    let out = v(&push(&[("lint", Skipped), ("radicle-push", Success)]));
    assert_eq!(out.kind, VerdictKind::Red);
    assert_eq!(out.failed_jobs, vec!["lint (skipped)"]);
}

#[test]
fn skipped_job_that_is_not_required_is_ignored() {
    let mut p = policy();
    p.required_jobs = Some(vec!["build".into()]);
    let runs = push(&[
        ("build", Success),
        ("docs", Skipped),
        ("flaky", Failure),
        ("radicle-push", Success),
    ]);
    assert_eq!(verdict(&runs, &p, None, 0).kind, VerdictKind::Green);
}

#[test]
fn sync_skipped_alone_is_sync_not_done() {
    let out = v(&push(&[("build", Success), ("radicle-push", Skipped)]));
    assert_eq!(out.kind, VerdictKind::SyncNotDone);
    assert!(out.failed_jobs.is_empty());
    assert_eq!(
        out.detail,
        "radicle-push skipped: push a new commit (e.g. an empty commit) to trigger a push run"
    );
}

#[test]
fn sync_cancelled_alone_is_sync_not_done() {
    let out = v(&push(&[("build", Success), ("radicle-push", Cancelled)]));
    assert_eq!(out.kind, VerdictKind::SyncNotDone);
    assert_eq!(out.sync_status, Some(Cancelled));
}

#[test]
fn sync_skipped_waits_for_running_jobs_that_may_still_fail() {
    let out = v(&push(&[("build", Running), ("radicle-push", Skipped)]));
    assert_eq!(out.kind, VerdictKind::Running);
    assert!(out.detail.contains("build (running)"), "{}", out.detail);
}

#[test]
fn only_sync_job_skipped_is_not_green() {
    let out = v(&push(&[("radicle-push", Skipped)]));
    assert_eq!(out.kind, VerdictKind::SyncNotDone);
}

#[test]
fn all_skipped_is_red_not_green() {
    let out = v(&push(&[
        ("a", Skipped),
        ("b", Skipped),
        ("radicle-push", Skipped),
    ]));
    assert_eq!(out.kind, VerdictKind::Red);
    assert_eq!(out.failed_jobs, vec!["a (skipped)", "b (skipped)"]);
}

#[test]
fn dispatch_run_never_counts() {
    let runs = vec![run(
        5,
        "workflow_dispatch",
        Some(Success),
        vec![job("build", Success), job("radicle-push", Success)],
    )];
    let out = verdict(&runs, &policy(), Some(0), MIN);
    assert_eq!(out.kind, VerdictKind::Pending);
    assert!(out.detail.contains("non-push"), "{}", out.detail);
    let out = verdict(&runs, &policy(), Some(0), 10 * MIN);
    assert_eq!(out.kind, VerdictKind::NoRun);
}

#[test]
fn dispatch_run_does_not_mask_a_failed_push_run() {
    let runs = vec![
        run(
            5,
            "push",
            Some(Failure),
            vec![job("build", Failure), job("radicle-push", Skipped)],
        ),
        run(
            6,
            "workflow_dispatch",
            Some(Success),
            vec![job("build", Success), job("radicle-push", Success)],
        ),
    ];
    let out = v(&runs);
    assert_eq!(out.kind, VerdictKind::Red);
    assert_eq!(out.failed_jobs, vec!["build"]);
}

#[test]
fn no_run_until_start_timeout() {
    let p = policy();
    assert_eq!(
        verdict(&[], &p, Some(0), 4 * MIN).kind,
        VerdictKind::Pending
    );
    let out = verdict(&[], &p, Some(0), 5 * MIN);
    assert_eq!(out.kind, VerdictKind::NoRun);
    assert!(out.detail.contains("5m"), "{}", out.detail);
    assert_eq!(verdict(&[], &p, None, i64::MAX).kind, VerdictKind::Pending);
}

#[test]
fn rerun_latest_attempt_wins() {
    let mut old = job("build", Failure);
    old.attempt = 1;
    let mut new = job("build", Success);
    new.attempt = 2;
    let runs = vec![run(
        1,
        "push",
        None,
        vec![old, new, job("radicle-push", Success)],
    )];
    assert_eq!(v(&runs).kind, VerdictKind::Green);
    // Order in the list does not matter.
    let mut runs = runs;
    runs[0].jobs.reverse();
    assert_eq!(v(&runs).kind, VerdictKind::Green);
}

#[test]
fn rerun_in_progress_is_running_not_red() {
    let mut old = job("build", Failure);
    old.attempt = 1;
    let mut new = job("build", Running);
    new.attempt = 2;
    let runs = vec![run(
        1,
        "push",
        None,
        vec![old, new, job("radicle-push", Skipped)],
    )];
    let out = v(&runs);
    assert_eq!(out.kind, VerdictKind::Running, "{out:?}");
}

#[test]
fn newest_run_of_a_workflow_wins_and_workflows_add_up() {
    let runs = vec![
        run(
            7,
            "push",
            Some(Success),
            vec![job("build", Success), job("radicle-push", Success)],
        ),
        run(3, "push", Some(Failure), vec![job("build", Failure)]),
    ];
    assert_eq!(v(&runs).kind, VerdictKind::Green);
    let mut runs = vec![
        run(3, "push", Some(Success), vec![job("build", Success)]),
        run(
            7,
            "push",
            Some(Success),
            vec![job("test", Success), job("radicle-push", Success)],
        ),
    ];
    runs[0].workflow = Some("release.yml".into());
    let out = v(&runs);
    assert_eq!(out.kind, VerdictKind::Green);
    assert!(out.detail.contains("2 required job(s)"), "{}", out.detail);
    assert!(out.detail.contains("runs #3, #7"), "{}", out.detail);
}

#[test]
fn absent_required_job_is_pending_not_failed() {
    let mut p = policy();
    p.required_jobs = Some(vec!["build".into(), "test".into()]);
    let runs = push(&[("build", Success)]);
    let out = verdict(&runs, &p, Some(0), MIN);
    assert_eq!(out.kind, VerdictKind::Pending);
    assert!(out.failed_jobs.is_empty());
    assert!(out.detail.contains("test (not started)"), "{}", out.detail);
    // Even long after the push: without run status nothing proves it will not come.
    let out = verdict(&runs, &p, Some(0), 100 * MIN);
    assert_eq!(out.kind, VerdictKind::Pending);
}

#[test]
fn absent_required_job_in_finished_run_is_red_missing() {
    let mut p = policy();
    p.required_jobs = Some(vec!["build".into(), "test".into()]);
    let runs = vec![run(
        1,
        "push",
        Some(Success),
        vec![job("build", Success), job("radicle-push", Success)],
    )];
    let out = verdict(&runs, &p, Some(0), MIN);
    assert_eq!(out.kind, VerdictKind::Red);
    assert_eq!(out.failed_jobs, vec!["test (missing)"]);
}

#[test]
fn waiting_and_running_jobs() {
    let out = v(&push(&[("build", Waiting), ("radicle-push", Blocked)]));
    assert_eq!(out.kind, VerdictKind::Pending);
    let out = v(&push(&[("build", Running), ("radicle-push", Blocked)]));
    assert_eq!(out.kind, VerdictKind::Running);
    assert!(out.detail.contains("build (running)"), "{}", out.detail);
    let out = v(&push(&[("build", Success), ("radicle-push", Unknown)]));
    assert_eq!(out.kind, VerdictKind::Pending);
    let runs = vec![run(1, "push", Some(Running), vec![])];
    assert_eq!(v(&runs).kind, VerdictKind::Running);
    let runs = vec![run(1, "push", Some(Waiting), vec![])];
    assert_eq!(v(&runs).kind, VerdictKind::Pending);
}

#[test]
fn run_status_guards_green_when_every_job_is_required() {
    let jobs = vec![job("build", Success), job("radicle-push", Success)];
    // A job no runner picked up is invisible on the tasks path; the run is still going.
    let runs = vec![run(1, "push", Some(Running), jobs.clone())];
    assert_eq!(v(&runs).kind, VerdictKind::Running);
    let runs = vec![run(1, "push", Some(Cancelled), jobs.clone())];
    let out = v(&runs);
    assert_eq!(out.kind, VerdictKind::Red);
    assert_eq!(out.failed_jobs, vec!["run #1 (cancelled)"]);
    // An explicit list narrows what must succeed, never what must have finished.
    let mut p = policy();
    p.required_jobs = Some(vec!["build".into()]);
    let runs = vec![run(1, "push", Some(Running), jobs.clone())];
    assert_eq!(verdict(&runs, &p, None, 0).kind, VerdictKind::Running);
    let runs = vec![run(1, "push", Some(Success), jobs)];
    assert_eq!(verdict(&runs, &p, None, 0).kind, VerdictKind::Green);
}

#[test]
fn missing_sync_job_in_finished_run_is_sync_not_done() {
    let runs = vec![run(1, "push", Some(Success), vec![job("build", Success)])];
    let out = v(&runs);
    assert_eq!(out.kind, VerdictKind::SyncNotDone);
    assert_eq!(out.sync_status, None);
    assert!(out.detail.contains("did not run"), "{}", out.detail);
}

#[test]
fn missing_sync_job_in_unfinished_run_is_running() {
    let runs = vec![run(1, "push", Some(Running), vec![job("build", Success)])];
    assert_eq!(v(&runs).kind, VerdictKind::Running);
    let runs = vec![run(1, "push", Some(Blocked), vec![job("build", Success)])];
    assert_eq!(v(&runs).kind, VerdictKind::Pending);
}

#[test]
fn missing_sync_job_on_tasks_path_waits_for_start_timeout() {
    let runs = push(&[("build", Success)]);
    let p = policy();
    assert_eq!(
        verdict(&runs, &p, Some(0), 4 * MIN).kind,
        VerdictKind::Pending
    );
    let out = verdict(&runs, &p, Some(0), 5 * MIN);
    assert_eq!(out.kind, VerdictKind::SyncNotDone);
    assert!(out.detail.contains("not seen within 5m"), "{}", out.detail);
    assert_eq!(
        verdict(&runs, &p, None, i64::MAX).kind,
        VerdictKind::Pending
    );
}

#[test]
fn run_with_no_jobs_finished_is_sync_not_done() {
    let runs = vec![run(1, "push", Some(Skipped), vec![])];
    assert_eq!(v(&runs).kind, VerdictKind::SyncNotDone);
}

#[test]
fn required_list_containing_the_sync_job() {
    let mut p = policy();
    p.required_jobs = Some(vec!["build".into(), "radicle-push".into()]);
    let runs = push(&[("build", Success), ("radicle-push", Skipped)]);
    assert_eq!(verdict(&runs, &p, None, 0).kind, VerdictKind::SyncNotDone);
    let runs = push(&[("build", Success), ("radicle-push", Success)]);
    assert_eq!(verdict(&runs, &p, None, 0).kind, VerdictKind::Green);
}

#[test]
fn empty_required_list_needs_only_the_sync_job() {
    let mut p = policy();
    p.required_jobs = Some(vec![]);
    let runs = push(&[("build", Failure), ("radicle-push", Success)]);
    assert_eq!(verdict(&runs, &p, None, 0).kind, VerdictKind::Green);
}

#[test]
fn same_job_name_in_two_workflows_is_two_jobs() {
    // ci.yml's failed build is not hidden by release.yml's green build (a newer run).
    let mut runs = vec![
        run(
            3,
            "push",
            Some(Failure),
            vec![job("build", Failure), job("radicle-push", Skipped)],
        ),
        run(4, "push", Some(Success), vec![job("build", Success)]),
    ];
    runs[1].workflow = Some("release.yml".into());
    let out = v(&runs);
    assert_eq!(out.kind, VerdictKind::Red, "{out:?}");
    assert_eq!(out.failed_jobs, vec!["build"]);
    // The sync job must succeed in each run that defines it.
    runs[0].jobs = vec![job("build", Success), job("radicle-push", Success)];
    runs[0].status = Some(Success);
    runs[1].jobs.push(job("radicle-push", Skipped));
    assert_eq!(v(&runs).kind, VerdictKind::SyncNotDone);
}

#[test]
fn a_run_cancelled_before_any_job_was_picked_up_is_red() {
    let runs = vec![run(1, "push", Some(Cancelled), vec![])];
    let out = v(&runs);
    assert_eq!(out.kind, VerdictKind::Red, "{out:?}");
    assert_eq!(out.failed_jobs, vec!["run #1 (cancelled)"]);
}

#[test]
fn non_required_jobs_still_going_hold_green_back() {
    let mut p = policy();
    p.required_jobs = Some(vec!["build".into()]);
    let runs = push(&[
        ("build", Success),
        ("docs", Waiting),
        ("radicle-push", Success),
    ]);
    let out = verdict(&runs, &p, None, 0);
    assert_eq!(out.kind, VerdictKind::Pending, "{out:?}");
    assert!(out.detail.contains("docs (waiting)"), "{}", out.detail);
}

fn any_status() -> impl Strategy<Value = JobStatus> {
    prop_oneof![
        Just(Unknown),
        Just(Waiting),
        Just(Running),
        Just(Success),
        Just(Failure),
        Just(Cancelled),
        Just(Skipped),
        Just(Blocked),
    ]
}

fn any_runs() -> impl Strategy<Value = Vec<CiRun>> {
    let job = (
        prop_oneof![
            Just("build"),
            Just("test"),
            Just("lint"),
            Just("radicle-push")
        ],
        any_status(),
        1u32..4,
    )
        .prop_map(|(n, s, a)| CiJob {
            name: n.into(),
            status: s,
            attempt: a,
            id: None,
            past_limit: false,
        });
    let run = (
        0i64..5,
        prop_oneof![Just("push"), Just("workflow_dispatch")],
        proptest::option::of(any_status()),
        proptest::collection::vec(job, 0..6),
    )
        .prop_map(|(id, ev, st, jobs)| CiRun {
            id,
            number: id,
            event: ev.into(),
            status: st,
            workflow: None,
            url: None,
            git_ref: None,
            jobs,
        });
    // A forge gives every run its own id and number (the random part keeps their order
    // random): two runs never share one.
    proptest::collection::vec(run, 0..4).prop_map(|mut runs| {
        for (i, r) in runs.iter_mut().enumerate() {
            r.id = r.id * 10 + i as i64;
            r.number = r.id;
        }
        runs
    })
}

fn any_policy() -> impl Strategy<Value = CiPolicy> {
    proptest::option::of(proptest::sample::subsequence(
        vec!["build", "test", "lint", "radicle-push"],
        0..4,
    ))
    .prop_map(|req| CiPolicy {
        sync_job: "radicle-push".into(),
        required_jobs: req.map(|v| v.into_iter().map(String::from).collect()),
        start_timeout: Duration::from_secs(60),
    })
}

/// The latest attempt of each job name of each push run (ties: every tied attempt),
/// computed independently of `verdict`: (run id, name, status).
fn latest_jobs(runs: &[CiRun]) -> Vec<(i64, String, JobStatus)> {
    let mut out = Vec::new();
    for r in runs.iter().filter(|r| r.event == "push") {
        for j in &r.jobs {
            let top = r
                .jobs
                .iter()
                .filter(|k| k.name == j.name)
                .map(|k| k.attempt)
                .max();
            if Some(j.attempt) == top {
                out.push((r.id, j.name.clone(), j.status));
            }
        }
    }
    out
}

proptest! {
    #[test]
    fn never_green_unless_sync_succeeded(
        runs in any_runs(),
        p in any_policy(),
        pushed in proptest::option::of(0i64..1_000_000),
        now in 0i64..2_000_000,
    ) {
        let out = verdict(&runs, &p, pushed, now);
        if out.kind == VerdictKind::Green {
            // Every run's workflow is unknown here, so every push run counts: every latest
            // attempt of every job is finished, the required ones and the sync job succeeded.
            let latest = latest_jobs(&runs);
            prop_assert!(latest.iter().any(|(_, n, _)| n == "radicle-push"));
            for (_, name, status) in &latest {
                prop_assert!(status.is_done(), "{name} {status}");
                let required = p.required_jobs.as_ref().is_none_or(|l| l.contains(name));
                if required || name == "radicle-push" {
                    prop_assert_eq!(*status, Success, "{}", name);
                }
            }
            prop_assert!(runs
                .iter()
                .filter(|r| r.event == "push")
                .all(|r| r.status.is_none_or(|s| s.is_done())));
            prop_assert_eq!(out.sync_status, Some(Success));
            prop_assert!(out.failed_jobs.is_empty());
        }
        if out.kind == VerdictKind::Red {
            prop_assert!(!out.failed_jobs.is_empty());
            let mut sorted = out.failed_jobs.clone();
            sorted.sort();
            prop_assert_eq!(&sorted, &out.failed_jobs);
        }
        prop_assert!(!out.detail.is_empty() && !out.detail.contains('\n'));
    }

    #[test]
    fn all_skipped_is_never_green(
        names in proptest::collection::vec(
            prop_oneof![Just("build"), Just("test"), Just("radicle-push")], 0..5),
        run_status in proptest::option::of(any_status()),
        p in any_policy(),
        now in 0i64..2_000_000,
    ) {
        let runs = vec![CiRun {
            id: 1,
            number: 1,
            event: "push".into(),
            status: run_status,
            workflow: None,
            url: None,
            git_ref: None,
            jobs: names.iter().map(|n| job(n, Skipped)).collect(),
        }];
        prop_assert_ne!(verdict(&runs, &p, Some(0), now).kind, VerdictKind::Green);
    }

    #[test]
    fn only_dispatch_runs_are_never_decided(
        runs in any_runs(),
        p in any_policy(),
        now in 0i64..2_000_000,
    ) {
        let runs: Vec<CiRun> = runs.into_iter().filter(|r| r.event != "push").collect();
        let k = verdict(&runs, &p, Some(0), now).kind;
        prop_assert!(k == VerdictKind::Pending || k == VerdictKind::NoRun);
    }
}
