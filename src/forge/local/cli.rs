//! `orch __local-forge …`: the hidden commands the local forge runs itself.
//!
//! ```text
//! orch __local-forge pre-receive --state-dir DIR --config FILE --repo NAME    (the git hook: branch protection)
//! orch __local-forge post-receive --state-dir DIR --config FILE --repo NAME   (the git hook)
//! orch __local-forge run --state-dir DIR --config FILE --run-id N            (the runner)
//! ```

use super::{INTERNAL_COMMAND, Layout, LocalForgeError, db, io_err, scrub_env};
use crate::config::Config;
use crate::store::Store;
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const USAGE: &str = "usage: orch __local-forge post-receive --state-dir DIR --config FILE --repo NAME\n       orch __local-forge run --state-dir DIR --config FILE --run-id N";

/// Entry point for `orch __local-forge <args>` (`args` excludes `__local-forge`). Returns the
/// process exit code: 0 done, 1 failed, 2 usage error.
pub fn internal_main(args: &[String]) -> i32 {
    let Some((sub, rest)) = args.split_first() else {
        eprintln!("{USAGE}");
        return 2;
    };
    let result = match sub.as_str() {
        "post-receive" => Flags::parse(rest, &["state-dir", "config", "repo"], &[ORCH_PID_NS])
            .and_then(|f| {
                let mut input = String::new();
                std::io::stdin()
                    .read_to_string(&mut input)
                    .map_err(io_err("cannot read the ref updates on stdin"))?;
                let exe =
                    std::env::current_exe().map_err(io_err("cannot find the orch executable"))?;
                let runner = if pushed_from_a_sandbox(f.opt(ORCH_PID_NS)) {
                    Runner::LeaveToOrch
                } else {
                    Runner::Start
                };
                let started = post_receive(
                    Path::new(f.get("state-dir")),
                    Path::new(f.get("config")),
                    f.get("repo"),
                    &input,
                    &exe,
                    runner,
                )?;
                for s in started {
                    println!("{s}");
                }
                Ok(())
            }),
        "pre-receive" => {
            let judged = Flags::parse(rest, &["state-dir", "config", "repo"], &[ORCH_PID_NS])
                .and_then(|f| {
                    let mut input = String::new();
                    std::io::stdin()
                        .read_to_string(&mut input)
                        .map_err(io_err("cannot read the ref updates on stdin"))?;
                    pre_receive(
                        Path::new(f.get("state-dir")),
                        Path::new(f.get("config")),
                        f.get("repo"),
                        &input,
                    )
                });
            match judged {
                Ok(refusals) if refusals.is_empty() => Ok(()),
                Ok(refusals) => {
                    // git shows these to the pusher as `remote: …` and refuses the whole push.
                    for r in &refusals {
                        eprintln!("orch: refused {r}");
                    }
                    return 1;
                }
                Err(e) => Err(e),
            }
        }
        "run" => Flags::parse(rest, &["state-dir", "config", "run-id"], &[]).and_then(|f| {
            let id: i64 = f.get("run-id").parse().map_err(|_| {
                LocalForgeError::Usage(format!(
                    "--run-id must be a number, got {}",
                    f.get("run-id")
                ))
            })?;
            super::runner::run(
                Path::new(f.get("state-dir")),
                Path::new(f.get("config")),
                id,
            )
        }),
        other => Err(LocalForgeError::Usage(format!(
            "unknown local-forge command \"{other}\""
        ))),
    };
    match result {
        Ok(()) => 0,
        Err(LocalForgeError::Usage(m)) => {
            eprintln!("orch {INTERNAL_COMMAND}: {m}\n{USAGE}");
            2
        }
        Err(e) => {
            eprintln!("orch {INTERNAL_COMMAND} {sub}: {e}");
            1
        }
    }
}

struct Flags(Vec<(String, String)>);

