//! Tests of the state machine, one file per event family; the helpers every family uses are
//! here (the shipped contract, a worker at a milestone, a push, a verdict, its alerts).

use super::*;
use crate::contract::Contract;
use Milestone::*;

const T0: i64 = 1_000_000;
const MIN: i64 = 60_000;

fn contract() -> Contract {
    Contract::embedded()
}

/// The shipped contract with one value replaced (`from` must be in it).
fn contract_with(from: &str, to: &str) -> Contract {
    let text = crate::contract::EMBEDDED;
    assert!(text.contains(from), "the contract has no {from}");
    Contract::from_str(&text.replace(from, to), std::path::Path::new("c.yaml")).unwrap()
}

fn push(sha: &str) -> Event {
    Event::Push {
        sha: sha.into(),
        pushed_ms: T0,
        via: Channel::Output,
        protected: Vec::new(),
        secrets: Vec::new(),
    }
}

fn alerts_of<'a>(fx: &'a [Effect], kind: &str) -> Vec<&'a str> {
    fx.iter()
        .filter_map(|e| match e {
            Effect::Alert {
                kind: k, message, ..
            } if k == kind => Some(message.as_str()),
            _ => None,
        })
        .collect()
}

fn at(m: Milestone) -> Progress {
    let c = contract();
    let mut p = Progress::new(&c, T0);
    p.enter(&c, m, T0);
    p.tracked_sha = Some("a".repeat(40).into());
    p
}

/// At `m` after the worker ended its turn (exit 0): its word that the work is done.
fn ended(m: Milestone) -> Progress {
    let mut p = at(m);
    p.turn_ended = true;
    p
}

fn verdict(kind: VerdictKind, sha: &str) -> Event {
    Event::Verdict {
        sha: sha.into(),
        kind,
        failed_jobs: if kind == VerdictKind::Red {
            vec!["test".into()]
        } else {
            vec![]
        },
        detail: format!("{kind:?}"),
        jobs: None,
    }
}

mod ci;
mod crash;
mod fix_timeout;
mod landing;
mod legality;
mod pause;
mod protected;
mod report;
mod timers;
