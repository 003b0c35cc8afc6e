//! The supervisor: one `orch` process per worker that owns the worker's process group, turns
//! every [`Input`] into state-machine events, commits each transition through the journal, and
//! carries out what only the owner of the worker can: stopping or suspending its group and
//! following CI for the tracked SHA. It holds a lease in SQLite so that `orch resume` can tell
//! when it is gone.
//!
//! Files: `worker.rs` (launch, environment, output pumps, stopping), `ci.rs` (the CI thread:
//! CI and the branch head, query numbering, forge back-off), `branch.rs` (the worker's branch
//! on the forge: heads seen, DONE judged frozen), `done.rs` (the DONE-freshness rule),
//! `claims.rs` (push verification), `agent/` (one adapter per agent) and `agent_run.rs` (what
//! the supervisor does with an agent's reports and spending), `cascade.rs`, `lease.rs`,
//! `input.rs` (the one input type and the claim outcome).
//!
//! Threads: the main thread owns the worker (so its parent-death signal stays armed) and runs
//! the loop; two reader threads pump the worker's output; one thread asks the forge; the
//! cascade and alert-delivery threads.

mod act;
pub mod agent;
mod agent_run;
mod bell;
mod branch;
mod cascade;
mod ci;
mod claims;
mod clone;
mod done;
mod downstream;
pub mod input;
mod land;
mod lease;
mod own_rows;
mod parts;
mod restart;
mod storage;
mod worker;

pub use input::{Input, Outcome};
pub use lease::{LEASE_FROM_ENV, LEASE_MS, RENEW_EVERY_MS};
pub use worker::{MAX_LINE, MAX_LOG_BYTES};

use super::journal::{self, Fact};
use crate::config::Config;
use crate::contract::Contract;
use crate::forge::Forge;
use crate::forge::follow::CiFollower;
use crate::milestone::{Channel, Event, LineSignal, Milestone, sha_in};
use crate::sha::Sha;
use crate::store::workers::{self as ws, Request, RequestKind, VerdictRow, WorkerRecord};
use crate::store::{Store, StoreError, now_ms};
use agent::spend::Spend;
use bell::Bell;
use ci::{CiAnswer, CiLink, ForgeBackoff};
use claims::{ForgeHead, truncate, verify_push};
use done::DoneClaims;
use lease::LeaseKeeper;
use parts::{AgentRun, Books, BranchWatch, CiWatch, Holds, Io, LandClock, LeaseWatch};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use worker::{Stop, WorkerProcess, reap_orphans, zombie_child};

/// Paths and inputs a supervisor needs; also what it passes on to workers.
pub struct Env<'a> {
    pub config: &'a Config,
    pub contract: &'a Contract,
    pub state_dir: &'a Path,
    pub config_path: &'a Path,
    pub contract_path: &'a Path,
    /// The orch binary workers call for `orch report` / `orch ci status`.
    pub orch_exe: &'a Path,
}

#[derive(Debug, thiserror::Error)]
pub enum SuperviseError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("no worker {0}")]
    UnknownWorker(String),
    #[error("worker {id} is already supervised by pid {pid}")]
    AlreadySupervised { id: String, pid: i64 },
    #[error("cannot start worker {id} ({argv}): {source}")]
    Start {
        id: String,
        argv: String,
        source: std::io::Error,
    },
    /// The state cannot be written (see `storage.rs`): why, in words naming the file.
    #[error("{0}")]
    Storage(String),
}

/// The handoff file's name in a session directory (and a workspace: `account::worker_handoff`).
pub const HANDOFF_FILE: &str = "handoff.md";

pub use crate::checkpoint::session_dir;

/// How often the inbox is read without a ring of the doorbell (a ring lost, an older orch
/// that queued the request without ringing): requests are normally read when rung.
const INBOX_EVERY_MS: i64 = 5_000;
/// How often time passes for the state machine.
const TICK_EVERY_MS: i64 = 1_000;
/// A CI poll reads the branch head at least this often even when nothing suggests a push (one
/// made from another clone): the other polls cost the CI requests alone.
const HEAD_READ_AT_LEAST_EVERY_MS: i64 = 300_000;
/// How often the worktree is looked at for new commits.
const HEAD_CHECK_EVERY_MS: i64 = 5_000;
/// How long a worker that printed DONE may take to exit by itself before it is frozen for
/// the judgement (a worker blocked in `orch report DONE` waits for its answer instead).
const DONE_EXIT_GRACE: Duration = Duration::from_secs(1);
/// How long a worker that reported BLOCKED may take to exit by itself before its tree is
/// killed: short, so that it is stopped within a second of its report (an exit that was its
/// next step keeps its own status).
const BLOCKED_EXIT_GRACE: Duration = Duration::from_millis(300);
/// The shortest sleep of the loop on its own deadlines (rings wake it at once): something due
/// that cannot be done yet never turns the loop into a spin.
const MIN_WAIT_MS: i64 = 10;
/// How long a stopping supervisor spends on one last look at the pushes a newer one replaced
/// before CI decided them (one query each; a slow forge does not hold the stop up longer).
const REPLACED_SETTLE: Duration = Duration::from_secs(2);

