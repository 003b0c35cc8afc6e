//! Views of chain locks: `can-spawn`, `hold`, `unhold`, and the locks `status` lists.

use super::{View, at, secs_between};
use crate::lock::{Blocker, ChainLock, HolderKind};
use schemars::JsonSchema;
use serde::Serialize;

/// An active chain lock.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct LockView {
    pub repo: String,
    /// `hold:<name>` for operator holds, the worker id for workers.
    pub holder: String,
    pub kind: HolderKind,
    pub reason: Option<String>,
    pub by: Option<String>,
    #[schemars(extend("format" = "date-time"))]
    pub acquired_at: String,
    /// Seconds since it was taken.
    pub age_s: u64,
}

impl LockView {
    pub fn of(l: &ChainLock, now_ms: i64) -> Self {
        LockView {
            repo: l.repo.clone(),
            holder: l.holder.clone(),
            kind: l.kind,
            reason: l.reason.clone(),
            by: l.by.clone(),
            acquired_at: at(l.acquired_ms),
            age_s: secs_between(l.acquired_ms, now_ms),
        }
    }
}

/// How a locked repository relates to the one asked about.
#[derive(Debug, Clone, Copy, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Relation {
    Itself,
    Dependency,
    Dependent,
    /// The locked repository is not in repos.yaml any more: it blocks everything.
    Unknown,
    /// The lock's worker works in the clone repos.yaml now names the repository asked about.
    #[serde(rename = "same_clone")]
    SameClone,
}

/// What stops a worker from starting.
#[derive(Debug, Clone, Copy, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum BlockerKind {
    /// An operator's freeze (`orch hold`).
    Hold,
    /// A worker; released on verified DONE, cancel, or a forced release.
    Worker,
    /// The base branch of a repository it depends on is red (cascade): `spawn` refuses until
    /// it is green.
    UpstreamRed,
}

impl From<HolderKind> for BlockerKind {
    fn from(k: HolderKind) -> Self {
        match k {
            HolderKind::Hold => BlockerKind::Hold,
            HolderKind::Worker => BlockerKind::Worker,
        }
    }
}

/// What stops a worker from starting on the repository asked about: an active lock, or (for
/// `can-spawn`) a red upstream.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct BlockerView {
    /// The locked repository (`upstream_red`: the red one).
    pub repo: String,
    /// The lock's holder (`hold:<name>` or a worker id); `upstream_red`: the red commit at the
    /// head of its base branch.
    pub holder: String,
    pub kind: BlockerKind,
    pub relation: Relation,
    /// "alphavm is held by hold:release-1.2 — a dependency of adnet".
    pub text: String,
}

impl BlockerView {
    pub fn of(b: &Blocker, asked: &str) -> Self {
        use crate::graph::Relation as R;
        BlockerView {
            repo: b.repo.clone(),
            holder: b.holder.clone(),
            kind: b.kind.into(),
            relation: match b.relation {
                R::Itself => Relation::Itself,
                R::Dependency => Relation::Dependency,
                R::Dependent => Relation::Dependent,
                R::Unknown => Relation::Unknown,
                R::SameClone => Relation::SameClone,
            },
            text: b.describe(asked),
        }
    }

    pub fn all(bs: &[Blocker], asked: &str) -> Vec<Self> {
        bs.iter().map(|b| BlockerView::of(b, asked)).collect()
    }

    /// A red upstream of `asked` (cascade), said as `spawn` refuses it.
    pub fn upstream_red(red: &crate::store::upstream::UpstreamRow, asked: &str) -> Self {
        BlockerView {
            repo: red.repo.clone(),
            holder: red.sha.clone().unwrap_or_else(|| red.branch.clone()),
            kind: BlockerKind::UpstreamRed,
            relation: Relation::Dependency,
            text: format!(
                "{} — a dependency of {asked}: workers below a red repository do not start until it is green",
                crate::app::cascade::reason(red)
            ),
        }
    }
}

/// `orch can-spawn --json`.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct CanSpawnView {
    pub repo: String,
    pub can_spawn: bool,
    pub blockers: Vec<BlockerView>,
}

impl View for CanSpawnView {
    const NAME: &'static str = "can-spawn";
}

impl CanSpawnView {
    pub fn human(&self) -> String {
        if self.can_spawn {
            return format!("yes: a worker can start on {} now\n", self.repo);
        }
        let mut out = format!("no: a worker cannot start on {} now\n", self.repo);
        for b in &self.blockers {
            out.push_str(&format!("  {}\n", b.text));
        }
        out
    }
}

/// `orch hold --json`: the lock taken, or what stopped it.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct HoldView {
    pub held: bool,
    pub repo: String,
    pub lock: Option<LockView>,
    /// The repositories the hold covers besides `repo` (its chain).
    pub chain: Vec<String>,
    pub blockers: Vec<BlockerView>,
}

impl View for HoldView {
    const NAME: &'static str = "hold";
}

impl HoldView {
    pub fn human(&self) -> String {
        match &self.lock {
            Some(lock) => format!(
                "held: {} and its chain ({}) by {}: {}\n",
                self.repo,
                if self.chain.is_empty() {
                    "no other repositories".to_string()
                } else {
                    self.chain.join(", ")
                },
                lock.holder,
                lock.reason.as_deref().unwrap_or("")
            ),
            None => {
                let mut out = format!("not held: {}'s chain is busy\n", self.repo);
                for b in &self.blockers {
                    out.push_str(&format!("  {}\n", b.text));
                }
                out
            }
        }
    }
}

/// `orch unhold --json`: the hold released.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct UnholdView {
    pub released: bool,
    pub repo: String,
    pub lock: LockView,
}

impl View for UnholdView {
    const NAME: &'static str = "unhold";
}

