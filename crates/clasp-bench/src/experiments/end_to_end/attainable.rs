//! Whether a cell's criterion can be met at all, read from the run's own measurements: a lower
//! bound on the mean workers of any schedule whose p95 stays within the slack of the lowest.
//!
//! Every interval any policy ran says, for its worker count n and input rate r, how many of
//! its requests at least lay above the bound X (the lowest p95 plus the slack): none when its
//! p95 was within X, more than 5 % when only its p90 was, 10 % when only its p75 was, 25 % when
//! only its median was, and half when not even that. A count that did so at rate r' does no
//! better at any r ≥ r' (latency does not fall as the load rises), so each count has a ceiling
//! per percentile — the highest rate it was seen holding that percentile within X — and the
//! highest rate it was seen at. A schedule runs each stage of the pattern on a count seen at
//! that rate or above, and its p95 is within X only if at most 5 % of all requests lie above
//! X. Choosing the counts is a multiple-choice knapsack (each stage's worker-seconds against
//! the requests above X it costs); its linear relaxation, solved greedily along each stage's
//! lower hull, is never above the best schedule. When that bound lies above the fewest workers
//! a policy ran, no schedule of the counts this run observed can meet the criterion: the
//! policies below it bought their workers with latency.

use crate::report::{Table, num};

/// The percentiles an interval reports, in [`Measured::percentiles_ms`]'s order.
pub const PERCENTILES: [f64; 4] = [0.5, 0.75, 0.9, 0.95];

/// The percentile the criterion compares.
const P95: f64 = 0.95;

/// One measured interval: its worker count, input rate and latency percentiles.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Measured {
    /// Workers at its end.
    pub workers: u32,
    /// Input rate over it (requests/s).
    pub rate: f64,
    /// Its latency at each of [`PERCENTILES`] (ms).
    pub percentiles_ms: [f64; 4],
}

/// What the run showed a worker count can do against the bound X.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ceilings {
    /// The worker count.
    pub workers: u32,
    /// Per percentile of [`PERCENTILES`], the highest rate an interval on it held with that
    /// percentile within X (0: none).
    pub within: [f64; 4],
    /// The highest rate it was seen at.
    pub seen: f64,
}

impl Ceilings {
    /// The least share of its requests above X this count serves at `rate`: none up to its
    /// p95's ceiling, then above each ceiling the share beyond that percentile, and half above
    /// the median's; `None` above every rate it was seen at.
    fn share_above(&self, rate: f64) -> Option<f64> {
        let mut share = 0.0;
        for (q, ceiling) in PERCENTILES.iter().zip(self.within).rev() {
            if rate <= ceiling {
                return Some(share);
            }
            share = 1.0 - q;
        }
        (rate <= self.seen).then_some(share)
    }
}

/// Each worker count's ceilings in `measured`, fewest workers first.
pub fn ceilings(measured: &[Measured], bound_ms: f64) -> Vec<Ceilings> {
    let mut out: Vec<Ceilings> = Vec::new();
    for m in measured.iter().filter(|m| m.rate.is_finite() && m.rate > 0.0) {
        let i = match out.iter().position(|c| c.workers == m.workers) {
            Some(i) => i,
            None => {
                out.push(Ceilings { workers: m.workers, within: [0.0; 4], seen: 0.0 });
                out.len() - 1
            }
        };
        let c = &mut out[i];
        c.seen = c.seen.max(m.rate);
        for (ceiling, &latency) in c.within.iter_mut().zip(&m.percentiles_ms) {
            if latency <= bound_ms {
                *ceiling = ceiling.max(m.rate);
            }
        }
    }
    out.sort_by_key(|c| c.workers);
    out
}

/// The lower bound on the time-weighted mean workers of a schedule that runs `stages`
/// (`(rate, seconds)`) on the counts in `ceilings` with at most 5 % of the requests above X;
/// `None` when even the cheapest counts put more above X (or a stage's rate was never seen).
pub fn fewest_mean_workers(ceilings: &[Ceilings], stages: &[(f64, f64)]) -> Option<f64> {
    let volume: f64 = stages.iter().map(|(r, s)| r * s).sum();
    let seconds: f64 = stages.iter().map(|(_, s)| s).sum();
    if seconds <= 0.0 {
        return None;
    }
    let mut budget = (1.0 - P95) * volume;
    let mut worker_seconds = 0.0;
    // Each step along a stage's lower hull: (worker-seconds saved per request above X, the
    // requests it costs, the worker-seconds it saves).
    let mut steps: Vec<(f64, f64, f64)> = Vec::new();
    for &(rate, secs) in stages.iter().filter(|(_, s)| *s > 0.0) {
        // (requests above X, worker-seconds) of each count that can run the stage.
        let mut options: Vec<(f64, f64)> = ceilings
            .iter()
            .filter_map(|c| Some((c.share_above(rate)? * rate * secs, f64::from(c.workers) * secs)))
            .collect();
        options.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
        let &first = options.first()?;
        budget -= first.0;
        worker_seconds += first.1;
        let mut at = first;
        // The lower hull from the cheapest option: each time, the option that saves the most
        // worker-seconds per request it adds above X.
        while let Some((slope, next)) = options
            .iter()
            .filter(|o| o.0 > at.0 && o.1 < at.1)
            .map(|&o| ((at.1 - o.1) / (o.0 - at.0), o))
            .max_by(|a, b| a.0.total_cmp(&b.0))
        {
            steps.push((slope, next.0 - at.0, at.1 - next.1));
            at = next;
        }
    }
    // Sums of the same requests in another order differ in their last bits.
    if budget < -1e-9 * volume {
        return None;
    }
    steps.sort_by(|a, b| b.0.total_cmp(&a.0));
    for (_, cost, saving) in steps {
        if budget <= 0.0 {
            break;
        }
        let taken = (budget / cost).min(1.0);
        worker_seconds -= taken * saving;
        budget -= taken * cost;
    }
    Some(worker_seconds / seconds)
}

