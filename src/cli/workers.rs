//! Worker commands: spawn, the hidden supervisor entry point, report, status, sessions,
//! cancel and release — arguments in, the app's answer printed.

use super::{Ctx, Failure, HistoryArgs, Outcome, operator_name};
use crate::app::channel;
use crate::app::operator::{self, ANSWER_WAIT, Approved, Supervision};
use crate::app::spawn::{SpawnRequest, Spawned, prepare};
use crate::app::supervisor::{self, session_dir, supervise};
use crate::app::{HANDOVER_WAIT, Loaded, orch_exe, start_detached};
use crate::milestone::Milestone;
use crate::operator::actions::{cancel_view, release_view, respawn_view};
use crate::operator::alerts::alerts_view;
use crate::operator::view::locks::BlockerView;
use crate::operator::view::print_json;
use crate::operator::view::workers::{
    AlertsView, ApproveView, RebuiltView, ReconciledView, ReportView, ResumeView, SessionsView,
    SpawnView, usage_text,
};
use crate::operator::workers::{empty_status, selection, session_view, sessions_view, status_of};
use crate::sha::Sha;
use crate::store::{Store, now_ms};
use crate::text::escape as esc;
use std::time::{Duration, Instant};

pub struct SpawnArgs {
    pub request: SpawnRequest,
    pub wait: bool,
    pub wait_timeout: Option<Duration>,
    pub foreground: bool,
    pub json: bool,
    /// `--model`: the task's own model, over every other choice.
    pub model: Option<String>,
    /// `--complexity high`, `--security-sensitive`: conditions for `worker.model_overrides`.
    pub complexity_high: bool,
    pub security_sensitive: bool,
}

