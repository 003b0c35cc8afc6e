//! Containment of everything a worker starts, daemons included.
//!
//! A process group is not a container: `setsid` or a double fork leaves it. orch contains a
//! worker's tree in two ways and uses both where it can:
//!
//! - **cgroup v2** (where the machine allows it): each worker gets its own cgroup,
//!   `<cgroup2 mount>/<creator's cgroup>/orch-<tag of the state dir>/<worker id>`, created by
//!   its supervisor ([`Cgroup::for_worker`]) and joined by the worker command before it runs
//!   (the guard joins it in `pre_exec`). Nothing a process does leaves it by accident; stopping
//!   is `cgroup.kill`, then waiting until `cgroup.procs` is empty, then `rmdir`. The path is
//!   recorded in the worker's session directory (`cgroup`), so that any later orch process
//!   finds it. No controller is enabled, so the "no internal processes" rule never applies.
//!   `ORCH_CGROUPS=off` disables this; a machine without a writable cgroup2 mount, or one whose
//!   kernel lacks `cgroup.kill` (< 5.14), falls back silently (logged once per process).
//! - **a subreaper guard** (always): `orch __guard` (see `guard.rs`) is a child subreaper, so
//!   daemonised descendants are reparented to it, and it kills every descendant
//!   ([`descendants`]) when the worker leader exits, when its supervisor asks, or when its
//!   supervisor dies. Each worker process carries `ORCH_WORKER_ID` and `ORCH_STATE_DIR` in its
//!   environment: after every orch process died at once, [`marked_processes`] finds what is
//!   left of a tree that had no cgroup.
//!
//! orch's own detached helpers that a worker may start (a local-forge CI runner from its
//! `git push`, a supervisor from an `orch spawn`) must outlive it: they leave the worker's
//! cgroup before they run ([`leave_worker_cgroup`]) and the walks skip them and what they
//! started ([`is_orch_helper`]). Workers run as the same user as orch: this contains
//! accidents (a forgotten daemon), not a worker set on escaping.
//!
//! **Bounds** (ARCHITECTURE.md, invariant 8; measured by the `containment::` integration tests,
//! debug build, 2 busy cores): a killed supervisor's whole tree is gone within 3–16 ms (its
//! guard's PDEATHSIG); when every orch process is killed at once, the worker command dies within
//! 2–20 ms (its PDEATHSIG) and — without a PID namespace — the rest of the tree at the next orch
//! command on the state directory, before that command does anything else (within 40–160 ms of
//! its start for three trees). Where PID namespaces are allowed the kernel ends the whole tree
//! with the guard (`escapers::`). A stop kills only this life's tree: its cgroup is
//! `<id>.<supervisor pid>`, its guard a child the supervisor waits for (never a pid read back
//! from the database). Every local-forge CI job runs under the guard too, in a cgroup
//! `ci-<run>-<job>` and a PID namespace of its own where the machine gives them
//! (`ci_containment::`), and a run nothing waits for is cancelled when its supervisor lets go
//! (`abandoned_runs::`).

use crate::process::proc_stat;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Once;
use std::time::{Duration, Instant};

/// `ORCH_CGROUPS=off` (or `0`, `no`, `false`): contain workers without cgroups.
pub const CGROUPS_ENV: &str = "ORCH_CGROUPS";

/// The file in a worker's session directory that records its cgroup directory.
pub const CGROUP_RECORD: &str = "cgroup";

/// The argv words of orch's detached helpers: the local forge's (`forge::local::
/// INTERNAL_COMMAND`, spelled out here: the forge imports this module) and a supervisor's.
pub const HELPER_COMMANDS: [&str; 2] = ["__local-forge", "__supervise"];

/// Prefix of the per-state-directory cgroup (`orch-<16 hex digits>`).
const TAG_PREFIX: &str = "orch-";

// ---- pure parts --------------------------------------------------------------------------------

