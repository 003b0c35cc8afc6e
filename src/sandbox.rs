//! The sandbox (`worker.sandbox`): what a worker sees of the file system when orch cannot give
//! it an account of its own (orch runs unprivileged). The worker still runs as orch's user, so
//! file modes cannot keep it from orch's files; a mount namespace of its own does:
//!
//! - orch's state directory (the database, sessions, the local forge's remotes; a shared
//!   local forge, `forge.path`, too), the repositories' clones, orch's home's credentials
//!   (`~/.ssh`, `~/.gitconfig`, …), the forge token's file, the cgroup tree and what `worker.hide` adds are covered — a directory
//!   by an empty read-only tmpfs, a file by `/dev/null`;
//! - the worker's own workspace (its clone, its home, its CI guide) is bound back where it was,
//!   and its working directory entered again through the new mounts (a working directory kept
//!   from before would lead back under a covered directory with `..`);
//! - `/proc` is mounted again for its PID namespace alone: it sees no orch process, no other
//!   worker, no environment of either;
//! - a cgroup namespace rooted at its own cgroup;
//! - what orch reads as its configuration or runs as its own code (the organisation's
//!   directory, the contract, the recorded wave files, orch's binary, the programs of alert
//!   command sinks, the directories of orch's PATH that orch's user may write) is made read-only, and each
//!   directory on the way to it that orch's user could rename is made a mount point (which
//!   cannot be renamed or removed): a worker runs as orch's user, and what it could write
//!   there would run outside its sandbox at the operator's next command (see `sandbox/fixed.rs`).
//!
//! The mounts are made by the namespace's init between fork and exec (it still holds the
//! capabilities its user namespace gave it; the exec as orch's uid drops them), so the worker
//! can undo none of them: it has no capability in the namespace that owns them, and a user
//! namespace it makes itself copies them locked. Everything here is prepared before the fork:
//! [`Prepared::apply`] only makes system calls.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

pub mod fixed;

/// `--hide <path>`: a path the worker must not see (guard and init argv).
pub const HIDE_ARG: &str = "--hide";
/// `--keep <path>`: a directory under a hidden one the worker keeps (its workspace).
pub const KEEP_ARG: &str = "--keep";
/// `--read-only <path>`: a path the worker may read but not change (orch's configuration and
/// code; see [`fixed`]).
pub const READ_ONLY_ARG: &str = "--read-only";
/// `--pin <path>`: a directory the worker must not rename or remove (on the way to a
/// read-only path).
pub const PIN_ARG: &str = "--pin";
/// `--own-proc`: nothing hidden, but the mount namespace and the `/proc` of the worker's PID
/// namespace all the same (what an agent that sandboxes its own commands with namespaces needs:
/// Codex's bubblewrap looks its pid up in `/proc`).
pub const OWN_PROC_ARG: &str = "--own-proc";

/// What orch's home holds that no worker may read: keys, credentials, git's and other tools'
/// configuration with tokens in it.
pub const HOME_SECRETS: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".gitconfig",
    ".git-credentials",
    ".config/git",
    ".netrc",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".config/gh",
    ".docker",
    ".kube",
    ".npmrc",
    ".pypirc",
    ".cargo/credentials.toml",
    ".cargo/credentials",
    ".pgpass",
    ".claude",
    ".claude.json",
    ".codex",
    ".config/orch",
];

/// The cgroup tree's usual mount point: hidden so that a worker cannot write itself into
/// another cgroup (it is orch's user: the delegated tree is writable by it).
pub const CGROUP_ROOT: &str = "/sys/fs/cgroup";

/// A sandbox as asked for: the paths to hide and the directories kept inside them, the paths
/// made read-only and the directories pinned (see [`fixed`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    pub hide: Vec<PathBuf>,
    pub keep: Vec<PathBuf>,
    pub read_only: Vec<PathBuf>,
    pub pin: Vec<PathBuf>,
}

