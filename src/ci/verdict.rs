//! The CI verdict for one pushed commit: a pure function of the runs the forge reports.
//!
//! No I/O and no clock: the caller passes `now_ms`. The rules (see [`verdict`]) decide
//! whether orch may call a task done (`green`), must send the worker back (`red`), must push
//! a new commit because the sync job did not run (`sync_not_done`), or has to keep polling.

use super::{CiJob, CiRun, JobStatus};
use crate::config::CiConfig;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// What the verdict needs from `ci:` in repos.yaml.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CiPolicy {
    /// The job that publishes the commit (e.g. `radicle-push`); it must succeed for green.
    pub sync_job: String,
    /// `None`: every job seen in the commit's push runs is required.
    pub required_jobs: Option<Vec<String>>,
    /// How long after the push a missing run (or, without run statuses, a missing sync job)
    /// is still merely pending.
    pub start_timeout: Duration,
}

impl From<&CiConfig> for CiPolicy {
    fn from(c: &CiConfig) -> Self {
        CiPolicy {
            sync_job: c.sync_job.clone(),
            required_jobs: c.required_jobs.clone(),
            start_timeout: c.start_timeout,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictKind {
    /// Nothing decided and nothing running yet (no run, or jobs not picked up).
    Pending,
    /// At least one relevant job (or the run) is running.
    Running,
    /// Every required job and the sync job succeeded.
    Green,
    /// A required job (or the sync job) failed, was cancelled, or was skipped.
    Red,
    /// The required jobs are fine but the sync job did not run (skipped, cancelled, missing).
    SyncNotDone,
    /// No push-triggered run appeared within `start_timeout` of the push.
    NoRun,
}

impl VerdictKind {
    pub fn as_str(self) -> &'static str {
        match self {
            VerdictKind::Pending => "pending",
            VerdictKind::Running => "running",
            VerdictKind::Green => "green",
            VerdictKind::Red => "red",
            VerdictKind::SyncNotDone => "sync_not_done",
            VerdictKind::NoRun => "no_run",
        }
    }

    /// The word [`as_str`](Self::as_str) gives; `None` for anything else.
    pub fn parse(word: &str) -> Option<VerdictKind> {
        [
            VerdictKind::Pending,
            VerdictKind::Running,
            VerdictKind::Green,
            VerdictKind::Red,
            VerdictKind::SyncNotDone,
            VerdictKind::NoRun,
        ]
        .into_iter()
        .find(|k| k.as_str() == word)
    }

    /// Green, red and sync_not_done never change for a given set of push runs; pending,
    /// running and no_run may (a late run can still appear).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            VerdictKind::Green | VerdictKind::Red | VerdictKind::SyncNotDone
        )
    }
}

impl std::fmt::Display for VerdictKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Verdict {
    pub kind: VerdictKind,
    /// Sorted. Failed or cancelled jobs by name; skipped required jobs as `"<name> (skipped)"`,
    /// required jobs absent from finished runs as `"<name> (missing)"`.
    pub failed_jobs: Vec<String>,
    /// The sync job's latest status, if the forge reported the job.
    pub sync_status: Option<JobStatus>,
    /// One line for humans.
    pub detail: String,
}

impl Verdict {
    fn new(kind: VerdictKind, sync_status: Option<JobStatus>, detail: String) -> Self {
        Verdict {
            kind,
            failed_jobs: Vec::new(),
            sync_status,
            detail,
        }
    }
}

const PUSH_AGAIN: &str = "push a new commit (e.g. an empty commit) to trigger a push run";

