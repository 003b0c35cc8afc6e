//! One test per row of the reconcile table (see the module doc), plus the edges.

use super::*;
use crate::contract::Contract;
use crate::milestone::Severity;

const T0: i64 = 1_000_000;
const NOW: i64 = T0 + 3_600_000;

fn contract() -> Contract {
    Contract::embedded()
}

fn sha(c: char) -> Sha {
    Sha::from(c.to_string().repeat(40))
}

/// A worker in `m` (PUSHED_TO_CI and FIXING_CI with SHA a… tracked).
fn progress(m: Milestone) -> Progress {
    let c = contract();
    let mut p = Progress::new(&c, T0);
    p.enter(&c, m, T0);
    if m != Milestone::Working {
        p.tracked_sha = Some(sha('a'));
        p.pushed_ms = Some(T0);
    }
    p
}

fn seen(kind: VerdictKind) -> SeenVerdict {
    SeenVerdict {
        sha: sha('a'),
        kind,
        failed_jobs: if kind == VerdictKind::Red {
            vec!["test".into()]
        } else {
            vec![]
        },
        detail: format!("CI {kind}"),
    }
}

fn case(p: &Progress, verdict: Option<SeenVerdict>) -> Case<'_> {
    Case {
        worker: "w-1",
        progress: p,
        respawns: 0,
        max_respawns: 3,
        unreported_push: None,
        unreported_protected: Vec::new(),
        unreported_secrets: Vec::new(),
        verdict,
        why: "its supervisor died",
    }
}

fn releases_lock(d: &Decision) -> bool {
    d.effects
        .iter()
        .any(|e| matches!(e, Effect::ReleaseLock { .. }))
}

/// In `m` after its worker ended its turn (exit 0): its word that the work is done.
fn ended(m: Milestone) -> Progress {
    let mut p = progress(m);
    p.turn_ended = true;
    p
}

#[test]
fn green_with_the_workers_word_is_done_and_releases_the_lock() {
    let p = ended(Milestone::PushedToCi);
    let d = decide(&contract(), &case(&p, Some(seen(VerdictKind::Green))), NOW);
    assert_eq!(d.action, Action::Done);
    assert_eq!(d.progress.milestone, Milestone::Done);
    assert!(releases_lock(&d));
    assert_eq!(d.respawns, 0);
}

#[test]
fn green_without_the_workers_word_goes_to_a_replacement_that_finishes() {
    let p = progress(Milestone::PushedToCi);
    let d = decide(&contract(), &case(&p, Some(seen(VerdictKind::Green))), NOW);
    assert_eq!(d.action, Action::Respawned);
    assert_eq!(d.progress.milestone, Milestone::PushedToCi);
    assert_eq!(d.progress.verdict, Some(VerdictKind::Green));
    assert!(!releases_lock(&d));
    assert_eq!(d.respawns, 1);
    let note = resume_note(&d.progress, "it died", 1, 3, &[], &[]);
    assert!(note.contains("CI is green for aaaaaaa"), "{note}");
    assert!(note.contains("then report DONE"), "{note}");
}

#[test]
fn red_is_fixing_ci_with_a_replacement() {
    let p = progress(Milestone::PushedToCi);
    let d = decide(&contract(), &case(&p, Some(seen(VerdictKind::Red))), NOW);
    assert_eq!(d.action, Action::Respawned);
    assert_eq!(d.progress.milestone, Milestone::FixingCi);
    assert_eq!(d.progress.fix_attempts, 1);
    assert_eq!(d.respawns, 1);
    assert!(!releases_lock(&d));
    assert_eq!(d.progress.since_ms, NOW, "fresh timers");
}

#[test]
fn pending_running_or_unknown_ci_is_followed_by_a_new_supervisor() {
    for verdict in [
        Some(seen(VerdictKind::Pending)),
        Some(seen(VerdictKind::Running)),
        None,
    ] {
        let p = ended(Milestone::PushedToCi);
        let d = decide(&contract(), &case(&p, verdict.clone()), NOW);
        assert_eq!(d.action, Action::Following, "{verdict:?}");
        assert_eq!(d.progress.milestone, Milestone::PushedToCi);
        assert_eq!(d.respawns, 0, "following is not a replacement");
        assert_eq!(d.progress.since_ms, NOW);
        assert_eq!(d.progress.last_progress_ms, NOW);
        assert!(!d.progress.warned && !d.progress.extended);
        // A worker that died mid-turn has a replacement go on beside CI.
        let p = progress(Milestone::PushedToCi);
        let d = decide(&contract(), &case(&p, verdict.clone()), NOW);
        assert_eq!(d.action, Action::Respawned, "{verdict:?}");
        assert_eq!(d.progress.milestone, Milestone::PushedToCi);
        assert_eq!(d.respawns, 1);
    }
}

