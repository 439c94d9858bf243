//! The producer wrapper: [`DkgProducer`] (its docs: the one-line change, ordering, cost, defaults),
//! [`ProducerConfig`] and [`DkgProducerBuilder`]. Reached as `dkg_kafka::DkgProducer`.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::ClientContext;
use rdkafka::Timestamp;
use rdkafka::TopicPartitionList;
use rdkafka::client::{Client, DefaultClientContext};
use rdkafka::config::ClientConfig;
use rdkafka::consumer::ConsumerGroupMetadata;
use rdkafka::error::{KafkaError, KafkaResult};
use rdkafka::message::ToBytes;
use rdkafka::message::{Header, Headers as _, OwnedHeaders, OwnedMessage};
use rdkafka::producer::future_producer::OwnedDeliveryResult;
use rdkafka::producer::{BaseRecord, FutureRecord, Producer, PurgeConfig, ThreadedProducer};
use rdkafka::types::RDKafkaErrorCode;
use rdkafka::util::Timeout;
use tracing::warn;

use crate::error::{Error, Result};
use crate::kafka::control;
use crate::kafka::delivery::{Backend, DeliveryContext, DeliveryFuture, Pending};
use crate::kafka::handoff::{
    self, DEFAULT_HANDOFF_TOPIC, HandoffReader, HandoffWriter, PRODUCER_HEADER, ProducerId,
};
use crate::kafka::ordering::Ordering;
use crate::kafka::router::{
    DkgRouter, RouteKind, RouterConfig, Routing, router_setters, stamp_epoch,
};
use crate::kafka::topic;
use dkg_kafka_protocol::marker::EpochLedger;

/// Which records carry the [`EPOCH_HEADER`](crate::kafka::EPOCH_HEADER) (and, for ordering
/// producers, `dkg-producer`). Never a split key's records, in any mode (`docs/spec.md` 4.6).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EpochHeader {
    /// The default: [`EpochHeader::Moved`] for an ordering producer
    /// ([`DkgProducerBuilder::ordering`]), [`EpochHeader::Off`] otherwise. A consumer uses a
    /// record's epoch only together with its producer's lease and markers, so a
    /// producer outside the ordering protocol stamps nothing a consumer can use (`docs/spec.md`
    /// 8), and headers cost librdkafka allocations per record (`BENCHMARKS.md`).
    #[default]
    Auto,
    /// Records of keys whose partition changed in an epoch switch. An ordering producer stamps
    /// them only inside the switch's stamp window (until the consumer groups settled it, at most
    /// [`ProducerConfig::stamp_window`]): exactly the records the consumer-side rebalancer may
    /// have to hold back. Other producers stamp the keys their latest transition moved for as
    /// long as its epoch is current.
    Moved,
    /// Every record an assignment placed (to check placement per epoch downstream), except a
    /// split key's.
    All,
    /// None.
    Off,
}

impl EpochHeader {
    /// The mode in effect for a producer with ordering `on` or off ([`EpochHeader::Auto`]'s rule).
    #[must_use]
    pub fn resolve(self, ordering: bool) -> Self {
        match self {
            EpochHeader::Auto if ordering => EpochHeader::Moved,
            EpochHeader::Auto => EpochHeader::Off,
            mode => mode,
        }
    }
}

impl From<bool> for EpochHeader {
    /// `true` = [`EpochHeader::All`], `false` = [`EpochHeader::Off`].
    fn from(stamp: bool) -> Self {
        if stamp {
            EpochHeader::All
        } else {
            EpochHeader::Off
        }
    }
}

/// The user's producer config plus the DKG defaults that lose nothing (see the module docs):
/// `enable.idempotence=true`, `acks=all`, `partitioner=murmur2_random`, each only if unset.
#[must_use]
pub fn producer_config(user: &ClientConfig) -> ClientConfig {
    let mut config = user.clone();
    let acks = user
        .get("acks")
        .or_else(|| user.get("request.required.acks"));
    let acks_all = acks.is_none_or(|a| a.eq_ignore_ascii_case("all") || a == "-1");
    match user.get("enable.idempotence") {
        None if acks_all => {
            config.set("enable.idempotence", "true");
        }
        None => warn!(
            acks = acks.unwrap_or_default(),
            "acks set explicitly to a value other than all: idempotence stays off (librdkafka \
             requires acks=all for it); records can be lost or duplicated on broker failures"
        ),
        Some(v) if v.eq_ignore_ascii_case("false") || v == "0" => warn!(
            "enable.idempotence=false set explicitly: retries after broker failures can duplicate \
             or reorder records"
        ),
        Some(_) => {}
    }
    if acks.is_none() {
        config.set("acks", "all");
    }
    if user.get("partitioner").is_none() {
        config.set("partitioner", "murmur2_random");
    }
    config
}

