//! The attention board: the workers of `orch status` (and the wave tasks still to start)
//! grouped by what they need, each card with its age, spend and the one action that helps.
//! `build` is pure: the board is made of the views the commands print, so it says what the
//! CLI says; [`of`] reads those views for a filter.

use super::Error;
use super::workers::History;
use crate::app::Loaded;
use crate::milestone::{LandState, Milestone};
use crate::operator::view::locks::LockView;
use crate::operator::view::wave::WaveStatusView;
use crate::operator::view::workers::{StatusView, WorkerView};
use schemars::JsonSchema;
use serde::Serialize;

/// What a card's owner needs, in the order the board shows the groups.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Need {
    /// BLOCKED, BLOCKED_PERMISSION, FAILED, PAUSED, a landing in conflict or refused.
    Human,
    /// FIXING_CI: its CI was red and it is fixing it (attempt n of max).
    CiRed,
    /// A wave task that cannot start: its chain is locked by someone else.
    Waiting,
    Working,
    /// PUSHED_TO_CI: CI runs for its commit.
    AwaitingCi,
    /// DONE, its change on its way to the base branch.
    Landing,
    /// DONE and landed (or waiting for a person's merge), or CANCELLED.
    Done,
}

impl Need {
    pub const ALL: [Need; 7] = [
        Need::Human,
        Need::CiRed,
        Need::Waiting,
        Need::Working,
        Need::AwaitingCi,
        Need::Landing,
        Need::Done,
    ];

    pub fn title(self) -> &'static str {
        match self {
            Need::Human => "Needs a human",
            Need::CiRed => "CI red",
            Need::Waiting => "Waiting",
            Need::Working => "Working",
            Need::AwaitingCi => "Awaiting CI",
            Need::Landing => "Landing",
            Need::Done => "Done",
        }
    }
}

/// One card of the board.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Card {
    /// null: a wave task not started yet.
    pub worker_id: Option<String>,
    pub repo: String,
    pub task: String,
    /// `<wave>:<task>` when a wave started it (or is to start it).
    pub wave: Option<String>,
    /// The milestone as `status` shows it (`FIXING_CI 2/5`), or PENDING for a task to start.
    pub milestone: String,
    /// Seconds in its milestone (a waiting task: seconds the lock in its way has been held).
    pub age_s: u64,
    pub cost_usd: f64,
    /// CI as `status` shows it (`running: ci 3/6 jobs`).
    pub ci: String,
    /// Jobs passed and all jobs of its tracked commit's CI, when CI was seen.
    pub ci_passed: Option<u32>,
    pub ci_total: Option<u32>,
    /// It holds its chain lock now.
    pub lock_held: bool,
    /// What it waits for, in words (who holds the lock in its way, and since when).
    pub waits_for: Option<String>,
    /// The one action that helps, as the command to run.
    pub action: Option<String>,
    /// What superseded it (a later attempt of its task): it is not respawned or approved.
    pub superseded: Option<String>,
}

#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Group {
    pub need: Need,
    pub title: String,
    pub cards: Vec<Card>,
}

/// `/api/board`: every group, in the board's order (empty ones too).
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct BoardView {
    pub groups: Vec<Group>,
}

impl crate::operator::view::View for BoardView {
    const NAME: &'static str = "board";
}

impl BoardView {
    pub fn count(&self, need: Need) -> usize {
        self.groups
            .iter()
            .find(|g| g.need == need)
            .map_or(0, |g| g.cards.len())
    }
}

/// Where a worker belongs.
pub fn need_of(w: &WorkerView) -> Need {
    let landing = w.landing.as_ref().map(|l| l.state);
    // Its task went on in another attempt: nothing a person does to it helps the task.
    if w.superseded.is_some() {
        return Need::Done;
    }
    match w.milestone {
        Milestone::Blocked
        | Milestone::BlockedPermission
        | Milestone::Failed
        | Milestone::Paused => Need::Human,
        Milestone::FixingCi => Need::CiRed,
        Milestone::Working => Need::Working,
        Milestone::PushedToCi => Need::AwaitingCi,
        Milestone::Cancelled => Need::Done,
        Milestone::Done => match landing {
            Some(LandState::Conflict | LandState::Refused | LandState::Broken) => Need::Human,
            Some(
                LandState::Pending
                | LandState::Verifying
                | LandState::BaseCi
                | LandState::Downstream
                | LandState::Reverting,
            ) => Need::Landing,
            _ => Need::Done,
        },
    }
}