impl Plan {
    /// The argv words (`--hide P … --keep P …`) that carry this plan to the guard.
    pub fn args(&self) -> Vec<std::ffi::OsString> {
        let mut out = Vec::new();
        for h in &self.hide {
            out.push(HIDE_ARG.into());
            out.push(h.clone().into_os_string());
        }
        for k in &self.keep {
            out.push(KEEP_ARG.into());
            out.push(k.clone().into_os_string());
        }
        for r in &self.read_only {
            out.push(READ_ONLY_ARG.into());
            out.push(r.clone().into_os_string());
        }
        for p in &self.pin {
            out.push(PIN_ARG.into());
            out.push(p.clone().into_os_string());
        }
        out
    }

    pub fn is_empty(&self) -> bool {
        self.hide.is_empty() && self.keep.is_empty() && self.read_only.is_empty()
    }

    /// `~/…` expanded with `home`; every path made absolute and resolved as the file system
    /// resolves it (a symlinked path hides its target).
    pub fn resolved(&self, home: Option<&Path>) -> Plan {
        let fix = |p: &PathBuf| -> Option<PathBuf> {
            let s = p.to_string_lossy();
            let p = if s == "~" || s.starts_with("~/") {
                home?.join(s.trim_start_matches('~').trim_start_matches('/'))
            } else {
                p.clone()
            };
            Some(crate::config::resolve_on_disk(&p))
        };
        Plan {
            hide: self.hide.iter().filter_map(fix).collect(),
            keep: self.keep.iter().filter_map(fix).collect(),
            read_only: self.read_only.iter().filter_map(fix).collect(),
            pin: self.pin.iter().filter_map(fix).collect(),
        }
    }
}

/// What a worker must not see: orch's state directory (but `workspace`, kept), the
/// repositories' `clones`, the forge's `token_file`, orch's home's credentials
/// ([`HOME_SECRETS`]), the cgroup tree and `extra` (`worker.hide`); resolved with `home`.
pub fn for_worker(
    state_dir: &Path,
    clones: &[&Path],
    token_file: Option<&Path>,
    extra: &[PathBuf],
    workspace: &Path,
    home: Option<&Path>,
) -> Plan {
    let mut hide = vec![state_dir.to_path_buf()];
    hide.extend(clones.iter().map(|c| c.to_path_buf()));
    hide.extend(token_file.map(Path::to_path_buf));
    hide.extend(HOME_SECRETS.iter().map(|s| PathBuf::from("~").join(s)));
    hide.push(PathBuf::from(CGROUP_ROOT));
    hide.extend(extra.iter().cloned());
    Plan {
        hide,
        keep: vec![workspace.to_path_buf()],
        ..Plan::default()
    }
    .resolved(home)
}

/// [`for_worker`] for `config`'s organisation (its clones, token file and `worker.hide`),
/// keeping `keep`, with orch's `HOME`: what a worker of it, and its CI, must not see; and
/// what they must not change ([`fixed::inputs`]: `config`'s directory, `contract` when it is
/// a file of its own, the recorded `waves` files, orch's binary, the alert commands' programs,
/// orch's PATH).
pub fn for_config(
    config: &crate::config::Config,
    state_dir: &Path,
    keep: &Path,
    contract: Option<&Path>,
    waves: &[PathBuf],
) -> Plan {
    let clones: Vec<&Path> = config.repos.iter().map(|r| r.path.as_path()).collect();
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    // A shared local forge (`forge.path`) is orch's state as much as the state directory's
    // own: its remotes, their hooks, its runs' checkouts.
    let hide: Vec<PathBuf> = config
        .worker
        .hide
        .iter()
        .chain(config.forge.path.iter())
        .cloned()
        .collect();
    let mut plan = for_worker(
        state_dir,
        &clones,
        config.forge.token_file.as_deref(),
        &hide,
        keep,
        home.as_deref(),
    );
    let path = std::env::var_os("PATH").unwrap_or_default();
    let inputs = fixed::inputs(
        config,
        contract,
        waves,
        &std::env::split_paths(&path).collect::<Vec<_>>(),
    );
    (plan.read_only, plan.pin) = fixed::protect(&inputs, fixed::could_write);
    plan
}

