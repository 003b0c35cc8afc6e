//! The account workers run as (`worker.user`): looked up, a child switched to it between fork
//! and exec, and the files made for a worker handed over to it.
//!
//! With an account of their own, orch's database, state directory, processes and cgroups are
//! not the worker's: the kernel refuses it what the file modes and uids say (see
//! `tighten_state_dir`), and the worker reaches orch only through its report channel. Switching
//! needs orch to hold CAP_SETUID, CAP_SETGID and CAP_CHOWN (in practice: orch runs as root).
//!
//! **A worker is known by the kernel, never by its word** (ARCHITECTURE.md, invariant 17). Who
//! a process is comes from the kernel: its peer credentials on the report channel
//! (`SO_PEERCRED`: a descendant of the worker's guard, in its life's cgroup, as its uid —
//! `app/channel.rs`), its cgroup and its ancestry (`contain::worker_of_self`: operator commands
//! refuse to run inside a worker; the local forge's `pre-receive` hook lets a worker's push move
//! only its own branch). `ORCH_WORKER_ID` and `ORCH_REPORT_SOCKET` only name things. What a
//! same-user worker can still do around orch — write the database, the local forge's refs — is
//! noticed, not prevented: a supervisor compares its worker's rows with what it last wrote
//! (`supervisor/own_rows.rs`), `spawn` treats a live worker whose lock row vanished without a
//! release as holding its chain, a DONE branch moved afterwards is alerted and never landed,
//! and every load checks the live locks against repos.yaml (`app/drift.rs`); each trespass is a
//! critical alert. With `worker.user` (or a pool, `worker.users`) the kernel prevents it too:
//! this module. orch's state is 0711 / 0600-0700, its processes have a umask of 077, and the
//! worker owns only its workspace (`<state>/workspaces/<id>/`: a clone of its own, its home, its
//! CI guide), handed over between a `handing-over` mark and the mark's removal so a spawner or
//! resumer killed half-way leaves the mark for the next resumer; the tree is walked by file
//! descriptors, nothing in it followed. Its git transport to the local forge and its CI
//! questions go over its channel (`report_wire::Message::Git`, `Message::Ci`). With
//! `worker.sandbox` (an unprivileged orch) the same is kept by a mount namespace instead
//! (`sandbox.rs`, `sandbox/fixed.rs`).

use std::ffi::CString;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// An account by its ids (and the name it was configured by, for messages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
}

/// The guard's and init's argv word that carries the account (`--user <uid>:<gid>`).
pub const USER_ARG: &str = "--user";

impl Account {
    /// Looks `name` up in the user database (a number is taken as a uid, with the primary group
    /// of its entry, or the same number where it has none). Refuses root.
    pub fn lookup(name: &str) -> Result<Account, String> {
        let account = match name.parse::<u32>() {
            Ok(uid) => passwd_by_uid(uid).unwrap_or(Account {
                name: name.to_string(),
                uid,
                gid: uid,
            }),
            Err(_) => passwd_by_name(name).ok_or_else(|| {
                format!(
                    "worker.user: no account named {name:?} on this machine (create it: `useradd --system --user-group --shell /usr/sbin/nologin {name}`)"
                )
            })?,
        };
        if account.uid == 0 {
            return Err(format!(
                "worker.user: {name:?} is root (uid 0); name an unprivileged account"
            ));
        }
        if account.uid == rustix::process::geteuid().as_raw() {
            return Err(format!(
                "worker.user: {name:?} is the account orch itself runs as; workers need one of their own"
            ));
        }
        Ok(account)
    }

    /// `<uid>:<gid>`, as the guard and init take it.
    pub fn arg(&self) -> String {
        format!("{}:{}", self.uid, self.gid)
    }
}

impl Account {
    /// The account with uid `uid` (its name and primary group from the user database; the
    /// number itself where it has no entry).
    pub fn by_uid(uid: u32) -> Account {
        passwd_by_uid(uid).unwrap_or(Account {
            name: uid.to_string(),
            uid,
            gid: uid,
        })
    }
}

/// The uid that owns `path`, if it exists.
pub fn owner_of(path: &Path) -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path).ok().map(|m| m.uid())
}

