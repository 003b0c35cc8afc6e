//! The SQL surface every store backend implements: a transaction ([`Tx`]), its statements, rows,
//! values and one error type (those two in `value.rs`, which the backends import). Shaped like
//! rusqlite's API (the first backend) so a store module reads the same whichever database is
//! behind it; nothing above `store/` names a backend.
//!
//! Parameters are bound as [`Value`]s: a backend converts them to what its driver binds.

pub use super::value::{Error, FromSqlError, OptionalExtension, Result, Value, ValueRef};

/// A Rust value bound as a statement parameter.
pub trait ToSql {
    fn to_sql(&self) -> Result<Value>;
}

/// A Rust value read from a column.
pub trait FromSql: Sized {
    fn from_sql(v: ValueRef<'_>) -> Result<Self, FromSqlError>;
}

impl<T: ToSql + ?Sized> ToSql for &T {
    fn to_sql(&self) -> Result<Value> {
        (**self).to_sql()
    }
}

impl ToSql for Value {
    fn to_sql(&self) -> Result<Value> {
        Ok(self.clone())
    }
}

impl<T: ToSql> ToSql for Option<T> {
    fn to_sql(&self) -> Result<Value> {
        match self {
            Some(v) => v.to_sql(),
            None => Ok(Value::Null),
        }
    }
}

macro_rules! to_sql_integer {
    ($($t:ty),*) => {$(
        impl ToSql for $t {
            fn to_sql(&self) -> Result<Value> {
                i64::try_from(*self)
                    .map(Value::Integer)
                    .map_err(|_| Error::Bind(format!("{} does not fit a 64-bit integer", self)))
            }
        }
        impl FromSql for $t {
            fn from_sql(v: ValueRef<'_>) -> Result<Self, FromSqlError> {
                match v {
                    ValueRef::Integer(i) => <$t>::try_from(i).map_err(|_| FromSqlError::OutOfRange(i)),
                    other => Err(FromSqlError::InvalidType(other.type_name())),
                }
            }
        }
    )*};
}
to_sql_integer!(i64, i32, u32, u64, usize, i16, u16, u8);

impl ToSql for bool {
    fn to_sql(&self) -> Result<Value> {
        Ok(Value::Integer(*self as i64))
    }
}

impl FromSql for bool {
    fn from_sql(v: ValueRef<'_>) -> Result<Self, FromSqlError> {
        match v {
            ValueRef::Integer(i) => Ok(i != 0),
            other => Err(FromSqlError::InvalidType(other.type_name())),
        }
    }
}

impl ToSql for f64 {
    fn to_sql(&self) -> Result<Value> {
        Ok(Value::Real(*self))
    }
}

impl FromSql for f64 {
    fn from_sql(v: ValueRef<'_>) -> Result<Self, FromSqlError> {
        match v {
            ValueRef::Integer(i) => Ok(i as f64),
            ValueRef::Real(f) => Ok(f),
            other => Err(FromSqlError::InvalidType(other.type_name())),
        }
    }
}

impl ToSql for str {
    fn to_sql(&self) -> Result<Value> {
        Ok(Value::Text(self.to_string()))
    }
}

impl ToSql for String {
    fn to_sql(&self) -> Result<Value> {
        Ok(Value::Text(self.clone()))
    }
}

impl FromSql for String {
    fn from_sql(v: ValueRef<'_>) -> Result<Self, FromSqlError> {
        v.as_str().map(str::to_string)
    }
}

impl ToSql for [u8] {
    fn to_sql(&self) -> Result<Value> {
        Ok(Value::Blob(self.to_vec()))
    }
}

impl ToSql for Vec<u8> {
    fn to_sql(&self) -> Result<Value> {
        Ok(Value::Blob(self.clone()))
    }
}

impl FromSql for Vec<u8> {
    fn from_sql(v: ValueRef<'_>) -> Result<Self, FromSqlError> {
        match v {
            ValueRef::Blob(b) => Ok(b.to_vec()),
            ValueRef::Text(s) => Ok(s.as_bytes().to_vec()),
            other => Err(FromSqlError::InvalidType(other.type_name())),
        }
    }
}

// The domain types stored as they are (the floor below the store knows nothing of SQL).
impl ToSql for crate::sha::Sha {
    fn to_sql(&self) -> Result<Value> {
        Ok(Value::Text(self.as_str().to_string()))
    }
}

impl FromSql for crate::sha::Sha {
    fn from_sql(v: ValueRef<'_>) -> Result<Self, FromSqlError> {
        String::from_sql(v).map(crate::sha::Sha::from)
    }
}

impl<T: FromSql> FromSql for Option<T> {
    fn from_sql(v: ValueRef<'_>) -> Result<Self, FromSqlError> {
        match v {
            ValueRef::Null => Ok(None),
            v => T::from_sql(v).map(Some),
        }
    }
}

impl FromSql for Value {
    fn from_sql(v: ValueRef<'_>) -> Result<Self, FromSqlError> {
        Ok(v.to_owned())
    }
}

/// A statement's parameters: `[]`, `[a, b]` (one type), `params![a, 1, None::<i64>]`, or the
/// `Vec<Value>` a query built.
pub trait Params {
    fn values(&self) -> Result<Vec<Value>>;
}

impl Params for [&dyn ToSql; 0] {
    fn values(&self) -> Result<Vec<Value>> {
        Ok(Vec::new())
    }
}

impl Params for &[&dyn ToSql] {
    fn values(&self) -> Result<Vec<Value>> {
        self.iter().map(|p| p.to_sql()).collect()
    }
}

impl Params for Vec<Value> {
    fn values(&self) -> Result<Vec<Value>> {
        Ok(self.clone())
    }
}

impl Params for &Vec<Value> {
    fn values(&self) -> Result<Vec<Value>> {
        Ok((*self).clone())
    }
}

impl<T: ToSql, const N: usize> Params for [T; N]
where
    [T; N]: NonEmpty,
{
    fn values(&self) -> Result<Vec<Value>> {
        self.iter().map(|p| p.to_sql()).collect()
    }
}

impl<T: ToSql, const N: usize> Params for &[T; N]
where
    [T; N]: NonEmpty,
{
    fn values(&self) -> Result<Vec<Value>> {
        self.iter().map(|p| p.to_sql()).collect()
    }
}

/// Arrays of one to sixteen parameters (`[]` is `[&dyn ToSql; 0]`, so an empty list needs no
/// type annotation).
pub trait NonEmpty {}
macro_rules! non_empty {
    ($($n:literal)*) => { $(impl<T> NonEmpty for [T; $n] {})* };
}
non_empty!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16);

