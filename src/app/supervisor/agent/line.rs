//! The generic line adapter (`worker.agent: command`, and aider's text): every output line
//! is read for milestone and permission-denial lines, except the lines orch gave the worker.

use super::{Parsed, StreamParser};
use crate::app::supervisor::input::Input;
use crate::milestone::{LineSignal, parse_line};
use std::sync::Arc;

/// Which lines of a worker's output are signals: milestone and permission-denial lines
/// (`milestone::parse_line`), except the text orch itself gave the worker — its prompt and CI
/// guide, whose lines name every milestone. An agent that echoes its prompt (Codex, aider) or
/// prints the guide with a tool (`cat "$ORCH_CI_GUIDE"`) claims nothing by it.
pub struct LineFilter {
    patterns: Vec<String>,
    given: std::collections::HashSet<String>,
}

impl LineFilter {
    pub fn new(patterns: Vec<String>, texts: &[&[u8]]) -> LineFilter {
        let given = texts
            .iter()
            .flat_map(|t| {
                String::from_utf8_lossy(t)
                    .lines()
                    .map(normalise)
                    .collect::<Vec<_>>()
            })
            .filter(|l| !l.is_empty())
            .collect();
        LineFilter { patterns, given }
    }

    /// A milestone or permission-denial line (generic workers).
    pub fn signal(&self, line: &str) -> Option<LineSignal> {
        let sig = parse_line(line, &self.patterns)?;
        (!self.given.contains(&normalise(line))).then_some(sig)
    }

    /// A milestone (or decision) line alone: what an agent's own text may say (a denial is
    /// known from the agent's events, not from what its model writes).
    pub fn milestone(&self, line: &str) -> Option<LineSignal> {
        match parse_line(line, &[])? {
            sig @ (LineSignal::Milestone { .. } | LineSignal::Decision(_)) => {
                (!self.given.contains(&normalise(line))).then_some(sig)
            }
            LineSignal::PermissionDenial => None,
        }
    }

    /// Whether `text` (a tool's result) is one of the permission-refusal texts.
    pub fn is_denial_text(&self, text: &str) -> bool {
        self.patterns.iter().any(|p| text.contains(p.as_str()))
    }
}

/// A line as compared with the given texts: without surrounding blanks or the quote marks
/// and bullets agents put before echoed text.
fn normalise(line: &str) -> String {
    line.trim()
        .trim_start_matches(['>', '|', '-', '*', ' '])
        .trim()
        .to_string()
}

/// Plain text output: every byte is progress, every line may be a signal.
pub struct LineParser {
    pub filter: Arc<LineFilter>,
}

impl StreamParser for LineParser {
    fn line(&mut self, line: &str) -> Parsed {
        Parsed {
            inputs: self
                .filter
                .signal(line)
                .map(|sig| Input::Line(sig, line.to_string()))
                .into_iter()
                .collect(),
            progress: true,
        }
    }

    fn bytes_are_progress(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_orch_gave_the_worker_claim_nothing() {
        let prompt =
            b"Report milestones:\nPUSHED_TO_CI: <repo> commit <sha>\n> DONE: <repo> all green\n";
        let guide = b"FIXING_CI: <job> - <diagnosis>\n";
        let f = LineFilter::new(vec!["auto-denied".into()], &[prompt, guide]);
        // Echoed, quoted or printed by a tool: nothing.
        assert!(f.signal("PUSHED_TO_CI: <repo> commit <sha>").is_none());
        assert!(f.signal("  > DONE: <repo> all green").is_none());
        assert!(f.signal("FIXING_CI: <job> - <diagnosis>").is_none());
        // The worker's own lines still count.
        assert!(
            f.signal("PUSHED_TO_CI: alpha commit 0123456789abcdef")
                .is_some()
        );
        assert!(
            f.signal("DONE: alpha all green, radicle-push: success")
                .is_some()
        );
        assert!(f.signal("Permission auto-denied for Bash").is_some());
        // An agent's own text claims milestones, never denials.
        assert!(f.milestone("Permission auto-denied for Bash").is_none());
        assert!(f.milestone("DONE: alpha all green").is_some());
        assert!(f.milestone("> DONE: <repo> all green").is_none());
    }
}
