//! Landing, the supervisor's part: after DONE (worker stopped, chain lock still held) it
//! carries the verified change to the base branch and reports what it saw to the machine as
//! `LandEvent`s (`milestone::landing` decides; the journal writes). The git work is
//! `gitops::{is_ancestor, integrate, push_commit}`; CI goes through the supervisor's CI thread
//! like every other question to the forge.
//!
//! One step per call, each durable before the next: a crash anywhere leaves a state `orch
//! resume` continues from (a move that happened but was not recorded is found again: the DONE
//! commit is then in the base branch's history, `OnBase`), and nothing lands twice (a
//! compare-and-swap on the base head the move was decided on).

use super::Supervisor;
use super::ci::CiAnswer;
use crate::config::{LandMethod, LandPolicy, OnBreakage, OnConflict};
use crate::forge::Forge;
use crate::forge::pull::MergeAnswer;
use crate::gitops::{self, Integrate, Integration};
use crate::milestone::{Event, LandEvent, LandState, Landing};
use crate::sha::Sha;
use crate::store::now_ms;

/// The least time between two landing steps (a fast local forge is not hammered).
const LAND_EVERY_MS: i64 = 200;
/// How long one pull request call may take.
const PULL_CALL_BOUND: std::time::Duration = std::time::Duration::from_secs(20);
/// How many looks at a pull request the server does not find mergeable before orch gives up.
const PULL_WAIT_LIMIT: u32 = 300;

impl<F: Forge + 'static> Supervisor<'_, F> {
    /// The landing branch of this worker (integrations are verified there before the base
    /// branch may move to them).
    fn land_branch(&self) -> String {
        format!("{}-land", self.w.branch)
    }

    /// One landing step when one is due: move the base (Pending), or ask CI about the
    /// integration (Verifying) or the base branch at the landed commit (BaseCi).
    pub(super) fn land_tick(&mut self, now: i64) {
        if !self.w.progress.landing_active() || now < self.land.next_land_ms {
            return;
        }
        if self.holds.fatal_hold.is_some() {
            // Nothing moves toward the base branch under a FATAL over the chain; the landing
            // goes on where it stood once an operator clears the hold.
            self.land.next_land_ms = now + LAND_EVERY_MS;
            return;
        }
        let Some(l) = self.w.progress.landing.clone() else {
            return;
        };
        if !self.lock_still_held() {
            self.land.next_land_ms = now + LAND_EVERY_MS;
            return;
        }
        let every = (self.env.config.ci.poll_interval.as_millis() as i64).max(LAND_EVERY_MS);
        match l.state {
            LandState::Pending => {
                // A real forge's pull request is looked at on CI's pace.
                self.land.next_land_ms = now
                    + if l.policy == LandPolicy::PullRequest {
                        every
                    } else {
                        LAND_EVERY_MS
                    };
                self.land_move(&l);
            }
            LandState::Downstream => {
                if !self.ci.link.idle() {
                    return;
                }
                self.land.next_land_ms = now + every;
                if let Some(d) = l.downstream.iter().find(|d| d.sha.is_none()) {
                    let repo = d.repo.clone();
                    self.check_start(&repo);
                } else if let Some(d) = l.downstream.iter().find(|d| d.verdict.is_none())
                    && let (Some(sha), Some(repo)) =
                        (d.sha.clone(), self.env.config.repo(&d.repo).cloned())
                {
                    self.ci.follower.forget(&repo.name, &sha);
                    let branch = self.verify_branch();
                    self.ci.link.ask(repo, sha, &branch, None, false);
                }
            }
            LandState::Reverting if l.revert.is_none() => {
                self.land.next_land_ms = now + LAND_EVERY_MS;
                self.revert_build(&l);
            }
            LandState::Verifying | LandState::BaseCi | LandState::Reverting => {
                let (sha, branch) = match l.state {
                    LandState::Verifying => (l.candidate.clone(), self.land_branch()),
                    LandState::Reverting if l.reverted.is_none() => {
                        (l.revert.clone(), self.revert_branch())
                    }
                    LandState::Reverting => (l.reverted.clone(), self.base_branch()),
                    _ => (l.landed.clone(), self.base_branch()),
                };
                let Some(sha) = sha else {
                    return;
                };
                if !self.ci.link.idle() {
                    return;
                }
                let Some(repo) = self.env.config.repo(&self.w.repo).cloned() else {
                    return;
                };
                self.land.next_land_ms = now + every;
                if l.state == LandState::Verifying
                    && l.policy != LandPolicy::Direct
                    && let Some(done) = l.done_sha.as_ref()
                    && !self.branch_still_at_done(&repo.path, done)
                {
                    return;
                }
                // The base branch's own run is what counts now: a verdict cached from the
                // worker's branch must not stand for it.
                self.ci.follower.forget(&repo.name, &sha);
                self.ci.link.ask(repo, sha, &branch, Some(now_ms()), false);
            }
            _ => {}
        }
    }

