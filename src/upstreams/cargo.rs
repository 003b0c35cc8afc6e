//! Cargo: each upstream crate is patched by package name to its checkout, for every way a
//! manifest of the build names it — `[patch.crates-io]` (or the named registry's) for a
//! registry dependency, `[patch."<git url>"]` for a git one — in a cargo configuration file
//! on Cargo's search path above the checkout (`$ORCH_UPSTREAMS/.cargo/config.toml`), never in
//! a tracked file. A path dependency (`../core`) needs nothing: the upstreams sit beside the
//! run's checkout under their repos.yaml names.
//!
//! A patched git dependency is still resolved from its original URL before the patch
//! applies, so each such URL is redirected to the upstream's checkout (git's
//! `url.<checkout>.insteadOf`, through `GIT_CONFIG_*`; `net.git-fetch-with-cli`), which
//! holds the commit the run is about; without a lock file, one is generated first (that
//! resolution needs the redirect, while the job's own command may be `--offline`).

use super::Upstream;
use crate::manifest::tomlx::{self, DeTable};
use std::path::{Path, PathBuf};

const SECTIONS: &[&str] = &["dependencies", "dev-dependencies", "build-dependencies"];

/// A crate an upstream checkout provides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Crate {
    pub name: String,
    /// The directory of its Cargo.toml.
    pub dir: PathBuf,
}

/// Where a manifest takes a dependency from.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Origin {
    /// A registry: `crates-io` or the name given with `registry = "…"`.
    Registry(String),
    /// A git repository, by its URL as written.
    Git(String),
    /// A path (resolved by the workspace's layout).
    Path,
}

/// One dependency of a manifest, by its package name (`package = "…"` of a renamed one).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Dep {
    pub name: String,
    pub from: Origin,
}

/// The package name and the workspace members of a manifest's text.
pub fn package_and_members(text: &str) -> Result<(Option<String>, Vec<String>), String> {
    let doc = tomlx::parse(text)?;
    let doc = doc.get_ref();
    let name = tomlx::table(doc, "package")
        .and_then(|p| tomlx::str(p, "name"))
        .map(str::to_string);
    let members = tomlx::table(doc, "workspace")
        .map(|w| {
            tomlx::strings(w, "members")
                .into_iter()
                .map(|(s, _)| s.to_string())
                .collect()
        })
        .unwrap_or_default();
    Ok((name, members))
}

