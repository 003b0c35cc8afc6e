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
//! - pull requests, on every version, following `docs/forgejo-pulls.md` (the repository
//!   needs [`serve_git`](FakeForgejo::serve_git): branches, trial merges and merges are real
//!   git in its bare repository):
//!   - `POST /pulls` (`{head, base, title, body}`; `head` may be `orch-test:<branch>`): 201
//!     with the PullRequest; 422 `[Head]: Required`… and `head == base`; 404 for a missing
//!     base, then head, shaped per version (v9–v11 answer a missing head with a blank 500,
//!     their `IsCommitExist(baseBranch)` bug); 409 `pull request already exists for these
//!     targets [id: <id>, issue_id: <number>, …]` for an open duplicate. The head is written
//!     to `refs/pull/<n>/head`;
//!   - `GET /pulls/{n}`: `head.sha`/`base.sha` live from the branch tips (`head.ref` falls
//!     back to `refs/pull/<n>/head` once the branch is gone); `url` is the web URL before v16
//!     and the API URL from v16; `requested_reviewers(_teams)` `null` before v11, `flow` from
//!     v11; `mergeable` is false while checking, on a conflict (a real `git merge-tree`) or a
//!     WIP title. A push to the head or base (seen at the next request) re-queues an open
//!     pull request: `checking` for [`pull_checking_for`](FakeForgejo::pull_checking_for)
//!     GETs (default 0); a deleted head or base branch closes it;
//!   - `POST /pulls/{n}/merge` (`Do`, `head_commit_id`, `MergeTitleField`,
//!     `MergeMessageField`, `delete_branch_after_merge`, `force_merge`,
//!     `merge_when_checks_succeed`, `MergeCommitID`): the checks in Forgejo's order — 404
//!     unknown, 405 `""` merged, 404 closed, 405 WIP, 405 `Please try again later` (checking,
//!     conflict, nothing to merge), 405 `not allowed to merge [reason: …]`
//!     ([`protect_branch`](FakeForgejo::protect_branch); `force_merge` bypasses a rule that
//!     does not apply to admins), 201 for a scheduled auto-merge (never carried out), 405
//!     style not allowed, 409 `head out of date` (pin ≠ live head tip) — then a real merge in
//!     a temporary clone (merge commit, rebase, rebase-merge, squash, fast-forward-only;
//!     manually-merged when allowed) pushed to the base branch: 200 with an empty body, the
//!     pull request `merged`, `closed`, `merge_commit_sha` the new base tip, recorded in
//!     [`pull_merges`](FakeForgejo::pull_merges). Git failures map as Forgejo maps them (409
//!     conflict structs, `merge push out of date`, `PushRejected …`, a blank 500 for a
//!     diverged fast-forward-only);
//!   - `GET /pulls/{n}/merge`: 204 when merged, else the JSON 404;
//! - branch protection, following `docs/forgejo-branch-protection.md` (the same v8–v16):
//!   rules per repository ([`set_branch_rule`](FakeForgejo::set_branch_rule), a plain name
//!   or a gobwas glob); the first that matches a branch applies (plain names first, then the
//!   oldest) to its `protected` flag, to merges and to `delete_branch_after_merge`;
//!   `GET /repos/{owner}/{repo}/branch_protections` lists them in that order
//!   (`convert.ToBranchProtection`: whitelisted users only when they can read the repository,
//!   `branch_name` empty for a glob) after `repoAssignment` (404 per version), `reqToken`
//!   (401) and `reqAdmin` (403 `user should be an owner or a collaborator with admin write of
//!   a repository` when [`set_caller_admin(false)`](FakeForgejo::set_caller_admin));
//!   `GET /user` the caller (login [`OWNER`]); a token's scopes
//!   ([`set_token_scopes`](FakeForgejo::set_token_scopes)) checked before anything else on
//!   `/repos/…` and `/user` (403 `token does not have at least one of required scope(s):
//!   [read:repository]`);
//! - a required token (401 otherwise; the pull request POSTs always need an Authorization
//!   header), injected faults (status codes, raw bodies, delays, echoing the Authorization
//!   header back), and a record of every request (with its body).
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
    /// The request body as text (empty for a GET).
    pub body: String,
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
    /// The branch pushed (`prettyref`: `refs/heads/` left off).
    branch: String,
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
    /// `ROOT_URL` (the server's address, with a trailing slash) for pull request URLs.
    root_url: String,
    /// Pull requests of every repository, in creation order.
    pulls: Vec<Pull>,
    /// Every merge the fake performed (a push to the base branch).
    pull_merges: Vec<PullMerge>,
    /// GETs a pull request stays `checking` after a push to its head or base, per repository.
    checking_gets: BTreeMap<String, u32>,
    /// Branch protection rules of each repository, in creation order.
    protections: BTreeMap<String, Vec<StoredRule>>,
    /// Whether the caller has admin rights on the repositories (their owner: yes).
    caller_admin: bool,
    /// The scopes of the caller's token (`None`: a token of every scope, `all`).
    token_scopes: Option<Vec<String>>,
    /// Collaborators who can read every repository, in the order they were added (the owner
    /// reads too, listed after them).
    collaborators: Vec<String>,
    /// Allowed merge styles per repository (absent: Forgejo's defaults).
    merge_styles: BTreeMap<String, Vec<String>>,
    faults: Vec<FaultRule>,
    required_token: Option<String>,
    hits: Vec<Hit>,
    noise_counter: u64,
    /// The runs cancelled through `POST …/actions/runs/{id}/cancel`, in order.
    cancelled_by_api: Vec<i64>,
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
            root_url: String::new(),
            pulls: Vec::new(),
            pull_merges: Vec::new(),
            checking_gets: BTreeMap::new(),
            protections: BTreeMap::new(),
            caller_admin: true,
            token_scopes: None,
            collaborators: Vec::new(),
            merge_styles: BTreeMap::new(),
            faults: Vec::new(),
            required_token: None,
            hits: Vec::new(),
            noise_counter: 0,
            cancelled_by_api: Vec::new(),
        }));
        let server = MockServer::start().await;
        state.lock().unwrap().root_url = format!("{}/", server.uri());
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
            branch: "main".into(),
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

    /// Like [`add_run`](Self::add_run), a push run of `branch` (its `prettyref`).
    pub fn add_run_on(&self, repo: &str, sha: &str, branch: &str, jobs: &[(&str, &str)]) -> i64 {
        let id = self.add_run(repo, sha, "push", jobs);
        let mut s = self.lock();
        if let Some(r) = s.runs.iter_mut().find(|r| r.id == id) {
            r.branch = branch.to_string();
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
        s.cancel_open_jobs(run_id);
    }

    /// The runs cancelled through the API (`POST …/actions/runs/{id}/cancel`), in order.
    pub fn cancelled_by_api(&self) -> Vec<i64> {
        self.lock().cancelled_by_api.clone()
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

    // ---- pull requests (scenario) ----------------------------------------------------------

    /// After a push to the head or base branch of an open pull request of `repo` (a merge of
    /// a sibling included), the pull request is `checking` (`mergeable: false`, merge 405
    /// `Please try again later`) for its next `gets` GETs; then the check runs. Default 0:
    /// the check ends before anyone looks. A creation is always decided at once (Forgejo
    /// runs `testPatch` synchronously in `NewPullRequest`).
    pub fn pull_checking_for(&self, repo: &str, gets: u32) {
        self.lock().checking_gets.insert(repo.to_string(), gets);
    }

    /// Puts pull request `number` of `repo` into `checking` now, for its next `gets` GETs
    /// (as a push would; with 0 the check runs at once).
    pub fn set_pull_checking(&self, repo: &str, number: i64, gets: u32) {
        let mut s = self.lock();
        let idx = s
            .pull_idx(repo, number)
            .unwrap_or_else(|| panic!("fake forgejo: no pull request {repo}#{number}"));
        if gets == 0 {
            s.test_patch(idx);
        } else {
            s.pulls[idx].status = PullStatus::Checking;
            s.pulls[idx].checking_left = gets;
        }
    }

    /// Protects `branch` of `repo` with a rule that refuses a merge into it with 405
    /// `not allowed to merge [reason: <reason>]` (Forgejo's reasons: `Not all required status
    /// checks successful`, `Does not have enough approvals`, `There are requested changes`,
    /// `There are official review requests`, `The head branch is behind the base branch`,
    /// `Changed protected files`). The rule does not apply to admins (Forgejo's default), and
    /// the fake's caller owns the repository: `force_merge: true` bypasses it. A protected
    /// branch is also not deleted by `delete_branch_after_merge` (403).
    pub fn protect_branch(&self, repo: &str, branch: &str, reason: &str) {
        let mut rule = BranchRule::named(branch);
        rule.merge_refusal = Some(reason.to_string());
        self.set_branch_rule(repo, rule);
    }

    /// Like [`protect_branch`](Self::protect_branch) with `apply_to_admins`: `force_merge`
    /// does not bypass it.
    pub fn protect_branch_for_admins(&self, repo: &str, branch: &str, reason: &str) {
        let mut rule = BranchRule::named(branch);
        rule.merge_refusal = Some(reason.to_string());
        rule.apply_to_admins = true;
        self.set_branch_rule(repo, rule);
    }

    /// Removes the rule named `branch` (a rule name: a branch or a glob).
    pub fn unprotect_branch(&self, repo: &str, branch: &str) {
        if let Some(rules) = self.lock().protections.get_mut(repo) {
            rules.retain(|r| r.rule.rule_name != branch);
        }
    }

    /// Adds a branch protection rule to `repo`, or replaces the one of the same name (which
    /// keeps its creation time, so its place among the rules). Rules apply as Forgejo applies
    /// them: the first that matches a branch, plain names before globs, the oldest first.
    pub fn set_branch_rule(&self, repo: &str, rule: BranchRule) {
        let mut s = self.lock();
        let now = s.clock_ms;
        let id = s.id();
        let rules = s.protections.entry(repo.to_string()).or_default();
        match rules
            .iter_mut()
            .find(|r| r.rule.rule_name == rule.rule_name)
        {
            Some(row) => {
                row.rule = rule;
                row.updated_ms = now;
            }
            None => rules.push(StoredRule {
                id,
                rule,
                created_ms: now,
                updated_ms: now,
            }),
        }
    }

    /// Whether the caller has admin rights on the repositories (default: yes, it owns them).
    /// Without, `GET …/branch_protections` answers 403 and `force_merge` bypasses nothing.
    pub fn set_caller_admin(&self, admin: bool) {
        self.lock().caller_admin = admin;
    }

    /// The scopes of the caller's token (`read:repository`, `write:user`, `all`, …); `None`
    /// (the default): every scope. A request outside them answers 403 before anything else
    /// (`tokenRequiresScopes`).
    pub fn set_token_scopes(&self, scopes: Option<&[&str]>) {
        self.lock().token_scopes = scopes.map(|s| s.iter().map(|x| x.to_string()).collect());
    }

    /// A user who can read every repository (only readers are listed in whitelists).
    pub fn add_collaborator(&self, user: &str) {
        let mut s = self.lock();
        if !s.collaborators.iter().any(|c| c == user) {
            s.collaborators.push(user.to_string());
        }
    }

    /// The merge styles `repo` allows (`Do` values). Default: `merge`, `rebase`,
    /// `rebase-merge`, `squash`, `fast-forward-only` (a new repository's settings; not
    /// `manually-merged`).
    pub fn allow_merge_styles(&self, repo: &str, styles: &[&str]) {
        self.lock().merge_styles.insert(
            repo.to_string(),
            styles.iter().map(|s| s.to_string()).collect(),
        );
    }

    /// Closes pull request `number` of `repo` without merging it (a human did).
    pub fn close_pull(&self, repo: &str, number: i64) {
        let mut s = self.lock();
        s.tick();
        let now = s.clock_ms;
        let idx = s
            .pull_idx(repo, number)
            .unwrap_or_else(|| panic!("fake forgejo: no pull request {repo}#{number}"));
        let p = &mut s.pulls[idx];
        p.closed = true;
        p.closed_ms = now;
        p.updated_ms = now;
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

    /// Pull request `number` of `repo` as `GET …/pulls/{number}` answers it now (without
    /// counting as one of the GETs of a check).
    pub fn pull(&self, repo: &str, number: i64) -> Option<Value> {
        let mut s = self.lock();
        s.sync_pulls(repo);
        let idx = s.pull_idx(repo, number)?;
        Some(s.pull_json(&s.pulls[idx], &s.root_url))
    }

    /// Every merge the fake performed for `repo`, in order: each one pushed the base branch.
    pub fn pull_merges(&self, repo: &str) -> Vec<PullMerge> {
        self.lock()
            .pull_merges
            .iter()
            .filter(|m| m.repo == repo)
            .cloned()
            .collect()
    }

    /// The style of the auto-merge scheduled for pull request `number` (`merge_when_checks_succeed`),
    /// if any. The fake never carries it out.
    pub fn auto_merge_scheduled(&self, repo: &str, number: i64) -> Option<String> {
        let s = self.lock();
        let idx = s.pull_idx(repo, number)?;
        s.pulls[idx].auto_merge.clone()
    }
}

impl State {
    fn tick(&mut self) {
        self.clock_ms += 1000;
    }

    /// Every unfinished job of `run_id` cancelled (a job no runner picked up, without a task).
    fn cancel_open_jobs(&mut self, run_id: i64) {
        let open: Vec<String> = self
            .run(run_id)
            .expect("run")
            .jobs
            .iter()
            .filter(|j| !is_done(&j.status))
            .map(|j| j.name.clone())
            .collect();
        for name in open {
            self.set_job(run_id, &name, "cancelled");
        }
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
            "prettyref": r.branch,
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
            body: String::from_utf8_lossy(&req.body).into_owned(),
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
        let response = route(&mut s, req, &path, &root);
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

fn route(s: &mut State, req: &Request, path: &str, root: &str) -> ResponseTemplate {
    if let Some(needed) = missing_scope(s, req, path) {
        return api_error(
            403,
            &format!("token does not have at least one of required scope(s): [{needed}]"),
        );
    }
    if let Some(response) = protections_route(s, req, path) {
        return response;
    }
    if let Some(response) = pulls_route(s, req, path) {
        return response;
    }
    if let Some(response) = cancel_route(s, req, path) {
        return response;
    }
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
                    "protected": s.rule_for(&repo, &name).is_some(),
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

// ---- pull requests ------------------------------------------------------------------------
//
// `docs/forgejo-pulls.md` is the reference: every status, message and order of checks below
// follows it (and the Forgejo source it cites).

/// The merge styles of `MergePullRequestForm.Do` (`binding:"In(…)"`).
const MERGE_STYLES: [&str; 6] = [
    "merge",
    "rebase",
    "rebase-merge",
    "squash",
    "fast-forward-only",
    "manually-merged",
];
/// What a new repository allows (`modules/repository/create.go`): all but manually-merged.
const DEFAULT_MERGE_STYLES: [&str; 5] = [
    "merge",
    "rebase",
    "rebase-merge",
    "squash",
    "fast-forward-only",
];
/// The git identity of the fake's caller (the owner of every repository), who merges.
const DOER_EMAIL: &str = "orch-test@noreply.forgejo.example";
const SWAGGER_URL: &str = "https://forgejo.example/api/swagger";

/// `PullRequestStatus` (`models/issues/pull.go`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PullStatus {
    Conflict,
    Checking,
    Mergeable,
    ManuallyMerged,
    Error,
    Empty,
    Ancestor,
}

#[derive(Debug, Clone)]
struct Pull {
    /// The `pull_request` row id (not the number).
    id: i64,
    repo: String,
    /// The per-repository index (`number` in JSON).
    number: i64,
    title: String,
    body: String,
    head: String,
    base: String,
    /// The status of the last check (`testPatch`).
    status: PullStatus,
    merge_base: String,
    /// GETs left before the running check ends.
    checking_left: u32,
    /// The head and base tips the server last saw (a change is a push: `TestPullRequest`).
    seen_head: Option<String>,
    seen_base: Option<String>,
    closed: bool,
    merged: bool,
    merge_commit: String,
    /// The style of a scheduled auto-merge.
    auto_merge: Option<String>,
    created_ms: i64,
    updated_ms: i64,
    closed_ms: i64,
    merged_ms: i64,
}

/// A branch protection rule (`ProtectedBranch`), the settings `…/branch_protections` lists.
/// Every other field of the answer is its zero value.
#[derive(Debug, Clone, Default)]
pub struct BranchRule {
    /// A branch name or a gobwas glob (`/` as separator).
    pub rule_name: String,
    pub enable_push: bool,
    pub enable_push_whitelist: bool,
    /// Listed only for users who can read the repository (the owner and
    /// [`add_collaborator`](FakeForgejo::add_collaborator)s).
    pub push_whitelist_usernames: Vec<String>,
    pub push_whitelist_teams: Vec<String>,
    pub push_whitelist_deploy_keys: bool,
    pub enable_merge_whitelist: bool,
    pub merge_whitelist_usernames: Vec<String>,
    pub merge_whitelist_teams: Vec<String>,
    pub enable_status_check: bool,
    pub status_check_contexts: Vec<String>,
    pub required_approvals: i64,
    pub apply_to_admins: bool,
    /// Why a merge into a branch it covers is refused (`not allowed to merge [reason: …]`):
    /// the check it stands for fails. `None`: merges pass its checks.
    pub merge_refusal: Option<String>,
}

impl BranchRule {
    /// A rule as a new one is: pushes disabled, nothing whitelisted.
    pub fn named(rule_name: &str) -> BranchRule {
        BranchRule {
            rule_name: rule_name.to_string(),
            ..BranchRule::default()
        }
    }

    /// Pushes enabled for everyone with write access.
    pub fn open(mut self) -> BranchRule {
        self.enable_push = true;
        self
    }

    /// Pushes enabled for `users` only.
    pub fn push_whitelist(mut self, users: &[&str]) -> BranchRule {
        self.enable_push = true;
        self.enable_push_whitelist = true;
        self.push_whitelist_usernames = users.iter().map(|u| u.to_string()).collect();
        self
    }
}

#[derive(Debug, Clone)]
struct StoredRule {
    id: i64,
    rule: BranchRule,
    created_ms: i64,
    updated_ms: i64,
}

/// A merge the fake performed through `POST …/pulls/{index}/merge`: a push to the base
/// branch of the bare repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullMerge {
    pub repo: String,
    pub number: i64,
    /// The `Do` of the request: merge, rebase, rebase-merge, squash, fast-forward-only, or
    /// manually-merged (nothing pushed: `base_before == base_after`).
    pub style: String,
    pub base: String,
    pub head: String,
    /// The head tip that was merged.
    pub head_sha: String,
    /// The base branch before and after the push; `base_after` is the `merge_commit_sha`.
    pub base_before: String,
    pub base_after: String,
    /// The message the merge was asked for (empty for rebase and fast-forward-only, which
    /// keep the head's commits).
    pub message: String,
}

struct GitOut {
    ok: bool,
    stdout: String,
    stderr: String,
}

/// Runs git in `dir` as the fake's caller, isolated from the machine's configuration.
fn git_in(dir: &std::path::Path, args: &[&str]) -> GitOut {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_AUTHOR_NAME", OWNER)
        .env("GIT_AUTHOR_EMAIL", DOER_EMAIL)
        .env("GIT_COMMITTER_NAME", OWNER)
        .env("GIT_COMMITTER_EMAIL", DOER_EMAIL)
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_EDITOR", "true")
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .env_remove("GIT_INDEX_FILE")
        .output();
    match out {
        Ok(o) => GitOut {
            ok: o.status.success(),
            stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        },
        Err(e) => GitOut {
            ok: false,
            stdout: String::new(),
            stderr: e.to_string(),
        },
    }
}

/// The trimmed stdout of a successful git command, if not empty.
fn git_line(dir: &std::path::Path, args: &[&str]) -> Option<String> {
    let o = git_in(dir, args);
    let line = o.stdout.trim().to_string();
    (o.ok && !line.is_empty()).then_some(line)
}

fn ref_tip(dir: &std::path::Path, refname: &str) -> Option<String> {
    git_line(
        dir,
        &[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("{refname}^{{commit}}"),
        ],
    )
}

fn branch_tip(dir: &std::path::Path, branch: &str) -> Option<String> {
    ref_tip(dir, &format!("refs/heads/{branch}"))
}

/// `IsCommitExist`: `git cat-file -e <name>` (any name git resolves; `AddDynamicArguments`
/// refuses one that starts with `-`).
fn object_exists(dir: &std::path::Path, name: &str) -> bool {
    !name.starts_with('-') && git_in(dir, &["cat-file", "-e", name]).ok
}

/// `HasWorkInProgressPrefix` with the default `WORK_IN_PROGRESS_PREFIXES` (`WIP:`, `[WIP]`).
fn is_wip(title: &str) -> bool {
    let t = title.to_uppercase();
    t.starts_with("WIP:") || t.starts_with("[WIP]")
}

/// `ctx.Error(status, _, msg)`: `{"message","url"}`.
fn api_error(status: u16, message: &str) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_json(error_body(message))
}

/// `ctx.NotFound(objs...)`: a string replaces the default message, errors are listed. v8
/// writes a map (sorted keys, `errors: null` without errors), v9+ the `APINotFound` struct.
fn api_not_found(level: u32, message: Option<&str>, errors: &[String]) -> ResponseTemplate {
    let message = message.unwrap_or("The target couldn't be found.");
    let body = if level <= 8 {
        let errors = if errors.is_empty() {
            Value::Null
        } else {
            json!(errors)
        };
        json!({ "errors": errors, "message": message, "url": SWAGGER_URL })
    } else {
        json!({ "message": message, "url": SWAGGER_URL, "errors": errors })
    };
    ResponseTemplate::new(404).set_body_json(body)
}

/// A 500 in production for a caller who is not a site admin: the message is blanked.
fn internal_error() -> ResponseTemplate {
    api_error(500, "")
}

/// The type of a JSON field of a Go form, for go-chi binding.
#[derive(Clone, Copy)]
enum GoType {
    Str,
    Bool,
}

/// A field of a form: its JSON key (Go matches it case-insensitively), its Go name (in
/// binding errors) and whether it is `binding:"Required"`.
struct FormField {
    key: &'static str,
    go_name: &'static str,
    ty: GoType,
    required: bool,
}

/// A bound form: JSON key → value (absent and `null` mean the zero value).
struct Form(BTreeMap<&'static str, Value>);

impl Form {
    fn str(&self, key: &str) -> String {
        self.0
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    }

    fn bool(&self, key: &str) -> bool {
        self.0.get(key).and_then(Value::as_bool).unwrap_or(false)
    }
}

/// `bind(form)` (`routers/api/v1/api.go`): decode the JSON body into the form (Go's
/// `encoding/json`: keys match case-insensitively, an exact match first; an empty body is
/// an empty form), then check `Required`; the first error (`[<Field>]: <error>`) is the
/// message of a 422. The texts of decoding errors are Go's in shape only.
/// `form` is the Go type, e.g. `forms.MergePullRequestForm`.
fn bind(body: &[u8], form: &str, fields: &[FormField]) -> Result<Form, String> {
    let object = if body.iter().all(u8::is_ascii_whitespace) {
        serde_json::Map::new()
    } else {
        match serde_json::from_slice::<Value>(body) {
            Ok(Value::Object(o)) => o,
            Ok(other) => {
                let kind = go_kind(&other);
                return Err(format!(
                    "[]: json: cannot unmarshal {kind} into Go value of type {form}"
                ));
            }
            Err(e) => return Err(format!("[]: {e}")),
        }
    };
    let mut values = BTreeMap::new();
    for f in fields {
        let value = object.get(f.key).or_else(|| {
            object
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(f.key))
                .map(|(_, v)| v)
        });
        let Some(value) = value else { continue };
        let fits = match f.ty {
            _ if value.is_null() => true,
            GoType::Str => value.is_string(),
            GoType::Bool => value.is_boolean(),
        };
        if !fits {
            let go_type = match f.ty {
                GoType::Str => "string",
                GoType::Bool => "bool",
            };
            let name = form.rsplit('.').next().unwrap_or(form);
            return Err(format!(
                "[]: json: cannot unmarshal {} into Go struct field {name}.{} of type {go_type}",
                go_kind(value),
                f.key
            ));
        }
        values.insert(f.key, value.clone());
    }
    let bound = Form(values);
    for f in fields.iter().filter(|f| f.required) {
        if bound.str(f.key).is_empty() {
            return Err(format!("[{}]: Required", f.go_name));
        }
    }
    Ok(bound)
}

fn go_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A merge that failed after the checks (`pull_service.Merge`).
enum MergeFailure {
    /// 409 with the error struct itself as the body (`ErrMergeConflicts`, …).
    Conflict(Value),
    /// 409 `merge push out of date`.
    PushOutOfDate,
    /// 409 `PushRejected …` (a hook of the bare repository refused the push).
    PushRejected(String),
    /// 500 (e.g. fast-forward-only on a diverged head: not mapped).
    Internal,
}

/// `doMergeAndPush`: a temporary repository with the base branch (`base`,
/// `original_base`) and the head (`tracking`), the style's git commands, and a push of the
/// result to the base branch of `dir`. Returns the new base tip.
fn merge_and_push(
    dir: &std::path::Path,
    base: &str,
    head: &str,
    style: &str,
    message: &str,
) -> Result<String, MergeFailure> {
    let tmp = tempfile::tempdir().map_err(|_| MergeFailure::Internal)?;
    let t = tmp.path();
    let src = dir.to_string_lossy().into_owned();
    let setup: [&[&str]; 3] = [
        &["init", "-q", "-b", "forgejo-tmp"],
        &[
            "fetch",
            "-q",
            "--no-tags",
            &src,
            &format!("+refs/heads/{base}:refs/heads/base"),
            &format!("+refs/heads/{base}:refs/heads/original_base"),
            &format!("+refs/heads/{head}:refs/heads/tracking"),
        ],
        &["checkout", "-q", "base"],
    ];
    for args in setup {
        if !git_in(t, args).ok {
            return Err(MergeFailure::Internal);
        }
    }
    // `runMergeCommand`: a MERGE_HEAD is a conflict; unrelated histories have their error.
    let run_merge = |args: &[&str], style: &str| -> Result<(), MergeFailure> {
        let o = git_in(t, args);
        if o.ok {
            return Ok(());
        }
        if t.join(".git/MERGE_HEAD").exists()
            || o.stderr.contains("refusing to merge unrelated histories")
        {
            return Err(MergeFailure::Conflict(json!({
                "Style": style, "StdOut": o.stdout, "StdErr": o.stderr, "Err": {},
            })));
        }
        Err(MergeFailure::Internal)
    };
    // `commitAndSignNoAuthor`.
    let commit = |message: &str| -> Result<(), MergeFailure> {
        let msg = format!("--message={message}");
        if git_in(t, &["commit", &msg, "--no-gpg-sign"]).ok {
            Ok(())
        } else {
            Err(MergeFailure::Internal)
        }
    };
    match style {
        "merge" => {
            run_merge(&["merge", "--no-ff", "--no-commit", "tracking"], style)?;
            commit(message)?;
        }
        "rebase" | "rebase-merge" => {
            if !git_in(t, &["checkout", "-q", "-b", "staging", "tracking"]).ok {
                return Err(MergeFailure::Internal);
            }
            let o = git_in(t, &["rebase", "base"]);
            if !o.ok {
                if t.join(".git/REBASE_HEAD").exists() {
                    let sha = std::fs::read_to_string(t.join(".git/rebase-merge/stopped-sha"))
                        .unwrap_or_default();
                    return Err(MergeFailure::Conflict(json!({
                        "Style": style, "CommitSHA": sha.trim(), "StdOut": o.stdout,
                        "StdErr": o.stderr, "Err": {},
                    })));
                }
                return Err(MergeFailure::Internal);
            }
            if !git_in(t, &["checkout", "-q", "base"]).ok {
                return Err(MergeFailure::Internal);
            }
            if style == "rebase" {
                // Without a merge-message template the rebased commits are kept as they are.
                run_merge(&["merge", "--ff-only", "staging"], style)?;
            } else {
                run_merge(&["merge", "--no-ff", "--no-commit", "staging"], style)?;
                commit(message)?;
            }
        }
        "squash" => {
            run_merge(&["merge", "--squash", "tracking"], style)?;
            // The poster is the author (here the caller too: no Co-authored-by trailer);
            // Forgejo really passes the quotes, which git drops.
            let author = format!("--author='{OWNER} <{DOER_EMAIL}>'");
            let msg = format!("--message={message}");
            if !git_in(t, &["commit", &author, &msg, "--no-gpg-sign"]).ok {
                return Err(MergeFailure::Internal);
            }
        }
        "fast-forward-only" => {
            // `ErrMergeDivergingFastForwardOnly` is not mapped by the API: a 500.
            run_merge(&["merge", "--ff-only", "tracking"], style)?;
        }
        _ => return Err(MergeFailure::Internal),
    }
    let new_tip = git_line(t, &["rev-parse", "base"]).ok_or(MergeFailure::Internal)?;
    let push = git_in(t, &["push", &src, &format!("base:refs/heads/{base}")]);
    if !push.ok {
        if push.stderr.contains("non-fast-forward") {
            return Err(MergeFailure::PushOutOfDate);
        }
        if push.stderr.contains("! [remote rejected]") {
            // `ErrPushRejected.GenerateMessage`: the `remote: ` lines.
            let message: Vec<&str> = push
                .stderr
                .lines()
                .filter_map(|l| l.strip_prefix("remote: "))
                .collect();
            return Err(MergeFailure::PushRejected(
                message.join("\n").trim().to_string(),
            ));
        }
        return Err(MergeFailure::Internal);
    }
    Ok(new_tip)
}

impl State {
    /// Repository ids: 63 for [`REPO`] (as in the Actions payloads), then by name.
    fn repo_id(&self, repo: &str) -> i64 {
        if repo == REPO {
            return 63;
        }
        64 + self
            .repos
            .iter()
            .filter(|r| r.as_str() != REPO)
            .position(|r| r == repo)
            .unwrap_or(0) as i64
    }

    /// The bare repository's `HEAD` branch.
    fn default_branch(&self, repo: &str) -> String {
        self.git_dirs
            .get(repo)
            .and_then(|d| git_line(d, &["symbolic-ref", "--short", "HEAD"]))
            .unwrap_or_else(|| "main".to_string())
    }

    fn pull_idx(&self, repo: &str, number: i64) -> Option<usize> {
        self.pulls
            .iter()
            .position(|p| p.repo == repo && p.number == number)
    }

    fn merge_style_allowed(&self, repo: &str, style: &str) -> bool {
        match self.merge_styles.get(repo) {
            Some(styles) => styles.iter().any(|s| s == style),
            None => DEFAULT_MERGE_STYLES.contains(&style),
        }
    }

    /// What the push hooks did since the last look, for every open pull request of `repo`.
    fn sync_pulls(&mut self, repo: &str) {
        for idx in 0..self.pulls.len() {
            if self.pulls[idx].repo == repo {
                self.sync_pull(idx);
            }
        }
    }

    /// A changed head or base tip is a push: `TestPullRequest` writes the head to
    /// `refs/pull/<n>/head` (head pushes) and re-queues the pull request as `checking`
    /// (`AddToTaskQueue`); a deleted head or base branch closes it (`CloseBranchPulls`).
    fn sync_pull(&mut self, idx: usize) {
        let p = &self.pulls[idx];
        if p.merged || p.closed {
            return;
        }
        let Some(dir) = self.git_dirs.get(&p.repo).cloned() else {
            return;
        };
        let head_tip = branch_tip(&dir, &p.head);
        let base_tip = branch_tip(&dir, &p.base);
        if head_tip == p.seen_head && base_tip == p.seen_base {
            return;
        }
        let deleted = (p.seen_head.is_some() && head_tip.is_none())
            || (p.seen_base.is_some() && base_tip.is_none());
        if deleted {
            self.tick();
            let now = self.clock_ms;
            let p = &mut self.pulls[idx];
            p.closed = true;
            p.closed_ms = now;
            p.updated_ms = now;
            return;
        }
        if head_tip != p.seen_head
            && let Some(tip) = &head_tip
        {
            let pull_ref = format!("refs/pull/{}/head", p.number);
            git_in(&dir, &["update-ref", &pull_ref, tip]);
        }
        let gets = self.checking_gets.get(&p.repo).copied().unwrap_or(0);
        let p = &mut self.pulls[idx];
        p.seen_head = head_tip;
        p.seen_base = base_tip;
        if gets > 0 {
            p.status = PullStatus::Checking;
            p.checking_left = gets;
        } else {
            self.test_patch(idx);
        }
    }

    /// `testPatch` on the live tips: `Ancestor` when the head is the merge base, a trial
    /// merge (`git merge-tree`) decides `Conflict`, `Empty` (the merged tree is the base's)
    /// or `Mergeable`; a missing branch is an `Error`.
    fn test_patch(&mut self, idx: usize) {
        let p = &self.pulls[idx];
        let tips = self.git_dirs.get(&p.repo).cloned().and_then(|dir| {
            let head = branch_tip(&dir, &p.head)?;
            let base = branch_tip(&dir, &p.base)?;
            Some((dir, head, base))
        });
        let Some((dir, head, base)) = tips else {
            let p = &mut self.pulls[idx];
            p.status = PullStatus::Error;
            p.checking_left = 0;
            return;
        };
        // Unrelated histories: the base tip stands in for the merge base.
        let merge_base = git_line(&dir, &["merge-base", &base, &head]).unwrap_or(base.clone());
        let status = if head == merge_base {
            PullStatus::Ancestor
        } else {
            let o = git_in(
                &dir,
                &["merge-tree", "--write-tree", "--no-messages", &base, &head],
            );
            let tree = o.stdout.lines().next().unwrap_or("").trim().to_string();
            if o.ok {
                let base_tree = git_line(&dir, &["rev-parse", &format!("{base}^{{tree}}")]);
                if base_tree.as_deref() == Some(tree.as_str()) {
                    PullStatus::Empty
                } else {
                    PullStatus::Mergeable
                }
            } else if o.stderr.contains("unrelated histories") {
                // A three-way merge against the base tip applies cleanly; the merge itself
                // then answers 409.
                PullStatus::Mergeable
            } else {
                PullStatus::Conflict
            }
        };
        let p = &mut self.pulls[idx];
        p.merge_base = merge_base;
        p.status = status;
        p.checking_left = 0;
    }

    /// `FindRepoProtectedBranchRules`: plain names first, then globs; the oldest first.
    fn sorted_rules(&self, repo: &str) -> Vec<&StoredRule> {
        let mut rules: Vec<&StoredRule> = self
            .protections
            .get(repo)
            .map(|r| r.iter().collect())
            .unwrap_or_default();
        rules.sort_by_key(|r| (is_glob_rule(&r.rule.rule_name), r.created_ms, r.id));
        rules
    }

    /// `GetFirstMatchProtectedBranchRule`: the rule that applies to `branch`.
    fn rule_for(&self, repo: &str, branch: &str) -> Option<&BranchRule> {
        self.sorted_rules(repo)
            .into_iter()
            .map(|r| &r.rule)
            .find(|r| rule_match(&r.rule_name, branch))
    }

    /// `convert.ToBranchProtection`, keys in `structs.BranchProtection` order.
    fn rule_json(&self, r: &StoredRule) -> Value {
        let b = &r.rule;
        // `getWhitelistEntities`: the repository's readers (collaborators, then the owner)
        // who are whitelisted, in the readers' order; always a list.
        let readers: Vec<&str> = self
            .collaborators
            .iter()
            .map(String::as_str)
            .chain([OWNER])
            .collect();
        let users = |names: &[String]| -> Vec<String> {
            readers
                .iter()
                .filter(|u| names.iter().any(|n| n == *u))
                .map(|u| u.to_string())
                .collect()
        };
        let contexts = if b.status_check_contexts.is_empty() {
            Value::Null
        } else {
            json!(b.status_check_contexts)
        };
        json!({
            "branch_name": if is_glob_rule(&b.rule_name) { "" } else { b.rule_name.as_str() },
            "rule_name": b.rule_name,
            "enable_push": b.enable_push,
            "enable_push_whitelist": b.enable_push_whitelist,
            "push_whitelist_usernames": users(&b.push_whitelist_usernames),
            "push_whitelist_teams": b.push_whitelist_teams,
            "push_whitelist_deploy_keys": b.push_whitelist_deploy_keys,
            "enable_merge_whitelist": b.enable_merge_whitelist,
            "merge_whitelist_usernames": users(&b.merge_whitelist_usernames),
            "merge_whitelist_teams": b.merge_whitelist_teams,
            "enable_status_check": b.enable_status_check,
            "status_check_contexts": contexts,
            "required_approvals": b.required_approvals,
            "enable_approvals_whitelist": false,
            "approvals_whitelist_username": [],
            "approvals_whitelist_teams": [],
            "block_on_rejected_reviews": false,
            "block_on_official_review_requests": false,
            "block_on_outdated_branch": false,
            "dismiss_stale_approvals": false,
            "ignore_stale_approvals": false,
            "require_signed_commits": false,
            "protected_file_patterns": "",
            "unprotected_file_patterns": "",
            "apply_to_admins": b.apply_to_admins,
            "created_at": self.time(r.created_ms),
            "updated_at": self.time(r.updated_ms),
        })
    }

    fn user_json(&self) -> Value {
        json!({ "id": 2, "login": OWNER, "email": DOER_EMAIL, "...": "..." })
    }

    /// `convert.ToRepo`, the fields that matter for pull requests.
    fn repo_json(&self, repo: &str, root: &str) -> Value {
        let allowed = |s: &str| self.merge_style_allowed(repo, s);
        json!({
            "id": self.repo_id(repo),
            "owner": self.user_json(),
            "name": repo,
            "full_name": format!("{OWNER}/{repo}"),
            "private": true,
            "fork": false,
            "html_url": format!("{root}{OWNER}/{repo}"),
            "clone_url": format!("{root}{OWNER}/{repo}.git"),
            "default_branch": self.default_branch(repo),
            "has_pull_requests": true,
            "allow_merge_commits": allowed("merge"),
            "allow_rebase": allowed("rebase"),
            "allow_rebase_explicit": allowed("rebase-merge"),
            "allow_squash_merge": allowed("squash"),
            "allow_fast_forward_only_merge": allowed("fast-forward-only"),
            "allow_rebase_update": true,
            "default_delete_branch_after_merge": false,
            "default_merge_style": "merge",
            "...": "...",
        })
    }

    /// `convert.ToAPIPullRequest`, keys in `structs.PullRequest` order.
    fn pull_json(&self, p: &Pull, root: &str) -> Value {
        let level = self.features.level;
        let dir = self.git_dirs.get(&p.repo);
        let base_sha = dir.and_then(|d| branch_tip(d, &p.base)).unwrap_or_default();
        // The branch while it exists, else `refs/pull/<n>/head`.
        let pull_ref = format!("refs/pull/{}/head", p.number);
        let (head_ref, head_sha) = match dir.and_then(|d| branch_tip(d, &p.head)) {
            Some(sha) => (p.head.clone(), sha),
            None => (
                pull_ref.clone(),
                dir.and_then(|d| ref_tip(d, &pull_ref)).unwrap_or_default(),
            ),
        };
        let (mut files, mut additions, mut deletions) = (0, 0, 0);
        if let Some(d) = dir
            && !p.merge_base.is_empty()
            && !head_sha.is_empty()
            && let Some(stat) = git_line(d, &["diff", "--shortstat", &p.merge_base, &head_sha])
        {
            for part in stat.split(',') {
                let n: i64 = part
                    .split_whitespace()
                    .next()
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0);
                if part.contains("file") {
                    files = n;
                } else if part.contains("insertion") {
                    additions = n;
                } else if part.contains("deletion") {
                    deletions = n;
                }
            }
        }
        let wip = is_wip(&p.title);
        let mergeable = !matches!(
            p.status,
            PullStatus::Checking | PullStatus::Conflict | PullStatus::Error
        ) && !wip;
        let html_url = format!("{root}{OWNER}/{}/pulls/{}", p.repo, p.number);
        let url = if level >= 16 {
            format!("{root}api/v1/repos/{OWNER}/{}/pulls/{}", p.repo, p.number)
        } else {
            html_url.clone()
        };
        let time_or_null = |ms: i64| {
            if ms == 0 {
                Value::Null
            } else {
                json!(self.time(ms))
            }
        };
        let repo_id = self.repo_id(&p.repo);
        let repo = self.repo_json(&p.repo, root);
        let mut v = serde_json::Map::new();
        let mut put = |k: &str, val: Value| {
            v.insert(k.to_string(), val);
        };
        put("id", json!(p.id));
        put("url", json!(url));
        put("number", json!(p.number));
        put("user", self.user_json());
        put("title", json!(p.title));
        put("body", json!(p.body));
        put("labels", json!([]));
        put("milestone", Value::Null);
        put("assignee", Value::Null);
        put("assignees", Value::Null);
        // `[]` from v11 (initialised in the converter), `null` before.
        put(
            "requested_reviewers",
            if level >= 11 { json!([]) } else { Value::Null },
        );
        if level >= 9 {
            put(
                "requested_reviewers_teams",
                if level >= 11 { json!([]) } else { Value::Null },
            );
        }
        put("state", json!(if p.closed { "closed" } else { "open" }));
        put("draft", json!(wip));
        put("is_locked", json!(false));
        put("comments", json!(0));
        put("review_comments", json!(0));
        put("additions", json!(additions));
        put("deletions", json!(deletions));
        put("changed_files", json!(files));
        put("html_url", json!(html_url));
        put("diff_url", json!(format!("{html_url}.diff")));
        put("patch_url", json!(format!("{html_url}.patch")));
        put("mergeable", json!(mergeable));
        put("merged", json!(p.merged));
        if p.merged {
            put("merged_at", json!(self.time(p.merged_ms)));
            put("merge_commit_sha", json!(p.merge_commit));
            put("merged_by", self.user_json());
        } else {
            put("merged_at", Value::Null);
            put("merge_commit_sha", Value::Null);
            put("merged_by", Value::Null);
        }
        put("allow_maintainer_edit", json!(false));
        put(
            "base",
            json!({ "label": p.base, "ref": p.base, "sha": base_sha, "repo_id": repo_id, "repo": repo }),
        );
        put(
            "head",
            json!({ "label": p.head, "ref": head_ref, "sha": head_sha, "repo_id": repo_id, "repo": repo }),
        );
        put("merge_base", json!(p.merge_base));
        put("due_date", Value::Null);
        put("created_at", json!(self.time(p.created_ms)));
        put("updated_at", json!(self.time(p.updated_ms)));
        put("closed_at", time_or_null(p.closed_ms));
        put("pin_order", json!(0));
        if level >= 11 {
            put("flow", json!(0));
        }
        Value::Object(v)
    }

    /// `POST /repos/{o}/{r}/pulls` (`CreatePullRequest` + `parseCompareInfo`).
    fn create_pull(&mut self, req: &Request, repo: &str, root: &str) -> ResponseTemplate {
        let level = self.features.level;
        let field = |key, go_name, required| FormField {
            key,
            go_name,
            ty: GoType::Str,
            required,
        };
        let form = match bind(
            &req.body,
            "structs.CreatePullRequestOption",
            &[
                field("head", "Head", true),
                field("base", "Base", true),
                field("title", "Title", true),
                field("body", "Body", false),
            ],
        ) {
            Ok(f) => f,
            Err(message) => return api_error(422, &message),
        };
        let (head, base) = (form.str("head"), form.str("base"));
        if head == base {
            return api_error(
                422,
                "Invalid PullRequest: There are no changes between the head and the base",
            );
        }
        let head_infos: Vec<&str> = head.split(':').collect();
        let head_branch = match head_infos.as_slice() {
            [branch] => branch.to_string(),
            [owner, branch] => {
                if *owner != OWNER {
                    return if level >= 13 {
                        api_not_found(level, None, &[format!("the owner {owner} does not exist")])
                    } else {
                        api_not_found(level, Some("GetUserByName"), &[])
                    };
                }
                branch.to_string()
            }
            _ => {
                return if level >= 13 {
                    api_not_found(
                        level,
                        None,
                        &[format!(
                            "the head part of {{basehead}} {head} must contain zero or one colon (:) but contains {}",
                            head_infos.len() - 1
                        )],
                    )
                } else {
                    api_not_found(level, None, &[])
                };
            }
        };
        let dir = self.git_dirs.get(repo).cloned();
        let is_branch = |n: &str| dir.as_deref().is_some_and(|d| branch_tip(d, n).is_some());
        let is_tag = |n: &str| {
            dir.as_deref()
                .is_some_and(|d| ref_tip(d, &format!("refs/tags/{n}")).is_some())
        };
        let is_commit = |n: &str| dir.as_deref().is_some_and(|d| object_exists(d, n));
        let base_exists = is_branch(&base) || is_tag(&base) || (level >= 9 && is_commit(&base));
        if !base_exists {
            return if level >= 13 {
                api_not_found(
                    level,
                    None,
                    &[format!(
                        "could not find '{base}' to be a commit, branch or tag in the base repository {OWNER}/{repo}"
                    )],
                )
            } else {
                api_not_found(level, Some("BaseNotExist"), &[])
            };
        }
        let head_exists = match level {
            8 => is_branch(&head_branch) || is_tag(&head_branch),
            // The v9–v11 bug: the third test looks at the *base*, so a missing head passes
            // and `GetCompareInfo` fails on it.
            9..=11 => is_branch(&head_branch) || is_tag(&head_branch) || is_commit(&base),
            _ => is_branch(&head_branch) || is_tag(&head_branch) || is_commit(&head_branch),
        };
        if !head_exists {
            return match level {
                ..=8 => api_not_found(level, None, &[]),
                9..=12 => api_not_found(level, Some("IsRefExist"), &[]),
                _ => api_not_found(
                    level,
                    None,
                    &[format!(
                        "could not find '{head_branch}' to be a commit, branch or tag in the head repository {OWNER}/{repo}"
                    )],
                ),
            };
        }
        let Some(dir) = dir else {
            return internal_error();
        };
        let Some(head_sha) = ref_tip(&dir, &head_branch) else {
            // v9–v11 with a missing head: `GetCompareInfo` → 500.
            return internal_error();
        };
        self.sync_pulls(repo);
        if let Some(existing) = self.pulls.iter().find(|p| {
            p.repo == repo && !p.merged && !p.closed && p.head == head_branch && p.base == base
        }) {
            let id = self.repo_id(repo);
            return api_error(
                409,
                &format!(
                    "pull request already exists for these targets [id: {}, issue_id: {}, head_repo_id: {id}, base_repo_id: {id}, head_branch: {}, base_branch: {}]",
                    existing.id, existing.number, existing.head, existing.base
                ),
            );
        }
        self.tick();
        let now = self.clock_ms;
        let id = self.id();
        let number = self
            .pulls
            .iter()
            .filter(|p| p.repo == repo)
            .map(|p| p.number)
            .max()
            .unwrap_or(0)
            + 1;
        // `PushToBaseRepo`.
        git_in(
            &dir,
            &["update-ref", &format!("refs/pull/{number}/head"), &head_sha],
        );
        self.pulls.push(Pull {
            id,
            repo: repo.to_string(),
            number,
            title: form.str("title"),
            body: form.str("body"),
            head: head_branch.clone(),
            base: base.clone(),
            status: PullStatus::Checking,
            merge_base: String::new(),
            checking_left: 0,
            seen_head: branch_tip(&dir, &head_branch),
            seen_base: branch_tip(&dir, &base),
            closed: false,
            merged: false,
            merge_commit: String::new(),
            auto_merge: None,
            created_ms: now,
            updated_ms: now,
            closed_ms: 0,
            merged_ms: 0,
        });
        let idx = self.pulls.len() - 1;
        // `NewPullRequest` runs `testPatch` synchronously: the answer is decided.
        self.test_patch(idx);
        ResponseTemplate::new(201).set_body_json(self.pull_json(&self.pulls[idx], root))
    }

    /// `POST /repos/{o}/{r}/pulls/{index}/merge` (`MergePullRequest`).
    fn merge_pull(&mut self, req: &Request, repo: &str, index: &str) -> ResponseTemplate {
        let level = self.features.level;
        let field = |key, ty, required| FormField {
            key,
            go_name: key,
            ty,
            required,
        };
        let form = match bind(
            &req.body,
            "forms.MergePullRequestForm",
            &[
                field("Do", GoType::Str, true),
                field("MergeTitleField", GoType::Str, false),
                field("MergeMessageField", GoType::Str, false),
                field("MergeCommitID", GoType::Str, false),
                field("head_commit_id", GoType::Str, false),
                field("force_merge", GoType::Bool, false),
                field("merge_when_checks_succeed", GoType::Bool, false),
                field("delete_branch_after_merge", GoType::Bool, false),
            ],
        ) {
            Ok(f) => f,
            Err(message) => return api_error(422, &message),
        };
        let style = form.str("Do");
        if !MERGE_STYLES.contains(&style.as_str()) {
            return api_error(422, "[Do]: In");
        }
        let number = index.parse::<i64>().unwrap_or(0);
        let Some(idx) = self.pull_idx(repo, number) else {
            let repo_id = if number < 1 { 0 } else { self.repo_id(repo) };
            return api_not_found(
                level,
                Some("GetPullRequestByIndex"),
                &[format!(
                    "pull request does not exist [id: 0, issue_id: 0, head_repo_id: 0, base_repo_id: {repo_id}, head_branch: , base_branch: ]"
                )],
            );
        };
        self.sync_pulls(repo);
        let p = self.pulls[idx].clone();
        let manually = style == "manually-merged";
        let auto = form.bool("merge_when_checks_succeed") && !manually;
        // `CheckPullMergeable`, in its order.
        if p.merged {
            return api_error(405, "");
        }
        if p.closed {
            return api_not_found(level, None, &[]);
        }
        if !manually {
            if is_wip(&p.title) {
                return api_error(405, "Work in progress PRs cannot be merged");
            }
            if !matches!(p.status, PullStatus::Mergeable | PullStatus::Empty) {
                return api_error(405, "Please try again later");
            }
            // `force_merge` lets a repository admin (the fake's caller) past a rule that
            // does not apply to admins.
            let force = form.bool("force_merge");
            if !auto
                && let Some(rule) = self.rule_for(repo, &p.base)
                && let Some(reason) = &rule.merge_refusal
                && (rule.apply_to_admins || !force || !self.caller_admin)
            {
                return api_error(405, &format!("not allowed to merge [reason: {reason}]"));
            }
        }
        let style_refused = || {
            let text = if level >= 15 {
                format!("{style} is not an allowed merge style for this repository")
            } else {
                format!("{style} is not allowed an allowed merge style for this repository")
            };
            api_error(405, &text)
        };
        let Some(dir) = self.git_dirs.get(repo).cloned() else {
            return internal_error();
        };
        if manually {
            return self.merged_manually(idx, &dir, &form.str("MergeCommitID"), &style_refused);
        }
        let mut message = form.str("MergeTitleField").trim().to_string();
        if message.is_empty() {
            // `getMergeMessage` without a template (`.forgejo/default_merge_message/…` is not
            // modelled).
            message = match style.as_str() {
                "rebase" => String::new(),
                "squash" => format!("{} (#{})", p.title, p.number),
                _ => format!(
                    "Merge pull request '{}' (#{}) from {} into {}",
                    p.title, p.number, p.head, p.base
                ),
            };
        }
        let extra = form.str("MergeMessageField").trim().to_string();
        if !extra.is_empty() {
            message = format!("{message}\n\n{extra}");
        }
        if auto {
            if p.auto_merge.is_some() {
                return api_error(
                    409,
                    &format!(
                        "pull request is already scheduled to auto merge when checks succeed [pull_id: {}]",
                        p.id
                    ),
                );
            }
            self.pulls[idx].auto_merge = Some(style.clone());
            return ResponseTemplate::new(201);
        }
        if !self.merge_style_allowed(repo, &style) {
            return style_refused();
        }
        // `createTemporaryRepoForMerge`: the head must exist; a pin must be its exact tip.
        let (Some(head_sha), Some(base_before)) =
            (branch_tip(&dir, &p.head), branch_tip(&dir, &p.base))
        else {
            return internal_error();
        };
        let pin = form.str("head_commit_id");
        if !pin.is_empty() && pin != head_sha {
            return api_error(409, "head out of date");
        }
        let new_tip = match merge_and_push(&dir, &p.base, &p.head, &style, &message) {
            Ok(tip) => tip,
            Err(MergeFailure::Conflict(body)) => {
                return ResponseTemplate::new(409).set_body_json(body);
            }
            Err(MergeFailure::PushOutOfDate) => return api_error(409, "merge push out of date"),
            Err(MergeFailure::PushRejected(m)) if m.is_empty() => {
                return api_error(409, "PushRejected without remote error message");
            }
            Err(MergeFailure::PushRejected(m)) => {
                return api_error(409, &format!("PushRejected with remote message: {m}"));
            }
            Err(MergeFailure::Internal) => return internal_error(),
        };
        self.tick();
        let now = self.clock_ms;
        {
            let p = &mut self.pulls[idx];
            p.merged = true;
            p.merge_commit = new_tip.clone();
            p.merged_ms = now;
            p.closed = true;
            p.closed_ms = now;
            p.updated_ms = now;
        }
        self.pull_merges.push(PullMerge {
            repo: repo.to_string(),
            number: p.number,
            style: style.clone(),
            base: p.base.clone(),
            head: p.head.clone(),
            head_sha,
            base_before,
            base_after: new_tip,
            message: if matches!(style.as_str(), "rebase" | "fast-forward-only") {
                String::new()
            } else {
                message
            },
        });
        if form.bool("delete_branch_after_merge") {
            return self.delete_branch_after_merge(idx, &dir);
        }
        ResponseTemplate::new(200)
    }

    /// `MergedManually`: the style must be allowed, `MergeCommitID` a full SHA on the base
    /// branch (else 409 with the Go error marshalled: `{}`).
    fn merged_manually(
        &mut self,
        idx: usize,
        dir: &std::path::Path,
        commit: &str,
        style_refused: &dyn Fn() -> ResponseTemplate,
    ) -> ResponseTemplate {
        let p = self.pulls[idx].clone();
        if !self.merge_style_allowed(&p.repo, "manually-merged") {
            return style_refused();
        }
        let wrong = || ResponseTemplate::new(409).set_body_json(json!({}));
        if commit.len() != 40 || !object_exists(dir, &format!("{commit}^{{commit}}")) {
            return wrong();
        }
        let in_branch = git_in(
            dir,
            &[
                "merge-base",
                "--is-ancestor",
                commit,
                &format!("refs/heads/{}", p.base),
            ],
        )
        .ok;
        if !in_branch {
            return wrong();
        }
        let author_secs: i64 = git_line(dir, &["show", "-s", "--format=%at", commit])
            .and_then(|t| t.parse().ok())
            .unwrap_or(0);
        self.tick();
        let now = self.clock_ms;
        let base_tip = branch_tip(dir, &p.base).unwrap_or_default();
        let q = &mut self.pulls[idx];
        q.merged = true;
        q.merge_commit = commit.to_string();
        q.merged_ms = author_secs * 1000;
        q.status = PullStatus::ManuallyMerged;
        q.closed = true;
        q.closed_ms = now;
        q.updated_ms = now;
        self.pull_merges.push(PullMerge {
            repo: p.repo.clone(),
            number: p.number,
            style: "manually-merged".into(),
            base: p.base.clone(),
            head: p.head.clone(),
            head_sha: branch_tip(dir, &p.head).unwrap_or_default(),
            base_before: base_tip.clone(),
            base_after: base_tip,
            message: String::new(),
        });
        ResponseTemplate::new(200)
    }

    /// `delete_branch_after_merge` (the merge is done; errors still answer non-200): kept
    /// while another open pull request uses the head; children are retargeted to the base
    /// (`RetargetChildrenOnMerge`); the default or a protected branch is refused with 403.
    fn delete_branch_after_merge(&mut self, idx: usize, dir: &std::path::Path) -> ResponseTemplate {
        let level = self.features.level;
        let p = self.pulls[idx].clone();
        let in_use = self
            .pulls
            .iter()
            .any(|o| o.repo == p.repo && !o.merged && !o.closed && o.head == p.head);
        if in_use {
            return ResponseTemplate::new(200);
        }
        let children: Vec<usize> = (0..self.pulls.len())
            .filter(|&i| {
                let o = &self.pulls[i];
                o.repo == p.repo && !o.merged && !o.closed && o.base == p.head
            })
            .collect();
        for i in children {
            let clash = self.pulls.iter().any(|o| {
                o.repo == p.repo
                    && !o.merged
                    && !o.closed
                    && o.head == self.pulls[i].head
                    && o.base == p.base
            });
            if !clash {
                self.pulls[i].base = p.base.clone();
                self.pulls[i].seen_base = branch_tip(dir, &p.base);
                self.test_patch(i);
            }
        }
        if p.head == self.default_branch(&p.repo) {
            let text = if level >= 9 {
                "the head branch is the default branch"
            } else {
                "can not delete default branch"
            };
            return api_error(403, text);
        }
        if self.rule_for(&p.repo, &p.head).is_some() {
            let text = if level >= 9 {
                "the head branch is protected"
            } else {
                "branch protected"
            };
            return api_error(403, text);
        }
        git_in(
            dir,
            &["update-ref", "-d", &format!("refs/heads/{}", p.head)],
        );
        ResponseTemplate::new(200)
    }
}

// ---- branch protection and the caller ----------------------------------------------------
//
// `docs/forgejo-branch-protection.md` is the reference (the same on every version v8–v16).

/// `tokenRequiresScopes`: the scope a request needs, when its token has scopes at all —
/// `read:`/`write:` (by the method) of the route's category; `None` outside the categories
/// the fake serves.
fn missing_scope(s: &State, req: &Request, path: &str) -> Option<String> {
    let scopes = s.token_scopes.as_ref()?;
    req.headers.get("authorization")?;
    let category = if path.starts_with("/api/v1/repos/") {
        "repository"
    } else if path == "/api/v1/user" || path.starts_with("/api/v1/user/") {
        "user"
    } else {
        return None;
    };
    let write = matches!(req.method.as_str(), "POST" | "PUT" | "PATCH" | "DELETE");
    let needed = format!("{}:{category}", if write { "write" } else { "read" });
    let held = scopes
        .iter()
        .any(|sc| sc == "all" || *sc == needed || (!write && *sc == format!("write:{category}")));
    (!held).then_some(needed)
}

/// `GET /user` and `GET /repos/{owner}/{repo}/branch_protections`. `None` for any other
/// request.
fn protections_route(s: &mut State, req: &Request, path: &str) -> Option<ResponseTemplate> {
    if req.method.as_str() != "GET" {
        return None;
    }
    let level = s.features.level;
    let token = req.headers.get("authorization").is_some();
    if path == "/api/v1/user" {
        // `reqToken()`.
        if !token {
            return Some(api_error(401, "token is required"));
        }
        let mut user = s.user_json();
        user["login_name"] = json!("");
        user["full_name"] = json!("");
        user["is_admin"] = json!(false);
        return Some(ResponseTemplate::new(200).set_body_json(user));
    }
    let rest = path.strip_prefix("/api/v1/repos/")?;
    let [owner, repo, "branch_protections"] = rest.split('/').collect::<Vec<_>>()[..] else {
        return None;
    };
    // `repoAssignment`, then `reqToken()`, then `reqAdmin()`.
    if owner != OWNER || !s.repos.contains(repo) {
        return Some(api_not_found(level, None, &[]));
    }
    if !token {
        return Some(api_error(401, "token is required"));
    }
    if !s.caller_admin {
        return Some(api_error(
            403,
            "user should be an owner or a collaborator with admin write of a repository",
        ));
    }
    let rules: Vec<Value> = s
        .sorted_rules(repo)
        .into_iter()
        .map(|r| s.rule_json(r))
        .collect();
    Some(ResponseTemplate::new(200).set_body_json(Value::Array(rules)))
}

/// `IsRuleNameSpecial`: gobwas/glob's special characters.
fn is_glob_rule(rule: &str) -> bool {
    rule.chars().any(|c| "*?\\[]{}".contains(c))
}

/// `ProtectedBranch.Match`: a plain name equal without case; a glob (`/` the separator)
/// matched by [`glob_match`]; one that does not compile, the name itself.
fn rule_match(rule: &str, branch: &str) -> bool {
    if !is_glob_rule(rule) {
        return rule.to_lowercase() == branch.to_lowercase();
    }
    let pattern: Vec<char> = rule.chars().collect();
    let name: Vec<char> = branch.chars().collect();
    glob_match(&pattern, &name).unwrap_or(rule == branch)
}

/// gobwas/glob with `/` as the separator, straight from the pattern text: `*` (no `/`), `**`,
/// `?` (no `/`), `[…]`/`[!…]` (a list or one `a-z` range), `{a,b}` (nestable; closed at the
/// end), `\x`. `None`: the pattern does not compile.
fn glob_match(p: &[char], s: &[char]) -> Option<bool> {
    let Some(&c) = p.first() else {
        return Some(s.is_empty());
    };
    match c {
        '\\' => {
            let (lit, rest) = match p.get(1) {
                Some(l) => (Some(*l), &p[2..]),
                None => (None, &p[1..]),
            };
            match lit {
                None => glob_match(rest, s),
                Some(l) => {
                    if s.first() == Some(&l) {
                        glob_match(rest, &s[1..])
                    } else {
                        glob_match(rest, &[]).map(|_| false)
                    }
                }
            }
        }
        '*' => {
            let (star, rest) = if p.get(1) == Some(&'*') {
                (true, &p[2..])
            } else {
                (false, &p[1..])
            };
            glob_match(rest, &[])?;
            let mut n = 0;
            loop {
                if glob_match(rest, &s[n..])? {
                    return Some(true);
                }
                if n == s.len() || (!star && s[n] == '/') {
                    return Some(false);
                }
                n += 1;
            }
        }
        '?' => {
            let rest = glob_match(&p[1..], s.get(1..).unwrap_or(&[]))?;
            Some(s.first().is_some_and(|c| *c != '/') && rest)
        }
        '[' => {
            let close = p.iter().position(|c| *c == ']').filter(|i| *i > 1)?;
            let mut class = &p[1..close];
            let not = class.first() == Some(&'!') && class.len() > 1;
            if not {
                class = &class[1..];
            }
            let hit = |ch: char| match class {
                [lo, '-', hi] => {
                    if hi < lo {
                        return None;
                    }
                    Some(*lo <= ch && ch <= *hi)
                }
                _ if class.len() >= 2 && class[1] == '-' => None,
                _ => Some(class.contains(&ch)),
            };
            hit('a')?;
            let rest = glob_match(&p[close + 1..], s.get(1..).unwrap_or(&[]))?;
            Some(s.first().is_some_and(|ch| hit(*ch) == Some(!not)) && rest)
        }
        '{' => {
            // The alternatives at depth 0, up to the matching `}` (or the end).
            let mut depth = 0;
            let mut alts = vec![Vec::new()];
            let mut end = p.len();
            let mut i = 1;
            while i < p.len() {
                let ch = p[i];
                match ch {
                    '\\' if i + 1 < p.len() => {
                        alts.last_mut()?.extend([ch, p[i + 1]]);
                        i += 2;
                        continue;
                    }
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        end = i + 1;
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        alts.push(Vec::new());
                        i += 1;
                        continue;
                    }
                    _ => {}
                }
                alts.last_mut()?.push(ch);
                i += 1;
            }
            let rest = &p[end.min(p.len())..];
            let mut any = false;
            for alt in alts {
                let mut seq = alt;
                seq.extend_from_slice(rest);
                any |= glob_match(&seq, s)?;
            }
            Some(any)
        }
        _ => {
            let rest = glob_match(&p[1..], s.get(1..).unwrap_or(&[]))?;
            Some(s.first() == Some(&c) && rest)
        }
    }
}

