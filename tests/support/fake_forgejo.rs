//! A fake Forgejo for tests: a wiremock server that answers the Actions API from a mutable
//! scenario, with payloads shaped like the real server's (see
//! `shared/reference/forgejo-actions-api.md` §2 and §8, **and its appendix**, which
//! corrects them: every behaviour below follows the appendix).
//!
//! The integration tests reach it as `crate::support::fake_forgejo`; `benches/resume.rs`
//! includes this file with `#[path]`:
//!
//! ```ignore
//! use crate::support::fake_forgejo::FakeForgejo;
//!
//! let fake = FakeForgejo::start("11.0.1+gitea-1.22.0").await;
//! let run = fake.add_run("alpha", SHA, "push", &[("build", "running"), ("radicle-push", "waiting")]);
//! fake.set_job(run, "build", "success");
//! ```
//!
//! What is modelled:
//! - runs (id, per-repo `index_in_repo`, `commit_sha`, trigger, workflow), their jobs (status,
//!   attempt, `task_id`) and tasks (one per job attempt a runner picked up);
//! - triggers as the real server words them: a push run `event: "push"`; a dispatch run
//!   `event: ""`, `trigger_event: "workflow_dispatch"`; a cron run that a push to the default
//!   branch re-registered (`add_run(…, "schedule", …)`) `event: "push"`,
//!   `trigger_event: "schedule"` and a non-zero `ScheduleID`; tasks carry the trigger;
//! - a job gets a task only when a runner picks it up (`running`, `success`, `failure`):
//!   `waiting`, `blocked`, server-`skipped` jobs and jobs cancelled before pickup have none;
//!   a job whose `if:` is false ([`runner_skip`](FakeForgejo::runner_skip)) gets a `skipped`
//!   task before v16 (the runner evaluates it) and none from v16 (the server does);
//! - `attempt`: from v15 1 at creation and + 1 on rerun (tasks copy it); before, + 1 at
//!   pickup. Reruns happen in place (same run and job id, back to waiting/blocked, no task
//!   until the next pickup; the old task stays);
//! - run status aggregated from the jobs like `AggregateJobStatus`;
//! - commit statuses for every job of push runs (context `"<workflow> / <job> (push)"`,
//!   relative `target_url`), written at creation and on every change, deduplicated on the
//!   state (v8–14) or the state and description (v15+); skipped is `success` "Has been
//!   skipped" before v16 and `skipped` from v16; none for cron or dispatch runs;
//! - endpoints by what the build has: `/tasks` (≥ 8, newest first, no SHA filter),
//!   `/commits/{ref}/status` (latest status per context, paged), `/runs` (≥ 12,
//!   `head_sha`/`event`/`page`/`limit`; id order only from 15, before that ascending to catch
//!   clients that rely on order), `/runs/{id}` (≥ 12), `/runs/{id}/jobs` and
//!   `/jobs/{id}/logs` (≥ 16), `/branches/{name}`, `/version`. A `-dev` build has the routes
//!   of the release before it (`16.0.0-dev` no `/jobs`, `12.0.0-dev` no `/runs`);
//!   `development` has every route. `/tasks` and `/runs` without `page` return every row
//!   (no LIMIT). A route the build lacks answers chi's plain-text `404 page not found`; an
//!   unknown repository, run or job the API's JSON 404;
//! - times: RFC 3339 with the configured UTC offset, epoch when unset, `duration` in
//!   nanoseconds and omitted when zero;
//! - a required token (401 otherwise), injected faults (status codes, raw bodies, delays,
//!   echoing the Authorization header back), and a record of every request.
#![allow(dead_code)]

use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// The owner of every repository on the fake.
pub const OWNER: &str = "orch-test";
/// A repository that exists from the start.
pub const REPO: &str = "alpha";
/// A token that tests can look for in error messages and logs.
pub const TOKEN: &str = "tok-SECRET-4b1d";
/// The fake's initial clock (2026-07-01T10:00:00Z).
pub const START_MS: i64 = 1_782_900_000_000;

/// A canned answer for requests whose path contains some text.
#[derive(Debug, Clone)]
pub enum Fault {
    /// An HTTP status with a Forgejo-style JSON error body.
    Status(u16),
    /// An HTTP status with this body.
    StatusBody(u16, String),
    /// 200 with this raw body (e.g. malformed JSON).
    Body(String),
    /// The normal answer, delayed.
    Delay(Duration),
    /// An HTTP status whose JSON `message` echoes the request's Authorization header.
    EchoAuthorization(u16),
}

/// One request the fake received.
#[derive(Debug, Clone)]
pub struct Hit {
    pub method: String,
    /// The path, e.g. `/api/v1/repos/orch-test/alpha/actions/tasks`.
    pub path: String,
    /// The raw query string (may be empty).
    pub query: String,
    pub authorization: Option<String>,
}

#[derive(Debug, Clone)]
struct FaultRule {
    path_contains: String,
    remaining: usize,
    fault: Fault,
}

