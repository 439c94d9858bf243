//! The golden vectors of `docs/spec.md`, computed by this implementation.
//!
//! Shared by `examples/spec_vectors` (writes them) and `tests/spec_vectors.rs` (regenerates them
//! in memory and compares with the committed files). Each file has one case per line, so a diff
//! shows which case changed. Documents are built here and must decode; every reject case states
//! the label the spec gives it and generation stops if the implementation disagrees.

use std::collections::HashMap;
use std::fmt::Write as _;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use dkg_core::assignment::{
    MAX_EPOCH, MAX_HEAVY_KEYS_PER_BUCKET, MAX_KEY_BYTES, MAX_PARTITIONS, MAX_TOPIC_LEN,
};
use dkg_core::{
    AssignmentParts, BucketHash, DEFAULT_BUCKET_SEED, HeavyKey, KAFKA_MURMUR2_SEED,
    MAX_ASSIGNMENT_BYTES, Params, Route, kafka_partition, murmur2, murmur2_seeded,
};
use dkg_partitioner::Assignment;
use dkg_partitioner::kafka::control::{AssignmentBook, ControlUpdate};
use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};

/// Writes one vector file.
pub type Generator = fn() -> String;

/// Every generated file: its name in `spec/vectors/` and how to write it.
pub const FILES: [(&str, Generator); 9] = [
    ("murmur2.json", murmur2_file),
    ("lookup.json", lookup_file),
    ("reject.json", reject_file),
    ("control.json", control_file),
    ("random.json", random_file),
    ("v2/split.json", split_file),
    ("v2/reject.json", v2_reject_file),
    ("v2/compact.json", compact_file),
    ("v2/control.json", v2_control_file),
];

/// Partition counts of `murmur2.json`.
pub const MURMUR2_PARTITIONS: [u32; 5] = [1, 7, 12, 100, 1000];

/// Keys per case of `random.json`.
pub const RANDOM_KEY_COUNT: usize = 1_000_000;

/// Leading partitions listed per case of `random.json`.
pub const RANDOM_FIRST: usize = 100;

/// The record key every `reject.json` document is applied under.
pub const REJECT_RECORD_KEY: &str = "orders";

/// The key rule of `random.json`, as written into the file.
pub const KEY_GENERATOR: &str = "splitmix64 with state = seed (u64, wrapping arithmetic): \
    next() { state += 0x9E3779B97F4A7C15; z = state; z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9; \
    z = (z ^ (z >> 27)) * 0x94D049BB133111EB; return z ^ (z >> 31) }. Key i (i = 0, 1, ...): \
    len = next() % 65 (0..=64 bytes), then ceil(len / 8) more next() values, each written as 8 \
    bytes little-endian, concatenated and truncated to len bytes. Digest: FNV-1a 64 (offset basis \
    0xcbf29ce484222325, prime 0x100000001b3) over each key's partition as 4 bytes little-endian, \
    in key order, written as 16 lowercase hex digits.";

/// splitmix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number generators", OOPSLA
/// 2014): the key stream of `random.json`, and the generator's own choices elsewhere.
#[derive(Clone, Debug)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform enough in `0..n` (`n > 0`) for picking test data.
    fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// The next key of the stream into `buf` (cleared first).
    pub fn next_key(&mut self, buf: &mut Vec<u8>) {
        let len = (self.next_u64() % 65) as usize;
        buf.clear();
        for _ in 0..len.div_ceil(8) {
            let word = self.next_u64();
            buf.extend_from_slice(&word.to_le_bytes());
        }
        buf.truncate(len);
    }
}

