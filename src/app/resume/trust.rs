//! What a rebuild from checkpoint files may believe. The files are evidence, not truth: anyone
//! who can write the state directory can edit them. A checkpoint is used only when it is
//! consistent with what orch itself would have written (its file name, the worker id, the
//! repository, branch, remote and worktree orch derives from them); everything else about it
//! is re-checked (CI for a DONE), and nothing is rebuilt beside a live supervisor.

use crate::app::Loaded;
use crate::checkpoint::Checkpoint;
use crate::config::ForgeKind;
use crate::milestone::Progress;
use std::path::{Path, PathBuf};

const SUFFIX: &str = ".checkpoint.yaml";

/// The worker id a checkpoint file is named after (`<YYYY-MM-DD>-<id>.checkpoint.yaml`) and
/// its day.
pub fn file_id(file: &Path) -> Option<(String, String)> {
    let name = file.file_name()?.to_str()?;
    let stem = name.strip_suffix(SUFFIX)?;
    let (day, id) = (stem.get(..10)?, stem.get(11..)?);
    let day_ok = day.len() == 10
        && day.bytes().enumerate().all(|(i, b)| {
            if i == 4 || i == 7 {
                b == b'-'
            } else {
                b.is_ascii_digit()
            }
        });
    (day_ok && stem.as_bytes().get(10) == Some(&b'-') && !id.is_empty())
        .then(|| (day.to_string(), id.to_string()))
}

/// The configured repository a worker id belongs to (ids are `<repo>-<8 hex>`).
pub fn repo_of_id<'a>(l: &'a Loaded, id: &str) -> Option<&'a str> {
    let (repo, hex) = id.rsplit_once('-')?;
    (hex.len() == 8
        && hex
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()))
    .then_some(())?;
    l.config.repo(repo).map(|r| r.name.as_str())
}

