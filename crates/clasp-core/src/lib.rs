//! clasp-core: the pipeline model every other part of clasp builds on.
//!
//! - [`spec`] parses and validates TOML pipeline specs into a [`Pipeline`];
//! - [`operator`] is the API user functions implement, with [`state`] holding keyed state in
//!   key groups and [`batch`] the records a request carries;
//! - [`placement`] and [`stats`] are the data exchanged between the planning core
//!   (`clasp-plan`), the runtime and the simulator;
//! - [`pattern`] describes input-rate patterns shared by the runtime and the simulator;
//! - [`local`] runs a pipeline's operators in one thread, for tests and quick runs;
//! - [`sync`] is the lock access every node uses.

pub mod batch;
pub mod erased;
pub mod frontier;
pub mod hash;
pub mod ids;
pub mod input;
pub mod kind;
pub mod local;
pub mod locate;
pub mod operator;
pub mod pattern;
pub mod pipeline;
pub mod placement;
pub mod registry;
pub mod report;
pub mod rng;
pub mod snapshot;
pub mod source;
pub mod spec;
pub mod state;
pub mod stats;
pub mod sync;
pub mod time;

pub use batch::{Batch, Record};
pub use ids::{KeyGroup, OperatorId, SinkId, SourceId, StreamId, WorkerId};
pub use kind::OperatorKind;
pub use operator::{Context, DynOperator, Emitter, Operator, Registry};
pub use pipeline::{Endpoint, Pipeline};
pub use spec::SpecError;
