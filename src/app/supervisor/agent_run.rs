//! What the supervisor does with an agent's own reports: health notes, a conversation that
//! could not be resumed, what the agent spent, and how its next run starts.

use super::Supervisor;
use super::agent::{self, spend::Spend};
use super::claims::truncate;
use super::input::{self, AgentNote};
use super::journal::Fact;
use super::worker::Launch;
use crate::forge::Forge;
use crate::store::now_ms;

impl<F: Forge + 'static> Supervisor<'_, F> {
    /// Logs what an agent says about its health (each kind once per run; rate limits each
    /// time); a failed resume makes the next start a new conversation.
    pub(super) fn agent_note(&mut self, note: AgentNote) {
        let (kind, detail) = match note {
            AgentNote::ApiRetry(d) => (
                "agent_api_retry",
                format!("the agent is retrying its API: {d}"),
            ),
            AgentNote::RateLimited { resets_at, detail } => (
                "agent_rate_limited",
                format!(
                    "the agent is rate-limited ({detail}){}",
                    resets_at
                        .map(|t| format!(" until {t} (Unix time)"))
                        .unwrap_or_default()
                ),
            ),
            AgentNote::ResumeFailed(d) => {
                self.resume_failed = true;
                (
                    "agent_resume_failed",
                    format!("the conversation could not be continued: {d}"),
                )
            }
            AgentNote::Result {
                is_error,
                subtype,
                text,
            } => (
                "agent_result",
                format!(
                    "the agent ended its run with {subtype}{}: {text}",
                    if is_error { " (an error)" } else { "" }
                ),
            ),
        };
        if kind != "agent_rate_limited" && !self.notes_said.insert(kind) {
            return;
        }
        tracing::warn!(worker = %self.w.id, "{detail}");
        self.record(vec![Fact::Logged {
            kind,
            detail: truncate(&detail, 500),
        }]);
    }

    /// A run that could not continue its conversation ended: starts a new conversation at
    /// once (once per supervisor). True when it did.
    pub(super) fn retry_fresh(&mut self, code: Option<i32>) -> bool {
        if !self.resume_failed || self.fresh_retry_used || self.w.milestone().is_terminal() {
            return false;
        }
        self.fresh_retry_used = true;
        self.resume_failed = false;
        let fact = self.worker_gone(code);
        self.record(vec![
            fact,
            Fact::Logged {
                kind: "agent_new_conversation",
                detail: "the previous conversation could not be resumed: starting a new one".into(),
            },
        ]);
        self.spend.before.session_started = false;
        self.spend.dirty = true;
        self.save_spend();
        self.start_worker().is_ok()
    }

    /// Writes what the agent spent, if it changed.
    pub(super) fn save_spend(&mut self) {
        if !self.spend.dirty {
            return;
        }
        let (id, total) = (self.w.id.clone(), self.spend.total());
        let saved = self
            .store
            .write(|tx| crate::store::usage::save_usage(tx, &id, &total, now_ms()));
        match saved {
            Ok(()) => self.spend.dirty = false,
            Err(e) => {
                tracing::warn!(worker = %self.w.id, error = %e, "cannot record the agent's usage")
            }
        }
    }

    /// How this run starts: a respawn of an agent that keeps conversations continues the
    /// last one (its new message: the resume note), anything else starts a new one.
    pub(super) fn launch(&mut self) -> Launch {
        let agent = self.env.config.worker.agent;
        let id = self.w.id.clone();
        let mut row = self
            .store
            .read(|tx| crate::store::usage::get_usage(tx, &id))
            .ok()
            .flatten()
            .unwrap_or_default();
        // Spent so far: the last run's figures are in the row already.
        if self.spend.run != input::RunUsage::default() {
            row = self.spend.total();
        }
        let resume = agent.resumes() && row.session_started && row.session_id.is_some();
        let session_id = match (&row.session_id, resume) {
            (Some(s), true) => s.clone(),
            _ => agent::new_session_id(),
        };
        if !resume {
            row.session_id = Some(session_id.clone());
            row.session_started = false;
            row.thread_tokens = None;
        }
        let message = resume.then(|| self.w.resume_note.clone()).flatten();
        self.spend = Spend::new(row);
        self.spend.dirty = true;
        self.save_spend();
        self.notes_said.clear();
        Launch {
            session_id,
            resume,
            message,
        }
    }
}
