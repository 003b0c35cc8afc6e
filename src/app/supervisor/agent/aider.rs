//! aider's text output (aider 0.86.2 with `--no-pretty`): lines as for any command (its prompt
//! echo filtered), plus
//! - its cost line `Tokens: 1.1k sent, 16 received. Cost: $0.0029 message, $0.0029 session.`;
//! - the model's reply: the last non-blank line before a cost line (a note: why a run that did
//!   nothing did nothing, e.g. a refusal);
//! - its API failures, `litellm.AuthenticationError: …`, `litellm.RateLimitError: …`: an error
//!   result (aider prints them and exits 0, so the exit code says nothing).

use super::line::LineParser;
use super::{Parsed, StreamParser};
use crate::app::supervisor::input::{AgentNote, Input, RunUsage};
use crate::store::usage::Tokens;

pub struct AiderParser {
    pub lines: LineParser,
    /// The run's tokens so far (each cost line is one message's).
    pub tokens: Tokens,
    /// The last non-blank line printed (before a cost line: the model's reply).
    pub last_line: String,
}

impl AiderParser {
    pub fn new(lines: LineParser) -> AiderParser {
        AiderParser {
            lines,
            tokens: Tokens::default(),
            last_line: String::new(),
        }
    }
}

impl StreamParser for AiderParser {
    fn line(&mut self, line: &str) -> Parsed {
        let mut parsed = self.lines.line(line);
        if let Some(mut u) = cost_line(line) {
            self.tokens = self.tokens.plus(&u.tokens);
            u.tokens = self.tokens;
            parsed.inputs.push(Input::Usage(u));
            if !self.last_line.is_empty() {
                let reply = std::mem::take(&mut self.last_line);
                parsed.inputs.push(Input::Note(AgentNote::Reply(reply)));
            }
        } else if let Some(error) = api_error(line) {
            parsed.inputs.push(Input::Note(error));
        } else if !line.trim().is_empty() {
            self.last_line = line.trim().to_string();
        }
        parsed
    }

    fn bytes_are_progress(&self) -> bool {
        true
    }
}

/// `litellm.AuthenticationError: AuthenticationError: OpenAIException - …`: the API refused.
fn api_error(line: &str) -> Option<AgentNote> {
    let rest = line.trim().strip_prefix("litellm.")?;
    let (kind, _) = rest.split_once(": ")?;
    kind.ends_with("Error").then(|| AgentNote::Result {
        is_error: true,
        subtype: kind.to_string(),
        text: crate::app::supervisor::claims::truncate(line.trim(), 200),
    })
}

/// aider's cost line: the message's tokens, and the `session` dollars (this process: one run).
fn cost_line(line: &str) -> Option<RunUsage> {
    let rest = line.trim().strip_prefix("Tokens: ")?;
    let (tokens, cost) = rest.split_once(". Cost: ")?;
    let mut t = Tokens::default();
    for part in tokens.split(", ") {
        let (n, what) = part.split_once(' ')?;
        let n = count(n)?;
        if what.starts_with("sent") {
            t.input += n;
        } else if what.starts_with("received") {
            t.output += n;
        } else if what.starts_with("cache hit") {
            t.cache_read += n;
        } else if what.starts_with("cache write") {
            t.cache_write += n;
        }
    }
    let session = cost.split(", ").find(|p| p.ends_with("session."))?;
    let dollars = session.trim_start_matches('$').split(' ').next()?;
    Some(RunUsage {
        tokens: t,
        cost_usd: dollars.parse().ok()?,
        ..RunUsage::default()
    })
}

/// "1.1k" → 1100, "16" → 16.
fn count(s: &str) -> Option<u64> {
    let (num, mult) = match s.strip_suffix('k') {
        Some(n) => (n, 1_000.0),
        None => match s.strip_suffix('M') {
            Some(n) => (n, 1_000_000.0),
            None => (s, 1.0),
        },
    };
    Some((num.parse::<f64>().ok()? * mult).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cost_line_is_read() {
        let u =
            cost_line("Tokens: 1.1k sent, 16 received. Cost: $0.0029 message, $0.0031 session.")
                .unwrap();
        assert_eq!(u.tokens.input, 1100);
        assert_eq!(u.tokens.output, 16);
        assert!((u.cost_usd - 0.0031).abs() < 1e-9);
        assert!(cost_line("DONE: alpha").is_none());
    }

    #[test]
    fn the_reply_before_the_cost_line_and_api_errors_are_notes() {
        let filter = std::sync::Arc::new(super::super::line::LineFilter::new(Vec::new(), &[]));
        let mut p = AiderParser::new(LineParser { filter });
        let notes = |p: &mut AiderParser, lines: &[&str]| -> Vec<AgentNote> {
            lines
                .iter()
                .flat_map(|l| p.line(l).inputs)
                .filter_map(|i| match i {
                    Input::Note(n) => Some(n),
                    _ => None,
                })
                .collect()
        };
        let n = notes(
            &mut p,
            &[
                "Repo-map: using 4096 tokens, auto refresh",
                "",
                "I'm sorry, but I can't help with deleting the production database.",
                "",
                "Tokens: 2.5k sent, 15 received. Cost: $0.0065 message, $0.0065 session.",
            ],
        );
        assert_eq!(
            n,
            vec![AgentNote::Reply(
                "I'm sorry, but I can't help with deleting the production database.".into()
            )]
        );
        let n = notes(
            &mut p,
            &["litellm.AuthenticationError: AuthenticationError: OpenAIException - Incorrect "],
        );
        assert!(
            matches!(&n[..], [AgentNote::Result { is_error: true, subtype, .. }] if subtype == "AuthenticationError")
        );
        assert!(notes(&mut p, &["litellm.foo is not an error line"]).is_empty());
    }
}
