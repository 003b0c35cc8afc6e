//! Timers: the milestone timeouts and what follows them, the whole-life cap, the deadlock indicators.

use super::*;

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
