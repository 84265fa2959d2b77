//! A connection between two nodes: a TCP stream, plain or under TLS, that several threads may
//! use at once (one reading, others writing), and the limits that keep handshakes cheap — a
//! whole-handshake [`Deadline`] and a cap on connections still handshaking
//! ([`HandshakeGate`]).

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How long a peer has to finish its whole handshake (TLS, preamble, authentication, hello).
pub const HANDSHAKE_DEADLINE: Duration = Duration::from_secs(10);
/// Most connections a listener lets handshake at once; more are closed at once.
pub const MAX_PENDING_HANDSHAKES: usize = 32;

/// A connection to a peer. Clones share it; `&Conn` reads and writes, so a receiving thread
/// and a sending thread each hold one.
#[derive(Debug)]
pub struct Conn {
    tcp: TcpStream,
    kind: Kind,
}

#[derive(Debug)]
enum Kind {
    Plain,
    #[cfg(feature = "tls")]
    Tls(Arc<crate::tls::Session>),
}

impl Conn {
    /// A plain TCP connection.
    pub fn plain(tcp: TcpStream) -> Self {
        Self { tcp, kind: Kind::Plain }
    }

    #[cfg(feature = "tls")]
    pub(crate) fn tls(tcp: TcpStream, session: crate::tls::Session) -> Self {
        Self { tcp, kind: Kind::Tls(Arc::new(session)) }
    }

    /// Whether the connection is encrypted.
    pub fn is_tls(&self) -> bool {
        !matches!(self.kind, Kind::Plain)
    }

    /// Another handle on the same connection.
    pub fn try_clone(&self) -> io::Result<Self> {
        let kind = match &self.kind {
            Kind::Plain => Kind::Plain,
            #[cfg(feature = "tls")]
            Kind::Tls(s) => Kind::Tls(s.clone()),
        };
        Ok(Self { tcp: self.tcp.try_clone()?, kind })
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.tcp.peer_addr()
    }

    /// Sets the socket's read and write timeouts (`None`: block).
    pub fn set_timeouts(&self, t: Option<Duration>) -> io::Result<()> {
        self.tcp.set_read_timeout(t)?;
        self.tcp.set_write_timeout(t)
    }

    /// Stops sending: TLS says so first (close_notify); the peer reads the end of the stream.
    pub fn finish(&self) {
        #[cfg(feature = "tls")]
        if let Kind::Tls(s) = &self.kind {
            s.close(&self.tcp);
        }
        let _ = self.tcp.shutdown(Shutdown::Write);
    }

    /// Closes both directions at once.
    pub fn close(&self) {
        let _ = self.tcp.shutdown(Shutdown::Both);
    }
}

impl Read for &Conn {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        match &self.kind {
            Kind::Plain => (&self.tcp).read(out),
            #[cfg(feature = "tls")]
            Kind::Tls(s) => s.read(&self.tcp, out),
        }
    }
}

impl Write for &Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &self.kind {
            Kind::Plain => (&self.tcp).write(buf),
            #[cfg(feature = "tls")]
            Kind::Tls(s) => s.write(&self.tcp, buf).map(|()| buf.len()),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Read for Conn {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        (&*self).read(out)
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        (&*self).write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        (&*self).write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// When a handshake must be over.
#[derive(Clone, Copy, Debug)]
pub struct Deadline {
    at: Instant,
    total: Duration,
}

impl Deadline {
    /// `total` from now.
    pub fn after(total: Duration) -> Self {
        Self { at: Instant::now() + total, total }
    }

    /// The whole allowance.
    pub fn total(&self) -> Duration {
        self.total
    }

    fn left(&self) -> io::Result<Duration> {
        let left = self.at.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "handshake deadline passed"));
        }
        Ok(left)
    }
}

/// Something whose blocking reads and writes can be given a timeout.
pub trait Timeouts {
    /// Sets the read and write timeouts.
    fn set_timeouts(&self, t: Option<Duration>) -> io::Result<()>;
}

