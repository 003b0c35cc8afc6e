//! orch: a dependency-aware orchestrator for coding workers across many git repositories.
//!
//! See ARCHITECTURE.md for the code map and the invariants.

pub mod config;
pub mod diag;
pub mod duration;
pub mod forge;
pub mod graph;
pub mod lock;
pub mod process;
pub mod secret;
pub mod store;
pub mod yaml;
