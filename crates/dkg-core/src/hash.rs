//! Kafka-compatible murmur2 and the bucket hash (`docs/spec.md` section 3; vectors:
//! `spec/vectors/murmur2.json`).
//!
//! [`murmur2`] is bit-exact with the Java producer's `org.apache.kafka.common.utils.Utils.murmur2`
//! (which the default partitioner uses as `toPositive(murmur2(key)) % numPartitions`) and with
//! librdkafka's `rd_murmur2` (the `murmur2` / `murmur2_random` partitioners). Both are Austin
//! Appleby's MurmurHash2, 32-bit, little-endian word reads, seed `0x9747b28c`. Keeping it bit-exact
//! matters: before the first assignment exists, and for clients that do not know about DKG, records
//! must land exactly where a stock Kafka producer would put them.
//!
//! [`BucketHash`] is the seeded hash DKG uses to spread non-heavy keys over buckets. It is part of the
//! published assignment, so every producer and the sampler hash identically; it must never be a
//! per-process randomized hash (such as `ahash`).

use serde::{Deserialize, Serialize};

/// Seed of Kafka's murmur2 (Java `Utils.murmur2`, librdkafka `rd_murmur2`).
pub const KAFKA_MURMUR2_SEED: u32 = 0x9747_b28c;

/// Seed of the default [`BucketHash`]. Distinct from [`KAFKA_MURMUR2_SEED`] so bucket numbers are not
/// correlated with Kafka's own placement of the same keys.
pub const DEFAULT_BUCKET_SEED: u32 = 0x2545_f491;

const M: u32 = 0x5bd1_e995;
const R: u32 = 24;

/// Kafka's murmur2 (Java `Utils.murmur2`, librdkafka `rd_murmur2`), bit-exact; returned as `u32` bits.
///
/// Java returns the same bits as an `int`; `murmur2(k) as i32` equals Java's value.
#[inline]
#[must_use]
pub fn murmur2(data: &[u8]) -> u32 {
    murmur2_seeded(data, KAFKA_MURMUR2_SEED)
}

/// MurmurHash2 (32-bit) with an explicit seed, using Kafka's length mixing and tail handling.
#[inline]
#[must_use]
pub fn murmur2_seeded(data: &[u8], seed: u32) -> u32 {
    // Java mixes the length as an int; keys beyond 4 GiB cannot exist in Kafka, so truncation is moot.
    let mut h = seed ^ (data.len() as u32);

    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }

    // The C/Java `switch` with fallthrough: bytes 2, 1, 0 of the tail, then one multiply.
    let tail = chunks.remainder();
    match *tail {
        [a, b, c] => {
            h ^= u32::from(c) << 16;
            h ^= u32::from(b) << 8;
            h ^= u32::from(a);
            h = h.wrapping_mul(M);
        }
        [a, b] => {
            h ^= u32::from(b) << 8;
            h ^= u32::from(a);
            h = h.wrapping_mul(M);
        }
        [a] => {
            h ^= u32::from(a);
            h = h.wrapping_mul(M);
        }
        _ => {}
    }

    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h
}

/// [`murmur2_seeded`] of a key shorter than 8 bytes, and the key as a little-endian word
/// (zero-padded), from the same reads; `None` for keys of 8 bytes or more.
///
/// The lookup compares a key with a heavy key word by word; for short keys the word is the
/// murmur2 block and tail, so reading the bytes once serves both. One arm per length, each
/// with fixed loads and shifts (a jump on the length, which a topic's keys tend to share);
/// bit-exact with [`murmur2_seeded`] (tested below for every length).
#[inline(always)]
#[must_use]
pub(crate) fn murmur2_seeded_short(data: &[u8], seed: u32) -> Option<(u32, u64)> {
    match data.len() {
        0 => short::<0>(data, seed),
        1 => short::<1>(data, seed),
        2 => short::<2>(data, seed),
        3 => short::<3>(data, seed),
        4 => short::<4>(data, seed),
        5 => short::<5>(data, seed),
        6 => short::<6>(data, seed),
        7 => short::<7>(data, seed),
        _ => None,
    }
}

/// [`murmur2_seeded_short`] of an `N`-byte key (`None` if `data` is shorter).
#[inline(always)]
fn short<const N: usize>(data: &[u8], seed: u32) -> Option<(u32, u64)> {
    let bytes: &[u8; N] = data.first_chunk()?;
    let word = bytes
        .iter()
        .enumerate()
        .fold(0, |w, (i, &b)| w | (u64::from(b) << (8 * i)));
    let mut h = seed ^ (N as u32);
    if N >= 4 {
        let mut k = (word as u32).wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M) ^ k;
    }
    if !N.is_multiple_of(4) {
        h ^= (word >> (8 * (N / 4 * 4))) as u32;
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    Some((h, word))
}

