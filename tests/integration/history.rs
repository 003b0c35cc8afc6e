//! The history bounded: `orch status` / `sessions list` show live workers and the last ended
//! ones (filters, pages), and `orch gc` prunes ended workers older than `history.keep` — their
//! rows, session directories, checkpoints and delivered alerts — keeping what something still
//! needs (a chain lock, unpushed work, a wave in progress, an alert not delivered).

use crate::support::{DEADLINE, Org, RepoSpec, Spec, output_text};
use orch::contract::Contract;
use orch::milestone::{Milestone, Progress};
use orch::store::now_ms;
use orch::store::workers::{self as ws, WorkerRecord};
use serde_json::Value;

const DAY_MS: i64 = 86_400_000;

/// A worker of the past, written straight into the store (as a long-running organisation
/// would have it), ended `ended_ago_ms` ago (None: live).
fn past_worker(org: &Org, id: &str, repo: &str, m: Milestone, ended_ago_ms: Option<i64>) {
    let c = Contract::embedded();
    let at = now_ms() - ended_ago_ms.unwrap_or(0) - 60_000;
    let mut p = Progress::new(&c, at);
    // The state as its supervisor would have left it (`enter` is the state machine's own).
    p.milestone = m;
    let w = WorkerRecord {
        id: id.into(),
        repo: repo.into(),
        task: "from the past".into(),
        task_id: None,
        component: None,
        plan: None,
        progress: p,
        branch: format!("orch/{id}"),
        base_sha: "b".repeat(40),
        worktree: org.state.join(id).join("worktree").display().to_string(),
        remote: "orch".into(),
        day: "2024-01-01".into(),
        supervisor_pid: None,
        supervisor_start: None,
        lease_until_ms: None,
        worker_pid: None,
        worker_running: false,
        exit_code: None,
        respawns: 0,
        resume_note: None,
        created_ms: at,
        updated_ms: at,
        ended_ms: None,
        model: None,
        model_source: None,
        node: None,
        fence: 0,
    };
    let mut store = org.store();
    store
        .write(|tx| {
            ws::insert_worker(tx, &w)?;
            ws::add_event(tx, id, "spawned", Milestone::Working, "from the past")?;
            ws::record_push(tx, id, &"c".repeat(40), at)?;
            if let Some(ago) = ended_ago_ms {
                tx.execute(
                    "UPDATE workers SET ended_ms = ?2 WHERE id = ?1",
                    orch::params![id, now_ms() - ago],
                )?;
            }
            Ok(())
        })
        .unwrap();
    std::fs::create_dir_all(org.state.join(id)).unwrap();
    std::fs::write(org.state.join(id).join("worker.log"), "old output\n").unwrap();
}

/// An alert of worker `id` with one delivery row in `state`.
fn alert(org: &Org, id: &str, state: &str) -> i64 {
    org.store()
        .write(|tx| {
            let a = ws::add_alert(
                tx,
                &ws::AlertRecord {
                    id: 0,
                    at_ms: now_ms() - 40 * DAY_MS,
                    severity: "warning".into(),
                    worker_id: Some(id.into()),
                    repo: None,
                    kind: format!("test_{state}"),
                    message: "m".into(),
                    repeats: 1,
                    resolved_ms: None,
                },
            )?;
            tx.execute(
                "INSERT INTO alert_deliveries (alert_id, sink, state, next_ms) VALUES (?1, 'hook', ?2, 0)",
                orch::params![a, state],
            )?;
            tx.execute(
                "UPDATE alerts SET settled = ?2 WHERE id = ?1",
                orch::params![a, state != "pending"],
            )?;
            Ok(a)
        })
        .unwrap()
}

fn count(org: &Org, sql: &str, id: &str) -> i64 {
    org.store()
        .read(|tx| tx.query_row(sql, [id], |r| r.get(0)))
        .unwrap()
}

