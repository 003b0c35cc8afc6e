//! What can go wrong with the store, classified so every caller can say it plainly: busy,
//! damaged, no space, read-only, too new, fenced, unreachable.

use super::*;

impl Store {
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
}

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
