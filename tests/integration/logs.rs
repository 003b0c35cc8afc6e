//! `orch logs <id> [-f]`: the worker's output with its events placed where they happened.

use crate::support::{DEADLINE, Org, RepoSpec, Spec, output_text, poll};
use serde_json::Value;
use std::io::BufRead;
use std::time::Duration;

/// The lines `child` prints on stdout, as they come.
fn lines_of(child: &mut std::process::Child) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// Collects lines from `rx` into `seen` until one satisfies `until` (or, with `None`, until
/// the printer closes its stdout), within [`DEADLINE`].
fn collect(
    rx: &std::sync::mpsc::Receiver<String>,
    seen: &mut Vec<String>,
    until: Option<&dyn Fn(&str) -> bool>,
    diag: &dyn Fn() -> String,
) {
    let deadline = std::time::Instant::now() + DEADLINE;
    loop {
        if let Some(f) = until
            && seen.iter().any(|l| f(l))
        {
            return;
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        match rx.recv_timeout(left) {
            Ok(l) => seen.push(l),
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) if until.is_none() => return,
            Err(e) => panic!("{e}; so far:\n{}\n{}", seen.join("\n"), diag()),
        }
    }
}

fn position(lines: &[String], what: &str, f: impl Fn(&str) -> bool) -> usize {
    lines
        .iter()
        .position(|l| f(l))
        .unwrap_or_else(|| panic!("no {what} in:\n{}", lines.join("\n")))
}

/// The order the timeline must show: the line before the push, the push line, the
/// PUSHED_TO_CI transition (recorded before the test released the worker), the line after.
fn assert_order(lines: &[String]) {
    let a = position(lines, "line A", |l| l.starts_with("line A"));
    let push = position(lines, "the push line", |l| l.starts_with("PUSHED_TO_CI:"));
    let event = position(lines, "the PUSHED_TO_CI transition", |l| {
        l.starts_with("[orch ") && l.contains("transition: WORKING -> PUSHED_TO_CI")
    });
    let b = position(lines, "line B", |l| l == "line B after release");
    let done = position(lines, "the DONE transition", |l| {
        l.starts_with("[orch ") && l.contains("-> DONE")
    });
    assert!(
        a < push && push < event && event < b && b < done,
        "{}",
        lines.join("\n")
    );
    assert!(
        lines[0].contains("] spawned: task: "),
        "{}",
        lines.join("\n")
    );
}

