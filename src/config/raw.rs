//! The raw, position-carrying shapes of `repos.yaml` as serde reads them, before validation.

use super::ForgeKind;
use crate::yaml::Pos;
use serde::Deserialize;
use serde_saphyr::Spanned;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawConfig {
    #[serde(default)]
    pub(super) forge: Option<RawForge>,
    #[serde(default)]
    pub(super) ci: Option<RawCi>,
    #[serde(default)]
    pub(super) worker: Option<RawWorker>,
    #[serde(default)]
    pub(super) alerts: RawAlerts,
    pub(super) repos: Spanned<RepoEntries>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawForge {
    pub(super) kind: Spanned<ForgeKind>,
    #[serde(default)]
    pub(super) url: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) owner: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) token_env: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) request_timeout: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) max_concurrent_runs: Option<Spanned<i64>>,
    #[serde(default)]
    pub(super) lost_hook_grace: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawCi {
    #[serde(default)]
    pub(super) sync_job: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) required_jobs: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    pub(super) start_timeout: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) poll_interval: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawWorker {
    #[serde(default)]
    pub(super) agent: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) command: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    pub(super) max_parallel: Option<Spanned<i64>>,
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
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
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
                const KEYS: &[&str] = &["sinks", "dedup_window", "retry_initial", "max_attempts"];
                let mut out = RawAlerts::default();
                while let Some(k) = map.next_key::<String>()? {
                    match k.as_str() {
                        "sinks" => out.sinks = map.next_value()?,
                        "dedup_window" => out.dedup_window = Some(map.next_value()?),
                        "retry_initial" => out.retry_initial = Some(map.next_value()?),
                        "max_attempts" => out.max_attempts = Some(map.next_value()?),
                        other => return Err(serde::de::Error::unknown_field(other, KEYS)),
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
#[serde(deny_unknown_fields)]
pub(super) struct RawWebhook {
    pub(super) url_env: Spanned<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRepo {
    #[serde(default)]
    pub(super) path: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) branch: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) deps: Vec<Spanned<String>>,
    #[serde(default)]
    pub(super) ci: Option<RawRepoCi>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRepoCi {
    #[serde(default)]
    pub(super) jobs: Vec<Spanned<RawJob>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawJob {
    pub(super) name: Spanned<String>,
    pub(super) run: String,
    #[serde(default)]
    pub(super) needs: Vec<Spanned<String>>,
    #[serde(default)]
    pub(super) timeout: Option<Spanned<String>>,
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
                    let v = map.next_value::<Spanned<RawRepo>>()?;
                    out.push((k, v));
                }
                Ok(RepoEntries(out))
            }
        }
        d.deserialize_map(V)
    }
}

pub(super) fn pos<T>(s: &Spanned<T>) -> Option<Pos> {
    Pos::of(&s.referenced)
}
