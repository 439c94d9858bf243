//! `--read-fraction` (issue 16, item 2): how fast the sampler's consume loop advances through a backlog,
//! at what CPU cost, and how good the decision built from a fraction of the log is.
//!
//! Part 1, advance and CPU: pre-fills a 12-partition topic (Zipf 1.0 over 10^6 keys, 16-byte keys,
//! 100-byte values; the backlog stands in for a producer faster than the sampler), then alternates rounds
//! of the sampler's real consume loop (`src/sidecar/ingest.rs`, compiled in via `#[path]`) at F = 1 and at
//! `DKG_BENCH_FRACTION` (default 0.1), each from a fresh consumer group at the earliest offset until it
//! has read or skipped every offset. Per round: offsets advanced per second (from the first 1024 records
//! read to the end) and the process's CPU seconds (all threads, librdkafka's included) per 1M offsets
//! advanced over the same span (steady state: the consumer's start and group join left out). Prints the median of the per-round ratios and
//! their spread.
//!
//! Part 2, decision quality: per cell (Zipf 1.0 and 0.8 over 10^5 keys, 12 and 48 partitions) and seed,
//! a fresh backlog read in full at F = 1 and at F; each window builds an assignment; prints the window's
//! predicted imbalance (max/mean - 1) of its own assignment, the F-window's assignment evaluated on the
//! full window, the equal-sample baseline's (F = 1 observing a uniform `--sample-ratio` sample of as many
//! records as F read) on the full window, and how many of the full window's heavy keys the F-window's
//! assignment also pins.
//!
//! Run: `cargo bench -p dkg-sampler --bench read_fraction` (broker: `scripts/kafka start`, a missing one
//! fails the run; `DKG_TEST_BOOTSTRAP` overrides 127.0.0.1:9092). Knobs: `DKG_BENCH_RECORDS` (part 1
//! backlog, default 5,000,000), `DKG_BENCH_ROUNDS` (default 3), `DKG_BENCH_FRACTION` (in thousandths,
//! default 100 = 0.1), `DKG_BENCH_CHUNK` (default the sampler's `--read-chunk`), `DKG_BENCH_QUALITY_RECORDS`
//! (part 2 backlog per cell, default 2,000,000), `DKG_BENCH_QUALITY_CHUNK` (default 1000), `DKG_BENCH_TOPIC`
//! (part 1 on an existing 12-partition backlog of `DKG_BENCH_RECORDS` records instead of a fresh one),
//! `DKG_BENCH_SEEDS` (default 3), `DKG_BENCH_PART` (`advance`, `quality`, default both), `DKG_BENCH_KAFKA`
//! (`key=value,...` librdkafka settings for both sides, e.g. `queued.min.messages=2500`),
//! `DKG_BENCH_CANDIDATE` / `DKG_BENCH_CANDIDATE_CHUNK` / `DKG_BENCH_CANDIDATE_EXACT=1` (a third side per
//! round: F with these settings winning over the sampler's, this chunk, chunks stopped at their `C`
//! offsets instead of read on to the end of the fetched run), `DKG_BENCH_QUALITY_PARTITIONS` (part 2 cells, default
//! `12,48`).

#![allow(clippy::unwrap_used)]

mod common;
#[path = "common/sidecar.rs"]
mod sidecar;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use common::{env_u64, median, prefill, process_cpu_secs, spread};
use dkg_kafka_core::dkg::{DkgConfig, imbalance};
use rdkafka::ClientConfig;

use dkg_testkit::broker::unique_topic;
use sidecar::ingest::{self, ConsumeLoop, Shared};
use sidecar::window::{IntervalSnapshot, RecordSampler, Window};

/// One pass through a backlog of `records` offsets.
struct Pass {
    snap: IntervalSnapshot,
    /// Offsets advanced per second, from the first 1024 records read to the end.
    rate: f64,
    /// Process CPU seconds per 1M offsets advanced, over the same span as `rate`.
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
    (fraction, chunk, sample): (f64, u64, f64),
    group: &str,
    candidate: bool,
) -> (ConsumeLoop, ingest::ConsumerHandle, Arc<Shared>) {
    let shared = Arc::new(Shared::default());
    let window = Window::new(
        &DkgConfig::default(),
        partitions,
        RecordSampler::new(sample, 7),
    )
    .unwrap();
    let (mut lp, handle) = ConsumeLoop::new(
        &config(bootstrap, group, fraction, chunk, candidate),
        topic,
        window,
        Arc::clone(&shared),
    )
    .unwrap();
    // DKG_BENCH_CANDIDATE_EXACT=1: the candidate stops each chunk at its `C` offsets (the schedule
    // before it read on to the end of the fetched run).
    let schedule = sidecar::fraction::Schedule::new(fraction, chunk);
    let exact = candidate && std::env::var("DKG_BENCH_CANDIDATE_EXACT").is_ok_and(|v| v == "1");
    lp.read_fraction(
        if exact {
            schedule
        } else {
            schedule.extend_runs()
        },
        false,
    );
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

/// Read (or skip) the first `records` offsets of `topic` from a fresh group at `fraction`; `whole`: that
/// is the whole backlog, and librdkafka's fetch counts are waited for.
fn pass(
    bootstrap: &str,
    topic: &str,
    (partitions, records, whole): (u32, u64, bool),
    (fraction, chunk): (f64, u64),
    group: &str,
    (candidate, sample): (bool, f64),
) -> Pass {
    let (mut lp, handle, shared) = open(
        bootstrap,
        topic,
        partitions,
        (fraction, chunk, sample),
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
            // The process's CPU from here on (this thread ends here): steady state, without the
            // consumer's start and group join.
            (Instant::now(), advanced, process_cpu_secs())
        })
    };
    lp.run(Some(records));
    let t1 = Instant::now();
    let cpu1 = process_cpu_secs();
    let (t0, advanced0, cpu0) = watcher.join().unwrap();
    // librdkafka's statistics (every second) catch up with the end of the pass (a pass through the
    // whole backlog: there is nothing more to read).
    let stop = whole.then(|| {
        let handle = handle.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(1100));
            handle.send(ingest::Command::Shutdown);
        })
    });
    if let Some(stop) = stop {
        lp.run(None);
        stop.join().unwrap();
    }
    let fetched = shared.fetched.load(Ordering::Relaxed);
    let snap = end_interval(&mut lp, &handle, 0.0);
    assert_eq!(
        snap.consumed + snap.skipped,
        records,
        "every offset read or skipped"
    );
    Pass {
        rate: (records - advanced0) as f64 / t1.duration_since(t0).as_secs_f64(),
        cpu_per_m: (cpu1 - cpu0).max(0.0) * 1e6 / (records - advanced0).max(1) as f64,
        fetched_per_read: fetched as f64 / snap.consumed.max(1) as f64,
        dropped: shared.dropped.load(Ordering::Relaxed),
        snap,
    }
}

