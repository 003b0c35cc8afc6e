//! `orch respawn`: an operator gives a worker that waits for one another go.

use crate::support::{DEADLINE, Org, RepoSpec, Spec, output_text};
use orch::milestone::Milestone;

#[test]
fn a_blocked_permission_worker_respawned_with_a_note_finishes() {
    let org = Org::new(
        Spec::local("denied_then_granted.sh")
            .repo(RepoSpec::new("alpha").standard_ci("test -f feature.txt")),
    );
    let id = org.spawn_detached("alpha", "push the feature");
    org.wait_milestone(&id, "BLOCKED_PERMISSION", DEADLINE);
    org.wait_supervisor_gone(&id);
    std::fs::write(org.out.join(format!("granted-{id}")), "").unwrap();
    let out = org.run(&[
        "respawn",
        &id,
        "--note",
        "git push is allowed now",
        "--by",
        "ops",
    ]);
    assert!(out.status.success(), "{}", output_text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("continues in WORKING"),
        "{}",
        output_text(&out)
    );
    org.wait_done(&id);
    let w = org.worker(&id);
    assert_eq!(w.progress.milestone, Milestone::Done, "{}", org.diag(&id));
    assert!(
        org.transitions(&id)
            .contains(&("BLOCKED_PERMISSION".to_string(), "WORKING".to_string())),
        "{:?}",
        org.transitions(&id)
    );
    let prompt = std::fs::read_to_string(org.state.join(&id).join("prompt.md")).unwrap();
    assert!(prompt.contains("git push is allowed now"), "{prompt}");
    // A DONE worker is not respawned.
    let again = org.run(&["respawn", &id]);
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("is DONE"),
        "{}",
        output_text(&again)
    );
}
