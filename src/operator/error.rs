//! The operator API's error: what failed, in words an operator can act on, and which kind of
//! failure it is. Each face maps the kind itself — the command line to its exit code
//! (`cli::Failure`), the board to an HTTP status (`serve::api::ApiError`) — so neither decodes
//! the other's.

use crate::config::{ConfigError, UnknownRepo};
use crate::contract::ContractError;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The request is wrong (an unknown repository, a cursor that is not one, an empty
    /// reason): fix it and ask again. Exit code 2; HTTP 400.
    #[error("{0}")]
    BadInput(String),
    /// What the request names is not there (no such worker). Exit code 1; HTTP 404.
    #[error("{0}")]
    NotFound(String),
    /// The request is understood and the answer is "no" (cancelling a worker that has ended,
    /// releasing a lock not held). Exit code 1; HTTP 404, as for what is not there.
    #[error("{0}")]
    No(String),
    /// The system could not do the job (a locked database, an I/O failure, a supervisor that
    /// did not answer in time): retrying may work. Exit code 3; HTTP 503.
    #[error("{0}")]
    Unavailable(String),
}

impl Error {
    pub fn bad_input(message: impl Into<String>) -> Self {
        Error::BadInput(message.into())
    }
    pub fn not_found(message: impl Into<String>) -> Self {
        Error::NotFound(message.into())
    }
    pub fn no(message: impl Into<String>) -> Self {
        Error::No(message.into())
    }
    pub fn unavailable(message: impl Into<String>) -> Self {
        Error::Unavailable(message.into())
    }
}

impl From<crate::app::Error> for Error {
    fn from(e: crate::app::Error) -> Self {
        use crate::app::ErrorKind;
        let message = e.to_string();
        match e.kind() {
            ErrorKind::BadInput => Error::BadInput(message),
            ErrorKind::Unavailable => Error::Unavailable(message),
            ErrorKind::No => Error::No(message),
        }
    }
}
impl From<StoreError> for Error {
    fn from(e: StoreError) -> Self {
        crate::app::Error::from(e).into()
    }
}
impl From<ConfigError> for Error {
    fn from(e: ConfigError) -> Self {
        Error::BadInput(e.to_string())
    }
}
impl From<ContractError> for Error {
    fn from(e: ContractError) -> Self {
        Error::BadInput(e.to_string())
    }
}
impl From<UnknownRepo> for Error {
    fn from(e: UnknownRepo) -> Self {
        Error::BadInput(e.to_string())
    }
}
impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Unavailable(e.to_string())
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
