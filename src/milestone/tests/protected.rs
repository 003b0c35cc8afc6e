//! Changes that touch protected paths: held BLOCKED until an operator approves that commit.

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
