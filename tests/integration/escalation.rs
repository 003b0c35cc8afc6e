//! Escalation as the contract writes it: a warning at `recoverable.escalate_after` failed fix
//! attempts, `timeouts.default_worker_timeout` capping a worker's whole life (across
//! respawns, its clock frozen while it waits), and a BLOCKED report that pauses the worker at
//! once (`blocking: pause_and_escalate`) until `orch respawn` continues it.

use crate::support::sampler::{Sampler, with_env};
use crate::support::{DEADLINE, Org, RepoSpec, Spec, output_text, poll_until};
use orch::milestone::Milestone;
use std::time::Duration;

#[test]
fn the_third_failed_fix_attempt_raises_one_warning_naming_the_attempts_and_jobs() {
    let org = Org::new(
        Spec::local("red_again.sh").repo(RepoSpec::new("alpha").standard_ci("test -f fixed")),
    );
    let id = org.spawn_detached("alpha", "never green");
    org.wait_milestone(&id, "BLOCKED", Duration::from_secs(120));
    let shas: Vec<String> = std::fs::read_to_string(org.out.join(format!("shas-{id}")))
        .unwrap()
        .lines()
        .map(|l| l[..10].to_string())
        .collect();
    assert_eq!(shas.len(), 5, "{shas:?}");
    let escalated: Vec<_> = org
        .alerts(&id)
        .into_iter()
        .filter(|a| a["kind"] == "fix_attempts_escalated")
        .collect();
    assert_eq!(escalated.len(), 1, "once per worker: {escalated:?}");
    assert_eq!(escalated[0]["severity"], "warning");
    let msg = escalated[0]["message"].as_str().unwrap();
    assert!(
        msg.contains("3 fix attempts failed (escalate_after 3)"),
        "{msg}"
    );
    // The first push's red is no fix attempt; tries 2–4 are attempts 1–3; the 4th attempt
    // (try 5) came after the warning.
    for (n, sha) in shas.iter().enumerate().take(4).skip(1) {
        let named = format!("attempt {n}: {sha} red: test");
        assert!(msg.contains(&named), "{named} in {msg}");
    }
    assert!(!msg.contains(&shas[0]) && !msg.contains(&shas[4]), "{msg}");
    // Not FAILED: the worker went on fixing (five entries into FIXING_CI, none past the limit).
    let w = org.worker(&id);
    assert_eq!(w.progress.fix_attempts, 5, "{}", org.diag(&id));
    assert!(
        !org.alerts(&id)
            .iter()
            .any(|a| a["kind"] == "attempts_exhausted"),
        "{}",
        org.diag(&id)
    );
}

/// FIXING_CI's `on_timeout: escalate_after_max_attempts` (timeout per fix attempt,
/// `max_attempts: 5`): a fix attempt that runs out of time is one failed attempt — the worker
/// goes on, the next attempt on a fresh clock — and the worker is FAILED (`attempts_exhausted`,
/// lock kept) only after the fifth. Before, the first timed-out attempt made it FAILED, as a
/// plain `escalate` does.
#[test]
fn a_timed_out_fix_attempt_counts_as_one_of_the_five() {
    let mut spec = Spec::local("fix_stalls.sh")
        .repo(RepoSpec::new("alpha").standard_ci("test -f fixed"))
        .timeout("FIXING_CI", "3s", "2s");
    spec.progress_window = Some("1s".into());
    let org = Org::new(spec);
    let id = org.spawn_detached("alpha", "a fix that never comes");
    // The first attempt times out (≥ 3 s after FIXING_CI); the worker is still fixing.
    let w = poll_until(
        "the first timed-out fix attempt to be counted",
        DEADLINE,
        || {
            let w = org.worker(&id);
            assert_ne!(
                w.progress.milestone,
                Milestone::Failed,
                "FAILED at a timed-out fix attempt: {:?}\n{}",
                w.progress.end_reason,
                org.diag(&id)
            );
            (w.progress.fix_attempts >= 2).then_some(w)
        },
        || org.diag(&id),
    );
    assert_eq!(
        w.progress.milestone,
        Milestone::FixingCi,
        "{}",
        org.diag(&id)
    );
    assert!(w.worker_running, "the worker goes on: {}", org.diag(&id));
    let timed_out: Vec<_> = org
        .alerts(&id)
        .into_iter()
        .filter(|a| a["kind"] == "fix_attempt_timed_out")
        .collect();
    assert!(
        timed_out.first().is_some_and(|a| a["message"]
            .as_str()
            .unwrap()
            .contains("fix attempt 1/5 timed out")),
        "{timed_out:?}"
    );
    // Four more run out: FAILED after the fifth failed attempt, the lock kept.
    let w = org.wait_milestone(&id, "FAILED", DEADLINE);
    assert_eq!(w.progress.fix_attempts, 6, "{}", org.diag(&id));
    assert!(
        w.progress
            .end_reason
            .as_deref()
            .is_some_and(|r| r.contains("FIXING_CI attempts exhausted (5)")),
        "{:?}",
        w.progress.end_reason
    );
    assert!(
        org.alerts(&id)
            .iter()
            .any(|a| a["kind"] == "attempts_exhausted"),
        "{}",
        org.diag(&id)
    );
    assert_eq!(org.locks_of(&id), vec!["alpha".to_string()]);
}

