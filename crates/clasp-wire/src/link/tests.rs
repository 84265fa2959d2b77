use super::*;
use crate::conn::HANDSHAKE_DEADLINE;
use crate::testing::TestCa;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::thread::JoinHandle;

const P: Protocol = Protocol { name: "t", magic: *b"LINKTEST", version: 1, on_mismatch: "-" };

fn dir(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("clasp-link-{}-{name}", std::process::id()))
}

fn secure(ca: &TestCa, node: &str, secret: &Secret) -> Security {
    Security { secret: Some(secret.clone()), tls: Some(Tls::load(&ca.node(node)).unwrap()) }
}

fn opening<'a>(sec: &'a Security, identity: &'a str) -> Opening<'a> {
    Opening {
        security: sec,
        protocol: &P,
        identity,
        max_frame: 1 << 20,
        deadline: Deadline::after(HANDSHAKE_DEADLINE),
    }
}

/// Answers one link; the server then echoes every byte back until the client finishes.
fn echo_server(sec: Security) -> (String, JoinHandle<Result<String, WireError>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let t = std::thread::spawn(move || {
        let (tcp, _) = l.accept().unwrap();
        let e = answer(tcp, &opening(&sec, "server"), |_| Ok(()))?;
        e.conn.set_timeouts(None).unwrap();
        let (reading, writing) = (e.conn.try_clone().unwrap(), e.conn);
        let mut buf = vec![0; 1 << 16];
        let mut r = &reading;
        loop {
            let n = r.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            (&writing).write_all(&buf[..n]).unwrap();
        }
        writing.finish();
        Ok(e.identity)
    });
    (addr, t)
}

fn dial_to(addr: &str, sec: &Security) -> Result<Established, WireError> {
    let tcp = TcpStream::connect(addr).unwrap();
    dial(tcp, addr, &opening(sec, "client"), |id| {
        if id == "server" { Ok(()) } else { Err(format!("not the server: {id}")) }
    })
}

#[test]
fn a_tls_link_carries_data_both_ways_at_once() {
    let d = dir("both-ways");
    let ca = TestCa::new(&d);
    let k = Secret::generate().unwrap();
    let (addr, server) = echo_server(secure(&ca, "server", &k));
    let e = dial_to(&addr, &secure(&ca, "client", &k)).unwrap();
    assert!(e.conn.is_tls());
    assert_eq!(e.identity, "server");
    e.conn.set_timeouts(None).unwrap();
    // 8 MiB written while it is echoed back: neither direction may wait on the other.
    let data: Vec<u8> = (0..8u32 << 20).map(|i| (i * 31 % 251) as u8).collect();
    let writer = e.conn.try_clone().unwrap();
    let sent = data.clone();
    let w = std::thread::spawn(move || {
        for chunk in sent.chunks(100_000) {
            (&writer).write_all(chunk).unwrap();
        }
        writer.finish();
    });
    let mut back = Vec::new();
    (&e.conn).read_to_end(&mut back).unwrap();
    w.join().unwrap();
    assert_eq!(back.len(), data.len());
    assert!(back == data);
    assert_eq!(server.join().unwrap().unwrap(), "client");
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn tls_refuses_a_foreign_ca_and_a_plain_peer() {
    let d = dir("foreign");
    let (ca, other) = (TestCa::new(&d.join("a")), TestCa::new(&d.join("b")));
    let k = Secret::generate().unwrap();
    // A client whose certificate another CA signed.
    let (addr, server) = echo_server(secure(&ca, "server", &k));
    let err = dial_to(&addr, &secure(&other, "stranger", &k)).unwrap_err();
    assert!(matches!(err, WireError::Tls { .. } | WireError::Io { .. }), "{err}");
    assert!(matches!(server.join().unwrap(), Err(WireError::Tls { .. })));
    // A plain client with the right secret.
    let (addr, server) = echo_server(secure(&ca, "server", &k));
    assert!(dial_to(&addr, &Security::with_secret(k.clone())).is_err());
    assert!(matches!(server.join().unwrap(), Err(WireError::Tls { .. })));
    // TLS, the right CA, the wrong secret.
    let (addr, server) = echo_server(secure(&ca, "server", &k));
    let wrong = secure(&ca, "client", &Secret::generate().unwrap());
    assert!(dial_to(&addr, &wrong).unwrap_err().to_string().contains("could not prove"));
    assert!(server.join().unwrap().is_err());
    std::fs::remove_dir_all(d).unwrap();
}

#[test]
fn a_silent_client_is_dropped_at_the_deadline() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let silent = TcpStream::connect(addr).unwrap();
    let (tcp, _) = l.accept().unwrap();
    let sec = Security::with_secret(Secret::generate().unwrap());
    let o = Opening {
        deadline: Deadline::after(std::time::Duration::from_millis(100)),
        ..opening(&sec, "s")
    };
    let err = answer(tcp, &o, |_| Ok(())).unwrap_err();
    assert!(matches!(err, WireError::Deadline { .. }), "{err}");
    drop(silent);
}
