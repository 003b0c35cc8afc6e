//! `orch check` on bad input: every problem is reported, each naming what and where
//! (file:line:column), and the exit code is 2.

use crate::support::{CONTRACT_TEXT as CONTRACT, orch_cmd};

/// Writes repos.yaml (and the shipped contract unless `contract` is given) into a temp dir
/// and runs `orch check` there.
fn check(repos: &str, contract: Option<&str>) -> (i32, String, String) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("repos.yaml"), repos).unwrap();
    std::fs::create_dir_all(dir.path().join("contracts")).unwrap();
    std::fs::write(
        dir.path().join("contracts/worker-completion.yaml"),
        contract.unwrap_or(CONTRACT),
    )
    .unwrap();
    let out = orch_cmd()
        .current_dir(dir.path())
        .arg("check")
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (
        out.status.code().unwrap_or(-1),
        text(&out.stdout),
        text(&out.stderr),
    )
}

fn assert_reports(stderr: &str, file: &str, line: u64, needle: &str) {
    let hit = stderr
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line mentions {needle:?}:\n{stderr}"));
    let prefix = format!("{file}:{line}:");
    assert!(
        hit.contains(&prefix),
        "{needle:?} should be reported at {prefix}<column>, got: {hit}"
    );
}

#[test]
fn valid_config_passes() {
    let (code, stdout, stderr) = check("repos:\n  core: {}\n  vm: { deps: [core] }\n", None);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.starts_with("ok:"), "{stdout}");
}

#[test]
fn unknown_key_is_refused_with_its_position() {
    let (code, _, stderr) = check(
        "repos:\n  core: {}\n  vm:\n    deps: [core]\n    dependencies: [core]\n",
        None,
    );
    assert_eq!(code, 2);
    assert_reports(&stderr, "repos.yaml", 5, "dependencies");
}

#[test]
fn unknown_top_level_key_is_refused() {
    let (code, _, stderr) = check("repo:\n  core: {}\n", None);
    assert_eq!(code, 2);
    assert!(stderr.contains("repo"), "{stderr}");
    assert!(stderr.contains("repos.yaml:1:"), "{stderr}");
}

#[test]
fn duplicate_repository_names_are_refused() {
    let (code, _, stderr) = check(
        "repos:\n  core: {}\n  vm: { deps: [core] }\n  core: { deps: [] }\n",
        None,
    );
    assert_eq!(code, 2);
    assert_reports(
        &stderr,
        "repos.yaml",
        4,
        "duplicate repository \"core\" (first defined at line 2)",
    );
}

#[test]
fn unknown_dependency_is_refused() {
    let (code, _, stderr) = check("repos:\n  core: {}\n  vm: { deps: [core, kernel] }\n", None);
    assert_eq!(code, 2);
    assert_reports(
        &stderr,
        "repos.yaml",
        3,
        "repository \"vm\" depends on unknown repository \"kernel\"",
    );
}

#[test]
fn self_dependency_is_refused() {
    let (code, _, stderr) = check("repos:\n  core: {}\n  vm:\n    deps: [core, vm]\n", None);
    assert_eq!(code, 2);
    assert_reports(
        &stderr,
        "repos.yaml",
        4,
        "repository \"vm\" depends on itself",
    );
}

#[test]
fn cycle_is_printed() {
    let (code, _, stderr) = check(
        "repos:\n  acdc-core: {}\n  alphavm: { deps: [acdc-core, adnet] }\n  adnet: { deps: [alphavm] }\n",
        None,
    );
    assert_eq!(code, 2);
    assert!(
        stderr.contains("dependency cycle: adnet -> alphavm -> adnet")
            || stderr.contains("dependency cycle: alphavm -> adnet -> alphavm"),
        "{stderr}"
    );
    assert!(stderr.contains("repos.yaml:"), "{stderr}");
}

#[test]
fn longer_cycle_is_printed_in_dependency_order() {
    let (code, _, stderr) = check(
        "repos:\n  a: { deps: [b] }\n  b: { deps: [c] }\n  c: { deps: [a] }\n",
        None,
    );
    assert_eq!(code, 2);
    assert!(
        stderr.contains("dependency cycle: a -> b -> c -> a"),
        "{stderr}"
    );
    assert_reports(&stderr, "repos.yaml", 2, "dependency cycle");
}

