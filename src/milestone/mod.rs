//! The worker state machine: one pure function `step(contract, state, event, now)` that every
//! event source feeds — output lines, `orch report`, CI verdicts, timers, operators.
//!
//! Legality comes from the contract file. The machine never does I/O: claims that need proof
//! arrive already checked (a `Push` carries a SHA the supervisor resolved and found on the
//! remote; a `DoneClaim` is judged against the verdict the supervisor last fed in). The
//! returned effects (kill the worker, release the lock, alert, checkpoint, …) are carried out
//! by the supervisor.
//!
//! Files: `mod.rs` (the types; `LifeClock`, the whole-life clock of `default_worker_timeout`,
//! running only at work), `step.rs` (the checks every event passes, then one handler per event
//! family in `step/`: `report` the worker's claims and pushes, `ci` verdicts and fix attempts,
//! `process`, `operator`, `pause` cascade pauses and FATAL halts, `done` DONE and its approval
//! hold, `timers` the timeouts, the life cap and the deadlock indicators, `fix_timeout`
//! FIXING_CI's timeout per fix attempt), `line.rs` (milestone lines), `landing.rs` (the phase
//! after DONE; one handler per family in `landing/`: `moves`, `verify`, `downstream`,
//! `revert`). Its tests, one file per event family, are in `tests/`.
//!
//! **Claims are verified; DONE is about the branch, not the claim** (ARCHITECTURE.md,
//! invariant 7). The commit orch verifies is the head of the worker's own branch on the forge
//! (read by the CI thread with every CI answer and for each push claim) and it must be new
//! work: not the base commit or in its history, not another worker's push or in its history
//! (`gitops::why_not_new_work`). A claim naming any other commit is a violation; a head that
//! moves (reported or not) re-opens verification (PUSHED_TO_CI on the new head). DONE needs a
//! push-triggered run for that head (its trigger, not its `event`: a cron run claims `push`)
//! with every required job and the sync job `success`, judged per run, and no job of a counted
//! push run still waiting, blocked or running; `skipped` is never green. A DONE claim freezes
//! the worker (cgroup freeze + SIGSTOP) and is judged on the answer to a CI query sent after the
//! claim, never on one already in flight; a refused claim thaws the worker. A green change that
//! touches `ci.protected_paths` is held BLOCKED until an operator approves that commit.

use crate::ci::verdict::VerdictKind;
use crate::contract::Contract;
use crate::sha::Sha;
use serde::{Deserialize, Serialize};

/// The milestones every contract defines (see `contract::REQUIRED_STATES`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    PartialOrd,
    Ord,
    schemars::JsonSchema,
)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Milestone {
    Working,
    PushedToCi,
    FixingCi,
    Done,
    Blocked,
    BlockedPermission,
    Paused,
    Failed,
    Cancelled,
}

impl Milestone {
    pub const ALL: [Milestone; 9] = [
        Milestone::Working,
        Milestone::PushedToCi,
        Milestone::FixingCi,
        Milestone::Done,
        Milestone::Blocked,
        Milestone::BlockedPermission,
        Milestone::Paused,
        Milestone::Failed,
        Milestone::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Milestone::Working => "WORKING",
            Milestone::PushedToCi => "PUSHED_TO_CI",
            Milestone::FixingCi => "FIXING_CI",
            Milestone::Done => "DONE",
            Milestone::Blocked => "BLOCKED",
            Milestone::BlockedPermission => "BLOCKED_PERMISSION",
            Milestone::Paused => "PAUSED",
            Milestone::Failed => "FAILED",
            Milestone::Cancelled => "CANCELLED",
        }
    }

    pub fn parse(s: &str) -> Option<Milestone> {
        Milestone::ALL.into_iter().find(|m| m.as_str() == s)
    }

    /// WORKING, PUSHED_TO_CI, FIXING_CI: the worker (or CI for its push) is at work, and its
    /// whole-life clock runs (`LifeClock`); in every other state it waits or has ended.
    pub fn at_work(self) -> bool {
        matches!(
            self,
            Milestone::Working | Milestone::PushedToCi | Milestone::FixingCi
        )
    }

    /// DONE, FAILED, CANCELLED: nothing happens to the worker after these.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Milestone::Done | Milestone::Failed | Milestone::Cancelled
        )
    }
}

impl std::fmt::Display for Milestone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which channel a worker's claim came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Channel {
    /// A line on the worker's stdout/stderr.
    Output,
    /// `orch report`.
    Report,
    /// Seen by orch itself: a new commit at the head of the worker's branch on the forge,
    /// reported or not.
    Forge,
}

