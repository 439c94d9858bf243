//! 1,000 partitions on the real broker (issue 16, item 3): `dkg-sampler run --once` learns a Zipf(1.0)
//! stream over a 1,000-partition topic and publishes its assignment (default mu: 64,000 buckets) to a
//! control topic created with the broker's default `max.message.bytes`, so the publication itself
//! proves the document fits the default limits; a `DkgProducer` adopts it and its records land where
//! the assignment says.

mod common;

use std::collections::HashSet;
use std::time::{Duration, Instant};

use common::*;
use dkg_kafka::Assignment;
use dkg_kafka::DkgProducer;
use dkg_kafka_core::DEFAULT_LIMITS_DOCUMENT_BYTES;
use rdkafka::ClientConfig;
use rdkafka::producer::FutureRecord;

const PARTITIONS: u32 = 1000;
/// Records on the topic before the sampler starts.
const BACKLOG: i64 = 80_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_partition_assignment_fits_default_limits_and_the_producer_follows_it() {
    let bootstrap = bootstrap();
    let topic = unique_topic("sampler-1000");
    // Only what the sampler requires of a control topic: compacted, one partition. No
    // max.message.bytes: the broker's default (1048588) applies.
    let control = unique_topic("control-1000");
    let created = Instant::now();
    create_topic(&bootstrap, &control, 1, &[("cleanup.policy", "compact")]).await;
    create_topic(&bootstrap, &topic, PARTITIONS, &[]).await;
    eprintln!("topics created in {:?}", created.elapsed());

    let workload = Workload::start(WorkloadSpec {
        keys: 100_000,
        records_per_second: 20_000,
        dkg: false,
        ..WorkloadSpec::zipf(&topic, 16)
    })
    .await;
    // A backlog first: a consumer of 1,000 partitions needs seconds to start fetching them all. The
    // backlog is a number of records on the topic (4 s of the workload at its rate), not a time: a
    // starved producer makes a time window's backlog too thin to learn from.
    tokio::task::block_in_place(|| EndOffsets::new(&topic, PARTITIONS).wait_total(BACKLOG));
    let published = tokio::task::block_in_place(|| {
        let mut sampler = Sampler::start(
            "thousand",
            &topic,
            // From the earliest offset: fetching 1,000 partitions starts slowly on a busy broker, and
            // the backlog since the workload started is what --once learns from.
            &[
                "--once",
                "--interval-secs",
                "8",
                "--auto-offset-reset",
                "earliest",
                "--control-topic",
                &control,
            ],
        );
        let status = sampler.wait_exit(Duration::from_secs(90));
        assert!(
            status.success(),
            "--once publishes and exits 0: {status}\n{}",
            sampler.log()
        );
        read_keyed_on(&bootstrap, &control, true, |k| k == topic.as_bytes())
    });
    workload.stop().await;

    let [(_, _, Some(json))] = published.as_slice() else {
        panic!("expected one published document, got {published:?}");
    };
    assert!(
        json.len() < DEFAULT_LIMITS_DOCUMENT_BYTES,
        "document of {} bytes",
        json.len()
    );
    let assignment = Assignment::from_json(json).expect("a valid document");
    assert_eq!(assignment.partitions(), PARTITIONS);
    assert_eq!(assignment.buckets(), 64 * PARTITIONS, "default mu 64");
    assert!(
        assignment.heavy().len() >= 20,
        "Zipf(1.0) over 10^5 keys has dozens of keys above 1/(4k): {}",
        assignment.heavy().len()
    );

    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", &bootstrap)
        .set("log_level", "3");
    let producer = DkgProducer::builder(config)
        .control_topic(&control)
        .topics([topic.clone()])
        .build()
        .await
        .expect("build DkgProducer");
    tokio::task::block_in_place(|| {
        // Event-based: the producer's first control-topic read; the bound (60 s) only a producer
        // that never reads it reaches.
        wait_for(
            "the producer to adopt the assignment",
            Duration::from_secs(60),
            || {
                producer
                    .router()
                    .assignment(&topic)
                    .filter(|a| a.epoch() == assignment.epoch())
            },
        )
    });
    // Every heavy key and 1,000 other keys: the broker's delivery report says where each landed.
    let keys: Vec<Vec<u8>> = assignment
        .heavy()
        .iter()
        .map(|h| h.key.clone())
        .chain((0..1000).map(|i| zipf_key(0, 200_000 + i).into_bytes()))
        .collect();
    // Queued all at once, then awaited: one delivery round trip per key would take a minute.
    let deliveries: Vec<_> = keys
        .iter()
        .map(|key| {
            producer
                .send_result(FutureRecord::to(&topic).key(key).payload("v"))
                .map_err(|(e, _)| e)
                .expect("queued")
        })
        .collect();
    let mut landed = HashSet::new();
    for (key, delivery) in keys.iter().zip(deliveries) {
        let delivery = delivery
            .await
            .expect("delivery report")
            .map_err(|(e, _)| e)
            .expect("delivered");
        let expected = assignment.partition_for(key);
        assert_eq!(
            u32::try_from(delivery.partition).ok(),
            Some(expected),
            "key {:?}",
            String::from_utf8_lossy(key)
        );
        landed.insert(expected);
    }
    assert!(
        landed.len() > 500,
        "1,000+ keys spread over the partitions: {} distinct",
        landed.len()
    );
}
