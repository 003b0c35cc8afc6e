//! The write queue of a SQLite store: every orch writer on a host takes its turn here before
//! `BEGIN IMMEDIATE`, so writers wait fairly and no stopped process holds them all for long.
//!
//! Why not SQLite's own wait: its busy handler sleeps between tries (1 ms growing to 100 ms),
//! so under many writers a waiter misses most moments the lock is free; with 200 spawns at once
//! one could wait past its 10 s and fail "database is busy" while others passed many times.
//! Here a waiter blocks in the kernel on an exclusive `flock` of `orch.db.writers` and is woken
//! the moment the holder lets go. SQLite's lock stays the one that makes writes exclusive
//! (a process outside orch, such as the `sqlite3` shell, does not queue here); the queue only
//! orders orch's writers, so its lock never decides correctness.
//!
//! Patience is time without progress, not time in the queue: each turn taken bumps a counter
//! in the file, and a waiter gives up ("busy") only when the counter stood still for its whole
//! patience. A long queue that moves refuses nobody.
//!
//! A holder that is stopped (SIGSTOP, ctrl-Z, a debugger) runs nothing until continued, and
//! every writer on the host would wait on it. The waiters look at a holder once the queue
//! stands still; an orch process stopped while holding the turn is ended once its bound is
//! reached ([`Judge`]: a supervisor once its lease lapsed — it has lost its worker then, and
//! the fence refuses whatever it would write — any other orch command after
//! [`STOPPED_BOUND`]). SIGKILL is the only signal a stopped process takes; its transaction rolls
//! back and its locks go with it. A stopped process that is not orch is named, never signalled.

use std::fs::File;
use std::os::fd::AsFd;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The queue file beside the database: `orch.db.writers`.
pub const SUFFIX: &str = ".writers";

/// How long an orch command other than a supervisor may stay stopped holding the turn before a
/// waiter ends it: long enough for a stop and continue by hand to pass unharmed, short
/// against the 10 s a person's command waits.
pub const STOPPED_BOUND: Duration = Duration::from_secs(3);

/// How often a waiter looks whether the queue moved.
const LOOK_EVERY: Duration = Duration::from_millis(250);

/// What a waiter may do about a stopped holder, decided by the store (which can read leases).
pub(super) enum Verdict {
    /// Not orch's: named in the error, never signalled.
    Foreign,
    /// An orch process that may be ended once stopped this long (from when it was first seen
    /// stopped), or at this instant, whichever is given.
    EndAfter(Duration),
    EndAt(Instant),
}

/// Judges a holder by its pid (and whether it is stopped); called only for a stopped holder.
pub(super) type Judge<'a> = dyn FnMut(i32) -> Verdict + 'a;

/// The turn of one writer: held until dropped (after its commit or rollback).
pub(super) struct Turn {
    file: Arc<File>,
}

impl Drop for Turn {
    fn drop(&mut self) {
        // Unlocking explicitly: the persistent descriptor stays open for the next turn.
        let _ = rustix::fs::flock(self.file.as_fd(), rustix::fs::FlockOperation::Unlock);
    }
}

/// Why no turn was had: the queue stood still for the whole patience.
#[derive(Debug)]
pub(super) struct Stalled {
    /// Who held the turn when the waiter gave up, as `pid N: command` (with "stopped").
    pub holder: Option<String>,
}

pub(super) struct WriteQueue {
    path: PathBuf,
    /// This store's own descriptor of the queue file: an uncontended turn is one `flock` on it.
    file: Arc<File>,
    inode: u64,
}

impl WriteQueue {
    /// Opens (creating, mode 0600) the queue file of database `db`.
    pub fn open(db: &Path) -> std::io::Result<WriteQueue> {
        let mut path = db.as_os_str().to_owned();
        path.push(SUFFIX);
        let path = PathBuf::from(path);
        let file = open(&path)?;
        let inode = file.metadata()?.ino();
        Ok(WriteQueue {
            path,
            file: Arc::new(file),
            inode,
        })
    }

