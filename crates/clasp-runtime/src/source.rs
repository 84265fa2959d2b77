//! How fast the planner's ingress admits input requests.

/// How fast input requests enter the planner queue: a rate (requests/s) as a function of the
/// time since the run started; `None` means as fast as the cluster takes them.
pub type RateFn = Box<dyn Fn(f64) -> Option<f64> + Send + Sync>;

/// Paces requests to a rate that may change over time (a token bucket).
pub struct Pacer {
    rate: RateFn,
    tokens: f64,
    last: f64,
}

impl std::fmt::Debug for Pacer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pacer").field("tokens", &self.tokens).finish()
    }
}

impl Pacer {
    /// A pacer following `rate`.
    pub fn new(rate: RateFn) -> Self {
        Self { rate, tokens: 1.0, last: 0.0 }
    }

    /// Seconds to wait, at time `t`, before the next request may go (0 if it may go now); call
    /// [`Pacer::take`] when it goes.
    pub fn wait(&mut self, t: f64) -> f64 {
        let Some(rate) = (self.rate)(t) else { return 0.0 };
        // Up to 5 ms of requests may go back to back, so sleep overshoot does not lower the rate.
        let burst = (rate * 0.005).max(1.0);
        self.tokens = (self.tokens + rate * (t - self.last).max(0.0)).min(burst);
        self.last = t;
        // The tolerance absorbs round-off in the accumulated tokens.
        if self.tokens >= 1.0 - 1e-9 {
            0.0
        } else if rate <= 0.0 {
            0.05
        } else {
            (1.0 - self.tokens) / rate
        }
    }

    /// Consumes one request's token.
    pub fn take(&mut self) {
        self.tokens -= 1.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pacer_spaces_requests_by_the_rate() {
        let mut p = Pacer::new(Box::new(|_| Some(100.0)));
        let mut t = 0.0;
        let mut sent = 0;
        while t < 1.0 {
            let w = p.wait(t);
            if w == 0.0 {
                p.take();
                sent += 1;
            } else {
                t += w;
            }
        }
        assert!((100..=101).contains(&sent), "{sent}");
        let mut free = Pacer::new(Box::new(|_| None));
        assert_eq!(free.wait(0.0), 0.0);
    }
}