impl Flags {
    /// `--name value` or `--name=value`, every name in `required` exactly once, those in
    /// `optional` at most once, nothing else.
    fn parse(
        args: &[String],
        required: &[&str],
        optional: &[&str],
    ) -> Result<Flags, LocalForgeError> {
        let mut out: Vec<(String, String)> = Vec::new();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let Some(flag) = a.strip_prefix("--") else {
                return Err(LocalForgeError::Usage(format!(
                    "unexpected argument \"{a}\""
                )));
            };
            let (name, value) = match flag.split_once('=') {
                Some((n, v)) => (n.to_string(), v.to_string()),
                None => {
                    let v = it
                        .next()
                        .ok_or_else(|| LocalForgeError::Usage(format!("--{flag} needs a value")))?;
                    (flag.to_string(), v.clone())
                }
            };
            if !required.contains(&name.as_str()) && !optional.contains(&name.as_str()) {
                return Err(LocalForgeError::Usage(format!("unknown option --{name}")));
            }
            if out.iter().any(|(n, _)| *n == name) {
                return Err(LocalForgeError::Usage(format!("--{name} given twice")));
            }
            out.push((name, value));
        }
        for r in required {
            if !out.iter().any(|(n, _)| n == r) {
                return Err(LocalForgeError::Usage(format!("missing --{r}")));
            }
        }
        Ok(Flags(out))
    }

    fn opt(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn get(&self, name: &str) -> &str {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or_default()
    }
}

/// One `<old> <new> <ref>` line of post-receive input that starts a run.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct BranchUpdate {
    pub git_ref: String,
    pub sha: String,
}

/// The branch updates of a push: deletions and non-branch refs (tags, notes) are skipped.
pub(super) fn branch_updates(input: &str) -> Vec<BranchUpdate> {
    input
        .lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            let (_old, new, git_ref) = (f.next()?, f.next()?, f.next()?);
            let deletion = new.bytes().all(|b| b == b'0');
            (!deletion && git_ref.starts_with("refs/heads/")).then(|| BranchUpdate {
                git_ref: git_ref.to_string(),
                sha: new.to_ascii_lowercase(),
            })
        })
        .collect()
}

/// The `pre-receive` hook: what a push may not do (see `branches.rs`). A push by a worker's
/// process that is refused is also told to that worker's supervisor, which raises an alert.
pub(super) fn pre_receive(
    state_dir: &Path,
    config_file: &Path,
    repo: &str,
    input: &str,
) -> Result<Vec<String>, LocalForgeError> {
    // A worker's own process is known by the kernel's view of it; a push a supervisor relays
    // for its worker of another account (`app::channel`), by the relay's word — only orch's
    // account can run git on this remote.
    let relayed = std::env::var(crate::report_wire::PUSH_FOR_ENV).ok();
    let Some(pusher) = crate::contain::worker_of_self().or_else(|| {
        relayed.clone().map(|id| crate::contain::WorkerOfProcess {
            id,
            tag: None,
            channel: None,
        })
    }) else {
        return Ok(Vec::new()); // orch's landing, an operator: pushes as before
    };
    let same_state_dir = pusher
        .tag
        .as_deref()
        .is_none_or(|t| t == crate::contain::state_dir_tag(state_dir));
    let record = if same_state_dir {
        match Store::open(state_dir).and_then(|mut s| s.worker(&pusher.id)) {
            Ok(w) => w.map(|w| super::branches::PusherRecord {
                repo: w.repo,
                branch: w.branch,
            }),
            // An agent's sandbox may keep orch's database out of reach (Codex's
            // workspace-write): the worker's branch is then judged by its name alone.
            Err(e) => {
                eprintln!(
                    "orch: cannot read orch's database from here ({e}); judging the push by the worker's branch name"
                );
                Some(super::branches::PusherRecord {
                    repo: repo.to_string(),
                    branch: format!("orch/{}", pusher.id),
                })
            }
        }
    } else {
        None
    };
    let updates = super::branches::ref_updates(input);
    let mut refusals =
        super::branches::refusals(&pusher, same_state_dir, record.as_ref(), repo, &updates);
    if refusals.is_empty()
        && let Some(rec) = &record
    {
        // `land: direct`: the push to the base is the landing; protected files stay out of it.
        refusals = super::protected_push::refusals(config_file, &pusher.id, rec, repo, &updates);
    }
    if !refusals.is_empty()
        && relayed.as_deref() == Some(pusher.id.as_str())
        && let Ok(file) = std::env::var(crate::report_wire::PUSH_REFUSALS_ENV)
    {
        // The relaying supervisor reads it when the push is over, and raises the alert.
        let _ = std::fs::write(file, refusals.join("\n"));
    } else if !refusals.is_empty()
        && let Some(channel) = &pusher.channel
    {
        let _ = crate::report_wire::send(
            channel,
            &crate::report_wire::Message::RefusedPush {
                repo: repo.to_string(),
                refusals: refusals.clone(),
            },
        );
    }
    Ok(refusals)
}

