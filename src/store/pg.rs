//! The PostgreSQL backend of the SQL surface (`sql.rs`), with the `postgres` crate (sync: it
//! fits the threaded supervisors).
//!
//! The store's SQL is written once, with SQLite's `?N` placeholders: they become `$N` here
//! (outside string literals, once per statement: statements are cached per connection).
//! Parameters are bound leniently — a [`Value`] converts to the type PostgreSQL inferred for
//! its placeholder — and every column reads back as a [`Value`] (`BOOL` as 0/1, `NUMERIC` as
//! an integer when it has no fraction), so a store module sees what SQLite would give it.
//!
//! Writers are serialised across hosts by one transaction-scoped advisory lock
//! ([`WRITE_LOCK`]), taken first in every write transaction, as SQLite's `BEGIN IMMEDIATE`
//! serialises them on one host: every check-then-write of the store stays correct. Readers
//! take a `REPEATABLE READ READ ONLY` snapshot.

use super::value::{Error, Result, Value};
use bytes::{BufMut, BytesMut};
use postgres::types::{FromSql, IsNull, ToSql, Type};
use std::collections::HashMap;

/// The advisory lock key every orch write transaction takes ("orch" in ASCII, then 22).
pub const WRITE_LOCK: i64 = 0x6f72_6368_0000_0022;

/// One connection and the statements prepared on it.
pub struct PgConn {
    client: postgres::Client,
    cache: HashMap<String, postgres::Statement>,
    /// The channels this session LISTENs on.
    listening: Vec<String>,
    /// What a new session is made from when this one is lost (the server restarted, the
    /// session ended by an administrator or by `IDLE_IN_TRANSACTION`).
    config: postgres::Config,
    schema: Option<String>,
    lock_timeout: Option<std::time::Duration>,
    /// A statement failed: whether the session still lives is asked before the next one.
    suspect: bool,
}

/// How long a session may sit inside a transaction without a statement before the server
/// ends it (`idle_in_transaction_session_timeout`).
pub const IDLE_IN_TRANSACTION: std::time::Duration = std::time::Duration::from_secs(15);

impl PgConn {
    /// Connects to `url` (`postgres://user:password@host:port/db`, or key=value pairs); with
    /// `schema`, every name resolves in it (the conformance tests' fresh schema per test).
    pub fn connect(url: &str, schema: Option<&str>) -> Result<PgConn> {
        let config: postgres::Config = url.parse()?;
        PgConn::connect_with(&config, schema)
    }

    /// [`PgConn::connect`] with settings already parsed (a password added from the
    /// environment).
    pub fn connect_with(config: &postgres::Config, schema: Option<&str>) -> Result<PgConn> {
        Ok(PgConn {
            client: PgConn::session(config, schema)?,
            cache: HashMap::new(),
            listening: Vec::new(),
            config: config.clone(),
            schema: schema.map(str::to_string),
            lock_timeout: None,
            suspect: false,
        })
    }

