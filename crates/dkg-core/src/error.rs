//! The one error type of the pure crates (`dkg-kafka-core`, `dkg-kafka-protocol`) and of the `dkg-kafka`
//! facade.

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in DKG, pure or Kafka-side.
///
/// Variants carry typed fields so callers (and metrics) can tell causes apart without parsing text.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A configuration value is out of its documented range.
    #[error("invalid configuration: {field}: {reason}")]
    InvalidConfig {
        /// The builder field or option.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },

    /// Assignment bytes are not valid JSON of the expected shape.
    #[error("malformed assignment JSON: {source}")]
    MalformedAssignment {
        /// The parser's error (line and column included).
        #[from]
        source: serde_json::Error,
    },

    /// The assignment declares a format version this build does not understand.
    #[error(
        "unsupported assignment format version {version} (this build reads versions 1 to {supported})"
    )]
    UnsupportedVersion {
        /// Version found in the document.
        version: u64,
        /// Newest version this build reads (it reads every version from 1 to this one).
        supported: u64,
    },

    /// The encoded assignment exceeds a size limit.
    #[error("assignment too large: {what} is {actual}, limit {limit}")]
    TooLarge {
        /// Which quantity (bytes, heavy keys, buckets, partitions).
        what: &'static str,
        /// Its value.
        actual: u64,
        /// The limit.
        limit: u64,
    },

    /// A partition number is not below the partition count.
    #[error(
        "topic {topic:?}: partition {partition} out of range (topic has {partitions} partitions)"
    )]
    PartitionOutOfRange {
        /// Topic of the assignment.
        topic: String,
        /// The offending partition.
        partition: u32,
        /// The partition count.
        partitions: u32,
    },

    /// The document's epoch is above the largest allowed (2^53 - 1, `docs/spec.md` 4.4 step 11b).
    #[error("epoch {epoch} out of range (at most {max})")]
    EpochOutOfRange {
        /// The epoch found.
        epoch: u64,
        /// The largest allowed epoch.
        max: u64,
    },

    /// The bucket table does not have one entry per bucket.
    #[error("bucket table has {actual} entries, expected {expected}")]
    TableLength {
        /// Declared bucket count.
        expected: u64,
        /// Entries found.
        actual: u64,
    },

    /// The same heavy key appears twice.
    #[error("heavy key listed twice (base64 {key_b64})")]
    DuplicateHeavyKey {
        /// The key, base64-encoded.
        key_b64: String,
    },

    /// The document is JSON but not a DKG assignment (its `format` field names something else).
    #[error("not a DKG assignment: format {found:?}, expected {expected:?}")]
    UnknownFormat {
        /// The `format` value found.
        found: String,
        /// The format name this build reads.
        expected: &'static str,
    },

    /// A heavy key's `key_b64` is not valid standard, padded base64.
    #[error("heavy key #{index}: invalid base64: {reason}")]
    InvalidKeyEncoding {
        /// Position of the key in the `heavy` list.
        index: usize,
        /// The decoder's message.
        reason: String,
    },

    /// The topic name is not a legal Kafka topic name.
    #[error("invalid topic name {topic:?}: {reason}")]
    InvalidTopic {
        /// The name (possibly truncated for display by the caller).
        topic: String,
        /// Which rule it breaks.
        reason: &'static str,
    },

    /// Any other violated invariant of the assignment document.
    #[error("invalid assignment: {reason}")]
    InvalidAssignment {
        /// What is wrong.
        reason: String,
    },

    /// Two summaries or sketches cannot be merged (different shapes or parameters).
    #[error("cannot merge: {reason}")]
    IncompatibleMerge {
        /// What differs.
        reason: String,
    },

    /// The control topic exists but its configuration breaks the protocol (not compacted, several
    /// partitions).
    #[error("control topic {topic:?} is misconfigured: {reason}")]
    ControlTopicMisconfigured {
        /// The control topic.
        topic: String,
        /// What is wrong and how to fix it.
        reason: String,
    },

    /// An operation did not complete in time.
    #[error("timed out after {millis} ms: {what}")]
    Timeout {
        /// What was being waited for.
        what: String,
        /// The time limit.
        millis: u64,
    },

    /// A Kafka client call failed.
    #[cfg(feature = "kafka-errors")]
    #[error("kafka: {0}")]
    Kafka(#[from] rdkafka::error::KafkaError),

    /// A Kafka admin operation failed for one resource (the request itself went through).
    #[cfg(feature = "kafka-errors")]
    #[error("kafka admin {operation} on {resource:?} failed: {code}")]
    KafkaAdmin {
        /// The operation (`create_topics`, `describe_configs`, ...).
        operation: &'static str,
        /// The topic or other resource.
        resource: String,
        /// The broker's error code.
        code: rdkafka::types::RDKafkaErrorCode,
    },

    /// Registering metrics in the caller's registry failed (for example, registered twice).
    #[cfg(feature = "kafka-errors")]
    #[error("metrics: {0}")]
    Metrics(#[from] prometheus::Error),
}
