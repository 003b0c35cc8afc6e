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
//! The reader of the sources is `floors/source.rs`.

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
            "upstreams",
            "token",
            "prompt",
            "fault",
        ],
    ),
    // the model and its rules: no store, no process, no clock
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

/// Ties between files that close a circle today, each to be opened, never to grow: (file, file it
/// imports, why it is left). The test skips exactly these ties.
const KNOWN_CIRCLE_TIES: &[(&str, &str, &str)] = &[];

mod source;

use source::{
    code_only, file_of, first_ident, for_tests_only, heads, inline_modules, line_at, macro_homes,
    module_of, module_path, path_segments, rust_files, src_dir,
};
use std::collections::{BTreeMap, BTreeSet};

/// One `crate::<module>` reference: where it stands and the module it names.
#[derive(Debug, Clone)]
struct Import {
    file: String,
    line: usize,
    target: String,
    text: String,
}

impl Import {
    /// The top-level module of the file the import stands in.
    fn module(&self) -> &str {
        let first = self.file.split('/').next().unwrap_or_default();
        first.strip_suffix(".rs").unwrap_or(first)
    }
}

fn floor_of(module: &str) -> Option<u8> {
    FLOORS
        .iter()
        .find(|(_, modules)| modules.contains(&module))
        .map(|(floor, _)| *floor)
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
            let (line_no, line_text) = line_at(code, at);
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
        let from = import.module();
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
        let from = import.module();
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
    let mut known_seen = BTreeSet::new();
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
                let (line, text) = line_at(code, at);
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
                    if let Some(tie) = KNOWN_CIRCLE_TIES
                        .iter()
                        .find(|(from, to, _)| from == file && *to == target)
                    {
                        known_seen.insert((tie.0, tie.1));
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
    // A known tie that is gone is struck from the list, so the list only ever shrinks.
    let gone: Vec<_> = KNOWN_CIRCLE_TIES
        .iter()
        .filter(|(from, to, _)| !known_seen.contains(&(*from, *to)))
        .map(|(from, to, _)| format!("{from} -> {to}"))
        .collect();
    assert!(
        gone.is_empty(),
        "ties in KNOWN_CIRCLE_TIES that the code no longer has (strike them): {gone:?}"
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
