//! `worker:`: which agent runs, how it is started, what it may spend and see, as which account.

use super::{Check, model_name};
use crate::config::raw::{RawModelOverrides, RawWorker, pos};
use crate::config::{Agent, ForgeConfig, WorkerConfig};
use crate::yaml::Pos;
use serde_saphyr::Spanned;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The `worker:` section; `forge` for the one check across both (the forge token never
/// reaches a worker).
pub(super) fn validate_worker(
    c: &mut Check,
    root: &Path,
    raw: Option<RawWorker>,
    forge: &ForgeConfig,
) -> WorkerConfig {
    let w = raw.unwrap_or(RawWorker {
        agent: None,
        command: None,
        max_cost_usd: None,
        max_tokens: None,
        max_parallel: None,
        max_parallel_total: None,
        env_passthrough: None,
        max_respawns: None,
        stop_grace: None,
        user: None,
        users: None,
        sandbox: None,
        hide: None,
        model: None,
        model_overrides: None,
    });
    let agent = match &w.agent {
        None => Agent::Command,
        Some(a) => Agent::parse(&a.value).unwrap_or_else(|| {
            c.err(
                pos(a),
                format!(
                    "worker.agent: unknown agent {:?}; one of: {}",
                    a.value,
                    Agent::ALL.map(Agent::as_str).join(", ")
                ),
            );
            Agent::Command
        }),
    };
    let users = accounts(c, &w);
    let command_pos = w.command.as_ref().and_then(pos);
    let command = match w.command {
        None => agent.default_command(),
        Some(cmd) => beside_config(root, command(c, cmd)),
    };
    let max_cost_usd = match &w.max_cost_usd {
        Some(s) if !(s.value.is_finite() && s.value > 0.0) => {
            c.err(
                pos(s),
                format!(
                    "worker.max_cost_usd must be a number of dollars greater than zero, got {}",
                    s.value
                ),
            );
            None
        }
        other => other.as_ref().map(|s| s.value),
    };
    let max_tokens = w
        .max_tokens
        .as_ref()
        .map(|_| c.positive("worker.max_tokens", &w.max_tokens, 1) as u64);
    let max_respawns = match &w.max_respawns {
        Some(s) if s.value < 0 => {
            c.err(
                pos(s),
                format!("worker.max_respawns must not be negative, got {}", s.value),
            );
            2
        }
        Some(s) => s.value as u32,
        None => 2,
    };
    let worker = WorkerConfig {
        agent,
        command,
        max_parallel: c.positive("worker.max_parallel", &w.max_parallel, 4) as usize,
        max_parallel_total: w
            .max_parallel_total
            .as_ref()
            .map(|_| c.positive("worker.max_parallel_total", &w.max_parallel_total, 1) as usize),
        env_passthrough: w
            .env_passthrough
            .map(|v| v.into_iter().map(|s| s.value).collect())
            .unwrap_or_else(|| agent.default_env_passthrough()),
        max_respawns,
        stop_grace: c.duration("worker.stop_grace", &w.stop_grace, Duration::from_secs(10)),
        max_cost_usd,
        max_tokens,
        users,
        sandbox: w.sandbox.as_ref().is_some_and(|s| s.value),
        hide: hidden_paths(c, root, &w.hide),
        model: model_name(c, "worker.model", &w.model),
        model_overrides: model_overrides(c, w.model_overrides.unwrap_or_default()),
    };
    if worker.model.is_none()
        && worker
            .command
            .iter()
            .any(|a| crate::config::agent::placeholders_in(a).contains(&"model_name"))
    {
        c.err(
            command_pos,
            "worker.command uses {model_name} but worker.model is not set: a worker no model was chosen for would get an empty name (set worker.model, or use {model}, which is left out then)",
        );
    }
    if let Some(var) = &forge.token_env
        && worker.env_passthrough.iter().any(|v| v == var)
    {
        c.err(
            None,
            format!("worker.env_passthrough includes {var}, the forge token variable: workers never receive the forge token"),
        );
    }
    worker
}

/// `worker.command`: an argv list whose first word names a program.
fn command(c: &mut Check, cmd: Spanned<Vec<String>>) -> Vec<String> {
    if cmd.value.is_empty() || cmd.value[0].trim().is_empty() {
        c.err(
            pos(&cmd),
            "worker.command must name a program (an argv list such as [claude, -p])",
        );
    }
    for problem in crate::config::agent::command_problems(&cmd.value) {
        c.err(pos(&cmd), problem);
    }
    cmd.value
}

fn model_overrides(c: &mut Check, o: RawModelOverrides) -> crate::config::model::ModelOverrides {
    crate::config::model::ModelOverrides {
        critical_path: model_name(c, "worker.model_overrides.critical_path", &o.critical_path),
        complexity_high: model_name(
            c,
            "worker.model_overrides.complexity_high",
            &o.complexity_high,
        ),
        security_sensitive: model_name(
            c,
            "worker.model_overrides.security_sensitive",
            &o.security_sensitive,
        ),
        cross_repo: model_name(c, "worker.model_overrides.cross_repo", &o.cross_repo),
    }
}

/// `worker.hide`: more paths a sandboxed worker must not see — absolute, `~/…` (orch's home,
/// expanded where the sandbox is made: validation reads no environment) or relative to the
/// configuration's directory.
fn hidden_paths(c: &mut Check, root: &Path, hide: &Option<Vec<Spanned<String>>>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for h in hide.iter().flatten() {
        let text = h.value.trim();
        let path = if text == "~" || text.starts_with("~/") {
            PathBuf::from(text)
        } else {
            crate::config::normalize(&root.join(text))
        };
        if text.is_empty() || text == "~" || path == Path::new("/") {
            c.err(
                pos(h),
                format!(
                    "worker.hide: {:?} is not a path a worker can be kept from (name a file or directory other than / and ~)",
                    h.value
                ),
            );
            continue;
        }
        out.push(path);
    }
    out
}

/// `worker.user` (one account) or `worker.users` (a pool: each live worker gets one of its own),
/// each an unprivileged account's name or number.
fn accounts(c: &mut Check, w: &RawWorker) -> Vec<String> {
    let mut names: Vec<(String, Option<Pos>)> = Vec::new();
    if let Some(u) = &w.user {
        names.push((u.value.clone(), pos(u)));
    }
    if let Some(list) = &w.users {
        if w.user.is_some() {
            c.err(
                pos(list),
                "worker.user and worker.users both given: name one account (user) or a pool (users)",
            );
        }
        if list.value.is_empty() {
            c.err(pos(list), "worker.users: name at least one account");
        }
        names.extend(list.value.iter().map(|u| (u.value.clone(), pos(u))));
    }
    let mut out: Vec<String> = Vec::new();
    for (value, at) in names {
        let name = value.trim();
        if name.is_empty() || name.contains(['/', ':', '\n']) {
            c.err(
                at,
                format!("worker.user: {value:?} is not an account name (the unprivileged account workers run as, e.g. orch-worker)"),
            );
        } else if name == "root" || name == "0" {
            c.err(
                at,
                "worker.user: root is not a separate account; name an unprivileged one (e.g. orch-worker)",
            );
        } else if out.iter().any(|n| n == name) {
            c.err(at, format!("worker.users: {name} is named twice"));
        } else {
            out.push(name.to_string());
        }
    }
    out
}

/// A worker runs in its worktree, not beside repos.yaml: what `worker.command` names relative
/// to repos.yaml — a program by a relative path (`./worker.sh`, `bin/agent`), or an argument
/// naming a file there (`[sh, worker.sh]`) — is taken from repos.yaml's directory, as the
/// person who wrote it meant (issue 37). A bare program name stays a PATH lookup; flags,
/// placeholders and words that name no file there are left as they are.
pub(super) fn beside_config(root: &Path, argv: Vec<String>) -> Vec<String> {
    argv.into_iter()
        .enumerate()
        .map(|(i, arg)| {
            let path = Path::new(&arg);
            if arg.is_empty() || path.is_absolute() || arg.starts_with('-') || arg.contains('{') {
                return arg;
            }
            let there = root.join(path);
            let named = if i == 0 {
                arg.contains('/')
            } else {
                there.is_file()
            };
            if named {
                there.display().to_string()
            } else {
                arg
            }
        })
        .collect()
}