#[derive(Debug, Clone)]
struct Job {
    id: i64,
    /// Position in the run (the `jobs/<i>` of a status's `target_url`).
    index: usize,
    name: String,
    needs: Option<Vec<String>>,
    status: String,
    attempt: i64,
    task_id: i64,
}

#[derive(Debug, Clone)]
struct Run {
    id: i64,
    repo: String,
    index: i64,
    sha: String,
    /// The trigger: `push`, `workflow_dispatch`, `schedule`, …
    trigger: String,
    schedule_id: i64,
    workflow_id: String,
    title: String,
    created_ms: i64,
    updated_ms: i64,
    started_ms: i64,
    stopped_ms: i64,
    jobs: Vec<Job>,
}

#[derive(Debug, Clone)]
struct Task {
    id: i64,
    run_id: i64,
    job_id: i64,
    status: String,
    created_ms: i64,
    updated_ms: i64,
    started_ms: i64,
}

/// A commit status row (`commit_status` table).
#[derive(Debug, Clone)]
struct StatusRow {
    repo: String,
    sha: String,
    /// Per (repo, SHA), from 1.
    index: i64,
    context: String,
    state: String,
    description: String,
    target_url: String,
    created_ms: i64,
}

/// What a build can do, from its version.
#[derive(Debug, Clone, Copy)]
struct Features {
    /// The release whose behaviour the build has (a `-dev` build: the one before it).
    level: u32,
    runs_route: bool,
    jobs_route: bool,
}

impl Features {
    fn of(version: &str) -> Features {
        let major: u32 = version
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .and_then(|m| m.parse().ok())
            .unwrap_or(0);
        let level = if version.starts_with("development") {
            99
        } else if version.contains("-dev") {
            major.saturating_sub(1)
        } else {
            major
        };
        Features {
            level,
            runs_route: level >= 12,
            jobs_route: level >= 16,
        }
    }
}

#[derive(Debug)]
struct State {
    version: String,
    major: u32,
    features: Features,
    statuses: Vec<StatusRow>,
    repos: BTreeSet<String>,
    clock_ms: i64,
    utc_offset_secs: i32,
    next_id: i64,
    next_index: BTreeMap<String, i64>,
    runs: Vec<Run>,
    tasks: Vec<Task>,
    branches: BTreeMap<(String, String), String>,
    /// Repositories whose branches are read from a bare git repository, as a real server's
    /// are: a push is visible the moment it returns.
    git_dirs: BTreeMap<String, std::path::PathBuf>,
    logs: BTreeMap<i64, String>,
    faults: Vec<FaultRule>,
    required_token: Option<String>,
    hits: Vec<Hit>,
    noise_counter: u64,
}

/// The fake server plus its scenario. Cloning shares both.
#[derive(Clone)]
pub struct FakeForgejo {
    server: Arc<MockServer>,
    state: Arc<Mutex<State>>,
}

impl FakeForgejo {
    /// Starts a fake answering as Forgejo `version` (e.g. `"11.0.1+gitea-1.22.0"`), with the
    /// repository [`REPO`] owned by [`OWNER`] and no token required.
    pub async fn start(version: &str) -> FakeForgejo {
        let major = version
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .and_then(|m| m.parse().ok())
            .unwrap_or(0);
        let state = Arc::new(Mutex::new(State {
            version: version.to_string(),
            major,
            features: Features::of(version),
            statuses: Vec::new(),
            repos: BTreeSet::from([REPO.to_string()]),
            clock_ms: START_MS,
            utc_offset_secs: 0,
            next_id: 100,
            next_index: BTreeMap::new(),
            runs: Vec::new(),
            tasks: Vec::new(),
            branches: BTreeMap::new(),
            git_dirs: BTreeMap::new(),
            logs: BTreeMap::new(),
            faults: Vec::new(),
            required_token: None,
            hits: Vec::new(),
            noise_counter: 0,
        }));
        let server = MockServer::start().await;
        Mock::given(any())
            .respond_with(Responder {
                state: state.clone(),
            })
            .mount(&server)
            .await;
        FakeForgejo {
            server: Arc::new(server),
            state,
        }
    }

    /// The server root to give the client (`http://127.0.0.1:PORT`).
    pub fn uri(&self) -> String {
        self.server.uri()
    }

    pub fn server(&self) -> &MockServer {
        &self.server
    }

    pub fn version(&self) -> String {
        self.lock().version.clone()
    }