impl std::fmt::Display for Channel {
    /// How a claim came, in the words of an event or alert.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Channel::Output => "in its output",
            Channel::Report => "by orch report",
            Channel::Forge => "seen on the forge",
        })
    }
}

/// What the machine knows about one worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    pub milestone: Milestone,
    /// Where a PAUSED worker returns to.
    pub paused_from: Option<Milestone>,
    pub since_ms: i64,
    /// When the current milestone times out (None: no timeout for it).
    pub deadline_ms: Option<i64>,
    pub extended: bool,
    pub warned: bool,
    pub fix_attempts: u32,
    /// What sent the worker to FIXING_CI each time, oldest first: the first is its original
    /// push's red, each later one a fix attempt that failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fix_reds: Vec<FixRed>,
    /// The warning at `escalate_after` failed fix attempts was raised (once per worker).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub escalated: bool,
    /// The worker's whole-life clock (`timeouts.default_worker_timeout`).
    #[serde(default)]
    pub life: LifeClock,
    /// The last pushed (and verified) SHA; CI is followed for it alone.
    pub tracked_sha: Option<Sha>,
    pub pushed_ms: Option<i64>,
    pub verdict: Option<VerdictKind>,
    pub failed_jobs: Vec<String>,
    pub verdict_detail: Option<String>,
    /// Last output line, commit or milestone.
    pub last_progress_ms: i64,
    pub permission_denials: u32,
    /// Why a worker stopped (timeout, permission, attempts exhausted, cancelled, …).
    pub end_reason: Option<String>,
    /// A PAUSED worker's frozen milestone clock, restored when it resumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_clock: Option<PausedClock>,
    /// The worker ended its turn (exit 0) in PUSHED_TO_CI: its word that the work is done, as
    /// a DONE claim is. A green head is DONE only with the worker's word (a claim or this);
    /// without it, a green push is "PUSHED_TO_CI, verified green" and the worker goes on.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub turn_ended: bool,
    /// How the change reaches the base branch after DONE (`None`: a record from before
    /// landing existed — DONE released the lock, as it did then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub landing: Option<Landing>,
    /// The protected files (`ci.protected_paths`) the tracked commit's change touches, as the
    /// supervisor found them when it verified the push: DONE on it needs an operator's
    /// approval of that very commit.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub protected: Vec<String>,
    /// The commit an operator approved (`orch approve`): a later push needs a new approval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved: Option<Sha>,
    /// A green commit held for approval (the worker is BLOCKED on it): DONE once approved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<Sha>,
    /// CI restarts in this PUSHED_TO_CI stint (`check_ci_then_escalate`'s `if_ci_stuck:
    /// restart_ci_and_wait`: once, then the timeout escalates).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub ci_restarts: u32,
    /// How far CI for the tracked commit has got, as last polled (`None`: no push run yet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ci_jobs: Option<crate::ci::verdict::JobTally>,
    /// The deadlock indicators that held at the last deadlock check (`deadlock_detection`):
    /// `worker_idle`, `no_commits`, `ci_stuck_in_pending`, `api_errors`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deadlock: Vec<String>,
    /// The fatal hold over the worker's chain (its reason): the worker stays stopped (PAUSED
    /// when it was at work) whatever else happens — an upstream green again, a resumer, a
    /// respawn — until an operator clears the hold (`orch fatal --clear`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub halted: Option<String>,
    /// The secrets orch found in the tracked commit's history (redacted: `file:line: kind`,
    /// never the value): that commit never becomes DONE, whatever CI says — the branch must
    /// be rewritten without them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<String>,
    /// A milestone timeout reassigns this worker's task rather than only escalating (set at
    /// spawn for a task on its wave's critical path; see `OnTimeout::Reassign`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reassign_on_timeout: bool,
    /// How the last life failed when it failed at once, having reported nothing (its exit
    /// and last line): the next life failing the same way is a setup failure, not respawned
    /// again (`Event::QuickExit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quick_failure: Option<String>,
    /// How many workers before this one the task was reassigned from (`app::reassign`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reassignments: u32,
    /// How many times an operator gave the worker another go (`orch respawn` of a BLOCKED,
    /// BLOCKED_PERMISSION or PAUSED worker): each starts a replacement, counted in
    /// `ORCH_REPLACEMENT` with the crash replacements (`WorkerRecord::respawns`) but not
    /// bounded by `worker.max_respawns` (that budget is for crashes).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub respawned: u32,
    /// The worker's own summary of its change: what it said with its DONE claim
    /// (`worker_returns.summary`), as printed (untrusted text, bounded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    /// The decisions the worker reported (`DECISION: …` lines; the checkpoint's
    /// `decisions_made`), oldest first, each once, at most [`MAX_DECISIONS`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decisions: Vec<String>,
}

