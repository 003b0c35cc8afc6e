//! What supervisors cost (`cargo bench --bench supervisors`, optionally `-- <workers>`):
//! N (default 50) scripted workers at once on N independent repositories of the local forge.
//! Each worker (`tests/workers/bench.sh`) prints a WORKING line every 2 s for ~10 s, commits,
//! pushes, waits for green with `orch ci status --wait`, and says DONE. Every 100 ms the bench
//! samples each supervisor process (`orch __supervise`): CPU time (utime + stime from
//! `/proc/<pid>/stat`, the supervisor itself, not its worker) and memory (VmRSS, VmHWM from
//! `/proc/<pid>/status`), and prints totals and per-supervisor figures.
//!
//! Settings: `worker.max_parallel: N`, `forge.max_concurrent_runs: 4` (two cores; a run is two
//! trivial jobs), `ci.poll_interval: 1s`, release binary (the bench profile).

#[path = "../tests/support/org.rs"]
mod org;

use org::{Org, RepoSpec, Spec};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

#[derive(Default, Clone, Copy)]
struct Sample {
    cpu_ticks: u64,
    rss_kib: u64,
    hwm_kib: u64,
    /// Proportional set size: shared pages (the binary, libraries) divided among sharers.
    pss_kib: u64,
}

fn sample(pid: i32) -> Option<Sample> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let f: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
    if matches!(f.first(), Some(&"Z") | Some(&"X")) {
        return None; // exited: keep the last live sample
    }
    let cpu_ticks = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    let (hwm_kib, rss_kib) = org::memory_kib(pid)?;
    let pss_kib = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("Pss:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0);
    Some(Sample {
        cpu_ticks,
        rss_kib,
        hwm_kib,
        pss_kib,
    })
}

fn ticks_per_second() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as f64 } else { 100.0 }
}

fn main() {
    let n: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(50);
    let mut spec = Spec::local("bench.sh");
    spec.forge = org::ForgeSpec::Local(4);
    spec.max_parallel = n;
    spec.poll_interval = "1s".into();
    for i in 0..n {
        spec = spec.repo(RepoSpec::new(&format!("r{i:02}")).standard_ci("test -f feature.txt"));
    }
    let org = Org::new(spec);
    println!(
        "supervisors bench: {n} workers on {n} repositories (local forge, 4 run slots, poll 1s)"
    );

    let start = Instant::now();
    let mut ids = Vec::new();
    for i in 0..n {
        ids.push(org.spawn_detached(&format!("r{i:02}"), "bench task"));
    }
    let spawned = start.elapsed();
    let pids: Vec<i32> = ids
        .iter()
        .map(|id| org.worker(id).supervisor_pid.expect("supervisor") as i32)
        .collect();

    let mut last: BTreeMap<i32, Sample> = BTreeMap::new();
    let mut peak_total_rss = 0u64;
    let mut peak_total_pss = 0u64;
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut store = org.store();
    loop {
        let (mut total_rss, mut total_pss) = (0, 0);
        for &pid in &pids {
            if let Some(s) = sample(pid) {
                total_rss += s.rss_kib;
                total_pss += s.pss_kib;
                last.insert(pid, s);
            }
        }
        peak_total_rss = peak_total_rss.max(total_rss);
        peak_total_pss = peak_total_pss.max(total_pss);
        let workers = store.workers().unwrap();
        let finished = workers
            .iter()
            .filter(|w| w.progress.milestone.is_terminal())
            .count();
        let alive = pids
            .iter()
            .filter(|&&p| orch::process::process_alive(p, None))
            .count();
        if finished == n && alive == 0 {
            break;
        }
        if Instant::now() >= deadline {
            for id in &ids {
                let _ = org.run(&["cancel", id, "--reason", "bench deadline"]);
            }
            panic!("bench did not finish within 600 s ({finished} of {n} finished)");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let wall = start.elapsed();
    let done = store
        .workers()
        .unwrap()
        .iter()
        .filter(|w| w.progress.milestone == orch::milestone::Milestone::Done)
        .count();

    let hz = ticks_per_second();
    let cpu_s: Vec<f64> = pids
        .iter()
        .map(|p| last.get(p).map_or(0, |s| s.cpu_ticks) as f64 / hz)
        .collect();
    let hwm: Vec<u64> = pids
        .iter()
        .map(|p| last.get(p).map_or(0, |s| s.hwm_kib))
        .collect();
    let total_cpu: f64 = cpu_s.iter().sum();
    let max_cpu = cpu_s.iter().cloned().fold(0.0, f64::max);
    let avg = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let hwm_f: Vec<f64> = hwm.iter().map(|&k| k as f64).collect();
    println!(
        "  DONE: {done} of {n}; wall {:.1} s (spawning took {:.1} s)",
        wall.as_secs_f64(),
        spawned.as_secs_f64()
    );
    println!(
        "  supervisor CPU (utime+stime): total {:.2} s, per supervisor avg {:.0} ms, max {:.0} ms; {:.2}% of one core per supervisor over the run",
        total_cpu,
        avg(&cpu_s) * 1000.0,
        max_cpu * 1000.0,
        100.0 * avg(&cpu_s) / wall.as_secs_f64()
    );
    println!(
        "  supervisor memory: VmHWM avg {:.1} MiB, max {:.1} MiB; all {n} supervisors together at peak: VmRSS {:.1} MiB (shared pages counted {n} times), PSS {:.1} MiB",
        avg(&hwm_f) / 1024.0,
        hwm.iter().max().copied().unwrap_or(0) as f64 / 1024.0,
        peak_total_rss as f64 / 1024.0,
        peak_total_pss as f64 / 1024.0
    );
    println!(
        "  (CPU is cumulative per process; what a supervisor used after its last 100 ms sample is not counted)"
    );
    assert_eq!(done, n, "every worker must reach DONE");
}
