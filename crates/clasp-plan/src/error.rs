//! Why a plan could not be made.

/// Errors of the planning core. Each names what was wrong and what to change.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    /// The target input rate is not a positive finite number.
    #[error("target rate {0} must be a finite number > 0 (requests per second)")]
    InvalidRate(f64),
    /// A coefficient is negative or not finite, or the capacity is not positive.
    #[error(
        "invalid coefficients alpha {alpha}, beta {beta}, gamma {gamma}, W {capacity}: alpha, beta and gamma must be >= 0 and W > 0"
    )]
    InvalidCoefficients {
        /// α.
        alpha: f64,
        /// β.
        beta: f64,
        /// γ.
        gamma: f64,
        /// W̄.
        capacity: f64,
    },
    /// A configuration value is out of range.
    #[error("invalid plan configuration: {0}")]
    InvalidConfig(String),
    /// The statistics cannot be projected (no observed throughput).
    #[error(
        "observed throughput is {0}: statistics must come from a window in which inputs completed"
    )]
    NoThroughput(f64),
    /// A given current placement does not fit the pipeline.
    #[error("the current placement does not match the pipeline: {0}")]
    PlacementMismatch(String),
    /// The packing failed for a reason a lower rate does not cure.
    #[error(transparent)]
    Pack(#[from] crate::packing::PackError),
}
