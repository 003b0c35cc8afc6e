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
use crate::forge::Forge;
use crate::milestone::{Event, Progress};
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
        let Some(changed) = changed_behind(stored.as_ref(), &self.written) else {
            return false;
        };
        let mine = self.w.progress.milestone;
        // The alert's commit writes this supervisor's state back over the forged one.
        self.apply(
            Event::Trespass {
                kind: "state_tampered".into(),
                message: format!(
                    "worker {id}'s row in orch's database was changed by someone else than its supervisor ({changed}; it is {mine}): written outside orch; put back"
                ),
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

/// What differs between the worker's row as stored (`milestone` column, progress JSON; None:
/// no row) and the progress its supervisor last wrote, in words; None when nothing does.
/// Only this worker's supervisor writes its row while it lives (the journal rule), so any
/// difference was written by someone else.
fn changed_behind(stored: Option<&(String, String)>, written: &Progress) -> Option<String> {
    let Some((column, progress)) = stored else {
        return Some("its row is gone".into());
    };
    let mut changed = Vec::new();
    if column != written.milestone.as_str() {
        changed.push(format!("milestone column {}", crate::text::escape(column)));
    }
    let mine = serde_json::to_value(written).expect("progress serialises");
    match serde_json::from_str::<serde_json::Value>(progress) {
        Ok(serde_json::Value::Object(theirs)) => {
            let empty = serde_json::Map::new();
            let ours = mine.as_object().unwrap_or(&empty);
            let mut keys: Vec<&String> = ours.keys().chain(theirs.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                if ours.get(k) != theirs.get(k) {
                    let said = theirs.get(k).map_or("removed".to_string(), |v| {
                        format!("{}", crate::text::escape(&truncate(&v.to_string(), 80)))
                    });
                    changed.push(format!("{k}: {said}"));
                }
            }
        }
        _ => changed.push("its progress is not orch's JSON".into()),
    }
    (!changed.is_empty()).then(|| changed.join(", "))
}

fn truncate(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(p: &Progress) -> (String, String) {
        (
            p.milestone.as_str().to_string(),
            serde_json::to_string(p).unwrap(),
        )
    }

    #[test]
    fn a_row_as_its_supervisor_wrote_it_is_unchanged_and_any_other_is_named() {
        let mine = Progress::new(&crate::contract::Contract::embedded(), 1_000);
        assert_eq!(changed_behind(Some(&stored(&mine)), &mine), None);
        assert_eq!(
            changed_behind(None, &mine).as_deref(),
            Some("its row is gone")
        );
        // A forged DONE in the column alone (what queries select on).
        let (_, json) = stored(&mine);
        let said = changed_behind(Some(&("DONE".into(), json.clone())), &mine).unwrap();
        assert_eq!(said, "milestone column DONE");
        // A forged approval inside the progress, the milestone left alone.
        let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
        v["approved"] = serde_json::json!("a".repeat(40));
        let said = changed_behind(Some(&("WORKING".into(), v.to_string())), &mine).unwrap();
        assert!(said.starts_with("approved: "), "{said}");
        let said = changed_behind(Some(&("WORKING".into(), "{".into())), &mine).unwrap();
        assert_eq!(said, "its progress is not orch's JSON");
    }
}
