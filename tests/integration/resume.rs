//! `orch resume`: every reconciliation branch produced for real (scripted workers on the local
//! forge, the real `orch` binary, supervisors killed with SIGKILL), concurrent resumers, the
//! respawn bound, and rebuilding the database from checkpoint files.
//!
//! The workers are `tests/workers/resume_worker.sh`; the first word of a task picks what the
//! first life of a worker does (see the script). CI `check` waits for a gate file, so a test
//! decides when CI finishes.

use crate::support::{
    DEADLINE, ORCH, Org, Spec, dead_pid, git, job_status, output_text, poll_until, reaping_late,
    resumed_entry,
};
/// Is the worker's supervisor alive (lease valid, same process)?
fn supervisor_alive(w: &orch::store::workers::WorkerRecord) -> bool {
    w.supervised(orch::store::now_ms())
}
use orch::milestone::Milestone;
use orch::store::workers as ws;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

fn org(repos: &[(&str, &[&str])]) -> Org {
    Org::new(Spec::resumable(repos))
}

fn short(sha: &str) -> &str {
    &sha[..10]
}

/// The `orch status --json` entry of `id`.
fn status_of(org: &Org, id: &str) -> Value {
    let st = org.json(&["status", "--json"]);
    st["workers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["worker_id"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("{id} missing from orch status: {st}"))
}

/// DONE with CI verified: the tracked SHA is the last push, its verdict green and the sync job
/// `success`; the chain lock is released.
fn assert_verified_done(org: &Org, id: &str) {
    let w = org.worker(id);
    assert_eq!(w.milestone(), Milestone::Done, "{}", org.dump());
    let pushes = org.pushes(id);
    let last = pushes.last().expect("a push");
    assert_eq!(w.progress.tracked_sha.as_deref(), Some(last.sha.as_str()));
    assert_eq!(last.verdict.map(|v| v.as_str()), Some("green"), "{last:?}");
    assert_eq!(job_status(last, "radicle-push").as_deref(), Some("success"));
    assert_eq!(job_status(last, "check").as_deref(), Some("success"));
    assert_eq!(org.lock_of(id), None, "DONE releases the lock");
}

fn assert_no_leftovers(org: &Org) {
    org.wait_until(
        "no process of the run left",
        Duration::from_secs(20),
        || org.leftovers().is_empty(),
    );
}

#[test]
fn ci_green_while_the_supervisor_was_down_goes_to_a_replacement_that_says_done() {
    let org = org(&[("core", &[])]);
    let id = org.spawn("core", "push-hang add the feature", "t-green");
    org.wait_mark(&id, 1, "pushed");
    assert_eq!(org.worker(&id).milestone(), Milestone::PushedToCi);
    org.kill_supervisor(&id);
    // CI finishes green while nobody watches.
    org.open_gate("core");
    org.wait_ci_idle();
    let w = org.worker(&id);
    assert_eq!(w.milestone(), Milestone::PushedToCi);
    assert_ne!(w.progress.verdict.map(|v| v.as_str()), Some("green"));
    assert_eq!(status_of(&org, &id)["supervisor_alive"], false);

    // Green, but its worker died mid-turn without saying DONE (nor ending its turn): DONE
    // needs its word, so a replacement finishes the task, told CI is green.
    let answer = org.resume();
    let r = resumed_entry(&answer, &id).unwrap_or_else(|| panic!("{answer}"));
    assert_eq!(r["before"], "PUSHED_TO_CI");
    assert_eq!(r["after"], "PUSHED_TO_CI");
    assert_eq!(r["action"], "respawned", "{r}");
    assert_eq!(answer["resumed"].as_array().unwrap().len(), 1);

    org.wait_done(&id);
    assert_verified_done(&org, &id);
    let w = org.worker(&id);
    assert_eq!(w.respawns, 1);
    assert_eq!(org.lives(&id), 2, "one replacement");
    let p = org.prompt(&id, 2);
    assert!(p.contains("CI is green for"), "{p}");
    assert!(p.contains("then report DONE"), "{p}");
    assert_eq!(org.count_events(&id, "resume_claimed"), 1);
    let released = org.store().lock_history().unwrap();
    let rel = released
        .iter()
        .find(|h| h.holder == id && h.action == "release")
        .expect("lock released");
    assert!(
        rel.reason.as_deref().unwrap_or("").contains("DONE"),
        "{rel:?}"
    );
    assert_no_leftovers(&org);
    // Nothing is left to resume.
    assert_eq!(org.resume()["resumed"].as_array().unwrap().len(), 0);
}

#[test]
fn ci_red_while_the_supervisor_was_down_respawns_a_briefed_replacement() {
    let org = org(&[("core", &[])]);
    let id = org.spawn("core", "bad-push-hang add the feature", "t-red");
    org.wait_mark(&id, 1, "pushed");
    let bad_sha = org.worker(&id).progress.tracked_sha.unwrap();
    let dead = org.kill_supervisor(&id);
    org.open_gate("core");
    org.wait_ci_idle();

    let answer = org.resume();
    let r = resumed_entry(&answer, &id).unwrap_or_else(|| panic!("{answer}"));
    assert_eq!(r["before"], "PUSHED_TO_CI");
    assert_eq!(r["after"], "FIXING_CI");
    assert_eq!(r["action"], "respawned", "{r}");
    let w = org.worker(&id);
    assert_eq!(w.respawns, 1);
    assert_eq!(w.progress.fix_attempts, 1);
    assert_eq!(org.lock_of(&id).as_deref(), Some("core"), "lock kept");

    org.wait_until("the replacement to start", Duration::from_secs(30), || {
        org.lives(&id) >= 2
    });
    let first = org.prompt(&id, 1);
    assert!(!first.contains("RESUMING"), "{first}");
    let p = org.prompt(&id, 2);
    // Its environment says where each life stands (ORCH_MILESTONE, ORCH_REPLACEMENT).
    let stands = |life: u32| {
        std::fs::read_to_string(org.ctl.join("prompts").join(format!("{id}.{life}.stands")))
            .unwrap_or_default()
    };
    assert_eq!(stands(1).trim(), "WORKING 0");
    assert_eq!(stands(2).trim(), "FIXING_CI 1");
    for needle in [
        "RESUMING as replacement worker 1 of 2".to_string(),
        format!("its supervisor (pid {dead}) died while it was running"),
        format!(
            "Work so far: 1 commit(s) on your branch ({})",
            short(&bad_sha)
        ),
        "files: status.txt".to_string(),
        "Last CI: red.".to_string(),
        format!(
            "Still missing: CI is red for {} (failing: check): fix it, push, report PUSHED_TO_CI",
            short(&bad_sha)
        ),
    ] {
        assert!(
            p.contains(&needle),
            "replacement prompt lacks {needle:?}:\n{p}"
        );
    }

    org.wait_done(&id);
    assert_verified_done(&org, &id);
    let w = org.worker(&id);
    assert_eq!(w.respawns, 1);
    assert_eq!(org.lives(&id), 2);
    assert_eq!(org.count_events(&id, "resume_claimed"), 1);
    assert_eq!(org.count_events(&id, "respawn"), 1);
    let shas: Vec<String> = org
        .pushes(&id)
        .into_iter()
        .map(|p| p.sha.to_string())
        .collect();
    assert_eq!(shas.len(), 2, "the red push and the fix: {shas:?}");
    assert_eq!(shas[0], bad_sha);
    assert_no_leftovers(&org);
}

#[test]
fn ci_still_running_when_the_worker_died_mid_turn_gets_a_replacement_beside_ci() {
    let org = org(&[("core", &[])]);
    let id = org.spawn("core", "push-hang add the feature", "t-running");
    org.wait_mark(&id, 1, "pushed");
    let dead = org.kill_supervisor(&id);

    let answer = org.resume();
    let r = resumed_entry(&answer, &id).unwrap_or_else(|| panic!("{answer}"));
    assert_eq!(r["before"], "PUSHED_TO_CI");
    assert_eq!(r["after"], "PUSHED_TO_CI");
    // Its worker never ended its turn: a replacement goes on while CI runs.
    assert_eq!(r["action"], "respawned", "{r}");
    assert!(
        r["detail"].as_str().unwrap().contains("CI running")
            || r["detail"].as_str().unwrap().contains("CI pending"),
        "{r}"
    );
    org.wait_until("a new supervisor", Duration::from_secs(20), || {
        let w = org.worker(&id);
        supervisor_alive(&w) && w.supervisor_pid != Some(dead as i64)
    });
    assert_eq!(status_of(&org, &id)["supervisor_alive"], true);

    org.open_gate("core");
    org.wait_done(&id);
    assert_verified_done(&org, &id);
    let w = org.worker(&id);
    assert_eq!(w.respawns, 1);
    assert_eq!(org.lives(&id), 2, "one replacement worker");
    assert_eq!(org.count_events(&id, "respawn"), 1);
    assert_no_leftovers(&org);
}

#[test]
fn nothing_pushed_orphan_is_shown_unsupervised_then_replaced_and_finishes() {
    let org = org(&[("core", &[])]);
    let id = org.spawn("core", "hang add the feature", "t-working");
    org.wait_mark(&id, 1, "hanging");
    assert_eq!(status_of(&org, &id)["supervisor_alive"], true);
    let dead = org.kill_supervisor(&id);

    // orch status: the orphan is not supervised (JSON and table).
    let s = status_of(&org, &id);
    assert_eq!(s["supervisor_alive"], false, "{s}");
    assert_eq!(s["milestone"], "WORKING");
    let table = String::from_utf8(org.run(&["status"]).stdout).unwrap();
    let row = table.lines().find(|l| l.starts_with(&id)).unwrap();
    assert!(row.contains("GONE (orch resume)"), "{table}");

    org.open_all_gates();
    let answer = org.resume();
    let r = resumed_entry(&answer, &id).unwrap_or_else(|| panic!("{answer}"));
    assert_eq!(r["before"], "WORKING");
    assert_eq!(r["after"], "WORKING");
    assert_eq!(r["action"], "respawned", "{r}");

    org.wait_done(&id);
    assert_verified_done(&org, &id);
    let p = org.prompt(&id, 2);
    let pushed = org.pushes(&id)[0].sha.clone();
    for needle in [
        "RESUMING as replacement worker 1 of 2".to_string(),
        format!("its supervisor (pid {dead}) died while it was running"),
        "Work so far: 1 commit(s) on your branch".to_string(),
        "Last CI: none.".to_string(),
        "Still missing: push your work and report PUSHED_TO_CI.".to_string(),
    ] {
        assert!(p.contains(&needle), "prompt lacks {needle:?}:\n{p}");
    }
    // The unpushed work-in-progress commit was kept and pushed by the replacement.
    let wt = org.worker(&id).worktree;
    let log = std::process::Command::new("git")
        .args(["-C", &wt, "log", "--format=%s", "-n", "2", &pushed])
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&log.stdout);
    assert!(log.contains("status good (life 2)"), "{log}");
    assert!(log.contains("status wip (life 1)"), "{log}");
    let w = org.worker(&id);
    assert_eq!(w.respawns, 1);
    assert_eq!(org.lives(&id), 2);
    assert_no_leftovers(&org);
}

