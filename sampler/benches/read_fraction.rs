//! `--read-fraction` (issue 16, item 2): how fast the sampler's consume loop advances through a backlog,
//! at what CPU cost, and how good the decision built from a fraction of the log is.
//!
//! Part 1, advance and CPU: pre-fills a 12-partition topic (Zipf 1.0 over 10^6 keys, 16-byte keys,
//! 100-byte values; the backlog stands in for a producer faster than the sampler), then alternates rounds
//! of the sampler's real consume loop (`src/sidecar/ingest.rs`, compiled in via `#[path]`) at F = 1 and at
//! `DKG_BENCH_FRACTION` (default 0.1), each from a fresh consumer group at the earliest offset until it
//! has read or skipped every offset. Per round: offsets advanced per second (from the first 1024 records
//! read to the end) and the process's CPU seconds (all threads, librdkafka's included, less the
//! bench's own watcher thread) per 1M offsets advanced. Prints the median of the per-round ratios and
//! their spread.
//!
//! Part 2, decision quality: per cell (Zipf 1.0 and 0.8 over 10^5 keys, 12 and 48 partitions) and seed,
//! a fresh backlog read in full at F = 1 and at F; each window builds an assignment; prints the window's
//! predicted imbalance (max/mean - 1) of its own assignment, the F-window's assignment evaluated on the
//! full window, and how many of the full window's heavy keys the F-window's assignment also pins.
//!
//! Run: `cargo bench -p dkg-sampler --bench read_fraction` (broker: `scripts/kafka start`, a missing one
//! fails the run; `DKG_TEST_BOOTSTRAP` overrides 127.0.0.1:9092). Knobs: `DKG_BENCH_RECORDS` (part 1
//! backlog, default 5,000,000), `DKG_BENCH_ROUNDS` (default 3), `DKG_BENCH_FRACTION` (in thousandths,
//! default 100 = 0.1), `DKG_BENCH_CHUNK` (default the sampler's `--read-chunk`), `DKG_BENCH_QUALITY_RECORDS`
//! (part 2 backlog per cell, default 2,000,000), `DKG_BENCH_QUALITY_CHUNK` (default 1000), `DKG_BENCH_TOPIC`
//! (part 1 on an existing 12-partition backlog of `DKG_BENCH_RECORDS` records instead of a fresh one),
//! `DKG_BENCH_SEEDS` (default 3), `DKG_BENCH_PART` (`advance`, `quality`, default both), `DKG_BENCH_KAFKA`
//! (`key=value,...` librdkafka settings for both sides, e.g. `queued.min.messages=2500`).

#![allow(clippy::unwrap_used)]

mod common;
#[path = "common/sidecar.rs"]
mod sidecar;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::{env_u64, median, prefill, process_cpu_secs, spread, thread_cpu_secs};
use dkg_partitioner::dkg::{DkgConfig, imbalance};
use rdkafka::ClientConfig;

use dkg_testkit::broker::unique_topic;
use sidecar::ingest::{self, ConsumeLoop, Shared};
use sidecar::window::{IntervalSnapshot, RecordSampler, Window};

/// One pass through a backlog of `records` offsets.
struct Pass {
    snap: IntervalSnapshot,
    /// Offsets advanced per second, from the first 1024 records read to the end.
    rate: f64,
    /// Process CPU seconds (less the watcher's) per 1M offsets advanced.
    cpu_per_m: f64,
}

fn config(bootstrap: &str, group: &str, fraction: f64, chunk: u64) -> ClientConfig {
    let mut base = ClientConfig::new();
    base.set("bootstrap.servers", bootstrap);
    // DKG_BENCH_KAFKA: `key=value,key=value` librdkafka settings that win, as `--kafka-config` would.
    for kv in std::env::var("DKG_BENCH_KAFKA")
        .unwrap_or_default()
        .split(',')
    {
        if let Some((k, v)) = kv.split_once('=') {
            base.set(k.trim(), v.trim());
        }
    }
    // The sampler's own settings (`startup.rs`): statistics every second, prefetch bounded with F < 1.
    let mut c = ingest::consumer_config(&base, group, "earliest", 1000);
    if fraction < 1.0 {
        ingest::bound_prefetch(&mut c, &base, chunk);
    }
    c
}

