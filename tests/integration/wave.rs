//! Waves driven only by `orch wave run --tick`, as cron would: a loop of ticks (two at once at
//! least once) on the local forge with scripted workers.

use crate::support::{Ci, Org, RepoSpec, Spec, output_text, poll_until};
use orch::milestone::Milestone;
use orch::wave::{Dag, Wave};
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Six repositories: core ← vm ← {os, net}, util ← net ← app; sdk alone.
fn org() -> Org {
    Org::new(spec(Ci::Pass))
}

/// The waves' organisation ([`org`]'s), its CI as given: wave_worker.sh, 3 slots.
pub(crate) fn spec(ci: Ci) -> Spec {
    let repos: &[(&str, &[&str])] = &[
        ("core", &[]),
        ("util", &[]),
        ("vm", &["core"]),
        ("os", &["vm"]),
        ("net", &["vm", "util"]),
        ("app", &["net"]),
        ("sdk", &[]),
    ];
    let mut spec = Spec::resumable(repos)
        .worker("wave_worker.sh")
        .max_parallel(3);
    spec.ci = ci;
    spec
}

pub(crate) fn wave_file(org: &Org, name: &str, vm_task: &str) -> PathBuf {
    let text = format!(
        r#"name: {name}
tasks:
  - {{id: core-1, repo: core, task: "core part 1", estimate: 2m}}
  - {{id: util-1, repo: util, task: "util", estimate: 1m}}
  - {{id: vm-1, repo: vm, task: "{vm_task}", estimate: 3m}}
  - {{id: os-1, repo: os, task: "os", estimate: 1m}}
  - {{id: net-1, repo: net, task: "net", estimate: 2m}}
  - {{id: app-1, repo: app, task: "app", estimate: 1m}}
  - {{id: sdk-1, repo: sdk, task: "sdk docs", after: [util-1]}}
  - {{id: core-2, repo: core, task: "core part 2", estimate: 1m}}
  - {{id: sdk-2, repo: sdk, task: "sdk examples", estimate: 1m}}
"#
    );
    let path = org.root.join(format!("{name}.yaml"));
    std::fs::write(&path, text).unwrap();
    path
}

fn tick(org: &Org, file: &Path) -> std::process::Output {
    org.run(&["wave", "run", file.to_str().unwrap(), "--tick"])
}

fn status(org: &Org, name: &str) -> Value {
    org.json(&["wave", "status", name, "--json"])
}

/// Ticks every 300 ms (the first time two at once) until the wave is finished.
fn drive(org: &Org, file: &Path, name: &str) -> Value {
    let f = file.to_path_buf();
    let (a, b) = std::thread::scope(|s| {
        let h1 = s.spawn(|| tick(org, &f));
        let h2 = s.spawn(|| tick(org, &f));
        (h1.join().unwrap(), h2.join().unwrap())
    });
    for o in [&a, &b] {
        assert_eq!(o.status.code(), Some(0), "{}", output_text(o));
    }
    poll_until(
        "the wave to finish",
        Duration::from_secs(240),
        || {
            let out = tick(org, file);
            assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
            std::thread::sleep(Duration::from_millis(300));
            let v = status(org, name);
            (v["finished"] == true).then_some(v)
        },
        || format!("{:#}", status(org, name)),
    )
}

pub(crate) fn check_order_and_locks(org: &Org, file: &Path, v: &Value) {
    let wave = Wave::load(file, &org.config.graph).unwrap();
    let dag = Dag::build(&wave.tasks, &org.config.graph).unwrap();
    let tasks = v["tasks"].as_array().unwrap();
    let workers: HashMap<String, orch::store::workers::WorkerRecord> = org
        .workers()
        .into_iter()
        .map(|w| (w.id.clone(), w))
        .collect();
    for (i, t) in wave.tasks.iter().enumerate() {
        let view = tasks.iter().find(|x| x["id"] == t.id.as_str()).unwrap();
        let Some(wid) = view["worker"].as_str() else {
            continue;
        };
        let started = workers[wid].created_ms;
        for &p in &dag.preds[i] {
            let pv = tasks
                .iter()
                .find(|x| x["id"] == wave.tasks[p].id.as_str())
                .unwrap();
            let pw = &workers[pv["worker"].as_str().expect("a pred was started")];
            assert_eq!(
                pw.milestone(),
                Milestone::Done,
                "{} before {}",
                t.id,
                pv["id"]
            );
            assert!(
                pw.progress.since_ms <= started,
                "{} started at {started}, before {} was DONE at {}",
                t.id,
                pv["id"],
                pw.progress.since_ms
            );
        }
    }
    let mut store = org.store();
    let history = store.lock_history().unwrap();
    assert!(
        orch::store::first_conflict(&org.config.graph, &history).is_none(),
        "{:?}",
        orch::store::first_conflict(&org.config.graph, &history)
    );
}

