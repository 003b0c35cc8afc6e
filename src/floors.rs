//! The floor rule, checked: every top-level module of `src/` stands on one floor, and an import
//! only ever points to its own floor or one below (ARCHITECTURE.md, "Shape"), with no circle
//! between top-level modules.
//!
//! `FLOORS` is the one table of floors; ARCHITECTURE.md's diagram says the same. The test reads
//! the sources at test time (no build step, no extra crate): every `crate::…` path outside
//! comments and string literals — `use crate::{a, b::c}` groups included, and `crate::m!` macros
//! placed at the module that defines them — is mapped file → top-level module → floor. A
//! failure names the file, the line and the import.
//!
//! Between files the rule is only "no circle": every `crate::`, `super::` and `self::` path of
//! non-test code is resolved to the file that holds it (its longest prefix that is a file), and
//! a module and its own submodules count as one room (a parent re-exports its children, a child
//! reads its parent's names). Test code — `#[cfg(test)]` files and inline modules — is left out.

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

    /// Depth-first search: a node met again while it is still on the path closes a circle.
    fn visit<'a>(
        node: &'a str,
        edges: &BTreeMap<&'a str, BTreeMap<&'a str, &'a Import>>,
        path: &mut Vec<&'a str>,
        done: &mut BTreeSet<&'a str>,
    ) -> Option<Vec<&'a str>> {
        if let Some(at) = path.iter().position(|m| *m == node) {
            let mut circle = path[at..].to_vec();
            circle.push(node);
            return Some(circle);
        }
        if !done.insert(node) {
            return None;
        }
        path.push(node);
        for next in edges
            .get(node)
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

    /// The first circle of `edges`, each tie told as `a -> b: file:line: import`.
    fn first_circle<'a>(
        nodes: impl IntoIterator<Item = &'a str>,
        edges: &BTreeMap<&'a str, BTreeMap<&'a str, &'a Import>>,
    ) -> Option<String> {
        let mut done = BTreeSet::new();
        for node in nodes {
            if let Some(circle) = visit(node, edges, &mut Vec::new(), &mut done) {
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
                return Some(ties.join("\n"));
            }
        }
        None
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
        if let Some(circle) = first_circle(modules.iter().map(String::as_str), &edges) {
            panic!("an import circle between top-level modules:\n{circle}");
        }
    }

    /// A file's module path: `store/workers/lease.rs` → `[store, workers, lease]`.
    fn module_path(file: &str) -> Vec<String> {
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
    fn file_of(segments: &[String], files: &BTreeMap<String, String>) -> Option<String> {
        (1..=segments.len()).rev().find_map(|k| {
            let stem = segments[..k].join("/");
            [format!("{stem}.rs"), format!("{stem}/mod.rs")]
                .into_iter()
                .find(|candidate| files.contains_key(candidate))
        })
    }

    /// Whether the text before a `mod` declaration ends with `#[cfg(test)]` (visibility aside).
    fn for_tests_only(before: &str) -> bool {
        let before = before.trim_end();
        let before = before
            .strip_suffix("pub(crate)")
            .or_else(|| before.strip_suffix("pub"))
            .unwrap_or(before);
        before.trim_end().ends_with("#[cfg(test)]")
    }

    /// The byte ranges of the inline `mod name { … }` blocks of a file, with their names and
    /// whether they are compiled for tests only.
    fn inline_modules(code: &str) -> Vec<(usize, usize, String, bool)> {
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

    /// The module paths a path starting right after `crate::`, `super::` or `self::` names:
    /// `a::b::C` one, `a::{b, c::D}` one per item.
    fn path_segments(after: &str) -> Vec<Vec<String>> {
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

    /// The items of a `{…}` group, each as its path's segments (one level of nesting read).
    fn heads_with_tails(group: &str) -> Vec<Vec<String>> {
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

    #[test]
    fn no_circle_between_files() {
        let src = src_dir();
        let mut paths = Vec::new();
        rust_files(&src, &mut paths);
        let mut files = BTreeMap::new();
        for path in paths {
            let relative = path
                .strip_prefix(&src)
                .expect("under src/")
                .display()
                .to_string();
            let source = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
            files.insert(relative, code_only(&source));
        }
        // Test code is no part of the house: files declared `#[cfg(test)] mod x;` (and what is
        // below them), and inline `#[cfg(test)] mod x { … }` blocks.
        let mut tests_only = BTreeSet::new();
        for file in files.keys() {
            let segments = module_path(file);
            for k in 1..=segments.len() {
                let parent = if k == 1 {
                    Some("lib.rs".to_string())
                } else {
                    file_of(&segments[..k - 1], &files)
                };
                let Some(parent_code) = parent.and_then(|p| files.get(&p)) else {
                    continue;
                };
                let declaration = format!("mod {};", segments[k - 1]);
                if parent_code
                    .match_indices(&declaration)
                    .any(|(at, _)| for_tests_only(&parent_code[..at]))
                {
                    tests_only.insert(file.clone());
                }
            }
        }
        let mut found = Vec::new();
        for (file, code) in &files {
            if tests_only.contains(file) || file == "lib.rs" || file == "main.rs" {
                continue;
            }
            let here = module_path(file);
            let inline = inline_modules(code);
            for prefix in ["crate::", "super::", "self::"] {
                for (at, _) in code.match_indices(prefix) {
                    if code[..at]
                        .chars()
                        .next_back()
                        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
                    {
                        continue;
                    }
                    let blocks: Vec<_> = inline
                        .iter()
                        .filter(|(open, end, _, _)| (*open..*end).contains(&at))
                        .collect();
                    if blocks.iter().any(|(_, _, _, for_tests)| *for_tests) {
                        continue;
                    }
                    let mut module = here.clone();
                    module.extend(blocks.iter().map(|(_, _, name, _)| name.clone()));
                    let mut rest = &code[at + prefix.len()..];
                    let base = match prefix {
                        "crate::" => Vec::new(),
                        "self::" => module,
                        _ => {
                            module.pop();
                            while let Some(next) = rest.trim_start().strip_prefix("super::") {
                                module.pop();
                                rest = next;
                            }
                            module
                        }
                    };
                    let line = code[..at].matches('\n').count() + 1;
                    let line_start = code[..at].rfind('\n').map_or(0, |p| p + 1);
                    let text = code[line_start..]
                        .lines()
                        .next()
                        .unwrap_or_default()
                        .trim()
                        .to_string();
                    for segments in path_segments(rest) {
                        let full: Vec<String> = base.iter().cloned().chain(segments).collect();
                        let Some(target) = file_of(&full, &files) else {
                            continue;
                        };
                        let there = module_path(&target);
                        // A module and its own submodules are one room seen from outside.
                        if target == *file || here.starts_with(&there) || there.starts_with(&here) {
                            continue;
                        }
                        found.push(Import {
                            file: file.clone(),
                            line,
                            target,
                            text: text.clone(),
                        });
                    }
                }
            }
        }
        assert!(
            found.len() > 500,
            "only {} imports between files read: the reader is broken",
            found.len()
        );
        let mut edges: BTreeMap<&str, BTreeMap<&str, &Import>> = BTreeMap::new();
        for import in &found {
            edges
                .entry(import.file.as_str())
                .or_default()
                .entry(import.target.as_str())
                .or_insert(import);
        }
        if let Some(circle) = first_circle(files.keys().map(String::as_str), &edges) {
            panic!("an import circle between files:\n{circle}");
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
}
