//! `escalate_after_max_attempts`, FIXING_CI's `on_timeout`: its timeout is per fix attempt
//! (the contract's "15m # Per fix attempt", `max_attempts: 5`). An attempt that runs out is a
//! failed attempt, counted as one CI finds red is; the worker goes on with the next, its clock
//! anew, and escalates — FAILED, `attempts_exhausted`, its lock kept — only once they are
//! exhausted. (A plain `escalate` would end it at the first.)

use super::super::{Effect, FixRed, Milestone, Progress, Severity};
use super::{alert, escalate_if_due, fail};
use crate::contract::{Contract, MilestoneTimeout, OnTimeout};

/// Whether a timeout of `p`'s milestone counts a fix attempt rather than escalating at once.
/// A worker whose timeout reassigns its task (`reassign`: a wave's critical path) is
/// reassigned as before.
pub(super) fn counts_attempts(spec: &MilestoneTimeout, p: &Progress, reassign: bool) -> bool {
    spec.on_timeout == OnTimeout::EscalateAfterMaxAttempts
        && p.milestone == Milestone::FixingCi
        && !reassign
}

/// The current fix attempt of `p` (in FIXING_CI) ran out of time: counted as failed, and the
/// next one begins (or the worker is FAILED when that was the last).
pub(super) fn attempt_timed_out(
    contract: &Contract,
    p: &mut Progress,
    worker: &str,
    spec: &MilestoneTimeout,
    now: i64,
    fx: &mut Vec<Effect>,
) {
    let max = contract.fixing_ci_max_attempts;
    let spent = crate::duration::format(std::time::Duration::from_millis(
        (now - p.since_ms).max(0) as u64,
    ));
    let failed = p.fix_attempts;
    p.fix_reds.push(FixRed {
        sha: p
            .tracked_sha
            .as_ref()
            .map_or("-", |s| s.short())
            .to_string(),
        jobs: Vec::new(),
        timed_out: true,
    });
    p.fix_attempts += 1;
    if p.fix_attempts > max {
        let why = format!(
            "FIXING_CI attempts exhausted ({max}): fix attempt {failed}/{max} timed out after {spent}"
        );
        fail(contract, p, worker, &why, "attempts_exhausted", now, fx);
        return;
    }
    // The next attempt's own clock (FIXING_CI's timeout is per attempt); the milestone and
    // everything else stay.
    p.since_ms = now;
    p.deadline_ms = Some(now + spec.timeout.as_millis() as i64);
    p.extended = false;
    p.warned = false;
    p.last_progress_ms = now;
    fx.push(alert(
        Severity::Warning,
        "fix_attempt_timed_out",
        format!(
            "worker {worker}: fix attempt {failed}/{max} timed out after {spent} (FIXING_CI {} per attempt); attempt {}/{max} begins — FAILED after {max} failed attempts",
            crate::duration::format(spec.timeout),
            p.fix_attempts
        ),
    ));
    escalate_if_due(contract, p, worker, fx);
    fx.push(Effect::Checkpoint);
}
