//! Waves: a file of many tasks run by cron ticks, bottom-up, critical path first.
//!
//! Pure (floor 1): the wave file model and its validation (`mod.rs`, every problem with
//! file:line:col), the task graph (`dag.rs`: who waits for whom), the scheduler (`schedule.rs`:
//! state + locks → tasks to start, the one decision `plan` and `run` share) and the planner
//! (`plan.rs`: the schedule in simulated time, its lower bound, the seed's phase plan, the Gantt
//! chart) and each task's traits for its model (`model.rs`: on the critical path, across
//! repositories, complexity, security).

pub mod dag;
pub mod model;
pub mod plan;
pub mod schedule;

use crate::diag::{Diagnostic, Diagnostics, NAME_RULE, valid_name};
use crate::graph::RepoGraph;
use crate::yaml::{Pos, from_yaml_str};
use serde::{Deserialize, Serialize};
use serde_saphyr::Spanned;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use dag::Dag;

/// One task of a wave, as the file says it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskDef {
    pub id: String,
    pub repo: String,
    pub task: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component: Option<String>,
    /// `None`: the planner estimates it (the repository's median DONE duration, else a default).
    #[serde(default, skip)]
    pub estimate: Option<Duration>,
    #[serde(default)]
    pub after: Vec<String>,
    /// `land:` for this task alone (merge, pull_request or none), over its repository's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub land: Option<crate::config::LandPolicy>,
    /// `model:` for this task alone, over every other choice (see `config::model`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// `complexity: high` (`low`, `medium` change nothing): `worker.model_overrides.complexity_high`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub complexity: Option<Complexity>,
    /// `security_sensitive: true`: `worker.model_overrides.security_sensitive`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub security_sensitive: bool,
    /// `files`, `requirements`, `scope`, `output_format`: what the task's worker is told
    /// beside the task (the contract's `add_task_specifics`).
    #[serde(default, skip_serializing_if = "TaskSpecifics::is_empty")]
    pub specifics: TaskSpecifics,
}

/// The contract's task specifics (`before_spawn_checklist.add_task_specifics`: "FILES TO
/// CREATE, TECHNICAL REQUIREMENTS"; `context_handoff`: output format, boundaries), from a wave
/// task's fields or `spawn`'s flags. They travel with the task's text (what the worker record
/// keeps and every prompt of the task shows), one line each.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskSpecifics {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requirements: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scope_in: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scope_out: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_format: Option<String>,
}

impl TaskSpecifics {
    pub fn is_empty(&self) -> bool {
        *self == TaskSpecifics::default()
    }

    /// `task` with the specifics under it, one line each (the task alone when there are none).
    pub fn with_task(&self, task: &str) -> String {
        let mut s = task.trim_end().to_string();
        let mut line = |label: &str, items: &[String], sep: &str| {
            if !items.is_empty() {
                s.push_str(&format!("\n{label}: {}", items.join(sep)));
            }
        };
        line("FILES", &self.files, ", ");
        line("REQUIREMENTS", &self.requirements, "; ");
        line("IN SCOPE", &self.scope_in, ", ");
        line("OUT OF SCOPE", &self.scope_out, ", ");
        if let Some(f) = &self.output_format {
            s.push_str(&format!("\nOUTPUT FORMAT: {f}"));
        }
        s
    }
}

/// A wave task's `complexity:` (the contract's `task_complexity`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Complexity {
    Low,
    Medium,
    High,
}

impl TaskDef {
    /// What a started task may not change: everything the worker was started with and what
    /// it waits for (the estimate may change: it only steers the planner).
    pub fn definition(&self) -> String {
        serde_json::to_string(self).expect("a task definition serialises")
    }
}

