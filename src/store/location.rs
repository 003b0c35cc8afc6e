//! Where a state directory's store lives: its own SQLite file (the default), or a PostgreSQL
//! database named by `store:` in repos.yaml.
//!
//! Every orch process finds its store from the state directory alone (a supervisor, a CI
//! runner, a delivery process know nothing else), so a command that loads repos.yaml with a
//! `store:` leaves a pointer in the state directory, `store.json`: the URL *without* its
//! password and the NAMES of the environment variables that complete it. A secret is never in
//! repos.yaml, the pointer, an error or a log line; each process reads it from its own
//! environment (inherited from the command that started it), and orch removes those
//! variables from every environment it gives a worker or a CI job.

pub use crate::config::StoreConfig;
use std::path::{Path, PathBuf};

/// The pointer's file name in a state directory.
pub const POINTER_FILE: &str = "store.json";

/// A store that could not be located: what is missing, named, never a secret.
#[derive(Debug, thiserror::Error)]
pub enum LocationError {
    #[error(
        "the store is PostgreSQL, its URL in the environment variable {var} (store.url_env in repos.yaml), but {var} is not set in this process's environment"
    )]
    UrlUnset { var: String },
    #[error(
        "the store is PostgreSQL ({url}), its password in the environment variable {var} (store.password_env in repos.yaml), but {var} is not set in this process's environment"
    )]
    PasswordUnset { url: String, var: String },
    #[error("the URL in {var} (store.url_env) is not a PostgreSQL URL: {url}")]
    NotPostgres { var: String, url: String },
    #[error("cannot read the store pointer {path}: {why}")]
    Pointer { path: PathBuf, why: String },
    #[error("cannot write the store pointer {path}: {source}")]
    WritePointer {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error(
        "the state directory {dir} keeps its state in PostgreSQL ({url}, see {POINTER_FILE} there), but repos.yaml has no store: section: orch would start over in an empty SQLite file beside it. Put the store: section back, or use another state directory"
    )]
    StoreDropped { dir: PathBuf, url: String },
}

impl StoreConfig {
    /// What `orch check` and errors may show: the URL without a password, or the variable.
    pub fn shown(&self) -> String {
        match (&self.url, &self.url_env) {
            (Some(u), _) => super::pg::redact(u),
            (None, Some(v)) => format!("the URL in ${v}"),
            (None, None) => "(no URL)".into(),
        }
    }

    /// The environment variables that hold this store's secrets.
    pub fn secret_vars(&self) -> Vec<String> {
        self.url_env
            .iter()
            .chain(self.password_env.iter())
            .cloned()
            .collect()
    }

    /// The connection settings, completed from this process's environment.
    pub fn resolve(&self) -> Result<postgres::Config, LocationError> {
        let url = match (&self.url, &self.url_env) {
            (Some(u), _) => u.clone(),
            (None, Some(var)) => match std::env::var(var) {
                Ok(u) if !u.is_empty() => u,
                _ => return Err(LocationError::UrlUnset { var: var.clone() }),
            },
            (None, None) => unreachable!("validated: url or url_env"),
        };
        let mut config: postgres::Config = url.parse().map_err(|_| LocationError::NotPostgres {
            var: self.url_env.clone().unwrap_or_else(|| "store.url".into()),
            url: super::pg::redact(&url),
        })?;
        if let Some(var) = &self.password_env {
            match std::env::var(var) {
                Ok(p) => {
                    config.password(p);
                }
                Err(_) => {
                    return Err(LocationError::PasswordUnset {
                        url: super::pg::redact(&url),
                        var: var.clone(),
                    });
                }
            }
        }
        Ok(config)
    }
}

/// The pointer of `state_dir`, if it has one.
pub fn pointer(state_dir: &Path) -> Result<Option<StoreConfig>, LocationError> {
    let path = state_dir.join(POINTER_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text)
            .map(Some)
            .map_err(|e| LocationError::Pointer {
                path,
                why: e.to_string(),
            }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(LocationError::Pointer {
            path,
            why: e.to_string(),
        }),
    }
}

/// Makes `state_dir`'s pointer say what repos.yaml says (`store` of the loaded config),
/// creating the directory if needed. A state directory whose state is in PostgreSQL is not
/// silently turned back into an empty SQLite one when the section disappears.
pub fn settle(state_dir: &Path, store: Option<&StoreConfig>) -> Result<(), LocationError> {
    let current = pointer(state_dir)?;
    match (store, current) {
        (None, None) => Ok(()),
        (None, Some(old)) => Err(LocationError::StoreDropped {
            dir: state_dir.to_path_buf(),
            url: old.shown(),
        }),
        (Some(new), Some(old)) if *new == old => Ok(()),
        (Some(new), _) => {
            let path = state_dir.join(POINTER_FILE);
            let write = || -> std::io::Result<()> {
                std::fs::create_dir_all(state_dir)?;
                let tmp = state_dir.join(format!(".{POINTER_FILE}.{}", std::process::id()));
                std::fs::write(
                    &tmp,
                    serde_json::to_string_pretty(new).expect("serialises") + "\n",
                )?;
                std::fs::rename(&tmp, &path)
            };
            write().map_err(|source| LocationError::WritePointer { path, source })
        }
    }
}

/// The secret-holding variables named by `state_dir`'s pointer (none for SQLite): removed
/// from every environment orch gives a worker or a CI job.
pub fn secret_vars(state_dir: &Path) -> Vec<String> {
    pointer(state_dir)
        .ok()
        .flatten()
        .map(|p| p.secret_vars())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pointer_holds_names_never_a_password_and_is_not_dropped_silently() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let cfg = StoreConfig {
            url: Some("postgres://orch@db.internal:5432/orch".into()),
            url_env: None,
            password_env: Some("ORCH_DB_PASSWORD".into()),
        };
        settle(&state, None).unwrap();
        assert!(!state.exists(), "nothing written for SQLite");
        settle(&state, Some(&cfg)).unwrap();
        assert_eq!(pointer(&state).unwrap(), Some(cfg.clone()));
        assert_eq!(secret_vars(&state), vec!["ORCH_DB_PASSWORD".to_string()]);
        let e = settle(&state, None).unwrap_err().to_string();
        assert!(e.contains("postgres://orch@db.internal:5432/orch"), "{e}");
        assert!(e.contains("store:"), "{e}");
    }

    #[test]
    fn an_unset_variable_is_named_and_a_password_found_in_a_url() {
        let cfg = StoreConfig {
            url: None,
            url_env: Some("ORCH_TEST_UNSET_STORE_URL_VAR".into()),
            password_env: None,
        };
        let e = cfg.resolve().unwrap_err().to_string();
        assert!(e.contains("ORCH_TEST_UNSET_STORE_URL_VAR"), "{e}");
        use crate::config::url_has_password;
        assert!(url_has_password("postgres://orch:s3cret@db/orch"));
        assert!(url_has_password("postgres://db/orch?password=s3cret"));
        assert!(!url_has_password("postgres://orch@db/orch"));
        assert!(!url_has_password("postgres://orch@db/orch?sslmode=disable"));
        assert_eq!(cfg.shown(), "the URL in $ORCH_TEST_UNSET_STORE_URL_VAR");
    }
}