/// `stats`: wait for librdkafka's fetch counts after each pass (1.1 s; not in `cargo test`'s quick run).
fn advance(bootstrap: &str, records: u64, rounds: u32, fraction: f64, chunk: u64, stats: bool) {
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
        || std::env::var("DKG_BENCH_CANDIDATE_EXACT").is_ok()
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
                (12, records, stats),
                (*f, *c),
                &unique_topic(&format!("{topic}-{i}-{round}")),
                (*candidate, 1.0),
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

/// Part 2: per cell and seed, the full reading's window (the whole backlog read at F = 1) is the truth
/// every assignment is evaluated on.
fn quality(bootstrap: &str, records: u64, seeds: u64, fraction: f64, chunk: u64) {
    // DKG_BENCH_QUALITY_PARTITIONS: the partition counts of the cells (default 12,48).
    let ks: Vec<u32> = std::env::var("DKG_BENCH_QUALITY_PARTITIONS")
        .unwrap_or_else(|_| "12,48".into())
        .split(',')
        .filter_map(|k| k.trim().parse().ok())
        .collect();
    println!(
        "| Zipf | k | seed | read at F | F = 1 fresh | F = {fraction} fresh | F = {fraction} assignment on the full \
         window | F = 1 on as many records (a uniform sample), on the full window | hash | heavy keys (full / \
         also pinned by F) |"
    );
    let (mut worst, mut worst_equal): (f64, f64) = (0.0, 0.0);
    for (alpha, k) in [(1.0, 12u32), (0.8, 12), (1.0, 48), (0.8, 48)] {
        if !ks.contains(&k) {
            continue;
        }
        for seed in 1..=seeds {
            let topic = unique_topic("bench-readfrac-q");
            prefill(bootstrap, &topic, k, records, (100_000, alpha, seed));
            let run = |name: &str, f: f64, sample: f64| {
                pass(
                    bootstrap,
                    &topic,
                    (k, records, true),
                    (f, chunk),
                    &format!("{topic}-{name}"),
                    (false, sample),
                )
            };
            let fw = run("full", 1.0, 1.0).snap.window;
            let part = run("part", fraction, 1.0);
            let pw = &part.snap.window;
            // The equal-sample baseline: F = 1 observing a uniform sample of as many records as F read
            // (`--sample-ratio`), so what differs from F is the chunks, not the sample size.
            let ew = run("equal", 1.0, part.snap.consumed as f64 / records as f64)
                .snap
                .window;
            let assign =
                |w: &dkg_kafka_core::dkg::Sketch| w.build(&topic, 1, 0, None).unwrap().assignment;
            let on = |w: &dkg_kafka_core::dkg::Sketch,
                      a: &dkg_kafka_core::assignment::Assignment| {
                w.predict(a).map_or(f64::NAN, |l| imbalance(&l))
            };
            let (fa, pa, ea) = (assign(&fw), assign(pw), assign(&ew));
            let (f_fresh, p_fresh) = (on(&fw, &fa), on(pw, &pa));
            let (cross, equal) = (on(&fw, &pa), on(&fw, &ea));
            let heavy = |a: &dkg_kafka_core::assignment::Assignment| -> BTreeSet<Vec<u8>> {
                a.heavy().iter().map(|h| h.key.clone()).collect()
            };
            let (fh, ph) = (heavy(&fa), heavy(&pa));
            worst = worst.max((cross - f_fresh).abs());
            worst_equal = worst_equal.max((equal - f_fresh).abs());
            println!(
                "| {alpha} | {k} | {seed} | {} of {records} | {:.2}% | {:.2}% | {:.2}% | {:.2}% | {:.1}% | {} / {} |",
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
        "quality: chunk {chunk}, on the full window F's assignment at most {:.2} points from full reading's \
         own, the equal sample's at most {:.2}",
        worst * 100.0,
        worst_equal * 100.0
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
            !test_mode,
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