    /// Waits for this writer's turn: at once when nobody holds it, else in the kernel until
    /// the holder lets go. Gives up when the queue did not move for `patience`; ends a stopped
    /// orch holder once `judge` says it may.
    pub fn take(&self, patience: Duration, judge: &mut Judge<'_>) -> Result<Turn, Stalled> {
        use rustix::fs::{FlockOperation, flock};
        if flock(self.file.as_fd(), FlockOperation::NonBlockingLockExclusive).is_ok() {
            return Ok(self.turn(self.file.clone()));
        }
        // Contended: a thread of its own blocks on a descriptor of its own (an abandoned wait
        // that is granted later must unlock only what it took), while this one watches the
        // queue move.
        let waiting = match open(&self.path) {
            Ok(f) => Arc::new(f),
            Err(_) => return self.poll_take(patience, judge),
        };
        let slot = Arc::new((Mutex::new(Slot::Waiting), Condvar::new()));
        {
            let slot = slot.clone();
            let file = waiting.clone();
            let spawned = std::thread::Builder::new()
                .name("orch-write-queue".into())
                .spawn(move || {
                    let got = loop {
                        match flock(file.as_fd(), FlockOperation::LockExclusive) {
                            Err(rustix::io::Errno::INTR) => continue,
                            r => break r.is_ok(),
                        }
                    };
                    let (state, bell) = &*slot;
                    let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
                    if matches!(*state, Slot::Abandoned) || !got {
                        let _ = flock(file.as_fd(), FlockOperation::Unlock);
                        *state = Slot::Failed;
                    } else {
                        *state = Slot::Granted;
                    }
                    bell.notify_all();
                });
            if spawned.is_err() {
                return self.poll_take(patience, judge);
            }
        }
        let (state, bell) = &*slot;
        let mut watch = Watch::new(self, patience);
        let mut guard = state.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            match *guard {
                Slot::Granted => return Ok(self.turn(waiting)),
                Slot::Failed => {
                    drop(guard);
                    return self.poll_take(patience, judge);
                }
                _ => {}
            }
            let (g, _) = bell
                .wait_timeout(guard, LOOK_EVERY)
                .unwrap_or_else(|e| e.into_inner());
            guard = g;
            if matches!(*guard, Slot::Waiting) {
                drop(guard);
                let verdict = watch.look(judge);
                guard = state.lock().unwrap_or_else(|e| e.into_inner());
                if let Err(stalled) = verdict
                    && matches!(*guard, Slot::Waiting)
                {
                    *guard = Slot::Abandoned;
                    return Err(stalled);
                }
            }
        }
    }

    /// The turn without a waiting thread (none could be made): tries every few milliseconds.
    fn poll_take(&self, patience: Duration, judge: &mut Judge<'_>) -> Result<Turn, Stalled> {
        use rustix::fs::{FlockOperation, flock};
        let mut watch = Watch::new(self, patience);
        let mut next_look = Instant::now() + LOOK_EVERY;
        loop {
            if flock(self.file.as_fd(), FlockOperation::NonBlockingLockExclusive).is_ok() {
                return Ok(self.turn(self.file.clone()));
            }
            std::thread::sleep(Duration::from_millis(5));
            if Instant::now() >= next_look {
                next_look = Instant::now() + LOOK_EVERY;
                watch.look(judge)?;
            }
        }
    }

    /// A turn taken: the counter moves, so that waiters see progress.
    fn turn(&self, file: Arc<File>) -> Turn {
        let n = read_counter(&file).wrapping_add(1);
        let _ = file.write_at(&n.to_le_bytes(), 0);
        Turn { file }
    }

    /// The pid holding the turn now, from `/proc/locks` (a pid written in the file could be
    /// stale or forged; the kernel's table is neither).
    fn holder(&self) -> Option<i32> {
        let text = std::fs::read_to_string("/proc/locks").ok()?;
        holder_in(&text, self.inode)
    }
}

