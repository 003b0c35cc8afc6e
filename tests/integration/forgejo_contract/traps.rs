//! The traps a real Forgejo sets (appendix of `shared/reference/forgejo-actions-api.md`,
//! D1–D8), each against the corrected fake on every version it applies to, the request
//! economy they keep, and a property test over random scenarios built by the fake's rules.

use super::*;
use proptest::prelude::*;

per_version!(
    cron_run_claiming_push_does_not_count,
    same_job_name_in_two_workflows_is_two_jobs,
    required_job_waiting_without_a_task_is_not_green,
    sync_job_waiting_for_a_runner_is_pending_not_sync_not_done,
    run_cancelled_before_pickup_is_red,
    runner_evaluated_if_skip_is_sync_not_done,
    rerun_queued_before_the_first_poll_is_pending,
);

/// D1: a push to the default branch re-registers cron schedules with the pushed SHA and
/// event `push`; their runs list under the SHA as `event: "push"`, `trigger_event:
/// "schedule"`, a schedule id. Neither a failing nightly nor its skipped sync job counts.
async fn cron_run_claiming_push_does_not_count(version: &str) {
    let env = Env::new(version).await;
    env.fake.add_run(
        REPO,
        SHA,
        "push",
        &[("build", "success"), ("radicle-push", "success")],
    );
    // Newer than the push run, same workflow and another one.
    env.fake.add_run(
        REPO,
        SHA,
        "schedule",
        &[("build", "failure"), ("radicle-push", "skipped")],
    );
    env.fake.add_workflow_run(
        REPO,
        SHA,
        "schedule",
        "nightly.yml",
        &[("build", "failure")],
    );
    let (v, runs, n) = env.poll().await;
    assert_eq!(v.kind, VerdictKind::Green, "{v:?}");
    assert_eq!(
        runs.iter().filter(|r| r.event == "push").count(),
        1,
        "{runs:?}"
    );
    // Nothing is fetched for the cron runs (no /jobs on 16).
    assert_eq!(n, PROBE + cost(env.path, 1, 1));
    if env.path == ApiPath::RunsAndJobs {
        // `orch ci logs` never hands out a cron run's log as the commit's.
        let cron = runs.iter().find(|r| r.event == "schedule").unwrap().id;
        env.fake.set_log(cron, "build", "nightly failure\n");
        let push = runs.iter().find(|r| r.event == "push").unwrap().id;
        env.fake.set_log(push, "build", "push build ok\n");
        let log = env.forge().job_log(&env.repo, SHA, "build").await.unwrap();
        assert_eq!(log.as_deref(), Some("push build ok\n"));
    }
    env.assert_counts_agree().await;
    if env.path != ApiPath::TasksOnly {
        assert!(
            runs.iter().filter(|r| r.event == "schedule").count() == 2,
            "{runs:?}"
        );
        // What the server says, verbatim: the cron runs claim push.
        let list = env
            .server_json(&format!("actions/runs?head_sha={SHA}"))
            .await;
        let crons: Vec<&serde_json::Value> = list["workflow_runs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["trigger_event"] == "schedule")
            .collect();
        assert_eq!(crons.len(), 2);
        assert!(
            crons
                .iter()
                .all(|r| r["event"] == "push" && r["ScheduleID"].as_i64() > Some(0))
        );
    }

    // Cron runs alone: no push run, so pending and then no_run; never decided.
    let env = Env::new(version).await;
    env.fake.add_run(
        REPO,
        SHA,
        "schedule",
        &[("build", "success"), ("radicle-push", "success")],
    );
    assert_eq!(env.poll().await.0.kind, VerdictKind::Pending);
    let later = env.pushed_ms + START_TIMEOUT.as_millis() as i64;
    assert_eq!(env.poll_at(later).await.0.kind, VerdictKind::NoRun);
}

/// D3: jobs are keyed by run (workflow × name): release.yml's newer green `build` does not
/// hide ci.yml's failed `build`.
async fn same_job_name_in_two_workflows_is_two_jobs(version: &str) {
    let env = Env::new(version).await;
    env.fake.add_workflow_run(
        REPO,
        SHA,
        "push",
        "ci.yml",
        &[("build", "failure"), ("radicle-push", "skipped")],
    );
    env.fake
        .add_workflow_run(REPO, SHA, "push", "release.yml", &[("build", "success")]);
    let (v, _, _) = env.poll().await;
    assert_eq!(v.kind, VerdictKind::Red, "{v:?}");
    assert_eq!(v.failed_jobs, vec!["build"]);
    env.assert_counts_agree().await;
}

/// D4: a required job no runner took has no task; it must hold green back on every version
/// (8–11: its commit status; 12–15: the run status; 16: `/jobs`).
async fn required_job_waiting_without_a_task_is_not_green(version: &str) {
    let env = Env::new(version).await;
    let run = env.fake.add_run(
        REPO,
        SHA,
        "push",
        &[
            ("build", "success"),
            ("test", "waiting"),
            ("radicle-push", "success"),
        ],
    );
    let later = env.pushed_ms + 10 * START_TIMEOUT.as_millis() as i64;
    let (v, _, n) = env.poll_at(later).await;
    assert_eq!(v.kind, VerdictKind::Pending, "{v:?}");
    assert_eq!(n, PROBE + cost(env.path, 1, 1));
    env.fake.set_job(run, "test", "running");
    assert_eq!(env.poll().await.0.kind, VerdictKind::Running);
    env.fake.set_job(run, "test", "success");
    let (v, _, n) = env.poll().await;
    assert_eq!(v.kind, VerdictKind::Green, "{v:?}");
    assert_eq!(n, cost(env.path, 1, 1));
}

/// D4: the sync job waiting for an offline runner, long past start_timeout, is pending (a
/// new commit would not help), not sync_not_done.
async fn sync_job_waiting_for_a_runner_is_pending_not_sync_not_done(version: &str) {
    let env = Env::new(version).await;
    env.fake.add_run(
        REPO,
        SHA,
        "push",
        &[("build", "success"), ("radicle-push", "waiting")],
    );
    let later = env.pushed_ms + 10 * START_TIMEOUT.as_millis() as i64;
    let (v, _, _) = env.poll_at(later).await;
    assert_eq!(v.kind, VerdictKind::Pending, "{v:?}");
    assert!(v.detail.contains("radicle-push"), "{v:?}");
}

/// D4/D9: a run cancelled before any runner took its jobs (e.g. by a newer push to the same
/// branch) has no task at all; it is red, not sync_not_done.
async fn run_cancelled_before_pickup_is_red(version: &str) {
    let env = Env::new(version).await;
    let run = env.fake.add_run(
        REPO,
        SHA,
        "push",
        &[("build", "waiting"), ("radicle-push", "blocked")],
    );
    env.fake.set_needs(run, "radicle-push", &["build"]);
    env.fake.cancel_run(run);
    assert_eq!(env.fake.task_count(REPO), 0);
    let (v, _, n) = env.poll().await;
    assert_eq!(v.kind, VerdictKind::Red, "{v:?}");
    assert_eq!(v.failed_jobs, vec!["build", "radicle-push"]);
    // 12–15: the run says cancelled, no task says why: one page of commit statuses does.
    let extra = u64::from(env.path == ApiPath::RunsAndTasks);
    assert_eq!(n, PROBE + cost(env.path, 1, 1) + extra);
    env.assert_counts_agree().await;
}

/// D6c: a sync job whose `if:` is false: before v16 the runner evaluates it (a task
/// `skipped`), from v16 the server does (no task, `/jobs` says skipped).
async fn runner_evaluated_if_skip_is_sync_not_done(version: &str) {
    let env = Env::new(version).await;
    let run = env.fake.add_run(
        REPO,
        SHA,
        "push",
        &[("build", "success"), ("radicle-push", "waiting")],
    );
    env.fake.runner_skip(run, "radicle-push");
    let tasks = if env.fake.major() >= 16 { 1 } else { 2 };
    assert_eq!(env.fake.task_count(REPO), tasks);
    let (v, _, _) = env.poll().await;
    assert_eq!(v.kind, VerdictKind::SyncNotDone, "{v:?}");
    assert_eq!(v.sync_status, Some(JobStatus::Skipped));
}

/// D2: a rerun queued before orch first looks: the failed task is still the job's newest.
async fn rerun_queued_before_the_first_poll_is_pending(version: &str) {
    let env = Env::new(version).await;
    let run = env.fake.add_run(
        REPO,
        SHA,
        "push",
        &[("build", "failure"), ("radicle-push", "skipped")],
    );
    env.fake.rerun_job(run, "build");
    env.fake.rerun_job(run, "radicle-push");
    let (v, _, _) = env.poll().await;
    assert_eq!(v.kind, VerdictKind::Pending, "{v:?}");
    assert!(v.failed_jobs.is_empty());
}

// ---- single versions ------------------------------------------------------------------------

/// D5: a dev build reports the next major before its routes exist. The missing route
/// answers a plain-text 404: fall back one path, once, and remember it.
#[tokio::test]
async fn dev_builds_fall_back_one_path_once() {
    for (version, path, first) in [
        // probe, /runs, /jobs (missing), then /runs + /tasks
        (
            "16.0.0-dev-45-c6a1d64dc1+gitea-1.22.0",
            ApiPath::RunsAndTasks,
            5,
        ),
        // probe, /runs (missing), then /tasks + statuses
        (
            "12.0.0-dev-3-0123456789+gitea-1.22.0",
            ApiPath::TasksOnly,
            4,
        ),
        // every route: runs + jobs
        ("development", ApiPath::RunsAndJobs, 3),
    ] {
        let env = Env::new(version).await;
        let run = env.fake.add_run(
            REPO,
            SHA,
            "push",
            &[("build", "running"), ("radicle-push", "waiting")],
        );
        let (v, _, n) = env.poll().await;
        assert_eq!(v.kind, VerdictKind::Running, "{version}: {v:?}");
        assert_eq!(n, first, "{version}: {:#?}", env.fake.hit_paths());
        assert_eq!(env.forge().api_path().await.unwrap(), path, "{version}");
        assert_eq!(
            env.poll().await.2,
            cost(path, 1, 1),
            "{version}: remembered"
        );
        env.fake.set_job(run, "build", "success");
        env.fake.set_job(run, "radicle-push", "success");
        assert_eq!(env.poll().await.0.kind, VerdictKind::Green, "{version}");
        // Logs only where the route exists.
        assert_eq!(
            env.forge().job_log(&env.repo, SHA, "build").await.unwrap(),
            None
        );
    }
}

/// D5: a route missing on the tasks path is said to be a missing route, not a missing
/// repository.
#[tokio::test]
async fn a_missing_route_is_not_reported_as_a_missing_repository() {
    let env = Env::new(V11).await;
    env.fake.fail_always(
        "/actions/tasks",
        Fault::StatusBody(404, "404 page not found\n".into()),
    );
    let (err, _) = env.poll_err().await;
    let text = err.to_string();
    assert!(text.contains("no API route"), "{text}");
    assert!(
        !text.contains("repository orch-test/alpha not found"),
        "{text}"
    );
}

/// D8: an uppercase SHA is looked up as Forgejo stores it (lowercase).
#[tokio::test]
async fn an_uppercase_sha_matches() {
    for version in [V11, V15, V16] {
        let env = Env::new(version).await;
        env.fake
            .add_run(REPO, SHA, "push", &[("radicle-push", "success")]);
        let (v, _) = env
            .follower
            .poll(&env.repo, &SHA.to_uppercase(), None, env.fake.now_ms())
            .await
            .unwrap();
        assert_eq!(v.kind, VerdictKind::Green, "{version}: {v:?}");
    }
}

/// D6f: `/actions/runs` without `page` has no LIMIT: the push run is found behind 55 newer
/// dispatch runs of the same SHA in one request.
#[tokio::test]
async fn runs_without_page_return_every_row() {
    let env = Env::new(V15).await;
    env.fake
        .add_run(REPO, SHA, "push", &[("radicle-push", "success")]);
    for _ in 0..55 {
        env.fake
            .add_run(REPO, SHA, "workflow_dispatch", &[("build", "success")]);
    }
    let (v, runs, n) = env.poll().await;
    assert_eq!(v.kind, VerdictKind::Green, "{v:?}");
    assert_eq!(runs.len(), 56);
    // Dispatch runs show `event: ""` on the wire; orch names them by their trigger.
    assert!(runs.iter().any(|r| r.event == "workflow_dispatch"));
    // One /runs request; the push run's task is the oldest, on /tasks page 2.
    assert_eq!(n, PROBE + 1 + 2, "{:#?}", env.fake.hit_paths());
}

/// D6g: commit statuses are deduplicated on the state only before v15 (a started job keeps
/// "Waiting to run"), on state and description from v15; orch reads running either way.
#[tokio::test]
async fn status_dedupe_follows_the_version() {
    for (version, description) in [(V11, "Waiting to run"), (V15, "Has started running")] {
        let env = Env::new(version).await;
        let run = env.fake.add_run(
            REPO,
            SHA,
            "push",
            &[("build", "waiting"), ("radicle-push", "blocked")],
        );
        env.fake.set_job(run, "build", "running");
        let v = env.server_json(&format!("commits/{SHA}/status")).await;
        let build = v["statuses"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["context"] == "ci.yml / build (push)")
            .unwrap()
            .clone();
        assert_eq!(build["description"], description, "{version}");
        env.fake.clear_hits();
        let (verdict, runs, _) = env.poll().await;
        assert_eq!(verdict.kind, VerdictKind::Running, "{version}");
        let job = runs[0].jobs.iter().find(|j| j.name == "build").unwrap();
        assert_eq!(job.status, JobStatus::Running, "{version}");
    }
}

/// The economy the issue asks for on Forgejo 15: a green verdict whose tasks sit on the
/// second page of `/actions/tasks` costs at most 3 requests after the version probe.
#[tokio::test]
async fn green_with_tasks_on_the_second_page_costs_three() {
    let mut env = Env::new(V15).await;
    env.fake.add_noise(REPO, 10);
    env.fake.advance(Duration::from_secs(600));
    env.pushed_ms = env.fake.now_ms();
    env.fake.add_run(
        REPO,
        SHA,
        "push",
        &[("build", "success"), ("radicle-push", "success")],
    );
    env.fake.add_noise(REPO, 55);
    let (v, _, n) = env.poll().await;
    assert_eq!(v.kind, VerdictKind::Green, "{v:?}");
    assert_eq!(n, PROBE + 3, "{:#?}", env.fake.hit_paths());
    assert_eq!(env.poll().await.2, 0);
}

// ---- property -------------------------------------------------------------------------------

#[derive(Debug, Clone)]
enum Op {
    Set(&'static str),
    RunnerSkip,
    Rerun,
    CancelRun,
}

#[derive(Debug, Clone)]
struct RunPlan {
    trigger: &'static str,
    workflow: &'static str,
    jobs: Vec<(&'static str, &'static str)>,
    ops: Vec<(usize, Op)>,
}

fn any_run() -> impl Strategy<Value = RunPlan> {
    let names = proptest::sample::subsequence(vec!["build", "test", "radicle-push"], 1..=3);
    let start = prop_oneof![
        Just("waiting"),
        Just("blocked"),
        Just("running"),
        Just("success"),
        Just("failure"),
        Just("skipped"),
    ];
    let op = prop_oneof![
        Just(Op::Set("running")),
        Just(Op::Set("success")),
        Just(Op::Set("success")),
        Just(Op::Set("failure")),
        Just(Op::Set("cancelled")),
        Just(Op::Set("skipped")),
        Just(Op::RunnerSkip),
        Just(Op::Rerun),
        Just(Op::CancelRun),
    ];
    (
        prop_oneof![
            Just("push"),
            Just("push"),
            Just("schedule"),
            Just("workflow_dispatch")
        ],
        prop_oneof![Just("ci.yml"), Just("release.yml")],
        names,
        proptest::collection::vec(start, 3),
        proptest::collection::vec((0usize..3, op), 0..6),
    )
        .prop_map(|(trigger, workflow, names, starts, ops)| RunPlan {
            trigger,
            workflow,
            jobs: names.into_iter().zip(starts).collect(),
            ops,
        })
}

/// Skips a job that no runner took as the server would: without a task only when another
/// job of the run failed, was cancelled or skipped (its `needs`; from v16 also a false
/// `if:`), else by its `if:` ([`FakeForgejo::runner_skip`]: a `skipped` task before v16).
/// Returns the needs it gave a job the server skipped (those that did not succeed).
fn skip<'a>(fake: &FakeForgejo, run: i64, job: &str, jobs: &[(&'a str, &str)]) -> Vec<&'a str> {
    let needs: Vec<&str> = jobs
        .iter()
        .filter(|(other, _)| {
            *other != job
                && matches!(
                    fake.job_status(run, other).as_str(),
                    "failure" | "cancelled" | "skipped"
                )
        })
        .map(|(other, _)| *other)
        .collect();
    if needs.is_empty() {
        fake.runner_skip(run, job);
    } else {
        fake.set_needs(run, job, &needs);
        fake.set_job(run, job, "skipped");
    }
    needs
}

