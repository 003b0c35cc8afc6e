//! The raw, position-carrying shapes of `repos.yaml` as serde reads them, before validation.
//!
//! Unknown keys are not refused here (that would stop at the first): [`unknown_keys`] walks
//! the document as a tree of keys against the known key sets and reports every one with its
//! position, and the shapes below ignore them so that the rest is still validated.

use crate::yaml::Pos;
use serde::Deserialize;
use serde_saphyr::Spanned;

#[derive(Debug, Deserialize)]
pub(super) struct RawConfig {
    #[serde(default)]
    pub(super) forge: Option<RawForge>,
    #[serde(default)]
    pub(super) ci: Option<RawCi>,
    #[serde(default)]
    pub(super) worker: Option<RawWorker>,
    #[serde(default)]
    pub(super) alerts: RawAlerts,
    #[serde(default)]
    pub(super) land: Option<RawLand>,
    #[serde(default)]
    pub(super) downstream: Option<RawDownstream>,
    #[serde(default)]
    pub(super) history: Option<RawHistory>,
    #[serde(default)]
    pub(super) serve: Option<RawServe>,
    #[serde(default)]
    pub(super) store: Option<RawStore>,
    #[serde(default)]
    pub(super) node: Option<RawNode>,
    /// Required; `None` when left out or set aside (reported by `shape::shape_problems`).
    #[serde(default)]
    pub(super) repos: Option<Spanned<RepoEntries>>,
}

#[derive(Debug, Deserialize)]
pub(super) struct RawForge {
    /// Required, and read as text so that validation can name a kind orch does not know
    /// with the rest; `None` when left out or set aside (reported by `shape`).
    #[serde(default)]
    pub(super) kind: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) url: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) owner: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) token_env: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) token_file: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) request_timeout: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) give_up_after: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) max_concurrent_runs: Option<Spanned<i64>>,
    #[serde(default)]
    pub(super) lost_hook_grace: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) path: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
pub(super) struct RawCi {
    #[serde(default)]
    pub(super) sync_job: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) required_jobs: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    pub(super) start_timeout: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) poll_interval: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) protected_paths: Option<Vec<Spanned<String>>>,
}

/// `land:` (top level, and per repository): how DONE work reaches the base branch.
#[derive(Debug, Default, Clone, Deserialize)]
pub(super) struct RawLand {
    #[serde(default)]
    pub(super) policy: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) method: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) max_attempts: Option<Spanned<i64>>,
    #[serde(default)]
    pub(super) on_conflict: Option<Spanned<String>>,
}

/// `downstream:`: what orch checks after a change lands.
#[derive(Debug, Default, Clone, Deserialize)]
pub(super) struct RawDownstream {
    #[serde(default)]
    pub(super) depth: Option<Spanned<i64>>,
    #[serde(default)]
    pub(super) on_breakage: Option<Spanned<String>>,
}

/// `history:`: how long ended workers' records are kept.
#[derive(Debug, Default, Clone, Deserialize)]
pub(super) struct RawHistory {
    #[serde(default)]
    pub(super) keep: Option<Spanned<String>>,
}

/// `serve:`: the board (`orch serve`).
#[derive(Debug, Default, Clone, Deserialize)]
pub(super) struct RawServe {
    #[serde(default)]
    pub(super) token_env: Option<Spanned<String>>,
}

/// `node:`: this host's name among the nodes sharing a store.
#[derive(Debug, Default, Clone, Deserialize)]
pub(super) struct RawNode {
    #[serde(default)]
    pub(super) name: Option<Spanned<String>>,
}

/// `store:`: the shared database (PostgreSQL) instead of the state directory's SQLite file.
#[derive(Debug, Default, Clone, Deserialize)]
pub(super) struct RawStore {
    #[serde(default)]
    pub(super) url: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) url_env: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) password_env: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
pub(super) struct RawWorker {
    #[serde(default)]
    pub(super) agent: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) command: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    pub(super) max_parallel: Option<Spanned<i64>>,
    #[serde(default)]
    pub(super) max_parallel_total: Option<Spanned<i64>>,
    #[serde(default)]
    pub(super) env_passthrough: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    pub(super) max_respawns: Option<Spanned<i64>>,
    #[serde(default)]
    pub(super) stop_grace: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) max_cost_usd: Option<Spanned<f64>>,
    #[serde(default)]
    pub(super) max_tokens: Option<Spanned<i64>>,
    #[serde(default)]
    pub(super) user: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) users: Option<Spanned<Vec<Spanned<String>>>>,
    #[serde(default)]
    pub(super) sandbox: Option<Spanned<bool>>,
    #[serde(default)]
    pub(super) hide: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    pub(super) model: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) model_overrides: Option<RawModelOverrides>,
}

