//! `orch init` on clones of every ecosystem it reads: the edges are the other clones whose
//! *package names* the manifests depend on — a capitalised name (`MarkupSafe`), a package
//! renamed from its folder (`jinja2` in `jinja`, `acdc_core` in `rust-core`), a URL in a
//! dependency group and another clone's name in prose give none — each with its source line.

use crate::support::output_text;
use std::path::Path;

/// Each clone: its folder and its manifest files (path, text).
const CLONES: &[(&str, &[(&str, &str)])] = &[
    // Python, as the Pallets projects write it.
    (
        "markupsafe",
        &[(
            "pyproject.toml",
            "[project]\nname = \"MarkupSafe\"\nversion = \"3.0.2\"\n",
        )],
    ),
    (
        "jinja",
        &[(
            "pyproject.toml",
            r#"[project]
name = "Jinja2"
description = "A template engine; werkzeug and flask use it."
dependencies = ["MarkupSafe>=2.0"]
"#,
        )],
    ),
    (
        "werkzeug",
        &[
            (
                "pyproject.toml",
                "[project]\nname = \"Werkzeug\"\ndependencies = [\n    \"MarkupSafe>=2.1.1\",\n]\n",
            ),
            ("requirements-dev.txt", "markupsafe==3.0.2\npytest\n"),
        ],
    ),
    (
        "flask",
        &[
            (
                "pyproject.toml",
                r#"[dependency-groups]
docs = [
    "pallets-sphinx-themes @ https://github.com/pallets/jinja/archive/main.zip",
]

[project]
name = "Flask"
description = "A simple framework, built on Werkzeug and Jinja, with click."
optional-dependencies = { async = ["asgiref>=3.2"], dotenv = ["python_dotenv"] }
dependencies = [
    "Werkzeug>=3.1.0",
    "Jinja2>=3.1.2",
    "itsdangerous>=2.2.0",
    "click>=8.1.3",
]
"#,
            ),
            (
                "requirements/tests.txt",
                "# what the tests need, blinker included\n-e ../werkzeug\nJinja2==3.1.4\nWerkzeug==3.1.3\nBlinker>=1.9\n",
            ),
        ],
    ),
    (
        "blinker",
        &[(
            "pyproject.toml",
            "[tool.poetry]\nname = \"blinker\"\n\n[tool.poetry.dependencies]\npython = \"^3.9\"\n",
        )],
    ),
    // Cargo: a renamed package, a git dependency on a workspace member, prose.
    (
        "rust-core",
        &[("Cargo.toml", "[package]\nname = \"acdc_core\"\n")],
    ),
    (
        "parser",
        &[
            ("Cargo.toml", "[workspace]\nmembers = [\"crates/*\"]\n"),
            (
                "crates/parser-core/Cargo.toml",
                "[package]\nname = \"parser-core\"\n\n[dependencies]\nacdc-core = { path = \"../../../rust-core\" }\n",
            ),
        ],
    ),
    (
        "vm",
        &[(
            "Cargo.toml",
            r#"[package]
name = "vm"
description = "runs on parser and rust-core"

[dependencies]
core = { package = "acdc-core", path = "../rust-core" }

[dev-dependencies]
parser-core = { git = "https://example.org/acme/parser" }
"#,
        )],
    ),
    // npm.
    (
        "ui",
        &[("package.json", "{\n  \"name\": \"@acme/ui\"\n}\n")],
    ),
    (
        "web",
        &[(
            "package.json",
            r#"{
  "name": "@acme/web",
  "description": "the site, on ui and vm",
  "dependencies": {
    "react": "^18.3.0",
    "@acme/ui": "workspace:*"
  }
}
"#,
        )],
    ),
    // Go.
    (
        "gocore",
        &[("go.mod", "module example.com/acme/gocore\n\ngo 1.22\n")],
    ),
    (
        "api",
        &[(
            "go.mod",
            "// serves web\nmodule example.com/acme/api\n\ngo 1.22\n\nrequire (\n\tgithub.com/pkg/errors v0.9.1\n\texample.com/acme/gocore v1.4.0\n)\n",
        )],
    ),
    // Maven and Gradle.
    (
        "ledger",
        &[(
            "pom.xml",
            "<project>\n  <groupId>org.acme</groupId>\n  <artifactId>ledger</artifactId>\n</project>\n",
        )],
    ),
    (
        "billing",
        &[(
            "pom.xml",
            r#"<project>
  <groupId>org.acme</groupId>
  <artifactId>billing</artifactId>
  <description>bills, for reports</description>
  <dependencies>
    <dependency>
      <groupId>${project.groupId}</groupId>
      <artifactId>ledger</artifactId>
    </dependency>
  </dependencies>
</project>
"#,
        )],
    ),
    (
        "reports",
        &[
            ("settings.gradle", "rootProject.name = 'reports'\n"),
            (
                "build.gradle",
                "group = 'org.acme'\n\ndependencies {\n    implementation 'org.acme:billing:1.0'\n    testImplementation(\"junit:junit:4.13.2\")\n}\n",
            ),
        ],
    ),
];

