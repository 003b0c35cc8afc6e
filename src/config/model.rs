//! Models per role (the contract's `model_assignment`): the model a worker's agent runs with
//! — `worker.model`, a repository's `model`, a wave task's `model` — and the stronger one
//! `worker.model_overrides` picks when one of the contract's `override_to_opus` conditions
//! holds for the task. Pure: the caller says which conditions hold (a wave computes its
//! critical path, `wave::model`).

use serde::{Deserialize, Serialize};

/// One of the contract's `override_to_opus` conditions, as `worker.model_overrides` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelCondition {
    /// The task is marked `security_sensitive: true` (wave file, `spawn --security-sensitive`).
    SecuritySensitive,
    /// The task is marked `complexity: high`.
    ComplexityHigh,
    /// The task waits (`after:`) for a task on another repository, or one on another
    /// repository waits for it: work coordinated across repositories.
    CrossRepo,
    /// The task is on its wave's critical path (the longest chain of waits, by estimates).
    CriticalPath,
}

impl ModelCondition {
    /// In the order they are tried: the first that holds and has an override decides.
    pub const ALL: [ModelCondition; 4] = [
        ModelCondition::SecuritySensitive,
        ModelCondition::ComplexityHigh,
        ModelCondition::CrossRepo,
        ModelCondition::CriticalPath,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ModelCondition::SecuritySensitive => "security_sensitive",
            ModelCondition::ComplexityHigh => "complexity_high",
            ModelCondition::CrossRepo => "cross_repo",
            ModelCondition::CriticalPath => "critical_path",
        }
    }
}

/// `worker.model_overrides`: the model each condition picks (none: that condition changes
/// nothing).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelOverrides {
    pub critical_path: Option<String>,
    pub complexity_high: Option<String>,
    pub security_sensitive: Option<String>,
    pub cross_repo: Option<String>,
}

impl ModelOverrides {
    pub fn get(&self, c: ModelCondition) -> Option<&str> {
        match c {
            ModelCondition::CriticalPath => self.critical_path.as_deref(),
            ModelCondition::ComplexityHigh => self.complexity_high.as_deref(),
            ModelCondition::SecuritySensitive => self.security_sensitive.as_deref(),
            ModelCondition::CrossRepo => self.cross_repo.as_deref(),
        }
    }

    pub fn is_empty(&self) -> bool {
        ModelCondition::ALL.iter().all(|c| self.get(*c).is_none())
    }
}

/// What is known of a task when its worker starts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TaskTraits<'a> {
    /// The task's own `model:` (wave file, `spawn --model`): wins over everything.
    pub model: Option<&'a str>,
    pub security_sensitive: bool,
    pub complexity_high: bool,
    pub cross_repo: bool,
    pub critical_path: bool,
}

impl TaskTraits<'_> {
    pub fn holds(&self, c: ModelCondition) -> bool {
        match c {
            ModelCondition::SecuritySensitive => self.security_sensitive,
            ModelCondition::ComplexityHigh => self.complexity_high,
            ModelCondition::CrossRepo => self.cross_repo,
            ModelCondition::CriticalPath => self.critical_path,
        }
    }
}

/// Why a worker runs the model it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelSource {
    /// The task's own `model:`.
    Task,
    /// `worker.model_overrides.<condition>`: the condition held.
    Override(ModelCondition),
    /// The repository's `model`.
    Repo,
    /// `worker.model`.
    Worker,
}

impl ModelSource {
    /// As recorded with the worker and shown: `task`, `override:critical_path`, `repo`, `worker`.
    pub fn as_string(self) -> String {
        match self {
            ModelSource::Task => "task".into(),
            ModelSource::Override(c) => format!("override:{}", c.as_str()),
            ModelSource::Repo => "repo".into(),
            ModelSource::Worker => "worker".into(),
        }
    }
}

impl ModelSource {
    /// What [`ModelSource::as_string`] wrote.
    pub fn parse(s: &str) -> Option<ModelSource> {
        match s {
            "task" => Some(ModelSource::Task),
            "repo" => Some(ModelSource::Repo),
            "worker" => Some(ModelSource::Worker),
            _ => {
                let c = s.strip_prefix("override:")?;
                ModelCondition::ALL
                    .into_iter()
                    .find(|x| x.as_str() == c)
                    .map(ModelSource::Override)
            }
        }
    }
}

/// The model chosen for a worker, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelChoice {
    pub model: String,
    pub source: ModelSource,
}

impl ModelChoice {
    /// The choice a worker was recorded with (`WorkerRecord::model`, `model_source`): a
    /// replacement on the same task runs the same model.
    pub fn recorded(model: Option<&str>, source: Option<&str>) -> Option<ModelChoice> {
        Some(ModelChoice {
            model: model?.to_string(),
            source: source
                .and_then(ModelSource::parse)
                .unwrap_or(ModelSource::Task),
        })
    }
}

