//! Batches of keyed records: what a request carries.
//!
//! A batch stores its records back to back in one byte buffer with a small index, so that
//! building, routing and shipping a batch costs no allocation per record once the buffers have
//! grown. Each record is a key (what keyed state and routing use) and a value (the payload),
//! and may carry an event time: a batch holds times only once one of its records has one, so
//! batches of untimed records (most of them) cost nothing for the feature.

use crate::hash::key_hash;
use serde::de::{SeqAccess, Visitor};
use serde::ser::SerializeSeq;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::sync::Mutex;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Meta {
    key_end: u32,
    end: u32,
    hash: u64,
}

/// One record of a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    /// Routing and state key (may be empty for unkeyed records).
    pub key: &'a [u8],
    /// Payload.
    pub value: &'a [u8],
    /// [`key_hash`] of `key`, computed once when the record was added.
    pub hash: u64,
}

/// The stored time of a record without one, in a batch whose other records have times.
const NO_TIME: u64 = u64::MAX;

/// A sequence of records in one contiguous buffer.
#[derive(Clone, Debug, Default)]
pub struct Batch {
    bytes: Vec<u8>,
    meta: Vec<Meta>,
    /// Event time per record ([`NO_TIME`] for none), or none or empty when no record has one.
    /// Boxed, so that an untimed batch (and every request moving one) stays small to move:
    /// 8 bytes instead of a vector's 24.
    #[allow(clippy::box_collection)]
    times: Option<Box<Vec<u64>>>,
}

/// Equal records with equal times (however the absence of times is stored).
impl PartialEq for Batch {
    fn eq(&self, other: &Self) -> bool {
        self.bytes == other.bytes && self.meta == other.meta && self.times() == other.times()
    }
}

impl Eq for Batch {}

impl Batch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty batch with room for `records` records of `bytes` bytes in all.
    pub fn with_capacity(records: usize, bytes: usize) -> Self {
        Self { bytes: Vec::with_capacity(bytes), meta: Vec::with_capacity(records), times: None }
    }

    /// Appends a record, hashing its key.
    #[inline]
    pub fn push(&mut self, key: &[u8], value: &[u8]) {
        self.push_hashed(key_hash(key), key, value);
    }

    /// Appends a record whose key hash is already known.
    #[inline]
    pub fn push_hashed(&mut self, hash: u64, key: &[u8], value: &[u8]) {
        self.bytes.extend_from_slice(key);
        let key_end = self.bytes.len() as u32;
        self.bytes.extend_from_slice(value);
        self.meta.push(Meta { key_end, end: self.bytes.len() as u32, hash });
        if let Some(times) = self.times.as_mut().filter(|t| !t.is_empty()) {
            times.push(NO_TIME);
        }
    }

    /// Appends a record with event time `time` (`None`: without one), hashing its key.
    #[inline]
    pub fn push_timed(&mut self, key: &[u8], value: &[u8], time: Option<u64>) {
        self.push_hashed_timed(key_hash(key), key, value, time);
    }

    /// Appends a record whose key hash is known, with event time `time` (`None`: without one).
    #[inline]
    pub fn push_hashed_timed(&mut self, hash: u64, key: &[u8], value: &[u8], time: Option<u64>) {
        self.push_hashed(hash, key, value);
        if let Some(t) = time {
            self.set_last_time(t.min(NO_TIME - 1));
        }
    }

    #[cold]
    fn start_times(&mut self) {
        let len = self.meta.len();
        self.times.get_or_insert_default().resize(len, NO_TIME);
    }

    fn set_last_time(&mut self, t: u64) {
        if !self.is_timed() {
            self.start_times();
        }
        if let Some(last) = self.times.as_mut().and_then(|times| times.last_mut()) {
            *last = t;
        }
    }

    /// The times of the records (empty when none has one).
    fn times(&self) -> &[u64] {
        self.times.as_deref().map_or(&[], Vec::as_slice)
    }

    /// Appends a record of another batch, without its event time (see [`Batch::push_from`]).
    #[inline]
    pub fn push_record(&mut self, r: Record<'_>) {
        self.push_hashed(r.hash, r.key, r.value);
    }

    /// Appends record `i` of `other`, with its event time.
    #[inline]
    pub fn push_from(&mut self, other: &Batch, i: usize) {
        self.push_hashed_timed(
            other.meta[i].hash,
            other.get(i).key,
            other.get(i).value,
            other.time(i),
        );
    }

    /// The event time of record `i`, if it has one.
    #[inline]
    pub fn time(&self, i: usize) -> Option<u64> {
        self.times().get(i).copied().filter(|t| *t != NO_TIME)
    }

    /// Whether any record has an event time.
    #[inline]
    pub fn is_timed(&self) -> bool {
        !self.times().is_empty()
    }

    /// The records in order, with their event times.
    pub fn iter_timed(&self) -> impl ExactSizeIterator<Item = (Record<'_>, Option<u64>)> + '_ {
        self.iter().enumerate().map(|(i, r)| (r, self.time(i)))
    }

    /// Number of records.
    #[inline]
    pub fn len(&self) -> usize {
        self.meta.len()
    }

    /// Whether the batch has no records.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.meta.is_empty()
    }

    /// Payload bytes (keys and values) in the batch.
    pub fn byte_len(&self) -> usize {
        self.bytes.len()
    }

    /// Removes every record, keeping the buffers.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.meta.clear();
        if let Some(times) = &mut self.times {
            times.clear();
        }
    }

    /// Record `i`.
    #[inline]
    pub fn get(&self, i: usize) -> Record<'_> {
        let m = self.meta[i];
        let start = if i == 0 { 0 } else { self.meta[i - 1].end as usize };
        Record {
            key: &self.bytes[start..m.key_end as usize],
            value: &self.bytes[m.key_end as usize..m.end as usize],
            hash: m.hash,
        }
    }

    /// The records in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Record<'_>> + '_ {
        let mut start = 0usize;
        self.meta.iter().map(move |m| {
            let r = Record {
                key: &self.bytes[start..m.key_end as usize],
                value: &self.bytes[m.key_end as usize..m.end as usize],
                hash: m.hash,
            };
            start = m.end as usize;
            r
        })
    }
}