impl Plan {
    /// Whether a worker of this (resolved) plan cannot see `path`: it is (under) a hidden path
    /// and not under a kept directory.
    pub fn hides(&self, path: &Path) -> bool {
        let path = crate::config::resolve_on_disk(path);
        self.hide.iter().any(|h| path.starts_with(h))
            && !self.keep.iter().any(|k| path.starts_with(k))
    }
}

/// The hidden paths that matter, outermost first: those that do not exist are dropped (there
/// is nothing to see), and those inside another hidden directory (already covered).
pub fn outermost(hide: &[PathBuf], is_dir: impl Fn(&Path) -> Option<bool>) -> Vec<(PathBuf, bool)> {
    let mut found: Vec<(PathBuf, bool)> = hide
        .iter()
        .filter_map(|p| is_dir(p).map(|d| (p.clone(), d)))
        .collect();
    found.sort_by_key(|(p, _)| p.components().count());
    let mut out: Vec<(PathBuf, bool)> = Vec::new();
    for (p, dir) in found {
        if out.iter().any(|(o, odir)| *odir && p.starts_with(o)) || out.iter().any(|(o, _)| *o == p)
        {
            continue;
        }
        out.push((p, dir));
    }
    out
}

/// The directories to make inside hidden directory `root` (its tmpfs) so that `keep` can be
/// bound back: each component below `root`, down to `keep` itself.
pub fn mount_points(root: &Path, keep: &Path) -> Vec<PathBuf> {
    let Ok(below) = keep.strip_prefix(root) else {
        return Vec::new();
    };
    let mut at = root.to_path_buf();
    below
        .components()
        .map(|c| {
            at.push(c);
            at.clone()
        })
        .collect()
}

fn cstring(p: &Path) -> io::Result<CString> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{}: a NUL byte in the path", p.display()),
        )
    })
}

struct Hidden {
    path: CString,
    dir: bool,
    /// Directories to make in its tmpfs, then the kept directories bound there (indices into
    /// [`Prepared::kept`]).
    mkdirs: Vec<CString>,
    keeps: Vec<usize>,
}

/// A path bound onto itself (a pin: it cannot be renamed or removed), and made read-only.
struct Fixed {
    path: CString,
    read_only: bool,
}

/// How many directories a sandbox may keep.
const MAX_KEPT: usize = 8;

/// A plan made ready for [`Prepared::apply`] between fork and exec: paths as C strings.
pub struct Prepared {
    cgroup_procs: Option<CString>,
    /// The kept directories: opened before any mount is made, so that each is bound back from
    /// the mount it was on (writable), not from a read-only one made here.
    kept: Vec<CString>,
    /// Pinned and read-only paths, outermost first (a deeper one is mounted on top).
    fixed: Vec<Fixed>,
    hidden: Vec<Hidden>,
    cwd: Option<CString>,
}

