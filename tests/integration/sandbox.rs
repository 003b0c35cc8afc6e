//! Workers in a sandbox (`worker.sandbox`, issue 25): orch runs unprivileged, as an operator
//! without root runs it, and its workers as its own user — so file modes keep nothing from
//! them, and a mount namespace of each worker's own must. A hostile worker tries orch's
//! database and state, the clone, orch's home's key, orch's processes, the cgroup tree,
//! undoing its mounts and an operator command; none of it works, and its work still reaches
//! DONE through orch (pushes relayed by its supervisor, CI questions over its channel). Needs
//! root to make the unprivileged account; skipped with a message elsewhere.

use crate::support::{
    DEADLINE, OUT_VAR, Org, RepoSpec, Spec, job, output_text, poll_until,
    unprivileged_orch_account, worker_script,
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

/// A directory for the worker's answers outside the organisation's (which its sandbox makes
/// read-only), the account's: `org.out` and `$E2E_OUT` from now on. Removed when dropped.
fn answers_outside(org: &mut Org, uid: u32) -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("orch-it-out-")
        .tempdir()
        .unwrap();
    let path = std::fs::canonicalize(dir.path()).unwrap();
    std::os::unix::fs::chown(&path, Some(uid), None).unwrap();
    org.out = path;
    let out = org.out.display().to_string();
    org.set_env(OUT_VAR, &out);
    dir
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
            // `<state>/forge/work/<n>/alpha`, and orch's database is not four levels up.
            .job(job(
                "check",
                "test -f work.txt && ls -A ../../../.. && test ! -e ../../../../orch.db",
            ))
            .job(job("radicle-push", "true").needs(&["check"])),
    );
    spec.worker_section = Some(format!(
        "  command: [sh, {:?}]\n  env_passthrough: [PATH, E2E_OUT]\n  stop_grace: 1s\n  sandbox: true\n",
        worker_script("sandbox_worker.sh").display().to_string()
    ));
    let mut org = Org::new(spec);
    org.run_as(&account.name, account.uid);
    let _out = answers_outside(&mut org, account.uid);
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

/// An organisation of one repository whose workers run `script` in a sandbox, orch as an
/// unprivileged account with a key in its home, the worker's answers outside the
/// organisation's directory; `alerts`: its `alerts:` section. None (said) where this machine
/// cannot.
fn sandboxed_org(script: &str, alerts: Option<&str>) -> Option<(Org, u32, tempfile::TempDir)> {
    let account = unprivileged_orch_account()?;
    if !unprivileged_namespaces(account.uid) {
        eprintln!("skipped: worker.sandbox needs unprivileged user namespaces");
        return None;
    }
    let mut spec = Spec::local(script).repo(RepoSpec::new("alpha"));
    spec.worker_section = Some(format!(
        "  command: [sh, {:?}]\n  env_passthrough: [PATH, E2E_OUT]\n  stop_grace: 1s\n  sandbox: true\n",
        worker_script(script).display().to_string()
    ));
    spec.alerts = alerts.map(str::to_string);
    let mut org = Org::new(spec);
    org.run_as(&account.name, account.uid);
    let out = answers_outside(&mut org, account.uid);
    let ssh = org.root.join("orch-home/.ssh");
    std::fs::create_dir_all(&ssh).unwrap();
    std::fs::write(
        ssh.join("id_ed25519"),
        "-----BEGIN OPENSSH PRIVATE KEY-----\n",
    )
    .unwrap();
    for p in [ssh.clone(), ssh.join("id_ed25519")] {
        std::os::unix::fs::chown(&p, Some(account.uid), None).unwrap();
    }
    Some((org, account.uid, out))
}

/// What the worker's sink would have left, had it run as orch outside the sandbox.
fn assert_no_sink_ran(org: &Org) {
    for left in ["sink-ran", "stolen.db", "stolen-key"] {
        assert!(
            !org.out.join(left).exists(),
            "the worker's alert command ran outside its sandbox (it left {left})"
        );
    }
}

