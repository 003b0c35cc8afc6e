//! npm: each upstream package (a checkout whose `package.json` names a package the
//! dependent's `package.json` depends on) is installed by path into the dependent's
//! `node_modules` with `npm install --no-save` — linked, not fetched; package.json and the
//! lock file untouched. Run the wrapper after `npm ci` (which empties `node_modules`).

use super::Upstream;
use std::path::{Path, PathBuf};

const SECTIONS: &[&str] = &[
    "dependencies",
    "devDependencies",
    "optionalDependencies",
    "peerDependencies",
];

/// The package names a `package.json` depends on, in any section.
pub fn wanted(package_json: &str) -> Vec<String> {
    let Ok(doc) = serde_json::from_str::<serde_json::Value>(package_json) else {
        return Vec::new();
    };
    let mut out: Vec<String> = SECTIONS
        .iter()
        .filter_map(|s| doc.get(s).and_then(|d| d.as_object()))
        .flat_map(|d| d.keys().cloned())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// A `package.json`'s own name.
pub fn name(package_json: &str) -> Option<String> {
    serde_json::from_str::<serde_json::Value>(package_json)
        .ok()?
        .get("name")?
        .as_str()
        .map(str::to_string)
}

/// The upstream checkouts providing a package the dependent in `cwd` wants.
pub fn packages(cwd: &Path, upstreams: &[Upstream]) -> Vec<(String, PathBuf)> {
    let Ok(own) = std::fs::read_to_string(cwd.join("package.json")) else {
        return Vec::new();
    };
    let wanted = wanted(&own);
    upstreams
        .iter()
        .filter_map(|u| {
            let text = std::fs::read_to_string(u.path.join("package.json")).ok()?;
            let n = name(&text)?;
            wanted.contains(&n).then(|| (n, u.path.clone()))
        })
        .collect()
}

/// The argv installing `paths`.
pub fn install_argv(paths: &[PathBuf]) -> Vec<String> {
    let mut argv: Vec<String> = ["npm", "install", "--no-save", "--no-audit", "--no-fund"]
        .map(String::from)
        .to_vec();
    argv.extend(paths.iter().map(|p| p.display().to_string()));
    argv
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wanted_packages_come_from_every_section() {
        let pj = r#"{"name":"app","dependencies":{"@org/core":"^1"},"devDependencies":{"vm":"*","@org/core":"^1"}}"#;
        assert_eq!(wanted(pj), ["@org/core", "vm"]);
        assert_eq!(name(pj).as_deref(), Some("app"));
        assert!(wanted("not json").is_empty());
        assert_eq!(
            install_argv(&["/ws/core".into()]),
            [
                "npm",
                "install",
                "--no-save",
                "--no-audit",
                "--no-fund",
                "/ws/core"
            ]
        );
    }
}
