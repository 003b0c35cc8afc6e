//! The clocks: the worker's whole-life cap, its milestone's timeout (warned, extended once,
//! CI restarted once, then escalated), and the deadlock indicators.

use super::super::{Effect, Milestone, Progress, Severity};
use super::{alert, fail, fail_then, fix_timeout};
use crate::ci::verdict::VerdictKind;
use crate::contract::{Contract, OnTimeout};

/// What orch does when `p`'s milestone times out, for alert messages.
fn at_timeout(contract: &Contract, p: &Progress) -> String {
    let Some(spec) = contract.timeouts.get(p.milestone.as_str()) else {
        return "nothing (no timeout for this milestone)".into();
    };
    let window = crate::duration::format(contract.progress_window);
    let reassign = spec.on_timeout == OnTimeout::Reassign || p.reassign_on_timeout;
    let end = if reassign {
        "stops its processes (FAILED) and reassigns its task to a new worker, the lock handed over"
    } else if fix_timeout::counts_attempts(spec, p, reassign) {
        "counts this fix attempt as failed and the next one begins (FAILED, the lock kept for an operator, once the attempts are exhausted)"
    } else {
        "stops its processes and marks it FAILED, keeping the lock for an operator"
    };
    match (spec.on_timeout, p.extended) {
        (_, true) => format!("at the extended timeout orch {end}"),
        (OnTimeout::CheckCiThenEscalate, false) => format!(
            "at the timeout orch checks CI first (still running: extended once; stuck — no runner took it up, or running past that — restarted once, then {end}), else extends once on progress in the last {window}, else {end}"
        ),
        (_, false) => format!(
            "at the timeout orch extends once if it made progress in the last {window}, else {end}"
        ),
    }
}

fn fmt_left(ms: i64) -> String {
    crate::duration::format(std::time::Duration::from_millis(ms.max(1000) as u64))
}

/// The deadlock indicators: each one raised is an alert (the journal de-duplicates repeats
/// within the window); what then happens to the worker is its milestone's timeout.
#[allow(clippy::too_many_arguments)]
pub(super) fn deadlock(
    contract: &Contract,
    p: &mut Progress,
    worker: &str,
    worker_running: bool,
    last_commit_ms: Option<i64>,
    forge_failures: u32,
    now: i64,
    fx: &mut Vec<Effect>,
) {
    let d = &contract.deadlock;
    let ms = |x: std::time::Duration| x.as_millis() as i64;
    let next = at_timeout(contract, p);
    let m = p.milestone;
    let mut held: Vec<String> = Vec::new();
    let mut raise = |kind: &str, what: String| {
        held.push(indicator(kind).to_string());
        fx.push(alert(
            Severity::Warning,
            kind,
            format!("worker {worker} in {m}: {what}; {next}"),
        ));
    };
    let at_work = matches!(m, Milestone::Working | Milestone::FixingCi);
    if at_work && worker_running && now - p.last_progress_ms >= ms(d.worker_idle) {
        raise(
            "deadlock_idle",
            format!(
                "no output for {} (worker_idle {})",
                fmt_left(now - p.last_progress_ms),
                crate::duration::format(d.worker_idle)
            ),
        );
    }
    if m == Milestone::Working
        && last_commit_ms.is_none_or(|c| c < p.since_ms)
        && now - p.since_ms >= ms(d.no_commit_after_working)
    {
        raise(
            "deadlock_no_commit",
            format!(
                "no commit {} after WORKING (no_commit_after_working {})",
                fmt_left(now - p.since_ms),
                crate::duration::format(d.no_commit_after_working)
            ),
        );
    }
    if m == Milestone::PushedToCi
        && matches!(
            p.verdict,
            None | Some(VerdictKind::Pending) | Some(VerdictKind::NoRun)
        )
        && let (Some(pushed), Some(spec)) = (p.pushed_ms, contract.timeouts.get(m.as_str()))
    {
        let allowed = spec.warning_at.unwrap_or(spec.timeout);
        if now - pushed >= ms(allowed) {
            raise(
                "deadlock_ci_waiting",
                format!(
                    "CI for {} has been waiting {} (more than {})",
                    p.tracked_sha.as_ref().map(|s| s.short()).unwrap_or("-"),
                    fmt_left(now - pushed),
                    crate::duration::format(allowed)
                ),
            );
        }
    }
    if forge_failures > d.api_consecutive_failures {
        raise(
            "deadlock_api_errors",
            format!(
                "{forge_failures} forge requests failed in a row (more than {})",
                d.api_consecutive_failures
            ),
        );
    }
    p.deadlock = held;
}