/// The model a task's worker runs with: the task's own, else the override of the first
/// condition that holds (in [`ModelCondition::ALL`]'s order) and has one, else the
/// repository's, else `worker.model`; `None`: the agent's own default (no model argument).
pub fn choose(
    worker_model: Option<&str>,
    overrides: &ModelOverrides,
    repo_model: Option<&str>,
    task: &TaskTraits,
) -> Option<ModelChoice> {
    let pick = |model: &str, source| {
        Some(ModelChoice {
            model: model.to_string(),
            source,
        })
    };
    if let Some(m) = task.model {
        return pick(m, ModelSource::Task);
    }
    for c in ModelCondition::ALL {
        if task.holds(c)
            && let Some(m) = overrides.get(c)
        {
            return pick(m, ModelSource::Override(c));
        }
    }
    if let Some(m) = repo_model {
        return pick(m, ModelSource::Repo);
    }
    worker_model.and_then(|m| pick(m, ModelSource::Worker))
}

/// Why `name` cannot be a model's name (it becomes one argument of the agent's command line);
/// `None` when it can.
pub fn name_problem(name: &str) -> Option<&'static str> {
    if name.trim().is_empty() {
        Some("it is empty")
    } else if name.starts_with('-') {
        Some("it starts with \"-\" (it would read as an option)")
    } else if name.chars().any(|c| c.is_whitespace() || c.is_control()) {
        Some("it contains a space or a control character")
    } else if name.len() > 200 {
        Some("it is longer than 200 bytes")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn overrides() -> ModelOverrides {
        ModelOverrides {
            critical_path: Some("opus-cp".into()),
            complexity_high: Some("opus-hi".into()),
            security_sensitive: Some("opus-sec".into()),
            cross_repo: None,
        }
    }

    fn chosen(c: Option<ModelChoice>) -> Option<(String, String)> {
        c.map(|c| (c.model, c.source.as_string()))
    }

    #[test]
    fn the_base_model_is_the_repositorys_else_the_workers_else_none() {
        let none = ModelOverrides::default();
        let plain = TaskTraits::default();
        assert_eq!(choose(None, &none, None, &plain), None);
        assert_eq!(
            chosen(choose(Some("sonnet"), &none, None, &plain)),
            Some(("sonnet".into(), "worker".into()))
        );
        assert_eq!(
            chosen(choose(Some("sonnet"), &none, Some("haiku"), &plain)),
            Some(("haiku".into(), "repo".into()))
        );
    }

    #[test]
    fn a_condition_that_holds_picks_its_override_in_a_fixed_order() {
        let o = overrides();
        let cp = TaskTraits {
            critical_path: true,
            ..Default::default()
        };
        assert_eq!(
            chosen(choose(Some("sonnet"), &o, Some("haiku"), &cp)),
            Some(("opus-cp".into(), "override:critical_path".into()))
        );
        let all = TaskTraits {
            critical_path: true,
            complexity_high: true,
            security_sensitive: true,
            cross_repo: true,
            model: None,
        };
        assert_eq!(
            chosen(choose(Some("sonnet"), &o, None, &all)),
            Some(("opus-sec".into(), "override:security_sensitive".into()))
        );
        // A condition without an override changes nothing.
        let cross = TaskTraits {
            cross_repo: true,
            ..Default::default()
        };
        assert_eq!(
            chosen(choose(Some("sonnet"), &o, None, &cross)),
            Some(("sonnet".into(), "worker".into()))
        );
        // The task's own model wins over every condition.
        let own = TaskTraits {
            model: Some("mine"),
            ..all
        };
        assert_eq!(
            chosen(choose(Some("sonnet"), &o, None, &own)),
            Some(("mine".into(), "task".into()))
        );
    }

    #[test]
    fn a_recorded_source_reads_back() {
        for s in [
            ModelSource::Task,
            ModelSource::Repo,
            ModelSource::Worker,
            ModelSource::Override(ModelCondition::CrossRepo),
        ] {
            assert_eq!(ModelSource::parse(&s.as_string()), Some(s));
        }
        assert_eq!(ModelSource::parse("override:nope"), None);
    }

    #[test]
    fn model_names_are_one_argument() {
        assert_eq!(name_problem("claude-opus-4"), None);
        assert_eq!(name_problem("openai/gpt-4o"), None);
        assert!(name_problem("").is_some());
        assert!(name_problem("--dangerous").is_some());
        assert!(name_problem("a b").is_some());
    }
}
