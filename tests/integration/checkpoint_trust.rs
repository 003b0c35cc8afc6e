//! `orch resume --from-checkpoints` treats checkpoint files as evidence, not truth: it does
//! not run beside a live supervisor; a DONE needs CI's word again; a checkpoint that is not
//! what orch would have written (a worktree outside the state directory, an unknown
//! repository), a corrupt one and a deleted one are refused by name (exit 1), their chain
//! held for an operator and nothing they point at touched.

use crate::support::{Org, Spec, cmdline, output_text, processes};
use orch::checkpoint::Checkpoint;
use orch::milestone::Milestone;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

fn org() -> Org {
    Org::new(Spec::resumable(&[("core", &[]), ("side", &[])]))
}

/// Starts a worker on `repo` with `task` (see tests/workers/resume_worker.sh), waits for
/// `mark`, and SIGKILLs its supervisor: an orphan whose checkpoint is up to date.
fn orphan(org: &Org, repo: &str, task: &str, mark: &str) -> String {
    orphans(org, &[(repo, task, mark)]).remove(0)
}

/// [`orphan`] for several workers at once (all started before any supervisor is killed:
/// every spawn resumes the orphans it finds).
fn orphans(org: &Org, specs: &[(&str, &str, &str)]) -> Vec<String> {
    let ids: Vec<String> = specs
        .iter()
        .map(|(repo, task, _)| org.spawn(repo, task, &format!("t-{repo}")))
        .collect();
    for (id, (_, _, mark)) in ids.iter().zip(specs) {
        org.wait_mark(id, 1, mark);
        org.wait_until(
            &format!("{id}'s checkpoint to be up to date"),
            Duration::from_secs(30),
            || {
                let w = org.worker(id);
                orch::checkpoint::read(&orch::checkpoint::path_for(&org.state, &w))
                    .is_ok_and(|cp| cp.current_milestone == w.milestone().as_str())
            },
        );
    }
    for id in &ids {
        org.kill_supervisor(id);
    }
    ids
}

fn checkpoint_path(org: &Org, id: &str) -> PathBuf {
    orch::checkpoint::path_for(&org.state, &org.worker(id))
}

fn edit(path: &Path, f: impl FnOnce(&mut Checkpoint)) {
    let mut cp = orch::checkpoint::read(path).unwrap();
    f(&mut cp);
    std::fs::write(path, orch::yaml::to_yaml_string(&cp).unwrap()).unwrap();
}

fn remove_db(org: &Org) {
    for f in ["orch.db", "orch.db-wal", "orch.db-shm"] {
        let _ = std::fs::remove_file(org.state.join(f));
    }
}

/// The database is lost; `orch resume --from-checkpoints` (human output).
fn rebuild(org: &Org) -> Output {
    remove_db(org);
    org.run(&["resume", "--from-checkpoints"])
}

/// `(repo, holder)` of every active lock.
fn locks(org: &Org) -> Vec<(String, String)> {
    let mut l: Vec<(String, String)> = org
        .store()
        .locks()
        .unwrap()
        .into_iter()
        .map(|l| (l.repo, l.holder))
        .collect();
    l.sort();
    l
}

fn assert_refused_naming(out: &Output, what: &[&str]) {
    let text = output_text(out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    let line = text
        .lines()
        .find(|l| l.contains("REFUSED"))
        .unwrap_or_else(|| panic!("no REFUSED line: {text}"));
    for w in what {
        assert!(line.contains(w), "{w:?} not in {line}");
    }
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("could not be trusted"),
        "{text}"
    );
}

#[test]
fn no_rebuild_beside_a_live_supervisor() {
    let org = org();
    let id = org.spawn("core", "hang in it", "t-live");
    org.wait_mark(&id, 1, "hanging");
    let pid = org.supervisor_pid(&id);
    // The database goes (its supervisor keeps the deleted file open and goes on).
    let out = rebuild(&org);
    let text = output_text(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains(&format!("pid {pid}")), "{text}");
    assert!(text.contains("alive"), "{text}");
    assert!(
        text.contains(&id),
        "the supervisor's command names its worker: {text}"
    );
    // Nothing was started beside it.
    let supervisors: Vec<i32> = processes()
        .into_iter()
        .filter(|(p, state, _, _)| {
            *state != 'Z'
                && cmdline(*p).is_some_and(|c| c.contains("__supervise") && c.contains(&id))
        })
        .map(|(p, ..)| p)
        .collect();
    assert_eq!(supervisors, vec![pid]);
    assert_eq!(org.lives(&id), 1, "no second worker");
}

