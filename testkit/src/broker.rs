//! The real broker: reachability check, unique topic names, topic creation.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use dkg_partitioner::kafka::topic;
use dkg_partitioner::kafka::topic::{Ensured, TopicSpec};
use rdkafka::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};

/// Broker address when `DKG_TEST_BOOTSTRAP` is not set: the default of `scripts/kafka`.
pub const DEFAULT_BOOTSTRAP: &str = "127.0.0.1:9092";

/// How long [`bootstrap`] waits for the broker to answer a metadata request.
pub const BROKER_CHECK_TIMEOUT: Duration = Duration::from_secs(10);

/// The bootstrap address of the test broker (`DKG_TEST_BOOTSTRAP`, default `127.0.0.1:9092`).
///
/// Blocks until the broker answers a metadata request and PANICS if it does not within
/// [`BROKER_CHECK_TIMEOUT`]: tests that need Kafka fail without it, they never skip. The check runs once
/// per test binary; later calls return the cached address.
pub fn bootstrap() -> String {
    static CHECKED: OnceLock<String> = OnceLock::new();
    CHECKED
        .get_or_init(|| {
            let addr = std::env::var("DKG_TEST_BOOTSTRAP")
                .ok()
                .filter(|s| !s.trim().is_empty())
                .unwrap_or_else(|| DEFAULT_BOOTSTRAP.to_owned());
            if let Err(e) = check_broker(&addr, BROKER_CHECK_TIMEOUT) {
                panic!(
                    "no Kafka broker answered a metadata request at {addr} within {:?} ({e}). \
                     These tests need the real broker: start it with scripts/kafka start \
                     (or run the tests with scripts/test), or point DKG_TEST_BOOTSTRAP at one.",
                    BROKER_CHECK_TIMEOUT
                );
            }
            addr
        })
        .clone()
}

/// One metadata round trip to `addr`; `Ok` once the broker lists at least one broker.
pub fn check_broker(addr: &str, timeout: Duration) -> Result<(), String> {
    check_client(client_config(addr), timeout)
}

/// [`check_broker`] with a whole client configuration (security settings included).
pub fn check_client(mut config: ClientConfig, timeout: Duration) -> Result<(), String> {
    let consumer: BaseConsumer = config
        .set("socket.connection.setup.timeout.ms", "3000")
        // librdkafka would print every refused connection; the caller says what is wrong.
        .set("log_level", "2")
        .create()
        .map_err(|e| format!("cannot create a client: {e}"))?;
    let md = consumer
        .fetch_metadata(None, timeout)
        .map_err(|e| e.to_string())?;
    if md.brokers().is_empty() {
        return Err("metadata lists no broker".to_owned());
    }
    Ok(())
}

/// A client configuration with just the bootstrap servers.
pub fn client_config(bootstrap: &str) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", bootstrap);
    c
}

/// A topic name no other test (or earlier run) uses: `<prefix>-<pid>-<millis>-<n>`, restricted to the
/// characters Kafka allows in topic names.
pub fn unique_topic(prefix: &str) -> String {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let millis = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default();
    let clean: String = prefix
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .take(150)
        .collect();
    format!(
        "{clean}-{}-{millis}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    )
}

/// Creates `name` with `partitions` partitions, replication factor 1 and the given topic configs, then
/// waits until the broker's metadata shows every partition with a leader (so a producer's first send does
/// not race topic creation). Panics on any failure, including "already exists": tests use
/// [`unique_topic`] names.
pub async fn create_topic(bootstrap: &str, name: &str, partitions: u32, config: &[(&str, &str)]) {
    create_replicated_topic(bootstrap, name, partitions, 1, config).await;
}

/// [`create_topic`] with `replication` replicas per partition (the fault-test cluster's 3).
pub async fn create_replicated_topic(
    bootstrap: &str,
    name: &str,
    partitions: u32,
    replication: i32,
    config: &[(&str, &str)],
) {
    let spec = config.iter().fold(
        TopicSpec::new(name, partitions).replication(replication),
        |spec, (k, v)| spec.config(*k, *v),
    );
    match topic::create_and_wait(&client_config(bootstrap), &spec, Duration::from_secs(60)).await {
        Ok(Ensured::Created) => {}
        Ok(Ensured::Existing) => {
            panic!("topic {name} already exists: use unique_topic for test topics")
        }
        Err(e) => panic!("creating topic {name}: {e}"),
    }
}