pub fn spawn(ctx: &Ctx, mut args: SpawnArgs) -> Outcome {
    let l = ctx.load()?;
    l.config.require_repo(&args.request.repo)?;
    if let Some(m) = &args.model
        && let Some(why) = crate::config::model::name_problem(m)
    {
        return Err(Failure::bad_input(format!(
            "--model {:?} is not a model name: {why}",
            esc(m)
        )));
    }
    let traits = crate::config::model::TaskTraits {
        model: args.model.as_deref(),
        complexity_high: args.complexity_high,
        security_sensitive: args.security_sensitive,
        ..Default::default()
    };
    args.request.model = l.config.model_for(&args.request.repo, &traits);
    if args.request.task.trim().is_empty() {
        return Err(Failure::bad_input("--task must describe the work"));
    }
    if let Some(why) = crate::text::task_too_long(&args.request.task) {
        return Err(Failure::bad_input(format!("--task: {why}")));
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
                    Spawned::AtCapacity(full) => vec![full.describe()],
                    Spawned::Ready(_) => unreachable!(),
                };
                if !args.wait || deadline.is_some_and(|d| Instant::now() >= d) {
                    let view = SpawnView {
                        spawned: false,
                        repo: args.request.repo.clone(),
                        worker_id: None,
                        milestone: None,
                        blockers: match &blocked {
                            Spawned::Blocked(b) => BlockerView::all(b, &args.request.repo),
                            _ => Vec::new(),
                        },
                        reasons: why,
                    };
                    if args.json {
                        print_json(&view);
                    } else {
                        print!("{}", view.human());
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
                // Woken at once by a release on PostgreSQL, polled either way.
                store.wait_lock_released(Duration::from_millis(250 + (now_ms() % 250) as u64));
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
        let view = SpawnView::started(&record.repo, &record.id, m);
        if args.json {
            print_json(&view);
        } else {
            print!("{}", view.human());
        }
        return Ok(if m == Milestone::Done { 0 } else { 1 });
    }
    let mut supervisor = start_detached(&l, &record.id)?;
    wait_until_running(&l, &mut store, &record.id, &mut supervisor)?;
    let view = SpawnView::started(&record.repo, &record.id, Milestone::Working);
    if args.json {
        print_json(&view);
    } else {
        print!("{}", view.human());
    }
    Ok(0)
}

fn wait_until_running(
    l: &Loaded,
    store: &mut Store,
    id: &str,
    supervisor: &mut std::process::Child,
) -> Result<(), Failure> {
    let me = crate::pidns::host_pid() as i64;
    // Generous: a machine starting many workers at once is slow, not broken (the lease is
    // held meanwhile, so nothing else takes the worker over).
    let deadline = Instant::now() + HANDOVER_WAIT;
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
        // Exited without taking the worker over: nobody else will, until a resume.
        if matches!(supervisor.try_wait(), Ok(Some(_)))
            && store
                .worker(id)?
                .is_some_and(|w| w.supervisor_pid == Some(me))
        {
            return Err(Failure::no(format!(
                "the supervisor of {id} exited before it took the worker over; see {}",
                session_dir(&l.state_dir, id)
                    .join("supervisor.log")
                    .display()
            )));
        }
        if Instant::now() >= deadline {
            return Err(Failure::no(format!(
                "worker {id} did not start within {}s; see {}",
                HANDOVER_WAIT.as_secs(),
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
    // FATAL is no milestone of the worker's but a failure class (`failure_taxonomy.fatal`):
    // it travels as its own message and halts the worker's chain.
    let fatal = milestone.eq_ignore_ascii_case("FATAL");
    if fatal && note.as_deref().is_none_or(|n| n.trim().is_empty()) {
        return Err(Failure::bad_input(
            "FATAL needs --reason: what went wrong (never the secret itself)",
        ));
    }
    let message = match (m, fatal) {
        (_, true) => channel::Message::Fatal {
            reason: note.clone().unwrap_or_default(),
        },
        (Some(m), false) => channel::Message::Report {
            milestone: m,
            sha: sha.clone(),
            job: job.clone(),
            note: note.clone(),
        },
        (None, false) => {
            return Err(Failure::bad_input(format!(
                "unknown milestone \"{milestone}\"; report one of WORKING, PUSHED_TO_CI, FIXING_CI, DONE, BLOCKED, BLOCKED_PERMISSION, FATAL"
            )));
        }
    };
    let said = match &message {
        channel::Message::Report { milestone, .. } => milestone.to_string(),
        _ => "FATAL".to_string(),
    };
    if let Some(s) = &sha
        && !(s.len() >= 4 && s.len() <= 64 && s.chars().all(|c| c.is_ascii_hexdigit()))
    {
        return Err(Failure::bad_input(format!("--sha {s} is not a commit id")));
    }
    let (code, view) = match std::env::var(channel::SOCKET_ENV) {
        // A worker speaks over its supervisor's channel: who it is, the kernel says.
        Ok(socket) => {
            let reply = channel::send(&socket, &message).map_err(|e| {
                Failure::unavailable(format!(
                    "not recorded: no supervisor answers on this worker's channel ({}): {e}",
                    channel::SOCKET_ENV
                ))
            })?;
            let code = match reply.state.as_str() {
                "applied" | "queued" => 0,
                _ => 1,
            };
            (
                code,
                ReportView {
                    worker_id: reply.worker_id,
                    milestone: said.clone(),
                    state: reply.state,
                    outcome: reply.outcome,
                },
            )
        }
        // Without a channel nothing is recorded: say why, and what would help.
        Err(_) => {
            let Ok(id) = std::env::var("ORCH_WORKER_ID") else {
                return Err(Failure::bad_input(format!(
                    "orch report is run by workers: {} is not set (orch gives every worker it starts the channel to its supervisor)",
                    channel::SOCKET_ENV
                )));
            };
            let l = ctx.load()?;
            let mut store = l.store()?;
            let (now_at, supervision) = operator::unreported(&mut store, &id)?;
            let outcome = match supervision {
                Supervision::Ended => format!("not recorded: {id} has already ended ({now_at})"),
                Supervision::Alive | Supervision::LeaseLapsed => format!(
                    "not recorded: {id}'s supervisor takes reports only over the channel it gave its worker ({}), from the worker's own processes",
                    channel::SOCKET_ENV
                ),
                Supervision::Gone => format!(
                    "not recorded: no supervisor is running for {id} ({now_at}); `orch resume` takes it over, and its worker reports again"
                ),
                Supervision::AwaitsOperator => format!(
                    "not recorded: no supervisor is running for {id} ({now_at}, waiting for an operator); `orch respawn {id} --note …` gives it another go"
                ),
            };
            (
                1,
                ReportView {
                    worker_id: id,
                    milestone: said.clone(),
                    state: "not_applied".into(),
                    outcome,
                },
            )
        }
    };
    if json {
        print_json(&view);
    } else {
        print!("{}", view.human());
    }
    Ok(code)
}

/// What read-only commands say where orch has not run yet (they never create state).
fn no_state(l: &Loaded) -> String {
    format!(
        "no state yet in {} (nothing has run here)",
        l.state_dir.display()
    )
}

pub fn status(ctx: &Ctx, json_out: bool, watch: bool, args: &HistoryArgs) -> Outcome {
    let l = ctx.load()?;
    let Some(mut store) = l.existing_store()? else {
        if json_out {
            print_json(&empty_status());
        } else {
            println!("{}", no_state(&l));
        }
        return Ok(0);
    };
    let sel = selection(&l, &mut store, &args.history())?;
    // A DONE branch moved on the forge without a push ran no hook: this look is what sees it.
    // On the local forge only (its remotes are files here: the look costs milliseconds); a
    // view never waits on a network forge — `orch resume`, from cron, looks there.
    if l.config.forge.kind == crate::config::ForgeKind::Local {
        crate::app::done_branch::look(&l, &mut store);
    }
    loop {
        let (view, usage) = status_of(&l, &mut store, &sel)?;
        if json_out {
            print_json(&view);
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
            print!("{}", view.human(|id| usage_text(usage.get(id))));
        }
        if !watch {
            return Ok(0);
        }
        std::thread::sleep(Duration::from_secs(2));
    }
}

pub fn sessions_list(ctx: &Ctx, json_out: bool, args: &HistoryArgs) -> Outcome {
    let l = ctx.load()?;
    let Some(mut store) = l.existing_store()? else {
        if json_out {
            print_json(&SessionsView {
                sessions: Vec::new(),
                more_ended: 0,
                next: None,
            });
        } else {
            println!("{}", no_state(&l));
        }
        return Ok(0);
    };
    let sel = selection(&l, &mut store, &args.history())?;
    let view = sessions_view(&l, &mut store, &sel)?;
    if json_out {
        print_json(&view);
    } else {
        print!("{}", view.human());
    }
    Ok(0)
}

pub fn sessions_show(ctx: &Ctx, id: &str, json_out: bool) -> Outcome {
    let l = ctx.load()?;
    if l.existing_store()?.is_none() {
        return Err(Failure::bad_input(format!(
            "no worker {id}: {}",
            no_state(&l)
        )));
    }
    let Some((view, usage)) = session_view(&l, id)? else {
        return Err(Failure::bad_input(format!("no worker {id}")));
    };
    if json_out {
        print_json(&view);
    } else {
        print!("{}", view.human(&usage_text(usage.as_ref())));
    }
    Ok(0)
}

pub fn cancel(
    ctx: &Ctx,
    id: &str,
    reason: Option<String>,
    by: Option<String>,
    json_out: bool,
) -> Outcome {
    let l = ctx.load()?;
    let view = cancel_view(&l, id, reason, operator_name(by))?;
    if json_out {
        print_json(&view);
    } else {
        print!("{}", view.human());
    }
    Ok(0)
}

pub fn respawn(ctx: &Ctx, id: &str, note: &str, by: Option<String>, json: bool) -> Outcome {
    let l = ctx.load()?;
    let view = respawn_view(&l, id, note, operator_name(by))?;
    if json {
        print_json(&view);
    } else {
        print!("{}", view.human());
    }
    Ok(0)
}

/// Who approves, for the audit record: the user name from the environment and the uid the
/// kernel gives this process (the name alone is whatever the environment says).
fn approver() -> String {
    let uid = rustix::process::getuid().as_raw();
    format!("{} (uid {uid})", operator_name(None))
}

pub fn approve(ctx: &Ctx, id: &str, sha: Option<&str>, dry_run: bool, json: bool) -> Outcome {
    let l = ctx.load()?;
    let shown = operator::to_approve(&l, id, sha)?;
    let mut view = ApproveView {
        worker_id: id.to_string(),
        sha: shown.sha.clone(),
        merge_base: Sha::new(shown.diff.merge_base.clone()),
        files: shown.diff.files.clone(),
        stat: shown.diff.stat.clone(),
        diff: shown.diff.patch.clone(),
        approved: false,
        by: None,
        how: "dry_run".into(),
        outcome: format!(
            "not approved (--dry-run): `orch approve {id} --sha {}` approves it",
            shown.sha.short()
        ),
    };
    let mut code = 0;
    if !dry_run {
        let by = approver();
        let (how, outcome, refused) = match operator::approve(&l, id, &shown.sha, &by)? {
            Approved::BySupervisor(a) => ("by_supervisor", a.outcome, a.refused),
            Approved::Queued => {
                return Err(Failure::unavailable(format!(
                    "{id}: the supervisor did not answer within {}s; the approval stays queued",
                    ANSWER_WAIT.as_secs()
                )));
            }
            Approved::Offline(m) => ("offline", format!("approved by {by}: {m}"), false),
        };
        view.approved = !refused;
        view.by = Some(by);
        view.how = how.into();
        view.outcome = outcome;
        if refused {
            code = 1;
        }
    }
    if json {
        print_json(&view);
    } else {
        print!("{}", view.human());
    }
    Ok(code)
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
    let view = release_view(&l, id, reason, operator_name(by))?;
    if json_out {
        print_json(&view);
    } else {
        print!("{}", view.human());
    }
    Ok(0)
}

pub fn resume_cmd(ctx: &Ctx, from_checkpoints: bool, json_out: bool) -> Outcome {
    let l = ctx.load()?;
    let mut rebuilt = None;
    if from_checkpoints {
        let r = crate::app::resume::rebuild_from_checkpoints(&l)?;
        if !json_out {
            // Printed before the resume pass, which may take a while.
            print!("{}", RebuiltView::from(&r).human());
        }
        rebuilt = Some(r);
    }
    let results = crate::app::resume::resume(&l, true)?;
    // Checkpoints that were not rebuilt make the whole command a "no": an operator must look.
    let refused = rebuilt
        .as_ref()
        .map(|r| r.refused.clone())
        .unwrap_or_default();
    let mut said = Vec::new();
    if !refused.is_empty() {
        let list: Vec<String> = refused
            .iter()
            .map(|x| esc(&x.describe()).into_owned())
            .collect();
        said.push(format!(
            "{} could not be trusted and were not rebuilt: {}",
            super::plural(refused.len(), "checkpoint", "checkpoints"),
            list.join("; ")
        ));
    }
    // A hold the rebuild could not take again is a freeze that ended unseen: said as loudly.
    let lost_holds = rebuilt
        .as_ref()
        .map(|r| r.lost_holds.clone())
        .unwrap_or_default();
    if !lost_holds.is_empty() {
        let list: Vec<String> = lost_holds.iter().map(|h| esc(h).into_owned()).collect();
        said.push(format!(
            "operator holds were not rebuilt (take them again with `orch hold`): {}",
            list.join("; ")
        ));
    }
    let held: Vec<String> = results
        .iter()
        .filter(|r| r.held_back)
        .map(|r| format!("{} ({})", r.worker_id, esc(&r.detail)))
        .collect();
    if !held.is_empty() {
        said.push(format!("not replaced: {}", held.join("; ")));
    }
    let refusal = (!said.is_empty()).then(|| said.join("; "));
    let view = ResumeView {
        rebuilt: rebuilt.as_ref().map(RebuiltView::from),
        resumed: results
            .iter()
            .map(|r| ReconciledView {
                worker_id: r.worker_id.clone(),
                repo: r.repo.clone(),
                before: r.before,
                after: r.after,
                action: r.action,
                detail: r.detail.clone(),
            })
            .collect(),
    };
    if json_out {
        print_json(&view);
        if let Some(msg) = refusal {
            eprintln!("orch: {msg}");
            return Ok(1);
        }
        return Ok(0);
    }
    print!("{}", view.human_resumed());
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
    if l.existing_store()?.is_none() {
        if json_out {
            print_json(&AlertsView { alerts: Vec::new() });
        } else {
            println!("{}", no_state(&l));
        }
        return Ok(0);
    }
    let view = alerts_view(&l, since)?;
    if json_out {
        print_json(&view);
    } else if view.alerts.is_empty() {
        println!("no alerts in the last {}", crate::duration::format(since));
    } else {
        print!("{}", view.human());
    }
    Ok(0)
}
