//! `orch init [DIR]`: a commented repos.yaml for the git repositories found in DIR (and, with
//! `--with-contract`, the contract and prompt templates, for those who want to tune them).
//!
//! What it cannot know it guesses and says so: the base branch is the clone's current branch;
//! the dependencies are the other clones whose *packages* its manifests depend on (src/manifest/
//! reads Cargo, Python, npm/pnpm/yarn, Go, Maven and Gradle manifests and matches package names
//! as each ecosystem compares them), each with the manifest line it came from; a CI command
//! from the kind of project and the tools installed here, with what it needs first; a poll
//! interval for the local forge — each marked for the user to confirm.

use super::{Failure, Outcome};
use crate::manifest::{self, Manifest, Source};
use crate::operator::view::setup::{FileAction, FileKind, InitFile, InitRepo, InitView};
use std::path::{Path, PathBuf};

/// One repository found.
struct Found {
    name: String,
    dir: PathBuf,
    branch: String,
    /// The other repositories whose packages its manifests depend on, each with the line
    /// that says so and whether it is for tests, examples or development only.
    deps: Vec<(String, Source, bool)>,
    /// Edges left out of `deps` because they closed a cycle (orch's chains need a graph
    /// without one): the repository, the line, why.
    left_out: Vec<(String, Source, String)>,
    /// Its manifests that could not be read, each with why.
    unreadable: Vec<String>,
    ci: CiGuess,
}

pub fn run(dir: &Path, with_contract: bool, force: bool, json: bool) -> Outcome {
    let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    if !dir.is_dir() {
        return Err(Failure::bad_input(format!(
            "{} is not a directory",
            dir.display()
        )));
    }
    let target = dir.join("repos.yaml");
    refuse_to_replace(&target, force)?;
    let mut found = find(&dir);
    break_cycles(&mut found);
    if found.is_empty() {
        return Err(Failure::bad_input(format!(
            "no git repository found in {} (orch init looks at its subdirectories: one clone each); run it in the directory that holds your clones, or `orch init --example` to write a demo organisation to try orch on",
            dir.display()
        )));
    }
    std::fs::write(&target, repos_yaml(&found))
        .map_err(|e| Failure::unavailable(format!("cannot write {}: {e}", target.display())))?;
    let mut view = InitView {
        dir: dir.display().to_string(),
        example: false,
        config: target.display().to_string(),
        repos: found
            .iter()
            .map(|f| InitRepo {
                name: f.name.clone(),
                path: f.dir.display().to_string(),
            })
            .collect(),
        files: vec![InitFile {
            path: target.display().to_string(),
            kind: FileKind::Config,
            action: FileAction::Written,
        }],
        next: "confirm the guessed deps, branches and CI commands (marked `# guessed`), then `orch check`".into(),
    };
    if with_contract {
        write_contract(&dir, force, &mut view.files)?;
    }
    print(&view, json);
    Ok(0)
}

/// The view as `--json`, or as the lines a person reads.
fn print(view: &InitView, json: bool) {
    if json {
        crate::operator::view::print_json(view);
        return;
    }
    if view.example {
        println!(
            "wrote the example organisation in {}: repos.yaml, repos/{{{}}} (git, CI on the local forge), worker.sh (a scripted worker), demo-wave.yaml",
            view.dir,
            super::demo::REPOS.join(",")
        );
    }
    // The example's own files are the sentence above; the contract's (if any) follow.
    let files = view
        .files
        .iter()
        .filter(|f| !view.example || matches!(f.kind, FileKind::Contract | FileKind::Prompt));
    for f in files {
        match (f.kind, f.action) {
            (FileKind::Config, _) => println!(
                "wrote {} ({})",
                f.path,
                super::plural(view.repos.len(), "repository", "repositories")
            ),
            (_, FileAction::Written) => println!("wrote {}", f.path),
            (_, FileAction::Kept) => println!("kept {} (exists)", f.path),
        }
    }
    println!("next: {}", view.next);
}

