//! The cloud admits only the devices of its devices file, each with the part the cloud
//! computed for it, says which devices never came, and refuses frames naming connectors the
//! device does not have.

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

#[test]
fn a_data_frame_naming_an_unknown_connector_fails_the_run_naming_it() {
    let (addr, cloud) = cloud(Duration::from_secs(60));
    let p = clasp_apps::pipeline("taxi-w1").unwrap();
    let d = devices(&p, "taxi-w1");
    let model = CostModel::from_spec(&p);
    // edge-1 states the right part, then sends a frame for a connector past its last.
    let hello = device::plan(&p, &d, &model, Mode::Cut, "edge-1").unwrap().hello;
    let connectors = hello.connectors.len();
    let (s, mut frames) = dial_as("device:edge-1", &addr, &Security::insecure());
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
        let got: Option<ToDevice> = frames.read_message(&mut &s, &limits).unwrap();
        assert_eq!(got, Some(expected));
    }
    let bad = connectors as u16 + 40;
    let mut records = Batch::new();
    records.push(b"1", b"1,START");
    out.clear();
    clasp_wire::encode(
        &Outgoing::Data {
            connector: bad,
            item: Item { seq: 0, origin_ns: 0, watermark: None, records: &records },
        },
        &mut out,
    );
    (&s).write_all(&out).unwrap();
    drop(s);
    for t in others {
        t.join().unwrap().unwrap();
    }
    let err = cloud.join().unwrap().unwrap_err().to_string();
    assert!(
        err.contains("device `edge-1`")
            && err.contains(&format!("Data.connector is {bad}, outside 0..{connectors}")),
        "{err}"
    );
}