    pub fn major(&self) -> u32 {
        self.lock().major
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    // ---- scenario -------------------------------------------------------------------------

    pub fn add_repo(&self, name: &str) {
        self.lock().repos.insert(name.to_string());
    }

    /// The fake's clock (epoch ms). Every scenario change advances it by one second.
    pub fn now_ms(&self) -> i64 {
        self.lock().clock_ms
    }

    pub fn advance(&self, by: Duration) {
        self.lock().clock_ms += by.as_millis() as i64;
    }

    /// Render times with this UTC offset (Forgejo uses the server's local zone).
    pub fn set_utc_offset_hours(&self, hours: i32) {
        self.lock().utc_offset_secs = hours * 3600;
    }

    /// Require `Authorization: token <t>` on every request (401 otherwise).
    pub fn require_token(&self, token: Option<&str>) {
        self.lock().required_token = token.map(str::to_string);
    }

    /// Overrides the routes the build has (e.g. a dev build between two releases).
    pub fn set_routes(&self, runs: bool, jobs: bool) {
        let mut s = self.lock();
        s.features.runs_route = runs;
        s.features.jobs_route = jobs;
    }

    /// Adds a run of workflow `ci.yml` for `sha` with jobs `(name, status)`; returns its id.
    /// `event` is the trigger: `push`, `workflow_dispatch`, or `schedule` (a cron run that a
    /// push to the default branch re-registered with the pushed SHA).
    pub fn add_run(&self, repo: &str, sha: &str, event: &str, jobs: &[(&str, &str)]) -> i64 {
        self.add_workflow_run(repo, sha, event, "ci.yml", jobs)
    }

    /// Like [`add_run`](Self::add_run) with a chosen workflow file.
    pub fn add_workflow_run(
        &self,
        repo: &str,
        sha: &str,
        event: &str,
        workflow: &str,
        jobs: &[(&str, &str)],
    ) -> i64 {
        let mut s = self.lock();
        s.tick();
        let id = s.id();
        let index = {
            let n = s.next_index.entry(repo.to_string()).or_insert(0);
            *n += 1;
            *n
        };
        let now = s.clock_ms;
        let schedule_id = if event == "schedule" { 1000 + id } else { 0 };
        let mut run = Run {
            id,
            repo: repo.to_string(),
            index,
            sha: sha.to_string(),
            trigger: event.to_string(),
            schedule_id,
            workflow_id: workflow.to_string(),
            title: format!("commit {}", &sha[..sha.len().min(7)]),
            created_ms: now,
            updated_ms: now,
            started_ms: 0,
            stopped_ms: 0,
            jobs: Vec::new(),
        };
        // From v15 a job's attempt is 1 at creation (`InsertRunJobs` → `PrepareNextAttempt`).
        let attempt = if s.features.level >= 15 { 1 } else { 0 };
        for (i, (name, _)) in jobs.iter().enumerate() {
            let job_id = s.id();
            run.jobs.push(Job {
                id: job_id,
                index: i,
                name: name.to_string(),
                needs: None,
                status: "waiting".into(),
                attempt,
                task_id: 0,
            });
        }
        s.runs.push(run);
        for (name, status) in jobs {
            s.set_job(id, name, status);
        }
        // Statuses for every job at creation, whatever its first state.
        let names: Vec<String> = jobs.iter().map(|(n, _)| n.to_string()).collect();
        for name in names {
            s.write_status(id, &name);
        }
        id
    }

    /// A job whose `if:` is false: before v16 the runner evaluates it (a task is created
    /// `running` and ends `skipped`); from v16 the server does (no task).
    pub fn runner_skip(&self, run_id: i64, job: &str) {
        let mut s = self.lock();
        s.tick();
        if s.features.level >= 16 {
            s.set_job(run_id, job, "skipped");
        } else {
            s.set_job(run_id, job, "running");
            s.set_job(run_id, job, "skipped");
        }
    }

    /// Cancels every unfinished job of a run (a newer push, or a human): a job no runner
    /// picked up is cancelled without a task.
    pub fn cancel_run(&self, run_id: i64) {
        let mut s = self.lock();
        s.tick();
        let open: Vec<String> = s
            .run(run_id)
            .expect("run")
            .jobs
            .iter()
            .filter(|j| !is_done(&j.status))
            .map(|j| j.name.clone())
            .collect();
        for name in open {
            s.set_job(run_id, &name, "cancelled");
        }
    }

    /// Sets a commit status row directly (e.g. one another tool wrote).
    pub fn add_status(&self, repo: &str, sha: &str, context: &str, state: &str, url: &str) {
        let mut s = self.lock();
        s.tick();
        let index = s.next_status_index(repo, sha);
        let now = s.clock_ms;
        s.statuses.push(StatusRow {
            repo: repo.to_string(),
            sha: sha.to_string(),
            index,
            context: context.to_string(),
            state: state.to_string(),
            description: String::new(),
            target_url: url.to_string(),
            created_ms: now,
        });
    }

    /// Sets a job's status. A runner "picks the job up" (creating a task; before v15 the
    /// attempt grows by one) when it enters `running`, `success` or `failure` without a current task; a current
    /// task follows the job's status. `cancelled` or `skipped` without a current task: no
    /// task (cancelled before pickup; skipped by the server because a need failed).
    pub fn set_job(&self, run_id: i64, job: &str, status: &str) {
        let mut s = self.lock();
        s.tick();
        s.set_job(run_id, job, status);
    }

    /// Sets a job's `needs` (rendered in `/jobs`; `null` when unset).
    pub fn set_needs(&self, run_id: i64, job: &str, needs: &[&str]) {
        let mut s = self.lock();
        let j = s.job_mut(run_id, job);
        j.needs = Some(needs.iter().map(|n| n.to_string()).collect());
    }

    /// Re-runs a job in place: same run and job id, back to `waiting` (`blocked` when it has
    /// needs) without a task (the old one stays in `/tasks`); from v15 attempt + 1. The next
    /// pickup creates a new (higher) task id.
    pub fn rerun_job(&self, run_id: i64, job: &str) {
        let mut s = self.lock();
        s.tick();
        let level = s.features.level;
        let j = s.job_mut(run_id, job);
        j.status = if j.needs.as_ref().is_some_and(|n| !n.is_empty()) {
            "blocked".into()
        } else {
            "waiting".into()
        };
        j.task_id = 0;
        if level >= 15 {
            j.attempt += 1;
        }
        s.touch_run(run_id);
        s.write_status(run_id, job);
    }

    /// Adds `n` runs of other commits, each with one finished job (so one task each).
    pub fn add_noise(&self, repo: &str, n: usize) {
        for _ in 0..n {
            let sha = {
                let mut s = self.lock();
                s.noise_counter += 1;
                format!("{:040x}", 0xfeed_0000_0000u64 + s.noise_counter)
            };
            self.add_run(repo, &sha, "push", &[("build", "success")]);
        }
    }

    /// Serves `repo`'s branches from the bare repository at `dir` (what was pushed there).
    pub fn serve_git(&self, repo: &str, dir: &std::path::Path) {
        self.lock()
            .git_dirs
            .insert(repo.to_string(), dir.to_path_buf());
    }

    pub fn set_branch(&self, repo: &str, branch: &str, sha: &str) {
        self.lock()
            .branches
            .insert((repo.to_string(), branch.to_string()), sha.to_string());
    }

    /// The log text of `job` of run `run_id` (served on ≥ 16).
    pub fn set_log(&self, run_id: i64, job: &str, text: &str) {
        let mut s = self.lock();
        let id = s.job_mut(run_id, job).id;
        s.logs.insert(id, text.to_string());
    }

    /// Answers the next `times` requests whose path contains `path_contains` with `fault`.
    pub fn fail_next(&self, path_contains: &str, times: usize, fault: Fault) {
        self.lock().faults.push(FaultRule {
            path_contains: path_contains.to_string(),
            remaining: times,
            fault,
        });
    }

    /// Answers every request whose path contains `path_contains` with `fault`.
    pub fn fail_always(&self, path_contains: &str, fault: Fault) {
        self.fail_next(path_contains, usize::MAX, fault);
    }

    pub fn clear_faults(&self) {
        self.lock().faults.clear();
    }

    // ---- observation ----------------------------------------------------------------------

    /// A job's status as the server holds it (the truth the API reports views of).
    pub fn job_status(&self, run_id: i64, job: &str) -> String {
        let s = self.lock();
        let run = s.run(run_id).expect("run");
        run.jobs
            .iter()
            .find(|j| j.name == job)
            .expect("job")
            .status
            .clone()
    }

    /// Every job of every run of `sha`: (trigger, workflow, job name, status).
    pub fn truth(&self, repo: &str, sha: &str) -> Vec<(String, String, String, String)> {
        let s = self.lock();
        s.runs
            .iter()
            .filter(|r| r.repo == repo && r.sha == sha)
            .flat_map(|r| {
                r.jobs.iter().map(move |j| {
                    (
                        r.trigger.clone(),
                        r.workflow_id.clone(),
                        j.name.clone(),
                        j.status.clone(),
                    )
                })
            })
            .collect()
    }

    pub fn hits(&self) -> Vec<Hit> {
        self.lock().hits.clone()
    }

    /// `path?query` of every request, in order.
    pub fn hit_paths(&self) -> Vec<String> {
        self.lock()
            .hits
            .iter()
            .map(|h| {
                if h.query.is_empty() {
                    h.path.clone()
                } else {
                    format!("{}?{}", h.path, h.query)
                }
            })
            .collect()
    }

    pub fn hit_count(&self) -> usize {
        self.lock().hits.len()
    }

    pub fn clear_hits(&self) {
        self.lock().hits.clear();
    }

    /// The number of tasks the fake holds for `repo` (what `/tasks` pages through).
    pub fn task_count(&self, repo: &str) -> usize {
        let s = self.lock();
        s.tasks
            .iter()
            .filter(|t| s.run(t.run_id).is_some_and(|r| r.repo == repo))
            .count()
    }

    /// Requests wiremock itself recorded (a cross-check of [`hits`](Self::hits)).
    pub async fn received(&self) -> usize {
        self.server
            .received_requests()
            .await
            .map(|r| r.len())
            .unwrap_or(0)
    }
}

impl State {
    fn tick(&mut self) {
        self.clock_ms += 1000;
    }

