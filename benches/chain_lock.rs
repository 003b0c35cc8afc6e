//! Chain-lock benchmarks (`cargo bench --bench chain_lock`):
//! - `can_spawn` on a random 10,000-repository DAG with 100 active holders: the full list of
//!   blockers (every holder checked) and `is_blocked` (stops at the first); the same where no
//!   holder blocks (200 independent blocks of 50), so every holder is checked; the
//!   reachability index those use, built once per graph;
//! - a chain-lock acquire+release cycle against the same SQLite doing a bare insert+delete,
//!   alone and with 100 other locks held;
//! - 1,000 locks taken in one transaction (what `orch resume --from-checkpoints` does), each
//!   acquire reading the table again (`try_lock_in`) or the table read once (`ActiveLocks`).

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use orch::graph::RepoGraph;
use orch::lock::{ChainLock, HolderKind, blockers, is_blocked};
use orch::store::{ActiveLocks, LockAttempt, Store, try_lock_in};
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

/// 200 independent random DAGs of 50 repositories each (`random_dag`'s rule inside a block):
/// a lock in one block never blocks another, so a probe can be checked against every holder.
fn blocks_dag(rng: &mut Rng) -> RepoGraph {
    RepoGraph::new((0..10_000).map(|i| {
        let first = i / 50 * 50;
        let deps: Vec<String> = if i == first {
            Vec::new()
        } else {
            (0..rng.below(4))
                .map(|_| format!("r{}", i - 1 - rng.below(i - first)))
                .collect()
        };
        (format!("r{i}"), deps)
    }))
}

fn holder(k: usize, repo: String) -> ChainLock {
    ChainLock {
        id: k as i64,
        repo,
        holder: format!("w{k}"),
        kind: HolderKind::Worker,
        reason: None,
        by: None,
        acquired_ms: 0,
    }
}

/// The worst case for a check: 100 holders, none blocking (one holder in each of blocks
/// 0..100, probes in blocks 100..200), so every holder is looked at.
fn bench_can_spawn_free(c: &mut Criterion) {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let g = blocks_dag(&mut rng);
    let holders: Vec<ChainLock> = (0..100)
        .map(|k| holder(k, format!("r{}", k * 50 + rng.below(50))))
        .collect();
    let probes: Vec<String> = (0..256)
        .map(|_| format!("r{}", 5_000 + rng.below(5_000)))
        .collect();
    assert!(probes.iter().all(|p| blockers(&g, p, &holders).is_empty()));
    let mut i = 0;
    c.bench_function("can_spawn 10k repos, 100 holders, none blocking", |b| {
        b.iter(|| {
            i = (i + 1) % probes.len();
            black_box(blockers(&g, &probes[i], &holders).is_empty())
        })
    });
    c.bench_function("is_blocked 10k repos, 100 holders, none blocking", |b| {
        b.iter(|| {
            i = (i + 1) % probes.len();
            black_box(is_blocked(
                &g,
                &probes[i],
                holders.iter().map(|h| h.repo.as_str()),
            ))
        })
    });
}

fn bench_can_spawn(c: &mut Criterion) {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let g = random_dag(10_000, &mut rng);
    let holders: Vec<ChainLock> = (0..100)
        .map(|k| holder(k, format!("r{}", rng.below(10_000))))
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
    c.bench_function("is_blocked 10k repos, 100 holders", |b| {
        b.iter(|| {
            i = (i + 1) % probes.len();
            black_box(is_blocked(
                &g,
                &probes[i],
                holders.iter().map(|h| h.repo.as_str()),
            ))
        })
    });
    let mut group = c.benchmark_group("index");
    group.sample_size(10);
    group.bench_function("reachability index build, 10k repos", |b| {
        b.iter_batched(
            || random_dag(10_000, &mut Rng(0x9E37_79B9_7F4A_7C15)),
            |g| black_box(g.chain_of("r0").contains("r1")),
            BatchSize::LargeInput,
        )
    });
    group.finish();
}

