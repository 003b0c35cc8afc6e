//! `repos.yaml`: the repositories, their dependencies, the forge, worker and alert settings.
//!
//! Loading is two steps: the YAML is read into `raw` types that keep source positions, then
//! `validate` turns them into a [`Config`], collecting every problem (with file:line:column)
//! instead of stopping at the first one.

use crate::diag::{Diagnostic, Diagnostics, NAME_RULE, valid_name};
use crate::duration;
use crate::graph::RepoGraph;
use crate::yaml::{Pos, from_yaml_str};
use serde::Deserialize;
use serde_saphyr::Spanned;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Which forge runs CI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ForgeKind {
    /// The embedded default: bare remotes under the state directory, jobs run locally.
    Local,
    /// A Forgejo (or Gitea) server reached over HTTP.
    Forgejo,
}

/// Local forge: how old a branch ref without a CI run must be before the push counts as one
/// whose hook was lost, unless `forge.lost_hook_grace` says otherwise. Long enough that a hook
/// which is merely slow is not raced.
pub const LOST_HOOK_GRACE: Duration = Duration::from_secs(5);

#[derive(Debug, Clone)]
pub struct ForgeConfig {
    pub kind: ForgeKind,
    pub url: Option<String>,
    pub owner: Option<String>,
    /// The NAME of the environment variable holding the token, never the token.
    pub token_env: Option<String>,
    pub request_timeout: Duration,
    /// Local forge: how many runs may execute at once across all repositories.
    pub max_concurrent_runs: usize,
    /// Local forge: how old a branch ref without a CI run must be before its push counts as
    /// one whose hook was lost (and its run is started then).
    pub lost_hook_grace: Duration,
}

#[derive(Debug, Clone)]
pub struct CiConfig {
    pub sync_job: String,
    /// `None`: every job of the push-triggered run is required.
    pub required_jobs: Option<Vec<String>>,
    /// How long a pushed SHA may go without a push-triggered run before the verdict is `no_run`.
    pub start_timeout: Duration,
    pub poll_interval: Duration,
}

#[derive(Debug, Clone)]
pub struct WorkerConfig {
    pub command: Vec<String>,
    pub max_parallel: usize,
    pub env_passthrough: Vec<String>,
    pub max_respawns: u32,
    /// Time between SIGTERM and SIGKILL when a worker's process group is stopped.
    pub stop_grace: Duration,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AlertSink {
    Webhook { url_env: String },
    Command { argv: Vec<String> },
}

/// A CI job of the local forge.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobSpec {
    pub name: String,
    pub run: String,
    pub needs: Vec<String>,
    pub timeout: Option<Duration>,
}

#[derive(Debug, Clone)]
pub struct Repo {
    pub name: String,
    /// Absolute path of the local clone.
    pub path: PathBuf,
    pub branch: String,
    /// Direct dependencies, as written (the graph computes closures).
    pub deps: Vec<String>,
    pub jobs: Vec<JobSpec>,
}

#[derive(Debug, Clone)]
pub struct Config {
    /// The repos.yaml this was loaded from (absolute).
    pub file: PathBuf,
    pub forge: ForgeConfig,
    pub ci: CiConfig,
    pub worker: WorkerConfig,
    pub alerts: Vec<AlertSink>,
    /// In declaration order.
    pub repos: Vec<Repo>,
    pub graph: RepoGraph,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Invalid(Diagnostics),
}