/// The account for a new worker: of `pool`, the one the fewest live workers run as (`taken`:
/// the uid of each), the first such in the pool's order. Each worker has an account of its own
/// while the pool has one free; past that, accounts are shared as evenly as they can be.
pub fn choose<'a>(pool: &'a [Account], taken: &[u32]) -> Option<&'a Account> {
    pool.iter()
        .min_by_key(|a| taken.iter().filter(|&&t| t == a.uid).count())
}

/// The account a worker whose workspace is `workspace` runs as: the workspace's owner, which
/// must be one of `pool` (configured accounts); None when the workspace is not there.
pub fn of_workspace(workspace: &Path, pool: &[String]) -> Result<Option<Account>, String> {
    let Some(uid) = owner_of(workspace) else {
        return Ok(None);
    };
    let account = Account::by_uid(uid);
    let configured = pool
        .iter()
        .any(|name| name == &account.name || name.parse::<u32>().ok() == Some(uid));
    if !configured {
        return Err(format!(
            "the workspace {} belongs to uid {uid} ({}), which is not one of worker.user(s) {}: orch does not start its worker as an account it was not given",
            workspace.display(),
            account.name,
            pool.join(", ")
        ));
    }
    Ok(Some(account))
}

/// `<uid>:<gid>` back into ids.
pub fn parse_arg(s: &str) -> Option<(u32, u32)> {
    let (u, g) = s.split_once(':')?;
    Some((u.parse().ok()?, g.parse().ok()?))
}

/// Whether this process may switch a child to another account and hand files over to it
/// (CAP_SETUID, CAP_SETGID and CAP_CHOWN in its effective set).
pub fn can_switch() -> bool {
    const CHOWN: u32 = 0;
    const SETGID: u32 = 6;
    const SETUID: u32 = 7;
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return rustix::process::geteuid().is_root();
    };
    let eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0);
    [CHOWN, SETGID, SETUID].iter().all(|b| eff & (1 << b) != 0)
}

/// Why workers cannot run as `name` here, if they cannot: the account is unknown, is root or
/// orch's own, or this process may not switch to it.
pub fn usable(name: &str) -> Result<Account, String> {
    let account = Account::lookup(name)?;
    if !can_switch() {
        return Err(format!(
            "worker.user: {name:?} needs orch to run as root (it starts each worker as that account and hands it its worktree: CAP_SETUID, CAP_SETGID, CAP_CHOWN), and this orch runs as uid {}",
            rustix::process::geteuid().as_raw()
        ));
    }
    // The worker calls orch (`orch report`): the binary must be the account's to run.
    if let Ok(exe) = std::env::current_exe() {
        reachable(&exe, &account)?;
    }
    Ok(account)
}

/// Whether `account` can reach `path` (search every directory on the way, by the mode bits
/// that apply to it: owner, group, others); else the first directory that stops it, named
/// with the command that opens it.
pub fn reachable(path: &Path, account: &Account) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    let path = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut dir = std::path::PathBuf::from("/");
    let mut parts: Vec<_> = path.components().skip(1).collect();
    parts.pop(); // the path itself need not be searchable: it is made for the account
    for part in std::iter::once(None).chain(parts.into_iter().map(Some)) {
        if let Some(p) = part {
            dir.push(p);
        }
        let Ok(meta) = std::fs::metadata(&dir) else {
            return Ok(()); // made later, by orch, with modes it chooses
        };
        let mode = meta.mode();
        let bit = if meta.uid() == account.uid {
            0o100
        } else if meta.gid() == account.gid {
            0o010
        } else {
            0o001
        };
        if mode & bit == 0 {
            return Err(format!(
                "worker.user {}: cannot reach {} — {} (mode {:o}) is not searchable by it (`chmod o+x {}`, or keep the state directory elsewhere)",
                account.name,
                path.display(),
                dir.display(),
                mode & 0o7777,
                dir.display()
            ));
        }
    }
    Ok(())
}