impl<'a> FromIterator<(&'a [u8], &'a [u8])> for Batch {
    fn from_iter<T: IntoIterator<Item = (&'a [u8], &'a [u8])>>(iter: T) -> Self {
        let mut b = Batch::new();
        for (k, v) in iter {
            b.push(k, v);
        }
        b
    }
}

/// Batches given back for decoding to reuse. A remote request's batch is decoded on a link's
/// receiving thread and released on its sending one: without reuse, each costs two
/// allocations that the allocator serves slowly across threads (a tenth of a remote chained
/// request's cost). Bounded in count and in each batch's buffers: at most 1,024 batches of
/// 4 KiB of records and 256 records, about 8 MiB.
static SPARE: Mutex<Vec<Batch>> = Mutex::new(Vec::new());
/// Most batches kept in [`SPARE`].
const SPARE_BATCHES: usize = 1024;
/// Largest record buffer (bytes) and index (records) a batch kept in [`SPARE`] may have.
const SPARE_BYTES: usize = 4096;
const SPARE_RECORDS: usize = 256;

impl Batch {
    /// Gives a batch whose records are no longer needed back, for a later decode to reuse its
    /// buffers (dropped instead when the spares are full or its buffers are large).
    pub fn release(self) {
        Self::release_all([self]);
    }

    /// [`Batch::release`] for several batches, taking the spares' lock once.
    pub fn release_all(batches: impl IntoIterator<Item = Batch>) {
        let mut spare = crate::sync::lock(&SPARE);
        for mut b in batches {
            if spare.len() >= SPARE_BATCHES {
                return;
            }
            if b.bytes.capacity() <= SPARE_BYTES && b.meta.capacity() <= SPARE_RECORDS {
                b.clear();
                spare.push(b);
            }
        }
    }

    /// An empty batch, with buffers a released one left when there is one.
    fn reused() -> Batch {
        crate::sync::lock(&SPARE).pop().unwrap_or_default()
    }
}

/// On the wire a batch is a sequence of `(key, value)` byte strings followed by the event times
/// (none, or one per record, `u64::MAX` for a record without one); hashes are recomputed on
/// arrival, which is cheaper than shipping them.
impl Serialize for Batch {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeTuple;
        let mut t = s.serialize_tuple(2)?;
        t.serialize_element(&Records(self))?;
        t.serialize_element(self.times())?;
        t.end()
    }
}

