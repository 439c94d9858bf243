//! The routing state shared by every producer flavour: per-topic assignment and partition count,
//! kept current by two background tasks, and the lock-free lookup on the hot path.
//!
//! Hot path ([`DkgRouter::route`]): one `ArcSwap` load for the topic map, a hash lookup, one load for
//! the topic's partition view, one for its assignment, the O(1) [`Assignment::route`], two atomic
//! counter increments. No lock, no allocation (except the first record of a topic never seen before,
//! which registers it), no I/O, no panic.

use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use arc_swap::{ArcSwap, ArcSwapOption};
use prometheus::{IntCounter, Registry};
use rdkafka::ClientContext;
use rdkafka::client::Client;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, StreamConsumer};
use rdkafka::error::{KafkaError, KafkaResult};
use rdkafka::message::{Header, Headers, OwnedHeaders};
use rdkafka::producer::{
    BaseProducer, BaseRecord, DeliveryResult, FutureProducer, Partitioner, Producer,
    ProducerContext, ThreadedProducer,
};
use rdkafka::types::RDKafkaRespErr;
use rdkafka::util::{AsyncRuntime, IntoOpaque};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tracing::{debug, info, warn};

use crate::assignment::{Assignment, Route};
use crate::error::{Error, Result};
use crate::hash::kafka_partition;
use crate::kafka::control::{self, ControlTopicReader, ControlUpdate, DEFAULT_CONTROL_TOPIC};
use crate::kafka::metrics::{ProducerMetrics, RouteCounters, TopicStatus};
use crate::kafka::topic::{self, duration_millis};
use dkg_protocol::headers;

pub use dkg_protocol::headers::EPOCH_HEADER;

/// Which rule placed a keyed record.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RouteKind {
    /// The key is a heavy hitter of the current assignment.
    Heavy,
    /// The key went through the current assignment's bucket table.
    Bucket,
    /// No assignment in effect: Kafka's default placement, `toPositive(murmur2(key)) % partitions`
    /// (identical to the Java producer).
    Fallback,
}

impl RouteKind {
    /// The `route` metric label.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            RouteKind::Heavy => "heavy",
            RouteKind::Bucket => "bucket",
            RouteKind::Fallback => "fallback",
        }
    }
}

/// Where a keyed record goes, as decided by [`DkgRouter::route`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Routing {
    /// The partition to set on the record. `None` only while the topic's partition count is not
    /// known yet (first records to a topic): leave the record to librdkafka's partitioner, which
    /// the DKG builders default to `murmur2_random`, the Java producer's placement.
    pub partition: Option<i32>,
    /// Epoch of the assignment that chose the partition; `None` for fallback placement.
    pub epoch: Option<u64>,
    /// Which rule decided.
    pub route: RouteKind,
    /// The key's partition changed in this producer's latest epoch transition (from the previous
    /// assignment, or from Kafka's default placement when there was none), which is still
    /// current. Computed only by routers built with
    /// [`DkgRouterBuilder::track_moved_keys`]; always `false` otherwise, and for fallback
    /// placement. The producer stamps headers on such records only (see
    /// [`EpochHeader::Moved`](crate::kafka::EpochHeader::Moved)).
    pub moved: bool,
}

impl Routing {
    const UNPLACED: Routing = Routing {
        partition: None,
        epoch: None,
        route: RouteKind::Fallback,
        moved: false,
    };

    /// `headers` with the [`EPOCH_HEADER`] appended when an assignment placed the record.
    #[must_use]
    pub fn stamp(&self, headers: Option<OwnedHeaders>) -> Option<OwnedHeaders> {
        match self.epoch {
            Some(epoch) => Some(stamp_epoch(headers, epoch)),
            None => headers,
        }
    }

    /// Apply this routing to a [`BaseRecord`] (for `BaseProducer`/`ThreadedProducer` users):
    /// sets the partition and stamps the epoch header. Use it only on records without an explicit
    /// partition.
    #[must_use]
    pub fn apply<'a, K, P, D>(&self, mut record: BaseRecord<'a, K, P, D>) -> BaseRecord<'a, K, P, D>
    where
        K: rdkafka::message::ToBytes + ?Sized,
        P: rdkafka::message::ToBytes + ?Sized,
        D: IntoOpaque,
    {
        if let Some(p) = self.partition {
            record.partition = Some(p);
        }
        record.headers = self.stamp(record.headers.take());
        record
    }
}

/// Append the [`EPOCH_HEADER`] (decimal ASCII) to `headers`.
#[must_use]
pub fn stamp_epoch(headers: Option<OwnedHeaders>, epoch: u64) -> OwnedHeaders {
    let mut buf = [0_u8; 20];
    let digits = headers::encode_decimal(epoch, &mut buf);
    headers
        .unwrap_or_else(|| OwnedHeaders::new_with_capacity(1))
        .insert(Header {
            key: EPOCH_HEADER,
            value: Some(digits),
        })
}

/// The epoch stamped on a record: its last well-formed [`EPOCH_HEADER`], if any (the rule
/// `DkgConsumer` reads records by).
#[must_use]
pub fn epoch_of<H: Headers>(headers: &H) -> Option<u64> {
    headers::epoch_of(headers.iter().map(|h| (h.key, h.value)))
}

/// Something that can tell a topic's current partition count (a blocking metadata request).
///
/// Implemented for the producers (so the count the router uses comes from the same client, and
/// the same metadata response, that librdkafka validates explicit partitions against) and for the
/// consumers.
pub trait PartitionCountSource: Send + Sync + 'static {
    /// `Ok(None)` if the topic does not exist.
    fn partition_count(&self, topic: &str, timeout: Duration) -> KafkaResult<Option<u32>>;
}

