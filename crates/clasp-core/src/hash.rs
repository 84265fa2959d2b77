//! Stable key hashing: the same key maps to the same key group in every process and version,
//! which migration and multi-process deployment rely on.

use crate::ids::KeyGroup;

const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;

/// 64-bit hash of `bytes`: word-at-a-time multiply-rotate mixing, finished with the murmur3
/// finalizer so that high and low bits are both well distributed.
#[inline]
pub fn key_hash(bytes: &[u8]) -> u64 {
    let mut h = bytes.len() as u64;
    let mut chunks = bytes.chunks_exact(8);
    for c in &mut chunks {
        let w = u64::from_le_bytes(c.try_into().expect("8-byte chunk"));
        h = (h.rotate_left(5) ^ w).wrapping_mul(K);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        let mut buf = [0u8; 8];
        buf[..rest.len()].copy_from_slice(rest);
        h = (h.rotate_left(5) ^ u64::from_le_bytes(buf)).wrapping_mul(K);
    }
    fmix64(h)
}

/// murmur3's 64-bit finalizer.
#[inline]
pub fn fmix64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// The key group of a key hash among `groups` groups (multiply-shift range reduction on the
/// high 32 bits, so it is independent of the bits a hash table uses for buckets).
#[inline]
pub fn key_group(hash: u64, groups: u32) -> KeyGroup {
    KeyGroup((((hash >> 32) * u64::from(groups)) >> 32) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_is_deterministic_and_length_aware() {
        let a = key_hash(b"the");
        assert_eq!(a, key_hash(b"the"));
        assert_ne!(a, key_hash(b"The"));
        assert_ne!(key_hash(b"abcdefgh"), key_hash(b"abcdefgh\0"));
    }

    #[test]
    fn key_groups_are_balanced() {
        let groups = 64;
        let mut counts = vec![0u32; groups as usize];
        for i in 0..64_000u32 {
            counts[key_group(key_hash(&i.to_le_bytes()), groups).index()] += 1;
        }
        let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
        assert!(*min > 800 && *max < 1200, "unbalanced: {min}..{max}");
    }
}
