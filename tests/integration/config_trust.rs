//! `orch check` refuses configurations that look fine but break later: one clone under two
//! names, names that are no git ref or too long for orch's files, a token pasted where a
//! variable name belongs (and never echoes it), a file that is not UTF-8 (with the place).

use crate::support::{CONTRACT_TEXT, orch_cmd};
use std::path::Path;

/// Writes repos.yaml (bytes) and the shipped contract into `dir` and runs `orch check` there:
/// (exit code, stdout, stderr).
fn check_in(dir: &Path, repos: &[u8]) -> (i32, String, String) {
    std::fs::write(dir.join("repos.yaml"), repos).unwrap();
    std::fs::create_dir_all(dir.join("contracts")).unwrap();
    std::fs::write(dir.join("contracts/worker-completion.yaml"), CONTRACT_TEXT).unwrap();
    let out = orch_cmd().current_dir(dir).arg("check").output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (
        out.status.code().unwrap_or(-1),
        text(&out.stdout),
        text(&out.stderr),
    )
}

fn check(repos: &str) -> (i32, String, String) {
    let dir = tempfile::tempdir().unwrap();
    check_in(dir.path(), repos.as_bytes())
}

#[test]
fn a_clone_under_two_names_through_a_symlink_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir_all(root.join("clones/core")).unwrap();
    std::os::unix::fs::symlink(root.join("clones/core"), root.join("alias")).unwrap();
    let (code, _, stderr) = check_in(
        &root,
        b"repos:\n  core: {path: clones/core}\n  vm: {path: alias}\n",
    );
    assert_eq!(code, 2, "{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.contains("one clone"))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(line.contains("\"core\" and \"vm\""), "{line}");
    assert!(
        line.contains(&root.join("clones/core").display().to_string()),
        "{line}"
    );
    assert!(line.contains("repos.yaml:3:"), "{line}");
}

#[test]
fn the_same_path_twice_is_refused() {
    let (code, _, stderr) = check("repos:\n  core: {path: src/core}\n  vm: {path: ./src/core/}\n");
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("\"core\" and \"vm\" are one clone"),
        "{stderr}"
    );
}

#[test]
fn a_name_that_is_no_git_ref_is_refused() {
    let (code, _, stderr) = check("repos:\n  core: {}\n  a..b: {}\n");
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("repos.yaml:3:3:"), "{stderr}");
    assert!(stderr.contains("\"a..b\" is not allowed"), "{stderr}");
}

#[test]
fn a_name_too_long_for_orchs_file_names_is_refused() {
    let long = "r".repeat(240);
    let (code, _, stderr) = check(&format!("repos:\n  {long}: {{}}\n"));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("240 bytes long; at most 209"), "{stderr}");
    // The longest allowed name passes.
    let (code, _, stderr) = check(&format!("repos:\n  {}: {{}}\n", "r".repeat(209)));
    assert_eq!(code, 0, "{stderr}");
}

#[test]
fn a_token_in_token_env_is_refused_and_never_printed() {
    let token = "3f9a1c0b7e2d4a5968b1c2d3e4f5a6b7c8d9e0f1";
    let (code, stdout, stderr) = check(&format!(
        "forge: {{kind: forgejo, url: 'https://forge.example', owner: org, token_env: {token}}}\nrepos:\n  core: {{}}\n"
    ));
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("must be the NAME"), "{stderr}");
    for out in [&stdout, &stderr] {
        assert!(!out.contains(token), "the token was printed: {out}");
        assert!(
            !out.contains(&token[..12]),
            "part of the token was printed: {out}"
        );
    }
}

#[test]
fn bad_utf8_is_reported_with_its_position() {
    let dir = tempfile::tempdir().unwrap();
    let (code, _, stderr) = check_in(dir.path(), b"repos:\n  core: {}\n  v\xe9m: {}\n");
    assert_eq!(code, 2, "{stderr}");
    assert!(
        stderr.contains("repos.yaml:3:4: not valid UTF-8 at byte offset 21"),
        "{stderr}"
    );
    // UTF-16 (what some editors save) is named as such.
    let utf16: Vec<u8> = [0xff, 0xfe]
        .into_iter()
        .chain("repos: {}\n".encode_utf16().flat_map(u16::to_le_bytes))
        .collect();
    let (code, _, stderr) = check_in(dir.path(), &utf16);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("repos.yaml:1:1:"), "{stderr}");
    assert!(stderr.contains("UTF-16"), "{stderr}");
}
