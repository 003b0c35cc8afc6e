//! The property: whatever the order of starts (a wave's tick), stops (BLOCKED, FAILED, DONE,
//! cancel), forced releases, wave retries, respawns, approvals and reassignments, no worker
//! is live without holding its chain lock, no superseded attempt is live, no two locks ever
//! overlapped in a chain, and a refused claim changed nothing. Each operation runs the very
//! transaction orch runs (`spawn::record_in`, `relive::claim_respawn`, `claim_approve`,
//! `reassign::refusal_in`, `wave::retry_in`, `release_in`) on a real store.

use super::*;
use crate::contract::Contract;
use crate::milestone::{Event, LandState, Landing, Milestone, step};
use crate::sha::Sha;
use crate::store::sql::Tx;
use crate::store::workers::{self as ws, WorkerRecord};
use crate::store::{Store, active_locks, now_ms, waves as wv};
use proptest::prelude::*;

const TASKS: [(&str, &str); 3] = [("t-core", "core"), ("t-vm", "vm"), ("t-sdk", "sdk")];

#[derive(Debug, Clone)]
enum Op {
    /// A wave tick starts task k's current attempt (when nothing runs it).
    Start(usize),
    /// Worker i, at work, reports BLOCKED with a green change held for approval.
    Block(usize),
    /// Worker i, at work, ends FAILED (lock kept).
    Fail(usize),
    /// Worker i, at work or landing, is DONE and landed (lock released).
    Done(usize),
    /// `orch cancel` of worker i nobody supervises.
    Cancel(usize),
    /// `orch release --force` of worker i nobody supervises.
    Release(usize),
    /// `orch wave retry` of task k.
    Retry(usize),
    Respawn(usize),
    Approve(usize),
    /// `orch respawn` of a FAILED worker: its task reassigned.
    Reassign(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..3usize).prop_map(Op::Start),
        (0..4usize).prop_map(Op::Block),
        (0..4usize).prop_map(Op::Fail),
        (0..4usize).prop_map(Op::Done),
        (0..4usize).prop_map(Op::Cancel),
        (0..4usize).prop_map(Op::Release),
        (0..3usize).prop_map(Op::Retry),
        (0..4usize).prop_map(Op::Respawn),
        (0..4usize).prop_map(Op::Approve),
        (0..4usize).prop_map(Op::Reassign),
    ]
}

struct World {
    _dir: tempfile::TempDir,
    store: Store,
    config: Config,
    contract: Contract,
    workers: Vec<String>,
    me: i64,
    my_start: Option<i64>,
    n: usize,
}

fn sha() -> Sha {
    Sha::new("a".repeat(40))
}

