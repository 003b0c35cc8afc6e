//! The history's retention (`orch gc`, `history.keep`): which ended workers' records may go,
//! and everything that references them deleted in one transaction. Never a live worker (one
//! whose change is still landing included: it is not ended), a worker holding a chain lock, a
//! wave not finished (its workers go with it, once it finished or was cancelled before the
//! cutoff), or an alert not delivered (its rows stay, worker or not: delivery reads only them).

use super::sql::{Tx, params};
use super::workers::{COLUMN_COUNT, COLUMNS, WorkerRecord, row_to_worker};

/// Ended workers `orch gc` has not yet found clean in their clone, oldest first.
pub fn uncleaned(tx: &Tx) -> super::sql::Result<Vec<WorkerRecord>> {
    tx.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM workers WHERE ended_ms IS NOT NULL AND cleaned_ms IS NULL
         ORDER BY created_ms, id"
    ))?
    .query_map([], row_to_worker)?
    .collect()
}

/// Nothing of worker `id` is left in its clone (as `orch gc` found or made it).
pub fn mark_cleaned(tx: &Tx, id: &str, now: i64) -> super::sql::Result<()> {
    tx.prepare_cached("UPDATE workers SET cleaned_ms = ?2 WHERE id = ?1 AND cleaned_ms IS NULL")?
        .execute(params![id, now])?;
    Ok(())
}

/// An ended worker old enough to be pruned, with what may keep it.
#[derive(Debug, Clone)]
pub struct Candidate {
    pub worker: WorkerRecord,
    /// `orch gc` found nothing of it left in its clone.
    pub cleaned: bool,
    pub holds_lock: bool,
    /// The waves whose tasks name it.
    pub waves: Vec<String>,
}

/// Ended workers that ended before `cutoff_ms`, oldest ended first.
pub fn candidates(tx: &Tx, cutoff_ms: i64) -> super::sql::Result<Vec<Candidate>> {
    let rows: Vec<(WorkerRecord, bool)> = tx
        .prepare_cached(&format!(
            "SELECT {COLUMNS}, cleaned_ms IS NOT NULL FROM workers
             WHERE ended_ms IS NOT NULL AND ended_ms < ?1 ORDER BY ended_ms, id"
        ))?
        .query_map([cutoff_ms], |r| {
            Ok((row_to_worker(r)?, r.get(COLUMN_COUNT)?))
        })?
        .collect::<super::sql::Result<_>>()?;
    let mut out = Vec::with_capacity(rows.len());
    for (worker, cleaned) in rows {
        let holds_lock = super::holds_lock(tx, &worker.id)?;
        let waves = tx
            .prepare_cached("SELECT DISTINCT wave FROM wave_tasks WHERE worker_id = ?1")?
            .query_map([&worker.id], |r| r.get(0))?
            .collect::<super::sql::Result<_>>()?;
        out.push(Candidate {
            worker,
            cleaned,
            holds_lock,
            waves,
        });
    }
    Ok(out)
}

/// A wave and the workers its tasks name, when it finished or was cancelled before
/// `cutoff_ms` (`None`: still in progress, or ended after the cutoff).
pub fn wave_done_before(
    tx: &Tx,
    wave: &str,
    cutoff_ms: i64,
) -> super::sql::Result<Option<Vec<String>>> {
    let done: Option<i64> = tx
        .prepare_cached(
            "SELECT COALESCE(cancelled_ms, finished_ms) FROM waves WHERE name = ?1
               AND (finished_ms IS NOT NULL OR cancelled_ms IS NOT NULL)",
        )?
        .query_row([wave], |r| r.get(0))
        .or_else(|e| match e {
            super::sql::Error::NoRows => Ok(None),
            e => Err(e),
        })?;
    if done.is_none_or(|d| d >= cutoff_ms) {
        return Ok(None);
    }
    let workers = tx
        .prepare_cached(
            "SELECT worker_id FROM wave_tasks WHERE wave = ?1 AND worker_id IS NOT NULL",
        )?
        .query_map([wave], |r| r.get(0))?
        .collect::<super::sql::Result<_>>()?;
    Ok(Some(workers))
}

/// What one prune deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Deleted {
    pub workers: usize,
    pub rows: usize,
    pub alerts: usize,
    pub deliveries: usize,
}

/// Deletes worker `id` and every row that references it — its events, requests, pushes and
/// verdicts, spending, and its alerts whose delivery is over (settled, every row delivered),
/// with those delivery rows — unless it became live again or holds a lock (checked here, in the
/// deleting transaction). False when it was kept.
pub fn delete_worker(tx: &Tx, id: &str, out: &mut Deleted) -> super::sql::Result<bool> {
    let ok: bool = tx
        .prepare_cached(
            "SELECT ended_ms IS NOT NULL AND NOT EXISTS (SELECT 1 FROM locks WHERE holder = ?1)
             FROM workers WHERE id = ?1",
        )?
        .query_row([id], |r| r.get(0))
        .or_else(|e| match e {
            super::sql::Error::NoRows => Ok(false),
            e => Err(e),
        })?;
    if !ok {
        return Ok(false);
    }
    for table in ["worker_events", "requests", "pushes", "worker_usage"] {
        out.rows += tx
            .prepare_cached(&format!("DELETE FROM {table} WHERE worker_id = ?1"))?
            .execute([id])?;
    }
    let (alerts, deliveries) = delete_delivered_alerts(tx, "a.worker_id = ?1", params![id])?;
    out.alerts += alerts;
    out.deliveries += deliveries;
    out.workers += tx
        .prepare_cached("DELETE FROM workers WHERE id = ?1")?
        .execute([id])?;
    Ok(true)
}

