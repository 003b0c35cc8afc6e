//! The transport: one GET with retries, and the classification of what went wrong into the
//! contract's error taxonomy (with the token scrubbed from every message).

use super::ForgejoForge;
use crate::forge::{BlockingKind, ForgeError};
use reqwest::header::{AUTHORIZATION, RETRY_AFTER};
use serde::de::DeserializeOwned;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Where a request is aimed, for error messages.
#[derive(Clone, Copy)]
pub(super) struct Target<'a> {
    /// `owner/name` when the request is about a repository.
    pub(super) repo: Option<&'a str>,
    /// A 404 is an answer (`Ok(None)`), not an error.
    pub(super) missing_ok: bool,
    /// What a 403 says the token needs (`None`: what CI reads need).
    pub(super) needs: Option<&'a str>,
}

/// What one GET brought back.
pub(super) enum Got {
    Body(String),
    /// A 404 from the application (a JSON error body: no such repository, run, job…).
    Missing(String),
    /// A 404 from the router: the route does not exist on this server (chi's plain-text
    /// `404 page not found`, not a JSON body).
    NoRoute,
}

/// Whether a 404 body is the router's (plain text) rather than the API's (JSON).
pub(super) fn is_route_404(body: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(body.trim())
        .map(|v| !v.is_object())
        .unwrap_or(true)
}

impl ForgejoForge {
    /// One GET with retries. `Ok(None)` only for a 404 when `target.missing_ok`.
    pub(super) async fn get(
        &self,
        path: &str,
        query: &[(&str, String)],
        target: Target<'_>,
    ) -> Result<Option<String>, ForgeError> {
        match self.fetch(path, query, target).await? {
            Got::Body(b) => Ok(Some(b)),
            Got::Missing(_) | Got::NoRoute if target.missing_ok => Ok(None),
            Got::Missing(body) => Err(self.classify(404, &format!("/api/v1{path}"), &body, target)),
            Got::NoRoute => Err(self.no_route(path)),
        }
    }

    /// The error for a route this server does not have.
    pub(super) fn no_route(&self, path: &str) -> ForgeError {
        ForgeError::Blocking {
            kind: BlockingKind::Other,
            message: format!(
                "this server has no API route GET /api/v1{path} (plain-text 404 from its router): is forge.url a Forgejo ≥ 8 server with Actions?"
            ),
        }
    }

