//! Kafka as the edge→cloud transport of a cut, on a real broker (`CLASP_KAFKA_BROKERS`, started
//! by `scripts/kafka-broker.sh`; without one these tests skip unless `CLASP_REQUIRE_KAFKA=1`).
//!
//! Theorem 1 of the Planner paper over Kafka: a taxi workflow cut across five devices that
//! produce their cut streams to a topic gives the same results as the same workflow all in
//! the cloud over the TCP connector, as all in the cloud over Kafka, and as the independent
//! reference. Then what at-least-once producing leaves in a topic — every item twice — is
//! taken once, and records that are not a device's are refused naming where they are.
#![cfg(feature = "kafka")]

mod common;

use clasp_core::Batch;
use clasp_edge::Transport;
use clasp_edge::cloud::{Cloud, CloudOptions};
use clasp_edge::device::{self, DeviceOptions};
use clasp_edge::kafka_stream::{self, StreamEnd};
use clasp_edge::protocol::Item;
use clasp_edge::results::CollectSink;
use clasp_edge::{EdgeError, Mode};
use clasp_kafka::records::{OutRecord, RecordProducer};
use clasp_kafka::topics::test_broker as broker;
use clasp_plan::edgecut::{self, CostModel, Devices};
use clasp_reference as reference;
use common::*;

/// One workflow at a time: each run starts a cluster and five devices on a 2-core machine.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A fresh topic of `partitions` partitions, unique to this test process and `name`.
fn fresh_topic(broker: &str, name: &str, partitions: i32) -> String {
    let topic = format!("clasp-edge-test-{}-{name}", std::process::id());
    clasp_kafka::topics::create_topic(broker, &topic, partitions).unwrap();
    topic
}

/// Runs `app` cut and all in the cloud over Kafka, and all in the cloud over TCP, on `count`
/// records, and checks all three against the reference and against each other.
fn equivalent_over_kafka(app: &str, count: u64, speed: f64) {
    let Some(broker) = broker() else { return };
    let _one = clasp_core::sync::lock(&SERIAL);
    let p = clasp_apps::pipeline(app).unwrap();
    let lines = clasp_apps::profile::generate(app, count, SEED).unwrap();
    let expected = reference::expected(app, &p, &lines).unwrap();
    let over_kafka = |mode: Mode| {
        let topic = fresh_topic(&broker, &format!("{app}-{}", mode.as_str()), 3);
        run_embedded_over(
            &p,
            app,
            mode,
            count,
            speed,
            Transport::Kafka(format!("{broker}/{topic}")),
        )
    };
    let (cut, cut_results, cut_report) = over_kafka(Mode::Cut);
    let (all, all_results, all_report) = over_kafka(Mode::AllCloud);
    let (tcp, tcp_results, tcp_report) = run_embedded(&p, app, Mode::AllCloud, count, speed);
    assert!(expected.sinks.values().any(|s| !s.is_empty()), "{app}: the trace produces no result");
    for (name, outcome) in [("cut over Kafka", &cut), ("all in the cloud over Kafka", &all)] {
        reference::check_order_insensitive(app, &p, &expected, outcome)
            .unwrap_or_else(|e| panic!("{app} {name} vs reference: {e}"));
        reference::check_order_insensitive(app, &p, &tcp, outcome)
            .unwrap_or_else(|e| panic!("{app} {name} vs all in the cloud over TCP: {e}"));
    }
    assert_eq!(tcp_results.difference(&cut_results), None, "{app}: cut over Kafka");
    assert_eq!(tcp_results.difference(&all_results), None, "{app}: all-cloud over Kafka");
    let total: u64 = lines.iter().map(|(_, l)| l.len() as u64).sum();
    assert_eq!(all_report.cloud.items(), total, "{app}: all in the cloud sends every record");
    assert_eq!(tcp_report.cloud.items(), total);
    assert!(cut_report.cloud.items() < total, "{app}: the cut sends fewer records");
    for report in [&cut_report, &all_report] {
        assert_eq!(report.devices.len(), 5);
        // Every item a device produced was taken once, and the topic's bytes are the devices'.
        let produced: u64 = report.devices.iter().map(|d| d.frames).sum();
        let taken: u64 = report.cloud.links.iter().map(|l| l.frames).sum();
        assert_eq!(taken, produced, "{app}");
        let sent: u64 = report.devices.iter().flat_map(|d| d.sent.iter().map(|s| s.1)).sum();
        assert_eq!(sent, report.cloud.items(), "{app}");
        let device_bytes: u64 = report.devices.iter().map(|d| d.bytes).sum();
        assert_eq!(device_bytes, report.cloud.bytes(), "{app}");
    }
}

