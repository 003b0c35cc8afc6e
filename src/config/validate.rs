//! Validation: turns the raw shapes into a [`Config`], collecting every problem with its position.
//!
//! One validator per section of the file, each in its own module where it is more than a few
//! lines; [`validate`] calls them in the file's order of checks, so that the problems are
//! found in the same order whatever the split.

mod alerts;
pub(super) mod ci_env;
mod forge;
mod land;
mod repos;
mod store;
mod worker;

use super::raw::{RawCi, RawConfig, RawHistory, RawNode, RawServe, pos};
use super::{CiConfig, Config, HistoryConfig, LandConfig, ServeConfig};
use crate::diag::{Diagnostic, Diagnostics};
use crate::duration;
use crate::yaml::Pos;
use serde_saphyr::Spanned;
use std::path::{Path, PathBuf};
use std::time::Duration;

struct Check<'a> {
    file: &'a Path,
    diags: Vec<Diagnostic>,
}

impl Check<'_> {
    fn err(&mut self, pos: Option<Pos>, msg: impl Into<String>) {
        self.diags.push(Diagnostic::new(self.file, pos, msg));
    }

    fn duration(&mut self, key: &str, v: &Option<Spanned<String>>, default: Duration) -> Duration {
        match v {
            None => default,
            Some(s) => match duration::parse(&s.value) {
                Ok(d) => d,
                Err(e) => {
                    self.err(pos(s), format!("{key}: {e}"));
                    default
                }
            },
        }
    }

    fn positive(&mut self, key: &str, v: &Option<Spanned<i64>>, default: i64) -> i64 {
        match v {
            None => default,
            Some(s) if s.value > 0 => s.value,
            Some(s) => {
                self.err(
                    pos(s),
                    format!("{key} must be greater than zero, got {}", s.value),
                );
                default
            }
        }
    }
}

/// Where a clone's path really leads (symlinks resolved): `Config::load` passes the file
/// system's answer, `Config::from_str` a lexical one; validation itself stays pure.
pub(super) type Resolve<'a> = &'a dyn Fn(&Path) -> PathBuf;

pub(super) fn validate(
    raw: RawConfig,
    file: &Path,
    resolve: Resolve,
) -> Result<Config, Diagnostics> {
    let mut c = Check {
        file,
        diags: Vec::new(),
    };
    let root = file.parent().unwrap_or(Path::new("."));

    let forge = forge::validate_forge(&mut c, root, raw.forge);
    let ci = validate_ci(&mut c, raw.ci);
    // land (the organisation's; a repository's own `land:` overrides it key by key)
    let land = land::validate_land(
        &mut c,
        "land",
        &raw.land.unwrap_or_default(),
        LandConfig::default_for(forge.kind),
        forge.kind,
    );
    let downstream = land::validate_downstream(&mut c, &raw.downstream.unwrap_or_default());
    let history = validate_history(&mut c, raw.history);
    let serve = validate_serve(&mut c, raw.serve);
    let store = raw.store.and_then(|st| store::validate_store(&mut c, st));
    let node_name = validate_node(&mut c, raw.node);
    let worker = worker::validate_worker(&mut c, root, raw.worker, &forge);
    let alerts = alerts::validate_alerts(&mut c, raw.alerts);
    let org = repos::Inherited {
        protected_paths: &ci.protected_paths,
        land,
        forge: forge.kind,
    };
    let (repos, graph) = repos::validate_repos(&mut c, root, resolve, raw.repos, org);

    if c.diags.is_empty() {
        Ok(Config {
            file: file.to_path_buf(),
            forge,
            ci,
            worker,
            alerts,
            downstream,
            history,
            serve,
            store,
            node_name,
            repos,
            graph,
        })
    } else {
        let mut diags = Diagnostics(c.diags);
        diags.sort();
        Err(diags)
    }
}

fn validate_ci(c: &mut Check, raw: Option<RawCi>) -> CiConfig {
    let raw_ci = raw.unwrap_or(RawCi {
        sync_job: None,
        required_jobs: None,
        start_timeout: None,
        poll_interval: None,
        protected_paths: None,
    });
    let org_protected = raw_ci
        .protected_paths
        .as_ref()
        .map(|v| protected_paths(c, "ci.protected_paths", v));
    CiConfig {
        sync_job: raw_ci
            .sync_job
            .map(|s| s.value)
            .unwrap_or_else(|| "radicle-push".into()),
        required_jobs: raw_ci
            .required_jobs
            .map(|v| v.into_iter().map(|s| s.value).collect()),
        start_timeout: c.duration(
            "ci.start_timeout",
            &raw_ci.start_timeout,
            Duration::from_secs(300),
        ),
        poll_interval: c.duration(
            "ci.poll_interval",
            &raw_ci.poll_interval,
            Duration::from_secs(10),
        ),
        protected_paths: org_protected,
    }
}