/// An ordering producer needs idempotence: without it a retry can land a record of an older
/// epoch above the end its marker announced (or duplicate data), which breaks the consumer's
/// per-key order. It also needs a delivery report for every record (markers are offsets from
/// them). `Err` names the setting that breaks this: `acks` (or
/// its alias `request.required.acks`) other than `all`/`-1`, `enable.idempotence` other than
/// `true`, or `delivery.report.only.error=true`.
fn check_ordering_config(user: &ClientConfig) -> Result<()> {
    for field in ["acks", "request.required.acks"] {
        if let Some(v) = user.get(field)
            && !(v.eq_ignore_ascii_case("all") || v == "-1")
        {
            return Err(Error::InvalidConfig {
                field,
                reason: format!(
                    "{v:?} with ordering(true): an ordering producer needs acks=all and \
                         idempotence, or retries can reorder records against its markers"
                ),
            });
        }
    }
    if let Some(v) = user.get("enable.idempotence")
        && !(v.eq_ignore_ascii_case("true") || v == "1")
    {
        return Err(Error::InvalidConfig {
            field: "enable.idempotence",
            reason: format!(
                "{v:?} with ordering(true): an ordering producer needs idempotence, or \
                     retries can reorder records against its markers"
            ),
        });
    }
    match user.get("delivery.report.only.error") {
        Some(v) if v.eq_ignore_ascii_case("true") || v == "1" => Err(Error::InvalidConfig {
            field: "delivery.report.only.error",
            reason: format!(
                "{v:?} with ordering(true): an ordering producer learns where its records \
                 landed from their delivery reports; without them no marker completes"
            ),
        }),
        _ => Ok(()),
    }
}

/// [`DkgProducer`]: rdkafka's `FutureProducer` with DKG placement, the one-line change.
///
/// ```text
/// - let producer: FutureProducer = config.create()?;
/// + let producer = DkgProducer::builder(config).build().await?;
/// ```
///
/// `send` and `send_result` keep `FutureProducer`'s signatures, except that `send_result` returns
/// this crate's [`DeliveryFuture`] (same output; rdkafka's converts into it with `From`), and the
/// [`Producer`] trait (flush, transactions, ...) is implemented. For every record that has a key
/// and no explicit partition the wrapper sets the partition (rdkafka's custom-partitioner hook is
/// not honoured by `FutureProducer`) and stamps the [`EPOCH_HEADER`](crate::kafka::EPOCH_HEADER) as
/// [`EpochHeader`] says: by default only an ordering producer stamps, and only records of keys
/// that moved in the latest epoch transition (what the consumer-side rebalancer needs). Records
/// of a split key (`docs/spec.md` 4.6, spread over its parts) are never stamped, in any mode; a
/// key whole again after a split counts as moved. Keyless records and records with an explicit
/// partition pass through untouched.
///
/// # Ordering across epoch switches
///
/// With [`DkgProducerBuilder::ordering`]`(true)` the producer also takes part in the
/// consumer-side rebalancer's protocol (see [`DkgConsumer`](crate::DkgConsumer) and
/// `kafka/ordering.rs`): a lease on the handoff topic, and after each epoch switch, once every
/// record it routed under the older epochs is acknowledged, a marker there saying where those
/// records end in each partition (`docs/spec.md` 9.2). The data topic holds only the
/// application's records; stamped records (keys the switch moved) also carry `dkg-producer`. Off
/// by default. Call [`DkgProducer::close`] after the
/// last send.
///
/// Not covered: a change of the topic's partition count. Records then go by Kafka's hash over the
/// new count (until an assignment for it is published), which moves keys with no marker and no
/// stamp, so consumers may process a moved key's new records before its old ones. Each change is
/// counted in `dkg_producer_partition_count_changes_total`; the later switch to an assignment for
/// the new count is an ordinary epoch switch.
///
/// # Cost
///
/// Routing is a few lock-free loads and an O(1) lookup: with no header the wrapper runs at the
/// plain producer's throughput. Headers are not free: librdkafka allocates a header list and a
/// header per record and frees them after delivery, which costs about as much client CPU as the
/// rest of a small record's trip through librdkafka; hence no header by default outside ordering.
/// `BENCHMARKS.md` has the numbers. Ordering adds an in-flight gate (two atomic read-modify-writes
/// per send, no lock, no wait) and a per-record count in its epoch's ledger (an
/// atomic add on send, an atomic max and add on delivery).
///
/// # Configuration defaults
///
/// The user's `ClientConfig` is passed to librdkafka as is, plus these defaults where the user did
/// not set the property (see [`producer_config`]):
///
/// - `enable.idempotence=true` and `acks=all`: a broker failure or retry neither loses nor
///   duplicates records. If the user sets `acks` to something other than `all`/`-1`, idempotence is
///   left off (librdkafka refuses the combination) and a warning is logged; an explicit
///   `enable.idempotence=false` is respected with a warning. With
///   [`DkgProducerBuilder::ordering`]`(true)` either setting is an error of `build`
///   ([`Error::InvalidConfig`] naming it): retries without idempotence could reorder records
///   against the offsets a marker announces. So is
///   `delivery.report.only.error=true` there: markers are built from the delivery reports.
/// - `partitioner=murmur2_random`: the Java producer's placement, for the few records the wrapper
///   leaves to librdkafka (keyed records before a topic's partition count is known). The wrapper's
///   own fallback computes the same function, so placement never depends on that race.
///
/// A producer that places keyed records by the current DKG assignment.
///
/// Build with [`DkgProducer::builder`]. Cheap to clone (clones share the producer and the routing
/// state).
pub struct DkgProducer<C: ClientContext + 'static = DefaultClientContext> {
    producer: Backend<C>,
    router: DkgRouter,
    epoch_header: EpochHeader,
    ordering: Option<Arc<Ordering>>,
}