/// A validated wave file.
#[derive(Debug, Clone)]
pub struct Wave {
    pub name: String,
    pub file: PathBuf,
    /// In file order.
    pub tasks: Vec<TaskDef>,
    /// Where each task starts in the file (same order as `tasks`).
    pub positions: Vec<Option<Pos>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawWave {
    name: Spanned<String>,
    tasks: Spanned<Vec<Spanned<RawTask>>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTask {
    id: Spanned<String>,
    repo: Spanned<String>,
    task: Spanned<String>,
    #[serde(default)]
    plan: Option<Spanned<String>>,
    #[serde(default)]
    component: Option<Spanned<String>>,
    #[serde(default)]
    estimate: Option<Spanned<String>>,
    #[serde(default)]
    after: Vec<Spanned<String>>,
    #[serde(default)]
    land: Option<Spanned<String>>,
    #[serde(default)]
    model: Option<Spanned<String>>,
    #[serde(default)]
    complexity: Option<Spanned<String>>,
    #[serde(default)]
    security_sensitive: Option<bool>,
    #[serde(default)]
    files: Vec<Spanned<String>>,
    #[serde(default)]
    requirements: Vec<Spanned<String>>,
    #[serde(default)]
    scope: Option<RawScope>,
    #[serde(default)]
    output_format: Option<Spanned<String>>,
}

/// A task's `scope: {in: [...], out: [...]}`: what its worker may touch and what it must not.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScope {
    #[serde(default, rename = "in")]
    inside: Vec<Spanned<String>>,
    #[serde(default, rename = "out")]
    outside: Vec<Spanned<String>>,
}

fn pos<T>(s: &Spanned<T>) -> Option<Pos> {
    Pos::of(&s.referenced)
}

/// Why a wave file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum WaveError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}")]
    Invalid(Diagnostics),
}

impl Wave {
    /// Reads and validates a wave file against the organisation's graph.
    pub fn load(path: &Path, graph: &RepoGraph) -> Result<Wave, WaveError> {
        let file = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        let bytes = std::fs::read(&file).map_err(|source| WaveError::Read {
            path: file.clone(),
            source,
        })?;
        let text = crate::text::utf8(&bytes).map_err(|bad| {
            let pos = Pos {
                line: bad.line,
                column: bad.column,
            };
            WaveError::Invalid(Diagnostics(vec![Diagnostic::new(
                &file,
                Some(pos),
                bad.describe(&bytes),
            )]))
        })?;
        Wave::parse(text, &file, graph).map_err(WaveError::Invalid)
    }

