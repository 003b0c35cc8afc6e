//! The wave planner: how close its schedule comes to the lower bound, how much it gains over
//! the seed's phase plan, and how long planning takes.
//!
//!   cargo bench --bench waves
//!
//! - random organisations (30 repositories, each depending on up to 3 earlier ones) with
//!   random waves of 50, 100, 200 and 500 tasks (estimates 5 min – 2 h, 5% of tasks with an
//!   `after` on an earlier task), `worker.max_parallel` 2, 4 and 8, 20 waves each;
//! - the seed organisation's ten repositories: one task each, and three tasks each, random
//!   estimates, 200 waves each;
//! - planning time (task graph, schedule, lower bound, phase plan) for 10,000 tasks on 1,000
//!   repositories.
//!
//! makespan / LB: LB = max(longest task, critical path, total work / min(m, width)).
//! Improvement over the phase plan: 1 − makespan / phase makespan, averaged over the waves
//! where the phase plan is above LB ("room"). Knob: ORCH_BENCH_SEED (1).

use orch::graph::RepoGraph;
use orch::wave::plan::plan;
use orch::wave::{Dag, TaskDef};
use std::time::Instant;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn random_org(rng: &mut Rng, repos: usize) -> RepoGraph {
    RepoGraph::new((0..repos).map(|i| {
        let k = if i == 0 { 0 } else { rng.below(4) as usize };
        let deps: Vec<String> = (0..k)
            .map(|_| format!("r{}", rng.below(i as u64)))
            .collect();
        (format!("r{i}"), deps)
    }))
}

fn task(i: usize, repo: String, after: Vec<String>) -> TaskDef {
    TaskDef {
        id: format!("t{i}"),
        repo,
        task: "x".into(),
        plan: None,
        component: None,
        estimate: None,
        after,
        land: None,
        model: None,
        complexity: None,
        security_sensitive: false,
        specifics: Default::default(),
    }
}

fn random_wave(rng: &mut Rng, graph: &RepoGraph, n: usize) -> (Dag, Vec<u64>) {
    let names = graph.names().to_vec();
    loop {
        let tasks: Vec<TaskDef> = (0..n)
            .map(|i| {
                let repo = names[rng.below(names.len() as u64) as usize].clone();
                let after = if i > 0 && rng.below(20) == 0 {
                    vec![format!("t{}", rng.below(i as u64))]
                } else {
                    Vec::new()
                };
                task(i, repo, after)
            })
            .collect();
        if let Ok(dag) = Dag::build(&tasks, graph) {
            let est = (0..n).map(|_| (5 + rng.below(116)) * 60_000).collect();
            return (dag, est);
        }
    }
}

fn seed() -> RepoGraph {
    RepoGraph::seed_organisation()
}

#[derive(Default)]
struct Stats {
    n: usize,
    ratio_sum: f64,
    worst: f64,
    optimal: usize,
    room: usize,
    gain_sum: f64,
}

impl Stats {
    fn add(&mut self, makespan: u64, lb: u64, phase: u64) {
        let ratio = makespan as f64 / lb as f64;
        self.n += 1;
        self.ratio_sum += ratio;
        self.worst = self.worst.max(ratio);
        if makespan == lb {
            self.optimal += 1;
        }
        if phase > lb {
            self.room += 1;
            self.gain_sum += 1.0 - makespan as f64 / phase as f64;
        }
    }
    fn row(&self, label: &str) {
        println!(
            "| {label} | {} | {:.3} | {:.3} | {}/{} | {}/{} | {:.1}% |",
            self.n,
            self.ratio_sum / self.n as f64,
            self.worst,
            self.optimal,
            self.n,
            self.room,
            self.n,
            if self.room == 0 {
                0.0
            } else {
                100.0 * self.gain_sum / self.room as f64
            }
        );
    }
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else to parse.
    let mut rng = Rng(std::env::var("ORCH_BENCH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1u64)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        | 1);
    println!(
        "| waves | count | makespan/LB avg | worst | at LB | phase plan above LB | gain over phase plan (where above LB) |"
    );
    println!("|---|---|---|---|---|---|---|");
    let mut all = Stats::default();
    for n in [50usize, 100, 200, 500] {
        for m in [2usize, 4, 8] {
            let mut s = Stats::default();
            for _ in 0..20 {
                let graph = random_org(&mut rng, 30);
                let (dag, est) = random_wave(&mut rng, &graph, n);
                let p = plan(&dag, &graph, &est, m);
                s.add(p.makespan_ms, p.bound.lb_ms, p.phase_makespan_ms);
                all.add(p.makespan_ms, p.bound.lb_ms, p.phase_makespan_ms);
            }
            s.row(&format!("random, {n} tasks, m={m}"));
        }
    }
    all.row("**random, all**");
    let g = seed();
    let names = g.names().to_vec();
    for per_repo in [1usize, 3] {
        for m in [2usize, 4, 8] {
            let mut s = Stats::default();
            for _ in 0..200 {
                let tasks: Vec<TaskDef> = (0..per_repo)
                    .flat_map(|k| names.iter().map(move |r| (k, r.clone())))
                    .enumerate()
                    .map(|(i, (_, r))| task(i, r, Vec::new()))
                    .collect();
                let dag = Dag::build(&tasks, &g).unwrap();
                let est: Vec<u64> = (0..tasks.len())
                    .map(|_| (5 + rng.below(116)) * 60_000)
                    .collect();
                let p = plan(&dag, &g, &est, m);
                s.add(p.makespan_ms, p.bound.lb_ms, p.phase_makespan_ms);
            }
            s.row(&format!("seed org, {per_repo} task(s)/repo, m={m}"));
        }
    }
    // Planning time for 10,000 tasks.
    let graph = random_org(&mut rng, 1000);
    let names = graph.names().to_vec();
    let tasks: Vec<TaskDef> = (0..10_000)
        .map(|i| task(i, names[rng.below(1000) as usize].clone(), Vec::new()))
        .collect();
    let est: Vec<u64> = (0..tasks.len())
        .map(|_| (5 + rng.below(116)) * 60_000)
        .collect();
    for m in [8usize, 64] {
        let mut times = Vec::new();
        let mut last = None;
        for _ in 0..5 {
            let t0 = Instant::now();
            let dag = Dag::build(&tasks, &graph).unwrap();
            let t1 = Instant::now();
            let p = plan(&dag, &graph, &est, m);
            times.push((t1 - t0, t1.elapsed()));
            last = Some(p);
        }
        times.sort();
        let (build, planning) = times[times.len() / 2];
        let p = last.unwrap();
        println!(
            "\n10,000 tasks on 1,000 repositories, m={m}: task graph {:.0} ms + plan (schedule, LB, phase plan) {:.0} ms = {:.0} ms (median of 5); makespan/LB {:.3}, phase plan {:.2}x makespan",
            build.as_secs_f64() * 1e3,
            planning.as_secs_f64() * 1e3,
            (build + planning).as_secs_f64() * 1e3,
            p.ratio,
            p.phase_makespan_ms as f64 / p.makespan_ms as f64
        );
    }
}
