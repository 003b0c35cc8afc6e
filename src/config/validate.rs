//! Validation: turns the raw shapes into a [`Config`], collecting every problem with its position.

use super::raw::{
    RawAlerts, RawCi, RawConfig, RawDownstream, RawJob, RawLand, RawWebhook, RawWorker, pos,
};
use super::{
    Agent, AlertLevel, AlertSink, AlertsConfig, CiConfig, Config, DownstreamConfig, ForgeConfig,
    ForgeKind, GIVE_UP_AFTER, HistoryConfig, JobSpec, LOST_HOOK_GRACE, LandConfig, LandMethod,
    LandPolicy, OnBreakage, OnConflict, Repo, ServeConfig, SinkKind, WorkerConfig,
};
use crate::diag::{Diagnostic, Diagnostics, NAME_RULE, valid_name};
use crate::duration;
use crate::graph::RepoGraph;
use crate::yaml::Pos;
use serde_saphyr::Spanned;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::MAX_REPO_NAME;

struct Check<'a> {
    file: &'a Path,
    diags: Vec<Diagnostic>,
}

impl Check<'_> {
    fn err(&mut self, pos: Option<Pos>, msg: impl Into<String>) {
        self.diags.push(Diagnostic::new(self.file, pos, msg));
    }

    fn duration(&mut self, key: &str, v: &Option<Spanned<String>>, default: Duration) -> Duration {
        match v {
            None => default,
            Some(s) => match duration::parse(&s.value) {
                Ok(d) => d,
                Err(e) => {
                    self.err(pos(s), format!("{key}: {e}"));
                    default
                }
            },
        }
    }

    fn positive(&mut self, key: &str, v: &Option<Spanned<i64>>, default: i64) -> i64 {
        match v {
            None => default,
            Some(s) if s.value > 0 => s.value,
            Some(s) => {
                self.err(
                    pos(s),
                    format!("{key} must be greater than zero, got {}", s.value),
                );
                default
            }
        }
    }
}

/// Where a clone's path really leads (symlinks resolved): `Config::load` passes the file
/// system's answer, `Config::from_str` a lexical one; validation itself stays pure.
pub(super) type Resolve<'a> = &'a dyn Fn(&Path) -> PathBuf;