/// A spawner killed inside `git worktree add -b` leaves the new branch's lock file in the
/// clone: the resumer clears it before it makes the worktree (found by the chaos test, once a
/// worktree that cannot be made holds its replacement back).
#[test]
fn a_branch_lock_a_killed_spawner_left_is_cleared_before_the_worktree_is_made() {
    let org = org(&[("core", &[])]);
    let id = org.spawn("core", "hang add the feature", "t-branch-lock");
    org.wait_mark(&id, 1, "hanging");
    org.kill_supervisor(&id);
    // As a spawner killed inside `git worktree add -b` leaves it: no worktree, no branch, the
    // branch's lock file.
    let w = org.worker(&id);
    let clone = org.clone_path("core");
    git(&clone, &["worktree", "remove", "--force", &w.worktree]);
    git(&clone, &["branch", "-D", &w.local_branch()]);
    let lock = clone
        .join(".git/refs/heads")
        .join(format!("{}.lock", w.local_branch()));
    std::fs::create_dir_all(lock.parent().unwrap()).unwrap();
    std::fs::write(&lock, "").unwrap();

    org.open_all_gates();
    let answer = org.resume();
    let r = resumed_entry(&answer, &id).unwrap_or_else(|| panic!("{answer}"));
    assert_eq!(r["action"], "respawned", "{r}");
    assert!(!lock.exists());
    org.wait_done(&id);
    assert_verified_done(&org, &id);
}

