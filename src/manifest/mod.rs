//! What a clone's manifests say: the package names it publishes and the packages it depends
//! on, each ecosystem read as its own tools read it (one file per ecosystem), and the edges
//! between clones those give — matched by package name, normalised as the ecosystem compares
//! names, never by words found in a manifest's prose. Pure: file names and texts in, names,
//! dependencies (each with the line it was read from) and edges out; `orch init` reads the files.

pub mod cargo;
pub mod go;
pub mod gradle;
pub mod maven;
pub mod npm;
pub mod python;

use std::collections::HashMap;

/// A package registry's world: names are compared only within one.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub enum Ecosystem {
    Cargo,
    Python,
    Npm,
    Go,
    /// Maven and Gradle: `group:artifact` coordinates.
    Jvm,
}

/// A package name as its ecosystem compares names.
#[derive(Clone, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub struct PackageKey {
    pub ecosystem: Ecosystem,
    pub name: String,
}

impl PackageKey {
    /// `raw` normalised: Python by PEP 503 (case; runs of `-`, `_`, `.` are one `-`), Cargo
    /// as crates.io (case; `-` and `_` the same), npm by case; Go module paths and Maven
    /// coordinates as written.
    pub fn new(ecosystem: Ecosystem, raw: &str) -> Self {
        let raw = raw.trim();
        let name = match ecosystem {
            Ecosystem::Python => {
                let mut out = String::with_capacity(raw.len());
                let mut in_run = false;
                for c in raw.chars() {
                    if matches!(c, '-' | '_' | '.') {
                        if !in_run {
                            out.push('-');
                        }
                        in_run = true;
                    } else {
                        out.extend(c.to_lowercase());
                        in_run = false;
                    }
                }
                out
            }
            Ecosystem::Cargo => raw.to_ascii_lowercase().replace('_', "-"),
            Ecosystem::Npm => raw.to_lowercase(),
            Ecosystem::Go | Ecosystem::Jvm => raw.to_string(),
        };
        PackageKey { ecosystem, name }
    }
}

/// Where something was read: a file of the clone (relative path), a line (1-based) and that
/// line's text, for the comment that explains a guessed edge.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Source {
    pub file: String,
    pub line: usize,
    pub text: String,
}

impl Source {
    /// The source of what starts at byte `offset` of `text`.
    pub fn at(file: &str, text: &str, offset: usize) -> Self {
        let offset = offset.min(text.len());
        let line = text.as_bytes()[..offset]
            .iter()
            .filter(|b| **b == b'\n')
            .count()
            + 1;
        Source::line(file, text, line)
    }

    /// The source of line `line` (1-based) of `text`.
    pub fn line(file: &str, text: &str, line: usize) -> Self {
        let raw = text.lines().nth(line.saturating_sub(1)).unwrap_or("");
        Source {
            file: file.to_string(),
            line,
            text: raw.trim().to_string(),
        }
    }
}

impl std::fmt::Display for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// One dependency a manifest declares.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Dependency {
    pub key: PackageKey,
    pub source: Source,
    /// Declared for tests, examples or development only (Cargo's `dev-dependencies`, npm's
    /// `devDependencies`): not needed to build the package.
    pub dev: bool,
}

/// What one clone's manifests say.
#[derive(Clone, Default, Debug)]
pub struct Manifest {
    /// The packages the clone publishes (a workspace: each member's).
    pub names: Vec<PackageKey>,
    pub deps: Vec<Dependency>,
    /// Workspace members / modules, as the manifest writes them (a path, or `dir/*`),
    /// relative to the manifest's directory joined with it: for the reader of files to add.
    pub members: Vec<String>,
    /// Manifests that could not be read, each with why.
    pub unreadable: Vec<String>,
}

impl Manifest {
    fn dep(&mut self, ecosystem: Ecosystem, name: &str, source: Source) {
        self.dep_of(ecosystem, name, source, false);
    }

    /// A dependency, `dev` when it is for tests, examples or development only.
    fn dep_of(&mut self, ecosystem: Ecosystem, name: &str, source: Source, dev: bool) {
        if name.trim().is_empty() {
            return;
        }
        self.deps.push(Dependency {
            key: PackageKey::new(ecosystem, name),
            source,
            dev,
        });
    }

