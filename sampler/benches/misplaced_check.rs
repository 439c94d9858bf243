//! The misplacement detector's cost per record in the sampler's consume loop: the loop's in-process
//! work (`Window::observe_sized`, what `src/sidecar/ingest.rs` does with every record) with and
//! without `Detector::observe` (`src/sidecar/misplaced.rs`), both compiled in via `#[path]`, on the
//! same records in the same run. 16-byte keys, Zipf(1.0) over 10^6 keys, 12 partitions, placed by a
//! learnt assignment (the core's lookup) except one record in ten, placed by Kafka's murmur2 as a
//! plain producer would (those take the detector's slow path: the history's other placements and
//! the `dkg-epoch` header, read here by a closure returning none; in the sampler that is
//! librdkafka's header parse, paid only by records the placements in effect do not explain).
//! librdkafka's own per-record cost is not in either loop: `consume_throughput` measures it.
//!
//! `cargo bench -p dkg-sampler --bench misplaced_check` (no broker). `cargo test --all-targets`
//! runs it without `--bench`: a smoke run of a tenth of the records.

#![allow(clippy::unwrap_used)]

#[path = "common/sidecar.rs"]
mod sidecar;

use std::hint::black_box;
use std::sync::Arc;
use std::time::Instant;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use dkg_core::dkg::DkgConfig;
use dkg_core::dkg::Sketch;
use dkg_core::hash::kafka_partition;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::Zipf;

use sidecar::misplaced::{Detector, PlacementFeed, Placements};
use sidecar::window::{RecordSampler, Window};

const PARTITIONS: u32 = 12;
const KEYS: u64 = 1_000_000;
const RECORDS: usize = 1_000_000;
/// Record timestamps: well after the assignment took effect (the steady state).
const NOW_MS: u64 = 100_000;

fn scale() -> usize {
    if std::env::args().any(|a| a == "--bench") {
        1
    } else {
        10
    }
}

fn key16(rank: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k.copy_from_slice(format!("key-{rank:012}").as_bytes());
    k
}

/// The records (key, partition) and the placements they were written under.
fn records() -> (Vec<([u8; 16], i32)>, Arc<Placements>) {
    let mut rng = StdRng::seed_from_u64(7);
    let zipf = Zipf::new(KEYS as f64, 1.0).unwrap();
    let keys: Vec<[u8; 16]> = (0..RECORDS / scale())
        .map(|_| key16(rng.sample(zipf) as u64))
        .collect();
    let mut sketch = Sketch::new(&DkgConfig::default(), PARTITIONS).unwrap();
    for k in &keys {
        sketch.observe(k);
    }
    let assignment = Arc::new(sketch.build("t", 1, 0, None).unwrap().assignment);
    let records = keys
        .into_iter()
        .map(|k| {
            let p = if rng.random_ratio(1, 10) {
                kafka_partition(&k, PARTITIONS)
            } else {
                assignment.partition_for(&k)
            };
            (k, i32::try_from(p).unwrap())
        })
        .collect();
    let placements = Placements::starting(None)
        .then(Some(assignment), 1_000)
        .unwrap();
    (records, Arc::new(placements))
}

fn window() -> Window {
    Window::new(
        &DkgConfig::default(),
        PARTITIONS,
        RecordSampler::new(1.0, 1),
    )
    .unwrap()
}

/// Not timed by criterion: the two loops alternated round by round in this process, so that a busy
/// machine (the benches share cores with builds) slows both alike; prints the fastest and the median
/// round of each in ns per record, and their differences (the detector's cost).
fn alternating(records: &[([u8; 16], i32)], feed: &Arc<PlacementFeed>) {
    let rounds = 31 / scale() + 1;
    let (mut bare, mut with) = (Vec::new(), Vec::new());
    let mut w = window();
    let mut detector = Detector::new(Arc::clone(feed), PARTITIONS);
    for _ in 0..rounds {
        let t = Instant::now();
        for (k, p) in records {
            w.observe_sized(*p, Some(&k[..]), 1, 116);
        }
        bare.push(t.elapsed().as_nanos() as f64 / records.len() as f64);
        let t = Instant::now();
        for (k, p) in records {
            w.observe_sized(*p, Some(&k[..]), 1, 116);
            detector.observe(&k[..], *p, NOW_MS, || black_box(None));
        }
        with.push(t.elapsed().as_nanos() as f64 / records.len() as f64);
    }
    let stats = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (v[0], v[v.len() / 2])
    };
    let ((bare_min, bare_median), (with_min, with_median)) = (stats(&mut bare), stats(&mut with));
    eprintln!(
        "alternating, {rounds} rounds of {} records: window alone {bare_min:.1} ns/record fastest, \
         {bare_median:.1} median; with the detector {with_min:.1} fastest, {with_median:.1} median; \
         the detector's cost {:.1} ns/record (fastest), {:.1} (median)",
        records.len(),
        with_min - bare_min,
        with_median - bare_median
    );
    black_box(detector.take());
}

fn per_record(c: &mut Criterion) {
    let (records, placements) = records();
    let feed = Arc::new(PlacementFeed::default());
    feed.offer(placements);
    alternating(&records, &feed);
    let mut group = c.benchmark_group("sampler_loop_per_record");
    group.throughput(Throughput::Elements(records.len() as u64));
    group.sample_size(20);
    let mut w = window();
    group.bench_function("window", |b| {
        b.iter(|| {
            for (k, p) in &records {
                w.observe_sized(*p, Some(&k[..]), 1, 116);
            }
        });
    });
    let mut w = window();
    let mut detector = Detector::new(Arc::clone(&feed), PARTITIONS);
    group.bench_function("window_and_detector", |b| {
        b.iter(|| {
            for (k, p) in &records {
                w.observe_sized(*p, Some(&k[..]), 1, 116);
                detector.observe(&k[..], *p, NOW_MS, || black_box(None));
            }
        });
    });
    group.finish();
    // The verdicts the timed loop reached: about a tenth misplaced (the murmur2 records whose
    // partition the assignment does not also give), the rest placed.
    let counts = detector.take();
    eprintln!(
        "detector verdicts: {} checked, ratio {:.4}",
        counts.checked,
        counts.ratio()
    );
    assert!(counts.checked > 0 && (0.05..0.1).contains(&counts.ratio()));
}

criterion_group! {
    name = benches;
    // No plots: the numbers are what BENCHMARKS.md reports (plotters' PDF backend needs fonts).
    config = Criterion::default().without_plots();
    targets = per_record
}
criterion_main!(benches);
