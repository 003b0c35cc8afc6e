//! What the history costs: `orch status --json`, `orch sessions list --json`, `orch sessions
//! show <id> --json` and `orch gc --json` (wall time, peak RSS, bytes on stdout) over a state
//! directory holding 100 and 10,000 finished workers (plus 2 live ones).
//!
//!   cargo bench --bench history
//!   ORCH_BENCH_ORCH=/tmp/old-history/target/release/orch ORCH_BENCH_OLD_SCHEMA=1 cargo bench --bench history
//!
//! The state is seeded through the library, as a long-running organisation leaves it: each
//! finished worker (DONE and landed, FAILED or CANCELLED, ended 0–60 days ago) with 8 events,
//! a pushed SHA and its verdict, and what its agent spent; no worktree or branch left in the
//! clones. `gc` runs on a fresh copy each time: `gc (first)` prunes what ended more than
//! `history.keep` (30 days) ago, `gc (again)` is the run after it (copy, one gc untimed, then
//! the timed one).
//!
//! With ORCH_BENCH_BOARD=1 it measures `orch serve` on the same state instead, with
//! ORCH_BENCH_SSE (100) clients holding `/api/events` open throughout: the latency (p50 / p95
//! / max) of the first page, `/api/workers`, `/api/board` and `/metrics` (ORCH_BENCH_RUNS × 20
//! requests each, one connection per request), the server's CPU while answering them and its
//! RSS (from /proc), how long a change of the store takes to reach every open stream, and the
//! CPU over 10 s with nobody looking but the open streams. The figure:
//!
//!   ORCH_BENCH_BOARD=1 ORCH_BENCH_SIZES=10000 ORCH_BENCH_LIVE=200 cargo bench --bench history
//!
//! Knobs: ORCH_BENCH_ORCH (the orch binary to drive; default the one cargo built),
//! ORCH_BENCH_SIZES (100,10000), ORCH_BENCH_LIVE (live workers beside them, BLOCKED: 2),
//! ORCH_BENCH_SSE (100), ORCH_BENCH_RUNS (5), ORCH_BENCH_OLD_SCHEMA=1 (an orch from
//! before the history was bounded: the seeded database is taken back to schema version 9).

use orch::contract::Contract;
use orch::milestone::{LandState, Landing, Milestone, Progress};
use orch::store::usage::{Tokens, Usage};
use orch::store::workers::{self as ws, WorkerRecord};
use orch::store::{Store, now_ms};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

const DAY_MS: i64 = 86_400_000;
const REPOS: usize = 4;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn git(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .stdout(Stdio::null())
        .status()
        .unwrap()
        .success();
    assert!(ok, "git {args:?}");
}

/// repos.yaml and its clones (one commit each) in `root`.
fn organisation(root: &Path) {
    let mut yaml = String::from("repos:\n");
    for r in 0..REPOS {
        let clone = root.join(format!("repos/r{r}"));
        std::fs::create_dir_all(&clone).unwrap();
        git(&clone, &["init", "-q", "-b", "main"]);
        git(
            &clone,
            &[
                "-c",
                "user.name=b",
                "-c",
                "user.email=b@x",
                "commit",
                "-q",
                "--allow-empty",
                "-m",
                "init",
            ],
        );
        yaml.push_str(&format!("  r{r}: {{ path: repos/r{r} }}\n"));
    }
    std::fs::write(root.join("repos.yaml"), yaml).unwrap();
}

