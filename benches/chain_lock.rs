//! Chain-lock benchmarks (`cargo bench --bench chain_lock`):
//! - `can_spawn` on a random 10,000-repository DAG with 100 active holders;
//! - a chain-lock acquire+release cycle against the same SQLite doing a bare insert+delete.

use criterion::{Criterion, criterion_group, criterion_main};
use orch::graph::RepoGraph;
use orch::lock::{ChainLock, HolderKind, blockers};
use orch::store::{LockAttempt, Store};
use std::hint::black_box;

/// xorshift64*: deterministic, dependency-free.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A random DAG: repository i depends on up to 3 repositories with smaller indices, biased
/// towards near neighbours so that chains are deep, as in real organisations.
fn random_dag(n: usize, rng: &mut Rng) -> RepoGraph {
    RepoGraph::new((0..n).map(|i| {
        let deps: Vec<String> = if i == 0 {
            Vec::new()
        } else {
            (0..rng.below(4))
                .map(|_| {
                    let back = 1 + rng.below(i.min(50));
                    format!("r{}", i - back)
                })
                .collect()
        };
        (format!("r{i}"), deps)
    }))
}

fn bench_can_spawn(c: &mut Criterion) {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let g = random_dag(10_000, &mut rng);
    let holders: Vec<ChainLock> = (0..100)
        .map(|k| ChainLock {
            id: k,
            repo: format!("r{}", rng.below(10_000)),
            holder: format!("w{k}"),
            kind: HolderKind::Worker,
            reason: None,
            by: None,
            acquired_ms: 0,
        })
        .collect();
    let probes: Vec<String> = (0..256)
        .map(|_| format!("r{}", rng.below(10_000)))
        .collect();
    let mut i = 0;
    c.bench_function("can_spawn 10k repos, 100 holders", |b| {
        b.iter(|| {
            i = (i + 1) % probes.len();
            black_box(blockers(&g, &probes[i], &holders).is_empty())
        })
    });
}

fn bench_lock_cycle(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let g = RepoGraph::new([
        ("core".to_string(), vec![]),
        ("vm".to_string(), vec!["core".to_string()]),
        ("os".to_string(), vec!["vm".to_string()]),
    ]);
    store
        .conn()
        .execute_batch(
            "CREATE TABLE IF NOT EXISTS bare (id INTEGER PRIMARY KEY, repo TEXT NOT NULL)",
        )
        .unwrap();
    let mut group = c.benchmark_group("sqlite");
    group.bench_function("chain lock acquire+release", |b| {
        b.iter(|| {
            let got = store
                .try_lock(&g, "vm", "w", HolderKind::Worker, None, None)
                .unwrap();
            assert!(matches!(got, LockAttempt::Acquired(_)));
            store.release("w", Some("bench"), None).unwrap();
        })
    });
    group.bench_function("bare insert+delete", |b| {
        b.iter(|| {
            store
                .write(|tx| {
                    tx.prepare_cached("INSERT INTO bare (repo) VALUES ('vm')")?
                        .execute([])
                })
                .unwrap();
            store
                .write(|tx| {
                    tx.prepare_cached("DELETE FROM bare WHERE repo = 'vm'")?
                        .execute([])
                })
                .unwrap();
        })
    });
    group.finish();
}

criterion_group!(benches, bench_can_spawn, bench_lock_cycle);
criterion_main!(benches);
