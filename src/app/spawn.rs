//! Starting a worker: chain lock and worker record in one transaction, then the worktree on a
//! fresh branch, the remote it pushes to, the rendered prompts, and the first checkpoint.
//! The supervisor process is started by the caller (detached or in place).

use super::journal::{self, Entry, Fact, Writer};
use crate::config::Config;
use crate::contract::Contract;
use crate::gitops;
use crate::lock::{Blocker, HolderKind};
use crate::milestone::{Event, step};
use crate::prompt;
use crate::store::workers::{self as ws, WorkerRecord};
use crate::store::{LockAttempt, Store, StoreError, now_ms, try_lock_in};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

mod plan;

/// What the caller asks for.
#[derive(Debug, Clone, Default)]
pub struct SpawnRequest {
    pub repo: String,
    pub task: String,
    pub task_id: Option<String>,
    pub component: Option<String>,
    pub plan: Option<String>,
    /// A holder whose chain lock this worker takes over in its lock transaction (a hold orch
    /// took on a chain a landed change broke): released and re-taken at once, no gap in which
    /// another worker could start; the holder's own locks do not block, and the fix is on the
    /// critical path, so `worker.max_parallel` does not hold it back.
    pub take_over: Option<String>,
    /// What the worker is told beyond its task (the failing jobs' logs of a breakage it fixes),
    /// rendered into its prompt.
    pub handoff: Option<String>,
    /// `land.policy` for this task alone (a wave task's `land:`), over its repository's.
    pub land: Option<crate::config::LandPolicy>,
    /// The model its agent runs with, as the caller chose it (a wave task's, with its
    /// overrides; `spawn --model`); `None`: the repository's or `worker.model`.
    pub model: Option<crate::config::model::ModelChoice>,
    /// How many workers before this one the task was reassigned from (orch's own
    /// reassignments stop at `worker.max_respawns`).
    pub reassignments: u32,
    /// A milestone timeout reassigns the task (a wave task on its critical path).
    pub reassign_on_timeout: bool,
}

#[derive(Debug)]
pub enum Spawned {
    Ready(Box<WorkerRecord>),
    /// The chain is locked by others.
    Blocked(Vec<Blocker>),
    /// Every slot is taken: this node's (`worker.max_parallel`) or the organisation's
    /// (`worker.max_parallel_total`).
    AtCapacity(Capacity),
}

/// Slots all taken: `running` workers hold chain locks, `max` may.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Capacity {
    pub running: usize,
    pub max: usize,
    /// The organisation's limit (every node together), not this node's.
    pub organisation: bool,
}

impl Capacity {
    /// The free slots' check in a lock transaction: this node's, then the organisation's.
    pub fn check(
        tx: &crate::store::sql::Tx,
        worker: &crate::config::WorkerConfig,
    ) -> crate::store::sql::Result<Option<Capacity>> {
        let here = crate::store::nodes::lock_holders_on(tx, crate::node::name())?;
        if here >= worker.max_parallel {
            return Ok(Some(Capacity {
                running: here,
                max: worker.max_parallel,
                organisation: false,
            }));
        }
        if let Some(max) = worker.max_parallel_total {
            let all = crate::store::nodes::lock_holders_all(tx)?;
            if all >= max {
                return Ok(Some(Capacity {
                    running: all,
                    max,
                    organisation: true,
                }));
            }
        }
        Ok(None)
    }