impl<C: ClientContext + 'static> Clone for DkgProducer<C> {
    fn clone(&self) -> Self {
        Self {
            producer: Arc::clone(&self.producer),
            router: self.router.clone(),
            epoch_header: self.epoch_header,
            ordering: self.ordering.clone(),
        }
    }
}

impl<C: ClientContext + 'static> fmt::Debug for DkgProducer<C> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DkgProducer")
            .field("router", &self.router)
            .finish_non_exhaustive()
    }
}

impl DkgProducer {
    /// A builder from the user's producer `config` (passed through, plus [`producer_config`]'s
    /// defaults).
    #[must_use]
    pub fn builder(config: ClientConfig) -> DkgProducerBuilder {
        DkgProducerBuilder {
            client: config,
            router: RouterConfig::default(),
            producer: ProducerConfig::default(),
        }
    }
}

impl<C: ClientContext + 'static> DkgProducer<C> {
    /// Set the partition and epoch header of a keyed record without an explicit partition; return
    /// any other record unchanged. `send` and `send_result` call this.
    #[inline]
    pub fn route_record<'a, K, P>(&self, record: FutureRecord<'a, K, P>) -> FutureRecord<'a, K, P>
    where
        K: ToBytes + ?Sized,
        P: ToBytes + ?Sized,
    {
        self.route_tracked(record).0
    }

    /// [`DkgProducer::route_record`], plus what the wrapper did to it ([`Routed`]) if it placed it.
    #[inline]
    fn route_tracked<'a, K, P>(
        &self,
        mut record: FutureRecord<'a, K, P>,
    ) -> (FutureRecord<'a, K, P>, Option<Routed>)
    where
        K: ToBytes + ?Sized,
        P: ToBytes + ?Sized,
    {
        if record.partition.is_some() {
            return (record, None);
        }
        let Some(key) = record.key else {
            return (record, None);
        };
        let routing: Routing = self.router.route(record.topic, key.to_bytes());
        record.partition = routing.partition;
        let mut routed = Routed {
            epoch: routing.epoch.unwrap_or(0),
            added_headers: 0,
            had_headers: record.headers.is_some(),
        };
        // Split records carry no header in any mode (`docs/spec.md` 4.6; the consumer bounds
        // their epoch instead).
        let stamp = routing.route != RouteKind::Split
            && match self.epoch_header {
                EpochHeader::Moved => routing.moved,
                EpochHeader::All => true,
                EpochHeader::Off | EpochHeader::Auto => false,
            };
        if stamp && let Some(epoch) = routing.epoch {
            let headers = stamp_epoch(record.headers.take(), epoch);
            record.headers = Some(match &self.ordering {
                Some(o) => {
                    routed.added_headers = 2;
                    stamp_producer(headers, o.id())
                }
                None => {
                    routed.added_headers = 1;
                    headers
                }
            });
        }
        (record, Some(routed))
    }

    /// [`FutureProducer::send`](rdkafka::producer::FutureProducer::send) with DKG placement:
    /// retries every 100 ms while librdkafka's queue is full, up to `queue_timeout`.
    ///
    /// An ordering producer routes the record again at each retry (a newer epoch may be in
    /// effect by then), and on error returns it as it was passed in (no partition, the caller's
    /// headers), so a re-send is routed and counted like a new record.
    pub async fn send<K, P, T>(
        &self,
        record: FutureRecord<'_, K, P>,
        queue_timeout: T,
    ) -> OwnedDeliveryResult
    where
        K: ToBytes + ?Sized,
        P: ToBytes + ?Sized,
        T: Into<Timeout>,
    {
        let start = std::time::Instant::now();
        let queue_timeout = queue_timeout.into();
        let mut record = record;
        let enqueued = loop {
            let attempt = match &self.ordering {
                None => send_once(&self.producer, self.route_record(record), None),
                Some(o) => self.send_ordered(o, record),
            };
            match attempt {
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r))
                    if match queue_timeout {
                        Timeout::Never => true,
                        Timeout::After(t) => start.elapsed() < t,
                    } =>
                {
                    // Outside the ordering gate while waiting: an epoch switch's grace never
                    // waits for a full queue.
                    record = r;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                other => break other,
            }
        };
        match enqueued {
            Ok(delivery) => match delivery.await {
                Ok(result) => result,
                // rdkafka's own `send` panics here ("producer unexpectedly dropped"); the
                // producer is alive while `self` is, so this is unreachable in practice.
                Err(_) => Err(canceled()),
            },
            Err((e, r)) => {
                let owned = OwnedMessage::new(
                    r.payload.map(|p| p.to_bytes().to_vec()),
                    r.key.map(|k| k.to_bytes().to_vec()),
                    r.topic.to_owned(),
                    r.timestamp
                        .map_or(Timestamp::NotAvailable, Timestamp::CreateTime),
                    r.partition.unwrap_or(-1),
                    0,
                    r.headers,
                );
                Err((e, owned))
            }
        }
    }

    /// [`FutureProducer::send_result`](rdkafka::producer::FutureProducer::send_result) with DKG
    /// placement. The record is delivered (and, for an ordering producer, counted) whether or not
    /// the returned future is awaited. On error the record comes back: from a producer without
    /// ordering with the chosen partition and header (a re-send keeps its placement), from an
    /// ordering producer as it was passed in (no partition, the caller's headers), so a re-send is
    /// routed under the epoch then in effect and counted before that epoch's marker.
    #[allow(clippy::result_large_err)]
    pub fn send_result<'a, K, P>(
        &self,
        record: FutureRecord<'a, K, P>,
    ) -> std::result::Result<DeliveryFuture, (KafkaError, FutureRecord<'a, K, P>)>
    where
        K: ToBytes + ?Sized,
        P: ToBytes + ?Sized,
    {
        match &self.ordering {
            None => send_once(&self.producer, self.route_record(record), None),
            Some(o) => self.send_ordered(o, record),
        }
    }

    /// One attempt of an ordering producer: inside the gate from routing until librdkafka has
    /// the record (the markers of a newer epoch wait for it), counted in the ledger
    /// of the epoch it was routed under; a refused record comes back as it was passed in.
    #[allow(clippy::result_large_err)]
    #[inline]
    fn send_ordered<'a, K, P>(
        &self,
        ordering: &Ordering,
        record: FutureRecord<'a, K, P>,
    ) -> std::result::Result<DeliveryFuture, (KafkaError, FutureRecord<'a, K, P>)>
    where
        K: ToBytes + ?Sized,
        P: ToBytes + ?Sized,
    {
        let _gate = ordering.enter();
        let (record, routed) = self.route_tracked(record);
        let ledger = routed.map(|r| ordering.ledger(&self.router, record.topic, r.epoch));
        send_once(&self.producer, record, ledger).map_err(|(e, r)| match routed {
            Some(routed) => (e, routed.undo(r)),
            None => (e, r),
        })
    }

    /// This instance's id on the handoff topic (ordering producers only).
    #[must_use]
    pub fn producer_id(&self) -> Option<&ProducerId> {
        self.ordering.as_deref().map(Ordering::id)
    }

    /// For ordering producers: write the markers of the current epochs if still
    /// pending, mark the leases closed (consumers stop waiting for this producer's future markers
    /// at once) and stop renewing them. Call it after the last send (and `flush`); later sends are
    /// still routed but no longer take part in the protocol. A no-op otherwise, and when called
    /// twice. Dropping the producer without `close` lets its leases expire instead.
    pub async fn close(&self) -> Result<()> {
        match &self.ordering {
            Some(o) => o.close().await,
            None => Ok(()),
        }
    }

    /// The wrapped client (records sent through it directly are neither routed nor counted).
    pub fn inner(&self) -> &ThreadedProducer<DeliveryContext<C>> {
        &self.producer
    }

    /// The routing state.
    #[must_use]
    pub fn router(&self) -> &DkgRouter {
        &self.router
    }
}

