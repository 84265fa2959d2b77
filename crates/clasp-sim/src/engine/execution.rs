//! Requests reaching workers, executions starting and finishing, chained requests sent.

use super::Simulation;
use crate::config::ServiceDist;
use crate::events::{Delivery, Req, us_to_ns};
use crate::model::{EdgeModel, Model};
use crate::routing::Routing;
use crate::worker::{Job, Phase};
use clasp_core::rng::SeededRng;
use rand::{Rng, RngExt, SeedableRng};
use rand_distr::{Exp1, LogNormal};

impl Simulation<'_> {
    /// A request reaches worker `d.to`.
    pub(super) fn on_delivery(&mut self, d: Delivery) {
        let w = d.to as usize;
        let worker = &mut self.workers[w];
        if worker.paused {
            worker.held.push(d.req);
            return;
        }
        if !worker.active || !self.routing.owns(d.to, usize::from(d.req.op), d.req.group) {
            self.forward(d.req);
            return;
        }
        worker.enqueue(self.now, d.req);
        if self.start_jobs(w) {
            self.workers[w].reschedule(self.now);
            self.worker_changed(w);
        }
    }

    /// Sends a request that reached the wrong worker to its owner under the current routing.
    pub(crate) fn forward(&mut self, req: Req) {
        let o = usize::from(req.op);
        let to = self.routing.destination(o, req.group, &mut self.rng);
        self.forwarded += 1;
        self.remote.send(self.now, to, req);
    }

    /// Starts executions on worker `w` while slots and instance limits allow.
    pub(crate) fn start_jobs(&mut self, w: usize) -> bool {
        let mut started = false;
        let now = self.now;
        let (alpha, beta) = (self.cfg.costs.alpha, self.cfg.costs.beta);
        let groups = self.cfg.key_groups;
        while let Some(op) = self.workers[w].pick() {
            let worker = &mut self.workers[w];
            let req = worker.pop(now, op);
            let m = &self.model.ops[op];
            let exec_us = draw_service(m.exec_us, self.cfg.service, &mut worker.rng);
            let seed = worker.rng.next_u64();
            let (mut local, mut remote) = (0u32, 0u32);
            for_each_child(&self.model, &self.routing, op, seed, groups, |_, to, _| {
                if to == w as u32 {
                    local += 1;
                } else {
                    remote += 1;
                }
            });
            let dispatch_us = alpha * f64::from(local) + beta * f64::from(remote);
            let (sleep, work_us) = if m.sleeps {
                (us_to_ns(exec_us), dispatch_us)
            } else {
                (0, exec_us + dispatch_us)
            };
            let job = Job {
                req,
                seed,
                epoch: self.routing.epoch,
                exec_us,
                dispatch_us,
                work_us,
                started: now,
                wait_us: (now - req.enqueued) as f64 / 1e3,
                phase: Phase::Cpu(0.0),
            };
            worker.admit(now, job, sleep);
            started = true;
        }
        started
    }

    /// Executions finish on worker `w`.
    pub(super) fn on_worker(&mut self, w: usize) {
        let now = self.now;
        let mut done = std::mem::take(&mut self.done);
        self.workers[w].finish_due(now, &mut done);
        for job in &done {
            self.finish_job(w, job);
        }
        done.clear();
        self.done = done;
        if self.workers[w].paused && self.workers[w].running() == 0 {
            self.drained(w);
        }
        self.start_jobs(w);
        self.workers[w].reschedule(now);
        self.worker_changed(w);
    }

    /// Counts a finished execution and sends its chained requests.
    pub(super) fn finish_job(&mut self, w: usize, job: &Job) {
        let now = self.now;
        let routing = match &self.previous {
            Some(prev) if prev.epoch == job.epoch => prev,
            _ => &self.routing,
        };
        let op = usize::from(job.req.op);
        let worker = &mut self.workers[w];
        let c = &mut worker.counters;
        let (local, remote) = (&mut self.local, &mut self.remote);
        let mut sent = 0u32;
        for_each_child(&self.model, routing, op, job.seed, self.cfg.key_groups, |e, to, group| {
            sent += 1;
            c.edges[usize::from(e.stream)] += 1;
            let req = Req { chain: job.req.chain, op: e.to, group, enqueued: now };
            if to == w as u32 {
                c.local += 1;
                local.send(now, to, req);
            } else {
                c.remote += 1;
                c.reached(to);
                remote.send(now, to, req);
            }
        });
        let oc = &mut c.ops[op];
        oc.processed += 1;
        oc.emitted += u64::from(sent);
        oc.exec_us += job.exec_us;
        oc.exec_sq_us2 += job.exec_us * job.exec_us;
        oc.wait_us += job.wait_us;
        oc.dispatch_us += job.dispatch_us;
        if self.chains.finish_request(job.req.chain, sent, now) {
            self.try_dispatch();
        }
    }
}

/// Draws one execution time around `mean` (µs).
#[inline]
pub(crate) fn draw_service(mean: f64, dist: ServiceDist, rng: &mut SeededRng) -> f64 {
    match dist {
        ServiceDist::Deterministic => mean,
        ServiceDist::Exponential => rng.sample::<f64, _>(Exp1) * mean,
        // ln X ~ N(μ, σ²) with σ² = ln(1 + cv²) and μ = ln(mean) − σ²/2.
        ServiceDist::LogNormal { cv } => {
            LogNormal::from_mean_cv(mean, cv).map_or(mean, |d| rng.sample(d))
        }
    }
}

/// Every chained request an execution of `op` with `seed` sends: the edge, the destination
/// worker and the key group. The same seed and routing always give the same requests, so an
/// execution is priced at its start and sends at its end without storing them.
#[inline]
pub(crate) fn for_each_child(
    model: &Model,
    routing: &Routing,
    op: usize,
    seed: u64,
    groups: u32,
    mut f: impl FnMut(&EdgeModel, u32, u16),
) {
    let edges = &model.ops[op].edges;
    if edges.is_empty() {
        return;
    }
    let mut rng = SeededRng::seed_from_u64(seed);
    for e in edges {
        let whole = e.mean.trunc();
        let frac = e.mean - whole;
        let mut n = whole as u32;
        if frac > 0.0 && rng.random::<f64>() < frac {
            n += 1;
        }
        let to = usize::from(e.to);
        let keyed = routing.keyed(to);
        for _ in 0..n {
            let group = if keyed {
                routing.draw_group(to, &model.ops[to].worker_shares, groups, &mut rng)
            } else {
                0
            };
            let dest = routing.destination(to, group, &mut rng);
            f(e, dest, group);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_draws_have_their_means() {
        let mut rng = SeededRng::seed_from_u64(9);
        let n = 200_000;
        for dist in [ServiceDist::Exponential, ServiceDist::LogNormal { cv: 0.5 }] {
            let mean: f64 =
                (0..n).map(|_| draw_service(400.0, dist, &mut rng)).sum::<f64>() / n as f64;
            assert!((mean - 400.0).abs() < 4.0, "{dist}: {mean}");
        }
        assert_eq!(draw_service(400.0, ServiceDist::Deterministic, &mut rng), 400.0);
    }
}
