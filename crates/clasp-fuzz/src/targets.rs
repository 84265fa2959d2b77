//! The targets: what each feeds the bytes to, and its corpus of valid examples.

use clasp_core::local::{LocalDriver, LocalOptions};
use clasp_core::{Batch, OperatorId, Pipeline, SinkId, WorkerId};
use clasp_wire::auth::{self, AuthFrame, MAX_HANDSHAKE_FRAME, Party};
use clasp_wire::runtime::{
    self, CreditReturn, Cut, Hello, Limits, Message, MigrationData, Request, Role, StateGroup,
};
use clasp_wire::{FrameReader, Secret, edge, encode};
use std::io::{self, Read, Write};
use std::sync::OnceLock;

/// A fuzz target.
#[derive(Debug)]
pub struct Target {
    /// Its name (`--target NAME`).
    pub name: &'static str,
    /// Takes one input; must not panic.
    pub run: fn(&[u8]),
    /// Valid examples to mutate.
    pub corpus: fn() -> Vec<Vec<u8>>,
}

/// Every target.
pub const TARGETS: &[Target] = &[
    Target { name: "wire-runtime", run: wire_runtime, corpus: runtime_corpus },
    Target { name: "wire-edge", run: wire_edge, corpus: edge_corpus },
    Target { name: "handshake", run: handshake, corpus: handshake_corpus },
    Target { name: "spec", run: spec, corpus: spec_corpus },
    Target { name: "devices", run: devices, corpus: devices_corpus },
    Target { name: "records", run: records, corpus: records_corpus },
];

fn wc() -> &'static Pipeline {
    static P: OnceLock<Pipeline> = OnceLock::new();
    P.get_or_init(|| clasp_apps::pipeline("wc").expect("wc ships"))
}

fn frames<T: serde::Serialize>(msgs: &[T]) -> Vec<u8> {
    let mut b = Vec::new();
    for m in msgs {
        encode(m, &mut b);
    }
    b
}

/// Decodes frames until the stream ends or a frame is refused, as a receiving thread does.
fn decode_all<M, L>(bytes: &[u8], limits: &L)
where
    M: serde::de::DeserializeOwned + clasp_wire::Validate<L>,
{
    let mut r = FrameReader::with_capacity("fuzz", clasp_wire::DEFAULT_MAX_FRAME, 1024);
    let mut src = bytes;
    loop {
        match r.read_message::<M, L>(&mut src, limits) {
            Ok(Some(_)) => {}
            Err(clasp_wire::WireError::Invalid { .. }) => {}
            Ok(None) | Err(_) => return,
        }
    }
}

fn wire_runtime(bytes: &[u8]) {
    let limits = Limits::new(wc(), 64, 3);
    decode_all::<Message, _>(bytes, &limits);
    decode_all::<Message, _>(bytes, &Limits::handshake());
}

fn runtime_corpus() -> Vec<Vec<u8>> {
    let mut batch = Batch::new();
    batch.push(b"word", b"a line of words");
    let hello = Hello {
        role: Role::Worker,
        worker: Some(WorkerId(2)),
        slots: 4,
        listen: "127.0.0.1:7000".into(),
        pid: 9,
    };
    let msgs = vec![
        Message::Hello(hello),
        Message::Request(Request::new(OperatorId(1), 0, 7, 3, batch.clone())),
        Message::Requests(vec![Request::new(OperatorId(0), 0, 8, 2, batch.clone())]),
        Message::Credits(vec![CreditReturn { chain: 7, credit: 1 << 20, done_ns: 5 }]),
        Message::Sink { sink: SinkId(0), cut: Cut(3), batch: batch.clone() },
        Message::MigrationData(Box::new(MigrationData {
            epoch: 3,
            from: WorkerId(1),
            groups: vec![StateGroup {
                op: OperatorId(1),
                group: clasp_core::KeyGroup(5),
                keys: 1,
                bytes: vec![1, 2, 3],
            }],
            requests: vec![],
        })),
        Message::PeerJoined { worker: WorkerId(3), addr: "127.0.0.1:1".into() },
        Message::MeshReady(vec![WorkerId(0), WorkerId(1)]),
        Message::StateLines { operator: OperatorId(1), lines: b"{}\n".to_vec() },
        Message::ReportNow(4),
        Message::Shutdown,
    ];
    let mut corpus: Vec<Vec<u8>> = msgs.iter().map(|m| frames(std::slice::from_ref(m))).collect();
    corpus.push(frames(&msgs));
    corpus
}

