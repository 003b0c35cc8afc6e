//! Doorbells: how one orch process tells a live supervisor that something it waits for has
//! happened — a request in its inbox, a CI job of the local forge finished — so that an idle
//! supervisor sleeps instead of polling.
//!
//! A doorbell is a FIFO `<state dir>/wake/<worker id>`. Its supervisor makes it under a
//! temporary name, opens it, and only then renames it into place: a name in the directory is
//! always held open by its supervisor, until that process dies. Ringing writes one short line
//! without blocking (atomic: well under `PIPE_BUF`); a bell that nobody holds any more
//! (`ENXIO`) is stale and removed by the ringer. A full FIFO means the bell has rung already. A
//! ring carries nothing a supervisor trusts — it only says "look now", at most naming the
//! repository whose CI changed, so that supervisors of other repositories need not look — so a
//! lost ring costs latency, never correctness: supervisors still look on their own, slowly.
//! Processes that wait on their own (`Waiter`, `~wait.<pid>`) hear every ring; a `Progress`
//! ring goes to them alone.

use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// What a ring asks the supervisor to look at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ring {
    /// A request was queued in its inbox.
    Inbox,
    /// CI changed for this repository (a job of the local forge finished).
    Ci(String),
    /// A worker changed state or a chain lock was released: what a wave's next tick acts on
    /// (rung to waiters only: `orch wave run`, the demo).
    Progress,
}

impl Ring {
    fn line(&self) -> String {
        match self {
            Ring::Inbox => "i\n".into(),
            Ring::Ci(repo) => format!("c {repo}\n"),
            Ring::Progress => "p\n".into(),
        }
    }

    fn of(line: &str) -> Option<Ring> {
        match line.split_once(' ') {
            Some(("c", repo)) => Some(Ring::Ci(repo.to_string())),
            None if line == "i" => Some(Ring::Inbox),
            None if line == "p" => Some(Ring::Progress),
            _ => None,
        }
    }
}

/// The prefix of a waiter's bell (a `~` is in no worker id: not a git ref component).
const WAITER: &str = "~wait.";

/// The directory of doorbells.
pub fn dir(state_dir: &Path) -> PathBuf {
    state_dir.join("wake")
}

/// Rings the doorbell of `worker`'s supervisor, if it has one.
pub fn ring(state_dir: &Path, worker: &str, what: Ring) {
    ring_path(&dir(state_dir).join(worker), &what);
}

/// Rings every live supervisor's doorbell and every waiter's (a CI result may concern any
/// supervisor: the worker's push, a landing's base branch, a downstream check in another
/// repository; the ring names the repository), or, for `Progress`, the waiters' alone.
pub fn ring_all(state_dir: &Path, what: Ring) {
    let Ok(entries) = std::fs::read_dir(dir(state_dir)) else {
        return;
    };
    let waiters_only = what == Ring::Progress;
    for e in entries.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') || (waiters_only && !name.starts_with(WAITER)) {
            continue;
        }
        ring_path(&e.path(), &what);
    }
}

fn ring_path(path: &Path, what: &Ring) {
    let Ok(before) = std::fs::symlink_metadata(path) else {
        return;
    };
    if !before.file_type().is_fifo() {
        return;
    }
    match std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
    {
        // A full FIFO (EAGAIN) has rung already.
        Ok(mut f) => {
            let _ = f.write(what.line().as_bytes());
        }
        Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
            // Nobody holds it: its supervisor died. Removed unless a new supervisor put its
            // own in place meanwhile (a different inode).
            if std::fs::symlink_metadata(path).is_ok_and(|now| now.ino() == before.ino()) {
                let _ = std::fs::remove_file(path);
            }
        }
        Err(_) => {}
    }
}

/// A supervisor's doorbell, in place and held open.
pub struct Doorbell {
    path: PathBuf,
    file: File,
    ino: u64,
}

impl Doorbell {
    /// Makes `worker`'s doorbell (replacing a previous supervisor's).
    pub fn install(state_dir: &Path, worker: &str) -> std::io::Result<Doorbell> {
        let dir = dir(state_dir);
        std::fs::create_dir_all(&dir)?;
        let _ = std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o700));
        // The pid /proc shows: two processes in two workers' PID namespaces may share a local one.
        let tmp = dir.join(format!(".{}.{}", crate::pidns::host_pid(), worker));
        let _ = std::fs::remove_file(&tmp);
        let c = std::ffi::CString::new(tmp.as_os_str().as_encoded_bytes())
            .map_err(|_| std::io::Error::from(ErrorKind::InvalidInput))?;
        // SAFETY: a valid NUL-terminated path.
        if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // Read-write: the FIFO never reports end-of-file when no ringer has it open.
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_CLOEXEC)
            .open(&tmp)?;
        let ino = file.metadata()?.ino();
        let path = dir.join(worker);
        std::fs::rename(&tmp, &path)?;
        Ok(Doorbell { path, file, ino })
    }

    /// Hands every ring to `on_ring` on a thread of its own, until the process ends.
    pub fn listen(&self, mut on_ring: impl FnMut(Ring) + Send + 'static) -> std::io::Result<()> {
        let mut file = self.file.try_clone()?;
        std::thread::Builder::new()
            .name("doorbell".into())
            .spawn(move || {
                let mut buf = [0u8; 4096];
                // A line cut by a full FIFO (a write that did not fit) is dropped, not joined
                // with the next one: ringers never block, so a partial write is possible.
                let mut partial: Vec<u8> = Vec::new();
                loop {
                    match file.read(&mut buf) {
                        Ok(0) => return,
                        Ok(n) => {
                            partial.extend_from_slice(&buf[..n]);
                            let Some(end) = partial.iter().rposition(|&b| b == b'\n') else {
                                partial.truncate(256);
                                continue;
                            };
                            let complete: Vec<u8> = partial.drain(..=end).collect();
                            // A burst of rings is handed over once per kind (and repository).
                            let mut rung: Vec<Ring> = Vec::new();
                            for r in String::from_utf8_lossy(&complete)
                                .lines()
                                .filter_map(Ring::of)
                            {
                                if !rung.contains(&r) {
                                    rung.push(r);
                                }
                            }
                            for r in rung {
                                on_ring(r);
                            }
                        }
                        Err(e) if e.kind() == ErrorKind::Interrupted => {}
                        Err(_) => return,
                    }
                }
            })?;
        Ok(())
    }
}