    fn id(&mut self) -> i64 {
        self.next_id += 1;
        self.next_id
    }

    fn run(&self, id: i64) -> Option<&Run> {
        self.runs.iter().find(|r| r.id == id)
    }

    fn job_mut(&mut self, run_id: i64, job: &str) -> &mut Job {
        self.runs
            .iter_mut()
            .find(|r| r.id == run_id)
            .unwrap_or_else(|| panic!("fake forgejo: no run {run_id}"))
            .jobs
            .iter_mut()
            .find(|j| j.name == job)
            .unwrap_or_else(|| panic!("fake forgejo: run {run_id} has no job {job}"))
    }

    fn set_job(&mut self, run_id: i64, job: &str, status: &str) {
        let now = self.clock_ms;
        let level = self.features.level;
        let picked_up = matches!(status, "running" | "success" | "failure");
        let new_task = {
            let j = self.job_mut(run_id, job);
            j.status = status.to_string();
            j.task_id == 0 && picked_up
        };
        if new_task {
            let task_id = self.id();
            let j = self.job_mut(run_id, job);
            if level < 15 {
                j.attempt += 1;
            }
            j.task_id = task_id;
            let job_id = j.id;
            self.tasks.push(Task {
                id: task_id,
                run_id,
                job_id,
                status: status.to_string(),
                created_ms: now,
                updated_ms: now,
                started_ms: now,
            });
        } else {
            let task_id = self.job_mut(run_id, job).task_id;
            if let Some(t) = self.tasks.iter_mut().find(|t| t.id == task_id) {
                t.status = status.to_string();
                t.updated_ms = now;
            }
        }
        self.touch_run(run_id);
        self.write_status(run_id, job);
    }

