//! The control topic: where assignments are published and where producers read them.
//!
//! # Protocol
//!
//! One compacted topic (default [`DEFAULT_CONTROL_TOPIC`], exactly 1 partition,
//! `cleanup.policy=compact`). Record key = the data topic's name (UTF-8), value = the assignment
//! document ([`Assignment::to_json`]). A tombstone (key, null value) retracts the topic's assignment:
//! producers return to Kafka's default murmur2 placement. Compaction keeps the latest record per data
//! topic, so a reader that starts at the beginning and reads to the end knows every current
//! assignment; a single partition gives one total order over all publications.
//!
//! Format version 2 (`docs/spec.md` 6.4) adds two records a publisher writes only for a fleet that
//! reads version 2: a retraction document that keeps its epoch as the topic's floor
//! ([`publish_retraction`], instead of the tombstone of [`retract_assignment`]) and the generation
//! record naming the control topic's incarnation ([`publish_generation`]).
//!
//! # Validation
//!
//! Every record goes through [`AssignmentBook::apply`] (pure, in [`dkg_kafka_protocol::book`], where the
//! rules are listed) before it can move a record: rejected records are logged with their
//! [`RejectReason`] and the last good assignment stays.
//!
use std::time::Duration;

use dkg_kafka_protocol::connection::is_connection_setting;
use rdkafka::ClientContext;
use rdkafka::admin::AdminClient;
use rdkafka::config::ClientConfig;
use rdkafka::producer::future_producer::Delivery;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::util::AsyncRuntime;
use tracing::{debug, warn};

use crate::assignment::{
    Assignment, GENERATION_KEY, MAX_ASSIGNMENT_BYTES, Retraction, generation_record,
};
use crate::error::{Error, Result};
use crate::kafka::topic::{self, CompactedReader, Ensured, TopicSpec};
pub use dkg_kafka_protocol::book::{AssignmentBook, ControlUpdate, RejectReason};

/// Default name of the control topic.
pub const DEFAULT_CONTROL_TOPIC: &str = "_dkg.assignments";

/// `max.message.bytes` set on a control topic created by [`ensure_control_topic`]: the largest
/// accepted document plus room for the record batch framing.
pub const CONTROL_TOPIC_MAX_MESSAGE_BYTES: usize = MAX_ASSIGNMENT_BYTES + 1024 * 1024;

/// Make sure the control topic exists with the protocol's configuration.
///
/// Missing: creates it with 1 partition, `cleanup.policy=compact`,
/// `max.message.bytes` = [`CONTROL_TOPIC_MAX_MESSAGE_BYTES`] and the given replication factor
/// (`-1` = the broker's `default.replication.factor`). Present: checks that `cleanup.policy` is
/// exactly `compact` (with `delete` the current assignment would expire) and that it has exactly one
/// partition; otherwise returns [`Error::ControlTopicMisconfigured`] saying what to fix. See
/// [`topic::ensure_compacted`], which does the work (each admin request bounded by
/// [`topic::ADMIN_TIMEOUT`]).
pub async fn ensure_control_topic<C: ClientContext>(
    admin: &AdminClient<C>,
    name: &str,
    replication: i32,
) -> Result<Ensured> {
    topic::ensure_compacted(
        admin,
        &control_topic_spec(name, replication),
        topic::ADMIN_TIMEOUT,
    )
    .await
}

/// The spec of a control (or handoff) topic named `name`: [`TopicSpec::compacted`] with room for
/// the largest assignment document.
#[must_use]
pub fn control_topic_spec(name: &str, replication: i32) -> TopicSpec {
    TopicSpec::compacted(name, CONTROL_TOPIC_MAX_MESSAGE_BYTES).replication(replication)
}