/// Each clone's `deps:` line and the comment lines under it, as `orch init` must write them.
const EXPECTED: &[(&str, &str)] = &[
    ("markupsafe", "deps: []"),
    (
        "jinja",
        "deps: [markupsafe]\n# markupsafe: pyproject.toml:4  dependencies = [\"MarkupSafe>=2.0\"]",
    ),
    (
        "werkzeug",
        "deps: [markupsafe]\n# markupsafe: pyproject.toml:4  \"MarkupSafe>=2.1.1\",",
    ),
    (
        "flask",
        "deps: [werkzeug, jinja, blinker]\n# werkzeug: pyproject.toml:11  \"Werkzeug>=3.1.0\",\n# jinja: pyproject.toml:12  \"Jinja2>=3.1.2\",\n# blinker: requirements/tests.txt:5  Blinker>=1.9",
    ),
    ("blinker", "deps: []"),
    ("rust-core", "deps: []"),
    (
        "parser",
        "deps: [rust-core]\n# rust-core: crates/parser-core/Cargo.toml:5  acdc-core = { path = \"../../../rust-core\" }",
    ),
    (
        "vm",
        "deps: [rust-core, parser]\n# rust-core: Cargo.toml:6  core = { package = \"acdc-core\", path = \"../rust-core\" }\n# parser: Cargo.toml:9  parser-core = { git = \"https://example.org/acme/parser\" }  (tests/examples only: kept, a change there can break them)",
    ),
    ("ui", "deps: []"),
    (
        "web",
        "deps: [ui]\n# ui: package.json:6  \"@acme/ui\": \"workspace:*\"",
    ),
    ("gocore", "deps: []"),
    (
        "api",
        "deps: [gocore]\n# gocore: go.mod:8  example.com/acme/gocore v1.4.0",
    ),
    ("ledger", "deps: []"),
    (
        "billing",
        "deps: [ledger]\n# ledger: pom.xml:8  <artifactId>ledger</artifactId>",
    ),
    (
        "reports",
        "deps: [billing]\n# billing: build.gradle:4  implementation 'org.acme:billing:1.0'",
    ),
];

/// The `deps:` line of `repo` in `yaml` (its trailing comment cut) and the comment lines
/// that follow it, each trimmed.
fn deps_block(yaml: &str, repo: &str) -> String {
    let lines: Vec<&str> = yaml
        .lines()
        .skip_while(|l| *l != format!("  {repo}:"))
        .skip(1)
        .skip_while(|l| !l.trim_start().starts_with("deps:"))
        .collect();
    let mut out = vec![lines[0].trim().split("   #").next().unwrap().to_string()];
    out.extend(
        lines[1..]
            .iter()
            .take_while(|l| l.trim_start().starts_with('#'))
            .map(|l| l.trim().to_string()),
    );
    out.join("\n")
}

fn write_clone(dir: &Path, name: &str, files: &[(&str, &str)]) {
    let repo = dir.join(name);
    crate::support::init_repo(&repo, name);
    for (path, text) in files {
        let file = repo.join(path);
        std::fs::create_dir_all(file.parent().unwrap()).unwrap();
        std::fs::write(file, text).unwrap();
    }
}

