//! Landing: the phase after DONE in which a verified change is carried to its base branch.
//! Pure, like the rest of the machine: the supervisor does the git and CI work (`app::
//! supervisor::land`) and reports what it saw as a [`LandEvent`]; `step` (below; `milestone::step` hands it every `Event::Land`) moves the landing and
//! says when the chain lock may go.
//!
//! With `land.policy: merge` the lock of a DONE worker is held until its change is on the base
//! branch *and* the base branch's CI for that exact commit is green with the sync job
//! `success`. The base head only ever moves to a commit whose own CI was green (the "not rocket
//! science" rule): the DONE commit itself when the base has not moved (fast-forward), else an
//! integration built on the current base head and verified on a landing branch first; the move
//! is a compare-and-swap on the head the integration was built on.
//!
//! ```text
//! planned ──DONE──▶ pending ──fast-forward / already on base──────────────▶ base_ci ──green──▶ landed
//!                     │  ▲                                                   │ red
//!                     │  └─ base moved (CAS lost; attempts left) ◀─┐          ▼
//!                     └─integration built──▶ verifying ──green + CAS┘──▶   refused
//!                        │ conflict              │ red
//!                        ▼                       ▼
//!                     conflict ◀─────────────────┘      (lock kept, alert: a person acts)
//! planned ──DONE──▶ waiting (land: none; lock released) ──seen on base──▶ landed
//! ```

mod downstream;
mod moves;
mod revert;
mod verify;

use super::{Effect, Progress};
use crate::ci::verdict::VerdictKind;
use crate::config::{LandConfig, LandMethod, LandPolicy};
use crate::sha::Sha;
use serde::{Deserialize, Serialize};

/// Where a worker's change is on its way to the base branch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema, Hash)]
#[serde(rename_all = "snake_case")]
pub enum LandState {
    /// The worker is not DONE yet.
    Planned,
    /// DONE: orch is to move the base branch (fast-forward, or build an integration).
    Pending,
    /// An integration of the change and the moved base is on the landing branch; its CI
    /// decides whether the base may move to it.
    Verifying,
    /// The base branch was moved to the change; the base branch's CI for that commit decides.
    BaseCi,
    /// On the base branch with its CI green; the dependents' CI runs on their base heads
    /// with the new upstream (`downstream.depth`). The lock is still held.
    Downstream,
    /// On the base branch, its CI green (and its dependents' too): the chain lock is free.
    Landed,
    /// Landed, but a dependent's CI is red on it: `downstream_breakage` alert, an operator hold
    /// on that dependent's chain (`downstream.on_breakage: hold`); the change's own lock is free.
    Broken,
    /// `land: none`: the change waits on its branch until a person merges it.
    Waiting,
    /// `downstream.on_breakage: revert`: the landed change broke a dependent; orch lands a
    /// revert of it (built, verified on `orch/<id>-revert`, moved by compare-and-swap, base CI),
    /// the chain lock held throughout.
    Reverting,
    /// The change was reverted on the base branch (its base CI green): the task did not land.
    Reverted,
    /// The change does not merge with the base (or the integration's CI is red): a person
    /// resolves it; the chain lock is kept.
    Conflict,
    /// orch gave up (the base kept moving, the base's CI was red after the move, a push was
    /// refused): the chain lock is kept for a person.
    Refused,
}

impl LandState {
    pub fn as_str(self) -> &'static str {
        match self {
            LandState::Planned => "planned",
            LandState::Pending => "pending",
            LandState::Verifying => "verifying",
            LandState::BaseCi => "base_ci",
            LandState::Downstream => "downstream",
            LandState::Landed => "landed",
            LandState::Broken => "broken",
            LandState::Reverting => "reverting",
            LandState::Reverted => "reverted",
            LandState::Waiting => "waiting",
            LandState::Conflict => "conflict",
            LandState::Refused => "refused",
        }
    }

    /// orch has landing work to do (a supervisor is needed).
    pub fn is_active(self) -> bool {
        matches!(
            self,
            LandState::Pending
                | LandState::Verifying
                | LandState::BaseCi
                | LandState::Downstream
                | LandState::Reverting
        )
    }
}