#[test]
fn a_wave_runs_to_done_through_cron_ticks() {
    let org = org();
    let file = wave_file(&org, "wave-a", "vm work");
    // The plan first: nothing is started by it.
    let plan = org.json(&["wave", "plan", file.to_str().unwrap(), "--json"]);
    assert!(plan["makespan_s"].as_f64().unwrap() >= plan["lower_bound"]["lb_s"].as_f64().unwrap());
    assert!(org.workers().is_empty());

    // A tick that finds another tick of the wave running skips, exit 0, and starts nothing.
    {
        let _held = orch::app::wave::try_tick_lock(&org.state, "wave-a")
            .unwrap()
            .unwrap();
        let out = tick(&org, &file);
        assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
        assert!(output_text(&out).contains("another tick of this wave is still running; skipped"));
        assert!(org.workers().is_empty());
    }
    let v = drive(&org, &file, "wave-a");
    assert_eq!(v["all_done"], true, "{v:#}");
    assert_eq!(v["done"], 9);
    check_order_and_locks(&org, &file, &v);
    assert_eq!(org.workers().len(), 9, "one worker per task, none twice");
    assert!(org.store().locks().unwrap().is_empty());

    // A finished wave: a tick does nothing.
    let out = tick(&org, &file);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("9/9 DONE"),
        "{}",
        output_text(&out)
    );
    assert_eq!(org.workers().len(), 9);

    // A changed definition of a started task is refused, with the task named.
    let text = std::fs::read_to_string(&file)
        .unwrap()
        .replace("core part 1", "core part one");
    std::fs::write(&file, text).unwrap();
    let out = tick(&org, &file);
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
    assert!(
        output_text(&out).contains("task core-1"),
        "{}",
        output_text(&out)
    );
    // `orch status` names the wave a worker belongs to.
    let st = org.run(&["status"]);
    assert!(
        String::from_utf8_lossy(&st.stdout).contains("wave-a:core-1"),
        "{}",
        output_text(&st)
    );
}

