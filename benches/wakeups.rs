//! What waiting costs, and how long it takes to notice (`cargo bench --bench wakeups -- MODE`):
//!
//! - `idle [N]` (default 50): N workers at work on N independent repositories that say nothing
//!   (`tests/workers/idle.sh`: one WORKING line, then `sleep`). Once all are supervised, the
//!   CPU time of every `orch __supervise` process (all its threads, from
//!   `/proc/<pid>/task/*/schedstat`, nanoseconds) is read, again after `ORCH_BENCH_WINDOW`
//!   seconds (default 20), and the difference is printed as a share of one core.
//!   `ORCH_BENCH_PROCS=1000` starts that many idle unrelated processes first (`sleep`), to show
//!   whether a supervisor's cost grows with the host.
//! - `latency [K]` (default 10): K workers, one after another, each commits, pushes and ends
//!   its turn (`tests/workers/push_and_end.sh`); `land: {policy: none}` so the chain lock goes
//!   at DONE. For each: from the local forge run's `finished_ms` (CI green) to the worker's
//!   DONE event and to its lock's release in `lock_history`. Prints min / median / max.
//!
//! - `tasks [N]` (default 200): N trivial tasks end to end, all at once: N `orch spawn`
//!   processes on N independent repositories, each worker commits, pushes and ends its turn
//!   (`push_and_end.sh`), CI (one trivial job and the sync job) on the local forge
//!   (`max_concurrent_runs: 4`), `land: {policy: none}`. Wall time from the first spawn to the
//!   last DONE with every lock free, and the whole machine's busy CPU time over it (from
//!   `/proc/stat`: supervisors and runners are detached, not this bench's children; run it on an
//!   otherwise idle machine).
//!
//! - `spawns [N]` (default 200): N `orch spawn` processes at once on N independent repositories
//!   (idle workers), each timed from its start to its answer. Prints how many were refused
//!   (exit ≠ 0: "database is busy") and the answer times (median, 90th percentile, max).
//!   `ORCH_DB_BUSY_TIMEOUT` is the default (10 s) unless set; `ORCH_TEST_NO_WRITE_QUEUE=1` makes
//!   every writer skip the write queue and wait in SQLite's busy handler alone (the "before").
//!
//! Settings: release binary (the bench profile), local forge, `ci.poll_interval` as given by
//! `ORCH_BENCH_POLL` (default `10s`, orch's default: a fallback when wakeups work).

#[path = "../tests/support/org.rs"]
mod org;

use orch::store::sql::OptionalExtension;
use org::{Org, RepoSpec, Spec};
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let mode = args.first().map(String::as_str).unwrap_or("idle");
    let n: Option<usize> = args.get(1).and_then(|a| a.parse().ok());
    match mode {
        "idle" => idle(n.unwrap_or(50)),
        "latency" => latency(n.unwrap_or(10)),
        "tasks" => tasks(n.unwrap_or(200)),
        "spawns" => spawns(n.unwrap_or(200)),
        other => panic!("unknown mode {other:?}: idle [N] | latency [K]"),
    }
}

fn poll_setting() -> String {
    std::env::var("ORCH_BENCH_POLL").unwrap_or_else(|_| "10s".into())
}

/// CPU time of every thread of `pid`, in nanoseconds.
fn cpu_ns(pid: i32) -> Option<u64> {
    let mut total = 0;
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
    {
        let text = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
        total += text
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
    }
    Some(total)
}

/// Idle unrelated processes, killed when dropped.
struct Crowd(Vec<std::process::Child>);

impl Crowd {
    fn start(n: usize) -> Crowd {
        Crowd(
            (0..n)
                .map(|_| {
                    std::process::Command::new("sleep")
                        .arg("900")
                        .spawn()
                        .expect("sleep starts")
                })
                .collect(),
        )
    }
}

