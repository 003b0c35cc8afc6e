//! Tests of loading and validating repos.yaml.

use super::*;

fn load(text: &str) -> Result<Config, Diagnostics> {
    Config::from_str(text, Path::new("/tmp/repos.yaml"))
}

#[test]
fn minimal_config_gets_local_forge_and_defaults() {
    let c = load("repos:\n  a: {}\n  b: { deps: [a] }\n").unwrap();
    assert_eq!(c.forge.kind, ForgeKind::Local);
    assert_eq!(c.ci.sync_job, "radicle-push");
    assert_eq!(c.repo("b").unwrap().deps, vec!["a"]);
    assert_eq!(c.repo("a").unwrap().path, Path::new("/tmp/a"));
    assert_eq!(c.repo("a").unwrap().branch, "main");
}

#[test]
fn reports_every_problem_with_positions() {
    let err = load("repos:\n  a: { deps: [a, zz] }\n  'b c': {}\n  a: {}\n").unwrap_err();
    let text = err.to_string();
    assert!(text.contains("depends on itself"), "{text}");
    assert!(text.contains("unknown repository \"zz\""), "{text}");
    assert!(text.contains("\"b c\" is not allowed"), "{text}");
    assert!(text.contains("duplicate repository \"a\""), "{text}");
    assert!(text.contains("/tmp/repos.yaml:2:"), "{text}");
    assert_eq!(err.0.len(), 4, "{text}");
}

#[test]
fn cycle_is_printed_as_a_path() {
    let err =
        load("repos:\n  alphavm: { deps: [adnet] }\n  adnet: { deps: [alphavm] }\n").unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("alphavm -> adnet -> alphavm") || text.contains("adnet -> alphavm -> adnet"),
        "{text}"
    );
}

/// Every cycle at once, each at its own position (issue 37: the Rust family has three, and
/// `check` showed one per run): two separate cycles and two through one repository.
#[test]
fn every_cycle_is_reported_in_one_run() {
    let err = load(
        "repos:\n  tracing: { deps: [hyper] }\n  hyper: { deps: [h2, tracing] }\n  h2: { deps: [hyper] }\n  net: { deps: [crypto] }\n  crypto: { deps: [net] }\n",
    )
    .unwrap_err();
    let cycles: Vec<String> = err
        .0
        .iter()
        .map(|d| d.to_string())
        .filter(|t| t.contains("dependency cycle"))
        .collect();
    assert_eq!(cycles.len(), 3, "{cycles:#?}");
    for pair in [["hyper", "h2"], ["hyper", "tracing"], ["crypto", "net"]] {
        assert!(
            cycles.iter().any(|c| pair.iter().all(|r| c.contains(r))),
            "{pair:?}: {cycles:#?}"
        );
    }
}

#[test]
fn token_variable_must_not_be_passed_to_workers() {
    let err = load(
        "forge: {kind: forgejo, url: 'https://f', owner: o, token_env: FORGEJO_TOKEN}\nworker: {env_passthrough: [PATH, FORGEJO_TOKEN]}\nrepos: {a: {}}\n",
    )
    .unwrap_err();
    assert!(err.to_string().contains("never receive the forge token"));
}

#[test]
fn names_must_be_git_ref_components() {
    for bad in ["a..b", "a.", "core.lock"] {
        let err = load(&format!("repos:\n  {bad}: {{}}\n")).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains(&format!("\"{bad}\" is not allowed")),
            "{text}"
        );
        assert!(text.contains("git ref"), "{text}");
        assert!(text.contains("/tmp/repos.yaml:2:3:"), "{text}");
    }
    assert!(load("repos:\n  a.b: {}\n  c-d_e: {}\n").is_ok());
}

#[test]
fn names_must_fit_orchs_file_names() {
    assert_eq!(MAX_REPO_NAME, 209);
    let ok = "a".repeat(MAX_REPO_NAME);
    assert!(load(&format!("repos:\n  {ok}: {{}}\n")).is_ok());
    let long = "a".repeat(240);
    let text = load(&format!("repos:\n  {long}: {{}}\n"))
        .unwrap_err()
        .to_string();
    assert!(text.contains("240 bytes long; at most 209"), "{text}");
    assert!(
        !text.contains(&long),
        "the whole name is not repeated: {text}"
    );
}

