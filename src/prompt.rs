//! Worker prompts: the compact spawn prompt and the CI guide loaded at PUSHED_TO_CI, rendered
//! from `contracts/prompts/*.md` (embedded defaults when the project has none).
//!
//! Placeholders are `{{name}}`. An unknown placeholder is an error naming it, so a typo in a
//! template never reaches a worker as literal braces.

use std::collections::BTreeMap;
use std::path::Path;

pub const WORKER_TEMPLATE: &str = include_str!("../contracts/prompts/worker.md");
pub const CI_TEMPLATE: &str = include_str!("../contracts/prompts/ci-worker.md");

/// Loads `<root>/contracts/prompts/<name>`, or the embedded default.
pub fn template(root: &Path, name: &str, default: &str) -> Result<String, String> {
    let path = root.join("contracts/prompts").join(name);
    match std::fs::read_to_string(&path) {
        Ok(t) => Ok(t),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(default.to_string()),
        Err(e) => Err(format!(
            "cannot read prompt template {}: {e}",
            path.display()
        )),
    }
}

/// The placeholders the spawn code fills in.
pub const PLACEHOLDERS: &[&str] = &[
    "task",
    "repo",
    "branch",
    "base_branch",
    "base_short",
    "component",
    "plan",
    "sync_job",
    "max_fix_attempts",
    "resume",
    "upstream",
    "limits",
];

/// Problems with the project's templates (unreadable, unknown placeholder), for `orch check`.
pub fn check_templates(root: &Path) -> Vec<String> {
    let vars: BTreeMap<&str, String> = PLACEHOLDERS.iter().map(|k| (*k, String::new())).collect();
    let mut problems = Vec::new();
    for (name, default) in [
        ("worker.md", WORKER_TEMPLATE),
        ("ci-worker.md", CI_TEMPLATE),
    ] {
        let path = root.join("contracts/prompts").join(name);
        match template(root, name, default).and_then(|t| render(&t, &vars)) {
            Ok(_) => {}
            Err(e) => problems.push(format!("{}: {e}", path.display())),
        }
    }
    problems
}

/// Replaces every `{{key}}` with its value.
pub fn render(template: &str, vars: &BTreeMap<&str, String>) -> Result<String, String> {
    let mut out = String::with_capacity(template.len() + 256);
    let mut rest = template;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            return Err("unclosed {{ in prompt template".into());
        };
        let key = after[..end].trim();
        match vars.get(key) {
            Some(v) => out.push_str(v),
            None => {
                let known: Vec<&str> = vars.keys().copied().collect();
                return Err(format!(
                    "unknown placeholder {{{{{key}}}}} in prompt template (known: {})",
                    known.join(", ")
                ));
            }
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> BTreeMap<&'static str, String> {
        [
            ("task", "Implement AX token types"),
            ("repo", "alphavm"),
            ("branch", "orch/alphavm-1"),
            ("base_branch", "main"),
            ("base_short", "abc1234"),
            ("component", "A001"),
            ("plan", "-"),
            ("sync_job", "radicle-push"),
            ("max_fix_attempts", "5"),
            ("resume", ""),
            ("upstream", ""),
            (
                "limits",
                "WORKING 20m, PUSHED_TO_CI 15m, FIXING_CI 15m, 5 fix attempts, 30m in all",
            ),
        ]
        .into_iter()
        .map(|(k, v)| (k, v.to_string()))
        .collect()
    }

    #[test]
    fn spawn_prompt_is_compact_and_has_no_ci_details() {
        let p = render(WORKER_TEMPLATE, &vars()).unwrap();
        assert!(p.contains("TASK: Implement AX token types"));
        assert!(p.contains("ON PUSHED_TO_CI: read $ORCH_CI_GUIDE"));
        assert!(p.contains("Context: $ORCH_HANDOFF"));
        assert!(p.contains("LIMITS: WORKING 20m"));
        assert!(p.contains("BLOCKED_PERMISSION"));
        // The template itself (the task text is the operator's) carries no CI URLs, commands
        // or credentials: those are lazy-loaded from the CI guide at PUSHED_TO_CI.
        for forbidden in [
            "http://",
            "https://",
            "curl",
            "token",
            "/api/v1",
            "orch ci status",
        ] {
            assert!(
                !WORKER_TEMPLATE.to_lowercase().contains(forbidden),
                "spawn prompt must not contain {forbidden:?}"
            );
        }
        // Compact: the seed's budget is ~100 tokens for the template; stay well under 300 words.
        assert!(
            p.split_whitespace().count() < 300,
            "{} words",
            p.split_whitespace().count()
        );
    }

    #[test]
    fn ci_guide_points_at_orch_ci_status() {
        let p = render(CI_TEMPLATE, &vars()).unwrap();
        assert!(p.contains("orch ci status --repo alphavm"));
        assert!(p.contains("radicle-push skipped"));
    }

    #[test]
    fn unknown_placeholder_is_an_error() {
        let e = render("hi {{nmae}}", &vars()).unwrap_err();
        assert!(e.contains("{{nmae}}"), "{e}");
    }
}
