//! The state store — SQLite in the state directory, or PostgreSQL shared by several nodes — the
//! one source of truth.
//!
//! Every state change is one transaction. Files under `sessions/` (checkpoints, alerts.jsonl)
//! are views written after the commit. Writers take the write lock first (SQLite's `BEGIN IMMEDIATE`, PostgreSQL's advisory lock) so that two processes
//! can never both pass a check-then-write (the chain lock depends on this).
//!
//! One SQL surface, two backends: `sql.rs` is what every store module (and `forge/local/db.rs`)
//! writes against — `Tx`, statements, rows, `params!`, shaped like rusqlite's; `Value` and `Error`
//! in `value.rs`, which `pg.rs` imports — and the same SQL runs on both, written in what both
//! accept (`RETURNING`, `ON CONFLICT DO NOTHING`, `IS NOT DISTINCT FROM`). [`Store`] is SQLite —
//! opened 0600, WAL, busy timeout 10 s for commands and 30 s for supervisors, orch's writers
//! queued by `write_queue.rs` — or PostgreSQL (`open_url`, `open_postgres`; `pg.rs`: a released
//! chain lock NOTIFYed, `Store::wait_lock_released` LISTENs, while SQLite's waiters poll).
//! `open(state_dir)` follows the state directory's pointer (`location.rs`: `store:` of
//! repos.yaml, validated, left as `store.json` — the URL without a password and the names of the
//! variables that complete it). Write transactions take the write lock first on both; errors are
//! classified: busy, damaged, no space, too new, fenced. `schema.rs` holds both backends'
//! migrations at one version number; `conformance.rs` (tests only) runs each store test on a
//! fresh store of each backend (PostgreSQL at `ORCH_TEST_PG_URL`, skipped aloud without it).
//! The rest is one file per table family: `locks.rs`, `workers.rs` (workers, leases, the inbox,
//! pushes), `alerts.rs` (de-duplication, resolution, the delivery outbox), `history.rs`
//! (retention), `upstream.rs` (cascade rows and poll claims), `nodes.rs` (heartbeats, a node's lock
//! holders), `waves.rs` (waves, tasks, `wave_ticks`), `supersede.rs`, `fatal.rs`, `usage.rs`
//! (spend, conversation ids, rate limits), `board.rs` (the board's aggregates, `data_version`).
//!
//! **The store is the truth** (ARCHITECTURE.md, invariant 3). A truth that cannot be read or
//! written is said, never worked around: a damaged file is refused by every command and stops
//! every supervisor on it; a write refused by the file system (ENOSPC, EROFS) stops the
//! supervisor's worker (`supervisor/storage.rs`), alerted to the sinks directly, the lock kept for
//! `orch resume`, which records the stop the supervisor noted if it could not
//! (`app/storage_note.rs`). No process holding a connection opens and closes the database file
//! itself (that drops its POSIX locks, and an outside `sqlite3` would then delete the WAL under
//! it): `health.rs` reads the header through a descriptor kept for the process's life
//! (`outside_reader::` in the integration tests).

pub mod alerts;
pub mod board;
#[cfg(test)]
pub(crate) mod conformance;
pub mod fatal;
pub mod health;
pub mod history;
pub mod location;
mod locks;
pub mod nodes;
pub mod pg;
mod schema;
pub mod sql;
pub mod supersede;
pub mod upstream;
pub mod usage;
mod value;
pub mod waves;
pub mod workers;
pub mod write_queue;

pub use locks::{
    ActiveLocks, LockAttempt, LockHistoryEntry, LockRow, active_locks, first_conflict, holds_lock,
    last_lock_action, live_without_their_lock, release_in, retake_in, set_writer_pid, try_lock_in,
    worker_lock_count,
};

use rusqlite::{Connection, OpenFlags, TransactionBehavior};
use sql::Tx;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long a command waits for another process's transaction before it says the database
/// is busy (override with `ORCH_DB_BUSY_TIMEOUT`, e.g. "5s"): a person waits on it.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a supervisor waits ([`Store::patient`]): it has no one waiting on it, and giving
/// up costs a retry of its bookkeeping (it logs that it waits this long).
pub const SUPERVISOR_BUSY_TIMEOUT: Duration = Duration::from_secs(30);

