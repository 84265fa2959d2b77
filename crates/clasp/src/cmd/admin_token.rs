//! `clasp admin-token`: the bearer token of the admin server, derived from the cluster secret,
//! for clients that cannot hold the secret itself (Prometheus' `credentials_file`, curl).

use anyhow::{Result, bail};
use clasp_wire::Secret;
use clasp_wire::secret::{HOW_TO_MAKE_ONE, TOKEN_ENV};
use std::path::PathBuf;

/// Arguments of `clasp admin-token`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// File holding the cluster secret (default: the CLASP_TOKEN environment variable).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
}

/// Prints the admin token of the cluster secret.
pub fn run(args: &Args) -> Result<()> {
    let Some(secret) = Secret::resolve(args.token_file.as_deref())? else {
        bail!(
            "the admin token is derived from the cluster secret: give --token-file FILE or set \
             {TOKEN_ENV} ({HOW_TO_MAKE_ONE})"
        );
    };
    println!("{}", clasp_wire::auth::admin_token(&secret));
    Ok(())
}
