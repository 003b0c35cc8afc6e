//! Which later attempt replaced a worker, if one did. An attempt another one superseded — its
//! task reassigned, its wave task retried or run by another worker now, or done by a later
//! worker of the same task — is never made live again: `orch respawn` and `orch approve`
//! refuse it naming the attempt that replaced it (`app::relive`), and the views offer neither.
//! `facts` reads what decides it in one transaction; `judge` decides (pure).

use super::sql::{OptionalExtension, Tx, params};
use super::workers::{COLUMNS, WorkerRecord, row_to_worker};
use crate::milestone::{LandState, Milestone};

/// What replaced a worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Superseded {
    /// Its task was reassigned to worker `to` (its `reassigned` event).
    Reassigned { to: String },
    /// `orch wave retry` gave its wave task attempt `attempt`; `worker`: that attempt's worker
    /// and where it stands, once a tick started it.
    Retried {
        wave: String,
        task: String,
        attempt: i64,
        worker: Option<(String, Milestone)>,
    },
    /// Its wave task (this very attempt) is run by another worker now: a replacement linked
    /// to it.
    Relinked {
        wave: String,
        task: String,
        worker: String,
        milestone: Milestone,
    },
    /// A later worker of the same task (same repository and task id) is DONE with it.
    Done { by: String },
}

impl Superseded {
    /// The worker that replaced it, when one was started.
    pub fn by_worker(&self) -> Option<&str> {
        match self {
            Superseded::Reassigned { to } => Some(to),
            Superseded::Retried { worker, .. } => worker.as_ref().map(|(w, _)| w.as_str()),
            Superseded::Relinked { worker, .. } => Some(worker),
            Superseded::Done { by } => Some(by),
        }
    }

    /// In words, after "superseded": what replaced it.
    pub fn describe(&self) -> String {
        match self {
            Superseded::Reassigned { to } => format!("by worker {to} (its task was reassigned)"),
            Superseded::Retried {
                wave,
                task,
                attempt,
                worker: Some((w, m)),
            } => format!("by worker {w} (attempt {attempt} of wave {wave}'s task {task}, {m})"),
            Superseded::Retried {
                wave,
                task,
                attempt,
                worker: None,
            } => format!(
                "by attempt {attempt} of wave {wave}'s task {task} (`orch wave retry`; the wave's next tick starts it)"
            ),
            Superseded::Relinked {
                wave,
                task,
                worker,
                milestone,
            } => format!("by worker {worker} (wave {wave}'s task {task} is its now, {milestone})"),
            Superseded::Done { by } => format!("by worker {by} (its task is DONE there)"),
        }
    }
}

/// The wave task a worker's task id names, and that task's row now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaveFacts {
    pub wave: String,
    pub task: String,
    /// The attempt this worker is (`<wave>:<task>#<n>`; 1 without `#`).
    pub mine: i64,
    /// The task's attempt now.
    pub attempt: i64,
    /// The worker the task is linked to now, and its milestone.
    pub worker: Option<(String, Milestone)>,
}

/// Another worker of the same repository and task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Other {
    pub id: String,
    pub created_ms: i64,
    pub milestone: Milestone,
    pub landing: Option<LandState>,
}

/// What decides whether worker `id` was superseded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    pub id: String,
    pub created_ms: i64,
    /// The worker its task was reassigned to (its last `reassigned` event).
    pub reassigned_to: Option<String>,
    pub wave: Option<WaveFacts>,
    pub others: Vec<Other>,
}