/// `worker.model_overrides`: a stronger model when a condition of the contract's
/// `override_to_opus` holds for a task.
#[derive(Debug, Default, Deserialize)]
pub(super) struct RawModelOverrides {
    #[serde(default)]
    pub(super) critical_path: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) complexity_high: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) security_sensitive: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) cross_repo: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
pub(super) struct RawAlert {
    #[serde(default)]
    pub(super) webhook: Option<RawWebhook>,
    #[serde(default)]
    pub(super) command: Option<Vec<String>>,
    /// Alerts below this severity are not sent to this sink (info | warning | critical).
    #[serde(default)]
    pub(super) min_severity: Option<Spanned<String>>,
    /// How long one delivery may take (HTTP request, command run).
    #[serde(default)]
    pub(super) timeout: Option<Spanned<String>>,
}

/// `alerts:` — either the list of sinks, or a mapping with the sinks and the delivery
/// settings (`dedup_window`, `retry_initial`, `max_attempts`).
#[derive(Debug, Default)]
pub(super) struct RawAlerts {
    pub(super) sinks: Vec<Spanned<RawAlert>>,
    pub(super) dedup_window: Option<Spanned<String>>,
    pub(super) retry_initial: Option<Spanned<String>>,
    pub(super) max_attempts: Option<Spanned<i64>>,
}

impl<'de> Deserialize<'de> for RawAlerts {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = RawAlerts;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(
                    "a list of alert sinks, or a mapping with `sinks` and delivery settings",
                )
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<RawAlerts, A::Error> {
                let mut out = RawAlerts::default();
                while let Some(s) = seq.next_element::<Spanned<RawAlert>>()? {
                    out.sinks.push(s);
                }
                Ok(out)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<RawAlerts, A::Error> {
                let mut out = RawAlerts::default();
                while let Some(k) = map.next_key::<String>()? {
                    match k.as_str() {
                        "sinks" => out.sinks = map.next_value()?,
                        "dedup_window" => out.dedup_window = Some(map.next_value()?),
                        "retry_initial" => out.retry_initial = Some(map.next_value()?),
                        "max_attempts" => out.max_attempts = Some(map.next_value()?),
                        // Reported by `unknown_keys`, with every other unknown key.
                        _ => {
                            map.next_value::<serde::de::IgnoredAny>()?;
                        }
                    }
                }
                Ok(out)
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<RawAlerts, E> {
                Ok(RawAlerts::default())
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Debug, Deserialize)]
pub(super) struct RawWebhook {
    /// Required; `None` when left out or set aside (reported by `shape`).
    #[serde(default)]
    pub(super) url_env: Option<Spanned<String>>,
}

#[derive(Debug, Default, Deserialize)]
pub(super) struct RawRepo {
    #[serde(default)]
    pub(super) path: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) branch: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) deps: Vec<Spanned<String>>,
    #[serde(default)]
    pub(super) ci: Option<RawRepoCi>,
    #[serde(default)]
    pub(super) land: Option<RawLand>,
    #[serde(default)]
    pub(super) model: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
pub(super) struct RawRepoCi {
    #[serde(default)]
    pub(super) jobs: Vec<Spanned<RawJob>>,
    #[serde(default)]
    pub(super) env: RawEnv,
    #[serde(default)]
    pub(super) protected_paths: Option<Vec<Spanned<String>>>,
}

#[derive(Debug, Deserialize)]
pub(super) struct RawJob {
    /// Required, as is `run`; `None` when left out or set aside (reported by `shape`).
    #[serde(default)]
    pub(super) name: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) run: Option<String>,
    #[serde(default)]
    pub(super) needs: Vec<Spanned<String>>,
    #[serde(default)]
    pub(super) timeout: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) env: RawEnv,
}

/// The `repos:` mapping, in order, duplicates kept so that validation can name both places.
#[derive(Debug, Default)]
pub(super) struct RepoEntries(pub(super) Vec<(Spanned<String>, Spanned<RawRepo>)>);

