//! Why a connection was refused or a frame dropped.

use crate::bounds::BoundsError;
use std::io;

/// Why a connection was refused, closed, or a frame not accepted.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// Socket error.
    #[error("{peer}: {source}")]
    Io {
        /// The peer address.
        peer: String,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// The first bytes are not the protocol's magic.
    #[error("{peer}: not a {protocol} peer (first bytes {got:02x?}); connection refused")]
    NotPeer {
        /// The peer address.
        peer: String,
        /// The protocol expected.
        protocol: &'static str,
        /// What it sent.
        got: Vec<u8>,
    },
    /// The peer speaks another protocol version.
    #[error("{peer}: speaks {protocol} protocol v{theirs}, this node v{ours}; {help}")]
    Version {
        /// The peer address.
        peer: String,
        /// The protocol.
        protocol: &'static str,
        /// Its version.
        theirs: u32,
        /// Ours.
        ours: u32,
        /// What to do about it.
        help: &'static str,
    },
    /// A frame announcing more bytes than the limit.
    #[error("{peer}: frame of {len} bytes exceeds the limit of {max}; connection closed")]
    FrameTooLarge {
        /// The peer address.
        peer: String,
        /// Announced length.
        len: u32,
        /// The limit.
        max: u32,
    },
    /// The stream ended inside a frame.
    #[error("{peer}: the connection ended inside a frame ({have} of {need} bytes)")]
    Truncated {
        /// The peer address.
        peer: String,
        /// Bytes of the frame that arrived, its length prefix included.
        have: usize,
        /// Bytes the frame needs (4 while its length prefix is incomplete).
        need: usize,
    },
    /// A frame that does not decode as a message.
    #[error("{peer}: undecodable frame: {source}; connection closed")]
    Decode {
        /// The peer address.
        peer: String,
        /// The decoder's error.
        #[source]
        source: postcard::Error,
    },
    /// A frame with bytes after its message.
    #[error("{peer}: frame has {extra} bytes after its message; connection closed")]
    Trailing {
        /// The peer address.
        peer: String,
        /// Bytes left over.
        extra: usize,
    },
    /// A decoded message names an id or epoch outside the receiver's bounds.
    #[error("{peer}: {source}; message dropped")]
    Invalid {
        /// The peer address.
        peer: String,
        /// The field and value.
        #[source]
        source: BoundsError,
    },
    /// The peer refused us.
    #[error("{peer}: refused the connection: {reason}")]
    Rejected {
        /// The peer address.
        peer: String,
        /// Its reason.
        reason: String,
    },
    /// The peer failed to prove the cluster secret or the identity it claimed.
    #[error("{peer}: authentication failed: {reason}; connection refused")]
    Auth {
        /// The peer address.
        peer: String,
        /// What it failed to prove.
        reason: String,
    },
    /// The TLS layer failed (handshake, certificate, record).
    #[error("{peer}: TLS: {message}")]
    Tls {
        /// The peer address.
        peer: String,
        /// What went wrong.
        message: String,
    },
    /// The handshake did not finish within its deadline.
    #[error("{peer}: the handshake did not finish within {seconds} s; connection closed")]
    Deadline {
        /// The peer address.
        peer: String,
        /// The deadline.
        seconds: u64,
    },
    /// A protocol step out of order.
    #[error("{peer}: {message}")]
    Protocol {
        /// The peer address.
        peer: String,
        /// What happened.
        message: String,
    },
}
