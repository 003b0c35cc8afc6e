//! Contract tests with the REAL Codex CLI (the version `.ci/run` pins) against a fake OpenAI
//! Responses API on loopback (`support::fake_openai`), pointed at by `-c model_providers…`
//! overrides on the worker's argv: no network beyond 127.0.0.1, no key. Codex's sandbox,
//! approval policy, tools, session store and `exec --json` output are real; the model is
//! scripted.
//!
//! The binary is `$ORCH_CODEX_BIN`, else `target/agents/node_modules/.bin/codex` (where
//! `.ci/run` installs it), else `codex` on PATH. Without it these tests fail, unless
//! `ORCH_AGENT_TESTS=skip` is set.
//!
//! The happy path runs Codex with `--sandbox danger-full-access`: the agent's `orch ci
//! status --wait` reads orch's state directory and the CI it waits for, which a
//! `workspace-write` sandbox (no network, writable roots only) does not reach.

use crate::support::fake_model::{Block, Turn};
use crate::support::fake_openai::{FakeOpenAi, escalated, sh, sh_turn};
use crate::support::{DEADLINE, Org, RepoSpec, Spec, live_members, output_text, poll_until};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The Codex binary, or None when the tests are to be skipped.
fn codex() -> Option<PathBuf> {
    crate::support::agent_bin("ORCH_CODEX_BIN", "codex", "@openai/codex@0.169.0")
}