/// The contract's name of the deadlock indicator an alert `kind` raises.
fn indicator(kind: &str) -> &'static str {
    match kind {
        "deadlock_idle" => "worker_idle",
        "deadlock_no_commit" => "no_commits",
        "deadlock_ci_waiting" => "ci_stuck_in_pending",
        _ => "api_errors",
    }
}

/// Why CI for the tracked commit counts as stuck at a PUSHED_TO_CI timeout (`None`: it
/// finished, or nothing was pushed): no runner took its jobs up in the whole timeout
/// (pending, or no run at all), or it is still running after the extension it had.
fn ci_stuck(p: &Progress) -> Option<String> {
    if p.milestone != Milestone::PushedToCi || p.tracked_sha.is_none() {
        return None;
    }
    match p.verdict {
        None | Some(VerdictKind::Pending) => {
            Some("waiting: no runner has taken its jobs up".into())
        }
        Some(VerdictKind::NoRun) => Some("no push-triggered run appeared".into()),
        Some(VerdictKind::Running) => Some(match past_limit(p) {
            Some(jobs) => format!(
                "{} running past its own time limit: the runner is stuck",
                jobs.join(", ")
            ),
            None => "still running past the time CI was given, extension included".into(),
        }),
        Some(_) => None,
    }
}

/// The tracked commit's jobs running past their own time limit (where the forge tells it).
fn past_limit(p: &Progress) -> Option<&[String]> {
    p.ci_jobs
        .as_ref()
        .map(|t| t.past_limit.as_slice())
        .filter(|j| !j.is_empty())
}