/// A resume pass longer than a lease (many worktrees made, clones handed over) keeps its
/// claims: another resumer meanwhile finds the worker taken, not orphaned, and claims nothing;
/// the first pass then replaces it, once.
#[test]
fn a_resume_pass_longer_than_a_lease_keeps_its_claims() {
    let org = org(&[("core", &[])]);
    let id = org.spawn("core", "hang add the feature", "t-long-pass");
    org.wait_mark(&id, 1, "hanging");
    org.kill_supervisor(&id);
    org.open_all_gates();
    let stall = orch::app::supervisor::LEASE_MS + 8_000;
    let mut slow = org
        .cmd(&["resume", "--json"])
        .env("ORCH_TEST_RESUME_STALL_MS", stall.to_string())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let slow_pid = i64::from(slow.id());
    let claimed_at = poll_until(
        "the slow resume's claim",
        DEADLINE,
        || {
            let w = org.worker(&id);
            (w.supervisor_pid == Some(slow_pid)).then(orch::store::now_ms)
        },
        || org.diag(&id),
    );
    // Past the lease the claim was taken with (plus slack), the pass still standing still.
    poll_until(
        "a lease's time to pass",
        DEADLINE,
        || {
            (orch::store::now_ms() > claimed_at + orch::app::supervisor::LEASE_MS + 2_000)
                .then_some(())
        },
        String::new,
    );
    assert!(
        slow.try_wait().unwrap().is_none(),
        "the pass still stands still"
    );
    let w = org.worker(&id);
    assert_eq!(w.supervisor_pid, Some(slow_pid));
    assert!(supervisor_alive(&w), "the claim was kept: {:?}", w.lease());
    let other = org.resume();
    assert!(
        resumed_entry(&other, &id).is_none(),
        "a second resumer took a worker that is claimed: {other}"
    );
    let out = slow.wait_with_output().unwrap();
    assert!(out.status.success());
    let answer: Value = serde_json::from_slice(&out.stdout).unwrap();
    let r = resumed_entry(&answer, &id).unwrap_or_else(|| panic!("{answer}"));
    assert_eq!(r["action"], "respawned", "{r}");
    org.wait_done(&id);
    assert_verified_done(&org, &id);
    assert_eq!(org.worker(&id).respawns, 1);
    let claims = org
        .events(&id)
        .iter()
        .filter(|e| e.kind == "resume_claimed")
        .count();
    assert_eq!(claims, 1, "{:#?}", org.events(&id));
}

/// An orphan whose program is no longer installed is not replaced: `resume` says so (a "no",
/// naming the program), the worker keeps its milestone, its lock and its respawns, and is
/// free for the resume after the install, which finishes it.
#[test]
fn an_orphan_whose_program_is_gone_is_not_replaced_until_it_is_back() {
    let org = org(&[("core", &[])]);
    let id = org.spawn("core", "hang add the feature", "t-working");
    org.wait_mark(&id, 1, "hanging");
    org.kill_supervisor(&id);
    let yaml = std::fs::read_to_string(&org.config_path).unwrap();
    let gone = yaml.replace("command: [sh,", "command: [orch-it-no-such-agent,");
    assert_ne!(gone, yaml, "the worker command is `sh …`: {yaml}");
    std::fs::write(&org.config_path, &gone).unwrap();

    let out = org.run(&["resume"]);
    assert_eq!(out.status.code(), Some(1), "{}", output_text(&out));
    let text = output_text(&out);
    assert!(
        text.contains("not replaced") && text.contains("runs orch-it-no-such-agent"),
        "{text}"
    );
    let w = org.worker(&id);
    assert_eq!(w.milestone(), Milestone::Working);
    assert_eq!(w.respawns, 0, "no respawn is used up");
    assert_eq!(org.lives(&id), 1, "nothing was started");
    assert!(org.lock_of(&id).is_some(), "the lock stays with its work");
    assert!(!supervisor_alive(&w), "free for the next resume");

    std::fs::write(&org.config_path, &yaml).unwrap();
    org.open_all_gates();
    let answer = org.resume();
    let r = resumed_entry(&answer, &id).unwrap_or_else(|| panic!("{answer}"));
    assert_eq!(r["action"], "respawned", "{r}");
    org.wait_done(&id);
    assert_verified_done(&org, &id);
    assert_eq!(org.worker(&id).respawns, 1);
    assert_no_leftovers(&org);
}

#[test]
fn a_spawner_killed_after_its_lock_transaction_is_resumed() {
    use orch::app::spawn::{SpawnRequest, Spawned, prepare};
    use orch::contract::Contract;
    use orch::forge::local::LocalForge;
    use orch::store::{LockAttempt, now_ms, try_lock_in};

    let org = org(&[("core", &[]), ("sdk", &[])]);
    org.open_all_gates();
    let contract = Contract::load(&org.contract).unwrap();
    let config = &org.config;
    let forge = LocalForge::new(&org.state, config).with_exe(ORCH);
    let mut store = org.store();

    // (B) A spawner that got through `prepare` (lock + record, worktree, prompt) and died
    // before starting the supervisor. While it lives (it is this test process, lease
    // valid), nobody takes its worker.
    let Spawned::Ready(b) = prepare(
        config,
        &contract,
        &org.state,
        &mut store,
        &SpawnRequest {
            repo: "sdk".into(),
            task: "finish the sdk".into(),
            task_id: Some("t-b".into()),
            ..Default::default()
        },
    )
    .unwrap() else {
        panic!("sdk's chain is free")
    };
    // `prepare` in this process points the remote's hook at this test binary: point it back
    // at orch, as `orch spawn` would have.
    forge.ensure_remote(config.repo("sdk").unwrap()).unwrap();
    assert!(Path::new(&b.worktree).join(".git").exists());
    let answer = org.resume();
    assert_eq!(
        answer["resumed"].as_array().unwrap().len(),
        0,
        "a live spawner's worker is not an orphan: {answer}"
    );

    // (A) A spawner that died right after its lock transaction: the remote exists (spawn
    // makes it first), but no worktree, prompt or checkpoint.
    let core = config.repo("core").unwrap();
    let bare = forge.ensure_remote(core).unwrap();
    orch::gitops::ensure_remote(&core.path, "orch", &bare.display().to_string()).unwrap();
    let base = orch::gitops::base_sha(&core.path, "orch", "main").unwrap();
    let (pid, start) = dead_pid();
    let a_id = "core-0badc0de".to_string();
    let now = now_ms();
    let a = ws::WorkerRecord {
        id: a_id.clone(),
        repo: "core".into(),
        task: "finish the core".into(),
        task_id: Some("t-a".into()),
        component: None,
        plan: None,
        progress: orch::milestone::Progress::new(&contract, now),
        branch: format!("orch/{a_id}"),
        base_sha: base,
        worktree: org.state.join(&a_id).join("worktree").display().to_string(),
        remote: "orch".into(),
        day: "2026-01-01".into(),
        supervisor_pid: Some(pid),
        supervisor_start: Some(start),
        lease_until_ms: Some(now + 15_000),
        worker_pid: None,
        worker_running: false,
        exit_code: None,
        respawns: 0,
        resume_note: None,
        created_ms: now,
        updated_ms: now,
        ended_ms: None,
        model: None,
        model_source: None,
        node: None,
        fence: 0,
    };
    store
        .write(|tx| {
            let LockAttempt::Acquired(_) = try_lock_in(
                tx,
                &config.graph,
                "core",
                &a.id,
                orch::lock::HolderKind::Worker,
                Some(&a.task),
                None,
            )?
            else {
                panic!("core's chain is free")
            };
            ws::insert_worker(tx, &a)?;
            ws::add_event(
                tx,
                &a.id,
                "spawned",
                Milestone::Working,
                "task: finish the core",
            )
        })
        .unwrap();
    // (B)'s spawner dies too (its lease has not run out: the dead pid is what tells).
    store
        .write(|tx| {
            tx.execute(
                "UPDATE workers SET supervisor_pid = ?2, supervisor_start = ?3 WHERE id = ?1",
                orch::params![b.id, pid, start],
            )
        })
        .unwrap();
    drop(store);
    assert_eq!(status_of(&org, &a_id)["supervisor_alive"], false);
    assert_eq!(status_of(&org, &b.id)["supervisor_alive"], false);

    let answer = org.resume();
    for id in [&a_id, &b.id] {
        let r = resumed_entry(&answer, id).unwrap_or_else(|| panic!("{id}: {answer}"));
        assert_eq!(r["before"], "WORKING");
        assert_eq!(r["action"], "respawned", "{r}");
        assert!(
            r["detail"].as_str().unwrap().contains("never started"),
            "{r}"
        );
    }
    for id in [&a_id, &b.id] {
        org.wait_done(id);
        assert_verified_done(&org, id);
        let w = org.worker(id);
        assert_eq!(w.respawns, 1);
        assert_eq!(org.lives(id), 1, "exactly one worker ever ran");
        let p = org.prompt(id, 1);
        assert!(
            p.contains("RESUMING as replacement worker 1 of 2: the previous worker ended because it was never started (the spawning process died)"),
            "{p}"
        );
        assert!(
            p.contains("Work so far: no commits on your branch yet."),
            "{p}"
        );
        assert!(orch::checkpoint::path_for(&org.state, &w).exists());
    }
    assert!(
        orch::store::first_conflict(&config.graph, &org.store().lock_history().unwrap()).is_none()
    );
    assert_no_leftovers(&org);
}

