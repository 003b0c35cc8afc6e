//! Worker commands: spawn, the hidden supervisor entry point, report, status, sessions,
//! cancel and release — arguments in, the app's answer printed.

use super::{Ctx, Failure, Outcome, age, operator_name, print_json};
use crate::app::operator::{self, ANSWER_WAIT, Cancelled, Reported, Supervision, supervision};
use crate::app::spawn::{SpawnRequest, Spawned, prepare};
use crate::app::supervisor::{self, session_dir, supervise};
use crate::app::{Loaded, orch_exe, start_detached};
use crate::milestone::Milestone;
use crate::sha::short;
use crate::store::usage::Usage;
use crate::store::workers::{self as ws, RequestKind, WorkerRecord};
use crate::store::{Store, fmt_ms, now_ms};
use crate::text::escape as esc;
use serde_json::json;
use std::time::{Duration, Instant};

pub struct SpawnArgs {
    pub request: SpawnRequest,
    pub wait: bool,
    pub wait_timeout: Option<Duration>,
    pub foreground: bool,
    pub json: bool,
}

pub fn spawn(ctx: &Ctx, args: SpawnArgs) -> Outcome {
    let l = ctx.load()?;
    l.config.require_repo(&args.request.repo)?;
    if args.request.task.trim().is_empty() {
        return Err(Failure::bad_input("--task must describe the work"));
    }
    // A forge that cannot be reached with the configured credentials is refused before
    // anything is locked or started.
    l.forge()?;
    // Orphans hold locks this spawn may be waiting for: take them over first.
    resume_quietly(&l);
    let mut store = l.store()?;
    let deadline = args.wait_timeout.map(|d| Instant::now() + d);
    let mut announced = false;
    let record = loop {
        match prepare(
            &l.config,
            &l.contract,
            &l.state_dir,
            &mut store,
            &args.request,
        )
        .map_err(crate::app::Error::from)?
        {
            Spawned::Ready(r) => break r,
            blocked => {
                let why = match &blocked {
                    Spawned::Blocked(b) => b
                        .iter()
                        .map(|x| x.describe(&args.request.repo))
                        .collect::<Vec<_>>(),
                    Spawned::AtCapacity { running, max } => {
                        vec![format!(
                            "worker.max_parallel reached: {running} of {max} workers running"
                        )]
                    }
                    Spawned::Ready(_) => unreachable!(),
                };
                if !args.wait || deadline.is_some_and(|d| Instant::now() >= d) {
                    if args.json {
                        let blockers = match blocked {
                            Spawned::Blocked(b) => json!(b),
                            _ => json!([]),
                        };
                        print_json(
                            &json!({"spawned": false, "repo": args.request.repo, "blockers": blockers, "reasons": why}),
                        );
                    } else {
                        println!(
                            "not spawned: a worker cannot start on {} now",
                            args.request.repo
                        );
                        for w in &why {
                            println!("  {}", esc(w));
                        }
                    }
                    return Ok(1);
                }
                if !announced && !args.json && !ctx.quiet {
                    eprintln!(
                        "waiting for {}'s chain: {}",
                        args.request.repo,
                        esc(&why.join("; "))
                    );
                    announced = true;
                }
                std::thread::sleep(Duration::from_millis(250 + (now_ms() % 250) as u64));
            }
        }
    };
    if args.foreground {
        if !args.json {
            println!(
                "{} {} WORKING (supervising in the foreground)",
                record.id, record.repo
            );
        }
        // The milestones as they happen, printed by the follower `orch logs` uses.
        let live = (!args.json).then(|| super::logs::live_events(&l.state_dir, &record.id));
        let m = run_supervisor(&l, &record.id);
        if let Some(live) = live {
            live.finish();
        }
        let m = m?;
        if args.json {
            print_json(
                &json!({"worker_id": record.id, "repo": record.repo, "milestone": m.as_str()}),
            );
        } else {
            println!("{} {} {}", record.id, record.repo, m);
        }
        return Ok(if m == Milestone::Done { 0 } else { 1 });
    }
    start_detached(&l, &record.id)?;
    wait_until_running(&l, &mut store, &record.id)?;
    if args.json {
        print_json(&json!({"worker_id": record.id, "repo": record.repo, "milestone": "WORKING"}));
    } else {
        println!("{} {} WORKING", record.id, record.repo);
    }
    Ok(0)
}

