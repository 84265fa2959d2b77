//! `clasp bench <experiment>`: regenerate a figure, on the simulator or the real runtime.

use anyhow::{Result, anyhow};
use clasp_bench::{Engine, Options};
use std::path::PathBuf;

/// Arguments of `clasp bench`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The experiment: dispatch, wc, edge (the edge/cloud cut over emulated WAN links,
    /// `--set wan=auto|netns|user-space`).
    pub experiment: String,
    /// sim or runtime.
    #[arg(long, default_value = "runtime")]
    pub engine: Engine,
    /// Output directory (default out/bench/<experiment>/<engine>).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Seed.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// A reduced version that finishes in under a minute.
    #[arg(long)]
    pub quick: bool,
    /// Experiment settings `KEY=VALUE`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
}

/// Runs `clasp bench`.
pub fn run(args: &Args) -> Result<()> {
    let settings = args
        .set
        .iter()
        .map(|kv| {
            kv.split_once('=')
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .ok_or_else(|| anyhow!("--set `{kv}`: expected KEY=VALUE"))
        })
        .collect::<Result<Vec<_>>>()?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("out/bench/{}/{}", args.experiment, args.engine)));
    let o = Options {
        engine: args.engine,
        quick: args.quick,
        seed: args.seed,
        out: out.clone(),
        settings,
    };
    if args.experiment == "edge" {
        return super::edge::bench(args.quick, &out, args.seed, &o.settings);
    }
    let report = match (args.experiment.as_str(), args.engine) {
        ("dispatch", Engine::Runtime) => clasp_bench::runtime::dispatch::run(&o)?,
        ("wc", Engine::Runtime) => clasp_bench::runtime::wc::run(&o)?,
        ("migration", Engine::Runtime) => clasp_bench::runtime::migration::run(&o)?,
        ("coefficients", Engine::Runtime) => clasp_bench::runtime::coefficients::run(&o)?,
        ("end-to-end", Engine::Runtime) => clasp_bench::runtime::end_to_end::run(&o)?,
        (name, engine) => {
            return Err(anyhow!(
                "unknown experiment `{name}` on engine {engine}; valid: dispatch, wc (runtime), edge"
            ));
        }
    };
    for path in report.write(&out, &args.experiment)? {
        eprintln!("wrote {path}");
    }
    print!("{}", report.markdown());
    Ok(())
}
