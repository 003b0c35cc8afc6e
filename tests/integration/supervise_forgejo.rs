//! Workers end to end with `forge.kind: forgejo`, against the fake Forgejo
//! (`tests/support/fake_forgejo.rs`, Forgejo 16: runs + jobs). Each repository's clone has a local
//! bare `origin` that the worker pushes to; a small "CI" thread watches that bare repository
//! like a forge receiving pushes and publishes a run for every pushed commit on the fake.
//! The token (a distinctive value) must reach the forge and nothing else: not the state
//! directory, not the worker's log, prompt or environment.

use crate::support::fake_forgejo::{FakeForgejo, OWNER, REPO, TOKEN};
use crate::support::{
    DEADLINE, ForgeSpec, Org, RepoSpec, Spec, assert_clean, files_under, git, poll_until,
};
use orch::milestone::Milestone;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

const V16: &str = "16.0.0+gitea-1.22.0";
const TOKEN_ENV: &str = "E2E_FORGEJO_TOKEN";

/// Decides whether the `test` job passes for a commit of the bare repository.
type Judge = fn(&Path, &str) -> bool;

/// A forge-side CI for the fake (whose branches it makes the bare `origin`'s): every
/// new commit at the head of an `orch/*` branch gets a push run (`test` running, `radicle-push` waiting, needing `test`); on
/// the watcher's next round the jobs finish: `test` as `judge` says, `radicle-push` success
/// after a green `test`, skipped otherwise.
struct FakeCi {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakeCi {
    fn start(fake: FakeForgejo, origin: PathBuf, judge: Judge) -> FakeCi {
        FakeCi::start_on(fake, origin, judge, &["refs/heads/orch/"])
    }

