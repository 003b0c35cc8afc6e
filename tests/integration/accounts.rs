//! Workers of an account of their own (`worker.user`, issue 25): what the kernel refuses a
//! worker that does not run as orch's user — orch's database and state, orch's processes, its
//! cgroup, the local forge's remotes — while its work still reaches DONE through orch (its
//! pushes relayed by its supervisor, its CI questions answered over its channel), and its CI
//! runs as its account too. Needs root (to switch accounts); skipped with a message elsewhere.

use crate::support::{
    DEADLINE, Org, RepoSpec, Spec, job, output_text, poll_until, processes_under,
    second_worker_account, worker_account, worker_script,
};
use orch::milestone::Milestone;
use std::os::unix::fs::{MetadataExt, PermissionsExt};

fn read(org: &Org, name: &str) -> String {
    std::fs::read_to_string(org.out.join(name)).unwrap_or_default()
}

fn code(org: &Org, name: &str) -> i32 {
    read(org, &format!("{name}.code"))
        .trim()
        .parse()
        .unwrap_or(-1)
}

/// An organisation whose workers run as `account`, its test directories opened to it.
fn org_as(account: &str, script: &str, repo: RepoSpec) -> Org {
    org_of(account, script, vec![repo])
}

/// [`org_as`] with several repositories.
fn org_of(account: &str, script: &str, repos: Vec<RepoSpec>) -> Org {
    let mut spec = Spec::local(script);
    for repo in repos {
        spec = spec.repo(repo);
    }
    let mut spec = spec.user(account);
    spec.worker_section = Some(format!(
        "  command: [sh, {:?}]\n  env_passthrough: [PATH, E2E_OUT]\n  stop_grace: 1s\n",
        worker_script(script).display().to_string()
    ));
    Org::new(spec)
}

#[test]
fn a_worker_of_its_own_account_cannot_touch_orch_and_its_work_still_reaches_done() {
    let Some(account) = worker_account() else {
        return;
    };
    let org = org_as(
        &account.name,
        "account_worker.sh",
        RepoSpec::new("alpha")
            .job(job("check", "echo \"ci-uid=$(id -u)\""))
            .job(job("radicle-push", "true").needs(&["check"])),
    );
    let (out, id) = org.spawn_foreground("alpha", "work as another account");
    assert!(
        read(&org, "uid").trim() == account.uid.to_string(),
        "the worker runs as {} ({}): {:?}\n{}",
        account.name,
        account.uid,
        read(&org, "uid"),
        org.diag(&id)
    );
    assert!(
        out.status.success(),
        "{}\n{}",
        output_text(&out),
        org.diag(&id)
    );
    assert!(org.out.join("attempts-done").exists(), "{}", org.diag(&id));

    // What the kernel refuses it: orch's files, orch's processes, its cgroup, the remote.
    for attempt in [
        "read-db",
        "write-db",
        "list-state",
        "read-prompt",
        "read-forge",
        "kill-init",
        "leave-cgroup",
        "push-direct",
        "push-base",
    ] {
        assert_ne!(
            code(&org, attempt),
            0,
            "{attempt} succeeded: {}",
            read(&org, &format!("{attempt}.out"))
        );
    }
    for denied in ["read-db", "list-state", "read-prompt", "read-forge"] {
        assert!(
            read(&org, &format!("{denied}.out")).contains("Permission denied"),
            "{denied}: {}",
            read(&org, &format!("{denied}.out"))
        );
    }
    assert!(
        read(&org, "push-base.out").contains("may push only to its own branch"),
        "the remote's hook judged the relayed push as the worker's: {}",
        read(&org, "push-base.out")
    );
    // What it may: its own branch (through its supervisor's relay), its CI (over its channel).
    assert_eq!(code(&org, "push-own"), 0, "{}", read(&org, "push-own.out"));
    assert_eq!(
        code(&org, "ci-status"),
        0,
        "{}",
        read(&org, "ci-status.out")
    );
    assert!(
        read(&org, "ci-status.out").contains("green"),
        "{}",
        read(&org, "ci-status.out")
    );
    assert!(
        read(&org, "ci-logs.out").contains(&format!("ci-uid={}", account.uid)),
        "its CI ran as its account: {}",
        read(&org, "ci-logs.out")
    );

    // Its work reached DONE and its base branch; its clone and home are its own, orch's
    // state is not.
    let w = org.worker(&id);
    assert_eq!(w.progress.milestone, Milestone::Done, "{}", org.diag(&id));
    let wt = std::path::Path::new(&w.worktree);
    assert_eq!(std::fs::metadata(wt).unwrap().uid(), account.uid);
    assert!(
        read(&org, "home")
            .trim()
            .starts_with(&org.state.display().to_string())
    );
    let db = std::fs::metadata(org.state.join("orch.db")).unwrap();
    assert_eq!(
        (db.uid(), db.mode() & 0o077),
        (0, 0),
        "orch.db is orch's alone"
    );
    assert_eq!(
        std::fs::metadata(&org.state).unwrap().mode() & 0o777,
        0o711,
        "the state directory is searchable, not listable"
    );
    // The push to the base branch was told: a critical alert.
    poll_until(
        "the push_refused alert",
        DEADLINE,
        || {
            org.alerts(&id)
                .iter()
                .any(|a| a["kind"] == "push_refused")
                .then_some(())
        },
        || org.diag(&id),
    );
    // Nothing of the worker is left once DONE released its lock.
    poll_until(
        "no process of the worker left",
        DEADLINE,
        || processes_under(&org.state).is_empty().then_some(()),
        || format!("{:?}", processes_under(&org.state)),
    );
}