pub(super) fn validate(
    raw: RawConfig,
    file: &Path,
    resolve: Resolve,
) -> Result<Config, Diagnostics> {
    let mut c = Check {
        file,
        diags: Vec::new(),
    };
    let root = file.parent().unwrap_or(Path::new("."));

    // forge
    let forge = match raw.forge {
        None => ForgeConfig {
            kind: ForgeKind::Local,
            url: None,
            owner: None,
            token_env: None,
            token_file: None,
            request_timeout: Duration::from_secs(30),
            give_up_after: GIVE_UP_AFTER,
            max_concurrent_runs: 4,
            lost_hook_grace: LOST_HOOK_GRACE,
            path: None,
        },
        Some(f) => {
            // Left out or wrong-typed: reported by `shape`; the rest is checked as local.
            let kind = match &f.kind {
                None => ForgeKind::Local,
                Some(k) => ForgeKind::parse(&k.value).unwrap_or_else(|| {
                    c.err(
                        pos(k),
                        format!(
                            "forge.kind: unknown forge {:?}; one of: {}",
                            k.value,
                            ForgeKind::ALL.map(ForgeKind::as_str).join(", ")
                        ),
                    );
                    ForgeKind::Local
                }),
            };
            if kind == ForgeKind::Forgejo
                && let Some(kind_key) = &f.kind
            {
                for (key, v) in [("url", &f.url), ("owner", &f.owner)] {
                    if v.as_ref().is_none_or(|s| s.value.trim().is_empty()) {
                        c.err(
                            pos(kind_key),
                            format!("forge.kind is forgejo but forge.{key} is missing"),
                        );
                    }
                }
                let given = |v: &Option<Spanned<String>>| {
                    v.as_ref().is_some_and(|s| !s.value.trim().is_empty())
                };
                match (given(&f.token_env), given(&f.token_file)) {
                    (false, false) => c.err(
                        pos(kind_key),
                        "forge.kind is forgejo but neither forge.token_file nor forge.token_env is set",
                    ),
                    (true, true) => c.err(
                        f.token_file.as_ref().and_then(pos),
                        "forge.token_file and forge.token_env are both set: keep one (token_file keeps the token out of every environment)",
                    ),
                    _ => {}
                }
                if let Some(u) = &f.url
                    && !(u.value.starts_with("http://") || u.value.starts_with("https://"))
                {
                    c.err(
                        pos(u),
                        format!(
                            "forge.url \"{}\" must start with http:// or https://",
                            u.value
                        ),
                    );
                }
            }
            // Never echo the value: it may be the token itself, pasted in by mistake.
            let token_env_ok = f.token_env.as_ref().is_none_or(|t| {
                let ok = env_var_name(&t.value);
                if !ok {
                    c.err(
                        pos(t),
                        "forge.token_env must be the NAME of an environment variable holding the token (such as FORGEJO_TOKEN), not the token itself; the value is not shown",
                    );
                }
                ok
            });
            let request_timeout = c.duration(
                "forge.request_timeout",
                &f.request_timeout,
                Duration::from_secs(30),
            );
            let give_up_after = c.duration("forge.give_up_after", &f.give_up_after, GIVE_UP_AFTER);
            let max_concurrent_runs =
                c.positive("forge.max_concurrent_runs", &f.max_concurrent_runs, 4) as usize;
            let lost_hook_grace =
                c.duration("forge.lost_hook_grace", &f.lost_hook_grace, LOST_HOOK_GRACE);
            let path = f.path.as_ref().and_then(|p| {
                if kind != ForgeKind::Local {
                    c.err(
                        pos(p),
                        "forge.path is the local forge's directory: a forgejo forge has none (leave it out)",
                    );
                    return None;
                }
                let value = p.value.trim();
                if value.is_empty() {
                    c.err(pos(p), "forge.path is empty");
                    return None;
                }
                Some(root.join(value))
            });
            ForgeConfig {
                kind,
                url: f.url.map(|s| s.value.trim_end_matches('/').to_string()),
                owner: f.owner.map(|s| s.value),
                token_env: f.token_env.map(|s| s.value).filter(|_| token_env_ok),
                token_file: f
                    .token_file
                    .map(|s| root.join(s.value.trim()))
                    .filter(|p| !p.as_os_str().is_empty()),
                request_timeout,
                give_up_after,
                max_concurrent_runs,
                lost_hook_grace,
                path,
            }
        }
    };

    // ci
    let raw_ci = raw.ci.unwrap_or(RawCi {
        sync_job: None,
        required_jobs: None,
        start_timeout: None,
        poll_interval: None,
        protected_paths: None,
    });
    let org_protected = raw_ci
        .protected_paths
        .as_ref()
        .map(|v| protected_paths(&mut c, "ci.protected_paths", v));
    let ci = CiConfig {
        sync_job: raw_ci
            .sync_job
            .map(|s| s.value)
            .unwrap_or_else(|| "radicle-push".into()),
        required_jobs: raw_ci
            .required_jobs
            .map(|v| v.into_iter().map(|s| s.value).collect()),
        start_timeout: c.duration(
            "ci.start_timeout",
            &raw_ci.start_timeout,
            Duration::from_secs(300),
        ),
        poll_interval: c.duration(
            "ci.poll_interval",
            &raw_ci.poll_interval,
            Duration::from_secs(10),
        ),
        protected_paths: org_protected,
    };

    // land (the organisation's; a repository's own `land:` overrides it key by key)
    let raw_land = raw.land.unwrap_or_default();
    let land = validate_land(
        &mut c,
        "land",
        &raw_land,
        LandConfig::default_for(forge.kind),
        forge.kind,
    );

    let downstream = validate_downstream(&mut c, &raw.downstream.unwrap_or_default());
    let history = HistoryConfig {
        keep: c.duration(
            "history.keep",
            &raw.history.unwrap_or_default().keep,
            crate::config::HISTORY_KEEP,
        ),
    };
    let serve = {
        let raw_serve = raw.serve.clone().unwrap_or_default();
        // Never echo the value: it may be the token itself, pasted in by mistake.
        let token_env = raw_serve.token_env.and_then(|t| {
            if env_var_name(&t.value) {
                Some(t.value)
            } else {
                c.err(
                    pos(&t),
                    "serve.token_env must be the NAME of an environment variable holding the board's token (such as ORCH_BOARD_TOKEN), not the token itself; the value is not shown",
                );
                None
            }
        });
        ServeConfig { token_env }
    };
    let store = raw.store.clone().and_then(|st| validate_store(&mut c, st));
    let node_name =
        raw.node
            .clone()
            .and_then(|n| n.name)
            .and_then(|n| match crate::node::valid(&n.value) {
                Ok(()) => Some(n.value),
                Err(why) => {
                    c.err(pos(&n), format!("node.name: {why}"));
                    None
                }
            });

    // worker
    let w = raw.worker.unwrap_or(RawWorker {
        agent: None,
        command: None,
        max_cost_usd: None,
        max_tokens: None,
        max_parallel: None,
        max_parallel_total: None,
        env_passthrough: None,
        max_respawns: None,
        stop_grace: None,
        user: None,
        users: None,
        sandbox: None,
        hide: None,
        model: None,
        model_overrides: None,
    });
    let agent = match &w.agent {
        None => Agent::Command,
        Some(a) => Agent::parse(&a.value).unwrap_or_else(|| {
            c.err(
                pos(a),
                format!(
                    "worker.agent: unknown agent {:?}; one of: {}",
                    a.value,
                    Agent::ALL.map(Agent::as_str).join(", ")
                ),
            );
            Agent::Command
        }),
    };
    let users = accounts(&mut c, &w);
    let command_pos = w.command.as_ref().and_then(pos);
    let command = match w.command {
        None => agent.default_command(),
        Some(cmd) => {
            if cmd.value.is_empty() || cmd.value[0].trim().is_empty() {
                c.err(
                    pos(&cmd),
                    "worker.command must name a program (an argv list such as [claude, -p])",
                );
            }
            for problem in super::agent::command_problems(&cmd.value) {
                c.err(pos(&cmd), problem);
            }
            cmd.value
        }
    };
    let max_cost_usd = match &w.max_cost_usd {
        Some(s) if !(s.value.is_finite() && s.value > 0.0) => {
            c.err(
                pos(s),
                format!(
                    "worker.max_cost_usd must be a number of dollars greater than zero, got {}",
                    s.value
                ),
            );
            None
        }
        other => other.as_ref().map(|s| s.value),
    };
    let max_tokens = w
        .max_tokens
        .as_ref()
        .map(|_| c.positive("worker.max_tokens", &w.max_tokens, 1) as u64);
    let max_respawns = match &w.max_respawns {
        Some(s) if s.value < 0 => {
            c.err(
                pos(s),
                format!("worker.max_respawns must not be negative, got {}", s.value),
            );
            2
        }
        Some(s) => s.value as u32,
        None => 2,
    };
    let worker = WorkerConfig {
        agent,
        command,
        max_parallel: c.positive("worker.max_parallel", &w.max_parallel, 4) as usize,
        max_parallel_total: w
            .max_parallel_total
            .as_ref()
            .map(|_| c.positive("worker.max_parallel_total", &w.max_parallel_total, 1) as usize),
        env_passthrough: w
            .env_passthrough
            .map(|v| v.into_iter().map(|s| s.value).collect())
            .unwrap_or_else(|| agent.default_env_passthrough()),
        max_respawns,
        stop_grace: c.duration("worker.stop_grace", &w.stop_grace, Duration::from_secs(10)),
        max_cost_usd,
        max_tokens,
        users,
        sandbox: w.sandbox.as_ref().is_some_and(|s| s.value),
        hide: hidden_paths(&mut c, root, &w.hide),
        model: model_name(&mut c, "worker.model", &w.model),
        model_overrides: {
            let o = w.model_overrides.unwrap_or_default();
            super::model::ModelOverrides {
                critical_path: model_name(
                    &mut c,
                    "worker.model_overrides.critical_path",
                    &o.critical_path,
                ),
                complexity_high: model_name(
                    &mut c,
                    "worker.model_overrides.complexity_high",
                    &o.complexity_high,
                ),
                security_sensitive: model_name(
                    &mut c,
                    "worker.model_overrides.security_sensitive",
                    &o.security_sensitive,
                ),
                cross_repo: model_name(&mut c, "worker.model_overrides.cross_repo", &o.cross_repo),
            }
        },
    };
    if worker.model.is_none()
        && worker
            .command
            .iter()
            .any(|a| super::agent::placeholders_in(a).contains(&"model_name"))
    {
        c.err(
            command_pos,
            "worker.command uses {model_name} but worker.model is not set: a worker no model was chosen for would get an empty name (set worker.model, or use {model}, which is left out then)",
        );
    }
    if let Some(var) = &forge.token_env
        && worker.env_passthrough.iter().any(|v| v == var)
    {
        c.err(
            None,
            format!("worker.env_passthrough includes {var}, the forge token variable: workers never receive the forge token"),
        );
    }

    // alerts
    let alerts = validate_alerts(&mut c, raw.alerts);

    // repos
    let mut repos: Vec<Repo> = Vec::new();
    let mut first_seen: BTreeMap<String, Option<Pos>> = BTreeMap::new();
    // Left out or wrong-typed: reported by `shape`, and nothing more to check here.
    let entries = match raw.repos {
        None => Vec::new(),
        Some(repos) => {
            if repos.value.0.is_empty() {
                c.err(pos(&repos), "repos: at least one repository is required");
            }
            repos.value.0
        }
    };
    for (name, _) in &entries {
        let p = pos(name);
        if !valid_name(&name.value) {
            c.err(
                p,
                format!(
                    "repository name \"{}\" is not allowed (names must match {NAME_RULE})",
                    name.value.escape_debug()
                ),
            );
        } else if let Some(why) = ref_component_problem(&name.value) {
            c.err(
                p,
                format!(
                    "repository name \"{}\" is not allowed: {why} (orch names branches orch/<name>-<id>, which must be a valid git ref)",
                    name.value
                ),
            );
        }
        if name.value.len() > MAX_REPO_NAME {
            c.err(
                p,
                format!(
                    "repository name \"{}…\" is {} bytes long; at most {MAX_REPO_NAME} are allowed (orch's checkpoint file names add up to {} bytes to it, and a file name holds 255)",
                    name.value.chars().take(24).collect::<String>().escape_debug(),
                    name.value.len(),
                    255 - MAX_REPO_NAME
                ),
            );
        }
        if let Some(prev) = first_seen.get(&name.value) {
            let at = prev
                .map(|q| format!(" (first defined at line {})", q.line))
                .unwrap_or_default();
            c.err(p, format!("duplicate repository \"{}\"{at}", name.value));
        } else {
            first_seen.insert(name.value.clone(), p);
        }
    }
    let mut dep_positions: BTreeMap<(String, String), Option<Pos>> = BTreeMap::new();
    let mut seen_repo = BTreeSet::new();
    // Each repository needs its own clone: workers of two names on one clone would share
    // its worktrees, branches and remotes (and push to the wrong one).
    let mut clones: BTreeMap<PathBuf, String> = BTreeMap::new();
    for (name, spec) in entries {
        if !seen_repo.insert(name.value.clone()) {
            continue; // duplicate already reported; first definition wins for the checks below
        }
        let spec = spec.value;
        let mut deps = Vec::new();
        let mut seen_dep = BTreeSet::new();
        for d in &spec.deps {
            if d.value == name.value {
                c.err(
                    pos(d),
                    format!("repository \"{}\" depends on itself", name.value),
                );
                continue;
            }
            if !first_seen.contains_key(&d.value) {
                c.err(
                    pos(d),
                    format!(
                        "repository \"{}\" depends on unknown repository \"{}\"",
                        name.value, d.value
                    ),
                );
                continue;
            }
            if seen_dep.insert(d.value.clone()) {
                dep_positions.insert((name.value.clone(), d.value.clone()), pos(d));
                deps.push(d.value.clone());
            }
        }
        let path = match &spec.path {
            Some(p) => root.join(&p.value),
            None => root.join(&name.value),
        };
        let real = resolve(&path);
        if let Some(first) = clones.get(&real) {
            let at = spec.path.as_ref().map(pos).unwrap_or_else(|| pos(&name));
            c.err(
                at,
                format!(
                    "repositories \"{first}\" and \"{}\" are one clone, {} (path {}); each repository needs its own clone",
                    name.value,
                    real.display(),
                    path.display()
                ),
            );
        } else {
            clones.insert(real, name.value.clone());
        }
        let branch = spec
            .branch
            .as_ref()
            .map(|b| b.value.clone())
            .unwrap_or_else(|| "main".into());
        if let Some(b) = &spec.branch
            && (b.value.is_empty()
                || b.value.starts_with('-')
                || b.value.contains("..")
                || b.value.contains(char::is_whitespace))
        {
            c.err(
                pos(b),
                format!("branch \"{}\" is not a valid branch name", b.value),
            );
        }
        let (raw_jobs, own_protected) = match spec.ci {
            Some(ci) => (ci.jobs, ci.protected_paths),
            None => (Vec::new(), None),
        };
        let jobs = validate_jobs(&mut c, &name.value, raw_jobs);
        // The repository's own list, else the organisation's, else the defaults: the
        // workflow directories and the scripts its jobs run.
        let protected = match &own_protected {
            Some(own) => protected_paths(
                &mut c,
                &format!("repos.{}.ci.protected_paths", name.value),
                own,
            ),
            None => ci
                .protected_paths
                .clone()
                .unwrap_or_else(|| crate::protect::defaults(jobs.iter().map(|j| j.run.as_str()))),
        };
        let land = match &spec.land {
            Some(own) => validate_land(
                &mut c,
                &format!("repos.{}.land", name.value),
                own,
                land,
                forge.kind,
            ),
            None => land,
        };
        let model = model_name(&mut c, &format!("repos.{}.model", name.value), &spec.model);
        repos.push(Repo {
            model,
            name: name.value,
            path,
            branch,
            deps,
            jobs,
            land,
            protected_paths: protected,
        });
    }

    let graph = RepoGraph::new(repos.iter().map(|r| (r.name.clone(), r.deps.clone())));
    if let Some(cycle) = graph.find_cycle() {
        let at = dep_positions
            .get(&(cycle[0].clone(), cycle[1].clone()))
            .copied()
            .flatten();
        c.err(at, format!("dependency cycle: {}", cycle.join(" -> ")));
    }

    if c.diags.is_empty() {
        Ok(Config {
            file: file.to_path_buf(),
            forge,
            ci,
            worker,
            alerts,
            downstream,
            history,
            serve,
            store,
            node_name,
            repos,
            graph,
        })
    } else {
        let mut diags = Diagnostics(c.diags);
        diags.sort();
        Err(diags)
    }
}