fn ids(v: &Value, key: &str) -> Vec<String> {
    v[key]
        .as_array()
        .unwrap_or_else(|| panic!("{key} in {v:#}"))
        .iter()
        .map(|w| w["worker_id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn gc_prunes_ended_workers_past_history_keep_and_keeps_what_is_still_needed() {
    let org = Org::new(
        Spec::local("gc_leftovers.sh")
            .repo(RepoSpec::new("alpha"))
            .repo(RepoSpec::new("beta"))
            .repo(RepoSpec::new("gamma")),
    );
    // Real workers: one DONE (pushed, landed), one CANCELLED with a commit never pushed.
    let done = org.spawn_detached("alpha", "done");
    let unpushed = org.spawn_detached("beta", "unpushed");
    org.wait_until("unpushed ready", DEADLINE, || {
        org.out.join(format!("ready-{unpushed}")).exists()
    });
    let out = org.run(&["cancel", &unpushed, "--reason", "test"]);
    assert!(out.status.success(), "{}", output_text(&out));
    org.wait_milestone(&unpushed, "CANCELLED", DEADLINE);
    org.wait_supervisor_gone(&unpushed);
    org.wait_done(&done);
    let done_checkpoint = orch::checkpoint::path_for(&org.state, &org.worker(&done));
    assert!(done_checkpoint.exists());

    // The past: ended 40 days ago unless said otherwise.
    let old = Some(40 * DAY_MS);
    past_worker(&org, "old-delivered", "alpha", Milestone::Done, old);
    let delivered = alert(&org, "old-delivered", "delivered");
    let pending = alert(&org, "old-delivered", "pending");
    past_worker(&org, "old-locked", "gamma", Milestone::Failed, old);
    let lock = org
        .store()
        .try_lock(
            &org.config.graph,
            "gamma",
            "old-locked",
            orch::lock::HolderKind::Worker,
            None,
            None,
        )
        .unwrap();
    assert!(matches!(lock, orch::store::LockAttempt::Acquired(_)));
    past_worker(&org, "old-in-wave", "alpha", Milestone::Done, old);
    past_worker(&org, "old-finished-wave", "alpha", Milestone::Done, old);
    org.store()
        .write(|tx| {
            let long_ago = now_ms() - 35 * DAY_MS;
            tx.execute(
                "INSERT INTO waves (name, file, created_ms, updated_ms) VALUES ('running', 'w.yaml', ?1, ?1)",
                [long_ago],
            )?;
            tx.execute(
                "INSERT INTO waves (name, file, created_ms, updated_ms, finished_ms) VALUES ('over', 'o.yaml', ?1, ?1, ?1)",
                [long_ago],
            )?;
            tx.execute(
                "INSERT INTO wave_tasks (wave, id, seq, definition, worker_id) VALUES ('running', 't', 0, '{}', 'old-in-wave'),
                   ('over', 't', 0, '{}', 'old-finished-wave')",
                [],
            )?;
            Ok(())
        })
        .unwrap();
    past_worker(&org, "recent", "alpha", Milestone::Failed, Some(DAY_MS));
    past_worker(&org, "blocked", "beta", Milestone::Blocked, None);
    // The real ones ended 31 days ago too.
    org.store()
        .write(|tx| {
            tx.execute(
                "UPDATE workers SET ended_ms = ?1 WHERE id IN (?2, ?3)",
                orch::params![now_ms() - 31 * DAY_MS, done, unpushed],
            )
        })
        .unwrap();

    // --dry-run says what would go, and nothing goes.
    let plan = org.json(&["gc", "--dry-run", "--json"]);
    let h = &plan["history"];
    let mut pruned = ids(h, "pruned");
    pruned.sort();
    let mut want = vec![
        done.clone(),
        "old-delivered".to_string(),
        "old-finished-wave".to_string(),
    ];
    want.sort();
    assert_eq!(pruned, want, "{plan:#}");
    assert_eq!(h["waves"], serde_json::json!(["over"]), "{plan:#}");
    assert_eq!(
        (h["alerts"].as_u64(), h["deliveries"].as_u64()),
        (Some(1), Some(1)),
        "{plan:#}"
    );
    let kept = |id: &str| {
        h["kept"]
            .as_array()
            .unwrap()
            .iter()
            .find(|k| k["worker_id"] == id)
            .map(|k| k["reason"].as_str().unwrap().to_string())
    };
    assert!(
        kept(&unpushed).unwrap().contains("worktree or branch"),
        "{plan:#}"
    );
    assert!(
        kept("old-locked").unwrap().contains("chain lock"),
        "{plan:#}"
    );
    assert!(
        kept("old-in-wave").unwrap().contains("wave running"),
        "{plan:#}"
    );
    assert!(
        kept("recent").is_none() && kept("blocked").is_none(),
        "{plan:#}"
    );
    assert!(org.state.join(&done).exists() && done_checkpoint.exists());
    assert_eq!(
        count(&org, "SELECT COUNT(*) FROM workers WHERE id = ?1", &done),
        1
    );
    let text = String::from_utf8_lossy(&org.run(&["gc", "--dry-run"]).stdout).to_string();
    assert!(text.contains("would prune old-delivered"), "{text}");
    assert!(text.contains("kept the history of old-locked"), "{text}");

    // The real run.
    let report = org.json(&["gc", "--json"]);
    let mut pruned = ids(&report["history"], "pruned");
    pruned.sort();
    assert_eq!(pruned, want, "{report:#}");
    for id in &want {
        for table in [
            "workers WHERE id",
            "worker_events WHERE worker_id",
            "pushes WHERE worker_id",
        ] {
            let sql = format!("SELECT COUNT(*) FROM {table} = ?1");
            assert_eq!(count(&org, &sql, id), 0, "{table} of {id}");
        }
        assert!(!org.state.join(id).exists(), "session directory of {id}");
        let out = org.run(&["sessions", "show", id]);
        assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
    }
    assert!(
        !done_checkpoint.exists(),
        "a pruned worker is not rebuilt from its checkpoint"
    );
    // The delivered alert and its outbox row went; the one still to deliver stays.
    let alerts = |id: i64| {
        org.store()
            .read(|tx| {
                tx.query_row(
                    "SELECT (SELECT COUNT(*) FROM alerts WHERE id = ?1), (SELECT COUNT(*) FROM alert_deliveries WHERE alert_id = ?1)",
                    [id],
                    |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)),
                )
            })
            .unwrap()
    };
    assert_eq!(alerts(delivered), (0, 0));
    assert_eq!(alerts(pending), (1, 1));
    // Kept: rows and session directories.
    for id in [
        unpushed.as_str(),
        "old-locked",
        "old-in-wave",
        "recent",
        "blocked",
    ] {
        assert_eq!(
            count(&org, "SELECT COUNT(*) FROM workers WHERE id = ?1", id),
            1,
            "{id}"
        );
        assert!(
            count(
                &org,
                "SELECT COUNT(*) FROM worker_events WHERE worker_id = ?1",
                id
            ) > 0,
            "{id}"
        );
        assert!(org.state.join(id).exists(), "{id}");
    }
    assert!(org.state.join(&unpushed).join("worktree").exists());
    assert_eq!(
        count(&org, "SELECT COUNT(*) FROM waves WHERE name = ?1", "over"),
        0
    );
    assert_eq!(
        count(
            &org,
            "SELECT COUNT(*) FROM waves WHERE name = ?1",
            "running"
        ),
        1
    );
    assert_eq!(
        count(
            &org,
            "SELECT COUNT(*) FROM locks WHERE holder = ?1",
            "old-locked"
        ),
        1
    );

    // A second run has nothing more to prune.
    let again = org.json(&["gc", "--json"]);
    assert!(ids(&again["history"], "pruned").is_empty(), "{again:#}");
}