#[test]
fn a_failed_task_holds_its_dependents_and_the_rest_completes() {
    let org = org();
    let file = wave_file(&org, "wave-f", "vm work [fail]");
    let v = drive(&org, &file, "wave-f");
    assert_eq!(v["all_done"], false);
    let by: HashMap<&str, &Value> = v["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["id"].as_str().unwrap(), t))
        .collect();
    assert_eq!(by["vm-1"]["state"], "BLOCKED");
    for t in ["os-1", "net-1", "app-1"] {
        assert_eq!(by[t]["state"], "PENDING", "{t}");
        assert!(by[t]["worker"].is_null());
    }
    assert_eq!(
        by["os-1"]["waiting_on"][0],
        serde_json::json!({"task": "vm-1", "state": "BLOCKED"})
    );
    for t in ["core-1", "core-2", "util-1", "sdk-1", "sdk-2"] {
        assert_eq!(by[t]["state"], "DONE", "{t}");
    }
    check_order_and_locks(&org, &file, &v);
    // More ticks: nothing new starts, and the alert was raised once.
    for _ in 0..2 {
        assert_eq!(tick(&org, &file).status.code(), Some(0));
    }
    let alerts = org.json(&["alerts", "--json"]);
    let ours: Vec<&Value> = alerts["alerts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| a["kind"] == "wave_task_stopped")
        .collect();
    assert_eq!(ours.len(), 1, "{alerts:#}");
    assert!(ours[0]["message"].as_str().unwrap().contains("vm-1"));
    // Every alert has a documented severity (`min_severity` compares against these).
    for a in alerts["alerts"].as_array().unwrap() {
        assert!(
            ["info", "warning", "critical"].contains(&a["severity"].as_str().unwrap()),
            "{a:#}"
        );
    }
    let text = String::from_utf8_lossy(&org.run(&["wave", "status", "wave-f"]).stdout).to_string();
    assert!(text.contains("waiting on vm-1 (BLOCKED)"), "{text}");
    // --until-done on a stopped wave: exit 1 at once.
    let out = org.run(&["wave", "run", file.to_str().unwrap(), "--until-done"]);
    assert_eq!(out.status.code(), Some(1), "{}", output_text(&out));
}

/// Two waves over overlapping chains tick at once, each from its own "cron" loop: both finish,
/// the lock history never holds conflicting locks; a task added to a finished wave's file joins
/// at the next tick; `orch wave cancel` stops a wave (its live worker CANCELLED, nothing new
/// started by later ticks).
#[test]
fn two_waves_tick_at_once_added_tasks_join_and_a_cancelled_wave_stops() {
    let org = org();
    let write = |name: &str, body: &str| {
        let path = org.root.join(format!("{name}.yaml"));
        std::fs::write(&path, format!("name: {name}\ntasks:\n{body}")).unwrap();
        path
    };
    let a = write(
        "wave-x",
        "  - {id: core-1, repo: core, task: \"core\"}\n  - {id: vm-1, repo: vm, task: \"vm\"}\n  - {id: os-1, repo: os, task: \"os\"}\n",
    );
    let b = write(
        "wave-y",
        "  - {id: util-1, repo: util, task: \"util\"}\n  - {id: net-1, repo: net, task: \"net\"}\n  - {id: sdk-1, repo: sdk, task: \"sdk\"}\n",
    );
    let (va, vb) = std::thread::scope(|s| {
        let ha = s.spawn(|| drive(&org, &a, "wave-x"));
        let hb = s.spawn(|| drive(&org, &b, "wave-y"));
        (ha.join().unwrap(), hb.join().unwrap())
    });
    assert_eq!(va["all_done"], true, "{va:#}");
    assert_eq!(vb["all_done"], true, "{vb:#}");
    check_order_and_locks(&org, &a, &va);
    check_order_and_locks(&org, &b, &vb);
    assert_eq!(org.workers().len(), 6);

    // A task added to the finished wave's file joins at the next tick.
    let mut text = std::fs::read_to_string(&a).unwrap();
    text.push_str("  - {id: app-1, repo: app, task: \"app\"}\n");
    std::fs::write(&a, text).unwrap();
    let v = drive(&org, &a, "wave-x");
    assert_eq!(v["done"], 4, "{v:#}");
    assert_eq!(org.workers().len(), 7);

    // Cancelled after its first tick started its first task (which may finish meanwhile):
    // later ticks start nothing more of it.
    let c = write(
        "wave-z",
        "  - {id: sdk-2, repo: sdk, task: \"sdk again\"}\n  - {id: sdk-3, repo: sdk, task: \"sdk third\"}\n",
    );
    let out = tick(&org, &c);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let out = org.run(&["wave", "cancel", "wave-z"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    for _ in 0..3 {
        let out = tick(&org, &c);
        assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    }
    let v = status(&org, "wave-z");
    let started: Vec<&Value> = v["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["worker"].is_string())
        .collect();
    assert!(started.len() <= 1, "{v:#}");
    assert_eq!(org.workers().len(), 7 + started.len());
}

/// The contract's `reassign_task` ("Critical path, spawn new worker"): a task on the wave's
/// critical path that times out goes to a new worker at once, told the previous worker's
/// checkpoint, the chain lock handed over; a task off the critical path that times out ends
/// FAILED as the contract's WORKING timeout says (escalate), its lock kept for an operator.
#[test]
fn a_critical_path_task_that_times_out_is_reassigned() {
    let mut spec = Spec::local("reassign_worker.sh")
        .repo(RepoSpec::new("alpha"))
        .repo(RepoSpec::new("beta"))
        .timeout("WORKING", "3s", "2s");
    spec.progress_window = Some("1s".into());
    let org = Org::new(spec);
    let file = org.root.join("wave-r.yaml");
    std::fs::write(
        &file,
        r#"name: wave-r
tasks:
  - {id: long, repo: alpha, task: "the long part [stall]", estimate: 10m, files: [feature.txt], scope: {out: [beta]}}
  - {id: short, repo: beta, task: "the short part [stall]", estimate: 1m}
"#,
    )
    .unwrap();
    let out = tick(&org, &file);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let worker_of = |task: &str| -> Option<String> {
        status(&org, "wave-r")["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["id"] == task)
            .and_then(|t| t["worker"].as_str().map(str::to_string))
    };
    // The long task's first worker: the first on alpha (on a loaded machine it may have
    // timed out, and its task gone to another, before the tick that started it returned).
    let first = org
        .workers()
        .into_iter()
        .filter(|w| w.repo == "alpha")
        .min_by_key(|w| w.created_ms)
        .expect("the long task started")
        .id;
    let short = worker_of("short").expect("the short task started");
    // Nobody ticks meanwhile: the timed-out worker's supervisor reassigns its task itself.
    let second = poll_until(
        "the critical-path task to be reassigned",
        Duration::from_secs(60),
        || worker_of("long").filter(|w| *w != first),
        || org.diag(&first),
    );
    org.wait_done(&second);
    assert_eq!(org.worker(&first).progress.milestone, Milestone::Failed);
    assert_eq!(org.count_events(&first, "reassigned"), 1);
    let prompt = std::fs::read_to_string(org.out.join(format!("prompt-{second}.txt"))).unwrap();
    assert!(
        prompt.contains(&format!(
            "REASSIGNED: you take this task over from worker {first} (FAILED: timeout)"
        )) && prompt.contains("files modified: stall.txt")
            && prompt
                .contains("TASK: the long part [stall]\nFILES: feature.txt\nOUT OF SCOPE: beta\n"),
        "{prompt}"
    );
    let alerts = org.alerts(&first);
    assert!(
        alerts.iter().any(|a| a["kind"] == "timeout_reassign"),
        "{alerts:?}"
    );
    // Off the critical path: FAILED, not reassigned, its lock kept.
    let s = org.wait_milestone(&short, "FAILED", Duration::from_secs(60));
    org.wait_supervisor_gone(&short);
    assert!(!s.progress.reassign_on_timeout);
    assert_eq!(org.count_events(&short, "reassigned"), 0);
    assert_eq!(org.locks_of(&short), vec!["beta".to_string()]);
    assert_eq!(worker_of("short"), Some(short));
}
