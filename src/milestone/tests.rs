use super::*;
use crate::contract::Contract;
use Milestone::*;

const T0: i64 = 1_000_000;
const MIN: i64 = 60_000;

fn contract() -> Contract {
    Contract::embedded()
}

/// The shipped contract with one value replaced (`from` must be in it).
fn contract_with(from: &str, to: &str) -> Contract {
    let text = crate::contract::EMBEDDED;
    assert!(text.contains(from), "the contract has no {from}");
    Contract::from_str(&text.replace(from, to), std::path::Path::new("c.yaml")).unwrap()
}

fn push(sha: &str) -> Event {
    Event::Push {
        sha: sha.into(),
        pushed_ms: T0,
        via: Channel::Output,
        protected: Vec::new(),
        secrets: Vec::new(),
    }
}

fn alerts_of<'a>(fx: &'a [Effect], kind: &str) -> Vec<&'a str> {
    fx.iter()
        .filter_map(|e| match e {
            Effect::Alert {
                kind: k, message, ..
            } if k == kind => Some(message.as_str()),
            _ => None,
        })
        .collect()
}

#[test]
fn the_third_failed_fix_attempt_escalates_once_naming_the_attempts_and_jobs() {
    let c = contract();
    assert_eq!((c.escalate_after, c.fixing_ci_max_attempts), (3, 5));
    let mut p = at(PushedToCi);
    let mut raised = Vec::new();
    // Red 1 is the original push's; reds 2.. are failed fix attempts 1..
    for red in 1..=5u32 {
        let sha = format!("{red}").repeat(40);
        p.tracked_sha = Some(sha.clone().into());
        let (q, fx) = step(
            &c,
            "w",
            &p,
            &verdict(VerdictKind::Red, &sha),
            T0 + red as i64,
        );
        assert_eq!(q.milestone, FixingCi);
        raised.push(alerts_of(&fx, "fix_attempts_escalated").len());
        if red == 4 {
            let msg = alerts_of(&fx, "fix_attempts_escalated")[0].to_string();
            assert!(
                msg.contains("3 fix attempts failed (escalate_after 3)"),
                "{msg}"
            );
            for (n, s) in [(1, '2'), (2, '3'), (3, '4')] {
                let named = format!("attempt {n}: {} red: test", s.to_string().repeat(10));
                assert!(msg.contains(&named), "{named} in {msg}");
            }
            assert!(
                !msg.contains("1111111111"),
                "the original push is no fix attempt: {msg}"
            );
            assert!(
                fx.iter().any(|e| matches!(
                    e,
                    Effect::Alert {
                        severity: Severity::Warning,
                        ..
                    }
                )),
                "a warning"
            );
        }
        let (q, _) = step(&c, "w", &q, &push(&sha), T0 + red as i64);
        p = q;
    }
    assert_eq!(
        raised,
        vec![0, 0, 0, 1, 0],
        "once, at the 3rd failed attempt"
    );
    assert!(p.escalated);
    assert_eq!(p.milestone, PushedToCi, "the worker goes on fixing");
}

#[test]
fn a_fixing_ci_claim_before_the_red_escalates_once_the_red_is_known() {
    let c = contract();
    let mut p = at(PushedToCi);
    let claim = Event::Claim {
        milestone: FixingCi,
        note: "test fails".into(),
        via: Channel::Report,
    };
    let mut raised = Vec::new();
    for red in 1..=4u32 {
        let sha = format!("{red}").repeat(40);
        p.tracked_sha = Some(sha.clone().into());
        let (q, fx) = step(&c, "w", &p, &claim, T0);
        assert_eq!(q.milestone, FixingCi);
        assert!(
            alerts_of(&fx, "fix_attempts_escalated").is_empty(),
            "{fx:?}"
        );
        let (q, fx) = step(&c, "w", &q, &verdict(VerdictKind::Red, &sha), T0);
        raised.extend(
            alerts_of(&fx, "fix_attempts_escalated")
                .iter()
                .map(|m| m.to_string()),
        );
        let (q, _) = step(&c, "w", &q, &push(&sha), T0);
        p = q;
    }
    assert_eq!(raised.len(), 1, "{raised:?}");
    assert!(
        raised[0].contains("attempt 3: 4444444444 red: test"),
        "{}",
        raised[0]
    );
}

#[test]
fn the_whole_life_is_capped_across_respawns_its_clock_frozen_while_blocked_or_paused() {
    let c = contract_with("default_worker_timeout: 30m", "default_worker_timeout: 10m");
    let p = Progress::new(&c, T0);
    // 6 minutes at work, then BLOCKED for an hour: the clock stands still.
    let blocked = Event::Claim {
        milestone: Blocked,
        note: "missing credentials".into(),
        via: Channel::Report,
    };
    let (p, _) = step(&c, "w", &p, &blocked, T0 + 6 * MIN);
    assert_eq!(p.life.at(T0 + 66 * MIN), 6 * MIN);
    let (p, fx) = step(&c, "w", &p, &Event::Tick, T0 + 66 * MIN);
    assert_eq!((p.milestone, fx.len()), (Blocked, 0));
    // Respawned: the clock goes on from 6 minutes, not from zero.
    let respawn = Event::Respawn {
        by: "ops".into(),
        note: "credentials added".into(),
    };
    let (p, _) = step(&c, "w", &p, &respawn, T0 + 66 * MIN);
    assert_eq!(p.milestone, Working);
    let (p, fx) = step(&c, "w", &p, &Event::Tick, T0 + 69 * MIN);
    assert_eq!(p.milestone, Working, "9 minutes at work: {fx:?}");
    // Paused an hour by a red upstream: frozen again.
    let (p, _) = step(
        &c,
        "w",
        &p,
        &Event::Pause {
            reason: "core is red".into(),
        },
        T0 + 69 * MIN,
    );
    let (p, fx) = step(&c, "w", &p, &Event::Tick, T0 + 129 * MIN);
    assert_eq!((p.milestone, fx.len()), (Paused, 0));
    let (p, _) = step(&c, "w", &p, &Event::Resume, T0 + 129 * MIN);
    let (p, fx) = step(&c, "w", &p, &Event::Tick, T0 + 130 * MIN - 1);
    assert_eq!(p.milestone, Working, "{fx:?}");
    let (p, fx) = step(&c, "w", &p, &Event::Tick, T0 + 130 * MIN);
    assert_eq!(p.milestone, Failed, "10 minutes at work in all");
    let msg = alerts_of(&fx, "worker_timeout");
    assert_eq!(msg.len(), 1, "{fx:?}");
    assert!(msg[0].contains("default_worker_timeout 10m"), "{}", msg[0]);
    assert!(fx.iter().any(|e| matches!(e, Effect::StopWorker { .. })));
    assert!(!fx.iter().any(|e| matches!(e, Effect::ReleaseLock { .. })));
    assert_eq!(p.life.since_ms, None, "stopped at the end");
}

#[test]
fn a_resumed_worker_is_not_charged_for_the_time_nobody_supervised_it() {
    let c = contract();
    let p = Progress::new(&c, T0);
    let (p, _) = step(&c, "w", &p, &Event::Output, T0 + 4 * MIN);
    // Its supervisor died; a resumer takes it over two hours later.
    let (p, _) = step(
        &c,
        "w",
        &p,
        &Event::Resumed { replacement: true },
        T0 + 124 * MIN,
    );
    assert_eq!(p.life.at(T0 + 125 * MIN), 5 * MIN);
}

#[test]
fn a_blocked_report_stops_the_worker_at_once_and_keeps_the_lock() {
    let c = contract();
    for from in [Working, PushedToCi, FixingCi] {
        let claim = Event::Claim {
            milestone: Blocked,
            note: "the API needs a key".into(),
            via: Channel::Report,
        };
        let (p, fx) = step(&c, "w", &at(from), &claim, T0);
        assert_eq!(p.milestone, Blocked);
        assert!(
            fx.contains(&Effect::StopWorker {
                immediate: false,
                reason: BLOCKED_STOP.into()
            }),
            "{fx:?}"
        );
        assert!(!fx.iter().any(|e| matches!(e, Effect::ReleaseLock { .. })));
        let msg = alerts_of(&fx, "blocked");
        assert!(msg[0].contains("orch respawn w"), "{msg:?}");
    }
}

fn at(m: Milestone) -> Progress {
    let c = contract();
    let mut p = Progress::new(&c, T0);
    p.enter(&c, m, T0);
    p.tracked_sha = Some("a".repeat(40).into());
    p
}

/// At `m` after the worker ended its turn (exit 0): its word that the work is done.
fn ended(m: Milestone) -> Progress {
    let mut p = at(m);
    p.turn_ended = true;
    p
}

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

fn verdict(kind: VerdictKind, sha: &str) -> Event {
    Event::Verdict {
        sha: sha.into(),
        kind,
        failed_jobs: if kind == VerdictKind::Red {
            vec!["test".into()]
        } else {
            vec![]
        },
        detail: format!("{kind:?}"),
        jobs: None,
    }
}