    /// Why nothing starts, for a person.
    pub fn describe(&self) -> String {
        if self.organisation {
            format!(
                "worker.max_parallel_total reached: {} of {} workers running on all nodes",
                self.running, self.max
            )
        } else {
            format!(
                "worker.max_parallel reached: {} of {} workers running on node {}",
                self.running,
                self.max,
                crate::node::name()
            )
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SpawnError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{0}")]
    Setup(String),
    /// Cascade: a repository this one depends on has a red base branch (see `app::cascade`).
    #[error("not spawned: {0} (workers below a red repository do not start until it is green)")]
    UpstreamRed(String),
    /// The worker's program is not installed (`program_missing`).
    #[error("not spawned: {0}")]
    ProgramMissing(String),
    /// Another host beats under this node's name (`store::nodes::clash`).
    #[error("not spawned: {0}")]
    NodeName(String),
    /// The agent's API reported a rate limit with a reset time still ahead.
    #[error("not spawned: {0} (no new worker of this agent starts before the reset)")]
    AgentLimited(String),
}

/// Why no worker can start, when the program `worker.command` starts is nowhere to be found:
/// on PATH (a bare name) or at its path (relative to repos.yaml), with how to install it.
/// `orch check` warns with it; spawns refuse with it before anything is taken, and a wave's
/// ready tasks wait with it.
pub fn program_missing(config: &Config) -> Option<String> {
    use crate::config::agent::Agent;
    let program = config.worker.command.first()?;
    if program.contains('{') {
        return None; // a placeholder: known only at spawn
    }
    let found = if program.contains('/') {
        config.root().join(program).exists()
    } else {
        std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()).any(|d| {
            let p = d.join(program);
            std::fs::metadata(&p).is_ok_and(|m| {
                use std::os::unix::fs::PermissionsExt;
                m.is_file() && m.permissions().mode() & 0o111 != 0
            })
        })
    };
    if found {
        return None;
    }
    let install = match config.worker.agent {
        Agent::Claude => " (Claude Code: `npm install -g @anthropic-ai/claude-code`)",
        Agent::Codex => " (Codex: `npm install -g @openai/codex`)",
        Agent::Aider => " (aider: `pipx install aider-chat`)",
        Agent::Command => "",
    };
    Some(format!(
        "worker.command runs {}, which is not {}{install}; no worker can start until it is",
        crate::text::escape(program),
        if program.contains('/') {
            "there"
        } else {
            "on PATH"
        }
    ))
}

/// The remote a worker pushes to: the local forge's bare repository, or the clone's origin.
pub const LOCAL_REMOTE: &str = "orch";

/// The names the local forge's remote of this state directory may have in a clone:
/// [`LOCAL_REMOTE`], or — where another state directory's forge already has that name in the
/// same clone — `orch-<8 hex digits>`, the state directory's own (a stable FNV-1a of its path).
pub fn local_remote_names(state_dir: &Path) -> [String; 2] {
    use std::os::unix::ffi::OsStrExt;
    let path = std::fs::canonicalize(state_dir).unwrap_or_else(|_| state_dir.to_path_buf());
    let mut h: u32 = 0x811c_9dc5;
    for b in path.as_os_str().as_bytes() {
        h = (h ^ u32::from(*b)).wrapping_mul(0x0100_0193);
    }
    [LOCAL_REMOTE.to_string(), format!("{LOCAL_REMOTE}-{h:08x}")]
}

/// Which of [`local_remote_names`] this state directory uses in `clone`, whose forge
/// repository is `bare`: `orch` unless it points at another forge that still exists — two
/// state directories on the same clones must never re-point each other's remote (the other's
/// workers would push into this one's forge, and its gc would misreport).
fn local_remote_in(clone: &Path, state_dir: &Path, bare: &Path) -> String {
    let [plain, own] = local_remote_names(state_dir);
    match gitops::remote_url(clone, &plain) {
        Ok(Some(url)) if !same_file(Path::new(&url), bare) && Path::new(&url).exists() => own,
        _ => plain,
    }
}

/// Are `a` and `b` the same place on disk (or the same path when either is missing)?
pub fn same_file(a: &Path, b: &Path) -> bool {
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    a == b || canon(a) == canon(b)
}

fn new_id(repo: &str) -> String {
    let mut bytes = [0u8; 4];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes))
        .is_err()
    {
        bytes = (now_ms() as u32 ^ std::process::id()).to_le_bytes();
    }
    format!(
        "{repo}-{}",
        bytes.iter().map(|b| format!("{b:02x}")).collect::<String>()
    )
}

/// The remote of `repo`'s clone that orch pushes to and CI runs from: the local forge's bare
/// repository (made and named `orch` in the clone on first use), or the clone's origin.
pub fn push_remote(
    config: &Config,
    state_dir: &Path,
    repo: &crate::config::Repo,
) -> Result<String, String> {
    match crate::forge::ensure_host_remote(config, state_dir, repo)? {
        Some(bare) => {
            let name = local_remote_in(&repo.path, state_dir, &bare);
            gitops::ensure_remote(&repo.path, &name, &bare.display().to_string())
                .map_err(|e| e.to_string())?;
            Ok(name)
        }
        None => Ok("origin".to_string()),
    }
}

/// Prepares everything a worker needs and records it; does not start any process. In three
/// steps: the plan (pure, after the checks that refuse a spawn before anything is taken), the
/// commit (the chain lock and the worker's record in one transaction), then the making of its
/// worktree and workspace.
pub fn prepare(
    config: &Config,
    contract: &Contract,
    state_dir: &Path,
    store: &mut Store,
    req: &SpawnRequest,
) -> Result<Spawned, SpawnError> {
    let (repo, pool) = admit(config, contract, state_dir, req)?;
    let (remote, base_sha) = start_point(config, contract, state_dir, store, &repo)?;
    let id = new_id(&repo.name);
    // A worker of another account works in a clone of its own in a workspace it owns; orch's
    // session directory stays orch's. Its account is chosen now and the workspace made as its
    // (removed again if no worker comes of this spawn).
    // A sandboxed worker (`worker.sandbox`) gets the same workspace, orch's own.
    let pending = if !pool.is_empty() {
        Some(claim_account(store, state_dir, &id, &pool).map_err(SpawnError::Setup)?)
    } else if config.worker.sandbox {
        Some(PendingWorkspace::make(state_dir, &id, None).map_err(SpawnError::Setup)?)
    } else {
        None
    };
    let account = pending.as_ref().and_then(|p| p.account.clone());
    let spawner = crate::pidns::host_pid();
    let start = plan::Start {
        workspace: pending.is_some(),
        account,
        now: now_ms(),
        spawner_pid: spawner as i64,
        spawner_start: crate::process::proc_stat(spawner as i32).map(|s| s.start_ticks as i64),
        node: crate::node::name().to_string(),
        id,
        remote,
        base_sha,
    };
    let plan = plan::plan(config, contract, state_dir, req, repo, start);
    let (outcome, upstream) = commit(config, store, req, &plan.record)?;
    let Spawned::Ready(record) = outcome else {
        return Ok(outcome);
    };
    // The worker exists: its workspace stays, whatever happens next.
    if let Some(p) = pending {
        p.keep();
    }
    super::hold_lease_until_handover(state_dir, &record.id);
    // A hold handed over to this worker is gone from the holds file too.
    if req
        .take_over
        .as_deref()
        .is_some_and(|h| h.starts_with("hold:"))
    {
        super::journal::write_holds(store, state_dir);
    }
    make(config, contract, state_dir, store, &plan, record, &upstream)
}

