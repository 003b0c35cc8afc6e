//! Codex CLI's `exec --json` output (JSONL events; shapes in `agents.md`) as typed inputs.
//!
//! - Milestone lines come from `agent_message` items alone, never from a command's output.
//! - Denials: a `command_execution` item `declined`, or one whose output is a refusal text;
//!   and on stderr the `approval policy is Never; reject command` / `patch rejected` lines
//!   (the `--json` stream may omit early sandbox refusals: openai/codex#47433).
//! - Usage: `turn.completed.usage` is cumulative per thread (across `exec resume`): sent as
//!   such, the supervisor takes the difference. Codex reports no dollars.
//! - `error` "Reconnecting… waiting for network" is a note, not progress.

use super::{Parsed, StreamParser};
use crate::app::supervisor::agent::line::LineFilter;
use crate::app::supervisor::input::{AgentNote, Input, RunUsage};
use crate::store::usage::Tokens;
use serde_json::Value;
use std::collections::HashSet;
use std::sync::Arc;

pub struct CodexParser {
    filter: Arc<LineFilter>,
    denied: HashSet<String>,
}

impl CodexParser {
    pub fn new(filter: Arc<LineFilter>) -> CodexParser {
        CodexParser {
            filter,
            denied: HashSet::new(),
        }
    }

    fn event(&mut self, v: &Value, out: &mut Vec<Input>) -> bool {
        let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        match v["type"].as_str().unwrap_or("") {
            "thread.started" => {
                let id = s(v, "thread_id");
                if !id.is_empty() {
                    out.push(Input::Session(id));
                }
                true
            }
            "item.completed" | "item.updated" | "item.started" => {
                let item = &v["item"];
                match item["type"].as_str() {
                    Some("agent_message") if v["type"] == "item.completed" => {
                        for line in s(item, "text").lines() {
                            if let Some(sig) = self.filter.milestone(line) {
                                out.push(Input::Line(sig, line.to_string()));
                            }
                        }
                    }
                    Some("command_execution") if v["type"] == "item.completed" => {
                        let output = s(item, "aggregated_output");
                        let declined = item["status"].as_str() == Some("declined");
                        if (declined || self.filter.is_denial_text(&output))
                            && self.denied.insert(s(item, "id"))
                        {
                            out.push(Input::Denial {
                                tool: "shell".into(),
                                detail: format!(
                                    "{} — {}",
                                    s(item, "command"),
                                    if declined {
                                        "declined".into()
                                    } else {
                                        output.lines().next().unwrap_or("").to_string()
                                    }
                                ),
                            });
                        }
                    }
                    _ => {}
                }
                true
            }
            "turn.completed" => {
                let u = &v["usage"];
                let n = |k: &str| u[k].as_u64().unwrap_or(0);
                out.push(Input::Usage(RunUsage {
                    tokens: Tokens {
                        input: n("input_tokens").saturating_sub(n("cached_input_tokens")),
                        output: n("output_tokens") + n("reasoning_output_tokens"),
                        cache_read: n("cached_input_tokens"),
                        cache_write: n("cache_write_input_tokens"),
                    },
                    cost_usd: 0.0,
                    last: false,
                    thread_cumulative: true,
                }));
                true
            }
            "turn.failed" => {
                out.push(Input::Note(AgentNote::Result {
                    is_error: true,
                    subtype: "turn.failed".into(),
                    text: s(&v["error"], "message"),
                }));
                true
            }
            "error" => {
                let m = s(v, "message");
                out.push(Input::Note(AgentNote::ApiRetry(m)));
                false
            }
            _ => true,
        }
    }
}

impl StreamParser for CodexParser {
    fn line(&mut self, line: &str) -> Parsed {
        let mut inputs = Vec::new();
        let progress = match serde_json::from_str::<Value>(line) {
            Ok(v) => self.event(&v, &mut inputs),
            Err(_) => false,
        };
        Parsed { inputs, progress }
    }
}

/// Codex's stderr: its refusals (logged there even when `--json` omits them). Text mode
/// echoes the whole prompt here, so nothing else on it is read.
pub struct CodexErrParser {
    pub filter: Arc<LineFilter>,
}

impl StreamParser for CodexErrParser {
    fn line(&mut self, line: &str) -> Parsed {
        let refusal = line.contains("ERROR") && self.filter.is_denial_text(line);
        let inputs = if refusal {
            vec![Input::Denial {
                tool: "shell".into(),
                detail: line.trim().chars().take(200).collect(),
            }]
        } else {
            Vec::new()
        };
        Parsed {
            inputs,
            progress: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parser() -> CodexParser {
        let patterns = vec!["approval policy is Never; reject command".to_string()];
        CodexParser::new(Arc::new(LineFilter::new(patterns, &[b"DONE: <repo>\n"])))
    }

    #[test]
    fn codex_events_become_inputs() {
        let mut p = parser();
        let lines = [
            r#"{"type":"thread.started","thread_id":"0199a213-81c0-7800-8aa1-bbab2a035a53"}"#,
            r#"{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"bash -lc 'cat guide'","aggregated_output":"DONE: alpha all green\n","exit_code":0,"status":"completed"}}"#,
            r#"{"type":"item.completed","item":{"id":"item_2","type":"command_execution","command":"git push","aggregated_output":"","exit_code":null,"status":"declined"}}"#,
            r#"{"type":"item.completed","item":{"id":"item_3","type":"agent_message","text":"Pushed.\nPUSHED_TO_CI: alpha commit 0123456789ab"}}"#,
            r#"{"type":"turn.completed","usage":{"input_tokens":1500,"cached_input_tokens":500,"output_tokens":20}}"#,
        ];
        let inputs: Vec<Input> = lines.iter().flat_map(|l| p.line(l).inputs).collect();
        assert!(matches!(&inputs[0], Input::Session(id) if id.starts_with("0199a213")));
        assert!(matches!(&inputs[1], Input::Denial { detail, .. } if detail.contains("git push")));
        assert!(matches!(&inputs[2], Input::Line(..)));
        assert!(
            matches!(&inputs[3], Input::Usage(u) if u.thread_cumulative && u.tokens.total() == 1520)
        );
        assert_eq!(inputs.len(), 4);
        let r = p.line(r#"{"type":"error","message":"Reconnecting... waiting for network"}"#);
        assert!(!r.progress);
        let mut e = CodexErrParser {
            filter: p.filter.clone(),
        };
        let r = e.line("2026-01-01T00:00:00Z ERROR codex_core::tools::router: error=approval policy is Never; reject command — you cannot ask for escalated permissions");
        assert_eq!(r.inputs.len(), 1);
        assert!(e.line("user\nDONE: alpha").inputs.is_empty());
    }
}
