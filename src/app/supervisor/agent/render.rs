//! A human line for one line of an agent's JSON output, for `orch logs`: Claude Code's
//! `stream-json` and Codex's `exec --json` events become what an operator reads ("claude:
//! <text>", "claude → Bash: git push", "  ← exit 0: …"); anything else — a plain worker's
//! output, an event this does not know — is left as written. Display only: what orch believes
//! about a worker comes from the parsers beside this file, never from here.

use super::claude::content_text;
use serde_json::Value;

/// How long a tool's input or output may be on its one line.
const WIDTH: usize = 160;

/// The human lines for `line`, or None to show it as written.
pub fn render(line: &str) -> Option<Vec<String>> {
    let trimmed = line.trim_start();
    if !trimmed.starts_with('{') {
        return None;
    }
    let v: Value = serde_json::from_str(trimmed).ok()?;
    let kind = v["type"].as_str()?;
    match kind {
        "system" | "assistant" | "user" | "result" | "rate_limit_event" => claude(kind, &v),
        _ if kind.starts_with("thread.")
            || kind.starts_with("turn.")
            || kind.starts_with("item.")
            || kind == "error" =>
        {
            codex(kind, &v)
        }
        _ => None,
    }
}

fn claude(kind: &str, v: &Value) -> Option<Vec<String>> {
    let mut out = Vec::new();
    match kind {
        "system" => match v["subtype"].as_str().unwrap_or("") {
            "init" => out.push(format!(
                "claude: session {} started (model {})",
                v["session_id"].as_str().unwrap_or("?"),
                v["model"].as_str().unwrap_or("?")
            )),
            "api_retry" => out.push(format!(
                "claude: the model API failed; retry {} of {}",
                v["attempt"], v["max_retries"]
            )),
            other => out.push(format!("claude: {other}")),
        },
        "assistant" => {
            for block in v["message"]["content"].as_array()? {
                match block["type"].as_str().unwrap_or("") {
                    "text" => {
                        for l in block["text"].as_str().unwrap_or("").lines() {
                            out.push(format!("claude: {l}"));
                        }
                    }
                    "tool_use" => out.push(format!(
                        "claude → {}: {}",
                        block["name"].as_str().unwrap_or("?"),
                        one_line(&tool_input(&block["input"]))
                    )),
                    "thinking" => out.push("claude: (thinking)".into()),
                    _ => {}
                }
            }
        }
        "user" => {
            for block in v["message"]["content"].as_array()? {
                if block["type"] == "tool_result" {
                    let text = content_text(&block["content"]);
                    let head = if block["is_error"] == true {
                        "  ← error"
                    } else {
                        "  ←"
                    };
                    out.push(format!("{head}: {}", summary(&text)));
                }
            }
        }
        "result" => {
            let cost = v["total_cost_usd"]
                .as_f64()
                .map(|c| format!(", ${c:.4}"))
                .unwrap_or_default();
            out.push(format!(
                "claude: run ended ({}{}, {} turns{cost})",
                v["subtype"].as_str().unwrap_or("?"),
                if v["is_error"] == true { ", error" } else { "" },
                v["num_turns"]
            ));
        }
        "rate_limit_event" => out.push("claude: rate limited".into()),
        _ => return None,
    }
    Some(out)
}

fn codex(kind: &str, v: &Value) -> Option<Vec<String>> {
    let item = &v["item"];
    let line = match (kind, item["type"].as_str().unwrap_or("")) {
        ("thread.started", _) => format!(
            "codex: thread {} started",
            v["thread_id"].as_str().unwrap_or("?")
        ),
        ("turn.started", _) => "codex: turn started".into(),
        ("turn.completed", _) => format!(
            "codex: turn done ({} input, {} output tokens)",
            v["usage"]["input_tokens"], v["usage"]["output_tokens"]
        ),
        ("turn.failed", _) | ("error", _) => format!(
            "codex: error: {}",
            one_line(
                v["error"]["message"]
                    .as_str()
                    .or(v["message"].as_str())
                    .unwrap_or("?")
            )
        ),
        ("item.completed", "agent_message") => {
            let text = item["text"].as_str().unwrap_or("");
            return Some(text.lines().map(|l| format!("codex: {l}")).collect());
        }
        ("item.completed", "reasoning") => "codex: (reasoning)".into(),
        ("item.started", "command_execution") => format!(
            "codex → $ {}",
            one_line(item["command"].as_str().unwrap_or("?"))
        ),
        ("item.completed", "command_execution") => format!(
            "  ← exit {}: {}",
            item["exit_code"],
            summary(item["aggregated_output"].as_str().unwrap_or(""))
        ),
        ("item.completed", "file_change") => "codex: changed files".into(),
        ("item.completed", "error") => format!(
            "codex: note: {}",
            one_line(item["message"].as_str().unwrap_or("?"))
        ),
        // Started/updated items are shown when they complete.
        ("item.started", _) | ("item.updated", _) => return Some(Vec::new()),
        _ => return None,
    };
    Some(vec![line])
}

