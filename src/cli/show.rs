//! `orch check` and `orch graph`: read-only views of the configuration.

use super::{Ctx, Failure, GraphFormat, Outcome, print_json};
use crate::config::{ConfigError, ForgeKind};
use crate::contract::{Contract, ContractError};
use serde_json::json;

/// Validates repos.yaml and the contract, printing every problem found in either.
pub fn check(ctx: &Ctx) -> Outcome {
    let mut problems: Vec<String> = Vec::new();
    let config = match ctx.load_config() {
        Ok(c) => Some(c),
        Err(ConfigError::Invalid(d)) => {
            problems.extend(d.0.iter().map(|x| x.to_string()));
            None
        }
        Err(e) => {
            problems.push(e.to_string());
            None
        }
    };
    let contract_path = match &config {
        Some(c) => ctx.contract_path(c),
        None => ctx.contract_override.clone().unwrap_or_else(|| {
            let abs =
                std::path::absolute(&ctx.config_path).unwrap_or_else(|_| ctx.config_path.clone());
            abs.parent()
                .unwrap_or(std::path::Path::new("."))
                .join("contracts/worker-completion.yaml")
        }),
    };
    let loaded = if ctx.contract_override.is_some() {
        Contract::load(&contract_path)
    } else {
        Contract::load_or_built_in(&contract_path)
    };
    let contract = match loaded {
        Ok(c) => Some(c),
        Err(ContractError::Invalid(d)) => {
            problems.extend(d.0.iter().map(|x| x.to_string()));
            None
        }
        Err(e) => {
            problems.push(e.to_string());
            None
        }
    };
    if let Some(c) = &config {
        problems.extend(crate::prompt::check_templates(c.root()));
    }
    if !problems.is_empty() {
        return report_problems(&problems);
    }
    let (config, contract) = (config.expect("checked"), contract.expect("checked"));
    let file = config.file.display().to_string();
    // What stops a worker later is an error now: the token a forge needs, a clone that is
    // not a git repository, a base branch it does not have.
    if config.forge.kind == ForgeKind::Forgejo
        && let Err(e) = crate::token::forge_token(&config)
    {
        problems.push(format!("{file}: forge: {e}"));
    }
    for r in &config.repos {
        if !r.path.exists() {
            continue; // no clone yet: warned below
        }
        match git2::Repository::open(&r.path) {
            Err(_) => problems.push(format!(
                "{file}: repository {}: {} is not a git repository",
                r.name,
                r.path.display()
            )),
            Ok(repo) => {
                let has = |name: &str| repo.find_reference(name).is_ok();
                if !has(&format!("refs/heads/{}", r.branch))
                    && !has(&format!("refs/remotes/origin/{}", r.branch))
                {
                    problems.push(format!(
                        "{file}: repository {}: base branch {} does not exist in {}",
                        r.name,
                        r.branch,
                        r.path.display()
                    ));
                }
            }
        }
    }
    if !problems.is_empty() {
        return report_problems(&problems);
    }
    for r in &config.repos {
        if let Some(gap) = config.local_ci_gap(r) {
            ctx.warn(gap);
        }
    }
    let missing: Vec<&str> = config
        .repos
        .iter()
        .filter(|r| !r.path.exists())
        .map(|r| r.name.as_str())
        .collect();
    if !missing.is_empty() {
        eprintln!(
            "warning: no local clone yet for {} (paths in {}); a worker cannot start on them until they exist",
            missing.join(", "),
            config.file.display()
        );
    }
    let plural =
        |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    println!(
        "ok: {} ({}, {}), {} (contract {}, {} milestones)",
        config.file.display(),
        plural(config.repos.len(), "repository", "repositories"),
        plural(config.graph.layers().len(), "layer", "layers"),
        contract.file.display(),
        contract.version,
        contract.states.len()
    );
    Ok(0)
}

fn report_problems(problems: &[String]) -> Outcome {
    for p in problems {
        eprintln!("{p}");
    }
    let n = problems.len();
    Err(Failure::bad_input(format!(
        "{n} problem{} found",
        if n == 1 { "" } else { "s" }
    )))
}

pub fn graph(ctx: &Ctx, format: GraphFormat) -> Outcome {
    let config = ctx.config()?;
    let g = &config.graph;
    match format {
        GraphFormat::Json => {
            let repos: Vec<_> = g
                .names()
                .iter()
                .map(|n| {
                    json!({
                        "name": n,
                        "deps": g.deps(n),
                        "dependents": g.dependents(n),
                        "chain": g.chain(n),
                    })
                })
                .collect();
            print_json(&json!({ "repos": repos, "layers": g.layers() }));
        }
        GraphFormat::Dot => print!("{}", g.to_dot()),
        GraphFormat::Mermaid => print!("{}", g.to_mermaid()),
        GraphFormat::Text => {
            for (i, layer) in g.layers().iter().enumerate() {
                println!("layer {i}: {}", layer.join(", "));
            }
            println!();
            let width = g.names().iter().map(String::len).max().unwrap_or(4);
            for n in g.names() {
                let list = |v: Vec<String>| {
                    if v.is_empty() {
                        "-".to_string()
                    } else {
                        v.join(", ")
                    }
                };
                println!("{n:width$}  depends on: {}", list(g.deps(n)));
                println!("{:width$}  needed by:  {}", "", list(g.dependents(n)));
            }
        }
    }
    Ok(0)
}