#[test]
fn hostile_names_are_refused() {
    for (name, shown) in [
        ("'../etc'", "../etc"),
        ("'a b'", "a b"),
        ("'-rf'", "-rf"),
        ("'.hidden'", ".hidden"),
        ("'x;rm -rf /'", "x;rm -rf /"),
        ("'dir/name'", "dir/name"),
    ] {
        let (code, _, stderr) = check(
            &format!("repos:\n  core: {{}}\n  {name}: {{ deps: [core] }}\n"),
            None,
        );
        assert_eq!(code, 2, "{name}");
        assert_reports(
            &stderr,
            "repos.yaml",
            3,
            &format!("repository name \"{shown}\" is not allowed"),
        );
        assert!(stderr.contains("[A-Za-z0-9][A-Za-z0-9._-]*"), "{stderr}");
    }
}

#[test]
fn zero_and_negative_durations_are_refused() {
    let (code, _, stderr) = check(
        "ci:\n  start_timeout: 0s\n  poll_interval: -5s\nrepos:\n  core:\n    ci:\n      jobs:\n        - { name: check, run: 'true', timeout: 0m }\n",
        None,
    );
    assert_eq!(code, 2);
    assert_reports(
        &stderr,
        "repos.yaml",
        2,
        "ci.start_timeout: duration \"0s\" is zero",
    );
    assert_reports(
        &stderr,
        "repos.yaml",
        3,
        "ci.poll_interval: duration \"-5s\" is negative",
    );
    assert_reports(
        &stderr,
        "repos.yaml",
        8,
        "timeout of job \"check\": duration \"0m\" is zero",
    );
}

#[test]
fn malformed_yaml_names_the_place() {
    let (code, _, stderr) = check("repos:\n  core: { deps: [unclosed\n", None);
    assert_eq!(code, 2);
    assert!(stderr.contains("repos.yaml:"), "{stderr}");
}

#[test]
fn every_problem_is_reported_not_just_the_first() {
    let (code, _, stderr) = check(
        "repos:\n  core: { deps: [core] }\n  vm: { deps: [ghost] }\n  'bad name': {}\n  vm: {}\n",
        None,
    );
    assert_eq!(code, 2);
    for needle in [
        "depends on itself",
        "unknown repository \"ghost\"",
        "\"bad name\" is not allowed",
        "duplicate repository \"vm\"",
    ] {
        assert!(stderr.contains(needle), "missing {needle:?} in:\n{stderr}");
    }
    assert!(stderr.contains("4 problems found"), "{stderr}");
}

#[test]
fn contract_transition_to_unknown_state_is_refused() {
    let contract = CONTRACT.replace(
        "{ from: FIXING_CI,    to: PUSHED_TO_CI, trigger: fix_pushed }",
        "{ from: FIXING_CI,    to: PUSHED, trigger: fix_pushed }",
    );
    let line = contract
        .lines()
        .position(|l| l.contains("to: PUSHED,"))
        .unwrap() as u64
        + 1;
    let (code, _, stderr) = check("repos:\n  core: {}\n", Some(&contract));
    assert_eq!(code, 2);
    assert_reports(
        &stderr,
        "worker-completion.yaml",
        line,
        "transition to names unknown state \"PUSHED\"",
    );
}

#[test]
fn contract_zero_and_negative_durations_are_refused() {
    let contract = CONTRACT
        .replace(
            "PUSHED_TO_CI: { timeout: 15m",
            "PUSHED_TO_CI: { timeout: 0s",
        )
        .replace("progress_window: 5m", "progress_window: -1m");
    let (code, _, stderr) = check("repos:\n  core: {}\n", Some(&contract));
    assert_eq!(code, 2);
    let line = |needle: &str| contract.lines().position(|l| l.contains(needle)).unwrap() as u64 + 1;
    assert_reports(
        &stderr,
        "worker-completion.yaml",
        line("timeout: 0s"),
        "PUSHED_TO_CI.timeout: duration \"0s\" is zero",
    );
    assert_reports(
        &stderr,
        "worker-completion.yaml",
        line("progress_window: -1m"),
        "progress_window: duration \"-1m\" is negative",
    );
}