fn wait_until_running(l: &Loaded, store: &mut Store, id: &str) -> Result<(), Failure> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(w) = store.worker(id)? {
            if w.worker_running
                || w.exit_code.is_some()
                || w.milestone().is_terminal()
                || w.milestone() != Milestone::Working
            {
                return Ok(());
            }
            if w.supervisor_pid.is_some() && w.lease_until_ms == Some(0) {
                return Err(Failure::no(format!(
                    "the supervisor of {id} stopped before the worker ran; see {}",
                    session_dir(&l.state_dir, id)
                        .join("supervisor.log")
                        .display()
                )));
            }
        }
        if Instant::now() >= deadline {
            return Err(Failure::no(format!(
                "worker {id} did not start within 30s; see {}",
                session_dir(&l.state_dir, id)
                    .join("supervisor.log")
                    .display()
            )));
        }
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// Supervises `id` in this process until it ends.
pub fn run_supervisor(l: &Loaded, id: &str) -> Result<Milestone, Failure> {
    let follower = std::sync::Arc::new(l.follower()?);
    let exe = orch_exe();
    let env = l.env(&exe);
    Ok(supervise(&env, follower, id).map_err(crate::app::Error::from)?)
}

pub fn supervise_cmd(ctx: &Ctx, id: &str) -> Outcome {
    let l = ctx.load()?;
    let follower = std::sync::Arc::new(l.follower()?);
    let exe = orch_exe();
    let env = l.env(&exe);
    // Every supervisor start is also a resume pass for other workers, once it holds its own.
    let m = supervisor::supervise_then(&env, follower, id, || resume_quietly(&l))
        .map_err(crate::app::Error::from)?;
    Ok(if m == Milestone::Done { 0 } else { 1 })
}

pub fn report(
    ctx: &Ctx,
    milestone: &str,
    sha: Option<String>,
    job: Option<String>,
    note: Option<String>,
    json: bool,
) -> Outcome {
    let Ok(id) = std::env::var("ORCH_WORKER_ID") else {
        return Err(Failure::bad_input(
            "orch report is run by workers: ORCH_WORKER_ID is not set (orch sets it for every worker it starts)",
        ));
    };
    let m = Milestone::parse(&milestone.to_ascii_uppercase()).filter(|m| {
        matches!(
            m,
            Milestone::Working
                | Milestone::PushedToCi
                | Milestone::FixingCi
                | Milestone::Done
                | Milestone::Blocked
                | Milestone::BlockedPermission
        )
    });
    let Some(m) = m else {
        return Err(Failure::bad_input(format!(
            "unknown milestone \"{milestone}\"; report one of WORKING, PUSHED_TO_CI, FIXING_CI, DONE, BLOCKED, BLOCKED_PERMISSION"
        )));
    };
    if let Some(s) = &sha
        && !(s.len() >= 4 && s.len() <= 64 && s.chars().all(|c| c.is_ascii_hexdigit()))
    {
        return Err(Failure::bad_input(format!("--sha {s} is not a commit id")));
    }
    let l = ctx.load()?;
    let mut store = l.store()?;
    let kind = RequestKind::Report {
        milestone: m,
        sha,
        job,
        note,
    };
    // Printed as "<MILESTONE> <outcome>", never "<MILESTONE>: …": a worker's stdout is read
    // for milestone lines, and an echoed "DONE: refused …" would count as a second claim.
    let (code, state, text) = match operator::report(&mut store, &id, &kind)? {
        Reported::Answered(a) => (
            if a.refused { 1 } else { 0 },
            if a.refused { "refused" } else { "applied" },
            a.outcome,
        ),
        Reported::Queued => (
            0,
            "queued",
            format!(
                "recorded; the supervisor did not answer within {}s and will apply it",
                ANSWER_WAIT.as_secs()
            ),
        ),
        Reported::QueuedForResume => (
            3,
            "queued_for_resume",
            format!("recorded, but no supervisor is running for {id}; `orch resume` will apply it"),
        ),
        Reported::NotApplied {
            milestone,
            supervision,
        } => (
            1,
            "not_applied",
            match supervision {
                Supervision::Ended => format!("not recorded: {id} has already ended ({milestone})"),
                _ => format!(
                    "not recorded: no supervisor is running for {id} ({milestone}, waiting for an operator); `orch respawn {id} --note …` gives it another go"
                ),
            },
        ),
    };
    if json {
        print_json(
            &json!({"worker_id": id, "milestone": m.as_str(), "state": state, "outcome": text}),
        );
    } else {
        println!("{m} {}", esc(&text));
    }
    Ok(code)
}

