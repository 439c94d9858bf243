//! `v2/split.json`: split keys (format version 2) and the picks of their smooth weighted round robin.

use super::*;

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
            .map(|&(partition, weight)| dkg_kafka_core::assignment::SplitPart { partition, weight })
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

pub(super) fn split_file() -> String {
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
