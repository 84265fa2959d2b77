//! TLS on a link (rustls, ring provider): certificates and keys from PEM files, mutual
//! authentication against one certificate authority, and a session that a reading thread and
//! writing threads share over one TCP stream.
//!
//! Every node has a certificate signed by the cluster's CA and checks its peer's against that
//! CA: a server (planner, worker, edge cloud) must present a certificate naming the host or IP
//! address it was dialed at, a client any certificate of the CA. The cluster secret is proven
//! inside the TLS session as without it: TLS adds secrecy and integrity of the data, the secret
//! the identities (see docs/security.md).
//!
//! A reading thread reads the socket with the session unlocked, then feeds what it read to the
//! session; a writing thread encrypts under the lock and writes the records with it released,
//! under a second lock that keeps records in order. Neither waits on the socket while holding
//! the session, so a full socket in one direction never stops the other.

use crate::conn::{Deadline, Timed};
use clasp_core::sync::lock;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::WebPkiClientVerifier;
use rustls::{
    ClientConfig, ClientConnection, Connection, RootCertStore, ServerConfig, ServerConnection,
};
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Where a node's certificate, key and CA are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    /// This node's certificate chain (PEM).
    pub cert: PathBuf,
    /// Its private key (PEM: PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// The CA that signs every node's certificate (PEM).
    pub ca: PathBuf,
}

/// Why TLS could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read.
    #[error("cannot read {what} {}: {source}", path.display())]
    Read {
        /// Which file.
        what: &'static str,
        /// Its path.
        path: PathBuf,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A file's PEM content is unusable.
    #[error("{what} {origin}: {problem}")]
    Pem {
        /// Which file.
        what: &'static str,
        /// Its path.
        origin: String,
        /// What is wrong.
        problem: String,
    },
    /// rustls refused the configuration.
    #[error("TLS configuration: {0}")]
    Config(#[from] rustls::Error),
    /// The client verifier could not be built.
    #[error("TLS client verification: {0}")]
    Verifier(#[from] rustls::server::VerifierBuilderError),
}

/// A node's TLS configuration, as client and as server.
#[derive(Clone)]
pub struct Tls {
    client: Arc<ClientConfig>,
    server: Arc<ServerConfig>,
    files: Option<TlsFiles>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tls(..)")
    }
}

/// Largest PEM file read (bytes).
const MAX_PEM: u64 = 1 << 20;

fn read_pem(what: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    let read = |source| TlsError::Read { what, path: path.to_owned(), source };
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .map_err(read)?
        .take(MAX_PEM + 1)
        .read_to_end(&mut bytes)
        .map_err(read)?;
    if bytes.len() as u64 > MAX_PEM {
        return Err(TlsError::Pem {
            what,
            origin: path.display().to_string(),
            problem: format!("larger than {MAX_PEM} bytes"),
        });
    }
    Ok(bytes)
}

fn certs(
    what: &'static str,
    origin: &str,
    pem: &[u8],
) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let bad = |problem: String| TlsError::Pem { what, origin: origin.into(), problem };
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(e.to_string()))?;
    if certs.is_empty() {
        return Err(bad("holds no CERTIFICATE block".into()));
    }
    Ok(certs)
}

impl Tls {
    /// Loads `files`.
    pub fn load(files: &TlsFiles) -> Result<Self, TlsError> {
        let cert = read_pem("certificate", &files.cert)?;
        let key = read_pem("key", &files.key)?;
        let ca = read_pem("CA certificate", &files.ca)?;
        let name = |p: &Path| p.display().to_string();
        let tls = Self::from_pem(
            (&cert, &name(&files.cert)),
            (&key, &name(&files.key)),
            (&ca, &name(&files.ca)),
        )?;
        Ok(Self { files: Some(files.clone()), ..tls })
    }

    /// The files it was loaded from (to hand to a child process), if any.
    pub fn files(&self) -> Option<&TlsFiles> {
        self.files.as_ref()
    }

    /// From PEM text: `(content, origin for errors)` of the certificate chain, key and CA.
    pub fn from_pem(
        cert: (&[u8], &str),
        key: (&[u8], &str),
        ca: (&[u8], &str),
    ) -> Result<Self, TlsError> {
        let chain = certs("certificate", cert.1, cert.0)?;
        let private = PrivateKeyDer::from_pem_slice(key.0).map_err(|e| TlsError::Pem {
            what: "key",
            origin: key.1.into(),
            problem: e.to_string(),
        })?;
        let mut roots = RootCertStore::empty();
        for c in certs("CA certificate", ca.1, ca.0)? {
            roots.add(c)?;
        }
        let roots = Arc::new(roots);
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier =
            WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone()).build()?;
        let server = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain.clone(), private.clone_key())?;
        let client = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_root_certificates(roots)
            .with_client_auth_cert(chain, private)?;
        Ok(Self { client: Arc::new(client), server: Arc::new(server), files: None })
    }
}

