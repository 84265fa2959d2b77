//! Paper Fig. 8: how long a rescaling's migration takes, for the planner and for the workers.
//!
//! Every application runs at a fixed input (`load` × its one-worker maximum, so that one
//! worker sustains it), first on one worker for `fill_s` seconds so that its state fills up,
//! then through the paper's six transitions 1 → 5 → 10 → 5 → 1 → 10 → 1, one every `gap_s`
//! seconds, each to CLASP's placement over exactly the new worker count. State size is the
//! application's own ([`StateSize`]: keys and bytes per key, e.g. from `clasp_apps::profile`).
//! The planner's duration runs from issuing the plan to the last worker's completion message;
//! a worker's from receiving the plan to resuming (the longest is reported).

use super::{Setup, max_throughput, spec_stats};
use crate::engine::{Deployment, Simulation};
use crate::error::SimError;
use crate::placement_on;
use clasp_core::Pipeline;
use clasp_core::pattern::RatePattern;
use clasp_plan::autoscaler::UNTHROTTLED_RATE;
use serde::{Deserialize, Serialize};

/// The worker counts visited, in order: every transition of Fig. 8 once.
pub const SEQUENCE: [u32; 7] = [1, 5, 10, 5, 1, 10, 1];

/// An application's state at migration time.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct StateSize {
    /// Keys held by each stateful operator.
    pub keys: u64,
    /// Bytes per key.
    pub bytes_per_key: u64,
}

/// How the experiment runs.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct MigrationSetup {
    /// Input rate as a fraction of the one-worker maximum.
    pub load: f64,
    /// Seconds on one worker before the first transition (the paper: 100).
    pub fill_s: f64,
    /// Seconds between transitions.
    pub gap_s: f64,
}

/// One transition of one application.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MigrationRow {
    /// Application.
    pub app: String,
    /// Workers before.
    pub from: u32,
    /// Workers after.
    pub to: u32,
    /// Plan issued → last completion received (ms).
    pub planner_ms: f64,
    /// Longest worker pause (ms).
    pub worker_ms: f64,
    /// Keys moved.
    pub keys_moved: u64,
    /// Queued requests moved.
    pub requests_moved: u64,
    /// Input rate (chains/s).
    pub rate: f64,
}

/// Runs the transitions for every application with its state size.
pub fn run(
    apps: &[(Pipeline, StateSize)],
    setup: &Setup,
    m: &MigrationSetup,
) -> Result<Vec<MigrationRow>, SimError> {
    let mut rows = Vec::new();
    for (p, state) in apps {
        rows.extend(one(p, *state, setup, m)?);
    }
    Ok(rows)
}

fn one(
    p: &Pipeline,
    state: StateSize,
    setup: &Setup,
    m: &MigrationSetup,
) -> Result<Vec<MigrationRow>, SimError> {
    let rate = m.load * max_throughput(p, setup, 1)?;
    // Placements that use exactly n workers: planned for more than any n sustain.
    let stats = spec_stats(p, setup, UNTHROTTLED_RATE);
    let mut cfg = setup.sim.clone();
    cfg.state_keys = state.keys;
    cfg.bytes_per_key = state.bytes_per_key;
    cfg.warmup_s = 0.0;
    cfg.duration_s = m.fill_s + m.gap_s * SEQUENCE.len() as f64;
    let start = placement_on(p, &stats, &cfg, UNTHROTTLED_RATE, SEQUENCE[0])?;
    let schedule = SEQUENCE[1..]
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let placement = placement_on(p, &stats, &cfg, UNTHROTTLED_RATE, n)?;
            Ok((m.fill_s + m.gap_s * i as f64, placement))
        })
        .collect::<Result<Vec<_>, SimError>>()?;
    let s = Simulation::from_spec(p, cfg, RatePattern::constant(rate), Deployment::Static(start))?
        .with_rescales(schedule)
        .run();
    Ok(s.scaling_events
        .iter()
        .map(|e| MigrationRow {
            app: p.name.clone(),
            from: e.from_workers,
            to: e.to_workers,
            planner_ms: e.planner_ms,
            worker_ms: e.max_worker_pause_ms,
            keys_moved: e.keys_moved,
            requests_moved: e.requests_moved,
            rate,
        })
        .collect())
}
