//! Branch protection rules (`orch check`): `GET /repos/{owner}/{repo}/branch_protections`,
//! which needs a token of an account with admin rights on the repository (`reqToken`,
//! `reqAdmin`: 403 `user should be an owner or a collaborator with admin write of a
//! repository` otherwise; a repository the account cannot see is a 404), and `GET /user`, the
//! token's own account (the `read:user` scope: 403 `token does not have at least one of
//! required scope(s): [read:user]` without it). Both are the same v8–v16
//! (docs/forgejo-branch-protection.md).

use super::http::Target;
use super::{ForgejoForge, wire};
use crate::branch_protection::{Rule, Whitelist};
use crate::config::Repo;
use crate::forge::ForgeError;

/// What a 403 on the rules means.
const ADMIN: &str = "admin rights on the repository to read its branch protection rules (an owner's or an admin collaborator's token)";
/// What a 403 on `/user` means.
const READ_USER: &str = "the read:user scope to tell which account it is";

impl ForgejoForge {
    /// The repository's branch protection rules, in the server's order (plain names first,
    /// then globs; the oldest first).
    pub async fn branch_protections(&self, repo: &Repo) -> Result<Vec<Rule>, ForgeError> {
        let path = format!("{}/branch_protections", self.repo_path(repo));
        let full_name = self.full_name(repo);
        let target = Target {
            repo: Some(&full_name),
            missing_ok: false,
            needs: Some(ADMIN),
        };
        let body = self.get(&path, &[], target).await?.unwrap_or_default();
        let rules: Option<Vec<wire::BranchProtection>> = self.decode(&body, &path)?;
        Ok(rules.unwrap_or_default().into_iter().map(rule).collect())
    }

    /// The user name of the token's account.
    pub async fn token_account(&self) -> Result<String, ForgeError> {
        let path = "/user";
        let target = Target {
            repo: None,
            missing_ok: false,
            needs: Some(READ_USER),
        };
        let body = self.get(path, &[], target).await?.unwrap_or_default();
        let user: wire::User = self.decode(&body, path)?;
        if user.login.is_empty() {
            return Err(ForgeError::Malformed {
                message: "GET /api/v1/user: no login in the answer".into(),
            });
        }
        Ok(user.login)
    }
}

fn rule(p: wire::BranchProtection) -> Rule {
    let name = if p.rule_name.is_empty() {
        p.branch_name
    } else {
        p.rule_name
    };
    Rule {
        name,
        enable_push: p.enable_push,
        push_whitelist: p.enable_push_whitelist.then(|| Whitelist {
            users: p.push_whitelist_usernames.unwrap_or_default(),
            teams: p.push_whitelist_teams.unwrap_or_default(),
            deploy_keys: p.push_whitelist_deploy_keys,
        }),
        merge_whitelist: p.enable_merge_whitelist.then(|| Whitelist {
            users: p.merge_whitelist_usernames.unwrap_or_default(),
            teams: p.merge_whitelist_teams.unwrap_or_default(),
            deploy_keys: false,
        }),
        force_push: p.enable_force_push,
    }
}