fn validate_history(c: &mut Check, raw: Option<RawHistory>) -> HistoryConfig {
    HistoryConfig {
        keep: c.duration(
            "history.keep",
            &raw.unwrap_or_default().keep,
            crate::config::HISTORY_KEEP,
        ),
    }
}

fn validate_serve(c: &mut Check, raw: Option<RawServe>) -> ServeConfig {
    let raw_serve = raw.unwrap_or_default();
    // Never echo the value: it may be the token itself, pasted in by mistake.
    let token_env = raw_serve.token_env.and_then(|t| {
        if env_var_name(&t.value) {
            Some(t.value)
        } else {
            c.err(
                pos(&t),
                "serve.token_env must be the NAME of an environment variable holding the board's token (such as ORCH_BOARD_TOKEN), not the token itself; the value is not shown",
            );
            None
        }
    });
    ServeConfig { token_env }
}

fn validate_node(c: &mut Check, raw: Option<RawNode>) -> Option<String> {
    raw.and_then(|n| n.name)
        .and_then(|n| match crate::node::valid(&n.value) {
            Ok(()) => Some(n.value),
            Err(why) => {
                c.err(pos(&n), format!("node.name: {why}"));
                None
            }
        })
}

/// A model's name (`worker.model`, an override, a repository's `model`), refused with its
/// position when it could not be one argument of the agent's command line.
fn model_name(c: &mut Check, key: &str, raw: &Option<Spanned<String>>) -> Option<String> {
    let m = raw.as_ref()?;
    if let Some(why) = super::model::name_problem(&m.value) {
        c.err(
            pos(m),
            format!(
                "{key}: \"{}\" is not a model name: {why}",
                m.value.escape_debug()
            ),
        );
        return None;
    }
    Some(m.value.trim().to_string())
}

/// A `protected_paths` list: each entry a pattern (see `protect`), refused with its position.
fn protected_paths(
    c: &mut Check,
    key: &str,
    raw: &[Spanned<String>],
) -> Vec<crate::protect::Pattern> {
    let mut out = Vec::new();
    for entry in raw {
        match crate::protect::Pattern::parse(&entry.value) {
            Ok(p) => out.push(p),
            Err(why) => c.err(
                pos(entry),
                format!(
                    "{key}: \"{}\" is not a path pattern: {why}",
                    entry.value.escape_debug()
                ),
            ),
        }
    }
    out
}

/// Why `name` cannot be a component of a git ref name (`git check-ref-format`), beyond
/// what the name rule already excludes; `None` when it can.
pub(super) fn ref_component_problem(name: &str) -> Option<&'static str> {
    if name.contains("..") {
        Some("it contains \"..\"")
    } else if name.starts_with('.') {
        Some("it starts with \".\"")
    } else if name.ends_with('.') {
        Some("it ends with \".\"")
    } else if name.ends_with(".lock") {
        Some("it ends with \".lock\"")
    } else if name.contains("@{") || name == "@" {
        Some("it contains \"@{\" or is \"@\"")
    } else {
        None
    }
}

/// Is `s` an environment variable's NAME rather than a secret pasted in its place? A name
/// is letters, digits and `_`, not starting with a digit, at most 64 long, made of words:
/// no long run of mixed letters and digits (tokens are; Forgejo's are 40 hex digits).
pub(super) fn env_var_name(s: &str) -> bool {
    let shape = !s.is_empty()
        && s.len() <= 64
        && !s.starts_with(|c: char| c.is_ascii_digit())
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    shape
        && !s.split('_').any(|word| {
            let digits = word.chars().filter(char::is_ascii_digit).count();
            let lower = word.chars().filter(char::is_ascii_lowercase).count();
            let upper = word.chars().filter(char::is_ascii_uppercase).count();
            let kinds = [digits, lower, upper].iter().filter(|n| **n > 0).count();
            (word.len() >= 16 && kinds >= 2 && digits > 0) || (word.len() >= 20 && kinds >= 2)
        })
}
