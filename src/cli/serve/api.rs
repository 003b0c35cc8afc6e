//! The board's read-only JSON API: each answer is the view the matching command prints with
//! `--json` (built by the same function), so the API says what the CLI says.

use super::Shared;
use super::board::{self, BoardView};
use super::waves::WaveBoardView;
use crate::cli::view::config::GraphView;
use crate::cli::view::locks::LockView;
use crate::cli::view::nodes::NodesView;
use crate::cli::view::wave::WaveStatusView;
use crate::cli::view::workers::StatusView;
use crate::cli::{Failure, HistoryArgs};
use axum::Json;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Response};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The page: one file, embedded in the binary (nothing is fetched at run time).
const PAGE: &str = include_str!("page.html");

/// A failure as an HTTP answer: bad input 400, "no" 404, unavailable 503.
pub struct ApiError(Failure);

impl From<Failure> for ApiError {
    fn from(f: Failure) -> Self {
        ApiError(f)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = match self.0.code {
            2 => StatusCode::BAD_REQUEST,
            1 => StatusCode::NOT_FOUND,
            _ => StatusCode::SERVICE_UNAVAILABLE,
        };
        (status, Json(serde_json::json!({ "error": self.0.message }))).into_response()
    }
}

type Answer<T> = Result<Json<T>, ApiError>;

/// Runs a store read off the async threads (SQLite blocks).
async fn blocking<T: Send + 'static>(
    board: &Shared,
    f: impl FnOnce(&super::Board) -> Result<T, Failure> + Send + 'static,
) -> Result<T, ApiError> {
    let b = board.clone();
    tokio::task::spawn_blocking(move || f(&b))
        .await
        .map_err(|e| {
            ApiError(Failure::unavailable(format!(
                "the board's reader failed: {e}"
            )))
        })?
        .map_err(ApiError)
}

/// Every request but the health checks and the login shows the token when the board listens
/// beyond loopback; and on a board with a token, whatever presents one (the login form, a
/// bearer token) passes the throttle of wrong tokens (`auth::Throttle`).
pub async fn gate(State(board): State<Shared>, req: Request, next: Next) -> Response {
    // Sign-in attempts (the login form, a bearer token) from a client that presented too many
    // wrong tokens wait, a right one too; its signed-in session does not.
    if let Some(token) = &board.token {
        let now = crate::store::now_ms();
        let peer = peer_of(&req);
        let bearer = super::auth::presented(req.headers());
        let login = req.method() == axum::http::Method::POST && req.uri().path() == "/login";
        if (bearer.is_some() || login)
            && let Some(wait_s) = board.throttle.retry_after_s(peer, now)
        {
            return too_many(wait_s);
        }
        match bearer {
            Some(b) if super::auth::matches(token, Some(&b)) => board.throttle.succeeded(peer),
            Some(_) => wrong_token(&board, peer, now),
            None => {}
        }
    }
    if !board.guarded
        && !super::auth::loopback_host(
            req.headers()
                .get(header::HOST)
                .and_then(|h| h.to_str().ok()),
        )
    {
        return (
            StatusCode::MISDIRECTED_REQUEST,
            "this board answers requests for localhost or a loopback address only\n",
        )
            .into_response();
    }
    if board.guarded && !matches!(req.uri().path(), "/login" | "/logout") {
        let ok = board.token.as_ref().is_some_and(|t| {
            super::auth::authorised(t, &board.sessions, req.headers(), crate::store::now_ms())
        });
        if !ok {
            if req.uri().path() == "/" {
                return axum::response::Redirect::to("/login").into_response();
            }
            return (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, "Bearer")],
                "the board's token is needed (Authorization: Bearer <token>)\n",
            )
                .into_response();
        }
    }
    let resp = next.run(req).await;
    let mut resp = scrubbed(&board, resp).await;
    let h = resp.headers_mut();
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    h.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    resp
}

/// `resp` with every secret the board holds redacted from its body (a task's text, an alert, a
/// log line may carry one): every view, whatever built it. The event stream is scrubbed as its
/// events are built (`events::board_data`); it is passed on as it is.
async fn scrubbed(board: &Shared, resp: Response) -> Response {
    let streamed = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("text/event-stream"));
    if streamed {
        return resp;
    }
    let (mut parts, body) = resp.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            "cannot read the answer\n",
        )
            .into_response();
    };
    let body = match std::str::from_utf8(&bytes) {
        Ok(text) => {
            let clean = board.scrub(text);
            if clean.len() == text.len() && clean == text {
                bytes
            } else {
                parts.headers.remove(header::CONTENT_LENGTH);
                clean.into_bytes().into()
            }
        }
        Err(_) => bytes,
    };
    Response::from_parts(parts, axum::body::Body::from(body))
}

