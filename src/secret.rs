//! A secret value (the forge token) that cannot be printed by accident.

use std::fmt;

/// How many characters of the token in a row count as revealing it.
pub const SIGNIFICANT: usize = 8;

/// Holds a token. `Debug` and `Display` print `[redacted]`; only [`Secret::expose`] reveals it,
/// and the only caller is the HTTP client building the `Authorization` header.
#[derive(Clone)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: String) -> Self {
        Secret(value)
    }

    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Replaces every occurrence of the secret in `text` (for error bodies echoed by servers),
    /// and every significant piece of it: any run of [`SIGNIFICANT`] or more characters that
    /// also occurs in the token (a server may cut, wrap or quote the part it echoes).
    pub fn scrub(&self, text: &str) -> String {
        let token = self.0.as_bytes();
        if token.is_empty() {
            return text.to_string();
        }
        let min = SIGNIFICANT.min(token.len());
        let bytes = text.as_bytes();
        let mut hidden = vec![false; bytes.len()];
        for i in 0..bytes.len() {
            let longest = (0..token.len())
                .map(|j| {
                    bytes[i..]
                        .iter()
                        .zip(&token[j..])
                        .take_while(|(a, b)| a == b)
                        .count()
                })
                .max()
                .unwrap_or(0);
            if longest >= min {
                hidden[i..i + longest].iter_mut().for_each(|h| *h = true);
            }
        }
        let mut out = String::with_capacity(text.len());
        let mut in_secret = false;
        for (i, c) in text.char_indices() {
            if hidden[i] {
                if !in_secret {
                    out.push_str("[redacted]");
                }
                in_secret = true;
            } else {
                in_secret = false;
                out.push(c);
            }
        }
        out
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_whole_token_and_its_significant_pieces_are_redacted() {
        let s = Secret::new("0123456789abcdef0123456789abcdefdeadbeef".into());
        assert_eq!(
            s.scrub("token 0123456789abcdef0123456789abcdefdeadbeef rejected"),
            "token [redacted] rejected"
        );
        // A cut-off head, a tail, a piece from the middle.
        assert_eq!(s.scrub("tok=0123456789ab…"), "tok=[redacted]…");
        assert_eq!(s.scrub("…cdefdeadbeef\""), "…[redacted]\"");
        assert_eq!(s.scrub("x 89abcdef0123 y"), "x [redacted] y");
        // Short coincidences (a SHA's few hex digits) stay.
        assert_eq!(s.scrub("commit 0123456 ok"), "commit 0123456 ok");
        assert_eq!(s.scrub("no secret here"), "no secret here");
        // Multi-byte text around a piece survives.
        assert_eq!(s.scrub("é89abcdef01é"), "é[redacted]é");
    }
}
