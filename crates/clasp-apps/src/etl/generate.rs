//! Seeded SenML input.

use super::{ROGUE_SENSORS, SENSORS, START_S, sensor_name};
use clasp_core::rng::{SeededRng, independent_stream};
use rand::RngExt;
use rand_distr::StandardNormal;

/// Generates SenML lines: each message comes from one of 100 sensors (5 % from 20 unknown
/// `rogue-…` sensors), one second after the previous one, with temperature (about 20 °C),
/// humidity (20–80 %) and light (0–2,000 lx); each value is a sensor error (−999 or 99,999,
/// out of range) with probability 2 %.
#[derive(Debug)]
pub struct Generator {
    rng: SeededRng,
    n: u64,
}

impl Generator {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Self {
        Self { rng: independent_stream(seed, 0x4554), n: 0 }
    }

    fn value(&mut self, normal: f64) -> f64 {
        if self.rng.random_bool(0.02) {
            if self.rng.random_bool(0.5) { -999.0 } else { 99_999.0 }
        } else {
            normal
        }
    }

    /// Writes the next line into `out` (cleared first).
    pub fn next_line(&mut self, out: &mut Vec<u8>) {
        let sensor = if self.rng.random_bool(0.05) {
            format!("rogue-{:02}", self.rng.random_range(0..ROGUE_SENSORS))
        } else {
            sensor_name(self.rng.random_range(0..SENSORS))
        };
        let t = 20.0 + 5.0 * self.rng.sample::<f64, _>(StandardNormal);
        let t = self.value(t);
        let h = 20.0 + 60.0 * self.rng.random::<f64>();
        let h = self.value(h);
        let l = 2000.0 * self.rng.random::<f64>();
        let l = self.value(l);
        let time = START_S + self.n;
        self.n += 1;
        out.clear();
        use std::io::Write;
        let _ = write!(
            out,
            "{{\"bn\":\"{sensor}\",\"bt\":{time},\"e\":[{{\"n\":\"temperature\",\"u\":\"Cel\",\"v\":{t:.2}}},\
             {{\"n\":\"humidity\",\"u\":\"%RH\",\"v\":{h:.2}}},{{\"n\":\"light\",\"u\":\"lx\",\"v\":{l:.2}}}]}}"
        );
    }
}
