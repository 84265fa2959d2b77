//! Hostile peers: scripted connections that send what a live peer never would, and the cases
//! every listener of a protocol must refuse before any peer proved the cluster secret.

use crate::auth::{self, AuthFrame, Party};
use crate::frame::{FrameReader, Protocol, encode};
use crate::secret::Secret;
use serde::Serialize;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// One thing a hostile peer does.
#[derive(Clone, Debug)]
pub enum Step {
    /// Writes these bytes.
    Send(Vec<u8>),
    /// Writes them one at a time, `gap` apart.
    Trickle {
        /// The bytes.
        bytes: Vec<u8>,
        /// The pause after each.
        gap: Duration,
    },
    /// Ends the sending direction (the listener reads the end of the stream).
    End,
    /// The preambles and the proof, as a client proving `identity` with `secret` (`None`:
    /// a client without one).
    Handshake {
        /// The identity claimed.
        identity: String,
        /// The secret used.
        secret: Option<Secret>,
    },
}

/// A scripted connection.
#[derive(Clone, Debug)]
pub struct Case {
    /// What it does, for failure messages.
    pub name: String,
    /// Its steps, in order; then it reads until the listener closes the connection.
    pub steps: Vec<Step>,
}

impl Case {
    /// A case of `steps`.
    pub fn new(name: impl Into<String>, steps: Vec<Step>) -> Self {
        Self { name: name.into(), steps }
    }
}

/// What became of a case.
#[derive(Debug)]
pub struct Outcome {
    /// The case's own address (log lines about it name it).
    pub local: SocketAddr,
    /// Whether the listener closed the connection (rather than the read giving up).
    pub closed: bool,
    /// The handshake's refusal, when a handshake step was refused.
    pub refused: Option<String>,
}

/// Runs `case` against `addr`; reads for at most `patience` at a time once its steps are done.
pub fn run(
    addr: &str,
    protocol: &Protocol,
    case: &Case,
    patience: Duration,
) -> io::Result<Outcome> {
    let mut s = TcpStream::connect(addr)?;
    let local = s.local_addr()?;
    s.set_read_timeout(Some(patience))?;
    let mut refused = None;
    let mut reader = FrameReader::new(addr, 1 << 20);
    for step in &case.steps {
        // A listener may close the connection before all is written: that is a refusal too.
        let wrote = match step {
            Step::Send(b) => s.write_all(b),
            Step::End => s.shutdown(std::net::Shutdown::Write),
            Step::Trickle { bytes, gap } => bytes.iter().try_for_each(|b| {
                s.write_all(std::slice::from_ref(b))?;
                std::thread::sleep(*gap);
                Ok(())
            }),
            Step::Handshake { identity, secret } => {
                match handshake(&mut s, &mut reader, protocol, identity, secret.as_ref()) {
                    Ok(()) => Ok(()),
                    Err(why) => {
                        refused = Some(why);
                        break;
                    }
                }
            }
        };
        if wrote.is_err() {
            break;
        }
    }
    let mut rest = [0u8; 4096];
    let closed = loop {
        match s.read(&mut rest) {
            Ok(0) => break true,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                break !matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut);
            }
        }
    };
    Ok(Outcome { local, closed, refused })
}

fn handshake(
    s: &mut TcpStream,
    reader: &mut FrameReader,
    protocol: &Protocol,
    identity: &str,
    secret: Option<&Secret>,
) -> Result<(), String> {
    protocol.write_preamble(s).map_err(|e| e.to_string())?;
    protocol.read_preamble(s, "listener").map_err(|e| e.to_string())?;
    let me = Party { protocol, secret, identity };
    auth::client(s, reader, me, |_| Ok(())).map(drop).map_err(|e| e.to_string())
}

