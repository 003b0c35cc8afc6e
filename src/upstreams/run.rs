//! `orch ci with-upstreams -- <command…>`: prepares the job's build to resolve each upstream
//! package to its checkout (each ecosystem found in the working directory), says what it did
//! on stderr, then becomes the command.

use super::{DIR_VAR, LIST_VAR, Listing, cargo, go, npm, python};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What to add to the command's environment, and what was done (for the log).
#[derive(Default)]
struct Prepared {
    env: Vec<(String, String)>,
    said: Vec<String>,
}

/// Runs `command` with the build pointed at the upstreams of `$ORCH_UPSTREAMS`. Returns only
/// on failure (the command replaces this process): the message and the exit code.
pub fn with_upstreams(command: &[String]) -> (String, i32) {
    let Some((program, args)) = command.split_first() else {
        return (
            "ci with-upstreams: no command given (orch ci with-upstreams -- <command...>)".into(),
            2,
        );
    };
    let prepared = match prepare() {
        Ok(p) => p,
        Err(e) => return (format!("ci with-upstreams: {e}"), 1),
    };
    for line in &prepared.said {
        eprintln!("orch ci with-upstreams: {line}");
    }
    let err = Command::new(program)
        .args(args)
        .envs(prepared.env.iter().map(|(k, v)| (k, v)))
        .exec();
    (
        format!("ci with-upstreams: cannot run {program}: {err}"),
        127,
    )
}

fn prepare() -> Result<Prepared, String> {
    let dir = std::env::var_os(DIR_VAR).map(PathBuf::from).ok_or_else(|| {
        format!("${DIR_VAR} is not set: this runs inside a CI job of orch's local forge, which sets it")
    })?;
    let list = std::env::var_os(LIST_VAR).map(PathBuf::from);
    let listing = Listing::read(&dir, list.as_deref())?;
    let cwd =
        std::env::current_dir().map_err(|e| format!("cannot read the working directory: {e}"))?;
    let mut out = Prepared::default();
    if listing.upstreams.is_empty() {
        out.said
            .push(format!("{} has no upstreams: nothing to do", listing.repo));
        return Ok(out);
    }
    out.said.push(format!("upstreams: {}", listing.summary()));
    if cwd.join("Cargo.toml").is_file() {
        prepare_cargo(&dir, &cwd, &listing, &mut out)?;
    }
    if python::is_project(&cwd) || cwd.join("requirements.txt").is_file() {
        prepare_python(&listing, &mut out)?;
    }
    if cwd.join("package.json").is_file() {
        prepare_npm(&cwd, &listing, &mut out)?;
    }
    if cwd.join("go.mod").is_file() {
        prepare_go(&dir, &cwd, &listing, &mut out)?;
    }
    Ok(out)
}

fn prepare_cargo(
    dir: &Path,
    cwd: &Path,
    listing: &Listing,
    out: &mut Prepared,
) -> Result<(), String> {
    // Compared as the file system has them: the working directory is the physical one, while
    // $ORCH_UPSTREAMS may go through a link (a shared forge, `forge.path`).
    let physical = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let (dir, cwd) = (&physical(dir), &physical(cwd));
    if !cwd.starts_with(dir) {
        return Err(format!(
            "cargo reads the upstreams' patches from {}/.cargo/config.toml, which is not above the working directory {}",
            dir.display(),
            cwd.display()
        ));
    }
    let plan = cargo::plan_for(cwd, &listing.upstreams);
    if plan.said.is_empty() {
        out.said
            .push("cargo: no dependency on an upstream crate".into());
        return Ok(());
    }
    let cargo_dir = dir.join(".cargo");
    std::fs::create_dir_all(&cargo_dir)
        .map_err(|e| format!("cannot create {}: {e}", cargo_dir.display()))?;
    let file = cargo_dir.join("config.toml");
    std::fs::write(&file, &plan.config)
        .map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    let existing = std::env::var("GIT_CONFIG_COUNT")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    out.env
        .extend(cargo::git_redirects(existing, &plan.redirects));
    for s in &plan.said {
        out.said.push(format!("cargo: patched {s}"));
    }
    // A patched git dependency is resolved from its (redirected) URL first: with no lock file
    // yet, make one now, while the job's command may be `--offline`.
    let locked = cwd
        .ancestors()
        .take_while(|a| a.starts_with(dir))
        .any(|a| a.join("Cargo.lock").is_file());
    if !plan.redirects.is_empty() && !locked {
        run_step(
            &["cargo".to_string(), "generate-lockfile".to_string()],
            &out.env,
            "cargo: the lock file",
        )?;
        out.said
            .push("cargo: generated Cargo.lock against the upstreams".into());
    }
    Ok(())
}