    /// A new session with orch's settings.
    fn session(config: &postgres::Config, schema: Option<&str>) -> Result<postgres::Client> {
        // A server cut off by a network that drops packets (rather than refusing them) must
        // not hold a statement for the kernel's TCP timeout (about 15 min): orch waits out an
        // unreachable database by retrying, and that needs each attempt to fail in bounded
        // time. What the URL sets itself (connect_timeout, tcp_user_timeout) stays.
        let mut config = config.clone();
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(std::time::Duration::from_secs(10));
        }
        if config.get_tcp_user_timeout().is_none() {
            config.tcp_user_timeout(std::time::Duration::from_secs(30));
        }
        config
            .keepalives_idle(std::time::Duration::from_secs(15))
            .keepalives_interval(std::time::Duration::from_secs(5))
            .keepalives_retries(3);
        let mut client = config.connect(postgres::NoTls)?;
        // A process stopped (SIGSTOP, a frozen host) inside a transaction would keep the write
        // lock from every node; the server ends its session instead, which frees the lock and
        // rolls the transaction back. orch's transactions never wait between statements.
        client.batch_execute(&format!(
            "SET idle_in_transaction_session_timeout = '{}ms'",
            IDLE_IN_TRANSACTION.as_millis()
        ))?;
        if let Some(schema) = schema {
            client.batch_execute(&format!("SET search_path TO {}", quote_ident(schema)))?;
        }
        Ok(client)
    }

    /// How long a transaction waits for the write lock before it reports the store busy.
    pub fn set_lock_timeout(&mut self, wait: std::time::Duration) -> Result<()> {
        self.client
            .batch_execute(&format!("SET lock_timeout = '{}ms'", wait.as_millis()))?;
        self.lock_timeout = Some(wait);
        Ok(())
    }

    /// A new session in place of a lost one (its prepared statements and LISTENs went with
    /// it). Fails while the server is unreachable: the caller's next transaction tries again.
    fn reconnect(&mut self) -> Result<()> {
        self.client = PgConn::session(&self.config, self.schema.as_deref())?;
        self.cache.clear();
        self.listening.clear();
        if let Some(wait) = self.lock_timeout {
            self.set_lock_timeout(wait)?;
        }
        tracing::info!("reconnected to the database after its session was lost");
        Ok(())
    }

    /// Before a transaction: a session known lost is replaced. (A session lost while idle is
    /// known at its next statement, which fails: that caller's transaction fails once — a
    /// supervisor retries it — and the one after runs on a new session.)
    fn ensure_session(&mut self) -> Result<()> {
        let lost = self.client.is_closed()
            || (self.suspect
                && self
                    .client
                    .is_valid(std::time::Duration::from_secs(2))
                    .is_err());
        if lost {
            self.reconnect()?;
        }
        self.suspect = false;
        Ok(())
    }

    /// A transaction of this session failed: before the next one, whether the session still
    /// lives is asked (one round trip), so a lost one is replaced without a second failure.
    pub fn failed(&mut self) {
        self.suspect = true;
    }

    /// Outside any transaction (schema creation in tests).
    pub fn batch(&mut self, sql: &str) -> Result<()> {
        Ok(self.client.batch_execute(sql)?)
    }

    /// A write transaction: the advisory lock is taken before anything is read.
    pub fn write(&mut self) -> Result<PgTx<'_>> {
        self.ensure_session()?;
        let mut tx = self.client.transaction()?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&WRITE_LOCK])?;
        Ok(PgTx::new(tx, &mut self.cache))
    }

    /// Waits up to `timeout` for a notification on `channel` (LISTENing on it from the first
    /// call on): true when one came. Notifications are lost while disconnected, so callers
    /// poll too (this is how long each poll waits).
    pub fn wait_notified(&mut self, channel: &str, timeout: std::time::Duration) -> Result<bool> {
        self.ensure_session()?;
        if !self.listening.iter().any(|c| c == channel) {
            self.client
                .batch_execute(&format!("LISTEN {}", quote_ident(channel)))?;
            self.listening.push(channel.to_string());
        }
        use postgres::fallible_iterator::FallibleIterator;
        let mut notes = self.client.notifications();
        if notes.iter().next()?.is_some() {
            return Ok(true); // one came in since the last wait
        }
        Ok(notes.timeout_iter(timeout).next()?.is_some())
    }

    /// A read-only snapshot.
    pub fn read(&mut self) -> Result<PgTx<'_>> {
        self.ensure_session()?;
        let tx = self
            .client
            .build_transaction()
            .isolation_level(postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()?;
        Ok(PgTx::new(tx, &mut self.cache))
    }
}

/// A PostgreSQL transaction behind a [`super::sql::Tx`].
pub struct PgTx<'c> {
    tx: std::cell::RefCell<postgres::Transaction<'c>>,
    cache: std::cell::RefCell<&'c mut HashMap<String, postgres::Statement>>,
}

/// What the SQL surface asks of a PostgreSQL transaction. A trait object keeps
/// `sql::Tx` covariant in its connection's lifetime (a transaction's `RefCell` would not be).
pub trait PgExec {
    fn prepare(&self, sql: &str, p: &[Value]) -> Result<postgres::Statement>;
    fn execute(&self, stmt: &postgres::Statement, p: &[Value]) -> Result<usize>;
    fn query(&self, stmt: &postgres::Statement, p: &[Value]) -> Result<Vec<Vec<Value>>>;
    fn batch(&self, sql: &str) -> Result<()>;
    fn commit(self: Box<Self>) -> Result<()>;
}

impl<'c> PgTx<'c> {
    fn new(
        tx: postgres::Transaction<'c>,
        cache: &'c mut HashMap<String, postgres::Statement>,
    ) -> PgTx<'c> {
        PgTx {
            tx: std::cell::RefCell::new(tx),
            cache: std::cell::RefCell::new(cache),
        }
    }
}

