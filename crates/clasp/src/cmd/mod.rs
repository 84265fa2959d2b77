//! One module per subcommand.

pub mod admin_token;
pub mod bench;
pub mod bounds;
pub mod check;
pub mod config;
pub mod cut;
pub mod duration;
pub mod edge;
pub mod fault;
pub mod r#gen;
pub mod plan;
pub mod run;
pub mod security;
pub mod sim;
pub mod worker;

use anyhow::Result;
use clasp_core::Pipeline;
use std::path::Path;

/// Loads and validates a spec, turning its error into the command's error.
pub fn load_pipeline(path: &Path) -> Result<Pipeline> {
    clasp_core::spec::load(path).map_err(|e| anyhow::anyhow!("{e}"))
}
