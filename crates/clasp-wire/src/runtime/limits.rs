//! What a node checks every decoded runtime message against before using its ids.
//!
//! Operator, sink and key-group ids index the receiver's tables; worker ids index its
//! connection tables and size per-destination buffers, so they stay below [`MAX_WORKERS`];
//! epochs of requests and migration data may run ahead of the receiver's routing by at most
//! [`EPOCH_LOOKAHEAD`] (older ones are re-routed, never indexed). A [`Welcome`] is checked
//! against the pipeline and settings it carries itself. Epochs of new routings (`Install`,
//! `Migrate`, `Welcome`) are the planner's to choose and are not bounded.

use super::{
    CheckpointWritten, EPOCH_LOOKAHEAD, Hello, MAX_KEY_GROUPS, MAX_WORKERS, Message, MigrationData,
    MigrationDone, MigrationOrder, Request, RestoreOrder, Restored, RoutingPlan, Welcome,
};
use crate::bounds::{BoundsError, Validate, check_epoch, check_id, check_len, check_sender};
use clasp_core::placement::WorkerMigration;
use clasp_core::report::WorkerReport;
use clasp_core::{OperatorId, Pipeline, WorkerId};

/// The receiver's id ranges and epoch.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Input ports of each operator, one entry per operator.
    ports: Box<[u16]>,
    sinks: u32,
    streams: u32,
    key_groups: u32,
    workers: u32,
    /// The receiver's routing epoch; update it as the routing changes.
    pub epoch: u64,
    epoch_lookahead: u64,
    /// The worker the connection proved to be, if it is a worker's: the only one its
    /// messages may speak for.
    sender: Option<WorkerId>,
}

impl Limits {
    /// The bounds of a node running `p` with `key_groups` groups per keyed operator (0 counts
    /// as 1, as the stores do), at routing epoch `epoch`.
    pub fn new(p: &Pipeline, key_groups: u32, epoch: u64) -> Self {
        let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        Self {
            ports: p
                .operators
                .iter()
                // The dispatcher sends port 0 to an operator whose input it cannot place.
                .map(|o| u16::try_from(p.inputs(o.id).len().max(1)).unwrap_or(u16::MAX))
                .collect(),
            sinks: count(p.sinks.len()),
            streams: count(p.streams.len()),
            key_groups: key_groups.max(1),
            workers: MAX_WORKERS,
            epoch,
            epoch_lookahead: EPOCH_LOOKAHEAD,
            sender: None,
        }
    }

    /// The same bounds for a connection that proved to be worker `w`: a report, migration
    /// data or completion naming another worker as its sender is refused.
    pub fn from_worker(mut self, w: WorkerId) -> Self {
        self.sender = Some(w);
        self
    }

    #[inline]
    fn sender(&self, field: &'static str, w: WorkerId) -> Result<(), BoundsError> {
        self.worker(field, w)?;
        check_sender(field, u64::from(w.0), self.sender.map(|s| u64::from(s.0)))
    }

    /// The bounds of a node that does not know the pipeline yet (a handshake): worker ids are
    /// bounded, and every other id is out of range, since nothing naming one may come before
    /// the `Welcome` (which is checked against its own pipeline).
    pub fn handshake() -> Self {
        Self {
            ports: Box::new([]),
            sinks: 0,
            streams: 0,
            key_groups: 0,
            workers: MAX_WORKERS,
            epoch: 0,
            epoch_lookahead: EPOCH_LOOKAHEAD,
            sender: None,
        }
    }

    /// Operators of the receiver's pipeline.
    pub fn operators(&self) -> usize {
        self.ports.len()
    }

    #[inline]
    fn operator(&self, field: &'static str, op: OperatorId) -> Result<(), BoundsError> {
        check_id(field, u64::from(op.0), self.ports.len() as u64)
    }

    #[inline]
    fn worker(&self, field: &'static str, w: WorkerId) -> Result<(), BoundsError> {
        check_id(field, u64::from(w.0), u64::from(self.workers))
    }

    #[inline]
    fn epoch(&self, field: &'static str, epoch: u64) -> Result<(), BoundsError> {
        check_epoch(field, epoch, self.epoch, self.epoch_lookahead)
    }

    fn key_group(&self, field: &'static str, group: u32) -> Result<(), BoundsError> {
        check_id(field, u64::from(group), u64::from(self.key_groups))
    }