struct Supervisor<'a, F: Forge> {
    env: &'a Env<'a>,
    /// How input reaches the loop and alerts leave it.
    io: Io,
    /// CI as this supervisor follows it: the CI thread, the DONE claims, the pushes.
    ci: CiWatch<F>,
    lease: LeaseWatch,
    /// The state cannot be written (full, read-only or damaged): why. The loop stops.
    storage_failure: Option<String>,
    store: Store,
    w: WorkerRecord,
    worker: Option<WorkerProcess>,
    /// The progress this supervisor last wrote to the worker's row (or found there at its
    /// start): anything else in the row was written by someone else (`own_rows`).
    written: crate::milestone::Progress,
    books: Books,
    /// The worktree as last looked at.
    branch: BranchWatch,
    /// The agent's run: its health, what it spent, its conversation.
    agent: AgentRun,
    land: LandClock,
    /// What stops the worker's chain from outside: fatal holds, a red upstream.
    holds: Holds,
}

/// Supervises worker `id` until it ends: returns its final (or stopping) milestone.
pub fn supervise<F: Forge + 'static>(
    env: &Env,
    follower: Arc<CiFollower<F>>,
    id: &str,
) -> Result<Milestone, SuperviseError> {
    supervise_then(env, follower, id, || {})
}

/// Like [`supervise`], calling `on_claimed` once this process holds the worker's lease (the
/// resume pass a supervisor runs for other workers must not see its own worker as orphaned).
pub fn supervise_then<F: Forge + 'static>(
    env: &Env,
    follower: Arc<CiFollower<F>>,
    id: &str,
    on_claimed: impl FnOnce() + Send,
) -> Result<Milestone, SuperviseError> {
    let mut store = Store::open(env.state_dir)?
        .with_alert_window(env.config.alerts.dedup_window)
        .patient();
    tracing::info!(
        worker = id,
        "a busy database is waited for up to {} per write (commands: {})",
        crate::duration::format(store.waits()),
        crate::duration::format(crate::store::BUSY_TIMEOUT)
    );
    let (w, fence) = lease::claim(&mut store, id)?;
    // Orphans of the worker (processes it started that outlived their parent) are reparented
    // to us rather than to init, so we can reap them: no zombies after a worker ends.
    let _ = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
    let bell = Bell::new();
    let doorbell = install_doorbell(env.state_dir, id, &bell);
    let channel = {
        let bell = bell.clone();
        // A worker of another account reaches its remote on the local forge only through
        // this channel (it cannot read or write orch's files).
        let relay = env
            .config
            .worker
            .separate()
            .then(|| crate::forge::host_remote(env.config, env.state_dir, &w.repo))
            .flatten()
            .map(|remote| crate::app::channel::GitRelay {
                remote,
                refusals: session_dir(env.state_dir, id).join("push-refusals"),
                shown: std::iter::once(w.local_branch())
                    .chain(
                        store
                            .read(|tx| crate::store::supersede::earlier_branches(tx, &w))
                            .unwrap_or_default(),
                    )
                    .collect(),
            });
        crate::app::channel::Channel::open(
            env.state_dir,
            id,
            env.config.alerts.dedup_window,
            relay,
            Some(crate::app::channel::CiAnswers {
                exe: env.orch_exe.to_path_buf(),
                config: env.config_path.to_path_buf(),
                contract: (!env.contract.is_built_in()).then(|| env.contract_path.to_path_buf()),
            }),
            move || bell.ring(),
        )
        .inspect_err(|e| {
            tracing::warn!(worker = id, error = %e, "no report channel; the worker reports on its output only")
        })
        .ok()
    };
    let cascade = cascade::CascadeLink::start(
        env.state_dir.to_path_buf(),
        env.config,
        &w.repo,
        follower.clone(),
        bell.clone(),
    );
    let written = w.progress.clone();
    let s = Supervisor {
        env,
        ci: CiWatch {
            link: CiLink::start(follower.clone(), bell.clone()),
            follower,
            backoff: ForgeBackoff::default(),
            next_poll_ms: 0,
            done_claims: DoneClaims::default(),
            replaced: Vec::new(),
            head_read_after: 0,
            head_may_have_moved: true,
            head_read_ms: 0,
            exit_query: 0,
            exit_seen_at: None,
            refused_head: None,
            frozen: false,
        },
        io: Io {
            bell,
            _doorbell: doorbell,
            channel,
            deliverer: super::deliver::Deliverer::start(env.state_dir.to_path_buf(), env.config),
        },
        lease: LeaseWatch {
            keeper: LeaseKeeper::new(id, fence),
            lost: false,
        },
        storage_failure: None,
        store,
        w,
        worker: None,
        written,
        books: Books {
            dirty: false,
            last_checkpoint_ms: now_ms(),
            last_deadlock_check_ms: now_ms(),
        },
        branch: BranchWatch::default(),
        agent: AgentRun {
            health: Default::default(),
            spend: Spend::default(),
            resume_failed: false,
            fresh_retry_used: false,
            notes_said: Default::default(),
            life_start: None,
        },
        land: LandClock::default(),
        holds: Holds {
            fatal_hold: None,
            upstream_red: false,
            cascade,
        },
    };
    // `on_claimed` (the resume pass for other orphans) runs beside supervision, not before it:
    // it may wait for the supervisors it starts to take over, and meanwhile this worker must
    // start and this lease be renewed. The scope joins it before the process can exit, so its
    // claims are handed over, never dropped.
    std::thread::scope(|scope| {
        scope.spawn(on_claimed);
        // Owned by this closure: should supervision panic, unwinding drops it here (its worker
        // group is killed) before the scope waits for the resume pass.
        let mut s = s;
        let result = s.run();
        s.finish();
        result
    })
}

