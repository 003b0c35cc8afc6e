//! `orch ci status` and `orch ci logs`: a commit's CI as orch judges it.
//!
//! A worker never holds the forge token. When the forge needs one and it is not set, `ci
//! status` answers from the verdict orch's supervisor last recorded for that commit.

use super::{Ctx, Failure, Outcome};
use crate::app::Loaded;
use crate::ci::CiRun;
use crate::ci::verdict::{Verdict, VerdictKind};
use crate::config::ForgeKind;
use crate::forge::Forge;
use crate::forge::ForgeError;
use crate::operator::view::ci::{CiLogsView, CiStatusView, JobLog};
use crate::operator::view::print_json;
use crate::report_wire::CiQuestion;
use crate::store::now_ms;
use crate::store::workers as ws;
use std::time::{Duration, Instant};

fn resolve_sha(l: &Loaded, repo: &str, sha: &str) -> Result<String, Failure> {
    if !(4..=64).contains(&sha.len()) || !sha.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(Failure::bad_input(format!(
            "--sha {sha} is not a commit id"
        )));
    }
    let sha = sha.to_ascii_lowercase();
    if sha.len() == 40 || sha.len() == 64 {
        return Ok(sha);
    }
    // Short: resolve where the commit can be found (the worker's worktree, then the clone).
    let cwd = std::env::current_dir().unwrap_or_default();
    let clone = l
        .config
        .repo(repo)
        .map(|r| r.path.clone())
        .unwrap_or_default();
    for place in [cwd, clone] {
        if let Ok(full) = crate::gitops::resolve(&place, &sha) {
            return Ok(full);
        }
    }
    Err(Failure::bad_input(format!(
        "cannot resolve short SHA {sha}: give the full 40-character commit id (forges match only full SHAs)"
    )))
}

/// Where the forge's outage notice goes: stderr, at once (a person is waiting), unless `-q`.
pub(super) fn notice(ctx: &Ctx) -> std::sync::Arc<dyn Fn(&str) + Send + Sync> {
    let quiet = ctx.quiet;
    std::sync::Arc::new(move |m: &str| {
        if !quiet {
            eprintln!("orch: {m}");
        }
    })
}

/// A forge that refuses the request as configured (bad token, unknown repository) is bad
/// input (2); one that cannot be reached or answers garbage is a dependency down (3).
fn forge_error(e: ForgeError) -> Failure {
    if e.is_blocking() {
        Failure::bad_input(e.to_string())
    } else {
        Failure::unavailable(e.to_string())
    }
}

/// A worker of another account cannot read orch's state or hold the token: its supervisor
/// answers its CI questions (`report_wire::CI_VIA_ENV`). `None`: ask directly.
fn through_supervisor(question: impl FnOnce() -> Result<CiQuestion, Failure>) -> Option<Outcome> {
    if std::env::var(crate::report_wire::CI_VIA_ENV).as_deref() != Ok("channel") {
        return None;
    }
    let socket = std::env::var(crate::report_wire::SOCKET_ENV).ok()?;
    Some((|| {
        let q = question()?;
        let reply = crate::report_wire::send(&socket, &crate::report_wire::Message::Ci(q))
            .map_err(|e| {
                Failure::unavailable(format!(
                    "no answer: no supervisor answers on this worker's channel ({}): {e}",
                    crate::report_wire::SOCKET_ENV
                ))
            })?;
        let Some(out) = reply.output else {
            return Err(Failure::unavailable(format!(
                "no answer from the supervisor: {}",
                reply.outcome
            )));
        };
        print!("{}", out.stdout);
        eprint!("{}", out.stderr);
        Ok(out.code)
    })())
}

/// A SHA as the supervisor is asked it: a short one resolved here, in the worker's clone
/// (the commit may exist nowhere else yet).
fn full_sha_here(sha: &str) -> String {
    if sha.len() >= 40 {
        return sha.to_string();
    }
    let cwd = std::env::current_dir().unwrap_or_default();
    crate::gitops::resolve(&cwd, sha).unwrap_or_else(|_| sha.to_string())
}

