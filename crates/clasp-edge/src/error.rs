//! Why an edge run could not start or finished badly.

use clasp_core::SpecError;

/// Errors of the edge runner, the cloud side and the experiment.
#[derive(Debug, thiserror::Error)]
pub enum EdgeError {
    /// `--device` names a device the devices file does not have.
    #[error(
        "{file}: no device `{id}`; the devices are: {known}\n  help: pass one of these ids to --device, or add a [[device]] with this id"
    )]
    UnknownDevice {
        /// The devices file.
        file: String,
        /// The id asked for.
        id: String,
        /// The ids the file declares, comma-separated.
        known: String,
    },
    /// An `--input` is malformed or names a source the side does not hold.
    #[error("--input {given}: {problem}\n  help: {help}")]
    Input {
        /// The argument as given.
        given: String,
        /// What is wrong.
        problem: String,
        /// What to do.
        help: String,
    },
    /// A source this side holds has no input.
    #[error(
        "{side} holds the raw data of source `{source_name}` but no --input {source_name}=... was given\n  help: add --input {source_name}=FILE or --input {source_name}=gen:COUNT[:SEED]"
    )]
    MissingInput {
        /// `device edge-1` or `the cloud`.
        side: String,
        /// The source.
        source_name: String,
    },
    /// An input could not be read.
    #[error("reading input `{source_name}` ({path}): {error}")]
    Read {
        /// The source.
        source_name: String,
        /// Where from.
        path: String,
        /// Why.
        error: std::io::Error,
    },
    /// A generated sub-pipeline did not validate (a bug, or names that collide).
    #[error("building the {part}: {error}")]
    Subgraph {
        /// Which part.
        part: String,
        /// The spec error.
        error: Box<SpecError>,
    },
    /// The cloud could not be reached.
    #[error(
        "cannot reach the cloud at {addr}: {error}\n  help: start the cloud side first (`clasp edge --cloud ...`) and check the --join address and port"
    )]
    Unreachable {
        /// The address.
        addr: String,
        /// The last error.
        error: String,
    },
    /// The cloud refused this device.
    #[error("the cloud at {addr} refused device `{device}`: {reason}")]
    Refused {
        /// The cloud's address.
        addr: String,
        /// This device.
        device: String,
        /// Why.
        reason: String,
    },
    /// A connection broke or carried something unexpected.
    #[error("connection with {peer}: {problem}")]
    Protocol {
        /// The other side.
        peer: String,
        /// What happened.
        problem: String,
    },
    /// Devices did not all join in time.
    #[error(
        "timed out after {seconds} s waiting for device(s) {missing} to join\n  help: start `clasp edge --device ID --join ADDR ...` for each, or raise --join-timeout"
    )]
    JoinTimeout {
        /// The wait.
        seconds: u64,
        /// The ids missing, comma-separated.
        missing: String,
    },
    /// The cloud listener could not be opened.
    #[error("cannot listen on {addr}: {error}")]
    Listen {
        /// The address.
        addr: String,
        /// Why.
        error: std::io::Error,
    },
    /// The cloud runtime failed.
    #[error("cloud runtime: {0}")]
    Runtime(String),
    /// No secret could be made for an embedded run.
    #[error(transparent)]
    Secret(#[from] clasp_wire::SecretError),
    /// Operator implementations are missing.
    #[error("{0}")]
    Registry(String),
    /// Setting up or using the emulated WAN failed.
    #[error("WAN emulation: {0}")]
    Wan(String),
    /// `--uplink` is malformed.
    #[error("--uplink {given}: {problem}")]
    Transport {
        /// The argument as given.
        given: String,
        /// What is wrong.
        problem: String,
    },
    /// The Kafka uplink failed: the broker, the topic or a produce or fetch.
    #[cfg(feature = "kafka")]
    #[error("{what}: {source}")]
    Kafka {
        /// What was being done, and by whom.
        what: String,
        /// The connector's error.
        #[source]
        source: clasp_kafka::KafkaError,
    },
    /// A record in the cut streams' topic is not one a device produces.
    #[error("topic `{topic}` partition {partition} offset {offset}: {why}")]
    BadRecord {
        /// The topic.
        topic: String,
        /// The partition.
        partition: i32,
        /// The record's offset.
        offset: i64,
        /// What is wrong with it.
        why: String,
    },
    /// Writing results failed.
    #[error("writing {what}: {error}")]
    Output {
        /// What.
        what: String,
        /// Why.
        error: std::io::Error,
    },
}
