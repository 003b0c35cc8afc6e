//! The supervisor's cascade watch: a thread that follows the base-branch CI of every
//! repository the worker's repository depends on (through the shared rows of
//! `app::cascade`, so one poll per upstream per interval serves every supervisor) and tells
//! the main loop when the answer changes: `Some(reason)` (an upstream is red: pause) or
//! `None` (all known upstreams are not red: resume).

use super::bell::Bell;
use crate::config::Config;
use crate::forge::Forge;
use crate::forge::follow::CiFollower;
use crate::store::Store;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

pub struct CascadeLink {
    rx: Receiver<Option<String>>,
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
                loop {
                    let mut rows = Vec::new();
                    for u in &ups {
                        rows.extend(crate::app::cascade::status(
                            &mut store, &follower, &rt, u, max_age,
                        ));
                    }
                    let now = crate::app::cascade::red_reason(&rows);
                    if last.as_ref() != Some(&now) {
                        if tx.send(now.clone()).is_err() {
                            return;
                        }
                        bell.ring();
                        last = Some(now);
                    }
                    std::thread::sleep(interval.max(Duration::from_millis(100)));
                }
            })
            .ok()?;
        Some(CascadeLink { rx })
    }

    /// The latest change, if one came in.
    pub fn latest(&self) -> Option<Option<String>> {
        let mut latest = None;
        while let Ok(v) = self.rx.try_recv() {
            latest = Some(v);
        }
        latest
    }
}