#[test]
fn green_verdict_on_tracked_sha_is_done_and_releases_the_lock() {
    let c = contract();
    let sha = "a".repeat(40);
    let (p, fx) = step(
        &c,
        "w",
        &ended(PushedToCi),
        &verdict(VerdictKind::Green, &sha),
        T0,
    );
    assert_eq!(p.milestone, Done);
    assert!(fx.iter().any(|e| matches!(e, Effect::ReleaseLock { .. })));
    // Without the worker's word a green head is verified, not DONE: the worker goes on.
    let (p, fx) = step(
        &c,
        "w",
        &at(PushedToCi),
        &verdict(VerdictKind::Green, &sha),
        T0,
    );
    assert_eq!(p.milestone, PushedToCi);
    assert_eq!(p.verdict, Some(VerdictKind::Green));
    assert!(
        !fx.iter()
            .any(|e| matches!(e, Effect::ReleaseLock { .. } | Effect::StopWorker { .. }))
    );
    // Its DONE claim then finishes it.
    let (p, fx) = step(
        &c,
        "w",
        &p,
        &Event::DoneClaim {
            via: Channel::Report,
        },
        T0,
    );
    assert_eq!(p.milestone, Done);
    assert!(fx.iter().any(|e| matches!(e, Effect::ReleaseLock { .. })));
    // Only DONE releases: no other event returns ReleaseLock except Cancel.
    for m in [Working, Blocked, BlockedPermission, Paused] {
        let (_, fx) = step(&c, "w", &at(m), &verdict(VerdictKind::Green, &sha), T0);
        assert!(
            !fx.iter().any(|e| matches!(e, Effect::ReleaseLock { .. })),
            "{m}"
        );
    }
}

#[test]
fn a_fixing_worker_whose_tracked_commit_is_green_is_done() {
    // Its FIXING_CI came while CI was still running (or a rerun passed): nothing to fix.
    let c = contract();
    let sha = "a".repeat(40);
    let (p, fx) = step(
        &c,
        "w",
        &at(FixingCi),
        &verdict(VerdictKind::Green, &sha),
        T0,
    );
    assert_eq!(
        p.milestone, PushedToCi,
        "verified green; DONE with the word"
    );
    let (p, more) = step(
        &c,
        "w",
        &p,
        &Event::DoneClaim {
            via: Channel::Output,
        },
        T0,
    );
    assert_eq!(p.milestone, Done);
    let fx: Vec<Effect> = fx.into_iter().chain(more).collect();
    let moves: Vec<(Milestone, Milestone)> = fx
        .iter()
        .filter_map(|e| match e {
            Effect::Transition { from, to, .. } => Some((*from, *to)),
            _ => None,
        })
        .collect();
    assert_eq!(moves, [(FixingCi, PushedToCi), (PushedToCi, Done)]);
    assert!(fx.iter().any(|e| matches!(e, Effect::ReleaseLock { .. })));
    // A red verdict leaves it fixing.
    let (p, _) = step(&c, "w", &at(FixingCi), &verdict(VerdictKind::Red, &sha), T0);
    assert_eq!(p.milestone, FixingCi);
}

#[test]
fn verdicts_for_old_shas_are_ignored() {
    let c = contract();
    let (p, fx) = step(
        &c,
        "w",
        &at(PushedToCi),
        &verdict(VerdictKind::Green, &"f".repeat(40)),
        T0,
    );
    assert_eq!(p.milestone, PushedToCi);
    assert!(fx.is_empty());
}

#[test]
fn red_moves_to_fixing_ci_and_counts_attempts_up_to_the_limit() {
    let c = contract();
    let sha = "a".repeat(40);
    let mut p = at(PushedToCi);
    for attempt in 1..=c.fixing_ci_max_attempts {
        let (q, _) = step(&c, "w", &p, &verdict(VerdictKind::Red, &sha), T0);
        assert_eq!(q.milestone, FixingCi);
        assert_eq!(q.fix_attempts, attempt);
        let (q, _) = step(
            &c,
            "w",
            &q,
            &Event::Push {
                sha: sha.clone().into(),
                pushed_ms: T0,
                via: Channel::Output,
                protected: Vec::new(),
                secrets: Vec::new(),
            },
            T0,
        );
        assert_eq!(q.milestone, PushedToCi);
        p = q;
    }
    let (q, fx) = step(&c, "w", &p, &verdict(VerdictKind::Red, &sha), T0);
    assert_eq!(q.milestone, Failed);
    assert!(
        fx.iter()
            .any(|e| matches!(e, Effect::Alert { kind, .. } if kind == "attempts_exhausted"))
    );
    assert!(
        !fx.iter().any(|e| matches!(e, Effect::ReleaseLock { .. })),
        "FAILED keeps the lock"
    );
}

#[test]
fn sync_not_done_stays_pushed_until_a_new_push_succeeds() {
    let c = contract();
    let old = "a".repeat(40);
    let new = "b".repeat(40);
    let (p, fx) = step(
        &c,
        "w",
        &at(PushedToCi),
        &verdict(VerdictKind::SyncNotDone, &old),
        T0,
    );
    assert_eq!(p.milestone, PushedToCi);
    assert!(
        fx.iter()
            .any(|e| matches!(e, Effect::Alert { kind, .. } if kind == "sync_not_done"))
    );
    let (p, _) = step(
        &c,
        "w",
        &p,
        &Event::DoneClaim {
            via: Channel::Output,
        },
        T0,
    );
    assert_eq!(p.milestone, PushedToCi, "sync_not_done is never DONE");
    let (p, fx) = step(
        &c,
        "w",
        &p,
        &Event::Push {
            sha: new.clone().into(),
            pushed_ms: T0,
            via: Channel::Report,
            protected: Vec::new(),
            secrets: Vec::new(),
        },
        T0,
    );
    assert!(fx.contains(&Effect::Track {
        sha: new.clone().into()
    }));
    assert_eq!(p.verdict, None, "a new push resets the verdict");
    let (p, _) = step(&c, "w", &p, &verdict(VerdictKind::Green, &new), T0);
    assert_eq!(
        p.milestone, PushedToCi,
        "green, waiting for the worker's word"
    );
    let (p, _) = step(&c, "w", &p, &Event::WorkerExited { code: Some(0) }, T0);
    let (p, _) = step(&c, "w", &p, &verdict(VerdictKind::Green, &new), T0);
    assert_eq!(p.milestone, Done);
}

#[test]
fn done_claim_without_green_is_refused_and_recorded() {
    let c = contract();
    for v in [
        None,
        Some(VerdictKind::Red),
        Some(VerdictKind::Running),
        Some(VerdictKind::SyncNotDone),
        Some(VerdictKind::NoRun),
    ] {
        let mut s = at(PushedToCi);
        s.verdict = v;
        let (p, fx) = step(
            &c,
            "w",
            &s,
            &Event::DoneClaim {
                via: Channel::Report,
            },
            T0,
        );
        assert_eq!(p.milestone, PushedToCi, "{v:?}");
        assert!(fx.iter().any(
            |e| matches!(e, Effect::Violation { kind, .. } if kind == "done_without_ci_proof")
        ));
    }
    let mut s = at(PushedToCi);
    s.verdict = Some(VerdictKind::Green);
    let (p, _) = step(
        &c,
        "w",
        &s,
        &Event::DoneClaim {
            via: Channel::Report,
        },
        T0,
    );
    assert_eq!(p.milestone, Done);
    let (p, fx) = step(
        &c,
        "w",
        &at(Working),
        &Event::DoneClaim {
            via: Channel::Output,
        },
        T0,
    );
    assert_eq!(p.milestone, Working);
    assert!(
        fx.iter().any(
            |e| matches!(e, Effect::Violation { kind, .. } if kind == "done_without_ci_proof")
        )
    );
}

#[test]
fn two_permission_denials_stop_the_worker_at_once_and_keep_the_lock() {
    let c = contract();
    let deny = Event::PermissionDenial {
        line: "Permission to use Bash has been auto-denied".into(),
    };
    let (p, fx) = step(&c, "w", &at(Working), &deny, T0);
    assert_eq!(p.milestone, Working);
    assert!(fx.is_empty());
    let (p, fx) = step(&c, "w", &p, &deny, T0);
    assert_eq!(p.milestone, BlockedPermission);
    assert!(fx.contains(&Effect::StopWorker {
        immediate: true,
        reason: "permission denied".into()
    }));
    assert!(!fx.iter().any(|e| matches!(e, Effect::ReleaseLock { .. })));
}

