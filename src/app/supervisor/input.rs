//! Everything that reaches a supervisor, as one type, and what it answers a claim with.
//!
//! Sources: the worker's output (reader threads), the CI thread, the requests inbox
//! (`orch report`, `orch cancel`), the clock, and the worker's exit. Agent adapters and
//! cascade watches add their inputs here.

use super::ci::CiAnswer;
use crate::milestone::{LineSignal, Milestone};
use crate::store::usage::Tokens;
use crate::store::workers::Request;

#[derive(Debug)]
pub enum Input {
    /// A milestone or permission-denial line from the worker's output, as printed.
    Line(LineSignal, String),
    /// The worker printed something (coalesced: at most about once a second per stream).
    Activity,
    /// The CI thread's answer to one query.
    Ci(CiAnswer),
    /// A request from the inbox.
    Request(Request),
    /// Time passes (about once a second): timeouts, new commits, the lease, checkpoints.
    Tick,
    /// The worker process ended (`None`: by a signal).
    WorkerExited(Option<i32>),
    /// The cascade watch: an upstream repository's base branch is red (the reason), or no
    /// longer (`None`).
    Upstream(Option<String>),
    /// A permission denial the agent reported itself (a structured event, or a refusal text
    /// in a tool's result): the tool and what it was denied. Counted once per tool call.
    Denial { tool: String, detail: String },
    /// What the agent's current run has used so far (figures for this run alone).
    Usage(RunUsage),
    /// The agent's conversation id (a respawn continues it).
    Session(String),
    /// The agent said something about its own health (see [`AgentNote`]).
    Note(AgentNote),
}

/// Usage of one agent run (one process) so far.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RunUsage {
    pub tokens: Tokens,
    pub cost_usd: f64,
    /// The run's final figures (Claude's `result` event).
    pub last: bool,
    /// The figures are the conversation's (Codex: cumulative per thread, across
    /// `exec resume`), not this run's: the supervisor takes the difference.
    pub thread_cumulative: bool,
}

/// What an agent says about its own health: none of it is progress.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentNote {
    /// It is retrying its model API (`api_retry`, "Reconnecting…").
    ApiRetry(String),
    /// Its API refused it for a rate limit; `resets_at` in Unix seconds when known.
    RateLimited {
        resets_at: Option<i64>,
        detail: String,
    },
    /// The conversation orch asked it to continue could not be resumed.
    ResumeFailed(String),
    /// The model's reply as the agent printed it (aider: the last line before its cost
    /// line): why a run that did nothing did nothing (a refusal, a question).
    Reply(String),
    /// Its final result: an error (`is_error`), or a success with nothing done.
    Result {
        is_error: bool,
        subtype: String,
        text: String,
    },
}

/// What a claim or request came to: printed by `orch report` and `orch cancel`, stored with
/// the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Taken (a repeated milestone, progress).
    Accepted,
    /// Taken, and the worker moved.
    Moved { from: Milestone, to: Milestone },
    /// Refused by the contract or by verification, and recorded as a violation.
    Refused { kind: String, detail: String },
    /// Nothing to do (e.g. a cancel of a worker that already ended).
    NoChange,
    /// A DONE claim waiting for a fresh CI answer: answered when it is judged.
    Deferred,
    /// Another supervisor owns the worker now: this one did nothing.
    LeaseLost,
}

impl Outcome {
    pub fn is_refusal(&self) -> bool {
        matches!(self, Outcome::Refused { .. } | Outcome::LeaseLost)
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Accepted => f.write_str("accepted"),
            Outcome::Moved { from, to } => write!(f, "accepted: {from} -> {to}"),
            Outcome::Refused { kind, detail } => write!(f, "refused ({kind}): {detail}"),
            Outcome::NoChange => f.write_str("no change"),
            Outcome::Deferred => f.write_str("deferred"),
            Outcome::LeaseLost => f.write_str("refused: its supervisor lost its lease"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_read_as_orch_report_prints_them() {
        let moved = Outcome::Moved {
            from: Milestone::PushedToCi,
            to: Milestone::Done,
        };
        assert_eq!(moved.to_string(), "accepted: PUSHED_TO_CI -> DONE");
        let refused = Outcome::Refused {
            kind: "done_without_ci_proof".into(),
            detail: "CI is red".into(),
        };
        assert_eq!(
            refused.to_string(),
            "refused (done_without_ci_proof): CI is red"
        );
        assert!(refused.is_refusal() && Outcome::LeaseLost.is_refusal());
        assert!(!moved.is_refusal() && !Outcome::NoChange.is_refusal());
    }
}
