//! The operator's day (issue 13): commands that answer honestly and at once, read-only
//! commands that leave a fresh directory as it was, orch's own stop of a DONE worker recorded
//! as such, and the exit-code table (0 yes, 1 no, 2 bad input, 3 unreachable/transient).

use crate::support::{DEADLINE, Org, RepoSpec, Spec, orch_cmd, output_text};
use std::path::Path;
use std::time::{Duration, Instant};

/// A fresh directory: repos.yaml only (no contracts/, no state).
fn fresh() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("repos.yaml"),
        "repos:\n  core: {}\n  vm: { deps: [core] }\n",
    )
    .unwrap();
    dir
}

fn orch_in(dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = orch_cmd().current_dir(dir).args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn read_only_commands_create_no_state_in_a_fresh_directory() {
    let dir = fresh();
    std::fs::write(
        dir.path().join("wave.yaml"),
        "name: w1\ntasks:\n  - id: a\n    repo: core\n    task: do it\n",
    )
    .unwrap();
    let sha = "0123456789abcdef0123456789abcdef01234567";
    for args in [
        &["status"][..],
        &["status", "--json"],
        &["sessions", "list"],
        &["sessions", "list", "--json"],
        &["alerts"],
        &["alerts", "--json"],
        &["graph"],
        &["check"],
        &["can-spawn", "core"],
        &["can-spawn", "core", "--json"],
        &["wave", "plan", "wave.yaml"],
        &["wave", "plan", "wave.yaml", "--json"],
        &["wave", "status", "wave.yaml"],
        &["wave", "status", "w1", "--json"],
        &["gc", "--dry-run"],
    ] {
        let (code, out, err) = orch_in(dir.path(), args);
        // `wave status` of a wave never run answers no (1) or, by a name orch never
        // recorded, bad input (2); everything else answers yes.
        let expected: &[i32] = match args {
            ["wave", "status", ..] => &[1, 2],
            _ => &[0],
        };
        assert!(expected.contains(&code), "{args:?}: {code} {out}{err}");
        assert!(
            !dir.path().join("sessions").exists(),
            "{args:?} created sessions/"
        );
    }
    let (code, out, err) = orch_in(dir.path(), &["status"]);
    assert_eq!(code, 0);
    assert!(out.contains("no state yet"), "{out}{err}");
    let (code, out, err) = orch_in(
        dir.path(),
        &["ci", "status", "--repo", "core", "--sha", sha, "--json"],
    );
    assert_eq!(code, 1, "not green: {out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["verdict"], "no_run");
    assert!(
        v["detail"].as_str().unwrap().contains("no state yet"),
        "{v}"
    );
    let (code, out, err) = orch_in(dir.path(), &["sessions", "show", "nope-1"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(
        !dir.path().join("sessions").exists(),
        "ci status / sessions show created sessions/"
    );
}

/// A worker that reports DONE and lingers: orch stops it (SIGTERM), and its event log says
/// orch stopped it rather than "exited (exit code 143)".
#[test]
fn a_done_workers_stop_is_recorded_as_orchs_stop() {
    let org =
        Org::new(Spec::local("done_lingers.sh").repo(RepoSpec::new("alpha").standard_ci("true")));
    let (out, id) = org.spawn_foreground("alpha", "add a feature");
    assert!(out.status.success(), "{}", output_text(&out));
    let show = org.show(&id);
    assert_eq!(show["milestone"], "DONE");
    let events = show["events"].as_array().unwrap();
    assert!(
        events
            .iter()
            .any(|e| e["kind"] == "stopped" && e["detail"].as_str().unwrap().contains("DONE")),
        "{events:?}"
    );
    assert!(
        !events.iter().any(|e| e["kind"] == "exited"),
        "orch's stop is not an exit: {events:?}"
    );
}

/// `orch report` for a worker with no supervisor answers at once, non-zero, saying why.
#[test]
fn report_without_a_supervisor_answers_at_once() {
    let org = Org::new(Spec::local("happy.sh").repo(RepoSpec::new("alpha").standard_ci("false")));
    let (out, id) = org.spawn_foreground("alpha", "add a feature");
    assert_eq!(out.status.code(), Some(1), "{}", output_text(&out));
    assert_eq!(org.show(&id)["milestone"], "BLOCKED");
    let started = Instant::now();
    let out = org
        .cmd(&["report", "DONE", "--note", "done", "--json"])
        .env("ORCH_WORKER_ID", &id)
        .output()
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "answered at once"
    );
    assert_eq!(out.status.code(), Some(1), "{}", output_text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["state"], "not_applied");
    assert!(
        v["outcome"].as_str().unwrap().contains("orch respawn"),
        "{v}"
    );
    assert_eq!(org.show(&id)["milestone"], "BLOCKED", "nothing changed");
}

fn code_of(org: &Org, args: &[&str]) -> (i32, String) {
    let out = org.run(args);
    (out.status.code().unwrap_or(-1), output_text(&out))
}

/// The exit-code table, per command: 0 yes, 1 a negative answer, 2 bad input.
#[test]
fn exit_codes_are_the_same_across_commands() {
    let org = Org::new(Spec::local("happy.sh").repo(RepoSpec::new("alpha").standard_ci("true")));
    let (out, id) = org.spawn_foreground("alpha", "add a feature");
    assert!(out.status.success(), "{}", output_text(&out));
    let sha = org.pushes(&id)[0].sha.to_string();

    // An unknown worker is bad input for every command that names one.
    for args in [
        &["cancel", "nope-123"][..],
        &["release", "nope-123", "--force", "--reason", "x"],
        &["respawn", "nope-123"],
        &["sessions", "show", "nope-123"],
    ] {
        let (code, text) = code_of(&org, args);
        assert_eq!(code, 2, "{args:?}: {text}");
        assert!(text.contains("no worker nope-123"), "{args:?}: {text}");
    }
    // A valid question answered "no".
    let (code, text) = code_of(&org, &["cancel", &id]);
    assert_eq!(code, 1, "cancel of an ended worker: {text}");
    assert!(text.contains("already ended"), "{text}");
    let (code, text) = code_of(&org, &["release", &id, "--force", "--reason", "x"]);
    assert_eq!(code, 1, "release of a worker with no lock: {text}");
    let (code, text) = code_of(&org, &["respawn", &id]);
    assert_eq!(code, 1, "respawn of a worker that is not blocked: {text}");
    assert!(text.contains("only a BLOCKED"), "{text}");
    // Usage.
    let (code, text) = code_of(&org, &["release", &id, "--reason", "x"]);
    assert_eq!(code, 2, "release without --force: {text}");
    // ci logs: a job the commit's CI does not have is bad input, naming the jobs it has.
    let (code, text) = code_of(
        &org,
        &[
            "ci", "logs", "--repo", "alpha", "--sha", &sha, "--job", "nope",
        ],
    );
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("test"), "names the jobs: {text}");
    let out = org.run(&[
        "ci", "logs", "--repo", "alpha", "--sha", &sha, "--job", "test", "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["jobs"][0]["job"], "test", "{v}");
    assert!(v["jobs"][0]["log"].is_string(), "{v}");
    // ci status: green is 0.
    let (code, text) = code_of(&org, &["ci", "status", "--repo", "alpha", "--sha", &sha]);
    assert_eq!(code, 0, "{text}");
}

/// cancel and release answer in JSON too.
#[test]
fn cancel_and_release_speak_json() {
    let org = Org::new(
        Spec::local("blocked_runs_on.sh").repo(RepoSpec::new("alpha").standard_ci("true")),
    );
    let id = org.spawn_detached("alpha", "hang around");
    // A BLOCKED worker's lock (the lock of one at work is not freed under it).
    org.wait_milestone(&id, "BLOCKED", DEADLINE);
    let v = org.json(&["release", &id, "--force", "--reason", "freeze", "--json"]);
    assert_eq!(v["released"], true, "{v}");
    assert_eq!(v["repo"], "alpha", "{v}");
    let v = org.json(&["cancel", &id, "--json"]);
    assert_eq!(v["cancelled"], true, "{v}");
    assert_eq!(v["worker_id"], id.as_str(), "{v}");
    org.wait_supervisor_gone(&id);
}

/// `status --watch` into a pipe writes no screen-clearing escape codes.
#[test]
fn watch_into_a_pipe_writes_no_escape_codes() {
    let dir = fresh();
    // Some state, so that the watch loop runs.
    let (code, _, err) = orch_in(dir.path(), &["hold", "core", "--reason", "freeze"]);
    assert_eq!(code, 0, "{err}");
    let mut child = orch_cmd()
        .current_dir(dir.path())
        .args(["status", "--watch"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    child.kill().unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("hold:"), "{text}");
    assert!(!text.contains('\x1b'), "{text:?}");
}

/// Without --config, repos.yaml is found searching upward from the current directory (as git
/// and cargo do); where there is none, the error names where orch looked.
#[test]
fn repos_yaml_is_found_from_a_subdirectory() {
    let dir = fresh();
    let sub = dir.path().join("notes/deep");
    std::fs::create_dir_all(&sub).unwrap();
    let (code, out, err) = orch_in(&sub, &["check"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("ok:"), "{out}");
    assert!(
        out.contains(&dir.path().join("repos.yaml").display().to_string())
            || out.contains("repos.yaml"),
        "{out}"
    );
    let (code, out, err) = orch_in(&sub, &["graph"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("vm"), "{out}");

    let empty = tempfile::tempdir().unwrap();
    let (code, out, err) = orch_in(empty.path(), &["check"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("no repos.yaml in"), "{err}");
    assert!(err.contains("any directory above it"), "{err}");
    assert!(err.contains("--config"), "{err}");
    // --config still wins over the search.
    let (code, out, err) = orch_in(
        &sub,
        &[
            "--config",
            empty.path().join("repos.yaml").to_str().unwrap(),
            "check",
        ],
    );
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("cannot read"), "{err}");
}

/// `--since 1.5h` is accepted; a duration without a unit says which units are allowed.
#[test]
fn decimal_durations_are_accepted_and_bad_ones_name_the_units() {
    let dir = fresh();
    let (code, out, err) = orch_in(dir.path(), &["alerts", "--since", "1.5h", "--json"]);
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = orch_in(dir.path(), &["alerts", "--since", "1.5"]);
    assert_eq!(code, 2, "{out}{err}");
    assert!(err.contains("ms, s, m, h or d"), "{err}");
}

/// `orch completions bash` completes repository names and worker ids by asking the running orch
/// (`__complete`), and hands every other word to clap's script.
#[test]
fn completions_offer_repositories_and_worker_ids() {
    let org = Org::new(
        Spec::local("happy.sh")
            .repo(RepoSpec::new("alpha").standard_ci("true"))
            .repo(RepoSpec::new("beta").standard_ci("true")),
    );
    let (out, id) = org.spawn_foreground("alpha", "a worker to complete");
    assert!(out.status.success(), "{}", output_text(&out));
    let script_dir = tempfile::tempdir().unwrap();
    let script = script_dir.path().join("orch.bash");
    let generated = org.run(&["completions", "bash"]);
    assert!(generated.status.success(), "{}", output_text(&generated));
    std::fs::write(&script, &generated.stdout).unwrap();
    let complete = |words: &str, cword: usize| -> Vec<String> {
        let template = org.cmd(&[]);
        let mut bash = std::process::Command::new("bash");
        for (k, v) in template.get_envs() {
            match v {
                Some(v) => bash.env(k, v),
                None => bash.env_remove(k),
            };
        }
        // Called as bash calls a completion function: command, current word, previous word.
        let out = bash
            .env("ORCH_UNDER_TEST", crate::support::ORCH)
            .arg("-c")
            .arg(format!(
                "source {}; COMP_WORDS=(\"$ORCH_UNDER_TEST\" {words}); COMP_CWORD={cword}; \
                 _orch_dynamic \"$ORCH_UNDER_TEST\" \"${{COMP_WORDS[COMP_CWORD]}}\" \
                 \"${{COMP_WORDS[COMP_CWORD-1]}}\"; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
                script.display()
            ))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", output_text(&out));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_string)
            .collect()
    };
    assert_eq!(complete("spawn --repo ''", 3), ["alpha", "beta"]);
    assert_eq!(complete("spawn --repo b", 3), ["beta"]);
    assert_eq!(complete("can-spawn ''", 2), ["alpha", "beta"]);
    assert_eq!(complete("cancel ''", 2), vec![id.clone()]);
    assert_eq!(complete("sessions show ''", 3), vec![id]);
    // Every other word is clap's: options of the subcommand, subcommands.
    assert!(complete("spawn --ta", 2).contains(&"--task".to_string()));
    assert!(complete("sess", 1).contains(&"sessions".to_string()));
    // Where orch cannot read an organisation, no values and no error text.
    let empty = tempfile::tempdir().unwrap();
    let out = orch_cmd()
        .current_dir(empty.path())
        .args(["__complete", "workers"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    assert!(
        out.stdout.is_empty() && out.stderr.is_empty(),
        "{}",
        output_text(&out)
    );
    assert!(!empty.path().join("sessions").exists());
}
