//! Decoding hostile runtime messages: every id and epoch outside the receiver's bounds is a
//! typed error naming the field.

use super::super::{CreditReturn, Cut, PROTOCOL, Role, StateGroup, WorkerSettings};
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
        Message::Sink { sink: SinkId(0), cut: Cut(0), batch: batch() },
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
fn a_timer_firing_with_records_is_refused_and_an_empty_one_decodes() {
    use crate::runtime::{ChainTime, Fire};
    use clasp_core::time::TimeDomain;
    let l = limits(0);
    let fire = Fire { domain: TimeDomain::Event, until: 9 };
    let with_records = Request { time: ChainTime::Fire(fire), ..request(0, 0, 0) };
    assert_eq!(
        refusal(&Message::Request(with_records), &l),
        BoundsError::Length { field: "Request.batch (firing timers)", len: 1, expected: 0 }
    );
    for time in [ChainTime::Fire(fire), ChainTime::Entered(3), ChainTime::Untimed] {
        let empty = Request { time, ..Request::new(OperatorId(0), 0, 1, 0, Batch::new()) };
        match decode(&Message::Request(empty), &l).unwrap() {
            Message::Request(r) => assert_eq!(r.time, time),
            other => panic!("{}", other.name()),
        }
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
    let sink = Message::Sink { sink: SinkId(1), cut: Cut(0), batch: Batch::new() };
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
        groups: vec![GroupMove { operator: OperatorId(operator), groups: vec![KeyGroup(group)] }],
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
        BoundsError::Id { field: "MigrationOrder.part.send_to[].groups[].operator", value: 9, .. }
    ));
    let state = |op, group| StateGroup {
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
fn a_worker_connection_speaks_only_for_the_worker_it_proved() {
    let report = |w| {
        Message::Report(Box::new(WorkerReport {
            worker: WorkerId(w),
            epoch: 0,
            ops: vec![Default::default(); 2],
            edges: vec![0; 4],
            ..WorkerReport::default()
        }))
    };
    let data = |w| {
        Message::MigrationData(Box::new(MigrationData {
            epoch: 0,
            from: WorkerId(w),
            groups: vec![],
            requests: vec![],
        }))
    };
    let done = |w| {
        Message::MigrationDone(MigrationDone {
            epoch: 0,
            worker: WorkerId(w),
            pause_us: 0,
            wait_us: 0,
            waited_for: vec![],
            bytes_sent: 0,
            keys_sent: 0,
            requests_sent: 0,
            error: None,
        })
    };
    let l = limits(0).from_worker(WorkerId(1));
    for (m, field) in [
        (report(2), "Report.worker"),
        (data(2), "MigrationData.from"),
        (done(2), "MigrationDone.worker"),
    ] {
        assert_eq!(refusal(&m, &l), BoundsError::Impersonation { field, value: 2, proven: 1 });
    }
    for m in [report(1), data(1), done(1)] {
        assert!(decode(&m, &l).is_ok());
    }
    // A connection that proved no worker (the planner's) is not bound.
    assert!(decode(&report(2), &limits(0)).is_ok());
    let err = decode(&report(3), &l).unwrap_err().to_string();
    assert_eq!(err, "peer: Report.worker is 3, but the connection proved to be 1; message dropped");
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
            cut: 0,
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

#[test]
fn worker_identities_name_one_worker_below_the_maximum() {
    use super::super::{parse_worker_identity, worker_identity};
    assert_eq!(parse_worker_identity("worker"), Some(None));
    assert_eq!(parse_worker_identity(&worker_identity(Some(WorkerId(7)))), Some(Some(WorkerId(7))));
    assert_eq!(parse_worker_identity(&worker_identity(None)), Some(None));
    for bad in
        ["planner", "worker:", "worker:07", "worker:+7", "worker:4096", "workers", "worker:1:2"]
    {
        assert_eq!(parse_worker_identity(bad), None, "{bad}");
    }
}
