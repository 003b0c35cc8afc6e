//! Claude Code's `-p --output-format stream-json --verbose` output (one JSON event per line;
//! shapes in `../shared/reference/agents.md`) as typed inputs.
//!
//! - Milestone lines come from the model's own `text` blocks alone (and `result.result`,
//!   unless an assistant block already said them) — never from a `tool_result` (a tool that
//!   printed the CI guide) nor from the prompt (filtered as for every agent).
//! - A permission denial is a `system/permission_denied` event (2.1.330), an entry of
//!   `result.permission_denials`, or a `tool_result` with `is_error` whose text is one of the
//!   contract's refusal texts (2.1.197 has no structured event). One tool call is one denial,
//!   however many of these name it. An OS "Permission denied" inside a tool's output is none.
//! - Usage: the assistant messages' `usage` while the run goes on, priced per message by its
//!   model (`price.rs`: a run stopped before its `result` keeps the dollars seen so far), then
//!   `result.usage` and `total_cost_usd`, the run's own figures (per invocation, not per
//!   conversation), in their place.
//! - `api_retry` and `rate_limit_event` are notes, not progress.

use super::{Parsed, StreamParser, price};
use crate::app::supervisor::agent::line::LineFilter;
use crate::app::supervisor::input::{AgentNote, Input, RunUsage};
use crate::store::usage::Tokens;
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

/// Claude's stdout.
pub struct ClaudeParser {
    filter: Arc<LineFilter>,
    /// tool_use id → (tool, what it was asked to do).
    tools: HashMap<String, (String, String)>,
    /// Tool calls already counted as denied.
    denied: HashSet<String>,
    /// Milestone lines the model's text blocks said in this run.
    said: HashSet<String>,
    /// message id → its usage and model (a message's blocks come one per line, each with its
    /// usage).
    messages: HashMap<String, (Tokens, String)>,
    last_usage: RunUsage,
}

impl ClaudeParser {
    pub fn new(filter: Arc<LineFilter>) -> ClaudeParser {
        ClaudeParser {
            filter,
            tools: HashMap::new(),
            denied: HashSet::new(),
            said: HashSet::new(),
            messages: HashMap::new(),
            last_usage: RunUsage::default(),
        }
    }

    fn text(&mut self, text: &str, from_result: bool, out: &mut Vec<Input>) {
        for line in text.lines() {
            let Some(sig) = self.filter.milestone(line) else {
                continue;
            };
            let key = line.trim().to_string();
            if from_result && self.said.contains(&key) {
                continue; // the final message, already said by its text block
            }
            self.said.insert(key);
            out.push(Input::Line(sig, line.to_string()));
        }
    }

    fn denial(&mut self, id: &str, tool: Option<&str>, why: &str, out: &mut Vec<Input>) {
        if !id.is_empty() && !self.denied.insert(id.to_string()) {
            return;
        }
        let (known_tool, input) = self.tools.get(id).cloned().unwrap_or_default();
        let tool = tool
            .map(str::to_string)
            .filter(|t| !t.is_empty())
            .unwrap_or(known_tool);
        let mut detail = input;
        if !why.is_empty() {
            if !detail.is_empty() {
                detail.push_str(" — ");
            }
            detail.push_str(why);
        }
        out.push(Input::Denial {
            tool: if tool.is_empty() {
                "a tool".into()
            } else {
                tool
            },
            detail,
        });
    }

    fn usage(&mut self, u: RunUsage, out: &mut Vec<Input>) {
        if u != self.last_usage {
            self.last_usage = u;
            out.push(Input::Usage(u));
        }
    }