/// The refusals that come before anything is taken: a spawn from inside a worker, a program
/// that is not there, a repository without its clone or its local CI, a landing the forge
/// cannot do, worker accounts that cannot be used, a sandbox that could be redirected. The
/// repository as this task lands it, and the accounts of `worker.users`.
fn admit(
    config: &Config,
    contract: &Contract,
    state_dir: &Path,
    req: &SpawnRequest,
) -> Result<(crate::config::Repo, Vec<crate::account::Account>), SpawnError> {
    if crate::pidns::nested() {
        // Its supervisor would run (and die) inside the namespace, and its lease would name
        // a pid only this namespace knows.
        return Err(SpawnError::Setup(
            "orch spawn from inside a worker's PID namespace is refused: run it outside the worker"
                .into(),
        ));
    }
    // A program that is not there would only exit 127, be respawned and fail, holding the
    // chain meanwhile: refused before anything is taken.
    if let Some(why) = program_missing(config) {
        return Err(SpawnError::ProgramMissing(why));
    }
    let repo = config
        .require_repo(&req.repo)
        .map_err(|e| SpawnError::Setup(e.to_string()))?
        .clone();
    if !repo.path.join(".git").exists() && !repo.path.join("HEAD").exists() {
        return Err(SpawnError::Setup(format!(
            "repository {} has no local clone at {} (repos.yaml `path`)",
            repo.name,
            repo.path.display()
        )));
    }
    if let Some(gap) = config.local_ci_gap(&repo) {
        return Err(SpawnError::Setup(gap));
    }
    let mut repo = repo;
    if let Some(policy) = req.land {
        if policy == crate::config::LandPolicy::PullRequest
            && !crate::forge::has_pull_requests(config)
        {
            return Err(SpawnError::Setup(format!(
                "task on {}: land pull_request needs forge.kind: forgejo (the local forge has no pull requests)",
                repo.name
            )));
        }
        repo.land.policy = policy;
    }
    // Workers of accounts of their own: refused here, before anything is taken, when one of
    // those accounts cannot be used (unknown, root, or orch may not switch to it).
    let pool = config
        .worker
        .users
        .iter()
        .map(|name| {
            let a = crate::account::usable(name)?;
            // The state directory and what is in it are orch's to open (`hand_over`); the
            // directories above it are the user's.
            crate::account::reachable(state_dir, &a)?;
            Ok(a)
        })
        .collect::<Result<Vec<_>, String>>()
        .map_err(SpawnError::Setup)?;
    // Nothing a worker's account may write becomes orch's configuration or code (issue 34):
    // repos.yaml and its directory, the contract, the wave files, orch's binary, the alert
    // sinks' programs, orch's PATH.
    if !pool.is_empty() {
        let file = (!contract.is_built_in()).then_some(contract.file.as_path());
        let inputs = orch_inputs(config, state_dir, file).map_err(SpawnError::Setup)?;
        for a in &pool {
            if let Some(why) = crate::sandbox::fixed::changeable_by(&inputs, a.uid, a.gid) {
                return Err(SpawnError::Setup(format!(
                    "worker.user {}: {why}. A worker of that account could change what orch reads as its configuration or runs as its code, and the operator's next command would use it; take its write access away (chmod go-w, or keep the organisation where that account cannot write)",
                    a.name
                )));
            }
        }
    }
    // A sandboxed worker: refused here too when it could point orch's configuration elsewhere
    // (its supervisor refuses again before each life).
    if config.worker.sandbox {
        let file = (!contract.is_built_in()).then_some(contract.file.as_path());
        if let Some(why) = crate::sandbox::fixed::redirectable(config, file)
            .into_iter()
            .next()
        {
            return Err(SpawnError::Setup(why));
        }
    }
    Ok((repo, pool))
}

/// What orch reads as its configuration or runs as its code for `config`'s organisation
/// ([`crate::sandbox::fixed::inputs`]), the wave files recorded in the store among them.
pub(crate) fn orch_inputs(
    config: &Config,
    state_dir: &Path,
    contract: Option<&Path>,
) -> Result<Vec<std::path::PathBuf>, String> {
    let waves: Vec<std::path::PathBuf> = if crate::store::has_state(state_dir) {
        crate::store::Store::open(state_dir)
            .and_then(|mut s| s.read(crate::store::waves::wave_files))
            .map_err(|e| format!("cannot read the recorded wave files: {e}"))?
    } else {
        Vec::new()
    };
    let path: Vec<std::path::PathBuf> = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect())
        .unwrap_or_default();
    Ok(crate::sandbox::fixed::inputs(
        config, contract, &waves, &path,
    ))
}

