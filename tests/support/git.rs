//! The tests' `git`: runs git in a directory with a fixed identity and no system
//! configuration, and returns its trimmed stdout (panicking with stderr on failure).
//! Included by `support/org.rs` (re-exported by `support`): repository creation, commits, pushes.

use std::path::Path;
use std::process::Command;

pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A repository in `dir` (created) with a `main` branch and one commit (`README` saying `name`).
pub fn init_repo(dir: &Path, name: &str) {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    std::fs::write(dir.join("README"), format!("{name}\n")).unwrap();
    git(dir, &["add", "README"]);
    git(dir, &["commit", "-q", "-m", "initial"]);
}

/// Writes `content` to `file` in `repo`, commits it with `message`; returns the new commit's SHA.
pub fn commit_file(repo: &Path, file: &str, content: &str, message: &str) -> String {
    std::fs::write(repo.join(file), content).unwrap();
    git(repo, &["add", file]);
    git(repo, &["commit", "-q", "-m", message]);
    git(repo, &["rev-parse", "HEAD"])
}

/// `git push -q <remote> HEAD:refs/heads/<branch>` in `repo`.
pub fn push_head(repo: &Path, remote: &Path, branch: &str) {
    git(
        repo,
        &[
            "push",
            "-q",
            remote.to_str().unwrap(),
            &format!("HEAD:refs/heads/{branch}"),
        ],
    );
}