impl<F: Forge + 'static> Supervisor<'_, F> {
    fn run(&mut self) -> Result<Milestone, SuperviseError> {
        if self.w.milestone().is_terminal() && !self.w.progress.landing_active() {
            return Ok(self.w.milestone());
        }
        // A replacement continues a worker's task: at work, or pushed without the previous
        // worker's word that it was finished (a green push is not DONE without it).
        let p = &self.w.progress;
        if matches!(p.milestone, Milestone::Working | Milestone::FixingCi)
            || (p.milestone == Milestone::PushedToCi && !p.turn_ended)
        {
            self.start_worker()?;
        }
        self.checkpoint();
        // While the disk has room: a storage failure later is noted in it (`stop_for_storage`).
        crate::app::storage_note::prepare(self.env.state_dir, &self.w.id);
        let mut last_tick = 0i64;
        let mut last_inbox = 0i64;
        loop {
            // Sleeps until something rings or the next thing falls due; nothing is looked at
            // that did not ring or fall due (an idle supervisor costs a tick a second).
            let now = now_ms();
            let due = self.next_due(now, last_tick, last_inbox);
            let rang = self
                .io
                .bell
                .wait(Duration::from_millis((due - now).max(MIN_WAIT_MS) as u64));
            for input in self.worker_output() {
                self.handle(input);
            }
            for t in self
                .io
                .channel
                .as_ref()
                .map(|c| c.trespasses())
                .unwrap_or_default()
            {
                self.apply(
                    Event::Trespass {
                        kind: t.kind,
                        message: t.message,
                    },
                    None,
                    Vec::new(),
                );
            }
            if let Some(status) = self.worker.as_mut().and_then(WorkerProcess::try_wait) {
                // The exit comes last, after the lines the worker printed before it.
                self.take_last_output();
                self.handle(Input::WorkerExited(status.code()));
            }
            let now = now_ms();
            if rang.inbox || now - last_inbox >= INBOX_EVERY_MS {
                last_inbox = now;
                let (requests, fatal) = self.inbox();
                // A fatal hold rings every doorbell: the chain stops at once.
                self.watch_fatal(fatal);
                for r in requests {
                    self.handle(Input::Request(r));
                }
            }
            while let Some(answer) = self.ci.link.answer() {
                self.handle(Input::Ci(answer));
            }
            if let Some(heard) = self.holds.cascade.as_ref().map(|c| c.heard()) {
                if !heard.forge_errors.is_empty() {
                    // In the worker's history, as its own CI queries' failures are: what
                    // `/metrics` counts as forge request errors.
                    self.record(
                        heard
                            .forge_errors
                            .into_iter()
                            .map(|(kind, detail)| Fact::Logged { kind, detail })
                            .collect(),
                    );
                }
                if let Some(upstream) = heard.upstream {
                    self.handle(Input::Upstream(upstream));
                }
            }
            if rang.ci.iter().any(|repo| self.waits_for_ci_of(repo)) {
                // A CI job finished where this worker waits: what it waits for may be decided.
                self.ci.next_poll_ms = self.ci.next_poll_ms.min(now);
                self.land.next_land_ms = self.land.next_land_ms.min(now);
            }
            if self.should_poll(now) {
                self.poll_ci(false);
            } else if self.ci.link.idle() {
                self.ask_about_replaced();
            }
            let overdue = self.ci.done_claims.take_overdue(now);
            if !overdue.is_empty() {
                self.judge_done(overdue, None);
            }
            self.land_tick(now);
            if now - last_tick >= TICK_EVERY_MS {
                last_tick = now;
                self.handle(Input::Tick);
            }
            if let Some(why) = self.storage_failure.take() {
                return Err(self.stop_for_storage(why));
            }
            if self.lease.lost || self.store.fence_lost() {
                tracing::warn!(worker = %self.w.id, "lease taken over by another supervisor; stopping");
                self.lease.lost = true;
                self.stop_worker(Stop::Kill);
                return Ok(self.w.milestone());
            }
            if self.worker.is_none() && self.done_supervising() {
                self.cancel_abandoned_runs();
                self.bring_clone_forward();
                return Ok(self.w.milestone());
            }
        }
    }

