//! Contract tests: `ForgejoForge` + `verdict` + `CiFollower` against a fake Forgejo that
//! speaks each API generation (8 and 11: tasks only; 12 and 15: runs + tasks; 16: runs +
//! jobs). Every scenario also pins how many HTTP requests its verdicts cost; the measured
//! numbers are the table in docs/ci-requests.md (checked by `request_counts_match_docs`).

use crate::support::fake_forgejo::{FakeForgejo, Fault, OWNER, REPO, TOKEN};
use orch::ci::verdict::{CiPolicy, Verdict, VerdictKind};
use orch::ci::{CiRun, JobStatus};
use orch::config::Repo;
use orch::contract::RetryPolicy;
use orch::forge::follow::CiFollower;
use orch::forge::forgejo::{ApiPath, ForgejoForge};
use orch::forge::{BlockingKind, Forge, ForgeError};
use orch::secret::Secret;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const SHA: &str = "0123456789abcdef0123456789abcdef01234567";
const V8: &str = "8.0.3+gitea-1.22.0";
const V11: &str = "11.0.1+gitea-1.22.0";
const V12: &str = "12.0.4+gitea-1.22.0";
const V15: &str = "15.0.3+gitea-1.22.0";
const V16: &str = "16.0.0+gitea-1.22.0";
const VERSIONS: [&str; 5] = [V8, V11, V12, V15, V16];
const START_TIMEOUT: Duration = Duration::from_secs(300);
/// The version probe, once per client.
const PROBE: u64 = 1;
/// The cheap look that re-checks a decided red or sync_not_done (a green costs nothing).
const LOOK: u64 = 1;

fn retry() -> RetryPolicy {
    RetryPolicy {
        initial: Duration::from_millis(5),
        max: Duration::from_millis(20),
        multiplier: 2.0,
        max_retries: 3,
    }
}

fn policy() -> CiPolicy {
    CiPolicy {
        sync_job: "radicle-push".into(),
        required_jobs: None,
        start_timeout: START_TIMEOUT,
    }
}

fn repo(name: &str) -> Repo {
    Repo {
        name: name.into(),
        path: format!("/tmp/{name}").into(),
        branch: "main".into(),
        deps: vec![],
        jobs: vec![],
        land: orch::config::LandConfig::default_for(orch::config::ForgeKind::Forgejo),
        protected_paths: Vec::new(),
        model: None,
    }
}

fn path_of(version: &str) -> ApiPath {
    // The path the version names (`development`: the newest).
    let major: u32 = version.split('.').next().unwrap().parse().unwrap_or(99);
    match major {
        8..=11 => ApiPath::TasksOnly,
        12..=15 => ApiPath::RunsAndTasks,
        _ => ApiPath::RunsAndJobs,
    }
}

/// Requests one look at a commit costs (without the version probe): on 8–11 the task pages
/// and one page of commit statuses.
fn cost(path: ApiPath, push_runs: u64, task_pages: u64) -> u64 {
    match path {
        ApiPath::TasksOnly => task_pages + 1,
        ApiPath::RunsAndTasks => 1 + if push_runs > 0 { task_pages } else { 0 },
        ApiPath::RunsAndJobs => 1 + push_runs,
    }
}

struct Env {
    fake: FakeForgejo,
    follower: CiFollower<ForgejoForge>,
    repo: Repo,
    path: ApiPath,
    pushed_ms: i64,
}

