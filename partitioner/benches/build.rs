//! Time to build a DKG assignment for k = 100 from a sketch with 10^4 counters (fresh and
//! migration-aware), and LPT alone on the same jobs.
//!
//! `cargo bench -p dkg-kafka --no-default-features --bench build`

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use dkg_kafka_core::{DkgConfig, Sketch, lpt, lpt_sticky};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_distr::Zipf;

const K: u32 = 100;

/// A k = 100 sketch (default theta = 1/400, mu = 64: 6400 buckets) with 10^4 counters, filled from a
/// Zipf(1.0) stream of 10^6 records over 10^5 keys.
fn sketch(seed: u64) -> Sketch {
    let config = DkgConfig::builder()
        .epsilon(1e-4)
        .build()
        .expect("valid config");
    let mut sk = Sketch::new(&config, K).expect("valid sketch");
    let mut rng = StdRng::seed_from_u64(seed);
    let mut ids: Vec<u32> = (0..100_000).collect();
    ids.shuffle(&mut rng);
    let zipf = Zipf::new(100_000.0, 1.0).expect("valid Zipf parameters");
    for _ in 0..1_000_000 {
        let id = ids[rng.sample(zipf) as usize - 1];
        sk.observe(id.to_string().as_bytes());
    }
    assert_eq!(sk.summary().len(), 10_000);
    sk
}

fn build(c: &mut Criterion) {
    let sk = sketch(1);
    let first = sk.build("bench", 1, 0, None).expect("build");
    // A drifted window for the migration-aware rebuild.
    let drifted = sketch(2);
    eprintln!(
        "k = {K}: {} counters, {} buckets, {} heavy keys, predicted lambda {:.4}",
        sk.summary().len(),
        sk.buckets(),
        first.heavy_hitters,
        first.predicted_imbalance
    );

    let mut group = c.benchmark_group("build_k100_1e4_counters");
    group.bench_function("sketch_build_fresh", |b| {
        b.iter(|| black_box(sk.build("bench", 2, 0, None).expect("build")));
    });
    group.bench_function("sketch_build_sticky_drifted", |b| {
        b.iter(|| {
            black_box(
                drifted
                    .build("bench", 2, 0, Some(&first.assignment))
                    .expect("build"),
            )
        });
    });

    // LPT alone on the same jobs: heavy weights + 6400 buckets.
    let weights: Vec<u64> = first
        .assignment
        .heavy()
        .iter()
        .map(|h| h.weight)
        .chain(sk.bucket_weights().iter().copied())
        .collect();
    group.bench_function("lpt_jobs_of_build", |b| {
        b.iter(|| black_box(lpt(black_box(&weights), K).expect("lpt")));
    });
    // 10^4 jobs with Zipf-like weights.
    let jobs: Vec<u64> = (1..=10_000u64).map(|i| 1_000_000 / i + 1).collect();
    group.bench_function("lpt_1e4_jobs", |b| {
        b.iter(|| black_box(lpt(black_box(&jobs), K).expect("lpt")));
    });
    let mut prev: Vec<Option<u32>> = lpt(&jobs, K)
        .expect("lpt")
        .placement
        .into_iter()
        .map(Some)
        .collect();
    prev.rotate_left(37); // a stale placement: many partitions over target
    group.bench_function("lpt_sticky_1e4_jobs_stale", |b| {
        b.iter(|| black_box(lpt_sticky(black_box(&jobs), &prev, K).expect("lpt_sticky")));
    });
    // Worst case for the removal loop: everything previously on one partition.
    let piled = vec![Some(0u32); jobs.len()];
    group.bench_function("lpt_sticky_1e4_jobs_all_on_one", |b| {
        b.iter(|| black_box(lpt_sticky(black_box(&jobs), &piled, K).expect("lpt_sticky")));
    });
    group.finish();
}

criterion_group!(benches, build);
criterion_main!(benches);
