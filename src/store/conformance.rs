//! The store's conformance helper (tests only): one test body run against a fresh store of each
//! backend — SQLite in a temporary directory, PostgreSQL in a schema of its own in the server at
//! `ORCH_TEST_PG_URL` (dropped afterwards). Without that variable the PostgreSQL run is skipped
//! with a line on the terminal, never silently; with `ORCH_TEST_PG_REQUIRED=1` (CI) a missing
//! server fails the test.

use super::{Store, pg};
use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Runs `f` on a fresh SQLite store, then on a fresh PostgreSQL one.
pub(crate) fn each_backend(test: &str, mut f: impl FnMut(&mut Store)) {
    let dir = tempfile::tempdir().unwrap();
    f(&mut Store::open(dir.path()).unwrap());
    match pg_store(test) {
        Some((mut store, schema)) => {
            f(&mut store);
            drop(store);
            schema.drop();
        }
        None => {
            // Straight to the terminal: the harness captures print!/eprint! of a passing test.
            let _ = writeln!(
                std::io::stderr(),
                "{test}: PostgreSQL backend skipped: ORCH_TEST_PG_URL not set"
            );
        }
    }
}

/// A fresh schema in the test server and a store in it; `None` when no server is configured.
pub(crate) fn pg_store(test: &str) -> Option<(Store, Schema)> {
    let url = std::env::var("ORCH_TEST_PG_URL")
        .ok()
        .filter(|u| !u.is_empty());
    let Some(url) = url else {
        assert!(
            std::env::var("ORCH_TEST_PG_REQUIRED").as_deref() != Ok("1"),
            "{test}: ORCH_TEST_PG_REQUIRED=1 but ORCH_TEST_PG_URL is not set"
        );
        return None;
    };
    static N: AtomicUsize = AtomicUsize::new(0);
    let short: String = test
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .take(30)
        .collect();
    let name = format!(
        "t{}_{}_{short}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    );
    let mut admin = pg::PgConn::connect(&url, None)
        .unwrap_or_else(|e| panic!("{test}: cannot connect to {}: {e}", pg::redact(&url)));
    admin.batch(&format!("CREATE SCHEMA \"{name}\"")).unwrap();
    let store = Store::open_pg(&url, Some(&name)).unwrap_or_else(|e| panic!("{test}: {e}"));
    Some((store, Schema { admin, name }))
}

/// A test's schema, dropped with everything in it by [`Schema::drop`].
pub(crate) struct Schema {
    admin: pg::PgConn,
    name: String,
}

impl Schema {
    pub(crate) fn drop(mut self) {
        let _ = self
            .admin
            .batch(&format!("DROP SCHEMA \"{}\" CASCADE", self.name));
    }
}