fn wire_edge(bytes: &[u8]) {
    for connectors in [0, 2] {
        let limits = edge::Limits { connectors };
        decode_all::<edge::ToCloud, _>(bytes, &limits);
        decode_all::<edge::ToDevice, _>(bytes, &limits);
    }
}

fn edge_corpus() -> Vec<Vec<u8>> {
    let mut records = Batch::new();
    records.push_timed(b"17", b"17,END,2013-01-01 00:00:00", Some(1_356_998_400));
    let hello = edge::Hello {
        device: "edge-1".into(),
        pipeline: "taxi-w1".into(),
        mode: "cut".into(),
        operators: vec!["f".into()],
        connectors: vec!["f.out".into(), "g.out".into()],
    };
    let to_cloud = [
        edge::ToCloud::Hello(hello),
        edge::ToCloud::Data {
            connector: 1,
            item: edge::Item { seq: 0, origin_ns: 9, watermark: Some(1_356_998_000), records },
        },
        edge::ToCloud::End { sent: vec![1, 0] },
        edge::ToCloud::Bye,
    ];
    let to_device = [
        edge::ToDevice::Welcome { held: vec![0, 0] },
        edge::ToDevice::Start,
        edge::ToDevice::Ack { connector: 1, held: 1 },
        edge::ToDevice::Done { received: vec![1, 0] },
    ];
    let mut corpus: Vec<Vec<u8>> =
        to_cloud.iter().map(|m| frames(std::slice::from_ref(m))).collect();
    corpus.extend(to_device.iter().map(|m| frames(std::slice::from_ref(m))));
    corpus.push(frames(&to_cloud));
    corpus
}

/// Reads the input, discards what is written.
struct Scripted<'a>(&'a [u8]);

impl Read for Scripted<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        self.0.read(out)
    }
}

impl Write for Scripted<'_> {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn secret() -> &'static Secret {
    static S: OnceLock<Secret> = OnceLock::new();
    S.get_or_init(|| Secret::parse(&"k".repeat(40), "fuzz").expect("a valid secret"))
}

fn handshake(bytes: &[u8]) {
    let protocol = &runtime::PROTOCOL;
    // The listener's side: the preamble, then the proof.
    let mut s = Scripted(bytes);
    if protocol.read_preamble(&mut s, "fuzz").is_ok() {
        let mut r = FrameReader::with_capacity("fuzz", MAX_HANDSHAKE_FRAME, 256);
        let me = Party { protocol, secret: Some(secret()), identity: "planner" };
        let _ = auth::server(&mut s, &mut r, me, |id| {
            runtime::parse_worker_identity(id).map(drop).ok_or_else(String::new)
        });
    }
    // The dialer's side, reading a listener's answers.
    let mut s = Scripted(bytes);
    let mut r = FrameReader::with_capacity("fuzz", MAX_HANDSHAKE_FRAME, 256);
    let me = Party { protocol, secret: Some(secret()), identity: "worker:1" };
    let _ = auth::client(&mut s, &mut r, me, |_| Ok(()));
}

