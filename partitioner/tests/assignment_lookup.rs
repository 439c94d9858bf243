//! The O(1) lookup: heavy keys by exact bytes, everything else through the bucket table, always a
//! valid partition.

use std::collections::HashMap;

use dkg_kafka::Assignment;
use dkg_kafka_core::{
    BucketHash, DEFAULT_BUCKET_SEED, HeavyKey, KAFKA_MURMUR2_SEED, Route, kafka_partition,
    murmur2_seeded, to_positive,
};
use dkg_testkit::fixtures::{heavy, parts, sample, within_bucket_bound};
use proptest::prelude::*;

/// With Kafka's seed and an identity table of `k` buckets, the bucket route must reproduce Kafka's
/// default partitioner exactly. The expected partitions are librdkafka's own
/// (`tests/0048-partitioner.c`, `murmur2` partitioner: `value % part_cnt`), so this pins the bucket
/// route to an external reference, not to our own hash.
#[test]
fn bucket_route_with_kafka_seed_and_identity_table_is_kafka_placement() {
    let cases: &[(&[u8], u32)] = &[
        (b"", 0x106e_08d9),
        (b"23456", 0x058d_780f),
        (
            b"this is another string with more length to it perhaps",
            0x4f77_03da,
        ),
        (b"hejsan", 0x5ec1_9395),
    ];
    for k in [7_u32, 17] {
        let mut p = parts(k, (0..k).collect(), vec![]);
        p.bucket_hash = BucketHash::Murmur2 {
            seed: KAFKA_MURMUR2_SEED,
        };
        let a = Assignment::new(p).expect("valid");
        for &(key, positive) in cases {
            assert_eq!(a.route(key), (positive % k, Route::Bucket), "{key:?} k={k}");
            assert_eq!(a.bucket(key), positive % k);
            assert_eq!(a.partition_for(key), kafka_partition(key, k));
        }
    }
}

#[test]
fn heavy_keys_override_their_bucket() {
    // Identity table over 8 partitions: a bucket-routed key lands on its bucket number.
    let keys: [&[u8]; 4] = [b"hot", b"", b"\x00\xff", b"user-42"];
    let bucket_hash = BucketHash::default();
    // Pin each heavy key to the partition after its bucket's, so the override is visible.
    let heavy_keys: Vec<HeavyKey> = keys
        .iter()
        .map(|k| heavy(k, (bucket_hash.bucket(k, 8) + 1) % 8, 10))
        .collect();
    let a = Assignment::new(parts(8, (0..8).collect(), heavy_keys.clone())).expect("valid");

    struct Case {
        key: &'static [u8],
        want: (u32, Route),
    }
    let mut cases: Vec<Case> = heavy_keys
        .iter()
        .zip(keys)
        .map(|(h, key)| Case {
            key,
            want: (h.partition, Route::Heavy),
        })
        .collect();
    // Near misses of heavy keys (prefix, suffix, case) are not heavy.
    for key in [
        &b"ho"[..],
        b"hott",
        b"HOT",
        b"\x00",
        b"\x00\xff\x00",
        b"user-4",
    ] {
        cases.push(Case {
            key,
            want: (bucket_hash.bucket(key, 8), Route::Bucket),
        });
    }
    for c in &cases {
        assert_eq!(a.route(c.key), c.want, "key {:?}", c.key);
        assert_eq!(a.partition_for(c.key), c.want.0);
        assert_eq!(
            a.heavy_partition(c.key),
            (c.want.1 == Route::Heavy).then_some(c.want.0)
        );
    }
}

#[test]
fn sample_routes_follow_the_table() {
    let a = Assignment::new(sample()).expect("valid");
    for i in 0..1000_u32 {
        let key = format!("key-{i}");
        let (p, route) = a.route(key.as_bytes());
        assert_eq!(route, Route::Bucket);
        let b = BucketHash::default().bucket(key.as_bytes(), 8);
        assert_eq!(p, a.table()[b as usize]);
    }
    assert_eq!(a.route(b""), (2, Route::Heavy));
    assert_eq!(a.route(b"hot"), (1, Route::Heavy));
}

