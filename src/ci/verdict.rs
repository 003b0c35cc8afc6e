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

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
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

/// The push runs that count: the newest push run of each workflow (an older push run of the
/// same workflow on this commit is superseded); runs whose workflow is unknown all count.
pub fn counted_runs(runs: &[CiRun]) -> Vec<&CiRun> {
    let mut newest: BTreeMap<&str, &CiRun> = BTreeMap::new();
    let mut unnamed: Vec<&CiRun> = Vec::new();
    for r in runs.iter().filter(|r| r.event == "push") {
        match r.workflow.as_deref() {
            None => unnamed.push(r),
            Some(w) => {
                let slot = newest.entry(w).or_insert(r);
                if r.id > slot.id {
                    *slot = r;
                }
            }
        }
    }
    let mut out: Vec<&CiRun> = newest.into_values().chain(unnamed).collect();
    out.sort_by_key(|r| r.id);
    out
}

/// How far CI for a commit has got (`detailed_progress`'s CI substates): the jobs of its
/// counted push runs that passed, out of all of them, and the ones running now.
#[derive(
    Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[schemars(deny_unknown_fields)]
pub struct JobTally {
    pub passed: u32,
    pub total: u32,
    /// Sorted job names.
    #[serde(default)]
    pub running: Vec<String>,
    /// The running jobs that are past their own time limit, where the forge tells it (the
    /// local forge: its runner is stuck). Sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub past_limit: Vec<String>,
}

impl JobTally {
    /// The tally of the counted push runs (`None`: no push run yet).
    pub fn of(runs: &[CiRun]) -> Option<JobTally> {
        let counted = counted_runs(runs);
        if counted.is_empty() {
            return None;
        }
        let mut t = JobTally {
            passed: 0,
            total: 0,
            running: Vec::new(),
            past_limit: Vec::new(),
        };
        for job in counted.into_iter().flat_map(current_jobs) {
            t.total += 1;
            match job.status {
                JobStatus::Success => t.passed += 1,
                JobStatus::Running => t.running.push(job.name.clone()),
                _ => {}
            }
            if job.past_limit {
                t.past_limit.push(job.name.clone());
            }
        }
        t.running.sort();
        t.running.dedup();
        t.past_limit.sort();
        t.past_limit.dedup();
        Some(t)
    }

    /// `ci 3/6 jobs, running build`.
    pub fn summary(&self) -> String {
        let mut s = format!("ci {}/{} jobs", self.passed, self.total);
        if !self.running.is_empty() {
            s.push_str(&format!(", running {}", self.running.join(", ")));
        }
        if !self.past_limit.is_empty() {
            s.push_str(&format!(
                " ({} past its own limit)",
                self.past_limit.join(", ")
            ));
        }
        s
    }
}

/// The current jobs of one run: the latest attempt of each job. Jobs with a forge id are
/// distinct jobs (two jobs may share a name); jobs without one are told apart by name.
pub fn current_jobs(run: &CiRun) -> Vec<&CiJob> {
    let mut latest: BTreeMap<(Option<i64>, &str), &CiJob> = BTreeMap::new();
    for j in &run.jobs {
        let key = match j.id {
            Some(id) => (Some(id), ""),
            None => (None, j.name.as_str()),
        };
        let slot = latest.entry(key).or_insert(j);
        let newer = (j.attempt, j.id) > (slot.attempt, slot.id);
        // Two reports of one attempt that disagree: the one still going, else the one that is
        // not a success — never the more finished or the greener of the two.
        let rank = |s: JobStatus| match s {
            s if !s.is_done() => 2,
            JobStatus::Success => 0,
            _ => 1,
        };
        let tie =
            (j.attempt, j.id) == (slot.attempt, slot.id) && rank(j.status) > rank(slot.status);
        if newer || tie {
            *slot = j;
        }
    }
    latest.into_values().collect()
}

/// One status for a job name that occurs in several counted runs (or twice in one):
/// a failure first, then anything still going, then cancelled, skipped, success.
fn summary(statuses: &[JobStatus]) -> JobStatus {
    use JobStatus::*;
    let has = |s: JobStatus| statuses.contains(&s);
    if has(Failure) {
        Failure
    } else if let Some(s) = [Running, Waiting, Blocked, Unknown]
        .into_iter()
        .find(|s| has(*s))
    {
        s
    } else if has(Cancelled) {
        Cancelled
    } else if has(Skipped) {
        Skipped
    } else {
        Success
    }
}

