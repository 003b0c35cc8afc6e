//! `step`: the transition function of the worker state machine. Pure: the same contract,
//! state, event and time always give the same state and effects.

use super::{Effect, Event, LandEvent, LandState, Milestone, Progress, Severity};
use crate::ci::verdict::VerdictKind;
use crate::config::LandPolicy;
use crate::contract::{Contract, OnTimeout};

mod fix_timeout;

fn violation(kind: &str, detail: String) -> Effect {
    Effect::Violation {
        kind: kind.to_string(),
        detail,
    }
}

fn alert(severity: Severity, kind: &str, message: String) -> Effect {
    Effect::alert(severity, kind, message)
}

/// Moves `p` to `to` if the contract allows it; otherwise records an illegal transition.
pub(super) fn transition(
    contract: &Contract,
    p: &mut Progress,
    to: Milestone,
    reason: &str,
    now: i64,
    fx: &mut Vec<Effect>,
) -> bool {
    let from = p.milestone;
    if !contract.allows(from.as_str(), to.as_str()) {
        fx.push(violation(
            "illegal_transition",
            format!("{from} -> {to} is not allowed by the contract ({reason})"),
        ));
        return false;
    }
    if to == Milestone::Paused {
        p.paused_from = Some(from);
    }
    if from == to {
        // A repeated milestone (progress note, new push) keeps its clock.
        p.last_progress_ms = now;
    } else {
        p.enter(contract, to, now);
        fx.push(Effect::Transition {
            from,
            to,
            reason: reason.to_string(),
        });
        fx.push(Effect::Checkpoint);
    }
    true
}

/// Applies one event. Pure: same inputs, same outputs.
pub fn step(
    contract: &Contract,
    worker: &str,
    state: &Progress,
    event: &Event,
    now: i64,
) -> (Progress, Vec<Effect>) {
    let (mut p, fx) = apply(contract, worker, state, event, now);
    // The whole-life clock runs in the states at work and stands still in the others,
    // whichever event moved the worker between them.
    p.life.follow(p.milestone.at_work(), now);
    (p, fx)
}

