//! How the cloud side runs.

use crate::cut::Mode;
use crate::input::InputSpec;
use crate::transport::Transport;
use clasp_wire::Security;
use std::time::Duration;

/// How to run the cloud side.
#[derive(Clone, Debug)]
pub struct CloudOptions {
    /// Where devices join (`HOST:PORT`; port 0 picks one), with the TCP connector.
    pub listen: String,
    /// How the cut streams arrive: devices joining `listen`, or a Kafka topic.
    pub uplink: Transport,
    /// Told when the cloud starts taking items from a Kafka topic (the makespan counts from
    /// then): devices started after it are measured from their start, as the TCP connector's
    /// start signal measures them.
    pub started: Option<crossbeam_channel::Sender<()>>,
    /// The cut or everything in the cloud (devices must use the same).
    pub mode: Mode,
    /// Runtime workers.
    pub workers: usize,
    /// Executor slots per worker.
    pub slots: u32,
    /// Records per input request.
    pub batch_size: u32,
    /// How long devices have to join.
    pub join_timeout: Duration,
    /// How long a device whose link broke has to connect again.
    pub reconnect_timeout: Duration,
    /// A connector input sends what it has when nothing arrived for this long.
    pub idle: Duration,
    /// Raw data of the sources held in the cloud.
    pub inputs: Vec<(String, InputSpec)>,
    /// Replay speed of those sources (0: as fast as possible).
    pub speed: f64,
    /// Collect the keyed state of every stateful operator at the end.
    pub dump_state: bool,
    /// The cluster secret and TLS devices must match.
    pub security: Security,
}

impl Default for CloudOptions {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:0".into(),
            uplink: Transport::Connector,
            started: None,
            mode: Mode::Cut,
            workers: 2,
            slots: 4,
            batch_size: 64,
            join_timeout: Duration::from_secs(60),
            reconnect_timeout: Duration::from_secs(60),
            idle: Duration::from_millis(2),
            inputs: Vec::new(),
            speed: 0.0,
            dump_state: false,
            security: Security::insecure(),
        }
    }
}