/// Builds the scenario on the fake by its rules: a finished job changes only through a
/// rerun, a job is skipped by its `if:` only before it started, by the server only when a
/// need did not succeed.
fn build(fake: &FakeForgejo, plans: &[RunPlan]) {
    let mut seen = std::collections::BTreeSet::new();
    for p in plans {
        // One push run per workflow: two would be attempts of nothing (different refs).
        if p.trigger == "push" && !seen.insert(p.workflow) {
            continue;
        }
        let start: Vec<(&str, &str)> = p
            .jobs
            .iter()
            .map(|(n, s)| (*n, if *s == "skipped" { "waiting" } else { *s }))
            .collect();
        let run = fake.add_workflow_run(REPO, SHA, p.trigger, p.workflow, &start);
        // job -> the jobs it needs (only those the server skipped it for are known).
        let mut needs: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
        for (n, s) in &p.jobs {
            if *s == "skipped" {
                needs.insert(n, skip(fake, run, n, &p.jobs));
            }
        }
        for (i, op) in &p.ops {
            let Some((job, _)) = p.jobs.get(*i % p.jobs.len()) else {
                continue;
            };
            let now = fake.job_status(run, job);
            let done = matches!(
                now.as_str(),
                "success" | "failure" | "cancelled" | "skipped"
            );
            match op {
                Op::Set("skipped") if matches!(now.as_str(), "waiting" | "blocked") => {
                    needs.insert(job, skip(fake, run, job, &p.jobs));
                }
                Op::Set(s) if !done => fake.set_job(run, job, s),
                Op::RunnerSkip if matches!(now.as_str(), "waiting" | "blocked") => {
                    fake.runner_skip(run, job)
                }
                Op::Rerun if done => {
                    // As Forgejo reruns a job: with every finished job that needs it (a job
                    // the server skipped because this one failed runs again too).
                    fake.rerun_job(run, job);
                    for (other, _) in &p.jobs {
                        let finished = matches!(
                            fake.job_status(run, other).as_str(),
                            "success" | "failure" | "cancelled" | "skipped"
                        );
                        if finished && needs.get(other).is_some_and(|n| n.contains(job)) {
                            fake.rerun_job(run, other);
                        }
                    }
                }
                Op::CancelRun => fake.cancel_run(run),
                _ => {}
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// For random runs, tasks and statuses built by the fake's rules, on every version:
    /// orch says green only if every job of every push run is `success` (so the sync job
    /// too, and it exists), red only if some job of a push run failed, was cancelled or
    /// skipped, and sync_not_done only if no job of a push run failed and the sync job was
    /// skipped, cancelled or is absent.
    #[test]
    fn no_verdict_the_server_contradicts(
        version in prop_oneof![Just(V8), Just(V11), Just(V12), Just(V15), Just(V16)],
        plans in proptest::collection::vec(any_run(), 1..4),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let (v, truth) = rt.block_on(async {
            let env = Env::new(version).await;
            build(&env.fake, &plans);
            let truth = env.fake.truth(REPO, SHA);
            let (v, _, _) = env.poll().await;
            (v, truth)
        });
        let push: Vec<&(String, String, String, String)> =
            truth.iter().filter(|(t, ..)| t == "push").collect();
        let bad = |s: &str| matches!(s, "failure" | "cancelled" | "skipped");
        match v.kind {
            VerdictKind::Green => {
                prop_assert!(push.iter().all(|(.., s)| s == "success"), "{v:?} {truth:?}");
                prop_assert!(push.iter().any(|(_, _, n, _)| n == "radicle-push"), "{v:?} {truth:?}");
            }
            VerdictKind::Red => {
                prop_assert!(push.iter().any(|(.., s)| bad(s)), "{v:?} {truth:?}");
            }
            VerdictKind::SyncNotDone => {
                prop_assert!(
                    !push.iter().any(|(_, _, n, s)| n != "radicle-push" && bad(s)),
                    "{v:?} {truth:?}"
                );
                let sync: Vec<&str> = push
                    .iter()
                    .filter(|(_, _, n, _)| n == "radicle-push")
                    .map(|(.., s)| s.as_str())
                    .collect();
                prop_assert!(
                    sync.is_empty() || sync.iter().any(|s| *s == "skipped" || *s == "cancelled"),
                    "{v:?} {truth:?}"
                );
            }
            _ => {}
        }
    }
}
