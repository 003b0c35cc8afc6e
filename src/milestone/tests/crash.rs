//! A worker that ends without its word (a crash) in any milestone at work: said at once.

use super::*;
use crate::contract::Contract;

const T0: i64 = 1_000_000;

fn pushed(verdict: Option<VerdictKind>) -> Progress {
    let c = Contract::embedded();
    let mut p = Progress::new(&c, T0);
    p.enter(&c, Milestone::PushedToCi, T0);
    p.tracked_sha = Some("a".repeat(40).into());
    p.verdict = verdict;
    p
}

fn exited_alerts(fx: &[Effect]) -> Vec<&str> {
    fx.iter()
        .filter_map(|e| match e {
            Effect::Alert { kind, message, .. } if kind == "worker_exited" => {
                Some(message.as_str())
            }
            _ => None,
        })
        .collect()
}

#[test]
fn a_crash_after_a_push_is_said_at_once_whatever_ci_says_yet() {
    let c = Contract::embedded();
    for verdict in [
        None,
        Some(VerdictKind::Pending),
        Some(VerdictKind::Running),
        Some(VerdictKind::Green),
    ] {
        for code in [Some(1), None] {
            let (p, fx) = step(&c, "w", &pushed(verdict), &Event::WorkerExited { code }, T0);
            assert_eq!(p.milestone, Milestone::PushedToCi, "{verdict:?} {code:?}");
            assert!(!p.turn_ended, "a crash is not the end of a turn");
            let said = exited_alerts(&fx);
            assert_eq!(said.len(), 1, "{verdict:?} {code:?}: {fx:?}");
            assert!(
                said[0].contains("after pushing aaaaaaaaaa") && said[0].contains("orch resume"),
                "{}",
                said[0]
            );
            assert!(
                p.end_reason
                    .as_deref()
                    .is_some_and(|r| r.starts_with("worker exited (")),
                "{:?}",
                p.end_reason
            );
            assert!(
                !fx.iter().any(|e| matches!(e, Effect::ReleaseLock { .. })),
                "the lock is kept for the replacement"
            );
        }
    }
}

#[test]
fn the_end_of_a_turn_after_a_push_is_no_crash() {
    let c = Contract::embedded();
    let (p, fx) = step(
        &c,
        "w",
        &pushed(Some(VerdictKind::Running)),
        &Event::WorkerExited { code: Some(0) },
        T0,
    );
    assert!(p.turn_ended);
    assert!(exited_alerts(&fx).is_empty(), "{fx:?}");
}

/// A life that fails at once, having reported nothing, is remembered by its signature; the
/// next failing the same way is a setup failure: FAILED with one alert naming the cause, and
/// no replacement after it (issue 37). Another signature is only remembered.
#[test]
fn the_same_quick_failure_twice_is_a_setup_failure() {
    let c = Contract::embedded();
    let p = Progress::new(&c, T0);
    let sig = |s: &str| Event::QuickExit {
        signature: s.into(),
    };
    let (p, fx) = step(
        &c,
        "w",
        &p,
        &sig("exit code 2: sh: 0: cannot open w.sh"),
        T0,
    );
    assert_eq!(p.milestone, Milestone::Working);
    assert!(alerts_of(&fx, "setup_failure").is_empty());
    let (p, fx) = step(&c, "w", &p, &sig("exit code 1: another way"), T0);
    assert_eq!(p.milestone, Milestone::Working);
    assert!(alerts_of(&fx, "setup_failure").is_empty());
    let (p, _) = step(
        &c,
        "w",
        &p,
        &sig("exit code 2: sh: 0: cannot open w.sh"),
        T0,
    );
    let (p, fx) = step(
        &c,
        "w",
        &p,
        &sig("exit code 2: sh: 0: cannot open w.sh"),
        T0,
    );
    assert_eq!(p.milestone, Milestone::Failed);
    let said = alerts_of(&fx, "setup_failure");
    assert_eq!(said.len(), 1, "{fx:?}");
    assert!(said[0].contains("cannot open w.sh"), "{}", said[0]);
}