    fn next_status_index(&self, repo: &str, sha: &str) -> i64 {
        self.statuses
            .iter()
            .filter(|r| r.repo == repo && r.sha == sha)
            .map(|r| r.index)
            .max()
            .unwrap_or(0)
            + 1
    }

    /// `services/actions/commit_status.go`: one status per job of a push run, written when
    /// the state (v8–14) or the state or description (v15+) differs from the latest one of
    /// its context.
    fn write_status(&mut self, run_id: i64, job: &str) {
        let level = self.features.level;
        let run = self.run(run_id).expect("run").clone();
        if run.trigger != "push" {
            return; // cron runs carry no push payload, dispatch runs get none
        }
        let j = run
            .jobs
            .iter()
            .find(|j| j.name == job)
            .expect("job")
            .clone();
        let context = format!("{} / {} (push)", run.workflow_id, j.name);
        let (state, description) = match j.status.as_str() {
            "success" => ("success", "Successful in 1s".to_string()),
            "skipped" if level >= 16 => ("skipped", "Has been skipped".into()),
            "skipped" => ("success", "Has been skipped".into()),
            "failure" => ("failure", "Failing after 1s".into()),
            "cancelled" => ("failure", "Has been cancelled".into()),
            "running" => ("pending", "Has started running".into()),
            "waiting" => ("pending", "Waiting to run".into()),
            "blocked" => ("pending", "Blocked by required conditions".into()),
            _ => ("error", String::new()),
        };
        let latest = self
            .statuses
            .iter()
            .filter(|r| r.repo == run.repo && r.sha == run.sha && r.context == context)
            .max_by_key(|r| r.index);
        if let Some(l) = latest
            && l.state == state
            && (level < 15 || l.description == description)
        {
            return;
        }
        let index = self.next_status_index(&run.repo, &run.sha);
        let now = self.clock_ms;
        self.statuses.push(StatusRow {
            repo: run.repo.clone(),
            sha: run.sha.clone(),
            index,
            context,
            state: state.to_string(),
            description,
            target_url: format!(
                "/{OWNER}/{}/actions/runs/{}/jobs/{}",
                run.repo, run.index, j.index
            ),
            created_ms: now,
        });
    }

    /// `GET /commits/{sha}/status`: the latest status per context, newest first.
    fn latest_statuses(&self, repo: &str, sha: &str) -> Vec<&StatusRow> {
        let mut latest: BTreeMap<&str, &StatusRow> = BTreeMap::new();
        for r in self
            .statuses
            .iter()
            .filter(|r| r.repo == repo && r.sha == sha)
        {
            let slot = latest.entry(r.context.as_str()).or_insert(r);
            if r.index > slot.index {
                *slot = r;
            }
        }
        let mut out: Vec<&StatusRow> = latest.into_values().collect();
        out.sort_by_key(|r| std::cmp::Reverse(r.index));
        out
    }

    fn status_json(&self, r: &StatusRow, root: &str) -> Value {
        json!({
            "id": r.index,
            "status": r.state,
            "target_url": r.target_url,
            "description": r.description,
            "url": format!("{root}api/v1/repos/{OWNER}/{}/statuses/{}", r.repo, r.sha),
            "context": r.context,
            "creator": null,
            "created_at": self.time(r.created_ms),
            "updated_at": self.time(r.created_ms),
        })
    }

    fn touch_run(&mut self, run_id: i64) {
        let now = self.clock_ms;
        let run = self.runs.iter_mut().find(|r| r.id == run_id).unwrap();
        run.updated_ms = now;
        let status = aggregate(&run.jobs);
        if run.started_ms == 0 && run.jobs.iter().any(|j| j.task_id != 0) {
            run.started_ms = now;
        }
        if is_done(status) {
            if run.stopped_ms == 0 {
                run.stopped_ms = now;
            }
        } else {
            run.stopped_ms = 0;
        }
    }