/// Parameters of mixed types: `params![id, now_ms, None::<String>]`.
#[macro_export]
macro_rules! params {
    () => {
        &[] as &[&dyn $crate::store::sql::ToSql]
    };
    ($($p:expr),+ $(,)?) => {
        &[$(&$p as &dyn $crate::store::sql::ToSql),+] as &[&dyn $crate::store::sql::ToSql]
    };
}
pub use crate::params;

/// Binds a parameter for SQLite without copying it again.
struct Bound(Value);

impl rusqlite::ToSql for Bound {
    fn to_sql(&self) -> rusqlite::Result<rusqlite::types::ToSqlOutput<'_>> {
        use rusqlite::types::{ToSqlOutput, ValueRef as R};
        Ok(ToSqlOutput::Borrowed(match &self.0 {
            Value::Null => R::Null,
            Value::Integer(i) => R::Integer(*i),
            Value::Real(f) => R::Real(*f),
            Value::Text(s) => R::Text(s.as_bytes()),
            Value::Blob(b) => R::Blob(b),
        }))
    }
}

fn bind(p: &impl Params) -> Result<Vec<Bound>> {
    Ok(p.values()?.into_iter().map(Bound).collect())
}

/// A transaction: begun by the store (`Store::write` / `Store::read`), committed by it when the
/// closure returns `Ok`, rolled back otherwise. Every write transaction is begun in one place
/// (`Store::begin_write`, where the write lock is taken): a check that must guard every write
/// a supervisor makes (a fencing token, when leases span hosts) belongs there, so no write can
/// skip it.
pub struct Tx<'c> {
    imp: TxImp<'c>,
}

