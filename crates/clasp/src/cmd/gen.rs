//! `clasp gen`: write a seeded input file for an application, or profile the application on
//! one.

use anyhow::{Context as _, Result, bail};
use std::io::{BufWriter, Write};
use std::path::PathBuf;

/// Arguments of `clasp gen`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Application: wc, sd, aa, pl, nwm, etl, syn, taxi-w1, taxi-w2, taxi-w3 (`all` with
    /// --profile).
    pub app: String,
    /// Records to generate (for taxi fares: the fares of the rides started among COUNT ride
    /// events, so that both files describe the same rides).
    #[arg(long, default_value_t = 100_000)]
    pub count: u64,
    /// Seed: the same seed gives byte-identical output.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Output file (default: standard output).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Which source to generate, for pipelines with several (taxi-w2: rides, fares).
    #[arg(long)]
    pub source: Option<String>,
    /// Instead of writing input, run the app on COUNT generated records per source in the
    /// local driver (one record per request) and print each operator's selectivity and each
    /// stateful operator's state size as a markdown table.
    #[arg(long)]
    pub profile: bool,
}

/// Runs `clasp gen`.
pub fn run(args: &Args) -> Result<()> {
    let mut out: Box<dyn Write> = match &args.out {
        Some(path) => Box::new(BufWriter::new(
            std::fs::File::create(path)
                .with_context(|| format!("cannot create {}", path.display()))?,
        )),
        None => Box::new(BufWriter::new(std::io::stdout().lock())),
    };
    if args.profile {
        profile(args, &mut out)?;
    } else {
        let def =
            clasp_apps::inputs::source(&args.app, args.source.as_deref()).context("--source")?;
        def.write_generated(args.count, args.seed, &mut out).context("cannot write the input")?;
    }
    out.flush().context("cannot write the output")
}

fn profile(args: &Args, out: &mut dyn Write) -> Result<()> {
    if args.source.is_some() {
        bail!("--profile feeds every source of the app; drop --source");
    }
    let apps: Vec<&str> =
        if args.app == "all" { clasp_apps::APPS.to_vec() } else { vec![args.app.as_str()] };
    for app in apps {
        let p = clasp_apps::profile::run(app, args.count, args.seed)?;
        writeln!(out, "{}", p.to_markdown())?;
    }
    Ok(())
}
