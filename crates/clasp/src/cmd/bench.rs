//! `clasp bench <experiment>`: runs one of the experiments (`clasp_bench::Experiment`) on the
//! simulator, the real runtime or the edge runner and writes its CSV tables, PNG charts and
//! markdown report into one directory; the markdown goes to stdout, the paths written and the
//! progress to stderr. Every argument and setting is checked before anything runs.

use anyhow::{Context, Result};
use clasp_bench::{Engine, Experiment, Options};
use std::path::PathBuf;

/// Arguments of `clasp bench`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The experiment: scaling, state-locality, migration, coefficients, placement,
    /// worker-count, end-to-end, validate (sim or runtime); dispatch, wc, recovery (runtime);
    /// edge (the edge/cloud cut over emulated WAN links).
    pub experiment: String,
    /// Where it runs: runtime (the real runtime on this machine, reduced scale), sim (the
    /// discrete-event simulator, paper scale) or edge. Default: runtime, or edge for `edge`.
    #[arg(long)]
    pub engine: Option<Engine>,
    /// Output directory (default: out/bench/<experiment>/<engine>; out/bench/edge for edge).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// A reduced version that finishes in about a minute.
    #[arg(long)]
    pub quick: bool,
    /// An experiment setting, KEY=VALUE (repeatable; the keys are in docs/bench.md).
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = Options::parse_setting)]
    pub settings: Vec<(String, String)>,
}

/// Runs `clasp bench`.
pub fn run(args: &Args) -> Result<()> {
    let experiment: Experiment = args.experiment.parse()?;
    let engine = args.engine.unwrap_or_else(|| experiment.default_engine());
    let out = args.out.clone().unwrap_or_else(|| experiment.default_out(engine));
    let opts = Options {
        engine,
        quick: args.quick,
        seed: args.seed,
        out: out.clone(),
        settings: args.settings.clone(),
    };
    let output = experiment.run(&opts)?;
    let written = output
        .write(&out, experiment.name())
        .with_context(|| format!("writing the results of `{experiment}`"))?;
    print!("{}", output.markdown());
    for path in written {
        eprintln!("wrote {path}");
    }
    Ok(())
}
