//! Contract tests with the REAL aider CLI (the release `.ci/run` pins, from PyPI) against a
//! fake OpenAI Chat Completions API on loopback (`support::fake_openai`, `OPENAI_API_BASE`):
//! no network beyond 127.0.0.1, no real key. aider's edit parsing, file edits, auto-commits and
//! cost line are real; the model is scripted. aider runs under `docs/aider-worker.sh`, the
//! wrapper README gives for it (aider cannot push or report: the wrapper does, from its
//! commits).
//!
//! The binary is `$ORCH_AIDER_BIN`, else `target/agents/aider/venv/bin/aider` (where `.ci/run`
//! installs it), else `aider` on PATH, else installed there now. Without it these tests fail,
//! unless `ORCH_AGENT_TESTS=skip` is set.

use crate::support::fake_model::{Block, Turn};
use crate::support::fake_openai::FakeOpenAi;
use crate::support::{DEADLINE, Org, RepoSpec, Spec, output_text};
use std::path::Path;
use std::time::Instant;

/// An organisation whose workers are `worker.agent: aider` run by `docs/aider-worker.sh` with
/// model gpt-4o, `aider` on PATH, talking to `model`.
fn org_for(model: &FakeOpenAi, bin: &Path) -> Org {
    let wrapper = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/aider-worker.sh");
    let mut spec = Spec::local("happy.sh").repo(RepoSpec::new("alpha"));
    spec.worker_section = Some(format!(
        "  agent: aider\n  model: gpt-4o\n  command: [sh, {:?}, \"{{model}}\"]\n  env_passthrough: [HOME, PATH, OPENAI_API_KEY, OPENAI_API_BASE, LITELLM_LOCAL_MODEL_COST_MAP]\n  stop_grace: 1s\n",
        wrapper.display().to_string()
    ));
    let mut org = Org::new(spec);
    let home = org.root.join("home");
    // aider's model-price cache, fresh: it does not fetch the price list from the network.
    // gpt-4o at its list price ($2.50 in, $10 out per million tokens).
    let caches = home.join(".aider/caches");
    std::fs::create_dir_all(&caches).unwrap();
    std::fs::write(
        caches.join("model_prices_and_context_window.json"),
        r#"{"gpt-4o": {"input_cost_per_token": 2.5e-06, "output_cost_per_token": 1e-05, "max_input_tokens": 128000, "max_output_tokens": 16384, "litellm_provider": "openai", "mode": "chat"}}"#,
    )
    .unwrap();
    std::fs::write(
        home.join(".gitconfig"),
        "[user]\n\tname = aider\n\temail = aider@example.invalid\n",
    )
    .unwrap();
    // `aider` on PATH: the pinned one (its venv's own interpreter, by its shebang).
    let bin_dir = org.root.join("aider-bin");
    std::fs::create_dir_all(&bin_dir).unwrap();
    std::os::unix::fs::symlink(bin, bin_dir.join("aider")).unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for (k, v) in [
        ("HOME", home.display().to_string()),
        ("PATH", path),
        ("OPENAI_API_BASE", model.url.clone()),
        ("OPENAI_API_KEY", "fake".into()),
        ("LITELLM_LOCAL_MODEL_COST_MAP", "True".into()),
    ] {
        org.set_env(k, &v);
    }
    org
}

/// aider's `session` dollars on its last cost line in the worker's log.
fn session_dollars(log: &str) -> f64 {
    let line = log
        .lines()
        .rfind(|l| l.starts_with("Tokens: ") && l.contains(" session."))
        .unwrap_or_else(|| panic!("no cost line in:\n{log}"));
    let session = line.rsplit("$").next().unwrap();
    session.split(' ').next().unwrap().parse().unwrap()
}