/// Deletes the alerts `filter` selects (on `alerts a`) whose delivery is over — settled, and
/// every delivery row of it delivered — with their delivery rows. (alerts, deliveries).
fn delete_delivered_alerts(
    tx: &Tx,
    filter: &str,
    p: impl super::sql::Params + Clone,
) -> super::sql::Result<(usize, usize)> {
    let over = format!(
        "SELECT a.id FROM alerts a WHERE {filter} AND a.settled = 1 AND NOT EXISTS
           (SELECT 1 FROM alert_deliveries d WHERE d.alert_id = a.id AND d.state != 'delivered')"
    );
    let deliveries = tx
        .prepare_cached(&format!(
            "DELETE FROM alert_deliveries WHERE alert_id IN ({over})"
        ))?
        .execute(p.clone())?;
    // Its delivery rows are gone now: an alert left without any is one whose delivery was over.
    let alerts = tx
        .prepare_cached(&format!(
            "DELETE FROM alerts WHERE id IN (SELECT a.id FROM alerts a WHERE {filter} AND a.settled = 1
               AND NOT EXISTS (SELECT 1 FROM alert_deliveries d WHERE d.alert_id = a.id))"
        ))?
        .execute(p)?;
    Ok((alerts, deliveries))
}

/// Alerts of no worker (a repository's, the cascade's) last raised before `cutoff_ms` whose
/// delivery is over, with their delivery rows. (alerts, deliveries).
pub fn delete_old_repo_alerts(tx: &Tx, cutoff_ms: i64) -> super::sql::Result<(usize, usize)> {
    delete_delivered_alerts(
        tx,
        "a.worker_id IS NULL AND COALESCE(a.last_ms, a.at_ms) < ?1",
        params![cutoff_ms],
    )
}

