//! `orch check` on Forgejo reads each repository's branch protection rules and warns about
//! what they leave open — through the real binary, against the fake Forgejo on v8, v11 and
//! v16 (the route, its payload and its refusals are the same on every version: see
//! docs/forgejo-branch-protection.md). Never a problem: a token that may not read the rules
//! and a forge that is down are one warning each, and `check` exits 0.

use crate::support::fake_forgejo::{BranchRule, FakeForgejo, OWNER, REPO, TOKEN};
use crate::support::{CONTRACT_TEXT, orch_cmd, output_text as text};
use std::process::Output;
use std::time::{Duration, Instant};

const VERSIONS: [&str; 3] = [
    "8.0.3+gitea-1.22.0",
    "11.0.1+gitea-1.22.0",
    "16.0.0+gitea-1.22.0",
];
/// A second repository whose base branch is a release branch.
const REL: &str = "rel";

struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    /// `alpha` (base `main`) and `rel` (base `release/1.0`), landed by orch (`land: merge`);
    /// no clones (a warning of their own).
    fn new(uri: &str, forge_extra: &str) -> Setup {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("repos.yaml"),
            format!(
                "forge: {{ kind: forgejo, url: '{uri}', owner: {OWNER}, token_env: ORCH_TEST_FORGE_TOKEN, request_timeout: 2s{forge_extra} }}\n\
                 land: {{ policy: merge }}\n\
                 repos:\n  {REPO}: {{ path: {REPO} }}\n  {REL}: {{ path: {REL}, branch: release/1.0 }}\n"
            ),
        )
        .unwrap();
        let c = dir.path().join("contracts");
        std::fs::create_dir_all(&c).unwrap();
        let contract = CONTRACT_TEXT.replace(
            "backoff: { initial: 5s, max: 60s, multiplier: 2, max_retries: 3 }",
            "backoff: { initial: 10ms, max: 40ms, multiplier: 2, max_retries: 3 }",
        );
        std::fs::write(c.join("worker-completion.yaml"), contract).unwrap();
        Setup { dir }
    }

    fn run(&self, args: &[&str]) -> Output {
        let out = orch_cmd()
            .current_dir(self.dir.path())
            .env("ORCH_CONFIG", self.dir.path().join("repos.yaml"))
            .env("ORCH_STATE_DIR", self.dir.path().join("state"))
            .env("ORCH_TEST_FORGE_TOKEN", TOKEN)
            .args(args)
            .output()
            .unwrap();
        assert!(
            !text(&out).contains(TOKEN),
            "the token was printed:\n{}",
            text(&out)
        );
        out
    }

    /// `orch check --json`, which must succeed: its warnings about branch protection.
    fn protection_warnings(&self) -> Vec<String> {
        let out = self.run(&["check", "--json"]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["ok"], true, "{v}");
        v["warnings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_str().unwrap().to_string())
            // The others: no clones, the token in the environment, no agent installed.
            .filter(|w| w.starts_with("repository ") || w.starts_with("branch protection"))
            .collect()
    }
}