#[test]
fn one_clone_under_two_names_is_refused() {
    let text = load("repos:\n  a: {path: x}\n  b: {path: ./y/../x}\n  c: {}\n")
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("repositories \"a\" and \"b\" are one clone, /tmp/x"),
        "{text}"
    );
    assert!(text.starts_with("/tmp/repos.yaml:3:"), "{text}");
    // Through a resolver that follows a symlink: b's clone is a link to a's.
    let resolve = |p: &Path| {
        if p == Path::new("/tmp/link") {
            PathBuf::from("/tmp/real")
        } else {
            normalize(p)
        }
    };
    let text = Config::parse(
        "repos:\n  a: {path: real}\n  b: {path: link}\n",
        Path::new("/tmp/repos.yaml"),
        &resolve,
    )
    .unwrap_err()
    .to_string();
    assert!(
        text.contains("\"a\" and \"b\" are one clone, /tmp/real (path /tmp/link)"),
        "{text}"
    );
}

#[test]
fn a_token_in_token_env_is_refused_and_not_shown() {
    let tokens = [
        "0123456789abcdef0123456789abcdef01234567",
        "ghp_R2d2C3poX9wingBB8aZ0123456789abcdEF",
        "glpat-xxxxxxxxxxxxxxxxxxxx",
    ];
    for t in tokens {
        let text = load(&format!(
            "forge: {{kind: forgejo, url: 'https://f', owner: o, token_env: '{t}'}}\nrepos: {{a: {{}}}}\n"
        ))
        .unwrap_err()
        .to_string();
        assert!(text.contains("must be the NAME"), "{text}");
        assert!(!text.contains(t), "the token is echoed: {text}");
        assert!(
            !text.contains(&t[4..20]),
            "part of the token is echoed: {text}"
        );
    }
    for name in [
        "FORGEJO_TOKEN",
        "my_forgejo_token_v2",
        "GITEA_TOKEN_2024",
        "_T",
    ] {
        assert!(validate::env_var_name(name), "{name}");
    }
    let c = load(
        "forge: {kind: forgejo, url: 'https://f', owner: o, token_env: FORGEJO_TOKEN}\nrepos: {a: {}}\n",
    )
    .unwrap();
    assert_eq!(c.forge.token_env.as_deref(), Some("FORGEJO_TOKEN"));
}

#[test]
fn a_url_in_url_env_is_refused_and_not_shown() {
    let text = load(
        "alerts:\n  - webhook: {url_env: 'https://hooks.example/T0/B1/secret'}\nrepos: {a: {}}\n",
    )
    .unwrap_err()
    .to_string();
    assert!(text.contains("url_env must be the NAME"), "{text}");
    assert!(!text.contains("secret"), "{text}");
}

#[test]
fn bad_utf8_is_reported_with_its_position() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("repos.yaml");
    std::fs::write(&file, b"repos:\n  core: {}\n  v\xe9m: {}\n").unwrap();
    let err = Config::load(&file).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!(
            "{}:3:4: not valid UTF-8 at byte offset 21",
            file.display()
        )),
        "{err}"
    );
}

