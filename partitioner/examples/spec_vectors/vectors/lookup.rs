//! `lookup.json`: documents and, per key, the partition and route the lookup gives (heavy keys, near misses, bucket collisions, every key length class).

use super::*;

#[derive(Serialize)]
struct LookupCase {
    name: &'static str,
    description: &'static str,
    document_json: String,
    topic_partitions: u32,
    keys: Vec<LookupKey>,
}

#[derive(Serialize)]
pub(super) struct LookupKey {
    pub(super) key_b64: String,
    pub(super) partition: u32,
    pub(super) route: &'static str,
}

pub(super) fn params() -> Params {
    Params {
        theta: 0.01,
        epsilon: 0.005,
        mu: 4.0,
        window_records: 100_000,
    }
}

/// A valid document for "orders". The table is pseudo-random (from `table_seed`); each heavy key
/// goes to the partition after its bucket's, so a heavy key routed by bucket gives a wrong answer.
pub(super) fn document(
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

pub(super) fn assignment(parts: AssignmentParts) -> Assignment {
    Assignment::new(parts).expect("the generator builds valid documents")
}

pub(super) fn text_keys(prefix: &str, range: std::ops::Range<u32>) -> Vec<Vec<u8>> {
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
pub(super) fn pattern_key(len: usize) -> Vec<u8> {
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
pub(super) fn same_bucket(key: &[u8], buckets: u32, seed: u32, count: usize) -> Vec<Vec<u8>> {
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

pub(super) fn doc_json(a: &Assignment) -> String {
    String::from_utf8(a.to_json()).expect("documents are UTF-8")
}

pub(super) fn with_misses(heavy: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let mut keys = heavy.to_vec();
    for key in heavy {
        keys.extend(near_misses(key));
    }
    keys
}

pub(super) fn lookup_file() -> String {
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