fn count_from_client<C: ClientContext>(
    client: &Client<C>,
    topic: &str,
    timeout: Duration,
) -> KafkaResult<Option<u32>> {
    let metadata = client.fetch_metadata(Some(topic), timeout)?;
    let Some(t) = metadata.topics().iter().find(|t| t.name() == topic) else {
        return Ok(None);
    };
    if !t.partitions().is_empty() {
        return Ok(Some(
            u32::try_from(t.partitions().len()).unwrap_or(u32::MAX),
        ));
    }
    match t.error() {
        Some(RDKafkaRespErr::RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART) | None => Ok(None),
        Some(e) => Err(KafkaError::MetadataFetch(e.into())),
    }
}

impl<C, R> PartitionCountSource for FutureProducer<C, R>
where
    C: ClientContext + 'static,
    R: AsyncRuntime,
{
    fn partition_count(&self, topic: &str, timeout: Duration) -> KafkaResult<Option<u32>> {
        count_from_client(self.client(), topic, timeout)
    }
}

impl<C, Part> PartitionCountSource for BaseProducer<C, Part>
where
    C: ProducerContext<Part> + 'static,
    Part: Partitioner + Send + Sync + 'static,
{
    fn partition_count(&self, topic: &str, timeout: Duration) -> KafkaResult<Option<u32>> {
        count_from_client(self.client(), topic, timeout)
    }
}

impl<C, Part> PartitionCountSource for ThreadedProducer<C, Part>
where
    C: ProducerContext<Part> + 'static,
    Part: Partitioner + Send + Sync + 'static,
{
    fn partition_count(&self, topic: &str, timeout: Duration) -> KafkaResult<Option<u32>> {
        count_from_client(self.client(), topic, timeout)
    }
}

impl<C: ConsumerContext + 'static> PartitionCountSource for BaseConsumer<C> {
    fn partition_count(&self, topic: &str, timeout: Duration) -> KafkaResult<Option<u32>> {
        count_from_client(self.client(), topic, timeout)
    }
}

impl<C: ConsumerContext + 'static> PartitionCountSource for StreamConsumer<C> {
    fn partition_count(&self, topic: &str, timeout: Duration) -> KafkaResult<Option<u32>> {
        count_from_client(self.client(), topic, timeout)
    }
}

impl<T: PartitionCountSource + ?Sized> PartitionCountSource for Arc<T> {
    fn partition_count(&self, topic: &str, timeout: Duration) -> KafkaResult<Option<u32>> {
        (**self).partition_count(topic, timeout)
    }
}

/// Partition count and per-partition counters, swapped together.
struct PartitionView {
    /// 0 = not known (yet).
    count: u32,
    counters: Box<[IntCounter]>,
}

impl PartitionView {
    #[inline]
    fn count_record(&self, partition: u32) {
        if let Some(c) = self.counters.get(partition as usize) {
            c.inc();
        }
    }
}

/// Where keys lived before the current assignment of a topic was adopted.
#[derive(Debug)]
enum Before {
    /// Not known (the assignment was the first one read at start-up): nothing counts as moved.
    Unknown,
    /// Kafka's default placement (no assignment was in effect).
    Hash,
    /// The previous assignment.
    Assignment(Arc<Assignment>),
}

/// The latest epoch transition of a topic. Stored before the assignment it leads to, and used by
/// a route only when `to_epoch` equals the epoch of the assignment it loaded, so a route racing an
/// adoption never pairs an assignment with the wrong predecessor (it counts the key as moved).
#[derive(Debug)]
struct Transition {
    to_epoch: u64,
    before: Before,
}

impl Transition {
    /// Whether `key`, placed on `partition` by the assignment of `epoch`, moved in this transition.
    #[inline]
    fn moved(&self, epoch: u64, key: &[u8], partition: u32, count: u32) -> bool {
        if self.to_epoch != epoch {
            return true;
        }
        match &self.before {
            Before::Unknown => false,
            Before::Hash => kafka_partition(key, count) != partition,
            Before::Assignment(b) if b.partitions() == count => b.partition_for(key) != partition,
            Before::Assignment(_) => kafka_partition(key, count) != partition,
        }
    }
}

/// One data topic's routing state.
struct TopicState {
    name: Arc<str>,
    assignment: ArcSwapOption<Assignment>,
    transition: ArcSwapOption<Transition>,
    view: ArcSwap<PartitionView>,
    /// Resolved on first use, so topics that are only on the control topic export no series.
    routes: OnceLock<RouteCounters>,
    /// Records are produced to it from this process: its partition count is kept current and
    /// its metrics exported.
    in_use: AtomicBool,
}

impl TopicState {
    fn new(name: &str) -> Self {
        Self {
            name: Arc::from(name),
            assignment: ArcSwapOption::empty(),
            transition: ArcSwapOption::empty(),
            view: ArcSwap::from_pointee(PartitionView {
                count: 0,
                counters: Box::new([]),
            }),
            routes: OnceLock::new(),
            in_use: AtomicBool::new(false),
        }
    }

    /// Route `key` given the topic's partition count `count` (0 = unknown); with `track_moves`,
    /// also tell whether the key moved in the latest transition.
    #[inline]
    fn route(
        &self,
        key: &[u8],
        count: u32,
        view: &PartitionView,
        routes: &RouteCounters,
        track_moves: bool,
    ) -> Routing {
        if count == 0 {
            routes.fallback.inc();
            return Routing::UNPLACED;
        }
        let assignment = self.assignment.load();
        if let Some(a) = assignment.as_deref() {
            if a.partitions() == count {
                let (p, route) = a.route(key);
                // Guaranteed by `Assignment`; re-checked (one compare) so that no bug elsewhere can
                // ever send a record to a partition that does not exist.
                if p < count {
                    let route = match route {
                        Route::Heavy => RouteKind::Heavy,
                        Route::Bucket => RouteKind::Bucket,
                    };
                    match route {
                        RouteKind::Heavy => routes.heavy.inc(),
                        _ => routes.bucket.inc(),
                    }
                    view.count_record(p);
                    let moved = track_moves
                        && self
                            .transition
                            .load()
                            .as_deref()
                            .is_none_or(|t| t.moved(a.epoch(), key, p, count));
                    return Routing {
                        partition: Some(p as i32),
                        epoch: Some(a.epoch()),
                        route,
                        moved,
                    };
                }
            }
        }
        let p = kafka_partition(key, count);
        routes.fallback.inc();
        view.count_record(p);
        Routing {
            partition: Some(p as i32),
            epoch: None,
            route: RouteKind::Fallback,
            moved: false,
        }
    }

