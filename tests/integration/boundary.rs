//! The strong boundary (issue 25): a hostile worker, scripted (`tests/workers/trespass.sh`),
//! tries to act on orch and on another live worker. Every attempt is refused by what the kernel
//! says about the process (its ancestry, its peer credentials on the report channel), never by
//! what its environment claims, and each is raised as a critical alert.

use crate::support::{DEADLINE, Org, RepoSpec, Spec, output_text, poll_until};
use orch::milestone::Milestone;
use serde_json::Value;

fn read(org: &Org, name: &str) -> String {
    std::fs::read_to_string(org.out.join(name)).unwrap_or_default()
}

fn code(org: &Org, name: &str) -> i32 {
    read(org, &format!("{name}.code"))
        .trim()
        .parse()
        .unwrap_or(-1)
}

/// Cancels the test's workers once it has seen what it came for.
fn cancel_all(org: &Org, ids: &[&String]) {
    for id in ids {
        let out = org.run(&["cancel", id, "--reason", "test over"]);
        assert!(out.status.success(), "{}", output_text(&out));
    }
}

fn alert_kinds(org: &Org, id: &str) -> Vec<String> {
    org.alerts(id)
        .iter()
        .map(|a| a["kind"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn a_worker_cannot_act_on_orch_or_on_another_worker() {
    let org = Org::new(
        Spec::local("trespass.sh")
            .repo(RepoSpec::new("alpha"))
            .repo(RepoSpec::new("beta")),
    );
    let victim = org.spawn_detached("alpha", "victim: wait");
    org.wait_milestone(&victim, "WORKING", DEADLINE);
    std::fs::write(org.out.join("victim-id"), &victim).unwrap();
    let hostile = org.spawn_detached("beta", "trespass");
    poll_until(
        "the hostile worker's attempts",
        DEADLINE,
        || org.out.join("attempts-done").exists().then_some(()),
        || org.diag(&hostile),
    );
    assert!(
        read(&org, "victim-channel").trim().starts_with('@'),
        "the victim's channel is readable from its guard's argv: {:?}",
        read(&org, "victim-channel")
    );

    // Speaking on the victim's channel: the kernel says the speaker is not the victim's.
    assert_eq!(
        code(&org, "foreign-report"),
        1,
        "{}",
        read(&org, "foreign-report.out")
    );
    let v: Value = serde_json::from_str(read(&org, "foreign-report.out").trim()).unwrap();
    assert_eq!(v["state"], "refused", "{v}");
    assert!(
        v["outcome"]
            .as_str()
            .unwrap()
            .contains("not one of its processes"),
        "{v}"
    );

    // Operator commands from inside a worker, with and without orch's environment.
    for attempt in ["release", "cancel", "hold"] {
        assert_eq!(
            code(&org, attempt),
            1,
            "{attempt}: {}",
            read(&org, &format!("{attempt}.out"))
        );
        let out = read(&org, &format!("{attempt}.out"));
        assert!(
            out.contains("operator command") && out.contains(&hostile),
            "{attempt}: {out}"
        );
        assert!(
            out.contains("its supervisor raised an alert"),
            "{attempt}: {out}"
        );
    }

    // The victim went on as if nothing happened; its lock and the hostile's are where they were.
    let w = org.worker(&victim);
    assert_eq!(w.progress.milestone, Milestone::Working);
    assert_eq!(org.locks_of(&victim), vec!["alpha".to_string()]);
    assert_eq!(org.locks_of(&hostile), vec!["beta".to_string()]);
    assert!(org.run(&["status"]).status.success());

    // The victim's id in the environment names nobody: the hostile's own report was taken as
    // its own (the kernel says who spoke).
    poll_until(
        "the hostile's own report",
        DEADLINE,
        || (code(&org, "own-report") != -1).then_some(()),
        || org.diag(&hostile),
    );
    let v: Value = serde_json::from_str(read(&org, "own-report.out").trim())
        .unwrap_or_else(|e| panic!("{e}: {}", read(&org, "own-report.out")));
    assert_eq!(v["worker_id"], hostile.as_str(), "{v}");
    org.wait_milestone(&hostile, "BLOCKED", DEADLINE);
    assert_eq!(org.worker(&victim).progress.milestone, Milestone::Working);

    // Every attempt was told to a supervisor and raised as a critical alert.
    poll_until(
        "the alerts",
        DEADLINE,
        || {
            let victim_kinds = alert_kinds(&org, &victim);
            let hostile_kinds = alert_kinds(&org, &hostile);
            (victim_kinds.iter().any(|k| k == "foreign_report")
                && hostile_kinds
                    .iter()
                    .filter(|k| *k == "operator_command_from_worker")
                    .count()
                    >= 1)
                .then_some(())
        },
        || format!("{:?}\n{:?}", org.alerts(&victim), org.alerts(&hostile)),
    );
    for a in org
        .alerts(&victim)
        .iter()
        .chain(org.alerts(&hostile).iter())
    {
        if a["kind"] == "foreign_report" || a["kind"] == "operator_command_from_worker" {
            assert_eq!(a["severity"], "critical", "{a}");
        }
    }
    cancel_all(&org, &[&victim, &hostile]);
}

/// A report row written into the database by another process (a worker with `sqlite3` on
/// orch's database) is not the worker's word: refused, and raised as a critical alert.
#[test]
fn a_report_written_into_the_database_is_refused_and_alerted() {
    let org = Org::new(Spec::local("trespass.sh").repo(RepoSpec::new("alpha")));
    let victim = org.spawn_detached("alpha", "victim: wait");
    org.wait_milestone(&victim, "WORKING", DEADLINE);
    org.store()
        .write(|tx| {
            tx.execute(
                "INSERT INTO requests (worker_id, kind, milestone, note, created_ms) \
                 VALUES (?1, 'report', 'DONE', 'forged', 0)",
                [&victim],
            )
        })
        .unwrap();
    poll_until(
        "the forged report's alert",
        DEADLINE,
        || {
            alert_kinds(&org, &victim)
                .iter()
                .any(|k| k == "forged_report")
                .then_some(())
        },
        || format!("{:?}", org.alerts(&victim)),
    );
    assert_eq!(org.worker(&victim).progress.milestone, Milestone::Working);
    assert_eq!(org.locks_of(&victim), vec!["alpha".to_string()]);
    cancel_all(&org, &[&victim]);
}

/// Pushes a worker may not make on the local forge: onto another live worker's branch, to its
/// own base branch, to another repository's base branch. Each is refused by the forge's
/// pre-receive hook (the pusher known from its cgroup or its guard, not its environment),
/// told to the pusher's supervisor (a critical alert); its own branch it pushes as before.
#[test]
fn a_worker_moves_only_its_own_branch_on_the_local_forge() {
    let org = Org::new(
        Spec::local("trespass.sh")
            .repo(RepoSpec::new("alpha"))
            .repo(RepoSpec::new("beta")),
    );
    let victim = org.spawn_detached("alpha", "victim: wait");
    org.wait_milestone(&victim, "WORKING", DEADLINE);
    std::fs::write(org.out.join("victim-id"), &victim).unwrap();
    let heads = |repo: &str| {
        crate::support::git(
            &org.state.join("forge").join(format!("{repo}.git")),
            &["for-each-ref", "--format=%(refname) %(objectname)"],
        )
    };
    let alpha_before = heads("alpha");
    // beta's remote is made (seeded from its clone's main) when the hostile spawns.
    let beta_main = crate::support::git(&org.clone_path("beta"), &["rev-parse", "main"]);
    let hostile = org.spawn_detached("beta", "push where it may not");
    poll_until(
        "the hostile worker's pushes",
        DEADLINE,
        || org.out.join("attempts-done").exists().then_some(()),
        || org.diag(&hostile),
    );
    for attempt in ["push-other-branch", "push-own-base", "push-other-base"] {
        let out = read(&org, &format!("{attempt}.out"));
        assert_ne!(code(&org, attempt), 0, "{attempt} was accepted: {out}");
        assert!(out.contains("orch: refused"), "{attempt}: {out}");
    }
    assert_eq!(
        code(&org, "push-own-branch"),
        0,
        "{}",
        read(&org, "push-own-branch.out")
    );
    assert_eq!(
        heads("alpha"),
        alpha_before,
        "nothing moved on alpha's remote"
    );
    let beta_after = heads("beta");
    assert!(
        beta_after.contains(&format!("refs/heads/main {}", beta_main.trim())),
        "beta's base did not move: {beta_after}"
    );
    assert!(
        beta_after.contains(&format!("refs/heads/orch/{hostile} ")),
        "its own branch was pushed: {beta_after}"
    );
    poll_until(
        "the push alerts",
        DEADLINE,
        || {
            (alert_kinds(&org, &hostile)
                .iter()
                .filter(|k| *k == "push_refused")
                .count()
                >= 1)
                .then_some(())
        },
        || format!("{:?}", org.alerts(&hostile)),
    );
    assert_eq!(org.worker(&victim).progress.milestone, Milestone::Working);
    cancel_all(&org, &[&victim, &hostile]);
}

/// A worker with `sqlite3` on orch's database (it runs as orch's user) deletes a live worker's
/// lock row, then forges DONE on its row. The lock's history still says the chain is held: a
/// spawn on the chain is refused at once, and the supervisor takes its lock again; the forged
/// milestone is written back from the supervisor's own state. Each is a critical alert.
#[test]
fn rows_changed_in_the_database_under_a_live_worker_are_put_back_and_alerted() {
    let org = Org::new(
        Spec::local("trespass.sh")
            .repo(RepoSpec::new("alpha"))
            .repo(RepoSpec::new("beta").deps(&["alpha"])),
    );
    let victim = org.spawn_detached("alpha", "victim: wait");
    org.wait_milestone(&victim, "WORKING", DEADLINE);
    let deleted = org
        .store()
        .write(|tx| tx.execute("DELETE FROM locks WHERE holder = ?1", [&victim]))
        .unwrap();
    assert_eq!(deleted, 1);

    let out = org.run(&["spawn", "--repo", "beta", "--task", "victim: second"]);
    assert_eq!(out.status.code(), Some(1), "{}", output_text(&out));
    assert!(output_text(&out).contains(&victim), "{}", output_text(&out));

    poll_until(
        "the lock taken again",
        DEADLINE,
        || {
            (org.locks_of(&victim) == vec!["alpha".to_string()]
                && alert_kinds(&org, &victim)
                    .iter()
                    .any(|k| k == "lock_tampered"))
            .then_some(())
        },
        || format!("{:?} {:?}", org.locks_of(&victim), org.alerts(&victim)),
    );

    org.store()
        .write(|tx| {
            tx.execute(
                "UPDATE workers SET milestone = 'DONE', \
                 progress = json_set(progress, '$.milestone', 'DONE') WHERE id = ?1",
                [&victim],
            )
        })
        .unwrap();
    poll_until(
        "the forged DONE put back",
        DEADLINE,
        || {
            (alert_kinds(&org, &victim)
                .iter()
                .any(|k| k == "state_tampered")
                && org.worker(&victim).progress.milestone == Milestone::Working)
                .then_some(())
        },
        || format!("{:?}", org.alerts(&victim)),
    );
    assert_eq!(org.locks_of(&victim), vec!["alpha".to_string()]);
    assert!(
        org.workers().iter().all(|w| w.id == victim),
        "no second worker ever started on the chain"
    );
    cancel_all(&org, &[&victim]);
}

/// A worker with `sqlite3` on orch's database forges what is not its milestone: an operator's
/// approval and a green verdict in its progress, the milestone left as it is. Its supervisor
/// compares the whole row with what it last wrote: a critical alert naming what changed, and
/// its own state written back.
#[test]
fn a_forged_approval_in_a_live_workers_row_is_put_back_and_alerted() {
    let org = Org::new(Spec::local("trespass.sh").repo(RepoSpec::new("alpha")));
    let victim = org.spawn_detached("alpha", "victim: wait");
    org.wait_milestone(&victim, "WORKING", DEADLINE);
    let forged = "a".repeat(40);
    org.store()
        .write(|tx| {
            tx.execute(
                "UPDATE workers SET progress = json_set(progress, '$.approved', ?2, '$.verdict', 'green') \
                 WHERE id = ?1",
                [&victim, &forged],
            )
        })
        .unwrap();
    poll_until(
        "the forged approval put back",
        DEADLINE,
        || {
            let w = org.worker(&victim);
            let alerted = org.alerts(&victim).into_iter().find(|a| {
                a["kind"] == "state_tampered"
                    && a["message"]
                        .as_str()
                        .is_some_and(|m| m.contains("approved"))
            });
            (alerted.is_some() && w.progress.approved.is_none() && w.progress.verdict.is_none())
                .then_some(())
        },
        || {
            format!(
                "{:?} {:?}",
                org.worker(&victim).progress,
                org.alerts(&victim)
            )
        },
    );
    assert_eq!(org.worker(&victim).progress.milestone, Milestone::Working);
    cancel_all(&org, &[&victim]);
}

/// A DONE worker's branch force-pushed afterwards (here by someone outside any worker, so the
/// forge takes the push): DONE stays the verified commit, and the push raises a critical alert
/// naming both commits.
#[test]
fn a_done_branch_that_moves_raises_an_alert_and_done_stays_the_verified_commit() {
    let org = Org::new(Spec::local("happy.sh").repo(RepoSpec::new("alpha")));
    let (out, id) = org.spawn_foreground("alpha", "add a feature");
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let done = org.worker(&id).progress.tracked_sha.clone().unwrap();
    let bare = org.state.join("forge").join("alpha.git");
    let work = org.root.join("elsewhere");
    crate::support::git(
        &org.root,
        &[
            "clone",
            "-q",
            bare.to_str().unwrap(),
            work.to_str().unwrap(),
        ],
    );
    std::fs::write(work.join("other.txt"), "not the verified change\n").unwrap();
    crate::support::git(&work, &["add", "other.txt"]);
    crate::support::git(
        &work,
        &[
            "-c",
            "user.name=someone",
            "-c",
            "user.email=someone@example.invalid",
            "commit",
            "-q",
            "-m",
            "moved",
        ],
    );
    crate::support::git(
        &work,
        &[
            "push",
            "-q",
            "--force",
            "origin",
            &format!("HEAD:refs/heads/orch/{id}"),
        ],
    );
    let alert = org
        .alerts(&id)
        .into_iter()
        .find(|a| a["kind"] == "done_branch_moved")
        .unwrap_or_else(|| panic!("{:?}", org.alerts(&id)));
    assert_eq!(alert["severity"], "critical");
    let text = alert["message"].as_str().unwrap();
    assert!(text.contains(done.short()), "{text}");
    let w = org.worker(&id);
    assert_eq!(w.progress.milestone, Milestone::Done);
    assert_eq!(w.progress.tracked_sha.as_ref(), Some(&done));
}

/// The same, but the branch is moved on the forge's server without a push (`git update-ref`
/// in the bare repository): no hook runs, and the DONE worker has no supervisor left. The
/// next `orch status` reads the branch heads from the forge and raises the same alert — once
/// for that head, however often it looks; `orch resume` too, for a branch deleted afterwards.
#[test]
fn a_done_branch_moved_without_a_push_is_alerted_at_the_next_look() {
    let org = Org::new(Spec::local("happy.sh").repo(RepoSpec::new("alpha")));
    let (out, id) = org.spawn_foreground("alpha", "add a feature");
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let done = org.worker(&id).progress.tracked_sha.clone().unwrap();
    let bare = org.state.join("forge").join("alpha.git");
    let in_bare = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .arg("--git-dir")
            .arg(&bare)
            .args(args)
            .env("GIT_AUTHOR_NAME", "someone")
            .env("GIT_AUTHOR_EMAIL", "someone@example.invalid")
            .env("GIT_COMMITTER_NAME", "someone")
            .env("GIT_COMMITTER_EMAIL", "someone@example.invalid")
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", output_text(&out));
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    let tree = format!("{}^{{tree}}", done.as_str());
    let moved = in_bare(&["commit-tree", &tree, "-p", done.as_str(), "-m", "moved"]);
    let branch = format!("refs/heads/orch/{id}");
    in_bare(&["update-ref", &branch, &moved, done.as_str()]);
    let moved_alerts = || -> Vec<Value> {
        org.alerts(&id)
            .into_iter()
            .filter(|a| a["kind"] == "done_branch_moved")
            .collect()
    };
    assert!(
        moved_alerts().is_empty(),
        "no hook ran: {:?}",
        org.alerts(&id)
    );
    for _ in 0..2 {
        let out = org.run(&["status"]);
        assert!(out.status.success(), "{}", output_text(&out));
    }
    let alerts = moved_alerts();
    assert_eq!(alerts.len(), 1, "one alert for that head: {alerts:?}");
    assert_eq!(alerts[0]["severity"], "critical");
    let text = alerts[0]["message"].as_str().unwrap();
    assert!(
        text.contains(done.short()) && text.contains(&moved[..12]),
        "{text}"
    );
    let w = org.worker(&id);
    assert_eq!(w.progress.milestone, Milestone::Done);
    assert_eq!(w.progress.tracked_sha.as_ref(), Some(&done));
    // Deleted without a push: cron's resume sees it.
    in_bare(&["update-ref", "-d", &branch, &moved]);
    let out = org.run(&["resume"]);
    assert!(out.status.success(), "{}", output_text(&out));
    let alerts = moved_alerts();
    assert_eq!(alerts.len(), 2, "{alerts:?}");
    assert!(
        alerts
            .iter()
            .any(|a| a["message"].as_str().unwrap().contains("deleted")),
        "{alerts:?}"
    );
}

/// repos.yaml edited under two live workers so that their repositories are one chain now: the
/// next load raises a critical alert naming both, and leaves both running (the operator
/// decides); the chain stays closed to new workers.
#[test]
fn an_edge_added_between_two_live_workers_is_alerted_and_their_chain_closed() {
    let org = Org::new(
        Spec::local("trespass.sh")
            .repo(RepoSpec::new("alpha"))
            .repo(RepoSpec::new("beta")),
    );
    let a = org.spawn_detached("alpha", "victim: a");
    let b = org.spawn_detached("beta", "victim: b");
    org.wait_milestone(&a, "WORKING", DEADLINE);
    org.wait_milestone(&b, "WORKING", DEADLINE);
    let yaml = std::fs::read_to_string(&org.config_path).unwrap();
    let at = yaml.find("  beta:\n").unwrap();
    let (head, tail) = yaml.split_at(at);
    assert!(tail.contains("deps: []"), "{yaml}");
    let edited = format!("{head}{}", tail.replacen("deps: []", "deps: [alpha]", 1));
    std::fs::write(&org.config_path, &edited).unwrap();
    let out = org.run(&["status"]);
    assert!(out.status.success(), "{}", output_text(&out));
    let drift: Vec<Value> = [&a, &b]
        .iter()
        .flat_map(|id| org.alerts(id))
        .filter(|x| x["kind"] == "config_drift")
        .collect();
    assert_eq!(drift.len(), 1, "{drift:?}");
    let text = drift[0]["message"].as_str().unwrap();
    assert!(text.contains(&a) && text.contains(&b), "{text}");
    assert_eq!(drift[0]["severity"], "critical");
    // Said once: the next load counts a repeat, it does not alert again.
    let _ = org.run(&["status"]);
    let again = [&a, &b]
        .iter()
        .flat_map(|id| org.alerts(id))
        .filter(|x| x["kind"] == "config_drift")
        .count();
    assert_eq!(again, 1);
    for repo in ["alpha", "beta"] {
        let out = org.run(&["can-spawn", repo]);
        assert_eq!(out.status.code(), Some(1), "{repo}: {}", output_text(&out));
    }
    assert_eq!(org.worker(&a).progress.milestone, Milestone::Working);
    assert_eq!(org.worker(&b).progress.milestone, Milestone::Working);
    cancel_all(&org, &[&a, &b]);
}

/// A repository renamed under its live worker while the old name now points at another clone:
/// the clone the worker works in is named twice over time, and a spawn on the new name is
/// refused — one clone, one worker.
#[test]
fn a_clone_under_a_new_name_is_refused_beside_its_live_worker() {
    let org = Org::new(Spec::local("trespass.sh").repo(RepoSpec::new("alpha")));
    let a = org.spawn_detached("alpha", "victim: a");
    org.wait_milestone(&a, "WORKING", DEADLINE);
    let old_clone = org.clone_path("alpha");
    let new_clone = org.root.join("repos").join("alpha-elsewhere");
    crate::support::git(
        &org.root,
        &[
            "clone",
            "-q",
            old_clone.to_str().unwrap(),
            new_clone.to_str().unwrap(),
        ],
    );
    let yaml = std::fs::read_to_string(&org.config_path).unwrap();
    let at = yaml.find("  alpha:\n").unwrap();
    let block = yaml[at..].to_string();
    let quoted = |p: &std::path::Path| serde_json::to_string(&p.display().to_string()).unwrap();
    let moved = block.replacen(&quoted(&old_clone), &quoted(&new_clone), 1);
    let renamed = block.replacen("  alpha:\n", "  net:\n", 1);
    std::fs::write(&org.config_path, format!("{}{moved}{renamed}", &yaml[..at])).unwrap();
    let out = org.cmd(&["can-spawn", "net", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", output_text(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["blockers"][0]["holder"], a.as_str(), "{v}");
    assert_eq!(v["blockers"][0]["relation"], "same_clone", "{v}");
    let out = org.run(&["spawn", "--repo", "net", "--task", "victim: second"]);
    assert_eq!(out.status.code(), Some(1), "{}", output_text(&out));
    assert_eq!(org.workers().len(), 1, "no second worker in the clone");
    assert!(
        org.alerts(&a).iter().any(|x| x["kind"] == "config_drift"),
        "{:?}",
        org.alerts(&a)
    );
    cancel_all(&org, &[&a]);
}
