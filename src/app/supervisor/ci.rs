//! The supervisor's link to CI: queries (CI for the tracked SHA, and the head of the worker's
//! branch on the forge) run on their own thread (a slow or failing forge —
//! timeouts, retries with backoff — must never delay reading the worker's output or the
//! permission rule), numbered so that an answer says which query it answers; and the back-off
//! after forge failures, a pure rule.

use super::bell::Bell;
use crate::ci::CiRun;
use crate::ci::verdict::Verdict;
use crate::config::Repo;
use crate::forge::follow::CiFollower;
use crate::forge::{Forge, ForgeError};
use crate::sha::Sha;
use crate::store::now_ms;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, channel};

/// What the CI thread is asked.
enum Query {
    Ci(CiQuery),
    /// The head of a branch alone, answered on `reply` (a push claim waits for it).
    Head {
        repo: Repo,
        branch: String,
        reply: Sender<Result<Option<Sha>, ForgeError>>,
    },
}

/// A CI query for the CI thread: CI for `sha`, and the head of the worker's `branch` when
/// `with_head`.
struct CiQuery {
    n: u64,
    repo: Repo,
    sha: Sha,
    branch: String,
    pushed_ms: Option<i64>,
    with_head: bool,
}

/// The CI thread's answer to query `n`.
#[derive(Debug)]
pub struct CiAnswer {
    pub n: u64,
    pub sha: Sha,
    pub result: Result<(Verdict, Vec<CiRun>), ForgeError>,
    /// The head of the worker's branch on the forge, read after CI (`Ok(None)`: no such
    /// branch), when the query asked for it. What DONE is about: a claim names a commit, the
    /// forge says which one counts.
    pub head: Option<Result<Option<Sha>, ForgeError>>,
}

/// Queries to, and answers from, the CI thread; one query in flight at a time.
pub struct CiLink {
    tx: Sender<Query>,
    rx: Receiver<CiAnswer>,
    /// The query being answered: (SHA, its number).
    in_flight: Option<(Sha, u64)>,
    /// How many queries were sent so far (numbers them).
    sent: u64,
}

impl CiLink {
    /// Starts the CI thread; it rings `bell` with every answer.
    pub fn start<F: Forge + 'static>(follower: Arc<CiFollower<F>>, bell: Arc<Bell>) -> CiLink {
        let (tx, qrx) = channel::<Query>();
        let (atx, rx) = channel::<CiAnswer>();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a current-thread runtime builds");
            while let Ok(q) = qrx.recv() {
                let q = match q {
                    Query::Ci(q) => q,
                    Query::Head {
                        repo,
                        branch,
                        reply,
                    } => {
                        let head = rt.block_on(follower.forge().branch_head(&repo, &branch));
                        let _ = reply.send(head.map(|h| h.map(Sha::from)));
                        continue;
                    }
                };
                let result = rt.block_on(follower.poll(&q.repo, &q.sha, q.pushed_ms, now_ms()));
                // Read after CI: a head read before would let a push land between the two
                // unseen, and the verdict would be judged against a stale head.
                let head = q.with_head.then(|| {
                    rt.block_on(follower.forge().branch_head(&q.repo, &q.branch))
                        .map(|h| h.map(Sha::from))
                });
                let answer = CiAnswer {
                    n: q.n,
                    sha: q.sha,
                    result,
                    head,
                };
                if atx.send(answer).is_err() {
                    return;
                }
                bell.ring();
            }
        });
        CiLink {
            tx,
            rx,
            in_flight: None,
            sent: 0,
        }
    }

    /// The number of the last query sent (0: none yet).
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// Whether no query is being answered.
    pub fn idle(&self) -> bool {
        self.in_flight.is_none()
    }

    /// Whether a query for `sha` is being answered.
    pub fn asking_about(&self, sha: &Sha) -> bool {
        self.in_flight.as_ref().is_some_and(|(s, _)| s == sha)
    }

    /// Sends a query (CI for `sha`; then `branch`'s head when `with_head`); false if the CI
    /// thread is gone.
    pub fn ask(
        &mut self,
        repo: Repo,
        sha: Sha,
        branch: &str,
        pushed_ms: Option<i64>,
        with_head: bool,
    ) -> bool {
        let n = self.sent + 1;
        let q = CiQuery {
            n,
            repo,
            sha: sha.clone(),
            branch: branch.to_string(),
            pushed_ms,
            with_head,
        };
        if self.tx.send(Query::Ci(q)).is_err() {
            return false;
        }
        self.sent = n;
        self.in_flight = Some((sha, n));
        true
    }

    /// The head of `branch` on the forge, read now (after a query in flight, if any), waiting
    /// at most `wait`.
    pub fn branch_head(
        &self,
        repo: Repo,
        branch: &str,
        wait: std::time::Duration,
    ) -> Result<Option<Sha>, String> {
        let (reply, answer) = channel();
        let q = Query::Head {
            repo,
            branch: branch.to_string(),
            reply,
        };
        self.tx
            .send(q)
            .map_err(|_| "the CI thread is gone".to_string())?;
        match answer.recv_timeout(wait) {
            Ok(head) => head.map_err(|e| e.to_string()),
            Err(_) => Err(format!("no answer from the forge within {wait:?}")),
        }
    }

    /// The next answer, if one came in.
    pub fn answer(&mut self) -> Option<CiAnswer> {
        let a = self.rx.try_recv().ok()?;
        if self.in_flight.as_ref().is_some_and(|(_, n)| *n == a.n) {
            self.in_flight = None;
        }
        Some(a)
    }
}

