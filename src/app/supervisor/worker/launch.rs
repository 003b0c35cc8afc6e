//! How a worker's process is put together before it starts: its argv (the agent's, with
//! the placeholders filled), the guard's command line around it (cgroup, channel, PID
//! namespace, sandbox, account), and its environment.

use super::Launch;
use crate::app::channel::{Channel, GUARD_CHANNEL_ARG, GUARD_WORKER_ARG, SOCKET_ENV};
use crate::app::supervisor::Env;
use crate::config::agent::{ArgvValues, expand};
use crate::contain::Cgroup;
use crate::store::workers::WorkerRecord;

/// The PATH `cmd` would give the worker so far (the passed-through one), if any.
/// What worker `argv` must not see in its sandbox (`worker.sandbox`), refused when something
/// it needs would be hidden (orch's binary, the worker command, the configuration or the
/// contract orch's commands read inside it), or when it could redirect orch's configuration
/// through a symlink (`sandbox::fixed::redirectable`).
pub(super) fn sandbox_plan(
    env: &Env,
    workspace: &std::path::Path,
    argv: &[String],
) -> Result<crate::sandbox::Plan, String> {
    let contract = (!env.contract.is_built_in()).then_some(env.contract_path);
    // The wave files orch's ticks read (a relative one taken from repos.yaml's directory,
    // which is read-only to the worker anyway).
    let waves = crate::store::Store::open(env.state_dir)
        .and_then(|mut s| s.read(crate::store::waves::wave_files))
        .map_err(|e| format!("worker.sandbox: cannot read the recorded wave files: {e}"))?;
    let plan = crate::sandbox::for_config(env.config, env.state_dir, workspace, contract, &waves);
    let mut needed = vec![
        ("orch's binary", env.orch_exe.to_path_buf()),
        ("the configuration", env.config_path.to_path_buf()),
    ];
    if !env.contract.is_built_in() {
        needed.push(("the contract", env.contract_path.to_path_buf()));
    }
    if let Some(program) = argv.first().filter(|p| p.starts_with('/')) {
        needed.push(("the worker command", program.into()));
    }
    // A mount fixes what a symlink points at, not where it points.
    if let Some(why) = crate::sandbox::fixed::redirectable(env.config, contract)
        .into_iter()
        .next()
    {
        return Err(why);
    }
    for (what, path) in needed {
        if plan.hides(&path) {
            return Err(format!(
                "worker.sandbox would hide {what} ({}) from the worker: move it out of the state directory, the clones and worker.hide",
                path.display()
            ));
        }
    }
    Ok(plan)
}

pub(super) fn cmd_path(cmd: &std::process::Command) -> Option<std::ffi::OsString> {
    cmd.get_envs()
        .find(|(k, _)| *k == "PATH")
        .and_then(|(_, v)| v.map(|v| v.to_os_string()))
}

/// The worker's PATH: the directory of `orch_exe` first, then `inherited` (or the usual system
/// directories when PATH is not passed through).
pub(super) fn worker_path(
    orch_exe: &std::path::Path,
    inherited: Option<std::ffi::OsString>,
) -> std::ffi::OsString {
    let mut dirs: Vec<std::path::PathBuf> = orch_exe
        .parent()
        .map(|d| d.to_path_buf())
        .into_iter()
        .collect();
    match inherited {
        Some(p) => dirs.extend(std::env::split_paths(&p)),
        None => dirs.extend(["/usr/local/bin", "/usr/bin", "/bin"].map(std::path::PathBuf::from)),
    }
    std::env::join_paths(dirs).unwrap_or_default()
}

