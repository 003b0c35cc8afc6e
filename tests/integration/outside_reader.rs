//! An operator reads `orch.db` with the real `sqlite3` shell (a query, a `.backup`) while
//! supervisors run: nothing is lost. A process holding SQLite connections must never open and
//! close the database file itself — closing any descriptor of it drops all the process's POSIX
//! locks, the outside reader then believes it is the database's only user and, on closing,
//! deletes the WAL and its index under the live connections (their writes go to deleted files).

use crate::support::{DEADLINE, Org, RepoSpec, Spec, poll_until};
use std::path::Path;
use std::process::Command;

fn sqlite3(db: &Path, sql: &str) -> String {
    let out = Command::new("sqlite3")
        .arg(db)
        .arg(sql)
        .output()
        .expect("the sqlite3 shell (Debian's package sqlite3) runs");
    assert!(
        out.status.success(),
        "sqlite3 {sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The files of the database that process `pid` has open and that are deleted.
fn deleted_db_files(pid: i64) -> Vec<String> {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    fds.filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .map(|p| p.display().to_string())
        .filter(|p| p.contains("orch.db") && p.ends_with("(deleted)"))
        .collect()
}

#[test]
fn reads_and_backups_with_the_sqlite3_shell_beside_supervisors_lose_nothing() {
    let org = Org::new(Spec::local("long.sh").repo(RepoSpec::new("alpha")));
    let id = org.spawn_detached("alpha", "work for a long time");
    let db = org.state.join("orch.db");
    let backup = org.out.join("backup.db");
    let supervisor = org.worker(&id).supervisor_pid.expect("supervised");
    // Three lease renewals (every 5 s), each followed by an outside read: the renewal looks at
    // the database file, and the read after it is where the WAL used to be deleted.
    for round in 0..3 {
        let before = org.worker(&id).lease_until_ms.unwrap_or(0);
        poll_until(
            &format!("round {round}: the lease of {id} renewed"),
            DEADLINE,
            || (org.worker(&id).lease_until_ms.unwrap_or(0) > before).then_some(()),
            || org.diag(&id),
        );
        assert_eq!(sqlite3(&db, "select count(*) from workers"), "1");
        sqlite3(&db, &format!(".backup '{}'", backup.display()));
        let deleted = deleted_db_files(supervisor);
        assert!(
            deleted.is_empty(),
            "round {round}: the supervisor writes to deleted database files: {deleted:?}"
        );
    }
    // The supervisor still writes where everyone reads: its lease moves on in the file.
    let seen = org.worker(&id).lease_until_ms.unwrap_or(0);
    poll_until(
        "the lease renewed after the outside reads",
        DEADLINE,
        || (org.worker(&id).lease_until_ms.unwrap_or(0) > seen).then_some(()),
        || org.diag(&id),
    );
    assert_eq!(sqlite3(&db, "PRAGMA integrity_check"), "ok");
    assert_eq!(sqlite3(&backup, "select count(*) from workers"), "1");
    // And it still records its worker's end: cancel, CANCELLED, the lock released.
    let out = org.run(&["cancel", &id, "--reason", "done reading", "--by", "test"]);
    assert!(
        out.status.success(),
        "{}",
        crate::support::output_text(&out)
    );
    assert_eq!(org.worker(&id).milestone().as_str(), "CANCELLED");
    assert!(org.locks_of(&id).is_empty());
    org.wait_supervisor_gone(&id);
    assert_eq!(sqlite3(&db, "PRAGMA integrity_check"), "ok");
    assert!(deleted_db_files(supervisor).is_empty());
}