/// Decides the CI verdict of one commit from the runs it triggered.
///
/// - Only runs with `event == "push"` count; a `workflow_dispatch` (or any other) run on the
///   same SHA never does.
/// - Jobs are merged by name across the push runs. The latest attempt wins: the job of the
///   newest run (highest run id), then the highest attempt, then the highest job id.
/// - Required jobs are `policy.required_jobs`, or every job seen when that is `None`. The sync
///   job is judged separately even when it is listed as required.
/// - `red`: a required job or the sync job `failure`; a required job `cancelled` (the sync job
///   too when something else failed); a required job `skipped` (`"<name> (skipped)"`); a
///   required job missing although every push run reports a finished status
///   (`"<name> (missing)"`). A required job that is merely absent (no task yet) is pending.
/// - `sync_not_done`: no failure, and the sync job `skipped`/`cancelled` (once no other job is
///   still in flight), or missing after the other jobs finished: at once when every push run
///   reports a finished status, and on the tasks-only path (no run status) only once
///   `start_timeout` has passed since `pushed_ms`.
/// - `green`: every required job and the sync job `success`. All-skipped is never green.
/// - no push run: `pending` until `pushed_ms + start_timeout`, then `no_run`.
/// - otherwise `running` if a relevant job or a push run is running, else `pending`.
pub fn verdict(runs: &[CiRun], policy: &CiPolicy, pushed_ms: Option<i64>, now_ms: i64) -> Verdict {
    let sync = policy.sync_job.as_str();
    let timeout_ms = i64::try_from(policy.start_timeout.as_millis()).unwrap_or(i64::MAX);
    let timed_out = pushed_ms.is_some_and(|p| now_ms >= p.saturating_add(timeout_ms));
    let timeout_text = crate::duration::format(policy.start_timeout);

    let push_runs: Vec<&CiRun> = runs.iter().filter(|r| r.event == "push").collect();
    if push_runs.is_empty() {
        let ignored = runs.len();
        let ignored_text = if ignored > 0 {
            format!(" ({ignored} non-push run(s) on this commit do not count)")
        } else {
            String::new()
        };
        return if timed_out {
            Verdict::new(
                VerdictKind::NoRun,
                None,
                format!(
                    "no push-triggered run within {timeout_text} of the push{ignored_text}: check that the workflow runs on push, Actions are enabled and a runner is online"
                ),
            )
        } else {
            Verdict::new(
                VerdictKind::Pending,
                None,
                format!("waiting for a push-triggered run to start{ignored_text}"),
            )
        };
    }

    // Merge: name -> (ordering key, job).
    let mut merged: BTreeMap<&str, ((i64, u32, i64), &CiJob)> = BTreeMap::new();
    for run in &push_runs {
        for job in &run.jobs {
            let key = (run.id, job.attempt, job.id.unwrap_or(i64::MIN));
            match merged.get(job.name.as_str()) {
                Some((k, _)) if *k >= key => {}
                _ => {
                    merged.insert(job.name.as_str(), (key, job));
                }
            }
        }
    }
    let status_of = |name: &str| merged.get(name).map(|(_, j)| j.status);
    let sync_status = status_of(sync);

    let required: BTreeSet<&str> = match &policy.required_jobs {
        Some(list) => list.iter().map(String::as_str).collect(),
        None => merged.keys().copied().collect(),
    };
    let others: Vec<&str> = required.iter().copied().filter(|n| *n != sync).collect();

    // Run-level status, judged on the newest push run of each workflow (an older run of the
    // same workflow is superseded, like an older attempt): every such run reports a finished
    // status (runs path), some run is still going, or unknown (tasks-only path).
    let mut newest: BTreeMap<Option<&str>, &CiRun> = BTreeMap::new();
    for r in &push_runs {
        let slot = newest.entry(r.workflow.as_deref()).or_insert(r);
        if r.id > slot.id {
            *slot = r;
        }
    }
    let current: Vec<&CiRun> = newest.into_values().collect();
    let all_runs_done = current
        .iter()
        .all(|r| r.status.is_some_and(JobStatus::is_done));
    let any_run_status_unknown = current.iter().any(|r| r.status.is_none());
    let any_run_running = current.iter().any(|r| r.status == Some(JobStatus::Running));

    let mut failed: Vec<String> = Vec::new();
    let mut in_flight: Vec<String> = Vec::new(); // "name (status)" of required jobs not done
    for name in &others {
        match status_of(name) {
            Some(JobStatus::Success) => {}
            Some(JobStatus::Failure) | Some(JobStatus::Cancelled) => failed.push(name.to_string()),
            Some(JobStatus::Skipped) => failed.push(format!("{name} (skipped)")),
            Some(s) => in_flight.push(format!("{name} ({s})")),
            None if all_runs_done => failed.push(format!("{name} (missing)")),
            None => in_flight.push(format!("{name} (not started)")),
        }
    }
    match sync_status {
        Some(JobStatus::Failure) => failed.push(sync.to_string()),
        Some(JobStatus::Cancelled) if !failed.is_empty() => failed.push(sync.to_string()),
        _ => {}
    }
    let run_label = run_label(&push_runs);

    if !failed.is_empty() {
        failed.sort();
        let mut detail = format!("failed: {}{run_label}", failed.join(", "));
        if let Some(s @ (JobStatus::Skipped | JobStatus::Cancelled)) = sync_status
            && !failed.iter().any(|f| f == sync)
        {
            detail.push_str(&format!("; {sync} {s}"));
        }
        return Verdict {
            kind: VerdictKind::Red,
            failed_jobs: failed,
            sync_status,
            detail,
        };
    }

    let running_or_pending = |mut waiting: Vec<String>| {
        let any_job_running = merged
            .iter()
            .filter(|(n, _)| required.contains(*n) || **n == sync)
            .any(|(_, (_, j))| j.status == JobStatus::Running);
        let kind = if any_job_running || any_run_running {
            VerdictKind::Running
        } else {
            VerdictKind::Pending
        };
        if waiting.is_empty() {
            waiting.push("the run to finish".into());
        }
        Verdict::new(
            kind,
            sync_status,
            format!("waiting for {}{run_label}", waiting.join(", ")),
        )
    };

    match sync_status {
        Some(s @ (JobStatus::Skipped | JobStatus::Cancelled)) => {
            if in_flight.iter().any(|j| !j.ends_with("(not started)")) {
                // Something is still going and may yet fail: let it finish first.
                let mut waiting = in_flight;
                waiting.push(format!("({sync} {s})"));
                return running_or_pending(waiting);
            }
            Verdict::new(
                VerdictKind::SyncNotDone,
                sync_status,
                format!("{sync} {s}: {PUSH_AGAIN}"),
            )
        }
        Some(JobStatus::Success) => {
            if !in_flight.is_empty() {
                return running_or_pending(in_flight);
            }
            if policy.required_jobs.is_none() {
                // "Every job" includes jobs no runner picked up yet, which the tasks path
                // cannot see: the run status (when known) must agree.
                if let Some(r) = current
                    .iter()
                    .find(|r| matches!(r.status, Some(JobStatus::Failure | JobStatus::Cancelled)))
                {
                    let s = r.status.unwrap_or(JobStatus::Unknown);
                    return Verdict {
                        kind: VerdictKind::Red,
                        failed_jobs: vec![format!("run #{} ({s})", r.number)],
                        sync_status,
                        detail: format!(
                            "run #{} reports {s} although no job seen failed{run_label}",
                            r.number
                        ),
                    };
                }
                if current
                    .iter()
                    .any(|r| r.status.is_some_and(|s| !s.is_done()))
                {
                    return running_or_pending(Vec::new());
                }
            }
            Verdict::new(
                VerdictKind::Green,
                sync_status,
                format!(
                    "{} required job(s) and {sync} succeeded{run_label}",
                    others.len()
                ),
            )
        }
        Some(s) => {
            let mut waiting = in_flight;
            waiting.push(format!("{sync} ({s})"));
            running_or_pending(waiting)
        }
        None => {
            if !in_flight.is_empty() {
                let mut waiting = in_flight;
                waiting.push(format!("{sync} (not started)"));
                return running_or_pending(waiting);
            }
            // Every other required job finished successfully; the sync job never showed up.
            if all_runs_done {
                Verdict::new(
                    VerdictKind::SyncNotDone,
                    None,
                    format!(
                        "{sync} did not run in the finished push run(s){run_label}: {PUSH_AGAIN}"
                    ),
                )
            } else if any_run_status_unknown && !any_run_running {
                if timed_out {
                    Verdict::new(
                        VerdictKind::SyncNotDone,
                        None,
                        format!(
                            "{sync} not seen within {timeout_text} of the push although the other jobs finished: {PUSH_AGAIN}"
                        ),
                    )
                } else {
                    running_or_pending(vec![format!("{sync} (not started)")])
                }
            } else {
                running_or_pending(vec![format!("{sync} (not started)")])
            }
        }
    }
}

