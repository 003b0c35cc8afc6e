//! A worker that crashes after a push (exit 1, no DONE, no end of its turn): its supervisor
//! decides at once, as for an exit before any push — a `worker_exited` alert, the worker left
//! to `orch resume` (GONE), its chain lock kept for the replacement — never a dead worker
//! holding its chain with nothing said until some later command.
//!
//! The workers are `tests/workers/resume_worker.sh` (`push-crash`, `green-crash`); CI `check`
//! waits for a gate file, so a test decides when CI finishes.

use crate::support::{DEADLINE, Org, Spec, poll_until, resumed_entry};
use orch::milestone::Milestone;
use serde_json::Value;
use std::time::Duration;

/// How long the supervisor may take to decide once the worker has exited: seconds, not "at
/// the next orch command".
const DECIDED_WITHIN: Duration = Duration::from_secs(20);

/// `orch status --json`'s entry of `id`.
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

/// `orch alerts --json`: the alerts of worker `id` of `kind`.
fn alerts_of(org: &Org, id: &str, kind: &str) -> Vec<Value> {
    org.json(&["alerts", "--json"])["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["worker_id"] == id && a["kind"] == kind)
        .cloned()
        .collect()
}

/// Waits (within `DECIDED_WITHIN`) until orch has decided about the crashed worker: a
/// `worker_exited` alert in `orch alerts`, its supervisor gone and the worker shown as
/// `orch resume`'s to take over, its lock kept. Returns the alert.
fn decided(org: &Org, id: &str) -> Value {
    poll_until(
        &format!("orch to decide about the crashed worker {id}"),
        DECIDED_WITHIN,
        || {
            let alert = alerts_of(org, id, "worker_exited").into_iter().next()?;
            let st = status_of(org, id);
            (st["supervision"] == "gone").then_some(alert)
        },
        || {
            format!(
                "status: {}\nalerts: {}\n{}",
                status_of(org, id),
                org.json(&["alerts", "--json"]),
                org.diag(id)
            )
        },
    )
}

/// What a person does with it (`orch resume`): a replacement finishes the task, DONE on CI's
/// green and its word.
fn resumed_to_done(org: &Org, id: &str) {
    let answer = org.resume();
    let r = resumed_entry(&answer, id).unwrap_or_else(|| panic!("{answer}"));
    assert_eq!(r["action"], "respawned", "{r}");
    org.wait_done(id);
    let w = org.worker(id);
    assert_eq!(w.milestone(), Milestone::Done, "{}", org.diag(id));
    assert_eq!(w.respawns, 1);
    assert_eq!(org.lives(id), 2, "one replacement");
    assert_eq!(org.lock_of(id), None, "DONE releases the lock");
}

/// The worker reports its push, then exits 1 while CI still runs; CI then goes green. Before,
/// its supervisor followed CI without a word and, on green, left the worker GONE with its
/// lock and no alert.
#[test]
fn a_worker_that_crashes_after_reporting_its_push_is_decided_at_once() {
    let org = Org::new(Spec::resumable(&[("core", &[])]));
    let id = org.spawn("core", "push-crash add the feature", "t-push-crash");
    org.wait_mark(&id, 1, "pushed");
    org.wait_until("the worker's exit to be recorded", DEADLINE, || {
        org.worker(&id).exit_code == Some(1)
    });
    // CI goes green after the crash.
    org.open_gate("core");
    let alert = decided(&org, &id);
    let message = alert["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("exit code 1") && message.contains("PUSHED_TO_CI"),
        "{alert}"
    );
    assert!(message.contains("orch resume"), "{alert}");
    let w = org.worker(&id);
    assert_eq!(w.milestone(), Milestone::PushedToCi, "{}", org.diag(&id));
    assert_eq!(org.locks_of(&id), vec!["core".to_string()]);
    assert!(
        w.progress
            .end_reason
            .as_deref()
            .is_some_and(|r| r.contains("exit code 1")),
        "{:?}",
        w.progress.end_reason
    );
    resumed_to_done(&org, &id);
    // The replacement was told why its predecessor ended.
    let p = org.prompt(&id, 2);
    assert!(p.contains("exit code 1"), "{p}");
}

/// The worker reports its push on its output, waits until CI is green, then exits 1.
#[test]
fn a_worker_that_crashes_after_a_green_push_is_decided_at_once() {
    let org = Org::new(Spec::resumable(&[("core", &[])]));
    org.open_gate("core");
    let id = org.spawn("core", "green-crash add the feature", "t-green-crash");
    org.wait_mark(&id, 1, "green");
    let alert = decided(&org, &id);
    assert!(
        alert["message"]
            .as_str()
            .is_some_and(|m| m.contains("exit code 1")),
        "{alert}"
    );
    assert_eq!(org.locks_of(&id), vec!["core".to_string()]);
    resumed_to_done(&org, &id);
}