/// The address a request came from (the connection's peer: a proxy in front counts as one
/// client).
fn peer_of(req: &Request) -> std::net::IpAddr {
    req.extensions()
        .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
        .map_or(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), |c| {
            c.0.ip()
        })
}

/// 429: this client presented too many wrong tokens; it may try again in `wait_s` seconds.
fn too_many(wait_s: u64) -> Response {
    (
        StatusCode::TOO_MANY_REQUESTS,
        [(header::RETRY_AFTER, wait_s.to_string())],
        format!(
            "too many wrong tokens from this address: sign-ins are refused for {wait_s} s more\n"
        ),
    )
        .into_response()
}

/// Counts a wrong token from `peer` (what it presented is neither kept nor logged); says so
/// once in the log when it reaches the limit.
fn wrong_token(board: &super::Board, peer: std::net::IpAddr, now_ms: i64) {
    if board.throttle.failed(peer, now_ms) {
        tracing::warn!(
            client = %super::auth::Throttle::client(peer),
            failures = super::auth::LOGIN_FAILURES,
            window = %crate::duration::format(board.throttle.window()),
            "the board refuses this client's sign-ins for a while: too many wrong tokens"
        );
    }
}

pub async fn page(State(b): State<Shared>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_SECURITY_POLICY,
            "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
        )],
        // Sign-out is offered where there is a sign-in (a board with a token).
        Html(
            PAGE.replace("__ORCH_CSRF__", &b.csrf)
                .replace(
                    "__ORCH_SIGNOUT__",
                    if b.token.is_some() { "" } else { "hidden" },
                )
                .replace("__ORCH_BUDGET__", &budget_attr(&b.l.config.worker)),
        ),
    )
}

/// The budgets the board loaded (`worker.max_cost_usd`, `worker.max_tokens`; `null` unset),
/// as JSON in an HTML attribute: the worker view shows its spend against them.
fn budget_attr(w: &crate::config::WorkerConfig) -> String {
    serde_json::json!({ "max_cost_usd": w.max_cost_usd, "max_tokens": w.max_tokens })
        .to_string()
        .replace('&', "&amp;")
        .replace('"', "&quot;")
}

/// The filters `/api/workers` and `/api/board` take, as `orch status` takes them.
#[derive(Debug, Default, Deserialize)]
pub struct Filter {
    repo: Option<String>,
    wave: Option<String>,
    #[serde(default)]
    all: bool,
    limit: Option<u32>,
    after: Option<String>,
}

impl Filter {
    fn args(&self) -> HistoryArgs {
        HistoryArgs {
            all: self.all,
            since: None,
            wave: self.wave.clone().filter(|s| !s.is_empty()),
            repo: self.repo.clone().filter(|s| !s.is_empty()),
            limit: self.limit,
            after: self.after.clone().filter(|s| !s.is_empty()),
        }
    }
}

/// `orch status --json`, for the same filters.
pub fn status_of(board: &super::Board, args: &HistoryArgs) -> Result<StatusView, Failure> {
    Ok(crate::cli::workers::status_view(&board.l, args)?
        .map(|(v, _)| v)
        .unwrap_or_else(crate::cli::workers::empty_status))
}

/// `orch wave status --json` of every wave orch has run.
pub fn waves_of(board: &super::Board) -> Result<Vec<WaveStatusView>, Failure> {
    Ok(crate::app::wave::statuses(&board.l)?
        .iter()
        .map(WaveStatusView::of)
        .collect())
}

/// The attention board for `args`.
pub fn board_of(
    board: &super::Board,
    args: &HistoryArgs,
) -> Result<(StatusView, BoardView), Failure> {
    let status = status_of(board, args)?;
    let waves = waves_of(board)?;
    let view = board_view(board, &status, &waves);
    Ok((status, view))
}

/// The attention board of `status` and `waves`.
fn board_view(board: &super::Board, status: &StatusView, waves: &[WaveStatusView]) -> BoardView {
    let g = &board.l.config.graph;
    board::build(status, waves, |a, b| {
        a == b || (g.contains(a) && g.contains(b) && g.conflicts(a, b))
    })
}

