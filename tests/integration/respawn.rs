//! `orch respawn`: an operator gives a worker that waits for one another go.

use crate::support::{DEADLINE, Org, RepoSpec, Spec, output_text, poll_until};
use orch::milestone::Milestone;
use serde_json::Value;

#[test]
fn a_blocked_permission_worker_respawned_with_a_note_finishes() {
    let org = Org::new(
        Spec::local("denied_then_granted.sh")
            .repo(RepoSpec::new("alpha").standard_ci("test -f feature.txt")),
    );
    let id = org.spawn_detached("alpha", "push the feature");
    org.wait_milestone(&id, "BLOCKED_PERMISSION", DEADLINE);
    org.wait_supervisor_gone(&id);
    std::fs::write(org.out.join(format!("granted-{id}")), "").unwrap();
    let out = org.run(&[
        "respawn",
        &id,
        "--note",
        "git push is allowed now",
        "--by",
        "ops",
    ]);
    assert!(out.status.success(), "{}", output_text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("continues in WORKING"),
        "{}",
        output_text(&out)
    );
    org.wait_done(&id);
    let w = org.worker(&id);
    assert_eq!(w.progress.milestone, Milestone::Done, "{}", org.diag(&id));
    assert!(
        org.transitions(&id)
            .contains(&("BLOCKED_PERMISSION".to_string(), "WORKING".to_string())),
        "{:?}",
        org.transitions(&id)
    );
    let prompt = std::fs::read_to_string(org.state.join(&id).join("prompt.md")).unwrap();
    assert!(prompt.contains("git push is allowed now"), "{prompt}");
    // A DONE worker is not respawned.
    let again = org.run(&["respawn", &id]);
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("is DONE"),
        "{}",
        output_text(&again)
    );
}

