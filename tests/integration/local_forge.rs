//! The local forge end to end: real git, real bare remotes, the real `orch` binary in the
//! post-receive hook and as the detached runner. Everything stays in temp directories.

use crate::support::{
    JOB_PID_SH, ORCH, RUNNER_PID_SH, commit_file, git, init_repo, output_text, poll_until,
    push_head,
};
use orch::ci::{CiRun, JobStatus};
use orch::config::Config;
use orch::forge::Forge;
use orch::forge::local::LocalForge;
use orch::milestone::Milestone;
use orch::process::group_alive;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Generous: debug binaries, two cores, tests in parallel.
const RUN_DEADLINE: Duration = Duration::from_secs(90);

/// One `ci.jobs` entry as YAML flow mapping ([`crate::support::Job`]).
fn job(name: &str, run: &str, needs: &[&str], timeout: Option<&str>) -> String {
    crate::support::job(name, run)
        .needs(needs)
        .timeout(timeout)
        .yaml()
}

fn sh_quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', "'\\''"))
}

/// An organisation for the forge alone (no worker, no orch state but the forge's): the
/// clones, repos.yaml and the local forge with every repository's remote made.
struct ForgeOrg {
    _root: tempfile::TempDir,
    root: PathBuf,
    config: Config,
    forge: LocalForge,
}

impl ForgeOrg {
    /// Repositories with their `ci.jobs` (YAML from [`job`]). The state directory's name has a quote and a space to exercise hook quoting.
    fn new(repos: &[(&str, String)], max_runs: usize) -> ForgeOrg {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let mut yaml = format!("forge: {{kind: local, max_concurrent_runs: {max_runs}}}\nrepos:\n");
        for (name, jobs) in repos {
            init_repo(&root.join(name), name);
            yaml.push_str(&format!(
                "  {name}:\n    path: {name}\n    ci:\n      jobs:\n{jobs}"
            ));
        }
        let file = root.join("repos.yaml");
        std::fs::write(&file, yaml).unwrap();
        let config = Config::load(&file).unwrap();
        let forge = LocalForge::new(&root.join("it's state"), &config)
            .with_exe(ORCH)
            .recovering();
        for r in &config.repos {
            forge.ensure_remote(r).unwrap();
        }
        ForgeOrg {
            _root: dir,
            root,
            config,
            forge,
        }
    }

    fn clone_dir(&self, repo: &str) -> PathBuf {
        self.root.join(repo)
    }

    /// Commits a change in the local clone and pushes it to the forge as `feature`.
    fn push_change(&self, repo: &str, content: &str) -> String {
        let clone = self.clone_dir(repo);
        let sha = commit_file(&clone, "feature.txt", content, content);
        push_head(&clone, &self.forge.remote_path(repo), "feature");
        sha
    }

    fn wait(&self, repo: &str, sha: &str) -> CiRun {
        match self
            .forge
            .wait_for_run(repo, sha, Instant::now() + RUN_DEADLINE)
            .unwrap()
        {
            Some(run) => run,
            None => panic!(
                "no finished run for {repo}@{sha}: {:#?}\nrunner log:\n{}",
                self.forge.runs(repo, sha).unwrap(),
                self.runner_log(repo, 1)
            ),
        }
    }

    fn runner_log(&self, repo: &str, number: i64) -> String {
        let p = self
            .forge
            .state_dir()
            .join(format!("forge/logs/{repo}/{number}/runner.log"));
        std::fs::read_to_string(p).unwrap_or_default()
    }
}