impl<C: ClientContext + 'static> Producer<DeliveryContext<C>> for DkgProducer<C> {
    fn client(&self) -> &Client<DeliveryContext<C>> {
        self.producer.client()
    }

    fn in_flight_count(&self) -> i32 {
        self.producer.in_flight_count()
    }

    fn flush<T: Into<Timeout>>(&self, timeout: T) -> KafkaResult<()> {
        self.producer.flush(timeout)
    }

    fn purge(&self, flags: PurgeConfig) {
        self.producer.purge(flags);
    }

    fn init_transactions<T: Into<Timeout>>(&self, timeout: T) -> KafkaResult<()> {
        self.producer.init_transactions(timeout)
    }

    fn begin_transaction(&self) -> KafkaResult<()> {
        self.producer.begin_transaction()
    }

    fn send_offsets_to_transaction<T: Into<Timeout>>(
        &self,
        offsets: &TopicPartitionList,
        cgm: &ConsumerGroupMetadata,
        timeout: T,
    ) -> KafkaResult<()> {
        self.producer
            .send_offsets_to_transaction(offsets, cgm, timeout)
    }

    fn commit_transaction<T: Into<Timeout>>(&self, timeout: T) -> KafkaResult<()> {
        self.producer.commit_transaction(timeout)
    }

    fn abort_transaction<T: Into<Timeout>>(&self, timeout: T) -> KafkaResult<()> {
        self.producer.abort_transaction(timeout)
    }
}

