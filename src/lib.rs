//! orch: a dependency-aware orchestrator for coding workers across many git repositories.
//!
//! See ARCHITECTURE.md for the code map and the invariants.

pub mod account;
pub mod alerts;
pub mod app;
pub mod branch_protection;
pub mod checkpoint;
pub mod ci;
pub mod cli;
pub mod clone_config;
pub mod config;
pub mod contain;
pub mod contract;
pub mod diag;
pub mod duration;
pub mod fault;
#[cfg(test)]
mod floors;
pub mod forge;
pub mod gitops;
pub mod graph;
pub mod guard;
pub mod lock;
pub mod manifest;
pub mod milestone;
pub mod node;
pub mod operator;
pub mod pidns;
pub mod process;
pub mod prompt;
pub mod protect;
pub mod report_wire;
pub mod sandbox;
pub mod secret;
pub mod serve;
pub mod sha;
pub mod store;
pub mod text;
pub mod token;
pub mod upstreams;
pub mod wake;
pub mod wave;
pub mod yaml;
