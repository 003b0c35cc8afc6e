//! Git for workers: worktrees and branches, resolving and verifying pushed SHAs, what a
//! worker changed. git2 for everything local; the `git` CLI for talking to remotes (it brings
//! credentials, ssh config and proxies for free).

use git2::{BranchType, Oid, Repository, WorktreeAddOptions};
use std::path::Path;
use std::process::Command;

#[derive(Debug, thiserror::Error)]
pub enum GitError {
    #[error("{path}: {message}")]
    Repo { path: String, message: String },
    #[error("git {args} failed in {dir}: {stderr}")]
    Cli {
        args: String,
        dir: String,
        stderr: String,
    },
}

fn open(path: &Path) -> Result<Repository, GitError> {
    Repository::open(path).map_err(|e| GitError::Repo {
        path: path.display().to_string(),
        message: format!("not a git repository ({})", e.message()),
    })
}

fn err(path: &Path, e: git2::Error) -> GitError {
    GitError::Repo {
        path: path.display().to_string(),
        message: e.message().to_string(),
    }
}

/// The variables a `git` run by orch keeps from orch's environment: where programs, the home
/// directory and the user's ssh agent and proxies are. Everything else is dropped — the forge
/// token above all, and variables that would redirect git (`GIT_DIR`, set when orch runs
/// inside a hook).
const GIT_ENV_KEPT: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "TMPDIR",
    "SSH_AUTH_SOCK",
    "GIT_SSH_COMMAND",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_NOSYSTEM",
    "XDG_CONFIG_HOME",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "GIT_SSL_CAINFO",
];

/// Configuration a worker can write (worktrees share their clone's `.git/config`) but must not
/// turn into a command orch runs: hooks, the file-system monitor, the ssh and git:// proxy
/// programs, `ext::` remotes, askpass and alternate-refs programs. Command-line `-c` values
/// win over every config file. (`remote.<name>.uploadpack` is overridden per fetch; credential
/// helpers and `core.sshCommand` are taken from the user's own configuration, not the
/// repository's: see [`user_level`].)
const GIT_FIXED_CONFIG: &[(&str, &str)] = &[
    ("core.hooksPath", "/dev/null"),
    ("core.fsmonitor", "false"),
    ("core.gitProxy", ""),
    ("core.askPass", ""),
    ("core.alternateRefsCommand", "true"),
    ("protocol.ext.allow", "never"),
    ("core.pager", "cat"),
    // A worker of another account owns its clone; what would make its configuration dangerous
    // to orch's git is fixed above, so its ownership is no reason to refuse.
    ("safe.directory", "*"),
];

/// A `git` command for `dir` that runs nothing a worker configured: a scrubbed environment
/// (no forge token can reach a hook, or anything else) and fixed configuration.
fn git_command(dir: &Path) -> Command {
    let mut cmd = scrubbed_git();
    cmd.env("GIT_TERMINAL_PROMPT", "0")
        // `refs/replace/*` would let a worker give a commit other parents: the ancestry
        // checks of a push must see the real graph.
        .env("GIT_NO_REPLACE_OBJECTS", "1")
        .env("LC_ALL", "C")
        .arg("-C")
        .arg(dir);
    for (k, v) in GIT_FIXED_CONFIG {
        cmd.arg("-c").arg(format!("{k}={v}"));
    }
    let user = user_level();
    cmd.arg("-c")
        .arg(format!("core.sshCommand={}", user.ssh_command));
    // An empty value resets the list; then the user's own helpers, in order.
    cmd.arg("-c").arg("credential.helper=");
    for h in &user.credential_helpers {
        cmd.arg("-c").arg(format!("credential.helper={h}"));
    }
    cmd.stdin(std::process::Stdio::null());
    cmd
}

/// What orch takes from the user's own git configuration (global and system files, which a
/// worker's repository cannot change) for the settings a repository's config must not set.
struct UserLevel {
    ssh_command: String,
    credential_helpers: Vec<String>,
}

fn user_level() -> &'static UserLevel {
    static USER: std::sync::OnceLock<UserLevel> = std::sync::OnceLock::new();
    USER.get_or_init(|| {
        let cfg = git2::Config::open_default().ok();
        let ssh_command = cfg
            .as_ref()
            .and_then(|c| c.get_string("core.sshCommand").ok())
            .unwrap_or_else(|| "ssh".to_string());
        let mut credential_helpers = Vec::new();
        if let Some(c) = &cfg
            && let Ok(mut entries) = c.multivar("credential.helper", None)
        {
            while let Some(Ok(e)) = entries.next() {
                if let Ok(v) = e.value() {
                    if v.is_empty() {
                        credential_helpers.clear();
                    } else {
                        credential_helpers.push(v.to_string());
                    }
                }
            }
        }
        UserLevel {
            ssh_command,
            credential_helpers,
        }
    })
}

/// `git <service> <remote>` on one of orch's own bare remotes (the local forge's), for a
/// worker's relayed transport: a scrubbed environment as every git orch runs, but the remote's
/// own configuration and hooks (its `pre-receive` judges the push).
pub fn service_command(service: &str, remote: &Path) -> Command {
    service_command_showing(service, remote, None)
}

/// [`service_command`] for a worker's relay: of the workers' branches (`orch/…`) only those
/// in `shown` are advertised, fetched or pushed (`transfer.hideRefs`; a later `!` entry shows
/// a branch an earlier one hid). `None`: every branch.
pub fn service_command_showing(service: &str, remote: &Path, shown: Option<&[String]>) -> Command {
    let mut cmd = scrubbed_git();
    cmd.env("LC_ALL", "C");
    if let Some(shown) = shown {
        cmd.arg("-c").arg("transfer.hideRefs=refs/heads/orch/");
        for branch in shown {
            cmd.arg("-c")
                .arg(format!("transfer.hideRefs=!refs/heads/{branch}"));
        }
    }
    cmd.arg(service).arg(remote);
    cmd
}

/// What the configuration files of the repository at `dir` set that orch's git must not
/// follow, as pins (see [`crate::clone_config`]); none where `dir` is no repository. git lists
/// the files itself (`--includes`: what git would read is what is judged); listing runs no
/// configured program.
fn clone_pins(dir: &Path) -> Result<Vec<crate::clone_config::Pin>, String> {
    let mut cmd = scrubbed_git();
    cmd.env("LC_ALL", "C").arg("-C").arg(dir);
    for (k, v) in GIT_FIXED_CONFIG {
        cmd.arg("-c").arg(format!("{k}={v}"));
    }
    let out = cmd
        .args(["config", "--list", "--show-scope", "--includes", "-z"])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("git config --list: {e}"))?;
    // Not a repository, no configuration at all, or files git cannot read: the command itself
    // then meets the same and says so.
    if !out.status.success() {
        return Ok(Vec::new());
    }
    crate::clone_config::pins(&out.stdout)
}

