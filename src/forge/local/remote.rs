//! The bare remotes: creating and seeding them, installing their `pre-receive` (branch
//! protection) and `post-receive` (CI runs) hooks, and
//! running git with the hook's variables scrubbed.

use super::{INTERNAL_COMMAND, LocalForge, LocalForgeError, io_err};
use crate::config::Repo;
use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;

impl LocalForge {
    /// Creates the bare remote of `repo` if needed, (re)installs its `post-receive` hook, and
    /// seeds it with `repo.branch` from the local clone when the remote lacks that branch.
    /// Idempotent. Seeding imports the branch with a fetch run inside the remote, so it
    /// does not start a CI run; every later push does.
    pub fn ensure_remote(&self, repo: &Repo) -> Result<PathBuf, LocalForgeError> {
        let remote = self.remote_path(&repo.name);
        std::fs::create_dir_all(self.layout.forge_dir()).map_err(io_err(format!(
            "cannot create {}",
            self.layout.forge_dir().display()
        )))?;
        if git2::Repository::open_bare(&remote).is_err() {
            // Made aside and renamed into place: two spawns creating the same remote at once,
            // or a spawn killed half-way, never leave a half-made repository at `remote`.
            let tmp = self.layout.forge_dir().join(format!(
                ".{}.git.tmp-{}",
                repo.name,
                crate::pidns::host_pid()
            ));
            let _ = std::fs::remove_dir_all(&tmp);
            git(
                None,
                [
                    OsStr::new("init"),
                    OsStr::new("--bare"),
                    OsStr::new("-q"),
                    OsStr::new(&format!("--initial-branch={}", repo.branch)),
                    tmp.as_os_str(),
                ],
            )
            .map_err(|message| LocalForgeError::Git {
                context: format!("cannot create the remote {}", remote.display()),
                message,
            })?;
            if let Err(e) = std::fs::rename(&tmp, &remote) {
                let _ = std::fs::remove_dir_all(&tmp);
                if git2::Repository::open_bare(&remote).is_err() {
                    return Err(io_err(format!("cannot create {}", remote.display()))(e));
                } // else another process made it first
            }
        }
        self.install_hook(&remote, &repo.name)?;
        if self.branch_head_sync(&repo.name, &repo.branch)?.is_none() {
            let spec = format!("+refs/heads/{b}:refs/heads/{b}", b = repo.branch);
            let seeded = git(
                Some(&remote),
                [
                    OsStr::new("fetch"),
                    OsStr::new("-q"),
                    OsStr::new("--no-tags"),
                    repo.path.as_os_str(),
                    OsStr::new(&spec),
                ],
            );
            // A concurrent spawn may have seeded it meanwhile (and held the ref lock).
            if let Err(message) = seeded
                && self.branch_head_sync(&repo.name, &repo.branch)?.is_none()
            {
                return Err(LocalForgeError::Git {
                    context: format!(
                        "cannot seed {} with branch {} of {}",
                        remote.display(),
                        repo.branch,
                        repo.path.display()
                    ),
                    message,
                });
            }
        }
        Ok(remote)
    }

    fn install_hook(&self, remote: &Path, repo: &str) -> Result<(), LocalForgeError> {
        for hook in ["pre-receive", "post-receive"] {
            self.install_one_hook(remote, repo, hook)?;
        }
        Ok(())
    }

    fn install_one_hook(
        &self,
        remote: &Path,
        repo: &str,
        hook: &str,
    ) -> Result<(), LocalForgeError> {
        let hooks = remote.join("hooks");
        std::fs::create_dir_all(&hooks)
            .map_err(io_err(format!("cannot create {}", hooks.display())))?;
        let text = hook_script(
            hook,
            &self.exe,
            &self.layout.state_dir,
            &self.config_file,
            repo,
        );
        let path = hooks.join(hook);
        if std::fs::read(&path).is_ok_and(|old| old == text) {
            return Ok(());
        }
        let tmp = hooks.join(format!(".{hook}.{}.tmp", crate::pidns::host_pid()));
        let write = || -> io::Result<()> {
            use std::os::unix::fs::OpenOptionsExt;
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o755)
                .open(&tmp)?;
            io::Write::write_all(&mut f, &text)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)
        };
        write().map_err(io_err(format!("cannot install {}", path.display())))
    }
}

/// Quotes `s` for a POSIX shell: `'…'` with every `'` written as `'\''`.
pub(crate) fn shell_quote(s: &OsStr) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len() + 2);
    out.push(b'\'');
    for &b in s.as_bytes() {
        if b == b'\'' {
            out.extend_from_slice(b"'\\''");
        } else {
            out.push(b);
        }
    }
    out.push(b'\'');
    out
}