/// Issue 34: a sandboxed worker appended an alert command sink to repos.yaml and reported
/// BLOCKED; the operator's next command delivered the BLOCKED alert with that sink, as orch,
/// outside the sandbox — which copied orch's hidden database and read its key. Now the
/// organisation's directory and the contract are read-only in the sandbox: nothing the worker
/// tries changes them, and the operator's next command runs no sink of its.
#[test]
fn a_sandboxed_worker_cannot_add_an_alert_command_to_repos_yaml() {
    let Some((org, _, _out)) = sandboxed_org("config_escape.sh", None) else {
        return;
    };
    let config = std::fs::read(&org.config_path).unwrap();
    let contract = std::fs::read(&org.contract).unwrap();
    let (out, id) = org.spawn_foreground("alpha", "escape through repos.yaml");
    assert!(
        org.out.join("attempts-done").exists(),
        "{}\n{}",
        output_text(&out),
        org.diag(&id)
    );
    // The operator's next command: resume delivers the alert outbox (the BLOCKED alert) to
    // the sinks repos.yaml names.
    let resume = org.run(&["resume"]);
    assert!(resume.status.success(), "{}", output_text(&resume));
    assert_no_sink_ran(&org);
    for attempt in [
        "write-config",
        "replace-config",
        "write-contract",
        "new-contracts",
    ] {
        assert_ne!(
            code(&org, attempt),
            0,
            "{attempt} succeeded: {}",
            read(&org, &format!("{attempt}.out"))
        );
    }
    for attempt in ["write-config", "write-contract", "new-contracts"] {
        assert!(
            read(&org, &format!("{attempt}.out")).contains("Read-only file system"),
            "{attempt}: {}",
            read(&org, &format!("{attempt}.out"))
        );
    }
    assert_eq!(
        std::fs::read(&org.config_path).unwrap(),
        config,
        "repos.yaml changed"
    );
    assert_eq!(
        std::fs::read(&org.contract).unwrap(),
        contract,
        "the contract changed"
    );
    assert!(!org.root.join("contracts").exists());
    let show = org.run(&["sessions", "show", &id]);
    assert!(
        output_text(&show).contains("BLOCKED"),
        "{}",
        output_text(&show)
    );

    // The path was live: the same sink, put there by the operator, runs at the next resume
    // (the BLOCKED alert was never delivered, there was no sink).
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&org.config_path)
        .unwrap();
    std::io::Write::write_all(&mut file, read(&org, "forged-sink.yaml").as_bytes()).unwrap();
    let resume = org.run(&["resume"]);
    assert!(resume.status.success(), "{}", output_text(&resume));
    poll_until(
        "the operator's sink to run",
        DEADLINE,
        || org.out.join("sink-ran").exists().then_some(()),
        || output_text(&resume),
    );
}

/// The same worker where the organisation has an alert command sink of its own: a script the
/// worker's user (orch's) owns, outside the organisation's directory. Appending to it, or
/// renaming its directory to put another in its place, fails; the BLOCKED alert is delivered by
/// the script as the operator wrote it.
#[test]
fn a_sandboxed_worker_cannot_change_an_alert_commands_script() {
    let sinks = tempfile::Builder::new()
        .prefix("orch-it-sink-")
        .tempdir()
        .unwrap();
    let dir = std::fs::canonicalize(sinks.path()).unwrap();
    let script = dir.join("notify.sh");
    let text = "#!/bin/sh\ncat >>\"$E2E_OUT/delivered\"\n";
    std::fs::write(&script, text).unwrap();
    let alerts = format!("  - command: [sh, {:?}]\n", script.display().to_string());
    let Some((org, uid, _out)) = sandboxed_org("config_escape.sh", Some(&alerts)) else {
        return;
    };
    for p in [&dir, &script] {
        std::os::unix::fs::chown(p, Some(uid), None).unwrap();
    }
    std::fs::write(org.out.join("sink-script"), script.display().to_string()).unwrap();
    let (out, id) = org.spawn_foreground("alpha", "escape through the alert script");
    assert!(
        org.out.join("attempts-done").exists(),
        "{}\n{}",
        output_text(&out),
        org.diag(&id)
    );
    // Its supervisor delivered the BLOCKED alert with the script (or with what the worker
    // made of it).
    poll_until(
        "the BLOCKED alert delivered",
        DEADLINE,
        || {
            (read(&org, "delivered").contains("\"blocked\"") || org.out.join("sink-ran").exists())
                .then_some(())
        },
        || org.diag(&id),
    );
    assert_no_sink_ran(&org);
    for attempt in ["write-sink", "move-sink-dir"] {
        assert_ne!(
            code(&org, attempt),
            0,
            "{attempt} succeeded: {}",
            read(&org, &format!("{attempt}.out"))
        );
    }
    assert!(
        read(&org, "write-sink.out").contains("Read-only file system"),
        "{}",
        read(&org, "write-sink.out")
    );
    assert!(
        read(&org, "move-sink-dir.out").contains("busy"),
        "{}",
        read(&org, "move-sink-dir.out")
    );
    assert_eq!(std::fs::read_to_string(&script).unwrap(), text);
    assert!(!dir.with_extension("moved").exists());
    assert_no_sink_ran(&org);
}