/// What a tool was asked to do: its command, path or pattern, else its input as JSON.
fn tool_input(input: &Value) -> String {
    [
        "command",
        "file_path",
        "path",
        "pattern",
        "url",
        "description",
    ]
    .iter()
    .find_map(|k| input[*k].as_str().map(str::to_string))
    .unwrap_or_else(|| input.to_string())
}

/// A tool's output on one line: its first non-empty line, and how many more there are.
fn summary(text: &str) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    match lines.as_slice() {
        [] => "(no output)".into(),
        [one] => one_line(one),
        [first, rest @ ..] => format!("{} (+{} lines)", one_line(first), rest.len()),
    }
}

fn one_line(s: &str) -> String {
    let s = s.lines().next().unwrap_or("").trim();
    if s.chars().count() > WIDTH {
        format!("{}…", s.chars().take(WIDTH).collect::<String>())
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claude_stream_json_reads_as_a_conversation() {
        let r = |l: &str| render(l).unwrap();
        assert_eq!(
            r(r#"{"type":"system","subtype":"init","session_id":"s1","model":"claude-x"}"#),
            ["claude: session s1 started (model claude-x)"]
        );
        assert_eq!(
            r(
                r#"{"type":"assistant","message":{"content":[{"type":"text","text":"WORKING: a\nnext"},{"type":"tool_use","id":"t","name":"Bash","input":{"command":"git push\necho"}}]}}"#
            ),
            [
                "claude: WORKING: a",
                "claude: next",
                "claude → Bash: git push"
            ]
        );
        assert_eq!(
            r(
                r#"{"type":"user","message":{"content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"\nline one\nline two\nthree"}],"is_error":true}]}}"#
            ),
            ["  ← error: line one (+2 lines)"]
        );
        assert_eq!(
            r(
                r#"{"type":"result","subtype":"success","is_error":false,"num_turns":3,"total_cost_usd":0.01234}"#
            ),
            ["claude: run ended (success, 3 turns, $0.0123)"]
        );
    }

    #[test]
    fn codex_events_read_as_commands_and_messages() {
        let r = |l: &str| render(l).unwrap();
        assert_eq!(
            r(
                r#"{"type":"item.started","item":{"id":"i","type":"command_execution","command":"bash -lc 'git push'","status":"in_progress"}}"#
            ),
            ["codex → $ bash -lc 'git push'"]
        );
        assert_eq!(
            r(
                r#"{"type":"item.completed","item":{"id":"i","type":"command_execution","command":"x","aggregated_output":"ok\n","exit_code":0}}"#
            ),
            ["  ← exit 0: ok"]
        );
        assert_eq!(
            r(
                r#"{"type":"item.completed","item":{"id":"m","type":"agent_message","text":"PUSHED_TO_CI: a commit b"}}"#
            ),
            ["codex: PUSHED_TO_CI: a commit b"]
        );
        assert_eq!(
            r(r#"{"type":"turn.completed","usage":{"input_tokens":2000,"output_tokens":100}}"#),
            ["codex: turn done (2000 input, 100 output tokens)"]
        );
        assert!(r(r#"{"type":"item.updated","item":{"type":"todo_list"}}"#).is_empty());
    }

    #[test]
    fn anything_else_is_shown_as_written() {
        for l in [
            "WORKING: plain text",
            "{not json",
            r#"{"type":"something_else"}"#,
            r#"{"no_type":1}"#,
            r#"[1,2]"#,
        ] {
            assert_eq!(render(l), None, "{l}");
        }
        let long = format!(
            r#"{{"type":"assistant","message":{{"content":[{{"type":"tool_use","name":"Bash","input":{{"command":"{}"}}}}]}}}}"#,
            "x".repeat(500)
        );
        let out = render(&long).unwrap();
        assert!(
            out[0].chars().count() < 200 && out[0].ends_with('…'),
            "{out:?}"
        );
    }
}
