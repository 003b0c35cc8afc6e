//! Many `orch spawn` processes at once, each on a repository of its own: once every spawn has
//! answered, every worker it started is supervised — its lease held by a live
//! `orch __supervise` process — without any later orch command having to resume it. (Seen
//! before: with 200 at once, 1–3 workers stayed WORKING with no supervisor.)
//!
//! `ORCH_SPAWN_RACE=N` sets how many (default 200).

use crate::support::{Org, RepoSpec, Spec, cmdline, output_text, poll, reaping_late};
use std::time::Duration;

#[test]
fn spawns_at_once_leave_no_worker_unsupervised() {
    let n: usize = std::env::var("ORCH_SPAWN_RACE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let mut spec = Spec::local("idle.sh");
    spec.max_parallel = n;
    for i in 0..n {
        spec = spec.repo(RepoSpec::new(&format!("r{i:03}")).standard_ci("true"));
    }
    let org = Org::new(spec);

    let late = reaping_late();
    let repos: Vec<String> = (0..n).map(|i| format!("r{i:03}")).collect();
    let outputs = org.spawn_at_once(&repos, "race");
    drop(late);

    let mut ids = Vec::new();
    for (i, out) in outputs.iter().enumerate() {
        assert!(
            out.status.success(),
            "spawn {i} failed (exit {:?}):\n{}",
            out.status.code(),
            output_text(out)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        ids.push(v["worker_id"].as_str().unwrap().to_string());
    }

    // Every spawn has answered, and no other orch command ran: each worker's lease must be
    // held by its live supervisor now (a supervisor that is still starting up holds it through
    // the hand-over; one that died would leave it lapsing).
    let mut store = org.store();
    let now = orch::store::now_ms();
    let mut unsupervised = Vec::new();
    for id in &ids {
        let w = store.worker(id).unwrap().expect("worker exists");
        let lease = w.lease().expect("a lease");
        let supervisor = cmdline(lease.pid as i32).unwrap_or_default();
        if !lease.is_live(now) || !supervisor.contains("__supervise") {
            unsupervised.push(format!(
                "{id}: {} lease pid {} ({supervisor:?}) until {}",
                w.milestone(),
                lease.pid,
                lease.until_ms - now
            ));
        }
    }
    for id in &ids {
        let _ = org.run(&["cancel", id, "--reason", "race over"]);
    }
    let settled = poll(Duration::from_secs(120), || {
        let mut store = org.store();
        (ids.iter().all(|id| {
            store
                .worker(id)
                .unwrap()
                .is_some_and(|w| w.milestone().is_terminal())
        }) && store.locks().unwrap().is_empty())
        .then_some(())
    });
    assert!(
        unsupervised.is_empty(),
        "{} of {n} workers had no live supervisor after their spawn answered:\n{}",
        unsupervised.len(),
        unsupervised.join("\n")
    );
    assert!(settled.is_some(), "every worker is cancelled in the end");
}
