//! Actions from the board, through the operator's own code paths (the functions the CLI
//! commands call). Each needs the board's token, the page's CSRF token in `X-Orch-Csrf` and,
//! when the browser sends one, an `Origin` of this board; the worker's history names who did it
//! (`board:<by>`).

use super::Shared;
use super::api::ApiError;
use crate::cli::Failure;
use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

/// A fresh random token per process, put in the page: a page of another site cannot read it.
pub fn new_csrf() -> String {
    let mut bytes = [0u8; 16];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        let _ = std::io::Read::read_exact(&mut f, &mut bytes);
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Why an action is refused (403), or `None`.
fn refusal(board: &super::Board, headers: &HeaderMap) -> Option<&'static str> {
    let Some(token) = &board.token else {
        return Some("the board is read-only: no serve.token_env in repos.yaml");
    };
    if !super::auth::matches(token, super::auth::presented(headers).as_deref()) {
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

#[derive(Debug, Default, Deserialize)]
pub struct CancelBody {
    /// Who asks, for the audit trail (the worker's history says `board:<by>`).
    by: Option<String>,
    reason: Option<String>,
}

/// `POST /api/workers/<id>/cancel`: `orch cancel <id>` (same code path).
pub async fn cancel(
    State(b): State<Shared>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Option<Json<CancelBody>>,
) -> Response {
    if let Some(why) = refusal(&b, &headers) {
        return (
            StatusCode::FORBIDDEN,
            Json(serde_json::json!({ "error": why })),
        )
            .into_response();
    }
    let body = body.map(|Json(b)| b).unwrap_or_default();
    let by = format!(
        "board:{}",
        body.by
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .unwrap_or("operator")
    );
    let bb = b.clone();
    let answer = tokio::task::spawn_blocking(move || {
        crate::cli::workers::cancel_view(&bb.l, &id, body.reason, by)
    })
    .await
    .map_err(|e| Failure::unavailable(format!("the board's cancel failed: {e}")));
    match answer.and_then(|r| r) {
        Ok(view) => Json(view).into_response(),
        Err(f) => ApiError::from(f).into_response(),
    }
}
