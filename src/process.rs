//! Process trees: every child orch starts (workers, CI jobs) runs as the leader of its own
//! process group, so that stopping it stops everything it started.
//!
//! std-based on purpose (no tokio): the supervisor and the local forge runner both wait on
//! children from plain threads. Linux semantics throughout (`/proc`, `PR_SET_PDEATHSIG`).
//!
//! Two traps this module handles:
//! - a signal sent to the leader only leaves grandchildren running: every signal here goes to
//!   the whole group (`kill(-pgid, …)`), and [`GroupChild::terminate`] sweeps the group even
//!   after the leader has exited;
//! - a zombie still "exists" for `kill(…, 0)`: [`group_alive`] only counts members that are not
//!   zombies, so a group whose leftovers wait to be reaped by init counts as gone.

use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use rustix::io::Errno;
use rustix::process::Pid;
pub use rustix::process::Signal;

/// How a child is started by [`spawn_in_group`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupOptions {
    /// Deliver SIGKILL to the child when its parent dies (`PR_SET_PDEATHSIG`).
    ///
    /// Linux ties this signal to the *thread* that spawned the child, not to the process: spawn
    /// from a thread that outlives the child (the main thread, or the thread that waits on it),
    /// never from a short-lived pool thread such as tokio's `spawn_blocking`.
    pub die_with_parent: bool,
}

/// Starts `cmd` as the leader of a new process group (pgid = its pid).
pub fn spawn_in_group(cmd: &mut Command, opts: &GroupOptions) -> io::Result<GroupChild> {
    cmd.process_group(0);
    // SAFETY: between fork and exec, one async-signal-safe call: the child starts with
    // SIGPIPE's default disposition whatever its parent ignores (see main.rs).
    unsafe {
        cmd.pre_exec(|| {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            Ok(())
        });
    }
    if opts.die_with_parent {
        let parent = rustix::process::getpid();
        // SAFETY: the closure runs between fork and exec and only makes async-signal-safe
        // system calls (prctl, getppid); it allocates nothing.
        unsafe {
            cmd.pre_exec(move || {
                rustix::process::set_parent_process_death_signal(Some(Signal::KILL))?;
                // The parent may have died between fork and prctl: then the signal never
                // comes, so refuse to start (the error goes to the parent, if it still listens).
                if rustix::process::getppid() != Some(parent) {
                    return Err(io::Error::from_raw_os_error(Errno::SRCH.raw_os_error()));
                }
                Ok(())
            });
        }
    }
    let child = cmd.spawn()?;
    let pgid = child.id() as i32;
    Ok(GroupChild {
        child,
        pgid,
        status: None,
    })
}

/// A child leading its own process group. Dropping it kills the group if it still runs.
#[derive(Debug)]
pub struct GroupChild {
    child: Child,
    pgid: i32,
    status: Option<ExitStatus>,
}

impl GroupChild {
    /// The leader's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The process group id (equal to the leader's pid).
    pub fn pgid(&self) -> i32 {
        self.pgid
    }

    /// The underlying child, e.g. to take its stdin/stdout pipes. Waiting through it is fine
    /// (std remembers the status), signalling its pid alone is not what you want.
    pub fn child_mut(&mut self) -> &mut Child {
        &mut self.child
    }