/// Every worker's spending (`worker_usage`), by worker id.
fn all_usage(
    tx: &rusqlite::Transaction,
) -> rusqlite::Result<std::collections::HashMap<String, Usage>> {
    let ids: Vec<String> = ws::list_workers(tx)?.into_iter().map(|w| w.id).collect();
    let mut out = std::collections::HashMap::new();
    for id in ids {
        if let Some(u) = crate::store::usage::get_usage(tx, &id)? {
            out.insert(id, u);
        }
    }
    Ok(out)
}

/// A worker's spending as `--json` gives it (null: its agent reported none).
fn usage_json(u: Option<&Usage>) -> serde_json::Value {
    match u {
        Some(u) if u.invocations > 0 || u.tokens.total() > 0 => json!({
            "cost_usd": u.cost_usd,
            "tokens": u.tokens,
            "total_tokens": u.tokens.total(),
            "runs": u.invocations,
        }),
        _ => serde_json::Value::Null,
    }
}

/// "$0.0151, 12.3k tokens (2 runs)", or "-".
fn usage_text(u: Option<&Usage>) -> String {
    match u {
        Some(u) if u.invocations > 0 || u.tokens.total() > 0 => {
            crate::app::supervisor::agent::spend::describe(u)
        }
        _ => "-".into(),
    }
}

fn worker_json(
    w: &WorkerRecord,
    pushes: &[ws::PushRecord],
    u: Option<&Usage>,
) -> serde_json::Value {
    let p = &w.progress;
    json!({
        "usage": usage_json(u),
        "session_id": u.and_then(|u| u.session_id.clone()),
        "worker_id": w.id,
        "repo": w.repo,
        "task": w.task,
        "task_id": w.task_id,
        "component": w.component,
        "milestone": p.milestone.as_str(),
        "since": fmt_ms(p.since_ms),
        "created": fmt_ms(w.created_ms),
        "branch": w.branch,
        "base_sha": w.base_sha,
        "tracked_sha": p.tracked_sha,
        "verdict": p.verdict.map(|v| v.as_str()),
        "failed_jobs": p.failed_jobs,
        "fix_attempts": p.fix_attempts,
        "end_reason": p.end_reason,
        "worker_running": w.worker_running,
        "supervisor_alive": w.supervised(now_ms()),
        "respawns": w.respawns,
        "pushes": pushes,
    })
}

/// What read-only commands say where orch has not run yet (they never create state).
fn no_state(l: &Loaded) -> String {
    format!(
        "no state yet in {} (nothing has run here)",
        l.state_dir.display()
    )
}

