//! Helpers shared by the sampler's benches (each includes this file with `mod common;`): pre-filling a
//! topic with a Zipf key stream, the sampler's consumer settings, medians, the process's CPU time.

#![allow(dead_code)] // each bench uses a subset

use std::time::{Duration, Instant};

use rand::SeedableRng;
use rand::rngs::SmallRng;
use rand_distr::{Distribution, Zipf};
use rdkafka::ClientConfig;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};

use dkg_testkit::broker::create_topic;

/// An environment variable as a number, or `default`.
pub fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The 16-byte key of rank `rank`.
pub fn key(rank: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k.copy_from_slice(format!("key-{rank:012}").as_bytes());
    k
}

/// The median (upper median for even lengths).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// `(min, max)` of `v`.
pub fn spread(v: &[f64]) -> (f64, f64) {
    v.iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)))
}

/// User + system CPU seconds of this process so far (all threads, librdkafka's included).
pub fn process_cpu_secs() -> f64 {
    cpu_secs("/proc/self/stat")
}

/// User + system CPU seconds of the calling thread so far.
pub fn thread_cpu_secs() -> f64 {
    cpu_secs("/proc/thread-self/stat")
}

fn cpu_secs(path: &str) -> f64 {
    let stat = std::fs::read_to_string(path).unwrap_or_default();
    // Fields after the command (which may hold spaces) start at ") "; utime and stime are fields 14, 15.
    let rest = stat.rsplit_once(") ").map_or("", |(_, r)| r);
    let f: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|v| v.parse().ok())
        .collect();
    // USER_HZ is 100 on every Linux the benches run on.
    f.iter().sum::<u64>() as f64 / 100.0
}

/// Create `topic` with `partitions` partitions and produce `records` records (16-byte keys, Zipf
/// `alpha` over `keys` keys from `seed`, 100-byte values), placed by Kafka's murmur2 hash.
pub fn prefill(
    bootstrap: &str,
    topic: &str,
    partitions: u32,
    records: u64,
    (keys, alpha, seed): (u64, f64, u64),
) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    rt.block_on(create_topic(bootstrap, topic, partitions, &[]));
    let producer: ThreadedProducer<DefaultProducerContext> = ClientConfig::new()
        .set("bootstrap.servers", bootstrap)
        .set("linger.ms", "20")
        .set("batch.size", "1000000")
        .set("queue.buffering.max.messages", "1000000")
        .set("partitioner", "murmur2_random")
        .create()
        .expect("a producer");
    let zipf = Zipf::new(keys as f64, alpha).expect("a Zipf distribution");
    let mut rng = SmallRng::seed_from_u64(seed);
    let value = [b'v'; 100];
    let started = Instant::now();
    for _ in 0..records {
        let k = key(zipf.sample(&mut rng) as u64);
        let mut record = BaseRecord::to(topic).key(&k[..]).payload(&value[..]);
        loop {
            match producer.send(record) {
                Ok(()) => break,
                Err((_, r)) => {
                    record = r;
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
    }
    producer
        .flush(Duration::from_secs(300))
        .expect("the backlog flushed");
    eprintln!(
        "pre-filled {topic}: {records} records in {:.1} s",
        started.elapsed().as_secs_f64()
    );
}
