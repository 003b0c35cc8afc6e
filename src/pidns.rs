//! PID namespaces: the kernel's bound on what a contained command (a worker, an alert command)
//! can leave behind. The first process of a new PID namespace is its "init": when it dies, the
//! kernel SIGKILLs every other process of the namespace, whatever session, process group or
//! cgroup it moved to — so a tree whose init dies with its parent (PDEATHSIG=SIGKILL) ends with
//! that parent, without any orch process left to clean up.
//!
//! - **Entering** ([`Entry::enter`]): `unshare(CLONE_NEWPID)` (root, or CAP_SYS_ADMIN), else
//!   `unshare(CLONE_NEWUSER | CLONE_NEWPID)` with identity uid/gid maps (setgroups denied) —
//!   the latter only in a single-threaded process (the guard, or the child between fork and
//!   exec). Only the caller's *children* are in the new namespace; the first one is its init.
//!   [`usable`] answers once per process whether this machine allows either (`ORCH_PIDNS=off`
//!   disables them); where it does not, containment falls back to the subreaper and the cgroup
//!   (logged once).
//! - **Init** (`orch __init [--cgroup DIR] -- argv`, [`init_main`]): the worker's pid 1. An
//!   agent CLI does not reap orphans and, as pid 1, would ignore every signal it has no handler
//!   for (SIGTERM from its supervisor included); orch's own init reaps every orphan, starts the
//!   command as pid 2 with default signal handling, and when the command exits gives what it
//!   left SIGTERM and [`POLITE`], then exits with its status (the kernel kills the
//!   rest). It forwards nothing: the worker is in its guard's process group and gets group
//!   signals itself; init ignores them (it has no handler), except SIGKILL/SIGSTOP/SIGCONT from
//!   outside, which the kernel always delivers.
//! - **Pids** ([`host_pid`], [`nested`]): a process in such a namespace sees its own pid as a
//!   small number; what it records for other orch processes (a lease, a file name) must be its
//!   pid as `/proc` shows it (the `NSpid` line of `/proc/self/status` lists the pid in the
//!   namespace of the `/proc` mount first, then inward).

use std::ffi::CString;
use std::io::{self, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Once, OnceLock};
use std::time::{Duration, Instant};

/// `ORCH_PIDNS=off` (or `0`, `no`, `false`): contain workers and alert commands without PID
/// namespaces.
pub const PIDNS_ENV: &str = "ORCH_PIDNS";

/// How long what a worker left behind gets between SIGTERM and SIGKILL (its init's and its
/// guard's grace).
pub const POLITE: std::time::Duration = std::time::Duration::from_millis(500);

/// The argv word that starts [`init_main`].
pub const INIT_COMMAND: &str = "__init";

/// How a namespace was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `CLONE_NEWPID` alone (root or CAP_SYS_ADMIN).
    Pid,
    /// `CLONE_NEWUSER | CLONE_NEWPID` with identity maps (unprivileged).
    UserAndPid,
}

/// Why entering failed: the errno, and whether the process is already in a new user namespace
/// whose maps could not be written (it cannot go on as before).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnterError {
    pub errno: i32,
    pub half_entered: bool,
}

impl std::fmt::Display for EnterError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let e = io::Error::from_raw_os_error(self.errno);
        if self.half_entered {
            write!(f, "cannot write the user namespace's id maps: {e}")
        } else {
            write!(f, "unshare(CLONE_NEWPID): {e}")
        }
    }
}

/// The identity map line for `id` (`"<id> <id> 1"`).
pub fn identity_map(id: u32) -> String {
    format!("{id} {id} 1")
}

/// Everything entering needs, made before a fork: [`Entry::enter`] allocates nothing.
pub struct Entry {
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
    setgroups: CString,
    uid_map_path: CString,
    gid_map_path: CString,
}

impl Default for Entry {
    fn default() -> Self {
        Self::new()
    }
}