/// The built-in contract and prompt templates under `dir/contracts/` (an existing file is
/// kept unless `force`), each added to `files`.
fn write_contract(dir: &Path, force: bool, files: &mut Vec<InitFile>) -> Result<(), Failure> {
    let templates = [
        (
            "contracts/worker-completion.yaml",
            crate::contract::EMBEDDED,
            FileKind::Contract,
        ),
        (
            "contracts/prompts/worker.md",
            crate::prompt::WORKER_TEMPLATE,
            FileKind::Prompt,
        ),
        (
            "contracts/prompts/ci-worker.md",
            crate::prompt::CI_TEMPLATE,
            FileKind::Prompt,
        ),
    ];
    for (rel, text, kind) in templates {
        let path = dir.join(rel);
        let mut file = InitFile {
            path: path.display().to_string(),
            kind,
            action: FileAction::Kept,
        };
        if path.exists() && !force {
            files.push(file);
            continue;
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| {
                Failure::unavailable(format!("cannot create {}: {e}", parent.display()))
            })?;
        }
        std::fs::write(&path, text)
            .map_err(|e| Failure::unavailable(format!("cannot write {}: {e}", path.display())))?;
        file.action = FileAction::Written;
        files.push(file);
    }
    Ok(())
}

/// `orch init --example [DIR]`: the demo organisation (`orch demo`'s) written into `dir`, to
/// keep: four repositories with CI on the local forge, a scripted worker, repos.yaml and a
/// wave file. `orch check` accepts it and a spawn runs to DONE.
pub fn example(dir: &Path, with_contract: bool, force: bool, json: bool) -> Outcome {
    let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    if dir.exists() && !dir.is_dir() {
        return Err(Failure::bad_input(format!(
            "{} is not a directory",
            dir.display()
        )));
    }
    let target = dir.join("repos.yaml");
    refuse_to_replace(&target, force)?;
    // Repositories are never written over, --force or not: they may hold someone's work.
    let taken: Vec<String> = super::demo::REPOS
        .iter()
        .map(|r| dir.join("repos").join(r))
        .filter(|p| p.exists())
        .map(|p| p.display().to_string())
        .collect();
    if !taken.is_empty() {
        return Err(Failure::bad_input(format!(
            "{} already exist{}; choose another directory for the example",
            taken.join(", "),
            if taken.len() == 1 { "s" } else { "" }
        )));
    }
    std::fs::create_dir_all(&dir)
        .map_err(|e| Failure::unavailable(format!("cannot create {}: {e}", dir.display())))?;
    super::demo::write_example(&dir).map_err(Failure::unavailable)?;
    let written = |path: PathBuf, kind| InitFile {
        path: path.display().to_string(),
        kind,
        action: FileAction::Written,
    };
    let repo_dir = |r: &str| dir.join("repos").join(r);
    let mut files = vec![written(target.clone(), FileKind::Config)];
    files.extend(
        super::demo::REPOS
            .iter()
            .map(|r| written(repo_dir(r), FileKind::Repository)),
    );
    files.push(written(dir.join("worker.sh"), FileKind::Worker));
    files.push(written(dir.join("demo-wave.yaml"), FileKind::Wave));
    let mut view = InitView {
        dir: dir.display().to_string(),
        example: true,
        config: target.display().to_string(),
        repos: super::demo::REPOS
            .iter()
            .map(|r| InitRepo {
                name: r.to_string(),
                path: repo_dir(r).display().to_string(),
            })
            .collect(),
        files,
        next: format!(
            "cd {} && orch check && orch spawn --repo core --task \"a first task\" --foreground",
            dir.display()
        ),
    };
    if with_contract {
        write_contract(&dir, force, &mut view.files)?;
    }
    print(&view, json);
    Ok(0)
}

