//! Actions from the board, through the operator's own code paths (the functions the CLI
//! commands call). Each needs the board's token, the page's CSRF token in `X-Orch-Csrf` and,
//! when the browser sends one, an `Origin` of this board; the worker's history names who did it
//! (`board:<by>`).

use super::Shared;
use super::api::ApiError;
use crate::operator::Error;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

/// Why an action is refused (403), or `None`.
fn refusal(board: &super::Board, headers: &HeaderMap) -> Option<&'static str> {
    let Some(token) = &board.token else {
        return Some("the board is read-only: no serve.token_env in repos.yaml");
    };
    if !super::auth::authorised(token, &board.sessions, headers, crate::store::now_ms()) {
        return Some(
            "actions need the board's token (Authorization: Bearer, or sign in at /login)",
        );
    }
    let csrf = headers.get("x-orch-csrf").and_then(|v| v.to_str().ok());
    if csrf != Some(board.csrf.as_str()) {
        return Some("the page's CSRF token is missing or wrong (reload the page)");
    }
    if let Some(origin) = headers.get(header::ORIGIN).and_then(|v| v.to_str().ok()) {
        let host = headers
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let bare = origin
            .strip_prefix("http://")
            .or_else(|| origin.strip_prefix("https://"))
            .unwrap_or("");
        if bare != host {
            return Some("the request comes from another site (Origin is not this board)");
        }
    }
    None
}

/// What an action's JSON body may say; each action reads the fields its command takes.
#[derive(Debug, Default, Deserialize)]
pub struct ActionBody {
    /// Who asks, for the audit trail (recorded as `board:<by>`).
    by: Option<String>,
    /// Why (cancel, release: required; hold: required).
    reason: Option<String>,
    /// What a respawned worker is told.
    note: Option<String>,
    /// The wave task to retry.
    task: Option<String>,
}

impl ActionBody {
    /// The audit name: `board:<by>` (`board:operator` when the page sent none).
    fn who(&self) -> String {
        format!(
            "board:{}",
            self.by
                .as_deref()
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .unwrap_or("operator")
        )
    }

    fn reason(&self) -> String {
        self.reason.as_deref().unwrap_or("").trim().to_string()
    }
}

/// Runs one action: refused (403) unless the token, the CSRF token and the Origin are right;
/// then `f` (the command's own work, off the async threads) answers with the command's
/// `--json` view, or its failure as the API's error. `ok` is the status of a view that says
/// the action did not happen (a hold blocked by a lock: 409).
async fn act<T: serde::Serialize + Send + 'static>(
    b: Shared,
    headers: HeaderMap,
    body: Option<Json<ActionBody>>,
    what: &'static str,
    f: impl FnOnce(&super::Board, ActionBody, String) -> Result<T, Error> + Send + 'static,
    ok: impl FnOnce(&T) -> StatusCode,
) -> Response {
    if let Some(why) = refusal(&b, &headers) {
        return (
            StatusCode::FORBIDDEN,
            Json(serde_json::json!({ "error": why })),
        )
            .into_response();
    }
    let body = body.map(|Json(b)| b).unwrap_or_default();
    let by = body.who();
    let answer = tokio::task::spawn_blocking(move || f(&b, body, by))
        .await
        .map_err(|e| Error::unavailable(format!("the board's {what} failed: {e}")));
    match answer.and_then(|r| r) {
        Ok(view) => (ok(&view), Json(view)).into_response(),
        Err(f) => ApiError::from(f).into_response(),
    }
}

fn fine<T>(_: &T) -> StatusCode {
    StatusCode::OK
}

type Body = Option<Json<ActionBody>>;

/// `POST /api/workers/<id>/cancel`: `orch cancel <id>` (same code path).
pub async fn cancel(
    State(b): State<Shared>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    act(
        b,
        headers,
        body,
        "cancel",
        move |b, body, by| {
            let reason = Some(body.reason()).filter(|r| !r.is_empty());
            crate::operator::actions::cancel_view(&b.l, &id, reason, by)
        },
        fine,
    )
    .await
}

/// `POST /api/workers/<id>/respawn`: `orch respawn <id> --note …` (a FAILED worker's task
/// goes to a new worker; a BLOCKED or PAUSED one goes on).
pub async fn respawn(
    State(b): State<Shared>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    act(
        b,
        headers,
        body,
        "respawn",
        move |b, body, by| {
            let note = body.note.unwrap_or_default();
            crate::operator::actions::respawn_view(&b.l, &id, note.trim(), by)
        },
        fine,
    )
    .await
}

/// `POST /api/workers/<id>/release`: `orch release <id> --force --reason …` (the reason is
/// required, as the command's).
pub async fn release(
    State(b): State<Shared>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    act(
        b,
        headers,
        body,
        "release",
        move |b, body, by| crate::operator::actions::release_view(&b.l, &id, &body.reason(), by),
        fine,
    )
    .await
}

/// `POST /api/repos/<repo>/hold`: `orch hold <repo> --reason …`; 409 with the view (its
/// blockers) when a lock on the chain is in the way, as the command exits 1.
pub async fn hold(
    State(b): State<Shared>,
    Path(repo): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    act(
        b,
        headers,
        body,
        "hold",
        move |b, body, by| {
            crate::operator::holds::hold_view(
                &b.l.config,
                &b.l.state_dir,
                &repo,
                &body.reason(),
                &by,
            )
        },
        |v| {
            if v.held {
                StatusCode::OK
            } else {
                StatusCode::CONFLICT
            }
        },
    )
    .await
}

/// `POST /api/repos/<repo>/unhold`: `orch unhold <repo>`.
pub async fn unhold(
    State(b): State<Shared>,
    Path(repo): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    act(
        b,
        headers,
        body,
        "unhold",
        move |b, _, by| {
            crate::operator::holds::unhold_view(&b.l.config, &b.l.state_dir, &repo, &by)
        },
        fine,
    )
    .await
}

/// `POST /api/waves/<name>/retry` with `{"task": …}`: `orch wave retry <name> <task>`.
pub async fn wave_retry(
    State(b): State<Shared>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    act(
        b,
        headers,
        body,
        "wave retry",
        move |b, body, by| {
            let task = body.task.as_deref().map(str::trim).unwrap_or("");
            if task.is_empty() {
                return Err(Error::bad_input(
                    "a wave retry names its task: {\"task\": \"<id>\"}",
                ));
            }
            crate::operator::actions::wave_retry_view(&b.l, &name, task, &by)
        },
        fine,
    )
    .await
}

/// `POST /api/waves/<name>/cancel`: `orch wave cancel <name>`.
pub async fn wave_cancel(
    State(b): State<Shared>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    act(
        b,
        headers,
        body,
        "wave cancel",
        move |b, _, by| crate::operator::actions::wave_cancel_view(&b.l, &name, by),
        fine,
    )
    .await
}
