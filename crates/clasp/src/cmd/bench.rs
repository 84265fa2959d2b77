//! `clasp bench <experiment>`: runs one of the CLASP paper's experiments on the real runtime
//! or on the simulator and writes its CSV tables, PNG charts and markdown report into one
//! directory; the markdown goes to stdout, the paths written and the progress to stderr.
//! Every argument and setting is checked before anything runs.

use anyhow::{Context, Result};
use clasp_bench::report::Output;
use clasp_bench::{BenchError, Engine, Options, check_experiment};
use std::path::PathBuf;

/// Arguments of `clasp bench`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The experiment: scaling, state-locality, migration, coefficients, placement,
    /// worker-count, end-to-end, validate; on the runtime also dispatch and wc; edge (the
    /// edge/cloud cut over emulated WAN links, `--set wan=auto|netns|user-space`).
    pub experiment: String,
    /// Where it runs: runtime (the real runtime on this machine, reduced scale) or sim (the
    /// discrete-event simulator, paper scale).
    #[arg(long, default_value = "runtime")]
    pub engine: Engine,
    /// Output directory (default: out/bench/<experiment>/<engine>).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// A reduced version that finishes in under a minute.
    #[arg(long)]
    pub quick: bool,
    /// An experiment setting, KEY=VALUE (repeatable; see docs/bench.md).
    #[arg(long = "set", value_name = "KEY=VALUE", value_parser = Options::parse_setting)]
    pub settings: Vec<(String, String)>,
}

/// Runs `clasp bench`.
pub fn run(args: &Args) -> Result<()> {
    if args.experiment == "edge" {
        let out = args.out.clone().unwrap_or_else(|| PathBuf::from("out/bench/edge"));
        return super::edge::bench(args.quick, &out, args.seed, &args.settings);
    }
    check_experiment(&args.experiment)?;
    let out = args.out.clone().unwrap_or_else(|| {
        PathBuf::from("out/bench").join(&args.experiment).join(args.engine.to_string())
    });
    let opts = Options {
        engine: args.engine,
        quick: args.quick,
        seed: args.seed,
        out: out.clone(),
        settings: args.settings.clone(),
    };
    let output = match args.engine {
        Engine::Sim => {
            let ctx = clasp_bench::sim::Ctx::new(&args.experiment, &opts)?;
            clasp_bench::sim::run_ctx(&args.experiment, &ctx)?
        }
        Engine::Runtime => runtime(&args.experiment, &opts)?,
    };
    let written = output
        .write(&out, &args.experiment)
        .with_context(|| format!("writing the results of `{}`", args.experiment))?;
    print!("{}", output.markdown());
    for path in written {
        eprintln!("wrote {path}");
    }
    Ok(())
}

/// Runs `experiment` on the real runtime (`clasp_bench::runtime::<experiment>`).
fn runtime(experiment: &str, opts: &Options) -> Result<Output, BenchError> {
    use clasp_bench::runtime as rt;
    let report = match experiment {
        "scaling" => return rt::scaling::run(opts),
        "placement" => return rt::placement::run(opts),
        "worker-count" => return rt::worker_count::run(opts),
        "validate" => return rt::validate::run(opts),
        "state-locality" => return rt::state_locality::run(opts),
        "dispatch" => rt::dispatch::run(opts)?,
        "wc" => rt::wc::run(opts)?,
        "migration" => rt::migration::run(opts)?,
        "coefficients" => return rt::coefficients::run(opts),
        "end-to-end" => return rt::end_to_end::run(opts),
        other => {
            return Err(BenchError::Config(format!(
                "`{other}` is not available on the runtime engine yet; use --engine sim"
            )));
        }
    };
    Ok(report.into())
}
