//! How long `orch resume` (the CLI, wall clock) takes to reconcile 1,000 orphaned
//! PUSHED_TO_CI workers against a fake Forgejo 16 that answers every request after 10 ms.
//!
//!   cargo bench --bench resume
//!
//! Each run gets a fresh state directory seeded through the library: 1,000 workers on 1,000
//! independent repositories, each holding its chain lock, tracking a pushed SHA, with no
//! supervisor alive. The fake holds a push run per SHA whose jobs (`check`, `radicle-push`)
//! are all `success`, so every worker must end DONE with its lock released. Two variants:
//! - `db`: the database is intact: `orch resume --json`;
//! - `checkpoints`: only the checkpoint files are left: `orch resume --from-checkpoints --json`
//!   (rebuild, then the same reconciliation).
//!
//! Knobs: ORCH_BENCH_WORKERS (1000), ORCH_BENCH_RUNS (5), ORCH_BENCH_LATENCY_MS (10).
//! Resume polls CI with `orch::app::resume::CI_CONCURRENCY` (16) queries in flight; the Forgejo 16
//! path costs 2 requests per SHA (`runs?head_sha=`, `runs/{id}/jobs`) plus one version probe.

#[path = "../tests/support/fake_forgejo.rs"]
mod fake_forgejo;

use fake_forgejo::{FakeForgejo, Fault, OWNER};
use orch::contract::Contract;
use orch::lock::HolderKind;
use orch::milestone::{Milestone, Progress};
use orch::store::workers::{self as ws, WorkerRecord};
use orch::store::{LockAttempt, Store, now_ms, try_lock_in};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

const TOKEN_ENV: &str = "ORCH_BENCH_FORGE_TOKEN";

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn contract_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("contracts/worker-completion.yaml")
}

fn repo(i: usize) -> String {
    format!("r{i:04}")
}

fn sha(i: usize) -> String {
    format!("{:040x}", 0xabc0_0000_0000_u64 + i as u64)
}

/// Workers, locks and pushes as a crashed orch would have left them.
fn seed(state: &Path, config: &orch::config::Config, contract: &Contract, n: usize) {
    let mut store = Store::open(state).unwrap();
    let now = now_ms();
    store
        .write(|tx| {
            for i in 0..n {
                let id = format!("{}-{i:08x}", repo(i));
                let mut progress = Progress::new(contract, now - 60_000);
                progress.milestone = Milestone::PushedToCi;
                progress.tracked_sha = Some(sha(i).into());
                progress.pushed_ms = Some(now - 30_000);
                // The worker ended its turn after its push (its word that the work is done):
                // what is left is CI's. (One that died mid-turn gets a replacement instead.)
                progress.turn_ended = true;
                let w = WorkerRecord {
                    id: id.clone(),
                    repo: repo(i),
                    task: format!("task {i}"),
                    task_id: Some(format!("t{i}")),
                    component: None,
                    plan: None,
                    progress,
                    branch: format!("orch/{id}"),
                    base_sha: format!("{:040x}", 1),
                    worktree: state.join(&id).join("worktree").display().to_string(),
                    remote: "origin".into(),
                    day: "2026-11-21".into(),
                    supervisor_pid: None,
                    supervisor_start: None,
                    lease_until_ms: Some(0),
                    worker_pid: None,
                    worker_running: false,
                    exit_code: None,
                    respawns: 0,
                    resume_note: None,
                    created_ms: now - 60_000,
                    updated_ms: now - 30_000,
                    ended_ms: None,
                    model: None,
                    model_source: None,
                    node: None,
                    fence: 0,
                };
                let LockAttempt::Acquired(_) = try_lock_in(
                    tx,
                    &config.graph,
                    &w.repo,
                    &w.id,
                    HolderKind::Worker,
                    Some(&w.task),
                    None,
                )?
                else {
                    panic!("independent repositories never block");
                };
                ws::insert_worker(tx, &w)?;
                ws::record_push(tx, &w.id, &sha(i), now - 30_000)?;
            }
            Ok(())
        })
        .unwrap();
}

