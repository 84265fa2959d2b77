//! Property test: on seeded random pipelines of up to 12 operators and random devices and
//! constraints, edgecut's device sets satisfy Eq. 7 and cost exactly the brute-force minimum
//! over all feasible device sets, device by device, with the same tie-broken choice.

mod edgecut_reference;

use clasp_core::rng::{SeededRng, independent_stream};
use clasp_core::{OperatorKind, Pipeline, spec};
use clasp_plan::edgecut::{self, CostModel, Devices};
use edgecut_reference as reference;
use rand::RngExt;
use std::fmt::Write;

/// How values are drawn: from small dyadic sets (exact arithmetic, frequent ties) or continuous.
#[derive(Clone, Copy, Debug)]
enum Values {
    Exact,
    Continuous,
}

const REPLICABLE: [OperatorKind; 7] = [
    OperatorKind::Map,
    OperatorKind::FlatMap,
    OperatorKind::Filter,
    OperatorKind::Split,
    OperatorKind::Select,
    OperatorKind::Union,
    OperatorKind::User,
];

fn pick<'a, T>(rng: &mut SeededRng, v: &'a [T]) -> &'a T {
    &v[rng.random_range(0..v.len() as u64) as usize]
}

fn selectivity(rng: &mut SeededRng, values: Values) -> f64 {
    match values {
        Values::Exact => *pick(rng, &[0.0, 0.25, 0.5, 0.75, 1.0, 1.0, 1.5, 2.0]),
        Values::Continuous => rng.random_range(0.0..1.6),
    }
}

/// A random acyclic pipeline: every operator takes one or two inputs from sources or earlier
/// operators (stateful ones from operators only), unused sources and some operators feed sinks.
fn random_pipeline(rng: &mut SeededRng, values: Values) -> String {
    let (n_src, n_ops) =
        (1 + rng.random_range(0..3) as usize, 1 + rng.random_range(0..12) as usize);
    let mut t = String::new();
    for s in 0..n_src {
        let rate = match values {
            Values::Exact => 12.0 * (1 + rng.random_range(0..20)) as f64,
            Values::Continuous => rng.random_range(1.0..1000.0),
        };
        let _ = writeln!(t, "[[source]]\nname = \"s{s}\"\nrate = {rate}\nkey_field = 0");
    }
    let mut streams: Vec<(String, String)> = Vec::new();
    for o in 0..n_ops {
        // Mostly locally replicable kinds, so that devices have something to run.
        let kind = if rng.random_bool(0.75) {
            *pick(rng, &REPLICABLE)
        } else {
            *pick(rng, &OperatorKind::ALL)
        };
        let may_hold_state = o > 0 && !matches!(kind, OperatorKind::Map | OperatorKind::Filter);
        let stateful = may_hold_state && rng.random_bool(0.2);
        let _ = writeln!(t, "[[operator]]\nname = \"o{o}\"\nkind = \"{kind}\"");
        let _ = writeln!(t, "function = \"{}\"", pick(rng, &["f.a", "f.b", "g.a"]));
        if stateful {
            t.push_str("stateful = true\nkey = \"k\"\n");
        }
        if rng.random_bool(0.8) {
            let _ = writeln!(t, "selectivity = {}", selectivity(rng, values));
        }
        let mut inputs: Vec<String> = Vec::new();
        for _ in 0..1 + rng.random_range(0..2) {
            let from = if stateful || (o > 0 && rng.random_bool(0.7)) {
                format!("o{}", rng.random_range(0..o as u64))
            } else {
                format!("s{}", rng.random_range(0..n_src as u64))
            };
            if !inputs.contains(&from) {
                inputs.push(from);
            }
        }
        streams.extend(inputs.into_iter().map(|from| (from, format!("o{o}"))));
    }
    let n_sinks = 1 + rng.random_range(0..2) as usize;
    for k in 0..n_sinks {
        let _ = writeln!(t, "[[sink]]\nname = \"k{k}\"");
        streams.push((format!("o{}", rng.random_range(0..n_ops as u64)), format!("k{k}")));
    }
    for o in 0..n_ops {
        let sink = format!("k{}", rng.random_range(0..n_sinks as u64));
        if rng.random_bool(0.3) && !streams.contains(&(format!("o{o}"), sink.clone())) {
            streams.push((format!("o{o}"), sink));
        }
    }
    for s in 0..n_src {
        if !streams.iter().any(|(from, _)| *from == format!("s{s}")) {
            streams.push((format!("s{s}"), "k0".into()));
        }
    }
    for (from, to) in streams {
        let _ = writeln!(t, "[[stream]]\nfrom = \"{from}\"\nto = \"{to}\"");
    }
    t
}

