//! Sampler consume throughput and memory bound (issue target: >= 500k records/s on one core from the local
//! broker, 16-byte keys and 100-byte values; memory at its configured bound on 10^7 distinct keys).
//!
//! Part 1 pre-fills a topic, then alternates, in the same run, a bare `BaseConsumer` that only counts
//! (the baseline: librdkafka's own cost) and the sampler's real consume loop (`src/sidecar/ingest.rs` with its
//! `Window`, compiled in here via `#[path]`), each from a fresh consumer group on the same records, and prints
//! the median rates and the ratio. Rates are measured from the 1024th record to the last, so the group join
//! does not count. Part 2 feeds 10^7 distinct keys into a `Window` in process and reports the summary's
//! len/capacity and the process RSS.
//!
//! Run: `cargo bench -p dkg-sampler --bench consume_throughput` (broker: `scripts/kafka start`, a missing
//! one fails the run; `DKG_TEST_BOOTSTRAP` overrides 127.0.0.1:9092; `DKG_BENCH_RECORDS` the record count, default 2,000,000;
//! `DKG_BENCH_ROUNDS` the rounds, default 5).

#![allow(clippy::unwrap_used)]

mod common;
#[path = "common/sidecar.rs"]
mod sidecar;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::{env_u64, key, median, prefill};
use dkg_kafka_core::dkg::DkgConfig;
use rand::SeedableRng;
use rand::rngs::SmallRng;
use rand_distr::{Distribution, Zipf};
use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;

use dkg_testkit::broker::unique_topic;
use sidecar::ingest::{self, ConsumeLoop, Shared};
use sidecar::window::{RecordSampler, Window};

const PARTITIONS: u32 = 12;
const KEYS: u64 = 1_000_000;
const WARMUP: u64 = 1024;

fn rss_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn config(bootstrap: &str, group: &str) -> ClientConfig {
    let mut base = ClientConfig::new();
    base.set("bootstrap.servers", bootstrap);
    // The sampler's own consumer settings, for both sides: the difference is the observe work.
    ingest::consumer_config(&base, group, "earliest", 60_000)
}

/// Bare consumer: poll and count.
fn baseline(bootstrap: &str, topic: &str, records: u64, round: u32) -> f64 {
    let consumer: BaseConsumer = config(bootstrap, &format!("bench-baseline-{topic}-{round}"))
        .create()
        .unwrap();
    consumer.subscribe(&[topic]).unwrap();
    let mut n = 0u64;
    let mut bytes = 0usize;
    let mut t0 = None;
    while n < records {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
            bytes += m.key().map_or(0, <[u8]>::len);
            n += 1;
            if n == WARMUP {
                t0 = Some(Instant::now());
            }
        }
    }
    std::hint::black_box(bytes);
    (records - WARMUP) as f64 / t0.unwrap().elapsed().as_secs_f64()
}

/// The sampler's consume loop with its window (optionally sampling).
fn sampler(bootstrap: &str, topic: &str, records: u64, round: u32, ratio: f64) -> (f64, u64) {
    let shared = Arc::new(Shared::default());
    let window = Window::new(
        &DkgConfig::default(),
        PARTITIONS,
        RecordSampler::new(ratio, 7),
    )
    .unwrap();
    let group = format!("bench-sampler-{topic}-{round}-{ratio}");
    let (mut lp, handle) = ConsumeLoop::new(
        &config(bootstrap, &group),
        topic,
        window,
        Arc::clone(&shared),
    )
    .unwrap();
    // The loop counts in steps of 1024 into `polled`: time from the first step to the last full one, so
    // neither the group join nor the final synchronous offset commit counts.
    let last_step = records / 1024 * 1024;
    let watcher = {
        let shared = Arc::clone(&shared);
        std::thread::spawn(move || {
            let wait_for = |n: u64| {
                while shared.polled.load(Ordering::Relaxed) < n {
                    std::thread::sleep(Duration::from_micros(100));
                }
                Instant::now()
            };
            let t0 = wait_for(WARMUP);
            (t0, wait_for(last_step))
        })
    };
    lp.run(Some(records));
    let (t0, t1) = watcher.join().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel();
    handle.send(ingest::Command::Snapshot {
        decay: 0.5,
        reply: tx,
    });
    // The loop has returned: serve the command by hand through a fresh run with limit 0.
    lp.run(Some(0));
    let snap = rx.blocking_recv().unwrap();
    assert_eq!(snap.consumed, records, "every record observed");
    (
        (last_step - WARMUP) as f64 / t1.duration_since(t0).as_secs_f64(),
        snap.sampled,
    )
}

