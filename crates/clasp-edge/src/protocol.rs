//! The connector protocol between an edge device and the cloud's edge ingress.
//!
//! One TCP connection per device carries every cut stream leaving it (each a numbered
//! connector). The device opens it with an 8-byte magic and the protocol version, then both
//! sides exchange frames: a little-endian `u32` length and a postcard-encoded message.
//!
//! ```text
//! device                                   cloud
//!   magic, version, Hello{device, part} ->
//!                                        <- Welcome            (or Reject{reason}, then close)
//!                                        <- Start              (once every device has joined)
//!   Data{connector, origin_ns, records} ->   (any number, in order per connector)
//!   End{sent per connector}             ->
//!                                        <- Ack{received per connector}
//! ```
//!
//! `Hello` states the device's part of the cut (its operators and connectors, by name) so that
//! a device and a cloud started with different pipelines or devices files refuse each other
//! instead of mixing streams. `origin_ns` is when the device read the oldest raw record behind
//! the frame (ns since the Unix epoch): end-to-end latency counts from it. `End` carries the
//! records sent per connector; the cloud checks them against what it received, so nothing is
//! lost silently.

use clasp_core::Batch;
use serde::{Deserialize, Serialize};
use std::io::{self, Read, Write};

/// First bytes of a device connection.
pub const MAGIC: [u8; 8] = *b"CLASPEDG";
/// Bumped on every incompatible change of the messages.
pub const VERSION: u32 = 1;
/// Largest frame accepted (bytes).
pub const MAX_FRAME: u32 = 64 << 20;

/// The device's part of the cut, as the cloud must agree on it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// The device id.
    pub device: String,
    /// The pipeline's name.
    pub pipeline: String,
    /// `cut` or `all-cloud`.
    pub mode: String,
    /// Operators the device runs, in topological order.
    pub operators: Vec<String>,
    /// Its connectors, in order: the numbers `Data` frames use.
    pub connectors: Vec<String>,
}

/// Device → cloud.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ToCloud {
    /// First message.
    Hello(Hello),
    /// Records of one connector.
    Data {
        /// Index into `Hello::connectors`.
        connector: u16,
        /// When the oldest raw record behind these was read (ns since the Unix epoch).
        origin_ns: u64,
        /// The records, keyed.
        records: Batch,
    },
    /// The device's data is complete.
    End {
        /// Records sent per connector.
        sent: Vec<u64>,
    },
}

/// [`ToCloud`] by reference, for sending without copying: the same encoding, variant for
/// variant.
#[derive(Clone, Copy, Debug, Serialize)]
pub enum Outgoing<'a> {
    /// See [`ToCloud::Hello`].
    Hello(&'a Hello),
    /// See [`ToCloud::Data`].
    Data {
        /// Index into `Hello::connectors`.
        connector: u16,
        /// When the oldest raw record behind these was read (ns since the Unix epoch).
        origin_ns: u64,
        /// The records, keyed.
        records: &'a Batch,
    },
    /// See [`ToCloud::End`].
    End {
        /// Records sent per connector.
        sent: &'a [u64],
    },
}

/// Cloud → device.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ToDevice {
    /// The device is admitted; `Start` follows when every device has joined.
    Welcome,
    /// The device is refused.
    Reject(String),
    /// Begin sending.
    Start,
    /// Everything arrived: records received per connector.
    Ack {
        /// Records received per connector.
        received: Vec<u64>,
    },
}

/// Writes the magic and version.
pub fn write_preamble(w: &mut impl Write) -> io::Result<()> {
    w.write_all(&MAGIC)?;
    w.write_all(&VERSION.to_le_bytes())
}

/// Reads and checks the magic and version; the error says what the peer is.
pub fn read_preamble(r: &mut impl Read) -> Result<(), String> {
    let mut head = [0u8; 12];
    r.read_exact(&mut head).map_err(|e| format!("no connector preamble: {e}"))?;
    if head[..8] != MAGIC {
        return Err("not a clasp edge device (wrong magic bytes)".into());
    }
    let version = u32::from_le_bytes([head[8], head[9], head[10], head[11]]);
    if version != VERSION {
        return Err(format!(
            "connector protocol version {version}, this side speaks {VERSION}: run the same clasp on devices and cloud"
        ));
    }
    Ok(())
}