/// The worker's processes: everything carrying its id in its environment.
fn worker_processes(id: &str) -> Vec<i32> {
    with_env(&format!("ORCH_WORKER_ID={id}"))
}

fn at_ms_of_transition(org: &Org, id: &str, to: &str, nth: usize) -> i64 {
    org.events(id)
        .into_iter()
        .filter(|e| e.kind == "transition" && e.milestone == to)
        .nth(nth)
        .unwrap_or_else(|| panic!("transition #{nth} to {to}\n{}", org.diag(id)))
        .at_ms
}

#[test]
fn a_blocked_report_stops_the_worker_within_a_second_and_respawn_continues_it() {
    let org = Org::new(
        Spec::local("blocked_runs_on.sh")
            .repo(RepoSpec::new("alpha").standard_ci("test -f feature.txt")),
    );
    let id = org.spawn_detached("alpha", "needs credentials");
    let find = id.clone();
    let sampler = Sampler::start(move || worker_processes(&find));
    org.wait_milestone(&id, "BLOCKED", DEADLINE);
    let blocked_at = at_ms_of_transition(&org, &id, "BLOCKED", 0);
    // Polled with a one-second deadline from the moment BLOCKED was recorded.
    let left = (blocked_at + 1000 - orch::store::now_ms()).max(0) as u64;
    poll_until(
        "the blocked worker's processes to be gone",
        Duration::from_millis(left),
        || worker_processes(&id).is_empty().then_some(()),
        || format!("{:?}\n{}", worker_processes(&id), org.diag(&id)),
    );
    let seen = sampler.finish();
    assert!(!seen.is_empty(), "the sampler never saw the worker");
    let last = seen.iter().map(|(t, _)| *t).max().unwrap();
    assert!(
        last < blocked_at + 1000,
        "a process of the worker was alive {} ms after BLOCKED: {seen:?}",
        last - blocked_at
    );
    eprintln!(
        "last worker process seen {} ms after BLOCKED",
        last - blocked_at
    );
    // Nothing it would have done next was done, and its chain stays locked.
    assert!(!org.out.join(format!("ran-on-{id}")).exists());
    assert_eq!(org.locks_of(&id), vec!["alpha".to_string()]);
    org.wait_supervisor_gone(&id);
    let w = org.worker(&id);
    assert_eq!(
        w.progress.milestone,
        Milestone::Blocked,
        "{}",
        org.diag(&id)
    );
    assert_eq!(w.progress.tracked_sha, None, "it never pushed");
    assert!(
        org.alerts(&id).iter().any(|a| a["kind"] == "blocked"
            && a["message"]
                .as_str()
                .unwrap()
                .contains("stopped its processes")),
        "{}",
        org.diag(&id)
    );
    // `orch respawn --note` continues it, in the same worktree (its commit is there).
    std::fs::write(org.out.join(format!("granted-{id}")), "").unwrap();
    let out = org.run(&["respawn", &id, "--note", "the credentials are in place"]);
    assert!(out.status.success(), "{}", output_text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("continues in WORKING"),
        "{}",
        output_text(&out)
    );
    org.wait_done(&id);
    assert_eq!(org.worker(&id).progress.milestone, Milestone::Done);
    assert!(
        org.transitions(&id)
            .contains(&("BLOCKED".to_string(), "WORKING".to_string())),
        "{:?}",
        org.transitions(&id)
    );
    let prompt = std::fs::read_to_string(org.state.join(&id).join("prompt.md")).unwrap();
    assert!(prompt.contains("the credentials are in place"), "{prompt}");
}

