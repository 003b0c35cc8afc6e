//! The one place a supervisor sleeps. Every source of input — the worker's output readers, the
//! watch on its exit, the CI thread, the cascade watch, the doorbell other processes ring —
//! hands its input over on its own channel, then rings this bell; the loop sleeps on it until
//! a ring or its next deadline (a tick, a poll due, a lease to renew), whichever comes first.

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// What rang since the loop last looked.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Rings {
    /// Input on one of the channels (output, exit, a CI answer, the cascade).
    pub input: bool,
    /// Another process queued a request in the inbox.
    pub inbox: bool,
    /// The repositories whose CI changed: what the supervisor waits for may be decided.
    pub ci: Vec<String>,
}

impl Rings {
    fn any(&self) -> bool {
        self.input || self.inbox || !self.ci.is_empty()
    }
}

#[derive(Default)]
pub struct Bell {
    rung: Mutex<Rings>,
    cv: Condvar,
}

impl Bell {
    pub fn new() -> Arc<Bell> {
        Arc::new(Bell::default())
    }

    fn set(&self, f: impl FnOnce(&mut Rings)) {
        let mut r = self.rung.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut r);
        self.cv.notify_one();
    }

    /// Input was handed over on a channel.
    pub fn ring(&self) {
        self.set(|r| r.input = true);
    }

    pub fn ring_inbox(&self) {
        self.set(|r| r.inbox = true);
    }

    pub fn ring_ci(&self, repo: String) {
        self.set(|r| {
            if !r.ci.contains(&repo) {
                r.ci.push(repo);
            }
        });
    }

    /// Waits until something rings or `timeout` passes; returns (and clears) what rang.
    pub fn wait(&self, timeout: Duration) -> Rings {
        let guard = self.rung.lock().unwrap_or_else(|e| e.into_inner());
        let (mut guard, _) = self
            .cv
            .wait_timeout_while(guard, timeout, |r| !r.any())
            .unwrap_or_else(|e| e.into_inner());
        std::mem::take(&mut *guard)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ring_before_the_wait_is_not_lost_and_is_cleared_by_it() {
        let bell = Bell::new();
        bell.ring_ci("vm".into());
        bell.ring_ci("vm".into());
        let r = bell.wait(Duration::from_secs(30));
        assert!(r.ci == ["vm"] && !r.inbox && !r.input);
        assert_eq!(bell.wait(Duration::ZERO), Rings::default());
        let b = bell.clone();
        let t = std::thread::spawn(move || b.ring());
        assert!(bell.wait(Duration::from_secs(30)).input);
        t.join().unwrap();
    }
}