impl<'de> Deserialize<'de> for RepoEntries {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = RepoEntries;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a mapping of repository name to repository settings")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<RepoEntries, A::Error> {
                let mut out = Vec::new();
                while let Some(k) = map.next_key::<Spanned<String>>()? {
                    let v = map.next_value::<Spanned<RepoValue>>()?;
                    // A repository that is not a mapping is reported by `shape_problems` and
                    // kept with default settings: its name still exists for its dependents,
                    // and the others are still read and validated.
                    out.push((k, Spanned::new(v.value.0, v.referenced, v.defined)));
                }
                Ok(RepoEntries(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// A repository's settings; whatever else was written in their place is read whole and
/// set aside (default settings), so one repository given as a list does not stop the others
/// being read.
struct RepoValue(RawRepo);

impl<'de> Deserialize<'de> for RepoValue {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = RepoValue;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a repository's settings")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                map: A,
            ) -> Result<RepoValue, A::Error> {
                RawRepo::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(RepoValue)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<RepoValue, A::Error> {
                while seq.next_element::<serde::de::IgnoredAny>()?.is_some() {}
                Ok(RepoValue(RawRepo::default()))
            }
            fn visit_str<E: serde::de::Error>(self, _: &str) -> Result<RepoValue, E> {
                Ok(RepoValue(RawRepo::default()))
            }
            fn visit_bool<E: serde::de::Error>(self, _: bool) -> Result<RepoValue, E> {
                Ok(RepoValue(RawRepo::default()))
            }
            fn visit_i64<E: serde::de::Error>(self, _: i64) -> Result<RepoValue, E> {
                Ok(RepoValue(RawRepo::default()))
            }
            fn visit_u64<E: serde::de::Error>(self, _: u64) -> Result<RepoValue, E> {
                Ok(RepoValue(RawRepo::default()))
            }
            fn visit_f64<E: serde::de::Error>(self, _: f64) -> Result<RepoValue, E> {
                Ok(RepoValue(RawRepo::default()))
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<RepoValue, E> {
                Ok(RepoValue(RawRepo::default()))
            }
        }
        d.deserialize_any(V)
    }
}

pub(super) fn pos<T>(s: &Spanned<T>) -> Option<Pos> {
    Pos::of(&s.referenced)
}

/// A YAML document as a tree of keys with their positions, scalars as what they read as:
/// what [`unknown_keys`] and `shape::shape_problems` walk.
#[derive(Debug)]
pub(super) enum Node {
    Map(Vec<(Spanned<Key>, Spanned<Node>)>),
    Seq(Vec<Spanned<Node>>),
    Scalar(Scalar),
}

/// A scalar as YAML reads it (a plain `5` is an integer, `"5"` a string).
#[derive(Debug)]
pub(super) enum Scalar {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
}

/// A mapping key as text (numbers and booleans as written by serde's visitor).
#[derive(Debug)]
pub(super) struct Key(pub(super) String);

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Key;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a scalar key")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Key, E> {
                Ok(Key(v.to_string()))
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Key, E> {
                Ok(Key(v.to_string()))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Key, E> {
                Ok(Key(v.to_string()))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Key, E> {
                Ok(Key(v.to_string()))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Key, E> {
                Ok(Key(v.to_string()))
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<Key, E> {
                Ok(Key("~".to_string()))
            }
            fn visit_none<E: serde::de::Error>(self) -> Result<Key, E> {
                Ok(Key("~".to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Node;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("any YAML value")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Node, A::Error> {
                let mut out = Vec::new();
                while let Some(k) = map.next_key::<Spanned<Key>>()? {
                    out.push((k, map.next_value::<Spanned<Node>>()?));
                }
                Ok(Node::Map(out))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Node, A::Error> {
                let mut out = Vec::new();
                while let Some(n) = seq.next_element::<Spanned<Node>>()? {
                    out.push(n);
                }
                Ok(Node::Seq(out))
            }
            fn visit_some<D: serde::Deserializer<'de>>(self, d: D) -> Result<Node, D::Error> {
                Node::deserialize(d)
            }
            fn visit_newtype_struct<D: serde::Deserializer<'de>>(
                self,
                d: D,
            ) -> Result<Node, D::Error> {
                Node::deserialize(d)
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Node, E> {
                Ok(Node::Scalar(Scalar::Str(v.to_string())))
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Node, E> {
                Ok(Node::Scalar(Scalar::Bool(v)))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Node, E> {
                Ok(Node::Scalar(Scalar::Int(v.into())))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Node, E> {
                Ok(Node::Scalar(Scalar::Int(v.into())))
            }
            fn visit_i128<E: serde::de::Error>(self, v: i128) -> Result<Node, E> {
                Ok(Node::Scalar(Scalar::Int(v)))
            }
            fn visit_u128<E: serde::de::Error>(self, v: u128) -> Result<Node, E> {
                Ok(Node::Scalar(Scalar::Int(
                    i128::try_from(v).unwrap_or(i128::MAX),
                )))
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Node, E> {
                Ok(Node::Scalar(Scalar::Float(v)))
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<Node, E> {
                Ok(Node::Scalar(Scalar::Null))
            }
            fn visit_none<E: serde::de::Error>(self) -> Result<Node, E> {
                Ok(Node::Scalar(Scalar::Null))
            }
        }
        d.deserialize_any(V)
    }
}

pub(super) const TOP: &[&str] = &[
    "forge",
    "ci",
    "worker",
    "alerts",
    "land",
    "downstream",
    "history",
    "serve",
    "store",
    "node",
    "repos",
];
pub(super) const DOWNSTREAM: &[&str] = &["depth", "on_breakage"];
pub(super) const HISTORY: &[&str] = &["keep"];
pub(super) const SERVE: &[&str] = &["token_env"];
pub(super) const STORE: &[&str] = &["url", "url_env", "password_env"];
pub(super) const NODE: &[&str] = &["name"];
pub(super) const FORGE: &[&str] = &[
    "kind",
    "url",
    "owner",
    "token_env",
    "token_file",
    "request_timeout",
    "give_up_after",
    "max_concurrent_runs",
    "lost_hook_grace",
    "path",
];
pub(super) const CI: &[&str] = &[
    "sync_job",
    "required_jobs",
    "start_timeout",
    "poll_interval",
    "protected_paths",
];
pub(super) const WORKER: &[&str] = &[
    "agent",
    "command",
    "max_parallel",
    "max_parallel_total",
    "env_passthrough",
    "max_respawns",
    "stop_grace",
    "max_cost_usd",
    "max_tokens",
    "user",
    "users",
    "sandbox",
    "hide",
    "model",
    "model_overrides",
];
pub(super) const MODEL_OVERRIDES: &[&str] = &[
    "critical_path",
    "complexity_high",
    "security_sensitive",
    "cross_repo",
];
pub(super) const ALERTS: &[&str] = &["sinks", "dedup_window", "retry_initial", "max_attempts"];
pub(super) const SINK: &[&str] = &["webhook", "command", "min_severity", "timeout"];
pub(super) const WEBHOOK: &[&str] = &["url_env"];
pub(super) const REPO: &[&str] = &["path", "branch", "deps", "ci", "land", "model"];
pub(super) const LAND: &[&str] = &["policy", "method", "max_attempts", "on_conflict"];
pub(super) const REPO_CI: &[&str] = &["jobs", "protected_paths", "env"];
pub(super) const JOB: &[&str] = &["name", "run", "needs", "timeout", "env"];

/// Every key of the document that orch does not know, with its position and where it was
/// found (`repos.vm`), in document order.
pub(super) fn unknown_keys(doc: &Spanned<Node>) -> Vec<(Option<Pos>, String)> {
    let mut out = Vec::new();
    walk_map(
        doc,
        "",
        TOP,
        &mut out,
        &|path, key, value, out| match (path, key) {
            ("", "forge") => walk_map(value, "forge", FORGE, out, &|_, _, _, _| {}),
            ("", "ci") => walk_map(value, "ci", CI, out, &|_, _, _, _| {}),
            ("", "worker") => walk_map(value, "worker", WORKER, out, &|_, key, value, out| {
                if key == "model_overrides" {
                    walk_map(
                        value,
                        "worker.model_overrides",
                        MODEL_OVERRIDES,
                        out,
                        &|_, _, _, _| {},
                    );
                }
            }),
            ("", "land") => walk_map(value, "land", LAND, out, &|_, _, _, _| {}),
            ("", "downstream") => walk_map(value, "downstream", DOWNSTREAM, out, &|_, _, _, _| {}),
            ("", "history") => walk_map(value, "history", HISTORY, out, &|_, _, _, _| {}),
            ("", "serve") => walk_map(value, "serve", SERVE, out, &|_, _, _, _| {}),
            ("", "store") => walk_map(value, "store", STORE, out, &|_, _, _, _| {}),
            ("", "node") => walk_map(value, "node", NODE, out, &|_, _, _, _| {}),
            ("", "alerts") => match &value.value {
                Node::Seq(items) => walk_sinks(items, "alerts", out),
                _ => walk_map(value, "alerts", ALERTS, out, &|_, key, value, out| {
                    if key == "sinks"
                        && let Node::Seq(items) = &value.value
                    {
                        walk_sinks(items, "alerts.sinks", out);
                    }
                }),
            },
            ("", "repos") => {
                if let Node::Map(entries) = &value.value {
                    for (name, repo) in entries {
                        let path = format!("repos.{}", name.value.0);
                        walk_map(repo, &path, REPO, out, &|path, key, value, out| {
                            if key == "ci" {
                                let path = format!("{path}.ci");
                                walk_map(value, &path, REPO_CI, out, &|path, key, value, out| {
                                    if key == "jobs"
                                        && let Node::Seq(jobs) = &value.value
                                    {
                                        for (i, job) in jobs.iter().enumerate() {
                                            let path = format!("{path}.jobs[{i}]");
                                            walk_map(job, &path, JOB, out, &|_, _, _, _| {});
                                        }
                                    }
                                });
                            }
                            if key == "land" {
                                let path = format!("{path}.land");
                                walk_map(value, &path, LAND, out, &|_, _, _, _| {});
                            }
                        });
                    }
                }
            }
            _ => {}
        },
    );
    out
}

type Visit<'a> = &'a dyn Fn(&str, &str, &Spanned<Node>, &mut Vec<(Option<Pos>, String)>);

/// Reports the keys of `node` (when a mapping) not in `known`, and calls `visit` with each
/// known one.
fn walk_map(
    node: &Spanned<Node>,
    path: &str,
    known: &[&str],
    out: &mut Vec<(Option<Pos>, String)>,
    visit: Visit,
) {
    let Node::Map(entries) = &node.value else {
        return; // a wrong shape is the typed parse's to report
    };
    for (key, value) in entries {
        let k = key.value.0.as_str();
        if known.contains(&k) {
            visit(path, k, value, out);
        } else {
            let place = if path.is_empty() {
                "at the top level".to_string()
            } else {
                format!("in {path}")
            };
            out.push((
                pos(key),
                format!(
                    "unknown key `{k}` {place} (expected one of: {})",
                    known.join(", ")
                ),
            ));
        }
    }
}

fn walk_sinks(items: &[Spanned<Node>], path: &str, out: &mut Vec<(Option<Pos>, String)>) {
    for (i, sink) in items.iter().enumerate() {
        let path = format!("{path}[{i}]");
        walk_map(sink, &path, SINK, out, &|path, key, value, out| {
            if key == "webhook" {
                walk_map(
                    value,
                    &format!("{path}.webhook"),
                    WEBHOOK,
                    out,
                    &|_, _, _, _| {},
                );
            }
        });
    }
}

/// `env:` of a repository's CI or of one job: names and their values, in the file's order.
#[derive(Debug, Default)]
pub(in crate::config) struct RawEnv(
    pub(in crate::config) Vec<(Spanned<String>, Spanned<EnvValue>)>,
);

impl<'de> Deserialize<'de> for RawEnv {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = RawEnv;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a mapping of variable names to values")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<RawEnv, A::Error> {
                let mut out = Vec::new();
                while let Some(k) = map.next_key::<Spanned<String>>()? {
                    out.push((k, map.next_value::<Spanned<EnvValue>>()?));
                }
                Ok(RawEnv(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// A value of `env:`: any scalar, read as the text it is written as (`RUST_BACKTRACE: 1`).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(in crate::config) enum EnvValue {
    Text(String),
    Int(i64),
    Float(f64),
    Bool(bool),
}

impl EnvValue {
    pub(in crate::config) fn text(&self) -> String {
        match self {
            EnvValue::Text(s) => s.clone(),
            EnvValue::Int(i) => i.to_string(),
            EnvValue::Float(f) => f.to_string(),
            EnvValue::Bool(b) => b.to_string(),
        }
    }
}
