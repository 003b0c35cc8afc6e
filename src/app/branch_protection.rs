//! `orch check` on Forgejo: each repository's branch protection rules read from the forge and
//! judged (`crate::branch_protection`) against how its changes land. Everything here is a
//! warning, never a problem: a token without admin rights on a repository cannot see its
//! rules, and the forge may be down — either is said once, and `check` goes on.

use crate::branch_protection::{self as bp, Said, Subject};
use crate::config::{Config, ForgeKind, OnBreakage};
use crate::contract::Contract;
use crate::forge::Patience;
use crate::forge::forgejo::ForgejoForge;
use crate::forge::{BlockingKind, ForgeError};
use std::sync::Arc;

/// The warnings for `config`'s repositories; none without Forgejo or without a token (a
/// missing token is a problem `check` reports itself). `notice` is told at once when the forge
/// does not answer (a person is waiting).
pub fn warnings(
    config: &Config,
    contract: &Contract,
    notice: Arc<dyn Fn(&str) + Send + Sync>,
) -> Vec<String> {
    if config.forge.kind != ForgeKind::Forgejo {
        return Vec::new();
    }
    let Ok(Some(token)) = crate::token::forge_token(config) else {
        return Vec::new();
    };
    let forge = match ForgejoForge::new(
        config.forge.url.as_deref().unwrap_or_default(),
        config.forge.owner.as_deref().unwrap_or_default(),
        Some(token),
        config.forge.request_timeout,
        contract.transient_backoff,
    ) {
        Ok(f) => f.with_patience(Patience {
            give_up_after: config.forge.give_up_after,
            notice,
        }),
        Err(e) => return vec![format!("branch protection not checked: {e}")],
    };
    let Ok(rt) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return vec!["branch protection not checked: cannot start an async runtime".into()];
    };
    // Rule and user names come from the forge: printed escaped.
    rt.block_on(look(config, &forge))
        .into_iter()
        .map(|w| crate::text::escape(&w).into_owned())
        .collect()
}

async fn look(config: &Config, forge: &ForgejoForge) -> Vec<String> {
    let mut out = Vec::new();
    let all = || {
        config
            .repos
            .iter()
            .map(|r| r.name.clone())
            .collect::<Vec<_>>()
    };
    // The account first: one cheap request that also tells a forge that is down.
    let (account, account_error) = match forge.token_account().await {
        Ok(a) => (Some(a), None),
        Err(e) if stops_everything(&e) => {
            return vec![not_checked(&[(reason(&e), all())])];
        }
        Err(e) => (None, Some(e)),
    };
    let reverts =
        config.downstream.depth > 0 && config.downstream.on_breakage == OnBreakage::Revert;
    // (reason, repositories) in the order first met.
    let mut unread: Vec<(String, Vec<String>)> = Vec::new();
    let mut account_mattered = false;
    for (i, repo) in config.repos.iter().enumerate() {
        let rules = match forge.branch_protections(repo).await {
            Ok(rules) => rules,
            Err(e) => {
                let why = reason(&e);
                if stops_everything(&e) {
                    let rest = config.repos[i..].iter().map(|r| r.name.clone()).collect();
                    unread.push((why, rest));
                    break;
                }
                match unread.iter_mut().find(|(r, _)| *r == why) {
                    Some((_, repos)) => repos.push(repo.name.clone()),
                    None => unread.push((why, vec![repo.name.clone()])),
                }
                continue;
            }
        };
        let subject = Subject {
            repo: &repo.name,
            base: &repo.branch,
            policy: repo.land.policy,
            reverts,
            account: account.as_deref(),
        };
        account_mattered |= subject.needs_account();
        for finding in bp::findings(&rules, &subject) {
            out.push(
                Said {
                    finding: &finding,
                    subject: &subject,
                }
                .to_string(),
            );
        }
    }
    if !unread.is_empty() {
        out.push(not_checked(&unread));
    }
    if let (true, Some(e)) = (account_mattered, account_error) {
        out.push(format!(
            "branch protection: push and merge whitelists were not compared with orch's account: the forge did not say which account the token is ({e})"
        ));
    }
    out
}

/// Errors after which no other request would fare better: the forge is down or the token is
/// refused.
fn stops_everything(e: &ForgeError) -> bool {
    matches!(
        e,
        ForgeError::Transient { .. }
            | ForgeError::Blocking {
                kind: BlockingKind::BadToken,
                ..
            }
    )
}

/// Why a request failed, in words that fit a list of repositories.
fn reason(e: &ForgeError) -> String {
    match e {
        ForgeError::Blocking {
            kind: BlockingKind::NotFound,
            ..
        } => "404: no such repository, or one the token's account cannot see".into(),
        // The message names the repository; the server's words say which right is missing.
        ForgeError::Blocking {
            kind: BlockingKind::NoAccess,
            message,
        } => {
            let server = message
                .find(" (server says: ")
                .map(|i| &message[i..])
                .unwrap_or_default();
            format!("403: the token's account may not read them{server}")
        }
        _ => e.to_string(),
    }
}

fn not_checked(unread: &[(String, Vec<String>)]) -> String {
    let parts: Vec<String> = unread
        .iter()
        .map(|(why, repos)| format!("{} ({why})", repos.join(", ")))
        .collect();
    format!(
        "branch protection not checked for {}: orch check cannot tell whether those base branches are protected (reading a repository's rules takes a token of an account with admin rights on it)",
        parts.join("; ")
    )
}
