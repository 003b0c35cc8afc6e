//! npm, pnpm, yarn: `package.json` `name`, `dependencies`, `devDependencies`,
//! `peerDependencies`, `optionalDependencies` (an alias `"x": "npm:real@^1"` is `real`),
//! `workspaces` (a list, or yarn's `{ "packages": [...] }`); pnpm's `pnpm-workspace.yaml`
//! `packages:`.

use super::{Ecosystem, Manifest, Source};
use serde_json::Value;

const SECTIONS: &[&str] = &[
    "dependencies",
    "devDependencies",
    "peerDependencies",
    "optionalDependencies",
];

pub fn read(file: &str, text: &str, m: &mut Manifest) -> Result<(), String> {
    let doc: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    if let Some(name) = doc.get("name").and_then(Value::as_str) {
        m.name(Ecosystem::Npm, name);
    }
    for section in SECTIONS {
        let Some(deps) = doc.get(*section).and_then(Value::as_object) else {
            continue;
        };
        for (key, spec) in deps {
            let name = spec
                .as_str()
                .and_then(|s| s.strip_prefix("npm:"))
                .map(alias_name)
                .unwrap_or(key);
            let offset = key_offset(text, section, key);
            m.dep_of(
                Ecosystem::Npm,
                name,
                Source::at(file, text, offset),
                *section == "devDependencies",
            );
        }
    }
    let workspaces = match doc.get("workspaces") {
        Some(Value::Array(a)) => Some(a),
        Some(Value::Object(o)) => o.get("packages").and_then(Value::as_array),
        _ => None,
    };
    m.members.extend(
        workspaces
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(str::to_string),
    );
    Ok(())
}

/// `real@^1` → `real`; `@scope/real@^1` → `@scope/real`.
fn alias_name(spec: &str) -> &str {
    match spec.char_indices().skip(1).find(|(_, c)| *c == '@') {
        Some((at, _)) => &spec[..at],
        None => spec,
    }
}

/// Where `"key":` is written in the object `"section"` (JSON keeps no positions): the first
/// one after the section's key; the section's key, or the start, when not found.
fn key_offset(text: &str, section: &str, key: &str) -> usize {
    let quoted = |s: &str| serde_json::to_string(s).unwrap_or_default();
    let from = text.find(&format!("{}:", quoted(section))).or_else(|| {
        text.match_indices(&quoted(section))
            .map(|(i, _)| i)
            .find(|&i| {
                text[i + quoted(section).len()..]
                    .trim_start()
                    .starts_with(':')
            })
    });
    let from = from.unwrap_or(0);
    let needle = quoted(key);
    text[from..]
        .match_indices(&needle)
        .map(|(i, _)| from + i)
        .find(|&i| text[i + needle.len()..].trim_start().starts_with(':'))
        .unwrap_or(from)
}

/// `pnpm-workspace.yaml`: the `packages:` list (`- "packages/*"`), read line by line — the
/// file is that one list in practice.
pub fn read_pnpm_workspace(text: &str, m: &mut Manifest) {
    let mut in_packages = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if !line.starts_with([' ', '\t', '-']) && !trimmed.is_empty() {
            in_packages = trimmed.starts_with("packages:");
            continue;
        }
        if let Some(item) = trimmed.strip_prefix('-').filter(|_| in_packages) {
            let item = item.split(" #").next().unwrap_or("").trim();
            let item = item.trim_matches(['"', '\'']);
            // `!pattern` excludes: nothing to read there.
            if !item.is_empty() && !item.starts_with('!') {
                m.members.push(item.to_string());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_sections_aliases_and_workspaces() {
        let text = r#"{
  "name": "@acme/web",
  "description": "the web front end, built on @acme/ui",
  "dependencies": {
    "react": "^18.0.0",
    "@acme/ui": "workspace:*"
  },
  "devDependencies": {
    "ui-old": "npm:@acme/ui@^1.0.0",
    "react": "^18.0.0"
  },
  "workspaces": { "packages": ["packages/*"] }
}"#;
        let mut m = Manifest::default();
        read("package.json", text, &mut m).unwrap();
        assert_eq!(m.names[0].name, "@acme/web");
        let deps: Vec<(String, usize)> = m
            .deps
            .iter()
            .map(|d| (d.key.name.clone(), d.source.line))
            .collect();
        assert_eq!(
            deps,
            vec![
                ("react".into(), 5),
                ("@acme/ui".into(), 6),
                ("@acme/ui".into(), 9),
                ("react".into(), 10),
            ]
        );
        assert_eq!(m.members, vec!["packages/*"]);
        assert!(read("package.json", "{", &mut m).is_err());
    }

    #[test]
    fn pnpm_workspaces() {
        let mut m = Manifest::default();
        read_pnpm_workspace(
            "packages:\n  - 'packages/*'\n  - \"apps/web\"  # the site\n  - '!**/test/**'\ncatalog:\n  - x\n",
            &mut m,
        );
        assert_eq!(m.members, vec!["packages/*", "apps/web"]);
    }
}