/// The hook's option naming the PID namespace of the orch process that installed it.
pub(super) const ORCH_PID_NS: &str = "orch-pid-ns";

/// The run's note while it waits for a runner orch starts (see [`Runner::LeaveToOrch`]).
pub(super) const RUNNER_FROM_OUTSIDE: &str =
    "pushed from another PID namespace (a sandbox): orch starts the runner from outside it";

/// This process's PID namespace (`pid:[inode]`); None where /proc does not say.
pub(super) fn pid_namespace() -> Option<String> {
    std::fs::read_link("/proc/self/ns/pid")
        .ok()
        .map(|p| p.to_string_lossy().into_owned())
}

/// Whether this hook runs in another PID namespace than the orch that installed it — a push
/// from inside an agent's sandbox (Codex's workspace-write uses one). A runner started there
/// would die with the sandbox, and the pid it records means nothing outside it (it may even
/// name a live process out there, so the run would never be recovered). Where this process's
/// namespace cannot be read it counts as another one: leaving the start to orch is always safe.
fn pushed_from_a_sandbox(orch_ns: Option<&str>) -> bool {
    orch_ns.is_some_and(|orch| pid_namespace().as_deref() != Some(orch))
}

/// Who starts the runner of a run a push records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Runner {
    /// The hook, at once (a detached process of its own).
    Start,
    /// orch's CI readers, at their next look (no grace): the run is noted as waiting for them.
    LeaveToOrch,
}

/// Records a run per updated branch and starts a detached runner for each (or leaves the
/// start to orch). Returns one human line per run (git shows them to the pusher as
/// `remote: …`).
pub(super) fn post_receive(
    state_dir: &Path,
    config_file: &Path,
    repo_name: &str,
    input: &str,
    exe: &Path,
    runner: Runner,
) -> Result<Vec<String>, LocalForgeError> {
    let mut lines = done_branches_moved(state_dir, input)?;
    lines.extend(start_runs(
        state_dir,
        config_file,
        repo_name,
        input,
        exe,
        &Start {
            only_if_absent: false,
            runner,
            pins: &[],
        },
    )?);
    Ok(lines)
}

/// A push that moves the branch of a worker orch already called DONE (a force-push after the
/// verdict): landing takes the verified commit, never the branch's new head, and people hear
/// of it at once, as a critical alert naming both commits. The worker's supervisor, if its
/// landing has not moved the base yet, sees the moved head at its next landing step and
/// takes DONE back (`Event::DoneBranchMoved`).
fn done_branches_moved(state_dir: &Path, input: &str) -> Result<Vec<String>, LocalForgeError> {
    let moved: Vec<(String, String, String)> = super::branches::ref_updates(input)
        .into_iter()
        .filter_map(|u| {
            let branch = u.git_ref.strip_prefix("refs/heads/")?.to_string();
            let id = branch.strip_prefix("orch/")?.to_string();
            Some((id, branch, u.new))
        })
        .collect();
    let mut lines = Vec::new();
    if moved.is_empty() {
        return Ok(lines);
    }
    let mut store = Store::open(state_dir)?;
    for (id, branch, new) in moved {
        let Some(w) = store.worker(&id)? else {
            continue;
        };
        if w.branch != branch {
            continue;
        }
        if let Some(message) =
            crate::alerts::done_branch::raise(&mut store, state_dir, &w, Some(&new))?
        {
            lines.push(format!("orch local forge: {message}"));
        }
    }
    Ok(lines)
}

