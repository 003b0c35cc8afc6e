//! CI's verdicts on the tracked commit, and the fix attempts a red one starts.

use super::super::{Effect, Event, Milestone, Progress, Severity};
use super::done::finish_done;
use super::{alert, fail, transition};
use crate::ci::verdict::VerdictKind;
use crate::contract::Contract;

pub(super) fn on_verdict(
    contract: &Contract,
    p: &mut Progress,
    worker: &str,
    event: &Event,
    now: i64,
    fx: &mut Vec<Effect>,
) {
    // Any other event is another family's: `apply` dispatches by family.
    let Event::Verdict {
        sha,
        kind,
        failed_jobs,
        detail,
        jobs,
    } = event
    else {
        return;
    };
    if p.tracked_sha.as_ref() != Some(sha) {
        return; // an old SHA: forgotten once a new one was pushed
    }
    if jobs.is_some() {
        p.ci_jobs = jobs.clone();
    }
    let changed = p.verdict != Some(*kind);
    p.verdict = Some(*kind);
    p.failed_jobs = failed_jobs.clone();
    p.verdict_detail = Some(detail.clone());
    if changed {
        fx.push(Effect::Checkpoint);
    }
    // A worker that claimed FIXING_CI before CI's verdict: its attempt's red is
    // known now.
    if p.milestone == Milestone::FixingCi
        && *kind == VerdictKind::Red
        && let Some(last) = p.fix_reds.last_mut()
        && last.jobs.is_empty()
        && !last.timed_out
        && last.sha == sha.short()
    {
        last.jobs = failed_jobs.clone();
        escalate_if_due(contract, p, worker, fx);
    }
    // A worker in FIXING_CI whose tracked commit turns out green (its FIXING_CI came
    // while CI was still running, or a rerun passed): nothing is left to fix.
    if p.milestone == Milestone::FixingCi && *kind == VerdictKind::Green {
        transition(
            contract,
            p,
            Milestone::PushedToCi,
            &format!("CI green for {} after all", sha.short()),
            now,
            fx,
        );
    }
    if p.milestone == Milestone::PushedToCi {
        match kind {
            // DONE needs the worker's word as well as CI's: a green head while the
            // worker works on is verified, not finished (multi-step work goes on).
            VerdictKind::Green if p.turn_ended => finish_done(contract, p, worker, now, fx),
            VerdictKind::Green if changed => {
                // The worker works on past a verified push: its clock is a working
                // one from here (WORKING's timeout), not CI's.
                if let Some(t) = contract.timeouts.get(Milestone::Working.as_str()) {
                    p.deadline_ms = Some(now + t.timeout.as_millis() as i64);
                    p.extended = false;
                    p.warned = false;
                }
            }
            VerdictKind::Green => {}
            VerdictKind::Red => {
                let why = format!("CI red: {}", failed_jobs.join(", "));
                let moved = transition(contract, p, Milestone::FixingCi, &why, now, fx);
                if moved {
                    count_fix_attempt(contract, p, worker, now, fx);
                }
            }
            VerdictKind::SyncNotDone if changed => fx.push(alert(
                Severity::Warning,
                "sync_not_done",
                format!(
                    "worker {worker}: {} — not DONE until a new push succeeds",
                    detail
                ),
            )),
            VerdictKind::NoRun if changed => fx.push(alert(
                Severity::Critical,
                "no_run",
                format!(
                    "worker {worker}: no push-triggered CI run appeared for {}",
                    sha.short()
                ),
            )),
            _ => {}
        }
    }
}

pub(super) fn count_fix_attempt(
    contract: &Contract,
    p: &mut Progress,
    worker: &str,
    now: i64,
    fx: &mut Vec<Effect>,
) {
    p.fix_attempts += 1;
    p.fix_reds.push(super::super::FixRed {
        sha: p
            .tracked_sha
            .as_ref()
            .map_or("-", |s| s.short())
            .to_string(),
        jobs: p.failed_jobs.clone(),
        timed_out: false,
    });
    let max = contract.fixing_ci_max_attempts;
    // The timeline (`orch logs`) says which attempt this is, as `status` does.
    if let Some(Effect::Transition {
        to: Milestone::FixingCi,
        reason,
        ..
    }) = fx
        .iter_mut()
        .rev()
        .find(|e| matches!(e, Effect::Transition { .. }))
    {
        reason.push_str(&format!(" (fix attempt {}/{max})", p.fix_attempts));
    }
    if !p.failed_jobs.is_empty() {
        escalate_if_due(contract, p, worker, fx);
    }
    if p.fix_attempts > max {
        fail(
            contract,
            p,
            worker,
            &format!("FIXING_CI attempts exhausted ({max})"),
            "attempts_exhausted",
            now,
            fx,
        );
    }
}

/// `recoverable.escalate_after`: people hear of a worker that keeps failing before its
/// attempts run out (FAILED after `fixing_ci_max_attempts`), once; the worker goes on fixing.
/// The first entry into FIXING_CI is the original push's red; each later one is a fix
/// attempt (FIXING_CI → PUSHED_TO_CI → red again) that failed. Raised once the red is known
/// (a worker's FIXING_CI claim may come before CI's verdict): the alert names every failed
/// attempt's commit and jobs.
pub(super) fn escalate_if_due(
    contract: &Contract,
    p: &mut Progress,
    worker: &str,
    fx: &mut Vec<Effect>,
) {
    let failed = p.fix_attempts.saturating_sub(1);
    let max = contract.fixing_ci_max_attempts;
    if p.escalated || failed < contract.escalate_after || failed >= max {
        return;
    }
    p.escalated = true;
    let attempts: Vec<String> = p
        .fix_reds
        .iter()
        .skip(1)
        .enumerate()
        .map(|(i, r)| format!("attempt {}: {r}", i + 1))
        .collect();
    fx.push(alert(
        Severity::Warning,
        "fix_attempts_escalated",
        format!(
            "worker {worker}: {failed} fix attempts failed (escalate_after {}) — {}; it goes on fixing, FAILED after {max} failed attempts — look at `orch logs {worker}`, or `orch cancel {worker}`",
            contract.escalate_after,
            attempts.join("; ")
        ),
    ));
}