    /// [`start`](FakeCi::start), for new heads under each of `refs` (e.g. the base branch too:
    /// a merged pull request's commit gets its push run like any push).
    fn start_on(fake: FakeForgejo, origin: PathBuf, judge: Judge, refs: &[&str]) -> FakeCi {
        let refs: Vec<String> = refs.iter().map(|r| r.to_string()).collect();
        // The forge's branches are what was pushed to its repository.
        fake.serve_git(REPO, &origin);
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut seen = BTreeSet::new();
            let mut started: Vec<(i64, String)> = Vec::new();
            while !flag.load(Ordering::SeqCst) {
                for (run, sha) in started.drain(..) {
                    let green = judge(&origin, &sha);
                    fake.set_job(run, "test", if green { "success" } else { "failure" });
                    if !green {
                        fake.set_log(run, "test", "the file named fixed is missing\n");
                    }
                    fake.set_job(
                        run,
                        "radicle-push",
                        if green { "success" } else { "skipped" },
                    );
                }
                let mut args = vec!["for-each-ref", "--format=%(objectname) %(refname:lstrip=2)"];
                args.extend(refs.iter().map(String::as_str));
                let heads = git(&origin, &args);
                for sha in heads.lines().filter_map(|l| l.split(' ').next()) {
                    if seen.insert(sha.to_string()) {
                        let run = fake.add_run(
                            REPO,
                            sha,
                            "push",
                            &[("test", "running"), ("radicle-push", "waiting")],
                        );
                        fake.set_needs(run, "radicle-push", &["test"]);
                        started.push((run, sha.to_string()));
                    }
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        FakeCi {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for FakeCi {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The fake (on its own runtime, so the test thread may block) and an organisation with the
/// one repository [`REPO`] pointing at it.
fn setup(worker: &str) -> (tokio::runtime::Runtime, FakeForgejo, Org) {
    setup_with(worker, |spec| spec)
}

/// [`setup`], with the organisation's spec changed by `edit` first.
fn setup_with(
    worker: &str,
    edit: impl FnOnce(Spec) -> Spec,
) -> (tokio::runtime::Runtime, FakeForgejo, Org) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let fake = rt.block_on(FakeForgejo::start(V16));
    fake.require_token(Some(TOKEN));
    let mut spec = edit(Spec::local(worker).repo(RepoSpec::new(REPO)));
    spec.forge = ForgeSpec::Forgejo {
        url: fake.uri(),
        owner: OWNER.into(),
        token_env: TOKEN_ENV.into(),
        token: TOKEN.into(),
    };
    let org = Org::new(spec);
    (rt, fake, org)
}

/// Every file under `dir` whose bytes contain `needle`.
fn files_containing(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    files_under(dir)
        .into_iter()
        .filter(|p| std::fs::read(p).is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle)))
        .collect()
}

/// The token went to the forge and nowhere else orch writes or passes things.
fn assert_token_kept_secret(org: &Org, fake: &FakeForgejo, id: &str, out: &std::process::Output) {
    let hits = fake.hits();
    assert!(!hits.is_empty(), "the supervisor never asked the forge");
    assert!(
        hits.iter()
            .all(|h| h.authorization.as_deref() == Some(&format!("token {TOKEN}"))),
        "every request carries the token: {:?}",
        hits.iter().map(|h| &h.authorization).collect::<Vec<_>>()
    );
    let leaks = files_containing(&org.state, TOKEN.as_bytes());
    assert!(leaks.is_empty(), "token found in {leaks:?}");
    let session = org.state.join(id);
    for f in ["worker.log", "prompt.md", "ci-guide.md", "handoff.md"] {
        let text = std::fs::read_to_string(session.join(f)).unwrap();
        assert!(!text.contains(TOKEN), "token in {f}");
    }
    assert!(!String::from_utf8_lossy(&out.stdout).contains(TOKEN));
    assert!(!String::from_utf8_lossy(&out.stderr).contains(TOKEN));

    // The worker's environment: cleared, then only ORCH_*, the passthrough list and what a
    // shell and tests/workers/lib.sh set themselves.
    let env = std::fs::read_to_string(org.out.join(format!("env-{id}.txt"))).unwrap();
    assert!(!env.contains(TOKEN), "token in the worker's environment");
    assert!(
        !env.contains(TOKEN_ENV),
        "{TOKEN_ENV} in the worker's environment"
    );
    let names: Vec<&str> = env
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, _)| k)
        .collect();
    assert!(
        names.contains(&"ORCH_WORKER_ID") && names.contains(&"ORCH_BIN"),
        "{env}"
    );
    let allowed = |k: &str| {
        k.starts_with("ORCH_")
            || k.starts_with("GIT_AUTHOR_")
            || k.starts_with("GIT_COMMITTER_")
            || matches!(
                k,
                "HOME"
                    | "PATH"
                    | "E2E_OUT"
                    | "PWD"
                    | "OLDPWD"
                    | "SHLVL"
                    | "_"
                    | "GIT_CONFIG_NOSYSTEM"
            )
    };
    let extra: Vec<&&str> = names.iter().filter(|k| !allowed(k)).collect();
    assert!(
        extra.is_empty(),
        "unexpected variables in the worker's environment: {extra:?}"
    );
    assert_eq!(
        env.lines().find(|l| l.starts_with("ORCH_PUSH_REMOTE=")),
        Some("ORCH_PUSH_REMOTE=origin")
    );
}

#[test]
fn forgejo_happy_path_is_done_on_green_and_the_token_stays_secret() {
    let (_rt, fake, org) = setup("happy.sh");
    let _ci = FakeCi::start(fake.clone(), org.origin_path(REPO), |_, _| true);
    let (out, id) = org.spawn_foreground(REPO, "add a feature");
    let pg = org.worker(&id).worker_pid.map(|p| p as i32);
    assert!(
        out.status.success(),
        "exit {:?}\n{}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr),
        org.diag(&id)
    );
    let w = org.worker(&id);
    assert_eq!(w.progress.milestone, Milestone::Done);
    assert_eq!(w.remote, "origin");
    let sha = w.progress.tracked_sha.clone().unwrap().into_string();
    // The worker pushed to the clone's origin, and the DONE is for that commit.
    let pushed = git(
        &org.origin_path(REPO),
        &["rev-parse", &format!("refs/heads/{}", w.branch)],
    );
    assert_eq!(pushed, sha);
    assert_eq!(
        org.transitions(&id),
        vec![
            ("WORKING".to_string(), "PUSHED_TO_CI".to_string()),
            ("PUSHED_TO_CI".to_string(), "DONE".to_string())
        ]
    );
    assert!(org.violations(&id).is_empty(), "{:?}", org.violations(&id));
    assert!(org.locks_of(&id).is_empty());
    // orch asked the fake about this commit, by SHA.
    assert!(
        fake.hit_paths()
            .iter()
            .any(|p| p.contains("/actions/runs?") && p.contains(&sha)),
        "{:?}",
        fake.hit_paths()
    );
    let cp = org.checkpoint(&id);
    assert_eq!(cp.current_milestone, "DONE");
    assert_eq!(cp.ci_runs[0].verdict.as_deref(), Some("green"));
    assert_token_kept_secret(&org, &fake, &id, &out);
    assert_clean(pg);
}

#[test]
fn forgejo_red_then_fixed_is_done_after_one_fix_attempt() {
    let (_rt, fake, org) = setup("red_then_fixed.sh");
    let has_fixed: Judge = |origin, sha| {
        std::process::Command::new("git")
            .arg("-C")
            .arg(origin)
            .args(["cat-file", "-e", &format!("{sha}:fixed")])
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let _ci = FakeCi::start(fake.clone(), org.origin_path(REPO), has_fixed);
    let (out, id) = org.spawn_foreground(REPO, "make the tests pass");
    let pg = org.worker(&id).worker_pid.map(|p| p as i32);
    assert!(out.status.success(), "{}", org.diag(&id));
    let w = org.worker(&id);
    assert_eq!(w.progress.milestone, Milestone::Done);
    assert_eq!(w.progress.fix_attempts, 1);
    let t: Vec<String> = org
        .transitions(&id)
        .into_iter()
        .map(|(a, b)| format!("{a}->{b}"))
        .collect();
    assert_eq!(
        t,
        [
            "WORKING->PUSHED_TO_CI",
            "PUSHED_TO_CI->FIXING_CI",
            "FIXING_CI->PUSHED_TO_CI",
            "PUSHED_TO_CI->DONE"
        ]
    );
    let pushes = org.red_then_green_pushes(&id);
    assert_eq!(w.progress.tracked_sha.as_deref(), pushes[1]["sha"].as_str());
    assert!(org.locks_of(&id).is_empty());
    assert_token_kept_secret(&org, &fake, &id, &out);
    assert_clean(pg);
}

/// Whether `text` holds the token or any 8-character piece of it.
fn holds_token_piece(text: &str) -> Option<String> {
    let t = TOKEN.as_bytes();
    (0..=t.len().saturating_sub(8))
        .map(|i| String::from_utf8_lossy(&t[i..i + 8]).into_owned())
        .find(|piece| text.contains(piece.as_str()))
}

/// A worker reads the environment and command line of every ancestor (`read_ancestors.sh`):
/// the supervisor started detached (the token reached it through a pipe) and the one a user's
/// `orch spawn --foreground` runs in (its environment had the token, wiped at start).
#[test]
fn the_token_is_in_no_environment_a_worker_can_read() {
    for foreground in [false, true] {
        let (_rt, fake, org) = setup("read_ancestors.sh");
        let _ci = FakeCi::start(fake.clone(), org.origin_path(REPO), |_, _| true);
        let id = if foreground {
            org.spawn_foreground(REPO, "look around").1
        } else {
            let id = org.spawn_detached(REPO, "look around");
            org.wait_done(&id);
            id
        };
        assert_eq!(
            org.worker(&id).progress.milestone,
            Milestone::Done,
            "{}",
            org.diag(&id)
        );
        let dump = std::fs::read_to_string(org.out.join(format!("ancestors-{id}.txt"))).unwrap();
        assert!(dump.contains("== done"), "{dump}");
        let supervisor = if foreground { " spawn " } else { "__supervise" };
        assert!(
            dump.contains(supervisor),
            "the supervisor is among the ancestors read: {dump}"
        );
        assert_eq!(
            holds_token_piece(&dump),
            None,
            "foreground={foreground}: the token is readable by the worker:\n{dump}"
        );
        assert!(!dump.contains(TOKEN_ENV), "{dump}");
    }
}

/// A worker writes commands into the clone's configuration (hooks, fsmonitor, upload-pack,
/// filter, diff and merge drivers, and an included file's editor, ssh and gpg programs);
/// orch's own git runs — the next spawn's fetch, the supervisor's, a resume's, the operator's
/// `orch gc` removing the finished worktrees — run none of them, and so none sees orch's
/// environment.
#[test]
fn git_runs_nothing_a_worker_configured() {
    let (_rt, fake, org) = setup("poison_config.sh");
    let _ci = FakeCi::start(fake.clone(), org.origin_path(REPO), |_, _| true);
    for task in ["poison the clone", "spawn after the poisoning"] {
        let (out, id) = org.spawn_foreground(REPO, task);
        assert!(out.status.success(), "{}", org.diag(&id));
        assert_eq!(org.worker(&id).progress.milestone, Milestone::Done);
    }
    org.resume();
    let gc = org.run(&["gc"]);
    assert!(gc.status.success(), "{}", crate::support::output_text(&gc));
    // The spies are in place (the worker's own git ran them, as the worker)…
    let cfg = git(
        &org.clone_path(REPO),
        &["config", "--get", "core.hooksPath"],
    );
    assert!(cfg.ends_with("/hooks"), "{cfg}");
    // …and nothing but the worker ran them.
    let ran: Vec<String> = std::fs::read_dir(&org.out)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("ran-by-orch"))
        .collect();
    let seen: Vec<String> = ran
        .iter()
        .map(|n| std::fs::read_to_string(org.out.join(n)).unwrap_or_default())
        .collect();
    assert!(
        ran.is_empty(),
        "orch ran the worker's commands: {ran:?}\n{}",
        seen.join("\n---\n")
    );
}

/// An alert on a Forgejo organisation goes to a command sink that records its environment and
/// its input: the forge token is in neither, nor in any file under the state directory.
#[test]
fn alerts_carry_no_token_to_their_sinks() {
    let out = tempfile::tempdir().unwrap();
    let sink = format!(
        "  sinks:\n    - command: [sh, -c, {}]\n",
        serde_json::to_string(&format!(
            "env > '{0}/sink-env'; cat >> '{0}/sink-input'",
            out.path().display()
        ))
        .unwrap()
    );
    let (_rt, fake, org) = setup_with("exit3.sh", |spec| spec.alerts(&sink));
    let _ci = FakeCi::start(fake.clone(), org.origin_path(REPO), |_, _| true);
    let (_, id) = org.spawn_foreground(REPO, "give up at once");
    let input = poll_until(
        "the alert at the command sink",
        DEADLINE,
        || {
            std::fs::read_to_string(out.path().join("sink-input"))
                .ok()
                .filter(|s| s.contains(&id))
        },
        || org.diag(&id),
    );
    let env = std::fs::read_to_string(out.path().join("sink-env")).unwrap();
    assert_eq!(holds_token_piece(&input), None, "{input}");
    assert_eq!(holds_token_piece(&env), None, "{env}");
    assert!(!env.contains(TOKEN_ENV), "{env}");
    let leaks = files_containing(&org.state, TOKEN.as_bytes());
    assert!(leaks.is_empty(), "token found in {leaks:?}");
}

/// `land.policy: pull_request`: after DONE orch opens a pull request from the worker's branch
/// and merges it through the API pinned to the verified head; the lock goes once the base
/// branch's CI for the merge commit is green.
#[test]
fn pull_request_landing_merges_the_verified_head_and_waits_for_the_base_ci() {
    let (_rt, fake, org) = setup_with("happy.sh", |spec| spec.land("{policy: pull_request}"));
    let origin = org.origin_path(REPO);
    let _ci = FakeCi::start_on(
        fake.clone(),
        origin.clone(),
        |_, _| true,
        &["refs/heads/orch/", "refs/heads/main"],
    );
    let (out, id) = org.spawn_foreground(REPO, "add a feature");
    assert!(out.status.success(), "{}", org.diag(&id));
    let w = org.worker(&id);
    let done = w.progress.tracked_sha.clone().unwrap().into_string();
    let l = w.progress.landing.clone().unwrap();
    assert_eq!(l.state, orch::milestone::LandState::Landed, "{l:?}");
    let merges = fake.pull_merges(REPO);
    assert_eq!(merges.len(), 1, "{merges:?}");
    let m = &merges[0];
    assert_eq!(Some(m.number), l.pull);
    assert_eq!(
        (m.head.as_str(), m.base.as_str()),
        (w.branch.as_str(), "main")
    );
    assert_eq!(m.head_sha, done, "the verified head was merged");
    assert_eq!(m.style, "merge");
    assert_eq!(
        l.landed.as_ref().map(|s| s.as_str()),
        Some(m.base_after.as_str())
    );
    assert_eq!(
        git(&origin, &["rev-parse", "refs/heads/main"]),
        m.base_after
    );
    // The merge was pinned to the verified head commit.
    let merge_hit = fake
        .hits()
        .into_iter()
        .find(|h| h.method == "POST" && h.path.ends_with("/merge"))
        .expect("a merge request");
    let body: serde_json::Value = serde_json::from_str(&merge_hit.body).unwrap();
    assert_eq!(body["head_commit_id"], done.as_str(), "{body}");
    assert_eq!(body["Do"], "merge");
    assert!(
        org.locks_of(&id).is_empty(),
        "the lock went after the base CI"
    );
}

#[test]
fn a_pull_request_the_forge_refuses_to_merge_keeps_the_lock_with_the_servers_words() {
    let (_rt, fake, org) = setup_with("happy.sh", |spec| spec.land("{policy: pull_request}"));
    fake.protect_branch(REPO, "main", "Does not have enough approvals");
    let _ci = FakeCi::start(fake.clone(), org.origin_path(REPO), |_, _| true);
    let (_out, id) = org.spawn_foreground(REPO, "add a feature");
    let w = org.worker(&id);
    assert_eq!(w.milestone(), Milestone::Done, "{}", org.diag(&id));
    let l = w.progress.landing.clone().unwrap();
    assert_eq!(l.state, orch::milestone::LandState::Refused, "{l:?}");
    let detail = l.detail.unwrap_or_default();
    assert!(
        detail.contains("HTTP 405") && detail.contains("Does not have enough approvals"),
        "{detail}"
    );
    assert!(fake.pull_merges(REPO).is_empty(), "nothing merged");
    let alerts = org.alerts(&id);
    assert!(
        alerts.iter().any(|a| a["kind"] == "landing_refused"
            && a["message"].as_str().unwrap().contains("enough approvals")),
        "{alerts:?}"
    );
    assert_eq!(org.locks_of(&id).len(), 1, "the lock is kept for a person");
}

/// A supervisor following a pending commit costs the CI requests alone per poll (two on
/// Forgejo 16): the branch head is read when it can have moved — the push claim, the first
/// poll — not at every poll (see docs/ci-requests.md).
#[test]
fn a_pending_commit_costs_two_requests_per_poll() {
    let (_rt, fake, org) = setup("push_and_wait.sh");
    fake.serve_git(REPO, &org.origin_path(REPO));
    let id = org.spawn_detached(REPO, "push and wait");
    let sha = poll_until(
        "the push is tracked",
        DEADLINE,
        || org.worker(&id).progress.tracked_sha.clone(),
        || org.diag(&id),
    );
    fake.add_run(
        REPO,
        sha.as_str(),
        "push",
        &[("test", "running"), ("radicle-push", "waiting")],
    );
    let ci_requests = |paths: &[String]| {
        paths
            .iter()
            .filter(|p| p.contains("/actions/") && p.contains("runs"))
            .count()
    };
    poll_until(
        "ten polls of the pending commit",
        DEADLINE,
        || (ci_requests(&fake.hit_paths()) >= 20).then_some(()),
        || format!("{:#?}\n{}", fake.hit_paths(), org.diag(&id)),
    );
    let paths = fake.hit_paths();
    let branch_reads = paths.iter().filter(|p| p.contains("/branches/")).count();
    let ci = ci_requests(&paths);
    assert!(
        branch_reads <= 3,
        "{branch_reads} branch-head reads beside {ci} CI requests:\n{paths:#?}"
    );
    org.release(&id);
    let _ = org.run(&["cancel", &id, "--reason", "test over"]);
}

/// `forge.token_file`: the token is read from a file (mode 0600) and passed to supervisors
/// through a pipe, so no process's environment holds it at any moment — sampled from
/// `/proc/*/environ` all through a run — and a token file other users can read is refused.
#[test]
fn with_a_token_file_no_environment_ever_holds_the_token() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let fake = rt.block_on(FakeForgejo::start(V16));
    fake.require_token(Some(TOKEN));
    let mut spec = Spec::local("happy.sh").repo(RepoSpec::new(REPO));
    spec.forge = ForgeSpec::Forgejo {
        url: fake.uri(),
        owner: OWNER.into(),
        token_env: String::new(), // a token file
        token: TOKEN.into(),
    };
    let org = Org::new(spec);
    let _ci = FakeCi::start(fake.clone(), org.origin_path(REPO), |_, _| true);
    let stop = Arc::new(AtomicBool::new(false));
    let sampler = {
        let stop = stop.clone();
        // This organisation's processes only: other tests running beside this one start orch
        // with the same token in `forge.token_env` on purpose. A process of this run names its
        // directory in its command line or environment, or works in it.
        let root = org.root.to_string_lossy().into_owned();
        std::thread::spawn(move || {
            let holds = |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).any(|w| w == needle);
            let mut seen = Vec::new();
            let mut samples = 0;
            while !stop.load(Ordering::SeqCst) {
                for e in std::fs::read_dir("/proc").unwrap().flatten() {
                    let Ok(env) = std::fs::read(e.path().join("environ")) else {
                        continue;
                    };
                    if !holds(&env, TOKEN.as_bytes()) {
                        continue;
                    }
                    let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
                    let cwd = std::fs::read_link(e.path().join("cwd")).unwrap_or_default();
                    if holds(&env, root.as_bytes())
                        || holds(&cmdline, root.as_bytes())
                        || cwd.starts_with(&root)
                    {
                        seen.push(format!(
                            "{} ({})",
                            e.file_name().to_string_lossy(),
                            String::from_utf8_lossy(&cmdline).replace('\0', " ")
                        ));
                    }
                }
                samples += 1;
            }
            (samples, seen)
        })
    };
    let (out, id) = org.spawn_foreground(REPO, "add a feature");
    stop.store(true, Ordering::SeqCst);
    let (samples, seen) = sampler.join().unwrap();
    assert!(out.status.success(), "{}", org.diag(&id));
    assert_eq!(org.worker(&id).progress.milestone, Milestone::Done);
    assert_token_kept_secret(&org, &fake, &id, &out);
    assert!(samples > 0);
    assert!(
        seen.is_empty(),
        "the token was in the environment of processes {seen:?} ({samples} samples)"
    );

