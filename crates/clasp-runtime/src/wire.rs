//! The wire protocol between the runtime's nodes, defined in [`clasp_wire::runtime`]: the
//! messages, the bounds a receiver checks them against, and the framing every clasp
//! connection shares ([`clasp_wire::frame`]).

pub use clasp_wire::runtime::*;
pub use clasp_wire::{BoundsError, DEFAULT_MAX_FRAME, FrameReader, WireError, encode};
