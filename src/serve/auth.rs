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
/// worker's task and what it spent. So is any address when workers run on this host
/// isolated from orch (`worker.users`, `worker.sandbox`): they reach loopback too, and the
/// board would show them what their isolation hides (other workers' tasks and logs).
pub fn check_listen(
    addr: &SocketAddr,
    token: Option<&Secret>,
    isolated_workers: bool,
) -> Result<(), String> {
    if token.is_some() {
        return Ok(());
    }
    if isolated_workers {
        return Err(format!(
            "worker.users or worker.sandbox is set: workers on this host reach {addr} too, and the board would show them every other worker's task and log. Set serve.token_env in repos.yaml to the name of a variable holding a bearer token"
        ));
    }
    if addr.ip().is_loopback() {
        return Ok(());
    }
    Err(format!(
        "--listen {addr} is not a loopback address: the board would be open to the network. Set serve.token_env in repos.yaml to the name of a variable holding a bearer token (or listen on 127.0.0.1)"
    ))
}

/// Whether `host` (a request's `Host` header) names this loopback board: `localhost` or a
/// loopback address, any port. A page of another site whose name was rebound to 127.0.0.1
/// (DNS rebinding) sends its own name and is refused.
pub fn loopback_host(host: Option<&str>) -> bool {
    let Some(host) = host else {
        return false;
    };
    // `[::1]:7878`, `127.0.0.1:7878`, `localhost`, `localhost.:7878`.
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or_default(),
        None => host.rsplit_once(':').map_or(host, |(n, _)| n),
    };
    let name = name.trim_end_matches('.').to_ascii_lowercase();
    name == "localhost"
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The bearer token a request presents: `Authorization: Bearer <t>`.
pub fn presented(headers: &axum::http::HeaderMap) -> Option<String> {
    headers
        .get(axum::http::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(|t| t.trim().to_string())
}

/// The login session a request presents: the page's cookie (an EventSource cannot set
/// headers).
pub fn session_of(headers: &axum::http::HeaderMap) -> Option<String> {
    headers
        .get_all(axum::http::header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|kv| kv.trim().strip_prefix(COOKIE).map(str::to_string))
}

/// Whether a request shows the token, or a live session signed in with it.
pub fn authorised(
    token: &Secret,
    sessions: &Sessions,
    headers: &axum::http::HeaderMap,
    now_ms: i64,
) -> bool {
    matches(token, presented(headers).as_deref())
        || session_of(headers).is_some_and(|s| sessions.valid(&s, now_ms))
}

/// The login cookie's name and `=`.
pub const COOKIE: &str = "orch_board=";

/// How long a sign-in lasts.
pub const SESSION_TTL_MS: i64 = 12 * 3600 * 1000;

/// The board's sign-ins: a random id per login, kept in this process alone, so the cookie
/// never carries the token itself (a cookie that leaks is worth one session, for
/// [`SESSION_TTL_MS`] at most, and ends with the process or a sign-out). An event stream
/// opened with a session ends when its session does ([`Sessions::ended`]).
pub struct Sessions {
    live: std::sync::Mutex<std::collections::HashMap<String, i64>>,
    /// Bumped at every sign-out: the streams opened with a session look at theirs again.
    ended: tokio::sync::watch::Sender<u64>,
}

impl Default for Sessions {
    fn default() -> Self {
        Sessions {
            live: Default::default(),
            ended: tokio::sync::watch::Sender::new(0),
        }
    }
}

/// `n` random bytes as hex, from the kernel; an error rather than a guessable value.
pub fn random_hex(n: usize) -> Result<String, String> {
    let mut bytes = vec![0u8; n];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes))
        .map_err(|e| format!("cannot read /dev/urandom for a random id: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

impl Sessions {
    /// A new session id, valid until `now_ms` + [`SESSION_TTL_MS`]; an error when the kernel
    /// gives no randomness (never a predictable id).
    pub fn start(&self, now_ms: i64) -> Result<String, String> {
        let id = random_hex(32)?;
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        live.retain(|_, until| *until > now_ms);
        live.insert(id.clone(), now_ms + SESSION_TTL_MS);
        Ok(id)
    }

    /// Until when `id` is valid (ms), if it is a live session.
    pub fn until(&self, id: &str, now_ms: i64) -> Option<i64> {
        let live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        // A map lookup by the id: its time depends on the id's hash, not on how much of a
        // live id a guess shares.
        live.get(id).copied().filter(|until| *until > now_ms)
    }

    /// Whether `id` is a live session.
    pub fn valid(&self, id: &str, now_ms: i64) -> bool {
        self.until(id, now_ms).is_some()
    }

    /// Ends session `id` (sign-out).
    pub fn end(&self, id: &str) {
        let mut live = self.live.lock().unwrap_or_else(|p| p.into_inner());
        live.remove(id);
        drop(live);
        self.ended.send_modify(|n| *n += 1);
    }

    /// Changes at every sign-out.
    pub fn ended(&self) -> tokio::sync::watch::Receiver<u64> {
        self.ended.subscribe()
    }
}

/// The session a request is let in by when it is its only credential (no bearer token),
/// on a board that lets nobody in without one: a stream opened so ends with the session.
pub fn only_session(
    token: &Secret,
    sessions: &Sessions,
    headers: &axum::http::HeaderMap,
    now_ms: i64,
) -> Option<String> {
    if matches(token, presented(headers).as_deref()) {
        return None;
    }
    session_of(headers).filter(|s| sessions.valid(s, now_ms))
}

/// Whether the browser reached the board over HTTPS (a TLS proxy in front says so in
/// `X-Forwarded-Proto`; orch serve itself speaks plain HTTP).
pub fn over_https(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("https"))
}

/// The login cookie's attributes: never readable by scripts (`HttpOnly`), never sent by
/// another site's request (`SameSite=Strict`), and `Secure` (HTTPS only) beyond loopback or
/// behind a TLS proxy, where it crosses a network.
pub fn cookie_flags(guarded: bool, headers: &axum::http::HeaderMap) -> &'static str {
    if guarded || over_https(headers) {
        "HttpOnly; SameSite=Strict; Secure; Path=/"
    } else {
        "HttpOnly; SameSite=Strict; Path=/"
    }
}