fn busy_timeout() -> Duration {
    std::env::var("ORCH_DB_BUSY_TIMEOUT")
        .ok()
        .and_then(|v| crate::duration::parse(&v).ok())
        .unwrap_or(BUSY_TIMEOUT)
}

pub const DB_FILE: &str = "orch.db";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot create state directory {path}: {source}")]
    StateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot open database {path}: {source}")]
    Open { path: PathBuf, source: sql::Error },
    /// The state directory names a PostgreSQL store this process cannot complete (a variable
    /// unset) or repos.yaml and the state directory disagree.
    #[error(transparent)]
    Location(#[from] location::LocationError),
    #[error(
        "database {path} is busy: locked by another process for {} ({}); retry once it is done",
        crate::duration::format(*waited),
        if holders.is_empty() { format!("holder unknown: fuser {}", path.display()) } else { format!("held by {}", holders.join("; ")) }
    )]
    Locked {
        path: PathBuf,
        waited: Duration,
        /// Who holds its locks (`health::holders`), writers first.
        holders: Vec<String>,
    },
    #[error(
        "database {path} is damaged: {why}. Nothing was changed. Once no orch process has it open, `orch resume --from-checkpoints` rebuilds it from sessions/*.checkpoint.yaml{}",
        if holders.is_empty() { String::new() } else { format!(" (open now in {})", holders.join("; ")) }
    )]
    Damaged {
        path: PathBuf,
        why: String,
        holders: Vec<String>,
    },
    /// The file system refused a write: full (ENOSPC) or read-only (EROFS).
    #[error("{} writing {path} ({errno})", errno_words(errno))]
    NoSpace { path: PathBuf, errno: &'static str },
    #[error(
        "database {path} is unreadable or not an orch database ({source}); `orch resume --from-checkpoints` rebuilds it from sessions/*.checkpoint.yaml"
    )]
    Corrupt { path: PathBuf, source: sql::Error },
    #[error(
        "database {path} has schema version {found}, newer than this orch understands ({known}); upgrade orch"
    )]
    TooNew {
        path: PathBuf,
        found: i64,
        known: i64,
    },
    #[error("database {path}: {source}")]
    Sql { path: PathBuf, source: sql::Error },
    /// A write of a supervisor whose lease was taken again since its claim ([`Store::fence`]):
    /// nothing was written.
    #[error(
        "worker {worker}: this process's lease (fencing token {fence}) was taken over{}; nothing was written",
        match now { Some(n) => format!(" (the token is {n} now)"), None => " (the worker is gone)".to_string() }
    )]
    Fenced {
        worker: String,
        fence: i64,
        now: Option<i64>,
    },
}

impl StoreError {
    /// A shared database that cannot be reached now (restarting, unreachable, the session
    /// dropped): a process with no one waiting on it (a CI runner, a supervisor) waits it out.
    pub fn is_unreachable(&self) -> bool {
        match self {
            // Opening a PostgreSQL store fails only by reaching it (or by credentials, which
            // waiting does not mend but costs no more than the patience).
            StoreError::Open {
                source: sql::Error::Pg(_),
                ..
            } => true,
            StoreError::Sql { source, .. } => source.is_connection_lost(),
            _ => false,
        }
    }

    /// Runs `op` until it succeeds, fails otherwise than by an unreachable database
    /// ([`StoreError::is_unreachable`]), or `patience` has passed since the first attempt (one
    /// that hung before it failed counts too; a session's attempts are bounded by its
    /// timeouts, see `pg::PgConn`).
    pub fn outlast<T>(
        patience: Duration,
        mut op: impl FnMut() -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let first = std::time::Instant::now();
        loop {
            match op() {
                Err(e) if e.is_unreachable() => {
                    if first.elapsed() >= patience {
                        return Err(e);
                    }
                    tracing::warn!(error = %e, "the database is unreachable; waiting for it");
                    std::thread::sleep(Duration::from_millis(500));
                }
                r => return r,
            }
        }
    }
}

