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
//! full window, the equal-sample baseline's (F = 1 on the log's first as many records as F read) on the
//! full window, and how many of the full window's heavy keys the F-window's assignment also pins. With
//! `DKG_BENCH_QUALITY_INTERVALS` = m > 0 also the windows the sampler really uses: the backlog gone
//! through in m intervals of equal offsets (the traffic of a topic followed at the head), each ended
//! with `--decay 0.5` (at F < 1 the loop's stretched decay, `fraction::window_decay`), the last
//! interval's window's assignment evaluated on the full window, at F = 1 and at F.
//!
//! Run: `cargo bench -p dkg-sampler --bench read_fraction` (broker: `scripts/kafka start`, a missing one
//! fails the run; `DKG_TEST_BOOTSTRAP` overrides 127.0.0.1:9092). Knobs: `DKG_BENCH_RECORDS` (part 1
//! backlog, default 5,000,000), `DKG_BENCH_ROUNDS` (default 3), `DKG_BENCH_FRACTION` (in thousandths,
//! default 100 = 0.1), `DKG_BENCH_CHUNK` (default the sampler's `--read-chunk`), `DKG_BENCH_QUALITY_RECORDS`
//! (part 2 backlog per cell, default 2,000,000), `DKG_BENCH_QUALITY_CHUNK` (default 1000), `DKG_BENCH_TOPIC`
//! (part 1 on an existing 12-partition backlog of `DKG_BENCH_RECORDS` records instead of a fresh one),
//! `DKG_BENCH_SEEDS` (default 3), `DKG_BENCH_PART` (`advance`, `quality`, default both), `DKG_BENCH_KAFKA`
//! (`key=value,...` librdkafka settings for both sides, e.g. `queued.min.messages=2500`),
//! `DKG_BENCH_CANDIDATE` / `DKG_BENCH_CANDIDATE_CHUNK` (a third side per round: F with these settings
//! winning over the sampler's, and this chunk), `DKG_BENCH_QUALITY_PARTITIONS` (part 2 cells, default
//! `12,48`), `DKG_BENCH_QUALITY_INTERVALS` (default 0: the windowed columns off).

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
    /// Records librdkafka fetched and parsed per record read (1 = nothing discarded).
    fetched_per_read: f64,
    /// Records delivered inside a skipped range (the seek came too late for them).
    dropped: u64,
}

/// `key=value,key=value` librdkafka settings from the environment variable `var` into `c`.
fn set_from_env(c: &mut ClientConfig, var: &str) {
    for kv in std::env::var(var).unwrap_or_default().split(',') {
        if let Some((k, v)) = kv.split_once('=') {
            c.set(k.trim(), v.trim());
        }
    }
}

fn config(
    bootstrap: &str,
    group: &str,
    fraction: f64,
    chunk: u64,
    candidate: bool,
) -> ClientConfig {
    let mut base = ClientConfig::new();
    base.set("bootstrap.servers", bootstrap);
    // DKG_BENCH_KAFKA: settings that win on both sides, as `--kafka-config` would.
    set_from_env(&mut base, "DKG_BENCH_KAFKA");
    // The sampler's own settings (`startup.rs`): statistics every second, prefetch bounded with F < 1.
    let mut c = ingest::consumer_config(&base, group, "earliest", 1000);
    if fraction < 1.0 {
        ingest::bound_prefetch(&mut c, &base, chunk);
    }
    if candidate {
        // DKG_BENCH_CANDIDATE: settings of the candidate side only, winning over the sampler's own.
        set_from_env(&mut c, "DKG_BENCH_CANDIDATE");
    }
    c
}

/// A consume loop over `topic` from a fresh group at `fraction` (the sampler's real one).
fn open(
    bootstrap: &str,
    topic: &str,
    partitions: u32,
    (fraction, chunk): (f64, u64),
    group: &str,
    candidate: bool,
) -> (ConsumeLoop, ingest::ConsumerHandle, Arc<Shared>) {
    let shared = Arc::new(Shared::default());
    let window = Window::new(
        &DkgConfig::default(),
        partitions,
        RecordSampler::new(1.0, 7),
    )
    .unwrap();
    let (mut lp, handle) = ConsumeLoop::new(
        &config(bootstrap, group, fraction, chunk, candidate),
        topic,
        window,
        Arc::clone(&shared),
    )
    .unwrap();
    lp.read_fraction(fraction, chunk, false);
    (lp, handle, shared)
}

/// End the loop's interval as the sampler's driver does (the window then decays by `decay`, or by the
/// read-fraction's stretched decay).
fn end_interval(
    lp: &mut ConsumeLoop,
    handle: &ingest::ConsumerHandle,
    decay: f64,
) -> IntervalSnapshot {
    let (tx, rx) = tokio::sync::oneshot::channel();
    handle.send(ingest::Command::Snapshot { decay, reply: tx });
    lp.run(Some(0)); // serves the command
    rx.blocking_recv().unwrap()
}