struct Records<'a>(&'a Batch);

impl Serialize for Records<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for r in self.0.iter() {
            seq.serialize_element(&(serde_bytes_ref(r.key), serde_bytes_ref(r.value)))?;
        }
        seq.end()
    }
}

/// Serializes a byte slice as bytes (not as a sequence of integers).
fn serde_bytes_ref(b: &[u8]) -> BytesRef<'_> {
    BytesRef(b)
}

struct BytesRef<'a>(&'a [u8]);

impl Serialize for BytesRef<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(self.0)
    }
}

impl<'de> Deserialize<'de> for Batch {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct BatchVisitor;
        impl<'de> Visitor<'de> for BatchVisitor {
            type Value = Batch;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("records and their event times")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Batch, A::Error> {
                use serde::de::Error;
                let RecordsOnly(mut b) =
                    seq.next_element()?.ok_or_else(|| A::Error::invalid_length(0, &self))?;
                let times: Vec<u64> =
                    seq.next_element()?.ok_or_else(|| A::Error::invalid_length(1, &self))?;
                if !times.is_empty() && times.len() != b.len() {
                    return Err(A::Error::custom(format_args!(
                        "a batch of {} records carries {} event times (0 or one per record)",
                        b.len(),
                        times.len()
                    )));
                }
                b.times = (!times.is_empty()).then(|| Box::new(times));
                Ok(b)
            }
        }
        d.deserialize_tuple(2, BatchVisitor)
    }
}

/// The records of a batch on the wire, without their times.
struct RecordsOnly(Batch);

impl<'de> Deserialize<'de> for RecordsOnly {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct BatchVisitor;
        impl<'de> Visitor<'de> for BatchVisitor {
            type Value = RecordsOnly;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a sequence of (key, value) byte strings")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RecordsOnly, A::Error> {
                // Cap the preallocation: a hostile length prefix must not allocate.
                let hint = seq.size_hint().unwrap_or(0).min(4096);
                let mut b = Batch::reused();
                b.meta.reserve(hint);
                b.bytes.reserve(hint * 16);
                while let Some((k, v)) = seq.next_element::<(BytesBuf<'de>, BytesBuf<'de>)>()? {
                    b.push(k.as_slice(), v.as_slice());
                }
                Ok(RecordsOnly(b))
            }
        }
        d.deserialize_seq(BatchVisitor)
    }
}

/// `#[serde(with = "clasp_core::batch::byte_vec")]`: a `Vec<u8>` as one byte string rather
/// than a sequence of integers — the same postcard encoding, written and read in one copy
/// instead of a call per byte.
pub mod byte_vec {
    use super::BytesBuf;
    use serde::{Deserialize, Deserializer, Serializer};

    /// Writes `v` as bytes.
    pub fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(v)
    }

    /// Reads bytes (or, from a format without them, a sequence of integers).
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        Ok(match BytesBuf::deserialize(d)? {
            BytesBuf::Borrowed(b) => b.to_vec(),
            BytesBuf::Owned(v) => v,
        })
    }
}

/// Borrowed when the format allows (postcard from a slice), owned otherwise (JSON).
enum BytesBuf<'de> {
    Borrowed(&'de [u8]),
    Owned(Vec<u8>),
}

impl BytesBuf<'_> {
    fn as_slice(&self) -> &[u8] {
        match self {
            Self::Borrowed(b) => b,
            Self::Owned(v) => v,
        }
    }
}

