//! `orch wave plan`: the schedule in simulated time, with each task's estimate taken from its
//! own `estimate`, else the history of DONE workers on its repository, else a default.

use super::*;

/// A task without an estimate and no DONE history on its repository.
pub const DEFAULT_ESTIMATE: Duration = Duration::from_secs(30 * 60);

/// Each repository's median time from spawn to DONE, from the database.
pub fn history(store: &mut Store) -> Result<HashMap<String, Duration>> {
    let rows = store.read(wv::done_durations)?;
    let mut by: HashMap<String, Vec<i64>> = HashMap::new();
    for (repo, ms) in rows {
        by.entry(repo).or_default().push(ms);
    }
    Ok(by
        .into_iter()
        .map(|(repo, mut v)| {
            v.sort_unstable();
            (repo, Duration::from_millis(v[v.len() / 2] as u64))
        })
        .collect())
}

/// Estimates in ms, task order, and whether each came from the file.
pub fn estimates(
    tasks: &[TaskDef],
    history: &HashMap<String, Duration>,
) -> Vec<(u64, &'static str)> {
    tasks
        .iter()
        .map(|t| match (t.estimate, history.get(&t.repo)) {
            (Some(e), _) => (e.as_millis() as u64, "file"),
            (None, Some(h)) => (h.as_millis() as u64, "history"),
            (None, None) => (DEFAULT_ESTIMATE.as_millis() as u64, "default"),
        })
        .collect()
}

#[derive(Debug, Clone, Serialize)]
pub struct PlanReport {
    pub wave: String,
    pub max_parallel: usize,
    pub tasks: Vec<TaskDef>,
    pub estimates_ms: Vec<u64>,
    pub estimate_sources: Vec<&'static str>,
    pub plan: Plan,
}

pub fn plan(l: &Loaded, wave: &Wave) -> Result<PlanReport> {
    // A plan only reads: where nothing ran yet there is no history, and no state is created.
    let hist = match l.existing_store()? {
        Some(mut store) => history(&mut store)?,
        None => HashMap::new(),
    };
    let est = estimates(&wave.tasks, &hist);
    let dag = Dag::build(&wave.tasks, &l.config.graph)
        .map_err(|_| Error::Refused("the wave's waits form a cycle".into()))?;
    let ms: Vec<u64> = est.iter().map(|e| e.0).collect();
    let plan = crate::wave::plan::plan(&dag, &l.config.graph, &ms, l.config.worker.max_parallel);
    Ok(PlanReport {
        wave: wave.name.clone(),
        max_parallel: l.config.worker.max_parallel,
        tasks: wave.tasks.clone(),
        estimates_ms: ms,
        estimate_sources: est.into_iter().map(|e| e.1).collect(),
        plan,
    })
}
