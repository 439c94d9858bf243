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
//! # Validation ([`AssignmentBook`])
//!
//! Every value is checked before it can move a record. Rejected, with a `warn` log line, a
//! [`RejectReason`] and the last good assignment kept:
//!
//! - a missing or non-UTF-8 key (`bad_key`);
//! - a value over the size limit, checked before parsing (`oversize`);
//! - malformed JSON or a foreign document (`malformed_json`), an unknown format version
//!   (`unsupported_version`), a partition outside the document's own partition count
//!   (`out_of_range`), any other invariant [`Assignment::from_json`] checks (`invalid`);
//! - a key that differs from the document's `topic` (`topic_mismatch`): a record cannot retarget
//!   another topic's producers;
//! - an epoch below the current one (`stale_epoch`), or equal to it with different content
//!   (`epoch_conflict`). Epochs strictly increase per topic; the same epoch is one document, so a
//!   second, different document under it means two publishers disagree and neither is trusted over
//!   the one already in force. An identical re-publication is a harmless no-op
//!   ([`ControlUpdate::Unchanged`]).
//!
//! A tombstone clears the topic's epoch floor: after a retraction any epoch is accepted again. This
//! keeps long-running readers and freshly started ones (which may never see the retracted epochs
//! once compaction has removed them) in agreement.
//!
//! An assignment whose partition count differs from the topic's current one is *not* rejected here
//! (this module has no view of the data topic): the producer keeps it but routes by Kafka's default
//! placement until the counts match. See [`crate::kafka::producer`].

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::ClientContext;
use rdkafka::admin::AdminClient;
use rdkafka::config::ClientConfig;
use rdkafka::producer::future_producer::Delivery;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::util::AsyncRuntime;
use tracing::{debug, warn};

use crate::assignment::{Assignment, MAX_ASSIGNMENT_BYTES};
use crate::error::{Error, Result};
use crate::kafka::topic::{self, CompactedReader, Ensured, TopicSpec};

/// Default name of the control topic.
pub const DEFAULT_CONTROL_TOPIC: &str = "_dkg.assignments";

/// `max.message.bytes` set on a control topic created by [`ensure_control_topic`]: the largest
/// accepted document plus room for the record batch framing.
pub const CONTROL_TOPIC_MAX_MESSAGE_BYTES: usize = MAX_ASSIGNMENT_BYTES + 1024 * 1024;

/// Why a control-topic record was rejected. `as_str` is the `reason` label of
/// `dkg_producer_assignments_rejected_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RejectReason {
    /// The record has no key, or a key that is not UTF-8 (not a topic name).
    BadKey,
    /// The value exceeds the size limit (checked before parsing).
    Oversize,
    /// Not JSON, wrong shape, or not a DKG assignment document.
    MalformedJson,
    /// A format version this build does not read.
    UnsupportedVersion,
    /// A partition number outside the document's partition count.
    OutOfRange,
    /// Any other violated invariant of the document.
    Invalid,
    /// The record key differs from the document's `topic`.
    TopicMismatch,
    /// The epoch is below the current assignment's.
    StaleEpoch,
    /// The epoch equals the current assignment's but the content differs.
    EpochConflict,
}

impl RejectReason {
    /// Every reason, in label order (metrics pre-create one series per reason).
    pub const ALL: [RejectReason; 9] = [
        RejectReason::BadKey,
        RejectReason::Oversize,
        RejectReason::MalformedJson,
        RejectReason::UnsupportedVersion,
        RejectReason::OutOfRange,
        RejectReason::Invalid,
        RejectReason::TopicMismatch,
        RejectReason::StaleEpoch,
        RejectReason::EpochConflict,
    ];

    /// The metric label value.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            RejectReason::BadKey => "bad_key",
            RejectReason::Oversize => "oversize",
            RejectReason::MalformedJson => "malformed_json",
            RejectReason::UnsupportedVersion => "unsupported_version",
            RejectReason::OutOfRange => "out_of_range",
            RejectReason::Invalid => "invalid",
            RejectReason::TopicMismatch => "topic_mismatch",
            RejectReason::StaleEpoch => "stale_epoch",
            RejectReason::EpochConflict => "epoch_conflict",
        }
    }

    /// Index into [`RejectReason::ALL`].
    #[must_use]
    pub const fn index(self) -> usize {
        self as usize
    }

    fn of_parse_error(e: &Error) -> Self {
        match e {
            Error::TooLarge { .. } => RejectReason::Oversize,
            Error::MalformedAssignment { .. } | Error::UnknownFormat { .. } => {
                RejectReason::MalformedJson
            }
            Error::UnsupportedVersion { .. } => RejectReason::UnsupportedVersion,
            Error::PartitionOutOfRange { .. } => RejectReason::OutOfRange,
            _ => RejectReason::Invalid,
        }
    }
}