    /// The leader's exit status if it has exited (reaping it), without blocking.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        if self.status.is_none() {
            self.status = self.child.try_wait()?;
        }
        Ok(self.status)
    }

    /// Blocks until the leader exits and reaps it.
    pub fn wait(&mut self) -> io::Result<ExitStatus> {
        if let Some(s) = self.status {
            return Ok(s);
        }
        let s = self.child.wait()?;
        self.status = Some(s);
        Ok(s)
    }

    /// Waits up to `timeout` for the leader to exit; `None` if it still runs.
    pub fn wait_timeout(&mut self, timeout: Duration) -> io::Result<Option<ExitStatus>> {
        let deadline = Instant::now() + timeout;
        let mut nap = Duration::from_millis(1);
        loop {
            if let Some(s) = self.try_wait()? {
                return Ok(Some(s));
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            std::thread::sleep(nap.min(deadline - now));
            nap = (nap * 2).min(Duration::from_millis(50));
        }
    }

    /// Sends `sig` to the leader alone (not once it has been reaped: its pid may be reused).
    pub fn signal_leader(&self, sig: Signal) -> io::Result<()> {
        if self.status.is_some() {
            return Ok(());
        }
        match Pid::from_raw(self.pgid).map(|p| rustix::process::kill_process(p, sig)) {
            Some(Ok(())) | Some(Err(Errno::SRCH)) => Ok(()),
            Some(Err(e)) => Err(e.into()),
            None => Ok(()),
        }
    }

    /// Sends `sig` to every member of the group. A group that is already gone is not an error.
    pub fn signal_group(&self, sig: Signal) -> io::Result<()> {
        signal_group(self.pgid, sig)
    }

    /// Stops the whole tree: SIGTERM (and SIGCONT, for stopped members) to the group, up to
    /// `grace` for the leader to exit and the group to empty, then SIGKILL to whatever is left,
    /// reaps the leader and waits (bounded) until no member is alive. Also used after a normal
    /// exit of the leader, to sweep grandchildren it left behind.
    pub fn terminate(&mut self, grace: Duration) -> io::Result<ExitStatus> {
        let deadline = Instant::now() + grace;
        if self.try_wait()?.is_none() || group_alive(self.pgid) {
            self.signal_group(Signal::TERM)?;
            self.signal_group(Signal::CONT)?;
            let mut nap = Duration::from_millis(1);
            loop {
                let leader_done = self.try_wait()?.is_some();
                if leader_done && !group_alive(self.pgid) {
                    break;
                }
                let now = Instant::now();
                if now >= deadline {
                    break;
                }
                std::thread::sleep(nap.min(deadline - now));
                nap = (nap * 2).min(Duration::from_millis(20));
            }
        }
        if self.try_wait()?.is_none() || group_alive(self.pgid) {
            self.signal_group(Signal::KILL)?;
        }
        let status = self.wait()?;
        // SIGKILL is delivered asynchronously: give the members a moment to die.
        let until = Instant::now() + Duration::from_secs(5);
        while group_alive(self.pgid) && Instant::now() < until {
            self.signal_group(Signal::KILL)?;
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(status)
    }
}

impl Drop for GroupChild {
    fn drop(&mut self) {
        if matches!(self.try_wait(), Ok(None)) {
            let _ = self.signal_group(Signal::KILL);
            let _ = self.wait();
        }
        if group_alive(self.pgid) {
            let _ = self.signal_group(Signal::KILL);
        }
    }
}

/// `kill(-pgid, sig)`. `ESRCH` (group gone) is success; pgids ≤ 1 are refused, since
/// `kill(-1, …)` would signal every process the caller may signal.
pub fn signal_group(pgid: i32, sig: Signal) -> io::Result<()> {
    let pid = valid_pgid(pgid)?;
    match rustix::process::kill_process_group(pid, sig) {
        Ok(()) | Err(Errno::SRCH) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

fn valid_pgid(pgid: i32) -> io::Result<Pid> {
    match (pgid > 1).then(|| Pid::from_raw(pgid)).flatten() {
        Some(p) => Ok(p),
        _ => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("refusing to signal process group {pgid}"),
        )),
    }
}

/// Whether any member of process group `pgid` is alive: `kill(-pgid, 0)` finds one, and (where
/// `/proc` can tell) it is not a zombie waiting to be reaped.
pub fn group_alive(pgid: i32) -> bool {
    let Ok(pid) = valid_pgid(pgid) else {
        return false;
    };
    match rustix::process::test_kill_process_group(pid) {
        Err(Errno::SRCH) => false,
        _ => live_members(pgid).is_none_or(|n| n > 0),
    }
}

/// How many non-zombie processes belong to group `pgid` (`None` if `/proc` is unreadable).
fn live_members(pgid: i32) -> Option<usize> {
    let dir = std::fs::read_dir("/proc").ok()?;
    let mut n = 0;
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        if let Some(st) = proc_stat(pid)
            && st.pgrp == pgid
            && !st.is_dead()
        {
            n += 1;
        }
    }
    Some(n)
}

/// Whether a live member of process group `pgid` belongs to session `sid`. Identifies a
/// group across pgid reuse when its session leader is known (e.g. a dead runner's jobs).
pub fn group_in_session(pgid: i32, sid: i32) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return false;
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(proc_stat)
        .any(|st| st.pgrp == pgid && st.session == sid && !st.is_dead())
}

/// The fields of `/proc/<pid>/stat` orch uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProcStat {
    /// `R`, `S`, `D`, `Z` (zombie), `T`, `X` (dead), …
    pub state: char,
    pub ppid: i32,
    pub pgrp: i32,
    pub session: i32,
    /// Start time in clock ticks after boot: with the pid, it identifies a process across
    /// pid reuse.
    pub start_ticks: u64,
}

impl ProcStat {
    /// A zombie or a dead process: it runs no code any more.
    pub fn is_dead(&self) -> bool {
        matches!(self.state, 'Z' | 'X' | 'x')
    }
}

/// Reads `/proc/<pid>/stat`; `None` if there is no such process.
pub fn proc_stat(pid: i32) -> Option<ProcStat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&text)
}

