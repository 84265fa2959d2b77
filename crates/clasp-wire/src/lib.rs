//! clasp-wire: the byte-level protocols between clasp nodes.
//!
//! - [`frame`]: the one framing every connection uses — a [`Protocol`]'s preamble (magic and
//!   version), then length-prefixed postcard frames read by a [`FrameReader`] under a frame
//!   limit, with buffers that grow only as bytes arrive;
//! - [`bounds`]: the check of every decoded message's ids against what the receiver has
//!   ([`Validate`]), failing with a [`BoundsError`] that names the field and value;
//! - [`runtime`]: the planner's and workers' messages and their [`runtime::Limits`];
//! - [`edge`]: the connector protocol between edge devices and the cloud.

pub mod bounds;
pub mod edge;
pub mod error;
pub mod frame;
pub mod runtime;

pub use bounds::{BoundsError, Validate};
pub use error::WireError;
pub use frame::{DEFAULT_MAX_FRAME, FrameReader, Protocol, encode, write_frame};
