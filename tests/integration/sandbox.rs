//! Workers in a sandbox (`worker.sandbox`, issue 25): orch runs unprivileged, as an operator
//! without root runs it, and its workers as its own user — so file modes keep nothing from
//! them, and a mount namespace of each worker's own must. A hostile worker tries orch's
//! database and state, the clone, orch's home's key, orch's processes, the cgroup tree,
//! undoing its mounts and an operator command; none of it works, and its work still reaches
//! DONE through orch (pushes relayed by its supervisor, CI questions over its channel). Needs
//! root to make the unprivileged account; skipped with a message elsewhere.

use crate::support::{
    Org, RepoSpec, Spec, job, output_text, unprivileged_orch_account, worker_script,
};

/// Whether `uid` may make a user and PID namespace (`unshare -Urpf true` as that account).
fn unprivileged_namespaces(uid: u32) -> bool {
    use std::os::unix::process::CommandExt;
    let mut c = std::process::Command::new("unshare");
    c.args(["-Urpf", "true"]).current_dir("/");
    // SAFETY: only system calls between fork and exec.
    unsafe {
        c.pre_exec(move || {
            if libc::setgroups(0, std::ptr::null()) != 0 || libc::setresuid(uid, uid, uid) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    c.output().is_ok_and(|o| o.status.success())
}

fn read(org: &Org, name: &str) -> String {
    std::fs::read_to_string(org.out.join(name)).unwrap_or_default()
}

fn code(org: &Org, name: &str) -> i32 {
    read(org, &format!("{name}.code"))
        .trim()
        .parse()
        .unwrap_or(-1)
}

#[test]
fn a_sandboxed_worker_of_an_unprivileged_orch_sees_nothing_of_orch_and_still_reaches_done() {
    let Some(account) = unprivileged_orch_account() else {
        return;
    };
    if !unprivileged_namespaces(account.uid) {
        eprintln!(
            "skipped: worker.sandbox needs unprivileged user namespaces, which this machine does not give (orch check says so)"
        );
        return;
    }
    let mut spec = Spec::local("sandbox_worker.sh").repo(
        RepoSpec::new("alpha")
            // Its CI, the worker's code, in the same sandbox: the checkout is
            // `<state>/forge/work/<n>`, and orch's database is not three levels up.
            .job(job(
                "check",
                "test -f work.txt && ls -A ../../.. && test ! -e ../../../orch.db",
            ))
            .job(job("radicle-push", "true").needs(&["check"])),
    );
    spec.worker_section = Some(format!(
        "  command: [sh, {:?}]\n  env_passthrough: [PATH, E2E_OUT]\n  stop_grace: 1s\n  sandbox: true\n",
        worker_script("sandbox_worker.sh").display().to_string()
    ));
    let mut org = Org::new(spec);
    org.run_as(&account.name, account.uid);
    // `orch check` tries a sandbox for real, as the unprivileged orch.
    let check = org.run(&["check"]);
    assert!(check.status.success(), "{}", output_text(&check));
    assert!(
        !output_text(&check).contains("worker.sandbox"),
        "{}",
        output_text(&check)
    );
    // A key in orch's home, the clone's path: what the worker will look for.
    let home = org.root.join("orch-home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(
        home.join(".ssh/id_ed25519"),
        "-----BEGIN OPENSSH PRIVATE KEY-----\n",
    )
    .unwrap();
    std::fs::write(org.out.join("orch-home"), home.display().to_string()).unwrap();
    std::fs::write(
        org.out.join("clone-path"),
        org.clone_path("alpha").display().to_string(),
    )
    .unwrap();
    let chown = std::process::Command::new("chown")
        .args(["-R", &account.uid.to_string()])
        .arg(&home)
        .arg(&org.out)
        .output()
        .unwrap();
    assert!(chown.status.success());

    let (out, id) = org.spawn_foreground("alpha", "work in a sandbox");
    let diag = || {
        format!(
            "{}\n--- supervisor.log\n{}",
            org.diag(&id),
            std::fs::read_to_string(org.state.join(&id).join("supervisor.log")).unwrap_or_default()
        )
    };
    assert_eq!(
        read(&org, "uid").trim(),
        account.uid.to_string(),
        "{}",
        diag()
    );
    assert!(
        org.out.join("attempts-done").exists(),
        "{}\n{}",
        output_text(&out),
        diag()
    );
    for attempt in [
        "read-db",
        "write-db",
        "read-prompt",
        "read-forge",
        "read-clone",
        "read-key",
        "see-orch",
        "leave-cgroup",
        "umount",
        "undo-in-userns",
        "operator",
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
    for hidden in [
        "read-db",
        "read-prompt",
        "read-forge",
        "read-clone",
        "read-key",
    ] {
        assert!(
            read(&org, &format!("{hidden}.out")).contains("No such file or directory"),
            "{hidden}: {}",
            read(&org, &format!("{hidden}.out"))
        );
    }
    // Of the state directory it sees its workspace alone, however it looks.
    assert_eq!(
        read(&org, "state-listing").trim(),
        "workspaces",
        "{}",
        diag()
    );
    assert_eq!(read(&org, "dotdot-listing").trim(), id, "{}", diag());
    assert!(
        read(&org, "push-base.out").contains("may push only to its own branch"),
        "the remote's hook judged the relayed push as the worker's: {}",
        read(&org, "push-base.out")
    );
    // What it is given to read: its CI guide and its handoff, copies in its workspace.
    assert_eq!(
        code(&org, "read-guide"),
        0,
        "{}",
        read(&org, "read-guide.out")
    );
    assert_eq!(code(&org, "push-own"), 0, "{}", read(&org, "push-own.out"));
    assert_eq!(
        code(&org, "ci-status"),
        0,
        "{}",
        read(&org, "ci-status.out")
    );
    assert!(out.status.success(), "{}\n{}", output_text(&out), diag());

    // DONE (asked through orch, as its account), the key and the database untouched.
    let show = org.run(&["sessions", "show", &id]);
    assert!(
        output_text(&show).contains("DONE"),
        "{}",
        output_text(&show)
    );
    let status = org.run(&["status"]);
    assert!(status.status.success(), "{}", output_text(&status));
    let w = org.worker(&id);
    assert_eq!(
        w.progress.milestone,
        orch::milestone::Milestone::Done,
        "{}",
        diag()
    );
}