/// `git` with orch's environment scrubbed to [`GIT_ENV_KEPT`].
fn scrubbed_git() -> Command {
    let mut cmd = Command::new("git");
    cmd.env_clear();
    for var in GIT_ENV_KEPT {
        if let Some(v) = std::env::var_os(var) {
            cmd.env(var, v);
        }
    }
    cmd
}

/// Runs the git CLI in `dir` (see [`git_command`] and [`crate::clone_config`]: nothing a
/// worker configured runs).
pub fn git(dir: &Path, args: &[&str]) -> Result<String, GitError> {
    let mut cmd = git_command(dir);
    let pins = clone_pins(dir).map_err(|why| GitError::Repo {
        path: dir.display().to_string(),
        message: format!("orch runs no git here: {why}"),
    })?;
    // Through the environment, not `-c`: a key's subsection may hold `=`. Values given on
    // `-c` (GIT_FIXED_CONFIG) are read after these and win.
    cmd.env("GIT_CONFIG_COUNT", pins.len().to_string());
    for (i, (key, value)) in pins.iter().enumerate() {
        cmd.env(format!("GIT_CONFIG_KEY_{i}"), key)
            .env(format!("GIT_CONFIG_VALUE_{i}"), value);
    }
    let out = cmd.args(args).output().map_err(|e| GitError::Cli {
        args: args.join(" "),
        dir: dir.display().to_string(),
        stderr: e.to_string(),
    })?;
    if !out.status.success() {
        return Err(GitError::Cli {
            args: args.join(" "),
            dir: dir.display().to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The commit at the tip of `branch` in the clone at `repo_path`: the remote-tracking branch
/// of `remote` when present (after a fetch), else the local branch.
pub fn base_sha(repo_path: &Path, remote: &str, branch: &str) -> Result<String, GitError> {
    let repo = open(repo_path)?;
    for name in [
        format!("refs/remotes/{remote}/{branch}"),
        format!("refs/heads/{branch}"),
    ] {
        if let Ok(r) = repo.find_reference(&name)
            && let Ok(c) = r.peel_to_commit()
        {
            return Ok(c.id().to_string());
        }
    }
    Err(GitError::Repo {
        path: repo_path.display().to_string(),
        message: format!("has no branch \"{branch}\" (repos.yaml `branch`)"),
    })
}

/// Creates branch `branch` at `base` and a worktree for it at `dir`.
pub fn create_worktree(
    repo_path: &Path,
    name: &str,
    branch: &str,
    base: &str,
    dir: &Path,
) -> Result<(), GitError> {
    let repo = open(repo_path)?;
    let oid = Oid::from_str(base).map_err(|e| err(repo_path, e))?;
    let commit = repo.find_commit(oid).map_err(|e| err(repo_path, e))?;
    let b = repo
        .branch(branch, &commit, false)
        .map_err(|e| err(repo_path, e))?;
    let mut opts = WorktreeAddOptions::new();
    opts.reference(Some(b.get()));
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent).map_err(|e| GitError::Repo {
            path: parent.display().to_string(),
            message: e.to_string(),
        })?;
    }
    repo.worktree(name, dir, Some(&opts))
        .map_err(|e| err(repo_path, e))?;
    Ok(())
}

/// How a worker of an account of its own reaches its remote (see [`clone_for_worker`]).
#[derive(Debug, Clone)]
pub struct WorkerRemote<'a> {
    /// The remote's name in the worker's clone (the clone's own: `orch`, `origin`).
    pub name: &'a str,
    pub url: &'a str,
    /// The command git runs for the remote's receive-pack and upload-pack (the local forge:
    /// orch's relay over the report channel), with the service name appended.
    pub relay: Option<String>,
}

/// A clone of its own for a worker that runs as another account (a linked worktree would
/// share the clone's objects, refs and configuration with it): `dir` cloned from `clone`
/// without hard links, branch `branch` checked out at `base`, the remote it pushes to added
/// (tracking `upstream` on it), and the clone's commit identity copied. Nothing points back at
/// `clone`. Made by orch; the caller hands it over to the account.
///
/// Made beside `dir`'s parent (the worker's workspace, which may be the account's already:
/// its parent is orch's alone, so nothing of the account's is in the way while orch writes)
/// and renamed into place whole: a process killed half-way (a spawner, a resumer) leaves no
/// clone at `dir` — which a resumer makes again — never one that looks usable without its
/// remote or identity (its worker could then push nowhere).
pub fn clone_for_worker(
    clone: &Path,
    dir: &Path,
    branch: &str,
    base: &str,
    remote: &WorkerRemote,
    upstream: &str,
) -> Result<(), GitError> {
    let io = |path: &Path, e: std::io::Error| GitError::Repo {
        path: path.display().to_string(),
        message: e.to_string(),
    };
    let parent = dir.parent().unwrap_or(Path::new("/"));
    std::fs::create_dir_all(parent).map_err(|e| io(parent, e))?;
    let name = |p: &Path| {
        p.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("clone")
            .to_string()
    };
    let making = parent.with_file_name(format!(".{}.{}.making", name(parent), name(dir)));
    // What a process killed while making it left: orch's own, never handed over.
    if making.exists() {
        std::fs::remove_dir_all(&making).map_err(|e| io(&making, e))?;
    }
    // Made 0700 first (git clones into an empty directory): beside other workers'
    // workspaces, nobody reads it while it is made.
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&making)
            .map_err(|e| io(&making, e))?;
    }
    configure_clone_for_worker(clone, &making, branch, remote, base, upstream)?;
    std::fs::rename(&making, dir).map_err(|e| io(dir, e))
}