impl Env {
    /// What the fake server answers at `path` (under `/api/v1/repos/OWNER/REPO/`), verbatim.
    async fn server_json(&self, path: &str) -> serde_json::Value {
        let body = reqwest::Client::new()
            .get(format!(
                "{}/api/v1/repos/{OWNER}/{REPO}/{path}",
                self.fake.uri()
            ))
            .header("Authorization", format!("token {TOKEN}"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        serde_json::from_str(&body).unwrap()
    }

    /// A fake requiring [`TOKEN`] and a client sending it.
    async fn new(version: &str) -> Env {
        Env::with(version, Some(TOKEN), Some(TOKEN), Duration::from_secs(10)).await
    }

    async fn with(
        version: &str,
        server_token: Option<&str>,
        client_token: Option<&str>,
        timeout: Duration,
    ) -> Env {
        let fake = FakeForgejo::start(version).await;
        fake.require_token(server_token);
        let forge = ForgejoForge::new(
            &fake.uri(),
            OWNER,
            client_token.map(|t| Secret::new(t.to_string())),
            timeout,
            retry(),
        )
        .expect("client");
        let pushed_ms = fake.now_ms();
        Env {
            follower: CiFollower::new(forge, policy()),
            repo: repo(REPO),
            path: path_of(version),
            pushed_ms,
            fake,
        }
    }

    fn forge(&self) -> &ForgejoForge {
        self.follower.forge()
    }

    fn requests(&self) -> u64 {
        self.forge().requests_made()
    }

    /// Polls SHA now (the fake's clock); returns the verdict, runs and requests spent.
    async fn poll(&self) -> (Verdict, Vec<CiRun>, u64) {
        self.poll_at(self.fake.now_ms()).await
    }

    async fn poll_at(&self, now_ms: i64) -> (Verdict, Vec<CiRun>, u64) {
        let before = self.requests();
        let (v, runs) = self
            .follower
            .poll(&self.repo, SHA, Some(self.pushed_ms), now_ms)
            .await
            .unwrap_or_else(|e| panic!("poll failed: {e}"));
        (v, runs, self.requests() - before)
    }

    async fn poll_err(&self) -> (ForgeError, u64) {
        let before = self.requests();
        let err = self
            .follower
            .poll(&self.repo, SHA, Some(self.pushed_ms), self.fake.now_ms())
            .await
            .expect_err("poll should fail");
        (err, self.requests() - before)
    }

    /// The client's count, the fake's record and wiremock's record agree.
    async fn assert_counts_agree(&self) {
        let hits = self.fake.hit_count() as u64;
        assert_eq!(self.requests(), hits, "{:#?}", self.fake.hit_paths());
        assert_eq!(self.fake.received().await as u64, hits);
    }
}

fn assert_no_token(err: &ForgeError) {
    let shown = err.to_string();
    let debug = format!("{err:?}");
    assert!(!shown.contains(TOKEN), "token in message: {shown}");
    assert!(!debug.contains(TOKEN), "token in Debug: {debug}");
}

macro_rules! per_version {
    ($($scenario:ident),* $(,)?) => {$(
        mod $scenario {
            #[tokio::test]
            async fn forgejo_8() {
                super::$scenario(super::V8).await
            }
            #[tokio::test]
            async fn forgejo_11() {
                super::$scenario(super::V11).await
            }
            #[tokio::test]
            async fn forgejo_12() {
                super::$scenario(super::V12).await
            }
            #[tokio::test]
            async fn forgejo_15() {
                super::$scenario(super::V15).await
            }
            #[tokio::test]
            async fn forgejo_16() {
                super::$scenario(super::V16).await
            }
        }
    )*};
}

per_version!(
    green,
    one_job_failed,
    sync_skipped_after_failure,
    sync_skipped_alone,
    rerun_turns_red_into_green,
    tasks_of_other_commits_across_pages,
    job_not_yet_picked_up,
    dispatch_run_does_not_count,
    transient_errors_are_retried,
    unauthorized_is_blocking_and_secret,
    forbidden_and_bad_request_scrub_the_token,
    unknown_repository_is_not_found,
    malformed_json_is_malformed,
    slow_server_is_transient_after_retries,
);

/// The traps of the appendix of the reference, one scenario each, and the property test.
mod traps;

/// The pull request API of the fake (`docs/forgejo-pulls.md`) over HTTP, against real git.
mod pulls;

/// Branch protection rules and the token's account (`docs/forgejo-branch-protection.md`).
mod protections;

// ---- scenarios ----------------------------------------------------------------------------

async fn green(version: &str) {
    let env = Env::new(version).await;
    env.fake.add_noise(REPO, 3);
    env.fake.add_run(
        REPO,
        SHA,
        "push",
        &[("build", "success"), ("radicle-push", "success")],
    );
    let (v, runs, n) = env.poll().await;
    assert_eq!(v.kind, VerdictKind::Green, "{v:?}");
    assert_eq!(v.sync_status, Some(JobStatus::Success));
    assert_eq!(n, PROBE + cost(env.path, 1, 1));
    assert_eq!(runs.len(), 1);
    let run = &runs[0];
    assert_eq!((run.event.as_str(), run.number), ("push", 4));
    assert_eq!(run.jobs.len(), 2);
    assert!(run.jobs.iter().all(|j| j.attempt == 1));
    // 8–11 have no run status: the commit statuses give it.
    assert_eq!(run.status, Some(JobStatus::Success));
    assert_eq!(run.jobs[0].id.is_some(), env.path == ApiPath::RunsAndJobs);
    assert!(
        run.url
            .as_deref()
            .unwrap()
            .ends_with("/orch-test/alpha/actions/runs/4"),
        "{run:?}"
    );

    // Decided: answered from the cache.
    let (again, _, n) = env.poll().await;
    assert_eq!((again.kind, n), (VerdictKind::Green, 0));
    env.assert_counts_agree().await;
}

async fn one_job_failed(version: &str) {
    let env = Env::new(version).await;
    env.fake.add_run(
        REPO,
        SHA,
        "push",
        &[
            ("build", "success"),
            ("test", "failure"),
            ("radicle-push", "running"),
        ],
    );
    let (v, _, n) = env.poll().await;
    assert_eq!(v.kind, VerdictKind::Red, "{v:?}");
    assert_eq!(v.failed_jobs, vec!["test"]);
    assert_eq!(n, PROBE + cost(env.path, 1, 1));
    // Decided red: one cheap look that nothing moved.
    assert_eq!(env.poll().await.2, LOOK);
    env.assert_counts_agree().await;
}

async fn sync_skipped_after_failure(version: &str) {
    let env = Env::new(version).await;
    env.fake.add_run(
        REPO,
        SHA,
        "push",
        &[("build", "failure"), ("radicle-push", "skipped")],
    );
    let (v, _, _) = env.poll().await;
    assert_eq!(v.kind, VerdictKind::Red, "{v:?}");
    assert_eq!(v.failed_jobs, vec!["build"]);
    // A server-skipped job has no task: /jobs (≥ 16) and the commit statuses (8–11) show it;
    // on 12–15 the run status (failure) is explained by build, so no status is read.
    let expected_sync = (env.path != ApiPath::RunsAndTasks).then_some(JobStatus::Skipped);
    assert_eq!(v.sync_status, expected_sync);
    env.assert_counts_agree().await;
}

async fn sync_skipped_alone(version: &str) {
    let env = Env::new(version).await;
    env.fake.add_run(
        REPO,
        SHA,
        "push",
        &[("build", "success"), ("radicle-push", "skipped")],
    );
    let (v, _, n) = env.poll().await;
    assert_eq!(n, PROBE + cost(env.path, 1, 1));
    // At once on every version: the run status (12+) or the commit statuses (8–11) say the
    // run finished; no start_timeout wait.
    assert_eq!(v.kind, VerdictKind::SyncNotDone, "{v:?}");
    assert!(v.detail.contains("push a new commit"), "{v:?}");
    if env.path != ApiPath::RunsAndTasks {
        assert_eq!(
            v.detail,
            "radicle-push skipped: push a new commit (e.g. an empty commit) to trigger a push run"
        );
    }
    assert!(v.failed_jobs.is_empty());
    assert_eq!(env.poll().await.2, LOOK);
    env.assert_counts_agree().await;
}

/// Trap D2: a rerun happens in place. While it is queued the failed task is still the job's
/// newest; a decided red must reopen (the follower's cheap look) and say pending, then
/// follow the rerun to green.
async fn rerun_turns_red_into_green(version: &str) {
    let env = Env::new(version).await;
    let run = env.fake.add_run(
        REPO,
        SHA,
        "push",
        &[("build", "failure"), ("radicle-push", "skipped")],
    );
    env.fake.set_needs(run, "radicle-push", &["build"]);
    assert_eq!(env.poll().await.0.kind, VerdictKind::Red);
    assert_eq!(env.poll().await.2, LOOK, "nothing moved: the red stands");

    env.fake.add_noise(REPO, 2);
    env.fake.rerun_job(run, "build");
    env.fake.rerun_job(run, "radicle-push");

    // Queued, no runner yet: the failed task is stale. Never a cached red.
    let (v, _, n) = env.poll().await;
    assert_eq!(v.kind, VerdictKind::Pending, "{v:?}");
    assert!(v.failed_jobs.is_empty(), "{v:?}");
    assert_eq!(n, LOOK + cost(env.path, 1, 1));

    env.fake.set_job(run, "build", "running");
    let (v, _, n) = env.poll().await;
    assert_eq!(v.kind, VerdictKind::Running, "{v:?}");
    assert_eq!(n, cost(env.path, 1, 1));

    env.fake.set_job(run, "build", "success");
    env.fake.set_job(run, "radicle-push", "running");
    env.fake.set_job(run, "radicle-push", "success");
    let (v, runs, n) = env.poll().await;
    assert_eq!(v.kind, VerdictKind::Green, "{v:?}");
    assert_eq!(n, cost(env.path, 1, 1));
    let build = runs[0].jobs.iter().find(|j| j.name == "build").unwrap();
    assert_eq!((build.status, build.attempt), (JobStatus::Success, 2));
    assert_eq!(env.poll().await.2, 0, "a green is final");
    env.assert_counts_agree().await;
}

/// Builds: 70 tasks of other commits well before the push, then our run whose two tasks
/// are separated by 60 foreign tasks, then 60 more: our tasks sit on pages 2 and 3.
async fn deep_scenario(env: &mut Env) -> i64 {
    env.fake.set_utc_offset_hours(2);
    env.fake.add_noise(REPO, 70);
    env.fake.advance(Duration::from_secs(600));
    env.pushed_ms = env.fake.now_ms();
    let run = env.fake.add_run(
        REPO,
        SHA,
        "push",
        &[("build", "running"), ("radicle-push", "waiting")],
    );
    env.fake.add_noise(REPO, 60);
    env.fake.set_job(run, "build", "success");
    env.fake.set_job(run, "radicle-push", "running");
    env.fake.add_noise(REPO, 60);
    assert_eq!(env.fake.task_count(REPO), 192);
    run
}

async fn tasks_of_other_commits_across_pages(version: &str) {
    let mut env = Env::new(version).await;
    let run = deep_scenario(&mut env).await;
    let (v, runs, n) = env.poll().await;
    assert_eq!(v.kind, VerdictKind::Running, "{v:?}");
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].jobs.len(), 2, "{runs:?}");
    // Pages 1–3: page 3 reaches tasks from before the push, so paging stops there.
    assert_eq!(n, PROBE + cost(env.path, 1, 3));
    if env.path != ApiPath::RunsAndJobs {
        let paths = env.fake.hit_paths();
        assert!(paths.iter().any(|p| p.contains("page=3")), "{paths:#?}");
        assert!(!paths.iter().any(|p| p.contains("page=4")), "{paths:#?}");
    }
    // Finish the sync job: same depth, decided.
    env.fake.set_job(run, "radicle-push", "success");
    let (v, _, n) = env.poll().await;
    assert_eq!(v.kind, VerdictKind::Green, "{v:?}");
    assert_eq!(n, cost(env.path, 1, 3));
    assert_eq!(env.poll().await.2, 0);
    env.assert_counts_agree().await;
}

