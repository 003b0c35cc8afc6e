//! `orch __guard --parent <pid> [--cgroup <dir>] [--pidns] [--worker <id>] [--channel @<name>] -- <argv…>`: the process between a
//! supervisor and its worker, and the leader of the worker's process group.
//!
//! What it guarantees (see `contain.rs` for the cgroup side):
//! - **It contains.** It is a child subreaper: whatever the worker daemonises (`setsid`, a
//!   double fork) is reparented to it, not to init. With `--cgroup` the worker command joins
//!   that cgroup before it runs (if it cannot, the guard says so on stderr and runs it without).
//! - **The worker's end is the tree's end.** When the worker command exits, the guard stops
//!   every descendant still running — SIGTERM, up to [`POLITE`], then SIGKILL (`cgroup.kill` as
//!   well) — reaps them, and only then exits with the worker's status: a supervisor that sees
//!   the guard exit knows the whole tree is gone.
//! - **Stop on request, at once.** SIGUSR1 (from its supervisor) kills the whole tree now, then
//!   the guard itself (SIGKILL). A SIGTERM to the group is meant for the worker: the guard ignores it (and waits
//!   for the worker to exit).
//! - **Its supervisor's death is its tree's death.** SIGHUP, its parent-death signal, kills the
//!   tree at once (a [`WAKE`] look at its parent is the backstop).
//! - **Its own death is the worker's death.** With `--pidns` (see `pidns.rs`) the guard enters
//!   a new PID namespace before anything else and its one child is orch's init (`orch __init`,
//!   pid 1 there, parent-death signal SIGKILL), which starts the worker command: when the guard
//!   dies, however (SIGKILL, every orch process at once), its init dies and the kernel kills
//!   everything of the worker, whatever session or cgroup it moved to. Without a namespace the
//!   worker command runs with parent-death signal SIGKILL, and what it started itself is left
//!   to its cgroup or its `ORCH_WORKER_ID` mark, killed by the next orch command
//!   (`app::orphans`).
//!
//! Single-threaded; every signal it handles is blocked and taken with `sigtimedwait`, so no
//! work happens in a signal handler. The worker gets an empty signal mask back before exec.

use crate::account::USER_ARG;
use crate::contain::{self, Cgroup};
use crate::report_wire::{GUARD_CHANNEL_ARG, GUARD_WORKER_ARG};
use std::io;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// The argv word that starts [`guard_main`].
pub const GUARD_COMMAND: &str = "__guard";

/// How long descendants left behind by an exited worker get between SIGTERM and SIGKILL.
pub const POLITE: Duration = crate::pidns::POLITE;
/// How long the guard keeps killing a tree that does not empty before it gives up.
const KILL_LIMIT: Duration = Duration::from_secs(5);
/// How often the guard looks at its parent without being woken by a signal.
pub const WAKE: Duration = Duration::from_millis(200);

struct Args {
    parent: i32,
    cgroup: Option<PathBuf>,
    /// Run the worker in a PID namespace of its own, under orch's init.
    pidns: bool,
    /// The account the worker command runs as (`worker.user`): uid, gid.
    user: Option<(u32, u32)>,
    /// `worker.sandbox`: what the worker must not see (needs `--pidns`).
    sandbox: crate::sandbox::Plan,
    /// `--own-proc`: a sandbox that hides nothing ([`crate::sandbox::OWN_PROC_ARG`]).
    own_proc: bool,
    /// `--worker <id> --channel <name>`, given on to a sandboxed worker's init (the guard is
    /// not in the worker's `/proc`).
    ident: Vec<String>,
    argv: Vec<String>,
}

fn parse(args: &[String]) -> Option<Args> {
    let mut parent = None;
    let mut cgroup = None;
    let mut pidns = false;
    let mut own_proc = false;
    let mut user = None;
    let mut sandbox = crate::sandbox::Plan::default();
    let mut ident = Vec::new();
    let mut i = 0;
    loop {
        match args.get(i)?.as_str() {
            "--parent" => parent = Some(args.get(i + 1)?.parse::<i32>().ok()?),
            "--cgroup" => cgroup = Some(PathBuf::from(args.get(i + 1)?)),
            USER_ARG => user = Some(crate::account::parse_arg(args.get(i + 1)?)?),
            crate::sandbox::HIDE_ARG => sandbox.hide.push(PathBuf::from(args.get(i + 1)?)),
            crate::sandbox::KEEP_ARG => sandbox.keep.push(PathBuf::from(args.get(i + 1)?)),
            crate::sandbox::READ_ONLY_ARG => {
                sandbox.read_only.push(PathBuf::from(args.get(i + 1)?))
            }
            crate::sandbox::PIN_ARG => sandbox.pin.push(PathBuf::from(args.get(i + 1)?)),
            // Read from /proc by orch commands run inside the worker (`report_wire`).
            flag if flag == GUARD_WORKER_ARG || flag == GUARD_CHANNEL_ARG => {
                ident.push(flag.to_string());
                ident.push(args.get(i + 1)?.clone());
            }
            "--pidns" => {
                pidns = true;
                i += 1;
                continue;
            }
            crate::sandbox::OWN_PROC_ARG => {
                own_proc = true;
                i += 1;
                continue;
            }
            "--" => break,
            _ => return None,
        }
        i += 2;
    }
    let argv = args[i + 1..].to_vec();
    (!argv.is_empty()).then_some(Args {
        parent: parent?,
        cgroup,
        pidns,
        user,
        sandbox,
        own_proc,
        ident,
        argv,
    })
}

