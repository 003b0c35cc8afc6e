//! Contract tests with the REAL Claude Code CLI (the version `.ci/run` pins) against a fake
//! model API on loopback (`support::fake_model`): no network beyond 127.0.0.1, no real key.
//! The CLI's permission checks, tools, session store and stream-json output are real; the
//! model is scripted.
//!
//! The binary is `$ORCH_CLAUDE_BIN`, else `target/agents/node_modules/.bin/claude` (where
//! `.ci/run` installs it), else `claude` on PATH. Without it these tests fail, unless
//! `ORCH_AGENT_TESTS=skip` is set (then they say so and pass): CI installs it.

use crate::support::fake_model::{Block, FakeModel, Turn, bash};
use crate::support::{DEADLINE, Org, RepoSpec, Spec, live_members, output_text, poll_until};
use serde_json::json;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The Claude Code binary, or None when the tests are to be skipped.
fn claude() -> Option<PathBuf> {
    crate::support::agent_bin(
        "ORCH_CLAUDE_BIN",
        "claude",
        "@anthropic-ai/claude-code@2.1.197",
    )
}

/// An organisation whose workers are `worker.agent: claude` with its default argv (`claude`
/// found on PATH), talking to `model`.
fn org_for(model: &FakeModel, claude: &std::path::Path, extra: &str) -> Org {
    let mut spec = Spec::local("happy.sh").repo(RepoSpec::new("alpha"));
    spec.worker_section = Some(format!(
        "  agent: claude\n  env_passthrough: [HOME, PATH, ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY, CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC, CLAUDE_CODE_MAX_RETRIES, IS_SANDBOX]\n  stop_grace: 1s\n{extra}"
    ));
    let mut org = Org::new(spec);
    let home = org.root.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let path = format!(
        "{}:{}",
        claude.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for (k, v) in [
        ("HOME", home.display().to_string()),
        ("PATH", path),
        ("ANTHROPIC_BASE_URL", model.url.clone()),
        ("ANTHROPIC_API_KEY", "fake".into()),
        ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
        ("CLAUDE_CODE_MAX_RETRIES", "0".into()),
    ] {
        org.set_env(k, &v);
    }
    org
}

const GIT: &str = "git -c user.name=agent -c user.email=agent@example.invalid";

/// Edits, commits and pushes like an agent; `extra` turns go before the push.
fn work_then_push(extra: Vec<Turn>) -> Vec<Turn> {
    let mut t = vec![Turn::of(vec![
        Block::Text("WORKING: adding the feature".into()),
        Block::Tool {
            name: "Write".into(),
            input: json!({"file_path": "{cwd}/feature.txt", "content": "feature\n"}),
        },
    ])];
    t.extend(extra);
    t.extend([
        Turn::bash("git add feature.txt"),
        Turn::bash(&format!("{GIT} commit -qm 'add feature'")),
        Turn::bash("git push -q"),
        Turn::bash("git rev-parse HEAD"),
        Turn::of(vec![
            Block::Text("Pushed.\nPUSHED_TO_CI: alpha commit {last}".into()),
            bash("orch ci status --repo alpha --sha {last} --wait --timeout 60s"),
        ]),
        Turn::text("CI is green.\nDONE: alpha all green, radicle-push: success"),
    ]);
    t
}

#[test]
fn claude_happy_path_is_done_on_green_ci_and_echoes_claim_nothing() {
    let Some(bin) = claude() else { return };
    // Milestone-like text the agent did not say as itself: the prompt quoted back, a file it
    // wrote (tool input) and read (tool output) naming the base commit and every milestone.
    let echo = vec![
        Turn::of(vec![
            Block::EchoPrompt,
            Block::Tool {
                name: "Write".into(),
                input: json!({"file_path": "{cwd}/notes.txt",
                "content": "FIXING_CI: build - broken\nBLOCKED_PERMISSION: Bash\nPUSHED_TO_CI: alpha commit HEAD\nDONE: alpha\n"}),
            },
        ]),
        Turn::of(vec![Block::Tool {
            name: "Read".into(),
            input: json!({"file_path": "{cwd}/notes.txt"}),
        }]),
        Turn::bash("git status --short"),
    ];
    let model = FakeModel::start(work_then_push(echo));
    let org = org_for(&model, &bin, "");
    let started = Instant::now();
    let id = org.spawn("alpha", "add the feature", "t-happy");
    let w = org.wait_milestone(&id, "DONE", DEADLINE);
    let took = started.elapsed();
    eprintln!("claude happy path: DONE after {took:?}");
    let transitions = org.transitions(&id);
    assert_eq!(
        transitions,
        vec![
            ("WORKING".to_string(), "PUSHED_TO_CI".to_string()),
            ("PUSHED_TO_CI".to_string(), "DONE".to_string())
        ],
        "{}",
        org.diag(&id)
    );
    assert!(org.violations(&id).is_empty(), "{:?}", org.violations(&id));
    assert_eq!(w.progress.permission_denials, 0, "{}", org.worker_log(&id));
    assert!(org.lock_of(&id).is_none(), "DONE releases the lock");
    // Tokens and their dollars are counted as the messages stream: a run stopped at its
    // verified DONE (green CI) may never print its `result`.
    let u = org.usage(&id).expect("usage recorded");
    assert!(u.tokens.total() >= 8000, "{u:?}");
    assert!(u.cost_usd > 0.0, "{u:?}");
    assert!(u.session_started && u.session_id.is_some());
    // `orch logs` shows the stream-json as a conversation an operator reads, with orch's
    // events between; `--raw` as written.
    let logs = org.run(&["logs", &id]);
    assert!(logs.status.success(), "{}", output_text(&logs));
    let text = String::from_utf8_lossy(&logs.stdout);
    for want in [
        "claude: session ",
        "claude → Write: ",
        "claude → Bash: git status --short",
        "[orch ",
    ] {
        assert!(text.contains(want), "{want} in:\n{text}");
    }
    assert!(!text.contains("{\"type\":"), "no raw event left:\n{text}");
    let raw = org.run(&["logs", &id, "--raw"]);
    assert!(String::from_utf8_lossy(&raw.stdout).contains("{\"type\":\"assistant\""));
}

#[test]
fn claude_two_denials_block_and_kill_the_group_within_a_second() {
    let Some(bin) = claude() else { return };
    let script = vec![
        Turn::of(vec![
            Block::Text("WORKING: cleaning up".into()),
            bash("curl -s http://127.0.0.1:9/a"),
        ]),
        Turn::bash("wget -q http://127.0.0.1:9/b"),
        Turn::bash("git status"),
        Turn::text("WORKING: still here"),
    ];
    let model = FakeModel::start(script);
    let org = org_for(&model, &bin, "");
    let started = Instant::now();
    let id = org.spawn("alpha", "clean up", "t-deny");
    let w = org.wait_milestone(&id, "BLOCKED_PERMISSION", DEADLINE);
    eprintln!(
        "claude denial path: BLOCKED_PERMISSION after {:?}",
        started.elapsed()
    );
    assert_eq!(w.progress.permission_denials, 2, "{}", org.diag(&id));
    let second = model
        .seen()
        .iter()
        .find(|s| s.turn == Some(1))
        .map(|s| s.answered_ms)
        .expect("the second denied call was served");
    let blocked_at = org
        .events(&id)
        .iter()
        .find(|e| e.milestone == "BLOCKED_PERMISSION")
        .map(|e| e.at_ms)
        .unwrap();
    let pgid = w.worker_pid.unwrap() as i32;
    poll_until(
        "the worker's group to be gone",
        Duration::from_secs(1),
        || live_members(pgid).is_empty().then_some(()),
        || org.diag(&id),
    );
    let lag = blocked_at - second;
    eprintln!("second denied call served -> BLOCKED_PERMISSION written: {lag} ms");
    assert!(lag < 1000, "{lag} ms");
    let alert = org
        .alerts(&id)
        .into_iter()
        .find(|a| a["kind"] == "permission_denied" || a["kind"] == "blocked_permission")
        .unwrap_or_default();
    let text = alert.to_string();
    assert!(
        text.contains("wget -q"),
        "the alert names the denied input: {text}"
    );
    assert!(text.contains("Bash"), "the alert names the tool: {text}");
    // The script's later turns were never needed: no tool call after the kill.
    assert!(model.answered(3).is_none());
}

#[test]
fn claude_respawn_resumes_the_conversation_and_costs_add_up() {
    let Some(bin) = claude() else { return };
    // Run 1 says what it is doing and ends its turn (the process exits in WORKING); the
    // respawn continues the same conversation and finishes.
    // Run 2 ends its turn with its push claim: its `result` (the run's dollars) comes before
    // CI decides.
    let mut script = vec![Turn::text("WORKING: first part done, stopping here")];
    let mut rest = work_then_push(Vec::new());
    rest.truncate(rest.len() - 2);
    rest.push(Turn::text("Pushed.\nPUSHED_TO_CI: alpha commit {last}"));
    script.extend(rest);
    let model = FakeModel::start(script);
    let org = org_for(&model, &bin, "  max_respawns: 2\n");
    let id = org.spawn("alpha", "two sittings", "t-resume");
    org.wait_supervisor_gone(&id);
    let first = org.usage(&id).expect("usage after run 1");
    assert_eq!(first.invocations, 1, "{first:?}");
    assert!(first.cost_usd > 0.0);
    org.resume();
    org.wait_milestone(&id, "DONE", DEADLINE);
    org.wait_supervisor_gone(&id);
    let total = org.usage(&id).unwrap();
    assert_eq!(total.invocations, 2, "{total:?}");
    assert!(
        total.cost_usd > first.cost_usd * 1.5,
        "{first:?} then {total:?}"
    );
    assert_eq!(total.session_id, first.session_id, "one conversation");
    let shown = org.show(&id);
    assert_eq!(shown["usage"]["runs"], 2, "{shown}");
    assert!(shown["usage"]["cost_usd"].as_f64().unwrap() > first.cost_usd);
    let text = crate::support::output_text(&org.run(&["sessions", "show", &id]));
    assert!(
        text.contains("spent      $0.0") && text.contains("(2 runs)"),
        "{text}"
    );
    // The respawn's first request carried the first run's history.
    let resumed = model
        .seen()
        .into_iter()
        .find(|s| s.turn == Some(1))
        .expect("turn 1 served");
    let history = resumed.body["messages"].to_string();
    assert!(history.contains("first part done"), "{history}");
}

#[test]
fn claude_budget_stops_the_worker_as_failed() {
    let Some(bin) = claude() else { return };
    let script = (0..8).map(|_| Turn::bash("git status")).collect();
    let model = FakeModel::start(script);
    let org = org_for(&model, &bin, "  max_tokens: 2500\n");
    let id = org.spawn("alpha", "spend", "t-budget");
    let w = org.wait_milestone(&id, "FAILED", DEADLINE);
    let reason = w.progress.end_reason.clone().unwrap_or_default();
    assert!(reason.contains("budget exceeded"), "{reason}");
    let kinds: Vec<String> = org
        .alerts(&id)
        .iter()
        .map(|a| a["kind"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(kinds.contains(&"budget".to_string()), "{kinds:?}");
    let u = org.usage(&id).unwrap();
    assert!(u.tokens.total() >= 2500, "{u:?}");
    // Stopped well before the script ran out.
    assert!(model.answered(7).is_none());
}

/// Claude Code as a worker of an account of its own (`worker.user`): its home is its
/// workspace's, its `git push` goes through its supervisor's relay, its `orch ci status` over
/// its channel — and it reaches DONE as it does as orch's user. Needs root.
#[test]
fn claude_as_an_account_of_its_own_reaches_done() {
    let Some(bin) = claude() else { return };
    let Some(account) = crate::support::worker_account() else {
        return;
    };
    let model = FakeModel::start(work_then_push(vec![Turn::bash("id -u; echo $HOME")]));
    let org = org_for(&model, &bin, &format!("  user: {}\n", account.name));
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&org.root, std::fs::Permissions::from_mode(0o711)).unwrap();
    let id = org.spawn("alpha", "add the feature", "t-account");
    let w = org.wait_milestone(&id, "DONE", DEADLINE);
    assert_eq!(
        org.transitions(&id),
        vec![
            ("WORKING".to_string(), "PUSHED_TO_CI".to_string()),
            ("PUSHED_TO_CI".to_string(), "DONE".to_string())
        ],
        "{}",
        org.diag(&id)
    );
    let log = org.worker_log(&id);
    assert!(
        log.contains(&account.uid.to_string()) && log.contains("workspaces"),
        "its commands ran as {} with its workspace's home:\n{log}",
        account.name
    );
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        std::fs::metadata(&w.worktree).unwrap().uid(),
        account.uid,
        "its clone is its own"
    );
}

/// A Claude run stopped before its `result` (here: cancelled while the model stalls
/// mid-answer) keeps what its messages cost: the tokens of the assistant events seen, each
/// message at its model's price (Claude Code's own rates, per million tokens).
#[test]
fn claude_cancelled_before_its_result_keeps_the_dollars_of_the_usage_seen() {
    let Some(bin) = claude() else { return };
    let script = vec![
        Turn::of(vec![
            Block::Text("WORKING: looking around".into()),
            bash("git status"),
        ]),
        Turn::of(vec![
            Block::Text("WORKING: thinking it over".into()),
            Block::Hang,
        ]),
    ];
    let model = FakeModel::start(script);
    let org = org_for(&model, &bin, "  model: claude-sonnet-4-5-20250929\n");
    let id = org.spawn("alpha", "look around", "t-stopped");
    // Both messages seen (the second one's text block streamed, then the model stalls).
    let seen = poll_until(
        "the stalled message's usage recorded",
        DEADLINE,
        || {
            model.answered(1)?;
            let u = org.usage(&id)?;
            (u.tokens.input >= 2000).then_some(u)
        },
        || org.diag(&id),
    );
    assert!(seen.cost_usd > 0.0, "{seen:?}");
    let out = org.run(&["cancel", &id, "--reason", "stopped mid-answer"]);
    assert!(out.status.success(), "{}", output_text(&out));
    org.wait_supervisor_gone(&id);
    let log = org.worker_log(&id);
    assert!(
        !log.contains(r#""type":"result""#),
        "no result was printed:\n{log}"
    );
    let u = org.usage(&id).expect("usage kept");
    let t = u.tokens;
    // Claude Code's Sonnet 4.5 rates: $3 in, $15 out, $3.75 cache write, $0.30 cache read.
    let priced = (t.input as f64 * 3.0
        + t.output as f64 * 15.0
        + t.cache_write as f64 * 3.75
        + t.cache_read as f64 * 0.3)
        / 1e6;
    eprintln!("cancelled before result: {t:?} kept as ${:.6}", u.cost_usd);
    assert!(u.cost_usd > 0.0, "{u:?}");
    assert!((u.cost_usd - priced).abs() < 1e-9, "{u:?}: want ${priced}");
    assert_eq!(u.invocations, 1, "{u:?}");
}

/// `worker.max_cost_usd` stops a Claude run mid-way, before any `result` says its dollars:
/// the streamed messages are priced as they come.
#[test]
fn claude_dollar_budget_stops_the_run_before_its_result() {
    let Some(bin) = claude() else { return };
    // Each message: 1000 input tokens at Sonnet's $3 per million (+ its output) ≈ $0.003.
    let script = (0..8).map(|_| Turn::bash("git status")).collect();
    let model = FakeModel::start(script);
    let org = org_for(
        &model,
        &bin,
        "  model: claude-sonnet-4-5-20250929\n  max_cost_usd: 0.008\n",
    );
    let id = org.spawn("alpha", "spend", "t-dollars");
    let w = org.wait_milestone(&id, "FAILED", DEADLINE);
    let reason = w.progress.end_reason.clone().unwrap_or_default();
    assert!(
        reason.contains("budget exceeded") && reason.contains("max_cost_usd is $0.008"),
        "{reason}"
    );
    org.wait_supervisor_gone(&id);
    let u = org.usage(&id).unwrap();
    assert!(u.cost_usd >= 0.008, "{u:?}");
    assert!(!org.worker_log(&id).contains(r#""type":"result""#));
    // Stopped well before the script ran out.
    assert!(model.answered(7).is_none());
}