impl Drop for Crowd {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn idle(n: usize) {
    let window: u64 = std::env::var("ORCH_BENCH_WINDOW")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let procs: usize = std::env::var("ORCH_BENCH_PROCS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let _crowd = Crowd::start(procs);
    let mut spec = Spec::local("idle.sh");
    spec.max_parallel = n;
    spec.poll_interval = poll_setting();
    for i in 0..n {
        spec = spec.repo(RepoSpec::new(&format!("r{i:02}")).standard_ci("true"));
    }
    let org = Org::new(spec);
    let ids: Vec<String> = (0..n)
        .map(|i| org.spawn_detached(&format!("r{i:02}"), "idle task"))
        .collect();
    let pids: Vec<i32> = ids
        .iter()
        .map(|id| org.worker(id).supervisor_pid.expect("supervisor") as i32)
        .collect();
    // Settle: start-up work (the first checkpoint, the worker's start) is not idling.
    std::thread::sleep(Duration::from_secs(3));
    let before: Vec<u64> = pids.iter().map(|&p| cpu_ns(p).unwrap_or(0)).collect();
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(window));
    let after: Vec<u64> = pids.iter().map(|&p| cpu_ns(p).unwrap_or(0)).collect();
    let elapsed = t0.elapsed().as_secs_f64();
    let alive = pids
        .iter()
        .filter(|&&p| orch::process::process_alive(p, None))
        .count();
    let used: Vec<f64> = before
        .iter()
        .zip(&after)
        .map(|(b, a)| a.saturating_sub(*b) as f64 / 1e9)
        .collect();
    let total: f64 = used.iter().sum();
    let max = used.iter().cloned().fold(0.0, f64::max);
    println!(
        "wakeups idle: {n} idle supervisors, {procs} unrelated idle processes, poll {}, window {elapsed:.1} s",
        poll_setting()
    );
    println!(
        "  all {n} supervisors together: {:.2} % of one core ({:.1} ms CPU); per supervisor avg {:.3} ms/s, max {:.3} ms/s; {alive} of {n} alive",
        100.0 * total / elapsed,
        total * 1000.0,
        1000.0 * total / n as f64 / elapsed,
        1000.0 * max / elapsed,
    );
    for id in &ids {
        let _ = org.run(&["cancel", id, "--reason", "bench over"]);
    }
    org::poll(Duration::from_secs(60), || {
        pids.iter()
            .all(|&p| !orch::process::process_alive(p, None))
            .then_some(())
    });
    assert_eq!(alive, n, "every supervisor must stay up while idle");
}

fn latency(k: usize) {
    let mut spec = Spec::local("push_and_end.sh");
    spec.poll_interval = poll_setting();
    spec = spec
        .land("{policy: none}")
        .repo(RepoSpec::new("r00").standard_ci("test -f feature.txt"));
    let org = Org::new(spec);
    let (mut to_done, mut to_free) = (Vec::new(), Vec::new());
    for round in 0..k {
        let id = org.spawn_detached("r00", &format!("round {round}"));
        // Opened after the first spawn made the state directory.
        let mut db = orch::store::Store::open(&org.state).expect("orch.db opens");
        let found = org::poll(Duration::from_secs(120), || {
            db.read(|db| {
            let done: Option<i64> = db
                .query_row(
                    "SELECT at_ms FROM worker_events WHERE worker_id = ?1 AND milestone = 'DONE' ORDER BY seq LIMIT 1",
                    [&id],
                    |r| r.get(0),
                )
                .optional()?;
            let free: Option<i64> = db
                .query_row(
                    "SELECT at_ms FROM lock_history WHERE holder = ?1 AND action = 'release'",
                    [&id],
                    |r| r.get(0),
                )
                .optional()?;
            let sha: Option<String> = db
                .query_row(
                    "SELECT sha FROM pushes WHERE worker_id = ?1 ORDER BY rowid DESC LIMIT 1",
                    [&id],
                    |r| r.get(0),
                )
                .optional()?;
            let green: Option<i64> = match sha {
                Some(sha) => db
                    .query_row(
                        "SELECT MAX(finished_ms) FROM local_runs WHERE sha = ?1",
                        [&sha],
                        |r| r.get(0),
                    )
                    .optional()?
                    .flatten(),
                None => None,
            };
            Ok(green.zip(done).zip(free).map(|((g, d), f)| (g, d, f)))
            })
            .ok()
            .flatten()
        });
        let (green, done, free) =
            found.unwrap_or_else(|| panic!("worker {id} did not reach DONE within 120 s"));
        to_done.push((done - green) as f64);
        to_free.push((free - green) as f64);
    }
    let stats = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        format!(
            "min {:.0} / median {:.0} / max {:.0} ms",
            v[0],
            v[v.len() / 2],
            v[v.len() - 1]
        )
    };
    println!(
        "wakeups latency: {k} workers one after another, local forge, poll {}",
        poll_setting()
    );
    println!("  CI green -> DONE: {}", stats(&mut to_done));
    println!("  CI green -> lock free: {}", stats(&mut to_free));
}

