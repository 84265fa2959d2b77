//! Proving the cluster secret: a challenge–response run on every connection right after the
//! preamble, before any message of the protocol, and the bearer check of the admin server.
//!
//! ```text
//! client (dials)                                   server (accepts)
//!   Challenge{client nonce, client identity, keyed} ->
//!                      <- Answer{server nonce, server identity, server MAC}   (or Refused)
//!   Proof{client MAC}                               ->
//!                      <- Accepted                                            (or Refused)
//! ```
//!
//! Each MAC is HMAC-SHA256 under the secret over a transcript of the protocol, both nonces and
//! both identities, with a label for the side that computes it: the secret never crosses the
//! wire, a captured handshake replayed later fails on the other side's fresh nonce, one side's
//! MAC cannot be reflected as the other's, and the identity each side claimed is bound to the
//! proof, so the connection speaks for that identity and no other. MACs are compared in
//! constant time.
//!
//! A node without a secret (`--insecure`) says so (`keyed: false`) and is refused by any node
//! that has one; a node with a secret refuses a server that cannot prove it. The exchange
//! reads through the connection's [`FrameReader`], which is handed on to the protocol so that
//! a peer's frames sent right behind its proof are not lost.

use crate::bounds::{BoundsError, Validate};
use crate::error::WireError;
use crate::frame::{FrameReader, Protocol, write_frame};
use crate::secret::{Secret, SecretError, hex, random};
use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use std::io::{Read, Write};

/// Longest identity a node may claim (bytes).
pub const MAX_IDENTITY: usize = 256;
/// Largest handshake frame (bytes): a challenge or answer with the longest identity and reason.
pub const MAX_HANDSHAKE_FRAME: u32 = 2048;
const NONCE: usize = 32;

type HmacSha256 = Hmac<Sha256>;

/// The frames of the exchange.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum AuthFrame {
    /// Client → server: its nonce and identity, and whether it holds a secret.
    Challenge {
        /// Fresh random bytes.
        nonce: [u8; NONCE],
        /// What the client claims to be (`worker:3`, `device:edge-1`).
        identity: String,
        /// Whether the client holds a secret.
        keyed: bool,
    },
    /// Server → client: its nonce and identity, and its proof (absent if it holds no secret).
    Answer {
        /// Fresh random bytes.
        nonce: [u8; NONCE],
        /// What the server claims to be.
        identity: String,
        /// Its MAC over the transcript.
        mac: Option<[u8; 32]>,
    },
    /// Client → server: the client's proof.
    Proof {
        /// Its MAC over the transcript (absent if it holds no secret).
        mac: Option<[u8; 32]>,
    },
    /// Server → client: admitted.
    Accepted,
    /// Either way: refused, and why.
    Refused(String),
}

impl Validate<()> for AuthFrame {
    fn validate(&self, (): &()) -> Result<(), BoundsError> {
        let identity = match self {
            Self::Challenge { identity, .. } | Self::Answer { identity, .. } => identity,
            _ => return Ok(()),
        };
        if identity.len() > MAX_IDENTITY {
            return Err(BoundsError::Length {
                field: "AuthFrame.identity",
                len: identity.len() as u64,
                expected: MAX_IDENTITY as u64,
            });
        }
        Ok(())
    }
}

/// Which side computes a MAC: each has its own label so that neither's can stand for the
/// other's.
#[derive(Clone, Copy)]
enum Side {
    Client,
    Server,
}

/// What one end of a handshake knows.
#[derive(Clone, Copy, Debug)]
pub struct Party<'a> {
    /// The protocol (its magic and version are part of the transcript).
    pub protocol: &'a Protocol,
    /// The cluster secret; `None` runs insecure.
    pub secret: Option<&'a Secret>,
    /// This node's identity.
    pub identity: &'a str,
}

