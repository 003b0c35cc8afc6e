//! `orch init [DIR]`: a commented repos.yaml for the git repositories found in DIR (and, with
//! `--with-contract`, the contract and prompt templates, for those who want to tune them).
//!
//! What it cannot know it guesses and says so: the base branch is the clone's current branch,
//! dependencies are read off the manifests (`Cargo.toml`, `package.json`, `go.mod`,
//! `pyproject.toml`) when they name another repository found, and a CI command from the kind of
//! project — each marked for the user to confirm.

use super::view::setup::{FileAction, FileKind, InitFile, InitRepo, InitView};
use super::{Failure, Outcome};
use std::path::{Path, PathBuf};

/// One repository found.
struct Found {
    name: String,
    dir: PathBuf,
    branch: String,
    /// Other repositories its manifests name, and in which file.
    deps: Vec<(String, &'static str)>,
    /// A CI command for the project's kind, and that kind.
    ci: (&'static str, &'static str),
}

const MANIFESTS: &[&str] = &["Cargo.toml", "package.json", "go.mod", "pyproject.toml"];

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
    let found = find(&dir);
    if found.is_empty() {
        return Err(Failure::bad_input(format!(
            "no git repository found in {} (orch init looks at its subdirectories: one clone each)",
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
        super::view::print_json(view);
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

/// The git repositories among `dir`'s subdirectories, by name.
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
    dirs.iter()
        .zip(&names)
        .map(|(d, name)| {
            let branch = git2::Repository::open(d)
                .ok()
                .and_then(|r| r.head().ok()?.shorthand().ok().map(str::to_string))
                .unwrap_or_else(|| "main".into());
            let mut deps = Vec::new();
            for m in MANIFESTS {
                let Ok(text) = std::fs::read_to_string(d.join(m)) else {
                    continue;
                };
                for other in names.iter().filter(|o| *o != name) {
                    if names_word(&text, other) && !deps.iter().any(|(n, _)| n == other) {
                        deps.push((other.clone(), *m));
                    }
                }
            }
            Found {
                name: name.clone(),
                dir: d.clone(),
                branch,
                deps,
                ci: ci_guess(d),
            }
        })
        .collect()
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

/// Whether `text` names `word` as a whole word (letters, digits, `-`, `_` around it end it).
fn names_word(text: &str, word: &str) -> bool {
    let part = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    text.match_indices(word).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + word.len()..].chars().next();
        !before.is_some_and(part) && !after.is_some_and(part)
    })
}

/// A CI command for the project in `dir`, and what it was guessed from.
fn ci_guess(dir: &Path) -> (&'static str, &'static str) {
    for (file, cmd) in [
        ("Cargo.toml", "cargo test"),
        ("package.json", "npm test"),
        ("go.mod", "go test ./..."),
        ("pyproject.toml", "python -m pytest"),
        ("Makefile", "make test"),
    ] {
        if dir.join(file).exists() {
            return (cmd, file);
        }
    }
    ("true", "nothing found")
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
        let deps: Vec<&str> = f.deps.iter().map(|(n, _)| n.as_str()).collect();
        let dep_note = if f.deps.is_empty() {
            "# guessed: none found in the manifests".to_string()
        } else {
            let from: Vec<String> = f.deps.iter().map(|(n, m)| format!("{n} ({m})")).collect();
            format!("# guessed from {}", from.join(", "))
        };
        let ci_note = if f.ci.0 == "true" {
            "# no project file found: put the real CI command here".to_string()
        } else {
            format!("# guessed from {}", f.ci.1)
        };
        y.push_str(&format!(
            "  {}:\n    path: ./{}\n    branch: {}   # guessed: the clone's current branch\n    deps: [{}]   {}\n    ci:                  # the local forge's jobs\n      jobs:\n        - {{ name: check, run: \"{}\", timeout: 30m }}   {}\n        - {{ name: radicle-push, run: \"true\", needs: [check] }}   # your sync step\n",
            f.name,
            f.dir.file_name().map(|n| n.to_string_lossy()).unwrap_or_default(),
            f.branch,
            deps.join(", "),
            dep_note,
            f.ci.0,
            ci_note,
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
    fn a_name_counts_only_as_a_whole_word() {
        assert!(names_word("core = { path = \"../core\" }", "core"));
        assert!(!names_word("acdc-core = \"1\"", "core"));
        assert!(!names_word("corelib", "core"));
        assert_eq!(repo_name(Path::new("/x/my repo.git")), "my-repo-git");
    }
}
