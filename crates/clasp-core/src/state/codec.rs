//! The encoding of one key group's state, byte for byte postcard's encoding of
//! `(Vec<(Vec<u8>, S)>, TimerQueue)` (so checkpoints and peers of either form agree), written
//! and read directly: a key is one length and one copy, not a serde sequence of single bytes,
//! and decoding builds no vector per key. Migration encodes on its critical path.

use crate::time::TimerQueue;
use postcard::Error;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Longest LEB128 encoding of a `u64` (postcard's varint of a `usize` on 64-bit targets).
const MAX_VARINT: usize = 10;

/// Appends `n` as postcard's varint (LEB128, least significant group first).
fn push_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Reads a varint from the front of `bytes`: the value and the bytes after it.
fn take_varint(bytes: &[u8]) -> Result<(u64, &[u8]), Error> {
    let mut n = 0u64;
    for (i, &b) in bytes.iter().enumerate().take(MAX_VARINT) {
        let bits = u64::from(b & 0x7f);
        // The tenth byte holds the top bit of a u64 only.
        if i == MAX_VARINT - 1 && b > 1 {
            return Err(Error::DeserializeBadVarint);
        }
        n |= bits << (7 * i);
        if b & 0x80 == 0 {
            return Ok((n, &bytes[i + 1..]));
        }
    }
    if bytes.len() < MAX_VARINT {
        Err(Error::DeserializeUnexpectedEnd)
    } else {
        Err(Error::DeserializeBadVarint)
    }
}

/// Appends the encoding of `entries` (key, value) and `timers` to `out`.
pub(super) fn encode<'a, S: Serialize + 'a>(
    entries: impl ExactSizeIterator<Item = (&'a [u8], &'a S)>,
    timers: &TimerQueue,
    mut out: Vec<u8>,
) -> Result<Vec<u8>, Error> {
    push_varint(&mut out, entries.len() as u64);
    for (key, value) in entries {
        push_varint(&mut out, key.len() as u64);
        out.extend_from_slice(key);
        out = postcard::to_extend(value, out)?;
    }
    postcard::to_extend(timers, out)
}

/// Reads an encoding: its entries one at a time, then its timers.
pub(super) struct Decoder<'a> {
    rest: &'a [u8],
    left: u64,
}

impl<'a> Decoder<'a> {
    /// Starts reading `bytes`.
    pub(super) fn new(bytes: &'a [u8]) -> Result<Self, Error> {
        let (left, rest) = take_varint(bytes)?;
        Ok(Self { rest, left })
    }

    /// Entries still to read, as far as the bytes can hold them (each takes at least two
    /// bytes): a bound for reserving room that no corrupt count can inflate.
    pub(super) fn size_hint(&self) -> usize {
        (self.left as usize).min(self.rest.len() / 2)
    }

    /// The next entry, `None` after the last.
    pub(super) fn next_entry<S: DeserializeOwned>(
        &mut self,
    ) -> Result<Option<(&'a [u8], S)>, Error> {
        if self.left == 0 {
            return Ok(None);
        }
        let (len, rest) = take_varint(self.rest)?;
        let len = usize::try_from(len).map_err(|_| Error::DeserializeBadVarint)?;
        if len > rest.len() {
            return Err(Error::DeserializeUnexpectedEnd);
        }
        let (key, rest) = rest.split_at(len);
        let (value, rest) = postcard::take_from_bytes::<S>(rest)?;
        self.rest = rest;
        self.left -= 1;
        Ok(Some((key, value)))
    }

    /// The timers after the last entry (call once every entry was read).
    pub(super) fn timers(self) -> Result<TimerQueue, Error> {
        postcard::take_from_bytes::<TimerQueue>(self.rest).map(|(t, _)| t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::TimeDomain;
    use rand::{RngExt, SeedableRng};

    type Reference = (Vec<(Vec<u8>, u64)>, TimerQueue);

    fn random_group(rng: &mut crate::rng::SeededRng, max_key: usize) -> Reference {
        let n = rng.random_range(0..12usize);
        let entries: Vec<(Vec<u8>, u64)> = (0..n)
            .map(|_| {
                // Values across every varint width; keys over 127 bytes have two-byte lengths.
                let len = rng.random_range(0..max_key);
                let key = (0..len).map(|_| rng.random::<u8>()).collect();
                (key, rng.random::<u64>() >> rng.random_range(0..64u32))
            })
            .collect();
        let mut timers = TimerQueue::default();
        for _ in 0..rng.random_range(0..5) {
            timers.set(TimeDomain::Event, rng.random(), &[rng.random()]);
        }
        (entries, timers)
    }

    #[test]
    fn the_encoding_is_postcards_and_decodes_back() {
        let mut rng = crate::rng::SeededRng::seed_from_u64(7);
        for _ in 0..300 {
            let (entries, timers) = random_group(&mut rng, 300);
            let reference = postcard::to_allocvec(&(&entries, &timers)).unwrap();
            let ours = encode(entries.iter().map(|(k, v)| (&k[..], v)), &timers, vec![]).unwrap();
            assert_eq!(ours, reference);
            let mut d = Decoder::new(&reference).unwrap();
            let mut back = Vec::new();
            while let Some((k, v)) = d.next_entry::<u64>().unwrap() {
                back.push((k.to_vec(), v));
            }
            assert_eq!((back, d.timers().unwrap()), (entries, timers));
        }
    }

    #[test]
    fn varints_match_postcards_at_every_width() {
        for shift in 0..64 {
            for n in [1u64 << shift, (1u64 << shift) - 1, u64::MAX >> shift] {
                let mut ours = Vec::new();
                push_varint(&mut ours, n);
                assert_eq!(ours, postcard::to_allocvec(&(n as usize)).unwrap(), "{n}");
                assert_eq!(take_varint(&ours).unwrap(), (n, &[][..]));
            }
        }
        assert!(matches!(take_varint(&[0xff; 10]), Err(Error::DeserializeBadVarint)));
        assert!(matches!(take_varint(&[0x80, 0x80]), Err(Error::DeserializeUnexpectedEnd)));
    }

    #[test]
    fn every_truncation_is_an_error_not_a_panic() {
        let mut rng = crate::rng::SeededRng::seed_from_u64(8);
        for _ in 0..50 {
            let (entries, timers) = random_group(&mut rng, 140);
            let bytes = postcard::to_allocvec(&(&entries, &timers)).unwrap();
            for cut in 0..bytes.len() {
                let read = |b: &[u8]| -> Result<usize, Error> {
                    let mut d = Decoder::new(b)?;
                    let mut n = 0;
                    while d.next_entry::<u64>()?.is_some() {
                        n += 1;
                    }
                    d.timers()?;
                    Ok(n)
                };
                // postcard's own decoder is the reference for which prefixes are invalid.
                let reference = postcard::from_bytes::<Reference>(&bytes[..cut]);
                assert_eq!(read(&bytes[..cut]).is_ok(), reference.is_ok(), "cut at {cut}");
            }
        }
    }
}