/// Where the worker starts from: the remote it pushes to (made on first use), refused while its
/// agent is rate-limited or an upstream is red, then the base branch fetched and its head.
fn start_point(
    config: &Config,
    contract: &Contract,
    state_dir: &Path,
    store: &mut Store,
    repo: &crate::config::Repo,
) -> Result<(String, String), SpawnError> {
    // Where the worker's pushes go, and where CI picks them up.
    let remote = push_remote(config, state_dir, repo).map_err(SpawnError::Setup)?;
    // A rate-limited agent gets no new worker before its reset (a wave's next tick retries).
    let agent = config.worker.agent.as_str();
    if let Some((_, why)) =
        store.read(|tx| crate::store::usage::agent_limit(tx, agent, now_ms()))?
    {
        return Err(SpawnError::AgentLimited(why));
    }
    // Cascade: nothing starts below a red repository; spawn refuses with the reason (a caller
    // that waits or a wave's next tick tries again once it is green).
    if !crate::app::cascade::upstreams(config, &repo.name).is_empty() {
        match crate::forge::AnyForge::from_config(config, contract, state_dir) {
            Ok(forge) => {
                let follower = crate::forge::follow::CiFollower::new(
                    forge,
                    crate::ci::verdict::CiPolicy::from(&config.ci),
                );
                if let Some(reason) =
                    crate::app::cascade::spawn_refusal(store, &follower, config, &repo.name)
                {
                    return Err(SpawnError::UpstreamRed(reason));
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot check upstream CI before spawn"),
        }
    }
    if let Err(e) = gitops::fetch(&repo.path, &remote) {
        tracing::warn!(repo = %repo.name, error = %e, "fetch before spawn failed; using the local view of the base branch");
    }
    let base_sha = gitops::base_sha(&repo.path, &remote, &repo.branch)
        .map_err(|e| SpawnError::Setup(e.to_string()))?;
    Ok((remote, base_sha))
}

/// The looks before the write transaction, then the transaction: the worker's record with its
/// chain lock (`record_in`). With the outcome, the chain's context for the handoff file (read
/// only when the looks let the spawn go on).
fn commit(
    config: &Config,
    store: &mut Store,
    req: &SpawnRequest,
    record: &WorkerRecord,
) -> Result<(Spawned, String), SpawnError> {
    // A live worker in the clone repos.yaml now names this repository (or one of its chain)
    // keeps it: one clone, one worker. Read before the write transaction (it reads files): a
    // clone changes hands only with an edit of repos.yaml, never between these two looks.
    let same_clone = super::drift::same_clone_blockers(
        &store.read(|tx| super::drift::drift_in(tx, config))?,
        config,
        &record.repo,
    );
    if !same_clone.is_empty() {
        return Ok((Spawned::Blocked(same_clone), String::new()));
    }
    // The chain's context for the handoff file, read before the lock transaction: between
    // that transaction and its supervisor's start the spawner holds the worker's lease, and
    // nothing slow belongs there (200 spawns at once showed it).
    let upstream = handoff_context(store, config, &record.repo, &record.id);
    // This node's name must be this host's alone: under a name two hosts share, each would
    // judge the other's leases by pids that name nothing on it.
    if let Some(clash) = store
        .read(|tx| crate::store::nodes::clash(tx, crate::node::name(), crate::node::place()))?
    {
        return Err(SpawnError::NodeName(clash.to_string()));
    }
    // The lock and the record commit together: a worker exists iff it holds its chain.
    let outcome = store.write(|tx| record_in(tx, config, req, record))?;
    Ok((outcome, upstream))
}

/// The committed worker's worktree, prompts and workspace. Nothing ran if they cannot be made:
/// its lock is undone and its record kept, FAILED.
fn make(
    config: &Config,
    contract: &Contract,
    state_dir: &Path,
    store: &mut Store,
    plan: &plan::Plan,
    record: Box<WorkerRecord>,
    upstream: &str,
) -> Result<Spawned, SpawnError> {
    let made = setup_worktree(
        config,
        contract,
        &plan.repo,
        &record,
        &plan.session,
        upstream,
        &plan.handoff,
    )
    .and_then(|()| {
        if config.worker.separate() {
            hand_over(state_dir, &record, &plan.session, plan.account.as_ref())
        } else {
            Ok(())
        }
    });
    if let Err(e) = made {
        // Nothing ran: undo the lock so the chain is not held by a worker that never existed,
        // and keep the record (FAILED) so the attempt is not lost.
        let msg = format!("spawn failed: {e}");
        let event = Event::SpawnFailed {
            reason: msg.clone(),
        };
        let (after, effects) = step(contract, &record.id, &record.progress, &event, now_ms());
        let entry = Entry::new(&record, "orch")
            .step(&after, &effects)
            .fact(Fact::Logged {
                kind: "spawn_failed",
                detail: msg.clone(),
            });
        // This process still holds the lease it created the worker with.
        if let Err(err) = journal::commit(store, state_dir, Writer::me(), &entry) {
            tracing::error!(worker = %record.id, error = %err, "could not record the failed spawn");
        }
        return Err(SpawnError::Setup(e));
    }
    Ok(Spawned::Ready(record))
}

/// The lock and the record in one transaction (a worker exists iff it holds its chain): a
/// FATAL over the chain, a lock handed over by `req.take_over`, the free slots, the chain's
/// lock, then the worker's row with the spawner's lease. Every start of a worker goes through
/// here (`orch spawn`, a wave's tick, a reassignment, a fix worker, a conflict's replacement).
pub fn record_in(
    tx: &crate::store::sql::Tx,
    config: &Config,
    req: &SpawnRequest,
    record: &WorkerRecord,
) -> crate::store::sql::Result<Spawned> {
    let repo = &record.repo;
    let id = &record.id;
    let max = config.worker.max_parallel;
    // A FATAL over the chain stops every start in it, a hand-over too, until an operator
    // clears it (`orch fatal --clear`).
    let fatal = crate::store::fatal::covering(tx, &config.graph, repo)?;
    if !fatal.is_empty() {
        let held = crate::store::fatal::as_locks(&fatal);
        return Ok(Spawned::Blocked(crate::lock::blockers(
            &config.graph,
            repo,
            &held,
        )));
    }
    if let Some(holder) = &req.take_over {
        // Blocked by anything but the holder handing over: nothing is released.
        let (handing, others): (Vec<_>, Vec<_>) = crate::store::active_locks(tx)?
            .into_iter()
            .partition(|l| &l.holder == holder);
        // A hold handed to a worker makes one more worker (a worker's lock handed to its
        // replacement does not): it takes a slot like any start.
        if handing.iter().any(|l| l.kind == HolderKind::Hold)
            && let Some(full) = Capacity::check(tx, &config.worker)?
        {
            return Ok(Spawned::AtCapacity(full));
        }
        let blocking = crate::lock::blockers(&config.graph, repo, &others);
        if !blocking.is_empty() {
            return Ok(Spawned::Blocked(blocking));
        }
        crate::store::release_in(
            tx,
            holder,
            Some(&format!("handed over to worker {id}")),
            Some("orch"),
        )?;
    } else {
        if let Some(full) = Capacity::check(tx, &config.worker)? {
            return Ok(Spawned::AtCapacity(full));
        }
    }
    match try_lock_in(
        tx,
        &config.graph,
        repo,
        id,
        HolderKind::Worker,
        Some(&req.task),
        None,
    )? {
        LockAttempt::Blocked(b) => Ok(Spawned::Blocked(b)),
        LockAttempt::Acquired(_) => {
            ws::insert_worker(tx, record)?;
            // The lease on the database's clock (every node judges it by that one).
            ws::set_lease(
                tx,
                id,
                crate::pidns::host_pid() as i64,
                Some(super::supervisor::LEASE_MS),
            )?;
            // (A name taken by another host was refused before this transaction.)
            crate::store::nodes::beat(tx, crate::node::name(), crate::node::place(), max)?;
            ws::add_event(
                tx,
                id,
                "spawned",
                record.progress.milestone,
                &format!("task: {}", req.task),
            )?;
            Ok(Spawned::Ready(Box::new(record.clone())))
        }
    }
}

fn setup_worktree(
    config: &Config,
    contract: &Contract,
    repo: &crate::config::Repo,
    w: &WorkerRecord,
    session: &Path,
    upstream: &str,
    handoff: &str,
) -> Result<(), String> {
    std::fs::create_dir_all(session).map_err(|e| format!("{}: {e}", session.display()))?;
    let local = w.local_branch();
    if config.worker.separate() {
        make_own_clone(config, repo, w, &w.base_sha)?;
    } else {
        gitops::create_worktree(
            &repo.path,
            &w.id,
            &local,
            &w.base_sha,
            Path::new(&w.worktree),
        )
        .map_err(|e| e.to_string())?;
        gitops::set_upstream_to(&repo.path, &local, &w.remote, &w.branch)
            .map_err(|e| e.to_string())?;
    }
    render_prompts(config, contract, w, session, handoff, upstream)
}

/// The clone of its own a worker of another account works in (see `hand_over`), its branch
/// at `start`: its remote is the clone's push remote, reached on the local forge through the
/// supervisor's relay.
fn make_own_clone(
    config: &Config,
    repo: &crate::config::Repo,
    w: &WorkerRecord,
    start: &str,
) -> Result<(), String> {
    let url = gitops::remote_url(&repo.path, &w.remote)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| {
            format!(
                "the clone {} has no remote {}: nothing to push the worker's branch to",
                repo.path.display(),
                w.remote
            )
        })?;
    let relay = crate::forge::keeps_repositories_here(config).then(|| {
        let exe = std::env::current_exe().unwrap_or_else(|_| "orch".into());
        format!(
            "{} {}",
            shell_quote(&exe.display().to_string()),
            crate::report_wire::RELAY_COMMAND
        )
    });
    gitops::clone_for_worker(
        &repo.path,
        Path::new(&w.worktree),
        &w.local_branch(),
        start,
        &gitops::WorkerRemote {
            name: &w.remote,
            url: &url,
            relay,
        },
        &w.branch,
    )
    .map_err(|e| e.to_string())
}

/// Makes a worker of another account's clone again (a resumer found it missing or half-made):
/// at what it pushed when the clone has it from the remote, else at its base; handed over.
pub fn remake_own_clone(config: &Config, state_dir: &Path, w: &WorkerRecord) -> Result<(), String> {
    if !config.worker.separate() {
        return Err(
            "neither worker.user nor worker.sandbox is set any more: its clone is not made again"
                .into(),
        );
    }
    // Its account is its workspace's owner (the workspace outlives a lost clone); a workspace
    // gone as well gets the pool's first account.
    let workspace = crate::account::workspace_dir(state_dir, &w.id);
    let account = workspace_account(config, &workspace)?;
    let repo = config
        .repo(&w.repo)
        .ok_or_else(|| format!("unknown repository {}", w.repo))?;
    let _ = gitops::fetch(&repo.path, &w.remote);
    let start = gitops::resolve(
        &repo.path,
        &format!("refs/remotes/{}/{}", w.remote, w.branch),
    )
    .unwrap_or_else(|_| w.base_sha.clone());
    make_own_clone(config, repo, w, &start)?;
    let session = super::supervisor::session_dir(state_dir, &w.id);
    hand_over(state_dir, w, &session, account.as_ref())
}

/// The account whose workspace `workspace` is: its owner, else (still orch's: a spawner
/// killed before it handed it over) the pool's first account; none for a sandboxed worker.
fn workspace_account(
    config: &Config,
    workspace: &Path,
) -> Result<Option<crate::account::Account>, String> {
    if !config.worker.accounts() {
        return Ok(None);
    }
    match crate::account::of_workspace(workspace, &config.worker.users) {
        Ok(Some(a)) => Ok(Some(a)),
        _ => crate::account::usable(&config.worker.users[0]).map(Some),
    }
}

/// Hands worker `w`'s workspace over to its account again (a spawner killed before it did, or
/// a spawner or resumer killed inside it).
pub fn hand_over_again(config: &Config, state_dir: &Path, w: &WorkerRecord) -> Result<(), String> {
    let workspace = crate::account::workspace_dir(state_dir, &w.id);
    let account = workspace_account(config, &workspace)?;
    let session = super::supervisor::session_dir(state_dir, &w.id);
    hand_over(state_dir, w, &session, account.as_ref())
}

/// A new worker's workspace, made as the account chosen for it (none: a sandboxed worker's,
/// orch's own); removed on drop unless kept (a spawn that took no lock leaves nothing behind).
struct PendingWorkspace {
    dir: PathBuf,
    account: Option<crate::account::Account>,
    kept: bool,
}

impl PendingWorkspace {
    fn make(
        state_dir: &Path,
        id: &str,
        account: Option<crate::account::Account>,
    ) -> Result<PendingWorkspace, String> {
        let dir = crate::account::workspace_dir(state_dir, id);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let pending = PendingWorkspace {
            dir: dir.clone(),
            account,
            kept: false,
        };
        if let Some(a) = &pending.account {
            crate::account::chown_tree(&dir, a.uid, a.gid)
                .map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        Ok(pending)
    }

    fn keep(mut self) {
        self.kept = true;
    }
}

impl Drop for PendingWorkspace {
    fn drop(&mut self) {
        if !self.kept {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Chooses the account of `pool` the fewest live workers run as (each live worker's account is
/// the owner of its workspace; a workspace no worker owns yet is a spawn under way) and makes
/// worker `id`'s workspace as that account. Spawns choose one at a time (a lock file), so two
/// at once do not both take the same free account.
fn claim_account(
    store: &mut Store,
    state_dir: &Path,
    id: &str,
    pool: &[crate::account::Account],
) -> Result<PendingWorkspace, String> {
    let root = state_dir.join(crate::account::WORKSPACES);
    std::fs::create_dir_all(&root).map_err(|e| format!("{}: {e}", root.display()))?;
    crate::account::set_mode(&root, 0o711).map_err(|e| format!("{}: {e}", root.display()))?;
    let lock = std::fs::File::create(root.join(".choosing"))
        .map_err(|e| format!("{}: {e}", root.display()))?;
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive)
        .map_err(|e| format!("{}: {e}", root.display()))?;
    let live: std::collections::HashSet<String> = store
        .live_workers()
        .map_err(|e| e.to_string())?
        .into_iter()
        .map(|w| w.id)
        .collect();
    let mut known = |dir: &str| store.worker(dir).ok().flatten().is_some();
    let mut taken = Vec::new();
    for entry in std::fs::read_dir(&root).map_err(|e| format!("{}: {e}", root.display()))? {
        let Ok(entry) = entry else { continue };
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        if (live.contains(&name) || !known(&name))
            && let Some(uid) = crate::account::owner_of(&entry.path())
        {
            taken.push(uid);
        }
    }
    let account = crate::account::choose(pool, &taken)
        .ok_or("worker.users names no account")?
        .clone();
    if taken.contains(&account.uid) {
        tracing::warn!(
            account = %account.name,
            "every account of worker.users runs a live worker: this one shares {} (name more accounts than worker.max_parallel)",
            account.name
        );
    }
    PendingWorkspace::make(state_dir, id, Some(account))
}

/// Hands the workspace of worker `w` to `account`: its clone, a home, a copy of its CI guide;
/// and keeps the rest of the state directory out of its reach. A sandboxed worker's (no
/// account) gets the home and the guide, orch's own (its sandbox hides everything else).
fn hand_over(
    state_dir: &Path,
    w: &WorkerRecord,
    session: &Path,
    account: Option<&crate::account::Account>,
) -> Result<(), String> {
    let io = |what: &Path| {
        let what = what.display().to_string();
        move |e: std::io::Error| format!("{what}: {e}")
    };
    // Marked under way first and unmarked last: a process killed in between (a spawner, a
    // resumer) leaves the mark, and the resumer hands the workspace over again — whatever
    // part of it (the clone's inside, the home, the modes) was not done yet.
    std::fs::create_dir_all(session).map_err(io(session))?;
    let mark = session.join(HANDING_OVER);
    std::fs::write(&mark, b"").map_err(io(&mark))?;
    hand_over_workspace(state_dir, w, session, account)?;
    match std::fs::remove_file(&mark) {
        // Another resumer's hand-over of the same workspace ended first: done all the same.
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io(&mark)(e)),
        _ => Ok(()),
    }
}

/// In a worker's session directory while its workspace is being handed over (`hand_over`).
const HANDING_OVER: &str = "handing-over";

/// Whether the hand-over of the workspace of the worker whose session directory is `session`
/// was begun and never finished (its process killed half-way).
pub fn hand_over_unfinished(session: &Path) -> bool {
    session.join(HANDING_OVER).exists()
}

fn hand_over_workspace(
    state_dir: &Path,
    w: &WorkerRecord,
    session: &Path,
    account: Option<&crate::account::Account>,
) -> Result<(), String> {
    let wt = Path::new(&w.worktree);
    let home = crate::account::worker_home(wt);
    let io = |what: &Path| {
        let what = what.display().to_string();
        move |e: std::io::Error| format!("{what}: {e}")
    };
    let workspace = wt.parent().unwrap_or(wt);
    // The workspace may be the account's already (handed over again, and with one account for
    // several workers another worker may be at work in it): nothing in it is followed or
    // written through — the home is made only where nothing is, the two files made new.
    match std::fs::create_dir(&home) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(io(&home)(e)),
        _ => {}
    }
    for (from, to) in [
        (
            session.join("ci-guide.md"),
            crate::account::worker_ci_guide(wt),
        ),
        (
            session.join(super::supervisor::HANDOFF_FILE),
            crate::account::worker_handoff(wt),
        ),
    ] {
        let content = std::fs::read(&from).map_err(io(&from))?;
        let name = to.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        crate::account::write_new_in(workspace, name, &content).map_err(io(&to))?;
    }
    let Some(account) = account else {
        return crate::account::set_mode(workspace, 0o700).map_err(io(workspace));
    };
    crate::account::chown_tree(workspace, account.uid, account.gid).map_err(io(workspace))?;
    crate::account::set_mode(workspace, 0o700).map_err(io(workspace))?;
    crate::account::set_mode(session, 0o700).map_err(io(session))?;
    crate::account::tighten_state_dir(state_dir).map_err(io(state_dir))
}

/// `s` as one word for `sh` (git runs a remote's `receivepack` through the shell).
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// How many landed upstream changes a prompt names (the contract's handoff: "recent_changes:
/// last 3 commits in dep chain").
const UPSTREAM_CHANGES: usize = 3;

/// The changes landed on the repositories `repo` depends on (transitively), newest first, as
/// the lines a worker's prompt shows: what its base now builds on.
pub fn upstream_changes(store: &mut Store, config: &Config, repo: &str) -> String {
    let deps = config.graph.deps(repo);
    if deps.is_empty() {
        return String::new();
    }
    // The newest DONE workers of each dependency only, not every worker ever.
    let Ok(workers) = store.read(|tx| {
        let mut all = Vec::new();
        for dep in &deps {
            all.extend(ws::recent_done_of(tx, dep, UPSTREAM_CHANGES * 4)?);
        }
        Ok(all)
    }) else {
        return String::new();
    };
    let mut landed: Vec<(i64, String)> = workers
        .iter()
        .filter_map(|w| {
            let l = w.progress.landing.as_ref()?;
            let sha = l.landed.as_ref().filter(|_| w.progress.change_complete())?;
            let base = config
                .repo(&w.repo)
                .map(|r| r.branch.as_str())
                .unwrap_or("main");
            let task = w.task.lines().next().unwrap_or("");
            Some((
                w.updated_ms,
                format!(
                    "- {}: {} on {base} — \"{}\" (worker {})",
                    w.repo,
                    sha.short(),
                    crate::text::escape(task),
                    w.id
                ),
            ))
        })
        .collect();
    if landed.is_empty() {
        return String::new();
    }
    landed.sort_by_key(|l| std::cmp::Reverse(l.0));
    let lines: Vec<String> = landed
        .into_iter()
        .take(UPSTREAM_CHANGES)
        .map(|(_, l)| l)
        .collect();
    format!(
        "UPSTREAM: changes landed in your dependencies (your base builds on them), newest first:\n{}\n",
        lines.join("\n")
    )
}

/// How far back the handoff file's known issues look, and how many it names.
const KNOWN_ISSUES_WINDOW_MS: i64 = 24 * 3600 * 1000;
const KNOWN_ISSUES: usize = 5;

/// What the contract's `context_handoff.recommended` wants a worker of `repo` to have at hand
/// beyond its prompt, read when the worker needs it (the handoff file, `$ORCH_HANDOFF`): the
/// changes landed in its dependency chain, known issues (the newest alerts on its chain not
/// resolved), and the workers active now but worker `me`. Best effort: what cannot be read is left out.
pub fn handoff_context(store: &mut Store, config: &Config, repo: &str, me: &str) -> String {
    let mut s = upstream_changes(store, config, repo);
    let chain: std::collections::HashSet<String> = config
        .graph
        .deps(repo)
        .into_iter()
        .chain(config.graph.dependents(repo))
        .map(|r| r.to_string())
        .chain(std::iter::once(repo.to_string()))
        .collect();
    let since = now_ms() - KNOWN_ISSUES_WINDOW_MS;
    if let Ok(alerts) = store.read(|tx| ws::alerts(tx, since)) {
        let mut issues: Vec<String> = alerts
            .iter()
            .rev()
            .filter(|a| a.resolved_ms.is_none() && a.severity != "info")
            .filter(|a| a.repo.as_ref().is_some_and(|r| chain.contains(r)))
            .take(KNOWN_ISSUES)
            .map(|a| {
                format!(
                    "- {} {} on {}: {}",
                    a.severity,
                    a.kind,
                    a.repo.as_deref().unwrap_or("-"),
                    crate::text::escape(&a.message)
                )
            })
            .collect();
        if !issues.is_empty() {
            issues.insert(
                0,
                "KNOWN ISSUES: recent alerts on your chain, newest first:".into(),
            );
            s.push_str(&issues.join("\n"));
            s.push('\n');
        }
    }
    if let Ok(live) = store.live_workers() {
        let lines: Vec<String> = live
            .iter()
            .filter(|w| w.id != me && !w.milestone().is_terminal())
            .map(|w| {
                format!(
                    "- {} on {} ({}): {}",
                    w.id,
                    w.repo,
                    w.milestone(),
                    crate::text::escape(w.task.lines().next().unwrap_or(""))
                )
            })
            .collect();
        if !lines.is_empty() {
            s.push_str(&format!(
                "WORKERS ACTIVE NOW (other repositories are theirs, not yours):\n{}\n",
                lines.join("\n")
            ));
        }
    }
    s
}

/// The contract's milestone timeouts in one line, for the prompt's LIMITS.
pub fn limits(contract: &Contract) -> String {
    let mut parts: Vec<String> = ["WORKING", "PUSHED_TO_CI", "FIXING_CI"]
        .iter()
        .filter_map(|m| {
            let t = contract.timeouts.get(*m)?;
            Some(format!("{m} {}", crate::duration::format(t.timeout)))
        })
        .collect();
    parts.push(format!("{} fix attempts", contract.fixing_ci_max_attempts));
    parts.push(format!(
        "{} in all",
        crate::duration::format(contract.default_worker_timeout)
    ));
    parts.join(", ")
}

/// Writes `prompt.md`, `ci-guide.md` and `handoff.md` into the worker's session directory.
pub fn render_prompts(
    config: &Config,
    contract: &Contract,
    w: &WorkerRecord,
    session: &Path,
    resume: &str,
    upstream: &str,
) -> Result<(), String> {
    let repo = config
        .repo(&w.repo)
        .ok_or_else(|| format!("unknown repository {}", w.repo))?;
    // A `land: direct` worker lands as it pushes: it is told how (a plain `git push` from
    // `orch/<id>` does not go to a branch of another name).
    let direct = w
        .progress
        .landing
        .as_ref()
        .is_some_and(|l| l.policy == crate::config::LandPolicy::Direct);
    let resume = if direct {
        format!(
            "LANDING: direct — push with `git push {} HEAD:{}`; each push lands on {} (CI must be green on it before you report DONE).\n{resume}",
            w.remote, w.branch, w.branch
        )
    } else {
        resume.to_string()
    };
    let vars: BTreeMap<&str, String> = [
        ("task", w.task.clone()),
        ("repo", w.repo.clone()),
        ("branch", w.branch.clone()),
        ("base_branch", repo.branch.clone()),
        ("base_short", crate::sha::short(&w.base_sha).to_string()),
        (
            "component",
            w.component.clone().unwrap_or_else(|| "-".into()),
        ),
        ("plan", w.plan.clone().unwrap_or_else(|| "-".into())),
        ("sync_job", config.ci.sync_job.clone()),
        (
            "max_fix_attempts",
            contract.fixing_ci_max_attempts.to_string(),
        ),
        ("resume", resume),
        ("upstream", upstream.to_string()),
        ("limits", limits(contract)),
    ]
    .into_iter()
    .collect();
    let root = config.root();
    let worker = prompt::render(
        &prompt::template(root, "worker.md", prompt::WORKER_TEMPLATE)?,
        &vars,
    )?;
    let ci = prompt::render(
        &prompt::template(root, "ci-worker.md", prompt::CI_TEMPLATE)?,
        &vars,
    )?;
    crate::checkpoint::write_atomic(&session.join("prompt.md"), worker.as_bytes())
        .map_err(|e| e.to_string())?;
    crate::checkpoint::write_atomic(&session.join("ci-guide.md"), ci.as_bytes())
        .map_err(|e| e.to_string())?;
    // The rest of the contract's handoff, read when needed (the prompt names it, as the CI
    // guide): the spec the task points at, the limits, and the chain's context.
    let handoff = format!(
        "# Context for worker {} on {}\nComponent spec: {}; plan: {}\nLIMITS: {}\n{upstream}",
        w.id,
        w.repo,
        w.component.as_deref().unwrap_or("-"),
        w.plan.as_deref().unwrap_or("-"),
        limits(contract),
    );
    crate::checkpoint::write_atomic(
        &session.join(super::supervisor::HANDOFF_FILE),
        handoff.as_bytes(),
    )
    .map_err(|e| e.to_string())?;
    Ok(())
}