/// The pull request routes (every version has them): `POST /pulls`, `GET /pulls/{index}`,
/// `GET|POST /pulls/{index}/merge`. `None` for any other request.
fn pulls_route(s: &mut State, req: &Request, path: &str) -> Option<ResponseTemplate> {
    let rest = path.strip_prefix("/api/v1/repos/")?;
    let parts: Vec<&str> = rest.split('/').collect();
    let [owner, repo, "pulls", tail @ ..] = parts.as_slice() else {
        return None;
    };
    let method = req.method.as_str();
    let known = matches!(
        (method, tail),
        ("POST", []) | ("GET", [_]) | ("GET" | "POST", [_, "merge"])
    );
    if !known {
        return None;
    }
    let level = s.features.level;
    // `repoAssignment` runs before anything else.
    if *owner != OWNER || !s.repos.contains(*repo) {
        return Some(api_not_found(level, None, &[]));
    }
    // `reqToken()` on the POST routes.
    if method == "POST" && req.headers.get("authorization").is_none() {
        return Some(api_error(401, "token is required"));
    }
    let repo = repo.to_string();
    // Forgejo builds its URLs from ROOT_URL, not from the request.
    let root = s.root_url.clone();
    let root = root.as_str();
    Some(match (method, tail) {
        ("POST", []) => s.create_pull(req, &repo, root),
        ("GET", [index]) => {
            s.sync_pulls(&repo);
            let Some(idx) = index.parse().ok().and_then(|n| s.pull_idx(&repo, n)) else {
                return Some(api_not_found(level, None, &[]));
            };
            let body = s.pull_json(&s.pulls[idx], root);
            // A GET during a check counts down to its end.
            let p = &mut s.pulls[idx];
            if p.status == PullStatus::Checking && p.checking_left > 0 {
                p.checking_left -= 1;
                if p.checking_left == 0 {
                    s.test_patch(idx);
                }
            }
            ResponseTemplate::new(200).set_body_json(body)
        }
        ("GET", [index, "merge"]) => {
            let merged = index
                .parse()
                .ok()
                .and_then(|n| s.pull_idx(&repo, n))
                .is_some_and(|i| s.pulls[i].merged);
            if merged {
                ResponseTemplate::new(204)
            } else {
                api_not_found(level, None, &[])
            }
        }
        ("POST", [index, "merge"]) => s.merge_pull(req, &repo, index),
        _ => unreachable!("matched above"),
    })
}

