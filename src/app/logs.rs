//! A worker's timeline: its log (`worker.log`) with its recorded events (transitions, pushes,
//! starts and stops) placed where they happened, read once or followed as it grows.
//!
//! Log lines carry no time. Each event records the log's length when it was committed
//! (`store::workers::add_event`), so an event goes after every byte written before it — and
//! after the line in progress then, never inside it. That holds after a crash and a respawn
//! too: the log is only appended to. Events recorded before orch kept that length go where
//! the event before them went (in order).

use super::operator::Supervision;
use crate::store::workers::{self as ws, WorkerEvent, WorkerRecord};
use crate::store::{Store, StoreError, now_ms};
use std::collections::VecDeque;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// One item of a timeline.
#[derive(Debug, Clone)]
pub enum Entry {
    /// A line of the worker's output (untrusted, raw; without its newline).
    Line(String),
    /// Something orch recorded about the worker.
    Event(WorkerEvent),
}

/// A line longer than this is cut into pieces (a worker that never prints a newline must not
/// grow the reader's memory).
const MAX_LINE: usize = 64 * 1024;

/// How often [`follow`] looks for more.
pub const FOLLOW_EVERY: Duration = Duration::from_millis(200);

/// Where a reader of a timeline stands, to go on from there later (another request of the
/// board's): the log handed out up to `log` (the start of the line in progress), the events up
/// to `seq`, the last of them placed at `at`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cursor {
    pub log: u64,
    pub seq: i64,
    pub at: u64,
}

impl Cursor {
    /// `<log>.<seq>.<at>`: opaque to the page, which hands it back.
    pub fn encode(&self) -> String {
        format!("{}.{}.{}", self.log, self.seq, self.at)
    }

    pub fn decode(text: &str) -> Option<Cursor> {
        let mut parts = text.split('.');
        let c = Cursor {
            log: parts.next()?.parse().ok()?,
            seq: parts.next()?.parse().ok()?,
            at: parts.next()?.parse().ok()?,
        };
        parts.next().is_none().then_some(c)
    }
}

/// Reads a worker's timeline incrementally: each [`Timeline::poll`] hands out what arrived
/// since the last one, in order.
pub struct Timeline {
    worker: String,
    /// Events only: the log is not read and every event is handed out at once.
    events_only: bool,
    log: PathBuf,
    file: Option<std::fs::File>,
    /// Bytes of the log read so far.
    read: u64,
    /// The line in progress (read, not handed out) and where it starts in the log.
    partial: Vec<u8>,
    line_start: u64,
    last_seq: i64,
    /// Where the last event read goes (events never go before the one before them).
    last_offset: u64,
    pending: VecDeque<(u64, WorkerEvent)>,
    /// The last event handed out and its place (what [`Timeline::cursor`] says).
    emitted_seq: i64,
    emitted_at: u64,
    /// A tail's start: events placed before it are not handed out.
    from: u64,
    /// A tail that starts inside a line: that line's piece is not handed out.
    skip_piece: bool,
}

impl Timeline {
    pub fn new(state_dir: &Path, worker: &str) -> Timeline {
        Timeline {
            worker: worker.to_string(),
            events_only: false,
            log: ws::worker_log(state_dir, worker),
            file: None,
            read: 0,
            partial: Vec::new(),
            line_start: 0,
            last_seq: 0,
            last_offset: 0,
            pending: VecDeque::new(),
            emitted_seq: 0,
            emitted_at: 0,
            from: 0,
            skip_piece: false,
        }
    }

    /// The timeline from where `cursor` (of an earlier reader) stood.
    pub fn resume(state_dir: &Path, worker: &str, cursor: Cursor) -> Timeline {
        Timeline {
            read: cursor.log,
            line_start: cursor.log,
            last_seq: cursor.seq,
            last_offset: cursor.at,
            emitted_seq: cursor.seq,
            emitted_at: cursor.at,
            ..Timeline::new(state_dir, worker)
        }
    }

