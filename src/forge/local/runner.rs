//! The detached runner of one local-forge run (`orch __local-forge run … --run-id N`).
//!
//! Jobs run one at a time, in declaration order, each as soon as its `needs` succeeded: a
//! run is one slot, so the machine-wide bound (`forge.max_concurrent_runs`) is also the bound
//! on concurrently running jobs, and logs and timings stay easy to read.

use super::db::{self, JobRow, JobUpdate, RunRow, lasting};
use super::{Layout, LocalForgeError, git, io_err, reap_dead_runners, scrub_env};
use crate::ci::JobStatus;
use crate::config::Config;
use crate::process::{GroupOptions, proc_stat, spawn_in_group};
use crate::store::{Store, now_ms};
use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;

/// Between SIGTERM and SIGKILL when a job is stopped (timeout, or leftovers after it exits).
pub const JOB_KILL_GRACE: Duration = Duration::from_secs(5);

/// How often a runner waiting for a slot looks again.
const SLOT_POLL: Duration = Duration::from_millis(100);

fn say(msg: std::fmt::Arguments) {
    eprintln!("{} {msg}", crate::store::fmt_ms(now_ms()));
}

enum Claim {
    Mine(Box<RunRow>),
    Missing,
    Done,
    Other(i64),
}

/// Executes run `run_id` to the end. Returns once every job is done.
pub(super) fn run(
    state_dir: &Path,
    config_file: &Path,
    run_id: i64,
) -> Result<(), LocalForgeError> {
    let layout = Layout::new(state_dir);
    let mut store = lasting(|| Store::open(state_dir))?;
    let me = crate::pidns::host_pid() as i64;
    let my_start = proc_stat(me as i32).map(|s| s.start_ticks as i64);
    // Waited out like every write of a runner: its pid is recorded on its run already (by
    // the hook that started it), so a runner that gave up here would be reaped as dead and
    // its jobs failed — a database restart turned into red CI.
    lasting(|| reap_dead_runners(&mut store, &layout))?;
    let claim = lasting(|| {
        store.write(|tx| {
            let Some(run) = db::load_run(tx, run_id)? else {
                return Ok(Claim::Missing);
            };
            if run.finished_ms.is_some() {
                return Ok(Claim::Done);
            }
            // Alive, or another host's (only that host can tell): not this runner's.
            let mine = run.runner_pid == Some(me)
                && run
                    .runner_host
                    .as_deref()
                    .is_none_or(|h| h == crate::node::hostname());
            if let Some(pid) = run.runner_pid
                && !mine
                && super::runner_lives(&run) != Some(false)
            {
                return Ok(Claim::Other(pid));
            }
            db::claim_runner(tx, run_id, me, my_start)?;
            Ok(Claim::Mine(Box::new(run)))
        })
    })?;
    let run = match claim {
        Claim::Mine(run) => *run,
        Claim::Missing => {
            return Err(LocalForgeError::Usage(format!(
                "no local-forge run {run_id}"
            )));
        }
        Claim::Done => {
            say(format_args!("run {run_id} is already finished"));
            return Ok(());
        }
        Claim::Other(pid) => {
            say(format_args!("run {run_id} is executed by runner {pid}"));
            return Ok(());
        }
    };
    let result = execute(&layout, &mut store, config_file, &run);
    if let Err(e) = &result {
        say(format_args!("run {run_id} failed: {e}"));
        let note = format!("runner error: {e}");
        let _ = store.write(|tx| db::finish_unfinished_jobs(tx, run_id, JobStatus::Failure, &note));
    }
    let _ = std::fs::remove_dir_all(layout.work_dir(run_id));
    // However it ended, the run is decided: whoever waits for it looks now.
    crate::wake::ring_all(state_dir, crate::wake::Ring::Ci(run.repo.clone()));
    result
}