impl Config {
    /// Reads and validates `path`.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let file = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        let text = std::fs::read_to_string(&file).map_err(|source| ConfigError::Read {
            path: file.clone(),
            source,
        })?;
        Config::from_str(&text, &file).map_err(ConfigError::Invalid)
    }

    /// Parses and validates `text` as if read from `file` (relative repo paths resolve
    /// against `file`'s directory).
    pub fn from_str(text: &str, file: &Path) -> Result<Config, Diagnostics> {
        let raw: RawConfig = from_yaml_str(text)
            .map_err(|e| Diagnostics(vec![Diagnostic::new(file, e.pos, e.message)]))?;
        validate(raw, file)
    }

    /// The directory holding repos.yaml; relative paths in it are relative to this.
    pub fn root(&self) -> &Path {
        self.file.parent().unwrap_or(Path::new("."))
    }

    pub fn repo(&self, name: &str) -> Option<&Repo> {
        self.repos.iter().find(|r| r.name == name)
    }

    /// The repository named `name`, or an error listing the known ones.
    pub fn require_repo(&self, name: &str) -> Result<&Repo, UnknownRepo> {
        self.repo(name).ok_or_else(|| UnknownRepo {
            name: name.to_string(),
            file: self.file.clone(),
            known: self.graph.names().to_vec(),
        })
    }

    /// On the local forge, why a worker on `repo` could never reach DONE (no CI jobs, or no
    /// sync job among them); `None` when it can.
    pub fn local_ci_gap(&self, repo: &Repo) -> Option<String> {
        if self.forge.kind != ForgeKind::Local {
            return None;
        }
        if repo.jobs.is_empty() {
            return Some(format!(
                "repository {} has no ci.jobs in {}: on the local forge its pushes start no CI run, so a worker could never reach DONE",
                repo.name,
                self.file.display()
            ));
        }
        if !repo.jobs.iter().any(|j| j.name == self.ci.sync_job) {
            return Some(format!(
                "repository {}'s ci.jobs in {} have no {} job (ci.sync_job): CI could never be green",
                repo.name,
                self.file.display(),
                self.ci.sync_job
            ));
        }
        None
    }

    /// The forge token, read from the variable named by `forge.token_env`.
    pub fn forge_token(&self) -> Result<Option<crate::secret::Secret>, MissingToken> {
        match (self.forge.kind, &self.forge.token_env) {
            (ForgeKind::Local, _) | (_, None) => Ok(None),
            (ForgeKind::Forgejo, Some(var)) => match std::env::var(var) {
                Ok(v) if !v.trim().is_empty() => {
                    Ok(Some(crate::secret::Secret::new(v.trim().to_string())))
                }
                _ => Err(MissingToken {
                    var: var.clone(),
                    file: self.file.clone(),
                }),
            },
        }
    }
}

#[derive(Debug, Clone, thiserror::Error)]
#[error("unknown repository \"{name}\" (not in {file}; known: {known})", known = known.join(", "))]
pub struct UnknownRepo {
    pub name: String,
    pub file: PathBuf,
    pub known: Vec<String>,
}

#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "the forge token variable {var} is not set (named by forge.token_env in {file}); export it with a token that has read:repository"
)]
pub struct MissingToken {
    pub var: String,
    pub file: PathBuf,
}

