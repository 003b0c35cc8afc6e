//! `check_ci_then_escalate`'s `if_ci_stuck: restart_ci_and_wait`: CI still stuck at the
//! PUSHED_TO_CI timeout — no runner ever takes its jobs up, or it still runs after the
//! extension it had — is restarted once (Forgejo: an empty commit pushed to the worker's own
//! branch, its API having no rerun; the local forge: a new run), then the timeout escalates
//! (FAILED, a critical alert, the lock kept).

use crate::support::fake_forgejo::{FakeForgejo, OWNER, REPO, TOKEN};
use crate::support::{DEADLINE, ForgeSpec, Org, RepoSpec, Spec, git, poll_until};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The worker's events of `kind`.
fn events_of(org: &Org, id: &str, kind: &str) -> Vec<String> {
    org.events(id)
        .into_iter()
        .filter(|e| e.kind == kind)
        .map(|e| e.detail)
        .collect()
}

/// The alerts of `kind` in alerts.jsonl for the worker.
fn alerts_of(org: &Org, id: &str, kind: &str) -> Vec<serde_json::Value> {
    org.alerts(id)
        .into_iter()
        .filter(|a| a["kind"] == kind)
        .collect()
}

/// Restarted exactly once, then FAILED with the escalation's critical alert; the lock kept.
fn assert_restarted_once_then_escalated(org: &Org, id: &str) {
    let w = org.wait_milestone(id, "FAILED", DEADLINE);
    let restarts = events_of(org, id, "ci_restart");
    assert_eq!(restarts.len(), 1, "{restarts:?}\n{}", org.diag(id));
    let done = events_of(org, id, "ci_restart_done");
    assert_eq!(done.len(), 1, "{done:?}\n{}", org.diag(id));
    assert!(events_of(org, id, "ci_restart_failed").is_empty());
    let restarted = alerts_of(org, id, "ci_restarted");
    assert_eq!(restarted.len(), 1, "{restarted:#?}");
    assert_eq!(restarted[0]["severity"], "warning");
    let stuck = alerts_of(org, id, "ci_stuck");
    assert_eq!(stuck.len(), 1, "{stuck:#?}\n{}", org.diag(id));
    assert_eq!(stuck[0]["severity"], "critical");
    let reason = w.progress.end_reason.clone().unwrap_or_default();
    assert!(
        reason.contains("CI stuck") && reason.contains("after one restart"),
        "{reason}"
    );
    assert_eq!(org.locks_of(id), vec![REPO.to_string()]);
    org.wait_supervisor_gone(id);
}