    fn routing(&self, plan: &RoutingPlan) -> Result<(), BoundsError> {
        let placement = &plan.placement;
        if placement.workers > self.workers {
            return Err(BoundsError::Id {
                field: "RoutingPlan.placement.workers",
                value: u64::from(placement.workers),
                count: u64::from(self.workers) + 1,
            });
        }
        check_len("RoutingPlan.placement.operators", placement.operators.len(), self.operators())?;
        for op in &placement.operators {
            self.operator("RoutingPlan.placement.operators[].operator", op.operator)?;
            // A stateless operator's requests are drawn among its shares.
            if op.shares.is_empty() {
                return Err(BoundsError::Length {
                    field: "RoutingPlan.placement.operators[].shares",
                    len: 0,
                    expected: 1,
                });
            }
            for s in &op.shares {
                self.worker("RoutingPlan.placement.operators[].shares[].worker", s.worker)?;
            }
        }
        let groups = plan.keys.groups.max(1);
        if groups != self.key_groups {
            return Err(BoundsError::Length {
                field: "RoutingPlan.keys.groups",
                len: u64::from(groups),
                expected: u64::from(self.key_groups),
            });
        }
        if plan.keys.owners.len() > self.operators() {
            return Err(BoundsError::Length {
                field: "RoutingPlan.keys.owners",
                len: plan.keys.owners.len() as u64,
                expected: self.operators() as u64,
            });
        }
        for owners in &plan.keys.owners {
            if !owners.is_empty() {
                check_len("RoutingPlan.keys.owners[]", owners.len(), groups as usize)?;
            }
            for w in owners {
                self.worker("RoutingPlan.keys.owners[][]", *w)?;
            }
        }
        Ok(())
    }

    fn migration_part(&self, part: &WorkerMigration) -> Result<(), BoundsError> {
        self.worker("MigrationOrder.part.worker", part.worker)?;
        for t in &part.send_to {
            self.worker("MigrationOrder.part.send_to[].peer", t.peer)?;
            for gm in &t.groups {
                self.operator("MigrationOrder.part.send_to[].groups[].operator", gm.operator)?;
                for g in &gm.groups {
                    self.key_group("MigrationOrder.part.send_to[].groups[].groups[]", g.0)?;
                }
            }
            for op in &t.operators {
                self.operator("MigrationOrder.part.send_to[].operators[]", *op)?;
            }
        }
        for w in &part.receive_from {
            self.worker("MigrationOrder.part.receive_from[]", *w)?;
        }
        Ok(())
    }
}

impl Validate<Limits> for Request {
    #[inline]
    fn validate(&self, l: &Limits) -> Result<(), BoundsError> {
        let Some(&ports) = l.ports.get(self.op.index()) else {
            return Err(BoundsError::Id {
                field: "Request.op",
                value: u64::from(self.op.0),
                count: l.ports.len() as u64,
            });
        };
        check_id("Request.port", u64::from(self.port), u64::from(ports))?;
        if self.time.fire().is_some() {
            check_len("Request.batch (firing timers)", self.batch.len(), 0)?;
        }
        l.epoch("Request.epoch", self.epoch)
    }
}

impl Validate<Limits> for Hello {
    fn validate(&self, l: &Limits) -> Result<(), BoundsError> {
        self.worker.map_or(Ok(()), |w| l.worker("Hello.worker", w))
    }
}

impl Validate<Limits> for Welcome {
    /// Checked against the pipeline and settings it carries: the receiver knows neither yet.
    fn validate(&self, l: &Limits) -> Result<(), BoundsError> {
        l.worker("Welcome.worker", self.worker)?;
        for (w, _) in &self.peers {
            l.worker("Welcome.peers[]", *w)?;
        }
        let groups = self.settings.key_groups;
        if groups > MAX_KEY_GROUPS {
            return Err(BoundsError::Id {
                field: "Welcome.settings.key_groups",
                value: u64::from(groups),
                count: u64::from(MAX_KEY_GROUPS) + 1,
            });
        }
        let own = Limits { workers: l.workers, ..Limits::new(&self.pipeline, groups, 0) };
        self.routing.as_ref().map_or(Ok(()), |r| own.routing(r))
    }
}

