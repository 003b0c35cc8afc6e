//! The store's two backends side by side in one run (issue 22): every measurement below runs on
//! SQLite (a fresh `orch.db` in a temporary directory), then on PostgreSQL (a fresh database of
//! its own in the server at `ORCH_TEST_PG_URL`, dropped afterwards), and the figures are printed
//! together. Without `ORCH_TEST_PG_URL` the PostgreSQL column says it was skipped.
//!
//!   bash -c 'source .ci/postgres && cargo bench --bench backends'
//!
//! 1. `lock`: a chain lock acquire + release (`Store::try_lock`, `Store::release`: two write
//!    transactions), alone and with 100 other locks held; per cycle p50 / p95, cycles a second.
//! 2. `can_spawn`: on a random 10,000-repository DAG (`chain_lock.rs`'s) with 100 chain locks
//!    held in the store: one read transaction of the active locks (`store::active_locks`), then
//!    `lock::is_blocked` for a random repository; p50 / p95, checks a second. The in-memory check
//!    alone (no store) is printed beside it.
//! 3. `resume`: `orch resume` (the CLI, wall clock) of 1,000 orphaned PUSHED_TO_CI workers
//!    against a fake Forgejo 16 answering after 10 ms (`resume.rs`'s setup), database intact
//!    and `--from-checkpoints` (the database lost: SQLite's file removed, PostgreSQL's database
//!    dropped and created empty). On PostgreSQL, repos.yaml carries `store: {url: …}` and the
//!    state directory its `store.json` pointer.
//! 4. `wave`: the store work of a 200-task wave's ticks on 3 nodes at once — 3 threads, each
//!    with a connection of its own and a node name of its own (`n1`…`n3`, what `ORCH_NODE`
//!    sets), each ticking until every task is started: a tick first claims the wave's one tick
//!    across nodes (`wave_ticks`, as `try_tick_lock`; a tick that finds it claimed elsewhere
//!    ends at once, and the next comes 2 ms later), then records the wave
//!    (`app::wave::tick`'s `record`), reads its tasks and their workers, then, as
//!    `start_ready`, reads the locks, fatal holds and its node's slots, asks
//!    `wave::schedule::decide`, and for each pick runs spawn's lock transaction (fatal holds
//!    over the chain, the node's slots, `try_lock_in`, the worker row, its lease, the node's
//!    beat, the `spawned` event) and links the worker to its task; a pick another node took
//!    first ends the tick (as the real tick does). Not measured: the worktree, the supervisor,
//!    the resume pass at the start of a tick. 200 tasks on 200 independent repositories,
//!    `worker.max_parallel` 200 per node (slots never limit). Checked after: every task started exactly once, 200
//!    locks held, the lock history without a conflicting grant.
//!
//! Knobs: ORCH_BENCH_ONLY (comma list of lock,can_spawn,resume,wave), ORCH_BENCH_LOCK_OPS
//! (2000), ORCH_BENCH_WORKERS (1000), ORCH_BENCH_RUNS (2: resume runs of each variant), ORCH_BENCH_WAVE_RUNS (3),
//! ORCH_BENCH_LATENCY_MS (10). `cargo test --benches` runs a small version of each.

#[path = "../tests/support/fake_forgejo.rs"]
mod fake_forgejo;

use fake_forgejo::{FakeForgejo, Fault, OWNER};
use orch::contract::Contract;
use orch::graph::RepoGraph;
use orch::lock::{HolderKind, is_blocked};
use orch::milestone::{Milestone, Progress};
use orch::store::location::{self, StoreConfig};
use orch::store::pg::PgConn;
use orch::store::waves as wv;
use orch::store::workers::{self as ws, WorkerRecord};
use orch::store::{
    ActiveLocks, LockAttempt, Store, active_locks, first_conflict, now_ms, try_lock_in,
};
use orch::wave::schedule::{TaskState, WaveState, decide, free_slots};
use orch::wave::{Dag, TaskDef};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

const TOKEN_ENV: &str = "ORCH_BENCH_FORGE_TOKEN";

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

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

// ---------------------------------------------------------------------------------------------
// The two backends.

/// The PostgreSQL server of `ORCH_TEST_PG_URL`: a fresh database per measurement.
struct Pg {
    url: String,
    made: std::cell::Cell<usize>,
}

impl Pg {
    fn from_env() -> Option<Pg> {
        let url = std::env::var("ORCH_TEST_PG_URL")
            .ok()
            .filter(|u| !u.is_empty())?;
        Some(Pg {
            url,
            made: std::cell::Cell::new(0),
        })
    }

    /// `url` with its database name replaced by `db`.
    fn url_of(&self, db: &str) -> String {
        let (base, query) = match self.url.split_once('?') {
            Some((b, q)) => (b, format!("?{q}")),
            None => (self.url.as_str(), String::new()),
        };
        let rest = base.split_once("://").map_or(base, |(_, r)| r);
        let scheme_len = base.len() - rest.len();
        let host_end = rest.find('/').map_or(base.len(), |i| scheme_len + i);
        format!("{}/{db}{query}", &base[..host_end])
    }