impl std::fmt::Display for LandState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A worker's landing: the plan it was spawned with and how far it got.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Landing {
    pub state: LandState,
    pub policy: LandPolicy,
    pub method: LandMethod,
    pub max_attempts: u32,
    /// The verified DONE commit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub done_sha: Option<Sha>,
    /// The integration being verified (on the landing branch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidate: Option<Sha>,
    /// The base head the candidate was built on: the compare-and-swap's expected value.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub onto: Option<Sha>,
    /// The commit the base branch was moved to (or found at).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub landed: Option<Sha>,
    /// Integrations built or moves tried.
    #[serde(default)]
    pub attempts: u32,
    /// What happened last, in words (a conflict's files, a refusal's reason).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The dependents checked after the landing (planned at spawn from `downstream.depth`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub downstream: Vec<DownstreamCheck>,
    /// The runs the landed commit had before the base moved to it, and when it moved: the
    /// base branch's CI is its own run, awaited up to `ci.start_timeout`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_runs_before: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moved_ms: Option<i64>,
    /// `on_breakage: revert`: whether a breakage is answered by a revert; the revert built and
    /// the commit the base was moved to with it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub revert_on_breakage: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revert: Option<Sha>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reverted: Option<Sha>,
    /// `pull_request`: the pull request orch opened (its number and page).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_url: Option<String>,
}

/// One dependent's CI on its base head with the landed change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct DownstreamCheck {
    pub repo: String,
    /// The dependent's base head that was verified (pushed to a verification branch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha: Option<Sha>,
    /// None until its CI decided.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<VerdictKind>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_jobs: Vec<String>,
    /// Its base head was red already without the change (its own base CI said so): not a
    /// breakage of the change's making, so nothing is blamed or held for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub already_red: Option<String>,
}

impl Landing {
    pub fn planned(c: &LandConfig, dependents: Vec<String>) -> Landing {
        Landing {
            state: LandState::Planned,
            policy: c.policy,
            method: c.method,
            max_attempts: c.max_attempts,
            done_sha: None,
            candidate: None,
            onto: None,
            landed: None,
            attempts: 0,
            detail: None,
            downstream: dependents
                .into_iter()
                .map(|repo| DownstreamCheck {
                    repo,
                    sha: None,
                    verdict: None,
                    failed_jobs: Vec::new(),
                    already_red: None,
                })
                .collect(),
            base_runs_before: None,
            moved_ms: None,
            revert_on_breakage: false,
            revert: None,
            reverted: None,
            pull: None,
            pull_url: None,
        }
    }

    /// Back to before DONE, keeping the plan (policy, method, dependents to check, a pull
    /// request already open): a DONE that CI must prove again lands again from the start
    /// (what already happened is found, not made twice).
    pub fn replan(&mut self) {
        let plan = LandConfig {
            policy: self.policy,
            method: self.method,
            max_attempts: self.max_attempts,
            on_conflict: crate::config::OnConflict::Block, // not kept in a landing
        };
        let dependents = self.downstream.iter().map(|d| d.repo.clone()).collect();
        *self = Landing {
            revert_on_breakage: self.revert_on_breakage,
            pull: self.pull,
            pull_url: self.pull_url.take(),
            ..Landing::planned(&plan, dependents)
        };
    }

    /// `landed <sha>`, `conflict: …`: one phrase for status lines.
    pub fn summary(&self) -> String {
        let short = |s: &Option<Sha>| s.as_ref().map(|s| s.short().to_string());
        match self.state {
            LandState::Landed => format!(
                "landed {}",
                short(&self.landed).unwrap_or_else(|| "-".into())
            ),
            LandState::Verifying => format!(
                "verifying integration {}",
                short(&self.candidate).unwrap_or_else(|| "-".into())
            ),
            LandState::BaseCi => format!(
                "base CI for {}",
                short(&self.landed).unwrap_or_else(|| "-".into())
            ),
            LandState::Downstream => {
                let done = self
                    .downstream
                    .iter()
                    .filter(|d| d.verdict.is_some())
                    .count();
                format!(
                    "landed {}; dependents' CI {done}/{}",
                    short(&self.landed).unwrap_or_else(|| "-".into()),
                    self.downstream.len()
                )
            }
            LandState::Reverted => format!(
                "reverted {}",
                short(&self.reverted).unwrap_or_else(|| "-".into())
            ),
            LandState::Conflict | LandState::Refused | LandState::Broken | LandState::Reverting => {
                match &self.detail {
                    Some(d) => format!("{}: {d}", self.state),
                    None => self.state.to_string(),
                }
            }
            LandState::Pending if self.pull.is_some() => {
                format!("pull request #{} open", self.pull.unwrap_or_default())
            }
            s => s.to_string(),
        }
    }
}