/// The `store_meta` key set when `orch resume --from-checkpoints` rebuilt the database.
pub const REBUILT_META: &str = "rebuilt_from_checkpoints_ms";

/// The `store_meta` key set when `orch gc` last pruned workers from the history.
pub const PRUNED_META: &str = "history_pruned_ms";

/// A value of `store_meta` (small watermarks), if set.
pub fn meta(tx: &Tx, key: &str) -> sql::Result<Option<i64>> {
    use sql::OptionalExtension;
    tx.prepare_cached("SELECT value FROM store_meta WHERE key = ?1")?
        .query_row([key], |r| r.get(0))
        .optional()
}

pub fn set_meta(tx: &Tx, key: &str, value: i64) -> sql::Result<()> {
    tx.prepare_cached(
        "INSERT INTO store_meta (key, value) VALUES (?1, ?2)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
    )?
    .execute(sql::params![key, value])?;
    Ok(())
}

pub struct Store {
    backend: Backend,
    path: PathBuf,
    waits: Duration,
    /// `alerts.dedup_window` of the configuration in use (the journal de-duplicates with it).
    alert_window: Duration,
    /// The worker lease this store writes under, and its fencing token ([`Store::fence`]).
    fence: Option<(String, i64)>,
    /// A write was refused: the lease is someone else's now.
    fence_lost: bool,
    /// The state directory it was opened for (`Store::open`): where this node's doorbells
    /// ring. `None` for a database opened by its URL alone.
    state_dir: Option<PathBuf>,
    /// Where orch's writers of a SQLite file take turns ([`write_queue`]); PostgreSQL queues
    /// its lock waiters itself.
    queue: Option<write_queue::WriteQueue>,
}

/// True when orch has kept state for `state_dir`: its SQLite file, or a pointer to a shared
/// database. Read-only commands and the board open a store only then (they create nothing).
pub fn has_state(state_dir: &Path) -> bool {
    state_dir.join(DB_FILE).exists() || state_dir.join(location::POINTER_FILE).exists()
}

impl Store {
    /// Opens the store of `state_dir` and brings its schema up to date: the PostgreSQL
    /// database its pointer names ([`location`]), or else `<state_dir>/orch.db`, created if
    /// needed.
    pub fn open(state_dir: &Path) -> Result<Store, StoreError> {
        let mut store = match location::pointer(state_dir)? {
            Some(pointer) => Store::open_postgres(&pointer)?,
            None => Store::open_sqlite(state_dir)?,
        };
        store.state_dir = Some(state_dir.to_path_buf());
        Ok(store)
    }

    /// [`Store::open`] after pointing `state_dir` at `store` (repos.yaml's `store:` section):
    /// what a command that writes must use when it may be the first to run on this node — an
    /// `orch hold` there would otherwise take its hold in an empty SQLite file no other node
    /// reads.
    pub fn open_settled(
        state_dir: &Path,
        store: Option<&location::StoreConfig>,
    ) -> Result<Store, StoreError> {
        location::settle(state_dir, store)?;
        Store::open(state_dir)
    }

    /// The state directory this store was opened for, if it was (see [`Store::open`]).
    pub fn state_dir(&self) -> Option<&Path> {
        self.state_dir.as_deref()
    }

    /// The PostgreSQL database of a `store:` section, its secrets from this process's
    /// environment.
    pub fn open_postgres(config: &location::StoreConfig) -> Result<Store, StoreError> {
        let mut store = Store::connect_postgres(config)?;
        schema::migrate(&mut store)?;
        Ok(store)
    }

    /// `orch check`: connects to a `store:` section's database without changing it, and
    /// returns its schema version and the one this orch writes.
    pub fn probe_postgres(config: &location::StoreConfig) -> Result<(i64, i64), StoreError> {
        let mut store = Store::connect_postgres(config)?;
        Ok((store.read(schema::version)?, schema::LATEST))
    }

