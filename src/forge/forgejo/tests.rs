//! Tests of the Forgejo client's pure parts: version parsing, path choice, time parsing, wire
//! decoding, task grouping and error text.

use super::http::server_message;
use super::runs::{group_tasks, jobs_from_tasks};
use super::*;
use crate::ci::JobStatus;

fn v(s: &str) -> Option<(u32, u32, u32)> {
    ForgejoVersion::parse(s).map(|v| (v.major, v.minor, v.patch))
}

#[test]
fn parses_versions() {
    assert_eq!(v("11.0.1+gitea-1.22.0"), Some((11, 0, 1)));
    assert_eq!(v("16.0.0-dev-123-gabcdef+gitea-1.22.0"), Some((16, 0, 0)));
    assert_eq!(v("v15.2"), Some((15, 2, 0)));
    assert_eq!(v("8"), Some((8, 0, 0)));
    assert_eq!(v(" 12.0.3 "), Some((12, 0, 3)));
    assert_eq!(v("dev"), None);
    assert_eq!(v(""), None);
}

#[test]
fn picks_api_paths() {
    let p = |s: &str| ApiPath::for_version(ForgejoVersion::parse(s).unwrap());
    assert_eq!(p("7.0.5"), None);
    assert_eq!(p("1.22.0"), None);
    assert_eq!(p("8.0.0"), Some(ApiPath::TasksOnly));
    assert_eq!(p("11.0.1"), Some(ApiPath::TasksOnly));
    assert_eq!(p("12.0.0"), Some(ApiPath::RunsAndTasks));
    assert_eq!(p("15.0.3"), Some(ApiPath::RunsAndTasks));
    assert_eq!(p("16.0.0"), Some(ApiPath::RunsAndJobs));
    assert_eq!(p("17.1.0"), Some(ApiPath::RunsAndJobs));
}

#[test]
fn epoch_times_are_unset() {
    assert_eq!(parse_time_ms(Some("1970-01-01T00:00:00Z")), None);
    assert_eq!(parse_time_ms(Some("1970-01-01T02:00:00+02:00")), None);
    assert_eq!(parse_time_ms(None), None);
    assert_eq!(parse_time_ms(Some("garbage")), None);
    assert_eq!(
        parse_time_ms(Some("2026-07-01T12:00:05+02:00")),
        parse_time_ms(Some("2026-07-01T10:00:05Z"))
    );
    assert_eq!(parse_time_ms(Some("1970-01-01T00:00:01Z")), Some(1000));
}

#[test]
fn decodes_reference_shapes_leniently() {
    let run: wire::ActionRun = serde_json::from_str(
        r#"{"id":894,"repository":{"id":63,"...":"..."},"trigger_user":{"id":2},"ScheduleID":7,
                "commit_sha":"97f29ee599c373c729132a5c46a046978311e0ee","index_in_repo":3,
                "event":"push","status":"running","stopped":"1970-01-01T00:00:00Z"}"#,
    )
    .unwrap();
    assert_eq!(run.schedule_id, 7);
    assert_eq!(run.duration, None);
    assert_eq!(parse_time_ms(run.stopped.as_deref()), None);
    let jobs: Vec<wire::ActionRunJob> = serde_json::from_str(
        r#"[{"id":196,"run_id":793,"attempt":null,"name":"job2","needs":null,"runs_on":null,"task_id":0,"status":"waiting"}]"#,
    )
    .unwrap();
    assert_eq!(jobs[0].needs, None);
    assert_eq!(jobs[0].attempt, None);
    let tasks: wire::ActionTaskResponse =
        serde_json::from_str(r#"{"workflow_runs":null,"total_count":0}"#).unwrap();
    assert!(tasks.workflow_runs.is_none());
}

#[test]
fn tasks_become_jobs_with_attempt_counts() {
    let t = |id: i64, run: i64, name: &str, status: &str| wire::ActionTask {
        id,
        name: name.into(),
        run_number: run,
        status: status.into(),
        ..Default::default()
    };
    let tasks = [
        t(9, 4, "build", "success"),
        t(8, 4, "radicle-push", "running"),
        t(5, 4, "build", "failure"),
        t(3, 2, "build", "success"),
    ];
    let groups = group_tasks(&tasks);
    let jobs = jobs_from_tasks(&groups[&4]);
    assert_eq!(jobs.len(), 2);
    assert_eq!(
        (jobs[0].name.as_str(), jobs[0].status, jobs[0].attempt),
        ("build", JobStatus::Success, 2)
    );
    assert_eq!(jobs[1].attempt, 1);
    assert_eq!(jobs_from_tasks(&groups[&2]).len(), 1);
}