// ---------------------------------------------------------------------------------------------
// Raw, position-carrying shapes of the file.

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    forge: Option<RawForge>,
    #[serde(default)]
    ci: Option<RawCi>,
    #[serde(default)]
    worker: Option<RawWorker>,
    #[serde(default)]
    alerts: Vec<Spanned<RawAlert>>,
    repos: Spanned<RepoEntries>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawForge {
    kind: Spanned<ForgeKind>,
    #[serde(default)]
    url: Option<Spanned<String>>,
    #[serde(default)]
    owner: Option<Spanned<String>>,
    #[serde(default)]
    token_env: Option<Spanned<String>>,
    #[serde(default)]
    request_timeout: Option<Spanned<String>>,
    #[serde(default)]
    max_concurrent_runs: Option<Spanned<i64>>,
    #[serde(default)]
    lost_hook_grace: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCi {
    #[serde(default)]
    sync_job: Option<Spanned<String>>,
    #[serde(default)]
    required_jobs: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    start_timeout: Option<Spanned<String>>,
    #[serde(default)]
    poll_interval: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWorker {
    #[serde(default)]
    command: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    max_parallel: Option<Spanned<i64>>,
    #[serde(default)]
    env_passthrough: Option<Vec<Spanned<String>>>,
    #[serde(default)]
    max_respawns: Option<Spanned<i64>>,
    #[serde(default)]
    stop_grace: Option<Spanned<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAlert {
    #[serde(default)]
    webhook: Option<RawWebhook>,
    #[serde(default)]
    command: Option<Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWebhook {
    url_env: Spanned<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRepo {
    #[serde(default)]
    path: Option<Spanned<String>>,
    #[serde(default)]
    branch: Option<Spanned<String>>,
    #[serde(default)]
    deps: Vec<Spanned<String>>,
    #[serde(default)]
    ci: Option<RawRepoCi>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRepoCi {
    #[serde(default)]
    jobs: Vec<Spanned<RawJob>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawJob {
    name: Spanned<String>,
    run: String,
    #[serde(default)]
    needs: Vec<Spanned<String>>,
    #[serde(default)]
    timeout: Option<Spanned<String>>,
}

/// The `repos:` mapping, in order, duplicates kept so that validation can name both places.
#[derive(Debug, Default)]
struct RepoEntries(Vec<(Spanned<String>, Spanned<RawRepo>)>);

impl<'de> Deserialize<'de> for RepoEntries {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = RepoEntries;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a mapping of repository name to repository settings")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<RepoEntries, A::Error> {
                let mut out = Vec::new();
                while let Some(k) = map.next_key::<Spanned<String>>()? {
                    let v = map.next_value::<Spanned<RawRepo>>()?;
                    out.push((k, v));
                }
                Ok(RepoEntries(out))
            }
        }
        d.deserialize_map(V)
    }
}

fn pos<T>(s: &Spanned<T>) -> Option<Pos> {
    Pos::of(&s.referenced)
}

// ---------------------------------------------------------------------------------------------
// Validation.

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

fn validate(raw: RawConfig, file: &Path) -> Result<Config, Diagnostics> {
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
            request_timeout: Duration::from_secs(30),
            max_concurrent_runs: 4,
            lost_hook_grace: LOST_HOOK_GRACE,
        },
        Some(f) => {
            if f.kind.value == ForgeKind::Forgejo {
                for (key, v) in [
                    ("url", &f.url),
                    ("owner", &f.owner),
                    ("token_env", &f.token_env),
                ] {
                    if v.as_ref().is_none_or(|s| s.value.trim().is_empty()) {
                        c.err(
                            pos(&f.kind),
                            format!("forge.kind is forgejo but forge.{key} is missing"),
                        );
                    }
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
            if let Some(t) = &f.token_env
                && !t
                    .value
                    .chars()
                    .all(|ch| ch.is_ascii_alphanumeric() || ch == '_')
            {
                c.err(
                    pos(t),
                    "forge.token_env must be the NAME of an environment variable (letters, digits, _), not a token",
                );
            }
            let request_timeout = c.duration(
                "forge.request_timeout",
                &f.request_timeout,
                Duration::from_secs(30),
            );
            let max_concurrent_runs =
                c.positive("forge.max_concurrent_runs", &f.max_concurrent_runs, 4) as usize;
            let lost_hook_grace =
                c.duration("forge.lost_hook_grace", &f.lost_hook_grace, LOST_HOOK_GRACE);
            ForgeConfig {
                kind: f.kind.value,
                url: f.url.map(|s| s.value.trim_end_matches('/').to_string()),
                owner: f.owner.map(|s| s.value),
                token_env: f.token_env.map(|s| s.value),
                request_timeout,
                max_concurrent_runs,
                lost_hook_grace,
            }
        }
    };

    // ci
    let raw_ci = raw.ci.unwrap_or(RawCi {
        sync_job: None,
        required_jobs: None,
        start_timeout: None,
        poll_interval: None,
    });
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
    };

    // worker
    let w = raw.worker.unwrap_or(RawWorker {
        command: None,
        max_parallel: None,
        env_passthrough: None,
        max_respawns: None,
        stop_grace: None,
    });
    let command = match w.command {
        None => vec!["claude".into(), "-p".into()],
        Some(cmd) => {
            if cmd.value.is_empty() || cmd.value[0].trim().is_empty() {
                c.err(
                    pos(&cmd),
                    "worker.command must name a program (an argv list such as [claude, -p])",
                );
            }
            cmd.value
        }
    };
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
        command,
        max_parallel: c.positive("worker.max_parallel", &w.max_parallel, 4) as usize,
        env_passthrough: w
            .env_passthrough
            .map(|v| v.into_iter().map(|s| s.value).collect())
            .unwrap_or_else(|| vec!["HOME".into(), "PATH".into()]),
        max_respawns,
        stop_grace: c.duration("worker.stop_grace", &w.stop_grace, Duration::from_secs(10)),
    };
    if let Some(var) = &forge.token_env
        && worker.env_passthrough.iter().any(|v| v == var)
    {
        c.err(
            None,
            format!("worker.env_passthrough includes {var}, the forge token variable: workers never receive the forge token"),
        );
    }

    // alerts
    let mut alerts = Vec::new();
    for a in raw.alerts {
        let p = pos(&a);
        match (a.value.webhook, a.value.command) {
            (Some(w), None) => alerts.push(AlertSink::Webhook {
                url_env: w.url_env.value,
            }),
            (None, Some(argv)) if !argv.is_empty() => alerts.push(AlertSink::Command { argv }),
            (None, Some(_)) => c.err(p, "alerts: command must be a non-empty argv list"),
            _ => c.err(
                p,
                "alerts: each entry needs exactly one of webhook or command",
            ),
        }
    }

    // repos
    let mut repos: Vec<Repo> = Vec::new();
    let mut first_seen: BTreeMap<String, Option<Pos>> = BTreeMap::new();
    let repos_pos = pos(&raw.repos);
    let entries = raw.repos.value.0;
    if entries.is_empty() {
        c.err(repos_pos, "repos: at least one repository is required");
    }
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
        let jobs = validate_jobs(
            &mut c,
            &name.value,
            spec.ci.map(|ci| ci.jobs).unwrap_or_default(),
        );
        repos.push(Repo {
            name: name.value,
            path,
            branch,
            deps,
            jobs,
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
            repos,
            graph,
        })
    } else {
        c.diags.sort_by_key(|d| d.pos);
        Err(Diagnostics(c.diags))
    }
}

fn validate_jobs(c: &mut Check, repo: &str, raw: Vec<Spanned<RawJob>>) -> Vec<JobSpec> {
    let mut jobs: Vec<JobSpec> = Vec::new();
    let names: BTreeSet<String> = raw.iter().map(|j| j.value.name.value.clone()).collect();
    let mut seen = BTreeSet::new();
    for j in raw {
        let j = j.value;
        if !valid_name(&j.name.value) {
            c.err(
                pos(&j.name),
                format!(
                    "job name \"{}\" in {repo} is not allowed (must match {NAME_RULE})",
                    j.name.value.escape_debug()
                ),
            );
        }
        if !seen.insert(j.name.value.clone()) {
            c.err(
                pos(&j.name),
                format!("duplicate job \"{}\" in {repo}", j.name.value),
            );
        }
        for n in &j.needs {
            if !names.contains(&n.value) {
                c.err(
                    pos(n),
                    format!(
                        "job \"{}\" in {repo} needs unknown job \"{}\"",
                        j.name.value, n.value
                    ),
                );
            } else if n.value == j.name.value {
                c.err(
                    pos(n),
                    format!("job \"{}\" in {repo} needs itself", j.name.value),
                );
            }
        }
        let timeout = j
            .timeout
            .as_ref()
            .and_then(|t| match duration::parse(&t.value) {
                Ok(d) => Some(d),
                Err(e) => {
                    c.err(pos(t), format!("timeout of job \"{}\": {e}", j.name.value));
                    None
                }
            });
        jobs.push(JobSpec {
            name: j.name.value,
            run: j.run,
            needs: j.needs.into_iter().map(|n| n.value).collect(),
            timeout,
        });
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

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<Config, Diagnostics> {
        Config::from_str(text, Path::new("/tmp/repos.yaml"))
    }

    #[test]
    fn minimal_config_gets_local_forge_and_defaults() {
        let c = load("repos:\n  a: {}\n  b: { deps: [a] }\n").unwrap();
        assert_eq!(c.forge.kind, ForgeKind::Local);
        assert_eq!(c.ci.sync_job, "radicle-push");
        assert_eq!(c.repo("b").unwrap().deps, vec!["a"]);
        assert_eq!(c.repo("a").unwrap().path, Path::new("/tmp/a"));
        assert_eq!(c.repo("a").unwrap().branch, "main");
    }

    #[test]
    fn reports_every_problem_with_positions() {
        let err = load("repos:\n  a: { deps: [a, zz] }\n  'b c': {}\n  a: {}\n").unwrap_err();
        let text = err.to_string();
        assert!(text.contains("depends on itself"), "{text}");
        assert!(text.contains("unknown repository \"zz\""), "{text}");
        assert!(text.contains("\"b c\" is not allowed"), "{text}");
        assert!(text.contains("duplicate repository \"a\""), "{text}");
        assert!(text.contains("/tmp/repos.yaml:2:"), "{text}");
        assert_eq!(err.0.len(), 4, "{text}");
    }

    #[test]
    fn cycle_is_printed_as_a_path() {
        let err = load("repos:\n  alphavm: { deps: [adnet] }\n  adnet: { deps: [alphavm] }\n")
            .unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("alphavm -> adnet -> alphavm")
                || text.contains("adnet -> alphavm -> adnet"),
            "{text}"
        );
    }

    #[test]
    fn token_variable_must_not_be_passed_to_workers() {
        let err = load(
            "forge: {kind: forgejo, url: 'https://f', owner: o, token_env: FORGEJO_TOKEN}\nworker: {env_passthrough: [PATH, FORGEJO_TOKEN]}\nrepos: {a: {}}\n",
        )
        .unwrap_err();
        assert!(err.to_string().contains("never receive the forge token"));
    }
}
