//! End to end on the real broker (issue target): a Zipf(1.2) stream over 12 partitions through `DkgProducer`,
//! `dkg-sampler run` with a 2 s interval. Before the first assignment the observed imbalance is at hash level;
//! over the three intervals from the second after the first publish on, the records the partitions received
//! (read back from the broker's end offsets) are within 5 points of the key-grouping bound, and the sampler's
//! own /metrics show both: the hash level before, and the fall after.

mod common;

use std::time::Duration;

use common::*;

const PARTITIONS: u32 = 12;
const ALPHA: f64 = 1.2;
const KEYS: u64 = 10_000;

#[derive(Debug, Clone, Copy)]
struct Interval {
    n: u64,
    epoch: f64,
    observed: f64,
    bound: f64,
    hash: f64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sampler_brings_observed_imbalance_to_the_key_grouping_bound_within_two_intervals() {
    let topic = unique_topic("sampler-e2e");
    create_topic(&bootstrap(), &topic, PARTITIONS, &[]).await;
    let workload = Workload::start(WorkloadSpec {
        topic: topic.clone(),
        alpha: ALPHA,
        keys: KEYS,
        records_per_second: 25_000,
        dkg: true,
        seed: 1,
    })
    .await;

    let offsets = EndOffsets::new(&topic, PARTITIONS);
    let sampler = Sampler::start("e2e", &topic, &["--interval-secs", "2"]);
    let topic_label = [("topic", topic.as_str())];
    // Record every interval's metrics until four intervals after the first publish, and the end offsets
    // when the first interval after it ends and three intervals later.
    let (seen, published_at, settled) = tokio::task::block_in_place(|| {
        let mut seen: Vec<Interval> = Vec::new();
        let mut published_at: Option<u64> = None;
        let mut settled_from: Option<(u64, Vec<i64>)> = None;
        wait_for(
            "four intervals after the first publish",
            Duration::from_secs(60),
            || {
                let n = sampler.intervals();
                if n > 0 && seen.last().is_none_or(|i| i.n != n) {
                    let m = sampler.metrics();
                    let get = |name: &str, extra: &[(&str, &str)]| {
                        let labels: Vec<(&str, &str)> =
                            topic_label.iter().chain(extra).copied().collect();
                        find(&m, name, &labels)
                    };
                    if let (Some(epoch), Some(observed), Some(bound), Some(hash)) = (
                        get("dkg_sampler_epoch", &[]),
                        get("dkg_sampler_observed_imbalance_ratio", &[]),
                        get("dkg_sampler_key_grouping_bound_ratio", &[]),
                        get(
                            "dkg_sampler_predicted_imbalance_ratio",
                            &[("placement", "hash")],
                        ),
                    ) {
                        let interval = Interval {
                            n,
                            epoch,
                            observed,
                            bound,
                            hash,
                        };
                        eprintln!("{interval:?}");
                        seen.push(interval);
                        if published_at.is_none() && epoch >= 1.0 {
                            published_at = Some(n);
                        }
                    }
                }
                let p = published_at?;
                if settled_from.is_none() && n > p {
                    settled_from = Some((n, offsets.read()));
                }
                let (from_n, from) = settled_from.as_ref()?;
                (n >= from_n + 3)
                    .then(|| (seen.clone(), p, imbalance_between(from, &offsets.read())))
            },
        )
    });

    let expected_bound = zipf_bound(ALPHA, KEYS, PARTITIONS);
    let first = seen.first().expect("at least one interval");
    // The sampler's bound estimates the true one (theory: ~1.5 for these parameters).
    assert!(
        (first.bound - expected_bound).abs() < 0.15,
        "window bound {} vs theory {expected_bound}",
        first.bound
    );
    // Before any assignment the stream is hash-placed: well above the bound.
    let before: Vec<&Interval> = seen
        .iter()
        .filter(|i| i.epoch == 0.0 || i.n == published_at)
        .collect();
    let hash_level = before
        .first()
        .expect("an interval before the first assignment");
    assert!(
        hash_level.observed > hash_level.bound + 0.25,
        "hash placement should be far above the bound: {hash_level:?}"
    );
    assert!(
        hash_level.hash > hash_level.bound + 0.2,
        "predicted hash imbalance: {hash_level:?}"
    );
    // Over the three intervals from the second after the publish on (the first one mixes both placements
    // while producers switch), the records each partition received are within 5 points of the bound. Read
    // from the broker: one 2 s interval of the sampler's own observed figure swings by up to 100 points
    // while the test binaries share the machine's two cores (its fetches arrive in lumps: CI once read
    // 0.99, 2.05 and 1.01 in a row around a 1.35-1.73 window bound), quiet runs by 1-2 points.
    assert!(
        (settled - expected_bound).abs() <= 0.05,
        "records per partition over the intervals two to four after the publish: imbalance {settled:.3}, \
         not within 5 points of the bound {expected_bound:.3}: {seen:?}"
    );
    // The sampler's own figure shows the fall: the median of those intervals is well below hash level.
    let mut observed: Vec<f64> = seen
        .iter()
        .filter(|i| (published_at + 2..=published_at + 4).contains(&i.n))
        .map(|i| i.observed)
        .collect();
    assert_eq!(
        observed.len(),
        3,
        "intervals two to four after the publish: {seen:?}"
    );
    observed.sort_by(f64::total_cmp);
    assert!(
        observed[1] < hash_level.observed - 0.25,
        "the sampler's observed imbalance after the publish (median {:.3}) is not below hash level: {seen:?}",
        observed[1]
    );
    eprintln!(
        "settled imbalance {settled:.3} (bound {expected_bound:.3}); observed {observed:.3?}, hash level {:.3}",
        hash_level.observed
    );

    // The published assignment is what /assignment serves, and the producer routed by it.
    let served = sampler.assignment().expect("an assignment is served");
    assert_eq!(served.topic(), topic);
    assert!(served.epoch() >= 1);
    assert!(
        served.heavy().len() >= 3,
        "the hot keys are heavy hitters: {:?}",
        served.heavy().len()
    );
    assert_eq!(
        served.heavy()[0].key,
        zipf_key(0, 1).into_bytes(),
        "the hottest key is first"
    );
    let published = epochs(&read_control_topic(&topic, true));
    assert!(published.contains(&served.epoch()), "{published:?}");
    // Stable distribution afterwards: no epoch churn.
    assert_eq!(
        published.len(),
        1,
        "one epoch for a stable distribution: {published:?}"
    );
    let m = sampler.metrics();
    assert!(find(&m, "dkg_sampler_records_consumed_total", &topic_label).unwrap_or(0.0) > 50_000.0);
    let partitions_reported = m
        .iter()
        .filter(|s| {
            s.name == "dkg_sampler_partition_records_per_second" && s.labels["topic"] == topic
        })
        .count();
    assert_eq!(partitions_reported, PARTITIONS as usize);
    let top = find(
        &m,
        "dkg_sampler_heavy_key_share_ratio",
        &[("topic", &topic), ("rank", "1")],
    )
    .expect("top key");
    let p1 = (expected_bound + 1.0) / f64::from(PARTITIONS);
    assert!(
        (top - p1).abs() < 0.03,
        "top key share {top}, expected about {p1}"
    );
    drop(sampler);
    workload.stop().await;
}