/// Two short keys with the same 32-bit bucket hash (found by a birthday search, ~2^16 tries).
fn colliding_pair(seed: u32) -> (Vec<u8>, Vec<u8>) {
    let mut seen: HashMap<u32, Vec<u8>> = HashMap::new();
    for i in 0_u32.. {
        let key = format!("k{i}").into_bytes();
        let h = murmur2_seeded(&key, seed);
        if let Some(other) = seen.insert(h, key.clone()) {
            return (other, key);
        }
    }
    unreachable!("a 32-bit hash collides long before 2^32 keys")
}

#[test]
fn keys_colliding_in_the_hash_are_told_apart_by_their_bytes() {
    let (a_key, b_key) = colliding_pair(DEFAULT_BUCKET_SEED);
    assert_ne!(a_key, b_key);
    let h = murmur2_seeded(&a_key, DEFAULT_BUCKET_SEED);
    assert_eq!(h, murmur2_seeded(&b_key, DEFAULT_BUCKET_SEED));
    let buckets = 5_u32;
    let bucket = to_positive(h) % buckets;
    // Both keys share a bucket; its partition is 0, and the heavy ones go elsewhere.
    let mut table = vec![1; buckets as usize];
    table[bucket as usize] = 0;

    // Only the first is heavy: the second must still take the bucket route.
    let a = Assignment::new(parts(3, table.clone(), vec![heavy(&a_key, 2, 9)])).expect("valid");
    assert_eq!(a.route(&a_key), (2, Route::Heavy));
    assert_eq!(a.route(&b_key), (0, Route::Bucket));

    // Only the second is heavy (so the probe passes an entry with the same hash first or not).
    let a = Assignment::new(parts(3, table.clone(), vec![heavy(&b_key, 1, 9)])).expect("valid");
    assert_eq!(a.route(&a_key), (0, Route::Bucket));
    assert_eq!(a.route(&b_key), (1, Route::Heavy));

    // Both heavy, on different partitions, in both orders.
    for heavy_keys in [
        vec![heavy(&a_key, 1, 9), heavy(&b_key, 2, 9)],
        vec![heavy(&b_key, 2, 9), heavy(&a_key, 1, 9)],
    ] {
        let a = Assignment::new(parts(3, table.clone(), heavy_keys)).expect("valid");
        assert_eq!(a.route(&a_key), (1, Route::Heavy));
        assert_eq!(a.route(&b_key), (2, Route::Heavy));
        // They survive the JSON round trip as two distinct keys.
        let back = Assignment::from_json(&a.to_json()).expect("round trip");
        assert_eq!(back.route(&b_key), (2, Route::Heavy));
    }
}

/// Many heavy keys, several per bucket (about 2.4 on average, none over the per-bucket bound).
#[test]
fn many_heavy_keys_fill_shared_buckets() {
    let n = 20_000_u32;
    let partitions = 97;
    let heavy_keys: Vec<HeavyKey> = (0..n)
        .map(|i| {
            heavy(
                format!("heavy-{i}").as_bytes(),
                i % partitions,
                u64::from(i),
            )
        })
        .collect();
    let table: Vec<u32> = (0..8192).map(|b| (b * 7) % partitions).collect();
    let a = Assignment::new(parts(partitions, table, heavy_keys)).expect("valid");
    for i in 0..n {
        let key = format!("heavy-{i}");
        assert_eq!(a.route(key.as_bytes()), (i % partitions, Route::Heavy));
    }
    for i in 0..n {
        let key = format!("light-{i}");
        let (p, route) = a.route(key.as_bytes());
        assert_eq!(route, Route::Bucket);
        assert_eq!(p, a.table()[a.bucket(key.as_bytes()) as usize]);
    }
}

#[test]
fn one_partition_one_bucket() {
    let a = Assignment::new(parts(1, vec![0], vec![heavy(b"x", 0, 1)])).expect("valid");
    for key in [&b""[..], b"x", b"y", &[0xff; 300]] {
        assert_eq!(a.partition_for(key), 0);
        assert_eq!(a.bucket(key), 0);
    }
}

#[test]
fn assignment_is_shareable_across_threads() {
    fn check<T: Send + Sync + 'static>() {}
    check::<Assignment>();
}