#[test]
fn concurrent_resumes_claim_each_orphan_exactly_once() {
    const REPOS: &[(&str, &[&str])] = &[("a", &[]), ("b", &[]), ("c", &[]), ("d", &[]), ("e", &[])];
    let org = org(REPOS);
    let ids: Vec<String> = REPOS
        .iter()
        .map(|(r, _)| org.spawn(r, "hang then finish", &format!("t-{r}")))
        .collect();
    for id in &ids {
        org.wait_mark(id, 1, "hanging");
    }
    for id in &ids {
        org.kill_supervisor(id);
    }
    org.open_all_gates();
    // Eight resumers at once (reaped in turn).
    let late = reaping_late();
    let children: Vec<_> = (0..8)
        .map(|_| {
            org.cmd(&["resume", "--json"])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut claimed: BTreeMap<String, usize> = BTreeMap::new();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        for r in v["resumed"].as_array().unwrap() {
            assert_eq!(r["action"], "respawned", "{r}");
            *claimed
                .entry(r["worker_id"].as_str().unwrap().to_string())
                .or_default() += 1;
        }
    }
    drop(late);
    for id in &ids {
        assert_eq!(claimed.get(id), Some(&1), "{id}: {claimed:?}");
    }
    assert_eq!(claimed.len(), ids.len());
    for id in &ids {
        org.wait_done(id);
        assert_verified_done(&org, id);
    }
    for id in &ids {
        assert_eq!(
            org.count_events(id, "resume_claimed"),
            1,
            "{id} claimed more than once\n{}",
            org.dump()
        );
        assert_eq!(org.count_events(id, "respawn"), 1, "{id}");
        assert_eq!(org.worker(id).respawns, 1, "{id}");
        assert_eq!(org.lives(id), 2, "{id}: exactly one replacement");
    }
    assert!(
        orch::store::first_conflict(&org.config.graph, &org.store().lock_history().unwrap())
            .is_none()
    );
    assert_no_leftovers(&org);
}

#[test]
fn a_worker_that_always_dies_fails_after_max_respawns_keeping_its_lock() {
    let org = org(&[("core", &[])]);
    let id = org.spawn("core", "die at once", "t-die");
    let mut actions = Vec::new();
    while org.worker(&id).milestone() != Milestone::Failed {
        assert!(actions.len() < 5, "{actions:?}\n{}", org.dump());
        org.wait_until("the supervisor to let go", Duration::from_secs(30), || {
            let w = org.worker(&id);
            !supervisor_alive(&w)
        });
        let answer = org.resume();
        if let Some(r) = resumed_entry(&answer, &id) {
            actions.push(r["action"].as_str().unwrap().to_string());
        }
    }
    assert_eq!(actions, ["respawned", "respawned", "failed"]);
    // Each replacement's event says why in a sentence.
    for e in org.events(&id).iter().filter(|e| e.kind == "respawn") {
        assert!(
            e.detail.contains(": the previous worker ended because "),
            "{}",
            e.detail
        );
    }
    let w = org.worker(&id);
    assert_eq!(w.respawns, 2);
    assert_eq!(org.lives(&id), 3, "the first worker and two replacements");
    assert_eq!(org.lock_of(&id).as_deref(), Some("core"), "lock kept");
    assert!(
        w.progress
            .end_reason
            .as_deref()
            .unwrap_or("")
            .contains("respawns exhausted (2 of 2)"),
        "{:?}",
        w.progress.end_reason
    );
    let alerts = org.store().read(|tx| ws::alerts(tx, 0)).unwrap();
    assert!(
        alerts
            .iter()
            .any(|a| a.kind == "respawns_exhausted" && a.worker_id.as_deref() == Some(&id)),
        "{alerts:?}"
    );
    let jsonl = std::fs::read_to_string(org.state.join("alerts.jsonl")).unwrap();
    assert!(jsonl.contains("respawns_exhausted"), "{jsonl}");
    // FAILED is final: nothing more to resume, the lock stays for an operator.
    assert_eq!(org.resume()["resumed"].as_array().unwrap().len(), 0);
    assert_eq!(org.lock_of(&id).as_deref(), Some("core"));
    assert_no_leftovers(&org);
}

/// What a rebuild must preserve of one worker.
#[derive(Debug, Clone, PartialEq)]
struct WorkerView {
    repo: String,
    task_id: Option<String>,
    milestone: String,
    tracked_sha: Option<String>,
    verdict: Option<String>,
    fix_attempts: u32,
    respawns: i64,
    branch: String,
    base_sha: String,
    pushes: Vec<(String, Option<String>)>,
}

fn view(org: &Org) -> (BTreeMap<String, WorkerView>, Vec<(String, String)>) {
    let mut store = org.store();
    let workers = store
        .workers()
        .unwrap()
        .into_iter()
        .map(|w| {
            let pushes = store
                .read(|tx| ws::pushes(tx, &w.id))
                .unwrap()
                .into_iter()
                .map(|p| (p.sha.to_string(), p.verdict.map(|v| v.as_str().to_string())))
                .collect();
            (
                w.id.clone(),
                WorkerView {
                    repo: w.repo.clone(),
                    task_id: w.task_id.clone(),
                    milestone: w.milestone().as_str().into(),
                    tracked_sha: w.progress.tracked_sha.as_ref().map(|s| s.to_string()),
                    verdict: w.progress.verdict.map(|v| v.as_str().to_string()),
                    fix_attempts: w.progress.fix_attempts,
                    respawns: w.respawns,
                    branch: w.branch.clone(),
                    base_sha: w.base_sha.clone(),
                    pushes,
                },
            )
        })
        .collect();
    let locks = store
        .locks()
        .unwrap()
        .into_iter()
        .map(|l| (l.repo, l.holder))
        .collect();
    (workers, locks)
}

fn remove_db(state: &Path) {
    for f in ["orch.db", "orch.db-wal", "orch.db-shm"] {
        let _ = std::fs::remove_file(state.join(f));
    }
}

#[test]
fn a_lost_database_is_rebuilt_from_checkpoints_as_it_was() {
    const REPOS: &[(&str, &[&str])] = &[
        ("done", &[]),
        ("pushed", &[]),
        ("working", &[]),
        ("fixing", &[]),
        ("blocked", &[]),
    ];
    let org = org(REPOS);
    org.open_gate("done");
    org.open_gate("fixing");
    let done = org.spawn("done", "finish it", "t-done");
    let pushed = org.spawn("pushed", "push-hang it", "t-pushed");
    let working = org.spawn("working", "hang in it", "t-working");
    let fixing = org.spawn("fixing", "fix-hang it", "t-fixing");
    let blocked = org.spawn("blocked", "blocked on it", "t-blocked");
    org.wait_done(&done);
    org.wait_mark(&pushed, 1, "pushed");
    org.wait_mark(&working, 1, "hanging");
    org.wait_mark(&fixing, 1, "fixing");
    org.wait_milestone(&fixing, "FIXING_CI", Duration::from_secs(30));
    org.wait_milestone(&blocked, "BLOCKED", Duration::from_secs(30));
    // Kill only once each supervisor has nothing left to write: its verdict is as final as
    // it gets (running behind a closed gate; red) and its checkpoint — written just after
    // the database — says what the database says. A kill between the two is resume's
    // business (tested elsewhere), not what this test compares.
    for (id, verdict) in [
        (&pushed, Some("running")),
        (&working, None),
        (&fixing, Some("red")),
    ] {
        org.wait_until(
            &format!("{id} to settle with verdict {verdict:?}"),
            Duration::from_secs(60),
            || {
                let w = org.worker(id);
                let pushes: Vec<(String, Option<String>)> = org
                    .store()
                    .read(|tx| ws::pushes(tx, id))
                    .unwrap()
                    .into_iter()
                    .map(|p| (p.sha.to_string(), p.verdict.map(|v| v.as_str().to_string())))
                    .collect();
                let cp = orch::checkpoint::read(&orch::checkpoint::path_for(&org.state, &w));
                w.progress.verdict.map(|v| v.as_str()) == verdict
                    && cp.is_ok_and(|cp| {
                        cp.current_milestone == w.milestone().as_str()
                            && cp.tracked_sha.as_deref() == w.progress.tracked_sha.as_deref()
                            && cp.fix_attempts == w.progress.fix_attempts
                            && cp
                                .ci_runs
                                .iter()
                                .map(|c| (c.sha.clone(), c.verdict.clone()))
                                .collect::<Vec<_>>()
                                == pushes
                    })
            },
        );
    }
    // Stop everything: supervisors die, pending CI finishes, nothing touches the database.
    for id in [&pushed, &working, &fixing] {
        org.kill_supervisor(id);
    }
    org.wait_until(
        "the blocked worker's supervisor to end",
        Duration::from_secs(30),
        || !supervisor_alive(&org.worker(&blocked)),
    );
    org.open_gate("pushed");
    org.wait_ci_idle();
    assert_no_leftovers(&org);

    let (before, locks_before) = view(&org);
    assert_eq!(before.len(), 5);
    assert_eq!(before[&done].milestone, "DONE");
    assert_eq!(before[&pushed].milestone, "PUSHED_TO_CI");
    assert_eq!(before[&working].milestone, "WORKING");
    assert_eq!(before[&fixing].milestone, "FIXING_CI");
    assert_eq!(before[&fixing].verdict.as_deref(), Some("red"));
    assert_eq!(before[&blocked].milestone, "BLOCKED");
    assert_eq!(locks_before.len(), 4, "{locks_before:?}");

    // 1. The rebuild alone (library, on a copy of the checkpoint files) gives back exactly
    //    what the database held. CI no longer proves the DONE (the local forge's run history
    //    was in the lost database) but git does: its change landed, and its commit is on the
    //    base branch (checkpoints are evidence, not truth: `checkpoint_trust::` has a DONE
    //    that nothing proves come back PUSHED_TO_CI). Its push's green verdict, a claim of
    //    the file, is not recorded again.
    //    Worktrees must lie where orch makes them, under the state directory: the copies
    //    say where they would be in the copy (a state directory that moved).
    let copy = tempfile::tempdir().unwrap();
    let copy_dir = std::fs::canonicalize(copy.path()).unwrap();
    for e in std::fs::read_dir(&org.state).unwrap().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.ends_with(".checkpoint.yaml") {
            let text = std::fs::read_to_string(e.path()).unwrap();
            let moved = text.replace(
                &org.state.display().to_string(),
                &copy_dir.display().to_string(),
            );
            std::fs::write(copy_dir.join(&name), moved).unwrap();
        }
    }
    let loaded = orch::app::Loaded {
        config: org.config.clone(),
        contract: orch::contract::Contract::load(&org.contract).unwrap(),
        state_dir: copy_dir.clone(),
        config_path: org.config_path.clone(),
        contract_path: org.contract.clone(),
    };
    let r = orch::app::resume::rebuild_from_checkpoints(&loaded).unwrap();
    assert_eq!(
        (r.workers, r.locks),
        (5, 4),
        "{:?} {:?}",
        r.problems,
        r.refused
    );
    assert!(r.problems.is_empty(), "{:?}", r.problems);
    assert!(r.refused.is_empty(), "{:?}", r.refused);
    assert!(r.unproven_done.is_empty(), "{:?}", r.unproven_done);
    let mut copy_store = orch::store::Store::open(&copy_dir).unwrap();
    let mut copy_locks: Vec<(String, String)> = copy_store
        .locks()
        .unwrap()
        .into_iter()
        .map(|l| (l.repo, l.holder))
        .collect();
    copy_locks.sort();
    let mut expected_locks = locks_before.clone();
    expected_locks.sort();
    assert_eq!(copy_locks, expected_locks);
    for w in copy_store.workers().unwrap() {
        let b = before[&w.id].clone();
        let mut b_pushes = b.pushes.clone();
        assert_eq!(w.milestone().as_str(), b.milestone, "{}", w.id);
        assert_eq!(
            w.progress.tracked_sha.as_deref(),
            b.tracked_sha.as_deref(),
            "{}",
            w.id
        );
        assert_eq!(w.respawns, b.respawns, "{}", w.id);
        assert_eq!(w.progress.fix_attempts, b.fix_attempts, "{}", w.id);
        assert_eq!((&w.branch, &w.base_sha), (&b.branch, &b.base_sha));
        let pushes: Vec<(String, Option<String>)> = copy_store
            .read(|tx| ws::pushes(tx, &w.id))
            .unwrap()
            .into_iter()
            .map(|p| (p.sha.to_string(), p.verdict.map(|v| v.as_str().to_string())))
            .collect();
        if w.id == done {
            assert!(
                pushes.iter().all(|p| p.1.as_deref() != Some("green")),
                "{pushes:?}"
            );
            for (mine, theirs) in b_pushes.iter_mut().zip(&pushes) {
                mine.1 = theirs.1.clone();
            }
        }
        assert_eq!(pushes, b_pushes, "{}", w.id);
    }
    drop(copy_store);

    // 2. The real thing: the database is gone; `orch resume --from-checkpoints` rebuilds it
    //    and reconciles.
    remove_db(&org.state);
    let answer = org.resume_with(&["--from-checkpoints"]);
    let rebuilt = &answer["rebuilt"];
    assert_eq!(rebuilt["workers"], 5, "{answer}");
    assert_eq!(rebuilt["locks"], 4, "{answer}");
    assert_eq!(rebuilt["unproven_done"].as_array().unwrap().len(), 0);
    assert_eq!(rebuilt["refused"].as_array().unwrap().len(), 0, "{answer}");
    assert_eq!(rebuilt["moved_aside"], Value::Null);
    assert_eq!(rebuilt["problems"].as_array().unwrap().len(), 0, "{answer}");
    let (after, mut locks_after) = view(&org);
    assert_eq!(
        after.keys().collect::<Vec<_>>(),
        before.keys().collect::<Vec<_>>()
    );
    let resumed = answer["resumed"].as_array().unwrap();
    for (id, b) in &before {
        let a = &after[id];
        assert_eq!(org.count_events(id, "rebuilt"), 1, "{id}");
        match resumed_entry(&answer, id) {
            // Landed: as it was, but for its push's green verdict (the file's claim).
            None if *id == done => assert_eq!(
                WorkerView {
                    pushes: a.pushes.iter().map(|p| (p.0.clone(), None)).collect(),
                    ..a.clone()
                },
                WorkerView {
                    pushes: b.pushes.iter().map(|p| (p.0.clone(), None)).collect(),
                    ..b.clone()
                },
                "{id} was not resumed and must be as it was"
            ),
            None => assert_eq!(a, b, "{id} was not resumed and must be as it was"),
            Some(r) => {
                assert_eq!(r["before"], b.milestone.as_str(), "{id}: {r}");
                let respawned = (r["action"] == "respawned") as i64;
                assert_eq!(a.respawns, b.respawns + respawned, "{id}");
                if respawned == 0 {
                    assert_eq!(a.tracked_sha, b.tracked_sha, "{id}");
                } else if let Some(sha) = &b.tracked_sha {
                    // A replacement may already have pushed its own commit (it starts as soon
                    // as resume hands it over): the rebuilt push is kept in the history.
                    let pushes = org.store().read(|tx| ws::pushes(tx, id)).unwrap();
                    assert!(
                        pushes.iter().any(|p| p.sha.as_str() == sha.as_str()),
                        "{id}: {sha} lost from {pushes:?}"
                    );
                }
                assert_eq!((&a.repo, &a.task_id), (&b.repo, &b.task_id));
            }
        }
    }
    // Orphans only: not the BLOCKED worker, nor the landed DONE.
    assert_eq!(resumed.len(), 3, "{answer}");
    assert!(resumed_entry(&answer, &blocked).is_none());
    assert!(resumed_entry(&answer, &done).is_none());
    assert_eq!(
        resumed_entry(&answer, &working).unwrap()["action"],
        "respawned"
    );
    assert_eq!(
        resumed_entry(&answer, &fixing).unwrap()["action"],
        "respawned"
    );
    // The local forge kept its run history in the lost database: CI of the pushed SHA can no
    // longer be proven from it (never DONE without proof), and its worker died mid-turn: a
    // replacement goes on …
    assert_eq!(
        resumed_entry(&answer, &pushed).unwrap()["action"],
        "respawned"
    );
    locks_after.sort();
    assert_eq!(locks_after, expected_locks, "no lock lost, none doubled");
    assert!(
        orch::store::first_conflict(&org.config.graph, &org.store().lock_history().unwrap())
            .is_none()
    );

    // Reconciliation proceeds: the replacements finish, and the pushed SHA, whose run the
    // forge no longer knows, gets a new one (its ref on the forge has no run: a lost push)
    // and is DONE on that evidence.
    org.open_all_gates();
    org.wait_done(&working);
    org.wait_done(&fixing);
    org.wait_done(&pushed);
    let d = org.worker(&done);
    assert_eq!(d.milestone(), Milestone::Done);
    assert_eq!(
        d.progress.landing.map(|l| l.state),
        Some(orch::milestone::LandState::Landed)
    );
    assert_eq!(org.lock_of(&done), None);
    assert_verified_done(&org, &working);
    assert_verified_done(&org, &fixing);
    assert_verified_done(&org, &pushed);
    assert_eq!(
        org.worker(&pushed).respawns,
        1,
        "its replacement finished it"
    );
}

