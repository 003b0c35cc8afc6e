//! The DONE-freshness rule: a DONE claim made while CI for the tracked SHA is not known to be
//! green is judged on the answer to a CI query sent *after* the claim — never on one already
//! in flight, which may have read the forge before CI ended. A claim whose fresh answer does
//! not come within `DONE_VERDICT_WAIT_MS` is judged on what is known. Pure bookkeeping: the
//! supervisor asks it which claims an answer (or the clock) may judge.

use crate::milestone::Channel;

/// How long a DONE claim waits for a fresh verdict before it is judged on what is known.
pub const DONE_VERDICT_WAIT_MS: i64 = 60_000;

/// A DONE claim waiting for the answer of a CI query sent after it was made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingDone {
    pub via: Channel,
    /// The `orch report` request to answer, if it came through the inbox.
    pub request: Option<i64>,
    /// Only an answer to a query numbered above this is fresh enough to judge the claim.
    after_query: u64,
    deadline_ms: i64,
}

#[derive(Debug, Default)]
pub struct DoneClaims {
    pending: Vec<PendingDone>,
}

impl DoneClaims {
    /// Defers a claim made when `last_query` was the last query sent.
    pub fn defer(&mut self, via: Channel, request: Option<i64>, last_query: u64, now: i64) {
        self.pending.push(PendingDone {
            via,
            request,
            after_query: last_query,
            deadline_ms: now + DONE_VERDICT_WAIT_MS,
        });
    }

    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Whether the request is a deferred claim (answered when it is judged).
    pub fn waiting_on(&self, request: i64) -> bool {
        self.pending.iter().any(|d| d.request == Some(request))
    }

    /// The claims the answer to query `answered` may judge: it was sent after them, and it is
    /// about the tracked SHA — or the forge failed, and they are judged on what is known.
    pub fn take_fresh(
        &mut self,
        answered: u64,
        about_tracked: bool,
        failed: bool,
    ) -> Vec<PendingDone> {
        self.take(|d| answered > d.after_query && (about_tracked || failed))
    }

    /// When the first waiting claim falls due (the loop sleeps no longer than that).
    pub fn next_deadline(&self) -> Option<i64> {
        self.pending.iter().map(|d| d.deadline_ms).min()
    }

    /// The claims whose fresh answer did not come in time.
    pub fn take_overdue(&mut self, now: i64) -> Vec<PendingDone> {
        self.take(|d| now >= d.deadline_ms)
    }

    /// Every waiting claim (the supervisor stops: each gets an answer rather than none).
    pub fn take_all(&mut self) -> Vec<PendingDone> {
        std::mem::take(&mut self.pending)
    }

    fn take(&mut self, due: impl Fn(&PendingDone) -> bool) -> Vec<PendingDone> {
        if !self.pending.iter().any(&due) {
            return Vec::new();
        }
        let (taken, kept) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|d| due(d));
        self.pending = kept;
        taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_to_a_query_sent_before_the_claim_does_not_judge_it() {
        let mut c = DoneClaims::default();
        c.defer(Channel::Report, Some(7), 3, 0);
        assert!(c.waiting_on(7));
        assert!(
            c.take_fresh(3, true, false).is_empty(),
            "query 3 was in flight"
        );
        let judged = c.take_fresh(4, true, false);
        assert_eq!(judged.len(), 1);
        assert_eq!(judged[0].request, Some(7));
        assert!(c.is_empty() && !c.waiting_on(7));
    }

    #[test]
    fn an_answer_about_another_sha_judges_only_when_the_forge_failed() {
        let mut c = DoneClaims::default();
        c.defer(Channel::Output, None, 0, 0);
        assert!(c.take_fresh(1, false, false).is_empty());
        assert_eq!(c.take_fresh(2, false, true).len(), 1);
    }

    #[test]
    fn claims_are_judged_on_what_is_known_after_the_wait() {
        let mut c = DoneClaims::default();
        c.defer(Channel::Output, None, 0, 1_000);
        c.defer(Channel::Report, Some(1), 0, 5_000);
        assert!(c.take_overdue(1_000 + DONE_VERDICT_WAIT_MS - 1).is_empty());
        assert_eq!(c.take_overdue(1_000 + DONE_VERDICT_WAIT_MS).len(), 1);
        assert!(c.waiting_on(1));
        assert_eq!(c.take_all().len(), 1);
        assert!(c.is_empty());
    }
}