/// Every dependency a manifest's text names, in every section (targets', the workspace's),
/// sorted (the TOML reader keeps no order).
pub fn deps(text: &str) -> Result<Vec<Dep>, String> {
    let doc = tomlx::parse(text)?;
    let doc = doc.get_ref();
    let mut tables: Vec<&DeTable<'_>> = SECTIONS
        .iter()
        .filter_map(|s| tomlx::table(doc, s))
        .collect();
    if let Some(targets) = tomlx::table(doc, "target") {
        for (_, t) in targets.iter() {
            if let Some(t) = t.get_ref().as_table() {
                tables.extend(SECTIONS.iter().filter_map(|s| tomlx::table(t, s)));
            }
        }
    }
    if let Some(ws) = tomlx::table(doc, "workspace") {
        tables.extend(tomlx::table(ws, "dependencies"));
    }
    let mut out = Vec::new();
    for table in tables {
        for (key, value) in table.iter() {
            let detail = value.get_ref().as_table();
            let name = detail
                .and_then(|t| tomlx::str(t, "package"))
                .unwrap_or(key.get_ref().as_ref())
                .to_string();
            let from = match detail {
                Some(t) if tomlx::str(t, "git").is_some() => {
                    Origin::Git(tomlx::str(t, "git").unwrap_or_default().to_string())
                }
                Some(t) if tomlx::str(t, "path").is_some() => Origin::Path,
                // `workspace = true`: the workspace's own entry says where from.
                Some(t) if tomlx::entry(t, "workspace").is_some() => continue,
                Some(t) => {
                    Origin::Registry(tomlx::str(t, "registry").unwrap_or("crates-io").to_string())
                }
                None => Origin::Registry("crates-io".into()),
            };
            out.push(Dep { name, from });
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// The manifests of the package or workspace in `dir`: its own and its members' (a member
/// `crates/*` is every directory there with a Cargo.toml).
pub fn manifests(dir: &Path) -> Vec<PathBuf> {
    let root = dir.join("Cargo.toml");
    let Ok(text) = std::fs::read_to_string(&root) else {
        return Vec::new();
    };
    let mut out = vec![root];
    let members = package_and_members(&text).map(|m| m.1).unwrap_or_default();
    for m in members {
        let dirs: Vec<PathBuf> = match m.strip_suffix("/*") {
            Some(parent) => std::fs::read_dir(dir.join(parent))
                .map(|d| d.flatten().map(|e| e.path()).collect())
                .unwrap_or_default(),
            None => vec![dir.join(&m)],
        };
        let mut found: Vec<PathBuf> = dirs
            .into_iter()
            .map(|d| d.join("Cargo.toml"))
            .filter(|f| f.is_file())
            .collect();
        found.sort();
        out.extend(found);
    }
    out
}

/// The crates of an upstream checkout.
pub fn crates_of(checkout: &Path) -> Vec<Crate> {
    manifests(checkout)
        .into_iter()
        .filter_map(|m| {
            let text = std::fs::read_to_string(&m).ok()?;
            let name = package_and_members(&text).ok()?.0?;
            Some(Crate {
                name,
                dir: m.parent()?.to_path_buf(),
            })
        })
        .collect()
}

/// What the wrapper does for Cargo: the configuration's text, and the git URLs to redirect
/// (URL as written → the upstream checkout's directory).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Plan {
    pub config: String,
    pub redirects: Vec<(String, PathBuf)>,
    /// One line per patched dependency, for the log.
    pub said: Vec<String>,
}

/// The plan for `deps` (every manifest's of the build) against the upstreams' `crates`
/// (crate, the checkout it is in).
pub fn plan(crates: &[(Crate, PathBuf)], deps: &[Dep]) -> Plan {
    let mut tables: Vec<(String, Vec<(String, PathBuf)>)> = Vec::new();
    let mut redirects: Vec<(String, PathBuf)> = Vec::new();
    let mut said = Vec::new();
    for dep in deps {
        let Some((krate, checkout)) = crates.iter().find(|(c, _)| c.name == dep.name) else {
            continue;
        };
        let source = match &dep.from {
            Origin::Path => continue,
            Origin::Registry(r) => r.clone(),
            Origin::Git(url) => {
                if !redirects.iter().any(|(u, _)| u == url) {
                    redirects.push((url.clone(), checkout.clone()));
                }
                url.clone()
            }
        };
        let entries = match tables.iter_mut().find(|(s, _)| *s == source) {
            Some((_, e)) => e,
            None => {
                tables.push((source.clone(), Vec::new()));
                &mut tables.last_mut().expect("just pushed").1
            }
        };
        if !entries.iter().any(|(n, _)| *n == krate.name) {
            entries.push((krate.name.clone(), krate.dir.clone()));
            said.push(format!(
                "{} ({source}) -> {}",
                krate.name,
                krate.dir.display()
            ));
        }
    }
    let mut config = String::from(
        "# Written by `orch ci with-upstreams`: the upstreams' checkouts stand in for them.\n",
    );
    if !redirects.is_empty() {
        config.push_str("[net]\ngit-fetch-with-cli = true\n");
    }
    for (source, entries) in &tables {
        let key = if is_bare_key(source) {
            source.clone()
        } else {
            quote(source)
        };
        config.push_str(&format!("\n[patch.{key}]\n"));
        for (name, dir) in entries {
            config.push_str(&format!(
                "{} = {{ path = {} }}\n",
                quote(name),
                quote(&dir.to_string_lossy())
            ));
        }
    }
    Plan {
        config,
        redirects,
        said,
    }
}

fn is_bare_key(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// A TOML basic string.
fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The `GIT_CONFIG_*` variables redirecting each URL to its checkout, after the `existing`
/// count of those already in the environment.
pub fn git_redirects(existing: usize, redirects: &[(String, PathBuf)]) -> Vec<(String, String)> {
    let mut env = Vec::new();
    for (i, (url, dir)) in redirects.iter().enumerate() {
        let n = existing + i;
        env.push((
            format!("GIT_CONFIG_KEY_{n}"),
            format!("url.file://{}.insteadOf", dir.display()),
        ));
        env.push((format!("GIT_CONFIG_VALUE_{n}"), url.clone()));
    }
    if !redirects.is_empty() {
        env.push((
            "GIT_CONFIG_COUNT".into(),
            (existing + redirects.len()).to_string(),
        ));
    }
    env
}

/// The Cargo plan for the build in `cwd` against `upstreams`, from the manifests on disk.
pub fn plan_for(cwd: &Path, upstreams: &[Upstream]) -> Plan {
    let crates: Vec<(Crate, PathBuf)> = upstreams
        .iter()
        .flat_map(|u| {
            crates_of(&u.path)
                .into_iter()
                .map(move |c| (c, u.path.clone()))
        })
        .collect();
    let files = manifests(cwd)
        .into_iter()
        .chain(upstreams.iter().flat_map(|u| manifests(&u.path)));
    let all: Vec<Dep> = files
        .filter_map(|f| std::fs::read_to_string(f).ok())
        .filter_map(|t| deps(&t).ok())
        .flatten()
        .collect();
    plan(&crates, &all)
}

#[cfg(test)]
#[path = "cargo_tests.rs"]
mod tests;
