//! What a worker's agent has spent: the task's total before this run (from the database)
//! plus this run's figures, and the budget check.

use crate::app::supervisor::input::RunUsage;
use crate::config::WorkerConfig;
#[cfg(test)]
use crate::store::usage::Tokens;
use crate::store::usage::Usage;

#[derive(Debug, Clone, Default)]
pub struct Spend {
    /// The row as it was when this run started (totals of the earlier runs).
    pub before: Usage,
    /// This run's figures so far.
    pub run: RunUsage,
    /// Changed since last written.
    pub dirty: bool,
    /// Budget already found exceeded (said once).
    pub over: bool,
}

impl Spend {
    pub fn new(before: Usage) -> Spend {
        Spend {
            before,
            ..Spend::default()
        }
    }

    /// This run's figures, from what the agent reported (a thread's cumulative figures less
    /// what the thread had counted before this run).
    pub fn update(&mut self, mut u: RunUsage) {
        if u.thread_cumulative {
            // Exact on the total (what budgets count); the earlier share comes off `input`.
            let earlier = self.before.thread_tokens.unwrap_or(0);
            let cut = earlier.min(u.tokens.input);
            u.tokens.input -= cut;
            u.tokens.cache_read -= (earlier - cut).min(u.tokens.cache_read);
        }
        if u != self.run {
            self.run = u;
            self.dirty = true;
        }
    }

    /// The row to write: the totals across every run of the task.
    pub fn total(&self) -> Usage {
        let mut u = self.before.clone();
        u.cost_usd += self.run.cost_usd;
        u.tokens = u.tokens.plus(&self.run.tokens);
        if self.run != RunUsage::default() {
            u.invocations += 1;
        }
        if self.run.thread_cumulative {
            u.thread_tokens =
                Some(self.before.thread_tokens.unwrap_or(0) + self.run.tokens.total());
        }
        u
    }

    /// Why the task is over its budget, if it is (said once).
    pub fn over_budget(&mut self, w: &WorkerConfig) -> Option<String> {
        if self.over {
            return None;
        }
        let t = self.total();
        let why = match (w.max_cost_usd, w.max_tokens) {
            (Some(max), _) if t.cost_usd >= max => Some(format!(
                "budget exceeded: ${:.4} spent, worker.max_cost_usd is ${max}",
                t.cost_usd
            )),
            (_, Some(max)) if t.tokens.total() >= max => Some(format!(
                "budget exceeded: {} tokens used, worker.max_tokens is {max}",
                t.tokens.total()
            )),
            _ => None,
        };
        self.over = why.is_some();
        why
    }
}

/// "$0.0151, 12.3k tokens (2 runs)" — how views print a worker's spending.
pub fn describe(u: &Usage) -> String {
    format!(
        "${:.4}, {} tokens ({} run{})",
        u.cost_usd,
        short_count(u.tokens.total()),
        u.invocations,
        if u.invocations == 1 { "" } else { "s" }
    )
}

fn short_count(n: u64) -> String {
    match n {
        0..1_000 => n.to_string(),
        1_000..1_000_000 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(input: u64, cost: f64, thread: bool) -> RunUsage {
        RunUsage {
            tokens: Tokens {
                input,
                output: 10,
                ..Tokens::default()
            },
            cost_usd: cost,
            last: true,
            thread_cumulative: thread,
        }
    }

    #[test]
    fn runs_add_up_and_budgets_stop_once() {
        let mut s = Spend::new(Usage::default());
        s.update(run(100, 0.01514, false));
        let first = s.total();
        assert_eq!((first.tokens.total(), first.invocations), (110, 1));
        let mut s = Spend::new(first);
        s.update(run(50, 0.00757, false));
        let t = s.total();
        assert!((t.cost_usd - 0.02271).abs() < 1e-9);
        assert_eq!((t.tokens.total(), t.invocations), (170, 2));
        let mut cfg = crate::config::Config::from_str(
            "worker: {max_cost_usd: 0.02}\nrepos: {a: {}}\n",
            std::path::Path::new("/tmp/r.yaml"),
        )
        .unwrap()
        .worker;
        assert!(s.over_budget(&cfg).unwrap().contains("$0.0227"));
        assert!(s.over_budget(&cfg).is_none());
        cfg.max_cost_usd = None;
        cfg.max_tokens = Some(1000);
        let mut s2 = Spend::new(t);
        assert!(s2.over_budget(&cfg).is_none());
        assert_eq!(describe(&s2.total()), "$0.0227, 170 tokens (2 runs)");
    }

    #[test]
    fn a_threads_cumulative_figures_count_once() {
        let mut s = Spend::new(Usage::default());
        s.update(run(1500, 0.0, true));
        let first = s.total();
        assert_eq!(first.thread_tokens, Some(1510));
        let mut s = Spend::new(first);
        // The resumed thread reports 3000 input tokens in all: 1500 of them new (+10 output).
        s.update(run(3000, 0.0, true));
        let t = s.total();
        assert_eq!(t.tokens.total(), 1510 + 1500);
    }
}
