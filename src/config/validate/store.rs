//! `store:`: the PostgreSQL database orch keeps its state in instead of the state directory's
//! SQLite file.

use super::{Check, env_var_name};
use crate::config::raw::{RawStore, pos};
use crate::config::{StoreConfig, url_has_password, url_is_postgres};
use serde_saphyr::Spanned;

/// `store:`: one of `url` (no password in it) or `url_env`, and an optional `password_env`.
/// Values that may be secrets are never echoed.
pub(super) fn validate_store(c: &mut Check, raw: RawStore) -> Option<StoreConfig> {
    let mut ok = true;
    let mut name = |c: &mut Check, key: &str, v: Option<Spanned<String>>| {
        v.and_then(|t| {
            if env_var_name(&t.value) {
                Some(t.value)
            } else {
                c.err(
                    pos(&t),
                    format!("store.{key} must be the NAME of an environment variable (such as ORCH_DATABASE_URL), not its value; the value is not shown"),
                );
                ok = false;
                None
            }
        })
    };
    let url_env = name(c, "url_env", raw.url_env.clone());
    let password_env = name(c, "password_env", raw.password_env.clone());
    let url = match raw.url.clone() {
        Some(u) if url_has_password(&u.value) => {
            c.err(
                pos(&u),
                "store.url holds a password: repos.yaml is read by every worker and kept in git; give the password in an environment variable (store.password_env) or the whole URL in one (store.url_env); the value is not shown",
            );
            ok = false;
            None
        }
        Some(u) if !url_is_postgres(&u.value) => {
            c.err(
                pos(&u),
                format!(
                    "store.url must be a PostgreSQL URL (postgres://user@host:port/database), got {:?}; leave store out for the state directory's SQLite file",
                    u.value
                ),
            );
            ok = false;
            None
        }
        Some(u) => Some(u.value),
        None => None,
    };
    match (&url, &url_env) {
        (Some(_), Some(_)) => {
            c.err(
                pos(raw.url.as_ref().or(raw.url_env.as_ref())?),
                "store: give either url or url_env, not both",
            );
            None
        }
        (None, None) if ok => {
            c.err(
                None,
                "store: needs url (postgres://user@host/database, the password in store.password_env) or url_env (the NAME of a variable holding the whole URL)",
            );
            None
        }
        _ if !ok => None,
        _ => Some(StoreConfig {
            url,
            url_env,
            password_env,
        }),
    }
}
