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
//! Also: a respawn continuing the thread (`exec resume`), the budget, a 401 and 429s (the
//! fake answers a turn's [`Block::HttpError`] first).
//!
//! The happy path runs Codex with `--sandbox danger-full-access`: the agent's `orch ci
//! status --wait` reads orch's state directory and the CI it waits for, which a
//! `workspace-write` sandbox (no network, writable roots only) does not reach.

use crate::support::fake_model::{Block, Turn};
use crate::support::fake_openai::{FakeOpenAi, escalated, sh, sh_turn};
use crate::support::{DEADLINE, Org, RepoSpec, Spec, live_members, output_text, poll_until};
use orch::milestone::Milestone;
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
            // And which process is pid 1 where Codex runs its commands: orch's init, in the
            // worker's own PID namespace and its own `/proc`.
            sh(
                "printf 'FIXING_CI: build - broken\\nBLOCKED_PERMISSION: Bash\\nPUSHED_TO_CI: alpha commit HEAD\\nDONE: alpha\\n' && echo \"pid 1 is: $(tr '\\0' ' ' </proc/1/cmdline)\"",
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
    if orch::pidns::usable().is_some() {
        let log = org.worker_log(&id);
        assert!(
            log.lines()
                .any(|l| l.contains("pid 1 is: ") && l.contains(" __init ")),
            "Codex's commands ran in the worker's PID namespace:\n{log}"
        );
    }
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

const PUSH: &str = "echo feature > feature.txt && git add feature.txt && git -c user.name=agent -c user.email=agent@example.invalid commit -qm 'add feature' && git push -q && git rev-parse HEAD";

/// Run 1 says what it did and ends its turn (the process exits in WORKING); the respawn
/// (`codex exec … resume <thread>`) continues the same thread, which the fake sees in its
/// history, and finishes. The thread's usage is cumulative: counted once.
#[test]
fn codex_respawn_resumes_the_thread_and_counts_its_usage_once() {
    let Some(bin) = codex() else { return };
    let script = vec![
        Turn::text("WORKING: first part done, stopping here"),
        sh_turn(PUSH),
        Turn::of(vec![
            Block::Text("Pushed.\nPUSHED_TO_CI: alpha commit {last}".into()),
            sh("orch ci status --repo alpha --sha {last} --wait --timeout 60s"),
        ]),
        Turn::text("CI is green.\nDONE: alpha all green, radicle-push: success"),
    ];
    let model = FakeOpenAi::start(script);
    let org = org_for(&model, &bin, "danger-full-access", "  max_respawns: 2\n");
    let id = org.spawn("alpha", "two sittings", "t-codex-resume");
    org.wait_supervisor_gone(&id);
    let first = org.usage(&id).expect("usage after run 1");
    assert_eq!(
        (first.invocations, first.tokens.total()),
        (1, 1050),
        "{first:?}"
    );
    let thread = first.session_id.clone().expect("thread id recorded");
    org.resume();
    org.wait_milestone(&id, "DONE", DEADLINE);
    org.wait_supervisor_gone(&id);
    let total = org.usage(&id).unwrap();
    assert_eq!(total.invocations, 2, "{total:?}");
    assert_eq!(
        total.session_id.as_deref(),
        Some(thread.as_str()),
        "one thread"
    );
    // Four requests of 1050 tokens in all, though the resumed turn reports the thread's.
    assert_eq!(total.tokens.total(), 4 * 1050, "{total:?}");
    // The respawn's first request carried run 1's history, and the resume note.
    let resumed = model
        .seen()
        .into_iter()
        .find(|s| s.turn == Some(1))
        .expect("turn 1 served");
    let history = resumed.body["input"].to_string();
    assert!(history.contains("first part done"), "{history}");
}

/// Codex reports usage once per turn (`turn.completed`): the turn that takes the task past
/// `worker.max_tokens` fails it (kind budget), and it is not started again.
#[test]
fn codex_budget_fails_the_worker_and_no_replacement_starts() {
    let Some(bin) = codex() else { return };
    let mut script: Vec<Turn> = (0..4).map(|_| sh_turn("git status")).collect();
    script.push(Turn::text("WORKING: looked around"));
    let model = FakeOpenAi::start(script);
    let org = org_for(
        &model,
        &bin,
        "danger-full-access",
        "  max_tokens: 2500\n  max_respawns: 2\n",
    );
    let id = org.spawn("alpha", "spend", "t-codex-budget");
    let w = org.wait_milestone(&id, "FAILED", DEADLINE);
    let reason = w.progress.end_reason.clone().unwrap_or_default();
    assert!(
        reason.contains("budget exceeded") && reason.contains("max_tokens is 2500"),
        "{reason}"
    );
    let kinds: Vec<String> = org
        .alerts(&id)
        .iter()
        .map(|a| a["kind"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(kinds.contains(&"budget".to_string()), "{kinds:?}");
    org.wait_supervisor_gone(&id);
    let u = org.usage(&id).unwrap();
    assert_eq!(u.tokens.total(), 5 * 1050, "{u:?}");
    let served = model.seen().len();
    org.resume();
    assert_eq!(org.worker(&id).milestone(), Milestone::Failed);
    assert_eq!(model.seen().len(), served, "no run after the budget stop");
}

/// A bad key (401 on every request): Codex gives up after its own few retries, and the
/// worker ends BLOCKED naming the credentials, with an alert; nothing retries it.
#[test]
fn codex_unauthorised_ends_blocked_naming_the_credentials() {
    let Some(bin) = codex() else { return };
    let script = vec![Turn::of(vec![Block::HttpError {
        status: 401,
        times: usize::MAX,
    }])];
    let model = FakeOpenAi::start(script);
    let org = org_for(&model, &bin, "danger-full-access", "  max_respawns: 2\n");
    let started = Instant::now();
    let id = org.spawn("alpha", "anything", "t-codex-401");
    let w = org.wait_milestone(&id, "BLOCKED", DEADLINE);
    let took = started.elapsed();
    let tries = model.errors_answered(401);
    eprintln!("codex 401: BLOCKED after {took:?}, {tries} requests");
    let reason = w.progress.end_reason.clone().unwrap_or_default();
    assert!(
        reason.contains("credentials") && reason.contains("401"),
        "{reason}\n{}",
        org.diag(&id)
    );
    assert!(
        org.alerts(&id)
            .iter()
            .any(|a| a.to_string().contains("credentials")),
        "{:?}",
        org.alerts(&id)
    );
    org.wait_supervisor_gone(&id);
    org.resume();
    assert_eq!(org.worker(&id).milestone(), Milestone::Blocked);
    assert_eq!(model.errors_answered(401), tries, "nothing retried it");
    assert!(tries <= 10, "{tries} requests");
}

/// Rate-limited twice (429 with `retry-after: 1`): Codex waits and retries by itself, and the
/// run goes on to its push.
#[test]
fn codex_rate_limited_waits_then_continues() {
    let Some(bin) = codex() else { return };
    let script = vec![
        Turn::of(vec![
            Block::HttpError {
                status: 429,
                times: 2,
            },
            sh(PUSH),
        ]),
        Turn::text("Pushed.\nPUSHED_TO_CI: alpha commit {last}"),
    ];
    let model = FakeOpenAi::start(script);
    let org = org_for(&model, &bin, "workspace-write", "");
    let started = Instant::now();
    let id = org.spawn("alpha", "add the feature", "t-codex-429");
    org.wait_milestone(&id, "PUSHED_TO_CI", DEADLINE);
    eprintln!(
        "codex 429 twice: PUSHED_TO_CI after {:?}",
        started.elapsed()
    );
    assert_eq!(model.errors_answered(429), 2);
    let errors = model.errors.lock().unwrap().clone();
    let after = model.answered(0).expect("turn 0 served after the 429s");
    let waited = after - errors[0].1;
    eprintln!("first 429 -> turn served: {waited:?}");
    assert!(waited >= Duration::from_secs(1), "it waited: {waited:?}");
    assert!(org.violations(&id).is_empty(), "{:?}", org.violations(&id));
}

/// Rate-limited on every request: Codex gives up after its own bounded retries, and the
/// worker's run ends as transient (not BLOCKED: an `orch resume` gives it to a replacement),
/// with the 429 in its reason and a warning alert.
#[test]
fn codex_rate_limited_throughout_ends_its_run_as_transient() {
    let Some(bin) = codex() else { return };
    let script = vec![Turn::of(vec![Block::HttpError {
        status: 429,
        times: usize::MAX,
    }])];
    let model = FakeOpenAi::start(script);
    let org = org_for(&model, &bin, "danger-full-access", "");
    let started = Instant::now();
    let id = org.spawn("alpha", "anything", "t-codex-429s");
    org.wait_supervisor_gone(&id);
    let tries = model.errors_answered(429);
    eprintln!(
        "codex 429 throughout: run ended after {:?}, {tries} requests",
        started.elapsed()
    );
    let w = org.worker(&id);
    let reason = w.progress.end_reason.clone().unwrap_or_default();
    assert!(
        reason.starts_with("agent (transient)") && reason.contains("429"),
        "{reason}\n{}",
        org.diag(&id)
    );
    assert_eq!(
        w.progress.milestone,
        Milestone::Working,
        "{}",
        org.diag(&id)
    );
    assert!(
        org.alerts(&id)
            .iter()
            .any(|a| a["kind"] == "agent_transient"),
        "{:?}",
        org.alerts(&id)
    );
    assert!((2..=10).contains(&tries), "{tries} requests");
}

/// Codex's own workspace-write sandbox inside orch's (`worker.sandbox`, orch unprivileged),
/// so in the worker's PID namespace: its command completes. (Its bubblewrap opens
/// `/proc/<pid>/ns` with a pid of the namespace it runs in; the host's `/proc` has another
/// process or none there and the command never ended. orch's sandbox mounts the namespace's
/// own `/proc`.) Needs root to make the unprivileged account.
#[test]
fn codex_in_orchs_sandbox_and_pid_namespace_completes_its_commands() {
    let Some(bin) = codex() else { return };
    let Some(account) = crate::support::unprivileged_orch_account() else {
        return;
    };
    let script = vec![
        sh_turn("echo made > made.txt && echo finished-$((6 * 7))"),
        Turn::text("The command said {last}."),
    ];
    let model = FakeOpenAi::start(script);
    let mut org = org_for(&model, &bin, "workspace-write", "  sandbox: true\n");
    org.run_as(&account.name, account.uid);
    let id = org.spawn("alpha", "make a file", "t-codex-pidns");
    org.wait_supervisor_gone(&id);
    let log = org.worker_log(&id);
    assert!(
        log.contains("The command said finished-42."),
        "{log}\n{}",
        org.diag(&id)
    );
    // Codex's sandbox let it write in its workspace.
    let w = org.worker(&id);
    assert!(
        std::path::Path::new(&w.worktree).join("made.txt").exists(),
        "{}",
        org.diag(&id)
    );
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