/// A valid assignment of 1..=`max_partitions` partitions and 1..=`max_buckets` buckets (a random
/// table, a random murmur2 seed) with `heavy` heavy keys of fewer than `key_len` bytes (cut to the
/// per-bucket bound), and those keys.
fn arb_assignment_of(
    max_partitions: u32,
    max_buckets: usize,
    key_len: usize,
    heavy_keys: std::ops::Range<usize>,
) -> impl Strategy<Value = (Assignment, Vec<Vec<u8>>)> {
    (1..=max_partitions, 1..=max_buckets, any::<u32>()).prop_flat_map(
        move |(partitions, buckets, seed)| {
            (
                prop::collection::vec(0..partitions, buckets),
                prop::collection::btree_map(
                    prop::collection::vec(any::<u8>(), 0..key_len),
                    0..partitions,
                    heavy_keys.clone(),
                ),
            )
                .prop_map(move |(table, heavy_map)| {
                    let heavy_map =
                        within_bucket_bound(heavy_map, BucketHash::Murmur2 { seed }, table.len());
                    let keys: Vec<Vec<u8>> = heavy_map.keys().cloned().collect();
                    let heavy_keys = heavy_map
                        .into_iter()
                        .map(|(key, partition)| heavy(&key, partition, 1))
                        .collect();
                    let mut p = parts(partitions, table, heavy_keys);
                    p.bucket_hash = BucketHash::Murmur2 { seed };
                    (Assignment::new(p).expect("generated parts are valid"), keys)
                })
        },
    )
}

fn arb_assignment() -> impl Strategy<Value = (Assignment, Vec<Vec<u8>>)> {
    arb_assignment_of(64, 300, 20, 0..64)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Any valid assignment sends any key to a partition in range, by the documented rule.
    #[test]
    fn lookup_is_in_range_and_follows_the_rule(
        (a, heavy_keys) in arb_assignment(),
        probes in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 1..64),
    ) {
        for key in probes.iter().chain(&heavy_keys) {
            let p = a.partition_for(key);
            prop_assert!(p < a.partitions());
            let expected = by_the_rule(&a, key);
            prop_assert_eq!(a.route(key), expected);
            prop_assert_eq!(p, expected.0);
            prop_assert_eq!(a.bucket(key), a.bucket_hash().bucket(key, a.buckets()));
        }
    }
}

#[test]
fn long_and_boundary_length_keys() {
    // Around the inline comparison's range (8 to 16 bytes), the 8-byte word size, the out-of-line
    // path's branch-free limit (64 bytes), and beyond.
    let lens = [
        0_usize, 1, 2, 3, 4, 7, 8, 9, 12, 15, 16, 17, 23, 24, 25, 63, 64, 65, 200, 4096,
    ];
    let keys: Vec<Vec<u8>> = lens
        .iter()
        .map(|&n| (0..n).map(|i| (i * 31 + n) as u8).collect())
        .collect();
    let heavy_keys: Vec<HeavyKey> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| heavy(k, i as u32 % 5, 1))
        .collect();
    let a = Assignment::new(parts(5, (0..64).map(|b| b % 5).collect(), heavy_keys)).expect("valid");
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(a.route(k), (i as u32 % 5, Route::Heavy), "len {}", k.len());
        // Same length with the first, a middle or the last byte flipped; and one byte longer:
        // not heavy.
        if let Some(last) = k.len().checked_sub(1) {
            for at in [0, k.len() / 2, last] {
                let mut other = k.clone();
                other[at] ^= 0x01;
                assert_eq!(a.route(&other).1, Route::Bucket, "len {}, at {at}", k.len());
            }
        }
        let mut longer = k.clone();
        longer.push(0);
        if !keys.contains(&longer) {
            assert_eq!(a.route(&longer).1, Route::Bucket, "len {}", longer.len());
        }
    }
    // The same near misses against a lone heavy key in a single bucket, so every probe is
    // compared with that key (above, most probes hash to another bucket).
    for k in &keys {
        let a = Assignment::new(parts(2, vec![0], vec![heavy(k, 1, 1)])).expect("valid");
        assert_eq!(a.route(k), (1, Route::Heavy), "len {}", k.len());
        for at in (0..k.len()).step_by(k.len().div_ceil(40).max(1)) {
            let mut other = k.clone();
            other[at] ^= 0x80;
            assert_eq!(
                a.route(&other),
                (0, Route::Bucket),
                "len {}, at {at}",
                k.len()
            );
        }
        for other in [
            [&k[..], b"x"].concat(),
            k[..k.len().saturating_sub(1)].to_vec(),
        ] {
            if other != *k {
                assert_eq!(a.route(&other), (0, Route::Bucket), "len {}", other.len());
            }
        }
    }
}

