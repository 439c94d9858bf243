//! Topics: the one place that creates, checks and reads them.
//!
//! - [`TopicSpec`] says what a topic must look like: partitions, replication, configs. The
//!   protocol's compacted one-partition topics (control, handoff, the sampler's sketches) start
//!   from [`TopicSpec::compacted`].
//! - [`create_topic`] creates a topic (data topics, tools, tests); an existing one is reported as
//!   [`Ensured::Existing`], never an error. [`wait_until_ready`] waits until the metadata shows every
//!   partition with a leader, so a first send does not race the creation.
//! - [`ensure_compacted`] creates a compacted topic if missing and otherwise validates it
//!   ([`validate_compacted`]: `cleanup.policy` exactly `compact`, the spec's partition count), with a
//!   typed [`Error::ControlTopicMisconfigured`] saying what to fix. [`ensure`] does the same from a
//!   client config, bounded by one timeout (what the producer, router and consumer builders call).
//! - [`CompactedReader`] reads partition 0 of such a topic from the beginning: [`reader_config`]
//!   (no group membership, no commits, `fetch.wait.max.ms=100`), [`CompactedReader::read_to_end`]
//!   (the catch-up every reader does at start) and [`CompactedReader::next`] (follow it live).
//!
//! References: Kafka's `CreateTopics` and `DescribeConfigs` admin APIs (KIP-4), log compaction
//! (Kafka documentation, "Log Compaction"); the layering is in `docs/architecture.md`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::ClientContext;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, ResourceSpecifier, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::{Offset, TopicPartitionList};
use tracing::{debug, info, warn};

use crate::error::{Error, Result};

/// Default bound of one admin request (create, describe) when the caller gives none.
pub const ADMIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Replication factor `-1`: the broker's `default.replication.factor` (the default of every
/// topic this crate creates).
pub const BROKER_DEFAULT_REPLICATION: i32 = -1;

/// What a topic must look like.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicSpec {
    /// The topic's name.
    pub name: String,
    /// Partition count.
    pub partitions: u32,
    /// Replication factor; `-1` = the broker's `default.replication.factor`.
    pub replication: i32,
    /// Topic configs set at creation (`cleanup.policy`, `max.message.bytes`, ...).
    pub configs: Vec<(String, String)>,
}

impl TopicSpec {
    /// `name` with `partitions` partitions, the broker's replication factor and no configs.
    #[must_use]
    pub fn new(name: impl Into<String>, partitions: u32) -> Self {
        Self {
            name: name.into(),
            partitions,
            replication: BROKER_DEFAULT_REPLICATION,
            configs: Vec::new(),
        }
    }

    /// A protocol topic: 1 partition (one total order), `cleanup.policy=compact` (the latest value
    /// per key stays) and `max.message.bytes = max_message_bytes`.
    #[must_use]
    pub fn compacted(name: impl Into<String>, max_message_bytes: usize) -> Self {
        Self::new(name, 1)
            .config("cleanup.policy", "compact")
            .config("max.message.bytes", max_message_bytes.to_string())
    }

    /// Set the replication factor (`-1` = the broker's default).
    #[must_use]
    pub fn replication(mut self, replication: i32) -> Self {
        self.replication = replication;
        self
    }

    /// Add (or replace) a topic config.
    #[must_use]
    pub fn config(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        let key = key.into();
        let value = value.into();
        match self.configs.iter_mut().find(|(k, _)| *k == key) {
            Some(entry) => entry.1 = value,
            None => self.configs.push((key, value)),
        }
        self
    }

    fn new_topic(&self) -> Result<NewTopic<'_>> {
        let partitions = i32::try_from(self.partitions).map_err(|_| Error::InvalidConfig {
            field: "partitions",
            reason: format!("{} partitions do not fit Kafka's i32", self.partitions),
        })?;
        let mut topic = NewTopic::new(
            &self.name,
            partitions,
            TopicReplication::Fixed(self.replication),
        );
        for (k, v) in &self.configs {
            topic = topic.set(k, v);
        }
        Ok(topic)
    }
}

