//! aider's text output: lines as for any command (its prompt echo filtered), plus its cost
//! line `Tokens: 1.1k sent, 16 received. Cost: $0.0029 message, $0.0029 session.`

use super::line::LineParser;
use super::{Parsed, StreamParser};
use crate::app::supervisor::input::{Input, RunUsage};
use crate::store::usage::Tokens;

pub struct AiderParser {
    pub lines: LineParser,
    /// The run's tokens so far (each cost line is one message's).
    pub tokens: Tokens,
}

impl StreamParser for AiderParser {
    fn line(&mut self, line: &str) -> Parsed {
        let mut parsed = self.lines.line(line);
        if let Some(mut u) = cost_line(line) {
            self.tokens = self.tokens.plus(&u.tokens);
            u.tokens = self.tokens;
            parsed.inputs.push(Input::Usage(u));
        }
        parsed
    }

    fn bytes_are_progress(&self) -> bool {
        true
    }
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
}