/// A model's name (`worker.model`, an override, a repository's `model`), refused with its
/// position when it could not be one argument of the agent's command line.
fn model_name(c: &mut Check, key: &str, raw: &Option<Spanned<String>>) -> Option<String> {
    let m = raw.as_ref()?;
    if let Some(why) = super::model::name_problem(&m.value) {
        c.err(
            pos(m),
            format!(
                "{key}: \"{}\" is not a model name: {why}",
                m.value.escape_debug()
            ),
        );
        return None;
    }
    Some(m.value.trim().to_string())
}

/// A `protected_paths` list: each entry a pattern (see `protect`), refused with its position.
fn protected_paths(
    c: &mut Check,
    key: &str,
    raw: &[Spanned<String>],
) -> Vec<crate::protect::Pattern> {
    let mut out = Vec::new();
    for entry in raw {
        match crate::protect::Pattern::parse(&entry.value) {
            Ok(p) => out.push(p),
            Err(why) => c.err(
                pos(entry),
                format!(
                    "{key}: \"{}\" is not a path pattern: {why}",
                    entry.value.escape_debug()
                ),
            ),
        }
    }
    out
}

fn validate_downstream(c: &mut Check, raw: &RawDownstream) -> DownstreamConfig {
    let mut d = DownstreamConfig::default();
    if let Some(v) = &raw.depth {
        if v.value < 0 {
            c.err(
                pos(v),
                format!(
                    "downstream.depth must be 0 (no check) or more, got {}",
                    v.value
                ),
            );
        } else {
            d.depth = v.value as u32;
        }
    }
    if let Some(o) = &raw.on_breakage {
        match o.value.as_str() {
            "hold" => d.on_breakage = OnBreakage::Hold,
            "fix" => d.on_breakage = OnBreakage::Fix,
            "revert" => d.on_breakage = OnBreakage::Revert,
            other => c.err(
                pos(o),
                format!("downstream.on_breakage must be hold, fix or revert, got \"{other}\""),
            ),
        }
    }
    d
}