fn configure_clone_for_worker(
    clone: &Path,
    dir: &Path,
    branch: &str,
    remote: &WorkerRemote,
    base: &str,
    upstream: &str,
) -> Result<(), GitError> {
    let parent = dir.parent().unwrap_or(Path::new("/"));
    let (from, to) = (clone.display().to_string(), dir.display().to_string());
    git(
        parent,
        &[
            "clone",
            "--quiet",
            "--no-hardlinks",
            "--no-checkout",
            "--origin",
            "orch-clone",
            &from,
            &to,
        ],
    )?;
    git(dir, &["checkout", "--quiet", "-b", branch, base])?;
    git(dir, &["remote", "remove", "orch-clone"])?;
    git(dir, &["remote", "add", remote.name, remote.url])?;
    if let Some(relay) = &remote.relay {
        let key = |k: &str| format!("remote.{}.{k}", remote.name);
        git(
            dir,
            &[
                "config",
                &key("receivepack"),
                &format!("{relay} receive-pack"),
            ],
        )?;
        git(
            dir,
            &[
                "config",
                &key("uploadpack"),
                &format!("{relay} upload-pack"),
            ],
        )?;
    }
    git(
        dir,
        &["config", &format!("branch.{branch}.remote"), remote.name],
    )?;
    git(
        dir,
        &[
            "config",
            &format!("branch.{branch}.merge"),
            &format!("refs/heads/{upstream}"),
        ],
    )?;
    // The identity commits are made with: the clone's (its config and the user's), else one
    // that names the worker's branch.
    let cfg = open(clone)?.config().ok();
    let get = |k: &str| cfg.as_ref().and_then(|c| c.get_string(k).ok());
    let name = get("user.name").unwrap_or_else(|| "orch worker".to_string());
    let email = get("user.email").unwrap_or_else(|| "worker@orch.invalid".to_string());
    git(dir, &["config", "user.name", &name])?;
    git(dir, &["config", "user.email", &email])?;
    Ok(())
}

/// A git lock file older than this was left by a process killed while holding it (a live
/// git holds one for milliseconds).
const STALE_LOCK: std::time::Duration = std::time::Duration::from_secs(5);

/// Removes `lock` if it is older than [`STALE_LOCK`]; true if it did.
fn remove_if_stale(lock: &Path) -> bool {
    let age = std::fs::metadata(lock)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok());
    let removed = age.is_some_and(|a| a > STALE_LOCK) && std::fs::remove_file(lock).is_ok();
    if removed {
        tracing::warn!("removed a stale {} (its git died)", lock.display());
    }
    removed
}

/// [`remove_if_stale`] for every `*.lock` under `dir`.
fn remove_stale_locks_under(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        // A link is never followed (to a directory or to a lock): only what is in `dir`.
        let Ok(kind) = e.file_type() else { continue };
        if kind.is_dir() {
            remove_stale_locks_under(&path);
        } else if kind.is_file() && path.extension().is_some_and(|x| x == "lock") {
            remove_if_stale(&path);
        }
    }
}