pub fn status(
    ctx: &Ctx,
    repo: &str,
    sha: &str,
    json_out: bool,
    wait: bool,
    timeout: Option<Duration>,
) -> Outcome {
    let deadline = Instant::now() + timeout.unwrap_or(Duration::from_secs(30 * 60));
    // Asked through the supervisor: with --wait, a state out of reach for now (a shared
    // database restarting) is waited out as below; any other refusal is the answer.
    let mut said = false;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let answer = through_supervisor(|| {
            Ok(CiQuestion::Status {
                repo: repo.to_string(),
                sha: full_sha_here(sha),
                json: json_out,
                wait,
                timeout_s: timeout.map(|_| left.as_secs().max(1)),
            })
        });
        match answer {
            None => break,
            Some(Err(f))
                if wait
                    && f.message.contains(crate::report_wire::STATE_UNREACHABLE)
                    && Instant::now() < deadline =>
            {
                if !said && !ctx.quiet {
                    eprintln!("waiting: {}", f.message);
                    said = true;
                }
                std::thread::sleep(Duration::from_secs(1).min(deadline - Instant::now()));
            }
            Some(r) => return r,
        }
    }
    // With --wait, a store or forge that is unavailable for a while (the database restarting,
    // the forge down) is waited out like a pending run, until the deadline.
    said = false;
    loop {
        match status_once(ctx, repo, sha, json_out, wait, deadline) {
            Err(f) if wait && f.code == 3 && Instant::now() < deadline => {
                if !said && !ctx.quiet {
                    eprintln!("waiting: {}", f.message);
                    said = true;
                }
                std::thread::sleep(Duration::from_secs(1).min(deadline - Instant::now()));
            }
            r => return r,
        }
    }
}

fn status_once(
    ctx: &Ctx,
    repo: &str,
    sha: &str,
    json_out: bool,
    wait: bool,
    deadline: Instant,
) -> Outcome {
    let l = ctx.load()?;
    let r = l.config.require_repo(repo)?.clone();
    let sha = resolve_sha(&l, repo, sha)?;
    // A read-only question: where nothing ran yet, the local forge has no runs, and asking it
    // would create its state (and may start a run for a commit it finds in its remote).
    if l.config.forge.kind == ForgeKind::Local && l.existing_store()?.is_none() {
        let v = Verdict {
            kind: VerdictKind::NoRun,
            failed_jobs: Vec::new(),
            sync_status: None,
            detail: format!(
                "no state yet in {} (nothing has run here)",
                l.state_dir.display()
            ),
        };
        print_verdict(repo, &sha, &v, &[], json_out, None);
        return Ok(1);
    }
    let forge = match l.query_follower(notice(ctx)) {
        Ok(f) => f,
        Err(e) => {
            // No credentials (a worker): the supervisor's recorded verdict, polled like the
            // forge would be when --wait asks to wait for a decided one.
            loop {
                let answer = recorded(
                    &l,
                    repo,
                    &sha,
                    json_out,
                    !wait || Instant::now() >= deadline,
                );
                if let Some(outcome) = answer {
                    return outcome;
                }
                if !wait || Instant::now() >= deadline {
                    return Err(e.into());
                }
                std::thread::sleep(l.config.ci.poll_interval.min(Duration::from_secs(5)));
            }
        }
    };
    // When orch pushed/verified it, the push time bounds paging and the no-run timeout.
    let pushed_ms = l
        .existing_store()
        .ok()
        .flatten()
        .and_then(|mut s| s.read(|tx| ws::first_pushed_ms(tx, &sha)).ok())
        .flatten();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    // The local forge's runner rings it when a job ends: no waiting out a poll interval.
    let waiter = (wait && l.config.forge.kind == ForgeKind::Local)
        .then(|| crate::wake::Waiter::install(&l.state_dir))
        .flatten();
    loop {
        let (mut v, runs) = rt
            .block_on(forge.poll(&r, &sha, pushed_ms, now_ms()))
            .map_err(forge_error)?;
        // Waiting for a run that nothing will start is not pending.
        if v.kind == VerdictKind::Pending
            && runs.is_empty()
            && let Some(why) = forge.forge().no_run_coming(&r, &sha)
        {
            v = Verdict {
                kind: VerdictKind::NoRun,
                failed_jobs: Vec::new(),
                sync_status: None,
                detail: why,
            };
        }
        // What orch saw on the forge goes into the pushing worker's history (its supervisor
        // stops following a SHA once a newer one is pushed, and may not have seen this).
        if let Ok(Some(mut store)) = l.existing_store() {
            let worker = std::env::var("ORCH_WORKER_ID").ok();
            let row = ws::VerdictRow::of(&v, &runs);
            let _ = store.write(|tx| {
                let n = ws::record_observed_verdict(tx, &sha, row)?;
                // A worker may see its verdict before its supervisor has recorded the push.
                // A decided verdict proves a push run exists, so the history row may be made here.
                if n == 0
                    && v.kind.is_terminal()
                    && let Some(w) = worker.as_deref()
                    && ws::get_worker(tx, w)?.is_some_and(|rec| rec.repo == repo)
                {
                    ws::record_push(tx, w, &sha, now_ms())?;
                    ws::record_observed_verdict(tx, &sha, row)?;
                }
                Ok(())
            });
        }
        if !wait || v.kind.is_terminal() || Instant::now() >= deadline {
            print_verdict(repo, &sha, &v, &runs, json_out, None);
            return Ok(if v.kind == VerdictKind::Green { 0 } else { 1 });
        }
        let pause = l.config.ci.poll_interval.min(Duration::from_secs(5));
        crate::wake::wait_or_sleep(waiter.as_ref(), pause.min(deadline - Instant::now()));
    }
}

