//! `murmur2.json`: Kafka's murmur2 and its default placement (`to_positive(murmur2(key)) % k`) of a fixed key list for the partition counts of [`MURMUR2_PARTITIONS`].

use super::*;

/// Partition per partition count, in [`MURMUR2_PARTITIONS`] order, keyed by the count as text.
struct Partitions(Vec<(u32, u32)>);

impl Serialize for Partitions {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (count, partition) in &self.0 {
            map.serialize_entry(&count.to_string(), partition)?;
        }
        map.end()
    }
}

#[derive(Serialize)]
struct MurmurCase {
    key_b64: String,
    murmur2: i32,
    partitions: Partitions,
}

/// The keys of `murmur2.json`: the reference clients' own test keys, every tail length, sign-bit
/// patterns, UTF-8 text and binary keys up to 64 bytes.
pub fn murmur2_keys() -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = [
        &b""[..],
        b"21",
        b"foobar",
        b"a-little-bit-long-string",
        b"a-little-bit-longer-string",
        b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
        b"abc",
        b"kafka",
        b"giberish123456789",
        b"1234",
        b"234",
        b"34",
        b"4",
        b"PreAmbleWillBeRemoved,ThePrePartThatIs",
        b"hejsan",
        b"this is another string with more length to it perhaps",
        b"orders",
        b"user-42",
        b"a\0b",
        "ключ".as_bytes(),
        "键".as_bytes(),
        "🔑-emoji".as_bytes(),
        b"550e8400-e29b-41d4-a716-446655440000",
    ]
    .iter()
    .map(|k| k.to_vec())
    .collect();
    for (len, byte) in [
        (1, 0x00),
        (1, 0xff),
        (2, 0x80),
        (3, 0x7f),
        (4, 0x00),
        (5, 0xff),
    ] {
        keys.push(vec![byte; len]);
    }
    let mut rng = SplitMix64(0x6d75_726d_7572_3221);
    for len in [6, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64] {
        keys.push((0..len).map(|_| rng.next_u64() as u8).collect());
    }
    keys
}

pub(super) fn murmur2_file() -> String {
    let cases: Vec<MurmurCase> = murmur2_keys()
        .iter()
        .map(|key| MurmurCase {
            key_b64: b64(key),
            murmur2: murmur2(key) as i32,
            partitions: Partitions(
                MURMUR2_PARTITIONS
                    .iter()
                    .map(|&n| (n, kafka_partition(key, n)))
                    .collect(),
            ),
        })
        .collect();
    cases_file(&[], &cases)
}