    fn status(&self) -> TopicStatus {
        let a = self.assignment.load();
        let count = self.view.load().count;
        TopicStatus {
            topic: Arc::clone(&self.name),
            epoch: a.as_deref().map_or(0, Assignment::epoch),
            created_at_ms: a.as_deref().map(Assignment::created_at_ms),
            in_effect: a
                .as_deref()
                .is_some_and(|a| count != 0 && a.partitions() == count),
        }
    }

    /// Install a new partition count (background task only).
    fn set_partition_count(&self, count: u32, metrics: &ProducerMetrics) {
        let old = self.view.load();
        if old.count == count {
            return;
        }
        let counters: Box<[IntCounter]> = (0..count.max(old.counters.len() as u32))
            .map(|p| {
                old.counters
                    .get(p as usize)
                    .cloned()
                    .unwrap_or_else(|| metrics.partition_counter(&self.name, p))
            })
            .collect();
        self.view.store(Arc::new(PartitionView { count, counters }));
        let assignment = self.assignment.load();
        match assignment.as_deref() {
            Some(a) if old.count != 0 && a.partitions() != count => warn!(
                topic = %self.name,
                partitions = count,
                previous_partitions = old.count,
                epoch = a.epoch(),
                assignment_partitions = a.partitions(),
                "partition count changed: Kafka's default placement until an assignment for {count} \
                 partitions is published"
            ),
            _ if old.count != 0 => info!(
                topic = %self.name,
                partitions = count,
                previous_partitions = old.count,
                "partition count changed"
            ),
            _ => debug!(topic = %self.name, partitions = count, "partition count known"),
        }
    }
}

type TopicMap = HashMap<Arc<str>, Arc<TopicState>, ahash::RandomState>;

/// State shared by the handles and the background tasks.
struct Shared {
    control_topic: String,
    topics: ArcSwap<TopicMap>,
    metrics: ProducerMetrics,
    /// Topics whose partition count must be fetched now.
    metadata_requests: mpsc::UnboundedSender<Arc<str>>,
    keyless: AtomicU32,
    /// Compute [`Routing::moved`].
    track_moves: bool,
    /// Bumped after every adoption or retraction (for the ordering task of the producer).
    adoptions: watch::Sender<u64>,
}

impl Shared {
    /// The state of `topic`, created if missing. Lock-free (copy-on-write of the map), allocates
    /// only when the topic is new.
    fn topic(&self, topic: &str) -> Arc<TopicState> {
        if let Some(s) = self.topics.load().get(topic) {
            return Arc::clone(s);
        }
        let fresh = Arc::new(TopicState::new(topic));
        self.topics.rcu(|map| {
            if map.contains_key(topic) {
                return Arc::clone(map);
            }
            let mut next = TopicMap::clone(map);
            next.insert(Arc::clone(&fresh.name), Arc::clone(&fresh));
            Arc::new(next)
        });
        // Whoever won the race, the map now holds the one state for `topic`.
        self.topics.load().get(topic).map_or(fresh, Arc::clone)
    }

    /// Mark `state` as produced to and return its route counters; the first time, resolve the
    /// counters and (with `fetch`) ask for its partition count.
    #[inline]
    fn use_topic<'s>(&self, state: &'s TopicState, fetch: bool) -> &'s RouteCounters {
        let routes = state
            .routes
            .get_or_init(|| self.metrics.route_counters(&state.name));
        if !state.in_use.load(Ordering::Relaxed)
            && !state.in_use.swap(true, Ordering::AcqRel)
            && fetch
        {
            // Unbounded send: never blocks; fails only once the router is shut down.
            let _ = self.metadata_requests.send(Arc::clone(&state.name));
        }
        routes
    }

    /// Apply a control-topic update. `live`: read after the start-up catch-up (log at info);
    /// during the catch-up the history is replayed quietly and summarised once.
    fn apply(&self, update: &ControlUpdate, live: bool) {
        match update {
            ControlUpdate::Adopted(a) => {
                let state = self.topic(a.topic());
                let count = state.view.load().count;
                let before = match state.assignment.load_full() {
                    Some(prev) => Before::Assignment(prev),
                    // Read live: routing was Kafka's default placement until now. At start-up
                    // nothing was routed yet: the predecessor is unknown.
                    None if live => Before::Hash,
                    None => Before::Unknown,
                };
                state.transition.store(Some(Arc::new(Transition {
                    to_epoch: a.epoch(),
                    before,
                })));
                state.assignment.store(Some(Arc::clone(a)));
                self.adoptions.send_modify(|n| *n += 1);
                if !live {
                    return;
                }
                info!(
                    control_topic = %self.control_topic,
                    topic = a.topic(),
                    epoch = a.epoch(),
                    partitions = a.partitions(),
                    heavy_keys = a.heavy().len(),
                    buckets = a.buckets(),
                    in_effect = count == a.partitions(),
                    "adopted DKG assignment"
                );
                if count != 0 && count != a.partitions() {
                    warn!(
                        topic = a.topic(),
                        epoch = a.epoch(),
                        assignment_partitions = a.partitions(),
                        topic_partitions = count,
                        "assignment is for a different partition count than the topic has: \
                         Kafka's default placement until they match"
                    );
                }
            }
            ControlUpdate::Retracted { topic } => {
                if let Some(state) = self.topics.load().get(topic.as_str()) {
                    state.assignment.store(None);
                    state.transition.store(None);
                }
                self.adoptions.send_modify(|n| *n += 1);
                if !live {
                    return;
                }
                info!(
                    control_topic = %self.control_topic,
                    topic = %topic,
                    "assignment retracted: Kafka's default placement"
                );
            }
            ControlUpdate::Rejected { reason, .. } => {
                if let Some(c) = self.metrics.rejected(*reason) {
                    c.inc();
                }
            }
            ControlUpdate::Unchanged { .. } => {}
        }
    }

    fn statuses(&self) -> Vec<TopicStatus> {
        self.topics
            .load()
            .values()
            .filter(|s| s.in_use.load(Ordering::Acquire))
            .map(|s| s.status())
            .collect()
    }
}