/// Deletes a finished wave and its tasks (its workers are pruned beside it).
pub fn delete_wave(tx: &Tx, wave: &str) -> super::sql::Result<()> {
    tx.execute("DELETE FROM wave_tasks WHERE wave = ?1", [wave])?;
    tx.execute("DELETE FROM waves WHERE name = ?1", [wave])?;
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::contract::Contract;
    use crate::milestone::{LandState, Milestone, Progress};
    use crate::store::workers::{self as ws, Cursor, HistoryFilter};

    pub(crate) fn worker(id: &str, repo: &str, m: Milestone, at: i64) -> WorkerRecord {
        let c = Contract::embedded();
        let mut p = Progress::new(&c, at);
        p.enter(&c, m, at);
        WorkerRecord {
            id: id.into(),
            repo: repo.into(),
            task: "t".into(),
            task_id: None,
            component: None,
            plan: None,
            progress: p,
            branch: format!("orch/{id}"),
            base_sha: "b".repeat(40),
            worktree: format!("/nowhere/{id}/worktree"),
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
        }
    }

    fn ids(v: &[WorkerRecord]) -> Vec<&str> {
        v.iter().map(|w| w.id.as_str()).collect()
    }

    #[test]
    fn live_and_ended_workers_are_read_apart_and_ended_ones_paged_newest_first() {
        crate::store::conformance::each_backend(
            "live_and_ended_workers_are_read_apart_and_ended_ones_paged_newest_first",
            |s| {
                let mut landing = worker("landing", "core", Milestone::Done, 50);
                landing.progress.landing = Some(crate::milestone::Landing {
                    state: LandState::Verifying,
                    ..crate::milestone::Landing::planned(
                        &crate::config::LandConfig::default_for(crate::config::ForgeKind::Local),
                        Vec::new(),
                    )
                });
                s.write(|tx| {
                    for i in 0..5 {
                        ws::insert_worker(
                            tx,
                            &worker(&format!("d{i}"), "core", Milestone::Done, 10 + i),
                        )?;
                    }
                    ws::insert_worker(tx, &worker("f", "vm", Milestone::Failed, 20))?;
                    ws::insert_worker(tx, &worker("w", "core", Milestone::Working, 30))?;
                    ws::insert_worker(tx, &worker("b", "vm", Milestone::Blocked, 31))?;
                    ws::insert_worker(tx, &landing)
                })
                .unwrap();
                let live = s.live_workers().unwrap();
                // A DONE worker whose change is landing is live: its supervisor still works.
                assert_eq!(ids(&live), ["w", "b", "landing"]);
                let all = HistoryFilter::default();
                let (page1, n) = s
                    .read(|tx| {
                        Ok((
                            ws::ended_workers(tx, &all, None, Some(4))?,
                            ws::count_ended(tx, &all, None)?,
                        ))
                    })
                    .unwrap();
                assert_eq!(ids(&page1), ["f", "d4", "d3", "d2"]);
                assert_eq!(n, 6);
                let cursor = Cursor::parse(&Cursor::of(&page1[3]).unwrap().encode()).unwrap();
                let page2 = s
                    .read(|tx| ws::ended_workers(tx, &all, Some(&cursor), Some(4)))
                    .unwrap();
                assert_eq!(ids(&page2), ["d1", "d0"]);
                let vm = HistoryFilter {
                    repo: Some("vm".into()),
                    ..Default::default()
                };
                let (live_vm, ended_vm) = s
                    .read(|tx| {
                        Ok((
                            ws::live_workers_where(tx, &vm)?,
                            ws::ended_workers(tx, &vm, None, None)?,
                        ))
                    })
                    .unwrap();
                assert_eq!((ids(&live_vm), ids(&ended_vm)), (vec!["b"], vec!["f"]));
                let since = HistoryFilter {
                    ended_since_ms: Some(13),
                    ..Default::default()
                };
                let recent = s
                    .read(|tx| ws::ended_workers(tx, &since, None, None))
                    .unwrap();
                assert_eq!(ids(&recent), ["f", "d4", "d3"]);
                // Landed: it ends then, and a worker that comes back to life is live again.
                landing.progress.landing.as_mut().unwrap().state = LandState::Landed;
                s.write(|tx| ws::save_progress(tx, "landing", &landing.progress))
                    .unwrap();
                assert_eq!(ids(&s.live_workers().unwrap()), ["w", "b"]);
                landing.progress.landing.as_mut().unwrap().state = LandState::Reverting;
                s.write(|tx| ws::save_progress(tx, "landing", &landing.progress))
                    .unwrap();
                assert_eq!(ids(&s.live_workers().unwrap()), ["w", "b", "landing"]);
                assert!(Cursor::parse("nope").is_none() && Cursor::parse("12:").is_none());
            },
        );
    }

    #[test]
    fn a_pruned_worker_takes_its_rows_and_delivered_alerts_and_leaves_what_is_still_needed() {
        crate::store::conformance::each_backend(
            "a_pruned_worker_takes_its_rows_and_delivered_alerts_and_leaves_what_is_still_needed",
            |s| {
                s.write(|tx| {
            ws::insert_worker(tx, &worker("old", "core", Milestone::Done, 10))?;
            ws::insert_worker(tx, &worker("locked", "vm", Milestone::Failed, 10))?;
            ws::add_event(tx, "old", "spawned", Milestone::Working, "x")?;
            ws::record_push(tx, "old", &"a".repeat(40), 10)?;
            for (kind, state) in [("delivered", "delivered"), ("given_up", "given_up")] {
                let id = ws::add_alert(
                    tx,
                    &ws::AlertRecord {
                        id: 0,
                        at_ms: 10,
                        severity: "warning".into(),
                        worker_id: Some("old".into()),
                        repo: Some("core".into()),
                        kind: kind.into(),
                        message: "m".into(),
                        repeats: 1,
                        resolved_ms: None,
                    },
                )?;
                tx.execute(
                    "INSERT INTO alert_deliveries (alert_id, sink, state, next_ms) VALUES (?1, 's', ?2, 0)",
                    params![id, state],
                )?;
                tx.execute("UPDATE alerts SET settled = 1 WHERE id = ?1", [id])?;
            }
            Ok(())
        })
        .unwrap();
                let g = crate::graph::RepoGraph::new([("vm".to_string(), vec![])]);
                s.try_lock(
                    &g,
                    "vm",
                    "locked",
                    crate::lock::HolderKind::Worker,
                    None,
                    None,
                )
                .unwrap();
                let cands = s.read(|tx| candidates(tx, 100)).unwrap();
                assert_eq!(cands.len(), 2);
                assert!(
                    cands
                        .iter()
                        .any(|c| c.worker.id == "locked" && c.holds_lock)
                );
                let mut d = Deleted::default();
                let (old, locked) = s
                    .write(|tx| {
                        Ok((
                            delete_worker(tx, "old", &mut d)?,
                            delete_worker(tx, "locked", &mut d)?,
                        ))
                    })
                    .unwrap();
                assert!(old && !locked, "a worker holding a lock is never pruned");
                assert_eq!((d.workers, d.alerts, d.deliveries), (1, 1, 1));
                let left: (i64, i64, i64, i64) = s
                    .read(|tx| {
                        tx.query_row(
                    "SELECT (SELECT COUNT(*) FROM worker_events), (SELECT COUNT(*) FROM pushes),
                            (SELECT COUNT(*) FROM alerts), (SELECT COUNT(*) FROM alert_deliveries)",
                    [],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
                )
                    })
                    .unwrap();
                // The alert whose delivery was given up stays, with its row: not delivered.
                assert_eq!(left, (0, 0, 1, 1));
                assert_eq!(ids(&s.workers().unwrap()), ["locked"]);
            },
        );
    }
}
