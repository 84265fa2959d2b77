//! Convergence: how directly a policy's worker count follows the input's rate changes.
//!
//! The pattern's stages start at `b_0 < b_1 < … < b_n`, and `b_{n+1}` is its end. Every stage
//! start after the first, `b_i` (i ≥ 1), is a rate change. Its **stable count** is the worker
//! count in force when the next change comes (at `b_{i+1}`, or the pattern's end for the
//! last): the count the policy settled on for that rate. The change **converges in one step**
//! when at most one rescaling takes effect in `[b_i, b_{i+1})`: then either nothing moved
//! (the count already was the stable count) or the first rescaling went straight to it. A
//! policy that overshoots and corrects, or steps up in several increments, needs two or more
//! rescalings in the stage and does not converge in one step. (A policy that never rescales
//! converges trivially; read the share with its latency and workers.)

use serde::{Deserialize, Serialize};

/// A rescaling: when it took effect (s, on the pattern's clock) and the count it set.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Step {
    /// When it took effect (s).
    pub time_s: f64,
    /// Workers from then on.
    pub to: u32,
}

/// One run's convergence over a pattern's rate changes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Convergence {
    /// Rate changes (stage starts after the first).
    pub changes: usize,
    /// Changes that reached their stable count in at most one rescaling.
    pub one_step: usize,
    /// Rescalings over the whole run.
    pub rescalings: usize,
}

impl Convergence {
    /// The share of changes that converged in one step (1 when there were none).
    pub fn share(&self) -> f64 {
        if self.changes == 0 { 1.0 } else { self.one_step as f64 / self.changes as f64 }
    }

    /// Adds another run's counts (for totals over applications).
    pub fn add(&mut self, other: Convergence) {
        self.changes += other.changes;
        self.one_step += other.one_step;
        self.rescalings += other.rescalings;
    }
}

/// The convergence of `steps` (in time order) over the stages starting at `starts` (in
/// order) and ending at `end`.
pub fn convergence(starts: &[f64], end: f64, steps: &[Step]) -> Convergence {
    let mut c = Convergence { rescalings: steps.len(), ..Convergence::default() };
    for (i, &from) in starts.iter().enumerate().skip(1) {
        let until = starts.get(i + 1).copied().unwrap_or(end);
        let within = steps.iter().filter(|s| s.time_s >= from && s.time_s < until).count();
        c.changes += 1;
        if within <= 1 {
            c.one_step += 1;
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;
    use clasp_core::rng::SeededRng;
    use rand::{RngExt, SeedableRng};

    /// One sweep over the merged timeline of stage starts, the end and rescalings (a start
    /// sorts before a rescaling at the same time), tallying the rescalings of each stage.
    fn reference(starts: &[f64], end: f64, steps: &[Step]) -> (usize, usize) {
        let mut marks: Vec<(f64, u8)> = starts.iter().chain([&end]).map(|&t| (t, 0)).collect();
        marks.extend(steps.iter().map(|s| (s.time_s, 1)));
        marks.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut per_stage: Vec<usize> = Vec::new();
        for (_, kind) in marks {
            match (kind, per_stage.last_mut()) {
                (0, _) => per_stage.push(0),
                (_, Some(n)) => *n += 1,
                (_, None) => {}
            }
        }
        let changes = per_stage.get(1..starts.len()).unwrap_or(&[]);
        (changes.len(), changes.iter().filter(|&&n| n < 2).count())
    }

    #[test]
    fn counts_match_the_definition_on_random_runs() {
        let mut rng = SeededRng::seed_from_u64(3);
        for _ in 0..500 {
            let n = rng.random_range(0..12usize);
            let mut t = 0.0;
            let starts: Vec<f64> = (0..n)
                .map(|_| {
                    let s = t;
                    t += rng.random_range(1.0..5.0);
                    s
                })
                .collect();
            let mut steps: Vec<Step> = (0..rng.random_range(0..20))
                .map(|_| Step {
                    time_s: rng.random_range(0.0..t + 1.0),
                    to: rng.random_range(1..9),
                })
                .collect();
            steps.sort_by(|a, b| a.time_s.total_cmp(&b.time_s));
            let c = convergence(&starts, t, &steps);
            assert_eq!((c.changes, c.one_step), reference(&starts, t, &steps));
            assert_eq!(c.rescalings, steps.len());
        }
    }

    #[test]
    fn an_overshoot_and_its_correction_is_not_one_step() {
        let starts = [0.0, 10.0, 20.0];
        let direct = [Step { time_s: 11.0, to: 4 }, Step { time_s: 21.0, to: 2 }];
        assert_eq!(convergence(&starts, 30.0, &direct).share(), 1.0);
        let flapping = [
            Step { time_s: 11.0, to: 6 },
            Step { time_s: 15.0, to: 4 },
            Step { time_s: 21.0, to: 2 },
        ];
        let c = convergence(&starts, 30.0, &flapping);
        assert_eq!((c.changes, c.one_step, c.rescalings), (2, 1, 3));
    }
}
