//! Parse throughput of the operators that read JSON — `aa.deserialize` (YSB events) and
//! `etl.senml_parse` (SenML messages) — and of one that reads dates, `taxi.filter_nyc` (two
//! `YYYY-MM-DD HH:MM:SS` times per TaxiRide line), on seeded generated lines, in batches of
//! 256.
//!
//! Run: `CARGO_TARGET_DIR=... cargo bench -p clasp-apps --bench parse`.

use clasp_apps::{aa, etl, taxi};
use clasp_core::operator::Rejections;
use clasp_core::state::KeyedStore;
use clasp_core::{Batch, Context, DynOperator, Emitter, Operator};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use std::time::Duration;

const LINES: usize = 20_000;
const BATCH: usize = 256;

/// Counts what it is given, so the measurement is the operator's own work.
#[derive(Debug, Default)]
struct Counting {
    bytes: usize,
}

impl Emitter for Counting {
    fn emit(&mut self, key: &[u8], value: &[u8]) {
        self.bytes += key.len() + value.len();
    }
    fn emit_to(&mut self, _port: usize, key: &[u8], value: &[u8]) {
        self.emit(key, value);
    }
    fn emit_timed(&mut self, _port: Option<usize>, _time: u64, key: &[u8], value: &[u8]) {
        self.emit(key, value);
    }
}

fn batches(mut next_line: impl FnMut(&mut Vec<u8>)) -> (Vec<Batch>, u64) {
    let mut line = Vec::new();
    let lines: Vec<Vec<u8>> = (0..LINES)
        .map(|_| {
            next_line(&mut line);
            line.clone()
        })
        .collect();
    let bytes = lines.iter().map(|l| l.len() as u64).sum();
    let batches =
        lines.chunks(BATCH).map(|c| c.iter().map(|l| (&b""[..], l.as_slice())).collect()).collect();
    (batches, bytes)
}

fn run<O: Operator<State = ()>>(op: &O, batches: &[Batch]) -> usize {
    let store = KeyedStore::new(1);
    let mut out = Counting::default();
    let mut rejects = Rejections::default();
    for b in batches {
        op.process(b, &mut Context::new(&store, &mut out, 0, &mut rejects));
    }
    assert_eq!(rejects.total(), 0, "generated lines were rejected");
    out.bytes
}

fn run_dyn(op: &dyn DynOperator, batches: &[Batch]) -> usize {
    let store = op.new_store(1);
    let mut out = Counting::default();
    let mut rejects = Rejections::default();
    for b in batches {
        op.process(b, 0, None, &*store, &mut out, &mut rejects);
    }
    assert_eq!(rejects.total(), 0, "generated lines were rejected");
    out.bytes
}

fn parse(c: &mut Criterion) {
    let mut g = c.benchmark_group("parse");
    g.measurement_time(Duration::from_secs(5));
    let mut events = aa::Generator::new(1);
    let (aa_batches, aa_bytes) = batches(|l| events.next_line(l));
    g.throughput(Throughput::Bytes(aa_bytes));
    g.bench_function("aa.deserialize", |b| {
        b.iter(|| black_box(run(&aa::Deserialize_, &aa_batches)))
    });
    let mut messages = etl::Generator::new(1);
    let (etl_batches, etl_bytes) = batches(|l| messages.next_line(l));
    g.throughput(Throughput::Bytes(etl_bytes));
    g.bench_function("etl.senml_parse", |b| {
        b.iter(|| black_box(run(&etl::SenmlParse, &etl_batches)))
    });
    let mut rides = taxi::RideGenerator::new(1);
    let (ride_batches, ride_bytes) = batches(|l| rides.next_line(l));
    let registry = clasp_apps::registry();
    let spec = clasp_apps::pipeline("taxi-w3").unwrap();
    let filter = spec.operators.iter().find(|o| o.function == "taxi.filter_nyc").unwrap();
    let filter = registry.instantiate(filter).unwrap();
    g.throughput(Throughput::Bytes(ride_bytes));
    g.bench_function("taxi.filter_nyc", |b| b.iter(|| black_box(run_dyn(&*filter, &ride_batches))));
    g.finish();
}

criterion_group!(benches, parse);
criterion_main!(benches);
