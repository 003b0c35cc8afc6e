//! The journal rule, tested on a real store.

use super::*;

fn stored(p: &Progress) -> (String, String) {
    (
        p.milestone.as_str().to_string(),
        serde_json::to_string(p).unwrap(),
    )
}

#[test]
fn a_row_as_its_supervisor_wrote_it_is_unchanged_and_any_other_is_named() {
    let mine = Progress::new(&crate::contract::Contract::embedded(), 1_000);
    assert_eq!(changed_behind(Some(&stored(&mine)), &mine), None);
    assert_eq!(
        changed_behind(None, &mine).as_deref(),
        Some("its row is gone")
    );
    // A forged DONE in the column alone (what queries select on).
    let (_, json) = stored(&mine);
    let said = changed_behind(Some(&("DONE".into(), json.clone())), &mine).unwrap();
    assert_eq!(said, "milestone column DONE");
    // A forged approval inside the progress, the milestone left alone.
    let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
    v["approved"] = serde_json::json!("a".repeat(40));
    let said = changed_behind(Some(&("WORKING".into(), v.to_string())), &mine).unwrap();
    assert!(said.starts_with("approved: "), "{said}");
    let said = changed_behind(Some(&("WORKING".into(), "{".into())), &mine).unwrap();
    assert_eq!(said, "its progress is not orch's JSON");
}

/// A forgery written between the supervisor's look and its next write is not overwritten
/// unseen: the write finds the row other than it left it, raises the alert in the same
/// transaction, and puts its own state back.
#[test]
fn a_commit_that_finds_its_row_forged_says_so_and_writes_its_own_state() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let contract = crate::contract::Contract::embedded();
    let mine = Progress::new(&contract, 1_000);
    let pid = 4242;
    let w = WorkerRecord {
        id: "w-1".into(),
        repo: "core".into(),
        task: "t".into(),
        task_id: None,
        component: None,
        plan: None,
        progress: mine.clone(),
        branch: "orch/w-1".into(),
        base_sha: "b".repeat(40),
        worktree: "/s/w-1/worktree".into(),
        remote: "orch".into(),
        day: "2024-01-01".into(),
        supervisor_pid: Some(pid),
        supervisor_start: Some(1),
        lease_until_ms: Some(now_ms() + 60_000),
        worker_pid: None,
        worker_running: false,
        exit_code: None,
        respawns: 0,
        resume_note: None,
        created_ms: 1_000,
        updated_ms: 1_000,
        ended_ms: None,
        model: None,
        model_source: None,
        node: None,
        fence: 0,
    };
    store.write(|tx| ws::insert_worker(tx, &w)).unwrap();
    let tampered = |store: &mut Store| {
        store
            .read(|tx| ws::alerts(tx, 0))
            .unwrap()
            .into_iter()
            .filter(|a| a.kind == STATE_TAMPERED && a.worker_id.as_deref() == Some("w-1"))
            .count()
    };
    // A write over the row as it was left: no alert.
    let mut next = mine.clone();
    next.last_progress_ms = 2_000;
    let mut entry = Entry::new(&w, "orch").step(&next, &[]);
    entry.expect = Some(&mine);
    let done = commit(&mut store, dir.path(), Writer::Owner(pid), &entry).unwrap();
    assert_eq!(done, Committed::Written);
    assert_eq!(tampered(&mut store), 0);
    // Someone else writes a green verdict into it; the supervisor's next write finds it.
    let mut forged = next.clone();
    forged.verdict = Some(crate::ci::verdict::VerdictKind::Green);
    store
        .write(|tx| ws::save_progress(tx, "w-1", &forged))
        .unwrap();
    let mut later = next.clone();
    later.last_progress_ms = 3_000;
    let mut entry = Entry::new(&w, "orch").step(&later, &[]);
    entry.expect = Some(&next);
    let done = commit(&mut store, dir.path(), Writer::Owner(pid), &entry).unwrap();
    assert_eq!(done, Committed::Written);
    assert_eq!(tampered(&mut store), 1);
    let stored = store.read(|tx| ws::stored_state(tx, "w-1")).unwrap();
    assert_eq!(changed_behind(stored.as_ref(), &later), None, "put back");
}
