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

impl Diagnostics {
    /// Puts the problems in the order a compiler lists them: by file, then line, then
    /// column; in each file those without a position after those with one. Stable, so
    /// problems at one place keep the order they were found in.
    pub fn sort(&mut self) {
        self.0.sort_by(|a, b| {
            (&a.file, a.pos.is_none(), a.pos).cmp(&(&b.file, b.pos.is_none(), b.pos))
        });
    }
}

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
    use super::{Diagnostic, Diagnostics, valid_name};
    use crate::yaml::Pos;
    use std::path::Path;

    #[test]
    fn problems_sort_by_file_line_and_column_positionless_last() {
        let at = |file: &str, pos: Option<(u64, u64)>, message: &str| {
            Diagnostic::new(
                Path::new(file),
                pos.map(|(line, column)| Pos { line, column }),
                message,
            )
        };
        let mut d = Diagnostics(vec![
            at("b.yaml", Some((1, 1)), "b1"),
            at("a.yaml", None, "a-none-1"),
            at("a.yaml", Some((10, 2)), "a10"),
            at("a.yaml", Some((2, 9)), "a2:9"),
            at("a.yaml", None, "a-none-2"),
            at("a.yaml", Some((2, 3)), "a2:3"),
            at("a.yaml", Some((2, 3)), "a2:3 again"),
        ]);
        d.sort();
        let order: Vec<&str> = d.0.iter().map(|d| d.message.as_str()).collect();
        assert_eq!(
            order,
            [
                "a2:3",
                "a2:3 again",
                "a2:9",
                "a10",
                "a-none-1",
                "a-none-2",
                "b1"
            ]
        );
    }

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
