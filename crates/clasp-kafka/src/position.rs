//! A Kafka source's replay position: the next offset of every partition it reads, the offsets
//! a consumer would commit. Encoded as 12 bytes per partition (partition `i32`, next offset
//! `i64`, little-endian), in partition order.

use std::collections::BTreeMap;

/// Bytes per partition in an encoded position.
const ENTRY: usize = 12;

/// Why bytes are not a Kafka source's position.
#[derive(Debug, thiserror::Error)]
pub enum PositionError {
    /// Not a whole number of entries.
    #[error("a Kafka source position is 12 bytes per partition; {len} bytes is not")]
    Length {
        /// The length given.
        len: usize,
    },
    /// A partition or offset that no source produces.
    #[error("a Kafka source position names partition {partition} at offset {offset}")]
    Entry {
        /// The partition.
        partition: i32,
        /// The offset.
        offset: i64,
    },
}

/// Encodes next offsets per partition.
pub fn encode(next: &BTreeMap<i32, i64>) -> Vec<u8> {
    let mut out = Vec::with_capacity(next.len() * ENTRY);
    encode_into(&mut out, next.iter().map(|(&p, &o)| (p, o)));
    out
}

/// [`encode`] into `out` (replacing what it held), from `(partition, next offset)` pairs in
/// partition order.
pub fn encode_into(out: &mut Vec<u8>, next: impl IntoIterator<Item = (i32, i64)>) {
    out.clear();
    for (p, o) in next {
        out.extend_from_slice(&p.to_le_bytes());
        out.extend_from_slice(&o.to_le_bytes());
    }
}

/// Decodes what [`encode`] made.
pub fn decode(bytes: &[u8]) -> Result<BTreeMap<i32, i64>, PositionError> {
    if !bytes.len().is_multiple_of(ENTRY) {
        return Err(PositionError::Length { len: bytes.len() });
    }
    let mut next = BTreeMap::new();
    for entry in bytes.chunks_exact(ENTRY) {
        let (p, o) = entry.split_at(4);
        let partition = i32::from_le_bytes(p.try_into().unwrap_or_default());
        let offset = i64::from_le_bytes(o.try_into().unwrap_or_default());
        if partition < 0 || offset < 0 || next.insert(partition, offset).is_some() {
            return Err(PositionError::Entry { partition, offset });
        }
    }
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_round_trip_and_bad_bytes_are_refused() {
        let next: BTreeMap<i32, i64> = [(0, 17), (2, 0), (5, i64::MAX)].into();
        let bytes = encode(&next);
        assert_eq!(bytes.len(), 36);
        assert_eq!(decode(&bytes).unwrap(), next);
        assert!(matches!(decode(&bytes[..35]), Err(PositionError::Length { len: 35 })));
        let mut twice = encode(&[(1, 3)].into());
        twice.extend_from_slice(&twice.clone());
        assert!(matches!(decode(&twice), Err(PositionError::Entry { partition: 1, .. })));
        let negative = encode(&[(-1, 3)].into());
        assert!(matches!(decode(&negative), Err(PositionError::Entry { partition: -1, .. })));
        assert_eq!(decode(&[]).unwrap(), BTreeMap::new());
    }
}