impl UnholdView {
    pub fn human(&self) -> String {
        format!(
            "released: {} (held by {} since {})\n",
            self.repo, self.lock.holder, self.lock.acquired_at
        )
    }
}

/// A fatal hold as `orch fatal` and `orch status` show it.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct FatalHoldView {
    /// The repository whose chain is halted.
    pub repo: String,
    pub reason: String,
    /// Who reported it: an operator, `worker <id>`, or `orch` (a secret in a pushed diff).
    pub by: String,
    pub worker_id: Option<String>,
    pub at: String,
}

impl FatalHoldView {
    pub fn of(h: &crate::store::fatal::FatalHold) -> Self {
        FatalHoldView {
            repo: h.repo.clone(),
            reason: h.reason.clone(),
            by: h.by.clone(),
            worker_id: h.worker_id.clone(),
            at: super::at(h.at_ms),
        }
    }
}

/// A change the halted chain landed, and the commands that revert it (orch runs none).
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct LandedChangeView {
    pub worker_id: String,
    pub repo: String,
    pub branch: String,
    /// The base head before the change, and the commit it was moved to.
    pub from: String,
    pub landed: String,
    pub moved_at: String,
    pub revert: String,
}

/// One hold over the chain asked about.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct FatalShownView {
    pub hold: FatalHoldView,
    /// This command took it (false: it stood already).
    pub new: bool,
    /// The live workers it stops.
    pub stopped: Vec<String>,
    pub landed: Vec<LandedChangeView>,
}

/// A cleared hold: who cleared it and when.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct FatalClearedView {
    pub hold: FatalHoldView,
    pub cleared_by: String,
    pub cleared_at: String,
}

/// `orch fatal --json`: the holds over the chain (the one taken, with --reason), or the one
/// cleared (with --clear) and the workers handed to new supervisors; with neither standing,
/// the last one cleared on the chain.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct FatalView {
    /// The repository (or the worker's) the command named.
    pub repo: String,
    pub action: FatalAction,
    pub holds: Vec<FatalShownView>,
    /// Cleared by this command, or (with no hold standing) the last cleared on the chain.
    pub cleared: Option<FatalClearedView>,
    /// Workers no supervisor looked after, handed to new ones by this clearing.
    pub handed: Vec<String>,
}

/// What `orch fatal` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum FatalAction {
    /// `--reason`: a hold taken (or found standing).
    Raised,
    /// Neither flag: the holds over the chain shown.
    Shown,
    /// `--clear`: the hold ended.
    Cleared,
}

impl View for FatalView {
    const NAME: &'static str = "fatal";
}

impl FatalShownView {
    pub fn of(s: &crate::app::fatal::Shown) -> Self {
        FatalShownView {
            hold: FatalHoldView::of(&s.hold),
            new: s.new,
            stopped: s.workers.clone(),
            landed: s
                .landed
                .iter()
                .map(|c| LandedChangeView {
                    worker_id: c.worker.clone(),
                    repo: c.repo.clone(),
                    branch: c.branch.clone(),
                    from: c.from.clone(),
                    landed: c.landed.clone(),
                    moved_at: super::at(c.moved_ms),
                    revert: c.revert.clone(),
                })
                .collect(),
        }
    }
}

impl FatalClearedView {
    pub fn of(c: &crate::store::fatal::ClearedHold) -> Self {
        FatalClearedView {
            hold: FatalHoldView::of(&c.hold),
            cleared_by: c.cleared_by.clone(),
            cleared_at: super::at(c.cleared_ms),
        }
    }
}

impl FatalView {
    pub fn human(&self) -> String {
        let esc = |s: &str| crate::text::escape(s).into_owned();
        let cleared_line = |c: &FatalClearedView| {
            let h = &c.hold;
            format!(
                "FATAL on {}'s chain by {} at {} ({}) cleared by {} at {}",
                h.repo,
                esc(&h.by),
                h.at,
                esc(&h.reason),
                esc(&c.cleared_by),
                c.cleared_at
            )
        };
        let mut out = String::new();
        if self.action == FatalAction::Cleared
            && let Some(c) = &self.cleared
        {
            out.push_str(&format!("{}; its workers go on\n", cleared_line(c)));
            if !self.handed.is_empty() {
                out.push_str(&format!(
                    "handed to new supervisors: {}\n",
                    self.handed.join(", ")
                ));
            }
            return out;
        }
        if self.holds.is_empty() {
            out.push_str(&format!("{}: no FATAL over its chain\n", self.repo));
            if let Some(c) = &self.cleared {
                out.push_str(&format!("the last: {}\n", cleared_line(c)));
            }
            return out;
        }
        for s in &self.holds {
            let h = &s.hold;
            out.push_str(&format!(
                "FATAL on {}'s chain{} by {} at {}: {}\n",
                h.repo,
                if s.new { "" } else { " (standing)" },
                esc(&h.by),
                h.at,
                esc(&h.reason)
            ));
            out.push_str(&format!(
                "  stopped: {}\n",
                if s.stopped.is_empty() {
                    "no live worker".to_string()
                } else {
                    s.stopped.join(", ")
                }
            ));
            if s.landed.is_empty() {
                out.push_str("  landed since its task began: nothing\n");
            } else {
                out.push_str(
                    "  landed since its task began (orch reverts nothing on its own; to revert by hand):\n",
                );
                for c in &s.landed {
                    out.push_str(&format!(
                        "    {} on {} {} by {}: {}\n",
                        crate::sha::short(&c.landed),
                        c.repo,
                        c.branch,
                        c.worker_id,
                        c.revert
                    ));
                }
            }
            out.push_str(&format!("  clear it with: orch fatal --clear {}\n", h.repo));
        }
        out
    }
}