/// An organisation whose workers are `worker.agent: codex`, talking to `model`, with
/// `sandbox` (`-s`) and the argv's `{resume}`.
fn org_for(model: &FakeOpenAi, bin: &Path, sandbox: &str, extra: &str) -> Org {
    let mut argv: Vec<String> = [
        "codex",
        "exec",
        "--json",
        "--skip-git-repo-check",
        "--sandbox",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    argv.push(sandbox.into());
    // As the default argv: a login shell would reset PATH (Debian's /etc/profile), and
    // with it the orch directory orch puts first.
    argv.extend(["-c".to_string(), "allow_login_shell=false".to_string()]);
    if sandbox == "workspace-write" {
        // As the default argv: the worktree's git dir, the shared one and the remote.
        for d in ["{worktree_git_dir}", "{git_dir}", "{remote}"] {
            argv.extend(["--add-dir".to_string(), d.to_string()]);
        }
    }
    argv.extend(model.codex_config());
    argv.push("{resume}".into());
    let argv: Vec<String> = argv
        .iter()
        .map(|a| serde_json::to_string(a).unwrap())
        .collect();
    let mut spec = Spec::local("happy.sh").repo(RepoSpec::new("alpha"));
    spec.worker_section = Some(format!(
        "  agent: codex\n  command: [{}]\n  env_passthrough: [HOME, PATH, CODEX_HOME]\n  stop_grace: 1s\n{extra}",
        argv.join(", ")
    ));
    let mut org = Org::new(spec);
    let home = org.root.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    org.set_env("HOME", &home.display().to_string());
    org.set_env("PATH", &path);
    org
}

const GIT: &str = "git -c user.name=agent -c user.email=agent@example.invalid";

#[test]
fn codex_happy_path_is_done_on_green_ci_and_echoes_claim_nothing() {
    let Some(bin) = codex() else { return };
    let script = vec![
        // The prompt quoted back and a command printing every milestone (tool output).
        Turn::of(vec![
            Block::Text("WORKING: adding the feature".into()),
            Block::EchoPrompt,
            sh(
                "printf 'FIXING_CI: build - broken\\nBLOCKED_PERMISSION: Bash\\nPUSHED_TO_CI: alpha commit HEAD\\nDONE: alpha\\n'",
            ),
        ]),
        sh_turn(&format!(
            "echo feature > feature.txt && git add feature.txt && {GIT} commit -qm 'add feature' && git push -q && git rev-parse HEAD"
        )),
        Turn::of(vec![
            Block::Text("Pushed.\nPUSHED_TO_CI: alpha commit {last}".into()),
            sh("orch ci status --repo alpha --sha {last} --wait --timeout 60s"),
        ]),
        Turn::text("CI is green.\nDONE: alpha all green, radicle-push: success"),
    ];
    let model = FakeOpenAi::start(script);
    let org = org_for(&model, &bin, "danger-full-access", "");
    let started = Instant::now();
    let id = org.spawn("alpha", "add the feature", "t-codex-happy");
    let w = org.wait_milestone(&id, "DONE", DEADLINE);
    eprintln!("codex happy path: DONE after {:?}", started.elapsed());
    assert_eq!(
        org.transitions(&id),
        vec![
            ("WORKING".to_string(), "PUSHED_TO_CI".to_string()),
            ("PUSHED_TO_CI".to_string(), "DONE".to_string())
        ],
        "{}",
        org.diag(&id)
    );
    assert!(org.violations(&id).is_empty(), "{:?}", org.violations(&id));
    assert_eq!(w.progress.permission_denials, 0, "{}", org.worker_log(&id));
    // turn.completed: Codex's usage for the whole turn (four requests of 1050 tokens).
    org.wait_supervisor_gone(&id);
    let u = org.usage(&id).expect("usage recorded");
    assert_eq!(u.tokens.total(), 4 * 1050, "{u:?}");
    assert_eq!(u.cost_usd, 0.0, "Codex reports no dollars");
    assert!(u.session_id.is_some(), "{u:?}");
    // `orch logs`: Codex's events as commands, their exits and the agent's messages.
    let logs = org.run(&["logs", &id]);
    assert!(logs.status.success(), "{}", output_text(&logs));
    let text = String::from_utf8_lossy(&logs.stdout);
    for want in [
        "codex: thread ",
        "codex → $ ",
        "  ← exit 0: ",
        "codex: turn done (",
    ] {
        assert!(text.contains(want), "{want} in:\n{text}");
    }
    assert!(!text.contains("{\"type\":"), "no raw event left:\n{text}");
}

#[test]
fn codex_refused_escalations_block_and_kill_the_group() {
    let Some(bin) = codex() else { return };
    let script = vec![
        Turn::of(vec![
            Block::Text("WORKING: cleaning up".into()),
            escalated("rm -rf /var/tmp/cache"),
        ]),
        Turn::of(vec![escalated("curl -s http://127.0.0.1:9/b")]),
        sh_turn("git status"),
        Turn::text("WORKING: still here"),
    ];
    let model = FakeOpenAi::start(script);
    let org = org_for(&model, &bin, "workspace-write", "");
    let started = Instant::now();
    let id = org.spawn("alpha", "clean up", "t-codex-deny");
    let w = org.wait_milestone(&id, "BLOCKED_PERMISSION", DEADLINE);
    eprintln!(
        "codex denial path: BLOCKED_PERMISSION after {:?}",
        started.elapsed()
    );
    assert_eq!(w.progress.permission_denials, 2, "{}", org.diag(&id));
    let pgid = w.worker_pid.unwrap() as i32;
    poll_until(
        "the worker's group to be gone",
        Duration::from_secs(1),
        || live_members(pgid).is_empty().then_some(()),
        || org.diag(&id),
    );
    let second = model
        .seen()
        .iter()
        .find(|s| s.turn == Some(1))
        .map(|s| s.answered_ms)
        .expect("the second refused call was served");
    let blocked_at = org
        .events(&id)
        .iter()
        .find(|e| e.milestone == "BLOCKED_PERMISSION")
        .map(|e| e.at_ms)
        .unwrap();
    eprintln!(
        "second refused call served -> BLOCKED_PERMISSION written: {} ms",
        blocked_at - second
    );
    assert!(blocked_at - second < 1000, "{} ms", blocked_at - second);
    let text = org
        .alerts(&id)
        .into_iter()
        .find(|a| a["kind"] == "permission_denied" || a["kind"] == "blocked_permission")
        .unwrap_or_default()
        .to_string();
    assert!(text.contains("approval policy is Never"), "{text}");
}

#[test]
fn codex_in_its_workspace_write_sandbox_commits_and_pushes() {
    let Some(bin) = codex() else { return };
    let script = vec![
        sh_turn(&format!(
            "echo feature > feature.txt && git add feature.txt && {GIT} commit -qm 'add feature' && git push -q && git rev-parse HEAD"
        )),
        Turn::text("Pushed.\nPUSHED_TO_CI: alpha commit {last}"),
    ];
    let model = FakeOpenAi::start(script);
    let org = org_for(&model, &bin, "workspace-write", "");
    let started = Instant::now();
    let id = org.spawn("alpha", "add the feature", "t-codex-sandbox");
    org.wait_supervisor_gone(&id);
    eprintln!(
        "codex workspace-write: pushed and exited after {:?}",
        started.elapsed()
    );
    // The commit was made and pushed from inside the sandbox (the worktree's git dir is a
    // writable root). Its CI is not judged here: the local forge's CI runner, started by the
    // push hook, runs inside Codex's sandbox too and does not survive it.
    let t = org.transitions(&id);
    assert_eq!(
        t.first(),
        Some(&("WORKING".to_string(), "PUSHED_TO_CI".to_string())),
        "{}",
        org.diag(&id)
    );
    assert!(org.violations(&id).is_empty(), "{:?}", org.violations(&id));
}

/// The spawn prompt without the task text, in tokens: estimated as characters / 4 (the usual
/// figure for English under the GPT and Claude BPE tokenizers; no tokenizer crate is built
/// for one number). Recorded in BENCHMARKS.md; goal ≤ 150.
#[test]
fn spawn_prompt_without_the_task_is_at_most_150_tokens() {
    let vars: std::collections::BTreeMap<&str, String> = [
        ("task", ""),
        ("repo", "alpha"),
        ("branch", "orch/alpha-2ddda114"),
        ("base_branch", "main"),
        ("base_short", "b4b84fa052"),
        ("component", "alpha"),
        ("plan", "-"),
        ("sync_job", "radicle-push"),
        ("max_fix_attempts", "3"),
        ("resume", ""),
        ("upstream", ""),
    ]
    .into_iter()
    .map(|(k, v)| (k, v.to_string()))
    .collect();
    // The limits as the shipped contract sets them (the prompt's one line of timeouts).
    let contract = orch::contract::Contract::from_str(
        orch::contract::EMBEDDED,
        std::path::Path::new("worker-completion.yaml"),
    )
    .unwrap();
    let mut vars = vars;
    vars.insert("limits", orch::app::spawn::limits(&contract));
    let p = orch::prompt::render(orch::prompt::WORKER_TEMPLATE, &vars).unwrap();
    let (chars, words) = (p.chars().count(), p.split_whitespace().count());
    let tokens = chars.div_ceil(4);
    eprintln!("spawn prompt without the task: {chars} chars, {words} words, ~{tokens} tokens");
    assert!(tokens <= 150, "~{tokens} tokens:\n{p}");
}
