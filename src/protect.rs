//! Protected paths (`ci.protected_paths`): the files a worker's change may not touch without
//! an operator's approval, because CI runs them — a worker that could edit them would grade
//! itself. Pure: patterns parsed and matched, the scripts a job's command names found.
//!
//! A pattern is a path relative to the repository's root, `/`-separated: `dir/` is everything
//! under `dir`; otherwise the pattern names one path, where `*` matches any characters of one
//! component but `/` and `?` one such character (`ci/*.sh`).

use serde::Serialize;

/// Where every forge keeps the workflows it runs from the repository itself.
pub const WORKFLOW_DIRS: [&str; 3] = [".forgejo/", ".gitea/", ".github/"];

/// One parsed `ci.protected_paths` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(into = "String")]
pub struct Pattern {
    text: String,
}

impl From<Pattern> for String {
    fn from(p: Pattern) -> String {
        p.text
    }
}

impl std::fmt::Display for Pattern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl Pattern {
    /// Parses one entry; why it is not a pattern otherwise.
    pub fn parse(text: &str) -> Result<Pattern, String> {
        if text.is_empty() {
            return Err("an empty path protects nothing".into());
        }
        if text.chars().any(|c| c.is_control()) {
            return Err("a path cannot hold control characters".into());
        }
        if text.starts_with('/') {
            return Err(
                "paths are relative to the repository's root: leave out the leading `/`".into(),
            );
        }
        if text.contains('\\') {
            return Err("use `/` between components, not `\\`".into());
        }
        if text.contains('[') || text.contains(']') || text.contains('{') || text.contains('}') {
            return Err(
                "character classes and alternatives (`[…]`, `{…}`) are not supported: only `*` and `?` within one component, and `dir/` for a whole directory".into(),
            );
        }
        let body = text.strip_suffix('/').unwrap_or(text);
        for part in body.split('/') {
            match part {
                "" => return Err("a path cannot have an empty component (`//`)".into()),
                "." | ".." => {
                    return Err(format!(
                        "a path cannot have a `{part}` component: write it from the repository's root"
                    ));
                }
                "**" => {
                    return Err(
                        "`**` is not supported: write `dir/` for everything under a directory"
                            .into(),
                    );
                }
                _ => {}
            }
        }
        Ok(Pattern {
            text: text.to_string(),
        })
    }

    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether `path` (a repository path, `/`-separated, no leading `/`) is protected by
    /// this pattern.
    pub fn matches(&self, path: &str) -> bool {
        match self.text.strip_suffix('/') {
            Some(dir) => {
                let parts: Vec<&str> = dir.split('/').collect();
                let mut of_path = path.split('/');
                // Everything strictly under a directory matching the pattern.
                let head: Vec<&str> = of_path.by_ref().take(parts.len()).collect();
                head.len() == parts.len()
                    && of_path.next().is_some()
                    && parts.iter().zip(&head).all(|(p, c)| glob(p, c))
            }
            None => {
                let parts: Vec<&str> = self.text.split('/').collect();
                let of_path: Vec<&str> = path.split('/').collect();
                parts.len() == of_path.len() && parts.iter().zip(&of_path).all(|(p, c)| glob(p, c))
            }
        }
    }
}

