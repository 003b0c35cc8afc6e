//! The helpers of the integration test crate (`tests/integration/main.rs` declares this
//! module once): the temp organisation harness with the polling, process and git helpers
//! (`org.rs`, which `benches/supervisors.rs` also includes), and the fake Forgejo
//! (`fake_forgejo.rs`, which `benches/resume.rs` also includes).
//!
//! Every `orch::` library path the helpers need is named in these files, not in the tests.
#![allow(dead_code)]

pub mod fake_forgejo;
pub mod fake_model;
pub mod fake_openai;
mod org;
pub mod sampler;
pub mod scripted_sse;

pub use org::*;
use std::path::{Path, PathBuf};

/// Shell for a CI job of the local forge: sets `$r` to its runner's pid (`orch __local-forge
/// run`) as the host sees it. A job runs under orch's guard, in a PID namespace of its own where
/// the machine gives one: `$PPID` is its guard or its init, and `$$` a pid of its namespace. The
/// host's `/proc` (a job has no `/proc` of its own) names the ancestors by their host pids.
pub const RUNNER_PID_SH: &str = "read -r _ _ _ r _ </proc/self/stat; \
    while [ \"$r\" -gt 1 ] && [ \"$(tr '\\0' '\\n' </proc/$r/cmdline | sed -n 2p)\" != __local-forge ]; \
    do read -r _ _ _ r _ </proc/$r/stat; done;";

/// Shell for a CI job: sets `$p` to the job shell's own host pid and `$g` to its process group
/// as the host sees them (see [`RUNNER_PID_SH`]).
pub const JOB_PID_SH: &str = "read -r p _ _ _ g _ </proc/self/stat;";

/// The text of the shipped contract.
pub const CONTRACT_TEXT: &str = include_str!("../../contracts/worker-completion.yaml");

/// Every regular file below `dir` (symbolic links are not followed).
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                stack.push(e.path());
            } else if ft.is_file() {
                found.push(e.path());
            }
        }
    }
    found
}

/// A real agent CLI for the contract tests: `$<env_var>`, else where `.ci/run` installs it
/// (`target/agents/node_modules/.bin/<name>`), else `<name>` on PATH, else `package` (pinned)
/// installed there with npm now. None (the tests say they are skipped) only with
/// `ORCH_AGENT_TESTS=skip`; otherwise its absence fails them, naming what to install.
pub fn agent_bin(env_var: &str, name: &str, package: &str) -> Option<PathBuf> {
    let installed = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target/agents/node_modules/.bin")
        .join(name);
    let found = std::env::var_os(env_var)
        .map(PathBuf::from)
        .or_else(|| installed.is_file().then_some(installed))
        .or_else(|| {
            std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
                .map(|d| d.join(name))
                .find(|p| p.is_file())
        });
    // Not there: installed once, pinned, into target/agents (as .ci/run does), so that README's
    // test command passes as typed on a machine with npm.
    let found = found.or_else(|| {
        if std::env::var("ORCH_AGENT_TESTS").as_deref() == Ok("skip") {
            return None;
        }
        let prefix = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/agents");
        std::fs::create_dir_all(&prefix).ok()?;
        // One installer at a time; the others find its result.
        let lock = std::fs::File::create(prefix.join(".install.lock")).ok()?;
        rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive).ok()?;
        let bin = prefix.join("node_modules/.bin").join(name);
        if !bin.is_file() {
            eprintln!("installing {package} into {} (npm)", prefix.display());
            let out = std::process::Command::new("npm")
                .args(["install", "--prefix"])
                .arg(&prefix)
                .args(["--save-exact", "--no-audit", "--no-fund", package])
                .output()
                .ok()?;
            if !out.status.success() {
                eprintln!(
                    "npm install {package} failed:\n{}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
        }
        bin.is_file().then_some(bin)
    });
    match found {
        Some(p) => Some(p),
        None if std::env::var("ORCH_AGENT_TESTS").as_deref() == Ok("skip") => {
            eprintln!(
                "SKIPPED: no {name} binary ({name} on PATH or {env_var}) and ORCH_AGENT_TESTS=skip"
            );
            None
        }
        None => panic!(
            "the agent contract tests need the real {name} CLI, and installing it failed (above): install Node.js and npm, or run `npm install --prefix target/agents {package}` (as .ci/run does), or set {env_var}; ORCH_AGENT_TESTS=skip skips them"
        ),
    }
}

/// The aider release the contract tests run (`.ci/run` pins the same).
pub const AIDER_VERSION: &str = "0.86.2";

/// The real aider CLI: `$ORCH_AIDER_BIN`, else where `.ci/run` installs it
/// (`target/agents/aider/venv/bin/aider`, a virtual environment of its own), else `aider` on
/// PATH, else aider-chat (pinned) installed there now with `python3 -m venv` and pip. None only
/// with `ORCH_AGENT_TESTS=skip`; otherwise its absence fails the tests, naming what to install.
pub fn aider_bin() -> Option<PathBuf> {
    let prefix = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/agents/aider");
    let installed = prefix.join("venv/bin/aider");
    let found = std::env::var_os("ORCH_AIDER_BIN")
        .map(PathBuf::from)
        .or_else(|| installed.is_file().then(|| installed.clone()))
        .or_else(|| {
            std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
                .map(|d| d.join("aider"))
                .find(|p| p.is_file())
        });
    let skip = std::env::var("ORCH_AGENT_TESTS").as_deref() == Ok("skip");
    let found = found.or_else(|| {
        if skip {
            return None;
        }
        std::fs::create_dir_all(&prefix).ok()?;
        let lock = std::fs::File::create(prefix.join(".install.lock")).ok()?;
        rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive).ok()?;
        if !installed.is_file() {
            eprintln!(
                "installing aider-chat=={AIDER_VERSION} into {} (python3 -m venv, pip)",
                prefix.display()
            );
            let venv = prefix.join("venv");
            let ok = std::process::Command::new("python3")
                .args(["-m", "venv"])
                .arg(&venv)
                .status()
                .is_ok_and(|s| s.success())
                && std::process::Command::new(venv.join("bin/pip"))
                    .args(["install", "--quiet", "--disable-pip-version-check"])
                    .arg(format!("aider-chat=={AIDER_VERSION}"))
                    .status()
                    .is_ok_and(|s| s.success());
            if !ok {
                eprintln!("installing aider-chat=={AIDER_VERSION} failed (above)");
            }
        }
        installed.is_file().then(|| installed.clone())
    });
    match found {
        Some(p) => Some(p),
        None if skip => {
            eprintln!("SKIPPED: no aider binary (ORCH_AIDER_BIN) and ORCH_AGENT_TESTS=skip");
            None
        }
        None => panic!(
            "the aider contract tests need the real aider CLI, and installing it failed (above): run `python3 -m venv target/agents/aider/venv && target/agents/aider/venv/bin/pip install aider-chat=={AIDER_VERSION}` (as .ci/run does), or set ORCH_AIDER_BIN; ORCH_AGENT_TESTS=skip skips them"
        ),
    }
}

