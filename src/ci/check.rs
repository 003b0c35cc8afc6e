//! A dependent's downstream check, judged from the runs of one commit (pure). The commit is
//! the dependent's base head, pushed to a verification branch so that its CI runs with an
//! upstream's change landed; the same commit usually has a run on its base branch too, from
//! before the change. The two mean different things (issue 36: "a flask base that was already
//! red was reported as broken by the change"), so they are judged apart: the check on the
//! verification branch's runs alone, and — when it is red — the base branch's runs say whether
//! the head was red already without the change.

use super::CiRun;
use super::verdict::{CiPolicy, Verdict, VerdictKind, verdict};

/// What a check's runs say, once it can be said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Check {
    /// Not decided yet: the check's runs are going, or it is red and the base branch's run
    /// without the change is going.
    Waiting,
    /// The check's verdict; `already_red` (why, in words) when it is not green and the same
    /// head was red on its base branch without the change. `None` there: that run was green,
    /// or there is none to tell.
    Decided {
        verdict: Verdict,
        already_red: Option<String>,
    },
}

/// Judges `runs` (every run of the checked commit) for a check pushed to `verify_ref` of a
/// dependent whose runs without the change are those of `without` (full refs: its base
/// branch, and a baseline orch ran itself). A run that names no ref counts as the check's (a
/// forge that does not say).
pub fn judge(
    runs: &[CiRun],
    verify_ref: &str,
    without: &[&str],
    policy: &CiPolicy,
    now_ms: i64,
) -> Check {
    let on = |wanted: &[&str], unnamed: bool| -> Vec<CiRun> {
        runs.iter()
            .filter(|r| match r.git_ref.as_deref() {
                Some(g) => wanted.contains(&g),
                None => unnamed,
            })
            .cloned()
            .collect()
    };
    let check = verdict(&on(&[verify_ref], true), policy, None, now_ms);
    if !check.kind.is_terminal() {
        return Check::Waiting;
    }
    if check.kind == VerdictKind::Green {
        return Check::Decided {
            verdict: check,
            already_red: None,
        };
    }
    let base = on(without, false);
    if base.is_empty() {
        return Check::Decided {
            verdict: check,
            already_red: None,
        };
    }
    let before = verdict(&base, policy, None, now_ms);
    if !before.kind.is_terminal() {
        return Check::Waiting;
    }
    let already_red = (before.kind != VerdictKind::Green).then(|| {
        let failed = if before.failed_jobs.is_empty() {
            String::new()
        } else {
            format!(", {} failed", before.failed_jobs.join(", "))
        };
        format!("its base CI without the change: {}{failed}", before.kind)
    });
    Check::Decided {
        verdict: check,
        already_red,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ci::{CiJob, JobStatus};
    use std::time::Duration;

    const VERIFY: &str = "refs/heads/orch/verify/w1";
    const BASE: &str = "refs/heads/main";

    fn policy() -> CiPolicy {
        CiPolicy {
            sync_job: "radicle-push".into(),
            required_jobs: None,
            start_timeout: Duration::from_secs(300),
        }
    }

    fn run(id: i64, git_ref: Option<&str>, test: JobStatus) -> CiRun {
        let sync = if test == JobStatus::Success {
            JobStatus::Success
        } else if test.is_done() {
            JobStatus::Skipped
        } else {
            JobStatus::Waiting
        };
        CiRun {
            id,
            number: id,
            event: "push".into(),
            status: None,
            workflow: None,
            url: None,
            git_ref: git_ref.map(str::to_string),
            jobs: [("test", test), ("radicle-push", sync)]
                .into_iter()
                .map(|(name, status)| CiJob {
                    name: name.into(),
                    status,
                    attempt: 1,
                    id: None,
                    past_limit: false,
                })
                .collect(),
        }
    }

    fn judged(runs: &[CiRun]) -> Check {
        judge(runs, VERIFY, &[BASE], &policy(), 0)
    }

    fn decided(c: &Check) -> (VerdictKind, bool) {
        match c {
            Check::Decided {
                verdict,
                already_red,
            } => (verdict.kind, already_red.is_some()),
            Check::Waiting => panic!("not decided: {c:?}"),
        }
    }

    #[test]
    fn a_base_run_red_before_the_change_does_not_make_a_green_check_red() {
        let runs = [
            run(1, Some(BASE), JobStatus::Failure),
            run(2, Some(VERIFY), JobStatus::Success),
        ];
        assert_eq!(decided(&judged(&runs)), (VerdictKind::Green, false));
    }

    #[test]
    fn red_with_and_without_the_change_is_already_red() {
        let runs = [
            run(1, Some(BASE), JobStatus::Failure),
            run(2, Some(VERIFY), JobStatus::Failure),
        ];
        assert_eq!(decided(&judged(&runs)), (VerdictKind::Red, true));
    }

    #[test]
    fn red_only_with_the_change_is_the_changes() {
        let runs = [
            run(1, Some(BASE), JobStatus::Success),
            run(2, Some(VERIFY), JobStatus::Failure),
        ];
        assert_eq!(decided(&judged(&runs)), (VerdictKind::Red, false));
        // No base run to tell: the check's own word, as before.
        assert_eq!(decided(&judged(&runs[1..])), (VerdictKind::Red, false));
    }

    #[test]
    fn a_check_waits_for_its_own_runs_and_for_a_base_run_that_is_going() {
        // Only the base run has finished: the check has not.
        assert_eq!(
            judged(&[run(1, Some(BASE), JobStatus::Failure)]),
            Check::Waiting
        );
        let runs = [
            run(1, Some(BASE), JobStatus::Running),
            run(2, Some(VERIFY), JobStatus::Failure),
        ];
        assert_eq!(judged(&runs), Check::Waiting);
    }

    #[test]
    fn runs_that_name_no_ref_are_the_checks() {
        let runs = [run(1, None, JobStatus::Failure)];
        assert_eq!(decided(&judged(&runs)), (VerdictKind::Red, false));
    }
}
