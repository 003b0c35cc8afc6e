//! The local forge's tables (`local_runs`, `local_jobs`, migration 2): every status change is
//! one transaction that also re-aggregates the run's status. `local_run_upstreams` (made here,
//! on first use, not by a migration): the commit of each upstream a run was built against.

use crate::ci::{CiJob, CiRun, JobStatus};
use crate::config::JobSpec;
use crate::store::now_ms;
use crate::store::sql::{OptionalExtension, Tx, params};

/// A job's timeout when `ci.jobs[].timeout` is not set.
pub const DEFAULT_JOB_TIMEOUT_MS: i64 = 30 * 60 * 1000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunRow {
    pub id: i64,
    pub repo: String,
    pub number: i64,
    pub git_ref: String,
    pub sha: String,
    pub event: String,
    pub status: JobStatus,
    pub runner_pid: Option<i64>,
    pub runner_start: Option<i64>,
    /// The host the runner's pid was recorded on (`node::hostname`): a pid means something
    /// only there. `None`: recorded before hosts were.
    pub runner_host: Option<String>,
    pub note: Option<String>,
    pub created_ms: i64,
    /// Set once every job is done (the run's status may read `failure` earlier).
    pub finished_ms: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRow {
    pub id: i64,
    pub run_id: i64,
    pub seq: i64,
    pub name: String,
    pub command: String,
    pub needs: Vec<String>,
    pub timeout_ms: i64,
    pub status: JobStatus,
    pub pid: Option<i64>,
    pub exit_code: Option<i64>,
    pub note: Option<String>,
    pub started_ms: Option<i64>,
}

const RUN_COLS: &str = "id, repo, number, ref, sha, event, status, runner_pid, runner_start, note, created_ms, finished_ms, runner_host";
const JOB_COLS: &str =
    "id, run_id, seq, name, command, needs, timeout_ms, status, pid, exit_code, note, started_ms";

fn run_row(r: &crate::store::sql::Row) -> crate::store::sql::Result<RunRow> {
    Ok(RunRow {
        id: r.get(0)?,
        repo: r.get(1)?,
        number: r.get(2)?,
        git_ref: r.get(3)?,
        sha: r.get(4)?,
        event: r.get(5)?,
        status: JobStatus::parse(&r.get::<_, String>(6)?),
        runner_pid: r.get(7)?,
        runner_start: r.get(8)?,
        note: r.get(9)?,
        created_ms: r.get(10)?,
        finished_ms: r.get(11)?,
        runner_host: r.get(12)?,
    })
}

fn job_row(r: &crate::store::sql::Row) -> crate::store::sql::Result<JobRow> {
    let needs: String = r.get(5)?;
    Ok(JobRow {
        id: r.get(0)?,
        run_id: r.get(1)?,
        seq: r.get(2)?,
        name: r.get(3)?,
        command: r.get(4)?,
        needs: serde_json::from_str(&needs).unwrap_or_default(),
        timeout_ms: r.get(6)?,
        status: JobStatus::parse(&r.get::<_, String>(7)?),
        pid: r.get(8)?,
        exit_code: r.get(9)?,
        note: r.get(10)?,
        started_ms: r.get(11)?,
    })
}

/// Forgejo's `AggregateJobStatus` (models/actions/run_job.go): all skipped → skipped; all
/// success or skipped → success; then cancelled, failure, running, waiting, blocked win in
/// that order. No jobs at all → unknown.
pub fn aggregate(statuses: impl IntoIterator<Item = JobStatus>) -> JobStatus {
    let mut any = false;
    let (mut all_skipped, mut all_ok) = (true, true);
    let (mut cancelled, mut failure, mut running, mut waiting, mut blocked) =
        (false, false, false, false, false);
    for s in statuses {
        any = true;
        all_ok &= matches!(s, JobStatus::Success | JobStatus::Skipped);
        all_skipped &= s == JobStatus::Skipped;
        cancelled |= s == JobStatus::Cancelled;
        failure |= s == JobStatus::Failure;
        running |= s == JobStatus::Running;
        waiting |= s == JobStatus::Waiting;
        blocked |= s == JobStatus::Blocked;
    }
    match () {
        _ if !any => JobStatus::Unknown,
        _ if all_skipped => JobStatus::Skipped,
        _ if all_ok => JobStatus::Success,
        _ if cancelled => JobStatus::Cancelled,
        _ if failure => JobStatus::Failure,
        _ if running => JobStatus::Running,
        _ if waiting => JobStatus::Waiting,
        _ if blocked => JobStatus::Blocked,
        _ => JobStatus::Unknown,
    }
}

/// Records a new push-triggered run of `jobs` with the repository's next run number. Jobs
/// without needs start `waiting`, the others `blocked`. `pins`: the upstreams' commits the run
/// is about (repository → commit), recorded with it; the others are the base heads its runner
/// finds when it starts.
pub fn create_run(
    tx: &Tx,
    repo: &str,
    git_ref: &str,
    sha: &str,
    jobs: &[JobSpec],
    pins: &[(String, String)],
) -> crate::store::sql::Result<(i64, i64)> {
    let number: i64 = tx.query_row(
        "SELECT COALESCE(MAX(number), 0) + 1 FROM local_runs WHERE repo = ?1",
        [repo],
        |r| r.get(0),
    )?;
    let statuses: Vec<JobStatus> = jobs
        .iter()
        .map(|j| {
            if j.needs.is_empty() {
                JobStatus::Waiting
            } else {
                JobStatus::Blocked
            }
        })
        .collect();
    let status = aggregate(statuses.iter().copied());
    let run_id: i64 = tx.query_row(
        "INSERT INTO local_runs (repo, number, ref, sha, event, status, created_ms)
         VALUES (?1, ?2, ?3, ?4, 'push', ?5, ?6) RETURNING id",
        params![repo, number, git_ref, sha, status.as_str(), now_ms()],
        |r| r.get(0),
    )?;
    for (seq, (job, st)) in jobs.iter().zip(&statuses).enumerate() {
        let timeout_ms = job
            .timeout
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(DEFAULT_JOB_TIMEOUT_MS);
        tx.execute(
            "INSERT INTO local_jobs (run_id, seq, name, command, needs, timeout_ms, status)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                run_id,
                seq as i64,
                job.name,
                job.run,
                serde_json::to_string(&job.needs).unwrap_or_else(|_| "[]".into()),
                timeout_ms,
                st.as_str()
            ],
        )?;
    }
    if !pins.is_empty() {
        ensure_upstreams_table(tx)?;
        for (up, commit) in pins {
            record_upstream(tx, run_id, up, commit, true)?;
        }
    }
    Ok((run_id, number))
}

