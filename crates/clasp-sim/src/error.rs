//! Why a simulation cannot be built or run.

use clasp_core::pattern::PatternError;
use clasp_plan::PlanError;

/// Errors of the simulator; all are raised before any event runs.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// A configuration value is out of range.
    #[error("invalid simulator configuration: {0}")]
    Config(String),
    /// The placement does not fit the pipeline or the cluster.
    #[error("invalid placement: {0}")]
    Placement(String),
    /// A policy could not decide.
    #[error("planning failed: {0}")]
    Plan(#[from] PlanError),
    /// The input pattern could not be built.
    #[error(transparent)]
    Pattern(#[from] PatternError),
}