    fn base_branch(&self) -> String {
        self.env
            .config
            .repo(&self.w.repo)
            .map(|r| r.branch.clone())
            .unwrap_or_else(|| "main".into())
    }

    /// The branch a dependent's base head is pushed to for its CI to run with this change.
    pub(super) fn verify_branch(&self) -> String {
        format!("orch/verify/{}", self.w.id)
    }

    /// Downstream: pushes dependent `dep`'s base head (fetched from the forge) to its
    /// verification branch, so that its CI runs with the landed upstream — never a new commit
    /// on the dependent's base.
    fn check_start(&mut self, dep: &str) {
        let Some(repo) = self.env.config.repo(dep).cloned() else {
            return;
        };
        let remote =
            match crate::app::spawn::push_remote(self.env.config, self.env.state_dir, &repo) {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(worker = %self.w.id, dep, error = %e, "downstream: no remote");
                    return;
                }
            };
        if let Err(e) = gitops::fetch(&repo.path, &remote) {
            tracing::warn!(worker = %self.w.id, dep, error = %e, "downstream: fetch failed");
            return;
        }
        let Ok(head) = gitops::base_sha(&repo.path, &remote, &repo.branch) else {
            return;
        };
        let branch = self.verify_branch();
        if let Err(e) = gitops::push_commit(&repo.path, &remote, &head, &branch, None) {
            tracing::warn!(worker = %self.w.id, dep, error = %e, "downstream: push failed");
            return;
        }
        let event = LandEvent::CheckStarted {
            repo: dep.to_string(),
            sha: Sha::from(head),
        };
        self.apply(Event::Land(event), None, Vec::new());
    }

    /// Whether `a` answers a landing question (then it is the landing's, not the worker's).
    pub(super) fn land_answer(&mut self, a: &CiAnswer) -> bool {
        let Some(l) = self.w.progress.landing.clone() else {
            return false;
        };
        if l.state == LandState::Downstream && self.w.progress.landing_active() {
            let Some(d) = l
                .downstream
                .iter()
                .find(|d| d.sha.as_ref() == Some(&a.sha) && d.verdict.is_none())
            else {
                return false;
            };
            let judged = a
                .result
                .as_ref()
                .ok()
                .and_then(|(v, runs)| self.check_verdict(&d.repo, v, runs));
            if let Some((v, already_red)) = judged {
                let event = LandEvent::CheckVerdict {
                    repo: d.repo.clone(),
                    sha: a.sha.clone(),
                    kind: v.kind,
                    failed_jobs: v.failed_jobs.clone(),
                    detail: v.detail.clone(),
                    already_red,
                };
                self.apply(Event::Land(event), None, Vec::new());
                let broken = self
                    .w
                    .progress
                    .landing
                    .as_ref()
                    .is_some_and(|l| l.state == LandState::Broken);
                if broken && self.env.config.downstream.on_breakage == OnBreakage::Fix {
                    let dep = d.repo.clone();
                    self.spawn_fix(&dep, &a.sha, &v.failed_jobs);
                }
            }
            return true;
        }
        let asked = match l.state {
            LandState::Verifying => l.candidate.as_ref(),
            LandState::BaseCi => l.landed.as_ref(),
            LandState::Reverting => l.reverted.as_ref().or(l.revert.as_ref()),
            _ => None,
        };
        if !self.w.progress.landing_active() || asked != Some(&a.sha) {
            return false;
        }
        let Ok((v, runs)) = &a.result else {
            return true; // asked again at the next step
        };
        if l.state == LandState::BaseCi
            && let Some(before) = l.base_runs_before
            && runs.len() <= before
        {
            // The base branch's own run has not appeared yet (a forge whose webhook is slow).
            let waited = now_ms() - l.moved_ms.unwrap_or_else(now_ms);
            let limit = self.env.config.ci.start_timeout.as_millis() as i64;
            if waited >= limit {
                self.land_refused(format!(
                    "no CI run of the base branch for {} within ci.start_timeout ({}): does the workflow run on pushes to {}?",
                    a.sha.short(),
                    crate::duration::format(self.env.config.ci.start_timeout),
                    self.base_branch()
                ));
            }
            return true;
        }
        let event = Event::Land(LandEvent::Verdict {
            sha: a.sha.clone(),
            kind: v.kind,
            failed_jobs: v.failed_jobs.clone(),
            detail: v.detail.clone(),
        });
        self.apply(event, None, Vec::new());
        if self
            .w
            .progress
            .landing
            .as_ref()
            .is_some_and(|n| n.state == LandState::Conflict)
        {
            self.conflict_fix();
        }
        if l.state == LandState::Reverting
            && l.reverted.is_none()
            && v.kind == crate::ci::verdict::VerdictKind::Green
            && let (Some(revert), Some(onto)) = (l.revert.clone(), l.onto.clone())
        {
            // The verified revert goes onto the base if the base is still where it was built.
            self.revert_cas(&revert, &onto);
            return true;
        }
        if l.state == LandState::Verifying
            && v.kind == crate::ci::verdict::VerdictKind::Green
            && let (Some(candidate), Some(onto)) = (l.candidate, l.onto)
        {
            // Green on the landing branch: the base moves to it if it is still where the
            // integration was built.
            let how = format!("{} verified on {}", l.method.as_str(), self.land_branch());
            self.land_cas(&candidate, &onto, how);
        }
        true
    }

    /// `downstream.on_breakage: fix`: a worker on the broken dependent `dep` (its base head
    /// `sha` red with `failed` jobs), told what broke it and the failing jobs' last log lines,
    /// takes over the hold on its chain in its lock transaction (no gap). It is landed and
    /// checked against its own dependents like any change.
    fn spawn_fix(&mut self, dep: &str, sha: &Sha, failed: &[String]) {
        let Some(repo) = self.env.config.repo(dep).cloned() else {
            return;
        };
        let landed = self
            .w
            .progress
            .landing
            .as_ref()
            .and_then(|l| l.landed.clone())
            .unwrap_or_else(|| sha.clone());
        let jobs = if failed.is_empty() {
            "its CI".to_string()
        } else {
            failed.join(", ")
        };
        let logs = self.failing_logs(&repo, sha, failed);
        let base = self.base_branch();
        let task = format!(
            "Fix {dep}: {}'s change {} (\"{}\") landed on {base} and broke {dep}'s CI ({jobs}); make {dep} work with it",
            self.w.repo,
            landed.short(),
            self.w.task.lines().next().unwrap_or("")
        );
        let handoff = format!(
            "DOWNSTREAM FIX (critical path): {} {} landed on {base} and {dep}'s CI is red on its base head {} (failing: {jobs}). Last lines of the failing jobs:\n{logs}\n",
            self.w.repo,
            landed.short(),
            sha.short()
        );
        let req = crate::app::spawn::SpawnRequest {
            repo: dep.to_string(),
            task,
            task_id: Some(format!(
                "{}/fix-{dep}",
                self.w.task_id.clone().unwrap_or_else(|| self.w.id.clone())
            )),
            take_over: Some(crate::app::journal::breakage_holder(&self.w.id)),
            handoff: Some(handoff),
            ..Default::default()
        };
        let detail = match self.spawn_handed_over(&req) {
            Ok(id) => format!("fix worker {id} spawned on {dep} (its chain handed over)"),
            Err(e) => format!("no fix worker on {dep}: {e}; the hold stays"),
        };
        tracing::info!(worker = %self.w.id, "{detail}");
        self.record(vec![super::journal::Fact::Logged {
            kind: "fix_spawned",
            detail,
        }]);
    }

    /// `land.on_conflict: fix`: the change does not merge with the base; a replacement worker
    /// on the same task (same task id: a wave follows it) takes this worker's chain lock over in
    /// its lock transaction and redoes the change on the current base, told which files
    /// conflict and where the previous change is.
    pub(super) fn conflict_fix(&mut self) {
        let Some(repo) = self.env.config.repo(&self.w.repo).cloned() else {
            return;
        };
        if repo.land.on_conflict != OnConflict::Fix {
            return;
        }
        let l = self.w.progress.landing.clone();
        let detail = l
            .as_ref()
            .and_then(|l| l.detail.clone())
            .unwrap_or_default();
        let done = l
            .as_ref()
            .and_then(|l| l.done_sha.as_ref())
            .map(|s| s.short().to_string())
            .unwrap_or_else(|| "-".into());
        let handoff = format!(
            "REPLACEMENT after a landing conflict: worker {}'s verified change ({} on branch {}) does not land on {}: {detail}. Start from {} as it is now; bring the change over (e.g. `git merge {}`), resolve the conflicts keeping what {} gained meanwhile, push, and report as usual.\n",
            self.w.id, done, self.w.branch, repo.branch, repo.branch, self.w.branch, repo.branch
        );
        let req = crate::app::spawn::SpawnRequest {
            repo: self.w.repo.clone(),
            task: self.w.task.clone(),
            task_id: self.w.task_id.clone(),
            component: self.w.component.clone(),
            plan: self.w.plan.clone(),
            take_over: Some(self.w.id.clone()),
            handoff: Some(handoff),
            land: self.w.progress.landing.as_ref().map(|l| l.policy),
            // The same task: the model it was given (an override included).
            model: crate::config::model::ModelChoice::recorded(
                self.w.model.as_deref(),
                self.w.model_source.as_deref(),
            ),
            ..Default::default()
        };
        let detail = match self.spawn_handed_over(&req) {
            Ok(id) => {
                let old = self.w.id.clone();
                let _ = self
                    .store
                    .write(|tx| crate::store::waves::relink_task_worker(tx, &old, &id, now_ms()));
                crate::checkpoint::waves::save_of_worker(&mut self.store, self.env.state_dir, &id);
                format!(
                    "replacement worker {id} redoes the change on the base (the chain lock handed over)"
                )
            }
            Err(e) => format!("no replacement: {e}; the lock stays for a person"),
        };
        tracing::info!(worker = %self.w.id, "{detail}");
        self.record(vec![super::journal::Fact::Logged {
            kind: "conflict_fix",
            detail,
        }]);
    }

    /// Spawns `req` (whose lock transaction takes a lock over from its `take_over` holder) and
    /// starts its supervisor: the new worker's id.
    pub(super) fn spawn_handed_over(
        &mut self,
        req: &crate::app::spawn::SpawnRequest,
    ) -> Result<String, String> {
        let loaded = crate::app::Loaded {
            config: self.env.config.clone(),
            contract: self.env.contract.clone(),
            state_dir: self.env.state_dir.to_path_buf(),
            config_path: self.env.config_path.to_path_buf(),
            contract_path: self.env.contract_path.to_path_buf(),
        };
        match crate::app::spawn::prepare(
            &loaded.config,
            &loaded.contract,
            &loaded.state_dir,
            &mut self.store,
            req,
        ) {
            Ok(crate::app::spawn::Spawned::Ready(rec)) => {
                match crate::app::start_detached(&loaded, &rec.id) {
                    Ok(_) => {
                        crate::app::wait_taken_over(&mut self.store, &rec.id);
                        Ok(rec.id.clone())
                    }
                    Err(e) => Err(format!("worker {} recorded but not started: {e}", rec.id)),
                }
            }
            Ok(other) => Err(format!("not spawned ({other:?})")),
            Err(e) => Err(e.to_string()),
        }
    }

    /// The last lines of each failing job's log for `sha` in `repo`, where the forge keeps logs.
    fn failing_logs(&self, repo: &crate::config::Repo, sha: &Sha, failed: &[String]) -> String {
        const LINES: usize = 30;
        let mut out = String::new();
        for job in failed {
            let log = self.forge_call(self.ci.follower.forge().job_log(repo, sha.as_str(), job));
            match log {
                Ok(Some(text)) => {
                    let lines: Vec<&str> = text.lines().collect();
                    let tail = &lines[lines.len().saturating_sub(LINES)..];
                    out.push_str(&format!("--- {job} (last {} lines)\n", tail.len()));
                    for l in tail {
                        out.push_str(&crate::text::escape(l));
                        out.push('\n');
                    }
                }
                Ok(None) => out.push_str(&format!("--- {job}: the forge keeps no log\n")),
                Err(e) => out.push_str(&format!("--- {job}: log unreadable ({e})\n")),
            }
        }
        out
    }

    /// Runs one forge request of the landing (pull requests) to its end, bounded: the
    /// supervisor's loop waits for it (its worker is gone; its lease outlives the bound).
    fn forge_call<T>(
        &self,
        f: impl std::future::Future<Output = Result<T, crate::forge::ForgeError>>,
    ) -> Result<T, crate::forge::ForgeError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| crate::forge::ForgeError::Transient {
                message: format!("no runtime: {e}"),
                attempts: 0,
            })?;
        rt.block_on(async {
            match tokio::time::timeout(PULL_CALL_BOUND, f).await {
                Ok(r) => r,
                Err(_) => Err(crate::forge::ForgeError::Transient {
                    message: format!("no answer within {PULL_CALL_BOUND:?}"),
                    attempts: 0,
                }),
            }
        })
    }

    /// `land.policy: pull_request`: open the pull request, then merge it through the API
    /// pinned to the verified DONE commit once the server finds it mergeable; the server's
    /// refusal (branch protection, approvals, a head that moved) is the landing's `refused`.
    fn land_pull(&mut self, l: &Landing) {
        let Some(repo) = self.env.config.repo(&self.w.repo).cloned() else {
            return;
        };
        let Some(done) = l.done_sha.clone() else {
            return;
        };
        let title = format!(
            "{} (orch {})",
            self.w.task.lines().next().unwrap_or(""),
            self.w.id
        );
        let Some(number) = l.pull else {
            let body = format!(
                "Verified by orch: CI green for {} with the sync job `{}` success (worker {}). orch merges it pinned to that commit.",
                done.as_str(),
                self.env.config.ci.sync_job,
                self.w.id
            );
            let forge = self.ci.follower.forge();
            match self.forge_call(forge.open_pull(
                &repo,
                &self.w.branch,
                &repo.branch,
                &title,
                &body,
            )) {
                Ok(p) => {
                    let event = LandEvent::PullOpened {
                        number: p.number,
                        url: p.html_url,
                    };
                    self.apply(Event::Land(event), None, Vec::new());
                }
                Err(e) if e.is_blocking() => {
                    self.land_refused(format!("opening the pull request: {e}"))
                }
                Err(e) => {
                    tracing::warn!(worker = %self.w.id, error = %e, "landing: cannot open the pull request yet")
                }
            }
            return;
        };
        let pull = match self.forge_call(self.ci.follower.forge().pull(&repo, number)) {
            Ok(p) => p,
            Err(e) if e.is_blocking() => {
                return self.land_refused(format!("reading pull request #{number}: {e}"));
            }
            Err(e) => {
                tracing::warn!(worker = %self.w.id, error = %e, "landing: cannot read the pull request");
                return;
            }
        };
        if pull.merged {
            // Merged before this look (by orch before a crash, or by a person): its base run
            // may be among the commit's runs already.
            return self.pull_merged(number, pull.merge_commit_sha, "merged", None);
        }
        if pull.head_sha != done.as_str() {
            // The pull request's head is the worker's branch: it moved after DONE.
            let event = Event::DoneBranchMoved {
                done,
                head: Some(Sha::from(pull.head_sha)),
            };
            self.apply(event, None, Vec::new());
            return;
        }
        if !pull.mergeable {
            return self.pull_wait(number, "the server does not find it mergeable yet");
        }
        let style = match l.method {
            LandMethod::Merge => "merge",
            LandMethod::Rebase => "rebase",
            LandMethod::Squash => "squash",
        };
        // A style that keeps the head (fast-forward) lands the DONE commit itself: its base
        // run is the one after those it has now.
        let done_runs = self.runs_now(&done);
        let forge = self.ci.follower.forge();
        match self.forge_call(forge.merge_pull(&repo, number, style, done.as_str(), &title)) {
            Ok(MergeAnswer::Merged) => {
                let sha = self
                    .forge_call(self.ci.follower.forge().pull(&repo, number))
                    .ok()
                    .and_then(|p| p.merge_commit_sha);
                let before = if sha.as_deref() == Some(done.as_str()) {
                    done_runs
                } else {
                    0
                };
                self.pull_merged(number, sha, style, Some(before));
            }
            Ok(MergeAnswer::NotYet(m)) => self.pull_wait(number, &m),
            Ok(MergeAnswer::Refused { status, message }) => self.land_refused(format!(
                "Forgejo refused to merge pull request #{number} (HTTP {status}: {message})"
            )),
            Err(e) if e.is_blocking() => {
                self.land_refused(format!("merging pull request #{number}: {e}"))
            }
            Err(e) => {
                tracing::warn!(worker = %self.w.id, error = %e, "landing: merge not answered; asking again")
            }
        }
    }

    fn pull_merged(
        &mut self,
        number: i64,
        sha: Option<String>,
        how: &str,
        runs_before: Option<usize>,
    ) {
        match sha {
            Some(sha) => {
                let to = Sha::from(sha);
                let event = match runs_before {
                    Some(runs_before) => LandEvent::Moved {
                        to,
                        how: format!("pull request #{number} merged ({how})"),
                        from: None,
                        runs_before,
                    },
                    None => LandEvent::OnBase { head: to },
                };
                self.apply(Event::Land(event), None, Vec::new());
            }
            None => {
                tracing::warn!(worker = %self.w.id, number, "merged, but no merge commit shown yet")
            }
        }
    }

    /// A pull request the server does not merge yet: asked again at the next step, up to a
    /// bound (a conflict also reads "not mergeable").
    fn pull_wait(&mut self, number: i64, why: &str) {
        self.land.pull_waits += 1;
        if self.land.pull_waits >= PULL_WAIT_LIMIT {
            self.land_refused(format!(
                "pull request #{number} is still not mergeable after {} looks ({why}): a conflict with the base branch?",
                self.land.pull_waits
            ));
        }
    }

    /// Fetches, then `branch_still_at_done_fetched`.
    fn branch_still_at_done(&mut self, clone: &std::path::Path, done: &Sha) -> bool {
        if let Err(e) = gitops::fetch(clone, &self.w.remote) {
            tracing::warn!(worker = %self.w.id, error = %e, "landing: fetch failed; the branch head is read next time");
            return true;
        }
        self.branch_still_at_done_fetched(clone, done)
    }

    /// Whether the worker's branch on the forge (as just fetched into `clone`) is still at its
    /// DONE commit. If not, the machine hears of it (`Event::DoneBranchMoved`: before the base
    /// moved, DONE is taken back) and no landing step is taken on it. An unreadable head
    /// says nothing: the landing goes on with the verified commit, read again next step.
    fn branch_still_at_done_fetched(&mut self, clone: &std::path::Path, done: &Sha) -> bool {
        let head = match gitops::remote_branch_tip(clone, &self.w.remote, &self.w.branch) {
            Ok(head) => head,
            Err(e) => {
                tracing::warn!(worker = %self.w.id, error = %e, "landing: the branch head cannot be read");
                return true;
            }
        };
        if head
            .as_deref()
            .is_some_and(|h| h.eq_ignore_ascii_case(done.as_str()))
        {
            return true;
        }
        let event = Event::DoneBranchMoved {
            done: done.clone(),
            head: head.map(Sha::from),
        };
        self.apply(event, None, Vec::new());
        false
    }

    fn land_refused(&mut self, reason: String) {
        let reason = crate::text::escape(&reason).into_owned();
        self.apply(Event::Land(LandEvent::Refused { reason }), None, Vec::new());
    }

    /// Pending: fetch the base head; the change is on it already, or the base is
    /// fast-forwarded to it, or an integration is built for CI to verify.
    fn land_move(&mut self, l: &Landing) {
        if l.policy == LandPolicy::PullRequest {
            return self.land_pull(l);
        }
        let Some(repo) = self.env.config.repo(&self.w.repo).cloned() else {
            return;
        };
        let Some(done) = l.done_sha.clone() else {
            return;
        };
        let remote = self.w.remote.clone();
        if let Err(e) = gitops::fetch(&repo.path, &remote) {
            tracing::warn!(worker = %self.w.id, error = %e, "landing: fetch failed; trying again");
            return;
        }
        let base = match gitops::base_sha(&repo.path, &remote, &repo.branch) {
            Ok(b) => Sha::from(b),
            Err(e) => {
                tracing::warn!(worker = %self.w.id, error = %e, "landing: no base head");
                return;
            }
        };
        let on_base = gitops::is_ancestor(&repo.path, done.as_str(), base.as_str());
        let fast_forward = gitops::is_ancestor(&repo.path, base.as_str(), done.as_str());
        // A branch moved (or deleted) after DONE takes DONE back before anything lands —
        // unless the DONE commit is on the base already (merged by a person, who may then
        // have deleted the branch). `land: direct`'s branch is the base itself.
        if !matches!(on_base, Ok(true))
            && l.policy != LandPolicy::Direct
            && !self.branch_still_at_done_fetched(&repo.path, &done)
        {
            return;
        }
        match (on_base, fast_forward) {
            (Ok(true), _) => {
                self.apply(
                    Event::Land(LandEvent::OnBase { head: base }),
                    None,
                    Vec::new(),
                );
            }
            (Ok(false), _) if l.policy == LandPolicy::Direct => self.land_refused(format!(
                "land: direct, but the DONE commit {} is not on {} any more (the branch was moved after it): a person must look",
                done.short(),
                repo.branch
            )),
            (Ok(false), Ok(true)) => {
                // The base has not moved since the change was verified: its own green CI
                // is the proof.
                self.land_cas(&done, &base, "fast-forward".into());
            }
            (Ok(false), Ok(false)) => {
                let how = match l.method {
                    LandMethod::Merge => Integrate::Merge,
                    LandMethod::Rebase => Integrate::Rebase,
                    LandMethod::Squash => Integrate::Squash,
                };
                let scratch =
                    super::session_dir(self.env.state_dir, &self.w.id).join("land-worktree");
                let message = format!(
                    "Land {} ({}): {}",
                    self.w.branch,
                    self.w.id,
                    self.w.task.lines().next().unwrap_or("")
                );
                match gitops::integrate(
                    &repo.path,
                    &scratch,
                    base.as_str(),
                    done.as_str(),
                    how,
                    &message,
                ) {
                    Ok(Integration::Built(sha)) if sha == base.as_str() => {
                        // Nothing to integrate: the change is in the base already (a rebase or
                        // squash that landed before a crash, or the same change merged by hand).
                        self.apply(
                            Event::Land(LandEvent::OnBase { head: base }),
                            None,
                            Vec::new(),
                        );
                    }
                    Ok(Integration::Built(sha)) => {
                        let sha = Sha::from(sha);
                        let branch = self.land_branch();
                        if let Err(e) =
                            gitops::push_commit(&repo.path, &remote, sha.as_str(), &branch, None)
                        {
                            let reason = format!("pushing the integration failed: {e}");
                            self.apply(Event::Land(LandEvent::Lost { reason }), None, Vec::new());
                            return;
                        }
                        let built = LandEvent::Built {
                            candidate: sha,
                            onto: base,
                        };
                        self.apply(Event::Land(built), None, Vec::new());
                    }
                    Ok(Integration::Conflict(files)) => {
                        let detail = format!(
                            "{} of {} onto {} {} conflicts in {}",
                            l.method.as_str(),
                            done.short(),
                            repo.branch,
                            base.short(),
                            files.join(", ")
                        );
                        self.apply(
                            Event::Land(LandEvent::Conflict { detail }),
                            None,
                            Vec::new(),
                        );
                        self.conflict_fix();
                    }
                    Err(e) => {
                        let reason = format!("building the integration failed: {e}");
                        self.apply(Event::Land(LandEvent::Lost { reason }), None, Vec::new());
                    }
                }
            }
            (Err(e), _) | (_, Err(e)) => {
                tracing::warn!(worker = %self.w.id, error = %e, "landing: ancestry unknown");
            }
        }
    }

    /// The chain lock is what lets a landing move a base branch: one an operator released
    /// (`orch release --force`) ends the landing (false, and the landing is `refused`).
    fn lock_still_held(&mut self) -> bool {
        let id = self.w.id.clone();
        let Ok((held, last)) = self.store.read(|tx| {
            Ok((
                crate::store::holds_lock(tx, &id)?,
                crate::store::last_lock_action(tx, &id)?,
            ))
        }) else {
            return true; // a busy database says nothing
        };
        if held {
            return true;
        }
        // Only a release in the lock's history is an operator's; a lock gone without one was
        // deleted outside orch (or never taken again after a rebuild): said as such.
        let why = if last.as_deref() == Some("release") {
            "its chain lock was released by an operator (orch release --force): landing stopped"
        } else {
            "its chain lock is gone with no release in its history (the database was changed outside orch): landing stopped"
        };
        self.land_refused(why.into());
        false
    }

    /// How many CI runs `sha` has now (0 if the forge cannot tell).
    fn runs_now(&self, sha: &Sha) -> usize {
        let Some(repo) = self.env.config.repo(&self.w.repo).cloned() else {
            return 0;
        };
        let forge = self.ci.follower.forge();
        self.forge_call(forge.runs_for_commit(&repo, sha.as_str(), None))
            .map(|r| r.len())
            .unwrap_or(0)
    }

    fn revert_branch(&self) -> String {
        format!("{}-revert", self.w.branch)
    }

    /// `on_breakage: revert`: a revert of the landed change (`onto..landed`, or the landed
    /// merge commit against its first parent) built on the current base head and pushed to the
    /// revert branch for its CI.
    fn revert_build(&mut self, l: &Landing) {
        let Some(repo) = self.env.config.repo(&self.w.repo).cloned() else {
            return;
        };
        let (Some(landed), Some(before)) = (l.landed.clone(), l.onto.clone()) else {
            self.land_refused(
                "the breaking change cannot be reverted: orch does not know the base it moved from (it found the change merged already)".into(),
            );
            return;
        };
        let remote = self.w.remote.clone();
        if let Err(e) = gitops::fetch(&repo.path, &remote) {
            tracing::warn!(worker = %self.w.id, error = %e, "revert: fetch failed; trying again");
            return;
        }
        let Ok(base) = gitops::base_sha(&repo.path, &remote, &repo.branch) else {
            return;
        };
        let scratch = super::session_dir(self.env.state_dir, &self.w.id).join("revert-worktree");
        let message = format!(
            "Revert {} ({}): it broke a dependent's CI\n\n{}",
            landed.short(),
            self.w.id,
            l.detail.clone().unwrap_or_default()
        );
        match gitops::revert(
            &repo.path,
            &scratch,
            &base,
            before.as_str(),
            landed.as_str(),
            &message,
        ) {
            Ok(Integration::Built(sha)) => {
                let branch = self.revert_branch();
                if let Err(e) = gitops::push_commit(&repo.path, &remote, &sha, &branch, None) {
                    tracing::warn!(worker = %self.w.id, error = %e, "revert: push failed; trying again");
                    return;
                }
                let event = LandEvent::RevertBuilt {
                    sha: Sha::from(sha),
                    onto: Sha::from(base),
                };
                self.apply(Event::Land(event), None, Vec::new());
            }
            Ok(Integration::Conflict(files)) => self.land_refused(format!(
                "the revert of {} conflicts with the base branch in {}",
                landed.short(),
                files.join(", ")
            )),
            Err(e) => self.land_refused(format!("the revert of {} failed: {e}", landed.short())),
        }
    }

    /// Moves the base to the verified revert if it is still at `expect`.
    fn revert_cas(&mut self, revert: &Sha, expect: &Sha) {
        let Some(repo) = self.env.config.repo(&self.w.repo).cloned() else {
            return;
        };
        if !self.lock_still_held() {
            return;
        }
        let moved = gitops::push_commit(
            &repo.path,
            &self.w.remote,
            revert.as_str(),
            &repo.branch,
            Some(expect.as_str()),
        );
        let event = match moved {
            Ok(()) => LandEvent::RevertMoved { to: revert.clone() },
            Err(e) => lost_base(&repo.branch, expect, &e),
        };
        self.apply(Event::Land(event), None, Vec::new());
    }

    /// Moves the base branch to `to` only if it is still at `expect` (compare-and-swap).
    fn land_cas(&mut self, to: &Sha, expect: &Sha, how: String) {
        let Some(repo) = self.env.config.repo(&self.w.repo).cloned() else {
            return;
        };
        if !self.lock_still_held() {
            return;
        }
        let remote = self.w.remote.clone();
        // Already there (a move made before a crash, not recorded): found, not made again —
        // and its base run, if any, is already among the commit's runs.
        if gitops::fetch(&repo.path, &remote).is_ok()
            && let Ok(base) = gitops::base_sha(&repo.path, &remote, &repo.branch)
            && base == to.as_str()
        {
            let event = LandEvent::OnBase { head: to.clone() };
            self.apply(Event::Land(event), None, Vec::new());
            return;
        }
        let runs_before = self.runs_now(to);
        let moved = gitops::push_commit(
            &repo.path,
            &remote,
            to.as_str(),
            &repo.branch,
            Some(expect.as_str()),
        );
        let event = match moved {
            Ok(()) => LandEvent::Moved {
                to: to.clone(),
                how,
                from: Some(expect.clone()),
                runs_before,
            },
            Err(e) => lost_base(&repo.branch, expect, &e),
        };
        self.apply(Event::Land(event), None, Vec::new());
    }
}

/// A compare-and-swap push on `branch` that did not go through: the base moved from `expect`
/// (or the push was refused); the landing tries again.
fn lost_base(branch: &str, expect: &Sha, e: &gitops::GitError) -> LandEvent {
    LandEvent::Lost {
        reason: format!(
            "{branch} is no longer at {} ({})",
            expect.short(),
            crate::text::escape(&e.to_string())
        ),
    }
}
