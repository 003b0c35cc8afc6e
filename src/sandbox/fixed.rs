//! What a sandboxed worker may read but never change (issue 34). It runs as orch's own user,
//! so whatever orch's user may write outside its hidden paths is its to write — and what orch
//! reads as its configuration or runs as its own code would then run outside the sandbox, at
//! the operator's next command: an alert command sink appended to repos.yaml, a line added to
//! a sink's script, a contract, a binary named `orch` earlier on the PATH.
//!
//! So the sandbox makes read-only, with everything below them:
//!
//! - the organisation's directory (repos.yaml's: repos.yaml, `contracts/` and its prompt
//!   templates — or the place one would be created —, wave files and plans kept beside them);
//! - the contract when it is a file elsewhere (`--contract`, `ORCH_CONTRACT`);
//! - the wave files recorded in the store, wherever they are (every tick reads its file
//!   again: a task added there would be started);
//! - orch's binary;
//! - each alert command sink's program (its first word, found on the PATH as orch finds it)
//!   and every other word of its argv that names a file (the script given to an interpreter);
//! - each directory of orch's PATH (a program dropped there would shadow what the operator and
//!   the sinks run).
//!
//! A symlink on the way to one of them, in a directory orch's user may write, is refused
//! instead ([`redirectable`]): a mount fixes what it points at, not where it points.
//!
//! Only what orch's user could change needs it (a root-owned `/usr/bin` does not). And since
//! a path is only as fixed as the directories leading to it — `mv ~/org ~/old; mkdir ~/org`
//! would put a repos.yaml of the worker's where the operator's was — each directory on the
//! way whose parent orch's user may write is pinned: bound onto itself, a mount point in the
//! worker's namespace, which rename(2) and rmdir(2) refuse (EBUSY).

use std::path::{Path, PathBuf};

/// The files of `config`'s organisation orch reads as configuration or runs, as they are
/// named (symlinks unresolved), each with what it is: repos.yaml, the contract (`contract`:
/// its file, when it is not the built-in one), each alert command's program when named by a
/// path, and the files its argv names.
pub fn named(config: &crate::config::Config, contract: Option<&Path>) -> Vec<(String, PathBuf)> {
    let root = config.root();
    let mut out = vec![("repos.yaml".to_string(), config.file.clone())];
    out.extend(contract.map(|c| ("the contract".to_string(), c.to_path_buf())));
    for sink in &config.alerts.sinks {
        let crate::config::SinkKind::Command { argv } = &sink.kind else {
            continue;
        };
        let Some((program, args)) = argv.split_first() else {
            continue;
        };
        let what = format!("alert sink {}", sink.label);
        if program.contains('/') {
            out.push((format!("{what}'s program"), root.join(program)));
        }
        out.extend(
            args.iter()
                .map(PathBuf::from)
                .filter(|a| a.is_absolute() && a.is_file())
                .map(|a| (format!("a file {what} names"), a)),
        );
    }
    out
}

/// What orch reads as configuration or runs as its code, for `config`'s organisation:
/// resolved as the file system resolves them, those that exist. `contract`: the contract's
/// file when it is not the built-in one; `waves`: the wave files recorded (each tick reads
/// its file again); `path`: orch's PATH.
pub fn inputs(
    config: &crate::config::Config,
    contract: Option<&Path>,
    waves: &[PathBuf],
    path: &[PathBuf],
) -> Vec<PathBuf> {
    let mut out = vec![config.root().to_path_buf()];
    out.extend(named(config, contract).into_iter().map(|(_, p)| p));
    out.extend(waves.iter().map(|w| config.root().join(w)));
    out.extend(std::env::current_exe().ok());
    let on_path = |program: &str| {
        path.iter()
            .filter(|d| d.is_absolute())
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    };
    for sink in &config.alerts.sinks {
        if let crate::config::SinkKind::Command { argv } = &sink.kind
            && let Some(program) = argv.first().filter(|p| !p.contains('/'))
        {
            out.extend(on_path(program));
        }
    }
    out.extend(path.iter().filter(|d| d.is_absolute()).cloned());
    out.into_iter()
        .map(|p| crate::config::resolve_on_disk(&p))
        .filter(|p| p.exists())
        .collect()
}

/// The symlink on the way to `path` (as named) that orch's user could replace — one in a
/// directory it may write — if any. The read-only mounts fix what the symlink points at, not
/// the symlink: a sandboxed worker could point it at a file of its own.
pub fn replaceable_symlink(path: &Path, could_write: impl Fn(&Path) -> bool) -> Option<PathBuf> {
    let path = std::path::absolute(path).ok()?;
    let mut at = PathBuf::new();
    for c in path.components() {
        at.push(c);
        let Some(parent) = at.parent() else {
            continue;
        };
        if std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink())
            && could_write(parent)
        {
            return Some(at);
        }
    }
    None
}