    fn connect_postgres(config: &location::StoreConfig) -> Result<Store, StoreError> {
        let settings = config.resolve()?;
        let path = PathBuf::from(config.shown());
        let waits = busy_timeout();
        let conn = pg::PgConn::connect_with(&settings, None)
            .and_then(|mut c| c.set_lock_timeout(waits).map(|()| c))
            .map_err(|source| StoreError::Open {
                path: path.clone(),
                source,
            })?;
        Ok(Store {
            backend: Backend::Pg(Box::new(conn)),
            path,
            waits,
            alert_window: crate::config::DEDUP_WINDOW,
            fence: None,
            fence_lost: false,
            state_dir: None,
            queue: None,
        })
    }

    /// Opens (creating if needed) `<state_dir>/orch.db` and brings its schema up to date.
    pub fn open_sqlite(state_dir: &Path) -> Result<Store, StoreError> {
        ensure_private_dir(state_dir)?;
        let path = state_dir.join(DB_FILE);
        // A damaged file is named before SQLite reads it: an emptied one would open as a valid
        // empty database (or wait on the locks of the processes that still have it open).
        if let Ok(Some(facts)) = health::facts(&path)
            && let Some(why) = health::damage(&facts)
        {
            return Err(StoreError::Damaged {
                holders: health::holders(&path),
                path,
                why,
            });
        }
        create_private_file(&path).map_err(|source| match errno_name(&source) {
            Some(errno) => StoreError::NoSpace {
                path: path.clone(),
                errno,
            },
            None => StoreError::StateDir {
                path: path.clone(),
                source,
            },
        })?;
        let queue =
            write_queue::WriteQueue::open(&path).map_err(|source| match errno_name(&source) {
                Some(errno) => StoreError::NoSpace {
                    path: path.clone(),
                    errno,
                },
                None => StoreError::StateDir {
                    path: path.clone(),
                    source,
                },
            })?;
        let conn = Connection::open_with_flags(
            &path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|source| StoreError::Open {
            path: path.clone(),
            source: source.into(),
        })?;
        let mut store = Store {
            backend: Backend::Sqlite(conn),
            path,
            waits: busy_timeout(),
            alert_window: crate::config::DEDUP_WINDOW,
            fence: None,
            fence_lost: false,
            state_dir: None,
            queue: Some(queue),
        };
        store.configure()?;
        schema::migrate(&mut store)?;
        Ok(store)
    }

    /// Connects to the PostgreSQL database at `url` and brings its schema up to date. Errors
    /// name the URL without its password.
    pub fn open_url(url: &str) -> Result<Store, StoreError> {
        Store::open_pg(url, None)
    }

    /// [`Store::open_url`] with every name resolved in `schema` (a test's own).
    pub fn open_pg(url: &str, schema: Option<&str>) -> Result<Store, StoreError> {
        let path = PathBuf::from(pg::redact(url));
        let waits = busy_timeout();
        let conn = pg::PgConn::connect(url, schema)
            .and_then(|mut c| c.set_lock_timeout(waits).map(|()| c))
            .map_err(|source| StoreError::Open {
                path: path.clone(),
                source,
            })?;
        let mut store = Store {
            backend: Backend::Pg(Box::new(conn)),
            path,
            waits,
            alert_window: crate::config::DEDUP_WINDOW,
            fence: None,
            fence_lost: false,
            state_dir: None,
            queue: None,
        };
        schema::migrate(&mut store)?;
        Ok(store)
    }