fn usage() -> i32 {
    eprintln!(
        "usage: orch __guard --parent <pid> [--cgroup <dir>] [--pidns [--own-proc] [--hide <path>]… [--keep <dir>]…] [--user <uid>:<gid>] -- <command> [args…]"
    );
    2
}

fn sigset(signals: &[libc::c_int]) -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset initialise and fill a local set.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in signals {
            libc::sigaddset(&mut set, *s);
        }
        set
    }
}

fn getppid() -> i32 {
    rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get())
}

/// The guard's own entry point (see the module docs). Returns its exit code: the worker's
/// (128 + signal if it was killed), 125 if its supervisor was gone, 127 if the worker
/// command could not start.
pub fn guard_main(args: &[String]) -> i32 {
    let Some(a) = parse(args) else {
        return usage();
    };
    let handled = sigset(&[
        libc::SIGCHLD,
        libc::SIGHUP,
        libc::SIGUSR1,
        libc::SIGTERM,
        libc::SIGINT,
    ]);
    // SAFETY: blocking signals of this (only) thread.
    unsafe {
        libc::sigprocmask(libc::SIG_BLOCK, &handled, std::ptr::null_mut());
    }
    let _ = rustix::process::set_child_subreaper(Some(rustix::process::getpid()));
    // Before the parent-death signal: a change of credentials (a user namespace) clears it.
    let pidns = a.pidns
        && match crate::pidns::Entry::new().enter() {
            Ok(_) => true,
            Err(e) if e.half_entered => {
                eprintln!("orch: no PID namespace for the worker: {e}");
                return 127;
            }
            Err(e) => {
                eprintln!("orch: no PID namespace for the worker ({e}); contained without it");
                false
            }
        };
    if rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::HUP)).is_err()
    {
        return 125;
    }
    // The parent may have died before the line above: then no signal will ever come.
    if getppid() != a.parent {
        return 125;
    }
    let me = std::process::id() as i32;
    let mut cgroup = a.cgroup.as_deref().and_then(Cgroup::at);
    // A sandbox is made by the namespace's init: without a namespace the worker does not run
    // (it would see everything it was meant not to).
    let sandbox = if a.sandbox.is_empty() && !a.own_proc {
        None
    } else if !pidns {
        eprintln!(
            "orch: worker.sandbox needs a PID namespace for the worker, and this machine gives none (see `orch check`); the worker is not started"
        );
        return 127;
    } else {
        let cwd = std::env::current_dir().ok();
        match crate::sandbox::Prepared::new(
            &a.sandbox,
            cgroup.as_ref().map(Cgroup::dir),
            cwd.as_deref(),
        ) {
            Ok(p) => Some(p),
            Err(e) => {
                eprintln!(
                    "orch: cannot prepare the worker's sandbox: {e}; the worker is not started"
                );
                return 127;
            }
        }
    };
    let started = if pidns {
        // orch's init is the namespace's pid 1; it joins the cgroup and starts the command.
        crate::pidns::spawn_init(
            &a.argv,
            cgroup.as_ref().map(Cgroup::dir),
            a.user,
            sandbox.as_ref(),
            &a.ident,
        )
    } else {
        start(&a.argv, cgroup.as_ref(), a.user, me)
    };
    let worker = match started {
        Ok(pid) => pid,
        Err(first) if cgroup.is_some() && !pidns => match start(&a.argv, None, a.user, me) {
            Ok(pid) => {
                let dir = cgroup.take().map(|c| c.dir().display().to_string());
                eprintln!(
                    "orch: the worker could not join cgroup {} ({first}); contained without it",
                    dir.unwrap_or_default()
                );
                pid
            }
            Err(e) => return cannot_start(&a.argv[0], e),
        },
        Err(e) => return cannot_start(&a.argv[0], e),
    };
    let mut status = None;
    let kill_request = sigset(&[libc::SIGHUP, libc::SIGUSR1]);
    loop {
        let mut sig = wait_signal(&handled, WAKE);
        if sig.is_some_and(|s| s != libc::SIGHUP && s != libc::SIGUSR1) {
            // A request to kill that came with the worker's death is still a kill.
            sig = wait_signal(&kill_request, Duration::ZERO).or(sig);
        }
        match sig {
            Some(libc::SIGHUP | libc::SIGUSR1) => {
                kill_tree(me, cgroup.as_ref(), None, worker, &mut status);
                // A killed tree ends as one: the guard dies of SIGKILL too (its supervisor
                // records no exit code, as for a group SIGKILL).
                // SAFETY: kill(2) of this process; SIGKILL cannot be blocked.
                unsafe {
                    libc::kill(me, libc::SIGKILL);
                }
                return 128 + libc::SIGKILL;
            }
            // SIGTERM/SIGINT went to the whole group: they are the worker's to act on.
            _ => reap(worker, &mut status),
        }
        if let Some(code) = status {
            kill_tree(me, cgroup.as_ref(), Some(POLITE), worker, &mut status);
            return code;
        }
        if getppid() != a.parent {
            kill_tree(me, cgroup.as_ref(), None, worker, &mut status);
            return 125;
        }
    }
}