/// A producer configuration for publishing assignments: `base` (connection settings) plus
/// `enable.idempotence=true`, `acks=all`, `compression.type=lz4` and a `message.max.bytes` large
/// enough for [`MAX_ASSIGNMENT_BYTES`], each only where `base` does not set it.
#[must_use]
pub fn publisher_config(base: &ClientConfig) -> ClientConfig {
    let mut config = base.clone();
    for (key, value) in [
        ("enable.idempotence", "true"),
        ("acks", "all"),
        ("compression.type", "lz4"),
    ] {
        if config.get(key).is_none() {
            config.set(key, value);
        }
    }
    if config.get("message.max.bytes").is_none() {
        config.set(
            "message.max.bytes",
            CONTROL_TOPIC_MAX_MESSAGE_BYTES.to_string(),
        );
    }
    config
}

/// Publish `assignment` on the control topic (key = its topic, value = its JSON,
/// [`Assignment::to_json`]) and wait for the broker's acknowledgement.
///
/// Use a producer built from [`publisher_config`] so large documents fit. Epochs must strictly
/// increase per topic: read the current one first (see [`ControlTopicReader`]) when (re)starting a
/// publisher, or readers reject the document as `stale_epoch`.
pub async fn publish_assignment<C, R>(
    producer: &FutureProducer<C, R>,
    control_topic: &str,
    assignment: &Assignment,
    timeout: Duration,
) -> Result<Delivery>
where
    C: ClientContext + 'static,
    R: AsyncRuntime,
{
    let json = assignment.to_json();
    publish_value(producer, control_topic, assignment.topic(), &json, timeout).await
}

/// Publish one encoded control-topic value under `key` and wait for the acknowledgement: the
/// common step of [`publish_assignment`], [`publish_retraction`] and [`publish_generation`], and
/// the way to publish another encoding of an assignment ([`Assignment::to_json_compact`] for a
/// fleet that reads version 2). Values over [`MAX_ASSIGNMENT_BYTES`] are refused before sending
/// (readers would reject them as `oversize`).
pub async fn publish_value<C, R>(
    producer: &FutureProducer<C, R>,
    control_topic: &str,
    key: &str,
    value: &[u8],
    timeout: Duration,
) -> Result<Delivery>
where
    C: ClientContext + 'static,
    R: AsyncRuntime,
{
    if value.len() > MAX_ASSIGNMENT_BYTES {
        return Err(Error::TooLarge {
            what: "assignment bytes",
            actual: value.len() as u64,
            limit: MAX_ASSIGNMENT_BYTES as u64,
        });
    }
    let record = FutureRecord::to(control_topic).key(key).payload(value);
    producer
        .send(record, timeout)
        .await
        .map_err(|(e, _)| Error::Kafka(e))
}

/// Retract with a retraction document (format version 2, `docs/spec.md` 6.4): producers of
/// `retraction.topic` return to Kafka's default placement, as after a tombstone, but its epoch
/// stays the topic's floor, so a later assignment needs a higher epoch also after compaction and a
/// publisher's restart. Its epoch must exceed the topic's current one (at it: `epoch_conflict`).
/// Readers of version 1 reject it (`unsupported_version`) and keep routing by the last assignment:
/// only for fleets that read version 2 (spec 11.1 step 3).
pub async fn publish_retraction<C, R>(
    producer: &FutureProducer<C, R>,
    control_topic: &str,
    retraction: &Retraction,
    timeout: Duration,
) -> Result<Delivery>
where
    C: ClientContext + 'static,
    R: AsyncRuntime,
{
    let json = retraction.to_json();
    publish_value(producer, control_topic, &retraction.topic, &json, timeout).await
}

/// Write the control topic's generation record (key [`GENERATION_KEY`], `docs/spec.md` 6.4):
/// `generation` (32 lowercase hex digits, else the decoder's `invalid` error, nothing sent)
/// names this incarnation of the control topic. A reader that has another generation in
/// force drops every topic's state on reading it.
pub async fn publish_generation<C, R>(
    producer: &FutureProducer<C, R>,
    control_topic: &str,
    generation: &str,
    timeout: Duration,
) -> Result<Delivery>
where
    C: ClientContext + 'static,
    R: AsyncRuntime,
{
    let value = generation_record(generation)?;
    publish_value(producer, control_topic, GENERATION_KEY, &value, timeout).await
}