fn hook_script(
    hook: &str,
    exe: &Path,
    state_dir: &Path,
    config_file: &Path,
    repo: &str,
) -> Vec<u8> {
    let mut s = Vec::new();
    s.extend_from_slice(if hook == "pre-receive" {
        b"#!/bin/sh\n# Installed by orch (local forge): a worker may move only its own branch.\nexec ".as_slice()
    } else {
        b"#!/bin/sh\n# Installed by orch (local forge): a push starts a CI run; this hook returns at once.\nexec ".as_slice()
    });
    s.extend(shell_quote(exe.as_os_str()));
    s.extend_from_slice(format!(" {INTERNAL_COMMAND} {hook} --state-dir ").as_bytes());
    s.extend(shell_quote(state_dir.as_os_str()));
    s.extend_from_slice(b" --config ");
    s.extend(shell_quote(config_file.as_os_str()));
    s.extend_from_slice(b" --repo ");
    s.extend(shell_quote(OsStr::new(repo)));
    // A push from another PID namespace (an agent's sandbox) leaves the runner to orch.
    if let Some(ns) = super::cli::pid_namespace() {
        s.extend_from_slice(format!(" --{} ", super::cli::ORCH_PID_NS).as_bytes());
        s.extend(shell_quote(OsStr::new(&ns)));
    }
    s.push(b'\n');
    s
}

/// Variables git sets for hooks and for commands it runs, which would make a `git` inside a
/// job (or the runner's own clone) act on the bare remote instead of the checkout.
const GIT_LOCAL_VARS: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_QUARANTINE_PATH",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_PREFIX",
    "GIT_IMPLICIT_WORK_TREE",
    "GIT_GRAFT_FILE",
    "GIT_NO_REPLACE_OBJECTS",
    "GIT_REPLACE_REF_BASE",
    "GIT_SHALLOW_FILE",
    "GIT_CONFIG",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
    "GIT_INTERNAL_SUPER_PREFIX",
    "GIT_PROTOCOL",
    "GIT_REFLOG_ACTION",
    "GIT_PUSH_OPTION_COUNT",
];

const GIT_LOCAL_PREFIXES: &[&str] = &[
    "GIT_PUSH_OPTION_",
    "GIT_CONFIG_KEY_",
    "GIT_CONFIG_VALUE_",
    "GIT_PUSH_CERT",
];

/// Removes git's hook variables from `cmd`'s environment (and, with `orch_vars`, every
/// inherited `ORCH_*` variable, so a CI job never impersonates the worker that pushed).
pub(crate) fn scrub_env(cmd: &mut Command, orch_vars: bool) {
    for (key, _) in std::env::vars_os() {
        let Some(k) = key.to_str() else { continue };
        let git =
            GIT_LOCAL_VARS.contains(&k) || GIT_LOCAL_PREFIXES.iter().any(|p| k.starts_with(p));
        if git || (orch_vars && k.starts_with("ORCH_")) {
            cmd.env_remove(&key);
        }
    }
}

/// Runs `git` (in `dir` when given) with a scrubbed environment; stdout on success, a message
/// with stderr otherwise.
pub(crate) fn git<I, S>(dir: Option<&Path>, args: I) -> Result<String, String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut cmd = Command::new("git");
    if let Some(d) = dir {
        cmd.arg("-C").arg(d);
    }
    cmd.args(args).stdin(std::process::Stdio::null());
    scrub_env(&mut cmd, false);
    let out = cmd.output().map_err(|e| format!("cannot run git: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "git exited with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_for_the_shell() {
        assert_eq!(shell_quote(OsStr::new("plain")), b"'plain'");
        assert_eq!(shell_quote(OsStr::new("it's")), b"'it'\\''s'");
        assert_eq!(shell_quote(OsStr::new("a b $x")), b"'a b $x'");
    }

    #[test]
    fn hook_runs_orch_with_quoted_absolute_paths() {
        let s = hook_script(
            "post-receive",
            Path::new("/opt/my orch/orch"),
            Path::new("/s/it's"),
            Path::new("/c/repos.yaml"),
            "acdc-core",
        );
        let s = String::from_utf8(s).unwrap();
        assert!(s.starts_with("#!/bin/sh\n"));
        assert!(s.contains(
            "exec '/opt/my orch/orch' __local-forge post-receive --state-dir '/s/it'\\''s' --config '/c/repos.yaml' --repo 'acdc-core' --orch-pid-ns "
        ), "{s}");
        // The namespace of the orch that installed it, for the hook to compare with its own.
        let ns = super::super::cli::pid_namespace().unwrap();
        assert!(s.ends_with(&format!(" --orch-pid-ns '{ns}'\n")), "{s}");
    }
}
