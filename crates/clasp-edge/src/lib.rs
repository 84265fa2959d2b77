//! clasp-edge: runs a pipeline cut between edge devices and the cloud (the Planner paper's
//! deployment), and measures it over an emulated wide-area network.
//!
//! - [`cut`]: which cut a run uses — edgecut's minimum cut, or everything in the cloud;
//! - [`subgraph`]: the device and cloud parts as pipelines of their own, connectors named after
//!   their streams;
//! - [`device`]: the edge runner — a device's part on its raw data ([`input`]), cut streams sent
//!   over TCP by the connector [`protocol`], through the WAN [`shaper`], or through a Kafka
//!   topic ([`transport`], [`kafka_stream`]: cargo feature `kafka`);
//! - [`cloud`]: the edge ingress and the cloud part on the elastic runtime;
//! - [`embedded`]: devices and cloud in one process;
//! - [`netns`]: devices in network namespaces behind shaped veth links;
//! - [`results`]: a run's results, to compare a cut run with the same workflow all in the cloud.
//!
//! The `clasp bench edge` experiment that measures it is in clasp-bench.

pub mod cloud;
pub mod cut;
pub mod device;
pub mod embedded;
mod engine;
pub mod error;
pub mod input;
#[cfg(feature = "kafka")]
pub mod kafka_stream;
pub mod netns;
pub mod results;
pub mod shaper;
pub mod subgraph;
pub mod transport;

/// The connector protocol, defined with the runtime's in `clasp-wire`.
pub use clasp_wire::edge as protocol;
pub use cut::Mode;
pub use error::EdgeError;
pub use transport::Transport;
