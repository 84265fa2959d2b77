//! `clasp worker`: a worker node joining a planner.

use anyhow::{Result, anyhow};
use clasp_core::WorkerId;
use clasp_runtime::worker::{self, WorkerOptions};

/// Arguments of `clasp worker`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The planner's address (`HOST:PORT`).
    #[arg(long)]
    pub join: String,
    /// Ask for this worker id (must be free).
    #[arg(long)]
    pub id: Option<u32>,
    /// Executor slots.
    #[arg(long, default_value_t = 10)]
    pub slots: u32,
    /// Address to accept peer connections on (loopback unless told otherwise).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: String,
}

/// Runs `clasp worker`.
pub fn run(args: &Args) -> Result<()> {
    let opts =
        WorkerOptions { slots: args.slots, listen: args.listen.clone(), id: args.id.map(WorkerId) };
    worker::run(&args.join, crate::registry(), &opts).map_err(|e| anyhow!("worker: {e}"))
}
