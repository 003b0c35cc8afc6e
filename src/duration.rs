//! Human durations as operators write them in YAML: "30m", "5s", "1h30m", "250ms".

use std::time::Duration;

/// Parses a strictly positive duration made of `<number><unit>` parts (units: d, h, m, s, ms).
///
/// Zero and negative durations are refused: every duration orch reads is a timeout, an
/// interval or a backoff, and none of those means anything at zero.
pub fn parse(text: &str) -> Result<Duration, String> {
    let s = text.trim();
    if s.is_empty() {
        return Err("empty duration (write e.g. \"30m\", \"5s\", \"1h30m\")".into());
    }
    if s.starts_with('-') {
        return Err(format!(
            "duration \"{text}\" is negative; it must be greater than zero"
        ));
    }
    let bytes = s.as_bytes();
    let mut i = 0;
    let mut total: u128 = 0;
    while i < bytes.len() {
        let start = i;
        while i < bytes.len() && bytes[i].is_ascii_digit() {
            i += 1;
        }
        if start == i {
            return Err(format!(
                "invalid duration \"{text}\": expected a number at \"{}\" (write e.g. \"30m\", \"1h30m\")",
                &s[start..]
            ));
        }
        let n: u128 = s[start..i]
            .parse()
            .map_err(|_| format!("invalid duration \"{text}\": number too large"))?;
        let ustart = i;
        while i < bytes.len() && bytes[i].is_ascii_alphabetic() {
            i += 1;
        }
        let unit_ms: u128 = match &s[ustart..i] {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            "" => {
                return Err(format!(
                    "invalid duration \"{text}\": number without a unit (use ms, s, m, h or d)"
                ));
            }
            other => {
                return Err(format!(
                    "invalid duration \"{text}\": unknown unit \"{other}\" (use ms, s, m, h or d)"
                ));
            }
        };
        total = total
            .checked_add(n.checked_mul(unit_ms).ok_or("duration too large")?)
            .ok_or("duration too large")?;
    }
    if total == 0 {
        return Err(format!(
            "duration \"{text}\" is zero; it must be greater than zero"
        ));
    }
    let ms = u64::try_from(total).map_err(|_| format!("duration \"{text}\" is too large"))?;
    Ok(Duration::from_millis(ms))
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
    }

    #[test]
    fn refuses_zero_negative_and_garbage() {
        for bad in ["0s", "0m0s", "-5m", "", "5", "5x", "m5", "1h-3m", "1.5h"] {
            assert!(parse(bad).is_err(), "{bad} should be refused");
        }
        assert!(parse("0s").unwrap_err().contains("zero"));
        assert!(parse("-5m").unwrap_err().contains("negative"));
    }

    proptest! {
        #[test]
        fn format_round_trips(ms in 1u64..10_000_000_000) {
            let d = Duration::from_millis(ms);
            prop_assert_eq!(parse(&format(d)).unwrap(), d);
        }
    }
}