    /// Which database this store is on ("sqlite", "postgresql"): for display only. What
    /// callers decide by asks the capabilities below, named by what they mean.
    pub fn backend(&self) -> &'static str {
        match self.backend {
            Backend::Sqlite(_) => "sqlite",
            Backend::Pg(_) => "postgresql",
        }
    }

    /// Whether other nodes read and write this database too (PostgreSQL): what this node's
    /// files hold (checkpoints, holds) is then only its own view of it.
    pub fn shared_across_nodes(&self) -> bool {
        matches!(self.backend, Backend::Pg(_))
    }

    /// Whether a chain lock released anywhere is announced to [`Store::wait_lock_released`]
    /// (PostgreSQL's LISTEN/NOTIFY). A store that announces nothing (SQLite: one node, whose
    /// doorbells hear every release) only lets the wait time out.
    pub fn announces_lock_releases(&self) -> bool {
        matches!(self.backend, Backend::Pg(_))
    }

    /// The file on this host the database lives in, whose damage orch can read itself
    /// (`health`): SQLite's. `None` for a database a server keeps (its errors come as errors).
    pub fn database_file(&self) -> Option<&Path> {
        match self.backend {
            Backend::Sqlite(_) => Some(&self.path),
            Backend::Pg(_) => None,
        }
    }

    /// The database file (SQLite) or the URL without its password (PostgreSQL).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The same alert within this window is recorded once (`alerts.dedup_window`).
    pub fn with_alert_window(mut self, window: Duration) -> Store {
        self.alert_window = window;
        self
    }

    pub fn alert_window(&self) -> Duration {
        self.alert_window
    }

    /// A store that waits [`SUPERVISOR_BUSY_TIMEOUT`] for a busy database (a supervisor's).
    pub fn patient(mut self) -> Store {
        self.waits = SUPERVISOR_BUSY_TIMEOUT.max(busy_timeout());
        match &mut self.backend {
            Backend::Sqlite(c) => {
                let _ = c.busy_timeout(self.waits);
            }
            Backend::Pg(c) => {
                let _ = c.set_lock_timeout(self.waits);
            }
        }
        self
    }

    /// How long this store waits for a busy database.
    pub fn waits(&self) -> Duration {
        self.waits
    }

    fn configure(&mut self) -> Result<(), StoreError> {
        let timeout = self.waits;
        let r = match &mut self.backend {
            Backend::Sqlite(conn) => configure_sqlite(conn, timeout),
            Backend::Pg(_) => Ok(()),
        };
        r.map_err(|e| self.classify(e))
    }

    /// Maps a store error to what it means for the operator: busy (with who holds it),
    /// damaged (with what the file shows), a full or read-only file system (the OS error
    /// SQLite saw), or the error itself.
    pub(crate) fn classify(&mut self, e: impl Into<sql::Error>) -> StoreError {
        let e = e.into();
        if let Backend::Pg(c) = &mut self.backend {
            c.failed();
        }
        let errno = match &self.backend {
            // SAFETY: the handle is this store's open connection; the call only reads its errno.
            Backend::Sqlite(c) => unsafe { rusqlite::ffi::sqlite3_system_errno(c.handle()) },
            Backend::Pg(_) => 0,
        };
        if let Backend::Pg(_) = self.backend {
            return match classify(&self.path, e, errno) {
                StoreError::Locked { path, .. } => StoreError::Locked {
                    path,
                    waited: self.waits,
                    holders: vec![format!(
                        "another orch writer (advisory lock {:#x}: see pg_locks)",
                        pg::WRITE_LOCK
                    )],
                },
                other => other,
            };
        }
        match classify(&self.path, e, errno) {
            StoreError::Locked { path, holders, .. } if holders.is_empty() => StoreError::Locked {
                holders: health::holders(&path),
                waited: self.waits,
                path,
            },
            StoreError::Locked { path, holders, .. } => StoreError::Locked {
                holders,
                waited: self.waits,
                path,
            },
            StoreError::Corrupt { path, source } => {
                match health::facts(&path)
                    .ok()
                    .flatten()
                    .and_then(|f| health::damage(&f))
                {
                    Some(why) => StoreError::Damaged {
                        holders: health::holders(&path),
                        path,
                        why,
                    },
                    None => StoreError::Corrupt { path, source },
                }
            }
            other => other,
        }
    }

    /// Makes every write of this store carry the fencing token `token` of worker `id`'s
    /// lease: the transaction checks first that the lease was not taken again since, and
    /// writes nothing when it was ([`StoreError::Fenced`]). A supervisor's own connection:
    /// one paused, partitioned or slow past its lease can change nothing once another process
    /// holds the worker.
    pub fn fence(&mut self, id: &str, token: i64) {
        self.fence = Some((id.to_string(), token));
        self.fence_lost = false;
    }

    /// Waits until a chain lock may have been released, at most `timeout`: on PostgreSQL until
    /// a release anywhere is announced (LISTEN/NOTIFY) or the timeout; on SQLite the timeout
    /// (its waiters poll). Never longer than `timeout`: notifications can be lost. True when a
    /// release was announced.
    pub fn wait_lock_released(&mut self, timeout: Duration) -> bool {
        match &mut self.backend {
            Backend::Pg(c) => match c.wait_notified(locks::LOCK_CHANNEL, timeout) {
                Ok(notified) => notified,
                Err(_) => {
                    std::thread::sleep(timeout);
                    false
                }
            },
            Backend::Sqlite(_) => {
                std::thread::sleep(timeout);
                false
            }
        }
    }

    /// Writes without a fence again (tests: this store plays another process).
    #[cfg(test)]
    pub(crate) fn unfence(&mut self) {
        self.fence = None;
    }

    /// Whether a write was refused by the fence: the lease belongs to another process now.
    pub fn fence_lost(&self) -> bool {
        self.fence_lost
    }

    /// The fencing check of a write transaction: `Err(now)` when the lease moved on.
    fn check_fence(fence: &Option<(String, i64)>, tx: &Tx) -> sql::Result<Result<(), Option<i64>>> {
        let Some((id, token)) = fence else {
            return Ok(Ok(()));
        };
        let now = workers::fence_of(tx, id)?;
        Ok(if now == Some(*token) {
            Ok(())
        } else {
            Err(now)
        })
    }

    fn fenced(&mut self, now: Option<i64>) -> StoreError {
        self.fence_lost = true;
        let (worker, fence) = self.fence.clone().unwrap_or_default();
        StoreError::Fenced { worker, fence, now }
    }

    /// A write transaction with the write lock taken up front (SQLite's `BEGIN IMMEDIATE`,
    /// PostgreSQL's advisory lock), so a read-check-write inside it cannot interleave with
    /// another process's — on any host.
    fn begin_write(&mut self) -> sql::Result<Tx<'_>> {
        Ok(match &mut self.backend {
            Backend::Sqlite(c) => {
                Tx::sqlite(c.transaction_with_behavior(TransactionBehavior::Immediate)?)
            }
            Backend::Pg(c) => Tx::pg(c.write()?),
        })
    }

    /// Runs `f` in one write transaction ([`Store::begin_write`]): the write lock is taken up
    /// front, so a read-check-write inside `f` cannot interleave with another process's.
    pub fn write<T>(&mut self, f: impl FnOnce(&Tx) -> sql::Result<T>) -> Result<T, StoreError> {
        let _turn = self.take_turn()?;
        let fence = self.fence.clone();
        let r = (|| {
            let tx = self.begin_write()?;
            crate::fault::hold_write();
            if let Err(now) = Self::check_fence(&fence, &tx)? {
                return Ok(Err(now));
            }
            let v = f(&tx)?;
            tx.commit()?;
            Ok::<_, sql::Error>(Ok(v))
        })();
        match r {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(now)) => Err(self.fenced(now)),
            Err(e) => Err(self.classify(e)),
        }
    }

    /// Runs `f` in a write transaction that is always rolled back (what a pass would do,
    /// measured or tried without keeping it).
    pub fn rolled_back<T>(
        &mut self,
        f: impl FnOnce(&Tx) -> sql::Result<T>,
    ) -> Result<T, StoreError> {
        let _turn = self.take_turn()?;
        let fence = self.fence.clone();
        let r = (|| {
            let tx = self.begin_write()?;
            if let Err(now) = Self::check_fence(&fence, &tx)? {
                return Ok(Err(now));
            }
            f(&tx).map(Ok)
        })();
        match r {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(now)) => Err(self.fenced(now)),
            Err(e) => Err(self.classify(e)),
        }
    }

    /// This writer's turn in the host's write queue ([`write_queue`]), held until its
    /// transaction ends; none on PostgreSQL. Busy when the queue stood still for this store's
    /// patience, naming who held it.
    fn take_turn(&mut self) -> Result<Option<write_queue::Turn>, StoreError> {
        let Some(queue) = self.queue.take() else {
            return Ok(None);
        };
        if crate::fault::write_queue_off() {
            self.queue = Some(queue);
            return Ok(None);
        }
        let patience = self.waits;
        let taken = queue.take(patience, &mut |pid| self.judge_stopped_writer(pid));
        self.queue = Some(queue);
        match taken {
            Ok(turn) => Ok(Some(turn)),
            Err(stalled) => {
                let mut holders: Vec<String> = stalled.holder.into_iter().collect();
                holders.extend(health::holders(&self.path));
                Err(StoreError::Locked {
                    path: self.path.clone(),
                    waited: patience,
                    holders,
                })
            }
        }
    }

    /// What may be done about process `pid`, stopped while it holds the write turn: a
    /// supervisor is ended once the lease it holds lapsed (it has lost its worker then: the
    /// fence refuses what it would write, and another process may take the worker over), any
    /// other orch process after [`write_queue::STOPPED_BOUND`]; a process that is not orch is
    /// never signalled.
    fn judge_stopped_writer(&mut self, pid: i32) -> write_queue::Verdict {
        use write_queue::Verdict;
        if !health::is_orch(pid) {
            return Verdict::Foreign;
        }
        let cmd = health::command_of(pid);
        let supervised = cmd
            .strip_prefix("orch __supervise ")
            .and_then(|rest| rest.split_whitespace().next())
            .map(str::to_string);
        if let Some(id) = supervised
            && let Ok(Some(w)) = self.worker(&id)
            && let Some(lease) = w.lease().filter(|l| l.held_by(pid as i64))
            && crate::process::proc_stat(pid)
                .is_some_and(|s| lease.start.is_none_or(|t| t as u64 == s.start_ticks))
        {
            // A second past the lapse, so that clocks read a millisecond apart agree.
            let left = (lease.until_ms + 1_000 - now_ms()).max(0) as u64;
            return Verdict::EndAt(std::time::Instant::now() + Duration::from_millis(left));
        }
        Verdict::EndAfter(write_queue::STOPPED_BOUND)
    }

    /// Read-only access: a consistent snapshot (SQLite's deferred transaction in WAL mode,
    /// PostgreSQL's `REPEATABLE READ READ ONLY`).
    pub fn read<T>(&mut self, f: impl FnOnce(&Tx) -> sql::Result<T>) -> Result<T, StoreError> {
        let r = (|| {
            let tx = match &mut self.backend {
                Backend::Sqlite(c) => {
                    Tx::sqlite(c.transaction_with_behavior(TransactionBehavior::Deferred)?)
                }
                Backend::Pg(c) => Tx::pg(c.read()?),
            };
            f(&tx)
        })();
        r.map_err(|e| self.classify(e))
    }

    /// The raw connection, for modules that own their own tables.
    #[cfg(test)]
    pub(crate) fn conn(&mut self) -> &mut Connection {
        match &mut self.backend {
            Backend::Sqlite(c) => c,
            Backend::Pg(_) => panic!("not a SQLite store"),
        }
    }
}