/// How [`start_runs`] starts them.
pub(super) struct Start<'a> {
    /// A SHA that already has a run is skipped, checked in the same transaction that creates
    /// the run (lost-hook recovery may race with other pollers and must never double a run).
    pub(super) only_if_absent: bool,
    pub(super) runner: Runner,
    /// The upstream commits the runs are about (repository → commit; see `db::create_run`).
    pub(super) pins: &'a [(String, String)],
}

/// Records and starts runs for branch updates.
pub(super) fn start_runs(
    state_dir: &Path,
    config_file: &Path,
    repo_name: &str,
    input: &str,
    exe: &Path,
    how: &Start,
) -> Result<Vec<String>, LocalForgeError> {
    let Start {
        only_if_absent,
        runner,
        pins,
    } = *how;
    let config = Config::load(config_file)?;
    let repo = config.require_repo(repo_name)?;
    let layout = Layout::new(state_dir);
    let updates = branch_updates(input);
    let mut lines = Vec::new();
    if updates.is_empty() {
        return Ok(lines);
    }
    if repo.jobs.is_empty() {
        lines.push(format!(
            "orch local forge: {repo_name} has no ci.jobs in {}; no CI run started",
            config.file.display()
        ));
        return Ok(lines);
    }
    let mut store = Store::open(state_dir)?;
    let mut left_to_orch = false;
    for u in updates {
        let created = store.write(|tx| {
            if only_if_absent && !db::runs_for_sha(tx, repo_name, &u.sha)?.is_empty() {
                return Ok(None);
            }
            db::create_run(tx, repo_name, &u.git_ref, &u.sha, &repo.jobs, pins).map(Some)
        })?;
        let Some((run_id, number)) = created else {
            continue;
        };
        if runner == Runner::LeaveToOrch {
            store.write(|tx| db::set_run_note(tx, run_id, RUNNER_FROM_OUTSIDE))?;
            left_to_orch = true;
            lines.push(format!(
                "orch local forge: CI run #{number} recorded for {} at {}; {RUNNER_FROM_OUTSIDE}",
                u.git_ref,
                &u.sha[..12.min(u.sha.len())]
            ));
            continue;
        }
        match spawn_runner(&layout, exe, config_file, repo_name, run_id, number) {
            Ok(pid) => {
                store.write(|tx| db::set_runner_if_none(tx, run_id, pid as i64))?;
                lines.push(format!(
                    "orch local forge: CI run #{number} started for {} at {} (logs: {})",
                    u.git_ref,
                    crate::sha::short_to(&u.sha, 12),
                    layout.logs_dir(repo_name, number).display()
                ));
            }
            Err(e) => {
                let note = format!("runner could not start: {e}");
                store.write(|tx| {
                    db::finish_unfinished_jobs(tx, run_id, crate::ci::JobStatus::Failure, &note)
                })?;
                lines.push(format!("orch local forge: CI run #{number}: {note}"));
            }
        }
    }
    if left_to_orch {
        // Every push of a contained worker comes from its own PID namespace: the supervisors
        // outside look at once (a poll of theirs starts the runner), not at their next poll.
        crate::wake::ring_all(state_dir, crate::wake::Ring::Ci(repo_name.to_string()));
    }
    Ok(lines)
}

