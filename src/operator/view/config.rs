//! Views of the configuration: `check` and `graph --format json`.

use super::View;
use schemars::JsonSchema;
use serde::Serialize;

/// One problem `check` found: where (file, line, column when known) and what.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Problem {
    pub file: Option<String>,
    pub line: Option<u64>,
    pub column: Option<u64>,
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.file, self.line, self.column) {
            (Some(file), Some(l), Some(c)) => write!(f, "{file}:{l}:{c}: {}", self.message),
            (Some(file), _, _) => write!(f, "{file}: {}", self.message),
            _ => f.write_str(&self.message),
        }
    }
}

/// `orch check --json`.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct CheckView {
    pub ok: bool,
    pub config: String,
    pub contract: Option<String>,
    /// The contract's version, when it loaded.
    pub contract_version: Option<String>,
    /// How many milestones the contract defines, when it loaded.
    pub milestones: Option<usize>,
    pub problems: Vec<Problem>,
    pub warnings: Vec<String>,
    pub repositories: Option<usize>,
    pub layers: Option<usize>,
    /// The shared database of `store:` (absent for the state directory's SQLite file).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store: Option<StoreCheck>,
}

/// What `check` found at a `store:` database: reached, and its schema's version.
#[derive(Debug, Clone, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct StoreCheck {
    pub backend: String,
    /// The URL without its password, or the variable that holds it.
    pub location: String,
    /// The schema version the database is at (0: empty; migrated at first use).
    pub schema_version: i64,
    /// The schema version this orch writes.
    pub schema_latest: i64,
}

impl View for CheckView {
    const NAME: &'static str = "check";
}

impl CheckView {
    /// The line for a check that passed.
    pub fn human_ok(&self) -> String {
        let plural = super::plural;
        format!(
            "ok: {} ({}, {}), {} (contract {}, {} milestones)\n",
            self.config,
            plural(self.repositories.unwrap_or(0), "repository", "repositories"),
            plural(self.layers.unwrap_or(0), "layer", "layers"),
            self.contract.as_deref().unwrap_or("-"),
            self.contract_version.as_deref().unwrap_or("-"),
            self.milestones.unwrap_or(0)
        )
    }
}

/// One repository of the graph.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct GraphRepo {
    pub name: String,
    /// What it depends on directly.
    pub deps: Vec<String>,
    /// What depends on it directly.
    pub dependents: Vec<String>,
    /// Everything a lock on it covers besides itself.
    pub chain: Vec<String>,
}

/// `orch graph --format json`.
#[derive(Debug, Serialize, JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct GraphView {
    pub repos: Vec<GraphRepo>,
    /// Layer 0 first: repositories that depend on nothing.
    pub layers: Vec<Vec<String>>,
}

impl View for GraphView {
    const NAME: &'static str = "graph";
}

impl GraphView {
    /// The layers, then each repository's dependencies and dependents.
    pub fn human(&self) -> String {
        let mut out = String::new();
        for (i, layer) in self.layers.iter().enumerate() {
            out.push_str(&format!("layer {i}: {}\n", layer.join(", ")));
        }
        out.push('\n');
        let width = self.repos.iter().map(|r| r.name.len()).max().unwrap_or(4);
        let list = |v: &[String]| {
            if v.is_empty() {
                "-".to_string()
            } else {
                v.join(", ")
            }
        };
        for r in &self.repos {
            out.push_str(&format!(
                "{:width$}  depends on: {}\n",
                r.name,
                list(&r.deps)
            ));
            out.push_str(&format!(
                "{:width$}  needed by:  {}\n",
                "",
                list(&r.dependents)
            ));
        }
        out
    }

    pub fn of(g: &crate::graph::RepoGraph) -> Self {
        GraphView {
            repos: g
                .names()
                .iter()
                .map(|n| GraphRepo {
                    name: n.clone(),
                    deps: g.deps(n),
                    dependents: g.dependents(n),
                    chain: g.chain(n),
                })
                .collect(),
            layers: g.layers(),
        }
    }
}
