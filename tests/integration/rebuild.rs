//! `orch resume --from-checkpoints` after the database is lost, for work that had gone all the
//! way: changes DONE and landed, a wave whose task was retried (`orch wave retry`) after its
//! first attempt stopped. The rebuilt store must answer every view as the lost one did — the
//! landings, the wave with its attempts — raise no alert it did not earn, and the wave's next
//! tick must neither stop the wave nor go back to the stopped attempt.

use crate::support::{Org, output_text, poll_until};
use orch::milestone::Milestone;
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

const WAVE: &str = "rb";

fn tick(org: &Org, file: &Path) -> Value {
    let out = org.run(&["wave", "run", file.to_str().unwrap(), "--tick", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("the tick printed no JSON: {}", output_text(&out)))
}

fn wave_status(org: &Org) -> Value {
    org.json(&["wave", "status", WAVE, "--json"])
}

fn alerts(org: &Org) -> Vec<Value> {
    org.json(&["alerts", "--json"])["alerts"]
        .as_array()
        .unwrap()
        .clone()
}

/// `orch status --json`'s workers by id.
fn status(org: &Org) -> std::collections::BTreeMap<String, Value> {
    org.json(&["status", "--json"])["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| (w["worker_id"].as_str().unwrap().to_string(), w.clone()))
        .collect()
}

/// The fields of a worker's status entry that say where it stands (not how long ago, nor
/// whether a process supervises it now).
const STANDING: &[&str] = &[
    "worker_id",
    "repo",
    "task",
    "task_id",
    "milestone",
    "since",
    "created_at",
    "branch",
    "base_sha",
    "tracked_sha",
    "verdict",
    "failed_jobs",
    "fix_attempts",
    "end_reason",
    "respawns",
    "wave",
    "landing",
    "model",
    "halted",
];

/// Waits until nothing runs any more and every checkpoint says what the database says.
fn settle(org: &Org) {
    org.wait_until(
        "every supervisor to end with its checkpoint written",
        Duration::from_secs(60),
        || {
            org.workers().iter().all(|w| {
                !w.supervised(orch::store::now_ms())
                    && orch::checkpoint::read(&orch::checkpoint::path_for(&org.state, w)).is_ok_and(
                        |cp| {
                            serde_json::from_str::<Value>(&cp.progress_json).ok()
                                == serde_json::to_value(&w.progress).ok()
                        },
                    )
            })
        },
    );
    org.wait_ci_idle();
    org.wait_until(
        "no process of the run left",
        Duration::from_secs(20),
        || org.leftovers().is_empty(),
    );
}

/// `orch status --json`'s workers, the fields of [`STANDING`], equal to `before`'s.
fn assert_standing(org: &Org, before: &std::collections::BTreeMap<String, Value>, when: &str) {
    let after = status(org);
    assert_eq!(
        after.keys().collect::<Vec<_>>(),
        before.keys().collect::<Vec<_>>(),
        "{when}"
    );
    for (id, b) in before {
        for field in STANDING {
            assert_eq!(
                after[id][field], b[field],
                "{when}: {id}'s {field}: {:#} was {:#}",
                after[id], b
            );
        }
    }
}

fn remove_db(state: &Path) {
    for f in ["orch.db", "orch.db-wal", "orch.db-shm"] {
        let _ = std::fs::remove_file(state.join(f));
    }
}

#[test]
fn a_database_rebuilt_from_checkpoints_keeps_landings_waves_and_attempts() {
    let org = crate::landing::org(None);
    let file = org.root.join(format!("{WAVE}.yaml"));
    std::fs::write(
        &file,
        format!(
            "name: {WAVE}\ntasks:\n  - {{id: core-1, repo: core, task: \"core feature [fail-once]\"}}\n  - {{id: vm-1, repo: vm, task: \"vm feature\"}}\n"
        ),
    )
    .unwrap();
    // Attempt 1 of core-1 stops BLOCKED; `orch wave retry` gives it attempt 2, which lands, and
    // vm-1 after it.
    let first = poll_until(
        "core-1's first attempt to be BLOCKED",
        Duration::from_secs(60),
        || {
            tick(&org, &file);
            std::thread::sleep(Duration::from_millis(200));
            org.workers().into_iter().find(|w| {
                w.repo == "core"
                    && w.milestone() == Milestone::Blocked
                    && !w.supervised(orch::store::now_ms())
            })
        },
        || format!("{:#}", wave_status(&org)),
    );
    let out = org.run(&["wave", "retry", WAVE, "core-1", "--by", "ops"]);
    assert!(out.status.success(), "{}", output_text(&out));
    let before_wave = poll_until(
        "the wave to finish",
        Duration::from_secs(120),
        || {
            tick(&org, &file);
            std::thread::sleep(Duration::from_millis(300));
            let v = wave_status(&org);
            (v["finished"] == true).then_some(v)
        },
        || format!("{:#}", wave_status(&org)),
    );
    assert_eq!(before_wave["all_done"], true, "{before_wave:#}");
    let second = org
        .workers()
        .into_iter()
        .find(|w| w.task_id.as_deref() == Some(&format!("{WAVE}:core-1#2")))
        .expect("attempt 2 ran");
    settle(&org);
    let before_wave = wave_status(&org);
    let before = status(&org);
    assert_eq!(before.len(), 3, "{before:#?}");
    for (id, w) in &before {
        if *id == first.id {
            assert_eq!(w["milestone"], "BLOCKED", "{w:#}");
        } else {
            assert_eq!(w["milestone"], "DONE", "{w:#}");
            assert_eq!(w["landing"]["state"], "landed", "{w:#}");
        }
    }
    assert!(org.store().locks().unwrap().is_empty());

    // The database is lost; the rebuild from the checkpoints is clean.
    remove_db(&org.state);
    let answer = org.resume_with(&["--from-checkpoints"]);
    let rebuilt = &answer["rebuilt"];
    assert_eq!(rebuilt["workers"], 3, "{answer:#}");
    for list in ["refused", "problems", "unproven_done", "lost_holds"] {
        assert_eq!(
            rebuilt[list].as_array().map(Vec::len),
            Some(0),
            "{list}: {answer:#}"
        );
    }
    assert_eq!(
        answer["resumed"].as_array().map(Vec::len),
        Some(0),
        "nothing to resume: {answer:#}"
    );

    let check_views = |when: &str| {
        assert_standing(&org, &before, when);
        let raised = alerts(&org);
        assert!(
            raised.is_empty(),
            "{when}: alerts nobody earned: {raised:#?}"
        );
        let wave = wave_status(&org);
        for field in ["name", "file", "cancelled", "done", "all_done", "finished"] {
            assert_eq!(wave[field], before_wave[field], "{when}: wave {field}");
        }
        let (tasks, tasks_before) = (
            wave["tasks"].as_array().unwrap(),
            before_wave["tasks"].as_array().unwrap(),
        );
        assert_eq!(tasks.len(), tasks_before.len(), "{when}: {wave:#}");
        for (t, b) in tasks.iter().zip(tasks_before) {
            assert_eq!(t, b, "{when}: task {}", b["id"]);
        }
        assert!(org.store().locks().unwrap().is_empty(), "{when}");
    };
    check_views("after the rebuild");
    assert_eq!(
        before_wave["tasks"][0]["worker"], second.id,
        "core-1 is its second attempt's"
    );

    // The next tick finds the wave as it was: finished, nothing started, nothing alerted.
    let report = tick(&org, &file);
    assert_eq!(
        report["started"].as_array().map(Vec::len),
        Some(0),
        "{report:#}"
    );
    assert_eq!(
        report["alerts"].as_array().map(Vec::len),
        Some(0),
        "{report:#}"
    );
    assert_eq!(org.workers().len(), 3);
    check_views("after the next tick");

    // A wave checkpoint is evidence too: one that gives a task a worker orch did not start for
    // it, or another go its attempt never stopped for (a retry nobody asked for), is not
    // believed — named, and the command says no — and its wave is not rebuilt.
    let wave_cp = org
        .state
        .join("waves")
        .join(format!("{WAVE}.checkpoint.yaml"));
    let recorded = orch::checkpoint::waves::read(&wave_cp).unwrap();
    let vm = before_wave["tasks"][1]["worker"].as_str().unwrap();
    assert_eq!(
        recorded.tasks[0].worker.as_deref(),
        Some(second.id.as_str())
    );
    assert_eq!(recorded.tasks[0].attempt, 2);
    let unknown = |what: &str| {
        let out = org.run(&["wave", "status", WAVE]);
        assert!(
            !out.status.success() && output_text(&out).contains("neither a wave file nor"),
            "{what}: {}",
            output_text(&out)
        );
    };
    let mut someone_elses = recorded.clone();
    someone_elses.tasks[0].worker = Some(vm.to_string());
    let mut unasked_retry = recorded.clone();
    unasked_retry.tasks[1].attempt = 2;
    unasked_retry.tasks[1].worker = None;
    for (forged, why) in [
        (someone_elses, "not the worker orch started for it"),
        (
            unasked_retry,
            "a task gets another go only once its attempt stopped",
        ),
    ] {
        let text = orch::yaml::to_yaml_string(&forged).unwrap();
        orch::checkpoint::write_atomic(&wave_cp, text.as_bytes()).unwrap();
        remove_db(&org.state);
        let out = org.run(&["resume", "--from-checkpoints", "--json"]);
        assert_eq!(out.status.code(), Some(1), "{why}: {}", output_text(&out));
        let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
        let refused = answer["rebuilt"]["refused"].as_array().unwrap();
        assert_eq!(refused.len(), 1, "{why}: {answer:#}");
        assert_eq!(refused[0]["file"], wave_cp.display().to_string());
        assert!(
            refused[0]["why"].as_str().unwrap().contains(why),
            "{why}: {answer:#}"
        );
        assert_eq!(answer["rebuilt"]["workers"], 3, "{answer:#}");
        unknown(why);
    }

    // A state directory from before wave checkpoints: the rebuild does what it did then
    // (the workers, no wave), without failing.
    std::fs::remove_file(&wave_cp).unwrap();
    remove_db(&org.state);
    let answer = org.resume_with(&["--from-checkpoints"]);
    assert_eq!(answer["rebuilt"]["workers"], 3, "{answer:#}");
    assert_eq!(
        answer["rebuilt"]["waves"],
        serde_json::json!([]),
        "{answer:#}"
    );
    unknown("no wave checkpoint");
}

/// A change squashed onto a base that moved meanwhile lands as a new commit, without the DONE
/// commit in its history: git still proves it landed (the landed commit on the base carries
/// the DONE commit's very change onto the head it was built on). A checkpoint that claims
/// another commit of the base as its landing is not believed: CI must prove it again.
#[test]
fn a_change_squashed_onto_a_moved_base_is_still_landed_after_a_rebuild() {
    let org = crate::landing::org(Some("{method: squash}"));
    let id = org.spawn("core", "core feature [base]", "t-squash");
    org.wait_until("its change to land", Duration::from_secs(90), || {
        org.worker(&id)
            .progress
            .landing
            .is_some_and(|l| l.state == orch::milestone::LandState::Landed)
    });
    settle(&org);
    let w = org.worker(&id);
    let landing = w.progress.landing.clone().unwrap();
    let (done, landed) = (landing.done_sha.unwrap(), landing.landed.unwrap());
    assert_ne!(done, landed, "squashed onto a moved base: {:?}", w.progress);
    let before = status(&org);

    remove_db(&org.state);
    let answer = org.resume_with(&["--from-checkpoints"]);
    for list in ["refused", "problems", "unproven_done"] {
        assert_eq!(
            answer["rebuilt"][list].as_array().map(Vec::len),
            Some(0),
            "{list}: {answer:#}"
        );
    }
    assert_eq!(
        answer["resumed"].as_array().map(Vec::len),
        Some(0),
        "{answer:#}"
    );
    assert_standing(&org, &before, "after the rebuild");
    assert!(alerts(&org).is_empty(), "{:#?}", alerts(&org));
    assert!(org.store().locks().unwrap().is_empty());

    // The same checkpoint claiming the base head it was built on as its landing.
    let w = org.worker(&id);
    let path = orch::checkpoint::path_for(&org.state, &w);
    let mut cp = orch::checkpoint::read(&path).unwrap();
    let mut progress: Value = serde_json::from_str(&cp.progress_json).unwrap();
    progress["landing"]["landed"] = progress["landing"]["onto"].clone();
    assert!(progress["landing"]["landed"].is_string(), "{progress:#}");
    cp.progress_json = progress.to_string();
    orch::checkpoint::write(&org.state, &w, &cp).unwrap();
    remove_db(&org.state);
    let answer = org.resume_with(&["--from-checkpoints"]);
    let unproven = answer["rebuilt"]["unproven_done"].as_array().unwrap();
    assert_eq!(unproven.len(), 1, "{answer:#}");
    assert!(
        unproven[0].as_str().unwrap().starts_with(&format!("{id}:"))
            && unproven[0].as_str().unwrap().contains("nor does it carry"),
        "{answer:#}"
    );
    assert_ne!(org.worker(&id).milestone(), Milestone::Done);
}

/// A database lost while a verified change is still landing (its base moved, the base's CI
/// going): the rebuild takes its chain lock again, the resumed supervisor finishes the landing,
/// and no alert blames an operator's `release --force` nobody ran (issue 34, item 3).
#[test]
fn a_landing_cut_by_a_lost_database_lands_after_the_rebuild() {
    let gate = tempfile::tempdir().unwrap();
    let gate = gate.path().join("open");
    let spec = crate::support::Spec::local("happy.sh").repo(
        crate::support::RepoSpec::new("core")
            .job(
                crate::support::job(
                    "test",
                    &format!(
                        "if [ \"$ORCH_CI_REF\" = refs/heads/main ]; then while [ ! -e '{}' ]; do sleep 0.05; done; fi",
                        gate.display()
                    ),
                )
                .timeout(Some("10m")),
            )
            .job(crate::support::job("radicle-push", "true").needs(&["test"])),
    );
    let org = Org::new(spec);
    let id = org.spawn_detached("core", "a change to land");
    org.wait_until(
        "its base to move, the base's CI held",
        Duration::from_secs(90),
        || {
            org.worker(&id).progress.landing.as_ref().is_some_and(|l| {
                l.landed.is_some() && l.state != orch::milestone::LandState::Landed
            })
        },
    );
    assert!(
        !org.locks_of(&id).is_empty(),
        "a landing keeps its chain lock"
    );
    // Its checkpoint says so too before the database goes.
    org.wait_until(
        "the checkpoint to show the move",
        Duration::from_secs(20),
        || {
            let w = org.worker(&id);
            orch::checkpoint::read(&orch::checkpoint::path_for(&org.state, &w)).is_ok_and(|cp| {
                serde_json::from_str::<Value>(&cp.progress_json)
                    .is_ok_and(|p| p["landing"]["landed"].is_string())
            })
        },
    );
    org.kill_supervisor(&id);
    remove_db(&org.state);
    let answer = org.resume_with(&["--from-checkpoints"]);
    assert_eq!(
        answer["rebuilt"]["problems"].as_array().map(Vec::len),
        Some(0),
        "{answer:#}"
    );
    assert!(
        !org.locks_of(&id).is_empty(),
        "the rebuild took its chain lock again: {answer:#}"
    );
    std::fs::write(&gate, "").unwrap();
    org.wait_until("the landing to finish", Duration::from_secs(90), || {
        org.worker(&id)
            .progress
            .landing
            .as_ref()
            .is_some_and(|l| l.state == orch::milestone::LandState::Landed)
    });
    org.wait_supervisor_gone(&id);
    let alerts = alerts(&org);
    assert!(
        !alerts
            .iter()
            .any(|a| a["kind"] == "landing_refused" || a.to_string().contains("release --force")),
        "{alerts:#?}"
    );
    assert!(org.locks_of(&id).is_empty(), "its lock went when it landed");
}