/// One upstream commit of a run: pinned with the run, or the base head its runner found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpstreamRow {
    pub repo: String,
    pub sha: String,
    pub pinned: bool,
}

/// Made by whoever writes to it first rather than by a migration: the store's schema is shared
/// by every part of orch, this table by the local forge alone.
fn ensure_upstreams_table(tx: &Tx) -> crate::store::sql::Result<()> {
    tx.execute_batch(
        "CREATE TABLE IF NOT EXISTS local_run_upstreams (
             run_id BIGINT NOT NULL,
             repo   TEXT NOT NULL,
             sha    TEXT NOT NULL,
             pinned BIGINT NOT NULL,
             PRIMARY KEY (run_id, repo)
         )",
    )
}

fn upstreams_table_exists(tx: &Tx) -> crate::store::sql::Result<bool> {
    if tx.backend() == "sqlite" {
        return tx.query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'local_run_upstreams')",
            [],
            |r| r.get(0),
        );
    }
    tx.query_row(
        "SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c
           JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
          WHERE c.relname = 'local_run_upstreams' AND n.nspname = ANY (current_schemas(false)))",
        [],
        |r| r.get(0),
    )
}

/// Records `repo` at `sha` for `run_id`; a commit already recorded for it (a pin) is kept.
fn record_upstream(
    tx: &Tx,
    run_id: i64,
    repo: &str,
    sha: &str,
    pinned: bool,
) -> crate::store::sql::Result<()> {
    tx.execute(
        "INSERT INTO local_run_upstreams (run_id, repo, sha, pinned) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (run_id, repo) DO NOTHING",
        params![run_id, repo, sha, i64::from(pinned)],
    )?;
    Ok(())
}

/// Records the base heads a run's runner found for the upstreams that had no commit yet,
/// and returns every upstream commit of the run (pins first recorded win).
pub fn record_upstreams(
    tx: &Tx,
    run_id: i64,
    found: &[(String, String)],
) -> crate::store::sql::Result<Vec<UpstreamRow>> {
    ensure_upstreams_table(tx)?;
    for (repo, sha) in found {
        record_upstream(tx, run_id, repo, sha, false)?;
    }
    load_upstreams(tx, run_id)
}

/// The upstream commits recorded for a run, by repository name.
pub fn load_upstreams(tx: &Tx, run_id: i64) -> crate::store::sql::Result<Vec<UpstreamRow>> {
    if !upstreams_table_exists(tx)? {
        return Ok(Vec::new());
    }
    let mut stmt = tx.prepare_cached(
        "SELECT repo, sha, pinned FROM local_run_upstreams WHERE run_id = ?1 ORDER BY repo",
    )?;
    stmt.query_map([run_id], |r| {
        Ok(UpstreamRow {
            repo: r.get(0)?,
            sha: r.get(1)?,
            pinned: r.get::<_, i64>(2)? != 0,
        })
    })?
    .collect()
}

