//! Length-prefixed framing, shared by every clasp connection.
//!
//! A connection opens with its [`Protocol`]'s preamble: an 8-byte magic and the protocol
//! version (`u32`, little-endian), so that anything that is not a peer of that protocol, or a
//! peer of another version, is refused before a byte is interpreted. Frames follow: a
//! little-endian `u32` length and a postcard-encoded message.
//!
//! A [`FrameReader`] refuses a frame announcing more than its limit before reading it, and its
//! buffer grows only as bytes arrive (doubling, up to the limit), never to an announced length:
//! a peer that announces a large frame and sends little costs little. Every decoded message is
//! checked against the receiver's bounds ([`Validate`]) before it is handed on.

use crate::bounds::Validate;
use crate::error::WireError;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::io::{self, Read, Write};

/// Default largest frame accepted (bytes).
pub const DEFAULT_MAX_FRAME: u32 = 64 << 20;
/// Bytes of the length prefix.
const HEADER: usize = 4;
/// Bytes of the preamble: magic and version.
pub const PREAMBLE_LEN: usize = 12;
/// A reader's buffer before any frame made it grow.
const INITIAL_BUFFER: usize = 256 << 10;

/// A protocol's identity on the wire.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Protocol {
    /// Its name, for errors (`clasp`, `clasp edge`).
    pub name: &'static str,
    /// First bytes of every connection.
    pub magic: [u8; 8],
    /// Bumped on every incompatible change of the protocol's messages.
    pub version: u32,
    /// What to do about a peer of another version, for the error.
    pub on_mismatch: &'static str,
}

impl Protocol {
    /// The magic followed by the version.
    pub fn preamble(&self) -> [u8; PREAMBLE_LEN] {
        let mut b = [0u8; PREAMBLE_LEN];
        b[..8].copy_from_slice(&self.magic);
        b[8..].copy_from_slice(&self.version.to_le_bytes());
        b
    }

    /// Writes the preamble.
    pub fn write_preamble(&self, w: &mut impl Write) -> io::Result<()> {
        w.write_all(&self.preamble())
    }

