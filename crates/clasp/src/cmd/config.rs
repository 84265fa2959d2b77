//! `clasp config print`: the effective settings of a command and where each came from.

use crate::config::{self, print};
use anyhow::Result;
use clap::CommandFactory;
use std::ffi::OsString;
use std::path::PathBuf;

/// Arguments of `clasp config`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(subcommand)]
    pub action: Action,
}

/// What to do.
#[derive(Debug, clap::Subcommand)]
pub enum Action {
    /// Print every setting of COMMAND with its effective value and its origin (default, file
    /// FILE:LINE, env VAR or flag), given the config file, the environment and ARGS.
    Print {
        /// The command: run, planner or worker.
        #[arg(default_value = "run", value_parser = ["run", "planner", "worker"])]
        command: String,
        /// The command's own arguments (after `--`), e.g. `-- pipelines/wc.toml --workers 3`.
        #[arg(last = true)]
        args: Vec<OsString>,
    },
}

/// Runs `clasp config`.
pub fn run(args: &Args, config_flag: Option<&PathBuf>) -> Result<()> {
    let Action::Print { command, args } = &args.action;
    let mut root = crate::Cli::command();
    if command != "worker" {
        // The pipeline is not a setting: printing needs none.
        root = root.mut_subcommand(command, |c| c.mut_arg("spec", |a| a.required(false)));
    }
    root.build();
    let env = |k: &str| std::env::var(k).ok();
    let file = config::config_file(config_flag, &env)?;
    let text = print::effective(&root, command, args, file.as_ref(), &env)?;
    print!("{text}");
    Ok(())
}
