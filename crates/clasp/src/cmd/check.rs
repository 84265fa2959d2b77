//! `clasp check`: validate a spec and print its operators and streams.

use anyhow::Result;
use std::path::PathBuf;

/// Arguments of `clasp check`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Pipeline spec files (TOML).
    #[arg(required = true)]
    pub specs: Vec<PathBuf>,
}

/// Runs `clasp check`.
pub fn run(args: &Args) -> Result<()> {
    for path in &args.specs {
        let p = super::load_pipeline(path)?;
        // Builds every operator: unknown functions and parameters they refuse are caught here,
        // with the operator's file and line.
        crate::registry().instantiate_all(&p).map_err(|e| anyhow::anyhow!("{e}"))?;
        println!("{}: pipeline `{}` is valid", path.display(), p.name);
        for &o in p.topological_order() {
            let op = p.operator(o);
            let outs: Vec<&str> =
                p.outputs(o).iter().map(|s| p.endpoint_name(p.stream(*s).to)).collect();
            let state = op.key.as_deref().map(|k| format!(" stateful by {k}")).unwrap_or_default();
            println!(
                "  {:<16} {:<8} {:<24}{state} -> {}",
                op.name,
                op.kind.as_str(),
                op.function,
                if outs.is_empty() { "(terminal)".into() } else { outs.join(", ") }
            );
        }
    }
    Ok(())
}