/// Aborts the background tasks when the last router handle is dropped.
struct TaskGuard(Vec<JoinHandle<()>>);

impl Drop for TaskGuard {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// The DKG routing state of one process: follows the control topic and the data topics' partition
/// counts in the background and answers "which partition for this key?" without blocking.
///
/// [`DkgProducer`](crate::kafka::DkgProducer) contains one. Use it directly with a
/// `BaseProducer`/`ThreadedProducer`: [`DkgRouter::route`] + [`Routing::apply`] on each record
/// (explicit partition + epoch header), or [`DkgRouter::partitioner`] as librdkafka's custom
/// partitioner (no header). Cheap to clone; the background tasks stop when the last clone (or
/// partitioner) is dropped.
#[derive(Clone)]
pub struct DkgRouter {
    shared: Arc<Shared>,
    _tasks: Arc<TaskGuard>,
}

impl fmt::Debug for DkgRouter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DkgRouter")
            .field("control_topic", &self.shared.control_topic)
            .field("topics", &self.shared.topics.load().len())
            .finish_non_exhaustive()
    }
}

impl DkgRouter {
    /// A builder; `config` supplies the connection settings (bootstrap servers, security), see
    /// [`control::connection_config`].
    #[must_use]
    pub fn builder(config: ClientConfig) -> DkgRouterBuilder {
        DkgRouterBuilder::new(config)
    }

    /// The partition (and epoch) for a keyed record to `topic`. Never blocks, never panics; a
    /// returned partition always exists in the topic's latest known metadata.
    #[inline]
    pub fn route(&self, topic: &str, key: &[u8]) -> Routing {
        let map = self.shared.topics.load();
        if let Some(state) = map.get(topic) {
            let routes = self.shared.use_topic(state, true);
            let view = state.view.load();
            return state.route(key, view.count, &view, routes, self.shared.track_moves);
        }
        drop(map);
        let state = self.shared.topic(topic);
        let routes = self.shared.use_topic(&state, true);
        let view = state.view.load();
        state.route(key, view.count, &view, routes, self.shared.track_moves)
    }

    /// Like [`DkgRouter::route`] with the partition count librdkafka reported (custom partitioner
    /// path). Always returns a partition in `0..partition_count` (0 if `partition_count <= 0`).
    #[inline]
    pub fn route_with_count(&self, topic: &str, key: &[u8], partition_count: i32) -> Routing {
        let Ok(count) = u32::try_from(partition_count) else {
            return Routing {
                partition: Some(0),
                ..Routing::UNPLACED
            };
        };
        if count == 0 {
            return Routing {
                partition: Some(0),
                ..Routing::UNPLACED
            };
        }
        let map = self.shared.topics.load();
        if let Some(state) = map.get(topic) {
            let routes = self.shared.use_topic(state, true);
            let view = state.view.load();
            return state.route(key, count, &view, routes, self.shared.track_moves);
        }
        drop(map);
        let state = self.shared.topic(topic);
        let routes = self.shared.use_topic(&state, true);
        let view = state.view.load();
        state.route(key, count, &view, routes, self.shared.track_moves)
    }

    /// The assignment currently adopted for `topic` (in effect only while its partition count
    /// matches the topic's).
    #[must_use]
    pub fn assignment(&self, topic: &str) -> Option<Arc<Assignment>> {
        self.shared
            .topics
            .load()
            .get(topic)
            .and_then(|s| s.assignment.load_full())
    }

    /// The latest known partition count of `topic` (`None` until fetched).
    #[must_use]
    pub fn partition_count(&self, topic: &str) -> Option<u32> {
        self.shared
            .topics
            .load()
            .get(topic)
            .map(|s| s.view.load().count)
            .filter(|&c| c != 0)
    }

    /// The control topic followed.
    #[must_use]
    pub fn control_topic(&self) -> &str {
        &self.shared.control_topic
    }

    /// A receiver that changes after every adoption or retraction of an assignment (any topic).
    #[must_use]
    pub fn adoptions(&self) -> watch::Receiver<u64> {
        self.shared.adoptions.subscribe()
    }

    /// Topics records were routed to (or declared with [`DkgRouterBuilder::topics`]).
    #[must_use]
    pub fn topics_in_use(&self) -> Vec<String> {
        self.shared
            .topics
            .load()
            .values()
            .filter(|s| s.in_use.load(Ordering::Acquire))
            .map(|s| s.name.to_string())
            .collect()
    }

    /// An rdkafka [`Partitioner`] backed by this router, for `BaseProducer`/`ThreadedProducer`
    /// (not honoured by `FutureProducer`).
    #[must_use]
    pub fn partitioner(&self) -> DkgPartitioner {
        DkgPartitioner {
            router: self.clone(),
        }
    }

    /// A ready-made [`ProducerContext`] that installs [`DkgRouter::partitioner`], for
    /// `ThreadedProducer::from_config_and_context` / `BaseProducer::from_config_and_context`.
    #[must_use]
    pub fn producer_context(&self) -> DkgProducerContext {
        DkgProducerContext {
            partitioner: self.partitioner(),
        }
    }
}