#[test]
fn a_checkpoint_edited_to_done_is_not_done_without_ci_proof() {
    let org = org();
    let id = orphan(&org, "core", "push-hang it", "pushed");
    let sha = org.worker(&id).progress.tracked_sha.clone().unwrap();
    // CI is still running (its gate is closed): nothing proves the SHA green.
    edit(&checkpoint_path(&org, &id), |cp| {
        cp.current_milestone = "DONE".into();
        let mut p: Value = serde_json::from_str(&cp.progress_json).unwrap();
        p["milestone"] = "DONE".into();
        p["verdict"] = "green".into();
        cp.progress_json = p.to_string();
        cp.lock_held = false;
        for ci in &mut cp.ci_runs {
            ci.verdict = Some("green".into());
        }
    });
    remove_db(&org);
    let answer = org.resume_with(&["--from-checkpoints"]);
    let unproven = answer["rebuilt"]["unproven_done"].as_array().unwrap();
    assert_eq!(unproven.len(), 1, "{answer}");
    assert!(
        unproven[0].as_str().unwrap().contains("PUSHED_TO_CI"),
        "{answer}"
    );
    let w = org.worker(&id);
    assert_eq!(w.milestone(), Milestone::PushedToCi, "{answer}");
    assert_eq!(w.progress.tracked_sha.as_deref(), Some(sha.as_str()));
    assert_ne!(w.progress.verdict.map(|v| v.as_str()), Some("green"));
    assert!(
        org.pushes(&id)
            .iter()
            .all(|p| p.verdict.map(|v| v.as_str()) != Some("green")),
        "the file's green is not recorded"
    );
    assert_eq!(
        locks(&org),
        vec![("core".to_string(), id.clone())],
        "the chain stays locked until CI proves it"
    );
    // Normal supervision verifies it: CI goes green, then (only then) DONE.
    org.open_gate("core");
    org.wait_done(&id);
    let last = org.pushes(&id).into_iter().last().unwrap();
    assert_eq!(last.verdict.map(|v| v.as_str()), Some("green"));
    assert!(locks(&org).is_empty());
}

#[test]
fn a_worktree_outside_the_state_directory_is_refused_and_left_alone() {
    let org = org();
    let id = orphan(&org, "core", "hang in it", "hanging");
    let victim = org.root.join("precious");
    std::fs::create_dir_all(&victim).unwrap();
    std::fs::write(victim.join("data.txt"), "keep me").unwrap();
    let cp = checkpoint_path(&org, &id);
    edit(&cp, |c| c.worktree = victim.display().to_string());
    let out = rebuild(&org);
    assert_refused_naming(&out, &[&cp.display().to_string(), "worktree", "precious"]);
    assert_eq!(
        std::fs::read_to_string(victim.join("data.txt")).unwrap(),
        "keep me"
    );
    let siblings: Vec<String> = std::fs::read_dir(&org.root)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("unusable"))
        .collect();
    assert!(siblings.is_empty(), "moved aside: {siblings:?}");
    assert!(org.store().worker(&id).unwrap().is_none(), "not rebuilt");
    assert_eq!(
        locks(&org),
        vec![("core".to_string(), "hold:orch-resume".to_string())]
    );
    assert_eq!(org.lives(&id), 1, "no replacement");
}

#[test]
fn an_unknown_repository_is_refused() {
    let org = org();
    let id = orphan(&org, "core", "hang in it", "hanging");
    let cp = checkpoint_path(&org, &id);
    edit(&cp, |c| c.repo_name = "ghost".into());
    let out = rebuild(&org);
    assert_refused_naming(
        &out,
        &[&cp.display().to_string(), "unknown repository \"ghost\""],
    );
    let held = locks(&org);
    assert!(held.iter().all(|(repo, _)| repo != "ghost"), "{held:?}");
    assert_eq!(
        held,
        vec![("core".to_string(), "hold:orch-resume".to_string())]
    );
}

#[test]
fn a_corrupt_checkpoint_is_reported_and_its_chain_stays_held() {
    let org = org();
    let ids = orphans(
        &org,
        &[
            ("core", "hang in it", "hanging"),
            ("side", "hang in it", "hanging"),
        ],
    );
    let (id, other) = (ids[0].clone(), ids[1].clone());
    let cp = checkpoint_path(&org, &id);
    std::fs::write(&cp, "worker_id: [unclosed\n\u{0}garbage").unwrap();
    let out = rebuild(&org);
    assert_refused_naming(&out, &[&cp.display().to_string(), "unreadable"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&cp.display().to_string()),
        "{}",
        output_text(&out)
    );
    // Its chain is held; the readable one is rebuilt (and resumed) as before.
    let held = locks(&org);
    assert!(
        held.contains(&("core".to_string(), "hold:orch-resume".to_string())),
        "{held:?}"
    );
    assert!(
        held.contains(&("side".to_string(), other.clone())),
        "{held:?}"
    );
    assert!(org.store().worker(&id).unwrap().is_none());
    assert_eq!(org.worker(&other).respawns, 1);
    // No one can start on the held chain until an operator has looked.
    let can = org.run(&["can-spawn", "core"]);
    assert_eq!(can.status.code(), Some(1), "{}", output_text(&can));
}

