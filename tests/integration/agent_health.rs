//! How an agent's run ended decides what orch does next (issue 9, item 6), through the real
//! binary with a scripted stand-in for Claude Code's stream-json output
//! (`tests/workers/fake_claude.sh`): bad credentials and a run that did nothing wait for an
//! operator (BLOCKED, alert), a rate limit is transient and holds new workers of that agent
//! back until its reset.

use crate::support::{DEADLINE, Org, RepoSpec, Spec, output_text, poll_until, worker_script};
use orch::milestone::Milestone;

fn org(mode: &str) -> Org {
    let mut spec = Spec::local("happy.sh")
        .repo(RepoSpec::new("alpha").standard_ci("true"))
        .repo(RepoSpec::new("beta").standard_ci("true"));
    spec.worker_section = Some(format!(
        "  agent: claude\n  command: [sh, {}, {mode}]\n  env_passthrough: [HOME, PATH]\n  stop_grace: 1s\n",
        worker_script("fake_claude.sh").display()
    ));
    Org::new(spec)
}

fn alert_kinds(org: &Org, id: &str) -> Vec<String> {
    org.alerts(id)
        .iter()
        .map(|a| a["kind"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn bad_credentials_and_a_run_that_did_nothing_wait_for_an_operator() {
    for (mode, why) in [
        ("bad_key", "missing or bad credentials"),
        ("idle", "without a commit or a claim"),
    ] {
        let org = org(mode);
        let id = org.spawn_detached("alpha", "anything");
        let w = org.wait_milestone(&id, "BLOCKED", DEADLINE);
        let reason = w.progress.end_reason.clone().unwrap_or_default();
        assert!(reason.contains(why), "{mode}: {reason}\n{}", org.diag(&id));
        // alerts.jsonl is a view written after the commit: polled.
        poll_until(
            "the agent_blocked alert",
            DEADLINE,
            || {
                alert_kinds(&org, &id)
                    .contains(&"agent_blocked".to_string())
                    .then_some(())
            },
            || format!("{mode}: {:?}", alert_kinds(&org, &id)),
        );
        // Not given to a replacement: the lock stays, `orch resume` leaves it alone.
        assert_eq!(org.locks_of(&id), vec!["alpha".to_string()]);
        org.wait_supervisor_gone(&id);
        let resumed = org.resume();
        assert!(
            resumed["resumed"].as_array().unwrap().is_empty(),
            "{resumed}"
        );
        assert_eq!(org.worker(&id).progress.milestone, Milestone::Blocked);
    }
}

#[test]
fn a_rate_limit_is_transient_and_holds_new_workers_of_the_agent_back() {
    let org = org("rate_limited");
    let id = org.spawn_detached("alpha", "anything");
    poll_until(
        "the transient end",
        DEADLINE,
        || {
            let w = org.worker(&id);
            w.progress
                .end_reason
                .clone()
                .filter(|r| r.contains("rate-limited"))
        },
        || org.diag(&id),
    );
    // Still WORKING (a replacement continues it later), alerted once as rate-limited.
    assert_eq!(org.worker(&id).progress.milestone, Milestone::Working);
    poll_until(
        "the rate-limit and transient alerts",
        DEADLINE,
        || {
            let kinds = alert_kinds(&org, &id);
            (kinds.contains(&"agent_rate_limited".to_string())
                && kinds.contains(&"agent_transient".to_string()))
            .then_some(())
        },
        || format!("{:?}", alert_kinds(&org, &id)),
    );
    // No new worker of the agent before the reset, on any repository.
    let out = org.run(&["spawn", "--repo", "beta", "--task", "more"]);
    assert_eq!(out.status.code(), Some(1), "{}", output_text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("rate-limited"),
        "{}",
        output_text(&out)
    );
    // Nor a replacement: `orch resume` leaves it for after the reset.
    org.wait_supervisor_gone(&id);
    let resumed = org.resume();
    assert!(
        resumed["resumed"].as_array().unwrap().is_empty(),
        "{resumed}"
    );
    assert_eq!(org.worker(&id).respawns, 0);
}