/// Kafka's `Utils.toPositive`: clear the sign bit (not `abs`, which breaks on `i32::MIN`).
#[inline]
#[must_use]
pub const fn to_positive(h: u32) -> u32 {
    h & 0x7fff_ffff
}

/// Kafka's default keyed placement: `toPositive(murmur2(key)) % partitions`.
///
/// `partitions == 0` returns 0 instead of panicking (there is no valid answer; callers that can
/// see a zero partition count must handle it before producing).
#[inline]
#[must_use]
pub fn kafka_partition(key: &[u8], partitions: u32) -> u32 {
    to_positive(murmur2(key))
        .checked_rem(partitions)
        .unwrap_or(0)
}

/// The stable hash that maps keys to buckets; serialized in the assignment as
/// `{"function":"murmur2","seed":N}`.
///
/// The enum leaves room for other functions in later format versions; an unknown `function` is a
/// decoding error, never a silent fallback (producers would disagree on buckets).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "function", rename_all = "snake_case", deny_unknown_fields)]
pub enum BucketHash {
    /// [`murmur2_seeded`] with this seed.
    Murmur2 {
        /// The seed.
        seed: u32,
    },
}

impl Default for BucketHash {
    /// `Murmur2 { seed: DEFAULT_BUCKET_SEED }`.
    fn default() -> Self {
        Self::Murmur2 {
            seed: DEFAULT_BUCKET_SEED,
        }
    }
}

impl BucketHash {
    /// The 32-bit hash of `key`.
    #[inline]
    #[must_use]
    pub fn hash(&self, key: &[u8]) -> u32 {
        match *self {
            Self::Murmur2 { seed } => murmur2_seeded(key, seed),
        }
    }

    /// [`BucketHash::hash`] of a key shorter than 8 bytes and the key as a word, from the same
    /// reads ([`murmur2_seeded_short`]); `None` for longer keys.
    #[inline(always)]
    pub(crate) fn hash_short(&self, key: &[u8]) -> Option<(u32, u64)> {
        match *self {
            Self::Murmur2 { seed } => murmur2_seeded_short(key, seed),
        }
    }

    /// `to_positive(hash(key)) % buckets`; `buckets == 0` returns 0.
    #[inline]
    #[must_use]
    pub fn bucket(&self, key: &[u8], buckets: u32) -> u32 {
        to_positive(self.hash(key))
            .checked_rem(buckets)
            .unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_partitions_or_buckets_give_zero() {
        assert_eq!(kafka_partition(b"x", 0), 0);
        assert_eq!(BucketHash::default().bucket(b"x", 0), 0);
    }

    #[test]
    fn to_positive_clears_only_the_sign_bit() {
        assert_eq!(to_positive(0x8000_0000), 0);
        assert_eq!(to_positive(0xffff_ffff), 0x7fff_ffff);
        assert_eq!(to_positive(0x1234_5678), 0x1234_5678);
    }

    #[test]
    fn seeded_default_equals_kafka() {
        for key in [&b""[..], b"a", b"ab", b"abc", b"abcd", b"abcde"] {
            assert_eq!(murmur2(key), murmur2_seeded(key, KAFKA_MURMUR2_SEED));
        }
        // A different seed gives a different hash (for these keys; not a law in general).
        assert_ne!(
            murmur2(b"kafka"),
            murmur2_seeded(b"kafka", DEFAULT_BUCKET_SEED)
        );
    }

    proptest::proptest! {
        /// The short-key variant is murmur2 for every length under 8, and its word is the key.
        #[test]
        fn short_murmur2_is_murmur2(
            key in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..12),
            seed in proptest::prelude::any::<u32>(),
        ) {
            let short = murmur2_seeded_short(&key, seed);
            if key.len() >= 8 {
                proptest::prop_assert_eq!(short, None);
            } else {
                let mut padded = [0_u8; 8];
                padded[..key.len()].copy_from_slice(&key);
                proptest::prop_assert_eq!(
                    short,
                    Some((murmur2_seeded(&key, seed), u64::from_le_bytes(padded)))
                );
            }
        }
    }

    #[test]
    fn bucket_hash_serde_shape() {
        let json = serde_json::to_string(&BucketHash::Murmur2 { seed: 7 }).expect("serialize");
        assert_eq!(json, r#"{"function":"murmur2","seed":7}"#);
        let back: BucketHash =
            serde_json::from_str(r#"{"seed":42,"function":"murmur2"}"#).expect("deserialize");
        assert_eq!(back, BucketHash::Murmur2 { seed: 42 });
        assert!(serde_json::from_str::<BucketHash>(r#"{"function":"xxhash","seed":1}"#).is_err());
        assert!(serde_json::from_str::<BucketHash>(r#"{"function":"murmur2"}"#).is_err());
        assert!(
            serde_json::from_str::<BucketHash>(r#"{"function":"murmur2","seed":4294967296}"#)
                .is_err()
        );
    }
}