#[test]
fn a_worker_past_its_whole_life_is_failed_counting_every_life_but_not_its_waits() {
    // 5 s of life in all: the first life works ≥ 3 s before it reports BLOCKED; the test
    // waits; the respawned life hangs. Without the first life's time it would last 5 s.
    let org = Org::new(
        Spec::local("blocked_runs_on.sh")
            .repo(RepoSpec::new("alpha").standard_ci("true"))
            .contract_key("default_worker_timeout", "5s"),
    );
    let id = org.spawn_detached("alpha", "slow, then hang");
    org.wait_milestone(&id, "BLOCKED", DEADLINE);
    org.wait_supervisor_gone(&id);
    let waited = org.worker(&id).progress.life.clone();
    assert!(
        waited.since_ms.is_none(),
        "frozen while BLOCKED: {waited:?}"
    );
    assert!(waited.spent_ms >= 3000, "{waited:?}");
    std::fs::write(org.out.join(format!("granted-{id}")), "").unwrap();
    let out = org.run(&["respawn", &id]);
    assert!(out.status.success(), "{}", output_text(&out));
    let w = org.wait_milestone(&id, "FAILED", DEADLINE);
    let respawned_at = at_ms_of_transition(&org, &id, "WORKING", 0);
    let failed_at = at_ms_of_transition(&org, &id, "FAILED", 0);
    assert!(
        failed_at - respawned_at < 5000,
        "the second life lasted {} ms: the first one's {} ms were not counted\n{}",
        failed_at - respawned_at,
        waited.spent_ms,
        org.diag(&id)
    );
    assert!(
        w.progress.life.spent_ms >= 5000,
        "{:?}\n{}",
        w.progress.life,
        org.diag(&id)
    );
    let timeout: Vec<_> = org
        .alerts(&id)
        .into_iter()
        .filter(|a| a["kind"] == "worker_timeout")
        .collect();
    assert_eq!(timeout.len(), 1, "{}", org.diag(&id));
    assert_eq!(timeout[0]["severity"], "critical");
    assert!(
        timeout[0]["message"]
            .as_str()
            .unwrap()
            .contains("default_worker_timeout 5s"),
        "{timeout:?}"
    );
    // FAILED keeps the lock for an operator, and no process of the worker is left.
    assert_eq!(org.locks_of(&id), vec!["alpha".to_string()]);
    org.wait_supervisor_gone(&id);
    assert!(worker_processes(&id).is_empty());
}

#[test]
fn a_cancel_sent_as_a_blocked_workers_supervisor_ends_is_carried_out() {
    // The supervisor of a worker that reported BLOCKED stops it and exits: a cancel queued
    // in between is withdrawn and carried out without it, never left unanswered.
    let org = Org::new(
        Spec::local("blocked_runs_on.sh")
            .repo(RepoSpec::new("alpha").standard_ci("test -f feature.txt")),
    );
    let id = org.spawn_detached("alpha", "needs credentials");
    org.wait_milestone(&id, "BLOCKED", DEADLINE);
    let started = std::time::Instant::now();
    let out = org.run(&["cancel", &id, "--reason", "not needed after all"]);
    assert!(out.status.success(), "{}", output_text(&out));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "answered in {:?}",
        started.elapsed()
    );
    assert_eq!(org.worker(&id).progress.milestone, Milestone::Cancelled);
    assert!(org.locks_of(&id).is_empty());
}