/// One `land:` mapping over `base` (the defaults, or the organisation's for a repository).
fn validate_land(
    c: &mut Check,
    at: &str,
    raw: &RawLand,
    base: LandConfig,
    forge: ForgeKind,
) -> LandConfig {
    let mut land = base;
    if let Some(p) = &raw.policy {
        match p.value.as_str() {
            "merge" => land.policy = LandPolicy::Merge,
            "none" => land.policy = LandPolicy::None,
            "pull_request" if forge == ForgeKind::Forgejo => {
                land.policy = LandPolicy::PullRequest
            }
            "pull_request" => c.err(
                pos(p),
                format!(
                    "{at}.policy pull_request needs forge.kind: forgejo (the local forge has no pull requests; use merge)"
                ),
            ),
            "direct" => land.policy = LandPolicy::Direct,
            other => c.err(
                pos(p),
                format!("{at}.policy must be merge, pull_request, direct or none, got \"{other}\""),
            ),
        }
    }
    if let Some(m) = &raw.method {
        match m.value.as_str() {
            "merge" => land.method = LandMethod::Merge,
            "rebase" => land.method = LandMethod::Rebase,
            "squash" => land.method = LandMethod::Squash,
            other => c.err(
                pos(m),
                format!("{at}.method must be merge, rebase or squash, got \"{other}\""),
            ),
        }
    }
    if raw.max_attempts.is_some() {
        land.max_attempts = c.positive(&format!("{at}.max_attempts"), &raw.max_attempts, 3) as u32;
    }
    if let Some(o) = &raw.on_conflict {
        match o.value.as_str() {
            "block" => land.on_conflict = OnConflict::Block,
            "fix" => land.on_conflict = OnConflict::Fix,
            other => c.err(
                pos(o),
                format!(
                    "{at}.on_conflict must be block (a person integrates, the lock kept, an alert) or fix (a replacement worker redoes the change on the base), got \"{other}\""
                ),
            ),
        }
    }
    land
}

