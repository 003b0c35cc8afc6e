//! Who may reach the board: loopback by default; beyond loopback only with the bearer token
//! named by `serve.token_env` (the token is never logged, echoed or put in a page).

use crate::secret::Secret;
use std::net::SocketAddr;

/// The board's token, read once from the variable `serve.token_env` names.
pub fn read_token(var: Option<&str>) -> Result<Option<Secret>, String> {
    let Some(var) = var else {
        return Ok(None);
    };
    match std::env::var(var) {
        Ok(v) if !v.trim().is_empty() => Ok(Some(Secret::new(v.trim().to_string()))),
        _ => Err(format!(
            "serve.token_env names {var}, but {var} is not set (or empty): export the board's token in it"
        )),
    }
}

/// A listen address beyond loopback is refused without a token: the board shows every
/// worker's task and what it spent.
pub fn check_listen(addr: &SocketAddr, token: Option<&Secret>) -> Result<(), String> {
    if addr.ip().is_loopback() || token.is_some() {
        return Ok(());
    }
    Err(format!(
        "--listen {addr} is not a loopback address: the board would be open to the network. Set serve.token_env in repos.yaml to the name of a variable holding a bearer token (or listen on 127.0.0.1)"
    ))
}

/// The bearer token a request presents: `Authorization: Bearer <t>`, or the page's login
/// cookie (an EventSource cannot set headers).
pub fn presented(headers: &axum::http::HeaderMap) -> Option<String> {
    if let Some(v) = headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        && let Some(t) = v.strip_prefix("Bearer ")
    {
        return Some(t.trim().to_string());
    }
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|kv| kv.trim().strip_prefix(COOKIE).map(str::to_string))
}

/// The login cookie's name and `=`.
pub const COOKIE: &str = "orch_board=";

/// `presented` is the token, compared in constant time.
pub fn matches(token: &Secret, presented: Option<&str>) -> bool {
    let Some(p) = presented else {
        return false;
    };
    let (a, b) = (token.expose().as_bytes(), p.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn beyond_loopback_needs_a_token() {
        let lo: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let lo6: SocketAddr = "[::1]:0".parse().unwrap();
        let any: SocketAddr = "0.0.0.0:7878".parse().unwrap();
        assert!(check_listen(&lo, None).is_ok());
        assert!(check_listen(&lo6, None).is_ok());
        let e = check_listen(&any, None).unwrap_err();
        assert!(e.contains("serve.token_env"), "{e}");
        let t = Secret::new("s3cret-token".into());
        assert!(check_listen(&any, Some(&t)).is_ok());
        assert!(matches(&t, Some("s3cret-token")));
        assert!(!matches(&t, Some("s3cret-tokeN")));
        assert!(!matches(&t, Some("s3cret")));
        assert!(!matches(&t, None));
    }

    #[test]
    fn the_token_comes_from_a_header_or_the_login_cookie() {
        let mut h = axum::http::HeaderMap::new();
        assert_eq!(presented(&h), None);
        h.insert("cookie", "a=b; orch_board=tok".parse().unwrap());
        assert_eq!(presented(&h).as_deref(), Some("tok"));
        h.insert("authorization", "Bearer hdr".parse().unwrap());
        assert_eq!(presented(&h).as_deref(), Some("hdr"));
    }
}
