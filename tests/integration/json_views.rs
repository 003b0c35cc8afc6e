//! Every `--json` answer, from the real binary in realistic states (a worker DONE, one
//! BLOCKED, one working, a hold, alerts, a wave), validated against its published schema
//! under docs/schema/ — which the views' unit test keeps equal to the types.

use crate::support::{Ci, Org, Spec, output_text, poll_until};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

const DEADLINE: Duration = Duration::from_secs(120);

fn schema(name: &str) -> jsonschema::Validator {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("docs/schema/{name}.json"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("no schema {}: {e}", path.display()));
    let schema: Value = serde_json::from_str(&text).unwrap();
    jsonschema::options()
        .should_validate_formats(true)
        .build(&schema)
        .unwrap_or_else(|e| panic!("{name}.json is not a valid schema: {e}"))
}

/// Checks `value` against docs/schema/<name>.json, naming every violation.
fn valid(name: &str, value: &Value, seen: &mut BTreeSet<String>) {
    let v = schema(name);
    let errors: Vec<String> = v
        .iter_errors(value)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{name}: {errors:#?}\n{}",
        serde_json::to_string_pretty(value).unwrap()
    );
    assert!(
        epoch_ms_fields(value).is_empty(),
        "{name}: {:?}",
        epoch_ms_fields(value)
    );
    seen.insert(name.to_string());
}

/// Keys ending in `_ms` anywhere in `v`: there must be none (times are RFC 3339).
fn epoch_ms_fields(v: &Value) -> Vec<String> {
    match v {
        Value::Object(m) => m
            .iter()
            .flat_map(|(k, x)| {
                let mut out = epoch_ms_fields(x);
                if k.ends_with("_ms") {
                    out.push(k.clone());
                }
                out
            })
            .collect(),
        Value::Array(a) => a.iter().flat_map(epoch_ms_fields).collect(),
        _ => Vec::new(),
    }
}

/// `orch <args>`: exit code and the JSON lines of stdout.
fn run(org: &Org, args: &[&str]) -> (i32, Vec<Value>) {
    let out = org.run(args);
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            serde_json::from_str(l).unwrap_or_else(|e| {
                panic!("orch {args:?}: not JSON ({e}): {l}\n{}", output_text(&out))
            })
        })
        .collect();
    assert!(!lines.is_empty(), "orch {args:?}: {}", output_text(&out));
    (out.status.code().unwrap_or(-1), lines)
}

/// The single JSON answer of `orch <args>`, whose exit code must be `code`.
fn answer(org: &Org, args: &[&str], code: i32) -> Value {
    let (got, mut lines) = run(org, args);
    assert_eq!(got, code, "orch {args:?}: {lines:?}");
    assert_eq!(lines.len(), 1, "orch {args:?}: one line: {lines:?}");
    lines.remove(0)
}

/// The single JSON answer of `orch <args>` run in `dir` without an organisation (`init`).
fn init_answer(dir: &Path, args: &[&str]) -> Value {
    let out = crate::support::orch_cmd()
        .current_dir(dir)
        .args(args)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "orch {args:?}: {}",
        output_text(&out)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "orch {args:?}: one line: {text}");
    serde_json::from_str(lines[0]).unwrap_or_else(|e| panic!("orch {args:?}: {e}: {text}"))
}

fn is_time(v: &Value) -> bool {
    v.as_str()
        .is_some_and(|t| t.parse::<jiff::Timestamp>().is_ok())
}