    fn time(&self, ms: i64) -> String {
        let ts = jiff::Timestamp::from_millisecond(ms).expect("time in range");
        if self.utc_offset_secs == 0 {
            ts.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
        } else {
            let tz = jiff::tz::TimeZone::fixed(
                jiff::tz::Offset::from_seconds(self.utc_offset_secs).expect("offset"),
            );
            ts.to_zoned(tz).strftime("%Y-%m-%dT%H:%M:%S%:z").to_string()
        }
    }

    fn task_json(&self, t: &Task, root: &str) -> Value {
        let run = self.run(t.run_id).expect("task of a known run");
        let job = run
            .jobs
            .iter()
            .find(|j| j.id == t.job_id)
            .expect("task of a known job");
        json!({
            "id": t.id,
            "name": job.name,
            "head_branch": "main",
            "head_sha": run.sha,
            "run_number": run.index,
            "event": run.trigger,
            "display_title": run.title,
            "status": t.status,
            "workflow_id": run.workflow_id,
            "url": format!("{root}{OWNER}/{}/actions/runs/{}", run.repo, run.index),
            "created_at": self.time(t.created_ms),
            "updated_at": self.time(t.updated_ms),
            "run_started_at": self.time(t.started_ms),
        })
    }

    fn run_json(&self, r: &Run, root: &str) -> Value {
        let status = aggregate(&r.jobs);
        let mut v = json!({
            "id": r.id,
            "title": r.title,
            "repository": { "id": 63, "name": r.repo, "full_name": format!("{OWNER}/{}", r.repo), "private": true, "...": "..." },
            "workflow_id": r.workflow_id,
            "index_in_repo": r.index,
            "trigger_user": { "id": 2, "login": OWNER, "...": "..." },
            "ScheduleID": r.schedule_id,
            "prettyref": "main",
            "is_ref_deleted": false,
            "commit_sha": r.sha,
            "is_fork_pull_request": false,
            "need_approval": false,
            "approved_by": 0,
            // `Event.Event()`: push (cron runs re-registered by a push too) → "push";
            // workflow_dispatch and schedule have no case → "".
            "event": match r.trigger.as_str() {
                "push" | "schedule" => "push",
                "pull_request" | "pull_request_sync" => "pull_request",
                _ => "",
            },
            "event_payload": if r.trigger == "schedule" { r#"{"action":"created"}"# } else { "" },
            "trigger_event": r.trigger,
            "status": status,
            "started": self.time(r.started_ms),
            "stopped": self.time(r.stopped_ms),
            "created": self.time(r.created_ms),
            "updated": self.time(r.updated_ms),
            "html_url": format!("{root}{OWNER}/{}/actions/runs/{}", r.repo, r.index),
        });
        let end = if r.stopped_ms != 0 {
            r.stopped_ms
        } else {
            self.clock_ms
        };
        if r.started_ms != 0 && end > r.started_ms {
            // Nanoseconds, omitted when zero (`json:"duration,omitempty"`).
            v["duration"] = json!((end - r.started_ms) * 1_000_000);
        }
        v
    }

    fn job_json(&self, r: &Run, j: &Job) -> Value {
        json!({
            "id": j.id,
            "run_id": r.id,
            "attempt": j.attempt,
            "handle": format!("{:08x}-0000-4000-8000-{:012x}", j.id, j.attempt),
            "repo_id": 63,
            "owner_id": 2,
            "name": j.name,
            "needs": j.needs,
            "runs_on": null,
            "task_id": j.task_id,
            "status": j.status,
        })
    }
}

fn is_done(status: &str) -> bool {
    matches!(status, "success" | "failure" | "cancelled" | "skipped")
}

/// Forgejo's `AggregateJobStatus`.
fn aggregate(jobs: &[Job]) -> &'static str {
    let has = |s: &str| jobs.iter().any(|j| j.status == s);
    if jobs.is_empty() {
        "unknown"
    } else if jobs.iter().all(|j| j.status == "skipped") {
        "skipped"
    } else if jobs
        .iter()
        .all(|j| j.status == "success" || j.status == "skipped")
    {
        "success"
    } else if has("cancelled") {
        "cancelled"
    } else if has("failure") {
        "failure"
    } else if has("running") {
        "running"
    } else if has("waiting") {
        "waiting"
    } else if has("blocked") {
        "blocked"
    } else {
        "unknown"
    }
}

fn error_body(message: &str) -> Value {
    json!({ "message": message, "url": "https://forgejo.example/api/swagger" })
}

/// chi's answer for a route the router does not have.
fn no_route() -> ResponseTemplate {
    ResponseTemplate::new(404).set_body_raw(
        b"404 page not found\n".to_vec(),
        "text/plain; charset=utf-8",
    )
}

fn not_found() -> ResponseTemplate {
    ResponseTemplate::new(404).set_body_json(json!({
        "message": "The target couldn't be found.",
        "url": "https://forgejo.example/api/swagger",
        "errors": [],
    }))
}

struct Responder {
    state: Arc<Mutex<State>>,
}

impl Respond for Responder {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let path = req.url.path().to_string();
        let authorization = req
            .headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        s.hits.push(Hit {
            method: req.method.to_string(),
            path: path.clone(),
            query: req.url.query().unwrap_or("").to_string(),
            authorization: authorization.clone(),
        });