/// The git repositories among `dir`'s subdirectories, by name, each with the edges its
/// manifests give to the others (src/manifest/).
fn find(dir: &Path) -> Vec<Found> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.join(".git").exists())
                .collect()
        })
        .unwrap_or_default();
    dirs.sort();
    let names: Vec<String> = dirs.iter().map(|d| repo_name(d)).collect();
    let manifests: Vec<Manifest> = dirs
        .iter()
        .map(|d| {
            let folder = d.file_name().map(|n| n.to_string_lossy().into_owned());
            manifest::read_clone(&folder.unwrap_or_default(), &manifest_files(d))
        })
        .collect();
    let edges = manifest::edges(&manifests);
    dirs.iter()
        .zip(&names)
        .zip(manifests.into_iter().zip(edges))
        .map(|((d, name), (m, edges))| {
            let branch = git2::Repository::open(d)
                .ok()
                .and_then(|r| r.head().ok()?.shorthand().ok().map(str::to_string))
                .unwrap_or_else(|| "main".into());
            Found {
                name: name.clone(),
                dir: d.clone(),
                branch,
                deps: edges
                    .into_iter()
                    .map(|e| (names[e.to].clone(), e.source, e.dev_only))
                    .collect(),
                left_out: Vec::new(),
                unreadable: m.unreadable,
                ci: ci_guess(d),
            }
        })
        .collect()
}

/// Leaves out, one by one, an edge of each cycle the guessed edges make (issue 37: a real
/// Rust family has cycles through dev-dependencies, golang.org/x one through a line marked
/// `tagx:ignore`), so the file passes `orch check` as written: the weakest edge of the cycle
/// — one for tests, examples or development only first, then one its line marks to ignore,
/// else the edge that closes the cycle — with a comment saying what was left out and why.
fn break_cycles(found: &mut [Found]) {
    for _ in 0..found.len() * found.len() {
        let graph = crate::graph::RepoGraph::new(found.iter().map(|f| {
            (
                f.name.clone(),
                f.deps.iter().map(|d| d.0.clone()).collect::<Vec<_>>(),
            )
        }));
        let Some(cycle) = graph.find_cycle() else {
            return;
        };
        // The cycle's edges: `a -> b` is "a depends on b".
        let edges: Vec<(usize, usize)> = cycle
            .windows(2)
            .filter_map(|w| {
                let from = found.iter().position(|f| f.name == w[0])?;
                let dep = found[from].deps.iter().position(|d| d.0 == w[1])?;
                Some((from, dep))
            })
            .collect();
        let weight = |&(from, dep): &(usize, usize)| {
            let (_, source, dev) = &found[from].deps[dep];
            if *dev {
                0
            } else if source.text.contains("ignore") {
                1
            } else {
                2
            }
        };
        let Some(&weakest) = edges.iter().min_by_key(|e| weight(e)) else {
            return;
        };
        let (from, dep) = weakest;
        let (to, source, dev) = found[from].deps.remove(dep);
        let why = format!(
            "it closes the cycle {}{}",
            cycle.join(" -> "),
            if dev {
                "; a dependency for tests, examples or development only"
            } else if source.text.contains("ignore") {
                "; its line says to ignore it"
            } else {
                ""
            }
        );
        found[from].left_out.push((to, source, why));
    }
}

/// A manifest larger than this is not one a person wrote: not read.
const MAX_MANIFEST_BYTES: u64 = 1 << 20;

/// The manifest files of the clone at `root` (path relative to it, text): those at its top
/// and in `requirements/`, then those of its workspace members / modules.
fn manifest_files(root: &Path) -> Vec<(String, String)> {
    let mut files = Vec::new();
    manifests_in(root, "", &mut files);
    let folder = root.file_name().map(|n| n.to_string_lossy().into_owned());
    let members = manifest::read_clone(&folder.unwrap_or_default(), &files).members;
    let mut seen: Vec<String> = vec![String::new()];
    for pattern in members {
        for member in expand_member(root, &pattern) {
            if !seen.contains(&member) {
                manifests_in(root, &member, &mut files);
                seen.push(member);
            }
        }
    }
    files
}