fn seed(state: &Path, n: usize, live: usize) {
    let contract = Contract::embedded();
    let land = orch::config::LandConfig::default_for(orch::config::ForgeKind::Local);
    let mut store = Store::open(state).unwrap();
    let now = now_ms();
    store
        .write(|tx| {
            for i in 0..n + live {
                let id = format!("r{}-{i:08x}", i % REPOS);
                let live = i >= n;
                // Spread over 60 days, newest last.
                let ended = now - (60 * DAY_MS) * (n - i.min(n)) as i64 / n.max(1) as i64;
                let created = ended - 3_600_000;
                let mut p = Progress::new(&contract, created);
                p.milestone = match (live, i % 10) {
                    (true, _) => Milestone::Blocked,
                    (_, 0) => Milestone::Failed,
                    (_, 1) => Milestone::Cancelled,
                    _ => Milestone::Done,
                };
                p.since_ms = ended;
                let sha = format!("{:040x}", 0xabc0_0000_0000_u64 + i as u64);
                p.tracked_sha = Some(sha.clone().into());
                p.verdict = Some(orch::ci::verdict::VerdictKind::Green);
                p.end_reason = (!live).then(|| "finished".to_string());
                if p.milestone == Milestone::Done {
                    p.landing = Some(Landing {
                        state: LandState::Landed,
                        done_sha: Some(sha.clone().into()),
                        landed: Some(sha.clone().into()),
                        ..Landing::planned(&land, Vec::new())
                    });
                }
                let w = WorkerRecord {
                    id: id.clone(),
                    repo: format!("r{}", i % REPOS),
                    task: format!("task {i}: make the thing better in some way"),
                    task_id: None,
                    component: None,
                    plan: None,
                    progress: p,
                    branch: format!("orch/{id}"),
                    base_sha: format!("{:040x}", 1),
                    worktree: state.join(&id).join("worktree").display().to_string(),
                    remote: "orch".into(),
                    day: "2026-01-01".into(),
                    supervisor_pid: None,
                    supervisor_start: None,
                    lease_until_ms: Some(0),
                    worker_pid: None,
                    worker_running: false,
                    exit_code: Some(0),
                    respawns: 0,
                    resume_note: None,
                    created_ms: created,
                    updated_ms: ended,
                    ended_ms: None,
                    model: None,
                    model_source: None,
                    node: None,
                    fence: 0,
                };
                ws::insert_worker(tx, &w)?;
                tx.execute(
                    "UPDATE workers SET ended_ms = CASE WHEN ended_ms IS NULL THEN NULL ELSE ?2 END WHERE id = ?1",
                    orch::params![id, ended],
                )?;
                for (k, m) in [
                    ("spawned", Milestone::Working),
                    ("started", Milestone::Working),
                    ("push", Milestone::Working),
                    ("transition", Milestone::PushedToCi),
                    ("ci", Milestone::PushedToCi),
                    ("claim", Milestone::PushedToCi),
                    ("transition", w.milestone()),
                    ("stopped", w.milestone()),
                ] {
                    ws::add_event(tx, &id, k, m, "something that happened to the worker")?;
                }
                ws::record_push(tx, &id, &sha, created + 60_000)?;
                ws::record_verdict(
                    tx,
                    &id,
                    &sha,
                    ws::VerdictRow {
                        kind: orch::ci::verdict::VerdictKind::Green,
                        detail: "all green",
                        failed_jobs: &[],
                        runs: Some(&[]),
                    },
                )?;
                orch::store::usage::save_usage(
                    tx,
                    &id,
                    &Usage {
                        session_id: Some(format!("s-{i}")),
                        session_started: true,
                        cost_usd: 0.5,
                        tokens: Tokens {
                            input: 1000,
                            output: 200,
                            ..Default::default()
                        },
                        invocations: 1,
                        thread_tokens: None,
                    },
                    ended,
                )?;
            }
            Ok(())
        })
        .unwrap();
}

/// Takes the seeded database's workers back to schema version 9 (before `ended_ms`, migration
/// 11), for an orch built from before it. The lock tables keep migration 10's shape: such an orch
/// only reads them here, by column name.
fn downgrade(state: &Path) {
    let mut store = orch::store::Store::open(state).unwrap();
    store
        .write(|tx| {
            tx.execute_batch(
                "DROP INDEX workers_live; DROP INDEX workers_ended; DROP INDEX workers_running;
         DROP INDEX workers_updated; DROP INDEX workers_uncleaned; DROP INDEX alerts_worker;
         DROP INDEX pushes_sha; DROP TABLE store_meta;
         ALTER TABLE workers DROP COLUMN ended_ms; ALTER TABLE workers DROP COLUMN cleaned_ms;
         PRAGMA user_version = 9;",
            )
        })
        .unwrap();
}

struct Sample {
    ms: f64,
    rss_kib: i64,
    bytes: usize,
}

/// Runs `orch <args>` in `root`; its wall time, peak RSS (wait4) and stdout size.
// The child is reaped by `wait4` (which also gives its rusage), not by `Child::wait`.
#[allow(clippy::zombie_processes)]
fn run(orch: &Path, root: &Path, state: &Path, args: &[&str]) -> Sample {
    let t = Instant::now();
    let child = Command::new(orch)
        .args(args)
        .current_dir(root)
        .env("ORCH_STATE_DIR", state)
        .env_remove("ORCH_CONFIG")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    let mut stdout = child.stdout.unwrap();
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut stdout, &mut out).unwrap();
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child, whose pid we hold; `usage` is a valid out-pointer.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid);
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "orch {args:?} failed: {status}"
    );
    Sample {
        ms,
        rss_kib: usage.ru_maxrss,
        bytes: out.len(),
    }
}

fn copy_dir(from: &Path, to: &Path) {
    let ok = Command::new("cp")
        .arg("-a")
        .arg(from)
        .arg(to)
        .status()
        .unwrap()
        .success();
    assert!(ok);
}

