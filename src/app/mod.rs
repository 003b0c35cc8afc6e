//! What orch does, between the command line and the adapters: the journal (the one way a
//! worker's transition becomes durable), spawning, supervising, resuming, and the operator's
//! actions on workers. Nothing here parses arguments or prints tables (that is `cli/`), and
//! nothing here speaks SQL or HTTP (that is `store/` and `forge/`).

pub mod branch_protection;
pub mod cascade;
pub mod channel;
pub mod ci_scope;
pub mod deliver;
pub mod done_branch;
pub mod drift;
pub mod error;
pub mod fatal;
pub mod gc;
pub mod inbox;
pub mod journal;
pub mod logs;
pub mod operator;
pub mod orphans;
pub mod protect;
pub mod reassign;
pub mod relive;
pub mod resume;
pub mod spawn;
pub mod storage_note;
pub mod supervisor;
pub mod wave;

pub use error::{Error, ErrorKind, Result};

use crate::ci::verdict::CiPolicy;
use crate::config::Config;
use crate::contract::Contract;
use crate::forge::AnyForge;
use crate::forge::follow::CiFollower;
use crate::store::Store;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Everything a command that runs workers needs, resolved once: the organisation, the
/// contract, and where state lives.
pub struct Loaded {
    pub config: Config,
    pub contract: Contract,
    pub state_dir: PathBuf,
    pub config_path: PathBuf,
    pub contract_path: PathBuf,
}

impl Loaded {
    /// What a supervisor needs, borrowed from here.
    pub fn env<'a>(&'a self, orch_exe: &'a Path) -> supervisor::Env<'a> {
        supervisor::Env {
            config: &self.config,
            contract: &self.contract,
            state_dir: &self.state_dir,
            config_path: &self.config_path,
            contract_path: &self.contract_path,
            orch_exe,
        }
    }

    /// The database, refused when it has lost its workers: an empty one beside checkpoint files
    /// (truncated, or replaced under live supervisors) would say "nothing here" — no worker, no
    /// orphan, every chain free — over unfinished work. Only `orch resume --from-checkpoints`
    /// (which opens the store itself) may rebuild it.
    pub fn store(&self) -> Result<Store> {
        let mut store =
            Store::open(&self.state_dir)?.with_alert_window(self.config.alerts.dedup_window);
        // A shared store's history may have been pruned on another node, which cannot remove
        // this node's checkpoint files of the workers it pruned: not a lost database.
        let shared = store.shared_across_nodes();
        let lost = store.read(|tx| {
            Ok(!crate::store::workers::any_worker(tx)?
                && crate::store::meta(tx, crate::store::REBUILT_META)?.is_none()
                && !(shared && crate::store::meta(tx, crate::store::PRUNED_META)?.is_some()))
        })?;
        if lost {
            let checkpoints = checkpoint_files(&self.state_dir);
            // Holds recorded beside a database that has none (an unreadable record counts):
            // a database holding nothing but a release freeze lost it just the same. Not on a
            // shared store: this node's file is its own view, which other nodes' unholds do
            // not rewrite (its checkpoints still count: they name workers the database had).
            let holds = match crate::checkpoint::read_holds(&self.state_dir) {
                _ if shared => 0,
                Ok(h) => h.map_or(0, |h| h.holds.len() + h.fatal.len()),
                Err(_) => 1,
            };
            let holds = if holds > 0
                && store.read(|tx| {
                    // A hold of either kind in the database itself: it has its contents.
                    Ok(crate::store::active_locks(tx)?
                        .iter()
                        .all(|l| l.kind != crate::lock::HolderKind::Hold)
                        && crate::store::fatal::all(tx)?.is_empty())
                })? {
                holds
            } else {
                0
            };
            if checkpoints > 0 || holds > 0 {
                let mut beside = Vec::new();
                if checkpoints > 0 {
                    beside.push(format!("{checkpoints} checkpoint file(s)"));
                }
                if holds > 0 {
                    beside.push(format!(
                        "{} recording operator hold(s)",
                        crate::checkpoint::HOLDS_FILE
                    ));
                }
                return Err(Error::Refused(format!(
                    "the database {} holds no workers, but {} are beside it in {}: it has lost its contents (truncated or replaced?). Rebuild it from them with `orch resume --from-checkpoints` (nothing was changed)",
                    store.path().display(),
                    beside.join(" and "),
                    self.state_dir.display()
                )));
            }
        }
        // Every load looks at the live locks under the repos.yaml read now.
        if let Ok(drifts) = store.read(|tx| drift::drift_in(tx, &self.config))
            && !drifts.is_empty()
        {
            drift::raise(&mut store, &self.state_dir, &drifts);
        }
        Ok(store)
    }

