//! Workers end to end on the local forge: real git repositories in temp directories, the real
//! `orch` binary (spawn, supervisor, post-receive hook, CI runner), scripted workers from
//! `tests/workers/`. After every test no process of the worker's group is left, not even a
//! zombie, and no zombie child of the test process remains (`support::assert_clean`).

use crate::support::{
    DEADLINE, Org, RepoSpec, Spec, assert_clean, git, group_members, job, live_members, memory_kib,
    poll_until,
};
use orch::milestone::Milestone;
use std::time::{Duration, Instant};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The worker's process group (orch starts the worker as a group leader).
fn pgid(org: &Org, id: &str) -> i32 {
    org.worker(id).worker_pid.expect("the worker was started") as i32
}

fn wait_file(org: &Org, id: &str, name: &str) -> String {
    let path = org.out.join(name);
    poll_until(
        &format!("{}", path.display()),
        DEADLINE,
        || {
            std::fs::read_to_string(&path)
                .ok()
                .filter(|s| s.ends_with('\n'))
        },
        || org.diag(id),
    )
}

fn wait_file_exists(org: &Org, id: &str, name: &str) {
    let path = org.out.join(name);
    poll_until(
        &format!("{}", path.display()),
        DEADLINE,
        || path.exists().then_some(()),
        || org.diag(id),
    );
}