fn validate_alerts(c: &mut Check, raw: RawAlerts) -> AlertsConfig {
    let defaults = AlertsConfig::default();
    let mut sinks: Vec<AlertSink> = Vec::new();
    for a in raw.sinks {
        let p = pos(&a);
        let a = a.value;
        // What else is wrong with a sink is reported even when its kind is.
        let kind = match (a.webhook, a.command) {
            // Left out or wrong-typed: reported by `shape`.
            (Some(RawWebhook { url_env: None }), None) => None,
            (
                Some(RawWebhook {
                    url_env: Some(url_env),
                }),
                None,
            ) if !env_var_name(&url_env.value) => {
                c.err(
                    pos(&url_env),
                    "alerts: webhook.url_env must be the NAME of an environment variable holding the URL, not the URL itself; the value is not shown",
                );
                None
            }
            (
                Some(RawWebhook {
                    url_env: Some(url_env),
                }),
                None,
            ) => Some(SinkKind::Webhook {
                url_env: url_env.value,
            }),
            (None, Some(argv)) if !argv.is_empty() => Some(SinkKind::Command { argv }),
            (None, Some(_)) => {
                c.err(p, "alerts: command must be a non-empty argv list");
                None
            }
            // Neither or both: reported by `shape`.
            _ => None,
        };
        let min_severity = match &a.min_severity {
            None => AlertLevel::Info,
            Some(s) => AlertLevel::parse(&s.value).unwrap_or_else(|| {
                c.err(
                    pos(s),
                    format!(
                        "alerts: min_severity must be info, warning or critical, got {:?}",
                        s.value
                    ),
                );
                AlertLevel::Info
            }),
        };
        let timeout = c.duration("alerts: timeout", &a.timeout, Duration::from_secs(10));
        let Some(kind) = kind else {
            continue;
        };
        let base = match &kind {
            SinkKind::Webhook { url_env } => format!("webhook:{url_env}"),
            SinkKind::Command { argv } => format!(
                "command:{}",
                Path::new(&argv[0])
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_else(|| argv[0].clone())
            ),
        };
        let mut label = base.clone();
        let mut n = 1;
        while sinks.iter().any(|s| s.label == label) {
            n += 1;
            label = format!("{base}#{n}");
        }
        sinks.push(AlertSink {
            kind,
            label,
            min_severity,
            timeout,
        });
    }
    let max_attempts = c.positive("alerts.max_attempts", &raw.max_attempts, 8);
    AlertsConfig {
        sinks,
        dedup_window: c.duration(
            "alerts.dedup_window",
            &raw.dedup_window,
            defaults.dedup_window,
        ),
        retry_initial: c.duration(
            "alerts.retry_initial",
            &raw.retry_initial,
            defaults.retry_initial,
        ),
        max_attempts: max_attempts.min(1000) as u32,
    }
}