/// `POST /repos/{owner}/{repo}/actions/runs/{run_id}/cancel` (Forgejo ≥ 16, `routers/api/v1/
/// api.go`: `reqToken(), reqRepoWriter(unit.TypeActions), repo.CancelActionRun`): every
/// unfinished job cancelled; 204, also for a finished run; a run of another repository, or
/// none, 404. `None` for any other request.
fn cancel_route(s: &mut State, req: &Request, path: &str) -> Option<ResponseTemplate> {
    let rest = path.strip_prefix("/api/v1/repos/")?;
    let parts: Vec<&str> = rest.split('/').collect();
    let [owner, repo, "actions", "runs", id, "cancel"] = parts.as_slice() else {
        return None;
    };
    if req.method.as_str() != "POST" {
        return None;
    }
    if !s.features.jobs_route {
        return Some(no_route());
    }
    let level = s.features.level;
    if *owner != OWNER || !s.repos.contains(*repo) {
        return Some(api_not_found(level, None, &[]));
    }
    if req.headers.get("authorization").is_none() {
        return Some(api_error(401, "token is required"));
    }
    let run = id
        .parse::<i64>()
        .ok()
        .filter(|id| s.run(*id).is_some_and(|r| r.repo == *repo));
    let Some(run) = run else {
        return Some(api_not_found(level, None, &[]));
    };
    s.tick();
    s.cancel_open_jobs(run);
    s.cancelled_by_api.push(run);
    Some(ResponseTemplate::new(204))
}
