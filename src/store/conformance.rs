//! The store's conformance helper (tests only): one test body run against a fresh store of each
//! backend — SQLite in a temporary directory, PostgreSQL in a schema of its own in the server at
//! `ORCH_TEST_PG_URL` (dropped afterwards). Without that variable the PostgreSQL run is skipped
//! with a line on the terminal, never silently; with `ORCH_TEST_PG_REQUIRED=1` (CI) a missing
//! server fails the test.

use super::{Store, pg};
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Runs `f` on a fresh SQLite store, then on a fresh PostgreSQL one.
pub(crate) fn each_backend(test: &str, mut f: impl FnMut(&mut Store)) {
    let dir = tempfile::tempdir().unwrap();
    f(&mut Store::open(dir.path()).unwrap());
    match pg_store(test) {
        Some((mut store, schema)) => {
            f(&mut store);
            drop(store);
            schema.drop();
        }
        None => skipped(test),
    }
}

/// Says on the terminal that `test` did not run on PostgreSQL — straight to it: the harness
/// captures print!/eprint! of a passing test.
pub(crate) fn skipped(test: &str) {
    let _ = writeln!(
        std::io::stderr(),
        "{test}: PostgreSQL backend skipped: ORCH_TEST_PG_URL not set"
    );
}

/// A fresh schema in the test server and a store in it; `None` when no server is configured.
pub(crate) fn pg_store(test: &str) -> Option<(Store, Schema)> {
    let url = std::env::var("ORCH_TEST_PG_URL")
        .ok()
        .filter(|u| !u.is_empty());
    let Some(url) = url else {
        assert!(
            std::env::var("ORCH_TEST_PG_REQUIRED").as_deref() != Ok("1"),
            "{test}: ORCH_TEST_PG_REQUIRED=1 but ORCH_TEST_PG_URL is not set"
        );
        return None;
    };
    static N: AtomicUsize = AtomicUsize::new(0);
    let short: String = test
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .take(30)
        .collect();
    let name = format!(
        "t{}_{}_{short}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    );
    let mut admin = pg::PgConn::connect(&url, None)
        .unwrap_or_else(|e| panic!("{test}: cannot connect to {}: {e}", pg::redact(&url)));
    admin.batch(&format!("CREATE SCHEMA \"{name}\"")).unwrap();
    let store = Store::open_pg(&url, Some(&name)).unwrap_or_else(|e| panic!("{test}: {e}"));
    Some((store, Schema { admin, name, url }))
}

/// A test's schema, dropped with everything in it by [`Schema::drop`].
pub(crate) struct Schema {
    admin: pg::PgConn,
    name: String,
    url: String,
}

impl Schema {
    /// Another connection to the same schema (another process, another host).
    pub(crate) fn open(&self) -> Store {
        Store::open_pg(&self.url, Some(&self.name)).unwrap()
    }

    pub(crate) fn drop(mut self) {
        let _ = self
            .admin
            .batch(&format!("DROP SCHEMA \"{}\" CASCADE", self.name));
    }
}

#[cfg(test)]
mod tests {
    use super::each_backend;
    use crate::milestone::Milestone;
    use crate::store::history::tests::worker;
    use crate::store::workers::{self as ws, AlertRecord, HistoryFilter, RequestKind};
    use crate::store::{alerts, board, upstream, usage, waves};

    /// Writers on several connections pass a check-then-write one at a time, as SQLite's
    /// BEGIN IMMEDIATE makes them: eight racing for conflicting chains, one lock granted.
    #[test]
    fn postgresql_writers_on_several_connections_are_serialised() {
        use crate::graph::RepoGraph;
        use crate::lock::HolderKind;
        use crate::store::LockAttempt;
        let test = "postgresql_writers_on_several_connections_are_serialised";
        let Some((store, schema)) = super::pg_store(test) else {
            return super::skipped(test);
        };
        drop(store);
        let g = RepoGraph::new([
            ("core".to_string(), vec![]),
            ("vm".to_string(), vec!["core".to_string()]),
        ]);
        for round in 0..3 {
            let granted = std::sync::atomic::AtomicUsize::new(0);
            let ready = std::sync::Barrier::new(8);
            std::thread::scope(|sc| {
                for i in 0..8 {
                    let (g, granted, ready) = (&g, &granted, &ready);
                    let (url, name) = (&schema.url, &schema.name);
                    sc.spawn(move || {
                        let mut s = crate::store::Store::open_pg(url, Some(name)).unwrap();
                        ready.wait();
                        let repo = if i % 2 == 0 { "vm" } else { "core" };
                        let holder = format!("hold:{round}-{i}");
                        if let LockAttempt::Acquired(_) = s
                            .try_lock(g, repo, &holder, HolderKind::Hold, None, None)
                            .unwrap()
                        {
                            granted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                        }
                    });
                }
            });
            assert_eq!(granted.into_inner(), 1, "round {round}");
            let mut s = schema.open();
            let held = s.locks().unwrap();
            assert_eq!(held.len(), 1);
            s.release(&held[0].holder, None, None).unwrap();
        }
        schema.drop();
    }

    /// Every kind of statement the store runs, once on each backend: inserts that return their
    /// id, upserts, conflicts ignored, NULL-safe comparisons, aggregates, paging, booleans.
    #[test]
    fn the_store_surface_behaves_alike_on_both_backends() {
        each_backend("the_store_surface_behaves_alike_on_both_backends", |s| {
            let before = s.read(board::data_version).unwrap();
            s.write(|tx| {
                ws::insert_worker(tx, &worker("w1", "core", Milestone::Working, 10))?;
                ws::insert_worker(tx, &worker("w2", "vm", Milestone::Done, 20))?;
                ws::add_event(tx, "w1", "note", Milestone::Working, "hello")?;
                assert_eq!(ws::claim_lease(tx, "w1", 42, Some(7), 1_000)?, 1);
                assert!(ws::set_lease(tx, "w1", 42, Some(2_000))?);
                assert!(ws::renew_lease(tx, "w1", 1, Some(2_000))?);
                assert!(!ws::renew_lease(tx, "w1", 0, Some(2_000))?, "a stale token");
                ws::mark_worker_started(tx, "w1", 99)?;
                let r1 = ws::add_request(
                    tx,
                    "w1",
                    &RequestKind::Cancel {
                        by: "me".into(),
                        reason: "why".into(),
                    },
                )?;
                let r2 = ws::add_request(
                    tx,
                    "w1",
                    &RequestKind::Cancel {
                        by: "me".into(),
                        reason: "again".into(),
                    },
                )?;
                assert!(r2 > r1, "ids increase: {r1} {r2}");
                assert!(ws::finish_request(tx, r1, "done", false)?);
                assert!(!ws::finish_request(tx, r1, "done", false)?, "once");
                ws::record_push(tx, "w1", &"a".repeat(40), 30)?;
                ws::record_push(tx, "w1", &"a".repeat(40), 31)?;
                ws::record_push(tx, "w1", &"c".repeat(40), 32)?;
                crate::store::set_meta(tx, "k", 5)?;
                crate::store::set_meta(tx, "k", 6)?;
                Ok(())
            })
            .unwrap();
            s.read(|tx| {
                assert_eq!(crate::store::meta(tx, "k")?, Some(6));
                assert_eq!(crate::store::meta(tx, "nothing")?, None);
                let w = ws::get_worker(tx, "w1")?.unwrap();
                assert_eq!((w.worker_pid, w.worker_running), (Some(99), true));
                assert_eq!(ws::worker_events(tx, "w1")?.len(), 1);
                assert_eq!(ws::pending_requests(tx, "w1")?.len(), 1);
                let pushed: Vec<_> = ws::pushes(tx, "w1")?.into_iter().map(|p| p.sha).collect();
                assert_eq!(
                    pushed,
                    ["a".repeat(40), "c".repeat(40)],
                    "in push order, once each"
                );
                assert_eq!(ws::first_pushed_ms(tx, &"a".repeat(40))?, Some(30));
                let live: Vec<_> = ws::live_workers(tx)?.into_iter().map(|w| w.id).collect();
                assert!(live.contains(&"w1".to_string()));
                let f = HistoryFilter::default();
                ws::ended_workers(tx, &f, None, None)?;
                ws::count_ended(tx, &f, None)?;
                Ok(())
            })
            .unwrap();

            // Alerts: a repeat within the window is counted, NULL repos compare as equal.
            let alert = AlertRecord {
                id: 0,
                at_ms: 100,
                severity: "warning".into(),
                worker_id: None,
                repo: None,
                kind: "k".into(),
                message: "m".into(),
                repeats: 1,
                resolved_ms: None,
            };
            let (first, again) = s
                .write(|tx| {
                    Ok((
                        alerts::record(tx, &alert, 1_000)?,
                        alerts::record(tx, &alert, 1_000)?,
                    ))
                })
                .unwrap();
            let alerts::Recorded::New(id) = first else {
                panic!("{first:?}")
            };
            assert!(
                matches!(again, alerts::Recorded::Repeat { id: i, repeats: 2 } if i == id),
                "{again:?}"
            );
            s.write(|tx| {
                let sinks = ["hook".to_string()];
                alerts::ensure_deliveries(tx, id, &sinks, 100)?;
                alerts::ensure_deliveries(tx, id, &sinks, 100)?;
                let due = alerts::claim_due(tx, 200, 1, 1_000, true, 10)?;
                assert_eq!(due.len(), 1);
                alerts::finish(tx, id, "hook", &alerts::AttemptEnd::Delivered, 300)?;
                alerts::settle(tx, id)?;
                assert_eq!(alerts::deliveries(tx, 0)?.len(), 1);
                assert_eq!(alerts::next_pending_ms(tx)?, None);
                Ok(())
            })
            .unwrap();

            // Waves, usage and rate limits, upstream CI claims.
            s.write(|tx| {
                assert!(waves::record_wave(tx, "w", "w.yaml", 1)?);
                assert!(!waves::record_wave(tx, "w", "w.yaml", 2)?, "known already");
                waves::put_task(tx, "w", "t1", 0, "{}", Some(5))?;
                waves::set_task_worker(tx, "w", "t1", "w1", 3)?;
                assert_eq!(
                    waves::wave_task_of(tx, "w1")?,
                    Some(("w".to_string(), "t1".to_string()))
                );
                waves::set_progress(tx, "w", 1, None, 4)?;
                waves::others_waiting(tx, "x", 0)?;
                waves::done_durations(tx)?;
                let mut u = usage::Usage {
                    cost_usd: 0.25,
                    ..Default::default()
                };
                u.tokens.input = 7;
                usage::save_usage(tx, "w1", &u, 5)?;
                usage::save_usage(tx, "w1", &u, 6)?;
                assert_eq!(usage::get_usage(tx, "w1")?.map(|u| u.cost_usd), Some(0.25));
                usage::limit_agent(tx, "claude", 50, "first")?;
                usage::limit_agent(tx, "claude", 40, "earlier")?;
                assert_eq!(
                    usage::agent_limit(tx, "claude", 0)?,
                    Some((50, "earlier".to_string())),
                    "the latest reset wins"
                );
                assert!(upstream::claim_poll(
                    tx, "core", "main", 1, 1_000, 100, 1_000
                )?);
                assert!(
                    !upstream::claim_poll(tx, "core", "main", 2, 1_001, 100, 1_000)?,
                    "claimed"
                );
                Ok(())
            })
            .unwrap();
            s.read(|tx| {
                let f = board::figures(tx)?;
                assert_eq!(f.respawns, 0);
                Ok(())
            })
            .unwrap();
            let after = s.read(board::data_version).unwrap();
            let _ = (before, after);
        });
    }

    /// A supervisor's store carries its lease's fencing token: once another process claimed
    /// the worker (the token moved on), none of its writes lands, whatever it writes.
    #[test]
    fn a_lease_claimed_again_fences_every_write_of_its_old_holder() {
        each_backend(
            "a_lease_claimed_again_fences_every_write_of_its_old_holder",
            |s| {
                s.write(|tx| ws::insert_worker(tx, &worker("w1", "core", Milestone::Working, 10)))
                    .unwrap();
                let first = s
                    .write(|tx| ws::claim_lease(tx, "w1", 42, Some(7), 15_000))
                    .unwrap();
                s.fence("w1", first);
                s.write(|tx| ws::add_event(tx, "w1", "note", Milestone::Working, "mine"))
                    .unwrap();
                assert!(
                    s.write(|tx| ws::renew_lease(tx, "w1", first, Some(15_000)))
                        .unwrap()
                );
                // Another process (another node) takes the worker over.
                s.unfence();
                let second = s
                    .write(|tx| ws::claim_lease(tx, "w1", 43, Some(8), 15_000))
                    .unwrap();
                assert_eq!(second, first + 1);
                let lease = s.worker("w1").unwrap().unwrap().lease().unwrap();
                assert_eq!((lease.pid, lease.fence), (43, second));
                assert_eq!(lease.node.as_deref(), Some(crate::node::name()));
                // The old holder: every write refused, nothing written.
                s.fence("w1", first);
                let refused = s
                    .write(|tx| ws::add_event(tx, "w1", "note", Milestone::Working, "stale"))
                    .unwrap_err();
                assert!(
                    matches!(refused, crate::store::StoreError::Fenced { fence, now: Some(n), .. } if fence == first && n == second),
                    "{refused}"
                );
                assert!(s.fence_lost());
                assert!(s.rolled_back(|_| Ok(())).is_err());
                s.unfence();
                let events = s.read(|tx| ws::worker_events(tx, "w1")).unwrap();
                assert_eq!(
                    events.iter().filter(|e| e.detail == "stale").count(),
                    0,
                    "the fenced write left nothing"
                );
                assert!(
                    !s.write(|tx| ws::renew_lease(tx, "w1", first, Some(1)))
                        .unwrap()
                );
                assert_eq!(s.worker("w1").unwrap().unwrap().fence, second);
            },
        );
    }

    /// Nodes beat (at most once per interval, on the database's clock) and are listed with the
    /// live workers whose lease they hold; a node's slots count only its own lock holders.
    #[test]
    fn nodes_beat_and_count_their_own_workers() {
        use crate::graph::RepoGraph;
        use crate::lock::HolderKind;
        use crate::store::nodes;
        each_backend("nodes_beat_and_count_their_own_workers", |s| {
            let here = crate::node::name();
            s.write(|tx| {
                nodes::beat(tx, here, "host-1", 4)?;
                nodes::beat(tx, "elsewhere", "host-2", 2)?;
                nodes::beat(tx, here, "host-1", 4)?;
                ws::insert_worker(tx, &worker("w1", "core", Milestone::Working, 10))?;
                ws::insert_worker(tx, &worker("w2", "vm", Milestone::Working, 10))?;
                ws::claim_lease(tx, "w1", 42, None, 15_000)?;
                tx.execute("UPDATE workers SET node = 'elsewhere' WHERE id = 'w2'", [])?;
                Ok(())
            })
            .unwrap();
            let g = RepoGraph::new([("core".to_string(), vec![]), ("vm".to_string(), vec![])]);
            for (repo, id) in [("core", "w1"), ("vm", "w2")] {
                s.try_lock(&g, repo, id, HolderKind::Worker, None, None)
                    .unwrap();
            }
            let listed = s.read(nodes::list).unwrap();
            let names: Vec<&str> = listed.iter().map(|n| n.name.as_str()).collect();
            let mut want = vec!["elsewhere", here];
            want.sort();
            assert_eq!(names, want);
            let me = listed.iter().find(|n| n.name == here).unwrap();
            assert_eq!((me.slots, me.workers), (4, 1));
            assert!(me.heartbeat_ms >= me.started_ms);
            assert_eq!(
                s.read(|tx| nodes::lock_holders_on(tx, here)).unwrap(),
                1,
                "the other node's worker takes none of this node's slots"
            );
            assert_eq!(
                s.read(nodes::lock_holders_all).unwrap(),
                2,
                "the organisation's slots count every node's workers"
            );
            // A second host under this node's name is refused while the first beats, and
            // writes nothing; the name moves once the first has been quiet long enough.
            let clash = s
                .write(|tx| nodes::beat(tx, here, "host-9", 4))
                .unwrap()
                .expect("a clash");
            assert_eq!(
                (clash.place.as_str(), clash.name.as_str()),
                ("host-1", here)
            );
            assert!(
                clash.to_string().contains("in use by another host"),
                "{clash}"
            );
            assert_eq!(
                s.read(|tx| nodes::clash(tx, here, "host-1")).unwrap(),
                None,
                "its own place is no clash"
            );
            s.write(|tx| {
                tx.execute(
                    "UPDATE nodes SET heartbeat_ms = heartbeat_ms - ?1 WHERE name = ?2",
                    crate::params![nodes::NAME_HELD_MS + 1, here],
                )
            })
            .unwrap();
            assert_eq!(
                s.write(|tx| nodes::beat(tx, here, "host-9", 4)).unwrap(),
                None
            );
            assert!(
                s.read(|tx| nodes::clash(tx, here, "host-1"))
                    .unwrap()
                    .is_some(),
                "the name is host-9's now"
            );
        });
    }

    /// What callers above the store decide by, answered by the store: a SQLite store is one
    /// node's file (its damage readable here, no release announced); a PostgreSQL one is shared
    /// by every node, announces releases, and has no file on this host.
    #[test]
    fn each_backend_answers_its_capabilities() {
        let test = "each_backend_answers_its_capabilities";
        let dir = tempfile::tempdir().unwrap();
        let sqlite = crate::store::Store::open(dir.path()).unwrap();
        assert!(!sqlite.shared_across_nodes());
        assert!(!sqlite.announces_lock_releases());
        assert_eq!(
            sqlite.database_file(),
            Some(dir.path().join(crate::store::DB_FILE).as_path())
        );
        let Some((pg, schema)) = super::pg_store(test) else {
            return super::skipped(test);
        };
        assert!(pg.shared_across_nodes());
        assert!(pg.announces_lock_releases());
        assert_eq!(pg.database_file(), None);
        drop(pg);
        schema.drop();
    }

    /// A chain lock released on one connection (another host) wakes a waiter LISTENing on
    /// another at once: PostgreSQL's NOTIFY, sent at the release's commit.
    #[test]
    fn a_release_on_postgresql_wakes_a_waiter_on_another_connection() {
        use crate::graph::RepoGraph;
        use crate::lock::HolderKind;
        let test = "a_release_on_postgresql_wakes_a_waiter_on_another_connection";
        let Some((mut waiter, schema)) = super::pg_store(test) else {
            return super::skipped(test);
        };
        let g = RepoGraph::new([("core".to_string(), vec![])]);
        let mut other = schema.open();
        other
            .try_lock(&g, "core", "hold:x", HolderKind::Hold, None, None)
            .unwrap();
        // LISTENing from this first wait on (nothing released yet).
        assert!(!waiter.wait_lock_released(std::time::Duration::from_millis(10)));
        let woke = std::thread::scope(|s| {
            let h = s.spawn(|| waiter.wait_lock_released(std::time::Duration::from_secs(60)));
            other.release("hold:x", None, None).unwrap();
            h.join().unwrap()
        });
        assert!(woke, "the release was not announced");
        drop((waiter, other));
        schema.drop();
    }

    /// A session lost under a store (the server restarted, an administrator ended it) is
    /// replaced: at most one transaction fails, the next runs on a new session, nothing is lost.
    #[test]
    fn a_postgresql_store_whose_session_was_ended_goes_on_with_a_new_one() {
        let test = "a_postgresql_store_whose_session_was_ended_goes_on_with_a_new_one";
        let Some((mut s, schema)) = super::pg_store(test) else {
            return super::skipped(test);
        };
        s.write(|tx| ws::insert_worker(tx, &worker("w1", "core", Milestone::Working, 10)))
            .unwrap();
        let pid: i32 = s
            .read(|tx| tx.query_row("SELECT pg_backend_pid()", [], |r| r.get(0)))
            .unwrap();
        let mut admin = schema.open();
        let ended: bool = admin
            .read(|tx| tx.query_row("SELECT pg_terminate_backend(?1)", [pid], |r| r.get(0)))
            .unwrap();
        assert!(ended);
        let mut failures = 0;
        let written = loop {
            match s.write(|tx| ws::add_event(tx, "w1", "note", Milestone::Working, "after")) {
                Ok(()) => break true,
                Err(e) if failures < 1 => {
                    failures += 1;
                    eprintln!("{test}: attempt failed as the session was lost: {e}");
                }
                Err(e) => panic!("{test}: no new session: {e}"),
            }
        };
        assert!(written);
        let events = s.read(|tx| ws::worker_events(tx, "w1")).unwrap();
        assert!(events.iter().any(|e| e.detail == "after"));
        let new_pid: i32 = s
            .read(|tx| tx.query_row("SELECT pg_backend_pid()", [], |r| r.get(0)))
            .unwrap();
        assert_ne!(new_pid, pid);
        drop((s, admin));
        schema.drop();
    }
}