#[test]
fn status_and_sessions_show_live_workers_and_the_last_ended_with_filters_and_pages() {
    let org = Org::new(
        Spec::local("gc_leftovers.sh")
            .repo(RepoSpec::new("alpha"))
            .repo(RepoSpec::new("beta")),
    );
    // `orch status` where nothing ran creates the store through nothing: make it.
    drop(org.store());
    for i in 0..24 {
        let repo = if i % 2 == 0 { "alpha" } else { "beta" };
        past_worker(
            &org,
            &format!("e{i:02}"),
            repo,
            Milestone::Done,
            Some((30 - i) * 3_600_000),
        );
    }
    past_worker(&org, "live", "beta", Milestone::Blocked, None);
    org.store()
        .write(|tx| {
            tx.execute("UPDATE workers SET task_id = 'nightly:t1' WHERE id = 'e03'", [])?;
            tx.execute(
                "INSERT INTO waves (name, file, created_ms, updated_ms) VALUES ('nightly', 'n.yaml', 0, 0)",
                [],
            )
        })
        .unwrap();

    let first = org.json(&["status", "--json"]);
    let shown = ids(&first, "workers");
    assert_eq!(shown.len(), 21, "{first:#}");
    assert_eq!(shown[0], "live");
    assert_eq!(shown[1], "e23", "newest ended first");
    assert_eq!(first["more_ended"], 4);
    let next = first["next"].as_str().unwrap().to_string();
    let second = org.json(&["status", "--json", "--after", &next]);
    assert_eq!(
        ids(&second, "workers"),
        ["e03", "e02", "e01", "e00"],
        "{second:#}"
    );
    assert_eq!(second["more_ended"], 0);
    assert!(second["next"].is_null());
    assert_eq!(
        ids(&org.json(&["status", "--json", "--all"]), "workers").len(),
        25
    );
    let beta = ids(
        &org.json(&["status", "--json", "--repo", "beta", "--limit", "3"]),
        "workers",
    );
    assert_eq!(beta, ["live", "e23", "e21", "e19"]);
    // e23 ended 7 h ago, e22 8 h: `--since 7h30m` takes e23 (and the live one) only.
    let since = ids(
        &org.json(&["status", "--json", "--since", "7h30m"]),
        "workers",
    );
    assert_eq!(since, ["live", "e23"]);
    let wave = ids(
        &org.json(&["sessions", "list", "--json", "--wave", "nightly"]),
        "sessions",
    );
    assert_eq!(wave, ["e03"]);

    let text = String::from_utf8_lossy(&org.run(&["status"]).stdout).to_string();
    assert!(text.contains("… 4 more ended; --all"), "{text}");
    assert!(text.contains("e23") && !text.contains("e03"), "{text}");
    let text = String::from_utf8_lossy(&org.run(&["sessions", "list"]).stdout).to_string();
    assert!(text.contains("… 4 more ended"), "{text}");

    for (args, what) in [
        (vec!["status", "--since", "soon"], "--since"),
        (vec!["status", "--after", "bogus"], "--after bogus"),
        (vec!["sessions", "list", "--repo", "nope"], "--repo nope"),
        (vec!["status", "--wave", "nope"], "--wave nope"),
        (vec!["status", "--limit", "0"], "--limit"),
    ] {
        let out = org.run(&args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            output_text(&out)
        );
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(what),
            "{args:?}: {}",
            output_text(&out)
        );
    }
}