/// Reads `/proc/self/stat`: this process as `/proc` shows it (its pids are those of the `/proc`
/// mount's namespace, also from inside a worker's PID namespace).
pub fn own_stat() -> Option<ProcStat> {
    parse_stat(&std::fs::read_to_string("/proc/self/stat").ok()?)
}

fn parse_stat(text: &str) -> Option<ProcStat> {
    // "pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime
    //  stime cutime cstime priority nice threads itrealvalue starttime …"; comm may contain
    // spaces and parentheses, so split after the last ')'.
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some(ProcStat {
        state: f.first()?.chars().next()?,
        ppid: f.get(1)?.parse().ok()?,
        pgrp: f.get(2)?.parse().ok()?,
        session: f.get(3)?.parse().ok()?,
        start_ticks: f.get(19)?.parse().ok()?,
    })
}

/// The ancestors of process `pid` as `/proc` shows them, its parent first, up to and with
/// pid 1 (empty when `pid` is gone). A cycle or a walk longer than any real tree stops it.
pub fn ancestry(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let mut at = pid;
    while let Some(st) = proc_stat(at) {
        if st.ppid <= 0 || out.contains(&st.ppid) || out.len() >= 4096 {
            break;
        }
        out.push(st.ppid);
        at = st.ppid;
    }
    out
}

/// Whether process `pid` is alive (not a zombie) and, when `start_ticks` is given, is still
/// the same process that had that start time (not a reuse of its pid).
pub fn process_alive(pid: i32, start_ticks: Option<u64>) -> bool {
    if pid <= 0 {
        return false;
    }
    match proc_stat(pid) {
        Some(st) => !st.is_dead() && start_ticks.is_none_or(|t| t == st.start_ticks),
        None if std::path::Path::new("/proc/self/stat").exists() => false,
        None => Pid::from_raw(pid)
            .is_some_and(|p| !matches!(rustix::process::test_kill_process(p), Err(Errno::SRCH))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut c = Command::new("sh");
        c.arg("-c").arg(script);
        c
    }

    #[test]
    fn parses_stat_with_odd_command_names() {
        let line = "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 987654 0 0";
        let st = parse_stat(line).unwrap();
        assert_eq!(st.state, 'S');
        assert_eq!(st.ppid, 1);
        assert_eq!(st.pgrp, 4242);
        assert_eq!(st.session, 4242);
        assert_eq!(st.start_ticks, 987654);
    }

    #[test]
    fn child_leads_its_own_group() {
        let mut c = spawn_in_group(&mut sh("sleep 30"), &GroupOptions::default()).unwrap();
        let st = proc_stat(c.pid() as i32).unwrap();
        assert_eq!(st.pgrp, c.pgid());
        assert_ne!(
            st.pgrp,
            rustix::process::getpgrp().as_raw_nonzero().get(),
            "must not share the test's group"
        );
        assert!(group_alive(c.pgid()));
        assert!(c.try_wait().unwrap().is_none());
        c.terminate(Duration::from_secs(5)).unwrap();
        assert!(!group_alive(c.pgid()));
    }

    #[test]
    fn wait_timeout_returns_the_status_or_none() {
        let mut c = spawn_in_group(&mut sh("exit 3"), &GroupOptions::default()).unwrap();
        let s = c.wait_timeout(Duration::from_secs(10)).unwrap().unwrap();
        assert_eq!(s.code(), Some(3));
        let mut c = spawn_in_group(&mut sh("sleep 30"), &GroupOptions::default()).unwrap();
        assert!(c.wait_timeout(Duration::from_millis(50)).unwrap().is_none());
    }

    #[test]
    fn drop_kills_the_group() {
        let c = spawn_in_group(&mut sh("sleep 30 & sleep 30"), &GroupOptions::default()).unwrap();
        let pgid = c.pgid();
        drop(c);
        let deadline = Instant::now() + Duration::from_secs(10);
        while group_alive(pgid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(!group_alive(pgid));
    }

    #[test]
    fn refuses_to_signal_everything() {
        assert!(signal_group(1, Signal::TERM).is_err());
        assert!(signal_group(0, Signal::TERM).is_err());
        assert!(signal_group(-5, Signal::TERM).is_err());
        assert!(!group_alive(1));
    }

    #[test]
    fn process_alive_checks_identity() {
        let me = std::process::id() as i32;
        let st = proc_stat(me).unwrap();
        assert!(process_alive(me, None));
        assert!(process_alive(me, Some(st.start_ticks)));
        assert!(!process_alive(me, Some(st.start_ticks + 1)));
        assert!(!process_alive(0, None));
    }
}
