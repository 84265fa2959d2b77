//! Peers that name ids their receiver does not have: refused at decode with an error naming the
//! field and value, never a panic of a receiving thread or an allocation the peer sizes.

mod common;

use clasp_core::{Batch, OperatorId, SinkId, SourceId, WorkerId};
use clasp_runtime::planner::{DiscardSink, Planner, PlannerConfig, PlannerError};
use clasp_runtime::request::Request;
use clasp_runtime::wire::{self, FrameReader, Hello, Limits, MAX_WORKERS, Message, PROTOCOL, Role};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

fn hello(worker: Option<WorkerId>) -> Message {
    Message::Hello(Hello {
        role: Role::Worker,
        worker,
        slots: 1,
        listen: "127.0.0.1:9".into(),
        pid: 0,
    })
}

/// Opens a connection to `addr` and introduces itself with `hello`.
fn connect(addr: &str, hello: Message) -> TcpStream {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut out = PROTOCOL.preamble().to_vec();
    wire::encode(&hello, &mut out);
    s.write_all(&out).unwrap();
    PROTOCOL.read_preamble(&mut s, addr).unwrap();
    s
}

/// Joins `planner` as a worker asking for `id`; returns the connection and the first answer.
fn join(planner: &Planner, id: Option<WorkerId>) -> (TcpStream, Option<Message>) {
    let mut s = connect(&planner.addr().to_string(), hello(id));
    let mut r = FrameReader::new("planner", wire::DEFAULT_MAX_FRAME);
    let first = r.read_message(&mut s, &Limits::handshake()).unwrap();
    (s, first)
}

fn planner() -> Planner {
    let p = common::pipeline("wc.toml");
    Planner::start(p, PlannerConfig::default(), Box::new(DiscardSink)).unwrap()
}

#[test]
fn a_hello_asking_for_a_worker_id_beyond_the_maximum_is_refused_with_the_reason() {
    let planner = planner();
    let (_s, first) = join(&planner, Some(WorkerId(u32::MAX)));
    match first {
        Some(Message::Reject(reason)) => assert!(
            reason.contains(&format!("Hello.worker is {}, outside 0..{MAX_WORKERS}", u32::MAX)),
            "{reason}"
        ),
        other => panic!("{:?}", other.as_ref().map(Message::name)),
    }
    assert!(planner.workers().is_empty());
    // The largest id allowed is admitted.
    let last = WorkerId(MAX_WORKERS - 1);
    let (_s, first) = join(&planner, Some(last));
    assert!(matches!(first, Some(Message::Welcome(w)) if w.worker == last));
    assert_eq!(planner.workers(), [last]);
}

#[test]
fn a_sink_message_naming_an_unknown_sink_ends_the_run_with_an_error_naming_it() {
    let mut planner = planner();
    let (mut s, first) = join(&planner, None);
    assert!(matches!(first, Some(Message::Welcome(w)) if w.worker == WorkerId(0)));
    planner.wait_for_workers(1, Duration::from_secs(30)).unwrap();
    let sinks = planner.pipeline().sinks.len() as u32;
    let bad = sinks + 98;
    let mut batch = Batch::new();
    batch.push(b"k", b"v");
    let mut out = Vec::new();
    wire::encode(&Message::Sink { sink: SinkId(bad), batch }, &mut out);
    s.write_all(&out).unwrap();
    let err = planner.run(Vec::new(), None, |_| {}, |_, _| Ok(())).unwrap_err();
    match &err {
        PlannerError::WorkerLost { worker: WorkerId(0), reason, .. } => {
            assert!(reason.contains(&format!("Sink.sink is {bad}, outside 0..{sinks}")), "{err}");
        }
        other => panic!("{other}"),
    }
}

#[test]
fn a_request_for_an_unknown_operator_closes_the_peer_link_and_the_worker_keeps_running() {
    let p = common::pipeline("wc.toml");
    let mut c = common::start(&p, 2, 16, common::threads());
    let worker = c.planner.worker_addr(WorkerId(1)).unwrap();
    let ops = p.operators.len() as u32;
    let hostile = [
        Request::new(OperatorId(ops), 0, 0, 1, Batch::new()),
        Request::new(OperatorId(0), 9, 0, 1, Batch::new()),
        Request::new(OperatorId(0), 0, 0, u64::MAX, Batch::new()),
    ];
    // Each from another peer id: a worker takes one connection per peer.
    for (req, peer) in hostile.into_iter().zip(7..) {
        let mut s = connect(&worker, hello(Some(WorkerId(peer))));
        let mut out = Vec::new();
        wire::encode(&Message::Request(req), &mut out);
        s.write_all(&out).unwrap();
        // The worker closes the connection (reading to its end) instead of dying.
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
    }
    let text = Arc::new(common::corpus(3, 2_000));
    let summary =
        c.planner.run(vec![common::unthrottled(&text, SourceId(0))], None, |_| {}, |_, _| Ok(()));
    let summary = summary.unwrap();
    assert_eq!(summary.completed, summary.input_requests);
    let words: u64 = common::reference_word_count(&text).values().sum();
    assert_eq!(summary.operators[1].records, words);
    c.shutdown().unwrap();
}