#[test]
fn problems_in_both_files_are_reported_together() {
    let contract = CONTRACT.replace("initial: WORKING", "initial: STARTING");
    let (code, _, stderr) = check("repos:\n  core: { deps: [nothing] }\n", Some(&contract));
    assert_eq!(code, 2);
    assert!(
        stderr.contains("unknown repository \"nothing\""),
        "{stderr}"
    );
    assert!(stderr.contains("unknown state \"STARTING\""), "{stderr}");
}

#[test]
fn missing_config_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let out = orch_cmd()
        .current_dir(dir.path())
        .args(["graph"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no repos.yaml in") && err.contains(&dir.path().display().to_string()),
        "{err}"
    );
    // It names the commands that make one.
    assert!(
        err.contains("orch init") && err.contains("orch init --example"),
        "{err}"
    );
}

#[test]
fn prompt_template_with_an_unknown_placeholder_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("repos.yaml"), "repos:\n  core: {}\n").unwrap();
    std::fs::create_dir_all(dir.path().join("contracts/prompts")).unwrap();
    std::fs::write(
        dir.path().join("contracts/worker-completion.yaml"),
        CONTRACT,
    )
    .unwrap();
    std::fs::write(
        dir.path().join("contracts/prompts/worker.md"),
        "TASK: {{taks}}\n",
    )
    .unwrap();
    let out = orch_cmd()
        .current_dir(dir.path())
        .arg("check")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("worker.md") && err.contains("{{taks}}"),
        "{err}"
    );
}

/// What would stop a worker later is a problem now, each naming the repository: a path that
/// is not a git repository, a base branch the clone does not have, the forge's token
/// variable unset. All of them in one run.
#[test]
fn clone_branch_and_token_problems_are_all_reported() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("plain")).unwrap();
    let git = |args: &[&str]| {
        let ok = std::process::Command::new("git")
            .current_dir(dir.path())
            .args(args)
            .output()
            .unwrap()
            .status
            .success();
        assert!(ok, "git {args:?}");
    };
    git(&["init", "-q", "-b", "main", "cloned"]);
    git(&[
        "-C",
        "cloned",
        "-c",
        "user.name=t",
        "-c",
        "user.email=t@t",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "x",
    ]);
    std::fs::write(
        dir.path().join("repos.yaml"),
        "forge: { kind: forgejo, url: 'http://127.0.0.1:9', owner: o, token_env: ORCH_TEST_NO_SUCH_TOKEN }\n\
         repos:\n  plain: { path: plain }\n  cloned: { path: cloned, branch: release }\n",
    )
    .unwrap();
    let out = orch_cmd()
        .current_dir(dir.path())
        .arg("check")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("3 problems"), "{stderr}");
    assert!(stderr.contains("not a git repository"), "{stderr}");
    assert!(stderr.contains("base branch release"), "{stderr}");
    assert!(stderr.contains("ORCH_TEST_NO_SUCH_TOKEN"), "{stderr}");
    assert!(
        !stderr.contains("warning"),
        "errors, not warnings: {stderr}"
    );
}

fn check_args(repos: &str, args: &[&str]) -> (i32, String, String) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("repos.yaml"), repos).unwrap();
    let out = orch_cmd()
        .current_dir(dir.path())
        .args(args)
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (
        out.status.code().unwrap_or(-1),
        text(&out.stdout),
        text(&out.stderr),
    )
}