impl Entry {
    pub fn new() -> Entry {
        let uid = rustix::process::getuid().as_raw();
        let gid = rustix::process::getgid().as_raw();
        Entry {
            uid_map: identity_map(uid).into_bytes(),
            gid_map: identity_map(gid).into_bytes(),
            setgroups: c"/proc/self/setgroups".to_owned(),
            uid_map_path: c"/proc/self/uid_map".to_owned(),
            gid_map_path: c"/proc/self/gid_map".to_owned(),
        }
    }

    /// Makes the caller's future children members of a new PID namespace. Async-signal-safe
    /// (system calls on memory made before): callable between fork and exec.
    pub fn enter(&self) -> Result<Kind, EnterError> {
        // SAFETY: plain system calls; the buffers live in `self`.
        unsafe {
            if libc::unshare(libc::CLONE_NEWPID) == 0 {
                return Ok(Kind::Pid);
            }
            let first = errno();
            if libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWPID) != 0 {
                return Err(EnterError {
                    errno: first,
                    half_entered: false,
                });
            }
            // orch is not dumpable (main.rs): /proc/self/*_map would then be root's to write.
            let dumpable = libc::prctl(libc::PR_GET_DUMPABLE);
            libc::prctl(libc::PR_SET_DUMPABLE, 1);
            let ok = write_all(&self.setgroups, b"deny")
                && write_all(&self.uid_map_path, &self.uid_map)
                && write_all(&self.gid_map_path, &self.gid_map);
            let err = errno();
            libc::prctl(libc::PR_SET_DUMPABLE, dumpable.max(0));
            if !ok {
                return Err(EnterError {
                    errno: err,
                    half_entered: true,
                });
            }
        }
        Ok(Kind::UserAndPid)
    }
}

fn errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

/// open + write + close, async-signal-safe.
fn write_all(path: &CString, bytes: &[u8]) -> bool {
    // SAFETY: valid path and buffer.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return false;
        }
        let n = libc::write(fd, bytes.as_ptr().cast(), bytes.len());
        libc::close(fd);
        n == bytes.len() as isize
    }
}

fn disabled_by_env() -> bool {
    std::env::var(PIDNS_ENV).is_ok_and(|v| {
        matches!(
            v.to_ascii_lowercase().as_str(),
            "off" | "0" | "no" | "false"
        )
    })
}

/// Whether this machine lets this process give its children a PID namespace, asked once per
/// process (a forked child tries and reports); the reason when it does not, logged once.
pub fn usable() -> Option<Kind> {
    static ANSWER: OnceLock<Result<Kind, String>> = OnceLock::new();
    static LOGGED: Once = Once::new();
    let answer = ANSWER.get_or_init(|| {
        if disabled_by_env() {
            return Err(format!("{PIDNS_ENV} is off"));
        }
        probe()
    });
    match answer {
        Ok(kind) => Some(*kind),
        Err(why) => {
            LOGGED.call_once(|| {
                tracing::info!(
                    "workers and alert commands contained without PID namespaces (subreaper and cgroup only): {why}"
                );
            });
            None
        }
    }
}

/// A child tries [`Entry::enter`] and exits with the answer: 0 `Pid`, 1 `UserAndPid`, 2 +
/// errno otherwise.
fn probe() -> Result<Kind, String> {
    let entry = Entry::new();
    // SAFETY: the child only makes async-signal-safe calls (enter, _exit); a multi-threaded
    // parent is fine for that.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork: {}", io::Error::last_os_error()));
    }
    if pid == 0 {
        let code = match entry.enter() {
            Ok(Kind::Pid) => 0,
            Ok(Kind::UserAndPid) => 1,
            Err(e) => 2 + e.errno.clamp(0, 250),
        };
        // SAFETY: ends the child without running anything of the parent's.
        unsafe { libc::_exit(code) }
    }
    let mut st = 0;
    loop {
        // SAFETY: waits for the child just forked.
        let r = unsafe { libc::waitpid(pid, &mut st, libc::__WALL) };
        if r == pid {
            break;
        }
        if r < 0 && errno() != libc::EINTR {
            return Err(format!("waitpid: {}", io::Error::last_os_error()));
        }
    }
    match (libc::WIFEXITED(st), libc::WEXITSTATUS(st)) {
        (true, 0) => Ok(Kind::Pid),
        (true, 1) => Ok(Kind::UserAndPid),
        (true, n) => Err(format!(
            "unshare(CLONE_NEWPID) and unshare(CLONE_NEWUSER|CLONE_NEWPID): {}",
            io::Error::from_raw_os_error(n - 2)
        )),
        _ => Err("the probe was killed".into()),
    }
}