fn is_hex_sha(s: &str) -> bool {
    matches!(s.len(), 40 | 64) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `path` as the file system resolves it (symlinks followed; parts that do not exist yet
/// appended lexically).
fn real(path: &Path) -> PathBuf {
    crate::config::resolve_on_disk(path)
}

/// Where worker `id`'s worktree must be: `<state dir>/<id>/worktree`, resolved.
/// A worktree that resolves anywhere else (a symlink out of the state directory, a path
/// edited into the checkpoint) is not the worker's.
pub fn expected_worktree(state_dir: &Path, id: &str) -> PathBuf {
    crate::app::supervisor::session_dir(&real(state_dir), id).join("worktree")
}

/// Where a worker of an account of its own works: its clone in its workspace.
pub fn expected_own_clone(state_dir: &Path, id: &str) -> PathBuf {
    crate::account::workspace_dir(&real(state_dir), id).join("worktree")
}

/// Whether `worktree` is one of the two places orch makes worker `id`'s worktree.
pub fn is_expected_worktree(state_dir: &Path, id: &str, worktree: &Path) -> bool {
    let found = real(worktree);
    found == expected_worktree(state_dir, id) || found == expected_own_clone(state_dir, id)
}

/// Checks checkpoint `cp`, read from `file`, against what orch would have written; returns
/// its progress, or why it cannot be trusted.
pub fn check(l: &Loaded, file: &Path, cp: &Checkpoint) -> Result<Progress, String> {
    let Some((_, id)) = file_id(file) else {
        return Err("its file name is not <YYYY-MM-DD>-<worker id>.checkpoint.yaml".into());
    };
    if cp.worker_id != id {
        return Err(format!(
            "it names worker \"{}\" but its file is worker \"{id}\"'s",
            crate::text::escape(&cp.worker_id)
        ));
    }
    if l.config.repo(&cp.repo_name).is_none() {
        return Err(format!(
            "unknown repository \"{}\" (not in {})",
            crate::text::escape(&cp.repo_name),
            l.config.file.display()
        ));
    }
    if repo_of_id(l, &id) != Some(cp.repo_name.as_str()) {
        return Err(format!(
            "worker id \"{id}\" is not one orch makes for repository {}",
            cp.repo_name
        ));
    }
    let branch = format!("orch/{id}");
    if cp.branch != branch {
        return Err(format!(
            "branch \"{}\" is not {branch}",
            crate::text::escape(&cp.branch)
        ));
    }
    let remotes = match l.config.forge.kind {
        ForgeKind::Local => crate::app::spawn::local_remote_names(&l.state_dir).to_vec(),
        ForgeKind::Forgejo => vec!["origin".to_string()],
    };
    if !remotes.contains(&cp.remote) {
        return Err(format!(
            "remote \"{}\" is not {}",
            crate::text::escape(&cp.remote),
            remotes.join(" or ")
        ));
    }
    let expected = expected_worktree(&l.state_dir, &id);
    let worktree = Path::new(&cp.worktree);
    if !worktree.is_absolute() || !is_expected_worktree(&l.state_dir, &id, worktree) {
        return Err(format!(
            "worktree \"{}\" is not {} (worktrees live under the state directory; nothing there was touched)",
            crate::text::escape(&cp.worktree),
            expected.display()
        ));
    }
    if !is_hex_sha(&cp.base_sha) {
        return Err("base_sha is not a commit id".into());
    }
    if let Some(bad) = cp.ci_runs.iter().find(|c| !is_hex_sha(&c.sha)) {
        return Err(format!(
            "ci_runs names \"{}\", not a commit id",
            crate::text::escape(&bad.sha)
        ));
    }
    // The model becomes an argument of the agent's command line: never an option.
    if let Some(m) = &cp.model
        && let Some(why) = crate::config::model::name_problem(m)
    {
        return Err(format!(
            "model \"{}\" is not a model name: {why}",
            crate::text::escape(m)
        ));
    }
    let progress: Progress = serde_json::from_str(&cp.progress_json)
        .map_err(|e| format!("its progress_json is unreadable ({e})"))?;
    if progress.milestone.as_str() != cp.current_milestone {
        return Err(format!(
            "current_milestone {} disagrees with its progress ({})",
            crate::text::escape(&cp.current_milestone),
            progress.milestone
        ));
    }
    if let Some(t) = &progress.tracked_sha
        && !is_hex_sha(t)
    {
        return Err("its tracked SHA is not a commit id".into());
    }
    if cp.tracked_sha.as_deref() != progress.tracked_sha.as_deref() {
        return Err("tracked_sha disagrees with its progress".into());
    }
    Ok(progress)
}

/// Worker session directories under the state directory (`<state>/<id>/` with a log, a
/// prompt or a worktree): the trace a worker leaves even when its checkpoint is gone.
pub fn session_dirs(state_dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(state_dir) else {
        return Vec::new();
    };
    let mut out: Vec<(String, PathBuf)> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| {
            let id = e.file_name().to_str()?.to_string();
            let p = e.path();
            let (_, hex) = id.rsplit_once('-')?;
            let looks = hex.len() == 8
                && hex.bytes().all(|b| b.is_ascii_hexdigit())
                && ["supervisor.log", "worker.log", "prompt.md", "worktree"]
                    .iter()
                    .any(|f| p.join(f).exists());
            looks.then_some((id, p))
        })
        .collect();
    out.sort();
    out
}

/// Live processes that supervise workers of `state_dir` (`orch __supervise`, or `orch spawn
/// --foreground`): pid and command line. Found through /proc: a supervisor keeps the state
/// directory's database and its log open, even when the database file was deleted.
pub fn live_supervisors(state_dir: &Path) -> Vec<(i32, String)> {
    let canon = std::fs::canonicalize(state_dir).unwrap_or_else(|_| state_dir.to_path_buf());
    let me = crate::pidns::host_pid() as i32;
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<i32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(raw) = std::fs::read(p.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<String> = raw
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .collect();
        let has = |s: &str| args.iter().any(|a| a == s);
        if !(has("__supervise") || (has("spawn") && has("--foreground"))) {
            continue;
        }
        if uses_dir(&p.path(), &args, &canon) {
            out.push((pid, args.join(" ")));
        }
    }
    out.sort();
    out
}

/// Does process `/proc/<pid>` (`proc`) work on `dir`: a file it holds open lies under it, or
/// its `--state-dir` is it?
fn uses_dir(proc: &Path, args: &[String], dir: &Path) -> bool {
    let open_under = std::fs::read_dir(proc.join("fd")).is_ok_and(|fds| {
        fds.flatten().any(|fd| {
            std::fs::read_link(fd.path()).is_ok_and(|target| {
                let t = target.to_string_lossy();
                let t = t.strip_suffix(" (deleted)").unwrap_or(&t);
                Path::new(t).starts_with(dir)
            })
        })
    });
    open_under
        || args.windows(2).any(|w| {
            w[0] == "--state-dir" && Path::new(&w[1]).is_absolute() && real(Path::new(&w[1])) == dir
        })
}

/// A checkpoint that was not rebuilt: which file, why, and the chain held in its place.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RefusedCheckpoint {
    /// The checkpoint file, or the session directory that has none.
    pub file: PathBuf,
    pub worker_id: Option<String>,
    pub why: String,
    /// The repository whose chain is held (by `hold:orch-resume`) until an operator has
    /// looked: `orch unhold <repo>`.
    pub held: Option<String>,
}

impl RefusedCheckpoint {
    pub fn describe(&self) -> String {
        let held = match &self.held {
            Some(repo) => format!(
                "; {repo}'s chain is held until an operator has looked (orch unhold {repo})"
            ),
            None => String::new(),
        };
        format!("{}: {}{held}", self.file.display(), self.why)
    }
}

#[cfg(test)]
mod tests {
    use super::file_id;
    use std::path::Path;

    #[test]
    fn checkpoint_file_names() {
        assert_eq!(
            file_id(Path::new("/s/2024-05-01-core-0a1b2c3d.checkpoint.yaml")),
            Some(("2024-05-01".into(), "core-0a1b2c3d".into()))
        );
        for bad in [
            "/s/2024-05-01.checkpoint.yaml",
            "/s/2024-5-01-core-0a1b2c3d.checkpoint.yaml",
            "/s/core-0a1b2c3d.checkpoint.yaml",
            "/s/2024-05-01-core-0a1b2c3d.yaml",
        ] {
            assert_eq!(file_id(Path::new(bad)), None, "{bad}");
        }
    }
}