    /// The one entry point for everything that reaches the supervisor.
    fn handle(&mut self, input: Input) {
        match input {
            Input::Line(LineSignal::PermissionDenial, line) => {
                let line = truncate(&line, 300);
                self.apply(Event::PermissionDenial { line }, None, Vec::new());
            }
            Input::Line(LineSignal::Decision(text), _) => {
                let text = truncate(&text, 300);
                self.apply(Event::Decision { text }, None, Vec::new());
            }
            Input::Line(LineSignal::Milestone { milestone, rest }, _) => {
                let sha = (milestone == Milestone::PushedToCi)
                    .then(|| sha_in(&rest))
                    .flatten();
                self.claim(milestone, sha, rest, Channel::Output, None);
            }
            Input::Activity => {
                self.apply(Event::Output, None, Vec::new());
            }
            Input::Ci(answer) => self.ci_answer(answer),
            Input::Request(r) => self.request(r),
            Input::Tick => self.tick(),
            Input::WorkerExited(code) => {
                if self.retry_fresh(code) {
                    return;
                }
                // An agent's run is classified before its exit is: BLOCKED for an operator,
                // or a transient end for a replacement — never blindly the same. Only an end
                // nothing classified can be a setup failure (a rate limit is not one).
                match self.classify_end(code) {
                    Some(ended) => {
                        self.apply(ended, None, Vec::new());
                    }
                    None => {
                        if let Some(signature) = self.quick_exit(code) {
                            self.apply(Event::QuickExit { signature }, None, Vec::new());
                        }
                    }
                }
                let fact = self.worker_gone(code);
                self.apply(Event::WorkerExited { code }, None, vec![fact]);
                if self.w.progress.turn_ended {
                    // Its turn ended after a push: DONE on a verdict and branch head read
                    // after the exit — an answer to a query sent later than this.
                    self.ci.exit_query = self.ci.exit_seen_at.take().unwrap_or(self.ci.link.sent());
                    self.poll_ci(true);
                }
            }
            Input::Upstream(Some(reason)) => {
                self.holds.upstream_red = true;
                self.apply(Event::Pause { reason }, None, Vec::new());
            }
            Input::Upstream(None) => {
                self.holds.upstream_red = false;
                self.apply(Event::Resume, None, Vec::new());
            }
            Input::Denial { tool, detail } => {
                let line = truncate(&format!("{tool} denied: {detail}"), 300);
                self.apply(Event::PermissionDenial { line }, None, Vec::new());
            }
            Input::Usage(u) => {
                self.agent.spend.update(u);
                if u.last {
                    self.save_spend();
                }
                if let Some(why) = self.agent.spend.over_budget(&self.env.config.worker) {
                    self.save_spend();
                    let event = Event::Fail {
                        kind: "budget".into(),
                        reason: why,
                    };
                    self.apply(event, None, Vec::new());
                }
            }
            Input::Session(id) => {
                let before = &mut self.agent.spend.before;
                if before.session_id.as_deref() != Some(id.as_str()) {
                    before.thread_tokens = None; // a new thread counts from zero
                }
                before.session_id = Some(id);
                before.session_started = true;
                self.agent.spend.dirty = true;
                self.save_spend();
            }
            Input::Note(note) => self.agent_note(note),
        }
    }

    /// Nothing left to do once the worker is gone, unless CI decides what comes next: a push
    /// after which the worker ended its turn, a DONE claim to judge, a landing. `no_run` (no
    /// push run within `ci.start_timeout`) needs a new push, which only a worker can make:
    /// stop, so that `orch resume` gives it to a replacement (a push whose post-receive hook
    /// died with its worker never gets a run on the local forge).
    fn done_supervising(&self) -> bool {
        let p = &self.w.progress;
        if p.milestone.is_terminal() {
            return !p.landing_active(); // a DONE change still to land keeps it here
        }
        if !self.ci.done_claims.is_empty() {
            return false; // a worker's last words were DONE: judge them first
        }
        if p.milestone == Milestone::Paused {
            // Paused after its worker ended: only CI it still waits for keeps it here.
            return p.paused_from != Some(Milestone::PushedToCi);
        }
        if p.milestone == Milestone::PushedToCi && p.turn_ended {
            // The worker's word is given: CI decides (DONE on green, else FIXING_CI for a
            // replacement); a green read before the exit waits for the one asked after it.
            return p.verdict.is_some_and(|v| {
                v == crate::ci::verdict::VerdictKind::NoRun
                    || (v.is_terminal() && v != crate::ci::verdict::VerdictKind::Green)
            });
        }
        // The worker ended without its word (a crash, after a push too: CI, green or not,
        // makes nothing DONE without it). Said at once (`worker_exited`); what comes next is
        // `orch resume`'s — a replacement — rather than this supervisor following CI in
        // silence with the chain locked by a dead worker.
        true
    }

    fn start_worker(&mut self) -> Result<(), SuperviseError> {
        let launch = self.launch();
        self.agent.health = agent::health::RunHealth::default();
        self.ci.exit_seen_at = None;
        let process = WorkerProcess::start(
            self.env,
            &self.w,
            &launch,
            &self.io.bell,
            self.io.channel.as_ref(),
        )?;
        let pid = process.pid();
        self.agent.life_start = Some((
            now_ms(),
            self.w.progress.milestone,
            self.w.progress.tracked_sha.clone(),
        ));
        self.worker = Some(process);
        self.w.worker_pid = Some(pid);
        self.w.worker_running = true;
        self.record(vec![Fact::WorkerStarted { pid }]);
        tracing::info!(worker = %self.w.id, pid, "worker started");
        Ok(())
    }

    /// What the worker's readers sent since the last look (no waiting: the bell did that).
    fn worker_output(&mut self) -> Vec<Input> {
        self.worker
            .as_mut()
            .and_then(|w| w.output(Duration::ZERO))
            .unwrap_or_default()
    }

    /// Whether CI of `repo` can decide something this supervisor waits for: its own
    /// repository's (the worker's pushes, the landing and the base branch), or a dependent's
    /// that its landing checks downstream.
    fn waits_for_ci_of(&self, repo: &str) -> bool {
        repo == self.w.repo
            || self
                .w
                .progress
                .landing
                .as_ref()
                .is_some_and(|l| l.downstream.iter().any(|d| d.repo == repo))
    }

    /// When the loop must look again though nothing rang: the next tick, the inbox's slow
    /// fallback, a CI poll, a DONE claim's deadline, a landing step.
    fn next_due(&self, now: i64, last_tick: i64, last_inbox: i64) -> i64 {
        let mut due = (last_tick + TICK_EVERY_MS).min(last_inbox + INBOX_EVERY_MS);
        // A query in flight rings when it is answered.
        if self.wants_poll() && self.ci.link.idle() {
            due = due.min(self.ci.next_poll_ms);
        }
        if let Some(d) = self.ci.done_claims.next_deadline() {
            due = due.min(d);
        }
        if self.w.progress.landing_active() && self.ci.link.idle() {
            due = due.min(self.land.next_land_ms);
        }
        if !self.ci.replaced.is_empty() && self.ci.link.idle() {
            due = now; // a replaced push still wants its last look
        }
        due
    }

