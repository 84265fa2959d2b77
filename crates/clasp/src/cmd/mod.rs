//! One module per subcommand.

pub mod check;
pub mod cut;
pub mod edge;
pub mod r#gen;
pub mod plan;

use anyhow::Result;
use clasp_core::Pipeline;
use std::path::Path;

/// Experiments (`clasp bench ...`).
#[derive(Debug, clap::Subcommand)]
pub enum Bench {
    /// The Planner paper's edge/cloud experiment: w1-w3 all in the cloud and cut, five
    /// devices, emulated WAN links (see docs/edge.md).
    Edge(edge::BenchArgs),
}

/// Loads and validates a spec, turning its error into the command's error.
pub fn load_pipeline(path: &Path) -> Result<Pipeline> {
    clasp_core::spec::load(path).map_err(|e| anyhow::anyhow!("{e}"))
}