    fn name(&mut self, ecosystem: Ecosystem, name: &str) {
        let key = PackageKey::new(ecosystem, name);
        if !name.trim().is_empty() && !self.names.contains(&key) {
            self.names.push(key);
        }
    }
}

/// Whether orch reads a file of this path (relative to the clone) as a manifest.
pub fn is_manifest(path: &str) -> bool {
    let (dir, base) = match path.rsplit_once('/') {
        Some((d, b)) => (d, b),
        None => ("", path),
    };
    matches!(
        base,
        "Cargo.toml"
            | "pyproject.toml"
            | "package.json"
            | "pnpm-workspace.yaml"
            | "go.mod"
            | "pom.xml"
            | "build.gradle"
            | "build.gradle.kts"
            | "settings.gradle"
            | "settings.gradle.kts"
    ) || python::is_requirements(dir, base)
}

/// The file names at a clone's (or a member's) top that may be manifests; requirement files
/// are found by `is_manifest` among the directory's entries and `requirements/`.
pub const FILES: &[&str] = &[
    "Cargo.toml",
    "pyproject.toml",
    "package.json",
    "pnpm-workspace.yaml",
    "go.mod",
    "pom.xml",
    "build.gradle",
    "build.gradle.kts",
    "settings.gradle",
    "settings.gradle.kts",
];

/// Reads one clone's manifest files (`(path relative to the clone, text)`, in the order
/// given); `dir_name` is the clone's folder, Gradle's default project name.
pub fn read_clone(dir_name: &str, files: &[(String, String)]) -> Manifest {
    let mut m = Manifest::default();
    let mut gradle = gradle::Project::default();
    for (path, text) in files {
        let (dir, base) = match path.rsplit_once('/') {
            Some((d, b)) => (d, b),
            None => ("", path.as_str()),
        };
        let before = m.members.len();
        let read = match base {
            "Cargo.toml" => cargo::read(path, text, &mut m),
            "pyproject.toml" => python::read_pyproject(path, text, &mut m),
            "package.json" => npm::read(path, text, &mut m),
            "pnpm-workspace.yaml" => {
                npm::read_pnpm_workspace(text, &mut m);
                Ok(())
            }
            "go.mod" => {
                go::read(path, text, &mut m);
                Ok(())
            }
            "pom.xml" => maven::read(path, text, &mut m),
            "build.gradle" | "build.gradle.kts" => {
                gradle.build(dir, path, text, &mut m);
                Ok(())
            }
            "settings.gradle" | "settings.gradle.kts" => {
                gradle.settings(dir, text);
                Ok(())
            }
            _ if python::is_requirements(dir, base) => {
                python::read_requirements(path, text, &mut m);
                Ok(())
            }
            _ => Ok(()),
        };
        if let Err(why) = read {
            m.unreadable.push(format!("{path}: {why}"));
        }
        // Members are relative to the manifest that names them.
        if !dir.is_empty() {
            for member in &mut m.members[before..] {
                *member = format!("{dir}/{member}");
            }
        }
    }
    gradle.publish(dir_name, &mut m);
    m
}

/// One guessed edge: the clone depended on (an index into the clones given) and the line
/// that says so.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Edge {
    pub to: usize,
    pub source: Source,
    /// Every declaration of it is for tests, examples or development only.
    pub dev_only: bool,
}

/// Each clone's edges to the others, in the order its manifests declare them (one per
/// clone depended on, from its first declaration). A package published by two clones is
/// no one's: the edge would be a guess between them.
pub fn edges(clones: &[Manifest]) -> Vec<Vec<Edge>> {
    let mut owner: HashMap<&PackageKey, Option<usize>> = HashMap::new();
    for (i, c) in clones.iter().enumerate() {
        for key in &c.names {
            owner
                .entry(key)
                .and_modify(|o| {
                    if *o != Some(i) {
                        *o = None
                    }
                })
                .or_insert(Some(i));
        }
    }
    clones
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mut out: Vec<Edge> = Vec::new();
            for d in &c.deps {
                let Some(Some(to)) = owner.get(&d.key).copied() else {
                    continue;
                };
                if to == i {
                    continue;
                }
                match out.iter_mut().find(|e| e.to == to) {
                    // A build declaration makes the edge a build edge, wherever it stands.
                    Some(e) => e.dev_only &= d.dev,
                    None => out.push(Edge {
                        to,
                        source: d.source.clone(),
                        dev_only: d.dev,
                    }),
                }
            }
            out
        })
        .collect()
}