/// The command that helps a worker in `need`.
fn action_for(w: &WorkerView, need: Need) -> Option<String> {
    let id = &w.worker_id;
    if w.superseded.is_some() {
        // Never respawned or approved (refused); a stopped one that is not ended yet may be.
        return (!w.milestone.is_terminal()).then(|| format!("orch cancel {id}"));
    }
    match (need, w.milestone) {
        (Need::Human, Milestone::Blocked) if w.held_sha.is_some() => {
            Some(format!("orch approve {id}"))
        }
        (Need::Human, Milestone::Blocked | Milestone::BlockedPermission | Milestone::Failed) => {
            Some(format!("orch respawn {id} --note …"))
        }
        (Need::Human, Milestone::Paused) => {
            Some(format!("orch fatal {} (or orch cancel {id})", w.repo))
        }
        (Need::Human, Milestone::Done) => Some(format!("orch release {id} --force --reason …")),
        (Need::CiRed, _) => Some(format!(
            "orch ci logs --repo {} --sha {}",
            w.repo,
            w.tracked_sha.as_ref().map_or("<sha>", |s| s.as_str())
        )),
        _ => None,
    }
}

fn card(w: &WorkerView, locks: &[LockView]) -> Card {
    let need = need_of(w);
    Card {
        worker_id: Some(w.worker_id.clone()),
        repo: w.repo.clone(),
        task: w.task.clone(),
        wave: w.wave.clone(),
        milestone: w.milestone_column(),
        age_s: w.age_s,
        cost_usd: w.usage.as_ref().map_or(0.0, |u| u.cost_usd),
        ci: w.ci_column(),
        ci_passed: w.ci_jobs.as_ref().map(|t| t.passed),
        ci_total: w.ci_jobs.as_ref().map(|t| t.total),
        lock_held: locks.iter().any(|l| l.holder == w.worker_id),
        waits_for: None,
        action: action_for(w, need),
        superseded: w.superseded.clone(),
    }
}

/// The board of `status` (its workers and locks) and the waves in progress: a wave task not
/// started whose repository's chain is locked waits for that lock (`conflicts(a, b)`: the
/// chains of `a` and `b` overlap, as `graph.conflicts`).
pub fn build(
    status: &StatusView,
    waves: &[WaveStatusView],
    conflicts: impl Fn(&str, &str) -> bool,
) -> BoardView {
    let mut groups: Vec<Group> = Need::ALL
        .iter()
        .map(|&need| Group {
            need,
            title: need.title().to_string(),
            cards: Vec::new(),
        })
        .collect();
    let slot = |need: Need| Need::ALL.iter().position(|&n| n == need).unwrap_or(0);
    for w in &status.workers {
        groups[slot(need_of(w))].cards.push(card(w, &status.locks));
    }
    for wave in waves.iter().filter(|w| !w.cancelled && !w.finished) {
        for t in wave.tasks.iter().filter(|t| t.worker.is_none()) {
            // A task waiting on its predecessors is the wave's business, not a lock's.
            if !t.waiting_on.is_empty() {
                continue;
            }
            let Some(lock) = status.locks.iter().find(|l| conflicts(&t.repo, &l.repo)) else {
                continue;
            };
            groups[slot(Need::Waiting)].cards.push(Card {
                worker_id: None,
                repo: t.repo.clone(),
                task: t.task.clone(),
                wave: Some(format!("{}:{}", wave.name, t.id)),
                milestone: "PENDING".into(),
                age_s: lock.age_s,
                cost_usd: 0.0,
                ci: "-".into(),
                ci_passed: None,
                ci_total: None,
                lock_held: false,
                waits_for: Some(format!(
                    "the chain lock on {} held by {} for {}",
                    lock.repo,
                    lock.holder,
                    crate::operator::view::human_duration(lock.age_s)
                )),
                action: None,
                superseded: None,
            });
        }
    }
    // The one that has waited (or worked) longest first.
    for g in &mut groups {
        g.cards.sort_by_key(|c| std::cmp::Reverse(c.age_s));
    }
    BoardView { groups }
}

/// `orch wave status --json` of every wave orch has run.
pub fn waves_of(l: &Loaded) -> Result<Vec<WaveStatusView>, Error> {
    Ok(crate::app::wave::statuses(l)?
        .iter()
        .map(WaveStatusView::of)
        .collect())
}

/// The attention board for `args`, with the status it was built from.
pub fn of(l: &Loaded, args: &History) -> Result<(StatusView, BoardView), Error> {
    let status = super::workers::status_or_empty(l, args)?;
    let waves = waves_of(l)?;
    let view = view(l, &status, &waves);
    Ok((status, view))
}

