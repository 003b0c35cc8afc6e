//! `Sha`: a commit id as orch passes it around (full hex, lower case), with the short form
//! humans read. One type so that no caller slices hex strings by hand.

use serde::{Deserialize, Serialize};

/// How many hex digits the short form shows.
pub const SHORT_LEN: usize = 10;

/// A commit id (full hex as git and the forges give it).
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(transparent)]
pub struct Sha(String);

impl Sha {
    pub fn new(hex: impl Into<String>) -> Sha {
        Sha(hex.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The first [`SHORT_LEN`] digits (the whole id if it is shorter).
    pub fn short(&self) -> &str {
        short(&self.0)
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

/// The short form of a commit id held as a plain string (config, rows, user input).
pub fn short(hex: &str) -> &str {
    short_to(hex, SHORT_LEN)
}

/// The first `n` characters of `hex` (the whole of it if shorter).
pub fn short_to(hex: &str, n: usize) -> &str {
    match hex.char_indices().nth(n) {
        Some((i, _)) => &hex[..i],
        None => hex,
    }
}

impl std::ops::Deref for Sha {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Sha {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<String> for Sha {
    fn from(s: String) -> Sha {
        Sha(s)
    }
}

impl From<&str> for Sha {
    fn from(s: &str) -> Sha {
        Sha(s.to_string())
    }
}

impl PartialEq<str> for Sha {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for Sha {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<String> for Sha {
    fn eq(&self, other: &String) -> bool {
        &self.0 == other
    }
}

impl PartialEq<Sha> for String {
    fn eq(&self, other: &Sha) -> bool {
        *self == other.0
    }
}

impl PartialEq<Sha> for &str {
    fn eq(&self, other: &Sha) -> bool {
        *self == other.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_forms() {
        let s = Sha::from("0123456789abcdef0123456789abcdef01234567");
        assert_eq!(s.short(), "0123456789");
        assert_eq!(short("abc"), "abc");
        assert_eq!(short_to("0123456789abcdef", 12), "0123456789ab");
        assert_eq!(s, "0123456789abcdef0123456789abcdef01234567");
        assert_eq!(
            serde_json::to_string(&s).unwrap(),
            "\"0123456789abcdef0123456789abcdef01234567\""
        );
    }
}