/// Decides the CI verdict of one commit from the runs it triggered.
///
/// - Only runs with `event == "push"` count (the forge maps its words so that `push` means
///   triggered by a push: a cron run re-registered by a push is `schedule`, a dispatch run
///   `workflow_dispatch`). Of those, the newest run of each workflow counts
///   ([`counted_runs`]).
/// - Jobs are judged per run (workflow × job name): the latest attempt within a run
///   ([`current_jobs`]); runs are never attempts of each other. A name required in several
///   runs must be fine in each of them.
/// - Required jobs are `policy.required_jobs`, or every job of the counted runs when that is
///   `None`. The sync job is judged separately even when it is listed as required: it must
///   be `success` in every counted run that defines it.
/// - `red`: a required job or the sync job `failure`; a required job `cancelled` (the sync
///   job too when something else failed); a required job `skipped` (`"<name> (skipped)"`); a
///   required job missing although every counted run reports a finished status
///   (`"<name> (missing)"`); a counted run that reports `failure`/`cancelled` while none of
///   its jobs shows why (`"run #n (cancelled)"`: a job cancelled before any runner took it).
/// - A skipped job (the sync job's too) in a run that is still going is not judged yet: it
///   may be the previous attempt of a job being rerun in place.
/// - `sync_not_done`: no failure, and the sync job `skipped`/`cancelled` (once no other job and
///   no counted run is still in flight), or missing after the other jobs finished: at once when every counted
///   run reports a finished status, and without run status only once `start_timeout` has
///   passed since `pushed_ms`.
/// - `green`: every required job and the sync job `success`, and nothing of a counted run
///   still going (no job waiting, blocked, running or unknown; no run status that is not
///   finished), whatever `required_jobs` says. All-skipped is never green.
/// - no push run: `pending` until `pushed_ms + start_timeout`, then `no_run`.
/// - otherwise `running` if a job or a counted run is running, else `pending`.
pub fn verdict(runs: &[CiRun], policy: &CiPolicy, pushed_ms: Option<i64>, now_ms: i64) -> Verdict {
    let sync = policy.sync_job.as_str();
    let timeout_ms = i64::try_from(policy.start_timeout.as_millis()).unwrap_or(i64::MAX);
    let timed_out = pushed_ms.is_some_and(|p| now_ms >= p.saturating_add(timeout_ms));
    let timeout_text = crate::duration::format(policy.start_timeout);

    let counted = counted_runs(runs);
    if counted.is_empty() {
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

    // name -> the statuses of its current jobs in the counted runs.
    let mut by_name: BTreeMap<&str, Vec<JobStatus>> = BTreeMap::new();
    let mut unexplained: Vec<String> = Vec::new();
    for run in &counted {
        let jobs = current_jobs(run);
        for j in &jobs {
            by_name.entry(j.name.as_str()).or_default().push(j.status);
        }
        if let Some(s @ (JobStatus::Failure | JobStatus::Cancelled)) = run.status
            && !jobs
                .iter()
                .any(|j| matches!(j.status, JobStatus::Failure | JobStatus::Cancelled))
        {
            unexplained.push(format!("run #{} ({s})", run.number));
        }
    }
    let status_of = |name: &str| by_name.get(name).map(|s| summary(s));
    let sync_status = status_of(sync);

    let required: BTreeSet<&str> = match &policy.required_jobs {
        Some(list) => list.iter().map(String::as_str).collect(),
        None => by_name.keys().copied().collect(),
    };
    let others: Vec<&str> = required.iter().copied().filter(|n| *n != sync).collect();

    let all_runs_done = counted
        .iter()
        .all(|r| r.status.is_some_and(JobStatus::is_done));
    let any_run_status_unknown = counted.iter().any(|r| r.status.is_none());
    let any_run_unfinished = counted
        .iter()
        .any(|r| r.status.is_some_and(|s| !s.is_done()));
    let any_run_running = counted.iter().any(|r| r.status == Some(JobStatus::Running));
    // Jobs of the counted runs still going, required or not.
    let going: Vec<String> = by_name
        .iter()
        .filter(|(n, _)| **n != sync && !required.contains(*n))
        // Each run's job on its own: one run's failure of a job that is not required does not
        // hide another run's attempt of it still going.
        .filter_map(|(n, s)| {
            s.iter()
                .find(|s| !s.is_done())
                .map(|s| format!("{n} ({s})"))
        })
        .collect();

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
        Some(JobStatus::Cancelled) if !failed.is_empty() || !unexplained.is_empty() => {
            failed.push(sync.to_string())
        }
        _ => {}
    }
    failed.extend(unexplained);
    let run_label = run_label(&counted);
    // A skipped job in a run that is still going may be the previous attempt of a job being
    // rerun (a run's status does not rank `skipped`): judge it once the run finished.
    let only_skips = failed.iter().all(|f| f.ends_with(" (skipped)"));
    if !failed.is_empty() && only_skips && any_run_unfinished {
        let mut waiting = in_flight.clone();
        waiting.extend(failed);
        return running_or_pending_of(&by_name, any_run_running, sync_status, waiting, &run_label);
    }

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

    let running_or_pending = |waiting: Vec<String>| {
        running_or_pending_of(&by_name, any_run_running, sync_status, waiting, &run_label)
    };

    match sync_status {
        Some(s @ (JobStatus::Skipped | JobStatus::Cancelled)) => {
            // A skipped (or cancelled) sync job in a run still going may be a superseded
            // attempt; and something still going may yet fail: let it finish first.
            if any_run_unfinished || in_flight.iter().any(|j| !j.ends_with("(not started)")) {
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
            if !in_flight.is_empty() || !going.is_empty() || any_run_unfinished {
                let mut waiting = in_flight;
                waiting.extend(going);
                return running_or_pending(waiting);
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
            } else if any_run_status_unknown && !any_run_unfinished && going.is_empty() {
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

/// The verdict while something is still going: `running` if a job or a counted run runs.
fn running_or_pending_of(
    by_name: &BTreeMap<&str, Vec<JobStatus>>,
    any_run_running: bool,
    sync_status: Option<JobStatus>,
    mut waiting: Vec<String>,
    run_label: &str,
) -> Verdict {
    let any_job_running = by_name.values().any(|s| s.contains(&JobStatus::Running));
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
mod tests;