#[test]
fn an_unreadable_database_is_moved_aside_and_rebuilt() {
    let org = org(&[("core", &[])]);
    let id = org.spawn("core", "hang in it", "t-garbage");
    org.wait_mark(&id, 1, "hanging");
    org.kill_supervisor(&id);
    assert_no_leftovers(&org);
    let db = org.state.join("orch.db");
    let garbage: Vec<u8> = (0..64 * 1024u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(&db, &garbage).unwrap();
    let _ = std::fs::remove_file(org.state.join("orch.db-wal"));
    let _ = std::fs::remove_file(org.state.join("orch.db-shm"));

    // Plain commands refuse it and point at the remedy.
    let out = org.run(&["status"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--from-checkpoints"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let out = org.run(&["resume", "--from-checkpoints"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let moved = text
        .lines()
        .find_map(|l| {
            l.strip_prefix("the unreadable database was moved to ")
                .and_then(|r| r.strip_suffix(" (not deleted)"))
        })
        .unwrap_or_else(|| panic!("no moved-aside message: {text}"));
    let moved = Path::new(moved);
    assert!(moved.starts_with(&org.state), "{}", moved.display());
    assert_eq!(std::fs::read(moved).unwrap(), garbage, "moved, not altered");
    assert!(text.contains("rebuilt 1 worker(s) and 1 lock(s)"), "{text}");
    let w = org.worker(&id);
    assert_eq!(w.respawns, 1, "{text}");
    assert_eq!(org.lock_of(&id).as_deref(), Some("core"));
    org.open_all_gates();
    org.wait_done(&id);
    assert_verified_done(&org, &id);
}

#[test]
fn a_push_that_never_got_a_ci_run_goes_to_a_replacement() {
    // The worker's push lands but its post-receive hook never runs (what a kill inside
    // `git push` does on the local forge). The local forge would start the lost run after
    // `lost_hook_grace`; set far beyond the test, no CI run will ever exist for that commit,
    // as on a forge whose push event was lost for good. `start_timeout` is long enough that
    // the first resume, on a loaded machine, still polls before it.
    let org = Org::new(
        Spec::resumable(&[("core", &[])])
            .start_timeout("12s")
            .lost_hook_grace("1h"),
    );
    org.open_all_gates();
    let id = org.spawn("core", "nohook-push-hang add the feature", "t-norun");
    org.wait_mark(&id, 1, "pushed");
    org.kill_supervisor(&id);

    // The unreported push is found; its worker died mid-turn, so a replacement goes on at
    // once (no run will come for that push: the replacement's own push gets one).
    let answer = org.resume();
    let r = resumed_entry(&answer, &id).unwrap_or_else(|| panic!("{answer}"));
    assert_eq!(
        (&r["before"], &r["after"]),
        (&"WORKING".into(), &"PUSHED_TO_CI".into())
    );
    assert_eq!(r["action"], "respawned", "{r}");
    let lost = org.worker(&id).progress.tracked_sha.unwrap();
    org.wait_done(&id);
    assert_verified_done(&org, &id);
    let w = org.worker(&id);
    assert_ne!(
        w.progress.tracked_sha.as_ref(),
        Some(&lost),
        "the replacement pushed again"
    );
    assert!(org.prompt(&id, 2).contains(&short(&lost).to_string()));
    assert_eq!(w.respawns, 1);
    assert_no_leftovers(&org);
}

#[test]
fn git_locks_left_by_a_killed_worker_do_not_stop_its_replacement() {
    let org = org(&[("core", &[])]);
    org.open_all_gates();
    let id = org.spawn("core", "lock-hang add the feature", "t-locks");
    org.wait_mark(&id, 1, "hanging");
    org.kill_supervisor(&id);
    let answer = org.resume();
    assert_eq!(resumed_entry(&answer, &id).unwrap()["action"], "respawned");
    org.wait_done(&id);
    assert_verified_done(&org, &id);
    assert_eq!(org.lives(&id), 2);
    assert_eq!(org.worker(&id).respawns, 1);
    assert_no_leftovers(&org);
}

#[test]
fn a_half_made_worktree_is_set_aside_and_made_again() {
    // What a spawner killed inside `git worktree add` leaves: the worktree's `.git` file
    // points at a git directory that has no HEAD yet.
    let org = org(&[("core", &[])]);
    org.open_all_gates();
    let id = org.spawn("core", "hang add the feature", "t-halfmade");
    org.wait_mark(&id, 1, "hanging");
    org.kill_supervisor(&id);
    let w = org.worker(&id);
    let wt = Path::new(&w.worktree);
    let gitdir = std::fs::read_to_string(wt.join(".git")).unwrap();
    let gitdir = Path::new(gitdir.trim().strip_prefix("gitdir:").unwrap().trim());
    std::fs::remove_file(gitdir.join("HEAD")).unwrap();
    std::fs::remove_file(gitdir.join("index")).unwrap();

    let answer = org.resume();
    assert_eq!(resumed_entry(&answer, &id).unwrap()["action"], "respawned");
    org.wait_done(&id);
    assert_verified_done(&org, &id);
    let aside: Vec<_> = std::fs::read_dir(wt.parent().unwrap())
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("worktree.unusable-")
        })
        .collect();
    assert_eq!(aside.len(), 1, "the unusable worktree is kept aside");
    // The committed work of the first life was on the branch and is still there.
    let log = std::process::Command::new("git")
        .args(["-C", &w.worktree, "log", "--format=%s"])
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&log.stdout);
    assert!(log.contains("status wip (life 1)"), "{log}");
    assert_no_leftovers(&org);
}

