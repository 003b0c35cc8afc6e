//! Checkpoint files: `sessions/<YYYY-MM-DD>-<worker_id>.checkpoint.yaml`, a view of the
//! database written after each commit (temp file + fsync + rename, so a reader never sees a
//! torn file). They carry the seed contract's required and tracking fields, and are what
//! `orch resume --from-checkpoints` rebuilds the database from.

pub mod waves;

use crate::gitops;
use crate::store::fmt_ms;
use crate::store::workers::{PushRecord, WorkerRecord};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Checkpoint {
    // required (seed: checkpoint_content.required)
    pub worker_id: String,
    pub repo_name: String,
    pub component_id: Option<String>,
    pub current_milestone: String,
    pub timestamp: String,
    // tracking
    pub commits: Vec<String>,
    pub ci_runs: Vec<CheckpointCi>,
    pub files_modified: Vec<String>,
    // the worker's return (contract: worker_returns): what it created, the tests it added or
    // changed, the final CI run; `context_summary` is its summary
    #[serde(default)]
    pub files_created: Vec<String>,
    #[serde(default)]
    pub tests_added: Vec<String>,
    #[serde(default)]
    pub final_ci: Option<String>,
    /// The worker's own summary of its change (what it said with DONE); `context_summary` is
    /// orch's account of where it stands.
    #[serde(default)]
    pub worker_summary: Option<String>,
    // optional
    pub context_summary: String,
    pub blockers: Vec<String>,
    /// The decisions the worker reported (`DECISION:` lines), oldest first.
    #[serde(default)]
    pub decisions_made: Vec<String>,
    // what resume needs
    pub task: String,
    pub task_id: Option<String>,
    pub plan: Option<String>,
    pub branch: String,
    pub base_sha: String,
    pub worktree: String,
    pub remote: String,
    pub tracked_sha: Option<String>,
    pub fix_attempts: u32,
    pub respawns: i64,
    /// The model the worker's agent runs with (`worker.model`, an override, …; none: the
    /// agent's default), and why (`task`, `override:<condition>`, `repo`, `worker`).
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub model_source: Option<String>,
    pub lock_held: bool,
    pub created_ms: i64,
    pub updated_ms: i64,
    /// The state machine's state, as stored (JSON), so a rebuild loses nothing.
    pub progress_json: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CheckpointCi {
    pub sha: String,
    pub pushed_at: String,
    pub verdict: Option<String>,
    pub run_ids: Vec<i64>,
    pub run_numbers: Vec<i64>,
    pub jobs_passed: Vec<String>,
    pub jobs_failed: Vec<String>,
    pub detail: Option<String>,
}

pub fn path_for(state_dir: &Path, w: &WorkerRecord) -> PathBuf {
    state_dir.join(format!("{}-{}.checkpoint.yaml", w.day, w.id))
}

/// Builds the checkpoint of `w` (reading the worktree for commits and files, best effort).
pub fn build(w: &WorkerRecord, pushes: &[PushRecord], lock_held: bool) -> Checkpoint {
    let wt = Path::new(&w.worktree);
    let commits = gitops::commits_since(wt, &w.base_sha).unwrap_or_default();
    let files_modified = gitops::files_modified(wt, &w.base_sha).unwrap_or_default();
    let files_created = gitops::files_created(wt, &w.base_sha).unwrap_or_default();
    let tests_added = files_modified
        .iter()
        .filter(|f| is_test_file(f))
        .cloned()
        .collect();
    let final_ci = pushes.last().map(|p| {
        let runs: Vec<String> = p
            .runs
            .iter()
            .flatten()
            .map(|r| format!("#{}", r.number))
            .collect();
        format!(
            "{} {}{}",
            p.sha.short(),
            p.verdict.map(|v| v.as_str()).unwrap_or("pending"),
            if runs.is_empty() {
                String::new()
            } else {
                format!(" (run {})", runs.join(", "))
            }
        )
    });
    let ci_runs = pushes
        .iter()
        .map(|p| {
            let mut passed = Vec::new();
            let mut run_ids = Vec::new();
            let mut run_numbers = Vec::new();
            for r in p.runs.iter().flatten() {
                run_ids.push(r.id);
                run_numbers.push(r.number);
                passed.extend(
                    r.jobs
                        .iter()
                        .filter(|j| j.status == crate::ci::JobStatus::Success)
                        .map(|j| j.name.clone()),
                );
            }
            passed.sort();
            passed.dedup();
            CheckpointCi {
                sha: p.sha.to_string(),
                pushed_at: fmt_ms(p.pushed_ms),
                verdict: p.verdict.map(|v| v.as_str().to_string()),
                run_ids,
                run_numbers,
                jobs_passed: passed,
                jobs_failed: p.failed_jobs.clone(),
                detail: p.detail.clone(),
            }
        })
        .collect();
    let pr = &w.progress;
    let mut blockers = Vec::new();
    if let Some(reason) = &pr.end_reason
        && !pr.milestone.is_terminal()
    {
        blockers.push(reason.clone());
    }
    Checkpoint {
        worker_id: w.id.clone(),
        repo_name: w.repo.clone(),
        component_id: w.component.clone(),
        current_milestone: pr.milestone.as_str().to_string(),
        timestamp: fmt_ms(w.updated_ms),
        context_summary: summary(
            w,
            &commits,
            pushes
                .iter()
                .rfind(|r| w.progress.tracked_sha.as_ref() == Some(&r.sha)),
        ),
        commits,
        ci_runs,
        files_modified,
        files_created,
        tests_added,
        final_ci,
        blockers,
        worker_summary: pr.summary.clone(),
        decisions_made: pr.decisions.clone(),
        task: w.task.clone(),
        task_id: w.task_id.clone(),
        plan: w.plan.clone(),
        branch: w.branch.clone(),
        base_sha: w.base_sha.clone(),
        worktree: w.worktree.clone(),
        remote: w.remote.clone(),
        tracked_sha: pr.tracked_sha.as_ref().map(|s| s.to_string()),
        fix_attempts: pr.fix_attempts,
        respawns: w.respawns,
        model: w.model.clone(),
        model_source: w.model_source.clone(),
        lock_held,
        created_ms: w.created_ms,
        updated_ms: w.updated_ms,
        progress_json: serde_json::to_string(pr).expect("progress serialises"),
    }
}

/// Whether `path` (a file a change touches) is a test, by the conventions of the common
/// ecosystems: a `test`/`tests`/`spec`/`__tests__` directory, `test_*.py`, `*_test.go`,
/// `*_test.py`, `*.test.*`, `*.spec.*`, `*Test.java`/`*Tests.*`.
pub fn is_test_file(path: &str) -> bool {
    let p = std::path::Path::new(path);
    let in_test_dir = p.parent().is_some_and(|d| {
        d.components().any(|c| {
            matches!(
                c.as_os_str().to_str(),
                Some("test" | "tests" | "spec" | "specs" | "__tests__" | "testing")
            )
        })
    });
    let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let stem = name.split('.').next().unwrap_or("");
    in_test_dir
        || name.starts_with("test_")
        || stem.ends_with("_test")
        || name.contains(".test.")
        || name.contains(".spec.")
        || stem.ends_with("Test")
        || stem.ends_with("Tests")
}

/// One paragraph a replacement worker (or a human) can act on. `tracked`: the push record of
/// the tracked commit, which has CI's latest word on it — every answer is recorded there,
/// those that come after the worker ended too (its progress no longer moves, and would say
/// "CI pending" beside a record that says red).
pub fn summary(w: &WorkerRecord, commits: &[String], tracked: Option<&PushRecord>) -> String {
    let p = &w.progress;
    let mut s = format!(
        "{} on {}: {} commit(s) since base",
        p.milestone,
        w.repo,
        commits.len()
    );
    if let Some(sha) = &p.tracked_sha {
        s.push_str(&format!("; last pushed {}", sha.short()));
        let (verdict, failed, detail) = match tracked.filter(|r| r.verdict.is_some()) {
            Some(r) => (r.verdict, &r.failed_jobs, r.detail.as_ref()),
            None => (p.verdict, &p.failed_jobs, p.verdict_detail.as_ref()),
        };
        match verdict {
            Some(v) => s.push_str(&format!(", CI {v}")),
            None => s.push_str(", CI not yet known"),
        }
        if !failed.is_empty() {
            s.push_str(&format!(" (failing: {})", failed.join(", ")));
        }
        if let Some(d) = detail {
            s.push_str(&format!("; {d}"));
        }
    } else {
        s.push_str("; nothing pushed yet");
    }
    if p.fix_attempts > 0 {
        s.push_str(&format!("; FIXING_CI attempts used: {}", p.fix_attempts));
    }
    if let Some(r) = &p.end_reason {
        s.push_str(&format!("; ended: {r}"));
    }
    s
}

/// Writes `cp` atomically to its file under `state_dir`.
pub fn write(state_dir: &Path, w: &WorkerRecord, cp: &Checkpoint) -> std::io::Result<PathBuf> {
    let path = path_for(state_dir, w);
    let text = crate::yaml::to_yaml_string(cp).map_err(std::io::Error::other)?;
    write_atomic(&path, text.as_bytes())?;
    Ok(path)
}

/// temp file in the same directory, fsync, rename: readers see the old or the new file.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension(format!("tmp.{}", crate::pidns::host_pid()));
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()
    })();
    if let Err(e) = written {
        // A full disk leaves no half-written temporary file behind.
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    std::fs::rename(&tmp, path)
}

