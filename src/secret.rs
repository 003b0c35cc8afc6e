//! A secret value (the forge token) that cannot be printed by accident, and secrets found in
//! text a worker committed (pure: the lines are handed in; a finding names the kind, the file
//! and the line — never the value).

pub mod decode;

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

/// A secret found in an added line: what kind, where. Its value is never kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub file: String,
    pub line: u32,
    pub kind: &'static str,
}

impl fmt::Display for Finding {
    /// `path/to/file:12: an OpenSSH private key` (the file name escaped: a worker chose it).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}: {}",
            crate::text::escape(&self.file),
            self.line,
            self.kind
        )
    }
}

/// Well-known key formats: a fixed prefix, then at least `min` characters of `alphabet`.
struct Format {
    prefix: &'static str,
    min: usize,
    alphabet: fn(u8) -> bool,
    kind: &'static str,
}

fn upper_digit(b: u8) -> bool {
    b.is_ascii_uppercase() || b.is_ascii_digit()
}
fn alnum(b: u8) -> bool {
    b.is_ascii_alphanumeric()
}
fn alnum_dash(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}

const FORMATS: &[Format] = &[
    Format {
        prefix: "AKIA",
        min: 16,
        alphabet: upper_digit,
        kind: "an AWS access key id",
    },
    Format {
        prefix: "ASIA",
        min: 16,
        alphabet: upper_digit,
        kind: "an AWS access key id",
    },
    Format {
        prefix: "ghp_",
        min: 36,
        alphabet: alnum,
        kind: "a GitHub token",
    },
    Format {
        prefix: "gho_",
        min: 36,
        alphabet: alnum,
        kind: "a GitHub token",
    },
    Format {
        prefix: "ghu_",
        min: 36,
        alphabet: alnum,
        kind: "a GitHub token",
    },
    Format {
        prefix: "ghs_",
        min: 36,
        alphabet: alnum,
        kind: "a GitHub token",
    },
    Format {
        prefix: "ghr_",
        min: 36,
        alphabet: alnum,
        kind: "a GitHub token",
    },
    Format {
        prefix: "github_pat_",
        min: 60,
        alphabet: alnum_dash,
        kind: "a GitHub token",
    },
    Format {
        prefix: "glpat-",
        min: 20,
        alphabet: alnum_dash,
        kind: "a GitLab token",
    },
    Format {
        prefix: "xoxb-",
        min: 20,
        alphabet: alnum_dash,
        kind: "a Slack token",
    },
    Format {
        prefix: "xoxp-",
        min: 20,
        alphabet: alnum_dash,
        kind: "a Slack token",
    },
    Format {
        prefix: "AIza",
        min: 35,
        alphabet: alnum_dash,
        kind: "a Google API key",
    },
    Format {
        prefix: "sk_live_",
        min: 24,
        alphabet: alnum,
        kind: "a Stripe secret key",
    },
];

/// The kind of secret `line` (one added line of a diff) carries, if any: the forge token
/// (`token`, compared whole, never copied), a private key header (`-----BEGIN … PRIVATE
/// KEY-----`, PGP's private key block), or a well-known key format.
pub fn kind_in(line: &[u8], token: Option<&Secret>) -> Option<&'static str> {
    if let Some(t) = token {
        let t = t.expose().as_bytes();
        if t.len() >= SIGNIFICANT && line.windows(t.len()).any(|w| w == t) {
            return Some("the forge token");
        }
    }
    if let Some(at) = find(line, b"-----BEGIN ") {
        let rest = &line[at + 11..];
        if let Some(end) = find(rest, b"-----") {
            let label = &rest[..end];
            if label.ends_with(b"PRIVATE KEY") || label == b"PGP PRIVATE KEY BLOCK" {
                return Some(match label {
                    b"OPENSSH PRIVATE KEY" => "an OpenSSH private key",
                    b"RSA PRIVATE KEY" => "an RSA private key",
                    b"EC PRIVATE KEY" => "an EC private key",
                    b"DSA PRIVATE KEY" => "a DSA private key",
                    b"PGP PRIVATE KEY BLOCK" => "a PGP private key",
                    _ => "a private key",
                });
            }
        }
    }
    for f in FORMATS {
        let p = f.prefix.as_bytes();
        let mut from = 0;
        while let Some(at) = find(&line[from..], p) {
            let start = from + at;
            // A prefix inside a longer word is not a key's start.
            let starts_word = start == 0 || !alnum_dash(line[start - 1]);
            let body = line[start + p.len()..]
                .iter()
                .take_while(|&&b| (f.alphabet)(b))
                .count();
            if starts_word && body >= f.min {
                return Some(f.kind);
            }
            from = start + 1;
        }
    }
    None
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_found_by_kind_and_ordinary_text_is_not() {
        let token = Secret::new("0123456789abcdef0123456789abcdefdeadbeef".into());
        let t = Some(&token);
        let k = |s: &str| kind_in(s.as_bytes(), t);
        assert_eq!(
            k("-----BEGIN OPENSSH PRIVATE KEY-----"),
            Some("an OpenSSH private key")
        );
        assert_eq!(
            k("x = \"-----BEGIN RSA PRIVATE KEY-----\""),
            Some("an RSA private key")
        );
        assert_eq!(k("-----BEGIN PRIVATE KEY-----"), Some("a private key"));
        assert_eq!(
            k("-----BEGIN ENCRYPTED PRIVATE KEY-----"),
            Some("a private key")
        );
        assert_eq!(
            k("-----BEGIN PGP PRIVATE KEY BLOCK-----"),
            Some("a PGP private key")
        );
        assert_eq!(k("-----BEGIN PUBLIC KEY-----"), None);
        assert_eq!(k("-----BEGIN CERTIFICATE-----"), None);
        assert_eq!(
            k("aws_key = AKIAIOSFODNN7EXAMPLE"),
            Some("an AWS access key id")
        );
        assert_eq!(k("AKIA_not_a_key"), None);
        assert_eq!(k("MYAKIAIOSFODNN7EXAMPLE"), None, "inside a word");
        assert_eq!(
            k("token: ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
            Some("a GitHub token")
        );
        assert_eq!(k("ghp_short"), None);
        assert_eq!(
            k("Authorization: token 0123456789abcdef0123456789abcdefdeadbeef"),
            Some("the forge token")
        );
        assert_eq!(k("commit 0123456789abcdef ok"), None, "a piece is no token");
        assert_eq!(k("fn main() { println!(\"hello\"); }"), None);
        assert_eq!(
            kind_in(b"0123456789abcdef0123456789abcdefdeadbeef", None),
            None
        );
        let f = Finding {
            file: "keys/id_ed25519".into(),
            line: 1,
            kind: "an OpenSSH private key",
        };
        assert_eq!(f.to_string(), "keys/id_ed25519:1: an OpenSSH private key");
    }

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