/// Writes the clone's config, which git guards with `config.lock`. Spawns for one clone write
/// it at once, and one killed mid-write leaves the lock behind for good: a live writer's lock
/// is waited out, a stale one removed, and the write tried again (bounded).
fn write_config(
    repo_path: &Path,
    mut write: impl FnMut(&Repository) -> Result<(), git2::Error>,
) -> Result<(), GitError> {
    let deadline = std::time::Instant::now() + STALE_LOCK * 2;
    loop {
        let repo = open(repo_path)?;
        let e = match write(&repo) {
            Ok(()) => return Ok(()),
            Err(e) => e,
        };
        if std::time::Instant::now() >= deadline {
            return Err(err(repo_path, e));
        }
        remove_if_stale(&repo.commondir().join("config.lock"));
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
}

/// Makes `remote` point at `url` in the clone (adding it if missing).
pub fn ensure_remote(repo_path: &Path, remote: &str, url: &str) -> Result<(), GitError> {
    // A concurrent spawn may add it first: the next try finds it.
    write_config(repo_path, |repo| {
        match repo.find_remote(remote) {
            Ok(r) if r.url() == Ok(url) => {}
            Ok(_) => repo.remote_set_url(remote, url)?,
            Err(_) => return repo.remote(remote, url).map(|_| ()),
        }
        // Adding a remote writes its URL and its fetch refspec one after the other: a process
        // killed in between leaves a remote that fetches nothing, so no push could ever be
        // verified against it. Repair it.
        let refspecs = repo.find_remote(remote)?.fetch_refspecs()?.len();
        if refspecs == 0 {
            repo.remote_add_fetch(remote, &format!("+refs/heads/*:refs/remotes/{remote}/*"))?;
        }
        Ok(())
    })
}

/// Makes a plain `git push` from the worker's branch go to `remote`, same branch name.
pub fn set_upstream(repo_path: &Path, branch: &str, remote: &str) -> Result<(), GitError> {
    set_upstream_to(repo_path, branch, remote, branch)
}

/// Sets local branch `branch`'s upstream to `remote_branch` on `remote`.
pub fn set_upstream_to(
    repo_path: &Path,
    branch: &str,
    remote: &str,
    remote_branch: &str,
) -> Result<(), GitError> {
    write_config(repo_path, |repo| {
        let mut cfg = repo.config()?;
        cfg.set_str(&format!("branch.{branch}.remote"), remote)?;
        cfg.set_str(
            &format!("branch.{branch}.merge"),
            &format!("refs/heads/{remote_branch}"),
        )
    })
}

/// Resolves `spec` (a short or full SHA, or a ref such as HEAD) to a full commit id.
pub fn resolve(dir: &Path, spec: &str) -> Result<String, GitError> {
    let repo = open(dir)?;
    let obj = repo.revparse_single(spec).map_err(|_| GitError::Repo {
        path: dir.display().to_string(),
        message: format!("no commit \"{spec}\" in the worker's repository"),
    })?;
    let c = obj.peel_to_commit().map_err(|e| err(dir, e))?;
    Ok(c.id().to_string())
}

/// Fetches `remote` so that remote-tracking refs reflect what was really pushed.
pub fn fetch(dir: &Path, remote: &str) -> Result<(), GitError> {
    // The worktrees of a clone share its remote-tracking refs: fetches by several orch
    // processes (a spawn's, a supervisor's, a resume's) meet on their ref locks, and a fetch
    // killed half-way leaves its locks behind for good. Live locks are waited out, stale
    // ones removed (bounded).
    let deadline = std::time::Instant::now() + STALE_LOCK * 2;
    loop {
        // The remote's own upload-pack: `remote.<name>.uploadpack` names a command, and a `-c`
        // does not override it (the first value read wins); the option does.
        match git(
            dir,
            &[
                "fetch",
                "--upload-pack=git-upload-pack",
                "--quiet",
                "--no-tags",
                "--prune",
                remote,
            ],
        ) {
            Ok(_) => return Ok(()),
            Err(GitError::Cli { stderr, .. })
                if stderr.contains(".lock") && std::time::Instant::now() < deadline =>
            {
                if let Ok(repo) = open(dir) {
                    let common = repo.commondir();
                    remove_stale_locks_under(&common.join("refs/remotes").join(remote));
                    remove_if_stale(&common.join("packed-refs.lock"));
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            Err(e) => return Err(e),
        }
    }
}

/// The remote-tracking branch of `remote` that contains `sha`, if any (after a fetch).
pub fn on_remote(dir: &Path, remote: &str, sha: &str) -> Result<Option<String>, GitError> {
    let repo = open(dir)?;
    let target = Oid::from_str(sha).map_err(|e| err(dir, e))?;
    let branches = repo
        .branches(Some(BranchType::Remote))
        .map_err(|e| err(dir, e))?;
    let prefix = format!("{remote}/");
    for b in branches.flatten() {
        let (branch, _) = b;
        let Some(name) = branch.name().ok().flatten().map(str::to_string) else {
            continue;
        };
        if !name.starts_with(&prefix) {
            continue;
        }
        let Some(tip) = branch.get().target() else {
            continue;
        };
        if tip == target || repo.graph_descendant_of(tip, target).unwrap_or(false) {
            return Ok(Some(name));
        }
    }
    Ok(None)
}

/// Why `head` (a branch head read from the forge) is not new work of the worker whose branch
/// started at `base`, if it is not: `base` itself, a commit already reachable from `base`, or
/// a commit another worker pushed (`others`: (worker, SHA)) or one reachable from such a push.
/// Looks in the clone's object database; a head it does not have yet is fetched from
/// `remote` first (objects are named by their hash: where they come from cannot change
/// what they are).
pub fn why_not_new_work(
    dir: &Path,
    remote: &str,
    head: &str,
    base: &str,
    others: &[(String, String)],
) -> Result<Option<String>, GitError> {
    let short = crate::sha::short;
    if head == base {
        return Ok(Some(format!(
            "{} is the base commit the worker started on: no new work",
            short(head)
        )));
    }
    if let Some((worker, _)) = others.iter().find(|(_, sha)| sha == head) {
        return Ok(Some(format!(
            "{} is worker {worker}'s push, not this worker's work",
            short(head)
        )));
    }
    let head_oid = Oid::from_str(head).map_err(|e| err(dir, e))?;
    if open(dir)?.find_commit(head_oid).is_err() {
        fetch(dir, remote)?;
    }
    let repo = open(dir)?;
    repo.find_commit(head_oid).map_err(|e| GitError::Repo {
        path: dir.display().to_string(),
        message: format!(
            "the branch head {} cannot be read: {}",
            short(head),
            e.message()
        ),
    })?;
    if let Ok(b) = Oid::from_str(base)
        && repo.graph_descendant_of(b, head_oid).unwrap_or(false)
    {
        return Ok(Some(format!(
            "{} is already in the base commit {}'s history: no new work",
            short(head),
            short(base)
        )));
    }
    for (worker, sha) in others {
        if let Ok(o) = Oid::from_str(sha)
            && repo.graph_descendant_of(o, head_oid).unwrap_or(false)
        {
            return Ok(Some(format!(
                "{} is in the history of worker {worker}'s push {}: not this worker's work",
                short(head),
                short(sha)
            )));
        }
    }
    Ok(None)
}

/// Commit time of `sha` in epoch milliseconds.
pub fn commit_time_ms(dir: &Path, sha: &str) -> Result<i64, GitError> {
    let repo = open(dir)?;
    let c = repo
        .find_commit(Oid::from_str(sha).map_err(|e| err(dir, e))?)
        .map_err(|e| err(dir, e))?;
    Ok(c.committer().when().seconds() * 1000)
}

/// Commits reachable from HEAD but not from `base`, oldest first.
pub fn commits_since(dir: &Path, base: &str) -> Result<Vec<String>, GitError> {
    let repo = open(dir)?;
    let mut walk = repo.revwalk().map_err(|e| err(dir, e))?;
    walk.push_head().map_err(|e| err(dir, e))?;
    if let Ok(b) = Oid::from_str(base) {
        let _ = walk.hide(b);
    }
    walk.set_sorting(git2::Sort::TOPOLOGICAL | git2::Sort::REVERSE)
        .map_err(|e| err(dir, e))?;
    Ok(walk.flatten().map(|o| o.to_string()).collect())
}

/// Paths changed between `base` and HEAD, sorted.
pub fn files_modified(dir: &Path, base: &str) -> Result<Vec<String>, GitError> {
    paths_since(dir, base, false)
}

/// The paths the worktree's HEAD adds since `base` (new files, not changed ones), sorted.
pub fn files_created(dir: &Path, base: &str) -> Result<Vec<String>, GitError> {
    paths_since(dir, base, true)
}

/// The paths of the diff from `base`'s tree to HEAD's (`added_only`: new files alone), sorted.
fn paths_since(dir: &Path, base: &str, added_only: bool) -> Result<Vec<String>, GitError> {
    let repo = open(dir)?;
    let head = repo
        .head()
        .and_then(|h| h.peel_to_tree())
        .map_err(|e| err(dir, e))?;
    let base_tree = repo
        .find_commit(Oid::from_str(base).map_err(|e| err(dir, e))?)
        .and_then(|c| c.tree())
        .map_err(|e| err(dir, e))?;
    let diff = repo
        .diff_tree_to_tree(Some(&base_tree), Some(&head), None)
        .map_err(|e| err(dir, e))?;
    let mut files: Vec<String> = diff
        .deltas()
        .filter(|d| !added_only || d.status() == git2::Delta::Added)
        .filter_map(|d| {
            d.new_file()
                .path()
                .or(d.old_file().path())
                .map(|p| p.display().to_string())
        })
        .collect();
    files.sort();
    files.dedup();
    Ok(files)
}

/// The paths a change touches — added, modified, deleted or renamed (both names) — between
/// the merge base of `head` with `base` and `head`, sorted; with that merge base.
pub fn changed_since_merge_base(
    dir: &Path,
    base: &str,
    head: &str,
) -> Result<(String, Vec<String>), GitError> {
    let repo = open(dir)?;
    let oid = |s: &str| Oid::from_str(s).map_err(|e| err(dir, e));
    let (base, head) = (oid(base)?, oid(head)?);
    let merge_base = repo.merge_base(base, head).map_err(|e| err(dir, e))?;
    let tree = |o: Oid| {
        repo.find_commit(o)
            .and_then(|c| c.tree())
            .map_err(|e| err(dir, e))
    };
    let (from, to) = (tree(merge_base)?, tree(head)?);
    let diff = repo
        .diff_tree_to_tree(Some(&from), Some(&to), None)
        .map_err(|e| err(dir, e))?;
    let mut files: Vec<String> = diff
        .deltas()
        .flat_map(|d| [d.old_file().path(), d.new_file().path()])
        .flatten()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    files.sort();
    files.dedup();
    Ok((merge_base.to_string(), files))
}

/// Whether commit `sha` of the repository at `dir` is a merge (more than one parent); `None`
/// when it cannot be read there.
pub fn is_merge(dir: &Path, sha: &str) -> Option<bool> {
    let repo = open(dir).ok()?;
    let c = repo.find_commit(Oid::from_str(sha).ok()?).ok()?;
    Some(c.parent_count() > 1)
}

/// The secrets (`secret::kind_in`) in the lines each commit from the merge base of `base` and
/// `head` up to `head` adds — every commit, not only the sum: a secret added then deleted is
/// still in the history that would land — and in each commit's message and the names of the
/// files it adds or changes; each also decoded (`secret::decode`: base64 runs, UTF-16; a
/// binary file read whole as UTF-16 text). At most `limit` findings (roughly: a commit's
/// message and names may pass it); a line's text is looked at in memory and never kept.
pub fn secrets_since_merge_base(
    dir: &Path,
    base: &str,
    head: &str,
    token: Option<&crate::secret::Secret>,
    limit: usize,
) -> Result<Vec<crate::secret::Finding>, GitError> {
    let repo = open(dir)?;
    let oid = |s: &str| Oid::from_str(s).map_err(|e| err(dir, e));
    let (base, head) = (oid(base)?, oid(head)?);
    let merge_base = repo.merge_base(base, head).map_err(|e| err(dir, e))?;
    let mut walk = repo.revwalk().map_err(|e| err(dir, e))?;
    walk.push(head).map_err(|e| err(dir, e))?;
    walk.hide(merge_base).map_err(|e| err(dir, e))?;
    let mut found = Vec::new();
    for c in walk {
        let commit = c
            .and_then(|o| repo.find_commit(o))
            .map_err(|e| err(dir, e))?;
        let to = commit.tree().map_err(|e| err(dir, e))?;
        let from = match commit.parent(0) {
            Ok(p) => Some(p.tree().map_err(|e| err(dir, e))?),
            Err(_) => None,
        };
        // The commit's message, read like an added file.
        let short = commit.id().to_string()[..10].to_string();
        for (n, l) in commit.message_bytes().split(|&b| b == b'\n').enumerate() {
            if let Some(kind) = crate::secret::kind_in(l, token)
                .or_else(|| crate::secret::decode::kind_in_decoded(l, token))
            {
                let f = crate::secret::Finding {
                    file: format!("(message of commit {short})"),
                    line: n as u32 + 1,
                    kind,
                };
                if !found.contains(&f) {
                    found.push(f);
                }
            }
        }
        let diff = repo
            .diff_tree_to_tree(from.as_ref(), Some(&to), None)
            .map_err(|e| err(dir, e))?;
        // Per file: its name, and a file git takes for binary (it has no lines below) read
        // whole, as UTF-16 text (`secret::decode`).
        let mut per_file = Vec::new();
        for delta in diff.deltas() {
            if delta.status() == git2::Delta::Deleted {
                continue;
            }
            let new = delta.new_file();
            let file = new
                .path()
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default();
            let name = new.path_bytes().unwrap_or_default();
            if let Some(kind) = crate::secret::kind_in(name, token)
                .or_else(|| crate::secret::decode::kind_in_decoded(name, token))
            {
                per_file.push(crate::secret::Finding {
                    file: format!("{file} (its name)"),
                    line: 0,
                    kind,
                });
            }
            let Ok(blob) = repo.find_blob(new.id()) else {
                continue;
            };
            if blob.is_binary()
                && let Some(kind) = crate::secret::decode::kind_in_binary(blob.content(), token)
            {
                per_file.push(crate::secret::Finding {
                    file: format!("{file} (as UTF-16 text)"),
                    line: 0,
                    kind,
                });
            }
        }
        for f in per_file {
            if !found.contains(&f) {
                found.push(f);
            }
        }
        diff.foreach(
            &mut |_, _| true,
            None,
            None,
            Some(&mut |delta, _, line| {
                if line.origin() == '+'
                    && let Some(kind) = crate::secret::kind_in(line.content(), token)
                        .or_else(|| crate::secret::decode::kind_in_decoded(line.content(), token))
                {
                    let file = delta
                        .new_file()
                        .path()
                        .map(|p| p.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    let line = line.new_lineno().unwrap_or(0);
                    let f = crate::secret::Finding { file, line, kind };
                    if !found.contains(&f) {
                        found.push(f);
                    }
                }
                found.len() < limit
            }),
        )
        .or_else(|e| {
            // The callback stopping at the limit is no failure.
            if found.len() >= limit {
                Ok(())
            } else {
                Err(err(dir, e))
            }
        })?;
        if found.len() >= limit {
            break;
        }
    }
    Ok(found)
}

/// `git diff --stat` and the patch from `from` to `to`, for `files` alone (literal paths).
/// No external diff program or text conversion runs: a worker's repository configures them.
pub fn diff_of_files(
    dir: &Path,
    from: &str,
    to: &str,
    files: &[String],
) -> Result<(String, String), GitError> {
    let run = |how: &str| {
        let mut args = vec![
            "--literal-pathspecs",
            "diff",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            how,
            from,
            to,
            "--",
        ];
        args.extend(files.iter().map(String::as_str));
        git(dir, &args)
    };
    Ok((run("--stat")?, run("--patch")?))
}

/// A worktree opened once and looked at often (a supervisor's look for new commits and
/// pushes every few seconds): each look re-reads the refs from disk, without opening the
/// repository again (which reads its configuration and canonicalises paths each time).
pub struct Watched(Repository);

impl Watched {
    pub fn open(dir: &Path) -> Result<Watched, GitError> {
        open(dir).map(Watched)
    }

    /// The commit `spec` (a ref such as HEAD) points at now.
    pub fn resolve(&self, spec: &str) -> Option<String> {
        let obj = self.0.revparse_single(spec).ok()?;
        obj.peel_to_commit().ok().map(|c| c.id().to_string())
    }
}

/// The commit HEAD points at in `dir`.
pub fn head(dir: &Path) -> Result<String, GitError> {
    resolve(dir, "HEAD")
}

/// The commit branch `branch` points at in the clone, if the branch exists.
pub fn branch_tip(repo_path: &Path, branch: &str) -> Result<Option<String>, GitError> {
    let repo = open(repo_path)?;
    match repo.find_branch(branch, BranchType::Local) {
        Ok(b) => Ok(b.get().target().map(|o| o.to_string())),
        Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(None),
        Err(e) => Err(err(repo_path, e)),
    }
}

/// The commit `remote`'s branch `branch` was at when last fetched (None: the remote has no
/// such branch). Unlike `base_sha`, never the local branch of that name.
pub fn remote_branch_tip(
    repo_path: &Path,
    remote: &str,
    branch: &str,
) -> Result<Option<String>, GitError> {
    let repo = open(repo_path)?;
    match repo.find_reference(&format!("refs/remotes/{remote}/{branch}")) {
        Ok(r) => Ok(r.peel_to_commit().ok().map(|c| c.id().to_string())),
        Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(None),
        Err(e) => Err(err(repo_path, e)),
    }
}

/// The clone's local branches whose name starts with `prefix`.
pub fn branches_with_prefix(repo_path: &Path, prefix: &str) -> Result<Vec<String>, GitError> {
    let repo = open(repo_path)?;
    let branches = repo
        .branches(Some(BranchType::Local))
        .map_err(|e| err(repo_path, e))?;
    Ok(branches
        .flatten()
        .filter_map(|(b, _)| b.name().ok().flatten().map(str::to_string))
        .filter(|n| n.starts_with(prefix))
        .collect())
}

/// The remote local branch `branch` pushes to (`branch.<name>.remote`), if one is set.
pub fn branch_remote(repo_path: &Path, branch: &str) -> Result<Option<String>, GitError> {
    let repo = open(repo_path)?;
    let cfg = repo.config().map_err(|e| err(repo_path, e))?;
    match cfg.get_string(&format!("branch.{branch}.remote")) {
        Ok(r) => Ok(Some(r)),
        Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(None),
        Err(e) => Err(err(repo_path, e)),
    }
}

/// The clone's linked worktrees: (name, path).
pub fn worktrees(repo_path: &Path) -> Result<Vec<(String, std::path::PathBuf)>, GitError> {
    let repo = open(repo_path)?;
    let names = repo.worktrees().map_err(|e| err(repo_path, e))?;
    Ok(names
        .iter()
        .flatten()
        .flatten()
        .filter_map(|n| {
            repo.find_worktree(n)
                .ok()
                .map(|w| (n.to_string(), w.path().to_path_buf()))
        })
        .collect())
}

/// The working trees of the clone (its main one and every linked one) that have `branch`
/// checked out.
pub fn checked_out_in(repo_path: &Path, branch: &str) -> Result<Vec<std::path::PathBuf>, GitError> {
    let full = format!("refs/heads/{branch}");
    let repo = open(repo_path)?;
    let on_branch = |r: &Repository| {
        r.find_reference("HEAD")
            .ok()
            .and_then(|h| h.symbolic_target().ok().flatten().map(|t| t == full))
            .unwrap_or(false)
    };
    let mut out = Vec::new();
    if on_branch(&repo) {
        out.push(repo.workdir().unwrap_or(repo_path).to_path_buf());
    }
    for (_, path) in worktrees(repo_path)? {
        if let Ok(r) = Repository::open(&path)
            && on_branch(&r)
        {
            out.push(path);
        }
    }
    Ok(out)
}

/// Paths in the worktree at `dir` with changes not committed: modified, staged, deleted,
/// and untracked files that are not ignored (work that exists nowhere else).
pub fn uncommitted_changes(dir: &Path) -> Result<Vec<String>, GitError> {
    let repo = open(dir)?;
    let mut opts = git2::StatusOptions::new();
    opts.include_untracked(true)
        .recurse_untracked_dirs(true)
        .include_ignored(false);
    let statuses = repo.statuses(Some(&mut opts)).map_err(|e| err(dir, e))?;
    Ok(statuses
        .iter()
        .filter(|s| s.status() != git2::Status::CURRENT)
        .filter_map(|s| s.path().ok().map(str::to_string))
        .collect())
}

/// Commits reachable from `tips` that are on no remote-tracking branch of `remote` and not in
/// the history of `base` (the commit the work started from): what would exist only in this
/// clone once the tips' refs are gone. Newest first.
pub fn commits_not_on_remote(
    repo_path: &Path,
    tips: &[String],
    remote: &str,
    base: &str,
) -> Result<Vec<String>, GitError> {
    let repo = open(repo_path)?;
    let mut walk = repo.revwalk().map_err(|e| err(repo_path, e))?;
    for tip in tips {
        let oid = Oid::from_str(tip).map_err(|e| err(repo_path, e))?;
        walk.push(oid).map_err(|e| err(repo_path, e))?;
    }
    walk.hide_glob(&format!("refs/remotes/{remote}/*"))
        .map_err(|e| err(repo_path, e))?;
    if let Ok(b) = Oid::from_str(base)
        && repo.find_commit(b).is_ok()
    {
        walk.hide(b).map_err(|e| err(repo_path, e))?;
    }
    walk.set_sorting(git2::Sort::TOPOLOGICAL)
        .map_err(|e| err(repo_path, e))?;
    walk.map(|o| o.map(|o| o.to_string()).map_err(|e| err(repo_path, e)))
        .collect()
}

/// The branches under `refs/heads/<prefix>` on `remote` as the server has them now (no fetch:
/// the clone's refs are left alone), as (full ref name, commit).
pub fn remote_heads(
    dir: &Path,
    remote: &str,
    prefix: &str,
) -> Result<Vec<(String, String)>, GitError> {
    let pattern = format!("refs/heads/{prefix}*");
    let out = git(
        dir,
        &[
            "ls-remote",
            "--upload-pack=git-upload-pack",
            "--heads",
            remote,
            &pattern,
        ],
    )?;
    Ok(out
        .lines()
        .filter_map(|l| {
            let (sha, name) = l.split_once('\t')?;
            Some((name.trim().to_string(), sha.trim().to_string()))
        })
        .collect())
}

/// The URL of `remote` in the clone, if it has that remote.
pub fn remote_url(repo_path: &Path, remote: &str) -> Result<Option<String>, GitError> {
    let repo = open(repo_path)?;
    match repo.find_remote(remote) {
        Ok(r) => Ok(r.url().ok().map(str::to_string)),
        Err(e) if e.code() == git2::ErrorCode::NotFound => Ok(None),
        Err(e) => Err(err(repo_path, e)),
    }
}

/// Removes the linked worktree at `path` (git refuses one with uncommitted changes or a
/// lock: nothing is forced). A worktree whose directory is already gone is pruned instead.
pub fn remove_worktree(repo_path: &Path, path: &Path) -> Result<(), GitError> {
    if !path.exists() {
        git(repo_path, &["worktree", "prune"])?;
        return Ok(());
    }
    let p = path.display().to_string();
    git(repo_path, &["worktree", "remove", &p]).map(|_| ())
}

/// Deletes local branch `branch` only while it still points at `expected` (a compare-and-
/// delete: a commit added since it was checked is never lost), and its upstream settings.
pub fn delete_branch_at(repo_path: &Path, branch: &str, expected: &str) -> Result<(), GitError> {
    git_past_stale_locks(
        repo_path,
        &[
            "update-ref",
            "-d",
            &format!("refs/heads/{branch}"),
            expected,
        ],
        &[&format!("refs/heads/{branch}.lock"), "packed-refs.lock"],
    )?;
    // The section set by `set_upstream`; none is fine.
    let _ = git_past_stale_locks(
        repo_path,
        &["config", "--remove-section", &format!("branch.{branch}")],
        &["config.lock"],
    );
    Ok(())
}

/// Removes `remote` and its remote-tracking branches from the clone.
pub fn remove_remote(repo_path: &Path, remote: &str) -> Result<(), GitError> {
    git_past_stale_locks(
        repo_path,
        &["remote", "remove", remote],
        &["config.lock", "packed-refs.lock"],
    )
    .map(|_| ())
}

/// `git <args>`, which writes what `locks` (paths in the clone's common directory) guard: as
/// [`write_config`] does for a spawn, a lock left by a process killed while holding it (a spawn
/// SIGKILLed inside libgit2's config write, a worker's git killed with its worker) is removed
/// once stale and the command tried again (bounded), instead of failing on it for good.
fn git_past_stale_locks(
    repo_path: &Path,
    args: &[&str],
    locks: &[&str],
) -> Result<String, GitError> {
    let common = open(repo_path)?.commondir().to_path_buf();
    let locks: Vec<std::path::PathBuf> = locks.iter().map(|l| common.join(l)).collect();
    let deadline = std::time::Instant::now() + STALE_LOCK * 2;
    loop {
        match git(repo_path, args) {
            Err(_) if locks.iter().any(|l| l.exists()) && std::time::Instant::now() < deadline => {
                for l in &locks {
                    remove_if_stale(l);
                }
                std::thread::sleep(std::time::Duration::from_millis(25));
            }
            done => return done,
        }
    }
}

/// Whether `ancestor` is `descendant` or in its history (both must be in the clone).
pub fn is_ancestor(repo_path: &Path, ancestor: &str, descendant: &str) -> Result<bool, GitError> {
    if ancestor == descendant {
        return Ok(true);
    }
    let repo = open(repo_path)?;
    let a = Oid::from_str(ancestor).map_err(|e| err(repo_path, e))?;
    let d = Oid::from_str(descendant).map_err(|e| err(repo_path, e))?;
    repo.graph_descendant_of(d, a)
        .map_err(|e| err(repo_path, e))
}

/// Whether `landed` carries the change of `done` onto `onto`: the same non-empty patch (`git
/// patch-id --stable`'s hash: line numbers and whitespace aside) from `onto` to `landed` as from
/// where `done` left `onto`'s history (their merge base) to `done`. How a change integrated by
/// rebase or squash — a new commit, without `done` in its history — is known for the one landed.
pub fn lands_change(
    repo_path: &Path,
    done: &str,
    onto: &str,
    landed: &str,
) -> Result<bool, GitError> {
    let repo = open(repo_path)?;
    let e = |e: git2::Error| err(repo_path, e);
    let oid = |s: &str| Oid::from_str(s).map_err(e);
    let (done, onto, landed) = (oid(done)?, oid(onto)?, oid(landed)?);
    let tree = |o: Oid| repo.find_commit(o).and_then(|c| c.tree()).map_err(e);
    let patch = |from: Oid, to: Oid| -> Result<Option<Oid>, GitError> {
        let diff = repo
            .diff_tree_to_tree(Some(&tree(from)?), Some(&tree(to)?), None)
            .map_err(e)?;
        if diff.deltas().len() == 0 {
            return Ok(None);
        }
        diff.patchid(None).map(Some).map_err(e)
    };
    let base = repo.merge_base(done, onto).map_err(e)?;
    let theirs = patch(onto, landed)?;
    Ok(theirs.is_some() && theirs == patch(base, done)?)
}

/// How an integration of a change with a moved base is built (`land.method`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Integrate {
    Merge,
    Rebase,
    Squash,
}

/// What building an integration came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Integration {
    Built(String),
    /// The files that conflict.
    Conflict(Vec<String>),
}

/// The identity of the commits orch itself makes (integrations).
const ORCH_IDENTITY: [&str; 4] = ["-c", "user.name=orch", "-c", "user.email=orch@localhost"];

/// Builds the integration of `change` with the base head `onto` in a scratch worktree of the
/// clone at `dir` (made afresh, removed after): a merge commit, the change's commits replayed
/// onto the base head, or one squashed commit. A conflict lists the conflicting files and
/// leaves nothing behind.
pub fn integrate(
    repo_path: &Path,
    dir: &Path,
    onto: &str,
    change: &str,
    how: Integrate,
    message: &str,
) -> Result<Integration, GitError> {
    let start = if how == Integrate::Rebase {
        change
    } else {
        onto
    };
    in_scratch_worktree(repo_path, dir, start, |run| match how {
        Integrate::Merge => run(&["merge", "--no-ff", "--no-edit", "-m", message, change]),
        Integrate::Rebase => run(&["rebase", onto]),
        Integrate::Squash => run(&["merge", "--squash", change]).and_then(|_| {
            // Nothing staged: the change is in the base already (a squash that landed).
            if git(dir, &["diff", "--cached", "--quiet"]).is_ok() {
                return Ok(String::new());
            }
            run(&["commit", "--no-verify", "-m", message])
        }),
    })
}

/// Builds a revert of the change that moved a base from `before` to `landed` (a merge commit
/// is reverted against its first parent; otherwise every commit of `before..landed`), as one
/// commit on the base head `onto`, in a scratch worktree at `dir`.
pub fn revert(
    repo_path: &Path,
    dir: &Path,
    onto: &str,
    before: &str,
    landed: &str,
    message: &str,
) -> Result<Integration, GitError> {
    let range = format!("{before}..{landed}");
    in_scratch_worktree(repo_path, dir, onto, |run| {
        let parents = git(dir, &["rev-list", "--parents", "-n", "1", landed])?;
        if parents.split_whitespace().count() > 2 {
            run(&["revert", "--no-commit", "-m", "1", landed])
        } else {
            run(&["revert", "--no-commit", &range])
        }
        .and_then(|_| run(&["commit", "--no-verify", "-m", message]))
    })
}

/// Runs `build` (git commands as orch's identity, through the `run` it is given) in a scratch
/// worktree of the clone at `dir`, detached at `start` and made afresh: its HEAD is the commit
/// built; a failure with conflicting files is a conflict. The worktree is removed after, whatever
/// happened.
fn in_scratch_worktree(
    repo_path: &Path,
    dir: &Path,
    start: &str,
    build: impl FnOnce(&dyn Fn(&[&str]) -> Result<String, GitError>) -> Result<String, GitError>,
) -> Result<Integration, GitError> {
    let _ = remove_worktree(repo_path, dir);
    let _ = std::fs::remove_dir_all(dir);
    let d = dir.display().to_string();
    git(
        repo_path,
        &["worktree", "add", "--detach", "--force", &d, start],
    )?;
    let run = |args: &[&str]| {
        let mut all: Vec<&str> = ORCH_IDENTITY.to_vec();
        all.extend_from_slice(args);
        git(dir, &all)
    };
    let outcome = match build(&run) {
        Ok(_) => head(dir).map(Integration::Built),
        Err(e) => {
            let conflicted = git(dir, &["diff", "--name-only", "--diff-filter=U"])
                .map(|o| o.lines().map(str::to_string).collect::<Vec<_>>())
                .unwrap_or_default();
            if conflicted.is_empty() {
                Err(e)
            } else {
                Ok(Integration::Conflict(conflicted))
            }
        }
    };
    let _ = remove_worktree(repo_path, dir);
    let _ = std::fs::remove_dir_all(dir);
    let _ = git(repo_path, &["worktree", "prune"]);
    outcome
}

/// Pushes commit `sha` to `refs/heads/<branch>` on `remote`. With `expect`, a compare-and-swap:
/// the remote branch must still be at that commit (`--force-with-lease`), else the push is
/// refused and nothing moves. Without it, the branch is set whatever it was (orch's own
/// landing branches).
pub fn push_commit(
    repo_path: &Path,
    remote: &str,
    sha: &str,
    branch: &str,
    expect: Option<&str>,
) -> Result<(), GitError> {
    let dst = format!("{sha}:refs/heads/{branch}");
    let lease;
    let mut args = vec!["push", "--quiet", "--receive-pack=git-receive-pack"];
    match expect {
        Some(old) => {
            lease = format!("--force-with-lease=refs/heads/{branch}:{old}");
            args.push(&lease);
        }
        None => args.push("--force"),
    }
    args.push(remote);
    args.push(&dst);
    git(repo_path, &args).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remote_left_without_its_fetch_refspec_is_repaired() {
        let dir = tempfile::tempdir().unwrap();
        let repo = git2::Repository::init(dir.path()).unwrap();
        // What a process killed inside `git remote add` leaves: the URL, no refspec.
        repo.config()
            .unwrap()
            .set_str("remote.orch.url", "/srv/forge/core.git")
            .unwrap();
        assert!(
            repo.find_remote("orch")
                .unwrap()
                .fetch_refspecs()
                .unwrap()
                .is_empty()
        );
        ensure_remote(dir.path(), "orch", "/srv/forge/core.git").unwrap();
        let r = repo.find_remote("orch").unwrap();
        let array = r.fetch_refspecs().unwrap();
        let specs: Vec<&str> = (0..array.len())
            .filter_map(|i| array.get(i).ok().flatten())
            .collect();
        assert_eq!(specs, ["+refs/heads/*:refs/remotes/orch/*"]);
        // Idempotent: a second call adds nothing.
        ensure_remote(dir.path(), "orch", "/srv/forge/core.git").unwrap();
        assert_eq!(
            repo.find_remote("orch")
                .unwrap()
                .fetch_refspecs()
                .unwrap()
                .len(),
            1
        );
    }

    /// A worker's own clone is there whole or not at all: one whose making stopped half-way
    /// (here a remote git refuses; in the chaos run, a spawner killed after the checkout) left
    /// a clone without its remote that a resumer took for usable, and its worker could push
    /// nowhere.
    #[test]
    fn a_workers_clone_stopped_half_way_leaves_nothing_where_it_goes() {
        let root = tempfile::tempdir().unwrap();
        let clone = root.path().join("clone");
        std::fs::create_dir(&clone).unwrap();
        git(&clone, &["init", "-q", "-b", "main"]).unwrap();
        git(
            &clone,
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "base",
            ],
        )
        .unwrap();
        let base = head(&clone).unwrap();
        let dir = root.path().join("workspace").join("worktree");
        let remote = |name| WorkerRemote {
            name,
            url: "/srv/forge/core.git",
            relay: None,
        };
        let bad = clone_for_worker(&clone, &dir, "orch/w", &base, &remote("no good"), "orch/w");
        assert!(bad.is_err());
        assert!(!dir.exists(), "nothing half-made where the clone goes");
        // The next attempt clears what the last one left and makes it whole.
        clone_for_worker(&clone, &dir, "orch/w", &base, &remote("orch"), "orch/w").unwrap();
        assert_eq!(
            remote_url(&dir, "orch").unwrap().as_deref(),
            Some("/srv/forge/core.git")
        );
        assert_eq!(head(&dir).unwrap(), base);
        // Made in the workspace's parent, orch's, and nothing of it left there.
        let making = root.path().join(".workspace.worktree.making");
        assert!(!making.exists());
        assert_eq!(
            std::fs::read_dir(root.path())
                .unwrap()
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().ends_with(".making"))
                .count(),
            0
        );
    }
}
