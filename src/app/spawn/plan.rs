//! A spawn's plan: the worker's record as it will be committed, worked out from the request,
//! the configuration and what the spawn found in the world (`Start`). Pure: the checks that
//! look at the world come before it, the transaction and the worktree after it.

use super::SpawnRequest;
use crate::config::{Config, Repo};
use crate::contract::Contract;
use crate::milestone::Progress;
use crate::store::workers::WorkerRecord;
use std::path::{Path, PathBuf};

/// What the spawn found or chose in the world before planning: the new worker's id, where it
/// pushes and what it starts from, whether it works in a workspace of its own, and the
/// spawning process, which holds the new worker's lease until its supervisor takes over.
pub(super) struct Start {
    pub(super) id: String,
    pub(super) remote: String,
    pub(super) base_sha: String,
    /// A workspace of its own (an account's, or a sandboxed worker's): its worktree is there.
    pub(super) workspace: bool,
    pub(super) account: Option<crate::account::Account>,
    pub(super) now: i64,
    pub(super) spawner_pid: i64,
    pub(super) spawner_start: Option<i64>,
    pub(super) node: String,
}

/// What a spawn decided before anything is taken.
pub(super) struct Plan {
    /// The repository, its `land.policy` the task's when the request gives one.
    pub(super) repo: Repo,
    pub(super) record: WorkerRecord,
    /// orch's own directory for the worker (its checkpoint, its prompts).
    pub(super) session: PathBuf,
    pub(super) account: Option<crate::account::Account>,
    /// What the worker is told beyond its task.
    pub(super) handoff: String,
}

pub(super) fn plan(
    config: &Config,
    contract: &Contract,
    state_dir: &Path,
    req: &SpawnRequest,
    repo: Repo,
    start: Start,
) -> Plan {
    let model = req
        .model
        .clone()
        .or_else(|| config.model_for(&repo.name, &crate::config::model::TaskTraits::default()));
    let id = &start.id;
    // `land: direct`: the worker pushes to the base branch itself (the chain lock keeps every
    // other worker off it); orch watches that branch on the forge. Its local branch is still
    // `orch/<id>` (`WorkerRecord::local_branch`).
    let branch = if repo.land.policy == crate::config::LandPolicy::Direct {
        repo.branch.clone()
    } else {
        format!("orch/{id}")
    };
    let session = crate::app::supervisor::session_dir(state_dir, id);
    // A worker of another account works in a clone of its own in a workspace it owns; orch's
    // session directory stays orch's. A sandboxed worker (`worker.sandbox`) gets the same
    // workspace, orch's own.
    let worktree = if start.workspace {
        crate::account::workspace_dir(state_dir, id).join("worktree")
    } else {
        session.join("worktree")
    };
    let now = start.now;
    let record = WorkerRecord {
        id: start.id.clone(),
        repo: repo.name.clone(),
        task: req.task.clone(),
        task_id: req.task_id.clone(),
        component: req.component.clone(),
        plan: req.plan.clone(),
        progress: Progress {
            landing: Some(crate::milestone::Landing {
                revert_on_breakage: config.downstream.on_breakage
                    == crate::config::OnBreakage::Revert,
                ..crate::milestone::Landing::planned(
                    &repo.land,
                    // orch checks what it lands: with `land: none` people merge, and check.
                    if repo.land.policy != crate::config::LandPolicy::None {
                        config.dependents_within(&repo.name, config.downstream.depth)
                    } else {
                        Vec::new()
                    },
                )
            }),
            reassign_on_timeout: req.reassign_on_timeout,
            reassignments: req.reassignments,
            ..Progress::new(contract, now)
        },
        branch,
        base_sha: start.base_sha,
        worktree: worktree.display().to_string(),
        remote: start.remote,
        day: jiff::Timestamp::from_millisecond(now)
            .map(|t| t.strftime("%Y-%m-%d").to_string())
            .unwrap_or_else(|_| "1970-01-01".into()),
        // The spawning process holds the lease until the supervisor it starts takes over, so a
        // half-spawned worker is never mistaken for an orphan — unless the spawner dies.
        supervisor_pid: Some(start.spawner_pid),
        supervisor_start: start.spawner_start,
        lease_until_ms: Some(now + crate::app::supervisor::LEASE_MS),
        worker_pid: None,
        worker_running: false,
        exit_code: None,
        respawns: 0,
        resume_note: None,
        created_ms: now,
        updated_ms: now,
        ended_ms: None,
        model_source: model.as_ref().map(|m| m.source.as_string()),
        model: model.map(|m| m.model),
        node: Some(start.node),
        // The spawner holds the lease without a token: its supervisor's claim takes the first.
        fence: 0,
    };
    Plan {
        repo,
        record,
        session,
        account: start.account,
        handoff: req.handoff.clone().unwrap_or_default(),
    }
}
