//! FIXING_CI's `on_timeout: escalate_after_max_attempts`: a timed-out fix attempt is one of
//! the `max_attempts`, not the end of the worker.

use super::*;
use crate::contract::Contract;

const T0: i64 = 1_000_000;
const MIN: i64 = 60_000;

/// In FIXING_CI after the original push's red (fix attempt 1), quiet since.
fn fixing(c: &Contract) -> Progress {
    let mut p = Progress::new(c, T0);
    p.tracked_sha = Some("a".repeat(40).into());
    p.enter(c, Milestone::FixingCi, T0);
    p.fix_attempts = 1;
    p.fix_reds.push(FixRed {
        sha: "aaaaaaaaaa".into(),
        jobs: vec!["test".into()],
        timed_out: false,
    });
    p
}

fn kinds(fx: &[Effect]) -> Vec<&str> {
    fx.iter()
        .filter_map(|e| match e {
            Effect::Alert { kind, .. } => Some(kind.as_str()),
            _ => None,
        })
        .collect()
}

/// Ticks past each attempt's deadline until the worker leaves FIXING_CI: the alert kinds
/// raised at each.
fn run_out(c: &Contract, mut p: Progress) -> (Progress, Vec<Vec<String>>) {
    let mut raised = Vec::new();
    while p.milestone == Milestone::FixingCi && raised.len() < 20 {
        let at = p.deadline_ms.expect("FIXING_CI has a timeout");
        let (q, fx) = step(c, "w", &p, &Event::Tick, at);
        raised.push(kinds(&fx).into_iter().map(str::to_string).collect());
        p = q;
    }
    (p, raised)
}

#[test]
fn each_timed_out_fix_attempt_counts_and_the_fifth_fails_the_worker() {
    // A whole life long enough for five attempts of 15m (the shipped 30m would end it first).
    let text = crate::contract::EMBEDDED
        .replace("default_worker_timeout: 30m", "default_worker_timeout: 10h");
    let c = Contract::from_str(&text, std::path::Path::new("c.yaml")).unwrap();
    assert_eq!(c.fixing_ci_max_attempts, 5);
    let p = fixing(&c);
    // The first timeout: attempt 1 failed, attempt 2 begins on a fresh clock.
    let deadline = p.deadline_ms.unwrap();
    let (q, fx) = step(&c, "w", &p, &Event::Tick, deadline);
    assert_eq!(q.milestone, Milestone::FixingCi, "{fx:?}");
    assert_eq!(q.fix_attempts, 2);
    assert_eq!(q.deadline_ms, Some(deadline + 15 * MIN));
    // (Its warning comes with it: this tick is the first past `warning_at`.)
    assert_eq!(kinds(&fx), ["timeout_warning", "fix_attempt_timed_out"]);
    assert!(!fx.iter().any(|e| matches!(e, Effect::StopWorker { .. })));
    let Some(Effect::Alert { message, .. }) = fx.get(1) else {
        panic!("{fx:?}")
    };
    assert!(
        message.contains("fix attempt 1/5 timed out") && message.contains("attempt 2/5 begins"),
        "{message}"
    );
    // Then attempts 2..5 run out too: the escalation warning after the third failed one, and
    // FAILED (attempts_exhausted) after the fifth — not before.
    let (end, raised) = run_out(&c, q);
    assert_eq!(end.milestone, Milestone::Failed, "{raised:?}");
    assert_eq!(raised.len(), 4, "{raised:?}");
    assert!(
        raised[1].contains(&"fix_attempts_escalated".to_string()),
        "{raised:?}"
    );
    assert!(
        raised[3].contains(&"attempts_exhausted".to_string()),
        "{raised:?}"
    );
    assert!(
        end.end_reason
            .as_deref()
            .is_some_and(|r| r.contains("attempts exhausted (5)") && r.contains("timed out")),
        "{:?}",
        end.end_reason
    );
    assert_eq!(end.fix_reds.iter().filter(|r| r.timed_out).count(), 5);
}

#[test]
fn a_red_and_a_timed_out_attempt_count_alike() {
    let c = Contract::embedded();
    let mut p = fixing(&c);
    // Attempts 1..4 failed red (fix_attempts 5: the last attempt runs).
    p.fix_attempts = 5;
    let (q, fx) = step(&c, "w", &p, &Event::Tick, p.deadline_ms.unwrap());
    assert_eq!(q.milestone, Milestone::Failed);
    assert!(kinds(&fx).contains(&"attempts_exhausted"), "{fx:?}");
}

#[test]
fn plain_escalate_and_reassignment_end_the_worker_at_the_first_timeout() {
    let text = crate::contract::EMBEDDED.replace(
        "on_timeout: escalate_after_max_attempts",
        "on_timeout: escalate",
    );
    let c = Contract::from_str(&text, std::path::Path::new("c.yaml")).unwrap();
    let p = fixing(&c);
    let (q, _) = step(&c, "w", &p, &Event::Tick, p.deadline_ms.unwrap());
    assert_eq!(q.milestone, Milestone::Failed);
    assert_eq!(q.end_reason.as_deref(), Some("timeout"));

    // A wave's critical-path task is reassigned whatever the milestone says.
    let c = Contract::embedded();
    let mut p = fixing(&c);
    p.reassign_on_timeout = true;
    let (q, fx) = step(&c, "w", &p, &Event::Tick, p.deadline_ms.unwrap());
    assert_eq!(q.milestone, Milestone::Failed);
    assert!(fx.contains(&Effect::Reassign), "{fx:?}");
}

#[test]
fn a_timed_out_attempt_is_named_in_the_escalation() {
    let c = Contract::embedded();
    let mut p = fixing(&c);
    // Two fix attempts failed red before; the third runs out of time.
    for sha in ["bbbbbbbbbb", "cccccccccc"] {
        p.fix_reds.push(FixRed {
            sha: sha.into(),
            jobs: vec!["test".into()],
            timed_out: false,
        });
    }
    p.fix_attempts = 3;
    let (_, fx) = step(&c, "w", &p, &Event::Tick, p.deadline_ms.unwrap());
    let message = fx
        .iter()
        .find_map(|e| match e {
            Effect::Alert { kind, message, .. } if kind == "fix_attempts_escalated" => {
                Some(message.clone())
            }
            _ => None,
        })
        .unwrap_or_else(|| panic!("{fx:?}"));
    assert!(
        message.contains("attempt 1: bbbbbbbbbb red: test")
            && message.contains("attempt 3: timed out (at aaaaaaaaaa)"),
        "{message}"
    );
}
