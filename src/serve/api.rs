//! The board's read-only JSON API: each answer is the view the matching command prints with
//! `--json` (built by the same function), so the API says what the CLI says.

use super::Shared;
use crate::operator::board::BoardView;
use crate::operator::graph::GraphAnswer;
use crate::operator::logs::LogAnswer;
use crate::operator::view::nodes::NodesView;
use crate::operator::view::wave::WaveStatusView;
use crate::operator::view::workers::StatusView;
use crate::operator::waves::WavesAnswer;
use crate::operator::workers::History;
use crate::operator::{self, Error};
use axum::Json;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Response};
use serde::Deserialize;

/// The page: one file, embedded in the binary (nothing is fetched at run time).
const PAGE: &str = include_str!("page.html");

/// The operator API's error as an HTTP answer: bad input 400, what is not there and a "no"
/// 404, an unavailable system 503.
pub struct ApiError(Error);

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        ApiError(e)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = match &self.0 {
            Error::BadInput(_) => StatusCode::BAD_REQUEST,
            Error::NotFound(_) | Error::No(_) => StatusCode::NOT_FOUND,
            Error::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        };
        (
            status,
            Json(serde_json::json!({ "error": self.0.to_string() })),
        )
            .into_response()
    }
}

type Answer<T> = Result<Json<T>, ApiError>;

/// Runs a store read off the async threads (SQLite blocks).
async fn blocking<T: Send + 'static>(
    board: &Shared,
    f: impl FnOnce(&super::Board) -> Result<T, Error> + Send + 'static,
) -> Result<T, ApiError> {
    let b = board.clone();
    tokio::task::spawn_blocking(move || f(&b))
        .await
        .map_err(|e| {
            ApiError(Error::unavailable(format!(
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
    fn args(&self) -> History {
        History {
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
pub fn status_of(board: &super::Board, args: &History) -> Result<StatusView, Error> {
    operator::workers::status_or_empty(&board.l, args)
}

/// The attention board for `args`.
pub fn board_of(board: &super::Board, args: &History) -> Result<(StatusView, BoardView), Error> {
    operator::board::of(&board.l, args)
}

pub async fn workers(State(b): State<Shared>, Query(f): Query<Filter>) -> Answer<StatusView> {
    let args = f.args();
    Ok(Json(blocking(&b, move |b| status_of(b, &args)).await?))
}

pub async fn worker(
    State(b): State<Shared>,
    Path(id): Path<String>,
) -> Answer<crate::operator::view::workers::SessionView> {
    let view = blocking(&b, move |b| {
        operator::workers::session_view(&b.l, &id)?
            .map(|(v, _)| v)
            .ok_or_else(|| Error::not_found(format!("no worker {}", crate::text::escape(&id))))
    })
    .await?;
    Ok(Json(view))
}

#[derive(Deserialize)]
pub struct LogQuery {
    after: Option<String>,
}

/// `/api/workers/<id>/log`: the worker's timeline as `orch logs` prints it.
pub async fn worker_log(
    State(b): State<Shared>,
    Path(id): Path<String>,
    Query(q): Query<LogQuery>,
) -> Answer<LogAnswer> {
    let cursor = match q.after.as_deref().filter(|s| !s.is_empty()) {
        None => None,
        Some(text) => Some(crate::app::logs::Cursor::decode(text).ok_or_else(|| {
            ApiError(Error::bad_input(format!(
                "after: {} is not a cursor this board gave (leave it out for the tail)",
                crate::text::escape(text)
            )))
        })?),
    };
    Ok(Json(
        blocking(&b, move |b| {
            operator::logs::log_of(&b.l, &id, cursor, &|t| b.scrub(t))
        })
        .await?,
    ))
}

pub async fn board(State(b): State<Shared>, Query(f): Query<Filter>) -> Answer<BoardView> {
    let args = f.args();
    Ok(Json(
        blocking(&b, move |b| Ok(board_of(b, &args)?.1)).await?,
    ))
}

pub async fn graph(State(b): State<Shared>) -> Answer<GraphAnswer> {
    Ok(Json(blocking(&b, |b| operator::graph::of(&b.l)).await?))
}

pub async fn waves(State(b): State<Shared>) -> Answer<WavesAnswer> {
    Ok(Json(WavesAnswer(
        blocking(&b, |b| operator::waves::boards(&b.l)).await?,
    )))
}

/// `orch nodes --json`'s view, built by the command's own function.
pub fn nodes_of(board: &super::Board) -> Result<NodesView, Error> {
    operator::nodes::nodes_view(&board.l)
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
) -> Answer<crate::operator::view::workers::AlertsView> {
    let since = match q.since.as_deref() {
        None | Some("") => std::time::Duration::from_secs(24 * 3600),
        Some(s) => crate::duration::parse_decimal(s)
            .map_err(|e| ApiError(Error::bad_input(format!("since: {e}"))))?,
    };
    Ok(Json(
        blocking(&b, move |b| operator::alerts::alerts_view(&b.l, since)).await?,
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
            let status = status_of(b, &History::default())?;
            let waves = crate::app::wave::statuses(&b.l)?;
            let views: Vec<WaveStatusView> = waves.iter().map(WaveStatusView::of).collect();
            *last = Some(super::metrics::Read {
                version,
                at: std::time::Instant::now(),
                figures,
                board: operator::board::view(&b.l, &status, &views),
                waves: waves.iter().map(super::metrics::WaveFigures::of).collect(),
            });
        }
        let Some(r) = last.as_ref() else {
            return Err(Error::unavailable("the metrics were not read"));
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
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, format!("{}\n", e.0)).into_response(),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The board says each kind of the operator API's error as its own HTTP status (not by
    /// way of an exit code), with the message as the answer's `error`.
    #[test]
    fn each_kind_of_error_is_its_http_status() {
        let cases = [
            (Error::bad_input("bad"), StatusCode::BAD_REQUEST),
            (Error::not_found("gone"), StatusCode::NOT_FOUND),
            (Error::no("no"), StatusCode::NOT_FOUND),
            (Error::unavailable("later"), StatusCode::SERVICE_UNAVAILABLE),
        ];
        for (e, status) in cases {
            let message = e.to_string();
            let resp = ApiError::from(e).into_response();
            assert_eq!(resp.status(), status, "{message}");
        }
    }
}
