//! The spec files in `pipelines/` have exactly the topologies of CLASP Fig. 1, Fig. 6 and the
//! Planner paper's Fig. 4–6.

use clasp_core::Pipeline;
use clasp_core::spec::load;
use std::path::PathBuf;

fn pipeline(name: &str) -> Pipeline {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../pipelines").join(name);
    load(&path).unwrap_or_else(|e| panic!("{e}"))
}

/// Operator-to-operator edges as "a->b", sorted.
fn edges(p: &Pipeline) -> Vec<String> {
    let mut v: Vec<String> = p
        .streams
        .iter()
        .filter_map(|s| {
            Some(format!(
                "{}->{}",
                p.operator(s.from.operator()?).name,
                p.operator(s.to.operator()?).name
            ))
        })
        .collect();
    v.sort();
    v
}

fn stateful(p: &Pipeline) -> Vec<&str> {
    p.operators.iter().filter(|o| o.stateful).map(|o| o.name.as_str()).collect()
}

#[test]
fn every_spec_file_is_valid() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../pipelines");
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            load(&path).unwrap_or_else(|e| panic!("{e}"));
            n += 1;
        }
    }
    assert!(n >= 11);
}

#[test]
fn clasp_fig1_topologies() {
    let wc = pipeline("wc.toml");
    assert_eq!(edges(&wc), ["split->count"]);
    assert_eq!(stateful(&wc), ["count"]);

    let sd = pipeline("sd.toml");
    assert_eq!(edges(&sd), ["moving_avg->spike_detect"]);
    assert_eq!(stateful(&sd), ["moving_avg"]);

    let aa = pipeline("aa.toml");
    assert_eq!(aa.operators.len(), 5);
    assert_eq!(
        edges(&aa),
        ["deserialize->filter", "filter->projection", "join->campaign", "projection->join"]
    );
    assert_eq!(stateful(&aa), ["join", "campaign"]);

    let pl = pipeline("pl.toml");
    assert_eq!(pl.operators.len(), 6);
    assert_eq!(stateful(&pl), ["aggregation"]);
    assert_eq!(pl.topological_order().len(), 6);

    let nwm = pipeline("nwm.toml");
    assert_eq!(nwm.operators.len(), 10);
    assert_eq!(
        edges(&nwm),
        [
            "aggregation->filter",
            "fail_filter->fail_parse",
            "fail_parse->aggregation",
            "filter->functor",
            "functor->join",
            "parse->split",
            "split->fail_filter",
            "split->success_filter",
            "success_filter->success_parse",
            "success_parse->join",
        ]
    );
    assert_eq!(stateful(&nwm), ["aggregation", "functor", "join"]);

    let etl = pipeline("etl.toml");
    assert_eq!(etl.operators.len(), 10);
    assert_eq!(
        edges(&etl),
        [
            "annotate->csv2senml",
            "annotate->table_insert",
            "csv2senml->publish",
            "filter_bloom->interpolation",
            "filter_range->filter_bloom",
            "interpolation->join",
            "join->annotate",
            "parse->filter_range",
            "table_insert->sink",
        ]
    );
    assert_eq!(stateful(&etl), ["filter_range", "filter_bloom", "interpolation", "join"]);

    let syn = pipeline("syn.toml");
    assert_eq!(syn.operators.len(), 10);
    assert_eq!(edges(&syn).len(), 9);
    assert!(stateful(&syn).is_empty());
}

#[test]
fn fig6_and_taxi_workflows() {
    let f6 = pipeline("fig6.toml");
    let rates: Vec<(String, f64)> = f6
        .streams
        .iter()
        .filter_map(|s| {
            let (a, b) = (s.from.operator()?, s.to.operator()?);
            Some((format!("{}->{}", f6.operator(a).name, f6.operator(b).name), s.rate?))
        })
        .collect();
    assert_eq!(rates.len(), 5);
    assert!(rates.contains(&("C->E".into(), 10.0)) && rates.contains(&("D->E".into(), 6.0)));

    let w1 = pipeline("taxi-w1.toml");
    assert_eq!(edges(&w1), ["filter_start_nyc->filter_duration"]);
    let w2 = pipeline("taxi-w2.toml");
    assert_eq!(w2.sources.len(), 2);
    assert_eq!(w2.operators.len(), 6);
    assert_eq!(stateful(&w2), ["join"]);
    let w3 = pipeline("taxi-w3.toml");
    assert_eq!(w3.operators.len(), 5);
    assert_eq!(stateful(&w3), ["window"]);
}