#[test]
fn a_config_lock_left_by_a_killed_spawner_does_not_stop_later_spawns() {
    // A spawner killed while git held the clone's config lock (set_upstream) leaves
    // `config.lock` behind; every later spawn on that repository writes the config too.
    let org = org(&[("core", &[])]);
    org.open_all_gates();
    let first = org.spawn("core", "finish it", "t-first");
    org.wait_done(&first);
    let lock = org.root.join("repos/core/.git/config.lock");
    let f = std::fs::File::create(&lock).unwrap();
    f.set_modified(std::time::SystemTime::now() - Duration::from_secs(60))
        .unwrap();
    drop(f);
    let id = org.spawn("core", "finish it again", "t-second");
    org.wait_done(&id);
    assert_verified_done(&org, &id);
    assert!(!lock.exists(), "the stale lock was removed");
    assert_no_leftovers(&org);
}

#[test]
fn a_checkpoint_its_writer_died_before_writing_is_brought_up_to_date() {
    // A supervisor killed right after committing DONE never writes the DONE checkpoint; a
    // DONE worker is never resumed, so the next resume pass must write it.
    let org = org(&[("core", &[])]);
    org.open_all_gates();
    let id = org.spawn("core", "finish it", "t-stale-checkpoint");
    org.wait_done(&id);
    let w = org.worker(&id);
    let path = orch::checkpoint::path_for(&org.state, &w);
    let mut cp = orch::checkpoint::read(&path).unwrap();
    assert_eq!(cp.current_milestone, "DONE");
    // What the file said before the DONE commit.
    cp.current_milestone = "PUSHED_TO_CI".into();
    cp.lock_held = true;
    orch::checkpoint::write(&org.state, &w, &cp).unwrap();
    let f = std::fs::File::options().append(true).open(&path).unwrap();
    f.set_modified(std::time::UNIX_EPOCH + Duration::from_millis(w.updated_ms as u64 - 1000))
        .unwrap();
    drop(f);

    assert_eq!(org.resume()["resumed"].as_array().unwrap().len(), 0);
    let cp = orch::checkpoint::read(&path).unwrap();
    assert_eq!(cp.current_milestone, "DONE");
    assert!(!cp.lock_held);
    assert_eq!(cp.tracked_sha.as_deref(), w.progress.tracked_sha.as_deref());
}