/// What [`create_topic`] or [`ensure_compacted`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ensured {
    /// The topic did not exist and was created.
    Created,
    /// The topic already existed (and, for [`ensure_compacted`], has a valid configuration).
    Existing,
}

fn admin_options(timeout: Duration) -> AdminOptions {
    AdminOptions::new()
        .request_timeout(Some(timeout))
        .operation_timeout(Some(timeout))
}

fn admin_error(operation: &'static str, name: &str, code: RDKafkaErrorCode) -> Error {
    Error::KafkaAdmin {
        operation,
        resource: name.to_owned(),
        code,
    }
}

/// Create `spec`'s topic; one that exists already is [`Ensured::Existing`] (whatever its
/// configuration: use [`ensure_compacted`] for topics the protocol depends on). The request and the
/// broker's operation are each bounded by `timeout`.
pub async fn create_topic<C: ClientContext>(
    admin: &AdminClient<C>,
    spec: &TopicSpec,
    timeout: Duration,
) -> Result<Ensured> {
    let new_topic = spec.new_topic()?;
    let results = admin
        .create_topics([&new_topic], &admin_options(timeout))
        .await?;
    match results.into_iter().next() {
        Some(Ok(_)) => {
            info!(topic = %spec.name, partitions = spec.partitions, "created topic");
            Ok(Ensured::Created)
        }
        Some(Err((_, RDKafkaErrorCode::TopicAlreadyExists))) => Ok(Ensured::Existing),
        Some(Err((_, code))) => Err(admin_error("create_topics", &spec.name, code)),
        None => Err(admin_error(
            "create_topics",
            &spec.name,
            RDKafkaErrorCode::Fail,
        )),
    }
}

