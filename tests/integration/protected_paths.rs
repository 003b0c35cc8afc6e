//! Workers do not grade themselves (`ci.protected_paths`): on the local forge the jobs run the
//! base branch's versions of the protected files, so a worker that turns `ci/test.sh` into
//! `exit 0` gets the real test's verdict; a green change that touches a protected file is held
//! (BLOCKED, lock kept, alert) until `orch approve`, whose approval is bound to one commit.

use crate::support::{DEADLINE, Org, RepoSpec, Spec, commit_file, job, output_text};
use orch::ci::verdict::VerdictKind;
use std::time::Duration;

/// `alpha` with a real test in the base (`ci/test.sh`: answer.txt must say `correct`) and the
/// `test` and `radicle-push` jobs (the job runs the script: protected by default).
fn org() -> Org {
    org_with(None)
}

/// `org` with a `land:` policy (None: orch's default).
fn org_with(land: Option<&str>) -> Org {
    let mut spec = Spec::local("protected.sh").repo(
        RepoSpec::new("alpha")
            .job(job("test", "sh ci/test.sh"))
            .job(job("radicle-push", "true").needs(&["test"])),
    );
    if let Some(l) = land {
        spec = spec.land(l);
    }
    let org = Org::new(spec);
    let clone = org.clone_path("alpha");
    std::fs::create_dir_all(clone.join("ci")).unwrap();
    commit_file(&clone, "answer.txt", "correct\n", "the answer");
    commit_file(
        &clone,
        "ci/test.sh",
        "grep -qx correct answer.txt || { echo 'answer.txt is not correct'; exit 1; }\n",
        "the test",
    );
    org
}

/// Checks an `orch approve --json` answer against docs/schema/approve.json.
fn assert_valid_approve(v: &serde_json::Value) {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/schema/approve.json");
    let schema: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let validator = jsonschema::options().build(&schema).unwrap();
    let errors: Vec<String> = validator.iter_errors(v).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:#?}\n{v}");
}

fn job_log(org: &Org, sha: &str, job: &str) -> String {
    let out = org.run(&["ci", "logs", "--repo", "alpha", "--sha", sha, "--job", job]);
    output_text(&out)
}

#[test]
fn a_worker_that_rewrites_its_test_gets_the_real_tests_red_and_never_done() {
    let org = org();
    let id = org.spawn_detached("alpha", "cheat");
    let w = org.wait_milestone(&id, "FIXING_CI", DEADLINE);
    let sha = w
        .progress
        .tracked_sha
        .clone()
        .expect("a pushed commit")
        .to_string();
    org.wait_supervisor_gone(&id);
    let pushes = org.pushes(&id);
    let push = pushes
        .iter()
        .find(|p| p.sha == sha)
        .expect("the push recorded");
    assert_eq!(push.verdict, Some(VerdictKind::Red), "{}", org.diag(&id));
    assert!(
        push.failed_jobs.iter().any(|j| j == "test"),
        "{:?}",
        push.failed_jobs
    );
    let log = job_log(&org, &sha, "test");
    assert!(
        log.contains("run as the base branch main has them")
            && log.contains("restored ci/test.sh")
            && log.contains("answer.txt is not correct"),
        "the job log says the base's test ran, and what it found:\n{log}"
    );
    let w = org.worker(&id);
    assert_ne!(w.milestone().as_str(), "DONE");
    assert!(
        !org.transitions(&id).iter().any(|(_, to)| to == "DONE"),
        "{:?}",
        org.transitions(&id)
    );
    assert_eq!(
        org.lock_of(&id).as_deref(),
        Some("alpha"),
        "the lock is kept"
    );
}

/// `land: direct`: the worker's push is the landing. A push to the base that rewrites the test
/// and breaks the code is refused by the forge before the base moves (the base's own CI would
/// otherwise run the worker's `exit 0`), the refusal names the protected paths, and the worker
/// ends BLOCKED with an alert, its lock kept, nothing landed.
#[test]
fn under_land_direct_a_push_touching_protected_paths_never_moves_the_base() {
    let org = org_with(Some("{policy: direct}"));
    // The forge's remote is seeded from the clone at the first spawn.
    let before = crate::support::git(&org.clone_path("alpha"), &["rev-parse", "refs/heads/main"]);
    let bare = org.state.join("forge").join("alpha.git");
    let head = || crate::support::git(&bare, &["rev-parse", "refs/heads/main"]);
    let id = org.spawn_detached("alpha", "direct-cheat");
    let w = org.wait_milestone(&id, "BLOCKED", DEADLINE);
    let cheat = std::fs::read_to_string(org.out.join(format!("cheat-{id}"))).unwrap();
    let cheat = cheat.trim();
    assert_eq!(head(), before, "the base never moved: {}", org.diag(&id));
    assert_ne!(head(), cheat);
    assert!(
        w.progress.tracked_sha.is_none(),
        "nothing was pushed to CI: {:?}",
        w.progress
    );
    let alert = org
        .alerts(&id)
        .into_iter()
        .find(|a| a["kind"] == "push_refused")
        .unwrap_or_else(|| panic!("a push_refused alert\n{}", org.diag(&id)));
    let text = alert["message"].as_str().unwrap();
    assert!(
        text.contains("refs/heads/main")
            && text.contains("ci/test.sh")
            && text.contains("ci.protected_paths")
            && text.contains("land: direct"),
        "{text}"
    );
    let diag = org.diag(&id);
    assert!(
        diag.contains("may not change protected paths on main: ci/test.sh"),
        "the pusher is told why (git shows the hook's refusal): {diag}"
    );
    assert!(
        !org.transitions(&id).iter().any(|(_, to)| to == "DONE"),
        "{:?}",
        org.transitions(&id)
    );
    assert_eq!(
        org.lock_of(&id).as_deref(),
        Some("alpha"),
        "the lock is kept"
    );
}

