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

/// The longest the watch waits between polls while the forge fails them.
const MAX_PAUSE: Duration = Duration::from_secs(60);

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
                let mut pause = next_pause(interval, interval, false);
                loop {
                    let mut rows = Vec::new();
                    let mut any_failed = false;
                    for u in &ups {
                        let mut failed = |e: &crate::forge::ForgeError| {
                            any_failed = true;
                            let detail = format!(
                                "the base branch CI of {} ({}) could not be read: {e}",
                                u.name, u.branch
                            );
                            let _ = tx.send(News::ForgeError(e.event_kind(), detail));
                        };
                        rows.extend(crate::app::cascade::status(
                            &mut store,
                            &follower,
                            &rt,
                            u,
                            max_age,
                            &mut failed,
                        ));
                    }
                    let now = crate::app::cascade::red_reason(&rows);
                    if last.as_ref() != Some(&now) {
                        if tx.send(News::Upstream(now.clone())).is_err() {
                            return;
                        }
                        bell.ring();
                        last = Some(now);
                    }
                    // A forge that fails is asked less often (and fills the worker's history
                    // with fewer failures), up to MAX_PAUSE; once it answers, every interval.
                    pause = next_pause(pause, interval, any_failed);
                    std::thread::sleep(pause);
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

/// The watch's wait before its next round: the poll interval (at least 100 ms) after a round
/// the forge answered, twice the last wait after one it failed, up to [`MAX_PAUSE`] (or the
/// interval, if that is longer).
fn next_pause(last: Duration, interval: Duration, failed: bool) -> Duration {
    let normal = interval.max(Duration::from_millis(100));
    if failed {
        (last.max(normal) * 2).min(MAX_PAUSE.max(normal))
    } else {
        normal
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_forge_is_asked_less_and_less_often_then_every_interval_again() {
        let interval = Duration::from_millis(200);
        let mut pause = next_pause(interval, interval, false);
        assert_eq!(pause, interval);
        let mut waits = Vec::new();
        for _ in 0..12 {
            pause = next_pause(pause, interval, true);
            waits.push(pause.as_millis());
        }
        assert_eq!(&waits[..4], &[400, 800, 1600, 3200]);
        assert_eq!(*waits.last().unwrap(), MAX_PAUSE.as_millis());
        assert_eq!(next_pause(pause, interval, false), interval);
        // An interval longer than the cap is never shortened; a tiny one has a floor.
        let hour = Duration::from_secs(3600);
        assert_eq!(next_pause(hour, hour, true), hour);
        assert_eq!(
            next_pause(Duration::ZERO, Duration::ZERO, false),
            Duration::from_millis(100)
        );
    }
}
