//! `worker.agent`: which coding agent a worker runs, its default argv and environment, and the
//! placeholders `worker.command` may use (pure: expanding them is the supervisor's, with the
//! values of one worker).

use serde::Serialize;

/// The agent a worker command is: decides the default argv, how its output is read (see
/// `app::supervisor::agent`) and how a respawn continues its conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Agent {
    /// Any command: its output lines are read for milestone lines; no cost, no session.
    #[default]
    Command,
    /// Claude Code in `-p --output-format stream-json --verbose` mode.
    Claude,
    /// Codex CLI in `exec --json` mode.
    Codex,
    /// aider with `--message-file /dev/stdin`.
    Aider,
}

impl Agent {
    pub const ALL: [Agent; 4] = [Agent::Command, Agent::Claude, Agent::Codex, Agent::Aider];

    pub fn as_str(self) -> &'static str {
        match self {
            Agent::Command => "command",
            Agent::Claude => "claude",
            Agent::Codex => "codex",
            Agent::Aider => "aider",
        }
    }

    pub fn parse(s: &str) -> Option<Agent> {
        Agent::ALL.into_iter().find(|a| a.as_str() == s)
    }

    /// The argv used when `worker.command` is not given. Claude's permissions come on the
    /// command line: a fresh worktree is an untrusted workspace, whose `.claude/settings.json`
    /// Claude Code ignores in `-p` mode. Codex (0.169.0): its workspace-write sandbox keeps a
    /// worktree's git dir read-only (`git add` fails on `index.lock`) unless it is an
    /// `--add-dir` root itself, and its default login shell (`bash -lc`) resets PATH from
    /// /etc/profile, losing the orch directory orch puts first.
    pub fn default_command(self) -> Vec<String> {
        let v: &[&str] = match self {
            Agent::Command => &["claude", "-p"],
            Agent::Claude => &[
                "claude",
                "-p",
                "--output-format",
                "stream-json",
                "--verbose",
                "--permission-mode",
                "acceptEdits",
                "--allowedTools",
                CLAUDE_ALLOWED_TOOLS,
                "{model}",
                "{resume}",
            ],
            Agent::Codex => &[
                "codex",
                "exec",
                "--json",
                "--skip-git-repo-check",
                "--sandbox",
                "workspace-write",
                "-c",
                "allow_login_shell=false",
                "--add-dir",
                "{worktree_git_dir}",
                "--add-dir",
                "{git_dir}",
                "--add-dir",
                "{remote}",
                "{model}",
                "{resume}",
            ],
            Agent::Aider => &[
                "aider",
                "--message-file",
                "/dev/stdin",
                "--yes-always",
                "--no-pretty",
                "--no-check-update",
                "--no-analytics",
                "{model}",
            ],
        };
        v.iter().map(|s| s.to_string()).collect()
    }

    /// The variables passed through when `worker.env_passthrough` is not given.
    pub fn default_env_passthrough(self) -> Vec<String> {
        let v: &[&str] = match self {
            Agent::Command => &["HOME", "PATH"],
            Agent::Claude => &[
                "HOME",
                "PATH",
                "ANTHROPIC_API_KEY",
                "ANTHROPIC_AUTH_TOKEN",
                "ANTHROPIC_BASE_URL",
                "ANTHROPIC_MODEL",
                "CLAUDE_CONFIG_DIR",
                "CLAUDE_CODE_MAX_RETRIES",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
                "API_TIMEOUT_MS",
                "IS_SANDBOX",
            ],
            Agent::Codex => &[
                "HOME",
                "PATH",
                "CODEX_HOME",
                "OPENAI_API_KEY",
                "OPENAI_BASE_URL",
            ],
            Agent::Aider => &[
                "HOME",
                "PATH",
                "OPENAI_API_KEY",
                "OPENAI_API_BASE",
                "ANTHROPIC_API_KEY",
            ],
        };
        v.iter().map(|s| s.to_string()).collect()
    }

    /// The option that names the model on this agent's command line (`{model}`).
    pub fn model_option(self) -> &'static str {
        match self {
            Agent::Codex => "-m",
            Agent::Command | Agent::Claude | Agent::Aider => "--model",
        }
    }

    /// Whether a respawn can continue the previous worker's conversation.
    pub fn resumes(self) -> bool {
        matches!(self, Agent::Claude | Agent::Codex)
    }
}

