//! orch with its state in PostgreSQL (`store:` in repos.yaml): a whole worker's life on it,
//! nothing in the state directory's SQLite file, `orch check` reaching the database; a URL
//! with a password refused without showing it.
//!
//! Needs a server: `ORCH_TEST_PG_URL` (`.ci/run` starts a throwaway one: `source
//! .ci/postgres`). Without it each test says it is skipped, never silently; with
//! `ORCH_TEST_PG_REQUIRED=1` (CI) a missing server fails them.

use crate::support::{Org, RepoSpec, Spec, output_text};
use orch::milestone::Milestone;

/// A database of the test's own on the server of `ORCH_TEST_PG_URL`: its URL (no password:
/// the throwaway cluster trusts loopback).
pub(crate) fn fresh_database(test: &str) -> Option<String> {
    let Ok(admin) = std::env::var("ORCH_TEST_PG_URL") else {
        assert!(
            std::env::var("ORCH_TEST_PG_REQUIRED").as_deref() != Ok("1"),
            "{test}: ORCH_TEST_PG_REQUIRED=1 but ORCH_TEST_PG_URL is not set"
        );
        eprintln!("{test}: skipped: ORCH_TEST_PG_URL not set (source .ci/postgres)");
        return None;
    };
    let name = format!(
        "orch_it_{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
    );
    let mut client = postgres::Client::connect(&admin, postgres::NoTls).expect("admin connection");
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .expect("create the test's database");
    let config: postgres::Config = admin.parse().unwrap();
    let host = match &config.get_hosts()[0] {
        postgres::config::Host::Tcp(h) => h.clone(),
        postgres::config::Host::Unix(p) => p.display().to_string(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config.get_user().unwrap_or("postgres");
    Some(format!("postgres://{user}@{host}:{port}/{name}"))
}

/// Many stores opened at once on a fresh database (a node's first commands, several nodes
/// started together) all find it migrated once. Found in CI: a writer that had waited for
/// the migration's lock still saw the catalog as it was before the migration committed
/// (`to_regclass` reads the backend's catalog cache, refreshed only when a relation lock is
/// taken) and migrated again: "relation orch_schema already exists".
#[test]
fn stores_opened_at_once_on_a_fresh_database_migrate_it_once() {
    let rounds = std::env::var("ORCH_TEST_PG_MIGRATE_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    for _ in 0..rounds {
        let Some(url) = fresh_database("stores_opened_at_once…") else {
            return;
        };
        let barrier = std::sync::Barrier::new(16);
        let errors: Vec<String> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..16)
                .map(|_| {
                    s.spawn(|| {
                        barrier.wait();
                        orch::store::Store::open_url(&url)
                            .and_then(|mut st| st.locks().map(|_| ()))
                            .err()
                            .map(|e| e.to_string())
                    })
                })
                .collect();
            hs.into_iter().filter_map(|h| h.join().unwrap()).collect()
        });
        assert!(errors.is_empty(), "{errors:#?}");
    }
}

#[test]
fn a_worker_on_a_postgresql_store_is_done_and_nothing_is_in_sqlite() {
    let Some(url) = fresh_database("a_worker_on_a_postgresql_store…") else {
        return;
    };
    let mut spec =
        Spec::local("happy.sh").repo(RepoSpec::new("alpha").standard_ci("test -f feature.txt"));
    spec.stop_grace = "20s".into();
    spec.store = Some(format!("{{url: \"{url}\"}}"));
    let org = Org::new(spec);

    let check = org.run(&["check", "--json"]);
    assert!(check.status.success(), "{}", output_text(&check));
    let v: serde_json::Value = serde_json::from_slice(&check.stdout).unwrap();
    assert_eq!(v["store"]["backend"], "postgresql", "{v}");
    assert_eq!(v["store"]["location"], url.as_str());

    let (out, id) = org.spawn_foreground("alpha", "add a feature");
    assert!(
        out.status.success(),
        "{}\n{}",
        output_text(&out),
        org.diag(&id)
    );
    // Every process of the worker's life (supervisor, CI runner) found the database from the
    // state directory's pointer.
    let w = org.worker(&id);
    assert_eq!(w.progress.milestone, Milestone::Done, "{}", org.diag(&id));
    assert!(org.store().locks().unwrap().is_empty());
    assert!(
        !org.state.join("orch.db").exists(),
        "nothing in the state directory's SQLite file"
    );
    let pointer = std::fs::read_to_string(org.state.join("store.json")).unwrap();
    assert!(pointer.contains(&url), "{pointer}");

    // The rows are in PostgreSQL, seen by a client of its own.
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let row = client
        .query_one("SELECT milestone FROM workers WHERE id = $1", &[&id])
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "DONE");
    let v = org.run(&["check", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&v.stdout).unwrap();
    assert_eq!(v["store"]["schema_version"], v["store"]["schema_latest"]);

    // The section removed: orch refuses to start over in an empty SQLite file.
    let yaml = std::fs::read_to_string(&org.config_path).unwrap();
    let without: String = yaml
        .lines()
        .filter(|l| !l.starts_with("store:"))
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&org.config_path, without).unwrap();
    let st = org.run(&["status"]);
    assert_eq!(st.status.code(), Some(2), "{}", output_text(&st));
    assert!(
        output_text(&st).contains("has no store: section"),
        "{}",
        output_text(&st)
    );
    assert!(!org.state.join("orch.db").exists());
}