#[test]
fn alerts_take_a_list_or_a_mapping_with_delivery_settings() {
    let c = load(
        "alerts:\n  - webhook: {url_env: HOOK}\n  - command: [notify-send, orch]\nrepos: {a: {}}\n",
    )
    .unwrap();
    let labels: Vec<&str> = c.alerts.sinks.iter().map(|s| s.label.as_str()).collect();
    assert_eq!(labels, ["webhook:HOOK", "command:notify-send"]);
    assert_eq!(c.alerts.dedup_window, DEDUP_WINDOW);
    let c = load(
        "alerts:\n  dedup_window: 5m\n  max_attempts: 3\n  sinks:\n    - command: [/bin/a]\n      min_severity: critical\n      timeout: 2s\n    - command: [a]\nrepos: {a: {}}\n",
    )
    .unwrap();
    assert_eq!(c.alerts.dedup_window, Duration::from_secs(300));
    assert_eq!(c.alerts.max_attempts, 3);
    let s = &c.alerts.sinks;
    assert_eq!(
        (s[0].label.as_str(), s[1].label.as_str()),
        ("command:a", "command:a#2")
    );
    assert!(s[0].wants("critical") && !s[0].wants("warning") && s[1].wants("info"));
    assert_eq!(s[0].timeout, Duration::from_secs(2));
    let text = load(
        "alerts:\n  dedup_window: 0s\n  sinks:\n    - command: [a]\n      min_severity: loud\nrepos: {a: {}}\n",
    )
    .unwrap_err()
    .to_string();
    assert!(text.contains("alerts.dedup_window"), "{text}");
    assert!(
        text.contains(
            "/tmp/repos.yaml:5:21: alerts: min_severity must be info, warning or critical"
        ),
        "{text}"
    );
    let text = load("alerts: {sink: []}\nrepos: {a: {}}\n")
        .unwrap_err()
        .to_string();
    assert!(text.contains("sink"), "{text}");
}

#[test]
fn agents_get_their_default_argv_and_environment() {
    let c = load("repos: {a: {}}\n").unwrap();
    assert_eq!(c.worker.agent, Agent::Command);
    assert_eq!(c.worker.command, vec!["claude", "-p"]);
    let c =
        load("worker: {agent: claude, max_cost_usd: 2.5, max_tokens: 100000}\nrepos: {a: {}}\n")
            .unwrap();
    assert_eq!(c.worker.agent, Agent::Claude);
    assert!(c.worker.command.contains(&"stream-json".to_string()));
    assert!(c.worker.command.contains(&"{resume}".to_string()));
    assert!(
        c.worker
            .env_passthrough
            .contains(&"ANTHROPIC_BASE_URL".to_string())
    );
    assert_eq!(c.worker.max_cost_usd, Some(2.5));
    assert_eq!(c.worker.max_tokens, Some(100_000));
    let c = load("worker: {agent: codex, command: [codex, exec, '{resume}']}\nrepos: {a: {}}\n")
        .unwrap();
    assert_eq!(c.worker.command, vec!["codex", "exec", "{resume}"]);
}

#[test]
fn bad_agent_placeholders_and_budgets_are_refused_with_positions() {
    let err = load(
        "worker:\n  agent: claud\n  command: [claude, '{sesion}', '--x={resume}']\n  max_cost_usd: -1\n  max_tokens: 0\nrepos: {a: {}}\n",
    )
    .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("/tmp/repos.yaml:2:") && text.contains("unknown agent \"claud\""),
        "{text}"
    );
    assert!(
        text.contains("/tmp/repos.yaml:3:") && text.contains("unknown placeholder {sesion}"),
        "{text}"
    );
    assert!(text.contains("whole argument"), "{text}");
    assert!(
        text.contains("/tmp/repos.yaml:4:") && text.contains("max_cost_usd"),
        "{text}"
    );
    assert!(
        text.contains("/tmp/repos.yaml:5:") && text.contains("max_tokens"),
        "{text}"
    );
    assert_eq!(err.0.len(), 5, "{text}");
}

#[test]
fn unknown_keys_are_all_reported_with_the_rest() {
    let err = load(
        "alerts:\n  dedup_windw: 5m\n  sinks:\n    - webhook: { url_env: HOOK, urll: x }\nrepos:\n  a: { deps: [zz], brnch: main }\n",
    )
    .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("/tmp/repos.yaml:2:3: unknown key `dedup_windw` in alerts"),
        "{text}"
    );
    assert!(
        text.contains("unknown key `urll` in alerts.sinks[0].webhook"),
        "{text}"
    );
    assert!(text.contains("unknown key `brnch` in repos.a"), "{text}");
    assert!(text.contains("unknown repository \"zz\""), "{text}");
    assert_eq!(err.0.len(), 4, "{text}");
    // A valid file has none.
    assert!(load("alerts: []\nrepos:\n  a: { ci: { jobs: [{ name: x, run: y }] } }\n").is_ok());
}