    /// Parses and validates `text` as if read from `file`: every problem, with its position.
    pub fn parse(text: &str, file: &Path, graph: &RepoGraph) -> Result<Wave, Diagnostics> {
        let raw: RawWave = from_yaml_str(text)
            .map_err(|e| Diagnostics(vec![Diagnostic::new(file, e.pos, e.message)]))?;
        let mut diags = Vec::new();
        let mut err = |p: Option<Pos>, m: String| diags.push(Diagnostic::new(file, p, m));
        if !valid_name(&raw.name.value) {
            err(
                pos(&raw.name),
                format!(
                    "wave name {:?} must match {NAME_RULE}",
                    crate::text::escape(&raw.name.value)
                ),
            );
        }
        if raw.tasks.value.is_empty() {
            err(pos(&raw.tasks), "a wave needs at least one task".into());
        }
        let mut tasks = Vec::new();
        let mut positions = Vec::new();
        let mut seen: HashMap<String, Option<Pos>> = HashMap::new();
        let mut after_pos: Vec<Vec<Option<Pos>>> = Vec::new();
        for t in &raw.tasks.value {
            let r = &t.value;
            let id = r.id.value.clone();
            if !valid_name(&id) {
                err(
                    pos(&r.id),
                    format!(
                        "task id {:?} must match {NAME_RULE}",
                        crate::text::escape(&id)
                    ),
                );
            } else if let Some(first) = seen.get(&id) {
                let at = first
                    .map(|p| format!(" (first at line {}:{})", p.line, p.column))
                    .unwrap_or_default();
                err(pos(&r.id), format!("duplicate task id {id}{at}"));
            } else {
                seen.insert(id.clone(), pos(&r.id));
            }
            if !graph.contains(&r.repo.value) {
                err(
                    pos(&r.repo),
                    format!(
                        "task {id}: unknown repository {:?} (known: {})",
                        crate::text::escape(&r.repo.value),
                        graph.names().join(", ")
                    ),
                );
            }
            if r.task.value.trim().is_empty() {
                err(
                    pos(&r.task),
                    format!("task {id}: `task` must describe the work"),
                );
            }
            if let Some(why) = crate::text::task_too_long(&r.task.value) {
                err(pos(&r.task), format!("task {id}: {why}"));
            }
            let estimate = match &r.estimate {
                None => None,
                Some(e) => match crate::duration::parse(&e.value) {
                    Ok(d) => Some(d),
                    Err(m) => {
                        err(pos(e), format!("task {id}: estimate: {m}"));
                        None
                    }
                },
            };
            let land = match &r.land {
                None => None,
                Some(l) => match l.value.as_str() {
                    "merge" => Some(crate::config::LandPolicy::Merge),
                    "none" => Some(crate::config::LandPolicy::None),
                    "pull_request" => Some(crate::config::LandPolicy::PullRequest),
                    "direct" => Some(crate::config::LandPolicy::Direct),
                    other => {
                        err(
                            pos(l),
                            format!(
                                "task {id}: land must be merge, pull_request, direct or none, got {:?}",
                                crate::text::escape(other)
                            ),
                        );
                        None
                    }
                },
            };
            let model =
                r.model
                    .as_ref()
                    .and_then(|m| match crate::config::model::name_problem(&m.value) {
                        Some(why) => {
                            err(
                                pos(m),
                                format!(
                                    "task {id}: model {:?} is not a model name: {why}",
                                    crate::text::escape(&m.value)
                                ),
                            );
                            None
                        }
                        None => Some(m.value.trim().to_string()),
                    });
            let complexity = r.complexity.as_ref().and_then(|c| match c.value.as_str() {
                "low" => Some(Complexity::Low),
                "medium" => Some(Complexity::Medium),
                "high" => Some(Complexity::High),
                other => {
                    err(
                        pos(c),
                        format!(
                            "task {id}: complexity must be low, medium or high, got {:?}",
                            crate::text::escape(other)
                        ),
                    );
                    None
                }
            });
            let non_empty = |s: &Option<Spanned<String>>| {
                s.as_ref()
                    .map(|s| s.value.clone())
                    .filter(|v| !v.trim().is_empty())
            };
            tasks.push(TaskDef {
                id,
                repo: r.repo.value.clone(),
                task: r.task.value.clone(),
                plan: non_empty(&r.plan),
                component: non_empty(&r.component),
                estimate,
                after: r.after.iter().map(|a| a.value.clone()).collect(),
                land,
                model,
                complexity,
                security_sensitive: r.security_sensitive.unwrap_or(false),
                specifics: {
                    let list = |v: &[Spanned<String>]| -> Vec<String> {
                        v.iter()
                            .map(|x| x.value.trim().to_string())
                            .filter(|x| !x.is_empty())
                            .collect()
                    };
                    TaskSpecifics {
                        files: list(&r.files),
                        requirements: list(&r.requirements),
                        scope_in: r
                            .scope
                            .as_ref()
                            .map(|x| list(&x.inside))
                            .unwrap_or_default(),
                        scope_out: r
                            .scope
                            .as_ref()
                            .map(|x| list(&x.outside))
                            .unwrap_or_default(),
                        output_format: non_empty(&r.output_format),
                    }
                },
            });
            positions.push(pos(&r.id));
            after_pos.push(r.after.iter().map(pos).collect());
        }
        for (t, ps) in tasks.iter().zip(&after_pos) {
            for (a, p) in t.after.iter().zip(ps) {
                if a == &t.id {
                    err(*p, format!("task {}: waits for itself in `after`", t.id));
                } else if !seen.contains_key(a) {
                    err(
                        *p,
                        format!(
                            "task {}: `after` names {:?}, which is not a task of this wave",
                            t.id,
                            crate::text::escape(a)
                        ),
                    );
                }
            }
        }
        if diags.is_empty()
            && let Err(cycle) = Dag::build(&tasks, graph)
        {
            let first = cycle[0];
            let names: Vec<&str> = cycle.iter().map(|&i| tasks[i].id.as_str()).collect();
            diags.push(Diagnostic::new(
                file,
                positions[first],
                format!(
                    "cycle through `after`: {} (with the repository graph's bottom-up order and file order on one repository)",
                    names.join(" waits for ")
                ),
            ));
        }
        if !diags.is_empty() {
            return Err(Diagnostics(diags));
        }
        Ok(Wave {
            name: raw.name.value,
            file: file.to_path_buf(),
            tasks,
            positions,
        })
    }

    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.tasks.iter().position(|t| t.id == id)
    }
}

#[cfg(test)]
mod tests;