/// Why a sandboxed worker could still redirect what orch reads as its configuration or runs
/// (a replaceable symlink on the way to one of [`named`]), one message per file: naming the
/// file, the symlink and what to do. Empty when it cannot.
pub fn redirectable(config: &crate::config::Config, contract: Option<&Path>) -> Vec<String> {
    named(config, contract)
        .into_iter()
        .filter_map(|(what, path)| {
            let link = replaceable_symlink(&path, could_write)?;
            Some(format!(
                "worker.sandbox: {what} {} is reached through the symlink {}, in a directory orch's user may write: a sandboxed worker runs as orch's user and could point it at a file of its own, which orch would read or run outside the sandbox; name the real path ({}) instead, or keep the symlink where orch's user cannot write",
                path.display(),
                link.display(),
                crate::config::resolve_on_disk(&path).display()
            ))
        })
        .collect()
}

/// Whether orch's user (this process's effective uid and groups) could write into `path`, or
/// rename or remove what is in it: its owner (who may change its mode), a member of a group
/// that may write, or anyone when everyone may (a sticky directory counted too: erring towards
/// a pin too many).
pub fn could_write(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(m) = std::fs::metadata(path) else {
        return false;
    };
    let member = |gid: u32| {
        gid == rustix::process::getegid().as_raw()
            || rustix::process::getgroups().is_ok_and(|gs| gs.iter().any(|g| g.as_raw() == gid))
    };
    m.uid() == rustix::process::geteuid().as_raw()
        || (m.mode() & 0o020 != 0 && member(m.gid()))
        || m.mode() & 0o002 != 0
}

/// Whether the account `uid`/`gid` — as orch starts a worker of `worker.users`: no
/// supplementary groups — may write `path` (or, owning it, change its mode to).
pub fn writable_by(path: &Path, uid: u32, gid: u32) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(m) = std::fs::metadata(path) else {
        return false;
    };
    let bit = if m.uid() == uid {
        return true;
    } else if m.gid() == gid {
        0o020
    } else {
        0o002
    };
    uid == 0 || m.mode() & bit != 0
}

/// Why a worker of the account `uid`/`gid` (`worker.users`) could change one of `inputs` —
/// what orch reads as its configuration or runs as its code ([`inputs`]) — so that the
/// operator's next command would read or run the worker's: the path itself writable by it, or
/// a directory above it where it may rename or replace entries (writable; a sticky one only
/// when it owns the entry or the directory). `None` when it can change none of them.
pub fn changeable_by(inputs: &[PathBuf], uid: u32, gid: u32) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let owner = |p: &Path| std::fs::symlink_metadata(p).map(|m| m.uid()).ok();
    for p in inputs {
        if writable_by(p, uid, gid) {
            return Some(format!("{} is writable by it", p.display()));
        }
        for (entry, dir) in p.ancestors().zip(p.ancestors().skip(1)) {
            let sticky = std::fs::metadata(dir).is_ok_and(|m| m.mode() & 0o1000 != 0);
            if writable_by(dir, uid, gid)
                && (!sticky || owner(entry) == Some(uid) || owner(dir) == Some(uid))
            {
                return Some(format!(
                    "{} lies in {}, where it may rename or replace what is there",
                    p.display(),
                    dir.display()
                ));
            }
        }
    }
    None
}

/// Of `inputs`, the paths to make read-only — those orch's user could change: itself or a
/// directory above it writable — without one inside another; and the directories to pin —
/// each above a read-only path whose parent orch's user could write, not already inside a
/// read-only directory (where nothing can be renamed). `/` is never pinned.
pub fn protect(
    inputs: &[PathBuf],
    could_write: impl Fn(&Path) -> bool,
) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let changeable = |p: &Path| p.ancestors().any(&could_write);
    let mut read_only: Vec<PathBuf> = Vec::new();
    let mut sorted: Vec<&PathBuf> = inputs.iter().collect();
    sorted.sort_by_key(|p| p.components().count());
    for p in sorted {
        if changeable(p) && !read_only.iter().any(|r| p.starts_with(r)) {
            read_only.push(p.clone());
        }
    }
    let mut pin: Vec<PathBuf> = Vec::new();
    for r in &read_only {
        for a in r.ancestors().skip(1) {
            let Some(parent) = a.parent() else {
                break; // `/`
            };
            if could_write(parent)
                && !read_only.iter().any(|o| a.starts_with(o))
                && !pin.iter().any(|q| q == a)
            {
                pin.push(a.to_path_buf());
            }
        }
        // The read-only path itself is a mount point too: nothing renames it either.
    }
    pin.sort_by_key(|p| p.components().count());
    (read_only, pin)
}