        let mut delay = None;
        if let Some(rule) = s
            .faults
            .iter_mut()
            .find(|f| f.remaining > 0 && path.contains(&f.path_contains))
        {
            rule.remaining = rule.remaining.saturating_sub(1);
            match rule.fault.clone() {
                Fault::Status(code) => {
                    return ResponseTemplate::new(code)
                        .set_body_json(error_body(&format!("injected {code}")));
                }
                Fault::StatusBody(code, body) => {
                    return ResponseTemplate::new(code).set_body_string(body);
                }
                Fault::Body(body) => {
                    return ResponseTemplate::new(200)
                        .set_body_raw(body.into_bytes(), "application/json;charset=utf-8");
                }
                Fault::EchoAuthorization(code) => {
                    let echoed = authorization.clone().unwrap_or_default();
                    return ResponseTemplate::new(code).set_body_json(error_body(&format!(
                        "bad request with Authorization: {echoed}"
                    )));
                }
                Fault::Delay(d) => delay = Some(d),
            }
        }

        if let Some(t) = &s.required_token {
            let ok = authorization
                .as_deref()
                .and_then(|a| a.strip_prefix("token "))
                .is_some_and(|given| given == t);
            if !ok {
                return ResponseTemplate::new(401).set_body_json(error_body("token is required"));
            }
        }

        let root = {
            let u = &req.url;
            format!(
                "{}://{}:{}/",
                u.scheme(),
                u.host_str().unwrap_or("127.0.0.1"),
                u.port().unwrap_or(80)
            )
        };
        let response = route(&s, req, &path, &root);
        match delay {
            Some(d) => response.set_delay(d),
            None => response,
        }
    }
}

fn query_param(req: &Request, key: &str) -> Vec<String> {
    req.url
        .query_pairs()
        .filter(|(k, _)| k == key)
        .map(|(_, v)| v.into_owned())
        .collect()
}

/// `page`/`limit` of the Actions lists: without `page` (or with page ≤ 0) `FindAndCount`
/// applies no LIMIT at all (`None`: every row).
fn list_paging(req: &Request) -> Option<(usize, usize)> {
    let page = query_param(req, "page")
        .first()
        .and_then(|p| p.parse::<i64>().ok())
        .filter(|p| *p > 0)?;
    Some((page as usize, paging(req).1))
}

fn list_page<T: Clone>(items: &[T], paging: Option<(usize, usize)>) -> Vec<T> {
    match paging {
        Some((page, limit)) => page_of(items, page, limit),
        None => items.to_vec(),
    }
}

/// `page`/`limit` as Forgejo reads them: page ≤ 0 → 1, limit default 30, max 50.
fn paging(req: &Request) -> (usize, usize) {
    let page = query_param(req, "page")
        .first()
        .and_then(|p| p.parse::<i64>().ok())
        .filter(|p| *p > 0)
        .unwrap_or(1) as usize;
    let limit = query_param(req, "limit")
        .first()
        .and_then(|p| p.parse::<i64>().ok())
        .filter(|l| *l > 0)
        .map(|l| l.min(50))
        .unwrap_or(30) as usize;
    (page, limit)
}

fn page_of<T: Clone>(items: &[T], page: usize, limit: usize) -> Vec<T> {
    items
        .iter()
        .skip((page - 1) * limit)
        .take(limit)
        .cloned()
        .collect()
}

