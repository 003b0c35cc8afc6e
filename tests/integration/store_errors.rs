//! A locked, unreadable or unwritable database gets a clear error naming the file, and loses
//! nothing: the file is left as it was.

use crate::support::{orch_cmd, output_text, shipped_contract};

fn setup() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("repos.yaml"),
        "repos:\n  core: {}\n  vm: { deps: [core] }\n",
    )
    .unwrap();
    dir
}

fn orch(dir: &std::path::Path, args: &[&str]) -> (i32, String) {
    let out = orch_cmd()
        .env("ORCH_CONFIG", dir.join("repos.yaml"))
        .env("ORCH_STATE_DIR", dir.join("state"))
        .env("ORCH_CONTRACT", shipped_contract())
        .env("ORCH_DB_BUSY_TIMEOUT", "300ms")
        .args(args)
        .output()
        .unwrap();
    (out.status.code().unwrap_or(-1), output_text(&out))
}

#[test]
fn unreadable_database_is_named_and_left_untouched() {
    let dir = setup();
    let state = dir.path().join("state");
    std::fs::create_dir_all(&state).unwrap();
    let garbage = vec![0xA5u8; 8192];
    std::fs::write(state.join("orch.db"), &garbage).unwrap();
    let (code, text) = orch(dir.path(), &["status"]);
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("orch.db") && text.contains("is damaged: it is not a SQLite database"),
        "{text}"
    );
    assert!(
        text.contains("--from-checkpoints"),
        "the message says how to recover: {text}"
    );
    assert_eq!(
        std::fs::read(state.join("orch.db")).unwrap(),
        garbage,
        "nothing lost"
    );
}

#[test]
fn locked_database_is_reported_after_the_busy_timeout() {
    let dir = setup();
    let state = dir.path().join("state");
    // Read-only commands create no state; a hold does.
    assert_eq!(orch(dir.path(), &["status"]).0, 0);
    assert!(!state.join("orch.db").exists(), "status creates nothing");
    assert_eq!(orch(dir.path(), &["hold", "vm", "--reason", "x"]).0, 0);
    assert_eq!(
        orch(dir.path(), &["unhold", "vm"]).0,
        0,
        "creates the database"
    );
    // Another process holds the write lock.
    // (A store's write transaction: in WAL mode BEGIN IMMEDIATE excludes writers as
    // EXCLUSIVE does.)
    let mut holder = orch::store::Store::open(&state).unwrap();
    let (code, text) = holder
        .rolled_back(|_| Ok(orch(dir.path(), &["hold", "core", "--reason", "freeze"])))
        .unwrap();
    // Not "bad input" (2): the system could not do the job, and a retry may (3).
    assert_eq!(code, 3, "{text}");
    assert!(
        text.contains("is busy: locked by another process") && text.contains("orch.db"),
        "{text}"
    );
    // Who holds it is named: this test process, with the write lock.
    assert!(
        text.contains(&format!("pid {} writing", std::process::id())),
        "{text}"
    );
    let (code, text) = orch(dir.path(), &["hold", "core", "--reason", "freeze"]);
    assert_eq!(code, 0, "works again once the lock is gone: {text}");
}

#[test]
fn unwritable_state_directory_is_named() {
    let dir = setup();
    std::fs::write(
        dir.path().join("state"),
        "a file where the state directory should be",
    )
    .unwrap();
    let (code, text) = orch(dir.path(), &["status"]);
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("state"), "{text}");
}

/// A database that lost its contents (truncated to nothing) beside checkpoint files is refused
/// by every command — not read as "no workers, every chain free" — naming the way back, which
/// works: `orch resume --from-checkpoints` rebuilds it from them.
#[test]
fn a_truncated_database_beside_checkpoints_is_refused_until_rebuilt() {
    use crate::support::{Org, RepoSpec, Spec};
    let org = Org::new(Spec::local("happy.sh").repo(RepoSpec::new("alpha")));
    let (out, id) = org.spawn_foreground("alpha", "add a feature");
    assert!(out.status.success(), "{}", org.diag(&id));
    let db = org.state.join("orch.db");
    for f in ["orch.db-wal", "orch.db-shm"] {
        let _ = std::fs::remove_file(org.state.join(f));
    }
    std::fs::write(&db, b"").unwrap();

    for args in [
        vec!["status"],
        vec!["spawn", "--repo", "alpha", "--task", "more"],
        vec!["resume"],
    ] {
        let out = org.run(&args);
        let text = output_text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {text}");
        // (A CI runner of the run that just ended may still write: the emptied file can then
        // read as no database at all — refused as unreadable, with the same way back.)
        assert!(
            (text.contains("holds no workers")
                || text.contains("unreadable")
                || text.contains("is damaged"))
                && text.contains("orch resume --from-checkpoints"),
            "{args:?}: {text}"
        );
    }
    let rebuilt = org.run(&["resume", "--from-checkpoints", "--json"]);
    assert!(rebuilt.status.success(), "{}", output_text(&rebuilt));
    let status = org.run(&["status", "--all", "--json"]);
    assert!(status.status.success(), "{}", output_text(&status));
    assert!(String::from_utf8_lossy(&status.stdout).contains(&id));
}

