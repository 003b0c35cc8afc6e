//! The worker's branch, as orch sees it on the forge: its head read through the CI thread,
//! pushes seen there whether reported or not (new work only), and DONE claims judged on a
//! fresh head while the worker is frozen — so that no push slips under a DONE.

use super::Supervisor;
use super::claims::{ForgeHead, push_of};
use super::done;
use super::journal::Fact;
use crate::forge::Forge;
use crate::milestone::{Channel, Event, Milestone};
use crate::sha::Sha;
use crate::store::workers as ws;
use std::time::{Duration, Instant};

impl<F: Forge + 'static> Supervisor<'_, F> {
    /// The head of the worker's branch on the forge, read now through the CI thread.
    /// The answers to queries sent before it carry heads read earlier: see `head_read_after`.
    pub(super) fn forge_head(&mut self) -> ForgeHead {
        let Some(repo) = self.env.config.repo(&self.w.repo).cloned() else {
            return Err(format!("repository {} is not configured", self.w.repo));
        };
        let wait = self.env.config.forge.request_timeout * 4 + Duration::from_secs(5);
        // The CI thread answers in order: this read comes after every query sent so far.
        self.ci.head_read_after = self.ci.link.sent();
        self.ci.link.branch_head(repo, &self.w.branch, wait)
    }

    /// What the other workers of the repository pushed (worker, SHA).
    pub(super) fn others_pushes(&mut self) -> Vec<(String, String)> {
        let (repo, id) = (self.w.repo.clone(), self.w.id.clone());
        self.store
            .read(|tx| ws::others_pushes(tx, &repo, &id))
            .unwrap_or_default()
    }

    /// A head of the worker's branch that is not the tracked commit: a push, reported or not.
    /// New work re-opens verification (the worker is PUSHED_TO_CI on it); anything else is a
    /// violation, said once.
    pub(super) fn observe_head(&mut self, head: &ForgeHead) {
        let Ok(Some(h)) = head else {
            return;
        };
        let p = &self.w.progress;
        if p.tracked_sha.as_ref() == Some(h)
            || p.milestone.is_terminal()
            || !matches!(p.milestone, Milestone::PushedToCi | Milestone::FixingCi)
            || self.ci.refused_head.as_ref() == Some(h)
        {
            return;
        }
        let replaced = p.tracked_sha.clone();
        let others = self.others_pushes();
        let (event, facts) = match push_of(self.env.config, &self.w, h, &others, Channel::Forge) {
            Ok(push) => {
                let seen = Fact::Logged {
                    kind: "push_seen",
                    detail: format!(
                        "{} is the head of {} on the forge, replacing {}: CI is verified again",
                        h.short(),
                        self.w.branch,
                        replaced.as_ref().map(Sha::short).unwrap_or("nothing")
                    ),
                };
                (push, vec![seen])
            }
            Err(reason) => {
                self.ci.refused_head = Some(h.clone());
                let rejected = Event::PushRejected {
                    claimed: h.to_string(),
                    reason,
                    via: Channel::Forge,
                };
                (rejected, Vec::new())
            }
        };
        self.apply(event, None, facts);
    }

    /// Judges DONE claims on `head`, the branch head read with a CI answer sent after them
    /// (`None`: no such answer came). DONE needs that head to be the tracked commit; the
    /// machine then needs its CI green. A claim refused here leaves the worker to go on.
    pub(super) fn judge_done(&mut self, claims: Vec<done::PendingDone>, head: Option<&ForgeHead>) {
        for d in claims {
            let tracked = self.w.progress.tracked_sha.clone();
            let refusal = match head {
                Some(Ok(Some(h))) if tracked.as_ref() == Some(h) => None,
                Some(Ok(Some(h))) => Some(format!(
                    "the head of branch {} on the forge is {}, not the verified {}",
                    self.w.branch,
                    h.short(),
                    tracked.as_ref().map(Sha::short).unwrap_or("(none)")
                )),
                Some(Ok(None)) => Some(format!("branch {} is not on the forge", self.w.branch)),
                Some(Err(e)) => Some(format!(
                    "the head of branch {} cannot be read from the forge: {e}",
                    self.w.branch
                )),
                None => Some(format!(
                    "the forge did not answer within {} s: claim DONE again",
                    done::DONE_VERDICT_WAIT_MS / 1000
                )),
            };
            let event = match refusal {
                None => Event::DoneClaim { via: d.via },
                Some(reason) => Event::DoneRefused { reason, via: d.via },
            };
            self.apply(event, d.request, Vec::new());
        }
        self.thaw();
    }

    /// Gives a worker that printed DONE up to `grace` to exit by itself.
    pub(super) fn let_exit(&mut self, grace: Duration) {
        let until = Instant::now() + grace;
        while let Some(w) = self.worker.as_mut() {
            if w.try_wait().is_some() {
                // Queries sent from here on are sent after the exit.
                self.ci.exit_seen_at.get_or_insert(self.ci.link.sent());
                return;
            }
            if Instant::now() >= until {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub(super) fn freeze(&mut self) {
        if let Some(w) = &self.worker
            && !self.ci.frozen
        {
            w.freeze();
            self.ci.frozen = true;
        }
    }

    /// Lets a frozen worker go on (its DONE was refused).
    pub(super) fn thaw(&mut self) {
        if self.ci.frozen && self.ci.done_claims.is_empty() {
            self.ci.frozen = false;
            if self.w.progress.milestone != Milestone::Paused
                && let Some(w) = &self.worker
            {
                w.thaw();
            }
        }
    }
}
