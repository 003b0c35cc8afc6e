//! Alert delivery: draining the outbox in SQLite (`store::alerts`) to the configured sinks.
//!
//! An alert is recorded by the journal in the transaction of the transition that raised it;
//! delivery happens after the commit, outside any transaction, by whichever orch process
//! drains next: every supervisor runs a delivery thread ([`Deliverer`]), and `orch resume`
//! (run by hand and by wave ticks) drains once before it exits. A delivery row is claimed by
//! one process at a time (the claim expires, so a process killed mid-send leaves it to the
//! next); a failed attempt is retried with doubling waits from `alerts.retry_initial`, and
//! given up after `alerts.max_attempts` with the last error recorded. At least once: a
//! process killed between the send and its record sends again.
//!
//! Nothing here blocks supervision: the supervisor's thread owns its own connection and
//! runtime, and a sink that hangs costs it at most the sink's `timeout`.

use crate::config::{AlertSink, AlertsConfig, MAX_RETRY_WAIT, SinkKind};
use crate::store::alerts::{self as sa, AttemptEnd, Due};
use crate::store::{Store, StoreError, now_ms};
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::time::{Duration, Instant};

/// What one drain did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Drained {
    pub delivered: usize,
    pub retried: usize,
    pub given_up: usize,
}

/// The wait before attempt `attempts + 1` after `attempts` failures; `None`: give up.
pub fn retry_after(cfg: &AlertsConfig, attempts: i64) -> Option<Duration> {
    if attempts >= cfg.max_attempts as i64 {
        return None;
    }
    let factor = 1u32 << (attempts.clamp(1, 20) - 1) as u32;
    Some((cfg.retry_initial * factor).min(MAX_RETRY_WAIT))
}

/// Creates the delivery rows of unsettled alerts (for the sinks that want them), then sends
/// what is due until nothing is or `deadline` passes. `every_pending`: a process that just
/// started gives every pending delivery one attempt now, whatever its back-off said (the
/// receiver may have come back while nobody was there to try).
pub fn drain(
    store: &mut Store,
    cfg: &AlertsConfig,
    scrub: &[&str],
    every_pending: bool,
    deadline: Instant,
) -> Result<Drained, StoreError> {
    let mut out = Drained::default();
    let now = now_ms();
    store.write(|tx| {
        for a in sa::unsettled(tx, 200)? {
            let sinks: Vec<String> = cfg
                .sinks
                .iter()
                .filter(|s| s.wants(&a.severity))
                .map(|s| s.label.clone())
                .collect();
            sa::ensure_deliveries(tx, a.id, &sinks, now)?;
        }
        Ok(())
    })?;
    let claim_ms = cfg
        .sinks
        .iter()
        .map(|s| s.timeout)
        .max()
        .unwrap_or_default()
        .as_millis() as i64
        + 5_000;
    let me = crate::pidns::host_pid() as i64;
    let mut first = every_pending;
    let mut rt: Option<tokio::runtime::Runtime> = None;
    while Instant::now() < deadline {
        let force = std::mem::take(&mut first);
        let due = store.write(|tx| sa::claim_due(tx, now_ms(), me, claim_ms, force, 16))?;
        if due.is_empty() {
            break;
        }
        for d in due {
            let end = match cfg.sinks.iter().find(|s| s.label == d.sink) {
                None => AttemptEnd::GiveUp {
                    why: format!("sink {} is no longer configured", d.sink),
                },
                Some(sink) => {
                    let result = send(sink, &d.alert, scrub, &mut rt);
                    end_of(cfg, &d, result)
                }
            };
            match &end {
                AttemptEnd::Delivered => out.delivered += 1,
                AttemptEnd::Retry { .. } => out.retried += 1,
                AttemptEnd::GiveUp { why } => {
                    out.given_up += 1;
                    tracing::warn!(alert = d.alert.id, sink = %d.sink, why, "alert delivery given up");
                }
            }
            store.write(|tx| sa::finish(tx, d.alert.id, &d.sink, &end, now_ms()))?;
        }
    }
    Ok(out)
}

fn end_of(
    cfg: &AlertsConfig,
    d: &Due,
    result: Result<(), crate::alerts::sink::SendError>,
) -> AttemptEnd {
    use crate::alerts::sink::SendError;
    let attempts = d.attempts + 1;
    match result {
        Ok(()) => AttemptEnd::Delivered,
        Err(SendError::Permanent(e)) => AttemptEnd::GiveUp {
            why: format!("refused for good after {attempts} attempt(s): {e}"),
        },
        Err(SendError::Retry(e)) => match retry_after(cfg, attempts) {
            Some(wait) => AttemptEnd::Retry {
                error: e,
                next_ms: now_ms() + wait.as_millis() as i64,
            },
            None => AttemptEnd::GiveUp {
                why: format!("gave up after {attempts} attempts; last: {e}"),
            },
        },
    }
}

/// Sends `alert` once to every sink that wants it, without the outbox (no database, no disk:
/// for an alert about a state directory that cannot be written); what each sink answered,
/// by label. Best effort: nothing is retried.
pub fn send_direct(
    config: &crate::config::Config,
    alert: &crate::store::workers::AlertRecord,
) -> Vec<(String, Result<(), String>)> {
    let scrub = scrub_list(config);
    let scrub: Vec<&str> = scrub.iter().map(String::as_str).collect();
    let mut rt = None;
    config
        .alerts
        .sinks
        .iter()
        .filter(|s| s.wants(&alert.severity))
        .map(|s| {
            let r = send(s, alert, &scrub, &mut rt).map_err(|e| e.to_string());
            (s.label.clone(), r)
        })
        .collect()
}

