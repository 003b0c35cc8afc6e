//! An attempt a later one superseded is never made live again: `orch respawn` and `orch
//! approve` refuse it naming the attempt that replaced it, nothing starts and no lock is taken,
//! and neither `orch status` nor the board offers them (issue 34, item 1).

use crate::support::{DEADLINE, Org, RepoSpec, Spec, output_text, poll_until};
use orch::milestone::Milestone;
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

fn tick(org: &Org, file: &Path) {
    let out = org.run(&["wave", "run", file.to_str().unwrap(), "--tick"]);
    assert!(out.status.success(), "{}", output_text(&out));
}

/// The worker wave `wave`'s task `task` is linked to now.
fn worker_of(org: &Org, wave: &str, task: &str) -> Option<String> {
    org.json(&["wave", "status", wave, "--json"])["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["id"] == task)
        .and_then(|t| t["worker"].as_str().map(str::to_string))
}

/// `orch <args>` exits 1 and its stderr says `id` was superseded by `by`.
fn refused_naming(org: &Org, args: &[&str], id: &str, by: &str) {
    let out = org.run(args);
    let text = output_text(&out);
    assert_eq!(out.status.code(), Some(1), "{args:?}: {text}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("{id} not ")) && err.contains("superseded") && err.contains(by),
        "{args:?} must name the attempt that replaced {id} ({by}): {text}"
    );
}

/// Nothing was made live: the worker is where it was, nobody supervises it, it holds no lock.
fn still_stopped(org: &Org, id: &str, m: Milestone) {
    let w = org.worker(id);
    assert_eq!(w.milestone(), m, "{}", org.diag(id));
    assert!(!w.supervised(orch::store::now_ms()), "{}", org.diag(id));
    assert!(org.locks_of(id).is_empty(), "{}", org.diag(id));
}

/// A wave task whose change touches a protected path is held BLOCKED (lock kept); `orch wave
/// retry` gives it attempt 2, which is approved, DONE and landed. Attempt 1 — BLOCKED, held at
/// a green commit, its lock released by the retry — is then neither respawned nor approved,
/// and `orch status` and the board offer neither.
#[test]
fn a_blocked_attempt_a_wave_retry_superseded_is_neither_respawned_nor_approved() {
    let org = Org::new(
        Spec::local("protected.sh")
            .repo(RepoSpec::new("core"))
            .repo(RepoSpec::new("vm").deps(&["core"])),
    );
    let file = org.root.join("w1.yaml");
    std::fs::write(
        &file,
        "name: w1\ntasks:\n  - {id: t1, repo: core, task: workflow}\n",
    )
    .unwrap();
    tick(&org, &file);
    let first = worker_of(&org, "w1", "t1").expect("t1 started");
    let w = org.wait_milestone(&first, "BLOCKED", DEADLINE);
    assert!(w.progress.held.is_some(), "{}", org.diag(&first));
    org.wait_supervisor_gone(&first);

    let open = |org: &Org, kind: &str| {
        org.json(&["alerts", "--json"])["alerts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| {
                a["worker_id"] == first.as_str() && a["kind"] == kind && a["resolved_at"].is_null()
            })
            .count()
    };
    assert_eq!(open(&org, "protected_paths"), 1, "{}", org.diag(&first));
    let out = org.run(&["wave", "retry", "w1", "t1", "--by", "ops"]);
    assert!(out.status.success(), "{}", output_text(&out));
    // Its alert naming `orch approve` is answered by the retry.
    assert_eq!(open(&org, "protected_paths"), 0, "{}", org.diag(&first));
    // Superseded before its next attempt even started.
    refused_naming(
        &org,
        &["respawn", &first],
        &first,
        "attempt 2 of wave w1's task t1",
    );
    still_stopped(&org, &first, Milestone::Blocked);

    tick(&org, &file);
    let second = worker_of(&org, "w1", "t1").expect("attempt 2 started");
    assert_ne!(second, first);
    org.wait_milestone(&second, "BLOCKED", DEADLINE);
    org.wait_supervisor_gone(&second);
    let ok = org.run(&["approve", &second]);
    assert!(ok.status.success(), "{}", output_text(&ok));
    org.wait_done(&second);
    let landed = poll_until(
        "attempt 2 to land",
        Duration::from_secs(90),
        || {
            let w = org.worker(&second);
            (w.progress.landing.as_ref().map(|l| l.state)
                == Some(orch::milestone::LandState::Landed))
            .then_some(w)
        },
        || org.diag(&second),
    );
    assert_eq!(landed.milestone(), Milestone::Done);

    // Attempt 1: neither respawned nor approved (shown or not), naming attempt 2's worker.
    refused_naming(
        &org,
        &["respawn", &first, "--note", "go on"],
        &first,
        &second,
    );
    refused_naming(&org, &["approve", &first], &first, &second);
    refused_naming(&org, &["approve", &first, "--dry-run"], &first, &second);
    still_stopped(&org, &first, Milestone::Blocked);
    assert!(org.store().locks().unwrap().is_empty());
    assert_eq!(
        org.count_events(&first, "approval"),
        0,
        "{}",
        org.diag(&first)
    );

    // The views offer neither.
    let status: Value = org.json(&["status", "--json"]);
    let mine = status["workers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["worker_id"] == first.as_str())
        .expect("attempt 1 in status")
        .clone();
    assert!(
        mine["superseded"]
            .as_str()
            .is_some_and(|s| s.contains(&second)),
        "{mine:#}"
    );
    assert_eq!(mine["supervision"], "superseded", "{mine:#}");
    let text = output_text(&org.run(&["status"]));
    assert!(
        !text.contains(&format!("`orch approve {first}`")),
        "status offers approving a superseded attempt:\n{text}"
    );
    let line = text
        .lines()
        .find(|l| l.contains(&first))
        .expect("attempt 1's row");
    assert!(
        !line.contains("orch respawn") && line.contains("superseded"),
        "{text}"
    );
    // (Its end reason still says why it was held: `needs orch approve`, as it was then.)
    let show = output_text(&org.run(&["sessions", "show", &first]));
    assert!(
        !show.contains("orch respawn")
            && !show.contains(&format!(": `orch approve {first}`"))
            && show.contains(&format!("superseded by worker {second}")),
        "{show}"
    );
    // The board: its card offers no respawn or approval, and its worker view says why.
    let served = crate::board::serve(&org, "127.0.0.1:0");
    let board = crate::board::get_json(&served, "/api/board");
    let card = board["groups"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|g| g["cards"].as_array().unwrap())
        .find(|c| c["worker_id"] == first.as_str())
        .expect("attempt 1 on the board")
        .clone();
    let action = card["action"].as_str().unwrap_or("");
    assert!(
        !action.contains("respawn")
            && !action.contains("approve")
            && card["superseded"]
                .as_str()
                .is_some_and(|s| s.contains(&second)),
        "{card:#}"
    );
    let view = crate::board::get_json(&served, &format!("/api/workers/{first}"));
    assert!(
        view["superseded"]
            .as_str()
            .is_some_and(|s| s.contains(&second)),
        "{view:#}"
    );
}

/// A task off its wave's critical path times out FAILED (lock kept); `orch wave retry` gives
/// it attempt 2, DONE and landed. `orch respawn` of the FAILED attempt 1 is refused naming
/// attempt 2: no new worker lands a second copy of the task.
#[test]
fn a_failed_attempt_a_wave_retry_superseded_is_not_reassigned() {
    let mut spec = Spec::local("reassign_worker.sh")
        .repo(RepoSpec::new("alpha"))
        .repo(RepoSpec::new("beta"))
        .timeout("WORKING", "3s", "2s");
    spec.progress_window = Some("1s".into());
    let org = Org::new(spec);
    let file = org.root.join("wave-s.yaml");
    std::fs::write(
        &file,
        r#"name: wave-s
tasks:
  - {id: long, repo: alpha, task: "the long part", estimate: 10m}
  - {id: short, repo: beta, task: "the short part [stall]", estimate: 1m}
"#,
    )
    .unwrap();
    tick(&org, &file);
    let first = worker_of(&org, "wave-s", "short").expect("short started");
    org.wait_milestone(&first, "FAILED", Duration::from_secs(60));
    org.wait_supervisor_gone(&first);
    assert_eq!(org.locks_of(&first), vec!["beta".to_string()]);

    let out = org.run(&["wave", "retry", "wave-s", "short", "--by", "ops"]);
    assert!(out.status.success(), "{}", output_text(&out));
    tick(&org, &file);
    let second = worker_of(&org, "wave-s", "short").expect("attempt 2 started");
    assert_ne!(second, first);
    org.wait_done(&second);
    let before = org.workers().len();

    refused_naming(
        &org,
        &["respawn", &first, "--note", "again"],
        &first,
        &second,
    );
    still_stopped(&org, &first, Milestone::Failed);
    assert_eq!(org.workers().len(), before, "no new worker was made");
    assert_eq!(org.count_events(&first, "reassigned"), 0);
    assert_eq!(worker_of(&org, "wave-s", "short"), Some(second.clone()));
}

/// A worker whose task a later worker of the same task (same repository and task id) has done
/// is not respawned, though nothing else replaced it: its lock was released by hand and the
/// task spawned again.
#[test]
fn a_blocked_worker_whose_task_a_later_worker_did_is_not_respawned() {
    let org = Org::new(Spec::local("protected.sh").repo(RepoSpec::new("core")));
    let spawn = |org: &Org| {
        let out = org.run(&[
            "spawn", "--repo", "core", "--task", "workflow", "--id", "T-7",
        ]);
        assert!(out.status.success(), "{}", output_text(&out));
        org.workers()
            .into_iter()
            .max_by_key(|w| w.created_ms)
            .unwrap()
            .id
    };
    let first = spawn(&org);
    org.wait_milestone(&first, "BLOCKED", DEADLINE);
    org.wait_supervisor_gone(&first);
    let out = org.run(&[
        "release",
        &first,
        "--force",
        "--reason",
        "start it over",
        "--by",
        "ops",
    ]);
    assert!(out.status.success(), "{}", output_text(&out));
    let second = spawn(&org);
    assert_ne!(second, first);
    org.wait_milestone(&second, "BLOCKED", DEADLINE);
    org.wait_supervisor_gone(&second);
    let ok = org.run(&["approve", &second]);
    assert!(ok.status.success(), "{}", output_text(&ok));
    org.wait_done(&second);

    refused_naming(&org, &["respawn", &first], &first, &second);
    refused_naming(&org, &["approve", &first], &first, &second);
    still_stopped(&org, &first, Milestone::Blocked);
}