/// Busy CPU time of the whole machine so far (user + nice + system + irq + softirq), seconds.
fn machine_cpu_s() -> f64 {
    let text = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let f: Vec<u64> = text
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    let busy = [0usize, 1, 2, 5, 6]
        .iter()
        .map(|&i| f.get(i).copied().unwrap_or(0))
        .sum::<u64>();
    busy as f64 / ticks_per_second()
}

fn ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as f64 } else { 100.0 }
}

fn tasks(n: usize) {
    let mut spec = Spec::local("push_and_end.sh");
    spec.forge = org::ForgeSpec::Local(4);
    spec.max_parallel = n;
    spec.poll_interval = poll_setting();
    spec = spec.land("{policy: none}");
    for i in 0..n {
        spec = spec.repo(RepoSpec::new(&format!("r{i:03}")).standard_ci("test -f feature.txt"));
    }
    let org = Org::new(spec);
    let cpu0 = machine_cpu_s();
    let t0 = Instant::now();
    let repos: Vec<String> = (0..n).map(|i| format!("r{i:03}")).collect();
    org.spawn_at_once(&repos, "trivial");
    let spawned = t0.elapsed().as_secs_f64();
    let all_done = org::poll(Duration::from_secs(900), || {
        let mut store = org.store();
        let workers = store.workers().ok()?;
        (workers.len() == n
            && workers
                .iter()
                .all(|w| w.progress.milestone == orch::milestone::Milestone::Done)
            && store.locks().ok()?.is_empty())
        .then_some(())
    });
    let wall = t0.elapsed().as_secs_f64();
    let cpu = machine_cpu_s() - cpu0;
    println!(
        "wakeups tasks: {n} trivial tasks at once (local forge, 4 run slots, poll {})",
        poll_setting()
    );
    println!(
        "  all DONE, locks free: {}; wall {wall:.1} s (spawns answered after {spawned:.1} s); machine CPU over the run {cpu:.1} s",
        all_done.is_some()
    );
    assert!(all_done.is_some(), "every task must end DONE");
}

fn spawns(n: usize) {
    let mut spec = Spec::local("idle.sh");
    spec.max_parallel = n;
    for i in 0..n {
        spec = spec.repo(RepoSpec::new(&format!("r{i:03}")).standard_ci("true"));
    }
    let org = Org::new(spec);
    let t0 = Instant::now();
    let children: Vec<_> = (0..n)
        .map(|i| {
            let child = org
                .cmd(&[
                    "spawn",
                    "--repo",
                    &format!("r{i:03}"),
                    "--task",
                    "idle",
                    "--json",
                ])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("orch spawn starts");
            let started = Instant::now();
            std::thread::spawn(move || {
                let out = child.wait_with_output().expect("orch spawn ends");
                (started.elapsed().as_secs_f64(), out)
            })
        })
        .collect();
    let mut times = Vec::new();
    let mut refused = Vec::new();
    let mut ids = Vec::new();
    for c in children {
        let (t, out) = c.join().unwrap();
        times.push(t);
        if out.status.success() {
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
            if let Some(id) = v["worker_id"].as_str() {
                ids.push(id.to_string());
            }
        } else {
            refused.push(
                String::from_utf8_lossy(&out.stderr)
                    .lines()
                    .last()
                    .unwrap_or("")
                    .to_string(),
            );
        }
    }
    let wall = t0.elapsed().as_secs_f64();
    times.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
    println!(
        "wakeups spawns: {n} at once, busy timeout {}, write queue {}",
        std::env::var("ORCH_DB_BUSY_TIMEOUT").unwrap_or_else(|_| "10s (default)".into()),
        if std::env::var_os("ORCH_TEST_NO_WRITE_QUEUE").is_some() {
            "off"
        } else {
            "on"
        }
    );
    println!(
        "  refused {} of {n}; answered in median {:.1} s, p90 {:.1} s, max {:.1} s; wall {wall:.1} s",
        refused.len(),
        at(0.5),
        at(0.9),
        at(1.0)
    );
    if let Some(first) = refused.first() {
        println!("  first refusal: {first}");
    }
    for id in &ids {
        let _ = org.run(&["cancel", id, "--reason", "bench over"]);
    }
}