impl std::fmt::Display for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the default Claude worker may do without asking: edit files in its worktree
/// (`acceptEdits`), read, search, run git and orch. Anything else is denied in `-p` mode.
pub const CLAUDE_ALLOWED_TOOLS: &str = "Bash(git:*) Bash(orch:*) Read Edit Write Glob Grep";

/// The placeholders `worker.command` may use, with what they become.
pub const PLACEHOLDERS: [(&str, &str); 9] = [
    (
        "session_id",
        "the worker's conversation id (a UUID orch assigns; kept across respawns)",
    ),
    (
        "resume",
        "a whole argument: claude `--session-id <id>` on a first start, `--resume <id>` on a respawn that continues the conversation; codex `resume <id>` on such a respawn; nothing otherwise",
    ),
    (
        "worktree",
        "the worker's git worktree (its working directory)",
    ),
    (
        "git_dir",
        "the git directory shared by the worktree's repository (`git rev-parse --git-common-dir`)",
    ),
    (
        "worktree_git_dir",
        "the worktree's own git dir (`git rev-parse --git-dir`: index, HEAD), which Codex's workspace-write sandbox keeps read-only unless given with --add-dir",
    ),
    ("remote", "the push remote of the worker's branch"),
    ("worker_id", "the worker's id"),
    (
        "model",
        "a whole argument: the agent's model option and the worker's model (claude, aider and command `--model <name>`, codex `-m <name>`); nothing when no model was chosen",
    ),
    (
        "model_name",
        "the worker's model alone (needs worker.model, so that every worker has one)",
    ),
];

/// `{name}` placeholders in `arg` (names of lowercase letters and `_`; other braces, such as
/// JSON in `--settings '{"permissions": …}'`, are left alone).
pub fn placeholders_in(arg: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = arg;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let name_len = after
            .find(|c: char| !(c.is_ascii_lowercase() || c == '_'))
            .unwrap_or(after.len());
        if name_len > 0 && after[name_len..].starts_with('}') {
            out.push(&after[..name_len]);
            rest = &after[name_len + 1..];
        } else {
            rest = after;
        }
    }
    out
}