/// FNV-1a 64 over partitions as 4 bytes little-endian.
#[derive(Clone, Copy, Debug)]
pub struct Fnv1a(pub u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv1a {
    pub fn add_partition(&mut self, partition: u32) {
        for byte in partition.to_le_bytes() {
            self.0 ^= u64::from(byte);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    pub fn hex(self) -> String {
        format!("{:016x}", self.0)
    }
}

/// Where a producer puts a keyed record for a topic with `topic_partitions` partitions: the
/// assignment's route if it was built for that count, else Kafka's default placement.
pub fn place(a: &Assignment, topic_partitions: u32, key: &[u8]) -> (u32, &'static str) {
    if a.partitions() != topic_partitions {
        return (kafka_partition(key, topic_partitions), "fallback");
    }
    match a.route(key) {
        (p, Route::Heavy) => (p, "heavy"),
        (p, Route::Bucket) => (p, "bucket"),
        (p, Route::Split) => (p, "split"),
    }
}

/// `{"cases":[` one case per line `]}` plus any leading fields (already JSON-encoded).
fn cases_file<T: Serialize>(leading: &[(&str, String)], cases: &[T]) -> String {
    let lines: Vec<String> = cases.iter().map(|c| json(c)).collect();
    lines_file(leading, &lines)
}

/// [`cases_file`] of cases already encoded, one per line.
fn lines_file(leading: &[(&str, String)], lines: &[String]) -> String {
    let mut out = String::from("{");
    for (name, value) in leading {
        let _ = writeln!(out, "{}:{value},", json(name));
    }
    out.push_str("\"cases\":[\n");
    out.push_str(&lines.join(",\n"));
    out.push_str("\n]}\n");
    out
}

fn json<T: Serialize + ?Sized>(value: &T) -> String {
    serde_json::to_string(value).expect("vector values serialize")
}

fn b64(bytes: &[u8]) -> String {
    B64.encode(bytes)
}

// ---------------------------------------------------------------------------------------------
// murmur2.json

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

fn murmur2_file() -> String {
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

// ---------------------------------------------------------------------------------------------
// lookup.json

#[derive(Serialize)]
struct LookupCase {
    name: &'static str,
    description: &'static str,
    document_json: String,
    topic_partitions: u32,
    keys: Vec<LookupKey>,
}

#[derive(Serialize)]
struct LookupKey {
    key_b64: String,
    partition: u32,
    route: &'static str,
}

fn params() -> Params {
    Params {
        theta: 0.01,
        epsilon: 0.005,
        mu: 4.0,
        window_records: 100_000,
    }
}

/// A valid document for "orders". The table is pseudo-random (from `table_seed`); each heavy key
/// goes to the partition after its bucket's, so a heavy key routed by bucket gives a wrong answer.
fn document(
    partitions: u32,
    buckets: u32,
    seed: u32,
    heavy_keys: &[Vec<u8>],
    table_seed: u64,
) -> Assignment {
    let mut rng = SplitMix64(table_seed);
    let table: Vec<u32> = (0..buckets)
        .map(|_| rng.below(partitions.into()) as u32)
        .collect();
    let bucket_hash = BucketHash::Murmur2 { seed };
    let heavy = heavy_keys
        .iter()
        .enumerate()
        .map(|(i, key)| HeavyKey {
            key: key.clone(),
            partition: (table[bucket_hash.bucket(key, buckets) as usize] + 1) % partitions,
            weight: 1_000 + 10 * i as u64,
            split: Vec::new(),
        })
        .collect();
    assignment(AssignmentParts {
        topic: "orders".to_owned(),
        partitions,
        epoch: 7,
        bucket_hash,
        table,
        heavy,
        params: params(),
        created_at_ms: 1_700_000_000_000,
        predicted_load: vec![1.0 / f64::from(partitions); partitions as usize],
    })
}

fn assignment(parts: AssignmentParts) -> Assignment {
    Assignment::new(parts).expect("the generator builds valid documents")
}

fn text_keys(prefix: &str, range: std::ops::Range<u32>) -> Vec<Vec<u8>> {
    range.map(|i| format!("{prefix}{i}").into_bytes()).collect()
}

/// Variations of a heavy key that must not match it: one byte different at the end, start and
/// middle, one byte longer, one byte shorter.
fn near_misses(key: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    if !key.is_empty() {
        for at in [key.len() - 1, 0, key.len() / 2] {
            let mut k = key.to_vec();
            k[at] = k[at].wrapping_add(1);
            out.push(k);
        }
        out.push(key[..key.len() - 1].to_vec());
    }
    let mut longer = key.to_vec();
    longer.push(0);
    out.push(longer);
    out.dedup();
    out
}

/// Bytes of a key of `len` bytes whose content depends on `len` (no zero bytes, so zero-padding
/// mistakes are not hidden by them).
fn pattern_key(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 + len * 7) as u8 | 1).collect()
}

/// Two different keys of `len` bytes with the same 32-bit hash under `seed` (a birthday search
/// over splitmix64 prefixes, ~2^16 tries).
fn colliding_pair(seed: u32, len: usize) -> (Vec<u8>, Vec<u8>) {
    let mut seen: HashMap<u32, Vec<u8>> = HashMap::new();
    let mut rng = SplitMix64(len as u64);
    loop {
        let mut key = vec![b'k'; len];
        let prefix = rng.next_u64().to_le_bytes();
        let random = len.min(8);
        key[..random].copy_from_slice(&prefix[..random]);
        match seen.insert(murmur2_seeded(&key, seed), key.clone()) {
            Some(other) if other != key => return (other, key),
            _ => {}
        }
    }
}

/// Keys `prefix-<i>` in the same bucket as `key` (out of `buckets`), but different from it.
fn same_bucket(key: &[u8], buckets: u32, seed: u32, count: usize) -> Vec<Vec<u8>> {
    let hash = BucketHash::Murmur2 { seed };
    let bucket = hash.bucket(key, buckets);
    (0_u32..)
        .map(|i| format!("collide-{i}").into_bytes())
        .filter(|k| k != key && hash.bucket(k, buckets) == bucket)
        .take(count)
        .collect()
}

fn lookup_case(
    name: &'static str,
    description: &'static str,
    document_json: String,
    topic_partitions: u32,
    keys: &[Vec<u8>],
) -> LookupCase {
    let a = Assignment::from_json(document_json.as_bytes()).expect("lookup documents are valid");
    let mut seen = std::collections::HashSet::new();
    let keys = keys
        .iter()
        .filter(|k| seen.insert(*k))
        .map(|key| {
            let (partition, route) = place(&a, topic_partitions, key);
            LookupKey {
                key_b64: b64(key),
                partition,
                route,
            }
        })
        .collect();
    LookupCase {
        name,
        description,
        document_json,
        topic_partitions,
        keys,
    }
}

fn doc_json(a: &Assignment) -> String {
    String::from_utf8(a.to_json()).expect("documents are UTF-8")
}

fn with_misses(heavy: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut keys = heavy.to_vec();
    for key in heavy {
        keys.extend(near_misses(key));
    }
    keys
}

fn lookup_file() -> String {
    let mut cases = Vec::new();

    let heavy = vec![b"hot".to_vec(), b"user-42".to_vec(), b"warm-key".to_vec()];
    let mut keys = with_misses(&heavy);
    keys.extend([b"".to_vec(), b"Hot".to_vec(), b"hott".to_vec()]);
    keys.extend(text_keys("user-", 0..24));
    cases.push(lookup_case(
        "small_table",
        "3 partitions, 8 buckets, 3 heavy keys (3, 7 and 8 bytes) with their near misses, the \
         empty key (not heavy here) and light keys.",
        doc_json(&document(3, 8, DEFAULT_BUCKET_SEED, &heavy, 1)),
        3,
        &keys,
    ));

    let mut heavy = text_keys("customer-", 0..40);
    heavy.extend(text_keys("550e8400-e29b-41d4-a716-4466554400", 10..30));
    let mut keys = heavy.clone();
    keys.extend(text_keys("customer-", 1_000..1_200));
    cases.push(lookup_case(
        "large_table",
        "100 partitions, 6400 buckets (mu = 64), 60 heavy keys (11-byte ids and 36-byte UUID \
         texts) and 200 light keys.",
        doc_json(&document(100, 6_400, DEFAULT_BUCKET_SEED, &heavy, 2)),
        100,
        &keys,
    ));

    let lengths = [
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 15, 16, 17, 24, 31, 32, 33, 63, 64, 65, 100, 1000,
    ];
    let mut heavy: Vec<Vec<u8>> = lengths.iter().map(|&len| pattern_key(len)).collect();
    heavy.push(b"550e8400-e29b-41d4-a716-446655440000".to_vec());
    cases.push(lookup_case(
        "heavy_key_lengths",
        "16 partitions, 64 buckets, one heavy key of each length from 0 (the empty key) to 1000 \
         bytes plus a 36-byte UUID text; each with its near misses (last, first and middle byte \
         changed, one byte shorter, one zero byte longer).",
        doc_json(&document(16, 64, DEFAULT_BUCKET_SEED, &heavy, 3)),
        16,
        &with_misses(&heavy),
    ));

    let max = pattern_key(MAX_KEY_BYTES);
    let mut middle = max.clone();
    middle[MAX_KEY_BYTES / 2] ^= 0x80;
    let mut longer = max.clone();
    longer.push(b'x');
    cases.push(lookup_case(
        "max_length_heavy_key",
        "A heavy key of 65536 bytes (the longest allowed), the same key with its middle byte \
         changed, and one byte longer (65537 bytes: cannot be heavy, routes by bucket).",
        doc_json(&document(
            5,
            20,
            DEFAULT_BUCKET_SEED,
            std::slice::from_ref(&max),
            4,
        )),
        5,
        &[max.clone(), middle, longer],
    ));

    let heavy: Vec<Vec<u8>> = [
        &b"\0"[..],
        b"\0\0\0",
        &[0; 8],
        &[0; 16],
        b"a\0",
        b"\0a",
        &[0xff; 4],
        b"\x00\xff\x80\x7f\"\\",
    ]
    .iter()
    .map(|k| k.to_vec())
    .collect();
    let mut keys = with_misses(&heavy);
    keys.extend(
        [
            &b""[..],
            b"\0\0",
            &[0; 7],
            &[0; 9],
            &[0; 15],
            &[0; 17],
            b"a",
            b"a\0\0",
            b"\0a\0",
            &[0xff; 3],
        ]
        .iter()
        .map(|k| k.to_vec()),
    );
    cases.push(lookup_case(
        "binary_keys_with_zero_bytes",
        "Heavy keys made of zero bytes (1, 3, 8 and 16 of them) and other binary keys; keys that \
         differ from them only in length (an implementation that zero-pads keys for comparison \
         gets these wrong).",
        doc_json(&document(7, 32, DEFAULT_BUCKET_SEED, &heavy, 5)),
        7,
        &keys,
    ));

    let mut heavy = Vec::new();
    let mut keys = Vec::new();
    for len in [5, 8, 16, 20] {
        let (x, y) = colliding_pair(DEFAULT_BUCKET_SEED, len);
        heavy.push(x.clone());
        keys.extend([x, y]);
    }
    for key in heavy.clone() {
        keys.extend(same_bucket(&key, 50, DEFAULT_BUCKET_SEED, 4));
    }
    cases.push(lookup_case(
        "hash_collisions",
        "50 buckets. For lengths 5, 8, 16 and 20: two keys with the same 32-bit bucket hash, one \
         of them heavy; and for each heavy key 4 other keys in its bucket. Only the heavy key's \
         exact bytes take the heavy route.",
        doc_json(&document(9, 50, DEFAULT_BUCKET_SEED, &heavy, 6)),
        9,
        &keys,
    ));

    let heavy = text_keys("crowded-", 0..24);
    let mut keys = with_misses(&heavy);
    keys.extend(text_keys("crowded-", 24..60));
    cases.push(lookup_case(
        "shared_buckets",
        "3 buckets and 24 heavy keys: every bucket holds several heavy keys (the overflow path of \
         an indexed lookup); near misses and light keys in the same buckets.",
        doc_json(&document(10, 3, DEFAULT_BUCKET_SEED, &heavy, 7)),
        10,
        &keys,
    ));

    let heavy = text_keys("solo-", 0..10);
    let mut keys = with_misses(&heavy);
    keys.extend(text_keys("solo-", 10..30));
    keys.push(Vec::new());
    cases.push(lookup_case(
        "one_bucket",
        "5 partitions, a single bucket holding all 10 heavy keys: every light key goes to the \
         bucket's partition.",
        doc_json(&document(5, 1, DEFAULT_BUCKET_SEED, &heavy, 8)),
        5,
        &keys,
    ));

    let heavy = text_keys("full-", 0..MAX_HEAVY_KEYS_PER_BUCKET as u32);
    let mut keys = with_misses(&heavy);
    keys.extend(text_keys("full-", 16..40));
    cases.push(lookup_case(
        "full_bucket",
        "4 partitions, a single bucket holding 16 heavy keys, the most a bucket may hold (spec 4.4 \
         step 18): each heavy key on its partition, near misses and light keys on the bucket's.",
        doc_json(&document(4, 1, DEFAULT_BUCKET_SEED, &heavy, 11)),
        4,
        &keys,
    ));

    let heavy = vec![b"hot".to_vec(), b"user-42".to_vec()];
    let mut keys = heavy.clone();
    keys.extend(text_keys("user-", 0..30));
    keys.push(Vec::new());
    let eight = doc_json(&document(8, 32, DEFAULT_BUCKET_SEED, &heavy, 9));
    cases.push(lookup_case(
        "partition_count_grew",
        "A document for 8 partitions while the topic has 12: every key, heavy or not, takes \
         Kafka's default placement over 12 partitions.",
        eight.clone(),
        12,
        &keys,
    ));
    cases.push(lookup_case(
        "partition_count_shrank",
        "The same document while the topic has 6 partitions: Kafka's default placement over 6.",
        eight,
        6,
        &keys,
    ));

    let heavy = vec![b"hot".to_vec(), b"seeded".to_vec()];
    let mut keys = with_misses(&heavy);
    keys.extend(text_keys("k", 0..30));
    for (name, description, seed) in [
        ("seed_42", "A non-default bucket seed (42).", 42),
        ("seed_0", "Bucket seed 0.", 0),
        (
            "seed_max",
            "Bucket seed 4294967295 (the largest; it does not fit a signed 32-bit int).",
            u32::MAX,
        ),
    ] {
        cases.push(lookup_case(
            name,
            description,
            doc_json(&document(6, 24, seed, &heavy, 10)),
            6,
            &keys,
        ));
    }

    let identity = assignment(AssignmentParts {
        table: (0..12).collect(),
        heavy: Vec::new(),
        bucket_hash: BucketHash::Murmur2 {
            seed: KAFKA_MURMUR2_SEED,
        },
        ..document(12, 12, 0, &[], 0).into_parts()
    });
    cases.push(lookup_case(
        "kafka_seed_identity_table",
        "Bucket seed 0x9747b28c (Kafka's), 12 buckets for 12 partitions, table[b] = b, no heavy \
         key: the bucket route equals Kafka's default placement key by key.",
        doc_json(&identity),
        12,
        &text_keys("user-", 0..40),
    ));

    let one = assignment(AssignmentParts {
        epoch: MAX_EPOCH,
        ..document(
            1,
            1,
            DEFAULT_BUCKET_SEED,
            &[b"hot".to_vec(), Vec::new()],
            11,
        )
        .into_parts()
    });
    let mut keys = vec![b"hot".to_vec(), Vec::new(), b"hot!".to_vec()];
    keys.extend(text_keys("k", 0..10));
    cases.push(lookup_case(
        "one_partition",
        "1 partition, 1 bucket, heavy keys \"hot\" and the empty key; epoch 9007199254740991 \
         (2^53 - 1, the largest). Everything goes to partition 0.",
        doc_json(&one),
        1,
        &keys,
    ));

    let no_heavy = document(4, 16, DEFAULT_BUCKET_SEED, &[], 12);
    cases.push(lookup_case(
        "no_heavy_keys",
        "An empty heavy list: every key routes by bucket.",
        doc_json(&no_heavy),
        4,
        &text_keys("k", 0..40),
    ));

    let mut keys = vec![
        b"hot".to_vec(),
        b"hou".to_vec(),
        b"\xff\xff".to_vec(),
        b"\xff\xfe".to_vec(),
    ];
    keys.extend(text_keys("user-", 0..20));
    cases.push(lookup_case(
        "formatting_variants",
        "A valid document not written by the reference encoder: whitespace and newlines, fields \
         in another order, string escapes (\\u006f, \\/), floats written as integers, exponents \
         and -0.0, the bucket hash's seed before its function, epoch 0. Decoders must accept it.",
        FORMATTED_DOCUMENT.to_owned(),
        3,
        &keys,
    ));

    cases_file(&[], &cases)
}

/// A valid document in unusual but legal formatting (see the `formatting_variants` case).
const FORMATTED_DOCUMENT: &str = concat!(
    "{\n  \"predicted_load\" : [ 5e-1, 0.25E0, 0.25 ],\n",
    "  \"heavy\": [ {\"weight\": 0, \"partition\": 2, \"key_b64\": \"\\u0061G90\"},\n",
    "             {\"partition\":0,\"key_b64\":\"\\/\\/8=\",\"weight\":18446744073709551615} ],\n",
    "\t\"table\":[2,1,0,1,\r\n0],\"buckets\":5,\n",
    "  \"bucket_hash\": {\"seed\": 7, \"function\": \"murmur2\"},\n",
    "  \"params\": {\"window_records\": 0, \"mu\": 4, \"epsilon\": -0.0, \"theta\": 1},\n",
    "  \"topic\": \"\\u006frders\",\n",
    "  \"created_at_ms\": 0, \"epoch\": 0, \"partitions\": 3,\n",
    "  \"version\": 1, \"format\": \"dkg.assignment\"\n}\n"
);

// ---------------------------------------------------------------------------------------------
// reject.json

#[derive(Serialize)]
struct RejectCase {
    name: String,
    description: String,
    document_b64: Option<String>,
    reason: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    generate: Option<Generate>,
}

#[derive(Serialize)]
struct Generate {
    valid_document_padded_to_bytes: usize,
}

/// The valid document every reject case edits.
pub const BASE_DOCUMENT: &str = concat!(
    r#"{"format":"dkg.assignment","version":1,"topic":"orders","partitions":3,"epoch":7,"#,
    r#""bucket_hash":{"function":"murmur2","seed":625341585},"buckets":4,"table":[0,1,2,0],"#,
    r#""heavy":[{"key_b64":"aG90","partition":1,"weight":1200}],"#,
    r#""params":{"theta":0.01,"epsilon":0.005,"mu":4.0,"window_records":100000},"#,
    r#""created_at_ms":1700000000000,"predicted_load":[0.5,0.25,0.25]}"#
);

/// `BASE_DOCUMENT` with `from` (which must occur exactly once) replaced by `to`.
fn edit(from: &str, to: &str) -> Vec<u8> {
    assert_eq!(
        BASE_DOCUMENT.matches(from).count(),
        1,
        "{from:?} must occur once in the base document"
    );
    BASE_DOCUMENT.replacen(from, to, 1).into_bytes()
}

/// `BASE_DOCUMENT` without the member `"name":value` (value as written in the base), with its
/// comma.
fn without(member: &str) -> Vec<u8> {
    let text = BASE_DOCUMENT;
    if text.contains(&format!("{member},")) {
        edit(&format!("{member},"), "")
    } else {
        edit(&format!(",{member}"), "")
    }
}

/// The document a reject case is applied as, under [`REJECT_RECORD_KEY`], to an empty book:
/// the rejection label, or a panic if the implementation accepts it.
pub fn reject_label(document: &[u8]) -> &'static str {
    match AssignmentBook::new().apply(Some(REJECT_RECORD_KEY.as_bytes()), Some(document)) {
        ControlUpdate::Rejected { reason, .. } => reason.as_str(),
        other => panic!(
            "document {:?} was not rejected: {other:?}",
            String::from_utf8_lossy(&document[..document.len().min(200)])
        ),
    }
}

/// A valid document followed by spaces up to `len` bytes.
pub fn padded_document(len: usize) -> Vec<u8> {
    let mut bytes = BASE_DOCUMENT.as_bytes().to_vec();
    bytes.resize(len, b' ');
    bytes
}

struct Reject {
    name: &'static str,
    description: &'static str,
    document: Vec<u8>,
    reason: &'static str,
}

fn reject(
    name: &'static str,
    reason: &'static str,
    description: &'static str,
    document: Vec<u8>,
) -> Reject {
    Reject {
        name,
        description,
        document,
        reason,
    }
}

fn heavy_with_key(key_b64: &str) -> Vec<u8> {
    edit(r#""key_b64":"aG90""#, &format!(r#""key_b64":"{key_b64}""#))
}

fn with_topic(topic: &str) -> Vec<u8> {
    edit(
        r#""topic":"orders""#,
        &format!(r#""topic":{}"#, json(topic)),
    )
}

#[allow(clippy::too_many_lines)]
fn reject_cases() -> Vec<Reject> {
    const M: &str = "malformed_json";
    const V: &str = "unsupported_version";
    const I: &str = "invalid";
    const R: &str = "out_of_range";
    const O: &str = "oversize";
    let base = BASE_DOCUMENT.as_bytes();
    let cat = |a: &[u8], b: &[u8]| [a, b].concat();
    let long_key = b64(&vec![b'k'; MAX_KEY_BYTES + 1]);
    let long_topic = "t".repeat(MAX_TOPIC_LEN + 1);
    vec![
        // Not a JSON object of the right shape.
        reject("not_json", M, "Not JSON.", b"{not json".to_vec()),
        reject("empty_value", M, "Zero bytes (a tombstone is a null value, not an empty one).", Vec::new()),
        reject("whitespace_only", M, "Only whitespace.", b" \n\t ".to_vec()),
        reject("json_null", M, "The JSON literal null.", b"null".to_vec()),
        reject("json_string", M, "A JSON string.", br#""dkg.assignment""#.to_vec()),
        reject("json_number", M, "A JSON number.", b"1".to_vec()),
        reject("array_v1", M, "An array [format, version] of version 1: the document must be an object.", br#"["dkg.assignment",1]"#.to_vec()),
        reject("truncated", M, "The document without its final '}'.", base[..base.len() - 1].to_vec()),
        reject("trailing_garbage", M, "A valid document followed by a non-whitespace byte.", cat(base, b"x")),
        reject("two_documents", M, "Two valid documents back to back.", cat(base, base)),
        reject("trailing_comma", M, "A comma after the last member.", edit("0.25]}", "0.25],}")),
        reject("comment", M, "A /* comment */ (not JSON).", cat(b"/* v1 */", base)),
        reject("utf8_bom", M, "A UTF-8 byte order mark before the document.", cat(b"\xef\xbb\xbf", base)),
        reject("non_utf8_in_string", M, "A byte 0xff inside the topic string (not UTF-8).", {
            let mut d = base.to_vec();
            let at = BASE_DOCUMENT.find("orders").expect("topic") + 3;
            d[at] = 0xff;
            d
        }),
        reject("non_utf8_outside_string", M, "A byte 0xff between members.", {
            let at = BASE_DOCUMENT.find(r#","epoch""#).expect("epoch");
            [&base[..at], b"\xff", &base[at..]].concat()
        }),
        reject("single_quotes", M, "Single-quoted strings.", edit(r#""topic":"orders""#, "'topic':'orders'")),
        // format and version.
        reject("format_other", M, "format names another document type.", edit(r#""format":"dkg.assignment""#, r#""format":"dkg.plan""#)),
        reject("format_case", M, "format compared byte for byte: \"DKG.assignment\".", edit(r#""format":"dkg.assignment""#, r#""format":"DKG.assignment""#)),
        reject("format_missing", M, "No format member.", without(r#""format":"dkg.assignment""#)),
        reject("format_number", M, "format is a number.", edit(r#""format":"dkg.assignment""#, r#""format":1"#)),
        reject("format_null", M, "format is null.", edit(r#""format":"dkg.assignment""#, r#""format":null"#)),
        reject("format_other_version_2", M, "Wrong format and version 2: format is checked before version.", edit(r#""format":"dkg.assignment","version":1"#, r#""format":"dkg.plan","version":2"#)),
        reject("version_3", V, "version 3 (a newer format).", edit(r#""version":1"#, r#""version":3"#)),
        reject("version_0", V, "version 0.", edit(r#""version":1"#, r#""version":0"#)),
        reject("version_max_u64", V, "version 18446744073709551615.", edit(r#""version":1"#, r#""version":18446744073709551615"#)),
        reject("version_3_other_shape", V, "version 3 with members version 1 does not know and without table: the version is read first, so the reason is the version, not the shape.", br#"{"format":"dkg.assignment","version":3,"topic":"orders","table_u16_b64":"AAABAA==","generation":"x"}"#.to_vec()),
        reject("version_3_type_error", V, "version 3 and a member of the wrong type (partitions a string): still the version.", edit(r#""version":1,"topic":"orders","partitions":3"#, r#""version":3,"topic":"orders","partitions":"3""#)),
        reject("version_3_members_reordered", V, "version 3 written before format.", br#"{"version":3,"format":"dkg.assignment"}"#.to_vec()),
        reject("array_v2", M, "An array [\"dkg.assignment\", 2]: the document must be an object, also in the version pre-read (gap G1, fixed by readers of version 2).", br#"["dkg.assignment",2]"#.to_vec()),
        reject("array_v3", M, "An array [\"dkg.assignment\", 3]: the pre-read requires an object (gap G1 fixed), so the reason is not the version.", br#"["dkg.assignment",3]"#.to_vec()),
        reject("version_3_non_utf8_string", V, "version 3 and a byte 0xff inside the topic string: the pre-read skips members other than format and version without checking their strings for UTF-8 (known gap), so the reason is the version.", {
            let mut d = edit(r#""version":1"#, r#""version":3"#);
            let at = BASE_DOCUMENT.find("orders").expect("topic") + 3;
            d[at] = 0xff;
            d
        }),
        reject("version_3_lone_surrogate", V, "version 3 and a lone surrogate escape in the topic: not checked in skipped members (known gap).", edit(r#""version":1,"topic":"orders""#, r#""version":3,"topic":"\ud800""#)),
        reject("version_3_control_character", M, "version 3 and an unescaped control character in the topic: a JSON syntax error, which the pre-read does detect.", edit(r#""version":1,"topic":"orders""#, "\"version\":3,\"topic\":\"ord\u{1}ers\"")),
        reject("version_3_number_overflow", V, "version 3 and partitions 1e400: numbers of skipped members are not range-checked (known gap).", edit(r#""version":1,"topic":"orders","partitions":3"#, r#""version":3,"topic":"orders","partitions":1e400"#)),
        reject("version_3_invalid_escape", M, "version 3 and an invalid escape \\q in the topic: a syntax error.", edit(r#""version":1,"topic":"orders""#, r#""version":3,"topic":"ord\qers""#)),
        reject("version_3_short_unicode_escape", M, "version 3 and a truncated \\u escape in the topic: a syntax error.", edit(r#""version":1,"topic":"orders""#, r#""version":3,"topic":"ord\u12""#)),
        reject("version_3_leading_zero", M, "version 3 and partitions 03 (a leading zero): a syntax error.", edit(r#""version":1,"topic":"orders","partitions":3"#, r#""version":3,"topic":"orders","partitions":03"#)),
        reject("version_3_duplicate_member", V, "version 3 and topic twice: the pre-read allows repeated members other than format and version (known gap).", edit(r#""version":1,"topic":"orders""#, r#""version":3,"topic":"orders","topic":"orders""#)),
        reject("version_3_truncated", M, "version 3 but not well-formed JSON (truncated): syntax comes first.", {
            let d = edit(r#""version":1"#, r#""version":3"#);
            d[..d.len() - 1].to_vec()
        }),
        reject("version_string", M, "version is the string \"1\".", edit(r#""version":1"#, r#""version":"1""#)),
        reject("version_float", M, "version is 1.0 (integers only).", edit(r#""version":1"#, r#""version":1.0"#)),
        reject("version_exponent", M, "version is 1e0.", edit(r#""version":1"#, r#""version":1e0"#)),
        reject("version_negative", M, "version is -1.", edit(r#""version":1"#, r#""version":-1"#)),
        reject("version_overflow", M, "version is 2^64 (does not fit u64).", edit(r#""version":1"#, r#""version":18446744073709551616"#)),
        reject("version_missing", M, "No version member.", without(r#""version":1"#)),
        reject("version_null", M, "version is null.", edit(r#""version":1"#, r#""version":null"#)),
        reject("duplicate_version", M, "version twice (same value).", edit(r#""version":1"#, r#""version":1,"version":1"#)),
        reject("duplicate_member", M, "topic twice (same value).", edit(r#""topic":"orders""#, r#""topic":"orders","topic":"orders""#)),
        reject("duplicate_member_bucket_hash", M, "bucket_hash.seed twice.", edit(r#""seed":625341585"#, r#""seed":625341585,"seed":625341585"#)),
        reject("duplicate_member_heavy", M, "A heavy entry with partition twice.", edit(r#""partition":1"#, r#""partition":1,"partition":1"#)),
        reject("duplicate_member_params", M, "params.mu twice.", edit(r#""mu":4.0"#, r#""mu":4.0,"mu":4.0"#)),
        reject("array_v2_three_elements", M, "An array [\"dkg.assignment\", 2, 0]: not an object.", br#"["dkg.assignment",2,0]"#.to_vec()),
        reject("string_lone_surrogate", M, "A lone surrogate escape \\ud800 in the topic.", edit(r#""topic":"orders""#, r#""topic":"\ud800""#)),
        reject("string_control_character", M, "An unescaped control character (0x01) inside the topic string.", edit(r#""topic":"orders""#, "\"topic\":\"ord\u{1}ers\"")),
        reject("partitions_negative_zero", M, "partitions -0.", edit(r#""partitions":3"#, r#""partitions":-0"#)),
        // Unknown and missing members.
        reject("unknown_member", M, "An unknown top-level member.", edit(r#""epoch":7"#, r#""epoch":7,"salt":1"#)),
        reject("unknown_member_null", M, "An unknown top-level member with value null.", edit(r#""epoch":7"#, r#""epoch":7,"comment":null"#)),
        reject("unknown_member_bucket_hash", M, "An unknown member in bucket_hash.", edit(r#""seed":625341585}"#, r#""seed":625341585,"salt":1}"#)),
        reject("unknown_member_heavy", M, "An unknown member in a heavy entry.", edit(r#""weight":1200}"#, r#""weight":1200,"share":0.5}"#)),
        reject("unknown_member_params", M, "An unknown member in params.", edit(r#""window_records":100000}"#, r#""window_records":100000,"alpha":1}"#)),
        reject("missing_topic", M, "No topic.", without(r#""topic":"orders""#)),
        reject("missing_partitions", M, "No partitions.", without(r#""partitions":3"#)),
        reject("missing_epoch", M, "No epoch.", without(r#""epoch":7"#)),
        reject("missing_bucket_hash", M, "No bucket_hash.", without(r#""bucket_hash":{"function":"murmur2","seed":625341585}"#)),
        reject("missing_buckets", M, "No buckets.", without(r#""buckets":4"#)),
        reject("missing_table", M, "No table.", without(r#""table":[0,1,2,0]"#)),
        reject("missing_heavy", M, "No heavy (an empty list must be written as []).", without(r#""heavy":[{"key_b64":"aG90","partition":1,"weight":1200}]"#)),
        reject("missing_params", M, "No params.", without(r#""params":{"theta":0.01,"epsilon":0.005,"mu":4.0,"window_records":100000}"#)),
        reject("missing_created_at_ms", M, "No created_at_ms.", without(r#""created_at_ms":1700000000000"#)),
        reject("missing_predicted_load", M, "No predicted_load.", without(r#""predicted_load":[0.5,0.25,0.25]"#)),
        reject("missing_heavy_key_b64", M, "A heavy entry without key_b64.", edit(r#""key_b64":"aG90","#, "")),
        reject("missing_heavy_partition", M, "A heavy entry without partition.", edit(r#""partition":1,"#, "")),
        reject("missing_heavy_weight", M, "A heavy entry without weight.", edit(r#","weight":1200"#, "")),
        reject("missing_params_theta", M, "params without theta.", edit(r#""theta":0.01,"#, "")),
        reject("missing_params_window_records", M, "params without window_records.", edit(r#","window_records":100000"#, "")),
        reject("missing_bucket_hash_seed", M, "bucket_hash without seed.", edit(r#","seed":625341585"#, "")),
        reject("missing_bucket_hash_function", M, "bucket_hash without function.", edit(r#""function":"murmur2","#, "")),
        // Wrong types and numbers.
        reject("bucket_hash_unknown_function", M, "bucket_hash.function \"xxhash\".", edit(r#""function":"murmur2""#, r#""function":"xxhash""#)),
        reject("bucket_hash_function_case", M, "bucket_hash.function \"Murmur2\" (case matters).", edit(r#""function":"murmur2""#, r#""function":"Murmur2""#)),
        reject("bucket_hash_seed_negative", M, "bucket_hash.seed -1.", edit(r#""seed":625341585"#, r#""seed":-1"#)),
        reject("bucket_hash_seed_overflow", M, "bucket_hash.seed 2^32.", edit(r#""seed":625341585"#, r#""seed":4294967296"#)),
        reject("bucket_hash_seed_float", M, "bucket_hash.seed 7.0.", edit(r#""seed":625341585"#, r#""seed":7.0"#)),
        reject("bucket_hash_seed_string", M, "bucket_hash.seed \"7\".", edit(r#""seed":625341585"#, r#""seed":"7""#)),
        reject("bucket_hash_array", M, "bucket_hash as an array.", edit(r#"{"function":"murmur2","seed":625341585}"#, r#"["murmur2",625341585]"#)),
        reject("bucket_hash_string", M, "bucket_hash as a string.", edit(r#"{"function":"murmur2","seed":625341585}"#, r#""murmur2""#)),
        reject("topic_number", M, "topic is a number.", edit(r#""topic":"orders""#, r#""topic":7"#)),
        reject("topic_null", M, "topic is null.", edit(r#""topic":"orders""#, r#""topic":null"#)),
        reject("partitions_string", M, "partitions \"3\".", edit(r#""partitions":3"#, r#""partitions":"3""#)),
        reject("partitions_float", M, "partitions 3.0.", edit(r#""partitions":3"#, r#""partitions":3.0"#)),
        reject("partitions_exponent", M, "partitions 3e0.", edit(r#""partitions":3"#, r#""partitions":3e0"#)),
        reject("partitions_negative", M, "partitions -3.", edit(r#""partitions":3"#, r#""partitions":-3"#)),
        reject("partitions_overflow", M, "partitions 2^32 (does not fit u32).", edit(r#""partitions":3"#, r#""partitions":4294967296"#)),
        reject("partitions_null", M, "partitions null.", edit(r#""partitions":3"#, r#""partitions":null"#)),
        reject("epoch_negative", M, "epoch -7.", edit(r#""epoch":7"#, r#""epoch":-7"#)),
        reject("epoch_float", M, "epoch 7.5.", edit(r#""epoch":7"#, r#""epoch":7.5"#)),
        reject("epoch_overflow", M, "epoch 2^64.", edit(r#""epoch":7"#, r#""epoch":18446744073709551616"#)),
        reject("epoch_string", M, "epoch \"7\".", edit(r#""epoch":7"#, r#""epoch":"7""#)),
        // The epoch's range (step 11b): after the shape and the invalid/oversize steps 5-11, before the table entries.
        reject("epoch_2_pow_53", R, "epoch 2^53 = 9007199254740992 (the largest is 2^53 - 1).", edit(r#""epoch":7"#, r#""epoch":9007199254740992"#)),
        reject("epoch_max_u64", R, "epoch 18446744073709551615 (a u64, but above 2^53 - 1).", edit(r#""epoch":7"#, r#""epoch":18446744073709551615"#)),
        reject("epoch_out_of_range_after_invalid_topic", I, "An illegal topic and epoch 2^53: the topic (step 7) is checked first.", edit(r#""topic":"orders","partitions":3,"epoch":7"#, r#""topic":"..","partitions":3,"epoch":9007199254740992"#)),
        reject("epoch_out_of_range_after_buckets", I, "buckets 5 with a table of 4 and epoch 2^53: the table length (step 5) is checked first.", edit(r#""epoch":7,"bucket_hash":{"function":"murmur2","seed":625341585},"buckets":4"#, r#""epoch":9007199254740992,"bucket_hash":{"function":"murmur2","seed":625341585},"buckets":5"#)),
        reject("epoch_out_of_range_after_partitions_over_max", O, "partitions 1000001 and epoch 2^53: the partition limit (step 9, oversize in version 1) is checked first.", edit(r#""partitions":3,"epoch":7"#, r#""partitions":1000001,"epoch":9007199254740992"#)),
        reject("epoch_out_of_range_before_predicted_load", R, "epoch 2^53 and a predicted_load of 2 entries: the epoch (step 11b) is checked before predicted_load (step 16).", edit(r#""epoch":7,"bucket_hash":{"function":"murmur2","seed":625341585},"buckets":4,"table":[0,1,2,0],"heavy":[{"key_b64":"aG90","partition":1,"weight":1200}],"params":{"theta":0.01,"epsilon":0.005,"mu":4.0,"window_records":100000},"created_at_ms":1700000000000,"predicted_load":[0.5,0.25,0.25]"#, r#""epoch":9007199254740992,"bucket_hash":{"function":"murmur2","seed":625341585},"buckets":4,"table":[0,1,2,0],"heavy":[{"key_b64":"aG90","partition":1,"weight":1200}],"params":{"theta":0.01,"epsilon":0.005,"mu":4.0,"window_records":100000},"created_at_ms":1700000000000,"predicted_load":[0.5,0.5]"#)),
        reject("buckets_negative", M, "buckets -4.", edit(r#""buckets":4"#, r#""buckets":-4"#)),
        reject("table_object", M, "table as an object.", edit(r#""table":[0,1,2,0]"#, r#""table":{"0":0}"#)),
        reject("table_entry_negative", M, "A table entry -1.", edit("[0,1,2,0]", "[0,-1,2,0]")),
        reject("table_entry_float", M, "A table entry 1.0.", edit("[0,1,2,0]", "[0,1.0,2,0]")),
        reject("table_entry_string", M, "A table entry \"1\".", edit("[0,1,2,0]", r#"[0,"1",2,0]"#)),
        reject("table_entry_null", M, "A table entry null.", edit("[0,1,2,0]", "[0,null,2,0]")),
        reject("table_entry_overflow", M, "A table entry 2^32.", edit("[0,1,2,0]", "[0,4294967296,2,0]")),
        reject("heavy_object", M, "heavy as an object.", edit(r#"[{"key_b64":"aG90","partition":1,"weight":1200}]"#, "{}")),
        reject("heavy_null", M, "heavy null.", edit(r#"[{"key_b64":"aG90","partition":1,"weight":1200}]"#, "null")),
        reject("heavy_entry_array", M, "A heavy entry as an array [key_b64, partition, weight].", edit(r#"{"key_b64":"aG90","partition":1,"weight":1200}"#, r#"["aG90",1,1200]"#)),
        reject("heavy_entry_null", M, "A heavy entry null.", edit(r#"{"key_b64":"aG90","partition":1,"weight":1200}"#, "null")),
        reject("heavy_key_b64_number", M, "key_b64 a number.", edit(r#""key_b64":"aG90""#, r#""key_b64":7"#)),
        reject("heavy_key_b64_null", M, "key_b64 null.", edit(r#""key_b64":"aG90""#, r#""key_b64":null"#)),
        reject("heavy_partition_negative", M, "A heavy partition -1.", edit(r#""partition":1"#, r#""partition":-1"#)),
        reject("heavy_weight_negative", M, "A heavy weight -1.", edit(r#""weight":1200"#, r#""weight":-1"#)),
        reject("heavy_weight_float", M, "A heavy weight 1200.0.", edit(r#""weight":1200"#, r#""weight":1200.0"#)),
        reject("params_array", M, "params as an array.", edit(r#"{"theta":0.01,"epsilon":0.005,"mu":4.0,"window_records":100000}"#, "[0.01,0.005,4.0,100000]")),
        reject("params_theta_string", M, "params.theta \"0.01\".", edit(r#""theta":0.01"#, r#""theta":"0.01""#)),
        reject("params_theta_overflow", M, "params.theta 1e400 (beyond f64).", edit(r#""theta":0.01"#, r#""theta":1e400"#)),
        reject("params_window_records_negative", M, "params.window_records -1.", edit(r#""window_records":100000"#, r#""window_records":-1"#)),
        reject("params_window_records_float", M, "params.window_records 1.5.", edit(r#""window_records":100000"#, r#""window_records":1.5"#)),
        reject("created_at_ms_negative", M, "created_at_ms -1.", edit(r#""created_at_ms":1700000000000"#, r#""created_at_ms":-1"#)),
        reject("created_at_ms_float", M, "created_at_ms 1.5.", edit(r#""created_at_ms":1700000000000"#, r#""created_at_ms":1.5"#)),
        reject("predicted_load_object", M, "predicted_load as an object.", edit("[0.5,0.25,0.25]", r#"{"0":0.5}"#)),
        reject("predicted_load_entry_string", M, "A predicted_load entry \"0.5\".", edit("[0.5,0.25,0.25]", r#"["0.5",0.25,0.25]"#)),
        reject("predicted_load_entry_null", M, "A predicted_load entry null.", edit("[0.5,0.25,0.25]", "[null,0.25,0.25]")),
        reject("predicted_load_nan", M, "NaN (not a JSON token).", edit("[0.5,0.25,0.25]", "[NaN,0.25,0.25]")),
        reject("predicted_load_infinity", M, "Infinity (not a JSON token).", edit("[0.5,0.25,0.25]", "[Infinity,0.25,0.25]")),
        reject("predicted_load_overflow", M, "1e400 (beyond f64: not read as infinity).", edit("[0.5,0.25,0.25]", "[1e400,0.25,0.25]")),
        // Decoded, but the values break a rule.
        reject("partitions_zero", I, "partitions 0.", edit(r#""partitions":3"#, r#""partitions":0"#)),
        reject("partitions_over_max", O, "partitions 1000001 (limit 1000000): a size limit, so the reason is oversize (known gap).", edit(r#""partitions":3"#, &format!(r#""partitions":{}"#, MAX_PARTITIONS + 1))),
        reject("buckets_zero", I, "buckets 0 and an empty table.", edit(r#""buckets":4,"table":[0,1,2,0]"#, r#""buckets":0,"table":[]"#)),
        reject("table_shorter_than_buckets", I, "buckets 5, table of 4 entries.", edit(r#""buckets":4"#, r#""buckets":5"#)),
        reject("table_longer_than_buckets", I, "buckets 3, table of 4 entries.", edit(r#""buckets":4"#, r#""buckets":3"#)),
        reject("buckets_over_max", I, "buckets 4194305 (limit 4194304) with a table of 4: the length check comes first. A table that long cannot fit in 8 MiB, so too many buckets always shows as this.", edit(r#""buckets":4"#, r#""buckets":4194305"#)),
        reject("table_entry_out_of_range", R, "A table entry 3 with 3 partitions.", edit("[0,1,2,0]", "[0,1,3,0]")),
        reject("table_entry_max_u32", R, "A table entry 4294967295.", edit("[0,1,2,0]", "[0,1,4294967295,0]")),
        reject("heavy_partition_out_of_range", R, "A heavy partition 3 with 3 partitions.", edit(r#""partition":1"#, r#""partition":3"#)),
        reject("partitions_below_table_entries", R, "partitions 2 but a table entry 2 (and predicted_load of 3: the table is checked first).", edit(r#""partitions":3"#, r#""partitions":2"#)),
        reject("heavy_key_duplicate", I, "The same heavy key twice, same partition.", edit(r#"{"key_b64":"aG90","partition":1,"weight":1200}"#, r#"{"key_b64":"aG90","partition":1,"weight":1200},{"key_b64":"aG90","partition":1,"weight":1200}"#)),
        reject("heavy_key_duplicate_other_partition", I, "The same heavy key twice, different partitions.", edit(r#"{"key_b64":"aG90","partition":1,"weight":1200}"#, r#"{"key_b64":"aG90","partition":1,"weight":1200},{"key_b64":"aG90","partition":2,"weight":5}"#)),
        reject("heavy_key_duplicate_empty", I, "The empty key twice.", edit(r#"{"key_b64":"aG90","partition":1,"weight":1200}"#, r#"{"key_b64":"","partition":1,"weight":1},{"key_b64":"","partition":1,"weight":1}"#)),
        reject("heavy_key_duplicate_out_of_range", R, "A duplicate heavy key whose second partition is out of range: partitions are checked before duplicates.", edit(r#"{"key_b64":"aG90","partition":1,"weight":1200}"#, r#"{"key_b64":"aG90","partition":1,"weight":1200},{"key_b64":"aG90","partition":3,"weight":5}"#)),
        reject("heavy_key_too_long", O, "A heavy key of 65537 bytes (limit 65536): a size limit, so oversize (known gap).", heavy_with_key(&long_key)),
        reject("base64_bad_character", I, "key_b64 \"aG9!\".", heavy_with_key("aG9!")),
        reject("base64_missing_padding", I, "key_b64 \"aGk\" (canonical: \"aGk=\").", heavy_with_key("aGk")),
        reject("base64_extra_padding", I, "key_b64 \"aGk==\".", heavy_with_key("aGk==")),
        reject("base64_nonzero_trailing_bits", I, "key_b64 \"aGl=\" (decodes to \"hi\" with non-zero unused bits; canonical: \"aGk=\").", heavy_with_key("aGl=")),
        reject("base64_url_safe_alphabet", I, "key_b64 \"-_8=\" (URL-safe alphabet; standard: \"+/8=\").", heavy_with_key("-_8=")),
        reject("base64_whitespace", I, "key_b64 \"aG 90\".", heavy_with_key("aG 90")),
        reject("base64_line_break", I, "key_b64 with an escaped line break \"aG\\n90\".", heavy_with_key("aG\\n90")),
        reject("base64_padding_only", I, "key_b64 \"====\".", heavy_with_key("====")),
        reject("base64_bad_and_table_out_of_range", I, "Bad base64 and a table entry out of range: keys are decoded before the ranges are checked.", edit(r#""table":[0,1,2,0],"heavy":[{"key_b64":"aG90""#, r#""table":[0,1,9,0],"heavy":[{"key_b64":"aG9!""#)),
        reject("table_length_and_out_of_range", I, "buckets 5 with a table of 4 that has an entry out of range: the length is checked first.", edit(r#""buckets":4,"table":[0,1,2,0]"#, r#""buckets":5,"table":[0,1,9,0]"#)),
        reject("topic_empty", I, "topic \"\".", with_topic("")),
        reject("topic_dot", I, "topic \".\".", with_topic(".")),
        reject("topic_dot_dot", I, "topic \"..\".", with_topic("..")),
        reject("topic_slash", I, "topic \"orders/eu\".", with_topic("orders/eu")),
        reject("topic_space", I, "topic \"orders eu\".", with_topic("orders eu")),
        reject("topic_colon", I, "topic \"orders:eu\".", with_topic("orders:eu")),
        reject("topic_non_ascii", I, "topic \"ordérs\".", with_topic("ordérs")),
        reject("topic_nul", I, "topic \"orders\\u0000\".", with_topic("orders\0")),
        reject("topic_250_chars", I, "A topic of 250 characters (limit 249).", with_topic(&long_topic)),
        reject("topic_invalid_and_out_of_range", I, "An invalid topic and a table entry out of range: the topic is checked first.", edit(r#""topic":"orders","partitions":3,"epoch":7,"bucket_hash":{"function":"murmur2","seed":625341585},"buckets":4,"table":[0,1,2,0]"#, r#""topic":"..","partitions":3,"epoch":7,"bucket_hash":{"function":"murmur2","seed":625341585},"buckets":4,"table":[0,1,9,0]"#)),
        reject("predicted_load_too_short", I, "predicted_load of 2 entries for 3 partitions.", edit("[0.5,0.25,0.25]", "[0.5,0.5]")),
        reject("predicted_load_too_long", I, "predicted_load of 4 entries for 3 partitions.", edit("[0.5,0.25,0.25]", "[0.5,0.25,0.25,0]")),
        reject("predicted_load_negative", I, "A predicted_load entry -0.25.", edit("[0.5,0.25,0.25]", "[0.5,0.75,-0.25]")),
        reject("params_theta_negative", I, "params.theta -0.01.", edit(r#""theta":0.01"#, r#""theta":-0.01"#)),
        reject("params_epsilon_negative", I, "params.epsilon -0.005.", edit(r#""epsilon":0.005"#, r#""epsilon":-0.005"#)),
        reject("params_mu_negative", I, "params.mu -4.", edit(r#""mu":4.0"#, r#""mu":-4"#)),
        reject("heavy_keys_17_in_one_bucket", I, "17 heavy keys in one bucket (the limit is 16): keys that collide in the bucket hash cannot make a lookup scan long.", crowded_bucket(MAX_HEAVY_KEYS_PER_BUCKET + 1)),
    ]
}

/// `BASE_DOCUMENT` with its heavy list replaced by `n` keys that all fall in bucket 0 of its 4
/// buckets (seed 625341585), each on partition 1.
fn crowded_bucket(n: usize) -> Vec<u8> {
    let entries: Vec<String> = (0_u32..)
        .map(|i| format!("crowd-{i}").into_bytes())
        .filter(|k| BucketHash::default().bucket(k, 4) == 0)
        .take(n)
        .map(|k| {
            format!(
                r#"{{"key_b64":"{}","partition":1,"weight":10}}"#,
                B64.encode(k)
            )
        })
        .collect();
    edit(
        r#"[{"key_b64":"aG90","partition":1,"weight":1200}]"#,
        &format!("[{}]", entries.join(",")),
    )
}

fn reject_file() -> String {
    let base = Assignment::from_json(BASE_DOCUMENT.as_bytes()).expect("the base document is valid");
    assert_eq!(
        base.to_json(),
        BASE_DOCUMENT.as_bytes(),
        "the base document is canonical"
    );
    let mut cases = checked_cases(reject_cases(), "reject case");
    let over = MAX_ASSIGNMENT_BYTES + 1;
    assert_eq!(reject_label(&padded_document(over)), "oversize");
    cases.push(RejectCase {
        name: "oversize".to_owned(),
        description: format!(
            "A valid document followed by spaces up to {over} bytes (the limit is \
             {MAX_ASSIGNMENT_BYTES}): rejected before parsing. Not stored; build it from \
             `generate`."
        ),
        document_b64: None,
        reason: "oversize",
        generate: Some(Generate {
            valid_document_padded_to_bytes: over,
        }),
    });
    cases_file(&[], &cases)
}

// ---------------------------------------------------------------------------------------------
// control.json

#[derive(Serialize)]
struct ControlCase {
    name: &'static str,
    description: &'static str,
    records: Vec<ControlRecordOut>,
    expect: Vec<Expect>,
}

#[derive(Serialize)]
struct ControlRecordOut {
    key_utf8: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    key_b64: Option<String>,
    value_json: Option<String>,
}

#[derive(Serialize)]
struct Expect {
    outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
    epoch_after: Option<u64>,
    /// The epoch floor a retraction document left (`v2/control.json` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    floor_after: Option<u64>,
}

/// The `outcome` (and reject `reason`) label of what a record did: `accepted`, `unchanged`,
/// `retracted`, `rejected`, and for version 2 `reset` (state dropped) or `reread` (state dropped,
/// read the control topic again from the beginning).
pub fn outcome_of(update: &ControlUpdate) -> (&'static str, Option<&'static str>) {
    match update {
        ControlUpdate::Adopted(_) => ("accepted", None),
        ControlUpdate::Unchanged { .. } => ("unchanged", None),
        ControlUpdate::Retracted { .. } => ("retracted", None),
        ControlUpdate::Reset { reread: false, .. } => ("reset", None),
        ControlUpdate::Reset { reread: true, .. } => ("reread", None),
        ControlUpdate::Rejected { reason, .. } => ("rejected", Some(reason.as_str())),
    }
}

/// A control record: key bytes (None = no key) and value (None = tombstone).
type Record = (Option<Vec<u8>>, Option<String>);

fn control_doc(topic: &str, epoch: u64, table: &[u32]) -> String {
    let a = assignment(AssignmentParts {
        topic: topic.to_owned(),
        epoch,
        table: table.to_vec(),
        ..document(3, table.len() as u32, DEFAULT_BUCKET_SEED, &[], 0).into_parts()
    });
    doc_json(&a)
}

/// `document` (at epoch [`MAX_EPOCH`]) with its epoch replaced by `epoch` as text: an epoch over
/// the limit cannot be built through [`Assignment::new`].
fn over_max_epoch(document: &str, epoch: u64) -> String {
    let at = format!(r#""epoch":{MAX_EPOCH}"#);
    assert_eq!(document.matches(&at).count(), 1, "one epoch {MAX_EPOCH}");
    document.replacen(&at, &format!(r#""epoch":{epoch}"#), 1)
}

fn put(key: &str, value: String) -> Record {
    (Some(key.as_bytes().to_vec()), Some(value))
}

fn tombstone(key: &str) -> Record {
    (Some(key.as_bytes().to_vec()), None)
}

/// The outcome of each record applied in order to one book, as the spec states it.
fn expectations(records: &[Record]) -> Vec<Expect> {
    let mut book = AssignmentBook::new();
    records
        .iter()
        .map(|(key, value)| {
            let update = book.apply(key.as_deref(), value.as_deref().map(str::as_bytes));
            let topic = key.as_deref().and_then(|k| std::str::from_utf8(k).ok());
            let epoch_after = topic.and_then(|t| book.get(t)).map(|a| a.epoch());
            let floor_after = topic.and_then(|t| book.retraction(t)).map(|r| r.epoch);
            let (outcome, reason) = outcome_of(&update);
            Expect {
                outcome,
                reason,
                epoch_after,
                floor_after,
            }
        })
        .collect()
}

fn control_case(
    name: &'static str,
    description: &'static str,
    records: Vec<Record>,
    want: &[(&str, Option<u64>)],
) -> ControlCase {
    let expect = expectations(&records);
    let got: Vec<(String, Option<u64>)> = expect
        .iter()
        .map(|e| {
            let label = e
                .reason
                .map_or(e.outcome.to_owned(), |r| format!("{}:{r}", e.outcome));
            (label, e.epoch_after)
        })
        .collect();
    let want: Vec<(String, Option<u64>)> =
        want.iter().map(|(l, e)| ((*l).to_owned(), *e)).collect();
    assert_eq!(got, want, "control case {name}");
    let records = records
        .into_iter()
        .map(|(key, value)| {
            let text = key.as_deref().and_then(|k| std::str::from_utf8(k).ok());
            ControlRecordOut {
                key_utf8: text.map(str::to_owned),
                key_b64: key.as_deref().filter(|_| text.is_none()).map(b64),
                value_json: value,
            }
        })
        .collect();
    ControlCase {
        name,
        description,
        records,
        expect,
    }
}

#[allow(clippy::too_many_lines)]
fn control_file() -> String {
    let o = |epoch: u64| control_doc("orders", epoch, &[0, 1, 2, 0]);
    let o_other = |epoch: u64| control_doc("orders", epoch, &[2, 1, 0, 0]);
    let p = |epoch: u64| control_doc("payments", epoch, &[1, 1, 2]);
    let pretty = Assignment::from_json(o(3).as_bytes())
        .expect("valid")
        .to_json_pretty();
    let later = {
        let a = Assignment::from_json(o(3).as_bytes()).expect("valid");
        doc_json(&assignment(AssignmentParts {
            created_at_ms: 1_700_000_000_001,
            ..a.into_parts()
        }))
    };
    let two_heavy = |reversed: bool| {
        let mut heavy = vec![b"a".to_vec(), b"b".to_vec()];
        if reversed {
            heavy.reverse();
        }
        let mut parts = document(3, 4, DEFAULT_BUCKET_SEED, &heavy, 0).into_parts();
        parts.epoch = 4;
        for h in &mut parts.heavy {
            h.partition = 1;
            h.weight = 5;
        }
        doc_json(&assignment(parts))
    };
    let longest = "t".repeat(MAX_TOPIC_LEN);
    let cases = vec![
        control_case(
            "epoch_increases",
            "Epochs 1, 2, 5 of one topic: each is adopted (gaps are fine).",
            vec![
                put("orders", o(1)),
                put("orders", o(2)),
                put("orders", o(5)),
            ],
            &[
                ("accepted", Some(1)),
                ("accepted", Some(2)),
                ("accepted", Some(5)),
            ],
        ),
        control_case(
            "stale_epoch",
            "Epoch 5, then epoch 4 (rejected, 5 stays), then epoch 5 again byte for byte \
             (unchanged).",
            vec![
                put("orders", o(5)),
                put("orders", o(4)),
                put("orders", o(5)),
            ],
            &[
                ("accepted", Some(5)),
                ("rejected:stale_epoch", Some(5)),
                ("unchanged", Some(5)),
            ],
        ),
        control_case(
            "epoch_conflict",
            "Epoch 5, then a different document under epoch 5 (rejected: the first stays), then \
             epoch 6.",
            vec![
                put("orders", o(5)),
                put("orders", o_other(5)),
                put("orders", o(6)),
            ],
            &[
                ("accepted", Some(5)),
                ("rejected:epoch_conflict", Some(5)),
                ("accepted", Some(6)),
            ],
        ),
        control_case(
            "identical_republication",
            "Epoch 3 published three times: the same bytes, then the same content pretty-printed \
             (equality is on the decoded fields, not the bytes).",
            vec![
                put("orders", o(3)),
                put("orders", o(3)),
                put("orders", pretty),
            ],
            &[
                ("accepted", Some(3)),
                ("unchanged", Some(3)),
                ("unchanged", Some(3)),
            ],
        ),
        control_case(
            "conflict_on_any_field",
            "Under the current epoch, a document that differs only in created_at_ms, and one that \
             lists the same heavy keys in another order, are conflicts (every decoded field \
             counts, including list order, even where routing would not change).",
            vec![
                put("orders", o(3)),
                put("orders", later),
                put("orders", two_heavy(false)),
                put("orders", two_heavy(true)),
            ],
            &[
                ("accepted", Some(3)),
                ("rejected:epoch_conflict", Some(3)),
                ("accepted", Some(4)),
                ("rejected:epoch_conflict", Some(4)),
            ],
        ),
        control_case(
            "tombstone_resets_the_epoch_floor",
            "Epoch 7, a tombstone (retracted: Kafka's placement), then epoch 2, which is accepted \
             (today's rule: a retraction clears the floor), another tombstone, and a tombstone \
             for a topic without an assignment (unchanged).",
            vec![
                put("orders", o(7)),
                tombstone("orders"),
                put("orders", o(2)),
                tombstone("orders"),
                tombstone("orders"),
            ],
            &[
                ("accepted", Some(7)),
                ("retracted", None),
                ("accepted", Some(2)),
                ("retracted", None),
                ("unchanged", None),
            ],
        ),
        control_case(
            "topic_mismatch",
            "A record keyed \"orders\" carrying a document for \"payments\": rejected with or \
             without a current assignment, and the current one stays. A key that is not a legal \
             topic name (\"..\") is only ever a mismatch.",
            vec![
                put("orders", p(1)),
                put("orders", o(1)),
                put("orders", p(9)),
                put("..", o(2)),
            ],
            &[
                ("rejected:topic_mismatch", None),
                ("accepted", Some(1)),
                ("rejected:topic_mismatch", Some(1)),
                ("rejected:topic_mismatch", None),
            ],
        ),
        control_case(
            "bad_key",
            "No key, an empty key, a key that is not UTF-8 (bytes ff fe), and a tombstone without \
             a key: all rejected as bad_key (epoch_after is null: the record names no topic), \
             and the current assignment of \"orders\" is untouched.",
            vec![
                put("orders", o(1)),
                (None, Some(o(2))),
                (Some(Vec::new()), Some(o(2))),
                (Some(vec![0xff, 0xfe]), Some(o(2))),
                (None, None),
                put("orders", o(2)),
            ],
            &[
                ("accepted", Some(1)),
                ("rejected:bad_key", None),
                ("rejected:bad_key", None),
                ("rejected:bad_key", None),
                ("rejected:bad_key", None),
                ("accepted", Some(2)),
            ],
        ),
        control_case(
            "rejected_values_keep_the_last_good",
            "Epoch 1, then values that fail to decode (malformed, a newer version, out of range, \
             invalid): each is rejected and epoch 1 stays; then epoch 2 is adopted.",
            vec![
                put("orders", o(1)),
                put("orders", "{not json".to_owned()),
                put("orders", o(2).replacen("\"version\":1", "\"version\":3", 1)),
                put(
                    "orders",
                    o(2).replacen("\"table\":[0,1,2,0]", "\"table\":[0,1,5,0]", 1),
                ),
                put(
                    "orders",
                    o(2).replacen("\"partitions\":3", "\"partitions\":0", 1),
                ),
                put("orders", o(2)),
            ],
            &[
                ("accepted", Some(1)),
                ("rejected:malformed_json", Some(1)),
                ("rejected:unsupported_version", Some(1)),
                ("rejected:out_of_range", Some(1)),
                ("rejected:invalid", Some(1)),
                ("accepted", Some(2)),
            ],
        ),
        control_case(
            "first_record_rejected",
            "A rejected record on an empty state leaves the topic without an assignment.",
            vec![put("orders", "[]".to_owned()), put("orders", o(1))],
            &[("rejected:malformed_json", None), ("accepted", Some(1))],
        ),
        control_case(
            "epoch_zero",
            "Epoch 0 is a valid epoch; re-publishing it is a no-op and epoch 1 follows.",
            vec![
                put("orders", o(0)),
                put("orders", o(0)),
                put("orders", o(1)),
            ],
            &[
                ("accepted", Some(0)),
                ("unchanged", Some(0)),
                ("accepted", Some(1)),
            ],
        ),
        control_case(
            "epoch_limit",
            "Epoch 2^53 - 1 (the largest) is accepted; 2^53 and 18446744073709551615 are rejected \
             (out_of_range) and the assignment at 2^53 - 1 stays; a tombstone clears the floor and \
             epoch 1 is accepted (the only way on after the largest epoch, with a new control-topic \
             generation, spec 6.4).",
            vec![
                put("orders", o(MAX_EPOCH)),
                put("orders", over_max_epoch(&o(MAX_EPOCH), MAX_EPOCH + 1)),
                put("orders", over_max_epoch(&o(MAX_EPOCH), u64::MAX)),
                tombstone("orders"),
                put("orders", o(1)),
            ],
            &[
                ("accepted", Some(MAX_EPOCH)),
                ("rejected:out_of_range", Some(MAX_EPOCH)),
                ("rejected:out_of_range", Some(MAX_EPOCH)),
                ("retracted", None),
                ("accepted", Some(1)),
            ],
        ),
        control_case(
            "epoch_out_of_range_keeps_the_assignment",
            "Epoch 5, then a well-formed document at epoch 18446744073709551615 with another table \
             (rejected, out_of_range: producers keep epoch 5's placement), then epoch 6 is adopted.",
            vec![
                put("orders", o(5)),
                put("orders", over_max_epoch(&o_other(MAX_EPOCH), u64::MAX)),
                put("orders", o(6)),
            ],
            &[
                ("accepted", Some(5)),
                ("rejected:out_of_range", Some(5)),
                ("accepted", Some(6)),
            ],
        ),
        control_case(
            "legal_topic_names",
            "The longest legal topic name (249 characters) and one using every allowed \
             punctuation character are accepted; documents match their key byte for byte.",
            vec![
                put(&longest, control_doc(&longest, 1, &[0, 1, 2])),
                put("a.B_c-9", control_doc("a.B_c-9", 3, &[0, 1, 2])),
            ],
            &[("accepted", Some(1)), ("accepted", Some(3))],
        ),
        control_case(
            "two_topics_interleaved",
            "Two topics on one control topic: the epoch rules apply per topic (epoch 3 of \
             payments is stale after its 5 even though orders is at 2; a tombstone of orders \
             leaves payments alone).",
            vec![
                put("orders", o(1)),
                put("payments", p(5)),
                put("orders", o(2)),
                put("payments", p(3)),
                tombstone("orders"),
                put("payments", p(6)),
                put("orders", o(1)),
            ],
            &[
                ("accepted", Some(1)),
                ("accepted", Some(5)),
                ("accepted", Some(2)),
                ("rejected:stale_epoch", Some(5)),
                ("retracted", None),
                ("accepted", Some(6)),
                ("accepted", Some(1)),
            ],
        ),
    ];
    cases_file(&[], &cases)
}

// ---------------------------------------------------------------------------------------------
// random.json

#[derive(Serialize)]
struct RandomCase {
    seed: u64,
    document_json: String,
    topic_partitions: u32,
    digest: String,
    first_partitions: Vec<u32>,
}

/// What `count` stream keys of `seed` placed by `a` on a topic of `topic_partitions` partitions
/// give: the digest, the first [`RANDOM_FIRST`] partitions, and how many keys took the heavy route.
pub fn random_digest(
    a: &Assignment,
    topic_partitions: u32,
    seed: u64,
    count: usize,
) -> (String, Vec<u32>, usize) {
    let mut rng = SplitMix64(seed);
    let mut key = Vec::with_capacity(64);
    let mut digest = Fnv1a::default();
    let mut first = Vec::with_capacity(RANDOM_FIRST);
    let mut heavy = 0;
    for i in 0..count {
        rng.next_key(&mut key);
        let (partition, route) = place(a, topic_partitions, &key);
        digest.add_partition(partition);
        heavy += usize::from(route == "heavy");
        if i < RANDOM_FIRST {
            first.push(partition);
        }
    }
    (digest.hex(), first, heavy)
}

/// The document of random case `index` (0..20): its key seed and assignment.
fn random_document(index: u64) -> (u64, Assignment, u32) {
    let mut rng = SplitMix64(0x5eed_0000 + index);
    // Below 2^53, so every JSON reader holds it exactly.
    let seed = rng.next_u64() >> 11;
    let partitions = 1 + rng.below(200) as u32;
    let buckets = match index % 4 {
        // A multiple of the partition count (mu buckets per partition), capped.
        0 | 1 => (partitions * (1 + rng.below(100) as u32)).min(20_000),
        // Any count, mostly not a multiple.
        2 => 1 + rng.below(20_000) as u32,
        // Few buckets: heavy keys crowd them.
        _ => 1 + rng.below(40) as u32,
    };
    let heavy_count = match index {
        0 => 0,
        1 => 300,
        _ => rng.below(301) as usize,
    };
    let mut wanted: Vec<u64> = (0..heavy_count)
        .map(|_| rng.below(RANDOM_KEY_COUNT as u64))
        .collect();
    wanted.sort_unstable();
    let mut stream = SplitMix64(seed);
    let mut key = Vec::new();
    let mut heavy_keys: Vec<Vec<u8>> = Vec::new();
    let mut next = wanted.iter().peekable();
    for i in 0..RANDOM_KEY_COUNT as u64 {
        if next.peek().is_none() {
            break;
        }
        stream.next_key(&mut key);
        while next.next_if(|&&w| w == i).is_some() {
            if !heavy_keys.contains(&key) {
                heavy_keys.push(key.clone());
            }
        }
    }
    let bucket_seed = rng.next_u64() as u32;
    let table: Vec<u32> = (0..buckets)
        .map(|_| rng.below(partitions.into()) as u32)
        .collect();
    // A document holds at most MAX_HEAVY_KEYS_PER_BUCKET heavy keys per bucket (spec 4.4): the
    // crowded cases keep the first that many of each bucket.
    let bucket_hash = BucketHash::Murmur2 { seed: bucket_seed };
    let mut per_bucket = vec![0_usize; buckets as usize];
    heavy_keys.retain(|key| {
        let n = &mut per_bucket[bucket_hash.bucket(key, buckets) as usize];
        *n += 1;
        *n <= MAX_HEAVY_KEYS_PER_BUCKET
    });
    let heavy = heavy_keys
        .into_iter()
        .map(|key| HeavyKey {
            key,
            partition: rng.below(partitions.into()) as u32,
            weight: rng.below(1_000_000),
            split: Vec::new(),
        })
        .collect();
    let a = assignment(AssignmentParts {
        topic: format!("random-{index}"),
        partitions,
        epoch: 1 + rng.below(1_000),
        bucket_hash,
        table,
        heavy,
        params: params(),
        created_at_ms: 1_700_000_000_000 + index,
        predicted_load: vec![1.0 / f64::from(partitions); partitions as usize],
    });
    // Two cases where the topic's partition count differs from the document's: fallback.
    let topic_partitions = match index {
        5 => partitions + 1,
        13 => (partitions / 2).max(1) + u32::from(partitions == 1),
        _ => partitions,
    };
    (seed, a, topic_partitions)
}

/// Number of cases in `random.json`.
pub const RANDOM_CASES: u64 = 20;

/// The leading fields of `random.json`.
pub fn random_leading() -> [(&'static str, String); 2] {
    [
        ("key_generator", json(KEY_GENERATOR)),
        ("key_count", RANDOM_KEY_COUNT.to_string()),
    ]
}

/// Case `index` of `random.json`, as its line (without the separating comma).
pub fn random_case_line(index: u64) -> String {
    let (seed, a, topic_partitions) = random_document(index);
    let document_json = doc_json(&a);
    let parsed = Assignment::from_json(document_json.as_bytes()).expect("round trip");
    let (digest, first_partitions, heavy_routed) =
        random_digest(&parsed, topic_partitions, seed, RANDOM_KEY_COUNT);
    // The heavy keys come from the case's own key stream, so they must be met there.
    let heavy_expected = !a.heavy().is_empty() && a.partitions() == topic_partitions;
    assert_eq!(heavy_routed > 0, heavy_expected, "random case {index}");
    json(&RandomCase {
        seed,
        document_json,
        topic_partitions,
        digest,
        first_partitions,
    })
}

fn random_file() -> String {
    let lines: Vec<String> = (0..RANDOM_CASES).map(random_case_line).collect();
    lines_file(&random_leading(), &lines)
}

// ---------------------------------------------------------------------------------------------
// v2/split.json

/// Picks listed per split key of `v2/split.json`.
pub const SPLIT_PICKS: usize = 1000;

#[derive(Serialize)]
struct SplitCase {
    name: &'static str,
    description: &'static str,
    document_json: String,
    topic_partitions: u32,
    split_keys: Vec<SplitKeyOut>,
    keys: Vec<LookupKey>,
}

#[derive(Serialize)]
struct SplitKeyOut {
    key_b64: String,
    parts: Vec<SplitPartOut>,
    picks: Vec<u32>,
}

#[derive(Serialize)]
struct SplitPartOut {
    partition: u32,
    weight: u32,
}

/// A heavy key to split and its parts as `(partition, weight)`.
type SplitSpec = (Vec<u8>, Vec<(u32, u32)>);

/// `base` with the heavy keys of `split` split over their parts.
fn split_document(base: Assignment, split: &[SplitSpec]) -> Assignment {
    let mut parts = base.into_parts();
    for (key, spread) in split {
        let hk = parts
            .heavy
            .iter_mut()
            .find(|h| &h.key == key)
            .expect("split keys are heavy keys of the base document");
        hk.partition = spread[0].0;
        hk.split = spread
            .iter()
            .map(|&(partition, weight)| dkg_core::assignment::SplitPart { partition, weight })
            .collect();
    }
    assignment(parts)
}

fn split_case(
    name: &'static str,
    description: &'static str,
    a: &Assignment,
    topic_partitions: u32,
    keys: &[Vec<u8>],
) -> SplitCase {
    let document_json = doc_json(a);
    assert!(
        document_json.contains(r#""version":2"#),
        "{name} is version 2"
    );
    // A fresh instance: its counters are at 0.
    let fresh = Assignment::from_json(document_json.as_bytes()).expect("split documents are valid");
    let split_keys = if fresh.partitions() == topic_partitions {
        fresh
            .heavy()
            .iter()
            .filter(|h| h.is_split())
            .map(|h| SplitKeyOut {
                key_b64: b64(&h.key),
                parts: h
                    .split
                    .iter()
                    .map(|s| SplitPartOut {
                        partition: s.partition,
                        weight: s.weight,
                    })
                    .collect(),
                picks: (0..SPLIT_PICKS)
                    .map(|_| place(&fresh, topic_partitions, &h.key).0)
                    .collect(),
            })
            .collect()
    } else {
        Vec::new()
    };
    let mut seen = std::collections::HashSet::new();
    let keys = keys
        .iter()
        .filter(|k| seen.insert(*k))
        .filter(|k| fresh.partitions() != topic_partitions || fresh.split_of(k).is_none())
        .map(|key| {
            let (partition, route) = place(&fresh, topic_partitions, key);
            LookupKey {
                key_b64: b64(key),
                partition,
                route,
            }
        })
        .collect();
    SplitCase {
        name,
        description,
        document_json,
        topic_partitions,
        split_keys,
        keys,
    }
}

fn split_file() -> String {
    let mut cases = Vec::new();

    let heavy = vec![b"hot".to_vec(), b"user-42".to_vec(), b"warm-key".to_vec()];
    let a = split_document(
        document(5, 16, DEFAULT_BUCKET_SEED, &heavy, 11),
        &[(b"hot".to_vec(), vec![(1, 3), (4, 1)])],
    );
    let mut keys = with_misses(&heavy);
    keys.extend(text_keys("user-", 0..24));
    cases.push(split_case(
        "weights_3_1",
        "The spec's example: 5 partitions, \"hot\" split over partitions 1 and 4 with weights 3 \
         and 1 (picks 1, 1, 4, 1, repeated), two whole heavy keys, the near misses of all three \
         (bucket route) and light keys.",
        &a,
        5,
        &keys,
    ));

    let heavy = text_keys("tenant-", 0..6);
    let mut rng = SplitMix64(12);
    let spread = |count: u32, first: u32, rng: &mut SplitMix64| -> Vec<(u32, u32)> {
        (0..count)
            .map(|i| ((first + 3 * i) % 100, 1 + rng.below(60) as u32))
            .collect()
    };
    let splits = vec![
        (heavy[0].clone(), spread(64, 0, &mut rng)),
        (heavy[1].clone(), spread(2, 7, &mut rng)),
        (heavy[2].clone(), vec![(9, 4095), (10, 1)]),
        (heavy[3].clone(), vec![(50, 7), (20, 5), (80, 3), (5, 1)]),
        (heavy[4].clone(), vec![(33, 2), (34, 2), (35, 1)]),
    ];
    let a = split_document(document(100, 400, DEFAULT_BUCKET_SEED, &heavy, 12), &splits);
    let mut keys = with_misses(&heavy);
    keys.extend(text_keys("tenant-", 100..140));
    cases.push(split_case(
        "many_parts",
        "100 partitions, 6 heavy keys of which 5 are split: 64 parts (the most) with pseudo-random \
         weights 1..=60 on partitions 0, 3, 6, ... (mod 100, so not in ascending order), 2 parts, weights 4095 and 1 (the largest \
         weight sum, 4096), weights 7, 5, 3, 1 over partitions 50, 20, 80, 5, and a tie (2, 2, 1); \
         the sixth key whole; near misses and light keys.",
        &a,
        100,
        &keys,
    ));

    let crowded = same_bucket(b"", 4, DEFAULT_BUCKET_SEED, 3);
    let long = pattern_key(100);
    let mut heavy = vec![b"".to_vec(), long.clone(), pattern_key(40)];
    heavy.extend(crowded.iter().cloned());
    let splits = vec![
        (b"".to_vec(), vec![(2, 1), (0, 1)]),
        (long.clone(), vec![(3, 2), (1, 1)]),
        (pattern_key(40), vec![(0, 1), (1, 1), (2, 1), (3, 1)]),
        (crowded[0].clone(), vec![(1, 5), (2, 2)]),
    ];
    let a = split_document(document(4, 4, DEFAULT_BUCKET_SEED, &heavy, 13), &splits);
    cases.push(split_case(
        "key_classes_and_shared_buckets",
        "4 partitions, 4 buckets: split keys of every lookup path: the empty key, a 100-byte key, \
         a 40-byte key, and a key sharing its bucket with 3 other heavy keys (2 of them whole, \
         the empty key split); near misses route by bucket.",
        &a,
        4,
        &with_misses(&heavy),
    ));

    let heavy = vec![b"hot".to_vec(), b"cold".to_vec()];
    let a = split_document(
        document(6, 12, DEFAULT_BUCKET_SEED, &heavy, 14),
        &[(b"hot".to_vec(), vec![(0, 1), (5, 1)])],
    );
    let mut keys = heavy.clone();
    keys.extend(text_keys("k", 0..10));
    cases.push(split_case(
        "partition_count_mismatch",
        "A split document for 6 partitions on a topic that has 8: every key, the split one \
         included, takes Kafka's placement (no split_keys listed).",
        &a,
        8,
        &keys,
    ));
    cases_file(&[("picks_per_split_key", SPLIT_PICKS.to_string())], &cases)
}

// ---------------------------------------------------------------------------------------------
// v2/reject.json

/// The valid version 2 document every `v2/reject.json` case edits: `BASE_DOCUMENT` with version
/// 2 and its heavy key split.
pub const V2_BASE_DOCUMENT: &str = concat!(
    r#"{"format":"dkg.assignment","version":2,"topic":"orders","partitions":3,"epoch":7,"#,
    r#""bucket_hash":{"function":"murmur2","seed":625341585},"buckets":4,"table":[0,1,2,0],"#,
    r#""heavy":[{"key_b64":"aG90","split":[{"partition":1,"weight":3},{"partition":2,"weight":1}],"weight":1200}],"#,
    r#""params":{"theta":0.01,"epsilon":0.005,"mu":4.0,"window_records":100000},"#,
    r#""created_at_ms":1700000000000,"predicted_load":[0.5,0.25,0.25]}"#
);

/// `V2_BASE_DOCUMENT` with `from` (exactly once) replaced by `to`.
fn edit_v2(from: &str, to: &str) -> Vec<u8> {
    assert_eq!(
        V2_BASE_DOCUMENT.matches(from).count(),
        1,
        "{from:?} must occur once in the version 2 base document"
    );
    V2_BASE_DOCUMENT.replacen(from, to, 1).into_bytes()
}

/// The base with `n` split keys (`split-<i>`, parts 1 and 2 of weight 2048 each) over 1,024 buckets.
fn many_split_keys(n: usize) -> Vec<u8> {
    let heavy = (0..n)
        .map(|i| {
            format!(
                r#"{{"key_b64":"{}","split":[{{"partition":1,"weight":2048}},{{"partition":2,"weight":2048}}],"weight":1000}}"#,
                b64(format!("split-{i}").as_bytes())
            )
        })
        .collect::<Vec<_>>()
        .join(",");
    let table = (0..1024)
        .map(|b| (b % 3).to_string())
        .collect::<Vec<_>>()
        .join(",");
    let doc = String::from_utf8(edit_v2(
        r#"[{"key_b64":"aG90","split":[{"partition":1,"weight":3},{"partition":2,"weight":1}],"weight":1200}]"#,
        &format!("[{heavy}]"),
    ))
    .expect("UTF-8");
    doc.replacen(
        r#""buckets":4,"table":[0,1,2,0]"#,
        &format!(r#""buckets":1024,"table":[{table}]"#),
        1,
    )
    .into_bytes()
}

/// The base's split list replaced by `parts` (JSON text of the array's elements).
fn with_split_parts(parts: &str) -> Vec<u8> {
    edit_v2(
        r#"[{"partition":1,"weight":3},{"partition":2,"weight":1}]"#,
        &format!("[{parts}]"),
    )
}

#[allow(clippy::too_many_lines)]
fn v2_reject_cases() -> Vec<Reject> {
    const M: &str = "malformed_json";
    const I: &str = "invalid";
    const R: &str = "out_of_range";
    const V: &str = "unsupported_version";
    const SPLIT: &str = r#""split":[{"partition":1,"weight":3},{"partition":2,"weight":1}]"#;
    let parts = |n: u32| -> String {
        (0..n)
            .map(|i| format!(r#"{{"partition":{i},"weight":1}}"#))
            .collect::<Vec<_>>()
            .join(",")
    };
    let wide = |n: u32, partitions: u32| -> Vec<u8> {
        let doc = String::from_utf8(with_split_parts(&parts(n))).expect("UTF-8");
        let load = vec!["0.0"; partitions as usize].join(",");
        doc.replace(
            r#""partitions":3"#,
            &format!(r#""partitions":{partitions}"#),
        )
        .replace("[0.5,0.25,0.25]", &format!("[{load}]"))
        .into_bytes()
    };
    let long_key = b64(&vec![b'k'; MAX_KEY_BYTES + 1]);
    // The base with its table [0,1,2,0] replaced by `members`.
    let compact = |members: &str| edit_v2(r#""table":[0,1,2,0]"#, members);
    vec![
        reject(
            "both_partition_and_split",
            M,
            "A heavy entry with partition and split: exactly one is allowed.",
            edit_v2(SPLIT, &format!(r#""partition":1,{SPLIT}"#)),
        ),
        reject(
            "neither_partition_nor_split",
            M,
            "A heavy entry with neither partition nor split.",
            edit_v2(&format!("{SPLIT},"), ""),
        ),
        reject(
            "split_null",
            M,
            "split is null (null is no value: not the same as absent).",
            edit_v2(SPLIT, r#""partition":1,"split":null"#),
        ),
        reject(
            "partition_null_with_split",
            M,
            "partition null next to a split.",
            edit_v2(SPLIT, &format!(r#""partition":null,{SPLIT}"#)),
        ),
        reject(
            "split_object",
            M,
            "split is an object, not an array.",
            edit_v2(SPLIT, r#""split":{"partition":1,"weight":3}"#),
        ),
        reject(
            "split_part_array",
            M,
            "A split part written as an array [partition, weight].",
            with_split_parts(r#"[1,3],{"partition":2,"weight":1}"#),
        ),
        reject(
            "split_part_unknown_member",
            M,
            "A split part with an unknown member.",
            with_split_parts(
                r#"{"partition":1,"weight":3,"share":0.75},{"partition":2,"weight":1}"#,
            ),
        ),
        reject(
            "split_part_missing_weight",
            M,
            "A split part without weight.",
            with_split_parts(r#"{"partition":1},{"partition":2,"weight":1}"#),
        ),
        reject(
            "split_part_duplicate_member",
            M,
            "A split part with weight twice.",
            with_split_parts(r#"{"partition":1,"weight":3,"weight":3},{"partition":2,"weight":1}"#),
        ),
        reject(
            "split_part_weight_overflow",
            M,
            "A part weight of 2^32 (weights are u32).",
            with_split_parts(r#"{"partition":1,"weight":4294967296},{"partition":2,"weight":1}"#),
        ),
        reject(
            "split_part_weight_negative",
            M,
            "A part weight of -1.",
            with_split_parts(r#"{"partition":1,"weight":-1},{"partition":2,"weight":1}"#),
        ),
        reject(
            "split_in_version_1",
            M,
            "A split heavy entry in a version 1 document: split is an unknown member there.",
            edit_v2(r#""version":2"#, r#""version":1"#),
        ),
        reject(
            "unknown_member_v2",
            M,
            "Version 2 is as strict as version 1: an unknown top-level member.",
            edit_v2(r#""epoch":7,"#, r#""epoch":7,"salt":1,"#),
        ),
        reject(
            "split_no_parts",
            I,
            "An empty split list.",
            with_split_parts(""),
        ),
        reject(
            "split_one_part",
            I,
            "A split key with one part (2 to 64).",
            with_split_parts(r#"{"partition":1,"weight":3}"#),
        ),
        reject(
            "split_65_parts",
            I,
            "A split key with 65 parts over 65 partitions (2 to 64).",
            wide(65, 65),
        ),
        reject(
            "split_duplicate_partition",
            I,
            "Two parts on partition 1.",
            with_split_parts(r#"{"partition":1,"weight":3},{"partition":1,"weight":1}"#),
        ),
        reject(
            "split_weight_zero",
            I,
            "A part of weight 0 (weights are at least 1).",
            with_split_parts(r#"{"partition":1,"weight":0},{"partition":2,"weight":1}"#),
        ),
        reject(
            "split_weight_sum_over_limit",
            I,
            "Weights 4096 and 1: the sum 4097 is over 4096 (a limit inside the document: invalid in version 2).",
            with_split_parts(r#"{"partition":1,"weight":4096},{"partition":2,"weight":1}"#),
        ),
        reject(
            "split_weight_total_over_limit",
            I,
            "257 split keys of weights 2048 + 2048: 1,052,672 in all, over the document's 1,048,576 (2^20).",
            many_split_keys(257),
        ),
        reject(
            "split_part_out_of_range",
            R,
            "A part on partition 3 with 3 partitions.",
            with_split_parts(r#"{"partition":1,"weight":3},{"partition":3,"weight":1}"#),
        ),
        reject(
            "split_first_part_out_of_range",
            R,
            "The first part on partition 3.",
            with_split_parts(r#"{"partition":3,"weight":3},{"partition":2,"weight":1}"#),
        ),
        reject(
            "split_out_of_range_before_predicted_load",
            R,
            "A part out of range and predicted_load too short: the part is checked first (step 14 before 16).",
            {
                let d = String::from_utf8(with_split_parts(
                    r#"{"partition":1,"weight":3},{"partition":3,"weight":1}"#,
                ))
                .expect("UTF-8");
                d.replace("[0.5,0.25,0.25]", "[0.5,0.5]").into_bytes()
            },
        ),
        reject(
            "split_count_before_out_of_range",
            I,
            "One part, out of range: the part count is checked before the parts.",
            with_split_parts(r#"{"partition":3,"weight":3}"#),
        ),
        reject(
            "split_duplicate_before_out_of_range",
            I,
            "Parts 1, 1, 3 (3 out of range): parts are checked in order, the duplicate comes first.",
            with_split_parts(
                r#"{"partition":1,"weight":3},{"partition":1,"weight":1},{"partition":3,"weight":1}"#,
            ),
        ),
        reject(
            "partitions_over_max_v2",
            I,
            "partitions 1000001 in a version 2 document: invalid (version 1 reports oversize, gap G2).",
            edit_v2(r#""partitions":3"#, r#""partitions":1000001"#),
        ),
        reject(
            "epoch_2_pow_53_v2",
            R,
            "epoch 2^53 in a version 2 document: out_of_range, as in version 1.",
            edit_v2(r#""epoch":7"#, r#""epoch":9007199254740992"#),
        ),
        reject(
            "epoch_out_of_range_after_partitions_over_max_v2",
            I,
            "partitions 1000001 and epoch 2^53 in a version 2 document: the partition limit (step 9, invalid) first.",
            edit_v2(
                r#""partitions":3,"epoch":7"#,
                r#""partitions":1000001,"epoch":9007199254740992"#,
            ),
        ),
        reject(
            "heavy_key_too_long_v2",
            I,
            "A heavy key of 65537 bytes in a version 2 document: invalid (gap G2).",
            edit_v2(r#""key_b64":"aG90""#, &format!(r#""key_b64":"{long_key}""#)),
        ),
        reject(
            "version_3",
            V,
            "Version 3: not read by version 2 readers.",
            edit_v2(r#""version":2"#, r#""version":3"#),
        ),
        reject(
            "array_v2",
            M,
            "[\"dkg.assignment\",2]: the document, also in the pre-read, must be an object.",
            br#"["dkg.assignment",2]"#.to_vec(),
        ),
        reject(
            "compact_width_not_smallest",
            I,
            "table_width 2 for 3 partitions (writers and readers: the fewest bytes that hold partitions - 1, here 1).",
            compact(r#""table_b64":"AAABAAIAAAA=","table_width":2"#),
        ),
        reject(
            "compact_width_3",
            I,
            "table_width 3.",
            compact(r#""table_b64":"AAAAAQAAAgAAAAAA","table_width":3"#),
        ),
        reject(
            "compact_width_0",
            I,
            "table_width 0.",
            compact(r#""table_b64":"","table_width":0"#),
        ),
        reject(
            "compact_too_short",
            I,
            "table_b64 of 3 bytes for 4 buckets of width 1.",
            compact(r#""table_b64":"AAEC","table_width":1"#),
        ),
        reject(
            "compact_too_long",
            I,
            "table_b64 of 5 bytes for 4 buckets of width 1.",
            compact(r#""table_b64":"AAECAAA=","table_width":1"#),
        ),
        reject(
            "compact_not_canonical_base64",
            I,
            "table_b64 without its padding.",
            compact(r#""table_b64":"AAECAA","table_width":1"#),
        ),
        reject(
            "compact_entry_out_of_range",
            R,
            "A compact entry 3 with 3 partitions.",
            compact(r#""table_b64":"AAEDAA==","table_width":1"#),
        ),
        reject(
            "compact_and_table",
            M,
            "Both table and table_b64.",
            compact(r#""table":[0,1,2,0],"table_b64":"AAECAA==","table_width":1"#),
        ),
        reject(
            "compact_width_without_b64",
            M,
            "table_width without table_b64 (and no table).",
            compact(r#""table_width":1"#),
        ),
        reject(
            "compact_b64_without_width",
            M,
            "table_b64 without table_width.",
            compact(r#""table_b64":"AAECAA==""#),
        ),
        reject(
            "compact_width_null",
            M,
            "table_width null.",
            compact(r#""table_b64":"AAECAA==","table_width":null"#),
        ),
        reject(
            "compact_in_version_1",
            M,
            "A compact table in a version 1 document: unknown members there.",
            {
                let d = String::from_utf8(compact(r#""table_b64":"AAECAA==","table_width":1"#))
                    .expect("UTF-8");
                d.replacen(r#""version":2"#, r#""version":1"#, 1)
                    .replacen(
                        r#""split":[{"partition":1,"weight":3},{"partition":2,"weight":1}]"#,
                        r#""partition":1"#,
                        1,
                    )
                    .into_bytes()
            },
        ),
    ]
}

/// `cases` as file entries, each checked first: names unique, and the Rust decoder gives exactly the
/// expected label (so the vectors cannot say what the reference implementation does not do).
fn checked_cases(cases: Vec<Reject>, what: &str) -> Vec<RejectCase> {
    let mut names = std::collections::HashSet::new();
    cases
        .into_iter()
        .map(|r| {
            assert!(names.insert(r.name), "duplicate case name {}", r.name);
            let got = reject_label(&r.document);
            assert_eq!(got, r.reason, "{what} {}", r.name);
            RejectCase {
                name: r.name.to_owned(),
                description: r.description.to_owned(),
                document_b64: Some(b64(&r.document)),
                reason: r.reason,
                generate: None,
            }
        })
        .collect()
}

fn v2_reject_file() -> String {
    let base = Assignment::from_json(V2_BASE_DOCUMENT.as_bytes())
        .expect("the version 2 base document is valid");
    assert_eq!(
        base.to_json(),
        V2_BASE_DOCUMENT.as_bytes(),
        "the version 2 base document is canonical"
    );
    let cases = checked_cases(v2_reject_cases(), "v2 reject case");
    cases_file(&[("base_document_json", json(V2_BASE_DOCUMENT))], &cases)
}

// ---------------------------------------------------------------------------------------------
// v2/compact.json

#[derive(Serialize)]
struct CompactCase {
    name: &'static str,
    description: &'static str,
    document_json: String,
    twin_document_json: Option<String>,
    topic_partitions: u32,
    keys: Vec<LookupKey>,
}

/// The compact table members of spec 4.6 for `table`, transcribed here (not the crate's
/// encoder): each entry little-endian in the fewest of 1, 2, 4 bytes that hold `partitions - 1`.
fn compact_members(table: &[u32], partitions: u32) -> String {
    let width = match partitions - 1 {
        0..=0xff => 1,
        0x100..=0xffff => 2,
        _ => 4,
    };
    let bytes: Vec<u8> = table
        .iter()
        .flat_map(|p| p.to_le_bytes().into_iter().take(width))
        .collect();
    format!(r#""table_b64":"{}","table_width":{width}"#, b64(&bytes))
}

/// `a`'s document (version 1, JSON table) with its table written compactly, as version 2.
fn compact_twin_of(a: &Assignment) -> String {
    let text = doc_json(a);
    assert!(
        text.contains(r#""version":1"#),
        "the twin is a version 1 document"
    );
    let table = format!(r#""table":{}"#, json(a.table()));
    text.replacen(r#""version":1"#, r#""version":2"#, 1)
        .replacen(&table, &compact_members(a.table(), a.partitions()), 1)
}

fn compact_case(
    name: &'static str,
    description: &'static str,
    document_json: String,
    twin_document_json: Option<String>,
    keys: &[Vec<u8>],
) -> CompactCase {
    let a = Assignment::from_json(document_json.as_bytes()).expect("compact documents are valid");
    if let Some(twin) = &twin_document_json {
        let twin = Assignment::from_json(twin.as_bytes()).expect("twins are valid");
        assert!(twin == a, "{name}: the twin decodes to the same assignment");
    }
    let partitions = a.partitions();
    let keys = keys
        .iter()
        .map(|key| {
            let (partition, route) = place(&a, partitions, key);
            LookupKey {
                key_b64: b64(key),
                partition,
                route,
            }
        })
        .collect();
    CompactCase {
        name,
        description,
        document_json,
        twin_document_json,
        topic_partitions: partitions,
        keys,
    }
}

fn compact_file() -> String {
    let mut cases = Vec::new();
    let heavy = vec![b"hot".to_vec(), b"user-42".to_vec()];
    let mut keys = with_misses(&heavy);
    keys.extend(text_keys("user-", 0..30));

    let a = document(3, 8, DEFAULT_BUCKET_SEED, &heavy, 21);
    cases.push(compact_case(
        "width_1",
        "3 partitions, 8 buckets: table_width 1; twin_document_json is the same document with a \
         JSON table (version 1). A reader MUST accept a compact table of any size (writers use it \
         only above 256 KiB of JSON table).",
        compact_twin_of(&a),
        Some(doc_json(&a)),
        &keys,
    ));
    let a = document(300, 1_200, DEFAULT_BUCKET_SEED, &heavy, 22);
    cases.push(compact_case(
        "width_2",
        "300 partitions, 1200 buckets: table_width 2 (entries up to 299, little-endian).",
        compact_twin_of(&a),
        Some(doc_json(&a)),
        &keys,
    ));
    let a = document(65_537, 64, DEFAULT_BUCKET_SEED, &heavy, 23);
    let compact = compact_twin_of(&a);
    // predicted_load's 65537 shares as the integer 0 (legal for a number) keep the file small.
    let zero_load = format!("[{}]", vec!["0"; 65_537].join(","));
    let at = compact
        .find(r#""predicted_load":"#)
        .expect("predicted_load")
        + 17;
    let compact = format!("{}{zero_load}}}", &compact[..at]);
    cases.push(compact_case(
        "width_4",
        "65537 partitions (65536 is the largest partition number): table_width 4; predicted_load \
         written as 65537 integers 0. No twin stored.",
        compact,
        None,
        &keys,
    ));
    let partitions = 200;
    let mut rng = SplitMix64(24);
    let table: Vec<u32> = (0..80_000)
        .map(|_| rng.below(partitions.into()) as u32)
        .collect();
    let writer = assignment(AssignmentParts {
        table,
        ..document(partitions, 1, DEFAULT_BUCKET_SEED, &heavy, 24).into_parts()
    });
    let text = String::from_utf8(writer.to_json_compact()).expect("documents are UTF-8");
    assert!(
        text.contains(r#""version":2"#) && text.contains(r#""table_width":1"#),
        "the version 2 writer makes a table of 80000 entries compact"
    );
    cases.push(compact_case(
        "writer_output",
        "The reference writer's document (with version 2 features on) for 200 partitions and \
         80000 buckets: its JSON table would be over 256 KiB, so it is written as table_b64 \
         (width 1) and the document is version 2. No twin stored (decode table_b64 to get it).",
        text,
        None,
        &keys,
    ));
    cases_file(&[], &cases)
}

// ---------------------------------------------------------------------------------------------
// v2/control.json

/// Generation ids of `v2/control.json`.
const G1: &str = "0123456789abcdef0123456789abcdef";
const G2: &str = "fedcba9876543210fedcba9876543210";

/// `control_doc` of "orders" at `epoch`, naming `generation` if given (then version 2).
fn gen_doc(epoch: u64, generation: Option<&str>) -> String {
    let a = Assignment::from_json(control_doc("orders", epoch, &[0, 1, 2, 0]).as_bytes())
        .expect("valid");
    match generation {
        Some(g) => doc_json(&a.with_generation(g).expect("a valid generation")),
        None => doc_json(&a),
    }
}

fn retraction(epoch: u64, generation: Option<&str>) -> String {
    let r = dkg_core::assignment::Retraction {
        topic: "orders".to_owned(),
        epoch,
        generation: generation.map(str::to_owned),
        created_at_ms: 1_700_000_000_000,
    };
    String::from_utf8(r.to_json()).expect("UTF-8")
}

fn generation(g: &str) -> Record {
    let value = dkg_core::assignment::generation_record(g).expect("a valid generation");
    put(
        dkg_core::assignment::GENERATION_KEY,
        String::from_utf8(value).expect("UTF-8"),
    )
}

#[allow(clippy::too_many_lines)]
fn v2_control_file() -> String {
    let cases = vec![
        control_case(
            "retraction_keeps_the_floor",
            "Epoch 5, then a retraction document at 7: producers return to Kafka's placement but the \
             floor stays 7: epoch 6 is stale, a different document at 7 a conflict, the same \
             retraction again unchanged; epoch 8 is accepted.",
            vec![
                put("orders", gen_doc(5, None)),
                put("orders", retraction(7, None)),
                put("orders", gen_doc(6, None)),
                put("orders", gen_doc(7, None)),
                put("orders", retraction(7, None)),
                put("orders", gen_doc(8, None)),
            ],
            &[
                ("accepted", Some(5)),
                ("retracted", None),
                ("rejected:stale_epoch", None),
                ("rejected:epoch_conflict", None),
                ("unchanged", None),
                ("accepted", Some(8)),
            ],
        ),
        control_case(
            "retraction_without_assignment",
            "A retraction at 3 for a topic without assignment sets the floor (unchanged routing); a \
             later retraction at 2 is stale, 4 raises the floor, epoch 4 is a conflict, 5 accepted.",
            vec![
                put("orders", retraction(3, None)),
                put("orders", retraction(2, None)),
                put("orders", retraction(4, None)),
                put("orders", gen_doc(4, None)),
                put("orders", gen_doc(5, None)),
            ],
            &[
                ("unchanged", None),
                ("rejected:stale_epoch", None),
                ("unchanged", None),
                ("rejected:epoch_conflict", None),
                ("accepted", Some(5)),
            ],
        ),
        control_case(
            "retraction_at_or_below_the_current_epoch",
            "A retraction at the current epoch 5 is a conflict (a different document at that epoch), \
             at 4 stale; the assignment stays.",
            vec![
                put("orders", gen_doc(5, None)),
                put("orders", retraction(5, None)),
                put("orders", retraction(4, None)),
            ],
            &[
                ("accepted", Some(5)),
                ("rejected:epoch_conflict", Some(5)),
                ("rejected:stale_epoch", Some(5)),
            ],
        ),
        control_case(
            "retraction_epoch_limit",
            "A retraction at 2^53 or 18446744073709551615 is rejected (out_of_range) and changes \
             nothing; one at 2^53 - 1 (the largest) sets the floor; a retraction with an illegal \
             topic and epoch 2^53 is invalid (the topic is checked first).",
            vec![
                put("orders", gen_doc(5, None)),
                put("orders", retraction(MAX_EPOCH + 1, None)),
                put("orders", retraction(u64::MAX, None)),
                put(
                    "orders",
                    retraction(MAX_EPOCH + 1, None).replacen(
                        r#""topic":"orders""#,
                        r#""topic":"..""#,
                        1,
                    ),
                ),
                put("orders", retraction(MAX_EPOCH, None)),
                put("orders", gen_doc(6, None)),
            ],
            &[
                ("accepted", Some(5)),
                ("rejected:out_of_range", Some(5)),
                ("rejected:out_of_range", Some(5)),
                ("rejected:invalid", Some(5)),
                ("retracted", None),
                ("rejected:stale_epoch", None),
            ],
        ),
        control_case(
            "tombstone_clears_a_retraction_floor",
            "A tombstone after a retraction document clears its floor too (version 1 meaning): epoch \
             1 is then accepted.",
            vec![
                put("orders", gen_doc(5, None)),
                put("orders", retraction(6, None)),
                tombstone("orders"),
                put("orders", gen_doc(1, None)),
            ],
            &[
                ("accepted", Some(5)),
                ("retracted", None),
                ("unchanged", None),
                ("accepted", Some(1)),
            ],
        ),
        control_case(
            "generation_first_record",
            "The generation record (key @generation) is adopted as the first one; documents naming it \
             and documents naming none are accepted; a tombstone on @generation changes nothing.",
            vec![
                generation(G1),
                put("orders", gen_doc(1, Some(G1))),
                put("orders", gen_doc(2, None)),
                put("orders", retraction(3, Some(G1))),
                tombstone("@generation"),
                put("orders", gen_doc(4, Some(G1))),
            ],
            &[
                ("unchanged", None),
                ("accepted", Some(1)),
                ("accepted", Some(2)),
                ("retracted", None),
                ("unchanged", None),
                ("accepted", Some(4)),
            ],
        ),
        control_case(
            "generation_change_resets",
            "A generation record with a new id (the control topic was recreated, the reader is at its \
             beginning): every topic's state is dropped (reset), so a lower epoch of the new \
             generation is accepted; the same generation record again changes nothing \
             (epoch_after is null for the @generation key: it names no topic).",
            vec![
                generation(G1),
                put("orders", gen_doc(5, Some(G1))),
                generation(G2),
                put("orders", gen_doc(1, Some(G2))),
                generation(G2),
            ],
            &[
                ("unchanged", None),
                ("accepted", Some(5)),
                ("reset", None),
                ("accepted", Some(1)),
                ("unchanged", None),
            ],
        ),
        control_case(
            "unknown_generation_asks_for_one_reread",
            "A document of a generation not in force: the state is dropped and the driver must read \
             from the beginning (reread). The records after it are that re-read: G1 again, its \
             document, then the same G2 document, now rejected (one re-read per generation).",
            vec![
                generation(G1),
                put("orders", gen_doc(5, Some(G1))),
                put("orders", gen_doc(6, Some(G2))),
                generation(G1),
                put("orders", gen_doc(5, Some(G1))),
                put("orders", gen_doc(6, Some(G2))),
                put("orders", retraction(7, Some(G2))),
            ],
            &[
                ("unchanged", None),
                ("accepted", Some(5)),
                ("reread", None),
                ("unchanged", None),
                ("accepted", Some(5)),
                ("rejected:generation_mismatch", Some(5)),
                ("rejected:generation_mismatch", Some(5)),
            ],
        ),
        control_case(
            "generation_records_checked",
            "A generation record under a topic key is invalid, one with an id not 32 lowercase hex \
             digits invalid, one with an extra member malformed; an assignment under @generation \
             is a topic mismatch; a retraction document in version 1, or of another topic, rejected.",
            vec![
                (
                    Some(b"orders".to_vec()),
                    Some(
                        String::from_utf8(
                            dkg_core::assignment::generation_record(G1).expect("valid"),
                        )
                        .expect("UTF-8"),
                    ),
                ),
                put(
                    "@generation",
                    format!(
                        r#"{{"format":"dkg.assignment","version":2,"kind":"generation","generation":"{}"}}"#,
                        G1.to_uppercase()
                    ),
                ),
                put(
                    "@generation",
                    format!(
                        r#"{{"format":"dkg.assignment","version":2,"kind":"generation","generation":"{G1}","epoch":1}}"#
                    ),
                ),
                put("@generation", gen_doc(1, None)),
                put(
                    "orders",
                    retraction(3, None).replacen(r#""version":2"#, r#""version":1"#, 1),
                ),
                put("payments", retraction(3, None)),
                put(
                    "orders",
                    retraction(3, None).replacen(
                        r#""kind":"retraction""#,
                        r#""kind":"chunked""#,
                        1,
                    ),
                ),
            ],
            &[
                ("rejected:invalid", None),
                ("rejected:invalid", None),
                ("rejected:malformed_json", None),
                ("rejected:topic_mismatch", None),
                ("rejected:malformed_json", None),
                ("rejected:topic_mismatch", None),
                ("rejected:malformed_json", None),
            ],
        ),
    ];
    cases_file(&[], &cases)
}