#[test]
fn a_state_directory_the_account_cannot_reach_is_refused_at_spawn_by_name() {
    let Some(account) = worker_account() else {
        return;
    };
    let org = org_as(&account.name, "account_worker.sh", RepoSpec::new("alpha"));
    // The test's directory closed again: the account cannot reach anything below it.
    std::fs::set_permissions(&org.root, std::fs::Permissions::from_mode(0o700)).unwrap();
    let out = org.run(&["spawn", "--repo", "alpha", "--task", "t"]);
    assert!(!out.status.success(), "{}", output_text(&out));
    let text = output_text(&out);
    assert!(
        text.contains(&format!("worker.user {}", account.name))
            && text.contains(&org.root.display().to_string())
            && text.contains("chmod o+x"),
        "{text}"
    );
    // Nothing was taken: the chain is free.
    assert!(org.run(&["can-spawn", "alpha"]).status.success());
}

/// What a worker's account could write never becomes orch's configuration (issue 34, item 6):
/// a repos.yaml the account may write, a contract in a directory where it may replace files,
/// are refused at spawn, naming the account and the path; nothing is taken. Put right, the
/// same spawn goes on.
#[test]
fn configuration_a_worker_account_could_change_is_refused_at_spawn() {
    let Some(account) = worker_account() else {
        return;
    };
    let org = org_as(&account.name, "account_worker.sh", RepoSpec::new("alpha"));
    let refused = |why: &str, path: &std::path::Path| {
        let out = org.run(&["spawn", "--repo", "alpha", "--task", "t"]);
        let text = output_text(&out);
        assert!(!out.status.success(), "{why}: {text}");
        assert!(
            text.contains(&format!("worker.user {}", account.name))
                && text.contains(&path.display().to_string())
                && text.contains("configuration"),
            "{why}: {text}"
        );
        assert!(org.run(&["can-spawn", "alpha"]).status.success(), "{why}");
    };
    let mode = |p: &std::path::Path, m: u32| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap()
    };
    let was = std::fs::metadata(&org.config_path).unwrap().mode() & 0o7777;
    mode(&org.config_path, 0o666);
    refused("repos.yaml writable by everyone", &org.config_path);
    mode(&org.config_path, was);
    // The organisation's directory writable: repos.yaml could be replaced by a rename.
    mode(&org.root, 0o777);
    refused("the organisation's directory writable", &org.root);
    mode(&org.root, 0o711);
    let (out, id) = org.spawn_foreground("alpha", "work as another account");
    assert!(out.status.success(), "{}", org.diag(&id));
}

#[test]
fn a_worker_of_its_own_account_whose_clone_is_gone_is_taken_over_after_its_supervisor_dies() {
    let Some(account) = worker_account() else {
        return;
    };
    let (org, id, wt) = orphaned_after_its_push(&account, "t-account");
    assert_eq!(std::fs::metadata(&wt).unwrap().uid(), account.uid);
    // Its clone lost while nobody supervised it (a disk cleaned, a node replaced).
    std::fs::remove_dir_all(&wt).unwrap();

    resumed_to_done_once(&org, &id);
    // Made again from what it had pushed, and handed to the account again.
    let meta = std::fs::metadata(&wt).unwrap();
    assert_eq!(meta.uid(), account.uid);
    assert!(wt.join(".git").is_dir(), "a clone of its own again");
}

