//! `clasp cut`: split a pipeline between edge devices and the cloud (edgecut, the Planner
//! paper's Algorithm 1 with an exact minimum cut).

use anyhow::{Context, Result, anyhow};
use clasp_core::Pipeline;
use clasp_core::stats::ObservedStats;
use clasp_plan::edgecut::{self, CostModel, CutReport, DevicePart, Devices, EdgeCut};
use std::path::PathBuf;

/// Arguments of `clasp cut`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Pipeline spec (TOML).
    pub pipeline: PathBuf,
    /// Devices file (TOML, see docs/devices-format.md): devices, their sources, link costs and
    /// constraints.
    #[arg(long)]
    pub devices: PathBuf,
    /// Observed statistics (`clasp run --stats`): observed selectivities replace the spec's.
    #[arg(long)]
    pub stats: Option<PathBuf>,
    /// Print the cut as JSON.
    #[arg(long, conflicts_with = "dot")]
    pub json: bool,
    /// Print the cut as a Graphviz graph, cut streams in red.
    #[arg(long)]
    pub dot: bool,
}

/// Runs `clasp cut`.
pub fn run(args: &Args) -> Result<()> {
    let p = super::load_pipeline(&args.pipeline)?;
    let devices = edgecut::devices::load(&args.devices, &p).map_err(|e| anyhow!("{e}"))?;
    let model = cost_model(&p, args.stats.as_ref())?;
    let cut = edgecut::cut(&p, &model, &devices);
    if args.json {
        println!("{}", serde_json::to_string_pretty(&CutReport::new(&p, &cut))?);
    } else if args.dot {
        print!("{}", edgecut::dot::render(&p, &cut));
    } else {
        print_human(&p, &model, &devices, &cut);
    }
    Ok(())
}

/// The cost model from the spec, refined by the statistics file when one is given.
fn cost_model(p: &Pipeline, stats: Option<&PathBuf>) -> Result<CostModel> {
    let Some(path) = stats else { return Ok(CostModel::from_spec(p)) };
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("{file}: cannot read the statistics file"))?;
    let stats = ObservedStats::from_json(&text, &file, p).map_err(|e| anyhow!("{e}"))?;
    CostModel::with_observed(p, &stats).map_err(|e| anyhow!("{file}: {e}"))
}

fn print_human(p: &Pipeline, model: &CostModel, devices: &Devices, cut: &EdgeCut) {
    let groups = cut.groups.iter().map(|g| g.group).max().map_or(0, |g| g + 1);
    println!(
        "pipeline `{}`: {} device(s) in {groups} group(s) and {} subgroup(s)",
        p.name,
        devices.devices.len(),
        cut.groups.len()
    );
    println!("model (Table I, Eq. 2):");
    for &o in p.topological_order() {
        let (op, m) = (p.operator(o), model.operator(o));
        let origin = format!("{:?}", m.origin).to_lowercase();
        let replicable = if m.replicable { "locally replicable" } else { "cloud only" };
        println!(
            "  {:<20} {:<8} selectivity {} ({origin}), {replicable}",
            op.name,
            op.kind.as_str(),
            m.selectivity
        );
    }
    for g in &cut.groups {
        print_group(p, g);
    }
    let names: Vec<&str> =
        cut.cloud.operators.iter().map(|o| p.operator(*o).name.as_str()).collect();
    println!(
        "cloud: {}",
        if names.is_empty() { "(no operator)".into() } else { names.join(" -> ") }
    );
    println!(
        "edge->cloud cost: {} per second vs {} all in cloud ({})",
        number(cut.cost),
        number(cut.all_cloud_cost),
        percent(-cut.saving())
    );
}

fn print_group(p: &Pipeline, g: &DevicePart) {
    let sources: Vec<&str> = g.sources.iter().map(|s| p.sources[s.index()].name.as_str()).collect();
    println!(
        "group {} — {} device(s): {}; sources {}; link cost {} (sum)",
        g.group,
        g.devices.len(),
        g.devices.join(", "),
        sources.join(", "),
        number(g.link_cost)
    );
    println!("  constraint: {}", g.constraint);
    let ops: Vec<&str> = g.operators.iter().map(|o| p.operator(*o).name.as_str()).collect();
    let on = if ops.is_empty() {
        "(nothing: raw data goes to the cloud)".into()
    } else {
        ops.join(" -> ")
    };
    println!("  on each device: {on}");
    for c in &g.connectors {
        println!(
            "  cut {:>20} -> {:<20} {} items/s per device, cost {}",
            p.endpoint_name(c.from),
            p.endpoint_name(c.to),
            number(c.weight),
            number(c.cost)
        );
    }
    println!("  cost {} (all in cloud: {})", number(g.cost), number(g.all_cloud_cost));
}

/// At most three decimals, without trailing zeros.
fn number(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn percent(x: f64) -> String {
    format!("{:+.1}%", 100.0 * x)
}