#[test]
fn a_workflow_edit_is_held_until_approved_and_an_approval_binds_one_commit() {
    let org = org();
    let id = org.spawn_detached("alpha", "twice");
    // The first push: green (the workflow is not a script the local jobs run).
    let first = org.wait_until_green(&id);
    assert_eq!(
        org.worker(&id).progress.protected,
        [".forgejo/workflows/x.yml"]
    );
    // Approved ahead of DONE, through the supervisor's inbox.
    let out = org.run(&["approve", &id, "--sha", &first[..7], "--json"]);
    assert!(out.status.success(), "{}", output_text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_valid_approve(&v);
    assert_eq!(v["how"], "by_supervisor", "{v}");
    assert_eq!(v["approved"], true, "{v}");
    assert_eq!(v["files"], serde_json::json!([".forgejo/workflows/x.yml"]));
    assert!(v["diff"].as_str().unwrap().contains("+# one"), "{v}");
    assert!(v["stat"].as_str().unwrap().contains("x.yml"), "{v}");
    assert!(v["by"].as_str().unwrap().contains("(uid "), "{v}");
    // A second push touching the workflow again: held, the first approval does not cover it.
    org.release(&id);
    let w = org.wait_milestone(&id, "BLOCKED", DEADLINE);
    let second = w.progress.tracked_sha.clone().unwrap().to_string();
    assert_ne!(second, first);
    assert_eq!(w.progress.held.as_deref(), Some(second.as_str()));
    assert!(
        w.progress
            .end_reason
            .as_deref()
            .unwrap()
            .contains("orch approve")
    );
    assert_eq!(
        org.lock_of(&id).as_deref(),
        Some("alpha"),
        "the lock is kept"
    );
    let alert = org
        .alerts(&id)
        .into_iter()
        .find(|a| a["kind"] == "protected_paths")
        .unwrap_or_else(|| panic!("a protected_paths alert\n{}", org.diag(&id)));
    let text = alert["message"].as_str().unwrap();
    assert!(
        text.contains(&id)
            && text.contains(&second[..7])
            && text.contains(".forgejo/workflows/x.yml"),
        "{text}"
    );
    assert_eq!(alert["severity"], "warning");
    // status and sessions show say so.
    let status = output_text(&org.run(&["status"]));
    assert!(
        status.contains(&format!("{id} is held at {}", &second[..7])),
        "{status}"
    );
    let show = output_text(&org.run(&["sessions", "show", &id]));
    assert!(
        show.contains("touches protected paths") && show.contains("held at"),
        "{show}"
    );
    // The first commit's approval is refused for the second.
    org.wait_supervisor_gone(&id);
    let stale = org.run(&["approve", &id, "--sha", &first]);
    assert_eq!(stale.status.code(), Some(1), "{}", output_text(&stale));
    assert!(output_text(&stale).contains("bound to the commit shown"));
    // A dry run shows the diff and approves nothing.
    let dry = org.run(&["approve", &id, "--dry-run"]);
    assert!(dry.status.success(), "{}", output_text(&dry));
    assert!(
        output_text(&dry).contains("+# two"),
        "{}",
        output_text(&dry)
    );
    assert_eq!(org.worker(&id).milestone().as_str(), "BLOCKED");
    // Approved offline (its supervisor is gone): DONE, then the change lands.
    let ok = org.run(&["approve", &id, "--json"]);
    assert!(ok.status.success(), "{}", output_text(&ok));
    let v: serde_json::Value = serde_json::from_slice(&ok.stdout).unwrap();
    assert_valid_approve(&v);
    assert_eq!(v["how"], "offline", "{v}");
    org.wait_done(&id);
    let w = org.wait_milestone(&id, "DONE", Duration::from_secs(90));
    assert_eq!(w.progress.approved.as_deref(), Some(second.as_str()));
    assert_eq!(org.count_events(&id, "approval"), 2, "{}", org.diag(&id));
    assert!(org.lock_of(&id).is_none(), "the landing released the lock");
}

impl Org {
    /// Waits until worker `id`'s tracked push is green; returns its SHA.
    fn wait_until_green(&self, id: &str) -> String {
        let mut sha = String::new();
        self.wait_until("a green push", DEADLINE, || {
            let w = self.worker(id);
            match (&w.progress.tracked_sha, w.progress.verdict) {
                (Some(s), Some(VerdictKind::Green)) => {
                    sha = s.to_string();
                    true
                }
                _ => false,
            }
        });
        sha
    }
}

#[test]
fn bad_protected_paths_are_refused_by_check_with_their_place() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("repos.yaml"),
        "ci:\n  protected_paths: [ci/, /abs]\nrepos:\n  a:\n    ci:\n      protected_paths: ['x/**']\n      jobs: [{ name: radicle-push, run: 'true' }]\n",
    )
    .unwrap();
    std::fs::create_dir_all(dir.path().join("contracts")).unwrap();
    std::fs::write(
        dir.path().join("contracts/worker-completion.yaml"),
        crate::support::CONTRACT_TEXT,
    )
    .unwrap();
    let out = crate::support::orch_cmd()
        .current_dir(dir.path())
        .arg("check")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("repos.yaml:2:26: ci.protected_paths: \"/abs\" is not a path pattern: paths are relative"),
        "{err}"
    );
    assert!(
        err.contains("repos.yaml:6:25: repos.a.ci.protected_paths: \"x/**\" is not a path pattern: `**` is not supported"),
        "{err}"
    );
}
