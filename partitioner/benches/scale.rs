//! Scale: assignments for 1,000 and 10,000 partitions learned from a stream over 10^8 distinct keys
//! (issue 16, item 3; BENCHMARKS.md "Scale: 1,000 and 10,000 partitions").
//!
//! For k = 1000 and 10,000 with the default configuration (`DkgConfig::default`: mu 64 and 10), and
//! k = 10,000 with mu 64 for comparison, the bench feeds one Zipf stream into the sketches (one pass,
//! all sketches see the same records) and reports:
//! - the sketch's memory (`Sketch::heap_bytes`: SpaceSaving summary + bucket counters) and its
//!   update cost per record;
//! - the assignment build time, fresh and migration-aware against the previous build (median of 3;
//!   target < 1 s at 10,000 partitions);
//! - the document size (`to_json`; target: under `DEFAULT_LIMITS_DOCUMENT_BYTES`, Kafka's defaults);
//! - the lookup's memory (`Assignment::lookup_heap_bytes`);
//! - `partition_for` against Kafka's placement (`kafka_partition`) of the same 2^16 keys drawn from
//!   the stream, in interleaved rounds (order swapped every round): median of the per-round ratios
//!   and their min-max (target <= 1.3x).
//!
//! Keys are 16 bytes: the zero-padded decimal form of a bijective scramble of the Zipf rank, so the
//! `n` ranks are `n` distinct keys and hot keys are spread over the key space.
//!
//! `cargo bench -p dkg-partitioner --no-default-features --bench scale`
//! (`DKG_BENCH_KEYS` distinct keys, default 10^8; `DKG_BENCH_RECORDS` records, default 2 * 10^7;
//! `DKG_BENCH_ALPHA` Zipf exponent, default 1.0; `DKG_BENCH_ROUNDS` interleaved rounds, default 101).
//! Run by `cargo test` (no `--bench` argument), it uses 10^6 keys, 10^5 records and 3 rounds instead.

#[allow(dead_code)] // this bench reports the median ratio and its range, not the percentiles
#[path = "common/lookup.rs"]
mod lookup;

use std::hint::black_box;
use std::time::Instant;

use dkg_core::{DEFAULT_LIMITS_DOCUMENT_BYTES, DkgConfig, Sketch};
use lookup::{Interleaved, interleaved};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::Zipf;

const LOOKUP_KEYS: usize = 1 << 16;

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The key of Zipf rank `rank` (1-based): 16 decimal digits of `rank * golden ratio mod 2^32`.
fn key_of(rank: u64) -> [u8; 16] {
    let mut id = (rank as u32).wrapping_mul(0x9e37_79b1);
    let mut key = [b'0'; 16];
    for b in key.iter_mut().rev() {
        *b = b'0' + (id % 10) as u8;
        id /= 10;
    }
    key
}

/// One configuration under test and its sketch.
struct Case {
    name: String,
    k: u32,
    sketch: Sketch,
}

impl Case {
    fn new(k: u32, config: &DkgConfig, what: &str) -> Self {
        let sketch = Sketch::new(config, k).expect("valid configuration");
        Self {
            name: format!("k={k} mu={} ({what})", sketch.mu()),
            k,
            sketch,
        }
    }
}

/// Median of `v` (sorted in place).
fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Seconds of `f`, median of `runs`.
fn time_median<T>(runs: usize, mut f: impl FnMut() -> T) -> (f64, T) {
    let mut times = Vec::with_capacity(runs);
    let mut last = None;
    for _ in 0..runs {
        let start = Instant::now();
        last = Some(black_box(f()));
        times.push(start.elapsed().as_secs_f64());
    }
    (median(&mut times), last.expect("runs >= 1"))
}

fn main() {
    // `cargo test --all-targets` runs this binary without `--bench` (a debug build, in CI): a smoke run
    // of every step on a small stream, as criterion's test mode is; `cargo bench` measures.
    let measuring = std::env::args().any(|a| a == "--bench");
    let (keys_default, records_default, rounds_default) = if measuring {
        (100_000_000, 20_000_000, 101)
    } else {
        (1_000_000, 100_000, 3)
    };
    let n: u64 = env_or("DKG_BENCH_KEYS", keys_default);
    let records: u64 = env_or("DKG_BENCH_RECORDS", records_default);
    let alpha: f64 = env_or("DKG_BENCH_ALPHA", 1.0);
    let rounds: usize = env_or::<usize>("DKG_BENCH_ROUNDS", rounds_default).max(1);
    let zipf = Zipf::new(n as f64, alpha).expect("valid Zipf parameters");

    let mu64 = DkgConfig::builder().mu(64.0).build().expect("valid");
    let mut cases = vec![
        Case::new(1000, &DkgConfig::default(), "default"),
        Case::new(10_000, &DkgConfig::default(), "default"),
        Case::new(10_000, &mu64, "explicit"),
    ];
    println!("Zipf({alpha}) over {n} keys of 16 bytes, {records} records, {rounds} lookup rounds");

    let mut rng = StdRng::seed_from_u64(0x5ca1e);
    let start = Instant::now();
    for _ in 0..records {
        let key = key_of(rng.sample(zipf) as u64);
        for c in &mut cases {
            c.sketch.observe(&key);
        }
    }
    let observe_ns = start.elapsed().as_secs_f64() * 1e9 / records as f64 / cases.len() as f64;
    println!("sketch update: {observe_ns:.0} ns per record and sketch (key generation included)");

    let lookup_keys: Vec<[u8; 16]> = (0..LOOKUP_KEYS)
        .map(|_| key_of(rng.sample(zipf) as u64))
        .collect();
    for c in &cases {
        let (fresh_s, first) =
            time_median(3, || c.sketch.build("scale", 1, 0, None).expect("build"));
        let (sticky_s, _) = time_median(3, || {
            c.sketch
                .build("scale", 2, 0, Some(&first.assignment))
                .expect("build")
        });
        let a = &first.assignment;
        let doc = a.to_json().len();
        let Interleaved {
            base,
            ours,
            ratio,
            min,
            max,
            ..
        } = interleaved(a, &lookup_keys, rounds);
        println!(
            "{}: {} buckets, {} heavy keys, {} counters\n  \
             sketch {:.1} MiB; build fresh {:.0} ms, migration-aware {:.0} ms (target < 1000 ms)\n  \
             document {} bytes ({}; default limit {DEFAULT_LIMITS_DOCUMENT_BYTES}); lookup {:.2} MiB\n  \
             kafka_partition {base:.2} ns/key, partition_for {ours:.2} ns/key; \
             ratio {ratio:.3}x (min-max {min:.3}-{max:.3}; target <= 1.3x)",
            c.name,
            a.buckets(),
            first.heavy_hitters,
            c.sketch.summary().len(),
            c.sketch.heap_bytes() as f64 / f64::from(1 << 20),
            fresh_s * 1e3,
            sticky_s * 1e3,
            doc,
            if doc < DEFAULT_LIMITS_DOCUMENT_BYTES {
                "fits"
            } else {
                "OVER"
            },
            a.lookup_heap_bytes() as f64 / f64::from(1 << 20),
        );
        assert_eq!(a.partitions(), c.k);
    }
}
