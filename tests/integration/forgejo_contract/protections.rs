//! Branch protection rules and the token's account (`docs/forgejo-branch-protection.md`):
//! the fake's answers verbatim, and `ForgejoForge::{branch_protections, token_account}` on
//! them, on every tested version (the route, its payload and its refusals are the same v8–v16).

use super::*;
use crate::support::fake_forgejo::BranchRule;
use orch::branch_protection::{Rule, Whitelist};

per_version!(
    rules_are_listed_plain_names_first_with_readers_only,
    no_rules_is_an_empty_list,
    a_token_without_admin_rights_is_403,
    an_unknown_repository_is_404,
    the_account_is_the_tokens_login,
    a_token_without_read_user_cannot_tell_its_account,
    a_repository_scope_is_needed_before_anything_else,
);

async fn rules_are_listed_plain_names_first_with_readers_only(version: &str) {
    let env = Env::new(version).await;
    env.fake.add_collaborator("alice");
    // Created in this order; the API lists plain names first, then the oldest first.
    env.fake
        .set_branch_rule(REPO, BranchRule::named("orch/*-????????").open());
    let mut main = BranchRule::named("main").push_whitelist(&["ghost", OWNER, "alice"]);
    main.push_whitelist_teams = vec!["bots".into()];
    main.enable_merge_whitelist = true;
    main.merge_whitelist_usernames = vec![OWNER.into()];
    env.fake.set_branch_rule(REPO, main);
    env.fake
        .set_branch_rule(REPO, BranchRule::named("release/*"));

    let raw = env.server_json("branch_protections").await;
    let list = raw.as_array().unwrap();
    let names: Vec<&str> = list
        .iter()
        .map(|r| r["rule_name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["main", "orch/*-????????", "release/*"]);
    // `branch_name` (deprecated) only for a plain name; whitelisted users who cannot read the
    // repository are left out, in the readers' order (collaborators, then the owner).
    assert_eq!(list[0]["branch_name"], "main");
    assert_eq!(list[1]["branch_name"], "");
    assert_eq!(
        list[0]["push_whitelist_usernames"],
        serde_json::json!(["alice", OWNER])
    );
    assert_eq!(list[2]["push_whitelist_usernames"], serde_json::json!([]));
    assert!(list[0]["created_at"].is_string() && list[0]["updated_at"].is_string());
    assert!(list[0].get("enable_force_push").is_none(), "a Gitea field");

    let before = env.requests();
    let rules = env.forge().branch_protections(&env.repo).await.unwrap();
    assert_eq!(env.requests() - before, 1, "one request, no version probe");
    assert_eq!(
        rules,
        [
            Rule {
                enable_push: true,
                push_whitelist: Some(Whitelist {
                    users: vec!["alice".into(), OWNER.into()],
                    teams: vec!["bots".into()],
                    deploy_keys: false,
                }),
                merge_whitelist: Some(Whitelist {
                    users: vec![OWNER.into()],
                    ..Whitelist::default()
                }),
                ..Rule::new("main")
            },
            Rule {
                enable_push: true,
                ..Rule::new("orch/*-????????")
            },
            Rule::new("release/*"),
        ]
    );
    // A rule's `protected` shows on the branches it matches (first match, globs included).
    env.fake.set_branch("alpha", "release/1.0", SHA);
    let branch = env.server_json("branches/release/1.0").await;
    assert_eq!(branch["protected"], true, "{branch}");
    env.fake.set_branch("alpha", "release/1.0/x", SHA);
    let branch = env.server_json("branches/release/1.0/x").await;
    assert_eq!(branch["protected"], false, "{branch}");
}

async fn no_rules_is_an_empty_list(version: &str) {
    let env = Env::new(version).await;
    assert_eq!(
        env.server_json("branch_protections").await,
        serde_json::json!([])
    );
    assert_eq!(env.forge().branch_protections(&env.repo).await.unwrap(), []);
}

async fn a_token_without_admin_rights_is_403(version: &str) {
    let env = Env::new(version).await;
    env.fake.set_caller_admin(false);
    let raw = env.server_json("branch_protections").await;
    assert_eq!(
        raw["message"],
        "user should be an owner or a collaborator with admin write of a repository"
    );
    let before = env.requests();
    let err = env
        .forge()
        .branch_protections(&env.repo)
        .await
        .expect_err("403");
    assert_eq!(env.requests() - before, 1, "not retried");
    match &err {
        ForgeError::Blocking {
            kind: BlockingKind::NoAccess,
            message,
        } => {
            assert!(
                message.contains("admin rights on the repository"),
                "{message}"
            );
            assert!(
                message.contains("(server says: user should be an owner"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert_no_token(&err);
}

async fn an_unknown_repository_is_404(version: &str) {
    let env = Env::new(version).await;
    let err = env
        .forge()
        .branch_protections(&repo("ghost"))
        .await
        .expect_err("404");
    assert!(
        matches!(
            err,
            ForgeError::Blocking {
                kind: BlockingKind::NotFound,
                ..
            }
        ),
        "{err:?}"
    );
}

async fn the_account_is_the_tokens_login(version: &str) {
    let env = Env::new(version).await;
    assert_eq!(env.forge().token_account().await.unwrap(), OWNER);
    assert_eq!(env.fake.hit_paths(), ["/api/v1/user"]);
}

async fn a_token_without_read_user_cannot_tell_its_account(version: &str) {
    let env = Env::new(version).await;
    env.fake.set_token_scopes(Some(&["write:repository"]));
    let err = env.forge().token_account().await.expect_err("403");
    match &err {
        ForgeError::Blocking {
            kind: BlockingKind::NoAccess,
            message,
        } => assert!(
            message.contains(
                "(server says: token does not have at least one of required scope(s): [read:user])"
            ),
            "{message}"
        ),
        other => panic!("{other:?}"),
    }
    // The rules are a repository read: write:repository covers it.
    assert_eq!(env.forge().branch_protections(&env.repo).await.unwrap(), []);
}

async fn a_repository_scope_is_needed_before_anything_else(version: &str) {
    let env = Env::new(version).await;
    env.fake.set_token_scopes(Some(&["read:user"]));
    // Even for a repository that does not exist: the scope is checked first.
    let err = env
        .forge()
        .branch_protections(&repo("ghost"))
        .await
        .expect_err("403");
    assert!(err.to_string().contains("[read:repository]"), "{err}");
    assert_eq!(env.forge().token_account().await.unwrap(), OWNER);
}