fn status_of(run: &CiRun, job: &str) -> JobStatus {
    run.jobs
        .iter()
        .find(|j| j.name == job)
        .unwrap_or_else(|| panic!("no job {job} in {run:#?}"))
        .status
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

#[test]
fn push_starts_a_run_in_a_clean_checkout_of_the_pushed_sha() {
    let marks = tempfile::tempdir().unwrap();
    let m = |n: &str| sh_quote(&marks.path().join(n));
    let check = format!(
        "git rev-parse HEAD > {sha} && cat feature.txt > {content} && \
         test -z \"${{GIT_DIR:-}}\" && test -z \"${{ORCH_WORKER_ID:-}}\" && \
         echo \"$ORCH_CI_REPO $ORCH_CI_RUN $ORCH_CI_SHA\" > {env} && \
         while [ ! -e {release} ]; do sleep 0.05; done; echo checked",
        sha = m("check.sha"),
        content = m("content"),
        env = m("env"),
        release = m("release"),
    );
    let jobs = job("check", &check, &[], Some("60s"))
        + &job(
            "radicle-push",
            &format!("touch {}", m("mirrored")),
            &["check"],
            None,
        );
    let org = ForgeOrg::new(&[("alpha", jobs)], 4);
    let repo = org.config.repo("alpha").unwrap().clone();
    let base = git(&org.clone_dir("alpha"), &["rev-parse", "HEAD"]);

    let sha = {
        // The pusher's environment must not leak into the job.
        let clone = org.clone_dir("alpha");
        commit_file(&clone, "feature.txt", "hello", "hello");
        let out = Command::new("git")
            .arg("-C")
            .arg(&clone)
            .args(["push", "-q"])
            .arg(org.forge.remote_path("alpha"))
            .arg("HEAD:refs/heads/feature")
            .env("ORCH_WORKER_ID", "w-1")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        git(&clone, &["rev-parse", "HEAD"])
    };

    // The push has returned while `check` is still waiting for the release file: the hook
    // did not block on the jobs. The run exists already.
    let runs = org.forge.runs("alpha", &sha).unwrap();
    assert_eq!(runs.len(), 1, "{runs:#?}");
    assert!(!runs[0].status.unwrap().is_done(), "{runs:#?}");
    poll_until(
        "check running, radicle-push blocked",
        RUN_DEADLINE,
        || {
            let r = org.forge.runs("alpha", &sha).unwrap();
            (status_of(&r[0], "check") == JobStatus::Running
                && status_of(&r[0], "radicle-push") == JobStatus::Blocked
                && r[0].status == Some(JobStatus::Running))
            .then_some(())
        },
        || format!("{:#?}", org.forge.runs("alpha", &sha)),
    );
    std::fs::write(marks.path().join("release"), "").unwrap();

    let run = org.wait(&repo.name, &sha);
    assert_eq!(run.status, Some(JobStatus::Success), "{run:#?}");
    assert_eq!(run.event, "push");
    assert_eq!(run.number, 1);
    assert_eq!(status_of(&run, "check"), JobStatus::Success);
    assert_eq!(status_of(&run, "radicle-push"), JobStatus::Success);
    assert!(run.jobs.iter().all(|j| j.attempt == 1 && j.id.is_some()));

    let read = |n: &str| std::fs::read_to_string(marks.path().join(n)).unwrap();
    assert_eq!(
        read("check.sha").trim(),
        sha,
        "checked out the pushed commit"
    );
    assert_eq!(read("content"), "hello");
    assert_eq!(read("env").trim(), format!("alpha 1 {sha}"));
    assert!(marks.path().join("mirrored").exists());

    // The trait view agrees; the base branch (seeded, not pushed) has no run.
    let via_trait = block_on(org.forge.runs_for_commit(&repo, &sha, None)).unwrap();
    assert_eq!(via_trait, vec![run.clone()]);
    assert!(
        block_on(org.forge.runs_for_commit(&repo, &base, None))
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        block_on(org.forge.branch_head(&repo, "feature")).unwrap(),
        Some(sha.clone())
    );
    assert_eq!(
        block_on(org.forge.branch_head(&repo, "main")).unwrap(),
        Some(base)
    );
    assert_eq!(
        block_on(org.forge.branch_head(&repo, "nope")).unwrap(),
        None
    );
    let log = block_on(org.forge.job_log(&repo, &sha, "check"))
        .unwrap()
        .unwrap();
    assert!(log.contains("checked"), "{log}");

    // The checkout directory is removed after the run.
    let work = org.forge.state_dir().join("forge/work");
    poll_until(
        "the checkout directory to be removed",
        RUN_DEADLINE,
        || {
            std::fs::read_dir(&work)
                .map(|mut d| d.next().is_none())
                .unwrap_or(true)
                .then_some(())
        },
        || format!("checkout left behind in {}", work.display()),
    );

    // A second push gets run number 2.
    let sha2 = org.push_change("alpha", "second");
    let run2 = org.wait("alpha", &sha2);
    assert_eq!(run2.number, 2);
    assert_eq!(run2.status, Some(JobStatus::Success));
}

#[test]
fn failing_job_fails_the_run_and_skips_the_sync_job() {
    let jobs = job("check", "echo checking the code; exit 3", &[], None)
        + &job("lint", "echo lint ok", &[], None)
        + &job(
            "radicle-push",
            "echo must not run",
            &["check", "lint"],
            None,
        );
    let org = ForgeOrg::new(&[("beta", jobs)], 4);
    let repo = org.config.repo("beta").unwrap().clone();
    let sha = org.push_change("beta", "broken");
    let run = org.wait("beta", &sha);
    assert_eq!(run.status, Some(JobStatus::Failure), "{run:#?}");
    assert_eq!(status_of(&run, "check"), JobStatus::Failure);
    assert_eq!(status_of(&run, "lint"), JobStatus::Success);
    assert_eq!(status_of(&run, "radicle-push"), JobStatus::Skipped);

    let log = block_on(org.forge.job_log(&repo, &sha, "check"))
        .unwrap()
        .unwrap();
    assert!(log.contains("checking the code"), "{log}");
    assert!(log.contains("exited with code 3"), "{log}");
    let log = block_on(org.forge.job_log(&repo, &sha, "lint"))
        .unwrap()
        .unwrap();
    assert_eq!(log, "lint ok\n");
    let log = block_on(org.forge.job_log(&repo, &sha, "radicle-push"))
        .unwrap()
        .unwrap();
    assert!(
        log.contains("skipped") && log.contains("check failure"),
        "{log}"
    );
    assert!(!log.contains("must not run"));
    assert_eq!(
        block_on(org.forge.job_log(&repo, &sha, "no-such-job")).unwrap(),
        None
    );
}

#[test]
fn hanging_job_is_killed_at_its_timeout_with_its_whole_group() {
    let marks = tempfile::tempdir().unwrap();
    let m = |n: &str| sh_quote(&marks.path().join(n));
    let hang = format!(
        "{JOB_PID_SH} echo $g > {pgid}; \
         sh -c 'read -r c _ </proc/self/stat; echo $c > \"$1\"; exec sleep 600' sh {grandchild} & \
         while [ ! -s {grandchild} ]; do sleep 0.05; done; echo hanging; sleep 600",
        pgid = m("pgid"),
        grandchild = m("grandchild"),
    );
    let jobs = job("hang", &hang, &[], Some("2s"))
        + &job("radicle-push", "echo mirrored", &["hang"], None);
    let org = ForgeOrg::new(&[("gamma", jobs)], 4);
    let t0 = Instant::now();
    let sha = org.push_change("gamma", "hangs");
    let run = org.wait("gamma", &sha);
    assert!(t0.elapsed() < Duration::from_secs(60));
    assert_eq!(run.status, Some(JobStatus::Failure), "{run:#?}");
    assert_eq!(status_of(&run, "hang"), JobStatus::Failure);
    assert_eq!(status_of(&run, "radicle-push"), JobStatus::Skipped);

    let pgid: i32 = std::fs::read_to_string(marks.path().join("pgid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(!group_alive(pgid), "job process group {pgid} survived");
    let grandchild: i32 = std::fs::read_to_string(marks.path().join("grandchild"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        !orch::process::process_alive(grandchild, None),
        "grandchild {grandchild} survived"
    );
    let log = org
        .forge
        .read_job_log("gamma", &sha, "hang")
        .unwrap()
        .unwrap();
    assert!(log.contains("hanging"), "{log}");
    assert!(log.contains("timed out after 2s"), "{log}");
}

#[test]
fn runs_of_two_repositories_pushed_at_once_both_complete_within_the_bound() {
    let jobs = |marks: &Path| {
        let span = format!(
            "s=$(date +%s%N); sleep 1; e=$(date +%s%N); echo \"$s $e\" > {}/$ORCH_CI_REPO.span",
            sh_quote(marks)
        );
        job("build", &span, &[], None) + &job("radicle-push", "true", &["build"], None)
    };
    let marks = tempfile::tempdir().unwrap();
    let org = ForgeOrg::new(
        &[
            ("delta", jobs(marks.path())),
            ("epsilon", jobs(marks.path())),
        ],
        1,
    );
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| org.push_change("delta", "d"));
        let b = s.spawn(|| org.push_change("epsilon", "e"));
        (a.join().unwrap(), b.join().unwrap())
    });
    let ra = org.wait("delta", &a);
    let rb = org.wait("epsilon", &b);
    for r in [&ra, &rb] {
        assert_eq!(r.status, Some(JobStatus::Success), "{r:#?}");
        assert_eq!(r.number, 1, "run numbers are per repository");
    }
    let span = |repo: &str| -> (u128, u128) {
        let t = std::fs::read_to_string(marks.path().join(format!("{repo}.span"))).unwrap();
        let mut it = t.split_whitespace().map(|x| x.parse::<u128>().unwrap());
        (it.next().unwrap(), it.next().unwrap())
    };
    let (da, db) = (span("delta"), span("epsilon"));
    assert!(
        da.1 <= db.0 || db.1 <= da.0,
        "max_concurrent_runs: 1 but the runs overlapped: {da:?} {db:?}"
    );
}

#[test]
fn runner_death_fails_the_run_and_its_jobs_die_with_it() {
    let marks = tempfile::tempdir().unwrap();
    let m = |n: &str| sh_quote(&marks.path().join(n));
    let sleeper = format!(
        "{JOB_PID_SH} {RUNNER_PID_SH} echo $g > {pgid}.tmp && mv {pgid}.tmp {pgid}; echo $r > {runner}.tmp && mv {runner}.tmp {runner}; sleep 600",
        pgid = m("pgid"),
        runner = m("runner"),
    );
    let jobs =
        job("slow", &sleeper, &[], Some("10m")) + &job("radicle-push", "true", &["slow"], None);
    let org = ForgeOrg::new(&[("zeta", jobs)], 4);
    let sha = org.push_change("zeta", "z");
    let runner_file = marks.path().join("runner");
    poll_until(
        "the job to start",
        RUN_DEADLINE,
        || runner_file.exists().then_some(()),
        || format!("job never started: {:#?}", org.forge.runs("zeta", &sha)),
    );
    let read = |n: &str| -> i32 {
        std::fs::read_to_string(marks.path().join(n))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    };
    let (runner, pgid) = (read("runner"), read("pgid"));
    rustix::process::kill_process(
        rustix::process::Pid::from_raw(runner).unwrap(),
        rustix::process::Signal::KILL,
    )
    .ok();
    let run = org.wait("zeta", &sha);
    assert_eq!(run.status, Some(JobStatus::Failure), "{run:#?}");
    assert_eq!(status_of(&run, "slow"), JobStatus::Failure);
    assert_eq!(status_of(&run, "radicle-push"), JobStatus::Failure);
    let note = org
        .forge
        .read_job_log("zeta", &sha, "radicle-push")
        .unwrap()
        .unwrap();
    assert!(note.contains("runner died"), "{note}");
    poll_until(
        "the job to die with its runner",
        RUN_DEADLINE,
        || (!group_alive(pgid)).then_some(()),
        || "the job outlived its runner".into(),
    );
}

#[test]
fn a_run_whose_hook_died_before_starting_its_runner_is_started_not_failed() {
    // What a pusher killed inside its post-receive hook can leave: the push landed and the
    // hook recorded the run (same rows as db::create_run), then died before starting a
    // runner. Nothing of the run executed, so it must run — not be reported as failed.
    let jobs = job("check", "test -f feature.txt", &[], None)
        + &job("radicle-push", "true", &["check"], None);
    let org = ForgeOrg::new(&[("theta", jobs)], 4);
    let clone = org.clone_dir("theta");
    let sha = commit_file(&clone, "feature.txt", "t", "t");
    let remote = org.forge.remote_path("theta");
    git(
        &clone,
        &[
            "-c",
            "core.hooksPath=/dev/null",
            "push",
            "-q",
            "--receive-pack=git -c core.hooksPath=/dev/null receive-pack",
            remote.to_str().unwrap(),
            "HEAD:refs/heads/feature",
        ],
    );
    assert!(org.forge.runs("theta", &sha).unwrap().is_empty());
    let recorded_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
        - 60_000;
    orch::store::Store::open(&org.root.join("it's state"))
        .unwrap()
        .write(|tx| {
            let run_id: i64 = tx.query_row(
                "INSERT INTO local_runs (repo, number, ref, sha, event, status, created_ms)
                 VALUES ('theta', 1, 'refs/heads/feature', ?1, 'push', 'waiting', ?2) RETURNING id",
                orch::params![sha, recorded_ms],
                |r| r.get(0),
            )?;
            for (seq, name, command, needs, status) in [
                (0, "check", "test -f feature.txt", "[]", "waiting"),
                (1, "radicle-push", "true", r#"["check"]"#, "blocked"),
            ] {
                tx.execute(
                    "INSERT INTO local_jobs (run_id, seq, name, command, needs, timeout_ms, status)
                     VALUES (?1, ?2, ?3, ?4, ?5, 600000, ?6)",
                    orch::params![run_id, seq, name, command, needs, status],
                )?;
            }
            Ok(())
        })
        .unwrap();

    let run = org.wait("theta", &sha);
    assert_eq!(run.status, Some(JobStatus::Success), "{run:#?}");
    assert_eq!(status_of(&run, "check"), JobStatus::Success);
    assert_eq!(status_of(&run, "radicle-push"), JobStatus::Success);
    assert_eq!(
        org.forge.runs("theta", &sha).unwrap().len(),
        1,
        "no second run"
    );
}

#[test]
fn ensure_remote_is_idempotent_and_seeds_the_base_branch() {
    let org = ForgeOrg::new(&[("eta", job("radicle-push", "true", &[], None))], 4);
    let repo = org.config.repo("eta").unwrap().clone();
    let remote = org.forge.ensure_remote(&repo).unwrap();
    assert_eq!(org.forge.ensure_remote(&repo).unwrap(), remote);
    assert_eq!(
        remote,
        org.forge.state_dir().join("forge").join("eta.git"),
        "remote_path"
    );
    let base = git(&org.clone_dir("eta"), &["rev-parse", "HEAD"]);
    assert_eq!(
        org.forge.branch_head_sync("eta", "main").unwrap(),
        Some(base.clone())
    );
    assert!(org.forge.runs("eta", &base).unwrap().is_empty());
    let hook = std::fs::read_to_string(remote.join("hooks/post-receive")).unwrap();
    assert!(hook.contains("__local-forge post-receive"), "{hook}");
    assert!(
        hook.contains("'\\''"),
        "the state dir's quote is escaped: {hook}"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(remote.join("hooks/post-receive"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o111, 0o111);
    // A branch deletion starts nothing.
    let sha = org.push_change("eta", "x");
    assert_eq!(org.wait("eta", &sha).status, Some(JobStatus::Success));
    git(
        &org.clone_dir("eta"),
        &[
            "push",
            "-q",
            remote.to_str().unwrap(),
            ":refs/heads/feature",
        ],
    );
    assert_eq!(org.forge.runs("eta", &sha).unwrap().len(), 1);
    assert_eq!(org.forge.branch_head_sync("eta", "feature").unwrap(), None);
}

/// A push from inside another PID namespace — an agent's sandbox, as Codex's workspace-write
/// makes one — runs the hook there: a runner started by it would die with the sandbox and the
/// pid it records would name some unrelated process outside (found with the real Codex: a run
/// stuck `waiting` for ever behind `cpuhp/1`). The hook records the run and leaves the runner
/// to orch, which starts it from outside at once; the worker reaches DONE.
#[test]
fn a_push_from_a_sandbox_gets_its_runner_from_orch() {
    let probe = std::process::Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "true"])
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        eprintln!("SKIPPED: this machine does not let the tests make a PID namespace (unshare)");
        return;
    }
    let org = crate::support::Org::new(
        crate::support::Spec::local("sandboxed_push.sh")
            .repo(crate::support::RepoSpec::new("alpha").standard_ci("test -f feature.txt"))
            // The worker's own push is the one run this test counts (no landing's base run).
            .land("{policy: none}"),
    );
    let (out, id) = org.spawn_foreground("alpha", "push from a sandbox");
    assert!(
        out.status.success(),
        "{}\n{}",
        output_text(&out),
        org.diag(&id)
    );
    let w = org.worker(&id);
    assert_eq!(w.progress.milestone, Milestone::Done, "{}", org.diag(&id));
    let log = org.worker_log(&id);
    assert!(
        log.contains("orch starts the runner from outside it"),
        "the hook left the runner to orch:\n{log}"
    );
    // One run, executed to success by a runner orch started (it claimed the run with its own
    // pid and start time, seen from here); the note says why the hook left it.
    let mut store = orch::store::Store::open(&org.state).unwrap();
    type Row = (Option<i64>, Option<i64>, Option<String>, String);
    let rows: Vec<Row> = store
        .read(|tx| {
            tx.query_map(
                "SELECT runner_pid, runner_start, note, status FROM local_runs",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
        })
        .unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    let (pid, start, note, status) = &rows[0];
    assert!(pid.is_some() && start.is_some(), "{rows:?}");
    assert!(
        note.as_deref()
            .is_some_and(|n| n.contains("another PID namespace")),
        "{rows:?}"
    );
    assert_eq!(status, "success", "{rows:?}");
}