    /// One GET with retries, telling an application 404 from a missing route.
    pub(super) async fn fetch(
        &self,
        path: &str,
        query: &[(&str, String)],
        target: Target<'_>,
    ) -> Result<Got, ForgeError> {
        let shown = format!("/api/v1{path}");
        let mut url = reqwest::Url::parse(&format!("{}{}", self.api, path)).map_err(|e| {
            ForgeError::Blocking {
                kind: BlockingKind::Other,
                message: format!("cannot build the URL for GET {shown}: {e}"),
            }
        })?;
        if !query.is_empty() {
            let mut pairs = url.query_pairs_mut();
            for (k, v) in query {
                pairs.append_pair(k, v);
            }
        }
        let mut retries = 0u32;
        let started = Instant::now();
        let deadline = self.patience.as_ref().map(|p| started + p.give_up_after);
        loop {
            self.requests.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(method = "GET", path = %shown, retry = retries, "forgejo request");
            let mut req = self.client.get(url.clone());
            if let Some(auth) = &self.auth {
                req = req.header(AUTHORIZATION, auth.clone());
            }
            // A waiting person's bound covers a server that accepts and never answers too.
            // The first attempt gets half of it, so a silent server is told about while
            // there is still time to retry.
            let attempt_timeout = match (&self.patience, deadline) {
                (Some(p), Some(d)) => {
                    let mut t = self
                        .request_timeout
                        .min(d.saturating_duration_since(Instant::now()));
                    if retries == 0 {
                        t = t.min(p.give_up_after / 2);
                    }
                    t.max(Duration::from_millis(50))
                }
                _ => self.request_timeout,
            };
            req = req.timeout(attempt_timeout);
            let mut wait = None;
            let failure = match req.send().await {
                Err(e) => self.describe_transport(&e, &shown, attempt_timeout),
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    // Any answer ends an outage: the next one is told again.
                    self.outage_told.store(false, Ordering::Relaxed);
                    match status {
                        200..=299 => match resp.text().await {
                            Ok(body) => return Ok(Got::Body(body)),
                            Err(e) => self.describe_transport(&e, &shown, attempt_timeout),
                        },
                        404 => {
                            let body = resp.text().await.unwrap_or_default();
                            return Ok(if is_route_404(&body) {
                                Got::NoRoute
                            } else {
                                Got::Missing(body)
                            });
                        }
                        429 | 500..=599 => {
                            wait = resp
                                .headers()
                                .get(RETRY_AFTER)
                                .and_then(|v| v.to_str().ok())
                                .and_then(|v| v.trim().parse::<u64>().ok())
                                .map(Duration::from_secs);
                            format!("GET {shown} answered HTTP {status}")
                        }
                        _ => {
                            let body = resp.text().await.unwrap_or_default();
                            return Err(self.classify(status, &shown, &body, target));
                        }
                    }
                }
            };
            let mut delay = self.retry.delay(retries);
            if let Some(w) = wait {
                delay = delay.max(w.min(self.retry.max));
            }
            let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
            if let (Some(p), Some(left)) = (&self.patience, left)
                && left > Duration::ZERO
                && retries < self.retry.max_retries
                && !self.outage_told.swap(true, Ordering::Relaxed)
            {
                (p.notice)(&self.scrub(&format!(
                    "forge {} is not answering ({failure}); retrying for up to {} (forge.give_up_after {})",
                    self.server,
                    crate::duration::format(whole_seconds(left)),
                    crate::duration::format(p.give_up_after),
                )));
            }
            let out_of_time = left.is_some_and(|l| l.is_zero());
            if retries >= self.retry.max_retries || out_of_time {
                tracing::debug!(path = %shown, retries, "forgejo request failed for good");
                let gave_up = match &self.patience {
                    Some(p) => format!(
                        "; gave up after {} (forge.give_up_after {})",
                        crate::duration::format(whole_seconds(started.elapsed())),
                        crate::duration::format(p.give_up_after)
                    ),
                    None => String::new(),
                };
                return Err(ForgeError::Transient {
                    message: self.scrub(&format!("forge {}: {failure}{gave_up}", self.server)),
                    attempts: retries,
                });
            }
            if let Some(left) = left {
                delay = delay.min(left);
            }
            tracing::debug!(path = %shown, ?delay, "transient forge error, will retry");
            tokio::time::sleep(delay).await;
            retries += 1;
        }
    }

    fn describe_transport(&self, e: &reqwest::Error, shown: &str, timeout: Duration) -> String {
        let mut causes = Vec::new();
        let mut src = std::error::Error::source(e);
        while let Some(s) = src {
            causes.push(s.to_string());
            src = s.source();
        }
        let cause = causes.last().cloned().unwrap_or_else(|| e.to_string());
        let text = if e.is_timeout() {
            format!(
                "GET {shown} timed out after {}",
                crate::duration::format(timeout)
            )
        } else if e.is_connect() {
            format!("cannot connect to the forge for GET {shown}: {cause}")
        } else {
            format!("GET {shown} failed: {cause}")
        };
        self.scrub(&text)
    }

    pub(super) fn classify(
        &self,
        status: u16,
        shown: &str,
        body: &str,
        target: Target<'_>,
    ) -> ForgeError {
        // Scrubbed before it is cut short: a token straddling the cut would otherwise survive
        // as all but its last characters.
        let server = server_message(&self.scrub(body))
            .map(|m| format!(" (server says: {m})"))
            .unwrap_or_default();
        let (kind, message) = match status {
            401 if self.token.is_some() => (
                BlockingKind::BadToken,
                "Forgejo rejected the token (401): check forge.token_file or the variable named by forge.token_env"
                    .to_string(),
            ),
            401 => (
                BlockingKind::BadToken,
                format!(
                    "Forgejo requires a token (401) for GET {shown}: set forge.token_file (or forge.token_env) to a read:repository token"
                ),
            ),
            403 => (
                BlockingKind::NoAccess,
                format!(
                    "Forgejo denied access (403) to {}: the token needs {}{server}",
                    target.repo.unwrap_or("the server"),
                    target
                        .needs
                        .unwrap_or("read:repository and read access to Actions")
                ),
            ),
            404 => (
                BlockingKind::NotFound,
                match target.repo {
                    Some(r) => format!(
                        "repository {r} not found, Actions disabled, or no access (404 on GET {shown})"
                    ),
                    None => format!(
                        "GET {shown} not found (404): is forge.url the root of a Forgejo server?"
                    ),
                },
            ),
            _ => (
                BlockingKind::Other,
                format!("Forgejo answered HTTP {status} to GET {shown}{server}"),
            ),
        };
        ForgeError::Blocking { kind, message }
    }

    pub(super) fn decode<T: DeserializeOwned>(
        &self,
        body: &str,
        path: &str,
    ) -> Result<T, ForgeError> {
        serde_json::from_str(body).map_err(|e| ForgeError::Malformed {
            message: self.scrub(&format!("GET /api/v1{path}: {e}")),
        })
    }

    pub(super) async fn get_json<T: DeserializeOwned>(
        &self,
        path: &str,
        query: &[(&str, String)],
        repo: &str,
    ) -> Result<T, ForgeError> {
        let target = Target {
            repo: Some(repo),
            missing_ok: false,
            needs: None,
        };
        let body = self.get(path, query, target).await?.unwrap_or_default();
        self.decode(&body, path)
    }
}

/// `d` rounded to whole seconds for a person to read (at least 1 s).
fn whole_seconds(d: Duration) -> Duration {
    Duration::from_secs(d.as_secs_f64().round().max(1.0) as u64)
}

/// The `message` of a Forgejo error body, or the start of a non-JSON body.
pub(super) fn server_message(body: &str) -> Option<String> {
    let body = body.trim();
    if body.is_empty() {
        return None;
    }
    let text = match serde_json::from_str::<serde_json::Value>(body) {
        Ok(v) => v.get("message")?.as_str()?.to_string(),
        Err(_) => body.to_string(),
    };
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.is_empty() {
        return None;
    }
    Some(match one_line.char_indices().nth(200) {
        Some((i, _)) => format!("{}…", &one_line[..i]),
        None => one_line,
    })
}
