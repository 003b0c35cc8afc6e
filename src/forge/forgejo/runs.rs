//! Reading CI state for a commit along each API path, and turning the wire payloads into
//! [`CiRun`]s and [`CiJob`]s.
//!
//! What the payloads do not say outright (appendix of the reference):
//! - a run counts as a push run only by its `trigger_event` with no schedule id ([`is_push`]);
//! - reruns happen in place: until a runner takes the job again, its newest task is the
//!   previous attempt's. On 12–15 the run status proves such a task stale (Forgejo ranks
//!   `cancelled`/`failure` before `running`/`waiting`/`blocked` when it aggregates); on 8–11
//!   (and on 12–15 when the run status and the tasks contradict each other) the commit
//!   statuses, written for every job of a push run in every state, say what the job is now;
//! - jobs with no task (waiting, blocked, skipped by the server, cancelled before pickup)
//!   are visible only through `/jobs` (≥ 16) or the commit statuses.

use super::http::{Got, Target};
use super::{
    ApiPath, CLOCK_SKEW_MS, ForgejoForge, MAX_TASK_PAGES, PAGE_LIMIT, parse_time_ms, wire,
};
use crate::ci::{CiJob, CiRun, JobStatus};
use crate::config::Repo;
use crate::forge::ForgeError;
use std::collections::{BTreeMap, HashSet};

/// At most this many pages of a commit's statuses (50 contexts each) are read.
pub const MAX_STATUS_PAGES: u32 = 4;

/// Whether a run was triggered by a push. `event` is not enough: a cron run that a push to
/// the default branch re-registered reports `event: "push"` with `trigger_event: "schedule"`
/// and a schedule id (Forgejo 12–16). A run stored before `trigger_event` existed has it
/// empty; its `event` then decides.
pub(super) fn is_push(r: &wire::ActionRun) -> bool {
    trigger(r) == "push"
}

/// The run's trigger in the words orch counts by (`CiRun::event`).
fn trigger(r: &wire::ActionRun) -> String {
    if r.schedule_id != 0 {
        "schedule".into()
    } else if !r.trigger_event.is_empty() {
        r.trigger_event.clone()
    } else {
        r.event.clone()
    }
}

impl ForgejoForge {
    /// The runs of `sha` (Forgejo ≥ 12), newest (highest id) first; `None` when the server
    /// has no `/actions/runs` route (Forgejo < 12, or a 12.0.0-dev build before it landed).
    pub(super) async fn fetch_runs(
        &self,
        repo: &str,
        sha: &str,
    ) -> Result<Option<Vec<wire::ActionRun>>, ForgeError> {
        let path = format!("{}/actions/runs", self.repo_path_named(repo));
        // No `page`: Forgejo then applies no LIMIT and returns every matching run.
        let query = [
            ("head_sha", sha.to_string()),
            ("limit", PAGE_LIMIT.to_string()),
        ];
        let Some(body) = self.body_or_no_route(&path, &query, repo).await? else {
            return Ok(None);
        };
        let list: wire::ListActionRunResponse = self.decode(&body, &path)?;
        let mut runs: Vec<wire::ActionRun> = list
            .workflow_runs
            .unwrap_or_default()
            .into_iter()
            .filter(|r| same_sha(&r.commit_sha, sha))
            .collect();
        // Before v15 the order is whatever the database returns.
        runs.sort_by_key(|r| std::cmp::Reverse(r.id));
        Ok(Some(runs))
    }

    /// The jobs of run `run_id` (Forgejo ≥ 16); `None` when the route is missing (a
    /// 16.0.0-dev build before it landed).
    pub(super) async fn fetch_jobs(
        &self,
        repo: &Repo,
        run_id: i64,
    ) -> Result<Option<Vec<wire::ActionRunJob>>, ForgeError> {
        let path = format!("{}/actions/runs/{run_id}/jobs", self.repo_path(repo));
        let Some(body) = self.body_or_no_route(&path, &[], &repo.name).await? else {
            return Ok(None);
        };
        let jobs: Option<Vec<wire::ActionRunJob>> = self.decode(&body, &path)?;
        Ok(Some(jobs.unwrap_or_default()))
    }

    /// A body, or `None` for a route this server does not have; an application 404 is the
    /// usual error.
    async fn body_or_no_route(
        &self,
        path: &str,
        query: &[(&str, String)],
        repo: &str,
    ) -> Result<Option<String>, ForgeError> {
        let full_name = self.full_name_of(repo);
        let target = Target {
            repo: Some(&full_name),
            missing_ok: false,
            needs: None,
        };
        match self.fetch(path, query, target).await? {
            Got::Body(b) => Ok(Some(b)),
            Got::NoRoute => Ok(None),
            Got::Missing(body) => Err(self.classify(404, &format!("/api/v1{path}"), &body, target)),
        }
    }

