//! The Planner paper's workflows w1–w3 (Fig. 4–6) on five devices, the tie rule, subgroups and
//! observed statistics — each result checked against the brute-force reference.

mod edgecut_reference;

use clasp_core::Pipeline;
use clasp_core::spec;
use clasp_core::stats::{ObservedStats, OperatorStats};
use clasp_plan::edgecut::{self, CostModel, Devices, EdgeCut};
use edgecut_reference as reference;
use std::path::PathBuf;

fn repo(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..").join(path)
}

fn load(pipeline: &str, devices: &str) -> (Pipeline, Devices) {
    let p = spec::load(&repo(pipeline)).unwrap();
    let d = edgecut::devices::load(&repo(devices), &p).unwrap();
    (p, d)
}

fn names(p: &Pipeline, ops: &[clasp_core::OperatorId]) -> Vec<String> {
    ops.iter().map(|o| p.operator(*o).name.clone()).collect()
}

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

/// Checks `cut` against the reference device by device: same sets, same total cost.
fn check_against_reference(p: &Pipeline, devices: &Devices, sel: &[f64], cut: &EdgeCut) {
    let mut total = 0.0;
    let mut all_cloud = 0.0;
    for d in &devices.devices {
        let best = reference::best(p, devices, d, sel);
        let part = cut.part_of(&d.id).unwrap();
        if d.link_cost > 0.0 {
            assert_eq!(sorted(names(p, &part.operators)), sorted(best.chosen.clone()), "{}", d.id);
        }
        total += best.cost;
        let w = reference::device_weights(p, devices, d, sel);
        all_cloud += reference::cost(p, d, &vec![false; p.operators.len()], &w);
    }
    assert!((cut.cost - total).abs() <= 1e-9 * total.max(1.0), "{} vs {total}", cut.cost);
    assert!((cut.all_cloud_cost - all_cloud).abs() <= 1e-9 * all_cloud.max(1.0));
}

fn spec_cut(p: &Pipeline, d: &Devices) -> EdgeCut {
    let cut = edgecut::cut(p, &CostModel::from_spec(p), d);
    check_against_reference(p, d, &reference::spec_selectivities(p), &cut);
    cut
}

#[test]
fn w1_runs_both_filters_on_the_devices() {
    let (p, d) = load("pipelines/taxi-w1.toml", "devices/taxi-w1.toml");
    let cut = spec_cut(&p, &d);
    assert_eq!(cut.groups.len(), 1);
    assert_eq!(cut.groups[0].devices.len(), 5);
    assert_eq!(names(&p, &cut.groups[0].operators), ["filter_start_nyc", "filter_duration"]);
    assert!(cut.cloud.operators.is_empty());
    let c = &cut.groups[0].connectors;
    assert_eq!(c.len(), 1);
    assert_eq!(
        (p.endpoint_name(c[0].from), p.endpoint_name(c[0].to)),
        ("filter_duration", "kafka")
    );
    assert!(cut.cost < cut.all_cloud_cost);
}

#[test]
fn w2_runs_everything_before_the_join_on_the_devices() {
    let (p, d) = load("pipelines/taxi-w2.toml", "devices/taxi-w2.toml");
    let cut = spec_cut(&p, &d);
    assert_eq!(cut.groups.len(), 1);
    let on_device = sorted(names(&p, &cut.groups[0].operators));
    let before_join: Vec<String> =
        p.operators.iter().filter(|o| o.name != "join").map(|o| o.name.clone()).collect();
    assert_eq!(on_device, sorted(before_join));
    assert_eq!(names(&p, &cut.cloud.operators), ["join"]);
    for c in &cut.groups[0].connectors {
        assert_eq!(p.endpoint_name(c.to), "join");
    }
    assert_eq!(cut.cloud.ingress.len(), 2);
}

#[test]
fn w3_keeps_the_window_and_everything_after_it_in_the_cloud() {
    let (p, d) = load("pipelines/taxi-w3.toml", "devices/taxi-w3.toml");
    let cut = spec_cut(&p, &d);
    assert_eq!(names(&p, &cut.groups[0].operators), ["filter_nyc", "to_cell"]);
    assert_eq!(names(&p, &cut.cloud.operators), ["window", "filter_popular", "to_area"]);
    let c = &cut.groups[0].connectors;
    assert_eq!((p.endpoint_name(c[0].from), p.endpoint_name(c[0].to)), ("to_cell", "window"));
}

/// w3's map and w2's flatmap have selectivity 1: cutting before or after them costs the same.
/// The tie rule keeps the larger device set.
#[test]
fn tie_rule_keeps_the_most_operators_on_the_devices() {
    for (w, extra) in [("w3", "to_cell"), ("w2", "fare_fields")] {
        let (p, d) = load(&format!("pipelines/taxi-{w}.toml"), &format!("devices/taxi-{w}.toml"));
        let best = reference::best(&p, &d, &d.devices[0], &reference::spec_selectivities(&p));
        assert!(best.ties >= 2, "{w}: the reference finds {} cheapest sets", best.ties);
        let cut = spec_cut(&p, &d);
        assert!(names(&p, &cut.groups[0].operators).contains(&extra.to_string()), "{w}");
    }
}

