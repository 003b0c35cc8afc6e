//! Reading CI state for a commit along each API path, and turning the wire payloads into
//! [`CiRun`]s and [`CiJob`]s.

use super::{CLOCK_SKEW_MS, ForgejoForge, MAX_TASK_PAGES, PAGE_LIMIT, parse_time_ms, wire};
use crate::ci::{CiJob, CiRun, JobStatus};
use crate::config::Repo;
use crate::forge::ForgeError;
use std::collections::{BTreeMap, HashSet};

impl ForgejoForge {
    /// The runs of `sha` (Forgejo ≥ 12), newest (highest id) first.
    pub(super) async fn fetch_runs(
        &self,
        repo: &Repo,
        sha: &str,
    ) -> Result<Vec<wire::ActionRun>, ForgeError> {
        let path = format!("{}/actions/runs", self.repo_path(repo));
        let query = [
            ("head_sha", sha.to_string()),
            ("limit", PAGE_LIMIT.to_string()),
        ];
        let list: wire::ListActionRunResponse =
            self.get_json(&path, &query, &self.full_name(repo)).await?;
        let mut runs: Vec<wire::ActionRun> = list
            .workflow_runs
            .unwrap_or_default()
            .into_iter()
            .filter(|r| same_sha(&r.commit_sha, sha))
            .collect();
        // Before v15 the order is whatever the database returns.
        runs.sort_by_key(|r| std::cmp::Reverse(r.id));
        Ok(runs)
    }

    /// The jobs of run `run_id` (Forgejo ≥ 16).
    pub(super) async fn fetch_jobs(
        &self,
        repo: &Repo,
        run_id: i64,
    ) -> Result<Vec<wire::ActionRunJob>, ForgeError> {
        let path = format!("{}/actions/runs/{run_id}/jobs", self.repo_path(repo));
        let jobs: Option<Vec<wire::ActionRunJob>> =
            self.get_json(&path, &[], &self.full_name(repo)).await?;
        Ok(jobs.unwrap_or_default())
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

    pub(super) async fn runs_tasks_only(
        &self,
        repo: &Repo,
        sha: &str,
        pushed_ms: Option<i64>,
    ) -> Result<Vec<CiRun>, ForgeError> {
        let bound = pushed_ms.map(|p| p.saturating_sub(CLOCK_SKEW_MS));
        let tasks = self.fetch_tasks(repo, sha, bound).await?;
        let mut runs: BTreeMap<i64, CiRun> = BTreeMap::new();
        for (number, group) in group_tasks(&tasks) {
            let first = group[0];
            runs.insert(
                number,
                CiRun {
                    id: number,
                    number,
                    event: first.event.clone(),
                    status: None,
                    workflow: non_empty(&first.workflow_id),
                    url: non_empty(&first.url),
                    jobs: jobs_from_tasks(&group),
                },
            );
        }
        Ok(runs.into_values().rev().collect())
    }

    pub(super) async fn runs_with_tasks(
        &self,
        repo: &Repo,
        sha: &str,
        pushed_ms: Option<i64>,
    ) -> Result<Vec<CiRun>, ForgeError> {
        let runs = self.fetch_runs(repo, sha).await?;
        let push_runs: Vec<&wire::ActionRun> = runs.iter().filter(|r| r.event == "push").collect();
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
        Ok(runs
            .iter()
            .map(|r| CiRun {
                id: r.id,
                number: r.index_in_repo,
                event: r.event.clone(),
                status: Some(JobStatus::parse(&r.status)),
                workflow: non_empty(&r.workflow_id),
                url: non_empty(&r.html_url),
                jobs: by_number.remove(&r.index_in_repo).unwrap_or_default(),
            })
            .collect())
    }

    pub(super) async fn runs_with_jobs(
        &self,
        repo: &Repo,
        sha: &str,
    ) -> Result<Vec<CiRun>, ForgeError> {
        let runs = self.fetch_runs(repo, sha).await?;
        let mut out = Vec::with_capacity(runs.len());
        for r in &runs {
            // Only push runs count; do not spend requests on the others.
            let jobs = if r.event == "push" {
                self.fetch_jobs(repo, r.id)
                    .await?
                    .into_iter()
                    .map(|j| CiJob {
                        status: JobStatus::parse(&j.status),
                        attempt: u32::try_from(j.attempt.unwrap_or(0).max(1)).unwrap_or(u32::MAX),
                        id: Some(j.id),
                        name: j.name,
                    })
                    .collect()
            } else {
                Vec::new()
            };
            out.push(CiRun {
                id: r.id,
                number: r.index_in_repo,
                event: r.event.clone(),
                status: Some(JobStatus::parse(&r.status)),
                workflow: non_empty(&r.workflow_id),
                url: non_empty(&r.html_url),
                jobs,
            });
        }
        Ok(out)
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
            }),
        }
    }
    jobs
}
