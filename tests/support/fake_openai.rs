//! A fake OpenAI Responses API on 127.0.0.1 for the real Codex CLI (a `model_providers`
//! entry with `wire_api = "responses"`, given as `-c` overrides on the worker's argv):
//! `POST /v1/responses` answered as a server-sent event stream, from a script the test
//! writes (the same [`Turn`]s as the fake Anthropic API; a tool is `exec_command`).
//!
//! Which turn answers a request is read from the request: every item the fake sends carries
//! its turn in its id (`msg_fake_<n>_<i>`, `call_fake_<n>_<i>`), and Codex sends them back in
//! its history, so the next turn is one past the highest seen. Retries get the same turn and
//! `codex exec resume` (which re-sends the history) continues the script. `{cwd}` becomes
//! the agent's working directory (`<cwd>` of its environment context) and `{last}` the
//! last line of output of the last command the request carries (Codex runs commands in a
//! PTY: a `git push`'s remote messages come before `git rev-parse HEAD`'s SHA).

use super::fake_model::{Block, Turn};
use super::scripted_sse::{Answer, Request, ScriptedServer, fill, fill_value};
use serde_json::{Value, json};

/// A shell command as Codex's `exec_command` tool.
pub fn sh(cmd: &str) -> Block {
    Block::Tool {
        name: "exec_command".into(),
        input: json!({ "cmd": cmd }),
    }
}

/// A turn that runs one shell command.
pub fn sh_turn(cmd: &str) -> Turn {
    Turn::of(vec![sh(cmd)])
}

/// A command asking to run outside the sandbox: with exec's approval policy Never, Codex
/// refuses it ("approval policy is Never; reject command").
pub fn escalated(cmd: &str) -> Block {
    Block::Tool {
        name: "exec_command".into(),
        input: json!({ "cmd": cmd, "sandbox_permissions": "require_escalated",
            "justification": "needs to run outside the sandbox" }),
    }
}

/// The fake OpenAI API: a [`ScriptedServer`] (its `url`, `seen()`, `answered(n)`).
pub struct FakeOpenAi(ScriptedServer);

impl std::ops::Deref for FakeOpenAi {
    type Target = ScriptedServer;
    fn deref(&self) -> &ScriptedServer {
        &self.0
    }
}

impl FakeOpenAi {
    pub fn start(script: Vec<Turn>) -> FakeOpenAi {
        FakeOpenAi(ScriptedServer::start("/v1", move |r| answer(&script, r)))
    }

    /// The `-c` overrides that point Codex at this fake (no key: the provider has no
    /// `env_key`).
    pub fn codex_config(&self) -> Vec<String> {
        vec![
            "-c".into(),
            "model_provider=fake".into(),
            "-c".into(),
            format!(
                "model_providers.fake={{name=\"fake\",base_url=\"{}\",wire_api=\"responses\"}}",
                self.url
            ),
            // A model whose tools are plain functions (`exec_command`), not code mode.
            "-m".into(),
            "gpt-5-codex".into(),
        ]
    }
}

fn answer(script: &[Turn], r: &Request) -> Answer {
    if r.method != "POST" || !r.path.ends_with("/responses") {
        return Answer::NotFound;
    }
    let n = turn_of(&r.body);
    let (turn, index) = match script.get(n) {
        Some(t) => (t.clone(), Some(n)),
        None => (Turn::text("(the script has ended)"), None),
    };
    let sse = events(&turn, &r.body, n);
    if turn.blocks.iter().any(|b| matches!(b, Block::Hang)) {
        Answer::Hang { sse, turn: index }
    } else {
        Answer::Stream { sse, turn: index }
    }
}

/// One past the highest turn named by an id in the request's history.
fn turn_of(body: &Value) -> usize {
    let mut next = 0;
    for item in body["input"].as_array().into_iter().flatten() {
        for key in ["id", "call_id"] {
            let id = item[key].as_str().unwrap_or("");
            if let Some(rest) = id.split("_fake_").nth(1)
                && let Some(n) = rest.split('_').next().and_then(|n| n.parse::<usize>().ok())
            {
                next = next.max(n + 1);
            }
        }
    }
    next
}

fn texts(v: &Value) -> String {
    let mut out = String::new();
    for c in v["content"].as_array().into_iter().flatten() {
        if let Some(t) = c["text"].as_str() {
            out.push_str(t);
            out.push('\n');
        }
    }
    out
}

fn cwd_of(body: &Value) -> String {
    for item in body["input"].as_array().into_iter().flatten() {
        let t = texts(item);
        if let Some(rest) = t.split("<cwd>").nth(1)
            && let Some(cwd) = rest.split("</cwd>").next()
        {
            return cwd.to_string();
        }
    }
    "/nonexistent".into()
}

/// The output of the last command in the request's history (after Codex's `Output:` header).
fn last_output(body: &Value) -> String {
    let mut last = String::new();
    for item in body["input"].as_array().into_iter().flatten() {
        if item["type"] == "function_call_output" {
            let o = item["output"].as_str().unwrap_or("");
            last = o
                .split_once("Output:\n")
                .map(|(_, t)| t)
                .unwrap_or(o)
                .trim()
                .lines()
                .next_back()
                .unwrap_or("")
                .trim()
                .to_string();
        }
    }
    last
}

/// The user's prompt: the last user message that is not an environment context.
fn prompt_of(body: &Value) -> String {
    body["input"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| i["role"] == "user")
        .map(texts)
        .rfind(|t| !t.starts_with("<environment_context>"))
        .unwrap_or_default()
}

fn events(turn: &Turn, body: &Value, n: usize) -> String {
    let (cwd, last) = (cwd_of(body), last_output(body));
    let mut out = String::new();
    let mut ev = |data: Value| {
        out.push_str(&format!(
            "event: {}\ndata: {data}\n\n",
            data["type"].as_str().unwrap()
        ));
    };
    let resp = format!("resp_fake_{n}_{}", std::process::id());
    ev(json!({"type": "response.created", "response": {"id": resp}}));
    for (i, block) in turn.blocks.iter().enumerate() {
        let item = match block {
            Block::Hang => return out,
            Block::Text(t) => message(n, i, &fill(t, &cwd, &last)),
            Block::EchoPrompt => {
                let quoted = prompt_of(body)
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
                    .join("\n");
                message(n, i, &format!("The task says:\n{quoted}"))
            }
            Block::Tool { name, input } => json!({"type": "function_call",
                "id": format!("fc_fake_{n}_{i}"), "call_id": format!("call_fake_{n}_{i}"),
                "name": name, "arguments": fill_value(input, &cwd, &last).to_string()}),
        };
        ev(json!({"type": "response.output_item.done", "output_index": i, "item": item}));
    }
    ev(
        json!({"type": "response.completed", "response": {"id": resp, "usage": {
        "input_tokens": turn.input_tokens, "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": turn.output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": turn.input_tokens + turn.output_tokens}}}),
    );
    out
}

fn message(n: usize, i: usize, text: &str) -> Value {
    json!({"type": "message", "role": "assistant", "id": format!("msg_fake_{n}_{i}"),
        "content": [{"type": "output_text", "text": text}]})
}