const TWO_BRANCHES: &str = r#"
[[source]]
name = "in"
rate = 8
[[operator]]
name = "a"
kind = "filter"
[[operator]]
name = "b"
kind = "filter"
[[sink]]
name = "out"
[[stream]]
from = "in"
to = "a"
[[stream]]
from = "in"
to = "b"
[[stream]]
from = "a"
to = "out"
[[stream]]
from = "b"
to = "out"
"#;

/// With a budget of one operator, {a} and {b} cost the same and have as many operators: the
/// smaller ids win. Without the budget both run on the device.
#[test]
fn tie_rule_with_a_budget_prefers_operators_declared_first() {
    let p = spec::parse(TWO_BRANCHES, "two.toml").unwrap();
    let budget = "[[device]]\nid = \"d\"\nsources = [\"in\"]\nmax_operators = 1\n";
    let d = edgecut::devices::parse(budget, "d.toml", &p).unwrap();
    let cut = spec_cut(&p, &d);
    assert_eq!(names(&p, &cut.groups[0].operators), ["a"]);
    let best = reference::best(&p, &d, &d.devices[0], &reference::spec_selectivities(&p));
    assert_eq!(best.ties, 3, "{{}}, {{a}} and {{b}} all cost 16");
    let free = "[[device]]\nid = \"d\"\nsources = [\"in\"]\n";
    let d = edgecut::devices::parse(free, "d.toml", &p).unwrap();
    assert_eq!(names(&p, &spec_cut(&p, &d).groups[0].operators), ["a", "b"]);
}

#[test]
fn mixed_devices_form_groups_and_subgroups() {
    let (p, d) = load("pipelines/taxi-w2.toml", "devices/taxi-w2-mixed.toml");
    let cut = spec_cut(&p, &d);
    let shape: Vec<(usize, Vec<String>)> =
        cut.groups.iter().map(|g| (g.group, g.devices.clone())).collect();
    let ids = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    assert_eq!(
        shape,
        [
            (0, ids(&["edge-1", "edge-2", "edge-3"])),
            (0, ids(&["edge-4", "edge-5"])),
            (1, ids(&["edge-6"]))
        ]
    );
    // The filter-only subgroup stops early, so the cloud also runs what it skips.
    let restricted = &cut.groups[1];
    assert!(restricted.operators.len() <= 2);
    let cloud = names(&p, &cut.cloud.operators);
    for o in p.operators.iter().filter(|o| !restricted.operators.contains(&o.id)) {
        assert!(cloud.contains(&o.name), "{} runs nowhere for edge-4/5's data", o.name);
    }
    // Every cut stream of every group enters the cloud part.
    for g in &cut.groups {
        for c in &g.connectors {
            assert!(cut.cloud.ingress.contains(&c.stream));
            let into_cloud = match c.to {
                clasp_core::Endpoint::Operator(o) => cut.cloud.operators.contains(&o),
                clasp_core::Endpoint::Sink(_) => true,
                clasp_core::Endpoint::Source(_) => false,
            };
            assert!(into_cloud);
        }
    }
}

#[test]
fn observed_selectivity_moves_the_cut() {
    let (p, d) = load("pipelines/taxi-w2.toml", "devices/taxi-w2.toml");
    // fare_fields turns out to emit three items per fare: it is cheaper to ship the fares.
    let stats = ObservedStats {
        operators: vec![OperatorStats {
            name: "fare_fields".into(),
            processed_rate: 100.0,
            selectivity: 3.0,
            ..OperatorStats::default()
        }],
        ..ObservedStats::default()
    };
    let model = CostModel::with_observed(&p, &stats).unwrap();
    let cut = edgecut::cut(&p, &model, &d);
    let mut sel = reference::spec_selectivities(&p);
    sel[p.operator_id("fare_fields").unwrap().index()] = 3.0;
    check_against_reference(&p, &d, &sel, &cut);
    assert!(!names(&p, &cut.groups[0].operators).contains(&"fare_fields".to_string()));
    assert!(names(&p, &cut.cloud.operators).contains(&"fare_fields".to_string()));
}

#[test]
fn report_and_dot_name_the_parts() {
    let (p, d) = load("pipelines/taxi-w3.toml", "devices/taxi-w3.toml");
    let cut = spec_cut(&p, &d);
    let json = serde_json::to_value(edgecut::CutReport::new(&p, &cut)).unwrap();
    assert_eq!(json["groups"][0]["operators"], serde_json::json!(["filter_nyc", "to_cell"]));
    assert_eq!(json["groups"][0]["devices"].as_array().unwrap().len(), 5);
    assert_eq!(json["cloud"], serde_json::json!(["window", "filter_popular", "to_area"]));
    assert_eq!(json["cut_streams"][0]["from"], "to_cell");
    assert_eq!(json["cut_streams"][0]["to"], "window");
    assert_eq!(json["cost"].as_f64().unwrap(), cut.cost);
    assert_eq!(json["all_cloud_cost"].as_f64().unwrap(), cut.all_cloud_cost);
    let dot = edgecut::dot::render(&p, &cut);
    assert!(dot.starts_with("digraph \"taxi-w3\""));
    assert!(dot.contains("\"g0/to_cell\" -> \"cloud/window\" [color=red"));
    assert!(dot.contains("\"cloud/window\" -> \"cloud/filter_popular\";"));
}