/// Switches the calling (forked, not yet exec'd) process to `uid`/`gid` with no supplementary
/// groups. Only async-signal-safe calls: for `pre_exec`. The parent-death signal is cleared by
/// a change of credentials: set it after this.
///
/// # Safety
/// Call only between fork and exec.
pub unsafe fn become_ids(uid: u32, gid: u32) -> io::Result<()> {
    // SAFETY: plain system calls on no memory but a null list.
    unsafe {
        if libc::setgroups(0, std::ptr::null()) != 0
            || libc::setresgid(gid, gid, gid) != 0
            || libc::setresuid(uid, uid, uid) != 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Hands `path` and everything below it (symbolic links themselves, never their targets) to
/// `uid`/`gid`: what is below a directory before the directory itself, so that a directory
/// of the account's is one handed over whole (a process killed half-way leaves the directory
/// it was in orch's; `app::spawn::hand_over` marks the whole hand-over for the resumer).
///
/// The tree may hold what a process of the account put there (a worker's earlier life, or
/// another worker of the same account, at work while this runs): it is walked by file
/// descriptors, each entry opened without following it and changed through that descriptor,
/// so that no entry swapped for a symbolic link meanwhile leads orch (root) out of the tree;
/// and a regular file with another name somewhere (a hard link the account made to a file it
/// does not own) is left as it is. `path`'s own parents must be orch's.
pub fn chown_tree(path: &Path, uid: u32, gid: u32) -> io::Result<()> {
    use rustix::fs::{Mode, OFlags};
    let top = rustix::fs::open(
        path,
        OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    chown_opened(top, uid, gid, 0)
}

/// How deep [`chown_tree`] goes (two descriptors a level): a tree deeper than a clone ever is
/// was made to exhaust orch's descriptors or stack, and its hand-over fails, naming it.
const CHOWN_DEPTH: usize = 128;

/// [`chown_tree`] of the entry `fd` (an `O_PATH` descriptor of it, not followed), `depth`
/// levels below the top.
fn chown_opened(fd: std::os::fd::OwnedFd, uid: u32, gid: u32, depth: usize) -> io::Result<()> {
    use rustix::fs::{AtFlags, FileType, Mode, OFlags};
    use rustix::io::Errno;
    let st = rustix::fs::fstat(&fd)?;
    let theirs = st.st_uid == uid && st.st_gid == gid;
    match FileType::from_raw_mode(st.st_mode) {
        FileType::Directory => {
            if depth >= CHOWN_DEPTH {
                return Err(io::Error::other(format!(
                    "a tree deeper than {CHOWN_DEPTH} directories is not handed over"
                )));
            }
            let dir = match rustix::fs::openat(
                &fd,
                ".",
                OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            ) {
                Ok(d) => d,
                Err(Errno::NOENT) => return Ok(()), // removed meanwhile
                Err(e) => return Err(e.into()),
            };
            for entry in rustix::fs::Dir::new(dir)? {
                let entry = entry?;
                let name = entry.file_name();
                if name.to_bytes() == b"." || name.to_bytes() == b".." {
                    continue;
                }
                let child = match rustix::fs::openat(
                    &fd,
                    name,
                    OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                ) {
                    Ok(child) => child,
                    Err(Errno::NOENT) => continue, // removed meanwhile
                    Err(e) => return Err(e.into()),
                };
                chown_opened(child, uid, gid, depth + 1)?;
            }
        }
        // Another name of it may be outside the tree (a hard link the account made to a file,
        // a device or a link it does not own): never handed over. (The account's already,
        // its own hard links among them: nothing to do, below.)
        _ if st.st_nlink > 1 && !theirs => {
            tracing::warn!(
                "an entry with {} names in a tree handed over to uid {uid} is left as it is",
                st.st_nlink
            );
            return Ok(());
        }
        _ => {}
    }
    if theirs {
        return Ok(());
    }
    rustix::fs::chownat(
        &fd,
        "",
        Some(rustix::fs::Uid::from_raw(uid)),
        Some(rustix::fs::Gid::from_raw(gid)),
        AtFlags::EMPTY_PATH,
    )?;
    Ok(())
}

/// Removes `base/rel` (a path of plain names) where a process of a worker's account may have
/// put links on the way: each directory is opened without following it, the last name removed
/// through its directory's descriptor (a link is removed itself, never what it points at).
/// False when something on the way is missing or not a directory. `base`'s parents must be
/// orch's.
pub fn remove_inside(base: &Path, rel: &str) -> io::Result<bool> {
    use rustix::fs::{AtFlags, Mode, OFlags};
    use rustix::io::Errno;
    let dir_flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut dir = match rustix::fs::open(base, dir_flags, Mode::empty()) {
        Ok(d) => d,
        Err(Errno::NOENT | Errno::NOTDIR | Errno::LOOP) => return Ok(false),
        Err(e) => return Err(e.into()),
    };
    let names: Vec<&str> = rel.split('/').filter(|n| !n.is_empty()).collect();
    let Some((last, on_the_way)) = names.split_last() else {
        return Ok(false);
    };
    for name in on_the_way {
        if *name == ".." || *name == "." {
            return Ok(false);
        }
        dir = match rustix::fs::openat(&dir, *name, dir_flags, Mode::empty()) {
            Ok(d) => d,
            Err(Errno::NOENT | Errno::NOTDIR | Errno::LOOP) => return Ok(false),
            Err(e) => return Err(e.into()),
        };
    }
    match rustix::fs::unlinkat(&dir, *last, AtFlags::empty()) {
        Ok(()) => Ok(true),
        Err(Errno::NOENT | Errno::ISDIR) => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Writes `content` as `dir/name` (mode 0600), in a directory a process of a worker's account
/// may write in at the same time: whatever is at that name (a symbolic link to a file of
/// orch's, say) is removed, never written through, and the file is made new.
pub fn write_new_in(dir: &Path, name: &str, content: &[u8]) -> io::Result<()> {
    use rustix::fs::{AtFlags, Mode, OFlags};
    use rustix::io::Errno;
    use std::io::Write;
    let d = rustix::fs::open(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    for _ in 0..3 {
        match rustix::fs::unlinkat(&d, name, AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => {}
            Err(e) => return Err(e.into()),
        }
        match rustix::fs::openat(
            &d,
            name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        ) {
            Ok(fd) => return std::fs::File::from(fd).write_all(content),
            Err(Errno::EXIST) => continue, // made again meanwhile
            Err(e) => return Err(e.into()),
        }
    }
    Err(io::Error::other(format!(
        "{}: made again by someone else each time it was removed",
        dir.join(name).display()
    )))
}

/// Sets `path`'s mode (a missing path is no error: nothing to protect yet).
pub fn set_mode(path: &Path, mode: u32) -> io::Result<()> {
    match std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

fn passwd_by_name(name: &str) -> Option<Account> {
    let c = CString::new(name).ok()?;
    lookup_with(&|pwd, buf, len, out| {
        // SAFETY: valid C string, passwd struct, buffer of `len` bytes and result pointer.
        unsafe { libc::getpwnam_r(c.as_ptr(), pwd, buf, len, out) }
    })
}

fn passwd_by_uid(uid: u32) -> Option<Account> {
    lookup_with(&|pwd, buf, len, out| {
        // SAFETY: as above.
        unsafe { libc::getpwuid_r(uid, pwd, buf, len, out) }
    })
}

type Getpw<'a> = dyn Fn(*mut libc::passwd, *mut libc::c_char, libc::size_t, *mut *mut libc::passwd) -> libc::c_int
    + 'a;

fn lookup_with(call: &Getpw<'_>) -> Option<Account> {
    let mut buf = vec![0 as libc::c_char; 16 * 1024];
    // SAFETY: a zeroed passwd struct is a valid out-parameter.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut out: *mut libc::passwd = std::ptr::null_mut();
    let rc = call(&mut pwd, buf.as_mut_ptr(), buf.len(), &mut out);
    if rc != 0 || out.is_null() {
        return None;
    }
    // SAFETY: on success pw_name points into `buf`, NUL-terminated.
    let name = unsafe { std::ffi::CStr::from_ptr(pwd.pw_name) }
        .to_string_lossy()
        .into_owned();
    Some(Account {
        name,
        uid: pwd.pw_uid,
        gid: pwd.pw_gid,
    })
}

/// Where a worker's own files live when it runs as an account of its own: under the state
/// directory, one directory per worker, owned by the account (its clone and its home).
pub const WORKSPACES: &str = "workspaces";

/// Where a worker of an account of its own keeps what is its: its clone (`worktree`), its home
/// (`home`) and its CI guide.
pub fn workspace_dir(state_dir: &Path, id: &str) -> PathBuf {
    state_dir.join(WORKSPACES).join(id)
}

/// The worker's home directory inside its workspace (agents keep their configuration there).
pub fn worker_home(worktree: &Path) -> PathBuf {
    worktree.with_file_name("home")
}

/// The CI guide a worker of another account reads (its session directory is orch's).
pub fn worker_ci_guide(worktree: &Path) -> PathBuf {
    worktree.with_file_name("ci-guide.md")
}

/// The handoff file a worker of another account reads (`app::supervisor::HANDOFF_FILE`).
pub fn worker_handoff(worktree: &Path) -> PathBuf {
    worktree.with_file_name("handoff.md")
}

/// Gives the state directory the modes that keep a worker of another account out of orch's
/// files: the directory itself searchable but not listable (a worker reaches its own
/// workspace by its path), everything of orch's in it private. Called before a worker of
/// another account starts; idempotent.
pub fn tighten_state_dir(state_dir: &Path) -> io::Result<()> {
    // Searchable: a worker's path to its workspace, a CI job's (run as the worker's account)
    // to its checkout under forge/work; nothing else.
    tighten(state_dir, &[WORKSPACES, "forge"])?;
    tighten(&state_dir.join("forge"), &["work"])
}

/// `dir` searchable, the entries named in `open` searchable, every other entry private.
fn tighten(dir: &Path, open: &[&str]) -> io::Result<()> {
    if !dir.is_dir() {
        return Ok(());
    }
    set_mode(dir, 0o711)?;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let meta = std::fs::symlink_metadata(&path)?;
        if meta.file_type().is_symlink() {
            continue;
        }
        let searchable = entry
            .file_name()
            .to_str()
            .is_some_and(|n| open.contains(&n));
        let mode = match () {
            _ if searchable => 0o711,
            _ if meta.is_dir() => 0o700,
            _ => 0o600,
        };
        set_mode(&path, mode)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    /// What a process of the account can leave in a tree orch (root) hands over: a symbolic
    /// link to a file of orch's, a hard link to one, a link to a directory of orch's. Only the
    /// tree's own entries change owner; what they point at stays orch's.
    #[test]
    fn a_tree_handed_over_leads_nowhere_outside_it() {
        if !rustix::process::geteuid().is_root() {
            eprintln!("skipped: handing a tree over needs root");
            return;
        }
        let root = tempfile::tempdir().unwrap();
        let outside = root.path().join("outside");
        std::fs::create_dir(&outside).unwrap();
        std::fs::write(outside.join("secret"), "orch's").unwrap();
        let tree = root.path().join("tree");
        std::fs::create_dir_all(tree.join("a/b")).unwrap();
        std::fs::write(tree.join("a/b/file"), "the worker's").unwrap();
        std::os::unix::fs::symlink(outside.join("secret"), tree.join("a/to-file")).unwrap();
        std::os::unix::fs::symlink(&outside, tree.join("a/to-dir")).unwrap();
        std::fs::hard_link(outside.join("secret"), tree.join("a/hard")).unwrap();
        let (uid, gid) = (3_999_991, 3_999_991);
        chown_tree(&tree, uid, gid).unwrap();
        for mine in ["", "a", "a/b", "a/b/file", "a/to-file", "a/to-dir"] {
            let m = std::fs::symlink_metadata(tree.join(mine)).unwrap();
            assert_eq!((m.uid(), m.gid()), (uid, gid), "{mine}");
        }
        for orchs in [outside.clone(), outside.join("secret")] {
            let m = std::fs::symlink_metadata(&orchs).unwrap();
            assert_eq!(m.uid(), 0, "{}", orchs.display());
        }
    }

    /// A lock removed inside a tree the account controls: a directory on the way swapped for
    /// a link leads nowhere (nothing removed there), a link at the last name is removed itself.
    #[test]
    fn a_file_removed_inside_a_workspace_follows_no_link() {
        let root = tempfile::tempdir().unwrap();
        let orchs = root.path().join("orchs");
        std::fs::create_dir_all(orchs.join("refs")).unwrap();
        std::fs::write(orchs.join("refs/x.lock"), "").unwrap();
        std::fs::write(orchs.join("index.lock"), "").unwrap();
        let ws = root.path().join("ws");
        std::fs::create_dir_all(ws.join("worktree/.git")).unwrap();
        std::os::unix::fs::symlink(orchs.join("refs"), ws.join("worktree/.git/refs")).unwrap();
        std::os::unix::fs::symlink(
            orchs.join("index.lock"),
            ws.join("worktree/.git/index.lock"),
        )
        .unwrap();
        assert!(!remove_inside(&ws, "worktree/.git/refs/x.lock").unwrap());
        assert!(orchs.join("refs/x.lock").exists());
        assert!(remove_inside(&ws, "worktree/.git/index.lock").unwrap());
        assert!(
            orchs.join("index.lock").exists(),
            "the link removed, not its target"
        );
        assert!(!ws.join("worktree/.git/index.lock").exists());
        std::fs::write(ws.join("worktree/.git/HEAD.lock"), "").unwrap();
        assert!(remove_inside(&ws, "worktree/.git/HEAD.lock").unwrap());
        assert!(!remove_inside(&ws, "worktree/.git/HEAD.lock").unwrap());
        assert!(!remove_inside(&ws, "worktree/../../orchs/index.lock").unwrap());
    }

    /// A file orch writes where the account may write too is made new: a symbolic link the
    /// account put at its name is replaced, never written through.
    #[test]
    fn a_file_written_into_a_workspace_replaces_a_link_at_its_name() {
        let root = tempfile::tempdir().unwrap();
        let target = root.path().join("orchs.txt");
        std::fs::write(&target, "orch's").unwrap();
        let ws = root.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        std::os::unix::fs::symlink(&target, ws.join("ci-guide.md")).unwrap();
        write_new_in(&ws, "ci-guide.md", b"the guide").unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "orch's");
        let m = std::fs::symlink_metadata(ws.join("ci-guide.md")).unwrap();
        assert!(m.is_file());
        assert_eq!(m.mode() & 0o777, 0o600);
        assert_eq!(
            std::fs::read_to_string(ws.join("ci-guide.md")).unwrap(),
            "the guide"
        );
        // Written again over its own earlier self.
        write_new_in(&ws, "ci-guide.md", b"again").unwrap();
        assert_eq!(
            std::fs::read_to_string(ws.join("ci-guide.md")).unwrap(),
            "again"
        );
    }

    #[test]
    fn each_worker_gets_the_least_used_account_of_the_pool() {
        let a = |uid| Account {
            name: format!("w{uid}"),
            uid,
            gid: uid,
        };
        let pool = [a(1001), a(1002), a(1003)];
        assert_eq!(choose(&pool, &[]).unwrap().uid, 1001);
        assert_eq!(choose(&pool, &[1001]).unwrap().uid, 1002);
        assert_eq!(choose(&pool, &[1001, 1003]).unwrap().uid, 1002);
        // All taken: shared, evenly.
        assert_eq!(choose(&pool, &[1001, 1002, 1003, 1001]).unwrap().uid, 1002);
        assert!(choose(&[], &[]).is_none());
    }

    #[test]
    fn ids_travel_as_uid_colon_gid() {
        let a = Account {
            name: "w".into(),
            uid: 1234,
            gid: 99,
        };
        assert_eq!(parse_arg(&a.arg()), Some((1234, 99)));
        assert_eq!(parse_arg("x:1"), None);
        assert_eq!(parse_arg("1"), None);
    }

    #[test]
    fn root_and_unknown_accounts_are_refused_by_name() {
        assert!(Account::lookup("root").unwrap_err().contains("root"));
        assert!(Account::lookup("0").unwrap_err().contains("root"));
        let e = Account::lookup("no-such-account-orch").unwrap_err();
        assert!(e.contains("useradd"), "{e}");
    }

    #[test]
    fn a_directory_the_account_cannot_search_is_named() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let closed = tmp.path().join("closed");
        std::fs::create_dir_all(closed.join("inner")).unwrap();
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
        std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o700)).unwrap();
        let stranger = Account {
            name: "stranger".into(),
            uid: 3_999_998,
            gid: 3_999_998,
        };
        let e = reachable(&closed.join("inner").join("ws"), &stranger).unwrap_err();
        assert!(
            e.contains(&closed.display().to_string()) && e.contains("chmod o+x"),
            "{e}"
        );
        // Its own directory is its to search; a path not made yet is orch's to make.
        assert!(reachable(&tmp.path().join("ws"), &stranger).is_ok());
        assert!(reachable(&tmp.path().join("new/deeper/ws"), &stranger).is_ok());
    }

    #[test]
    fn a_numeric_account_without_an_entry_is_its_own_group() {
        let a = Account::lookup("3999999").unwrap();
        assert_eq!((a.uid, a.gid), (3_999_999, 3_999_999));
    }
}