fn execute(
    layout: &Layout,
    store: &mut Store,
    config_file: &Path,
    run: &RunRow,
) -> Result<(), LocalForgeError> {
    let config = Config::load(config_file)?;
    let slots = config.forge.max_concurrent_runs.max(1);
    say(format_args!(
        "run {} ({} #{} {} at {}): waiting for one of {slots} slots",
        run.id, run.repo, run.number, run.git_ref, run.sha
    ));
    let _slot = acquire_slot(&layout.slots_dir(), slots)?;
    lasting(|| store.write(|tx| db::mark_run_started(tx, run.id, now_ms())))?;
    // The run's directory: its checkout and, beside it, its upstreams' (`$ORCH_UPSTREAMS`).
    let run_dir = layout.work_dir(run.id);
    let work = run_dir.join(&run.repo);
    say(format_args!(
        "run {}: checking out into {}",
        run.id,
        work.display()
    ));
    let prepared = prepare_run_dir(layout, store, &config, run, &run_dir, &work);
    let (preface, list) = match prepared {
        Ok((lines, list)) => ((!lines.is_empty()).then(|| lines.join("\n")), list),
        Err(note) => return fail_run(layout, store, run, &note),
    };
    if let Some(lines) = &preface {
        for line in lines.lines() {
            say(format_args!("run {}: {line}", run.id));
        }
    }
    // Workers of an account of their own: their code's CI runs as that account too (it is the
    // worker's code: as orch it could do whatever orch can). Never as orch instead.
    let account = match ci_account(layout, &config, run) {
        None => None,
        Some(Ok(a)) => match hand_over(layout, &run_dir, &a) {
            Ok(()) => Some(a),
            Err(e) => {
                return fail_run(
                    layout,
                    store,
                    run,
                    &format!("cannot hand the checkout to worker.user {}: {e}", a.name),
                );
            }
        },
        Some(Err(e)) => return fail_run(layout, store, run, &e),
    };
    // `worker.sandbox`: the jobs, the worker's code, in the sandbox its worker had (orch's
    // state, the clones and orch's credentials hidden; the checkout kept).
    // The wave files orch's ticks read: the sandbox keeps them read-only.
    let waves: Vec<std::path::PathBuf> = if config.worker.sandbox {
        match store.read(crate::store::waves::wave_files) {
            Ok(ws) => ws,
            Err(e) => {
                let note = format!("worker.sandbox: cannot read the recorded wave files: {e}");
                return fail_run(layout, store, run, &note);
            }
        }
    } else {
        Vec::new()
    };
    let sandbox = config.worker.sandbox.then(|| {
        // The contract orch's processes here were given (none: the organisation's own,
        // which its directory already covers).
        let contract = std::env::var_os("ORCH_CONTRACT").map(std::path::PathBuf::from);
        crate::sandbox::for_config(
            &config,
            &layout.state_dir,
            &run_dir,
            contract.as_deref(),
            &waves,
        )
    });
    if sandbox.is_some() && crate::pidns::usable().is_none() {
        return fail_run(
            layout,
            store,
            run,
            "worker.sandbox needs PID namespaces, which this machine does not give: the jobs are not run unsandboxed",
        );
    }
    let ws = Workspace {
        run_dir: &run_dir,
        work: &work,
        list: &list,
        jobs: config
            .repo(&run.repo)
            .map(|r| r.jobs.as_slice())
            .unwrap_or_default(),
    };
    while let Some(job) = next_job(store, run.id)? {
        say(format_args!("run {}: job {} starts", run.id, job.name));
        let status = run_job(
            layout,
            store,
            run,
            &ws,
            &job,
            preface.as_deref(),
            &Confinement {
                account: account.as_ref(),
                sandbox: sandbox.as_ref(),
            },
        )?;
        // A failed job may decide the run before it ends (a required job red).
        crate::wake::ring_all(&layout.state_dir, crate::wake::Ring::Ci(run.repo.clone()));
        say(format_args!(
            "run {}: job {} ended {status}",
            run.id, job.name
        ));
    }
    let status = lasting(|| store.read(|tx| db::load_run(tx, run.id)))?.map(|r| r.status);
    say(format_args!(
        "run {} finished: {}",
        run.id,
        status.unwrap_or(JobStatus::Unknown)
    ));
    Ok(())
}