#[test]
fn timeout_warns_then_extends_once_on_progress_then_fails() {
    // The whole-life cap (30m) would end the worker before its extended WORKING timeout.
    let c = contract_with("default_worker_timeout: 30m", "default_worker_timeout: 2h");
    let p = at(Working); // 20m timeout, warning at 15m
    let (p, fx) = step(&c, "w", &p, &Event::Tick, T0 + 15 * MIN);
    assert!(
        fx.iter()
            .any(|e| matches!(e, Effect::Alert { kind, .. } if kind == "timeout_warning"))
    );
    let (p, fx) = step(&c, "w", &p, &Event::Tick, T0 + 15 * MIN + 1);
    assert!(fx.is_empty(), "warned once");
    let (p, _) = step(&c, "w", &p, &Event::Output, T0 + 18 * MIN);
    let (p, fx) = step(&c, "w", &p, &Event::Tick, T0 + 20 * MIN);
    assert_eq!(p.milestone, Working, "progress 2 minutes ago: extended");
    assert!(p.extended);
    assert!(
        fx.iter()
            .any(|e| matches!(e, Effect::Alert { kind, .. } if kind == "timeout_extended"))
    );
    let (p, _) = step(&c, "w", &p, &Event::Output, T0 + 39 * MIN);
    let (p, fx) = step(&c, "w", &p, &Event::Tick, T0 + 40 * MIN);
    assert_eq!(
        p.milestone, Failed,
        "extended only once, whatever the progress"
    );
    assert_eq!(p.end_reason.as_deref(), Some("timeout"));
    assert!(fx.iter().any(|e| matches!(
        e,
        Effect::StopWorker {
            immediate: false,
            ..
        }
    )));
}

#[test]
fn timeout_without_progress_fails_at_once() {
    let c = contract();
    let (p, _) = step(&c, "w", &at(Working), &Event::Tick, T0 + 20 * MIN);
    assert_eq!(p.milestone, Failed);
}

#[test]
fn a_timeout_reassigns_on_the_critical_path_or_when_the_contract_says_so() {
    let reassigned = |fx: &[Effect]| {
        let stop = fx
            .iter()
            .position(|e| matches!(e, Effect::StopWorker { .. }));
        let reassign = fx.iter().position(|e| *e == Effect::Reassign);
        // The stop comes first: the lock is handed over only once the worker is gone.
        reassign.is_some() && stop < reassign
    };
    // The contract's defaults escalate: FAILED, the lock kept, no reassignment — FIXING_CI's
    // after its attempts (`escalate_after_max_attempts`: a timed-out one is counted).
    let c = contract();
    let (p, fx) = step(&c, "w", &at(Working), &Event::Tick, T0 + 20 * MIN);
    assert_eq!(p.milestone, Failed);
    assert!(!fx.contains(&Effect::Reassign));
    let (p, fx) = step(&c, "w", &at(FixingCi), &Event::Tick, T0 + 20 * MIN);
    assert_eq!((p.milestone, p.fix_attempts), (FixingCi, 1));
    assert!(!fx.contains(&Effect::Reassign));
    // A wave task on its critical path.
    let mut s = at(Working);
    s.reassign_on_timeout = true;
    let (p, fx) = step(&c, "w", &s, &Event::Tick, T0 + 20 * MIN);
    assert_eq!(p.milestone, Failed);
    assert!(reassigned(&fx), "{fx:?}");
    // `on_timeout: reassign` in the contract.
    let c = contract_with("on_timeout: escalate }", "on_timeout: reassign }");
    let (p, fx) = step(&c, "w", &at(Working), &Event::Tick, T0 + 20 * MIN);
    assert_eq!(p.milestone, Failed);
    assert!(reassigned(&fx), "{fx:?}");
    // Progress in the window still extends first.
    let (p, _) = step(&c, "w", &at(Working), &Event::Output, T0 + 19 * MIN);
    let (p, fx) = step(&c, "w", &p, &Event::Tick, T0 + 20 * MIN);
    assert_eq!(p.milestone, Working);
    assert!(!fx.contains(&Effect::Reassign));
}

#[test]
fn pushed_to_ci_timeout_checks_ci_first() {
    let c = contract();
    let mut s = at(PushedToCi);
    s.verdict = Some(VerdictKind::Running);
    let (p, _) = step(&c, "w", &s, &Event::Tick, T0 + 15 * MIN);
    assert_eq!(p.milestone, PushedToCi, "CI still running: extended");
    let mut s = at(PushedToCi);
    s.verdict = Some(VerdictKind::SyncNotDone);
    let (p, _) = step(&c, "w", &s, &Event::Tick, T0 + 15 * MIN);
    assert_eq!(
        p.milestone, Failed,
        "CI finished without proof and no progress"
    );
}

fn restarts(fx: &[Effect]) -> usize {
    fx.iter()
        .filter(|e| matches!(e, Effect::RestartCi { .. }))
        .count()
}

#[test]
fn pushed_to_ci_timeout_with_ci_waiting_for_a_runner_restarts_it_once_then_escalates() {
    // PUSHED_TO_CI: 15m; the whole-life cap (30m) out of the way.
    let c = contract_with("default_worker_timeout: 30m", "default_worker_timeout: 2h");
    let mut s = at(PushedToCi);
    s.verdict = Some(VerdictKind::Pending);
    let (p, fx) = step(&c, "w", &s, &Event::Tick, T0 + 15 * MIN);
    assert_eq!(p.milestone, PushedToCi, "stuck CI is restarted, not failed");
    assert_eq!(restarts(&fx), 1);
    assert!(matches!(&fx[..], [.., Effect::Checkpoint]));
    assert!(alerts_of(&fx, "ci_restarted")[0].contains("no runner"));
    assert_eq!(p.ci_restarts, 1);
    assert_eq!(
        p.deadline_ms,
        Some(T0 + 30 * MIN),
        "and waited for, one timeout"
    );
    // Forgejo's restart is an empty commit: a new push in the same stint keeps the count.
    let (p, _) = step(&c, "w", &p, &push(&"b".repeat(40)), T0 + 16 * MIN);
    assert_eq!((p.milestone, p.ci_restarts), (PushedToCi, 1));
    let (q, fx) = step(&c, "w", &p, &Event::Tick, T0 + 29 * MIN);
    assert!(fx.is_empty() && q.milestone == PushedToCi, "{fx:?}");
    let (p, fx) = step(&c, "w", &p, &Event::Tick, T0 + 30 * MIN);
    assert_eq!(
        p.milestone, Failed,
        "still stuck after one restart: escalated"
    );
    assert_eq!(restarts(&fx), 0, "never a second restart");
    assert!(p.end_reason.as_deref().unwrap().contains("CI stuck"));
    assert_eq!(alerts_of(&fx, "ci_stuck").len(), 1);
    assert!(fx.iter().any(|e| matches!(e, Effect::StopWorker { .. })));
    assert!(!fx.iter().any(|e| matches!(e, Effect::ReleaseLock { .. })));
}

#[test]
fn pushed_to_ci_timeout_extends_running_ci_once_then_restarts_it_then_escalates() {
    let c = contract_with("default_worker_timeout: 30m", "default_worker_timeout: 2h");
    let mut s = at(PushedToCi);
    s.verdict = Some(VerdictKind::Running);
    let (p, fx) = step(&c, "w", &s, &Event::Tick, T0 + 15 * MIN);
    assert_eq!((p.milestone, restarts(&fx)), (PushedToCi, 0));
    assert_eq!(alerts_of(&fx, "timeout_extended").len(), 1);
    let (p, fx) = step(&c, "w", &p, &Event::Tick, T0 + 30 * MIN);
    assert_eq!((p.milestone, restarts(&fx)), (PushedToCi, 1));
    assert!(alerts_of(&fx, "ci_restarted")[0].contains("running past"));
    let (p, fx) = step(&c, "w", &p, &Event::Tick, T0 + 45 * MIN);
    assert_eq!((p.milestone, restarts(&fx)), (Failed, 0));
    // A job past its own limit (a stuck runner) is restarted at the first timeout: no
    // extension for it.
    let mut s = at(PushedToCi);
    s.verdict = Some(VerdictKind::Running);
    s.ci_jobs = Some(crate::ci::verdict::JobTally {
        passed: 0,
        total: 2,
        running: vec!["test".into()],
        past_limit: vec!["test".into()],
    });
    let (p, fx) = step(&c, "w", &s, &Event::Tick, T0 + 15 * MIN);
    assert_eq!((p.milestone, restarts(&fx)), (PushedToCi, 1));
    assert!(alerts_of(&fx, "ci_restarted")[0].contains("test running past its own time limit"));
    // A finished CI is no stuck CI: the restart is only for pending, no run or running.
    let mut s = at(PushedToCi);
    s.verdict = Some(VerdictKind::SyncNotDone);
    let (p, fx) = step(&c, "w", &s, &Event::Tick, T0 + 15 * MIN);
    assert_eq!((p.milestone, restarts(&fx)), (Failed, 0));
    // A new PUSHED_TO_CI stint (after a fix) may restart again.
    let mut s = at(FixingCi);
    s.ci_restarts = 1;
    let (p, _) = step(&c, "w", &s, &push(&"c".repeat(40)), T0);
    assert_eq!((p.milestone, p.ci_restarts), (PushedToCi, 0));
}