/// One row per cell: the bound against the fewest workers a policy ran (`cells`: the cell's
/// name, its intervals, the lowest p95 and the policy with the fewest workers, with its mean).
pub fn table(name: &str, cell: &str, stages: &[(f64, f64)], cells: &[Cell]) -> Table {
    let mut t = Table::new(
        name,
        &[
            cell,
            "p95 bound (ms)",
            "fewest mean workers of a schedule within it (lower bound)",
            "fewest mean workers of a policy",
            "by",
            "criterion attainable",
            "per count, the highest rate held with p95 / p90 / p75 / p50 within the bound, and seen (req/s)",
        ],
    );
    for c in cells {
        let ceil = ceilings(&c.measured, c.bound_ms);
        let bound = fewest_mean_workers(&ceil, stages);
        // A schedule as few as the fewest policy's (a tie counts, as in the criterion).
        let attainable = match bound {
            Some(b) if b <= c.fewest_workers + super::criterion::WORKERS_TIE => "yes",
            Some(_) => "no",
            None => "no: no schedule of the seen counts",
        };
        let per_count: Vec<String> = ceil
            .iter()
            .map(|k| {
                let [p50, p75, p90, p95] = k.within;
                format!("{}: {p95:.0}/{p90:.0}/{p75:.0}/{p50:.0}, {:.0}", k.workers, k.seen)
            })
            .collect();
        t.row(vec![
            c.name.clone(),
            num(c.bound_ms, 2),
            bound.map_or_else(String::new, |b| num(b, 2)),
            num(c.fewest_workers, 2),
            c.fewest_policy.clone(),
            attainable.into(),
            per_count.join("; "),
        ]);
    }
    t
}

/// One cell's inputs to [`table`].
#[derive(Clone, Debug, PartialEq)]
pub struct Cell {
    /// The cell's name.
    pub name: String,
    /// Every policy's intervals in it.
    pub measured: Vec<Measured>,
    /// The criterion's p95 bound: the lowest p95 plus the slack (ms).
    pub bound_ms: f64,
    /// The fewest mean workers a policy ran.
    pub fewest_workers: f64,
    /// That policy.
    pub fewest_policy: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clasp_core::rng::SeededRng;
    use rand::{RngExt, SeedableRng};

    fn interval(workers: u32, rate: f64, percentiles_ms: [f64; 4]) -> Measured {
        Measured { workers, rate, percentiles_ms }
    }

    /// A count that held every percentile within X up to `within`, seen up to `seen`.
    fn count(workers: u32, within: f64, seen: f64) -> Ceilings {
        Ceilings { workers, within: [within; 4], seen }
    }

    #[test]
    fn ceilings_are_the_highest_rates_each_percentile_held_within_the_bound() {
        let m = [
            interval(2, 300.0, [2.0, 2.5, 2.8, 3.0]),
            interval(2, 500.0, [2.0, 4.0, 6.0, 9.0]),
            interval(2, 700.0, [40.0, 60.0, 80.0, 90.0]),
            interval(1, 100.0, [6.0, 7.0, 7.5, 8.0]),
        ];
        let c = ceilings(&m, 5.0);
        assert_eq!(c.iter().map(|c| c.workers).collect::<Vec<_>>(), [1, 2]);
        assert_eq!((c[0].within, c[0].seen), ([0.0; 4], 100.0));
        assert_eq!((c[1].within, c[1].seen), ([500.0, 500.0, 300.0, 300.0], 700.0));
        // Beyond each percentile's ceiling at least the share past that percentile is above X.
        let shares = [300.0, 500.0, 700.0, 701.0].map(|r| c[1].share_above(r));
        assert_eq!(shares, [Some(0.0), Some(1.0 - 0.9), Some(0.5), None]);
    }