    /// Reads and checks the preamble of `peer`. Reads no byte past it, and gives up at the
    /// first byte that differs from the magic (a stranger is not waited for).
    pub fn read_preamble(&self, r: &mut impl Read, peer: &str) -> Result<(), WireError> {
        let mut b = [0u8; PREAMBLE_LEN];
        let mut got = 0;
        let stranger = |got: &[u8]| WireError::NotPeer {
            peer: peer.into(),
            protocol: self.name,
            got: got.to_vec(),
        };
        while got < b.len() {
            match r.read(&mut b[got..]) {
                Ok(0) => return Err(stranger(&b[..got])),
                Ok(n) => {
                    got += n;
                    let magic = got.min(self.magic.len());
                    if b[..magic] != self.magic[..magic] {
                        return Err(stranger(&b[..got]));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(source) => return Err(WireError::Io { peer: peer.into(), source }),
            }
        }
        let theirs = u32::from_le_bytes([b[8], b[9], b[10], b[11]]);
        if theirs != self.version {
            return Err(WireError::Version {
                peer: peer.into(),
                protocol: self.name,
                theirs,
                ours: self.version,
                help: self.on_mismatch,
            });
        }
        Ok(())
    }
}

/// Appends one frame holding `msg` to `buf`.
pub fn encode<T: Serialize + ?Sized>(msg: &T, buf: &mut Vec<u8>) {
    let at = buf.len();
    buf.extend_from_slice(&[0; HEADER]);
    let mut out =
        postcard::to_extend(msg, std::mem::take(buf)).expect("encoding to a Vec cannot fail");
    let len = u32::try_from(out.len() - at - HEADER).expect("a message is under 4 GiB");
    out[at..at + HEADER].copy_from_slice(&len.to_le_bytes());
    *buf = out;
}

/// Writes `msg` as one frame, encoded in `buf` (cleared first); returns the bytes written.
pub fn write_frame<T: Serialize + ?Sized>(
    w: &mut impl Write,
    msg: &T,
    buf: &mut Vec<u8>,
) -> io::Result<usize> {
    buf.clear();
    encode(msg, buf);
    w.write_all(buf)?;
    Ok(buf.len())
}

/// Reads frames from a byte stream into reusable buffer space.
#[derive(Debug)]
pub struct FrameReader {
    buf: Vec<u8>,
    start: usize,
    end: usize,
    max_frame: u32,
    peer: String,
    consumed: u64,
}

impl FrameReader {
    /// A reader accepting frames of up to `max_frame` bytes from `peer`.
    pub fn new(peer: impl Into<String>, max_frame: u32) -> Self {
        Self::with_capacity(peer, max_frame, INITIAL_BUFFER)
    }

    /// A reader whose buffer starts at `initial` bytes (it grows as frames need).
    pub fn with_capacity(peer: impl Into<String>, max_frame: u32, initial: usize) -> Self {
        Self {
            buf: vec![0; initial.clamp(HEADER, HEADER + max_frame as usize)],
            start: 0,
            end: 0,
            max_frame,
            peer: peer.into(),
            consumed: 0,
        }
    }

    /// Changes the largest frame accepted from now on (a handshake reads small frames, the
    /// protocol after it larger ones).
    pub fn set_max_frame(&mut self, max_frame: u32) {
        self.max_frame = max_frame;
    }

    /// The peer, as errors name it.
    pub fn peer(&self) -> &str {
        &self.peer
    }

    /// Bytes of every frame taken so far, length prefixes included.
    pub fn consumed(&self) -> u64 {
        self.consumed
    }

    /// Bytes of buffer space held.
    pub fn buffer_len(&self) -> usize {
        self.buf.len()
    }

    /// The next complete frame already buffered, decoded and checked against `limits`, if any.
    ///
    /// After [`WireError::Invalid`] the reader stands after the offending frame, so a caller
    /// may drop the message and go on; after any other error the stream is unusable.
    pub fn next_buffered<M, L>(&mut self, limits: &L) -> Result<Option<M>, WireError>
    where
        M: DeserializeOwned + Validate<L>,
        L: ?Sized,
    {
        let avail = self.end - self.start;
        if avail < HEADER {
            return Ok(None);
        }
        let len = self.announced();
        if len > self.max_frame {
            return Err(WireError::FrameTooLarge {
                peer: self.peer.clone(),
                len,
                max: self.max_frame,
            });
        }
        let total = HEADER + len as usize;
        if avail < total {
            return Ok(None);
        }
        let body = &self.buf[self.start + HEADER..self.start + total];
        let decoded = postcard::take_from_bytes::<M>(body);
        self.start += total;
        self.consumed += total as u64;
        let (msg, rest) =
            decoded.map_err(|source| WireError::Decode { peer: self.peer.clone(), source })?;
        if !rest.is_empty() {
            return Err(WireError::Trailing { peer: self.peer.clone(), extra: rest.len() });
        }
        msg.validate(limits)
            .map_err(|source| WireError::Invalid { peer: self.peer.clone(), source })?;
        Ok(Some(msg))
    }

    /// The length prefix at `start` (at least `HEADER` bytes are buffered).
    fn announced(&self) -> u32 {
        let h = &self.buf[self.start..self.start + HEADER];
        u32::from_le_bytes([h[0], h[1], h[2], h[3]])
    }

    fn compact(&mut self) {
        self.buf.copy_within(self.start..self.end, 0);
        self.end -= self.start;
        self.start = 0;
    }

    /// Reads more bytes; `Ok(false)` at end of stream. Call it once [`Self::next_buffered`]
    /// has nothing more: a full buffer then holds the start of one frame within the limit, and
    /// only then does it grow.
    pub fn fill(&mut self, r: &mut impl Read) -> Result<bool, WireError> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.end == self.buf.len() {
            if self.start > 0 {
                self.compact();
            } else {
                // Doubling keeps the copies amortized and the buffer within twice the bytes
                // that actually arrived.
                let limit = HEADER + self.max_frame as usize;
                let grown = (self.buf.len() * 2).min(limit).max(self.buf.len());
                self.buf.resize(grown, 0);
            }
        }
        if self.end == self.buf.len() {
            // Complete frames fill the buffer: they must be taken first.
            return Ok(true);
        }
        loop {
            match r.read(&mut self.buf[self.end..]) {
                Ok(0) => return Ok(false),
                Ok(n) => {
                    self.end += n;
                    return Ok(true);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(source) => return Err(WireError::Io { peer: self.peer.clone(), source }),
            }
        }
    }

    /// At the end of the stream: an error if it ended inside a frame.
    pub fn end_of_stream(&self) -> Result<(), WireError> {
        let have = self.end - self.start;
        if have == 0 {
            return Ok(());
        }
        let need = if have < HEADER { HEADER } else { HEADER + self.announced() as usize };
        Err(WireError::Truncated { peer: self.peer.clone(), have, need })
    }

    /// Blocks until a whole frame is available and returns its message; `Ok(None)` when the
    /// stream ends between frames.
    pub fn read_message<M, L>(
        &mut self,
        r: &mut impl Read,
        limits: &L,
    ) -> Result<Option<M>, WireError>
    where
        M: DeserializeOwned + Validate<L>,
        L: ?Sized,
    {
        loop {
            if let Some(m) = self.next_buffered(limits)? {
                return Ok(Some(m));
            }
            if !self.fill(r)? {
                self.end_of_stream()?;
                return Ok(None);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bounds::{BoundsError, check_id};
    use serde::Deserialize;

    /// A message with one id, valid below the receiver's count.
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Probe {
        id: u32,
        bytes: Vec<u8>,
    }

    impl Validate<u32> for Probe {
        fn validate(&self, count: &u32) -> Result<(), BoundsError> {
            check_id("Probe.id", u64::from(self.id), u64::from(*count))
        }
    }

    const TEST: Protocol =
        Protocol { name: "test", magic: *b"TESTPROT", version: 3, on_mismatch: "upgrade" };

    fn frames(msgs: &[Probe]) -> Vec<u8> {
        let mut b = Vec::new();
        for m in msgs {
            encode(m, &mut b);
        }
        b
    }

    /// Hands out at most `chunk` bytes per read, as a socket does.
    struct Trickle<'a> {
        data: &'a [u8],
        chunk: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
            let n = self.data.len().min(self.chunk).min(out.len());
            out[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    fn probe(id: u32, len: usize) -> Probe {
        Probe { id, bytes: (0..len).map(|i| (i * 7) as u8).collect() }
    }

    #[test]
    fn frames_round_trip_and_count_their_bytes() {
        let msgs = [probe(0, 3), probe(1, 0), probe(2, 1000)];
        let wire = frames(&msgs);
        let mut r = FrameReader::new("t", 1 << 20);
        let mut src = Trickle { data: &wire, chunk: 7 };
        for m in &msgs {
            assert_eq!(r.read_message::<Probe, _>(&mut src, &3).unwrap().as_ref(), Some(m));
        }
        assert!(r.read_message::<Probe, _>(&mut src, &3).unwrap().is_none());
        assert_eq!(r.consumed(), wire.len() as u64);
        let mut again = Vec::new();
        let n = write_frame(&mut again, &msgs[2], &mut Vec::from(&b"stale"[..])).unwrap();
        assert_eq!(again, frames(&msgs[2..]));
        assert_eq!(n, again.len());
    }

    #[test]
    fn a_huge_announced_length_is_refused_before_anything_is_allocated() {
        for len in [u32::MAX, (1 << 20) + 1] {
            let mut r = FrameReader::new("t", 1 << 20);
            let err = r.read_message::<Probe, _>(&mut &len.to_le_bytes()[..], &1).unwrap_err();
            assert!(
                matches!(err, WireError::FrameTooLarge { len: l, max, .. } if l == len && max == 1 << 20),
                "{err}"
            );
            assert_eq!(r.buffer_len(), INITIAL_BUFFER);
        }
    }

    #[test]
    fn an_announced_frame_that_never_arrives_costs_only_what_arrived() {
        // Announces 60 MiB (within the limit) and sends 100 bytes of it.
        let mut wire = (60u32 << 20).to_le_bytes().to_vec();
        wire.extend_from_slice(&[0; 100]);
        let mut r = FrameReader::new("t", DEFAULT_MAX_FRAME);
        let err = r.read_message::<Probe, _>(&mut &wire[..], &1).unwrap_err();
        assert!(
            matches!(err, WireError::Truncated { have: 104, need, .. } if need == 4 + (60 << 20)),
            "{err}"
        );
        assert_eq!(r.buffer_len(), INITIAL_BUFFER);
    }

    #[test]
    fn a_stream_ending_inside_a_frame_or_its_length_is_truncated() {
        let whole = frames(&[probe(0, 10)]);
        for cut in [1, 3, 4, 5, whole.len() - 1] {
            let mut r = FrameReader::new("t", 1 << 20);
            let err = r.read_message::<Probe, _>(&mut &whole[..cut], &1).unwrap_err();
            let need = if cut < 4 { 4 } else { whole.len() };
            assert!(
                matches!(err, WireError::Truncated { have, need: n, .. } if have == cut && n == need),
                "cut at {cut}: {err}"
            );
        }
    }

    #[test]
    fn a_large_frame_grows_the_buffer_as_its_bytes_arrive() {
        let big = probe(0, 3 << 20);
        let wire = frames(std::slice::from_ref(&big));
        let mut r = FrameReader::new("t", 4 << 20);
        let mut src = Trickle { data: &wire, chunk: 64 << 10 };
        assert_eq!(r.read_message::<Probe, _>(&mut src, &1).unwrap(), Some(big));
        assert!(r.buffer_len() >= wire.len() && r.buffer_len() <= 2 * wire.len());
        // A frame at the limit itself still fits.
        let limit = wire.len() as u32 - 4;
        let mut r = FrameReader::new("t", limit);
        let mut src = Trickle { data: &wire, chunk: 1 << 20 };
        assert!(r.read_message::<Probe, _>(&mut src, &1).unwrap().is_some());
        assert_eq!(r.buffer_len(), wire.len());
    }

    #[test]
    fn garbage_and_trailing_bytes_do_not_decode() {
        // A Vec length of 2^34 in the body: postcard refuses it without allocating.
        let mut wire = 6u32.to_le_bytes().to_vec();
        wire.extend_from_slice(&[0, 0x80, 0x80, 0x80, 0x80, 0x40]);
        let err = FrameReader::new("t", 1 << 20).read_message::<Probe, _>(&mut &wire[..], &1);
        assert!(matches!(err, Err(WireError::Decode { .. })), "{err:?}");

        let mut wire = frames(&[probe(0, 1)]);
        let len = u32::from_le_bytes(wire[..4].try_into().unwrap()) + 2;
        wire[..4].copy_from_slice(&len.to_le_bytes());
        wire.extend_from_slice(&[9, 9]);
        let err = FrameReader::new("t", 1 << 20).read_message::<Probe, _>(&mut &wire[..], &1);
        assert!(matches!(err, Err(WireError::Trailing { extra: 2, .. })), "{err:?}");
    }

    #[test]
    fn an_id_outside_the_bounds_is_a_typed_error_and_the_next_frame_still_reads() {
        let wire = frames(&[probe(5, 1), probe(1, 1)]);
        let mut r = FrameReader::new("peer-9", 1 << 20);
        let mut src = &wire[..];
        let err = r.read_message::<Probe, _>(&mut src, &2).unwrap_err();
        match &err {
            WireError::Invalid { peer, source } => {
                assert_eq!(peer, "peer-9");
                assert_eq!(*source, BoundsError::Id { field: "Probe.id", value: 5, count: 2 });
            }
            other => panic!("{other}"),
        }
        assert_eq!(err.to_string(), "peer-9: Probe.id is 5, outside 0..2; message dropped");
        assert_eq!(r.read_message::<Probe, _>(&mut src, &2).unwrap(), Some(probe(1, 1)));
    }

    #[test]
    fn preamble_checks_magic_and_version() {
        let mut ok = Vec::new();
        TEST.write_preamble(&mut ok).unwrap();
        assert_eq!(ok.len(), PREAMBLE_LEN);
        let mut src = &ok[..];
        TEST.read_preamble(&mut src, "p").unwrap();
        assert!(src.is_empty());

        // A stranger is refused at its first differing byte, even before 12 bytes arrived.
        let err = TEST.read_preamble(&mut Trickle { data: b"GET / HTTP/1.1\r\n", chunk: 1 }, "p");
        assert!(matches!(&err, Err(WireError::NotPeer { got, .. }) if got == b"G"), "{err:?}");
        let err = TEST.read_preamble(&mut &b"TEST"[..], "p").unwrap_err();
        assert!(matches!(&err, WireError::NotPeer { got, .. } if got == b"TEST"), "{err}");
        assert!(err.to_string().contains("not a test peer"), "{err}");

        let mut other = ok.clone();
        other[8] = 9;
        let err = TEST.read_preamble(&mut &other[..], "p").unwrap_err();
        assert_eq!(err.to_string(), "p: speaks test protocol v9, this node v3; upgrade");
    }
}
