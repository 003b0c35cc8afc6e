//! `orch wave plan | run | status | cancel | retry`.

use super::{Ctx, Failure, Outcome, operator_name};
use crate::app::Loaded;
use crate::app::wave::{self, TickReport};
use crate::operator::actions::{wave_cancel_view, wave_retry_view};
use crate::operator::view::human_ms as ms;
use crate::operator::view::print_json;
use crate::operator::view::wave::{PlanView, RunLineView, TickView, WaveStatusView};
use crate::text::escape as esc;
use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

#[derive(Debug, clap::Subcommand)]
pub enum WaveCommand {
    /// The schedule orch would run: table, Gantt chart, makespan against its lower bound, and
    /// the layer-by-layer schedule for comparison.
    Plan {
        file: std::path::PathBuf,
        /// Answer as one JSON object instead of text (its schema: docs/schema/).
        #[arg(long)]
        json: bool,
    },
    /// Run a wave: `--tick` once (for cron), or `--until-done` in the foreground.
    // One of the two, named together when neither is given.
    #[command(group(clap::ArgGroup::new("how").required(true).args(["tick", "until_done"])))]
    Run {
        file: std::path::PathBuf,
        /// Reconcile, start what may run now (detached), print, exit.
        #[arg(long)]
        tick: bool,
        /// Tick until every task is terminal; exit 0 only if all are DONE.
        #[arg(long)]
        until_done: bool,
        /// With --until-done: time between ticks.
        #[arg(long, value_parser = super::parse_duration, default_value = "2s")]
        interval: Duration,
        /// Answer as one JSON object instead of text (its schema: docs/schema/).
        #[arg(long)]
        json: bool,
    },
    /// Every task with its state, worker, start/end, estimate vs actual, and what it waits for.
    Status {
        /// A wave file, or the name of a wave already run.
        wave: String,
        /// Answer as one JSON object instead of text (its schema: docs/schema/).
        #[arg(long)]
        json: bool,
    },
    /// Give a FAILED, BLOCKED or CANCELLED task (or one whose change did not land) another go
    /// inside its wave: its lock is released, the next tick starts a new worker on it.
    Retry {
        /// A wave file, or the name of a wave already run.
        wave: String,
        /// The task's id in the wave.
        task: String,
        /// Who did it, for the audit trail [default: $USER].
        #[arg(long)]
        by: Option<String>,
        /// Answer as one JSON object instead of text (its schema: docs/schema/).
        #[arg(long)]
        json: bool,
    },
    /// Stop a wave: nothing more starts; its running workers are cancelled.
    Cancel {
        /// A wave file, or the name of a wave already run.
        wave: String,
        /// Who did it, for the audit trail [default: $USER].
        #[arg(long)]
        by: Option<String>,
        /// Answer as one JSON object instead of text (its schema: docs/schema/).
        #[arg(long)]
        json: bool,
    },
}

pub fn run(ctx: &Ctx, cmd: WaveCommand) -> Outcome {
    match cmd {
        WaveCommand::Plan { file, json } => plan(ctx, &file, json),
        WaveCommand::Run {
            file,
            tick,
            until_done,
            interval,
            json,
        } => {
            let l = ctx.load()?;
            let w = wave::load(&l, &file)?;
            if tick && !until_done {
                let r = wave::tick(&l, &w)?;
                print_tick(&r, json);
                Ok(0)
            } else {
                run_until_done(&l, &file, interval, json)
            }
        }
        WaveCommand::Status { wave: which, json } => status(ctx, &which, json),
        WaveCommand::Retry {
            wave: which,
            task,
            by,
            json,
        } => {
            let l = ctx.load()?;
            let name = resolve(&l, &which)?;
            let view = wave_retry_view(&l, &name, &task, &operator_name(by))?;
            if json {
                print_json(&view);
            } else {
                print!("{}", view.human());
            }
            Ok(0)
        }
        WaveCommand::Cancel {
            wave: which,
            by,
            json,
        } => {
            let l = ctx.load()?;
            let name = resolve(&l, &which)?;
            let view = wave_cancel_view(&l, &name, operator_name(by))?;
            if json {
                print_json(&view);
            } else {
                print!("{}", view.human());
            }
            Ok(0)
        }
    }
}

