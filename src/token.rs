//! The forge token in an orch process: read once, then kept only in memory.
//!
//! A worker runs as the same user as orch and can read `/proc/<pid>/environ` of every orch
//! process (its supervisor, an `orch spawn` beside it). So the token is never in an orch
//! process's environment for longer than it takes to read it:
//! - with `forge.token_file`, an orch process started by the user reads the file (mode 0600 or
//!   stricter): the token is in no environment at any time;
//! - with `forge.token_env`, an orch process started by the user reads the variable, then
//!   wipes it — the value's bytes in the process's original environment block too, which is
//!   what the kernel shows in `/proc/<pid>/environ` — and removes the variable;
//! - an orch process started by another (a supervisor) gets the token through an inherited
//!   pipe whose descriptor `ORCH_TOKEN_FD` names, reads it to the end and closes it; its
//!   environment never had the token;
//! - every orch process is made non-dumpable (`main.rs`): its `/proc/<pid>/mem`, `environ`
//!   and `fd` are closed to other processes of the same user, and it cannot be ptraced.
//!
//! Workers and `git` get environments built from scratch. The strong boundary remains running
//! workers under another user than orch (ARCHITECTURE.md).

use crate::config::{Config, ForgeKind, MissingToken};
use crate::secret::Secret;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::Command;
use std::sync::{Mutex, OnceLock};

/// Names the inherited descriptor a parent orch process wrote the token to.
pub const TOKEN_FD_ENV: &str = "ORCH_TOKEN_FD";

/// What this process knows of the token, once read (`Ok(None)`: it had none; `Err`: why the
/// token file cannot be used).
static TOKEN: OnceLock<Mutex<Result<Option<Secret>, String>>> = OnceLock::new();

/// Reads the token where this process was given it, once, and wipes it from the environment.
/// Call it early (before starting any process) with the configured variable name and file.
pub fn capture(var: Option<&str>, file: Option<&std::path::Path>) {
    TOKEN.get_or_init(|| Mutex::new(read_token(var, file)));
}

/// The token in `path`: the file must be a regular file no other user can read (a token file
/// others can read is refused, as ssh refuses such a key).
fn read_file(path: &std::path::Path) -> Result<Option<Secret>, String> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot be read: {e}"))?;
    if !meta.is_file() {
        return Err("is not a regular file".into());
    }
    if meta.mode() & 0o077 != 0 {
        return Err(format!(
            "can be read by other users (mode {:o}): chmod 600 it",
            meta.mode() & 0o777
        ));
    }
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot be read: {e}"))?;
    let token = text.trim();
    if token.is_empty() {
        return Err("is empty".into());
    }
    Ok(Some(Secret::new(token.to_string())))
}

fn read_token(var: Option<&str>, file: Option<&std::path::Path>) -> Result<Option<Secret>, String> {
    if let Some(fd) = std::env::var(TOKEN_FD_ENV)
        .ok()
        .and_then(|v| v.parse::<i32>().ok())
    {
        // SAFETY: the variable is only ever set by `pass_to`, with a descriptor it made
        // inheritable for this process alone; it is taken here exactly once.
        let mut pipe = unsafe { std::fs::File::from_raw_fd(fd) };
        let mut text = String::new();
        let read = pipe.read_to_string(&mut text);
        drop(pipe);
        wipe_env(TOKEN_FD_ENV);
        if let Some(v) = var {
            wipe_env(v);
        }
        return Ok(read
            .ok()
            .filter(|_| !text.is_empty())
            .map(|_| Secret::new(text)));
    }
    if let Some(path) = file {
        return read_file(path);
    }
    let Some(var) = var else {
        return Ok(None);
    };
    let value = std::env::var(var).ok();
    wipe_env(var);
    Ok(value
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
        .map(Secret::new))
}

/// The forge token for `config`: `None` for the local forge (it needs none).
pub fn forge_token(config: &Config) -> Result<Option<Secret>, MissingToken> {
    let f = &config.forge;
    if f.kind != ForgeKind::Forgejo || (f.token_env.is_none() && f.token_file.is_none()) {
        return Ok(None);
    }
    capture(f.token_env.as_deref(), f.token_file.as_deref());
    let held = TOKEN
        .get()
        .and_then(|m| m.lock().ok().map(|t| t.clone()))
        .unwrap_or(Ok(None));
    match (held, &f.token_file, &f.token_env) {
        (Ok(Some(token)), _, _) => Ok(Some(token)),
        (Err(why), Some(path), _) => Err(MissingToken::File {
            path: path.clone(),
            file: config.file.clone(),
            why,
        }),
        (_, _, Some(var)) => Err(MissingToken::Unset {
            var: var.clone(),
            file: config.file.clone(),
        }),
        (_, Some(path), None) => Err(MissingToken::File {
            path: path.clone(),
            file: config.file.clone(),
            why: "holds no token".into(),
        }),
        (_, None, None) => Ok(None),
    }
}

/// Gives the token (if this process holds one) to the orch process `cmd` will start, through a
/// pipe it inherits; never through its environment. Call right before spawning; the returned
/// descriptor is the parent's copy of the read end, to drop once the child is started.
pub fn pass_to(cmd: &mut Command, config: &Config) -> std::io::Result<Option<OwnedFd>> {
    if let Some(var) = &config.forge.token_env {
        cmd.env_remove(var);
    }
    cmd.env_remove(TOKEN_FD_ENV);
    let Ok(Some(token)) = forge_token(config) else {
        return Ok(None);
    };
    // Both ends close on exec; the read end is made inheritable in the child alone, below.
    let (read, mut write) = std::io::pipe()?;
    // A token is far smaller than a pipe's buffer: the write never waits for the reader.
    std::io::Write::write_all(&mut write, token.expose().as_bytes())?;
    drop(write);
    let read = OwnedFd::from(read);
    let fd = read.as_raw_fd();
    cmd.env(TOKEN_FD_ENV, fd.to_string());
    // SAFETY: fcntl on a descriptor the child inherited; async-signal-safe, no allocation.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(cmd, move || {
            if libc::fcntl(fd, libc::F_SETFD, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Ok(Some(read))
}

/// Removes `var` from this process's environment, overwriting the entry in place first: the
/// original environment block (which `/proc/<pid>/environ` shows) keeps the bytes otherwise.
fn wipe_env(var: &str) {
    let prefix = format!("{var}=");
    // SAFETY: walks the C `environ` array of NUL-terminated strings and overwrites one entry's
    // bytes with zeros (its terminator stays), then removes the entry. Called while this
    // process starts, before other threads read the environment.
    unsafe {
        unsafe extern "C" {
            static mut environ: *mut *mut libc::c_char;
        }
        let mut found: Vec<(*mut libc::c_char, usize)> = Vec::new();
        let mut p = environ;
        while !p.is_null() && !(*p).is_null() {
            let bytes = std::ffi::CStr::from_ptr(*p).to_bytes();
            if bytes.starts_with(prefix.as_bytes()) {
                found.push((*p, bytes.len()));
            }
            p = p.add(1);
        }
        // Out of the environment first (unsetenv finds it by its name), then the bytes
        // zeroed, the name too: nothing tells a reader which variable held the token.
        std::env::remove_var(var);
        for (entry, len) in found {
            std::ptr::write_bytes(entry, 0, len);
        }
    }
}