#[test]
fn sync_not_done_and_no_run_need_a_new_push_from_a_replacement() {
    for kind in [VerdictKind::SyncNotDone, VerdictKind::NoRun] {
        let p = progress(Milestone::PushedToCi);
        let d = decide(&contract(), &case(&p, Some(seen(kind))), NOW);
        assert_eq!(d.action, Action::Respawned, "{kind}");
        assert_eq!(d.progress.milestone, Milestone::FixingCi);
        assert_eq!(d.progress.fix_attempts, 1, "counted as a fix attempt");
        assert_eq!(d.respawns, 1);
    }
}

#[test]
fn nothing_pushed_continues_working_with_a_clean_slate() {
    let mut p = progress(Milestone::Working);
    p.end_reason = Some("worker exited (exit code 3) in WORKING".into());
    p.permission_denials = 1;
    let d = decide(&contract(), &case(&p, None), NOW);
    assert_eq!(d.action, Action::Respawned);
    assert_eq!(d.progress.milestone, Milestone::Working);
    assert_eq!(d.progress.end_reason, None);
    assert_eq!(d.progress.permission_denials, 0);
    assert_eq!(d.respawns, 1);
}

#[test]
fn a_worker_out_of_replacements_fails_and_keeps_its_lock() {
    let p = progress(Milestone::Working);
    let mut c = case(&p, None);
    c.respawns = 3;
    let d = decide(&contract(), &c, NOW);
    assert_eq!(d.action, Action::Failed);
    assert_eq!(d.progress.milestone, Milestone::Failed);
    assert_eq!(d.respawns, 3);
    assert!(
        !releases_lock(&d),
        "an operator decides what happens to the chain"
    );
    assert!(d.effects.iter().any(|e| matches!(
        e,
        Effect::Alert { severity: Severity::Critical, kind, message }
            if kind == "respawns_exhausted" && message.contains("its supervisor died")
    )));
}

#[test]
fn fix_attempts_exhausted_fail() {
    let c = contract();
    let mut p = progress(Milestone::PushedToCi);
    p.fix_attempts = c.fixing_ci_max_attempts;
    let d = decide(&c, &case(&p, Some(seen(VerdictKind::Red))), NOW);
    assert_eq!(d.action, Action::Failed);
    assert_eq!(d.progress.milestone, Milestone::Failed);
    assert_eq!(d.respawns, 0, "no replacement was started");
}

#[test]
fn an_unreported_push_counts_as_reported() {
    let p = progress(Milestone::Working);
    let mut c = case(&p, Some(seen(VerdictKind::Green)));
    c.unreported_push = Some((sha('a'), T0 + 5));
    let d = decide(&contract(), &c, NOW);
    assert_eq!(
        d.action,
        Action::Respawned,
        "green, but the worker never said DONE"
    );
    assert_eq!(d.progress.milestone, Milestone::PushedToCi);
    assert!(matches!(d.events[0], Event::Push { .. }));
    assert_eq!(d.progress.pushed_ms, Some(T0 + 5));
    assert!(d.effects.contains(&Effect::Track { sha: sha('a') }));
}

#[test]
fn an_unreported_push_with_ci_still_running_is_followed() {
    let p = progress(Milestone::FixingCi);
    let mut c = case(
        &p,
        Some(SeenVerdict {
            sha: sha('b'),
            ..seen(VerdictKind::Running)
        }),
    );
    c.unreported_push = Some((sha('b'), T0 + 5));
    let d = decide(&contract(), &c, NOW);
    assert_eq!(d.action, Action::Respawned, "its worker died mid-turn");
    assert_eq!(d.progress.milestone, Milestone::PushedToCi);
    assert_eq!(d.progress.tracked_sha, Some(sha('b')));
    assert_eq!(d.respawns, 1);
}

#[test]
fn fixing_ci_without_a_new_push_gets_a_replacement() {
    let p = progress(Milestone::FixingCi);
    let d = decide(&contract(), &case(&p, Some(seen(VerdictKind::Red))), NOW);
    assert_eq!(d.action, Action::Respawned);
    assert_eq!(d.progress.milestone, Milestone::FixingCi);
}

#[test]
fn a_worker_waiting_for_an_operator_is_left_alone() {
    let p = progress(Milestone::Blocked);
    let d = decide(&contract(), &case(&p, None), NOW);
    assert_eq!(d.action, Action::Unchanged);
    assert_eq!(d.progress, p);
    assert!(d.effects.is_empty());
}

