//! `orch ci status` / `orch ci logs` through the real binary, against the fake Forgejo and the
//! local forge: verdict JSON shape, exit codes, `--wait`, and that a distinctive token never
//! appears in any output or any file under the state directory.

use crate::support::fake_forgejo::{FakeForgejo, Fault, OWNER, REPO, TOKEN};
use crate::support::{
    CONTRACT_TEXT, ORCH, commit_file, files_under, init_repo, orch_cmd, output_text as text,
    poll_until, push_head, shipped_contract,
};
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

const SHA: &str = "0123456789abcdef0123456789abcdef01234567";

struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    fn new(uri: &str) -> Setup {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("repos.yaml"),
            format!(
                "forge: {{ kind: forgejo, url: '{uri}', owner: {OWNER}, token_env: ORCH_TEST_FORGE_TOKEN, request_timeout: 2s }}\n\
                 ci: {{ sync_job: radicle-push, poll_interval: 100ms }}\n\
                 repos:\n  {REPO}: {{ path: {REPO} }}\n"
            ),
        )
        .unwrap();
        let c = dir.path().join("contracts");
        std::fs::create_dir_all(&c).unwrap();
        // Fast retries for tests: same contract, tiny backoff.
        let contract = CONTRACT_TEXT.replace(
            "backoff: { initial: 5s, max: 60s, multiplier: 2, max_retries: 3 }",
            "backoff: { initial: 10ms, max: 40ms, multiplier: 2, max_retries: 3 }",
        );
        std::fs::write(c.join("worker-completion.yaml"), contract).unwrap();
        Setup { dir }
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = orch_cmd();
        c.current_dir(self.dir.path())
            .env("ORCH_CONFIG", self.dir.path().join("repos.yaml"))
            .env("ORCH_STATE_DIR", self.dir.path().join("state"))
            .env("ORCH_TEST_FORGE_TOKEN", TOKEN)
            .args(args);
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }

    /// Creates the state (read-only commands create none), so that `ci status` records what
    /// it saw there.
    fn with_state(self) -> Setup {
        for args in [&["hold", REPO, "--reason", "state"][..], &["unhold", REPO]] {
            let out = self.run(args);
            assert!(out.status.success(), "{}", text(&out));
        }
        self
    }

    /// Every byte orch wrote under the state directory must be free of the token.
    fn assert_no_token_in_state(&self) {
        let files = files_under(&self.dir.path().join("state"));
        for p in &files {
            let bytes = std::fs::read(p).unwrap();
            assert!(
                !bytes.windows(TOKEN.len()).any(|w| w == TOKEN.as_bytes()),
                "token found in {}",
                p.display()
            );
        }
        assert!(
            !files.is_empty(),
            "the state directory should hold the database"
        );
    }
}