/// Wait (blocking the calling thread, polling every 100 ms) until the metadata of `client` shows
/// `topic` with `partitions` partitions, each with a leader. [`Error::Timeout`] after `timeout`.
pub fn wait_until_ready<C: ClientContext>(
    client: &rdkafka::client::Client<C>,
    topic: &str,
    partitions: u32,
    timeout: Duration,
) -> Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        let remaining = deadline.saturating_duration_since(Instant::now());
        let ready = client
            .fetch_metadata(Some(topic), remaining.min(Duration::from_secs(5)))
            .ok()
            .is_some_and(|md| {
                md.topics().iter().any(|t| {
                    t.name() == topic
                        && t.partitions().len() == partitions as usize
                        && t.partitions().iter().all(|p| p.leader() >= 0)
                })
            });
        if ready {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(Error::Timeout {
                what: format!("topic {topic:?} to show {partitions} partitions with leaders"),
                millis: duration_millis(timeout),
            });
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// [`create_topic`], then [`wait_until_ready`] with a metadata client built from `connection`; all
/// of it bounded by `timeout`. For tools and tests that need a data topic before they produce.
pub async fn create_and_wait(
    connection: &ClientConfig,
    spec: &TopicSpec,
    timeout: Duration,
) -> Result<Ensured> {
    let deadline = Instant::now() + timeout;
    let admin: AdminClient<DefaultClientContext> = connection.create()?;
    let ensured = create_topic(&admin, spec, timeout).await?;
    let probe: BaseConsumer = connection.create()?;
    let (name, partitions) = (spec.name.clone(), spec.partitions);
    let remaining = deadline.saturating_duration_since(Instant::now());
    tokio::task::spawn_blocking(move || {
        wait_until_ready(probe.client(), &name, partitions, remaining)
    })
    .await
    .map_err(|e| Error::Timeout {
        what: format!("waiting for topic {:?}: task failed: {e}", spec.name),
        millis: duration_millis(timeout),
    })??;
    Ok(ensured)
}

/// Make sure a compacted protocol topic exists as `spec` says.
///
/// Missing: creates it from `spec`. Present: [`validate_compacted`] (`cleanup.policy` exactly
/// `compact`, the spec's partition count), else [`Error::ControlTopicMisconfigured`] saying what to
/// fix.
///
/// Existence is probed with DescribeConfigs, never with a metadata request, so a broker with
/// `auto.create.topics.enable=true` cannot create the topic with the wrong configuration. Each
/// admin request is bounded by `timeout`; the partition count of an existing topic is read with a
/// blocking metadata request bounded by `timeout` too, asked again while the topic reports that its
/// leaders are being elected (a topic created a moment ago), for at most 10 s.
pub async fn ensure_compacted<C: ClientContext>(
    admin: &AdminClient<C>,
    spec: &TopicSpec,
    timeout: Duration,
) -> Result<Ensured> {
    if describe_cleanup_policy(admin, &spec.name, timeout)
        .await?
        .is_none()
        && create_topic(admin, spec, timeout).await? == Ensured::Created
    {
        return Ok(Ensured::Created);
    }
    // Existing, or someone else created it meanwhile: validate theirs.
    validate_compacted(admin, &spec.name, spec.partitions, timeout).await?;
    Ok(Ensured::Existing)
}

/// [`ensure_compacted`] with an admin client built from `connection`, the whole of it bounded by
/// `timeout` ([`Error::Timeout`] naming the topic). What the builders call at start.
pub async fn ensure(
    connection: &ClientConfig,
    spec: &TopicSpec,
    timeout: Duration,
) -> Result<Ensured> {
    let admin: AdminClient<DefaultClientContext> = connection.create()?;
    let ensured = tokio::time::timeout(timeout, ensure_compacted(&admin, spec, timeout))
        .await
        .map_err(|_| Error::Timeout {
            what: format!("ensuring topic {:?}", spec.name),
            millis: duration_millis(timeout),
        })??;
    debug!(topic = %spec.name, ?ensured, "topic ready");
    Ok(ensured)
}

/// The topic's `cleanup.policy`; `Ok(None)` when the topic does not exist.
async fn describe_cleanup_policy<C: ClientContext>(
    admin: &AdminClient<C>,
    name: &str,
    timeout: Duration,
) -> Result<Option<String>> {
    let opts = AdminOptions::new().request_timeout(Some(timeout));
    let results = admin
        .describe_configs([&ResourceSpecifier::Topic(name)], &opts)
        .await?;
    match results.into_iter().next() {
        // rdkafka 0.39 drops per-resource errors: a topic that does not exist comes back as a
        // resource without entries. An existing topic always reports its cleanup.policy.
        Some(Ok(resource)) => Ok(resource
            .get("cleanup.policy")
            .map(|e| e.value.clone().unwrap_or_else(|| "delete".to_owned()))),
        Some(Err(RDKafkaErrorCode::UnknownTopicOrPartition)) => Ok(None),
        Some(Err(code)) => Err(admin_error("describe_configs", name, code)),
        None => Err(admin_error(
            "describe_configs",
            name,
            RDKafkaErrorCode::Fail,
        )),
    }
}

/// How long an existing topic may describe as empty before that counts as the answer: on a
/// multi-broker cluster the broker answering DescribeConfigs may not know yet a topic created a
/// moment ago (seen on the 3-broker cluster: create said "already exists", the describe right
/// after came back empty; 2 s was not enough while the cluster was busy, seen in CI with other
/// tests beside the fault tests). Bounded, because an empty answer is also what a principal without
/// DescribeConfigs permission gets, and that one should hear about it at startup, not never.
const DESCRIBE_SETTLE: Duration = Duration::from_secs(10);

/// [`describe_cleanup_policy`] of a topic known to exist: an empty answer is asked again, 100 ms
/// apart, for at most [`DESCRIBE_SETTLE`] (or `timeout`, the shorter) before `Ok(None)` is believed.
async fn describe_existing_policy<C: ClientContext>(
    admin: &AdminClient<C>,
    name: &str,
    timeout: Duration,
) -> Result<Option<String>> {
    let deadline = Instant::now() + timeout.min(DESCRIBE_SETTLE);
    loop {
        let policy = describe_cleanup_policy(admin, name, timeout).await?;
        if policy.is_some() || Instant::now() >= deadline {
            return Ok(policy);
        }
        debug!(
            topic = name,
            "an existing topic described as empty: metadata still propagating?"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Check that the existing topic `name` is compacted (`cleanup.policy` exactly `compact`: with
/// `delete` the latest values would expire) and has `partitions` partitions; otherwise
/// [`Error::ControlTopicMisconfigured`] with what is wrong and how to fix it.
pub async fn validate_compacted<C: ClientContext>(
    admin: &AdminClient<C>,
    name: &str,
    partitions: u32,
    timeout: Duration,
) -> Result<()> {
    let misconfigured = |reason: String| Error::ControlTopicMisconfigured {
        topic: name.to_owned(),
        reason,
    };
    let Some(policy) = describe_existing_policy(admin, name, timeout).await? else {
        return Err(misconfigured(
            "it exists but the broker returned no configuration for it (is DescribeConfigs \
             allowed for this principal?): cannot check cleanup.policy"
                .to_owned(),
        ));
    };
    let policies: Vec<&str> = policy.split(',').map(str::trim).collect();
    if policies != ["compact"] {
        return Err(misconfigured(format!(
            "cleanup.policy is {policy:?}, must be \"compact\" (with \"delete\" the current \
             state expires after retention.ms); fix: kafka-configs --alter --entity-type \
             topics --entity-name {name} --add-config cleanup.policy=compact"
        )));
    }
    // A topic created a moment ago may still report that its leaders are being elected (seen on
    // the 3-broker cluster in CI: `NotLeaderForPartition` for the control topic right after another
    // client created it): asked again every 100 ms, for at most DESCRIBE_SETTLE.
    let settle = Instant::now() + DESCRIBE_SETTLE.min(timeout);
    let found = loop {
        // The metadata is dropped before any wait.
        let (error, found) = {
            let metadata = admin.inner().fetch_metadata(Some(name), timeout)?;
            let topic = metadata.topics().iter().find(|t| t.name() == name);
            (
                topic.and_then(|t| t.error()).map(RDKafkaErrorCode::from),
                topic.map_or(0, |t| t.partitions().len()),
            )
        };
        // A topic this principal may not describe has no partitions in the metadata: say so, not
        // "0 partitions".
        match error {
            None => break found,
            Some(code) if electing_leader(code) && Instant::now() < settle => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Some(code) => return Err(KafkaError::MetadataFetch(code).into()),
        }
    };
    if found != partitions as usize {
        return Err(misconfigured(format!(
            "it has {found} partitions, must have exactly {partitions} (one total order of \
             records); delete and recreate it"
        )));
    }
    Ok(())
}

/// Consumer settings of a [`CompactedReader`]: `connection` (bootstrap, security; see
/// [`connection_config`](crate::kafka::control::connection_config)) plus no offset commits,
/// end-of-partition events, `auto.offset.reset=earliest`, `fetch.wait.max.ms=100` (a new record
/// reaches a live reader within about 100 ms), `read_committed`, no topic auto-creation. These win
/// over `connection`'s; `group.id` is set to `default_group` only where `connection` has none (the
/// reader never joins or commits: the name only lets librdkafka initialise its consumer).
#[must_use]
pub fn reader_config(connection: &ClientConfig, default_group: &str) -> ClientConfig {
    let mut config = connection.clone();
    config
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("enable.partition.eof", "true")
        .set("auto.offset.reset", "earliest")
        .set("fetch.wait.max.ms", "100")
        .set("isolation.level", "read_committed")
        .set("allow.auto.create.topics", "false");
    if config.get("group.id").is_none() {
        config.set("group.id", default_group);
    }
    config
}

/// Context of a [`CompactedReader`]'s consumer: rdkafka's default context logs every consumer
/// error event at ERROR, including the end-of-partition events the reader asks for; those are
/// routine here. Everything else goes to `tracing` at WARN.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReaderContext;

impl ClientContext for ReaderContext {
    fn error(&self, error: KafkaError, reason: &str) {
        if error.rdkafka_error_code() == Some(RDKafkaErrorCode::PartitionEOF) {
            return;
        }
        warn!(error = %error, reason, "compacted topic reader");
    }
}

impl ConsumerContext for ReaderContext {}

/// Reads partition 0 of a compacted topic from the beginning: [`CompactedReader::read_to_end`],
/// then [`CompactedReader::next`] live. The control-topic and handoff-topic readers are this plus
/// their decoding.
pub struct CompactedReader {
    consumer: Arc<StreamConsumer<ReaderContext>>,
    topic: String,
    what: &'static str,
    last_error_log: Option<Instant>,
}

impl std::fmt::Debug for CompactedReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompactedReader")
            .field("topic", &self.topic)
            .field("what", &self.what)
            .finish_non_exhaustive()
    }
}

impl CompactedReader {
    /// A reader of `topic` with [`reader_config`]`(connection, default_group)`. `what` names the
    /// topic's role in logs and errors ("control topic").
    pub fn new(
        connection: &ClientConfig,
        topic: &str,
        what: &'static str,
        default_group: &str,
    ) -> Result<Self> {
        let consumer: StreamConsumer<ReaderContext> =
            reader_config(connection, default_group).create_with_context(ReaderContext)?;
        let mut reader = Self {
            consumer: Arc::new(consumer),
            topic: topic.to_owned(),
            what,
            last_error_log: None,
        };
        reader.rewind()?;
        Ok(reader)
    }

    /// The topic read.
    #[must_use]
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// Go back to the beginning of the topic: the next records read are its first ones again
    /// (re-assigning the partition drops what was fetched past the current position).
    pub fn rewind(&mut self) -> Result<()> {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition_offset(&self.topic, 0, Offset::Beginning)?;
        self.consumer.assign(&tpl)?;
        Ok(())
    }

    /// Read from the current position up to the high watermark as of this call, passing each
    /// record's offset, key and value to `on_record`; returns how many were read, or `None` if the
    /// topic does not exist (yet).
    ///
    /// librdkafka emits PARTITION_EOF only once per arrival at the end, so a reader already at the
    /// end (a second catch-up with nothing new, or a log ending in a transaction marker, which
    /// occupies an offset but is never delivered) would wait for it in vain, and one left over from
    /// an earlier call says nothing about this one. Instead the consumer's position, which also
    /// moves past transaction markers, is compared with the watermark before reading, on such an
    /// event, and whenever nothing arrived for a short slice. Errors with [`Error::Timeout`] if the
    /// end is not reached in `timeout`.
    pub async fn read_to_end(
        &mut self,
        timeout: Duration,
        mut on_record: impl FnMut(i64, Option<&[u8]>, Option<&[u8]>),
    ) -> Result<Option<usize>> {
        const SLICE: Duration = Duration::from_millis(200);
        let deadline = tokio::time::Instant::now() + timeout;
        let (topic, what) = (self.topic.as_str(), self.what);
        let timed_out = |detail: String| Error::Timeout {
            what: format!("reading {what} {topic:?} to its end: {detail}"),
            millis: duration_millis(timeout),
        };
        let high = loop {
            let probe = Arc::clone(&self.consumer);
            let name = self.topic.clone();
            let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
            let watermarks =
                tokio::task::spawn_blocking(move || probe.fetch_watermarks(&name, 0, remaining))
                    .await
                    .map_err(|e| timed_out(format!("watermark query task failed: {e}")))?;
            match watermarks {
                Ok((low, high)) if high <= low => return Ok(Some(0)),
                Ok((_, high)) => break high,
                Err(KafkaError::MetadataFetch(
                    RDKafkaErrorCode::UnknownTopicOrPartition | RDKafkaErrorCode::UnknownPartition,
                )) => return self.missing_or_denied(timeout).await,
                // A topic created a moment ago (by this process or another) may still be electing
                // its leader: seen in CI on the 3-broker cluster as `NotLeaderForPartition` from a
                // producer built right after the control topic was created. Asked again until
                // the deadline, like the metadata check in `ensure`.
                Err(KafkaError::MetadataFetch(code))
                    if electing_leader(code) && tokio::time::Instant::now() < deadline =>
                {
                    back_off(
                        topic,
                        &KafkaError::MetadataFetch(code),
                        &mut self.last_error_log,
                    )
                    .await;
                }
                Err(e) => return Err(e.into()),
            }
        };
        let consumer = &self.consumer;
        let at_end = || {
            consumer
                .position()
                .ok()
                .and_then(|tpl| tpl.find_partition(topic, 0)?.offset().to_raw())
                .is_some_and(|position| position >= high)
        };
        if at_end() {
            return Ok(Some(0));
        }
        let mut read = 0;
        loop {
            let slice = (tokio::time::Instant::now() + SLICE).min(deadline);
            match tokio::time::timeout_at(slice, consumer.recv()).await {
                Ok(Ok(message)) => {
                    let offset = message.offset();
                    on_record(offset, message.key(), message.payload());
                    read += 1;
                    if offset + 1 >= high {
                        return Ok(Some(read));
                    }
                }
                // An end-of-partition event may be left over from an earlier arrival at the end (a
                // catch-up that stopped at the watermark before it came): only the position decides.
                Err(_) | Ok(Err(KafkaError::PartitionEOF(_))) if at_end() => {
                    return Ok(Some(read));
                }
                Err(_) if tokio::time::Instant::now() >= deadline => {
                    return Err(timed_out(format!("offset {high} not reached; read {read}")));
                }
                Err(_) | Ok(Err(KafkaError::PartitionEOF(_))) => {}
                // Not transient for this read: the caller gets the reason, not a timeout.
                Ok(Err(e))
                    if e.rdkafka_error_code()
                        == Some(RDKafkaErrorCode::TopicAuthorizationFailed) =>
                {
                    return Err(e.into());
                }
                Ok(Err(e)) => back_off(topic, &e, &mut self.last_error_log).await,
            }
        }
    }

    /// `Ok(None)` for a topic that does not exist; an error if it exists but this principal may
    /// not read it: librdkafka reports both alike to the watermark query, and a denied topic must
    /// not pass for an empty one (a client without its ACL would silently run without it).
    async fn missing_or_denied(&self, timeout: Duration) -> Result<Option<usize>> {
        let probe = Arc::clone(&self.consumer);
        let name = self.topic.clone();
        let code = tokio::task::spawn_blocking(move || {
            let metadata = probe.fetch_metadata(Some(&name), timeout).ok()?;
            let topic = metadata.topics().iter().find(|t| t.name() == name)?;
            topic.error().map(RDKafkaErrorCode::from)
        })
        .await
        .ok()
        .flatten();
        match code {
            Some(code @ RDKafkaErrorCode::TopicAuthorizationFailed) => {
                Err(KafkaError::MetadataFetch(code).into())
            }
            _ => Ok(None),
        }
    }

    /// Wait for the next record and pass its offset, key and value to `on_record` (end-of-log
    /// events and transient errors are logged and skipped).
    ///
    /// Cancellation safe: dropping the future before `on_record` ran loses no record.
    pub async fn next<R>(
        &mut self,
        on_record: impl FnOnce(i64, Option<&[u8]>, Option<&[u8]>) -> R,
    ) -> R {
        let consumer = Arc::clone(&self.consumer);
        loop {
            match consumer.recv().await {
                Ok(message) => {
                    return on_record(message.offset(), message.key(), message.payload());
                }
                Err(KafkaError::PartitionEOF(_)) => {}
                Err(e) => back_off(&self.topic, &e, &mut self.last_error_log).await,
            }
        }
    }
}

/// After a consumer error: librdkafka retries by itself (and [`ReaderContext`] has logged the
/// event); note it at most every 10 s and back off a little so a persistent error cannot spin.
async fn back_off(topic: &str, e: &KafkaError, last_log: &mut Option<Instant>) {
    let now = Instant::now();
    if last_log.is_none_or(|t| now.duration_since(t) >= Duration::from_secs(10)) {
        debug!(topic, error = %e, "consumer error (retrying)");
        *last_log = Some(now);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// What a topic created a moment ago answers while its leaders are being elected (transient: the
/// callers ask again, bounded).
fn electing_leader(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::LeaderNotAvailable | RDKafkaErrorCode::NotLeaderForPartition
    )
}

/// `d` in whole milliseconds, saturating (for [`Error::Timeout`]).
pub(crate) fn duration_millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compacted_spec_has_one_partition_and_replaces_configs() {
        let spec = TopicSpec::compacted("_dkg.x", 1234)
            .replication(3)
            .config("max.message.bytes", "99")
            .config("segment.ms", "600000");
        assert_eq!(spec.partitions, 1);
        assert_eq!(spec.replication, 3);
        assert_eq!(
            spec.configs,
            [
                ("cleanup.policy".to_owned(), "compact".to_owned()),
                ("max.message.bytes".to_owned(), "99".to_owned()),
                ("segment.ms".to_owned(), "600000".to_owned()),
            ]
        );
    }

    #[test]
    fn partition_counts_beyond_i32_are_a_config_error() {
        let spec = TopicSpec::new("t", u32::MAX);
        assert!(matches!(
            spec.new_topic(),
            Err(Error::InvalidConfig {
                field: "partitions",
                ..
            })
        ));
    }

    /// librdkafka's mock broker answers the reader's first watermark queries as a broker whose
    /// topic is still electing its leader does (CI saw it on the 3-broker cluster): the read waits
    /// them out and reaches the end instead of failing the client's start.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_read_to_the_end_waits_out_a_leader_election() {
        use rdkafka::mocking::MockCluster;
        use rdkafka::producer::{FutureProducer, FutureRecord};
        use rdkafka::types::{RDKafkaApiKey, RDKafkaRespErr};

        let cluster = MockCluster::new(1).expect("mock cluster");
        cluster.create_topic("ctl", 1, 1).expect("mock topic");
        let mut connection = ClientConfig::new();
        connection.set("bootstrap.servers", cluster.bootstrap_servers());
        let producer: FutureProducer = connection.create().expect("producer");
        for i in 0..3u8 {
            producer
                .send(
                    FutureRecord::to("ctl").key(&[i][..]).payload(&[i][..]),
                    Duration::from_secs(5),
                )
                .await
                .expect("produce to the mock");
        }
        let mut reader =
            CompactedReader::new(&connection, "ctl", "control topic", "dkg-test").expect("reader");
        // The reader's consumer looks up its start offset with a ListOffsets request of its own:
        // let that pass first, so the errors below meet the watermark query (two requests, low
        // and high, each failing the query alone).
        tokio::time::sleep(Duration::from_secs(1)).await;
        cluster.request_errors(
            RDKafkaApiKey::ListOffsets,
            &[RDKafkaRespErr::RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION; 2],
        );
        let mut offsets = Vec::new();
        let read = reader
            .read_to_end(Duration::from_secs(20), |offset, _, _| offsets.push(offset))
            .await
            .expect("read past the election");
        assert_eq!(read, Some(3));
        assert_eq!(offsets, [0, 1, 2]);
    }

    #[test]
    fn reader_config_wins_over_the_connection_but_keeps_its_group() {
        let mut connection = ClientConfig::new();
        connection
            .set("bootstrap.servers", "b:9092")
            .set("fetch.wait.max.ms", "5000");
        let config = reader_config(&connection, "dkg-x-reader");
        assert_eq!(config.get("bootstrap.servers"), Some("b:9092"));
        assert_eq!(config.get("fetch.wait.max.ms"), Some("100"));
        assert_eq!(config.get("group.id"), Some("dkg-x-reader"));
        connection.set("group.id", "mine");
        assert_eq!(
            reader_config(&connection, "dkg-x-reader").get("group.id"),
            Some("mine")
        );
    }
}