#[test]
fn init_guesses_edges_from_package_names_in_every_ecosystem() {
    let dir = tempfile::tempdir().unwrap();
    for (name, files) in CLONES {
        write_clone(dir.path(), name, files);
    }
    let run = |args: &[&str]| {
        crate::support::orch_cmd()
            .current_dir(dir.path())
            .args(args)
            .output()
            .unwrap()
    };
    let out = run(&["init"]);
    assert!(out.status.success(), "{}", output_text(&out));
    let yaml = std::fs::read_to_string(dir.path().join("repos.yaml")).unwrap();
    for (repo, expected) in EXPECTED {
        assert_eq!(deps_block(&yaml, repo), *expected, "{repo} in\n{yaml}");
    }
    assert_eq!(EXPECTED.len(), CLONES.len());
    // A poll interval for the local forge; a CI command for each kind, from its tools.
    assert!(yaml.contains("  poll_interval: 500ms"), "{yaml}");
    // A repository with upstreams builds against their checkouts (orch ci with-upstreams).
    for (repo, ci) in [
        ("vm", "cargo test"),
        ("web", "npm test"),
        ("api", "go test ./..."),
        ("billing", "mvn -q test"),
        ("reports", "gradle test"),
        ("flask", "pytest"),
    ] {
        let block: String = yaml
            .lines()
            .skip_while(|l| *l != format!("  {repo}:"))
            .take_while(|l| !l.contains("radicle-push"))
            .collect::<Vec<_>>()
            .join("\n");
        assert!(block.contains(ci), "{repo}: {ci} in\n{block}");
        let deps = deps_block(&yaml, repo);
        let wrapped = block.contains("orch ci with-upstreams -- ");
        assert_eq!(
            wrapped,
            !deps.starts_with("deps: []"),
            "{repo} (deps {deps:?}):\n{block}"
        );
    }
    assert!(yaml.contains("package.json has no `test` script"), "{yaml}");
    let check = run(&["check"]);
    assert!(check.status.success(), "{}\n{yaml}", output_text(&check));
}

/// init's file passes `orch check` as written on a family with cycles (issue 37): hyper ⇄ h2
/// through h2's dev-dependencies and tracing ⇄ hyper through tracing's, as the Rust family
/// has, and two npm packages that depend on each other for their build. Each cycle is broken
/// on its weakest edge — a dev-only one first — with a comment naming what was left out and
/// why; the dev-only edges that close no cycle stay, marked.
#[test]
fn init_breaks_every_cycle_on_its_weakest_edge_and_check_accepts_it() {
    let dir = tempfile::tempdir().unwrap();
    let cargo = |name: &str, deps: &str, dev: &str| {
        format!(
            "[package]\nname = \"{name}\"\nversion = \"1.0.0\"\n\n[dependencies]\n{deps}\n[dev-dependencies]\n{dev}"
        )
    };
    write_clone(
        dir.path(),
        "hyper",
        &[(
            "Cargo.toml",
            &cargo("hyper", "h2 = \"0.4\"\ntracing = \"0.1\"\n", ""),
        )],
    );
    write_clone(
        dir.path(),
        "h2",
        &[("Cargo.toml", &cargo("h2", "", "hyper = \"1\"\n"))],
    );
    write_clone(
        dir.path(),
        "tracing",
        &[("Cargo.toml", &cargo("tracing", "", "hyper = \"1\"\n"))],
    );
    write_clone(
        dir.path(),
        "bytes",
        &[("Cargo.toml", &cargo("bytes", "", "h2 = \"0.4\"\n"))],
    );
    write_clone(
        dir.path(),
        "net",
        &[(
            "package.json",
            r#"{"name": "x-net", "dependencies": {"x-crypto": "1"}}"#,
        )],
    );
    write_clone(
        dir.path(),
        "crypto",
        &[(
            "package.json",
            r#"{"name": "x-crypto", "dependencies": {"x-net": "1"}}"#,
        )],
    );
    let run = |args: &[&str]| {
        crate::support::orch_cmd()
            .current_dir(dir.path())
            .args(args)
            .output()
            .unwrap()
    };
    let out = run(&["init"]);
    assert!(out.status.success(), "{}", output_text(&out));
    let yaml = std::fs::read_to_string(dir.path().join("repos.yaml")).unwrap();
    let out = run(&["check", "-q"]);
    assert!(out.status.success(), "{}\n{yaml}", output_text(&out));
    // The dev-only edges closing a cycle are the ones left out; hyper's build edges stay.
    let hyper = deps_block(&yaml, "hyper");
    assert!(hyper.starts_with("deps: [h2, tracing]"), "{hyper}");
    for repo in ["h2", "tracing"] {
        let block = deps_block(&yaml, repo);
        assert!(block.starts_with("deps: []"), "{block}");
        assert!(
            block.contains("left out of deps: hyper")
                && block.contains("tests, examples or development only"),
            "{block}"
        );
    }
    // A dev-only edge that closes no cycle is kept, and said to be dev-only.
    let bytes = deps_block(&yaml, "bytes");
    assert!(
        bytes.starts_with("deps: [h2]") && bytes.contains("tests/examples only"),
        "{bytes}"
    );
    // A build cycle loses one edge, named with the cycle.
    let left: usize = ["net", "crypto"]
        .iter()
        .map(|r| deps_block(&yaml, r).matches("left out of deps").count())
        .sum();
    assert_eq!(left, 1, "{yaml}");
    assert!(yaml.contains("closes the cycle"), "{yaml}");
}
