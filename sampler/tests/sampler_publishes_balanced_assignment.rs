//! End to end on the real broker (issue target): a Zipf(1.2) stream over 12 partitions through `DkgProducer`,
//! `dkg-sampler run` with a 2 s interval. Before the first assignment the observed imbalance is at hash level;
//! from two intervals after the first publish on it is within 5 points of the key-grouping bound (the median
//! of intervals two to four), and the sampler's own /metrics show both.

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

    let sampler = Sampler::start("e2e", &topic, &["--interval-secs", "2"]);
    let topic_label = [("topic", topic.as_str())];
    // Record every interval's metrics until two intervals after the first publish.
    let (seen, published_at) = tokio::task::block_in_place(|| {
        let mut seen: Vec<Interval> = Vec::new();
        let mut published_at: Option<u64> = None;
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
                (seen.last().is_some_and(|i| i.n >= p + 4)).then(|| (seen.clone(), p))
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
    // From two intervals after the publish on (the first one mixes both placements while producers
    // switch), the observed imbalance is within 5 points of the bound: the median of the intervals two to
    // four after it, because one 2 s interval alone swings by 20 points when the test binaries share the
    // machine's two cores (CI once read 175% and 125% around a 143-162% bound; quiet runs read 1-2 points).
    let mut gaps: Vec<f64> = seen
        .iter()
        .filter(|i| (published_at + 2..=published_at + 4).contains(&i.n))
        .map(|i| (i.observed - i.bound).abs())
        .collect();
    assert_eq!(
        gaps.len(),
        3,
        "intervals two to four after the publish: {seen:?}"
    );
    gaps.sort_by(f64::total_cmp);
    assert!(
        gaps[1] <= 0.05,
        "observed imbalance not within 5 points of the bound (median of the intervals two to four after \
         the publish: {:.3}): {seen:?}",
        gaps[1]
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