fn alert_kinds(org: &Org, id: &str) -> Vec<String> {
    org.alerts(id)
        .iter()
        .map(|a| a["kind"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn pair(from: &str, to: &str) -> (String, String) {
    (from.to_string(), to.to_string())
}

#[test]
fn happy_path_is_done_only_with_green_ci_and_releases_the_lock() {
    let mut spec =
        Spec::local("happy.sh").repo(RepoSpec::new("alpha").standard_ci("test -f feature.txt"));
    // orch may see green before the worker does; the worker then gets `stop_grace` to say
    // DONE itself, which the log is checked for below (1s is short on a loaded machine).
    spec.stop_grace = "20s".into();
    let org = Org::new(spec);
    let (out, id) = org.spawn_foreground("alpha", "add a feature");
    let pg = pgid(&org, &id);
    assert!(
        out.status.success(),
        "spawn --foreground exit {:?}\n{}\n{}",
        out.status.code(),
        text(&out.stderr),
        org.diag(&id)
    );
    let w = org.worker(&id);
    assert_eq!(w.progress.milestone, Milestone::Done, "{}", org.diag(&id));
    assert_eq!(w.progress.end_reason.as_deref(), Some("done"));
    assert_eq!(w.progress.fix_attempts, 0);
    let sha = w
        .progress
        .tracked_sha
        .clone()
        .expect("a tracked commit")
        .into_string();
    // The tracked commit is the worker's own commit on its branch, pushed to the forge.
    let head = git(std::path::Path::new(&w.worktree), &["rev-parse", "HEAD"]);
    assert_eq!(sha, head);
    assert_ne!(sha, w.base_sha);
    let on_forge = git(
        &org.state.join("forge/alpha.git"),
        &["rev-parse", &format!("refs/heads/{}", w.branch)],
    );
    assert_eq!(on_forge, sha);

    // Lock: taken at spawn, released by the verified DONE, and nothing else holds it.
    assert!(org.locks_of(&id).is_empty());
    assert!(org.store().locks().unwrap().is_empty());
    let history: Vec<String> = org
        .store()
        .lock_history()
        .unwrap()
        .into_iter()
        .filter(|h| h.holder == id)
        .map(|h| h.action)
        .collect();
    assert_eq!(history.len(), 2, "{history:?}");
    assert_ne!(history[0], history[1]);

    assert_eq!(
        org.transitions(&id),
        vec![
            pair("WORKING", "PUSHED_TO_CI"),
            pair("PUSHED_TO_CI", "DONE")
        ]
    );
    assert!(org.violations(&id).is_empty(), "{:?}", org.violations(&id));

    let cp = org.checkpoint(&id);
    assert_eq!(cp.current_milestone, "DONE");
    assert_eq!(cp.worker_id, id);
    assert_eq!(cp.repo_name, "alpha");
    assert!(cp.commits.contains(&sha), "{:?}", cp.commits);
    assert_eq!(cp.tracked_sha.as_deref(), Some(sha.as_str()));
    assert!(!cp.lock_held);
    assert_eq!(cp.files_modified, vec!["feature.txt".to_string()]);
    assert_eq!(cp.ci_runs.len(), 1);
    assert_eq!(cp.ci_runs[0].sha, sha);
    assert_eq!(cp.ci_runs[0].verdict.as_deref(), Some("green"));

    let show = org.show(&id);
    assert_eq!(show["milestone"], "DONE");
    assert_eq!(show["pushes"][0]["sha"], sha.as_str());
    assert_eq!(show["pushes"][0]["verdict"], "green");
    let status = org.json(&["status", "--json"]);
    assert_eq!(status["locks"].as_array().unwrap().len(), 0);
    assert_eq!(status["workers"][0]["milestone"], "DONE");

    let log = org.worker_log(&id);
    assert!(log.contains("PUSHED_TO_CI: alpha commit"), "{log}");
    assert!(log.contains("DONE: alpha all green"), "{log}");
    assert_clean(Some(pg));
}

#[test]
fn red_ci_then_fix_is_done_after_one_fix_attempt() {
    let org = Org::new(
        Spec::local("red_then_fixed.sh").repo(RepoSpec::new("alpha").standard_ci("test -f fixed")),
    );
    let (out, id) = org.spawn_foreground("alpha", "make the tests pass");
    let pg = pgid(&org, &id);
    assert!(out.status.success(), "{}", org.diag(&id));
    let w = org.worker(&id);
    assert_eq!(w.progress.milestone, Milestone::Done);
    assert_eq!(w.progress.fix_attempts, 1, "{}", org.diag(&id));
    assert_eq!(
        org.transitions(&id),
        vec![
            pair("WORKING", "PUSHED_TO_CI"),
            pair("PUSHED_TO_CI", "FIXING_CI"),
            pair("FIXING_CI", "PUSHED_TO_CI"),
            pair("PUSHED_TO_CI", "DONE"),
        ],
        "{}",
        org.diag(&id)
    );
    let pushes = org.red_then_green_pushes(&id);
    assert_eq!(
        w.progress.tracked_sha.as_deref(),
        pushes[1]["sha"].as_str(),
        "DONE is for the last pushed commit"
    );
    assert!(org.locks_of(&id).is_empty());
    let cp = org.checkpoint(&id);
    assert_eq!(cp.current_milestone, "DONE");
    assert_eq!(cp.fix_attempts, 1);
    assert_clean(Some(pg));
}

#[test]
fn skipped_sync_job_is_not_done_until_a_new_push_succeeds() {
    // radicle-push needs `gate`, which passes only on the "trigger radicle sync" commit: on
    // the first push the required job succeeds and radicle-push is skipped.
    let mut spec = Spec::local("sync_skipped.sh").repo(
        RepoSpec::new("alpha")
            .job(job("test", "true"))
            .job(job(
                "gate",
                "git log -1 --format=%s | grep -q 'trigger radicle sync'",
            ))
            .job(job("radicle-push", "true").needs(&["gate"])),
    );
    spec.required_jobs = Some(vec!["test".into()]);
    let org = Org::new(spec);
    let (out, id) = org.spawn_foreground("alpha", "ship the feature");
    let pg = pgid(&org, &id);
    assert!(out.status.success(), "{}", org.diag(&id));

    let show = org.show(&id);
    let pushes = show["pushes"].as_array().unwrap();
    assert_eq!(pushes.len(), 2, "{show:#}");
    let (first, second) = (
        pushes[0]["sha"].as_str().unwrap(),
        pushes[1]["sha"].as_str().unwrap(),
    );
    assert_eq!(pushes[0]["verdict"], "sync_not_done", "{show:#}");
    let sync_status: Vec<&str> = pushes[0]["runs"][0]["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["name"] == "radicle-push")
        .map(|j| j["status"].as_str().unwrap())
        .collect();
    assert_eq!(sync_status, vec!["skipped"], "{show:#}");
    assert_eq!(pushes[1]["verdict"], "green");

    // Not DONE on the first SHA: the early claim was refused, and DONE names the second.
    let early = std::fs::read_to_string(org.out.join("early-done.txt")).unwrap();
    assert!(early.contains("refused (done_without_ci_proof)"), "{early}");
    let v = org.violations(&id);
    assert_eq!(v.len(), 1, "{v:?}");
    assert!(
        v[0].starts_with("done_without_ci_proof") && v[0].contains("sync_not_done"),
        "{v:?}"
    );
    assert_eq!(
        org.transitions(&id),
        vec![
            pair("WORKING", "PUSHED_TO_CI"),
            pair("PUSHED_TO_CI", "DONE")
        ]
    );
    let done = org
        .events(&id)
        .into_iter()
        .find(|e| e.kind == "transition" && e.milestone == "DONE")
        .unwrap();
    assert!(done.detail.contains(&second[..10]), "{}", done.detail);
    assert!(!done.detail.contains(&first[..10]));
    assert!(alert_kinds(&org, &id).contains(&"sync_not_done".to_string()));
    let w = org.worker(&id);
    assert_eq!(w.progress.milestone, Milestone::Done);
    assert_eq!(w.progress.tracked_sha.as_deref(), Some(second));
    assert_eq!(w.progress.fix_attempts, 0);
    assert_clean(Some(pg));
}

#[test]
fn done_claimed_while_ci_is_red_is_refused_and_recorded() {
    let org = Org::new(
        Spec::local("done_while_red.sh").repo(RepoSpec::new("alpha").standard_ci("test -f fixed")),
    );
    let id = org.spawn_detached("alpha", "claim too early");
    let pg = pgid(&org, &id);
    let rc = wait_file(&org, &id, "report.rc");
    let answer = std::fs::read_to_string(org.out.join("report.txt")).unwrap();
    assert_eq!(rc.trim(), "1", "orch report DONE must exit 1: {answer}");
    assert!(
        answer.contains("refused (done_without_ci_proof)") && answer.contains("red"),
        "{answer}"
    );
    // The worker's next line (BLOCKED) is read after the echoed answer: once it is applied,
    // every earlier line was.
    org.wait_milestone(&id, "BLOCKED", DEADLINE);
    let v = org.violations(&id);
    assert_eq!(v.len(), 1, "one claim, one violation: {v:?}");
    assert!(v[0].starts_with("done_without_ci_proof"), "{v:?}");
    assert!(v[0].contains("is red"), "{v:?}");
    // The red verdict sent the worker to FIXING_CI; the refused claim changed nothing.
    assert_eq!(
        org.transitions(&id),
        vec![
            pair("WORKING", "PUSHED_TO_CI"),
            pair("PUSHED_TO_CI", "FIXING_CI"),
            pair("FIXING_CI", "BLOCKED"),
        ],
        "{}",
        org.diag(&id)
    );
    let refused = org
        .events(&id)
        .into_iter()
        .find(|e| e.kind == "violation")
        .unwrap();
    assert_eq!(refused.milestone, "FIXING_CI");
    assert_eq!(org.locks_of(&id), vec!["alpha".to_string()]);
    let alerts = alert_kinds(&org, &id);
    assert_eq!(
        alerts
            .iter()
            .filter(|k| *k == "done_without_ci_proof")
            .count(),
        1,
        "{alerts:?}"
    );

    org.release(&id);
    org.wait_supervisor_gone(&id);
    let w = org.worker(&id);
    assert_eq!(w.progress.milestone, Milestone::Blocked);
    assert_eq!(org.locks_of(&id), vec!["alpha".to_string()], "lock kept");
    assert_clean(Some(pg));
}

#[test]
fn pushed_to_ci_for_a_commit_that_was_never_pushed_is_refused() {
    let org =
        Org::new(Spec::local("unpushed_sha.sh").repo(RepoSpec::new("alpha").standard_ci("true")));
    let id = org.spawn_detached("alpha", "pretend to push");
    let pg = pgid(&org, &id);
    let rc = wait_file(&org, &id, "report.rc");
    let answer = std::fs::read_to_string(org.out.join("report.txt")).unwrap();
    assert_eq!(rc.trim(), "1", "{answer}");
    assert!(answer.contains("refused (push_not_verified)"), "{answer}");
    // Both claims (the output line and `orch report`) are refused and recorded.
    let v = poll_until(
        "two push_not_verified violations",
        DEADLINE,
        || {
            let v = org.violations(&id);
            (v.len() >= 2).then_some(v)
        },
        || org.diag(&id),
    );
    assert_eq!(v.len(), 2, "{v:?}");
    assert!(
        v.iter().all(|d| d.starts_with("push_not_verified")),
        "{v:?}"
    );
    let local = git(
        std::path::Path::new(&org.worker(&id).worktree),
        &["rev-parse", "HEAD"],
    );
    assert!(
        v.iter()
            .any(|d| d.contains(&local) && d.contains("is not on the forge")),
        "{v:?}"
    );
    assert!(
        v.iter()
            .any(|d| d.contains("0123456789abcdef0123456789abcdef01234567")),
        "{v:?}"
    );
    let w = org.worker(&id);
    assert_eq!(w.progress.milestone, Milestone::Working);
    assert_eq!(w.progress.tracked_sha, None);
    assert!(org.show(&id)["pushes"].as_array().unwrap().is_empty());
    assert!(
        org.transitions(&id).is_empty(),
        "{:?}",
        org.transitions(&id)
    );

    org.release(&id);
    org.wait_supervisor_gone(&id);
    let w = org.worker(&id);
    assert_eq!(w.progress.milestone, Milestone::Working);
    assert_eq!(w.exit_code, Some(0));
    assert_eq!(org.locks_of(&id), vec!["alpha".to_string()]);
    assert_clean(Some(pg));
}

#[test]
fn two_permission_denials_kill_the_whole_group_at_once() {
    let org = Org::new(Spec::local("permission.sh").repo(RepoSpec::new("alpha")));
    let id = org.spawn_detached("alpha", "run a denied tool");
    let pg = pgid(&org, &id);
    let line = "Permission to use Bash has been auto-denied";
    // Measured from the moment the second denial is in worker.log.
    poll_until(
        "the second denial in worker.log",
        DEADLINE,
        || (org.worker_log(&id).matches(line).count() >= 2).then_some(()),
        || org.diag(&id),
    );
    let seen = Instant::now();
    poll_until(
        "the worker's group to die",
        Duration::from_secs(10),
        || live_members(pg).is_empty().then_some(()),
        || format!("{:?}\n{}", group_members(pg), org.diag(&id)),
    );
    let took = seen.elapsed();
    assert!(
        took < Duration::from_secs(1),
        "the group died {took:?} after the second denial"
    );
    let background: i32 = wait_file(&org, &id, &format!("background-{id}.pid"))
        .trim()
        .parse()
        .unwrap();
    assert!(!orch::process::process_alive(background, None));

    let w = org.wait_milestone(&id, "BLOCKED_PERMISSION", DEADLINE);
    assert!(
        w.progress
            .end_reason
            .as_deref()
            .is_some_and(|r| r.starts_with("permission:")),
        "{:?}",
        w.progress.end_reason
    );
    org.wait_supervisor_gone(&id);
    assert_eq!(org.locks_of(&id), vec!["alpha".to_string()], "lock kept");
    let alerts = org.alerts(&id);
    assert!(
        alerts
            .iter()
            .any(|a| a["kind"] == "blocked_permission" && a["severity"] == "critical"),
        "{alerts:?}"
    );
    assert_clean(Some(pg));
}

#[test]
fn hung_worker_ignoring_sigterm_times_out_and_its_group_is_killed() {
    let mut spec = Spec::local("hang.sh")
        .repo(RepoSpec::new("alpha"))
        .timeout("WORKING", "3s", "2s");
    spec.progress_window = Some("1s".into());
    let org = Org::new(spec);
    let id = org.spawn_detached("alpha", "think forever");
    let pg = pgid(&org, &id);
    let w = org.wait_milestone(&id, "FAILED", DEADLINE);
    assert_eq!(w.progress.end_reason.as_deref(), Some("timeout"));
    org.wait_supervisor_gone(&id);
    assert!(live_members(pg).is_empty(), "{:?}", group_members(pg));
    let w = org.worker(&id);
    assert_eq!(w.exit_code, None, "SIGKILL, not an exit: {:?}", w.exit_code);
    assert!(!w.worker_running);
    assert_eq!(org.locks_of(&id), vec!["alpha".to_string()], "lock kept");
    let kinds = alert_kinds(&org, &id);
    assert!(kinds.contains(&"timeout_warning".to_string()), "{kinds:?}");
    assert!(kinds.contains(&"timeout".to_string()), "{kinds:?}");
    assert_eq!(
        org.transitions(&id),
        vec![pair("WORKING", "FAILED")],
        "{}",
        org.diag(&id)
    );
    assert_clean(Some(pg));
}

#[test]
fn a_worker_printing_200_mb_leaves_the_supervisor_small_and_the_log_capped() {
    const LIMIT_KIB: u64 = 64 * 1024;
    let org = Org::new(Spec::local("flood.sh").repo(RepoSpec::new("alpha")));
    let id = org.spawn_detached("alpha", "print a lot");
    let pg = pgid(&org, &id);
    let sup = org.worker(&id).supervisor_pid.expect("a supervisor") as i32;
    let mut peak = (0u64, 0u64);
    poll_until(
        "the worker to finish printing (BLOCKED)",
        Duration::from_secs(180),
        || {
            if let Some((hwm, rss)) = memory_kib(sup) {
                peak = (peak.0.max(hwm), peak.1.max(rss));
            }
            (org.worker(&id).progress.milestone == Milestone::Blocked).then_some(())
        },
        || org.diag(&id),
    );
    // BLOCKED stops the worker at once, and the supervisor then ends: its high-water mark
    // as last sampled (VmHWM only grows), or read once more if it still runs.
    let hwm = memory_kib(sup).map_or(0, |(hwm, _)| hwm);
    assert!(
        peak.0 > 0 || hwm > 0,
        "the supervisor's memory was never sampled"
    );
    let peak_hwm = peak.0.max(hwm);
    assert!(
        peak_hwm < LIMIT_KIB,
        "supervisor VmHWM {peak_hwm} KiB (max sampled VmRSS {} KiB)",
        peak.1
    );
    let size = std::fs::metadata(org.worker_log_path(&id)).unwrap().len();
    let cap = orch::app::supervisor::MAX_LOG_BYTES;
    assert!(size >= cap, "worker.log is {size} bytes");
    assert!(size <= cap + 200, "worker.log is {size} bytes, cap {cap}");
    let tail = {
        let bytes = std::fs::read(org.worker_log_path(&id)).unwrap();
        text(&bytes[bytes.len().saturating_sub(200)..])
    };
    assert!(tail.contains("truncated"), "{tail}");
    eprintln!("flood: supervisor VmHWM {peak_hwm} KiB, worker.log {size} bytes");

    org.release(&id);
    org.wait_supervisor_gone(&id);
    assert_clean(Some(pg));
}

#[test]
fn a_worker_that_exits_early_is_recorded_and_keeps_its_lock() {
    let org = Org::new(Spec::local("exit3.sh").repo(RepoSpec::new("alpha")));
    let (out, id) = org.spawn_foreground("alpha", "give up");
    let pg = pgid(&org, &id);
    assert_eq!(out.status.code(), Some(1), "{}", org.diag(&id));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["milestone"], "WORKING");
    let w = org.worker(&id);
    assert_eq!(w.progress.milestone, Milestone::Working);
    assert_eq!(w.exit_code, Some(3));
    assert!(!w.worker_running);
    assert!(
        w.progress
            .end_reason
            .as_deref()
            .is_some_and(|r| r.contains("exit code 3")),
        "{:?}",
        w.progress.end_reason
    );
    assert!(alert_kinds(&org, &id).contains(&"worker_exited".to_string()));
    assert_eq!(org.locks_of(&id), vec!["alpha".to_string()]);
    assert!(
        org.events(&id)
            .iter()
            .any(|e| e.kind == "exited" && e.detail.contains("exit code 3"))
    );
    let cp = org.checkpoint(&id);
    assert_eq!(cp.current_milestone, "WORKING");
    assert!(cp.lock_held);
    assert_clean(Some(pg));
}

#[test]
fn spawn_on_a_locked_chain_exits_1_naming_the_blocker() {
    let org = Org::new(
        Spec::local("long.sh")
            .repo(RepoSpec::new("core"))
            .repo(RepoSpec::new("app").deps(&["core"])),
    );
    let held = org.run(&["hold", "core", "--reason", "freeze", "--by", "e2e"]);
    assert!(held.status.success(), "{}", text(&held.stderr));

    let out = org.run(&["spawn", "--repo", "app", "--task", "blocked"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("core"), "{stdout}");
    assert!(stdout.contains("hold:e2e"), "{stdout}");

    let out = org.run(&["spawn", "--repo", "app", "--task", "blocked", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["spawned"], false);
    assert_eq!(v["repo"], "app");
    let b = &v["blockers"][0];
    assert_eq!(
        (&b["repo"], &b["holder"], &b["kind"], &b["relation"]),
        (
            &"core".into(),
            &"hold:e2e".into(),
            &"hold".into(),
            &"dependency".into()
        ),
        "{v}"
    );
    assert_eq!(v["blockers"].as_array().unwrap().len(), 1);
    assert!(org.store().workers().unwrap().is_empty(), "nothing spawned");

    // A running worker on core blocks app the same way.
    assert!(org.run(&["unhold", "core"]).status.success());
    let id = org.spawn_detached("core", "hold the chain");
    let pg = pgid(&org, &id);
    let out = org.run(&["spawn", "--repo", "app", "--task", "blocked", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["blockers"][0]["holder"], id.as_str());
    assert_eq!(v["blockers"][0]["kind"], "worker");
    assert_eq!(org.store().workers().unwrap().len(), 1);

    let cancel = org.run(&["cancel", &id, "--reason", "cleanup", "--by", "e2e"]);
    assert!(cancel.status.success(), "{}", text(&cancel.stderr));
    org.wait_supervisor_gone(&id);
    assert_clean(Some(pg));
}

#[test]
fn cancel_stops_a_running_worker_and_releases_its_lock() {
    let org = Org::new(Spec::local("long.sh").repo(RepoSpec::new("alpha")));
    let id = org.spawn_detached("alpha", "work for a long time");
    let pg = pgid(&org, &id);
    assert_eq!(org.locks_of(&id), vec!["alpha".to_string()]);
    poll_until(
        "the worker's background process",
        DEADLINE,
        || (live_members(pg).len() >= 2).then_some(()),
        || org.diag(&id),
    );
    let out = org.run(&["cancel", &id, "--reason", "not needed", "--by", "e2e"]);
    assert!(
        out.status.success(),
        "{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(
        text(&out.stdout).contains("CANCELLED"),
        "{}",
        text(&out.stdout)
    );
    let w = org.worker(&id);
    assert_eq!(w.progress.milestone, Milestone::Cancelled);
    assert!(
        w.progress
            .end_reason
            .as_deref()
            .is_some_and(|r| r.contains("e2e") && r.contains("not needed")),
        "{:?}",
        w.progress.end_reason
    );
    assert!(org.locks_of(&id).is_empty());
    assert!(
        org.store()
            .lock_history()
            .unwrap()
            .iter()
            .any(|h| h.holder == id && h.action != "acquire"),
        "release recorded"
    );
    org.wait_supervisor_gone(&id);
    assert!(!org.worker(&id).worker_running);
    assert_eq!(org.checkpoint(&id).current_milestone, "CANCELLED");
    assert_clean(Some(pg));
}

#[test]
fn the_last_claim_of_a_worker_that_exits_after_a_burst_of_lines_counts() {
    let org = Org::new(Spec::local("burst.sh").repo(RepoSpec::new("alpha")));
    let (out, id) = org.spawn_foreground("alpha", "talk a lot, then stop");
    let pg = pgid(&org, &id);
    assert_eq!(out.status.code(), Some(1));
    let w = org.worker(&id);
    assert_eq!(
        w.progress.milestone,
        Milestone::Blocked,
        "{}",
        org.diag(&id)
    );
    assert_eq!(
        w.progress.end_reason.as_deref(),
        Some("blocked: need a human for the last step")
    );
    assert_eq!(w.exit_code, Some(0));
    assert_clean(Some(pg));
}

/// Process CPU time (utime + stime) in clock ticks.
fn cpu_ticks(pid: i32) -> Option<u64> {
    let t = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let f: Vec<&str> = t[t.rfind(')')? + 1..].split_whitespace().collect();
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

#[test]
fn a_worker_that_closes_its_output_does_not_make_the_supervisor_spin() {
    let org = Org::new(Spec::local("quiet.sh").repo(RepoSpec::new("alpha")));
    let id = org.spawn_detached("alpha", "work quietly");
    let pg = pgid(&org, &id);
    let sup = org.worker(&id).supervisor_pid.unwrap() as i32;
    wait_file_exists(&org, &id, &format!("quiet-{id}"));
    // A measurement window, not a wait: a supervisor spinning on its closed reader channel
    // burns the whole window (~100 ticks a second); an idle one a few ticks.
    let before = cpu_ticks(sup).unwrap();
    let window = Duration::from_secs(2);
    std::thread::sleep(window);
    let used = cpu_ticks(sup).unwrap() - before;
    assert!(
        used < 40,
        "the supervisor used {used} ticks of CPU in {window:?} while its worker was quiet"
    );
    assert_eq!(org.worker(&id).progress.milestone, Milestone::Working);
    org.release(&id);
    org.wait_supervisor_gone(&id);
    assert_eq!(org.worker(&id).exit_code, Some(0));
    assert_clean(Some(pg));
}

/// A task text too long to reach a worker (it travels in the worker's environment) is refused
/// at the spawn, naming the limit — not accepted and then failed at the worker's start.
#[test]
fn a_task_text_over_the_limit_is_refused_at_spawn() {
    let org = Org::new(Spec::local("happy.sh").repo(RepoSpec::new("core")));
    let long = "x".repeat(orch::text::MAX_TASK_BYTES + 1);
    let out = org.run(&["spawn", "--repo", "core", "--task", &long]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("--task") && stderr.contains(&format!("{} bytes", long.len())),
        "{stderr}"
    );
    assert!(org.store().workers().unwrap().is_empty());
    assert!(org.store().locks().unwrap().is_empty());
}

/// repos.yaml renames a repository while its chain is held: the lock on the old name blocks
/// every spawn (its chain cannot be known any more) until it is released, instead of freeing
/// the renamed clone beside its live holder.
#[test]
fn a_lock_on_a_renamed_repository_blocks_every_spawn_until_released() {
    let org = Org::new(
        Spec::local("long.sh")
            .repo(RepoSpec::new("core"))
            .repo(RepoSpec::new("sdk")),
    );
    let held = org.run(&["hold", "core", "--reason", "release freeze", "--by", "e2e"]);
    assert!(held.status.success(), "{}", text(&held.stderr));
    let yaml = std::fs::read_to_string(&org.config_path).unwrap();
    assert!(yaml.contains("\n  core:"), "{yaml}");
    std::fs::write(&org.config_path, yaml.replace("\n  core:", "\n  core2:")).unwrap();

    for repo in ["sdk", "core2"] {
        let out = org.run(&["can-spawn", repo]);
        let said = format!("{}{}", text(&out.stdout), text(&out.stderr));
        assert_eq!(out.status.code(), Some(1), "{repo}: {said}");
        assert!(said.contains("does not name"), "{repo}: {said}");
    }
    let out = org.run(&[
        "spawn",
        "--repo",
        "sdk",
        "--task",
        "beside the renamed hold",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(org.store().workers().unwrap().is_empty());
    let out = org.run(&["unhold", "core"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = org.run(&["can-spawn", "sdk"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
}

/// `orch status` shows the latest verdict recorded for a worker's last commit: a worker that
/// failed (its PUSHED_TO_CI timed out) while CI still ran shows `red` once CI's red answer is
/// recorded (here by `orch ci status`), not the undecided verdict it had when it failed.
#[test]
fn status_shows_the_latest_recorded_verdict_of_a_failed_workers_commit() {
    // resume_worker.sh's `bad-push-hang`: pushes a change CI (gated) will reject, then waits.
    let mut spec = Spec::resumable(&[("alpha", &[])]).timeout("PUSHED_TO_CI", "2s", "1s");
    spec.progress_window = Some("1s".into());
    let org = Org::new(spec);
    let id = org.spawn_detached("alpha", "bad-push-hang it");
    let w = org.wait_milestone(&id, "FAILED", DEADLINE);
    let sha = w.progress.tracked_sha.clone().expect("a pushed commit");
    assert!(
        !w.progress.verdict.is_some_and(|v| v.is_terminal()),
        "CI was still running when it failed: {:?}",
        w.progress.verdict
    );
    org.wait_supervisor_gone(&id);

    org.open_gate("alpha");
    poll_until(
        "CI of the failed worker's commit to be red",
        DEADLINE,
        || {
            let v = org.json(&["ci", "status", "--repo", "alpha", "--sha", &sha, "--json"]);
            (v["verdict"] == "red").then_some(())
        },
        || org.diag(&id),
    );

    let status = org.json(&["status", "--json"]);
    let shown = status["workers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["worker_id"] == id.as_str())
        .unwrap_or_else(|| panic!("{id} in {status:#}"))
        .clone();
    assert_eq!(shown["milestone"], "FAILED", "{shown:#}");
    assert_eq!(shown["verdict"], "red", "{shown:#}");
    assert!(
        !shown["failed_jobs"].as_array().unwrap().is_empty(),
        "{shown:#}"
    );
    let table = text(&org.run(&["status"]).stdout);
    let row = table
        .lines()
        .find(|l| l.starts_with(&id))
        .unwrap_or_else(|| panic!("{id} in\n{table}"));
    assert!(row.contains(" red "), "{row}");
    let session = org.json(&["sessions", "show", &id, "--json"]);
    assert_eq!(session["verdict"], "red", "{session:#}");
}

/// The worker's return (`worker_returns`, the checkpoint's `decisions_made`): its `DECISION:`
/// lines, each once, and the summary it gave with DONE, beside what git and CI say — in
/// `sessions show` and in its checkpoint file.
#[test]
fn the_workers_summary_and_decisions_are_kept_with_its_return() {
    let mut spec = Spec::local("returns.sh").repo(RepoSpec::new("alpha").standard_ci("true"));
    spec.stop_grace = "20s".into();
    let org = Org::new(spec);
    let (out, id) = org.spawn_foreground("alpha", "add a retry");
    assert!(out.status.success(), "{}", org.diag(&id));
    let shown = org.json(&["sessions", "show", &id, "--json"]);
    let r = &shown["returned"];
    assert_eq!(
        r["decisions"],
        serde_json::json!([
            "retry three times with backoff, as the API advises",
            "no new dependency"
        ]),
        "{r:#}"
    );
    assert!(
        r["worker_summary"]
            .as_str()
            .is_some_and(|s| s.ends_with("added a retry to the client")),
        "{r:#}"
    );
    assert_eq!(
        r["files_created"],
        serde_json::json!(["retry.py", "test_retry.py"])
    );
    assert_eq!(r["tests_added"], serde_json::json!(["test_retry.py"]));
    let text = String::from_utf8(org.run(&["sessions", "show", &id]).stdout).unwrap();
    assert!(
        text.contains("decision   no new dependency") && text.contains("its words"),
        "{text}"
    );
    let cp = org.checkpoint(&id);
    assert_eq!(cp.decisions_made.len(), 2, "{cp:?}");
    assert!(cp.worker_summary.is_some(), "{cp:?}");
}