// ---- pids --------------------------------------------------------------------------------------

/// The pids of the `NSpid:` line of a `/proc/<pid>/status` text, outermost (the `/proc`
/// mount's namespace) first.
pub fn nspids(status: &str) -> Vec<i32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))
        .map(|rest| {
            rest.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

fn own_nspids() -> &'static [i32] {
    static PIDS: OnceLock<Vec<i32>> = OnceLock::new();
    PIDS.get_or_init(|| {
        std::fs::read_to_string("/proc/self/status")
            .map(|s| nspids(&s))
            .unwrap_or_default()
    })
}

/// This process's pid as `/proc` (and every orch process outside a worker) sees it: what it
/// records in the database and in file names. Equal to `std::process::id()` outside a PID
/// namespace of orch's.
pub fn host_pid() -> u32 {
    // Not cached across a fork: only orch's own processes (each one exec'd) call it.
    match own_nspids().first() {
        Some(&p) if p > 0 => p as u32,
        _ => std::process::id(),
    }
}

/// Whether this process runs inside a contained worker's or alert command's PID namespace:
/// below the one of `/proc` (pids it signals are not the ones `/proc` and the database name),
/// or in one whose own `/proc` it sees (a sandbox, a Codex worker: pid 1 is orch's init, and
/// the processes of orch outside are not there to be seen).
pub fn nested() -> bool {
    static NESTED: OnceLock<bool> = OnceLock::new();
    *NESTED.get_or_init(|| {
        own_nspids().len() > 1
            || std::fs::read("/proc/1/cmdline").is_ok_and(|c| is_init_cmdline(&c))
    })
}

/// Whether a `/proc/<pid>/cmdline` is orch's init's (`<orch> __init …`).
fn is_init_cmdline(cmdline: &[u8]) -> bool {
    cmdline.split(|b| *b == 0).nth(1) == Some(INIT_COMMAND.as_bytes())
}

// ---- init --------------------------------------------------------------------------------------

/// Starts `orch __init [--cgroup DIR] -- argv` from a process that has entered a new PID
/// namespace ([`Entry::enter`]): it is the namespace's init, dies with the caller
/// (PDEATHSIG=SIGKILL) and refuses to start if the caller is already gone. Its pid (as the
/// caller sees it).
pub fn spawn_init(
    argv: &[String],
    cgroup: Option<&std::path::Path>,
    user: Option<(u32, u32)>,
    sandbox: Option<&crate::sandbox::Prepared>,
    ident: &[String],
) -> io::Result<i32> {
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("/proc/self/exe"));
    let mut cmd = Command::new(exe);
    cmd.arg(INIT_COMMAND);
    match (cgroup, sandbox) {
        // A sandboxed init joins its cgroup before the tree is hidden (`Prepared::apply`),
        // and is named in its own argv: its worker's `/proc` shows no guard.
        (_, Some(_)) => {
            cmd.args(ident);
        }
        (Some(dir), None) => {
            cmd.arg("--cgroup").arg(dir);
        }
        (None, None) => {}
    }
    if let Some((uid, gid)) = user {
        cmd.arg(crate::account::USER_ARG)
            .arg(format!("{uid}:{gid}"));
    }
    cmd.arg("--").args(argv);
    // A pipe whose write end only the caller holds: the init's getppid() is 0 whatever
    // happens to its parent (it is outside the namespace), so a parent that died before the
    // PDEATHSIG was set shows as a hung-up pipe instead.
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills a local array.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let (rfd, wfd) = (fds[0], fds[1]);
    // The sandbox outlives `cmd` (a borrow of the caller's, and `cmd` ends with this function):
    // its address is what the closure, which must be 'static, carries.
    let sandbox = sandbox.map(|s| s as *const crate::sandbox::Prepared as usize);
    // SAFETY: the closure runs between fork and exec and only makes async-signal-safe system
    // calls (prctl, close, poll, and the sandbox's mounts) on memory made before.
    unsafe {
        cmd.pre_exec(move || {
            rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::KILL))?;
            libc::close(wfd);
            let mut p = libc::pollfd {
                fd: rfd,
                events: libc::POLLIN,
                revents: 0,
            };
            if libc::poll(&mut p, 1, 0) > 0 && p.revents & libc::POLLHUP != 0 {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            match sandbox {
                // SAFETY: see above: the sandbox is alive until this function returns.
                Some(s) => (*(s as *const crate::sandbox::Prepared)).apply(),
                None => Ok(()),
            }
        });
    }
    let child = cmd.spawn();
    // The caller's write end stays open for its whole life (closed by the kernel when it dies).
    // SAFETY: closes the read end this function opened.
    unsafe {
        libc::close(rfd);
    }
    Ok(child?.id() as i32)
}

