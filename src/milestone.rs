//! The worker state machine: one pure function `step(contract, state, event, now)` that every
//! event source feeds — output lines, `orch report`, CI verdicts, timers, operators.
//!
//! Legality comes from the contract file. The machine never does I/O: claims that need proof
//! arrive already checked (a `Push` carries a SHA the supervisor resolved and found on the
//! remote; a `DoneClaim` is judged against the verdict the supervisor last fed in). The
//! returned effects (kill the worker, release the lock, alert, checkpoint, …) are carried out
//! by the supervisor.

use crate::contract::{Contract, OnTimeout};
use crate::forge::verdict::VerdictKind;
use serde::{Deserialize, Serialize};

/// The milestones every contract defines (see `contract::REQUIRED_STATES`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Milestone {
    Working,
    PushedToCi,
    FixingCi,
    Done,
    Blocked,
    BlockedPermission,
    Paused,
    Failed,
    Cancelled,
}

impl Milestone {
    pub const ALL: [Milestone; 9] = [
        Milestone::Working,
        Milestone::PushedToCi,
        Milestone::FixingCi,
        Milestone::Done,
        Milestone::Blocked,
        Milestone::BlockedPermission,
        Milestone::Paused,
        Milestone::Failed,
        Milestone::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Milestone::Working => "WORKING",
            Milestone::PushedToCi => "PUSHED_TO_CI",
            Milestone::FixingCi => "FIXING_CI",
            Milestone::Done => "DONE",
            Milestone::Blocked => "BLOCKED",
            Milestone::BlockedPermission => "BLOCKED_PERMISSION",
            Milestone::Paused => "PAUSED",
            Milestone::Failed => "FAILED",
            Milestone::Cancelled => "CANCELLED",
        }
    }

    pub fn parse(s: &str) -> Option<Milestone> {
        Milestone::ALL.into_iter().find(|m| m.as_str() == s)
    }

    /// DONE, FAILED, CANCELLED: nothing happens to the worker after these.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Milestone::Done | Milestone::Failed | Milestone::Cancelled
        )
    }
}

impl std::fmt::Display for Milestone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which channel a worker's claim came through.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Channel {
    /// A line on the worker's stdout/stderr.
    Output,
    /// `orch report`.
    Report,
}

/// What the machine knows about one worker.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    pub milestone: Milestone,
    /// Where a PAUSED worker returns to.
    pub paused_from: Option<Milestone>,
    pub since_ms: i64,
    /// When the current milestone times out (None: no timeout for it).
    pub deadline_ms: Option<i64>,
    pub extended: bool,
    pub warned: bool,
    pub fix_attempts: u32,
    /// The last pushed (and verified) SHA; CI is followed for it alone.
    pub tracked_sha: Option<String>,
    pub pushed_ms: Option<i64>,
    pub verdict: Option<VerdictKind>,
    pub failed_jobs: Vec<String>,
    pub verdict_detail: Option<String>,
    /// Last output line, commit or milestone.
    pub last_progress_ms: i64,
    pub permission_denials: u32,
    /// Why a worker stopped (timeout, permission, attempts exhausted, cancelled, …).
    pub end_reason: Option<String>,
}

impl Progress {
    pub fn new(contract: &Contract, now: i64) -> Progress {
        let mut p = Progress {
            milestone: Milestone::Working,
            paused_from: None,
            since_ms: now,
            deadline_ms: None,
            extended: false,
            warned: false,
            fix_attempts: 0,
            tracked_sha: None,
            pushed_ms: None,
            verdict: None,
            failed_jobs: Vec::new(),
            verdict_detail: None,
            last_progress_ms: now,
            permission_denials: 0,
            end_reason: None,
        };
        p.enter(contract, Milestone::Working, now);
        p
    }