fn mac(
    secret: &Secret,
    side: Side,
    protocol: &Protocol,
    nonces: (&[u8; NONCE], &[u8; NONCE]),
    identities: (&str, &str),
) -> HmacSha256 {
    let mut m = HmacSha256::new_from_slice(secret.key()).expect("HMAC takes a key of any length");
    let label: &[u8] = match side {
        Side::Client => b"clasp auth v1 client",
        Side::Server => b"clasp auth v1 server",
    };
    let (client_id, server_id) = identities;
    for part in [
        label,
        &protocol.magic,
        &protocol.version.to_le_bytes(),
        nonces.0,
        nonces.1,
        client_id.as_bytes(),
        server_id.as_bytes(),
    ] {
        // Length-prefixed, so that no two transcripts concatenate alike.
        m.update(&(part.len() as u32).to_le_bytes());
        m.update(part);
    }
    m
}

fn tag(m: HmacSha256) -> [u8; 32] {
    m.finalize().into_bytes().into()
}

fn nonce(peer: &str) -> Result<[u8; NONCE], WireError> {
    random()
        .map_err(|e: SecretError| WireError::Protocol { peer: peer.into(), message: e.to_string() })
}

fn send(w: &mut impl Write, peer: &str, f: &AuthFrame) -> Result<(), WireError> {
    write_frame(w, f, &mut Vec::new())
        .map(drop)
        .map_err(|source| WireError::Io { peer: peer.into(), source })
}

fn receive(r: &mut impl Read, reader: &mut FrameReader) -> Result<AuthFrame, WireError> {
    let peer = reader.peer().to_owned();
    match reader.read_message::<AuthFrame, ()>(r, &())? {
        Some(AuthFrame::Refused(reason)) => Err(WireError::Rejected { peer, reason }),
        Some(f) => Ok(f),
        None => Err(WireError::Protocol {
            peer,
            message: "closed the connection during the handshake".into(),
        }),
    }
}

fn refuse(w: &mut impl Write, peer: &str, reason: String) -> WireError {
    let _ = send(w, peer, &AuthFrame::Refused(reason.clone()));
    WireError::Auth { peer: peer.into(), reason }
}

fn unexpected(peer: &str, f: &AuthFrame, wanted: &str) -> WireError {
    WireError::Protocol { peer: peer.into(), message: format!("expected {wanted}, got {f:?}") }
}

const NEED_SECRET: &str = "this node requires the cluster secret (--token-file or CLASP_TOKEN)";

/// The dialing side, after the preambles: proves `me` and checks the server's proof and
/// identity with `expect`. Returns the server's identity; `reader` (whose peer names the
/// server) goes on reading the connection.
pub fn client<S: Read + Write>(
    stream: &mut S,
    reader: &mut FrameReader,
    me: Party<'_>,
    expect: impl FnOnce(&str) -> Result<(), String>,
) -> Result<String, WireError> {
    let peer = reader.peer().to_owned();
    let ours = nonce(&peer)?;
    let challenge = AuthFrame::Challenge {
        nonce: ours,
        identity: me.identity.into(),
        keyed: me.secret.is_some(),
    };
    send(stream, &peer, &challenge)?;
    let (theirs, server_id, server_mac) = match receive(stream, reader)? {
        AuthFrame::Answer { nonce, identity, mac } => (nonce, identity, mac),
        other => return Err(unexpected(&peer, &other, "Answer")),
    };
    if let Some(secret) = me.secret {
        let want =
            mac(secret, Side::Server, me.protocol, (&ours, &theirs), (me.identity, &server_id));
        let proven = server_mac.is_some_and(|m| want.verify_slice(&m).is_ok());
        if !proven {
            let why = if server_mac.is_none() {
                "it holds no cluster secret (started with --insecure?)"
            } else {
                "it does not hold this cluster's secret"
            };
            return Err(refuse(stream, &peer, format!("the server could not prove itself: {why}")));
        }
    }
    if let Err(reason) = expect(&server_id) {
        return Err(refuse(stream, &peer, reason));
    }
    let proof = me.secret.map(|s| {
        tag(mac(s, Side::Client, me.protocol, (&ours, &theirs), (me.identity, &server_id)))
    });
    send(stream, &peer, &AuthFrame::Proof { mac: proof })?;
    match receive(stream, reader)? {
        AuthFrame::Accepted => Ok(server_id),
        other => Err(unexpected(&peer, &other, "Accepted")),
    }
}