#[test]
fn w1_cut_over_kafka_equals_all_in_cloud() {
    equivalent_over_kafka("taxi-w1", 10_000, 0.0);
}

#[test]
fn w3_cut_over_kafka_equals_all_in_cloud_window_by_window() {
    // Event-time windows: the cloud closes them as the slowest device's watermark, carried in
    // the items through the topic, passes them.
    equivalent_over_kafka("taxi-w3", 40_000, 0.0);
}

/// Two devices holding w3's rides, all in the cloud.
fn two_devices(p: &clasp_core::Pipeline) -> Devices {
    let text = "pipeline = \"taxi-w3\"\n[[device]]\nid = \"a\"\nsources = [\"rides\"]\n\
                [[device]]\nid = \"b\"\nsources = [\"rides\"]\n";
    edgecut::devices::parse(text, "devices.toml", p).unwrap()
}

/// A cloud taking w3's two devices all in the cloud from `topic`.
fn cloud_on(p: &clasp_core::Pipeline, d: &Devices, broker: &str, topic: &str) -> Cloud {
    let opts = CloudOptions {
        mode: Mode::AllCloud,
        uplink: Transport::Kafka(format!("{broker}/{topic}")),
        dump_state: true,
        ..CloudOptions::default()
    };
    Cloud::bind(p, d, &CostModel::from_spec(p), opts).unwrap()
}

/// Device `id`'s records of `lines` as its uplink makes them: items of 100 rides with the
/// watermark of out-of-orderness 60 after each, then the stream's end.
fn device_records(
    p: &clasp_core::Pipeline,
    id: &str,
    run: u64,
    lines: &[Vec<u8>],
) -> Vec<OutRecord> {
    let time = clasp_apps::registry().event_times(p).unwrap()[0].clone().unwrap();
    let key = kafka_stream::key(id, "rides");
    let mut records = Vec::new();
    let mut max = 0;
    for (seq, chunk) in lines.chunks(100).enumerate() {
        let mut batch = Batch::new();
        for l in chunk {
            batch.push(p.sources[0].key_of(l), l);
            max = max.max(time(l).unwrap());
        }
        let item =
            Item { seq: seq as u64, origin_ns: 1, watermark: Some(max - 61), records: &batch };
        records.push(kafka_stream::item_record(&key, run, &item));
    }
    let end = StreamEnd {
        items: lines.chunks(100).len() as u64,
        records: lines.len() as u64,
        pipeline: "taxi-w3".into(),
        mode: "all-cloud".into(),
    };
    records.push(kafka_stream::end_record(&key, run, &end));
    records
}

#[test]
fn items_produced_twice_are_taken_once() {
    let Some(broker) = broker() else { return };
    let _one = clasp_core::sync::lock(&SERIAL);
    logs();
    let p = clasp_apps::pipeline("taxi-w3").unwrap();
    let d = two_devices(&p);
    let lines = clasp_apps::profile::generate("taxi-w3", 6_000, SEED).unwrap();
    let expected = reference::expected("taxi-w3", &p, &lines).unwrap();
    let rides = &lines[0].1;
    let share =
        |first: usize| -> Vec<Vec<u8>> { rides.iter().skip(first).step_by(2).cloned().collect() };
    // One partition: a's records, all read before b's end ends the run.
    let topic = fresh_topic(&broker, "twice", 1);
    // What a device whose acknowledgements were lost leaves in the topic: each of its items
    // produced again right after the first time, and its end twice.
    let mut twice = Vec::new();
    for r in device_records(&p, "a", 11, &share(0)) {
        twice.push(r.clone());
        twice.push(r);
    }
    let b = device_records(&p, "b", 12, &share(1));
    let (a_items, b_items) = (twice.len() / 2 - 1, b.len() - 1);
    twice.extend(b);
    RecordProducer::open(&format!("{broker}/{topic}")).unwrap().produce(twice).unwrap();

    let cloud = cloud_on(&p, &d, &broker, &topic);
    let sink = CollectSink::default();
    let report = cloud.run(&clasp_apps::registry(), Box::new(sink.clone())).unwrap();
    let mut results = sink.results();
    results.add_state_dump(report.state.as_deref().unwrap_or_default());
    let got = outcome_of(&p, &results);
    reference::check_order_insensitive("taxi-w3", &p, &expected, &got).unwrap();
    let [a, b] = &report.links[..] else { panic!("{:?}", report.links) };
    // Every item and the end once more: discarded.
    assert_eq!((a.frames, a.duplicates), (a_items as u64, a_items as u64 + 1));
    assert_eq!((b.frames, b.duplicates), (b_items as u64, 0));
    assert_eq!(report.items(), rides.len() as u64);
}