    /// The worker exited: sweep its group (background processes it left behind must not
    /// outlive it; with them gone the readers reach EOF), then take every line the readers
    /// still hold — a worker's last lines are often its last claim. The worker is no longer
    /// ours to stop meanwhile: what those lines cause is recorded, not done to a process.
    fn take_last_output(&mut self) {
        let Some(mut w) = self.worker.take() else {
            return;
        };
        w.sweep();
        reap_orphans(Some(w.pid()));
        // Bounded (a process that left the group may hold the pipe) yet well inside the lease.
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until {
            let Some(inputs) = w.output(Duration::from_millis(50)) else {
                break;
            };
            for input in inputs {
                self.handle(input);
            }
            if self.lease.keeper.due(now_ms()) {
                match self
                    .lease
                    .keeper
                    .renew(&mut self.store, self.env.config.worker.max_parallel)
                {
                    Ok(true) => {}
                    Ok(false) => {
                        self.lease.lost = true;
                        break;
                    }
                    Err(why) => {
                        self.storage_failure.get_or_insert(why);
                        break;
                    }
                }
            }
        }
    }

    /// Whether a fatal hold (`store::fatal`) covers the worker's chain (`over`, read with the
    /// inbox: on every doorbell, else every `INBOX_EVERY_MS`; `None` when it could not be
    /// read: the next look decides): a new one stops the worker (`Event::Fatal`: PAUSED,
    /// nothing lost), a cleared one lets it go on.
    fn watch_fatal(&mut self, over: Option<Vec<crate::store::fatal::FatalHold>>) {
        let Some(over) = over else {
            return;
        };
        let repo = self.w.repo.clone();
        let reason = over.first().map(|h| {
            if h.repo == repo {
                h.reason.clone()
            } else {
                format!("{} (held on {}, in this chain)", h.reason, h.repo)
            }
        });
        let was = std::mem::replace(&mut self.holds.fatal_hold, reason.clone());
        if was.is_some() && reason.is_none() {
            tracing::info!(worker = %self.w.id, "fatal hold over the chain cleared");
        }
        if self.w.progress.milestone.is_terminal() {
            return;
        }
        match (reason, self.w.progress.halted.is_some()) {
            (Some(reason), false) => {
                self.apply(
                    Event::Fatal {
                        reason,
                        raised: false,
                    },
                    None,
                    Vec::new(),
                );
            }
            (None, true) => {
                let event = Event::FatalCleared {
                    by: "an operator".into(),
                    upstream_red: self.holds.upstream_red,
                };
                self.apply(event, None, Vec::new());
            }
            _ => {}
        }
    }

    fn tick(&mut self) {
        let now = now_ms();
        // One system call says whether there is anything to reap at all.
        if zombie_child() {
            reap_orphans(self.worker.as_ref().map(WorkerProcess::pid));
        }
        self.notice_commits(now);
        self.apply(Event::Tick, None, Vec::new());
        let every = self.env.contract.deadlock.check_interval.as_millis() as i64;
        if now - self.books.last_deadlock_check_ms >= every {
            self.books.last_deadlock_check_ms = now;
            let check = Event::DeadlockCheck {
                worker_running: self.worker.is_some(),
                last_commit_ms: self.branch.last_commit_ms,
                forge_failures: self.ci.backoff.failures(),
            };
            self.apply(check, None, Vec::new());
        }
        self.save_spend();
        if self.books.dirty {
            self.persist_progress();
        }
        if now - self.books.last_checkpoint_ms
            >= self.env.contract.checkpoint_interval.as_millis() as i64
        {
            self.checkpoint();
        }
        if !self.lease.lost && self.lease.keeper.due(now) {
            // The file under the lease first: a database emptied or cut under this process
            // still answers from what it has cached.
            if let Some(why) = storage::damaged(&self.store) {
                self.storage_failure.get_or_insert(why);
                return;
            }
            match self
                .lease
                .keeper
                .renew(&mut self.store, self.env.config.worker.max_parallel)
            {
                Ok(true) => self.check_own_rows(),
                Ok(false) => self.lease.lost = true,
                Err(why) => {
                    self.storage_failure.get_or_insert(why);
                }
            }
        }
    }

    /// A new commit in the worktree counts as progress (timeouts extend on recent progress).
    fn notice_commits(&mut self, now: i64) {
        if self.worker.is_none() || now - self.branch.last_head_check_ms < HEAD_CHECK_EVERY_MS {
            return;
        }
        self.branch.last_head_check_ms = now;
        if self.branch.watched.is_none() {
            self.branch.watched = crate::gitops::Watched::open(Path::new(&self.w.worktree)).ok();
        }
        let Some(watched) = &self.branch.watched else {
            return;
        };
        let Some(head) = watched.resolve("HEAD") else {
            return;
        };
        // A `git push` moves the remote-tracking ref (even of a commit made earlier): the
        // next CI poll reads the branch head on the forge.
        let tracking = format!("refs/remotes/{}/{}", self.w.remote, self.w.branch);
        let pushed = watched.resolve(&tracking);
        let first_look = self.branch.last_head.is_none();
        if pushed != self.branch.last_pushed_ref {
            self.ci.head_may_have_moved |= !first_look;
            self.branch.last_pushed_ref = pushed;
        }
        let changed = self.branch.last_head.as_ref().is_some_and(|h| *h != head);
        self.branch.last_head = Some(head);
        if changed {
            self.ci.head_may_have_moved = true;
            self.agent.health.did_work = true;
            self.branch.last_commit_ms = Some(now);
            self.apply(Event::Commit, None, Vec::new());
        }
    }