impl Timeouts for TcpStream {
    fn set_timeouts(&self, t: Option<Duration>) -> io::Result<()> {
        self.set_read_timeout(t)?;
        self.set_write_timeout(t)
    }
}

impl Timeouts for Conn {
    fn set_timeouts(&self, t: Option<Duration>) -> io::Result<()> {
        Conn::set_timeouts(self, t)
    }
}

/// Reads and writes of `T` that all end by one deadline (a peer sending a byte a second does
/// not keep a handshake open).
#[derive(Debug)]
pub struct Timed<'a, T> {
    inner: &'a T,
    deadline: Deadline,
}

impl<'a, T: Timeouts> Timed<'a, T> {
    /// `inner` under `deadline`.
    pub fn new(inner: &'a T, deadline: Deadline) -> Self {
        Self { inner, deadline }
    }

    fn arm(&self) -> io::Result<()> {
        self.inner.set_timeouts(Some(self.deadline.left()?))
    }
}

impl<'a, T: Timeouts> Read for Timed<'a, T>
where
    &'a T: Read,
{
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        self.arm()?;
        let mut inner = self.inner;
        inner.read(out)
    }
}

impl<'a, T: Timeouts> Write for Timed<'a, T>
where
    &'a T: Write,
{
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.arm()?;
        let mut inner = self.inner;
        inner.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        let mut inner = self.inner;
        inner.flush()
    }
}

/// Counts a listener's connections that have not finished their handshake, and refuses more
/// than its cap.
#[derive(Clone, Debug)]
pub struct HandshakeGate {
    open: Arc<AtomicUsize>,
    max: usize,
}

impl Default for HandshakeGate {
    fn default() -> Self {
        Self::new(MAX_PENDING_HANDSHAKES)
    }
}

impl HandshakeGate {
    /// At most `max` handshakes at once.
    pub fn new(max: usize) -> Self {
        Self { open: Arc::default(), max }
    }

    /// A permit for one more handshake, held until it is dropped; `None` at the cap.
    pub fn try_enter(&self) -> Option<GatePermit> {
        let mut n = self.open.load(Ordering::Relaxed);
        loop {
            if n >= self.max {
                return None;
            }
            match self.open.compare_exchange_weak(n, n + 1, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return Some(GatePermit(self.open.clone())),
                Err(now) => n = now,
            }
        }
    }

    /// Handshakes under way.
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    /// The cap.
    pub fn max(&self) -> usize {
        self.max
    }
}

/// One handshake's place under a [`HandshakeGate`].
#[derive(Debug)]
pub struct GatePermit(Arc<AtomicUsize>);

impl Drop for GatePermit {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn the_gate_admits_up_to_its_cap_and_frees_places_on_drop() {
        let gate = HandshakeGate::new(2);
        let a = gate.try_enter().unwrap();
        let b = gate.try_enter().unwrap();
        assert!(gate.try_enter().is_none());
        assert_eq!(gate.open(), 2);
        drop(a);
        let c = gate.try_enter().unwrap();
        drop((b, c));
        assert_eq!(gate.open(), 0);
    }

    #[test]
    fn a_trickling_peer_does_not_outlive_the_deadline() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let peer = std::thread::spawn(move || {
            let mut s = TcpStream::connect(addr).unwrap();
            // One byte, then silence (until the reader gives up and closes).
            s.write_all(b"x").unwrap();
            let mut rest = Vec::new();
            let _ = s.read_to_end(&mut rest);
        });
        let (tcp, _) = l.accept().unwrap();
        let conn = Conn::plain(tcp);
        let mut timed = Timed::new(&conn, Deadline::after(Duration::from_millis(200)));
        let mut got = Vec::new();
        let err = timed.read_to_end(&mut got).unwrap_err();
        assert_eq!(got, b"x");
        assert!(matches!(err.kind(), io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock), "{err}");
        // Once the deadline passed, no read waits again.
        let again = timed.read(&mut [0; 1]).unwrap_err();
        assert_eq!(again.kind(), io::ErrorKind::TimedOut);
        conn.close();
        peer.join().unwrap();
    }
}
