//! The cloud admits only the devices of its devices file, each with the part the cloud
//! computed for it, and says which devices never came.

mod common;

use clasp_edge::cloud::{Cloud, CloudOptions};
use clasp_edge::device::{self, DeviceOptions};
use clasp_edge::{EdgeError, Mode};
use clasp_plan::edgecut::{self, CostModel};
use common::*;
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