/// Appends the manifests in `root/rel` (and `root/rel/requirements/`), in
/// `manifest::FILES` order then by name.
fn manifests_in(root: &Path, rel: &str, files: &mut Vec<(String, String)>) {
    let join = |a: &str, b: &str| {
        if a.is_empty() {
            b.to_string()
        } else {
            format!("{a}/{b}")
        }
    };
    let mut found: Vec<String> = Vec::new();
    for sub in [rel.to_string(), join(rel, "requirements")] {
        let Ok(rd) = std::fs::read_dir(root.join(&sub)) else {
            continue;
        };
        let mut here: Vec<String> = rd
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
            .map(|e| join(&sub, &e.file_name().to_string_lossy()))
            .filter(|p| manifest::is_manifest(p))
            .collect();
        let rank = |p: &String| {
            let base = p.rsplit('/').next().unwrap_or(p);
            manifest::FILES
                .iter()
                .position(|f| *f == base)
                .unwrap_or(manifest::FILES.len())
        };
        here.sort_by(|a, b| rank(a).cmp(&rank(b)).then(a.cmp(b)));
        found.extend(here);
    }
    for path in found {
        let full = root.join(&path);
        let small = std::fs::metadata(&full).is_ok_and(|m| m.len() <= MAX_MANIFEST_BYTES);
        if let (true, Ok(text)) = (small, std::fs::read_to_string(&full)) {
            files.push((path, text));
        }
    }
}

/// The directories a workspace member pattern names (`crates/x`, `packages/*`,
/// `packages/**`), relative to `root`; none outside it.
fn expand_member(root: &Path, pattern: &str) -> Vec<String> {
    let pattern = pattern
        .trim()
        .trim_start_matches("./")
        .trim_end_matches('/');
    if pattern.is_empty() || pattern.split('/').any(|c| c == ".." || c.starts_with('/')) {
        return Vec::new();
    }
    let Some(star) = pattern.find('*') else {
        return vec![pattern.to_string()];
    };
    // One level under the part before the first wildcard: what workspaces hold in practice.
    let parent = pattern[..star].rsplit_once('/').map_or("", |(p, _)| p);
    let prefix = &pattern[parent.len()..star].trim_start_matches('/');
    let mut out: Vec<String> = std::fs::read_dir(root.join(parent))
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(prefix) && !n.starts_with('.'))
                .map(|n| {
                    if parent.is_empty() {
                        n
                    } else {
                        format!("{parent}/{n}")
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// A repository name for a directory: its file name, with what orch refuses in a name
/// replaced (names become git ref components and file names).
fn repo_name(dir: &Path) -> String {
    let raw = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "repo".into());
    let cleaned: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    cleaned.trim_matches('-').to_string()
}

/// A CI command guessed for a clone, and the comment that says what it rests on.
struct CiGuess {
    run: String,
    note: String,
}

/// Whether `program` is an executable file in a directory of PATH.
fn on_path(program: &str) -> bool {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()).any(|d| {
        std::fs::metadata(d.join(program)).is_ok_and(|m| {
            use std::os::unix::fs::PermissionsExt;
            m.is_file() && m.permissions().mode() & 0o111 != 0
        })
    })
}

/// A CI command for the project in `dir` that can pass on this machine: the kind of project
/// from its files, the tool from what is installed (a wrapper script, a lock file), and a
/// comment when the tool is missing or the job must install something first.
fn ci_guess(dir: &Path) -> CiGuess {
    let has = |f: &str| dir.join(f).exists();
    let guess = |run: &str, from: &str, tool: &str, install: &str| CiGuess {
        run: run.to_string(),
        note: if tool.is_empty() || on_path(tool) {
            format!("guessed from {from}")
        } else {
            format!("guessed from {from}; {tool} is not on PATH here: {install}")
        },
    };
    if has("Cargo.toml") {
        return guess(
            "cargo test",
            "Cargo.toml",
            "cargo",
            "install Rust (rustup) first",
        );
    }
    if has("package.json") {
        let text = std::fs::read_to_string(dir.join("package.json")).unwrap_or_default();
        let scripts = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| v.get("scripts")?.get("test").cloned());
        let (tool, install_step) = if has("pnpm-lock.yaml") {
            ("pnpm", "pnpm install --frozen-lockfile")
        } else if has("yarn.lock") {
            ("yarn", "yarn install --frozen-lockfile")
        } else if has("package-lock.json") {
            ("npm", "npm ci")
        } else {
            ("npm", "npm install")
        };
        // A fresh checkout has no node_modules: the job installs them.
        let mut g = guess(
            &format!("{install_step} && {tool} test"),
            "package.json",
            tool,
            "install Node.js and it first",
        );
        if scripts.is_none() {
            g.note
                .push_str("; package.json has no `test` script: name the real one");
        }
        return g;
    }
    if has("go.mod") {
        return guess("go test ./...", "go.mod", "go", "install Go first");
    }
    if has("pom.xml") {
        return if has("mvnw") {
            guess("./mvnw -q test", "pom.xml, mvnw", "", "")
        } else {
            guess("mvn -q test", "pom.xml", "mvn", "install Maven first")
        };
    }
    if has("build.gradle") || has("build.gradle.kts") {
        return if has("gradlew") {
            guess("./gradlew test", "build.gradle, gradlew", "", "")
        } else {
            guess(
                "gradle test",
                "build.gradle",
                "gradle",
                "install Gradle first",
            )
        };
    }
    let python_files = ["pyproject.toml", "setup.py", "requirements.txt"];
    if let Some(from) = python_files.iter().find(|f| has(f)) {
        return python_ci(dir, from);
    }
    if has("Makefile") {
        return guess("make test", "Makefile", "make", "install make first");
    }
    CiGuess {
        run: "true".into(),
        note: "no project file found: put the real CI command here".into(),
    }
}

