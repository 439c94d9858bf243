//! Helpers shared by the benches that need the Kafka broker (`producer_throughput`,
//! `consumer_throughput`): settings from the environment, a broker probe, topic creation, medians.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dkg_partitioner::kafka::topic;
use dkg_partitioner::kafka::topic::TopicSpec;

pub type BoxError = Box<dyn std::error::Error>;

/// The value of environment variable `name`, or `default` when unset or unparsable.
pub fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The broker at `DKG_TEST_BOOTSTRAP` (default `127.0.0.1:9092`; exits 2 naming it when it does
/// not answer) and the size: `DKG_BENCH_RECORDS` (default `records`) and `DKG_BENCH_RUNS` (5) under
/// `cargo bench`, which passes `--bench`; without it (`cargo test --benches`/`--all-targets`) one
/// run of `smoke_records` only checks that the benchmark works. Returns `(bootstrap, records per
/// run, measured runs per variant, id)`, the id (`{pid}-{ms since the epoch}`) what makes this run's
/// topic names unique.
pub fn setup(
    bench: &str,
    records: usize,
    smoke_records: usize,
) -> Result<(String, usize, usize, String), BoxError> {
    let bootstrap = std::env::var("DKG_TEST_BOOTSTRAP")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "127.0.0.1:9092".to_owned());
    if let Err(e) = check_broker(&bootstrap) {
        eprintln!(
            "{bench} needs a Kafka broker at {bootstrap} ({e}).\n\
             Start it with `scripts/kafka start` (or set DKG_TEST_BOOTSTRAP)."
        );
        std::process::exit(2);
    }
    let measuring = std::env::args().any(|a| a == "--bench");
    let (records, runs) = if measuring {
        (
            env_or("DKG_BENCH_RECORDS", records),
            env_or("DKG_BENCH_RUNS", 5),
        )
    } else {
        (smoke_records, 1)
    };
    let stamp = SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis();
    let id = format!("{}-{stamp}", std::process::id());
    Ok((bootstrap, records, runs, id))
}

/// A client configuration with just the bootstrap servers.
pub use dkg_testkit::broker::client_config as config;

/// Whether a broker answers a metadata request at `bootstrap` (within 10 s).
pub fn check_broker(bootstrap: &str) -> Result<(), String> {
    dkg_testkit::broker::check_broker(bootstrap, Duration::from_secs(10))
}

/// Create `name` with `partitions` partitions and wait until every partition has a leader, so
/// that the first measured run does not include topic creation.
pub async fn create_topic(bootstrap: &str, name: &str, partitions: u32) -> Result<(), BoxError> {
    let spec = TopicSpec::new(name, partitions).replication(1);
    topic::create_and_wait(&config(bootstrap), &spec, Duration::from_secs(30)).await?;
    Ok(())
}

/// User + system CPU seconds so far of what `stat` describes (`/proc/self/stat`: this process,
/// `/proc/thread-self/stat`: this thread); 0 where unavailable (not Linux). 10 ms resolution.
pub fn cpu_secs(stat: &str) -> f64 {
    let stat = std::fs::read_to_string(stat).unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are the 12th and 13th.
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or("")
        .split_whitespace()
        .collect();
    let ticks = |i: usize| -> f64 { fields.get(i).and_then(|x| x.parse().ok()).unwrap_or(0.0) };
    // USER_HZ is 100 on every Linux the project targets.
    (ticks(11) + ticks(12)) / 100.0
}

/// The median of `v` (sorts it); NaN for an empty slice.
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}