/// `" (run #12)"` / `" (runs #12, #13)"` for the detail line.
fn run_label(push_runs: &[&CiRun]) -> String {
    let mut numbers: Vec<i64> = push_runs.iter().map(|r| r.number).collect();
    numbers.sort_unstable();
    numbers.dedup();
    match numbers.as_slice() {
        [] => String::new(),
        [n] => format!(" (run #{n})"),
        many => format!(
            " (runs {})",
            many.iter()
                .map(|n| format!("#{n}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

#[cfg(test)]
mod tests {
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
    fn jobs_merge_across_push_runs_newest_run_wins() {
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
        let runs = vec![
            run(3, "push", Some(Success), vec![job("build", Success)]),
            run(
                7,
                "push",
                Some(Success),
                vec![job("test", Success), job("radicle-push", Success)],
            ),
        ];
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
        // With an explicit list the named jobs decide.
        let mut p = policy();
        p.required_jobs = Some(vec!["build".into()]);
        let runs = vec![run(1, "push", Some(Running), jobs)];
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
                jobs,
            });
        proptest::collection::vec(run, 0..4)
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

    /// The statuses of the sync job's latest attempt(s) (ties possible), computed
    /// independently of `verdict`.
    fn latest_sync(runs: &[CiRun]) -> Vec<JobStatus> {
        let sync: Vec<(i64, u32, JobStatus)> = runs
            .iter()
            .filter(|r| r.event == "push")
            .flat_map(|r| r.jobs.iter().map(move |j| (r.id, j)))
            .filter(|(_, j)| j.name == "radicle-push")
            .map(|(rid, j)| (rid, j.attempt, j.status))
            .collect();
        let max = sync.iter().map(|(r, a, _)| (*r, *a)).max();
        sync.into_iter()
            .filter(|(r, a, _)| Some((*r, *a)) == max)
            .map(|(_, _, s)| s)
            .collect()
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
                prop_assert!(latest_sync(&runs).contains(&Success));
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
}