/// How many decisions a worker's record keeps: a worker printing them in a loop fills no
/// database.
pub const MAX_DECISIONS: usize = 20;

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A red commit that sent the worker to FIXING_CI: its short SHA and the jobs that failed
/// (empty until CI's verdict is known: the worker's FIXING_CI claim may come first) — or a
/// fix attempt that ran out of time (`timed_out`, at the commit tracked then).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FixRed {
    pub sha: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub jobs: Vec<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub timed_out: bool,
}

impl std::fmt::Display for FixRed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.timed_out {
            write!(f, "timed out (at {})", self.sha)
        } else if self.jobs.is_empty() {
            write!(f, "{} (red: jobs not yet known)", self.sha)
        } else {
            write!(f, "{} red: {}", self.sha, self.jobs.join(", "))
        }
    }
}

/// How long a worker has been at work in all its life: across milestones and respawns (a
/// respawn continues the same worker), the clock running only while it is at work
/// (`Milestone::at_work`) — frozen while PAUSED, BLOCKED or BLOCKED_PERMISSION, stopped at
/// the end. `step` keeps it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LifeClock {
    /// Time at work before the current stretch.
    pub spent_ms: i64,
    /// When the current stretch at work began (None: the clock is stopped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_ms: Option<i64>,
}

impl LifeClock {
    /// Time at work up to `now`.
    pub fn at(&self, now: i64) -> i64 {
        self.spent_ms + self.since_ms.map_or(0, |s| (now - s).max(0))
    }

    /// Runs the clock while `at_work`, stops it otherwise (the stretch up to `now` counted).
    pub(crate) fn follow(&mut self, at_work: bool, now: i64) {
        match (at_work, self.since_ms) {
            (true, None) => self.since_ms = Some(now),
            (false, Some(s)) => {
                self.spent_ms += (now - s).max(0);
                self.since_ms = None;
            }
            _ => {}
        }
    }

    /// A new stretch from `now`, the one before it counted up to `until` (a resumer takes a
    /// worker over: the time its supervisor was gone is not the worker's).
    pub(crate) fn restart(&mut self, until: i64, now: i64) {
        if let Some(s) = self.since_ms {
            self.spent_ms += (until - s).max(0);
            self.since_ms = Some(now);
        }
    }
}

/// The timers of the milestone a worker was paused in: how long it had been in it, how much
/// was left before its deadline, and whether it was warned or extended already.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PausedClock {
    pub elapsed_ms: i64,
    pub left_ms: Option<i64>,
    pub warned: bool,
    pub extended: bool,
}

impl Progress {
    /// Whether orch still has landing work to do for a DONE worker.
    pub fn landing_active(&self) -> bool {
        self.milestone == Milestone::Done
            && self.landing.as_ref().is_some_and(|l| l.state.is_active())
    }

    /// Whether DONE on the tracked commit waits for an operator's approval: its change
    /// touches protected paths and nobody approved that commit.
    pub fn needs_approval(&self) -> bool {
        !self.protected.is_empty() && (self.approved.is_none() || self.approved != self.tracked_sha)
    }

    /// Whether the worker's change is complete for what comes after it: DONE and, where it
    /// is landed, landed (`land: none` counts once it is on the base branch: `Landed` too).
    pub fn change_complete(&self) -> bool {
        self.milestone == Milestone::Done
            && self
                .landing
                .as_ref()
                .is_none_or(|l| matches!(l.state, LandState::Landed | LandState::Broken))
    }

    pub fn new(contract: &Contract, now: i64) -> Progress {
        let mut p = Progress {
            milestone: Milestone::Working,
            paused_from: None,
            since_ms: now,
            deadline_ms: None,
            extended: false,
            warned: false,
            fix_attempts: 0,
            fix_reds: Vec::new(),
            escalated: false,
            life: LifeClock {
                spent_ms: 0,
                since_ms: Some(now),
            },
            tracked_sha: None,
            pushed_ms: None,
            verdict: None,
            failed_jobs: Vec::new(),
            verdict_detail: None,
            last_progress_ms: now,
            permission_denials: 0,
            end_reason: None,
            paused_clock: None,
            turn_ended: false,
            landing: None,
            protected: Vec::new(),
            approved: None,
            held: None,
            ci_restarts: 0,
            ci_jobs: None,
            deadlock: Vec::new(),
            halted: None,
            secrets: Vec::new(),
            reassign_on_timeout: false,
            quick_failure: None,
            reassignments: 0,
            respawned: 0,
            summary: None,
            decisions: Vec::new(),
        };
        p.enter(contract, Milestone::Working, now);
        p
    }