/// Read (or skip) every offset of `topic` from a fresh group at `fraction`.
fn pass(
    bootstrap: &str,
    topic: &str,
    (partitions, records): (u32, u64),
    (fraction, chunk): (f64, u64),
    group: &str,
) -> Pass {
    let shared = Arc::new(Shared::default());
    let window = Window::new(
        &DkgConfig::default(),
        partitions,
        RecordSampler::new(1.0, 7),
    )
    .unwrap();
    let (mut lp, handle) = ConsumeLoop::new(
        &config(bootstrap, group, fraction, chunk),
        topic,
        window,
        Arc::clone(&shared),
    )
    .unwrap();
    lp.read_fraction(fraction, chunk, false);
    let watcher = {
        let shared = Arc::clone(&shared);
        std::thread::spawn(move || {
            while shared.polled.load(Ordering::Relaxed) < 1024 {
                std::thread::sleep(Duration::from_millis(1));
            }
            let advanced =
                shared.polled.load(Ordering::Relaxed) + shared.skipped.load(Ordering::Relaxed);
            (Instant::now(), advanced, thread_cpu_secs())
        })
    };
    let cpu0 = process_cpu_secs();
    lp.run(Some(records));
    let t1 = Instant::now();
    let cpu = process_cpu_secs() - cpu0;
    let (t0, advanced0, watcher_cpu) = watcher.join().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel();
    handle.send(ingest::Command::Snapshot {
        decay: 0.0,
        reply: tx,
    });
    lp.run(Some(0)); // serves the command
    let snap = rx.blocking_recv().unwrap();
    assert_eq!(
        snap.consumed + snap.skipped,
        records,
        "every offset read or skipped"
    );
    Pass {
        rate: (records - advanced0) as f64 / t1.duration_since(t0).as_secs_f64(),
        cpu_per_m: (cpu - watcher_cpu).max(0.0) * 1e6 / records as f64,
        snap,
    }
}

fn advance(bootstrap: &str, records: u64, rounds: u32, fraction: f64, chunk: u64) {
    // DKG_BENCH_TOPIC: an existing backlog of exactly `records` records on 12 partitions (saves the fill).
    let topic = std::env::var("DKG_BENCH_TOPIC").unwrap_or_else(|_| {
        let topic = unique_topic("bench-readfrac");
        prefill(bootstrap, &topic, 12, records, (1_000_000, 1.0, 1));
        topic
    });
    let (mut rate_ratio, mut cpu_ratio, mut full_rates, mut part_rates) =
        (vec![], vec![], vec![], vec![]);
    let (mut full_cpu, mut part_cpu) = (vec![], vec![]);
    for round in 0..rounds {
        let full = pass(
            bootstrap,
            &topic,
            (12, records),
            (1.0, chunk),
            &unique_topic(&format!("{topic}-full-{round}")),
        );
        let part = pass(
            bootstrap,
            &topic,
            (12, records),
            (fraction, chunk),
            &unique_topic(&format!("{topic}-part-{round}")),
        );
        eprintln!(
            "round {round}: F = 1 {:.0} offsets/s, {:.2} CPU s/1M; F = {fraction} {:.0} offsets/s, {:.2} CPU s/1M \
             (read {}, skipped {}); load {}",
            full.rate,
            full.cpu_per_m,
            part.rate,
            part.cpu_per_m,
            part.snap.consumed,
            part.snap.skipped,
            load()
        );
        rate_ratio.push(part.rate / full.rate);
        cpu_ratio.push(full.cpu_per_m / part.cpu_per_m.max(1e-9));
        full_rates.push(full.rate);
        part_rates.push(part.rate);
        full_cpu.push(full.cpu_per_m);
        part_cpu.push(part.cpu_per_m);
    }
    let (lo, hi) = spread(&rate_ratio);
    let (clo, chi) = spread(&cpu_ratio);
    println!(
        "advance, {records} records, 12 partitions, chunk {chunk}, {rounds} interleaved rounds: F = 1 median {:.0} \
         offsets/s, {:.2} CPU s per 1M; F = {fraction} median {:.0} offsets/s, {:.2} CPU s per 1M; advance ratio \
         median {:.2}x (min {lo:.2}, max {hi:.2}); CPU saving median {:.2}x (min {clo:.2}, max {chi:.2})",
        median(full_rates),
        median(full_cpu),
        median(part_rates),
        median(part_cpu),
        median(rate_ratio.clone()),
        median(cpu_ratio.clone()),
    );
}