#[test]
fn logs_interleave_events_where_they_happened_and_follow_to_the_end() {
    let org = Org::new(Spec::local("logs_worker.sh").repo(RepoSpec::new("alpha")));
    let id = org.spawn_detached("alpha", "log things");

    // Follow from the start, in another process.
    let mut follower = org
        .cmd(&["logs", &id, "-f"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let rx = lines_of(&mut follower);
    let mut seen: Vec<String> = Vec::new();
    // The worker waits for the release: the follower shows the PUSHED_TO_CI transition first.
    collect(
        &rx,
        &mut seen,
        Some(&|l| l.contains("transition: WORKING -> PUSHED_TO_CI")),
        &|| org.diag(&id),
    );
    std::fs::write(org.out.join(format!("release-{id}")), "").unwrap();
    // It ends by itself once the worker is DONE and its supervisor gone.
    collect(&rx, &mut seen, None, &|| org.diag(&id));
    let status = poll(Duration::from_secs(10), || {
        follower.try_wait().ok().flatten()
    })
    .expect("the follower exits");
    assert_eq!(status.code(), Some(0));
    assert_order(&seen);
    assert_eq!(org.worker(&id).milestone().as_str(), "DONE");

    // Read once afterwards: the same timeline.
    let out = org.run(&["logs", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let text = String::from_utf8(out.stdout.clone()).unwrap();
    let lines: Vec<String> = text.lines().map(str::to_string).collect();
    assert_order(&lines);
    assert_eq!(lines, seen);
    // The worker's escape sequence is printed as text, never sent to the terminal.
    assert!(!text.contains('\u{1b}'), "{text}");
    assert!(text.contains("line A \\x1b[31mred"), "{text}");

    // --json: one object a line, in the same order.
    let out = org.run(&["logs", &id, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let objs: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(objs.len(), lines.len());
    assert_eq!(objs[0]["type"], "event");
    assert_eq!(objs[0]["kind"], "spawned");
    assert!(objs[0]["at"].as_str().unwrap().ends_with('Z'));
    assert!(
        objs.iter()
            .any(|o| o["type"] == "log" && o["text"] == "line A \u{1b}[31mred"),
        "{objs:#?}"
    );
}

#[test]
fn logs_of_an_unknown_worker_is_bad_input() {
    let org = Org::new(Spec::local("logs_worker.sh").repo(RepoSpec::new("alpha")));
    let out = org.run(&["logs", "nope-123"]);
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no worker nope-123"));
    // With state present too.
    let out = org.run(&["status"]);
    assert!(out.status.success());
    let id = org.spawn_detached("alpha", "log things");
    let out = org.run(&["logs", "nope-123", "-f"]);
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
    let out = org.run(&["cancel", &id]);
    assert!(out.status.success(), "{}", output_text(&out));
}

/// `spawn --foreground` prints the milestones as they happen, then the outcome.
#[test]
fn spawn_in_the_foreground_prints_the_live_timeline() {
    let org = Org::new(Spec::local("logs_worker.sh").repo(RepoSpec::new("alpha")));
    let mut spawn = org
        .cmd(&["spawn", "--repo", "alpha", "--task", "live", "--foreground"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let rx = lines_of(&mut spawn);
    let mut seen: Vec<String> = Vec::new();
    let diag = || {
        org.workers()
            .first()
            .map(|w| org.diag(&w.id))
            .unwrap_or_default()
    };
    // Printed while the worker still waits for the test: live, not at the end.
    collect(
        &rx,
        &mut seen,
        Some(&|l| l.contains("transition: WORKING -> PUSHED_TO_CI")),
        &diag,
    );
    let id = seen[0].split(' ').next().unwrap().to_string();
    assert!(
        seen[0].ends_with("alpha WORKING (supervising in the foreground)"),
        "{seen:?}"
    );
    assert_eq!(org.worker(&id).milestone().as_str(), "PUSHED_TO_CI");
    std::fs::write(org.out.join(format!("release-{id}")), "").unwrap();
    collect(&rx, &mut seen, None, &diag);
    let status =
        poll(Duration::from_secs(10), || spawn.try_wait().ok().flatten()).expect("spawn exits");
    assert_eq!(status.code(), Some(0), "{seen:?}");
    let done = position(&seen, "the DONE transition", |l| {
        l.starts_with("[orch ") && l.contains("-> DONE")
    });
    assert_eq!(
        seen.last().unwrap(),
        &format!("{id} alpha DONE"),
        "{seen:?}"
    );
    assert!(done < seen.len() - 1);
    // The worker's own output is not mixed in (orch logs has it).
    assert!(!seen.iter().any(|l| l.starts_with("line A")), "{seen:?}");
}

/// `wave run --until-done` prints its timeline as it goes: each task's start and end, in the
/// order they happened (b waits for a, its dependency).
#[test]
fn wave_until_done_prints_its_timeline() {
    let org = Org::new(
        Spec::local("gc_leftovers.sh")
            .repo(RepoSpec::new("a"))
            .repo(RepoSpec::new("b").deps(&["a"])),
    );
    let file = org.root.join("w.yaml");
    std::fs::write(
        &file,
        "name: w\ntasks:\n  - {id: a-1, repo: a, task: done}\n  - {id: b-1, repo: b, task: done}\n",
    )
    .unwrap();
    let out = org.run(&[
        "wave",
        "run",
        file.to_str().unwrap(),
        "--until-done",
        "--interval",
        "200ms",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    let at = |task: &str, what: &str| {
        position(&lines, &format!("{task} {what}"), |l| {
            l.contains(task) && l.contains(what)
        })
    };
    let (a_start, a_done) = (at("a-1", "started (worker"), at("a-1", "DONE"));
    let (b_start, b_done) = (at("b-1", "started (worker"), at("b-1", "DONE"));
    assert!(
        a_start < a_done && a_done <= b_start && b_start < b_done,
        "{}",
        lines.join("\n")
    );
}

/// A supervisor killed, its worker replaced by `orch resume`: the timeline still has each
/// event where it happened — the first life's line, the respawn, the replacement's lines.
#[test]
fn logs_keep_their_order_across_a_crash_and_a_respawn() {
    let org = Org::new(Spec::local("logs_resume.sh").repo(RepoSpec::new("alpha")));
    let id = org.spawn_detached("alpha", "survive");
    org.wait_until("the first life", DEADLINE, || {
        org.out.join(format!("ready-{id}")).exists()
    });
    org.kill_supervisor(&id);
    org.resume();
    org.wait_done(&id);
    let out = org.run(&["logs", &id]);
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    let lines: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    let life1 = position(&lines, "life 1", |l| l == "life 1 starts");
    let respawn = position(&lines, "the respawn", |l| {
        l.starts_with("[orch ") && l.contains("] respawn: replacement 1")
    });
    let life2 = position(&lines, "life 2", |l| l == "life 2 starts");
    let pushed = position(&lines, "the PUSHED_TO_CI transition", |l| {
        l.starts_with("[orch ") && l.contains("-> PUSHED_TO_CI")
    });
    let done = position(&lines, "the DONE transition", |l| {
        l.starts_with("[orch ") && l.contains("-> DONE")
    });
    assert!(
        life1 < respawn && respawn < life2 && life2 < pushed && pushed < done,
        "{}",
        lines.join("\n")
    );
}

/// A follower process, killed if the test ends before it does.
struct Follower(std::process::Child);

impl Drop for Follower {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `logs -f` on a worker whose supervisor died says once, on stderr, that `orch resume` takes
/// it over — and keeps following: the replacement's lines and the DONE come through.
#[test]
fn following_an_orphan_says_so_and_goes_on_after_resume() {
    let org = Org::new(Spec::local("logs_resume.sh").repo(RepoSpec::new("alpha")));
    let id = org.spawn_detached("alpha", "survive");
    org.wait_until("the first life", DEADLINE, || {
        org.out.join(format!("ready-{id}")).exists()
    });
    let mut follower = Follower(
        org.cmd(&["logs", &id, "-f"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let follower = &mut follower.0;
    let rx = lines_of(follower);
    let (etx, erx) = std::sync::mpsc::channel::<String>();
    let stderr = follower.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if etx.send(line).is_err() {
                break;
            }
        }
    });
    let mut seen: Vec<String> = Vec::new();
    collect(&rx, &mut seen, Some(&|l| l == "life 1 starts"), &|| {
        org.diag(&id)
    });
    org.kill_supervisor(&id);
    let mut said: Vec<String> = Vec::new();
    collect(
        &erx,
        &mut said,
        Some(&|l| l.contains("supervisor is gone")),
        &|| org.diag(&id),
    );
    assert!(
        said.iter().any(|l| l.starts_with(&format!(
            "orch: {id} (WORKING): its supervisor is gone; `orch resume` takes it over"
        ))),
        "{said:?}"
    );
    assert_eq!(
        follower.try_wait().unwrap(),
        None,
        "the follower keeps following"
    );
    org.resume();
    // It follows the replacement to the end and exits by itself.
    collect(&rx, &mut seen, None, &|| org.diag(&id));
    let status = poll(Duration::from_secs(10), || {
        follower.try_wait().ok().flatten()
    })
    .unwrap_or_else(|| panic!("the follower did not exit: {seen:?}"));
    assert_eq!(status.code(), Some(0), "{seen:?}");
    let life2 = position(&seen, "life 2", |l| l == "life 2 starts");
    let done = position(&seen, "the DONE transition", |l| {
        l.starts_with("[orch ") && l.contains("-> DONE")
    });
    assert!(life2 < done, "{}", seen.join("\n"));
    // Said once, and that a supervisor has it again.
    while let Ok(l) = erx.recv_timeout(Duration::from_secs(1)) {
        said.push(l);
    }
    assert_eq!(
        said.iter()
            .filter(|l| l.contains("supervisor is gone"))
            .count(),
        1,
        "{said:?}"
    );
    assert!(
        said.iter().any(|l| l.contains("a supervisor has it again")),
        "{said:?}"
    );
}