#[test]
fn a_ref_lock_left_by_a_killed_fetch_does_not_block_push_verification() {
    // Every worktree of a clone shares its remote-tracking refs; a fetch killed half-way (a
    // supervisor verifying a push, a resumer looking for unreported pushes) leaves a ref lock
    // that would make every later verification fetch fail.
    let org = org(&[("core", &[])]);
    org.open_all_gates();
    let id = org.spawn("core", "fetch-lock then finish", "t-fetch-lock");
    org.wait_done(&id);
    assert_verified_done(&org, &id);
    assert_eq!(org.count_events(&id, "violation"), 0, "{}", org.dump());
}

/// A supervisor stopped past its lease (SIGSTOP), its worker taken over by `orch resume`, then
/// continued (SIGCONT): it sees its lease gone and stops only what it started — never the
/// replacement's worker, which lives in a cgroup of its own life.
#[test]
fn a_stale_supervisor_continued_after_a_takeover_leaves_the_replacement_alone() {
    use crate::support::{RepoSpec, poll};
    let mut spec = Spec::local("idle.sh");
    spec = spec.repo(RepoSpec::new("core"));
    let org = Org::new(spec);
    let id = org.spawn_detached("core", "idle");
    let first = org.worker(&id);
    let stale = first.supervisor_pid.expect("a supervisor") as i32;
    let old_worker = first.worker_pid.expect("a worker") as i32;
    // SAFETY: signals to a process this test started (through orch).
    unsafe { libc::kill(stale, libc::SIGSTOP) };
    // Its lease lapses (15 s); then a resume takes the worker over.
    let resumed = poll(Duration::from_secs(60), || {
        let v = org.resume();
        resumed_entry(&v, &id).is_some().then_some(v)
    });
    let Some(_) = resumed else {
        unsafe { libc::kill(stale, libc::SIGCONT) };
        panic!("no resume took the worker over\n{}", org.diag(&id));
    };
    let replacement = poll(Duration::from_secs(60), || {
        let w = org.worker(&id);
        (w.supervisor_pid != Some(stale as i64) && w.worker_running && w.worker_pid.is_some())
            .then_some(w)
    })
    .unwrap_or_else(|| panic!("no replacement started\n{}", org.diag(&id)));
    let new_worker = replacement.worker_pid.unwrap() as i32;
    assert_ne!(new_worker, old_worker);
    // The replacement's worker command (`sleep`, under its guard `new_worker`): what a cgroup
    // kill would end (the guard itself sits outside the cgroup).
    let command = poll(Duration::from_secs(30), || {
        crate::support::processes()
            .into_iter()
            .find(|p| p.2 == new_worker && p.1 != 'Z')
            .map(|p| p.0)
    })
    .unwrap_or_else(|| panic!("no worker command under {new_worker}\n{}", org.diag(&id)));
    // What the replacement holds before the stale supervisor runs again: the lease's fencing
    // token moved on with the takeover.
    let taken = org.worker(&id);
    assert!(
        taken.fence > first.fence,
        "{} -> {}",
        first.fence,
        taken.fence
    );
    let events_before = org.events(&id).len();
    unsafe { libc::kill(stale, libc::SIGCONT) };
    // The stale supervisor notices its lease is gone and stops.
    let gone = poll(Duration::from_secs(60), || {
        (!orch::process::process_alive(stale, None)).then_some(())
    });
    assert!(gone.is_some(), "the stale supervisor {stale} did not stop");
    assert!(
        orch::process::process_alive(command, None),
        "the stale supervisor killed the replacement's worker command {command}\n{}",
        org.diag(&id)
    );
    let w = org.worker(&id);
    assert_eq!(w.milestone(), Milestone::Working, "{}", org.diag(&id));
    assert_eq!(w.supervisor_pid, replacement.supervisor_pid);
    // Fenced: the stale supervisor wrote nothing once continued — no event, no state, the
    // lease and its token the replacement's.
    assert_eq!(w.fence, taken.fence, "{}", org.diag(&id));
    assert_eq!(w.progress.milestone, taken.progress.milestone);
    let events = org.events(&id);
    assert_eq!(
        events.len(),
        events_before,
        "written after the takeover: {:?}\n{}",
        &events[events_before.min(events.len())..],
        org.diag(&id)
    );
    let _ = org.run(&["cancel", &id, "--reason", "test over"]);
}

