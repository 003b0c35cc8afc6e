//! The landing after DONE: each `LandEvent` from each landing state, and when the lock goes.

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
                fx.iter()
                    .any(|e| matches!(e, Effect::Alert { kind, .. } if kind == "landing_refused"))
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
