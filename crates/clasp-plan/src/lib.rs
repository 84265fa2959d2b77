//! clasp-plan: every decision clasp makes, as pure deterministic functions (no threads, no I/O),
//! so that the runtime and the simulator call the very same code.

pub mod edgecut;