    fn enter(&mut self, contract: &Contract, to: Milestone, now: i64) {
        self.milestone = to;
        self.since_ms = now;
        self.deadline_ms = contract
            .timeouts
            .get(to.as_str())
            .map(|t| now + t.timeout.as_millis() as i64);
        self.extended = false;
        self.warned = false;
        self.last_progress_ms = now;
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Any output line (progress; milestone lines are parsed into claims by the caller).
    Output,
    /// A new commit appeared on the worker's branch (progress).
    Commit,
    /// WORKING, FIXING_CI, BLOCKED, BLOCKED_PERMISSION claimed by the worker.
    Claim {
        milestone: Milestone,
        note: String,
        via: Channel,
    },
    /// A PUSHED_TO_CI claim whose SHA was resolved and found on the remote.
    Push {
        sha: String,
        pushed_ms: i64,
        via: Channel,
    },
    /// A PUSHED_TO_CI claim that failed verification.
    PushRejected {
        claimed: String,
        reason: String,
        via: Channel,
    },
    /// The worker says DONE; judged against the last verdict for the tracked SHA.
    DoneClaim {
        via: Channel,
    },
    /// A line matching the permission rule's patterns.
    PermissionDenial {
        line: String,
    },
    /// orch's own CI verdict for `sha`.
    Verdict {
        sha: String,
        kind: VerdictKind,
        failed_jobs: Vec<String>,
        detail: String,
    },
    /// The worker process ended.
    WorkerExited {
        code: Option<i32>,
    },
    /// Time passes: warnings and timeouts.
    Tick,
    Cancel {
        by: String,
        reason: String,
    },
    /// orch gives up on the worker (e.g. respawns exhausted); the lock is kept.
    Fail {
        kind: String,
        reason: String,
    },
    /// Cascade protection: an upstream repository went red / green again.
    Pause {
        reason: String,
    },
    Resume,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Info,
    Warning,
    Critical,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    Transition {
        from: Milestone,
        to: Milestone,
        reason: String,
    },
    /// Recorded; the state did not change.
    Violation {
        kind: String,
        detail: String,
    },
    Alert {
        severity: Severity,
        kind: String,
        message: String,
    },
    /// Stop the worker's process group: at once (permission rule) or SIGTERM → grace → SIGKILL.
    StopWorker {
        immediate: bool,
        reason: String,
    },
    /// Suspend / continue the worker's process group (cascade pause).
    SuspendWorker,
    ContinueWorker,
    ReleaseLock {
        reason: String,
    },
    /// Follow CI for this SHA from now on (and forget the previous one).
    Track {
        sha: String,
    },
    Checkpoint,
}

fn violation(kind: &str, detail: String) -> Effect {
    Effect::Violation {
        kind: kind.to_string(),
        detail,
    }
}

fn alert(severity: Severity, kind: &str, message: String) -> Effect {
    Effect::Alert {
        severity,
        kind: kind.to_string(),
        message,
    }
}

/// Moves `p` to `to` if the contract allows it; otherwise records an illegal transition.
fn transition(
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
    let mut p = state.clone();
    let mut fx = Vec::new();
    if p.milestone.is_terminal() {
        // Nothing moves a finished worker; say so when a worker keeps talking.
        if let Event::Claim { .. } | Event::Push { .. } | Event::DoneClaim { .. } = event
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
                        &format!("{via:?} claim: {note}"),
                        now,
                        &mut fx,
                    ) && entering
                    {
                        count_fix_attempt(contract, &mut p, worker, now, &mut fx);
                    }
                }
                Milestone::Blocked => {
                    if transition(contract, &mut p, Milestone::Blocked, note, now, &mut fx) {
                        p.end_reason = Some(format!("blocked: {note}"));
                        fx.push(alert(
                            Severity::Warning,
                            "blocked",
                            format!("worker {worker} is BLOCKED: {note}"),
                        ));
                    }
                }
                Milestone::Working => {
                    transition(contract, &mut p, Milestone::Working, note, now, &mut fx);
                }
                other => fx.push(violation(
                    "illegal_claim",
                    format!("{other} cannot be claimed this way ({via:?})"),
                )),
            }
        }
        Event::Push {
            sha,
            pushed_ms,
            via,
        } => {
            let replaced = p.tracked_sha.clone();
            if transition(
                contract,
                &mut p,
                Milestone::PushedToCi,
                &format!("pushed {} ({via:?})", short(sha)),
                now,
                &mut fx,
            ) {
                p.tracked_sha = Some(sha.clone());
                p.pushed_ms = Some(*pushed_ms);
                p.verdict = None;
                p.failed_jobs.clear();
                p.verdict_detail = None;
                if replaced.as_deref() != Some(sha.as_str()) {
                    fx.push(Effect::Track { sha: sha.clone() });
                }
                fx.push(Effect::Checkpoint);
            }
        }
        Event::PushRejected {
            claimed,
            reason,
            via,
        } => {
            fx.push(violation(
                "push_not_verified",
                format!("PUSHED_TO_CI {claimed} ({via:?}) rejected: {reason}"),
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
                        short(sha),
                        v.map(VerdictKind::as_str).unwrap_or("not yet known"),
                        p.verdict_detail
                            .as_deref()
                            .map(|d| format!(": {d}"))
                            .unwrap_or_default()
                    ),
                };
                fx.push(violation(
                    "done_without_ci_proof",
                    format!("DONE claimed ({via:?}) but {missing}"),
                ));
                fx.push(alert(
                    Severity::Warning,
                    "done_without_ci_proof",
                    format!("worker {worker} claimed DONE without CI proof: {missing}"),
                ));
            }
        }
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
        } => {
            if p.tracked_sha.as_deref() != Some(sha.as_str()) {
                return (p, fx); // an old SHA: forgotten once a new one was pushed
            }
            let changed = p.verdict != Some(*kind);
            p.verdict = Some(*kind);
            p.failed_jobs = failed_jobs.clone();
            p.verdict_detail = Some(detail.clone());
            if changed {
                fx.push(Effect::Checkpoint);
            }
            if p.milestone == Milestone::PushedToCi {
                match kind {
                    VerdictKind::Green => finish_done(contract, &mut p, worker, now, &mut fx),
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
                            short(sha)
                        ),
                    )),
                    _ => {}
                }
            }
        }
        Event::WorkerExited { code } => {
            let following_ci = p.milestone == Milestone::PushedToCi
                && !p.verdict.is_some_and(VerdictKind::is_terminal);
            if !following_ci
                && matches!(
                    p.milestone,
                    Milestone::Working | Milestone::FixingCi | Milestone::PushedToCi
                )
            {
                let how = code
                    .map(|c| format!("exit code {c}"))
                    .unwrap_or_else(|| "a signal".into());
                p.end_reason = Some(format!("worker exited ({how}) in {}", p.milestone));
                fx.push(alert(
                    Severity::Warning,
                    "worker_exited",
                    format!(
                        "worker {worker} exited ({how}) in {} without finishing; lock kept",
                        p.milestone
                    ),
                ));
                fx.push(Effect::Checkpoint);
            }
        }
        Event::Tick => tick(contract, &mut p, worker, now, &mut fx),
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
        Event::Pause { reason } => {
            if p.milestone != Milestone::Paused
                && transition(contract, &mut p, Milestone::Paused, reason, now, &mut fx)
            {
                p.deadline_ms = None;
                fx.push(Effect::SuspendWorker);
                fx.push(alert(
                    Severity::Warning,
                    "paused",
                    format!("worker {worker} paused: {reason}"),
                ));
            }
        }
        Event::Resume => {
            if p.milestone == Milestone::Paused {
                let back = p.paused_from.unwrap_or(Milestone::Working);
                if transition(contract, &mut p, back, "upstream green again", now, &mut fx) {
                    p.paused_from = None;
                    fx.push(Effect::ContinueWorker);
                }
            }
        }
    }
    (p, fx)
}