/// The run's directory made afresh: its checkout of the run's commit (protected paths put
/// back to the base's) and its upstreams' checkouts. Returns the lines every job log starts
/// with and the upstream listing's path; a failure, in words, fails the run.
fn prepare_run_dir(
    layout: &Layout,
    store: &mut Store,
    config: &Config,
    run: &RunRow,
    run_dir: &Path,
    work: &Path,
) -> Result<(Vec<String>, std::path::PathBuf), String> {
    let confined = config.worker.accounts() || config.worker.sandbox;
    match std::fs::remove_dir_all(run_dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(format!("cannot clear {}: {e}", run_dir.display()));
        }
        _ => {}
    }
    checkout(&layout.remote(&run.repo), work, &run.sha)
        .map_err(|message| format!("checkout of {} failed: {message}", run.sha))?;
    let protected = super::protected_overlay::overlay_protected(config, run, work)
        .map_err(|message| format!("cannot run the base branch's protected paths: {message}"))?;
    let ups = super::upstreams::prepare(layout, store, config, run, run_dir, confined)?;
    Ok((protected.into_iter().chain(ups.lines).collect(), ups.list))
}

/// Every job of `run` failed with `note` before it started (written into each job's log).
fn fail_run(
    layout: &Layout,
    store: &mut Store,
    run: &RunRow,
    note: &str,
) -> Result<(), LocalForgeError> {
    say(format_args!("run {}: {note}", run.id));
    for job in lasting(|| store.read(|tx| db::load_jobs(tx, run.id)))? {
        append(&layout.job_log(&run.repo, run.number, &job.name), note);
    }
    lasting(|| store.write(|tx| db::finish_unfinished_jobs(tx, run.id, JobStatus::Failure, note)))?;
    Ok(())
}

/// Whom a run's jobs run as with workers of accounts of their own: a worker's branch, as that
/// worker's account (its workspace's owner); anything else (a base branch, a landing), as the
/// first account of the pool. None: orch's user (no `worker.user`).
fn ci_account(
    layout: &Layout,
    config: &Config,
    run: &RunRow,
) -> Option<Result<crate::account::Account, String>> {
    if !config.worker.accounts() {
        return None;
    }
    let worker = run.git_ref.strip_prefix("refs/heads/orch/").filter(|id| {
        !id.is_empty() && !id.contains('/') && !id.ends_with("-land") && !id.ends_with("-revert")
    });
    if let Some(id) = worker {
        let workspace = layout.state_dir.join(crate::account::WORKSPACES).join(id);
        match crate::account::of_workspace(&workspace, &config.worker.users) {
            Ok(Some(a)) => return Some(crate::account::usable(&a.uid.to_string()).map(|_| a)),
            Err(e) => return Some(Err(e)),
            Ok(None) => {}
        }
    }
    Some(crate::account::usable(&config.worker.users[0]))
}

/// Gives the run's directory `run_dir` (its checkout, its upstreams') to `account` and lets
/// it reach it (the forge's directories searchable, nothing in them listable).
fn hand_over(
    layout: &Layout,
    run_dir: &Path,
    account: &crate::account::Account,
) -> std::io::Result<()> {
    crate::account::set_mode(&layout.forge_dir(), 0o711)?;
    if let Some(parent) = run_dir.parent() {
        crate::account::set_mode(parent, 0o711)?;
    }
    crate::account::chown_tree(run_dir, account.uid, account.gid)
}

/// Takes one of `slots` flock slots in `dir`, waiting until one frees. The lock lives as long
/// as the returned file (opened close-on-exec, so job processes never inherit it).
fn acquire_slot(dir: &Path, slots: usize) -> Result<File, LocalForgeError> {
    std::fs::create_dir_all(dir).map_err(io_err(format!("cannot create {}", dir.display())))?;
    loop {
        for i in 0..slots {
            let path = dir.join(format!("{i}.lock"));
            let f = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)
                .map_err(io_err(format!("cannot open {}", path.display())))?;
            match rustix::fs::flock(&f, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => return Ok(f),
                Err(rustix::io::Errno::WOULDBLOCK) | Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(io_err(format!("cannot lock {}", path.display()))(e.into())),
            }
        }
        std::thread::sleep(SLOT_POLL);
    }
}

/// A fresh checkout of `sha` in `dir` sharing the remote's objects.
fn checkout(remote: &Path, dir: &Path, sha: &str) -> Result<(), String> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| format!("cannot clear {}: {e}", dir.display()))?;
    }
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    git(
        None,
        [
            "clone".as_ref(),
            "-q".as_ref(),
            "--no-checkout".as_ref(),
            "--shared".as_ref(),
            remote.as_os_str(),
            dir.as_os_str(),
        ],
    )?;
    git(Some(dir), ["checkout", "-q", "--detach", sha])?;
    Ok(())
}

