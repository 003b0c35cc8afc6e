//! A forge that cannot be reached, through the real binary: `ci status` and `ci logs` tell the
//! outage on stderr at its first failure (what is unreachable, how long orch keeps trying),
//! give up within `forge.give_up_after` and exit 3 naming the forge's URL, never the token.
//! Two outages on loopback: a port nobody listens on, and one that accepts and never answers.

use crate::support::fake_forgejo::{OWNER, REPO, TOKEN};
use crate::support::orch_cmd;
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::{Duration, Instant};

const SHA: &str = "0123456789abcdef0123456789abcdef01234567";
/// The bound the tests configure; the default request timeout (30 s) and the shipped
/// contract's back-off (5 s, 10 s, 20 s: 35 s in all) are both far beyond it.
const GIVE_UP_AFTER: &str = "4s";

/// An organisation on a Forgejo at `url`, with the shipped (built-in) contract.
fn org(url: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("repos.yaml"),
        format!(
            "forge: {{ kind: forgejo, url: '{url}', owner: {OWNER}, token_env: ORCH_TEST_FORGE_TOKEN, give_up_after: {GIVE_UP_AFTER} }}\n\
             repos:\n  {REPO}: {{ path: {REPO} }}\n"
        ),
    )
    .unwrap();
    dir
}

/// What one run of orch showed: its exit code, stderr, and whether the outage notice was
/// read while the process still ran (told at the first failure, not only at the end).
struct Seen {
    code: Option<i32>,
    stderr: String,
    stdout: String,
    told_while_running: bool,
    took: Duration,
}

fn run(dir: &std::path::Path, args: &[&str]) -> Seen {
    let started = Instant::now();
    let mut child = orch_cmd()
        .current_dir(dir)
        .env("ORCH_CONFIG", dir.join("repos.yaml"))
        .env("ORCH_STATE_DIR", dir.join("state"))
        .env("ORCH_TEST_FORGE_TOKEN", TOKEN)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, rx) = mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut stdout = child.stdout.take().unwrap();
    let out_reader = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut s).unwrap();
        s
    });
    // Far beyond the bound, far below the 35 s orch used to take: a hang fails the test.
    let deadline = started + Duration::from_secs(25);
    let mut lines = Vec::new();
    let mut told_while_running = false;
    let status = loop {
        while let Ok(line) = rx.try_recv() {
            if line.contains("is not answering") && child.try_wait().unwrap().is_none() {
                told_while_running = true;
            }
            lines.push(line);
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() >= deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!(
                "orch {args:?} still ran after 25 s; stderr so far:\n{}",
                lines.join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let took = started.elapsed();
    // The rest of stderr (the pipe is closed once the process is gone).
    lines.extend(rx.iter());
    Seen {
        code: status.code(),
        stderr: lines.join("\n"),
        stdout: out_reader.join().unwrap(),
        told_while_running,
        took,
    }
}

fn assert_honest(seen: &Seen, url: &str) {
    let all = format!("{}{}", seen.stdout, seen.stderr);
    assert_eq!(
        seen.code,
        Some(3),
        "a forge that does not answer is exit 3:\n{all}"
    );
    assert!(!all.contains(TOKEN), "the token leaked:\n{all}");
    let notice = format!("forge {url} is not answering");
    assert_eq!(
        seen.stderr.matches(&notice).count(),
        1,
        "one notice naming the forge:\n{all}"
    );
    assert!(
        seen.stderr
            .contains(&format!("(forge.give_up_after {GIVE_UP_AFTER})")),
        "the notice says how long orch keeps trying:\n{all}"
    );
    assert!(
        seen.told_while_running,
        "the outage is told at its first failure, while orch still tries:\n{all}"
    );
    let last = seen.stderr.lines().last().unwrap_or_default();
    assert!(
        last.contains(&format!("forge {url}")) && last.contains("gave up after"),
        "the final error names the forge and the bound:\n{all}"
    );
    assert!(
        seen.took < Duration::from_secs(15),
        "bounded by forge.give_up_after ({GIVE_UP_AFTER}), took {:?}:\n{all}",
        seen.took
    );
}

#[test]
fn a_port_nobody_listens_on_is_told_at_once_and_exits_three() {
    // A port that was free a moment ago: nothing listens on it now.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let dir = org(&url);
    let seen = run(dir.path(), &["ci", "status", "--repo", REPO, "--sha", SHA]);
    assert_honest(&seen, &url);
    assert!(seen.stderr.contains("cannot connect"), "{}", seen.stderr);
    let seen = run(dir.path(), &["ci", "logs", "--repo", REPO, "--sha", SHA]);
    assert_honest(&seen, &url);
    assert!(
        !dir.path().join("state").exists(),
        "a question creates no state"
    );
}

#[test]
fn a_forge_that_accepts_and_never_answers_is_bounded_and_exits_three() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://127.0.0.1:{}", listener.local_addr().unwrap().port());
    // Accepts every connection and keeps it open without a byte of answer.
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for conn in listener.incoming().map_while(Result::ok) {
            held.push(conn);
        }
    });
    let dir = org(&url);
    let seen = run(
        dir.path(),
        &["ci", "status", "--repo", REPO, "--sha", SHA, "--json"],
    );
    assert_honest(&seen, &url);
    assert!(seen.stderr.contains("timed out"), "{}", seen.stderr);
    assert!(
        seen.stdout.is_empty(),
        "no verdict is made up: {}",
        seen.stdout
    );
}
