//! A new organisation with nothing but its repos.yaml: the contract is built in (a file beside
//! repos.yaml overrides it), so `check`, `spawn` and the worker's own `orch report` work.

use crate::support::{Org, RepoSpec, Spec, output_text};
use orch::milestone::Milestone;

/// `orch` as a new user runs it: no `--with-contract`, no `ORCH_CONTRACT`.
fn bare(org: &Org, args: &[&str]) -> std::process::Output {
    let mut c = org.cmd(args);
    c.env_remove("ORCH_CONTRACT");
    c.output().unwrap()
}

#[test]
fn without_a_contract_file_the_built_in_one_runs_a_worker_to_done() {
    let org = Org::new(
        Spec::local("happy.sh").repo(RepoSpec::new("alpha").standard_ci("test -f feature.txt")),
    );
    let beside = org
        .config_path
        .parent()
        .unwrap()
        .join("contracts/worker-completion.yaml");
    assert!(!beside.exists());
    let check = bare(&org, &["check"]);
    assert!(check.status.success(), "{}", output_text(&check));
    let out = bare(
        &org,
        &[
            "spawn",
            "--repo",
            "alpha",
            "--task",
            "first run",
            "--foreground",
            "--json",
        ],
    );
    assert!(out.status.success(), "{}", output_text(&out));
    let id = org.workers()[0].id.clone();
    let w = org.worker(&id);
    assert_eq!(w.progress.milestone, Milestone::Done, "{}", org.diag(&id));
    // The worker's `orch report` / `orch ci status` found it too: no contract error anywhere.
    let log = org.worker_log(&id);
    assert!(!log.contains("contract"), "{log}");
    let status = bare(&org, &["status"]);
    assert!(status.status.success(), "{}", output_text(&status));
}