/// A doorbell for a process that waits for CI on its own (`orch ci status --wait`): rung with
/// the supervisors' whenever CI changes, so that a result ends its wait at once.
pub struct Waiter {
    _bell: Doorbell,
    rx: std::sync::mpsc::Receiver<Ring>,
    tx: std::sync::mpsc::Sender<Ring>,
}

impl Waiter {
    /// `None` when no doorbell can be made (the caller then just sleeps).
    pub fn install(state_dir: &Path) -> Option<Waiter> {
        // `~` is not allowed in a worker id (a git ref component): no bell of a worker's.
        let bell =
            Doorbell::install(state_dir, &format!("{WAITER}{}", crate::pidns::host_pid())).ok()?;
        let (tx, rx) = std::sync::mpsc::channel();
        let ringer = tx.clone();
        bell.listen(move |r| {
            let _ = ringer.send(r);
        })
        .ok()?;
        Some(Waiter {
            _bell: bell,
            rx,
            tx,
        })
    }

    /// Also wakes on a chain lock released on any node: on a shared (PostgreSQL) store, a
    /// thread LISTENs on `store`, a connection of its own, and rings `Progress` for each
    /// release announced. The doorbell hears only this node's supervisors; the other nodes'
    /// releases reach it this way. SQLite announces nothing (one node: the doorbell hears all).
    pub fn hear_releases(&self, mut store: crate::store::Store) {
        if !store.announces_lock_releases() {
            return;
        }
        let tx = self.tx.clone();
        let _ = std::thread::Builder::new()
            .name("lock-releases".into())
            .spawn(move || {
                loop {
                    if store.wait_lock_released(std::time::Duration::from_secs(30))
                        && tx.send(Ring::Progress).is_err()
                    {
                        return; // the waiter is gone
                    }
                }
            });
    }

    /// Waits until a ring or `timeout`.
    pub fn wait(&self, timeout: std::time::Duration) {
        if self.rx.recv_timeout(timeout).is_ok() {
            while self.rx.try_recv().is_ok() {}
        }
    }
}

/// Waits up to `timeout` on `waiter`, or sleeps that long without one.
pub fn wait_or_sleep(waiter: Option<&Waiter>, timeout: std::time::Duration) {
    match waiter {
        Some(w) => w.wait(timeout),
        None => std::thread::sleep(timeout),
    }
}

impl Drop for Doorbell {
    fn drop(&mut self) {
        // Only our own: a supervisor that took the worker over may have put its bell there.
        if std::fs::symlink_metadata(&self.path).is_ok_and(|m| m.ino() == self.ino) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::channel;
    use std::time::Duration;

    #[test]
    fn a_ring_reaches_the_listener_and_a_dead_bell_is_removed() {
        let dir = tempfile::tempdir().unwrap();
        let bell = Doorbell::install(dir.path(), "w1").unwrap();
        let (tx, rx) = channel();
        bell.listen(move |r| {
            let _ = tx.send(r);
        })
        .unwrap();
        ring(dir.path(), "w1", Ring::Inbox);
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(Ring::Inbox));
        ring_all(dir.path(), Ring::Ci("vm".into()));
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(10)),
            Ok(Ring::Ci("vm".into()))
        );
        // Progress goes to waiters only.
        ring_all(dir.path(), Ring::Progress);
        let waiter = Waiter::install(dir.path()).unwrap();
        ring_all(dir.path(), Ring::Progress);
        waiter.wait(Duration::from_secs(10));
        assert!(
            rx.try_recv().is_err(),
            "a supervisor's bell is not rung for progress"
        );
        // Nobody's bell: ringing it is harmless.
        ring(dir.path(), "nobody", Ring::Inbox);
        // A bell whose holder is gone: a FIFO nobody has open.
        let stale = super::dir(dir.path()).join("w2");
        let c = std::ffi::CString::new(stale.as_os_str().as_encoded_bytes()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        ring_all(dir.path(), Ring::Ci("os".into()));
        assert!(!stale.exists(), "a stale bell is removed by its ringer");
        assert_eq!(
            rx.recv_timeout(Duration::from_secs(10)),
            Ok(Ring::Ci("os".into()))
        );
        // A replacement's bell is not removed by the one it replaced.
        let newer = Doorbell::install(dir.path(), "w1").unwrap();
        drop(bell);
        assert!(super::dir(dir.path()).join("w1").exists());
        drop(newer);
        assert!(!super::dir(dir.path()).join("w1").exists());
    }
}
