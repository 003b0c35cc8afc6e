//! Gradle (Groovy or Kotlin DSL), read by lines: the project is `group:name` — `group` from
//! build.gradle, the name from settings.gradle's `rootProject.name` (by default the folder's
//! name, as Gradle's); dependencies are `implementation 'g:a:v'`, `api("g:a:v")`,
//! `testImplementation group: 'g', name: 'a'` and the like, by `group:artifact`.

use super::{Ecosystem, Manifest, Source};

/// The parts of a Gradle project's coordinates, from its two files.
#[derive(Default)]
pub struct Project {
    group: Option<String>,
    name: Option<String>,
    seen: bool,
}

impl Project {
    /// A build file: its dependencies and, at the top, the project's `group`.
    pub fn build(&mut self, dir: &str, file: &str, text: &str, m: &mut Manifest) {
        let top = dir.is_empty();
        self.seen |= top;
        for (i, raw) in text.lines().enumerate() {
            let line = raw.split("//").next().unwrap_or("").trim();
            if top && let Some(group) = assignment(line, "group") {
                self.group = Some(group.to_string());
                continue;
            }
            if let Some(coordinates) = dependency(line) {
                m.dep(
                    Ecosystem::Jvm,
                    &coordinates,
                    Source::line(file, text, i + 1),
                );
            }
        }
    }

    /// A settings file: `rootProject.name`.
    pub fn settings(&mut self, dir: &str, text: &str) {
        if !dir.is_empty() {
            return;
        }
        self.seen = true;
        for raw in text.lines() {
            if let Some(name) = assignment(raw.trim(), "rootProject.name") {
                self.name = Some(name.to_string());
            }
        }
    }

    /// The project's coordinates, when it has a group.
    pub fn publish(self, dir_name: &str, m: &mut Manifest) {
        if let (true, Some(group)) = (self.seen, self.group) {
            let name = self.name.unwrap_or_else(|| dir_name.to_string());
            m.name(Ecosystem::Jvm, &format!("{group}:{name}"));
        }
    }
}

/// `key = 'v'`, `key = "v"` or `key 'v'`: the quoted value.
fn assignment<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let rest = line.strip_prefix(key)?;
    let rest = rest.trim_start();
    let rest = rest.strip_prefix('=').unwrap_or(rest).trim_start();
    quoted(rest)
        .filter(|(_, after)| after.trim().is_empty())
        .map(|(v, _)| v)
}

/// The first quoted string of `s` when `s` starts with it, and what follows it.
fn quoted(s: &str) -> Option<(&str, &str)> {
    let q = s.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    let end = s[1..].find(q)? + 1;
    Some((&s[1..end], &s[end + 1..]))
}

/// The `group:artifact` a dependency line declares, if it is one: a configuration
/// (`implementation`, `api`, `compileOnly`, `testRuntimeOnly`, `kapt`, …) and coordinates.
fn dependency(line: &str) -> Option<String> {
    let word_end = line
        .find(|c: char| !c.is_ascii_alphanumeric())
        .unwrap_or(line.len());
    let (config, rest) = line.split_at(word_end);
    let lower = config.to_ascii_lowercase();
    let is_configuration = [
        "implementation",
        "api",
        "compileonly",
        "runtimeonly",
        "compile",
        "runtime",
        "annotationprocessor",
        "kapt",
        "ksp",
    ]
    .iter()
    .any(|c| lower.ends_with(c));
    if !is_configuration {
        return None;
    }
    let rest = rest.trim_start();
    let rest = rest.strip_prefix('(').unwrap_or(rest).trim_start();
    if let Some((coordinates, _)) = quoted(rest) {
        let mut parts = coordinates.split(':');
        let (g, a) = (parts.next()?, parts.next()?);
        return (!g.is_empty() && !a.is_empty()).then(|| format!("{g}:{a}"));
    }
    // Map notation: group: 'g', name: 'a', version: 'v'.
    let field = |key: &str| {
        rest.split(',').find_map(|part| {
            let part = part.trim().strip_prefix(key)?.trim_start();
            let part = part.strip_prefix(':').or_else(|| part.strip_prefix('='))?;
            quoted(part.trim_start()).map(|(v, _)| v)
        })
    };
    Some(format!("{}:{}", field("group")?, field("name")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coordinates_and_dependency_lines() {
        let build = r#"plugins { id 'java-library' }
group = 'org.acme'
version = '1.0'
description = "uses org.acme:ledger"

dependencies {
    implementation 'org.acme:core:1.0'
    api("org.acme:model:1.0")
    testImplementation group: 'junit', name: 'junit', version: '4.13'
    implementation project(':sub')
    // implementation 'org.acme:old:1.0'
    compileOnly "org.projectlombok:lombok:1.18.30"
}
"#;
        let mut m = Manifest::default();
        let mut p = Project::default();
        p.build("", "build.gradle", build, &mut m);
        p.settings("", "rootProject.name = \"billing\"\ninclude 'sub'\n");
        p.publish("folder", &mut m);
        assert_eq!(m.names[0].name, "org.acme:billing");
        let deps: Vec<(String, usize)> = m
            .deps
            .iter()
            .map(|d| (d.key.name.clone(), d.source.line))
            .collect();
        assert_eq!(
            deps,
            vec![
                ("org.acme:core".into(), 7),
                ("org.acme:model".into(), 8),
                ("junit:junit".into(), 9),
                ("org.projectlombok:lombok".into(), 12),
            ]
        );
    }

    #[test]
    fn the_default_name_is_the_folder() {
        let mut m = Manifest::default();
        let mut p = Project::default();
        p.build("", "build.gradle.kts", "group = \"org.acme\"\n", &mut m);
        p.publish("ledger", &mut m);
        assert_eq!(m.names[0].name, "org.acme:ledger");
    }
}