fn cannot_start(cmd: &str, e: io::Error) -> i32 {
    eprintln!("orch: cannot start worker command {cmd:?}: {e}");
    127
}

/// Starts the worker command: parent-death signal SIGKILL, an empty signal mask, (with a
/// cgroup) in that cgroup, and (with `user`) as that account. Its pid.
fn start(
    argv: &[String],
    cgroup: Option<&Cgroup>,
    user: Option<(u32, u32)>,
    me: i32,
) -> io::Result<i32> {
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    if let Some(cg) = cgroup {
        cg.join_before_exec(&mut cmd);
    }
    // After joining the cgroup (root's to write), before the parent-death signal (a change of
    // credentials clears it).
    if let Some((uid, gid)) = user {
        // SAFETY: become_ids makes only async-signal-safe calls, between fork and exec.
        unsafe {
            cmd.pre_exec(move || crate::account::become_ids(uid, gid));
        }
    }
    // SAFETY: the closure runs between fork and exec and only makes async-signal-safe system
    // calls (prctl, getppid, sigprocmask) on local memory.
    unsafe {
        cmd.pre_exec(move || {
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
            if libc::getppid() != me {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
            Ok(())
        });
    }
    // Not waited through std: `reap` waits for every child, reparented daemons included.
    Ok(cmd.spawn()?.id() as i32)
}

/// Waits up to `timeout` for one of `set`; the signal taken, if any.
fn wait_signal(set: &libc::sigset_t, timeout: Duration) -> Option<libc::c_int> {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: valid set and timespec; no siginfo wanted.
    let s = unsafe { libc::sigtimedwait(set, std::ptr::null_mut(), &ts) };
    (s > 0).then_some(s)
}

/// Reaps every child that has exited (the worker, and daemons reparented to this subreaper);
/// records the worker's exit code.
fn reap(worker: i32, status: &mut Option<i32>) {
    loop {
        let mut st: libc::c_int = 0;
        // SAFETY: waitpid with a valid status pointer; WNOHANG never blocks.
        let pid = unsafe { libc::waitpid(-1, &mut st, libc::WNOHANG | libc::__WALL) };
        if pid <= 0 {
            return;
        }
        if pid == worker && status.is_none() {
            *status = Some(if libc::WIFEXITED(st) {
                libc::WEXITSTATUS(st)
            } else {
                128 + libc::WTERMSIG(st)
            });
        }
    }
}

/// Stops every descendant of the guard (orch helpers excluded) and everything in its cgroup:
/// first SIGTERM and up to `polite` for them to go, then SIGKILL until none is left (bounded
/// by `KILL_LIMIT`); reaps them and removes the cgroup.
fn kill_tree(
    me: i32,
    cgroup: Option<&Cgroup>,
    polite: Option<Duration>,
    worker: i32,
    status: &mut Option<i32>,
) {
    if let Some(grace) = polite {
        let deadline = Instant::now() + grace;
        let mut left = contain::live_descendants(me);
        for sig in [libc::SIGTERM, libc::SIGCONT] {
            for &pid in &left {
                // SAFETY: kill(2) of one positive pid.
                unsafe {
                    libc::kill(pid, sig);
                }
            }
        }
        while !left.is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
            reap(worker, status);
            left = contain::live_descendants(me);
        }
    }
    let deadline = Instant::now() + KILL_LIMIT;
    loop {
        if let Some(cg) = cgroup {
            let _ = cg.kill();
        }
        reap(worker, status);
        let left = contain::live_descendants(me);
        let busy = cgroup.is_some_and(Cgroup::populated);
        if (left.is_empty() && !busy) || Instant::now() >= deadline {
            break;
        }
        contain::kill_all(&left);
        std::thread::sleep(Duration::from_millis(2));
    }
    reap(worker, status);
    if let Some(cg) = cgroup {
        cg.remove();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn parses_its_arguments() {
        let a = parse(&args("--parent 42 -- sh -c x")).unwrap();
        assert_eq!((a.parent, a.cgroup, a.argv), (42, None, args("sh -c x")));
        let a = parse(&args("--parent 7 --cgroup /sys/fs/cgroup/o/w -- w")).unwrap();
        assert_eq!(a.cgroup, Some(PathBuf::from("/sys/fs/cgroup/o/w")));
        assert!(parse(&args("--parent 42 --")).is_none());
        assert!(parse(&args("--parent x -- sh")).is_none());
        assert!(parse(&args("--cgroup /x -- sh")).is_none());
        assert!(parse(&args("--bogus 1 -- sh")).is_none());
        assert!(parse(&args("--parent 1 sh")).is_none());
    }
}