/// When to poll the forge again after an answer, and when a failing forge deserves an
/// alert: once, when the failure is blocking (an operator must act) or after
/// `threshold` transient failures in a row.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ForgeBackoff {
    failures: u32,
    alerted: bool,
}

/// What to do after a failed poll.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AfterFailure {
    /// Wait this long before the next poll.
    pub delay_ms: i64,
    /// Raise the alert now.
    pub alert: bool,
}

/// Polls after a blocking error wait this many intervals: retrying will not help soon.
const BLOCKING_FACTOR: i64 = 6;
/// Transient failures wait one interval more per failure in a row, up to this many more.
const MAX_EXTRA_INTERVALS: u32 = 6;

impl ForgeBackoff {
    /// Failed polls in a row (a deadlock indicator).
    pub fn failures(&self) -> u32 {
        self.failures
    }

    /// The forge answered: back to the normal interval.
    pub fn succeeded(&mut self, interval_ms: i64) -> i64 {
        self.failures = 0;
        self.alerted = false;
        interval_ms
    }

    pub fn failed(&mut self, blocking: bool, interval_ms: i64, threshold: u32) -> AfterFailure {
        self.failures += 1;
        let factor = if blocking {
            BLOCKING_FACTOR
        } else {
            1 + self.failures.min(MAX_EXTRA_INTERVALS) as i64
        };
        let alert = !self.alerted && (blocking || self.failures >= threshold);
        self.alerted |= alert;
        AfterFailure {
            delay_ms: interval_ms * factor,
            alert,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transient_failures_back_off_and_alert_once_at_the_threshold() {
        let mut b = ForgeBackoff::default();
        let delays: Vec<AfterFailure> = (0..9).map(|_| b.failed(false, 1000, 3)).collect();
        assert_eq!(
            delays.iter().map(|d| d.delay_ms).collect::<Vec<_>>(),
            [2000, 3000, 4000, 5000, 6000, 7000, 7000, 7000, 7000]
        );
        assert_eq!(
            delays.iter().map(|d| d.alert).collect::<Vec<_>>(),
            [false, false, true, false, false, false, false, false, false]
        );
    }

    #[test]
    fn a_blocking_error_alerts_at_once_and_waits_longest() {
        let mut b = ForgeBackoff::default();
        assert_eq!(
            b.failed(true, 1000, 5),
            AfterFailure {
                delay_ms: 6000,
                alert: true
            }
        );
        assert!(!b.failed(true, 1000, 5).alert, "alerted once");
    }

    #[test]
    fn a_success_resets_the_count_and_rearms_the_alert() {
        let mut b = ForgeBackoff::default();
        assert!(b.failed(false, 1000, 2).delay_ms == 2000);
        assert!(b.failed(false, 1000, 2).alert);
        assert_eq!(b.succeeded(1000), 1000);
        assert_eq!(b, ForgeBackoff::default());
        assert!(!b.failed(false, 1000, 2).alert);
        assert!(
            b.failed(false, 1000, 2).alert,
            "alerts again after a recovery"
        );
    }
}