/// Locks on repositories outside the benchmark's chain (`free0`, `free1`, …).
fn lock_cycle_graph(others: usize) -> RepoGraph {
    let mut repos = vec![
        ("core".to_string(), vec![]),
        ("vm".to_string(), vec!["core".to_string()]),
        ("os".to_string(), vec!["vm".to_string()]),
    ];
    repos.extend((0..others).map(|k| (format!("free{k}"), Vec::new())));
    RepoGraph::new(repos)
}

fn bench_lock_cycle(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let g = lock_cycle_graph(100);
    store
        .write(|tx| {
            tx.execute_batch(
                "CREATE TABLE IF NOT EXISTS bare (id INTEGER PRIMARY KEY, repo TEXT NOT NULL)",
            )
        })
        .unwrap();
    let mut group = c.benchmark_group("sqlite");
    let cycle = |store: &mut Store| {
        let got = store
            .try_lock(&g, "vm", "w", HolderKind::Worker, None, None)
            .unwrap();
        assert!(matches!(got, LockAttempt::Acquired(_)));
        store.release("w", Some("bench"), None).unwrap();
    };
    group.bench_function("chain lock acquire+release", |b| {
        b.iter(|| cycle(&mut store))
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
    // The floor for a lock's shape: the same two transactions writing one row to each of two
    // tables (two pages, as a lock and its history row), no read, no graph.
    store
        .write(|tx| {
            tx.execute_batch(
                "CREATE TABLE IF NOT EXISTS bare_log (seq INTEGER PRIMARY KEY, repo TEXT NOT NULL)",
            )
        })
        .unwrap();
    group.bench_function("bare insert+delete, plus a log row each", |b| {
        b.iter(|| {
            store
                .write(|tx| {
                    tx.prepare_cached("INSERT INTO bare (repo) VALUES ('vm')")?
                        .execute([])?;
                    tx.prepare_cached("INSERT INTO bare_log (repo) VALUES ('vm')")?
                        .execute([])
                })
                .unwrap();
            store
                .write(|tx| {
                    tx.prepare_cached("DELETE FROM bare WHERE repo = 'vm'")?
                        .execute([])?;
                    tx.prepare_cached("INSERT INTO bare_log (repo) VALUES ('vm')")?
                        .execute([])
                })
                .unwrap();
        })
    });
    for k in 0..100 {
        let got = store
            .try_lock(
                &g,
                &format!("free{k}"),
                &format!("o{k}"),
                HolderKind::Worker,
                None,
                None,
            )
            .unwrap();
        assert!(matches!(got, LockAttempt::Acquired(_)));
    }
    group.bench_function("chain lock acquire+release, 100 other locks held", |b| {
        b.iter(|| cycle(&mut store))
    });
    group.finish();
}

/// 1,000 locks on independent repositories taken in one write transaction, rolled back.
fn bench_lock_pass(c: &mut Criterion) {
    const N: usize = 1_000;
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path()).unwrap();
    let g = lock_cycle_graph(N);
    let names: Vec<(String, String)> = (0..N)
        .map(|k| (format!("free{k}"), format!("w{k}")))
        .collect();
    let mut group = c.benchmark_group("pass");
    group.sample_size(10);
    group.bench_function("1,000 locks in one transaction, try_lock_in each", |b| {
        b.iter(|| {
            store
                .rolled_back(|tx| {
                    for (repo, holder) in &names {
                        let got = try_lock_in(tx, &g, repo, holder, HolderKind::Worker, None, None);
                        assert!(matches!(got?, LockAttempt::Acquired(_)));
                    }
                    Ok(())
                })
                .unwrap()
        })
    });
    group.bench_function("1,000 locks in one transaction, ActiveLocks", |b| {
        b.iter(|| {
            store
                .rolled_back(|tx| {
                    let mut held = ActiveLocks::read(tx)?;
                    for (repo, holder) in &names {
                        let got = held.try_lock(&g, repo, holder, HolderKind::Worker, None, None);
                        assert!(matches!(got?, LockAttempt::Acquired(_)));
                    }
                    Ok(())
                })
                .unwrap()
        })
    });
    group.finish();
}

criterion_group!(
    benches,
    bench_can_spawn,
    bench_can_spawn_free,
    bench_lock_cycle,
    bench_lock_pass
);
criterion_main!(benches);