    fn admin(&self) -> PgConn {
        PgConn::connect(&self.url, None).unwrap_or_else(|e| {
            panic!(
                "cannot connect to {}: {e}",
                orch::store::pg::redact(&self.url)
            )
        })
    }

    /// A new, empty database; its URL.
    fn fresh(&self, tag: &str) -> String {
        let n = self.made.get();
        self.made.set(n + 1);
        let db = format!("bench_{}_{n}_{tag}", std::process::id());
        self.admin()
            .batch(&format!("CREATE DATABASE \"{db}\""))
            .unwrap();
        self.url_of(&db)
    }

    /// Drops the database of `url` (its connections ended first).
    fn drop_db(&self, url: &str) {
        let db = url
            .split('?')
            .next()
            .unwrap()
            .rsplit('/')
            .next()
            .unwrap()
            .to_string();
        self.admin()
            .batch(&format!("DROP DATABASE IF EXISTS \"{db}\" WITH (FORCE)"))
            .unwrap();
    }

    /// The server's version and its `fsync` and `synchronous_commit` settings.
    fn describe(&self) -> String {
        let url = self.fresh("probe");
        let mut store = Store::open_url(&url).unwrap();
        let got = store
            .read(|tx| {
                let v: String = tx.query_row("SHOW server_version", [], |r| r.get(0))?;
                let f: String = tx.query_row("SHOW fsync", [], |r| r.get(0))?;
                let s: String = tx.query_row("SHOW synchronous_commit", [], |r| r.get(0))?;
                Ok(format!(
                    "PostgreSQL {v} (fsync={f}, synchronous_commit={s})"
                ))
            })
            .unwrap_or_else(|e| format!("PostgreSQL (settings not read: {e})"));
        drop(store);
        self.drop_db(&url);
        got
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Sqlite,
    Postgres,
}

impl Kind {
    fn label(self) -> &'static str {
        match self {
            Kind::Sqlite => "SQLite",
            Kind::Postgres => "PostgreSQL",
        }
    }
}

/// Where one measurement's store lives: a directory (SQLite) or a database (PostgreSQL).
struct Place {
    _dir: tempfile::TempDir,
    dir: PathBuf,
    url: Option<String>,
}

impl Place {
    fn new(kind: Kind, pg: Option<&Pg>, tag: &str) -> Place {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_path_buf();
        Place {
            _dir: dir,
            dir: path,
            url: match kind {
                Kind::Sqlite => None,
                Kind::Postgres => Some(pg.expect("a server").fresh(tag)),
            },
        }
    }

    /// Another connection to this place's store.
    fn open(&self) -> Store {
        match &self.url {
            None => Store::open(&self.dir).unwrap(),
            Some(url) => Store::open_url(url).unwrap(),
        }
    }

