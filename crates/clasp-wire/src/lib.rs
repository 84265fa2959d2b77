//! clasp-wire: the byte-level protocols between clasp nodes.
//!
//! - [`frame`]: the one framing every connection uses — a [`Protocol`]'s preamble (magic and
//!   version), then length-prefixed postcard frames read by a [`FrameReader`] under a frame
//!   limit, with buffers that grow only as bytes arrive;
//! - [`bounds`]: the check of every decoded message's ids against what the receiver has
//!   ([`Validate`]), failing with a [`BoundsError`] that names the field and value;
//! - [`runtime`]: the planner's and workers' messages and their [`runtime::Limits`];
//! - [`edge`]: the connector protocol between edge devices and the cloud;
//! - [`secret`], [`auth`], [`link`]: the cluster secret, the challenge–response that proves it
//!   on every link and binds each peer to the identity it proved, and the opening of a link
//!   (TLS, preambles, proof) within one deadline; [`auth::check_bearer`] is the admin server's
//!   check;
//! - [`conn`], [`tls`]: a connection, plain or under TLS (feature `tls`, on by default), the
//!   whole-handshake deadline and the cap on connections still handshaking.

pub mod auth;
pub mod bounds;
pub mod conn;
pub mod edge;
pub mod error;
pub mod frame;
pub mod link;
pub mod runtime;
pub mod secret;
#[cfg(any(test, feature = "testing"))]
pub mod testing;
#[cfg(feature = "tls")]
pub mod tls;
#[cfg(not(feature = "tls"))]
#[path = "tls_off.rs"]
pub mod tls;

pub use bounds::{BoundsError, Validate};
pub use conn::{Conn, Deadline, HANDSHAKE_DEADLINE, HandshakeGate};
pub use error::WireError;
pub use frame::{DEFAULT_MAX_FRAME, FrameReader, Protocol, encode, write_frame};
pub use link::{Established, Opening, Security};
pub use secret::{Secret, SecretError};
pub use tls::{Tls, TlsError, TlsFiles};
