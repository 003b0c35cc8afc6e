//! Python: `pyproject.toml` (`[project] name` and `dependencies`,
//! `[project.optional-dependencies]`, `[dependency-groups]` (PEP 735), Poetry's
//! `[tool.poetry]` name, dependencies, dev-dependencies and groups) and `requirements*.txt`
//! (also `requirements/*.txt`). A requirement's name is the PEP 508 name it starts with: a URL
//! after `@` names where to fetch it, not what it is.

use super::tomlx::{self, DeTable};
use super::{Ecosystem, Manifest, Source};

/// Whether `dir/base` is a requirements file.
pub fn is_requirements(dir: &str, base: &str) -> bool {
    let in_requirements_dir = dir == "requirements" || dir.ends_with("/requirements");
    base.ends_with(".txt") && (base.starts_with("requirements") || in_requirements_dir)
}

pub fn read_pyproject(file: &str, text: &str, m: &mut Manifest) -> Result<(), String> {
    let doc = tomlx::parse(text)?;
    let doc = doc.get_ref();
    let mut requirements: Vec<(&str, usize)> = Vec::new();
    if let Some(project) = tomlx::table(doc, "project") {
        if let Some(name) = tomlx::str(project, "name") {
            m.name(Ecosystem::Python, name);
        }
        requirements.extend(tomlx::strings(project, "dependencies"));
        if let Some(groups) = tomlx::table(project, "optional-dependencies") {
            requirements.extend(all_strings(groups));
        }
    }
    if let Some(groups) = tomlx::table(doc, "dependency-groups") {
        // `{include-group = "…"}` entries are not strings: the group they name is read anyway.
        requirements.extend(all_strings(groups));
    }
    for (req, offset) in requirements {
        if let Some(name) = requirement_name(req) {
            m.dep(Ecosystem::Python, name, Source::at(file, text, offset));
        }
    }
    let poetry = tomlx::table(doc, "tool").and_then(|t| tomlx::table(t, "poetry"));
    if let Some(poetry) = poetry {
        if let Some(name) = tomlx::str(poetry, "name") {
            m.name(Ecosystem::Python, name);
        }
        let mut tables: Vec<&DeTable<'_>> = ["dependencies", "dev-dependencies"]
            .iter()
            .filter_map(|s| tomlx::table(poetry, s))
            .collect();
        if let Some(groups) = tomlx::table(poetry, "group") {
            for (_, g) in groups.iter() {
                tables.extend(
                    g.get_ref()
                        .as_table()
                        .and_then(|g| tomlx::table(g, "dependencies")),
                );
            }
        }
        for table in tables {
            for (key, _) in table.iter() {
                let name = key.get_ref().as_ref();
                // Poetry lists the interpreter among the dependencies.
                if !name.eq_ignore_ascii_case("python") {
                    m.dep(
                        Ecosystem::Python,
                        name,
                        Source::at(file, text, key.span().start),
                    );
                }
            }
        }
    }
    Ok(())
}

/// Every string of every array in `groups` (each group a list of requirements).
fn all_strings<'a>(groups: &'a DeTable<'_>) -> Vec<(&'a str, usize)> {
    groups
        .iter()
        .flat_map(|(k, _)| tomlx::strings(groups, k.get_ref().as_ref()))
        .collect()
}

/// A requirements file: one requirement a line; options (`-r`, `--index-url`, …), paths and
/// bare URLs are not names, except an editable's `#egg=NAME`.
pub fn read_requirements(file: &str, text: &str, m: &mut Manifest) {
    for (i, raw) in text.lines().enumerate() {
        let line = match raw.find(" #") {
            Some(at) => &raw[..at],
            None => raw,
        }
        .trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let name = if line.starts_with('-') {
            line.split_once("#egg=")
                .map(|(_, egg)| egg.split(['&', ' ', '[']).next().unwrap_or(""))
        } else {
            requirement_name(line)
        };
        if let Some(name) = name {
            m.dep(Ecosystem::Python, name, Source::line(file, text, i + 1));
        }
    }
}

