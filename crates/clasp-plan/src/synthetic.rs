//! Seeded random pipelines, for benchmarks and property tests of the planner at sizes no spec
//! file has. The same seed and size always give the same pipeline.

use clasp_core::Pipeline;
use clasp_core::rng::SeededRng;
use rand::{RngExt, SeedableRng};
use std::fmt::Write;

/// Shape of a random DAG.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RandomDag {
    /// Number of operators.
    pub operators: usize,
    /// Seed of every random choice.
    pub seed: u64,
    /// Probability that an operator has a second predecessor.
    pub join_probability: f64,
    /// Predecessors are drawn among this many operators before it (keeps the DAG deep).
    pub window: usize,
    /// Range of chained-request rates on streams (requests/s at the source rate).
    pub edge_rate: (f64, f64),
    /// Range of service times (µs).
    pub service_us: (f64, f64),
}

impl RandomDag {
    /// A DAG of `operators` operators with moderate fan-in and the paper's ~400 µs operators.
    pub fn new(operators: usize, seed: u64) -> Self {
        Self {
            operators,
            seed,
            join_probability: 0.3,
            window: 20,
            edge_rate: (50.0, 500.0),
            service_us: (50.0, 750.0),
        }
    }

    /// The spec text: one source of rate 1,000 feeding operator 0; every other operator fed by
    /// one or two earlier operators; random stream rates and service times.
    pub fn spec(&self) -> String {
        let mut rng = SeededRng::seed_from_u64(self.seed);
        let mut s = String::from(
            "[pipeline]\nname = \"random\"\n\n[[source]]\nname = \"in\"\nrate = 1000\nkey_field = 0\n",
        );
        for i in 0..self.operators {
            let t = rng.random_range(self.service_us.0..=self.service_us.1).round();
            let _ = write!(s, "\n[[operator]]\nname = \"op{i}\"\nservice_time_us = {t}\n");
        }
        if self.operators > 0 {
            s.push_str("\n[[stream]]\nfrom = \"in\"\nto = \"op0\"\n");
        }
        for i in 1..self.operators {
            for from in self.predecessors(&mut rng, i) {
                let r = rng.random_range(self.edge_rate.0..=self.edge_rate.1).round();
                let _ =
                    write!(s, "\n[[stream]]\nfrom = \"op{from}\"\nto = \"op{i}\"\nrate = {r}\n");
            }
        }
        s
    }

    fn predecessors(&self, rng: &mut SeededRng, i: usize) -> Vec<usize> {
        let lo = i.saturating_sub(self.window.max(1));
        let pick = |rng: &mut SeededRng| lo + rng.random_range(0..(i - lo) as u64) as usize;
        let first = pick(rng);
        let mut v = vec![first];
        if rng.random_bool(self.join_probability.clamp(0.0, 1.0)) {
            let second = pick(rng);
            if second != first {
                v.push(second);
            }
        }
        v
    }

    /// The validated pipeline.
    pub fn pipeline(&self) -> Pipeline {
        clasp_core::spec::parse(&self.spec(), "random.toml")
            .expect("generated specs are valid: acyclic, reachable, unique names")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_dag() {
        let a = RandomDag::new(50, 3);
        assert_eq!(a.spec(), RandomDag::new(50, 3).spec());
        assert_ne!(a.spec(), RandomDag::new(50, 4).spec());
        let p = a.pipeline();
        assert_eq!(p.operators.len(), 50);
        assert!(p.streams.len() >= 50);
    }
}
