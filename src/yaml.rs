//! The one place orch parses and writes YAML.
//!
//! serde_yaml is archived; serde-saphyr is the maintained, pure-Rust replacement. Keeping it
//! behind these two functions means a later swap touches this file only.

use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fmt;

/// A position in a source file, 1-based, as editors show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Pos {
    pub line: u64,
    pub column: u64,
}

impl Pos {
    pub fn of(loc: &serde_saphyr::Location) -> Option<Pos> {
        (loc.line() > 0).then(|| Pos {
            line: loc.line(),
            column: loc.column(),
        })
    }
}

/// A YAML syntax or shape error, with the place it was found when the parser knows it.
#[derive(Debug, Clone)]
pub struct YamlError {
    pub pos: Option<Pos>,
    pub message: String,
}

impl fmt::Display for YamlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Parses one YAML document into `T`.
///
/// Duplicate keys are passed through to the receiving type so that maps orch validates itself
/// (the `repos:` map) can report every duplicate with both places; derived structs still
/// reject repeated fields.
pub fn from_yaml_str<T: DeserializeOwned>(src: &str) -> Result<T, YamlError> {
    let options = serde_saphyr::options! {
        duplicate_keys: serde_saphyr::options::DuplicateKeyPolicy::PassThrough,
    };
    serde_saphyr::from_str_with_options(src, options).map_err(|e| {
        let pos = e.location().as_ref().and_then(Pos::of);
        // The rendered error carries a source snippet; keep only its first line so our
        // own `file:line:col:` prefix stays the one place a location is printed.
        let rendered = e.to_string();
        let first = rendered.lines().next().unwrap_or("invalid YAML").trim();
        YamlError {
            pos,
            message: strip_location_suffix(first).to_string(),
        }
    })
}

/// Serialises `value` as YAML (used for checkpoint files).
pub fn to_yaml_string<T: Serialize>(value: &T) -> Result<String, String> {
    serde_saphyr::to_string(value).map_err(|e| e.to_string())
}

fn strip_location_suffix(msg: &str) -> &str {
    // serde-saphyr renders "error: line 3 column 5: <message>"; we print the location ourselves.
    let msg = msg.strip_prefix("error: ").unwrap_or(msg);
    if let Some(rest) = msg.strip_prefix("line ")
        && let Some(idx) = rest.find(": ")
        && rest[..idx].contains("column")
    {
        return &rest[idx + 2..];
    }
    msg
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Doc {
        name: String,
    }

    #[test]
    fn unknown_key_has_a_position() {
        let err = from_yaml_str::<Doc>("name: a\nnmae: b\n").unwrap_err();
        assert!(err.message.contains("nmae"), "{}", err.message);
        assert_eq!(err.pos.map(|p| p.line), Some(2));
    }

    #[test]
    fn syntax_error_has_a_position() {
        let err = from_yaml_str::<Doc>("name: [unclosed\n").unwrap_err();
        assert!(err.pos.is_some(), "{err:?}");
    }
}
