//! A wide-area link emulated in user space: a token bucket for the bandwidth and a delay line
//! for the propagation delay, between a device's connector and its TCP socket.
//!
//! Bytes are cut into segments of one TCP payload (1,448 bytes). A segment written at `t`
//! starts to leave when the link is free (`start = max(t, free)`), occupies it for
//! `len · 8 / bandwidth` (`free = start + that`: the token bucket, without burst) and reaches
//! the socket `delay` later. A shaping thread sleeps until each segment's delivery time and
//! writes it; segments keep their order. The queue in front of the link holds about the
//! bandwidth-delay product plus 200 ms of transmission, and a writer blocks when it is full, as
//! an application does on a full socket buffer.
//!
//! Where network namespaces are available, the bandwidth is shaped by the kernel instead (`tc
//! qdisc ... tbf` on the device's veth) and only the delay is added here (this kernel has no
//! netem).

use clasp_wire::Conn;
use crossbeam_channel::{Receiver, Sender};
use std::io::{self, Write};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One TCP payload: the unit of the delay line.
pub const SEGMENT: usize = 1448;

/// How a device's link to the cloud is emulated in user space.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LinkShape {
    /// Bandwidth (bits/s); `None` leaves it to the network.
    pub bandwidth_bps: Option<f64>,
    /// One-way propagation delay.
    pub delay: Duration,
}

impl LinkShape {
    /// Whether anything is emulated.
    pub fn is_shaped(&self) -> bool {
        self.bandwidth_bps.is_some() || !self.delay.is_zero()
    }

    /// Segments the queue in front of the link holds.
    fn queue_segments(&self) -> usize {
        let horizon = self.delay.as_secs_f64() + 0.2;
        let bytes = self.bandwidth_bps.map_or(f64::INFINITY, |b| b / 8.0 * horizon);
        if bytes.is_finite() { ((bytes / SEGMENT as f64).ceil() as usize).max(32) } else { 8192 }
    }

    /// When a segment of `len` bytes offered at `at` reaches the far end, given when the link
    /// is free; updates `free`.
    pub(crate) fn delivery(&self, at: Instant, len: usize, free: &mut Instant) -> Instant {
        let start = (*free).max(at);
        let busy = self
            .bandwidth_bps
            .map_or(Duration::ZERO, |bps| Duration::from_secs_f64(len as f64 * 8.0 / bps.max(1.0)));
        *free = start + busy;
        *free + self.delay
    }
}

struct Segment {
    bytes: Vec<u8>,
    at: Instant,
}

/// The sending side of a device's link: straight to the socket, or through the shaper.
pub struct LinkWriter(Inner);

enum Inner {
    /// Unshaped.
    Direct(io::BufWriter<Conn>),
    /// Through a shaping thread.
    Shaped {
        /// Segments to the thread (`None` once finished).
        tx: Option<Sender<Segment>>,
        /// The thread; its result is the socket's.
        thread: Option<JoinHandle<io::Result<()>>>,
    },
}

impl std::fmt::Debug for LinkWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self.0 {
            Inner::Direct(_) => "LinkWriter::Direct",
            Inner::Shaped { .. } => "LinkWriter::Shaped",
        })
    }
}

impl LinkWriter {
    /// A writer to `stream` emulating `shape`.
    pub fn new(stream: Conn, shape: LinkShape) -> Self {
        if !shape.is_shaped() {
            return Self(Inner::Direct(io::BufWriter::with_capacity(64 << 10, stream)));
        }
        let (tx, rx) = crossbeam_channel::bounded(shape.queue_segments());
        let thread = std::thread::Builder::new()
            .name("wan-link".into())
            .spawn(move || run_link(stream, &rx, shape))
            .expect("spawn the link thread");
        Self(Inner::Shaped { tx: Some(tx), thread: Some(thread) })
    }

    /// Delivers everything written and returns the socket's result.
    pub fn finish(mut self) -> io::Result<()> {
        match &mut self.0 {
            Inner::Direct(w) => w.flush(),
            Inner::Shaped { tx, thread } => {
                tx.take();
                thread.take().map_or(Ok(()), |t| {
                    t.join().unwrap_or_else(|_| Err(io::Error::other("link thread panicked")))
                })
            }
        }
    }
}

/// The shaping thread's error, once it has stopped.
fn broken(thread: &mut Option<JoinHandle<io::Result<()>>>) -> io::Error {
    match thread.take().map(JoinHandle::join) {
        Some(Ok(Err(e))) => e,
        _ => io::Error::new(io::ErrorKind::BrokenPipe, "the link to the cloud closed"),
    }
}

impl Write for LinkWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.0 {
            Inner::Direct(w) => w.write(buf),
            Inner::Shaped { tx, thread } => {
                let Some(sender) = tx.as_ref() else {
                    return Err(io::Error::new(io::ErrorKind::BrokenPipe, "link finished"));
                };
                let n = buf.len().min(SEGMENT);
                let seg = Segment { bytes: buf[..n].to_vec(), at: Instant::now() };
                if sender.send(seg).is_err() {
                    tx.take();
                    return Err(broken(thread));
                }
                Ok(n)
            }
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.0 {
            Inner::Direct(w) => w.flush(),
            // Segments leave when the emulated link delivers them.
            Inner::Shaped { .. } => Ok(()),
        }
    }
}

/// The shaping thread: delivers each segment at its time.
fn run_link(mut stream: Conn, rx: &Receiver<Segment>, shape: LinkShape) -> io::Result<()> {
    let mut free = Instant::now();
    for seg in rx {
        let at = shape.delivery(seg.at, seg.bytes.len(), &mut free);
        let now = Instant::now();
        if at > now {
            std::thread::sleep(at - now);
        }
        stream.write_all(&seg.bytes)?;
    }
    stream.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_queue_behind_the_bandwidth_then_wait_the_delay() {
        let shape = LinkShape { bandwidth_bps: Some(8_000.0), delay: Duration::from_millis(50) };
        let t0 = Instant::now();
        let mut free = t0;
        // 1,000 bytes at 8 kbit/s take 1 s on the link.
        let a = shape.delivery(t0, 1000, &mut free);
        let b = shape.delivery(t0, 1000, &mut free);
        assert_eq!(a - t0, Duration::from_millis(1050));
        assert_eq!(b - t0, Duration::from_millis(2050));
        // An idle link starts at once.
        let later = t0 + Duration::from_secs(10);
        assert_eq!(shape.delivery(later, 0, &mut free) - later, Duration::from_millis(50));
        assert!(!LinkShape::default().is_shaped());
        assert_eq!(LinkShape { bandwidth_bps: None, ..shape }.queue_segments(), 8192);
    }

    #[test]
    fn a_shaped_link_delivers_every_byte_in_order() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let reader = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut got = Vec::new();
            io::Read::read_to_end(&mut s, &mut got).unwrap();
            got
        });
        let shape = LinkShape { bandwidth_bps: Some(8e6), delay: Duration::from_millis(1) };
        let mut w =
            LinkWriter::new(Conn::plain(std::net::TcpStream::connect(addr).unwrap()), shape);
        let data: Vec<u8> = (0..20_000u32).map(|i| (i % 251) as u8).collect();
        w.write_all(&data).unwrap();
        w.finish().unwrap();
        assert_eq!(reader.join().unwrap(), data);
    }
}
