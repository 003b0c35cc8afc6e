//! Human durations as operators write them in YAML and on the command line: "30m", "5s",
//! "1h30m", "250ms", "1.5h", "1 hour", "2 minutes", ISO 8601 "PT30M" — jiff's friendly
//! format (`SignedDuration`), plus days as 24 hours ("1d", "3d 4h").

use std::time::Duration;

/// Parses a strictly positive duration (jiff's friendly or ISO 8601 format; units up to days,
/// a day being 24 hours), to the millisecond.
///
/// Zero and negative durations are refused: every duration orch reads is a timeout, an
/// interval or a backoff, and none of those means anything at zero.
pub fn parse(text: &str) -> Result<Duration, String> {
    let s = text.trim();
    if s.is_empty() {
        return Err("empty duration (write e.g. \"30m\", \"5s\", \"1h30m\")".into());
    }
    let negative = || format!("duration \"{text}\" is negative; it must be greater than zero");
    if s.starts_with('-') {
        return Err(negative());
    }
    let signed = match s.parse::<jiff::SignedDuration>() {
        Ok(d) => d,
        // SignedDuration has no days (not every calendar day is 24 hours); for a timeout one is.
        Err(e) => with_days(s).ok_or_else(|| {
            let why = e.to_string();
            let why = why
                .strip_prefix("failed to parse input in the \"friendly\" duration format: ")
                .unwrap_or(&why)
                .to_string();
            format!(
                "invalid duration \"{text}\": {why} (write e.g. \"30m\", \"1h30m\", \"1.5h\", \"2 minutes\"; units ms, s, m, h or d)"
            )
        })?,
    };
    if signed.is_negative() {
        return Err(negative());
    }
    let d = Duration::try_from(signed).map_err(|_| format!("duration \"{text}\" is too large"))?;
    let ms =
        u64::try_from(d.as_millis()).map_err(|_| format!("duration \"{text}\" is too large"))?;
    if ms == 0 {
        return Err(format!(
            "duration \"{text}\" is zero; it must be greater than zero"
        ));
    }
    Ok(Duration::from_millis(ms))
}

/// `s` with days (and smaller units), a day counted as 24 hours; `None` for anything else,
/// calendar units (weeks, months, years) included.
fn with_days(s: &str) -> Option<jiff::SignedDuration> {
    let span: jiff::Span = s.parse().ok()?;
    if span.get_years() != 0 || span.get_months() != 0 || span.get_weeks() != 0 {
        return None;
    }
    span.to_duration(jiff::SpanRelativeTo::days_are_24_hours())
        .ok()
}

/// Formats a duration the way it is written in YAML ("1h30m", "5s", "250ms").
pub fn format(d: Duration) -> String {
    let mut ms = d.as_millis();
    if ms == 0 {
        return "0s".into();
    }
    let mut out = String::new();
    for (unit, size) in [
        ("d", 86_400_000u128),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
        ("ms", 1),
    ] {
        if ms >= size {
            out.push_str(&format!("{}{unit}", ms / size));
            ms %= size;
        }
    }
    out
}

/// serde adapter: `#[serde(with = "crate::duration::serde_str")]`.
pub mod serde_str {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::time::Duration;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let s = String::deserialize(d)?;
        super::parse(&s).map_err(serde::de::Error::custom)
    }

    pub fn serialize<S: Serializer>(v: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::format(*v))
    }
}

/// A duration as an operator types it (on the command line, in the board's `?since=`): what
/// repos.yaml accepts ("30m", "1h30m", "1.5h",
/// "1 hour"), and decimals in any part ("0.5d", "1.5m30s"), to the millisecond.
pub fn parse_decimal(s: &str) -> Result<Duration, String> {
    parse(s).or_else(|e| decimal_duration(s.trim()).ok_or(e))
}

/// "1.5h", "2.5m30s": parts of `<decimal><unit>`; `None` when `s` is not of that form or
/// comes to zero (the integer parser's message then says why).
fn decimal_duration(s: &str) -> Option<Duration> {
    let mut rest = s;
    let mut total_ms = 0f64;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let n_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let (number, tail) = rest.split_at(n_end);
        let u_end = tail
            .find(|c: char| !c.is_ascii_alphabetic())
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(u_end);
        if number.is_empty() || number.starts_with('.') || number.ends_with('.') {
            return None;
        }
        let n: f64 = number.parse().ok()?;
        let unit_ms = match unit {
            "ms" => 1.0,
            "s" => 1_000.0,
            "m" => 60_000.0,
            "h" => 3_600_000.0,
            "d" => 86_400_000.0,
            _ => return None,
        };
        total_ms += n * unit_ms;
        rest = tail;
    }
    let ms = total_ms.round();
    (ms >= 1.0 && ms < u64::MAX as f64).then(|| Duration::from_millis(ms as u64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_the_forms_operators_write() {
        assert_eq!(parse("30m").unwrap(), Duration::from_secs(1800));
        assert_eq!(parse("5s").unwrap(), Duration::from_secs(5));
        assert_eq!(parse("1h30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse("1d").unwrap(), Duration::from_secs(86400));
        assert_eq!(parse("1.5h").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse("1 hour").unwrap(), Duration::from_secs(3600));
        assert_eq!(parse("2 minutes").unwrap(), Duration::from_secs(120));
        assert_eq!(
            parse("3d 4h").unwrap(),
            Duration::from_secs(3 * 86400 + 4 * 3600)
        );
        assert_eq!(parse("PT30M").unwrap(), Duration::from_secs(1800));
        assert_eq!(parse(" 0.25s ").unwrap(), Duration::from_millis(250));
    }

    #[test]
    fn refuses_zero_negative_and_garbage() {
        for bad in [
            "0s", "0m0s", "-5m", "5m ago", "", "5", "5x", "m5", "1h-3m", "2w", "1 month", "1y",
            ".5h", "1..5h", "0.0001s",
        ] {
            assert!(parse(bad).is_err(), "{bad} should be refused");
        }
        assert!(parse("0s").unwrap_err().contains("zero"));
        assert!(parse("0.0001s").unwrap_err().contains("zero"));
        assert!(parse("-5m").unwrap_err().contains("negative"));
        assert!(parse("5m ago").unwrap_err().contains("negative"));
        let e = parse("5x").unwrap_err();
        assert!(e.starts_with("invalid duration \"5x\": "), "{e}");
        assert!(e.contains("units ms, s, m, h or d"), "{e}");
        assert!(!e.contains("friendly"), "jiff's prefix is dropped: {e}");
    }

    proptest! {
        #[test]
        fn format_round_trips(ms in 1u64..10_000_000_000) {
            let d = Duration::from_millis(ms);
            prop_assert_eq!(parse(&format(d)).unwrap(), d);
        }
    }
}