/// A spawner or resumer killed inside the hand-over of a worker's clone (found by the chaos
/// test): the clone's top already the account's, much of its inside still orch's — its
/// worker could neither write a file nor run git in it, and reported BLOCKED for good. The
/// hand-over's mark tells the resumer to hand it over again, before the next life starts.
#[test]
fn a_hand_over_cut_half_way_is_done_again_by_resume() {
    let Some(account) = worker_account() else {
        return;
    };
    let (org, id, wt) = orphaned_after_its_push(&account, "t-half");
    // What a hand-over killed after its first entries leaves: the clone's top and some of its
    // git directory the account's, the rest (objects, refs, index, a tracked file, the
    // worker's home) orch's, and the mark in the session directory.
    let home = wt.parent().unwrap().join("home");
    for orchs in [
        wt.join(".git/objects"),
        wt.join(".git/refs"),
        wt.join(".git/HEAD"),
        wt.join(".git/index"),
        wt.join("status.txt"),
        home.clone(),
    ] {
        chown_tree_to_root(&orchs);
    }
    std::fs::write(org.state.join(&id).join("handing-over"), b"").unwrap();
    assert_eq!(std::fs::metadata(&wt).unwrap().uid(), account.uid);

    resumed_to_done_once(&org, &id);
    // Handed over whole this time, and the mark gone with it.
    let mut orchs = Vec::new();
    owned_by_other(&wt, account.uid, &mut orchs);
    owned_by_other(&home, account.uid, &mut orchs);
    assert!(orchs.is_empty(), "still not the account's: {orchs:?}");
    assert!(!org.state.join(&id).join("handing-over").exists());
}

/// A worker of `account` on `core` that pushed, whose supervisor was then killed and whose
/// processes are gone (its CI gate still closed): the organisation, its id and its clone.
fn orphaned_after_its_push(
    account: &crate::support::TestAccount,
    task_id: &str,
) -> (Org, String, std::path::PathBuf) {
    let org = Org::new(Spec::resumable(&[("core", &[])]).user(&account.name));
    let id = org.spawn("core", "push-hang add the feature", task_id);
    org.wait_mark(&id, 1, "pushed");
    let wt = std::path::PathBuf::from(org.worker(&id).worktree);
    org.kill_supervisor(&id);
    poll_until(
        "the worker's processes gone with its guard",
        DEADLINE,
        || processes_under(&wt).is_empty().then_some(()),
        || format!("{:?}", processes_under(&wt)),
    );
    (org, id, wt)
}

/// CI opened, then one `orch resume`: it takes worker `id` over, and its one replacement
/// ends DONE.
fn resumed_to_done_once(org: &Org, id: &str) {
    org.open_gate("core");
    let answer = org.resume();
    assert!(
        answer.to_string().contains(id),
        "resume took it over: {answer}"
    );
    org.wait_done(id);
    let w = org.worker(id);
    assert_eq!(w.progress.milestone, Milestone::Done, "{}", org.diag(id));
    assert_eq!(w.respawns, 1, "{}", org.diag(id));
}

fn chown_tree_to_root(path: &std::path::Path) {
    let meta = std::fs::symlink_metadata(path).unwrap();
    if meta.is_dir() {
        for e in std::fs::read_dir(path).unwrap() {
            chown_tree_to_root(&e.unwrap().path());
        }
    }
    std::os::unix::fs::lchown(path, Some(0), Some(0)).unwrap();
}

/// Every path under `path` (itself included) not owned by `uid`.
fn owned_by_other(path: &std::path::Path, uid: u32, out: &mut Vec<std::path::PathBuf>) {
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return;
    };
    if meta.uid() != uid {
        out.push(path.to_path_buf());
    }
    if meta.is_dir() {
        for e in std::fs::read_dir(path).unwrap().flatten() {
            owned_by_other(&e.path(), uid, out);
        }
    }
}