/// What the supervisor saw while landing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LandEvent {
    /// The DONE commit is already in the base branch (merged by a person, or by an earlier
    /// landing that died before it was recorded): `head` is the base head it was found in.
    OnBase { head: Sha },
    /// The base was fast-forwarded (compare-and-swap won) to the DONE commit, or moved to a
    /// verified integration.
    Moved {
        to: Sha,
        how: String,
        /// The base head it moved from (a revert needs it), when known.
        from: Option<Sha>,
        /// How many CI runs the commit had before the move: the base branch's own run is one
        /// more (a verdict from the runs of the worker's branch alone is not the base's).
        runs_before: usize,
    },
    /// `on_breakage: revert`: a revert of the landed change was built on base head `onto` and
    /// pushed to the revert branch for its CI.
    RevertBuilt { sha: Sha, onto: Sha },
    /// The base was moved (compare-and-swap) to the verified revert.
    RevertMoved { to: Sha },
    /// An integration was built on base head `onto` and pushed to the landing branch.
    Built { candidate: Sha, onto: Sha },
    /// The base moved under the compare-and-swap (or the push was refused): try again.
    Lost { reason: String },
    /// The change does not merge with the base head.
    Conflict { detail: String },
    /// `pull_request`: the pull request was opened (or found open).
    PullOpened { number: i64, url: Option<String> },
    /// The forge refused the landing for good (a pull request's merge: branch protection,
    /// approvals, a head out of date): its words.
    Refused { reason: String },
    /// A dependent's base head `sha` was pushed to its verification branch (its CI runs).
    CheckStarted { repo: String, sha: Sha },
    /// A dependent's CI decided (on its verification branch: its base head with the change).
    /// `already_red`: its base CI on the same head without the change was red too (why, in
    /// words); `None` when that was green or is not known.
    CheckVerdict {
        repo: String,
        sha: Sha,
        kind: VerdictKind,
        failed_jobs: Vec<String>,
        detail: String,
        already_red: Option<String>,
    },
    /// CI of the integration (Verifying) or of the base branch at the landed commit (BaseCi).
    Verdict {
        sha: Sha,
        kind: VerdictKind,
        failed_jobs: Vec<String>,
        detail: String,
    },
}

/// One landing event (see `landing`'s diagram). The lock goes when the base branch's CI is
/// green for the landed commit; a conflict or a refusal keeps it, with an alert. A revert's
/// events, and the base's moves and CI while it reverts, are the revert's.
pub(super) fn step(p: &mut Progress, worker: &str, e: &LandEvent, now: i64, fx: &mut Vec<Effect>) {
    let Some(l) = p.landing.as_mut() else {
        return;
    };
    let before = l.state;
    match e {
        LandEvent::RevertBuilt { .. } | LandEvent::RevertMoved { .. } => {
            revert::on_revert(l, worker, e, fx)
        }
        LandEvent::Lost { .. } | LandEvent::Verdict { .. } if l.state == LandState::Reverting => {
            revert::on_revert(l, worker, e, fx)
        }
        LandEvent::OnBase { .. }
        | LandEvent::Moved { .. }
        | LandEvent::Built { .. }
        | LandEvent::Lost { .. }
        | LandEvent::PullOpened { .. }
        | LandEvent::Refused { .. }
        | LandEvent::Conflict { .. } => moves::on_move(l, worker, e, now, fx),
        LandEvent::CheckStarted { .. } | LandEvent::CheckVerdict { .. } => {
            downstream::on_check(l, worker, e, fx)
        }
        LandEvent::Verdict { .. } => verify::on_verdict(l, worker, e, fx),
    }
    if l.state != before {
        fx.push(Effect::Landing {
            from: before,
            to: l.state,
            detail: l.detail.clone().unwrap_or_default(),
        });
        fx.push(Effect::Checkpoint);
    }
}

/// What happened last, in words, for the landing's note and its `Landing` effect.
fn note(l: &mut Landing, detail: String) {
    l.detail = Some(detail);
}

/// What made a verdict red, for the words of a note or an alert: its failed jobs, or the
/// verdict's detail when no job is named.
fn red_jobs(failed_jobs: &[String], detail: &str) -> String {
    if failed_jobs.is_empty() {
        detail.to_string()
    } else {
        failed_jobs.join(", ")
    }
}
