//! `alerts:`: where alerts go (webhooks, commands), from which severity, how they are retried.

use super::{Check, env_var_name};
use crate::config::raw::{RawAlerts, RawWebhook, pos};
use crate::config::{AlertLevel, AlertSink, AlertsConfig, SinkKind};
use std::path::Path;
use std::time::Duration;

pub(super) fn validate_alerts(c: &mut Check, raw: RawAlerts) -> AlertsConfig {
    let defaults = AlertsConfig::default();
    let mut sinks: Vec<AlertSink> = Vec::new();
    for a in raw.sinks {
        let p = pos(&a);
        let a = a.value;
        // What else is wrong with a sink is reported even when its kind is.
        let kind = match (a.webhook, a.command) {
            // Left out or wrong-typed: reported by `shape`.
            (Some(RawWebhook { url_env: None }), None) => None,
            (
                Some(RawWebhook {
                    url_env: Some(url_env),
                }),
                None,
            ) if !env_var_name(&url_env.value) => {
                c.err(
                    pos(&url_env),
                    "alerts: webhook.url_env must be the NAME of an environment variable holding the URL, not the URL itself; the value is not shown",
                );
                None
            }
            (
                Some(RawWebhook {
                    url_env: Some(url_env),
                }),
                None,
            ) => Some(SinkKind::Webhook {
                url_env: url_env.value,
            }),
            (None, Some(argv)) if !argv.is_empty() => Some(SinkKind::Command { argv }),
            (None, Some(_)) => {
                c.err(p, "alerts: command must be a non-empty argv list");
                None
            }
            // Neither or both: reported by `shape`.
            _ => None,
        };
        let min_severity = match &a.min_severity {
            None => AlertLevel::Info,
            Some(s) => AlertLevel::parse(&s.value).unwrap_or_else(|| {
                c.err(
                    pos(s),
                    format!(
                        "alerts: min_severity must be info, warning or critical, got {:?}",
                        s.value
                    ),
                );
                AlertLevel::Info
            }),
        };
        let timeout = c.duration("alerts: timeout", &a.timeout, Duration::from_secs(10));
        let Some(kind) = kind else {
            continue;
        };
        let base = match &kind {
            SinkKind::Webhook { url_env } => format!("webhook:{url_env}"),
            SinkKind::Command { argv } => format!(
                "command:{}",
                Path::new(&argv[0])
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| argv[0].clone())
            ),
        };
        let mut label = base.clone();
        let mut n = 1;
        while sinks.iter().any(|s| s.label == label) {
            n += 1;
            label = format!("{base}#{n}");
        }
        sinks.push(AlertSink {
            kind,
            label,
            min_severity,
            timeout,
        });
    }
    let max_attempts = c.positive("alerts.max_attempts", &raw.max_attempts, 8);
    AlertsConfig {
        sinks,
        dedup_window: c.duration(
            "alerts.dedup_window",
            &raw.dedup_window,
            defaults.dedup_window,
        ),
        retry_initial: c.duration(
            "alerts.retry_initial",
            &raw.retry_initial,
            defaults.retry_initial,
        ),
        max_attempts: max_attempts.min(1000) as u32,
    }
}
