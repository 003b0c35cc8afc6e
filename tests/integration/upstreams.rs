//! Upstream workspaces on the local forge (issue 36, items 1–2): each run gets its upstreams'
//! checkouts at the commits it is about (`$ORCH_UPSTREAMS`, recorded with the run), and
//! `orch ci with-upstreams` makes Cargo and pip build against them — real crates and a real
//! Python project, the real binary as hook, runner and wrapper, nothing reached but the
//! loopback (the crates name each other by git URLs no one can reach).

use crate::support::{ORCH, commit_file, git, init_repo, push_head};
use orch::ci::{CiRun, JobStatus};
use orch::config::Config;
use orch::forge::local::{LocalForge, UpstreamRow};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Generous: debug binaries, two cores, cargo builds inside the jobs.
const RUN_DEADLINE: Duration = Duration::from_secs(120);

/// One repository of the test organisation: its files, its `deps`, its job's command.
struct Repo<'a> {
    name: &'a str,
    deps: &'a [&'a str],
    files: &'a [(&'a str, &'a str)],
    run: String,
}

/// An organisation on the local forge alone (no workers): clones, repos.yaml, the forge.
struct UpOrg {
    _dir: tempfile::TempDir,
    root: PathBuf,
    forge: LocalForge,
}

impl UpOrg {
    /// `ci_env`: the YAML flow mapping of every repository's `ci.env`; `top`: more top-level
    /// settings (its own `forge:` first, if any).
    fn new(repos: &[Repo], ci_env: &str, top: &str) -> UpOrg {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().to_path_buf();
        let forge = match top.starts_with("forge:") {
            true => "",
            false => "forge: {kind: local, max_concurrent_runs: 2}\n",
        };
        let mut yaml = format!("{forge}{top}repos:\n");
        for r in repos {
            init_repo(&root.join(r.name), r.name);
            yaml.push_str(&format!(
                "  {}:\n    path: {}\n    deps: [{}]\n    ci:\n      env: {ci_env}\n      jobs:\n        - {{name: check, run: {:?}, timeout: 200s, env: {{UP_MARK: \"job's own\"}}}}\n",
                r.name,
                r.name,
                r.deps.join(", "),
                r.run
            ));
        }
        let file = root.join("repos.yaml");
        std::fs::write(&file, yaml).unwrap();
        let config = Config::load(&file).unwrap();
        if let Some(shared) = &config.forge.path {
            orch::forge::local::settle_dir(&root.join("state"), Some(shared)).unwrap();
        }
        let forge = LocalForge::new(&root.join("state"), &config)
            .with_exe(ORCH)
            .recovering();
        for r in &config.repos {
            forge.ensure_remote(r).unwrap();
        }
        // The project lands after the remote was made from the first commit: its push is
        // what starts the first run.
        for r in repos {
            let clone = root.join(r.name);
            for (file, text) in r.files {
                if let Some(parent) = clone.join(file).parent() {
                    std::fs::create_dir_all(parent).unwrap();
                }
                std::fs::write(clone.join(file), text).unwrap();
            }
            std::fs::write(
                clone.join(".gitignore"),
                "target/\nCargo.lock\n.venv/\nnode_modules/\n",
            )
            .unwrap();
            git(&clone, &["add", "-A"]);
            git(&clone, &["commit", "-q", "-m", "the project"]);
        }
        UpOrg {
            _dir: dir,
            root,
            forge,
        }
    }

    fn clone(&self, repo: &str) -> PathBuf {
        self.root.join(repo)
    }

    /// Pushes the clone's HEAD to the base branch on the forge (a run starts) and returns it.
    fn push_base(&self, repo: &str) -> String {
        push_head(&self.clone(repo), &self.forge.remote_path(repo), "main");
        git(&self.clone(repo), &["rev-parse", "HEAD"])
    }

    /// Commits `text` to `file` of `repo` and pushes it to the base branch.
    fn change(&self, repo: &str, file: &str, text: &str) -> String {
        commit_file(&self.clone(repo), file, text, &format!("change {file}"));
        self.push_base(repo)
    }

    fn wait(&self, repo: &str, sha: &str) -> CiRun {
        self.forge
            .wait_for_run(repo, sha, Instant::now() + RUN_DEADLINE)
            .unwrap()
            .unwrap_or_else(|| {
                panic!(
                    "no finished run for {repo}@{sha}: {}\nruns: {:#?}\nrunner log: {}",
                    self.log(repo, sha),
                    self.forge.runs(repo, sha),
                    std::fs::read_to_string(
                        self.forge
                            .state_dir()
                            .join(format!("forge/logs/{repo}/1/runner.log"))
                    )
                    .unwrap_or_default()
                )
            })
    }

