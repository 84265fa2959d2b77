//! What a node checks every decoded runtime message against before using its ids.
//!
//! Operator, sink and key-group ids index the receiver's tables; worker ids index its
//! connection tables and size per-destination buffers, so they stay below [`MAX_WORKERS`];
//! epochs of requests and migration data may run ahead of the receiver's routing by at most
//! [`EPOCH_LOOKAHEAD`] (older ones are re-routed, never indexed). A [`Welcome`] is checked
//! against the pipeline and settings it carries itself. Epochs of new routings (`Install`,
//! `Migrate`, `Welcome`) are the planner's to choose and are not bounded.

use super::{
    EPOCH_LOOKAHEAD, Hello, MAX_KEY_GROUPS, MAX_WORKERS, Message, MigrationData, MigrationDone,
    MigrationOrder, Request, RoutingPlan, Welcome,
};
use crate::bounds::{BoundsError, Validate, check_epoch, check_id, check_len};
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
        }
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
        l.worker("MigrationData.from", self.from)?;
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
        l.worker("MigrationDone.worker", self.worker)?;
        self.waited_for.iter().try_for_each(|w| l.worker("MigrationDone.waited_for[]", *w))
    }
}

impl Validate<Limits> for WorkerReport {
    fn validate(&self, l: &Limits) -> Result<(), BoundsError> {
        l.worker("Report.worker", self.worker)?;
        l.epoch("Report.epoch", self.epoch)?;
        check_len("Report.ops", self.ops.len(), l.operators())?;
        check_len("Report.edges", self.edges.len(), l.streams as usize)
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
            | Self::Shutdown => Ok(()),
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
mod tests {
    use super::super::{CreditReturn, PROTOCOL, Role, WorkerSettings};
    use super::*;
    use crate::error::WireError;
    use crate::frame::{FrameReader, encode};
    use clasp_core::placement::{GroupMove, KeyAssignment, Placement, Transfer};
    use clasp_core::{Batch, KeyGroup, SinkId};

    /// Two operators (`a`, stateful, with two inputs), one sink, four streams.
    fn pipeline() -> Pipeline {
        let spec = r#"
            [pipeline]
            name = "p"
            [[source]]
            name = "in"
            key_field = 0
            [[source]]
            name = "in2"
            key_field = 0
            [[operator]]
            name = "a"
            stateful = true
            key = "k"
            [operator.params]
            window = 20
            [[operator]]
            name = "b"
            [[sink]]
            name = "out"
            [[stream]]
            from = "in"
            to = "a"
            [[stream]]
            from = "in2"
            to = "a"
            [[stream]]
            from = "a"
            to = "b"
            [[stream]]
            from = "b"
            to = "out"
        "#;
        clasp_core::spec::parse(spec, "p.toml").unwrap()
    }

    const GROUPS: u32 = 8;

    fn limits(epoch: u64) -> Limits {
        Limits::new(&pipeline(), GROUPS, epoch)
    }

    /// Encodes `m` and decodes it with `l`, as a receiving thread does.
    fn decode(m: &Message, l: &Limits) -> Result<Message, WireError> {
        let mut buf = Vec::new();
        encode(m, &mut buf);
        FrameReader::new("peer", 1 << 20)
            .read_message::<Message, _>(&mut &buf[..], l)
            .map(|m| m.expect("one frame"))
    }

    /// The bounds error decoding `m` gives.
    fn refusal(m: &Message, l: &Limits) -> BoundsError {
        match decode(m, l) {
            Err(WireError::Invalid { source, .. }) => source,
            other => panic!("{} decoded as {other:?}", m.name()),
        }
    }

    fn request(op: u32, port: u16, epoch: u64) -> Request {
        let mut b = Batch::new();
        b.push(b"k", b"v");
        Request::new(OperatorId(op), port, 7, epoch, b)
    }

    fn plan(workers: u32) -> RoutingPlan {
        let p = pipeline();
        let placement = Placement::even(&p, workers, 1);
        let owners = p
            .operators
            .iter()
            .map(|o| {
                if o.stateful {
                    (0..GROUPS).map(|g| WorkerId(g % workers)).collect()
                } else {
                    Vec::new()
                }
            })
            .collect();
        RoutingPlan { epoch: 3, placement, keys: KeyAssignment { groups: GROUPS, owners } }
    }

    #[test]
    fn messages_within_the_bounds_decode() {
        let l = limits(5);
        let batch = || {
            let mut b = Batch::new();
            b.push(b"k", b"v");
            b
        };
        let ok = [
            Message::Request(request(0, 1, 5 + EPOCH_LOOKAHEAD)),
            Message::Requests(vec![request(1, 0, 0), request(0, 0, 5)]),
            Message::Sink { sink: SinkId(0), batch: batch() },
            Message::Credits(vec![CreditReturn { chain: u64::MAX, credit: 1, done_ns: 2 }]),
            Message::PeerJoined { worker: WorkerId(MAX_WORKERS - 1), addr: "a".into() },
            Message::Install(Box::new(plan(3))),
            Message::StateLines { operator: OperatorId(1), lines: b"{}\n".to_vec() },
            Message::Shutdown,
        ];
        for m in &ok {
            let back = decode(m, &l).unwrap_or_else(|e| panic!("{}: {e}", m.name()));
            assert_eq!(back.name(), m.name());
        }
    }

    #[test]
    fn unknown_operators_ports_and_sinks_are_refused_naming_the_field() {
        let l = limits(0);
        assert_eq!(
            refusal(&Message::Request(request(2, 0, 0)), &l),
            BoundsError::Id { field: "Request.op", value: 2, count: 2 }
        );
        // `a` has two input ports, `b` one.
        assert_eq!(
            refusal(&Message::Request(request(0, 2, 0)), &l),
            BoundsError::Id { field: "Request.port", value: 2, count: 2 }
        );
        assert_eq!(
            refusal(&Message::Requests(vec![request(1, 0, 0), request(1, 1, 0)]), &l),
            BoundsError::Id { field: "Request.port", value: 1, count: 1 }
        );
        let sink = Message::Sink { sink: SinkId(1), batch: Batch::new() };
        let err = decode(&sink, &l).unwrap_err();
        assert_eq!(err.to_string(), "peer: Sink.sink is 1, outside 0..1; message dropped");
        let lines = Message::StateLines { operator: OperatorId(u32::MAX), lines: Vec::new() };
        assert_eq!(
            refusal(&lines, &l),
            BoundsError::Id { field: "StateLines.operator", value: u64::from(u32::MAX), count: 2 }
        );
    }

    #[test]
    fn future_epochs_beyond_the_lookahead_are_refused() {
        let l = limits(10);
        assert_eq!(
            refusal(&Message::Request(request(0, 0, 11 + EPOCH_LOOKAHEAD)), &l),
            BoundsError::Epoch {
                field: "Request.epoch",
                value: 11 + EPOCH_LOOKAHEAD,
                current: 10,
                lookahead: EPOCH_LOOKAHEAD
            }
        );
        let data =
            MigrationData { epoch: u64::MAX, from: WorkerId(1), groups: vec![], requests: vec![] };
        assert!(matches!(
            refusal(&Message::MigrationData(Box::new(data)), &l),
            BoundsError::Epoch { field: "MigrationData.epoch", value: u64::MAX, current: 10, .. }
        ));
        // A request inside migration data is checked too.
        let data = MigrationData {
            epoch: 10,
            from: WorkerId(1),
            groups: vec![],
            requests: vec![request(0, 0, 10), request(0, 0, u64::MAX)],
        };
        assert!(matches!(
            refusal(&Message::MigrationData(Box::new(data)), &l),
            BoundsError::Epoch { field: "Request.epoch", .. }
        ));
        let done = MigrationDone { epoch: 10 + EPOCH_LOOKAHEAD + 1, ..MigrationDone::default() };
        assert!(matches!(
            refusal(&Message::MigrationDone(done), &l),
            BoundsError::Epoch { field: "MigrationDone.epoch", .. }
        ));
        // A new routing's epoch is the planner's to choose.
        let mut far = plan(2);
        far.epoch = u64::MAX;
        assert!(decode(&Message::Install(Box::new(far)), &l).is_ok());
    }

    #[test]
    fn worker_ids_stay_below_the_cluster_maximum() {
        let l = Limits::handshake();
        let hello = |id| {
            Message::Hello(Hello {
                role: Role::Worker,
                worker: Some(WorkerId(id)),
                slots: 1,
                listen: String::new(),
                pid: 0,
            })
        };
        assert!(decode(&hello(MAX_WORKERS - 1), &l).is_ok());
        assert_eq!(
            refusal(&hello(u32::MAX), &l),
            BoundsError::Id {
                field: "Hello.worker",
                value: u64::from(u32::MAX),
                count: u64::from(MAX_WORKERS)
            }
        );
        assert!(matches!(
            refusal(&Message::PeerLeft(WorkerId(MAX_WORKERS)), &l),
            BoundsError::Id { field: "PeerLeft", .. }
        ));
        assert!(matches!(
            refusal(&Message::MeshReady(vec![WorkerId(0), WorkerId(MAX_WORKERS)]), &l),
            BoundsError::Id { field: "MeshReady[]", .. }
        ));
        let l = limits(0);
        let done = MigrationDone {
            worker: WorkerId(1),
            waited_for: vec![WorkerId(1 << 20)],
            ..MigrationDone::default()
        };
        assert!(matches!(
            refusal(&Message::MigrationDone(done), &l),
            BoundsError::Id { field: "MigrationDone.waited_for[]", value: 1_048_576, .. }
        ));
    }

    #[test]
    fn routings_naming_unknown_workers_groups_or_operators_are_refused() {
        let l = limits(0);
        let refuse = |edit: &dyn Fn(&mut RoutingPlan)| {
            let mut p = plan(2);
            edit(&mut p);
            refusal(&Message::Install(Box::new(p)), &l)
        };
        assert!(matches!(
            refuse(&|p| p.placement.workers = u32::MAX),
            BoundsError::Id { field: "RoutingPlan.placement.workers", .. }
        ));
        assert!(matches!(
            refuse(&|p| p.placement.operators[1].shares[0].worker = WorkerId(MAX_WORKERS)),
            BoundsError::Id { field: "RoutingPlan.placement.operators[].shares[].worker", .. }
        ));
        assert!(matches!(
            refuse(&|p| p.placement.operators[1].shares.clear()),
            BoundsError::Length { field: "RoutingPlan.placement.operators[].shares", .. }
        ));
        assert!(matches!(
            refuse(&|p| {
                p.placement.operators.pop();
            }),
            BoundsError::Length { field: "RoutingPlan.placement.operators", len: 1, expected: 2 }
        ));
        assert!(matches!(
            refuse(&|p| p.keys.groups = GROUPS * 2),
            BoundsError::Length { field: "RoutingPlan.keys.groups", .. }
        ));
        assert!(matches!(
            refuse(&|p| p.keys.owners[0].truncate(3)),
            BoundsError::Length { field: "RoutingPlan.keys.owners[]", len: 3, .. }
        ));
        assert!(matches!(
            refuse(&|p| p.keys.owners[0][5] = WorkerId(u32::MAX)),
            BoundsError::Id { field: "RoutingPlan.keys.owners[][]", .. }
        ));
    }

    #[test]
    fn migration_orders_and_data_are_checked_id_by_id() {
        let l = limits(0);
        let order = |part: WorkerMigration| {
            Message::Migrate(Box::new(MigrationOrder { epoch: 4, routing: plan(2), part }))
        };
        let transfer = |operator, group| Transfer {
            peer: WorkerId(1),
            groups: vec![GroupMove {
                operator: OperatorId(operator),
                groups: vec![KeyGroup(group)],
            }],
            operators: vec![],
        };
        let part = |t: Transfer| WorkerMigration {
            worker: WorkerId(0),
            send_to: vec![t],
            receive_from: vec![WorkerId(1)],
        };
        assert!(decode(&order(part(transfer(0, GROUPS - 1))), &l).is_ok());
        assert_eq!(
            refusal(&order(part(transfer(0, GROUPS))), &l),
            BoundsError::Id {
                field: "MigrationOrder.part.send_to[].groups[].groups[]",
                value: u64::from(GROUPS),
                count: u64::from(GROUPS)
            }
        );
        assert!(matches!(
            refusal(&order(part(transfer(9, 0))), &l),
            BoundsError::Id {
                field: "MigrationOrder.part.send_to[].groups[].operator",
                value: 9,
                ..
            }
        ));
        let state = |op, group| super::super::StateGroup {
            op: OperatorId(op),
            group: KeyGroup(group),
            keys: 0,
            bytes: vec![],
        };
        let data = |g| {
            Message::MigrationData(Box::new(MigrationData {
                epoch: 0,
                from: WorkerId(1),
                groups: vec![g],
                requests: vec![],
            }))
        };
        assert!(decode(&data(state(1, 0)), &l).is_ok());
        assert!(matches!(
            refusal(&data(state(2, 0)), &l),
            BoundsError::Id { field: "MigrationData.groups[].op", .. }
        ));
        assert!(matches!(
            refusal(&data(state(0, u32::MAX)), &l),
            BoundsError::Id { field: "MigrationData.groups[].group", .. }
        ));
    }

    #[test]
    fn reports_must_cover_the_receivers_operators_and_streams() {
        let l = limits(2);
        let report = |ops: usize, edges: usize| {
            Message::Report(Box::new(WorkerReport {
                worker: WorkerId(1),
                epoch: 2,
                ops: vec![Default::default(); ops],
                edges: vec![0; edges],
                ..WorkerReport::default()
            }))
        };
        assert!(decode(&report(2, 4), &l).is_ok());
        assert_eq!(
            refusal(&report(1, 4), &l),
            BoundsError::Length { field: "Report.ops", len: 1, expected: 2 }
        );
        assert_eq!(
            refusal(&report(2, 9), &l),
            BoundsError::Length { field: "Report.edges", len: 9, expected: 4 }
        );
    }

    #[test]
    fn a_welcome_carries_operator_params_and_is_checked_against_its_own_pipeline() {
        let pipeline = pipeline();
        assert!(!pipeline.operators[0].params.is_empty());
        let settings = WorkerSettings {
            batch_size: 16,
            key_groups: GROUPS,
            interval_ms: 1000,
            flush_deadline_us: 0,
            max_frame: 1 << 20,
            seed: 1,
            dispatch_cost: None,
            saturation_queue: 1.0,
            saturation_wait_ms: 1.0,
        };
        let welcome = |routing, key_groups| {
            Message::Welcome(Box::new(Welcome {
                worker: WorkerId(1),
                pipeline: pipeline.clone(),
                settings: WorkerSettings { key_groups, ..settings.clone() },
                peers: vec![(WorkerId(0), "a".into())],
                routing,
            }))
        };
        match decode(&welcome(Some(plan(2)), GROUPS), &Limits::handshake()).unwrap() {
            Message::Welcome(w) => assert_eq!(w.pipeline, pipeline),
            other => panic!("{}", other.name()),
        }
        assert!(matches!(
            refusal(&welcome(Some(plan(2)), GROUPS * 2), &Limits::handshake()),
            BoundsError::Length { field: "RoutingPlan.keys.groups", .. }
        ));
        assert!(matches!(
            refusal(&welcome(None, u32::MAX), &Limits::handshake()),
            BoundsError::Id { field: "Welcome.settings.key_groups", .. }
        ));
        // Before a Welcome, nothing naming an operator is legitimate.
        assert!(matches!(
            refusal(&Message::Request(request(0, 0, 0)), &Limits::handshake()),
            BoundsError::Id { field: "Request.op", count: 0, .. }
        ));
    }

    #[test]
    fn the_preamble_names_the_protocol_and_version() {
        let mut other = PROTOCOL.preamble().to_vec();
        other[8..].copy_from_slice(&99u32.to_le_bytes());
        let err = PROTOCOL.read_preamble(&mut &other[..], "p").unwrap_err();
        assert!(
            err.to_string().contains(&format!("protocol v99, this node v{}", PROTOCOL.version)),
            "{err}"
        );
        let err = PROTOCOL.read_preamble(&mut &b"GET / HTTP/1.1\r\n"[..], "p").unwrap_err();
        assert!(err.to_string().contains("not a clasp peer"), "{err}");
    }
}
