//! Consumer throughput with no epoch change: `DkgConsumer` against a plain rdkafka
//! `StreamConsumer`, same broker, same pre-filled topic, runs alternated so drift on a noisy machine
//! hits both alike.
//!
//! ```text
//! scripts/kafka start
//! cargo bench -p dkg-kafka --bench consumer_throughput
//! ```
//!
//! Workload: `DKG_BENCH_RECORDS` (default 1 200 000, about 180 MB) records with 16-byte Zipf(1.1)
//! keys over 100 000 keys and 100-byte values, in 12 partitions, written once before the runs. Two topics hold the
//! same records: `unstamped` (what a `DkgProducer` writes in a steady epoch with the default
//! `EpochHeader::Moved`: no headers) and `stamped` (every record carries `dkg-epoch`, as with
//! `EpochHeader::All`; the consumer parses and copies a header per record). An assignment is
//! published so the consumer knows the epoch, and nothing moves.
//!
//! Each run is a fresh consumer group reading its topic from the beginning; the clock runs from the
//! record at one third to the last, so group joins and the initial prefetch (librdkafka queues up
//! to 64 MB ahead) do not count: every variant is measured consuming at steady state. The
//! application work is the same for all: read the key and payload lengths. Four variants, paired:
//! plain `StreamConsumer::recv` (borrowed) against `DkgConsumer::recv_borrowed` (borrowed), and
//! plain `recv` + `detach` (an owned copy per record) against `DkgConsumer::recv` (owned).
//! `DKG_BENCH_RUNS` (default 5) rounds, the order rotated every round. Prints each variant's median
//! records/s and the consuming thread's CPU per record (from `/proc/thread-self/stat`, immune to
//! other processes on the machine), and the median over rounds of each pair's ratio.
//!
//! Every variant's consumer sets librdkafka's `fetch.queue.backoff.ms` to
//! `DKG_BENCH_FETCH_BACKOFF_MS` (default 10). With librdkafka's default of 1000 ms a consumer
//! that drains its prefetch queue faster than the fetcher refills it waits up to a second for the
//! next fetch, and every variant then spends most of the run idle: measured rates fall into a few
//! levels set by the backoff cycle (0.15, 0.18, 0.23, 0.35, 0.6 M records/s on the 2-core test
//! box) rather than by what the consumer costs, and the same variant jumps between them. 10 ms
//! keeps the consuming thread busy, so the rates and ratios measure the consumers;
//! `DKG_BENCH_FETCH_BACKOFF_MS=1000` reproduces the default.
//!
//! Needs the broker (`DKG_TEST_BOOTSTRAP`, default 127.0.0.1:9092): exits with an error if absent.
//! Run without `--bench` (as `cargo test --all-targets` does) it only makes a 2 000-record smoke
//! run.

mod common;
use common::{BoxError, config, cpu_secs, create_topic, env_or, median, setup};

use std::time::{Duration, Instant};

use dkg_kafka::Assignment;
use dkg_kafka::DkgConsumer;
use dkg_kafka::kafka::control::{publish_assignment, publisher_config};
use dkg_kafka::kafka::{control, producer_config, stamp_epoch};
use dkg_kafka_core::{AssignmentParts, BucketHash, Params};
use dkg_testkit::send::send_windowed;
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand_distr::{Distribution, Zipf};
use rdkafka::Message as _;
use rdkafka::admin::{AdminClient, AdminOptions};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::producer::future_producer::OwnedDeliveryResult;
use rdkafka::producer::{FutureProducer, FutureRecord};

const PARTITIONS: u32 = 12;
const KEYS: u32 = 100_000;
const VALUE_BYTES: usize = 100;

/// Write `records` records (Zipf keys) to `topic`, with a `dkg-epoch` header on each if `stamped`.
async fn fill(bootstrap: &str, topic: &str, records: usize, stamped: bool) -> Result<(), BoxError> {
    let producer: FutureProducer = producer_config(&config(bootstrap))
        .set("linger.ms", "20")
        .create()?;
    let zipf = Zipf::new(f64::from(KEYS), 1.1)?;
    let mut rng = StdRng::seed_from_u64(7);
    let value = [b'v'; VALUE_BYTES];
    let mut in_flight = std::collections::VecDeque::new();
    let mut failed = 0_u64;
    let mut settle =
        |r: Result<OwnedDeliveryResult, _>| failed += u64::from(!matches!(r, Ok(Ok(_))));
    for _ in 0..records {
        let key = format!("{:016}", zipf.sample(&mut rng) as u64);
        let mut record = FutureRecord::to(topic)
            .key(key.as_bytes())
            .payload(&value[..]);
        if stamped {
            record = record.headers(stamp_epoch(None, 1));
        }
        // The client's own `send_result` shape: the record comes back inside the error.
        #[allow(clippy::result_large_err)]
        let send = |r| producer.send_result(r);
        send_windowed(send, record, &mut in_flight, 50_000, &mut settle).await?;
    }
    for f in in_flight {
        settle(f.await);
    }
    if failed > 0 {
        return Err(format!("{failed} deliveries failed").into());
    }
    Ok(())
}