impl std::fmt::Display for RejectReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What one control-topic record did to the [`AssignmentBook`].
#[derive(Clone, Debug)]
pub enum ControlUpdate {
    /// A new assignment is current for its topic.
    Adopted(Arc<Assignment>),
    /// A tombstone removed the topic's assignment.
    Retracted {
        /// The data topic.
        topic: String,
    },
    /// Nothing changed: an identical re-publication of the current assignment, or a tombstone for a
    /// topic without one.
    Unchanged {
        /// The data topic.
        topic: String,
    },
    /// The record was rejected; the topic's last good assignment stays.
    Rejected {
        /// The record key as text (lossy), if there was one.
        topic: Option<String>,
        /// Why.
        reason: RejectReason,
        /// The detailed error, for the log.
        detail: String,
    },
}

/// The validated state of the control topic: the current assignment per data topic.
///
/// Pure (no I/O): feed it records in log order with [`AssignmentBook::apply`].
#[derive(Debug, Clone)]
pub struct AssignmentBook {
    current: HashMap<String, Arc<Assignment>>,
    max_value_bytes: usize,
}

impl Default for AssignmentBook {
    fn default() -> Self {
        Self::new()
    }
}

impl AssignmentBook {
    /// An empty book accepting values up to [`MAX_ASSIGNMENT_BYTES`].
    #[must_use]
    pub fn new() -> Self {
        Self {
            current: HashMap::new(),
            max_value_bytes: MAX_ASSIGNMENT_BYTES,
        }
    }

    /// Lower the value size limit (it can never exceed [`MAX_ASSIGNMENT_BYTES`]).
    #[must_use]
    pub fn with_max_value_bytes(mut self, max: usize) -> Self {
        self.max_value_bytes = max.min(MAX_ASSIGNMENT_BYTES);
        self
    }

    /// The value size limit in force.
    #[must_use]
    pub fn max_value_bytes(&self) -> usize {
        self.max_value_bytes
    }

    /// The current assignment of `topic`.
    #[must_use]
    pub fn get(&self, topic: &str) -> Option<&Arc<Assignment>> {
        self.current.get(topic)
    }

    /// All current assignments (any order).
    pub fn iter(&self) -> impl Iterator<Item = &Arc<Assignment>> {
        self.current.values()
    }

    /// Number of topics with a current assignment.
    #[must_use]
    pub fn len(&self) -> usize {
        self.current.len()
    }