/// Read (or skip) every offset of `topic` from a fresh group at `fraction`.
fn pass(
    bootstrap: &str,
    topic: &str,
    (partitions, records): (u32, u64),
    (fraction, chunk): (f64, u64),
    group: &str,
    candidate: bool,
) -> Pass {
    let (mut lp, handle, shared) = open(
        bootstrap,
        topic,
        partitions,
        (fraction, chunk),
        group,
        candidate,
    );
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
    // librdkafka's statistics (every second) catch up with the end of the pass.
    let stop = {
        let handle = handle.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(1100));
            handle.send(ingest::Command::Shutdown);
        })
    };
    lp.run(None);
    stop.join().unwrap();
    let fetched = shared.fetched.load(Ordering::Relaxed);
    let snap = end_interval(&mut lp, &handle, 0.0);
    assert_eq!(
        snap.consumed + snap.skipped,
        records,
        "every offset read or skipped"
    );
    Pass {
        rate: (records - advanced0) as f64 / t1.duration_since(t0).as_secs_f64(),
        cpu_per_m: (cpu - watcher_cpu).max(0.0) * 1e6 / records as f64,
        fetched_per_read: fetched as f64 / snap.consumed.max(1) as f64,
        dropped: shared.dropped.load(Ordering::Relaxed),
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
    // The sides of each round, in this order: F = 1, F, and the candidate (F with DKG_BENCH_CANDIDATE's
    // settings and DKG_BENCH_CANDIDATE_CHUNK's chunk) when one is given.
    let mut sides = vec![("F = 1".to_owned(), 1.0, chunk, false)];
    sides.push((format!("F = {fraction}"), fraction, chunk, false));
    if !std::env::var("DKG_BENCH_CANDIDATE")
        .unwrap_or_default()
        .is_empty()
        || std::env::var("DKG_BENCH_CANDIDATE_CHUNK").is_ok()
    {
        let c = env_u64("DKG_BENCH_CANDIDATE_CHUNK", chunk);
        sides.push((format!("candidate (chunk {c})"), fraction, c, true));
    }
    // Per side: rates, CPU per 1M offsets, and the ratios to F = 1 of each round.
    let mut rates = vec![vec![]; sides.len()];
    let mut cpus = vec![vec![]; sides.len()];
    for round in 0..rounds {
        let mut line = format!("round {round}:");
        for (i, (name, f, c, candidate)) in sides.iter().enumerate() {
            let p = pass(
                bootstrap,
                &topic,
                (12, records),
                (*f, *c),
                &unique_topic(&format!("{topic}-{i}-{round}")),
                *candidate,
            );
            line += &format!(
                " {name} {:.0} offsets/s, {:.3} CPU s/1M (read {}, fetched {:.2}x that, {} dropped);",
                p.rate, p.cpu_per_m, p.snap.consumed, p.fetched_per_read, p.dropped
            );
            rates[i].push(p.rate);
            cpus[i].push(p.cpu_per_m);
        }
        eprintln!("{line} load {}", load());
    }
    for (i, (name, ..)) in sides.iter().enumerate() {
        let rate_ratio: Vec<f64> = rates[i].iter().zip(&rates[0]).map(|(p, f)| p / f).collect();
        let cpu_ratio: Vec<f64> = cpus[0]
            .iter()
            .zip(&cpus[i])
            .map(|(f, p)| f / p.max(1e-9))
            .collect();
        let (lo, hi) = spread(&rate_ratio);
        let (clo, chi) = spread(&cpu_ratio);
        println!(
            "advance, {records} records, 12 partitions, {rounds} interleaved rounds, {name}: median {:.0} \
             offsets/s, {:.3} CPU s per 1M; advance ratio to F = 1 median {:.2}x (min {lo:.2}, max {hi:.2}); \
             CPU saving median {:.2}x (min {clo:.2}, max {chi:.2})",
            median(rates[i].clone()),
            median(cpus[i].clone()),
            median(rate_ratio.clone()),
            median(cpu_ratio.clone()),
        );
    }
}

/// Go through every offset of `topic` at `fraction` in `intervals` intervals of equal offsets advanced
/// (a topic followed at the head: each interval brings the same traffic), ending each as the sampler does
/// with `--decay 0.5`; returns the last interval's window (the one the sampler would build from).
fn windowed(
    bootstrap: &str,
    topic: &str,
    (partitions, records, intervals): (u32, u64, u64),
    (fraction, chunk): (f64, u64),
    group: &str,
) -> IntervalSnapshot {
    let (mut lp, handle, shared) = open(
        bootstrap,
        topic,
        partitions,
        (fraction, chunk),
        group,
        false,
    );
    let step = records.div_ceil(intervals.max(1));
    let advanced =
        || shared.polled.load(Ordering::Relaxed) + shared.skipped.load(Ordering::Relaxed);
    loop {
        lp.run(Some(step.min(records - advanced())));
        let snap = end_interval(&mut lp, &handle, 0.5);
        if advanced() >= records {
            return snap;
        }
    }
}