    fn log(&self, repo: &str, sha: &str) -> String {
        let path = self.forge.job_log_path(repo, sha, "check").unwrap();
        path.and_then(|p| std::fs::read_to_string(p).ok())
            .unwrap_or_else(|| "(no log)".into())
    }

    /// Waits for the run and asserts how it ended; returns its log.
    fn expect(&self, repo: &str, sha: &str, status: JobStatus) -> String {
        let run = self.wait(repo, sha);
        let log = self.log(repo, sha);
        assert_eq!(run.status, Some(status), "{repo}@{sha}:\n{log}");
        log
    }

    fn upstreams(&self, repo: &str, sha: &str) -> Vec<(String, String, bool)> {
        let rows: Vec<UpstreamRow> = self.forge.run_upstreams(repo, sha).unwrap();
        rows.into_iter()
            .map(|u| (u.repo, u.sha, u.pinned))
            .collect()
    }
}

/// The milliseconds the runner says the upstream checkouts took (`… ($N ms): …`).
fn checkout_ms(log: &str) -> u64 {
    let line = log
        .lines()
        .find(|l| l.starts_with("orch: upstreams in $ORCH_UPSTREAMS ("))
        .unwrap_or_else(|| panic!("no upstream line in:\n{log}"));
    line.split('(')
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

fn wrapped(command: &str) -> String {
    format!("{ORCH} ci with-upstreams -- {command}")
}

const CORE_TOML: &str = "[package]\nname = \"core\"\nversion = \"0.1.0\"\nedition = \"2021\"\n";
const VM_TOML: &str = "[package]\nname = \"vm\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\ncore = { git = \"https://example.invalid/core\" }\n";
const NET_TOML: &str = "[package]\nname = \"net\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[dependencies]\nvm = { git = \"https://example.invalid/vm\" }\n";
const VM_LIB: &str = "pub fn run() -> u32 {\n    core::answer()\n}\n\n#[test]\nfn runs_the_core() {\n    assert_eq!(run(), 42);\n}\n";
const NET_LIB: &str = "#[test]\nfn serves_the_vm() {\n    assert_eq!(vm::run(), 42);\n}\n";

#[test]
fn crates_build_against_their_upstreams_base_heads_and_pins() {
    let home = tempfile::tempdir().unwrap();
    // The job's own CARGO_HOME (repos.yaml's `ci.env`): no git cache of an earlier build,
    // nothing of the machine's; the job's `env` reaches it too.
    let test = |cmd: &str| wrapped(&format!("test \"$UP_MARK\" = \"job's own\" && {cmd}"));
    let repos = [
        Repo {
            name: "core",
            deps: &[],
            files: &[
                ("Cargo.toml", CORE_TOML),
                ("src/lib.rs", "pub fn answer() -> u32 {\n    42\n}\n"),
            ],
            run: test("cargo test --offline"),
        },
        Repo {
            name: "vm",
            deps: &["core"],
            files: &[("Cargo.toml", VM_TOML), ("src/lib.rs", VM_LIB)],
            run: test("cargo test --offline"),
        },
        Repo {
            name: "net",
            deps: &["vm"],
            files: &[("Cargo.toml", NET_TOML), ("src/lib.rs", NET_LIB)],
            run: test("cargo test --offline"),
        },
    ];
    let env = format!(
        "{{CARGO_HOME: {:?}, CARGO_TERM_COLOR: never}}",
        home.path().display().to_string()
    );
    let org = UpOrg::new(&repos, &env, "");

    let core1 = org.push_base("core");
    let log = org.expect("core", &core1, JobStatus::Success);
    assert!(
        log.contains("core has no upstreams: nothing to do"),
        "{log}"
    );
    assert!(org.upstreams("core", &core1).is_empty());

    let vm1 = org.push_base("vm");
    let net1 = org.push_base("net");
    let vm_log = org.expect("vm", &vm1, JobStatus::Success);
    assert!(
        vm_log.contains("cargo: patched core (https://example.invalid/core)"),
        "{vm_log}"
    );
    assert!(vm_log.contains("test runs_the_core ... ok"), "{vm_log}");
    assert_eq!(
        org.upstreams("vm", &vm1),
        [("core".into(), core1.clone(), false)]
    );
    // net sees vm, and core through it (transitively), each at its base head.
    let net_log = org.expect("net", &net1, JobStatus::Success);
    assert!(net_log.contains("test serves_the_vm ... ok"), "{net_log}");
    let mut ups = org.upstreams("net", &net1);
    ups.sort();
    assert_eq!(
        ups,
        [
            ("core".into(), core1.clone(), false),
            ("vm".into(), vm1.clone(), false)
        ]
    );
    eprintln!(
        "upstream checkouts: vm's run {} ms (1 upstream), net's {} ms (2 upstreams)",
        checkout_ms(&vm_log),
        checkout_ms(&net_log)
    );

    // core's API changes on its base: core's own CI is green, vm's next run builds against
    // the new base head (not a cached or registry copy) and is red for it.
    let core2 = org.change(
        "core",
        "src/lib.rs",
        "pub fn answer_v2() -> u32 {\n    42\n}\n",
    );
    org.expect("core", &core2, JobStatus::Success);
    let vm2 = org.change("vm", "NOTES", "a change of vm's that is not about core\n");
    let red = org.expect("vm", &vm2, JobStatus::Failure);
    assert!(
        red.contains("answer"),
        "vm fails on core's renamed function:\n{red}"
    );
    assert_eq!(
        org.upstreams("vm", &vm2),
        [("core".into(), core2.clone(), false)]
    );

    // A run pinned to core's previous commit builds against that one: green again, and the
    // pin is what the run records.
    let said = org
        .forge
        .start_run(
            "vm",
            "refs/heads/pinned",
            &vm2,
            &[("core".into(), core1.clone())],
        )
        .unwrap();
    assert!(said.iter().any(|l| l.contains("CI run #")), "{said:?}");
    let deadline = Instant::now() + RUN_DEADLINE;
    let pinned = loop {
        let runs = org.forge.runs("vm", &vm2).unwrap();
        if runs.len() == 2 && runs[0].jobs.iter().all(|j| j.status.is_done()) {
            break runs[0].clone();
        }
        assert!(
            Instant::now() < deadline,
            "the pinned run did not end: {runs:#?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    };
    let log = org.log("vm", &vm2);
    assert_eq!(pinned.status, Some(JobStatus::Success), "{log}");
    assert!(
        log.contains(&format!("core {} (pinned)", &core1[..10])),
        "{log}"
    );
    assert_eq!(org.upstreams("vm", &vm2), [("core".into(), core1, true)]);

    // The run's directory, its checkouts with it, is gone once the run ended.
    let work = org.forge.state_dir().join("forge/work");
    crate::support::poll_until(
        "the run directories to be removed",
        Duration::from_secs(30),
        || {
            std::fs::read_dir(&work)
                .map(|mut d| d.next().is_none())
                .unwrap_or(true)
                .then_some(())
        },
        || format!("left in {}", work.display()),
    );
}

/// A PEP 517 backend in the project itself (`backend-path`): building the upstream's wheel
/// needs nothing from an index.
const BACKEND: &str = r#"import base64, hashlib, os, zipfile

NAME, VERSION = "pycore", "0.1.0"
DIST = f"{NAME}-{VERSION}.dist-info"


def get_requires_for_build_wheel(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    name = f"{NAME}-{VERSION}-py3-none-any.whl"
    records = []
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as z:
        def add(path, data):
            z.writestr(path, data)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=")
            records.append(f"{path},sha256={digest.decode()},{len(data)}")
        with open(os.path.join(NAME, "__init__.py"), "rb") as f:
            add(f"{NAME}/__init__.py", f.read())
        add(f"{DIST}/METADATA", f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\n".encode())
        add(f"{DIST}/WHEEL", b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        records.append(f"{DIST}/RECORD,,")
        z.writestr(f"{DIST}/RECORD", "\n".join(records) + "\n")
    return name
"#;
const PYCORE_TOML: &str = "[build-system]\nrequires = []\nbuild-backend = \"backend\"\nbackend-path = [\".\"]\n\n[project]\nname = \"pycore\"\nversion = \"0.1.0\"\n";
const PYAPP_TOML: &str =
    "[project]\nname = \"pyapp\"\nversion = \"0.1.0\"\ndependencies = [\"pycore>=0.1\"]\n";
const PYAPP_TEST: &str = "import unittest\n\nimport pycore\n\n\nclass App(unittest.TestCase):\n    def test_core_answers(self):\n        self.assertEqual(pycore.answer(), 42)\n";

fn python3() -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join("python3"))
        .find(|p| p.is_file())
}

#[test]
fn a_python_project_imports_its_upstream_from_the_base_head() {
    if python3().is_none() {
        eprintln!("skipped: no python3 on PATH");
        return;
    }
    let run = format!(
        "python3 -m venv .venv && . .venv/bin/activate && {}",
        wrapped("python -m unittest -v")
    );
    let repos = [
        Repo {
            name: "pycore",
            deps: &[],
            files: &[
                ("pyproject.toml", PYCORE_TOML),
                ("backend.py", BACKEND),
                ("pycore/__init__.py", "def answer():\n    return 42\n"),
            ],
            run: "true".into(),
        },
        Repo {
            name: "pyapp",
            deps: &["pycore"],
            files: &[("pyproject.toml", PYAPP_TOML), ("test_app.py", PYAPP_TEST)],
            run,
        },
    ];
    let org = UpOrg::new(&repos, "{PIP_NO_INDEX: 1}", "");
    let core1 = org.push_base("pycore");
    org.expect("pycore", &core1, JobStatus::Success);
    let app1 = org.push_base("pyapp");
    let log = org.expect("pyapp", &app1, JobStatus::Success);
    assert!(log.contains("python: installed"), "{log}");
    assert!(log.contains("test_core_answers"), "{log}");
    assert_eq!(
        org.upstreams("pyapp", &app1),
        [("pycore".into(), core1, false)]
    );

    let core2 = org.change(
        "pycore",
        "pycore/__init__.py",
        "def answer():\n    return 41\n",
    );
    org.expect("pycore", &core2, JobStatus::Success);
    let app2 = org.change("pyapp", "NOTES", "not about pycore\n");
    let red = org.expect("pyapp", &app2, JobStatus::Failure);
    assert!(red.contains("AssertionError: 41 != 42"), "{red}");
    assert_eq!(
        org.upstreams("pyapp", &app2),
        [("pycore".into(), core2, false)]
    );
}

const JSAPP_PACKAGE: &str = r#"{"name": "jsapp", "version": "0.1.0", "dependencies": {"jscore": "^0.1.0"},
 "scripts": {"test": "node -e \"require('assert').strictEqual(require('jscore').answer(), 42); console.log('jsapp ok')\""}}
"#;

fn on_path(program: &str) -> bool {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .any(|d| d.join(program).is_file())
}

#[test]
fn an_npm_package_requires_its_upstream_from_the_base_head_offline() {
    if !on_path("npm") || !on_path("node") {
        eprintln!("skipped: no npm and node on PATH");
        return;
    }
    let repos = [
        Repo {
            name: "jscore",
            deps: &[],
            files: &[
                (
                    "package.json",
                    "{\"name\": \"jscore\", \"version\": \"0.1.0\", \"main\": \"index.js\"}\n",
                ),
                ("index.js", "exports.answer = () => 42;\n"),
            ],
            run: "true".into(),
        },
        Repo {
            name: "jsapp",
            deps: &["jscore"],
            files: &[("package.json", JSAPP_PACKAGE)],
            // The upstream linked in, nothing tracked changed (package.json, no lock file).
            run: format!(
                "{} && test -z \"$(git status --porcelain)\"",
                wrapped("npm test")
            ),
        },
    ];
    // npm may not reach its registry: the upstream comes from its checkout or not at all.
    let org = UpOrg::new(&repos, "{npm_config_offline: \"true\"}", "");
    let core1 = org.push_base("jscore");
    org.expect("jscore", &core1, JobStatus::Success);
    let app1 = org.push_base("jsapp");
    let log = org.expect("jsapp", &app1, JobStatus::Success);
    assert!(
        log.contains("npm: jscore ->") && log.contains("jsapp ok"),
        "{log}"
    );
    let core2 = org.change("jscore", "index.js", "exports.answer = () => 41;\n");
    org.expect("jscore", &core2, JobStatus::Success);
    let app2 = org.change("jsapp", "NOTES", "not about jscore\n");
    let red = org.expect("jsapp", &app2, JobStatus::Failure);
    assert!(red.contains("41 !== 42"), "{red}");
    assert_eq!(
        org.upstreams("jsapp", &app2),
        [("jscore".into(), core2, false)]
    );
}

#[test]
fn a_job_of_a_worker_account_reads_and_fetches_its_upstreams() {
    let Some(account) = crate::support::worker_account() else {
        return;
    };
    // What Cargo does with a redirected git dependency (`git fetch` from the checkout), as
    // the account: the checkout must hold its objects itself (the forge's are orch's).
    let probe = "test \"$(id -u)\" = \"$UP_UID\" && test ! -r \"$ORCH_UPSTREAMS/../../core.git/HEAD\" && \
        git -C \"$ORCH_UPSTREAMS/core\" rev-parse HEAD > \"$HOME/../core.sha\" && \
        git init -q \"$HOME/../probe\" && \
        git -C \"$HOME/../probe\" fetch -q \"file://$ORCH_UPSTREAMS/core\" HEAD && \
        test \"$(git -C \"$HOME/../probe\" rev-parse FETCH_HEAD)\" = \"$(cat \"$HOME/../core.sha\")\" && \
        grep -q '\"repo\": \"core\"' \"$ORCH_UPSTREAMS_LIST\" && echo probed-ok";
    let repos = [
        Repo {
            name: "core",
            deps: &[],
            files: &[("lib.txt", "core\n")],
            run: "true".into(),
        },
        Repo {
            name: "vm",
            deps: &["core"],
            files: &[("lib.txt", "vm\n")],
            run: probe.into(),
        },
    ];
    let org = UpOrg::new(
        &repos,
        &format!("{{UP_UID: \"{}\"}}", account.uid),
        &format!("worker: {{user: {}}}\n", account.name),
    );
    // The account reaches the run's directory through the test's, and nothing else of orch's
    // state (as orch leaves it before a worker of another account starts): not the remotes.
    orch::account::set_mode(&org.root, 0o711).unwrap();
    orch::account::tighten_state_dir(org.forge.state_dir()).unwrap();
    let core = org.push_base("core");
    org.expect("core", &core, JobStatus::Success);
    let vm = org.push_base("vm");
    let log = org.expect("vm", &vm, JobStatus::Success);
    assert!(log.contains("probed-ok"), "{log}");
    eprintln!(
        "upstream checkouts for a worker account's job (own objects): {} ms (1 upstream)",
        checkout_ms(&log)
    );
    assert_eq!(org.upstreams("vm", &vm), [("core".into(), core, false)]);
}

#[test]
fn a_sandboxed_job_reads_and_fetches_its_upstreams_but_not_the_forge() {
    if orch::pidns::usable().is_none() {
        eprintln!("skipped: worker.sandbox needs PID namespaces, which this machine does not give");
        return;
    }
    // The bare remotes (orch's state) are hidden; the run's checkouts are not.
    let probe = "test ! -e \"$ORCH_UPSTREAMS/../../core.git/HEAD\" && \
        git init -q \"$ORCH_UPSTREAMS/probe\" && \
        git -C \"$ORCH_UPSTREAMS/probe\" fetch -q \"file://$ORCH_UPSTREAMS/core\" HEAD && \
        test \"$(git -C \"$ORCH_UPSTREAMS/probe\" rev-parse FETCH_HEAD)\" = \"$(git -C \"$ORCH_UPSTREAMS/core\" rev-parse HEAD)\" && \
        echo probed-ok";
    let repos = [
        Repo {
            name: "core",
            deps: &[],
            files: &[("lib.txt", "core\n")],
            run: "true".into(),
        },
        Repo {
            name: "vm",
            deps: &["core"],
            files: &[("lib.txt", "vm\n")],
            run: probe.into(),
        },
    ];
    let org = UpOrg::new(&repos, "{}", "worker: {sandbox: true}\n");
    let core = org.push_base("core");
    org.expect("core", &core, JobStatus::Success);
    let vm = org.push_base("vm");
    let log = org.expect("vm", &vm, JobStatus::Success);
    assert!(log.contains("probed-ok"), "{log}");
    assert_eq!(org.upstreams("vm", &vm), [("core".into(), core, false)]);
}

#[test]
fn a_crate_builds_against_its_upstream_on_a_forge_reached_through_a_link() {
    let shared = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let repos = [
        Repo {
            name: "core",
            deps: &[],
            files: &[
                ("Cargo.toml", CORE_TOML),
                ("src/lib.rs", "pub fn answer() -> u32 {\n    42\n}\n"),
            ],
            run: "true".into(),
        },
        Repo {
            name: "vm",
            deps: &["core"],
            files: &[("Cargo.toml", VM_TOML), ("src/lib.rs", VM_LIB)],
            run: wrapped("cargo test --offline"),
        },
    ];
    // `forge.path`: the state directory's forge/ is a link there, and $ORCH_UPSTREAMS with it.
    let org = UpOrg::new(
        &repos,
        &format!("{{CARGO_HOME: {:?}}}", home.path().display().to_string()),
        &format!(
            "forge: {{kind: local, path: {:?}}}\n",
            shared.path().join("forge").display().to_string()
        ),
    );
    assert!(org.forge.state_dir().join("forge").is_symlink());
    let core = org.push_base("core");
    org.expect("core", &core, JobStatus::Success);
    let vm = org.push_base("vm");
    let log = org.expect("vm", &vm, JobStatus::Success);
    assert!(log.contains("test runs_the_core ... ok"), "{log}");
}
