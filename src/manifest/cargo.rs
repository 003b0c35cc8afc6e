//! Cargo.toml: `[package] name`; `[dependencies]`, `[dev-dependencies]`,
//! `[build-dependencies]`, their `[target.'…'.*]` forms and `[workspace.dependencies]` (a
//! path or git dependency is named like any other; `package = "…"` is the real name of a
//! renamed one); `[workspace] members`.

use super::tomlx::{self, DeTable};
use super::{Ecosystem, Manifest, Source};

const SECTIONS: &[&str] = &["dependencies", "dev-dependencies", "build-dependencies"];

pub fn read(file: &str, text: &str, m: &mut Manifest) -> Result<(), String> {
    let doc = tomlx::parse(text)?;
    let doc = doc.get_ref();
    if let Some(name) = tomlx::table(doc, "package").and_then(|p| tomlx::str(p, "name")) {
        m.name(Ecosystem::Cargo, name);
    }
    // Each table with whether it is `dev-dependencies` (tests, examples, benches only).
    let mut tables: Vec<(&DeTable<'_>, bool)> = SECTIONS
        .iter()
        .filter_map(|s| tomlx::table(doc, s).map(|t| (t, *s == "dev-dependencies")))
        .collect();
    if let Some(targets) = tomlx::table(doc, "target") {
        for (_, t) in targets.iter() {
            if let Some(t) = t.get_ref().as_table() {
                tables.extend(
                    SECTIONS
                        .iter()
                        .filter_map(|s| tomlx::table(t, s).map(|x| (x, *s == "dev-dependencies"))),
                );
            }
        }
    }
    if let Some(ws) = tomlx::table(doc, "workspace") {
        tables.extend(tomlx::table(ws, "dependencies").map(|t| (t, false)));
        m.members.extend(
            tomlx::strings(ws, "members")
                .into_iter()
                .map(|(s, _)| s.to_string()),
        );
    }
    for (table, dev) in tables {
        for (key, value) in table.iter() {
            let renamed = value
                .get_ref()
                .as_table()
                .and_then(|t| tomlx::str(t, "package"));
            let name = renamed.unwrap_or(key.get_ref().as_ref());
            m.dep_of(
                Ecosystem::Cargo,
                name,
                Source::at(file, text, key.span().start),
                dev,
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::PackageKey;

    #[test]
    fn every_kind_of_dependency_is_read_by_its_package_name() {
        let text = r#"[package]
name = "acdc_vm"
description = "a VM; see core and util"

[dependencies]
serde = "1"
core = { path = "../core" }
parser = { git = "https://example.org/org/parser", branch = "main" }
fmt = { package = "acdc-fmt", path = "../fmt" }

[dependencies.logging]
path = "../logging"

[dev-dependencies]
testkit = { workspace = true }

[target.'cfg(unix)'.build-dependencies]
cc-helper = "0.1"

[workspace]
members = ["crates/*", "tools/gen"]

[workspace.dependencies]
testkit = { path = "crates/testkit" }
"#;
        let mut m = Manifest::default();
        read("Cargo.toml", text, &mut m).unwrap();
        assert_eq!(m.names, vec![PackageKey::new(Ecosystem::Cargo, "acdc-vm")]);
        let deps: Vec<(String, usize)> = m
            .deps
            .iter()
            .map(|d| (d.key.name.clone(), d.source.line))
            .collect();
        for (name, line) in [
            ("serde", 6),
            ("core", 7),
            ("parser", 8),
            ("acdc-fmt", 9),
            ("logging", 11),
            ("testkit", 15),
            ("cc-helper", 18),
            ("testkit", 24),
        ] {
            assert!(
                deps.contains(&(name.to_string(), line)),
                "{name}:{line} in {deps:?}"
            );
        }
        assert_eq!(deps.len(), 8, "{deps:?}");
        assert!(!deps.iter().any(|(n, _)| n == "util"));
        assert_eq!(m.members, vec!["crates/*", "tools/gen"]);
        let fmt = m.deps.iter().find(|d| d.key.name == "acdc-fmt").unwrap();
        assert_eq!(
            fmt.source.text,
            r#"fmt = { package = "acdc-fmt", path = "../fmt" }"#
        );
    }

    #[test]
    fn a_broken_manifest_says_where() {
        let mut m = Manifest::default();
        let err = read("Cargo.toml", "[package\nname = 1", &mut m).unwrap_err();
        assert!(!err.is_empty());
    }
}
