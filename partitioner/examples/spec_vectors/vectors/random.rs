//! `random.json`: digests of a million lookups of generated keys per random document.

use super::*;

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

pub(super) fn random_file() -> String {
    let lines: Vec<String> = (0..RANDOM_CASES).map(random_case_line).collect();
    lines_file(&random_leading(), &lines)
}
