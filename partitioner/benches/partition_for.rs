//! `Assignment::partition_for` against Kafka's default placement (`kafka_partition`) of the same
//! keys, in the same run. Target (issue: "Speed", "the lookup at every key length"): at most 1.3x
//! the baseline for every key length from 1 to 64 bytes.
//!
//! Setup: k = 100 partitions, mu = 64 (6400 buckets), 200 heavy keys; the measured key stream is
//! 30% heavy-key records and 70% non-heavy keys, which is what a skewed topic sends.
//! Criterion measures 16-byte keys; after its report the bench prints both medians and their
//! ratio, the same comparison as alternating rounds (steadier on a busy machine), then the
//! alternating comparison for each key length of `SWEEP` (decimal ids for 4 to 12 bytes, UUID
//! text for 36, random bytes else), one line per length: median per-round ratio and its spread.
//!
//! Both sides run the same loop (`sum_partitions`): same keys, same `black_box` on each key.
//!
//! `cargo bench -p dkg-kafka --no-default-features --bench partition_for`
//! (`DKG_BENCH_LENGTHS=6,36` restricts the sweep to those lengths).

#[path = "common/lookup.rs"]
mod lookup;

use std::hint::black_box;
use std::path::PathBuf;
use std::time::SystemTime;

use criterion::{Criterion, Throughput};
use dkg_kafka::Assignment;
use dkg_kafka_core::{AssignmentParts, BucketHash, HeavyKey, Params, kafka_partition};
use lookup::{interleaved, sum_partitions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const PARTITIONS: u32 = 100;
const MU: u32 = 64;
const HEAVY: usize = 200;
const KEYS: usize = 1 << 16;
const HEAVY_SHARE: f64 = 0.3;
const GROUP: &str = "partition_for_16B";

/// `heavy-key-000042`, cut to its last `N` bytes or padded with `-` to `N` bytes.
fn heavy_key<const N: usize>(i: usize) -> [u8; N] {
    let mut text = format!("heavy-key-{i:06}").into_bytes();
    text.resize(N.max(text.len()), b'-');
    let mut k = [0_u8; N];
    k.copy_from_slice(&text[text.len() - N..]);
    k
}

fn assignment<const N: usize>() -> Assignment {
    assignment_of((0..HEAVY).map(|i| heavy_key::<N>(i).to_vec()).collect())
}

/// The bench's assignment with these heavy keys (partitions spread by a stride of 13).
fn assignment_of(heavy_keys: Vec<Vec<u8>>) -> Assignment {
    let buckets = PARTITIONS * MU;
    let heavy = heavy_keys
        .into_iter()
        .enumerate()
        .map(|(i, key)| HeavyKey {
            key,
            partition: (i as u32 * 13) % PARTITIONS,
            weight: 1_000 - i as u64,
            split: Vec::new(),
        })
        .collect();
    Assignment::new(AssignmentParts {
        topic: "bench".to_owned(),
        partitions: PARTITIONS,
        epoch: 1,
        bucket_hash: BucketHash::default(),
        table: (0..buckets).map(|b| (b * 37) % PARTITIONS).collect(),
        heavy,
        params: Params {
            theta: 0.001,
            epsilon: 0.0005,
            mu: f64::from(MU),
            window_records: 1_000_000,
        },
        created_at_ms: 0,
        predicted_load: vec![1.0 / f64::from(PARTITIONS); PARTITIONS as usize],
    })
    .expect("valid bench assignment")
}

/// `KEYS` keys in random order: a heavy key with probability `heavy_share`, else random bytes.
fn keys<const N: usize>(heavy_share: f64) -> Vec<[u8; N]> {
    let mut rng = StdRng::seed_from_u64(0x5eed);
    (0..KEYS)
        .map(|_| {
            if rng.random_bool(heavy_share) {
                heavy_key(rng.random_range(0..HEAVY))
            } else {
                let mut k = [0_u8; N];
                rng.fill(&mut k[..]);
                k
            }
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let a = assignment::<16>();
    let mixed = keys::<16>(HEAVY_SHARE);
    let heavy_only = keys::<16>(1.0);
    let light_only = keys::<16>(0.0);
    // The partition count is a runtime value in a producer; hide it so `%` is not strength-reduced.
    let partitions = black_box(PARTITIONS);

    let mut g = c.benchmark_group(GROUP);
    g.throughput(Throughput::Elements(KEYS as u64));
    g.bench_function("kafka_partition", |b| {
        b.iter(|| sum_partitions(&mixed, |k| kafka_partition(k, partitions)));
    });
    for (name, ks) in [
        ("partition_for", &mixed),
        ("partition_for_heavy_only", &heavy_only),
        ("partition_for_bucket_only", &light_only),
    ] {
        g.bench_function(name, |b| {
            b.iter(|| sum_partitions(ks, |k| a.partition_for(k)));
        });
    }
    g.finish();
}

/// Where criterion wrote its results: `$CRITERION_HOME`, `$CARGO_TARGET_DIR/criterion`, or
/// `<target>/criterion` next to this executable (`<target>/release/deps/<bench>`).
fn criterion_dir() -> Option<PathBuf> {
    if let Some(home) = std::env::var_os("CRITERION_HOME") {
        return Some(home.into());
    }
    if let Some(target) = std::env::var_os("CARGO_TARGET_DIR") {
        return Some(PathBuf::from(target).join("criterion"));
    }
    let exe = std::env::current_exe().ok()?;
    Some(exe.parent()?.parent()?.parent()?.join("criterion"))
}

/// The median criterion measured for `id` in this run (`None` if it did not run this time).
fn median_ns(id: &str, since: SystemTime) -> Option<f64> {
    let path = criterion_dir()?
        .join(GROUP)
        .join(id)
        .join("new")
        .join("estimates.json");
    if std::fs::metadata(&path).ok()?.modified().ok()? < since {
        return None;
    }
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(path).ok()?).ok()?;
    v["median"]["point_estimate"].as_f64()
}

fn report_ratio(since: SystemTime) {
    let (Some(base), Some(ours)) = (
        median_ns("kafka_partition", since),
        median_ns("partition_for", since),
    ) else {
        return;
    };
    let per_key = |ns: f64| ns / KEYS as f64;
    println!(
        "\nmedians per 16-byte key: kafka_partition {:.2} ns, partition_for {:.2} ns; \
         ratio {:.3}x (target <= 1.3x)",
        per_key(base),
        per_key(ours),
        ours / base
    );
}

/// Key shapes of the length sweep: what a topic keyed by that length tends to carry.
#[derive(Clone, Copy)]
enum Shape {
    /// Random bytes (1 and 2 bytes, where decimal ids would leave too few distinct keys, and
    /// every length without a more typical text shape).
    Bytes,
    /// A decimal id of exactly `N` digits (customer, account, order numbers).
    Decimal,
    /// A UUID in its 36-character text form.
    Uuid,
}

impl Shape {
    fn of(len: usize) -> Self {
        match len {
            4..=12 => Self::Decimal,
            36 => Self::Uuid,
            _ => Self::Bytes,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Bytes => "random bytes",
            Self::Decimal => "decimal id",
            Self::Uuid => "UUID text",
        }
    }

    fn key<const N: usize>(self, rng: &mut StdRng) -> [u8; N] {
        let mut k = [0_u8; N];
        match self {
            Self::Bytes => rng.fill(&mut k[..]),
            Self::Decimal => {
                // No leading zero, as an id printed as a number.
                k[0] = b'1' + rng.random_range(0..9_u8);
                for b in &mut k[1..] {
                    *b = b'0' + rng.random_range(0..10_u8);
                }
            }
            Self::Uuid => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                for (i, b) in k.iter_mut().enumerate() {
                    *b = if matches!(i, 8 | 13 | 18 | 23) {
                        b'-'
                    } else {
                        HEX[rng.random_range(0..16)]
                    };
                }
            }
        }
        k
    }
}

/// The sweep's assignment and key stream for `N`-byte keys: the bench's setup (k, mu, 30% heavy
/// records), with `HEAVY` heavy keys of the length's shape (a quarter of the distinct keys where
/// there are fewer than 4 * `HEAVY`: 64 one-byte keys).
fn sweep_setup<const N: usize>() -> (Assignment, Vec<[u8; N]>) {
    let shape = Shape::of(N);
    let mut rng = StdRng::seed_from_u64(0x5eed ^ N as u64);
    let distinct = 256_usize.checked_pow(N as u32).unwrap_or(usize::MAX);
    let mut heavy: Vec<[u8; N]> = Vec::new();
    while heavy.len() < HEAVY.min(distinct / 4) {
        let k = shape.key::<N>(&mut rng);
        if !heavy.contains(&k) {
            heavy.push(k);
        }
    }
    let a = assignment_of(heavy.iter().map(|k| k.to_vec()).collect());
    let keys = (0..KEYS)
        .map(|_| {
            if rng.random_bool(HEAVY_SHARE) {
                heavy[rng.random_range(0..heavy.len())]
            } else {
                shape.key(&mut rng)
            }
        })
        .collect();
    (a, keys)
}

/// Key lengths of the sweep (issue: "the lookup at every key length", 1 to 64 bytes).
const SWEEP: [usize; 14] = [1, 2, 4, 6, 8, 10, 12, 16, 20, 24, 32, 36, 48, 64];
const SWEEP_ROUNDS: usize = 201;

fn report_length<const N: usize>(only: &Option<Vec<usize>>) {
    if only.as_ref().is_some_and(|l| !l.contains(&N)) {
        return;
    }
    let (a, ks) = sweep_setup::<N>();
    let r = interleaved(&a, &ks, SWEEP_ROUNDS);
    println!(
        "  {N:>2} B {:<12} kafka_partition {:>5.2} ns/key, partition_for {:>5.2} ns/key; \
         ratio {:.3}x (p10-p90 {:.3}-{:.3}, min-max {:.3}-{:.3})",
        Shape::of(N).name(),
        r.base,
        r.ours,
        r.ratio,
        r.p10,
        r.p90,
        r.min,
        r.max
    );
}

fn report_interleaved() {
    const ROUNDS: usize = 301;
    let r = interleaved(&assignment::<16>(), &keys::<16>(HEAVY_SHARE), ROUNDS);
    println!(
        "interleaved ({ROUNDS} rounds): kafka_partition {:.2} ns/key, partition_for {:.2} ns/key; \
         median ratio {:.3}x (p10-p90 {:.3}-{:.3})",
        r.base, r.ours, r.ratio, r.p10, r.p90
    );
    // `DKG_BENCH_LENGTHS=6,36` restricts the sweep (for quick iterations).
    let only = std::env::var("DKG_BENCH_LENGTHS")
        .ok()
        .map(|v| v.split(',').filter_map(|l| l.trim().parse().ok()).collect());
    println!(
        "key lengths, {SWEEP_ROUNDS} alternating rounds each (median ratio of the rounds; target <= 1.3x):"
    );
    macro_rules! sweep {
        ($($n:literal),*) => {{
            // The list above and this one must agree (checked when the bench starts).
            assert_eq!(SWEEP, [$($n),*]);
            $(report_length::<$n>(&only);)*
        }};
    }
    sweep!(1, 2, 4, 6, 8, 10, 12, 16, 20, 24, 32, 36, 48, 64);
}

fn main() {
    let started = SystemTime::now();
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c);
    c.final_summary();
    // `cargo bench` passes --bench; `cargo test --benches` runs each benchmark once without it.
    if std::env::args().any(|a| a == "--bench") {
        report_ratio(started);
        report_interleaved();
    }
}