struct InitArgs {
    cgroup: Option<PathBuf>,
    /// The account the command runs as (init itself stays orch's: the worker cannot signal it).
    user: Option<(u32, u32)>,
    argv: Vec<String>,
}

fn parse_init(args: &[String]) -> Option<InitArgs> {
    let mut cgroup = None;
    let mut user = None;
    let mut i = 0;
    loop {
        match args.get(i)?.as_str() {
            "--cgroup" => cgroup = Some(PathBuf::from(args.get(i + 1)?)),
            crate::account::USER_ARG => {
                user = Some(crate::account::parse_arg(args.get(i + 1)?)?);
            }
            // Read from /proc by orch commands run inside a sandboxed worker (`contain`).
            crate::report_wire::GUARD_WORKER_ARG | crate::report_wire::GUARD_CHANNEL_ARG => {
                args.get(i + 1)?;
            }
            "--" => break,
            _ => return None,
        }
        i += 2;
    }
    let argv = args[i + 1..].to_vec();
    (!argv.is_empty()).then_some(InitArgs { cgroup, user, argv })
}

extern "C" fn on_sigchld(_: libc::c_int) {}

/// `orch __init`: pid 1 of a worker's PID namespace (see the module docs). Its exit code: the
/// command's (128 + signal if it was killed), 127 if it could not start, 2 on misuse.
pub fn init_main(args: &[String]) -> i32 {
    let Some(a) = parse_init(args) else {
        eprintln!("usage: orch __init [--cgroup <dir>] [--user <uid>:<gid>] -- <command> [args…]");
        return 2;
    };
    if std::process::id() != 1 {
        eprintln!("orch {INIT_COMMAND}: not the first process of a PID namespace");
        return 2;
    }
    // Pid 1 never receives a signal it has no handler for: SIGCHLD needs one to be taken.
    // SAFETY: a no-op handler; the signal stays blocked and is taken with sigtimedwait.
    let chld = unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = on_sigchld as *const () as libc::sighandler_t;
        libc::sigemptyset(&mut sa.sa_mask);
        libc::sigaction(libc::SIGCHLD, &sa, std::ptr::null_mut());
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGCHLD);
        libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
        set
    };
    if let Some(dir) = &a.cgroup {
        let joined = std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join("cgroup.procs"))
            .and_then(|mut f| f.write_all(b"0"));
        if let Err(e) = joined {
            eprintln!(
                "orch: the worker could not join cgroup {} ({e}); contained without it",
                dir.display()
            );
        }
    }
    let mut cmd = Command::new(&a.argv[0]);
    cmd.args(&a.argv[1..]);
    if let Some((uid, gid)) = a.user {
        // SAFETY: become_ids makes only async-signal-safe calls, between fork and exec.
        unsafe {
            cmd.pre_exec(move || crate::account::become_ids(uid, gid));
        }
    }
    // SAFETY: sigprocmask on a local set, between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let mut none: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut none);
            libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
            Ok(())
        });
    }
    let worker = match cmd.spawn() {
        // Reaped below with every other child, not through std.
        Ok(c) => c.id() as i32,
        Err(e) => {
            eprintln!("orch: cannot start worker command {:?}: {e}", a.argv[0]);
            return 127;
        }
    };
    let mut status = None;
    while status.is_none() {
        if reap(worker, &mut status) {
            break;
        }
        wait_chld(&chld, Duration::from_secs(1));
    }
    // What the command left: SIGTERM (and SIGCONT, for the stopped), a moment to go, then
    // this process exits and the kernel kills the rest.
    // SAFETY: kill(-1) from pid 1 signals every other process of its namespace.
    unsafe {
        libc::kill(-1, libc::SIGTERM);
        libc::kill(-1, libc::SIGCONT);
    }
    let deadline = Instant::now() + POLITE;
    while !reap(worker, &mut status) {
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        wait_chld(&chld, deadline - now);
    }
    status.unwrap_or(128 + libc::SIGKILL)
}

