//! Following the CI of pushed commits: poll the forge, compute the verdict, and remember
//! decided commits so that they cost no more requests.

use super::{Forge, ForgeError};
use crate::ci::verdict::{CiPolicy, Verdict, VerdictKind, verdict};
use crate::ci::{CiRun, JobStatus};
use crate::config::Repo;
use std::collections::HashMap;
use std::sync::Mutex;

/// Decided commits: (repository name, lowercase SHA) -> the verdict and its runs.
type Decided = HashMap<(String, String), (Verdict, Vec<CiRun>)>;

/// Wraps a [`Forge`] and a [`CiPolicy`]. Terminal verdicts (green, red, sync_not_done) are
/// cached per (repository, SHA) in memory. A green is final and answered without asking the
/// forge. A red or sync_not_done is final only while nothing moves: each poll takes the
/// forge's cheap look ([`Forge::push_run_states`], one request) and asks again in full when a
/// push run is going again (a rerun queued in place) or changed. Pending, running and no_run
/// are asked again on every poll.
pub struct CiFollower<F: Forge> {
    forge: F,
    policy: CiPolicy,
    decided: Mutex<Decided>,
}

impl<F: Forge> CiFollower<F> {
    pub fn new(forge: F, policy: CiPolicy) -> Self {
        CiFollower {
            forge,
            policy,
            decided: Mutex::new(HashMap::new()),
        }
    }

    pub fn forge(&self) -> &F {
        &self.forge
    }

    pub fn policy(&self) -> &CiPolicy {
        &self.policy
    }

    /// The verdict for `sha` in `repo` and the runs it is based on. `pushed_ms` is when orch
    /// pushed the commit (if known), `now_ms` the current time; both in epoch milliseconds.
    pub async fn poll(
        &self,
        repo: &Repo,
        sha: &str,
        pushed_ms: Option<i64>,
        now_ms: i64,
    ) -> Result<(Verdict, Vec<CiRun>), ForgeError> {
        let key = key(&repo.name, sha);
        let hit = self.lock().get(&key).cloned();
        if let Some((v, runs)) = hit {
            if v.kind == VerdictKind::Green {
                return Ok((v, runs));
            }
            // Red and sync_not_done can still change: a rerun queued in place changes the
            // status of its run. One cheap look tells.
            match self.forge.push_run_states(repo, sha).await? {
                Some(states) if moved(&runs, &states) => {
                    tracing::debug!(repo = %repo.name, sha, "decided verdict reopened: a push run moved");
                    self.lock().remove(&key);
                }
                _ => return Ok((v, runs)),
            }
        }
        let runs = self.forge.runs_for_commit(repo, sha, pushed_ms).await?;
        let v = verdict(&runs, &self.policy, pushed_ms, now_ms);
        tracing::debug!(repo = %repo.name, sha, verdict = %v.kind, "ci verdict");
        if v.kind.is_terminal() {
            self.lock().insert(key, (v.clone(), runs.clone()));
        }
        Ok((v, runs))
    }

    /// The cached terminal verdict for `sha`, if any.
    pub fn decided(&self, repo: &str, sha: &str) -> Option<Verdict> {
        self.lock().get(&key(repo, sha)).map(|(v, _)| v.clone())
    }

    /// Drops the cached verdict (e.g. after a job was re-run on the forge).
    pub fn forget(&self, repo: &str, sha: &str) {
        self.lock().remove(&key(repo, sha));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Decided> {
        // The map stays consistent even if a holder panicked: entries are inserted whole.
        self.decided.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Whether the push runs' states differ from those a decided verdict was based on: a push
/// run the verdict did not see, a run that is going again, or a finished run whose status
/// changed. A run the cheap look does not report is not judged.
fn moved(runs: &[CiRun], states: &[(i64, Option<JobStatus>)]) -> bool {
    states.iter().any(|(id, now)| {
        let Some(then) = runs.iter().find(|r| r.id == *id && r.event == "push") else {
            return true;
        };
        let done = |s: Option<JobStatus>| s.is_some_and(JobStatus::is_done);
        match (then.status, *now) {
            (Some(a), Some(b)) if a.is_done() && b.is_done() => a != b,
            (a, b) => done(a) != done(b),
        }
    })
}

fn key(repo: &str, sha: &str) -> (String, String) {
    (repo.to_string(), sha.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ci::CiJob;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    /// A forge answering from a fixed script and counting calls.
    struct Scripted {
        calls: AtomicU32,
        status: Mutex<JobStatus>,
    }

    impl Forge for Scripted {
        async fn runs_for_commit(
            &self,
            _repo: &Repo,
            _sha: &str,
            _pushed_ms: Option<i64>,
        ) -> Result<Vec<CiRun>, ForgeError> {
            self.calls.fetch_add(1, Ordering::SeqCst);
            let status = *self.status.lock().unwrap();
            Ok(vec![CiRun {
                id: 1,
                number: 1,
                event: "push".into(),
                status: None,
                workflow: None,
                url: None,
                git_ref: None,
                jobs: vec![CiJob {
                    name: "radicle-push".into(),
                    status,
                    attempt: 1,
                    id: None,
                    past_limit: false,
                }],
            }])
        }

        async fn branch_head(&self, _: &Repo, _: &str) -> Result<Option<String>, ForgeError> {
            Ok(None)
        }

        async fn job_log(&self, _: &Repo, _: &str, _: &str) -> Result<Option<String>, ForgeError> {
            Ok(None)
        }
    }

    fn repo() -> Repo {
        Repo {
            name: "alpha".into(),
            path: "/tmp/alpha".into(),
            branch: "main".into(),
            deps: vec![],
            jobs: vec![],
            land: crate::config::LandConfig::default_for(crate::config::ForgeKind::Forgejo),
            protected_paths: Vec::new(),
            model: None,
        }
    }

    #[tokio::test]
    async fn caches_terminal_verdicts_only() {
        let forge = Scripted {
            calls: AtomicU32::new(0),
            status: Mutex::new(JobStatus::Running),
        };
        let f = CiFollower::new(
            forge,
            CiPolicy {
                sync_job: "radicle-push".into(),
                required_jobs: None,
                start_timeout: Duration::from_secs(60),
            },
        );
        let sha = "A".repeat(40);
        let (v, _) = f.poll(&repo(), &sha, None, 0).await.unwrap();
        assert_eq!(v.kind.as_str(), "running");
        f.poll(&repo(), &sha, None, 0).await.unwrap();
        assert_eq!(f.forge().calls.load(Ordering::SeqCst), 2);
        assert!(f.decided("alpha", &sha).is_none());

        *f.forge().status.lock().unwrap() = JobStatus::Success;
        let (v, runs) = f.poll(&repo(), &sha, None, 0).await.unwrap();
        assert_eq!(v.kind.as_str(), "green");
        assert_eq!(runs.len(), 1);
        // Decided: no more calls, whatever the forge would now say; case-insensitive SHA.
        *f.forge().status.lock().unwrap() = JobStatus::Failure;
        let (again, _) = f.poll(&repo(), &sha.to_lowercase(), None, 0).await.unwrap();
        assert_eq!(again, v);
        assert_eq!(f.forge().calls.load(Ordering::SeqCst), 3);
        assert_eq!(f.decided("alpha", &sha).unwrap().kind.as_str(), "green");

        f.forget("alpha", &sha);
        let (v, _) = f.poll(&repo(), &sha, None, 0).await.unwrap();
        assert_eq!(v.kind.as_str(), "red");
        assert_eq!(f.forge().calls.load(Ordering::SeqCst), 4);
    }
}