/// `orch.db` truncated to nothing under live supervisors: every command says the database is
/// damaged (not "locked"), within the busy bound, naming who has it open; each supervisor sees
/// it at its next lease renewal and stops its worker rather than go on unrecorded; then the
/// operator's way back (`resume --from-checkpoints`, `resume`) brings both workers back.
#[test]
fn a_database_truncated_under_live_supervisors_is_named_damaged_and_recovered() {
    use crate::support::{DEADLINE, Org, RepoSpec, Spec, poll};
    let org = Org::new(
        Spec::local("idle.sh")
            .repo(RepoSpec::new("alpha"))
            .repo(RepoSpec::new("beta")),
    );
    let a = org.spawn_detached("alpha", "a");
    let b = org.spawn_detached("beta", "b");
    // The supervisors (once they hold the leases their spawners handed over).
    let supervisor = |id: &str| {
        poll(DEADLINE, || {
            let pid = org.worker(id).supervisor_pid? as i32;
            crate::support::cmdline(pid)
                .is_some_and(|c| c.contains("__supervise"))
                .then_some(pid)
        })
        .expect("the supervisor holds the lease")
    };
    let (pa, pb) = (supervisor(&a), supervisor(&b));
    let db = org.state.join("orch.db");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&db)
        .unwrap()
        .set_len(0)
        .unwrap();

    let started = std::time::Instant::now();
    let out = org.run(&["status"]);
    let text = output_text(&out);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "answered within the bound: {:?}",
        started.elapsed()
    );
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(
        text.contains("is damaged") && text.contains("truncated") && text.contains("orch.db"),
        "{text}"
    );
    assert!(!text.contains("locked"), "{text}");
    assert!(text.contains("--from-checkpoints"), "{text}");
    let spawn = org.run(&["spawn", "--repo", "alpha", "--task", "again"]);
    assert_eq!(spawn.status.code(), Some(2), "{}", output_text(&spawn));
    assert!(output_text(&spawn).contains("is damaged"));

    // Each supervisor notices at its next lease renewal, stops its worker and exits.
    for (id, pid) in [(&a, pa), (&b, pb)] {
        poll(DEADLINE, || {
            crate::support::cmdline(pid)
                .is_none_or(|c| !c.contains("__supervise"))
                .then_some(())
        })
        .expect("the supervisor stops");
        let log = std::fs::read_to_string(org.state.join(id).join("supervisor.log")).unwrap();
        assert!(
            log.contains("is damaged") && log.contains("stopping the worker"),
            "{id}: {log}"
        );
    }

    let rebuilt = org.run(&["resume", "--from-checkpoints", "--json"]);
    assert!(rebuilt.status.success(), "{}", output_text(&rebuilt));
    org.resume();
    for id in [&a, &b] {
        let w = poll(DEADLINE, || {
            let w = org.worker(id);
            (w.worker_running && w.milestone().as_str() == "WORKING").then_some(w)
        })
        .unwrap_or_else(|| panic!("{id} runs again, WORKING"));
        assert_eq!(org.lock_of(id).as_deref(), Some(w.repo.as_str()), "{id}");
    }
}