    fn event(&mut self, v: &Value, out: &mut Vec<Input>) -> bool {
        let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        match (v["type"].as_str(), v["subtype"].as_str()) {
            (Some("system"), Some("init")) => {
                let id = s(v, "session_id");
                if !id.is_empty() {
                    out.push(Input::Session(id));
                }
                true
            }
            (Some("system"), Some("permission_denied")) => {
                let why = [s(v, "message"), s(v, "decision_reason")]
                    .into_iter()
                    .find(|t| !t.is_empty())
                    .unwrap_or_default();
                let id = s(v, "tool_use_id");
                let tool = s(v, "tool_name");
                self.denial(&id, Some(&tool), &first_line(&why), out);
                true
            }
            (Some("system"), Some("api_retry")) => {
                out.push(Input::Note(AgentNote::ApiRetry(format!(
                    "attempt {} of {}: {} (status {})",
                    v["attempt"],
                    v["max_retries"],
                    s(v, "error"),
                    v["error_status"]
                ))));
                false
            }
            (Some("rate_limit_event"), _) => {
                let info = &v["rate_limit_info"];
                if info["status"].as_str() == Some("rejected") {
                    out.push(Input::Note(AgentNote::RateLimited {
                        resets_at: info["resetsAt"].as_i64(),
                        detail: format!("{} limit", s(info, "rateLimitType")),
                    }));
                }
                false
            }
            (Some("assistant"), _) => {
                let msg = &v["message"];
                for block in msg["content"].as_array().into_iter().flatten() {
                    match block["type"].as_str() {
                        Some("text") => {
                            let text = s(block, "text");
                            self.text(&text, false, out);
                        }
                        Some("tool_use") => {
                            let tool = s(block, "name");
                            let what = tool_input(&tool, &block["input"]);
                            self.tools.insert(s(block, "id"), (tool, what));
                        }
                        _ => {}
                    }
                }
                if let Some(id) = msg["id"].as_str()
                    && msg.get("usage").is_some()
                {
                    let model = s(msg, "model");
                    self.messages
                        .insert(id.to_string(), (tokens(&msg["usage"]), model));
                    let (sum, cost) = self.messages.values().fold(
                        (Tokens::default(), 0.0),
                        |(sum, cost), (t, model)| {
                            (sum.plus(t), cost + price::claude(model).cost(t))
                        },
                    );
                    let u = RunUsage {
                        tokens: sum,
                        cost_usd: cost,
                        ..RunUsage::default()
                    };
                    self.usage(u, out);
                }
                true
            }
            (Some("user"), _) => {
                for block in v["message"]["content"].as_array().into_iter().flatten() {
                    if block["type"].as_str() == Some("tool_result")
                        && block["is_error"].as_bool() == Some(true)
                    {
                        let text = content_text(&block["content"]);
                        if self.filter.is_denial_text(&text) {
                            let id = s(block, "tool_use_id");
                            self.denial(&id, None, &first_line(&text), out);
                        }
                    }
                }
                true
            }
            (Some("result"), _) => {
                for d in v["permission_denials"].as_array().into_iter().flatten() {
                    let id = s(d, "tool_use_id");
                    if !self.tools.contains_key(&id) {
                        let tool = s(d, "tool_name");
                        let what = tool_input(&tool, &d["tool_input"]);
                        self.tools.insert(id.clone(), (tool, what));
                    }
                    self.denial(&id, None, "", out);
                }
                let is_error = v["is_error"].as_bool().unwrap_or(false);
                let subtype = s(v, "subtype");
                let text = s(v, "result");
                if !is_error {
                    self.text(&text, true, out);
                }
                let u = RunUsage {
                    tokens: tokens(&v["usage"]),
                    cost_usd: v["total_cost_usd"].as_f64().unwrap_or(0.0),
                    last: true,
                    thread_cumulative: false,
                };
                self.usage(u, out);
                if is_error || subtype != "success" {
                    out.push(Input::Note(AgentNote::Result {
                        is_error,
                        subtype,
                        text: first_line(&text),
                    }));
                }
                true
            }
            _ => true,
        }
    }
}

impl StreamParser for ClaudeParser {
    fn line(&mut self, line: &str) -> Parsed {
        let mut inputs = Vec::new();
        let progress = match serde_json::from_str::<Value>(line) {
            Ok(v) => self.event(&v, &mut inputs),
            // Not an event (a warning): nothing to read in it, and not the model working.
            Err(_) => false,
        };
        Parsed { inputs, progress }
    }
}