impl Validate<Limits> for MigrationOrder {
    fn validate(&self, l: &Limits) -> Result<(), BoundsError> {
        l.routing(&self.routing)?;
        l.migration_part(&self.part)
    }
}

impl Validate<Limits> for MigrationData {
    fn validate(&self, l: &Limits) -> Result<(), BoundsError> {
        l.epoch("MigrationData.epoch", self.epoch)?;
        l.sender("MigrationData.from", self.from)?;
        for g in &self.groups {
            l.operator("MigrationData.groups[].op", g.op)?;
            l.key_group("MigrationData.groups[].group", g.group.0)?;
        }
        self.requests.iter().try_for_each(|r| r.validate(l))
    }
}

impl Validate<Limits> for MigrationDone {
    fn validate(&self, l: &Limits) -> Result<(), BoundsError> {
        l.epoch("MigrationDone.epoch", self.epoch)?;
        l.sender("MigrationDone.worker", self.worker)?;
        self.waited_for.iter().try_for_each(|w| l.worker("MigrationDone.waited_for[]", *w))
    }
}

impl Validate<Limits> for WorkerReport {
    fn validate(&self, l: &Limits) -> Result<(), BoundsError> {
        l.sender("Report.worker", self.worker)?;
        l.epoch("Report.epoch", self.epoch)?;
        check_len("Report.ops", self.ops.len(), l.operators())?;
        for op in &self.ops {
            op.groups.iter().try_for_each(|&(g, _)| l.key_group("Report.ops[].groups[]", g))?;
        }
        check_len("Report.edges", self.edges.len(), l.streams as usize)
    }
}

impl Validate<Limits> for CheckpointWritten {
    fn validate(&self, l: &Limits) -> Result<(), BoundsError> {
        l.worker("CheckpointWritten.worker", self.worker)?;
        let Some(blob) = &self.blob else { return Ok(()) };
        l.worker("CheckpointWritten.blob.worker", blob.worker)?;
        for g in &blob.groups {
            l.operator("CheckpointWritten.blob.groups[].op", g.op)?;
            l.key_group("CheckpointWritten.blob.groups[].group", g.group.0)?;
        }
        Ok(())
    }
}

impl Validate<Limits> for RestoreOrder {
    fn validate(&self, l: &Limits) -> Result<(), BoundsError> {
        l.routing(&self.routing)?;
        for g in &self.groups {
            l.operator("RestoreOrder.groups[].op", g.op)?;
            l.key_group("RestoreOrder.groups[].group", g.group.0)?;
        }
        Ok(())
    }
}

impl Validate<Limits> for Restored {
    fn validate(&self, l: &Limits) -> Result<(), BoundsError> {
        l.worker("Restored.worker", self.worker)
    }
}

impl Validate<Limits> for Message {
    fn validate(&self, l: &Limits) -> Result<(), BoundsError> {
        match self {
            Self::Request(r) => r.validate(l),
            Self::Requests(rs) => rs.iter().try_for_each(|r| r.validate(l)),
            Self::Credits(_)
            | Self::Reject(_)
            | Self::ReportNow(_)
            | Self::DumpState
            | Self::StateDone
            | Self::Shutdown
            | Self::Heartbeat
            | Self::Checkpoint(_)
            | Self::CheckpointMarked(_)
            | Self::Rollback(_)
            | Self::RolledBack(_) => Ok(()),
            Self::CheckpointWritten(w) => w.validate(l),
            Self::Restore(r) => r.validate(l),
            Self::Restored(r) => r.validate(l),
            Self::Sink { sink, .. } => check_id("Sink.sink", u64::from(sink.0), u64::from(l.sinks)),
            Self::Hello(h) => h.validate(l),
            Self::Welcome(w) => w.validate(l),
            Self::PeerJoined { worker, .. } => l.worker("PeerJoined.worker", *worker),
            Self::PeerLeft(w) => l.worker("PeerLeft", *w),
            Self::MeshReady(ws) => ws.iter().try_for_each(|w| l.worker("MeshReady[]", *w)),
            Self::Report(r) => r.validate(l),
            Self::Install(plan) => l.routing(plan),
            Self::Migrate(order) => order.validate(l),
            Self::MigrationData(d) => d.validate(l),
            Self::MigrationDone(d) => d.validate(l),
            Self::StateLines { operator, .. } => l.operator("StateLines.operator", *operator),
        }
    }
}

#[cfg(test)]
mod tests;
