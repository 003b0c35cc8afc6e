//! `orch check` and `orch graph`: read-only views of the configuration.

use super::{Ctx, Failure, GraphFormat, Outcome, plural};
use crate::config::{Config, ConfigError, ForgeKind};
use crate::contract::{Contract, ContractError};
use crate::diag::Diagnostic;
use crate::operator::view::config::{CheckView, GraphView, Problem};
use crate::operator::view::print_json;
use std::path::Path;

impl Problem {
    fn at(file: &std::path::Path, message: impl Into<String>) -> Self {
        Problem {
            file: Some(file.display().to_string()),
            line: None,
            column: None,
            message: message.into(),
        }
    }

    fn bare(message: impl Into<String>) -> Self {
        Problem {
            file: None,
            line: None,
            column: None,
            message: message.into(),
        }
    }
}

impl From<&Diagnostic> for Problem {
    fn from(d: &Diagnostic) -> Self {
        Problem {
            file: Some(d.file.display().to_string()),
            line: d.pos.map(|p| p.line),
            column: d.pos.map(|p| p.column),
            message: d.message.clone(),
        }
    }
}

/// `worker.user`: an account that does not exist (or is root, or orch's own) is a problem; one
/// this orch cannot switch to, or that cannot reach the state directory, a warning (`check`
/// may run as someone else than the orch that spawns).
/// `worker.sandbox`: whether this machine makes one (tried for real: a command under orch's
/// guard in a sandbox over a directory of its own), and what would make it hollow.
fn sandbox_findings(config: &Config, contract: Option<&Path>, view: &mut CheckView) {
    let file = &config.file;
    // What a sandboxed worker could point elsewhere: refused by `spawn` too.
    for why in crate::sandbox::fixed::redirectable(config, contract) {
        view.problems.push(Problem::at(file, why));
    }
    if crate::pidns::usable().is_none() {
        view.problems.push(Problem::at(
            file,
            "worker.sandbox: this machine gives orch no PID namespace (unprivileged user namespaces disabled, or ORCH_PIDNS=off): no worker could start; use worker.user (orch as root) instead",
        ));
        return;
    }
    if rustix::process::geteuid().is_root() && !config.worker.accounts() {
        view.warnings.push(
            "worker.sandbox: orch runs as root and worker.user is not set, so workers run as root and can undo their sandbox; set worker.user too".into(),
        );
    }
    if let Err(e) = try_sandbox() {
        view.problems.push(Problem::at(
            file,
            format!("worker.sandbox: this machine cannot make a worker's sandbox: {e}"),
        ));
    }
}

/// Runs a shell under orch's guard in a sandbox laid out as a worker's: a read-only directory
/// (the organisation's), a hidden one inside it (the state directory) and a directory kept
/// inside that (the workspace). It succeeds when the read-only directory refuses a new file
/// and the kept one takes it.
fn try_sandbox() -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| format!("orch's binary: {e}"))?;
    let dir = std::env::temp_dir().join(format!(
        "orch-check-sandbox-{}-{}",
        std::process::id(),
        crate::store::now_ms()
    ));
    let keep = dir.join("state/keep");
    std::fs::create_dir_all(&keep).map_err(|e| format!("{}: {e}", keep.display()))?;
    let plan = crate::sandbox::Plan {
        hide: vec![dir.join("state")],
        keep: vec![keep.clone()],
        read_only: vec![dir.clone()],
        pin: Vec::new(),
    }
    .resolved(None);
    let probe = "if (true >\"$1/written\") 2>/dev/null; then echo \"$1 stayed writable\" >&2; exit 1; fi; true >\"$2/written\"";
    let out = std::process::Command::new(exe)
        .arg(crate::guard::GUARD_COMMAND)
        .arg("--parent")
        .arg(std::process::id().to_string())
        .arg("--pidns")
        .args(plan.args())
        .args(["--", "sh", "-c", probe, "sh"])
        .arg(&plan.read_only[0])
        .arg(&plan.keep[0])
        .current_dir(&keep)
        .stdin(std::process::Stdio::null())
        .output();
    let _ = std::fs::remove_dir_all(&dir);
    let out = out.map_err(|e| format!("orch {}: {e}", crate::guard::GUARD_COMMAND))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(String::from_utf8_lossy(&out.stderr)
            .trim()
            .replace('\n', "; "))
    }
}

