//! `forge:`: which forge, where, and how orch reaches it.

use super::Check;
use super::env_var_name;
use crate::config::raw::{RawForge, pos};
use crate::config::{ForgeConfig, ForgeKind, GIVE_UP_AFTER, LOST_HOOK_GRACE};
use serde_saphyr::Spanned;
use std::path::Path;
use std::time::Duration;

pub(super) fn validate_forge(c: &mut Check, root: &Path, raw: Option<RawForge>) -> ForgeConfig {
    match raw {
        None => ForgeConfig {
            kind: ForgeKind::Local,
            url: None,
            owner: None,
            token_env: None,
            token_file: None,
            request_timeout: Duration::from_secs(30),
            give_up_after: GIVE_UP_AFTER,
            max_concurrent_runs: 4,
            lost_hook_grace: LOST_HOOK_GRACE,
            path: None,
        },
        Some(f) => {
            // Left out or wrong-typed: reported by `shape`; the rest is checked as local.
            let kind = match &f.kind {
                None => ForgeKind::Local,
                Some(k) => ForgeKind::parse(&k.value).unwrap_or_else(|| {
                    c.err(
                        pos(k),
                        format!(
                            "forge.kind: unknown forge {:?}; one of: {}",
                            k.value,
                            ForgeKind::ALL.map(ForgeKind::as_str).join(", ")
                        ),
                    );
                    ForgeKind::Local
                }),
            };
            if kind == ForgeKind::Forgejo
                && let Some(kind_key) = &f.kind
            {
                for (key, v) in [("url", &f.url), ("owner", &f.owner)] {
                    if v.as_ref().is_none_or(|s| s.value.trim().is_empty()) {
                        c.err(
                            pos(kind_key),
                            format!("forge.kind is forgejo but forge.{key} is missing"),
                        );
                    }
                }
                let given = |v: &Option<Spanned<String>>| {
                    v.as_ref().is_some_and(|s| !s.value.trim().is_empty())
                };
                match (given(&f.token_env), given(&f.token_file)) {
                (false, false) => c.err(
                    pos(kind_key),
                    "forge.kind is forgejo but neither forge.token_file nor forge.token_env is set",
                ),
                (true, true) => c.err(
                    f.token_file.as_ref().and_then(pos),
                    "forge.token_file and forge.token_env are both set: keep one (token_file keeps the token out of every environment)",
                ),
                _ => {}
            }
                if let Some(u) = &f.url
                    && !(u.value.starts_with("http://") || u.value.starts_with("https://"))
                {
                    c.err(
                        pos(u),
                        format!(
                            "forge.url \"{}\" must start with http:// or https://",
                            u.value
                        ),
                    );
                }
            }
            // Never echo the value: it may be the token itself, pasted in by mistake.
            let token_env_ok = f.token_env.as_ref().is_none_or(|t| {
            let ok = env_var_name(&t.value);
            if !ok {
                c.err(
                    pos(t),
                    "forge.token_env must be the NAME of an environment variable holding the token (such as FORGEJO_TOKEN), not the token itself; the value is not shown",
                );
            }
            ok
        });
            let request_timeout = c.duration(
                "forge.request_timeout",
                &f.request_timeout,
                Duration::from_secs(30),
            );
            let give_up_after = c.duration("forge.give_up_after", &f.give_up_after, GIVE_UP_AFTER);
            let max_concurrent_runs =
                c.positive("forge.max_concurrent_runs", &f.max_concurrent_runs, 4) as usize;
            let lost_hook_grace =
                c.duration("forge.lost_hook_grace", &f.lost_hook_grace, LOST_HOOK_GRACE);
            let path = f.path.as_ref().and_then(|p| {
            if kind != ForgeKind::Local {
                c.err(
                    pos(p),
                    "forge.path is the local forge's directory: a forgejo forge has none (leave it out)",
                );
                return None;
            }
            let value = p.value.trim();
            if value.is_empty() {
                c.err(pos(p), "forge.path is empty");
                return None;
            }
            Some(root.join(value))
        });
            ForgeConfig {
                kind,
                url: f.url.map(|s| s.value.trim_end_matches('/').to_string()),
                owner: f.owner.map(|s| s.value),
                token_env: f.token_env.map(|s| s.value).filter(|_| token_env_ok),
                token_file: f
                    .token_file
                    .map(|s| root.join(s.value.trim()))
                    .filter(|p| !p.as_os_str().is_empty()),
                request_timeout,
                give_up_after,
                max_concurrent_runs,
                lost_hook_grace,
                path,
            }
        }
    }
}