#[test]
fn check_json_lists_problems_with_positions_and_warnings() {
    let (code, out, err) = check_args(
        "repos:\n  core: {}\n  vm: { deps: [core, nope] }\n",
        &["check", "--json"],
    );
    assert_eq!(code, 2, "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect(&out);
    assert_eq!(v["ok"], false);
    let problems = v["problems"].as_array().unwrap();
    assert!(!problems.is_empty(), "{v}");
    let p = problems
        .iter()
        .find(|p| p["message"].as_str().unwrap().contains("nope"))
        .expect("the unknown dependency");
    assert_eq!(p["line"], 3, "{v}");
    assert!(p["column"].as_u64().unwrap() > 0, "{v}");
    assert!(p["file"].as_str().unwrap().ends_with("repos.yaml"), "{v}");

    // ok, with a warning (no clones yet) in the JSON rather than on stderr.
    let (code, out, err) = check_args("repos:\n  core: {}\n", &["check", "--json"]);
    assert_eq!(code, 0, "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect(&out);
    assert_eq!(v["ok"], true);
    assert_eq!(v["problems"].as_array().unwrap().len(), 0);
    assert_eq!(v["repositories"], 1);
    assert!(
        v["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w.as_str().unwrap().contains("no local clone")),
        "{v}"
    );
    assert!(!err.contains("warning:"), "{err}");
}

#[test]
fn quiet_silences_checks_warnings() {
    let repos = "repos:\n  core: {}\n  vm: { deps: [core] }\n";
    let (code, out, err) = check_args(repos, &["check"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(err.contains("warning:"), "{err}");
    assert!(out.contains("2 repositories"), "{out}");
    let (code, out, err) = check_args(repos, &["-q", "check"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(err.is_empty(), "{err}");
    assert!(out.starts_with("ok:"), "{out}");
    let (_, out, _) = check_args("repos:\n  core: {}\n", &["check"]);
    assert!(out.contains("1 repository,"), "{out}");
}

/// Unknown keys do not stop the check: each is reported with its position, and the rest of
/// the file is still validated in the same run (8 problems, 8 reported).
#[test]
fn every_unknown_key_and_every_other_problem_in_one_run() {
    let repos = "\
forge:
  kind: local
  colour: blue
ci:
  sync_jobb: radicle-push
worker:
  max_parallel: 0
alerts:
  - command: [notify-send]
    severity: critical
extra: 1
repos:
  core:
    dependencies: [vm]
    ci:
      jobs:
        - { name: check, run: 'true', timout: 5m }
  vm: { deps: [ghost] }
  'bad name': {}
";
    let (code, out, err) = check_args(repos, &["check", "--json"]);
    assert_eq!(code, 2, "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect(&out);
    let problems = v["problems"].as_array().unwrap();
    let at = |needle: &str| -> (u64, u64) {
        let p = problems
            .iter()
            .find(|p| p["message"].as_str().unwrap().contains(needle))
            .unwrap_or_else(|| panic!("no problem mentions {needle:?}: {v}"));
        (p["line"].as_u64().unwrap(), p["column"].as_u64().unwrap())
    };
    assert_eq!(at("`colour`").0, 3);
    assert_eq!(at("`sync_jobb`").0, 5);
    assert_eq!(at("`severity`").0, 10);
    assert_eq!(at("`extra`"), (11, 1));
    assert_eq!(at("`dependencies`").0, 14);
    assert_eq!(at("`timout`").0, 17);
    assert_eq!(at("max_parallel").0, 7);
    assert_eq!(at("ghost").0, 18);
    assert_eq!(at("bad name").0, 19);
    assert!(at("`sync_jobb`").1 > 1);
    assert_eq!(problems.len(), 9, "{v}");

    // The same in human output, each as file:line:col.
    let (code, _, err) = check_args(repos, &["check"]);
    assert_eq!(code, 2);
    assert!(
        err.contains("repos.yaml:14:5: unknown key `dependencies` in repos.core"),
        "{err}"
    );
    assert!(err.contains("9 problems found"), "{err}");
}

#[test]
fn wrong_typed_values_are_reported_and_the_rest_still_validated() {
    // Four wrong-typed values (an integer as text, a list as a number, a repository as a
    // list, a list item that is a list) and four other problems after them: all eight.
    let repos = "\
worker:
  max_parallel: \"x\"
  max_cost_usd: lots
  bogus: 1
ci: { poll_interval: 0s }
repos:
  core:
    deps: 5
  sdk: [a, b]
  vm:
    deps: [core, [net]]
  net: { deps: [ghost] }
  'bad name': {}
";
    let (code, _, stderr) = check(repos, None);
    assert_eq!(code, 2, "{stderr}");
    for (line, needle) in [
        (
            2,
            "worker.max_parallel must be a whole number, not the text \"x\"",
        ),
        (
            3,
            "worker.max_cost_usd must be a number, not the text \"lots\"",
        ),
        (4, "unknown key `bogus` in worker"),
        (5, "ci.poll_interval"),
        (
            8,
            "repos.core.deps must be a list of names, not the number 5",
        ),
        (9, "repos.sdk must be a mapping of settings"),
        (11, "repos.vm.deps[1] must be a single value, not a list"),
        (12, "unknown repository \"ghost\""),
        (13, "\"bad name\" is not allowed"),
    ] {
        assert_reports(&stderr, "repos.yaml", line, needle);
    }
    assert!(stderr.contains("9 problems found"), "{stderr}");
}

#[test]
fn a_wrong_typed_forge_section_and_job_still_let_the_repositories_be_checked() {
    let repos = "\
forge: [local]
repos:
  core:
    ci:
      jobs:
        - { name: check, run: true, needs: check }
        - { name: radicle-push, run: \"true\", timeout: 0s }
  vm: { deps: [core, vm] }
";
    let (code, _, stderr) = check(repos, None);
    assert_eq!(code, 2, "{stderr}");
    assert_reports(
        &stderr,
        "repos.yaml",
        1,
        "forge must be a mapping, not a list",
    );
    assert_reports(
        &stderr,
        "repos.yaml",
        6,
        "repos.core.ci.jobs[0].needs must be a list of names, not the text \"check\"",
    );
    assert_reports(&stderr, "repos.yaml", 7, "timeout");
    assert_reports(&stderr, "repos.yaml", 8, "depends on itself");
    assert!(stderr.contains("4 problems found"), "{stderr}");
}

#[test]
fn friendly_durations_are_accepted_and_a_bad_one_is_named_with_its_place() {
    let (code, stdout, stderr) = check(
        "ci: { poll_interval: 1.5m, start_timeout: 1 hour }\nworker: { stop_grace: 2 seconds }\nrepos:\n  core: {}\n",
        None,
    );
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.starts_with("ok:"), "{stdout}");
    let (code, _, stderr) = check(
        "ci:\n  poll_interval: 1.5m\n  start_timeout: 5 fortnights\nrepos:\n  core: {}\n",
        None,
    );
    assert_eq!(code, 2, "{stderr}");
    assert_reports(
        &stderr,
        "repos.yaml",
        3,
        "ci.start_timeout: invalid duration \"5 fortnights\"",
    );
    assert!(stderr.contains("units ms, s, m, h or d"), "{stderr}");
}

/// Wrong-typed values in required fields (forge.kind, a webhook's url_env, a job's name and
/// run) are one problem each — no second "missing field" — and do not stop the rest: the
/// five other problems of the file are all reported too, every one in position order (as a
/// compiler lists them), in the human output and in `--json`.
#[test]
fn wrong_typed_required_fields_are_one_problem_each_and_all_are_in_position_order() {
    let repos = "\
repos:
  vm: { deps: [ghost] }
  core:
    ci:
      jobs:
        - { name: [check], run: 'true', timeout: 0s }
        - { name: build, run: { sh: make } }
alerts:
  - webhook: { url_env: [HOOK] }
    min_severity: loud
worker:
  max_parallel: 0
  colour: blue
forge:
  kind: { local: true }
";
    // (line, what): 4 wrong-typed required values and 5 other problems.
    let expected: [(u64, &str); 9] = [
        (2, "unknown repository \"ghost\""),
        (
            6,
            "repos.core.ci.jobs[0].name must be a single value, not a list",
        ),
        (6, "timeout of job at jobs[0]: duration \"0s\" is zero"),
        (
            7,
            "repos.core.ci.jobs[1].run must be a single value, not a mapping",
        ),
        (
            9,
            "alerts[0].webhook.url_env must be a single value, not a list",
        ),
        (10, "min_severity must be info, warning or critical"),
        (12, "worker.max_parallel must be greater than zero"),
        (13, "unknown key `colour` in worker"),
        (15, "forge.kind must be a single value, not a mapping"),
    ];

    let (code, stdout, stderr) = check(repos, None);
    assert_eq!(code, 2, "{stdout}{stderr}");
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("repos.yaml:"))
        .collect();
    assert_eq!(lines.len(), expected.len(), "{stderr}");
    for (got, (line, needle)) in lines.iter().zip(expected) {
        assert!(
            got.contains(&format!("repos.yaml:{line}:")) && got.contains(needle),
            "expected {needle:?} at line {line} here, got {got:?} in:\n{stderr}"
        );
    }
    assert!(!stderr.contains("missing"), "{stderr}");
    assert!(stderr.contains("9 problems found"), "{stderr}");

    let (code, out, err) = check_args(repos, &["check", "--json"]);
    assert_eq!(code, 2, "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect(&out);
    let problems = v["problems"].as_array().unwrap();
    assert_eq!(problems.len(), expected.len(), "{v}");
    let mut previous = (0, 0);
    for (p, (line, needle)) in problems.iter().zip(expected) {
        let at = (p["line"].as_u64().unwrap(), p["column"].as_u64().unwrap());
        assert_eq!(at.0, line, "{needle:?}: {v}");
        assert!(at > previous, "not in position order at {p}: {v}");
        assert!(p["message"].as_str().unwrap().contains(needle), "{p}");
        previous = at;
    }
}

/// Problems of the two files are listed by file, then position; each file's problems
/// without a position come after those with one.
#[test]
fn problems_of_both_files_are_sorted_by_file_then_position() {
    let contract = CONTRACT
        .replace("initial: WORKING", "initial: STARTING")
        .replace("progress_window: 5m", "progress_window: -1m");
    let repos = "repos:\n  b: { deps: [a] }\n  a: { deps: [b] }\n  c: { deps: [nothing] }\n";
    let (code, stdout, stderr) = check(repos, Some(&contract));
    assert_eq!(code, 2, "{stdout}{stderr}");
    let listed: Vec<(String, Option<(u64, u64)>)> = stderr
        .lines()
        .filter(|l| !l.starts_with("orch:"))
        .map(|l| {
            let (file, rest) = l.split_once(".yaml").expect(l);
            let mut parts = rest.splitn(4, ':');
            parts.next();
            let pos = match (parts.next(), parts.next()) {
                (Some(line), Some(col)) => line.parse().ok().zip(col.parse().ok()),
                _ => None,
            };
            (format!("{file}.yaml"), pos)
        })
        .collect();
    assert!(listed.len() >= 4, "{stderr}");
    let files: Vec<&str> = listed.iter().map(|(f, _)| f.as_str()).collect();
    let first_repos = files
        .iter()
        .position(|f| f.ends_with("repos.yaml"))
        .unwrap();
    assert!(
        files[..first_repos]
            .iter()
            .all(|f| f.ends_with("worker-completion.yaml"))
            && files[first_repos..]
                .iter()
                .all(|f| f.ends_with("repos.yaml")),
        "grouped by file, in file name order: {stderr}"
    );
    let key = |(f, p): &(String, Option<(u64, u64)>)| (f.clone(), p.is_none(), *p);
    let mut sorted = listed.clone();
    sorted.sort_by_key(key);
    assert_eq!(listed, sorted, "{stderr}");
    assert!(
        stderr.contains("unknown repository \"nothing\""),
        "{stderr}"
    );
    assert!(stderr.contains("dependency cycle"), "{stderr}");
    assert!(stderr.contains("unknown state \"STARTING\""), "{stderr}");
    assert!(stderr.contains("progress_window"), "{stderr}");
}

/// `env:` of a repository's CI and of a job: secrets' names, orch's own names and wrong shapes
/// are refused where they are written; plain variables pass.
#[test]
fn ci_env_refuses_secrets_and_orchs_names_where_they_are_written() {
    let repos = "forge: {kind: local}\nrepos:\n  a:\n    ci:\n      env:\n        GITHUB_TOKEN: x\n        RUST_BACKTRACE: 1\n      jobs:\n        - name: check\n          run: 'true'\n          env: {ORCH_UPSTREAMS: /x, DB_PASSWORD: y}\n  b:\n    ci:\n      env: [A]\n      jobs: [{name: check, run: 'true'}]\n";
    let (code, _, stderr) = check(repos, None);
    assert_eq!(code, 2, "{stderr}");
    assert_reports(&stderr, "repos.yaml", 6, "GITHUB_TOKEN names a secret");
    assert_reports(&stderr, "repos.yaml", 11, "ORCH_UPSTREAMS is orch's");
    assert_reports(&stderr, "repos.yaml", 11, "DB_PASSWORD names a secret");
    assert_reports(
        &stderr,
        "repos.yaml",
        14,
        "repos.b.ci.env must be a mapping",
    );
    assert!(!stderr.contains("RUST_BACKTRACE"), "{stderr}");
    let fine = "forge: {kind: local}\nrepos:\n  a:\n    ci:\n      env: {RUST_BACKTRACE: 1, CARGO_TERM_COLOR: never}\n      jobs: [{name: check, run: 'true', env: {PIP_NO_INDEX: true}}]\n";
    let (code, _, stderr) = check(fine, None);
    assert_eq!(code, 0, "{stderr}");
}