/// The cloud's error on a topic holding `records` of device `a` (device `b` well-formed).
fn cloud_error(broker: &str, name: &str, records: Vec<OutRecord>) -> String {
    let p = clasp_apps::pipeline("taxi-w3").unwrap();
    let d = two_devices(&p);
    let topic = fresh_topic(broker, name, 1);
    let lines = clasp_apps::profile::generate("taxi-w3", 300, SEED).unwrap();
    let mut all = records;
    all.extend(device_records(&p, "b", 2, &lines[0].1));
    RecordProducer::open(&format!("{broker}/{topic}")).unwrap().produce(all).unwrap();
    let cloud = cloud_on(&p, &d, broker, &topic);
    let e = cloud.run(&clasp_apps::registry(), Box::new(CollectSink::default())).unwrap_err();
    e.to_string()
}

#[test]
fn records_that_are_no_devices_are_refused_naming_where_they_are() {
    let Some(broker) = broker() else { return };
    let _one = clasp_core::sync::lock(&SERIAL);
    let p = clasp_apps::pipeline("taxi-w3").unwrap();
    let lines = clasp_apps::profile::generate("taxi-w3", 300, SEED).unwrap();
    let good = device_records(&p, "a", 1, &lines[0].1);
    let garbled = |mut r: OutRecord| {
        r.value = b"not an item".to_vec();
        r
    };
    let e = cloud_error(&broker, "garbled", vec![good[0].clone(), garbled(good[1].clone())]);
    assert!(e.contains("partition 0 offset 1: the value is not a cut-stream item"), "{e}");
    let mut stranger = good[0].clone();
    stranger.key = b"z/rides".to_vec();
    let e = cloud_error(&broker, "stranger", vec![stranger]);
    assert!(e.contains("offset 0: device `z` is not in the cloud's devices file"), "{e}");
    // A device that restarted numbers its items afresh: its new run is refused, not merged.
    let restarted = device_records(&p, "a", 2, &lines[0].1);
    let e = cloud_error(&broker, "restarted", vec![good[0].clone(), restarted[0].clone()]);
    assert!(e.contains("offset 1: a record of another run of device `a`"), "{e}");
    let gap = vec![good[0].clone(), good[2].clone()];
    let e = cloud_error(&broker, "gap", gap);
    assert!(e.contains("item 2 arrived, item 1 was next"), "{e}");
}

#[test]
fn an_unreachable_broker_fails_at_once_naming_it() {
    let p = clasp_apps::pipeline("taxi-w3").unwrap();
    let d = two_devices(&p);
    let model = CostModel::from_spec(&p);
    let mut o = DeviceOptions::new("a", "", inputs(&p, 100));
    o.mode = Mode::AllCloud;
    o.uplink = Transport::parse("kafka:127.0.0.1:1/cut").unwrap();
    let e = device::run(&p, &d, &model, &clasp_apps::registry(), &o).unwrap_err();
    assert!(matches!(e, EdgeError::Kafka { .. }), "{e:?}");
    assert!(e.to_string().contains("cannot reach the Kafka broker at 127.0.0.1:1"), "{e}");
    let opts = CloudOptions {
        uplink: Transport::parse("kafka:127.0.0.1:1/cut").unwrap(),
        ..CloudOptions::default()
    };
    let e = Cloud::bind(&p, &d, &model, opts).unwrap_err().to_string();
    assert!(e.contains("the cloud: the Kafka uplink `127.0.0.1:1/cut`: cannot reach"), "{e}");
}