pub fn status(ctx: &Ctx, json_out: bool, watch: bool) -> Outcome {
    let l = ctx.load()?;
    let Some(mut store) = l.existing_store()? else {
        if json_out {
            print_json(&json!({"workers": [], "locks": []}));
        } else {
            println!("{}", no_state(&l));
        }
        return Ok(0);
    };
    loop {
        let (workers, locks, in_waves, usage) = store.read(|tx| {
            Ok((
                ws::list_workers(tx)?,
                crate::store::active_locks(tx)?,
                crate::store::waves::workers_in_waves(tx)?,
                all_usage(tx)?,
            ))
        })?;
        // The wave (and task) each worker runs for, as `<wave>:<task>`.
        let wave_of: std::collections::HashMap<String, String> = in_waves
            .into_iter()
            .map(|(w, wave, task)| (w, format!("{wave}:{task}")))
            .collect();
        let now = now_ms();
        if json_out {
            let ws_json: Vec<_> = workers
                .iter()
                .map(|w| {
                    let mut v = worker_json(w, &[], usage.get(&w.id));
                    v["wave"] = json!(wave_of.get(&w.id));
                    v
                })
                .collect();
            print_json(&json!({"workers": ws_json, "locks": locks}));
        } else {
            // Redrawn in place only on a terminal, and never with NO_COLOR: into a file or a
            // pipe each refresh is appended, separated by a blank line.
            if watch {
                if std::io::IsTerminal::is_terminal(&std::io::stdout())
                    && std::env::var_os("NO_COLOR").is_none()
                {
                    print!("\x1b[2J\x1b[H");
                } else {
                    println!();
                }
            }
            let active: Vec<&WorkerRecord> = workers
                .iter()
                .filter(|w| !w.milestone().is_terminal() || now - w.updated_ms < 3_600_000)
                .collect();
            if active.is_empty() {
                println!("no workers");
            } else {
                println!(
                    "{:<22} {:<14} {:<19} {:>6}  {:<10} {:<14} {:<20} {:<12} WAVE",
                    "WORKER", "REPO", "MILESTONE", "AGE", "SHA", "CI", "SUPERVISOR", "SPENT"
                );
                for w in active {
                    let p = &w.progress;
                    let sup = supervision(w, now).column();
                    println!(
                        "{:<22} {:<14} {:<19} {:>6}  {:<10} {:<14} {:<20} {:<12} {}",
                        esc(&w.id),
                        esc(&w.repo),
                        p.milestone.as_str(),
                        age(p.since_ms, now),
                        p.tracked_sha.as_ref().map(|s| s.short()).unwrap_or("-"),
                        p.verdict.map(|v| v.as_str()).unwrap_or("-"),
                        sup,
                        usage_text(usage.get(&w.id)),
                        esc(wave_of.get(&w.id).map(String::as_str).unwrap_or("-"))
                    );
                }
            }
            println!();
            if locks.is_empty() {
                println!("no locks held");
            } else {
                println!(
                    "{:<20} {:<28} {:<7} {:>7}  REASON",
                    "LOCKED REPO", "HOLDER", "KIND", "AGE"
                );
                for lk in &locks {
                    println!(
                        "{:<20} {:<28} {:<7} {:>7}  {}",
                        esc(&lk.repo),
                        esc(&lk.holder),
                        lk.kind.as_str(),
                        age(lk.acquired_ms, now),
                        esc(lk.reason.as_deref().unwrap_or("-"))
                    );
                }
            }
        }
        if !watch {
            return Ok(0);
        }
        std::thread::sleep(Duration::from_secs(2));
    }
}

pub fn sessions_list(ctx: &Ctx, json_out: bool) -> Outcome {
    let l = ctx.load()?;
    let Some(mut store) = l.existing_store()? else {
        if json_out {
            print_json(&json!({"sessions": []}));
        } else {
            println!("{}", no_state(&l));
        }
        return Ok(0);
    };
    let (workers, usage) = store.read(|tx| Ok((ws::list_workers(tx)?, all_usage(tx)?)))?;
    if json_out {
        let v: Vec<_> = workers
            .iter()
            .map(|w| worker_json(w, &[], usage.get(&w.id)))
            .collect();
        print_json(&json!({"sessions": v}));
        return Ok(0);
    }
    if workers.is_empty() {
        println!("no sessions");
    }
    for w in &workers {
        println!(
            "{:<22} {:<14} {:<19} {}  {}{}",
            esc(&w.id),
            esc(&w.repo),
            w.milestone().as_str(),
            fmt_ms(w.created_ms),
            esc(&w.task),
            w.progress
                .end_reason
                .as_deref()
                .map(|r| format!("  [{}]", esc(r)))
                .unwrap_or_default()
        );
    }
    Ok(0)
}