    /// The store when orch has state here; `None` in a directory where nothing ran yet (read-only
    /// commands never create it). A state directory that is not a directory is still an error.
    pub fn existing_store(&self) -> Result<Option<Store>> {
        let dir = &self.state_dir;
        if dir.exists() && !dir.is_dir()
            || crate::store::has_state(dir)
            || self.config.store.is_some()
        {
            return self.store().map(Some);
        }
        Ok(None)
    }

    pub fn forge(&self) -> Result<AnyForge> {
        AnyForge::from_config(&self.config, &self.contract, &self.state_dir)
            .map_err(Error::ForgeSetup)
    }

    pub fn follower(&self) -> Result<CiFollower<AnyForge>> {
        Ok(CiFollower::new(
            self.forge()?,
            CiPolicy::from(&self.config.ci),
        ))
    }

    /// The forge for a command someone waits on and that only asks (`ci status`, `ci logs`):
    /// it starts no CI, gives up on an unanswering forge after `forge.give_up_after`, and
    /// tells the first failure through `notice` (see [`AnyForge::for_query`]).
    pub fn query_forge(&self, notice: Arc<dyn Fn(&str) + Send + Sync>) -> Result<AnyForge> {
        Ok(self.forge()?.for_query(crate::forge::Patience {
            give_up_after: self.config.forge.give_up_after,
            notice,
        }))
    }

    /// [`Self::query_forge`] behind a follower (the verdict rules).
    pub fn query_follower(
        &self,
        notice: Arc<dyn Fn(&str) + Send + Sync>,
    ) -> Result<CiFollower<AnyForge>> {
        Ok(CiFollower::new(
            self.query_forge(notice)?,
            CiPolicy::from(&self.config.ci),
        ))
    }
}

/// How many checkpoint files the state directory holds.
fn checkpoint_files(state_dir: &Path) -> usize {
    std::fs::read_dir(state_dir)
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .ends_with(".checkpoint.yaml")
                })
                .count()
        })
        .unwrap_or(0)
}

/// The orch binary: supervisors and workers run it again (`__supervise`, `orch report`).
pub fn orch_exe() -> PathBuf {
    std::env::current_exe().unwrap_or_else(|_| PathBuf::from("orch"))
}

/// Waits (up to 120 s) until the supervisor this process started for `id` has taken the lease
/// over from it, so the worker is never an orphan for a moment after this process goes.
pub(crate) fn wait_taken_over(store: &mut crate::store::Store, id: &str) {
    let me = crate::pidns::host_pid() as i64;
    let deadline = std::time::Instant::now() + HANDOVER_WAIT;
    while std::time::Instant::now() < deadline {
        match store.worker(id) {
            Ok(Some(r))
                if !r.lease().is_some_and(|l| l.held_by(me)) || r.milestone().is_terminal() =>
            {
                return;
            }
            Ok(None) | Err(_) => return,
            _ => std::thread::sleep(std::time::Duration::from_millis(25)),
        }
    }
}