/// The rules README recommends for a repository whose base is `base`.
fn recommended(fake: &FakeForgejo, repo: &str, base: &str) {
    fake.set_branch_rule(repo, BranchRule::named(base).push_whitelist(&[OWNER]));
    fake.set_branch_rule(repo, BranchRule::named("orch/*-????????").open());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unprotected_base_branch_is_a_warning_naming_repository_and_branch() {
    for version in VERSIONS {
        let fake = FakeForgejo::start(version).await;
        fake.require_token(Some(TOKEN));
        fake.add_repo(REL);
        let s = Setup::new(&fake.uri(), "");
        let warnings = s.protection_warnings();
        for (repo, base) in [(REPO, "main"), (REL, "release/1.0")] {
            let prefix = format!("repository {repo}: base branch {base} is not protected");
            assert!(
                warnings.iter().any(|w| w.starts_with(&prefix)
                    && w.contains(&format!("push whitelist of orch's account {OWNER} only"))),
                "{version}: {warnings:#?}"
            );
            assert!(
                warnings.iter().any(|w| w.starts_with(&format!(
                    "repository {repo}: workers' branches (orch/{repo}-"
                ))),
                "{version}: {warnings:#?}"
            );
        }
        assert_eq!(warnings.len(), 4, "{version}: {warnings:#?}");
        // Asked with the token: the account once, then each repository's rules.
        let paths: Vec<String> = fake.hits().iter().map(|h| h.path.clone()).collect();
        assert_eq!(
            paths,
            [
                "/api/v1/user".to_string(),
                format!("/api/v1/repos/{OWNER}/{REPO}/branch_protections"),
                format!("/api/v1/repos/{OWNER}/{REL}/branch_protections"),
            ],
            "{version}"
        );
        // The human form: the same warnings on stderr, exit 0.
        let out = s.run(&["check"]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr)
                .contains("warning: repository alpha: base branch main is not protected"),
            "{}",
            text(&out)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn glob_rules_match_and_the_recommended_rules_leave_no_warning() {
    for version in VERSIONS {
        let fake = FakeForgejo::start(version).await;
        fake.require_token(Some(TOKEN));
        fake.add_repo(REL);
        // `main*` covers main; `release/*` covers release/1.0; a rule for another branch
        // (older, a plain name) covers neither.
        fake.set_branch_rule(REPO, BranchRule::named("develop"));
        recommended(&fake, REPO, "main*");
        recommended(&fake, REL, "release/*");
        let s = Setup::new(&fake.uri(), "");
        assert_eq!(s.protection_warnings(), Vec::<String>::new(), "{version}");

        // `*` does not cross `/`: release/* does not cover release/1.0/x.
        let nested = Setup::new(&fake.uri(), "");
        let yaml = nested.dir.path().join("repos.yaml");
        let text_yaml = std::fs::read_to_string(&yaml)
            .unwrap()
            .replace("branch: release/1.0", "branch: release/1.0/x");
        std::fs::write(&yaml, text_yaml).unwrap();
        let warnings = nested.protection_warnings();
        assert_eq!(warnings.len(), 1, "{version}: {warnings:#?}");
        assert!(
            warnings[0].starts_with("repository rel: base branch release/1.0/x is not protected"),
            "{version}: {warnings:#?}"
        );

        // Someone else whitelisted beside orch's account (a reader of the repository: only
        // readers are listed), and the base open to every writer.
        fake.add_collaborator("alice");
        fake.set_branch_rule(
            REPO,
            BranchRule::named("main*").push_whitelist(&[OWNER, "alice", "not-a-reader"]),
        );
        fake.set_branch_rule(REL, BranchRule::named("release/*").open());
        let warnings = s.protection_warnings();
        assert_eq!(
            warnings,
            [
                format!(
                    "repository {REPO}: rule \"main*\" lets user alice push to base branch main besides orch's account {OWNER}: only orch moves it (land.policy merge), so its push whitelist should name orch's account only"
                ),
                format!(
                    "repository {REL}: rule \"release/*\" lets anyone with write access push to base branch release/1.0 (enable_push without a push whitelist); set a push whitelist of orch's account {OWNER} only"
                ),
            ],
            "{version}"
        );

        // `orch/*` covers orch's own orch/<id>-land, which a rebuilt integration force-pushes.
        fake.set_branch_rule(REPO, BranchRule::named("main*").push_whitelist(&[OWNER]));
        fake.unprotect_branch(REPO, "orch/*-????????");
        fake.set_branch_rule(REPO, BranchRule::named("orch/*").open());
        let warnings = s.protection_warnings();
        assert!(
            warnings.iter().any(|w| w.starts_with(&format!(
                "repository {REPO}: rule \"orch/*\" also covers orch's own branches orch/<worker id>-land"
            ))),
            "{version}: {warnings:#?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_without_admin_rights_is_one_warning_and_check_passes() {
    for version in VERSIONS {
        let fake = FakeForgejo::start(version).await;
        fake.require_token(Some(TOKEN));
        fake.add_repo(REL);
        fake.set_caller_admin(false);
        let s = Setup::new(&fake.uri(), "");
        let warnings = s.protection_warnings();
        assert_eq!(warnings.len(), 1, "{version}: {warnings:#?}");
        let w = &warnings[0];
        assert!(
            w.starts_with(&format!(
                "branch protection not checked for {REPO}, {REL} (403:"
            )),
            "{version}: {w}"
        );
        assert!(
            w.contains(
                "server says: user should be an owner or a collaborator with admin write of a repository"
            ),
            "{version}: {w}"
        );

        // A token without the read:user scope: the rules are read, the whitelists not compared
        // with an account orch does not know — said once.
        fake.set_caller_admin(true);
        fake.set_token_scopes(Some(&["write:repository"]));
        fake.set_branch_rule(REPO, BranchRule::named("main").push_whitelist(&[OWNER]));
        let warnings = s.protection_warnings();
        assert!(
            warnings.iter().any(|w| w.starts_with(&format!(
                "repository {REL}: base branch release/1.0 is not protected"
            ))),
            "{version}: {warnings:#?}"
        );
        let unknown: Vec<&String> = warnings
            .iter()
            .filter(|w| w.contains("not compared with orch's account"))
            .collect();
        assert_eq!(unknown.len(), 1, "{version}: {warnings:#?}");
        assert!(
            unknown[0].contains("[read:user]"),
            "{version}: {}",
            unknown[0]
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forge_that_is_down_is_one_warning_and_check_passes() {
    // A port nothing listens on.
    let url = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://127.0.0.1:{}", l.local_addr().unwrap().port())
    };
    let s = Setup::new(&url, ", give_up_after: 1s");
    let started = Instant::now();
    let warnings = s.protection_warnings();
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "check took {:?}",
        started.elapsed()
    );
    assert_eq!(warnings.len(), 1, "{warnings:#?}");
    assert!(
        warnings[0].starts_with(&format!(
            "branch protection not checked for {REPO}, {REL} ("
        )),
        "{}",
        warnings[0]
    );
    assert!(warnings[0].contains(&url), "{}", warnings[0]);
}
