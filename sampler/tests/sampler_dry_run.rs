//! `--dry-run` on the real broker: the sampler computes and serves what it would publish (/assignment,
//! metrics) and publishes nothing: no control-topic record, no sketch, and it never takes the transactional id
//! (a real sampler publishing meanwhile is not fenced).
//!
//! Waits end at events (an assignment served, decisions made on a number of records, an interval that
//! read every partition) with bounds (60 s) only a fault reaches, never at a count of seconds: the
//! sampler's per-interval figures depend on how its fetches land on a busy machine.

mod common;

use std::time::Duration;

use common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dry_run_serves_the_assignment_it_would_publish_and_publishes_nothing() {
    let topic = unique_topic("sampler-dry-run");
    create_topic(&bootstrap(), &topic, 6, &[]).await;
    let workload = Workload::start(WorkloadSpec {
        alpha: 1.2,
        ..WorkloadSpec::zipf(&topic, 9)
    })
    .await;

    tokio::task::block_in_place(|| {
        let dry = Sampler::start("dry", &topic, &["--dry-run", "--interval-secs", "1"]);
        let a = wait_for("a would-be assignment", Duration::from_secs(60), || {
            dry.assignment()
        });
        assert_eq!(a.topic(), topic);
        assert_eq!(a.epoch(), 1);
        assert_eq!(
            a.heavy()[0].key,
            zipf_key(0, 1).into_bytes(),
            "the hottest key is pinned"
        );
        let h = dry.health().expect("health");
        assert_eq!(h["publisher"], "dry-run");
        assert_eq!(
            h["group_id"],
            format!("dkg-sampler.{topic}.dry-run"),
            "its own consumer group"
        );
        assert_eq!(
            dry.metric("dkg_sampler_publishes_total", &[("topic", &topic)]),
            Some(1.0)
        );
        assert_eq!(
            dry.metric("dkg_sampler_epoch", &[("topic", &topic)]),
            Some(1.0)
        );
        let fresh = dry
            .metric(
                "dkg_sampler_predicted_imbalance_ratio",
                &[("topic", &topic), ("placement", "fresh")],
            )
            .expect("fresh prediction");
        let hash = dry
            .metric(
                "dkg_sampler_predicted_imbalance_ratio",
                &[("topic", &topic), ("placement", "hash")],
            )
            .expect("hash prediction");
        assert!(
            fresh < hash,
            "the would-be assignment beats hashing: {fresh} vs {hash}"
        );
        // Hysteresis applies to the simulated publisher too: a stable stream, no new would-be epoch
        // over three more decisions that read at least 20,000 more records (two 1 s intervals at the
        // workload's rate: decisions on data, not on ticks).
        let consumed = || {
            dry.metric("dkg_sampler_records_consumed_total", &[("topic", &topic)])
                .unwrap_or(0.0)
        };
        let (n0, c0) = (dry.intervals(), consumed());
        wait_for(
            "three more decisions on 20,000 more records",
            Duration::from_secs(60),
            || (dry.intervals() >= n0 + 3 && consumed() >= c0 + 20_000.0).then_some(()),
        );
        assert_eq!(dry.assignment().expect("still served").epoch(), 1);

        // Nothing reached Kafka: the control topic has no record for the topic, the sketches topic none either.
        // (A topic no one created holds nothing; a read of an existing one must reach its end.)
        assert!(
            !topic_exists(CONTROL_TOPIC) || read_control_topic(&topic, false).is_empty(),
            "dry run published to the control topic"
        );
        let prefix = format!("{topic}/");
        assert!(
            !topic_exists("_dkg.sketches")
                || read_keyed("_dkg.sketches", false, |k| k.starts_with(prefix.as_bytes()))
                    .is_empty(),
            "dry run shipped a sketch"
        );

        // A real sampler publishes meanwhile; the dry run never touched its transactional id, so it is not
        // fenced, and the dry run follows... its own simulation (it serves what IT would publish).
        // It balances bytes (--weight bytes), which it reports as its unit.
        let real = Sampler::start(
            "real",
            &topic,
            &["--interval-secs", "1", "--weight", "bytes"],
        );
        wait_for(
            "the real sampler's first epoch",
            Duration::from_secs(60),
            || (real.health()?["epoch"].as_u64()? >= 1).then_some(()),
        );
        let health = real.health().expect("health");
        assert_eq!(health["publisher"], "active");
        assert_eq!(health["weight"], "bytes");
        // Bytes/s beside records/s on every partition: 16-byte keys + 100-byte values, plus the
        // `dkg-epoch` header of the records an epoch moved. Both gauges of a partition come from the
        // same interval's records, so their ratio is bytes per record whatever the pace; the wait is
        // for an interval that read every partition (a starved interval may have read none).
        let per_partition = wait_for(
            "an interval that read every partition",
            Duration::from_secs(60),
            || {
                let samples = real.metrics();
                let rates: Vec<(f64, f64)> = (0..6)
                    .map(|p| {
                        let labels = [("topic", topic.as_str()), ("partition", &p.to_string())];
                        let records = find(
                            &samples,
                            "dkg_sampler_partition_records_per_second",
                            &labels,
                        );
                        let bytes =
                            find(&samples, "dkg_sampler_partition_bytes_per_second", &labels);
                        records.zip(bytes)
                    })
                    .collect::<Option<_>>()?;
                assert_eq!(
                    find(
                        &samples,
                        "dkg_sampler_weight_info",
                        &[("topic", &topic), ("weight", "bytes")]
                    ),
                    Some(1.0)
                );
                rates
                    .iter()
                    .all(|(records, _)| *records > 0.0)
                    .then_some(rates)
            },
        );
        for (p, (records, bytes)) in per_partition.iter().enumerate() {
            // Two rates divided: 116 can come out as 115.99999999999999.
            let per_record = bytes / records;
            assert!(
                (116.0 - 1e-6..=180.0).contains(&per_record),
                "partition {p}: {per_record} bytes per record"
            );
        }
        assert!(!real.log().contains("FENCED"));
        assert_eq!(epochs(&read_control_topic(&topic, true)), vec![1]);
    });
    workload.stop().await;
}

// The reader behind the checks above fails loudly: a topic whose end it cannot fetch is an error,
// not "nothing published".
#[test]
#[should_panic(expected = "does the topic exist")]
fn read_keyed_fails_on_a_topic_it_cannot_read() {
    read_keyed(&unique_topic("never-created"), true, |_| true);
}