    #[test]
    fn a_count_slow_at_every_rate_carries_at_most_a_tenth_of_the_input() {
        // One worker's median is above X at every rate; two hold everything within it. Stages
        // of 10 s at 100, 100 and 800 requests/s: 10,000 requests, 500 may lie above X, so one
        // worker may take 1,000 requests: one of the two low stages.
        let c = [count(1, 0.0, 800.0), count(2, 800.0, 800.0)];
        let stages = [(100.0, 10.0), (100.0, 10.0), (800.0, 10.0)];
        let got = fewest_mean_workers(&c, &stages).unwrap();
        assert!((got - 5.0 / 3.0).abs() < 1e-9, "{got}");
    }

    #[test]
    fn without_a_count_that_keeps_within_the_bound_no_schedule_does() {
        let c = [count(1, 0.0, 800.0)];
        assert_eq!(fewest_mean_workers(&c, &[(100.0, 10.0)]), None);
        let unseen = [count(1, 50.0, 50.0)];
        assert_eq!(fewest_mean_workers(&unseen, &[(100.0, 10.0)]), None);
    }

    #[test]
    fn the_table_says_attainable_when_a_schedule_within_the_bound_ties_the_fewest() {
        // Two workers hold everything within X for 10 s: the bound is exactly 2 workers.
        let measured = vec![interval(2, 100.0, [1.0; 4])];
        let cell = |fewest_workers| Cell {
            name: "native".into(),
            measured: measured.clone(),
            bound_ms: 5.0,
            fewest_workers,
            fewest_policy: "a".into(),
        };
        let t = table("attainable", "costs", &[(100.0, 10.0)], &[cell(2.004), cell(1.9)]);
        let csv = t.csv();
        let verdicts: Vec<&str> =
            csv.lines().skip(1).map(|l| l.split(',').nth(5).unwrap()).collect();
        assert_eq!(verdicts, ["yes", "no"], "{csv}");
    }

    /// The best schedule by brute force: every assignment of a count to each stage whose
    /// requests above X stay within 5 %.
    fn brute_force(c: &[Ceilings], stages: &[(f64, f64)]) -> Option<f64> {
        let volume: f64 = stages.iter().map(|(r, s)| r * s).sum();
        let seconds: f64 = stages.iter().map(|(_, s)| s).sum();
        let mut best: Option<f64> = None;
        let combos = c.len().pow(stages.len() as u32);
        for mut code in 0..combos {
            let (mut above, mut ws, mut ok) = (0.0, 0.0, true);
            for &(rate, secs) in stages {
                let k = &c[code % c.len()];
                code /= c.len();
                match k.share_above(rate) {
                    Some(share) => {
                        above += share * rate * secs;
                        ws += f64::from(k.workers) * secs;
                    }
                    None => ok = false,
                }
            }
            if ok && above <= (1.0 - P95) * volume + 1e-9 {
                best = Some(best.map_or(ws / seconds, |b: f64| b.min(ws / seconds)));
            }
        }
        best
    }

    #[test]
    fn the_bound_is_never_above_the_best_schedule_and_exact_without_a_trade() {
        let mut rng = SeededRng::seed_from_u64(7);
        for case in 0..400 {
            let counts = rng.random_range(1..=4u32);
            let c: Vec<Ceilings> = (1..=counts)
                .map(|w| {
                    // Each percentile's ceiling at most the one below it, as measured ones are.
                    let seen = rng.random_range(100.0..1000.0);
                    let mut within = [0.0; 4];
                    let mut ceiling = seen;
                    for c in &mut within {
                        ceiling *= rng.random_range(0.0..1.0);
                        *c = ceiling;
                    }
                    Ceilings { workers: w, within, seen }
                })
                .collect();
            let stages: Vec<(f64, f64)> = (0..rng.random_range(1..=5))
                .map(|_| (rng.random_range(10.0..1000.0), rng.random_range(1.0..10.0)))
                .collect();
            let exact = brute_force(&c, &stages);
            match (fewest_mean_workers(&c, &stages), exact) {
                (Some(bound), Some(best)) => {
                    assert!(bound <= best + 1e-9, "case {case}: bound {bound} above {best}")
                }
                (None, Some(best)) => panic!("case {case}: no bound where {best} exists"),
                (_, None) => {}
            }
        }
        // Counts that all keep within X: no trade, the bound is the best schedule itself.
        let c: Vec<Ceilings> = (1..=3)
            .map(|w| {
                let r = 300.0 * f64::from(w);
                count(w, r, r)
            })
            .collect();
        let stages = [(200.0, 5.0), (500.0, 7.0), (850.0, 3.0), (90.0, 6.0)];
        assert_eq!(fewest_mean_workers(&c, &stages), brute_force(&c, &stages));
    }
}