/// `orch respawn` of a FAILED worker (a WORKING timeout: it went quiet) hands its task to a
/// new worker told its checkpoint, the chain lock handed over in the new worker's lock
/// transaction; the old worker's task goes once.
#[test]
fn a_failed_worker_is_reassigned_with_its_checkpoint_in_the_new_prompt() {
    let mut spec = Spec::local("reassign_worker.sh")
        .repo(RepoSpec::new("alpha"))
        .timeout("WORKING", "3s", "2s");
    spec.progress_window = Some("1s".into());
    let org = Org::new(spec);
    let id = org.spawn_detached("alpha", "the feature [stall]");
    org.wait_milestone(&id, "FAILED", DEADLINE);
    org.wait_supervisor_gone(&id);
    // The contract's WORKING timeout escalates: FAILED keeps the lock for an operator.
    assert_eq!(org.locks_of(&id), vec!["alpha".to_string()]);
    let cp = org.checkpoint(&id);
    assert_eq!(cp.commits.len(), 1, "{cp:?}");
    let out = org.run(&[
        "respawn",
        &id,
        "--note",
        "the stall is understood",
        "--by",
        "ops",
        "--json",
    ]);
    assert!(out.status.success(), "{}", output_text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let new = v["new_worker"].as_str().expect("a new worker").to_string();
    assert_ne!(new, id);
    org.wait_done(&new);
    assert_eq!(
        org.worker(&new).progress.milestone,
        Milestone::Done,
        "{}",
        org.diag(&new)
    );
    // What the new worker got on its stdin: the previous worker's checkpoint.
    let prompt = std::fs::read_to_string(org.out.join(format!("prompt-{new}.txt"))).unwrap();
    for needle in [
        format!("REASSIGNED: you take this task over from worker {id} (FAILED: timeout)"),
        orch::sha::short(&cp.commits[0]).to_string(),
        "files modified: stall.txt".to_string(),
        cp.context_summary.clone(),
        "An operator (ops) says: the stall is understood".to_string(),
    ] {
        assert!(prompt.contains(&needle), "{needle:?} not in:\n{prompt}");
    }
    // The rest of the handoff, in the file the prompt names: the limits, and the known issue
    // on its chain (the old worker's timeout).
    assert!(prompt.contains("Context: $ORCH_HANDOFF"), "{prompt}");
    let handoff = std::fs::read_to_string(org.state.join(&new).join("handoff.md")).unwrap();
    assert!(
        handoff.contains("LIMITS: WORKING 3s")
            && handoff.contains("KNOWN ISSUES")
            && handoff.contains("critical timeout on alpha"),
        "{handoff}"
    );
    // The lock went from the old worker to the new one in one transaction, then DONE freed it.
    let handed: Vec<_> = org
        .store()
        .lock_history()
        .unwrap()
        .into_iter()
        .filter(|e| e.holder == id && e.action == "release")
        .map(|e| e.reason)
        .collect();
    assert_eq!(handed, vec![Some(format!("handed over to worker {new}"))]);
    assert!(org.locks_of(&id).is_empty() && org.locks_of(&new).is_empty());
    assert_eq!(org.count_events(&id, "reassigned"), 1);
    // Its task went once.
    let again = org.run(&["respawn", &id]);
    assert_eq!(again.status.code(), Some(1), "{}", output_text(&again));
    assert!(
        String::from_utf8_lossy(&again.stderr).contains(&format!("reassigned to worker {new}")),
        "{}",
        output_text(&again)
    );
}

/// A life an operator's respawn starts is a replacement, and its environment says which
/// (`ORCH_REPLACEMENT`: 0 for the task's first worker, n for its n-th replacement) — before,
/// a respawned BLOCKED worker was told 0, as if it were the first. The crash budget
/// (`worker.max_respawns`, `respawns`) is not spent by an operator's respawn.
#[test]
fn a_respawned_blocked_worker_is_numbered_as_a_replacement() {
    let org = Org::new(Spec::resumable(&[("core", &[])]));
    org.open_gate("core");
    let id = org.spawn("core", "blocked on a credential", "t-blocked");
    org.wait_milestone(&id, "BLOCKED", DEADLINE);
    org.wait_supervisor_gone(&id);
    let out = org.run(&["respawn", &id, "--note", "the credential is in place"]);
    assert!(out.status.success(), "{}", output_text(&out));
    org.wait_done(&id);
    // Where each life stood (ORCH_MILESTONE, ORCH_REPLACEMENT), as it wrote it down.
    let stands = |life: u32| {
        std::fs::read_to_string(org.ctl.join("prompts").join(format!("{id}.{life}.stands")))
            .unwrap_or_else(|e| panic!("life {life} of {id}: {e}\n{}", org.diag(&id)))
    };
    assert_eq!(stands(1).trim(), "WORKING 0");
    assert_eq!(stands(2).trim(), "WORKING 1", "{}", org.diag(&id));
    let told = org.prompt(&id, 2);
    assert!(
        told.contains("RESUMING as replacement worker 1 of"),
        "{told}"
    );
    let w = org.worker(&id);
    assert_eq!(w.respawns, 0, "no crash replacement was spent");
    assert_eq!(w.progress.respawned, 1);
}

/// The scripted repository's CI: `test` waits for `gate` to exist, then wants feature.txt.
fn gated_ci(gate: &std::path::Path) -> RepoSpec {
    RepoSpec::new("alpha").standard_ci(&format!(
        "while [ ! -e '{}' ]; do sleep 0.05; done; test -f feature.txt",
        gate.display()
    ))
}

/// A FIXING_CI timeout (3 s) that does `on_timeout`, after a worker that pushed, said
/// FIXING_CI at once and went quiet (`reassign_worker.sh`, `[stall-fixing]`).
fn stalled_fixing(repo: RepoSpec, on_timeout: &str) -> Org {
    let mut spec = Spec::local("reassign_worker.sh").repo(repo).contract_key(
        "FIXING_CI",
        &format!("{{ timeout: 3s, warning_at: 2s, on_timeout: {on_timeout} }}"),
    );
    spec.progress_window = Some("1s".into());
    Org::new(spec)
}

/// A timeout that reassigns (`on_timeout: reassign`, as a wave's critical path does) says so
/// in its critical alert: the task and chain lock go to a new worker — before, the alert said
/// orch "keeps the lock until an operator acts" beside the `timeout_reassign` one.
#[test]
fn a_timeout_that_reassigns_says_where_the_task_and_lock_went() {
    let org = stalled_fixing(
        RepoSpec::new("alpha").standard_ci("test -f feature.txt"),
        "reassign",
    );
    let first = org.spawn_detached("alpha", "the feature [stall-fixing]");
    let second = poll_until(
        "the stalled worker's task to be reassigned",
        DEADLINE,
        || {
            org.workers()
                .into_iter()
                .find(|w| w.id != first)
                .map(|w| w.id)
        },
        || org.diag(&first),
    );
    org.wait_done(&second);
    let failed: Vec<Value> = org
        .alerts(&first)
        .into_iter()
        .filter(|a| a["kind"] == "timeout")
        .collect();
    assert_eq!(failed.len(), 1, "{failed:?}\n{}", org.diag(&first));
    let message = failed[0]["message"].as_str().unwrap();
    assert!(
        message.contains("hands its task and chain lock to a new worker")
            && !message.contains("keeps the lock until an operator acts"),
        "{message}"
    );
}

/// A FAILED worker's task reassigned by an operator after CI decided its last push (red, as
/// `orch ci status` recorded it): the new worker's REASSIGNED summary says red, as the line
/// after it does — before, it said "CI running", the verdict the FAILED worker had when it
/// stopped, on the line above "last CI: … red".
#[test]
fn a_reassigned_workers_summary_says_what_ci_said_after_it_ended() {
    let gate = tempfile::tempdir().unwrap();
    let open = gate.path().join("open");
    let org = stalled_fixing(gated_ci(&open), "escalate");
    let first = org.spawn_detached("alpha", "the feature [stall-fixing]");
    org.wait_milestone(&first, "FAILED", DEADLINE);
    org.wait_supervisor_gone(&first);
    assert_ne!(
        org.worker(&first).progress.verdict.map(|v| v.as_str()),
        Some("red"),
        "CI decided before the worker stopped: {}",
        org.diag(&first)
    );
    // CI decides its push after it stopped (red: no feature.txt), and someone asks.
    let stalled = std::fs::read_to_string(org.out.join(format!("stalled-{first}"))).unwrap();
    std::fs::write(&open, "").unwrap();
    let asked = org.run(&[
        "ci",
        "status",
        "--repo",
        "alpha",
        "--sha",
        stalled.trim(),
        "--wait",
        "--timeout",
        "60s",
    ]);
    assert!(
        String::from_utf8_lossy(&asked.stdout).contains("red"),
        "{}",
        output_text(&asked)
    );
    let out = org.run(&["respawn", &first, "--by", "ops", "--json"]);
    assert!(out.status.success(), "{}", output_text(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let second = v["new_worker"].as_str().expect("a new worker").to_string();
    org.wait_done(&second);
    let prompt = std::fs::read_to_string(org.out.join(format!("prompt-{second}.txt"))).unwrap();
    let line = |head: &str| {
        prompt
            .lines()
            .find(|l| l.starts_with(head))
            .unwrap_or_else(|| panic!("no {head:?} in:\n{prompt}"))
            .to_string()
    };
    assert!(
        line("- last CI: ").ends_with("red (failed: test)"),
        "{prompt}"
    );
    let summary = line("- summary: ");
    assert!(
        summary.contains("CI red (failing: test)"),
        "the summary contradicts the last CI: {prompt}"
    );
}

/// A BLOCKED worker whose chain lock an operator released goes on only with its chain lock
/// again, taken in the respawn's claim: refused while a worker on a dependent holds the chain
/// (nothing started, no lock taken), respawned once that worker is gone — and it holds its
/// lock while it works and when it blocks again.
#[test]
fn a_respawn_takes_the_chain_lock_again_or_refuses() {
    let org = Org::new(
        Spec::local("wave_worker.sh")
            .repo(RepoSpec::new("core"))
            .repo(RepoSpec::new("vm").deps(&["core"])),
    );
    let core = org.spawn_detached("core", "core [fail]");
    org.wait_milestone(&core, "BLOCKED", DEADLINE);
    org.wait_supervisor_gone(&core);
    let out = org.run(&["release", &core, "--force", "--reason", "r", "--by", "ops"]);
    assert!(out.status.success(), "{}", output_text(&out));
    let vm = org.spawn_detached("vm", "vm [fail]");
    org.wait_milestone(&vm, "BLOCKED", DEADLINE);
    org.wait_supervisor_gone(&vm);
    assert_eq!(org.locks_of(&vm), vec!["vm".to_string()]);

    let out = org.run(&["respawn", &core, "--by", "ops"]);
    assert_eq!(out.status.code(), Some(1), "{}", output_text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("{core} not respawned")) && err.contains(&vm),
        "{}",
        output_text(&out)
    );
    let w = org.worker(&core);
    assert_eq!(w.milestone(), Milestone::Blocked, "{}", org.diag(&core));
    assert!(!w.supervised(orch::store::now_ms()));
    assert!(org.locks_of(&core).is_empty());

    let out = org.run(&["cancel", &vm]);
    assert!(out.status.success(), "{}", output_text(&out));
    let out = org.run(&["respawn", &core, "--by", "ops"]);
    assert!(out.status.success(), "{}", output_text(&out));
    // Held from the claim on: through its work and its BLOCKED again.
    assert_eq!(org.locks_of(&core), vec!["core".to_string()]);
    let taken: Vec<_> = org
        .store()
        .lock_history()
        .unwrap()
        .into_iter()
        .filter(|e| e.holder == core && e.action == "acquire")
        .map(|e| e.reason.unwrap_or_default())
        .collect();
    assert_eq!(taken.len(), 2, "{taken:?}");
    assert!(taken[1].contains("respawned by ops"), "{taken:?}");
    org.wait_until("core to block again", DEADLINE, || {
        org.transitions(&core)
            .iter()
            .filter(|t| *t == &("WORKING".to_string(), "BLOCKED".to_string()))
            .count()
            == 2
    });
    org.wait_supervisor_gone(&core);
    assert_eq!(org.locks_of(&core), vec!["core".to_string()]);
}

/// `orch resume` (run by every spawn too) replaces an orphan only with its chain lock: one
/// whose lock an operator released while it ran, whose supervisor then died, is left alone
/// while a worker on a dependent holds the chain, and resumed — its lock taken again in its claim — once the chain
/// is free.
#[test]
fn an_orphan_without_its_lock_is_resumed_only_with_its_chain_lock_again() {
    let org = Org::new(
        Spec::local("idle.sh")
            .repo(RepoSpec::new("core"))
            .repo(RepoSpec::new("vm").deps(&["core"])),
    );
    let core = org.spawn_detached("core", "idle");
    org.wait_until("core's worker to run", DEADLINE, || {
        org.worker(&core).worker_running
    });
    // Its lock released while it ran, as an orch before `orch release --force` refused that
    // did (the release written through the store, history and all).
    let released = org
        .store()
        .write(|tx| orch::store::release_in(tx, &core, Some("forced: r"), Some("ops")))
        .unwrap();
    assert!(released.is_some());
    // The chain is free for vm now (the released worker still runs until it is stopped).
    let vm = org.spawn_detached("vm", "idle");
    org.kill_supervisor(&core);

    org.resume();
    let w = org.worker(&core);
    assert!(!w.supervised(orch::store::now_ms()), "{}", org.diag(&core));
    assert!(org.locks_of(&core).is_empty());
    assert_eq!(org.locks_of(&vm), vec!["vm".to_string()]);

    let out = org.run(&["cancel", &vm]);
    assert!(out.status.success(), "{}", output_text(&out));
    org.resume();
    assert_eq!(org.locks_of(&core), vec!["core".to_string()]);
    org.wait_until("core resumed", DEADLINE, || {
        org.worker(&core).supervised(orch::store::now_ms())
    });
    let out = org.run(&["cancel", &core]);
    assert!(out.status.success(), "{}", output_text(&out));
}
