//! What can go wrong asking for an application, its inputs or its profile.

use clasp_core::operator::RegistryError;
use clasp_core::spec::SpecError;
use clasp_core::state::StateError;

/// Why an application, one of its sources or its profile is not available.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// No shipped application has this name.
    #[error("unknown application `{app}`; known: {known}")]
    UnknownApp {
        /// The name asked for.
        app: String,
        /// The shipped applications.
        known: String,
    },
    /// The application has no source of this name.
    #[error("application `{app}` has no source `{name}`; its sources: {sources}")]
    NoSuchSource {
        /// The application.
        app: String,
        /// The source asked for.
        name: String,
        /// Its sources.
        sources: String,
    },
    /// The application has several sources and none was chosen.
    #[error("application `{app}` has several sources; choose one with --source: {sources}")]
    SeveralSources {
        /// The application.
        app: String,
        /// Its sources.
        sources: String,
    },
    /// A generated source is not in the application's pipeline.
    #[error("pipeline `{pipeline}` has no source `{name}`")]
    NotInPipeline {
        /// The pipeline.
        pipeline: String,
        /// The source.
        name: String,
    },
    /// The shipped spec does not parse (a defect of the build).
    #[error(transparent)]
    Spec(#[from] SpecError),
    /// An operator of the application cannot be built.
    #[error("building the operators: {0}")]
    Operators(#[from] RegistryError),
    /// The state of an operator cannot be measured.
    #[error("measuring the state of `{operator}`: {source}")]
    State {
        /// The operator.
        operator: String,
        /// Why.
        #[source]
        source: StateError,
    },
}
