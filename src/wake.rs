//! Doorbells: how one orch process tells a live supervisor that something it waits for has
//! happened — a request in its inbox, a CI job of the local forge finished — so that an idle
//! supervisor sleeps instead of polling.
//!
//! A doorbell is a FIFO `<state dir>/wake/<worker id>`. Its supervisor makes it under a
//! temporary name, opens it, and only then renames it into place: a name in the directory is
//! always held open by its supervisor, until that process dies. Ringing writes one byte without
//! blocking; a bell that nobody holds any more (`ENXIO`) is stale and removed by the ringer. A
//! full FIFO means the bell has rung already. A ring carries no data a supervisor trusts — it
//! only says "look now" — so a lost ring costs latency, never correctness: supervisors still
//! look on their own, slowly.

use std::fs::File;
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// What a ring asks the supervisor to look at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ring {
    /// A request was queued in its inbox.
    Inbox,
    /// CI changed somewhere (a job of the local forge finished).
    Ci,
    /// A worker changed state or a chain lock was released: what a wave's next tick acts on
    /// (supervisors ignore it; `orch wave run` and the demo wait for it).
    Progress,
}

impl Ring {
    fn byte(self) -> u8 {
        match self {
            Ring::Inbox => b'i',
            Ring::Ci => b'c',
            Ring::Progress => b'p',
        }
    }

    fn of(b: u8) -> Option<Ring> {
        match b {
            b'i' => Some(Ring::Inbox),
            b'c' => Some(Ring::Ci),
            b'p' => Some(Ring::Progress),
            _ => None,
        }
    }
}

/// The directory of doorbells.
pub fn dir(state_dir: &Path) -> PathBuf {
    state_dir.join("wake")
}

/// Rings the doorbell of `worker`'s supervisor, if it has one.
pub fn ring(state_dir: &Path, worker: &str, what: Ring) {
    ring_path(&dir(state_dir).join(worker), what);
}

/// Rings every live supervisor's doorbell (a CI result may concern any of them: the worker's
/// push, a landing's base branch, a downstream check in another repository).
pub fn ring_all(state_dir: &Path, what: Ring) {
    let Ok(entries) = std::fs::read_dir(dir(state_dir)) else {
        return;
    };
    for e in entries.flatten() {
        if !e.file_name().to_string_lossy().starts_with('.') {
            ring_path(&e.path(), what);
        }
    }
}

fn ring_path(path: &Path, what: Ring) {
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
            let _ = f.write(&[what.byte()]);
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
        let tmp = dir.join(format!(".{}.{}", std::process::id(), worker));
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
                let mut buf = [0u8; 64];
                loop {
                    match file.read(&mut buf) {
                        Ok(0) => return,
                        Ok(n) => {
                            // A burst of rings is handed over once per kind.
                            let mut rung = Vec::with_capacity(3);
                            for r in buf[..n].iter().filter_map(|&b| Ring::of(b)) {
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
}

impl Waiter {
    /// `None` when no doorbell can be made (the caller then just sleeps).
    pub fn install(state_dir: &Path) -> Option<Waiter> {
        // `~` is not allowed in a worker id (a git ref component): no bell of a worker's.
        let bell = Doorbell::install(state_dir, &format!("~wait.{}", std::process::id())).ok()?;
        let (tx, rx) = std::sync::mpsc::channel();
        bell.listen(move |r| {
            let _ = tx.send(r);
        })
        .ok()?;
        Some(Waiter { _bell: bell, rx })
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
        ring_all(dir.path(), Ring::Ci);
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(Ring::Ci));
        // Nobody's bell: ringing it is harmless.
        ring(dir.path(), "nobody", Ring::Inbox);
        // A bell whose holder is gone: a FIFO nobody has open.
        let stale = super::dir(dir.path()).join("w2");
        let c = std::ffi::CString::new(stale.as_os_str().as_encoded_bytes()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        ring_all(dir.path(), Ring::Ci);
        assert!(!stale.exists(), "a stale bell is removed by its ringer");
        assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(Ring::Ci));
        // A replacement's bell is not removed by the one it replaced.
        let newer = Doorbell::install(dir.path(), "w1").unwrap();
        drop(bell);
        assert!(super::dir(dir.path()).join("w1").exists());
        drop(newer);
        assert!(!super::dir(dir.path()).join("w1").exists());
    }
}
