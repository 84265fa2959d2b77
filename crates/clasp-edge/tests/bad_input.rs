//! The cloud admits only the devices of its devices file, each with the part the cloud
//! computed for it, says which devices never came, and refuses streams it cannot take: frames
//! naming connectors the device does not have, items skipping numbers, data after the end,
//! batches whose event times do not match their records.

mod common;

use clasp_core::Batch;
use clasp_edge::cloud::{Cloud, CloudOptions};
use clasp_edge::device::{self, DeviceOptions};
use clasp_edge::protocol::{self, Item, Outgoing, ToDevice};
use clasp_edge::{EdgeError, Mode};
use clasp_plan::edgecut::{self, CostModel};
use clasp_wire::Security;
use common::*;
use std::io::Write;
use std::time::Duration;

/// Starts a cloud for w1's five devices that waits `wait` for them; returns its address and
/// the thread that runs it.
fn cloud(wait: Duration) -> (String, std::thread::JoinHandle<Result<(), EdgeError>>) {
    let p = clasp_apps::pipeline("taxi-w1").unwrap();
    let d = devices(&p, "taxi-w1");
    let opts = CloudOptions { join_timeout: wait, ..CloudOptions::default() };
    let c = Cloud::bind(&p, &d, &CostModel::from_spec(&p), opts).unwrap();
    let addr = c.addr().to_string();
    let t = std::thread::spawn(move || {
        c.run(&clasp_apps::registry(), Box::new(clasp_runtime::planner::DiscardSink)).map(|_| ())
    });
    (addr, t)
}

fn device_opts(id: &str, join: &str) -> DeviceOptions {
    DeviceOptions::new(
        id,
        join,
        vec![("rides".into(), clasp_edge::input::InputSpec::Generated { count: 50, seed: 1 })],
    )
}

#[test]
fn a_device_the_cloud_does_not_know_is_refused_and_missing_devices_are_named() {
    let (addr, cloud) = cloud(Duration::from_secs(2));
    // This device's file has a sixth device the cloud's file does not.
    let p = clasp_apps::pipeline("taxi-w1").unwrap();
    let text = std::fs::read_to_string(repo_file("devices/taxi-w1.toml")).unwrap()
        + "\n[[device]]\nid = \"edge-9\"\nsources = [\"rides\"]\n";
    let six = edgecut::devices::parse(&text, "six.toml", &p).unwrap();
    let model = CostModel::from_spec(&p);
    let err = device::run(&p, &six, &model, &clasp_apps::registry(), &device_opts("edge-9", &addr))
        .unwrap_err()
        .to_string();
    assert!(err.contains("refused device `edge-9`") && err.contains("unknown device"), "{err}");
    let err = cloud.join().unwrap().unwrap_err().to_string();
    assert!(
        err.contains("edge-1, edge-2, edge-3, edge-4, edge-5") && err.contains("--join-timeout"),
        "{err}"
    );
}

#[test]
fn a_device_running_another_part_is_refused() {
    let (addr, cloud) = cloud(Duration::from_secs(2));
    let p = clasp_apps::pipeline("taxi-w1").unwrap();
    let d = devices(&p, "taxi-w1");
    let mut o = device_opts("edge-1", &addr);
    o.mode = Mode::AllCloud;
    let err = device::run(&p, &d, &CostModel::from_spec(&p), &clasp_apps::registry(), &o)
        .unwrap_err()
        .to_string();
    assert!(err.contains("mode `all-cloud`") && err.contains("`cut`"), "{err}");
    assert!(cloud.join().unwrap().is_err());
}

/// edge-1 states the right part, then sends `frames` (made for its connectors); the run must
/// fail naming the device and `problem`, while the other four devices finish.
fn a_bad_stream_fails_the_run_naming_it(frames: impl Fn(usize) -> Vec<u8>, problem: &str) {
    let (addr, cloud) = cloud(Duration::from_secs(60));
    let p = clasp_apps::pipeline("taxi-w1").unwrap();
    let d = devices(&p, "taxi-w1");
    let model = CostModel::from_spec(&p);
    let hello = device::plan(&p, &d, &model, Mode::Cut, "edge-1").unwrap().hello;
    let connectors = hello.connectors.len();
    let (s, mut reader) = dial_as("device:edge-1", &addr, &Security::insecure());
    let mut out = Vec::new();
    clasp_wire::encode(&Outgoing::Hello(&hello), &mut out);
    (&s).write_all(&out).unwrap();
    let others: Vec<_> = ["edge-2", "edge-3", "edge-4", "edge-5"]
        .into_iter()
        .map(|id| {
            let (p, d, model, o) = (p.clone(), d.clone(), model.clone(), device_opts(id, &addr));
            std::thread::spawn(move || device::run(&p, &d, &model, &clasp_apps::registry(), &o))
        })
        .collect();
    let limits = protocol::Limits { connectors };
    for expected in [ToDevice::Welcome { held: vec![0; connectors] }, ToDevice::Start] {
        let got: Option<ToDevice> = reader.read_message(&mut &s, &limits).unwrap();
        assert_eq!(got, Some(expected));
    }
    (&s).write_all(&frames(connectors)).unwrap();
    for t in others {
        t.join().unwrap().unwrap();
    }
    let err = cloud.join().unwrap().unwrap_err().to_string();
    assert!(err.contains("device `edge-1`") && err.contains(problem), "{err}");
    drop(s);
}

