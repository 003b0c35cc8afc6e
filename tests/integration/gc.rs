//! `orch gc`: finished workers' worktrees and branches removed only when their work is on the
//! remote; unpushed work and live workers never touched.

use crate::support::{DEADLINE, Org, RepoSpec, Spec, git, output_text};
use serde_json::Value;
use std::path::Path;

fn branch_tip(clone: &Path, branch: &str) -> Option<String> {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(clone)
        .args(["rev-parse", "--verify", "--quiet"])
        .arg(format!("refs/heads/{branch}"))
        .output()
        .unwrap();
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn entry<'a>(report: &'a Value, id: &str) -> Option<&'a Value> {
    report["workers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["worker_id"] == id)
}

#[test]
fn gc_removes_only_pushed_work_of_finished_workers() {
    let org = Org::new(
        Spec::local("gc_leftovers.sh")
            .repo(RepoSpec::new("done"))
            .repo(RepoSpec::new("unpushed"))
            .repo(RepoSpec::new("dirty"))
            .repo(RepoSpec::new("live")),
    );
    let done = org.spawn_detached("done", "done");
    let unpushed = org.spawn_detached("unpushed", "unpushed");
    let dirty = org.spawn_detached("dirty", "dirty");
    let live = org.spawn_detached("live", "idle");
    for id in [&unpushed, &dirty, &live] {
        org.wait_until(&format!("{id} ready"), DEADLINE, || {
            org.out.join(format!("ready-{id}")).exists()
        });
    }
    for id in [&unpushed, &dirty] {
        let out = org.run(&["cancel", id, "--reason", "test"]);
        assert!(out.status.success(), "{}", output_text(&out));
        org.wait_milestone(id, "CANCELLED", DEADLINE);
        org.wait_supervisor_gone(id);
    }
    org.wait_done(&done);

    let clone = |repo: &str| org.clone_path(repo);
    let worktree = |id: &str| org.state.join(id).join("worktree");
    let unpushed_sha = branch_tip(&clone("unpushed"), &format!("orch/{unpushed}")).unwrap();
    assert_eq!(
        git(&worktree(&unpushed), &["log", "-1", "--format=%s"]),
        "a commit never pushed"
    );

    // --dry-run: the plan, and nothing changes.
    let out = org.run(&["gc", "--dry-run", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let plan: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(plan["dry_run"], true);
    assert_eq!(entry(&plan, &done).unwrap()["action"], "remove", "{plan:#}");
    let kept = entry(&plan, &unpushed).unwrap();
    assert_eq!(kept["action"], "keep", "{plan:#}");
    assert!(
        kept["reason"]
            .as_str()
            .unwrap()
            .contains("1 commit not on remote orch"),
        "{plan:#}"
    );
    let kept = entry(&plan, &dirty).unwrap();
    assert_eq!(kept["action"], "keep", "{plan:#}");
    assert!(
        kept["reason"]
            .as_str()
            .unwrap()
            .contains("uncommitted changes"),
        "{plan:#}"
    );
    assert!(entry(&plan, &live).is_none(), "{plan:#}");
    assert_eq!(plan["remotes"][0]["repo"], "done", "{plan:#}");
    assert_eq!(plan["remotes"].as_array().unwrap().len(), 1, "{plan:#}");
    assert!(worktree(&done).exists());
    assert!(branch_tip(&clone("done"), &format!("orch/{done}")).is_some());
    assert!(
        git(&clone("done"), &["remote"])
            .lines()
            .any(|r| r == "orch")
    );

    // The real run.
    let out = org.run(&["gc"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&format!("removed {done}")), "{text}");
    assert!(text.contains(&format!("kept {unpushed}")), "{text}");
    assert!(text.contains(&format!("kept {dirty}")), "{text}");
    assert!(!worktree(&done).exists());
    assert!(branch_tip(&clone("done"), &format!("orch/{done}")).is_none());
    assert!(!git(&clone("done"), &["worktree", "list"]).contains(&done));
    assert!(
        !git(&clone("done"), &["remote"])
            .lines()
            .any(|r| r == "orch")
    );
    // The DONE work is still on the forge.
    let bare = org.state.join("forge").join("done.git");
    assert!(branch_tip(&bare, &format!("orch/{done}")).is_some());
    // Unpushed work kept and still reachable.
    assert_eq!(
        branch_tip(&clone("unpushed"), &format!("orch/{unpushed}")).as_deref(),
        Some(unpushed_sha.as_str())
    );
    assert_eq!(
        git(&worktree(&unpushed), &["rev-parse", "HEAD"]),
        unpushed_sha
    );
    assert!(
        git(&clone("unpushed"), &["remote"])
            .lines()
            .any(|r| r == "orch")
    );
    assert_eq!(
        std::fs::read_to_string(worktree(&dirty).join("scratch.txt")).unwrap(),
        "not committed\n"
    );
    assert!(branch_tip(&clone("dirty"), &format!("orch/{dirty}")).is_some());
    // The live worker untouched.
    assert!(worktree(&live).exists());
    assert!(branch_tip(&clone("live"), &format!("orch/{live}")).is_some());
    let w = org.worker(&live);
    assert_eq!(w.milestone().as_str(), "WORKING");
    assert!(w.supervised(orch::store::now_ms()));

    // A second run finds only what it kept.
    let again: Value = org.json(&["gc", "--json"]);
    assert!(entry(&again, &done).is_none(), "{again:#}");
    assert_eq!(entry(&again, &unpushed).unwrap()["action"], "keep");
    assert!(again["remotes"].as_array().unwrap().is_empty(), "{again:#}");

    let out = org.run(&["cancel", &live]);
    assert!(out.status.success(), "{}", output_text(&out));
}

#[test]
fn gc_where_nothing_ran_creates_no_state() {
    let org = Org::new(Spec::local("gc_leftovers.sh").repo(RepoSpec::new("alpha")));
    let out = org.run(&["gc"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing to clean up"));
    assert!(!org.state.join("orch.db").exists());
}

/// A branch the user checked out in the clone (after removing the worktree by hand) is theirs
/// now: deleting it would leave their HEAD on nothing.
#[test]
fn gc_keeps_a_branch_checked_out_in_the_clone() {
    let org = Org::new(Spec::local("gc_leftovers.sh").repo(RepoSpec::new("alpha")));
    let id = org.spawn_detached("alpha", "done");
    org.wait_done(&id);
    let clone = org.clone_path("alpha");
    let worktree = org.state.join(&id).join("worktree");
    git(&clone, &["worktree", "remove", worktree.to_str().unwrap()]);
    git(&clone, &["checkout", "-q", &format!("orch/{id}")]);
    let report = org.json(&["gc", "--json"]);
    let w = entry(&report, &id).unwrap();
    assert_eq!(w["action"], "keep", "{report:#}");
    assert!(
        w["reason"].as_str().unwrap().contains("checked out in"),
        "{report:#}"
    );
    assert_eq!(
        git(&clone, &["symbolic-ref", "HEAD"]),
        format!("refs/heads/orch/{id}")
    );
    assert!(branch_tip(&clone, &format!("orch/{id}")).is_some());
}

/// A remote that cannot be fetched: nothing can be checked, so everything is kept (exit 3, a
/// retry may do more).
#[test]
fn gc_with_an_unreachable_remote_keeps_everything_and_exits_3() {
    let org = Org::new(Spec::local("gc_leftovers.sh").repo(RepoSpec::new("alpha")));
    let id = org.spawn_detached("alpha", "done");
    org.wait_done(&id);
    let bare = org.state.join("forge").join("alpha.git");
    std::fs::rename(&bare, org.root.join("moved.git")).unwrap();
    let out = org.run(&["gc"]);
    assert_eq!(out.status.code(), Some(3), "{}", output_text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&format!("kept {id}")),
        "{}",
        output_text(&out)
    );
    assert!(org.state.join(&id).join("worktree").exists());
    assert!(branch_tip(&org.clone_path("alpha"), &format!("orch/{id}")).is_some());
}

/// A finished worker of a repository no longer in repos.yaml: gc has no clone to fetch into
/// and judge its work, so it keeps everything and says how to clean up by hand — and that
/// advice works.
#[test]
fn gc_names_the_leftovers_of_a_repository_no_longer_configured() {
    let org = Org::new(
        Spec::local("gc_leftovers.sh")
            .repo(RepoSpec::new("alpha"))
            .repo(RepoSpec::new("gone")),
    );
    let id = org.spawn_detached("gone", "done");
    org.wait_done(&id);
    org.wait_supervisor_gone(&id);
    let clone = org.clone_path("gone");
    let worktree = org.state.join(&id).join("worktree");
    let branch = format!("orch/{id}");
    // The repository leaves repos.yaml: its section goes.
    let yaml = std::fs::read_to_string(&org.config_path).unwrap();
    let mut kept = String::new();
    let mut in_gone = false;
    for line in yaml.lines() {
        if line == "  gone:" {
            in_gone = true;
            continue;
        }
        if in_gone && line.starts_with("    ") {
            continue;
        }
        in_gone = false;
        kept.push_str(line);
        kept.push('\n');
    }
    assert!(!kept.contains("gone"), "{kept}");
    std::fs::write(&org.config_path, kept).unwrap();

    let report = org.json(&["gc", "--json"]);
    let w = entry(&report, &id).unwrap_or_else(|| panic!("{report:#}"));
    assert_eq!(w["action"], "keep", "{report:#}");
    assert_eq!(w["repo"], "gone", "{report:#}");
    assert_eq!(w["worktree"], worktree.to_str().unwrap(), "{report:#}");
    assert_eq!(w["branch"], branch.as_str(), "{report:#}");
    assert_eq!(
        std::fs::canonicalize(w["clone"].as_str().unwrap()).unwrap(),
        std::fs::canonicalize(&clone).unwrap(),
        "{report:#}"
    );
    let reason = w["reason"].as_str().unwrap();
    assert!(
        reason.contains("repository gone is no longer in repos.yaml; clean up by hand"),
        "{reason}"
    );
    assert!(
        reason.contains(worktree.to_str().unwrap()) && reason.contains(&branch),
        "{reason}"
    );
    // Nothing was removed, and the human output says the same.
    assert!(worktree.exists());
    assert!(branch_tip(&clone, &branch).is_some());
    let out = org.run(&["gc"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("kept {id}")) && text.contains("no longer in repos.yaml"),
        "{text}"
    );
    // The commands it names clean up; gc then has nothing more to say about the worker.
    let how = reason.rsplit_once("first): ").unwrap().1;
    let out = std::process::Command::new("sh")
        .args(["-c", how])
        .output()
        .unwrap();
    assert!(out.status.success(), "{how}: {}", output_text(&out));
    assert!(!worktree.exists());
    assert!(branch_tip(&clone, &branch).is_none());
    let again = org.json(&["gc", "--json"]);
    assert!(entry(&again, &id).is_none(), "{again:#}");
}

/// Two state directories on the same clones (two operators, or a test beside production):
/// each has its own remote in the clone — the second is never re-pointed at the first's forge
/// nor the other way round — and each gc removes only its own.
#[test]
fn two_state_directories_on_one_clone_keep_their_own_remotes() {
    let org = Org::new(Spec::local("gc_leftovers.sh").repo(RepoSpec::new("alpha")));
    let other = org.root.join("other-state");
    let in_other = |args: &[&str]| {
        let mut c = org.cmd(args);
        c.env("ORCH_STATE_DIR", &other);
        c.output().unwrap()
    };
    let clone = org.clone_path("alpha");
    let url = |name: &str| {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(&clone)
            .args(["remote", "get-url", name])
            .output()
            .unwrap();
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let remotes = || git(&clone, &["remote"]);

    let first = org.spawn_detached("alpha", "done");
    org.wait_done(&first);
    let mine = url("orch").expect("the first state directory's remote is `orch`");
    assert!(Path::new(&mine).starts_with(&org.state), "{mine}");

    let out = in_other(&["spawn", "--repo", "alpha", "--task", "done", "--json"]);
    assert!(out.status.success(), "{}", output_text(&out));
    let spawned: Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = spawned["worker_id"].as_str().unwrap().to_string();
    crate::support::poll(DEADLINE, || {
        let s = in_other(&["status", "--json"]);
        let v: Value = serde_json::from_slice(&s.stdout).ok()?;
        let w = v["workers"]
            .as_array()?
            .iter()
            .find(|w| w["worker_id"] == id)?
            .clone();
        // DONE and landed: its supervisor has let go (a change still landing keeps the
        // remote, rightly).
        (w["milestone"] == "DONE" && w["supervisor_alive"] == false).then_some(())
    })
    .unwrap_or_else(|| panic!("{id} not DONE and let go in the other state directory"));
    assert_eq!(
        url("orch").as_deref(),
        Some(mine.as_str()),
        "not re-pointed"
    );
    let all = remotes();
    let theirs: Vec<&str> = all.lines().filter(|r| r.starts_with("orch-")).collect();
    assert_eq!(theirs.len(), 1, "{all}");
    let theirs_url = url(theirs[0]).unwrap();
    assert!(Path::new(&theirs_url).starts_with(&other), "{theirs_url}");

    // Each gc takes its own remote and leaves the other's.
    let out = org.run(&["gc"]);
    assert!(out.status.success(), "{}", output_text(&out));
    assert_eq!(url("orch"), None, "{}", output_text(&out));
    assert!(url(theirs[0]).is_some(), "{}", output_text(&out));
    let out = in_other(&["gc"]);
    assert!(out.status.success(), "{}", output_text(&out));
    assert_eq!(url(theirs[0]), None, "{}", output_text(&out));
}

/// A spawn SIGKILLed while libgit2 writes the clone's config leaves `.git/config.lock` behind,
/// a git killed while it rewrites the packed refs `packed-refs.lock` (the chaos run met both):
/// `orch gc` removes such stale locks, as a spawn does, and the branch and the remote with them,
/// instead of failing on "could not lock" / "Unable to create" until someone deletes them by
/// hand.
#[test]
fn gc_removes_stale_locks_killed_writers_left() {
    let org = Org::new(Spec::local("happy.sh").repo(RepoSpec::new("alpha")));
    let id = org.spawn_detached("alpha", "add a feature");
    org.wait_done(&id);
    org.wait_supervisor_gone(&id);
    let clone = org.clone_path("alpha");
    // The branch packed: deleting it rewrites packed-refs.
    git(&clone, &["pack-refs", "--all"]);
    let minute_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
    let locks = ["config.lock", "packed-refs.lock"].map(|l| clone.join(".git").join(l));
    for lock in &locks {
        std::fs::write(lock, "half written\n").unwrap();
        std::fs::File::options()
            .write(true)
            .open(lock)
            .unwrap()
            .set_modified(minute_ago)
            .unwrap();
    }
    let out = org.run(&["gc"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&format!("removed {id}")), "{text}");
    assert!(text.contains("removed remote orch"), "{text}");
    for lock in &locks {
        assert!(!lock.exists(), "{} is gone", lock.display());
    }
    assert!(branch_tip(&clone, &format!("orch/{id}")).is_none());
    assert!(!git(&clone, &["remote"]).lines().any(|r| r == "orch"));
}