/// Settings of a [`DkgProducer`] beyond its router's ([`RouterConfig`]), each with its default.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProducerConfig {
    /// Which records carry the [`EPOCH_HEADER`](crate::kafka::EPOCH_HEADER): see
    /// [`EpochHeader`]. Default [`EpochHeader::Auto`] (`Moved` with ordering, `Off` without).
    pub epoch_header: EpochHeader,
    /// Take part in the consumer-side rebalancer's protocol (see the module docs): lease,
    /// markers, history on the handoff
    /// topic. Default false. Declare the topics you produce to
    /// ([`RouterConfig::topics`]): their leases are written before `build` returns, so the
    /// guarantee holds from the first record (other topics register on first use). The router's
    /// startup timeout also bounds creating the handoff topic. Needs idempotence: `build` fails
    /// with [`Error::InvalidConfig`] if the client config sets `acks` (or
    /// `request.required.acks`) to anything but `all`/`-1`, `enable.idempotence` to anything
    /// but `true`, or `delivery.report.only.error` to `true` (markers are built from the
    /// delivery reports).
    pub ordering: bool,
    /// The handoff topic (created if missing when ordering is on). Default
    /// [`DEFAULT_HANDOFF_TOPIC`].
    pub handoff_topic: String,
    /// Lease duration of an ordering producer: how long consumers keep waiting for its markers
    /// after it died without [`DkgProducer::close`]. Renewed every third of it. Default
    /// [`DEFAULT_LEASE`](handoff::DEFAULT_LEASE); at least 30 ms is used. Keep it well above the
    /// cluster's failover time (`broker.session.timeout.ms` plus an election and a metadata
    /// refresh): renewals stall while the handoff partition has no leader, and an expired lease
    /// lets consumers stop waiting for this producer's markers, which can reorder its moved keys.
    pub lease_duration: Duration,
    /// Ordering producers: the longest a **stamp window** stays open (`docs/spec.md` 9.2.2). After
    /// adopting an epoch, the producer stamps the records of the keys it moved (the
    /// [`EPOCH_HEADER`](crate::kafka::EPOCH_HEADER) and the producer header) until every consumer
    /// group following the topic has settled the switch, as their progress on the handoff topic
    /// says, or for this long. A group that needs longer to settle a switch keeps the ordering
    /// guarantee only if it settles each switch before the producers adopt the next epoch.
    /// Default [`crate::kafka::DEFAULT_STAMP_WINDOW`] (60 s).
    pub stamp_window: Duration,
}

