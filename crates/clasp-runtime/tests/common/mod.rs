//! Helpers shared by the runtime's integration tests.
#![allow(dead_code)]

pub mod apps;

use clasp_core::input::MemoryLines;
use clasp_core::rng::SeededRng;
use clasp_core::{Pipeline, SourceId};
use clasp_runtime::cluster::{Cluster, Launch, contiguous_keys, spread};
use clasp_runtime::planner::{DiscardSink, Input, PlannerConfig};
use clasp_runtime::routing::RoutingPlan;
use rand::{RngExt, SeedableRng};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

pub fn pipeline(name: &str) -> Pipeline {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../pipelines").join(name);
    clasp_core::spec::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

/// A seeded text corpus: Zipf-like word choice, mixed case, punctuation, some non-ASCII.
pub fn corpus(seed: u64, lines: usize) -> Vec<Vec<u8>> {
    let vocab: Vec<String> = (0..2000).map(|i| format!("w{i}")).collect();
    let extras = ["The", "CAT", "naïve", "x-ray", "o'clock", "Straße"];
    let mut rng = SeededRng::seed_from_u64(seed);
    (0..lines)
        .map(|_| {
            let n = 1 + rng.random_range(0..19) as usize;
            let mut line = String::new();
            for i in 0..n {
                if i > 0 {
                    line.push_str(if rng.random_bool(0.1) { ", " } else { " " });
                }
                if rng.random_bool(0.05) {
                    line.push_str(extras[rng.random_range(0..extras.len() as u64) as usize]);
                } else {
                    // Zipf-like: rank ~ 1/u.
                    let r = ((1.0 / (rng.random::<f64>() + 1e-3)) as usize).min(vocab.len() - 1);
                    line.push_str(&vocab[r]);
                }
            }
            line.into_bytes()
        })
        .collect()
}

/// Word counts computed from scratch: words are maximal runs of alphanumeric characters,
/// lower-cased.
pub fn reference_word_count(lines: &[Vec<u8>]) -> BTreeMap<String, u64> {
    let mut counts = BTreeMap::new();
    for line in lines {
        let text = String::from_utf8_lossy(line);
        let mut word = String::new();
        for c in text.chars().chain(std::iter::once(' ')) {
            if c.is_alphanumeric() {
                word.extend(c.to_lowercase());
            } else if !word.is_empty() {
                *counts.entry(std::mem::take(&mut word)).or_insert(0) += 1;
            }
        }
    }
    counts
}

/// Parses a state dump into operator → key → value.
pub fn parse_dump(text: &[u8]) -> BTreeMap<String, BTreeMap<String, serde_json::Value>> {
    let mut out: BTreeMap<String, BTreeMap<String, serde_json::Value>> = BTreeMap::new();
    for line in text.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let v: serde_json::Value = serde_json::from_slice(line).expect("dump lines are JSON");
        let op = v["operator"].as_str().unwrap().to_owned();
        let key = v["key"].as_str().unwrap().to_owned();
        assert!(out.entry(op).or_default().insert(key, v["value"].clone()).is_none(), "key twice");
    }
    out
}

pub fn config(batch_size: u32) -> PlannerConfig {
    let mut c = PlannerConfig { batch_size, ..PlannerConfig::default() };
    c.settings.batch_size = batch_size;
    c.settings.interval_ms = 200;
    c.settings.key_groups = 64;
    c
}

/// Starts a cluster with every operator spread over `workers` workers.
pub fn start(p: &Pipeline, workers: u32, batch_size: u32, launch: Launch) -> Cluster {
    let c = Cluster::start(
        p.clone(),
        config(batch_size),
        Box::new(DiscardSink),
        launch,
        workers as usize,
        4,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let placement = spread(p, workers, 4);
    let keys = contiguous_keys(p, &placement, 64);
    c.planner.install(RoutingPlan { epoch: 1, placement, keys }).unwrap();
    c
}

pub fn unthrottled(lines: &Arc<Vec<Vec<u8>>>, source: SourceId) -> Input {
    Input {
        source,
        reader: clasp_core::source::from_lines(
            Box::new(MemoryLines::new(lines.clone(), 0, 1)),
            None,
        ),
        rate: Box::new(|_| None),
    }
}

pub fn threads() -> Launch {
    Launch::Threads(clasp_apps::registry())
}

/// `(worker, fraction, instances)` of one operator on one worker.
pub type Slot = (u32, f64, u32);

/// A placement from `(operator, [(worker, fraction, instances)])` entries.
pub fn placement_of(
    p: &Pipeline,
    workers: u32,
    entries: &[(&str, &[Slot])],
) -> clasp_core::placement::Placement {
    use clasp_core::placement::{OperatorPlacement, Placement, Share};
    let mut ops: Vec<OperatorPlacement> = p
        .operators
        .iter()
        .map(|o| OperatorPlacement { operator: o.id, demand: 0.0, shares: Vec::new() })
        .collect();
    for (name, shares) in entries {
        let id = p.operator_id(name).unwrap_or_else(|| panic!("no operator {name}"));
        ops[id.index()].shares = shares
            .iter()
            .map(|&(w, fraction, instances)| Share {
                worker: clasp_core::WorkerId(w),
                share: 0.0,
                fraction,
                instances,
            })
            .collect();
    }
    let placement = Placement { workers, operators: ops };
    placement.check(p).unwrap();
    placement
}

/// The `count` values of a WC state dump.
pub fn counts(dump: &[u8]) -> BTreeMap<String, u64> {
    parse_dump(dump)
        .remove("count")
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.as_u64().unwrap()))
        .collect()
}

/// Input paced at `rate` requests per second.
pub fn paced(lines: &Arc<Vec<Vec<u8>>>, source: SourceId, rate: f64) -> Input {
    Input {
        source,
        reader: clasp_core::source::from_lines(
            Box::new(MemoryLines::new(lines.clone(), 0, 1)),
            None,
        ),
        rate: Box::new(move |_| Some(rate)),
    }
}
