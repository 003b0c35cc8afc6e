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
            AgentNote::RateLimited { resets_at, detail } => {
                let until_ms = resets_at.map(|t| t.saturating_mul(1000));
                self.agent.health.rate_limited = Some(until_ms);
                let when = until_ms
                    .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
                    .map(|t| format!(" until {t}"))
                    .unwrap_or_default();
                let agent = self.env.config.worker.agent.as_str();
                let message = format!(
                    "worker {}: the {agent} API is rate-limited{when} ({detail})",
                    self.w.id
                );
                // No new worker of this agent starts before the reset (spawn asks).
                if let Some(until) = until_ms {
                    let _ = self
                        .store
                        .write(|tx| crate::store::usage::limit_agent(tx, agent, until, &message));
                }
                let warn = crate::milestone::Event::AgentWarning {
                    kind: "agent_rate_limited".into(),
                    message: message.clone(),
                };
                self.apply(warn, None, Vec::new());
                ("agent_rate_limited", message)
            }
            AgentNote::ResumeFailed(d) => {
                self.agent.resume_failed = true;
                (
                    "agent_resume_failed",
                    format!("the conversation could not be continued: {d}"),
                )
            }
            AgentNote::Reply(text) => {
                self.agent.health.last_reply = Some(text);
                return;
            }
            AgentNote::Result {
                is_error,
                subtype,
                text,
            } => (
                {
                    if is_error {
                        self.agent.health.error_result = Some(text.clone());
                    }
                    "agent_result"
                },
                format!(
                    "the agent ended its run with {subtype}{}: {text}",
                    if is_error { " (an error)" } else { "" }
                ),
            ),
        };
        if kind != "agent_rate_limited" && !self.agent.notes_said.insert(kind) {
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
        if !self.agent.resume_failed
            || self.agent.fresh_retry_used
            || self.w.milestone().is_terminal()
        {
            return false;
        }
        self.agent.fresh_retry_used = true;
        self.agent.resume_failed = false;
        let fact = self.worker_gone(code);
        self.record(vec![
            fact,
            Fact::Logged {
                kind: "agent_new_conversation",
                detail: "the previous conversation could not be resumed: starting a new one".into(),
            },
        ]);
        self.agent.spend.before.session_started = false;
        self.agent.spend.dirty = true;
        self.save_spend();
        self.start_worker().is_ok()
    }

    /// Writes what the agent spent, if it changed.
    pub(super) fn save_spend(&mut self) {
        if !self.agent.spend.dirty {
            return;
        }
        let (id, total) = (self.w.id.clone(), self.agent.spend.total());
        let saved = self
            .store
            .write(|tx| crate::store::usage::save_usage(tx, &id, &total, now_ms()));
        match saved {
            Ok(()) => self.agent.spend.dirty = false,
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
        if self.agent.spend.run != input::RunUsage::default() {
            row = self.agent.spend.total();
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
        self.agent.spend = Spend::new(row);
        self.agent.spend.dirty = true;
        self.save_spend();
        self.agent.notes_said.clear();
        Launch {
            session_id,
            resume,
            message,
        }
    }

    /// How the agent's run that just ended (with `code`) is classified (see
    /// `agent/health.rs`): the event to apply first, if any. Plain commands and workers past
    /// their push (CI decides) are left as they are.
    pub(super) fn classify_end(&self, code: Option<i32>) -> Option<crate::milestone::Event> {
        use super::agent::health::{Ended, classify};
        if self.env.config.worker.agent == crate::config::Agent::Command
            || !matches!(
                self.w.progress.milestone,
                crate::milestone::Milestone::Working | crate::milestone::Milestone::FixingCi
            )
        {
            return None;
        }
        let (blocking, detail) = match classify(code, &self.agent.health)? {
            Ended::Blocking(d) => (true, d),
            Ended::Transient(d) => (false, d),
        };
        Some(crate::milestone::Event::AgentEnded { blocking, detail })
    }
}