/// Default of [`ProducerConfig::stamp_window`].
pub const DEFAULT_STAMP_WINDOW: Duration = Duration::from_secs(60);

impl Default for ProducerConfig {
    fn default() -> Self {
        Self {
            epoch_header: EpochHeader::Auto,
            ordering: false,
            handoff_topic: DEFAULT_HANDOFF_TOPIC.to_owned(),
            lease_duration: handoff::DEFAULT_LEASE,
            stamp_window: DEFAULT_STAMP_WINDOW,
        }
    }
}

/// Builder of a [`DkgProducer`]: the user's client config, a [`RouterConfig`] and a
/// [`ProducerConfig`] (defaults documented there). The router setters are the same as
/// [`DkgRouterBuilder`](crate::DkgRouterBuilder)'s.
pub struct DkgProducerBuilder {
    client: ClientConfig,
    router: RouterConfig,
    producer: ProducerConfig,
}

impl fmt::Debug for DkgProducerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DkgProducerBuilder")
            .field("router", &self.router)
            .field("producer", &self.producer)
            .finish_non_exhaustive()
    }
}

impl DkgProducerBuilder {
    router_setters!(router);

    /// Replace every producer setting at once.
    #[must_use]
    pub fn producer_config(mut self, config: ProducerConfig) -> Self {
        self.producer = config;
        self
    }

    /// [`ProducerConfig::epoch_header`]; `true`/`false` mean `All`/`Off`.
    #[must_use]
    pub fn epoch_header(mut self, mode: impl Into<EpochHeader>) -> Self {
        self.producer.epoch_header = mode.into();
        self
    }

    /// [`ProducerConfig::ordering`].
    #[must_use]
    pub fn ordering(mut self, on: bool) -> Self {
        self.producer.ordering = on;
        self
    }

    /// [`ProducerConfig::handoff_topic`].
    #[must_use]
    pub fn handoff_topic(mut self, name: impl Into<String>) -> Self {
        self.producer.handoff_topic = name.into();
        self
    }

    /// [`ProducerConfig::lease_duration`].
    #[must_use]
    pub fn lease_duration(mut self, lease: Duration) -> Self {
        self.producer.lease_duration = lease;
        self
    }

    /// [`ProducerConfig::stamp_window`].
    #[must_use]
    pub fn stamp_window(mut self, window: Duration) -> Self {
        self.producer.stamp_window = window;
        self
    }

    /// Create the producer, read the control topic to its end (bounded by the startup timeout) and
    /// start following it.
    pub async fn build(self) -> Result<DkgProducer> {
        self.build_with_context(DefaultClientContext).await
    }

    /// Like [`DkgProducerBuilder::build`] with the user's [`ClientContext`] (logging, stats, ...).
    pub async fn build_with_context<C: ClientContext + 'static>(
        self,
        context: C,
    ) -> Result<DkgProducer<C>> {
        let Self {
            client,
            router: router_config,
            producer: settings,
        } = self;
        if settings.ordering {
            check_ordering_config(&client)?;
        }
        let epoch_header = settings.epoch_header.resolve(settings.ordering);
        let producer: Backend<C> =
            Arc::new(producer_config(&client).create_with_context(DeliveryContext::new(context))?);
        let startup_timeout = router_config.startup_timeout;
        let topics = router_config.topics.clone();
        let router = DkgRouter::builder(client.clone())
            .router_config(RouterConfig {
                track_moved_keys: epoch_header == EpochHeader::Moved,
                ..router_config
            })
            // An ordering producer's task closes the stamp windows (`docs/spec.md` 9.2.2).
            .track_windows(settings.ordering && epoch_header == EpochHeader::Moved)
            .metadata_source(Arc::clone(&producer))
            .build()
            .await?;
        let ordering = if settings.ordering {
            let spec = control::control_topic_spec(
                &settings.handoff_topic,
                topic::BROKER_DEFAULT_REPLICATION,
            );
            topic::ensure(&control::connection_config(&client), &spec, startup_timeout).await?;
            let writer = HandoffWriter::new(&client, &settings.handoff_topic)?;
            let reader = HandoffReader::new(&client, &settings.handoff_topic)?;
            let lease = settings.lease_duration.max(Duration::from_millis(30));
            Some(Arc::new(
                Ordering::start(
                    Arc::clone(&producer),
                    router.clone(),
                    writer,
                    reader,
                    &topics,
                    lease,
                    settings.stamp_window,
                )
                .await?,
            ))
        } else {
            None
        };
        Ok(DkgProducer {
            producer,
            router,
            epoch_header,
            ordering,
        })
    }
}