/// Encodes `msg` as one frame into `buf` (cleared first).
pub fn encode<T: Serialize>(msg: &T, buf: &mut Vec<u8>) {
    buf.clear();
    buf.extend_from_slice(&[0; 4]);
    let mut out = std::mem::take(buf);
    out = postcard::to_extend(msg, out).expect("in-memory serialization cannot fail");
    let len = (out.len() - 4) as u32;
    out[..4].copy_from_slice(&len.to_le_bytes());
    *buf = out;
}

/// Writes `msg` as one frame; returns the bytes written.
pub fn write_frame<T: Serialize>(
    w: &mut impl Write,
    msg: &T,
    buf: &mut Vec<u8>,
) -> io::Result<usize> {
    encode(msg, buf);
    w.write_all(buf)?;
    Ok(buf.len())
}

/// Reads one frame into `buf` and decodes it; `Ok(None)` when the peer closed cleanly before
/// a frame began. Returns the message and the bytes read.
pub fn read_frame<T: for<'de> Deserialize<'de>>(
    r: &mut impl Read,
    buf: &mut Vec<u8>,
) -> Result<Option<(T, usize)>, String> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.to_string()),
    }
    let n = u32::from_le_bytes(len);
    if n > MAX_FRAME {
        return Err(format!("frame of {n} bytes exceeds the limit of {MAX_FRAME}"));
    }
    buf.resize(n as usize, 0);
    r.read_exact(buf).map_err(|e| format!("truncated frame: {e}"))?;
    let msg = postcard::from_bytes(buf).map_err(|e| format!("undecodable frame: {e}"))?;
    Ok(Some((msg, 4 + n as usize)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_count_their_bytes() {
        let mut records = Batch::new();
        records.push(b"17", b"17,END,...");
        let msgs = [
            ToCloud::Hello(Hello {
                device: "edge-1".into(),
                pipeline: "taxi-w1".into(),
                mode: "cut".into(),
                operators: vec!["f".into()],
                connectors: vec!["f.kafka".into()],
            }),
            ToCloud::Data { connector: 0, origin_ns: 5, records },
            ToCloud::End { sent: vec![1] },
        ];
        let mut wire = Vec::new();
        write_preamble(&mut wire).unwrap();
        let mut buf = Vec::new();
        let mut written = 0;
        for m in &msgs {
            written += write_frame(&mut wire, m, &mut buf).unwrap();
        }
        assert_eq!(wire.len(), 12 + written);
        let mut r = &wire[..];
        read_preamble(&mut r).unwrap();
        let mut read = 0;
        for m in &msgs {
            let (got, n) = read_frame::<ToCloud>(&mut r, &mut buf).unwrap().unwrap();
            assert_eq!(&got, m);
            read += n;
        }
        assert_eq!(read, written);
        assert!(read_frame::<ToCloud>(&mut r, &mut buf).unwrap().is_none());
        let mut by_ref = Vec::new();
        let ToCloud::Data { records, .. } = &msgs[1] else { unreachable!() };
        encode(&Outgoing::Data { connector: 0, origin_ns: 5, records }, &mut by_ref);
        encode(&msgs[1], &mut buf);
        assert_eq!(by_ref, buf);
        encode(&Outgoing::End { sent: &[1] }, &mut by_ref);
        encode(&msgs[2], &mut buf);
        assert_eq!(by_ref, buf);
    }

    #[test]
    fn strangers_and_other_versions_are_refused() {
        assert!(read_preamble(&mut &b"GET / HTTP/1.1\r\n"[..]).unwrap_err().contains("magic"));
        let mut v2 = MAGIC.to_vec();
        v2.extend_from_slice(&2u32.to_le_bytes());
        assert!(read_preamble(&mut &v2[..]).unwrap_err().contains("version 2"));
        let huge = (MAX_FRAME + 1).to_le_bytes();
        assert!(
            read_frame::<ToDevice>(&mut &huge[..], &mut Vec::new()).unwrap_err().contains("limit")
        );
    }
}
