//! Opening a store: the state directory's own SQLite file (0600, WAL, the busy timeout of a
//! command or a supervisor) or the PostgreSQL database its pointer names; the schema brought up
//! to date on open.

use super::*;

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

    fn configure(&mut self) -> Result<(), StoreError> {
        let timeout = self.waits;
        let r = match &mut self.backend {
            Backend::Sqlite(conn) => configure_sqlite(conn, timeout),
            Backend::Pg(_) => Ok(()),
        };
        r.map_err(|e| self.classify(e))
    }
}

/// How long a command waits for another process's transaction before it says the database
/// is busy (override with `ORCH_DB_BUSY_TIMEOUT`, e.g. "5s"): a person waits on it.
pub const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a supervisor waits ([`Store::patient`]): it has no one waiting on it, and giving
/// up costs a retry of its bookkeeping (it logs that it waits this long).
pub const SUPERVISOR_BUSY_TIMEOUT: Duration = Duration::from_secs(30);

pub(super) fn busy_timeout() -> Duration {
    std::env::var("ORCH_DB_BUSY_TIMEOUT")
        .ok()
        .and_then(|v| crate::duration::parse(&v).ok())
        .unwrap_or(BUSY_TIMEOUT)
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
