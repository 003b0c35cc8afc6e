//! A worker's log as the operator reads it: its output with orch's recorded events
//! interleaved (`app::logs::Timeline`), each entry as the escaped lines `orch logs` prints —
//! and the board's `/api/workers/<id>/log`, a capped read of the same lines from a cursor.

use super::Error;
use crate::app::Loaded;
use crate::app::logs::{self, Cursor, Entry, Timeline};
use crate::app::supervisor::agent::render::render;
use crate::store::fmt_ms;
use crate::store::workers::WorkerEvent;
use crate::text::escape;
use schemars::JsonSchema;
use serde::Serialize;

/// An event as one human line, marked as orch's (worker lines are printed bare).
pub fn event_line(e: &WorkerEvent) -> String {
    format!(
        "[orch {}] {}: {}",
        fmt_ms(e.at_ms),
        escape(&e.kind),
        escape(&e.detail)
    )
}

/// One timeline entry as the lines an operator reads (escaped: never a terminal command):
/// what `orch logs` prints, and the board's live log shows.
pub fn entry_lines(entry: &Entry, raw: bool) -> Vec<String> {
    match entry {
        Entry::Line(text) => match render(text).filter(|_| !raw) {
            // An agent's JSON event, as an operator reads it (`--raw`: as written).
            Some(lines) => lines.iter().map(|l| escape(l).into_owned()).collect(),
            None => vec![escape(text).into_owned()],
        },
        Entry::Event(e) => vec![event_line(e)],
    }
}

/// How much of a worker's log one answer reads at most (the page asks again at once for
/// the rest: `more`).
const LOG_BUDGET: u64 = 256 * 1024;
/// Where a first look at a worker's log starts: about its last this many bytes.
const LOG_TAIL: u64 = 64 * 1024;

/// `/api/workers/<id>/log`: the worker's timeline as `orch logs` prints it.
#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct LogAnswer {
    worker_id: String,
    /// Without `after`: the log's tail (about its last 64 KiB, from a whole line); with it,
    /// what came after. Each line as `orch logs` prints it (an agent's JSON events readable,
    /// control characters escaped), the board's and the forge's tokens redacted.
    lines: Vec<LogLine>,
    /// Handed back as `?after=`: what comes after these lines.
    cursor: String,
    /// More of the log is there already (this answer was capped at 256 KiB read): ask again.
    more: bool,
    /// The worker has ended and no supervisor of it is left: nothing more will come.
    ended: bool,
}

#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct LogLine {
    /// An event orch recorded (`[orch <at>] <kind>: <detail>`), not the worker's output.
    orch: bool,
    text: String,
}

impl super::view::View for LogAnswer {
    const NAME: &'static str = "board-log";
}

/// The log of worker `id` from `cursor` (its tail without one): the same timeline and the
/// same lines as `orch logs`, capped at [`LOG_BUDGET`] read, each passed through `scrub` (the
/// board redacts the secrets its process holds).
pub fn log_of(
    l: &Loaded,
    id: &str,
    cursor: Option<Cursor>,
    scrub: &dyn Fn(&str) -> String,
) -> Result<LogAnswer, Error> {
    let no = || Error::not_found(format!("no worker {}", crate::text::escape(id)));
    let mut store = l.existing_store()?.ok_or_else(no)?;
    // Read before the timeline: once seen finished, the timeline read after it holds
    // everything (as `orch logs -f` ends).
    let w = store.worker(id)?.ok_or_else(no)?;
    let dir = &l.state_dir;
    let mut t = match cursor {
        Some(c) => Timeline::resume(dir, id, c),
        None => Timeline::tail(dir, id, LOG_TAIL),
    };
    let mut entries = Vec::new();
    let more = t.poll_at_most(&mut store, LOG_BUDGET, &mut |e| entries.push(e))?;
    let ended = !more && logs::finished(&w, crate::store::now_ms());
    if ended {
        t.finish(&mut |e| entries.push(e));
    }
    let lines = entries
        .iter()
        .flat_map(|e| {
            let orch = matches!(e, Entry::Event(_));
            entry_lines(e, false).into_iter().map(move |text| LogLine {
                orch,
                text: scrub(&text),
            })
        })
        .collect();
    Ok(LogAnswer {
        worker_id: w.id,
        lines,
        cursor: t.cursor().encode(),
        more,
        ended,
    })
}