pub fn sessions_show(ctx: &Ctx, id: &str, json_out: bool) -> Outcome {
    let l = ctx.load()?;
    let Some(mut store) = l.existing_store()? else {
        return Err(Failure::bad_input(format!(
            "no worker {id}: {}",
            no_state(&l)
        )));
    };
    let Some((w, events, pushes, usage)) = store.read(|tx| {
        let Some(w) = ws::get_worker(tx, id)? else {
            return Ok(None);
        };
        Ok(Some((
            w,
            ws::worker_events(tx, id)?,
            ws::pushes(tx, id)?,
            crate::store::usage::get_usage(tx, id)?,
        )))
    })?
    else {
        return Err(Failure::bad_input(format!("no worker {id}")));
    };
    let cp = crate::checkpoint::path_for(&l.state_dir, &w);
    let log = session_dir(&l.state_dir, id).join("worker.log");
    if json_out {
        let mut v = worker_json(&w, &pushes, usage.as_ref());
        v["events"] = json!(events);
        v["checkpoint"] = json!(cp);
        v["worker_log"] = json!(log);
        v["worktree"] = json!(w.worktree);
        print_json(&v);
        return Ok(0);
    }
    let p = &w.progress;
    println!("worker     {}", esc(&w.id));
    println!(
        "repo       {} (branch {}, base {})",
        esc(&w.repo),
        esc(&w.branch),
        esc(short(&w.base_sha))
    );
    println!("task       {}", esc(&w.task));
    println!("milestone  {} since {}", p.milestone, fmt_ms(p.since_ms));
    if let Some(r) = &p.end_reason {
        println!("ended      {}", esc(r));
    }
    println!("supervisor {}", supervision(&w, now_ms()).sentence());
    println!("spent      {}", usage_text(usage.as_ref()));
    if let Some(s) = usage.as_ref().and_then(|u| u.session_id.as_deref()) {
        println!("session    {}", esc(s));
    }
    println!("worktree   {}", esc(&w.worktree));
    println!("log        {}", esc(&log.display().to_string()));
    println!("checkpoint {}", esc(&cp.display().to_string()));
    if !pushes.is_empty() {
        println!("pushes:");
        for ps in &pushes {
            println!(
                "  {} {}{}",
                esc(ps.sha.short()),
                ps.verdict.map(|v| v.as_str()).unwrap_or("pending"),
                ps.detail
                    .as_deref()
                    .map(|d| format!(" — {}", esc(d)))
                    .unwrap_or_default()
            );
        }
    }
    println!("events:");
    for e in &events {
        println!(
            "  {} {:<14} {}",
            fmt_ms(e.at_ms),
            esc(&e.kind),
            esc(&e.detail)
        );
    }
    Ok(0)
}

trait Describe {
    fn column(self) -> &'static str;
    fn sentence(self) -> &'static str;
}

impl Describe for Supervision {
    fn column(self) -> &'static str {
        match self {
            Supervision::Ended => "-",
            Supervision::Alive => "alive",
            Supervision::LeaseLapsed => "alive, lease lapsed",
            Supervision::Gone => "GONE (orch resume)",
            Supervision::AwaitsOperator => "none (orch respawn)",
        }
    }

    fn sentence(self) -> &'static str {
        match self {
            Supervision::Ended => "not running (the worker has ended)",
            Supervision::Alive => "alive",
            Supervision::LeaseLapsed => {
                "alive, but its lease lapsed (it cannot write to the state directory: disk full?); `orch resume` would take the worker over"
            }
            Supervision::Gone => "not running (`orch resume` takes the worker over)",
            Supervision::AwaitsOperator => {
                "not running (the worker waits for an operator: `orch respawn <id> --note …` gives it another go, `orch cancel <id>` ends it)"
            }
        }
    }
}

