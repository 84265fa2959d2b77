//! `clasp worker`: a worker node joining a planner.

use anyhow::{Result, anyhow, bail};
use clasp_core::WorkerId;
use clasp_runtime::worker::{self, WorkerOptions};

/// Arguments of `clasp worker`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The planner's address (`HOST:PORT`).
    #[arg(long, value_name = "HOST:PORT", help_heading = "Worker")]
    pub join: Option<String>,
    /// Ask for this worker id (must be free).
    #[arg(long, help_heading = "Worker")]
    pub id: Option<u32>,
    /// Executor slots.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..), help_heading = "Worker")]
    pub slots: u32,
    /// Address to accept peer connections on (loopback unless told otherwise).
    #[arg(long, default_value = "127.0.0.1:0", help_heading = "Worker")]
    pub listen: String,
    /// The cluster secret and TLS.
    #[command(flatten, next_help_heading = "Security")]
    pub security: super::security::SecurityArgs,
}

/// Runs `clasp worker`.
pub fn run(args: &Args) -> Result<()> {
    let Some(join) = &args.join else {
        bail!("no planner to join: give --join HOST:PORT (or worker.join in the config file)");
    };
    let opts = WorkerOptions {
        slots: args.slots,
        listen: args.listen.clone(),
        id: args.id.map(WorkerId),
        security: args.security.required("clasp worker")?,
    };
    worker::run(join, crate::registry(), &opts).map_err(|e| anyhow!("worker: {e}"))
}
