//! CI verdicts on the tracked commit, fix attempts and their escalation, DONE claims judged on CI.

use super::*;

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
