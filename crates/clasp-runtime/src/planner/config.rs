//! The planner's settings.

use crate::wire::{self, WorkerSettings};
use clasp_core::Pipeline;
use clasp_core::operator::{Registry, RegistryError};
use clasp_core::time::TimerUse;
use clasp_wire::Security;

/// Planner settings.
#[derive(Clone, Debug)]
pub struct PlannerConfig {
    /// Address workers join (default loopback, any port).
    pub listen: String,
    /// Settings handed to every worker.
    pub settings: WorkerSettings,
    /// Records per input request.
    pub batch_size: u32,
    /// Most input chains in flight (the dispatcher waits beyond it).
    pub max_in_flight: usize,
    /// Capacity of the planner's incoming request queue.
    pub queue_capacity: usize,
    /// An input request is cut at this many bytes of records even before `batch_size`
    /// records (so that frames stay far below the frame limit).
    pub max_request_bytes: usize,
    /// Most bytes of records waiting in the incoming queue: sources wait beyond it.
    pub max_queued_bytes: u64,
    /// Most bytes of input records in chains not yet complete: the dispatcher waits beyond
    /// it, and the sources behind it.
    pub max_in_flight_bytes: u64,
    /// Whether a run's duration stops the run (`--duration`): the queued input is dropped and
    /// the chains in flight get the drain grace. Otherwise only the input stops there (a rate
    /// pattern's end) and the run drains what entered.
    pub stop_at_duration: bool,
    /// How long a run that was stopped waits for the chains in flight before it ends and
    /// reports them as abandoned.
    pub drain_grace: std::time::Duration,
    /// Set (by a signal handler) to stop a run early as if it had reached its duration; the
    /// run's summary then says it was interrupted.
    pub interrupt: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// Window over which observed statistics are averaged (s).
    pub stats_window_s: f64,
    /// A worker nothing arrived from for this long is lost (workers send heartbeats every
    /// [`crate::worker::HEARTBEAT`]); `None`: only a closed connection counts.
    pub heartbeat_timeout: Option<std::time::Duration>,
    /// The timers each operator uses, by operator id (see [`timers_of`]); empty when unknown,
    /// and then every operator's timers are fired as if it used event-time timers.
    pub timers: Vec<TimerUse>,
    /// The cluster secret and TLS of every link (a cluster started here with no secret
    /// generates one; see `cluster::Cluster::start`).
    pub security: Security,
}

/// The timers the operators of `p` use, from their implementations in `registry`.
pub fn timers_of(p: &Pipeline, registry: &Registry) -> Result<Vec<TimerUse>, RegistryError> {
    Ok(registry.instantiate_all(p)?.iter().map(|o| o.timers()).collect())
}

impl Default for PlannerConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:0".into(),
            settings: WorkerSettings {
                batch_size: 256,
                key_groups: 1024,
                interval_ms: 1000,
                flush_deadline_us: 100,
                max_frame: wire::DEFAULT_MAX_FRAME,
                seed: 1,
                dispatch_cost: None,
                saturation_queue: 500.0,
                saturation_wait_ms: 100.0,
            },
            batch_size: 256,
            max_in_flight: 10_000,
            queue_capacity: 100_000,
            max_request_bytes: 1 << 20,
            max_queued_bytes: 16 << 20,
            max_in_flight_bytes: 32 << 20,
            stop_at_duration: false,
            drain_grace: std::time::Duration::from_secs(5),
            interrupt: std::sync::Arc::default(),
            stats_window_s: 10.0,
            heartbeat_timeout: None,
            timers: Vec::new(),
            security: Security::insecure(),
        }
    }
}
