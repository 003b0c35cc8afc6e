//! A fake OpenAI API on 127.0.0.1: the Responses API for the real Codex CLI (a `model_providers`
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
//! PTY: a `git push`'s remote messages come before `git rev-parse HEAD`'s SHA). A turn with a
//! [`Block::HttpError`] is answered with that status its first `times` times.
//!
//! [`FakeOpenAi::start_chat`]: the Chat Completions API, for aider (`OPENAI_API_BASE`).

use super::fake_model::{Block, Turn};
use super::scripted_sse::{Answer, Request, ScriptedServer, fill, fill_value};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Mutex;

/// An OpenAI-style error answer: 401 (a bad key) or 429 (rate-limited, retry after 1 s).
fn http_error(status: u16) -> Answer {
    let (message, kind, code) = match status {
        401 => (
            "Incorrect API key provided: fake. You can find your API key at https://platform.openai.com/account/api-keys.",
            "invalid_request_error",
            "invalid_api_key",
        ),
        429 => (
            "Rate limit reached for requests. Please try again in 1s.",
            "requests",
            "rate_limit_exceeded",
        ),
        _ => ("The server had an error.", "server_error", "server_error"),
    };
    Answer::Error {
        status,
        body: json!({"error": {"message": message, "type": kind, "code": code}}).to_string(),
        retry_after: (status == 429).then_some(1),
    }
}

/// A Chat Completions answer: the turn's text as one assistant message.
fn chat_answer(turn: &Turn, body: &Value, index: Option<usize>) -> Answer {
    for b in &turn.blocks {
        if let Block::HttpError { status, .. } = b {
            return http_error(*status);
        }
    }
    let text: String = turn
        .blocks
        .iter()
        .filter_map(|b| match b {
            Block::Text(t) => Some(t.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let model = body["model"].as_str().unwrap_or("gpt-4o");
    let usage = json!({"prompt_tokens": turn.input_tokens, "completion_tokens": turn.output_tokens,
        "total_tokens": turn.input_tokens + turn.output_tokens});
    if body["stream"] != true {
        return Answer::Json(
            json!({"id": "chatcmpl-fake", "object": "chat.completion", "created": 1,
                "model": model, "choices": [{"index": 0, "finish_reason": "stop",
                "message": {"role": "assistant", "content": text}}], "usage": usage})
            .to_string(),
        );
    }
    let chunk = |choices: Value, usage: Option<&Value>| {
        let mut c = json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk",
            "created": 1, "model": model, "choices": choices});
        if let Some(u) = usage {
            c["usage"] = u.clone();
        }
        format!("data: {c}\n\n")
    };
    let mut sse = chunk(
        json!([{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": null}]),
        None,
    );
    sse.push_str(&chunk(
        json!([{"index": 0, "delta": {}, "finish_reason": "stop"}]),
        None,
    ));
    sse.push_str(&chunk(json!([]), Some(&usage)));
    sse.push_str("data: [DONE]\n\n");
    Answer::Stream { sse, turn: index }
}

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
        // Turn → the HTTP errors it has answered so far (Block::HttpError).
        let errors = Mutex::new(HashMap::new());
        FakeOpenAi(ScriptedServer::start("/v1", move |r| {
            answer(&script, r, &errors)
        }))
    }

    /// The Chat Completions API as aider (litellm) calls it: `POST /v1/chat/completions`,
    /// streamed or not as the request asks. The script's turns answer the agent's requests in
    /// the order they come (a count kept here: aider's request carries its edit format's
    /// example conversation, so its history does not say the turn); a turn's text blocks are
    /// the reply, its token figures the reported usage. A request for a commit message (aider's
    /// weak model, after it applied an edit) is answered `commit` and takes no turn.
    pub fn start_chat(script: Vec<Turn>, commit: &str) -> FakeOpenAi {
        let next = Mutex::new(0usize);
        let commit = commit.to_string();
        FakeOpenAi(ScriptedServer::start("/v1", move |r| {
            if r.method != "POST" || !r.path.ends_with("/chat/completions") {
                return Answer::NotFound;
            }
            let asks_commit = r.body["messages"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|m| m["role"] == "system")
                .any(|m| m["content"].to_string().contains("commit message"));
            let (turn, index) = if asks_commit {
                (Turn::text(&commit), None)
            } else {
                let mut n = next.lock().unwrap();
                *n += 1;
                match script.get(*n - 1) {
                    Some(t) => (t.clone(), Some(*n - 1)),
                    None => (Turn::text("(the script has ended)"), None),
                }
            };
            chat_answer(&turn, &r.body, index)
        }))
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

fn answer(script: &[Turn], r: &Request, errors: &Mutex<HashMap<usize, usize>>) -> Answer {
    if r.method != "POST" || !r.path.ends_with("/responses") {
        return Answer::NotFound;
    }
    let n = turn_of(&r.body);
    let (turn, index) = match script.get(n) {
        Some(t) => (t.clone(), Some(n)),
        None => (Turn::text("(the script has ended)"), None),
    };
    for b in &turn.blocks {
        if let Block::HttpError { status, times } = b {
            let mut errors = errors.lock().unwrap();
            let answered = errors.entry(n).or_insert(0);
            if *answered < *times {
                *answered += 1;
                return http_error(*status);
            }
        }
    }
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
            Block::HttpError { .. } => continue,
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
