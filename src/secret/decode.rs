//! An added text read as a person would decode it, for the secret scan: base64 runs (standard
//! and URL-safe alphabets) decoded, and UTF-16 (LE or BE) read as text. gzip and other
//! compression are not inflated (README's secret-scan section says so).

use super::{Secret, kind_in};

/// Shortest base64 run decoded: 16 characters are 12 bytes, shorter than any key format and
/// than a token worth the name.
const MIN_RUN: usize = 16;

fn b64_value(b: u8) -> Option<u8> {
    Some(match b {
        b'A'..=b'Z' => b - b'A',
        b'a'..=b'z' => b - b'a' + 26,
        b'0'..=b'9' => b - b'0' + 52,
        b'+' | b'-' => 62,
        b'/' | b'_' => 63,
        _ => return None,
    })
}

/// Decodes one run of base64 characters (no padding inside), from its start; trailing bits
/// that make no whole byte are dropped.
fn b64_decode(run: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(run.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for &b in run {
        let Some(v) = b64_value(b) else { break };
        acc = (acc << 6) | v as u32;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}

/// The decoded runs of base64 in `text` (each run of at least `MIN_RUN` base64 characters;
/// `=` padding ends a run).
pub fn base64_runs(text: &[u8]) -> Vec<Vec<u8>> {
    text.split(|&b| b64_value(b).is_none())
        .filter(|run| run.len() >= MIN_RUN)
        .map(b64_decode)
        .collect()
}

/// `bytes` read as UTF-16 text, if they look like it: a byte-order mark, or a NUL at every
/// second byte of the first ones (ASCII in UTF-16). Lossy: what is not text is replaced.
pub fn utf16_text(bytes: &[u8]) -> Option<String> {
    let (le, body) = match bytes {
        [0xFF, 0xFE, rest @ ..] => (true, rest),
        [0xFE, 0xFF, rest @ ..] => (false, rest),
        _ => {
            let head = &bytes[..bytes.len().min(64) & !1];
            if head.len() < 4 {
                return None;
            }
            let nul_at = |odd: usize| head.iter().skip(odd).step_by(2).all(|&b| b == 0);
            if nul_at(1) {
                (true, bytes)
            } else if nul_at(0) {
                (false, bytes)
            } else {
                return None;
            }
        }
    };
    let units = body.chunks_exact(2).map(|c| {
        if le {
            u16::from_le_bytes([c[0], c[1]])
        } else {
            u16::from_be_bytes([c[0], c[1]])
        }
    });
    Some(
        char::decode_utf16(units)
            .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
            .collect(),
    )
}

/// The kind of secret `line` carries once decoded (its base64 runs; their UTF-16), if any.
pub fn kind_in_decoded(line: &[u8], token: Option<&Secret>) -> Option<&'static str> {
    base64_runs(line).into_iter().find_map(|d| {
        kind_in(&d, token).or_else(|| utf16_text(&d).and_then(|t| kind_in(t.as_bytes(), token)))
    })
}

/// The kind of secret a whole file git takes for binary carries: read as UTF-16 text, line by
/// line, as is and decoded. (A binary file has no lines in a diff.)
pub fn kind_in_binary(blob: &[u8], token: Option<&Secret>) -> Option<&'static str> {
    let text = utf16_text(blob)?;
    text.lines()
        .find_map(|l| kind_in(l.as_bytes(), token).or_else(|| kind_in_decoded(l.as_bytes(), token)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &str = "f0rge-t0ken-0123456789abcdef";
    const KEY: &str = "AKIAABCDEFGHIJKLMNOP";

    fn b64(bytes: &[u8], url: bool) -> String {
        const STD: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut out = String::new();
        for c in bytes.chunks(3) {
            let n = c.iter().fold(0u32, |a, &b| (a << 8) | b as u32) << (8 * (3 - c.len()));
            for i in 0..=c.len() {
                let mut ch = STD[((n >> (18 - 6 * i)) & 63) as usize];
                if url {
                    ch = match ch {
                        b'+' => b'-',
                        b'/' => b'_',
                        x => x,
                    };
                }
                out.push(ch as char);
            }
        }
        while !out.len().is_multiple_of(4) {
            out.push('=');
        }
        out
    }

    fn utf16(s: &str, le: bool, bom: bool) -> Vec<u8> {
        let mut out = Vec::new();
        if bom {
            out.extend(if le { [0xFF, 0xFE] } else { [0xFE, 0xFF] });
        }
        for u in s.encode_utf16() {
            out.extend(if le { u.to_le_bytes() } else { u.to_be_bytes() });
        }
        out
    }

    #[test]
    fn base64_of_the_token_or_of_a_key_is_found_in_either_alphabet() {
        let token = Secret::new(TOKEN.into());
        for url in [false, true] {
            let line = format!("config = \"{}\"", b64(TOKEN.as_bytes(), url));
            assert_eq!(
                kind_in_decoded(line.as_bytes(), Some(&token)),
                Some("the forge token"),
                "{line}"
            );
            let line = format!("x: {}", b64(format!("aws={KEY}\n").as_bytes(), url));
            assert_eq!(
                kind_in_decoded(line.as_bytes(), None),
                Some("an AWS access key id")
            );
        }
        // Ordinary base64 (or words) decodes to nothing of the kind.
        let plain = format!("img: {}", b64(b"just a picture, nothing else here", false));
        assert_eq!(kind_in_decoded(plain.as_bytes(), Some(&token)), None);
        assert_eq!(
            kind_in_decoded(b"the quick brown fox jumps over", Some(&token)),
            None
        );
    }

    #[test]
    fn utf16_either_order_with_or_without_a_mark_is_read_as_text() {
        let token = Secret::new(TOKEN.into());
        for le in [true, false] {
            for bom in [true, false] {
                let blob = utf16(&format!("line one\nsecret={TOKEN}\n"), le, bom);
                assert_eq!(
                    kind_in_binary(&blob, Some(&token)),
                    Some("the forge token"),
                    "le {le} bom {bom}"
                );
                // base64 of UTF-16 of a key, in an ordinary text line.
                let line = format!("k = {}", b64(&utf16(KEY, le, bom), false));
                assert_eq!(
                    kind_in_decoded(line.as_bytes(), None),
                    Some("an AWS access key id")
                );
            }
        }
        // A binary file that is no UTF-16 text.
        assert_eq!(
            kind_in_binary(&[0x89, b'P', b'N', b'G', 1, 2, 3, 4, 5, 6], None),
            None
        );
        assert_eq!(
            kind_in_binary(&utf16("nothing secret here\n", true, true), Some(&token)),
            None
        );
    }
}
