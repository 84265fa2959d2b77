//! Inputs reaching the planner (paced or Poisson) and their dispatch to workers.

use super::Simulation;
use crate::config::Arrivals;
use crate::events::{Nanos, Req, ns_to_s, s_to_ns};
use rand::RngExt;
use rand_distr::Exp1;
use rand_distr::weighted::WeightedIndex;

impl Simulation<'_> {
    /// When the input after one arriving at `from` arrives, if the pattern offers another.
    pub(super) fn next_arrival(&mut self, from: Nanos) -> Option<Nanos> {
        match self.cfg.arrivals {
            Arrivals::Paced => {
                let due = self.pattern.due_time(self.planner.next_paced)?;
                self.planner.next_paced += 1;
                Some(s_to_ns(due).max(from))
            }
            Arrivals::Poisson => self.next_poisson(ns_to_s(from)).map(|t| s_to_ns(t).max(from)),
        }
    }

    /// The next point of a Poisson process whose rate follows the pattern's stages (restarted
    /// at every stage boundary, which memorylessness allows).
    pub(super) fn next_poisson(&mut self, mut t: f64) -> Option<f64> {
        loop {
            let rate = self.pattern.rate_at(t);
            let stage_end = self.pattern.stage_at(t).map(|s| s.end_s());
            if rate <= 0.0 {
                t = stage_end?;
                continue;
            }
            let next = t + self.arrival_rng.sample::<f64, _>(Exp1) / rate;
            match stage_end {
                Some(end) if next >= end => t = end,
                _ => return Some(next),
            }
        }
    }

    /// Dispatches queued inputs while the in-flight limit allows.
    pub(super) fn try_dispatch(&mut self) {
        while self.chains.in_flight() < self.planner.max_in_flight && self.planner.take(self.now) {
            self.dispatch_input();
        }
    }

    /// Sends one input to the workers its source's streams lead to.
    pub(super) fn dispatch_input(&mut self) {
        let now = self.now;
        let sources = &self.model.sources;
        let s = if sources.len() == 1 {
            0
        } else {
            WeightedIndex::new(sources.iter().map(|s| s.weight)).map_or(0, |w| self.rng.sample(w))
        };
        let entries = &self.model.sources[s].entries;
        let chain = self.chains.open(now, entries.len() as u32);
        if entries.is_empty() {
            self.chains.close(chain, now);
            return;
        }
        let groups = u64::from(self.cfg.key_groups);
        for &op in entries {
            let o = usize::from(op);
            let group = if self.routing.keyed(o) {
                let shares = &self.model.ops[o].worker_shares;
                self.routing.draw_group(o, shares, groups as u32, &mut self.rng)
            } else {
                0
            };
            let to = self.routing.destination(o, group, &mut self.rng);
            self.remote.send(now, to, Req { chain, op, group, enqueued: now });
        }
    }
}
