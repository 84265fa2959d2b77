//! What simulated workers report every interval and how reports become observed statistics:
//! the same types and aggregation as the runtime's ([`clasp_core::report`]).

pub use clasp_core::report::{OpReport, ReportLog, Window, WorkerReport, observe};
