//! The floor rule, checked: every top-level module of `src/` stands on one floor, and an import
//! only ever points to its own floor or one below (ARCHITECTURE.md, "Shape"), with no circle
//! between top-level modules.
//!
//! `FLOORS` is the one table of floors; ARCHITECTURE.md's diagram says the same. The test reads
//! the sources at test time (no build step, no extra crate): every `crate::…` path outside
//! comments and string literals — `use crate::{a, b::c}` groups included, and `crate::m!` macros
//! placed at the module that defines them — is mapped file → top-level module → floor. A
//! failure names the file, the line and the import.

/// The floors, top first: (floor, top-level modules). Floor 1 is the ground.
const FLOORS: &[(u8, &[&str])] = &[
    // the two faces, side by side (`orch serve` is cli/ calling `serve::run`)
    (5, &["cli", "serve"]),
    // the operator API both faces ask
    (4, &["operator"]),
    // what orch does
    (3, &["app"]),
    // the world, each behind a small type: database, forge, files, processes, containment
    (
        2,
        &[
            "store",
            "forge",
            "checkpoint",
            "alerts",
            "gitops",
            "wake",
            "guard",
            "contain",
            "pidns",
            "sandbox",
            "account",
            "report_wire",
            "process",
            "token",
            "prompt",
            "fault",
        ],
    ),
    // the core: plain data in, plain data out
    (
        1,
        &[
            "milestone",
            "ci",
            "wave",
            "contract",
            "config",
            "graph",
            "lock",
            "manifest",
            "branch_protection",
            "protect",
            "clone_config",
            "secret",
            "node",
            "sha",
            "duration",
            "diag",
            "text",
            "yaml",
        ],
    ),
];

#[cfg(test)]
mod tests {
    use super::FLOORS;
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::{Path, PathBuf};

    /// One `crate::<module>` reference: where it stands and the module it names.
    #[derive(Debug, Clone)]
    struct Import {
        file: String,
        line: usize,
        target: String,
        text: String,
    }

