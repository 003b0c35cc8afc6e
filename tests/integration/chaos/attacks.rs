//! The chaos run's part in issue 34's attacks (listed in `chaos.rs`'s module doc): the CI that
//! lets the hostile worker's change run code in a job and rewrite the job's own script, the
//! daemons those jobs leave, and the operator who starts a quitting task over and then tries to
//! bring its first attempt back. The hostile worker's side is `tests/workers/chaos_hostile.sh`.

use crate::support::{Org, Spec, commit_file, git, job, output_text};
use orch::milestone::Milestone;
use orch::store::workers::WorkerRecord;
use std::collections::BTreeMap;
use std::time::Duration;

/// The repository the hostile task works on.
pub const HOSTILE_REPO: &str = "tools";

/// `tools`' CI script: the repository's checks (`checks/*.sh`, which a change may add: not
/// protected), then the status rule. The job names it, so it is protected by default: the runner
/// runs the base's version whatever a change made of it.
const CHECK_SCRIPT: &str = "# The repository's checks, then the status rule.
for f in checks/*.sh; do [ -e \"$f\" ] && sh \"$f\"; done
grep -qx good status.txt
";

/// `spec` with `tools`' jobs: `check` sleeps `sleep` (as the other repositories' do), then runs
/// `ci/check.sh`; `radicle-push` needs it.
pub fn with_hostile_ci(mut spec: Spec, sleep: Duration) -> Spec {
    let tools = spec
        .repos
        .iter_mut()
        .find(|r| r.name == HOSTILE_REPO)
        .expect("the hostile task's repository");
    tools.jobs = vec![
        job(
            "check",
            &format!("sleep {:.3}; sh ci/check.sh", sleep.as_secs_f64()),
        )
        .timeout(Some("2m")),
        job("radicle-push", "true")
            .needs(&["check"])
            .timeout(Some("1m")),
    ];
    spec
}

/// Before the first spawn (the local forge is seeded from the clone then): `tools`' base gets
/// its CI script and a green status (`Org::new` writes the status only where it chose the
/// jobs), and the workers' shared directories exist, writable by a worker of another account
/// and by its CI jobs.
pub fn prepare(org: &Org) {
    let clone = org.clone_path(HOSTILE_REPO);
    std::fs::create_dir_all(clone.join("ci")).unwrap();
    commit_file(&clone, "status.txt", "good\n", "the base is green");
    commit_file(&clone, "ci/check.sh", CHECK_SCRIPT, "the check");
    for d in ["ci-daemons", "pushed"] {
        let dir = org.ctl.join(d);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o777))
            .unwrap();
    }
}

/// Nothing of the hostile change's reached the base: its CI script is the one `prepare` wrote.
pub fn assert_base_check_script_kept(org: &Org) {
    let bare = org.state.join("forge").join(format!("{HOSTILE_REPO}.git"));
    let script = git(&bare, &["show", "refs/heads/main:ci/check.sh"]);
    assert_eq!(
        script,
        CHECK_SCRIPT.trim_end(),
        "{HOSTILE_REPO}'s base branch has another ci/check.sh: a change that rewrote it landed"
    );
}

/// The pids of the daemons CI jobs started (`checks/daemon.sh` of the hostile change).
pub fn ci_daemons(org: &Org) -> Vec<i32> {
    std::fs::read_dir(org.ctl.join("ci-daemons"))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

/// Those still running (by their command line: a pid may have been taken again since).
pub fn live_ci_daemons(org: &Org) -> Vec<(i32, String)> {
    ci_daemons(org)
        .into_iter()
        .filter(|p| orch::process::process_alive(*p, None))
        .filter_map(|p| Some((p, crate::support::cmdline(p)?)))
        .filter(|(_, cmd)| cmd.contains("ci-daemons"))
        .collect()
}

/// The operator's part (issue 34 item 1): a task whose first word is `quits` ends BLOCKED in
/// every life of its first worker. Once that worker has stopped, the operator releases its
/// lock (`orch release --force`) and spawns the task again (same id, its text without
/// `quits`); once that attempt is DONE and landed, `orch respawn` and `orch approve` of the
/// first attempt must be refused, naming the attempt that replaced it.
#[derive(Default)]
pub struct Operator {
    /// Task id → its first worker, which the operator started over, and whether its refusals
    /// were checked.
    started_over: BTreeMap<String, (String, bool)>,
}

impl Operator {
    /// The text a spawn of this task gives: a task started over does not quit again.
    pub fn task_text<'a>(&self, id: &str, task: &'a str) -> &'a str {
        match self.started_over.contains_key(id) {
            true => task.strip_prefix("quits ").unwrap_or(task),
            false => task,
        }
    }

    /// The first attempt of task `id`, when the operator started it over.
    pub fn first_attempt(&self, id: &str) -> Option<&str> {
        self.started_over.get(id).map(|(w, _)| w.as_str())
    }

    /// Whether task `id` has a worker other than a first attempt the operator let go.
    pub fn has_worker(&self, id: &str, workers: &[WorkerRecord]) -> bool {
        workers.iter().any(|w| {
            w.task_id.as_deref() == Some(id) && Some(w.id.as_str()) != self.first_attempt(id)
        })
    }

    /// One look at the workers: starts over what quit, and tries to bring back what was
    /// replaced once its replacement landed. Returns how many refusals it saw (two a task).
    pub fn look(
        &mut self,
        org: &Org,
        tasks: &[(String, &str, &str)],
        workers: &[WorkerRecord],
        alive: impl Fn(&WorkerRecord) -> bool,
    ) -> usize {
        for (id, _, task) in tasks {
            if !task.starts_with("quits ") || self.started_over.contains_key(id) {
                continue;
            }
            let Some(first) = workers.iter().find(|w| w.task_id.as_deref() == Some(id)) else {
                continue;
            };
            let stopped = first.milestone() == Milestone::Blocked
                && !alive(first)
                && !first
                    .worker_pid
                    .is_some_and(|g| orch::process::group_alive(g as i32));
            if !stopped {
                continue;
            }
            let out = org.run(&[
                "release",
                &first.id,
                "--force",
                "--reason",
                "chaos: the operator starts the task over",
                "--by",
                "chaos",
            ]);
            assert!(
                out.status.success(),
                "orch release --force {}: {}",
                first.id,
                output_text(&out)
            );
            self.started_over
                .insert(id.clone(), (first.id.clone(), false));
        }
        let mut refused = 0;
        for (id, (first, checked)) in self.started_over.iter_mut().filter(|(_, s)| !s.1) {
            let Some(second) = workers.iter().find(|w| {
                w.task_id.as_deref() == Some(id.as_str())
                    && &w.id != first
                    && w.progress.change_complete()
            }) else {
                continue;
            };
            for verb in ["respawn", "approve"] {
                let out = org.run(&[verb, first]);
                let text = output_text(&out);
                assert!(
                    out.status.code() == Some(1)
                        && text.contains("superseded")
                        && text.contains(&second.id),
                    "orch {verb} {first}, whose task {id} {} did and landed, was not refused as superseded (exit {:?}):\n{text}\n{}",
                    second.id,
                    out.status.code(),
                    org.dump()
                );
                refused += 1;
            }
            *checked = true;
        }
        refused
    }

    /// Every `quits` task was started over, and its first attempt refused twice; that attempt
    /// stayed BLOCKED, holding no lock.
    pub fn assert_done(&self, tasks: &[(String, &str, &str)], workers: &[WorkerRecord]) {
        for (id, _, task) in tasks.iter().filter(|(_, _, t)| t.starts_with("quits ")) {
            let (first, checked) = self
                .started_over
                .get(id)
                .unwrap_or_else(|| panic!("task {id} ({task}) was never started over"));
            assert!(checked, "{id}: {first}'s refusals were never tried");
            let w = workers.iter().find(|w| &w.id == first).unwrap();
            assert_eq!(w.milestone(), Milestone::Blocked, "{first}");
        }
    }
}
