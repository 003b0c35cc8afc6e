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
//! accept (`RETURNING`, `ON CONFLICT DO NOTHING`, `IS NOT DISTINCT FROM`). [`Store`] (`open.rs`) is SQLite —
//! opened 0600, WAL, busy timeout 10 s for commands and 30 s for supervisors, orch's writers
//! queued by `write_queue.rs` — or PostgreSQL (`open_url`, `open_postgres`; `pg.rs`: a released
//! chain lock NOTIFYed, `Store::wait_lock_released` LISTENs, while SQLite's waiters poll).
//! `open(state_dir)` follows the state directory's pointer (`location.rs`: `store:` of
//! repos.yaml, validated, left as `store.json` — the URL without a password and the names of the
//! variables that complete it). Write transactions take the write lock first on both, fenced by
//! a supervisor's lease (`transactions.rs`); errors are classified: busy, damaged, no space, too
//! new, fenced (`error.rs`). `schema.rs` holds both backends'
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
mod error;
pub mod fatal;
pub mod health;
pub mod history;
pub mod location;
mod locks;
pub mod nodes;
mod open;
pub mod pg;
mod schema;
pub mod sql;
pub mod supersede;
mod transactions;
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

pub(crate) use error::is_busy;
pub use error::{StoreError, errno_name, errno_words};
pub use open::{BUSY_TIMEOUT, SUPERVISOR_BUSY_TIMEOUT, ensure_private_dir};

use open::busy_timeout;
use rusqlite::{Connection, OpenFlags, TransactionBehavior};
use sql::Tx;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub const DB_FILE: &str = "orch.db";

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
}

/// The database behind a store; nothing outside `store/` knows which.
enum Backend {
    Sqlite(Connection),
    Pg(Box<pg::PgConn>),
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