/// Hand `record` to librdkafka once, its report counted in `ledger` (if any). On error the
/// record comes back as it was.
#[allow(clippy::result_large_err)]
#[inline]
pub(crate) fn send_once<'a, C, K, P>(
    producer: &Backend<C>,
    record: FutureRecord<'a, K, P>,
    ledger: Option<Arc<EpochLedger>>,
) -> std::result::Result<DeliveryFuture, (KafkaError, FutureRecord<'a, K, P>)>
where
    C: ClientContext + 'static,
    K: ToBytes + ?Sized,
    P: ToBytes + ?Sized,
{
    if let Some(l) = &ledger {
        l.sent(); // before the client has it: no report can precede the count
    }
    let (pending, future) = Pending::new(ledger);
    let base = BaseRecord {
        topic: record.topic,
        partition: record.partition,
        payload: record.payload,
        key: record.key,
        timestamp: record.timestamp,
        headers: record.headers,
        delivery_opaque: pending,
    };
    match producer.send(base) {
        Ok(()) => Ok(future),
        Err((e, base)) => {
            base.delivery_opaque.withdrawn();
            let mut back = FutureRecord::to(base.topic);
            back.partition = base.partition;
            back.payload = base.payload;
            back.key = base.key;
            back.timestamp = base.timestamp;
            back.headers = base.headers;
            Err((e, back))
        }
    }
}

/// The error of a delivery whose report never came.
#[cold]
fn canceled() -> (KafkaError, OwnedMessage) {
    (
        KafkaError::Canceled,
        OwnedMessage::new(
            None,
            None,
            String::new(),
            Timestamp::NotAvailable,
            -1,
            -1,
            None,
        ),
    )
}

/// What [`DkgProducer::route_tracked`] did to a record it placed.
#[derive(Debug, Clone, Copy)]
struct Routed {
    /// The epoch it was routed under (0: Kafka's placement).
    epoch: u64,
    /// How many headers the wrapper appended (`dkg-epoch`, `dkg-producer`).
    added_headers: usize,
    /// Whether the caller passed headers of its own (possibly none).
    had_headers: bool,
}

impl Routed {
    /// The record as the caller passed it: no partition, the appended headers removed. Only on
    /// the error path (a refused record), so rebuilding the headers costs nothing that matters.
    #[cold]
    fn undo<'a, K, P>(self, mut record: FutureRecord<'a, K, P>) -> FutureRecord<'a, K, P>
    where
        K: ToBytes + ?Sized,
        P: ToBytes + ?Sized,
    {
        record.partition = None;
        if self.added_headers > 0
            && let Some(stamped) = record.headers.take()
        {
            let keep = stamped.count().saturating_sub(self.added_headers);
            record.headers = (self.had_headers || keep > 0).then(|| {
                (0..keep)
                    .filter_map(|i| stamped.try_get(i))
                    .fold(OwnedHeaders::new_with_capacity(keep), OwnedHeaders::insert)
            });
        }
        record
    }
}