    /// The latest status of each context of `sha` (`/commits/{sha}/status`, every version),
    /// paged 50 contexts at a time.
    pub(super) async fn fetch_statuses(
        &self,
        repo: &Repo,
        sha: &str,
    ) -> Result<Vec<wire::CommitStatus>, ForgeError> {
        let path = format!("{}/commits/{sha}/status", self.repo_path(repo));
        let full_name = self.full_name(repo);
        let mut out = Vec::new();
        for page in 1..=MAX_STATUS_PAGES {
            let query = [
                ("page", page.to_string()),
                ("limit", PAGE_LIMIT.to_string()),
            ];
            let combined: wire::CombinedStatus = self.get_json(&path, &query, &full_name).await?;
            let statuses = combined.statuses.unwrap_or_default();
            let n = statuses.len();
            out.extend(statuses);
            if n < PAGE_LIMIT {
                break;
            }
        }
        Ok(out)
    }

    /// The tasks of `sha`, newest first, paging `/actions/tasks` (which has no SHA filter)
    /// until a page reaches tasks created before `stop_before_ms`, the list is exhausted, or
    /// [`MAX_TASK_PAGES`] pages were read.
    async fn fetch_tasks(
        &self,
        repo: &Repo,
        sha: &str,
        stop_before_ms: Option<i64>,
    ) -> Result<Vec<wire::ActionTask>, ForgeError> {
        let path = format!("{}/actions/tasks", self.repo_path(repo));
        let full_name = self.full_name(repo);
        let mut ours = Vec::new();
        let mut ids = HashSet::new();
        let mut listed = 0usize;
        for page in 1..=MAX_TASK_PAGES {
            let query = [
                ("page", page.to_string()),
                ("limit", PAGE_LIMIT.to_string()),
            ];
            let list: wire::ActionTaskResponse = self.get_json(&path, &query, &full_name).await?;
            let entries = list.workflow_runs.unwrap_or_default();
            let n = entries.len();
            let mut past = false;
            for t in entries {
                if let (Some(bound), Some(created)) =
                    (stop_before_ms, parse_time_ms(t.created_at.as_deref()))
                    && created < bound
                {
                    past = true;
                }
                if same_sha(&t.head_sha, sha) && ids.insert(t.id) {
                    ours.push(t);
                }
            }
            listed += n;
            if n == 0 || past || listed as i64 >= list.total_count {
                break;
            }
            if page == MAX_TASK_PAGES {
                tracing::warn!(
                    repo = %full_name,
                    pages = MAX_TASK_PAGES,
                    "stopped paging /actions/tasks: the commit's tasks may be older than {} tasks",
                    listed
                );
            }
        }
        ours.sort_by_key(|t| std::cmp::Reverse(t.id));
        Ok(ours)
    }

    /// Forgejo 8–11: the tasks of `sha`, corrected and completed by its commit statuses.
    pub(super) async fn runs_tasks_only(
        &self,
        repo: &Repo,
        sha: &str,
        pushed_ms: Option<i64>,
    ) -> Result<Option<Vec<CiRun>>, ForgeError> {
        let bound = pushed_ms.map(|p| p.saturating_sub(CLOCK_SKEW_MS));
        let tasks = self.fetch_tasks(repo, sha, bound).await?;
        let statuses = self.fetch_statuses(repo, sha).await?;
        let mut runs: Vec<CiRun> = group_tasks(&tasks)
            .into_iter()
            .rev()
            .map(|(number, group)| {
                let first = group[0];
                CiRun {
                    id: number,
                    number,
                    event: first.event.clone(),
                    status: None,
                    workflow: non_empty(&first.workflow_id),
                    url: non_empty(&first.url),
                    git_ref: branch_ref(&first.head_branch),
                    jobs: jobs_from_tasks(&group),
                }
            })
            .collect();
        merge_statuses(&mut runs, &status_jobs(&statuses), true);
        Ok(Some(runs))
    }