/// The guard's command line for worker `w`'s `argv`: its cgroup, its channel, its PID
/// namespace (and whether it gets one), its sandbox and its account; the worker's directory
/// and pipes. An error says why the worker may not start here.
#[allow(clippy::too_many_arguments)]
pub(super) fn guard_command(
    env: &Env,
    w: &WorkerRecord,
    argv: &[String],
    cgroup: Option<&Cgroup>,
    channel: Option<&Channel>,
    sandbox: Option<&crate::sandbox::Plan>,
    account: Option<&crate::account::Account>,
) -> Result<(std::process::Command, bool), String> {
    let mut cmd = std::process::Command::new(env.orch_exe);
    cmd.arg(crate::guard::GUARD_COMMAND)
        .arg("--parent")
        .arg(std::process::id().to_string());
    if let Some(cg) = cgroup {
        cmd.arg("--cgroup").arg(cg.dir());
    }
    // Named in the guard's argv, which every process can read: an orch command run inside
    // the worker finds its worker and channel from its ancestry, whatever its environment.
    cmd.arg(GUARD_WORKER_ARG).arg(&w.id);
    if let Some(ch) = channel {
        cmd.arg(GUARD_CHANNEL_ARG).arg(ch.name());
    }
    // The kernel's bound: the guard's death ends everything in the worker's namespace.
    let pidns = crate::pidns::usable().is_some();
    if pidns {
        cmd.arg("--pidns");
    }
    // Codex's workspace-write sandbox (bubblewrap, codex-cli 0.169.0) clones its command
    // into new namespaces and then opens `/proc/<its pid>/ns` — a pid of the worker's
    // namespace: looked up in the host's `/proc` it is another process or none, bwrap
    // fails ("open /proc/<pid>/ns/ns failed"), its cloned child waits for it for ever and
    // Codex reports the command still running. So a Codex worker gets the `/proc` of its
    // own namespace (and the mount namespace it needs) even without a sandbox; orch
    // commands in it find their worker from its init's argv, as in a sandbox.
    if pidns && sandbox.is_none() && env.config.worker.agent == crate::config::agent::Agent::Codex {
        cmd.arg(crate::sandbox::OWN_PROC_ARG);
    }
    if let Some(plan) = sandbox {
        // The sandbox is made by the namespace's init: no namespace, no worker.
        if !pidns {
            return Err(
                "worker.sandbox needs a PID namespace for the worker: this machine gives none (see `orch check`)".into(),
            );
        }
        cmd.args(plan.args());
    }
    if let Some(a) = account {
        cmd.arg(crate::account::USER_ARG).arg(a.arg());
    }
    cmd.arg("--")
        .args(argv)
        .current_dir(&w.worktree)
        .env_clear()
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    Ok((cmd, pidns))
}

/// The worker's environment: what `worker.env_passthrough` lets through (never the forge
/// token), orch's variables, and what its account, land policy and store change.
pub(super) fn set_worker_env(
    cmd: &mut std::process::Command,
    env: &Env,
    w: &WorkerRecord,
    launch: &Launch,
    channel: Option<&Channel>,
    account: Option<&crate::account::Account>,
    dir: &std::path::Path,
) {
    let wt = std::path::Path::new(&w.worktree);
    for var in &env.config.worker.env_passthrough {
        if Some(var) == env.config.forge.token_env.as_ref() {
            continue; // never the forge token, whatever the configuration says
        }
        if let Some(v) = std::env::var_os(var) {
            cmd.env(var, v);
        }
    }
    // `orch report` / `orch ci status` work as written in the prompt: the running orch's
    // directory comes first on the worker's PATH.
    cmd.env("PATH", worker_path(env.orch_exe, cmd_path(cmd)));
    // The built-in contract has no file: `orch report` finds it the same way.
    if !env.contract.is_built_in() {
        cmd.env("ORCH_CONTRACT", env.contract_path);
    }
    cmd.env("ORCH_WORKER_ID", &w.id)
        .env("ORCH_REPO", &w.repo)
        .env("ORCH_TASK", &w.task)
        .env("ORCH_CI_GUIDE", dir.join("ci-guide.md"))
        .env(
            "ORCH_HANDOFF",
            dir.join(crate::app::supervisor::HANDOFF_FILE),
        )
        .env("ORCH_STATE_DIR", env.state_dir)
        .env("ORCH_CONFIG", env.config_path)
        .env("ORCH_BRANCH", &w.branch)
        .env(
            "ORCH_BASE_BRANCH",
            env.config
                .repo(&w.repo)
                .map(|r| r.branch.as_str())
                .unwrap_or("main"),
        )
        .env("ORCH_PUSH_REMOTE", &w.remote)
        .env("ORCH_BIN", env.orch_exe)
        .env("ORCH_SESSION_ID", &launch.session_id)
        // Where it stands: a replacement of a worker that pushed continues in FIXING_CI or
        // PUSHED_TO_CI, and must not report WORKING again (a violation). Which replacement
        // it is counts an operator's respawns as well as the crash replacements.
        .env("ORCH_MILESTONE", w.progress.milestone.to_string())
        .env(
            "ORCH_REPLACEMENT",
            (w.respawns + i64::from(w.progress.respawned)).to_string(),
        );
    if let Some(ch) = channel {
        cmd.env(SOCKET_ENV, ch.name());
    }
    if w.branch != w.local_branch() {
        // `land: direct`: the local branch `orch/<id>` tracks the base branch, and git's
        // default `push.default=simple` refuses a plain `git push` to a branch of another
        // name. `upstream` sends it where the policy wants (the tracked base); set for the
        // worker's processes only, never in the clone's config (people push from it too).
        // After any keys `worker.env_passthrough` brought, which stay.
        let n = cmd
            .get_envs()
            .find(|(k, _)| *k == "GIT_CONFIG_COUNT")
            .and_then(|(_, v)| v?.to_str()?.parse::<usize>().ok())
            .unwrap_or(0);
        cmd.env("GIT_CONFIG_COUNT", (n + 1).to_string())
            .env(format!("GIT_CONFIG_KEY_{n}"), "push.default")
            .env(format!("GIT_CONFIG_VALUE_{n}"), "upstream");
    }
    if env.config.worker.separate() {
        // Its own home (agents keep their configuration there) and its own copy of the CI
        // guide: orch's session directory is not its to read.
        cmd.env("HOME", crate::account::worker_home(wt))
            .env("ORCH_CI_GUIDE", crate::account::worker_ci_guide(wt))
            .env("ORCH_HANDOFF", crate::account::worker_handoff(wt))
            .env(crate::report_wire::CI_VIA_ENV, "channel");
    }
    if env.config.store.is_some() {
        // The shared database's URL is not the worker's to have: its CI questions go to
        // its supervisor, as a worker of another account's do.
        cmd.env(crate::report_wire::CI_VIA_ENV, "channel");
    }
    if let Some(a) = account {
        cmd.env("USER", &a.name).env("LOGNAME", &a.name);
    }
}