pub(super) fn tick(
    contract: &Contract,
    p: &mut Progress,
    worker: &str,
    now: i64,
    fx: &mut Vec<Effect>,
) {
    let cap = contract.default_worker_timeout.as_millis() as i64;
    if p.milestone.at_work() && p.life.at(now) >= cap {
        // `default_worker_timeout` caps the worker's whole life. A timeout's action is
        // `escalate` (the cspec's on_timeout_actions: notify, then extend_if_active /
        // terminate_if_stuck / reassign_task). The extension is the milestone timers' (each
        // extends once on recent progress); this cap is what bounds them all, so it is not
        // extended — a worker that always looks busy would never end. It ends as a milestone
        // timeout does, FAILED — the contract's state for "timeouts exhausted" — its
        // processes stopped and its lock kept for an operator, with a critical alert.
        let milestone = p.milestone;
        let why = format!(
            "worker timeout: {} at work in all (default_worker_timeout {}), now in {milestone}",
            fmt_left(p.life.at(now)),
            crate::duration::format(contract.default_worker_timeout)
        );
        fail(contract, p, worker, &why, "worker_timeout", now, fx);
        return;
    }
    let Some(spec) = contract.timeouts.get(p.milestone.as_str()) else {
        return;
    };
    let Some(deadline) = p.deadline_ms else {
        return;
    };
    if let Some(w) = spec.warning_at
        && !p.warned
        && now >= p.since_ms + w.as_millis() as i64
    {
        p.warned = true;
        fx.push(alert(
            Severity::Warning,
            "timeout_warning",
            format!(
                "worker {worker} has been in {} for {} (timeout {}): {}",
                p.milestone,
                crate::duration::format(w),
                crate::duration::format(spec.timeout),
                at_timeout(contract, p)
            ),
        ));
    }
    if now < deadline {
        return;
    }
    let recent_progress = now - p.last_progress_ms <= contract.progress_window.as_millis() as i64;
    let check_ci = spec.on_timeout == OnTimeout::CheckCiThenEscalate;
    // A job past its own limit is not "still running": its runner is stuck.
    let ci_still_going =
        check_ci && p.verdict == Some(VerdictKind::Running) && past_limit(p).is_none();
    // `check_ci_then_escalate`: CI still running gets the extension first; CI that is stuck
    // — still waiting for a runner at the timeout, or still running past the extension —
    // is restarted once (`if_ci_stuck: restart_ci_and_wait`), then the timeout escalates.
    let extension_due = ci_still_going && !p.extended;
    if check_ci
        && !extension_due
        && let Some(stuck) = ci_stuck(p)
    {
        if p.ci_restarts == 0
            && let Some(sha) = p.tracked_sha.clone()
        {
            p.ci_restarts += 1;
            p.extended = true;
            p.deadline_ms = Some(now + spec.timeout.as_millis() as i64);
            fx.push(Effect::RestartCi {
                sha: sha.clone(),
                why: stuck.clone(),
            });
            fx.push(alert(
                Severity::Warning,
                "ci_restarted",
                format!(
                    "worker {worker}: CI for {} is stuck ({stuck}) at the {} timeout: orch restarts it once and waits {}; still stuck then, it escalates",
                    sha.short(),
                    p.milestone,
                    crate::duration::format(spec.timeout)
                ),
            ));
            fx.push(Effect::Checkpoint);
            return;
        }
        let milestone = p.milestone;
        let why = format!("timeout in {milestone}: CI stuck ({stuck}) after one restart");
        fail(contract, p, worker, &why, "ci_stuck", now, fx);
        p.end_reason = Some(why);
        return;
    }
    if !p.extended && (recent_progress || ci_still_going) {
        p.extended = true;
        p.deadline_ms = Some(deadline + spec.timeout.as_millis() as i64);
        let why = if ci_still_going {
            "CI still running"
        } else {
            "progress in the last window"
        };
        fx.push(alert(
            Severity::Info,
            "timeout_extended",
            format!(
                "worker {worker}: {} timeout extended once ({why})",
                p.milestone
            ),
        ));
        fx.push(Effect::Checkpoint);
        return;
    }
    let milestone = p.milestone;
    let reassign = spec.on_timeout == OnTimeout::Reassign || p.reassign_on_timeout;
    if fix_timeout::counts_attempts(spec, p, reassign) {
        fix_timeout::attempt_timed_out(contract, p, worker, spec, now, fx);
        return;
    }
    let why = format!("timeout in {milestone}");
    if reassign {
        // The task is not left for an operator: the critical alert says where it goes.
        let next = format!(
            "orch stops its processes and hands its task and chain lock to a new worker told its checkpoint (within worker.max_respawns; past it, or when the chain cannot be handed over, the lock waits for an operator: `orch respawn {worker}`)"
        );
        fail_then(contract, p, worker, &why, "timeout", &next, now, fx);
    } else {
        fail(contract, p, worker, &why, "timeout", now, fx);
    }
    p.end_reason = Some("timeout".into());
    if reassign && p.milestone == Milestone::Failed {
        // After the stop (effects are carried out in order): the lock is handed over only
        // once no process of this worker is left.
        fx.push(alert(
            Severity::Warning,
            "timeout_reassign",
            format!(
                "worker {worker} timed out in {milestone}: its task goes to a new worker told its checkpoint, the chain lock handed over (within worker.max_respawns)"
            ),
        ));
        fx.push(Effect::Reassign);
    }
}