/// `orch init` in a directory of clones: a repos.yaml `orch check` accepts, dependencies
/// guessed from the manifests, nothing overwritten without `--force`.
#[test]
fn init_writes_a_repos_yaml_that_check_accepts() {
    let dir = tempfile::tempdir().unwrap();
    for (name, manifest) in [
        ("core", "[package]\nname = \"core\"\n"),
        (
            "vm",
            "[package]\nname = \"vm\"\n[dependencies]\ncore = { path = \"../core\" }\n",
        ),
    ] {
        let repo = dir.path().join(name);
        crate::support::init_repo(&repo, name);
        crate::support::commit_file(&repo, "Cargo.toml", manifest, "manifest");
    }
    let run = |args: &[&str]| {
        crate::support::orch_cmd()
            .current_dir(dir.path())
            .args(args)
            .output()
            .unwrap()
    };
    let out = run(&["init", "--with-contract"]);
    assert!(out.status.success(), "{}", output_text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("2 repositories"));
    let yaml = std::fs::read_to_string(dir.path().join("repos.yaml")).unwrap();
    assert!(yaml.contains("deps: [core]"), "{yaml}");
    assert!(yaml.contains("cargo test"), "{yaml}");
    assert!(dir.path().join("contracts/worker-completion.yaml").exists());
    assert!(dir.path().join("contracts/prompts/worker.md").exists());
    assert!(yaml.contains("agent: claude"), "{yaml}");
    let check = run(&["check"]);
    assert!(check.status.success(), "{}\n{yaml}", output_text(&check));
    // The agent's program must be somewhere a worker can start it: a warning says so, with
    // how to install it, until it is on PATH.
    let bin = tempfile::tempdir().unwrap();
    let check_with_path = |path: &std::path::Path| {
        crate::support::orch_cmd()
            .current_dir(dir.path())
            .env(
                "PATH",
                std::env::join_paths([
                    path,
                    std::path::Path::new("/usr/bin"),
                    std::path::Path::new("/bin"),
                ])
                .unwrap(),
            )
            .arg("check")
            .output()
            .unwrap()
    };
    let without = check_with_path(bin.path());
    assert!(without.status.success(), "{}", output_text(&without));
    let stderr = String::from_utf8_lossy(&without.stderr);
    assert!(
        stderr.contains("worker.command runs claude, which is not on PATH")
            && stderr.contains("npm install -g @anthropic-ai/claude-code"),
        "{stderr}"
    );
    let claude = bin.path().join("claude");
    std::fs::write(&claude, "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(&claude, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let with = check_with_path(bin.path());
    assert!(
        !String::from_utf8_lossy(&with.stderr).contains("worker.command"),
        "{}",
        output_text(&with)
    );
    // Nothing replaced without --force.
    let again = run(&["init"]);
    assert_eq!(again.status.code(), Some(2), "{}", output_text(&again));
    assert!(run(&["init", "--force"]).status.success());
}

/// `orch init --example DIR`: the demo organisation, kept: `orch check` accepts it as written
/// and a spawn runs to DONE on the local forge; nothing is written over.
#[test]
fn init_example_writes_an_organisation_that_runs_to_done() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("example");
    let out = crate::support::orch_cmd()
        .current_dir(tmp.path())
        .args(["init", "--example", "example"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", output_text(&out));
    for f in [
        "repos.yaml",
        "worker.sh",
        "demo-wave.yaml",
        "repos/core/.git",
    ] {
        assert!(dir.join(f).exists(), "{f}");
    }
    assert!(!dir.join("contracts").exists());
    let run = |args: &[&str]| {
        crate::support::orch_cmd()
            .current_dir(&dir)
            .args(args)
            .output()
            .unwrap()
    };
    let check = run(&["check"]);
    assert_eq!(check.status.code(), Some(0), "{}", output_text(&check));
    let plan = run(&["wave", "plan", "demo-wave.yaml"]);
    assert_eq!(plan.status.code(), Some(0), "{}", output_text(&plan));
    let spawn = run(&[
        "spawn",
        "--repo",
        "core",
        "--task",
        "a first task",
        "--foreground",
    ]);
    assert_eq!(spawn.status.code(), Some(0), "{}", output_text(&spawn));
    assert!(
        String::from_utf8_lossy(&spawn.stdout)
            .lines()
            .last()
            .unwrap()
            .ends_with(" core DONE"),
        "{}",
        output_text(&spawn)
    );
    // Again: repos.yaml is not replaced without --force, and the repositories never are.
    let again = crate::support::orch_cmd()
        .current_dir(tmp.path())
        .args(["init", "--example", "example"])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(2), "{}", output_text(&again));
    let forced = crate::support::orch_cmd()
        .current_dir(tmp.path())
        .args(["init", "--example", "example", "--force"])
        .output()
        .unwrap();
    assert_eq!(forced.status.code(), Some(2), "{}", output_text(&forced));
    assert!(
        String::from_utf8_lossy(&forced.stderr).contains("already exist"),
        "{}",
        output_text(&forced)
    );
}

/// A worker program that is not installed (`agent: claude`, as `orch init` writes, without
/// Claude Code): `spawn` refuses, exit 2, naming the install command, before any lock or
/// worker exists; a wave tick leaves its ready task waiting with the reason.
#[test]
fn a_worker_program_that_is_not_there_starts_nothing() {
    let mut spec = Spec::local("happy.sh").repo(RepoSpec::new("alpha").standard_ci("true"));
    spec.worker_section = Some("  agent: claude\n  max_parallel: 2\n".into());
    let org = Org::new(spec);
    // No claude on this PATH, whatever the machine has.
    let without = |args: &[&str]| {
        let mut c = org.cmd(args);
        c.env("PATH", "/usr/bin:/bin");
        c.output().unwrap()
    };
    let out = without(&["spawn", "--repo", "alpha", "--task", "first run"]);
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("runs claude, which is not on PATH")
            && stderr.contains("npm install -g @anthropic-ai/claude-code"),
        "{stderr}"
    );
    assert!(org.workers().is_empty());
    let s = org.json(&["status", "--json"]);
    assert_eq!(s["locks"].as_array().unwrap().len(), 0, "{s:#}");

    let wave = org.root.join("first.yaml");
    std::fs::write(
        &wave,
        "name: first\ntasks:\n  - {id: a-1, repo: alpha, task: \"first run\"}\n",
    )
    .unwrap();
    let out = without(&["wave", "run", wave.to_str().unwrap(), "--tick"]);
    assert!(out.status.success(), "{}", output_text(&out));
    assert!(
        output_text(&out).contains("ready tasks wait: worker.command runs claude"),
        "{}",
        output_text(&out)
    );
    assert!(org.workers().is_empty());
    let v = org.json(&["wave", "status", "first", "--json"]);
    assert_eq!(v["tasks"][0]["state"], "PENDING", "{v:#}");
}