/// Moves blocked jobs whose needs are all done to `waiting` (all succeeded) or `skipped`
/// (one failed, was cancelled or skipped), then returns the first waiting job.
fn next_job(store: &mut Store, run_id: i64) -> Result<Option<JobRow>, LocalForgeError> {
    loop {
        let jobs = lasting(|| store.read(|tx| db::load_jobs(tx, run_id)))?;
        let by_name: HashMap<&str, JobStatus> =
            jobs.iter().map(|j| (j.name.as_str(), j.status)).collect();
        let mut change = None;
        for job in jobs.iter().filter(|j| j.status == JobStatus::Blocked) {
            let needs: Vec<(&str, Option<JobStatus>)> = job
                .needs
                .iter()
                .map(|n| (n.as_str(), by_name.get(n.as_str()).copied()))
                .collect();
            if let Some((n, _)) = needs.iter().find(|(_, s)| s.is_none()) {
                change = Some((
                    job.id,
                    JobStatus::Skipped,
                    Some(format!("needs unknown job {n}")),
                ));
                break;
            }
            if needs.iter().all(|(_, s)| s.is_some_and(|s| s.is_done())) {
                let unmet: Vec<String> = needs
                    .iter()
                    .filter(|(_, s)| *s != Some(JobStatus::Success))
                    .map(|(n, s)| format!("{n} {}", s.unwrap_or(JobStatus::Unknown)))
                    .collect();
                change = Some(if unmet.is_empty() {
                    (job.id, JobStatus::Waiting, None)
                } else {
                    (
                        job.id,
                        JobStatus::Skipped,
                        Some(format!("skipped: needs {}", unmet.join(", "))),
                    )
                });
                break;
            }
        }
        match change {
            Some((id, status, note)) => {
                lasting(|| {
                    store.write(|tx| {
                        db::set_job_status(
                            tx,
                            id,
                            status,
                            &JobUpdate {
                                note: note.as_deref(),
                                ..JobUpdate::default()
                            },
                        )
                    })
                })?;
            }
            None => {
                if let Some(job) = jobs.iter().find(|j| j.status == JobStatus::Waiting) {
                    return Ok(Some(job.clone()));
                }
                if jobs.iter().any(|j| !j.status.is_done()) {
                    // Only possible with cyclic needs, which config validation refuses.
                    lasting(|| {
                        store.write(|tx| {
                            db::finish_unfinished_jobs(
                                tx,
                                run_id,
                                JobStatus::Skipped,
                                "needs can never be met",
                            )
                        })
                    })?;
                }
                return Ok(None);
            }
        }
    }
}

/// Where a run's jobs run: its directory (`$ORCH_UPSTREAMS`), its checkout, its upstream
/// listing, and the jobs as repos.yaml gives them now (their `env`).
struct Workspace<'a> {
    run_dir: &'a Path,
    work: &'a Path,
    list: &'a Path,
    jobs: &'a [crate::config::JobSpec],
}

