//! Live updates: one watcher thread asks the store every 500 ms whether anything committed
//! since (`PRAGMA data_version`: no table read), and every open `/api/events` stream then
//! pushes the board again. Nobody looking costs one pragma per half second.

use super::Shared;
use super::api;
use crate::operator::workers::History;
use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::stream::Stream;
use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How often the watcher asks the store.
pub const POLL: Duration = Duration::from_millis(500);

/// Starts the watcher: `tx` is bumped after every change of the store (and once when the
/// store first appears). Ends when the server has gone (no receiver left).
pub fn watch_store(state_dir: PathBuf, tx: tokio::sync::watch::Sender<u64>) {
    std::thread::Builder::new()
        .name("board-watch".into())
        .spawn(move || {
            let mut store = None;
            let mut last = None;
            loop {
                std::thread::sleep(POLL);
                if tx.is_closed() {
                    return;
                }
                if store.is_none() {
                    // Never created by the board: only opened once orch has run here.
                    if !crate::store::has_state(&state_dir) {
                        continue;
                    }
                    match crate::store::Store::open(&state_dir) {
                        Ok(s) => store = Some(s),
                        Err(e) => {
                            tracing::warn!(error = %e, "the board cannot open the store");
                            continue;
                        }
                    }
                }
                let Some(s) = store.as_mut() else { continue };
                match s.read(crate::store::board::data_version) {
                    Ok(v) if last != Some(v) => {
                        last = Some(v);
                        tx.send_modify(|n| *n += 1);
                    }
                    Ok(_) => {}
                    Err(e) => {
                        tracing::warn!(error = %e, "the board cannot read the store");
                        store = None;
                    }
                }
            }
        })
        .expect("spawning the board's watcher thread");
}

/// The board as one `board` event's data: `{"status": <orch status --json>, "board":
/// <attention board>}`.
fn board_data(b: &super::Board) -> String {
    let data = match api::board_of(b, &History::default()) {
        Ok((status, board)) => serde_json::json!({ "status": status, "board": board }),
        Err(f) => serde_json::json!({ "error": f.to_string() }),
    };
    // A task's text or an alert may carry the board's or the forge's token.
    b.scrub(&data.to_string())
}

/// A `board` event's data as built after change `version` at `at`.
pub struct Built {
    version: u64,
    at: std::time::Instant,
    data: Arc<str>,
}

/// How long a built event is sent again to a stream that opens with no change since (its
/// ages would grow stale).
const REUSE: Duration = Duration::from_secs(2);

/// The `board` event after change `version`: built once (off the async threads) and shared by
/// every stream, whichever asks first building it while the others wait for it.
async fn board_event(b: &Shared, version: u64) -> Option<Event> {
    let mut last = b.last_event.lock().await;
    let fresh = last
        .as_ref()
        .filter(|e| e.version == version && e.at.elapsed() < REUSE)
        .map(|e| e.data.clone());
    let data = match fresh {
        Some(d) => d,
        None => {
            let bb = b.clone();
            let data: Arc<str> = tokio::task::spawn_blocking(move || board_data(&bb))
                .await
                .ok()?
                .into();
            *last = Some(Built {
                version,
                at: std::time::Instant::now(),
                data: data.clone(),
            });
            data
        }
    };
    Some(Event::default().event("board").data(&*data))
}

/// The session a stream was let in by, when it was its only credential: the stream ends
/// when the session does (signed out, or expired).
struct Bound {
    id: String,
    ended: tokio::sync::watch::Receiver<u64>,
}

/// Waits for the next change of the store; `None` when the stream is to end (the server is
/// going, or the stream's session ended).
async fn next_change(
    b: &Shared,
    rx: &mut tokio::sync::watch::Receiver<u64>,
    bound: &mut Option<Bound>,
) -> Option<()> {
    let Some(bd) = bound else {
        return rx.changed().await.ok();
    };
    loop {
        let now = crate::store::now_ms();
        let until = b.sessions.until(&bd.id, now)?;
        let left = Duration::from_millis((until - now).max(0) as u64);
        tokio::select! {
            r = rx.changed() => return r.ok(),
            // A sign-out (of this session or another): look again.
            r = bd.ended.changed() => r.ok()?,
            // Expired: the next look ends the stream.
            _ = tokio::time::sleep(left) => {}
        }
    }
}

/// `/api/events`: the board at once, then again after every change of the store; a comment
/// every 15 s keeps proxies from closing an idle stream, and a client that went away ends its
/// stream at the next send. A stream a signed-in page opened ends when its session does.
pub async fn stream(
    State(b): State<Shared>,
    headers: axum::http::HeaderMap,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let mut rx = b.changes.clone();
    rx.mark_changed();
    let bound = match &b.token {
        Some(t) if b.guarded => {
            super::auth::only_session(t, &b.sessions, &headers, crate::store::now_ms()).map(|id| {
                Bound {
                    id,
                    ended: b.sessions.ended(),
                }
            })
        }
        _ => None,
    };
    let s = futures_util::stream::unfold((b, rx, bound), |(b, mut rx, mut bound)| async move {
        next_change(&b, &mut rx, &mut bound).await?;
        let version = *rx.borrow_and_update();
        let ev = board_event(&b, version).await?;
        Some((Ok(ev), (b, rx, bound)))
    });
    Sse::new(s).keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
}