/// Retract the assignment of `topic` (a tombstone): producers return to Kafka's default placement.
pub async fn retract_assignment<C, R>(
    producer: &FutureProducer<C, R>,
    control_topic: &str,
    topic: &str,
    timeout: Duration,
) -> Result<Delivery>
where
    C: ClientContext + 'static,
    R: AsyncRuntime,
{
    let record: FutureRecord<'_, str, [u8]> = FutureRecord::to(control_topic).key(topic);
    producer
        .send(record, timeout)
        .await
        .map_err(|(e, _)| Error::Kafka(e))
}

/// Connection-level settings of `config` (bootstrap, security, sockets, client id; the list is
/// [`is_connection_setting`]'s), dropping producer- or consumer-specific ones, so the same user config can build the control-topic
/// consumer and admin client.
#[must_use]
pub fn connection_config(config: &ClientConfig) -> ClientConfig {
    let mut out = ClientConfig::new();
    // Values through `get`: `config_map` masks passwords (rdkafka's sanitised view), which would
    // hand the control-topic clients "[sanitized for safety]" as their SASL password.
    for key in config.config_map().into_keys() {
        if is_connection_setting(key)
            && let Some(value) = config.get(key)
        {
            out.set(key, value);
        }
    }
    let client_id = config.get("client.id").map_or_else(
        || "dkg-control".to_owned(),
        |id| format!("{id}-dkg-control"),
    );
    out.set("client.id", client_id);
    out
}

/// One record read from the control topic and what it did.
#[derive(Clone, Debug)]
pub struct ControlRecord {
    /// Offset in the control topic.
    pub offset: i64,
    /// Effect on the book.
    pub update: ControlUpdate,
}

/// Reads the control topic from the beginning: [`ControlTopicReader::catch_up`] to the end, then
/// [`ControlTopicReader::next_record`] live.
///
/// A consumer without a consumer group (manual assignment of partition 0, no offset commits), with
/// `fetch.wait.max.ms=100` so a publication reaches it within about 100 ms on a healthy cluster.
pub struct ControlTopicReader {
    reader: CompactedReader,
    book: AssignmentBook,
}

impl std::fmt::Debug for ControlTopicReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlTopicReader")
            .field("topic", &self.reader.topic())
            .field("book", &self.book)
            .finish_non_exhaustive()
    }
}

impl ControlTopicReader {
    /// A reader of `control_topic`. `connection` supplies the bootstrap servers and security
    /// settings (see [`connection_config`]); the reader adds its consumer settings
    /// ([`topic::reader_config`]), which win.
    pub fn new(connection: &ClientConfig, control_topic: &str) -> Result<Self> {
        Self::with_book(connection, control_topic, AssignmentBook::new())
    }

    /// Like [`ControlTopicReader::new`] with a pre-configured book (e.g. a lower size limit).
    pub fn with_book(
        connection: &ClientConfig,
        control_topic: &str,
        book: AssignmentBook,
    ) -> Result<Self> {
        Ok(Self {
            reader: CompactedReader::new(
                connection,
                control_topic,
                "control topic",
                "dkg-control-reader",
            )?,
            book,
        })
    }

    /// The control topic's name.
    #[must_use]
    pub fn topic(&self) -> &str {
        self.reader.topic()
    }

    /// The validated state read so far.
    #[must_use]
    pub fn book(&self) -> &AssignmentBook {
        &self.book
    }