/// The worker's argv: `worker.command` with its placeholders filled in for this run.
pub(super) fn argv_for(env: &Env, w: &WorkerRecord, launch: &Launch) -> Vec<String> {
    let wt = std::path::Path::new(&w.worktree);
    let argv = &env.config.worker.command;
    let uses = |p: &str| argv.iter().any(|a| a.contains(p));
    // Asked of git only when the command wants them.
    let git_dir = if uses("{git_dir}") {
        crate::gitops::git(
            wt,
            &["rev-parse", "--path-format=absolute", "--git-common-dir"],
        )
        .unwrap_or_else(|_| format!("{}/.git", w.worktree))
    } else {
        String::new()
    };
    let worktree_git_dir = if uses("{worktree_git_dir}") {
        crate::gitops::git(wt, &["rev-parse", "--path-format=absolute", "--git-dir"])
            .unwrap_or_else(|_| format!("{}/.git", w.worktree))
    } else {
        String::new()
    };
    let remote = if env.config.worker.separate() {
        // Its clone's remote is reached through its supervisor (the relay), never on disk:
        // the bare remote is orch's, hidden from a sandboxed worker and closed to an account's,
        // and an agent sandbox that binds it (Codex's `--add-dir {remote}`) fails to start a
        // command. Its own worktree instead, which it writes already.
        w.worktree.clone()
    } else if uses("{remote}") {
        crate::gitops::git(wt, &["remote", "get-url", &w.remote])
            .unwrap_or_else(|_| w.remote.clone())
    } else {
        String::new()
    };
    let values = ArgvValues {
        session_id: &launch.session_id,
        resume: launch.resume,
        worktree: &w.worktree,
        git_dir: &git_dir,
        worktree_git_dir: &worktree_git_dir,
        remote: &remote,
        worker_id: &w.id,
        model: w.model.as_deref(),
    };
    expand(env.config.worker.agent, argv, &values)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn the_running_orch_comes_first_on_the_workers_path() {
        let p = worker_path(
            Path::new("/opt/orch/bin/orch"),
            Some("/usr/bin:/bin".into()),
        );
        assert_eq!(p, "/opt/orch/bin:/usr/bin:/bin");
        let p = worker_path(Path::new("/opt/orch/bin/orch"), None);
        assert_eq!(p, "/opt/orch/bin:/usr/local/bin:/usr/bin:/bin");
    }
}