/// Records the runner started for a run whose hook (or poll) had none yet; a runner already
/// recorded by someone else is kept.
pub fn set_runner_if_none(tx: &Tx, run_id: i64, pid: i64) -> crate::store::sql::Result<()> {
    tx.prepare_cached(
        "UPDATE local_runs SET runner_pid = ?2, runner_host = ?3 WHERE id = ?1 AND runner_pid IS NULL",
    )?
    .execute(crate::params![run_id, pid, crate::node::hostname()])?;
    Ok(())
}

/// Sets the run's note: why it waits (a run pushed from a sandbox waits for orch to start its
/// runner, see `cli::RUNNER_FROM_OUTSIDE`).
pub fn set_run_note(tx: &Tx, run_id: i64, note: &str) -> crate::store::sql::Result<()> {
    tx.prepare_cached("UPDATE local_runs SET note = ?2 WHERE id = ?1")?
        .execute(crate::params![run_id, note])?;
    Ok(())
}

/// Makes process `pid` (started at `start` ticks) the runner that executes the run.
pub fn claim_runner(
    tx: &Tx,
    run_id: i64,
    pid: i64,
    start: Option<i64>,
) -> crate::store::sql::Result<()> {
    tx.prepare_cached(
        "UPDATE local_runs SET runner_pid = ?2, runner_start = ?3, runner_host = ?4 WHERE id = ?1",
    )?
    .execute(crate::params![run_id, pid, start, crate::node::hostname()])?;
    Ok(())
}

/// The run got one of the runner slots and starts executing now.
pub fn mark_run_started(tx: &Tx, run_id: i64, at_ms: i64) -> crate::store::sql::Result<()> {
    tx.prepare_cached("UPDATE local_runs SET started_ms = ?2 WHERE id = ?1")?
        .execute(crate::params![run_id, at_ms])?;
    Ok(())
}

pub fn load_run(tx: &Tx, id: i64) -> crate::store::sql::Result<Option<RunRow>> {
    tx.query_row(
        &format!("SELECT {RUN_COLS} FROM local_runs WHERE id = ?1"),
        [id],
        run_row,
    )
    .optional()
}

/// The jobs of a run, in declaration order.
pub fn load_jobs(tx: &Tx, run_id: i64) -> crate::store::sql::Result<Vec<JobRow>> {
    let mut stmt = tx.prepare_cached(&format!(
        "SELECT {JOB_COLS} FROM local_jobs WHERE run_id = ?1 ORDER BY seq"
    ))?;
    stmt.query_map([run_id], job_row)?.collect()
}

/// Runs with a job that is not done yet, across all repositories.
pub fn unfinished_runs(tx: &Tx) -> crate::store::sql::Result<Vec<RunRow>> {
    let mut stmt = tx.prepare_cached(&format!(
        "SELECT {RUN_COLS} FROM local_runs
         WHERE finished_ms IS NULL ORDER BY id"
    ))?;
    stmt.query_map([], run_row)?.collect()
}

/// The runs `sha` triggered in `repo`, newest first, with their jobs.
pub fn runs_for_sha(
    tx: &Tx,
    repo: &str,
    sha: &str,
) -> crate::store::sql::Result<Vec<(RunRow, Vec<JobRow>)>> {
    let runs: Vec<RunRow> = {
        let mut stmt = tx.prepare_cached(&format!(
            "SELECT {RUN_COLS} FROM local_runs WHERE repo = ?1 AND sha = ?2 ORDER BY number DESC"
        ))?;
        stmt.query_map(params![repo, sha], run_row)?
            .collect::<crate::store::sql::Result<_>>()?
    };
    runs.into_iter()
        .map(|r| {
            let jobs = load_jobs(tx, r.id)?;
            Ok((r, jobs))
        })
        .collect()
}

/// Recomputes and stores a run's status from its jobs; stamps `finished_ms` once every job is
/// done. Like Forgejo's, the status can be `failure` (a done status) while jobs still run.
pub fn refresh_run_status(tx: &Tx, run_id: i64) -> crate::store::sql::Result<JobStatus> {
    let jobs = load_jobs(tx, run_id)?;
    let status = aggregate(jobs.iter().map(|j| j.status));
    let finished = jobs.iter().all(|j| j.status.is_done()).then(now_ms);
    tx.execute(
        "UPDATE local_runs SET status = ?2, finished_ms = COALESCE(finished_ms, ?3) WHERE id = ?1",
        params![run_id, status.as_str(), finished],
    )?;
    Ok(status)
}

