//! Closed forms of queueing theory: the latency model of the SLO objective ([`crate::slo`])
//! uses them, and the simulator is checked against them.

/// Erlang C: the probability that an arrival waits in an M/M/c queue with offered load
/// `a = λ·E[S]` (Erlangs), `a < c`. Computed through the Erlang-B recursion, which is stable
/// for large `c`.
pub fn erlang_c(c: u32, a: f64) -> f64 {
    assert!(c >= 1 && a >= 0.0 && a < f64::from(c), "needs c >= 1 and 0 <= a < c");
    let mut b = 1.0;
    for k in 1..=c {
        b = a * b / (f64::from(k) + a * b);
    }
    let rho = a / f64::from(c);
    b / (1.0 - rho + rho * b)
}

/// Mean waiting time in queue of an M/M/c queue (same unit as `mean_service`): arrival rate
/// `lambda`, mean service time `mean_service`.
pub fn mmc_wait(c: u32, lambda: f64, mean_service: f64) -> f64 {
    let a = lambda * mean_service;
    erlang_c(c, a) * mean_service / (f64::from(c) - a)
}

/// Mean waiting time in queue of an M/D/1 queue (Pollaczek–Khinchine with zero variance).
pub fn md1_wait(lambda: f64, service: f64) -> f64 {
    let rho = lambda * service;
    assert!(rho < 1.0, "needs utilization < 1");
    rho * service / (2.0 * (1.0 - rho))
}

/// Mean waiting time in queue of an M/G/1 queue with service mean `m` and second moment
/// `m2` (Pollaczek–Khinchine).
pub fn mg1_wait(lambda: f64, m: f64, m2: f64) -> f64 {
    let rho = lambda * m;
    assert!(rho < 1.0, "needs utilization < 1");
    lambda * m2 / (2.0 * (1.0 - rho))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erlang_c_matches_known_values() {
        // M/M/1: P(wait) = ρ; W_q = ρ/(μ − λ).
        assert!((erlang_c(1, 0.7) - 0.7).abs() < 1e-12);
        assert!((mmc_wait(1, 0.7, 1.0) - 0.7 / 0.3).abs() < 1e-12);
        // M/M/2 with a = 1: P(wait) = a²/(2 + a)·... = 1/3.
        assert!((erlang_c(2, 1.0) - 1.0 / 3.0).abs() < 1e-12);
        // Brute force: P(wait) = (a^c/c!)(c/(c−a)) / (Σ_{k<c} a^k/k! + (a^c/c!)(c/(c−a))).
        let (c, a) = (10u32, 8.0f64);
        let fact = |k: u32| (1..=k).map(f64::from).product::<f64>();
        let tail = a.powi(c as i32) / fact(c) * f64::from(c) / (f64::from(c) - a);
        let head: f64 = (0..c).map(|k| a.powi(k as i32) / fact(k)).sum();
        assert!((erlang_c(c, a) - tail / (head + tail)).abs() < 1e-12);
    }

    #[test]
    fn pollaczek_khinchine_special_cases() {
        // Exponential service: E[S²] = 2 m², the M/M/1 wait.
        assert!((mg1_wait(0.5, 1.0, 2.0) - mmc_wait(1, 0.5, 1.0)).abs() < 1e-12);
        // Deterministic: half of it.
        assert!((md1_wait(0.5, 1.0) - 0.5).abs() < 1e-12);
    }
}
