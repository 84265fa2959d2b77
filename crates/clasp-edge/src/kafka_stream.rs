//! Cut streams in a Kafka topic (`--uplink kafka:…`): the records devices produce and the
//! cloud consumes.
//!
//! Every record belongs to one stream of one device:
//!
//! - key `DEVICE/CONNECTOR` (the device's id in the devices file, the connector's name), so a
//!   device's records of one stream go to one partition and stay in order;
//! - header [`HEADER`], 9 bytes: the kind (`i` an item, `e` the end of the stream) and the
//!   device's run, a number it draws when it starts (`u64`, little-endian);
//! - value of an item: the [`Item`] in the encoding the connector protocol's `Data` frames
//!   carry (postcard), without the frame's length prefix — its number in the stream, origin,
//!   watermark and records with their event times;
//! - value of an end: a [`StreamEnd`], the last record of the stream: how many items and
//!   records the device produced on it, and the pipeline and mode it ran.
//!
//! A device produces each record until the broker acknowledges it and produces it again after
//! a failure, so a record may be in the topic twice; the cloud keeps, per stream, the items it
//! holds ([`crate::protocol::Received`]) and discards the numbers it already has. A stream has
//! ended when its end arrives with counts equal to what the cloud took; a device has ended when
//! all its streams have. Records of another run of a device (it restarted mid-run, or the topic
//! still holds an earlier run) are refused, since their items are numbered afresh.

use crate::protocol::Item;
use clasp_core::Batch;
use clasp_kafka::records::OutRecord;
use serde::{Deserialize, Serialize};

/// The header naming a record's kind and its device's run.
pub const HEADER: &str = "clasp-edge";

/// What a record of a cut stream is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// An item of the stream.
    Item,
    /// The end of the stream.
    End,
}

/// The last record of a stream: what the device produced on it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamEnd {
    /// Items produced (numbered from 0).
    pub items: u64,
    /// Records in them.
    pub records: u64,
    /// The pipeline the device ran.
    pub pipeline: String,
    /// `cut` or `all-cloud`.
    pub mode: String,
}

/// The key of `device`'s stream `connector`.
pub fn key(device: &str, connector: &str) -> Vec<u8> {
    format!("{device}/{connector}").into_bytes()
}

/// The device and connector a key names (device ids have no `/`).
pub fn parse_key(key: &[u8]) -> Option<(&str, &str)> {
    std::str::from_utf8(key).ok()?.split_once('/')
}

/// The header value of a record of `kind` from device run `run`.
pub fn header(kind: Kind, run: u64) -> Vec<u8> {
    let mut h = Vec::with_capacity(9);
    h.push(match kind {
        Kind::Item => b'i',
        Kind::End => b'e',
    });
    h.extend_from_slice(&run.to_le_bytes());
    h
}

/// The kind and run a header value names.
pub fn parse_header(value: &[u8]) -> Option<(Kind, u64)> {
    let (&kind, run) = value.split_first()?;
    let kind = match kind {
        b'i' => Kind::Item,
        b'e' => Kind::End,
        _ => return None,
    };
    Some((kind, u64::from_le_bytes(run.try_into().ok()?)))
}

/// An item's record.
pub fn item_record(key: &[u8], run: u64, item: &Item<&Batch>) -> OutRecord {
    let value = postcard::to_allocvec(item).expect("an item encodes");
    record(key, Kind::Item, run, value)
}

/// A stream's end record.
pub fn end_record(key: &[u8], run: u64, end: &StreamEnd) -> OutRecord {
    let value = postcard::to_allocvec(end).expect("a stream end encodes");
    record(key, Kind::End, run, value)
}

fn record(key: &[u8], kind: Kind, run: u64, value: Vec<u8>) -> OutRecord {
    OutRecord { key: key.to_vec(), value, headers: [(HEADER.to_owned(), header(kind, run))].into() }
}

/// A number for this run of a device: the time it started and its process.
pub fn new_run() -> u64 {
    clasp_core::time::now_ns() ^ (u64::from(std::process::id()) << 48)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_headers_and_values_round_trip() {
        assert_eq!(parse_key(&key("edge-1", "to_cell.window")), Some(("edge-1", "to_cell.window")));
        assert_eq!(parse_key(b"no-slash"), None);
        assert_eq!(parse_header(&header(Kind::End, 77)), Some((Kind::End, 77)));
        assert_eq!(parse_header(&header(Kind::Item, u64::MAX)), Some((Kind::Item, u64::MAX)));
        assert_eq!(parse_header(b"x12345678"), None);
        assert_eq!(parse_header(b"i123"), None);
        let mut records = Batch::new();
        records.push_timed(b"k", b"v", Some(5));
        let item = Item { seq: 4, origin_ns: 9, watermark: Some(3), records: &records };
        let r = item_record(&key("a", "c"), 1, &item);
        let back: Item = postcard::from_bytes(&r.value).unwrap();
        assert_eq!((back.seq, back.watermark, back.records.time(0)), (4, Some(3), Some(5)));
        // The value is a Data frame's item: the frame is its length, the connector, the item.
        let mut frame = Vec::new();
        clasp_wire::encode(&crate::protocol::Outgoing::Data { connector: 0, item }, &mut frame);
        assert!(frame.ends_with(&r.value));
        let end = StreamEnd { items: 2, records: 7, pipeline: "p".into(), mode: "cut".into() };
        let r = end_record(b"a/c", 1, &end);
        assert_eq!(postcard::from_bytes::<StreamEnd>(&r.value).unwrap(), end);
        assert_eq!(r.headers[HEADER], header(Kind::End, 1));
    }
}
