//! The items of a cut stream, whatever carries them: the connector protocol's `Data` frames
//! ([`super::ToCloud::Data`]) or any other transport between a device and the cloud.
//!
//! A cut stream is a sequence of [`Item`]s numbered from 0 per stream. An item holds records
//! with their event times (a [`Batch`] keeps them), and the device's watermark of the stream
//! after them: no later item of this device carries a record at or below it. The receiving
//! side keeps, per stream, how many items it holds ([`Received`]); it accepts the next number,
//! discards numbers it already holds (a device resending after a reconnect) and refuses a gap,
//! which no correct sender makes.

use clasp_core::Batch;
use serde::{Deserialize, Serialize};

/// One item of a cut stream: records, and the sender's watermark after them.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Item<R = Batch> {
    /// Its number in its stream, from 0.
    pub seq: u64,
    /// When the device read the oldest raw record behind these (ns since the Unix epoch).
    pub origin_ns: u64,
    /// The device's watermark of the stream after these records, if it has one: every later
    /// record it sends on the stream has a later event time.
    pub watermark: Option<u64>,
    /// The records, keyed, with their event times when they have them.
    pub records: R,
}

impl Item<Batch> {
    /// This item by reference, for sending without copying (the same encoding).
    pub fn by_ref(&self) -> Item<&Batch> {
        Item {
            seq: self.seq,
            origin_ns: self.origin_ns,
            watermark: self.watermark,
            records: &self.records,
        }
    }
}

/// What [`Received::accept`] made of an item's number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fresh {
    /// The next item of its stream: take it.
    New,
    /// An item already held (resent after a reconnect): discard it.
    Duplicate,
}

/// An item number no correct sender produces.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SequenceError {
    /// Items between the ones held and this one are missing.
    #[error("stream {stream}: item {got} arrived, item {expected} was next; items were skipped")]
    Gap {
        /// The stream (connector).
        stream: usize,
        /// The number expected.
        expected: u64,
        /// The number received.
        got: u64,
    },
    /// A stream the receiver does not have.
    #[error("stream {stream} does not exist ({count} streams)")]
    NoStream {
        /// The stream.
        stream: usize,
        /// How many there are.
        count: usize,
    },
}

/// How many items of each stream a receiver holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Received {
    held: Vec<u64>,
}

impl Received {
    /// None held yet, of `streams` streams.
    pub fn new(streams: usize) -> Self {
        Self { held: vec![0; streams] }
    }

    /// Items held per stream: the number of the next item each expects.
    pub fn held(&self) -> &[u64] {
        &self.held
    }

    /// Takes item `seq` of `stream` if it is the next one.
    pub fn accept(&mut self, stream: usize, seq: u64) -> Result<Fresh, SequenceError> {
        let count = self.held.len();
        let held = self.held.get_mut(stream).ok_or(SequenceError::NoStream { stream, count })?;
        match seq.cmp(held) {
            std::cmp::Ordering::Less => Ok(Fresh::Duplicate),
            std::cmp::Ordering::Equal => {
                *held += 1;
                Ok(Fresh::New)
            }
            std::cmp::Ordering::Greater => {
                Err(SequenceError::Gap { stream, expected: *held, got: seq })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_next_number_is_taken_held_ones_discarded_and_gaps_refused() {
        let mut r = Received::new(2);
        assert_eq!(r.accept(0, 0), Ok(Fresh::New));
        assert_eq!(r.accept(0, 1), Ok(Fresh::New));
        assert_eq!(r.accept(0, 0), Ok(Fresh::Duplicate));
        assert_eq!(r.accept(1, 1), Err(SequenceError::Gap { stream: 1, expected: 0, got: 1 }));
        assert_eq!(r.accept(2, 0), Err(SequenceError::NoStream { stream: 2, count: 2 }));
        assert_eq!(r.held(), [2, 0]);
    }

    #[test]
    fn an_item_by_reference_encodes_as_the_item() {
        let mut records = Batch::new();
        records.push_timed(b"k", b"v", Some(1_357_000_000));
        let item = Item { seq: 3, origin_ns: 9, watermark: Some(5), records };
        let (mut owned, mut borrowed) = (Vec::new(), Vec::new());
        crate::encode(&item, &mut owned);
        crate::encode(&item.by_ref(), &mut borrowed);
        assert_eq!(owned, borrowed);
        let back: Item = postcard::from_bytes(&owned[4..]).unwrap();
        assert_eq!(back, item);
        assert_eq!(back.records.time(0), Some(1_357_000_000), "times travel with the records");
    }
}