fn validate_jobs(c: &mut Check, repo: &str, raw: Vec<Spanned<RawJob>>) -> Vec<JobSpec> {
    let mut jobs: Vec<JobSpec> = Vec::new();
    let names: BTreeSet<String> = raw
        .iter()
        .filter_map(|j| j.value.name.as_ref().map(|n| n.value.clone()))
        .collect();
    // A job whose name was left out or wrong-typed (reported by `shape`) may be the one a
    // `needs` means: an unknown name is then not reported as well.
    let all_named = raw.iter().all(|j| j.value.name.is_some());
    let mut seen = BTreeSet::new();
    for (i, j) in raw.into_iter().enumerate() {
        let j = j.value;
        let shown = match &j.name {
            Some(n) => format!("\"{}\"", n.value),
            None => format!("at jobs[{i}]"),
        };
        if let Some(name) = &j.name {
            if !valid_name(&name.value) {
                c.err(
                    pos(name),
                    format!(
                        "job name \"{}\" in {repo} is not allowed (must match {NAME_RULE})",
                        name.value.escape_debug()
                    ),
                );
            }
            if !seen.insert(name.value.clone()) {
                c.err(
                    pos(name),
                    format!("duplicate job \"{}\" in {repo}", name.value),
                );
            }
        }
        for n in &j.needs {
            if !names.contains(&n.value) {
                if all_named {
                    c.err(
                        pos(n),
                        format!("job {shown} in {repo} needs unknown job \"{}\"", n.value),
                    );
                }
            } else if j.name.as_ref().is_some_and(|name| name.value == n.value) {
                c.err(pos(n), format!("job {shown} in {repo} needs itself"));
            }
        }
        let timeout = j
            .timeout
            .as_ref()
            .and_then(|t| match duration::parse(&t.value) {
                Ok(d) => Some(d),
                Err(e) => {
                    c.err(pos(t), format!("timeout of job {shown}: {e}"));
                    None
                }
            });
        // Without a name or a command there is no job (already reported): the file is
        // refused, and only the checks above were wanted from it.
        if let (Some(name), Some(run)) = (j.name, j.run) {
            jobs.push(JobSpec {
                name: name.value,
                run,
                needs: j.needs.into_iter().map(|n| n.value).collect(),
                timeout,
            });
        }
    }
    let job_graph = RepoGraph::new(jobs.iter().map(|j| {
        (
            j.name.clone(),
            j.needs
                .iter()
                .filter(|n| names.contains(*n))
                .cloned()
                .collect::<Vec<_>>(),
        )
    }));
    if let Some(cycle) = job_graph.find_cycle() {
        c.err(
            None,
            format!("job needs in {repo} form a cycle: {}", cycle.join(" -> ")),
        );
    }
    jobs
}