impl Prepared {
    /// Prepares `plan` (already [`Plan::resolved`]): `cgroup` is joined before the cgroup tree
    /// is hidden; `cwd` is entered again after the mounts.
    pub fn new(plan: &Plan, cgroup: Option<&Path>, cwd: Option<&Path>) -> io::Result<Prepared> {
        let roots = outermost(&plan.hide, |p| {
            std::fs::metadata(p).ok().map(|m| m.is_dir())
        });
        let mut hidden = Vec::new();
        let mut kept = Vec::new();
        for (root, dir) in roots {
            let mut h = Hidden {
                path: cstring(&root)?,
                dir,
                mkdirs: Vec::new(),
                keeps: Vec::new(),
            };
            for keep in plan
                .keep
                .iter()
                .filter(|k| dir && k.starts_with(&root) && **k != root)
            {
                if !keep.is_dir() {
                    return Err(io::Error::new(
                        io::ErrorKind::NotFound,
                        format!(
                            "{}: the workspace to keep is not a directory",
                            keep.display()
                        ),
                    ));
                }
                for m in mount_points(&root, keep) {
                    h.mkdirs.push(cstring(&m)?);
                }
                h.keeps.push(kept.len());
                kept.push(cstring(keep)?);
            }
            hidden.push(h);
        }
        if kept.len() > MAX_KEPT {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("more than {MAX_KEPT} directories kept in the sandbox"),
            ));
        }
        let mut fixed: Vec<(&PathBuf, bool)> = plan
            .pin
            .iter()
            .map(|p| (p, false))
            .chain(plan.read_only.iter().map(|p| (p, true)))
            .filter(|(p, _)| p.exists())
            .collect();
        fixed.sort_by_key(|(p, ro)| (p.components().count(), *ro));
        Ok(Prepared {
            cgroup_procs: cgroup
                .map(|c| cstring(&c.join("cgroup.procs")))
                .transpose()?,
            kept,
            fixed: fixed
                .into_iter()
                .map(|(p, read_only)| {
                    Ok(Fixed {
                        path: cstring(p)?,
                        read_only,
                    })
                })
                .collect::<io::Result<_>>()?,
            hidden,
            cwd: cwd.map(cstring).transpose()?,
        })
    }

    /// Makes the sandbox for the calling process and its future children. Async-signal-safe
    /// (system calls on memory made before): for a child between fork and exec, which must be
    /// the first process of a PID namespace (its `/proc`) holding CAP_SYS_ADMIN in its user
    /// namespace.
    pub fn apply(&self) -> io::Result<()> {
        // The errno alone crosses the exec: the step is said on stderr (the supervisor's log),
        // with write(2) on static text (nothing allocates between fork and exec).
        let fail = |what: &'static str| -> io::Error {
            let e = io::Error::last_os_error();
            let say = |b: &[u8]| {
                // SAFETY: write(2) of a live buffer to stderr.
                unsafe { libc::write(2, b.as_ptr().cast(), b.len()) };
            };
            say(b"orch: the worker's sandbox failed at ");
            say(what.as_bytes());
            say(b"\n");
            e
        };
        // SAFETY: system calls on C strings owned by `self`.
        unsafe {
            if let Some(procs) = &self.cgroup_procs {
                // Before its tree is hidden; a worker left outside a cgroup is still in its
                // PID namespace (the guard says so when it cannot join).
                let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd >= 0 {
                    libc::write(fd, b"0".as_ptr().cast(), 1);
                    libc::close(fd);
                }
            }
            if libc::unshare(libc::CLONE_NEWNS | libc::CLONE_NEWCGROUP) != 0
                && libc::unshare(libc::CLONE_NEWNS) != 0
            {
                return Err(fail("unshare(CLONE_NEWNS)"));
            }
            // Nothing mounted here reaches the host's namespace.
            if libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) != 0
            {
                return Err(fail("making / private"));
            }
            let cover = libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC;
            // The kept directories, opened in this namespace before anything is mounted (a
            // bind mount's source must be a mount of the caller's namespace, and a writable
            // one: not a read-only bind made below).
            let mut kept = [-1; MAX_KEPT];
            for (i, k) in self.kept.iter().enumerate() {
                kept[i] = libc::open(
                    k.as_ptr(),
                    libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
                );
                if kept[i] < 0 {
                    return Err(fail("opening the workspace"));
                }
            }
            // orch's configuration and code, outermost first, before the covers (which go on
            // top of them).
            for f in &self.fixed {
                if let Err(step) = fixed::mount(&f.path, f.read_only) {
                    return Err(fail(step));
                }
            }
            for h in &self.hidden {
                let r = if h.dir {
                    libc::mount(
                        c"orch-sandbox".as_ptr(),
                        h.path.as_ptr(),
                        c"tmpfs".as_ptr(),
                        cover,
                        c"size=64k,mode=0755".as_ptr().cast(),
                    )
                } else {
                    libc::mount(
                        c"/dev/null".as_ptr(),
                        h.path.as_ptr(),
                        std::ptr::null(),
                        libc::MS_BIND,
                        std::ptr::null(),
                    )
                };
                if r != 0 {
                    return Err(fail("covering a hidden path"));
                }
                for d in &h.mkdirs {
                    if libc::mkdir(d.as_ptr(), 0o755) != 0
                        && *libc::__errno_location() != libc::EEXIST
                    {
                        return Err(fail("making a mount point for the workspace"));
                    }
                }
                for &i in &h.keeps {
                    let target = &self.kept[i];
                    let mut source = [0u8; 32];
                    fd_path(kept[i], &mut source);
                    let r = libc::mount(
                        source.as_ptr().cast(),
                        target.as_ptr(),
                        std::ptr::null(),
                        libc::MS_BIND | libc::MS_REC,
                        std::ptr::null(),
                    );
                    libc::close(kept[i]);
                    if r != 0 {
                        return Err(fail("binding the workspace back"));
                    }
                }
                if h.dir
                    && libc::mount(
                        std::ptr::null(),
                        h.path.as_ptr(),
                        std::ptr::null(),
                        libc::MS_REMOUNT | libc::MS_RDONLY | cover,
                        std::ptr::null(),
                    ) != 0
                {
                    return Err(fail("making a cover read-only"));
                }
            }
            if libc::mount(
                c"proc".as_ptr(),
                c"/proc".as_ptr(),
                c"proc".as_ptr(),
                cover,
                std::ptr::null(),
            ) != 0
            {
                return Err(fail("mounting /proc for the PID namespace"));
            }
            if let Some(cwd) = &self.cwd
                && libc::chdir(cwd.as_ptr()) != 0
            {
                return Err(fail("entering the workspace again"));
            }
        }
        Ok(())
    }
}