fn stats(v: &mut [f64]) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (v[0], v[v.len() / 2], v[v.len() - 1])
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` runs this too: keep that cheap.
    let quick = !std::env::args().any(|a| a == "--bench");
    let orch = std::env::var_os("ORCH_BENCH_ORCH")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_orch")));
    let sizes: Vec<usize> = std::env::var("ORCH_BENCH_SIZES")
        .ok()
        .map(|s| s.split(',').filter_map(|x| x.trim().parse().ok()).collect())
        .unwrap_or_else(|| if quick { vec![20] } else { vec![100, 10_000] });
    let runs = env_usize("ORCH_BENCH_RUNS", if quick { 1 } else { 5 });
    let old = std::env::var_os("ORCH_BENCH_OLD_SCHEMA").is_some();
    println!("orch: {} ({runs} runs each)", orch.display());
    println!(
        "| workers | command | wall ms min / median / max | peak RSS MiB (median) | stdout bytes |"
    );
    println!("|---:|---|---|---:|---:|");
    for n in sizes {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("org");
        if let Some(keep) = std::env::var_os("ORCH_BENCH_KEEP") {
            // The seeded organisation kept for a look (sqlite3 <keep>/sessions/orch.db).
            let keep = PathBuf::from(keep);
            std::fs::create_dir_all(&keep).unwrap();
            organisation(&keep);
            seed(&keep.join("sessions"), n, env_usize("ORCH_BENCH_LIVE", 2));
            println!("kept: {}", keep.display());
            return;
        }
        std::fs::create_dir_all(&root).unwrap();
        organisation(&root);
        let state = root.join("sessions");
        seed(&state, n, env_usize("ORCH_BENCH_LIVE", 2));
        if old {
            downgrade(&state);
        }
        let show = format!("r{}-{:08x}", (n / 2) % REPOS, n / 2);
        let report = |name: &str, samples: Vec<Sample>| {
            let mut ms: Vec<f64> = samples.iter().map(|s| s.ms).collect();
            let mut rss: Vec<f64> = samples.iter().map(|s| s.rss_kib as f64).collect();
            let (lo, med, hi) = stats(&mut ms);
            let (_, rss_med, _) = stats(&mut rss);
            println!(
                "| {n} | {name} | {lo:.1} / {med:.1} / {hi:.1} | {:.1} | {} |",
                rss_med / 1024.0,
                samples[0].bytes
            );
        };
        // One untimed run first: the database is migrated and the caches are warm.
        run(&orch, &root, &state, &["status", "--json"]);
        if std::env::var_os("ORCH_BENCH_BOARD").is_some() {
            board(&orch, &root, &state, n, runs);
            continue;
        }
        for (name, args) in [
            ("status --json", vec!["status", "--json"]),
            ("sessions list --json", vec!["sessions", "list", "--json"]),
            (
                "sessions show --json",
                vec!["sessions", "show", &show, "--json"],
            ),
        ] {
            let samples = (0..runs)
                .map(|_| run(&orch, &root, &state, &args))
                .collect();
            report(name, samples);
        }
        for again in [false, true] {
            let samples = (0..runs)
                .map(|i| {
                    let copy = dir.path().join(format!("gc-{again}-{i}"));
                    copy_dir(&state, &copy);
                    if again {
                        run(&orch, &root, &copy, &["gc", "--json"]);
                    }
                    let s = run(&orch, &root, &copy, &["gc", "--json"]);
                    let _ = std::fs::remove_dir_all(&copy);
                    s
                })
                .collect();
            report(
                if again {
                    "gc --json (again)"
                } else {
                    "gc --json (first)"
                },
                samples,
            );
        }
    }
}

/// GET `path` from `addr` on a connection of its own; the body's length.
fn http_get(addr: &str, path: &str) -> usize {
    use std::io::{Read, Write};
    let mut t = std::net::TcpStream::connect(addr).unwrap();
    write!(
        t,
        "GET {path} HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = Vec::new();
    t.read_to_end(&mut out).unwrap();
    assert!(
        out.starts_with(b"HTTP/1.1 200"),
        "GET {path}: {}",
        String::from_utf8_lossy(&out)
    );
    out.len()
}

/// Clock ticks `pid` has run (user + system), from /proc/<pid>/stat.
fn cpu_ticks(pid: u32) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let f: Vec<&str> = text[text.rfind(')').unwrap() + 2..].split(' ').collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// Resident memory of `pid` in KiB (VmRSS, from /proc/<pid>/status).
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// p50, p95 and the largest of `v` (sorted in place).
fn percentiles(v: &mut [f64]) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let at = |q: f64| v[((v.len() as f64 * q).ceil() as usize).clamp(1, v.len()) - 1];
    (at(0.5), at(0.95), v[v.len() - 1])
}

/// An open `/api/events` stream, read on a thread of its own: the number of `board` events it
/// has seen so far.
fn sse_client(addr: &str) -> std::sync::Arc<std::sync::atomic::AtomicUsize> {
    use std::io::{BufRead, Write};
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut t = std::net::TcpStream::connect(addr).unwrap();
    write!(
        t,
        "GET /api/events HTTP/1.1\r\nHost: b\r\nAccept: text/event-stream\r\n\r\n"
    )
    .unwrap();
    let counter = seen.clone();
    std::thread::spawn(move || {
        let mut r = std::io::BufReader::with_capacity(1 << 16, t);
        let mut line = String::new();
        while r.read_line(&mut line).is_ok_and(|n| n > 0) {
            if line.starts_with("event: board") {
                counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            }
            line.clear();
        }
    });
    seen
}

/// `orch serve` on the seeded state with `ORCH_BENCH_SSE` open streams: request latency, CPU
/// and RSS while answering, a change's fan-out, and CPU while idle.
fn board(orch: &Path, root: &Path, state: &Path, n: usize, runs: usize) {
    use std::io::BufRead;
    use std::sync::atomic::Ordering;
    let mut child = Command::new(orch)
        .args(["serve", "--listen", "127.0.0.1:0"])
        .current_dir(root)
        .env("ORCH_STATE_DIR", state)
        .env_remove("ORCH_CONFIG")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line.trim().rsplit("http://").next().unwrap().to_string();
    let pid = child.id();
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let live = env_usize("ORCH_BENCH_LIVE", 2);
    let workers = format!("{n} + {live} live");

    // The streams open, each past its first event (the board at once).
    let clients: Vec<_> = (0..env_usize("ORCH_BENCH_SSE", 100))
        .map(|_| sse_client(&addr))
        .collect();
    let t = Instant::now();
    while clients.iter().any(|c| c.load(Ordering::SeqCst) == 0) {
        assert!(t.elapsed().as_secs() < 300, "the streams' first events");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    println!(
        "| {workers} | serve: {} SSE streams opened, each with its first board | {:.0} ms | - | - |",
        clients.len(),
        t.elapsed().as_secs_f64() * 1000.0
    );

    println!("|---|---|---|---:|---:|");
    println!(
        "| workers | GET (with the streams open) | ms p50 / p95 / max | server CPU % of one core while answering | bytes |"
    );
    for path in ["/", "/api/workers", "/api/board", "/metrics"] {
        http_get(&addr, path);
        let mut ms: Vec<f64> = Vec::new();
        let mut bytes = 0;
        let before = cpu_ticks(pid);
        let t = Instant::now();
        for _ in 0..runs * 20 {
            let t = Instant::now();
            bytes = http_get(&addr, path);
            ms.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        let cpu = 100.0 * (cpu_ticks(pid) - before) as f64 / ticks / t.elapsed().as_secs_f64();
        let (p50, p95, max) = percentiles(&mut ms);
        println!("| {workers} | {path} | {p50:.1} / {p95:.1} / {max:.1} | {cpu:.0} % | {bytes} |");
    }
    println!(
        "| {workers} | serve: RSS after the requests | {:.1} MiB | - | - |",
        rss_kib(pid) as f64 / 1024.0
    );

    // A change of the store (a hold taken by the CLI) reaches every open stream.
    let before: Vec<usize> = clients.iter().map(|c| c.load(Ordering::SeqCst)).collect();
    let cpu0 = cpu_ticks(pid);
    let t = Instant::now();
    run(
        orch,
        root,
        state,
        &["hold", "r0", "--reason", "bench", "--by", "bench"],
    );
    while clients
        .iter()
        .zip(&before)
        .any(|(c, b)| c.load(Ordering::SeqCst) == *b)
    {
        assert!(t.elapsed().as_secs() < 300, "the change's fan-out");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    println!(
        "| {workers} | serve: a change (orch hold) seen by all {} streams | {:.0} ms after the command started (server CPU {:.2} s) | - | - |",
        clients.len(),
        t.elapsed().as_secs_f64() * 1000.0,
        (cpu_ticks(pid) - cpu0) as f64 / ticks
    );
    run(orch, root, state, &["unhold", "r0"]);
    std::thread::sleep(std::time::Duration::from_secs(3));

    let before = cpu_ticks(pid);
    let t = Instant::now();
    std::thread::sleep(std::time::Duration::from_secs(10));
    let used = (cpu_ticks(pid) - before) as f64 / ticks;
    println!(
        "| {workers} | serve: idle CPU over {:.0} s, the streams open | {:.2} % of one core | - | - |",
        t.elapsed().as_secs_f64(),
        100.0 * used / t.elapsed().as_secs_f64()
    );
    println!(
        "| {workers} | serve: RSS at the end | {:.1} MiB | - | - |",
        rss_kib(pid) as f64 / 1024.0
    );
    let _ = child.kill();
    let _ = child.wait();
}