/// DKG as librdkafka's custom partitioner (`ProducerContext::get_custom_partitioner`).
///
/// librdkafka calls it from its own threads with the partition count from its metadata; it routes
/// like [`DkgRouter::route_with_count`]. It cannot stamp the [`EPOCH_HEADER`] (a partitioner does
/// not see the record), so consumers relying on epochs need [`DkgRouter::route`] instead. librdkafka
/// may call it more than once per record, so `dkg_producer_*records_total` may over-count on this
/// path. Keyless records (only seen with `sticky.partitioning.linger.ms=0`) go round-robin.
#[derive(Clone, Debug)]
pub struct DkgPartitioner {
    router: DkgRouter,
}

impl Partitioner for DkgPartitioner {
    fn partition(
        &self,
        topic_name: &str,
        key: Option<&[u8]>,
        partition_cnt: i32,
        _is_partition_available: impl Fn(i32) -> bool,
    ) -> i32 {
        if partition_cnt <= 0 {
            return 0;
        }
        match key {
            Some(key) => self
                .router
                .route_with_count(topic_name, key, partition_cnt)
                .partition
                .unwrap_or(0),
            None => {
                let n = self.router.shared.keyless.fetch_add(1, Ordering::Relaxed);
                (n % partition_cnt.unsigned_abs()) as i32
            }
        }
    }
}

/// A [`ProducerContext`] whose custom partitioner is a [`DkgPartitioner`]; delivery reports are
/// ignored (use your own context for them and return the partitioner from
/// `get_custom_partitioner`).
#[derive(Clone, Debug)]
pub struct DkgProducerContext {
    partitioner: DkgPartitioner,
}

impl ClientContext for DkgProducerContext {}

impl ProducerContext<DkgPartitioner> for DkgProducerContext {
    type DeliveryOpaque = ();

    fn delivery(&self, _: &DeliveryResult<'_>, _: Self::DeliveryOpaque) {}

    fn get_custom_partitioner(&self) -> Option<&DkgPartitioner> {
        Some(&self.partitioner)
    }
}

/// Builder of a [`DkgRouter`]. Defaults are listed on each method.
pub struct DkgRouterBuilder {
    connection: ClientConfig,
    control_consumer_config: Option<ClientConfig>,
    control_topic: String,
    registry: Option<Registry>,
    topics: Vec<String>,
    startup_timeout: Duration,
    metadata_refresh: Duration,
    metadata_timeout: Duration,
    ensure_control_topic: bool,
    control_topic_replication: i32,
    max_assignment_bytes: usize,
    metadata_source: Option<Arc<dyn PartitionCountSource>>,
    track_moves: bool,
}

impl fmt::Debug for DkgRouterBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DkgRouterBuilder")
            .field("control_topic", &self.control_topic)
            .field("topics", &self.topics)
            .field("startup_timeout", &self.startup_timeout)
            .field("metadata_refresh", &self.metadata_refresh)
            .field("ensure_control_topic", &self.ensure_control_topic)
            .field("metrics", &self.registry.is_some())
            .finish_non_exhaustive()
    }
}

impl DkgRouterBuilder {
    fn new(config: ClientConfig) -> Self {
        Self {
            connection: control::connection_config(&config),
            control_consumer_config: None,
            control_topic: DEFAULT_CONTROL_TOPIC.to_owned(),
            registry: None,
            topics: Vec::new(),
            startup_timeout: Duration::from_secs(30),
            metadata_refresh: Duration::from_secs(5),
            metadata_timeout: Duration::from_secs(5),
            ensure_control_topic: true,
            control_topic_replication: -1,
            max_assignment_bytes: crate::assignment::MAX_ASSIGNMENT_BYTES,
            metadata_source: None,
            track_moves: false,
        }
    }

    /// Compute [`Routing::moved`] (one more O(1) lookup per routed record, in the previous
    /// assignment). Default false; [`DkgProducer`](crate::kafka::DkgProducer) turns it on for
    /// [`EpochHeader::Moved`](crate::kafka::EpochHeader::Moved).
    #[must_use]
    pub fn track_moved_keys(mut self, track: bool) -> Self {
        self.track_moves = track;
        self
    }

    /// The control topic to follow. Default [`DEFAULT_CONTROL_TOPIC`].
    #[must_use]
    pub fn control_topic(mut self, name: impl Into<String>) -> Self {
        self.control_topic = name.into();
        self
    }

    /// Register the `dkg_producer_*` metrics in `registry` (see [`crate::kafka::metrics`]).
    /// Default: not registered. One router per registry (a second registration fails with
    /// [`Error::Metrics`]).
    #[must_use]
    pub fn metrics(mut self, registry: &Registry) -> Self {
        self.registry = Some(registry.clone());
        self
    }

    /// Topics this process will produce to: their partition counts are fetched before `build`
    /// returns, so an existing assignment routes from the very first record. Topics not declared
    /// are picked up on their first record (routed by librdkafka's partitioner until their
    /// partition count arrives, typically a few milliseconds). Default: none.
    #[must_use]
    pub fn topics<I, S>(mut self, topics: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.topics.extend(topics.into_iter().map(Into::into));
        self
    }

    /// Limit for `build`: reading the control topic to its end and the declared topics' metadata.
    /// Default 30 s.
    #[must_use]
    pub fn startup_timeout(mut self, timeout: Duration) -> Self {
        self.startup_timeout = timeout;
        self
    }

    /// The configured startup timeout (for a wrapper that bounds more of its `build` by it).
    pub(crate) fn startup_timeout_value(&self) -> Duration {
        self.startup_timeout
    }

    /// How often the partition counts of the topics in use are re-read (a partition increase
    /// switches to fallback within this interval). Default 5 s; minimum 100 ms.
    #[must_use]
    pub fn metadata_refresh_interval(mut self, interval: Duration) -> Self {
        self.metadata_refresh = interval.max(Duration::from_millis(100));
        self
    }

    /// Time limit of one metadata request. Default 5 s.
    #[must_use]
    pub fn metadata_timeout(mut self, timeout: Duration) -> Self {
        self.metadata_timeout = timeout;
        self
    }