fn apply(
    contract: &Contract,
    worker: &str,
    state: &Progress,
    event: &Event,
    now: i64,
) -> (Progress, Vec<Effect>) {
    let mut p = state.clone();
    let mut fx = Vec::new();
    if let Event::Land(e) = event {
        // Landing goes on after DONE (the one terminal state with work left for orch).
        if p.landing_active()
            || (p.milestone == Milestone::Done && matches!(e, LandEvent::OnBase { .. }))
        {
            super::landing::step(&mut p, worker, e, now, &mut fx);
        }
        return (p, fx);
    }
    // The worker's account of its work moves nothing, and may come with (or just after) the
    // DONE orch already saw: kept in any state.
    match event {
        Event::Summary { text } => {
            p.summary = Some(text.clone());
            return (p, fx);
        }
        Event::Decision { text } => {
            if !p.decisions.contains(text) && p.decisions.len() < super::MAX_DECISIONS {
                p.decisions.push(text.clone());
            }
            return (p, fx);
        }
        _ => {}
    }
    if let Event::DoneBranchMoved { done, head } = event {
        done_branch_moved(contract, &mut p, worker, done, head.as_ref(), now, &mut fx);
        return (p, fx);
    }
    if p.milestone.is_terminal() {
        // Nothing moves a finished worker; say so when a worker keeps talking.
        if let Event::Claim { .. }
        | Event::Push { .. }
        | Event::DoneClaim { .. }
        | Event::DoneRefused { .. } = event
            && p.milestone != Milestone::Done
        {
            fx.push(violation(
                "after_terminal",
                format!("worker is already {}", p.milestone),
            ));
        }
        return (p, fx);
    }
    match event {
        Event::Output | Event::Commit => p.last_progress_ms = now,
        Event::Summary { .. } | Event::Decision { .. } => {}
        Event::Claim {
            milestone,
            note,
            via,
        } => {
            p.last_progress_ms = now;
            match milestone {
                Milestone::BlockedPermission => {
                    block_permission(
                        contract,
                        &mut p,
                        worker,
                        &format!("reported BLOCKED_PERMISSION: {note}"),
                        now,
                        &mut fx,
                    );
                }
                Milestone::FixingCi => {
                    let entering = p.milestone != Milestone::FixingCi;
                    if transition(
                        contract,
                        &mut p,
                        Milestone::FixingCi,
                        &format!("claimed {via}: {note}"),
                        now,
                        &mut fx,
                    ) && entering
                    {
                        count_fix_attempt(contract, &mut p, worker, now, &mut fx);
                    }
                }
                Milestone::Blocked => {
                    // `blocking: pause_and_escalate`: the worker is stopped at once — whatever
                    // it would do next (a push, a claim) is not done — its lock kept, its
                    // clocks frozen (BLOCKED is not at work, and has no timeout) until an
                    // operator's `orch respawn` continues it.
                    if transition(contract, &mut p, Milestone::Blocked, note, now, &mut fx) {
                        p.end_reason = Some(format!("blocked: {note}"));
                        fx.push(Effect::StopWorker {
                            immediate: false,
                            reason: BLOCKED_STOP.into(),
                        });
                        fx.push(alert(
                            Severity::Warning,
                            "blocked",
                            format!(
                                "worker {worker} is BLOCKED: {note}; orch stopped its processes and keeps its lock — `orch respawn {worker} --note …` continues it"
                            ),
                        ));
                    }
                }
                Milestone::Working => {
                    transition(contract, &mut p, Milestone::Working, note, now, &mut fx);
                }
                other => fx.push(violation(
                    "illegal_claim",
                    format!("{other} cannot be claimed this way ({via})"),
                )),
            }
        }
        Event::Push {
            sha,
            pushed_ms,
            via,
            protected,
            secrets,
        } => {
            let replaced = p.tracked_sha.clone();
            if transition(
                contract,
                &mut p,
                Milestone::PushedToCi,
                &format!("pushed {} ({via})", sha.short()),
                now,
                &mut fx,
            ) {
                p.tracked_sha = Some(sha.clone());
                p.pushed_ms = Some(*pushed_ms);
                p.protected = protected.clone();
                p.secrets = secrets.clone();
                p.verdict = None;
                p.failed_jobs.clear();
                p.verdict_detail = None;
                p.ci_jobs = None;
                if replaced.as_ref() != Some(sha) {
                    fx.push(Effect::Track { sha: sha.clone() });
                }
                fx.push(Effect::Checkpoint);
            }
            if !secrets.is_empty() {
                // orch's own FATAL: a secret on its way to the base branch. The commit never
                // becomes DONE (`finish_done`), and the chain stops until an operator, who
                // must rotate the secret anyway, clears the hold.
                let reason = format!(
                    "secret committed in {} ({}): {}",
                    sha.short(),
                    worker,
                    secrets.join("; ")
                );
                fatal(contract, &mut p, worker, &reason, true, now, &mut fx);
            }
        }
        Event::PushRejected {
            claimed,
            reason,
            via,
        } => {
            fx.push(violation(
                "push_not_verified",
                format!("PUSHED_TO_CI {claimed} ({via}) rejected: {reason}"),
            ));
        }
        Event::DoneRefused { reason, via } => {
            fx.push(violation(
                "done_without_ci_proof",
                format!("DONE claimed ({via}) but {reason}"),
            ));
            fx.push(alert(
                Severity::Warning,
                "done_without_ci_proof",
                format!("worker {worker} claimed DONE without CI proof: {reason}"),
            ));
        }
        Event::DoneClaim { via } => {
            let green =
                p.milestone == Milestone::PushedToCi && p.verdict == Some(VerdictKind::Green);
            if green {
                finish_done(contract, &mut p, worker, now, &mut fx);
            } else {
                let missing = match (&p.tracked_sha, p.verdict) {
                    (None, _) => "no pushed commit is tracked yet: push, then report PUSHED_TO_CI"
                        .to_string(),
                    (Some(sha), v) => format!(
                        "CI for {} is {}{}",
                        sha.short(),
                        v.map(VerdictKind::as_str).unwrap_or("not yet known"),
                        p.verdict_detail
                            .as_deref()
                            .map(|d| format!(": {d}"))
                            .unwrap_or_default()
                    ),
                };
                fx.push(violation(
                    "done_without_ci_proof",
                    format!("DONE claimed ({via}) but {missing}"),
                ));
                fx.push(alert(
                    Severity::Warning,
                    "done_without_ci_proof",
                    format!("worker {worker} claimed DONE without CI proof: {missing}"),
                ));
            }
        }
        Event::Approve { sha, by } => approve(contract, &mut p, worker, sha, by, now, &mut fx),
        Event::PermissionDenial { line } => {
            p.permission_denials += 1;
            if p.permission_denials >= contract.permission.max_denials {
                let why = format!(
                    "{} permission denials, last: {}",
                    p.permission_denials, line
                );
                block_permission(contract, &mut p, worker, &why, now, &mut fx);
            }
        }
        Event::Verdict {
            sha,
            kind,
            failed_jobs,
            detail,
            jobs,
        } => {
            if p.tracked_sha.as_ref() != Some(sha) {
                return (p, fx); // an old SHA: forgotten once a new one was pushed
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
                escalate_if_due(contract, &mut p, worker, &mut fx);
            }
            // A worker in FIXING_CI whose tracked commit turns out green (its FIXING_CI came
            // while CI was still running, or a rerun passed): nothing is left to fix.
            if p.milestone == Milestone::FixingCi && *kind == VerdictKind::Green {
                transition(
                    contract,
                    &mut p,
                    Milestone::PushedToCi,
                    &format!("CI green for {} after all", sha.short()),
                    now,
                    &mut fx,
                );
            }
            if p.milestone == Milestone::PushedToCi {
                match kind {
                    // DONE needs the worker's word as well as CI's: a green head while the
                    // worker works on is verified, not finished (multi-step work goes on).
                    VerdictKind::Green if p.turn_ended => {
                        finish_done(contract, &mut p, worker, now, &mut fx)
                    }
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
                        let moved =
                            transition(contract, &mut p, Milestone::FixingCi, &why, now, &mut fx);
                        if moved {
                            count_fix_attempt(contract, &mut p, worker, now, &mut fx);
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
        Event::WorkerExited { code } => {
            if p.milestone == Milestone::PushedToCi && *code == Some(0) {
                // The worker ended its turn after a push: its word that the work is done.
                // DONE comes with a green verdict read after the exit (the supervisor asks
                // again: the branch head too), never on one read before it.
                p.turn_ended = true;
                fx.push(Effect::Checkpoint);
                return (p, fx);
            }
            // An agent's run already classified (`AgentEnded`) keeps its reason and alert.
            let classified = p
                .end_reason
                .as_deref()
                .is_some_and(|r| r.starts_with("agent (transient)"));
            // Any other end at work is a crash, after a push too: the worker gave no word (a
            // DONE claim, or the end of its turn), and a green push is not DONE without it, so
            // CI decides nothing more for this life. Said at once, in every milestone alike;
            // the supervisor then leaves the worker to `orch resume` — a replacement, as the
            // contract's `on_worker_crash` — its lock kept for it.
            if !classified && p.milestone.at_work() {
                let how = code
                    .map(|c| format!("exit code {c}"))
                    .unwrap_or_else(|| "a signal".into());
                let pushed = match (&p.tracked_sha, p.milestone) {
                    (Some(sha), Milestone::PushedToCi) => format!(
                        " after pushing {} (CI {}: DONE needs its word too)",
                        sha.short(),
                        p.verdict.map_or("not yet known", VerdictKind::as_str)
                    ),
                    _ => String::new(),
                };
                p.end_reason = Some(format!("worker exited ({how}) in {}", p.milestone));
                fx.push(alert(
                    Severity::Warning,
                    "worker_exited",
                    format!(
                        "worker {worker} exited ({how}) in {}{pushed} without finishing; lock kept for its replacement — `orch resume` gives its task to one (within worker.max_respawns)",
                        p.milestone
                    ),
                ));
                fx.push(Effect::Checkpoint);
            }
        }
        Event::Tick => tick(contract, &mut p, worker, now, &mut fx),
        Event::DeadlockCheck {
            worker_running,
            last_commit_ms,
            forge_failures,
        } => deadlock(
            contract,
            &mut p,
            worker,
            *worker_running,
            *last_commit_ms,
            *forge_failures,
            now,
            &mut fx,
        ),
        Event::Cancel { by, reason } => {
            if transition(
                contract,
                &mut p,
                Milestone::Cancelled,
                &format!("cancelled by {by}: {reason}"),
                now,
                &mut fx,
            ) {
                p.end_reason = Some(format!("cancelled by {by}: {reason}"));
                fx.push(Effect::StopWorker {
                    immediate: false,
                    reason: "cancelled".into(),
                });
                fx.push(Effect::ReleaseLock {
                    reason: format!("cancelled by {by}: {reason}"),
                });
            }
        }
        Event::Fail { kind, reason } => fail(contract, &mut p, worker, reason, kind, now, &mut fx),
        Event::AgentEnded { blocking, detail } => {
            if *blocking {
                let reason = format!("agent: {detail}");
                if transition(contract, &mut p, Milestone::Blocked, &reason, now, &mut fx) {
                    p.end_reason = Some(reason);
                    fx.push(alert(
                        Severity::Critical,
                        "agent_blocked",
                        format!(
                            "worker {worker}: {detail} — BLOCKED, lock kept; fix it, then `orch respawn {worker}`"
                        ),
                    ));
                }
            } else {
                p.end_reason = Some(format!("agent (transient): {detail}"));
                fx.push(alert(
                    Severity::Warning,
                    "agent_transient",
                    format!("worker {worker}: {detail} — `orch resume` gives it to a replacement"),
                ));
            }
        }
        Event::AgentWarning { kind, message } => {
            fx.push(alert(Severity::Warning, kind, message.clone()));
        }
        Event::Trespass { kind, message } => {
            fx.push(alert(Severity::Critical, kind, message.clone()));
        }
        Event::SpawnFailed { reason } => {
            // Nothing ran, so nothing to stop and nobody to alert: the lock is given back.
            if transition(contract, &mut p, Milestone::Failed, reason, now, &mut fx) {
                p.end_reason = Some(reason.clone());
                fx.push(Effect::ReleaseLock {
                    reason: reason.clone(),
                });
            }
        }
        Event::Resumed { replacement } => {
            // The life before counts up to its last sign of progress; the time nobody
            // supervised the worker is not its own.
            let last = p.last_progress_ms;
            p.life.restart(last, now);
            let m = p.milestone;
            p.enter(contract, m, now);
            if *replacement {
                p.end_reason = None;
                p.permission_denials = 0;
                p.turn_ended = false;
            }
            fx.push(Effect::Checkpoint);
        }
        Event::Respawn { by, .. } if p.halted.is_some() => {
            fx.push(violation(
                "halted",
                format!(
                    "respawn by {by} refused: the chain is halted by a FATAL ({}); `orch fatal --clear` first",
                    p.halted.as_deref().unwrap_or_default()
                ),
            ));
        }
        Event::Respawn { by, note } => {
            if matches!(
                p.milestone,
                Milestone::Blocked | Milestone::BlockedPermission | Milestone::Paused
            ) {
                let to = if p.tracked_sha.is_some() {
                    Milestone::FixingCi
                } else {
                    Milestone::Working
                };
                let reason = if note.is_empty() {
                    format!("respawned by {by}")
                } else {
                    format!("respawned by {by}: {note}")
                };
                if transition(contract, &mut p, to, &reason, now, &mut fx) {
                    p.end_reason = None;
                    p.permission_denials = 0;
                    p.turn_ended = false;
                    p.held = None;
                    p.respawned += 1;
                }
            }
        }
        Event::ForgeUnavailable { kind, message } => {
            fx.push(alert(Severity::Critical, kind, message.clone()));
        }
        Event::Pause { reason } => {
            let from = p.milestone;
            // Only a worker at work is paused; BLOCKED ones wait for an operator anyway.
            if matches!(
                from,
                Milestone::Working | Milestone::PushedToCi | Milestone::FixingCi
            ) {
                let clock = super::PausedClock {
                    elapsed_ms: now - p.since_ms,
                    left_ms: p.deadline_ms.map(|d| (d - now).max(0)),
                    warned: p.warned,
                    extended: p.extended,
                };
                if transition(contract, &mut p, Milestone::Paused, reason, now, &mut fx) {
                    p.deadline_ms = None;
                    p.paused_clock = Some(clock);
                    fx.push(Effect::SuspendWorker);
                    fx.push(alert(
                        Severity::Warning,
                        "paused",
                        format!(
                            "worker {worker} paused in {from}: {reason}; its processes are stopped and its timers frozen until the upstream is green again"
                        ),
                    ));
                }
            }
        }
        Event::Resume => unpause(
            contract,
            &mut p,
            worker,
            "upstream green again",
            now,
            &mut fx,
        ),
        Event::Unpaused { reason } => unpause(contract, &mut p, worker, reason, now, &mut fx),
        Event::Fatal { reason, raised } => {
            fatal(contract, &mut p, worker, reason, *raised, now, &mut fx)
        }
        Event::FatalCleared { by, upstream_red } => {
            if p.halted.take().is_some() {
                fx.push(Effect::ResolveAlert {
                    kind: "halted".into(),
                });
                fx.push(Effect::Checkpoint);
                if *upstream_red {
                    // Still below a red upstream: the cascade keeps it PAUSED.
                } else {
                    let why = format!("fatal hold cleared by {by}");
                    unpause(contract, &mut p, worker, &why, now, &mut fx);
                }
            }
        }
        Event::Land(_) | Event::DoneBranchMoved { .. } => {} // handled above
    }
    (p, fx)
}

/// Back from PAUSED to where the worker was, its timers going on where they stopped: the
/// upstream is green again, or a resumer takes over a worker whose supervisor died paused
/// (its new supervisor checks the upstream again). A verdict that came meanwhile is acted on.
fn unpause(
    contract: &Contract,
    p: &mut Progress,
    worker: &str,
    reason: &str,
    now: i64,
    fx: &mut Vec<Effect>,
) {
    // A fatal hold outranks every other way out of PAUSED: only its clearing ends it.
    if p.milestone == Milestone::Paused && p.halted.is_none() {
        let back = p.paused_from.unwrap_or(Milestone::Working);
        if transition(contract, p, back, reason, now, fx) {
            p.paused_from = None;
            if let Some(c) = p.paused_clock.take() {
                // The timers go on where they stopped.
                p.since_ms = now - c.elapsed_ms;
                p.deadline_ms = c.left_ms.map(|l| now + l);
                p.warned = c.warned;
                p.extended = c.extended;
            }
            fx.push(Effect::ContinueWorker);
            fx.push(Effect::ResolveAlert {
                kind: "paused".into(),
            });
            fx.push(alert(
                Severity::Info,
                "resumed",
                format!("worker {worker} resumed in {back}: {reason}"),
            ));
            // A verdict that came while paused is acted on now.
            if back == Milestone::PushedToCi {
                match p.verdict {
                    Some(VerdictKind::Green) if p.turn_ended => {
                        finish_done(contract, p, worker, now, fx)
                    }
                    Some(VerdictKind::Red) => {
                        let why = format!("CI red: {}", p.failed_jobs.join(", "));
                        if transition(contract, p, Milestone::FixingCi, &why, now, fx) {
                            count_fix_attempt(contract, p, worker, now, fx);
                        }
                    }
                    _ => {}
                }
            }
        }
    }
}

/// FATAL over the worker's chain (`failure_taxonomy.fatal`: `halt_all_workers_in_chain`,
/// `require: human_intervention`): the worker is stopped as a cascade pauses it — its
/// processes stopped, its timers frozen, its lock kept: nothing lost — and stays so until an
/// operator clears the hold. `raised`: this worker is where it came from (its report, its
/// push), so its step takes the hold and raises the critical alert.
fn fatal(
    contract: &Contract,
    p: &mut Progress,
    worker: &str,
    reason: &str,
    raised: bool,
    now: i64,
    fx: &mut Vec<Effect>,
) {
    if p.halted.is_some() && !raised {
        return;
    }
    p.halted = Some(reason.to_string());
    if raised {
        fx.push(Effect::HoldFatal {
            reason: reason.to_string(),
        });
        fx.push(alert(
            Severity::Critical,
            "fatal",
            format!(
                "FATAL from worker {worker}: {reason} — every worker in its chain is stopped (locks kept) and none resumes until an operator clears the hold: `orch fatal {worker}` shows it and what the chain landed (to revert by hand: orch never reverts on its own), `orch fatal --clear {worker}` ends it"
            ),
        ));
    }
    let from = p.milestone;
    if from.at_work() {
        let clock = super::PausedClock {
            elapsed_ms: now - p.since_ms,
            left_ms: p.deadline_ms.map(|d| (d - now).max(0)),
            warned: p.warned,
            extended: p.extended,
        };
        if transition(
            contract,
            p,
            Milestone::Paused,
            &format!("FATAL: {reason}"),
            now,
            fx,
        ) {
            p.deadline_ms = None;
            p.paused_clock = Some(clock);
            fx.push(Effect::SuspendWorker);
        }
    }
    fx.push(alert(
        Severity::Warning,
        "halted",
        format!(
            "worker {worker} halted in {from}: FATAL in its chain ({reason}); its processes are stopped and its timers frozen until an operator clears the hold"
        ),
    ));
    fx.push(Effect::Checkpoint);
}

/// The reason of the stop of a worker that reported BLOCKED (its processes killed at once).
pub const BLOCKED_STOP: &str = "blocked";

/// The reason of the hold a change touching protected paths is kept in (BLOCKED).
pub const HELD_STOP: &str = "held for approval";

/// A green change the worker called finished, which touches protected paths nobody approved
/// for this commit: BLOCKED (the lock kept) until an operator approves it — CI that a worker
/// could edit is no proof of its work.
fn hold(contract: &Contract, p: &mut Progress, worker: &str, now: i64, fx: &mut Vec<Effect>) {
    let Some(sha) = p.tracked_sha.clone() else {
        return;
    };
    let files = p.protected.join(", ");
    let reason = format!("touches protected paths: {files}; needs `orch approve {worker}`");
    if transition(contract, p, Milestone::Blocked, &reason, now, fx) {
        p.held = Some(sha.clone());
        p.end_reason = Some(reason);
        fx.push(Effect::StopWorker {
            immediate: false,
            reason: HELD_STOP.into(),
        });
        fx.push(alert(
            Severity::Warning,
            "protected_paths",
            format!(
                "worker {worker}: CI is green for {}, but its change touches protected paths ({files}): not DONE without an operator's approval; the lock is kept — `orch approve {worker}` shows the diff and approves this commit",
                sha.short()
            ),
        ));
    }
}

/// An operator's approval of the commit at `sha`: a worker held on it goes on to DONE; a
/// worker still at work on it keeps the approval for when it claims DONE. Any other commit
/// is refused (an approval is bound to the commit the operator saw).
fn approve(
    contract: &Contract,
    p: &mut Progress,
    worker: &str,
    sha: &crate::sha::Sha,
    by: &str,
    now: i64,
    fx: &mut Vec<Effect>,
) {
    let refuse = |fx: &mut Vec<Effect>, why: String| {
        fx.push(violation(
            "approval_refused",
            format!("approval of {} by {by} refused: {why}", sha.short()),
        ));
    };
    if p.tracked_sha.as_ref() != Some(sha) {
        let tracked = p.tracked_sha.as_ref().map(|s| s.short().to_string());
        return refuse(
            fx,
            format!(
                "the worker's change is at {}",
                tracked.as_deref().unwrap_or("no pushed commit")
            ),
        );
    }
    if p.protected.is_empty() {
        return refuse(
            fx,
            "its change touches no protected path: nothing to approve".into(),
        );
    }
    match p.milestone {
        Milestone::Blocked if p.held.as_ref() == Some(sha) => {
            if p.verdict != Some(VerdictKind::Green) {
                return refuse(fx, "its CI is no longer green".into());
            }
            p.approved = Some(sha.clone());
            fx.push(alert(
                Severity::Info,
                "approved",
                format!(
                    "worker {worker}: {by} approved {} (touches {})",
                    sha.short(),
                    p.protected.join(", ")
                ),
            ));
            fx.push(Effect::ResolveAlert {
                kind: "protected_paths".into(),
            });
            finish_done(contract, p, worker, now, fx);
            if p.milestone == Milestone::Done {
                p.held = None;
            } else {
                p.approved = None;
            }
        }
        Milestone::PushedToCi | Milestone::FixingCi | Milestone::Paused => {
            p.approved = Some(sha.clone());
            fx.push(alert(
                Severity::Info,
                "approved",
                format!(
                    "worker {worker}: {by} approved {} ahead of DONE (touches {})",
                    sha.short(),
                    p.protected.join(", ")
                ),
            ));
            fx.push(Effect::Checkpoint);
        }
        m => refuse(fx, format!("the worker is {m}, not held for approval")),
    }
}

/// The worker's branch moved away from its DONE commit `done` (to `head`; None: deleted).
///
/// Before the landing moved the base (pending, or an integration under verification), DONE is
/// taken back: the worker is BLOCKED with the reason, its lock kept, its landing back to
/// planned (nothing lands), and a critical alert names both commits. Why BLOCKED and not
/// PUSHED_TO_CI for the new head: the contract's DONE is terminal and lets no transition out,
/// and PUSHED_TO_CI is a worker's own push (`git_push_complete`, `new_push`) — but the worker
/// was stopped at DONE (`StopWorker`, its processes ended with its guard), so whoever moved the
/// branch is not the worker, and verifying that head would make someone else's commit this
/// worker's DONE. Someone else's push is a `blocking` failure in the contract's taxonomy
/// (`pause_and_escalate`, worker state BLOCKED: "cannot proceed without external resolution"),
/// and from BLOCKED the contract's own way on is an operator's: `orch respawn` (BLOCKED ->
/// FIXING_CI: the worker pushes again and CI verifies anew) or `orch cancel`.
/// After the base moved (base CI, downstream, landed…) or with `land: none`, what lands or
/// landed is the verified commit: an alert only.
fn done_branch_moved(
    contract: &Contract,
    p: &mut Progress,
    worker: &str,
    done: &crate::sha::Sha,
    head: Option<&crate::sha::Sha>,
    now: i64,
    fx: &mut Vec<Effect>,
) {
    if p.milestone != Milestone::Done || p.tracked_sha.as_ref() != Some(done) || head == Some(done)
    {
        return;
    }
    let moved = match head {
        Some(h) => format!("moved from {} to {}", done.as_str(), h.as_str()),
        None => format!("deleted (it was at {})", done.as_str()),
    };
    let landing = p.landing.as_ref().map(|l| l.state);
    if !matches!(landing, Some(LandState::Pending | LandState::Verifying)) {
        let stage = landing.map_or("no landing".to_string(), |s| s.to_string());
        fx.push(alert(
            Severity::Critical,
            "done_branch_moved",
            format!(
                "worker {worker}'s branch was {moved} after DONE (landing: {stage}): DONE stays the verified commit {}; find out who pushed",
                done.short()
            ),
        ));
        return;
    }
    let reason = format!(
        "its branch was {moved} after DONE, before its landing: not landed; `orch respawn {worker}` to verify again, or `orch cancel {worker}`"
    );
    // Out of a terminal state, which the contract's transitions never allow: this is the one
    // exception (see above), so it does not go through `transition`.
    let from = p.milestone;
    p.enter(contract, Milestone::Blocked, now);
    fx.push(Effect::Transition {
        from,
        to: Milestone::Blocked,
        reason: reason.clone(),
    });
    p.end_reason = Some(reason);
    if let Some(l) = p.landing.as_mut() {
        l.replan();
    }
    // The move itself, under the kind a push seen by the forge's hook raises (a repeat of it
    // then): a ref moved without a push runs no hook, and this look is what sees it.
    fx.push(alert(
        Severity::Critical,
        "done_branch_moved",
        format!("worker {worker}'s branch was {moved} after DONE, before its landing"),
    ));
    fx.push(alert(
        Severity::Critical,
        "done_reopened",
        format!(
            "worker {worker} is DONE no more: its branch was {moved} before its landing; BLOCKED, its lock kept, nothing lands until `orch respawn {worker}` (CI verifies again) or `orch cancel {worker}`"
        ),
    ));
    fx.push(Effect::Checkpoint);
}

fn finish_done(
    contract: &Contract,
    p: &mut Progress,
    worker: &str,
    now: i64,
    fx: &mut Vec<Effect>,
) {
    if !p.secrets.is_empty() || p.halted.is_some() {
        // A commit carrying a secret never lands, and nothing becomes DONE under a FATAL.
        let why = if p.secrets.is_empty() {
            format!(
                "the chain is halted by a FATAL ({})",
                p.halted.as_deref().unwrap_or_default()
            )
        } else {
            format!(
                "its history carries secrets ({}): rewrite the branch without them and push again",
                p.secrets.join("; ")
            )
        };
        fx.push(violation(
            "done_refused",
            format!("worker {worker}: not DONE: {why}"),
        ));
        return;
    }
    if p.needs_approval() {
        return hold(contract, p, worker, now, fx);
    }
    let sha = p
        .tracked_sha
        .as_ref()
        .map(|s| s.to_string())
        .unwrap_or_default();
    if transition(
        contract,
        p,
        Milestone::Done,
        &format!(
            "CI green for {} (sync job success)",
            crate::sha::short(&sha)
        ),
        now,
        fx,
    ) {
        p.end_reason = Some("done".into());
        let lands = match p.landing.as_mut() {
            Some(l) => {
                l.done_sha = p.tracked_sha.clone();
                l.state = match l.policy {
                    LandPolicy::Merge | LandPolicy::PullRequest | LandPolicy::Direct => {
                        LandState::Pending
                    }
                    LandPolicy::None => LandState::Waiting,
                };
                l.policy != LandPolicy::None
            }
            None => false,
        };
        if lands {
            // The chain lock is held until the change is on the base branch and the base
            // branch's CI for it is green (see `landing`): dependents build on it.
            fx.push(Effect::Land);
        } else {
            fx.push(Effect::ReleaseLock {
                reason: format!("DONE: CI verified green for {sha}"),
            });
        }
        fx.push(Effect::StopWorker {
            immediate: false,
            reason: "done".into(),
        });
    }
}

fn count_fix_attempt(
    contract: &Contract,
    p: &mut Progress,
    worker: &str,
    now: i64,
    fx: &mut Vec<Effect>,
) {
    p.fix_attempts += 1;
    p.fix_reds.push(super::FixRed {
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
fn escalate_if_due(contract: &Contract, p: &mut Progress, worker: &str, fx: &mut Vec<Effect>) {
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

fn block_permission(
    contract: &Contract,
    p: &mut Progress,
    worker: &str,
    why: &str,
    now: i64,
    fx: &mut Vec<Effect>,
) {
    if transition(contract, p, Milestone::BlockedPermission, why, now, fx) {
        p.end_reason = Some(format!("permission: {why}"));
        fx.push(Effect::StopWorker {
            immediate: true,
            reason: "permission denied".into(),
        });
        fx.push(alert(
            Severity::Critical,
            "blocked_permission",
            format!("worker {worker} ended on a permission failure ({why}); lock kept until an operator acts"),
        ));
    }
}

fn fail(
    contract: &Contract,
    p: &mut Progress,
    worker: &str,
    why: &str,
    kind: &str,
    now: i64,
    fx: &mut Vec<Effect>,
) {
    let next = format!(
        "orch stops its processes and keeps the lock until an operator acts (orch release {worker} --force --reason …)"
    );
    fail_then(contract, p, worker, why, kind, &next, now, fx);
}

/// FAILED, its alert saying what orch does `next` (the lock kept, or handed over).
#[allow(clippy::too_many_arguments)]
fn fail_then(
    contract: &Contract,
    p: &mut Progress,
    worker: &str,
    why: &str,
    kind: &str,
    next: &str,
    now: i64,
    fx: &mut Vec<Effect>,
) {
    let from = p.milestone;
    if transition(contract, p, Milestone::Failed, why, now, fx) {
        p.end_reason = Some(why.to_string());
        fx.push(Effect::StopWorker {
            immediate: false,
            reason: why.to_string(),
        });
        fx.push(alert(
            Severity::Critical,
            kind,
            format!("worker {worker} FAILED in {from}: {why}; {next}"),
        ));
    }
}

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
fn deadlock(
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

fn tick(contract: &Contract, p: &mut Progress, worker: &str, now: i64, fx: &mut Vec<Effect>) {
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