/// The cgroup2 mount in `/proc/self/mountinfo` text: `(mount point, root of the mount inside
/// the hierarchy)`. The first cgroup2 mount wins.
pub fn cgroup2_mount(mountinfo: &str) -> Option<(PathBuf, String)> {
    mountinfo.lines().find_map(|line| {
        // "36 25 0:30 / /sys/fs/cgroup rw,… shared:9 - cgroup2 cgroup2 rw,…"
        let (left, right) = line.split_once(" - ")?;
        if right.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        let f: Vec<&str> = left.split_whitespace().collect();
        Some((PathBuf::from(unescape(f.get(4)?)), unescape(f.get(3)?)))
    })
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The unified-hierarchy path (`0::<path>`) in `/proc/<pid>/cgroup` text.
pub fn unified_path(proc_cgroup: &str) -> Option<String> {
    proc_cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(|p| p.trim_end().to_string())
        .filter(|p| p.starts_with('/'))
}

/// The directory of cgroup `path` under a cgroup2 mount whose root is `root`; `None` when the
/// path is outside what the mount shows.
pub fn cgroup_dir(mount: &Path, root: &str, path: &str) -> Option<PathBuf> {
    let rel = if root == "/" {
        path
    } else {
        let rest = path.strip_prefix(root)?;
        if !(rest.is_empty() || rest.starts_with('/')) {
            return None;
        }
        rest
    };
    let rel = rel.trim_start_matches('/');
    if rel.split('/').any(|c| c == "..") {
        return None;
    }
    Some(if rel.is_empty() {
        mount.to_path_buf()
    } else {
        mount.join(rel)
    })
}

/// `orch-<16 hex digits>`: FNV-1a (64 bit) of the state directory's path, stable across
/// versions and machines, so that every orch process of one state directory agrees.
pub fn state_dir_tag(state_dir: &Path) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in state_dir.as_os_str().as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{TAG_PREFIX}{h:016x}")
}

fn is_tag(s: &str) -> bool {
    s.strip_prefix(TAG_PREFIX)
        .is_some_and(|h| h.len() == 16 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// A worker id is used as a directory name: a boring name only.
fn id_ok(id: &str) -> bool {
    crate::diag::valid_name(id) && !id.starts_with("cgroup.")
}

/// If `path` (a unified-hierarchy path) is a worker's cgroup, `…/orch-<tag>/<id>` (or below
/// it), the path the worker cgroups were made under: where an orch helper goes to leave it.
pub fn outside_worker_cgroup(path: &str) -> Option<String> {
    let comps: Vec<&str> = path.split('/').collect();
    let at = comps.iter().position(|c| is_tag(c))?;
    if at + 1 >= comps.len() || !id_ok(comps[at + 1]) {
        return None;
    }
    let outside = comps[..at].join("/");
    Some(if outside.is_empty() {
        "/".into()
    } else {
        outside
    })
}

/// One process as the tree walks see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Proc {
    pub pid: i32,
    pub ppid: i32,
    pub pgrp: i32,
    pub session: i32,
    /// Zombie or dead: nothing to kill (a parent reaps it).
    pub dead: bool,
    pub start_ticks: u64,
}

/// Every descendant of `root` in `procs` (by parent pid; orphans reparented to a subreaper
/// root are its children), not descending into a process `skip` accepts (nor listing it).
pub fn descendants(procs: &[Proc], root: i32, skip: impl Fn(&Proc) -> bool) -> Vec<Proc> {
    let mut out = Vec::new();
    let mut frontier = vec![root];
    while let Some(parent) = frontier.pop() {
        for p in procs.iter().filter(|p| p.ppid == parent && p.pid != root) {
            if skip(p) || out.iter().any(|o: &Proc| o.pid == p.pid) {
                continue;
            }
            out.push(*p);
            frontier.push(p.pid);
        }
    }
    out
}

// ---- /proc ------------------------------------------------------------------------------------

/// Every process in `/proc` now.
pub fn snapshot() -> Vec<Proc> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let st = proc_stat(pid)?;
            Some(Proc {
                pid,
                ppid: st.ppid,
                pgrp: st.pgrp,
                session: st.session,
                dead: st.is_dead(),
                start_ticks: st.start_ticks,
            })
        })
        .collect()
}

/// Clock ticks since boot now (the unit of `start_ticks`), rounded up: a process started
/// in the current tick counts as started by now.
pub fn now_ticks() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    std::fs::read_to_string("/proc/uptime")
        .ok()
        .and_then(|s| uptime_ticks(s.split_whitespace().next()?, hz))
        .map(|t| t + 1)
        .unwrap_or(u64::MAX)
}