impl<'de> Deserialize<'de> for BytesBuf<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = BytesBuf<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("bytes")
            }
            fn visit_borrowed_bytes<E>(self, v: &'de [u8]) -> Result<Self::Value, E> {
                Ok(BytesBuf::Borrowed(v))
            }
            fn visit_bytes<E>(self, v: &[u8]) -> Result<Self::Value, E> {
                Ok(BytesBuf::Owned(v.to_vec()))
            }
            fn visit_byte_buf<E>(self, v: Vec<u8>) -> Result<Self::Value, E> {
                Ok(BytesBuf::Owned(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut v = Vec::new();
                while let Some(b) = seq.next_element::<u8>()? {
                    v.push(b);
                }
                Ok(BytesBuf::Owned(v))
            }
        }
        d.deserialize_bytes(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_through_postcard() {
        let mut b = Batch::new();
        b.push(b"k1", b"value one");
        b.push(b"", b"");
        b.push(b"key three", b"3");
        let wire = postcard::to_allocvec(&b).unwrap();
        let back: Batch = postcard::from_bytes(&wire).unwrap();
        assert_eq!(back, b);
        let recs: Vec<_> = back.iter().map(|r| (r.key.to_vec(), r.value.to_vec())).collect();
        assert_eq!(recs[2], (b"key three".to_vec(), b"3".to_vec()));
        assert_eq!(back.get(1).key, b"");
        assert_eq!(back.get(2).hash, key_hash(b"key three"));
    }

    /// Decoding reuses released batches (the pool is shared, so other tests may take from it
    /// meanwhile): whatever a released batch held, timed or not, never shows in a decoded one.
    #[test]
    fn decoding_into_released_batches_keeps_nothing_of_them() {
        let mut expected = Batch::new();
        expected.push(b"fresh", b"record");
        let wire = postcard::to_allocvec(&expected).unwrap();
        for round in 0..50u64 {
            let mut old = Batch::new();
            for i in 0..=round % 7 {
                old.push_timed(b"stale key", &i.to_le_bytes(), (round % 2 == 0).then_some(i));
            }
            old.release();
            let back: Batch = postcard::from_bytes(&wire).unwrap();
            assert_eq!(back, expected, "round {round}");
            assert!(!back.is_timed(), "round {round}");
            assert_eq!(back.iter().map(|r| r.hash).collect::<Vec<_>>(), vec![key_hash(b"fresh")]);
        }
        let mut large = Batch::new();
        large.push(&vec![0; SPARE_BYTES + 1], b"");
        large.release();
        assert!(crate::sync::lock(&SPARE).iter().all(|b| b.bytes.capacity() <= SPARE_BYTES));
    }

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct AsBytes(#[serde(with = "byte_vec")] Vec<u8>);

    #[test]
    fn byte_vec_is_the_plain_encoding_and_round_trips() {
        let v: Vec<u8> = (0..=255).collect();
        let fast = postcard::to_allocvec(&AsBytes(v.clone())).unwrap();
        assert_eq!(fast, postcard::to_allocvec(&v).unwrap(), "same bytes on the wire");
        assert_eq!(postcard::from_bytes::<AsBytes>(&fast).unwrap().0, v);
        let json = serde_json::to_string(&AsBytes(v.clone())).unwrap();
        assert_eq!(serde_json::from_str::<AsBytes>(&json).unwrap().0, v);
    }

    #[test]
    fn event_times_travel_with_their_records() {
        let mut b = Batch::new();
        b.push(b"untimed", b"");
        b.push_timed(b"t", b"v", Some(42));
        b.push_timed(b"none", b"", None);
        assert!(b.is_timed());
        assert_eq!((b.time(0), b.time(1), b.time(2)), (None, Some(42), None));
        let back: Batch = postcard::from_bytes(&postcard::to_allocvec(&b).unwrap()).unwrap();
        assert_eq!(back, b);
        let mut copy = Batch::new();
        copy.push_from(&b, 1);
        assert_eq!((copy.get(0).key, copy.time(0)), (&b"t"[..], Some(42)));
        b.clear();
        assert!(!b.is_timed());
        // Times for 2 of 3 records are refused at decode.
        let mut three = Batch::new();
        for k in [&b"a"[..], b"b", b"c"] {
            three.push_timed(k, b"", Some(1));
        }
        let mut wire = postcard::to_allocvec(&three).unwrap();
        let at = wire.len() - 4;
        wire[at] = 2;
        wire.truncate(at + 3);
        assert!(postcard::from_bytes::<Batch>(&wire).is_err());
    }

    #[test]
    fn hostile_length_prefix_does_not_allocate_or_panic() {
        // A sequence length of 2^32-1 followed by nothing.
        let wire = [0xff, 0xff, 0xff, 0xff, 0x0f];
        assert!(postcard::from_bytes::<Batch>(&wire).is_err());
    }
}
