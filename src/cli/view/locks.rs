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
