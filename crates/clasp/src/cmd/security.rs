//! The flags every node of a cluster takes to protect its links: the cluster secret
//! (`--token-file`, or `CLASP_TOKEN`), TLS certificates, and `--insecure`. See
//! docs/security.md.

use anyhow::{Context, Result, bail};
use clasp_wire::secret::{HOW_TO_MAKE_ONE, TOKEN_ENV};
use clasp_wire::{Secret, Security, Tls, TlsFiles};
use std::path::PathBuf;

/// Flags of the cluster secret and TLS.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SecurityArgs {
    /// File holding the cluster secret (default: the CLASP_TOKEN environment variable).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// This node's TLS certificate chain (PEM); with --tls-key and --tls-ca, every link is TLS.
    #[arg(long, value_name = "PEM", requires_all = ["tls_key", "tls_ca"])]
    pub tls_cert: Option<PathBuf>,
    /// This node's TLS private key (PEM).
    #[arg(long, value_name = "PEM", requires_all = ["tls_cert", "tls_ca"])]
    pub tls_key: Option<PathBuf>,
    /// The CA certificate that signs every node's certificate (PEM).
    #[arg(long, value_name = "PEM", requires_all = ["tls_cert", "tls_key"])]
    pub tls_ca: Option<PathBuf>,
    /// Run without a cluster secret: anyone who can reach a listener can join the cluster.
    #[arg(long, conflicts_with = "token_file")]
    pub insecure: bool,
}

impl SecurityArgs {
    fn tls(&self) -> Result<Option<Tls>> {
        let (Some(cert), Some(key), Some(ca)) = (&self.tls_cert, &self.tls_key, &self.tls_ca)
        else {
            return Ok(None);
        };
        let files = TlsFiles { cert: cert.clone(), key: key.clone(), ca: ca.clone() };
        Tls::load(&files).map(Some).context("--tls-cert/--tls-key/--tls-ca")
    }

    fn given(&self) -> Result<Option<Secret>> {
        if self.insecure {
            return Ok(None);
        }
        Ok(Secret::resolve(self.token_file.as_deref())?)
    }

    /// For a node of a cluster spread over hosts (`what` names it): the secret given, or an
    /// error saying how to make one unless `--insecure`.
    pub fn required(&self, what: &str) -> Result<Security> {
        let secret = self.given()?;
        if secret.is_none() && !self.insecure {
            bail!(
                "{what} needs the cluster secret: give --token-file FILE or set {TOKEN_ENV} \
                 ({HOW_TO_MAKE_ONE}), or run with --insecure to let anyone who reaches it join"
            );
        }
        if secret.is_none() {
            eprintln!("{what}: running --insecure: anyone who reaches its address can join");
        }
        Ok(Security { secret, tls: self.tls()? })
    }

    /// For a node that starts its whole cluster itself: the secret given, else a fresh one
    /// (`--insecure`: none).
    pub fn own_cluster(&self) -> Result<Security> {
        let security = Security { secret: self.given()?, tls: self.tls()? };
        if self.insecure {
            return Ok(security);
        }
        Ok(security.or_generated()?)
    }
}
