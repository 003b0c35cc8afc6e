//! The worker completion contract (`contracts/worker-completion.yaml`): milestones and their
//! transitions, per-milestone timeouts, attempt limits, backoff and the permission rule.
//!
//! Loaded and validated at start so operators tune it without a rebuild. Validation reports
//! every problem with its position: unknown keys, transitions naming unknown states, zero or
//! negative durations.

use crate::diag::{Diagnostic, Diagnostics};
use crate::duration;
use crate::yaml::{Pos, from_yaml_str};
use serde::Deserialize;
use serde_saphyr::Spanned;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The milestones the seed contract names. The state machine is driven by the file, but orch
/// itself must know what these mean, so the file must define each of them.
pub const REQUIRED_STATES: &[&str] = &[
    "WORKING",
    "PUSHED_TO_CI",
    "FIXING_CI",
    "DONE",
    "BLOCKED",
    "BLOCKED_PERMISSION",
    "PAUSED",
    "FAILED",
    "CANCELLED",
];

#[derive(Debug, Clone)]
pub struct StateSpec {
    pub description: String,
    pub terminal: bool,
    pub releases_lock: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    pub from: String,
    pub to: String,
    pub trigger: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnTimeout {
    Escalate,
    CheckCiThenEscalate,
    EscalateAfterMaxAttempts,
    /// The cspec's `on_timeout_actions.escalate.reassign_task` ("Critical path, spawn new
    /// worker"): the worker ends FAILED as for `escalate`, and its supervisor hands its task
    /// and chain lock to a new worker told the previous one's checkpoint (within
    /// `worker.max_respawns`). A wave's critical-path tasks get it whatever the milestone says.
    Reassign,
}

#[derive(Debug, Clone)]
pub struct MilestoneTimeout {
    pub timeout: Duration,
    pub warning_at: Option<Duration>,
    pub on_timeout: OnTimeout,
    pub max_attempts: Option<u32>,
}

#[derive(Debug, Clone)]
pub struct DeadlockDetection {
    pub check_interval: Duration,
    pub worker_idle: Duration,
    pub no_commit_after_working: Duration,
    pub api_consecutive_failures: u32,
}

#[derive(Debug, Clone)]
pub struct PermissionRule {
    pub max_denials: u32,
    pub patterns: Vec<String>,
    pub state: String,
}

#[derive(Debug, Clone)]
pub struct Contract {
    pub file: PathBuf,
    pub version: String,
    pub initial: String,
    /// By name.
    pub states: BTreeMap<String, StateSpec>,
    pub transitions: Vec<Transition>,
    /// States reachable from every non-terminal state.
    pub from_any: Vec<String>,
    pub sync_job_status: String,
    pub if_sync_skipped: String,
    /// The cap on a worker's whole life: time at work (WORKING, PUSHED_TO_CI, FIXING_CI)
    /// summed across milestones and respawns, frozen while it is not at work (PAUSED,
    /// BLOCKED, …). Past it the worker is FAILED (see `milestone::step`).
    pub default_worker_timeout: Duration,
    pub progress_window: Duration,
    pub timeouts: BTreeMap<String, MilestoneTimeout>,
    pub deadlock: DeadlockDetection,
    pub checkpoint_interval: Duration,
    pub permission: PermissionRule,
    pub transient_backoff: RetryPolicy,
    pub fixing_ci_max_attempts: u32,
    /// `failure_taxonomy.recoverable.escalate_after`: after this many failed fix attempts
    /// (a FIXING_CI push that CI found red again) orch raises a warning, once per worker,
    /// before the attempts run out (`fixing_ci_max_attempts`).
    pub escalate_after: u32,
}

#[derive(Debug, thiserror::Error)]
pub enum ContractError {
    #[error("cannot read contract {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Invalid(Diagnostics),
}

impl Contract {
    pub fn load(path: &Path) -> Result<Contract, ContractError> {
        let file = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        let text = std::fs::read_to_string(&file).map_err(|source| ContractError::Read {
            path: file.clone(),
            source,
        })?;
        Contract::from_str(&text, &file).map_err(ContractError::Invalid)
    }

    pub fn from_str(text: &str, file: &Path) -> Result<Contract, Diagnostics> {
        let raw: RawContract = from_yaml_str(text)
            .map_err(|e| Diagnostics(vec![Diagnostic::new(file, e.pos, e.message)]))?;
        validate(raw, file)
    }

