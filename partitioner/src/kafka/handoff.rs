//! The handoff topic's Kafka side: creating it ([`ensure_handoff_topic`]), writing records
//! ([`HandoffWriter`]) and reading them ([`HandoffReader`]).
//!
//! The records themselves (keys, leases, progress, history) and their codecs are pure and live in
//! [`dkg_kafka_protocol::handoff`], re-exported here; the protocol is described there and in
//! `docs/architecture.md`.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rdkafka::ClientContext;
use rdkafka::admin::AdminClient;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};
use tracing::warn;

pub use dkg_kafka_protocol::handoff::{
    DEFAULT_HANDOFF_TOPIC, DEFAULT_LEASE, HandoffEntry, HandoffKey, Lease, Marker, MarkerReject,
    ProducerId, Progress, decode,
};
pub use dkg_kafka_protocol::headers::PRODUCER_HEADER;

use crate::assignment::Assignment;
use crate::error::{Error, Result};
use crate::kafka::control;
use crate::kafka::topic::{CompactedReader, Ensured};
use dkg_kafka_protocol::handoff::to_json;

/// The wall clock: time since the Unix epoch (zero if the clock is before 1970).
fn since_unix_epoch() -> Duration {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
}

/// Milliseconds since the Unix epoch: the wall clock the glue passes into the pure layer.
#[must_use]
pub fn now_ms() -> u64 {
    u64::try_from(since_unix_epoch().as_millis()).unwrap_or(u64::MAX)
}

/// The monotonic clock the glue passes into the pure layer: time since the first reading in this
/// process ([`dkg_kafka_protocol::consumer::Monotonic`]).
#[must_use]
pub fn mono_now() -> dkg_kafka_protocol::consumer::Monotonic {
    static ORIGIN: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    ORIGIN.get_or_init(std::time::Instant::now).elapsed()
}

/// A fresh [`ProducerId`] seeded with the wall clock.
#[must_use]
pub fn new_producer_id() -> ProducerId {
    ProducerId::random(since_unix_epoch().as_nanos())
}

/// Make sure the handoff topic exists with the protocol's configuration: 1 partition,
/// `cleanup.policy=compact`, `max.message.bytes` large enough for a history assignment. The
/// same checks as [`control::ensure_control_topic`] (which does the work), the same
/// [`Error::ControlTopicMisconfigured`] naming the topic when an existing one is wrong.
pub async fn ensure_handoff_topic<C: ClientContext>(
    admin: &AdminClient<C>,
    name: &str,
    replication: i32,
) -> Result<Ensured> {
    control::ensure_control_topic(admin, name, replication).await
}

/// Writes handoff records (idempotent producer, `acks=all`, see [`control::publisher_config`]).
/// Cheap to clone.
#[derive(Clone)]
pub struct HandoffWriter {
    producer: FutureProducer,
    topic: Arc<str>,
    timeout: Duration,
}

impl fmt::Debug for HandoffWriter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandoffWriter")
            .field("topic", &self.topic)
            .finish_non_exhaustive()
    }
}

impl HandoffWriter {
    /// A writer to `handoff_topic`; `connection` supplies bootstrap and security settings
    /// ([`control::connection_config`] is applied to it).
    pub fn new(connection: &ClientConfig, handoff_topic: &str) -> Result<Self> {
        let mut config = control::publisher_config(&control::connection_config(connection));
        // Announcements are small and latency matters more than batching.
        config.set("linger.ms", "0");
        Ok(Self {
            producer: config.create()?,
            topic: Arc::from(handoff_topic),
            timeout: Duration::from_secs(10),
        })
    }

    /// The handoff topic.
    #[must_use]
    pub fn topic(&self) -> &str {
        &self.topic
    }

    async fn put(&self, key: &HandoffKey, value: Option<&[u8]>) -> Result<()> {
        let key = key.encode();
        let mut record: FutureRecord<'_, str, [u8]> = FutureRecord::to(&self.topic).key(&key);
        record.payload = value;
        self.producer
            .send(record, self.timeout)
            .await
            .map(|_| ())
            .map_err(|(e, _)| Error::Kafka(e))
    }

    /// Write (register, renew, update) a lease and wait for the acknowledgement (under
    /// `lease2/` in marker mode, [`HandoffKey::of_lease`]).
    pub async fn put_lease(&self, lease: &Lease) -> Result<()> {
        self.put(&HandoffKey::of_lease(lease), Some(&to_json(lease)))
            .await
    }

