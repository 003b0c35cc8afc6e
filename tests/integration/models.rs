//! Models per role (the contract's `model_assignment`): `worker.model`, a wave task's
//! `model`, and `worker.model_overrides` for the wave's critical path and a security-sensitive
//! task, asserted on the argv the scripted agent received, in `status` and in checkpoints.

use crate::support::{Org, RepoSpec, Spec, output_text, poll_until, worker_script};
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

fn org() -> Org {
    let mut spec = Spec::local("model_worker.sh")
        .repo(RepoSpec::new("core"))
        .repo(RepoSpec::new("vm").deps(&["core"]))
        .repo(RepoSpec::new("sdk"))
        .repo(RepoSpec::new("docs"));
    spec.worker_section = Some(format!(
        "  command: [sh, {:?}, \"{{model}}\", \"--name={{model_name}}\"]\n  env_passthrough: [HOME, PATH, E2E_OUT]\n  stop_grace: 1s\n  max_parallel: 4\n  model: small\n  model_overrides: {{critical_path: big, security_sensitive: sec}}\n",
        worker_script("model_worker.sh").display().to_string(),
    ));
    Org::new(spec)
}

fn argv(org: &Org, worker: &str) -> Vec<String> {
    std::fs::read_to_string(org.out.join(format!("argv-{worker}")))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

fn tick(org: &Org, file: &Path) {
    let out = org.run(&["wave", "run", file.to_str().unwrap(), "--tick"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
}

#[test]
fn a_critical_path_task_of_a_wave_gets_the_override_model() {
    let org = org();
    // core → vm is the critical path (6m); sdk is not (1m); docs is security-sensitive;
    // sdk-2 names its own model.
    let file = org.root.join("models.yaml");
    std::fs::write(
        &file,
        r#"name: models
tasks:
  - {id: core-1, repo: core, task: "core", estimate: 3m}
  - {id: vm-1, repo: vm, task: "vm", estimate: 3m}
  - {id: sdk-1, repo: sdk, task: "sdk", estimate: 1m}
  - {id: docs-1, repo: docs, task: "docs", estimate: 1m, security_sensitive: true}
  - {id: sdk-2, repo: sdk, task: "sdk again", estimate: 1m, model: mine}
"#,
    )
    .unwrap();
    let status = || org.json(&["wave", "status", "models", "--json"]);
    let v = poll_until(
        "the wave to finish",
        Duration::from_secs(180),
        || {
            tick(&org, &file);
            std::thread::sleep(Duration::from_millis(300));
            let v = status();
            (v["finished"] == true).then_some(v)
        },
        || format!("{:#}", status()),
    );
    assert_eq!(v["all_done"], true, "{v:#}");
    let worker_of = |task: &str| -> String {
        v["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["id"] == task)
            .and_then(|t| t["worker"].as_str())
            .unwrap()
            .to_string()
    };
    let status = org.json(&["status", "--json", "--all"]);
    for (task, model, source) in [
        ("core-1", "big", "override:critical_path"),
        ("vm-1", "big", "override:critical_path"),
        ("sdk-1", "small", "worker"),
        ("docs-1", "sec", "override:security_sensitive"),
        ("sdk-2", "mine", "task"),
    ] {
        let id = worker_of(task);
        let got = argv(&org, &id);
        // `{model}`: the option and the name, two arguments; `{model_name}`: the name alone.
        let at = got.iter().position(|a| a == "--model").unwrap_or_else(|| {
            panic!("{task}: no --model in {got:?}");
        });
        assert_eq!(got[at + 1], model, "{task}: {got:?}");
        assert!(got.contains(&format!("--name={model}")), "{task}: {got:?}");
        // Recorded with the worker: status and its checkpoint say it, and why.
        let w = status["workers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["worker_id"] == id.as_str())
            .unwrap_or_else(|| panic!("{id} in status: {status:#}"));
        assert_eq!(w["model"], model, "{w:#}");
        assert_eq!(w["model_source"], source, "{w:#}");
        let cp = org.checkpoint(&id);
        assert_eq!(cp.model.as_deref(), Some(model));
        assert_eq!(cp.model_source.as_deref(), Some(source));
    }
    // Cost figures per model: every model of the workers shown, with its count.
    let by_model: Vec<(Value, Value)> = status["spent_by_model"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| (m["model"].clone(), m["workers"].clone()))
        .collect();
    for (model, n) in [("big", 2), ("small", 1), ("sec", 1), ("mine", 1)] {
        assert!(
            by_model.contains(&(Value::from(model), Value::from(n))),
            "{model}: {by_model:?}"
        );
    }
    let human = output_text(&org.run(&["status", "--all"]));
    assert!(human.contains("MODEL"), "{human}");
    assert!(human.contains("spent by model: "), "{human}");
}

/// A `claude` on PATH that records its argv (each launch after a `--` line) and ends its run
/// having done nothing: the worker waits for an operator (BLOCKED).
fn fake_claude_on_path(org: &mut Org) {
    let bin = org.root.join("fakebin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = bin.join("claude");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n{{ echo --; printf '%s\\n' \"$@\"; }} >>\"$E2E_OUT/argv-$ORCH_WORKER_ID\"\nexec sh {:?} idle\n",
            worker_script("fake_claude.sh").display().to_string()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    org.set_env("PATH", &path);
}

/// Claude Code's default argv carries `--model` for the model chosen at spawn (`--model` here),
/// and a respawn of the worker runs the same model, whatever repos.yaml says.
#[test]
fn claudes_default_argv_names_the_spawned_model_and_a_respawn_keeps_it() {
    let mut spec = Spec::local("happy.sh").repo(RepoSpec::new("alpha").standard_ci("true"));
    spec.worker_section = Some(
        "  agent: claude\n  env_passthrough: [HOME, PATH, E2E_OUT]\n  stop_grace: 1s\n  model: small\n"
            .into(),
    );
    let mut org = Org::new(spec);
    fake_claude_on_path(&mut org);
    let out = org.run(&[
        "spawn", "--repo", "alpha", "--task", "anything", "--model", "mine", "--json",
    ]);
    assert!(out.status.success(), "{}", output_text(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let id = v["worker_id"].as_str().unwrap().to_string();
    org.wait_milestone(&id, "BLOCKED", crate::support::DEADLINE);
    org.wait_supervisor_gone(&id);
    let out = org.run(&["respawn", &id, "--note", "try again"]);
    assert!(out.status.success(), "{}", output_text(&out));
    let launches = poll_until(
        "the respawned agent's argv",
        crate::support::DEADLINE,
        || {
            let all = argv(&org, &id);
            let launches: Vec<Vec<String>> = all
                .split(|a| a == "--")
                .filter(|l| !l.is_empty())
                .map(|l| l.to_vec())
                .collect();
            (launches.len() == 2).then_some(launches)
        },
        || format!("{:?}", argv(&org, &id)),
    );
    for (n, got) in launches.iter().enumerate() {
        assert!(got.contains(&"stream-json".to_string()), "{got:?}");
        let at = got.iter().position(|a| a == "--model").expect("--model");
        assert_eq!(got[at + 1], "mine", "launch {n}: {got:?}");
    }
    assert!(
        launches[1].contains(&"--resume".to_string()),
        "{launches:?}"
    );
    let show = org.run(&["sessions", "show", &id]);
    assert!(
        output_text(&show).contains("mine (task)"),
        "{}",
        output_text(&show)
    );
}