/// Why `name` cannot be a component of a git ref name (`git check-ref-format`), beyond
/// what the name rule already excludes; `None` when it can.
pub(super) fn ref_component_problem(name: &str) -> Option<&'static str> {
    if name.contains("..") {
        Some("it contains \"..\"")
    } else if name.starts_with('.') {
        Some("it starts with \".\"")
    } else if name.ends_with('.') {
        Some("it ends with \".\"")
    } else if name.ends_with(".lock") {
        Some("it ends with \".lock\"")
    } else if name.contains("@{") || name == "@" {
        Some("it contains \"@{\" or is \"@\"")
    } else {
        None
    }
}

/// Is `s` an environment variable's NAME rather than a secret pasted in its place? A name
/// is letters, digits and `_`, not starting with a digit, at most 64 long, made of words:
/// no long run of mixed letters and digits (tokens are; Forgejo's are 40 hex digits).
/// `store:`: one of `url` (no password in it) or `url_env`, and an optional `password_env`.
/// Values that may be secrets are never echoed.
fn validate_store(c: &mut Check, raw: super::raw::RawStore) -> Option<super::StoreConfig> {
    use super::{StoreConfig, url_has_password, url_is_postgres};
    let mut ok = true;
    let mut name = |c: &mut Check, key: &str, v: Option<Spanned<String>>| {
        v.and_then(|t| {
            if env_var_name(&t.value) {
                Some(t.value)
            } else {
                c.err(
                    pos(&t),
                    format!("store.{key} must be the NAME of an environment variable (such as ORCH_DATABASE_URL), not its value; the value is not shown"),
                );
                ok = false;
                None
            }
        })
    };
    let url_env = name(c, "url_env", raw.url_env.clone());
    let password_env = name(c, "password_env", raw.password_env.clone());
    let url = match raw.url.clone() {
        Some(u) if url_has_password(&u.value) => {
            c.err(
                pos(&u),
                "store.url holds a password: repos.yaml is read by every worker and kept in git; give the password in an environment variable (store.password_env) or the whole URL in one (store.url_env); the value is not shown",
            );
            ok = false;
            None
        }
        Some(u) if !url_is_postgres(&u.value) => {
            c.err(
                pos(&u),
                format!(
                    "store.url must be a PostgreSQL URL (postgres://user@host:port/database), got {:?}; leave store out for the state directory's SQLite file",
                    u.value
                ),
            );
            ok = false;
            None
        }
        Some(u) => Some(u.value),
        None => None,
    };
    match (&url, &url_env) {
        (Some(_), Some(_)) => {
            c.err(
                pos(raw.url.as_ref().or(raw.url_env.as_ref())?),
                "store: give either url or url_env, not both",
            );
            None
        }
        (None, None) if ok => {
            c.err(
                None,
                "store: needs url (postgres://user@host/database, the password in store.password_env) or url_env (the NAME of a variable holding the whole URL)",
            );
            None
        }
        _ if !ok => None,
        _ => Some(StoreConfig {
            url,
            url_env,
            password_env,
        }),
    }
}

