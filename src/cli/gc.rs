//! `orch gc`: prints what cleaning up finished workers' worktrees, branches and the `orch`
//! remote did (or would do), and maps it to an exit code.

use super::{Ctx, Outcome};
use crate::app::gc::{self, Action, GcReport};
use crate::text::escape;

pub fn run(ctx: &Ctx, dry_run: bool, json: bool) -> Outcome {
    let loaded = ctx.load()?;
    let mut store = ctx.existing_store(&loaded.config)?;
    let report = gc::run(&loaded, store.as_mut(), dry_run)?;
    if json {
        crate::operator::view::print_json(&crate::operator::view::workers::GcView(report.clone()));
    } else {
        print_human(&report);
    }
    for u in &report.unreachable {
        eprintln!("orch: cannot fetch {}", escape(u));
    }
    Ok(if !report.unreachable.is_empty() || report.any_failed() {
        3
    } else {
        0
    })
}

fn print_human(r: &GcReport) {
    let h = &r.history;
    if r.workers.is_empty()
        && r.remotes.is_empty()
        && h.pruned.is_empty()
        && h.kept.is_empty()
        && h.alerts == 0
    {
        println!(
            "nothing to clean up (history.keep {}: nothing ended before {})",
            crate::duration::format(std::time::Duration::from_secs(h.keep_s)),
            h.cutoff
        );
        return;
    }
    let removed = if r.dry_run { "would remove" } else { "removed" };
    for w in &r.workers {
        let what: Vec<String> = [
            w.worktree.as_ref().map(|p| format!("worktree {p}")),
            w.branch.as_ref().map(|b| format!("branch {b}")),
        ]
        .into_iter()
        .flatten()
        .collect();
        let head = match w.action {
            Action::Remove => removed,
            Action::Keep => "kept",
            Action::Failed => "failed to remove",
        };
        let mut line = format!(
            "{head} {} ({}, {}): {}",
            w.worker_id,
            w.milestone,
            w.repo,
            what.join(", ")
        );
        if let Some(clone) = &w.clone {
            line.push_str(&format!(" in {clone}"));
        }
        if let Some(why) = &w.reason {
            line.push_str(&format!(" — {why}"));
        }
        println!("{}", escape(&line));
    }
    for rm in &r.remotes {
        let head = match rm.action {
            Action::Remove => removed,
            Action::Keep => "kept",
            Action::Failed => "failed to remove",
        };
        let mut line = format!(
            "{head} remote {} in {} ({}: nothing of orch's left there)",
            rm.remote, rm.clone, rm.repo
        );
        if let Some(why) = &rm.reason {
            line.push_str(&format!(" — {why}"));
        }
        println!("{}", escape(&line));
    }
    print_history(r);
}

fn print_history(r: &GcReport) {
    let h = &r.history;
    let pruned = if r.dry_run { "would prune" } else { "pruned" };
    for p in &h.pruned {
        println!(
            "{}",
            escape(&format!(
                "{pruned} {} ({}, {}, ended {}): its records and {}",
                p.worker_id, p.milestone, p.repo, p.ended_at, p.session
            ))
        );
    }
    for k in &h.kept {
        println!(
            "{}",
            escape(&format!(
                "kept the history of {} ({}, {}) — {}",
                k.worker_id, k.milestone, k.repo, k.reason
            ))
        );
    }
    for w in &h.waves {
        println!("{}", escape(&format!("{pruned} wave {w}")));
    }
    if !h.pruned.is_empty() || !h.kept.is_empty() || h.alerts > 0 {
        let alerts = format!(
            "{} ({} delivered outbox rows)",
            super::plural(h.alerts, "delivered alert", "delivered alerts"),
            h.deliveries
        );
        println!(
            "history.keep {}: {} {} that ended before {}, and {alerts}; kept {}",
            crate::duration::format(std::time::Duration::from_secs(h.keep_s)),
            pruned,
            super::plural(h.pruned.len(), "worker", "workers"),
            h.cutoff,
            h.kept.len()
        );
    }
}