#[test]
fn encodes_segments_and_messages() {
    assert_eq!(encode("my repo/x"), "my%20repo%2Fx");
    assert_eq!(encode("a-b_c.d~"), "a-b_c.d~");
    assert_eq!(
        server_message(r#"{"message":"unknown status: foo","url":"x"}"#).as_deref(),
        Some("unknown status: foo")
    );
    assert_eq!(
        server_message("<html>\n bad </html>").as_deref(),
        Some("<html> bad </html>")
    );
    assert_eq!(server_message(""), None);
}

#[test]
fn rejects_short_shas_and_bad_urls() {
    assert!(check_sha("abc123").unwrap_err().is_blocking());
    assert!(check_sha(&"a".repeat(40)).is_ok());
    let retry = RetryPolicy {
        initial: Duration::from_millis(1),
        max: Duration::from_millis(1),
        multiplier: 2.0,
        max_retries: 0,
    };
    assert!(ForgejoForge::new("ftp://x", "o", None, Duration::from_secs(1), retry).is_err());
    assert!(ForgejoForge::new("not a url", "o", None, Duration::from_secs(1), retry).is_err());
    let bad = Secret::new("tok\nSECRET".into());
    let err = ForgejoForge::new(
        "http://127.0.0.1:1",
        "o",
        Some(bad),
        Duration::from_secs(1),
        retry,
    )
    .unwrap_err();
    assert!(!err.to_string().contains("SECRET"), "{err}");
    let f = ForgejoForge::new(
        "http://127.0.0.1:1/",
        "o",
        Some(Secret::new("tok-SECRET-4b1d".into())),
        Duration::from_secs(1),
        retry,
    )
    .unwrap();
    let dbg = format!("{f:?}");
    assert!(!dbg.contains("tok-SECRET-4b1d"), "{dbg}");
    assert!(dbg.contains("http://127.0.0.1:1/api/v1"), "{dbg}");
}

#[test]
fn a_token_echoed_across_the_cut_of_a_server_message_is_redacted_whole() {
    let retry = RetryPolicy {
        initial: Duration::from_millis(1),
        max: Duration::from_millis(1),
        multiplier: 2.0,
        max_retries: 0,
    };
    let token = "0123456789abcdef0123456789abcdef";
    let f = ForgejoForge::new(
        "http://127.0.0.1:1/",
        "o",
        Some(Secret::new(token.into())),
        Duration::from_secs(1),
        retry,
    )
    .unwrap();
    // The token starts 190 characters in: the message is cut at 200.
    let body = format!(r#"{{"message":"{} {token} forbidden"}}"#, "x".repeat(189));
    let target = super::http::Target {
        repo: Some("o/r"),
        missing_ok: false,
        needs: None,
    };
    let err = f.classify(403, "/repos/o/r/actions/runs", &body, target);
    let text = err.to_string();
    assert!(!text.contains(&token[..8]), "{text}");
    assert!(text.contains("[redacted]"), "{text}");
}

#[test]
fn development_builds_and_dev_versions_try_the_newest_path() {
    let dev = ForgejoVersion::parse("development").unwrap();
    assert!(dev.development);
    assert_eq!(dev.to_string(), "development");
    assert_eq!(ApiPath::for_version(dev), Some(ApiPath::RunsAndJobs));
    let p = |s: &str| ApiPath::for_version(ForgejoVersion::parse(s).unwrap());
    assert_eq!(
        p("16.0.0-dev-45-c6a1d64dc1+gitea-1.22.0"),
        Some(ApiPath::RunsAndJobs)
    );
    assert_eq!(ApiPath::RunsAndJobs.fallback(), Some(ApiPath::RunsAndTasks));
    assert_eq!(ApiPath::RunsAndTasks.fallback(), Some(ApiPath::TasksOnly));
    assert_eq!(ApiPath::TasksOnly.fallback(), None);
}

#[test]
fn a_cron_run_claiming_push_is_not_a_push_run() {
    let r = |event: &str, trigger: &str, schedule: i64| wire::ActionRun {
        event: event.into(),
        trigger_event: trigger.into(),
        schedule_id: schedule,
        ..Default::default()
    };
    assert!(super::runs::is_push(&r("push", "push", 0)));
    assert!(!super::runs::is_push(&r("push", "schedule", 7)));
    assert!(
        !super::runs::is_push(&r("push", "push", 7)),
        "a schedule id is never a push"
    );
    assert!(!super::runs::is_push(&r("", "workflow_dispatch", 0)));
    assert!(
        super::runs::is_push(&r("push", "", 0)),
        "stored before trigger_event existed"
    );
}

#[test]
fn commit_statuses_become_jobs() {
    use super::runs::{merge_statuses, status_jobs};
    let st = |ctx: &str, state: &str, desc: &str, url: &str| wire::CommitStatus {
        status: state.into(),
        description: desc.into(),
        context: ctx.into(),
        target_url: url.into(),
        ..Default::default()
    };
    let statuses = [
        st(
            "CI / build (push)",
            "failure",
            "Has been cancelled",
            "/o/r/actions/runs/4/jobs/0",
        ),
        st(
            "CI / a / b (push)",
            "success",
            "Has been skipped",
            "/o/r/actions/runs/4/jobs/1",
        ),
        st(
            "/ test (push)",
            "pending",
            "Blocked by required conditions",
            "/o/r/actions/runs/4/jobs/2",
        ),
        st(
            "CI / lint (pull_request)",
            "failure",
            "Failing after 1s",
            "/o/r/actions/runs/5/jobs/0",
        ),
        st("external", "failure", "x", "https://ci.example/1"),
    ];
    let jobs = status_jobs(&statuses);
    assert_eq!(jobs.len(), 3);
    let mut runs = vec![CiRun {
        id: 4,
        number: 4,
        event: "push".into(),
        status: None,
        workflow: Some("ci.yml".into()),
        url: None,
        git_ref: None,
        jobs: vec![crate::ci::CiJob {
            name: "a / b".into(),
            status: JobStatus::Skipped,
            attempt: 1,
            id: None,
            past_limit: false,
        }],
    }];
    merge_statuses(&mut runs, &jobs, true);
    let got: Vec<(&str, JobStatus)> = runs[0]
        .jobs
        .iter()
        .map(|j| (j.name.as_str(), j.status))
        .collect();
    assert_eq!(
        got,
        [
            ("a / b", JobStatus::Skipped),
            ("build", JobStatus::Cancelled),
            ("test", JobStatus::Blocked)
        ]
    );
    assert_eq!(runs[0].status, Some(JobStatus::Cancelled));
    assert_eq!(
        super::runs::aggregate(&[JobStatus::Failure, JobStatus::Running]),
        JobStatus::Failure
    );
}

/// Forgejo has no rerun: through the trait (as the supervisor asks it), a restart falls back to
/// a new push; a branch whose commit orch does not know cancels nothing (no request).
#[test]
fn forgejo_answers_no_rerun_and_cancels_nothing_without_a_commit() {
    use crate::forge::{AnyForge, Forge};
    let retry = RetryPolicy {
        initial: Duration::from_millis(1),
        max: Duration::from_millis(1),
        multiplier: 2.0,
        max_retries: 0,
    };
    let forge = AnyForge::Forgejo(
        ForgejoForge::new(
            "http://127.0.0.1:1/",
            "o",
            None,
            Duration::from_secs(1),
            retry,
        )
        .unwrap(),
    );
    assert!(
        forge
            .rerun("core", "refs/heads/orch/w", &"a".repeat(40))
            .is_none()
    );
    // Without the commit orch pushed, Forgejo (which lists runs by commit) is not asked.
    let refs = vec![crate::forge::Abandoned {
        repo: "core".into(),
        branch: "orch/w".into(),
        sha: None,
    }];
    assert_eq!(
        forge.cancel_runs_of_refs(&refs, "let go").unwrap(),
        Vec::<String>::new()
    );
}
