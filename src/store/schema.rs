//! Versioned schema migrations: SQLite's keyed on its `user_version`, PostgreSQL's beside them
//! (keyed on `orch_schema.version`), both at the same version number for the same schema.
//!
//! Each entry is applied once, in order, inside one write transaction (the write lock taken
//! first) that also re-reads the version, so processes opening a fresh database at the same
//! time cannot apply a migration twice. Never edit a released entry: append a new one — to
//! both lists (a test keeps their last versions equal): `schema/sqlite.rs`, `schema/postgres.rs`.

use super::sql::{self, Tx};
use super::{Store, StoreError};

mod postgres;
mod sqlite;

use postgres::PG_MIGRATIONS;
use sqlite::MIGRATIONS;

pub const LATEST: i64 = MIGRATIONS.len() as i64;

/// The schema version of the database `tx` is on (0: empty).
pub fn version(tx: &Tx) -> sql::Result<i64> {
    if tx.backend() == "sqlite" {
        return tx.query_row("PRAGMA user_version", [], |r| r.get(0));
    }
    // Asked of pg_class in the statement's snapshot, never of `to_regclass`: that reads the
    // session's catalog cache, which is brought up to date only when a relation lock is
    // taken — a writer that waited on the write lock while another process migrated would
    // still see no table, and migrate again ("relation orch_schema already exists"). Reading
    // pg_class also locks it, which brings the cache up to date for the next statement.
    let exists: bool = tx.query_row(
        "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c
           JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
          WHERE c.relname = 'orch_schema' AND n.nspname = ANY (current_schemas(false)))",
        [],
        |r| r.get(0),
    )?;
    if !exists {
        return Ok(0);
    }
    // A reader's snapshot (REPEATABLE READ) holds the table and its row together; a row
    // missing all the same is read as 0 — the migration's write transaction, under the write
    // lock, reads it again.
    use sql::OptionalExtension;
    Ok(tx
        .query_row("SELECT version FROM orch_schema", [], |r| r.get(0))
        .optional()?
        .unwrap_or(0))
}

/// Brings the schema from `version` to [`LATEST`] in `tx`.
fn apply(tx: &Tx, mut version: i64) -> sql::Result<()> {
    if tx.backend() == "sqlite" {
        while version < LATEST {
            tx.execute_batch(MIGRATIONS[version as usize])?;
            version += 1;
            tx.execute_batch(&format!("PRAGMA user_version = {version}"))?;
        }
        return Ok(());
    }
    for (to, sql) in PG_MIGRATIONS {
        if *to > version {
            tx.execute_batch(sql)?;
            tx.execute_batch(&format!("UPDATE orch_schema SET version = {to}"))?;
            version = *to;
        }
    }
    Ok(())
}

pub(super) fn migrate(store: &mut Store) -> Result<(), StoreError> {
    let current: i64 = store.read(version)?;
    if current > LATEST {
        return Err(StoreError::TooNew {
            path: store.path.clone(),
            found: current,
            known: LATEST,
        });
    }
    if current == LATEST {
        return Ok(());
    }
    store.write(|tx| {
        let version = version(tx)?;
        apply(tx, version)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_backends_migrate_to_the_same_version() {
        assert_eq!(PG_MIGRATIONS.last().map(|m| m.0), Some(LATEST));
        assert!(PG_MIGRATIONS.windows(2).all(|w| w[0].0 < w[1].0));
    }
    use crate::graph::RepoGraph;
    use crate::lock::HolderKind;
    use crate::store::{LockAttempt, first_conflict};

    /// A database at schema 9 with locks taken and released the old way (AUTOINCREMENT ids)
    /// keeps them through migration 10, and new locks continue the history in order with ids
    /// no old lock had.
    #[test]
    fn migration_10_keeps_lock_history_and_its_order() {
        let dir = tempfile::tempdir().unwrap();
        {
            let conn = rusqlite::Connection::open(dir.path().join(super::super::DB_FILE)).unwrap();
            for m in &MIGRATIONS[..9] {
                conn.execute_batch(m).unwrap();
            }
            conn.execute_batch(
                "PRAGMA user_version = 9;
                 INSERT INTO locks (repo, holder, kind, acquired_ms) VALUES ('vm', 'w1', 'worker', 1);
                 INSERT INTO lock_history (lock_id, action, repo, holder, kind, pid, at_ms)
                     VALUES (1, 'acquire', 'vm', 'w1', 'worker', 7, 1);
                 DELETE FROM locks WHERE id = 1;
                 INSERT INTO lock_history (lock_id, action, repo, holder, kind, pid, at_ms)
                     VALUES (1, 'release', 'vm', 'w1', 'worker', 7, 2);
                 INSERT INTO locks (repo, holder, kind, reason, by, acquired_ms)
                     VALUES ('os', 'hold:x', 'hold', 'why', 'me', 3);
                 INSERT INTO lock_history (lock_id, action, repo, holder, kind, reason, by, pid, at_ms)
                     VALUES (2, 'acquire', 'os', 'hold:x', 'hold', 'why', 'me', 7, 3);",
            )
            .unwrap();
        }
        let mut s = Store::open(dir.path()).unwrap();
        let version: i64 = s
            .conn()
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, LATEST);
        let locks = s.locks().unwrap();
        assert_eq!(locks.len(), 1);
        assert_eq!(
            (
                locks[0].id,
                locks[0].repo.as_str(),
                locks[0].reason.as_deref()
            ),
            (2, "os", Some("why"))
        );
        let g = RepoGraph::new([
            ("core".to_string(), vec![]),
            ("vm".to_string(), vec!["core".to_string()]),
            ("os".to_string(), vec!["core".to_string()]),
        ]);
        let LockAttempt::Acquired(vm) = s
            .try_lock(&g, "vm", "w2", HolderKind::Worker, None, None)
            .unwrap()
        else {
            panic!("vm is free")
        };
        assert!(vm.id > 2, "a new lock id is no old one's: {}", vm.id);
        s.release("w2", Some("done"), None).unwrap();
        assert_eq!(s.unhold("os", None).unwrap().unwrap().id, 2);
        let h = s.lock_history().unwrap();
        let seqs: Vec<i64> = h.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, [1, 2, 3, 4, 5, 6]);
        let ids: Vec<i64> = h.iter().map(|e| e.lock_id).collect();
        assert_eq!(ids, [1, 1, 2, 4, 4, 2]);
        assert!(first_conflict(&g, &h).is_none());
        let leftover: i64 = s
            .conn()
            .query_row(
                "SELECT COUNT(*) FROM sqlite_sequence WHERE name IN ('locks', 'lock_history')",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(leftover, 0, "no AUTOINCREMENT counter is left behind");
    }

    /// Migration 11 names the landing states in which a DONE worker is still live: they must
    /// be exactly those `LandState::is_active` names.
    #[test]
    fn the_backfill_knows_which_landing_states_are_active() {
        use crate::milestone::LandState::*;
        let all = [
            Planned, Pending, Verifying, BaseCi, Downstream, Landed, Broken, Waiting, Reverting,
            Reverted, Conflict, Refused,
        ];
        for s in all {
            // Exhaustive: a new state fails to compile here until it is placed.
            match s {
                Planned | Pending | Verifying | BaseCi | Downstream | Landed | Broken | Waiting
                | Reverting | Reverted | Conflict | Refused => {}
            }
            let listed = super::MIGRATIONS[10].contains(&format!("'{}'", s.as_str()));
            assert_eq!(listed, s.is_active(), "{s}");
        }
    }
}