    /// The requests waiting for this supervisor, and the fatal holds over its worker's chain
    /// (one read: looked at on the same doorbell and at the same pace).
    fn inbox(&mut self) -> (Vec<Request>, Option<Vec<crate::store::fatal::FatalHold>>) {
        let id = self.w.id.clone();
        let repo = self.w.repo.clone();
        let graph = &self.env.config.graph;
        let read = self.store.read(|tx| {
            Ok((
                ws::pending_requests(tx, &id)?,
                crate::store::fatal::covering(tx, graph, &repo)?,
            ))
        });
        let (requests, fatal) = match read {
            Ok((r, f)) => (r, Some(f)),
            Err(_) => (Vec::new(), None),
        };
        // A deferred DONE report is answered when its fresh verdict arrives.
        let requests = requests
            .into_iter()
            .filter(|r| !self.ci.done_claims.waiting_on(r.id))
            .collect();
        (requests, fatal)
    }

    fn request(&mut self, r: Request) {
        let outcome = match r.kind {
            RequestKind::Cancel { by, reason } => {
                self.apply(Event::Cancel { by, reason }, Some(r.id), Vec::new())
            }
            RequestKind::Report { milestone, .. }
                if !self.io.channel.as_ref().is_some_and(|c| c.queued(r.id)) =>
            {
                // Only the worker's channel queues reports (it knows who spoke); a report row
                // anyone else wrote — into the database directly, or for a previous life of
                // the worker — is refused, and said.
                self.apply(
                    Event::Trespass {
                        kind: "forged_report".into(),
                        message: format!(
                            "a {milestone} report for worker {} that did not come through its channel (request {}, written into the database by another process) was refused",
                            self.w.id, r.id
                        ),
                    },
                    None,
                    Vec::new(),
                );
                Outcome::Refused {
                    kind: "forged_report".into(),
                    detail:
                        "a worker's report is taken only through the channel its supervisor gave it"
                            .into(),
                }
            }
            RequestKind::Fatal { .. }
                if !self.io.channel.as_ref().is_some_and(|c| c.queued(r.id)) =>
            {
                self.apply(
                    Event::Trespass {
                        kind: "forged_report".into(),
                        message: format!(
                            "a FATAL report for worker {} that did not come through its channel (request {}) was refused",
                            self.w.id, r.id
                        ),
                    },
                    None,
                    Vec::new(),
                );
                Outcome::Refused {
                    kind: "forged_report".into(),
                    detail:
                        "a worker's report is taken only through the channel its supervisor gave it"
                            .into(),
                }
            }
            RequestKind::Fatal { reason } => {
                self.agent.health.did_work = true;
                let event = Event::Fatal {
                    reason: format!("reported by the worker: {}", truncate(&reason, 500)),
                    raised: true,
                };
                self.apply(event, Some(r.id), Vec::new())
            }
            RequestKind::Approve { by, sha } => {
                let event = Event::Approve {
                    sha: Sha::new(sha),
                    by,
                };
                self.apply(event, Some(r.id), Vec::new())
            }
            RequestKind::Report {
                milestone,
                sha,
                job,
                note,
            } => {
                let note = note.unwrap_or_default();
                let note = match job {
                    Some(j) => format!("{j} - {note}"),
                    None => note,
                };
                self.claim(milestone, sha, note, Channel::Report, Some(r.id))
            }
            RequestKind::Unknown { kind } => Outcome::Refused {
                kind: "unknown_request".into(),
                detail: format!("this orch does not know requests of kind {kind}"),
            },
        };
        if outcome == Outcome::Deferred {
            return; // answered when the fresh verdict arrives
        }
        // apply() answered it if it wrote anything; a request that changed nothing is
        // answered here (an answered request is never answered twice).
        self.answer(r.id, &outcome);
    }

    /// A worker's claim from either channel.
    fn claim(
        &mut self,
        m: Milestone,
        sha: Option<String>,
        note: String,
        via: Channel,
        request: Option<i64>,
    ) -> Outcome {
        // Any claim (a WORKING note too) shows the agent at its task: not a run that did
        // nothing.
        self.agent.health.did_work = true;
        if m == Milestone::Done && !note.trim().is_empty() {
            // What it says with DONE is its own account of the change (`worker_returns`).
            let text = truncate(note.trim(), 500);
            self.apply(Event::Summary { text }, None, Vec::new());
        }
        let event = match m {
            Milestone::PushedToCi => {
                let head = self.forge_head();
                let others = self.others_pushes();
                verify_push(self.env.config, &self.w, sha, head, &others, via)
            }
            Milestone::Done => {
                let p = &self.w.progress;
                if p.milestone == Milestone::PushedToCi && p.tracked_sha.is_some() {
                    // Judged on a CI answer sent after the claim, which also reads the branch
                    // head (see done.rs). Meanwhile the worker is frozen: nothing it pushes
                    // after that read could slip under the DONE it allows.
                    if via == Channel::Output {
                        self.let_exit(DONE_EXIT_GRACE);
                    }
                    self.freeze();
                    self.ci
                        .done_claims
                        .defer(via, request, self.ci.link.sent(), now_ms());
                    self.poll_ci(true);
                    return Outcome::Deferred;
                }
                Event::DoneClaim { via }
            }
            // The machine refuses what a worker may not claim (PAUSED, FAILED, …).
            _ => Event::Claim {
                milestone: m,
                note: truncate(&note, 500),
                via,
            },
        };
        self.apply(event, request, Vec::new())
    }