async fn job_not_yet_picked_up(version: &str) {
    let env = Env::new(version).await;
    let run = env.fake.add_run(
        REPO,
        SHA,
        "push",
        &[
            ("build", "waiting"),
            ("test", "waiting"),
            ("radicle-push", "blocked"),
        ],
    );
    env.fake.set_needs(run, "radicle-push", &["build", "test"]);

    // Nothing picked up: on 8–11 no task exists yet, so there is no run to see at all.
    let (v, _, n) = env.poll().await;
    assert_eq!(v.kind, VerdictKind::Pending, "{v:?}");
    assert!(v.failed_jobs.is_empty());
    assert_eq!(n, PROBE + cost(env.path, 1, 1));

    env.fake.set_job(run, "build", "running");
    let (v, _, n) = env.poll().await;
    assert_eq!(v.kind, VerdictKind::Running, "{v:?}");
    assert_eq!(n, cost(env.path, 1, 1));

    // build done, test still queued: never green, never red.
    env.fake.set_job(run, "build", "success");
    let (v, _, _) = env.poll().await;
    assert!(
        matches!(v.kind, VerdictKind::Pending | VerdictKind::Running),
        "{v:?}"
    );

    env.fake.set_job(run, "test", "success");
    env.fake.set_job(run, "radicle-push", "success");
    let (v, _, n) = env.poll().await;
    assert_eq!(v.kind, VerdictKind::Green, "{v:?}");
    assert_eq!(n, cost(env.path, 1, 1));
    assert_eq!(env.poll().await.2, 0);
    env.assert_counts_agree().await;
}