fn account_findings(ctx: &Ctx, config: &Config, name: &str, view: &mut CheckView) {
    let account = match crate::account::Account::lookup(name) {
        Ok(a) => a,
        Err(e) => {
            view.problems.push(Problem::at(&config.file, e));
            return;
        }
    };
    if let Err(e) = crate::account::usable(name) {
        view.warnings.push(e);
    } else if let Err(e) = crate::account::reachable(&ctx.state_dir(config), &account) {
        view.warnings.push(e);
    }
    if config.forge.kind == ForgeKind::Forgejo {
        view.warnings.push(format!(
            "worker.user {name}: a worker pushes to Forgejo from its own clone with credentials of its own (its HOME is its workspace): give {name} a Forgejo account or deploy key that may push only orch/* branches"
        ));
    }
}

/// Validates repos.yaml and the contract, printing every problem found in either.
pub fn check(ctx: &Ctx, json: bool) -> Outcome {
    let mut view = CheckView {
        ok: false,
        config: ctx.config_path.display().to_string(),
        contract: None,
        contract_version: None,
        milestones: None,
        problems: Vec::new(),
        warnings: Vec::new(),
        repositories: None,
        layers: None,
        store: None,
    };
    let config = match ctx.load_config() {
        Ok(c) => Some(c),
        Err(ConfigError::Invalid(d)) => {
            view.problems.extend(d.0.iter().map(Problem::from));
            None
        }
        Err(e @ ConfigError::Read { .. }) => {
            view.problems
                .push(Problem::at(&ctx.config_path, e.to_string()));
            None
        }
        Err(e) => {
            view.problems.push(Problem::bare(e.to_string()));
            None
        }
    };
    if let Some(c) = &config {
        view.config = c.file.display().to_string();
    }
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
            view.problems.extend(d.0.iter().map(Problem::from));
            None
        }
        Err(e) => {
            view.problems
                .push(Problem::at(&contract_path, e.to_string()));
            None
        }
    };
    if let Some(c) = &contract {
        view.contract = Some(c.file.display().to_string());
        view.contract_version = Some(c.version.clone());
        view.milestones = Some(c.states.len());
    }
    if let Some(c) = &config {
        view.problems.extend(
            crate::prompt::check_templates(c.root())
                .into_iter()
                .map(Problem::bare),
        );
    }
    if let (true, Some(config)) = (view.problems.is_empty(), &config) {
        let file = &config.file;
        // What stops a worker later is an error now: the token a forge needs, a clone that is
        // not a git repository, a base branch it does not have.
        if config.forge.kind == ForgeKind::Forgejo
            && let Err(e) = crate::token::forge_token(config)
        {
            view.problems.push(Problem::at(file, format!("forge: {e}")));
        }
        if config.forge.kind == ForgeKind::Forgejo && config.forge.token_env.is_some() {
            view.warnings.push(
                "forge.token_env: the token is in the environment of each orch command you start until it reads and wipes it, where a process of the same user can read it; forge.token_file (mode 0600) keeps it out of every environment".into(),
            );
        }
        if let Some(store) = &config.store {
            match crate::store::Store::probe_postgres(store) {
                Ok((found, latest)) if found > latest => view.problems.push(Problem::at(
                    file,
                    format!(
                        "store: the database {} is at schema version {found}, newer than this orch knows ({latest}): upgrade orch on this host",
                        store.shown()
                    ),
                )),
                Ok((found, latest)) => {
                    if found < latest {
                        view.warnings.push(format!(
                            "store: the database {} is at schema version {found}; the first orch command that writes brings it to {latest}",
                            store.shown()
                        ));
                    }
                    view.store = Some(crate::operator::view::config::StoreCheck {
                        backend: "postgresql".into(),
                        location: store.shown(),
                        schema_version: found,
                        schema_latest: latest,
                    });
                }
                Err(e) => view
                    .problems
                    .push(Problem::at(file, format!("store: {e}"))),
            }
        }
        for name in &config.worker.users {
            account_findings(ctx, config, name, &mut view);
        }
        if config.worker.sandbox {
            let contract_file = contract
                .as_ref()
                .filter(|c| !c.is_built_in())
                .map(|c| c.file.as_path());
            sandbox_findings(config, contract_file, &mut view);
        }
        if config.worker.users.len() > 1 && config.worker.users.len() < config.worker.max_parallel {
            view.warnings.push(format!(
                "worker.users: {} accounts for worker.max_parallel {}: past {} live workers, accounts are shared (workers of one account can read and write each other's clones)",
                config.worker.users.len(),
                config.worker.max_parallel,
                config.worker.users.len()
            ));
        }
        for r in &config.repos {
            if !r.path.exists() {
                continue; // no clone yet: warned below
            }
            match git2::Repository::open(&r.path) {
                Err(_) => view.problems.push(Problem::at(
                    file,
                    format!(
                        "repository {}: {} is not a git repository",
                        r.name,
                        r.path.display()
                    ),
                )),
                Ok(repo) => {
                    let has = |name: &str| repo.find_reference(name).is_ok();
                    if !has(&format!("refs/heads/{}", r.branch))
                        && !has(&format!("refs/remotes/origin/{}", r.branch))
                    {
                        view.problems.push(Problem::at(
                            file,
                            format!(
                                "repository {}: base branch {} does not exist in {}",
                                r.name,
                                r.branch,
                                r.path.display()
                            ),
                        ));
                    }
                }
            }
        }
        if view.problems.is_empty() {
            for r in &config.repos {
                if let Some(gap) = config.local_ci_gap(r) {
                    view.warnings.push(gap);
                }
            }
            let missing: Vec<&str> = config
                .repos
                .iter()
                .filter(|r| !r.path.exists())
                .map(|r| r.name.as_str())
                .collect();
            if !missing.is_empty() {
                view.warnings.push(format!(
                    "no local clone yet for {} (paths in {}); a worker cannot start on them until they exist",
                    missing.join(", "),
                    config.file.display()
                ));
            }
            if let Some(w) = crate::app::spawn::program_missing(config) {
                view.warnings.push(w);
            }
            if let Some(contract) = &contract {
                let quiet = ctx.quiet;
                let notice = std::sync::Arc::new(move |m: &str| {
                    if !quiet {
                        eprintln!("orch: {m}");
                    }
                });
                view.warnings
                    .extend(crate::app::branch_protection::warnings(
                        config, contract, notice,
                    ));
            }
            view.repositories = Some(config.repos.len());
            view.layers = Some(config.graph.layers().len());
        }
    }
    in_position_order(&mut view.problems);
    view.ok = view.problems.is_empty();
    let n = view.problems.len();
    let summary = format!("{} found", plural(n, "problem", "problems"));
    if json {
        print_json(&view);
        return if view.ok {
            Ok(0)
        } else {
            // The JSON is the report; the exit code says it was not ok.
            Err(Failure::bad_input(summary))
        };
    }
    if !view.ok {
        for p in &view.problems {
            eprintln!("{p}");
        }
        return Err(Failure::bad_input(summary));
    }
    for w in &view.warnings {
        ctx.warn(w);
    }
    print!("{}", view.human_ok());
    Ok(0)
}

/// As a compiler lists them: by file, then line, then column; in each file those without a
/// position after those with one, and those of no file last. Stable: problems at one place
/// keep the order they were found in.
fn in_position_order(problems: &mut [Problem]) {
    fn key(p: &Problem) -> (bool, Option<&str>, bool, Option<u64>, Option<u64>) {
        (
            p.file.is_none(),
            p.file.as_deref(),
            p.line.is_none(),
            p.line,
            p.column,
        )
    }
    problems.sort_by(|a, b| key(a).cmp(&key(b)));
}

pub fn graph(ctx: &Ctx, format: GraphFormat) -> Outcome {
    let config = ctx.config()?;
    let g = &config.graph;
    match format {
        GraphFormat::Json => print_json(&GraphView::of(g)),
        GraphFormat::Dot => print!("{}", g.to_dot()),
        GraphFormat::Mermaid => print!("{}", g.to_mermaid()),
        GraphFormat::Text => print!("{}", GraphView::of(g).human()),
    }
    Ok(0)
}