    /// No topic has an assignment.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.current.is_empty()
    }

    /// Apply one control-topic record (key, value; `None` value = tombstone).
    pub fn apply(&mut self, key: Option<&[u8]>, value: Option<&[u8]>) -> ControlUpdate {
        let topic = match key.map(std::str::from_utf8) {
            Some(Ok(t)) if !t.is_empty() => t,
            Some(Ok(_)) | None => {
                return rejected(None, RejectReason::BadKey, "record has no key".into());
            }
            Some(Err(e)) => {
                return rejected(
                    key.map(|k| String::from_utf8_lossy(k).into_owned()),
                    RejectReason::BadKey,
                    format!("record key is not UTF-8: {e}"),
                );
            }
        };
        let Some(value) = value else {
            return match self.current.remove(topic) {
                Some(_) => ControlUpdate::Retracted {
                    topic: topic.to_owned(),
                },
                None => ControlUpdate::Unchanged {
                    topic: topic.to_owned(),
                },
            };
        };
        if value.len() > self.max_value_bytes {
            return rejected(
                Some(topic.to_owned()),
                RejectReason::Oversize,
                format!(
                    "value is {} bytes, limit {}",
                    value.len(),
                    self.max_value_bytes
                ),
            );
        }
        let assignment = match Assignment::from_json(value) {
            Ok(a) => a,
            Err(e) => {
                return rejected(
                    Some(topic.to_owned()),
                    RejectReason::of_parse_error(&e),
                    e.to_string(),
                );
            }
        };
        if assignment.topic() != topic {
            return rejected(
                Some(topic.to_owned()),
                RejectReason::TopicMismatch,
                format!(
                    "record key {topic:?} but the document is for topic {:?}",
                    assignment.topic()
                ),
            );
        }
        if let Some(current) = self.current.get(topic) {
            if assignment.epoch() < current.epoch() {
                return rejected(
                    Some(topic.to_owned()),
                    RejectReason::StaleEpoch,
                    format!(
                        "epoch {} is older than the current epoch {}",
                        assignment.epoch(),
                        current.epoch()
                    ),
                );
            }
            if assignment.epoch() == current.epoch() {
                if assignment == **current {
                    return ControlUpdate::Unchanged {
                        topic: topic.to_owned(),
                    };
                }
                return rejected(
                    Some(topic.to_owned()),
                    RejectReason::EpochConflict,
                    format!(
                        "a different document under the current epoch {}",
                        current.epoch()
                    ),
                );
            }
        }
        let assignment = Arc::new(assignment);
        self.current
            .insert(topic.to_owned(), Arc::clone(&assignment));
        ControlUpdate::Adopted(assignment)
    }
}

fn rejected(topic: Option<String>, reason: RejectReason, detail: String) -> ControlUpdate {
    ControlUpdate::Rejected {
        topic,
        reason,
        detail,
    }
}

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

/// Publish `assignment` on the control topic (key = its topic, value = its JSON) and wait for the
/// broker's acknowledgement.
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
    if json.len() > MAX_ASSIGNMENT_BYTES {
        return Err(Error::TooLarge {
            what: "assignment bytes",
            actual: json.len() as u64,
            limit: MAX_ASSIGNMENT_BYTES as u64,
        });
    }
    let record = FutureRecord::to(control_topic)
        .key(assignment.topic())
        .payload(&json);
    producer
        .send(record, timeout)
        .await
        .map_err(|(e, _)| Error::Kafka(e))
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