/// The database behind a store; nothing outside `store/` knows which.
enum Backend {
    Sqlite(Connection),
    Pg(Box<pg::PgConn>),
}

/// Busy timeout, WAL, synchronous=NORMAL, foreign keys, the statement cache.
fn configure_sqlite(conn: &mut Connection, timeout: Duration) -> sql::Result<()> {
    conn.busy_timeout(timeout)?;
    // WAL lets readers (orch status) proceed while a supervisor writes. Switching modes
    // needs a moment of exclusivity, so a concurrent first open may see BUSY: retry, within
    // the same bound as one wait (each try waits for the lock itself).
    let deadline = std::time::Instant::now() + timeout;
    loop {
        match conn
            .query_row("PRAGMA journal_mode=WAL", [], |r| r.get::<_, String>(0))
            .map_err(sql::Error::from)
        {
            Ok(_) => break,
            Err(e) if is_busy(&e) && std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
                let left = deadline.saturating_duration_since(std::time::Instant::now());
                let _ = conn.busy_timeout(left.max(Duration::from_millis(1)));
            }
            Err(e) => {
                let _ = conn.busy_timeout(timeout);
                return Err(e);
            }
        }
    }
    let _ = conn.busy_timeout(timeout);
    conn.execute_batch("PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;")?;
    // rusqlite keeps 16 prepared statements by default; one spawn's transaction alone
    // (lock, worker, event) plus a supervisor's loop use more, and an evicted statement is
    // parsed again on its next use.
    conn.set_prepared_statement_cache_capacity(64);
    Ok(())
}

