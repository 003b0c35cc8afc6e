//! Human output tells the truth and cannot be hijacked: control characters a worker wrote
//! (its notes become alerts, end reasons, events) are printed escaped by every human view;
//! `orch status` says GONE only for a worker `orch resume` would take over and whose
//! supervisor is not running; a supervisor that let go is not said to have died.

use crate::support::{Org, RepoSpec, Spec, output_text, resumed_entry};
use orch::store::workers as ws;

/// A worker that reports BLOCKED with terminal commands in its note (clear screen, set the
/// window title, a C1 CSI), then exits.
const EVIL_WORKER: &str = r#"#!/bin/sh
esc=$(printf '\033')
bel=$(printf '\007')
csi=$(printf '\302\233')
"$ORCH_BIN" report BLOCKED --note "need help ${esc}[2J${esc}]0;owned${bel} then ${csi}31m red" >/dev/null
exit 0
"#;

#[test]
fn control_characters_from_a_worker_are_printed_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("evil.sh");
    std::fs::write(&script, EVIL_WORKER).unwrap();
    let org = Org::new(Spec::local(script.to_str().unwrap()).repo(RepoSpec::new("core")));
    let id = org.spawn_detached("core", "do it");
    org.wait_milestone(&id, "BLOCKED", crate::support::DEADLINE);
    org.wait_supervisor_gone(&id);
    // The raw note is what the worker sent (JSON escapes it by itself).
    let w = org.worker(&id);
    assert!(w.progress.end_reason.unwrap().contains('\u{1b}'));

    for args in [
        &["alerts"][..],
        &["sessions", "show", &id],
        &["sessions", "list"],
        &["status"],
    ] {
        let out = org.run(args);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{args:?}: {}",
            output_text(&out)
        );
        for stream in [&out.stdout, &out.stderr] {
            assert!(
                !stream.iter().any(|b| *b == 0x1b || *b == 0x07),
                "orch {args:?} printed a raw control character: {:?}",
                String::from_utf8_lossy(stream)
            );
            assert!(
                !String::from_utf8_lossy(stream).contains('\u{9b}'),
                "orch {args:?} printed a raw CSI"
            );
        }
    }
    let alerts = output_text(&org.run(&["alerts"]));
    assert!(
        alerts.contains(r"need help \x1b[2J\x1b]0;owned\x07 then \u{9b}31m red"),
        "{alerts}"
    );
    let show = output_text(&org.run(&["sessions", "show", &id]));
    assert!(show.contains(r"\x1b[2J"), "{show}");
    assert!(
        show.contains("waits for an operator"),
        "a BLOCKED worker is not resume's: {show}"
    );

    // BLOCKED waits for an operator: not GONE, which would send them to `orch resume`.
    let status = output_text(&org.run(&["status"]));
    let row = status
        .lines()
        .find(|l| l.starts_with(id.as_str()))
        .unwrap_or_else(|| panic!("{status}"));
    assert!(!row.contains("GONE"), "{row}");
    assert!(row.contains("none (orch respawn)"), "{row}");
}

#[test]
fn a_live_supervisor_whose_lease_lapsed_is_not_shown_gone() {
    let org = Org::new(Spec::resumable(&[("core", &[])]));
    let id = org.spawn("core", "hang in it", "t-lapsed");
    org.wait_mark(&id, 1, "hanging");
    org.kill_supervisor(&id);
    // A process that is alive but has not renewed its lease (a supervisor on a full disk).
    let mut alive = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    let pid = alive.id() as i64;
    let start = orch::process::proc_stat(pid as i32).map(|s| s.start_ticks as i64);
    org.store()
        .write(|tx| ws::claim_lease(tx, &id, pid, start, -1_000))
        .unwrap();
    let status = output_text(&org.run(&["status"]));
    let show = output_text(&org.run(&["sessions", "show", &id]));
    let _ = alive.kill();
    let _ = alive.wait();
    let row = status
        .lines()
        .find(|l| l.starts_with(id.as_str()))
        .unwrap_or_else(|| panic!("{status}"));
    assert!(!row.contains("GONE"), "{row}");
    assert!(row.contains("alive, lease lapsed"), "{row}");
    assert!(show.contains("lease lapsed"), "{show}");
    // Once the process is gone, it is GONE.
    let status = output_text(&org.run(&["status"]));
    assert!(status.contains("GONE (orch resume)"), "{status}");
}

#[test]
fn a_supervisor_that_let_go_is_not_said_to_have_died() {
    let org = Org::new(Spec::resumable(&[("core", &[])]));
    let id = org.spawn("core", "hang in it", "t-stopped");
    org.wait_mark(&id, 1, "hanging");
    let pid = org.kill_supervisor(&id) as i64;
    // As a supervisor that ended normally leaves it: its lease given up (expiry 0).
    org.store()
        .write(|tx| ws::set_lease(tx, &id, pid, None))
        .unwrap();
    let answer = org.resume();
    let detail = resumed_entry(&answer, &id).unwrap()["detail"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        detail.contains(&format!(
            "its supervisor (pid {pid}) stopped while it was running"
        )),
        "{detail}"
    );
    assert!(!detail.contains("died"), "{detail}");
}