    /// The contract shipped with orch (the seed's values), built in: what an organisation
    /// without its own `contracts/worker-completion.yaml` runs with (and `orch demo`, tests).
    pub fn embedded() -> Contract {
        Contract::from_str(EMBEDDED, Path::new(BUILT_IN))
            .expect("the embedded contract is valid (checked by a unit test)")
    }

    /// Whether this is the built-in contract (no file to name to other processes).
    pub fn is_built_in(&self) -> bool {
        self.file == Path::new(BUILT_IN)
    }

    /// The contract at `path` when that file exists, else the built-in one.
    pub fn load_or_built_in(path: &Path) -> Result<Contract, ContractError> {
        if path.exists() {
            Contract::load(path)
        } else {
            Ok(Contract::embedded())
        }
    }

    pub fn is_terminal(&self, state: &str) -> bool {
        self.states.get(state).is_some_and(|s| s.terminal)
    }

    /// Whether the contract allows `from` → `to`.
    pub fn allows(&self, from: &str, to: &str) -> bool {
        if self.is_terminal(from) || !self.states.contains_key(from) {
            return false;
        }
        self.from_any.iter().any(|s| s == to)
            || self
                .transitions
                .iter()
                .any(|t| t.from == from && t.to == to)
    }
}

/// The shipped contract file, built in so that orch works from any directory.
pub const EMBEDDED: &str = include_str!("../contracts/worker-completion.yaml");

/// The name the built-in contract goes by (where a file name would be).
pub const BUILT_IN: &str = "(built-in contract)";

// ---------------------------------------------------------------------------------------------

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawContract {
    version: String,
    milestones: RawMilestones,
    completion: RawCompletion,
    timeouts: RawTimeouts,
    checkpointing: RawCheckpointing,
    permission_rule: RawPermission,
    failure_taxonomy: RawTaxonomy,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMilestones {
    initial: Spanned<String>,
    states: BTreeMap<String, Spanned<RawState>>,
    transitions: Vec<Spanned<RawTransition>>,
    #[serde(default)]
    from_any: Vec<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawState {
    #[serde(default)]
    description: String,
    #[serde(default)]
    terminal: bool,
    #[serde(default)]
    releases_lock: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTransition {
    from: Spanned<String>,
    to: Spanned<String>,
    #[serde(default)]
    trigger: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // `not_acceptable` documents the seed's list; the verdict logic encodes it
struct RawCompletion {
    sync_job_status: String,
    #[serde(default)]
    not_acceptable: Vec<String>,
    #[serde(default)]
    if_sync_skipped: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTimeouts {
    default_worker_timeout: Spanned<String>,
    progress_window: Spanned<String>,
    per_milestone: BTreeMap<String, Spanned<RawMilestoneTimeout>>,
    deadlock_detection: RawDeadlock,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMilestoneTimeout {
    timeout: Spanned<String>,
    #[serde(default)]
    warning_at: Option<Spanned<String>>,
    on_timeout: OnTimeout,
    #[serde(default)]
    max_attempts: Option<Spanned<i64>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDeadlock {
    check_interval: Spanned<String>,
    worker_idle: Spanned<String>,
    no_commit_after_working: Spanned<String>,
    api_consecutive_failures: Spanned<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCheckpointing {
    periodic_interval: Spanned<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPermission {
    max_denials: Spanned<i64>,
    patterns: Vec<String>,
    state: Spanned<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTaxonomy {
    transient: RawTransient,
    recoverable: RawRecoverable,
    blocking: RawClass,
    permission_denied: RawClass,
    fatal: RawClass,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // action words and examples are documentation for operators
struct RawTransient {
    action: String,
    #[serde(default)]
    examples: Vec<String>,
    backoff: RawBackoff,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBackoff {
    initial: Spanned<String>,
    max: Spanned<String>,
    multiplier: Spanned<f64>,
    max_retries: Spanned<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // action words and examples are documentation for operators
struct RawRecoverable {
    action: String,
    #[serde(default)]
    examples: Vec<String>,
    escalate_after: Spanned<i64>,
    max_attempts: Spanned<i64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(dead_code)] // kept to validate the shape; the action words are documentation today
struct RawClass {
    action: String,
    #[serde(default)]
    examples: Vec<String>,
    #[serde(default)]
    max_retries: Option<i64>,
    #[serde(default)]
    worker_state: Option<Spanned<String>>,
}

fn pos<T>(s: &Spanned<T>) -> Option<Pos> {
    Pos::of(&s.referenced)
}

struct Check<'a> {
    file: &'a Path,
    diags: Vec<Diagnostic>,
}

impl Check<'_> {
    fn err(&mut self, p: Option<Pos>, m: impl Into<String>) {
        self.diags.push(Diagnostic::new(self.file, p, m));
    }
    fn dur(&mut self, key: &str, s: &Spanned<String>) -> Duration {
        duration::parse(&s.value).unwrap_or_else(|e| {
            self.err(pos(s), format!("{key}: {e}"));
            Duration::from_secs(1)
        })
    }
    fn count(&mut self, key: &str, s: &Spanned<i64>) -> u32 {
        if s.value <= 0 {
            self.err(
                pos(s),
                format!("{key} must be greater than zero, got {}", s.value),
            );
            1
        } else {
            s.value as u32
        }
    }
    fn state(&mut self, key: &str, s: &Spanned<String>, states: &BTreeSet<String>) {
        if !states.contains(&s.value) {
            let known: Vec<&str> = states.iter().map(String::as_str).collect();
            self.err(
                pos(s),
                format!(
                    "{key} names unknown state \"{}\" (states: {})",
                    s.value,
                    known.join(", ")
                ),
            );
        }
    }
}

fn validate(raw: RawContract, file: &Path) -> Result<Contract, Diagnostics> {
    let mut c = Check {
        file,
        diags: Vec::new(),
    };
    let m = raw.milestones;
    let names: BTreeSet<String> = m.states.keys().cloned().collect();
    for required in REQUIRED_STATES {
        if !names.contains(*required) {
            c.err(None, format!("milestones.states must define {required}"));
        }
    }
    c.state("milestones.initial", &m.initial, &names);
    let mut transitions = Vec::new();
    for t in &m.transitions {
        c.state("transition from", &t.value.from, &names);
        c.state("transition to", &t.value.to, &names);
        if m.states
            .get(&t.value.from.value)
            .is_some_and(|s| s.value.terminal)
        {
            c.err(
                pos(&t.value.from),
                format!("transition from terminal state {}", t.value.from.value),
            );
        }
        transitions.push(Transition {
            from: t.value.from.value.clone(),
            to: t.value.to.value.clone(),
            trigger: t.value.trigger.clone(),
        });
    }
    for s in &m.from_any {
        c.state("milestones.from_any", s, &names);
    }
    let states: BTreeMap<String, StateSpec> = m
        .states
        .into_iter()
        .map(|(k, v)| {
            (
                k,
                StateSpec {
                    description: v.value.description,
                    terminal: v.value.terminal,
                    releases_lock: v.value.releases_lock,
                },
            )
        })
        .collect();
    if states.get("DONE").is_some_and(|s| !s.releases_lock) {
        c.err(None, "milestones.states.DONE must have releases_lock: true (a verified DONE frees the chain)");
    }

    let t = raw.timeouts;
    let default_worker_timeout =
        c.dur("timeouts.default_worker_timeout", &t.default_worker_timeout);
    let progress_window = c.dur("timeouts.progress_window", &t.progress_window);
    let mut timeouts = BTreeMap::new();
    let mut fixing_ci_max_attempts = 5;
    for (state, spec) in &t.per_milestone {
        if !names.contains(state) {
            c.err(
                pos(spec),
                format!("timeouts.per_milestone names unknown state \"{state}\""),
            );
        }
        let timeout = c.dur(
            &format!("timeouts.per_milestone.{state}.timeout"),
            &spec.value.timeout,
        );
        let warning_at = spec.value.warning_at.as_ref().map(|w| {
            (
                c.dur(&format!("timeouts.per_milestone.{state}.warning_at"), w),
                pos(w),
            )
        });
        if let Some((w, p)) = warning_at
            && w >= timeout
        {
            c.err(
                p,
                format!(
                    "timeouts.per_milestone.{state}.warning_at must be shorter than its timeout"
                ),
            );
        }
        let max_attempts = spec
            .value
            .max_attempts
            .as_ref()
            .map(|a| c.count(&format!("timeouts.per_milestone.{state}.max_attempts"), a));
        if state == "FIXING_CI"
            && let Some(a) = max_attempts
        {
            fixing_ci_max_attempts = a;
        }
        timeouts.insert(
            state.clone(),
            MilestoneTimeout {
                timeout,
                warning_at: warning_at.map(|(w, _)| w),
                on_timeout: spec.value.on_timeout,
                max_attempts,
            },
        );
    }
    let d = &t.deadlock_detection;
    let deadlock = DeadlockDetection {
        check_interval: c.dur("deadlock_detection.check_interval", &d.check_interval),
        worker_idle: c.dur("deadlock_detection.worker_idle", &d.worker_idle),
        no_commit_after_working: c.dur(
            "deadlock_detection.no_commit_after_working",
            &d.no_commit_after_working,
        ),
        api_consecutive_failures: c.count(
            "deadlock_detection.api_consecutive_failures",
            &d.api_consecutive_failures,
        ),
    };
    let checkpoint_interval = c.dur(
        "checkpointing.periodic_interval",
        &raw.checkpointing.periodic_interval,
    );

    let p = raw.permission_rule;
    c.state("permission_rule.state", &p.state, &names);
    if p.patterns.iter().any(|s| s.trim().is_empty()) || p.patterns.is_empty() {
        c.err(
            pos(&p.state),
            "permission_rule.patterns must list at least one non-empty pattern",
        );
    }
    let permission = PermissionRule {
        max_denials: c.count("permission_rule.max_denials", &p.max_denials),
        patterns: p.patterns,
        state: p.state.value,
    };

    let b = &raw.failure_taxonomy.transient.backoff;
    let initial = c.dur("failure_taxonomy.transient.backoff.initial", &b.initial);
    let max = c.dur("failure_taxonomy.transient.backoff.max", &b.max);
    if b.multiplier.value < 1.0 || !b.multiplier.value.is_finite() {
        c.err(
            pos(&b.multiplier),
            "failure_taxonomy.transient.backoff.multiplier must be at least 1",
        );
    }
    if max < initial {
        c.err(
            pos(&b.max),
            "failure_taxonomy.transient.backoff.max must not be shorter than initial",
        );
    }
    let transient_backoff = RetryPolicy {
        initial,
        max,
        multiplier: b.multiplier.value,
        max_retries: c.count(
            "failure_taxonomy.transient.backoff.max_retries",
            &b.max_retries,
        ),
    };
    let r = &raw.failure_taxonomy.recoverable;
    let escalate_after = c.count(
        "failure_taxonomy.recoverable.escalate_after",
        &r.escalate_after,
    );
    if escalate_after > fixing_ci_max_attempts {
        // The worker is FAILED after that many failed attempts: the warning would never come.
        c.err(
            pos(&r.escalate_after),
            format!(
                "failure_taxonomy.recoverable.escalate_after ({escalate_after}) must not exceed FIXING_CI's max_attempts ({fixing_ci_max_attempts})"
            ),
        );
    }
    c.count("failure_taxonomy.recoverable.max_attempts", &r.max_attempts);
    for (key, class) in [
        ("blocking", &raw.failure_taxonomy.blocking),
        ("permission_denied", &raw.failure_taxonomy.permission_denied),
        ("fatal", &raw.failure_taxonomy.fatal),
    ] {
        if let Some(s) = &class.worker_state {
            c.state(&format!("failure_taxonomy.{key}.worker_state"), s, &names);
        }
    }

    if c.diags.is_empty() {
        Ok(Contract {
            file: file.to_path_buf(),
            version: raw.version,
            initial: m.initial.value,
            states,
            transitions,
            from_any: m.from_any.into_iter().map(|s| s.value).collect(),
            sync_job_status: raw.completion.sync_job_status,
            if_sync_skipped: raw.completion.if_sync_skipped,
            default_worker_timeout,
            progress_window,
            timeouts,
            deadlock,
            checkpoint_interval,
            permission,
            transient_backoff,
            fixing_ci_max_attempts,
            escalate_after,
        })
    } else {
        c.diags.sort_by_key(|d| d.pos);
        Err(Diagnostics(c.diags))
    }
}

/// Backoff for transient forge errors (from the contract's failure taxonomy).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    pub initial: Duration,
    pub max: Duration,
    pub multiplier: f64,
    /// Retries after the first attempt.
    pub max_retries: u32,
}

impl RetryPolicy {
    /// The delay before retry number `n` (0-based).
    pub fn delay(&self, n: u32) -> Duration {
        let d = self.initial.as_secs_f64() * self.multiplier.powi(n as i32);
        Duration::from_secs_f64(d.min(self.max.as_secs_f64()))
    }
}

#[cfg(test)]
mod tests;