/// A wave file's name, or the argument as a recorded wave's name.
fn resolve(l: &Loaded, which: &str) -> Result<String, Failure> {
    if Path::new(which).is_file() {
        return Ok(wave::load(l, Path::new(which))?.name);
    }
    if wave::names(l)?.iter().any(|n| n == which) {
        return Ok(which.to_string());
    }
    Err(Failure::bad_input(format!(
        "{which}: neither a wave file nor the name of a wave orch has run"
    )))
}

fn plan(ctx: &Ctx, file: &Path, json_out: bool) -> Outcome {
    let l = ctx.load()?;
    let w = wave::load(&l, file)?;
    let r = wave::plan(&l, &w)?;
    let p = &r.plan;
    let view = PlanView::of(&r);
    let improvement = view.improvement_over_phase_plan;
    if json_out {
        print_json(&view);
        return Ok(0);
    }
    println!(
        "wave {}: {}, {} slots (worker.max_parallel)\n",
        esc(&r.wave),
        super::plural(r.tasks.len(), "task", "tasks"),
        r.max_parallel
    );
    print!("{}", view.human_table());
    println!();
    let labels: Vec<String> = r.tasks.iter().map(|t| esc(&t.id).into_owned()).collect();
    print!("{}", crate::wave::plan::gantt(p, &labels, 60));
    println!();
    let b = &p.bound;
    println!("makespan      {}", ms(p.makespan_ms));
    println!(
        "lower bound   {}: no plan is shorter than its longest task ({}), its critical path ({}) or its total work ({}) shared by {} workers at once",
        ms(b.lb_ms),
        ms(b.longest_task_ms),
        ms(b.critical_path_ms),
        ms(b.total_work_ms),
        // The slots, or the graph's width where fewer tasks can ever run at once.
        b.slots.min(b.width),
    );
    println!("ratio         {:.3}", p.ratio);
    println!(
        "layer by layer {} ({} layers of the graph, each waiting for the previous one): this plan is {:.0}% shorter",
        ms(p.phase_makespan_ms),
        p.phases,
        improvement * 100.0
    );
    Ok(0)
}

fn print_tick(r: &TickReport, json_out: bool) {
    let view = TickView::of(r);
    if json_out {
        print_json(&view);
    } else {
        print!("{}", view.human());
    }
}

fn run_until_done(l: &Loaded, file: &Path, interval: Duration, json_out: bool) -> Outcome {
    let t0 = Instant::now();
    let mut last: HashMap<String, String> = HashMap::new();
    // Rung when a worker changes state or a lock goes: the next tick comes then, not a whole
    // interval later (the interval stays the fallback).
    let waiter = crate::wake::Waiter::install(&l.state_dir);
    if let Some(w) = &waiter
        && let Ok(store) = crate::store::Store::open(&l.state_dir)
    {
        w.hear_releases(store);
    }
    loop {
        // Re-read each time, as cron would: an edited file joins (or is refused) at once.
        let w = wave::load(l, file)?;
        let r = wave::tick(l, &w)?;
        let Some(v) = r.view.clone() else {
            crate::wake::wait_or_sleep(waiter.as_ref(), interval);
            continue;
        };
        for t in &v.tasks {
            let prev = last.insert(t.id.clone(), t.state.clone());
            if prev.as_deref() == Some(t.state.as_str()) || (prev.is_none() && t.state == "PENDING")
            {
                continue;
            }
            let line = RunLineView {
                elapsed_s: t0.elapsed().as_millis() as f64 / 1000.0,
                task: t.id.clone(),
                repo: t.repo.clone(),
                state: t.state.clone(),
                worker: t.worker.clone(),
            };
            if json_out {
                print_json(&line);
            } else {
                print!("{}", line.human());
            }
        }
        for a in &r.alerts {
            if !json_out {
                println!("alert: {}", esc(a));
            }
        }
        if v.finished {
            let view = WaveStatusView::of(&v);
            if json_out {
                print_json(&view);
            } else {
                print!("{}", view.human());
            }
            return Ok(if v.all_done { 0 } else { 1 });
        }
        crate::wake::wait_or_sleep(waiter.as_ref(), interval);
    }
}

fn status(ctx: &Ctx, which: &str, json_out: bool) -> Outcome {
    let l = ctx.load()?;
    let name = resolve(&l, which)?;
    let Some(v) = wave::status(&l, &name)? else {
        return Err(Failure::no(format!(
            "wave {name} has not been run yet (orch wave run {which} --tick)"
        )));
    };
    let view = WaveStatusView::of(&v);
    if json_out {
        print_json(&view);
    } else {
        print!("{}", view.human());
    }
    Ok(0)
}
