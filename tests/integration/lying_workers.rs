//! Workers that lie or linger, through the real binary (issue 14): DONE is about the head of
//! the worker's own branch on the forge, new work only, and a lock is released only after
//! every process of its worker is gone.

use crate::support::sampler::{Sampler, assert_none_after_release, with_env};
use crate::support::{DEADLINE, Org, RepoSpec, Spec, git, poll_until};
use orch::milestone::Milestone;

fn wait_file(org: &Org, id: &str, name: &str) -> String {
    let path = org.out.join(name);
    poll_until(
        &format!("{}", path.display()),
        DEADLINE,
        || {
            std::fs::read_to_string(&path)
                .ok()
                .filter(|s| s.ends_with('\n'))
        },
        || org.diag(id),
    )
}

fn answer(org: &Org, id: &str, n: usize) -> (String, String) {
    let rc = wait_file(org, id, &format!("report-{n}.rc"));
    let text = std::fs::read_to_string(org.out.join(format!("report-{n}.txt"))).unwrap();
    (rc.trim().to_string(), text)
}

fn never_done(org: &Org, id: &str) {
    assert!(
        !org.transitions(id).iter().any(|(_, to)| to == "DONE"),
        "{}",
        org.diag(id)
    );
    assert_ne!(org.worker(id).progress.milestone, Milestone::Done);
}

#[test]
fn a_red_push_after_the_green_one_reopens_verification_and_done_is_refused() {
    let org = Org::new(
        Spec::local("push_twice.sh").repo(RepoSpec::new("alpha").standard_ci("test -f fixed")),
    );
    let id = org.spawn_detached("alpha", "green, then red unreported");
    let rc = wait_file(&org, &id, "report.rc");
    let text = std::fs::read_to_string(org.out.join("report.txt")).unwrap();
    assert_eq!(rc.trim(), "1", "DONE must be refused: {text}");
    let red = std::fs::read_to_string(org.out.join(format!("red-{id}")))
        .unwrap()
        .trim()
        .to_string();
    // The unreported push is what orch verifies now, and its CI is red.
    let w = org.wait_milestone(&id, "FIXING_CI", DEADLINE);
    assert_eq!(w.progress.tracked_sha.as_deref(), Some(red.as_str()));
    never_done(&org, &id);
    assert_eq!(org.locks_of(&id), vec!["alpha".to_string()]);
    let status = org.run(&["ci", "status", "--repo", "alpha", "--sha", &red]);
    assert!(
        String::from_utf8_lossy(&status.stdout).contains("red"),
        "{}",
        String::from_utf8_lossy(&status.stdout)
    );
    assert!(
        org.events(&id)
            .iter()
            .any(|e| e.kind == "push_seen" && e.detail.contains(&red[..10])),
        "the unreported push was seen on the forge: {}",
        org.diag(&id)
    );
    org.release(&id);
}

#[test]
fn claiming_the_base_commit_is_refused_through_every_channel() {
    let org =
        Org::new(Spec::local("claim_base.sh").repo(RepoSpec::new("alpha").standard_ci("true")));
    let id = org.spawn_detached("alpha", "do nothing, claim everything");
    let (rc1, a1) = answer(&org, &id, 1);
    assert_eq!(rc1, "1", "{a1}");
    assert!(a1.contains("is not on the forge"), "{a1}");
    let (rc2, a2) = answer(&org, &id, 2);
    assert_eq!(rc2, "1", "{a2}");
    assert!(a2.contains("no new work"), "{a2}");
    let (rc3, a3) = answer(&org, &id, 3);
    assert_eq!(rc3, "1", "{a3}");
    assert!(a3.contains("no new work"), "{a3}");
    let (rc4, a4) = answer(&org, &id, 4);
    assert_eq!(rc4, "1", "{a4}");
    org.wait_milestone(&id, "BLOCKED", DEADLINE);
    // The output line was refused too, and nothing was ever tracked.
    let v = org.violations(&id);
    assert!(
        v.iter()
            .filter(|d| d.starts_with("push_not_verified") && d.contains("no new work"))
            .count()
            >= 3,
        "{v:?}"
    );
    let w = org.worker(&id);
    assert_eq!(w.progress.tracked_sha, None, "{}", org.diag(&id));
    never_done(&org, &id);
    org.release(&id);
}

#[test]
fn claiming_another_workers_push_is_refused() {
    // The honest push stays on its branch (land: none): once landed it would be in the base's
    // history, and refused as that.
    let org = Org::new(
        Spec::local("claim_other.sh")
            .repo(RepoSpec::new("alpha").standard_ci("true"))
            .land("{policy: none}"),
    );
    let honest = org.spawn_detached("alpha", "honest work");
    org.wait_done(&honest);
    let theirs = org.worker(&honest).progress.tracked_sha.unwrap();
    std::fs::write(org.out.join("other-sha"), format!("{theirs}\n")).unwrap();
    let id = org.spawn_detached("alpha", "steal it");
    let (rc1, a1) = answer(&org, &id, 1);
    assert_eq!(rc1, "1", "{a1}");
    let (rc2, a2) = answer(&org, &id, 2);
    assert_eq!(rc2, "1", "{a2}");
    assert!(a2.contains(&format!("worker {honest}'s push")), "{a2}");
    let (rc3, a3) = answer(&org, &id, 3);
    assert_eq!(rc3, "1", "{a3}");
    org.wait_milestone(&id, "BLOCKED", DEADLINE);
    assert_eq!(org.worker(&id).progress.tracked_sha, None);
    never_done(&org, &id);
    org.release(&id);
}

#[test]
fn no_worker_process_is_alive_when_its_lock_is_released() {
    let org =
        Org::new(Spec::local("done_lingers.sh").repo(RepoSpec::new("alpha").standard_ci("true")));
    let id = org.spawn_detached("alpha", "finish and linger");
    let var = format!("ORCH_WORKER_ID={id}");
    let sampler = Sampler::start(move || with_env(&var));
    org.wait_done(&id);
    poll_until(
        "the lock released",
        DEADLINE,
        || org.locks_of(&id).is_empty().then_some(()),
        || org.diag(&id),
    );
    let seen = sampler.finish();
    assert!(!seen.is_empty(), "the sampler never saw the worker");
    let released = assert_none_after_release(&org, &id, &seen, "worker processes");
    let last = seen.iter().map(|(t, _)| *t).max().unwrap();
    eprintln!(
        "last worker process seen {} ms before the lock was released",
        released - last
    );
    // The worker was stopped by orch (it lingered), and its DONE stands; its history says so
    // after the DONE it was stopped at.
    assert_eq!(org.worker(&id).progress.milestone, Milestone::Done);
    let events = org.events(&id);
    let done = events
        .iter()
        .position(|e| e.kind == "transition" && e.detail.contains("-> DONE"))
        .unwrap_or_else(|| panic!("{events:#?}"));
    if let Some(stopped) = events.iter().position(|e| e.kind == "stopped") {
        assert!(stopped > done, "{events:#?}");
    }
    let head = git(
        &org.state.join("forge/alpha.git"),
        &[
            "rev-parse",
            &format!("refs/heads/{}", org.worker(&id).branch),
        ],
    );
    assert_eq!(
        org.worker(&id).progress.tracked_sha.as_deref(),
        Some(head.as_str())
    );
}
