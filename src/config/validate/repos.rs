//! `repos:`: the repositories, their names, clones, branches, dependencies and CI jobs.

use super::land::validate_land;
use super::{Check, Resolve, model_name, protected_paths, ref_component_problem};
use crate::config::raw::{RawJob, RepoEntries, pos};
use crate::config::{ForgeKind, JobSpec, LandConfig, MAX_REPO_NAME, Repo};
use crate::diag::{NAME_RULE, valid_name};
use crate::duration;
use crate::graph::RepoGraph;
use crate::yaml::Pos;
use serde_saphyr::Spanned;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The organisation's settings a repository inherits unless it gives its own.
pub(super) struct Inherited<'a> {
    pub(super) protected_paths: &'a Option<Vec<crate::protect::Pattern>>,
    pub(super) land: LandConfig,
    pub(super) forge: ForgeKind,
}

/// Every repository, then the dependency graph they make (refused when it has a cycle).
pub(super) fn validate_repos(
    c: &mut Check,
    root: &Path,
    resolve: Resolve,
    raw: Option<Spanned<RepoEntries>>,
    org: Inherited,
) -> (Vec<Repo>, RepoGraph) {
    let mut repos: Vec<Repo> = Vec::new();
    // Left out or wrong-typed: reported by `shape`, and nothing more to check here.
    let entries = match raw {
        None => Vec::new(),
        Some(repos) => {
            if repos.value.0.is_empty() {
                c.err(pos(&repos), "repos: at least one repository is required");
            }
            repos.value.0
        }
    };
    let first_seen = names(c, &entries);
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
        let deps = deps(c, &name, &spec.deps, &first_seen, &mut dep_positions);
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
        let (raw_jobs, own_protected, raw_env) = match spec.ci {
            Some(ci) => (ci.jobs, ci.protected_paths, ci.env),
            None => (Vec::new(), None, Default::default()),
        };
        let env = super::ci_env::validate(c, &format!("repos.{}.ci.env", name.value), raw_env);
        let jobs = validate_jobs(c, &name.value, raw_jobs, &env);
        // The repository's own list, else the organisation's, else the defaults: the
        // workflow directories and the scripts its jobs run.
        let protected = match &own_protected {
            Some(own) => {
                protected_paths(c, &format!("repos.{}.ci.protected_paths", name.value), own)
            }
            None => org
                .protected_paths
                .clone()
                .unwrap_or_else(|| crate::protect::defaults(jobs.iter().map(|j| j.run.as_str()))),
        };
        let land = match &spec.land {
            Some(own) => validate_land(
                c,
                &format!("repos.{}.land", name.value),
                own,
                org.land,
                org.forge,
            ),
            None => org.land,
        };
        let model = model_name(c, &format!("repos.{}.model", name.value), &spec.model);
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
    // Every cycle at once (issue 37: one per run took as many edits and reruns): each found is
    // reported at its first edge, and that edge is set aside to look for the next.
    let mut deps: Vec<(String, Vec<String>)> = repos
        .iter()
        .map(|r| (r.name.clone(), r.deps.clone()))
        .collect();
    let mut cycle = graph.find_cycle();
    while let Some(found) = cycle {
        let at = dep_positions
            .get(&(found[0].clone(), found[1].clone()))
            .copied()
            .flatten();
        c.err(at, format!("dependency cycle: {}", found.join(" -> ")));
        let Some((_, from)) = deps.iter_mut().find(|(name, _)| *name == found[0]) else {
            break;
        };
        from.retain(|d| *d != found[1]);
        cycle = RepoGraph::new(deps.iter().cloned()).find_cycle();
    }

    (repos, graph)
}

/// Each repository's name: allowed, a valid ref component, short enough, given once. The
/// answer is where each name was first given.
fn names(
    c: &mut Check,
    entries: &[(Spanned<String>, Spanned<crate::config::raw::RawRepo>)],
) -> BTreeMap<String, Option<Pos>> {
    let mut first_seen: BTreeMap<String, Option<Pos>> = BTreeMap::new();
    for (name, _) in entries {
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
    first_seen
}

/// A repository's `deps:`, each a known repository other than itself; where each
/// dependency was given goes into `dep_positions` (a cycle is reported at its first edge).
fn deps(
    c: &mut Check,
    name: &Spanned<String>,
    raw: &[Spanned<String>],
    first_seen: &BTreeMap<String, Option<Pos>>,
    dep_positions: &mut BTreeMap<(String, String), Option<Pos>>,
) -> Vec<String> {
    let mut deps = Vec::new();
    let mut seen_dep = BTreeSet::new();
    for d in raw {
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
    deps
}

fn validate_jobs(
    c: &mut Check,
    repo: &str,
    raw: Vec<Spanned<RawJob>>,
    repo_env: &[(String, String)],
) -> Vec<JobSpec> {
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
        let own_env = super::ci_env::validate(c, &format!("job {shown} in {repo}: env"), j.env);
        // Without a name or a command there is no job (already reported): the file is
        // refused, and only the checks above were wanted from it.
        if let (Some(name), Some(run)) = (j.name, j.run) {
            jobs.push(JobSpec {
                name: name.value,
                run,
                needs: j.needs.into_iter().map(|n| n.value).collect(),
                timeout,
                env: super::ci_env::overlay(repo_env, &own_env),
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