/// The name a PEP 508 requirement starts with (`Jinja2>=3.1`, `click[extra] ; python_version
/// > "3.8"`, `jinja2 @ https://…`), or none when it does not start with one (a URL, a path).
pub fn requirement_name(req: &str) -> Option<&str> {
    let req = req.trim();
    let end = req
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')))
        .unwrap_or(req.len());
    let (name, rest) = req.split_at(end);
    let starts_well = name.starts_with(|c: char| c.is_ascii_alphanumeric());
    let ends_well = name.ends_with(|c: char| c.is_ascii_alphanumeric());
    let rest = rest.trim_start();
    let then_requirement =
        rest.is_empty() || rest.starts_with(['[', '<', '>', '=', '!', '~', ';', '@', '(', ',']);
    (starts_well && ends_well && then_requirement).then_some(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::PackageKey;

    fn deps(m: &Manifest) -> Vec<(String, usize)> {
        m.deps
            .iter()
            .map(|d| (d.key.name.clone(), d.source.line))
            .collect()
    }

    #[test]
    fn a_pyproject_gives_its_name_and_every_group() {
        // Jinja's and Flask's manifests, in the shape they have.
        let text = r#"[project]
name = "Jinja2"
description = "A very fast and expressive template engine, uses MarkupSafe."
dependencies = ["MarkupSafe>=2.0"]

[project.optional-dependencies]
i18n = ["Babel>=2.7"]

[project.urls]
Source = "https://github.com/pallets/flask/"

[dependency-groups]
dev = [{include-group = "docs"}, "click_extra ; python_version >= '3.9'"]
docs = [
    "pallets-sphinx-themes @ https://github.com/pallets/werkzeug/archive/main.tar.gz",
    "Zope.Interface[docs]",
]
"#;
        let mut m = Manifest::default();
        read_pyproject("pyproject.toml", text, &mut m).unwrap();
        assert_eq!(m.names, vec![PackageKey::new(Ecosystem::Python, "jinja2")]);
        assert_eq!(
            deps(&m),
            vec![
                ("markupsafe".into(), 4),
                ("babel".into(), 7),
                ("click-extra".into(), 13),
                ("pallets-sphinx-themes".into(), 15),
                ("zope-interface".into(), 16),
            ]
        );
    }

    #[test]
    fn poetry_names_its_dependencies_by_key() {
        let text = r#"[tool.poetry]
name = "my_service"

[tool.poetry.dependencies]
python = "^3.11"
Flask = "^3.0"
werkzeug = { git = "https://example.org/werkzeug.git" }

[tool.poetry.group.test.dependencies]
pytest = "^8"
"#;
        let mut m = Manifest::default();
        read_pyproject("pyproject.toml", text, &mut m).unwrap();
        assert_eq!(m.names[0].name, "my-service");
        assert_eq!(
            deps(&m),
            vec![
                ("flask".into(), 6),
                ("werkzeug".into(), 7),
                ("pytest".into(), 10)
            ]
        );
    }

    #[test]
    fn requirement_files_skip_options_paths_and_urls() {
        let text = "# for the tests of jinja\n-r base.txt\n--index-url https://example.org/simple\nMarkupSafe==3.0.2  # via jinja2\nhttps://example.org/werkzeug.zip\n../itsdangerous\n-e git+https://example.org/blinker.git#egg=blinker\nclick ; python_version >= \"3.8\"\n";
        let mut m = Manifest::default();
        read_requirements("requirements/tests.txt", text, &mut m);
        assert_eq!(
            deps(&m),
            vec![
                ("markupsafe".into(), 4),
                ("blinker".into(), 7),
                ("click".into(), 8)
            ]
        );
        assert_eq!(m.deps[0].source.text, "MarkupSafe==3.0.2  # via jinja2");
        assert!(is_requirements("", "requirements-dev.txt"));
        assert!(is_requirements("requirements", "tests.txt"));
        assert!(!is_requirements("", "notes.txt"));
    }

    #[test]
    fn a_requirement_name_is_only_a_name_at_the_start() {
        assert_eq!(requirement_name("Jinja2>=3.1.2"), Some("Jinja2"));
        assert_eq!(
            requirement_name("jinja2 @ git+https://x/jinja"),
            Some("jinja2")
        );
        assert_eq!(requirement_name("click[extra]"), Some("click"));
        assert_eq!(requirement_name("https://x/jinja.zip"), None);
        assert_eq!(requirement_name("./jinja"), None);
        assert_eq!(requirement_name("uses jinja"), None);
    }
}