#[test]
fn the_note_says_what_is_missing() {
    let mut p = progress(Milestone::FixingCi);
    p.verdict = Some(VerdictKind::Red);
    p.failed_jobs = vec!["test".into()];
    let note = resume_note(
        &p,
        "it exited",
        2,
        3,
        &["c".repeat(40)],
        &["src/a.rs".into()],
    );
    assert!(
        note.starts_with("RESUMING as replacement worker 2 of 3"),
        "{note}"
    );
    assert!(
        note.contains("1 commit(s) on your branch (cccccccccc)"),
        "{note}"
    );
    assert!(
        note.contains("CI is red for aaaaaaaaaa (failing: test)"),
        "{note}"
    );
    let fresh = resume_note(&progress(Milestone::Working), "x", 1, 3, &[], &[]);
    assert!(fresh.contains("no commits on your branch yet"), "{fresh}");
    assert!(
        fresh.contains("push your work and report PUSHED_TO_CI"),
        "{fresh}"
    );
}

fn record(p: Progress) -> WorkerRecord {
    WorkerRecord {
        id: "w-1".into(),
        repo: "core".into(),
        task: "t".into(),
        task_id: None,
        component: None,
        plan: None,
        progress: p,
        branch: "orch/w-1".into(),
        base_sha: "b".repeat(40),
        worktree: "/s/w-1/worktree".into(),
        remote: "orch".into(),
        day: "2024-01-01".into(),
        supervisor_pid: Some(42),
        supervisor_start: Some(1),
        lease_until_ms: Some(T0 + 15_000),
        worker_pid: None,
        worker_running: false,
        exit_code: None,
        respawns: 0,
        resume_note: None,
        created_ms: T0,
        updated_ms: T0,
        ended_ms: None,
        model: None,
        model_source: None,
        node: None,
        fence: 0,
    }
}

#[test]
fn a_supervisor_is_said_to_have_died_only_when_it_did() {
    // Killed: its lease was left to run out.
    let mut w = record(progress(Milestone::Working));
    w.worker_pid = Some(7);
    w.worker_running = true;
    assert_eq!(
        why_ended(&w),
        "its supervisor (pid 42) died while it was running"
    );
    // Stopped normally: it gave its lease up (expiry 0).
    w.lease_until_ms = Some(0);
    assert_eq!(
        why_ended(&w),
        "its supervisor (pid 42) stopped while it was running"
    );
    // It stopped its worker on the way out (no exit code: a signal).
    w.worker_running = false;
    let why = why_ended(&w);
    assert!(why.contains("stopped by a signal"), "{why}");
    assert!(!why.contains("died"), "{why}");
    // Following CI only, supervisor stopped.
    let mut f = record(progress(Milestone::PushedToCi));
    f.lease_until_ms = Some(0);
    let why = why_ended(&f);
    assert!(why.contains("following CI for aaaaaaaaaa"), "{why}");
    assert!(why.ends_with("stopped"), "{why}");
    f.lease_until_ms = Some(T0);
    assert!(why_ended(&f).ends_with("died"), "{}", why_ended(&f));
    // Never started: a spawner that died, or a supervisor that stopped first.
    let mut n = record(progress(Milestone::Working));
    assert_eq!(
        why_ended(&n),
        "it was never started (the spawning process died)"
    );
    n.lease_until_ms = Some(0);
    assert_eq!(
        why_ended(&n),
        "its supervisor (pid 42) stopped before starting it"
    );
    // An exit code and an end reason are said as they are.
    n.exit_code = Some(3);
    assert_eq!(why_ended(&n), "it exited with code 3 before finishing");
    n.progress.end_reason = Some("timed out".into());
    assert_eq!(why_ended(&n), "timed out");
}

#[test]
fn a_worker_orphaned_while_paused_goes_back_and_is_decided_there() {
    let c = contract();
    // Paused while PUSHED_TO_CI after its turn ended: back there, then CI decides (green:
    // DONE).
    let mut p = ended(Milestone::PushedToCi);
    let (paused, _) = crate::milestone::step(
        &c,
        "w-1",
        &p,
        &Event::Pause {
            reason: "core main is red: test".into(),
        },
        T0,
    );
    assert_eq!(paused.milestone, Milestone::Paused);
    let d = decide(&c, &case(&paused, Some(seen(VerdictKind::Green))), NOW);
    assert_eq!(d.progress.milestone, Milestone::Done);
    assert!(releases_lock(&d));
    // Paused while WORKING, nothing pushed: a replacement continues.
    p = progress(Milestone::Working);
    let (paused, _) = crate::milestone::step(
        &c,
        "w-1",
        &p,
        &Event::Pause {
            reason: "core main is red: test".into(),
        },
        T0,
    );
    let d = decide(&c, &case(&paused, None), NOW);
    assert_eq!(d.progress.milestone, Milestone::Working);
    assert_eq!(d.action, Action::Respawned);
}