/// Wrong tokens a client may present within the window before the board refuses its
/// sign-ins for a while (429 with `Retry-After`).
pub const LOGIN_FAILURES: usize = 5;

const LOGIN_WINDOW_MS: i64 = 60_000;

/// At most this many clients' failures are remembered (the oldest forgotten first).
const TRACKED: usize = 4096;

/// Failed sign-ins per client address: a wrong token at `/login` or in `Authorization:
/// Bearer`. [`LOGIN_FAILURES`] of them within the window and every further attempt from that
/// address is refused, a right token too (a guess that succeeds must not be told apart),
/// until the oldest of them leaves the window; a signed-in session goes on meanwhile. An
/// IPv6 client is its /64 (what one host is usually given). Nothing of what was presented is
/// kept or logged.
pub struct Throttle {
    window_ms: i64,
    /// Per client, the times (ms) of its last failures, at most [`LOGIN_FAILURES`].
    failures: std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, Vec<i64>>>,
}

impl Throttle {
    pub fn new(window: std::time::Duration) -> Throttle {
        Throttle {
            window_ms: i64::try_from(window.as_millis()).unwrap_or(i64::MAX),
            failures: Default::default(),
        }
    }

    /// The window of [`LOGIN_FAILURES`]: one minute (a test build may shorten it:
    /// `fault::login_window`).
    pub fn from_env() -> Result<Throttle, String> {
        match crate::fault::login_window() {
            Some(window) => window.map(Throttle::new),
            None => Ok(Throttle::new(std::time::Duration::from_millis(
                LOGIN_WINDOW_MS as u64,
            ))),
        }
    }

    pub fn window(&self) -> std::time::Duration {
        std::time::Duration::from_millis(self.window_ms as u64)
    }

    /// The address failures are counted under: an IPv4 client (also as an IPv4-mapped IPv6
    /// address), or an IPv6 client's /64.
    pub fn client(ip: std::net::IpAddr) -> std::net::IpAddr {
        match ip.to_canonical() {
            std::net::IpAddr::V6(v6) => {
                let net = u128::from(v6) & !((1u128 << 64) - 1);
                std::net::IpAddr::V6(std::net::Ipv6Addr::from(net))
            }
            v4 => v4,
        }
    }