fn send(
    sink: &AlertSink,
    alert: &crate::store::workers::AlertRecord,
    scrub: &[&str],
    rt: &mut Option<tokio::runtime::Runtime>,
) -> Result<(), crate::alerts::sink::SendError> {
    use crate::alerts::sink::{self, SendError};
    let body = crate::alerts::payload(alert);
    match &sink.kind {
        SinkKind::Webhook { url_env } => {
            let Some(url) = std::env::var(url_env).ok().filter(|u| !u.is_empty()) else {
                // Set later (a supervisor restarted with it) it may work: retried.
                return Err(SendError::Retry(format!("{url_env} is not set")));
            };
            if rt.is_none() {
                *rt = Some(
                    tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .map_err(|e| SendError::Retry(format!("no runtime: {e}")))?,
                );
            }
            let rt = rt.as_ref().expect("built above");
            rt.block_on(sink::webhook(&url, &body, sink.timeout))
        }
        SinkKind::Command { argv } => sink::command(argv, &body, sink.timeout, scrub),
    }
}

/// Variables a command sink never receives: the forge token's.
pub fn scrub_list(config: &crate::config::Config) -> Vec<String> {
    config
        .forge
        .token_env
        .iter()
        .cloned()
        .chain(config.store.iter().flat_map(|s| s.secret_vars()))
        .collect()
}

/// A supervisor's delivery thread: drains the outbox when poked (an alert was committed), when
/// a retry falls due, and at least every `POLL` (alerts another process committed); its first
/// drain tries every pending delivery.
pub struct Deliverer {
    poke: Option<Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// How often the delivery thread looks for due deliveries without being poked or a retry due.
const POLL: Duration = Duration::from_secs(5);
/// How long a supervisor that stops waits for its last drain.
const LAST_DRAIN: Duration = Duration::from_secs(5);

impl Deliverer {
    /// Starts the thread (none when no sink is configured: alerts are then settled by
    /// whoever drains with sinks).
    pub fn start(state_dir: PathBuf, config: &crate::config::Config) -> Deliverer {
        if config.alerts.sinks.is_empty() {
            return Deliverer {
                poke: None,
                thread: None,
            };
        }
        let cfg = config.alerts.clone();
        let scrub = scrub_list(config);
        let (tx, rx) = channel::<()>();
        let thread = std::thread::Builder::new()
            .name("alerts".into())
            .spawn(move || run(state_dir, cfg, scrub, rx))
            .ok();
        Deliverer {
            poke: Some(tx),
            thread,
        }
    }

    /// An alert was committed: deliver it now.
    pub fn poke(&self) {
        if let Some(p) = &self.poke {
            let _ = p.send(());
        }
    }

    /// Stops the thread after a last drain (bounded).
    pub fn stop(&mut self) {
        self.poke = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Deliverer {
    fn drop(&mut self) {
        self.poke = None; // the thread ends after its current drain; not waited for
    }
}

fn run(state_dir: PathBuf, cfg: AlertsConfig, scrub: Vec<String>, rx: Receiver<()>) {
    let scrub: Vec<&str> = scrub.iter().map(String::as_str).collect();
    let mut store = match Store::open(&state_dir) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(error = %e, "alert delivery: cannot open the database");
            return;
        }
    };
    let budget = |cfg: &AlertsConfig| {
        cfg.sinks
            .iter()
            .map(|s| s.timeout)
            .max()
            .unwrap_or_default()
            * 4
            + Duration::from_millis(500)
    };
    let mut first = true;
    loop {
        let wanted =
            first || {
                let now = now_ms();
                store
                    .read(|tx| {
                        Ok(sa::any_unsettled(tx)?
                            || sa::next_pending_ms(tx)?.is_some_and(|n| n <= now))
                    })
                    .unwrap_or(true)
            };
        if wanted {
            let every = std::mem::take(&mut first);
            if let Err(e) = drain(
                &mut store,
                &cfg,
                &scrub,
                every,
                Instant::now() + budget(&cfg),
            ) {
                tracing::warn!(error = %e, "alert delivery: drain failed; tried again");
            }
        }
        // Until the next retry falls due, if that comes before the fallback look.
        let wait = store
            .read(sa::next_pending_ms)
            .ok()
            .flatten()
            .map_or(POLL, |n| {
                Duration::from_millis((n - now_ms()).clamp(10, POLL.as_millis() as i64) as u64)
            });
        match rx.recv_timeout(wait) {
            Ok(()) => while rx.try_recv().is_ok() {},
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                // The supervisor stops: what is pending and due soon goes out first.
                let deadline = Instant::now() + LAST_DRAIN;
                while drain(&mut store, &cfg, &scrub, false, deadline).is_ok() {
                    let next = store.read(sa::next_pending_ms).ok().flatten();
                    let Some(wait) = next.map(|n| n - now_ms()) else {
                        break;
                    };
                    let wait = Duration::from_millis(wait.max(10) as u64);
                    if Instant::now() + wait >= deadline {
                        break;
                    }
                    std::thread::sleep(wait);
                }
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_double_from_the_initial_wait_and_stop_at_the_bound() {
        let cfg = AlertsConfig {
            retry_initial: Duration::from_secs(1),
            max_attempts: 4,
            ..AlertsConfig::default()
        };
        assert_eq!(retry_after(&cfg, 1), Some(Duration::from_secs(1)));
        assert_eq!(retry_after(&cfg, 2), Some(Duration::from_secs(2)));
        assert_eq!(retry_after(&cfg, 3), Some(Duration::from_secs(4)));
        assert_eq!(retry_after(&cfg, 4), None);
        let long = AlertsConfig {
            max_attempts: 100,
            ..cfg
        };
        assert_eq!(retry_after(&long, 30), Some(MAX_RETRY_WAIT));
    }
}