pub fn cancel(
    ctx: &Ctx,
    id: &str,
    reason: Option<String>,
    by: Option<String>,
    json_out: bool,
) -> Outcome {
    let l = ctx.load()?;
    let by = operator_name(by);
    let reason = reason.unwrap_or_else(|| "cancelled by operator".into());
    let (state, outcome) = match operator::cancel(&l, id, by.clone(), reason)? {
        Cancelled::BySupervisor(outcome) => ("by_supervisor", outcome),
        Cancelled::Queued => {
            // The supervisor runs but is slow (a held database, a full disk): transient.
            return Err(Failure::unavailable(format!(
                "{id}: the supervisor did not answer within {}s; the cancel stays queued",
                ANSWER_WAIT.as_secs()
            )));
        }
        Cancelled::Offline(_) => ("offline", "CANCELLED, lock released".to_string()),
    };
    if json_out {
        print_json(
            &json!({"worker_id": id, "cancelled": true, "by": by, "how": state, "outcome": outcome}),
        );
    } else {
        println!("{}: {}", esc(id), esc(&outcome));
    }
    Ok(0)
}

pub fn respawn(ctx: &Ctx, id: &str, note: &str, by: Option<String>, json: bool) -> Outcome {
    let l = ctx.load()?;
    let by = operator_name(by);
    let m = crate::app::resume::respawn(&l, id, &by, note)?;
    if json {
        println!(
            "{}",
            serde_json::json!({ "worker_id": id, "milestone": m.as_str(), "by": by })
        );
    } else {
        println!("{}: respawned by {by}, continues in {m}", esc(id));
    }
    Ok(0)
}

pub fn release(
    ctx: &Ctx,
    id: &str,
    force: bool,
    reason: &str,
    by: Option<String>,
    json_out: bool,
) -> Outcome {
    if !force {
        return Err(Failure::bad_input(
            "a worker's lock is released only by a verified DONE; to release it anyway pass --force --reason \"…\"",
        ));
    }
    if reason.trim().is_empty() {
        return Err(Failure::bad_input(
            "--reason must say why the lock is released",
        ));
    }
    let l = ctx.load()?;
    let by = operator_name(by);
    match operator::release(&l, id, &by, reason)? {
        Some(lock) => {
            if json_out {
                print_json(
                    &json!({"worker_id": id, "released": true, "repo": lock.repo, "by": by, "reason": reason}),
                );
            } else {
                println!(
                    "released {}'s chain lock ({}) — by {by}: {reason}",
                    esc(id),
                    esc(&lock.repo)
                );
            }
            Ok(0)
        }
        None => Err(Failure::no(format!("{id} holds no lock"))),
    }
}

pub fn resume_cmd(ctx: &Ctx, from_checkpoints: bool, json_out: bool) -> Outcome {
    let l = ctx.load()?;
    let mut rebuilt = None;
    if from_checkpoints {
        let r = crate::app::resume::rebuild_from_checkpoints(&l)?;
        if !json_out {
            if let Some(p) = &r.moved_aside {
                println!(
                    "the unreadable database was moved to {} (not deleted)",
                    p.display()
                );
            }
            println!(
                "rebuilt {} worker(s) and {} lock(s) from checkpoint files",
                r.workers, r.locks
            );
            for p in &r.problems {
                println!("  warning: {}", esc(p));
            }
            for u in &r.unproven_done {
                println!("  not proven: {}", esc(u));
            }
            for x in &r.refused {
                println!("  REFUSED {}", esc(&x.describe()));
            }
        }
        rebuilt = Some(r);
    }
    let results = crate::app::resume::resume(&l, true)?;
    // Checkpoints that were not rebuilt make the whole command a "no": an operator must look.
    let refused = rebuilt
        .as_ref()
        .map(|r| r.refused.clone())
        .unwrap_or_default();
    let refusal = (!refused.is_empty()).then(|| {
        let list: Vec<String> = refused
            .iter()
            .map(|x| esc(&x.describe()).into_owned())
            .collect();
        format!(
            "{} could not be trusted and were not rebuilt: {}",
            super::plural(refused.len(), "checkpoint", "checkpoints"),
            list.join("; ")
        )
    });
    if json_out {
        print_json(&json!({"rebuilt": rebuilt, "resumed": results}));
        if let Some(msg) = refusal {
            eprintln!("orch: {msg}");
            return Ok(1);
        }
        return Ok(0);
    }
    if results.is_empty() {
        println!("no orphaned workers");
    }
    for r in &results {
        println!(
            "{:<22} {:<14} {} -> {}  {}: {}",
            esc(&r.worker_id),
            esc(&r.repo),
            r.before,
            r.after,
            r.action,
            esc(&r.detail)
        );
    }
    match refusal {
        Some(msg) => Err(Failure::no(msg)),
        None => Ok(0),
    }
}

