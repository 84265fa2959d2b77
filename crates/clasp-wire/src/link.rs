//! Opening a link, the same for every protocol: TLS if configured, the preambles, then the
//! proof of the cluster secret and of each side's identity ([`crate::auth`]), all within one
//! [`Deadline`]. What follows is the protocol's own first message.

use crate::auth::{self, MAX_HANDSHAKE_FRAME, Party};
use crate::conn::{Conn, Deadline, Timed};
use crate::error::WireError;
use crate::frame::{FrameReader, Protocol};
use crate::secret::{Secret, SecretError};
use crate::tls::Tls;
use std::io;
use std::net::TcpStream;

/// A node's protection of its links: the cluster secret, and TLS.
#[derive(Clone, Debug, Default)]
pub struct Security {
    /// The cluster secret; `None` runs insecure (anyone may connect).
    pub secret: Option<Secret>,
    /// TLS on every link, if set.
    pub tls: Option<Tls>,
}

impl Security {
    /// No secret and no TLS.
    pub fn insecure() -> Self {
        Self::default()
    }

    /// With `secret`, no TLS.
    pub fn with_secret(secret: Secret) -> Self {
        Self { secret: Some(secret), tls: None }
    }

    /// For a node that starts its whole cluster itself: keeps a secret it was given, or makes
    /// one.
    pub fn or_generated(mut self) -> Result<Self, SecretError> {
        if self.secret.is_none() {
            self.secret = Some(Secret::generate()?);
        }
        Ok(self)
    }
}

/// What this node brings to the opening of a link.
#[derive(Clone, Copy, Debug)]
pub struct Opening<'a> {
    /// Its secret and TLS.
    pub security: &'a Security,
    /// The protocol of the link.
    pub protocol: &'a Protocol,
    /// The identity this node proves.
    pub identity: &'a str,
    /// Largest frame read once the handshake is done.
    pub max_frame: u32,
    /// When the whole handshake must be over.
    pub deadline: Deadline,
}

/// A link whose handshake is done.
#[derive(Debug)]
pub struct Established {
    /// The connection.
    pub conn: Conn,
    /// Reads its frames (it may already hold the peer's first ones).
    pub reader: FrameReader,
    /// The identity the peer proved.
    pub identity: String,
    /// The handshake's deadline, for the protocol's first message.
    pub deadline: Deadline,
}

/// First buffer of a handshaking connection's reader: a stranger costs this much.
const HANDSHAKE_BUFFER: usize = 4 << 10;

fn classify(peer: &str, deadline: Deadline) -> impl Fn(WireError) -> WireError + '_ {
    move |e| match e {
        WireError::Io { source, .. } if timed_out(&source) => {
            WireError::Deadline { peer: peer.into(), seconds: deadline.total().as_secs().max(1) }
        }
        other => other,
    }
}

fn timed_out(e: &io::Error) -> bool {
    matches!(e.kind(), io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock)
}

fn io_err(peer: &str) -> impl Fn(io::Error) -> WireError + '_ {
    move |source| WireError::Io { peer: peer.into(), source }
}

#[cfg(feature = "tls")]
fn tls_err(peer: &str, deadline: Deadline) -> impl Fn(io::Error) -> WireError + '_ {
    move |e| {
        if timed_out(&e) {
            WireError::Deadline { peer: peer.into(), seconds: deadline.total().as_secs().max(1) }
        } else {
            WireError::Tls { peer: peer.into(), message: e.to_string() }
        }
    }
}

/// TLS around `tcp` if `sec` asks for it.
#[cfg(feature = "tls")]
fn wrap(
    tcp: TcpStream,
    sec: &Security,
    client_of: Option<&str>,
    peer: &str,
    deadline: Deadline,
) -> Result<Conn, WireError> {
    let Some(tls) = &sec.tls else { return Ok(Conn::plain(tcp)) };
    let session = match client_of {
        Some(addr) => crate::tls::client(tls, &tcp, addr, deadline),
        None => crate::tls::server(tls, &tcp, deadline),
    }
    .map_err(tls_err(peer, deadline))?;
    Ok(Conn::tls(tcp, session))
}

/// Without TLS in the build no configuration exists to ask for it.
#[cfg(not(feature = "tls"))]
fn wrap(
    tcp: TcpStream,
    sec: &Security,
    _client_of: Option<&str>,
    _peer: &str,
    _deadline: Deadline,
) -> Result<Conn, WireError> {
    match &sec.tls {
        None => Ok(Conn::plain(tcp)),
        Some(never) => match *never {},
    }
}

/// Opens a link on `tcp`, dialed at `addr`: this node proves its identity, and `expect` checks the
/// identity the server proves. Frames of up to `max_frame` bytes are read afterwards.
pub fn dial(
    tcp: TcpStream,
    addr: &str,
    o: &Opening<'_>,
    expect: impl FnOnce(&str) -> Result<(), String>,
) -> Result<Established, WireError> {
    let Opening { security: sec, protocol, identity: me, max_frame, deadline } = *o;
    let _ = tcp.set_nodelay(true);
    let conn = wrap(tcp, sec, Some(addr), addr, deadline)?;
    let mut timed = Timed::new(&conn, deadline);
    let on_err = classify(addr, deadline);
    protocol.write_preamble(&mut timed).map_err(io_err(addr)).map_err(&on_err)?;
    protocol.read_preamble(&mut timed, addr).map_err(&on_err)?;
    let mut reader = FrameReader::with_capacity(addr, MAX_HANDSHAKE_FRAME, HANDSHAKE_BUFFER);
    let party = Party { protocol, secret: sec.secret.as_ref(), identity: me };
    let identity = auth::client(&mut timed, &mut reader, party, expect).map_err(&on_err)?;
    reader.set_max_frame(max_frame);
    Ok(Established { conn, reader, identity, deadline })
}

/// Answers a link accepted on `tcp`: this node proves its identity, and `admit` checks the identity
/// the client proves. A peer of another protocol version is told so before the link closes.
pub fn answer(
    tcp: TcpStream,
    o: &Opening<'_>,
    admit: impl FnOnce(&str) -> Result<(), String>,
) -> Result<Established, WireError> {
    let Opening { security: sec, protocol, identity: me, max_frame, deadline } = *o;
    let peer = tcp.peer_addr().map_or_else(|_| "?".to_owned(), |a| a.to_string());
    let _ = tcp.set_nodelay(true);
    let conn = wrap(tcp, sec, None, &peer, deadline)?;
    let mut timed = Timed::new(&conn, deadline);
    let on_err = classify(&peer, deadline);
    if let Err(e) = protocol.read_preamble(&mut timed, &peer) {
        if let WireError::Version { .. } = e {
            let mut buf = protocol.preamble().to_vec();
            crate::frame::encode(&auth::AuthFrame::Refused(e.to_string()), &mut buf);
            let _ = io::Write::write_all(&mut timed, &buf);
        }
        return Err(on_err(e));
    }
    protocol.write_preamble(&mut timed).map_err(io_err(&peer)).map_err(&on_err)?;
    let mut reader =
        FrameReader::with_capacity(peer.clone(), MAX_HANDSHAKE_FRAME, HANDSHAKE_BUFFER);
    let party = Party { protocol, secret: sec.secret.as_ref(), identity: me };
    let identity = auth::server(&mut timed, &mut reader, party, admit).map_err(&on_err)?;
    reader.set_max_frame(max_frame);
    Ok(Established { conn, reader, identity, deadline })
}

#[cfg(test)]
mod tests;