/// `errno` is the OS error SQLite last saw on this connection (`sqlite3_system_errno`).
fn classify(path: &Path, e: sql::Error, errno: i32) -> StoreError {
    let path = path.to_path_buf();
    {
        if is_busy(&e) {
            return StoreError::Locked {
                path,
                waited: busy_timeout(),
                holders: Vec::new(),
            };
        }
        if let sql::Error::Sqlite(rusqlite::Error::SqliteFailure(f, _)) = &e {
            let os = errno_name(&std::io::Error::from_raw_os_error(errno));
            match f.code {
                // SQLite's own word for a write that found no space.
                rusqlite::ErrorCode::DiskFull => {
                    return StoreError::NoSpace {
                        path,
                        errno: os.unwrap_or("ENOSPC"),
                    };
                }
                rusqlite::ErrorCode::SystemIoFailure
                | rusqlite::ErrorCode::ReadOnly
                | rusqlite::ErrorCode::CannotOpen
                    if os.is_some() =>
                {
                    return StoreError::NoSpace {
                        path,
                        errno: os.unwrap_or("ENOSPC"),
                    };
                }
                _ => {}
            }
        }
        if let sql::Error::Sqlite(rusqlite::Error::SqliteFailure(f, _)) = &e
            && matches!(
                f.code,
                rusqlite::ErrorCode::NotADatabase | rusqlite::ErrorCode::DatabaseCorrupt
            )
        {
            return StoreError::Corrupt { path, source: e };
        }
        StoreError::Sql { path, source: e }
    }
}

