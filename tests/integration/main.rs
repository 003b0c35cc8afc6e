//! The integration tests: one test crate (one binary to build and link), one module per
//! area, one set of helpers (`tests/support/`). The scripted workers are `tests/workers/*.sh`.
//!
//! Run one area: `cargo test --test integration supervise::` (module paths prefix the test
//! names). The long chaos run:
//! `ORCH_CHAOS_KILLS=60 cargo test --release --test integration chaos:: -- --nocapture`.

#[path = "../support/mod.rs"]
mod support;

mod abandoned_runs;
mod accounts;
mod agent_health;
mod agents;
mod agents_aider;
mod agents_codex;
mod alerts;
mod board;
mod board_trust;
mod boundary;
mod branch_protection;
mod cascade;
mod chaos;
mod check_bad_input;
mod checkpoint_trust;
mod ci_cli;
mod ci_containment;
mod ci_stuck;
mod config_trust;
mod containment;
mod crash_after_push;
mod demo;
mod escalation;
mod escapers;
mod fatal;
mod first_run;
mod forge_unreachable;
mod forgejo_contract;
mod gc;
mod graph_output;
mod history;
mod init_manifests;
mod json_views;
mod landing;
mod local_forge;
mod lock_race;
mod logs;
mod lying_workers;
mod models;
mod nodes;
mod operator_day;
mod output_escape;
mod outside_reader;
mod pg_store;
mod process_group;
mod protected_paths;
mod rebuild;
mod release_at_work;
mod respawn;
mod resume;
mod sandbox;
mod spawn_race;
mod store_errors;
mod superseded;
mod supervise;
mod supervise_forgejo;
mod upstreams;
mod wave;
mod write_queue;
