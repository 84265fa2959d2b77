//! A Graphviz rendering of a cut: one cluster per device subgroup, one for the cloud, and the
//! cut streams drawn in bold red with their cost.

use super::part::EdgeCut;
use clasp_core::{Endpoint, Pipeline};
use std::fmt::Write;

/// The DOT text of `cut`, a cut of `p`.
pub fn render(p: &Pipeline, cut: &EdgeCut) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "digraph \"{}\" {{", escape(&p.name));
    out.push_str("  rankdir=LR;\n  node [shape=box, fontname=\"sans\"];\n");
    for (i, g) in cut.groups.iter().enumerate() {
        device_cluster(&mut out, p, cut, i);
        for &s in &g.streams {
            let st = p.stream(s);
            let (from, to) = (node(p, &format!("g{i}"), st.from), node(p, &format!("g{i}"), st.to));
            let _ = writeln!(out, "  {from} -> {to};");
        }
        for c in &g.connectors {
            let (from, to) = (node(p, &format!("g{i}"), c.from), node(p, "cloud", c.to));
            let _ = writeln!(
                out,
                "  {from} -> {to} [color=red, penwidth=2.5, label=\"cut: {}\", fontcolor=red];",
                number(c.cost)
            );
        }
    }
    cloud_cluster(&mut out, p, cut);
    for &s in &cut.cloud.streams {
        let st = p.stream(s);
        let _ = writeln!(out, "  {} -> {};", node(p, "cloud", st.from), node(p, "cloud", st.to));
    }
    let _ = writeln!(
        out,
        "  label=\"{}: edge->cloud cost {} vs {} all in cloud\";\n}}",
        escape(&p.name),
        number(cut.cost),
        number(cut.all_cloud_cost)
    );
    out
}

fn device_cluster(out: &mut String, p: &Pipeline, cut: &EdgeCut, i: usize) {
    let g = &cut.groups[i];
    let prefix = format!("g{i}");
    let _ = writeln!(out, "  subgraph cluster_g{i} {{");
    let _ = writeln!(
        out,
        "    label=\"group {} on {} device(s): {}\\n{}\"; style=dashed; color=blue;",
        g.group,
        g.devices.len(),
        g.devices.join(", "),
        escape(&g.constraint.to_string())
    );
    for &s in &g.sources {
        declare(out, p, &prefix, Endpoint::Source(s), ", shape=ellipse");
    }
    for &o in &g.operators {
        declare(out, p, &prefix, Endpoint::Operator(o), "");
    }
    out.push_str("  }\n");
}

fn cloud_cluster(out: &mut String, p: &Pipeline, cut: &EdgeCut) {
    out.push_str("  subgraph cluster_cloud {\n    label=\"cloud\"; style=solid; color=gray;\n");
    for &s in &cut.cloud.sources {
        declare(out, p, "cloud", Endpoint::Source(s), ", shape=ellipse");
    }
    for &o in &cut.cloud.operators {
        declare(out, p, "cloud", Endpoint::Operator(o), "");
    }
    for sink in &p.sinks {
        declare(out, p, "cloud", Endpoint::Sink(sink.id), ", shape=house");
    }
    out.push_str("  }\n");
}

/// Declares the node of `e` in `part`, labelled with its name.
fn declare(out: &mut String, p: &Pipeline, part: &str, e: Endpoint, attrs: &str) {
    let _ = writeln!(out, "    {} [label=\"{}\"{attrs}];", node(p, part, e), p.endpoint_name(e));
}

/// A node id unique per part.
fn node(p: &Pipeline, part: &str, e: Endpoint) -> String {
    format!("\"{part}/{}\"", p.endpoint_name(e))
}

/// `s` inside a DOT double-quoted string.
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// A cost with at most three decimals, without trailing zeros.
pub(crate) fn number(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}
