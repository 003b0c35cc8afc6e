//! CI of the integration (Verifying: green lets the supervisor move the base) and of the base
//! branch at the landed commit (BaseCi: green lands the change, or checks its dependents).

use super::super::{Effect, Severity};
use super::{LandEvent, LandState, Landing, note, red_jobs};
use crate::ci::verdict::VerdictKind;

pub(super) fn on_verdict(l: &mut Landing, worker: &str, e: &LandEvent, fx: &mut Vec<Effect>) {
    // Any other event is another family's: `step` dispatches by family.
    let LandEvent::Verdict {
        sha,
        kind,
        failed_jobs,
        detail,
    } = e
    else {
        return;
    };
    match (l.state, kind) {
        (LandState::Verifying, _) if l.candidate.as_ref() != Some(sha) => {}
        (LandState::BaseCi, _) if l.landed.as_ref() != Some(sha) => {}
        (LandState::Verifying, VerdictKind::Green) => {
            // The supervisor moves the base (compare-and-swap) next; nothing to record.
        }
        (LandState::Verifying, VerdictKind::Red | VerdictKind::SyncNotDone) => {
            l.state = LandState::Conflict;
            let why = format!(
                "the integration {} on the base head is red ({}): the change breaks with what landed meanwhile",
                sha.short(),
                red_jobs(failed_jobs, detail)
            );
            note(l, why.clone());
            fx.push(Effect::alert(
                Severity::Critical,
                "landing_conflict",
                format!("worker {worker}: {why}; the chain lock is kept for a person"),
            ));
        }
        (LandState::BaseCi, VerdictKind::Green) if !l.downstream.is_empty() => {
            // The dependents are checked against it before the chain is free.
            l.state = LandState::Downstream;
            let repos: Vec<&str> = l.downstream.iter().map(|d| d.repo.as_str()).collect();
            note(
                l,
                format!(
                    "landed {}: base branch CI green; checking {} on it",
                    sha.short(),
                    repos.join(", ")
                ),
            );
        }
        (LandState::BaseCi, VerdictKind::Green) => {
            l.state = LandState::Landed;
            note(l, format!("landed {}: base branch CI green", sha.short()));
            fx.push(Effect::ReleaseLock {
                reason: format!("DONE and landed: base branch CI green for {sha}"),
            });
        }
        (LandState::BaseCi, VerdictKind::Red | VerdictKind::SyncNotDone) => {
            l.state = LandState::Refused;
            let why = format!(
                "the base branch is red at the landed commit {} ({})",
                sha.short(),
                red_jobs(failed_jobs, detail)
            );
            note(l, why.clone());
            fx.push(Effect::alert(
                Severity::Critical,
                "landing_base_red",
                format!("worker {worker}: {why}; the chain lock is kept for a person"),
            ));
        }
        _ => {}
    }
}
