use super::*;

#[test]
fn every_source_of_a_dependency_is_read_by_package_name() {
    let text = r#"
[package]
name = "net"
[dependencies]
vm = { git = "https://example.invalid/vm", branch = "main" }
core = "1.2"
mycore = { package = "core-extra", version = "1", registry = "inner" }
local = { path = "../local" }
shared = { workspace = true }
[target.'cfg(unix)'.dev-dependencies]
unixy = { version = "0.1" }
"#;
    let found = deps(text).unwrap();
    let d = |n: &str, f: Origin| Dep {
        name: n.into(),
        from: f,
    };
    assert_eq!(
        found,
        [
            d("core", Origin::Registry("crates-io".into())),
            d("core-extra", Origin::Registry("inner".into())),
            d("local", Origin::Path),
            d("unixy", Origin::Registry("crates-io".into())),
            d("vm", Origin::Git("https://example.invalid/vm".into())),
        ]
    );
}

#[test]
fn patches_are_keyed_by_source_and_git_urls_redirected() {
    let core = Crate {
        name: "core".into(),
        dir: "/ws/core".into(),
    };
    let vm = Crate {
        name: "vm".into(),
        dir: "/ws/vm/crates/vm".into(),
    };
    let crates = [
        (core, PathBuf::from("/ws/core")),
        (vm, PathBuf::from("/ws/vm")),
    ];
    let deps = [
        Dep {
            name: "vm".into(),
            from: Origin::Git("https://example.invalid/vm".into()),
        },
        Dep {
            name: "core".into(),
            from: Origin::Git("https://example.invalid/core".into()),
        },
        // The same crate named again (another manifest): one entry.
        Dep {
            name: "core".into(),
            from: Origin::Git("https://example.invalid/core".into()),
        },
        Dep {
            name: "core".into(),
            from: Origin::Registry("crates-io".into()),
        },
        Dep {
            name: "core".into(),
            from: Origin::Path,
        },
        Dep {
            name: "serde".into(),
            from: Origin::Registry("crates-io".into()),
        },
    ];
    let p = plan(&crates, &deps);
    assert_eq!(
        p.config,
        "# Written by `orch ci with-upstreams`: the upstreams' checkouts stand in for them.\n\
         [net]\ngit-fetch-with-cli = true\n\
         \n[patch.\"https://example.invalid/vm\"]\n\"vm\" = { path = \"/ws/vm/crates/vm\" }\n\
         \n[patch.\"https://example.invalid/core\"]\n\"core\" = { path = \"/ws/core\" }\n\
         \n[patch.crates-io]\n\"core\" = { path = \"/ws/core\" }\n"
    );
    assert_eq!(
        p.redirects,
        [
            ("https://example.invalid/vm".to_string(), "/ws/vm".into()),
            (
                "https://example.invalid/core".to_string(),
                "/ws/core".into()
            ),
        ]
    );
    assert_eq!(p.said.len(), 3);
    // What cargo reads back is what was meant.
    let doc = tomlx::parse(&p.config).unwrap();
    let patch = tomlx::table(doc.get_ref(), "patch").unwrap();
    let git = tomlx::table(patch, "https://example.invalid/core").unwrap();
    assert_eq!(
        tomlx::str(tomlx::table(git, "core").unwrap(), "path"),
        Some("/ws/core")
    );
}

#[test]
fn nothing_to_patch_writes_no_table_and_no_redirect() {
    let p = plan(&[], &deps("[dependencies]\nserde = \"1\"\n").unwrap());
    assert!(!p.config.contains("[patch"), "{}", p.config);
    assert!(p.redirects.is_empty());
    assert!(git_redirects(0, &p.redirects).is_empty());
}

#[test]
fn redirects_come_after_the_git_config_already_given() {
    let env = git_redirects(
        2,
        &[("https://example.invalid/core".into(), "/ws/core".into())],
    );
    let s = |a: &str, b: &str| (a.to_string(), b.to_string());
    assert_eq!(
        env,
        [
            s("GIT_CONFIG_KEY_2", "url.file:///ws/core.insteadOf"),
            s("GIT_CONFIG_VALUE_2", "https://example.invalid/core"),
            s("GIT_CONFIG_COUNT", "3"),
        ]
    );
}

#[test]
fn a_workspace_lists_its_members_crates() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    std::fs::write(
        root.join("Cargo.toml"),
        "[workspace]\nmembers = [\"crates/*\", \"tool\"]\n",
    )
    .unwrap();
    for (d, n) in [
        ("crates/a", "alpha"),
        ("crates/b", "beta"),
        ("tool", "tool"),
    ] {
        std::fs::create_dir_all(root.join(d)).unwrap();
        std::fs::write(
            root.join(d).join("Cargo.toml"),
            format!("[package]\nname = \"{n}\"\n"),
        )
        .unwrap();
    }
    let names: Vec<String> = crates_of(root).into_iter().map(|c| c.name).collect();
    assert_eq!(names, ["alpha", "beta", "tool"]);
}
