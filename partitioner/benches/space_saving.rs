//! SpaceSaving update throughput on a Zipf(1.0) stream of 16-byte keys, against a plain exact counter
//! (`HashMap<Vec<u8>, u64>` with ahash) measured in the same run. Also prints the memory of a summary fed
//! 10^7 distinct keys (it stays at its configured size).
//!
//! `cargo bench -p dkg-kafka --no-default-features --bench space_saving`
//! (`cargo test` runs it without `--bench`: a smoke run with a tenth of the records and distinct keys.)

use std::collections::HashMap;
use std::hint::black_box;
use std::time::Instant;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use dkg_kafka_core::{DkgConfig, Sketch, SpaceSaving};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_distr::Zipf;

const UNIVERSE: usize = 1_000_000;
const RECORDS: usize = 1_000_000;

/// `cargo bench` passes `--bench`; `cargo test --all-targets` (a debug build, in CI) does not, and then a
/// tenth of the work checks every step without measuring anything.
fn scale() -> usize {
    if std::env::args().any(|a| a == "--bench") {
        1
    } else {
        10
    }
}

fn key16(id: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&id.to_le_bytes());
    k[8..].copy_from_slice(&id.wrapping_mul(0x9e37_79b9_7f4a_7c15).to_le_bytes());
    k
}

/// Zipf(1.0) over `UNIVERSE` keys, ranks permuted to ids.
fn zipf_keys() -> Vec<[u8; 16]> {
    let mut rng = StdRng::seed_from_u64(42);
    let mut ids: Vec<u64> = (0..UNIVERSE as u64).collect();
    ids.shuffle(&mut rng);
    let zipf = Zipf::new(UNIVERSE as f64, 1.0).expect("valid Zipf parameters");
    (0..RECORDS / scale())
        .map(|_| key16(ids[rng.sample(zipf) as usize - 1]))
        .collect()
}

/// Not timed by criterion: the 10^7-distinct-key memory check, printed once.
fn memory_bound() {
    let mut s = SpaceSaving::new(800);
    let start = Instant::now();
    let mut after_fill = 0;
    let distinct = 10_000_000 / scale() as u64;
    for i in 0..distinct {
        s.insert(&key16(i));
        if s.len() == s.capacity() && after_fill == 0 {
            after_fill = s.heap_bytes();
        }
    }
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "memory: {distinct} distinct 16-byte keys into capacity {}: len {}, bucket arena {}, heap {} bytes \
         (when it first filled up: {} bytes), {:.1} M distinct inserts/s",
        s.capacity(),
        s.len(),
        s.bucket_arena_len(),
        s.heap_bytes(),
        after_fill,
        distinct as f64 / secs / 1e6
    );
    assert_eq!(s.len(), s.capacity());
    assert_eq!(s.heap_bytes(), after_fill);
}

fn updates(c: &mut Criterion) {
    memory_bound();
    let stream = zipf_keys();
    let mut group = c.benchmark_group("unit_updates_zipf1_16B");
    group.throughput(Throughput::Elements(stream.len() as u64));

    // Baseline: exact counting in a hash map (unbounded memory: one entry per distinct key).
    group.bench_function("baseline_ahash_hashmap", |b| {
        let mut map: HashMap<Vec<u8>, u64, ahash::RandomState> = HashMap::default();
        b.iter(|| {
            for k in &stream {
                match map.get_mut(&k[..]) {
                    Some(c) => *c += 1,
                    None => {
                        map.insert(k.to_vec(), 1);
                    }
                }
            }
        });
        black_box(map.len());
    });

    // 80 = DKG default for k = 10, 800 for k = 100, 10^4 = a large summary.
    for capacity in [80usize, 800, 10_000] {
        group.bench_with_input(
            BenchmarkId::new("space_saving", capacity),
            &capacity,
            |b, &cap| {
                let mut s = SpaceSaving::new(cap);
                b.iter(|| {
                    for k in &stream {
                        s.insert(k);
                    }
                });
                black_box(s.min_count());
            },
        );
    }

    // The sampler's full per-record cost: summary + bucket counter (murmur2).
    group.bench_function("sketch_observe_k100_default", |b| {
        let mut sk = Sketch::new(&DkgConfig::default(), 100).expect("valid config");
        b.iter(|| {
            for k in &stream {
                sk.observe(k);
            }
        });
        black_box(sk.total());
    });
    group.finish();
}

criterion_group!(benches, updates);
criterion_main!(benches);