#[test]
fn every_json_view_matches_its_published_schema() {
    let repos: &[(&str, &[&str])] = &[
        ("core", &[]),
        ("vm", &["core"]),
        ("app", &["vm"]),
        ("util", &[]),
        ("sdk", &[]),
    ];
    let mut spec = Spec::resumable(repos)
        .worker("views_worker.sh")
        .max_parallel(4);
    spec.ci = Ci::Pass;
    let org = Org::new(spec);
    let seen = &mut BTreeSet::new();

    // Before anything ran.
    let v = answer(&org, &["check", "--json"], 0);
    valid("check", &v, seen);
    assert_eq!(v["ok"], true);
    let v = answer(&org, &["graph", "--format", "json"], 0);
    valid("graph", &v, seen);
    assert_eq!(v["repos"].as_array().unwrap().len(), 5);
    valid("status", &answer(&org, &["status", "--json"], 0), seen);

    // A worker DONE, one BLOCKED.
    let (code, lines) = run(
        &org,
        &[
            "spawn",
            "--repo",
            "core",
            "--task",
            "feature",
            "--foreground",
            "--json",
        ],
    );
    assert_eq!(code, 0, "{lines:?}");
    let done = lines.last().unwrap().clone();
    valid("spawn", &done, seen);
    assert_eq!(done["milestone"], "DONE");
    let done_id = done["worker_id"].as_str().unwrap().to_string();
    // Its timeline: output lines and events, one object a line.
    let (code, lines) = run(&org, &["logs", &done_id, "--json"]);
    assert_eq!(code, 0, "{lines:?}");
    for l in &lines {
        valid("logs-line", l, seen);
    }
    assert!(lines.iter().any(|l| l["type"] == "log"), "{lines:?}");
    assert!(
        lines
            .iter()
            .any(|l| l["type"] == "event" && is_time(&l["at"])),
        "{lines:?}"
    );
    let (code, lines) = run(
        &org,
        &[
            "spawn",
            "--repo",
            "sdk",
            "--task",
            "docs [fail]",
            "--foreground",
            "--json",
        ],
    );
    assert_eq!(code, 1, "{lines:?}");
    let blocked = lines.last().unwrap().clone();
    valid("spawn", &blocked, seen);
    assert_eq!(blocked["milestone"], "BLOCKED");
    let blocked_id = blocked["worker_id"].as_str().unwrap().to_string();

    // A hold, and what it blocks.
    let v = answer(&org, &["hold", "util", "--reason", "freeze", "--json"], 0);
    valid("hold", &v, seen);
    assert!(is_time(&v["lock"]["acquired_at"]), "{v}");
    let v = answer(&org, &["hold", "util", "--reason", "again", "--json"], 1);
    valid("hold", &v, seen);
    assert_eq!(v["held"], false);
    let v = answer(&org, &["can-spawn", "util", "--json"], 1);
    valid("can-spawn", &v, seen);
    assert_eq!(v["blockers"][0]["kind"], "hold", "{v}");
    valid(
        "can-spawn",
        &answer(&org, &["can-spawn", "vm", "--json"], 0),
        seen,
    );

    // A working worker, and a spawn it blocks.
    let v = answer(
        &org,
        &["spawn", "--repo", "app", "--task", "[hang]", "--json"],
        0,
    );
    valid("spawn", &v, seen);
    let working_id = v["worker_id"].as_str().unwrap().to_string();
    let v = answer(
        &org,
        &["spawn", "--repo", "vm", "--task", "vm work", "--json"],
        1,
    );
    valid("spawn", &v, seen);
    assert_eq!(v["spawned"], false);
    assert_eq!(v["blockers"][0]["relation"], "dependent", "{v}");

    let v = answer(&org, &["status", "--json"], 0);
    valid("status", &v, seen);
    assert_eq!(v["workers"].as_array().unwrap().len(), 3, "{v}");
    // Each worker names its node: this host's (the harness leaves ORCH_NODE unset).
    let this = v["workers"][0]["node"]
        .as_str()
        .expect("a node")
        .to_string();
    let nodes = answer(&org, &["nodes", "--json"], 0);
    valid("nodes", &nodes, seen);
    assert_eq!(nodes["this_node"], this.as_str(), "{nodes}");
    let listed = &nodes["nodes"][0];
    assert_eq!(listed["name"], this.as_str(), "{nodes}");
    assert!(listed["workers"].as_i64().unwrap() >= 1, "{nodes}");
    assert_eq!(listed["version"], env!("CARGO_PKG_VERSION"), "{nodes}");
    let out = org.run(&["nodes"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.contains(&format!("{this} (this)")), "{text}");
    assert!(v["locks"].as_array().unwrap().len() >= 3, "{v}");
    // The same view as a table: plain into a pipe, columns aligned on the longest cell.
    let out = org.run(&["status"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(!text.contains('\x1b'), "{text}");
    let table: Vec<&str> = text.lines().take_while(|l| !l.is_empty()).collect();
    assert_eq!(table.len(), 4, "{text}");
    let col = table[0].find("MILESTONE").expect("a MILESTONE column");
    for row in &table[1..] {
        assert!(
            ["DONE ", "BLOCKED ", "WORKING "]
                .iter()
                .any(|m| row[col..].starts_with(m)),
            "{text}"
        );
    }
    valid(
        "sessions-list",
        &answer(&org, &["sessions", "list", "--json"], 0),
        seen,
    );
    for id in [&done_id, &blocked_id, &working_id] {
        let v = answer(&org, &["sessions", "show", id, "--json"], 0);
        valid("sessions-show", &v, seen);
        assert!(is_time(&v["created_at"]), "{v}");
    }
    let shown = answer(&org, &["sessions", "show", &done_id, "--json"], 0);
    let sha = shown["pushes"][0]["sha"].as_str().unwrap().to_string();
    assert!(is_time(&shown["pushes"][0]["pushed_at"]), "{shown}");
    // What the DONE worker returned: the files of its change, its final CI run, a summary.
    let returned = &shown["returned"];
    assert!(
        !returned["files_modified"].as_array().unwrap().is_empty(),
        "{returned}"
    );
    assert!(
        returned["final_ci"]
            .as_str()
            .is_some_and(|f| f.starts_with(orch::sha::short(&sha)) && f.contains("green")),
        "{returned}"
    );
    assert!(
        returned["summary"].as_str().unwrap().contains("DONE"),
        "{returned}"
    );

    // Alerts: `alerts --json` and every line of alerts.jsonl, the same fields.
    let alerts = poll_until(
        "the BLOCKED worker's alert",
        DEADLINE,
        || {
            let v = answer(&org, &["alerts", "--json"], 0);
            (!v["alerts"].as_array()?.is_empty()).then_some(v)
        },
        || org.diag(&blocked_id),
    );
    valid("alerts", &alerts, seen);
    let lines = org.alerts(&blocked_id);
    assert!(!lines.is_empty());
    for line in &lines {
        valid("alert-line", line, seen);
        let entry = alerts["alerts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["id"] == line["id"])
            .expect("the line's alert in `orch alerts`");
        for (k, val) in line.as_object().unwrap() {
            assert_eq!(&entry[k], val, "{k}: {entry} vs {line}");
        }
    }

    // CI of the DONE worker's commit.
    let v = answer(
        &org,
        &["ci", "status", "--repo", "core", "--sha", &sha, "--json"],
        0,
    );
    valid("ci-status", &v, seen);
    let v = answer(
        &org,
        &["ci", "logs", "--repo", "core", "--sha", &sha, "--json"],
        0,
    );
    valid("ci-logs", &v, seen);

    // The operator's commands.
    let out = org
        .cmd(&["report", "DONE", "--note", "done", "--json"])
        .env("ORCH_WORKER_ID", &blocked_id)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", output_text(&out));
    valid(
        "report",
        &serde_json::from_slice(&out.stdout).unwrap(),
        seen,
    );
    let v = answer(
        &org,
        &[
            "release",
            // A BLOCKED worker's: the lock of one at work is not freed under it.
            &blocked_id,
            "--force",
            "--reason",
            "freeze",
            "--json",
        ],
        0,
    );
    valid("release", &v, seen);
    valid(
        "cancel",
        &answer(&org, &["cancel", &working_id, "--json"], 0),
        seen,
    );
    org.wait_supervisor_gone(&working_id);
    let v = answer(&org, &["unhold", "util", "--json"], 0);
    valid("unhold", &v, seen);
    valid(
        "respawn",
        &answer(
            &org,
            &["respawn", &blocked_id, "--note", "try again", "--json"],
            0,
        ),
        seen,
    );
    org.wait_milestone(&blocked_id, "BLOCKED", DEADLINE);
    org.wait_supervisor_gone(&blocked_id);
    valid("resume", &answer(&org, &["resume", "--json"], 0), seen);

    // A wave: plan, a tick, until done, status.
    let file = org.root.join("wave-v.yaml");
    std::fs::write(
        &file,
        "name: wave-v\ntasks:\n  - {id: core-1, repo: core, task: \"core\", estimate: 90s}\n  - {id: vm-1, repo: vm, task: \"vm\", estimate: 2m}\n  - {id: util-1, repo: util, task: \"util\"}\n",
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let v = answer(&org, &["wave", "plan", f, "--json"], 0);
    valid("wave-plan", &v, seen);
    let core = v["schedule"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["task"] == "core-1")
        .expect("core-1 planned");
    assert_eq!(core["estimate_s"], 90.0, "{v}");
    assert_eq!(core["start_s"], 0.0, "{v}");
    let v = answer(&org, &["wave", "run", f, "--tick", "--json"], 0);
    valid("wave-tick", &v, seen);
    assert_eq!(v["first_sight"], true, "{v}");
    let (code, lines) = run(&org, &["wave", "run", f, "--until-done", "--json"]);
    assert_eq!(code, 0, "{lines:?}");
    let (last, changes) = lines.split_last().unwrap();
    valid("wave-status", last, seen);
    assert_eq!(last["all_done"], true, "{last}");
    assert!(
        !changes.is_empty(),
        "the tasks the tick started are reported"
    );
    for l in changes {
        valid("wave-run-line", l, seen);
    }
    let v = answer(&org, &["wave", "status", "wave-v", "--json"], 0);
    valid("wave-status", &v, seen);
    assert!(is_time(&v["tasks"][0]["started_at"]), "{v}");

    // The board's own answers (`orch serve`): the attention board, the waves with their
    // Gantt bars, the graph with its locks.
    {
        let s = crate::board::serve(&org, "127.0.0.1:0");
        let v = crate::board::get_json(&s, "/api/board");
        valid("board", &v, seen);
        assert!(
            v["groups"]
                .as_array()
                .unwrap()
                .iter()
                .any(|g| !g["cards"].as_array().unwrap().is_empty()),
            "{v}"
        );
        let v = crate::board::get_json(&s, "/api/waves");
        valid("board-waves", &v, seen);
        assert_eq!(v[0]["status"]["name"], "wave-v", "{v}");
        assert!(is_time(&v[0]["started_at"]), "{v}");
        valid(
            "board-graph",
            &crate::board::get_json(&s, "/api/graph"),
            seen,
        );
        // A worker's readable log, as the worker view follows it.
        let v = crate::board::get_json(&s, &format!("/api/workers/{done_id}/log"));
        valid("board-log", &v, seen);
    }

    // Clean-up: the DONE worker's worktree and branch go (its commit is on the remote).
    let v = answer(&org, &["gc", "--dry-run", "--json"], 0);
    valid("gc", &v, seen);
    assert_eq!(v["dry_run"], true, "{v}");
    let of_done = |v: &Value| {
        v["workers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|w| w["worker_id"] == done_id.as_str())
            .cloned()
    };
    assert_eq!(
        of_done(&v).expect("the DONE worker is listed")["action"],
        "remove",
        "{v}"
    );
    let v = answer(&org, &["gc", "--json"], 0);
    valid("gc", &v, seen);
    assert_eq!(v["dry_run"], false, "{v}");

    // A wave cancelled while one of its workers runs: the worker is stopped; again, nothing.
    let file = org.root.join("wave-c.yaml");
    std::fs::write(
        &file,
        "name: wave-c\ntasks:\n  - {id: util-hang, repo: util, task: \"[hang]\"}\n",
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let v = answer(&org, &["wave", "run", f, "--tick", "--json"], 0);
    valid("wave-tick", &v, seen);
    let hung = v["started"][0]["worker"]
        .as_str()
        .unwrap_or_else(|| panic!("the tick starts util-hang: {v}"))
        .to_string();
    let v = answer(&org, &["wave", "cancel", f, "--json"], 0);
    valid("wave-cancel", &v, seen);
    assert_eq!(v["wave"], "wave-c", "{v}");
    assert_eq!(v["newly_cancelled"], true, "{v}");
    assert_eq!(v["workers"][0]["worker_id"], hung.as_str(), "{v}");
    org.wait_milestone(&hung, "CANCELLED", DEADLINE);
    let v = answer(&org, &["wave", "cancel", "wave-c", "--json"], 0);
    valid("wave-cancel", &v, seen);
    assert_eq!(v["newly_cancelled"], false, "{v}");
    assert_eq!(v["workers"].as_array().unwrap().len(), 0, "{v}");

    // `orch wave retry`: a BLOCKED task gets another go.
    let file = org.root.join("wave-r.yaml");
    std::fs::write(
        &file,
        "name: wave-r\ntasks:\n  - {id: util-fail, repo: util, task: \"[fail]\"}\n",
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let v = answer(&org, &["wave", "run", f, "--tick", "--json"], 0);
    let failed = v["started"][0]["worker"].as_str().unwrap().to_string();
    org.wait_milestone(&failed, "BLOCKED", DEADLINE);
    org.wait_supervisor_gone(&failed);
    let v = answer(&org, &["wave", "retry", "wave-r", "util-fail", "--json"], 0);
    valid("wave-retry", &v, seen);
    assert_eq!(v["previous_worker"], failed.as_str(), "{v}");
    assert_eq!(v["attempt"], 2, "{v}");
    assert_eq!(v["released_lock"], true, "{v}");

    // `orch init` (in a directory of clones, and --example): what was written, where.
    let clones = org.root.join("init-here");
    crate::support::init_repo(&clones.join("lib"), "lib");
    let v = init_answer(&clones, &["init", "--with-contract", "--json"]);
    valid("init", &v, seen);
    assert_eq!(v["example"], false, "{v}");
    let config = clones.join("repos.yaml");
    assert_eq!(v["config"], config.to_str().unwrap(), "{v}");
    assert_eq!(v["repos"][0]["name"], "lib", "{v}");
    let files = v["files"].as_array().unwrap();
    assert_eq!(files.len(), 4, "repos.yaml, the contract, two prompts: {v}");
    assert!(
        files
            .iter()
            .all(|f| f["action"] == "written" && Path::new(f["path"].as_str().unwrap()).is_file()),
        "{v}"
    );
    // Again with --force: the contract files it finds are written over too; without, kept.
    std::fs::remove_file(&config).unwrap();
    let v = init_answer(&clones, &["init", "--with-contract", "--json"]);
    valid("init", &v, seen);
    let kept: Vec<&Value> = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["action"] == "kept")
        .collect();
    assert_eq!(kept.len(), 3, "the contract and prompts exist: {v}");
    let v = init_answer(&org.root, &["init", "--example", "example", "--json"]);
    valid("init", &v, seen);
    assert_eq!(v["example"], true, "{v}");
    assert_eq!(v["repos"].as_array().unwrap().len(), 4, "{v}");
    let kinds: BTreeSet<&str> = v["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        BTreeSet::from(["config", "repository", "worker", "wave"]),
        "{v}"
    );
    assert!(org.root.join("example/repos/core/.git").exists());

    // FATAL: raised, shown, cleared, and shown once cleared (last, as it halts the chain).
    for (args, code, action) in [
        (
            &["fatal", "util", "--reason", "secret committed", "--json"][..],
            0,
            "raised",
        ),
        (&["fatal", "util", "--json"][..], 0, "shown"),
        (&["fatal", "util", "--clear", "--json"][..], 0, "cleared"),
        (&["fatal", "util", "--json"][..], 1, "shown"),
    ] {
        let v = answer(&org, args, code);
        valid("fatal", &v, seen);
        assert_eq!(v["action"], action, "{v}");
    }

    // Every published schema was exercised.
    let published: BTreeSet<String> =
        std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/schema"))
            .unwrap()
            .map(|e| {
                e.unwrap()
                    .path()
                    .file_stem()
                    .unwrap()
                    .to_string_lossy()
                    .into_owned()
            })
            .collect();
    // `orch demo` runs minutes on its own: its own test below covers it.
    seen.insert("demo".to_string());
    // `orch approve` needs a worker held on protected paths: `protected_paths::` validates it.
    seen.insert("approve".to_string());
    let missed: Vec<&String> = published.difference(seen).collect();
    assert!(missed.is_empty(), "not exercised: {missed:?}");
}

/// `orch demo --json`: the timeline on stderr, one object on stdout — each task's worker,
/// final milestone and verified commit, and the wave.
#[test]
fn demo_json_is_its_outcome_alone() {
    let out = crate::support::orch_cmd()
        .args(["demo", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "stdout is the outcome alone: {text}");
    let v: Value = serde_json::from_str(lines[0]).unwrap();
    valid("demo", &v, &mut BTreeSet::new());
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["kept"], false, "{v}");
    assert!(!Path::new(v["dir"].as_str().unwrap()).exists(), "{v}");
    let workers = v["workers"].as_array().unwrap();
    assert_eq!(workers.len(), 4, "{v}");
    for w in workers {
        assert_eq!(w["milestone"], "DONE", "{v}");
        assert_eq!(w["verdict"], "green", "{v}");
        assert_eq!(w["sync_job"], "success", "{v}");
        assert_eq!(w["verified"], true, "{v}");
        assert_eq!(w["sha"].as_str().map(str::len), Some(40), "{v}");
    }
    let vm = workers.iter().find(|w| w["repo"] == "vm").unwrap();
    assert_eq!(vm["fix_attempts"], 1, "the vm worker fails CI once: {v}");
    assert_eq!(v["wave"]["all_done"], true, "{v}");
    assert_eq!(v["wave"]["done"], 5, "{v}");
    assert_eq!(v["locks_held"], 0, "{v}");
    // The timeline a person watches went to stderr.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("PUSHED_TO_CI -> FIXING_CI"), "{stderr}");
}

/// A schema is strict: a field the type does not have is refused.
#[test]
fn schemas_refuse_unknown_fields() {
    let v = schema("unhold");
    let lock = serde_json::json!({
        "repo": "core", "holder": "hold:me", "kind": "hold", "reason": "x", "by": "me",
        "acquired_at": "2026-01-01T00:00:00.000Z", "age_s": 5
    });
    let good = serde_json::json!({"released": true, "repo": "core", "lock": lock});
    assert!(v.is_valid(&good));
    let mut bad = good.clone();
    bad["lock"]["acquired_ms"] = 1.into();
    assert!(!v.is_valid(&bad));
    let mut bad = good;
    bad["lock"]["acquired_at"] = "yesterday".into();
    assert!(!v.is_valid(&bad), "times are RFC 3339");
}
