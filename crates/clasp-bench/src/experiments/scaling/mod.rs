//! `scaling` (paper Fig. 2–3): maximum throughput (unthrottled) and p95 latency of CLASP's
//! placement over exactly 1, 5, 10 … workers, relative to one worker.

mod runtime;
mod sim;

use crate::engine::runtime::testbed::TestbedSettings;
use crate::engine::sim::ClusterSettings;
use crate::report::Output;
use crate::settings::values::{Fraction, WorkerCounts};
use crate::{BenchError, Engine, Experiment, Options};
use serde::{Deserialize, Serialize};

pub use sim::{ScalingRow, rows as sim_rows};

/// The paper's SYN figures: throughput ×3.7 and ×5.5, p95 latency ×1.5 and ×2.3 on 5 and 10
/// workers relative to one.
pub const PAPER_SYN: [(u32, f64, f64); 2] = [(5, 3.7, 1.5), (10, 5.5, 2.3)];

/// The paper's worker counts.
pub const WORKERS: [u32; 3] = [1, 5, 10];

/// The paper's note under both engines' figures.
const PAPER_NOTE: &str = "Paper: throughput grows sub-linearly (SYN x3.7 on 5, x5.5 on 10 workers) and p95 latency at the one-worker maximum grows with the cluster.";

/// `scaling`'s own settings on the simulator.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SimSettings {
    /// Load of the latency runs, a fraction of the one-worker maximum.
    pub load: Fraction,
}

impl Default for SimSettings {
    fn default() -> Self {
        Self { load: Fraction(0.5) }
    }
}

/// `scaling`'s own settings on the runtime.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RuntimeSettings {
    /// Worker counts (one worker is always added: everything is relative to it).
    pub workers: WorkerCounts<16>,
    /// Load of the latency runs, a fraction of the one-worker maximum.
    pub load: Fraction,
}

impl RuntimeSettings {
    /// 1, 2, 3, 5, 8, 10 workers (quick: the paper's 1, 5, 10).
    pub fn preset(quick: bool) -> Self {
        let w = if quick { WORKERS.to_vec() } else { vec![1, 2, 3, 5, 8, 10] };
        Self { workers: WorkerCounts(w), load: Fraction(0.5) }
    }
}

impl Default for RuntimeSettings {
    fn default() -> Self {
        Self::preset(false)
    }
}

/// The simulator's cluster preset: every paper application and SYN (quick: WC and SYN).
pub fn sim_cluster(quick: bool) -> ClusterSettings {
    let apps: &[&str] =
        if quick { &["wc", "syn"] } else { &["wc", "sd", "aa", "pl", "nwm", "etl", "syn"] };
    ClusterSettings::preset(quick, apps)
}

/// The runtime's testbed preset: SYN, WC, SD (quick: SYN).
pub fn testbed(quick: bool) -> TestbedSettings {
    TestbedSettings::preset(quick, if quick { &["syn"] } else { &["syn", "wc", "sd"] })
}

/// Runs `scaling` on `o.engine`.
pub fn run(o: &Options) -> Result<Output, BenchError> {
    match o.engine {
        Engine::Sim => sim::run(o),
        Engine::Runtime => runtime::run(o),
        Engine::Edge => Err(super::unsupported(Experiment::Scaling, o.engine)),
    }
}