fn short(sha: &str) -> &str {
    &sha[..sha.len().min(10)]
}

fn finish_done(
    contract: &Contract,
    p: &mut Progress,
    worker: &str,
    now: i64,
    fx: &mut Vec<Effect>,
) {
    let sha = p.tracked_sha.clone().unwrap_or_default();
    if transition(
        contract,
        p,
        Milestone::Done,
        &format!("CI green for {} (sync job success)", short(&sha)),
        now,
        fx,
    ) {
        p.end_reason = Some("done".into());
        fx.push(Effect::ReleaseLock {
            reason: format!("DONE: CI verified green for {sha}"),
        });
        fx.push(Effect::StopWorker {
            immediate: false,
            reason: "done".into(),
        });
        let _ = worker;
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
    let max = contract.fixing_ci_max_attempts;
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
            format!("worker {worker} FAILED in {from}: {why}; lock kept until an operator acts"),
        ));
    }
}

fn tick(contract: &Contract, p: &mut Progress, worker: &str, now: i64, fx: &mut Vec<Effect>) {
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
                "worker {worker} has been in {} for {} (timeout {})",
                p.milestone,
                crate::duration::format(w),
                crate::duration::format(spec.timeout)
            ),
        ));
    }
    if now < deadline {
        return;
    }
    let recent_progress = now - p.last_progress_ms <= contract.progress_window.as_millis() as i64;
    let ci_still_going = spec.on_timeout == OnTimeout::CheckCiThenEscalate
        && matches!(
            p.verdict,
            None | Some(VerdictKind::Pending) | Some(VerdictKind::Running)
        );
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
    fail(
        contract,
        p,
        worker,
        &format!("timeout in {milestone}"),
        "timeout",
        now,
        fx,
    );
    p.end_reason = Some("timeout".into());
}