/// The operator holds of a state directory (`hold:NAME` chain locks: `orch hold`, a broken
/// dependent's hold, `orch resume`'s own), a view of the database written after every change to
/// them, so that `orch resume --from-checkpoints` takes them again: a rebuilt database that
/// forgot a release freeze would end it unseen.
pub const HOLDS_FILE: &str = "holds.yaml";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct HeldChain {
    pub repo: String,
    /// `hold:<name>`.
    pub holder: String,
    pub reason: Option<String>,
    pub by: Option<String>,
    pub acquired_at: String,
}

/// A fatal hold (`store::fatal`): a chain halted until an operator clears it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FatalChain {
    pub repo: String,
    pub reason: String,
    pub by: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<String>,
    pub at: String,
}

impl FatalChain {
    /// The hold as the store keeps it (its time read back from RFC 3339; now if unreadable).
    pub fn to_hold(&self) -> crate::store::fatal::FatalHold {
        crate::store::fatal::FatalHold {
            repo: self.repo.clone(),
            reason: self.reason.clone(),
            by: self.by.clone(),
            worker_id: self.worker.clone(),
            at_ms: self
                .at
                .parse::<jiff::Timestamp>()
                .map(|t| t.as_millisecond())
                .unwrap_or_else(|_| crate::store::now_ms()),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Holds {
    pub holds: Vec<HeldChain>,
    /// Fatal holds: they must survive a rebuilt database as a freeze does.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fatal: Vec<FatalChain>,
}

/// The session directory of a worker: prompt, CI guide, handoff, worker.log, supervisor.log.
pub fn session_dir(state_dir: &Path, worker: &str) -> PathBuf {
    state_dir.join(worker)
}

pub fn holds_path(state_dir: &Path) -> PathBuf {
    state_dir.join(HOLDS_FILE)
}

/// Writes the holds among `locks` atomically (an empty list too: "no holds" is said, not
/// guessed from a missing file).
pub fn write_holds(
    state_dir: &Path,
    locks: &[crate::lock::ChainLock],
    fatal: &[crate::store::fatal::FatalHold],
) -> std::io::Result<()> {
    let holds = Holds {
        holds: locks
            .iter()
            .filter(|l| l.kind == crate::lock::HolderKind::Hold)
            .map(|l| HeldChain {
                repo: l.repo.clone(),
                holder: l.holder.clone(),
                reason: l.reason.clone(),
                by: l.by.clone(),
                acquired_at: fmt_ms(l.acquired_ms),
            })
            .collect(),
        fatal: fatal
            .iter()
            .map(|h| FatalChain {
                repo: h.repo.clone(),
                reason: h.reason.clone(),
                by: h.by.clone(),
                worker: h.worker_id.clone(),
                at: fmt_ms(h.at_ms),
            })
            .collect(),
    };
    let text = crate::yaml::to_yaml_string(&holds).map_err(std::io::Error::other)?;
    write_atomic(&holds_path(state_dir), text.as_bytes())
}

/// The holds recorded in the state directory: `None` when no hold was ever recorded there (no
/// file); an error names the file and what is wrong with it.
pub fn read_holds(state_dir: &Path) -> Result<Option<Holds>, String> {
    let path = holds_path(state_dir);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let holds: Holds = crate::yaml::from_yaml_str(&text)
        .map_err(|e| format!("{}: {}", path.display(), e.message))?;
    if let Some(bad) = holds.holds.iter().find(|h| !h.holder.starts_with("hold:")) {
        return Err(format!(
            "{}: {} is not an operator hold's name (hold:<name>)",
            path.display(),
            crate::text::escape(&bad.holder)
        ));
    }
    Ok(Some(holds))
}

/// Reads a checkpoint file.
pub fn read(path: &Path) -> Result<Checkpoint, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    crate::yaml::from_yaml_str(&text).map_err(|e| format!("{}: {}", path.display(), e.message))
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    #[test]
    fn tests_are_known_by_each_ecosystems_conventions() {
        for t in [
            "tests/integration/a.rs",
            "src/__tests__/x.js",
            "pkg/thing_test.go",
            "test_parser.py",
            "parser_test.py",
            "ui/button.test.tsx",
            "ui/button.spec.ts",
            "src/main/java/FooTest.java",
            "FooTests.cs",
        ] {
            assert!(super::is_test_file(t), "{t}");
        }
        for f in [
            "src/lib.rs",
            "contest.py",
            "latest/notes.md",
            "src/testament.rs",
        ] {
            assert!(!super::is_test_file(f), "{f}");
        }
    }

    #[test]
    fn holds_are_written_and_read_back_and_a_bad_file_is_named() {
        use crate::lock::{ChainLock, HolderKind};
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            super::read_holds(dir.path()),
            Ok(None),
            "no file: none recorded"
        );
        let lock = |repo: &str, holder: &str, kind| ChainLock {
            id: 1,
            repo: repo.into(),
            holder: holder.into(),
            kind,
            reason: Some("release freeze".into()),
            by: Some("rm".into()),
            acquired_ms: 0,
        };
        let locks = [
            lock("core", "hold:rm", HolderKind::Hold),
            lock("vm", "vm-12345678", HolderKind::Worker),
        ];
        super::write_holds(dir.path(), &locks, &[]).unwrap();
        let holds = super::read_holds(dir.path()).unwrap().unwrap().holds;
        assert_eq!(holds.len(), 1, "holds only: {holds:?}");
        assert_eq!(
            (holds[0].repo.as_str(), holds[0].holder.as_str()),
            ("core", "hold:rm")
        );
        assert_eq!(holds[0].reason.as_deref(), Some("release freeze"));
        super::write_holds(dir.path(), &locks[1..], &[]).unwrap();
        assert_eq!(
            super::read_holds(dir.path()).map(|h| h.map(|h| h.holds)),
            Ok(Some(Vec::new()))
        );
        std::fs::write(super::holds_path(dir.path()), "holds: [ {repo: core\n").unwrap();
        let err = super::read_holds(dir.path()).unwrap_err();
        assert!(err.contains(super::HOLDS_FILE), "{err}");
        std::fs::write(
            super::holds_path(dir.path()),
            "holds: [{repo: core, holder: core-1, reason: null, by: null, acquired_at: x}]\n",
        )
        .unwrap();
        let err = super::read_holds(dir.path()).unwrap_err();
        assert!(err.contains("not an operator hold"), "{err}");
    }

    /// The longest repository name config accepts still gives file names a file system
    /// takes: the checkpoint and the temporary file it is written through (pid at its widest).
    #[test]
    fn the_longest_repository_name_fits_in_every_checkpoint_file_name() {
        let repo = "r".repeat(crate::config::MAX_REPO_NAME);
        let id = format!("{repo}-{:08x}", u32::MAX); // as app::spawn makes worker ids
        let path = Path::new("/s").join(format!("2024-12-31-{id}.checkpoint.yaml"));
        let tmp = path.with_extension(format!("tmp.{}", u32::MAX));
        for p in [&path, &tmp] {
            let name = p.file_name().unwrap().len();
            assert!(name <= 255, "{name}: {}", p.display());
        }
        assert_eq!(tmp.file_name().unwrap().len(), 255, "the bound is tight");
        // And it is really written and read back under that name.
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join(path.file_name().unwrap());
        super::write_atomic(&real, b"x: 1\n").unwrap();
        assert_eq!(std::fs::read(&real).unwrap(), b"x: 1\n");
    }
}
