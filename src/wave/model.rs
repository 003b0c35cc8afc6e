//! What a wave knows of each task for the model its worker runs with (`config::model`): the
//! task's own `model`, `complexity` and `security_sensitive`, whether it is on the wave's
//! critical path (computed from the waits and the estimates), and whether it coordinates
//! across repositories (an `after:` between tasks on different repositories, either way).

use super::dag::Dag;
use super::{Complexity, TaskDef};
use crate::config::model::TaskTraits;

/// Each task's traits, in task order. `est`: the estimates the scheduler uses (ms).
pub fn traits<'a>(tasks: &'a [TaskDef], dag: &Dag, est: &[u64]) -> Vec<TaskTraits<'a>> {
    let critical = dag.on_critical_path(est);
    let mut cross = vec![false; tasks.len()];
    for (i, t) in tasks.iter().enumerate() {
        for a in &t.after {
            if let Some(j) = tasks.iter().position(|x| &x.id == a)
                && tasks[j].repo != t.repo
            {
                cross[i] = true;
                cross[j] = true;
            }
        }
    }
    tasks
        .iter()
        .enumerate()
        .map(|(i, t)| TaskTraits {
            model: t.model.as_deref(),
            security_sensitive: t.security_sensitive,
            complexity_high: t.complexity == Some(Complexity::High),
            cross_repo: cross[i],
            critical_path: critical[i],
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::model::{ModelOverrides, choose};
    use crate::graph::RepoGraph;
    use crate::wave::Wave;
    use std::path::Path;

    fn graph() -> RepoGraph {
        let r = |n: &str, d: &[&str]| {
            (
                n.to_string(),
                d.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            )
        };
        RepoGraph::new([
            r("core", &[]),
            r("vm", &["core"]),
            r("os", &["vm"]),
            r("sdk", &[]),
            r("docs", &[]),
        ])
    }

    /// core → vm → os is the longest chain (6m); sdk (1m) and docs (2m, after sdk) are not
    /// on it; docs waits for sdk across repositories.
    const WAVE: &str = r#"name: w
tasks:
  - {id: core-1, repo: core, task: a, estimate: 2m}
  - {id: vm-1, repo: vm, task: b, estimate: 2m}
  - {id: os-1, repo: os, task: c, estimate: 2m}
  - {id: sdk-1, repo: sdk, task: d, estimate: 1m, complexity: high}
  - {id: docs-1, repo: docs, task: e, estimate: 2m, after: [sdk-1], security_sensitive: true}
  - {id: docs-2, repo: docs, task: f, estimate: 1m, model: own-model}
"#;

    #[test]
    fn the_critical_path_and_cross_repository_waits_are_computed() {
        let g = graph();
        let wave = Wave::parse(WAVE, Path::new("w.yaml"), &g).unwrap();
        let dag = Dag::build(&wave.tasks, &g).unwrap();
        let est: Vec<u64> = wave
            .tasks
            .iter()
            .map(|t| t.estimate.unwrap().as_millis() as u64)
            .collect();
        let t = traits(&wave.tasks, &dag, &est);
        let on: Vec<bool> = t.iter().map(|x| x.critical_path).collect();
        assert_eq!(on, [true, true, true, false, false, false]);
        let cross: Vec<bool> = t.iter().map(|x| x.cross_repo).collect();
        assert_eq!(cross, [false, false, false, true, true, false]);
        assert!(t[3].complexity_high && !t[0].complexity_high);
        assert!(t[4].security_sensitive);
        assert_eq!(t[5].model, Some("own-model"));

        // Task + wave + config → model.
        let o = ModelOverrides {
            critical_path: Some("opus".into()),
            complexity_high: Some("opus-hi".into()),
            security_sensitive: Some("opus-sec".into()),
            cross_repo: Some("opus-x".into()),
        };
        let models: Vec<String> = t
            .iter()
            .map(|x| choose(Some("sonnet"), &o, None, x).unwrap().model)
            .collect();
        assert_eq!(
            models,
            ["opus", "opus", "opus", "opus-hi", "opus-sec", "own-model"]
        );
    }

    #[test]
    fn equally_long_chains_are_all_critical() {
        let g = graph();
        let text = "name: w\ntasks:\n  - {id: a, repo: sdk, task: x, estimate: 3m}\n  - {id: b, repo: docs, task: y, estimate: 3m}\n  - {id: c, repo: core, task: z, estimate: 1m}\n";
        let wave = Wave::parse(text, Path::new("w.yaml"), &g).unwrap();
        let dag = Dag::build(&wave.tasks, &g).unwrap();
        let on = dag.on_critical_path(&[180_000, 180_000, 60_000]);
        assert_eq!(on, [true, true, false]);
    }
}
