//! Tests of the shipped worker contract and of the problems validation reports.

use super::*;

#[test]
fn shipped_contract_has_the_seed_values() {
    let c = Contract::embedded();
    assert_eq!(c.initial, "WORKING");
    let m = |n: u64| Duration::from_secs(n * 60);
    assert_eq!(c.timeouts["WORKING"].timeout, m(20));
    assert_eq!(c.timeouts["WORKING"].warning_at, Some(m(15)));
    assert_eq!(c.timeouts["PUSHED_TO_CI"].timeout, m(15));
    assert_eq!(c.timeouts["PUSHED_TO_CI"].warning_at, Some(m(10)));
    assert_eq!(c.timeouts["FIXING_CI"].timeout, m(15));
    assert_eq!(c.fixing_ci_max_attempts, 5);
    assert_eq!(c.default_worker_timeout, m(30));
    assert_eq!(c.escalate_after, 3);
    assert_eq!(c.permission.max_denials, 2);
    assert_eq!(c.transient_backoff.initial, Duration::from_secs(5));
    assert_eq!(c.transient_backoff.max, Duration::from_secs(60));
    assert_eq!(c.transient_backoff.multiplier, 2.0);
    assert_eq!(c.transient_backoff.max_retries, 3);
    assert!(c.allows("WORKING", "PUSHED_TO_CI"));
    assert!(c.allows("PUSHED_TO_CI", "DONE"));
    assert!(!c.allows("WORKING", "DONE"));
    assert!(!c.allows("DONE", "WORKING"));
    assert!(c.allows("FIXING_CI", "BLOCKED_PERMISSION"));
}

#[test]
fn reports_unknown_states_and_bad_durations_together() {
    let bad = EMBEDDED
        .replace(
            "to: DONE,         trigger: ci_all_passed",
            "to: DONNE,        trigger: ci_all_passed",
        )
        .replace(
            "WORKING:      { timeout: 20m",
            "WORKING:      { timeout: 0m",
        )
        .replace("initial: 5s", "initial: -5s");
    let err = Contract::from_str(&bad, Path::new("c.yaml"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("unknown state \"DONNE\""), "{err}");
    assert!(err.contains("is zero"), "{err}");
    assert!(err.contains("negative"), "{err}");
    assert!(err.contains("c.yaml:"), "{err}");
}

#[test]
fn refuses_unknown_keys() {
    let bad = EMBEDDED.replace(
        "checkpointing:\n  periodic_interval: 5m",
        "checkpointing:\n  periodic_interval: 5m\n  every: 1m",
    );
    let err = Contract::from_str(&bad, Path::new("c.yaml"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("every"), "{err}");
}

#[test]
fn escalate_after_beyond_the_attempts_is_refused() {
    let bad = EMBEDDED.replace("escalate_after: 3", "escalate_after: 6");
    let err = Contract::from_str(&bad, Path::new("c.yaml")).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("escalate_after (6) must not exceed FIXING_CI's max_attempts (5)"),
        "{text}"
    );
}