async fn dispatch_run_does_not_count(version: &str) {
    let env = Env::new(version).await;
    env.fake.add_run(
        REPO,
        SHA,
        "workflow_dispatch",
        &[("build", "success"), ("radicle-push", "success")],
    );
    let (v, runs, n) = env.poll().await;
    assert_eq!(v.kind, VerdictKind::Pending, "{v:?}");
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].event, "workflow_dispatch");
    // No push run: no tasks (12–15) or jobs (16) are fetched for it.
    assert_eq!(n, PROBE + cost(env.path, 0, 1));

    let later = env.pushed_ms + START_TIMEOUT.as_millis() as i64;
    let (v, _, n) = env.poll_at(later).await;
    assert_eq!(v.kind, VerdictKind::NoRun, "{v:?}");
    assert_eq!(n, cost(env.path, 0, 1), "no_run is not cached");

    // A failing push run on the same SHA decides, whatever the dispatch run says.
    env.fake.add_run(
        REPO,
        SHA,
        "push",
        &[("build", "failure"), ("radicle-push", "skipped")],
    );
    let (v, runs, n) = env.poll_at(later).await;
    assert_eq!(v.kind, VerdictKind::Red, "{v:?}");
    assert_eq!(runs.len(), 2);
    assert_eq!(n, cost(env.path, 1, 1));
    env.assert_counts_agree().await;
}

async fn transient_errors_are_retried(version: &str) {
    let env = Env::new(version).await;
    env.fake.add_run(
        REPO,
        SHA,
        "push",
        &[("build", "success"), ("radicle-push", "success")],
    );
    env.fake.fail_next("/actions/", 1, Fault::Status(502));
    env.fake.fail_next("/actions/", 1, Fault::Status(429));
    env.fake.fail_next("/actions/", 1, Fault::Status(500));
    let (v, _, n) = env.poll().await;
    assert_eq!(v.kind, VerdictKind::Green, "{v:?}");
    assert_eq!(n, PROBE + cost(env.path, 1, 1) + 3);
    env.assert_counts_agree().await;
}

