//! The operator API: what an operator asks of orch and what orch answers — the queries (status,
//! one worker, its log, the alerts, the nodes, the graph, the waves, the attention board), the
//! actions (cancel, respawn, release, hold, unhold, a wave's retry and cancel) and the typed
//! views they answer with (`view/`, whose JSON Schemas docs/schema/ publishes), with one
//! typed [`Error`].
//!
//! Two faces stand on it side by side and import nothing of each other: the command line
//! (`cli/`: arguments in, a view printed as text or `--json`, the error as an exit code) and
//! the board (`serve/`: HTTP in, the same view as JSON, the error as an HTTP status). So what
//! the board says is what the command says, built by the same function.

pub mod actions;
pub mod alerts;
pub mod board;
pub mod error;
pub mod graph;
pub mod holds;
pub mod logs;
pub mod nodes;
pub mod schemas;
pub mod view;
pub mod waves;
pub mod workers;

pub use error::{Error, Result};