#[test]
fn workers_of_a_pool_of_accounts_cannot_touch_each_others_clones() {
    let (Some(a), Some(b)) = (worker_account(), second_worker_account()) else {
        return;
    };
    let mut spec = Spec::local("pool_worker.sh")
        .repo(RepoSpec::new("alpha"))
        .repo(RepoSpec::new("beta"))
        .users(&[&a.name, &b.name]);
    spec.worker_section = Some(format!(
        "  command: [sh, {:?}]\n  env_passthrough: [PATH, E2E_OUT]\n  stop_grace: 1s\n",
        worker_script("pool_worker.sh").display().to_string()
    ));
    let org = Org::new(spec);
    let victim = org.spawn_detached("alpha", "victim: wait");
    let attacker = org.spawn_detached("beta", "attacker: look next door");
    org.wait_milestone(&victim, "DONE", DEADLINE);
    org.wait_milestone(&attacker, "DONE", DEADLINE);
    let (vu, au) = (read(&org, "victim-uid"), read(&org, "attacker-uid"));
    assert_ne!(
        vu.trim(),
        au.trim(),
        "each live worker runs as an account of its own"
    );
    for uid in [&vu, &au] {
        assert!(
            [a.uid.to_string(), b.uid.to_string()].contains(&uid.trim().to_string()),
            "{uid}"
        );
    }
    for attempt in ["read-victim", "write-victim"] {
        assert_ne!(
            code(&org, attempt),
            0,
            "{attempt}: {}",
            read(&org, &format!("{attempt}.out"))
        );
        assert!(
            read(&org, &format!("{attempt}.out")).contains("Permission denied"),
            "{attempt}: {}",
            read(&org, &format!("{attempt}.out"))
        );
    }
    let wt = std::path::PathBuf::from(org.worker(&victim).worktree);
    assert!(!wt.join("pwned.txt").exists());
}

/// A worker of an account of its own asks its supervisor for another worker's CI log (beta's
/// pushed commit: its code's output), naming beta's repository and then its own: both refused,
/// while its own commit's log is answered.
#[test]
fn a_worker_is_answered_about_its_own_commits_ci_only() {
    let Some(account) = worker_account() else {
        return;
    };
    let org = org_of(
        &account.name,
        "ci_snoop.sh",
        vec![
            RepoSpec::new("alpha").standard_ci("echo log-of-$ORCH_CI_REPO"),
            RepoSpec::new("beta").standard_ci("echo log-of-$ORCH_CI_REPO"),
        ],
    );
    let (out, beta) = org.spawn_foreground("beta", "beta's work");
    assert!(out.status.success(), "{}", org.diag(&beta));
    assert!(
        read(&org, "own-logs.out").contains("log-of-beta"),
        "{}",
        org.diag(&beta)
    );
    let (out, alpha) = org.spawn_foreground("alpha", "alpha's work");
    assert!(out.status.success(), "{}", org.diag(&alpha));
    assert!(
        read(&org, "own-logs.out").contains("log-of-alpha"),
        "{}",
        org.diag(&alpha)
    );
    for snoop in ["snoop-other-repo", "snoop-as-own-repo"] {
        let said = read(&org, &format!("{snoop}.out"));
        assert_ne!(code(&org, snoop), 0, "{snoop} was answered: {said}");
        assert!(!said.contains("log-of-beta"), "{snoop}: {said}");
        assert!(said.contains("not answered"), "{snoop}: {said}");
    }
}

/// A worker of an account of its own sees, of the workers' branches on its remote, only its own
/// (issue 34, item 10): an earlier worker's branch of the same repository is neither listed
/// nor fetched through its relay, while the base branch and its own push are.
#[test]
fn a_worker_sees_only_its_own_branch_through_its_relay() {
    let Some(account) = worker_account() else {
        return;
    };
    let org = org_as(&account.name, "branch_snoop.sh", RepoSpec::new("alpha"));
    let (out, first) = org.spawn_foreground("alpha", "first: push");
    assert!(out.status.success(), "{}", org.diag(&first));
    let (out, second) = org.spawn_foreground("alpha", "second: look around");
    assert!(out.status.success(), "{}", org.diag(&second));
    let before = read(&org, "listed-before.out");
    assert_eq!(code(&org, "listed-before"), 0, "{before}");
    assert!(before.contains("refs/heads/main"), "{before}");
    assert!(
        !before.contains(&first),
        "the first worker's branch was listed: {before}"
    );
    assert_ne!(
        code(&org, "fetch-other"),
        0,
        "the first worker's branch was fetched: {}",
        read(&org, "fetch-other.out")
    );
    let after = read(&org, "listed-after.out");
    assert!(
        after.contains(&format!("refs/heads/orch/{second}")),
        "{after}"
    );
    assert!(!after.contains(&first), "{after}");
}