    /// The timeline's end: about the last `bytes` of the log, from the first whole line in
    /// them, with the events placed there.
    pub fn tail(state_dir: &Path, worker: &str, bytes: u64) -> Timeline {
        let mut t = Timeline::new(state_dir, worker);
        let len = std::fs::metadata(&t.log).map_or(0, |m| m.len());
        if len > bytes {
            let start = len - bytes;
            // Starts a line when the byte before it ends one.
            let mut before = [0u8; 1];
            let whole = std::fs::File::open(&t.log)
                .and_then(|mut f| {
                    f.seek(SeekFrom::Start(start - 1))?;
                    f.read_exact(&mut before)
                })
                .is_ok_and(|()| before[0] == b'\n');
            t.read = start;
            t.line_start = start;
            t.from = start;
            t.skip_piece = !whole;
        }
        t
    }

    /// Where this reader stands: a [`Timeline::resume`] from it hands out what this one has not.
    pub fn cursor(&self) -> Cursor {
        Cursor {
            log: self.line_start,
            seq: self.emitted_seq,
            at: self.emitted_at,
        }
    }

    /// A timeline of the worker's events alone (its milestones as they happen), without
    /// its output.
    pub fn events_only(state_dir: &Path, worker: &str) -> Timeline {
        Timeline {
            events_only: true,
            ..Timeline::new(state_dir, worker)
        }
    }

    /// Hands `emit` every line completed and every event placed since the last call.
    pub fn poll(
        &mut self,
        store: &mut Store,
        emit: &mut dyn FnMut(Entry),
    ) -> Result<(), StoreError> {
        self.poll_at_most(store, u64::MAX, emit).map(|_| ())
    }

    /// As [`Timeline::poll`], reading at most about `budget` bytes of the log (whole reads of
    /// 64 KiB): whether more of the log is there already.
    pub fn poll_at_most(
        &mut self,
        store: &mut Store,
        budget: u64,
        emit: &mut dyn FnMut(Entry),
    ) -> Result<bool, StoreError> {
        // Events first: each was recorded when the log was at most as long as what is read
        // below, so every event read now can be placed once the log is read.
        let events = store.read(|tx| ws::worker_events_after(tx, &self.worker, self.last_seq))?;
        for e in events {
            self.last_seq = e.seq;
            let at = e
                .log_bytes
                .map_or(self.last_offset, |b| b.max(0) as u64)
                .max(self.last_offset);
            self.last_offset = at;
            self.pending.push_back((at, e));
        }
        if self.events_only {
            while let Some((at, e)) = self.pending.pop_front() {
                self.hand_out(at, e, emit);
            }
            return Ok(false);
        }
        let more = self.read_log(budget, emit);
        self.place_events(emit);
        Ok(more)
    }

    /// Hands out event `e` placed at `at` (unless a tail starts after it).
    fn hand_out(&mut self, at: u64, e: WorkerEvent, emit: &mut dyn FnMut(Entry)) {
        self.emitted_seq = e.seq;
        self.emitted_at = at;
        if at >= self.from {
            emit(Entry::Event(e));
        }
    }

    /// Hands out what is left: the unfinished last line, then every event not placed yet.
    pub fn finish(&mut self, emit: &mut dyn FnMut(Entry)) {
        if !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            self.line_start += line.len() as u64;
            if !std::mem::take(&mut self.skip_piece) {
                emit(Entry::Line(String::from_utf8_lossy(&line).into_owned()));
            }
        }
        while let Some((at, e)) = self.pending.pop_front() {
            self.hand_out(at, e, emit);
        }
    }

    /// Events whose place is before the line in progress.
    fn place_events(&mut self, emit: &mut dyn FnMut(Entry)) {
        while self
            .pending
            .front()
            .is_some_and(|(at, _)| *at <= self.line_start)
        {
            let (at, e) = self.pending.pop_front().expect("checked");
            self.hand_out(at, e, emit);
        }
    }

    /// Reads the log on (at most about `budget` bytes): whether it stopped for the budget.
    fn read_log(&mut self, budget: u64, emit: &mut dyn FnMut(Entry)) -> bool {
        if self.file.is_none() {
            // Not there yet (the worker has not started), or gone: nothing to read now.
            let Ok(mut f) = std::fs::File::open(&self.log) else {
                return false;
            };
            if f.seek(SeekFrom::Start(self.read)).is_err() {
                return false;
            }
            self.file = Some(f);
        }
        let mut buf = vec![0u8; 64 * 1024];
        let mut this_call = 0u64;
        loop {
            if this_call >= budget {
                return true;
            }
            let n = match self.file.as_mut().map(|f| f.read(&mut buf)) {
                Some(Ok(n)) if n > 0 => n,
                _ => return false,
            };
            self.read += n as u64;
            this_call += n as u64;
            for &b in &buf[..n] {
                self.partial.push(b);
                if b == b'\n' || self.partial.len() >= MAX_LINE {
                    self.place_events(emit);
                    let mut line = std::mem::take(&mut self.partial);
                    self.line_start += line.len() as u64;
                    if line.last() == Some(&b'\n') {
                        line.pop();
                        if line.last() == Some(&b'\r') {
                            line.pop();
                        }
                    }
                    if std::mem::take(&mut self.skip_piece) {
                        continue;
                    }
                    emit(Entry::Line(String::from_utf8_lossy(&line).into_owned()));
                }
            }
        }
    }
}