/// The accepting side, after the preambles: checks the client's proof, then its identity with
/// `admit`. Returns the client's identity; `reader` goes on reading the connection.
pub fn server<S: Read + Write>(
    stream: &mut S,
    reader: &mut FrameReader,
    me: Party<'_>,
    admit: impl FnOnce(&str) -> Result<(), String>,
) -> Result<String, WireError> {
    let peer = reader.peer().to_owned();
    let (theirs, client_id, keyed) = match receive(stream, reader)? {
        AuthFrame::Challenge { nonce, identity, keyed } => (nonce, identity, keyed),
        other => return Err(unexpected(&peer, &other, "Challenge")),
    };
    if me.secret.is_some() && !keyed {
        return Err(refuse(stream, &peer, format!("{NEED_SECRET}, and the client has none")));
    }
    let ours = nonce(&peer)?;
    let answer = AuthFrame::Answer {
        nonce: ours,
        identity: me.identity.into(),
        mac: me.secret.map(|s| {
            tag(mac(s, Side::Server, me.protocol, (&theirs, &ours), (&client_id, me.identity)))
        }),
    };
    send(stream, &peer, &answer)?;
    let proof = match receive(stream, reader)? {
        AuthFrame::Proof { mac } => mac,
        other => return Err(unexpected(&peer, &other, "Proof")),
    };
    if let Some(secret) = me.secret {
        let want =
            mac(secret, Side::Client, me.protocol, (&theirs, &ours), (&client_id, me.identity));
        if proof.is_none_or(|m| want.verify_slice(&m).is_err()) {
            return Err(refuse(
                stream,
                &peer,
                format!("wrong cluster secret (claimed identity `{}`)", printable(&client_id)),
            ));
        }
    }
    if let Err(reason) = admit(&client_id) {
        return Err(refuse(stream, &peer, reason));
    }
    send(stream, &peer, &AuthFrame::Accepted)?;
    Ok(client_id)
}

/// An identity as logs show it: control characters escaped.
pub fn printable(identity: &str) -> String {
    identity.escape_debug().to_string()
}

/// The bearer token of the admin server (every endpoint but its probes), derived from the
/// cluster secret (so that a leaked admin token does not let anyone join the cluster).
pub fn admin_token(secret: &Secret) -> String {
    let mut m = HmacSha256::new_from_slice(secret.key()).expect("HMAC takes a key of any length");
    m.update(b"clasp admin token v1");
    hex(&tag(m))
}

/// Why an admin request was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BearerError {
    /// No `Authorization` header.
    #[error("the request has no Authorization header; send `Authorization: Bearer <token>`")]
    Missing,
    /// Not of the form `Bearer TOKEN`.
    #[error("the Authorization header is not `Bearer <token>`")]
    Malformed,
    /// The token is not this cluster's.
    #[error("the bearer token is not this cluster's admin token")]
    Wrong,
}

/// Checks an HTTP `Authorization` header value against the admin token of `secret`
/// ([`admin_token`]), in constant time. The admin server calls it for every request but its
/// health probes.
pub fn check_bearer(secret: &Secret, authorization: Option<&str>) -> Result<(), BearerError> {
    let value = authorization.ok_or(BearerError::Missing)?;
    let (scheme, token) = value.trim().split_once(' ').ok_or(BearerError::Malformed)?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(BearerError::Malformed);
    }
    check_admin_token(secret, token)
}

/// Checks a token (from a bearer header, a cookie or a query) against the admin token of
/// `secret`, in constant time.
pub fn check_admin_token(secret: &Secret, token: &str) -> Result<(), BearerError> {
    // Compared as MACs of both under a fresh key: constant time whatever the lengths.
    let key: [u8; 32] = random().map_err(|_| BearerError::Wrong)?;
    let digest = |s: &str| {
        let mut m = HmacSha256::new_from_slice(&key).expect("any key length");
        m.update(s.as_bytes());
        m
    };
    let want = tag(digest(&admin_token(secret)));
    digest(token.trim()).verify_slice(&want).map_err(|_| BearerError::Wrong)
}

#[cfg(test)]
mod tests;