    /// Forgejo 12–15: the runs of `sha`, with their jobs from `/actions/tasks`; `None` when
    /// the server has no `/actions/runs`.
    pub(super) async fn runs_with_tasks(
        &self,
        repo: &Repo,
        sha: &str,
        pushed_ms: Option<i64>,
    ) -> Result<Option<Vec<CiRun>>, ForgeError> {
        let Some(runs) = self.fetch_runs(&repo.name, sha).await? else {
            return Ok(None);
        };
        let push_runs: Vec<&wire::ActionRun> = runs.iter().filter(|r| is_push(r)).collect();
        let mut by_number: BTreeMap<i64, Vec<CiJob>> = BTreeMap::new();
        if !push_runs.is_empty() {
            // Tasks of our runs are created after the runs; fall back to the push time.
            let bound = push_runs
                .iter()
                .filter_map(|r| parse_time_ms(r.created.as_deref()))
                .min()
                .map(|c| c - 1_000)
                .or(pushed_ms.map(|p| p.saturating_sub(CLOCK_SKEW_MS)));
            let tasks = self.fetch_tasks(repo, sha, bound).await?;
            for (number, group) in group_tasks(&tasks) {
                by_number.insert(number, jobs_from_tasks(&group));
            }
        }
        let mut out: Vec<CiRun> = runs
            .iter()
            .map(|r| CiRun {
                id: r.id,
                number: r.index_in_repo,
                event: trigger(r),
                status: Some(JobStatus::parse(&r.status)),
                workflow: non_empty(&r.workflow_id),
                url: non_empty(&r.html_url),
                git_ref: branch_ref(&r.prettyref),
                jobs: if is_push(r) {
                    by_number.remove(&r.index_in_repo).unwrap_or_default()
                } else {
                    Vec::new()
                },
            })
            .collect();
        let mut contradicted = false;
        for run in out.iter_mut().filter(|r| r.event == "push") {
            contradicted |= !settle_by_run_status(run);
        }
        if contradicted {
            // The run status and the tasks disagree in a way only the statuses resolve
            // (a job cancelled or skipped without a task since its last attempt).
            let statuses = self.fetch_statuses(repo, sha).await?;
            let mut push: Vec<CiRun> = out.iter().filter(|r| r.event == "push").cloned().collect();
            merge_statuses(&mut push, &status_jobs(&statuses), false);
            for run in &mut push {
                settle_by_run_status(run);
                if let Some(slot) = out.iter_mut().find(|r| r.id == run.id) {
                    *slot = run.clone();
                }
            }
        }
        Ok(Some(out))
    }

    /// Forgejo ≥ 16: the runs of `sha` and, for push runs, their jobs; `None` when a route
    /// of this path is missing.
    pub(super) async fn runs_with_jobs(
        &self,
        repo: &Repo,
        sha: &str,
    ) -> Result<Option<Vec<CiRun>>, ForgeError> {
        let Some(runs) = self.fetch_runs(&repo.name, sha).await? else {
            return Ok(None);
        };
        let mut out = Vec::with_capacity(runs.len());
        for r in &runs {
            // Only push runs count; do not spend requests on the others.
            let jobs = if is_push(r) {
                let Some(jobs) = self.fetch_jobs(repo, r.id).await? else {
                    return Ok(None);
                };
                jobs.into_iter()
                    .map(|j| CiJob {
                        status: JobStatus::parse(&j.status),
                        attempt: u32::try_from(j.attempt.unwrap_or(0).max(1)).unwrap_or(u32::MAX),
                        id: Some(j.id),
                        name: j.name,
                        past_limit: false,
                    })
                    .collect()
            } else {
                Vec::new()
            };
            out.push(CiRun {
                id: r.id,
                number: r.index_in_repo,
                event: trigger(r),
                status: Some(JobStatus::parse(&r.status)),
                workflow: non_empty(&r.workflow_id),
                url: non_empty(&r.html_url),
                git_ref: branch_ref(&r.prettyref),
                jobs,
            });
        }
        Ok(Some(out))
    }

    /// The cheap look of [`Forge::push_run_states`](crate::forge::Forge::push_run_states):
    /// one `/actions/runs` request (≥ 12) or one page of commit statuses (8–11).
    pub(super) async fn run_states(
        &self,
        repo: &Repo,
        sha: &str,
    ) -> Result<Option<crate::forge::RunStates>, ForgeError> {
        if self.api_path().await? == ApiPath::TasksOnly {
            let statuses = self.fetch_statuses(repo, sha).await?;
            let mut runs: Vec<CiRun> = Vec::new();
            merge_statuses(&mut runs, &status_jobs(&statuses), true);
            return Ok(Some(runs.iter().map(|r| (r.id, r.status)).collect()));
        }
        let Some(runs) = self.fetch_runs(&repo.name, sha).await? else {
            return Ok(None); // the next full look falls back
        };
        Ok(Some(
            runs.iter()
                .filter(|r| is_push(r))
                .map(|r| (r.id, Some(JobStatus::parse(&r.status))))
                .collect(),
        ))
    }
}