/// Part 2: per cell and seed, the full reading's window (the whole backlog read at F = 1) is the truth
/// every assignment is evaluated on.
fn quality(bootstrap: &str, records: u64, seeds: u64, fraction: f64, chunk: u64, intervals: u64) {
    // DKG_BENCH_QUALITY_PARTITIONS: the partition counts of the cells (default 12,48).
    let ks: Vec<u32> = std::env::var("DKG_BENCH_QUALITY_PARTITIONS")
        .unwrap_or_else(|_| "12,48".into())
        .split(',')
        .filter_map(|k| k.trim().parse().ok())
        .collect();
    println!(
        "| Zipf | k | seed | read at F | F = 1 fresh | F = {fraction} fresh | F = {fraction} assignment on the full \
         window | F = 1 on the first as many records, on the full window | windowed F = 1 / F = {fraction} \
         ({intervals} intervals), on the full window | hash | heavy keys (full / also pinned by F) |"
    );
    let (mut worst, mut worst_windowed): (f64, f64) = (0.0, 0.0);
    for (alpha, k) in [(1.0, 12u32), (0.8, 12), (1.0, 48), (0.8, 48)] {
        if !ks.contains(&k) {
            continue;
        }
        for seed in 1..=seeds {
            let topic = unique_topic("bench-readfrac-q");
            prefill(bootstrap, &topic, k, records, (100_000, alpha, seed));
            let run = |name: &str, limit: u64, f: f64| {
                pass(
                    bootstrap,
                    &topic,
                    (k, limit),
                    (f, chunk),
                    &format!("{topic}-{name}"),
                    false,
                )
                .snap
                .window
            };
            let fw = run("full", records, 1.0);
            let part = pass(
                bootstrap,
                &topic,
                (k, records),
                (fraction, chunk),
                &format!("{topic}-part"),
                false,
            );
            let pw = &part.snap.window;
            // The equal-sample baseline: F = 1 on as many records as F read (the log's first ones).
            let ew = run("equal", part.snap.consumed, 1.0);
            let assign =
                |w: &dkg_partitioner::dkg::Sketch| w.build(&topic, 1, 0, None).unwrap().assignment;
            let on = |w: &dkg_partitioner::dkg::Sketch,
                      a: &dkg_partitioner::assignment::Assignment| {
                w.predict(a).map_or(f64::NAN, |l| imbalance(&l))
            };
            let (fa, pa, ea) = (assign(&fw), assign(pw), assign(&ew));
            let (f_fresh, p_fresh) = (on(&fw, &fa), on(pw, &pa));
            let (cross, equal) = (on(&fw, &pa), on(&fw, &ea));
            let windowed = (intervals > 0).then(|| {
                let w = |name: &str, f: f64| {
                    let snap = windowed(
                        bootstrap,
                        &topic,
                        (k, records, intervals),
                        (f, chunk),
                        &format!("{topic}-{name}"),
                    );
                    on(&fw, &assign(&snap.window))
                };
                (w("w-full", 1.0), w("w-part", fraction))
            });
            let heavy = |a: &dkg_partitioner::assignment::Assignment| -> BTreeSet<Vec<u8>> {
                a.heavy().iter().map(|h| h.key.clone()).collect()
            };
            let (fh, ph) = (heavy(&fa), heavy(&pa));
            worst = worst.max((cross - f_fresh).abs());
            let windowed = windowed.map_or("-".into(), |(w1, wf)| {
                worst_windowed = worst_windowed.max(wf - w1);
                format!("{:.2}% / {:.2}%", w1 * 100.0, wf * 100.0)
            });
            println!(
                "| {alpha} | {k} | {seed} | {} of {records} | {:.2}% | {:.2}% | {:.2}% | {:.2}% | {windowed} | \
                 {:.1}% | {} / {} |",
                part.snap.consumed,
                f_fresh * 100.0,
                p_fresh * 100.0,
                cross * 100.0,
                equal * 100.0,
                imbalance(&fw.predict_hash()) * 100.0,
                fh.len(),
                fh.intersection(&ph).count(),
            );
        }
    }
    println!(
        "quality: chunk {chunk}, F's assignment on the full window at most {:.2} points from full reading's \
         own; windowed ({intervals} intervals): F's at most {:.2} points worse than F = 1's",
        worst * 100.0,
        worst_windowed * 100.0
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
            env_u64("DKG_BENCH_QUALITY_INTERVALS", 0),
        );
    }
}