/// A TLS session shared by the threads using one connection.
pub(crate) struct Session {
    state: Mutex<State>,
    /// Held while records are written, so that they leave in the order they were made.
    writing: Mutex<()>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Session(..)")
    }
}

struct State {
    conn: Connection,
    /// Bytes read from the socket and not yet taken by the session.
    raw: Vec<u8>,
}

fn tls_io(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

/// The host part of `HOST:PORT` (brackets of an IPv6 address removed).
fn host_of(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(h, _)| h);
    host.trim_start_matches('[').trim_end_matches(']')
}

/// Runs a handshake to its end within `deadline`.
fn complete(mut conn: Connection, tcp: &TcpStream, deadline: Deadline) -> io::Result<Session> {
    let mut timed = Timed::new(tcp, deadline);
    while conn.is_handshaking() {
        conn.complete_io(&mut timed)?;
    }
    // Flush what the handshake left to send (a server's session tickets).
    while conn.wants_write() {
        conn.write_tls(&mut timed)?;
    }
    conn.set_buffer_limit(None);
    Ok(Session { state: Mutex::new(State { conn, raw: Vec::new() }), writing: Mutex::new(()) })
}

/// The client side of a handshake with the server dialed at `addr`.
pub(crate) fn client(
    tls: &Tls,
    tcp: &TcpStream,
    addr: &str,
    deadline: Deadline,
) -> io::Result<Session> {
    let name = ServerName::try_from(host_of(addr).to_owned())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("server name: {e}")))?;
    let conn = ClientConnection::new(tls.client.clone(), name).map_err(tls_io)?;
    complete(conn.into(), tcp, deadline)
}

/// The server side of a handshake.
pub(crate) fn server(tls: &Tls, tcp: &TcpStream, deadline: Deadline) -> io::Result<Session> {
    let conn = ServerConnection::new(tls.server.clone()).map_err(tls_io)?;
    complete(conn.into(), tcp, deadline)
}

impl Session {
    pub(crate) fn read(&self, tcp: &TcpStream, out: &mut [u8]) -> io::Result<usize> {
        loop {
            {
                let mut st = lock(&self.state);
                match st.conn.reader().read(out) {
                    Ok(n) => return Ok(n),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) => return Err(e),
                }
                if !st.raw.is_empty() {
                    let State { conn, raw } = &mut *st;
                    let took = conn.read_tls(&mut &raw[..])?;
                    raw.drain(..took);
                    conn.process_new_packets().map_err(tls_io)?;
                    continue;
                }
            }
            let mut chunk = [0u8; 8192];
            let mut sock = tcp;
            let n = sock.read(&mut chunk)?;
            let mut st = lock(&self.state);
            if n == 0 {
                // The end of the stream: the session tells a clean close from a cut one.
                st.conn.read_tls(&mut &[][..])?;
                st.conn.process_new_packets().map_err(tls_io)?;
                return match st.conn.reader().read(out) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
                    other => other,
                };
            }
            st.raw.extend_from_slice(&chunk[..n]);
        }
    }

    pub(crate) fn write(&self, tcp: &TcpStream, buf: &[u8]) -> io::Result<()> {
        let _order = lock(&self.writing);
        let records = {
            let mut st = lock(&self.state);
            st.conn.writer().write_all(buf)?;
            let mut records = Vec::with_capacity(buf.len() + 64);
            while st.conn.wants_write() {
                st.conn.write_tls(&mut records)?;
            }
            records
        };
        let mut sock = tcp;
        sock.write_all(&records)
    }

    pub(crate) fn close(&self, tcp: &TcpStream) {
        let _order = lock(&self.writing);
        let records = {
            let mut st = lock(&self.state);
            st.conn.send_close_notify();
            let mut records = Vec::new();
            while st.conn.wants_write() {
                if st.conn.write_tls(&mut records).is_err() {
                    break;
                }
            }
            records
        };
        let mut sock = tcp;
        let _ = sock.write_all(&records);
    }
}

#[cfg(test)]
mod tests {
    use super::host_of;

    #[test]
    fn the_server_name_is_the_host_dialed() {
        assert_eq!(host_of("127.0.0.1:7000"), "127.0.0.1");
        assert_eq!(host_of("[::1]:7000"), "::1");
        assert_eq!(host_of("planner.example:7000"), "planner.example");
    }
}
