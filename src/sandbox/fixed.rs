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
//! - orch's binary;
//! - each alert command sink's program (its first word, found on the PATH as orch finds it)
//!   and every other word of its argv that names a file (the script given to an interpreter);
//! - each directory of orch's PATH (a program dropped there would shadow what the operator and
//!   the sinks run).
//!
//! Only what orch's user could change needs it (a root-owned `/usr/bin` does not). And since
//! a path is only as fixed as the directories leading to it — `mv ~/org ~/old; mkdir ~/org`
//! would put a repos.yaml of the worker's where the operator's was — each directory on the
//! way whose parent orch's user may write is pinned: bound onto itself, a mount point in the
//! worker's namespace, which rename(2) and rmdir(2) refuse (EBUSY).

use std::path::{Path, PathBuf};

/// What orch reads as configuration or runs as its code, for `config`'s organisation:
/// resolved as the file system resolves them, those that exist. `contract`: the contract's
/// file when it is not the built-in one; `path`: orch's PATH.
pub fn inputs(
    config: &crate::config::Config,
    contract: Option<&Path>,
    path: &[PathBuf],
) -> Vec<PathBuf> {
    let root = config.root().to_path_buf();
    let mut out = vec![root.clone()];
    out.extend(contract.map(Path::to_path_buf));
    out.extend(std::env::current_exe().ok());
    let on_path = |program: &str| {
        path.iter()
            .filter(|d| d.is_absolute())
            .map(|d| d.join(program))
            .find(|p| p.is_file())
    };
    for sink in &config.alerts.sinks {
        let crate::config::SinkKind::Command { argv } = &sink.kind else {
            continue;
        };
        let Some((program, args)) = argv.split_first() else {
            continue;
        };
        if program.contains('/') {
            out.push(root.join(program));
        } else {
            out.extend(on_path(program));
        }
        out.extend(
            args.iter()
                .map(PathBuf::from)
                .filter(|a| a.is_absolute() && a.is_file()),
        );
    }
    out.extend(path.iter().filter(|d| d.is_absolute()).cloned());
    out.into_iter()
        .map(|p| crate::config::resolve_on_disk(&p))
        .filter(|p| p.exists())
        .collect()
}

/// Whether orch's user (this process's effective uid) could write into `path`, or rename or
/// remove what is in it: its owner, or a mode that lets a group or everyone write (counted
/// whatever the group: erring towards a pin too many).
pub fn could_write(path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path)
        .is_ok_and(|m| m.uid() == rustix::process::geteuid().as_raw() || m.mode() & 0o022 != 0)
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
    fn nothing_is_fixed_where_orchs_user_can_change_nothing() {
        let (ro, pin) = protect(&[p("/srv/org"), p("/usr/local/bin/orch")], |_| false);
        assert!(ro.is_empty() && pin.is_empty(), "{ro:?} {pin:?}");
    }
}