fn quality(bootstrap: &str, records: u64, seeds: u64, fraction: f64, chunk: u64) {
    println!(
        "| Zipf | k | seed | F = 1 fresh | F = {fraction} fresh | F = {fraction} assignment on the full window | \
         hash | heavy keys (full / also pinned by F) | read at F |"
    );
    let mut worst: f64 = 0.0;
    for (alpha, k) in [(1.0, 12u32), (0.8, 12), (1.0, 48), (0.8, 48)] {
        for seed in 1..=seeds {
            let topic = unique_topic("bench-readfrac-q");
            prefill(bootstrap, &topic, k, records, (100_000, alpha, seed));
            let full = pass(
                bootstrap,
                &topic,
                (k, records),
                (1.0, chunk),
                &format!("{topic}-full"),
            );
            let part = pass(
                bootstrap,
                &topic,
                (k, records),
                (fraction, chunk),
                &format!("{topic}-part"),
            );
            let (fw, pw) = (&full.snap.window, &part.snap.window);
            let fb = fw.build(&topic, 1, 0, None).unwrap();
            let pb = pw.build(&topic, 1, 0, None).unwrap();
            let own = |w: &dkg_partitioner::dkg::Sketch, a| {
                w.predict(a).map_or(f64::NAN, |l| imbalance(&l))
            };
            let (f_fresh, p_fresh) = (own(fw, &fb.assignment), own(pw, &pb.assignment));
            let cross = own(fw, &pb.assignment);
            let heavy = |a: &dkg_partitioner::assignment::Assignment| -> BTreeSet<Vec<u8>> {
                a.heavy().iter().map(|h| h.key.clone()).collect()
            };
            let (fh, ph) = (heavy(&fb.assignment), heavy(&pb.assignment));
            worst = worst
                .max((p_fresh - f_fresh).abs())
                .max((cross - f_fresh).abs());
            println!(
                "| {alpha} | {k} | {seed} | {:.2}% | {:.2}% | {:.2}% | {:.1}% | {} / {} | {} of {records} |",
                f_fresh * 100.0,
                p_fresh * 100.0,
                cross * 100.0,
                imbalance(&fw.predict_hash()) * 100.0,
                fh.len(),
                fh.intersection(&ph).count(),
                part.snap.consumed,
            );
        }
    }
    println!(
        "quality: chunk {chunk}, largest difference to full reading {:.2} points",
        worst * 100.0
    );
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` runs benches in test mode: keep that quick.
    let test_mode =
        std::env::args().any(|a| a == "--test") || !std::env::args().any(|a| a == "--bench");
    let bootstrap = dkg_testkit::broker::bootstrap();
    let fraction = env_u64("DKG_BENCH_FRACTION", 100) as f64 / 1000.0;
    let part = std::env::var("DKG_BENCH_PART").unwrap_or_default();
    if part != "quality" {
        advance(
            &bootstrap,
            env_u64(
                "DKG_BENCH_RECORDS",
                if test_mode { 60_000 } else { 5_000_000 },
            ),
            env_u64("DKG_BENCH_ROUNDS", if test_mode { 1 } else { 3 }) as u32,
            fraction,
            env_u64(
                "DKG_BENCH_CHUNK",
                if test_mode {
                    500
                } else {
                    sidecar::fraction::DEFAULT_READ_CHUNK
                },
            ),
        );
    }
    if part != "advance" && !test_mode {
        quality(
            &bootstrap,
            env_u64("DKG_BENCH_QUALITY_RECORDS", 2_000_000),
            env_u64("DKG_BENCH_SEEDS", 3),
            fraction,
            env_u64("DKG_BENCH_QUALITY_CHUNK", 1000),
        );
    }
}
