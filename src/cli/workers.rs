//! Worker commands: spawn, the hidden supervisor entry point, report, status, sessions,
//! cancel and release.

use super::{Ctx, Failure, Outcome, age, operator_name, print_json};
use crate::config::Config;
use crate::contract::Contract;
use crate::forge::AnyForge;
use crate::forge::follow::CiFollower;
use crate::forge::verdict::CiPolicy;
use crate::milestone::{Event, Milestone, step};
use crate::spawn::{SpawnRequest, Spawned, prepare};
use crate::store::workers::{self as ws, WorkerRecord};
use crate::store::{Store, fmt_ms, now_ms, release_in};
use crate::supervisor::{Env, session_dir, supervise};
use serde_json::json;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub struct SpawnArgs {
    pub request: SpawnRequest,
    pub wait: bool,
    pub wait_timeout: Option<Duration>,
    pub foreground: bool,
    pub json: bool,
}

/// Everything a command that runs workers needs, resolved once.
pub struct Loaded {
    pub config: Config,
    pub contract: Contract,
    pub state_dir: PathBuf,
    pub config_path: PathBuf,
    pub contract_path: PathBuf,
}

impl Ctx {
    pub fn load(&self) -> Result<Loaded, Failure> {
        let config = self.config()?;
        let contract = self.contract(&config)?;
        let state_dir = self.state_dir(&config);
        let contract_path = contract.file.clone();
        Ok(Loaded {
            config_path: config.file.clone(),
            contract_path,
            state_dir,
            config,
            contract,
        })
    }
}

impl Loaded {
    /// What a supervisor needs, borrowed from here.
    pub fn env<'a>(&'a self, orch_exe: &'a Path) -> Env<'a> {
        Env {
            config: &self.config,
            contract: &self.contract,
            state_dir: &self.state_dir,
            config_path: &self.config_path,
            contract_path: &self.contract_path,
            orch_exe,
        }
    }

    pub fn store(&self) -> Result<Store, Failure> {
        Ok(Store::open(&self.state_dir)?)
    }

    pub fn forge(&self) -> Result<AnyForge, Failure> {
        AnyForge::from_config(&self.config, &self.contract, &self.state_dir)
            .map_err(Failure::bad_input)
    }

    pub fn follower(&self) -> Result<CiFollower<AnyForge>, Failure> {
        Ok(CiFollower::new(
            self.forge()?,
            CiPolicy::from(&self.config.ci),
        ))
    }
}

