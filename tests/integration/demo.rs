//! `orch demo` is what a newcomer runs first: it must end with every task DONE and verified.

#[test]
fn demo_runs_every_task_to_a_verified_done() {
    let out = crate::support::orch_cmd().arg("demo").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("every task DONE with CI verified green and radicle-push success"),
        "{stdout}"
    );
    assert!(
        stdout.contains("PUSHED_TO_CI -> FIXING_CI"),
        "the vm worker fails CI once: {stdout}"
    );
    assert!(stdout.contains("locks held now: 0"), "{stdout}");
    // Part two: the organisation as one wave, through ticks.
    assert!(stdout.contains("wave demo-wave: 5/5 DONE"), "{stdout}");
    // Every change lands; core's API v2 breaks vm, which a fix worker repairs before the
    // wave's vm task starts.
    assert!(stdout.contains("-> landed"), "{stdout}");
    assert!(
        stdout.contains("breakage: downstream -> broken: vm is red"),
        "{stdout}"
    );
    assert!(
        stdout.contains("spawned on vm (its chain handed over)"),
        "{stdout}"
    );
    let fixed = stdout
        .lines()
        .position(|l| l.contains("fix vm-") && l.contains("-> landed"))
        .unwrap_or_else(|| panic!("the fix lands:\n{stdout}"));
    let vm_next = stdout
        .lines()
        .position(|l| l.contains("vm-next") && l.contains("started by tick"))
        .unwrap_or_else(|| panic!("vm-next starts:\n{stdout}"));
    assert!(
        fixed < vm_next,
        "the fix lands before the wave's vm task starts:\n{stdout}"
    );
    // Dependency order: core's lock is released before vm starts, vm's before net starts.
    let pos = |needle: &str| {
        stdout
            .find(needle)
            .unwrap_or_else(|| panic!("{needle} missing:\n{stdout}"))
    };
    assert!(pos("core  chain lock released") < pos("vm    spawned"));
    assert!(pos("vm    chain lock released") < pos("net   spawned"));
}
