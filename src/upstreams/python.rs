//! Python: each upstream project (a checkout with `pyproject.toml` or `setup.py`) is installed
//! from its checkout into the job's environment — the active virtualenv's interpreter, else
//! `python3` — before the job's command installs the project, in one `pip install`; pip then
//! keeps those distributions when the project asks for them (its specifier must accept the
//! checkout's version). Without build isolation when every build backend they name is
//! importable already, so that building them fetches nothing (an isolated build installs
//! the backends the projects require, from the index).

use super::Upstream;
use crate::manifest::tomlx;
use std::path::{Path, PathBuf};

/// Whether `dir` holds a Python project.
pub fn is_project(dir: &Path) -> bool {
    dir.join("pyproject.toml").is_file() || dir.join("setup.py").is_file()
}

/// The modules a project's build needs importable to build without isolation, from its
/// pyproject's `[build-system]`: none for a backend in the project itself (`backend-path`);
/// setuptools' (and `wheel`, which setuptools before 70.1 builds wheels with) when none is
/// named (pip's default) or setuptools is; else the backend's top module
/// (`hatchling.build` → `hatchling`).
pub fn backend_modules(pyproject: Option<&str>) -> Vec<String> {
    let doc = pyproject.and_then(|t| tomlx::parse(t).ok());
    let system = doc
        .as_ref()
        .and_then(|d| tomlx::table(d.get_ref(), "build-system"));
    if system.is_some_and(|b| tomlx::entry(b, "backend-path").is_some()) {
        return Vec::new();
    }
    let module = system
        .and_then(|b| tomlx::str(b, "build-backend"))
        .map(|b| b.split(['.', ':']).next().unwrap_or(b).to_string())
        .filter(|m| !m.is_empty())
        .unwrap_or_else(|| "setuptools".into());
    if module == "setuptools" {
        vec!["setuptools".into(), "wheel".into()]
    } else {
        vec![module]
    }
}

/// The upstream checkouts that are Python projects, in the listing's order.
pub fn projects(upstreams: &[Upstream]) -> Vec<PathBuf> {
    upstreams
        .iter()
        .filter(|u| is_project(&u.path))
        .map(|u| u.path.clone())
        .collect()
}

/// The interpreter of the job's environment: `$VIRTUAL_ENV/bin/python`, else `python3`.
pub fn interpreter(virtual_env: Option<&str>) -> PathBuf {
    match virtual_env.filter(|v| !v.is_empty()) {
        Some(v) => Path::new(v).join("bin/python"),
        None => PathBuf::from("python3"),
    }
}

/// The argv installing `projects` with `python`.
pub fn install_argv(python: &Path, projects: &[PathBuf], isolated: bool) -> Vec<String> {
    let mut argv = vec![
        python.display().to_string(),
        "-m".into(),
        "pip".into(),
        "install".into(),
        "--quiet".into(),
        "--disable-pip-version-check".into(),
    ];
    if !isolated {
        argv.push("--no-build-isolation".into());
    }
    argv.extend(projects.iter().map(|p| p.display().to_string()));
    argv
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backend_modules_are_read_from_build_system() {
        let hatch =
            "[build-system]\nrequires = [\"hatchling\"]\nbuild-backend = \"hatchling.build\"\n";
        assert_eq!(backend_modules(Some(hatch)), ["hatchling"]);
        let flit = "[build-system]\nbuild-backend = \"flit_core.buildapi\"\n";
        assert_eq!(backend_modules(Some(flit)), ["flit_core"]);
        let st = ["setuptools", "wheel"];
        assert_eq!(backend_modules(Some("[project]\nname = \"x\"\n")), st);
        assert_eq!(backend_modules(None), st);
        let in_tree =
            "[build-system]\nrequires = []\nbuild-backend = \"backend\"\nbackend-path = [\".\"]\n";
        assert!(backend_modules(Some(in_tree)).is_empty());
    }

    #[test]
    fn upstreams_are_installed_in_order_without_isolation_when_possible() {
        let py = interpreter(Some("/job/.venv"));
        assert_eq!(py, Path::new("/job/.venv/bin/python"));
        assert_eq!(interpreter(None), Path::new("python3"));
        let argv = install_argv(&py, &["/ws/core".into(), "/ws/vm".into()], false);
        assert_eq!(
            argv,
            [
                "/job/.venv/bin/python",
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                "--no-build-isolation",
                "/ws/core",
                "/ws/vm"
            ]
        );
        assert!(!install_argv(&py, &[], true).contains(&"--no-build-isolation".to_string()));
    }
}
