//! Agent adapters: how one agent's output becomes [`Input`]s, and how it is started (argv
//! placeholders, conversation ids). One file per agent, `line.rs` for plain output:
//!
//! | `worker.agent` | stdout | stderr |
//! |---|---|---|
//! | `command` | lines (`line.rs`) | lines |
//! | `claude` | stream-json events (`claude.rs`) | a failed resume |
//! | `codex` | `exec --json` events (`codex.rs`) | approval / sandbox refusals |
//! | `aider` | lines and its cost line (`aider.rs`) | lines |
//!
//! Each reader thread owns one parser; a parser also says which lines are progress (an agent
//! retrying its API prints, but does not progress).

pub mod aider;
pub mod claude;
pub mod codex;
pub mod health;
pub mod line;
pub mod price;
pub mod render;
pub mod spend;

use super::input::Input;
use crate::config::Agent;
use line::{LineFilter, LineParser};
use std::sync::Arc;

/// What one output line came to.
#[derive(Debug, Default)]
pub struct Parsed {
    pub inputs: Vec<Input>,
    /// The line shows the agent working (extends timeouts; `Input::Activity`).
    pub progress: bool,
}

/// Reads one output stream of an agent, line by line.
pub trait StreamParser: Send {
    fn line(&mut self, line: &str) -> Parsed;

    /// Whether any bytes at all (a partial line) show the worker working.
    fn bytes_are_progress(&self) -> bool {
        false
    }
}

/// The parsers for `agent`'s stdout and stderr.
pub fn parsers(
    agent: Agent,
    filter: Arc<LineFilter>,
) -> (Box<dyn StreamParser>, Box<dyn StreamParser>) {
    let lines = |f: &Arc<LineFilter>| Box::new(LineParser { filter: f.clone() });
    match agent {
        Agent::Command => (lines(&filter), lines(&filter)),
        Agent::Claude => (
            Box::new(claude::ClaudeParser::new(filter)),
            Box::new(claude::ClaudeErrParser),
        ),
        Agent::Codex => (
            Box::new(codex::CodexParser::new(filter.clone())),
            Box::new(codex::CodexErrParser { filter }),
        ),
        Agent::Aider => (
            Box::new(aider::AiderParser::new(LineParser {
                filter: filter.clone(),
            })),
            lines(&filter),
        ),
    }
}

/// A new conversation id: a random UUID (version 4), as Claude's `--session-id` wants.
pub fn new_session_id() -> String {
    use std::io::Read;
    let mut b = [0u8; 16];
    let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut b));
    if read.is_err() {
        // Unlikely; still unique enough for one machine: time and pid.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        b[..8].copy_from_slice(&(t as u64).to_le_bytes());
        b[8..12].copy_from_slice(&std::process::id().to_le_bytes());
    }
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_are_v4_uuids() {
        let a = new_session_id();
        assert_eq!(a.len(), 36);
        assert_eq!(&a[14..15], "4");
        assert!("89ab".contains(&a[19..20]));
        assert_ne!(a, new_session_id());
    }
}
