//! The helpers of the integration test crate (`tests/integration/main.rs` declares this
//! module once): the temp organisation harness with the polling, process and git helpers
//! (`org.rs`, which `benches/supervisors.rs` also includes), and the fake Forgejo
//! (`fake_forgejo.rs`, which `benches/resume.rs` also includes).
//!
//! Every `orch::` library path the helpers need is named in these files, not in the tests.
#![allow(dead_code)]

pub mod fake_forgejo;
pub mod fake_model;
pub mod fake_openai;
mod org;

pub use org::*;
use std::path::{Path, PathBuf};

/// The text of the shipped contract.
pub const CONTRACT_TEXT: &str = include_str!("../../contracts/worker-completion.yaml");

/// Every regular file below `dir` (symbolic links are not followed).
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                stack.push(e.path());
            } else if ft.is_file() {
                found.push(e.path());
            }
        }
    }
    found
}