async fn unauthorized_is_blocking_and_secret(version: &str) {
    let env = Env::with(
        version,
        Some("the-real-token"),
        Some(TOKEN),
        Duration::from_secs(10),
    )
    .await;
    env.fake.add_run(REPO, SHA, "push", &[("build", "success")]);
    // A server that echoes what it was sent must not leak it either.
    env.fake
        .fail_next("/version", 1, Fault::EchoAuthorization(401));
    let (err, n) = env.poll_err().await;
    assert!(
        matches!(
            err,
            ForgeError::Blocking {
                kind: BlockingKind::BadToken,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("token"), "{err}");
    assert!(err.to_string().contains("forge.token_env"), "{err}");
    assert_no_token(&err);
    assert_eq!(n, 1, "401 is not retried");
    // The fake did receive the token, in the token scheme.
    assert_eq!(
        env.fake.hits()[0].authorization.as_deref(),
        Some(format!("token {TOKEN}").as_str())
    );
    // Same answer without the echo (plain 401 from the auth check).
    let (err, n) = env.poll_err().await;
    assert!(matches!(
        err,
        ForgeError::Blocking {
            kind: BlockingKind::BadToken,
            ..
        }
    ));
    assert_no_token(&err);
    assert_eq!(n, 1);
    assert!(!format!("{:?}", env.forge()).contains(TOKEN));
    env.assert_counts_agree().await;
}

async fn forbidden_and_bad_request_scrub_the_token(version: &str) {
    let env = Env::new(version).await;
    env.fake
        .fail_next("/actions/", 1, Fault::EchoAuthorization(403));
    let (err, _) = env.poll_err().await;
    assert!(
        matches!(
            err,
            ForgeError::Blocking {
                kind: BlockingKind::NoAccess,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("[redacted]"), "{err}");
    assert_no_token(&err);

    env.fake
        .fail_next("/actions/", 1, Fault::EchoAuthorization(400));
    let (err, n) = env.poll_err().await;
    assert!(
        matches!(
            err,
            ForgeError::Blocking {
                kind: BlockingKind::Other,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("400"), "{err}");
    assert_no_token(&err);
    assert_eq!(n, 1);
    env.assert_counts_agree().await;
}

async fn unknown_repository_is_not_found(version: &str) {
    let env = Env::new(version).await;
    let before = env.requests();
    let err = env
        .follower
        .poll(&repo("ghost"), SHA, Some(env.pushed_ms), env.fake.now_ms())
        .await
        .expect_err("404");
    match &err {
        ForgeError::Blocking {
            kind: BlockingKind::NotFound,
            message,
        } => assert!(
            message
                .contains("repository orch-test/ghost not found, Actions disabled, or no access"),
            "{message}"
        ),
        other => panic!("{other:?}"),
    }
    assert_no_token(&err);
    assert_eq!(env.requests() - before, PROBE + 1, "404 is not retried");
    env.assert_counts_agree().await;
}

async fn malformed_json_is_malformed(version: &str) {
    let env = Env::new(version).await;
    env.fake.fail_always(
        "/actions/",
        Fault::Body(r#"{"workflow_runs": [{"id": "not a number", "#.into()),
    );
    let (err, n) = env.poll_err().await;
    match &err {
        ForgeError::Malformed { message } => {
            assert!(
                message.contains("GET /api/v1/repos/orch-test/alpha/actions/"),
                "{message}"
            )
        }
        other => panic!("{other:?}"),
    }
    assert_no_token(&err);
    assert_eq!(n, PROBE + 1, "malformed answers are not retried");

    // Well-formed JSON of the wrong shape is malformed too.
    env.fake.clear_faults();
    env.fake
        .fail_always("/actions/", Fault::Body(r#"{"workflow_runs": 7}"#.into()));
    let (err, _) = env.poll_err().await;
    assert!(matches!(err, ForgeError::Malformed { .. }), "{err:?}");
    env.assert_counts_agree().await;
}

async fn slow_server_is_transient_after_retries(version: &str) {
    let env = Env::with(
        version,
        Some(TOKEN),
        Some(TOKEN),
        // Long enough for the (instant) version probe on a loaded machine; the delayed
        // answers below exceed it threefold.
        Duration::from_secs(1),
    )
    .await;
    env.fake
        .fail_always("/actions/", Fault::Delay(Duration::from_secs(3)));
    let (err, n) = env.poll_err().await;
    match &err {
        ForgeError::Transient { message, attempts } => {
            assert_eq!(*attempts, 3);
            assert!(message.contains("timed out"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert!(!err.is_blocking());
    assert_no_token(&err);
    assert_eq!(n, PROBE + 4, "first try + 3 retries");
    env.assert_counts_agree().await;
}

// ---- single-version and cross-cutting tests ------------------------------------------------

#[tokio::test]
async fn no_token_means_no_authorization_header() {
    let env = Env::with(V16, None, None, Duration::from_secs(10)).await;
    env.fake
        .add_run(REPO, SHA, "push", &[("radicle-push", "success")]);
    assert_eq!(env.poll().await.0.kind, VerdictKind::Green);
    let hits = env.fake.hits();
    assert_eq!(hits.len(), 3);
    assert!(hits.iter().all(|h| h.authorization.is_none()), "{hits:#?}");

    let env = Env::new(V16).await;
    env.fake
        .add_run(REPO, SHA, "push", &[("radicle-push", "success")]);
    env.poll().await;
    let expected = format!("token {TOKEN}");
    assert!(
        env.fake
            .hits()
            .iter()
            .all(|h| h.authorization.as_deref() == Some(expected.as_str()))
    );
}

#[tokio::test]
async fn unauthorized_without_a_token_says_to_set_one() {
    let env = Env::with(V11, Some(TOKEN), None, Duration::from_secs(10)).await;
    let (err, _) = env.poll_err().await;
    assert!(matches!(
        err,
        ForgeError::Blocking {
            kind: BlockingKind::BadToken,
            ..
        }
    ));
    assert!(err.to_string().contains("forge.token_env"), "{err}");
}

#[tokio::test]
async fn version_is_probed_once_per_client() {
    let env = Env::new(V15).await;
    env.fake.set_branch(REPO, "main", SHA);
    let run = env
        .fake
        .add_run(REPO, SHA, "push", &[("radicle-push", "running")]);
    for _ in 0..3 {
        env.poll().await;
    }
    env.fake.set_job(run, "radicle-push", "success");
    env.poll().await;
    env.forge().branch_head(&env.repo, "main").await.unwrap();
    assert_eq!(env.forge().version().await.unwrap().to_string(), "15.0.3");
    assert_eq!(env.forge().api_path().await.unwrap(), ApiPath::RunsAndTasks);
    let probes = env
        .fake
        .hit_paths()
        .iter()
        .filter(|p| p.ends_with("/version"))
        .count();
    assert_eq!(probes, 1);
    assert_eq!(env.requests(), PROBE + 4 * 2 + 1);
}

#[tokio::test]
async fn failed_version_probe_is_retried_on_next_use() {
    let env = Env::new(V12).await;
    env.fake.fail_next("/version", 4, Fault::Status(503));
    let (err, n) = env.poll_err().await;
    assert!(
        matches!(err, ForgeError::Transient { attempts: 3, .. }),
        "{err:?}"
    );
    assert_eq!(n, 4);
    let (v, _, n) = env.poll().await;
    assert_eq!(v.kind, VerdictKind::Pending);
    assert_eq!(n, PROBE + 1);
}

#[tokio::test]
async fn unsupported_versions_are_blocking() {
    for version in ["7.0.5+gitea-1.21.11", "1.22.0"] {
        let env = Env::new(version).await;
        let (err, n) = env.poll_err().await;
        match &err {
            ForgeError::Blocking {
                kind: BlockingKind::Other,
                message,
            } => assert!(message.contains("Forgejo 8 or newer"), "{message}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(n, 1);
    }
}

#[tokio::test]
async fn runs_are_sorted_newest_first_before_v15() {
    // v12 lists runs in ascending id order; two workflows give two push runs.
    let env = Env::new(V12).await;
    env.fake
        .add_workflow_run(REPO, SHA, "push", "ci.yml", &[("build", "success")]);
    env.fake.add_workflow_run(
        REPO,
        SHA,
        "push",
        "mirror.yml",
        &[("radicle-push", "success")],
    );
    let (v, runs, n) = env.poll().await;
    assert_eq!(v.kind, VerdictKind::Green, "{v:?}");
    assert!(runs[0].id > runs[1].id, "{runs:?}");
    assert_eq!(runs[0].workflow.as_deref(), Some("mirror.yml"));
    assert_eq!(n, PROBE + 2);
}

#[tokio::test]
async fn two_push_runs_cost_one_jobs_request_each_on_16() {
    let env = Env::new(V16).await;
    env.fake
        .add_workflow_run(REPO, SHA, "push", "ci.yml", &[("build", "running")]);
    env.fake.add_workflow_run(
        REPO,
        SHA,
        "push",
        "mirror.yml",
        &[("radicle-push", "waiting")],
    );
    let (v, runs, n) = env.poll().await;
    assert_eq!(v.kind, VerdictKind::Running, "{v:?}");
    assert_eq!(runs.len(), 2);
    assert_eq!(n, PROBE + cost(ApiPath::RunsAndJobs, 2, 0));
}

#[tokio::test]
async fn branch_head_reads_the_commit_id() {
    let env = Env::new(V11).await;
    env.fake.set_branch(REPO, "feature/x", SHA);
    let head = env
        .forge()
        .branch_head(&env.repo, "feature/x")
        .await
        .unwrap();
    assert_eq!(head.as_deref(), Some(SHA));
    assert_eq!(
        env.forge().branch_head(&env.repo, "gone").await.unwrap(),
        None
    );
    assert_eq!(env.requests(), 2, "no version probe for branches");
    assert!(
        env.fake.hit_paths()[0].ends_with("/repos/orch-test/alpha/branches/feature/x"),
        "{:?}",
        env.fake.hit_paths()
    );
    let ghost = env
        .forge()
        .branch_head(&repo("ghost"), "main")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ghost, None, "an unknown repository has no branch either");
}

#[tokio::test]
async fn job_log_on_16_and_none_before() {
    let env = Env::new(V16).await;
    let run = env.fake.add_run(
        REPO,
        SHA,
        "push",
        &[("build", "failure"), ("radicle-push", "skipped")],
    );
    env.fake
        .set_log(run, "build", "error[E0308]: mismatched types\n");
    let log = env.forge().job_log(&env.repo, SHA, "build").await.unwrap();
    assert_eq!(log.as_deref(), Some("error[E0308]: mismatched types\n"));
    // radicle-push never ran: no log.
    let none = env
        .forge()
        .job_log(&env.repo, SHA, "radicle-push")
        .await
        .unwrap();
    assert_eq!(none, None);
    assert_eq!(
        env.forge().job_log(&env.repo, SHA, "nope").await.unwrap(),
        None
    );

    for version in [V8, V12, V15] {
        let env = Env::new(version).await;
        env.fake.add_run(REPO, SHA, "push", &[("build", "failure")]);
        assert_eq!(
            env.forge().job_log(&env.repo, SHA, "build").await.unwrap(),
            None
        );
        assert_eq!(env.requests(), PROBE, "{version}: only the version probe");
    }
}

/// A TCP socket on 127.0.0.1 that is bound but not listening, and its port.
fn bound_not_listening() -> (std::os::fd::OwnedFd, u16) {
    use std::os::fd::FromRawFd;
    // SAFETY: plain socket calls on a fresh descriptor owned by the returned OwnedFd; the
    // address structs are zero-initialised and sized as the calls expect.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
        let owned = std::os::fd::OwnedFd::from_raw_fd(fd);
        let mut addr: libc::sockaddr_in = std::mem::zeroed();
        addr.sin_family = libc::AF_INET as libc::sa_family_t;
        addr.sin_addr.s_addr = u32::from(std::net::Ipv4Addr::LOCALHOST).to_be();
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        let rc = libc::bind(fd, (&raw const addr).cast(), len);
        assert_eq!(rc, 0, "bind: {}", std::io::Error::last_os_error());
        let mut got: libc::sockaddr_in = std::mem::zeroed();
        let mut got_len = len;
        let rc = libc::getsockname(fd, (&raw mut got).cast(), &mut got_len);
        assert_eq!(rc, 0, "getsockname: {}", std::io::Error::last_os_error());
        (owned, u16::from_be(got.sin_port))
    }
}

#[tokio::test]
async fn connection_refused_is_transient() {
    // A socket bound but never listening keeps its port ours (no parallel test can take it)
    // while every connection to it is refused.
    let (_socket, port) = bound_not_listening();
    let forge = ForgejoForge::new(
        &format!("http://127.0.0.1:{port}"),
        OWNER,
        Some(Secret::new(TOKEN.into())),
        Duration::from_secs(2),
        retry(),
    )
    .unwrap();
    let err = forge
        .runs_for_commit(&repo(REPO), SHA, None)
        .await
        .expect_err("nothing listens");
    match &err {
        ForgeError::Transient { message, attempts } => {
            assert_eq!(*attempts, 3);
            assert!(message.contains("cannot connect"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert_no_token(&err);
    assert_eq!(forge.requests_made(), 4);
}

#[tokio::test]
async fn short_sha_is_rejected_without_requests() {
    let env = Env::new(V16).await;
    let err = env
        .forge()
        .runs_for_commit(&env.repo, "0123456", None)
        .await
        .expect_err("short sha");
    assert!(err.is_blocking());
    assert_eq!(env.requests(), 0);
}

/// Captures what the client logs at debug level.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn logs_name_method_and_path_never_the_token() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let env = Env::new(V15).await;
    env.fake
        .add_run(REPO, SHA, "push", &[("radicle-push", "success")]);
    env.fake
        .fail_next("/actions/runs", 1, Fault::EchoAuthorization(502));
    // Other tests (threads) may have registered the client's callsites while no subscriber
    // existed; recompute their interest now that this thread has one.
    tracing::callsite::rebuild_interest_cache();
    env.poll().await;
    env.fake
        .fail_next("/actions/", 1, Fault::EchoAuthorization(401));
    env.follower.forget(REPO, SHA);
    let _ = env.poll_err().await;

    let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(text.contains("forgejo request"), "{text}");
    assert!(text.contains("method=\"GET\""), "{text}");
    assert!(
        text.contains("/api/v1/repos/orch-test/alpha/actions/runs"),
        "{text}"
    );
    assert!(!text.contains(TOKEN), "token in logs:\n{text}");
}

#[tokio::test]
async fn fake_payloads_have_the_reference_shapes() {
    let fake = FakeForgejo::start(V16).await;
    let run = fake.add_run(
        REPO,
        SHA,
        "push",
        &[("build", "running"), ("radicle-push", "waiting")],
    );
    fake.set_needs(run, "radicle-push", &["build"]);
    let get = |path: String| async move {
        let body = reqwest::get(path).await.unwrap().text().await.unwrap();
        serde_json::from_str::<serde_json::Value>(&body).unwrap()
    };
    let base = format!("{}/api/v1/repos/{OWNER}/{REPO}/actions", fake.uri());

    let tasks = get(format!("{base}/tasks?limit=50")).await;
    assert_eq!(tasks["total_count"], 1);
    let task = tasks["workflow_runs"][0].as_object().unwrap();
    let mut keys: Vec<&str> = task.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "created_at",
            "display_title",
            "event",
            "head_branch",
            "head_sha",
            "id",
            "name",
            "run_number",
            "run_started_at",
            "status",
            "updated_at",
            "url",
            "workflow_id"
        ]
    );

    let runs = get(format!("{base}/runs?head_sha={SHA}")).await;
    let r = &runs["workflow_runs"][0];
    assert_eq!(r["commit_sha"], SHA);
    assert!(r.get("head_sha").is_none());
    assert_eq!(r["ScheduleID"], 0);
    assert_eq!(r["index_in_repo"], 1);
    assert_eq!(r["stopped"], "1970-01-01T00:00:00Z");
    assert!(r["repository"]["full_name"].is_string());
    assert!(r["trigger_user"]["login"].is_string());
    assert!(r.get("duration").is_none() || r["duration"].as_i64().unwrap() >= 1_000_000_000);
    let none = get(format!("{base}/runs?head_sha={}", &SHA[..7])).await;
    assert_eq!(none["total_count"], 0, "short SHAs match nothing");

    let jobs = get(format!("{base}/runs/{run}/jobs")).await;
    let jobs = jobs.as_array().expect("bare array");
    assert_eq!(jobs[0]["needs"], serde_json::Value::Null);
    assert_eq!(jobs[0]["runs_on"], serde_json::Value::Null);
    assert_eq!(jobs[1]["needs"], serde_json::json!(["build"]));
    // From v15 attempt is 1 at creation (not at pickup); handle is a UUID.
    assert_eq!(
        (jobs[1]["task_id"].as_i64(), jobs[1]["attempt"].as_i64()),
        (Some(0), Some(1))
    );
    assert_eq!(jobs[1]["handle"].as_str().unwrap().len(), 36);

    // Commit statuses: one per job of the push run, key `status`, relative target_url.
    let combined = get(format!(
        "{}/api/v1/repos/{OWNER}/{REPO}/commits/{SHA}/status",
        fake.uri()
    ))
    .await;
    assert_eq!(combined["state"], "pending");
    let st = combined["statuses"].as_array().unwrap();
    assert_eq!(st.len(), 2);
    assert!(
        st.iter()
            .any(|s| s["context"] == "ci.yml / radicle-push (push)"
                && s["status"] == "pending"
                && s["description"] == "Waiting to run"
                && s["target_url"] == format!("/{OWNER}/{REPO}/actions/runs/1/jobs/1")
                && s["creator"].is_null())
    );
    let none = get(format!(
        "{}/api/v1/repos/{OWNER}/{REPO}/commits/{}/status",
        fake.uri(),
        "f".repeat(40)
    ))
    .await;
    assert_eq!(none["statuses"], serde_json::Value::Null);

    // Older versions lack the newer endpoints.
    let old = FakeForgejo::start(V11).await;
    let resp = reqwest::get(format!(
        "{}/api/v1/repos/{OWNER}/{REPO}/actions/runs",
        old.uri()
    ))
    .await
    .unwrap();
    assert_eq!(resp.status().as_u16(), 404);
    assert_eq!(
        resp.text().await.unwrap(),
        "404 page not found\n",
        "chi's plain text"
    );
}

// ---- the request table ---------------------------------------------------------------------

/// Measures the request cost of each kind of poll on every tested version.
async fn measure(version: &str) -> String {
    // Pending SHA: first poll (with the version probe), then a later poll.
    let env = Env::new(version).await;
    let run = env.fake.add_run(
        REPO,
        SHA,
        "push",
        &[("build", "running"), ("radicle-push", "waiting")],
    );
    let first = env.poll().await.2;
    let later = env.poll().await.2;
    env.fake.set_job(run, "build", "success");
    env.fake.set_job(run, "radicle-push", "success");
    let deciding = env.poll().await.2;
    let decided = env.poll().await.2;

    // A decided red: each further poll is one cheap look.
    let env = Env::new(version).await;
    env.fake.add_run(
        REPO,
        SHA,
        "push",
        &[("build", "failure"), ("radicle-push", "skipped")],
    );
    env.poll().await;
    let red = env.poll().await.2;

    // Nothing triggered yet.
    let env = Env::new(version).await;
    env.poll().await;
    let no_run = env.poll().await.2;

    // The commit's tasks three pages deep in /tasks.
    let mut env = Env::new(version).await;
    deep_scenario(&mut env).await;
    env.poll().await;
    let deep = env.poll().await.2;

    let path = match path_of(version) {
        ApiPath::TasksOnly => "tasks",
        ApiPath::RunsAndTasks => "runs + tasks",
        ApiPath::RunsAndJobs => "runs + jobs",
    };
    let v = version.split('+').next().unwrap();
    format!(
        "| {v} | {path} | {first} | {later} | {deciding} | {decided} | {red} | {no_run} | {deep} |"
    )
}

#[tokio::test]
async fn request_counts_match_docs() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/ci-requests.md"))
        .expect("docs/ci-requests.md");
    let mut rows = Vec::new();
    for v in VERSIONS {
        rows.push(measure(v).await);
    }
    let missing: Vec<&String> = rows.iter().filter(|r| !doc.contains(r.as_str())).collect();
    assert!(
        missing.is_empty(),
        "docs/ci-requests.md is out of date; measured rows:\n{}",
        rows.join("\n")
    );
}

#[tokio::test]
async fn follower_futures_are_send_and_spawnable() {
    fn assert_send<T: Send>(t: T) -> T {
        t
    }
    let env = Arc::new(Env::new(V16).await);
    env.fake
        .add_run(REPO, SHA, "push", &[("radicle-push", "success")]);
    let task_env = env.clone();
    let handle = tokio::spawn(async move {
        let fut = task_env.follower.poll(
            &task_env.repo,
            SHA,
            Some(task_env.pushed_ms),
            task_env.fake.now_ms(),
        );
        assert_send(fut).await.map(|(v, _)| v.kind)
    });
    assert_eq!(handle.await.unwrap().unwrap(), VerdictKind::Green);
    let head = assert_send(env.forge().branch_head(&env.repo, "main")).await;
    assert_eq!(head.unwrap(), None);
}
