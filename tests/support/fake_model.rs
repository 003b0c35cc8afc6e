//! A fake Anthropic Messages API on 127.0.0.1 for the real Claude Code CLI
//! (`ANTHROPIC_BASE_URL`): `POST /v1/messages` answered as a server-sent event stream, from a
//! script the test writes.
//!
//! Which turn of the script answers a request is read from the request itself: the number of
//! assistant messages in its history. Retries get the same turn, and a conversation continued
//! with `--resume` (which re-sends its history) picks up where it left off. Requests without
//! tools (a side call such as a title) get a short text. `{cwd}` in a turn becomes the
//! agent's working directory (from "Primary working directory:" in its system prompt), and
//! `{last}` the text of the last tool result the request carries (a model reading its tool's
//! output: `git rev-parse HEAD`, then the SHA).

use serde_json::{Value, json};

/// One block of an assistant message.
#[derive(Debug, Clone)]
pub enum Block {
    Text(String),
    Tool {
        name: String,
        input: Value,
    },
    /// A text block quoting every line of the user's prompt that names a milestone.
    EchoPrompt,
    /// The API answers this HTTP status instead, `times` times for this turn (then the
    /// turn's other blocks): 401, 429… (the fake OpenAI Responses API only).
    HttpError {
        status: u16,
        times: usize,
    },
    /// The model stalls here: the blocks before it are streamed, then the answer never ends
    /// (the connection is held open until the agent closes it).
    Hang,
}

/// One scripted assistant message, with the input tokens it reports.
#[derive(Debug, Clone)]
pub struct Turn {
    pub blocks: Vec<Block>,
    pub input_tokens: u64,
    pub output_tokens: u64,
}

impl Turn {
    pub fn text(t: &str) -> Turn {
        Turn::of(vec![Block::Text(t.into())])
    }

    pub fn bash(command: &str) -> Turn {
        Turn::of(vec![bash(command)])
    }

    pub fn of(blocks: Vec<Block>) -> Turn {
        Turn {
            blocks,
            input_tokens: 1000,
            output_tokens: 50,
        }
    }
}

pub fn bash(command: &str) -> Block {
    Block::Tool {
        name: "Bash".into(),
        input: json!({"command": command, "description": "scripted"}),
    }
}

use super::scripted_sse::{Answer, Request, ScriptedServer, fill, fill_value};

/// The fake Anthropic API: a [`ScriptedServer`] (its `url`, `seen()`, `answered(n)`).
pub struct FakeModel(ScriptedServer);

impl std::ops::Deref for FakeModel {
    type Target = ScriptedServer;
    fn deref(&self) -> &ScriptedServer {
        &self.0
    }
}

impl FakeModel {
    pub fn start(script: Vec<Turn>) -> FakeModel {
        FakeModel(ScriptedServer::start("", move |r| answer(&script, r)))
    }
}

fn answer(script: &[Turn], r: &Request) -> Answer {
    if r.method != "POST" || !r.path.starts_with("/v1/messages") {
        return Answer::NotFound;
    }
    if r.path.starts_with("/v1/messages/count_tokens") {
        return Answer::Json(r#"{"input_tokens":10}"#.into());
    }
    let body = &r.body;
    let has_tools = body["tools"].as_array().is_some_and(|t| !t.is_empty());
    let n = body["messages"]
        .as_array()
        .map(|m| m.iter().filter(|m| m["role"] == "assistant").count())
        .unwrap_or(0);
    let (turn, index) = match (has_tools, script.get(n)) {
        (true, Some(t)) => (t.clone(), Some(n)),
        (true, None) => (Turn::text("(the script has ended)"), None),
        (false, _) => (Turn::text("ok"), None),
    };
    let sse = events(&turn, body, n);
    if turn.blocks.iter().any(|b| matches!(b, Block::Hang)) {
        Answer::Hang { sse, turn: index }
    } else {
        Answer::Stream { sse, turn: index }
    }
}

/// The text of a request: its system prompt and messages, as one string.
fn all_text(v: &Value) -> String {
    let mut out = String::new();
    collect(v, &mut out);
    out
}

fn collect(v: &Value, out: &mut String) {
    match v {
        Value::String(s) => {
            out.push_str(s);
            out.push('\n');
        }
        Value::Array(a) => a.iter().for_each(|x| collect(x, out)),
        Value::Object(o) => o.values().for_each(|x| collect(x, out)),
        _ => {}
    }
}

fn cwd_of(body: &Value) -> String {
    let text = all_text(&body["system"]);
    text.lines()
        .find_map(|l| l.trim().strip_prefix("- Primary working directory: "))
        .or_else(|| {
            text.lines()
                .find_map(|l| l.trim().strip_prefix("Primary working directory: "))
        })
        .unwrap_or("/nonexistent")
        .trim()
        .to_string()
}

/// The text of the last tool result in the request's history.
fn last_result(body: &Value) -> String {
    let mut last = String::new();
    for m in body["messages"].as_array().into_iter().flatten() {
        for b in m["content"].as_array().into_iter().flatten() {
            if b["type"] == "tool_result" {
                last = all_text(&b["content"]).trim().to_string();
            }
        }
    }
    last
}

fn events(turn: &Turn, body: &Value, n: usize) -> String {
    let model = body["model"].as_str().unwrap_or("claude-sonnet-4-5");
    let cwd = cwd_of(body);
    let last = last_result(body);
    let mut out = String::new();
    let mut ev = |name: &str, data: Value| {
        out.push_str(&format!("event: {name}\ndata: {data}\n\n"));
    };
    ev(
        "message_start",
        json!({"type": "message_start", "message": {"id": format!("msg_fake_{n}_{}", std::process::id()),
            "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": turn.input_tokens, "output_tokens": 1}}}),
    );
    let mut uses_tool = false;
    for (i, block) in turn.blocks.iter().enumerate() {
        match block {
            Block::Hang => return out,
            Block::HttpError { .. } => continue,
            Block::Text(_) | Block::EchoPrompt => {
                let text = match block {
                    Block::Text(t) => fill(t, &cwd, &last),
                    _ => {
                        let prompt = all_text(&body["messages"][0]);
                        prompt
                            .lines()
                            .filter(|l| {
                                [
                                    "WORKING:",
                                    "PUSHED_TO_CI:",
                                    "FIXING_CI:",
                                    "DONE:",
                                    "BLOCKED",
                                ]
                                .iter()
                                .any(|m| l.contains(m))
                            })
                            .collect::<Vec<_>>()
                            .join("\n")
                    }
                };
                ev(
                    "content_block_start",
                    json!({"type": "content_block_start", "index": i, "content_block": {"type": "text", "text": ""}}),
                );
                ev(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": i, "delta": {"type": "text_delta", "text": text}}),
                );
            }
            Block::Tool { name, input } => {
                uses_tool = true;
                let input = fill_value(input, &cwd, &last);
                ev(
                    "content_block_start",
                    json!({"type": "content_block_start", "index": i, "content_block": {"type": "tool_use",
                        "id": format!("toolu_fake_{n}_{i}"), "name": name, "input": {}}}),
                );
                ev(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": i, "delta": {"type": "input_json_delta",
                        "partial_json": input.to_string()}}),
                );
            }
        }
        ev(
            "content_block_stop",
            json!({"type": "content_block_stop", "index": i}),
        );
    }
    ev(
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": if uses_tool {"tool_use"} else {"end_turn"},
            "stop_sequence": null}, "usage": {"output_tokens": turn.output_tokens}}),
    );
    ev("message_stop", json!({"type": "message_stop"}));
    out
}
