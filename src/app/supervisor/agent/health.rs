//! How an agent's run ended, by the contract's failure taxonomy: what orch does next depends
//! on it, instead of giving every ended run blindly to a replacement. Pure.
//!
//! | what the run showed | class | orch |
//! |---|---|---|
//! | rate-limited, or an error result naming 429 / overload / an unreachable API | transient | a replacement later (`orch resume`); new spawns of the agent wait for a known reset |
//! | an error result naming bad credentials (401, invalid key, authentication) | blocking (`missing_credentials`) | BLOCKED, alert, lock kept |
//! | any other error result | blocking | BLOCKED, alert |
//! | exit 0 with no commit and no milestone claim (not even WORKING) | blocking (did nothing) | BLOCKED, alert (with the model's last reply, when the agent printed it: aider) |
//! | anything else | — | as before |

/// What one run of an agent showed, gathered by the supervisor.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunHealth {
    /// The agent's final result when it was an error: its text.
    pub error_result: Option<String>,
    /// A rate limit was reported; when it resets (Unix ms), if said.
    pub rate_limited: Option<Option<i64>>,
    /// The run committed, or claimed any milestone (a WORKING note too).
    pub did_work: bool,
    /// The model's last reply, when the agent's output shows it (aider).
    pub last_reply: Option<String>,
}

/// The class of an ended run, and why; `None`: nothing to classify.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    Transient(String),
    Blocking(String),
}

const TRANSIENT: &[&str] = &[
    "429",
    "rate limit",
    "rate_limit",
    "529",
    "overloaded",
    "unable to connect",
    "connectionrefused",
    "connection refused",
    "timed out",
    "timeout",
    "network",
    "reconnecting",
    // aider's (litellm's) error classes
    "ratelimiterror",
    "apiconnectionerror",
    "serviceunavailableerror",
    "internalservererror",
];

const CREDENTIALS: &[&str] = &[
    "401",
    "invalid api key",
    "unauthorized",
    "authentication",
    "api key",
];

/// Classifies a run of an agent that ended with `code` (`None`: by a signal).
pub fn classify(code: Option<i32>, run: &RunHealth) -> Option<Ended> {
    if let Some(reset) = run.rate_limited {
        let when = reset
            .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
            .map(|t| format!(" until {t}"))
            .unwrap_or_default();
        return Some(Ended::Transient(format!(
            "the agent's API is rate-limited{when}"
        )));
    }
    if let Some(text) = &run.error_result {
        let lower = text.to_lowercase();
        let short: String = text.chars().take(200).collect();
        if TRANSIENT.iter().any(|t| lower.contains(t)) {
            return Some(Ended::Transient(format!("the agent's API failed: {short}")));
        }
        if CREDENTIALS.iter().any(|t| lower.contains(t)) {
            return Some(Ended::Blocking(format!(
                "the agent cannot use its API (missing or bad credentials): {short}"
            )));
        }
        return Some(Ended::Blocking(format!(
            "the agent ended with an error: {short}"
        )));
    }
    if code == Some(0) && !run.did_work {
        let said = match &run.last_reply {
            Some(r) => format!(
                "; its model's last reply: {:?}",
                r.chars().take(200).collect::<String>()
            ),
            None => String::new(),
        };
        return Some(Ended::Blocking(format!(
            "the agent ended (exit 0) without a commit or a claim{said}"
        )));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_error(text: &str) -> RunHealth {
        RunHealth {
            error_result: Some(text.into()),
            ..RunHealth::default()
        }
    }

    #[test]
    fn each_row_of_the_table() {
        let limited = RunHealth {
            rate_limited: Some(Some(1_767_225_600_000)),
            ..RunHealth::default()
        };
        assert!(
            matches!(classify(Some(1), &limited), Some(Ended::Transient(t)) if t.contains("2026-01-01"))
        );
        for transient in [
            "API Error: 429 rate limit exceeded",
            "API Error: 529 Overloaded. This is a server-side issue",
            "API Error: Unable to connect to API (ConnectionRefused)",
            "litellm.RateLimitError: RateLimitError: OpenAIException - Slow down",
        ] {
            assert!(
                matches!(
                    classify(Some(1), &with_error(transient)),
                    Some(Ended::Transient(_))
                ),
                "{transient}"
            );
        }
        assert!(matches!(
            classify(Some(1), &with_error("Invalid API key · Fix external API key")),
            Some(Ended::Blocking(t)) if t.contains("credentials")
        ));
        assert!(matches!(
            classify(Some(0), &with_error("Reached max turns (1)")),
            Some(Ended::Blocking(t)) if t.contains("an error")
        ));
        // Did nothing, said nothing wrong: an operator looks; one that worked: as before.
        assert!(matches!(
            classify(Some(0), &RunHealth::default()),
            Some(Ended::Blocking(t)) if t.contains("without a commit")
        ));
        let refused = RunHealth {
            last_reply: Some("I'm sorry, but I can't help with that.".into()),
            ..RunHealth::default()
        };
        assert!(matches!(
            classify(Some(0), &refused),
            Some(Ended::Blocking(t)) if t.contains("without a commit") && t.contains("can't help with that")
        ));
        let worked = RunHealth {
            did_work: true,
            ..RunHealth::default()
        };
        assert_eq!(classify(Some(0), &worked), None);
        assert_eq!(classify(Some(2), &RunHealth::default()), None);
        assert_eq!(classify(None, &RunHealth::default()), None);
    }
}