fn run_job(
    layout: &Layout,
    store: &mut Store,
    run: &RunRow,
    ws: &Workspace,
    job: &JobRow,
    preface: Option<&str>,
    confined: &Confinement,
) -> Result<JobStatus, LocalForgeError> {
    let log_path = layout.job_log(&run.repo, run.number, &job.name);
    let finish = |store: &mut Store, status: JobStatus, code: Option<i64>, note: Option<&str>| {
        lasting(|| {
            store.write(|tx| {
                db::set_job_status(
                    tx,
                    job.id,
                    status,
                    &JobUpdate {
                        exit_code: code,
                        note,
                        ..JobUpdate::default()
                    },
                )
            })
        })
    };
    // The job starts only once its pid is recorded: a job that stops or kills its runner at
    // once (`kill -STOP $PPID`) must never catch it inside that write, holding the database
    // for every other orch process for as long as it stays stopped.
    let (gate, held) =
        StartGate::new().map_err(io_err(format!("cannot start job {}", job.name)))?;
    // A cgroup of its own (where this machine gives one): a daemon the job starts (`setsid`,
    // a double fork) stays in it, and it is emptied when the job ends, however it ends.
    let cgroup =
        crate::contain::Cgroup::for_worker(&layout.state_dir, &format!("ci-{}-{}", run.id, job.id));
    let contained = Contained {
        account: confined.account,
        sandbox: confined.sandbox,
        cgroup: cgroup.as_ref(),
    };
    let (mut cmd, timeout) = match job_command(&log_path, run, ws, job, preface, &contained, held) {
        Ok(c) => c,
        Err(e) => {
            let note = format!("cannot start: {e}");
            append(&log_path, &note);
            finish(store, JobStatus::Failure, None, Some(&note))?;
            return Ok(JobStatus::Failure);
        }
    };
    // The shared database's URL and password: a job runs the repository's code.
    for var in crate::store::location::secret_vars(&layout.state_dir) {
        cmd.env_remove(var);
    }
    // Picked up: `running` before the job's first instruction, as Forgejo marks a task when
    // a runner takes it. Written after the spawn, a job that stops its runner at once
    // (`kill -STOP $PPID`) would read `waiting` for ever: never "past its own limit".
    lasting(|| {
        store.write(|tx| db::set_job_status(tx, job.id, JobStatus::Running, &JobUpdate::default()))
    })?;
    let mut child = match spawn_in_group(
        &mut cmd,
        &GroupOptions {
            die_with_parent: true,
        },
    ) {
        Ok(c) => c,
        Err(e) => {
            let note = format!("cannot start sh: {e}");
            append(&log_path, &note);
            finish(store, JobStatus::Failure, None, Some(&note))?;
            return Ok(JobStatus::Failure);
        }
    };
    drop(cmd); // closes the runner's copies of the log file
    lasting(|| store.write(|tx| db::set_job_pid(tx, job.id, child.pgid() as i64)))?;
    gate.open();
    let waited = child
        .wait_timeout(timeout)
        .map_err(io_err(format!("cannot wait for job {}", job.name)))?;
    let outcome = match waited {
        Some(exit) => {
            // Sweep whatever the job left running in its group.
            let _ = child.terminate(JOB_KILL_GRACE);
            if exit.success() {
                (JobStatus::Success, Some(0), None)
            } else {
                let note = describe_exit(exit);
                append(&log_path, &note);
                (JobStatus::Failure, exit.code().map(i64::from), Some(note))
            }
        }
        None => {
            let note = format!("timed out after {}", crate::duration::format(timeout));
            let _ = child.terminate(JOB_KILL_GRACE);
            append(
                &log_path,
                &format!(
                    "{note}; its process group was terminated (SIGTERM, SIGKILL after {})",
                    crate::duration::format(JOB_KILL_GRACE)
                ),
            );
            (JobStatus::Failure, None, Some(note))
        }
    };
    // The guard emptied its tree; the cgroup is the bound for what left it (a guard killed
    // with its group on a timeout has no say).
    if let Some(cg) = &cgroup {
        cg.kill_and_remove(JOB_KILL_GRACE);
    }
    let (status, code, note) = outcome;
    finish(store, status, code, note.as_deref())?;
    Ok(status)
}

/// Whom a job runs as and what it may see: the worker's account (`worker.user(s)`), its
/// sandbox (`worker.sandbox`); neither, orch's user and everything.
#[derive(Clone, Copy)]
struct Confinement<'a> {
    account: Option<&'a crate::account::Account>,
    sandbox: Option<&'a crate::sandbox::Plan>,
}

/// A job's [`Confinement`] and the cgroup it runs in (none where the machine gives none).
#[derive(Clone, Copy)]
struct Contained<'a> {
    account: Option<&'a crate::account::Account>,
    sandbox: Option<&'a crate::sandbox::Plan>,
    cgroup: Option<&'a crate::contain::Cgroup>,
}