impl World {
    fn new() -> World {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path()).unwrap();
        let config = Config::from_str(
            "repos:\n  core: {}\n  vm: {deps: [core]}\n  sdk: {}\nworker:\n  max_parallel: 2\n",
            std::path::Path::new("/tmp/repos.yaml"),
        )
        .unwrap();
        store
            .write(|tx| {
                wv::record_wave(tx, "w", "w.yaml", now_ms())?;
                for (seq, (task, _)) in TASKS.iter().enumerate() {
                    wv::put_task(tx, "w", task, seq as i64, "{}", None)?;
                }
                Ok(())
            })
            .unwrap();
        let me = crate::pidns::host_pid() as i64;
        World {
            _dir: dir,
            store,
            config,
            contract: Contract::embedded(),
            workers: Vec::new(),
            me,
            my_start: crate::process::proc_stat(me as i32).map(|s| s.start_ticks as i64),
            n: 0,
        }
    }

    fn worker(&mut self, i: usize) -> Option<WorkerRecord> {
        let id = self.workers.get(i % self.workers.len().max(1))?.clone();
        self.store.read(|tx| ws::get_worker(tx, &id)).unwrap()
    }

    /// A new worker record for `repo` and `task_id`, leased by this process (as a spawner's).
    fn record(&mut self, repo: &str, task_id: &str) -> WorkerRecord {
        self.n += 1;
        let at = now_ms() + self.n as i64; // created in order
        let mut w = crate::store::history::tests::worker(
            &format!("{repo}-{}", self.n),
            repo,
            Milestone::Working,
            at,
        );
        w.task_id = Some(task_id.into());
        w.progress.landing = Some(Landing::planned(
            &self.config.repo(repo).unwrap().land,
            Vec::new(),
        ));
        w.supervisor_pid = Some(self.me);
        w.supervisor_start = self.my_start;
        w.node = Some(crate::node::name().to_string());
        w
    }

    fn start(&mut self, req: &crate::app::spawn::SpawnRequest, w: WorkerRecord) -> Option<String> {
        let config = &self.config;
        let out = self
            .store
            .write(|tx| crate::app::spawn::record_in(tx, config, req, &w))
            .unwrap();
        match out {
            crate::app::spawn::Spawned::Ready(rec) => {
                self.workers.push(rec.id.clone());
                Some(rec.id)
            }
            _ => None,
        }
    }

    /// Moves worker `w` to `p` and, when it stops, its supervisor away (its lease given up).
    fn settle(&mut self, w: &WorkerRecord, p: &crate::milestone::Progress, lease: bool) {
        let me = self.me;
        self.store
            .write(|tx| {
                ws::save_progress(tx, &w.id, p)?;
                if !lease {
                    ws::set_lease(tx, &w.id, me, None)?;
                }
                Ok(())
            })
            .unwrap();
    }

    /// A claim transaction that refused must have changed nothing: locks and lease alike.
    fn claim<T>(
        &mut self,
        id: &str,
        f: impl FnOnce(&Tx) -> crate::store::sql::Result<std::result::Result<T, Error>>,
    ) -> Option<T> {
        let (out, before, after) = self
            .store
            .write(|tx| {
                let before = (
                    active_locks(tx)?,
                    ws::get_worker(tx, id)?.map(|w| w.lease()),
                );
                let out = f(tx)?;
                let after = (
                    active_locks(tx)?,
                    ws::get_worker(tx, id)?.map(|w| w.lease()),
                );
                Ok((out, before, after))
            })
            .unwrap();
        match out {
            Ok(t) => Some(t),
            Err(e) => {
                assert_eq!(before, after, "a refused claim changed something: {e}");
                None
            }
        }
    }

    fn apply(&mut self, op: &Op) {
        let now = now_ms();
        match *op {
            Op::Start(k) => {
                let (task, repo) = TASKS[k];
                let row = self
                    .store
                    .read(|tx| wv::wave_tasks(tx, "w"))
                    .unwrap()
                    .into_iter()
                    .find(|r| r.id == task)
                    .unwrap();
                if row.worker_id.is_some() {
                    return;
                }
                let key = crate::app::wave::attempt_key("w", task, row.attempt);
                let req = crate::app::spawn::SpawnRequest {
                    repo: repo.into(),
                    task: "t".into(),
                    task_id: Some(key.clone()),
                    ..Default::default()
                };
                let w = self.record(repo, &key);
                if let Some(id) = self.start(&req, w) {
                    self.store
                        .write(|tx| wv::set_task_worker(tx, "w", task, &id, now))
                        .unwrap();
                }
            }
            Op::Block(i) | Op::Fail(i) => {
                let Some(w) = self.worker(i) else { return };
                if !(w.supervised(now) && w.milestone().at_work()) {
                    return;
                }
                let mut p = w.progress.clone();
                if matches!(op, Op::Block(_)) {
                    p.enter(&self.contract, Milestone::Blocked, now);
                    p.tracked_sha = Some(sha());
                    p.held = Some(sha());
                    p.verdict = Some(crate::ci::verdict::VerdictKind::Green);
                    p.protected = vec![".forgejo/workflows/x.yml".into()];
                } else {
                    p.enter(&self.contract, Milestone::Failed, now);
                }
                self.settle(&w, &p, false);
            }
            Op::Done(i) => {
                let Some(w) = self.worker(i) else { return };
                if !(w.supervised(now) && (w.milestone().at_work() || w.progress.landing_active()))
                {
                    return;
                }
                let mut p = w.progress.clone();
                p.enter(&self.contract, Milestone::Done, now);
                if let Some(l) = p.landing.as_mut() {
                    l.state = LandState::Landed;
                }
                self.store
                    .write(|tx| crate::store::release_in(tx, &w.id, Some("landed"), None))
                    .unwrap();
                self.settle(&w, &p, false);
            }
            Op::Cancel(i) => {
                let Some(w) = self.worker(i) else { return };
                if w.supervised(now) || w.milestone().is_terminal() {
                    return;
                }
                let mut p = w.progress.clone();
                p.enter(&self.contract, Milestone::Cancelled, now);
                self.store
                    .write(|tx| crate::store::release_in(tx, &w.id, Some("cancelled"), None))
                    .unwrap();
                self.settle(&w, &p, false);
            }
            Op::Release(i) => {
                let Some(w) = self.worker(i) else { return };
                if w.supervised(now) {
                    return; // a live worker's supervisor stops at its next look (not this layer)
                }
                self.store
                    .write(|tx| crate::store::release_in(tx, &w.id, Some("forced"), Some("ops")))
                    .unwrap();
            }
            Op::Retry(k) => {
                let (task, _) = TASKS[k];
                let Some(id) = self
                    .store
                    .read(|tx| wv::wave_tasks(tx, "w"))
                    .unwrap()
                    .into_iter()
                    .find(|r| r.id == task)
                    .and_then(|r| r.worker_id)
                else {
                    return;
                };
                let w = self
                    .store
                    .read(|tx| ws::get_worker(tx, &id))
                    .unwrap()
                    .unwrap();
                let stopped = matches!(
                    w.milestone(),
                    Milestone::Failed | Milestone::Blocked | Milestone::Cancelled
                );
                if !stopped || w.supervised(now) {
                    return;
                }
                self.store
                    .write(|tx| crate::app::wave::retry_in(tx, "w", task, &w, "ops"))
                    .unwrap();
            }
            Op::Respawn(i) => {
                let Some(w) = self.worker(i) else { return };
                let (config, me, start) = (&self.config, self.me, self.my_start);
                let config = config.clone();
                if let Some((w, _chain)) = self.claim(&w.id, |tx| {
                    claim_respawn(tx, &config, &w.id, me, start, "ops")
                }) {
                    let ev = Event::Respawn {
                        by: "ops".into(),
                        note: String::new(),
                    };
                    let (after, _) = step(&self.contract, &w.id, &w.progress, &ev, now);
                    self.settle(&w, &after, true);
                }
            }
            Op::Approve(i) => {
                let Some(w) = self.worker(i) else { return };
                let config = self.config.clone();
                let contract = self.contract.clone();
                let (me, start) = (self.me, self.my_start);
                let ev = Event::Approve {
                    sha: sha(),
                    by: "ops".into(),
                };
                if let Some((w, after, effects, chain)) = self.claim(&w.id, |tx| {
                    claim_approve(tx, &config, &contract, &w.id, &ev, me, start, "ops")
                }) {
                    let violated = effects
                        .iter()
                        .any(|e| matches!(e, crate::milestone::Effect::Violation { .. }));
                    if violated {
                        // As `operator::approve`: the claim given back, nothing started.
                        self.store
                            .write(|tx| {
                                ws::set_lease(tx, &w.id, me, None)?;
                                match chain {
                                    Some(c) => give_back(tx, &w.id, c, "approval refused"),
                                    None => Ok(()),
                                }
                            })
                            .unwrap();
                    } else {
                        let landing = after.landing_active();
                        self.settle(&w, &after, landing);
                    }
                }
            }
            Op::Reassign(i) => {
                let Some(old) = self.worker(i) else { return };
                if old.supervised(now) {
                    return;
                }
                let refused = self
                    .store
                    .read(|tx| crate::app::reassign::refusal_in(tx, &old))
                    .unwrap();
                if refused.is_some() {
                    return;
                }
                let held = self
                    .store
                    .read(|tx| crate::store::holds_lock(tx, &old.id))
                    .unwrap();
                let mut req = crate::app::reassign::request(&old, String::new());
                if held {
                    req.take_over = Some(old.id.clone());
                }
                let w = self.record(&old.repo, old.task_id.as_deref().unwrap());
                if let Some(id) = self.start(&req, w) {
                    self.store
                        .write(|tx| {
                            wv::relink_task_worker(tx, &old.id, &id, now)?;
                            ws::add_event(
                                tx,
                                &old.id,
                                "reassigned",
                                old.milestone(),
                                &format!("{}{id} by ops", crate::store::supersede::REASSIGNED_TO),
                            )
                        })
                        .unwrap();
                }
            }
        }
    }

    /// The invariant, after every operation.
    fn check(&mut self, after: &Op) -> std::result::Result<(), TestCaseError> {
        let now = now_ms();
        let graph = self.config.graph.clone();
        let (workers, held, live_superseded) = self
            .store
            .read(|tx| {
                let mut workers = Vec::new();
                let mut held = Vec::new();
                let mut superseded = Vec::new();
                for id in &self.workers {
                    let w = ws::get_worker(tx, id)?.unwrap();
                    held.push(crate::store::holds_lock(tx, id)?);
                    superseded.push(crate::store::supersede::of(tx, &w)?);
                    workers.push(w);
                }
                Ok((workers, held, superseded))
            })
            .unwrap();
        let mut live_tasks = std::collections::HashSet::new();
        for ((w, held), sup) in workers.iter().zip(&held).zip(&live_superseded) {
            let live =
                w.supervised(now) && (w.milestone().at_work() || w.progress.landing_active());
            if !live {
                continue;
            }
            prop_assert!(
                *held,
                "after {after:?}: {} is live ({}) without its chain lock",
                w.id,
                w.milestone()
            );
            prop_assert!(
                sup.is_none(),
                "after {after:?}: {} is live though superseded {:?}",
                w.id,
                sup
            );
            let key = w
                .task_id
                .as_deref()
                .and_then(crate::store::supersede::parse_wave_key)
                .map(|(a, b, _)| format!("{a}:{b}"));
            prop_assert!(
                live_tasks.insert(key.clone()),
                "after {after:?}: two live workers on task {key:?}"
            );
        }
        let history = self.store.lock_history().unwrap();
        prop_assert!(
            crate::store::first_conflict(&graph, &history).is_none(),
            "after {after:?}: {:?}",
            crate::store::first_conflict(&graph, &history)
        );
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn no_worker_is_live_without_its_chain_lock(ops in proptest::collection::vec(op(), 1..40)) {
        let mut world = World::new();
        for op in &ops {
            world.apply(op);
            world.check(op)?;
        }
    }
}

