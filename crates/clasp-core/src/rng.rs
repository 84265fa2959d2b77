//! The seeded generator every random choice in clasp draws from, so that a run with the same
//! seed makes the same choices. Draws go through `rand` (`random_range`, `random_bool`, …) and
//! `rand_distr` (exponential, normal, log-normal, weighted choices).

use crate::hash::fmix64;

/// PCG64 (`rand_pcg::Pcg64`, PCG XSL RR 128/64): fast, statistically good for simulation and
/// data generation, and portable — a seed gives the same numbers on every platform. Make one
/// with `SeededRng::seed_from_u64(seed)` or [`independent_stream`].
pub type SeededRng = rand_pcg::Pcg64;

/// The generator of stream `stream` of `seed`: the same pair always gives the same sequence,
/// and the streams of one seed are distinct sequences (PCG's stream selector gives each its own
/// increment), started from states that differ in every stream, so they never align.
pub fn independent_stream(seed: u64, stream: u64) -> SeededRng {
    let state = u128::from(seed) << 64 | u128::from(fmix64(stream));
    SeededRng::new(state, u128::from(stream))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, RngExt, SeedableRng};

    fn seeded(seed: u64) -> SeededRng {
        SeededRng::seed_from_u64(seed)
    }

    fn first(mut r: SeededRng, n: usize) -> Vec<u64> {
        (0..n).map(|_| r.next_u64()).collect()
    }

    #[test]
    fn same_seed_same_sequence_and_streams_differ() {
        assert_eq!(first(seeded(7), 5), first(seeded(7), 5));
        assert_ne!(first(seeded(7), 5), first(seeded(8), 5));
        assert_eq!(first(independent_stream(7, 1), 5), first(independent_stream(7, 1), 5));
        assert_ne!(first(independent_stream(7, 1), 5), first(independent_stream(7, 2), 5));
        assert_ne!(first(independent_stream(7, 1), 5), first(independent_stream(8, 1), 5));
    }

    /// Streams of one seed, and neighbouring seeds, are uncorrelated: the sample correlation of
    /// their uniform draws is within a few standard errors (1/√n) of zero.
    #[test]
    fn streams_are_uncorrelated() {
        let n = 100_000;
        let corr = |mut a: SeededRng, mut b: SeededRng| {
            let (x, y): (Vec<f64>, Vec<f64>) =
                (0..n).map(|_| (a.random::<f64>() - 0.5, b.random::<f64>() - 0.5)).unzip();
            let dot: f64 = x.iter().zip(&y).map(|(x, y)| x * y).sum();
            dot / (x.iter().map(|v| v * v).sum::<f64>() * y.iter().map(|v| v * v).sum::<f64>())
                .sqrt()
        };
        let bound = 5.0 / (n as f64).sqrt();
        for (a, b) in [
            (independent_stream(1, 0), independent_stream(1, 1)),
            (independent_stream(1, 0x6469_7370), independent_stream(1, 0x6172_7276)),
            (independent_stream(1, 5), independent_stream(2, 5)),
            (seeded(1), seeded(2)),
        ] {
            let c = corr(a, b);
            assert!(c.abs() < bound, "correlation {c}");
        }
    }

    /// The draws the code relies on have their means: uniform 1/2, and a range's midpoint.
    #[test]
    fn draws_have_the_right_means() {
        let mut r = seeded(1);
        let n = 200_000;
        let mean_u: f64 = (0..n).map(|_| r.random::<f64>()).sum::<f64>() / f64::from(n);
        let mean_k: f64 =
            (0..n).map(|_| r.random_range(0..10u64) as f64).sum::<f64>() / f64::from(n);
        assert!((mean_u - 0.5).abs() < 0.01, "{mean_u}");
        assert!((mean_k - 4.5).abs() < 0.05, "{mean_k}");
    }
}