/// The document's rule, computed the slow way: the heavy partition if the key is heavy, else its
/// bucket's partition.
fn by_the_rule(a: &Assignment, key: &[u8]) -> (u32, Route) {
    match a.heavy().iter().find(|h| h.key == key) {
        Some(h) => (h.partition, Route::Heavy),
        None => (
            a.table()[a.bucket_hash().bucket(key, a.buckets()) as usize],
            Route::Bucket,
        ),
    }
}

/// Two different keys of `len` (>= 5) bytes with the same 32-bit bucket hash, found by a birthday
/// search (~2^16 tries) over pseudo-random leading bytes (splitmix64 of a counter). A plain counter
/// would never collide: murmur2 maps the varying word one-to-one when the rest is fixed.
fn colliding_pair_of_length(seed: u32, len: usize) -> (Vec<u8>, Vec<u8>) {
    let mut seen: HashMap<u32, Vec<u8>> = HashMap::new();
    for i in 0_u64.. {
        let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        let mut key = vec![b'k'; len];
        let random = len.min(8);
        key[..random].copy_from_slice(&z.to_le_bytes()[..random]);
        match seen.insert(murmur2_seeded(&key, seed), key.clone()) {
            Some(other) if other != key => return (other, key),
            _ => {}
        }
    }
    unreachable!("a 32-bit hash collides long before 2^64 keys")
}

/// Same hash and same length, so same bucket and nothing but the bytes to tell them apart: for
/// the inline comparison (8 and 16 bytes) and the out-of-line one (5 and 20 bytes), with one key
/// heavy (it alone in its bucket: compared inline against the other) and both heavy (the bucket
/// goes to its run).
#[test]
fn equal_hash_and_length_keys_are_told_apart_by_their_bytes() {
    for len in [5, 8, 16, 20] {
        let (x, y) = colliding_pair_of_length(DEFAULT_BUCKET_SEED, len);
        assert_ne!(x, y);
        assert_eq!(x.len(), y.len());
        let table: Vec<u32> = (0..7).map(|b| b % 3).collect();
        let light = |k: &[u8]| {
            let bucket = BucketHash::default().bucket(k, 7);
            (table[bucket as usize], Route::Bucket)
        };
        // (heavy keys, route of x, route of y)
        let cases = [
            (vec![heavy(&x, 3, 5)], (3, Route::Heavy), light(&y)),
            (vec![heavy(&y, 4, 5)], light(&x), (4, Route::Heavy)),
            (
                vec![heavy(&x, 3, 5), heavy(&y, 4, 9)],
                (3, Route::Heavy),
                (4, Route::Heavy),
            ),
        ];
        for (heavy_keys, want_x, want_y) in cases {
            let a = Assignment::new(parts(5, table.clone(), heavy_keys)).expect("valid");
            assert_eq!(a.route(&x), want_x, "len {len}: {x:?}");
            assert_eq!(a.route(&y), want_y, "len {len}: {y:?}");
        }
    }
}

/// Keys that agree on their first and last 8 bytes (or, below 8 bytes, on the zero-padded bytes)
/// and differ only in length: the length alone tells them apart.
#[test]
fn keys_differing_only_in_length_are_told_apart() {
    let runs: Vec<Vec<u8>> = (0..=24).map(|n| vec![b'a'; n]).collect();
    let zeros: Vec<Vec<u8>> = (0..=9).map(|n| vec![0_u8; n]).collect();
    for family in [runs, zeros] {
        for (i, hot) in family.iter().enumerate() {
            let a = Assignment::new(parts(3, vec![0, 1, 2, 0, 1], vec![heavy(hot, 2, 1)]))
                .expect("valid");
            for (j, other) in family.iter().enumerate() {
                let want = if i == j {
                    (2, Route::Heavy)
                } else {
                    by_the_rule(&a, other)
                };
                assert_eq!(a.route(other), want, "heavy {hot:?}, probe {other:?}");
                assert_eq!(want.1 == Route::Heavy, i == j);
            }
        }
    }
}