    fn src_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
    }

    fn floor_of(module: &str) -> Option<u8> {
        FLOORS
            .iter()
            .find(|(_, modules)| modules.contains(&module))
            .map(|(floor, _)| *floor)
    }

    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
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
    fn module_of(relative: &Path) -> Option<String> {
        let first = relative.components().next()?.as_os_str().to_str()?;
        let name = first.strip_suffix(".rs").unwrap_or(first);
        (!matches!(name, "lib" | "main")).then(|| name.to_string())
    }

    /// The source with comments, string and character literals blanked out (newlines kept, so
    /// byte offsets and line numbers still match the file).
    fn code_only(source: &str) -> String {
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
        (rest.get(after_prefix + hashes) == Some(&b'"'))
            .then_some((after_prefix + hashes + 1, hashes))
    }

    /// The first identifier of `text`, skipping white space.
    fn first_ident(text: &str) -> Option<&str> {
        let text = text.trim_start();
        let end = text
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(text.len());
        (end > 0).then(|| &text[..end])
    }

    /// The names a `crate::` path starts with: one, or one per item of a `{…}` group.
    fn heads(after: &str) -> Vec<(String, bool)> {
        let is_macro = |name: &str, rest: &str| rest[name.len()..].trim_start().starts_with('!');
        if !after.starts_with('{') {
            let trimmed = after.trim_start();
            return first_ident(trimmed)
                .map(|name| vec![(name.to_string(), is_macro(name, trimmed))])
                .unwrap_or_default();
        }
        let mut items = Vec::new();
        let (mut depth, mut start) = (0usize, 1usize);
        for (at, c) in after.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        items.push(&after[start..at]);
                        break;
                    }
                }
                ',' if depth == 1 => {
                    items.push(&after[start..at]);
                    start = at + 1;
                }
                _ => {}
            }
        }
        items
            .into_iter()
            .filter_map(|item| first_ident(item).map(|name| (name.to_string(), false)))
            .collect()
    }

    /// Every exported macro, by the top-level module that defines it (`crate::params!`).
    fn macro_homes(files: &[(String, String, String)]) -> BTreeMap<String, String> {
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

    /// Every `crate::…` reference of every file of `src/` but the crate root and the binary.
    fn imports() -> (Vec<Import>, BTreeSet<String>) {
        let src = src_dir();
        let mut paths = Vec::new();
        rust_files(&src, &mut paths);
        let mut files = Vec::new();
        for path in paths {
            let relative = path.strip_prefix(&src).expect("under src/").to_path_buf();
            let Some(module) = module_of(&relative) else {
                continue;
            };
            let source = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
            files.push((relative.display().to_string(), module, code_only(&source)));
        }
        let macros = macro_homes(&files);
        let mut found = Vec::new();
        let modules: BTreeSet<String> = files.iter().map(|(_, module, _)| module.clone()).collect();
        for (file, module, code) in &files {
            for (at, _) in code.match_indices("crate::") {
                let before = code[..at].chars().next_back();
                if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
                    continue;
                }
                let line_no = code[..at].matches('\n').count() + 1;
                let line_start = code[..at].rfind('\n').map_or(0, |p| p + 1);
                let line_text = code[line_start..]
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .trim()
                    .to_string();
                for (head, is_macro) in heads(&code[at + "crate::".len()..]) {
                    // `crate::params!` and `use crate::params;` name a macro, not a module.
                    let a_macro = is_macro || floor_of(&head).is_none();
                    let target = match macros.get(&head) {
                        Some(home) if a_macro => home.clone(),
                        _ => head,
                    };
                    if &target != module {
                        found.push(Import {
                            file: file.clone(),
                            line: line_no,
                            target,
                            text: line_text.clone(),
                        });
                    }
                }
            }
        }
        (found, modules)
    }

    /// The modules `src/lib.rs` declares.
    fn declared_modules() -> Vec<String> {
        let lib = std::fs::read_to_string(src_dir().join("lib.rs")).expect("reading src/lib.rs");
        let code = code_only(&lib);
        code.lines()
            .filter_map(|line| {
                let line = line.trim();
                let rest = line
                    .strip_prefix("pub mod ")
                    .or_else(|| line.strip_prefix("mod "))?;
                first_ident(rest).map(str::to_string)
            })
            .filter(|name| name != "floors")
            .collect()
    }

    #[test]
    fn every_top_level_module_stands_on_one_floor() {
        let mut seen = BTreeSet::new();
        for (_, modules) in FLOORS {
            for module in *modules {
                assert!(
                    seen.insert(*module),
                    "`{module}` stands on two floors in FLOORS"
                );
            }
        }
        let declared = declared_modules();
        let missing: Vec<_> = declared.iter().filter(|m| floor_of(m).is_none()).collect();
        assert!(
            missing.is_empty(),
            "top-level modules of src/lib.rs with no floor in src/floors.rs: {missing:?}"
        );
        let stale: Vec<_> = seen
            .iter()
            .filter(|m| !declared.iter().any(|d| d == *m))
            .collect();
        assert!(
            stale.is_empty(),
            "FLOORS names modules src/lib.rs does not declare: {stale:?}"
        );
    }

    #[test]
    fn no_import_points_to_a_higher_floor() {
        let (found, _) = imports();
        assert!(
            found.len() > 100,
            "only {} imports read: the reader is broken",
            found.len()
        );
        let mut wrong = Vec::new();
        for import in &found {
            let from = import
                .file
                .split('/')
                .next()
                .map(|f| f.trim_end_matches(".rs"))
                .unwrap_or_default();
            let (Some(here), Some(there)) = (floor_of(from), floor_of(&import.target)) else {
                wrong.push(format!(
                    "src/{}:{}: `{}` — `{}` has no floor in src/floors.rs",
                    import.file, import.line, import.text, import.target
                ));
                continue;
            };
            if there > here {
                wrong.push(format!(
                    "src/{}:{}: `{}` — floor {here} ({from}) imports floor {there} ({})",
                    import.file, import.line, import.text, import.target
                ));
            }
        }
        assert!(
            wrong.is_empty(),
            "imports that run back up:\n{}",
            wrong.join("\n")
        );
    }

    #[test]
    fn no_circle_between_top_level_modules() {
        let (found, modules) = imports();
        let mut edges: BTreeMap<&str, BTreeMap<&str, &Import>> = BTreeMap::new();
        for import in &found {
            let from = import
                .file
                .split('/')
                .next()
                .map(|f| f.trim_end_matches(".rs"))
                .unwrap_or_default();
            edges
                .entry(from)
                .or_default()
                .entry(import.target.as_str())
                .or_insert(import);
        }
        // Depth-first search: a module met again while it is still on the path closes a circle.
        fn visit<'a>(
            module: &'a str,
            edges: &BTreeMap<&'a str, BTreeMap<&'a str, &'a Import>>,
            path: &mut Vec<&'a str>,
            done: &mut BTreeSet<&'a str>,
        ) -> Option<Vec<&'a str>> {
            if let Some(at) = path.iter().position(|m| *m == module) {
                let mut circle = path[at..].to_vec();
                circle.push(module);
                return Some(circle);
            }
            if !done.insert(module) {
                return None;
            }
            path.push(module);
            for next in edges
                .get(module)
                .into_iter()
                .flat_map(|targets| targets.keys())
            {
                if let Some(circle) = visit(next, edges, path, done) {
                    return Some(circle);
                }
            }
            path.pop();
            None
        }
        let mut done = BTreeSet::new();
        for module in &modules {
            if let Some(circle) = visit(module, &edges, &mut Vec::new(), &mut done) {
                let ties: Vec<String> = circle
                    .windows(2)
                    .map(|pair| {
                        let import = edges[pair[0]][pair[1]];
                        format!(
                            "{} -> {}: src/{}:{}: `{}`",
                            pair[0], pair[1], import.file, import.line, import.text
                        )
                    })
                    .collect();
                panic!(
                    "an import circle between top-level modules:\n{}",
                    ties.join("\n")
                );
            }
        }
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
    }
}