/// (line, column, message) of each problem, in the order reported.
fn listed(err: &Diagnostics) -> Vec<(u64, u64, String)> {
    err.0
        .iter()
        .map(|d| {
            let p = d.pos.expect("a position");
            (p.line, p.column, d.message.clone())
        })
        .collect()
}

#[test]
fn a_wrong_typed_required_value_is_one_problem_and_the_rest_is_still_checked() {
    let err = load(
        "\
forge:
  kind: [local]
alerts:
  - webhook: { url_env: [HOOK] }
    min_severity: loud
repos:
  a:
    deps: [zz]
    ci:
      jobs:
        - { name: [x], run: 'true', timeout: 0s }
        - { name: y, run: { sh: 'true' }, needs: [y] }
",
    )
    .unwrap_err();
    let text = err.to_string();
    assert!(!text.contains("missing"), "no second problem: {text}");
    assert_eq!(
        listed(&err),
        [
            (2, 9, "forge.kind must be a single value, not a list".into()),
            (
                4,
                25,
                "alerts[0].webhook.url_env must be a single value, not a list".into()
            ),
            (
                5,
                19,
                "alerts: min_severity must be info, warning or critical, got \"loud\"".into()
            ),
            (
                8,
                12,
                "repository \"a\" depends on unknown repository \"zz\"".into()
            ),
            (
                11,
                19,
                "repos.a.ci.jobs[0].name must be a single value, not a list".into()
            ),
            (
                11,
                46,
                "timeout of job at jobs[0]: duration \"0s\" is zero; it must be greater than zero"
                    .into()
            ),
            (
                12,
                27,
                "repos.a.ci.jobs[1].run must be a single value, not a mapping".into()
            ),
            (12, 51, "job \"y\" in a needs itself".into()),
        ],
        "{text}"
    );
}

#[test]
fn a_required_key_left_out_is_named_once_and_the_rest_is_still_checked() {
    let err = load(
        "\
forge: { url: 'https://f' }
alerts: [{ webhook: {} }]
worker: { max_parallel: 0 }
",
    )
    .unwrap_err();
    assert_eq!(
        listed(&err),
        [
            (
                1,
                1,
                "`repos` is missing at the top level (it is required)".into()
            ),
            (1, 8, "`kind` is missing in forge (it is required)".into()),
            (
                2,
                21,
                "`url_env` is missing in alerts[0].webhook (it is required)".into()
            ),
            (
                3,
                25,
                "worker.max_parallel must be greater than zero, got 0".into()
            ),
        ],
        "{err}"
    );
    let err = load("repos:\n  a:\n    ci:\n      jobs:\n        - run: x\n          needs: [nope]\n        - name: ok\n").unwrap_err();
    assert_eq!(
        listed(&err),
        [
            (
                5,
                11,
                "`name` is missing in repos.a.ci.jobs[0] (it is required)".into()
            ),
            (
                7,
                11,
                "`run` is missing in repos.a.ci.jobs[1] (it is required)".into()
            ),
        ],
        "a `needs` of a job left unnamed is not guessed at: {err}"
    );
    let err = load("").unwrap_err();
    assert_eq!(err.0.len(), 1, "{err}");
    assert!(err.to_string().contains("the file is empty"), "{err}");
}

#[test]
fn an_unknown_forge_kind_is_named_with_the_rest() {
    let err = load("forge: { kind: gitlab }\nrepos: { a: { deps: [zz] } }\n").unwrap_err();
    assert_eq!(
        listed(&err),
        [
            (
                1,
                16,
                "forge.kind: unknown forge \"gitlab\"; one of: local, forgejo".into()
            ),
            (
                2,
                22,
                "repository \"a\" depends on unknown repository \"zz\"".into()
            ),
        ],
        "{err}"
    );
}

