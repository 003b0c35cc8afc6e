//! What a supervisor finds changed under it in the database by someone else: its worker's
//! row (anything it did not write there itself: a forged DONE, a CANCELLED it was not asked
//! for, a forged approval, verdict or tracked commit, a milestone column that says another
//! thing than the progress) and its
//! chain lock (a row deleted without a release in the history). Looked at after each lease
//! renewal (every few seconds). Whatever it finds is a critical alert; the worker's row is
//! written back from the supervisor's own state, and a lock taken again when nothing blocks its
//! chain — or, when another worker took the chain meanwhile, this worker is stopped
//! (CANCELLED), since two live workers must never share a chain.

use super::Supervisor;
use crate::app::journal;
use crate::forge::Forge;
use crate::milestone::Event;
use crate::store::workers as ws;
use crate::store::{self as locks, LockAttempt};

impl<F: Forge + 'static> Supervisor<'_, F> {
    /// Whether the worker's row holds what this supervisor last wrote; if not, a critical
    /// alert whose commit writes its own state back (true). Also looked at before each
    /// bookkeeping write, which would otherwise overwrite a forgery unseen.
    pub(super) fn check_own_row(&mut self) -> bool {
        let id = self.w.id.clone();
        let Ok(stored) = self.store.read(|tx| ws::stored_state(tx, &id)) else {
            return false; // a busy database says nothing
        };
        let Some(changed) = journal::changed_behind(stored.as_ref(), &self.written) else {
            return false;
        };
        let mine = self.w.progress.milestone;
        // The alert's commit writes this supervisor's state back over the forged one.
        self.apply(
            Event::Trespass {
                kind: journal::STATE_TAMPERED.into(),
                message: journal::tampered_message(&id, &changed, mine),
            },
            None,
            Vec::new(),
        );
        true
    }

    pub(super) fn check_own_rows(&mut self) {
        let id = self.w.id.clone();
        self.check_own_row();
        let Ok((holds, last)) = self.store.read(|tx| {
            Ok((
                locks::holds_lock(tx, &id)?,
                locks::last_lock_action(tx, &id)?,
            ))
        }) else {
            return; // a busy database says nothing
        };
        let should_hold =
            !self.w.progress.milestone.is_terminal() || self.w.progress.landing_active();
        if !should_hold || holds || last.as_deref() != Some("acquire") {
            return;
        }
        let repo = self.w.repo.clone();
        let graph = &self.env.config.graph;
        let retaken = self.store.write(|tx| {
            locks::retake_in(
                tx,
                graph,
                &repo,
                &id,
                "taken again: its row was deleted outside orch",
            )
        });
        match retaken {
            Ok(LockAttempt::Acquired(_)) => {
                self.apply(
                    Event::Trespass {
                        kind: "lock_tampered".into(),
                        message: format!(
                            "worker {id}'s chain lock on {repo} was deleted outside orch (no release in the history); taken again"
                        ),
                    },
                    None,
                    Vec::new(),
                );
            }
            Ok(LockAttempt::Blocked(by)) => {
                let who: Vec<String> = by.iter().map(|b| b.describe(&repo)).collect();
                let reason = format!(
                    "its chain lock on {repo} was deleted outside orch and the chain is taken now ({}): two workers must never share a chain",
                    who.join("; ")
                );
                self.apply(
                    Event::Trespass {
                        kind: "lock_tampered".into(),
                        message: format!("worker {id}: {reason}; stopped"),
                    },
                    None,
                    Vec::new(),
                );
                self.apply(
                    Event::Cancel {
                        by: "orch".into(),
                        reason,
                    },
                    None,
                    Vec::new(),
                );
            }
            Err(e) => {
                tracing::warn!(worker = %id, error = %e, "cannot take the deleted lock again");
            }
        }
    }
}