    pub(crate) fn enter(&mut self, contract: &Contract, to: Milestone, now: i64) {
        self.milestone = to;
        self.since_ms = now;
        self.deadline_ms = contract
            .timeouts
            .get(to.as_str())
            .map(|t| now + t.timeout.as_millis() as i64);
        self.extended = false;
        self.warned = false;
        self.last_progress_ms = now;
        self.ci_restarts = 0;
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// The worker printed something (progress; milestone lines are parsed into claims by the
    /// caller, and plain output arrives coalesced, at most about once a second).
    Output,
    /// A new commit appeared on the worker's branch (progress).
    Commit,
    /// WORKING, FIXING_CI, BLOCKED, BLOCKED_PERMISSION claimed by the worker.
    Claim {
        milestone: Milestone,
        note: String,
        via: Channel,
    },
    /// A PUSHED_TO_CI claim whose SHA was resolved and found on the remote.
    Push {
        sha: Sha,
        pushed_ms: i64,
        via: Channel,
        /// The protected files its change touches (see `Progress::protected`).
        protected: Vec<String>,
        /// The secrets orch found in the commits it adds, redacted (see `Progress::secrets`):
        /// any makes the push FATAL.
        secrets: Vec<String>,
    },
    /// An operator approves the change at `sha` that touches protected paths
    /// (`orch approve`): a held worker goes on to DONE.
    Approve {
        sha: Sha,
        by: String,
    },
    /// A PUSHED_TO_CI claim that failed verification.
    PushRejected {
        claimed: String,
        reason: String,
        via: Channel,
    },
    /// The worker summed up its change (the text of its DONE claim).
    Summary {
        text: String,
    },
    /// The worker reported a decision it made (a `DECISION:` line).
    Decision {
        text: String,
    },
    /// The worker says DONE; judged against the last verdict for the tracked SHA.
    DoneClaim {
        via: Channel,
    },
    /// A DONE claim refused before the machine could judge it: the head of the worker's
    /// branch on the forge is not the verified commit, or could not be read.
    DoneRefused {
        reason: String,
        via: Channel,
    },
    /// A line matching the permission rule's patterns.
    PermissionDenial {
        line: String,
    },
    /// orch's own CI verdict for `sha`.
    Verdict {
        sha: Sha,
        kind: VerdictKind,
        failed_jobs: Vec<String>,
        detail: String,
        /// How far its jobs have got (`None`: not known).
        jobs: Option<crate::ci::verdict::JobTally>,
    },
    /// The worker process ended.
    WorkerExited {
        code: Option<i32>,
    },
    /// Time passes: warnings and timeouts.
    Tick,
    Cancel {
        by: String,
        reason: String,
    },
    /// How an agent's run ended, classified by the failure taxonomy (`agent_run.rs`): a
    /// `blocking` end (bad credentials, an agent that did nothing) waits for an operator
    /// (BLOCKED); a transient one (rate limit, API unreachable) is left to a replacement.
    AgentEnded {
        blocking: bool,
        detail: String,
    },
    /// The worker's life ended at once, having reported nothing, as `signature` says (its exit
    /// and last line): twice the same in a row is a setup failure (a missing script, a
    /// program that cannot start), FAILED with one alert naming the cause, never respawned
    /// again (issue 37).
    QuickExit {
        signature: String,
    },
    /// A process crossed the line between workers and orch (it spoke on a channel that is
    /// not its own, ran an operator command inside a worker, wrote a report into the
    /// database): a critical alert only; what it attempted was refused.
    Trespass {
        kind: String,
        message: String,
    },
    /// Something about the agent people should hear of (e.g. a rate limit): an alert only.
    AgentWarning {
        kind: String,
        message: String,
    },
    /// orch gives up on the worker (e.g. respawns exhausted); the lock is kept.
    Fail {
        kind: String,
        reason: String,
    },
    /// The spawner could not prepare the worker (worktree, prompts): it never ran.
    SpawnFailed {
        reason: String,
    },
    /// A resumer took the worker over: its milestone's timers start afresh, and a
    /// `replacement` worker starts with a clean slate (no end reason, no denials counted).
    Resumed {
        replacement: bool,
    },
    /// An operator gives a BLOCKED, BLOCKED_PERMISSION or PAUSED worker another go (`orch respawn`):
    /// FIXING_CI when it has pushed work (CI decides again), else WORKING; clean slate.
    Respawn {
        by: String,
        note: String,
    },
    /// The forge could not be read for the tracked SHA (after retries, or a blocking error):
    /// someone has to hear about it; the state does not change.
    ForgeUnavailable {
        /// `forge_unavailable` (transient, threshold reached) or `forge_blocking`.
        kind: String,
        message: String,
    },
    /// The periodic deadlock check (`deadlock_detection.check_interval`), with what the
    /// supervisor observed: whether the worker process runs, when a commit last appeared in
    /// its worktree, how many forge polls failed in a row.
    DeadlockCheck {
        worker_running: bool,
        last_commit_ms: Option<i64>,
        forge_failures: u32,
    },
    /// Cascade protection: an upstream repository went red / green again.
    Pause {
        reason: String,
    },
    Resume,
    /// Landing after DONE: what the supervisor saw (see `landing`).
    Land(LandEvent),
    /// The worker's branch on the forge is no longer at its DONE commit `done`: it is at
    /// `head` (None: deleted). Before its landing moved the base, DONE is taken back
    /// (BLOCKED, see `step::done::done_branch_moved`); after, an alert only.
    DoneBranchMoved {
        done: crate::sha::Sha,
        head: Option<crate::sha::Sha>,
    },
    /// Out of PAUSED for another `reason` than a green upstream: a resumer took over a worker
    /// whose supervisor died while it was paused (its new supervisor checks the upstream
    /// again and pauses it anew if it is still red).
    Unpaused {
        reason: String,
    },
    /// FATAL (`failure_taxonomy.fatal`): the worker's chain is halted. `raised`: this worker
    /// reported it (`orch report FATAL`), so its step takes the fatal hold on its chain and
    /// raises the critical alert; otherwise its supervisor found a hold over its chain (an
    /// operator's, another worker's) and the worker only stops.
    Fatal {
        reason: String,
        raised: bool,
    },
    /// The fatal hold over the worker's chain was cleared by an operator: a worker halted at
    /// work goes on where it stopped — unless an upstream is red (`upstream_red`), when it
    /// stays PAUSED for the cascade.
    FatalCleared {
        by: String,
        upstream_red: bool,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Critical,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    Transition {
        from: Milestone,
        to: Milestone,
        reason: String,
    },
    /// Recorded; the state did not change.
    Violation {
        kind: String,
        detail: String,
    },
    Alert {
        severity: Severity,
        kind: String,
        message: String,
    },
    /// Stop the worker's process group: at once (permission rule) or SIGTERM → grace → SIGKILL.
    StopWorker {
        immediate: bool,
        reason: String,
    },
    /// The condition behind the worker's open alerts of `kind` ended (a pause lifted).
    ResolveAlert {
        kind: String,
    },
    /// Suspend / continue the worker's process group (cascade pause).
    SuspendWorker,
    ContinueWorker,
    ReleaseLock {
        reason: String,
    },
    /// DONE with a landing to do: the supervisor carries the change to the base branch.
    Land,
    /// Take the fatal hold on the worker's chain (its repository's), with `reason`, in the
    /// same transaction as the step: every supervisor in the chain then stops its worker.
    HoldFatal {
        reason: String,
    },
    /// Take an operator hold on `repo`'s chain (downstream breakage), after this entry's lock
    /// release, in the same transaction.
    HoldChain {
        repo: String,
        reason: String,
    },
    /// The landing moved (recorded as an event, shown in views).
    Landing {
        from: LandState,
        to: LandState,
        detail: String,
    },
    /// CI for `sha` is stuck (`why`) at the PUSHED_TO_CI timeout: start it again — on
    /// Forgejo an empty commit pushed to the worker's own branch (Forgejo's API has no rerun
    /// endpoint), on the local forge a new run of the commit.
    RestartCi {
        sha: Sha,
        why: String,
    },
    /// The worker timed out FAILED with `on_timeout: reassign` (or on a wave's critical path):
    /// its supervisor, once its processes are gone, hands the task and the chain lock to a new
    /// worker (`app::reassign`). Carried out by the owner, after the commit.
    Reassign,
    /// Follow CI for this SHA from now on (and forget the previous one).
    Track {
        sha: Sha,
    },
    Checkpoint,
}

impl Effect {
    /// An alert of `kind` (step.rs and landing.rs both raise them).
    pub(crate) fn alert(severity: Severity, kind: &str, message: String) -> Effect {
        Effect::Alert {
            severity,
            kind: kind.to_string(),
            message,
        }
    }
}

mod landing;
mod line;
mod step;

pub use landing::{DownstreamCheck, LandEvent, LandState, Landing};
pub use line::{LineSignal, parse_line, sha_in};
#[cfg(test)]
use step::transition;
pub use step::{BLOCKED_STOP, HELD_STOP, step};

#[cfg(test)]
mod tests;
