//! `orch logs <id> [-f] [--json]`: a worker's output with its recorded events interleaved
//! where they happened (`app::logs`), followed until the worker has ended with `-f`.

use super::{Ctx, Failure, Outcome};
use crate::app::logs::{self, Entry};
use crate::app::operator::Supervision;
use crate::operator::logs::entry_lines;
use crate::operator::view::workers::LogLineView;
use crate::store::workers::WorkerRecord;
use crate::text::escape;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// Prints one timeline entry: a JSON object per line, or the escaped text.
pub fn print_entry(entry: &Entry, json: bool, raw: bool) {
    if json {
        crate::operator::view::print_json(&LogLineView::of(entry));
        return;
    }
    for l in entry_lines(entry, raw) {
        println!("{l}");
    }
}

pub fn run(ctx: &Ctx, id: &str, follow: bool, json: bool, raw: bool) -> Outcome {
    let l = ctx.load()?;
    let Some(mut store) = l.existing_store()? else {
        return Err(Failure::bad_input(format!(
            "no worker {id}: orch has no state in {} yet",
            l.state_dir.display()
        )));
    };
    if store.worker(id)?.is_none() {
        return Err(Failure::bad_input(format!(
            "no worker {} (orch sessions list shows them)",
            escape(id)
        )));
    }
    logs::timeline(
        &mut store,
        &l.state_dir,
        id,
        follow,
        &mut |e| print_entry(&e, json, raw),
        &mut |w, s| eprintln!("orch: {}", escape(&supervision_notice(w, s))),
    )?;
    Ok(0)
}

/// What a follower says on stderr when nobody supervises the worker it follows (it keeps
/// following: nothing comes until someone does), and when a supervisor has it again.
fn supervision_notice(w: &WorkerRecord, s: Supervision) -> String {
    let (id, m) = (&w.id, w.milestone().as_str());
    match s {
        Supervision::Gone => format!(
            "{id} ({m}): its supervisor is gone; `orch resume` takes it over — still following"
        ),
        Supervision::AwaitsOperator => format!(
            "{id} ({m}): no supervisor runs, it waits for an operator (`orch respawn {id} --note …` gives it another go, `orch cancel {id}` ends it) — still following"
        ),
        _ => format!("{id} ({m}): a supervisor has it again"),
    }
}

/// Prints a worker's events as they are recorded, on a thread of its own, while this process
/// does something else (supervises it: `spawn --foreground`). [`LiveEvents::finish`] prints
/// what is left and stops it.
pub struct LiveEvents {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

pub fn live_events(state_dir: &Path, id: &str) -> LiveEvents {
    let stop = Arc::new(AtomicBool::new(false));
    let (state_dir, id, stopping) = (state_dir.to_path_buf(), id.to_string(), stop.clone());
    let thread = std::thread::spawn(move || {
        // Its own connection: the supervisor's is busy in the other thread.
        let Ok(mut store) = crate::store::Store::open(&state_dir) else {
            return;
        };
        let mut t = logs::Timeline::events_only(&state_dir, &id);
        let mut print = |e: Entry| print_entry(&e, false, false);
        loop {
            // Read after the stop is seen: everything recorded before it is printed.
            let last = stopping.load(Ordering::SeqCst);
            if t.poll(&mut store, &mut print).is_err() || last {
                t.finish(&mut print);
                return;
            }
            std::thread::sleep(logs::FOLLOW_EVERY);
        }
    });
    LiveEvents {
        stop,
        thread: Some(thread),
    }
}

impl LiveEvents {
    /// Prints the events not printed yet, then returns.
    pub fn finish(mut self) {
        self.stop_and_join();
    }

    fn stop_and_join(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for LiveEvents {
    fn drop(&mut self) {
        self.stop_and_join();
    }
}