/// What changes with a job's status.
#[derive(Debug, Default, Clone)]
pub struct JobUpdate<'a> {
    pub pid: Option<i64>,
    pub exit_code: Option<i64>,
    pub note: Option<&'a str>,
}

/// Sets one job's status (stamping start/finish times) and re-aggregates its run.
pub fn set_job_status(
    tx: &Tx,
    job_id: i64,
    status: JobStatus,
    update: &JobUpdate,
) -> crate::store::sql::Result<JobStatus> {
    let now = now_ms();
    let started = (status == JobStatus::Running).then_some(now);
    let finished = status.is_done().then_some(now);
    tx.execute(
        "UPDATE local_jobs SET status = ?2,
             pid = COALESCE(?3, pid), exit_code = COALESCE(?4, exit_code),
             note = COALESCE(?5, note),
             started_ms = COALESCE(started_ms, ?6), finished_ms = COALESCE(finished_ms, ?7)
         WHERE id = ?1",
        params![
            job_id,
            status.as_str(),
            update.pid,
            update.exit_code,
            update.note,
            started,
            finished
        ],
    )?;
    let run_id: i64 = tx.query_row(
        "SELECT run_id FROM local_jobs WHERE id = ?1",
        [job_id],
        |r| r.get(0),
    )?;
    refresh_run_status(tx, run_id)
}

/// Records the process group of a running job (never of one already cancelled or done).
pub fn set_job_pid(tx: &Tx, job_id: i64, pid: i64) -> crate::store::sql::Result<()> {
    tx.execute(
        "UPDATE local_jobs SET pid = ?2 WHERE id = ?1 AND status = 'running'",
        params![job_id, pid],
    )?;
    Ok(())
}

/// Every job of the run that is not done becomes `status` with `note`, in one transaction.
pub fn finish_unfinished_jobs(
    tx: &Tx,
    run_id: i64,
    status: JobStatus,
    note: &str,
) -> crate::store::sql::Result<JobStatus> {
    let now = now_ms();
    tx.execute(
        "UPDATE local_jobs SET status = ?2, note = COALESCE(note || '; ', '') || ?3,
             finished_ms = ?4
         WHERE run_id = ?1 AND status NOT IN ('success', 'failure', 'cancelled', 'skipped')",
        params![run_id, status.as_str(), note, now],
    )?;
    tx.execute(
        "UPDATE local_runs SET note = COALESCE(note || '; ', '') || ?2 WHERE id = ?1",
        params![run_id, note],
    )?;
    refresh_run_status(tx, run_id)
}

/// How long past its own `timeout` a job may still read `running` before it counts as past
/// its limit: the runner's SIGTERM → SIGKILL grace, and a little for the write.
pub const PAST_LIMIT_SLACK_MS: i64 = 7_000;

/// The forge-neutral view of a run.
pub fn to_ci_run(run: &RunRow, jobs: &[JobRow]) -> CiRun {
    let now = now_ms();
    CiRun {
        id: run.id,
        number: run.number,
        event: run.event.clone(),
        status: Some(run.status),
        workflow: Some("ci.jobs".into()),
        url: None,
        git_ref: Some(run.git_ref.clone()),
        jobs: jobs
            .iter()
            .map(|j| CiJob {
                name: j.name.clone(),
                status: j.status,
                attempt: 1,
                id: Some(j.id),
                // The runner ends a job at its limit; one still running well after it has a
                // runner that is stuck (stopped, wedged).
                past_limit: j.status == JobStatus::Running
                    && j.started_ms
                        .is_some_and(|s| now - s > j.timeout_ms + PAST_LIMIT_SLACK_MS),
            })
            .collect(),
    }
}

/// How long a runner waits out a shared database that cannot be reached (restarting, cut off)
/// before it gives its run up: nobody waits on a runner but the run's CI.
const OUTLAST: std::time::Duration = std::time::Duration::from_secs(300);

/// `op` (one store call) retried while the database cannot be reached, up to [`OUTLAST`]: a
/// database restart must not fail the jobs running meanwhile.
pub(super) fn lasting<T>(
    op: impl FnMut() -> Result<T, crate::store::StoreError>,
) -> Result<T, crate::store::StoreError> {
    crate::store::StoreError::outlast(OUTLAST, op)
}

#[cfg(test)]
mod tests {
    use super::*;
    use JobStatus::*;

