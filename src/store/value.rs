//! The values and the one error type of the SQL surface (`sql.rs`), which every backend reads
//! and returns: in a module of their own so that a backend (`pg.rs`) and the surface that
//! dispatches to it (`sql.rs`) both import them, neither the other's.

use std::fmt;

/// A value bound to or read from a statement.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Integer(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

/// A value read from a row, borrowed from it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum ValueRef<'a> {
    Null,
    Integer(i64),
    Real(f64),
    Text(&'a str),
    Blob(&'a [u8]),
}

impl<'a> ValueRef<'a> {
    /// The type's name, for conversion errors.
    pub fn type_name(&self) -> &'static str {
        match self {
            ValueRef::Null => "NULL",
            ValueRef::Integer(_) => "INTEGER",
            ValueRef::Real(_) => "REAL",
            ValueRef::Text(_) => "TEXT",
            ValueRef::Blob(_) => "BLOB",
        }
    }

    pub fn as_str(&self) -> Result<&'a str, FromSqlError> {
        match *self {
            ValueRef::Text(s) => Ok(s),
            other => Err(FromSqlError::InvalidType(other.type_name())),
        }
    }

    pub fn to_owned(&self) -> Value {
        match *self {
            ValueRef::Null => Value::Null,
            ValueRef::Integer(i) => Value::Integer(i),
            ValueRef::Real(f) => Value::Real(f),
            ValueRef::Text(s) => Value::Text(s.to_string()),
            ValueRef::Blob(b) => Value::Blob(b.to_vec()),
        }
    }
}

impl Value {
    pub fn as_ref(&self) -> ValueRef<'_> {
        match self {
            Value::Null => ValueRef::Null,
            Value::Integer(i) => ValueRef::Integer(*i),
            Value::Real(f) => ValueRef::Real(*f),
            Value::Text(s) => ValueRef::Text(s),
            Value::Blob(b) => ValueRef::Blob(b),
        }
    }
}

/// Why a column's value is not the Rust type asked for.
#[derive(Debug)]
pub enum FromSqlError {
    /// The column holds another type (its name).
    InvalidType(&'static str),
    /// An integer that does not fit the type asked for.
    OutOfRange(i64),
    /// The value's text did not parse (a JSON column, a SHA).
    Other(Box<dyn std::error::Error + Send + Sync>),
}

impl fmt::Display for FromSqlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FromSqlError::InvalidType(t) => write!(f, "unexpected type {t}"),
            FromSqlError::OutOfRange(i) => write!(f, "integer {i} out of range"),
            FromSqlError::Other(e) => e.fmt(f),
        }
    }
}

/// Every error of the SQL surface.
#[derive(Debug)]
pub enum Error {
    /// What SQLite said.
    Sqlite(rusqlite::Error),
    /// What PostgreSQL (or the connection to it) said.
    Pg(postgres::Error),
    /// `query_row` found no row (`.optional()` turns it into `None`).
    NoRows,
    /// Column `column` could not be read as the type asked for.
    Conversion { column: usize, source: FromSqlError },
    /// A parameter could not be bound (an unsigned integer past `i64::MAX`).
    Bind(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Sqlite(e) => e.fmt(f),
            Error::Pg(e) => match e.as_db_error() {
                // The server's own words (with its detail), not "db error".
                Some(db) => write!(f, "{}: {}", db.code().code(), db),
                None => e.fmt(f),
            },
            Error::NoRows => f.write_str("Query returned no rows"),
            Error::Conversion { column, source } => {
                write!(f, "column {column} cannot be read: {source}")
            }
            Error::Bind(why) => write!(f, "parameter cannot be bound: {why}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Sqlite(e) => Some(e),
            Error::Pg(e) => Some(e),
            _ => None,
        }
    }
}

impl From<rusqlite::Error> for Error {
    fn from(e: rusqlite::Error) -> Error {
        match e {
            rusqlite::Error::QueryReturnedNoRows => Error::NoRows,
            e => Error::Sqlite(e),
        }
    }
}

impl Error {
    /// The database could not be reached or dropped the session (PostgreSQL restarting, shut
    /// down by an administrator, not accepting connections, the network): waiting may mend it.
    pub fn is_connection_lost(&self) -> bool {
        match self {
            Error::Pg(e) => match e.as_db_error() {
                // 08: connection exception; 57P0x: shutdown / cannot connect now; 55000: the
                // database does not accept connections now.
                Some(db) => {
                    let code = db.code().code();
                    code.starts_with("08") || code.starts_with("57P") || code == "55000"
                }
                // Not the server's words: a closed session, or the socket's own error.
                None => {
                    e.is_closed()
                        || std::error::Error::source(e)
                            .is_some_and(|s| s.downcast_ref::<std::io::Error>().is_some())
                }
            },
            _ => false,
        }
    }
}

impl From<postgres::Error> for Error {
    fn from(e: postgres::Error) -> Error {
        Error::Pg(e)
    }
}

impl From<FromSqlError> for Error {
    fn from(source: FromSqlError) -> Error {
        Error::Conversion { column: 0, source }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// `query_row`'s missing row as `None`.
pub trait OptionalExtension<T> {
    fn optional(self) -> Result<Option<T>>;
}

impl<T> OptionalExtension<T> for Result<T> {
    fn optional(self) -> Result<Option<T>> {
        match self {
            Ok(v) => Ok(Some(v)),
            Err(Error::NoRows) => Ok(None),
            Err(e) => Err(e),
        }
    }
}