    /// Seconds until `ip` may try again, while it is refused.
    pub fn retry_after_s(&self, ip: std::net::IpAddr, now_ms: i64) -> Option<u64> {
        let mut all = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let key = Self::client(ip);
        let times = all.get_mut(&key)?;
        times.retain(|t| now_ms - *t < self.window_ms);
        if times.len() < LOGIN_FAILURES {
            if times.is_empty() {
                all.remove(&key);
            }
            return None;
        }
        let free_at = times[0].saturating_add(self.window_ms);
        Some(
            u64::try_from((free_at - now_ms + 999) / 1000)
                .unwrap_or(1)
                .max(1),
        )
    }

    /// Records a wrong token from `ip`; true when this one reached the limit.
    pub fn failed(&self, ip: std::net::IpAddr, now_ms: i64) -> bool {
        let mut all = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        let key = Self::client(ip);
        if !all.contains_key(&key) && all.len() >= TRACKED {
            let window = self.window_ms;
            all.retain(|_, times| times.last().is_some_and(|t| now_ms - *t < window));
            if all.len() >= TRACKED {
                // Still full of recent ones: the one quiet the longest is forgotten.
                if let Some(quietest) = all
                    .iter()
                    .min_by_key(|(_, times)| times.last().copied())
                    .map(|(k, _)| *k)
                {
                    all.remove(&quietest);
                }
            }
        }
        let times = all.entry(key).or_default();
        times.retain(|t| now_ms - *t < self.window_ms);
        times.push(now_ms);
        if times.len() > LOGIN_FAILURES {
            times.remove(0);
        }
        times.len() == LOGIN_FAILURES
    }