/// A milestone found in an output line, with the text after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineSignal {
    Milestone { milestone: Milestone, rest: String },
    PermissionDenial,
}

/// Finds a milestone marker (`WORKING:`, `PUSHED_TO_CI:`, …) anywhere in `line`, or a
/// permission-denial pattern. A marker must not be glued to a preceding word character
/// (`NOT_DONE:` is not `DONE:`). The earliest marker wins.
pub fn parse_line(line: &str, permission_patterns: &[String]) -> Option<LineSignal> {
    const MARKERS: [(&str, Milestone); 6] = [
        ("BLOCKED_PERMISSION:", Milestone::BlockedPermission),
        ("PUSHED_TO_CI:", Milestone::PushedToCi),
        ("FIXING_CI:", Milestone::FixingCi),
        ("WORKING:", Milestone::Working),
        ("BLOCKED:", Milestone::Blocked),
        ("DONE:", Milestone::Done),
    ];
    let mut best: Option<(usize, Milestone, usize)> = None;
    for (marker, m) in MARKERS {
        let mut from = 0;
        while let Some(i) = line[from..].find(marker) {
            let at = from + i;
            let glued = line[..at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_');
            if !glued {
                if best.is_none_or(|(b, _, _)| at < b) {
                    best = Some((at, m, marker.len()));
                }
                break;
            }
            from = at + marker.len();
        }
    }
    if let Some((at, milestone, len)) = best {
        return Some(LineSignal::Milestone {
            milestone,
            rest: line[at + len..].trim().to_string(),
        });
    }
    permission_patterns
        .iter()
        .any(|p| line.contains(p.as_str()))
        .then_some(LineSignal::PermissionDenial)
}

/// The commit a `PUSHED_TO_CI:` line names: the hex word after "commit", else the first
/// 7–64 character hex word.
pub fn sha_in(text: &str) -> Option<String> {
    let words: Vec<&str> = text
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    let is_sha = |w: &str| {
        (7..=64).contains(&w.len())
            && w.chars().all(|c| c.is_ascii_hexdigit())
            && w.chars()
                .any(|c| c.is_ascii_digit() || c.is_ascii_lowercase())
    };
    if let Some(i) = words.iter().position(|w| w.eq_ignore_ascii_case("commit"))
        && let Some(w) = words.get(i + 1)
        && is_sha(w)
    {
        return Some(w.to_ascii_lowercase());
    }
    words
        .into_iter()
        .find(|w| is_sha(w))
        .map(str::to_ascii_lowercase)
}

#[cfg(test)]
mod tests;
