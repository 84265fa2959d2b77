//! Migrations on rescaling (CLASP §4.4, Fig. 7), simulated step by step:
//!
//! 1. the planner broadcasts the plan the autoscaler made
//!    (`clasp_plan::autoscaler::plan_rescale`); it reaches every worker one
//!    network delay later, when the planner also starts routing inputs by the new placement;
//! 2. each worker pauses (arrivals are held) and lets its running executions finish;
//! 3. it sends every peer the plan names one message — the state of the key groups it hands
//!    over and the queued requests that now belong there (a keyed operator's by owner, a
//!    stateless one's drawn by share, as the runtime's `reroute_queued`) — one after the other
//!    at the migration bandwidth, each arriving a network delay after it is sent;
//! 4. it waits only for the peers the plan says will send to it, installs what arrived (ahead
//!    of its own queue), examines the held arrivals (forwarding those it no longer owns),
//!    resumes and reports to the planner, one network delay away.
//!
//! A worker leaving the cluster sends and stops. The planner's duration runs from issuing the
//! plan to the last report; a worker's pause from receiving the plan to resuming.

use crate::engine::{Simulation, Timer};
use crate::events::{Nanos, Req, ns_to_s, us_to_ns};
use crate::routing::Routing;
use crate::summary::ScalingEvent;
use clasp_core::placement::{KeyAssignment, MigrationPlan, Placement};

/// One worker's part.
#[derive(Debug, Default)]
struct Part {
    /// Peers still to deliver.
    waiting_for: Vec<u32>,
    /// Whether it has sent its messages.
    sent: bool,
    /// Requests received, installed on resume.
    inbox: Vec<Req>,
    /// Its own queued requests it keeps.
    kept: Vec<Req>,
    /// When it received the plan.
    received: Nanos,
    /// When it resumed (or stopped, leaving).
    resumed: Option<Nanos>,
}

/// Data in transit between two workers.
#[derive(Debug)]
struct Message {
    from: u32,
    to: u32,
    requests: Vec<Req>,
}

/// A migration in progress.
#[derive(Debug)]
pub struct Migration {
    issued: Nanos,
    plan: MigrationPlan,
    next: Option<Routing>,
    parts: Vec<Part>,
    messages: Vec<Message>,
    event: ScalingEvent,
}