enum TxImp<'c> {
    Sqlite(rusqlite::Transaction<'c>),
    Pg(Box<dyn super::pg::PgExec + 'c>),
}

impl<'c> Tx<'c> {
    pub(super) fn sqlite(tx: rusqlite::Transaction<'c>) -> Tx<'c> {
        Tx {
            imp: TxImp::Sqlite(tx),
        }
    }

    pub(super) fn pg(tx: super::pg::PgTx<'c>) -> Tx<'c> {
        Tx {
            imp: TxImp::Pg(Box::new(tx)),
        }
    }

    pub(super) fn commit(self) -> Result<()> {
        match self.imp {
            TxImp::Sqlite(tx) => Ok(tx.commit()?),
            TxImp::Pg(tx) => tx.commit(),
        }
    }

    /// Which backend runs it ("sqlite", "postgresql"): for the rare statement only one of them
    /// needs (a schema probe), never for a store decision.
    /// The database's clock in ms since the epoch: leases are taken, renewed and judged on it,
    /// so the hosts sharing a PostgreSQL database need not agree on the time (SQLite's file is
    /// on this host: its clock is this host's).
    pub fn clock_ms(&self) -> Result<i64> {
        match self.imp {
            TxImp::Sqlite(_) => Ok(super::now_ms()),
            TxImp::Pg(_) => self.query_row(
                "SELECT (EXTRACT(EPOCH FROM clock_timestamp()) * 1000)::BIGINT",
                [],
                |r| r.get(0),
            ),
        }
    }

    /// Announces a change on `channel` to every session LISTENing on it, at commit
    /// (PostgreSQL's NOTIFY; nothing on SQLite, whose waiters poll one file).
    pub fn notify(&self, channel: &str) -> Result<()> {
        match self.imp {
            TxImp::Sqlite(_) => Ok(()),
            TxImp::Pg(_) => self.query_row("SELECT pg_notify(?1, '')", [channel], |_| Ok(())),
        }
    }

    pub fn backend(&self) -> &'static str {
        match self.imp {
            TxImp::Sqlite(_) => "sqlite",
            TxImp::Pg(_) => "postgresql",
        }
    }

    /// A statement, parsed once per connection and kept for the next use.
    pub fn prepare_cached(&self, sql: &str) -> Result<Stmt<'_>> {
        match &self.imp {
            TxImp::Sqlite(tx) => Ok(Stmt {
                imp: StmtImp::Sqlite(tx.prepare_cached(sql)?),
            }),
            TxImp::Pg(tx) => Ok(Stmt {
                imp: StmtImp::Pg(&**tx, sql.to_string()),
            }),
        }
    }

    /// Runs one statement; the number of rows it changed.
    pub fn execute(&self, sql: &str, p: impl Params) -> Result<usize> {
        self.prepare_cached(sql)?.execute(p)
    }

    /// The first row `sql` returns, mapped by `f`; [`Error::NoRows`] when there is none.
    pub fn query_row<T>(
        &self,
        sql: &str,
        p: impl Params,
        f: impl FnOnce(&Row<'_>) -> Result<T>,
    ) -> Result<T> {
        self.prepare_cached(sql)?.query_row(p, f)
    }

    /// Every row `sql` returns, mapped by `f`.
    pub fn query_map<T>(
        &self,
        sql: &str,
        p: impl Params,
        f: impl FnMut(&Row<'_>) -> Result<T>,
    ) -> Result<Vec<T>> {
        self.prepare_cached(sql)?.query_map(p, f)?.collect()
    }

    /// The database file (SQLite; the state directory's files live beside it).
    pub fn path(&self) -> Option<&str> {
        match &self.imp {
            TxImp::Sqlite(tx) => tx.path(),
            TxImp::Pg(_) => None,
        }
    }

    /// Statements separated by `;`, without parameters (schema changes).
    pub fn execute_batch(&self, sql: &str) -> Result<()> {
        match &self.imp {
            TxImp::Sqlite(tx) => Ok(tx.execute_batch(sql)?),
            TxImp::Pg(tx) => tx.batch(sql),
        }
    }
}

/// A prepared statement of a [`Tx`].
pub struct Stmt<'t> {
    imp: StmtImp<'t>,
}

enum StmtImp<'t> {
    Sqlite(rusqlite::CachedStatement<'t>),
    /// Prepared when first bound: the values' types help where PostgreSQL cannot infer one.
    Pg(&'t dyn super::pg::PgExec, String),
}

impl Stmt<'_> {
    pub fn execute(&mut self, p: impl Params) -> Result<usize> {
        match &mut self.imp {
            StmtImp::Sqlite(s) => Ok(s.execute(rusqlite::params_from_iter(bind(&p)?))?),
            StmtImp::Pg(tx, sql) => {
                let values = p.values()?;
                tx.execute(&tx.prepare(sql, &values)?, &values)
            }
        }
    }

    pub fn query_row<T>(
        &mut self,
        p: impl Params,
        f: impl FnOnce(&Row<'_>) -> Result<T>,
    ) -> Result<T> {
        match &mut self.imp {
            StmtImp::Sqlite(s) => {
                let mut rows = s.query(rusqlite::params_from_iter(bind(&p)?))?;
                match rows.next()? {
                    Some(r) => f(&Row {
                        imp: RowImp::Sqlite(r),
                    }),
                    None => Err(Error::NoRows),
                }
            }
            StmtImp::Pg(tx, sql) => match {
                let values = p.values()?;
                tx.query(&tx.prepare(sql, &values)?, &values)?
            }
            .first()
            {
                Some(r) => f(&Row {
                    imp: RowImp::Values(r),
                }),
                None => Err(Error::NoRows),
            },
        }
    }

    /// Every row, mapped by `f` (read up to the first error, which ends the list).
    pub fn query_map<T>(
        &mut self,
        p: impl Params,
        mut f: impl FnMut(&Row<'_>) -> Result<T>,
    ) -> Result<std::vec::IntoIter<Result<T>>> {
        let mut out = Vec::new();
        self.for_each(p, |r| {
            out.push(f(r));
            Ok(true)
        })?;
        Ok(out.into_iter())
    }

    /// Calls `f` on each row until it returns `Ok(false)` or an error (without collecting).
    pub fn for_each(
        &mut self,
        p: impl Params,
        mut f: impl FnMut(&Row<'_>) -> Result<bool>,
    ) -> Result<()> {
        match &mut self.imp {
            StmtImp::Sqlite(s) => {
                let mut rows = s.query(rusqlite::params_from_iter(bind(&p)?))?;
                while let Some(r) = rows.next()? {
                    if !f(&Row {
                        imp: RowImp::Sqlite(r),
                    })? {
                        break;
                    }
                }
                Ok(())
            }
            StmtImp::Pg(tx, sql) => {
                let values = p.values()?;
                for r in tx.query(&tx.prepare(sql, &values)?, &values)? {
                    if !f(&Row {
                        imp: RowImp::Values(&r),
                    })? {
                        break;
                    }
                }
                Ok(())
            }
        }
    }

    /// Whether the query returns at least one row.
    pub fn exists(&mut self, p: impl Params) -> Result<bool> {
        let mut found = false;
        self.for_each(p, |_| {
            found = true;
            Ok(false)
        })?;
        Ok(found)
    }
}

/// How a column is named: its position, from 0.
pub trait RowIndex {
    fn index(self) -> usize;
}

impl RowIndex for usize {
    fn index(self) -> usize {
        self
    }
}

/// One row of a result.
pub struct Row<'r> {
    imp: RowImp<'r>,
}

enum RowImp<'r> {
    Sqlite(&'r rusqlite::Row<'r>),
    /// A row read whole (PostgreSQL's).
    Values(&'r [Value]),
}

impl Row<'_> {
    /// Column `idx` (from 0) as `T`.
    pub fn get<I: RowIndex, T: FromSql>(&self, idx: I) -> Result<T> {
        let idx = idx.index();
        T::from_sql(self.get_ref(idx)?).map_err(|source| Error::Conversion {
            column: idx,
            source,
        })
    }

    /// Column `idx` as it is stored, borrowed from the row.
    pub fn get_ref(&self, idx: usize) -> Result<ValueRef<'_>> {
        match &self.imp {
            RowImp::Sqlite(r) => {
                use rusqlite::types::ValueRef as R;
                Ok(match r.get_ref(idx)? {
                    R::Null => ValueRef::Null,
                    R::Integer(i) => ValueRef::Integer(i),
                    R::Real(f) => ValueRef::Real(f),
                    R::Text(t) => {
                        ValueRef::Text(std::str::from_utf8(t).map_err(|e| Error::Conversion {
                            column: idx,
                            source: FromSqlError::Other(Box::new(e)),
                        })?)
                    }
                    R::Blob(b) => ValueRef::Blob(b),
                })
            }
            RowImp::Values(v) => v.get(idx).map(Value::as_ref).ok_or(Error::Conversion {
                column: idx,
                source: FromSqlError::InvalidType("no such column"),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_bind_within_range_and_refuse_past_it() {
        assert_eq!(7u64.to_sql().unwrap(), Value::Integer(7));
        assert!(u64::MAX.to_sql().is_err());
        assert!(matches!(
            u32::from_sql(ValueRef::Integer(-1)),
            Err(FromSqlError::OutOfRange(-1))
        ));
        assert_eq!(
            Option::<i64>::from_sql(ValueRef::Null).unwrap(),
            None::<i64>
        );
        assert!(bool::from_sql(ValueRef::Integer(2)).unwrap());
    }

    #[test]
    fn params_of_mixed_types_bind_in_order() {
        let v = params![1i64, "a", None::<String>, true].values().unwrap();
        assert_eq!(
            v,
            [
                Value::Integer(1),
                Value::Text("a".into()),
                Value::Null,
                Value::Integer(1)
            ]
        );
        assert!([].values().unwrap().is_empty());
        assert_eq!(["x"].values().unwrap(), [Value::Text("x".into())]);
    }
}