/// The problems of an argv template: unknown placeholders, `{resume}` not a whole argument.
pub fn command_problems(argv: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for arg in argv {
        for name in placeholders_in(arg) {
            if !PLACEHOLDERS.iter().any(|(n, _)| *n == name) {
                out.push(format!(
                    "worker.command: unknown placeholder {{{name}}} in {arg:?}; known: {}",
                    PLACEHOLDERS
                        .iter()
                        .map(|(n, _)| format!("{{{n}}}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ));
            } else if (name == "resume" || name == "model") && arg != &format!("{{{name}}}") {
                out.push(format!(
                    "worker.command: {{{name}}} must be a whole argument (it becomes zero or more arguments), not part of {arg:?}"
                ));
            }
        }
    }
    out
}

/// One worker's values for the placeholders.
#[derive(Debug, Clone)]
pub struct ArgvValues<'a> {
    pub session_id: &'a str,
    /// Continue the conversation `session_id` names (it was started before).
    pub resume: bool,
    pub worktree: &'a str,
    pub git_dir: &'a str,
    pub worktree_git_dir: &'a str,
    pub remote: &'a str,
    pub worker_id: &'a str,
    /// The model the worker runs with (None: the agent's own default).
    pub model: Option<&'a str>,
}

/// `argv` with its placeholders replaced by `v`'s values.
pub fn expand(agent: Agent, argv: &[String], v: &ArgvValues) -> Vec<String> {
    let mut out = Vec::with_capacity(argv.len() + 2);
    for arg in argv {
        if arg == "{resume}" {
            match (agent, v.resume) {
                (Agent::Claude, true) => out.extend(["--resume".into(), v.session_id.into()]),
                (Agent::Claude, false) => out.extend(["--session-id".into(), v.session_id.into()]),
                (Agent::Codex, true) => out.extend(["resume".into(), v.session_id.into()]),
                _ => {}
            }
            continue;
        }
        if arg == "{model}" {
            if let Some(m) = v.model {
                out.extend([agent.model_option().into(), m.into()]);
            }
            continue;
        }
        let mut s = arg.clone();
        for (name, value) in [
            ("session_id", v.session_id),
            ("worktree", v.worktree),
            ("git_dir", v.git_dir),
            ("worktree_git_dir", v.worktree_git_dir),
            ("remote", v.remote),
            ("worker_id", v.worker_id),
            ("model_name", v.model.unwrap_or_default()),
        ] {
            s = s.replace(&format!("{{{name}}}"), value);
        }
        out.push(s);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(resume: bool) -> ArgvValues<'static> {
        ArgvValues {
            session_id: "0b8e",
            resume,
            worktree: "/wt",
            git_dir: "/repo/.git",
            worktree_git_dir: "/repo/.git/worktrees/a-1",
            remote: "/remotes/a.git",
            worker_id: "a-1",
            model: None,
        }
    }

    #[test]
    fn claude_starts_with_its_id_and_resumes_with_it() {
        let argv = Agent::Claude.default_command();
        let first = expand(Agent::Claude, &argv, &values(false));
        assert!(first.ends_with(&["--session-id".into(), "0b8e".into()]));
        assert!(first.contains(&"stream-json".to_string()));
        let again = expand(Agent::Claude, &argv, &values(true));
        assert!(again.ends_with(&["--resume".into(), "0b8e".into()]));
    }

    #[test]
    fn codex_and_others_expand_their_placeholders() {
        let argv = Agent::Codex.default_command();
        let first = expand(Agent::Codex, &argv, &values(false));
        assert!(!first.iter().any(|a| a.contains('{')));
        assert!(first.contains(&"/repo/.git".to_string()));
        assert!(first.contains(&"/repo/.git/worktrees/a-1".to_string()));
        assert!(first.contains(&"allow_login_shell=false".to_string()));
        assert!(!first.contains(&"resume".to_string()));
        let again = expand(Agent::Codex, &argv, &values(true));
        assert!(again.ends_with(&["resume".into(), "0b8e".into()]));
        let mine = vec!["x".into(), "--dir={worktree}/sub".into(), "{resume}".into()];
        assert_eq!(
            expand(Agent::Command, &mine, &values(true)),
            vec!["x", "--dir=/wt/sub"]
        );
    }

    #[test]
    fn each_agent_names_the_model_with_its_own_option_and_none_without_one() {
        let model = |agent: Agent, m: Option<&'static str>| {
            let v = ArgvValues {
                model: m,
                ..values(false)
            };
            expand(agent, &agent.default_command(), &v)
        };
        for (agent, opt) in [
            (Agent::Claude, "--model"),
            (Agent::Codex, "-m"),
            (Agent::Aider, "--model"),
        ] {
            let argv = model(agent, Some("big"));
            let at = argv.iter().position(|a| a == "big").expect("the model");
            assert_eq!(argv[at - 1], opt, "{agent}: {argv:?}");
            assert!(!model(agent, None).iter().any(|a| a == opt), "{agent}");
        }
        // Codex: the model option comes before `resume <id>` (an option of `exec`).
        let v = ArgvValues {
            model: Some("big"),
            ..values(true)
        };
        let again = expand(Agent::Codex, &Agent::Codex.default_command(), &v);
        assert!(again.ends_with(&["-m".into(), "big".into(), "resume".into(), "0b8e".into()]));
        let mine: Vec<String> = vec!["x".into(), "--llm={model_name}".into(), "{model}".into()];
        assert_eq!(
            expand(Agent::Command, &mine, &v),
            vec!["x", "--llm=big", "--model", "big"]
        );
        assert!(command_problems(&["--m={model}".to_string()])[0].contains("whole argument"));
    }

    #[test]
    fn unknown_placeholders_and_partial_resume_are_problems_json_is_not() {
        let ok: Vec<String> = vec![
            "claude".into(),
            "--settings".into(),
            r#"{"permissions":{"allow":["Bash"]}}"#.into(),
            "{resume}".into(),
            "--add-dir={git_dir}".into(),
        ];
        assert!(command_problems(&ok).is_empty());
        let bad: Vec<String> = vec!["x".into(), "{sesion_id}".into(), "--r={resume}".into()];
        let p = command_problems(&bad);
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(p[0].contains("{sesion_id}") && p[0].contains("{session_id}"));
        assert!(p[1].contains("whole argument"));
    }
}
