//! The emulated fan-out cost γ (Eq. 1's γ·δ_w): the worker's capacity taken per other worker
//! it reaches in a second.
//!
//! It is spent as the simulator spends it: the destinations reached in one second take
//! γ·δ_w µs/s of the worker's capacity W in the next, which slows every emulated execution by
//! W / (W − γ·δ_w) (processor sharing over what is left). Each execution pays its part after
//! it gave its instance back, holding its executor slot, so the operator's queue goes on and
//! the measured execution time (what the planner's demands come from) stays the operator's.
//! Spent as one γ-long block on first reaching a worker instead, every worker paid all its
//! blocks at the start of each second at once, which stalled its slots together: an artefact
//! of the emulation that dominated the p95 (half-seconds alternating 5 and 30 ms medians).

use super::WorkerShared;
use std::sync::atomic::Ordering;

/// Executions' emulated time is stretched by this factor's excess: the share of a worker's
/// capacity `capacity_us` (µs/s) left after `overhead_us` (µs/s) is taken, as
/// `overhead / (capacity − overhead)`, with at least 1 % of the capacity left (as the
/// simulator keeps at least 1 % of its cores).
pub fn stretch(overhead_us: f64, capacity_us: f64) -> f64 {
    if !(overhead_us > 0.0 && capacity_us > 0.0) {
        return 0.0;
    }
    let left = (capacity_us - overhead_us).max(0.01 * capacity_us);
    overhead_us / left
}

/// Ends the monitor's second: counts the workers reached in it, clears them, and sets the
/// stretch of the next second from their fan-out cost against the worker's slots.
pub fn roll_second(shared: &WorkerShared) {
    let reached: u32 =
        shared.fanout_reached.iter().map(|w| w.swap(0, Ordering::Relaxed).count_ones()).sum();
    let gamma = shared.settings.dispatch_cost.map_or(0.0, |c| c.fanout_us);
    let capacity = 1e6 * shared.counters.len() as f64;
    let r = stretch(gamma * f64::from(reached), capacity);
    shared.fanout_stretch.store(r.to_bits(), Ordering::Relaxed);
}

/// The fan-out cost (µs) an execution that spent `emulated_us` of emulated time pays now.
pub fn due(shared: &WorkerShared, emulated_us: f64) -> f64 {
    emulated_us * f64::from_bits(shared.fanout_stretch.load(Ordering::Relaxed))
}

/// Marks worker `w` reached this second.
pub fn reach(shared: &WorkerShared, w: clasp_core::WorkerId) {
    let (word, bit) = (w.index() / 64, 1u64 << (w.index() % 64));
    if let Some(cell) = shared.fanout_reached.get(word) {
        cell.fetch_or(bit, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_saturated_worker_spends_exactly_the_overhead() {
        // Busy on all of W with executions of total length E per second: stretched, they take
        // E(1 + r) = W, so E = W − overhead and the stretch spent is E·r = overhead.
        for (overhead, capacity) in [(103_200.0, 3e6), (51_600.0, 1e6), (2.5e6, 3e6)] {
            let r = stretch(overhead, capacity);
            let executions = capacity / (1.0 + r);
            assert!((executions * r - overhead).abs() < 1e-6 * capacity, "{overhead} {capacity}");
        }
    }

    #[test]
    fn nothing_reached_costs_nothing_and_too_much_leaves_one_percent() {
        assert_eq!(stretch(0.0, 3e6), 0.0);
        assert_eq!(stretch(5.0, 0.0), 0.0);
        assert_eq!(stretch(f64::NAN, 3e6), 0.0);
        assert!((stretch(4e6, 3e6) - 4e6 / 3e4).abs() < 1e-9);
    }
}
