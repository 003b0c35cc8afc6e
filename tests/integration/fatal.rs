//! FATAL (`failure_taxonomy.fatal`): an operator's `orch fatal`, a worker's `orch report FATAL`
//! and a secret in a pushed diff halt a chain — every worker in it stopped as a cascade pauses
//! one, nothing lost — and nothing in it starts or goes on until an operator clears the hold.

use crate::support::{
    DEADLINE, Org, RepoSpec, Spec, held_still, output_text, poll_until, proc_state,
};
use serde_json::Value;

fn pid_of(org: &Org, id: &str) -> i32 {
    let pid_file = org.out.join(format!("pid-{id}"));
    poll_until(
        "the worker to write its pid",
        DEADLINE,
        || std::fs::read_to_string(&pid_file).ok()?.trim().parse().ok(),
        || org.diag(id),
    )
}

/// Every line of `alerts.jsonl` (the operator's FATAL names no worker).
fn all_alerts(org: &Org) -> Vec<Value> {
    std::fs::read_to_string(org.state.join("alerts.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn star() -> Spec {
    Spec::local("fatal_worker.sh")
        .repo(RepoSpec::new("core").standard_ci("true"))
        .repo(RepoSpec::new("a").deps(&["core"]))
        .repo(RepoSpec::new("b").deps(&["core"]))
        .repo(RepoSpec::new("c").deps(&["core"]))
        .repo(RepoSpec::new("d").deps(&["core"]))
}

#[test]
fn fatal_halts_a_chain_of_three_live_workers_and_none_goes_on_until_it_is_cleared() {
    let org = Org::new(star());
    let ids: Vec<String> = ["a", "b", "c"]
        .iter()
        .map(|r| org.spawn_detached(r, "wait"))
        .collect();
    let pids: Vec<i32> = ids.iter().map(|id| pid_of(&org, id)).collect();

    let out = org.run(&[
        "fatal",
        "core",
        "--reason",
        "data corruption in core's ledger",
        "--by",
        "alice",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    for (id, pid) in ids.iter().zip(&pids) {
        let w = org.wait_milestone(id, "PAUSED", DEADLINE);
        assert!(
            w.progress
                .halted
                .as_deref()
                .is_some_and(|h| h.contains("data corruption")),
            "{:?}",
            w.progress.halted
        );
        poll_until(
            "the worker's processes to be stopped",
            DEADLINE,
            || held_still(*pid).then_some(()),
            || format!("state {:?}\n{}", proc_state(*pid), org.diag(id)),
        );
        assert_eq!(
            org.lock_of(id).as_deref(),
            Some(w.repo.as_str()),
            "lock kept"
        );
    }
    let alerts = all_alerts(&org);
    let fatal = alerts
        .iter()
        .find(|a| a["kind"] == "fatal")
        .expect("a fatal alert");
    assert_eq!(fatal["severity"], "critical", "{fatal:#}");
    assert!(
        fatal["message"]
            .as_str()
            .unwrap()
            .contains("data corruption in core's ledger"),
        "{fatal:#}"
    );

    // Nothing goes on: resume, respawn, a new spawn in the chain, a wave's tick.
    let out = org.run(&["resume"]);
    assert!(out.status.success(), "{}", output_text(&out));
    let out = org.run(&["respawn", &ids[0], "--note", "go on"]);
    assert_eq!(out.status.code(), Some(1), "{}", output_text(&out));
    assert!(output_text(&out).contains("FATAL"), "{}", output_text(&out));
    let out = org.run(&["spawn", "--repo", "d", "--task", "wait"]);
    assert_eq!(out.status.code(), Some(1), "{}", output_text(&out));
    assert!(output_text(&out).contains("FATAL"), "{}", output_text(&out));
    let wave = org.root.join("w.yaml");
    std::fs::write(
        &wave,
        "name: w\ntasks:\n  - {id: d-1, repo: d, task: \"wait\"}\n",
    )
    .unwrap();
    let out = org.run(&["wave", "run", wave.to_str().unwrap(), "--tick"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    assert_eq!(org.workers().len(), 3, "nothing started in the chain");
    let out = org.run(&["can-spawn", "d"]);
    assert_eq!(out.status.code(), Some(1), "{}", output_text(&out));
    for (id, pid) in ids.iter().zip(&pids) {
        assert_eq!(org.worker(id).progress.milestone.to_string(), "PAUSED");
        assert!(
            held_still(*pid),
            "{id} still stopped: {:?}",
            proc_state(*pid)
        );
    }
    // `orch fatal core` shows the standing hold; so does `orch status` (a line, a column).
    let out = org.run(&["fatal", "core"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    assert!(
        output_text(&out).contains("(standing)"),
        "{}",
        output_text(&out)
    );
    let shown = org.json(&["fatal", "a", "--json"]);
    assert_eq!(shown["action"], "shown", "{shown:#}");
    assert_eq!(shown["holds"][0]["hold"]["repo"], "core", "{shown:#}");
    assert_eq!(shown["holds"][0]["hold"]["by"], "alice", "{shown:#}");
    assert_eq!(shown["holds"][0]["new"], false, "{shown:#}");
    let mut stopped: Vec<String> = shown["holds"][0]["stopped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    stopped.sort();
    let mut all = ids.clone();
    all.sort();
    assert_eq!(stopped, all, "{shown:#}");
    let status = org.json(&["status", "--json"]);
    assert_eq!(status["fatal_holds"][0]["repo"], "core", "{status:#}");
    for w in status["workers"].as_array().unwrap() {
        assert!(
            w["halted"]
                .as_str()
                .is_some_and(|h| h.contains("data corruption")),
            "{w:#}"
        );
    }
    let table = output_text(&org.run(&["status"]));
    assert!(
        table.contains("PAUSED (FATAL)") && table.contains("FATAL on core's chain by alice"),
        "{table}"
    );

    // Cleared: every worker goes on where it stopped, and finishes; the alert is resolved;
    // who cleared it stays on record.
    let out = org.run(&["fatal", "--clear", "core", "--by", "bob", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let cleared: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(cleared["action"], "cleared", "{cleared:#}");
    assert_eq!(cleared["cleared"]["cleared_by"], "bob", "{cleared:#}");
    assert_eq!(cleared["cleared"]["hold"]["by"], "alice", "{cleared:#}");
    let out = org.run(&["fatal", "b"]);
    assert_eq!(out.status.code(), Some(1), "{}", output_text(&out));
    let text = output_text(&out);
    assert!(
        text.contains("no FATAL over its chain")
            && text.contains("by alice")
            && text.contains("cleared by bob"),
        "{text}"
    );
    let alerts = org.json(&["alerts", "--json"]);
    let fatal = alerts["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["kind"] == "fatal")
        .expect("the fatal alert")
        .clone();
    assert!(fatal["resolved_at"].is_string(), "{fatal:#}");
    for (id, pid) in ids.iter().zip(&pids) {
        let w = org.wait_milestone(id, "WORKING", DEADLINE);
        assert_eq!(w.progress.halted, None);
        poll_until(
            "the worker's processes to run again",
            DEADLINE,
            || (!held_still(*pid)).then_some(()),
            || org.diag(id),
        );
        org.release(id);
    }
    for id in &ids {
        org.wait_done(id);
    }
}

#[test]
fn a_workers_fatal_report_halts_its_chain() {
    let org = Org::new(star());
    let id = org.spawn_detached("core", "report");
    let w = org.wait_milestone(&id, "PAUSED", DEADLINE);
    assert!(
        w.progress
            .halted
            .as_deref()
            .is_some_and(|h| h.contains("the ledger's totals")),
        "{:?}",
        w.progress.halted
    );
    assert_eq!(org.count_events(&id, "fatal"), 1, "{}", org.diag(&id));
    let alerts = org.alerts(&id);
    let fatal = alerts
        .iter()
        .find(|a| a["kind"] == "fatal")
        .expect("a fatal alert");
    assert_eq!(fatal["severity"], "critical", "{fatal:#}");
    // Its chain is held: a dependent does not start, and the hold survives in holds.yaml.
    let out = org.run(&["spawn", "--repo", "a", "--task", "wait"]);
    assert_eq!(out.status.code(), Some(1), "{}", output_text(&out));
    let holds = std::fs::read_to_string(org.state.join("holds.yaml")).unwrap();
    assert!(holds.contains("the ledger's totals"), "{holds}");

    // Outside a worker, FATAL needs a reason.
    let out = org.run(&["report", "FATAL"]);
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));

    // Cleared: the worker goes on (its `orch report FATAL` may have been stopped with it
    // before it could exit: it says how it ended now) and finishes.
    let out = org.run(&["fatal", "--clear", "core"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let code_file = org.out.join(format!("fatal-{id}.code"));
    let code = poll_until(
        "orch report FATAL to exit",
        DEADLINE,
        || {
            std::fs::read_to_string(&code_file)
                .ok()
                .filter(|c| c.ends_with('\n'))
        },
        || org.diag(&id),
    );
    assert_eq!(code.trim(), "0", "orch report FATAL: {}", {
        std::fs::read_to_string(org.out.join(format!("fatal-{id}.out"))).unwrap_or_default()
    });
    org.release(&id);
    org.wait_done(&id);
}

/// A secret a person would decode: a private key in a UTF-16 file (git takes it for binary:
/// no lines in the diff) and an AWS key id base64'd in the commit message. Both are found,
/// FATAL, named without their values.
#[test]
fn an_encoded_secret_in_a_file_or_a_commit_message_is_fatal() {
    let org = Org::new(star());
    let mut utf16 = vec![0xFF, 0xFE];
    for u in "notes\n-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n".encode_utf16() {
        utf16.extend(u.to_le_bytes());
    }
    std::fs::write(org.out.join("encoded.bin"), &utf16).unwrap();
    let id = org.spawn_detached("core", "encoded");
    let w = org.wait_milestone(&id, "PAUSED", DEADLINE);
    let secrets = &w.progress.secrets;
    assert!(
        secrets
            .iter()
            .any(|s| s == "notes.bin (as UTF-16 text):0: an OpenSSH private key"),
        "{secrets:?}"
    );
    assert!(
        secrets
            .iter()
            .any(|s| s.starts_with("(message of commit ")
                && s.ends_with("):3: an AWS access key id")),
        "{secrets:?}"
    );
    let fatal = poll_until(
        "the fatal alert in alerts.jsonl",
        DEADLINE,
        || all_alerts(&org).into_iter().find(|a| a["kind"] == "fatal"),
        || format!("{:?}", all_alerts(&org)),
    );
    let message = fatal["message"].as_str().unwrap();
    assert!(message.contains("an AWS access key id"), "{message}");
    assert!(!message.contains("ABCDEFGHIJKLMNOP"), "{message}");
    org.run(&["cancel", &id]);
}

#[test]
fn a_committed_private_key_is_fatal_before_it_can_land() {
    let org = Org::new(star().land("{policy: merge}"));
    let base_before = org.git_base_head("core");
    let id = org.spawn_detached("core", "secret");
    let w = org.wait_milestone(&id, "PAUSED", DEADLINE);
    assert!(
        w.progress
            .secrets
            .iter()
            .any(|s| s == "deploy/id_ed25519:1: an OpenSSH private key"),
        "{:?}",
        w.progress.secrets
    );
    // alerts.jsonl is appended just after the commit that made the worker PAUSED.
    let fatal = poll_until(
        "the fatal alert in alerts.jsonl",
        DEADLINE,
        || all_alerts(&org).into_iter().find(|a| a["kind"] == "fatal"),
        || format!("{:?}", all_alerts(&org)),
    );
    let message = fatal["message"].as_str().unwrap();
    assert!(
        message.contains("deploy/id_ed25519:1: an OpenSSH private key"),
        "{message}"
    );
    let text = std::fs::read_to_string(org.state.join("alerts.jsonl")).unwrap();
    assert!(
        !text.contains("b3BlbnNzaC1rZXkt"),
        "the key itself is never written: {text}"
    );

    // Cleared (the key rotated): the worker goes on, claims DONE on a green CI — refused.
    let out = org.run(&["fatal", "--clear", "core"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    poll_until(
        "the DONE on the secret to be refused",
        DEADLINE,
        || {
            org.violations(&id)
                .iter()
                .any(|v| v.contains("done_refused"))
                .then_some(())
        },
        || org.diag(&id),
    );
    assert_ne!(org.worker(&id).progress.milestone.to_string(), "DONE");
    assert_eq!(
        org.git_base_head("core"),
        base_before,
        "never on the base branch"
    );
}

/// With landing, a FATAL offers the revert of what the chain landed since the task began —
/// the commands that do it by hand — and orch reverts nothing on its own.
#[test]
fn a_fatal_offers_the_revert_of_what_the_chain_landed_and_never_reverts() {
    let org = Org::new(star());
    let id = org.spawn_detached("a", "wait");
    org.release(&id);
    org.wait_done(&id);
    let landed = org
        .worker(&id)
        .progress
        .landing
        .and_then(|l| l.landed)
        .expect("the change landed")
        .to_string();
    assert_eq!(org.git_base_head("a"), landed);

    let out = org.run(&[
        "fatal",
        &id,
        "--reason",
        "a breaking change to a stable interface",
    ]);
    let said = output_text(&out);
    assert_eq!(out.status.code(), Some(0), "{said}");
    assert!(said.contains(&landed[..7]), "{said}");
    assert!(said.contains("revert --no-edit"), "{said}");
    let alerts = all_alerts(&org);
    let fatal = alerts
        .iter()
        .find(|a| a["kind"] == "fatal")
        .expect("a fatal alert");
    assert!(
        fatal["message"]
            .as_str()
            .unwrap()
            .contains("landed 1 change(s)"),
        "{fatal:#}"
    );
    // Shown again while it stands; the base branch is where the change put it.
    let out = org.run(&["fatal", "a"]);
    assert!(
        output_text(&out).contains("revert --no-edit"),
        "{}",
        output_text(&out)
    );
    assert_eq!(
        org.git_base_head("a"),
        landed,
        "orch reverts nothing itself"
    );
}