/// Binds `path` onto itself (a mount point in this namespace: rename(2), unlink(2) and
/// rmdir(2) of it fail with EBUSY), with what is mounted below it, and makes it read-only when
/// `read_only`. The step that failed, for [`super::Prepared::apply`] to name (errno set).
///
/// # Safety
/// System calls only (async-signal-safe); for a process holding CAP_SYS_ADMIN over its mount
/// namespace.
pub(super) unsafe fn mount(path: &std::ffi::CStr, read_only: bool) -> Result<(), &'static str> {
    // SAFETY: mount(2) of a live path onto itself.
    let bound = unsafe {
        libc::mount(
            path.as_ptr(),
            path.as_ptr(),
            std::ptr::null(),
            libc::MS_BIND | libc::MS_REC,
            std::ptr::null(),
        )
    };
    if bound != 0 {
        return Err("binding orch's configuration onto itself");
    }
    // SAFETY: as this function's.
    if read_only && !unsafe { self::read_only(path) } {
        return Err("making orch's configuration read-only");
    }
    Ok(())
}

/// Makes the mount at `path` read-only, with every mount below it (`mount_setattr`, Linux
/// 5.12); before that, the mount at `path` alone, keeping the flags it has (a user namespace
/// may not clear the ones it inherited locked). Async-signal-safe.
///
/// # Safety
/// System calls only; for a process holding CAP_SYS_ADMIN over its mount namespace.
unsafe fn read_only(path: &std::ffi::CStr) -> bool {
    #[repr(C)]
    struct MountAttr {
        attr_set: u64,
        attr_clr: u64,
        propagation: u64,
        userns_fd: u64,
    }
    const MOUNT_ATTR_RDONLY: u64 = 0x1;
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_RDONLY,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: mount_setattr(2) with a live path and attribute block of the size given.
    unsafe {
        if libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            path.as_ptr(),
            libc::AT_RECURSIVE as libc::c_uint,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        ) == 0
        {
            return true;
        }
        if *libc::__errno_location() != libc::ENOSYS {
            return false;
        }
        let mut st: libc::statvfs = std::mem::zeroed();
        if libc::statvfs(path.as_ptr(), &mut st) != 0 {
            return false;
        }
        let mut flags = libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY;
        for (has, keep) in [
            (libc::ST_NOSUID, libc::MS_NOSUID),
            (libc::ST_NODEV, libc::MS_NODEV),
            (libc::ST_NOEXEC, libc::MS_NOEXEC),
            (libc::ST_NOATIME, libc::MS_NOATIME),
            (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
            (libc::ST_RELATIME, libc::MS_RELATIME),
        ] {
            if st.f_flag & has != 0 {
                flags |= keep;
            }
        }
        libc::mount(
            std::ptr::null(),
            path.as_ptr(),
            std::ptr::null(),
            flags,
            std::ptr::null(),
        ) == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    /// orch's user owns /home/op and what is below it; /tmp is everyone's.
    fn op_writes(path: &Path) -> bool {
        path.starts_with("/home/op") || path == Path::new("/tmp")
    }

    #[test]
    fn what_orchs_user_could_change_is_read_only_and_the_way_to_it_pinned() {
        let (ro, pin) = protect(
            &[
                p("/home/op/org"),
                p("/home/op/org/contracts/worker-completion.yaml"),
                p("/home/op/bin/notify.sh"),
                p("/usr/bin/notify-send"),
                p("/tmp/alerts/hook.sh"),
            ],
            op_writes,
        );
        // Outermost first; the contract inside the organisation's directory is covered by it;
        // root's /usr/bin/notify-send needs nothing.
        assert_eq!(
            ro,
            [
                p("/home/op/org"),
                p("/tmp/alerts/hook.sh"),
                p("/home/op/bin/notify.sh")
            ]
        );
        // /home/op's parent is root's: it cannot be renamed; /home/op/bin can (and with it
        // the script); /tmp/alerts too (in /tmp, everyone's).
        assert_eq!(pin, [p("/tmp/alerts"), p("/home/op/bin")]);
    }

    #[test]
    fn a_symlink_orchs_user_could_replace_is_found_on_the_way() {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        let real = base.join("orgs/acme");
        std::fs::create_dir_all(&real).unwrap();
        std::fs::write(real.join("repos.yaml"), "repos: {}\n").unwrap();
        std::os::unix::fs::symlink(&real, base.join("current")).unwrap();
        let via = base.join("current/repos.yaml");
        assert_eq!(
            replaceable_symlink(&via, |_| true),
            Some(base.join("current"))
        );
        assert_eq!(replaceable_symlink(&via, |_| false), None);
        assert_eq!(
            replaceable_symlink(&real.join("repos.yaml"), |_| true),
            None
        );
    }

    #[test]
    fn nothing_is_fixed_where_orchs_user_can_change_nothing() {
        let (ro, pin) = protect(&[p("/srv/org"), p("/usr/local/bin/orch")], |_| false);
        assert!(ro.is_empty() && pin.is_empty(), "{ro:?} {pin:?}");
    }
}