/// How long a process that created a worker keeps its lease alive for the supervisor it
/// starts (after that, a worker nobody took over is an orphan for `orch resume`).
pub const HANDOVER_WAIT: std::time::Duration = std::time::Duration::from_secs(120);

/// Keeps this process's lease on the worker it just created alive (a thread renewing it every
/// few seconds) until the supervisor it starts takes it over, this process exits, or
/// [`HANDOVER_WAIT`] passes. On a loaded machine (hundreds of spawns at once) making the
/// worktree and starting the supervisor can outlast a lease; a lapsed lease makes the worker
/// look orphaned to every other orch command, whose resume pass would take it over beside the
/// spawn still setting it up.
pub(crate) fn hold_lease_until_handover(state_dir: &Path, id: &str) {
    let (state_dir, id) = (state_dir.to_path_buf(), id.to_string());
    let _ = std::thread::Builder::new()
        .name("lease-hold".into())
        .spawn(move || {
            let Ok(mut store) = crate::store::Store::open(&state_dir) else {
                return;
            };
            let me = crate::pidns::host_pid() as i64;
            let every = std::time::Duration::from_millis(supervisor::RENEW_EVERY_MS as u64);
            let deadline = std::time::Instant::now() + HANDOVER_WAIT;
            while std::time::Instant::now() < deadline {
                std::thread::sleep(every);
                // False once another process holds it: the hand-over happened.
                let until = Some(supervisor::LEASE_MS);
                match store.write(|tx| crate::store::workers::set_lease(tx, &id, me, until)) {
                    Ok(true) => {}
                    Ok(false) => return,
                    Err(e) => tracing::warn!(worker = %id, error = %e, "cannot renew the lease"),
                }
            }
        });
}

/// Starts `orch __supervise <id>` in its own session, so it survives the terminal closing.
/// The caller may drop the handle (the supervisor goes on) or watch it take over.
pub fn start_detached(l: &Loaded, id: &str) -> Result<std::process::Child> {
    let dir = supervisor::session_dir(&l.state_dir, id);
    std::fs::create_dir_all(&dir).map_err(|e| Error::io("cannot create", &dir, e))?;
    let log_path = dir.join("supervisor.log");
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log_path)
        .map_err(|e| Error::io("cannot open", &log_path, e))?;
    let log_err = log
        .try_clone()
        .map_err(|e| Error::io("cannot open", &log_path, e))?;
    if crate::pidns::nested() {
        return Err(Error::Refused(format!(
            "cannot start the supervisor of {id} from inside a worker's PID namespace (it would die with the worker): run this command outside it"
        )));
    }
    let mut cmd = std::process::Command::new(orch_exe());
    // Started from inside a worker's tree (a worker's `orch spawn`), it must not die with it.
    crate::contain::leave_worker_cgroup(&mut cmd);
    cmd.arg("--config")
        .arg(&l.config_path)
        .arg("--state-dir")
        .arg(&l.state_dir);
    // The built-in contract has no file: the supervisor finds it the same way.
    if l.contract.is_built_in() {
        cmd.env_remove("ORCH_CONTRACT");
    } else {
        cmd.arg("--contract").arg(&l.contract_path);
    }
    cmd.args(["__supervise", id])
        .env(
            supervisor::LEASE_FROM_ENV,
            crate::pidns::host_pid().to_string(),
        )
        .stdin(std::process::Stdio::null())
        .stdout(log)
        .stderr(log_err);
    // SAFETY: setsid is async-signal-safe and touches no memory.
    unsafe {
        cmd.pre_exec(|| {
            rustix::process::setsid().map_err(std::io::Error::from)?;
            Ok(())
        });
    }
    // The token through a pipe, never the environment (see token.rs).
    let start_error = |source| Error::StartSupervisor {
        worker: id.to_string(),
        source,
    };
    let token_pipe = crate::token::pass_to(&mut cmd, &l.config).map_err(start_error)?;
    let child = cmd.spawn().map_err(start_error);
    drop(token_pipe);
    child
}
