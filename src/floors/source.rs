//! Reading the sources for their paths: the files of `src/`, their code with comments and
//! literals blanked, the `crate::`/`super::`/`self::` paths in it and the files those name.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub(super) fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

pub(super) fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file of `src/` belongs to; `None` for the crate root and the binary.
pub(super) fn module_of(relative: &Path) -> Option<String> {
    let first = relative.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (!matches!(name, "lib" | "main")).then(|| name.to_string())
}

/// The source with comments, string and character literals blanked out (newlines kept, so
/// byte offsets and line numbers still match the file).
pub(super) fn code_only(source: &str) -> String {
    let bytes = source.as_bytes();
    let mut out = bytes.to_vec();
    let blank = |out: &mut Vec<u8>, from: usize, to: usize| {
        for byte in &mut out[from..to] {
            if *byte != b'\n' {
                *byte = b' ';
            }
        }
    };
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut i = 0;
    while i < bytes.len() {
        let rest = &bytes[i..];
        if rest.starts_with(b"//") {
            let end = rest
                .iter()
                .position(|&b| b == b'\n')
                .map_or(bytes.len(), |p| i + p);
            blank(&mut out, i, end);
            i = end;
        } else if rest.starts_with(b"/*") {
            let (mut depth, mut j) = (0usize, i);
            while j < bytes.len() {
                if bytes[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if bytes[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            blank(&mut out, i, j);
            i = j;
        } else if (rest[0] == b'r' || rest.starts_with(b"br"))
            && (i == 0 || !ident(bytes[i - 1]))
            && raw_string_start(rest).is_some()
        {
            let (open, hashes) = raw_string_start(rest).expect("checked above");
            let mut close = vec![b'"'];
            close.extend(std::iter::repeat_n(b'#', hashes));
            let body = i + open;
            let end = bytes[body..]
                .windows(close.len())
                .position(|w| w == close.as_slice())
                .map_or(bytes.len(), |p| body + p + close.len());
            blank(&mut out, i, end);
            i = end;
        } else if rest[0] == b'"' {
            let mut j = i + 1;
            while j < bytes.len() && bytes[j] != b'"' {
                j += if bytes[j] == b'\\' { 2 } else { 1 };
            }
            blank(&mut out, i, (j + 1).min(bytes.len()));
            i = j + 1;
        } else if rest[0] == b'\'' {
            // A character literal ('x', '\n', '\u{..}') or a lifetime ('a): only the first is
            // blanked, so a quote character inside it cannot open a string.
            if rest.get(1) == Some(&b'\\') {
                let end = rest[2..]
                    .iter()
                    .position(|&b| b == b'\'')
                    .map_or(bytes.len(), |p| i + 2 + p + 1);
                blank(&mut out, i, end);
                i = end;
            } else if let Some(c) = source[i + 1..].chars().next() {
                let after = i + 1 + c.len_utf8();
                if bytes.get(after) == Some(&b'\'') {
                    blank(&mut out, i, after + 1);
                    i = after + 1;
                } else {
                    i += 1;
                }
            } else {
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    String::from_utf8(out).expect("only ASCII bytes were replaced, whole characters at a time")
}

/// `r"`, `r#"`, `br##"`…: the length of the opening and the number of `#`.
fn raw_string_start(rest: &[u8]) -> Option<(usize, usize)> {
    let after_prefix = if rest.starts_with(b"br") { 2 } else { 1 };
    let hashes = rest[after_prefix..]
        .iter()
        .take_while(|&&b| b == b'#')
        .count();
    (rest.get(after_prefix + hashes) == Some(&b'"')).then_some((after_prefix + hashes + 1, hashes))
}

/// The first identifier of `text`, skipping white space.
pub(super) fn first_ident(text: &str) -> Option<&str> {
    let text = text.trim_start();
    let end = text
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(text.len());
    (end > 0).then(|| &text[..end])
}

/// The names a `crate::` path starts with: one, or one per item of a `{…}` group.
pub(super) fn heads(after: &str) -> Vec<(String, bool)> {
    let is_macro = |name: &str, rest: &str| rest[name.len()..].trim_start().starts_with('!');
    if !after.starts_with('{') {
        let trimmed = after.trim_start();
        return first_ident(trimmed)
            .map(|name| vec![(name.to_string(), is_macro(name, trimmed))])
            .unwrap_or_default();
    }
    group_items(after)
        .into_iter()
        .filter_map(|item| first_ident(item).map(|name| (name.to_string(), false)))
        .collect()
}

/// The items of a `{…}` group, each as its path's segments (one level of nesting read).
fn heads_with_tails(group: &str) -> Vec<Vec<String>> {
    group_items(group)
        .into_iter()
        .map(|item| {
            // `b::c::D as E`: every segment up to the one that is more than a name.
            let mut segments = Vec::new();
            for segment in item.split("::") {
                let Some(name) = first_ident(segment) else {
                    break;
                };
                segments.push(name.to_string());
                if segment.trim() != name {
                    break;
                }
            }
            segments
        })
        .filter(|segments| !segments.is_empty())
        .collect()
}

/// The module paths a path starting right after `crate::`, `super::` or `self::` names:
/// `a::b::C` one, `a::{b, c::D}` one per item.
pub(super) fn path_segments(after: &str) -> Vec<Vec<String>> {
    let mut prefix = Vec::new();
    let mut rest = after;
    loop {
        let trimmed = rest.trim_start();
        if trimmed.starts_with('{') {
            return heads_with_tails(trimmed)
                .into_iter()
                .map(|tail| prefix.iter().cloned().chain(tail).collect())
                .collect();
        }
        let Some(name) = first_ident(trimmed) else {
            return vec![prefix];
        };
        prefix.push(name.to_string());
        let after_name = trimmed[name.len()..].trim_start();
        match after_name.strip_prefix("::") {
            Some(next) => rest = next,
            None => return vec![prefix],
        }
    }
}

/// Every exported macro, by the top-level module that defines it (`crate::params!`).
pub(super) fn macro_homes(files: &[(String, String, String)]) -> BTreeMap<String, String> {
    let mut homes = BTreeMap::new();
    for (_, module, code) in files {
        for (at, _) in code.match_indices("macro_rules!") {
            if let Some(name) = first_ident(&code[at + "macro_rules!".len()..]) {
                homes.insert(name.to_string(), module.clone());
            }
        }
    }
    homes
}

/// A file's module path: `store/workers/lease.rs` → `[store, workers, lease]`.
pub(super) fn module_path(file: &str) -> Vec<String> {
    let mut segments: Vec<String> = file
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_string)
        .collect();
    if segments.last().is_some_and(|last| last == "mod") {
        segments.pop();
    }
    segments
}

/// The file that holds the item a module path names: its longest prefix that is a file.
pub(super) fn file_of(segments: &[String], files: &BTreeMap<String, String>) -> Option<String> {
    (1..=segments.len()).rev().find_map(|k| {
        let stem = segments[..k].join("/");
        [format!("{stem}.rs"), format!("{stem}/mod.rs")]
            .into_iter()
            .find(|candidate| files.contains_key(candidate))
    })
}

/// Whether the text before a `mod` declaration ends with `#[cfg(test)]` (visibility aside).
pub(super) fn for_tests_only(before: &str) -> bool {
    let before = before.trim_end();
    let before = before
        .strip_suffix("pub(crate)")
        .or_else(|| before.strip_suffix("pub"))
        .unwrap_or(before);
    before.trim_end().ends_with("#[cfg(test)]")
}

/// The byte ranges of the inline `mod name { … }` blocks of a file, with their names and
/// whether they are compiled for tests only.
pub(super) fn inline_modules(code: &str) -> Vec<(usize, usize, String, bool)> {
    let mut found = Vec::new();
    for (at, _) in code.match_indices("mod ") {
        if code[..at]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            continue;
        }
        let Some(name) = first_ident(&code[at + 4..]) else {
            continue;
        };
        let after_name = at + 4 + code[at + 4..].find(name).unwrap_or(0) + name.len();
        if !code[after_name..].trim_start().starts_with('{') {
            continue;
        }
        let open = after_name + code[after_name..].find('{').expect("checked above");
        let mut depth = 0usize;
        let mut end = code.len();
        for (offset, c) in code[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + offset;
                        break;
                    }
                }
                _ => {}
            }
        }
        found.push((open, end, name.to_string(), for_tests_only(&code[..at])));
    }
    found
}

#[test]
fn the_reader_sees_groups_macros_and_skips_comments_and_strings() {
    let code = code_only(
        "use crate::{a::X, b::{c, d}};\n// crate::e\nlet s = \"crate::f\"; let r = r#\"crate::g\"#;\nlet q = '\"'; crate::h::y(); crate::m!();\n",
    );
    let heads: Vec<(String, bool)> = code
        .match_indices("crate::")
        .flat_map(|(at, _)| heads(&code[at + "crate::".len()..]))
        .collect();
    let expected = [("a", false), ("b", false), ("h", false), ("m", true)];
    assert_eq!(heads, expected.map(|(n, m)| (n.to_string(), m)).to_vec());
    let owned = |paths: &[&[&str]]| -> Vec<Vec<String>> {
        paths
            .iter()
            .map(|p| p.iter().map(|s| s.to_string()).collect())
            .collect()
    };
    assert_eq!(
        path_segments("a::{b::C as D, e, f::{g, h}};"),
        owned(&[&["a", "b", "C"], &["a", "e"], &["a", "f"]])
    );
    assert_eq!(path_segments("x::y::z(1)"), owned(&[&["x", "y", "z"]]));
}

/// The items of the `{…}` group `group` starts with, split at its own commas.
fn group_items(group: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0usize, 1usize);
    for (at, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    items.push(&group[start..at]);
                    break;
                }
            }
            ',' if depth == 1 => {
                items.push(&group[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    items
}

/// The number and the trimmed text of the line of `code` that byte `at` stands on.
pub(super) fn line_at(code: &str, at: usize) -> (usize, String) {
    let number = code[..at].matches('\n').count() + 1;
    let start = code[..at].rfind('\n').map_or(0, |p| p + 1);
    let text = code[start..]
        .lines()
        .next()
        .unwrap_or_default()
        .trim()
        .to_string();
    (number, text)
}