fn orch_exe() -> PathBuf {
    std::env::current_exe().unwrap_or_else(|_| PathBuf::from("orch"))
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
        .map_err(|e| Failure::bad_input(e.to_string()))?
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
                            println!("  {w}");
                        }
                    }
                    return Ok(1);
                }
                if !announced && !args.json {
                    eprintln!(
                        "waiting for {}'s chain: {}",
                        args.request.repo,
                        why.join("; ")
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
        let m = run_supervisor(&l, &record.id)?;
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

/// Starts `orch __supervise <id>` in its own session, so it survives the terminal closing.
/// The caller may drop the handle (the supervisor goes on) or watch it take over.
pub fn start_detached(l: &Loaded, id: &str) -> Result<std::process::Child, Failure> {
    let dir = session_dir(&l.state_dir, id);
    std::fs::create_dir_all(&dir)?;
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("supervisor.log"))?;
    let mut cmd = std::process::Command::new(orch_exe());
    cmd.arg("--config")
        .arg(&l.config_path)
        .arg("--state-dir")
        .arg(&l.state_dir)
        .arg("--contract")
        .arg(&l.contract_path)
        .args(["__supervise", id])
        .env(
            crate::supervisor::LEASE_FROM_ENV,
            std::process::id().to_string(),
        )
        .stdin(std::process::Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    // SAFETY: setsid is async-signal-safe and touches no memory.
    unsafe {
        cmd.pre_exec(|| {
            rustix::process::setsid().map_err(std::io::Error::from)?;
            Ok(())
        });
    }
    cmd.spawn()
        .map_err(|e| Failure::bad_input(format!("cannot start the supervisor for {id}: {e}")))
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
    supervise(&env, follower, id).map_err(|e| Failure::no(e.to_string()))
}

pub fn supervise_cmd(ctx: &Ctx, id: &str) -> Outcome {
    let l = ctx.load()?;
    let follower = std::sync::Arc::new(l.follower()?);
    let exe = orch_exe();
    let env = l.env(&exe);
    // Every supervisor start is also a resume pass for other workers, once it holds its own.
    let m = crate::supervisor::supervise_then(&env, follower, id, || resume_quietly(&l))
        .map_err(|e| Failure::no(e.to_string()))?;
    Ok(if m == Milestone::Done { 0 } else { 1 })
}

pub fn report(
    ctx: &Ctx,
    milestone: &str,
    sha: Option<String>,
    job: Option<String>,
    note: Option<String>,
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
    let rid = store.write(|tx| {
        if ws::get_worker(tx, &id)?.is_none() {
            return Ok(None);
        }
        ws::add_request(
            tx,
            &id,
            "report",
            Some(m.as_str()),
            sha.as_deref(),
            job.as_deref(),
            note.as_deref(),
            None,
        )
        .map(Some)
    })?;
    let Some(rid) = rid else {
        return Err(Failure::bad_input(format!(
            "no worker {id} in {}",
            l.state_dir.display()
        )));
    };
    // Printed as "<MILESTONE> <outcome>", never "<MILESTONE>: …": a worker's stdout is read
    // for milestone lines, and an echoed "DONE: refused …" would count as a second claim.
    match wait_for_request(&mut store, rid, Duration::from_secs(60))? {
        Some(outcome) => {
            println!("{m} {outcome}");
            Ok(if outcome.starts_with("refused") { 1 } else { 0 })
        }
        None => {
            println!("{m} recorded; the supervisor will apply it");
            Ok(0)
        }
    }
}

fn wait_for_request(
    store: &mut Store,
    id: i64,
    limit: Duration,
) -> Result<Option<String>, Failure> {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(r) = store.read(|tx| ws::get_request(tx, id))?
            && r.processed_ms.is_some()
        {
            return Ok(r.outcome);
        }
        if Instant::now() >= deadline {
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Is the worker's supervisor alive (lease valid and its process the same one)?
pub fn supervisor_alive(w: &WorkerRecord) -> bool {
    match w.supervisor_pid {
        Some(pid) => {
            w.lease_until_ms.unwrap_or(0) > now_ms()
                && crate::process::process_alive(pid as i32, w.supervisor_start.map(|s| s as u64))
        }
        None => false,
    }
}

fn worker_json(w: &WorkerRecord, pushes: &[ws::PushRecord]) -> serde_json::Value {
    let p = &w.progress;
    json!({
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
        "supervisor_alive": supervisor_alive(w),
        "respawns": w.respawns,
        "pushes": pushes,
    })
}

pub fn status(ctx: &Ctx, json_out: bool, watch: bool) -> Outcome {
    let l = ctx.load()?;
    let mut store = l.store()?;
    loop {
        let (workers, locks) =
            store.read(|tx| Ok((ws::list_workers(tx)?, crate::store::active_locks(tx)?)))?;
        let now = now_ms();
        if json_out {
            let ws_json: Vec<_> = workers.iter().map(|w| worker_json(w, &[])).collect();
            print_json(&json!({"workers": ws_json, "locks": locks}));
        } else {
            if watch {
                print!("\x1b[2J\x1b[H");
            }
            let active: Vec<&WorkerRecord> = workers
                .iter()
                .filter(|w| !w.milestone().is_terminal() || now - w.updated_ms < 3_600_000)
                .collect();
            if active.is_empty() {
                println!("no workers");
            } else {
                println!(
                    "{:<22} {:<14} {:<19} {:>6}  {:<10} {:<14} SUPERVISOR",
                    "WORKER", "REPO", "MILESTONE", "AGE", "SHA", "CI"
                );
                for w in active {
                    let p = &w.progress;
                    let sup = if p.milestone.is_terminal() {
                        "-"
                    } else if supervisor_alive(w) {
                        "alive"
                    } else {
                        "GONE (orch resume)"
                    };
                    println!(
                        "{:<22} {:<14} {:<19} {:>6}  {:<10} {:<14} {}",
                        w.id,
                        w.repo,
                        p.milestone.as_str(),
                        age(p.since_ms, now),
                        p.tracked_sha
                            .as_deref()
                            .map(|s| &s[..10.min(s.len())])
                            .unwrap_or("-"),
                        p.verdict.map(|v| v.as_str()).unwrap_or("-"),
                        sup
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
                        lk.repo,
                        lk.holder,
                        lk.kind.as_str(),
                        age(lk.acquired_ms, now),
                        lk.reason.as_deref().unwrap_or("-")
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
    let workers = l.store()?.workers()?;
    if json_out {
        let v: Vec<_> = workers.iter().map(|w| worker_json(w, &[])).collect();
        print_json(&json!({"sessions": v}));
        return Ok(0);
    }
    if workers.is_empty() {
        println!("no sessions");
    }
    for w in &workers {
        println!(
            "{:<22} {:<14} {:<19} {}  {}{}",
            w.id,
            w.repo,
            w.milestone().as_str(),
            fmt_ms(w.created_ms),
            w.task,
            w.progress
                .end_reason
                .as_deref()
                .map(|r| format!("  [{r}]"))
                .unwrap_or_default()
        );
    }
    Ok(0)
}

pub fn sessions_show(ctx: &Ctx, id: &str, json_out: bool) -> Outcome {
    let l = ctx.load()?;
    let mut store = l.store()?;
    let Some((w, events, pushes)) = store.read(|tx| {
        let Some(w) = ws::get_worker(tx, id)? else {
            return Ok(None);
        };
        Ok(Some((w, ws::worker_events(tx, id)?, ws::pushes(tx, id)?)))
    })?
    else {
        return Err(Failure::bad_input(format!("no worker {id}")));
    };
    let cp = crate::checkpoint::path_for(&l.state_dir, &w);
    let log = session_dir(&l.state_dir, id).join("worker.log");
    if json_out {
        let mut v = worker_json(&w, &pushes);
        v["events"] = json!(events);
        v["checkpoint"] = json!(cp);
        v["worker_log"] = json!(log);
        v["worktree"] = json!(w.worktree);
        print_json(&v);
        return Ok(0);
    }
    let p = &w.progress;
    println!("worker     {}", w.id);
    println!(
        "repo       {} (branch {}, base {})",
        w.repo,
        w.branch,
        &w.base_sha[..10.min(w.base_sha.len())]
    );
    println!("task       {}", w.task);
    println!("milestone  {} since {}", p.milestone, fmt_ms(p.since_ms));
    if let Some(r) = &p.end_reason {
        println!("ended      {r}");
    }
    println!(
        "supervisor {}",
        if supervisor_alive(&w) {
            "alive"
        } else {
            "not running"
        }
    );
    println!("worktree   {}", w.worktree);
    println!("log        {}", log.display());
    println!("checkpoint {}", cp.display());
    if !pushes.is_empty() {
        println!("pushes:");
        for ps in &pushes {
            println!(
                "  {} {}{}",
                &ps.sha[..10.min(ps.sha.len())],
                ps.verdict.as_deref().unwrap_or("pending"),
                ps.detail
                    .as_deref()
                    .map(|d| format!(" — {d}"))
                    .unwrap_or_default()
            );
        }
    }
    println!("events:");
    for e in &events {
        println!("  {} {:<14} {}", fmt_ms(e.at_ms), e.kind, e.detail);
    }
    Ok(0)
}

pub fn cancel(ctx: &Ctx, id: &str, reason: Option<String>, by: Option<String>) -> Outcome {
    let l = ctx.load()?;
    let mut store = l.store()?;
    let Some(w) = store.worker(id)? else {
        return Err(Failure::bad_input(format!("no worker {id}")));
    };
    if w.milestone().is_terminal() {
        return Err(Failure::no(format!("{id} is already {}", w.milestone())));
    }
    let by = operator_name(by);
    let reason = reason.unwrap_or_else(|| "cancelled by operator".into());
    if supervisor_alive(&w) {
        let rid = store.write(|tx| {
            ws::add_request(tx, id, "cancel", None, None, None, Some(&reason), Some(&by))
        })?;
        if let Some(outcome) = wait_for_request(&mut store, rid, Duration::from_secs(60))? {
            println!("{id}: {outcome}");
            return Ok(0);
        }
        return Err(Failure::no(format!(
            "{id}: the supervisor did not answer within 60s; the cancel stays queued"
        )));
    }
    // No supervisor: stop whatever is left of the worker ourselves.
    if let Some(pid) = w.worker_pid
        && crate::process::group_alive(pid as i32)
    {
        let _ = crate::process::signal_group(pid as i32, crate::process::Signal::TERM);
        let deadline = Instant::now() + l.config.worker.stop_grace;
        while crate::process::group_alive(pid as i32) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = crate::process::signal_group(pid as i32, crate::process::Signal::KILL);
    }
    apply_offline(&l, &mut store, id, Event::Cancel { by, reason })?;
    println!("{id}: CANCELLED, lock released");
    Ok(0)
}

/// Applies an event to a worker that has no live supervisor (same machine, same effects on
/// the database; there is no process left to signal).
pub fn apply_offline(
    l: &Loaded,
    store: &mut Store,
    id: &str,
    event: Event,
) -> Result<Milestone, Failure> {
    let m = store.write(|tx| {
        let Some(w) = ws::get_worker(tx, id)? else {
            return Ok(None);
        };
        let (p, fx) = step(&l.contract, id, &w.progress, &event, now_ms());
        ws::save_progress(tx, id, &p)?;
        for e in &fx {
            match e {
                crate::milestone::Effect::Transition { from, to, reason } => ws::add_event(
                    tx,
                    id,
                    "transition",
                    *to,
                    &format!("{from} -> {to}: {reason}"),
                )?,
                crate::milestone::Effect::Violation { kind, detail } => ws::add_event(
                    tx,
                    id,
                    "violation",
                    p.milestone,
                    &format!("{kind}: {detail}"),
                )?,
                crate::milestone::Effect::ReleaseLock { reason } => {
                    release_in(tx, id, Some(reason), Some("orch"))?;
                }
                _ => {}
            }
        }
        tx.execute("UPDATE workers SET worker_running = 0 WHERE id = ?1", [id])?;
        Ok(Some(p.milestone))
    })?;
    let m = m.ok_or_else(|| Failure::bad_input(format!("no worker {id}")))?;
    write_checkpoint(l, store, id);
    Ok(m)
}

pub fn write_checkpoint(l: &Loaded, store: &mut Store, id: &str) {
    if let Ok(Some((w, pushes, held))) = store.read(|tx| {
        let Some(w) = ws::get_worker(tx, id)? else {
            return Ok(None);
        };
        let pushes = ws::pushes(tx, id)?;
        let held: i64 =
            tx.query_row("SELECT COUNT(*) FROM locks WHERE holder = ?1", [id], |r| {
                r.get(0)
            })?;
        Ok(Some((w, pushes, held > 0)))
    }) {
        let cp = crate::checkpoint::build(&w, &pushes, held);
        let _ = crate::checkpoint::write(&l.state_dir, &w, &cp);
    }
}

pub fn release(ctx: &Ctx, id: &str, force: bool, reason: &str, by: Option<String>) -> Outcome {
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
    let mut store = l.store()?;
    let by = operator_name(by);
    let released = store.write(|tx| {
        let lock = release_in(tx, id, Some(&format!("forced: {reason}")), Some(&by))?;
        if lock.is_some()
            && let Some(w) = ws::get_worker(tx, id)?
        {
            ws::add_event(
                tx,
                id,
                "lock_released",
                w.progress.milestone,
                &format!("forced by {by}: {reason}"),
            )?;
        }
        Ok(lock)
    })?;
    match released {
        Some(lock) => {
            write_checkpoint(&l, &mut store, id);
            println!(
                "released {}'s chain lock ({}) — by {by}: {reason}",
                id, lock.repo
            );
            Ok(0)
        }
        None => Err(Failure::no(format!("{id} holds no lock"))),
    }
}

/// Resolves a possibly short SHA to a full one in `repo_path` when it is a git repository.
pub fn full_sha(repo_path: &Path, sha: &str) -> Option<String> {
    crate::gitops::resolve(repo_path, sha).ok()
}

pub fn resume_cmd(ctx: &Ctx, from_checkpoints: bool, json_out: bool) -> Outcome {
    let l = ctx.load()?;
    let mut rebuilt = None;
    if from_checkpoints {
        let r = crate::resume::rebuild_from_checkpoints(&l).map_err(Failure::bad_input)?;
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
                println!("  warning: {p}");
            }
        }
        rebuilt = Some(r);
    }
    let results = crate::resume::resume(&l, true).map_err(Failure::bad_input)?;
    if json_out {
        print_json(&json!({"rebuilt": rebuilt, "resumed": results}));
        return Ok(0);
    }
    if results.is_empty() {
        println!("no orphaned workers");
    }
    for r in &results {
        println!(
            "{:<22} {:<14} {} -> {}  {}: {}",
            r.worker_id, r.repo, r.before, r.after, r.action, r.detail
        );
    }
    Ok(0)
}

/// The resume pass every spawn and supervisor start runs: best effort, never fatal.
pub fn resume_quietly(l: &Loaded) {
    match crate::resume::resume(l, true) {
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
    let alerts = l.store()?.read(|tx| ws::alerts(tx, from))?;
    if json_out {
        print_json(&json!({ "alerts": alerts }));
        return Ok(0);
    }
    if alerts.is_empty() {
        println!("no alerts in the last {}", crate::duration::format(since));
    }
    for a in &alerts {
        println!(
            "{} {:<8} {:<20} {:<14} {}",
            fmt_ms(a.at_ms),
            a.severity,
            a.kind,
            a.worker_id.as_deref().unwrap_or("-"),
            a.message
        );
    }
    Ok(0)
}