    /// Read every record published before this call (up to the high watermark), calling
    /// `on_record` for each, then return how many were read.
    ///
    /// A control topic that does not exist yet counts as empty (the reader keeps following it and
    /// sees it once created). Errors with [`Error::Timeout`] if the end is not reached in `timeout`.
    pub async fn catch_up(
        &mut self,
        timeout: Duration,
        mut on_record: impl FnMut(&ControlRecord),
    ) -> Result<usize> {
        let Self { reader, book } = self;
        let control_topic = reader.topic().to_owned();
        let mut total = 0;
        // Old rejected records: one line per topic at the end, not one per record (every client
        // start would otherwise repeat the whole history of every topic on the control topic).
        let mut rejected = RejectedSummary::default();
        let read = loop {
            // A document of an unknown generation asks for a re-read from the beginning (spec
            // 6.4); the book allows one per generation, so this loop ends.
            let mut reread = false;
            let read = reader
                .read_to_end(timeout, |offset, key, value| {
                    let record = apply(
                        book,
                        &control_topic,
                        offset,
                        key,
                        value,
                        Rejects::Summarised,
                    );
                    rejected.add(&record);
                    reread |= rereads(&record);
                    on_record(&record);
                })
                .await?;
            total += read.unwrap_or(0);
            if !reread {
                break read.map(|_| total);
            }
            reader.rewind()?;
        };
        rejected.log(&control_topic);
        if read.is_none() {
            warn!(
                control_topic = %control_topic,
                "control topic does not exist yet: no assignments; following it until it does"
            );
        }
        Ok(read.unwrap_or(0))
    }

    /// Wait for the next record (end-of-log events and transient errors are logged and skipped).
    ///
    /// Cancellation safe: dropping the future loses no record.
    ///
    /// After a record that asks for a re-read (`ControlUpdate::Reset` with `reread`, spec 6.4)
    /// the reader is back at the beginning: the next records are the control topic's from its
    /// first on. If the rewind fails (the consumer refuses the assignment), the reader goes on
    /// where it was, logged, and documents of the new generation are rejected.
    pub async fn next_record(&mut self) -> ControlRecord {
        let Self { reader, book } = self;
        let control_topic = reader.topic().to_owned();
        let record = reader
            .next(|offset, key, value| {
                apply(book, &control_topic, offset, key, value, Rejects::Logged)
            })
            .await;
        if rereads(&record)
            && let Err(e) = reader.rewind()
        {
            warn!(control_topic = %control_topic, error = %e, "cannot re-read the control topic");
        }
        record
    }
}

/// Rejected records of a catch-up, per record key: how many, by reason, and the last one's offset
/// and detail.
#[derive(Default)]
struct RejectedSummary {
    topics: std::collections::BTreeMap<String, TopicRejects>,
}

#[derive(Default)]
struct TopicRejects {
    count: u64,
    reasons: std::collections::BTreeMap<&'static str, u64>,
    last_offset: i64,
    last_detail: String,
}

impl RejectedSummary {
    fn add(&mut self, record: &ControlRecord) {
        if let ControlUpdate::Rejected {
            topic,
            reason,
            detail,
        } = &record.update
        {
            // The key is untrusted: shown as at most a topic name's length.
            let key: String = topic
                .as_deref()
                .unwrap_or("<none>")
                .chars()
                .take(249)
                .collect();
            let t = self.topics.entry(key).or_default();
            t.count += 1;
            *t.reasons.entry(reason.as_str()).or_default() += 1;
            t.last_offset = record.offset;
            t.last_detail.clone_from(detail);
        }
    }

    fn log(&self, control_topic: &str) {
        for (topic, t) in &self.topics {
            let reasons: Vec<String> = t.reasons.iter().map(|(r, n)| format!("{r}: {n}")).collect();
            warn!(
                control_topic,
                topic = %topic,
                rejected = t.count,
                reasons = %reasons.join(", "),
                last_offset = t.last_offset,
                last_error = %t.last_detail,
                "control-topic records rejected when reading the topic up to its end (summary of \
                 the topic's history); the last good assignment stays"
            );
        }
    }
}

/// The record asks for the control topic to be read again from the beginning.
fn rereads(record: &ControlRecord) -> bool {
    matches!(record.update, ControlUpdate::Reset { reread: true, .. })
}

/// Whether [`apply`] logs a rejected record: not in a catch-up, which summarises them.
#[derive(Clone, Copy)]
enum Rejects {
    Logged,
    Summarised,
}