enum Slot {
    Waiting,
    Granted,
    Abandoned,
    Failed,
}

/// A waiter's view of the queue: whether it moved, and for how long its holder was stopped.
struct Watch<'q> {
    queue: &'q WriteQueue,
    patience: Duration,
    counter: u64,
    moved_at: Instant,
    /// (pid, when first seen stopped) of a stopped holder.
    stopped: Option<(i32, Instant)>,
}

impl<'q> Watch<'q> {
    fn new(queue: &'q WriteQueue, patience: Duration) -> Watch<'q> {
        Watch {
            queue,
            patience,
            counter: read_counter(&queue.file),
            moved_at: Instant::now(),
            stopped: None,
        }
    }

    /// One look: `Err` when the queue stood still for the whole patience and its holder is
    /// not one that will be ended.
    fn look(&mut self, judge: &mut Judge<'_>) -> Result<(), Stalled> {
        let now = Instant::now();
        let counter = read_counter(&self.queue.file);
        if counter != self.counter {
            self.counter = counter;
            self.moved_at = now;
            self.stopped = None;
            return Ok(());
        }
        let holder = self.queue.holder();
        let stopped = holder.filter(|pid| super::health::stopped(*pid));
        let mut ends_at = None;
        match stopped {
            Some(pid) => {
                let since = match self.stopped {
                    Some((p, since)) if p == pid => since,
                    _ => {
                        self.stopped = Some((pid, now));
                        now
                    }
                };
                ends_at = match judge(pid) {
                    Verdict::Foreign => None,
                    Verdict::EndAfter(bound) => Some(since + bound),
                    Verdict::EndAt(at) => Some(at),
                };
                // Read again: the judge's own reads take time, and `EndAt` may be "now".
                if let Some(at) = ends_at
                    && Instant::now() >= at
                {
                    end(pid);
                    self.moved_at = Instant::now();
                    self.stopped = None;
                    return Ok(());
                }
            }
            None => self.stopped = None,
        }
        // A holder that will be ended is a queue that will move: wait for it.
        if ends_at.is_none() && now.duration_since(self.moved_at) >= self.patience {
            return Err(Stalled {
                holder: holder.map(describe),
            });
        }
        Ok(())
    }
}

/// Ends a stopped orch process that holds the turn, and waits (bounded) until it is gone, so
/// that its locks are free when the waiter looks again.
fn end(pid: i32) {
    let start = crate::process::proc_stat(pid).map(|s| s.start_ticks);
    tracing::warn!(
        pid,
        command = %super::health::command_of(pid),
        "an orch process stopped while holding the database's write turn past its bound: ending it (SIGKILL); its transaction rolls back"
    );
    // SAFETY: a signal to the process the kernel's lock table names as holding the turn, seen
    // stopped just now (judged by the caller as an orch process past its bound).
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let gone = Instant::now() + Duration::from_secs(10);
    while crate::process::process_alive(pid, start) && Instant::now() < gone {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The pid holding the write turn of database `db` now, if any (for `orch` diagnostics and
/// the tests that stop a writer inside its turn).
pub fn holder_of(db: &Path) -> Option<i32> {
    let mut path = db.as_os_str().to_owned();
    path.push(SUFFIX);
    let inode = std::fs::metadata(path).ok()?.ino();
    holder_in(&std::fs::read_to_string("/proc/locks").ok()?, inode)
}

fn describe(pid: i32) -> String {
    let cmd = super::health::command_of(pid);
    let cmd = crate::text::escape(&cmd);
    let stopped = if super::health::stopped(pid) {
        ", stopped"
    } else {
        ""
    };
    format!("pid {pid} (holding orch's write turn{stopped}): {cmd}")
}

fn open(path: &Path) -> std::io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        // The state directory is orch's own: a link put there is not followed.
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

fn read_counter(file: &File) -> u64 {
    let mut b = [0u8; 8];
    match file.read_at(&mut b, 0) {
        Ok(8) => u64::from_le_bytes(b),
        _ => 0,
    }
}

/// The pid of the granted exclusive `flock` on inode `inode` in `/proc/locks` text (pure).
/// Lines look like `3: FLOCK  ADVISORY  WRITE 4242 fe:00:1234 0 EOF`; a waiter's line has
/// `->` after the number and is skipped.
pub(super) fn holder_in(text: &str, inode: u64) -> Option<i32> {
    text.lines().find_map(|line| {
        let mut it = line.split_whitespace().skip(1);
        if it.next()? != "FLOCK" {
            return None;
        }
        let _advisory = it.next()?;
        if it.next()? != "WRITE" {
            return None;
        }
        let pid: i32 = it.next()?.parse().ok()?;
        let (_, ino) = it.next()?.rsplit_once(':')?;
        (ino.parse::<u64>().ok()? == inode).then_some(pid)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn the_holder_is_read_from_the_kernels_lock_table() {
        let text = "1: FLOCK  ADVISORY  WRITE 4242 fe:00:77 0 EOF\n\
                    1: -> FLOCK  ADVISORY  WRITE 4343 fe:00:77 0 EOF\n\
                    2: POSIX  ADVISORY  WRITE 99 fe:00:77 0 EOF\n\
                    3: FLOCK  ADVISORY  WRITE 5151 fe:00:78 0 EOF\n";
        assert_eq!(holder_in(text, 77), Some(4242));
        assert_eq!(holder_in(text, 78), Some(5151));
        assert_eq!(holder_in(text, 79), None);
    }

    fn never(_: i32) -> Verdict {
        Verdict::Foreign
    }

    /// Many writers whose patience is far shorter than the whole queue: nobody is refused
    /// while the queue moves, and no two hold a turn at once.
    #[test]
    fn a_moving_queue_refuses_nobody_and_grants_one_turn_at_a_time() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("orch.db");
        let inside = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..24)
            .map(|_| {
                let db = db.clone();
                let inside = inside.clone();
                std::thread::spawn(move || {
                    let q = WriteQueue::open(&db).unwrap();
                    for _ in 0..10 {
                        let turn = q
                            .take(Duration::from_millis(300), &mut never)
                            .expect("a moving queue refuses nobody");
                        assert_eq!(inside.fetch_add(1, Ordering::SeqCst), 0, "two turns");
                        std::thread::sleep(Duration::from_millis(2));
                        inside.fetch_sub(1, Ordering::SeqCst);
                        drop(turn);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        // 240 turns, each one counted.
        let q = WriteQueue::open(&db).unwrap();
        assert_eq!(read_counter(&q.file), 240);
    }

    /// A holder that never lets go: the waiter gives up after its patience, naming the holder
    /// (this process: the kernel's table names it), and its abandoned wait takes nothing later.
    #[test]
    fn a_queue_that_stands_still_gives_up_after_the_patience_naming_its_holder() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("orch.db");
        let holder = WriteQueue::open(&db).unwrap();
        let turn = holder.take(Duration::from_secs(1), &mut never).unwrap();
        let waiter = WriteQueue::open(&db).unwrap();
        let t0 = Instant::now();
        let stalled = match waiter.take(Duration::from_millis(600), &mut never) {
            Err(s) => s,
            Ok(_) => panic!("a turn while another holds it"),
        };
        assert!(t0.elapsed() >= Duration::from_millis(600));
        let me = std::process::id();
        assert!(
            stalled
                .holder
                .as_deref()
                .is_some_and(|h| h.starts_with(&format!("pid {me} "))),
            "{stalled:?}"
        );
        drop(turn);
        // The abandoned wait's thread is granted the turn now and gives it back at once.
        let again = waiter.take(Duration::from_secs(5), &mut never);
        assert!(again.is_ok(), "the abandoned wait kept the turn");
    }
}