/// Claude's stderr: only what says it could not continue the conversation.
pub struct ClaudeErrParser;

impl StreamParser for ClaudeErrParser {
    fn line(&mut self, line: &str) -> Parsed {
        let inputs = if line.contains("No conversation found with session ID") {
            vec![Input::Note(AgentNote::ResumeFailed(
                line.trim().to_string(),
            ))]
        } else {
            Vec::new()
        };
        Parsed {
            inputs,
            progress: false,
        }
    }
}

fn tokens(u: &Value) -> Tokens {
    let n = |k: &str| u[k].as_u64().unwrap_or(0);
    Tokens {
        input: n("input_tokens"),
        output: n("output_tokens"),
        cache_read: n("cache_read_input_tokens"),
        cache_write: n("cache_creation_input_tokens"),
    }
}

/// A tool_result's content: a string, or text blocks.
pub(super) fn content_text(c: &Value) -> String {
    match c {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// What a tool was asked to do, in a few words: Bash's command, a file tool's path, else
/// the input as JSON.
fn tool_input(tool: &str, input: &Value) -> String {
    let text = match (tool, input) {
        (_, Value::Null) => String::new(),
        ("Bash", i) if i["command"].is_string() => i["command"].as_str().unwrap_or("").into(),
        (_, i) if i["file_path"].is_string() => i["file_path"].as_str().unwrap_or("").into(),
        (_, i) => i.to_string(),
    };
    first_line(&text)
}

fn first_line(s: &str) -> String {
    let l = s.lines().next().unwrap_or("").trim();
    crate::app::supervisor::claims::truncate(l, 200)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::milestone::{LineSignal, Milestone};

    const PATTERNS: [&str; 5] = [
        "Permission to use ",
        "Permission for this tool use was denied",
        "This command requires approval",
        "but you haven't granted it yet",
        "needs approval. The path is inside the working directories",
    ];

    fn parser(prompt: &str) -> ClaudeParser {
        let patterns = PATTERNS.iter().map(|p| p.to_string()).collect();
        ClaudeParser::new(Arc::new(LineFilter::new(patterns, &[prompt.as_bytes()])))
    }

    fn feed(p: &mut ClaudeParser, lines: &[&str]) -> Vec<Input> {
        lines.iter().flat_map(|l| p.line(l).inputs).collect()
    }

    fn milestones(inputs: &[Input]) -> Vec<Milestone> {
        inputs
            .iter()
            .filter_map(|i| match i {
                Input::Line(LineSignal::Milestone { milestone, .. }, _) => Some(*milestone),
                _ => None,
            })
            .collect()
    }

    fn denials(inputs: &[Input]) -> Vec<(String, String)> {
        inputs
            .iter()
            .filter_map(|i| match i {
                Input::Denial { tool, detail } => Some((tool.clone(), detail.clone())),
                _ => None,
            })
            .collect()
    }

    const INIT: &str = r#"{"type":"system","subtype":"init","cwd":"/w","session_id":"6f1c2a70-1111-4222-8333-944455556666","tools":["Bash"],"model":"claude-x","permissionMode":"acceptEdits","claude_code_version":"2.1.197"}"#;

    #[test]
    fn milestones_come_from_the_models_text_only_and_once() {
        let mut p = parser("Report:\nDONE: <repo> all green\n");
        let inputs = feed(
            &mut p,
            &[
                INIT,
                r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"text","text":"WORKING: reading the code"}],"usage":{"input_tokens":10,"output_tokens":5}},"session_id":"s"}"#,
                r#"{"type":"assistant","message":{"id":"m2","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"cat \"$ORCH_CI_GUIDE\""}}],"usage":{"input_tokens":20,"output_tokens":5}}}"#,
                r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"FIXING_CI: <job> - <diagnosis>\nPUSHED_TO_CI: alpha commit 0123456789abcdef","is_error":false}]},"tool_use_result":{"stdout":"FIXING_CI: x"}}"#,
                r#"{"type":"assistant","message":{"id":"m3","content":[{"type":"text","text":"All set.\nDONE: <repo> all green\nDONE: alpha all green"}],"usage":{"input_tokens":30,"output_tokens":7}}}"#,
                r#"{"type":"result","subtype":"success","is_error":false,"num_turns":3,"result":"All set.\nDONE: alpha all green","session_id":"s","total_cost_usd":0.01514,"usage":{"input_tokens":60,"output_tokens":17,"cache_read_input_tokens":100,"cache_creation_input_tokens":3},"permission_denials":[]}"#,
            ],
        );
        assert!(matches!(&inputs[0], Input::Session(s) if s.starts_with("6f1c2a70")));
        // WORKING from text; nothing from the tool's output; the echoed template line
        // nothing; DONE once (the result repeats the final text).
        assert_eq!(
            milestones(&inputs),
            vec![Milestone::Working, Milestone::Done]
        );
        let last = inputs
            .iter()
            .filter_map(|i| match i {
                Input::Usage(u) => Some(*u),
                _ => None,
            })
            .next_back()
            .unwrap();
        assert!(last.last && (last.cost_usd - 0.01514).abs() < 1e-9);
        assert_eq!(last.tokens.total(), 180);
        assert!(denials(&inputs).is_empty());
    }

    #[test]
    fn dollars_are_priced_from_the_messages_seen_until_the_result_says_them() {
        let mut p = parser("");
        let inputs = feed(
            &mut p,
            &[
                // One message in two blocks (its usage counted once), then one of another model.
                r#"{"type":"assistant","message":{"id":"m1","model":"claude-sonnet-4-5-20250929","content":[{"type":"text","text":"a"}],"usage":{"input_tokens":1000,"output_tokens":1,"cache_read_input_tokens":2000}}}"#,
                r#"{"type":"assistant","message":{"id":"m1","model":"claude-sonnet-4-5-20250929","content":[{"type":"text","text":"b"}],"usage":{"input_tokens":1000,"output_tokens":50,"cache_read_input_tokens":2000}}}"#,
                r#"{"type":"assistant","message":{"id":"m2","model":"claude-opus-4-1-20250805","content":[{"type":"text","text":"c"}],"usage":{"input_tokens":100,"output_tokens":10,"cache_creation_input_tokens":1000}}}"#,
            ],
        );
        let last = |inputs: &[Input]| {
            inputs
                .iter()
                .filter_map(|i| match i {
                    Input::Usage(u) => Some(*u),
                    _ => None,
                })
                .next_back()
                .unwrap()
        };
        let u = last(&inputs);
        // Sonnet: 1000×3 + 50×15 + 2000×0.3; Opus 4.1: 100×15 + 10×75 + 1000×18.75 (per Mtok).
        let want = (3000.0 + 750.0 + 600.0 + 1500.0 + 750.0 + 18750.0) / 1e6;
        assert!((u.cost_usd - want).abs() < 1e-12, "{u:?}");
        assert!(!u.last);
        assert_eq!(u.tokens.total(), 1000 + 50 + 2000 + 100 + 10 + 1000);
        // Claude Code's own figure replaces the estimate.
        let r = p.line(r#"{"type":"result","subtype":"success","is_error":false,"result":"","total_cost_usd":0.03,"usage":{"input_tokens":1100,"output_tokens":60}}"#);
        assert_eq!(last(&r.inputs).cost_usd, 0.03);
    }

    #[test]
    fn denials_2_1_197_from_refusal_texts_each_call_once_os_errors_not() {
        let mut p = parser("");
        let inputs = feed(
            &mut p,
            &[
                r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"git push origin HEAD"}}]}}"#,
                r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t1","content":"This command requires approval","is_error":true}]},"tool_use_result":"Error: This command requires approval"}"#,
                r#"{"type":"assistant","message":{"id":"m2","content":[{"type":"tool_use","id":"t2","name":"Bash","input":{"command":"mkdir /root/xx"}}]}}"#,
                r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t2","content":"Exit code 1\nmkdir: cannot create directory '/root/xx': Permission denied","is_error":true}]}}"#,
                r#"{"type":"assistant","message":{"id":"m3","content":[{"type":"tool_use","id":"t3","name":"Write","input":{"file_path":"/w/hello.txt","content":"x"}}]}}"#,
                r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t3","content":[{"type":"text","text":"Claude requested permissions to write to /w/hello.txt, but you haven't granted it yet."}],"is_error":true}]}}"#,
                r#"{"type":"result","subtype":"success","is_error":false,"result":"I could not push.","total_cost_usd":0.002,"usage":{"input_tokens":1,"output_tokens":1},"permission_denials":[{"tool_name":"Bash","tool_use_id":"t1","tool_input":{"command":"git push origin HEAD"}},{"tool_name":"Write","tool_use_id":"t3","tool_input":{"file_path":"/w/hello.txt"}}]}"#,
            ],
        );
        let d = denials(&inputs);
        assert_eq!(d.len(), 2, "{d:?}");
        assert_eq!(d[0].0, "Bash");
        assert!(d[0].1.contains("git push origin HEAD") && d[0].1.contains("requires approval"));
        assert_eq!(d[1].0, "Write");
        assert!(d[1].1.contains("/w/hello.txt"));
    }

    #[test]
    fn denials_2_1_330_structured_then_result_count_once() {
        let mut p = parser("");
        let inputs = feed(
            &mut p,
            &[
                r#"{"type":"assistant","message":{"id":"m1","content":[{"type":"tool_use","id":"t9","name":"Bash","input":{"command":"rm -rf build"}}]}}"#,
                r#"{"type":"system","subtype":"permission_denied","tool_name":"Bash","tool_use_id":"t9","decision_reason_type":"mode","decision_reason":"no approval surface","message":"Permission for this tool use was denied. It requires approval","session_id":"s"}"#,
                r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t9","content":"Permission for this tool use was denied. It requires approval, and this session has no approval surface","is_error":true}]}}"#,
                r#"{"type":"result","subtype":"success","is_error":false,"result":"","total_cost_usd":0.0,"usage":{},"permission_denials":[{"tool_name":"Bash","tool_use_id":"t9","tool_input":{"command":"rm -rf build"}},{"tool_name":"Edit","tool_use_id":"t10","tool_input":{"file_path":"/w/a.rs"}}]}"#,
            ],
        );
        let d = denials(&inputs);
        assert_eq!(d.len(), 2, "{d:?}");
        assert!(d[0].1.starts_with("rm -rf build"));
        assert_eq!(d[1], ("Edit".to_string(), "/w/a.rs".to_string()));
    }

    #[test]
    fn retries_and_rate_limits_are_notes_not_progress_errors_are_classified() {
        let mut p = parser("");
        let r = p.line(r#"{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":500,"error_status":401,"error":"authentication_failed"}"#);
        assert!(!r.progress);
        assert!(matches!(&r.inputs[0], Input::Note(AgentNote::ApiRetry(t)) if t.contains("401")));
        let r = p.line(r#"{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1767225600,"rateLimitType":"five_hour"}}"#);
        assert!(!r.progress);
        assert!(matches!(
            &r.inputs[0],
            Input::Note(AgentNote::RateLimited {
                resets_at: Some(1767225600),
                ..
            })
        ));
        let r = p.line(r#"{"type":"rate_limit_event","rate_limit_info":{"status":"allowed"}}"#);
        assert!(r.inputs.is_empty() && !r.progress);
        let r = p.line(r#"{"type":"result","subtype":"success","is_error":true,"result":"API Error: Unable to connect to API (ConnectionRefused)\nDONE: x","total_cost_usd":0,"usage":{}}"#);
        assert!(milestones(&r.inputs).is_empty());
        assert!(r.inputs.iter().any(
            |i| matches!(i, Input::Note(AgentNote::Result { is_error: true, text, .. }) if text.contains("Unable to connect"))
        ));
        assert!(!p.line("not json").progress);
        let e = ClaudeErrParser.line("No conversation found with session ID: 0b8e");
        assert!(matches!(
            &e.inputs[0],
            Input::Note(AgentNote::ResumeFailed(_))
        ));
    }
}