/// A supervisor stopped (SIGSTOP) inside a write transaction keeps SQLite's write lock; once its
/// lease has lapsed, `orch resume` ends it and takes its worker over — it does not give up
/// "busy" behind a process that will never continue on its own.
#[test]
fn a_supervisor_stopped_inside_a_write_is_ended_by_resume_once_its_lease_lapsed() {
    use crate::support::{RepoSpec, poll};
    let mut org = Org::new(Spec::local("idle.sh").repo(RepoSpec::new("core")));
    // Each lease renewal (every 5 s) holds its write transaction open for 3 s.
    org.set_env("ORCH_TEST_HOLD_RENEWAL_MS", "3000");
    let id = org.spawn_detached("core", "idle");
    let stale = org.worker(&id).supervisor_pid.expect("a supervisor") as i32;
    let db = org.state.join("orch.db");
    let inside = poll(Duration::from_secs(30), || {
        orch::store::health::writers(&db)
            .contains(&stale)
            .then_some(())
    });
    assert!(inside.is_some(), "the supervisor never held the write lock");
    // SAFETY: a signal to a process this test started (through orch).
    unsafe { libc::kill(stale, libc::SIGSTOP) };
    let held = orch::store::health::writers(&db).contains(&stale);
    if !held {
        // Its transaction ended between the look and the stop: let it go on and look again.
        unsafe { libc::kill(stale, libc::SIGCONT) };
        panic!("stopped just outside its transaction; the test needs the stop inside one");
    }
    // resume waits out the lease, ends the stopped writer, then takes the worker over.
    let v = org.resume();
    assert!(
        crate::support::resumed_entry(&v, &id).is_some(),
        "{v}\n{}",
        org.diag(&id)
    );
    assert!(
        !orch::process::process_alive(stale, None),
        "the stopped supervisor {stale} still exists"
    );
    let w = poll(Duration::from_secs(60), || {
        let w = org.worker(&id);
        (w.supervisor_pid != Some(stale as i64) && w.worker_running).then_some(w)
    })
    .unwrap_or_else(|| panic!("no replacement\n{}", org.diag(&id)));
    assert_eq!(w.milestone(), Milestone::Working);
    let _ = org.run(&["cancel", &id, "--reason", "test over"]);
}