pub(super) fn env_var_name(s: &str) -> bool {
    let shape = !s.is_empty()
        && s.len() <= 64
        && !s.starts_with(|c: char| c.is_ascii_digit())
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    shape
        && !s.split('_').any(|word| {
            let digits = word.chars().filter(char::is_ascii_digit).count();
            let lower = word.chars().filter(char::is_ascii_lowercase).count();
            let upper = word.chars().filter(char::is_ascii_uppercase).count();
            let kinds = [digits, lower, upper].iter().filter(|n| **n > 0).count();
            (word.len() >= 16 && kinds >= 2 && digits > 0) || (word.len() >= 20 && kinds >= 2)
        })
}

/// `worker.hide`: more paths a sandboxed worker must not see — absolute, `~/…` (orch's home,
/// expanded where the sandbox is made: validation reads no environment) or relative to the
/// configuration's directory.
fn hidden_paths(c: &mut Check, root: &Path, hide: &Option<Vec<Spanned<String>>>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for h in hide.iter().flatten() {
        let text = h.value.trim();
        let path = if text == "~" || text.starts_with("~/") {
            PathBuf::from(text)
        } else {
            super::normalize(&root.join(text))
        };
        if text.is_empty() || text == "~" || path == Path::new("/") {
            c.err(
                pos(h),
                format!(
                    "worker.hide: {:?} is not a path a worker can be kept from (name a file or directory other than / and ~)",
                    h.value
                ),
            );
            continue;
        }
        out.push(path);
    }
    out
}

/// `worker.user` (one account) or `worker.users` (a pool: each live worker gets one of its own),
/// each an unprivileged account's name or number.
fn accounts(c: &mut Check, w: &RawWorker) -> Vec<String> {
    let mut names: Vec<(String, Option<Pos>)> = Vec::new();
    if let Some(u) = &w.user {
        names.push((u.value.clone(), pos(u)));
    }
    if let Some(list) = &w.users {
        if w.user.is_some() {
            c.err(
                pos(list),
                "worker.user and worker.users both given: name one account (user) or a pool (users)",
            );
        }
        if list.value.is_empty() {
            c.err(pos(list), "worker.users: name at least one account");
        }
        names.extend(list.value.iter().map(|u| (u.value.clone(), pos(u))));
    }
    let mut out: Vec<String> = Vec::new();
    for (value, at) in names {
        let name = value.trim();
        if name.is_empty() || name.contains(['/', ':', '\n']) {
            c.err(
                at,
                format!("worker.user: {value:?} is not an account name (the unprivileged account workers run as, e.g. orch-worker)"),
            );
        } else if name == "root" || name == "0" {
            c.err(
                at,
                "worker.user: root is not a separate account; name an unprivileged one (e.g. orch-worker)",
            );
        } else if out.iter().any(|n| n == name) {
            c.err(at, format!("worker.users: {name} is named twice"));
        } else {
            out.push(name.to_string());
        }
    }
    out
}