fn assignment(topic: &str) -> Result<Assignment, BoxError> {
    Ok(Assignment::new(AssignmentParts {
        topic: topic.to_owned(),
        partitions: PARTITIONS,
        epoch: 1,
        bucket_hash: BucketHash::default(),
        table: (0..PARTITIONS * 8).map(|b| b % PARTITIONS).collect(),
        heavy: vec![],
        params: Params {
            theta: 0.02,
            epsilon: 0.01,
            mu: 8.0,
            window_records: 100_000,
        },
        created_at_ms: 0,
        predicted_load: vec![1.0 / f64::from(PARTITIONS); PARTITIONS as usize],
    })?)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    Plain,
    /// The plain consumer copying each record into an owned message (`detach`), as an
    /// application that hands records to other tasks does: the same work as `DkgConsumer::recv`.
    PlainOwned,
    /// `DkgConsumer::recv_borrowed`: no copy, like the plain consumer.
    Dkg,
    /// `DkgConsumer::recv`: an owned copy per record, like `plain+detach`.
    DkgOwned,
}

struct Names<'a> {
    bootstrap: &'a str,
    control: &'a str,
    handoff: &'a str,
}

/// One run's result.
#[derive(Clone, Copy, Debug)]
struct Measured {
    /// Records/s from the first record to the last.
    rate: f64,
    /// CPU of the consuming thread per record (µs), same window.
    cpu_us: f64,
}