fn route(s: &State, req: &Request, path: &str, root: &str) -> ResponseTemplate {
    if req.method.as_str() != "GET" {
        return ResponseTemplate::new(405).set_body_json(error_body("method not allowed"));
    }
    let Some(rest) = path.strip_prefix("/api/v1") else {
        return no_route();
    };
    if rest == "/version" {
        return ResponseTemplate::new(200).set_body_json(json!({ "version": s.version }));
    }
    let parts: Vec<&str> = rest.trim_start_matches('/').split('/').collect();
    let ["repos", owner, repo, tail @ ..] = parts.as_slice() else {
        return no_route();
    };
    if *owner != OWNER || !s.repos.contains(*repo) {
        return not_found();
    }
    let repo = repo.to_string();
    match tail {
        ["branches", branch @ ..] if !branch.is_empty() => {
            let name = branch.join("/");
            let from_git = s.git_dirs.get(&repo).and_then(|dir| {
                let out = std::process::Command::new("git")
                    .arg("--git-dir")
                    .arg(dir)
                    .args(["rev-parse", "--verify", "--quiet"])
                    .arg(format!("refs/heads/{name}^{{commit}}"))
                    .output()
                    .ok()?;
                let sha = String::from_utf8_lossy(&out.stdout).trim().to_string();
                (out.status.success() && !sha.is_empty()).then_some(sha)
            });
            match from_git
                .as_ref()
                .or_else(|| s.branches.get(&(repo.clone(), name.clone())))
            {
                Some(sha) => ResponseTemplate::new(200).set_body_json(json!({
                    "name": name,
                    "commit": { "id": sha, "message": "a commit\n", "url": format!("{root}{OWNER}/{repo}/commit/{sha}") },
                    "protected": false,
                })),
                None => not_found(),
            }
        }
        ["commits", sha, "status"] => {
            let latest = s.latest_statuses(&repo, sha);
            if latest.is_empty() {
                return ResponseTemplate::new(200).set_body_json(json!({
                    "state": "", "sha": "", "total_count": 0, "statuses": null,
                    "repository": null, "commit_url": "", "url": "",
                }));
            }
            let (page, limit) = paging(req);
            let shown = page_of(&latest, page, limit);
            let rank = |st: &str| match st {
                "error" => 0,
                "failure" => 1,
                "warning" => 2,
                "pending" => 3,
                "success" => 4,
                _ => 5,
            };
            let worst = latest
                .iter()
                .map(|r| r.state.as_str())
                .min_by_key(|st| rank(st))
                .unwrap_or("");
            let state = if worst == "error" { "failure" } else { worst };
            let statuses: Vec<Value> = shown.iter().map(|r| s.status_json(r, root)).collect();
            ResponseTemplate::new(200)
                .insert_header("X-Total-Count", latest.len().to_string().as_str())
                .set_body_json(json!({
                    "state": state,
                    "sha": sha,
                    "total_count": statuses.len(),
                    "statuses": statuses,
                    "repository": { "id": 63, "full_name": format!("{OWNER}/{repo}"), "...": "..." },
                    "commit_url": "",
                    "url": "",
                }))
        }
        ["actions", "tasks"] if s.features.level >= 8 => {
            let paging = list_paging(req);
            let mut tasks: Vec<&Task> = s
                .tasks
                .iter()
                .filter(|t| s.run(t.run_id).is_some_and(|r| r.repo == repo))
                .collect();
            tasks.sort_by_key(|t| std::cmp::Reverse(t.id));
            let entries: Vec<Value> = list_page(&tasks, paging)
                .into_iter()
                .map(|t| s.task_json(t, root))
                .collect();
            ResponseTemplate::new(200).set_body_json(json!({
                "workflow_runs": entries,
                "total_count": tasks.len(),
            }))
        }
        ["actions", "runs"] if s.features.runs_route => {
            let paging = list_paging(req);
            let head_sha = query_param(req, "head_sha");
            let events = query_param(req, "event");
            let mut runs: Vec<&Run> = s
                .runs
                .iter()
                .filter(|r| r.repo == repo)
                .filter(|r| head_sha.first().is_none_or(|sha| &r.sha == sha))
                // `?event=` filters on the stored event: a cron run's is `push`.
                .filter(|r| {
                    let stored = if r.trigger == "schedule" {
                        "push"
                    } else {
                        r.trigger.as_str()
                    };
                    events.is_empty() || events.iter().any(|e| e == stored)
                })
                .collect();
            if s.major >= 15 {
                runs.sort_by_key(|r| std::cmp::Reverse(r.id));
            } else {
                runs.sort_by_key(|r| r.id); // unspecified order before v15
            }
            let entries: Vec<Value> = list_page(&runs, paging)
                .into_iter()
                .map(|r| s.run_json(r, root))
                .collect();
            ResponseTemplate::new(200).set_body_json(json!({
                "workflow_runs": entries,
                "total_count": runs.len(),
            }))
        }
        ["actions", "runs", id] if s.features.runs_route => {
            match id.parse::<i64>().ok().and_then(|id| s.run(id)) {
                Some(r) if r.repo == repo => {
                    ResponseTemplate::new(200).set_body_json(s.run_json(r, root))
                }
                _ => ResponseTemplate::new(404).set_body_json(error_body("run not found")),
            }
        }
        ["actions", "runs", id, "jobs"] if s.features.jobs_route => {
            match id.parse::<i64>().ok().and_then(|id| s.run(id)) {
                Some(r) if r.repo == repo => {
                    let jobs: Vec<Value> = r.jobs.iter().map(|j| s.job_json(r, j)).collect();
                    ResponseTemplate::new(200).set_body_json(Value::Array(jobs))
                }
                _ => ResponseTemplate::new(404).set_body_json(error_body("run not found")),
            }
        }
        ["actions", "jobs", id, "logs"] if s.features.jobs_route => {
            let id = id.parse::<i64>().unwrap_or(-1);
            let in_repo = s
                .runs
                .iter()
                .any(|r| r.repo == repo && r.jobs.iter().any(|j| j.id == id));
            match s.logs.get(&id) {
                Some(text) if in_repo => ResponseTemplate::new(200)
                    .set_body_raw(text.clone().into_bytes(), "text/plain; charset=utf-8"),
                _ => ResponseTemplate::new(404).set_body_json(error_body("job not executed")),
            }
        }
        _ => no_route(),
    }
}
