//! TLS when this build leaves it out (feature `tls` off): the configuration types exist, and
//! loading one says that the build has no TLS.

use std::path::PathBuf;

/// Where a node's certificate, key and CA are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    /// This node's certificate chain (PEM).
    pub cert: PathBuf,
    /// Its private key (PEM).
    pub key: PathBuf,
    /// The CA that signs every node's certificate (PEM).
    pub ca: PathBuf,
}

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// This build has no TLS.
    #[error("this clasp was built without TLS (cargo feature `tls` of clasp-wire)")]
    NotBuilt,
}

/// A TLS configuration: none can exist in this build.
#[derive(Clone, Debug)]
pub enum Tls {}

impl Tls {
    /// Always fails: this build has no TLS.
    pub fn load(_: &TlsFiles) -> Result<Self, TlsError> {
        Err(TlsError::NotBuilt)
    }

    /// The files it was loaded from.
    pub fn files(&self) -> Option<&TlsFiles> {
        match *self {}
    }
}