/// The local forge: CI that runs on past the time it was given (its job gated, well within
/// its own 60 s limit) is extended once, then its run is cancelled and a new one started —
/// once — and the worker is FAILED when that one is stuck too.
#[test]
fn local_ci_running_on_is_restarted_once_with_a_new_run_then_escalated() {
    let mut spec = Spec::local("push_and_wait.sh")
        .ci(crate::support::Ci::Gated)
        .repo(RepoSpec::new(REPO))
        .timeout("PUSHED_TO_CI", "2s", "1s");
    spec.progress_window = Some("1s".into());
    let org = Org::new(spec);
    let id = org.spawn_detached(REPO, "push and wait");
    assert_restarted_once_then_escalated(&org, &id);
    let sha = org
        .worker(&id)
        .progress
        .tracked_sha
        .expect("a pushed commit");
    let ci = org.json(&["ci", "status", "--repo", REPO, "--sha", &sha, "--json"]);
    let runs = ci["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 2, "the first run and its restart: {ci:#}");
    let first = runs.iter().min_by_key(|r| r["id"].as_i64()).unwrap();
    assert_eq!(first["status"], "cancelled", "{ci:#}");
    org.release(&id);
}

/// A fake Forgejo with no runner: every new head of an `orch/*` branch of the bare origin
/// gets a push run whose jobs wait (and, as Forgejo does for a push to the same ref and
/// workflow, the previous head's unfinished run is cancelled:
/// `services/actions/workflows.go@v15.0.3 L236-255`, `CancelPreviousJobs` before).
struct NoRunner {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl NoRunner {
    fn start(fake: FakeForgejo, origin: std::path::PathBuf) -> NoRunner {
        fake.serve_git(REPO, &origin);
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut seen = BTreeSet::new();
            let mut last: Option<i64> = None;
            while !flag.load(Ordering::SeqCst) {
                let heads = git(
                    &origin,
                    &["for-each-ref", "--format=%(objectname)", "refs/heads/orch/"],
                );
                for sha in heads.lines() {
                    if seen.insert(sha.to_string()) {
                        if let Some(old) = last {
                            fake.cancel_run(old);
                        }
                        let run = fake.add_run(
                            REPO,
                            sha,
                            "push",
                            &[("test", "waiting"), ("radicle-push", "blocked")],
                        );
                        fake.set_needs(run, "radicle-push", &["test"]);
                        last = Some(run);
                    }
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        NoRunner {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for NoRunner {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Forgejo (16) with no runner: the run waits past the timeout; orch pushes one empty commit
/// (same tree, parent the tracked commit) to the worker's branch — no rerun request, which
/// Forgejo's API does not have — follows CI for it, and escalates when it waits too.
#[test]
fn forgejo_ci_with_no_runner_is_restarted_once_by_an_empty_commit_then_escalated() {
    let rt = runtime();
    let fake = rt.block_on(FakeForgejo::start("16.0.0+gitea-1.22.0"));
    fake.require_token(Some(TOKEN));
    let mut spec = Spec::local("push_and_wait.sh")
        .repo(RepoSpec::new(REPO))
        .timeout("PUSHED_TO_CI", "2s", "1s");
    spec.progress_window = Some("1s".into());
    spec.forge = on_fake(&fake);
    let org = Org::new(spec);
    let _ci = NoRunner::start(fake.clone(), org.origin_path(REPO));
    let id = org.spawn_detached(REPO, "push and wait");
    let pushed = poll_until(
        "the push is tracked",
        DEADLINE,
        || org.worker(&id).progress.tracked_sha.clone(),
        || org.diag(&id),
    );
    assert_restarted_once_then_escalated(&org, &id);
    let w = org.worker(&id);
    let origin = org.origin_path(REPO);
    let head = git(&origin, &["rev-parse", &w.branch]).trim().to_string();
    assert_eq!(
        w.progress.tracked_sha.as_deref(),
        Some(head.as_str()),
        "CI followed for the restart's commit"
    );
    assert_ne!(head, pushed);
    let parent = git(&origin, &["rev-parse", &format!("{head}^")]);
    assert_eq!(
        parent.trim(),
        pushed,
        "the empty commit is on the tracked one"
    );
    let trees = git(
        &origin,
        &[
            "rev-parse",
            &format!("{head}^{{tree}}"),
            &format!("{pushed}^{{tree}}"),
        ],
    );
    let trees: Vec<&str> = trees.lines().collect();
    assert_eq!(trees[0], trees[1], "the restart changes nothing");
    let subject = git(&origin, &["log", "-1", "--format=%s", &head]);
    assert!(subject.contains("restart CI"), "{subject}");
    // One restart commit, no rerun request.
    let commits = git(
        &origin,
        &["rev-list", "--count", &format!("{pushed}..{}", w.branch)],
    );
    assert_eq!(commits.trim(), "1");
    assert!(
        !fake.hit_paths().iter().any(|p| p.contains("rerun")),
        "{:#?}",
        fake.hit_paths()
    );
    org.release(&id);
}

/// An organisation on a fake Forgejo 16 (no CI of its own: the test adds runs), the worker
/// `push_and_wait.sh`, the deadlock check every second and PUSHED_TO_CI's warning (the
/// pending indicator's threshold) at 1 s.
fn forgejo_org(rt: &tokio::runtime::Runtime) -> (FakeForgejo, Org) {
    let fake = rt.block_on(FakeForgejo::start("16.0.0+gitea-1.22.0"));
    fake.require_token(Some(TOKEN));
    let mut spec = Spec::local("push_and_wait.sh")
        .repo(RepoSpec::new(REPO))
        .timeout("PUSHED_TO_CI", "10m", "1s")
        .contract_key("check_interval", "1s");
    spec.forge = on_fake(&fake);
    let org = Org::new(spec);
    fake.serve_git(REPO, &org.origin_path(REPO));
    (fake, org)
}

/// The organisation's forge: `fake`, with the test's token.
fn on_fake(fake: &FakeForgejo) -> ForgeSpec {
    ForgeSpec::Forgejo {
        url: fake.uri(),
        owner: OWNER.into(),
        token_env: "E2E_FORGEJO_TOKEN".into(),
        token: TOKEN.into(),
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

/// The worker as `status --json` shows it.
fn shown(org: &Org, id: &str) -> serde_json::Value {
    let status = org.json(&["status", "--json"]);
    status["workers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["worker_id"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("{id} in {status:#}"))
}

fn text_of(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A run pending forever fires `ci_status: stuck_in_pending` (alert, status, logs); once
/// jobs move, `status` and `logs` show CI's substates (`ci 1/3 jobs, running test`).
#[test]
fn a_run_pending_past_its_time_and_cis_substates_show_in_status_and_logs() {
    let rt = runtime();
    let (fake, org) = forgejo_org(&rt);
    let id = org.spawn_detached(REPO, "push and wait");
    let sha = poll_until(
        "the push is tracked",
        DEADLINE,
        || org.worker(&id).progress.tracked_sha.clone(),
        || org.diag(&id),
    );
    let run = fake.add_run(
        REPO,
        sha.as_str(),
        "push",
        &[
            ("lint", "waiting"),
            ("test", "waiting"),
            ("radicle-push", "blocked"),
        ],
    );
    let w = poll_until(
        "the pending indicator",
        DEADLINE,
        || {
            let w = shown(&org, &id);
            w["deadlock"]
                .as_array()?
                .iter()
                .any(|d| d == "ci_stuck_in_pending")
                .then_some(w)
        },
        || org.diag(&id),
    );
    assert_eq!(w["verdict"], "pending", "{w:#}");
    let alert = alerts_of(&org, &id, "deadlock_ci_waiting");
    assert_eq!(alert.len(), 1, "{alert:#?}");
    let table = text_of(&org.run(&["status"]));
    assert!(
        table.contains(&format!("{id}: deadlock indicators: ci_stuck_in_pending")),
        "{table}"
    );
    let logs = text_of(&org.run(&["logs", &id]));
    assert!(logs.contains("has been waiting"), "{logs}");

    fake.set_job(run, "lint", "success");
    fake.set_job(run, "test", "running");
    let w = poll_until(
        "CI's substates",
        DEADLINE,
        || {
            let w = shown(&org, &id);
            (w["ci_jobs"]["passed"] == 1).then_some(w)
        },
        || org.diag(&id),
    );
    assert_eq!(
        w["ci_jobs"],
        serde_json::json!({"passed": 1, "total": 3, "running": ["test"]}),
        "{w:#}"
    );
    assert_eq!(w["fix_attempts_max"], 5);
    let table = text_of(&org.run(&["status"]));
    let row = table
        .lines()
        .find(|l| l.starts_with(&id))
        .unwrap_or_else(|| panic!("{id} in\n{table}"));
    assert!(row.contains("running: ci 1/3 jobs, running test"), "{row}");
    let logs = text_of(&org.run(&["logs", &id]));
    assert!(logs.contains("ci 1/3 jobs, running test"), "{logs}");

    // Red: the fix attempt, n of max, in status and in the timeline.
    fake.set_job(run, "test", "failure");
    fake.set_job(run, "radicle-push", "skipped");
    org.wait_milestone(&id, "FIXING_CI", DEADLINE);
    let table = text_of(&org.run(&["status"]));
    let row = table
        .lines()
        .find(|l| l.starts_with(&id))
        .unwrap_or_else(|| panic!("{id} in\n{table}"));
    assert!(row.contains("FIXING_CI 1/5"), "{row}");
    let logs = text_of(&org.run(&["logs", &id]));
    assert!(logs.contains("(fix attempt 1/5)"), "{logs}");
    org.release(&id);
    let _ = org.run(&["cancel", &id, "--reason", "test over"]);
}

/// A forge that fails more than 3 times in a row fires `api_errors: >3` (alert, status, logs).
#[test]
fn more_than_three_forge_errors_in_a_row_show_as_a_deadlock_indicator() {
    let rt = runtime();
    let (fake, org) = forgejo_org(&rt);
    let id = org.spawn_detached(REPO, "push and wait");
    poll_until(
        "the push is tracked",
        DEADLINE,
        || org.worker(&id).progress.tracked_sha.clone(),
        || org.diag(&id),
    );
    fake.fail_always(
        "/actions/",
        crate::support::fake_forgejo::Fault::Status(401),
    );
    let w = poll_until(
        "the api_errors indicator",
        DEADLINE,
        || {
            let w = shown(&org, &id);
            w["deadlock"]
                .as_array()?
                .iter()
                .any(|d| d == "api_errors")
                .then_some(w)
        },
        || org.diag(&id),
    );
    assert_eq!(w["milestone"], "PUSHED_TO_CI", "{w:#}");
    let alert = alerts_of(&org, &id, "deadlock_api_errors");
    assert_eq!(alert.len(), 1, "{alert:#?}");
    assert!(
        alert[0]["message"]
            .as_str()
            .unwrap()
            .contains("forge requests failed in a row (more than 3)"),
        "{alert:#?}"
    );
    let logs = text_of(&org.run(&["logs", &id]));
    assert!(logs.contains("failed in a row"), "{logs}");
    // Each failed query is in the worker's history, what `/metrics` counts
    // (orch_forge_request_errors_total{kind="blocking"}).
    assert!(
        org.count_events(&id, "forge_error_blocking") >= 4,
        "{:?}",
        org.events(&id)
    );
    fake.clear_faults();
    org.release(&id);
    let _ = org.run(&["cancel", &id, "--reason", "test over"]);
}

/// The cascade's polls of an upstream's base branch count as forge request errors too: each
/// one the forge fails is in the history of the worker whose supervisor polled, named by the
/// upstream it was for (the watch's back-off is `cascade::tests`').
#[test]
fn a_failed_poll_of_an_upstreams_base_branch_is_in_the_workers_history() {
    let rt = runtime();
    let fake = rt.block_on(FakeForgejo::start("16.0.0+gitea-1.22.0"));
    fake.require_token(Some(TOKEN));
    let mut spec = Spec::local("push_and_wait.sh")
        .repo(RepoSpec::new("lib"))
        .repo(RepoSpec::new(REPO).deps(&["lib"]));
    spec.forge = on_fake(&fake);
    let org = Org::new(spec);
    fake.serve_git("lib", &org.origin_path("lib"));
    fake.serve_git(REPO, &org.origin_path(REPO));
    // Only the upstream's branch is refused (401: blocking, no retries to wait out).
    fake.fail_always(
        &format!("/repos/{OWNER}/lib/branches/"),
        crate::support::fake_forgejo::Fault::Status(401),
    );
    let id = org.spawn_detached(REPO, "push and wait");
    let failures = |org: &Org| {
        org.events(&id)
            .into_iter()
            .filter(|e| e.kind == "forge_error_blocking")
            .collect::<Vec<_>>()
    };
    let seen = poll_until(
        "two failed polls of lib's base branch in the worker's history",
        DEADLINE,
        || {
            let f = failures(&org);
            (f.len() >= 2).then_some(f)
        },
        || format!("{:#?}\n{}", org.events(&id), org.diag(&id)),
    );
    assert!(
        seen.iter()
            .all(|e| e.detail.contains("base branch CI of lib (main)")),
        "{seen:#?}"
    );
    let _ = org.run(&["cancel", &id, "--reason", "test over"]);
}

/// Kills what is left of the local forge's runners of `org` (a stopped runner never ends).
fn kill_runners(org: &Org) {
    let state = org.state.display().to_string();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains("__local-forge") && cmdline.contains(&state) {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}

/// Stops (SIGSTOP) every runner whose job wrote its pid under `marks` as `runner.<pid>`, until
/// `done`: a runner stuck with its job running. (A job cannot stop its runner itself where it
/// runs in a PID namespace of its own: its runner is not there.)
fn stop_runners_of_jobs(
    marks: std::path::PathBuf,
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut stopped = std::collections::BTreeSet::new();
        while !done.load(std::sync::atomic::Ordering::Relaxed) {
            for e in std::fs::read_dir(&marks).into_iter().flatten().flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if let Some(pid) = name.strip_prefix("runner.").and_then(|p| p.parse().ok())
                    && stopped.insert(pid)
                {
                    // SAFETY: kill(2) of one process by its pid.
                    unsafe {
                        libc::kill(pid, libc::SIGSTOP);
                    }
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    })
}

/// The local forge: a job still running past its own limit (its runner stuck) is restarted at the first PUSHED_TO_CI timeout, without the extension running
/// CI gets — once — and the worker is FAILED when the new run's runner is stuck too.
#[test]
fn local_job_past_its_own_limit_is_restarted_once_then_escalated() {
    let marks = tempfile::tempdir().unwrap();
    let mut spec = Spec::local("push_and_wait.sh")
        .repo(
            RepoSpec::new(REPO)
                .job(
                    crate::support::job(
                        "test",
                        &format!(
                            "{} touch {}/runner.$r; sleep 60",
                            crate::support::RUNNER_PID_SH,
                            marks.path().display()
                        ),
                    )
                    .timeout(Some("1s")),
                )
                .job(crate::support::job("radicle-push", "true").needs(&["test"])),
        )
        .timeout("PUSHED_TO_CI", "10s", "9s");
    spec.progress_window = Some("1s".into());
    let org = Org::new(spec);
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stopper = stop_runners_of_jobs(marks.path().to_path_buf(), done.clone());
    let id = org.spawn_detached(REPO, "push and wait");
    let w = org.wait_milestone(&id, "FAILED", DEADLINE);
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    stopper.join().unwrap();
    let shown_restart = alerts_of(&org, &id, "ci_restarted");
    kill_runners(&org);
    assert_eq!(
        shown_restart.len(),
        1,
        "{shown_restart:#?}\n{}",
        org.diag(&id)
    );
    assert!(
        shown_restart[0]["message"]
            .as_str()
            .unwrap()
            .contains("test running past its own time limit"),
        "{shown_restart:#?}"
    );
    assert!(
        alerts_of(&org, &id, "timeout_extended").is_empty(),
        "a stuck runner gets no extension"
    );
    assert_restarted_once_then_escalated(&org, &id);
    let sha = w.progress.tracked_sha.expect("a pushed commit");
    let ci = org.json(&["ci", "status", "--repo", REPO, "--sha", &sha, "--json"]);
    let runs = ci["runs"].as_array().expect("runs");
    assert_eq!(runs.len(), 2, "the first run and its restart: {ci:#}");
    let first = runs.iter().min_by_key(|r| r["id"].as_i64()).unwrap();
    assert_eq!(first["status"], "cancelled", "{ci:#}");
    org.release(&id);
}
