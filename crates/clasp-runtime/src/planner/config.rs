//! The planner's settings.

use crate::wire::{self, WorkerSettings};

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
    /// Window over which observed statistics are averaged (s).
    pub stats_window_s: f64,
    /// A worker nothing arrived from for this long is lost (workers send heartbeats every
    /// [`crate::worker::HEARTBEAT`]); `None`: only a closed connection counts.
    pub heartbeat_timeout: Option<std::time::Duration>,
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
            stats_window_s: 10.0,
            heartbeat_timeout: None,
        }
    }
}