#[test]
fn a_deleted_checkpoint_is_reported_and_its_chain_stays_held() {
    let org = org();
    let id = orphan(&org, "core", "hang in it", "hanging");
    std::fs::remove_file(checkpoint_path(&org, &id)).unwrap();
    let out = rebuild(&org);
    assert_refused_naming(&out, &[&id, "no checkpoint file"]);
    assert_eq!(
        locks(&org),
        vec![("core".to_string(), "hold:orch-resume".to_string())]
    );
    // The operator looks, then lets the chain go.
    let unhold = org.run(&["unhold", "core"]);
    assert_eq!(unhold.status.code(), Some(0), "{}", output_text(&unhold));
    assert!(locks(&org).is_empty());
}

/// An operator's hold (a release freeze) is checkpointed too (`holds.yaml`): a database lost
/// with only a hold in it is refused rather than read as "every chain free", and
/// `orch resume --from-checkpoints` takes the hold again, with its holder and reason.
#[test]
fn an_operator_hold_survives_a_rebuild() {
    let org = org();
    let out = org.run(&["hold", "core", "--reason", "release freeze", "--by", "rm"]);
    assert!(out.status.success(), "{}", output_text(&out));
    remove_db(&org);

    let spawn = org.run(&["spawn", "--repo", "side", "--task", "t"]);
    let said = output_text(&spawn);
    assert_eq!(spawn.status.code(), Some(2), "{said}");
    assert!(said.contains("--from-checkpoints"), "{said}");
    assert!(said.contains("hold"), "{said}");

    let answer = org.resume_with(&["--from-checkpoints"]);
    let holds = answer["rebuilt"]["holds"].as_array().unwrap();
    assert_eq!(holds.len(), 1, "{answer:#}");
    assert!(holds[0].as_str().unwrap().contains("hold:rm"), "{answer:#}");
    assert!(
        answer["rebuilt"]["lost_holds"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    assert_eq!(locks(&org), vec![("core".into(), "hold:rm".into())]);
    let lock = &org.store().locks().unwrap()[0];
    assert_eq!(lock.reason.as_deref(), Some("release freeze"));
    assert_eq!(lock.by.as_deref(), Some("rm"));
    let can = org.run(&["can-spawn", "core"]);
    assert_eq!(can.status.code(), Some(1), "{}", output_text(&can));
    assert!(
        output_text(&can).contains("hold:rm"),
        "{}",
        output_text(&can)
    );

    // Released, it stays released through the next rebuild.
    assert!(org.run(&["unhold", "core"]).status.success());
    remove_db(&org);
    let answer = org.resume_with(&["--from-checkpoints"]);
    assert!(
        answer["rebuilt"]["holds"].as_array().unwrap().is_empty(),
        "{answer:#}"
    );
    assert!(locks(&org).is_empty());
}

/// A fatal hold is checkpointed with the holds: a database lost with only a FATAL in it is
/// refused, and the rebuild halts the chain again until an operator clears it.
#[test]
fn a_fatal_hold_survives_a_rebuild() {
    let org = org();
    let out = org.run(&["fatal", "core", "--reason", "a key committed", "--by", "rm"]);
    assert!(out.status.success(), "{}", output_text(&out));
    remove_db(&org);

    let spawn = org.run(&["spawn", "--repo", "side", "--task", "t"]);
    assert_eq!(spawn.status.code(), Some(2), "{}", output_text(&spawn));

    let answer = org.resume_with(&["--from-checkpoints"]);
    let holds = answer["rebuilt"]["holds"].as_array().unwrap();
    assert!(
        holds
            .iter()
            .any(|h| h.as_str().unwrap().contains("a key committed")),
        "{answer:#}"
    );
    let can = org.run(&["can-spawn", "core"]);
    assert_eq!(can.status.code(), Some(1), "{}", output_text(&can));
    assert!(output_text(&can).contains("FATAL"), "{}", output_text(&can));

    assert!(org.run(&["fatal", "--clear", "core"]).status.success());
    remove_db(&org);
    let answer = org.resume_with(&["--from-checkpoints"]);
    assert!(
        answer["rebuilt"]["holds"].as_array().unwrap().is_empty(),
        "{answer:#}"
    );
}

/// A hold the rebuild cannot take again is said loudly: an unreadable holds file makes
/// `orch resume --from-checkpoints` exit 1 naming it, with a critical alert.
#[test]
fn a_hold_that_cannot_be_rebuilt_is_said_loudly() {
    let org = org();
    let out = org.run(&["hold", "core", "--reason", "release freeze", "--by", "rm"]);
    assert!(out.status.success(), "{}", output_text(&out));
    let file = org.state.join("holds.yaml");
    assert!(file.exists(), "the hold is checkpointed");
    std::fs::write(&file, "holds: [ {repo: core, holder: \n").unwrap();
    remove_db(&org);

    let out = org.run(&["resume", "--from-checkpoints"]);
    let said = output_text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("holds.yaml"), "{said}");
    assert!(said.contains("LOST HOLD"), "{said}");
    let alerts = std::fs::read_to_string(org.state.join("alerts.jsonl")).unwrap_or_default();
    let lost: Vec<Value> = alerts
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|a| a["kind"] == "hold_lost")
        .collect();
    assert_eq!(lost.len(), 1, "{alerts}");
    assert_eq!(lost[0]["severity"], "critical", "{alerts}");
}
