//! The library's error: what failed, in words an operator can act on, and which kind of
//! failure it is — so that the command line can tell bad input from a system that could not
//! do the job (a locked database, an I/O error), which a retry may fix.

use crate::config::{ConfigError, UnknownRepo};
use crate::contract::ContractError;
use crate::store::StoreError;
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Contract(#[from] ContractError),
    #[error(transparent)]
    UnknownRepo(#[from] UnknownRepo),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The forge cannot be set up as configured (token variable missing, bad URL, …).
    #[error("{0}")]
    ForgeSetup(String),
    #[error(transparent)]
    Spawn(#[from] super::spawn::SpawnError),
    #[error(transparent)]
    Supervise(#[from] super::supervisor::SuperviseError),
    #[error("{}", io_message(what, path, source))]
    Io {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot start the supervisor for {worker}: {source}")]
    StartSupervisor {
        worker: String,
        source: std::io::Error,
    },
    /// A request that cannot be carried out as asked (the message says why and what to do).
    #[error("{0}")]
    Refused(String),
    /// The request is understood and valid, and the answer is "no" (e.g. cancelling a worker
    /// that has already ended).
    #[error("{0}")]
    No(String),
}

/// What kind of failure an [`Error`] is, for exit codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// The input (files, arguments, state the user pointed at) is wrong: fix it and rerun.
    BadInput,
    /// The system could not do the job (database locked, I/O failure): retrying may work.
    Unavailable,
    /// The command ran and the answer is "no" (e.g. a supervisor that could not go on).
    No,
}

impl Error {
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::Store(e) => store_kind(e),
            Error::Spawn(super::spawn::SpawnError::Store(e)) => store_kind(e),
            Error::Spawn(
                super::spawn::SpawnError::UpstreamRed(_)
                | super::spawn::SpawnError::AgentLimited(_),
            ) => ErrorKind::No,
            Error::Supervise(super::supervisor::SuperviseError::Store(e)) => store_kind(e),
            Error::Supervise(super::supervisor::SuperviseError::Storage(_)) => {
                ErrorKind::Unavailable
            }
            Error::Io { .. } | Error::StartSupervisor { .. } => ErrorKind::Unavailable,
            Error::Supervise(_) | Error::No(_) => ErrorKind::No,
            Error::Config(_)
            | Error::Contract(_)
            | Error::UnknownRepo(_)
            | Error::ForgeSetup(_)
            | Error::Spawn(_)
            | Error::Refused(_) => ErrorKind::BadInput,
        }
    }

    pub fn io(what: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        Error::Io {
            what,
            path: path.into(),
            source,
        }
    }
}

/// A database another process holds, or one that fails under us, is not the user's input; a
/// state directory that cannot be made or a file that is not a database is.
fn store_kind(e: &StoreError) -> ErrorKind {
    match e {
        StoreError::Locked { .. }
        | StoreError::Open { .. }
        | StoreError::Sql { .. }
        | StoreError::NoSpace { .. }
        | StoreError::Fenced { .. } => ErrorKind::Unavailable,
        StoreError::StateDir { .. }
        | StoreError::Corrupt { .. }
        | StoreError::Damaged { .. }
        | StoreError::TooNew { .. }
        | StoreError::Location(_) => ErrorKind::BadInput,
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A file system that refuses writes is said in those words, with the file and the errno
/// (`no space left on device writing <path> (ENOSPC)`); any other I/O error as it is.
fn io_message(what: &str, path: &std::path::Path, source: &std::io::Error) -> String {
    match crate::store::errno_name(source) {
        Some(errno) => format!(
            "{} writing {} ({errno}; {what})",
            crate::store::errno_words(errno),
            path.display()
        ),
        None => format!("{what} {}: {source}", path.display()),
    }
}