/// Read `records` records of `topic` with a fresh group.
async fn run(
    variant: Variant,
    names: &Names<'_>,
    topic: &str,
    records: usize,
    run: usize,
) -> Result<Measured, BoxError> {
    let group = format!(
        "bench-consumer-{}-{run}-{variant:?}-{topic}",
        std::process::id()
    );
    let mut c = config(names.bootstrap);
    c.set("auto.offset.reset", "earliest").set(
        "fetch.queue.backoff.ms",
        env_or("DKG_BENCH_FETCH_BACKOFF_MS", 10_u32).to_string(),
    );
    let mut bytes = 0_usize;
    let mut start = None;
    // The clock starts once a third is consumed: by then librdkafka's prefetch queue (64 MB by
    // default) no longer holds a large share of what is left, and every variant is measured
    // fetching at steady state rather than draining memory.
    let warm = records / 3;
    let mut seen = 0_usize;
    let mut cpu_start = 0.0;
    let (end_cpu, end);
    match variant {
        Variant::Plain | Variant::PlainOwned => {
            let consumer: StreamConsumer = c
                .clone()
                .set("group.id", &group)
                .set("enable.auto.commit", "false")
                .set("partition.assignment.strategy", "cooperative-sticky")
                .create()?;
            consumer.subscribe(&[topic])?;
            for _ in 0..records {
                let m = consumer.recv().await?;
                seen += 1;
                if seen == warm {
                    cpu_start = cpu_secs("/proc/thread-self/stat");
                    start = Some(Instant::now());
                }
                if variant == Variant::PlainOwned {
                    let m = m.detach();
                    bytes += m.key().map_or(0, <[u8]>::len) + m.payload().map_or(0, <[u8]>::len);
                } else {
                    bytes += m.key().map_or(0, <[u8]>::len) + m.payload().map_or(0, <[u8]>::len);
                }
            }
            end_cpu = cpu_secs("/proc/thread-self/stat");
            end = Instant::now();
        }
        Variant::Dkg | Variant::DkgOwned => {
            let mut consumer = DkgConsumer::builder(c)
                .topic(topic)
                .group(&group)
                .control_topic(names.control)
                .handoff_topic(names.handoff)
                .commit_interval(None)
                .build()
                .await?;
            for _ in 0..records {
                if variant == Variant::DkgOwned {
                    let m = consumer.recv().await?;
                    bytes += m.key().map_or(0, <[u8]>::len) + m.payload().map_or(0, <[u8]>::len);
                } else {
                    let m = consumer.recv_borrowed().await?;
                    bytes += m.key().map_or(0, <[u8]>::len) + m.payload().map_or(0, <[u8]>::len);
                }
                seen += 1;
                if seen == warm {
                    cpu_start = cpu_secs("/proc/thread-self/stat");
                    start = Some(Instant::now());
                }
            }
            end_cpu = cpu_secs("/proc/thread-self/stat");
            end = Instant::now();
            consumer.close().await?;
        }
    }
    let secs = start.map_or(0.0, |s| end.duration_since(s).as_secs_f64());
    if bytes < records * VALUE_BYTES {
        return Err(format!("read only {bytes} bytes").into());
    }
    let measured = (records - warm) as f64;
    Ok(Measured {
        rate: measured / secs.max(1e-9),
        cpu_us: (end_cpu - cpu_start) * 1e6 / measured,
    })
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), BoxError> {
    let (bootstrap, records, runs, id) = setup("consumer_throughput", 1_200_000, 3_000)?;
    let control = format!("bench-consumer-control-{id}");
    let handoff = format!("bench-consumer-handoff-{id}");
    let topics = [
        ("unstamped", format!("bench-consumer-plain-{id}"), false),
        ("stamped", format!("bench-consumer-stamped-{id}"), true),
    ];
    let admin: AdminClient<DefaultClientContext> = config(&bootstrap).create()?;
    control::ensure_control_topic(&admin, &control, 1).await?;
    let publisher: FutureProducer = publisher_config(&config(&bootstrap)).create()?;
    for (_, topic, stamped) in &topics {
        create_topic(&bootstrap, topic, PARTITIONS).await?;
        fill(&bootstrap, topic, records, *stamped).await?;
        publish_assignment(
            &publisher,
            &control,
            &assignment(topic)?,
            Duration::from_secs(10),
        )
        .await?;
    }
    let names = Names {
        bootstrap: &bootstrap,
        control: &control,
        handoff: &handoff,
    };
    println!(
        "consumer_throughput: {records} records x {runs} runs per variant and topic, 16-byte \
         Zipf(1.1) keys, {VALUE_BYTES}-byte values, {PARTITIONS} partitions, broker {bootstrap}, \
         fetch.queue.backoff.ms {}",
        env_or("DKG_BENCH_FETCH_BACKOFF_MS", 10_u32)
    );
    const VARIANTS: [(Variant, &str); 4] = [
        (Variant::Plain, "plain recv"),
        (Variant::Dkg, "DkgConsumer::recv_borrowed"),
        (Variant::PlainOwned, "plain recv+detach"),
        (Variant::DkgOwned, "DkgConsumer::recv"),
    ];
    for (label, topic, _) in &topics {
        // Warm-up (page cache, connections), not measured.
        for (v, _) in VARIANTS {
            run(v, &names, topic, records.min(50_000), 1_000).await?;
        }
        let mut rates: [Vec<f64>; 4] = Default::default();
        let mut cpus: [Vec<f64>; 4] = Default::default();
        let (mut borrowed, mut owned) = (Vec::new(), Vec::new());
        for r in 0..runs {
            // Rotate which goes first.
            let mut round = [None; 4];
            for k in 0..VARIANTS.len() {
                let i = (k + r) % VARIANTS.len();
                round[i] = Some(run(VARIANTS[i].0, &names, topic, records, r).await?);
            }
            let [Some(p), Some(d), Some(po), Some(dout)] = round else {
                return Err("a variant did not run".into());
            };
            println!(
                "  {label} round {r}: plain {:.0}/s ({:.2} us CPU), dkg borrowed {:.0}/s ({:.2} us), \
                 plain+detach {:.0}/s ({:.2} us), dkg owned {:.0}/s ({:.2} us)",
                p.rate, p.cpu_us, d.rate, d.cpu_us, po.rate, po.cpu_us, dout.rate, dout.cpu_us
            );
            for (i, m) in [p, d, po, dout].iter().enumerate() {
                rates[i].push(m.rate);
                cpus[i].push(m.cpu_us);
            }
            borrowed.push(d.rate / p.rate);
            owned.push(dout.rate / po.rate);
        }
        for (i, (_, name)) in VARIANTS.iter().enumerate() {
            println!(
                "{label}: {name}: median {:.0} records/s, {:.2} us CPU/record (consuming thread)",
                median(&mut rates[i]),
                median(&mut cpus[i])
            );
        }
        println!(
            "{label}: median paired throughput ratio, DkgConsumer::recv_borrowed / plain recv: \
             {:.3}; DkgConsumer::recv / plain recv+detach: {:.3}",
            median(&mut borrowed),
            median(&mut owned)
        );
    }
    // Leave the broker tidy: the bench topics are throwaway.
    let names: Vec<&str> = topics
        .iter()
        .map(|(_, t, _)| t.as_str())
        .chain([control.as_str(), handoff.as_str()])
        .collect();
    let _ = admin.delete_topics(&names, &AdminOptions::new()).await;
    Ok(())
}
