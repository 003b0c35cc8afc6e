//! Go: a workspace file outside the repository (`$ORCH_UPSTREAMS/.orch/go.work`, named by
//! `GOWORK`) that `use`s the dependent's module and each upstream module; the modules it
//! uses replace their required versions. go.mod is not touched.

use super::Upstream;
use std::path::{Path, PathBuf};

/// The `go` directive of a go.mod's text (`go 1.22`), if it has one.
pub fn go_version(go_mod: &str) -> Option<String> {
    go_mod.lines().find_map(|l| {
        let mut words = l.split_whitespace();
        (words.next() == Some("go"))
            .then(|| words.next().map(str::to_string))
            .flatten()
    })
}

/// The text of a go.work using `dirs` (the dependent's first).
pub fn go_work(version: &str, dirs: &[PathBuf]) -> String {
    let mut out = format!("go {version}\n\nuse (\n");
    for d in dirs {
        out.push_str(&format!("\t{}\n", quote(&d.to_string_lossy())));
    }
    out.push_str(")\n");
    out
}

/// Go's interpreted string literal.
fn quote(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// The module directories for the dependent in `cwd`: itself, then each upstream with a go.mod.
pub fn modules(cwd: &Path, upstreams: &[Upstream]) -> Vec<PathBuf> {
    std::iter::once(cwd.to_path_buf())
        .chain(
            upstreams
                .iter()
                .filter(|u| u.path.join("go.mod").is_file())
                .map(|u| u.path.clone()),
        )
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workspace_uses_the_dependent_and_its_upstreams() {
        assert_eq!(
            go_version("module example.com/vm\n\ngo 1.22.1\n\nrequire example.com/core v1.0.0\n")
                .as_deref(),
            Some("1.22.1")
        );
        assert_eq!(go_version("module x\n"), None);
        let text = go_work("1.22", &["/ws/vm".into(), "/ws/co\"re".into()]);
        assert_eq!(
            text,
            "go 1.22\n\nuse (\n\t\"/ws/vm\"\n\t\"/ws/co\\\"re\"\n)\n"
        );
    }
}
