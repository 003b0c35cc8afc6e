//! `orch graph --format mermaid|dot` through the real binary: names that differ only in
//! punctuation stay distinct nodes, and a repository named like a keyword stays a label.

use crate::support::{orch_cmd, output_text};

fn graph(format: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("repos.yaml"),
        "repos:\n  core.x: {}\n  core-x: { deps: [core.x] }\n  end: { deps: [core-x] }\n",
    )
    .unwrap();
    let out = orch_cmd()
        .current_dir(dir.path())
        .args(["graph", "--format", format])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", output_text(&out));
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn mermaid_and_dot_keep_every_repository_a_node_of_its_own() {
    let m = graph("mermaid");
    assert_eq!(
        m,
        "graph BT\n  r0[\"core-x\"]\n  r1[\"core.x\"]\n  r2[\"end\"]\n  r0 --> r1\n  r2 --> r0\n",
        "generated ids, quoted labels, in the order of the names"
    );
    let d = graph("dot");
    for line in [
        "  \"core.x\";",
        "  \"core-x\";",
        "  \"end\";",
        "  \"core-x\" -> \"core.x\";",
        "  \"end\" -> \"core-x\";",
    ] {
        assert!(d.lines().any(|l| l == line), "{line:?} missing in:\n{d}");
    }
}
