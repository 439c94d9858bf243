//! Helpers shared by the benches that need the Kafka broker (`producer_throughput`,
//! `consumer_throughput`): settings from the environment, a broker probe, topic creation, medians.

use std::time::Duration;

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
