//! `orch demo`: a throwaway organisation run end to end on the local forge.
//!
//! Four repositories (core ← vm ← net, and an independent sdk), CI jobs including the
//! `radicle-push` sync job, and scripted workers that edit, commit, push and report. The vm
//! worker's first push fails CI; it reads the log, fixes, pushes again. Workers are spawned
//! through the real chain locks, in dependency order, and the timeline is read back from the
//! database as it happens. Part two runs the organisation's next round of work as one wave,
//! through ticks as cron would (`app::wave::tick`). Everything runs in a temporary directory.

use crate::app::spawn::{SpawnRequest, Spawned, prepare};
use crate::app::{Loaded, start_detached};
use crate::ci::verdict::VerdictKind;
use crate::config::Config;
use crate::contract::Contract;
use crate::milestone::Milestone;
use crate::operator::view::setup::{DemoView, DemoWave, DemoWorker};
use crate::store::workers as ws;
use crate::store::{Store, now_ms};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// The demo's narration: on stdout, or on stderr under `--json` (stdout then holds the
/// outcome alone, for a script).
macro_rules! say {
    ($json:expr, $($arg:tt)*) => {
        if $json {
            eprintln!($($arg)*)
        } else {
            println!($($arg)*)
        }
    };
}

/// The demo organisation: every repository gets the same three CI jobs.
fn repos_yaml(dir: &Path) -> String {
    let jobs = r#"    ci:
      jobs:
        - { name: check, run: "sh ci/check.sh", timeout: 30s }
        - { name: test, run: "sh ci/test.sh", timeout: 30s }
        - { name: radicle-push, run: "sh ci/mirror.sh", needs: [check, test], timeout: 30s }
"#;
    let mut y = format!(
        r#"# orch demo organisation (generated)
forge: {{ kind: local, max_concurrent_runs: 4 }}
ci:
  sync_job: radicle-push
  poll_interval: 300ms
  start_timeout: 1m
worker:
  command: [sh, "{}/worker.sh"]
  max_parallel: 4
  env_passthrough: [HOME, PATH]
  stop_grace: 2s
land:
  policy: merge           # verified changes land on main; dependents start from them
downstream:
  depth: 1                # after a change lands, its direct dependents' CI runs on it
  on_breakage: fix        # a dependent it breaks gets a fix worker at once
repos:
"#,
        dir.display()
    );
    for (name, deps) in [
        ("core", "[]"),
        ("vm", "[core]"),
        ("net", "[vm, core]"),
        ("sdk", "[]"),
    ] {
        y.push_str(&format!(
            "  {name}:\n    path: repos/{name}\n    deps: {deps}\n{jobs}"
        ));
    }
    y
}

/// The scripted worker: what an agent does, minus the thinking.
const WORKER_SH: &str = r#"#!/bin/sh
# Scripted demo worker. The prompt arrives on stdin; milestones are reported through
# `orch report` (and echoed), CI is followed with `orch ci status`.
set -u
cat > /dev/null
orch() { "$ORCH_BIN" "$@"; }
git_commit() { git -c user.name="demo worker" -c user.email=worker@demo.invalid commit -q "$@"; }
# A replacement that continues pushed work (ORCH_MILESTONE FIXING_CI or PUSHED_TO_CI) does not
# report WORKING again: orch would count that as a violation.
if [ "${ORCH_MILESTONE:-WORKING}" = WORKING ]; then
  orch report WORKING --note "implementing: $ORCH_TASK" >/dev/null
fi
mkdir -p src
printf '%s\n' "$ORCH_TASK" > src/feature.txt
case "$ORCH_TASK" in
  "Fix vm"*) echo v2 > src/uses-api.txt ;;          # the fix: vm follows core's API v2
  *"API v2"*) echo v2 > src/api.txt ;;              # core's new API: vm must follow
esac
if [ "$ORCH_REPO" = vm ]; then
  echo "unfinished" > src/status.txt        # the first attempt forgets something the tests check
else
  echo "ready" > src/status.txt