/// The bytes a client sends in a whole, successful handshake with `addr` (preamble and
/// proof), to replay later.
pub fn capture(addr: &str, protocol: &Protocol, identity: &str, secret: &Secret) -> Vec<u8> {
    struct Recording(TcpStream, Vec<u8>);
    impl Read for Recording {
        fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
            self.0.read(b)
        }
    }
    impl Write for Recording {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            let n = self.0.write(b)?;
            self.1.extend_from_slice(&b[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
    let mut r = Recording(TcpStream::connect(addr).expect("connect to capture"), Vec::new());
    protocol.write_preamble(&mut r).expect("preamble");
    protocol.read_preamble(&mut r, addr).expect("the listener's preamble");
    let mut reader = FrameReader::new(addr, 1 << 20);
    let me = Party { protocol, secret: Some(secret), identity };
    auth::client(&mut r, &mut reader, me, |_| Ok(())).expect("a handshake with the right secret");
    r.1
}

/// One frame holding `msg`.
pub fn frame<T: Serialize + ?Sized>(msg: &T) -> Vec<u8> {
    let mut b = Vec::new();
    encode(msg, &mut b);
    b
}

/// `protocol`'s preamble followed by `rest`.
pub fn after_preamble(protocol: &Protocol, rest: &[u8]) -> Vec<u8> {
    let mut b = protocol.preamble().to_vec();
    b.extend_from_slice(rest);
    b
}

/// The cases every listener of `protocol` must refuse before a peer proved the secret:
/// strangers, other versions, huge and truncated frames, garbage, a missing or wrong secret,
/// a replayed handshake (`captured`, from [`capture`]), over-long and foreign identities
/// (`foreign` names no identity this listener admits), steps out of order, and slow senders.
pub fn unauthenticated(
    protocol: &Protocol,
    identity: &str,
    foreign: &str,
    secret: &Secret,
    captured: &[u8],
) -> Vec<Case> {
    let p = protocol;
    let challenge = |identity: &str, keyed| AuthFrame::Challenge {
        nonce: [9; 32],
        identity: identity.into(),
        keyed,
    };
    let wrong = Secret::generate().expect("random bytes");
    let mut other_version = p.magic.to_vec();
    other_version.extend_from_slice(&(p.version + 1).to_le_bytes());
    let mut half = frame(&challenge(identity, true));
    half.truncate(half.len() / 2);
    let mut announced = (60u32 << 20).to_le_bytes().to_vec();
    announced.extend_from_slice(&[0; 10]);
    let send = |b: Vec<u8>| vec![Step::Send(b)];
    vec![
        Case::new("an HTTP request", send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n".to_vec())),
        Case::new("zeros instead of a preamble", send(vec![0; 64])),
        Case::new("another protocol version", send(other_version)),
        Case::new(
            "half a preamble, then the end",
            vec![Step::Send(p.preamble()[..6].to_vec()), Step::End],
        ),
        Case::new("a preamble, then the end", vec![Step::Send(p.preamble().to_vec()), Step::End]),
        Case::new("a frame of 4 GiB announced", send(after_preamble(p, &u32::MAX.to_le_bytes()))),
        Case::new("60 MiB announced, 10 bytes sent", send(after_preamble(p, &announced))),
        Case::new(
            "an undecodable frame",
            send(after_preamble(p, &[5, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0xff])),
        ),
        Case::new(
            "half a challenge, then the end",
            vec![Step::Send(after_preamble(p, &half)), Step::End],
        ),
        Case::new(
            "a proof before the challenge",
            send(after_preamble(p, &frame(&AuthFrame::Proof { mac: Some([1; 32]) }))),
        ),
        Case::new(
            "a challenge without a secret",
            send(after_preamble(p, &frame(&challenge(identity, false)))),
        ),
        Case::new(
            "a challenge naming an identity of 300 bytes",
            send(after_preamble(p, &frame(&challenge(&"w".repeat(300), true)))),
        ),
        Case::new("no secret", vec![Step::Handshake { identity: identity.into(), secret: None }]),
        Case::new(
            "a wrong secret",
            vec![Step::Handshake { identity: identity.into(), secret: Some(wrong) }],
        ),
        Case::new("a replayed handshake", send(captured.to_vec())),
        Case::new(
            format!("the identity `{foreign}`"),
            vec![Step::Handshake { identity: foreign.into(), secret: Some(secret.clone()) }],
        ),
        Case::new("a preamble, then silence", vec![Step::Send(p.preamble().to_vec())]),
        Case::new(
            "a handshake a byte every 300 ms",
            vec![Step::Trickle {
                bytes: after_preamble(p, &frame(&challenge(identity, true))),
                gap: Duration::from_millis(300),
            }],
        ),
    ]
}