/// Apply one record to `book` and log what it did.
fn apply(
    book: &mut AssignmentBook,
    control_topic: &str,
    offset: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    rejects: Rejects,
) -> ControlRecord {
    let update = book.apply(key, value);
    let rejected = matches!(update, ControlUpdate::Rejected { .. });
    if !rejected || matches!(rejects, Rejects::Logged) {
        log_update(control_topic, offset, &update);
    }
    ControlRecord { offset, update }
}

fn log_update(control_topic: &str, offset: i64, update: &ControlUpdate) {
    match update {
        ControlUpdate::Rejected {
            topic,
            reason,
            detail,
        } => warn!(
            control_topic,
            offset,
            topic = topic.as_deref().unwrap_or("<none>"),
            reason = reason.as_str(),
            error = %detail,
            "rejected a control-topic record; the last good assignment stays"
        ),
        ControlUpdate::Adopted(a) => debug!(
            control_topic,
            offset,
            topic = a.topic(),
            epoch = a.epoch(),
            "read assignment"
        ),
        ControlUpdate::Retracted { topic } => debug!(
            control_topic,
            offset,
            topic = %topic,
            "read retraction"
        ),
        // With `reread`, the caller rewinds the reader (spec 6.4).
        ControlUpdate::Reset { generation, reread } => warn!(
            control_topic,
            offset,
            generation = generation.as_deref().unwrap_or("<none>"),
            reread,
            "the control topic's generation changed: every assignment dropped"
        ),
        ControlUpdate::Unchanged { .. } => {}
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn old_rejected_records_are_summarised_per_topic() {
        let mut book = AssignmentBook::new();
        let mut summary = RejectedSummary::default();
        let records: [(&[u8], &[u8]); 4] = [
            (b"orders", b"not json"),
            (b"orders", b"[]"),
            (b"payments", b"{}"),
            (b"orders", b"null"),
        ];
        for (offset, (key, value)) in (0_i64..).zip(records) {
            summary.add(&apply(
                &mut book,
                "c",
                offset,
                Some(key),
                Some(value),
                Rejects::Summarised,
            ));
        }
        let orders = &summary.topics["orders"];
        assert_eq!((orders.count, orders.last_offset), (3, 3));
        assert_eq!(orders.reasons.get("malformed_json"), Some(&3));
        assert_eq!(summary.topics["payments"].count, 1);
        assert_eq!(summary.topics.len(), 2, "one line per topic");
    }

    #[test]
    fn connection_config_keeps_only_connection_settings() {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", "b:1")
            .set("security.protocol", "SASL_SSL")
            .set("sasl.mechanism", "PLAIN")
            .set("sasl.password", "pw,with=commas")
            .set("ssl.ca.location", "/ca")
            .set("acks", "1")
            .set("linger.ms", "20")
            .set("client.id", "app");
        let out = connection_config(&c);
        let m = out.config_map();
        assert_eq!(m.get("bootstrap.servers"), Some(&"b:1"));
        assert_eq!(m.get("sasl.mechanism"), Some(&"PLAIN"));
        assert_eq!(m.get("ssl.ca.location"), Some(&"/ca"));
        assert_eq!(m.get("client.id"), Some(&"app-dkg-control"));
        assert_eq!(
            out.get("sasl.password"),
            Some("pw,with=commas"),
            "the real value"
        );
        assert!(!m.contains_key("acks"));
        assert!(!m.contains_key("linger.ms"));
    }

    #[test]
    fn publisher_config_adds_safe_defaults_only_where_unset() {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", "b:1")
            .set("compression.type", "zstd");
        let out = publisher_config(&c);
        assert_eq!(out.get("enable.idempotence"), Some("true"));
        assert_eq!(out.get("acks"), Some("all"));
        assert_eq!(out.get("compression.type"), Some("zstd"));
        assert_eq!(
            out.get("message.max.bytes"),
            Some(CONTROL_TOPIC_MAX_MESSAGE_BYTES.to_string().as_str())
        );
    }
}