impl Simulation<'_> {
    /// Issues the plan to move to `placement` with `keys` by `plan` (why: `reason`, for
    /// `target_rate`): broadcast.
    pub(crate) fn begin_migration(
        &mut self,
        placement: Placement,
        keys: KeyAssignment,
        plan: MigrationPlan,
        reason: &str,
        target_rate: f64,
    ) {
        let from = self.routing.workers();
        let to = placement.workers;
        let epoch = self.routing.epoch + 1;
        let Ok(next) = Routing::new(self.p, placement, keys, epoch, self.cfg.max_workers) else {
            if let Some(a) = self.autoscaler.as_mut() {
                a.rescale_failed();
            }
            return;
        };
        let event = ScalingEvent {
            time_s: ns_to_s(self.now),
            from_workers: from,
            to_workers: to,
            reason: reason.to_owned(),
            planner_ms: 0.0,
            max_worker_pause_ms: 0.0,
            target_rate,
            groups_moved: plan.moved_groups() as u64,
            ..ScalingEvent::default()
        };
        let parts = plan.workers.iter().map(|_| Part::default()).collect();
        self.migration = Some(Migration {
            issued: self.now,
            plan,
            next: Some(next),
            parts,
            messages: Vec::new(),
            event,
        });
        let at = self.now + us_to_ns(self.cfg.remote_delay_us);
        self.timers.at(at, Timer::PlanArrives);
    }

    /// The plan reaches every worker: switch routing, pause, drain.
    pub(crate) fn plan_arrives(&mut self) {
        let Some(m) = self.migration.as_mut() else { return };
        let next = m.next.take().expect("the plan arrives once");
        let old = std::mem::replace(&mut self.routing, next);
        self.previous = Some(old);
        let workers = m.plan.workers.len();
        for (w, part) in m.plan.workers.iter().enumerate() {
            let p = &mut m.parts[w];
            p.received = self.now;
            p.waiting_for = part.receive_from.iter().map(|x| x.0).collect();
        }
        for w in 0..workers {
            if w < self.routing.workers() as usize {
                self.set_active(w, true);
            }
            self.workers[w].paused = true;
        }
        for w in 0..workers {
            if self.workers[w].running() == 0 {
                self.drained(w);
            }
        }
    }

    /// Worker `w` has no execution running: if it is migrating and has not sent yet, it
    /// hands over what no longer belongs to it.
    pub(crate) fn drained(&mut self, w: usize) {
        let Some(m) = self.migration.as_mut() else { return };
        let Some(part) = m.parts.get(w) else { return };
        if part.sent || part.resumed.is_some() || m.next.is_some() {
            return;
        }
        let queued = self.workers[w].take_queued(self.now);
        let mut outgoing: Vec<(u32, Vec<Req>)> = Vec::new();
        let mut kept = Vec::new();
        for req in queued {
            let op = usize::from(req.op);
            // A keyed request goes to its group's owner; a stateless one is drawn by share
            // like a new arrival, so a backlog queued here before a scale-out spreads.
            let to = self.routing.destination(op, req.group, &mut self.rng);
            if to == w as u32 {
                kept.push(req);
            } else {
                match outgoing.iter_mut().find(|(peer, _)| *peer == to) {
                    Some((_, v)) => v.push(req),
                    None => outgoing.push((to, vec![req])),
                }
            }
        }
        self.send_parts(w, outgoing);
        let m = self.migration.as_mut().expect("migrating");
        let part = &mut m.parts[w];
        part.sent = true;
        part.kept = kept;
        if w >= self.routing.workers() as usize {
            self.leave(w);
        } else if m.parts[w].waiting_for.is_empty() {
            self.resume(w);
        }
    }

    /// Sends worker `w`'s messages: one per peer of the plan (state and requests), one after
    /// another at the migration bandwidth; requests for a peer the plan does not name travel
    /// as ordinary forwards.
    fn send_parts(&mut self, w: usize, mut outgoing: Vec<(u32, Vec<Req>)>) {
        let (state_keys, key_groups) = (self.cfg.state_keys, u64::from(self.cfg.key_groups));
        let bandwidth = self.cfg.bandwidth_bytes_per_us;
        let delay = us_to_ns(self.cfg.remote_delay_us);
        let m = self.migration.as_mut().expect("migrating");
        let mut ready = self.now;
        let mut scheduled = Vec::new();
        for t in &m.plan.workers[w].send_to {
            let peer = t.peer.0;
            let requests = match outgoing.iter().position(|(p, _)| *p == peer) {
                Some(i) => outgoing.swap_remove(i).1,
                None => Vec::new(),
            };
            let groups: u64 = t.groups.iter().map(|g| g.groups.len() as u64).sum();
            let keys = groups * state_keys / key_groups;
            let bytes =
                keys * self.cfg.bytes_per_key + requests.len() as u64 * self.cfg.request_bytes;
            ready += us_to_ns(bytes as f64 / bandwidth);
            m.event.keys_moved += keys;
            m.event.requests_moved += requests.len() as u64;
            m.messages.push(Message { from: w as u32, to: peer, requests });
            scheduled.push((ready + delay, m.messages.len() - 1));
        }
        for (at, i) in scheduled {
            self.timers.at(at, Timer::Data(i));
        }
        for (_, reqs) in outgoing {
            for r in reqs {
                self.forward(r);
            }
        }
    }

    /// Migration data reaches its worker.
    pub(crate) fn data_arrives(&mut self, i: usize) {
        let Some(m) = self.migration.as_mut() else { return };
        let msg = &mut m.messages[i];
        let (from, to) = (msg.from, msg.to as usize);
        let requests = std::mem::take(&mut msg.requests);
        let part = &mut m.parts[to];
        part.inbox.extend(requests);
        part.waiting_for.retain(|&x| x != from);
        if part.sent && part.waiting_for.is_empty() && part.resumed.is_none() {
            self.resume(to);
        }
    }

    /// Worker `w` installs what arrived and resumes.
    fn resume(&mut self, w: usize) {
        let now = self.now;
        let m = self.migration.as_mut().expect("migrating");
        let part = &mut m.parts[w];
        part.resumed = Some(now);
        let mut first = std::mem::take(&mut part.inbox);
        first.append(&mut part.kept);
        let held = std::mem::take(&mut self.workers[w].held);
        let limits = self.limits(w as u32);
        let worker = &mut self.workers[w];
        worker.set_limits(limits);
        worker.enqueue_front(now, &first);
        worker.paused = false;
        for req in held {
            if self.routing.owns(w as u32, usize::from(req.op), req.group) {
                self.workers[w].enqueue(now, req);
            } else {
                self.forward(req);
            }
        }
        self.start_jobs(w);
        self.workers[w].reschedule(now);
        self.worker_changed(w);
        self.part_done();
    }

    /// Worker `w` leaves the cluster after sending: what reaches it from now on is forwarded.
    fn leave(&mut self, w: usize) {
        let m = self.migration.as_mut().expect("migrating");
        m.parts[w].resumed = Some(self.now);
        let held = std::mem::take(&mut self.workers[w].held);
        self.workers[w].paused = false;
        self.set_active(w, false);
        for req in held {
            self.forward(req);
        }
        self.part_done();
    }

    /// Ends the migration once every worker has resumed or left.
    fn part_done(&mut self) {
        let Some(m) = self.migration.as_ref() else { return };
        if m.parts.iter().any(|p| p.resumed.is_none()) {
            return;
        }
        let m = self.migration.take().expect("migrating");
        let report = us_to_ns(self.cfg.remote_delay_us);
        let last = m.parts.iter().filter_map(|p| p.resumed).max().unwrap_or(self.now);
        let mut event = m.event;
        event.planner_ms = (last + report - m.issued) as f64 / 1e6;
        event.max_worker_pause_ms = m
            .parts
            .iter()
            .filter_map(|p| p.resumed.map(|r| (r - p.received) as f64 / 1e6))
            .fold(0.0, f64::max);
        self.scaling.push(event);
        self.previous = None;
        let t = ns_to_s(self.now);
        self.window_start = t;
        if let Some(a) = self.autoscaler.as_mut() {
            a.rescaled(t);
        }
    }
}