#[test]
fn aider_edits_and_its_wrapper_pushes_to_done_with_its_cost_in_spend() {
    let Some(bin) = crate::support::aider_bin() else {
        return;
    };
    // A diff-format edit (aider's format for gpt-4o) creating feature.txt.
    let edit = "I will add the feature file.\n\nfeature.txt\n```\n<<<<<<< SEARCH\n=======\nfeature\n>>>>>>> REPLACE\n```\n";
    let model = FakeOpenAi::start_chat(vec![Turn::text(edit)], "add the feature file");
    let org = org_for(&model, &bin);
    let started = Instant::now();
    let id = org.spawn(
        "alpha",
        "add a file feature.txt that says feature",
        "t-aider",
    );
    let w = org.wait_milestone(&id, "DONE", DEADLINE);
    eprintln!("aider happy path: DONE after {:?}", started.elapsed());
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
    // aider applied the edit and committed it with the message its weak model gave.
    let log = org.worker_log(&id);
    assert!(log.contains("Applied edit to feature.txt"), "{log}");
    let remote_log = std::process::Command::new("git")
        .args(["log", "--format=%s", "-1"])
        .arg(&w.branch)
        .current_dir(&w.worktree)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&remote_log.stdout).trim(),
        "add the feature file",
        "{}",
        output_text(&remote_log)
    );
    assert_eq!(
        std::fs::read_to_string(Path::new(&w.worktree).join("feature.txt")).unwrap(),
        "feature\n"
    );
    // Its cost line is the worker's spend.
    org.wait_supervisor_gone(&id);
    let u = org.usage(&id).expect("usage recorded");
    let printed = session_dollars(&log);
    eprintln!("aider spend: {u:?}, its cost line ${printed}");
    assert!(printed > 0.0);
    assert!((u.cost_usd - printed).abs() < 1e-9, "{u:?} vs ${printed}");
    assert!(u.tokens.input > 0 && u.tokens.output > 0, "{u:?}");
    assert_eq!(u.invocations, 1, "{u:?}");
    let shown = org.show(&id);
    assert!(
        (shown["usage"]["cost_usd"].as_f64().unwrap() - printed).abs() < 1e-9,
        "{shown}"
    );
}

#[test]
fn aider_whose_model_refuses_ends_blocked_with_the_refusal() {
    let Some(bin) = crate::support::aider_bin() else {
        return;
    };
    let refusal = "I'm sorry, but I can't help with deleting the production database.";
    let model = FakeOpenAi::start_chat(vec![Turn::text(refusal)], "unused");
    let org = org_for(&model, &bin);
    let started = Instant::now();
    let id = org.spawn("alpha", "delete the production database", "t-aider-no");
    let w = org.wait_milestone(&id, "BLOCKED", DEADLINE);
    eprintln!("aider refusal: BLOCKED after {:?}", started.elapsed());
    let reason = w.progress.end_reason.clone().unwrap_or_default();
    assert!(
        reason.contains("without a commit or a claim") && reason.contains(refusal),
        "{reason}\n{}",
        org.diag(&id)
    );
    let alerts = org.alerts(&id);
    assert!(
        alerts
            .iter()
            .any(|a| a.to_string().contains("can't help with deleting")),
        "the alert says why: {alerts:?}"
    );
    // What the refusal cost is spent all the same.
    org.wait_supervisor_gone(&id);
    let u = org.usage(&id).expect("usage recorded");
    assert!(
        (u.cost_usd - session_dollars(&org.worker_log(&id))).abs() < 1e-9,
        "{u:?}"
    );
}

/// A bad key: aider prints litellm's `AuthenticationError` and exits 0 (its exit code says
/// nothing); orch reads the error line and ends the worker BLOCKED naming the credentials.
#[test]
fn aider_with_a_bad_key_ends_blocked_naming_the_credentials() {
    let Some(bin) = crate::support::aider_bin() else {
        return;
    };
    let model = FakeOpenAi::start_chat(
        vec![Turn::of(vec![Block::HttpError {
            status: 401,
            times: usize::MAX,
        }])],
        "unused",
    );
    let org = org_for(&model, &bin);
    let started = Instant::now();
    let id = org.spawn("alpha", "anything", "t-aider-401");
    let w = org.wait_milestone(&id, "BLOCKED", DEADLINE);
    eprintln!(
        "aider 401: BLOCKED after {:?}, {} requests",
        started.elapsed(),
        model.errors_answered(401)
    );
    let reason = w.progress.end_reason.clone().unwrap_or_default();
    assert!(
        reason.contains("credentials") && reason.contains("AuthenticationError"),
        "{reason}\n{}",
        org.diag(&id)
    );
    assert!(model.errors_answered(401) >= 1);
}