pub async fn workers(State(b): State<Shared>, Query(f): Query<Filter>) -> Answer<StatusView> {
    let args = f.args();
    Ok(Json(blocking(&b, move |b| status_of(b, &args)).await?))
}

pub async fn worker(
    State(b): State<Shared>,
    Path(id): Path<String>,
) -> Answer<crate::cli::view::workers::SessionView> {
    let view = blocking(&b, move |b| {
        crate::cli::workers::session_view(&b.l, &id)?
            .map(|(v, _)| v)
            .ok_or_else(|| Failure::no(format!("no worker {}", crate::text::escape(&id))))
    })
    .await?;
    Ok(Json(view))
}

/// How much of a worker's log one answer reads at most (the page asks again at once for
/// the rest: `more`).
const LOG_BUDGET: u64 = 256 * 1024;
/// Where a first look at a worker's log starts: about its last this many bytes.
const LOG_TAIL: u64 = 64 * 1024;

#[derive(Deserialize)]
pub struct LogQuery {
    after: Option<String>,
}

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

impl crate::cli::view::View for LogAnswer {
    const NAME: &'static str = "board-log";
}

/// The log of worker `id` from `cursor` (its tail without one): the same timeline and the
/// same lines as `orch logs`, capped at [`LOG_BUDGET`] read.
pub fn log_of(
    board: &super::Board,
    id: &str,
    cursor: Option<crate::app::logs::Cursor>,
) -> Result<LogAnswer, Failure> {
    use crate::app::logs::{self, Entry, Timeline};
    let no = || Failure::no(format!("no worker {}", crate::text::escape(id)));
    let mut store = board.l.existing_store()?.ok_or_else(no)?;
    // Read before the timeline: once seen finished, the timeline read after it holds
    // everything (as `orch logs -f` ends).
    let w = store.worker(id)?.ok_or_else(no)?;
    let dir = &board.l.state_dir;
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
            crate::cli::logs::entry_lines(e, false)
                .into_iter()
                .map(move |text| LogLine {
                    orch,
                    text: board.scrub(&text),
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

pub async fn worker_log(
    State(b): State<Shared>,
    Path(id): Path<String>,
    Query(q): Query<LogQuery>,
) -> Answer<LogAnswer> {
    let cursor = match q.after.as_deref().filter(|s| !s.is_empty()) {
        None => None,
        Some(text) => Some(crate::app::logs::Cursor::decode(text).ok_or_else(|| {
            ApiError(Failure::bad_input(format!(
                "after: {} is not a cursor this board gave (leave it out for the tail)",
                crate::text::escape(text)
            )))
        })?),
    };
    Ok(Json(blocking(&b, move |b| log_of(b, &id, cursor)).await?))
}

pub async fn board(State(b): State<Shared>, Query(f): Query<Filter>) -> Answer<BoardView> {
    let args = f.args();
    Ok(Json(
        blocking(&b, move |b| Ok(board_of(b, &args)?.1)).await?,
    ))
}

/// `/api/graph`: `orch graph --format json` with the chain locks and fatal holds on it.
#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct GraphAnswer {
    /// `orch graph --format json`.
    graph: GraphView,
    /// The chain locks held, as `orch status --json` shows them.
    locks: Vec<LockView>,
    /// The fatal holds in force.
    fatal: Vec<FatalView>,
    /// The base-branch CI of each repository as orch last saw it (for the workers downstream
    /// of it; the board asks no forge of its own), repositories never looked at left out.
    base_ci: Vec<BaseCiView>,
}

#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct BaseCiView {
    repo: String,
    branch: String,
    /// The base branch's head when looked at (`null`: no such branch on the forge).
    sha: Option<String>,
    /// `green`, `red`, `running`, … (`null`: no verdict yet).
    verdict: Option<String>,
    failed_jobs: Vec<String>,
    detail: Option<String>,
    #[schemars(extend("format" = "date-time"))]
    checked_at: String,
}

impl crate::cli::view::View for GraphAnswer {
    const NAME: &'static str = "board-graph";
}

#[derive(Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct FatalView {
    /// The repository whose chain is halted.
    repo: String,
    reason: String,
    by: String,
    /// The worker whose report raised it, if one did.
    worker_id: Option<String>,
    #[schemars(extend("format" = "date-time"))]
    at: String,
}

