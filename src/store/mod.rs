//! The state store: SQLite in the state directory, the one source of truth.
//!
//! Every state change is one transaction. Files under `sessions/` (checkpoints, alerts.jsonl)
//! are views written after the commit. Writers use `BEGIN IMMEDIATE` so that two processes
//! can never both pass a check-then-write (the chain lock depends on this).

pub mod alerts;
pub mod history;
mod locks;
mod schema;
pub mod upstream;
pub mod usage;
pub mod waves;
pub mod workers;

pub use locks::{
    ActiveLocks, LockAttempt, LockHistoryEntry, LockRow, active_locks, first_conflict, holds_lock,
    last_lock_action, live_without_their_lock, release_in, retake_in, try_lock_in,
    worker_lock_count,
};

use rusqlite::{Connection, OpenFlags, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long a writer waits for another process's transaction before giving up (override with
/// `ORCH_DB_BUSY_TIMEOUT`, e.g. "5s").
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(30);

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
    Open {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error(
        "database {path} is locked by another process (waited {}); retry, or find the process holding it (fuser {path})",
        crate::duration::format(busy_timeout())
    )]
    Locked { path: PathBuf },
    #[error(
        "database {path} is unreadable or not an orch database ({source}); `orch resume --from-checkpoints` rebuilds it from sessions/*.checkpoint.yaml"
    )]
    Corrupt {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error(
        "database {path} has schema version {found}, newer than this orch understands ({known}); upgrade orch"
    )]
    TooNew {
        path: PathBuf,
        found: i64,
        known: i64,
    },
    #[error("database {path}: {source}")]
    Sql {
        path: PathBuf,
        source: rusqlite::Error,
    },
}

/// The `store_meta` key set when `orch resume --from-checkpoints` rebuilt the database.
pub const REBUILT_META: &str = "rebuilt_from_checkpoints_ms";

/// A value of `store_meta` (small watermarks), if set.
pub fn meta(tx: &rusqlite::Transaction, key: &str) -> rusqlite::Result<Option<i64>> {
    use rusqlite::OptionalExtension;
    tx.prepare_cached("SELECT value FROM store_meta WHERE key = ?1")?
        .query_row([key], |r| r.get(0))
        .optional()
}

pub fn set_meta(tx: &rusqlite::Transaction, key: &str, value: i64) -> rusqlite::Result<()> {
    tx.prepare_cached(
        "INSERT INTO store_meta (key, value) VALUES (?1, ?2)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value",
    )?
    .execute(rusqlite::params![key, value])?;
    Ok(())
}

pub struct Store {
    conn: Connection,
    path: PathBuf,
    /// `alerts.dedup_window` of the configuration in use (the journal de-duplicates with it).
    alert_window: Duration,
}

impl Store {
    /// Opens (creating if needed) `<state_dir>/orch.db` and brings its schema up to date.
    pub fn open(state_dir: &Path) -> Result<Store, StoreError> {
        ensure_private_dir(state_dir)?;
        let path = state_dir.join(DB_FILE);
        create_private_file(&path).map_err(|source| StoreError::StateDir {
            path: path.clone(),
            source,
        })?;
        let conn = Connection::open_with_flags(
            &path,
            OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|source| StoreError::Open {
            path: path.clone(),
            source,
        })?;
        let mut store = Store {
            conn,
            path,
            alert_window: crate::config::DEDUP_WINDOW,
        };
        store.configure()?;
        schema::migrate(&mut store)?;
        Ok(store)
    }

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

    fn configure(&mut self) -> Result<(), StoreError> {
        let timeout = busy_timeout();
        self.conn
            .busy_timeout(timeout)
            .map_err(|e| self.classify(e))?;
        // WAL lets readers (orch status) proceed while a supervisor writes. Switching modes
        // needs a moment of exclusivity, so a concurrent first open may see BUSY: retry.
        let deadline = std::time::Instant::now() + timeout;
        loop {
            match self
                .conn
                .query_row("PRAGMA journal_mode=WAL", [], |r| r.get::<_, String>(0))
            {
                Ok(_) => break,
                Err(e) if is_busy(&e) && std::time::Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => return Err(self.classify(e)),
            }
        }
        self.conn
            .execute_batch("PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;")
            .map_err(|e| self.classify(e))?;
        // rusqlite keeps 16 prepared statements by default; one spawn's transaction alone
        // (lock, worker, event) plus a supervisor's loop use more, and an evicted statement is
        // parsed again on its next use.
        self.conn.set_prepared_statement_cache_capacity(64);
        Ok(())
    }

    /// Maps a rusqlite error to what it means for the operator.
    pub(crate) fn classify(&self, e: rusqlite::Error) -> StoreError {
        classify(&self.path, e)
    }

    /// Runs `f` in one `BEGIN IMMEDIATE` transaction: the write lock is taken up front, so a
    /// read-check-write inside `f` cannot interleave with another process's.
    pub fn write<T>(
        &mut self,
        f: impl FnOnce(&rusqlite::Transaction) -> rusqlite::Result<T>,
    ) -> Result<T, StoreError> {
        let path = self.path.clone();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| classify(&path, e))?;
        let v = f(&tx).map_err(|e| classify(&path, e))?;
        tx.commit().map_err(|e| classify(&path, e))?;
        Ok(v)
    }

    /// Read-only access (a deferred transaction gives a consistent snapshot in WAL mode).
    pub fn read<T>(
        &mut self,
        f: impl FnOnce(&rusqlite::Transaction) -> rusqlite::Result<T>,
    ) -> Result<T, StoreError> {
        let path = self.path.clone();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Deferred)
            .map_err(|e| classify(&path, e))?;
        f(&tx).map_err(|e| classify(&path, e))
    }

    /// The raw connection, for modules that own their own tables.
    pub fn conn(&mut self) -> &mut Connection {
        &mut self.conn
    }
}

fn classify(path: &Path, e: rusqlite::Error) -> StoreError {
    let path = path.to_path_buf();
    {
        if is_busy(&e) {
            return StoreError::Locked { path };
        }
        if let rusqlite::Error::SqliteFailure(f, _) = &e
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

pub(crate) fn is_busy(e: &rusqlite::Error) -> bool {
    matches!(
        e,
        rusqlite::Error::SqliteFailure(f, _)
            if matches!(f.code, rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked)
    )
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
