//! `Assignment::partition_for` against Kafka's default placement (`kafka_partition`) of the same
//! 16-byte keys, in the same run. Target (issue: "Speed"): at most 1.3x the baseline.
//!
//! Setup: k = 100 partitions, mu = 64 (6400 buckets), 200 heavy keys; the measured key stream is
//! 30% heavy-key records and 70% distinct non-heavy keys, which is what a skewed topic sends.
//! After criterion's own report, prints both medians and their ratio, then the same comparison
//! as alternating batches (steadier on a busy machine), and for information the alternating ratio
//! for 6- and 36-byte keys (the lookup's out-of-line comparison path).
//!
//! Both sides run the same loop (`sum_partitions`): same keys, same `black_box` on each key.
//!
//! `cargo bench -p dkg-partitioner --no-default-features --bench partition_for`

use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Instant, SystemTime};

use criterion::{Criterion, Throughput};
use dkg_partitioner::{Assignment, AssignmentParts, BucketHash, HeavyKey, Params, kafka_partition};
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
    let buckets = PARTITIONS * MU;
    let heavy = (0..HEAVY)
        .map(|i| HeavyKey {
            key: heavy_key::<N>(i).to_vec(),
            partition: (i as u32 * 13) % PARTITIONS,
            weight: 1_000 - i as u64,
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

/// The measured loop, shared by both sides and both reports (criterion's and the interleaved one),
/// so baseline and DKG lookup run the same code around the call: each key passes through
/// `black_box` (so neither side can specialize on the known key length), results are summed.
/// Not inlined, so where the optimizer puts one side's loop does not depend on the other's.
#[inline(never)]
fn sum_partitions<const N: usize>(keys: &[[u8; N]], f: impl Fn(&[u8]) -> u32) -> u32 {
    let mut acc = 0_u32;
    for k in keys {
        acc = acc.wrapping_add(f(black_box(k.as_slice())));
    }
    acc
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

/// ns per key of one `sum_partitions` pass of `f` over `keys`.
fn ns_per_key<const N: usize>(keys: &[[u8; N]], f: impl Fn(&[u8]) -> u32) -> f64 {
    let start = Instant::now();
    black_box(sum_partitions(keys, f));
    start.elapsed().as_secs_f64() * 1e9 / keys.len() as f64
}

/// The same comparison as short alternating batches, so both sides see the same machine load:
/// on a busy 2-core box this ratio is steadier than one computed from two separate criterion runs.
/// Returns the baseline's and the lookup's median ns per key and the median per-round ratio.
fn interleaved_ratio<const N: usize>(rounds: usize) -> (f64, f64, f64) {
    let a = assignment::<N>();
    let ks = keys::<N>(HEAVY_SHARE);
    let partitions = black_box(PARTITIONS);
    let base_f = |k: &[u8]| kafka_partition(k, partitions);
    let ours_f = |k: &[u8]| a.partition_for(k);
    let (mut base, mut ours, mut ratios) = (vec![], vec![], vec![]);
    for round in 0..rounds {
        let (b, o) = if round % 2 == 0 {
            let b = ns_per_key(&ks, base_f);
            (b, ns_per_key(&ks, ours_f))
        } else {
            let o = ns_per_key(&ks, ours_f);
            (ns_per_key(&ks, base_f), o)
        };
        base.push(b);
        ours.push(o);
        ratios.push(o / b);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    (median(&mut base), median(&mut ours), median(&mut ratios))
}

fn report_interleaved() {
    const ROUNDS: usize = 301;
    let (base, ours, ratio) = interleaved_ratio::<16>(ROUNDS);
    println!(
        "interleaved ({ROUNDS} rounds): kafka_partition {base:.2} ns/key, partition_for \
         {ours:.2} ns/key; median ratio {ratio:.3}x"
    );
    // Other key lengths, for information (no target): the comparison takes its out-of-line path.
    for (len, (base, ours, ratio)) in [
        (6, interleaved_ratio::<6>(101)),
        (36, interleaved_ratio::<36>(101)),
    ] {
        println!(
            "  {len:>2}-byte keys (101 rounds): kafka_partition {base:.2} ns/key, partition_for \
             {ours:.2} ns/key; median ratio {ratio:.3}x"
        );
    }
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