/// Starts `orch __local-forge run` in a new session with no terminal and its output in the
/// run's `runner.log`, and does not wait for it.
pub(super) fn spawn_runner(
    layout: &Layout,
    exe: &Path,
    config_file: &Path,
    repo: &str,
    run_id: i64,
    number: i64,
) -> std::io::Result<u32> {
    let dir = layout.logs_dir(repo, number);
    std::fs::create_dir_all(&dir)?;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("runner.log"))?;
    let config_file: PathBuf =
        std::path::absolute(config_file).unwrap_or_else(|_| config_file.to_path_buf());
    let mut cmd = Command::new(exe);
    cmd.arg(INTERNAL_COMMAND)
        .arg("run")
        .arg("--state-dir")
        .arg(&layout.state_dir)
        .arg("--config")
        .arg(config_file)
        .arg("--run-id")
        .arg(run_id.to_string())
        .current_dir("/")
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    scrub_env(&mut cmd, false);
    // Started by a worker's push, but not the worker's: nothing marks it as one (the orphan
    // sweep and its kills look for these marks).
    for var in [
        "ORCH_WORKER_ID",
        "ORCH_REPO",
        "ORCH_TASK",
        "ORCH_BRANCH",
        "ORCH_PUSH_REMOTE",
        "ORCH_CI_GUIDE",
        "ORCH_HANDOFF",
    ] {
        cmd.env_remove(var);
    }
    // Started by a worker's push: it runs the CI of that push after the worker is gone.
    crate::contain::leave_worker_cgroup(&mut cmd);
    // SAFETY: setsid is async-signal-safe and the closure allocates nothing.
    unsafe {
        cmd.pre_exec(|| {
            rustix::process::setsid()?;
            Ok(())
        });
    }
    let child = cmd.spawn()?;
    // Dropping a std Child neither waits nor kills; the hook exits right after and the
    // runner is reparented.
    Ok(child.id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_branch_updates_only() {
        let z = "0".repeat(40);
        let a = "a".repeat(40);
        let b = "B".repeat(40);
        let input = format!(
            "{z} {a} refs/heads/feature\n{a} {z} refs/heads/gone\n{z} {a} refs/tags/v1\n{a} {b} refs/heads/main\n\n"
        );
        assert_eq!(
            branch_updates(&input),
            vec![
                BranchUpdate {
                    git_ref: "refs/heads/feature".into(),
                    sha: a.clone()
                },
                BranchUpdate {
                    git_ref: "refs/heads/main".into(),
                    sha: b.to_ascii_lowercase()
                },
            ]
        );
    }

    #[test]
    fn flags_are_strict() {
        let args = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let f = Flags::parse(
            &args(&["--repo", "a", "--run-id=3"]),
            &["repo", "run-id"],
            &[],
        )
        .unwrap();
        assert_eq!(f.get("repo"), "a");
        assert_eq!(f.get("run-id"), "3");
        assert!(Flags::parse(&args(&["--repo"]), &["repo"], &[]).is_err());
        assert!(Flags::parse(&args(&["--x", "1", "--repo", "a"]), &["repo"], &[]).is_err());
        assert!(Flags::parse(&args(&[]), &["repo"], &[]).is_err());
        assert!(Flags::parse(&args(&["a"]), &["repo"], &[]).is_err());
        // An optional flag at most once, absent is fine.
        let o = Flags::parse(&args(&["--repo", "a", "--ns", "x"]), &["repo"], &["ns"]).unwrap();
        assert_eq!(o.opt("ns"), Some("x"));
        let o = Flags::parse(&args(&["--repo", "a"]), &["repo"], &["ns"]).unwrap();
        assert_eq!(o.opt("ns"), None);
        assert!(
            Flags::parse(
                &args(&["--repo", "a", "--ns", "x", "--ns", "y"]),
                &["repo"],
                &["ns"]
            )
            .is_err()
        );
    }

    #[test]
    fn a_hook_in_another_pid_namespace_leaves_the_runner_to_orch() {
        let mine = pid_namespace().expect("/proc/self/ns/pid");
        assert!(!pushed_from_a_sandbox(Some(&mine)));
        assert!(pushed_from_a_sandbox(Some("pid:[1]")));
        // A hook installed before orch wrote the option starts its runner as it always did.
        assert!(!pushed_from_a_sandbox(None));
    }

    #[test]
    fn internal_main_rejects_bad_usage() {
        assert_eq!(internal_main(&[]), 2);
        assert_eq!(internal_main(&["nope".to_string()]), 2);
        assert_eq!(internal_main(&["run".to_string()]), 2);
    }
}