/// The name of an OS error that means the file system refuses writes (full, read-only).
pub fn errno_name(e: &std::io::Error) -> Option<&'static str> {
    match e.raw_os_error()? {
        libc::ENOSPC => Some("ENOSPC"),
        libc::EROFS => Some("EROFS"),
        libc::EDQUOT => Some("EDQUOT"),
        _ => None,
    }
}

/// What an errno [`errno_name`] names means, in words.
pub fn errno_words(errno: &str) -> &'static str {
    match errno {
        "EROFS" => "read-only file system",
        "EDQUOT" => "disk quota exceeded",
        _ => "no space left on device",
    }
}

pub(crate) fn is_busy(e: &sql::Error) -> bool {
    match e {
        sql::Error::Sqlite(rusqlite::Error::SqliteFailure(f, _)) => matches!(
            f.code,
            rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
        ),
        // lock_timeout passed waiting for the write lock.
        sql::Error::Pg(e) => e.code() == Some(&postgres::error::SqlState::LOCK_NOT_AVAILABLE),
        _ => false,
    }
}

/// Creates `dir` (and parents) with mode 0700 if missing.
pub fn ensure_private_dir(dir: &Path) -> Result<(), StoreError> {
    use std::os::unix::fs::DirBuilderExt;
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| StoreError::StateDir {
            path: dir.to_path_buf(),
            source,
        })
}

/// Creates `path` with mode 0600 if it does not exist, and narrows it to 0600 if it does.
/// SQLite creates its -wal and -shm files with the database file's permissions.
fn create_private_file(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        // Closing this descriptor drops no lock of a connection: the file is new (no
        // connection of this process can have it open). An existing file is never opened here
        // (see `health::facts`: closing a descriptor of it would drop their locks).
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let meta = std::fs::metadata(path)?;
            if meta.permissions().mode() & 0o077 != 0 {
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
            }
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// Milliseconds since the Unix epoch: every timestamp in the store.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// RFC 3339 for humans and JSON output.
pub fn fmt_ms(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.strftime("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
        .unwrap_or_else(|_| ms.to_string())
}
