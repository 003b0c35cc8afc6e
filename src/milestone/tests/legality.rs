//! Which transitions are legal: every pair of states against the seed's state machine, every claim
//! from every state, terminal states.

use super::*;

/// The seed's STATE MACHINE, written out independently of the contract file: its four
/// transitions, repeated reports of the working states, the any-state exits, resumption from
/// PAUSED, an operator's respawn out of BLOCKED / BLOCKED_PERMISSION, and an operator's
/// approval of a held change (BLOCKED -> DONE).
fn expected_legal(from: Milestone, to: Milestone) -> bool {
    if from.is_terminal() {
        return false;
    }
    if matches!(
        to,
        Blocked | BlockedPermission | Paused | Failed | Cancelled
    ) {
        return true;
    }
    matches!(
        (from, to),
        (Working, PushedToCi)
            | (PushedToCi, FixingCi)
            | (PushedToCi, Done)
            | (FixingCi, PushedToCi)
            | (Working, Working)
            | (PushedToCi, PushedToCi)
            | (FixingCi, FixingCi)
            | (Paused, Working | PushedToCi | FixingCi)
            | (Blocked | BlockedPermission, Working | FixingCi)
            // An operator's approval of a green change held for touching protected paths.
            | (Blocked, Done)
    )
}

#[test]
fn every_pair_of_states_is_legal_exactly_when_the_contract_says_so() {
    let c = contract();
    let mut legal = 0;
    for from in Milestone::ALL {
        for to in Milestone::ALL {
            assert_eq!(
                c.allows(from.as_str(), to.as_str()),
                expected_legal(from, to),
                "contract file disagrees with the seed on {from} -> {to}"
            );
            let mut p = at(from);
            let mut fx = Vec::new();
            let moved = transition(&c, &mut p, to, "test", T0 + 1, &mut fx);
            assert_eq!(moved, expected_legal(from, to), "{from} -> {to}");
            if moved {
                assert_eq!(p.milestone, to);
            } else {
                assert_eq!(p.milestone, from, "an illegal transition changes nothing");
                assert!(
                    fx.iter().any(|e| matches!(e, Effect::Violation { kind, .. } if kind == "illegal_transition")),
                    "{from} -> {to} must be recorded as a violation"
                );
            }
            legal += moved as usize;
        }
    }
    assert_eq!(legal, 6 * 5 + 4 + 3 + 3 + 4 + 1, "legal pair count");
}

/// The event a worker or orch uses to ask for each target, applied from every state.
#[test]
fn claims_from_every_state_follow_the_contract() {
    let c = contract();
    for from in Milestone::ALL {
        for (to, event) in [
            (
                Working,
                Event::Claim {
                    milestone: Working,
                    note: "x".into(),
                    via: Channel::Output,
                },
            ),
            (
                PushedToCi,
                Event::Push {
                    sha: "b".repeat(40).into(),
                    pushed_ms: T0,
                    via: Channel::Report,
                    protected: Vec::new(),
                    secrets: Vec::new(),
                },
            ),
            (
                FixingCi,
                Event::Claim {
                    milestone: FixingCi,
                    note: "test".into(),
                    via: Channel::Output,
                },
            ),
            (
                Blocked,
                Event::Claim {
                    milestone: Blocked,
                    note: "needs a human".into(),
                    via: Channel::Report,
                },
            ),
            (
                BlockedPermission,
                Event::Claim {
                    milestone: BlockedPermission,
                    note: "Bash".into(),
                    via: Channel::Output,
                },
            ),
            (
                Cancelled,
                Event::Cancel {
                    by: "op".into(),
                    reason: "r".into(),
                },
            ),
        ] {
            let (p, fx) = step(&c, "w", &at(from), &event, T0 + 5);
            let allowed = expected_legal(from, to);
            if allowed {
                assert_eq!(p.milestone, to, "{from} --{event:?}--> should reach {to}");
            } else {
                assert_eq!(p.milestone, from, "{from} --{event:?}--> must not move");
                if !from.is_terminal() {
                    assert!(
                        fx.iter().any(|e| matches!(e, Effect::Violation { .. })),
                        "{from} -> {to} illegal: expected a recorded violation, got {fx:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn terminal_states_ignore_everything() {
    let c = contract();
    for m in [Done, Failed, Cancelled] {
        for e in [
            Event::Tick,
            Event::Output,
            Event::Resume,
            Event::WorkerExited { code: None },
        ] {
            let (p, fx) = step(&c, "w", &at(m), &e, T0 + 100 * MIN);
            assert_eq!(p.milestone, m);
            assert!(fx.is_empty(), "{m} {e:?} {fx:?}");
        }
    }
}