/// Decides (pure). In order: a reassignment, a later attempt of its wave task, another worker
/// its wave task is linked to, a later worker of its task that is DONE (a change given up —
/// conflict, refused, reverted — is not the task done).
pub fn judge(f: &Facts) -> Option<Superseded> {
    if let Some(to) = &f.reassigned_to {
        return Some(Superseded::Reassigned { to: to.clone() });
    }
    if let Some(w) = &f.wave {
        if w.attempt > w.mine {
            return Some(Superseded::Retried {
                wave: w.wave.clone(),
                task: w.task.clone(),
                attempt: w.attempt,
                worker: w.worker.clone(),
            });
        }
        if let Some((other, m)) = &w.worker
            && *other != f.id
        {
            return Some(Superseded::Relinked {
                wave: w.wave.clone(),
                task: w.task.clone(),
                worker: other.clone(),
                milestone: *m,
            });
        }
    }
    f.others
        .iter()
        .filter(|o| o.id != f.id && (o.created_ms, o.id.as_str()) > (f.created_ms, f.id.as_str()))
        .find(|o| {
            o.milestone == Milestone::Done
                && !matches!(
                    o.landing,
                    Some(LandState::Conflict | LandState::Refused | LandState::Reverted)
                )
        })
        .map(|o| Superseded::Done { by: o.id.clone() })
}

/// `<wave>:<task>[#<n>]` (`app::wave::attempt_key`; wave names and task ids have neither `:`
/// nor `#`): (wave, task, attempt).
pub fn parse_wave_key(task_id: &str) -> Option<(&str, &str, i64)> {
    let (wave, rest) = task_id.split_once(':')?;
    let (task, attempt) = match rest.split_once('#') {
        Some((task, n)) => (task, n.parse().ok()?),
        None => (rest, 1),
    };
    let plain = |s: &str| !s.is_empty() && !s.contains([':', '#']);
    (plain(wave) && plain(task)).then_some((wave, task, attempt))
}

/// The first words of a `reassigned` event's detail; the new worker's id follows.
pub const REASSIGNED_TO: &str = "task reassigned to worker ";

/// The worker a `reassigned` event's detail names.
pub fn reassigned_worker(detail: &str) -> Option<&str> {
    detail
        .strip_prefix(REASSIGNED_TO)?
        .split_whitespace()
        .next()
}

