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

#[test]
fn token_variable_must_not_be_passed_to_workers() {
    let err = load(
        "forge: {kind: forgejo, url: 'https://f', owner: o, token_env: FORGEJO_TOKEN}\nworker: {env_passthrough: [PATH, FORGEJO_TOKEN]}\nrepos: {a: {}}\n",
    )
    .unwrap_err();
    assert!(err.to_string().contains("never receive the forge token"));
}