/// `"4099.56"` (seconds, as `/proc/uptime` writes them) in ticks of `hz`, without floating
/// point (4099.56 × 100 is 409955.99… in binary).
pub fn uptime_ticks(text: &str, hz: u64) -> Option<u64> {
    let (secs, frac) = text.split_once('.').unwrap_or((text, ""));
    let secs: u64 = secs.parse().ok()?;
    let digits = frac.len().min(9) as u32;
    let frac: u64 = if digits == 0 {
        0
    } else {
        frac[..digits as usize].parse().ok()?
    };
    Some(secs * hz + frac * hz / 10u64.pow(digits))
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// `argv` of `pid` (empty if unreadable).
fn argv(pid: i32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|raw| {
            raw.split(|b| *b == 0)
                .filter(|a| !a.is_empty())
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `p` is one of orch's own detached helpers, which outlive the worker that started
/// them: this orch binary, leading its own session, running `__local-forge` (a CI runner) or
/// `__supervise` (another worker's supervisor).
pub fn is_orch_helper(p: &Proc) -> bool {
    p.session == p.pid
        && same_file(
            Path::new(&format!("/proc/{}/exe", p.pid)),
            Path::new("/proc/self/exe"),
        )
        && argv(p.pid)
            .iter()
            .skip(1)
            .any(|a| HELPER_COMMANDS.contains(&a.as_str()))
}

/// Pids of the live descendants of `root`, orch helpers and what they started excluded.
pub fn live_descendants(root: i32) -> Vec<i32> {
    let procs = snapshot();
    descendants(&procs, root, is_orch_helper)
        .into_iter()
        .filter(|p| !p.dead)
        .map(|p| p.pid)
        .collect()
}

/// The worker a process belongs to, as the kernel shows it (never from its environment).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerOfProcess {
    pub id: String,
    /// The tag of the state directory whose worker it is (from its cgroup), when known.
    pub tag: Option<String>,
    /// The worker's report channel, from its guard's argv, when the guard was found.
    pub channel: Option<String>,
}

/// The worker (of any state directory) this process runs inside: its cgroup (`…/orch-<tag>/
/// <id>.<pid>`, kept across PID namespaces and `setsid`), else an `orch __guard --worker <id>`
/// among its ancestors (walked from `/proc/self`, so a process in a worker's PID namespace is
/// seen with the host's pids). `None`: not a worker's process.
pub fn worker_of_self() -> Option<WorkerOfProcess> {
    let from_cgroup = std::fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|t| unified_path(&t))
        .and_then(|path| worker_cgroup_id(&path));
    let guard = self_ancestry().into_iter().find_map(|pid| {
        let argv = argv(pid);
        // `guard::GUARD_COMMAND` and `pidns::INIT_COMMAND`, spelled out here: both import
        // this module. A sandboxed worker's `/proc` shows its init, never its guard.
        // An init names its worker only when sandboxed: an unnamed one is passed by.
        match argv.get(1).map(String::as_str) {
            Some("__guard") => {}
            Some("__init")
                if argv
                    .iter()
                    .any(|a| a == crate::report_wire::GUARD_WORKER_ARG) => {}
            _ => return None,
        }
        let value = |flag: &str| {
            argv.iter()
                .position(|a| a == flag)
                .and_then(|i| argv.get(i + 1))
                .cloned()
        };
        use crate::report_wire::{GUARD_CHANNEL_ARG, GUARD_WORKER_ARG};
        Some((value(GUARD_WORKER_ARG), value(GUARD_CHANNEL_ARG), pid))
    });
    match (from_cgroup, guard) {
        (Some((tag, id)), g) => Some(WorkerOfProcess {
            channel: g
                .filter(|(gid, _, _)| gid.as_deref() == Some(id.as_str()))
                .and_then(|g| g.1),
            id,
            tag: Some(tag),
        }),
        (None, Some((id, channel, pid))) => Some(WorkerOfProcess {
            id: id.unwrap_or_else(|| format!("(guard {pid})")),
            tag: None,
            channel,
        }),
        (None, None) => None,
    }
}

/// `(tag, worker id)` of a worker's cgroup path `…/orch-<tag>/<id>.<supervisor pid>[/…]`.
pub fn worker_cgroup_id(path: &str) -> Option<(String, String)> {
    let comps: Vec<&str> = path.split('/').collect();
    let at = comps.iter().position(|c| is_tag(c))?;
    let life = comps.get(at + 1)?;
    let (id, pid) = life.rsplit_once('.')?;
    if !id_ok(id) || pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((comps[at].to_string(), id.to_string()))
}

/// The ancestors of this process, its parent first, as `/proc` shows them (the pids of the
/// `/proc` mount's namespace, also from inside a worker's PID namespace).
fn self_ancestry() -> Vec<i32> {
    let Some(parent) = crate::process::own_stat().map(|s| s.ppid) else {
        return Vec::new();
    };
    let mut out = vec![parent];
    out.extend(crate::process::ancestry(parent));
    out
}

/// The worker id `pid`'s environment marks it with, if it is a worker's of `state_dir`.
fn mark_of(pid: i32, state_dir: &Path) -> Option<Vec<u8>> {
    let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let mut id = None;
    let mut has_dir = false;
    for var in env.split(|b| *b == 0) {
        if let Some(v) = var.strip_prefix(b"ORCH_WORKER_ID=") {
            id = Some(v.to_vec());
        } else if let Some(v) = var.strip_prefix(b"ORCH_STATE_DIR=") {
            has_dir = Path::new(std::ffi::OsStr::from_bytes(v)) == state_dir;
        }
    }
    id.filter(|_| has_dir)
}

/// Live processes (other than this one) whose environment has `var=value`: what an orch helper
/// it marked left behind (an alert command's daemon), found even after it left its group.
pub fn processes_with(var: &str, value: &str) -> Vec<i32> {
    let me = crate::pidns::host_pid() as i32;
    let wanted = format!("{var}={value}");
    snapshot()
        .into_iter()
        .filter(|p| !p.dead && p.pid != me)
        .filter(|p| {
            std::fs::read(format!("/proc/{}/environ", p.pid))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|v| v == wanted.as_bytes()))
        })
        .map(|p| p.pid)
        .collect()
}