/// repos.yaml named through a symlink in a directory orch's user may write: the read-only
/// mounts fix what the symlink points at, not where it points, so a sandboxed worker could
/// point it at an organisation of its own. `orch check` says so, naming the file, the symlink
/// and the fix, and no worker is started with it.
#[test]
fn repos_yaml_through_a_symlink_a_sandboxed_worker_could_replace_is_refused() {
    let Some((org, _, _out)) = sandboxed_org("config_escape.sh", None) else {
        return;
    };
    let link = org.out.join("current");
    std::os::unix::fs::symlink(&org.root, &link).unwrap();
    let via = link.join("repos.yaml");
    let check = org
        .cmd(&["check"])
        .env("ORCH_CONFIG", &via)
        .output()
        .unwrap();
    let text = output_text(&check);
    assert_eq!(check.status.code(), Some(2), "{text}");
    assert!(
        text.contains(&format!(
            "repos.yaml {} is reached through the symlink {}",
            via.display(),
            link.display()
        )) && text.contains(&format!(
            "name the real path ({})",
            org.config_path.display()
        )),
        "{text}"
    );
    let spawn = org
        .cmd(&["spawn", "--repo", "alpha", "--task", "t", "--foreground"])
        .env("ORCH_CONFIG", &via)
        .output()
        .unwrap();
    let text = output_text(&spawn);
    assert!(!spawn.status.success(), "{text}");
    assert!(text.contains("reached through the symlink"), "{text}");
    // Refused before anything was taken: no worker record, no lock.
    assert!(!text.contains("WORKING"), "{text}");
    assert!(!org.out.join("attempts-done").exists(), "the worker ran");
    // Named by its real path, the same organisation is fine.
    let check = org.run(&["check"]);
    assert!(check.status.success(), "{}", output_text(&check));
}

/// A shared local forge (`forge.path`) inside the organisation's directory: hidden from a
/// sandboxed worker as the state directory is (its remotes and their hooks are orch's), while
/// its CI's checkout there is kept writable under the read-only organisation.
#[test]
fn a_shared_forge_in_the_organisation_is_hidden_and_its_ci_checkouts_writable() {
    let Some(account) = unprivileged_orch_account() else {
        return;
    };
    if !unprivileged_namespaces(account.uid) {
        eprintln!("skipped: worker.sandbox needs unprivileged user namespaces");
        return;
    }
    let script = "shared_forge_worker.sh";
    let mut spec = Spec::local(script).repo(
        RepoSpec::new("alpha")
            .job(job("check", "test -f work.txt && echo ran >ci-wrote.txt"))
            .job(job("radicle-push", "true").needs(&["check"])),
    );
    spec.worker_section = Some(format!(
        "  command: [sh, {:?}]\n  env_passthrough: [PATH, E2E_OUT]\n  stop_grace: 1s\n  sandbox: true\n",
        worker_script(script).display().to_string()
    ));
    let mut org = Org::new(spec);
    let forge = org.root.join("shared-forge");
    let yaml = std::fs::read_to_string(&org.config_path).unwrap();
    let yaml = yaml.replacen(
        "forge: {kind: local,",
        &format!(
            "forge: {{kind: local, path: {:?},",
            forge.display().to_string()
        ),
        1,
    );
    std::fs::write(&org.config_path, yaml).unwrap();
    org.run_as(&account.name, account.uid);
    let _out = answers_outside(&mut org, account.uid);
    std::fs::write(org.out.join("forge-path"), forge.display().to_string()).unwrap();
    let (out, id) = org.spawn_foreground("alpha", "work beside a shared forge");
    let show = org.run(&["sessions", "show", &id]);
    assert!(
        output_text(&show).contains("DONE"),
        "{}\n{}\n{}",
        output_text(&out),
        output_text(&show),
        org.diag(&id)
    );
    // Its remotes are there, and the worker saw an empty directory (a tmpfs over it).
    assert!(forge.join("alpha.git").is_dir(), "{}", org.diag(&id));
    assert_eq!(
        org.worker(&id).progress.milestone,
        orch::milestone::Milestone::Done,
        "{}",
        org.diag(&id)
    );
    assert_eq!(code(&org, "read-shared-forge"), 0);
    assert_eq!(
        read(&org, "read-shared-forge.out").trim(),
        "",
        "the worker sees the shared forge"
    );
}

/// A wave file kept outside the organisation's directory, owned by orch's user: each tick
/// reads it again (a task added there would be started), so the sandbox of a worker the wave
/// started keeps it read-only too.
#[test]
fn a_sandboxed_worker_cannot_add_a_task_to_its_wave_file() {
    let Some((org, uid, _out)) = sandboxed_org("config_escape.sh", None) else {
        return;
    };
    let waves = tempfile::Builder::new()
        .prefix("orch-it-waves-")
        .tempdir()
        .unwrap();
    let dir = std::fs::canonicalize(waves.path()).unwrap();
    let file = dir.join("wave.yaml");
    let text =
        "name: w1\ntasks:\n  - {id: first, repo: alpha, task: \"escape through the wave\"}\n";
    std::fs::write(&file, text).unwrap();
    for p in [&dir, &file] {
        std::os::unix::fs::chown(p, Some(uid), None).unwrap();
    }
    std::fs::write(org.out.join("wave-file"), file.display().to_string()).unwrap();
    let tick = org.run(&["wave", "run", file.to_str().unwrap(), "--tick"]);
    assert!(tick.status.success(), "{}", output_text(&tick));
    poll_until(
        "the wave's worker to try",
        DEADLINE,
        || org.out.join("attempts-done").exists().then_some(()),
        || output_text(&tick),
    );
    assert_ne!(
        code(&org, "write-wave"),
        0,
        "the worker added a task to its wave: {}",
        read(&org, "write-wave.out")
    );
    assert!(
        read(&org, "write-wave.out").contains("Read-only file system"),
        "{}",
        read(&org, "write-wave.out")
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
}