/// Is there nothing more to come for `w`: it ended (DONE, FAILED, CANCELLED) and no
/// supervisor of it is left to write its last lines and events?
pub fn finished(w: &WorkerRecord, now: i64) -> bool {
    w.milestone().is_terminal() && !w.supervised(now)
}

/// How long a follower must see a worker unsupervised before it says so: a worker just
/// spawned is handed from the spawning process to its supervisor within this time.
pub const UNSUPERVISED_AFTER: Duration = Duration::from_secs(3);

/// Hands `emit` the whole timeline of worker `id` and, with `follow`, what comes after until
/// the worker has ended (see [`finished`]); returns the worker as last read (`None` if the
/// database has no such worker). Polls every [`FOLLOW_EVERY`] with no deadline: a worker may
/// run for hours.
///
/// While following, `supervision` is told when nothing will come because nobody supervises
/// the worker (seen so for [`UNSUPERVISED_AFTER`]: its supervisor is gone, or it waits for an
/// operator) and, after that, when a supervisor has it again — once each way.
pub fn timeline(
    store: &mut Store,
    state_dir: &Path,
    id: &str,
    follow: bool,
    emit: &mut dyn FnMut(Entry),
    supervision: &mut dyn FnMut(&WorkerRecord, Supervision),
) -> Result<Option<WorkerRecord>, StoreError> {
    let mut t = Timeline::new(state_dir, id);
    let mut unsupervised_since: Option<Instant> = None;
    let mut told = false;
    loop {
        // The worker's state is read before the timeline: once it is seen finished, the
        // timeline read after it holds everything.
        let w = store.worker(id)?;
        t.poll(store, emit)?;
        let now = now_ms();
        match w {
            Some(w) if follow && !finished(&w, now) => {
                let s = super::operator::supervision(&w, now);
                if matches!(s, Supervision::Gone | Supervision::AwaitsOperator) {
                    let since = *unsupervised_since.get_or_insert_with(Instant::now);
                    if !told && since.elapsed() >= UNSUPERVISED_AFTER {
                        supervision(&w, s);
                        told = true;
                    }
                } else {
                    if told {
                        supervision(&w, s);
                    }
                    unsupervised_since = None;
                    told = false;
                }
            }
            w => {
                t.finish(emit);
                return Ok(w);
            }
        }
        std::thread::sleep(FOLLOW_EVERY);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn append(log: &Path, text: &str) {
        std::fs::create_dir_all(log.parent().unwrap()).unwrap();
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap();
        f.write_all(text.as_bytes()).unwrap();
    }

    fn event(store: &mut Store, kind: &str) {
        store
            .write(|tx| ws::add_event(tx, "w1", kind, crate::milestone::Milestone::Working, ""))
            .unwrap();
    }

    fn show(entries: &[Entry]) -> Vec<String> {
        entries
            .iter()
            .map(|e| match e {
                Entry::Line(l) => l.clone(),
                Entry::Event(e) => format!("<{}>", e.kind),
            })
            .collect()
    }

    /// An event goes after everything written before it, never inside a line: one recorded
    /// while a line was half written waits for the line's end.
    #[test]
    fn events_go_where_the_log_was_and_after_the_line_in_progress() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path()).unwrap();
        let log = ws::worker_log(dir.path(), "w1");
        event(&mut store, "spawned"); // no log yet: first
        append(&log, "one\nhal");
        event(&mut store, "mid_line");
        let mut t = Timeline::new(dir.path(), "w1");
        let mut out = Vec::new();
        t.poll(&mut store, &mut |e| out.push(e)).unwrap();
        assert_eq!(show(&out), ["<spawned>", "one"]);
        append(&log, "f\r\nthree\n");
        event(&mut store, "after_three");
        append(&log, "four");
        t.poll(&mut store, &mut |e| out.push(e)).unwrap();
        assert_eq!(
            show(&out),
            [
                "<spawned>",
                "one",
                "half",
                "<mid_line>",
                "three",
                "<after_three>"
            ]
        );
        t.finish(&mut |e| out.push(e));
        assert_eq!(show(&out).last().unwrap(), "four");
        // Read in one go, the same timeline.
        let mut once = Vec::new();
        timeline(
            &mut store,
            dir.path(),
            "w1",
            false,
            &mut |e| once.push(e),
            &mut |_, _| {},
        )
        .unwrap();
        assert_eq!(show(&once), show(&out));
        // Events only: in order, without the output.
        let mut events = Vec::new();
        let mut t = Timeline::events_only(dir.path(), "w1");
        t.poll(&mut store, &mut |e| events.push(e)).unwrap();
        assert_eq!(show(&events), ["<spawned>", "<mid_line>", "<after_three>"]);
    }

    /// A reader that goes away and comes back with its cursor hands out exactly what it had
    /// not, in the same order; a tail starts at a whole line with the events placed there.
    #[test]
    fn a_cursor_resumes_where_it_stood_and_a_tail_starts_at_a_whole_line() {
        let dir = tempfile::tempdir().unwrap();
        let mut store = Store::open(dir.path()).unwrap();
        let log = ws::worker_log(dir.path(), "w1");
        event(&mut store, "spawned");
        append(&log, "one\ntwo\nhal");
        event(&mut store, "mid_line");
        let mut whole = Vec::new();
        let mut t = Timeline::new(dir.path(), "w1");
        t.poll(&mut store, &mut |e| whole.push(e)).unwrap();
        let c = t.cursor();
        assert_eq!(Cursor::decode(&c.encode()), Some(c));
        assert_eq!(Cursor::decode("1.2"), None);
        assert_eq!(show(&whole), ["<spawned>", "one", "two"]);
        // The line in progress and the event placed after it come to the next reader.
        append(&log, "f\n");
        let mut again = Timeline::resume(dir.path(), "w1", c);
        let mut next = Vec::new();
        again.poll(&mut store, &mut |e| next.push(e)).unwrap();
        assert_eq!(show(&next), ["half", "<mid_line>"]);
        // Nothing new: nothing handed out twice.
        let mut none = Vec::new();
        Timeline::resume(dir.path(), "w1", again.cursor())
            .poll(&mut store, &mut |e| none.push(e))
            .unwrap();
        assert!(none.is_empty(), "{:?}", show(&none));
        // A budget stops the read, and the cursor goes on from there.
        append(&log, &"x".repeat(70 * 1024));
        append(&log, "\nlast\n");
        let mut capped = Timeline::resume(dir.path(), "w1", again.cursor());
        let mut got = Vec::new();
        assert!(
            capped
                .poll_at_most(&mut store, 1, &mut |e| got.push(e))
                .unwrap()
        );
        let mut rest = Timeline::resume(dir.path(), "w1", capped.cursor());
        assert!(
            !rest
                .poll_at_most(&mut store, u64::MAX, &mut |e| got.push(e))
                .unwrap()
        );
        // Every byte once (the long line in MAX_LINE pieces), then the last line.
        assert_eq!(show(&got).concat(), "x".repeat(70 * 1024) + "last");
        // A tail inside "half" ("f"): from the next whole line, without the events before
        // it (placed at the tail's start: shown).
        let mut tail = Vec::new();
        Timeline::tail(dir.path(), "w1", 70 * 1024 + 8)
            .poll(&mut store, &mut |e| tail.push(e))
            .unwrap();
        let shown = show(&tail);
        assert_eq!(shown.len(), 4);
        assert_eq!(shown[0], "<mid_line>", "placed at the tail's start");
        assert_eq!(shown[1].len() + shown[2].len(), 70 * 1024);
        assert_eq!(shown[3], "last");
        // A tail on a line's start keeps that line.
        let mut tail = Vec::new();
        Timeline::tail(dir.path(), "w1", 5)
            .poll(&mut store, &mut |e| tail.push(e))
            .unwrap();
        assert_eq!(show(&tail), ["last"]);
    }
}
