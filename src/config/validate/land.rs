//! `land:` (the organisation's and each repository's) and `downstream:`: how a green change
//! reaches its base branch, and what is checked below it afterwards.

use super::Check;
use crate::config::raw::{RawDownstream, RawLand, pos};
use crate::config::{
    DownstreamConfig, ForgeKind, LandConfig, LandMethod, LandPolicy, OnBreakage, OnConflict,
};

/// One `land:` mapping over `base` (the defaults, or the organisation's for a repository).
pub(super) fn validate_land(
    c: &mut Check,
    at: &str,
    raw: &RawLand,
    base: LandConfig,
    forge: ForgeKind,
) -> LandConfig {
    let mut land = base;
    if let Some(p) = &raw.policy {
        match p.value.as_str() {
            "merge" => land.policy = LandPolicy::Merge,
            "none" => land.policy = LandPolicy::None,
            "pull_request" if forge == ForgeKind::Forgejo => {
                land.policy = LandPolicy::PullRequest
            }
            "pull_request" => c.err(
                pos(p),
                format!(
                    "{at}.policy pull_request needs forge.kind: forgejo (the local forge has no pull requests; use merge)"
                ),
            ),
            "direct" => land.policy = LandPolicy::Direct,
            other => c.err(
                pos(p),
                format!("{at}.policy must be merge, pull_request, direct or none, got \"{other}\""),
            ),
        }
    }
    if let Some(m) = &raw.method {
        match m.value.as_str() {
            "merge" => land.method = LandMethod::Merge,
            "rebase" => land.method = LandMethod::Rebase,
            "squash" => land.method = LandMethod::Squash,
            other => c.err(
                pos(m),
                format!("{at}.method must be merge, rebase or squash, got \"{other}\""),
            ),
        }
    }
    if raw.max_attempts.is_some() {
        land.max_attempts = c.positive(&format!("{at}.max_attempts"), &raw.max_attempts, 3) as u32;
    }
    if let Some(o) = &raw.on_conflict {
        match o.value.as_str() {
            "block" => land.on_conflict = OnConflict::Block,
            "fix" => land.on_conflict = OnConflict::Fix,
            other => c.err(
                pos(o),
                format!(
                    "{at}.on_conflict must be block (a person integrates, the lock kept, an alert) or fix (a replacement worker redoes the change on the base), got \"{other}\""
                ),
            ),
        }
    }
    land
}

pub(super) fn validate_downstream(c: &mut Check, raw: &RawDownstream) -> DownstreamConfig {
    let mut d = DownstreamConfig::default();
    if let Some(v) = &raw.depth {
        if v.value < 0 {
            c.err(
                pos(v),
                format!(
                    "downstream.depth must be 0 (no check) or more, got {}",
                    v.value
                ),
            );
        } else {
            d.depth = v.value as u32;
        }
    }
    if let Some(o) = &raw.on_breakage {
        match o.value.as_str() {
            "hold" => d.on_breakage = OnBreakage::Hold,
            "fix" => d.on_breakage = OnBreakage::Fix,
            "revert" => d.on_breakage = OnBreakage::Revert,
            other => c.err(
                pos(o),
                format!("downstream.on_breakage must be hold, fix or revert, got \"{other}\""),
            ),
        }
    }
    d
}