    #[test]
    fn aggregates_like_forgejo() {
        assert_eq!(aggregate([]), Unknown);
        assert_eq!(aggregate([Skipped, Skipped]), Skipped);
        assert_eq!(aggregate([Success, Skipped]), Success);
        assert_eq!(aggregate([Success, Failure, Cancelled]), Cancelled);
        assert_eq!(aggregate([Success, Failure, Running]), Failure);
        assert_eq!(aggregate([Success, Skipped, Failure]), Failure);
        assert_eq!(aggregate([Success, Running, Waiting]), Running);
        assert_eq!(aggregate([Success, Waiting, Blocked]), Waiting);
        assert_eq!(aggregate([Success, Blocked]), Blocked);
    }

    #[test]
    fn run_lifecycle() {
        crate::store::conformance::each_backend("run_lifecycle", |store| {
            let jobs = vec![
                JobSpec {
                    name: "check".into(),
                    run: "true".into(),
                    needs: vec![],
                    timeout: None,
                    env: vec![],
                },
                JobSpec {
                    name: "radicle-push".into(),
                    run: "true".into(),
                    needs: vec!["check".into()],
                    timeout: Some(std::time::Duration::from_secs(5)),
                    env: vec![],
                },
            ];
            let (id, n) = store
                .write(|tx| create_run(tx, "a", "refs/heads/x", "abc", &jobs, &[]))
                .unwrap();
            assert_eq!(n, 1);
            let (_, n2) = store
                .write(|tx| create_run(tx, "a", "refs/heads/x", "def", &jobs, &[]))
                .unwrap();
            assert_eq!(n2, 2);
            let (_, other) = store
                .write(|tx| create_run(tx, "b", "refs/heads/x", "abc", &jobs, &[]))
                .unwrap();
            assert_eq!(other, 1, "numbers are per repository");
            let rows = store.read(|tx| load_jobs(tx, id)).unwrap();
            assert_eq!(rows[0].status, Waiting);
            assert_eq!(rows[1].status, Blocked);
            assert_eq!(rows[1].timeout_ms, 5000);
            assert_eq!(rows[0].timeout_ms, DEFAULT_JOB_TIMEOUT_MS);
            assert_eq!(rows[1].needs, vec!["check"]);
            let st = store
                .write(|tx| set_job_status(tx, rows[0].id, Running, &JobUpdate::default()))
                .unwrap();
            assert_eq!(st, Running);
            let st = store
                .write(|tx| finish_unfinished_jobs(tx, id, Failure, "runner died"))
                .unwrap();
            assert_eq!(st, Failure);
            let runs = store.read(|tx| runs_for_sha(tx, "a", "abc")).unwrap();
            assert_eq!(runs.len(), 1);
            assert_eq!(runs[0].0.status, Failure);
            assert_eq!(runs[0].1[1].note.as_deref(), Some("runner died"));
            let unfinished = store.read(unfinished_runs).unwrap();
            assert_eq!(unfinished.len(), 2);
        });
    }

    #[test]
    fn a_run_keeps_its_pins_and_records_the_heads_its_runner_found() {
        crate::store::conformance::each_backend("run_upstreams", |store| {
            let jobs = vec![JobSpec {
                name: "check".into(),
                run: "true".into(),
                needs: vec![],
                timeout: None,
                env: vec![],
            }];
            let (plain, _) = store
                .write(|tx| create_run(tx, "net", "refs/heads/main", "n1", &jobs, &[]))
                .unwrap();
            assert_eq!(store.read(|tx| load_upstreams(tx, plain)).unwrap(), []);
            let pins = [("core".to_string(), "c-old".to_string())];
            let (pinned, _) = store
                .write(|tx| create_run(tx, "net", "refs/heads/main", "n2", &jobs, &pins))
                .unwrap();
            let found = [
                ("core".to_string(), "c-head".to_string()),
                ("vm".to_string(), "v-head".to_string()),
            ];
            let rows = store
                .write(|tx| record_upstreams(tx, pinned, &found))
                .unwrap();
            let row = |repo: &str, sha: &str, pinned: bool| UpstreamRow {
                repo: repo.into(),
                sha: sha.into(),
                pinned,
            };
            assert_eq!(
                rows,
                [row("core", "c-old", true), row("vm", "v-head", false)]
            );
            // Found again (a runner that starts over): what was recorded stands.
            let again = [("vm".to_string(), "v-newer".to_string())];
            let rows = store
                .write(|tx| record_upstreams(tx, pinned, &again))
                .unwrap();
            assert_eq!(rows[1], row("vm", "v-head", false));
            assert_eq!(store.read(|tx| load_upstreams(tx, plain)).unwrap(), []);
        });
    }
}