/// The resume pass every spawn and supervisor start runs: best effort, never fatal.
pub fn resume_quietly(l: &Loaded) {
    match crate::app::resume::resume(l, true) {
        Ok(r) if !r.is_empty() => {
            for x in r {
                tracing::warn!(worker = %x.worker_id, "resumed orphan: {} -> {} ({})", x.before, x.after, x.action);
            }
        }
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "resume pass failed"),
    }
}

pub fn alerts(ctx: &Ctx, since: Option<Duration>, json_out: bool) -> Outcome {
    let l = ctx.load()?;
    let since = since.unwrap_or(Duration::from_secs(24 * 3600));
    let from = now_ms() - since.as_millis() as i64;
    let Some(mut store) = l.existing_store()? else {
        if json_out {
            print_json(&json!({"alerts": []}));
        } else {
            println!("{}", no_state(&l));
        }
        return Ok(0);
    };
    let (alerts, deliveries) = store.read(|tx| {
        let alerts = ws::alerts(tx, from)?;
        let first = alerts.first().map_or(i64::MAX, |a| a.id);
        Ok((alerts, crate::store::alerts::deliveries(tx, first)?))
    })?;
    // Sinks configured now that have no row yet for an alert: not drained yet.
    let of = |id: i64| deliveries.iter().filter(move |d| d.alert_id == id);
    if json_out {
        let alerts: Vec<_> = alerts
            .iter()
            .map(|a| {
                let mut v = json!(a);
                v["time"] = json!(fmt_ms(a.at_ms));
                v["deliveries"] = of(a.id)
                    .map(|d| {
                        json!({
                            "sink": d.sink,
                            "state": d.state,
                            "attempts": d.attempts,
                            "last_error": d.last_error,
                            "next_attempt": (d.state == "pending").then(|| fmt_ms(d.next_ms)),
                            "done": d.done_ms.map(fmt_ms),
                        })
                    })
                    .collect();
                v
            })
            .collect();
        print_json(&json!({ "alerts": alerts }));
        return Ok(0);
    }
    if alerts.is_empty() {
        println!("no alerts in the last {}", crate::duration::format(since));
    }
    for a in &alerts {
        let repeats = if a.repeats > 1 {
            format!(" (x{})", a.repeats)
        } else {
            String::new()
        };
        let resolved = if a.resolved_ms.is_some() {
            " [resolved]"
        } else {
            ""
        };
        println!(
            "{} {:<8} {:<20} {:<14} {}{repeats}{resolved}",
            fmt_ms(a.at_ms),
            esc(&a.severity),
            esc(&a.kind),
            esc(a.worker_id.as_deref().unwrap_or("-")),
            esc(&a.message)
        );
        for d in of(a.id) {
            let detail = match (d.state.as_str(), &d.last_error) {
                ("delivered", _) => format!(
                    "delivered after {}",
                    super::plural(d.attempts as usize, "attempt", "attempts")
                ),
                ("pending", Some(e)) => format!(
                    "pending: {}, last error: {}; next at {}",
                    super::plural(d.attempts as usize, "attempt", "attempts"),
                    esc(e),
                    fmt_ms(d.next_ms)
                ),
                ("pending", None) => "pending".to_string(),
                (_, e) => format!("given up: {}", esc(e.as_deref().unwrap_or("-"))),
            };
            println!("    -> {:<24} {detail}", esc(&d.sink));
        }
    }
    Ok(0)
}