/// [`marked_processes`] for many workers in one pass: one snapshot of the processes, each
/// one's environment read once (not once per worker: a resume of a thousand workers on a busy
/// host would read every environment a thousand times). Worker id → its marked pids.
pub fn marked_by_worker(
    state_dir: &Path,
    ids: &std::collections::HashSet<&str>,
    started_by: u64,
) -> std::collections::HashMap<String, Vec<i32>> {
    let mut out: std::collections::HashMap<String, Vec<i32>> = Default::default();
    if ids.is_empty() {
        return out;
    }
    let procs = snapshot();
    let me = crate::pidns::host_pid() as i32;
    let helpers: Vec<i32> = procs
        .iter()
        .filter(|p| p.session == p.pid && !p.dead && is_orch_helper(p))
        .map(|p| p.pid)
        .collect();
    let mut spared: std::collections::HashSet<i32> = helpers.iter().copied().collect();
    for h in &helpers {
        spared.extend(descendants(&procs, *h, |_| false).iter().map(|p| p.pid));
    }
    for p in procs
        .iter()
        .filter(|p| !p.dead && p.pid != me && p.start_ticks <= started_by)
        .filter(|p| !spared.contains(&p.pid))
    {
        if let Some(mark) = mark_of(p.pid, state_dir)
            && let Ok(id) = std::str::from_utf8(&mark)
            && ids.contains(id)
        {
            out.entry(id.to_string()).or_default().push(p.pid);
        }
    }
    out
}

/// Live processes (other than this one) started no later than `started_by` (clock ticks
/// since boot) whose environment marks them as worker `id`'s of `state_dir`, orch helpers
/// and what they started excluded: what is left of a tree whose guard is gone.
pub fn marked_processes(state_dir: &Path, id: &str, started_by: u64) -> Vec<i32> {
    marked_by_worker(state_dir, &std::iter::once(id).collect(), started_by)
        .remove(id)
        .unwrap_or_default()
}

/// SIGKILLs each pid (pids ≤ 1 never).
pub fn kill_all(pids: &[i32]) {
    for &pid in pids.iter().filter(|p| **p > 1) {
        // SAFETY: kill(2) with a positive pid signals that one process.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
}

/// Kills the processes marked as worker `id`'s (see [`marked_processes`]) until none is left
/// (bounded by `limit`); returns how many were killed.
pub fn kill_marked(state_dir: &Path, id: &str, started_by: u64, limit: Duration) -> usize {
    let deadline = Instant::now() + limit;
    let mut killed = 0;
    loop {
        let left = marked_processes(state_dir, id, started_by);
        if left.is_empty() || Instant::now() >= deadline {
            return killed;
        }
        killed += left.len();
        kill_all(&left);
        std::thread::sleep(Duration::from_millis(5));
    }
}

// ---- cgroups ----------------------------------------------------------------------------------

/// Logs once per process that workers are contained without cgroups, and why.
fn no_cgroups(why: &str) {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        tracing::info!("workers contained without cgroups (subreaper guard only): {why}");
    });
}

