//! `orch can-spawn`, `orch hold`, `orch unhold`, `orch status`: the chain locks seen by operators.

use super::{Ctx, Failure, Outcome, operator_name, print_json};
use crate::lock::{HolderKind, blockers};
use crate::store::{LockAttempt, fmt_ms};
use serde_json::json;

pub fn can_spawn(ctx: &Ctx, repo: &str, json: bool) -> Outcome {
    let config = ctx.config()?;
    config.require_repo(repo)?;
    let active = match ctx.existing_store(&config)? {
        Some(mut store) => store.locks()?,
        None => Vec::new(),
    };
    let blocking = blockers(&config.graph, repo, &active);
    if json {
        print_json(
            &json!({ "repo": repo, "can_spawn": blocking.is_empty(), "blockers": blocking }),
        );
    } else if blocking.is_empty() {
        println!("yes: a worker can start on {repo} now");
    } else {
        println!("no: a worker cannot start on {repo} now");
        for b in &blocking {
            println!("  {}", b.describe(repo));
        }
    }
    Ok(if blocking.is_empty() { 0 } else { 1 })
}

pub fn hold(ctx: &Ctx, repo: &str, reason: &str, by: Option<String>, json: bool) -> Outcome {
    let config = ctx.config()?;
    config.require_repo(repo)?;
    if reason.trim().is_empty() {
        return Err(Failure::bad_input(
            "--reason must say why the chain is held",
        ));
    }
    let by = operator_name(by);
    let holder = format!("hold:{by}");
    let mut store = ctx.store(&config)?;
    match store.try_lock(
        &config.graph,
        repo,
        &holder,
        HolderKind::Hold,
        Some(reason),
        Some(&by),
    )? {
        LockAttempt::Acquired(lock) => {
            if json {
                print_json(&json!({ "held": true, "lock": lock, "blockers": [] }));
            } else {
                let chain = config.graph.chain(repo);
                println!(
                    "held: {repo} and its chain ({}) by {holder}: {reason}",
                    if chain.is_empty() {
                        "no other repositories".to_string()
                    } else {
                        chain.join(", ")
                    }
                );
            }
            Ok(0)
        }
        LockAttempt::Blocked(blocking) => {
            if json {
                print_json(&json!({ "held": false, "repo": repo, "blockers": blocking }));
            } else {
                println!("not held: {repo}'s chain is busy");
                for b in &blocking {
                    println!("  {}", b.describe(repo));
                }
            }
            Ok(1)
        }
    }
}

pub fn unhold(ctx: &Ctx, repo: &str, json: bool) -> Outcome {
    let config = ctx.config()?;
    let mut store = ctx.store(&config)?;
    match store.unhold(repo, Some(&operator_name(None)))? {
        Ok(lock) => {
            if json {
                print_json(&json!({ "released": true, "lock": lock }));
            } else {
                println!(
                    "released: {} (held by {} since {})",
                    repo,
                    lock.holder,
                    fmt_ms(lock.acquired_ms)
                );
            }
            Ok(0)
        }
        Err(None) => Err(Failure::no(format!("{repo} is not held"))),
        Err(Some(lock)) => Err(Failure::no(format!(
            "{repo} is locked by worker {}, not by a hold; use `orch cancel {}` or `orch release {} --force --reason …`",
            lock.holder, lock.holder, lock.holder
        ))),
    }
}