fn prepare_python(listing: &Listing, out: &mut Prepared) -> Result<(), String> {
    let projects = python::projects(&listing.upstreams);
    if projects.is_empty() {
        out.said
            .push("python: no upstream is a Python project".into());
        return Ok(());
    }
    let venv = std::env::var("VIRTUAL_ENV").ok();
    let py = python::interpreter(venv.as_deref());
    let mut modules: Vec<String> = projects
        .iter()
        .flat_map(|p| {
            python::backend_modules(
                std::fs::read_to_string(p.join("pyproject.toml"))
                    .ok()
                    .as_deref(),
            )
        })
        .collect();
    modules.sort();
    modules.dedup();
    let importable = Command::new(&py)
        .arg("-c")
        .arg(
            modules
                .iter()
                .map(|m| format!("import {m}\n"))
                .collect::<String>(),
        )
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    run_step(
        &python::install_argv(&py, &projects, !importable),
        &[],
        "python: pip install",
    )?;
    out.said.push(format!(
        "python: installed {} into {}{}",
        projects
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
        py.display(),
        if importable {
            " (no build isolation)"
        } else {
            ""
        }
    ));
    Ok(())
}

fn prepare_npm(cwd: &Path, listing: &Listing, out: &mut Prepared) -> Result<(), String> {
    let packages = npm::packages(cwd, &listing.upstreams);
    if packages.is_empty() {
        out.said
            .push("npm: no dependency on an upstream package".into());
        return Ok(());
    }
    let paths: Vec<PathBuf> = packages.iter().map(|(_, p)| p.clone()).collect();
    run_step(&npm::install_argv(&paths), &[], "npm: npm install")?;
    for (name, path) in &packages {
        out.said.push(format!("npm: {name} -> {}", path.display()));
    }
    Ok(())
}

fn prepare_go(dir: &Path, cwd: &Path, listing: &Listing, out: &mut Prepared) -> Result<(), String> {
    let text = std::fs::read_to_string(cwd.join("go.mod"))
        .map_err(|e| format!("cannot read go.mod: {e}"))?;
    let version = go::go_version(&text).unwrap_or_else(|| "1.21".into());
    let modules = go::modules(cwd, &listing.upstreams);
    if modules.len() < 2 {
        out.said.push("go: no upstream is a Go module".into());
        return Ok(());
    }
    let orch_dir = dir.join(".orch");
    std::fs::create_dir_all(&orch_dir)
        .map_err(|e| format!("cannot create {}: {e}", orch_dir.display()))?;
    let file = orch_dir.join("go.work");
    std::fs::write(&file, go::go_work(&version, &modules))
        .map_err(|e| format!("cannot write {}: {e}", file.display()))?;
    out.env.push(("GOWORK".into(), file.display().to_string()));
    out.said.push(format!("go: GOWORK={}", file.display()));
    Ok(())
}

/// Runs one preparing step to its end; its failure is the wrapper's.
fn run_step(argv: &[String], env: &[(String, String)], what: &str) -> Result<(), String> {
    let (program, args) = argv.split_first().ok_or("empty step")?;
    let status = Command::new(program)
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .status()
        .map_err(|e| format!("{what}: cannot run {program}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{what} failed ({status}): {}", argv.join(" ")))
    }
}