fn handshake_corpus() -> Vec<Vec<u8>> {
    let p = &runtime::PROTOCOL;
    let challenge =
        AuthFrame::Challenge { nonce: [3; 32], identity: "worker:1".into(), keyed: true };
    let proof = AuthFrame::Proof { mac: Some([7; 32]) };
    let answer =
        AuthFrame::Answer { nonce: [5; 32], identity: "planner".into(), mac: Some([1; 32]) };
    let with_preamble = |frames_: Vec<u8>| {
        let mut b = p.preamble().to_vec();
        b.extend(frames_);
        b
    };
    vec![
        with_preamble(frames(&[challenge.clone(), proof.clone()])),
        with_preamble(frames(&[challenge])),
        frames(&[answer, AuthFrame::Accepted]),
        frames(&[AuthFrame::Refused("no".into())]),
        with_preamble(frames(&[proof])),
    ]
}

fn spec(bytes: &[u8]) {
    let _ = clasp_core::spec::parse(&String::from_utf8_lossy(bytes), "fuzz.toml");
}

fn spec_corpus() -> Vec<Vec<u8>> {
    clasp_apps::APPS
        .iter()
        .filter_map(|a| clasp_apps::spec_text(a))
        .map(|t| t.as_bytes().to_vec())
        .collect()
}

const DEVICE_FILES: [(&str, &str); 3] = [
    ("taxi-w1", include_str!("../../../devices/taxi-w1.toml")),
    ("taxi-w2", include_str!("../../../devices/taxi-w2.toml")),
    ("taxi-w3", include_str!("../../../devices/taxi-w3.toml")),
];

fn taxis() -> &'static [&'static Pipeline] {
    static P: OnceLock<Vec<Pipeline>> = OnceLock::new();
    static REFS: OnceLock<Vec<&'static Pipeline>> = OnceLock::new();
    REFS.get_or_init(|| {
        P.get_or_init(|| {
            DEVICE_FILES.iter().map(|(app, _)| clasp_apps::pipeline(app).expect("ships")).collect()
        })
        .iter()
        .collect()
    })
}

/// Validated against every taxi pipeline, parsed once (a file names one pipeline, so the
/// others refuse it early; parsing it again for each would triple the work for nothing).
fn devices(bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    let _ = clasp_plan::edgecut::devices::parse_each(&text, "fuzz.toml", taxis());
}

fn devices_corpus() -> Vec<Vec<u8>> {
    DEVICE_FILES.iter().map(|(_, t)| t.as_bytes().to_vec()).collect()
}

fn apps() -> &'static [Pipeline] {
    static P: OnceLock<Vec<Pipeline>> = OnceLock::new();
    P.get_or_init(|| {
        clasp_apps::APPS.iter().map(|a| clasp_apps::pipeline(a).expect("ships")).collect()
    })
}

/// The first byte picks the application; the rest are lines for every one of its sources,
/// run through its operators (the parsers first) on one local driver.
fn records(bytes: &[u8]) {
    let Some((&pick, rest)) = bytes.split_first() else { return };
    let p = &apps()[pick as usize % apps().len()];
    let registry = registry();
    let Ok(mut d) = LocalDriver::new(p, registry, LocalOptions { batch_size: 16, key_groups: 4 })
    else {
        return;
    };
    for line in rest.split(|&b| b == b'\n') {
        for s in &p.sources {
            let key = s.key_of(line);
            d.push(s.id, key, line);
        }
    }
    d.flush();
}

fn registry() -> &'static clasp_core::Registry {
    static R: OnceLock<clasp_core::Registry> = OnceLock::new();
    R.get_or_init(clasp_apps::registry)
}

fn records_corpus() -> Vec<Vec<u8>> {
    let mut corpus = Vec::new();
    for (i, app) in clasp_apps::APPS.iter().enumerate() {
        let Ok(lines) = clasp_apps::profile::generate(app, 8, 1) else { continue };
        let mut b = vec![i as u8];
        for (_, ls) in lines {
            for l in ls {
                b.extend_from_slice(&l);
                b.push(b'\n');
            }
        }
        corpus.push(b);
    }
    corpus
}