/// The verdict a supervisor recorded, for callers without forge credentials. With `last`
/// false, only a decided (terminal) verdict is printed; `None`: nothing (printed) yet.
fn recorded(l: &Loaded, repo: &str, sha: &str, json_out: bool, last: bool) -> Option<Outcome> {
    let mut store = l.existing_store().ok()??;
    let rec = store.read(|tx| ws::recorded_verdict(tx, sha)).ok()??;
    let kind = rec.verdict?;
    if !last && !kind.is_terminal() {
        return None;
    }
    let v = Verdict {
        kind,
        failed_jobs: rec.failed_jobs.clone(),
        sync_status: None,
        detail: rec.detail.clone().unwrap_or_default(),
    };
    let runs: Vec<CiRun> = rec.runs.clone().unwrap_or_default();
    print_verdict(repo, sha, &v, &runs, json_out, Some(rec.checked_ms));
    Some(Ok(if kind == VerdictKind::Green { 0 } else { 1 }))
}

fn print_verdict(
    repo: &str,
    sha: &str,
    v: &Verdict,
    runs: &[CiRun],
    json_out: bool,
    recorded: Option<Option<i64>>,
) {
    let view = CiStatusView {
        repo: repo.to_string(),
        sha: sha.to_string(),
        verdict: v.kind,
        runs: runs.to_vec(),
        failed_jobs: v.failed_jobs.clone(),
        detail: v.detail.clone(),
        recorded_at: recorded.map(|at| at.map(crate::store::fmt_ms).unwrap_or_default()),
    };
    if json_out {
        print_json(&view);
    } else {
        print!("{}", view.human());
    }
}

pub fn logs(ctx: &Ctx, repo: &str, sha: &str, job: Option<String>, json_out: bool) -> Outcome {
    if let Some(answer) = through_supervisor(|| {
        Ok(CiQuestion::Logs {
            repo: repo.to_string(),
            sha: full_sha_here(sha),
            job: job.clone(),
            json: json_out,
        })
    }) {
        return answer;
    }
    let l = ctx.load()?;
    let r = l.config.require_repo(repo)?.clone();
    let sha = resolve_sha(&l, repo, sha)?;
    if l.config.forge.kind == ForgeKind::Local && l.existing_store()?.is_none() {
        return Err(Failure::no(format!(
            "no CI runs for {repo} {sha}: no state yet in {} (nothing has run here)",
            l.state_dir.display()
        )));
    }
    let forge = l.query_forge(notice(ctx))?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let runs = rt
        .block_on(forge.runs_for_commit(&r, &sha, None))
        .map_err(forge_error)?;
    let mut names: Vec<String> = Vec::new();
    for j in runs.iter().flat_map(|run| run.jobs.iter()) {
        if !names.contains(&j.name) {
            names.push(j.name.clone());
        }
    }
    if names.is_empty() {
        return Err(Failure::no(format!("no CI jobs found for {repo} {sha}")));
    }
    let jobs: Vec<String> = match job {
        Some(j) if !names.contains(&j) => {
            return Err(Failure::bad_input(format!(
                "no job {j} in the CI of {repo} {}; its jobs: {}",
                crate::sha::short_to(&sha, 12),
                names.join(", ")
            )));
        }
        Some(j) => vec![j],
        None => names,
    };
    let mut found = false;
    let mut out = Vec::new();
    for j in &jobs {
        match rt
            .block_on(forge.job_log(&r, &sha, j))
            .map_err(forge_error)?
        {
            Some(text) => {
                found = true;
                if json_out {
                    out.push(JobLog {
                        job: j.clone(),
                        log: Some(text),
                    });
                    continue;
                }
                if jobs.len() > 1 {
                    println!("==> {j} <==");
                }
                print!("{text}");
                if !text.ends_with('\n') {
                    println!();
                }
            }
            None => {
                if json_out {
                    out.push(JobLog {
                        job: j.clone(),
                        log: None,
                    });
                }
                if !ctx.quiet {
                    eprintln!(
                        "orch: no log for job {j} of {repo} {} (this forge keeps none for it)",
                        crate::sha::short_to(&sha, 12)
                    )
                }
            }
        }
    }
    if json_out {
        print_json(&CiLogsView {
            repo: repo.to_string(),
            sha,
            jobs: out,
        });
    }
    Ok(if found { 0 } else { 1 })
}

/// `orch ci with-upstreams -- <command...>` (see [`crate::upstreams`]): becomes the command,
/// so it returns only when the command could not start or the preparing failed.
pub fn with_upstreams(command: &[String]) -> Outcome {
    let (message, code) = crate::upstreams::with_upstreams(command);
    Err(Failure { code, message })
}
