//! `orch serve`: the operator's board — a page, a read-only JSON API that returns the same
//! views as the commands' `--json`, live updates by server-sent events and `/metrics`.
//! A reader of the store (a short read per request, never a write transaction of its own):
//! never a second way to change state.

mod actions;
pub mod api;
mod auth;
mod events;
pub mod metrics;

use crate::app::Loaded;
use crate::operator::Error;
use crate::secret::Secret;
use axum::Router;
use axum::routing::{get, post};
use std::net::SocketAddr;
use std::sync::Arc;

/// What every request handler shares.
pub struct Board {
    pub l: Loaded,
    /// Set when `serve.token_env` names one: needed beyond loopback (for everything but the
    /// health checks) and for actions.
    pub token: Option<Secret>,
    /// Listening beyond loopback, or workers isolated from orch on this host: every request
    /// shows the token (or a signed-in session). Unguarded (loopback, nobody but orch's user
    /// to reach it), requests must name a loopback host.
    pub guarded: bool,
    /// The page's sign-ins (`/login`): the cookie holds a session id, never the token.
    pub sessions: auth::Sessions,
    /// Wrong tokens per client address: too many within a minute and its sign-ins wait.
    pub throttle: auth::Throttle,
    /// The secrets this process holds (the board's token, the forge's): never in a log line
    /// the board shows, whatever a worker printed.
    secrets: Vec<Secret>,
    /// The page's CSRF token (random per process): an action shows it in `X-Orch-Csrf`.
    pub csrf: String,
    /// Bumped by the watcher whenever the store changed.
    pub changes: tokio::sync::watch::Receiver<u64>,
    /// The last `board` event's data, the change it was built after and when: every open
    /// stream sends the same one, built once per change (not once per stream).
    last_event: tokio::sync::Mutex<Option<events::Built>>,
    /// What `/metrics` last read from the store (read again after a change, or when older
    /// than `metrics::REUSE`): a scrape of an unchanged store costs no query.
    metrics_read: std::sync::Mutex<Option<metrics::Read>>,
}

impl Board {
    /// `text` with every secret this process holds redacted.
    pub fn scrub(&self, text: &str) -> String {
        self.secrets
            .iter()
            .fold(text.to_string(), |text, s| s.scrub(&text))
    }
}

pub type Shared = Arc<Board>;

/// Serves the board of the organisation `l` loaded on `listen` until Ctrl-C.
pub fn run(l: Loaded, listen: &str) -> Result<(), Error> {
    let addr: SocketAddr = listen.parse().map_err(|_| {
        Error::bad_input(format!(
            "--listen {}: not an address and port (such as 127.0.0.1:7878)",
            crate::text::escape(listen)
        ))
    })?;
    let token = auth::read_token(l.config.serve.token_env.as_deref()).map_err(Error::bad_input)?;
    let isolated_workers = l.config.worker.separate();
    auth::check_listen(&addr, token.as_ref(), isolated_workers).map_err(Error::bad_input)?;
    let throttle = auth::Throttle::from_env().map_err(Error::bad_input)?;
    // A forge token that cannot be read is no secret this process holds.
    let secrets: Vec<Secret> = token
        .iter()
        .cloned()
        .chain(crate::token::forge_token(&l.config).ok().flatten())
        .collect();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| Error::unavailable(format!("cannot start the board's runtime: {e}")))?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| Error::unavailable(format!("cannot listen on {addr}: {e}")))?;
        let bound = listener.local_addr()?;
        let (tx, rx) = tokio::sync::watch::channel(0u64);
        events::watch_store(l.state_dir.clone(), tx);
        // A fresh random token per process, put in the page: a page of another site cannot
        // read it.
        let csrf = auth::random_hex(16).map_err(Error::unavailable)?;
        let board = Arc::new(Board {
            guarded: !addr.ip().is_loopback() || isolated_workers,
            l,
            token,
            sessions: auth::Sessions::default(),
            throttle,
            secrets,
            csrf,
            changes: rx,
            last_event: tokio::sync::Mutex::new(None),
            metrics_read: std::sync::Mutex::new(None),
        });
        // The first line on stdout is the address, for scripts and tests (port 0 picks one).
        println!("orch serve: listening on http://{bound}");
        let _ = std::io::Write::flush(&mut std::io::stdout());
        // The client's address is what wrong tokens are counted by (auth::Throttle).
        let app = router(board).into_make_service_with_connect_info::<SocketAddr>();
        axum::serve(listener, app)
            .with_graceful_shutdown(async {
                let _ = tokio::signal::ctrl_c().await;
            })
            .await
            .map_err(|e| Error::unavailable(format!("the board stopped: {e}")))?;
        Ok(())
    })
}

fn router(board: Shared) -> Router {
    Router::new()
        .route("/", get(api::page))
        .route("/api/workers", get(api::workers))
        .route("/api/workers/{id}", get(api::worker))
        .route("/api/workers/{id}/log", get(api::worker_log))
        .route("/api/workers/{id}/cancel", post(actions::cancel))
        .route("/api/workers/{id}/respawn", post(actions::respawn))
        .route("/api/workers/{id}/release", post(actions::release))
        .route("/api/repos/{repo}/hold", post(actions::hold))
        .route("/api/repos/{repo}/unhold", post(actions::unhold))
        .route("/api/waves/{name}/retry", post(actions::wave_retry))
        .route("/api/waves/{name}/cancel", post(actions::wave_cancel))
        .route("/api/board", get(api::board))
        .route("/api/graph", get(api::graph))
        .route("/api/waves", get(api::waves))
        .route("/api/alerts", get(api::alerts))
        .route("/api/nodes", get(api::nodes))
        .route("/api/events", get(events::stream))
        .route("/metrics", get(api::metrics))
        .route("/login", get(api::login_page).post(api::login))
        .route("/logout", post(api::logout))
        .route_layer(axum::middleware::from_fn_with_state(
            board.clone(),
            api::gate,
        ))
        .route("/health/live", get(|| async { "live\n" }))
        .route("/health/ready", get(api::ready))
        .with_state(board)
}
