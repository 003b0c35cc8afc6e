//! The board's `/api/graph`: `orch graph --format json` with the chain locks, the fatal holds
//! and each repository's base-branch CI as orch last saw it on it.

use super::Error;
use super::view::config::GraphView;
use super::view::locks::LockView;
use super::workers::History;
use crate::app::Loaded;
use schemars::JsonSchema;
use serde::Serialize;

/// `/api/graph`: `orch graph --format json` with the chain locks and fatal holds on it.
#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct GraphAnswer {
    /// `orch graph --format json`.
    graph: GraphView,
    /// The chain locks held, as `orch status --json` shows them.
    locks: Vec<LockView>,
    /// The fatal holds in force.
    fatal: Vec<FatalView>,
    /// The base-branch CI of each repository as orch last saw it (for the workers downstream
    /// of it; the board asks no forge of its own), repositories never looked at left out.
    base_ci: Vec<BaseCiView>,
    /// The lock holders at work (a running WORKING, PUSHED_TO_CI or FIXING_CI worker, or a
    /// PAUSED one), whose lock `orch release --force` refuses: the board offers them no Release.
    at_work: Vec<String>,
}

#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct BaseCiView {
    repo: String,
    branch: String,
    /// The base branch's head when looked at (`null`: no such branch on the forge).
    sha: Option<String>,
    /// `green`, `red`, `running`, … (`null`: no verdict yet).
    verdict: Option<String>,
    failed_jobs: Vec<String>,
    detail: Option<String>,
    #[schemars(extend("format" = "date-time"))]
    checked_at: String,
}

impl super::view::View for GraphAnswer {
    const NAME: &'static str = "board-graph";
}

#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct FatalView {
    /// The repository whose chain is halted.
    repo: String,
    reason: String,
    by: String,
    /// The worker whose report raised it, if one did.
    worker_id: Option<String>,
    #[schemars(extend("format" = "date-time"))]
    at: String,
}

/// `/api/graph` of the organisation `l` loaded.
pub fn of(l: &Loaded) -> Result<GraphAnswer, Error> {
    let status = super::workers::status_or_empty(l, &History::default())?;
    let names: Vec<String> = l.config.graph.names().to_vec();
    let (fatal, base_ci) = match l.existing_store()? {
        Some(mut s) => s.read(|tx| {
            let base = names
                .iter()
                .filter_map(|n| crate::store::upstream::get(tx, n).transpose())
                .collect::<Result<Vec<_>, _>>()?;
            Ok((crate::store::fatal::all(tx)?, base))
        })?,
        None => (Vec::new(), Vec::new()),
    };
    let at_work = status
        .workers
        .iter()
        .filter(|w| crate::app::operator::is_at_work(w.milestone, w.worker_running))
        .filter(|w| status.locks.iter().any(|lk| lk.holder == w.worker_id))
        .map(|w| w.worker_id.clone())
        .collect();
    Ok(GraphAnswer {
        at_work,
        graph: GraphView::of(&l.config.graph),
        locks: status.locks,
        fatal: fatal
            .into_iter()
            .map(|h| FatalView {
                repo: h.repo,
                reason: h.reason,
                by: h.by,
                worker_id: h.worker_id,
                at: crate::store::fmt_ms(h.at_ms),
            })
            .collect(),
        base_ci: base_ci
            .into_iter()
            .map(|r| BaseCiView {
                repo: r.repo,
                branch: r.branch,
                sha: r.sha,
                verdict: r.verdict,
                failed_jobs: r.failed_jobs,
                detail: r.detail,
                checked_at: crate::store::fmt_ms(r.checked_ms),
            })
            .collect(),
    })
}