#[test]
fn a_password_in_the_store_url_is_refused_and_never_shown() {
    let org = Org::new(Spec::local("happy.sh").repo(RepoSpec::new("alpha")));
    let yaml = std::fs::read_to_string(&org.config_path).unwrap();
    let with_store =
        |line: &str| std::fs::write(&org.config_path, format!("{line}\n{yaml}")).unwrap();
    with_store("store: {url: \"postgres://orch:hunter2-secret@127.0.0.1:1/orch\"}");
    for args in [
        &["check"][..],
        &["spawn", "--repo", "alpha", "--task", "t"][..],
    ] {
        let out = org.run(args);
        assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
        let text = output_text(&out);
        assert!(text.contains("store.url holds a password"), "{text}");
        assert!(!text.contains("hunter2"), "the password shown: {text}");
    }
    // A variable that is not set is named, and nothing is started.
    with_store("store: {url_env: ORCH_IT_STORE_URL_UNSET}");
    let out = org.run(&["spawn", "--repo", "alpha", "--task", "t"]);
    assert_eq!(out.status.code(), Some(2), "{}", output_text(&out));
    assert!(
        output_text(&out).contains("ORCH_IT_STORE_URL_UNSET is not set"),
        "{}",
        output_text(&out)
    );
    assert!(!org.state.join("orch.db").exists());
}

/// A PostgreSQL cluster of one test's own (initdb in a temporary directory, a free loopback
/// port), for a test that stops and starts its server: restarting the shared cluster of
/// `.ci/postgres` would take every other test's database away. Stopped and removed on drop.
pub(crate) struct OwnCluster {
    dir: tempfile::TempDir,
    bin: std::path::PathBuf,
    user: String,
    pub port: u16,
}

impl OwnCluster {
    /// `None` (said) when `.ci/postgres` was not sourced; a failure when it was required.
    pub(crate) fn start(test: &str) -> Option<OwnCluster> {
        let (Ok(bin), Ok(user)) = (
            std::env::var("ORCH_TEST_PG_BIN"),
            std::env::var("ORCH_TEST_PG_USER"),
        ) else {
            assert!(
                std::env::var("ORCH_TEST_PG_REQUIRED").as_deref() != Ok("1"),
                "{test}: ORCH_TEST_PG_REQUIRED=1 but ORCH_TEST_PG_BIN is not set"
            );
            eprintln!("{test}: skipped: ORCH_TEST_PG_BIN not set (source .ci/postgres)");
            return None;
        };
        let dir = tempfile::Builder::new()
            .prefix("orch-own-pg.")
            .tempdir()
            .unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let c = OwnCluster {
            dir,
            bin: bin.into(),
            user,
            port,
        };
        let _ = std::process::Command::new("chown")
            .arg(&c.user)
            .arg(c.dir.path())
            .status();
        let data = c.dir.path().join("data");
        c.as_pg(
            "initdb",
            &[
                "-D",
                data.to_str().unwrap(),
                "-U",
                "orch",
                "-A",
                "trust",
                "--no-sync",
            ],
        );
        c.start_server();
        let mut admin = postgres::Client::connect(
            &format!("postgres://orch@127.0.0.1:{port}/postgres"),
            postgres::NoTls,
        )
        .expect("the test's own cluster answers");
        admin.batch_execute("CREATE DATABASE orch_own").unwrap();
        Some(c)
    }

    pub(crate) fn url(&self) -> String {
        format!("postgres://orch@127.0.0.1:{}/orch_own", self.port)
    }

    /// `program` of the server's binaries, run as the cluster's account (initdb refuses root).
    fn pg_command(&self, program: &str, args: &[&str]) -> std::process::Command {
        let exe = self.bin.join(program);
        let me = std::process::Command::new("id")
            .arg("-un")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        let mut cmd = if me == self.user {
            std::process::Command::new(&exe)
        } else {
            let mut c = std::process::Command::new("runuser");
            c.args(["-u", &self.user, "--"]).arg(&exe);
            c
        };
        cmd.args(args);
        cmd
    }

    fn as_pg(&self, program: &str, args: &[&str]) {
        let out = self.pg_command(program, args).output().unwrap();
        assert!(
            out.status.success(),
            "{program} {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Starts the server (again, after [`OwnCluster::crash`]) on the same port.
    pub(crate) fn start_server(&self) {
        let data = self.dir.path().join("data");
        let log = self.dir.path().join("server.log");
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port,
            self.dir.path().display()
        );
        self.as_pg(
            "pg_ctl",
            &[
                "-D",
                data.to_str().unwrap(),
                "-l",
                log.to_str().unwrap(),
                "-w",
                "-t",
                "60",
                "-o",
                &opts,
                "start",
            ],
        );
    }

    /// Stops the server as a crash would (`-m immediate`: no checkpoint, every session cut;
    /// it recovers from its WAL when started again).
    pub(crate) fn crash(&self) {
        let data = self.dir.path().join("data");
        self.as_pg(
            "pg_ctl",
            &["-D", data.to_str().unwrap(), "-m", "immediate", "stop"],
        );
    }
}

impl Drop for OwnCluster {
    fn drop(&mut self) {
        let data = self.dir.path().join("data");
        let _ = self
            .pg_command(
                "pg_ctl",
                &["-D", data.to_str().unwrap(), "-m", "immediate", "stop"],
            )
            .output();
    }
}
