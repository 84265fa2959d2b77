use super::*;
use crate::frame::{Protocol, encode};
use std::io;
use std::net::{TcpListener, TcpStream};
use std::thread::JoinHandle;

const P: Protocol = Protocol { name: "t", magic: *b"AUTHTEST", version: 1, on_mismatch: "-" };

fn secret(c: char) -> Secret {
    Secret::parse(&c.to_string().repeat(40), "test").unwrap()
}

/// A stream that keeps a copy of everything written to it.
struct Recording<S> {
    inner: S,
    sent: Vec<u8>,
}

impl<S: Read> Read for Recording<S> {
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        self.inner.read(b)
    }
}

impl<S: Write> Write for Recording<S> {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(b)?;
        self.sent.extend_from_slice(&b[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// A server answering one connection as `server` with `secret`, admitting `worker:*`.
fn serve(secret: Option<Secret>) -> (String, JoinHandle<Result<String, WireError>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let t = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut r = FrameReader::new("client", MAX_HANDSHAKE_FRAME);
        let me = Party { protocol: &P, secret: secret.as_ref(), identity: "server" };
        server(&mut s, &mut r, me, |id| {
            if id.starts_with("worker:") { Ok(()) } else { Err(format!("`{id}` is no worker")) }
        })
    });
    (addr, t)
}

fn dial(
    addr: &str,
    secret: Option<&Secret>,
    identity: &str,
) -> (Result<String, WireError>, Vec<u8>) {
    let mut s = Recording { inner: TcpStream::connect(addr).unwrap(), sent: Vec::new() };
    let mut r = FrameReader::new("server", MAX_HANDSHAKE_FRAME);
    let me = Party { protocol: &P, secret, identity };
    let got = client(&mut s, &mut r, me, |id| {
        if id == "server" { Ok(()) } else { Err(format!("expected the server, not `{id}`")) }
    });
    (got, s.sent)
}

#[test]
fn both_sides_prove_the_secret_and_learn_each_others_identity() {
    let k = secret('k');
    let (addr, server) = serve(Some(k.clone()));
    let (got, sent) = dial(&addr, Some(&k), "worker:1");
    assert_eq!(got.unwrap(), "server");
    assert_eq!(server.join().unwrap().unwrap(), "worker:1");
    // The secret never crosses the wire.
    let text = k.expose().as_bytes();
    assert!(!sent.windows(text.len()).any(|w| w == text));
}

#[test]
fn a_wrong_secret_is_refused_on_both_sides() {
    let (addr, server) = serve(Some(secret('k')));
    let (got, _) = dial(&addr, Some(&secret('x')), "worker:1");
    // The client already finds that the server does not prove its secret.
    let err = got.unwrap_err().to_string();
    assert!(err.contains("could not prove itself"), "{err}");
    let err = server.join().unwrap().unwrap_err();
    assert!(matches!(err, WireError::Rejected { .. } | WireError::Auth { .. }), "{err}");
}

#[test]
fn a_client_without_a_secret_is_refused_before_any_proof() {
    let (addr, server) = serve(Some(secret('k')));
    let (got, _) = dial(&addr, None, "worker:1");
    match got.unwrap_err() {
        WireError::Rejected { reason, .. } => assert!(reason.contains("--token-file"), "{reason}"),
        other => panic!("{other}"),
    }
    assert!(matches!(server.join().unwrap(), Err(WireError::Auth { .. })));
}

#[test]
fn a_keyed_client_refuses_an_insecure_server() {
    let (addr, server) = serve(None);
    let (got, _) = dial(&addr, Some(&secret('k')), "worker:1");
    assert!(got.unwrap_err().to_string().contains("holds no cluster secret"));
    assert!(server.join().unwrap().is_err());
    // Two insecure nodes do connect.
    let (addr, server) = serve(None);
    assert_eq!(dial(&addr, None, "worker:2").0.unwrap(), "server");
    assert_eq!(server.join().unwrap().unwrap(), "worker:2");
}

#[test]
fn a_captured_handshake_replayed_is_refused() {
    let k = secret('k');
    let (addr, server) = serve(Some(k.clone()));
    let (got, sent) = dial(&addr, Some(&k), "worker:1");
    got.unwrap();
    server.join().unwrap().unwrap();
    // Replayed byte for byte to a new connection: the server's nonce differs.
    let (addr, server) = serve(Some(k));
    let mut s = TcpStream::connect(&addr).unwrap();
    s.write_all(&sent).unwrap();
    let err = server.join().unwrap().unwrap_err();
    match &err {
        WireError::Auth { reason, .. } => assert!(reason.contains("wrong cluster secret"), "{err}"),
        other => panic!("{other}"),
    }
}

#[test]
fn the_servers_own_mac_reflected_as_a_proof_is_refused() {
    let k = secret('k');
    let (addr, server) = serve(Some(k));
    let mut s = TcpStream::connect(&addr).unwrap();
    let mut r = FrameReader::new("server", MAX_HANDSHAKE_FRAME);
    let challenge =
        AuthFrame::Challenge { nonce: [7; 32], identity: "worker:1".into(), keyed: true };
    send(&mut s, "server", &challenge).unwrap();
    let Ok(AuthFrame::Answer { mac, .. }) = receive(&mut s, &mut r) else { panic!() };
    send(&mut s, "server", &AuthFrame::Proof { mac }).unwrap();
    assert!(matches!(receive(&mut s, &mut r), Err(WireError::Rejected { .. })));
    assert!(matches!(server.join().unwrap(), Err(WireError::Auth { .. })));
}

#[test]
fn identities_are_checked_after_the_proof_and_bounded_at_decode() {
    let k = secret('k');
    let (addr, server) = serve(Some(k.clone()));
    let (got, _) = dial(&addr, Some(&k), "device:edge-1");
    assert!(got.unwrap_err().to_string().contains("is no worker"));
    server.join().unwrap().unwrap_err();

    let long = AuthFrame::Challenge { nonce: [0; 32], identity: "w".repeat(300), keyed: true };
    let mut b = Vec::new();
    encode(&long, &mut b);
    let err = FrameReader::new("c", MAX_HANDSHAKE_FRAME)
        .read_message::<AuthFrame, ()>(&mut &b[..], &())
        .unwrap_err();
    assert!(err.to_string().contains("AuthFrame.identity has 300"), "{err}");
}

#[test]
fn the_bearer_check_takes_the_admin_token_only() {
    let k = secret('k');
    let token = admin_token(&k);
    assert_eq!(token.len(), 64);
    assert_ne!(token, k.expose());
    assert_ne!(token, admin_token(&secret('j')));
    assert_eq!(check_bearer(&k, Some(&format!("Bearer {token}"))), Ok(()));
    assert_eq!(check_bearer(&k, Some(&format!("bearer  {token} "))), Ok(()));
    assert_eq!(check_bearer(&k, None), Err(BearerError::Missing));
    assert_eq!(check_bearer(&k, Some(&token)), Err(BearerError::Malformed));
    assert_eq!(check_bearer(&k, Some(&format!("Basic {token}"))), Err(BearerError::Malformed));
    assert_eq!(check_bearer(&k, Some(&format!("Bearer {}", k.expose()))), Err(BearerError::Wrong));
    assert_eq!(check_bearer(&k, Some(&format!("Bearer {}", &token[1..]))), Err(BearerError::Wrong));
}