    /// Create the control topic if missing and check its configuration at build
    /// ([`control::ensure_control_topic`]; needs the CreateTopics/DescribeConfigs ACLs).
    /// Default true. With false a missing control topic reads as empty and is followed once it
    /// exists.
    #[must_use]
    pub fn ensure_control_topic(mut self, ensure: bool) -> Self {
        self.ensure_control_topic = ensure;
        self
    }

    /// Replication factor used when creating the control topic. Default -1 (the broker's
    /// `default.replication.factor`).
    #[must_use]
    pub fn control_topic_replication(mut self, replication: i32) -> Self {
        self.control_topic_replication = replication;
        self
    }

    /// Full configuration of the control-topic consumer (and admin client), replacing the one
    /// derived from the producer config by [`control::connection_config`]. Reader settings
    /// (no commits, `fetch.wait.max.ms=100`, ...) are still applied on top.
    #[must_use]
    pub fn control_consumer_config(mut self, config: ClientConfig) -> Self {
        self.control_consumer_config = Some(config);
        self
    }

    /// Reject control-topic values larger than this (capped at
    /// [`MAX_ASSIGNMENT_BYTES`](crate::MAX_ASSIGNMENT_BYTES), the default).
    #[must_use]
    pub fn max_assignment_bytes(mut self, max: usize) -> Self {
        self.max_assignment_bytes = max;
        self
    }

    /// Where partition counts come from. Pass the producer you send with (`Arc<BaseProducer>`,
    /// `Arc<ThreadedProducer>`, a `FutureProducer`): librdkafka rejects an explicit partition it
    /// does not know yet, and a count read through the producer's own client is known to it.
    /// Default: the control-topic consumer (fine for [`DkgRouter::partitioner`], which gets counts
    /// from librdkafka itself). Do not pass a producer whose context holds this router's
    /// partitioner: the two would keep each other alive.
    #[must_use]
    pub fn metadata_source(mut self, source: impl PartitionCountSource) -> Self {
        self.metadata_source = Some(Arc::new(source));
        self
    }

    /// Read the control topic to its end, fetch the declared topics' partition counts, start the
    /// background tasks (a tokio runtime is required) and return the router.
    pub async fn build(self) -> Result<DkgRouter> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|e| Error::InvalidConfig {
            field: "runtime",
            reason: format!("DkgRouter needs a tokio runtime for its background tasks: {e}"),
        })?;
        let deadline = tokio::time::Instant::now() + self.startup_timeout;
        let consumer_config = self
            .control_consumer_config
            .clone()
            .unwrap_or_else(|| self.connection.clone());

        if self.ensure_control_topic {
            topic::ensure(
                &consumer_config,
                &control::control_topic_spec(&self.control_topic, self.control_topic_replication),
                deadline.saturating_duration_since(tokio::time::Instant::now()),
            )
            .await?;
        }

        let metrics = ProducerMetrics::new()?;
        let (tx, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            control_topic: self.control_topic.clone(),
            topics: ArcSwap::from_pointee(TopicMap::default()),
            metrics,
            metadata_requests: tx,
            keyless: AtomicU32::new(0),
            track_moves: self.track_moves,
            adoptions: watch::Sender::new(0),
        });

        let book = control::AssignmentBook::new().with_max_value_bytes(self.max_assignment_bytes);
        let mut reader =
            ControlTopicReader::with_book(&consumer_config, &self.control_topic, book)?;
        let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
        let read = reader
            .catch_up(remaining, |record| shared.apply(&record.update, false))
            .await?;
        info!(
            control_topic = %self.control_topic,
            records = read,
            assignments = reader.book().len(),
            "read the control topic to its end"
        );
        for a in reader.book().iter() {
            debug!(
                topic = a.topic(),
                epoch = a.epoch(),
                partitions = a.partitions(),
                "current DKG assignment"
            );
        }

        let source: Arc<dyn PartitionCountSource> = match self.metadata_source {
            Some(s) => s,
            None => {
                let c: BaseConsumer = consumer_config.create()?;
                Arc::new(c)
            }
        };

        // Declared topics: counts known before the first record.
        for topic in &self.topics {
            // Fetched right below rather than through the request channel.
            shared.use_topic(&shared.topic(topic), false);
        }
        if !self.topics.is_empty() {
            let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
            let names: Vec<Arc<str>> = self
                .topics
                .iter()
                .map(|t| Arc::clone(&shared.topic(t).name))
                .collect();
            let fetched = tokio::time::timeout(
                remaining,
                refresh_counts(&shared, &source, names, self.metadata_timeout),
            )
            .await;
            if fetched.is_err() {
                return Err(Error::Timeout {
                    what: format!("partition counts of {:?}", self.topics),
                    millis: duration_millis(self.startup_timeout),
                });
            }
        }
        for topic in &self.topics {
            let status = shared.topic(topic).status();
            info!(
                topic = %topic,
                partitions = ?known_partitions(&shared, topic),
                epoch = status.epoch,
                in_effect = status.in_effect,
                "DKG routing state at start"
            );
        }

        if let Some(registry) = &self.registry {
            let weak = Arc::downgrade(&shared);
            shared.metrics.register(registry, move || {
                weak.upgrade().map_or_else(Vec::new, |s| s.statuses())
            })?;
        }

        let follow = runtime.spawn(follow_control_topic(Arc::clone(&shared), reader));
        let refresh = runtime.spawn(follow_partition_counts(
            Arc::clone(&shared),
            source,
            rx,
            self.metadata_refresh,
            self.metadata_timeout,
        ));
        Ok(DkgRouter {
            shared,
            _tasks: Arc::new(TaskGuard(vec![follow, refresh])),
        })
    }
}

fn known_partitions(shared: &Shared, topic: &str) -> Option<u32> {
    Some(shared.topic(topic).view.load().count).filter(|&c| c != 0)
}

async fn follow_control_topic(shared: Arc<Shared>, mut reader: ControlTopicReader) {
    loop {
        let record = reader.next_record().await;
        shared.apply(&record.update, true);
    }
}