/// The unprivileged account the `worker.user` tests run workers as.
pub struct TestAccount {
    pub name: String,
    pub uid: u32,
}

/// The account `orch-it-worker` (created once per machine with `useradd` — test processes
/// serialise on a lock file), or None, said on stderr, where this is not root: switching
/// accounts needs root, which CI has.
pub fn worker_account() -> Option<TestAccount> {
    named_account("orch-it-worker")
}

/// Another unprivileged account (`orch-it-worker2`), for tests of a pool of accounts.
pub fn second_worker_account() -> Option<TestAccount> {
    named_account("orch-it-worker2")
}

/// The unprivileged account an orch of tests of `worker.sandbox` runs as (`orch-it-orch`).
pub fn unprivileged_orch_account() -> Option<TestAccount> {
    named_account("orch-it-orch")
}

fn named_account(name: &'static str) -> Option<TestAccount> {
    #[allow(non_snake_case)]
    let NAME = name;
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: worker.user tests need root (to create {NAME} and switch to it)");
        return None;
    }
    let uid = || {
        std::process::Command::new("id")
            .args(["-u", NAME])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .trim()
                    .parse::<u32>()
                    .ok()
            })
    };
    // The account must reach orch's binary and the scripted workers in this checkout (.ci/run
    // makes sure it can; a checkout elsewhere under a private directory cannot run these tests).
    let stranger = orch::account::Account {
        name: NAME.into(),
        uid: 3_999_997,
        gid: 3_999_997,
    };
    for needed in [
        std::path::PathBuf::from(env!("CARGO_BIN_EXE_orch")),
        worker_script("lib.sh"),
    ] {
        if let Err(e) = orch::account::reachable(&needed, &stranger) {
            eprintln!(
                "skipped: worker.user tests need this checkout reachable by other accounts: {e}"
            );
            return None;
        }
    }
    if let Some(uid) = uid() {
        return Some(TestAccount {
            name: NAME.into(),
            uid,
        });
    }
    let lock = std::fs::File::create(std::env::temp_dir().join("orch-it-accounts.lock")).unwrap();
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive).unwrap();
    if uid().is_none() {
        let out = std::process::Command::new("useradd")
            .args([
                "--system",
                "--user-group",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                NAME,
            ])
            .output()
            .expect("useradd (Debian's passwd package)");
        assert!(
            out.status.success(),
            "useradd {NAME}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Some(TestAccount {
        name: NAME.into(),
        uid: uid().expect("the account just created"),
    })
}

/// The state letter of `pid` in `/proc/<pid>/stat`.
pub fn proc_state(pid: i32) -> Option<char> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    text[text.rfind(')')? + 1..].trim_start().chars().next()
}

/// Whether `pid` is held still by a pause: stopped (`T`), or in a frozen cgroup. A process
/// frozen before it took its SIGSTOP (a loaded machine; the supervisor stops the tree, waits
/// a moment, then freezes the cgroup) shows `D` until it is thawed: frozen is still paused.
pub fn held_still(pid: i32) -> bool {
    if proc_state(pid) == Some('T') {
        return true;
    }
    let Ok(groups) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) else {
        return false;
    };
    groups
        .lines()
        .filter_map(|l| l.strip_prefix("0::"))
        .any(|path| {
            std::fs::read_to_string(format!("/sys/fs/cgroup{path}/cgroup.events"))
                .is_ok_and(|e| e.lines().any(|l| l == "frozen 1"))
        })
}
