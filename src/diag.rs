//! Diagnostics: a problem in an input file, with the place it was found.

use crate::yaml::Pos;
use std::fmt;
use std::path::{Path, PathBuf};

/// One problem found in an input file. Displayed as `file:line:column: message`, the form
/// editors and terminals turn into links.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub file: PathBuf,
    pub pos: Option<Pos>,
    pub message: String,
}

impl Diagnostic {
    pub fn new(file: &Path, pos: Option<Pos>, message: impl Into<String>) -> Self {
        Diagnostic {
            file: file.to_path_buf(),
            pos,
            message: message.into(),
        }
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.pos {
            Some(p) => write!(
                f,
                "{}:{}:{}: {}",
                self.file.display(),
                p.line,
                p.column,
                self.message
            ),
            None => write!(f, "{}: {}", self.file.display(), self.message),
        }
    }
}

/// Every problem found in one or more files; loading fails with all of them, not the first.
#[derive(Debug, Clone, thiserror::Error)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, d) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{d}")?;
        }
        Ok(())
    }
}

/// Repository and job names become paths, branch names and SQL keys: keep them boring.
pub fn valid_name(name: &str) -> bool {
    let mut chars = name.chars();
    match chars.next() {
        Some(c) if c.is_ascii_alphanumeric() => {}
        _ => return false,
    }
    chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

pub const NAME_RULE: &str = "[A-Za-z0-9][A-Za-z0-9._-]*";

#[cfg(test)]
mod tests {
    use super::valid_name;

    #[test]
    fn names() {
        for ok in ["a", "acdc-core", "adl.examples", "X_1"] {
            assert!(valid_name(ok), "{ok}");
        }
        for bad in ["", "-a", ".hidden", "..", "a/b", "a b", "a;rm", "é", "a\n"] {
            assert!(!valid_name(bad), "{bad:?}");
        }
    }
}