async fn follow_partition_counts(
    shared: Arc<Shared>,
    source: Arc<dyn PartitionCountSource>,
    mut requests: mpsc::UnboundedReceiver<Arc<str>>,
    every: Duration,
    timeout: Duration,
) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let topics: Vec<Arc<str>> = tokio::select! {
            _ = tick.tick() => shared
                .topics
                .load()
                .values()
                .filter(|s| s.in_use.load(Ordering::Acquire))
                .map(|s| Arc::clone(&s.name))
                .collect(),
            request = requests.recv() => {
                let Some(first) = request else { return };
                let mut batch = vec![first];
                while let Ok(more) = requests.try_recv() {
                    batch.push(more);
                }
                batch
            }
        };
        if !topics.is_empty() {
            refresh_counts(&shared, &source, topics, timeout).await;
        }
    }
}

/// Fetch and install the partition counts of `topics` (blocking requests on the blocking pool).
async fn refresh_counts(
    shared: &Arc<Shared>,
    source: &Arc<dyn PartitionCountSource>,
    topics: Vec<Arc<str>>,
    timeout: Duration,
) {
    let src = Arc::clone(source);
    let fetched = tokio::task::spawn_blocking(move || {
        topics
            .into_iter()
            .map(|t| {
                let count = src.partition_count(&t, timeout);
                (t, count)
            })
            .collect::<Vec<_>>()
    })
    .await;
    let Ok(fetched) = fetched else { return };
    for (topic, count) in fetched {
        let state = shared.topic(&topic);
        match count {
            Ok(Some(n)) => state.set_partition_count(n, &shared.metrics),
            Ok(None) => {
                debug!(topic = %topic, "topic does not exist (yet): librdkafka's partitioner");
                state.set_partition_count(0, &shared.metrics);
            }
            // Keep the last known count: a broker outage must not flip routing.
            Err(e) => debug!(topic = %topic, error = %e, "partition count refresh failed"),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use proptest::prelude::*;

    use super::*;
    use crate::assignment::{AssignmentParts, HeavyKey, Params};
    use crate::hash::BucketHash;

    /// A router with no background tasks: state is set by hand.
    fn detached() -> DkgRouter {
        let (tx, _rx) = mpsc::unbounded_channel();
        DkgRouter {
            shared: Arc::new(Shared {
                control_topic: "ctl".to_owned(),
                topics: ArcSwap::from_pointee(TopicMap::default()),
                metrics: ProducerMetrics::new().unwrap(),
                metadata_requests: tx,
                keyless: AtomicU32::new(0),
                track_moves: true,
                adoptions: watch::Sender::new(0),
            }),
            _tasks: Arc::new(TaskGuard(Vec::new())),
        }
    }

    fn assignment(topic: &str, partitions: u32, epoch: u64, table: Vec<u32>) -> Arc<Assignment> {
        Arc::new(
            Assignment::new(AssignmentParts {
                topic: topic.to_owned(),
                partitions,
                epoch,
                bucket_hash: BucketHash::default(),
                table,
                heavy: vec![HeavyKey {
                    key: b"hot".to_vec(),
                    partition: partitions - 1,
                    weight: 10,
                }],
                params: Params {
                    theta: 0.1,
                    epsilon: 0.01,
                    mu: 2.0,
                    window_records: 10,
                },
                created_at_ms: 1,
                predicted_load: vec![1.0 / f64::from(partitions); partitions as usize],
            })
            .unwrap(),
        )
    }

    fn set_state(r: &DkgRouter, topic: &str, count: u32, a: Option<Arc<Assignment>>) {
        let state = r.shared.topic(topic);
        state.set_partition_count(count, &r.shared.metrics);
        state.transition.store(a.as_ref().map(|a| {
            Arc::new(Transition {
                to_epoch: a.epoch(),
                before: Before::Unknown,
            })
        }));
        state.assignment.store(a);
    }

    #[test]
    fn route_table() {
        let r = detached();
        let four = assignment("t", 4, 3, vec![1, 1, 1, 1]);
        let eight = assignment("t", 8, 4, vec![5; 8]);
        let fallback = |key: &[u8], n: u32| Routing {
            partition: Some(kafka_partition(key, n) as i32),
            epoch: None,
            route: RouteKind::Fallback,
            moved: false,
        };
        // (partition count known, assignment, key, expected)
        type Case<'a> = (u32, Option<Arc<Assignment>>, &'a [u8], Routing);
        let cases: Vec<Case<'_>> = vec![
            (0, None, b"k", Routing::UNPLACED),
            (0, Some(Arc::clone(&four)), b"k", Routing::UNPLACED),
            (4, None, b"k", fallback(b"k", 4)),
            (4, None, b"", fallback(b"", 4)),
            (
                4,
                Some(Arc::clone(&four)),
                b"k",
                Routing {
                    partition: Some(1),
                    epoch: Some(3),
                    route: RouteKind::Bucket,
                    moved: false,
                },
            ),
            (
                4,
                Some(Arc::clone(&four)),
                b"hot",
                Routing {
                    partition: Some(3),
                    epoch: Some(3),
                    route: RouteKind::Heavy,
                    moved: false,
                },
            ),
            (8, Some(Arc::clone(&four)), b"k", fallback(b"k", 8)),
            (4, Some(Arc::clone(&eight)), b"hot", fallback(b"hot", 4)),
            (
                8,
                Some(Arc::clone(&eight)),
                b"k",
                Routing {
                    partition: Some(5),
                    epoch: Some(4),
                    route: RouteKind::Bucket,
                    moved: false,
                },
            ),
        ];
        for (count, a, key, want) in cases {
            set_state(&r, "t", count, a.clone());
            assert_eq!(
                r.route("t", key),
                want,
                "count {count} epoch {:?}",
                a.map(|a| a.epoch())
            );
        }
    }

    #[test]
    fn moved_keys_follow_the_latest_transition() {
        let r = detached();
        set_state(&r, "t", 4, None);
        let shared = &r.shared;
        let adopt = |a: Arc<Assignment>, live: bool| shared.apply(&ControlUpdate::Adopted(a), live);
        let moved = |key: &[u8]| r.route("t", key).moved;
        // First assignment read at start-up: predecessor unknown, nothing moved.
        adopt(assignment("t", 4, 1, vec![1; 4]), false);
        assert!(!moved(b"k") && !moved(b"hot"));
        // Live: the table moves every bucket from 1 to 2; the heavy key stays on 3.
        adopt(assignment("t", 4, 2, vec![2; 4]), true);
        assert!(moved(b"k"), "bucket keys moved 1 -> 2");
        assert!(!moved(b"hot"), "hot stays on 3");
        let mut rx = r.adoptions();
        rx.mark_unchanged();
        adopt(assignment("t", 4, 3, vec![2; 4]), true);
        assert!(rx.has_changed().unwrap());
        assert!(!moved(b"k"), "epoch 3 moved nothing");
        // A transition recorded for another epoch than the one loaded: counted as moved.
        r.shared
            .topic("t")
            .transition
            .store(Some(Arc::new(Transition {
                to_epoch: 9,
                before: Before::Unknown,
            })));
        assert!(moved(b"k"));
        // After a retraction, live adoption comes from Kafka's default placement.
        shared.apply(&ControlUpdate::Retracted { topic: "t".into() }, true);
        assert!(!moved(b"k"), "fallback never counts as moved");
        adopt(assignment("t", 4, 1, vec![0; 4]), true);
        assert_eq!(moved(b"k"), kafka_partition(b"k", 4) != 0);
        assert!(r.topics_in_use().contains(&"t".to_owned()));
    }

    #[test]
    fn unknown_topic_is_registered_and_left_to_librdkafka() {
        let r = detached();
        assert_eq!(r.route("new", b"k"), Routing::UNPLACED);
        assert!(r.shared.topics.load().contains_key("new"));
        assert!(r.shared.topics.load()["new"].in_use.load(Ordering::Relaxed));
        assert_eq!(r.partition_count("new"), None);
    }

    #[test]
    fn partitioner_always_returns_a_valid_partition() {
        let r = detached();
        set_state(&r, "t", 4, Some(assignment("t", 4, 1, vec![2; 4])));
        let p = r.partitioner();
        assert_eq!(p.partition("t", Some(b"k"), 4, |_| true), 2);
        // librdkafka's count wins over the router's: assignment for 4, topic now has 6.
        assert_eq!(
            p.partition("t", Some(b"k"), 6, |_| true),
            kafka_partition(b"k", 6) as i32
        );
        assert_eq!(p.partition("t", Some(b"k"), 0, |_| true), 0);
        assert_eq!(p.partition("t", Some(b"k"), -3, |_| true), 0);
        let keyless: Vec<i32> = (0..8)
            .map(|_| p.partition("t", None, 3, |_| true))
            .collect();
        assert!(keyless.iter().all(|&x| (0..3).contains(&x)));
        assert!(
            (0..3).all(|x| keyless.contains(&x)),
            "round-robin {keyless:?}"
        );
    }

    #[test]
    fn counters_follow_routes_and_partitions() {
        let r = detached();
        set_state(&r, "t", 4, Some(assignment("t", 4, 1, vec![2; 4])));
        for _ in 0..3 {
            r.route("t", b"k");
        }
        r.route("t", b"hot");
        let state = Arc::clone(&r.shared.topics.load()["t"]);
        let routes = state.routes.get().unwrap();
        assert_eq!(routes.bucket.get(), 3);
        assert_eq!(routes.heavy.get(), 1);
        let view = state.view.load();
        assert_eq!(view.counters[2].get(), 3);
        assert_eq!(view.counters[3].get(), 1);
        // Growing keeps the existing counters (no lost counts) and adds new ones.
        state.set_partition_count(6, &r.shared.metrics);
        let grown = state.view.load();
        assert_eq!(grown.counters.len(), 6);
        assert_eq!(grown.counters[2].get(), 3);
        let s = state.status();
        assert_eq!((s.epoch, s.in_effect), (1, false));
    }

    proptest! {
        #[test]
        fn route_never_names_a_missing_partition(
            key in proptest::collection::vec(any::<u8>(), 0..40),
            count in 0_u32..40,
            assigned in 1_u32..40,
            with_assignment in any::<bool>(),
        ) {
            let r = detached();
            let a = with_assignment
                .then(|| assignment("t", assigned, 1, (0..assigned).collect()));
            set_state(&r, "t", count, a);
            let routing = r.route("t", &key);
            match routing.partition {
                None => prop_assert_eq!(count, 0),
                Some(p) => prop_assert!(p >= 0 && (p as u32) < count),
            }
            let p = r.route_with_count("t", &key, count as i32).partition;
            prop_assert!(p.is_some_and(|p| p >= 0 && (p as u32) < count.max(1)));
        }
    }

    #[test]
    fn stamped_epoch_reads_back() {
        let h = stamp_epoch(None, 42);
        assert_eq!(epoch_of(&h), Some(42));
        let h = OwnedHeaders::new().insert(Header {
            key: "other",
            value: Some("x"),
        });
        assert_eq!(epoch_of(&h), None);
        let h = stamp_epoch(Some(h), 9);
        assert_eq!(epoch_of(&h), Some(9));
        assert_eq!(h.count(), 2);
        // The last well-formed value wins; signs and junk are not epochs.
        let h = stamp_epoch(None, 1).insert(Header {
            key: EPOCH_HEADER,
            value: Some("x"),
        });
        assert_eq!(epoch_of(&h), Some(1));
        let h = OwnedHeaders::new().insert(Header {
            key: EPOCH_HEADER,
            value: Some("+5"),
        });
        assert_eq!(epoch_of(&h), None);
    }
}