#[test]
fn ci_substates_and_deadlock_indicators_are_kept_in_the_progress() {
    let c = contract();
    let sha = "a".repeat(40);
    let tally = crate::ci::verdict::JobTally {
        passed: 3,
        total: 6,
        running: vec!["build".into()],
        past_limit: vec![],
    };
    let running = Event::Verdict {
        sha: sha.clone().into(),
        kind: VerdictKind::Running,
        failed_jobs: vec![],
        detail: "running".into(),
        jobs: Some(tally.clone()),
    };
    let (p, _) = step(&c, "w", &at(PushedToCi), &running, T0);
    assert_eq!(p.ci_jobs.as_ref(), Some(&tally));
    assert_eq!(tally.summary(), "ci 3/6 jobs, running build");
    let (q, _) = step(&c, "w", &p, &push(&"b".repeat(40)), T0 + 1);
    assert_eq!(q.ci_jobs, None, "a new push starts CI afresh");
    let check = |forge_failures| Event::DeadlockCheck {
        worker_running: false,
        last_commit_ms: None,
        forge_failures,
    };
    let mut p = at(PushedToCi); // pushed, its run still pending
    p.pushed_ms = Some(T0);
    let (p, fx) = step(&c, "w", &p, &check(4), T0 + 10 * MIN);
    assert_eq!(p.deadlock, ["ci_stuck_in_pending", "api_errors"]);
    assert_eq!(alerts_of(&fx, "deadlock_api_errors").len(), 1);
    assert_eq!(alerts_of(&fx, "deadlock_ci_waiting").len(), 1);
    let (p, _) = step(&c, "w", &p, &check(3), T0 + 10 * MIN);
    assert_eq!(p.deadlock, ["ci_stuck_in_pending"], "3 is not more than 3");
    // The fix attempt, n of max, is in the transition the timeline shows.
    let sha = p.tracked_sha.clone().unwrap();
    let (p, fx) = step(&c, "w", &p, &verdict(VerdictKind::Red, &sha), T0 + 11 * MIN);
    assert_eq!(p.milestone, FixingCi);
    assert!(
        fx.iter()
            .any(|e| matches!(e, Effect::Transition { reason, .. }
            if reason.ends_with("(fix attempt 1/5)"))),
        "{fx:?}"
    );
}

#[test]
fn worker_exit_keeps_following_ci_while_pushed() {
    let c = contract();
    let (p, fx) = step(
        &c,
        "w",
        &at(PushedToCi),
        &Event::WorkerExited { code: Some(0) },
        T0,
    );
    assert_eq!(p.milestone, PushedToCi);
    assert!(p.turn_ended);
    assert_eq!(fx, [Effect::Checkpoint]);
    let (p, _) = step(
        &c,
        "w",
        &p,
        &verdict(VerdictKind::Green, &"a".repeat(40)),
        T0,
    );
    assert_eq!(
        p.milestone, Done,
        "a worker that ended its turn after a green push is DONE without saying it"
    );
    let (p, fx) = step(
        &c,
        "w",
        &at(Working),
        &Event::WorkerExited { code: Some(3) },
        T0,
    );
    assert_eq!(p.milestone, Working, "state recorded, not changed");
    assert!(
        fx.iter()
            .any(|e| matches!(e, Effect::Alert { kind, .. } if kind == "worker_exited"))
    );
    assert!(
        !fx.iter().any(|e| matches!(e, Effect::ReleaseLock { .. })),
        "lock kept"
    );
}

