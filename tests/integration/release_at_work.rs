//! `orch release --force` of a worker at work (issue 34): a worker runs only while its chain
//! lock is held by it, so the lock of one whose process runs is not freed under it — the
//! command refuses (exit 1), naming `orch cancel`, and the dependent stays locked out. Before,
//! the lock went and the worker worked on with no lock: `orch can-spawn` of a dependent said yes.

use crate::support::{Org, RepoSpec, Spec, output_text};

#[test]
fn the_lock_of_a_worker_at_work_is_not_forced_free_under_it() {
    let org = Org::new(
        Spec::local("idle.sh")
            .repo(RepoSpec::new("core").standard_ci("true"))
            .repo(RepoSpec::new("vm").deps(&["core"]).standard_ci("true")),
    );
    let id = org.spawn_detached("core", "idle");
    let out = org.run(&["release", &id, "--force", "--reason", "steal it"]);
    assert_eq!(out.status.code(), Some(1), "{}", output_text(&out));
    let text = output_text(&out);
    assert!(
        text.contains("is at work") && text.contains(&format!("orch cancel {id}")),
        "{text}"
    );
    assert_eq!(org.lock_of(&id).as_deref(), Some("core"), "the lock went");
    let can = org.run(&["can-spawn", "vm"]);
    assert_eq!(can.status.code(), Some(1), "{}", output_text(&can));
    // Stopped through the command it names, the lock goes with the worker.
    let out = org.run(&["cancel", &id, "--reason", "test over"]);
    assert!(out.status.success(), "{}", output_text(&out));
    assert_eq!(org.lock_of(&id), None);
}
