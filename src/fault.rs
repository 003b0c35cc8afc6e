//! Fault hooks: the integration tests put an orch process in a state a crash or a slow machine
//! would — a supervisor stopped inside a write transaction, a resume pass that stands still
//! after its claims, a board whose login throttle forgets within seconds. They exist only with
//! the `test-hooks` feature, which the tests turn on (Cargo.toml: the dev-dependency on orch
//! itself); any other build reads none of these variables and its binary names none of them
//! (`.ci/run` checks the binary `cargo run` built). Workers never see them: their environment
//! is built from scratch.

use std::time::Duration;

/// How long each lease renewal holds its write transaction open (`ORCH_TEST_HOLD_RENEWAL_MS`),
/// so that a test can stop the supervisor inside one.
pub fn hold_renewal() -> Option<Duration> {
    #[cfg(feature = "test-hooks")]
    {
        static HOLD: std::sync::OnceLock<Option<Duration>> = std::sync::OnceLock::new();
        *HOLD.get_or_init(|| millis("ORCH_TEST_HOLD_RENEWAL_MS"))
    }
    #[cfg(not(feature = "test-hooks"))]
    None
}

/// How long every write transaction of this process stays open after it began
/// (`ORCH_TEST_HOLD_WRITE_MS`), so that a test can stop an orch command inside one.
pub fn hold_write() {
    #[cfg(feature = "test-hooks")]
    {
        static HOLD: std::sync::OnceLock<Option<Duration>> = std::sync::OnceLock::new();
        if let Some(hold) = *HOLD.get_or_init(|| millis("ORCH_TEST_HOLD_WRITE_MS")) {
            std::thread::sleep(hold);
        }
    }
}

/// Writers skip the write queue and wait in SQLite's busy handler alone
/// (`ORCH_TEST_NO_WRITE_QUEUE`): the benchmark's "before" of `store::write_queue`.
pub fn write_queue_off() -> bool {
    #[cfg(feature = "test-hooks")]
    {
        static OFF: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *OFF.get_or_init(|| std::env::var_os("ORCH_TEST_NO_WRITE_QUEUE").is_some())
    }
    #[cfg(not(feature = "test-hooks"))]
    false
}

/// How long a resume pass stands still right after its claims (`ORCH_TEST_RESUME_STALL_MS`),
/// as one making many worktrees would.
pub fn resume_stall() -> Option<Duration> {
    #[cfg(feature = "test-hooks")]
    {
        millis("ORCH_TEST_RESUME_STALL_MS")
    }
    #[cfg(not(feature = "test-hooks"))]
    None
}

/// The board's login-throttle window in place of its minute (`ORCH_TEST_LOGIN_WINDOW`, a
/// duration such as `5s`); `Err` names the variable and what is wrong with its value.
pub fn login_window() -> Option<Result<Duration, String>> {
    #[cfg(feature = "test-hooks")]
    {
        const VAR: &str = "ORCH_TEST_LOGIN_WINDOW";
        match std::env::var(VAR) {
            Ok(v) if !v.trim().is_empty() => {
                Some(crate::duration::parse(&v).map_err(|e| format!("{VAR}: {e}")))
            }
            _ => None,
        }
    }
    #[cfg(not(feature = "test-hooks"))]
    None
}

#[cfg(feature = "test-hooks")]
fn millis(var: &str) -> Option<Duration> {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .map(Duration::from_millis)
}