fn assert_no_token(o: &Output) {
    assert!(
        !text(o).contains(TOKEN),
        "token leaked in output:\n{}",
        text(o)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn green_verdict_json_shape_and_exit_zero() {
    let fake = FakeForgejo::start("16.0.0+gitea-1.22.0").await;
    fake.require_token(Some(TOKEN));
    fake.add_run(
        REPO,
        SHA,
        "push",
        &[
            ("check", "success"),
            ("test", "success"),
            ("radicle-push", "success"),
        ],
    );
    let s = Setup::new(&fake.uri()).with_state();
    let out = s.run(&["ci", "status", "--repo", REPO, "--sha", SHA, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["repo"], REPO);
    assert_eq!(v["sha"], SHA);
    assert_eq!(v["verdict"], "green");
    assert_eq!(v["failed_jobs"], serde_json::json!([]));
    let run = &v["runs"][0];
    assert_eq!(run["event"], "push");
    assert!(run["id"].is_i64() && run["number"].is_i64(), "{run}");
    let jobs = run["jobs"].as_array().unwrap();
    assert!(
        jobs.iter()
            .any(|j| j["name"] == "radicle-push" && j["status"] == "success" && j["attempt"] == 1)
    );
    assert_no_token(&out);
    s.assert_no_token_in_state();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn red_with_skipped_sync_job_exits_one_and_names_the_failure() {
    let fake = FakeForgejo::start("12.0.4+gitea-1.22.0").await;
    fake.add_run(
        REPO,
        SHA,
        "push",
        &[("check", "failure"), ("radicle-push", "skipped")],
    );
    let s = Setup::new(&fake.uri());
    let out = s.run(&["ci", "status", "--repo", REPO, "--sha", SHA, "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["verdict"], "red");
    assert_eq!(v["failed_jobs"], serde_json::json!(["check"]));
    // On 12–15 a job skipped by the server never gets a task, so radicle-push is invisible
    // there; Forgejo 16's jobs endpoint shows it.
    let fake16 = FakeForgejo::start("16.0.0+gitea-1.22.0").await;
    fake16.add_run(
        REPO,
        SHA,
        "push",
        &[("check", "failure"), ("radicle-push", "skipped")],
    );
    let s16 = Setup::new(&fake16.uri());
    let human = s16.run(&["ci", "status", "--repo", REPO, "--sha", SHA]);
    assert_eq!(human.status.code(), Some(1));
    let h = text(&human);
    assert!(
        h.contains("red")
            && h.contains("radicle-push")
            && h.contains("skipped")
            && h.contains("failed: check"),
        "{h}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_job_skipped_alone_is_sync_not_done_and_dispatch_runs_do_not_count() {
    let fake = FakeForgejo::start("16.0.0+gitea-1.22.0").await;
    fake.add_run(
        REPO,
        SHA,
        "workflow_dispatch",
        &[("check", "success"), ("radicle-push", "success")],
    );
    let s = Setup::new(&fake.uri());
    let out = s.run(&["ci", "status", "--repo", REPO, "--sha", SHA, "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["verdict"], "pending", "a dispatch run is no proof: {v}");
    fake.add_run(
        REPO,
        SHA,
        "push",
        &[("check", "success"), ("radicle-push", "skipped")],
    );
    let out = s.run(&["ci", "status", "--repo", REPO, "--sha", SHA, "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["verdict"], "sync_not_done", "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_follows_a_running_job_until_it_is_decided() {
    let fake = FakeForgejo::start("16.0.0+gitea-1.22.0").await;
    let run = fake.add_run(
        REPO,
        SHA,
        "push",
        &[("check", "success"), ("radicle-push", "running")],
    );
    let s = Setup::new(&fake.uri());
    let mut child = s
        .cmd(&[
            "ci",
            "status",
            "--repo",
            REPO,
            "--sha",
            SHA,
            "--wait",
            "--timeout",
            "30s",
            "--json",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Let the client see "running" at least once before the job finishes.
    poll_until(
        "the client to poll (it never did)",
        Duration::from_secs(10),
        || {
            fake.hit_paths()
                .iter()
                .any(|p| p.contains("/jobs"))
                .then_some(())
        },
        || format!("{:?}", fake.hit_paths()),
    );
    assert!(
        child.try_wait().unwrap().is_none(),
        "--wait must not return while running"
    );
    fake.set_job(run, "radicle-push", "success");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["verdict"], "green");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_token_is_a_blocking_error_exit_two_without_the_token() {
    let fake = FakeForgejo::start("16.0.0+gitea-1.22.0").await;
    fake.require_token(Some("a-different-token"));
    let s = Setup::new(&fake.uri()).with_state();
    let out = s.run(&["ci", "status", "--repo", REPO, "--sha", SHA]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).to_lowercase().contains("token"),
        "{}",
        text(&out)
    );
    assert_no_token(&out);
    // A server that echoes the Authorization header back in its error body.
    fake.require_token(None);
    fake.fail_always("/actions/", Fault::EchoAuthorization(403));
    let out = s.run(&["ci", "status", "--repo", REPO, "--sha", SHA, "-vv"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert_no_token(&out);
    s.assert_no_token_in_state();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_repository_on_the_forge_and_missing_token_are_refused() {
    let fake = FakeForgejo::start("16.0.0+gitea-1.22.0").await;
    let s = Setup::new(&fake.uri());
    std::fs::write(
        s.dir.path().join("repos.yaml"),
        format!("forge: {{ kind: forgejo, url: '{}', owner: {OWNER}, token_env: ORCH_TEST_FORGE_TOKEN }}\nrepos:\n  ghost: {{}}\n", fake.uri()),
    )
    .unwrap();
    let out = s.run(&["ci", "status", "--repo", "ghost", "--sha", SHA]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("not found"), "{}", text(&out));
    let out = s
        .cmd(&["ci", "status", "--repo", "ghost", "--sha", SHA])
        .env_remove("ORCH_TEST_FORGE_TOKEN")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out).contains("ORCH_TEST_FORGE_TOKEN is not set"),
        "{}",
        text(&out)
    );
    let out = s.run(&["ci", "status", "--repo", "ghost", "--sha", "not-a-sha"]);
    assert_eq!(out.status.code(), Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forge_down_is_transient_exit_three() {
    let fake = FakeForgejo::start("16.0.0+gitea-1.22.0").await;
    fake.fail_always("/actions/", Fault::Status(502));
    let s = Setup::new(&fake.uri());
    let out = s.run(&["ci", "status", "--repo", REPO, "--sha", SHA]);
    // Not "CI is not green" (1): the forge could not answer, a retry may (3).
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(text(&out).contains("transient"), "{}", text(&out));
}

/// A one-repository organisation on the local forge whose `check` job runs `check`, with its
/// bare remote ready.
fn local_org(
    check: &str,
) -> (
    tempfile::TempDir,
    orch::forge::local::LocalForge,
    std::path::PathBuf,
) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::write(
        root.join("repos.yaml"),
        format!(
            "forge: {{ kind: local }}\nrepos:\n  core:\n    ci:\n      jobs:\n        - {{ name: check, run: \"{check}\" }}\n        - {{ name: radicle-push, run: \"echo mirrored\", needs: [check] }}\n"
        ),
    )
    .unwrap();
    init_repo(&root.join("core"), "core");
    let config = orch::config::Config::load(&root.join("repos.yaml")).unwrap();
    let forge = orch::forge::local::LocalForge::new(&root.join("state"), &config).with_exe(ORCH);
    let remote = forge.ensure_remote(config.repo("core").unwrap()).unwrap();
    (dir, forge, remote)
}

/// Runs orch on the organisation in `root` with state in `state`.
fn orch_in(root: &Path, state: &Path, args: &[&str]) -> Output {
    orch_cmd()
        .env("ORCH_CONFIG", root.join("repos.yaml"))
        .env("ORCH_STATE_DIR", state)
        .env("ORCH_CONTRACT", shipped_contract())
        .args(args)
        .output()
        .unwrap()
}

/// `orch ci status --repo core --sha <sha> --wait --timeout 120s --json` on that organisation.
fn ci_status_wait(root: &Path, state: &Path, sha: &str) -> Output {
    orch_in(
        root,
        state,
        &[
            "ci",
            "status",
            "--repo",
            "core",
            "--sha",
            sha,
            "--wait",
            "--timeout",
            "120s",
            "--json",
        ],
    )
}

#[test]
fn local_forge_status_and_logs_through_the_cli() {
    let (dir, _forge, remote) = local_org("echo checking $ORCH_CI_SHA; test -f ok");
    let (root, repo, state) = (
        dir.path(),
        dir.path().join("core"),
        dir.path().join("state"),
    );
    // A failing commit, then a fixed one.
    let bad = commit_file(&repo, "f", "1", "no ok file");
    push_head(&repo, &remote, "feature");
    let orch = |args: &[&str]| orch_in(root, &state, args);
    let out = ci_status_wait(root, &state, &bad);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["verdict"], "red", "{v}");
    assert_eq!(out.status.code(), Some(1));
    // Red is decided the moment `check` fails; its dependent is marked skipped just after
    // (as on Forgejo, where blocked jobs are resolved once the job they need has finished).
    let sync_skipped = |v: &serde_json::Value| {
        v["runs"][0]["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|j| j["name"] == "radicle-push" && j["status"] == "skipped")
    };
    let status = || orch(&["ci", "status", "--repo", "core", "--sha", &bad, "--json"]);
    let mut v = v;
    poll_until(
        "radicle-push to be marked skipped",
        Duration::from_secs(60),
        || {
            if sync_skipped(&v) {
                return Some(());
            }
            v = serde_json::from_slice(&status().stdout).unwrap();
            assert_eq!(v["verdict"], "red", "{v}");
            None
        },
        || text(&status()),
    );
    assert!(sync_skipped(&v), "{v}");
    let logs = orch(&[
        "ci", "logs", "--repo", "core", "--sha", &bad, "--job", "check",
    ]);
    assert!(
        String::from_utf8_lossy(&logs.stdout).contains(&format!("checking {bad}")),
        "{}",
        text(&logs)
    );
    let good = commit_file(&repo, "ok", "1", "ok");
    push_head(&repo, &remote, "feature");
    // A short SHA is resolved in the clone.
    let out = orch(&[
        "ci",
        "status",
        "--repo",
        "core",
        "--sha",
        &good[..8],
        "--wait",
        "--timeout",
        "120s",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("green"), "{}", text(&out));
}

/// Ages `refs/heads/<branch>` of `remote` past `forge.lost_hook_grace` (5 s by default).
fn age_ref(remote: &Path, branch: &str) {
    let file = remote.join("refs/heads").join(branch);
    assert!(file.is_file(), "{} is a loose ref", file.display());
    let aged = Command::new("touch")
        .args(["-d", "1 minute ago"])
        .arg(&file)
        .status()
        .unwrap();
    assert!(aged.success());
}

/// The remote's hook is off while `push` runs: the ref is updated, no run is recorded (what a
/// pusher killed while git runs the hook leaves).
fn push_without_hook(remote: &Path, push: impl FnOnce()) {
    let hook = remote.join("hooks/post-receive");
    std::fs::rename(&hook, remote.join("hooks/post-receive.off")).unwrap();
    push();
    std::fs::rename(remote.join("hooks/post-receive.off"), &hook).unwrap();
}

#[test]
fn a_lost_push_of_orchs_branch_is_recovered_by_its_owner_never_by_ci_status() {
    let (dir, forge, remote) = local_org("true");
    let (root, repo, state) = (
        dir.path(),
        dir.path().join("core"),
        dir.path().join("state"),
    );
    let sha = commit_file(&repo, "f", "1", "change");
    push_without_hook(&remote, || push_head(&repo, &remote, "orch/core-1"));
    // Asked right away, the ref is too fresh to call the hook lost: no run is invented.
    let owner = forge.clone().recovering();
    assert!(owner.runs("core", &sha).unwrap().is_empty());
    age_ref(&remote, "orch/core-1");
    // A question starts nothing: `ci status` reads, it does not recover (pending: the
    // push's owner will start the run).
    let out = orch_in(
        root,
        &state,
        &["ci", "status", "--repo", "core", "--sha", &sha, "--json"],
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["verdict"], "pending", "{v}");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        forge.runs("core", &sha).unwrap().is_empty(),
        "no run started"
    );
    // The pushes' owner (a supervisor, resume) starts its CI, exactly once.
    let run = owner
        .wait_for_run(
            "core",
            &sha,
            std::time::Instant::now() + Duration::from_secs(120),
        )
        .unwrap()
        .expect("the lost push's run, run to its end");
    assert_eq!(run.status.map(|s| s.as_str()), Some("success"), "{run:?}");
    assert_eq!(
        owner.runs("core", &sha).unwrap().len(),
        1,
        "exactly one run, however often it is asked"
    );
    let out = ci_status_wait(root, &state, &sha);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["verdict"], "green", "{v}");
}

#[test]
fn ci_status_on_the_base_commit_starts_no_run_and_creates_nothing() {
    let (dir, forge, remote) = local_org("true");
    let (root, repo, state) = (
        dir.path(),
        dir.path().join("core"),
        dir.path().join("state"),
    );
    let base = crate::support::git(&repo, &["rev-parse", "HEAD"]);
    let base = base.trim();
    let branch = forge_branch(root);
    // The base branch as the remote was seeded with it (no hook ran), long ago; and a base
    // branch pushed past its hook: neither is a push of orch's.
    let other = commit_file(&repo, "g", "1", "on the base branch");
    push_without_hook(&remote, || push_head(&repo, &remote, "feature"));
    age_ref(&remote, "feature");
    if remote.join("refs/heads").join(&branch).is_file() {
        age_ref(&remote, &branch);
    }
    // The state as a first command left it: the database exists.
    let out = orch_in(root, &state, &["hold", "core", "--reason", "state"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = orch_in(root, &state, &["unhold", "core"]);
    assert!(out.status.success(), "{}", text(&out));
    let before = files_under(&state);
    for sha in [base, other.as_str()] {
        let out = orch_in(
            root,
            &state,
            &["ci", "status", "--repo", "core", "--sha", sha, "--json"],
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["verdict"], "no_run", "{v}");
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    }
    let mut after = files_under(&state);
    let mut before = before;
    // SQLite's own side files come and go with a connection; they hold no new state.
    let real = |v: &mut Vec<std::path::PathBuf>| {
        v.retain(|p| {
            let n = p.to_string_lossy();
            !(n.ends_with("-wal") || n.ends_with("-shm") || n.ends_with("-journal"))
        });
        v.sort();
    };
    real(&mut before);
    real(&mut after);
    assert_eq!(before, after, "ci status created no file (no run, no log)");
    // Not even the owner of workers' pushes starts CI for a base branch.
    let owner = forge.clone().recovering();
    assert!(owner.runs("core", base).unwrap().is_empty());
    assert!(owner.runs("core", &other).unwrap().is_empty());
    assert!(forge.runs("core", base).unwrap().is_empty());
}

/// The base branch of `core` in the organisation at `root`.
fn forge_branch(root: &Path) -> String {
    let config = orch::config::Config::load(&root.join("repos.yaml")).unwrap();
    config.repo("core").unwrap().branch.clone()
}