#[test]
fn problems_are_listed_in_position_order_whatever_found_them() {
    // An unknown key, a wrong type and a validation problem, written in the reverse of the
    // order in which they are found.
    let err = load("repos:\n  a: { deps: [zz] }\n  b: { deps: 5 }\nextra: 1\n").unwrap_err();
    let at: Vec<(u64, u64)> = listed(&err).iter().map(|(l, c, _)| (*l, *c)).collect();
    assert_eq!(at, [(2, 15), (3, 14), (4, 1)], "{err}");
}

#[test]
fn a_sinks_wrong_typed_kind_is_not_also_called_left_out() {
    let err = load(
        "alerts:\n  - webhook: HOOK\n    timeout: 0s\n  - command: notify\n  - webhook: ~\n  - { webhook: { url_env: A }, command: [x] }\nrepos: {a: {}}\n",
    )
    .unwrap_err();
    assert_eq!(
        listed(&err),
        [
            (
                2,
                14,
                "alerts[0].webhook must be a mapping, not the text \"HOOK\"".into()
            ),
            (
                3,
                14,
                "alerts: timeout: duration \"0s\" is zero; it must be greater than zero".into()
            ),
            (
                4,
                14,
                "alerts[1].command must be a list of names, not the text \"notify\"".into()
            ),
            (
                5,
                5,
                "alerts: each entry needs exactly one of webhook or command".into()
            ),
            (
                6,
                5,
                "alerts: each entry needs exactly one of webhook or command".into()
            ),
        ],
        "{err}"
    );
}

#[test]
fn history_keep_defaults_to_30_days_and_a_wrong_value_is_named_where_it_is() {
    let c = load("repos:\n  a: {}\n").unwrap();
    assert_eq!(c.history.keep, std::time::Duration::from_secs(30 * 86_400));
    let c = load("history:\n  keep: 7d\nrepos:\n  a: {}\n").unwrap();
    assert_eq!(c.history.keep, std::time::Duration::from_secs(7 * 86_400));
    let err = load("history:\n  keep: soon\n  forever: true\nrepos:\n  a: {}\n").unwrap_err();
    let got = listed(&err);
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!((got[0].0, got[0].1), (2, 9), "{got:?}");
    assert!(got[0].2.starts_with("history.keep: "), "{got:?}");
    assert_eq!(got[1].0, 3, "{got:?}");
    assert!(got[1].2.contains("forever"), "{got:?}");
    let err = load("history:\n  keep: 0s\nrepos:\n  a: {}\n").unwrap_err();
    assert!(err.to_string().contains("history.keep"), "{err}");
    let err = load("history: 30d\nrepos:\n  a: {}\n").unwrap_err();
    assert!(err.to_string().contains("history"), "{err}");
}

#[test]
fn a_token_file_is_resolved_beside_repos_yaml_and_one_token_source_is_required() {
    let c = load(
        "forge: {kind: forgejo, url: 'https://f', owner: o, token_file: secrets/forge-token}\nrepos: {a: {}}\n",
    )
    .unwrap();
    assert_eq!(
        c.forge.token_file.as_deref(),
        Some(Path::new("/tmp/secrets/forge-token"))
    );
    assert_eq!(c.forge.token_env, None);
    let both = load(
        "forge: {kind: forgejo, url: 'https://f', owner: o, token_env: T, token_file: t}\nrepos: {a: {}}\n",
    )
    .unwrap_err()
    .to_string();
    assert!(
        both.contains("/tmp/repos.yaml:1:") && both.contains("are both set"),
        "{both}"
    );
    let neither = load("forge: {kind: forgejo, url: 'https://f', owner: o}\nrepos: {a: {}}\n")
        .unwrap_err()
        .to_string();
    assert!(
        neither.contains("neither forge.token_file nor forge.token_env"),
        "{neither}"
    );
}

#[test]
fn protected_paths_default_to_the_workflow_dirs_and_the_scripts_the_jobs_run() {
    let c = load(
        "repos:\n  a:\n    ci:\n      jobs:\n        - { name: test, run: sh ci/test.sh }\n        - { name: radicle-push, run: 'true', needs: [test] }\n  b: {}\n",
    )
    .unwrap();
    let of = |r: &str| -> Vec<String> {
        c.repo(r)
            .unwrap()
            .protected_paths
            .iter()
            .map(|p| p.to_string())
            .collect()
    };
    assert_eq!(of("a"), [".forgejo/", ".gitea/", ".github/", "ci/test.sh"]);
    assert_eq!(of("b"), [".forgejo/", ".gitea/", ".github/"]);
    assert!(c.ci.protected_paths.is_none());
}

