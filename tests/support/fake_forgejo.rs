//! A fake Forgejo for tests: a wiremock server that answers the Actions API from a mutable
//! scenario, with payloads shaped like the real server's (see
//! `shared/reference/forgejo-actions-api.md` §2 and §8).
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
//! - runs (id, per-repo `index_in_repo`, `commit_sha`, event, workflow), their jobs (status,
//!   attempt, `task_id`) and tasks (one per job attempt a runner picked up);
//! - a job gets a task only when a runner picks it up (`running`, `success`, `failure`,
//!   `cancelled`): `waiting`, `blocked` and server-`skipped` jobs have none, as on Forgejo;
//! - run status aggregated from the jobs like `AggregateJobStatus`;
//! - endpoints by version: `/tasks` (≥ 8, newest first, `page`/`limit` honoured, no SHA
//!   filter), `/runs` (≥ 12, `head_sha`/`event`/`page`/`limit`; id order only from 15, before
//!   that ascending to catch clients that rely on order), `/runs/{id}` (≥ 12),
//!   `/runs/{id}/jobs` and `/jobs/{id}/logs` (≥ 16), `/branches/{name}`, `/version`;
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
    event: String,
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

#[derive(Debug)]
struct State {
    version: String,
    major: u32,
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

    /// Adds a run of workflow `ci.yml` for `sha` with jobs `(name, status)`; returns its id.
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
        let mut run = Run {
            id,
            repo: repo.to_string(),
            index,
            sha: sha.to_string(),
            event: event.to_string(),
            workflow_id: workflow.to_string(),
            title: format!("commit {}", &sha[..sha.len().min(7)]),
            created_ms: now,
            updated_ms: now,
            started_ms: 0,
            stopped_ms: 0,
            jobs: Vec::new(),
        };
        for (name, _) in jobs {
            let job_id = s.id();
            run.jobs.push(Job {
                id: job_id,
                name: name.to_string(),
                needs: None,
                status: "waiting".into(),
                attempt: 0,
                task_id: 0,
            });
        }
        s.runs.push(run);
        for (name, status) in jobs {
            s.set_job(id, name, status);
        }
        id
    }

    /// Sets a job's status. A runner "picks the job up" (creating a task, attempt + 1) when
    /// it enters `running`, `success`, `failure` or `cancelled` without a current task; a
    /// current task follows the job's status.
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

    /// Re-runs a job: it goes back to `waiting` without a task; the next pickup is a new
    /// attempt with a new (higher) task id.
    pub fn rerun_job(&self, run_id: i64, job: &str) {
        let mut s = self.lock();
        s.tick();
        let j = s.job_mut(run_id, job);
        j.status = "waiting".into();
        j.task_id = 0;
        s.touch_run(run_id);
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
        let picked_up = matches!(status, "running" | "success" | "failure" | "cancelled");
        let new_task = {
            let j = self.job_mut(run_id, job);
            j.status = status.to_string();
            j.task_id == 0 && picked_up
        };
        if new_task {
            let task_id = self.id();
            let j = self.job_mut(run_id, job);
            j.attempt += 1;
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
            "event": run.event,
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
            "ScheduleID": 0,
            "prettyref": "main",
            "is_ref_deleted": false,
            "commit_sha": r.sha,
            "is_fork_pull_request": false,
            "need_approval": false,
            "approved_by": 0,
            "event": r.event,
            "event_payload": "",
            "trigger_event": r.event,
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
            "handle": "",
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
        return not_found();
    };
    if rest == "/version" {
        return ResponseTemplate::new(200).set_body_json(json!({ "version": s.version }));
    }
    let parts: Vec<&str> = rest.trim_start_matches('/').split('/').collect();
    let ["repos", owner, repo, tail @ ..] = parts.as_slice() else {
        return not_found();
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
        ["actions", "tasks"] if s.major >= 8 => {
            let (page, limit) = paging(req);
            let mut tasks: Vec<&Task> = s
                .tasks
                .iter()
                .filter(|t| s.run(t.run_id).is_some_and(|r| r.repo == repo))
                .collect();
            tasks.sort_by_key(|t| std::cmp::Reverse(t.id));
            let entries: Vec<Value> = page_of(&tasks, page, limit)
                .into_iter()
                .map(|t| s.task_json(t, root))
                .collect();
            ResponseTemplate::new(200).set_body_json(json!({
                "workflow_runs": entries,
                "total_count": tasks.len(),
            }))
        }
        ["actions", "runs"] if s.major >= 12 => {
            let (page, limit) = paging(req);
            let head_sha = query_param(req, "head_sha");
            let events = query_param(req, "event");
            let mut runs: Vec<&Run> = s
                .runs
                .iter()
                .filter(|r| r.repo == repo)
                .filter(|r| head_sha.first().is_none_or(|sha| &r.sha == sha))
                .filter(|r| events.is_empty() || events.contains(&r.event))
                .collect();
            if s.major >= 15 {
                runs.sort_by_key(|r| std::cmp::Reverse(r.id));
            } else {
                runs.sort_by_key(|r| r.id); // unspecified order before v15
            }
            let entries: Vec<Value> = page_of(&runs, page, limit)
                .into_iter()
                .map(|r| s.run_json(r, root))
                .collect();
            ResponseTemplate::new(200).set_body_json(json!({
                "workflow_runs": entries,
                "total_count": runs.len(),
            }))
        }
        ["actions", "runs", id] if s.major >= 12 => {
            match id.parse::<i64>().ok().and_then(|id| s.run(id)) {
                Some(r) if r.repo == repo => {
                    ResponseTemplate::new(200).set_body_json(s.run_json(r, root))
                }
                _ => ResponseTemplate::new(404).set_body_json(error_body("run not found")),
            }
        }
        ["actions", "runs", id, "jobs"] if s.major >= 16 => {
            match id.parse::<i64>().ok().and_then(|id| s.run(id)) {
                Some(r) if r.repo == repo => {
                    let jobs: Vec<Value> = r.jobs.iter().map(|j| s.job_json(r, j)).collect();
                    ResponseTemplate::new(200).set_body_json(Value::Array(jobs))
                }
                _ => ResponseTemplate::new(404).set_body_json(error_body("run not found")),
            }
        }
        ["actions", "jobs", id, "logs"] if s.major >= 16 => {
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
        _ => not_found(),
    }
}