/// The attention board of `status` and `waves`.
pub fn view(l: &Loaded, status: &StatusView, waves: &[WaveStatusView]) -> BoardView {
    let g = &l.config.graph;
    build(status, waves, |a, b| {
        a == b || (g.contains(a) && g.contains(b) && g.conflicts(a, b))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn worker(id: &str, m: Milestone) -> WorkerView {
        WorkerView {
            worker_id: id.into(),
            repo: "core".into(),
            task: "t".into(),
            task_id: None,
            component: None,
            milestone: m,
            since: "2026-01-01T00:00:00Z".into(),
            age_s: 5,
            created_at: "2026-01-01T00:00:00Z".into(),
            branch: format!("orch/{id}"),
            base_sha: "0".repeat(40),
            tracked_sha: None,
            verdict: None,
            failed_jobs: Vec::new(),
            fix_attempts: 2,
            fix_attempts_max: 5,
            ci_jobs: None,
            ci_restarts: 0,
            deadlock: Vec::new(),
            end_reason: None,
            worker_running: true,
            supervisor_alive: true,
            supervision: crate::operator::view::workers::SupervisionView::Alive,
            respawns: 0,
            usage: None,
            session_id: None,
            wave: None,
            landing: None,
            protected: Vec::new(),
            held_sha: None,
            approved_sha: None,
            model: None,
            model_source: None,
            halted: None,
            node: None,
            superseded: None,
        }
    }

    fn status(workers: Vec<WorkerView>, locks: Vec<LockView>) -> StatusView {
        StatusView {
            workers,
            locks,
            more_ended: 0,
            next: None,
            spent_by_model: Vec::new(),
            fatal_holds: Vec::new(),
        }
    }

    #[test]
    fn a_superseded_attempt_is_offered_neither_respawn_nor_approval() {
        let mut held = worker("a1", Milestone::Blocked);
        held.held_sha = Some(crate::sha::Sha::new("1".repeat(40)));
        let failed = worker("b1", Milestone::Failed);
        let by = Some("by worker a2 (attempt 2 of wave w's task t, DONE)".to_string());
        let b = build(
            &status(
                vec![held.superseded(by.clone()), failed.superseded(by.clone())],
                Vec::new(),
            ),
            &[],
            |_, _| false,
        );
        assert_eq!(b.count(Need::Human), 0);
        let cards: Vec<&Card> = b.groups.iter().flat_map(|g| &g.cards).collect();
        assert_eq!(cards[0].action.as_deref(), Some("orch cancel a1"));
        assert_eq!(cards[1].action, None);
        assert!(cards.iter().all(|c| c.superseded == by));
    }

    #[test]
    fn each_milestone_lands_in_the_group_of_what_it_needs() {
        let cases = [
            (Milestone::Blocked, Need::Human),
            (Milestone::BlockedPermission, Need::Human),
            (Milestone::Failed, Need::Human),
            (Milestone::Paused, Need::Human),
            (Milestone::FixingCi, Need::CiRed),
            (Milestone::Working, Need::Working),
            (Milestone::PushedToCi, Need::AwaitingCi),
            (Milestone::Done, Need::Done),
            (Milestone::Cancelled, Need::Done),
        ];
        for (m, need) in cases {
            assert_eq!(need_of(&worker("w", m)), need, "{m}");
        }
        let b = build(
            &status(vec![worker("w", Milestone::FixingCi)], Vec::new()),
            &[],
            |_, _| false,
        );
        assert_eq!(b.count(Need::CiRed), 1);
        let c = &b.groups[1].cards[0];
        assert_eq!(c.milestone, "FIXING_CI 2/5");
        assert!(c.action.as_deref().unwrap().starts_with("orch ci logs"));
        assert_eq!(b.groups.len(), Need::ALL.len());
    }

    #[test]
    fn a_lock_holder_is_marked_and_cards_go_longest_first() {
        let mut a = worker("a", Milestone::Working);
        a.age_s = 10;
        let mut b = worker("b", Milestone::Working);
        b.age_s = 99;
        let lock = LockView {
            repo: "core".into(),
            holder: "a".into(),
            kind: crate::lock::HolderKind::Worker,
            reason: None,
            by: None,
            acquired_at: "2026-01-01T00:00:00Z".into(),
            age_s: 10,
        };
        let board = build(&status(vec![a, b], vec![lock]), &[], |_, _| false);
        let cards = &board.groups[3].cards;
        assert_eq!(cards[0].worker_id.as_deref(), Some("b"));
        assert!(!cards[0].lock_held);
        assert!(cards[1].lock_held);
    }
}