/// The sampler's own per-record work without Kafka: `Window::observe` over the same key stream.
fn observe_only(records: u64) -> Vec<f64> {
    let zipf = Zipf::new(KEYS as f64, 1.0).unwrap();
    let mut rng = SmallRng::seed_from_u64(1);
    let keys: Vec<[u8; 16]> = (0..records)
        .map(|_| key(zipf.sample(&mut rng) as u64))
        .collect();
    (0..5)
        .map(|_| {
            let mut w = Window::new(
                &DkgConfig::default(),
                PARTITIONS,
                RecordSampler::new(1.0, 7),
            )
            .unwrap();
            let started = Instant::now();
            for (i, k) in keys.iter().enumerate() {
                w.observe((i % PARTITIONS as usize) as i32, Some(k));
            }
            let secs = started.elapsed().as_secs_f64();
            std::hint::black_box(w.end_interval(0.5));
            secs * 1e9 / records as f64
        })
        .collect()
}

fn memory_bound() {
    for (label, config) in [
        (
            "default (k = 12: theta = 0.25/k, epsilon = theta/2)",
            DkgConfig::default(),
        ),
        (
            "--epsilon 0.0001",
            DkgConfig::builder()
                .epsilon(0.0001)
                .theta(0.001)
                .build()
                .unwrap(),
        ),
    ] {
        let (rss0, _) = rss_kib();
        let mut w = Window::new(&config, PARTITIONS, RecordSampler::new(1.0, 1)).unwrap();
        let started = Instant::now();
        let n: u64 = 10_000_000;
        let mut probes = Vec::new();
        for i in 0..n {
            let k = key(i); // 10^7 distinct keys
            w.observe((i % u64::from(PARTITIONS)) as i32, Some(&k));
            if (i + 1) % 2_500_000 == 0 {
                probes.push(rss_kib().0);
            }
        }
        let secs = started.elapsed().as_secs_f64();
        let snap = w.end_interval(0.5);
        let (rss1, hwm) = rss_kib();
        let s = snap.window.summary();
        println!(
            "memory {label}: 10^7 distinct keys in {secs:.2} s ({:.0} ns/record); summary len {} / capacity {}, \
             buckets {}; RSS {} KiB before, {} KiB after (at 2.5/5/7.5/10 M keys: {:?} KiB), peak {} KiB",
            secs * 1e9 / n as f64,
            s.len(),
            s.capacity(),
            snap.window.bucket_weights().len(),
            rss0,
            rss1,
            probes,
            hwm
        );
        assert!(s.len() <= s.capacity());
    }
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs benches in test mode: keep that quick.
    let test_mode =
        std::env::args().any(|a| a == "--test") || !std::env::args().any(|a| a == "--bench");
    // Fails loudly without a broker (the same probe as the tests).
    let bootstrap = dkg_testkit::broker::bootstrap();
    let records = env_u64(
        "DKG_BENCH_RECORDS",
        if test_mode { 20_000 } else { 2_000_000 },
    );
    let rounds = env_u64("DKG_BENCH_ROUNDS", if test_mode { 1 } else { 5 }) as u32;
    let topic = unique_topic("bench-consume");
    if !test_mode {
        // First, while the process is small: the RSS numbers then show the sketch alone.
        memory_bound();
        let ns = observe_only(records);
        println!(
            "observe only (Window::observe, same key stream, no Kafka): median {:.0} ns/record over 5 runs {:?}",
            median(ns.clone()),
            ns.iter().map(|v| v.round()).collect::<Vec<_>>()
        );
    }
    prefill(&bootstrap, &topic, PARTITIONS, records, (KEYS, 1.0, 1));

    let (mut base, mut full, mut sampled) = (vec![], vec![], vec![]);
    for round in 0..rounds {
        let b = baseline(&bootstrap, &topic, records, round);
        let (s, _) = sampler(&bootstrap, &topic, records, round, 1.0);
        let (s10, kept) = sampler(&bootstrap, &topic, records, round, 0.1);
        eprintln!(
            "round {round}: baseline {:.0} rec/s, sampler {:.0} rec/s, sampler at --sample-ratio 0.1 {:.0} rec/s ({kept} kept)",
            b, s, s10
        );
        base.push(b);
        full.push(s);
        sampled.push(s10);
    }
    let (b, s, s10) = (median(base), median(full), median(sampled));
    println!(
        "consume throughput, {records} records (16-byte keys, 100-byte values, Zipf 1.0 over 10^6 keys, {PARTITIONS} \
         partitions), median of {rounds}: baseline BaseConsumer {b:.0} rec/s; sampler consume+observe {s:.0} rec/s \
         (ratio {:.3}); sampler --sample-ratio 0.1 {s10:.0} rec/s (ratio {:.3})",
        s / b,
        s10 / b
    );
}
