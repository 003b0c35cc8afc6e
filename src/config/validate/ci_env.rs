//! `env:` of a repository's CI (`repos.<name>.ci.env`) and of one job (`ci.jobs[].env`): plain
//! variables for the jobs' environment. Written in repos.yaml in the clear, so a name that
//! says it holds a secret is refused (a credential belongs in the environment orch runs in,
//! never in its configuration), as are orch's own `ORCH_*` names, which the runner sets.

use super::Check;
use crate::config::raw::{RawEnv, pos};

/// Words that name a secret: a variable holding one is refused.
const SECRET_WORDS: &[&str] = &[
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "CREDENTIAL",
    "CREDENTIALS",
    "PRIVATE",
    "APIKEY",
    "AUTH",
];

/// Why `name` may not be given in `env:`, if it may not.
pub(super) fn refusal(name: &str) -> Option<String> {
    if !super::env_var_name(name) {
        return Some(
            "is not a variable name (letters, digits and _, not starting with a digit)".into(),
        );
    }
    let upper = name.to_ascii_uppercase();
    if upper.starts_with("ORCH_") {
        return Some("is orch's: the runner sets the ORCH_* variables itself".into());
    }
    let words: Vec<&str> = upper.split('_').collect();
    let secret = words.iter().any(|w| SECRET_WORDS.contains(w))
        || words
            .windows(2)
            .any(|w| w == ["API", "KEY"] || w == ["ACCESS", "KEY"]);
    if secret {
        return Some(
            "names a secret: repos.yaml is no place for one (give it to the jobs through the environment orch runs in)"
                .into(),
        );
    }
    None
}

/// The variables of one `env:` (`place`: where it was written, for messages), checked.
pub(super) fn validate(c: &mut Check, place: &str, raw: RawEnv) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for (name, value) in raw.0 {
        if let Some(why) = refusal(&name.value) {
            c.err(
                pos(&name),
                format!("{place}: {} {why}", name.value.escape_debug()),
            );
            continue;
        }
        if out.iter().any(|(n, _)| *n == name.value) {
            c.err(pos(&name), format!("{place}: {} given twice", name.value));
            continue;
        }
        out.push((name.value, value.value.text()));
    }
    out
}

/// `over` laid over `base`: a job's own variables win over its repository's.
pub(super) fn overlay(
    base: &[(String, String)],
    over: &[(String, String)],
) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = base
        .iter()
        .filter(|(n, _)| !over.iter().any(|(o, _)| o == n))
        .cloned()
        .collect();
    out.extend(over.iter().cloned());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_and_orch_names_are_refused() {
        for ok in [
            "RUST_BACKTRACE",
            "CARGO_TERM_COLOR",
            "PIP_NO_INDEX",
            "NODE_ENV",
            "KEYBOARD",
        ] {
            assert_eq!(refusal(ok), None, "{ok}");
        }
        for bad in [
            "GITHUB_TOKEN",
            "DB_PASSWORD",
            "aws_secret_access_key",
            "NPM_AUTH",
            "OPENAI_API_KEY",
            "ORCH_UPSTREAMS",
            "1X",
            "A-B",
        ] {
            assert!(refusal(bad).is_some(), "{bad}");
        }
    }

    #[test]
    fn a_jobs_variables_win_over_its_repositorys() {
        let s = |a: &str, b: &str| (a.to_string(), b.to_string());
        assert_eq!(
            overlay(&[s("A", "1"), s("B", "2")], &[s("B", "3"), s("C", "4")]),
            [s("A", "1"), s("B", "3"), s("C", "4")]
        );
    }
}