/// A bucket without heavy keys borrows the group of another bucket's heavy key when their
/// partitions agree; that key still routes heavy, and keys of the borrowing buckets (even ones
/// sharing the heavy key's first and last bytes and length) route by their bucket.
#[test]
fn buckets_borrowing_a_heavy_keys_group_route_by_bucket() {
    let hot = b"0123456789abcdef".to_vec();
    // Every bucket on partition 0, so all of them borrow the group of `hot` (bucket partition 0).
    let a = Assignment::new(parts(2, vec![0; 64], vec![heavy(&hot, 1, 10)])).expect("valid");
    assert!(format!("{a:?}").contains("groups: 1,"), "{a:?}");
    assert_eq!(a.route(&hot), (1, Route::Heavy));
    let mut near_misses = Vec::new();
    for i in 0..hot.len() {
        let mut k = hot.clone();
        k[i] ^= 0x20;
        near_misses.push(k);
    }
    near_misses.push(hot[..15].to_vec());
    near_misses.push([&hot[..], b"!"].concat());
    for k in near_misses {
        assert_eq!(a.route(&k), (0, Route::Bucket), "{k:?}");
    }
}

/// The slot table takes 1, 2 or 4 bytes per bucket depending on how many groups it must name;
/// every width routes by the rule.
#[test]
fn every_slot_width_routes_by_the_rule() {
    // (partitions, buckets, heavy keys, expected slot width)
    let configs = [
        (10_u32, 100_u32, 20_u32, 1),
        (400, 800, 50, 2),
        (70_000, 70_000, 10, 4),
    ];
    for (partitions, buckets, heavy_count, width) in configs {
        let table: Vec<u32> = (0..buckets).map(|b| (b * 7919) % partitions).collect();
        let heavy_keys: Vec<HeavyKey> = (0..heavy_count)
            .map(|i| heavy(format!("heavy-{i:04}").as_bytes(), (i * 31) % partitions, 1))
            .collect();
        let a = Assignment::new(parts(partitions, table, heavy_keys)).expect("valid");
        assert!(
            format!("{a:?}").contains(&format!("slot_bytes: {width},")),
            "{a:?}"
        );
        let probes = (0..heavy_count)
            .map(|i| format!("heavy-{i:04}"))
            .chain((0..5_000).map(|i| format!("light-{i}")));
        for key in probes {
            let p = a.partition_for(key.as_bytes());
            assert!(p < partitions);
            assert_eq!(
                a.route(key.as_bytes()),
                by_the_rule(&a, key.as_bytes()),
                "{key}"
            );
        }
    }
}

/// A single bucket holds every heavy key, of every length class: all of them are found through
/// its run, everything else routes to the bucket.
#[test]
fn a_bucket_with_many_heavy_keys_routes_them_all() {
    let keys: Vec<Vec<u8>> = [0_usize, 3, 8, 12, 16, 17, 40, 100]
        .iter()
        .map(|&n| (0..n).map(|i| (i * 7 + n) as u8).collect())
        .collect();
    let heavy_keys: Vec<HeavyKey> = keys
        .iter()
        .enumerate()
        .map(|(i, k)| heavy(k, i as u32 % 4, 1 + i as u64))
        .collect();
    let a = Assignment::new(parts(4, vec![3], heavy_keys)).expect("valid");
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(a.route(k), (i as u32 % 4, Route::Heavy), "len {}", k.len());
        let mut other = k.clone();
        other.push(0xee);
        assert_eq!(a.route(&other), (3, Route::Bucket), "len {}", other.len());
    }
}

/// Heavy keys packed into few buckets (so buckets share groups, hold one heavy key inline, or
/// several in a run, up to the per-bucket bound).
fn arb_crowded_assignment() -> impl Strategy<Value = (Assignment, Vec<Vec<u8>>)> {
    arb_assignment_of(8, 6, 40, 1..24)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Every heavy key routes heavy, and its near misses (one byte changed, one byte more, one
    /// byte less) route by the rule.
    #[test]
    fn near_misses_of_heavy_keys_route_by_the_rule(
        (a, heavy_keys) in arb_crowded_assignment(),
        at in any::<prop::sample::Index>(),
        flip in 1_u8..,
    ) {
        for key in &heavy_keys {
            prop_assert_eq!(a.route(key), by_the_rule(&a, key));
            let mut probes = vec![[&key[..], &[flip]].concat()];
            if !key.is_empty() {
                let mut changed = key.clone();
                changed[at.index(key.len())] ^= flip;
                probes.push(changed);
                probes.push(key[..key.len() - 1].to_vec());
            }
            for probe in probes {
                let (p, route) = a.route(&probe);
                prop_assert!(p < a.partitions());
                prop_assert_eq!((p, route), by_the_rule(&a, &probe), "{:?}", probe);
            }
        }
    }
}