/// Applies what a run's aggregate status proves about its tasks (Forgejo 12–15). Returns
/// false when the tasks contradict the run status in a way it cannot settle, or may hide
/// jobs that decide.
///
/// Forgejo aggregates `cancelled`, then `failure`, before `running`/`waiting`/`blocked`: a
/// run that is still going has no failed or cancelled job, so such a task is a superseded
/// attempt (a rerun is queued): the job is waiting. A finished run that is `success` or
/// `skipped` has no failed job either. A finished run with no task at all, with a skipped
/// job (whose dependents the server skips without a task), or that was cancelled (jobs
/// cancelled before pickup have no task), may have jobs no task shows.
fn settle_by_run_status(run: &mut CiRun) -> bool {
    let failed = |s: JobStatus| matches!(s, JobStatus::Failure | JobStatus::Cancelled);
    if run.status.is_some_and(JobStatus::is_done)
        && (run.status == Some(JobStatus::Skipped)
            || run.jobs.is_empty()
            || run.jobs.iter().any(|j| j.status == JobStatus::Skipped))
    {
        return false;
    }
    match run.status {
        Some(JobStatus::Running | JobStatus::Waiting | JobStatus::Blocked) => {
            for j in run.jobs.iter_mut().filter(|j| failed(j.status)) {
                j.status = JobStatus::Waiting;
            }
            true
        }
        Some(JobStatus::Success | JobStatus::Skipped) => !run.jobs.iter().any(|j| failed(j.status)),
        Some(JobStatus::Failure) => run.jobs.iter().any(|j| failed(j.status)),
        // A cancelled run may hold jobs cancelled before any runner picked them up: they have
        // no task, and a task that is cancelled (the sync job, say) does not show them.
        Some(JobStatus::Cancelled) => false,
        _ => true,
    }
}

/// One job as a commit status shows it (push runs only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct StatusJob {
    /// The run number from `target_url` (`-1` when it cannot be read).
    pub run_number: i64,
    /// `"<workflow name> / <job name> (push)"`.
    pub context: String,
    pub status: JobStatus,
}

/// The push-run jobs among a commit's statuses. Other contexts (pull requests, releases,
/// statuses set by other tools) are ignored.
pub(super) fn status_jobs(statuses: &[wire::CommitStatus]) -> Vec<StatusJob> {
    statuses
        .iter()
        .filter(|s| s.context.trim_end().ends_with(" (push)"))
        .filter_map(|s| {
            let run_number = run_number_of(&s.target_url)?;
            Some(StatusJob {
                run_number,
                context: s.context.trim().to_string(),
                status: status_word(&s.status, &s.description),
            })
        })
        .collect()
}

/// The run number in an Actions status's `target_url` (`…/actions/runs/<n>/jobs/<i>`);
/// `None` when the status was not written by Forgejo Actions.
fn run_number_of(target_url: &str) -> Option<i64> {
    let (_, rest) = target_url.rsplit_once("/actions/runs/")?;
    let (number, job) = rest.split_once("/jobs/")?;
    job.trim_end_matches('/').parse::<i64>().ok()?;
    number.parse().ok()
}

/// A job's status from its commit status (`services/actions/commit_status.go`): the state
/// and, where several job statuses share a state, the description.
fn status_word(state: &str, description: &str) -> JobStatus {
    match state {
        "pending" if description.starts_with("Blocked") => JobStatus::Blocked,
        "pending" if description.starts_with("Has started running") => JobStatus::Running,
        "pending" => JobStatus::Waiting,
        // Skipped jobs were `success` "Has been skipped" before v16.
        "success" if description.starts_with("Has been skipped") => JobStatus::Skipped,
        "success" => JobStatus::Success,
        "skipped" => JobStatus::Skipped,
        "failure" if description.starts_with("Has been cancelled") => JobStatus::Cancelled,
        "failure" => JobStatus::Failure,
        _ => JobStatus::Unknown,
    }
}

/// The job name in a status context: the longest known job name that ends it, else what
/// follows the first `" / "`.
fn job_name_of(context: &str, known: &[&str]) -> String {
    let bare = context.strip_suffix(" (push)").unwrap_or(context);
    if let Some(name) = known
        .iter()
        .filter(|n| bare.ends_with(&format!(" / {n}")) || bare == format!("/ {n}"))
        .max_by_key(|n| n.len())
    {
        return name.to_string();
    }
    match bare.split_once(" / ") {
        Some((_, job)) => job.to_string(),
        None => bare.trim_start_matches('/').trim().to_string(),
    }
}

