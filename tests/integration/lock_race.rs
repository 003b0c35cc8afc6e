//! Many `orch hold` / `orch unhold` processes race on overlapping chains. The lock history,
//! replayed in commit order, must never show two conflicting locks held at the same time.

use crate::support::{ORCH, reaping_late};
use orch::config::Config;
use orch::store::{Store, first_conflict};
use std::process::{Command, Stdio};

const REPOS: &str = "repos:
  acdc-core: {}
  alphavm: { deps: [acdc-core] }
  deltavm: { deps: [acdc-core] }
  adnet: { deps: [alphavm, deltavm, acdc-core] }
  alphaos: { deps: [alphavm, acdc-core] }
  deltaos: { deps: [deltavm, acdc-core] }
  ac-dc: { deps: [adnet] }
  adl: { deps: [acdc-core] }
  adl-examples: { deps: [adl] }
  sdk: {}
";

const PROCESSES: usize = 24;
const ROUNDS: usize = 12;

#[test]
fn concurrent_holds_never_overlap_conflicting_chains() {
    let dir = tempfile::tempdir().unwrap();
    let config_path = dir.path().join("repos.yaml");
    std::fs::write(&config_path, REPOS).unwrap();
    let state = dir.path().join("state");
    let repos = [
        "acdc-core",
        "alphavm",
        "deltavm",
        "adnet",
        "alphaos",
        "deltaos",
        "ac-dc",
        "adl",
        "adl-examples",
        "sdk",
    ];

    // Reaped in turn, below.
    let late = reaping_late();
    // Each process walks its own sequence of repositories: hold, and when that succeeds,
    // release again, so acquisitions and releases of different processes interleave.
    let children: Vec<_> = (0..PROCESSES)
        .map(|p| {
            let mut script = String::from("set -u\n");
            for r in 0..ROUNDS {
                let repo = repos[(p * 7 + r * 3 + p * r) % repos.len()];
                script.push_str(&format!(
                    "if \"$ORCH\" hold {repo} --reason race --by p{p} >/dev/null 2>>\"$ERRS\"; then \"$ORCH\" unhold {repo} >/dev/null 2>>\"$ERRS\" || echo unhold-failed >>\"$ERRS\"; fi\n"
                ));
            }
            Command::new("sh")
                .arg("-c")
                .arg(script)
                .env("ORCH", ORCH)
                .env("ORCH_CONFIG", &config_path)
                .env("ORCH_STATE_DIR", &state)
                .env("ERRS", dir.path().join(format!("errors-{p}.log")))
                .stdin(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut c in children {
        assert!(c.wait().unwrap().success());
    }
    drop(late);

    // A refused hold prints "not held" on stdout with exit 1; anything on stderr is a real error
    // (e.g. "database is locked"), which would make the race meaningless.
    for p in 0..PROCESSES {
        let errs =
            std::fs::read_to_string(dir.path().join(format!("errors-{p}.log"))).unwrap_or_default();
        assert!(
            errs.trim().is_empty(),
            "process {p} reported errors:\n{errs}"
        );
    }

    let config = Config::load(&config_path).unwrap();
    let mut store = Store::open(&state).unwrap();
    let history = store.lock_history().unwrap();
    let acquired = history.iter().filter(|e| e.action == "acquire").count();
    let released = history.iter().filter(|e| e.action == "release").count();
    assert_eq!(acquired, released, "every successful hold was released");
    assert!(acquired > 0, "some holds must have succeeded");
    assert!(
        acquired < PROCESSES * ROUNDS,
        "some holds must have been refused, or the chains never overlapped ({acquired} of {})",
        PROCESSES * ROUNDS
    );
    if let Some((a, b)) = first_conflict(&config.graph, &history) {
        panic!("conflicting locks held at once: {a:?} while {b:?} was active");
    }
    assert!(store.locks().unwrap().is_empty());
    eprintln!(
        "{acquired} of {} hold attempts won; no conflicting overlap",
        PROCESSES * ROUNDS
    );
}