/// The branches of the earlier attempts of `w`'s task, which it may build on: the workers
/// whose task was reassigned to it, and those of the same repository and task id (a wave's
/// earlier attempts).
pub fn earlier_branches(tx: &Tx, w: &WorkerRecord) -> super::sql::Result<Vec<String>> {
    let mut out = Vec::new();
    let reassigned: Vec<(String, String)> = tx
        .prepare_cached(
            "SELECT e.detail, o.branch FROM worker_events e JOIN workers o ON o.id = e.worker_id
             WHERE e.kind = 'reassigned' AND o.repo = ?1",
        )?
        .query_map([w.repo.as_str()], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    out.extend(
        reassigned
            .into_iter()
            .filter(|(detail, _)| reassigned_worker(detail) == Some(w.id.as_str()))
            .map(|(_, branch)| branch),
    );
    if let Some(task) = w.task_id.as_deref().filter(|k| !k.is_empty()) {
        let same: Vec<String> = tx
            .prepare_cached(
                "SELECT branch FROM workers WHERE repo = ?1 AND task_id = ?2 AND id <> ?3",
            )?
            .query_map(params![w.repo, task, w.id], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        out.extend(same);
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// Reads what decides whether `w` was superseded.
pub fn facts(tx: &Tx, w: &WorkerRecord) -> super::sql::Result<Facts> {
    let reassigned: Option<String> = tx
        .prepare_cached(
            "SELECT detail FROM worker_events WHERE worker_id = ?1 AND kind = 'reassigned'
             ORDER BY seq DESC LIMIT 1",
        )?
        .query_row([w.id.as_str()], |r| r.get(0))
        .optional()?;
    let reassigned_to = reassigned
        .as_deref()
        .and_then(reassigned_worker)
        .map(str::to_string);
    let key = w.task_id.as_deref().filter(|k| !k.is_empty());
    let parsed = key.and_then(parse_wave_key);
    let mut wave = None;
    if let Some((name, task, mine)) = parsed {
        let row: Option<(i64, Option<String>)> = tx
            .prepare_cached(
                "SELECT attempt, worker_id FROM wave_tasks WHERE wave = ?1 AND id = ?2",
            )?
            .query_row(params![name, task], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?;
        if let Some((attempt, linked)) = row {
            let worker = match linked {
                Some(id) if id == w.id => Some((id, w.milestone())),
                Some(id) => super::workers::get_worker(tx, &id)?.map(|o| (id, o.milestone())),
                None => None,
            };
            wave = Some(WaveFacts {
                wave: name.to_string(),
                task: task.to_string(),
                mine,
                attempt,
                worker,
            });
        }
    }
    let mut others = Vec::new();
    if let Some(key) = key {
        // The task as the wave names it (every attempt), else the task id itself.
        let base = match parsed {
            Some((name, task, _)) => format!("{name}:{task}"),
            None => key.to_string(),
        };
        let same = |t: &str| match parsed {
            Some(_) => parse_wave_key(t).is_some_and(|(n, k, _)| format!("{n}:{k}") == base),
            None => t == base,
        };
        // The task id itself, or `<base>#<n>` (`#` then `$` in byte order): both on the
        // `workers_task_id` index; the ids are compared again here.
        let mut stmt = tx.prepare_cached(&format!(
            "SELECT {COLUMNS} FROM workers WHERE repo = ?1 AND id <> ?2
               AND (task_id = ?3 OR (task_id >= ?4 AND task_id < ?5))"
        ))?;
        for o in stmt.query_map(
            params![w.repo, w.id, base, format!("{base}#"), format!("{base}$")],
            row_to_worker,
        )? {
            let o = o?;
            if o.task_id.as_deref().is_some_and(same) {
                others.push(Other {
                    id: o.id.clone(),
                    created_ms: o.created_ms,
                    milestone: o.milestone(),
                    landing: o.progress.landing.as_ref().map(|l| l.state),
                });
            }
        }
    }
    Ok(Facts {
        id: w.id.clone(),
        created_ms: w.created_ms,
        reassigned_to,
        wave,
        others,
    })
}

/// Whether (and by what) `w` was superseded.
pub fn of(tx: &Tx, w: &WorkerRecord) -> super::sql::Result<Option<Superseded>> {
    Ok(judge(&facts(tx, w)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(id: &str) -> Facts {
        Facts {
            id: id.into(),
            created_ms: 10,
            reassigned_to: None,
            wave: None,
            others: Vec::new(),
        }
    }

    #[test]
    fn what_superseded_a_worker_is_read_from_the_store() {
        use crate::store::history::tests::worker;
        use crate::store::{waves as wv, workers as ws};
        crate::store::conformance::each_backend(
            "what_superseded_a_worker_is_read_from_the_store",
            |store| {
                let with = |id: &str, repo: &str, task: &str, m: Milestone, at: i64| {
                    let mut w = worker(id, repo, m, at);
                    w.task_id = Some(task.into());
                    if m == Milestone::Done {
                        w.progress.landing = Some(crate::milestone::Landing {
                            state: LandState::Landed,
                            ..crate::milestone::Landing::planned(
                                &crate::config::LandConfig::default_for(
                                    crate::config::ForgeKind::Local,
                                ),
                                Vec::new(),
                            )
                        });
                    }
                    w
                };
                let a1 = with("a1", "core", "w:t", Milestone::Blocked, 10);
                let a2 = with("a2", "core", "w:t#2", Milestone::Done, 20);
                let h1 = with("h1", "sdk", "T_7", Milestone::Blocked, 30);
                let h2 = with("h2", "sdk", "T_7", Milestone::Done, 40);
                let other = with("o1", "vm", "T_7", Milestone::Done, 50);
                let r1 = with("r1", "vm", "R-1", Milestone::Failed, 60);
                let judged = store
                    .write(|tx| {
                        for w in [&a1, &h1, &h2, &other, &r1] {
                            ws::insert_worker(tx, w)?;
                        }
                        wv::record_wave(tx, "w", "w.yaml", 1)?;
                        wv::put_task(tx, "w", "t", 0, "{}", None)?;
                        wv::set_task_worker(tx, "w", "t", "a1", 10)?;
                        let before = of(tx, &a1)?;
                        wv::retry_task(tx, "w", "t")?;
                        ws::insert_worker(tx, &a2)?;
                        wv::set_task_worker(tx, "w", "t", "a2", 20)?;
                        ws::add_event(
                            tx,
                            "r1",
                            "reassigned",
                            Milestone::Failed,
                            &format!("{REASSIGNED_TO}r2 by ops"),
                        )?;
                        Ok((
                            before,
                            of(tx, &a1)?,
                            of(tx, &a2)?,
                            of(tx, &h1)?,
                            of(tx, &h2)?,
                            of(tx, &r1)?,
                        ))
                    })
                    .unwrap();
                assert_eq!(judged.0, None, "the task's own attempt");
                assert_eq!(
                    judged.1,
                    Some(Superseded::Retried {
                        wave: "w".into(),
                        task: "t".into(),
                        attempt: 2,
                        worker: Some(("a2".into(), Milestone::Done)),
                    })
                );
                assert_eq!(judged.2, None);
                // The same task id on another repository is another task.
                assert_eq!(judged.3, Some(Superseded::Done { by: "h2".into() }));
                assert_eq!(judged.4, None);
                assert_eq!(judged.5, Some(Superseded::Reassigned { to: "r2".into() }));
            },
        );
    }

    #[test]
    fn wave_keys_parse_with_their_attempt() {
        assert_eq!(parse_wave_key("w1:t1"), Some(("w1", "t1", 1)));
        assert_eq!(parse_wave_key("w1:t1#3"), Some(("w1", "t1", 3)));
        assert_eq!(parse_wave_key("PROJ-12"), None);
        assert_eq!(parse_wave_key("w:t#x"), None);
        assert_eq!(parse_wave_key(":t"), None);
    }

    #[test]
    fn a_reassigned_event_names_its_worker() {
        let d = format!("{REASSIGNED_TO}alpha-2 by ops");
        assert_eq!(reassigned_worker(&d), Some("alpha-2"));
        assert_eq!(reassigned_worker("something else"), None);
    }

    #[test]
    fn a_later_attempt_supersedes_and_the_current_one_does_not() {
        let mut f = facts("a1");
        f.wave = Some(WaveFacts {
            wave: "w".into(),
            task: "t".into(),
            mine: 1,
            attempt: 2,
            worker: Some(("a2".into(), Milestone::Done)),
        });
        let s = judge(&f).expect("superseded");
        assert_eq!(s.by_worker(), Some("a2"));
        assert!(s.describe().contains("attempt 2 of wave w's task t, DONE"));
        // The task's current attempt, linked to itself.
        f.wave = Some(WaveFacts {
            wave: "w".into(),
            task: "t".into(),
            mine: 2,
            attempt: 2,
            worker: Some(("a1".into(), Milestone::Blocked)),
        });
        assert_eq!(judge(&f), None);
    }

    #[test]
    fn only_a_later_done_worker_of_the_task_supersedes() {
        let other = |id: &str, at: i64, m: Milestone, l: Option<LandState>| Other {
            id: id.into(),
            created_ms: at,
            milestone: m,
            landing: l,
        };
        let mut f = facts("a1");
        // An earlier DONE one (a follow-up spawned after it), a later one not DONE, a later
        // DONE whose change did not land: none.
        f.others = vec![
            other("a0", 5, Milestone::Done, Some(LandState::Landed)),
            other("a2", 20, Milestone::Blocked, None),
            other("a3", 30, Milestone::Done, Some(LandState::Conflict)),
        ];
        assert_eq!(judge(&f), None);
        f.others
            .push(other("a4", 40, Milestone::Done, Some(LandState::Landed)));
        assert_eq!(judge(&f), Some(Superseded::Done { by: "a4".into() }));
    }
}
