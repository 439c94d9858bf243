//! Timing of partition lookups shared by `partition_for` and `scale` (included with `#[path]`:
//! these benches run without the kafka feature that `common/mod.rs` needs): Kafka's hash against
//! an assignment's lookup over the same keys, in interleaved rounds.

use std::hint::black_box;
use std::time::Instant;

use dkg_kafka::Assignment;
use dkg_kafka_core::kafka_partition;

/// The measured loop, shared by both sides and both of `partition_for`'s reports (criterion's and
/// the interleaved one), so baseline and DKG lookup run the same code around the call: each key
/// passes through `black_box` (so neither side can specialize on the known key length), results
/// are summed. Not inlined, so where the optimizer puts one side's loop does not depend on the
/// other's.
#[inline(never)]
pub fn sum_partitions<const N: usize>(keys: &[[u8; N]], f: impl Fn(&[u8]) -> u32) -> u32 {
    let mut acc = 0_u32;
    for k in keys {
        acc = acc.wrapping_add(f(black_box(k.as_slice())));
    }
    acc
}

/// ns per key of one `sum_partitions` pass of `f` over `keys`.
pub fn ns_per_key<const N: usize>(keys: &[[u8; N]], f: impl Fn(&[u8]) -> u32) -> f64 {
    let start = Instant::now();
    black_box(sum_partitions(keys, f));
    start.elapsed().as_secs_f64() * 1e9 / keys.len() as f64
}

/// One interleaved comparison: the medians of both sides' ns per key and of the per-round ratios
/// (lookup / baseline), with the per-round ratios' 10th and 90th percentiles and range.
pub struct Interleaved {
    pub base: f64,
    pub ours: f64,
    pub ratio: f64,
    pub p10: f64,
    pub p90: f64,
    pub min: f64,
    pub max: f64,
}

/// Kafka's hash over `a.partitions()` (the baseline) and `a`'s lookup over the same `keys` in
/// alternating rounds, order swapped every round, so both sides see the same machine load: on a
/// busy 2-core box the per-round ratio is steadier than one computed from two separate runs.
pub fn interleaved<const N: usize>(a: &Assignment, keys: &[[u8; N]], rounds: usize) -> Interleaved {
    let partitions = black_box(a.partitions());
    let base_f = |k: &[u8]| kafka_partition(k, partitions);
    let ours_f = |k: &[u8]| a.partition_for(k);
    let (mut base, mut ours, mut ratios) = (vec![], vec![], vec![]);
    for round in 0..rounds {
        let (b, o) = if round % 2 == 0 {
            let b = ns_per_key(keys, base_f);
            (b, ns_per_key(keys, ours_f))
        } else {
            let o = ns_per_key(keys, ours_f);
            (ns_per_key(keys, base_f), o)
        };
        base.push(b);
        ours.push(o);
        ratios.push(o / b);
    }
    for v in [&mut base, &mut ours, &mut ratios] {
        v.sort_by(f64::total_cmp);
    }
    let at = |v: &[f64], q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    Interleaved {
        base: at(&base, 0.5),
        ours: at(&ours, 0.5),
        ratio: at(&ratios, 0.5),
        p10: at(&ratios, 0.1),
        p90: at(&ratios, 0.9),
        min: ratios[0],
        max: ratios[ratios.len() - 1],
    }
}
