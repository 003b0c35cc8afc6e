//! The parts of a supervisor's state, each owned by one concern: the CI it follows, the lease
//! that makes it the worker's one supervisor, the worktree it watches, the agent's run, the
//! landing's clock, the holds over its chain, and how input reaches its loop. The loop
//! (`mod.rs`) owns them together; each file of this module works on its own part.

use super::Bell;
use super::agent;
use super::agent::spend::Spend;
use super::ci::{CiLink, ForgeBackoff};
use super::done::DoneClaims;
use super::lease::LeaseKeeper;
use crate::forge::Forge;
use crate::forge::follow::CiFollower;
use crate::sha::Sha;
use std::sync::Arc;

/// How input reaches the loop, and alerts leave it.
pub(super) struct Io {
    /// Where the loop sleeps: every source of input rings it (see `bell.rs`).
    pub bell: Arc<Bell>,
    /// Other processes ring it (a request queued, a CI job finished); gone with the process.
    pub _doorbell: Option<crate::wake::Doorbell>,
    /// The worker's report channel (see `app::channel`): none only when the socket could not
    /// be made (the worker then cannot report with `orch report`, only on its output).
    pub channel: Option<crate::app::channel::Channel>,
    /// The alert delivery thread (see `app::deliver`).
    pub deliverer: crate::app::deliver::Deliverer,
}

/// CI as the supervisor follows it (`ci.rs`, `claims.rs`, `done.rs`).
pub(super) struct CiWatch<F: Forge> {
    /// The CI thread: numbered queries, one in flight.
    pub link: CiLink,
    pub follower: Arc<CiFollower<F>>,
    pub backoff: ForgeBackoff,
    pub next_poll_ms: i64,
    /// DONE claims waiting for a fresh verdict.
    pub done_claims: DoneClaims,
    /// Pushes replaced by a newer one before CI decided them: each asked about once more, for
    /// its own record.
    pub replaced: Vec<Sha>,
    /// The number of the last CI query sent before the branch head was last read directly:
    /// heads in the answers up to it were read earlier, and are stale.
    pub head_read_after: u64,
    /// The worker's branch may have moved on the forge since its head was last read (see
    /// `poll_ci`), and when a query last read it.
    pub head_may_have_moved: bool,
    pub head_read_ms: i64,
    /// The last query sent before the worker ended its turn: answers up to it do not decide.
    pub exit_query: u64,
    /// The last query sent when the worker's exit was first seen, if that was before the loop
    /// took it (a DONE line lets the worker exit before the claim's query is sent).
    pub exit_seen_at: Option<u64>,
    /// A branch head seen on the forge and refused (not new work): said once, not per poll.
    pub refused_head: Option<Sha>,
    /// The worker's group is stopped (SIGSTOP) while a DONE claim is judged: no push can
    /// land between the read of its branch head and the DONE that read allows.
    pub frozen: bool,
}

/// The lease that makes this process the worker's one supervisor (`lease.rs`).
pub(super) struct LeaseWatch {
    pub keeper: LeaseKeeper,
    /// Another supervisor took the worker over: this one must stop without acting.
    pub lost: bool,
}

/// Bookkeeping due with the ticks.
pub(super) struct Books {
    /// Progress known in memory but not yet written (the time of the last output); written
    /// with the next tick.
    pub dirty: bool,
    pub last_checkpoint_ms: i64,
    /// When the deadlock indicators were last checked.
    pub last_deadlock_check_ms: i64,
}

/// The worktree as last looked at (`branch.rs`).
#[derive(Default)]
pub(super) struct BranchWatch {
    /// The worktree's HEAD when last looked at: a new commit is progress.
    pub last_head: Option<String>,
    /// The worktree, opened at the first look.
    pub watched: Option<crate::gitops::Watched>,
    pub last_head_check_ms: i64,
    /// The worktree's remote-tracking ref of the branch when last looked at: a `git push`
    /// moves it.
    pub last_pushed_ref: Option<String>,
    /// When a commit last appeared in the worktree.
    pub last_commit_ms: Option<i64>,
}

/// The agent's current run (`agent_run.rs`).
pub(super) struct AgentRun {
    /// What the run showed of its health (classified when it ends).
    pub health: agent::health::RunHealth,
    /// What the agent spent (the task's earlier runs and this one) and its conversation.
    pub spend: Spend,
    /// This run was to continue a conversation and the agent could not: the next start is a
    /// new conversation (once).
    pub resume_failed: bool,
    pub fresh_retry_used: bool,
    /// Agent notes already logged in this run (an API retried ten times is said once).
    pub notes_said: std::collections::HashSet<&'static str>,
    /// When the current life started, and its milestone and tracked commit then: a life that
    /// ends soon after with nothing reported is a quick exit (`Event::QuickExit`).
    pub life_start: Option<(i64, crate::milestone::Milestone, Option<Sha>)>,
}

/// When the landing steps (`land.rs`).
#[derive(Default)]
pub(super) struct LandClock {
    /// When the next landing step is due.
    pub next_land_ms: i64,
    /// Looks at a pull request the server did not find mergeable yet.
    pub pull_waits: u32,
    /// The dependents whose head was run once without the change (`downstream.rs`).
    pub baselines: std::collections::HashSet<String>,
}

/// What stops the worker's chain from outside (`cascade.rs`, `watch_fatal`).
pub(super) struct Holds {
    /// The fatal hold over the worker's chain as last read: while one stands, nothing of the
    /// worker moves, its landing included.
    pub fatal_hold: Option<String>,
    /// Whether the cascade watch last said an upstream is red (a cleared fatal hold leaves a
    /// worker PAUSED then).
    pub upstream_red: bool,
    /// The cascade watch (none when the repository depends on nothing).
    pub cascade: Option<super::cascade::CascadeLink>,
}