fn job_command(
    log_path: &Path,
    run: &RunRow,
    ws: &Workspace,
    job: &JobRow,
    preface: Option<&str>,
    contained: &Contained,
    gate: std::os::fd::OwnedFd,
) -> std::io::Result<(Command, Duration)> {
    let Contained {
        account,
        sandbox,
        cgroup,
    } = *contained;
    if let Some(dir) = log_path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut log = File::create(log_path)?;
    if let Some(line) = preface {
        // Written through the job's own descriptor, before its output: the job writes on.
        writeln!(log, "{line}")?;
    }
    // Every job under orch's guard, as a worker is: a subreaper that ends the job's whole tree
    // when the job exits (or its runner dies), in the job's cgroup, and — where the machine
    // gives PID namespaces — as the child of an init whose death the kernel makes the death of
    // everything the job started, wherever it moved. The init makes the sandbox
    // (`worker.sandbox`: required there) and switches to the worker's account.
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.arg(crate::guard::GUARD_COMMAND)
        .arg("--parent")
        .arg(std::process::id().to_string());
    if let Some(cg) = cgroup {
        cmd.arg("--cgroup").arg(cg.dir());
    }
    if sandbox.is_some() || crate::pidns::usable().is_some() {
        cmd.arg("--pidns");
    }
    if let Some(plan) = sandbox {
        cmd.args(plan.args());
    }
    if let Some(a) = account {
        cmd.arg(crate::account::USER_ARG).arg(a.arg());
    }
    cmd.args(["--", "sh"]);
    cmd.arg("-c")
        .arg(format!("{GATE_PREFIX}{}", job.command))
        .current_dir(ws.work)
        .stdin(Stdio::from(gate))
        .stdout(log.try_clone()?)
        .stderr(log);
    scrub_env(&mut cmd, true);
    // repos.yaml's `env` first: orch's own variables are never the repository's to set
    // (validation refuses ORCH_* names there anyway).
    if let Some(spec) = ws.jobs.iter().find(|j| j.name == job.name) {
        cmd.envs(spec.env.iter().map(|(k, v)| (k, v)));
    }
    cmd.env("ORCH_CI_SHA", &run.sha)
        .env("ORCH_CI_REPO", &run.repo)
        .env("ORCH_CI_RUN", run.number.to_string())
        .env("ORCH_CI_REF", &run.git_ref)
        .env("ORCH_CI_JOB", &job.name)
        .env(crate::upstreams::DIR_VAR, ws.run_dir)
        .env(crate::upstreams::LIST_VAR, ws.list);
    if let Some(a) = account {
        cmd.env("HOME", ws.work)
            .env("USER", &a.name)
            .env("LOGNAME", &a.name);
    }
    let timeout = Duration::from_millis(u64::try_from(job.timeout_ms).unwrap_or(1).max(1));
    Ok((cmd, timeout))
}

fn describe_exit(exit: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (exit.code(), exit.signal()) {
        (Some(c), _) => format!("exited with code {c}"),
        (None, Some(s)) => format!("killed by signal {s}"),
        _ => format!("ended with {exit}"),
    }
}

/// Appends an `orch:` line to a job log (best effort: the database has the note too).
fn append(path: &Path, line: &str) {
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = writeln!(f, "orch: {line}");
    }
}

/// Holds a job back until its runner lets it go: the job's shell first reads its standard
/// input, the read end of a pipe whose write end only the runner holds, to its end (the
/// runner's [`StartGate::open`], or its death), then puts `/dev/null` there and runs the job.
/// Done in the job's shell, after the exec: std's spawn waits for the exec, so a child held
/// before it would hold its parent too.
struct StartGate {
    write: std::os::fd::OwnedFd,
}

/// What the job's shell runs before the job's own script (see [`StartGate`]).
const GATE_PREFIX: &str = "read -r orch_gate || :; unset orch_gate; exec </dev/null\n";

impl StartGate {
    /// The gate and the read end to give the job as its standard input.
    fn new() -> std::io::Result<(StartGate, std::os::fd::OwnedFd)> {
        use std::os::fd::FromRawFd;
        let mut fds = [0; 2];
        // SAFETY: pipe2 fills a local array; each descriptor is owned once, below.
        unsafe {
            if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok((
                StartGate {
                    write: std::os::fd::OwnedFd::from_raw_fd(fds[1]),
                },
                std::os::fd::OwnedFd::from_raw_fd(fds[0]),
            ))
        }
    }

    /// Lets the job go on.
    fn open(self) {
        drop(self.write);
    }
}
