//! For tests of links: a certificate authority made on the spot and certificates it signs for
//! nodes on this host (`127.0.0.1`, `::1`, `localhost`), and hostile peers ([`hostile`]).

pub mod hostile;

use crate::tls::TlsFiles;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use std::path::{Path, PathBuf};

/// A CA whose files live in a directory.
#[derive(Debug)]
pub struct TestCa {
    dir: PathBuf,
    issuer: CertifiedIssuer<'static, KeyPair>,
}

impl TestCa {
    /// A new CA, its certificate written to `dir/ca.pem`.
    pub fn new(dir: &Path) -> Self {
        std::fs::create_dir_all(dir).expect("create the CA directory");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let key = KeyPair::generate().expect("CA key");
        let issuer = CertifiedIssuer::self_signed(params, key).expect("CA certificate");
        std::fs::write(dir.join("ca.pem"), issuer.pem()).expect("write ca.pem");
        Self { dir: dir.to_owned(), issuer }
    }

    /// A certificate and key for node `name`, signed by this CA, written beside its
    /// certificate.
    pub fn node(&self, name: &str) -> TlsFiles {
        let sans: Vec<String> = ["127.0.0.1", "::1", "localhost"].map(String::from).into();
        let params = CertificateParams::new(sans).expect("node params");
        let key = KeyPair::generate().expect("node key");
        let cert = params.signed_by(&key, &self.issuer).expect("node certificate");
        let files = TlsFiles {
            cert: self.dir.join(format!("{name}.pem")),
            key: self.dir.join(format!("{name}.key")),
            ca: self.dir.join("ca.pem"),
        };
        std::fs::write(&files.cert, cert.pem()).expect("write the certificate");
        std::fs::write(&files.key, key.serialize_pem()).expect("write the key");
        files
    }
}