    fn done(self, pg: Option<&Pg>) {
        if let (Some(url), Some(pg)) = (&self.url, pg) {
            pg.drop_db(url);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Figures.

#[derive(Clone)]
struct Dist {
    /// Each operation's time, sorted.
    v: Vec<Duration>,
    total: Duration,
}

impl Dist {
    fn new(mut v: Vec<Duration>) -> Dist {
        v.sort();
        let total = v.iter().sum();
        Dist { v, total }
    }
    fn q(&self, q: f64) -> Duration {
        self.v[((self.v.len() - 1) as f64 * q).round() as usize]
    }
    fn per_s(&self) -> f64 {
        self.v.len() as f64 / self.total.as_secs_f64()
    }
    fn cell(&self) -> String {
        format!(
            "{} / {} ({:.0}/s)",
            fmt_d(self.q(0.5)),
            fmt_d(self.q(0.95)),
            self.per_s()
        )
    }
}

fn fmt_d(d: Duration) -> String {
    let ns = d.as_nanos() as f64;
    if ns < 1e3 {
        format!("{ns:.0} ns")
    } else if ns < 1e6 {
        format!("{:.1} µs", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.2} ms", ns / 1e6)
    } else {
        format!("{:.2} s", ns / 1e9)
    }
}

/// The rows printed at the end: what, SQLite, PostgreSQL.
#[derive(Default)]
struct Table {
    rows: Vec<(String, String, String)>,
}

impl Table {
    fn row(&mut self, what: &str, by: &[(Kind, String)]) {
        let cell = |k: Kind| {
            by.iter()
                .find(|(kind, _)| *kind == k)
                .map(|(_, c)| c.clone())
                .unwrap_or_else(|| "skipped: ORCH_TEST_PG_URL not set".into())
        };
        let r = (what.to_string(), cell(Kind::Sqlite), cell(Kind::Postgres));
        println!(
            "  {}\n    SQLite:     {}\n    PostgreSQL: {}",
            r.0, r.1, r.2
        );
        self.rows.push(r);
    }
}

// ---------------------------------------------------------------------------------------------
// 1. Lock acquire + release.

fn lock_cycle_graph(others: usize) -> RepoGraph {
    let mut repos = vec![
        ("core".to_string(), vec![]),
        ("vm".to_string(), vec!["core".to_string()]),
        ("os".to_string(), vec!["vm".to_string()]),
    ];
    repos.extend((0..others).map(|k| (format!("free{k}"), Vec::new())));
    RepoGraph::new(repos)
}

fn bench_lock(kinds: &[Kind], pg: Option<&Pg>, ops: usize, table: &mut Table) {
    println!("\n[lock] chain lock acquire + release, {ops} cycles (after 10% warm-up)");
    let g = lock_cycle_graph(100);
    let mut alone = Vec::new();
    let mut held = Vec::new();
    let mut acquire = Vec::new();
    let mut release = Vec::new();
    let mut floor = Vec::new();
    for &kind in kinds {
        let place = Place::new(kind, pg, "lock");
        let mut store = place.open();
        let run = |store: &mut Store, n: usize| {
            let (mut a, mut r, mut c) = (Vec::new(), Vec::new(), Vec::new());
            for _ in 0..n {
                let t0 = Instant::now();
                let got = store
                    .try_lock(&g, "vm", "w", HolderKind::Worker, None, None)
                    .unwrap();
                let t1 = Instant::now();
                assert!(matches!(got, LockAttempt::Acquired(_)));
                store.release("w", Some("bench"), None).unwrap();
                let t2 = Instant::now();
                a.push(t1 - t0);
                r.push(t2 - t1);
                c.push(t2 - t0);
            }
            (Dist::new(a), Dist::new(r), Dist::new(c))
        };
        // The floor: an empty read transaction with one `SELECT 1` (on PostgreSQL three round
        // trips to the server: BEGIN, the statement, COMMIT).
        let mut v = Vec::with_capacity(ops);
        for k in 0..ops + ops / 10 {
            let t = Instant::now();
            let one: i64 = store
                .read(|tx| tx.query_row("SELECT 1", [], |r| r.get(0)))
                .unwrap();
            if k >= ops / 10 {
                v.push(t.elapsed());
            }
            assert_eq!(one, 1);
        }
        floor.push((kind, Dist::new(v).cell()));
        run(&mut store, ops / 10);
        let (a, r, c) = run(&mut store, ops);
        acquire.push((kind, a.cell()));
        release.push((kind, r.cell()));
        alone.push((kind, c.cell()));
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
        run(&mut store, ops / 10);
        let (_, _, c) = run(&mut store, ops);
        held.push((kind, c.cell()));
        drop(store);
        place.done(pg);
    }
    table.row(
        "lock acquire + release (one cycle), p50 / p95 (cycles/s)",
        &alone,
    );
    table.row("… of which the acquire (`try_lock`)", &acquire);
    table.row("… of which the release (`release`)", &release);
    table.row("lock acquire + release, 100 other locks held", &held);
    table.row("the floor: a read transaction of one `SELECT 1`", &floor);
}

// ---------------------------------------------------------------------------------------------
// 2. can_spawn on a 10,000-repository graph.

/// `chain_lock.rs`'s random DAG: repository i depends on up to 3 of the 50 before it.
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

fn bench_can_spawn(kinds: &[Kind], pg: Option<&Pg>, ops: usize, table: &mut Table) {
    println!(
        "\n[can_spawn] 10,000-repository DAG, 100 chain locks in the store, {ops} checks (after 10% warm-up)"
    );
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let g = random_dag(10_000, &mut rng);
    let probes: Vec<String> = (0..256)
        .map(|_| format!("r{}", rng.below(10_000)))
        .collect();
    let mut with_store = Vec::new();
    let mut memory = Vec::new();
    let mut blocked_share = String::new();
    for &kind in kinds {
        let place = Place::new(kind, pg, "can_spawn");
        let mut store = place.open();
        // 100 holders on random repositories, each taken through the store (one blocked by an
        // earlier one is skipped: the store never grants two on one chain).
        let mut lrng = Rng(0x2545_F491_4F6C_DD1D);
        let mut taken = 0;
        let mut k = 0;
        while taken < 100 {
            let repo = format!("r{}", lrng.below(10_000));
            if let LockAttempt::Acquired(_) = store
                .try_lock(&g, &repo, &format!("h{k}"), HolderKind::Worker, None, None)
                .unwrap()
            {
                taken += 1;
            }
            k += 1;
        }
        let mut i = 0;
        let mut check = |store: &mut Store, n: usize| {
            let mut v = Vec::with_capacity(n);
            let mut blocked = 0;
            for _ in 0..n {
                i = (i + 1) % probes.len();
                let t = Instant::now();
                let locks = store.read(active_locks).unwrap();
                let b = is_blocked(&g, &probes[i], locks.iter().map(|l| l.repo.as_str()));
                v.push(t.elapsed());
                blocked += usize::from(std::hint::black_box(b));
            }
            (Dist::new(v), blocked)
        };
        check(&mut store, ops / 10);
        let (d, blocked) = check(&mut store, ops);
        with_store.push((kind, d.cell()));
        blocked_share = format!("{blocked} of {ops} checks blocked");
        // The same question without the store: the locks already in memory.
        let locks = store.read(active_locks).unwrap();
        let mut v = Vec::with_capacity(ops);
        for j in 0..ops {
            let p = &probes[j % probes.len()];
            let t = Instant::now();
            std::hint::black_box(is_blocked(&g, p, locks.iter().map(|l| l.repo.as_str())));
            v.push(t.elapsed());
        }
        memory.push((kind, Dist::new(v).cell()));
        drop(store);
        place.done(pg);
    }
    table.row(
        &format!(
            "can_spawn, 10k repositories, 100 locks: read the locks + `is_blocked` ({blocked_share})"
        ),
        &with_store,
    );
    table.row(
        "… `is_blocked` alone, the locks in memory (timer included)",
        &memory,
    );
}

// ---------------------------------------------------------------------------------------------
// 3. Resume of 1,000 workers (resume.rs's setup, on both backends).

fn contract_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("contracts/worker-completion.yaml")
}

fn repo(i: usize) -> String {
    format!("r{i:04}")
}

fn sha(i: usize) -> String {
    format!("{:040x}", 0xabc0_0000_0000_u64 + i as u64)
}

fn worker_record(
    state: &Path,
    contract: &Contract,
    id: &str,
    repo: &str,
    task_id: &str,
    node: Option<&str>,
    now: i64,
) -> WorkerRecord {
    WorkerRecord {
        id: id.to_string(),
        repo: repo.to_string(),
        task: format!("task {task_id}"),
        task_id: Some(task_id.to_string()),
        component: None,
        plan: None,
        progress: Progress::new(contract, now - 60_000),
        branch: format!("orch/{id}"),
        base_sha: format!("{:040x}", 1),
        worktree: state.join(id).join("worktree").display().to_string(),
        remote: "origin".into(),
        day: "2026-11-27".into(),
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
        node: node.map(str::to_string),
        fence: 0,
    }
}

/// Workers, locks and pushes as a crashed orch would have left them (`resume.rs`'s seed).
fn seed_orphans(store: &mut Store, state: &Path, graph: &RepoGraph, contract: &Contract, n: usize) {
    let now = now_ms();
    store
        .write(|tx| {
            // The locks read once (`ActiveLocks`, as the checkpoint rebuild does): seeding is
            // not measured, and `try_lock_in` each would read 500,000 lock rows.
            let mut held = ActiveLocks::read(tx)?;
            for i in 0..n {
                let id = format!("{}-{i:08x}", repo(i));
                let mut w =
                    worker_record(state, contract, &id, &repo(i), &format!("t{i}"), None, now);
                w.progress.milestone = Milestone::PushedToCi;
                w.progress.tracked_sha = Some(sha(i).into());
                w.progress.pushed_ms = Some(now - 30_000);
                w.progress.turn_ended = true;
                let LockAttempt::Acquired(_) = held.try_lock(
                    graph,
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

fn write_checkpoints(store: &mut Store, state: &Path) {
    for w in &store.workers().unwrap() {
        let pushes = store.read(|tx| ws::pushes(tx, &w.id)).unwrap();
        let cp = orch::checkpoint::build(w, &pushes, true);
        orch::checkpoint::write(state, w, &cp).unwrap();
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn bench_resume(
    kinds: &[Kind],
    pg: Option<&Pg>,
    n: usize,
    runs: usize,
    latency: Duration,
    table: &mut Table,
) {
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
    println!(
        "\n[resume] orch resume: {n} orphaned PUSHED_TO_CI workers, fake Forgejo 16 at {} ms per request, {} CI queries in flight, {runs} run(s) each",
        latency.as_millis(),
        orch::app::resume::CI_CONCURRENCY
    );
    let dir = tempfile::tempdir().unwrap();
    let mut repos_yaml = format!(
        "forge: {{kind: forgejo, url: \"{}\", owner: {OWNER}, token_env: {TOKEN_ENV}}}\nci: {{sync_job: radicle-push}}\n",
        fake.uri()
    );
    repos_yaml.push_str("repos:\n");
    for i in 0..n {
        let _ = writeln!(repos_yaml, "  {}: {{path: repos/{}}}", repo(i), repo(i));
    }
    let sqlite_config = dir.path().join("repos.yaml");
    std::fs::write(&sqlite_config, &repos_yaml).unwrap();
    let config = orch::config::Config::load(&sqlite_config).unwrap();
    let contract = Contract::load(&contract_path()).unwrap();

    let mut cells: Vec<Vec<(Kind, String)>> = vec![Vec::new(), Vec::new()];
    for &kind in kinds {
        for (v, variant) in ["db", "checkpoints"].into_iter().enumerate() {
            let mut times = Vec::new();
            let mut requests = Vec::new();
            for run in 0..runs {
                let state = dir
                    .path()
                    .join(format!("state-{}-{variant}-{run}", kind.label()));
                // PostgreSQL: a database of its own, named by repos.yaml's `store:` and the
                // state directory's pointer (as `orch` leaves it).
                let (config_path, url) = match kind {
                    Kind::Sqlite => (sqlite_config.clone(), None),
                    Kind::Postgres => {
                        let url = pg.unwrap().fresh("resume");
                        let path = dir.path().join(format!("repos-{variant}-{run}.yaml"));
                        std::fs::write(&path, format!("store: {{url: \"{url}\"}}\n{repos_yaml}"))
                            .unwrap();
                        orch::store::ensure_private_dir(&state).unwrap();
                        let sc = StoreConfig {
                            url: Some(url.clone()),
                            url_env: None,
                            password_env: None,
                        };
                        location::settle(&state, Some(&sc)).unwrap();
                        (path, Some(url))
                    }
                };
                let setup = Instant::now();
                {
                    let mut store = Store::open(&state).unwrap();
                    assert_eq!(store.backend() == "postgresql", kind == Kind::Postgres);
                    seed_orphans(&mut store, &state, &config.graph, &contract, n);
                    if variant == "checkpoints" {
                        write_checkpoints(&mut store, &state);
                    }
                }
                let mut args = vec!["resume", "--json"];
                if variant == "checkpoints" {
                    // The database lost: only the checkpoint files are left.
                    match &url {
                        None => {
                            for f in ["orch.db", "orch.db-wal", "orch.db-shm"] {
                                let _ = std::fs::remove_file(state.join(f));
                            }
                        }
                        Some(url) => {
                            let pg = pg.unwrap();
                            pg.drop_db(url);
                            let db = url.rsplit('/').next().unwrap();
                            pg.admin()
                                .batch(&format!("CREATE DATABASE \"{db}\""))
                                .unwrap();
                        }
                    }
                    args.push("--from-checkpoints");
                }
                let setup_secs = setup.elapsed().as_secs_f64();
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
                    .env_remove("ORCH_NODE")
                    .output()
                    .unwrap();
                let secs = t.elapsed().as_secs_f64();
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
                let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
                let resumed = j["resumed"].as_array().unwrap();
                assert_eq!(resumed.len(), n, "{}", String::from_utf8_lossy(&out.stderr));
                assert!(
                    resumed.iter().all(|r| r["action"] == "done"),
                    "{}",
                    resumed
                        .iter()
                        .find(|r| r["action"] != "done")
                        .map(|r| r.to_string())
                        .unwrap_or_default()
                );
                {
                    let mut store = Store::open(&state).unwrap();
                    assert_eq!(store.backend() == "postgresql", kind == Kind::Postgres);
                    assert!(store.locks().unwrap().is_empty(), "every lock released");
                }
                if let Some(url) = &url {
                    pg.unwrap().drop_db(url);
                }
                times.push(secs);
                requests.push(fake.hit_count());
                println!(
                    "  {:<10} {variant:<11} run {}: {secs:.2} s, {} HTTP requests (setup {:.1} s)",
                    kind.label(),
                    run + 1,
                    fake.hit_count(),
                    setup_secs
                );
            }
            times.sort_by(|a, b| a.partial_cmp(b).unwrap());
            cells[v].push((
                kind,
                format!(
                    "{} s ({:.0} workers/s at the best; requests {:?})",
                    times
                        .iter()
                        .map(|t| format!("{t:.2}"))
                        .collect::<Vec<_>>()
                        .join(", "),
                    n as f64 / times[0],
                    requests
                ),
            ));
        }
    }
    table.row(
        &format!("`orch resume`, {n} workers, database intact"),
        &cells[0],
    );
    table.row(
        &format!("`orch resume --from-checkpoints`, {n} workers, database lost"),
        &cells[1],
    );
}

// ---------------------------------------------------------------------------------------------
// 4. A 200-task wave's ticks on 3 nodes.

const WAVE: &str = "bench";
/// Per node: slots never limit this wave (one node alone can start all 200).
const MAX_PARALLEL: usize = 200;

fn wave_task(i: usize) -> TaskDef {
    TaskDef {
        id: format!("t{i:03}"),
        repo: format!("w{i:03}"),
        task: format!("task {i}"),
        plan: None,
        component: None,
        estimate: None,
        after: Vec::new(),
        land: None,
        model: None,
        complexity: None,
        security_sensitive: false,
        specifics: Default::default(),
    }
}

fn task_key(id: &str) -> String {
    format!("{WAVE}:{id}:1")
}

#[derive(Default)]
struct NodeStats {
    ticks: Vec<Duration>,
    started: usize,
    /// Picks another node took between this node's read and its lock transaction.
    lost: usize,
    transactions: usize,
    /// Each tick's first write: the wave and its tasks recorded.
    records: Vec<Duration>,
    /// Ticks that found the wave's tick claimed by another node (they start nothing).
    skipped: usize,
}

/// The wave every node ticks, and what its workers' rows are made from.
#[derive(Clone, Copy)]
struct BenchWave<'a> {
    graph: &'a RepoGraph,
    tasks: &'a [TaskDef],
    dag: &'a Dag,
    contract: &'a Contract,
    state_dir: &'a Path,
}

/// One tick's store work, as `app::wave::tick` does it (see the file's head). True when
/// every task of the wave has a worker.
fn tick(store: &mut Store, node: &str, wave: BenchWave, stats: &mut NodeStats) -> bool {
    // try_tick_lock(): the wave's one tick across nodes, claimed in the store.
    let pid = std::process::id() as i64;
    let claimed = store
        .write(|tx| wv::claim_tick(tx, WAVE, node, pid, 120_000))
        .unwrap();
    stats.transactions += 1;
    if !claimed {
        stats.skipped += 1;
        // Another node's tick runs: this one ends (cron starts the next a minute later;
        // here, a moment later).
        std::thread::sleep(Duration::from_millis(2));
        let rows = store.read(|tx| wv::wave_tasks(tx, WAVE)).unwrap();
        return !rows.is_empty() && rows.iter().all(|r| r.worker_id.is_some());
    }
    let finished = tick_claimed(store, node, wave, stats);
    store
        .write(|tx| wv::release_tick(tx, WAVE, node, pid))
        .unwrap();
    stats.transactions += 1;
    finished
}

/// A tick's work once it holds the wave's claim.
fn tick_claimed(store: &mut Store, node: &str, wave: BenchWave, stats: &mut NodeStats) -> bool {
    let BenchWave {
        graph,
        tasks,
        dag,
        contract,
        state_dir,
    } = wave;
    // record(): the wave and its tasks; a worker that carries a task's key is linked.
    let t0 = Instant::now();
    store
        .write(|tx| {
            wv::record_wave(tx, WAVE, "bench.yaml", now_ms())?;
            let existing = wv::wave_tasks(tx, WAVE)?;
            for (seq, t) in tasks.iter().enumerate() {
                let row = existing.iter().find(|r| r.id == t.id);
                let linked = row.and_then(|r| r.worker_id.clone());
                let found = match linked {
                    Some(_) => None,
                    None => wv::worker_for_task_id(tx, &task_key(&t.id))?,
                };
                // An unchanged task is not written again (app::wave::record).
                let def = t.definition();
                if row.is_none_or(|r| r.seq != seq as i64 || r.definition != def) {
                    wv::put_task(tx, WAVE, &t.id, seq as i64, &def, None)?;
                }
                if let Some((w, at)) = found {
                    wv::set_task_worker(tx, WAVE, &t.id, &w, at)?;
                }
            }
            Ok(())
        })
        .unwrap();
    stats.records.push(t0.elapsed());
    // load_recorded(): the tasks and their workers.
    let (rows, workers) = store
        .read(|tx| {
            let rows = wv::wave_tasks(tx, WAVE)?;
            let mut workers = Vec::with_capacity(rows.len());
            for r in &rows {
                workers.push(match &r.worker_id {
                    Some(id) => ws::get_worker(tx, id)?,
                    None => None,
                });
            }
            Ok((rows, workers))
        })
        .unwrap();
    stats.transactions += 2;
    let states: Vec<TaskState> = workers
        .iter()
        .map(|w| match w {
            Some(_) => TaskState::Running,
            None => TaskState::Pending,
        })
        .collect();
    let mut state = WaveState::new(dag, states, dag.bottom_levels(&vec![1; tasks.len()]));
    // start_ready()
    'start: loop {
        let (locks, running, others) = store
            .read(|tx| {
                let mut locks = active_locks(tx)?;
                locks.extend(orch::store::fatal::as_locks(&orch::store::fatal::all(tx)?));
                Ok((
                    locks,
                    orch::store::nodes::lock_holders_on(tx, node)?,
                    wv::others_waiting(tx, WAVE, now_ms() - 3_600_000)?,
                ))
            })
            .unwrap();
        stats.transactions += 1;
        let mine = state
            .states()
            .iter()
            .filter(|s| **s == TaskState::Running)
            .count();
        let free = free_slots(MAX_PARALLEL, running, mine, others);
        let picks = decide(dag, &state, graph, &locks, free);
        if picks.is_empty() {
            break;
        }
        for i in picks {
            let t = &tasks[i];
            let now = now_ms();
            let id = format!("{}-{node}-{:x}", t.repo, now);
            let mut rec = worker_record(
                state_dir,
                contract,
                &id,
                &t.repo,
                &task_key(&t.id),
                Some(node),
                now,
            );
            rec.created_ms = now;
            rec.updated_ms = now;
            // spawn::prepare's lock transaction.
            let got = store
                .write(|tx| {
                    let fatal = orch::store::fatal::covering(tx, graph, &t.repo)?;
                    assert!(fatal.is_empty());
                    if orch::store::nodes::lock_holders_on(tx, node)? >= MAX_PARALLEL {
                        return Ok(false);
                    }
                    match try_lock_in(
                        tx,
                        graph,
                        &t.repo,
                        &id,
                        HolderKind::Worker,
                        Some(&rec.task),
                        None,
                    )? {
                        LockAttempt::Blocked(_) => Ok(false),
                        LockAttempt::Acquired(_) => {
                            ws::insert_worker(tx, &rec)?;
                            ws::set_lease(tx, &id, 1, Some(15_000))?;
                            orch::store::nodes::beat(tx, node, "bench", MAX_PARALLEL)?;
                            ws::add_event(
                                tx,
                                &id,
                                "spawned",
                                rec.progress.milestone,
                                &format!("task: {}", rec.task),
                            )?;
                            Ok(true)
                        }
                    }
                })
                .unwrap();
            stats.transactions += 1;
            if !got {
                // Another node took it (or the slots are full): the next tick goes on.
                stats.lost += 1;
                break 'start;
            }
            store
                .write(|tx| wv::set_task_worker(tx, WAVE, &t.id, &id, now))
                .unwrap();
            stats.transactions += 1;
            state.start(i);
            stats.started += 1;
        }
    }
    let left = state.ready().count() as i64;
    store
        .write(|tx| wv::set_progress(tx, WAVE, left, None, now_ms()))
        .unwrap();
    stats.transactions += 1;
    rows.len() == tasks.len() && state.states().iter().all(|s| *s == TaskState::Running)
}

fn bench_wave(kinds: &[Kind], pg: Option<&Pg>, n: usize, runs: usize, table: &mut Table) {
    println!(
        "\n[wave] {n}-task wave on {n} independent repositories, ticks on 3 nodes at once (3 threads, a connection each), {runs} run(s)"
    );
    let tasks: Vec<TaskDef> = (0..n).map(wave_task).collect();
    let graph = RepoGraph::new(tasks.iter().map(|t| (t.repo.clone(), Vec::<String>::new())));
    let dag = Dag::build(&tasks, &graph).unwrap();
    let contract = Contract::load(&contract_path()).unwrap();
    let mut wall_cells = Vec::new();
    let mut tick_cells = Vec::new();
    let mut one_cells = Vec::new();
    let mut record_cells = Vec::new();
    for &kind in kinds {
        let mut walls = Vec::new();
        let mut all_ticks = Vec::new();
        let mut all_records = Vec::new();
        let mut one_walls = Vec::new();
        for run in 0..runs {
            for nodes in [3usize, 1] {
                let place = Place::new(kind, pg, "wave");
                // The schema exists before the nodes start (as after `orch check`).
                drop(place.open());
                let barrier = Arc::new(Barrier::new(nodes));
                let t0 = Instant::now();
                let results: Vec<NodeStats> = std::thread::scope(|s| {
                    let handles: Vec<_> = (1..=nodes)
                        .map(|k| {
                            let (place, barrier) = (&place, barrier.clone());
                            let wave = BenchWave {
                                graph: &graph,
                                tasks: &tasks,
                                dag: &dag,
                                contract: &contract,
                                state_dir: &place.dir,
                            };
                            s.spawn(move || {
                                let node = format!("n{k}");
                                let mut store = place.open();
                                let mut stats = NodeStats::default();
                                barrier.wait();
                                loop {
                                    let t = Instant::now();
                                    let finished = tick(&mut store, &node, wave, &mut stats);
                                    stats.ticks.push(t.elapsed());
                                    if finished {
                                        return stats;
                                    }
                                }
                            })
                        })
                        .collect();
                    handles.into_iter().map(|h| h.join().unwrap()).collect()
                });
                let wall = t0.elapsed();
                // Every task started once, on one node; every chain lock granted without conflict.
                let mut store = place.open();
                let workers = store.workers().unwrap();
                assert_eq!(workers.len(), n, "one worker per task, no more");
                for t in &tasks {
                    let key = task_key(&t.id);
                    assert_eq!(
                        workers
                            .iter()
                            .filter(|w| w.task_id.as_deref() == Some(key.as_str()))
                            .count(),
                        1,
                        "{key} started once"
                    );
                }
                assert_eq!(store.locks().unwrap().len(), n);
                let history = store.lock_history().unwrap();
                assert!(first_conflict(&graph, &history).is_none());
                let linked = store
                    .read(|tx| wv::wave_tasks(tx, WAVE))
                    .unwrap()
                    .iter()
                    .filter(|r| r.worker_id.is_some())
                    .count();
                assert_eq!(linked, n);
                drop(store);
                place.done(pg);
                if nodes == 1 {
                    one_walls.push(wall.as_secs_f64());
                    println!(
                        "  {:<10} run {}: 1 node alone {:.0} ms",
                        kind.label(),
                        run + 1,
                        wall.as_secs_f64() * 1e3
                    );
                    continue;
                }
                let per_node: Vec<String> = results
                    .iter()
                    .enumerate()
                    .map(|(k, r)| {
                        format!(
                            "n{}: {} started, {} ticks ({} skipped: claimed elsewhere), {} lost races, {} tx",
                            k + 1,
                            r.started,
                            r.ticks.len(),
                            r.skipped,
                            r.lost,
                            r.transactions
                        )
                    })
                    .collect();
                println!(
                    "  {:<10} run {}: 3 nodes {:.0} ms ({})",
                    kind.label(),
                    run + 1,
                    wall.as_secs_f64() * 1e3,
                    per_node.join("; "),
                );
                walls.push(wall.as_secs_f64());
                all_ticks.extend(results.iter().flat_map(|r| r.ticks.iter().copied()));
                all_records.extend(results.iter().flat_map(|r| r.records.iter().copied()));
            }
        }
        let med = median(&mut walls);
        wall_cells.push((
            kind,
            format!(
                "{:.0} ms median, {:.0} / {:.0} min / max ({:.0} tasks/s)",
                med * 1e3,
                walls[0] * 1e3,
                walls[walls.len() - 1] * 1e3,
                n as f64 / med
            ),
        ));
        let ticks = Dist::new(all_ticks);
        tick_cells.push((
            kind,
            format!(
                "{} / {} / {} (p50 / p95 / max over {} ticks)",
                fmt_d(ticks.q(0.5)),
                fmt_d(ticks.q(0.95)),
                fmt_d(ticks.q(1.0)),
                ticks.v.len()
            ),
        ));
        let records = Dist::new(all_records);
        record_cells.push((
            kind,
            format!(
                "{} / {} / {} (p50 / p95 / max over {} ticks)",
                fmt_d(records.q(0.5)),
                fmt_d(records.q(0.95)),
                fmt_d(records.q(1.0)),
                records.v.len()
            ),
        ));
        let one = median(&mut one_walls);
        one_cells.push((
            kind,
            format!("{:.0} ms median ({:.0} tasks/s)", one * 1e3, n as f64 / one),
        ));
    }
    table.row(
        &format!("{n}-task wave, 3 nodes ticking at once: all started (wall)"),
        &wall_cells,
    );
    table.row("… one tick's time on a node", &tick_cells);
    table.row(
        "… of which its first write (the wave and its tasks recorded)",
        &record_cells,
    );
    table.row(&format!("{n}-task wave, 1 node ticking alone"), &one_cells);
}

// ---------------------------------------------------------------------------------------------

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` runs this too: keep that cheap.
    let quick = !std::env::args().any(|a| a == "--bench");
    let only = std::env::var("ORCH_BENCH_ONLY").unwrap_or_default();
    let wanted = |m: &str| only.is_empty() || only.split(',').any(|o| o.trim() == m);
    let ops = env_usize("ORCH_BENCH_LOCK_OPS", if quick { 50 } else { 2000 });
    let workers = env_usize("ORCH_BENCH_WORKERS", if quick { 20 } else { 1000 });
    let runs = env_usize("ORCH_BENCH_RUNS", if quick { 1 } else { 2 });
    let wave_runs = env_usize("ORCH_BENCH_WAVE_RUNS", if quick { 1 } else { 3 });
    let latency = Duration::from_millis(env_usize("ORCH_BENCH_LATENCY_MS", 10) as u64);
    let wave_tasks = if quick { 20 } else { 200 };

    let pg = Pg::from_env();
    let mut kinds = vec![Kind::Sqlite];
    match &pg {
        Some(pg) => {
            kinds.push(Kind::Postgres);
            println!(
                "backends: SQLite (WAL, synchronous=NORMAL, a temporary directory) | {} at {}",
                pg.describe(),
                orch::store::pg::redact(&pg.url)
            );
        }
        None => println!(
            "backends: SQLite | PostgreSQL skipped: ORCH_TEST_PG_URL not set (run `source .ci/postgres` in the same shell first)"
        ),
    }
    let started = Instant::now();
    let mut table = Table::default();
    if wanted("lock") {
        bench_lock(&kinds, pg.as_ref(), ops, &mut table);
        println!("[lock] {:.1} s", started.elapsed().as_secs_f64());
    }
    if wanted("can_spawn") {
        bench_can_spawn(&kinds, pg.as_ref(), ops, &mut table);
        println!("[can_spawn] {:.1} s", started.elapsed().as_secs_f64());
    }
    if wanted("resume") {
        bench_resume(&kinds, pg.as_ref(), workers, runs, latency, &mut table);
        println!("[resume] {:.1} s", started.elapsed().as_secs_f64());
    }
    if wanted("wave") {
        bench_wave(&kinds, pg.as_ref(), wave_tasks, wave_runs, &mut table);
        println!("[wave] {:.1} s", started.elapsed().as_secs_f64());
    }
    println!("\n| measure | SQLite | PostgreSQL |\n|---|---|---|");
    for (what, s, p) in &table.rows {
        println!("| {what} | {s} | {p} |");
    }
    println!("\n(whole run {:.1} s)", started.elapsed().as_secs_f64());
}