/// Python's tests need pytest and, usually, the project installed: with pytest already
/// importable by python3 the job runs it; otherwise it makes a virtual environment first.
fn python_ci(dir: &Path, from: &str) -> CiGuess {
    if !on_path("python3") {
        return CiGuess {
            run: "python3 -m pytest".into(),
            note: format!(
                "guessed from {from}; python3 is not on PATH here: install Python 3 first"
            ),
        };
    }
    let has_pytest = std::process::Command::new("python3")
        .args(["-c", "import pytest"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if has_pytest {
        return CiGuess {
            run: "python3 -m pytest".into(),
            note: format!(
                "guessed from {from}; pytest is installed for python3 here — if the tests need the project installed, use a virtual environment: python3 -m venv .venv && .venv/bin/pip install -e . pytest"
            ),
        };
    }
    let install = if dir.join("pyproject.toml").exists() || dir.join("setup.py").exists() {
        "-e ."
    } else {
        "-r requirements.txt"
    };
    CiGuess {
        run: format!(
            "python3 -m venv .venv && .venv/bin/pip install -q {install} pytest && .venv/bin/python -m pytest"
        ),
        note: format!(
            "guessed from {from}; pytest is not installed for python3 here, so the job makes a virtual environment (.venv) and installs the project and pytest into it from PyPI"
        ),
    }
}

/// Text as one line of a YAML comment: control characters out.
fn comment_text(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// A manifest's line in a comment: one line, long ones cut.
fn quoted_line(s: &str) -> String {
    let clean = comment_text(s);
    match clean.char_indices().nth(100) {
        Some((at, _)) => format!("{}…", &clean[..at]),
        None => clean,
    }
}

fn repos_yaml(found: &[Found]) -> String {
    let mut y = String::from(
        "# repos.yaml — written by `orch init`; confirm what is marked `# guessed`.\n\
         # The worker completion contract is built in; `orch init --with-contract` writes it (and the\n\
         # prompt templates) under contracts/ to tune it.\n\
         forge:\n\
         \x20 kind: local          # CI on orch's embedded forge; for Forgejo:\n\
         \x20 # kind: forgejo\n\
         \x20 # url: https://forgejo.example.org\n\
         \x20 # owner: my-org\n\
         \x20 # token_file: forge-token   # a file holding the token (chmod 600), beside this file\n\
         ci:\n\
         \x20 sync_job: radicle-push\n\
         \x20 poll_interval: 500ms   # the local forge runs CI on this machine; on Forgejo 10s (the\n\
         \x20                        #   default) spares its API\n\
         worker:\n\
         \x20 agent: claude        # claude | codex | aider | command (README, Agents): orch runs each with the flags it needs\n\
         \x20 max_parallel: 4\n\
         \x20 # max_cost_usd: 5.00   # a worker that spends more is stopped (FAILED, kind budget)\n\
         \x20 # user: orch-worker   # run workers as an account of their own (orch then runs as root):\n\
         \x20 #                     #   useradd --system --user-group --shell /usr/sbin/nologin orch-worker\n\
         \x20 # sandbox: true       # without root: each worker in a namespace that hides orch's state,\n\
         \x20 #                     #   the clones and your credentials (README, Workers in a sandbox)\n\
         land:                  # after a verified DONE (README, From DONE to the base branch)\n\
         \x20 policy: merge        # merge: orch moves the base branch to verified work, only ever to a\n\
         \x20                      #   commit whose CI is green; none: people merge (Forgejo's default)\n\
         \x20 method: merge        # merge | rebase | squash, when the base moved meanwhile\n\
         repos:\n",
    );
    for f in found {
        let deps: Vec<&str> = f.deps.iter().map(|(n, _, _)| n.as_str()).collect();
        let mut dep_lines = String::new();
        let dep_note = if f.deps.is_empty() {
            "# guessed: no other clone's package among the manifests' dependencies"
        } else {
            "# guessed from the manifests; each from the line below"
        };
        for (to, source, dev) in &f.deps {
            dep_lines.push_str(&format!(
                "      # {to}: {source}  {}{}\n",
                quoted_line(&source.text),
                if *dev {
                    "  (tests/examples only: kept, a change there can break them)"
                } else {
                    ""
                }
            ));
        }
        for (to, source, why) in &f.left_out {
            dep_lines.push_str(&format!(
                "      # left out of deps: {to} ({source}  {}): {why}; orch's chains need a graph without cycles\n",
                quoted_line(&source.text)
            ));
        }
        for why in &f.unreadable {
            dep_lines.push_str(&format!("      # not read: {}\n", quoted_line(why)));
        }
        let (run, note) = (&f.ci.run, &f.ci.note);
        let ci = match f.deps.is_empty() {
            true => crate::upstreams::Wrapped {
                run: run.clone(),
                note: note.clone(),
            },
            false => crate::upstreams::through_upstreams(run, note),
        };
        y.push_str(&format!(
            "  {}:\n    path: ./{}\n    branch: {}   # guessed: the clone's current branch\n    deps: [{}]   {}\n{}    ci:                  # the local forge's jobs\n      jobs:\n        # {}\n        - {{ name: check, run: {}, timeout: 30m }}\n        - {{ name: radicle-push, run: \"true\", needs: [check] }}   # your sync step\n",
            f.name,
            f.dir.file_name().map(|n| n.to_string_lossy()).unwrap_or_default(),
            f.branch,
            deps.join(", "),
            dep_note,
            dep_lines,
            comment_text(&ci.note),
            serde_json::to_string(&ci.run).unwrap_or_default(),
        ));
    }
    y
}

/// An existing repos.yaml is replaced only with `--force`.
fn refuse_to_replace(target: &Path, force: bool) -> Result<(), Failure> {
    if target.exists() && !force {
        return Err(Failure::bad_input(format!(
            "{} exists; pass --force to replace it",
            target.display()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repository_name_is_a_clean_folder_name() {
        assert_eq!(repo_name(Path::new("/x/my repo.git")), "my-repo-git");
    }

    #[test]
    fn a_comment_is_one_line() {
        assert_eq!(comment_text("a\rb\tc"), "a b c");
        assert_eq!(quoted_line(&"x".repeat(150)).chars().count(), 101);
    }
}
