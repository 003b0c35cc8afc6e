//! The worker's word: milestone lines, reports (BLOCKED, FAIL, permission denials), decisions.

use super::*;

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
