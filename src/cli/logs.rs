//! `orch logs <id> [-f] [--json]`: a worker's output with its recorded events interleaved
//! where they happened (`app::logs`), followed until the worker has ended with `-f`.

use super::{Ctx, Failure, Outcome};
use crate::app::logs::{self, Entry};
use crate::store::fmt_ms;
use crate::store::workers::WorkerEvent;
use crate::text::escape;
use serde::Serialize;

/// One line of `orch logs --json`.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum LogLineView<'a> {
    /// A line of the worker's output, as written (untrusted).
    Log { text: &'a str },
    /// An event orch recorded: `at` RFC 3339, `milestone` the worker's after it.
    Event {
        seq: i64,
        at: String,
        kind: &'a str,
        milestone: &'a str,
        detail: &'a str,
    },
}

impl<'a> LogLineView<'a> {
    fn of(entry: &'a Entry) -> LogLineView<'a> {
        match entry {
            Entry::Line(text) => LogLineView::Log { text },
            Entry::Event(e) => LogLineView::Event {
                seq: e.seq,
                at: fmt_ms(e.at_ms),
                kind: &e.kind,
                milestone: &e.milestone,
                detail: &e.detail,
            },
        }
    }
}

/// An event as one human line, marked as orch's (worker lines are printed bare).
pub fn event_line(e: &WorkerEvent) -> String {
    format!(
        "[orch {}] {}: {}",
        fmt_ms(e.at_ms),
        escape(&e.kind),
        escape(&e.detail)
    )
}

/// Prints one timeline entry: a JSON object per line, or the escaped text.
pub fn print_entry(entry: &Entry, json: bool) {
    if json {
        let v = serde_json::to_string(&LogLineView::of(entry)).unwrap_or_default();
        println!("{v}");
        return;
    }
    match entry {
        Entry::Line(text) => println!("{}", escape(text)),
        Entry::Event(e) => println!("{}", event_line(e)),
    }
}

pub fn run(ctx: &Ctx, id: &str, follow: bool, json: bool) -> Outcome {
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
    logs::timeline(&mut store, &l.state_dir, id, follow, &mut |e| {
        print_entry(&e, json)
    })?;
    Ok(0)
}