#[test]
fn protected_paths_of_a_repository_replace_the_organisations_which_replace_the_defaults() {
    let c = load(
        "ci:\n  protected_paths: [ci/, Makefile]\nrepos:\n  a:\n    ci:\n      protected_paths: ['build/*.sh']\n      jobs: [{ name: radicle-push, run: sh ci/x.sh }]\n  b:\n    ci: { jobs: [{ name: radicle-push, run: sh ci/x.sh }] }\n  c:\n    ci: { protected_paths: [] }\n",
    )
    .unwrap();
    let of = |r: &str| -> Vec<String> {
        c.repo(r)
            .unwrap()
            .protected_paths
            .iter()
            .map(|p| p.to_string())
            .collect()
    };
    assert_eq!(of("a"), ["build/*.sh"]);
    assert_eq!(of("b"), ["ci/", "Makefile"]);
    assert!(of("c").is_empty(), "`[]` turns the check off");
}

#[test]
fn bad_protected_paths_are_named_where_they_are() {
    let err = load(
        "ci:\n  protected_paths: [/etc/x, ok/]\nrepos:\n  a:\n    ci:\n      protected_paths:\n        - ci/**\n        - '../up'\n  b:\n    ci: { protected_paths: 5 }\n",
    )
    .unwrap_err();
    let got = listed(&err);
    let text = err.to_string();
    assert_eq!(got.len(), 4, "{text}");
    assert_eq!((got[0].0, got[0].1), (2, 21), "{text}");
    assert!(
        got[0]
            .2
            .contains("ci.protected_paths: \"/etc/x\" is not a path pattern: paths are relative"),
        "{text}"
    );
    assert_eq!((got[1].0, got[1].1), (7, 11), "{text}");
    assert!(
        got[1].2.contains("repos.a.ci.protected_paths: \"ci/**\""),
        "{text}"
    );
    assert_eq!(got[2].0, 8, "{text}");
    assert!(got[2].2.contains("`..`"), "{text}");
    assert_eq!(got[3].0, 10, "{text}");
    assert!(got[3].2.contains("protected_paths"), "{text}");
    assert!(text.contains("/tmp/repos.yaml:2:21:"), "{text}");
}

#[test]
fn models_per_role_are_read_and_bad_ones_refused_with_positions() {
    let c = load(
        "worker:\n  agent: claude\n  model: sonnet\n  model_overrides: {critical_path: opus, cross_repo: opus-x}\nrepos:\n  a: {model: haiku}\n  b: {}\n",
    )
    .unwrap();
    assert_eq!(c.worker.model.as_deref(), Some("sonnet"));
    assert_eq!(
        c.worker.model_overrides.critical_path.as_deref(),
        Some("opus")
    );
    assert_eq!(c.worker.model_overrides.complexity_high, None);
    let plain = model::TaskTraits::default();
    assert_eq!(c.model_for("a", &plain).unwrap().model, "haiku");
    assert_eq!(c.model_for("b", &plain).unwrap().model, "sonnet");
    let err = load(
        "worker:\n  model: '-x'\n  model_overrides: {critical: opus, security_sensitive: 'a b'}\nrepos:\n  a: {model: ''}\n",
    )
    .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("/tmp/repos.yaml:2:10: worker.model: \"-x\" is not a model name"),
        "{text}"
    );
    assert!(
        text.contains("unknown key `critical` in worker.model_overrides"),
        "{text}"
    );
    assert!(
        text.contains("worker.model_overrides.security_sensitive: \"a b\""),
        "{text}"
    );
    assert!(text.contains("repos.a.model"), "{text}");
    assert_eq!(err.0.len(), 4, "{text}");
    // `{model_name}` needs a model for every worker.
    let err = load("worker:\n  command: [x, '--m={model_name}']\nrepos: {a: {}}\n").unwrap_err();
    assert!(err.to_string().contains("worker.model is not set"), "{err}");
    load("worker:\n  command: [x, '{model}']\nrepos: {a: {}}\n").unwrap();
}