/// The issue's sequences, always run: a BLOCKED attempt superseded by a wave retry (its next
/// attempt not started yet, then DONE), one whose lock was released by hand, and a FAILED
/// superseded attempt: each respawn, approval or reassignment refused, the invariant held.
#[test]
fn the_issue_sequences_are_refused() {
    use Op::*;
    for ops in [
        vec![Start(0), Block(0), Retry(0), Respawn(0), Approve(0)],
        vec![
            Start(0),
            Block(0),
            Retry(0),
            Start(0),
            Done(1),
            Respawn(0),
            Approve(0),
        ],
        vec![Start(0), Fail(0), Retry(0), Start(0), Done(1), Reassign(0)],
        vec![
            Start(0),
            Block(0),
            Release(0),
            Start(1),
            Block(1),
            Respawn(0),
        ],
    ] {
        let mut world = World::new();
        for op in &ops {
            world.apply(op);
            world.check(op).unwrap_or_else(|e| panic!("{ops:?}: {e}"));
        }
        let first = world.workers[0].clone();
        let w = world
            .store
            .read(|tx| ws::get_worker(tx, &first))
            .unwrap()
            .unwrap();
        assert!(!w.supervised(now_ms()), "{ops:?}: {first} was made live");
        assert_eq!(
            world.workers.len(),
            ops.iter().filter(|o| matches!(o, Start(_))).count()
        );
    }
}