fn wait_chld(set: &libc::sigset_t, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: valid set and timespec.
    unsafe {
        libc::sigtimedwait(set, std::ptr::null_mut(), &ts);
    }
}

/// Reaps every exited child, recording the command's status; whether no child is left.
fn reap(worker: i32, status: &mut Option<i32>) -> bool {
    loop {
        let mut st: libc::c_int = 0;
        // SAFETY: waitpid with a valid status pointer; WNOHANG never blocks.
        let pid = unsafe { libc::waitpid(-1, &mut st, libc::WNOHANG | libc::__WALL) };
        if pid < 0 {
            return true; // ECHILD: nothing left in the namespace
        }
        if pid == 0 {
            return false;
        }
        if pid == worker {
            *status = Some(if libc::WIFEXITED(st) {
                libc::WEXITSTATUS(st)
            } else {
                128 + libc::WTERMSIG(st)
            });
        }
    }
}

/// Makes `cmd` (started from any process, threads or not) run as pid 1 of a new PID namespace:
/// between fork and exec its process enters one and forks again; the new child (pid 1, dying
/// with its parent) goes on to exec the command, the first stays outside as the one its caller
/// waits for and signals, and exits as the command does. When the command ends, the kernel
/// kills whatever it left in the namespace. Add it after anything that must happen in both
/// (a process group is set before this runs).
pub fn run_as_init(cmd: &mut Command) {
    let entry = Entry::new();
    // SAFETY: between fork and exec only async-signal-safe calls (unshare, open/write,
    // fork, prctl, close_range, waitpid, signal, kill, _exit) on memory made before the fork.
    unsafe {
        cmd.pre_exec(move || {
            entry
                .enter()
                .map_err(|e| io::Error::from_raw_os_error(e.errno))?;
            // A pipe whose write end only the one outside holds: pid 1 cannot ask after its
            // parent (outside its namespace, getppid() says 0), a hung-up pipe tells it.
            let mut fds = [0; 2];
            if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) != 0 {
                return Err(io::Error::last_os_error());
            }
            let child = libc::fork();
            if child < 0 {
                return Err(io::Error::last_os_error());
            }
            if child == 0 {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                libc::close(fds[1]);
                let mut p = libc::pollfd {
                    fd: fds[0],
                    events: libc::POLLIN,
                    revents: 0,
                };
                if libc::poll(&mut p, 1, 0) > 0 && p.revents & libc::POLLHUP != 0 {
                    libc::_exit(128 + libc::SIGKILL);
                }
                return Ok(()); // exec closes fds[0]
            }
            // The one outside: nothing of the caller's (its pipes, std's exec-error pipe)
            // stays open here, so the caller hears of the exec as usual; the pipe's write end
            // stays until it exits.
            let w = fds[1] as u32;
            if w > 0 {
                libc::syscall(libc::SYS_close_range, 0u32, w - 1, 0u32);
            }
            libc::syscall(libc::SYS_close_range, w + 1, u32::MAX, 0u32);
            let mut st = 0;
            loop {
                let r = libc::waitpid(child, &mut st, libc::__WALL);
                if r == child {
                    break;
                }
                if r < 0 && *libc::__errno_location() != libc::EINTR {
                    libc::_exit(127);
                }
            }
            if libc::WIFEXITED(st) {
                libc::_exit(libc::WEXITSTATUS(st));
            }
            let sig = libc::WTERMSIG(st);
            libc::signal(sig, libc::SIG_DFL);
            libc::kill(libc::getpid(), sig);
            libc::_exit(128 + sig)
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn nspid_lists_the_outermost_pid_first() {
        let status = "Name:\tsh\nTgid:\t4242\nNgid:\t0\nPid:\t4242\nPPid:\t4200\nNSpid:\t4242\t7\n";
        assert_eq!(nspids(status), vec![4242, 7]);
        assert_eq!(nspids("Pid:\t9\nNSpid:\t9\n"), vec![9]);
        assert!(nspids("Pid:\t9\n").is_empty());
    }

    #[test]
    fn orchs_init_is_known_by_its_argv() {
        assert!(is_init_cmdline(b"/usr/bin/orch\0__init\0--\0codex\0"));
        assert!(!is_init_cmdline(b"/sbin/init\0"));
        assert!(!is_init_cmdline(b"/usr/bin/orch\0status\0__init\0"));
        assert!(!is_init_cmdline(b""));
    }

    #[test]
    fn identity_maps_map_one_id_to_itself() {
        assert_eq!(identity_map(1000), "1000 1000 1");
    }

    #[test]
    fn init_parses_its_arguments() {
        let a = parse_init(&args("-- sh -c x")).unwrap();
        assert_eq!((a.cgroup, a.argv), (None, args("sh -c x")));
        let a = parse_init(&args("--cgroup /sys/fs/cgroup/o/w -- w")).unwrap();
        assert_eq!(a.cgroup, Some(PathBuf::from("/sys/fs/cgroup/o/w")));
        assert!(parse_init(&args("--")).is_none());
        assert!(parse_init(&args("--bogus 1 -- sh")).is_none());
    }

    /// The host pid a child in a new PID namespace reads from its `NSpid` line is the pid its
    /// parent got from fork, and its own pid there is 1.
    #[test]
    fn a_child_in_a_new_pid_namespace_reads_its_host_pid_first() {
        if usable().is_none() {
            eprintln!("no PID namespaces on this machine: skipped");
            return;
        }
        let mut cmd = Command::new("sh");
        cmd.args([
            "-c",
            "echo $$; read -r p _ </proc/self/stat; echo $p; grep NSpid /proc/$p/status",
        ])
        .stdout(std::process::Stdio::piped());
        run_as_init(&mut cmd);
        let out = cmd.spawn().unwrap().wait_with_output().unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert_eq!(lines[0], "1", "{text}");
        let host: i32 = lines[1].parse().unwrap();
        assert_ne!(host, 1, "{text}");
        assert_eq!(nspids(lines[2]), vec![host, 1], "{text}");
    }
}