/// A tmpfs of `size` mounted over `dir`, keeping what was there; unmounted when dropped.
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn over(dir: &std::path::Path, size: &str) -> Tmpfs {
        let keep = dir.with_extension("before-tmpfs");
        std::fs::create_dir_all(dir).unwrap();
        let sh = |cmd: String| {
            let ok = std::process::Command::new("sh")
                .args(["-c", &cmd])
                .status()
                .unwrap()
                .success();
            assert!(ok, "{cmd}");
        };
        let (d, k) = (dir.display(), keep.display());
        sh(format!("cp -a '{d}' '{k}'"));
        sh(format!(
            "mount -t tmpfs -o size={size},mode=0700 tmpfs '{d}'"
        ));
        sh(format!("cp -a '{k}/.' '{d}/'"));
        Tmpfs(dir.to_path_buf())
    }

    /// Writes zeros into `<dir>/filler` until the file system says ENOSPC.
    fn fill(&self) -> std::path::PathBuf {
        use std::io::Write;
        let path = self.0.join("filler");
        let mut f = std::fs::File::create(&path).unwrap();
        let chunk = vec![0u8; 64 * 1024];
        loop {
            if let Err(e) = f.write_all(&chunk).and_then(|()| f.sync_all()) {
                assert_eq!(e.raw_os_error(), Some(libc::ENOSPC), "{e}");
                break;
            }
        }
        // The last pages too (a write smaller than a chunk may still fit).
        while f.write_all(&[0u8; 512]).is_ok() {}
        path
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// The state directory's disk fills under a live supervisor: a command names ENOSPC and the
/// file (exit 3); the supervisor stops its worker (it could record nothing), says so to the
/// webhook directly (the outbox is on the full disk) and, once space is back, in an event;
/// then `orch resume` continues the worker with nothing lost.
#[test]
fn a_full_state_directory_is_named_alerted_and_nothing_is_lost() {
    use crate::alerts::{HOOK_VAR, Receiver};
    use crate::support::{DEADLINE, Org, RepoSpec, Spec, poll};
    if !rustix::process::geteuid().is_root() {
        eprintln!(
            "store_errors::a_full_state_directory_is_named_alerted_and_nothing_is_lost: SKIPPED (needs root to mount a tmpfs)"
        );
        return;
    }
    let rx = Receiver::start(&[]);
    let mut org = Org::new(
        Spec::local("idle.sh")
            .repo(RepoSpec::new("alpha"))
            .repo(RepoSpec::new("beta"))
            .alerts(&format!("  - webhook: {{url_env: {HOOK_VAR}}}\n")),
    );
    org.set_env(HOOK_VAR, &rx.url());
    let disk = Tmpfs::over(&org.state, "48m");
    let id = org.spawn_detached("alpha", "a");
    let pid = poll(DEADLINE, || {
        let pid = org.worker(&id).supervisor_pid? as i32;
        crate::support::cmdline(pid)
            .is_some_and(|c| c.contains("__supervise"))
            .then_some(pid)
    })
    .expect("the supervisor holds the lease");
    let before = org.worker(&id);

    let filler = disk.fill();
    let out = org.run(&["hold", "beta", "--reason", "maintenance"]);
    let text = output_text(&out);
    assert_eq!(out.status.code(), Some(3), "unavailable: {text}");
    assert!(
        text.contains("orch: no space left on device writing")
            && text.contains("(ENOSPC")
            && text.contains(&org.state.display().to_string()),
        "{text}"
    );

    // The supervisor's next write fails: the alert reaches the webhook without the disk.
    let alert = poll(DEADLINE, || rx.delivered("storage").into_iter().next())
        .unwrap_or_else(|| {
        panic!(
            "no storage alert reached the webhook ({:?}); supervisor {pid}: {:?} {:?}; supervisor.log:\n{}",
            rx.hits(),
            std::fs::read_to_string(format!("/proc/{pid}/wchan")),
            std::fs::read_to_string(format!("/proc/{pid}/status")).map(|s| s.lines().take(3).collect::<Vec<_>>().join(" ")),
            std::fs::read_to_string(org.state.join(&id).join("supervisor.log")).unwrap_or_default()
        )
    });
    let message = alert["message"].as_str().unwrap();
    assert!(
        message.contains("ENOSPC") && message.contains(&org.state.display().to_string()),
        "{message}"
    );
    assert!(message.contains("sent directly"), "{message}");
    assert_eq!(alert["severity"], "critical");
    assert_eq!(alert["worker_id"], id.as_str());

    std::fs::remove_file(&filler).unwrap();
    poll(DEADLINE, || {
        crate::support::cmdline(pid)
            .is_none_or(|c| !c.contains("__supervise"))
            .then_some(())
    })
    .expect("the supervisor stops");
    let events = org.events(&id);
    let event = events
        .iter()
        .find(|e| e.kind == "storage")
        .unwrap_or_else(|| panic!("a storage event once space is back: {events:?}"));
    assert!(event.detail.contains("ENOSPC"), "{}", event.detail);
    // And an alert in the store (the one sent directly never was): resolved, space is back.
    let stored: Vec<_> = org
        .store()
        .read(|tx| orch::store::workers::alerts(tx, 0))
        .unwrap()
        .into_iter()
        .filter(|a| a.kind == "storage" && a.worker_id.as_deref() == Some(id.as_str()))
        .collect();
    assert_eq!(stored.len(), 1, "{stored:?}");
    assert!(stored[0].resolved_ms.is_some(), "{stored:?}");
    let log = std::fs::read_to_string(org.state.join(&id).join("supervisor.log")).unwrap();
    assert!(
        log.contains("orch: no space left on device writing"),
        "{log}"
    );

    // Nothing lost: resume continues the worker on its lock.
    org.resume();
    let w = poll(DEADLINE, || {
        let w = org.worker(&id);
        (w.worker_running && w.milestone().as_str() == "WORKING").then_some(w)
    })
    .expect("the worker runs again, WORKING");
    assert_eq!(w.task, before.task);
    assert_eq!(org.lock_of(&id).as_deref(), Some("alpha"));
    drop(org);
    drop(disk);
}

/// The state directory's disk stays full until the supervisor has given up recording why it
/// stopped (it exits): once space is back, `orch resume` records the stop it noted — a
/// `storage` event and a `storage` alert (resolved: the state is writable again and resume
/// continues the worker) — once, and continues the worker.
#[test]
fn a_storage_stop_outlasting_its_supervisor_is_recorded_at_resume() {
    use crate::support::{DEADLINE, Org, RepoSpec, Spec, poll};
    use std::time::Duration;
    if !rustix::process::geteuid().is_root() {
        eprintln!(
            "store_errors::a_storage_stop_outlasting_its_supervisor_is_recorded_at_resume: SKIPPED (needs root to mount a tmpfs)"
        );
        return;
    }
    let org = Org::new(Spec::local("idle.sh").repo(RepoSpec::new("alpha")));
    let disk = Tmpfs::over(&org.state, "48m");
    let id = org.spawn_detached("alpha", "a");
    let pid = poll(DEADLINE, || {
        let pid = org.worker(&id).supervisor_pid? as i32;
        crate::support::cmdline(pid)
            .is_some_and(|c| c.contains("__supervise"))
            .then_some(pid)
    })
    .expect("the supervisor holds the lease");
    // Its next write (a lease renewal at the latest) fails.
    let filler = disk.fill();
    // It tries to record the stop for 30 s, then exits: the disk is still full.
    poll(DEADLINE + Duration::from_secs(30), || {
        crate::support::cmdline(pid)
            .is_none_or(|c| !c.contains("__supervise"))
            .then_some(())
    })
    .expect("the supervisor gives up and exits");
    std::fs::remove_file(&filler).unwrap();
    let storage_events = |org: &Org| -> Vec<_> {
        org.events(&id)
            .into_iter()
            .filter(|e| e.kind == "storage")
            .collect()
    };
    assert!(
        storage_events(&org).is_empty(),
        "nothing could be recorded while the disk was full"
    );
    org.resume();
    let events = storage_events(&org);
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(events[0].detail.contains("ENOSPC"), "{}", events[0].detail);
    let alerts: Vec<_> = org
        .store()
        .read(|tx| orch::store::workers::alerts(tx, 0))
        .unwrap()
        .into_iter()
        .filter(|a| a.kind == "storage" && a.worker_id.as_deref() == Some(id.as_str()))
        .collect();
    assert_eq!(alerts.len(), 1, "{alerts:?}");
    assert_eq!(alerts[0].severity, "critical");
    assert!(
        alerts[0].message.contains("ENOSPC") && alerts[0].resolved_ms.is_some(),
        "{:?}",
        alerts[0]
    );
    // Nothing lost, and recorded once: the worker runs again; a second resume adds nothing.
    poll(DEADLINE, || {
        let w = org.worker(&id);
        (w.worker_running && w.milestone().as_str() == "WORKING").then_some(())
    })
    .expect("the worker runs again, WORKING");
    org.resume();
    assert_eq!(storage_events(&org).len(), 1);
    drop(org);
    drop(disk);
}