pub async fn graph(State(b): State<Shared>) -> Answer<GraphAnswer> {
    let answer = blocking(&b, |b| {
        let status = status_of(b, &HistoryArgs::default())?;
        let names: Vec<String> = b.l.config.graph.names().to_vec();
        let (fatal, base_ci) = match b.l.existing_store()? {
            Some(mut s) => s.read(|tx| {
                let base = names
                    .iter()
                    .filter_map(|n| crate::store::upstream::get(tx, n).transpose())
                    .collect::<Result<Vec<_>, _>>()?;
                Ok((crate::store::fatal::all(tx)?, base))
            })?,
            None => (Vec::new(), Vec::new()),
        };
        Ok(GraphAnswer {
            graph: GraphView::of(&b.l.config.graph),
            locks: status.locks,
            fatal: fatal
                .into_iter()
                .map(|h| FatalView {
                    repo: h.repo,
                    reason: h.reason,
                    by: h.by,
                    worker_id: h.worker_id,
                    at: crate::store::fmt_ms(h.at_ms),
                })
                .collect(),
            base_ci: base_ci
                .into_iter()
                .map(|r| BaseCiView {
                    repo: r.repo,
                    branch: r.branch,
                    sha: r.sha,
                    verdict: r.verdict,
                    failed_jobs: r.failed_jobs,
                    detail: r.detail,
                    checked_at: crate::store::fmt_ms(r.checked_ms),
                })
                .collect(),
        })
    })
    .await?;
    Ok(Json(answer))
}

/// Every wave with its Gantt chart, what its waiting tasks wait for and its critical path.
pub fn wave_boards(board: &super::Board) -> Result<Vec<WaveBoardView>, Failure> {
    let waves = crate::app::wave::statuses(&board.l)?;
    let Some(mut store) = board.l.existing_store()?.filter(|_| !waves.is_empty()) else {
        return Ok(Vec::new());
    };
    let now = crate::store::now_ms();
    let locks: Vec<LockView> = store
        .locks()?
        .iter()
        .map(|l| LockView::of(l, now))
        .collect();
    let agent = board.l.config.worker.agent.as_str();
    let limit = store
        .read(|tx| crate::store::usage::agent_limit(tx, agent, now))?
        .map(|(until, detail)| (crate::store::fmt_ms(until), detail));
    let g = &board.l.config.graph;
    let around = super::waves::Around {
        locks: &locks,
        conflicts: |a: &str, b: &str| {
            a == b || (g.contains(a) && g.contains(b) && g.conflicts(a, b))
        },
        limit,
        max_parallel: board.l.config.worker.max_parallel,
    };
    Ok(waves
        .iter()
        .map(|w| super::waves::build(w, &around))
        .collect())
}

pub async fn waves(State(b): State<Shared>) -> Answer<super::waves::WavesAnswer> {
    Ok(Json(super::waves::WavesAnswer(
        blocking(&b, wave_boards).await?,
    )))
}

/// `orch nodes --json`'s view, built by the command's own function.
pub fn nodes_of(board: &super::Board) -> Result<NodesView, Failure> {
    crate::cli::nodes::nodes_view(&board.l)
}

pub async fn nodes(State(b): State<Shared>) -> Answer<NodesView> {
    Ok(Json(blocking(&b, nodes_of).await?))
}

#[derive(Deserialize)]
pub struct Since {
    since: Option<String>,
}

pub async fn alerts(
    State(b): State<Shared>,
    Query(q): Query<Since>,
) -> Answer<crate::cli::view::workers::AlertsView> {
    let since = match q.since.as_deref() {
        None | Some("") => std::time::Duration::from_secs(24 * 3600),
        Some(s) => crate::cli::parse_duration(s)
            .map_err(|e| ApiError(Failure::bad_input(format!("since: {e}"))))?,
    };
    Ok(Json(
        blocking(&b, move |b| crate::cli::workers::alerts_view(&b.l, since)).await?,
    ))
}