#[test]
fn the_sandbox_is_a_switch_and_its_hidden_paths_are_resolved() {
    let c = load(
        "worker:\n  sandbox: true\n  hide: [~/.config/tool, secrets, /etc/orch-key]\nrepos:\n  a: {}\n",
    )
    .unwrap();
    assert!(c.worker.sandbox && c.worker.separate() && !c.worker.accounts());
    assert_eq!(
        c.worker.hide,
        vec![
            PathBuf::from("~/.config/tool"),
            PathBuf::from("/tmp/secrets"),
            PathBuf::from("/etc/orch-key")
        ]
    );
    let err = load("worker:\n  sandbox: yes please\n  hide: ['~', /]\nrepos:\n  a: {}\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("true or false"), "{err}");
    assert!(err.contains("worker.hide: \"~\""), "{err}");
    assert!(err.contains("worker.hide: \"/\""), "{err}");
}

#[test]
fn serve_token_env_is_a_variable_name_never_echoed() {
    let c = load("serve: {token_env: ORCH_BOARD_TOKEN}\nrepos: {a: {}}\n").unwrap();
    assert_eq!(c.serve.token_env.as_deref(), Some("ORCH_BOARD_TOKEN"));
    let t = "0123456789abcdef0123456789abcdef01234567";
    let text = load(&format!(
        "serve: {{token_env: '{t}'}}\nrepos: {{a: {{}}}}\n"
    ))
    .unwrap_err()
    .to_string();
    assert!(text.contains("serve.token_env must be the NAME"), "{text}");
    assert!(!text.contains(&t[4..20]), "the token is echoed: {text}");
    let text = load("serve: {token_env: X, listen: y}\nrepos: {a: {}}\n")
        .unwrap_err()
        .to_string();
    assert!(text.contains("unknown key `listen` in serve"), "{text}");
    assert_eq!(
        load("repos: {a: {}}\n").unwrap().serve,
        crate::config::ServeConfig::default()
    );
}

#[test]
fn the_organisations_limit_is_optional_and_must_be_positive() {
    let c = load("repos:\n  a: {}\n").unwrap();
    assert_eq!(c.worker.max_parallel_total, None);
    let c = load("worker: { max_parallel: 2, max_parallel_total: 5 }\nrepos:\n  a: {}\n").unwrap();
    assert_eq!(
        (c.worker.max_parallel, c.worker.max_parallel_total),
        (2, Some(5))
    );
    let err = load("worker: { max_parallel_total: 0 }\nrepos:\n  a: {}\n").unwrap_err();
    assert_eq!(
        listed(&err),
        [(
            1,
            31,
            "worker.max_parallel_total must be greater than zero, got 0".into()
        )],
        "{err}"
    );
}

/// A worker runs in its worktree: what `worker.command` names beside repos.yaml is taken from
/// there (issue 37: README's `[sh, worker.sh]` recipe failed with "cannot open worker.sh").
#[test]
fn a_worker_command_naming_files_beside_repos_yaml_is_taken_from_there() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("worker.sh"), "echo hi\n").unwrap();
    let file = dir.path().join("repos.yaml");
    let c = Config::from_str(
        "worker: {agent: command, command: [sh, worker.sh, -x, '{model}', notafile]}\nrepos: {a: {}}\n",
        &file,
    )
    .unwrap();
    let script = dir.path().join("worker.sh").display().to_string();
    assert_eq!(
        c.worker.command,
        vec!["sh", script.as_str(), "-x", "{model}", "notafile"]
    );
    let c = Config::from_str(
        "worker: {agent: command, command: [./bin/agent, run]}\nrepos: {a: {}}\n",
        &file,
    )
    .unwrap();
    assert_eq!(
        c.worker.command[0],
        dir.path().join("./bin/agent").display().to_string()
    );
}