/// Append the `dkg-producer` header.
fn stamp_producer(headers: OwnedHeaders, id: &ProducerId) -> OwnedHeaders {
    headers.insert(Header {
        key: PRODUCER_HEADER,
        value: Some(id.as_str().as_bytes()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_fill_only_unset_properties() {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", "b:1");
        let out = producer_config(&c);
        assert_eq!(out.get("enable.idempotence"), Some("true"));
        assert_eq!(out.get("acks"), Some("all"));
        assert_eq!(out.get("partitioner"), Some("murmur2_random"));

        let mut c = ClientConfig::new();
        c.set("acks", "1").set("partitioner", "consistent_random");
        let out = producer_config(&c);
        assert_eq!(out.get("enable.idempotence"), None);
        assert_eq!(out.get("acks"), Some("1"));
        assert_eq!(out.get("partitioner"), Some("consistent_random"));

        let mut c = ClientConfig::new();
        c.set("enable.idempotence", "false");
        let out = producer_config(&c);
        assert_eq!(out.get("enable.idempotence"), Some("false"));
        assert_eq!(out.get("acks"), Some("all"));

        let mut c = ClientConfig::new();
        c.set("request.required.acks", "-1");
        let out = producer_config(&c);
        assert_eq!(out.get("enable.idempotence"), Some("true"));
        assert_eq!(out.get("acks"), None, "alias already set");
    }

    #[test]
    fn auto_stamps_moved_keys_only_for_ordering_producers() {
        use EpochHeader::{All, Auto, Moved, Off};
        // (mode, ordering, resolved)
        let cases = [
            (Auto, true, Moved),
            (Auto, false, Off),
            (Moved, false, Moved),
            (All, false, All),
            (Off, true, Off),
            (All, true, All),
        ];
        for (mode, ordering, want) in cases {
            assert_eq!(mode.resolve(ordering), want, "{mode:?} ordering={ordering}");
        }
        assert_eq!(ProducerConfig::default().epoch_header, Auto);
    }

    #[test]
    fn undoing_a_routing_restores_the_callers_partition_and_headers() {
        let names = |h: &Option<OwnedHeaders>| -> Option<Vec<String>> {
            h.as_ref()
                .map(|h| h.iter().map(|h| h.key.to_owned()).collect())
        };
        let user = |n: usize| {
            (0..n).fold(OwnedHeaders::new(), |h, i| {
                h.insert(Header {
                    key: ["a", "b"][i],
                    value: Some("v"),
                })
            })
        };
        // (the caller's headers, headers the wrapper appended)
        let cases: &[(Option<usize>, usize)] = &[
            (None, 0),
            (None, 1),
            (None, 2),
            (Some(0), 0),
            (Some(0), 2),
            (Some(1), 1),
            (Some(2), 2),
        ];
        for &(caller, added) in cases {
            let original = caller.map(user);
            let mut record: FutureRecord<'_, str, str> = FutureRecord::to("t").key("k");
            record.headers = original.clone();
            let routed = Routed {
                epoch: 3,
                added_headers: added,
                had_headers: record.headers.is_some(),
            };
            record.partition = Some(7);
            if added > 0 {
                let stamped = stamp_epoch(record.headers.take(), 3);
                record.headers = Some(if added == 2 {
                    stamp_producer(stamped, &handoff::new_producer_id())
                } else {
                    stamped
                });
            }
            let back = routed.undo(record);
            assert_eq!(back.partition, None, "{caller:?} {added}");
            assert_eq!(names(&back.headers), names(&original), "{caller:?} {added}");
            assert_eq!(back.key, Some("k"));
        }
    }

    #[test]
    fn ordering_refuses_configs_without_idempotence_or_delivery_reports() {
        type Case<'a> = (&'a [(&'a str, &'a str)], Option<&'a str>);
        // (settings, the field named in the error; None = accepted)
        let cases: &[Case<'_>] = &[
            (&[], None),
            (&[("acks", "all")], None),
            (&[("acks", "-1"), ("enable.idempotence", "true")], None),
            (&[("request.required.acks", "ALL")], None),
            (&[("enable.idempotence", "1")], None),
            (&[("acks", "1")], Some("acks")),
            (&[("acks", "0")], Some("acks")),
            (
                &[("request.required.acks", "1")],
                Some("request.required.acks"),
            ),
            (
                &[("enable.idempotence", "false")],
                Some("enable.idempotence"),
            ),
            (
                &[("acks", "all"), ("enable.idempotence", "0")],
                Some("enable.idempotence"),
            ),
            (&[("delivery.report.only.error", "false")], None),
            (
                &[("delivery.report.only.error", "true")],
                Some("delivery.report.only.error"),
            ),
            (
                &[("delivery.report.only.error", "TRUE")],
                Some("delivery.report.only.error"),
            ),
        ];
        for (settings, want) in cases {
            let mut c = ClientConfig::new();
            for (k, v) in *settings {
                c.set(*k, *v);
            }
            match (check_ordering_config(&c), want) {
                (Ok(()), None) => {}
                (Err(Error::InvalidConfig { field, reason }), Some(w)) => {
                    assert_eq!(field, *w, "{settings:?}");
                    assert!(reason.contains("ordering(true)"), "{reason}");
                }
                (got, _) => panic!("{settings:?}: {got:?}, want an error on {want:?}"),
            }
        }
    }

    #[tokio::test]
    async fn build_fails_before_connecting_when_ordering_lacks_idempotence() {
        // No broker at this address: the check comes first, so the error is the config's.
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", "127.0.0.1:1").set("acks", "1");
        let err = DkgProducer::builder(c).ordering(true).build().await;
        assert!(
            matches!(err, Err(Error::InvalidConfig { field: "acks", .. })),
            "{:?}",
            err.err()
        );
    }
}