pub async fn metrics(State(b): State<Shared>) -> Result<Response, ApiError> {
    let text = blocking(&b, |b| {
        // The store is read again only after a change the watcher saw (at most one watcher
        // period behind a commit): a scrape of a quiet store costs no query.
        let version = *b.changes.borrow();
        let mut last = b.metrics_read.lock().unwrap_or_else(|e| e.into_inner());
        let fresh = last
            .as_ref()
            .is_some_and(|r| r.version == version && r.at.elapsed() < super::metrics::REUSE);
        if !fresh {
            let figures = match b.l.existing_store()? {
                Some(mut s) => s.read(crate::store::board::figures)?,
                None => Default::default(),
            };
            let status = status_of(b, &HistoryArgs::default())?;
            let waves = crate::app::wave::statuses(&b.l)?;
            let views: Vec<WaveStatusView> = waves.iter().map(WaveStatusView::of).collect();
            *last = Some(super::metrics::Read {
                version,
                at: std::time::Instant::now(),
                figures,
                board: board_view(b, &status, &views),
                waves: waves.iter().map(super::metrics::WaveFigures::of).collect(),
            });
        }
        let Some(r) = last.as_ref() else {
            return Err(Failure::unavailable("the metrics were not read"));
        };
        Ok(super::metrics::render(
            &r.figures,
            &r.board,
            &r.waves,
            b.l.config.worker.agent.as_str(),
            crate::store::now_ms(),
        ))
    })
    .await?;
    Ok((
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response())
}

/// Ready when the store can be read (or orch has not run here yet: nothing to read).
pub async fn ready(State(b): State<Shared>) -> Response {
    match blocking(&b, |b| {
        if let Some(mut s) = b.l.existing_store()? {
            s.read(crate::store::board::data_version)?;
        }
        Ok(())
    })
    .await
    {
        Ok(()) => "ready\n".into_response(),
        Err(e) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("{}\n", e.0.message),
        )
            .into_response(),
    }
}

pub async fn login_page(State(b): State<Shared>) -> Html<String> {
    // Beyond loopback the sign-in cookie is Secure: a browser keeps it only over HTTPS.
    let https_note = if b.guarded {
        "<p>Its sign-in is kept over HTTPS only: reach the board through a TLS proxy (an <code>http://</code> address beyond this machine would carry the token in the clear).</p>"
    } else {
        ""
    };
    Html(format!(
        "<!doctype html><meta charset=utf-8><meta name=viewport content='width=device-width'><title>orch board: sign in</title><link rel=icon href='data:,'>\
         <form method=post action=/login style='font:16px system-ui;max-width:24em;margin:4em auto'>\
         <p>This board needs its token (the variable named by <code>serve.token_env</code>).</p>{https_note}\
         <input type=password name=token autocomplete=current-password style='width:100%;font:inherit' autofocus> \
         <button style='font:inherit;margin-top:.5em'>Sign in</button></form>"
    ))
}

#[derive(Deserialize)]
pub struct Login {
    token: String,
}

/// Signs the page in: a session of its own in the cookie (never the token), for
/// [`super::auth::SESSION_TTL_MS`] or until `/logout`.
pub async fn login(
    State(b): State<Shared>,
    axum::extract::ConnectInfo(peer): axum::extract::ConnectInfo<std::net::SocketAddr>,
    headers: axum::http::HeaderMap,
    axum::Form(f): axum::Form<Login>,
) -> Response {
    let right = b
        .token
        .as_ref()
        .is_some_and(|t| super::auth::matches(t, Some(f.token.trim())));
    if !right {
        // (A board without a token has no sign-in to guess.)
        if b.token.is_some() {
            wrong_token(&b, peer.ip(), crate::store::now_ms());
        }
        return (StatusCode::UNAUTHORIZED, "wrong token\n").into_response();
    }
    b.throttle.succeeded(peer.ip());
    let session = match b.sessions.start(crate::store::now_ms()) {
        Ok(s) => s,
        Err(e) => return (StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")).into_response(),
    };
    (
        StatusCode::SEE_OTHER,
        [
            (header::LOCATION, "/".to_string()),
            (
                header::SET_COOKIE,
                format!(
                    "{}{session}; {}; Max-Age={}",
                    super::auth::COOKIE,
                    super::auth::cookie_flags(b.guarded, &headers),
                    super::auth::SESSION_TTL_MS / 1000
                ),
            ),
        ],
    )
        .into_response()
}

/// Ends the page's session (its open event streams end with it) and clears its cookie.
pub async fn logout(State(b): State<Shared>, headers: axum::http::HeaderMap) -> Response {
    if let Some(session) = super::auth::session_of(&headers) {
        b.sessions.end(&session);
    }
    (
        StatusCode::SEE_OTHER,
        [
            (header::LOCATION, "/login".to_string()),
            (
                header::SET_COOKIE,
                format!(
                    "{}; {}; Max-Age=0",
                    super::auth::COOKIE,
                    super::auth::cookie_flags(b.guarded, &headers)
                ),
            ),
        ],
    )
        .into_response()
}