#[test]
fn pause_and_resume_return_to_the_previous_milestone() {
    let c = contract();
    let (p, fx) = step(
        &c,
        "w",
        &at(FixingCi),
        &Event::Pause {
            reason: "acdc-core red".into(),
        },
        T0,
    );
    assert_eq!(p.milestone, Paused);
    assert!(fx.contains(&Effect::SuspendWorker));
    let (p, fx) = step(&c, "w", &p, &Event::Resume, T0 + MIN);
    assert_eq!(p.milestone, FixingCi);
    assert!(fx.contains(&Effect::ContinueWorker));
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

#[test]
fn milestone_lines_are_found_anywhere_in_a_line() {
    let pats = contract().permission.patterns;
    let m = |l: &str| match parse_line(l, &pats) {
        Some(LineSignal::Milestone { milestone, rest }) => Some((milestone, rest)),
        _ => None,
    };
    assert_eq!(
        m("WORKING: setting up").unwrap(),
        (Working, "setting up".into())
    );
    assert_eq!(
        m("[12:00] agent> PUSHED_TO_CI: alphavm commit a1b2c3d - CI run #451")
            .unwrap()
            .0,
        PushedToCi
    );
    assert_eq!(
        m("BLOCKED_PERMISSION: Bash - denied").unwrap().0,
        BlockedPermission
    );
    assert_eq!(m("status BLOCKED: need creds").unwrap().0, Blocked);
    assert_eq!(m("NOT_DONE: yet"), None);
    assert_eq!(m("the word DONE without a colon"), None);
    assert_eq!(
        m("FIXING_CI: test - then DONE: later").unwrap().0,
        FixingCi,
        "earliest marker wins"
    );
    // An OS-level EACCES inside a tool's output is not a denial of the agent's permission.
    assert_eq!(
        parse_line(
            "mkdir: cannot create directory 'x': Permission denied",
            &pats
        ),
        None
    );
    // What the real agents print (Claude Code 2.1.197 / 2.1.330, Codex 0.169.0).
    for real in [
        r#"{"type":"user","message":{"content":[{"type":"tool_result","content":"This command requires approval","is_error":true}]}}"#,
        "Claude requested permissions to write to /w/hello.txt, but you haven't granted it yet.",
        "Permission to use Bash with command git push origin HEAD has been denied.",
        "Permission to use Bash has been denied because Claude Code is running in don't ask mode.",
        "Permission for this tool use was denied. It requires approval, and this session has no approval surface",
        "ERROR codex_core::tools::router: error=approval policy is Never; reject command — you cannot ask for escalated permissions",
        "patch rejected: writing is blocked by read-only sandbox; rejected by user approval settings",
    ] {
        assert_eq!(
            parse_line(real, &pats),
            Some(LineSignal::PermissionDenial),
            "{real}"
        );
    }
    assert_eq!(
        parse_line("Permission to use Bash has been auto-denied", &pats),
        Some(LineSignal::PermissionDenial)
    );
    assert_eq!(parse_line("all fine", &pats), None);
}

#[test]
fn shas_are_found_in_push_lines() {
    assert_eq!(
        sha_in("alphavm commit a1b2c3d - CI run #451").as_deref(),
        Some("a1b2c3d")
    );
    assert_eq!(
        sha_in("pushed 0123456789abcdef0123456789abcdef01234567").as_deref(),
        Some("0123456789abcdef0123456789abcdef01234567")
    );
    assert_eq!(sha_in("adnet commit 7F3A2B1").as_deref(), Some("7f3a2b1"));
    assert_eq!(sha_in("no hash here, run #451"), None);
    assert_eq!(sha_in("deadbeef"), Some("deadbeef".into()));
}

#[test]
fn fail_keeps_the_lock_and_alerts() {
    let c = contract();
    for m in [Working, PushedToCi, FixingCi, Blocked, Paused] {
        let (p, fx) = step(
            &c,
            "w",
            &at(m),
            &Event::Fail {
                kind: "respawns_exhausted".into(),
                reason: "gave up".into(),
            },
            T0,
        );
        assert_eq!(p.milestone, Failed, "{m}");
        assert!(
            fx.iter()
                .any(|e| matches!(e, Effect::Alert { kind, .. } if kind == "respawns_exhausted"))
        );
        assert!(!fx.iter().any(|e| matches!(e, Effect::ReleaseLock { .. })));
    }
}

#[test]
fn an_operator_respawn_gives_a_blocked_worker_another_go() {
    let c = contract();
    let respawn = Event::Respawn {
        by: "ops".into(),
        note: "the token has push rights now".into(),
    };
    // Pushed work: CI decides again (FIXING_CI); none: WORKING. Denials forgotten.
    let mut blocked = at(BlockedPermission);
    blocked.permission_denials = 2;
    blocked.end_reason = Some("permission".into());
    let (p, fx) = step(&c, "w", &blocked, &respawn, T0);
    assert_eq!(p.milestone, FixingCi);
    assert_eq!(p.permission_denials, 0);
    assert_eq!(p.end_reason, None);
    assert!(
        fx.iter()
            .any(|e| matches!(e, Effect::Transition { to: FixingCi, .. }))
    );
    let mut fresh = at(Blocked);
    fresh.tracked_sha = None;
    assert_eq!(step(&c, "w", &fresh, &respawn, T0).0.milestone, Working);
    // Anything else is left alone (PAUSED goes on too).
    assert_eq!(
        step(&c, "w", &at(Paused), &respawn, T0).0.milestone,
        FixingCi
    );
    for m in [Working, PushedToCi, FixingCi, Done, Failed, Cancelled] {
        assert_eq!(step(&c, "w", &at(m), &respawn, T0).0.milestone, m, "{m}");
    }
}

#[test]
fn a_pause_freezes_the_milestone_clock_and_a_resume_continues_it() {
    let c = contract();
    // 5 minutes into WORKING (timeout 20m), paused for an hour.
    let w = at(Working);
    let (p, fx) = step(
        &c,
        "w",
        &w,
        &Event::Pause {
            reason: "core main is red: test".into(),
        },
        T0 + 5 * MIN,
    );
    assert_eq!((p.milestone, p.deadline_ms), (Paused, None));
    assert!(
        fx.iter()
            .any(|e| matches!(e, Effect::Alert { kind, .. } if kind == "paused"))
    );
    let (p, fx) = step(&c, "w", &p, &Event::Tick, T0 + 65 * MIN);
    assert_eq!(p.milestone, Paused, "no timeout while paused: {fx:?}");
    let (p, fx) = step(&c, "w", &p, &Event::Resume, T0 + 65 * MIN);
    assert_eq!(p.milestone, Working);
    assert_eq!(
        p.deadline_ms,
        Some(T0 + 65 * MIN + 15 * MIN),
        "15 minutes were left"
    );
    assert_eq!(p.since_ms, T0 + 60 * MIN);
    assert!(fx.contains(&Effect::ResolveAlert {
        kind: "paused".into()
    }));
    assert!(
        fx.iter()
            .any(|e| matches!(e, Effect::Alert { kind, .. } if kind == "resumed"))
    );
    // A BLOCKED worker is not paused (it waits for an operator anyway).
    let (p, fx) = step(
        &c,
        "w",
        &at(Blocked),
        &Event::Pause { reason: "x".into() },
        T0,
    );
    assert_eq!(p.milestone, Blocked);
    assert!(fx.is_empty());
}

#[test]
fn a_green_verdict_that_came_while_paused_finishes_on_resume() {
    let c = contract();
    let sha: crate::sha::Sha = "a".repeat(40).into();
    let (p, _) = step(
        &c,
        "w",
        &ended(PushedToCi),
        &Event::Pause { reason: "x".into() },
        T0,
    );
    let green = Event::Verdict {
        sha,
        kind: VerdictKind::Green,
        failed_jobs: vec![],
        detail: "ok".into(),
        jobs: None,
    };
    let (p, _) = step(&c, "w", &p, &green, T0 + MIN);
    assert_eq!(p.milestone, Paused);
    let (p, fx) = step(&c, "w", &p, &Event::Resume, T0 + 2 * MIN);
    assert_eq!(p.milestone, Done, "{fx:?}");
}

#[test]
fn deadlock_indicators_alert_and_say_what_happens_next() {
    let c = contract();
    let d = c.deadlock.clone();
    let check = |p: &Progress, running: bool, commit: Option<i64>, failures: u32, now: i64| {
        let e = Event::DeadlockCheck {
            worker_running: running,
            last_commit_ms: commit,
            forge_failures: failures,
        };
        let (_, fx) = step(&c, "w", p, &e, now);
        fx.iter()
            .filter_map(|e| match e {
                Effect::Alert { kind, message, .. } => Some((kind.clone(), message.clone())),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    let w = at(Working);
    let idle = T0 + d.worker_idle.as_millis() as i64;
    assert!(check(&w, true, None, 0, idle - 1).is_empty());
    let kinds = check(&w, true, None, 0, idle);
    assert_eq!(kinds[0].0, "deadlock_idle");
    assert!(
        kinds[0].1.contains("at the timeout orch extends once"),
        "{kinds:?}"
    );
    assert!(
        check(&w, false, None, 0, idle).is_empty(),
        "no worker, no idle"
    );
    let late = T0 + d.no_commit_after_working.as_millis() as i64;
    let kinds: Vec<String> = check(&w, true, Some(T0 + 1), 0, late)
        .into_iter()
        .map(|k| k.0)
        .collect();
    assert_eq!(kinds, ["deadlock_idle"], "a commit since WORKING");
    let kinds: Vec<String> = check(&w, true, None, 9, late)
        .into_iter()
        .map(|k| k.0)
        .collect();
    assert_eq!(
        kinds,
        ["deadlock_idle", "deadlock_no_commit", "deadlock_api_errors"]
    );
    let mut pushed = at(PushedToCi);
    pushed.pushed_ms = Some(T0);
    let kinds: Vec<String> = check(&pushed, true, None, 0, T0 + 10 * MIN)
        .into_iter()
        .map(|k| k.0)
        .collect();
    assert_eq!(kinds, ["deadlock_ci_waiting"]);
    // Escalation: the warning says what the timeout will do.
    let (_, fx) = step(&c, "w", &w, &Event::Tick, T0 + 15 * MIN);
    assert!(
        fx.iter().any(
            |e| matches!(e, Effect::Alert { kind, message, severity: Severity::Warning }
        if kind == "timeout_warning" && message.contains("marks it FAILED"))
        ),
        "{fx:?}"
    );
}

mod landing {
    use super::*;
    use crate::config::{LandConfig, LandPolicy};

    fn sha(c: char) -> crate::sha::Sha {
        c.to_string().repeat(40).into()
    }

    fn pushed_with(policy: LandPolicy, dependents: &[&str]) -> Progress {
        let mut c = LandConfig::default_for(crate::config::ForgeKind::Local);
        c.policy = policy;
        let mut p = ended(PushedToCi);
        p.landing = Some(Landing::planned(
            &c,
            dependents.iter().map(|s| s.to_string()).collect(),
        ));
        p
    }

    fn land(p: &Progress, e: LandEvent) -> (Progress, Vec<Effect>) {
        step(&contract(), "w", p, &Event::Land(e), T0)
    }

    fn releases(fx: &[Effect]) -> bool {
        fx.iter().any(|e| matches!(e, Effect::ReleaseLock { .. }))
    }

    fn green(s: crate::sha::Sha) -> LandEvent {
        LandEvent::Verdict {
            sha: s,
            kind: VerdictKind::Green,
            failed_jobs: vec![],
            detail: "ok".into(),
        }
    }

    #[test]
    fn merge_holds_the_lock_from_done_until_the_base_branch_is_green() {
        let p = pushed_with(LandPolicy::Merge, &[]);
        let (p, fx) = step(
            &contract(),
            "w",
            &p,
            &verdict(VerdictKind::Green, &"a".repeat(40)),
            T0,
        );
        assert_eq!(p.milestone, Done);
        assert!(fx.contains(&Effect::Land));
        assert!(
            !releases(&fx),
            "no release at DONE: the change must land first"
        );
        assert_eq!(p.landing.as_ref().unwrap().state, LandState::Pending);
        assert!(p.landing_active() && !p.change_complete());
        // Fast-forward, then the base branch's CI.
        let moved = LandEvent::Moved {
            to: sha('a'),
            how: "fast-forward".into(),
            from: None,
            runs_before: 0,
        };
        let (p, fx) = land(&p, moved);
        assert_eq!(p.landing.as_ref().unwrap().state, LandState::BaseCi);
        assert!(!releases(&fx));
        // A verdict about another commit changes nothing.
        let (p, fx) = land(&p, green(sha('b')));
        assert_eq!(p.landing.as_ref().unwrap().state, LandState::BaseCi);
        assert!(fx.is_empty());
        let (p, fx) = land(&p, green(sha('a')));
        assert_eq!(p.landing.as_ref().unwrap().state, LandState::Landed);
        assert!(releases(&fx));
        assert!(p.change_complete() && !p.landing_active());
        // Nothing moves a landed change.
        let (q, fx) = land(&p, green(sha('a')));
        assert_eq!(q, p);
        assert!(fx.is_empty());
    }

    #[test]
    fn a_change_found_on_the_base_waits_for_no_new_run_and_replan_forgets_the_last_landing() {
        let p = pushed_with(LandPolicy::Merge, &["vm"]);
        let (mut p, _) = step(
            &contract(),
            "w",
            &p,
            &verdict(VerdictKind::Green, &"a".repeat(40)),
            T0,
        );
        // What a landing before a crash left (a rebuilt record carries it).
        p.landing.as_mut().unwrap().base_runs_before = Some(3);
        let (p, _) = land(&p, LandEvent::OnBase { head: sha('a') });
        let l = p.landing.as_ref().unwrap();
        assert_eq!(l.state, LandState::BaseCi);
        assert_eq!(
            l.base_runs_before, None,
            "its base run may be among the runs already"
        );
        let mut l = l.clone();
        l.replan();
        assert_eq!(l.state, LandState::Planned);
        assert_eq!((l.landed.clone(), l.attempts), (None, 0));
        assert_eq!(l.downstream.len(), 1, "the plan is kept");
    }

    /// DONE at `a`, its landing at `state`.
    fn done_landing(state: LandState) -> Progress {
        let p = pushed_with(LandPolicy::Merge, &[]);
        let (mut p, _) = step(
            &contract(),
            "w",
            &p,
            &verdict(VerdictKind::Green, &"a".repeat(40)),
            T0,
        );
        assert_eq!(p.milestone, Done);
        p.landing.as_mut().unwrap().state = state;
        p
    }

    fn branch_moved(p: &Progress, head: Option<crate::sha::Sha>) -> (Progress, Vec<Effect>) {
        let event = Event::DoneBranchMoved {
            done: sha('a'),
            head,
        };
        step(&contract(), "w", p, &event, T0 + 5)
    }

    #[test]
    fn a_done_branch_moved_before_the_base_moved_takes_done_back() {
        for state in [LandState::Pending, LandState::Verifying] {
            let (p, fx) = branch_moved(&done_landing(state), Some(sha('b')));
            assert_eq!(p.milestone, Blocked, "{state}");
            assert_eq!(p.landing.as_ref().unwrap().state, LandState::Planned);
            assert!(
                !p.landing_active() && !releases(&fx),
                "lock kept, nothing lands"
            );
            let alert = alerts_of(&fx, "done_reopened");
            assert_eq!(alert.len(), 1, "{fx:?}");
            assert!(alert[0].contains(&"a".repeat(40)) && alert[0].contains(&"b".repeat(40)));
            // The move itself, under the kind the forge's hook raises for a push.
            let moved = alerts_of(&fx, "done_branch_moved");
            assert_eq!(moved.len(), 1, "{fx:?}");
            assert!(moved[0].contains(&"b".repeat(40)), "{}", moved[0]);
            assert!(fx.contains(&Effect::Transition {
                from: Done,
                to: Blocked,
                reason: p.end_reason.clone().unwrap(),
            }));
        }
        // Deleted, too.
        let (p, _) = branch_moved(&done_landing(LandState::Pending), None);
        assert_eq!(p.milestone, Blocked);
        assert!(p.end_reason.unwrap().contains("deleted"));
    }

    #[test]
    fn a_done_branch_moved_after_the_base_moved_or_not_moved_at_all_keeps_done() {
        for state in [LandState::BaseCi, LandState::Downstream, LandState::Landed] {
            let before = done_landing(state);
            let (p, fx) = branch_moved(&before, Some(sha('b')));
            assert_eq!(p.milestone, Done, "{state}");
            assert_eq!(p.landing, before.landing);
            assert_eq!(alerts_of(&fx, "done_branch_moved").len(), 1, "{fx:?}");
        }
        let before = done_landing(LandState::Pending);
        let (p, fx) = branch_moved(&before, Some(sha('a')));
        assert_eq!((p, fx), (before.clone(), vec![]), "the same head: nothing");
        let event = Event::DoneBranchMoved {
            done: sha('c'),
            head: Some(sha('b')),
        };
        let (p, fx) = step(&contract(), "w", &before, &event, T0 + 5);
        assert_eq!((p, fx), (before, vec![]), "about another commit: nothing");
    }

    #[test]
    fn none_releases_at_done_and_lands_when_seen_on_the_base() {
        let p = pushed_with(LandPolicy::None, &[]);
        let (p, fx) = step(
            &contract(),
            "w",
            &p,
            &verdict(VerdictKind::Green, &"a".repeat(40)),
            T0,
        );
        assert!(releases(&fx));
        assert!(!fx.contains(&Effect::Land));
        assert_eq!(p.landing.as_ref().unwrap().state, LandState::Waiting);
        assert!(!p.change_complete() && !p.landing_active());
        let (p, fx) = land(&p, LandEvent::OnBase { head: sha('c') });
        assert_eq!(p.landing.as_ref().unwrap().state, LandState::Landed);
        assert!(!releases(&fx), "released already");
        assert!(p.change_complete());
    }

    #[test]
    fn a_lost_compare_and_swap_integrates_again_until_attempts_run_out() {
        let mut p = pushed_with(LandPolicy::Merge, &[]);
        p.landing.as_mut().unwrap().max_attempts = 2;
        let (mut p, _) = step(
            &contract(),
            "w",
            &p,
            &verdict(VerdictKind::Green, &"a".repeat(40)),
            T0,
        );
        for attempt in 1..=2 {
            let built = LandEvent::Built {
                candidate: sha('m'),
                onto: sha('b'),
            };
            let (q, _) = land(&p, built);
            assert_eq!(q.landing.as_ref().unwrap().attempts, attempt);
            let (q, fx) = land(
                &q,
                LandEvent::Lost {
                    reason: "main moved".into(),
                },
            );
            p = q;
            if attempt < 2 {
                assert_eq!(p.landing.as_ref().unwrap().state, LandState::Pending);
                assert!(fx.iter().all(|e| !matches!(e, Effect::Alert { .. })));
            } else {
                assert_eq!(p.landing.as_ref().unwrap().state, LandState::Refused);
                assert!(
                    fx.iter().any(
                        |e| matches!(e, Effect::Alert { kind, .. } if kind == "landing_refused")
                    )
                );
                assert!(!releases(&fx), "a refusal keeps the lock for a person");
            }
        }
    }

    #[test]
    fn a_red_integration_or_a_conflict_keeps_the_lock_with_an_alert() {
        let p = pushed_with(LandPolicy::Merge, &[]);
        let (p, _) = step(
            &contract(),
            "w",
            &p,
            &verdict(VerdictKind::Green, &"a".repeat(40)),
            T0,
        );
        let (c, fx) = land(
            &p,
            LandEvent::Conflict {
                detail: "x.txt".into(),
            },
        );
        assert_eq!(c.landing.as_ref().unwrap().state, LandState::Conflict);
        assert!(!releases(&fx));
        assert!(
            fx.iter()
                .any(|e| matches!(e, Effect::Alert { kind, .. } if kind == "landing_conflict"))
        );
        let (v, _) = land(
            &p,
            LandEvent::Built {
                candidate: sha('m'),
                onto: sha('b'),
            },
        );
        let red = LandEvent::Verdict {
            sha: sha('m'),
            kind: VerdictKind::Red,
            failed_jobs: vec!["test".into()],
            detail: "red".into(),
        };
        let (v, fx) = land(&v, red);
        assert_eq!(v.landing.as_ref().unwrap().state, LandState::Conflict);
        assert!(!releases(&fx));
    }

    #[test]
    fn a_pull_request_is_opened_merged_and_its_base_ci_frees_the_lock_or_refused_with_words() {
        let p = pushed_with(LandPolicy::PullRequest, &[]);
        let (p, fx) = step(
            &contract(),
            "w",
            &p,
            &verdict(VerdictKind::Green, &"a".repeat(40)),
            T0,
        );
        assert!(fx.contains(&Effect::Land) && !releases(&fx));
        let opened = LandEvent::PullOpened {
            number: 7,
            url: Some("https://forge/pulls/7".into()),
        };
        let (p, fx) = land(&p, opened.clone());
        let l = p.landing.as_ref().unwrap();
        assert_eq!((l.state, l.pull), (LandState::Pending, Some(7)));
        assert_eq!(l.summary(), "pull request #7 open");
        assert!(fx.iter().any(|e| matches!(e, Effect::Landing { .. })));
        // Seen again (a resumed supervisor finds it open): nothing new.
        let (q, fx) = land(&p, opened);
        assert_eq!(q, p);
        assert!(fx.is_empty());
        let refused = LandEvent::Refused {
            reason: "Forgejo refused to merge pull request #7 (HTTP 405: not allowed to merge [reason: Does not have enough approvals])".into(),
        };
        let (r, fx) = land(&p, refused);
        assert_eq!(r.landing.as_ref().unwrap().state, LandState::Refused);
        assert!(!releases(&fx));
        assert!(
            fx.iter()
                .any(|e| matches!(e, Effect::Alert { kind, message, .. }
            if kind == "landing_refused" && message.contains("enough approvals")))
        );
        let merged = LandEvent::Moved {
            to: sha('m'),
            how: "pull request #7 merged (merge)".into(),
            from: None,
            runs_before: 0,
        };
        let (p, _) = land(&p, merged);
        assert_eq!(p.landing.as_ref().unwrap().state, LandState::BaseCi);
        let (p, fx) = land(&p, green(sha('m')));
        assert_eq!(p.landing.as_ref().unwrap().state, LandState::Landed);
        assert!(releases(&fx));
    }

    #[test]
    fn revert_on_breakage_lands_a_verified_revert_under_the_lock() {
        let mut p = pushed_with(LandPolicy::Merge, &["vm"]);
        p.landing.as_mut().unwrap().revert_on_breakage = true;
        let (p, _) = step(
            &contract(),
            "w",
            &p,
            &verdict(VerdictKind::Green, &"a".repeat(40)),
            T0,
        );
        let moved = LandEvent::Moved {
            to: sha('a'),
            how: "fast-forward".into(),
            from: Some(sha('b')),
            runs_before: 0,
        };
        let (p, _) = land(&p, moved);
        assert_eq!(p.landing.as_ref().unwrap().onto, Some(sha('b')));
        let (p, _) = land(&p, green(sha('a')));
        let (p, _) = land(
            &p,
            LandEvent::CheckStarted {
                repo: "vm".into(),
                sha: sha('v'),
            },
        );
        let (p, fx) = land(
            &p,
            LandEvent::CheckVerdict {
                repo: "vm".into(),
                sha: sha('v'),
                kind: VerdictKind::Red,
                failed_jobs: vec!["test".into()],
                detail: String::new(),
                already_red: None,
            },
        );
        assert_eq!(p.landing.as_ref().unwrap().state, LandState::Reverting);
        assert!(!releases(&fx) && !fx.iter().any(|e| matches!(e, Effect::HoldChain { .. })));
        assert!(p.landing_active());
        let (p, _) = land(
            &p,
            LandEvent::RevertBuilt {
                sha: sha('r'),
                onto: sha('a'),
            },
        );
        // The revert's own CI green; the supervisor moves the base: then the base CI.
        let (p, fx) = land(&p, green(sha('r')));
        assert_eq!(p.landing.as_ref().unwrap().state, LandState::Reverting);
        assert!(!releases(&fx));
        let (p, _) = land(&p, LandEvent::RevertMoved { to: sha('r') });
        let (p, fx) = land(&p, green(sha('r')));
        assert_eq!(p.landing.as_ref().unwrap().state, LandState::Reverted);
        assert!(releases(&fx));
        assert!(!p.change_complete(), "a reverted change did not land");
    }

    #[test]
    fn a_red_dependent_releases_the_lock_and_holds_its_chain_in_that_order() {
        let p = pushed_with(LandPolicy::Merge, &["vm", "os"]);
        let (p, _) = step(
            &contract(),
            "w",
            &p,
            &verdict(VerdictKind::Green, &"a".repeat(40)),
            T0,
        );
        let moved = LandEvent::Moved {
            to: sha('a'),
            how: "fast-forward".into(),
            from: None,
            runs_before: 0,
        };
        let (p, _) = land(&p, moved);
        let (p, fx) = land(&p, green(sha('a')));
        assert_eq!(p.landing.as_ref().unwrap().state, LandState::Downstream);
        assert!(!releases(&fx), "the dependents are checked under the lock");
        assert!(p.landing_active());
        let started = |p: &Progress, repo: &str, c: char| {
            land(
                p,
                LandEvent::CheckStarted {
                    repo: repo.into(),
                    sha: sha(c),
                },
            )
            .0
        };
        let p = started(&p, "vm", 'v');
        let p = started(&p, "os", 'o');
        let check = |repo: &str, c: char, kind| LandEvent::CheckVerdict {
            repo: repo.into(),
            sha: sha(c),
            kind,
            failed_jobs: if kind == VerdictKind::Red {
                vec!["test".into()]
            } else {
                vec![]
            },
            detail: String::new(),
            already_red: None,
        };
        // A verdict for a commit that was not the one checked is ignored.
        let (q, fx) = land(&p, check("vm", 'x', VerdictKind::Red));
        assert_eq!(q, p);
        assert!(fx.is_empty());
        let (p, fx) = land(&p, check("vm", 'v', VerdictKind::Green));
        assert_eq!(p.landing.as_ref().unwrap().state, LandState::Downstream);
        assert!(!releases(&fx));
        let (p, fx) = land(&p, check("os", 'o', VerdictKind::Red));
        assert_eq!(p.landing.as_ref().unwrap().state, LandState::Broken);
        assert!(p.change_complete(), "the change is landed; os is held");
        let release = fx
            .iter()
            .position(|e| matches!(e, Effect::ReleaseLock { .. }));
        let hold = fx
            .iter()
            .position(|e| matches!(e, Effect::HoldChain { repo, .. } if repo == "os"));
        assert!(
            release.is_some() && hold.is_some() && release < hold,
            "released, then held, in one entry: {fx:?}"
        );
        assert!(fx.iter().any(|e| matches!(e, Effect::Alert { kind, message, .. }
            if kind == "downstream_breakage" && message.contains("aaaaaaa") && message.contains("test"))));
    }
}

mod protected {
    use super::*;

    fn touching(mut p: Progress) -> Progress {
        p.protected = vec!["ci/test.sh".into()];
        p
    }

    fn done_claim() -> Event {
        Event::DoneClaim {
            via: Channel::Report,
        }
    }

    fn approve(sha: &str) -> Event {
        Event::Approve {
            sha: sha.into(),
            by: "ops (uid 0)".into(),
        }
    }

    fn releases(fx: &[Effect]) -> bool {
        fx.iter()
            .any(|e| matches!(e, Effect::ReleaseLock { .. } | Effect::Land))
    }

    /// A green DONE claim on a change touching protected paths: BLOCKED with the reason, the
    /// lock kept, the worker stopped, a warning naming the worker, the commit and the files.
    fn held() -> (Progress, Vec<Effect>) {
        let c = contract();
        let sha = "a".repeat(40);
        let (p, _) = step(
            &c,
            "w",
            &touching(at(PushedToCi)),
            &verdict(VerdictKind::Green, &sha),
            T0,
        );
        assert_eq!(p.milestone, PushedToCi, "green alone is not DONE");
        step(&c, "w", &p, &done_claim(), T0 + 1)
    }

    #[test]
    fn a_green_change_touching_protected_paths_is_held_not_done() {
        let (p, fx) = held();
        assert_eq!(p.milestone, Blocked);
        assert_eq!(p.held.as_deref(), Some("a".repeat(40).as_str()));
        assert!(!releases(&fx), "the lock stays held: {fx:?}");
        let reason = p.end_reason.clone().unwrap();
        assert!(
            reason.contains("touches protected paths: ci/test.sh"),
            "{reason}"
        );
        assert!(reason.contains("orch approve w"), "{reason}");
        assert!(
            fx.iter()
                .any(|e| matches!(e, Effect::StopWorker { reason, .. } if reason == HELD_STOP))
        );
        let alert = fx
            .iter()
            .find_map(|e| match e {
                Effect::Alert {
                    severity,
                    kind,
                    message,
                } if kind == "protected_paths" => Some((*severity, message.clone())),
                _ => None,
            })
            .expect("an alert");
        assert_eq!(alert.0, Severity::Warning);
        for part in ["worker w", "aaaaaaa", "ci/test.sh"] {
            assert!(alert.1.contains(part), "{}", alert.1);
        }
    }

    #[test]
    fn the_end_of_a_turn_on_green_is_held_the_same_way() {
        let c = contract();
        let sha = "a".repeat(40);
        let (p, fx) = step(
            &c,
            "w",
            &touching(ended(PushedToCi)),
            &verdict(VerdictKind::Green, &sha),
            T0,
        );
        assert_eq!(p.milestone, Blocked);
        assert!(!releases(&fx));
    }

    #[test]
    fn an_approval_of_the_held_commit_makes_it_done_and_any_other_is_refused() {
        let c = contract();
        let (p, _) = held();
        let (same, fx) = step(&c, "w", &p, &approve(&"b".repeat(40)), T0 + 2);
        assert_eq!(same.milestone, Blocked, "another commit is not approved");
        assert!(
            fx.iter()
                .any(|e| matches!(e, Effect::Violation { kind, .. } if kind == "approval_refused"))
        );
        let (done, fx) = step(&c, "w", &p, &approve(&"a".repeat(40)), T0 + 2);
        assert_eq!(done.milestone, Done);
        assert!(releases(&fx), "{fx:?}");
        assert_eq!(done.approved.as_deref(), Some("a".repeat(40).as_str()));
        assert!(done.held.is_none());
        assert!(fx.iter().any(|e| matches!(e, Effect::Alert { kind, message, .. } if kind == "approved" && message.contains("ops (uid 0)"))));
        assert!(fx.contains(&Effect::ResolveAlert {
            kind: "protected_paths".into()
        }));
    }

    #[test]
    fn an_approval_is_bound_to_its_commit_a_later_push_needs_a_new_one() {
        let c = contract();
        let a = "a".repeat(40);
        let b = "b".repeat(40);
        let mut p = touching(at(PushedToCi));
        // Approved ahead of DONE while the worker works on.
        let (p1, fx) = step(&c, "w", &p, &approve(&a), T0);
        assert_eq!(p1.approved.as_deref(), Some(a.as_str()));
        assert_eq!(p1.milestone, PushedToCi);
        assert!(!fx.iter().any(|e| matches!(e, Effect::Violation { .. })));
        p = p1;
        // A new push touching the protected paths again.
        let push = Event::Push {
            sha: b.clone().into(),
            pushed_ms: T0,
            via: Channel::Report,
            protected: vec![".forgejo/workflows/x.yml".into()],
            secrets: Vec::new(),
        };
        let (p2, _) = step(&c, "w", &p, &push, T0 + 1);
        assert!(p2.needs_approval(), "the approval was of {a}, not {b}");
        let (p3, _) = step(&c, "w", &p2, &verdict(VerdictKind::Green, &b), T0 + 2);
        let (p4, fx) = step(&c, "w", &p3, &done_claim(), T0 + 3);
        assert_eq!(p4.milestone, Blocked);
        assert!(!releases(&fx));
        assert!(p4.end_reason.unwrap().contains(".forgejo/workflows/x.yml"));
        // The approved commit itself goes straight to DONE.
        let (q, _) = step(&c, "w", &p, &verdict(VerdictKind::Green, &a), T0 + 1);
        let (q, fx) = step(&c, "w", &q, &done_claim(), T0 + 2);
        assert_eq!(q.milestone, Done);
        assert!(releases(&fx));
    }

    #[test]
    fn a_change_touching_nothing_protected_needs_no_approval_and_cannot_get_one() {
        let c = contract();
        let sha = "a".repeat(40);
        let (p, _) = step(
            &c,
            "w",
            &at(PushedToCi),
            &verdict(VerdictKind::Green, &sha),
            T0,
        );
        let (p2, fx) = step(&c, "w", &p, &approve(&sha), T0 + 1);
        assert!(fx.iter().any(|e| matches!(e, Effect::Violation { kind, detail } if kind == "approval_refused" && detail.contains("no protected path"))));
        assert!(p2.approved.is_none());
        let (done, _) = step(&c, "w", &p, &done_claim(), T0 + 1);
        assert_eq!(done.milestone, Done);
    }

    #[test]
    fn a_held_worker_respawned_goes_back_to_fixing_ci_without_its_hold() {
        let c = contract();
        let (p, _) = held();
        let (r, _) = step(
            &c,
            "w",
            &p,
            &Event::Respawn {
                by: "ops".into(),
                note: "leave ci/ alone".into(),
            },
            T0 + 2,
        );
        assert_eq!(r.milestone, FixingCi);
        assert!(r.held.is_none());
        let (_, fx) = step(&c, "w", &r, &approve(&"a".repeat(40)), T0 + 3);
        assert!(!releases(&fx));
    }

    #[test]
    fn a_held_commit_whose_ci_went_red_is_not_approved() {
        let c = contract();
        let (mut p, _) = held();
        p.verdict = Some(VerdictKind::Red);
        let (q, fx) = step(&c, "w", &p, &approve(&"a".repeat(40)), T0 + 2);
        assert_eq!(q.milestone, Blocked);
        assert!(fx.iter().any(
            |e| matches!(e, Effect::Violation { detail, .. } if detail.contains("no longer green"))
        ));
    }
}

#[test]
fn a_fatal_halts_a_worker_at_work_and_only_its_clearing_lets_it_go_on() {
    let c = contract();
    let fatal = |raised| Event::Fatal {
        reason: "data corruption".into(),
        raised,
    };
    // Seen by a supervisor in the chain: paused as a cascade does, no hold taken.
    let (p, fx) = step(&c, "w", &at(FixingCi), &fatal(false), T0);
    assert_eq!(p.milestone, Paused);
    assert_eq!(p.paused_from, Some(FixingCi));
    assert_eq!(p.halted.as_deref(), Some("data corruption"));
    assert!(fx.contains(&Effect::SuspendWorker));
    assert!(!fx.iter().any(|e| matches!(e, Effect::HoldFatal { .. })));
    assert!(!fx.iter().any(|e| matches!(e, Effect::ReleaseLock { .. })));
    assert_eq!(alerts_of(&fx, "halted").len(), 1);
    // An upstream green again, a resumer, a respawn: none lets it go on.
    for e in [
        Event::Resume,
        Event::Unpaused {
            reason: "resumed".into(),
        },
        Event::Respawn {
            by: "op".into(),
            note: String::new(),
        },
    ] {
        let (q, _) = step(&c, "w", &p, &e, T0 + MIN);
        assert_eq!(q.milestone, Paused, "{e:?}");
        assert!(q.halted.is_some());
    }
    // Cleared under a red upstream: still PAUSED (the cascade's), no longer halted.
    let cleared = |upstream_red| Event::FatalCleared {
        by: "op".into(),
        upstream_red,
    };
    let (q, _) = step(&c, "w", &p, &cleared(true), T0 + MIN);
    assert_eq!((q.milestone, q.halted.as_deref()), (Paused, None));
    // Cleared: back where it stopped, its processes continued.
    let (q, fx) = step(&c, "w", &p, &cleared(false), T0 + MIN);
    assert_eq!((q.milestone, q.halted.as_deref()), (FixingCi, None));
    assert!(fx.contains(&Effect::ContinueWorker));
    // The worker that reports it takes the hold and raises the critical alert.
    let (p, fx) = step(&c, "w", &at(Working), &fatal(true), T0);
    assert_eq!(p.milestone, Paused);
    assert!(fx.contains(&Effect::HoldFatal {
        reason: "data corruption".into()
    }));
    assert!(fx.iter().any(|e| matches!(
        e,
        Effect::Alert { severity: Severity::Critical, kind, .. } if kind == "fatal"
    )));
    // A BLOCKED worker stays BLOCKED, halted: no respawn until cleared.
    let (p, _) = step(&c, "w", &at(Blocked), &fatal(false), T0);
    assert_eq!((p.milestone, p.halted.is_some()), (Blocked, true));
}

#[test]
fn a_push_carrying_a_secret_is_fatal_and_never_done() {
    let c = contract();
    let sha = "b".repeat(40);
    let mut e = push(&sha);
    if let Event::Push { secrets, .. } = &mut e {
        secrets.push("keys/id:1: an OpenSSH private key".into());
    }
    let (p, fx) = step(&c, "w", &at(Working), &e, T0);
    assert_eq!(p.milestone, Paused);
    assert_eq!(p.secrets.len(), 1);
    let hold = fx.iter().find_map(|e| match e {
        Effect::HoldFatal { reason } => Some(reason.clone()),
        _ => None,
    });
    assert!(
        hold.as_deref()
            .is_some_and(|r| r.contains("keys/id:1: an OpenSSH private key")),
        "{hold:?}"
    );
    // Cleared (the key rotated), CI green, the worker's word: still not DONE on that commit.
    let (p, _) = step(
        &c,
        "w",
        &p,
        &Event::FatalCleared {
            by: "op".into(),
            upstream_red: false,
        },
        T0 + 1,
    );
    assert_eq!(p.milestone, PushedToCi);
    let mut p = p;
    p.turn_ended = true;
    let (p, fx) = step(&c, "w", &p, &verdict(VerdictKind::Green, &sha), T0 + 2);
    assert_eq!(p.milestone, PushedToCi);
    assert!(
        !fx.iter()
            .any(|e| matches!(e, Effect::Land | Effect::ReleaseLock { .. }))
    );
    // A rewritten branch without it is an ordinary push again.
    let clean = "c".repeat(40);
    let (p, _) = step(&c, "w", &p, &push(&clean), T0 + 3);
    assert!(p.secrets.is_empty());
    let (p, _) = step(&c, "w", &p, &verdict(VerdictKind::Green, &clean), T0 + 4);
    assert_eq!(p.milestone, Done);
}

#[test]
fn decision_lines_are_kept_once_each_and_bounded() {
    let pats = contract().permission.patterns;
    assert_eq!(
        parse_line("DECISION: keep the v1 wire format, clients pin it", &pats),
        Some(LineSignal::Decision(
            "keep the v1 wire format, clients pin it".into()
        ))
    );
    assert_eq!(parse_line("MY_DECISION: no", &pats), None, "glued");
    assert_eq!(parse_line("DECISION:   ", &pats), None, "nothing decided");
    assert!(
        matches!(
            parse_line("DECISION: x then DONE: y", &pats),
            Some(LineSignal::Milestone {
                milestone: Done,
                ..
            })
        ),
        "a milestone on the line wins"
    );
    let c = contract();
    let mut p = at(Working);
    for i in 0..(crate::milestone::MAX_DECISIONS + 5) {
        for _ in 0..2 {
            let e = Event::Decision {
                text: format!("decision {i}"),
            };
            let (q, fx) = step(&c, "w", &p, &e, T0 + MIN);
            assert!(fx.is_empty(), "{fx:?}");
            assert_eq!(q.milestone, Working);
            p = q;
        }
    }
    assert_eq!(p.decisions.len(), crate::milestone::MAX_DECISIONS);
    assert_eq!(p.decisions[0], "decision 0");
    assert_eq!(p.decisions[1], "decision 1", "each once");
    let (p, _) = step(
        &c,
        "w",
        &p,
        &Event::Summary {
            text: "added the retry".into(),
        },
        T0 + MIN,
    );
    assert_eq!(p.summary.as_deref(), Some("added the retry"));
}
