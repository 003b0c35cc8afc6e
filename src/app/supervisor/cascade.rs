//! The supervisor's cascade watch: a thread that follows the base-branch CI of every
//! repository the worker's repository depends on (through the shared rows of
//! `app::cascade`, so one poll per upstream per interval serves every supervisor) and tells
//! the main loop when the answer changes: `Some(reason)` (an upstream is red: pause) or
//! `None` (all known upstreams are not red: resume) — and each of its polls the forge failed,
//! which the main loop records in the worker's history (`/metrics` counts them).

use super::bell::Bell;
use crate::config::Config;
use crate::forge::Forge;
use crate::forge::follow::CiFollower;
use crate::store::Store;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

/// The longest the watch waits between polls of an upstream while the forge fails them.
const MAX_PAUSE: Duration = Duration::from_secs(60);
/// The same while the forge refuses them (`ForgeError::Blocking`): each failure is one more
/// event in the worker's history, and only an operator mends it.
const MAX_PAUSE_BLOCKING: Duration = Duration::from_secs(600);

pub struct CascadeLink {
    rx: Receiver<News>,
}

/// What the watch tells the main loop.
enum News {
    /// The upstreams' answer changed: `Some(reason)` red, `None` not red.
    Upstream(Option<String>),
    /// A poll of an upstream's base branch failed at the forge: the event kind
    /// (`ForgeError::event_kind`) and what failed.
    ForgeError(&'static str, String),
}

/// What came in since the main loop last looked.
#[derive(Default)]
pub struct Heard {
    /// The latest answer, if it changed.
    pub upstream: Option<Option<String>>,
    /// The failed polls, oldest first: (event kind, detail).
    pub forge_errors: Vec<(&'static str, String)>,
}

impl CascadeLink {
    /// Starts the watch for a worker on `repo`; `None` when it depends on nothing.
    pub fn start<F: Forge + 'static>(
        state_dir: PathBuf,
        config: &Config,
        repo: &str,
        follower: Arc<CiFollower<F>>,
        bell: Arc<Bell>,
    ) -> Option<CascadeLink> {
        let ups: Vec<crate::config::Repo> = crate::app::cascade::upstreams(config, repo)
            .into_iter()
            .cloned()
            .collect();
        if ups.is_empty() {
            return None;
        }
        let interval = config.ci.poll_interval;
        let (tx, rx) = channel();
        std::thread::Builder::new()
            .name("cascade".into())
            .spawn(move || {
                let Ok(mut store) = Store::open(&state_dir) else {
                    return;
                };
                let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                else {
                    return;
                };
                let max_age = interval.as_millis() as i64;
                let mut last: Option<Option<String>> = None;
                // Each upstream's own back-off: one failing forge path does not slow the
                // others' polls.
                let mut pause = vec![next_pause(interval, interval, None); ups.len()];
                let mut next = vec![std::time::Instant::now(); ups.len()];
                loop {
                    let mut rows = Vec::new();
                    for (i, u) in ups.iter().enumerate() {
                        if std::time::Instant::now() < next[i] {
                            rows.extend(crate::app::cascade::recorded(&mut store, u));
                            continue;
                        }
                        let mut failed = |e: &crate::forge::ForgeError| {
                            let detail = format!(
                                "the base branch CI of {} ({}) could not be read: {e}",
                                u.name, u.branch
                            );
                            let _ = tx.send(News::ForgeError(e.event_kind(), detail));
                            pause[i] = next_pause(pause[i], interval, Some(e));
                            // Held as long: no supervisor asks the failing forge meanwhile.
                            pause[i]
                        };
                        let (row, asked) = crate::app::cascade::status(
                            &mut store,
                            &follower,
                            &rt,
                            u,
                            max_age,
                            &mut failed,
                        );
                        rows.extend(row);
                        // The forge answered (this process or another): every interval again.
                        if matches!(
                            asked,
                            crate::app::cascade::Asked::Answered
                                | crate::app::cascade::Asked::Fresh
                        ) {
                            pause[i] = next_pause(pause[i], interval, None);
                        }
                        next[i] = std::time::Instant::now() + pause[i];
                    }
                    let now = crate::app::cascade::red_reason(&rows);
                    if last.as_ref() != Some(&now) {
                        if tx.send(News::Upstream(now.clone())).is_err() {
                            return;
                        }
                        bell.ring();
                        last = Some(now);
                    }
                    std::thread::sleep(next_pause(interval, interval, None));
                }
            })
            .ok()?;
        Some(CascadeLink { rx })
    }

    /// What came in since the last look: the latest change, and every failed poll.
    pub fn heard(&self) -> Heard {
        let mut heard = Heard::default();
        while let Ok(news) = self.rx.try_recv() {
            match news {
                News::Upstream(u) => heard.upstream = Some(u),
                News::ForgeError(kind, detail) => heard.forge_errors.push((kind, detail)),
            }
        }
        heard
    }
}

/// How long the watch waits before it asks about an upstream again: the poll interval (at
/// least 100 ms) after the forge answered, twice the last wait after it failed (`failed`), up
/// to a minute ([`MAX_PAUSE`]) — ten for an error that waiting does not mend (401, 403, 404:
/// an operator's to fix) — or the interval, if that is longer.
fn next_pause(
    last: Duration,
    interval: Duration,
    failed: Option<&crate::forge::ForgeError>,
) -> Duration {
    let normal = interval.max(Duration::from_millis(100));
    match failed {
        None => normal,
        Some(e) => {
            let cap = match e {
                crate::forge::ForgeError::Blocking { .. } => MAX_PAUSE_BLOCKING,
                _ => MAX_PAUSE,
            };
            (last.max(normal) * 2).min(cap.max(normal))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::forge::{BlockingKind, ForgeError};

    #[test]
    fn a_failing_forge_is_asked_less_and_less_often_then_every_interval_again() {
        let down = ForgeError::Transient {
            message: "connection refused".into(),
            attempts: 3,
        };
        let interval = Duration::from_millis(200);
        let mut pause = next_pause(interval, interval, None);
        assert_eq!(pause, interval);
        let mut waits = Vec::new();
        for _ in 0..12 {
            pause = next_pause(pause, interval, Some(&down));
            waits.push(pause.as_millis());
        }
        assert_eq!(&waits[..4], &[400, 800, 1600, 3200]);
        assert_eq!(*waits.last().unwrap(), MAX_PAUSE.as_millis());
        assert_eq!(next_pause(pause, interval, None), interval);
        // An interval longer than the cap is never shortened; a tiny one has a floor.
        let hour = Duration::from_secs(3600);
        assert_eq!(next_pause(hour, hour, Some(&down)), hour);
        assert_eq!(
            next_pause(Duration::ZERO, Duration::ZERO, None),
            Duration::from_millis(100)
        );
    }

    #[test]
    fn a_refusing_forge_is_asked_at_most_every_ten_minutes() {
        let refused = ForgeError::Blocking {
            kind: BlockingKind::BadToken,
            message: "401".into(),
        };
        let interval = Duration::from_secs(10);
        let mut pause = interval;
        for _ in 0..20 {
            pause = next_pause(pause, interval, Some(&refused));
        }
        assert_eq!(pause, MAX_PAUSE_BLOCKING);
    }
}