    /// Whether CI (and the branch head) is asked about now. A red or sync_not_done verdict is
    /// not final on a real forge — a rerun in place may turn it green — so it is followed too,
    /// at a cheap look per poll (see `forge::follow`); only green (DONE) and no run (a new push
    /// is needed) end the following.
    fn should_poll(&self, now: i64) -> bool {
        self.wants_poll() && now >= self.ci.next_poll_ms
    }

    /// Whether CI is followed at all now (see `should_poll`), whenever the next poll is due.
    fn wants_poll(&self) -> bool {
        use crate::ci::verdict::VerdictKind;
        let p = &self.w.progress;
        // A green head is still looked at while its worker works on (or has just ended its
        // turn): a push after it re-opens verification, and DONE needs the head read after
        // the worker's word. Its verdict is cached: only the branch head costs a request.
        let green_watched = p.verdict == Some(VerdictKind::Green)
            && p.milestone == Milestone::PushedToCi
            && (self.worker.is_some() || p.turn_ended);
        p.tracked_sha.is_some()
            && !p.milestone.is_terminal()
            && (green_watched
                || !matches!(p.verdict, Some(VerdictKind::Green | VerdictKind::NoRun)))
    }

    /// Asks the CI thread about the tracked SHA (one query at a time). `force`: a DONE claim
    /// wants the forge's answer now, not a cached one.
    fn poll_ci(&mut self, force: bool) {
        let Some(sha) = self.w.progress.tracked_sha.clone() else {
            return;
        };
        if self.ci.link.asking_about(&sha) || (!force && !self.should_poll(now_ms())) {
            return;
        }
        let Some(repo) = self.env.config.repo(&self.w.repo).cloned() else {
            return;
        };
        if force {
            self.ci.follower.forget(&repo.name, &sha);
        }
        // The branch head costs a request: read when it can have moved — a DONE claim or the
        // end of a turn (what DONE is judged on: always a fresh read), a commit or push seen
        // in the worktree, a failed read — and now and then, for a push made from elsewhere.
        let now = now_ms();
        let with_head = force
            || self.ci.head_may_have_moved
            || now - self.ci.head_read_ms >= HEAD_READ_AT_LEAST_EVERY_MS;
        if with_head {
            self.ci.head_may_have_moved = false;
            self.ci.head_read_ms = now;
        }
        self.ci.link.ask(
            repo,
            sha,
            &self.w.branch,
            self.w.progress.pushed_ms,
            with_head,
        );
    }

    /// Asks once more about a push that a newer one replaced before CI decided it (the answer
    /// is recorded for that SHA alone: see `ci_answer`).
    fn ask_about_replaced(&mut self) {
        let Some(sha) = self.ci.replaced.pop() else {
            return;
        };
        if let Some(repo) = self.env.config.repo(&self.w.repo).cloned() {
            self.ci.link.ask(repo, sha, &self.w.branch, None, false);
        }
    }