impl PgExec for PgTx<'_> {
    fn commit(self: Box<Self>) -> Result<()> {
        Ok(self.tx.into_inner().commit()?)
    }

    /// The statement for `sql`, prepared on first use. PostgreSQL infers each parameter's type
    /// from where it stands; where it cannot (`?3 - ?4`: two unknowns), the types of the first
    /// values bound are declared instead (a savepoint keeps the failed attempt from aborting
    /// the transaction).
    fn prepare(&self, sql: &str, p: &[Value]) -> Result<postgres::Statement> {
        if let Some(s) = self.cache.borrow().get(sql) {
            return Ok(s.clone());
        }
        let text = placeholders(sql);
        let stmt = {
            let mut tx = self.tx.borrow_mut();
            tx.batch_execute("SAVEPOINT orch_prepare")?;
            match tx.prepare(&text) {
                Ok(s) => {
                    tx.batch_execute("RELEASE SAVEPOINT orch_prepare")?;
                    s
                }
                Err(e) if e.code().is_some_and(untyped) => {
                    tx.batch_execute(
                        "ROLLBACK TO SAVEPOINT orch_prepare; RELEASE SAVEPOINT orch_prepare",
                    )?;
                    let types: Vec<Type> = p
                        .iter()
                        .map(|v| match v {
                            Value::Integer(_) => Type::INT8,
                            Value::Real(_) => Type::FLOAT8,
                            Value::Blob(_) => Type::BYTEA,
                            Value::Text(_) | Value::Null => Type::TEXT,
                        })
                        .collect();
                    tx.prepare_typed(&text, &types)?
                }
                Err(e) => {
                    let _ = tx.batch_execute(
                        "ROLLBACK TO SAVEPOINT orch_prepare; RELEASE SAVEPOINT orch_prepare",
                    );
                    return Err(e.into());
                }
            }
        };
        self.cache
            .borrow_mut()
            .insert(sql.to_string(), stmt.clone());
        Ok(stmt)
    }

    fn execute(&self, stmt: &postgres::Statement, p: &[Value]) -> Result<usize> {
        let n = self.tx.borrow_mut().execute(stmt, &refs(p))?;
        Ok(n as usize)
    }

    /// Every row, each as its values (read whole: a row callback may use the transaction).
    fn query(&self, stmt: &postgres::Statement, p: &[Value]) -> Result<Vec<Vec<Value>>> {
        let rows = self.tx.borrow_mut().query(stmt, &refs(p))?;
        rows.iter()
            .map(|r| {
                (0..r.len())
                    .map(|i| r.try_get::<_, Value>(i).map_err(Error::from))
                    .collect()
            })
            .collect()
    }

    fn batch(&self, sql: &str) -> Result<()> {
        Ok(self.tx.borrow_mut().batch_execute(sql)?)
    }
}

/// PostgreSQL could not type a parameter from its place in the statement.
fn untyped(code: &postgres::error::SqlState) -> bool {
    use postgres::error::SqlState;
    [
        SqlState::AMBIGUOUS_FUNCTION,
        SqlState::INDETERMINATE_DATATYPE,
        SqlState::UNDEFINED_FUNCTION,
    ]
    .contains(code)
}

fn refs(p: &[Value]) -> Vec<&(dyn ToSql + Sync)> {
    p.iter().map(|v| v as &(dyn ToSql + Sync)).collect()
}

/// `?N` → `$N` (and a bare `?` → the next number), outside string literals, quoted names
/// and comments.
pub fn placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut chars = sql.chars().peekable();
    let mut next = 1;
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                out.push(c);
                for d in chars.by_ref() {
                    out.push(d);
                    if d == c {
                        break;
                    }
                }
            }
            '-' if chars.peek() == Some(&'-') => {
                out.push(c);
                for d in chars.by_ref() {
                    out.push(d);
                    if d == '\n' {
                        break;
                    }
                }
            }
            '?' => {
                let mut digits = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    digits.push(*d);
                    chars.next();
                }
                out.push('$');
                if digits.is_empty() {
                    out.push_str(&next.to_string());
                    next += 1;
                } else {
                    next = digits.parse::<usize>().unwrap_or(0) + 1;
                    out.push_str(&digits);
                }
            }
            c => out.push(c),
        }
    }
    out
}

fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `url` with the password of its userinfo (or a `password=` pair) replaced by `***`: what an
/// error, a log line or `orch check` may show.
pub fn redact(url: &str) -> String {
    if let Some(scheme_end) = url.find("://") {
        let rest = &url[scheme_end + 3..];
        let host_start = rest.find(['/', '?']).unwrap_or(rest.len());
        if let Some(at) = rest[..host_start].rfind('@') {
            let userinfo = &rest[..at];
            if let Some(colon) = userinfo.find(':') {
                return format!(
                    "{}{}:***{}",
                    &url[..scheme_end + 3],
                    &userinfo[..colon],
                    &rest[at..]
                );
            }
        }
        // A password given as a query parameter.
        if let Some(q) = url.find('?') {
            let (base, query) = url.split_at(q + 1);
            let pairs: Vec<String> = query
                .split('&')
                .map(|kv| match kv.split_once('=') {
                    Some((k, _)) if k == "password" => format!("{k}=***"),
                    _ => kv.to_string(),
                })
                .collect();
            return format!("{base}{}", pairs.join("&"));
        }
        return url.to_string();
    }
    url.split_whitespace()
        .map(|kv| match kv.split_once('=') {
            Some((k, _)) if k == "password" => format!("{k}=***"),
            _ => kv.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

type BoxError = Box<dyn std::error::Error + Sync + Send>;

impl Value {
    fn integer(&self) -> std::result::Result<i64, BoxError> {
        match self {
            Value::Integer(i) => Ok(*i),
            Value::Real(f) if f.fract() == 0.0 => Ok(*f as i64),
            Value::Text(s) => Ok(s.parse()?),
            other => Err(format!("{other:?} is not an integer").into()),
        }
    }

    fn real(&self) -> std::result::Result<f64, BoxError> {
        match self {
            Value::Integer(i) => Ok(*i as f64),
            Value::Real(f) => Ok(*f),
            Value::Text(s) => Ok(s.parse()?),
            other => Err(format!("{other:?} is not a number").into()),
        }
    }

    fn text(&self) -> std::result::Result<String, BoxError> {
        match self {
            Value::Integer(i) => Ok(i.to_string()),
            Value::Real(f) => Ok(f.to_string()),
            Value::Text(s) => Ok(s.clone()),
            Value::Blob(b) => Ok(String::from_utf8(b.clone())?),
            Value::Null => Err("NULL has no text".into()),
        }
    }
}

/// Lenient: converts to whatever type PostgreSQL inferred for the placeholder.
impl ToSql for Value {
    fn to_sql(&self, ty: &Type, out: &mut BytesMut) -> std::result::Result<IsNull, BoxError> {
        if *self == Value::Null {
            return Ok(IsNull::Yes);
        }
        match *ty {
            Type::INT8 => self.integer()?.to_sql(ty, out),
            Type::INT4 => i32::try_from(self.integer()?)?.to_sql(ty, out),
            Type::INT2 => i16::try_from(self.integer()?)?.to_sql(ty, out),
            Type::BOOL => (self.integer()? != 0).to_sql(ty, out),
            Type::FLOAT8 => self.real()?.to_sql(ty, out),
            Type::FLOAT4 => (self.real()? as f32).to_sql(ty, out),
            Type::BYTEA => match self {
                Value::Blob(b) => b.as_slice().to_sql(ty, out),
                other => other.text()?.as_bytes().to_sql(ty, out),
            },
            Type::JSONB => {
                out.put_u8(1);
                out.put_slice(self.text()?.as_bytes());
                Ok(IsNull::No)
            }
            // TEXT, VARCHAR, JSON, NAME, UNKNOWN...: the text form.
            _ => {
                out.put_slice(self.text()?.as_bytes());
                Ok(IsNull::No)
            }
        }
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    postgres::types::to_sql_checked!();
}

impl<'a> FromSql<'a> for Value {
    fn from_sql(ty: &Type, raw: &'a [u8]) -> std::result::Result<Value, BoxError> {
        Ok(match *ty {
            Type::INT8 => Value::Integer(i64::from_sql(ty, raw)?),
            Type::INT4 => Value::Integer(i32::from_sql(ty, raw)? as i64),
            Type::INT2 => Value::Integer(i16::from_sql(ty, raw)? as i64),
            Type::OID => Value::Integer(u32::from_sql(ty, raw)? as i64),
            Type::BOOL => Value::Integer(bool::from_sql(ty, raw)? as i64),
            Type::FLOAT8 => Value::Real(f64::from_sql(ty, raw)?),
            Type::FLOAT4 => Value::Real(f32::from_sql(ty, raw)? as f64),
            Type::NUMERIC => numeric(raw)?,
            Type::BYTEA => Value::Blob(raw.to_vec()),
            Type::JSONB => Value::Text(std::str::from_utf8(raw.get(1..).unwrap_or(&[]))?.into()),
            _ => Value::Text(std::str::from_utf8(raw)?.to_string()),
        })
    }

    fn from_sql_null(_: &Type) -> std::result::Result<Value, BoxError> {
        Ok(Value::Null)
    }

    fn accepts(_: &Type) -> bool {
        true
    }
}

/// NUMERIC's binary form (what `sum(bigint)` returns): base-10000 digits. An integer when it
/// has no fraction and fits, else a float.
fn numeric(raw: &[u8]) -> std::result::Result<Value, BoxError> {
    let word = |i: usize| -> std::result::Result<i16, BoxError> {
        Ok(i16::from_be_bytes(
            raw.get(i..i + 2).ok_or("short NUMERIC")?.try_into()?,
        ))
    };
    let (ndigits, weight, sign, dscale) = (word(0)?, word(2)?, word(4)? as u16, word(6)?);
    if sign == 0xC000 {
        return Ok(Value::Real(f64::NAN));
    }
    let mut int: i128 = 0;
    let mut real = 0f64;
    let mut exact = dscale == 0;
    for k in 0..ndigits as i32 {
        let d = word(8 + 2 * k as usize)? as i128;
        let power = weight as i32 - k;
        real += d as f64 * 10000f64.powi(power);
        if power >= 0 {
            int = int
                .checked_mul(10000)
                .and_then(|v| v.checked_add(d))
                .unwrap_or_else(|| {
                    exact = false;
                    0
                });
        } else if d != 0 {
            exact = false;
        }
    }
    // Trailing zero groups are not stored: scale the integer part up to its weight.
    let stored = (ndigits as i32).min(weight as i32 + 1).max(0);
    for _ in stored..=weight as i32 {
        int = int.checked_mul(10000).unwrap_or_else(|| {
            exact = false;
            0
        });
    }
    let negative = sign == 0x4000;
    match i64::try_from(int) {
        Ok(i) if exact => Ok(Value::Integer(if negative { -i } else { i })),
        _ => Ok(Value::Real(if negative { -real } else { real })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_numbered_outside_literals() {
        assert_eq!(
            placeholders("SELECT a FROM t WHERE b = ?1 AND c = '?2' AND d = ?12 -- ?3\n AND e = ?"),
            "SELECT a FROM t WHERE b = $1 AND c = '?2' AND d = $12 -- ?3\n AND e = $13"
        );
        assert_eq!(placeholders("VALUES (?, ?)"), "VALUES ($1, $2)");
    }

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact("postgres://orch:s3cret@db.example:5432/orch"),
            "postgres://orch:***@db.example:5432/orch"
        );
        assert_eq!(
            redact("postgres://orch@db/orch?password=s3cret&sslmode=disable"),
            "postgres://orch@db/orch?password=***&sslmode=disable"
        );
        assert_eq!(
            redact("host=/tmp user=orch password=s3cret dbname=orch"),
            "host=/tmp user=orch password=*** dbname=orch"
        );
        assert_eq!(redact("postgres://db/orch"), "postgres://db/orch");
    }

    #[test]
    fn numerics_read_as_integers_when_whole() {
        // 12345678 = [1234, 5678], weight 1; 20000 = [2] weight 1 (trailing zero group dropped).
        let n = |digits: &[i16], weight: i16, sign: u16, dscale: i16| {
            let mut raw = Vec::new();
            for w in [digits.len() as i16, weight, sign as i16, dscale] {
                raw.extend_from_slice(&w.to_be_bytes());
            }
            for d in digits {
                raw.extend_from_slice(&d.to_be_bytes());
            }
            numeric(&raw).unwrap()
        };
        assert_eq!(n(&[1234, 5678], 1, 0, 0), Value::Integer(12_345_678));
        assert_eq!(n(&[2], 1, 0, 0), Value::Integer(20_000));
        assert_eq!(n(&[7], 0, 0x4000, 0), Value::Integer(-7));
        assert_eq!(n(&[], 0, 0, 0), Value::Integer(0));
        assert_eq!(n(&[1, 5000], 0, 0, 1), Value::Real(1.5));
    }
}