/// `*` and `?` within one component.
fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// The files of `changed` that `patterns` protect, sorted, each once.
pub fn touched<'a>(
    patterns: &[Pattern],
    changed: impl IntoIterator<Item = &'a str>,
) -> Vec<String> {
    let mut out: Vec<String> = changed
        .into_iter()
        .filter(|f| patterns.iter().any(|p| p.matches(f)))
        .map(str::to_string)
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The repository files a job's shell command names: the scripts it runs (`sh ci/test.sh`,
/// `./ci/check`, `bash scripts/lint.sh --fix`). A word counts when it reads as a relative
/// path — it has a `/` or ends in `.sh` — and is not an option, a variable, a URL or an
/// absolute path. What a script itself calls is not followed (protect it by name).
pub fn scripts_of(command: &str) -> Vec<String> {
    let mut out = Vec::new();
    let separators =
        |c: char| c.is_whitespace() || matches!(c, ';' | '&' | '|' | '(' | ')' | '<' | '>' | '`');
    for word in command.split(separators) {
        let word = word.trim_matches(|c| c == '"' || c == '\'');
        let word = word.trim_start_matches("./");
        if word.is_empty()
            || word.starts_with(['-', '$', '/', '~', '.'])
            || word.contains("://")
            || word.contains('=')
            || word.contains(['*', '?', '[', '{', '"', '\''])
        {
            continue;
        }
        if !(word.contains('/') || word.ends_with(".sh")) || word.ends_with('/') {
            continue;
        }
        if Pattern::parse(word).is_ok() && !out.iter().any(|w| w == word) {
            out.push(word.to_string());
        }
    }
    out
}

/// The protection when `ci.protected_paths` is not written: the workflow directories, and the
/// scripts the repository's local-forge jobs run.
pub fn defaults<'a>(job_commands: impl IntoIterator<Item = &'a str>) -> Vec<Pattern> {
    let mut out: Vec<Pattern> = WORKFLOW_DIRS
        .iter()
        .map(|d| Pattern {
            text: d.to_string(),
        })
        .collect();
    for run in job_commands {
        for s in scripts_of(run) {
            if !out.iter().any(|p| p.text == s) {
                out.push(Pattern { text: s });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Pattern {
        Pattern::parse(s).unwrap()
    }

    #[test]
    fn a_directory_pattern_protects_everything_under_it_and_nothing_beside_it() {
        let d = p(".forgejo/");
        assert!(d.matches(".forgejo/workflows/ci.yml"));
        assert!(d.matches(".forgejo/x"));
        assert!(!d.matches(".forgejo"), "the directory itself is no file");
        assert!(!d.matches(".forgejo-old/x"));
        assert!(!d.matches("sub/.forgejo/x"), "paths are from the root");
        let nested = p("ci/scripts/");
        assert!(nested.matches("ci/scripts/a/b.sh"));
        assert!(!nested.matches("ci/other.sh"));
    }

    #[test]
    fn a_file_pattern_protects_that_path_and_globs_stay_in_one_component() {
        assert!(p("ci/test.sh").matches("ci/test.sh"));
        assert!(!p("ci/test.sh").matches("ci/test.sh.bak"));
        assert!(!p("ci/test.sh").matches("x/ci/test.sh"));
        let g = p("ci/*.sh");
        assert!(g.matches("ci/test.sh") && g.matches("ci/.sh"));
        assert!(!g.matches("ci/sub/test.sh"), "`*` never crosses `/`");
        assert!(p("Makefil?").matches("Makefile"));
        assert!(p("*/build.sh").matches("a/build.sh"));
        assert!(p("c*/").matches("ci/x") && !p("c*/").matches("d/x"));
    }

    #[test]
    fn bad_patterns_are_refused_with_why() {
        for (bad, why) in [
            ("", "empty"),
            ("/ci/test.sh", "leading `/`"),
            ("ci//x", "empty component"),
            ("../x", "`..`"),
            ("./x", "`.`"),
            ("ci/**", "`**`"),
            ("ci/[ab].sh", "character classes"),
            ("ci\\x", "`/`"),
            ("a\nb", "control"),
        ] {
            let e = Pattern::parse(bad).unwrap_err();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
    }

    #[test]
    fn the_scripts_a_job_runs_are_found_in_its_command() {
        assert_eq!(scripts_of("sh ci/test.sh"), ["ci/test.sh"]);
        assert_eq!(scripts_of("./ci/check"), ["ci/check"]);
        assert_eq!(
            scripts_of("bash test.sh --fast && sh 'ci/lint.sh'"),
            ["test.sh", "ci/lint.sh"]
        );
        assert_eq!(
            scripts_of("cd sub;sh ./run/all.sh|tee /tmp/log"),
            ["run/all.sh"]
        );
        assert!(scripts_of("true").is_empty());
        assert!(scripts_of("cargo test --locked").is_empty());
        assert!(scripts_of("/usr/bin/env x $HOME/y https://h/x.sh --opt=a/b").is_empty());
        assert_eq!(scripts_of("sh ci/t.sh; sh ci/t.sh"), ["ci/t.sh"]);
    }

    #[test]
    fn defaults_are_the_workflow_directories_and_the_jobs_scripts() {
        let d = defaults(["sh ci/check.sh", "sh ci/test.sh", "true", "sh ci/test.sh"]);
        let texts: Vec<&str> = d.iter().map(Pattern::as_str).collect();
        assert_eq!(
            texts,
            [
                ".forgejo/",
                ".gitea/",
                ".github/",
                "ci/check.sh",
                "ci/test.sh"
            ]
        );
        let changed = [
            "src/lib.rs",
            "ci/test.sh",
            ".github/workflows/x.yml",
            "ci/test.sh",
        ];
        assert_eq!(
            touched(&d, changed),
            [".github/workflows/x.yml", "ci/test.sh"]
        );
        assert!(touched(&d, ["README.md"]).is_empty());
    }
}