    /// Gives each push a newer one replaced before CI decided it its last look, so that its
    /// record says how it ended (a worker that saw its first push red and fixed it faster than
    /// this supervisor polled would otherwise leave that push `pending` in its history).
    /// Answers about the tracked SHA are left alone: the worker's state is settled.
    fn settle_replaced(&mut self) {
        let deadline = Instant::now() + REPLACED_SETTLE;
        while Instant::now() < deadline {
            if self.ci.link.idle() {
                if self.ci.replaced.is_empty() {
                    return;
                }
                self.ask_about_replaced();
            }
            match self.ci.link.answer() {
                Some(a) if self.w.progress.tracked_sha.as_ref() != Some(&a.sha) => {
                    if let Ok((v, runs)) = &a.result {
                        self.record(vec![Fact::Verdict {
                            sha: &a.sha,
                            row: VerdictRow::of(v, runs),
                        }]);
                    }
                }
                Some(_) => {}
                None => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    }

    /// Feeds a CI answer to the machine, then judges the DONE claims it is fresh for.
    fn ci_answer(&mut self, a: CiAnswer) {
        if self.land_answer(&a) {
            return;
        }
        // The branch head first: a push the worker made since is what CI must be about now.
        let head: Option<ForgeHead> = a
            .head
            .as_ref()
            .map(|h| h.as_ref().map_err(|e| e.to_string()).cloned());
        if matches!(head, Some(Err(_))) {
            self.ci.head_may_have_moved = true; // read again with the next query
        }
        // A head read before the last direct read (a push claim's) is stale: it would take
        // the worker back to a commit it has already pushed past. No head read: nothing to
        // judge a DONE claim on.
        let head_fresh = head.is_some() && a.n > self.ci.head_read_after;
        if head_fresh && let Some(head) = &head {
            self.observe_head(head);
        }
        if self.w.progress.milestone.is_terminal() {
            // Settled: an answer still in flight at the end changes nothing but the push's
            // record, which `status` shows (a FAILED worker's commit turning red says so).
            if let Ok((v, runs)) = &a.result {
                self.record(vec![Fact::Verdict {
                    sha: &a.sha,
                    row: VerdictRow::of(v, runs),
                }]);
            }
            return;
        }
        let about_tracked = self.w.progress.tracked_sha.as_ref() == Some(&a.sha);
        let failed = a.result.is_err();
        let interval = self.env.config.ci.poll_interval.as_millis() as i64;
        match &a.result {
            Ok((v, runs)) => {
                self.ci.next_poll_ms = now_ms() + self.ci.backoff.succeeded(interval);
                // The SHA's own record always gets the answer; the machine only hears about
                // the SHA it still tracks (a newer push may have replaced it meanwhile).
                let fact = Fact::Verdict {
                    sha: &a.sha,
                    row: VerdictRow::of(v, runs),
                };
                // A green verdict makes DONE only with the worker's word: a claim (judged
                // frozen, on an answer sent after it: `judge_done`) or the end of its turn
                // (the worker is gone: nothing can push under it). So it is applied as it
                // comes; a head that moved meanwhile was observed above.
                // After the end of a turn, only a query sent after the exit may decide: one
                // in flight at the exit read CI (and the head, if at all) before it.
                let before_exit = self.w.progress.turn_ended && a.n <= self.ci.exit_query;
                if about_tracked && before_exit {
                    self.record(vec![fact]);
                    self.poll_ci(true);
                } else if about_tracked {
                    let jobs = crate::ci::verdict::JobTally::of(runs);
                    let mut facts = vec![fact];
                    // `orch logs` tells CI's substates as they change (`ci 3/6 jobs, running
                    // build`); the tally itself is bookkeeping in the progress.
                    if let Some(t) = &jobs
                        && self.w.progress.ci_jobs.as_ref() != Some(t)
                    {
                        facts.push(Fact::Logged {
                            kind: "ci_progress",
                            detail: format!("{} for {}", t.summary(), a.sha.short()),
                        });
                    }
                    let event = Event::Verdict {
                        sha: a.sha.clone(),
                        kind: v.kind,
                        failed_jobs: v.failed_jobs.clone(),
                        detail: v.detail.clone(),
                        jobs,
                    };
                    self.apply(event, None, facts);
                    // Not DONE after all (the worker is gone or stays): let it go on.
                    self.thaw();
                } else {
                    self.record(vec![fact]);
                }
            }
            Err(e) => {
                let threshold = self.env.contract.deadlock.api_consecutive_failures;
                let after = self.ci.backoff.failed(e.is_blocking(), interval, threshold);
                self.ci.next_poll_ms = now_ms() + after.delay_ms;
                if after.alert {
                    let kind = if e.is_blocking() {
                        "forge_blocking"
                    } else {
                        "forge_unavailable"
                    };
                    let message = format!("CI for {} cannot be read: {e}", a.sha.short());
                    let event = Event::ForgeUnavailable {
                        kind: kind.into(),
                        message,
                    };
                    self.apply(event, None, Vec::new());
                }
                tracing::warn!(worker = %self.w.id, error = %e, "CI poll failed");
                // In the worker's history, and counted by `/metrics` (one per failed query,
                // after the client's retries: the backoff bounds how many).
                self.record(vec![Fact::Logged {
                    kind: e.event_kind(),
                    detail: format!("CI for {} could not be read: {e}", a.sha.short()),
                }]);
            }
        }
        // Claims this answer is fresh for are judged now (on what is known, if the forge
        // failed); the others wait for the query sent next.
        let fresh = self
            .ci
            .done_claims
            .take_fresh(a.n, about_tracked && head_fresh, failed);
        if !fresh.is_empty() {
            self.judge_done(fresh, head.as_ref());
        }
        if !self.ci.done_claims.is_empty() {
            self.poll_ci(true);
        }
    }

    /// Leaves the worker row consistent when the supervisor stops for any reason.
    fn finish(&mut self) {
        // DONE claims still waiting for a fresh verdict get their answer (on what is known)
        // rather than none; the journal refuses them itself if the lease was lost.
        let waiting = self.ci.done_claims.take_all();
        if !waiting.is_empty() {
            self.judge_done(waiting, None);
        }
        if self.worker.is_some() {
            // Only reached on an error path: never leave a worker running unsupervised.
            self.stop_worker(Stop::Terminate);
        }
        self.settle_replaced();
        if self.books.dirty {
            self.persist_progress();
        }
        self.save_spend();
        self.lease.keeper.give_up(&mut self.store);
        self.checkpoint();
        // The alerts of the last transitions go out before the process does (bounded).
        self.io.deliverer.stop();
    }
}

/// Puts this supervisor's doorbell in place (see `crate::wake`); a ring wakes the loop. Without
/// one (the state directory refuses a FIFO) the supervisor still works, on its fallbacks.
fn install_doorbell(state_dir: &Path, id: &str, bell: &Arc<Bell>) -> Option<crate::wake::Doorbell> {
    let doorbell = crate::wake::Doorbell::install(state_dir, id)
        .inspect_err(|e| tracing::warn!(worker = id, error = %e, "no doorbell; polling only"))
        .ok()?;
    let bell = bell.clone();
    doorbell
        .listen(move |ring| match ring {
            crate::wake::Ring::Inbox => bell.ring_inbox(),
            crate::wake::Ring::Ci(repo) => bell.ring_ci(repo),
            crate::wake::Ring::Progress => {}
        })
        .ok()?;
    Some(doorbell)
}