/// `orch init` where there is no clone says what to do instead: where to run it, or
/// `--example`.
#[test]
fn init_without_clones_names_the_example() {
    let dir = tempfile::tempdir().unwrap();
    let out = crate::support::orch_cmd()
        .arg("init")
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
    let text = output_text(&out);
    assert!(text.contains("no git repository found"), "{text}");
    assert!(text.contains("orch init --example"), "{text}");
    assert!(!dir.path().join("repos.yaml").exists());
}

/// README's recipe for a worker of one's own, as written: `command: [sh, worker.sh]` with
/// worker.sh beside repos.yaml. The worker runs in its worktree, so the script is taken from
/// repos.yaml's directory (issue 37: "sh: 0: cannot open worker.sh", respawned twice).
#[test]
fn readmes_worker_recipe_with_a_script_beside_repos_yaml_runs_to_done() {
    let mut spec = Spec::local("happy.sh").repo(RepoSpec::new("alpha").standard_ci("true"));
    spec.worker_section = Some(
        "  agent: command\n  command: [sh, worker.sh]\n  env_passthrough: [PATH, E2E_OUT]\n".into(),
    );
    let org = Org::new(spec);
    for f in ["happy.sh", "lib.sh"] {
        let to = if f == "happy.sh" { "worker.sh" } else { f };
        std::fs::copy(crate::support::worker_script(f), org.root.join(to)).unwrap();
    }
    let (out, id) = org.spawn_foreground("alpha", "a task for my own worker");
    assert!(out.status.success(), "{}", org.diag(&id));
    assert_eq!(org.worker(&id).milestone(), Milestone::Done);
    assert_eq!(org.worker(&id).respawns, 0);
}

/// A worker that fails at once, the same way, on every start is a setup failure (issue 37):
/// its replacement fails as it did, so it is FAILED with one alert naming the cause (the
/// shell's "cannot open"), and not respawned again.
#[test]
fn a_worker_that_cannot_start_is_a_setup_failure_not_respawned_again() {
    let mut spec = Spec::local("happy.sh").repo(RepoSpec::new("alpha").standard_ci("true"));
    spec.worker_section = Some(
        "  agent: command\n  command: [sh, no-such-worker.sh]\n  env_passthrough: [PATH]\n  max_respawns: 5\n"
            .into(),
    );
    let org = Org::new(spec);
    let id = org.spawn_detached("alpha", "a task for a worker that is not there");
    // Its first life fails at once and is left to `orch resume`, which gives the task to a
    // replacement; that one fails the same way.
    org.wait_supervisor_gone(&id);
    assert_eq!(
        org.worker(&id).milestone(),
        Milestone::Working,
        "{}",
        org.diag(&id)
    );
    let out = org.run(&["resume"]);
    assert!(out.status.success(), "{}", output_text(&out));
    let w = org.wait_milestone(&id, "FAILED", crate::support::DEADLINE);
    assert_eq!(
        w.respawns,
        1,
        "one replacement tells a setup failure: {}",
        org.diag(&id)
    );
    let alerts = org.alerts(&id);
    let setup: Vec<&serde_json::Value> = alerts
        .iter()
        .filter(|a| a["kind"] == "setup_failure")
        .collect();
    assert_eq!(setup.len(), 1, "{alerts:#?}");
    let message = setup[0]["message"].as_str().unwrap();
    assert!(message.contains("no-such-worker.sh"), "{message}");
    org.wait_supervisor_gone(&id);
    assert_eq!(org.worker(&id).respawns, 1, "{}", org.diag(&id));
}