/// `/proc/self/fd/<fd>` NUL-terminated in `out`, without allocating.
fn fd_path(fd: i32, out: &mut [u8; 32]) {
    let prefix = b"/proc/self/fd/";
    out[..prefix.len()].copy_from_slice(prefix);
    let mut digits = [0u8; 10];
    let (mut n, mut len) = (fd.max(0) as u32, 0);
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for i in 0..len {
        out[prefix.len() + i] = digits[len - 1 - i];
    }
    out[prefix.len() + len] = 0;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    #[test]
    fn only_the_outermost_existing_paths_are_covered() {
        let exists = |q: &Path| match q.to_str().unwrap() {
            "/missing" => None,
            "/h/.gitconfig" => Some(false),
            _ => Some(true),
        };
        let got = outermost(
            &[
                p("/s/state/forge"),
                p("/s/state"),
                p("/missing"),
                p("/h/.gitconfig"),
                p("/s/state"),
            ],
            exists,
        );
        assert_eq!(
            got,
            vec![(p("/s/state"), true), (p("/h/.gitconfig"), false)]
        );
    }

    #[test]
    fn an_fd_path_is_written_without_allocating() {
        for fd in [0, 7, 10, 12345, i32::MAX] {
            let mut out = [0u8; 32];
            fd_path(fd, &mut out);
            let end = out.iter().position(|b| *b == 0).unwrap();
            assert_eq!(
                std::str::from_utf8(&out[..end]).unwrap(),
                format!("/proc/self/fd/{fd}")
            );
        }
    }

    #[test]
    fn a_kept_directory_gets_each_mount_point_below_its_cover() {
        assert_eq!(
            mount_points(&p("/s/state"), &p("/s/state/workspaces/w-1")),
            vec![p("/s/state/workspaces"), p("/s/state/workspaces/w-1")]
        );
        assert!(mount_points(&p("/s/state"), &p("/elsewhere")).is_empty());
    }

    #[test]
    fn home_paths_are_expanded_and_the_plan_travels_as_arguments() {
        let plan = Plan {
            hide: vec![p("~/.ssh")],
            keep: vec![p("/k")],
            ..Plan::default()
        }
        .resolved(Some(Path::new("/nonexistent-home")));
        assert_eq!(plan.hide, vec![p("/nonexistent-home/.ssh")]);
        let args: Vec<String> = plan
            .args()
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(args, ["--hide", "/nonexistent-home/.ssh", "--keep", "/k"]);
        assert!(
            Plan {
                hide: vec![p("~/x")],
                ..Plan::default()
            }
            .resolved(None)
            .hide
            .is_empty()
        );
    }
}