fn rides() -> Batch {
    let mut records = Batch::new();
    records.push_timed(b"1", b"1,START", Some(1_357_000_000));
    records
}

fn data(connector: u16, seq: u64, records: &Batch) -> Vec<u8> {
    let mut out = Vec::new();
    let item = Item { seq, origin_ns: 0, watermark: Some(1_356_999_000), records };
    clasp_wire::encode(&Outgoing::Data { connector, item }, &mut out);
    out
}

#[test]
fn a_data_frame_naming_an_unknown_connector_fails_the_run_naming_it() {
    let bad = |connectors: usize| connectors as u16 + 40;
    a_bad_stream_fails_the_run_naming_it(
        |connectors| data(bad(connectors), 0, &rides()),
        "Data.connector is 41, outside 0..1",
    );
}

#[test]
fn an_item_skipping_numbers_fails_the_run_naming_them() {
    let frames = |_| [data(0, 0, &rides()), data(0, 3, &rides())].concat();
    a_bad_stream_fails_the_run_naming_it(frames, "stream 0: item 3 arrived, item 1 was next");
}

#[test]
fn data_after_the_end_fails_the_run() {
    let frames = |_| {
        let mut end = Vec::new();
        clasp_wire::encode(&Outgoing::End { sent: &[1] }, &mut end);
        [data(0, 0, &rides()), end, data(0, 1, &rides())].concat()
    };
    a_bad_stream_fails_the_run_naming_it(frames, "data after its End");
}

/// A batch as the wire has it: `(key, value)` byte strings, then the event times.
type ForgedBatch = (Vec<(Vec<u8>, Vec<u8>)>, Vec<u64>);

/// `ToCloud` as the wire has it, with a batch whose times need not match its records.
#[derive(serde::Serialize)]
enum Forged {
    #[allow(dead_code)]
    Hello(()),
    Data {
        connector: u16,
        item: Item<ForgedBatch>,
    },
}

fn forged(records: usize, times: usize) -> Vec<u8> {
    let records = (vec![(b"1".to_vec(), b"1,START".to_vec()); records], vec![1_357_000_000; times]);
    let item = Item { seq: 0, origin_ns: 0, watermark: None, records };
    let mut out = Vec::new();
    clasp_wire::encode(&Forged::Data { connector: 0, item }, &mut out);
    out
}

#[test]
fn a_batch_whose_times_do_not_match_its_records_fails_the_run() {
    // Forged as the wire has it: with a time per record it is a batch like any other.
    let limits = protocol::Limits { connectors: 1 };
    let mut reader = clasp_wire::FrameReader::new("forger", protocol::MAX_FRAME);
    let ok = reader.read_message::<protocol::ToCloud, _>(&mut &forged(2, 2)[..], &limits);
    let Ok(Some(protocol::ToCloud::Data { item, .. })) = ok else { panic!("{ok:?}") };
    assert_eq!((item.records.len(), item.records.time(1)), (2, Some(1_357_000_000)));
    a_bad_stream_fails_the_run_naming_it(|_| forged(2, 1), "undecodable frame");
}

/// A cloud that admits one device and welcomes it holding `held` items it was never sent.
fn lying_cloud(held: u64) -> (String, std::thread::JoinHandle<()>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let t = std::thread::spawn(move || {
        let (tcp, _) = listener.accept().unwrap();
        let security = Security::insecure();
        let opening = clasp_wire::Opening {
            security: &security,
            protocol: &protocol::PROTOCOL,
            identity: protocol::CLOUD_IDENTITY,
            max_frame: protocol::MAX_FRAME,
            deadline: clasp_wire::Deadline::after(clasp_wire::HANDSHAKE_DEADLINE),
        };
        let mut link = clasp_wire::link::answer(tcp, &opening, |_| Ok(())).unwrap();
        let hello = link
            .reader
            .read_message::<protocol::ToCloud, _>(&mut &link.conn, &protocol::Limits::default());
        let Ok(Some(protocol::ToCloud::Hello(h))) = hello else { panic!("{hello:?}") };
        let mut out = Vec::new();
        clasp_wire::encode(&ToDevice::Welcome { held: vec![held; h.connectors.len()] }, &mut out);
        clasp_wire::encode(&ToDevice::Start, &mut out);
        (&link.conn).write_all(&out).unwrap();
        // Hold the connection until the device gives up.
        let mut rest = Vec::new();
        let _ = std::io::Read::read_to_end(&mut &link.conn, &mut rest);
    });
    (addr, t)
}

#[test]
fn a_cloud_claiming_items_the_device_never_sent_is_refused() {
    let (addr, cloud) = lying_cloud(5);
    let p = clasp_apps::pipeline("taxi-w1").unwrap();
    let d = devices(&p, "taxi-w1");
    let o = device_opts("edge-1", &addr);
    let err = device::run(&p, &d, &CostModel::from_spec(&p), &clasp_apps::registry(), &o)
        .unwrap_err()
        .to_string();
    assert!(err.contains("a first welcome holding items [5]"), "{err}");
    cloud.join().unwrap();
}