/// Connection-level settings of `config` (bootstrap, security, sockets, client id), dropping
/// producer- or consumer-specific ones, so the same user config can build the control-topic
/// consumer and admin client.
#[must_use]
pub fn connection_config(config: &ClientConfig) -> ClientConfig {
    const EXACT: &[&str] = &[
        "bootstrap.servers",
        "metadata.broker.list",
        "security.protocol",
        "client.rack",
        "client.dns.lookup",
        "log_level",
        "log.connection.close",
        "topic.metadata.refresh.interval.ms",
    ];
    const PREFIXES: &[&str] = &[
        "ssl.",
        "ssl_",
        "sasl.",
        "socket.",
        "broker.",
        "api.version",
        "reconnect.backoff",
        "retry.backoff",
        "enable.ssl",
        "enable.sasl",
        "https.",
    ];
    let mut out = ClientConfig::new();
    for (key, value) in config.config_map() {
        if EXACT.contains(&key) || PREFIXES.iter().any(|p| key.starts_with(p)) {
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
        let read = reader
            .read_to_end(timeout, |offset, key, value| {
                on_record(&apply(book, &control_topic, offset, key, value));
            })
            .await?;
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
    pub async fn next_record(&mut self) -> ControlRecord {
        let Self { reader, book } = self;
        let control_topic = reader.topic().to_owned();
        reader
            .next(|offset, key, value| apply(book, &control_topic, offset, key, value))
            .await
    }
}

/// Apply one record to `book` and log what it did.
fn apply(
    book: &mut AssignmentBook,
    control_topic: &str,
    offset: i64,
    key: Option<&[u8]>,
    value: Option<&[u8]>,
) -> ControlRecord {
    let update = book.apply(key, value);
    match &update {
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
        ControlUpdate::Unchanged { .. } => {}
    }
    ControlRecord { offset, update }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::assignment::{AssignmentParts, Params};
    use crate::hash::BucketHash;

    fn doc(topic: &str, epoch: u64, table: Vec<u32>) -> Assignment {
        Assignment::new(AssignmentParts {
            topic: topic.to_owned(),
            partitions: 3,
            epoch,
            bucket_hash: BucketHash::default(),
            table,
            heavy: vec![],
            params: Params {
                theta: 0.1,
                epsilon: 0.01,
                mu: 2.0,
                window_records: 10,
            },
            created_at_ms: 1,
            predicted_load: vec![1.0 / 3.0; 3],
        })
        .unwrap()
    }

    fn reason(u: &ControlUpdate) -> Option<RejectReason> {
        match u {
            ControlUpdate::Rejected { reason, .. } => Some(*reason),
            _ => None,
        }
    }

    #[test]
    fn reasons_are_indexed_in_order() {
        for (i, r) in RejectReason::ALL.iter().enumerate() {
            assert_eq!(r.index(), i);
        }
    }

    #[test]
    fn book_accepts_newer_and_rejects_hostile_values() {
        let mut book = AssignmentBook::new();
        let a5 = doc("t", 5, vec![0, 1, 2]);
        assert!(matches!(
            book.apply(Some(b"t"), Some(&a5.to_json())),
            ControlUpdate::Adopted(_)
        ));
        let oversize = vec![b' '; MAX_ASSIGNMENT_BYTES + 1];
        let mut wrong_version = a5.to_json_pretty();
        wrong_version = wrong_version.replacen("\"version\": 1", "\"version\": 2", 1);
        let out_of_range = String::from_utf8(a5.to_json()).unwrap().replacen(
            "\"table\":[0,1,2]",
            "\"table\":[0,1,7]",
            1,
        );
        type Case<'a> = (Option<&'a [u8]>, Vec<u8>, RejectReason);
        let cases: Vec<Case<'_>> = vec![
            (None, a5.to_json(), RejectReason::BadKey),
            (Some(&[0xff, 0xfe]), a5.to_json(), RejectReason::BadKey),
            (
                Some(b"t"),
                b"{not json".to_vec(),
                RejectReason::MalformedJson,
            ),
            (
                Some(b"t"),
                wrong_version.into_bytes(),
                RejectReason::UnsupportedVersion,
            ),
            (
                Some(b"t"),
                out_of_range.into_bytes(),
                RejectReason::OutOfRange,
            ),
            (Some(b"t"), oversize, RejectReason::Oversize),
            (
                Some(b"t"),
                doc("u", 9, vec![0]).to_json(),
                RejectReason::TopicMismatch,
            ),
            (
                Some(b"t"),
                doc("t", 4, vec![0]).to_json(),
                RejectReason::StaleEpoch,
            ),
            (
                Some(b"t"),
                doc("t", 5, vec![2, 1, 0]).to_json(),
                RejectReason::EpochConflict,
            ),
        ];
        for (key, value, want) in cases {
            let got = book.apply(key, Some(&value));
            assert_eq!(reason(&got), Some(want), "{got:?}");
            assert_eq!(book.get("t").unwrap().epoch(), 5, "last good stays");
        }
        // Identical re-publication: no-op.
        assert!(matches!(
            book.apply(Some(b"t"), Some(&a5.to_json())),
            ControlUpdate::Unchanged { .. }
        ));
        // Tombstone retracts and resets the epoch floor.
        assert!(matches!(
            book.apply(Some(b"t"), None),
            ControlUpdate::Retracted { .. }
        ));
        assert!(book.get("t").is_none());
        assert!(matches!(
            book.apply(Some(b"t"), None),
            ControlUpdate::Unchanged { .. }
        ));
        assert!(matches!(
            book.apply(Some(b"t"), Some(&doc("t", 1, vec![0]).to_json())),
            ControlUpdate::Adopted(_)
        ));
    }

    #[test]
    fn lower_size_limit_applies_before_parsing() {
        let mut book = AssignmentBook::new().with_max_value_bytes(10);
        let got = book.apply(Some(b"t"), Some(&doc("t", 1, vec![0]).to_json()));
        assert_eq!(reason(&got), Some(RejectReason::Oversize));
        assert_eq!(
            AssignmentBook::new()
                .with_max_value_bytes(usize::MAX)
                .max_value_bytes(),
            MAX_ASSIGNMENT_BYTES
        );
    }

    #[test]
    fn connection_config_keeps_only_connection_settings() {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", "b:1")
            .set("security.protocol", "SASL_SSL")
            .set("sasl.mechanism", "PLAIN")
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
