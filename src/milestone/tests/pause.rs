//! Pauses and their resumption, an operator's respawn, FATAL halts and committed secrets.

use super::*;

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