/// TOML helpers shared by the TOML ecosystems: a document with spans (for source lines).
pub(crate) mod tomlx {
    pub use toml::Spanned;
    pub use toml::de::{DeTable, DeValue};

    pub fn parse(text: &str) -> Result<Spanned<DeTable<'_>>, String> {
        DeTable::parse(text).map_err(|e| e.to_string().lines().next().unwrap_or("").to_string())
    }

    /// The entry `key` of `table`, with its key (for the key's span).
    pub fn entry<'a, 'i>(
        table: &'a DeTable<'i>,
        key: &str,
    ) -> Option<(
        &'a Spanned<std::borrow::Cow<'i, str>>,
        &'a Spanned<DeValue<'i>>,
    )> {
        table.iter().find(|(k, _)| k.get_ref().as_ref() == key)
    }

    pub fn table<'a, 'i>(table: &'a DeTable<'i>, key: &str) -> Option<&'a DeTable<'i>> {
        entry(table, key).and_then(|(_, v)| v.get_ref().as_table())
    }

    pub fn str<'a>(table: &'a DeTable<'_>, key: &str) -> Option<&'a str> {
        entry(table, key).and_then(|(_, v)| v.get_ref().as_str())
    }

    /// The strings of an array `key` of `table`, each with its start offset.
    pub fn strings<'a>(table: &'a DeTable<'_>, key: &str) -> Vec<(&'a str, usize)> {
        entry(table, key)
            .and_then(|(_, v)| v.get_ref().as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|s| Some((s.get_ref().as_str()?, s.span().start)))
                    .collect()
            })
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_compare_as_each_ecosystem_compares_them() {
        let py = |s| PackageKey::new(Ecosystem::Python, s).name;
        assert_eq!(py("MarkupSafe"), "markupsafe");
        assert_eq!(py("zope.interface"), py("Zope_Interface"));
        assert_eq!(py("a-_.b"), "a-b");
        let cargo = |s| PackageKey::new(Ecosystem::Cargo, s).name;
        assert_eq!(cargo("serde_json"), cargo("serde-json"));
        assert_ne!(
            PackageKey::new(Ecosystem::Go, "example.com/A"),
            PackageKey::new(Ecosystem::Go, "example.com/a")
        );
        assert_ne!(
            PackageKey::new(Ecosystem::Python, "core"),
            PackageKey::new(Ecosystem::Cargo, "core")
        );
    }

    #[test]
    fn edges_follow_names_once_each_and_never_to_oneself_or_a_shared_name() {
        let file = |files: &[(&str, &str)]| {
            let files: Vec<(String, String)> = files
                .iter()
                .map(|(p, t)| (p.to_string(), t.to_string()))
                .collect();
            read_clone("x", &files)
        };
        let markupsafe = file(&[("pyproject.toml", "[project]\nname = \"MarkupSafe\"\n")]);
        let jinja = file(&[(
            "pyproject.toml",
            "[project]\nname = \"Jinja2\"\ndescription = \"uses markupsafe\"\ndependencies = [\n  \"MarkupSafe>=2.0\",\n  \"markupsafe\",\n]\n",
        )]);
        let twin = file(&[("pyproject.toml", "[project]\nname = \"jinja2\"\n")]);
        let flask = file(&[("requirements.txt", "# jinja\njinja2==3.1\n")]);
        let e = edges(&[markupsafe.clone(), jinja.clone(), flask.clone()]);
        assert!(e[0].is_empty());
        assert_eq!(
            e[1],
            vec![Edge {
                to: 0,
                source: Source {
                    file: "pyproject.toml".into(),
                    line: 5,
                    text: "\"MarkupSafe>=2.0\",".into()
                },
                dev_only: false,
            }]
        );
        assert_eq!(e[2][0].to, 1);
        assert_eq!(e[2][0].source.line, 2);
        // Two clones publishing jinja2: flask's edge would be a guess.
        let e = edges(&[markupsafe, jinja, flask, twin]);
        assert!(e[2].is_empty(), "{:?}", e[2]);
    }

    #[test]
    fn members_are_relative_to_their_manifest() {
        let files = vec![(
            "sub/package.json".to_string(),
            r#"{"name": "x", "workspaces": ["packages/*"]}"#.to_string(),
        )];
        assert_eq!(read_clone("x", &files).members, vec!["sub/packages/*"]);
    }
}
