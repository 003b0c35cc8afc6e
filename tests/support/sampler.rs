//! Sampling `/proc` for a worker's processes while a test runs, and the promise checked
//! against the lock history: nothing of a worker alive once its lock was released.

use super::{ORCH, Org};
use std::os::unix::fs::MetadataExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Every sighting of the processes `find` names, until stopped: the wall-clock millisecond
/// before the scan that saw each (it was alive then or later).
pub struct Sampler {
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Vec<(i64, i32)>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Sampler {
    pub fn start(find: impl Fn() -> Vec<i32> + Send + 'static) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (flag, out) = (stop.clone(), seen.clone());
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::SeqCst) {
                let before = orch::store::now_ms();
                let pids = find();
                out.lock()
                    .unwrap()
                    .extend(pids.into_iter().map(|p| (before, p)));
                std::thread::sleep(Duration::from_millis(2));
            }
        });
        Sampler {
            stop,
            seen,
            thread: Some(thread),
        }
    }

    pub fn finish(mut self) -> Vec<(i64, i32)> {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
        std::mem::take(&mut *self.seen.lock().unwrap())
    }
}

/// Live (not zombie) processes whose environment holds `var` exactly (`NAME=value`).
pub fn with_env(var: &str) -> Vec<i32> {
    live_pids()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|b| *b == 0).any(|v| v == var.as_bytes()))
        })
        .filter(|pid| alive(*pid))
        .collect()
}

/// Live (not zombie) processes whose argv carries `mark` as one word.
pub fn with_argv(mark: &str) -> Vec<i32> {
    live_pids()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.split(|b| *b == 0).any(|a| a == mark.as_bytes()))
        })
        .filter(|pid| alive(*pid))
        .collect()
}

fn live_pids() -> impl Iterator<Item = i32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
}

fn alive(pid: i32) -> bool {
    orch::process::proc_stat(pid).is_some_and(|s| !s.is_dead())
}

/// Asserts that no sighting in `seen` is at or after the release of `id`'s lock (from the lock
/// history); `what` names the processes in the message. Returns the release's time.
pub fn assert_none_after_release(org: &Org, id: &str, seen: &[(i64, i32)], what: &str) -> i64 {
    let released = org
        .store()
        .lock_history()
        .unwrap()
        .into_iter()
        .find(|h| h.holder == id && h.action == "release")
        .expect("a release")
        .at_ms;
    let late: Vec<&(i64, i32)> = seen.iter().filter(|(t, _)| *t >= released).collect();
    assert!(
        late.is_empty(),
        "{what} alive at or after the release at {released}: {late:?}\n{}",
        org.diag(id)
    );
    released
}

/// Live processes of this organisation's run that are the orch binary: supervisors, guards,
/// and anything else of orch still running.
pub fn orch_processes(org: &Org) -> Vec<(i32, String)> {
    let orch = std::fs::metadata(ORCH).unwrap();
    org.leftovers()
        .into_iter()
        .filter(|(pid, _)| {
            std::fs::metadata(format!("/proc/{pid}/exe"))
                .is_ok_and(|m| m.dev() == orch.dev() && m.ino() == orch.ino())
        })
        .collect()
}