fi
git add -A && git_commit -m "$ORCH_REPO: $ORCH_TASK"
git push -q 2>/dev/null
sha=$(git rev-parse HEAD)
orch report PUSHED_TO_CI --sha "$sha" >/dev/null
attempt=0
while ! orch ci status --repo "$ORCH_REPO" --sha "$sha" --wait --timeout 60s >/dev/null; do
  attempt=$((attempt + 1))
  if [ "$attempt" -gt 3 ]; then orch report BLOCKED --note "CI keeps failing"; exit 1; fi
  orch report FIXING_CI --job test --note "src/status.txt says unfinished" >/dev/null
  echo "ready" > src/status.txt
  git add -A && git_commit -m "$ORCH_REPO: finish status"
  git push -q 2>/dev/null
  sha=$(git rev-parse HEAD)
  orch report PUSHED_TO_CI --sha "$sha" >/dev/null
done
orch report DONE --note "all green, radicle-push: success" >/dev/null
"#;

fn sh(dir: &Path, script: &str) -> Result<(), String> {
    let out = Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .output()
        .map_err(|e| format!("sh: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{script}: {}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn build_org(dir: &Path) -> Result<PathBuf, String> {
    std::fs::create_dir_all(dir.join("repos")).map_err(|e| e.to_string())?;
    for name in REPOS {
        let repo = dir.join("repos").join(name);
        std::fs::create_dir_all(repo.join("ci")).map_err(|e| e.to_string())?;
        std::fs::write(repo.join("README.md"), format!("# {name}\n")).map_err(|e| e.to_string())?;
        std::fs::write(repo.join("ci/check.sh"), "test -f README.md\n")
            .map_err(|e| e.to_string())?;
        // vm builds on core's main as the forge has it (its run's checkout of core, in
        // $ORCH_UPSTREAMS): an API it does not follow breaks it.
        let follows_core = if name == "vm" {
            "if grep -qx v2 \"$ORCH_UPSTREAMS/core/src/api.txt\" 2>/dev/null && ! grep -qx v2 src/uses-api.txt 2>/dev/null; then echo 'core main is at API v2; vm still uses v1 (src/uses-api.txt)' >&2; exit 1; fi\n"
        } else {
            ""
        };
        std::fs::write(
            repo.join("ci/test.sh"),
            format!(
                "if [ -f src/status.txt ] && ! grep -qx ready src/status.txt; then echo 'src/status.txt: expected ready' >&2; exit 1; fi\n{follows_core}"
            ),
        )
        .map_err(|e| e.to_string())?;
        std::fs::write(
            repo.join("ci/mirror.sh"),
            "echo \"mirrored $ORCH_CI_SHA to radicle\"\n",
        )
        .map_err(|e| e.to_string())?;
        sh(
            &repo,
            "git init -q -b main . && git add -A && git -c user.name=demo -c user.email=demo@demo.invalid commit -qm 'initial commit'",
        )?;
    }
    std::fs::write(dir.join("worker.sh"), WORKER_SH).map_err(|e| e.to_string())?;
    let config = dir.join("repos.yaml");
    std::fs::write(&config, repos_yaml(dir)).map_err(|e| e.to_string())?;
    Ok(config)
}

/// The demo organisation, to keep (`orch init --example`): the repositories, their CI,
/// the scripted worker, repos.yaml and a wave file, in `dir`. Returns repos.yaml's path.
pub(super) fn write_example(dir: &Path) -> Result<PathBuf, String> {
    let config = build_org(dir)?;
    let wave = dir.join("demo-wave.yaml");
    std::fs::write(&wave, WAVE_YAML).map_err(|e| format!("{}: {e}", wave.display()))?;
    Ok(config)
}

/// The repositories the demo organisation has (under `repos/`).
pub(super) const REPOS: [&str; 4] = ["core", "vm", "net", "sdk"];

/// Runs the demo; returns the process exit code (0 when every task is DONE and verified).
pub fn run(keep: bool, json: bool) -> Result<i32, String> {
    let started = Instant::now();
    let dir = std::env::temp_dir().join(format!("orch-demo-{}-{}", std::process::id(), now_ms()));
    let config_path = build_org(&dir)?;
    let config = Config::load(&config_path).map_err(|e| e.to_string())?;
    let contract = Contract::embedded();
    let state_dir = dir.join("sessions");
    let l = Loaded {
        config_path: config.file.clone(),
        contract_path: dir.join("contract.yaml"),
        state_dir: state_dir.clone(),
        config,
        contract,
    };
    std::fs::write(&l.contract_path, crate::contract::EMBEDDED).map_err(|e| e.to_string())?;
    let mut store = Store::open(&state_dir).map_err(|e| e.to_string())?;

    say!(
        json,
        "orch demo — a throwaway organisation in {}",
        dir.display()
    );
    say!(
        json,
        "  repositories: core <- vm <- net, and sdk (independent); CI: check, test, radicle-push (needs both)"
    );
    say!(
        json,
        "  the vm worker's first push fails CI on purpose; watch it fix it.\n"
    );

    let tasks: Vec<(&str, &str)> = vec![
        ("core", "Add the core feature flag"),
        ("vm", "Implement the VM opcode table"),
        ("net", "Wire the VM into the network node"),
        ("sdk", "Expose the new API in the SDK"),
    ];
    let mut worker_of: BTreeMap<&str, String> = BTreeMap::new();
    let mut name_of: BTreeMap<String, &str> = BTreeMap::new();
    let mut last_seq = 0i64;
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut done: BTreeMap<&str, Milestone> = BTreeMap::new();
    loop {
        // Show what happened since last time. Events and worker states come from one read
        // transaction: a worker seen ended here has its last events printed in this same pass,
        // before anything the next pass spawns because of it.
        let (events, workers) = store
            .read(|tx| {
                let workers = worker_of
                    .iter()
                    .map(|(repo, id)| Ok((*repo, ws::get_worker(tx, id)?)))
                    .collect::<Result<Vec<_>, crate::store::sql::Error>>()?;
                Ok((ws::events_since(tx, last_seq)?, workers))
            })
            .map_err(|e| e.to_string())?;
        for e in events {
            last_seq = e.seq;
            let repo = name_of.get(&e.worker_id).copied().unwrap_or("?");
            let line = match e.kind.as_str() {
                "transition" => Some(e.detail.clone()),
                "violation" => Some(format!("violation: {}", e.detail)),
                "lock_released" => Some("chain lock released".to_string()),
                // The change on its way to the base branch: moved, then its CI green.
                "landing" if e.detail.contains("-> base_ci") || e.detail.contains("-> landed") => {
                    Some(format!("landing: {}", e.detail))
                }
                _ => None,
            };
            if let Some(line) = line {
                say!(
                    json,
                    "{:>6.1}s  {:<5} {}",
                    started.elapsed().as_secs_f64(),
                    repo,
                    line
                );
            }
        }
        for (repo, w) in workers {
            if let Some(w) = w
                && ((w.milestone().is_terminal() && !w.progress.landing_active())
                    || (!w.worker_running && w.lease_until_ms == Some(0)))
            {
                done.insert(repo, w.milestone());
            }
        }
        // Spawn what may run now: dependencies (within the demo) DONE, chain lock free.
        for (repo, task) in &tasks {
            if worker_of.contains_key(repo) {
                continue;
            }
            let deps_done = l.config.graph.deps(repo).iter().all(|d| {
                done.get(d.as_str()) == Some(&Milestone::Done) || !tasks.iter().any(|(r, _)| r == d)
            });
            if !deps_done {
                continue;
            }
            let req = SpawnRequest {
                repo: repo.to_string(),
                task: task.to_string(),
                ..Default::default()
            };
            match prepare(&l.config, &l.contract, &l.state_dir, &mut store, &req)
                .map_err(|e| e.to_string())?
            {
                Spawned::Ready(w) => {
                    start_detached(&l, &w.id).map_err(|e| e.to_string())?;
                    say!(
                        json,
                        "{:>6.1}s  {:<5} spawned {} (chain lock taken)",
                        started.elapsed().as_secs_f64(),
                        repo,
                        w.id
                    );
                    name_of.insert(w.id.clone(), repo);
                    worker_of.insert(repo, w.id.clone());
                }
                Spawned::Blocked(b) => {
                    let why: Vec<String> = b.iter().map(|x| x.describe(repo)).collect();
                    tracing::debug!("{repo} waits: {}", why.join("; "));
                }
                Spawned::AtCapacity(_) => {}
            }
        }
        if done.len() == tasks.len() || Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }

    // Verify every claim from the records, not from the workers.
    say!(
        json,
        "\n{:<6} {:<16} {:<10} {:<12} {:<8} RADICLE-PUSH",
        "REPO",
        "WORKER",
        "MILESTONE",
        "COMMIT",
        "CI"
    );
    let mut all_ok = true;
    let mut verified = Vec::new();
    for (repo, _) in &tasks {
        let Some(id) = worker_of.get(repo) else {
            say!(json, "{repo:<6} never spawned");
            all_ok = false;
            verified.push(DemoWorker {
                repo: repo.to_string(),
                worker_id: None,
                milestone: None,
                sha: None,
                verdict: None,
                sync_job: None,
                fix_attempts: 0,
                verified: false,
            });
            continue;
        };
        let w = store
            .worker(id)
            .map_err(|e| e.to_string())?
            .ok_or("worker vanished")?;
        let pushes = store
            .read(|tx| ws::pushes(tx, id))
            .map_err(|e| e.to_string())?;
        let last = pushes.last();
        let sync = last
            .and_then(|p| p.runs.as_ref())
            .and_then(|runs| {
                runs.iter()
                    .flat_map(|r| &r.jobs)
                    .find(|j| j.name == "radicle-push")
                    .map(|j| j.status.as_str())
            })
            .unwrap_or("-");
        let ok = w.milestone() == Milestone::Done
            && last.and_then(|p| p.verdict) == Some(VerdictKind::Green)
            && sync == "success";
        all_ok &= ok;
        say!(
            json,
            "{:<6} {:<16} {:<10} {:<12} {:<8} {}{}",
            repo,
            id,
            w.milestone().as_str(),
            last.map(|p| p.sha.short()).unwrap_or("-"),
            last.and_then(|p| p.verdict)
                .map(|v| v.as_str())
                .unwrap_or("-"),
            sync,
            if w.progress.fix_attempts > 0 {
                format!("   (after {} FIXING_CI attempt)", w.progress.fix_attempts)
            } else {
                String::new()
            }
        );
        verified.push(DemoWorker {
            repo: repo.to_string(),
            worker_id: Some(id.clone()),
            milestone: Some(w.milestone()),
            sha: last.map(|p| p.sha.clone()),
            verdict: last.and_then(|p| p.verdict),
            sync_job: (sync != "-").then(|| sync.to_string()),
            fix_attempts: w.progress.fix_attempts,
            verified: ok,
        });
    }
    let wave = if all_ok {
        let wave = wave_part(&l, &dir, started, json)?;
        all_ok &= wave.all_done;
        Some(wave)
    } else {
        None
    };
    let locks = store.locks().map_err(|e| e.to_string())?;
    say!(
        json,
        "\n{} in {:.1}s; locks held now: {}",
        if all_ok {
            "every task DONE with CI verified green and radicle-push success"
        } else {
            "NOT every task reached a verified DONE"
        },
        started.elapsed().as_secs_f64(),
        locks.len()
    );
    let kept = keep || !all_ok;
    if kept {
        say!(
            json,
            "state kept in {} (orch --config {} status)",
            dir.display(),
            config_path.display()
        );
    } else {
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }
    if json {
        crate::operator::view::print_json(&DemoView {
            ok: all_ok,
            elapsed_s: started.elapsed().as_millis() as f64 / 1000.0,
            dir: dir.display().to_string(),
            kept,
            workers: verified,
            wave,
            locks_held: locks.len(),
        });
    }
    Ok(if all_ok { 0 } else { 1 })
}

/// The demo's wave file: the organisation's next round of work as one wave.
const WAVE_YAML: &str = r#"name: demo-wave
tasks:
  - {id: core-next, repo: core, task: "Core: API v2 (vm must follow)", estimate: 2m}
  - {id: sdk-docs, repo: sdk, task: "SDK: document the API", estimate: 1m}
  - {id: vm-next, repo: vm, task: "VM: second opcode table", estimate: 3m}
  - {id: net-next, repo: net, task: "Net: use the new opcodes", estimate: 2m}
  - {id: sdk-examples, repo: sdk, task: "SDK: examples of the new opcodes", after: [vm-next], estimate: 1m}
"#;

/// Part two: the same organisation run as one wave, through `orch wave run --tick`-style
/// ticks (here in-process, once a second), as cron would. True when every task is DONE.
fn wave_part(l: &Loaded, dir: &Path, started: Instant, json: bool) -> Result<DemoWave, String> {
    let file = dir.join("demo-wave.yaml");
    std::fs::write(&file, WAVE_YAML).map_err(|e| e.to_string())?;
    let wave = crate::app::wave::load(l, &file).map_err(|e| e.to_string())?;
    let plan = crate::app::wave::plan(l, &wave).map_err(|e| e.to_string())?;
    let ms = |m: u64| crate::duration::format(Duration::from_millis(m.max(1)));
    say!(
        json,
        "\nPart two: a wave ({}), run by ticks as cron would (`orch wave run demo-wave.yaml --tick`).",
        file.display()
    );
    say!(
        json,
        "  plan: makespan {} (lower bound {}; layer by layer it would take {}); critical path first.",
        ms(plan.plan.makespan_ms),
        ms(plan.plan.bound.lb_ms),
        ms(plan.plan.phase_makespan_ms)
    );
    let deadline = Instant::now() + Duration::from_secs(180);
    let mut last: BTreeMap<String, String> = BTreeMap::new();
    let mut ticks = 0;
    let mut store = l.store().map_err(|e| e.to_string())?;
    let mut last_seq = store
        .read(|tx| ws::events_since(tx, 0))
        .map_err(|e| e.to_string())?
        .last()
        .map(|e| e.seq)
        .unwrap_or(0);
    // The next tick comes when a worker changes state or a lock goes (as `orch wave run`
    // does), so the demo's time is its CI jobs', not a tick interval's.
    let waiter = crate::wake::Waiter::install(&l.state_dir);
    loop {
        let r = crate::app::wave::tick(l, &wave).map_err(|e| e.to_string())?;
        ticks += 1;
        // A change that broke a dependent, and the fix worker orch gave it (outside the wave,
        // ahead of it: the wave's tasks on that chain wait for its lock).
        let events = store
            .read(|tx| ws::events_since(tx, last_seq))
            .map_err(|e| e.to_string())?;
        for e in events {
            last_seq = e.seq;
            let fix = e.worker_id.contains('-')
                && store
                    .worker(&e.worker_id)
                    .ok()
                    .flatten()
                    .and_then(|w| w.task_id)
                    .is_some_and(|t| t.contains("/fix-"));
            let line = match e.kind.as_str() {
                "landing" if e.detail.contains("-> broken") => {
                    Some(format!("breakage: {}", e.detail))
                }
                "fix_spawned" => Some(e.detail.clone()),
                "transition" if fix => Some(format!("fix {}: {}", e.worker_id, e.detail)),
                "landing" if fix && e.detail.contains("-> landed") => {
                    Some(format!("fix {}: {}", e.worker_id, e.detail))
                }
                _ => None,
            };
            if let Some(line) = line {
                say!(json, "{:>6.1}s  {}", started.elapsed().as_secs_f64(), line);
            }
        }
        let Some(v) = r.view else {
            crate::wake::wait_or_sleep(waiter.as_ref(), Duration::from_millis(1000));
            continue;
        };
        for t in &v.tasks {
            let prev = last.insert(t.id.clone(), t.state.clone());
            if prev.as_deref() == Some(t.state.as_str()) || (prev.is_none() && t.state == "PENDING")
            {
                continue;
            }
            let what = if r.started.iter().any(|s| s.task == t.id) {
                format!(
                    "started by tick {ticks} ({})",
                    t.worker.as_deref().unwrap_or("-")
                )
            } else {
                t.state.clone()
            };
            say!(
                json,
                "{:>6.1}s  {:<12} {:<4} {}",
                started.elapsed().as_secs_f64(),
                t.id,
                t.repo,
                what
            );
        }
        if v.finished {
            say!(
                json,
                "  wave {}: {}/{} DONE after {ticks} ticks; another tick now does nothing",
                v.name,
                v.done,
                v.tasks.len()
            );
            return Ok(DemoWave {
                name: v.name.clone(),
                tasks: v.tasks.len(),
                done: v.done,
                ticks,
                all_done: v.all_done,
            });
        }
        if Instant::now() >= deadline {
            say!(json, "  wave {}: timed out", v.name);
            return Ok(DemoWave {
                name: v.name.clone(),
                tasks: v.tasks.len(),
                done: v.done,
                ticks,
                all_done: false,
            });
        }
        crate::wake::wait_or_sleep(waiter.as_ref(), Duration::from_millis(1000));
    }
}