    // Readable by others: refused, naming the file and the fix.
    let file = org.root.join("forge-token");
    std::fs::set_permissions(&file, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let check = org.run(&["check"]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    assert_ne!(check.status.code(), Some(0), "{text}");
    assert!(
        text.contains("forge-token") && text.contains("chmod 600"),
        "{text}"
    );
    assert!(!text.contains(TOKEN), "{text}");
}

/// On Forgejo the workflows live in the repository: a green change that edits one is held
/// (BLOCKED, lock kept, alert) until an operator approves that commit; then it is DONE.
#[test]
fn a_workflow_edit_on_forgejo_is_held_until_approved() {
    let (_rt, fake, org) = setup("protected.sh");
    let _ci = FakeCi::start(fake.clone(), org.origin_path(REPO), |_, _| true);
    let id = org.spawn_detached(REPO, "workflow");
    let w = org.wait_milestone(&id, "BLOCKED", DEADLINE);
    let sha = w.progress.tracked_sha.clone().unwrap().into_string();
    assert_eq!(w.progress.held.as_deref(), Some(sha.as_str()));
    assert_eq!(w.progress.protected, [".forgejo/workflows/x.yml"]);
    assert!(!org.locks_of(&id).is_empty(), "the lock is kept while held");
    assert!(
        org.alerts(&id)
            .iter()
            .any(|a| a["kind"] == "protected_paths"),
        "{}",
        org.diag(&id)
    );
    org.wait_supervisor_gone(&id);
    let out = org.run(&["approve", &id, "--sha", &sha]);
    assert!(
        out.status.success(),
        "{}",
        crate::support::output_text(&out)
    );
    let text = crate::support::output_text(&out);
    assert!(
        text.contains("+# one") && text.contains("approved by"),
        "{text}"
    );
    org.wait_done(&id);
    let transitions = org.transitions(&id);
    assert_eq!(
        transitions.last(),
        Some(&("BLOCKED".to_string(), "DONE".to_string())),
        "{transitions:?}"
    );
    assert!(org.locks_of(&id).is_empty());
}

/// The forge token committed by a worker (it never gets it from orch; here the test hands it
/// over) is FATAL by orch's own detection before the commit can be DONE — found by comparing
/// in memory, and named as "the forge token": never written into orch's state.
#[test]
fn a_committed_forge_token_is_fatal_and_never_written_down() {
    // A token file: no environment holds the token (the sampling test beside this one looks
    // at every process's).
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let fake = rt.block_on(FakeForgejo::start(V16));
    fake.require_token(Some(TOKEN));
    let mut spec = Spec::local("fatal_worker.sh").repo(RepoSpec::new(REPO));
    spec.forge = ForgeSpec::Forgejo {
        url: fake.uri(),
        owner: OWNER.into(),
        token_env: String::new(),
        token: TOKEN.into(),
    };
    let org = Org::new(spec);
    let _ci = FakeCi::start(fake.clone(), org.origin_path(REPO), |_, _| true);
    std::fs::write(org.out.join("leak.txt"), format!("api_token = {TOKEN}\n")).unwrap();
    let id = org.spawn_detached(REPO, "token");
    let w = org.wait_milestone(&id, "PAUSED", DEADLINE);
    assert!(
        w.progress
            .secrets
            .iter()
            .any(|s| s == "settings.conf:1: the forge token"),
        "{:?}",
        w.progress.secrets
    );
    // Nowhere in orch's state but the worker's own worktree (where the worker wrote it).
    let worktree = PathBuf::from(&w.worktree);
    let leaks: Vec<PathBuf> = files_containing(&org.state, TOKEN.as_bytes())
        .into_iter()
        .filter(|p| !p.starts_with(&worktree))
        .collect();
    assert!(leaks.is_empty(), "token found in {leaks:?}");
    assert_ne!(w.progress.milestone, Milestone::Done);
}

/// A run nothing waits for is cancelled on Forgejo ≥ 16 too (issue 34, item 7): a worker whose
/// branch's run is still going is cancelled by the operator; as its supervisor lets go it asks
/// Forgejo to cancel that run (`POST …/actions/runs/{id}/cancel`, found by the commit it pushed
/// and its branch), and leaves the base branch's run of the same commit alone.
#[test]
fn a_run_nothing_waits_for_is_cancelled_on_forgejo() {
    let (_rt, fake, org) = setup("push_and_wait.sh");
    fake.serve_git(REPO, &org.origin_path(REPO));
    let id = org.spawn_detached(REPO, "push and wait");
    let w = org.wait_milestone(&id, "PUSHED_TO_CI", DEADLINE);
    let sha = w.progress.tracked_sha.clone().unwrap().into_string();
    // The forge's runs of that commit: its branch's, going, and one on the base branch.
    let own = fake.add_run_on(REPO, &sha, &w.branch, &[("test", "running")]);
    let base = fake.add_run_on(REPO, &sha, "main", &[("test", "running")]);
    let out = org.run(&["cancel", &id, "--reason", "changed my mind"]);
    assert!(
        out.status.success(),
        "{}",
        crate::support::output_text(&out)
    );
    org.wait_supervisor_gone(&id);
    poll_until(
        "the worker's run to be cancelled through the API",
        DEADLINE,
        || fake.cancelled_by_api().contains(&own).then_some(()),
        || {
            format!(
                "cancelled: {:?}\n{}",
                fake.cancelled_by_api(),
                org.diag(&id)
            )
        },
    );
    assert_eq!(fake.job_status(own, "test"), "cancelled");
    assert_eq!(fake.cancelled_by_api(), vec![own], "only the worker's run");
    assert_eq!(fake.job_status(base, "test"), "running");
}