    /// A right token from `ip`: its failures are forgotten.
    pub fn succeeded(&self, ip: std::net::IpAddr) {
        let mut all = self.failures.lock().unwrap_or_else(|p| p.into_inner());
        all.remove(&Self::client(ip));
    }
}

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
        assert!(check_listen(&lo, None, false).is_ok());
        assert!(check_listen(&lo6, None, false).is_ok());
        let e = check_listen(&any, None, false).unwrap_err();
        assert!(e.contains("serve.token_env"), "{e}");
        let t = Secret::new("s3cret-token".into());
        assert!(check_listen(&any, Some(&t), false).is_ok());
        // Isolated workers on the host reach loopback too.
        let e = check_listen(&lo, None, true).unwrap_err();
        assert!(e.contains("worker.users or worker.sandbox"), "{e}");
        assert!(check_listen(&lo, Some(&t), true).is_ok());
        assert!(matches(&t, Some("s3cret-token")));
        assert!(!matches(&t, Some("s3cret-tokeN")));
        assert!(!matches(&t, Some("s3cret")));
        assert!(!matches(&t, None));
    }

    #[test]
    fn a_loopback_board_answers_loopback_host_names_only() {
        for ok in [
            "localhost",
            "localhost:7878",
            "LOCALHOST.:1",
            "127.0.0.1:7878",
            "127.1.2.3",
            "[::1]:7878",
        ] {
            assert!(loopback_host(Some(ok)), "{ok}");
        }
        for bad in [
            "evil.example:7878",
            "localhost.evil.example",
            "10.0.0.1:7878",
            "[::2]:1",
            "",
        ] {
            assert!(!loopback_host(Some(bad)), "{bad}");
        }
        assert!(!loopback_host(None));
    }

    #[test]
    fn the_token_comes_from_the_header_and_a_session_from_the_cookie() {
        let t = Secret::new("s3cret-token".into());
        let sessions = Sessions::default();
        let mut h = axum::http::HeaderMap::new();
        assert_eq!(presented(&h), None);
        assert!(!authorised(&t, &sessions, &h, 0));
        // The token itself in the cookie is no session.
        h.insert("cookie", "a=b; orch_board=s3cret-token".parse().unwrap());
        assert_eq!(presented(&h), None);
        assert!(!authorised(&t, &sessions, &h, 0));
        let id = sessions.start(1_000).unwrap();
        assert_eq!(id.len(), 64);
        assert_ne!(id, sessions.start(1_000).unwrap());
        assert!(!id.contains("s3cret"));
        h.insert("cookie", format!("a=b; orch_board={id}").parse().unwrap());
        assert_eq!(session_of(&h).as_deref(), Some(id.as_str()));
        assert!(authorised(&t, &sessions, &h, 2_000));
        // It lasts SESSION_TTL_MS, and ends at sign-out.
        assert!(!authorised(&t, &sessions, &h, 1_000 + SESSION_TTL_MS));
        assert!(authorised(&t, &sessions, &h, 1_000 + SESSION_TTL_MS - 1));
        // Let in by its session alone: a stream opened so ends with it.
        assert_eq!(
            only_session(&t, &sessions, &h, 2_000).as_deref(),
            Some(id.as_str())
        );
        let ended = sessions.ended();
        sessions.end(&id);
        assert!(ended.has_changed().unwrap());
        assert!(!authorised(&t, &sessions, &h, 2_000));
        assert_eq!(only_session(&t, &sessions, &h, 2_000), None);
        let mut b = axum::http::HeaderMap::new();
        b.insert("authorization", "Bearer s3cret-token".parse().unwrap());
        assert!(authorised(&t, &sessions, &b, 0));
        assert_eq!(only_session(&t, &sessions, &b, 0), None);
        b.insert("authorization", "Bearer wrong".parse().unwrap());
        assert!(!authorised(&t, &sessions, &b, 0));
    }

    #[test]
    fn the_cookie_is_secure_where_it_crosses_a_network() {
        let mut h = axum::http::HeaderMap::new();
        let loopback = cookie_flags(false, &h);
        assert!(loopback.contains("HttpOnly") && loopback.contains("SameSite=Strict"));
        assert!(!loopback.contains("Secure"));
        assert!(cookie_flags(true, &h).contains("; Secure"));
        h.insert("x-forwarded-proto", "https".parse().unwrap());
        assert!(cookie_flags(false, &h).contains("; Secure"));
    }

    #[test]
    fn wrong_tokens_from_one_client_are_refused_for_the_rest_of_the_window() {
        let t = Throttle::new(std::time::Duration::from_secs(60));
        let a: std::net::IpAddr = "203.0.113.7".parse().unwrap();
        let b: std::net::IpAddr = "203.0.113.8".parse().unwrap();
        for i in 0..LOGIN_FAILURES as i64 {
            assert_eq!(t.retry_after_s(a, 1_000 + i), None, "attempt {i}");
            assert_eq!(t.failed(a, 1_000 + i), i == LOGIN_FAILURES as i64 - 1);
        }
        // Refused until the first failure leaves the window; another client is not.
        assert_eq!(t.retry_after_s(a, 1_010), Some(60));
        assert_eq!(t.retry_after_s(a, 30_500), Some(31));
        assert_eq!(t.retry_after_s(a, 60_999), Some(1));
        assert_eq!(t.retry_after_s(b, 1_010), None);
        // Then one more attempt, and refused again at the next failure (the window slides).
        assert_eq!(t.retry_after_s(a, 61_000), None);
        assert!(t.failed(a, 61_000));
        assert_eq!(t.retry_after_s(a, 61_000), Some(1));
        assert_eq!(t.retry_after_s(a, 61_001), None);
        // A right token forgets them.
        t.failed(a, 61_002);
        t.succeeded(a);
        assert_eq!(t.retry_after_s(a, 61_003), None);
        assert!(!t.failed(a, 61_004));
    }

    #[test]
    fn an_ipv6_client_is_its_64_and_a_mapped_ipv4_its_address() {
        let one: std::net::IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let other: std::net::IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let elsewhere: std::net::IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(Throttle::client(one), Throttle::client(other));
        assert_ne!(Throttle::client(one), Throttle::client(elsewhere));
        let mapped: std::net::IpAddr = "::ffff:192.0.2.1".parse().unwrap();
        assert_eq!(
            Throttle::client(mapped),
            "192.0.2.1".parse::<std::net::IpAddr>().unwrap()
        );
        let t = Throttle::new(std::time::Duration::from_secs(60));
        for i in 0..LOGIN_FAILURES as i64 {
            t.failed(one, i);
        }
        assert!(t.retry_after_s(other, 10).is_some());
        assert_eq!(t.retry_after_s(elsewhere, 10), None);
    }

    #[test]
    fn the_clients_remembered_are_bounded() {
        let t = Throttle::new(std::time::Duration::from_secs(60));
        for i in 0..(TRACKED as u32 + 10) {
            t.failed(
                std::net::IpAddr::V4(std::net::Ipv4Addr::from(i)),
                i64::from(i),
            );
        }
        assert!(t.failures.lock().unwrap().len() <= TRACKED);
    }
}