    /// Write a marker-mode producer's marker and wait for the acknowledgement.
    pub async fn put_marker(&self, marker: &Marker) -> Result<()> {
        let key = HandoffKey::Marker {
            topic: marker.topic.clone(),
            producer: marker.producer.clone(),
        };
        self.put(&key, Some(&to_json(marker))).await
    }

    /// Write the history record of `assignment`'s epoch.
    pub async fn put_history(&self, assignment: &Assignment) -> Result<()> {
        let key = HandoffKey::Assignment {
            topic: assignment.topic().to_owned(),
            epoch: assignment.epoch(),
        };
        self.put(&key, Some(&assignment.to_json())).await
    }

    /// Write a group's progress on a partition.
    pub async fn put_progress(&self, progress: &Progress) -> Result<()> {
        let key = HandoffKey::Progress {
            group: progress.group.clone(),
            topic: progress.topic.clone(),
            partition: progress.partition,
        };
        self.put(&key, Some(&to_json(progress))).await
    }

    /// Write a tombstone for `key`.
    pub async fn remove(&self, key: &HandoffKey) -> Result<()> {
        self.put(key, None).await
    }

    /// Enqueue a record without waiting (a tombstone with `value = None`); a background task logs
    /// a failed delivery. Records enqueued by one writer land in enqueue order (idempotent
    /// producer, one partition). Needs a tokio runtime.
    pub fn send(&self, key: &HandoffKey, value: Option<&[u8]>) -> Result<()> {
        let key = key.encode();
        let mut record: FutureRecord<'_, str, [u8]> = FutureRecord::to(&self.topic).key(&key);
        record.payload = value;
        let delivery = self
            .producer
            .send_result(record)
            .map_err(|(e, _)| Error::Kafka(e))?;
        tokio::spawn(async move {
            match delivery.await {
                Ok(Ok(_)) => {}
                Ok(Err((e, _))) => warn!(key = %key, error = %e, "handoff record not delivered"),
                Err(_) => warn!(key = %key, "handoff producer dropped before delivery"),
            }
        });
        Ok(())
    }

    /// [`HandoffWriter::send`] a group's progress.
    pub fn send_progress(&self, progress: &Progress) -> Result<()> {
        let key = HandoffKey::Progress {
            group: progress.group.clone(),
            topic: progress.topic.clone(),
            partition: progress.partition,
        };
        self.send(&key, Some(&to_json(progress)))
    }

    /// Wait (blocking, at most `timeout`) until every enqueued record is delivered.
    pub fn flush(&self, timeout: Duration) {
        use rdkafka::producer::Producer as _;
        if let Err(e) = self.producer.flush(timeout) {
            warn!(handoff_topic = %self.topic, error = %e, "flushing handoff records");
        }
    }
}

/// One handoff record read by a [`HandoffReader`].
#[derive(Clone, Debug)]
pub struct HandoffRecord {
    /// Offset in the handoff topic.
    pub offset: i64,
    /// The decoded entry, or why it was skipped.
    pub entry: std::result::Result<HandoffEntry, String>,
}

/// Reads the handoff topic from the beginning: [`HandoffReader::catch_up`] to the end, then
/// [`HandoffReader::next_record`] live. Same consumer settings as the control-topic reader (no
/// group, no commits, `fetch.wait.max.ms=100`).
pub struct HandoffReader {
    reader: CompactedReader,
}

impl fmt::Debug for HandoffReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HandoffReader")
            .field("topic", &self.reader.topic())
            .finish_non_exhaustive()
    }
}

impl HandoffReader {
    /// A reader of `handoff_topic` (connection settings from `connection`).
    pub fn new(connection: &ClientConfig, handoff_topic: &str) -> Result<Self> {
        Ok(Self {
            reader: CompactedReader::new(
                &control::connection_config(connection),
                handoff_topic,
                "handoff topic",
                "dkg-handoff-reader",
            )?,
        })
    }

    /// Read every record written before this call, calling `on_record` for each; returns how many.
    /// A missing topic reads as empty. [`Error::Timeout`] if the end is not reached in `timeout`.
    pub async fn catch_up(
        &mut self,
        timeout: Duration,
        mut on_record: impl FnMut(HandoffRecord),
    ) -> Result<usize> {
        let read = self
            .reader
            .read_to_end(timeout, |offset, key, value| {
                on_record(HandoffRecord {
                    offset,
                    entry: decode(key, value),
                });
            })
            .await?;
        Ok(read.unwrap_or(0))
    }

    /// The next record (end-of-log events and transient errors are skipped). Cancellation safe.
    pub async fn next_record(&mut self) -> HandoffRecord {
        self.reader
            .next(|offset, key, value| HandoffRecord {
                offset,
                entry: decode(key, value),
            })
            .await
    }
}