/// Random devices: random sources and constraints, some copies (groups and subgroups), the
/// sources no device holds in the cloud.
fn random_devices(rng: &mut SeededRng, p: &Pipeline, values: Values) -> String {
    let mut t = String::new();
    let mut held = vec![false; p.sources.len()];
    let mut previous = String::new();
    for d in 0..1 + rng.random_range(0..4) {
        let _ = writeln!(t, "[[device]]\nid = \"d{d}\"");
        if d > 0 && rng.random_bool(0.3) {
            t.push_str(&previous);
            continue;
        }
        let mut body = String::new();
        let mut sources: Vec<String> = Vec::new();
        for s in &p.sources {
            if rng.random_bool(0.75) {
                sources.push(format!("\"{}\"", s.name));
                held[s.id.index()] = true;
            }
        }
        if sources.is_empty() {
            sources.push(format!("\"{}\"", p.sources[0].name));
            held[0] = true;
        }
        let _ = writeln!(body, "sources = [{}]", sources.join(", "));
        let link = match values {
            Values::Exact => *pick(rng, &[0.0, 0.5, 1.0, 1.0, 2.0, 3.0]),
            Values::Continuous => rng.random_range(0.0..4.0),
        };
        let _ = writeln!(body, "link_cost = {link}");
        constraint(rng, &mut body, values);
        t.push_str(&body);
        previous = body;
    }
    let cloud: Vec<String> = p
        .sources
        .iter()
        .filter(|s| !held[s.id.index()])
        .map(|s| format!("\"{}\"", s.name))
        .collect();
    let _ = writeln!(t, "[cloud]\nsources = [{}]", cloud.join(", "));
    t
}

fn constraint(rng: &mut SeededRng, body: &mut String, values: Values) {
    if rng.random_bool(0.25) {
        let kinds: Vec<String> = OperatorKind::ALL
            .iter()
            .filter(|k| k.locally_replicable(false) && rng.random_bool(0.6))
            .map(|k| format!("\"{k}\""))
            .collect();
        let _ = writeln!(body, "kinds = [{}]", kinds.join(", "));
    }
    if rng.random_bool(0.2) {
        let f: Vec<&str> = ["\"f.*\"", "\"f.a\"", "\"g.a\"", "\"*\""]
            .into_iter()
            .filter(|_| rng.random_bool(0.5))
            .collect();
        let _ = writeln!(body, "functions = [{}]", f.join(", "));
    }
    if rng.random_bool(0.35) {
        let _ = writeln!(body, "max_operators = {}", rng.random_range(0..6));
    }
    if rng.random_bool(0.25) {
        let load = match values {
            Values::Exact => 12.0 * rng.random_range(0..40) as f64,
            Values::Continuous => rng.random_range(0.0..1500.0),
        };
        let _ = writeln!(body, "max_load = {load}");
    }
}

fn check_case(seed: u64, values: Values) {
    let mut rng = independent_stream(0x0ed9_ec07, seed);
    let spec_text = random_pipeline(&mut rng, values);
    let p = spec::parse(&spec_text, "random.toml")
        .unwrap_or_else(|e| panic!("seed {seed}: generated an invalid spec: {e}\n{spec_text}"));
    let devices_text = random_devices(&mut rng, &p, values);
    let devices: Devices = edgecut::devices::parse(&devices_text, "random-devices.toml", &p)
        .unwrap_or_else(|e| panic!("seed {seed}: invalid devices: {e}\n{devices_text}"));
    let cut = edgecut::cut(&p, &CostModel::from_spec(&p), &devices);
    let sel = reference::spec_selectivities(&p);
    let context = || format!("seed {seed} ({values:?})\n{spec_text}\n{devices_text}");
    let mut total = 0.0;
    for d in &devices.devices {
        let part = cut.part_of(&d.id).unwrap_or_else(|| panic!("{} has no part", d.id));
        let mut set = vec![false; p.operators.len()];
        part.operators.iter().for_each(|o| set[o.index()] = true);
        let w = reference::device_weights(&p, &devices, d, &sel);
        if let Err(e) = reference::eq7(&p, d, &set, &w) {
            panic!("{}: violates Eq. 7: {e}\n{}", d.id, context());
        }
        let best = reference::best(&p, &devices, d, &sel);
        let own = reference::cost(&p, d, &set, &w);
        let tol = 1e-9 * best.cost.max(1.0);
        assert!(
            (own - best.cost).abs() <= tol,
            "{}: cost {own} vs {}\n{}",
            d.id,
            best.cost,
            context()
        );
        if matches!(values, Values::Exact) && d.link_cost > 0.0 {
            let mut chosen: Vec<String> =
                part.operators.iter().map(|o| p.operator(*o).name.clone()).collect();
            chosen.sort_by_key(|n| p.operator_id(n).map(|o| o.index()));
            assert_eq!(chosen, best.chosen, "{}: tie rule\n{}", d.id, context());
        }
        total += best.cost;
    }
    assert!(
        (cut.cost - total).abs() <= 1e-9 * total.max(1.0),
        "total {} vs {total}\n{}",
        cut.cost,
        context()
    );
    assert!(cut.cost <= cut.all_cloud_cost + 1e-9 * cut.all_cloud_cost.max(1.0));
}

#[test]
fn cut_cost_equals_brute_force_minimum_exact_values() {
    for seed in 0..400 {
        check_case(seed, Values::Exact);
    }
}

#[test]
fn cut_cost_equals_brute_force_minimum_continuous_values() {
    for seed in 0..300 {
        check_case(seed, Values::Continuous);
    }
}