/// Writes every worker's checkpoint file and removes the database.
fn only_checkpoints(state: &Path) {
    let mut store = Store::open(state).unwrap();
    let workers = store.workers().unwrap();
    for w in &workers {
        let pushes = store.read(|tx| ws::pushes(tx, &w.id)).unwrap();
        let cp = orch::checkpoint::build(w, &pushes, true);
        orch::checkpoint::write(state, w, &cp).unwrap();
    }
    drop(store);
    for f in ["orch.db", "orch.db-wal", "orch.db-shm"] {
        let _ = std::fs::remove_file(state.join(f));
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` runs this too: keep that cheap.
    let quick = !std::env::args().any(|a| a == "--bench");
    let n = env_usize("ORCH_BENCH_WORKERS", if quick { 20 } else { 1000 });
    let runs = env_usize("ORCH_BENCH_RUNS", if quick { 1 } else { 5 });
    let latency = Duration::from_millis(env_usize("ORCH_BENCH_LATENCY_MS", 10) as u64);

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let fake = rt.block_on(FakeForgejo::start("16.0.1+gitea-1.22.0"));
    fake.fail_always("/api/v1", Fault::Delay(latency));
    for i in 0..n {
        fake.add_repo(&repo(i));
        fake.add_run(
            &repo(i),
            &sha(i),
            "push",
            &[("check", "success"), ("radicle-push", "success")],
        );
    }

    let dir = tempfile::tempdir().unwrap();
    let mut yaml = format!(
        "forge: {{kind: forgejo, url: \"{}\", owner: {OWNER}, token_env: {TOKEN_ENV}}}\nci: {{sync_job: radicle-push}}\nrepos:\n",
        fake.uri()
    );
    for i in 0..n {
        yaml.push_str(&format!("  {}: {{path: repos/{}}}\n", repo(i), repo(i)));
    }
    let config_path = dir.path().join("repos.yaml");
    std::fs::write(&config_path, yaml).unwrap();
    let config = orch::config::Config::load(&config_path).unwrap();
    let contract = Contract::load(&contract_path()).unwrap();

    println!(
        "orch resume: {n} orphaned PUSHED_TO_CI workers, fake Forgejo 16 at {} ms per request, {} CI queries in flight",
        latency.as_millis(),
        orch::app::resume::CI_CONCURRENCY
    );
    for variant in ["db", "checkpoints"] {
        let mut times = Vec::new();
        let mut requests = Vec::new();
        for run in 0..runs {
            let state = dir.path().join(format!("state-{variant}-{run}"));
            seed(&state, &config, &contract, n);
            let mut args = vec!["resume", "--json"];
            if variant == "checkpoints" {
                only_checkpoints(&state);
                args.push("--from-checkpoints");
            }
            fake.clear_hits();
            let t = Instant::now();
            let out = Command::new(env!("CARGO_BIN_EXE_orch"))
                .arg("--config")
                .arg(&config_path)
                .arg("--state-dir")
                .arg(&state)
                .arg("--contract")
                .arg(contract_path())
                .args(&args)
                .env(TOKEN_ENV, "tok-bench")
                .env_remove("ORCH_LOG")
                .output()
                .unwrap();
            let secs = t.elapsed().as_secs_f64();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            let resumed = v["resumed"].as_array().unwrap();
            assert_eq!(
                resumed.len(),
                n,
                "{v}\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(
                resumed.iter().all(|r| r["action"] == "done"),
                "{}",
                resumed
                    .iter()
                    .find(|r| r["action"] != "done")
                    .map(|r| r.to_string())
                    .unwrap_or_default()
            );
            let mut store = Store::open(&state).unwrap();
            assert!(store.locks().unwrap().is_empty(), "every lock released");
            times.push(secs);
            requests.push(fake.hit_count());
            println!(
                "  {variant:<11} run {}: {secs:.2} s, {} HTTP requests",
                run + 1,
                fake.hit_count()
            );
        }
        let med = median(&mut times);
        println!(
            "{variant}: median {med:.2} s over {runs} run(s) (min {:.2}, max {:.2}); requests per run {:?}; {:.1} workers/s",
            times.first().unwrap(),
            times.last().unwrap(),
            requests,
            n as f64 / med
        );
    }
}