/// Folds a commit's push statuses into the runs (matched by run number). A status is newer
/// than any task (Forgejo writes one on every change of the job, reruns included), so its
/// word wins, except that Forgejo < 15 keeps "Waiting to run" when a job starts (it writes
/// a new status only when the state changes), so a running task refines a pending status.
/// A job with a status and no task is added. With `set_status`, a run that has statuses
/// gets the aggregate status of its jobs (the tasks path has no run status otherwise), and
/// runs seen only in statuses are added as push runs.
pub(super) fn merge_statuses(runs: &mut Vec<CiRun>, statuses: &[StatusJob], set_status: bool) {
    let mut touched: HashSet<i64> = HashSet::new();
    for s in statuses {
        let idx = match runs.iter().position(|r| r.number == s.run_number) {
            Some(i) => i,
            None if set_status => {
                runs.push(CiRun {
                    id: s.run_number,
                    number: s.run_number,
                    event: "push".into(),
                    status: None,
                    workflow: None,
                    url: None,
                    git_ref: None,
                    jobs: Vec::new(),
                });
                runs.len() - 1
            }
            None => continue,
        };
        let run = &mut runs[idx];
        if run.event != "push" {
            continue;
        }
        touched.insert(run.number);
        let known: Vec<&str> = run.jobs.iter().map(|j| j.name.as_str()).collect();
        let name = job_name_of(&s.context, &known);
        let mut found = false;
        for j in run.jobs.iter_mut().filter(|j| j.name == name) {
            found = true;
            let refined = s.status == JobStatus::Waiting && j.status == JobStatus::Running;
            if !refined {
                j.status = s.status;
            }
        }
        if !found {
            run.jobs.push(CiJob {
                name,
                status: s.status,
                attempt: 1,
                id: None,
                past_limit: false,
            });
        }
    }
    if set_status {
        for run in runs.iter_mut().filter(|r| touched.contains(&r.number)) {
            let statuses: Vec<JobStatus> = run.jobs.iter().map(|j| j.status).collect();
            run.status = Some(aggregate(&statuses));
        }
        runs.sort_by_key(|r| std::cmp::Reverse(r.id));
    }
}

/// Forgejo's `AggregateJobStatus` (`models/actions/run_job.go`, v11+).
pub(super) fn aggregate(jobs: &[JobStatus]) -> JobStatus {
    use JobStatus::*;
    let has = |s: JobStatus| jobs.contains(&s);
    if jobs.is_empty() {
        Unknown
    } else if jobs.iter().all(|s| *s == Skipped) {
        Skipped
    } else if jobs.iter().all(|s| matches!(s, Success | Skipped)) {
        Success
    } else if has(Cancelled) {
        Cancelled
    } else if has(Failure) {
        Failure
    } else if has(Running) {
        Running
    } else if has(Waiting) {
        Waiting
    } else if has(Blocked) {
        Blocked
    } else {
        Unknown
    }
}

/// An empty SHA is unknown, never a match.
fn same_sha(a: &str, b: &str) -> bool {
    !a.is_empty() && a.eq_ignore_ascii_case(b)
}

fn non_empty(s: &str) -> Option<String> {
    (!s.is_empty()).then(|| s.to_string())
}

/// Tasks (newest first) grouped by run number, each group newest first.
pub(super) fn group_tasks(tasks: &[wire::ActionTask]) -> BTreeMap<i64, Vec<&wire::ActionTask>> {
    let mut groups: BTreeMap<i64, Vec<&wire::ActionTask>> = BTreeMap::new();
    for t in tasks {
        groups.entry(t.run_number).or_default().push(t);
    }
    for g in groups.values_mut() {
        g.sort_by_key(|t| std::cmp::Reverse(t.id));
    }
    groups
}

/// One job per name: the newest task is the latest attempt; the attempt number is the
/// number of tasks of that job.
pub(super) fn jobs_from_tasks(group: &[&wire::ActionTask]) -> Vec<CiJob> {
    let mut jobs: Vec<CiJob> = Vec::new();
    for t in group {
        match jobs.iter_mut().find(|j| j.name == t.name) {
            Some(j) => j.attempt += 1,
            None => jobs.push(CiJob {
                name: t.name.clone(),
                status: JobStatus::parse(&t.status),
                attempt: 1,
                id: None,
                past_limit: false,
            }),
        }
    }
    jobs
}

/// A push's branch as a full ref (`main` → `refs/heads/main`); `None` when the forge named none.
fn branch_ref(branch: &str) -> Option<String> {
    (!branch.is_empty()).then(|| {
        if branch.starts_with("refs/") {
            branch.to_string()
        } else {
            format!("refs/heads/{branch}")
        }
    })
}