fn disabled_by_env() -> bool {
    std::env::var(CGROUPS_ENV).is_ok_and(|v| {
        matches!(
            v.to_ascii_lowercase().as_str(),
            "off" | "0" | "no" | "false"
        )
    })
}

/// The directory of this process's own cgroup, and the mount it is under.
fn own_cgroup_dir() -> Result<(PathBuf, PathBuf), String> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
    let (mount, root) = cgroup2_mount(&mountinfo).ok_or("no cgroup2 mount")?;
    let own = std::fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|s| unified_path(&s))
        .ok_or("no unified cgroup in /proc/self/cgroup")?;
    let dir = cgroup_dir(&mount, &root, &own).ok_or("own cgroup not under the cgroup2 mount")?;
    Ok((dir, mount))
}

/// A worker's cgroup (a directory under a cgroup2 mount).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cgroup {
    dir: PathBuf,
}

impl Cgroup {
    /// Creates (or takes over, killing whatever a previous life left in it) the cgroup of
    /// worker `id` under this process's own cgroup; `None` where cgroups cannot be used (the
    /// reason is logged once).
    pub fn for_worker(state_dir: &Path, id: &str) -> Option<Cgroup> {
        if disabled_by_env() {
            no_cgroups(&format!("{CGROUPS_ENV} is off"));
            return None;
        }
        if !id_ok(id) {
            return None;
        }
        let (base, _) = own_cgroup_dir().map_err(|e| no_cgroups(&e)).ok()?;
        if !base.join("cgroup.kill").exists() && !base.join("cgroup.procs").exists() {
            no_cgroups("the cgroup2 mount shows no interface files");
            return None;
        }
        let parent = base.join(state_dir_tag(state_dir));
        // One cgroup per supervisor's life of the worker (`<id>.<supervisor pid>`): a stale
        // supervisor (stopped past its lease, then continued) that kills its cgroup kills
        // only what it started, never its replacement's worker.
        let life = format!("{id}.{}", crate::pidns::host_pid());
        let dir = parent.join(&life);
        let mut made = Err(io::Error::other("not tried"));
        for _ in 0..3 {
            // A concurrent removal of an empty `parent` (another worker's last cleanup) can
            // make the second mkdir fail with ENOENT: try again.
            let _ = std::fs::create_dir(&parent);
            made = std::fs::create_dir(&dir);
            match &made {
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                _ => break,
            }
        }
        let cg = Cgroup { dir };
        match made {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                // A previous life's: nothing of it may run beside the new one.
                cg.kill_and_wait(Duration::from_secs(5));
            }
            Err(e) => {
                no_cgroups(&format!("cannot create {}: {e}", cg.dir.display()));
                let _ = std::fs::remove_dir(&parent);
                return None;
            }
        }
        // Other lives of this worker (a dead or stale supervisor's): nothing of them may run
        // beside this one.
        if let Ok(entries) = std::fs::read_dir(&parent) {
            for e in entries.flatten() {
                let name = e.file_name();
                let name = name.to_string_lossy();
                let other_life = name
                    .strip_prefix(id)
                    .and_then(|rest| rest.strip_prefix('.'))
                    .is_some_and(|pid| !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()));
                if name != life.as_str() && (name == id || other_life) {
                    Cgroup { dir: e.path() }.kill_and_remove(Duration::from_secs(5));
                }
            }
        }
        let usable = cg.dir.join("cgroup.kill").exists()
            && rustix::fs::access(cg.dir.join("cgroup.procs"), rustix::fs::Access::WRITE_OK)
                .is_ok();
        if !usable {
            no_cgroups("no cgroup.kill (kernel < 5.14) or cgroup.procs not writable");
            cg.remove();
            return None;
        }
        Some(cg)
    }

    /// An existing worker cgroup directory (as recorded): `None` unless it is under a
    /// cgroup2 mount and named like one (`…/orch-<tag>/<id>`).
    pub fn at(dir: &Path) -> Option<Cgroup> {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        let (mount, _) = cgroup2_mount(&mountinfo)?;
        let rel = dir.strip_prefix(&mount).ok()?;
        let path = format!("/{}", rel.to_str()?);
        outside_worker_cgroup(&path)?;
        Some(Cgroup {
            dir: dir.to_path_buf(),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Pids in the cgroup (empty once it is gone).
    pub fn procs(&self) -> Vec<i32> {
        std::fs::read_to_string(self.dir.join("cgroup.procs"))
            .map(|s| s.lines().filter_map(|l| l.trim().parse().ok()).collect())
            .unwrap_or_default()
    }

    /// Whether any process (of it or of a cgroup below it) is in it.
    pub fn populated(&self) -> bool {
        match std::fs::read_to_string(self.dir.join("cgroup.events")) {
            Ok(s) => s.lines().any(|l| l.trim() == "populated 1"),
            Err(_) => !self.procs().is_empty(),
        }
    }

    /// `cgroup.kill`: SIGKILL to every process in it and below it, at once.
    pub fn kill(&self) -> io::Result<()> {
        match std::fs::OpenOptions::new()
            .write(true)
            .open(self.dir.join("cgroup.kill"))
        {
            Ok(mut f) => f.write_all(b"1"),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// `cgroup.freeze`: every process in it stops where it is (daemons that left the worker's
    /// process group included) until thawed; SIGKILL still works on a frozen process.
    pub fn set_frozen(&self, frozen: bool) -> io::Result<()> {
        std::fs::OpenOptions::new()
            .write(true)
            .open(self.dir.join("cgroup.freeze"))?
            .write_all(if frozen { b"1" } else { b"0" })
    }

    /// Kills everything in it and waits (up to `limit`) until it is empty; whether it is.
    pub fn kill_and_wait(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            if !self.dir.exists() || !self.populated() {
                return true;
            }
            let _ = self.kill();
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Removes the (empty) cgroup, and its state directory's parent cgroup if that is empty.
    pub fn remove(&self) {
        let _ = std::fs::remove_dir(&self.dir);
        if let Some(parent) = self.dir.parent() {
            let _ = std::fs::remove_dir(parent);
        }
    }

    /// The whole stop: kill, wait until empty (bounded), remove. Whether it ended empty.
    pub fn kill_and_remove(&self, limit: Duration) -> bool {
        let empty = self.kill_and_wait(limit);
        if empty {
            self.remove();
        }
        empty
    }

    /// Writes the path to `<session_dir>/cgroup`.
    pub fn record(&self, session_dir: &Path) -> io::Result<()> {
        std::fs::write(
            session_dir.join(CGROUP_RECORD),
            self.dir.as_os_str().as_bytes(),
        )
    }

    /// The cgroup recorded in `session_dir`, if any (and valid).
    pub fn recorded(session_dir: &Path) -> Option<Cgroup> {
        let raw = std::fs::read(session_dir.join(CGROUP_RECORD)).ok()?;
        Cgroup::at(Path::new(std::ffi::OsStr::from_bytes(&raw)))
    }

    /// Forgets the record in `session_dir`.
    pub fn forget(session_dir: &Path) {
        let _ = std::fs::remove_file(session_dir.join(CGROUP_RECORD));
    }

    /// Makes `cmd`'s process join this cgroup before it runs (it fails to start if it
    /// cannot).
    pub fn join_before_exec(&self, cmd: &mut Command) {
        join_in_pre_exec(cmd, &self.dir.join("cgroup.procs"), true);
    }
}

/// `pre_exec`: writes "0" (the writing process itself) to `procs`, failing the spawn on error
/// when `required`.
fn join_in_pre_exec(cmd: &mut Command, procs: &Path, required: bool) {
    let Ok(path) = std::ffi::CString::new(procs.as_os_str().as_bytes()) else {
        return;
    };
    // SAFETY: the closure runs between fork and exec and only makes async-signal-safe system
    // calls (open, write, close) on memory allocated before the fork.
    unsafe {
        cmd.pre_exec(move || {
            let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            let ok = fd >= 0 && {
                let n = libc::write(fd, b"0".as_ptr().cast(), 1);
                libc::close(fd);
                n == 1
            };
            if !ok && required {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// For an orch helper that must outlive the worker whose tree starts it (a CI runner, a
/// supervisor): when this process is in a worker's cgroup, `cmd` moves to the cgroup the
/// worker cgroups were made under before it runs. Anywhere else, nothing changes.
pub fn leave_worker_cgroup(cmd: &mut Command) {
    let Ok(mountinfo) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return;
    };
    let Some((mount, root)) = cgroup2_mount(&mountinfo) else {
        return;
    };
    let Some(outside) = std::fs::read_to_string("/proc/self/cgroup")
        .ok()
        .and_then(|s| unified_path(&s))
        .and_then(|p| outside_worker_cgroup(&p))
    else {
        return;
    };
    if let Some(dir) = cgroup_dir(&mount, &root, &outside) {
        join_in_pre_exec(cmd, &dir.join("cgroup.procs"), false);
    }
}

#[cfg(test)]
mod tests;
