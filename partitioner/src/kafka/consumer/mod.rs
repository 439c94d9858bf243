//! [`DkgConsumer`]: the consumer-side rebalancer. Key grouping stays exact when a new epoch moves
//! keys between partitions.
//!
//! The protocol (the problem, the rules for producers and consumers, why it cannot deadlock, and
//! the guarantee) is specified in [`dkg_protocol::consumer`], beside the pure state machine that
//! implements it; this module is the driver that moves records between rdkafka and that state
//! machine. The layering is in `docs/architecture.md`.
//!
//! # Cost
//!
//! With no epoch change, records are handed out at once. [`DkgConsumer::recv_borrowed`] copies
//! nothing (the record borrows the consumer, like `StreamConsumer::recv`); [`DkgConsumer::recv`]
//! returns an owned copy, whose allocation per record is most of its cost (`BENCHMARKS.md`).
//! A record of a quiet partition (nothing of it held, no released record waiting, no skip rule of
//! a previous owner left) without an epoch or with an epoch already settled skips the protocol's
//! state entirely: no lock, no lookup, no clock, one atomic load and one store (`lane.rs`);
//! metrics are counted locally and flushed at housekeeping. Everything else (barriers, records
//! during a switch) goes through the locked state machine (`core.rs`).
//!
//! # Bounded buffering
//!
//! A partition holding more than [`max_held_records`](DkgConsumerBuilder::max_held_records) is
//! paused until half of them are released. If a paused partition releases nothing for
//! [`stall_timeout`](DkgConsumerBuilder::stall_timeout) it is resumed anyway and may exceed the
//! limit: a cycle of paused partitions (two partitions swapping keys while a slow producer's
//! barriers sit behind both pause points) would otherwise wait forever.
//!
//! # Offsets
//!
//! `enable.auto.commit=false`: the wrapper commits (offset = lowest unprocessed, metadata =
//! passed map, within the broker's `offset.metadata.max.bytes`, default 4096 B: about 70
//! concurrent producers per topic) every [`commit_interval`](DkgConsumerBuilder::commit_interval),
//! on [`commit`](DkgConsumer::commit), on every drained change (synchronously), on revocation and
//! on close. Do not commit through other means.

mod hooks;
mod message;
mod metrics;

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use prometheus::Registry;
use rdkafka::client::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, StreamConsumer};
use rdkafka::error::{KafkaError, KafkaResult};
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::statistics::Statistics;
use rdkafka::types::{RDKafkaErrorCode, RDKafkaRespErr};
use rdkafka::{Offset, TopicPartitionList};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tracing::{debug, error, info, warn};

use crate::assignment::Assignment;
use crate::error::{Error, Result};
use crate::kafka::control::{self, ControlTopicReader, ControlUpdate, DEFAULT_CONTROL_TOPIC};
use crate::kafka::handoff::{
    self, DEFAULT_HANDOFF_TOPIC, HandoffEntry, HandoffKey, HandoffReader, HandoffWriter,
};

use crate::kafka::topic::{self, duration_millis};

use dkg_protocol::consumer::core::{Core, CoreConfig, Incoming, Outcome};
use dkg_protocol::consumer::lane::Lanes;
use dkg_protocol::consumer::progress::CommitMeta;

pub use self::hooks::{ConsumerHooks, EpochChange, NoHooks};
use self::message::DkgHeaders;
pub use self::message::{DkgMessage, DkgRecord};
use self::metrics::ConsumerMetrics;

/// Default [`DkgConsumerBuilder::max_held_records`].
pub const DEFAULT_MAX_HELD_RECORDS: usize = 10_000;

/// Longest [`DkgConsumer::close`] waits for librdkafka to leave the group.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(30);

/// Longest [`DkgConsumer::close`] waits for the final revocation after unsubscribing.
const UNSUBSCRIBE_TIMEOUT: Duration = Duration::from_secs(10);

/// How often the consumer re-evaluates leases, flow control and gauges.
const HOUSEKEEPING: Duration = Duration::from_millis(100);

/// Records between two housekeeping checks on a busy consumer.
const HOUSEKEEPING_EVERY: u32 = 256;

/// How often the member owning partition 0 garbage-collects the handoff topic.
const GC_EVERY: Duration = Duration::from_secs(60);

/// What the rebalance callback leaves for `recv` (it runs inside rdkafka's poll and cannot await).
#[derive(Debug)]
enum Note {
    Assigned(Vec<u32>),
    Revoked(Vec<u32>),
    Announce(handoff::Progress),
}

/// What the background readers send.
#[derive(Debug)]
enum BgEvent {
    Control(ControlUpdate),
    Handoff(HandoffEntry),
}

/// State shared with the rdkafka context.
struct Shared {
    topic: Arc<str>,
    core: Mutex<Core<DkgMessage>>,
    hooks: Arc<dyn ConsumerHooks>,
    /// Dropped without `close`: behave like a crash (no commits, no hooks).
    abandoned: AtomicBool,
    /// `close` is leaving the group: partitions assigned meanwhile are not taken up.
    closing: AtomicBool,
    /// The result of the last revocation commit (what `close` reports).
    final_commit: Mutex<Option<String>>,
    notes: Mutex<Vec<Note>>,
    has_notes: AtomicBool,
    /// Last stable offset per partition, from librdkafka's statistics.
    ends: Mutex<HashMap<u32, i64>>,
    committed_timeout: Duration,
}

/// The locked core. Unlocking publishes the fast path's view of it ([`Core::publish`]): every
/// change goes through this guard, so the gates the consuming side reads without the lock are
/// always those of the latest state.
struct CoreGuard<'a>(MutexGuard<'a, Core<DkgMessage>>);

impl Deref for CoreGuard<'_> {
    type Target = Core<DkgMessage>;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl DerefMut for CoreGuard<'_> {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl Drop for CoreGuard<'_> {
    fn drop(&mut self) {
        self.0.publish();
    }
}

impl Shared {
    fn core(&self) -> CoreGuard<'_> {
        // A panic in a hook while locked poisons nothing we cannot continue from.
        CoreGuard(
            self.core
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }

    fn note(&self, note: Note) {
        self.notes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(note);
        self.has_notes.store(true, Ordering::Release);
    }

    fn partitions_of(&self, tpl: &TopicPartitionList) -> Vec<u32> {
        let mut out: Vec<u32> = tpl
            .elements_for_topic(&self.topic)
            .iter()
            .filter_map(|e| u32::try_from(e.partition()).ok())
            .collect();
        out.sort_unstable();
        out
    }

    /// Committed metadata of `partitions` (bounded retries; on failure the partitions start
    /// without skip rules, logged as an error).
    fn fetch_metas(
        &self,
        base: &BaseConsumer<DkgContext>,
        partitions: &[u32],
    ) -> HashMap<u32, (Option<i64>, Option<CommitMeta>)> {
        let mut tpl = TopicPartitionList::new();
        for &p in partitions {
            tpl.add_partition(&self.topic, p as i32);
        }
        for attempt in 1..=2 {
            match base.committed_offsets(tpl.clone(), self.committed_timeout) {
                Ok(committed) => {
                    return committed
                        .elements_for_topic(&self.topic)
                        .iter()
                        .filter_map(|e| {
                            let p = u32::try_from(e.partition()).ok()?;
                            debug!(topic = %self.topic, partition = p, offset = ?e.offset(),
                                metadata = e.metadata(), "committed at assignment");
                            let meta = match CommitMeta::parse(e.metadata()) {
                                None => None,
                                Some(Ok(m)) => Some(m),
                                Some(Err(why)) => {
                                    warn!(topic = %self.topic, partition = p, error = %why,
                                        "ignoring commit metadata this build does not read");
                                    None
                                }
                            };
                            let offset = match e.offset() {
                                Offset::Offset(o) => Some(o),
                                _ => None,
                            };
                            Some((p, (offset, meta)))
                        })
                        .collect();
                }
                Err(e) => {
                    warn!(topic = %self.topic, attempt, error = %e, "reading committed offsets");
                    std::thread::sleep(Duration::from_millis(200));
                }
            }
        }
        error!(
            topic = %self.topic,
            ?partitions,
            "could not read the committed metadata of newly assigned partitions: they start \
             without skip rules (records processed by their previous owner below its barriers may \
             be processed again)"
        );
        partitions.iter().map(|&p| (p, (None, None))).collect()
    }

    fn on_assign(&self, base: &BaseConsumer<DkgContext>, tpl: &TopicPartitionList) {
        let partitions = self.partitions_of(tpl);
        if partitions.is_empty() {
            return;
        }
        if self.closing.load(Ordering::Acquire) || self.abandoned.load(Ordering::Acquire) {
            // Leaving: librdkafka may still hand out partitions while the group rebalances around
            // the departure. Nothing will be fetched from them (the consumer queue is closed) and
            // their committed state stays as it is for their next owner.
            debug!(topic = %self.topic, ?partitions, "assigned while leaving: ignored");
            return;
        }
        let metas = self.fetch_metas(base, &partitions);
        {
            let now = Instant::now();
            let mut core = self.core();
            core.set_now_ms(handoff::now_ms());
            if let Some(&max) = partitions.last() {
                if max >= core.partitions() {
                    core.set_partitions(max + 1, now);
                }
            }
            for &p in &partitions {
                let (offset, meta) = metas
                    .get(&p)
                    .map_or((None, None), |(o, m)| (*o, m.as_ref()));
                core.assign(p, offset, meta, now);
            }
        }
        info!(topic = %self.topic, ?partitions, "partitions assigned");
        self.note(Note::Assigned(partitions.clone()));
        if !self.abandoned.load(Ordering::Acquire) {
            self.hooks.on_partitions_assigned(&partitions);
        }
    }

    fn on_revoke(&self, base: &BaseConsumer<DkgContext>, tpl: &TopicPartitionList) {
        let partitions = self.partitions_of(tpl);
        if partitions.is_empty() {
            return;
        }
        let abandoned = self.abandoned.load(Ordering::Acquire);
        if !abandoned {
            self.hooks.on_partitions_revoked(&partitions);
        }
        let lost = base.assignment_lost();
        let now = Instant::now();
        let mut core = self.core();
        if !abandoned && !lost {
            let mut commit = TopicPartitionList::new();
            let mut announce = Vec::new();
            for &p in &partitions {
                match core.snapshot(p) {
                    Some(Ok(s)) => {
                        let mut e = commit.add_partition(&self.topic, p as i32);
                        if e.set_offset(Offset::Offset(s.offset)).is_ok() {
                            e.set_metadata(&s.metadata);
                            announce.push(core.progress_record(&s));
                        }
                    }
                    Some(Err(size)) => error!(
                        topic = %self.topic, partition = p, size,
                        "commit metadata too large: final offset not committed"
                    ),
                    None => {}
                }
            }
            if commit.count() > 0 {
                let result = base.commit(&commit, CommitMode::Sync);
                debug!(topic = %self.topic, offsets = ?commit.to_topic_map(), ok = result.is_ok(),
                    "final commit of revoked partitions");
                match &result {
                    Ok(()) => {
                        for a in announce {
                            self.note(Note::Announce(a));
                        }
                    }
                    Err(e) => warn!(topic = %self.topic, ?partitions, error = %e,
                        "final commit of revoked partitions failed (their records since the last \
                         commit will be delivered again)"),
                }
                *self
                    .final_commit
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) =
                    result.err().map(|e| e.to_string());
            }
        }
        for &p in &partitions {
            core.revoke(p, now);
        }
        drop(core);
        info!(topic = %self.topic, ?partitions, abandoned, lost, "partitions revoked");
        self.note(Note::Revoked(partitions));
    }
}

/// The rdkafka context of a [`DkgConsumer`]: handles rebalances (loading committed progress on
/// assignment, committing it on revocation) and collects partition ends from the statistics.
pub struct DkgContext {
    shared: Arc<Shared>,
}

impl fmt::Debug for DkgContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DkgContext")
            .field("topic", &self.shared.topic)
            .finish_non_exhaustive()
    }
}

impl ClientContext for DkgContext {
    fn stats(&self, statistics: Statistics) {
        let Some(t) = statistics.topics.get(&*self.shared.topic) else {
            return;
        };
        let mut ends = self
            .shared
            .ends
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (&p, part) in &t.partitions {
            if let Ok(p) = u32::try_from(p) {
                let end = if part.ls_offset >= 0 {
                    part.ls_offset
                } else {
                    part.hi_offset
                };
                if end >= 0 {
                    ends.insert(p, end);
                }
            }
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        if error.rdkafka_error_code() == Some(RDKafkaErrorCode::PartitionEOF) {
            return;
        }
        warn!(topic = %self.shared.topic, error = %error, reason, "DKG consumer client error");
    }
}

impl ConsumerContext for DkgContext {
    /// Replaces rust-rdkafka's default, which asks librdkafka for the rebalance protocol on every
    /// event: like every group call, that one never returns when the event is served after the
    /// group handle terminated (librdkafka then drops the request unanswered; seen here as a hung
    /// `close`). The protocol is known (the builder sets cooperative-sticky), and once the handle
    /// has terminated no group call is made at all. [`DkgConsumer::close`] unsubscribes before
    /// closing so that its final revocation is served while the handle is alive.
    fn rebalance(
        &self,
        base: &BaseConsumer<Self>,
        err: RDKafkaRespErr,
        tpl: &mut TopicPartitionList,
    ) {
        if base.closed() {
            debug!(topic = %self.shared.topic, ?err, "rebalance event after close: ignored");
            return;
        }
        let result = match err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => {
                self.shared.on_assign(base, tpl);
                base.incremental_assign(tpl)
            }
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => {
                self.shared.on_revoke(base, tpl);
                base.incremental_unassign(tpl)
            }
            other => {
                let code: RDKafkaErrorCode = other.into();
                warn!(topic = %self.shared.topic, error = %code, "rebalance error");
                Ok(())
            }
        };
        if let Err(e) = result {
            warn!(topic = %self.shared.topic, error = %e, "incremental (un)assign failed");
        }
    }

    fn commit_callback(&self, result: KafkaResult<()>, _offsets: &TopicPartitionList) {
        if let Err(e) = result {
            warn!(topic = %self.shared.topic, error = %e, "offset commit failed");
        }
    }
}

/// Aborts background tasks on drop.
struct Tasks(Vec<JoinHandle<()>>);

impl Drop for Tasks {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

/// A Kafka consumer (group member) of one topic that keeps key grouping exact across DKG epoch
/// switches. See the [module docs](self) for the protocol and the precise guarantee.
///
/// ```no_run
/// # async fn run() -> dkg_partitioner::Result<()> {
/// use dkg_partitioner::kafka::consumer::DkgConsumer;
/// use rdkafka::ClientConfig;
///
/// let mut config = ClientConfig::new();
/// config.set("bootstrap.servers", "127.0.0.1:9092");
/// let mut consumer = DkgConsumer::builder(config)
///     .topic("orders")
///     .group("billing")
///     .build()
///     .await?;
/// loop {
///     let record = consumer.recv().await?;
///     // process `record`; it counts as processed when recv is called again
/// #   let _ = record;
/// }
/// # }
/// ```
pub struct DkgConsumer {
    /// The fetching handle: records handed out by [`DkgConsumer::recv_borrowed`] borrow it.
    consumer: Arc<StreamConsumer<DkgContext>>,
    inner: Inner,
}

/// Everything but the fetching handle (split so a borrowed record and the state can be used at
/// once).
struct Inner {
    consumer: Arc<StreamConsumer<DkgContext>>,
    shared: Arc<Shared>,
    topic: Arc<str>,
    group: String,
    member: String,
    events: mpsc::UnboundedReceiver<BgEvent>,
    writer: HandoffWriter,
    metrics: ConsumerMetrics,
    /// The fast path: quiet partitions' records skip the core.
    lanes: Lanes,
    /// The last record fetched had headers (see [`DkgMessage::from_borrowed`]).
    fetched_headers: bool,
    _tasks: Tasks,
    commit_interval: Option<Duration>,
    next_housekeeping: Instant,
    next_auto_commit: Option<Instant>,
    next_gc: Instant,
    progress_retry_at: Option<Instant>,
    since_housekeeping: u32,
    /// Epochs with a history record on the handoff topic (garbage collection).
    history_keys: BTreeSet<u64>,
    closed: bool,
}

impl fmt::Debug for DkgConsumer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DkgConsumer")
            .field("topic", &self.inner.topic)
            .field("group", &self.inner.group)
            .field("member", &self.inner.member)
            .finish_non_exhaustive()
    }
}

/// What the state machine says before fetching.
enum Step {
    /// A released record.
    Released(DkgMessage),
    /// Fetch from Kafka.
    Fetch,
}

impl DkgConsumer {
    /// A builder from the user's consumer `config` (bootstrap servers, security, `group.id`,
    /// `auto.offset.reset`, ...). See [`DkgConsumerBuilder::build`] for what the wrapper sets.
    #[must_use]
    pub fn builder(config: ClientConfig) -> DkgConsumerBuilder {
        DkgConsumerBuilder::new(config)
    }

    /// The next record for the application, as an owned copy. The record returned by the
    /// previous call counts as processed from now on. Barrier records are consumed here; held
    /// records come out when their key's old partitions are drained. Errors are the client's
    /// (transient ones included, as with `StreamConsumer::recv`); calling `recv` again continues.
    ///
    /// Copying a record costs an allocation on this thread, which under load contends with
    /// librdkafka's own threads for the allocator (see `BENCHMARKS.md`): where throughput matters,
    /// use [`DkgConsumer::recv_borrowed`].
    ///
    /// Cancellation safe: dropping the future loses no record.
    pub async fn recv(&mut self) -> Result<DkgMessage> {
        let Self { consumer, inner } = self;
        let record = Inner::next_record(consumer, inner).await?;
        Ok(record.detach_with(&inner.topic, inner.fetched_headers))
    }

    /// Like [`DkgConsumer::recv`] without copying: the record borrows the consumer (as rdkafka's
    /// `StreamConsumer::recv` does), so it must be dropped before the next call, which is also
    /// when it counts as processed. Records that were held come as owned copies.
    ///
    /// Cancellation safe: dropping the future loses no record.
    pub async fn recv_borrowed(&mut self) -> Result<DkgRecord<'_>> {
        let Self { consumer, inner } = self;
        Inner::next_record(consumer, inner).await
    }

    /// Mark the last record processed and commit every owned partition synchronously (offsets
    /// and progress).
    pub async fn commit(&mut self) -> Result<()> {
        self.inner.commit().await
    }

    /// Leave the group cleanly: mark the last record processed, commit, then leave: the
    /// revocation runs [`ConsumerHooks::on_partitions_revoked`] and commits the final offsets
    /// and progress (the group rebalances at once). Errors if that final commit failed (the
    /// records since the previous commit will then be delivered again to the next owners).
    pub async fn close(self) -> Result<()> {
        let Self {
            consumer,
            mut inner,
        } = self;
        if let Err(e) = inner.commit().await {
            // A rebalance in progress, typically: the revocation below commits again.
            debug!(topic = %inner.topic, error = %e, "commit before close failed");
        }
        inner.maintain();
        inner.writer.flush(Duration::from_secs(5));
        inner.closed = true;
        inner.shared.closing.store(true, Ordering::Release);
        // Give the partitions up while the group handle is alive: `unsubscribe` makes librdkafka
        // emit the final revocation now, and the polls below serve it (hooks, final commit,
        // `incremental_unassign`). Closing with a live subscription would emit it from inside
        // librdkafka's close instead, where it can be served after the group handle terminated:
        // the `incremental_unassign` it requires then never gets a reply (seen as a hung close).
        consumer.unsubscribe();
        let deadline = Instant::now() + UNSUBSCRIBE_TIMEOUT;
        loop {
            match consumer.assignment() {
                Ok(tpl) if tpl.count() == 0 => break,
                Ok(_) => {}
                Err(e) => {
                    warn!(topic = %inner.topic, error = %e, "assignment during close");
                    break;
                }
            }
            if Instant::now() >= deadline {
                warn!(topic = %inner.topic, "partitions not revoked within {UNSUBSCRIBE_TIMEOUT:?} of unsubscribe: closing anyway");
                break;
            }
            // Serves the revocation. A record fetched meanwhile is dropped unprocessed: it is past
            // the committed offset, so the partition's next owner reads it.
            let _ = tokio::time::timeout(Duration::from_millis(50), consumer.recv()).await;
        }
        let shared = Arc::clone(&inner.shared);
        drop(inner);
        // librdkafka's close blocks (leave the group, final revocation). On a plain thread, not
        // the runtime's blocking pool: should it never return, the runtime can still shut down.
        let (done, left) = tokio::sync::oneshot::channel();
        std::thread::Builder::new()
            .name("dkg-consumer-close".into())
            .spawn(move || {
                drop(consumer);
                let _ = done.send(());
            })
            .map_err(|e| Error::Timeout {
                what: format!("starting the close thread: {e}"),
                millis: 0,
            })?;
        if tokio::time::timeout(CLOSE_TIMEOUT, left).await.is_err() {
            return Err(Error::Timeout {
                what: "leaving the consumer group".into(),
                millis: duration_millis(CLOSE_TIMEOUT),
            });
        }
        let failed = shared
            .final_commit
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        match failed {
            None => Ok(()),
            Some(e) => Err(Error::Timeout {
                what: format!("final commit on close: {e}"),
                millis: 0,
            }),
        }
    }

    /// The data topic.
    #[must_use]
    pub fn topic(&self) -> &str {
        &self.inner.topic
    }

    /// The consumer group.
    #[must_use]
    pub fn group(&self) -> &str {
        &self.inner.group
    }

    /// This member's name (the `member` metric label).
    #[must_use]
    pub fn member(&self) -> &str {
        &self.inner.member
    }

    /// The newest assignment known for the topic.
    #[must_use]
    pub fn assignment(&self) -> Option<Arc<Assignment>> {
        self.inner.shared.core().latest().cloned()
    }

    /// The partitions this member owns.
    #[must_use]
    pub fn owned_partitions(&self) -> Vec<u32> {
        self.inner.shared.core().owned()
    }

    /// The lowest epoch drained on every partition, as this member knows it: records of epochs
    /// up to it are never held.
    #[must_use]
    pub fn settled_epoch(&self) -> u64 {
        self.inner.shared.core().settled()
    }

    /// Records held right now (all owned partitions).
    #[must_use]
    pub fn held_records(&self) -> usize {
        self.inner.shared.core().held_counts().map(|(_, n)| n).sum()
    }
}

impl Inner {
    /// The next record for the application (`recv` and `recv_borrowed`).
    async fn next_record<'a>(
        consumer: &'a StreamConsumer<DkgContext>,
        inner: &mut Inner,
    ) -> Result<DkgRecord<'a>> {
        inner.processed();
        loop {
            if !inner.quiet() {
                if let Step::Released(m) = inner.step().await {
                    return Ok(DkgRecord::Released(m));
                }
            }
            // Fast path: a record is already waiting in librdkafka's queue.
            {
                let fetch = consumer.recv();
                let mut fetch = std::pin::pin!(fetch);
                let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
                if let std::task::Poll::Ready(r) = fetch.as_mut().poll(&mut cx) {
                    match r {
                        Ok(m) => {
                            if let Some(record) = inner.on_fetched(m) {
                                return Ok(record);
                            }
                        }
                        Err(KafkaError::PartitionEOF(_)) => {}
                        Err(e) => return Err(e.into()),
                    }
                    continue;
                }
            }
            tokio::select! {
                biased;
                r = consumer.recv() => match r {
                    Ok(m) => {
                        if let Some(record) = inner.on_fetched(m) {
                            return Ok(record);
                        }
                    }
                    Err(KafkaError::PartitionEOF(_)) => {}
                    Err(e) => return Err(e.into()),
                },
                Some(ev) = inner.events.recv() => inner.apply_event(ev),
                () = tokio::time::sleep_until(inner.next_housekeeping.into()) => {
                    inner.since_housekeeping = HOUSEKEEPING_EVERY;
                }
            }
        }
    }

    /// The application's record is processed.
    #[inline]
    fn processed(&mut self) {
        if self.lanes.processed() {
            self.shared.core().processed();
        }
    }

    /// Nothing to do before the next fetch, decided without the lock (the common case): the core
    /// published that it has nothing (see `lane`), and housekeeping is not due.
    #[inline]
    fn quiet(&mut self) -> bool {
        self.since_housekeeping += 1;
        self.lanes.core_idle()
            && self.since_housekeeping < HOUSEKEEPING_EVERY
            && !self.shared.has_notes.load(Ordering::Acquire)
            && self.events.is_empty()
    }

    /// Everything before a fetch when [`Inner::quiet`] says there is something: progress due is
    /// committed, released records come out, housekeeping runs when due.
    async fn step(&mut self) -> Step {
        loop {
            if !self.lanes.core_idle() {
                // One lock: progress to commit, or a released record.
                let now_due = self.progress_retry_at.is_none_or(|t| Instant::now() >= t);
                let (due, ready) = {
                    let mut core = self.shared.core();
                    let due = core.has_progress_due() && now_due;
                    (due, if due { None } else { core.next_ready() })
                };
                if due {
                    self.commit_progress().await;
                    continue;
                }
                if let Some(m) = ready {
                    self.lanes.took_from_core();
                    self.metrics.record(m.partition() as u32);
                    return Step::Released(m);
                }
            }
            if self.since_housekeeping >= HOUSEKEEPING_EVERY
                || self.shared.has_notes.load(Ordering::Acquire)
                || !self.events.is_empty()
            {
                self.since_housekeeping = 0;
                while let Ok(ev) = self.events.try_recv() {
                    self.apply_event(ev);
                }
                self.maintain();
                continue;
            }
            return Step::Fetch;
        }
    }

    /// A record fetched from Kafka: handed out (borrowed) or held (copied), or consumed.
    #[inline]
    fn on_fetched<'a>(&mut self, m: BorrowedMessage<'a>) -> Option<DkgRecord<'a>> {
        let partition = u32::try_from(m.partition()).ok()?;
        // Read once per record: librdkafka parses (and allocates) on every call for a record
        // without headers, and that is most of what this wrapper costs per record.
        let h = message::dkg_headers(m.headers());
        self.fetched_headers = h.present;
        // Fast path: the partition is quiet, the core need not be asked (see `lane`).
        if h.barrier.is_none() && self.lanes.take(partition, m.offset(), h.epoch) {
            self.metrics.record(partition);
            return Some(DkgRecord::Fetched {
                msg: m,
                epoch: h.epoch,
            });
        }
        self.on_fetched_slow(m, partition, &h)
    }

    /// [`Inner::on_fetched`] when the core decides.
    #[inline(never)]
    fn on_fetched_slow<'a>(
        &mut self,
        m: BorrowedMessage<'a>,
        partition: u32,
        h: &DkgHeaders,
    ) -> Option<DkgRecord<'a>> {
        let mut core = self.shared.core();
        if h.barrier.is_some() {
            match h.barrier() {
                Some((producer, epoch)) => {
                    core.on_barrier(partition, m.offset(), producer, epoch);
                }
                None => {
                    debug!(topic = %self.topic, partition, offset = m.offset(),
                        "barrier record without a valid dkg-producer header: skipped");
                    core.on_barrier_invalid(partition, m.offset());
                }
            }
            self.lanes.refresh(partition, core.lane(partition));
            return None;
        }
        let topic = &self.topic;
        let outcome = core.on_record(
            Incoming {
                partition,
                offset: m.offset(),
                key: m.key(),
                epoch: h.epoch,
                msg: || DkgMessage::from_borrowed(&m, topic, h.epoch, h.present),
            },
            Instant::now,
        );
        self.lanes.refresh(partition, core.lane(partition));
        drop(core);
        match outcome {
            Outcome::Deliver => {
                self.lanes.took_from_core();
                self.metrics.record(partition);
                Some(DkgRecord::Fetched {
                    msg: m,
                    epoch: h.epoch,
                })
            }
            Outcome::Held | Outcome::Skipped => None,
            Outcome::Unowned => {
                debug!(topic = %self.topic, partition, offset = m.offset(),
                    "record of a partition no longer owned: dropped (its next owner reads it)");
                None
            }
        }
    }

    fn apply_event(&mut self, ev: BgEvent) {
        let now = Instant::now();
        let mut core = self.shared.core();
        apply(&mut core, ev, now, &mut self.history_keys);
    }

    /// Rebalance notes, and every [`HOUSEKEEPING`]: lease expiry, flow control, gauges, periodic
    /// commits, garbage collection.
    fn maintain(&mut self) {
        if self.shared.has_notes.swap(false, Ordering::AcqRel) {
            let notes = std::mem::take(
                &mut *self
                    .shared
                    .notes
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
            );
            for note in notes {
                match note {
                    Note::Assigned(partitions) => {
                        let records: Vec<handoff::Progress> = {
                            let core = self.shared.core();
                            partitions
                                .iter()
                                .filter_map(|&p| core.initial_progress(p))
                                .collect()
                        };
                        for r in records {
                            self.announce(&r);
                        }
                    }
                    Note::Revoked(partitions) => {
                        for p in partitions {
                            self.metrics.forget(p);
                        }
                    }
                    Note::Announce(r) => self.announce(&r),
                }
            }
        }
        let now = Instant::now();
        if now < self.next_housekeeping {
            return;
        }
        self.next_housekeeping = now + HOUSEKEEPING;
        self.metrics.flush();
        let (pause, resume, held, positions, hold_times, owns_zero) = {
            let mut core = self.shared.core();
            core.tick(now, handoff::now_ms());
            let (pause, resume) = core.flow(now);
            let stall_timeout = core.config().stall_timeout;
            for (partition, held) in core.take_stalled() {
                warn!(
                    topic = %self.topic,
                    partition,
                    held,
                    "partition paused with nothing released for {:?}: resuming past the hold \
                     limit (its barriers may sit behind the pause)",
                    stall_timeout
                );
            }
            let held: Vec<(u32, usize)> = core.held_counts().collect();
            let positions: Vec<(u32, Option<i64>)> = core.positions().collect();
            (
                pause,
                resume,
                held,
                positions,
                core.take_hold_times(),
                core.owns(0),
            )
        };
        self.flow(&pause, true);
        self.flow(&resume, false);
        for (p, n) in held {
            self.metrics.set_held(p, n);
        }
        {
            let ends = self
                .shared
                .ends
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for (p, pos) in positions {
                if let (Some(&end), Some(pos)) = (ends.get(&p), pos) {
                    self.metrics.set_lag(p, end - pos);
                }
            }
        }
        for t in hold_times {
            self.metrics.observe_hold(t.as_secs_f64());
        }
        if let (Some(every), Some(at)) = (self.commit_interval, self.next_auto_commit) {
            if now >= at {
                self.next_auto_commit = Some(now + every);
                self.commit_all(CommitMode::Async);
            }
        }
        if owns_zero && now >= self.next_gc {
            self.next_gc = now + GC_EVERY;
            self.collect_garbage();
        }
    }

    fn flow(&self, partitions: &[u32], pause: bool) {
        if partitions.is_empty() {
            return;
        }
        let mut tpl = TopicPartitionList::new();
        for &p in partitions {
            tpl.add_partition(&self.topic, p as i32);
        }
        let result = if pause {
            self.consumer.pause(&tpl)
        } else {
            self.consumer.resume(&tpl)
        };
        match result {
            Ok(()) => debug!(topic = %self.topic, ?partitions, pause, "flow control"),
            Err(e) => {
                warn!(topic = %self.topic, ?partitions, pause, error = %e, "pause/resume failed")
            }
        }
    }

    /// Tombstone leases expired long ago and history older than every member keeps.
    fn collect_garbage(&mut self) {
        let now_ms = handoff::now_ms();
        let (expired, floor) = {
            let core = self.shared.core();
            let expired: Vec<HandoffKey> = core
                .leases()
                .filter(|l| now_ms > l.expires_at_ms.saturating_add((3 * l.lease_ms).max(60_000)))
                .map(|l| HandoffKey::Lease {
                    topic: l.topic.clone(),
                    producer: l.producer.clone(),
                })
                .collect();
            (expired, core.history_gc_floor())
        };
        let old: Vec<u64> = self.history_keys.range(..floor).copied().collect();
        let keys = expired
            .into_iter()
            .chain(old.into_iter().map(|epoch| HandoffKey::Assignment {
                topic: self.topic.to_string(),
                epoch,
            }));
        for key in keys {
            debug!(key = %key.encode(), "handoff garbage collection");
            if let Err(e) = self.writer.send(&key, None) {
                warn!(key = %key.encode(), error = %e, "handoff garbage collection failed");
            }
        }
    }

    fn announce(&self, progress: &handoff::Progress) {
        if let Err(e) = self.writer.send_progress(progress) {
            warn!(topic = %self.topic, partition = progress.partition, error = %e,
                "progress announcement not sent");
        }
    }

    /// Commit the drained changes: hooks, synchronous commit with metadata, then announce.
    async fn commit_progress(&mut self) {
        let now = Instant::now();
        let (snapshots, drained, owned, partitions, immediate) = {
            let mut core = self.shared.core();
            let mut snapshots = Vec::new();
            let mut drained = Vec::new();
            let mut immediate = Vec::new();
            for p in core.progress_due() {
                drained.extend(core.take_drained_epochs(p));
                match core.snapshot(p) {
                    Some(Ok(s)) => snapshots.push(s),
                    Some(Err(size)) => {
                        error!(topic = %self.topic, partition = p, size,
                            "commit metadata over the limit: progress of this partition cannot be \
                             committed (too many producers?); moved keys waiting for it stay held");
                        self.progress_retry_at = Some(now + Duration::from_secs(5));
                    }
                    // Nothing fetched yet: the change comes from leases only and claims no
                    // processing, so it is as durable as the committed state it starts from.
                    None => {
                        if let Some(r) = core.mark_durable(p, now) {
                            immediate.push(r);
                        }
                    }
                }
            }
            (
                snapshots,
                drained,
                core.owned(),
                core.partitions(),
                immediate,
            )
        };
        for r in &immediate {
            self.announce(r);
        }
        for d in &drained {
            let change = EpochChange {
                prev: d.prev.as_deref(),
                next: &d.next,
                partition: d.partition,
                owned: &owned,
                partitions,
            };
            self.shared.hooks.on_epoch(&change);
        }
        if snapshots.is_empty() {
            return;
        }
        let mut tpl = TopicPartitionList::new();
        for s in &snapshots {
            let mut e = tpl.add_partition(&self.topic, s.partition as i32);
            if e.set_offset(Offset::Offset(s.offset)).is_err() {
                continue;
            }
            e.set_metadata(&s.metadata);
        }
        let consumer = Arc::clone(&self.consumer);
        let result = tokio::task::spawn_blocking(move || consumer.commit(&tpl, CommitMode::Sync))
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r.map_err(|e| e.to_string()));
        match result {
            Ok(()) => {
                self.progress_retry_at = None;
                let mut records = Vec::with_capacity(snapshots.len());
                {
                    let mut core = self.shared.core();
                    for s in &snapshots {
                        if core.owns(s.partition) {
                            core.committed(s.partition, s.drained, now);
                            records.push(core.progress_record(s));
                        }
                    }
                }
                for r in &records {
                    debug!(topic = %self.topic, partition = r.partition, drained = r.drained,
                        offset = r.committed_offset, "progress committed");
                    self.announce(r);
                }
            }
            Err(e) => {
                warn!(topic = %self.topic, error = %e, "progress commit failed (retrying)");
                self.progress_retry_at = Some(Instant::now() + Duration::from_millis(200));
            }
        }
    }

    /// Commit every owned partition's offset and metadata.
    fn commit_all(&self, mode: CommitMode) -> Option<TopicPartitionList> {
        let core = self.shared.core();
        let mut tpl = TopicPartitionList::new();
        for p in core.owned() {
            if let Some(Ok(s)) = core.snapshot(p) {
                let mut e = tpl.add_partition(&self.topic, p as i32);
                if e.set_offset(Offset::Offset(s.offset)).is_ok() {
                    e.set_metadata(&s.metadata);
                }
            }
        }
        drop(core);
        if tpl.count() == 0 {
            return None;
        }
        if let CommitMode::Async = mode {
            if let Err(e) = self.consumer.commit(&tpl, CommitMode::Async) {
                warn!(topic = %self.topic, error = %e, "periodic commit failed");
            }
            return None;
        }
        Some(tpl)
    }

    /// Mark the last record processed and commit every owned partition synchronously.
    async fn commit(&mut self) -> Result<()> {
        self.processed();
        self.commit_progress().await;
        if let Some(tpl) = self.commit_all(CommitMode::Sync) {
            let consumer = Arc::clone(&self.consumer);
            tokio::task::spawn_blocking(move || consumer.commit(&tpl, CommitMode::Sync))
                .await
                .map_err(|e| Error::Timeout {
                    what: format!("commit task failed: {e}"),
                    millis: 0,
                })??;
        }
        Ok(())
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.metrics.flush();
        if !self.closed {
            // Like a crash: rdkafka's drop still leaves the group, but the revocation callback
            // then commits nothing and runs no hook.
            self.shared.abandoned.store(true, Ordering::Release);
            // As in `close`: have librdkafka emit the final revocation before its close, so that
            // the close serves it while the group handle is alive (not after it terminated).
            self.consumer.unsubscribe();
        }
    }
}

fn apply(core: &mut Core<DkgMessage>, ev: BgEvent, now: Instant, history_keys: &mut BTreeSet<u64>) {
    match ev {
        BgEvent::Control(ControlUpdate::Adopted(a)) => {
            if *a.topic() == *core.topic() {
                info!(
                    topic = a.topic(),
                    epoch = a.epoch(),
                    "consumer saw a new assignment"
                );
                core.on_assignment(a, now);
            }
        }
        BgEvent::Control(ControlUpdate::Retracted { topic }) => {
            if *topic == *core.topic() {
                warn!(topic = %topic, "assignment retracted: records return to Kafka's default \
                    placement without epochs; ordering across the retraction is not guaranteed");
            }
        }
        BgEvent::Control(_) => {}
        BgEvent::Handoff(HandoffEntry::Lease(l)) => core.on_lease(l, now),
        BgEvent::Handoff(HandoffEntry::History(a)) => {
            if *a.topic() == *core.topic() {
                history_keys.insert(a.epoch());
            }
            core.on_assignment(a, now);
        }
        BgEvent::Handoff(HandoffEntry::Progress(p)) => core.on_progress(&p, now),
        BgEvent::Handoff(HandoffEntry::Removed(key)) => match key {
            HandoffKey::Lease { topic, producer } if *topic == *core.topic() => {
                core.on_lease_removed(&producer, now);
            }
            HandoffKey::Assignment { topic, epoch } if *topic == *core.topic() => {
                history_keys.remove(&epoch);
            }
            _ => {}
        },
    }
}

async fn follow_control(
    mut reader: ControlTopicReader,
    topic: Arc<str>,
    tx: mpsc::UnboundedSender<BgEvent>,
) {
    loop {
        let record = reader.next_record().await;
        let ours = match &record.update {
            ControlUpdate::Adopted(a) => *a.topic() == *topic,
            ControlUpdate::Retracted { topic: t } => **t == *topic,
            _ => false,
        };
        if ours && tx.send(BgEvent::Control(record.update)).is_err() {
            return;
        }
    }
}

async fn follow_handoff(
    mut reader: HandoffReader,
    topic: Arc<str>,
    tx: mpsc::UnboundedSender<BgEvent>,
) {
    loop {
        let record = reader.next_record().await;
        match record.entry {
            Ok(entry) => {
                if *entry.topic() == *topic && tx.send(BgEvent::Handoff(entry)).is_err() {
                    return;
                }
            }
            Err(why) => debug!(offset = record.offset, error = %why, "skipped a handoff record"),
        }
    }
}

/// Builder of a [`DkgConsumer`]. Defaults are listed on each method.
pub struct DkgConsumerBuilder {
    config: ClientConfig,
    topic: Option<String>,
    group: Option<String>,
    control_topic: String,
    handoff_topic: String,
    hooks: Arc<dyn ConsumerHooks>,
    registry: Option<Registry>,
    member: Option<String>,
    max_held: usize,
    stall_timeout: Duration,
    commit_interval: Option<Duration>,
    startup_timeout: Duration,
    ensure_handoff_topic: bool,
    handoff_topic_replication: i32,
    max_metadata_bytes: usize,
    history_epochs: usize,
}

impl fmt::Debug for DkgConsumerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DkgConsumerBuilder")
            .field("topic", &self.topic)
            .field("group", &self.group)
            .field("control_topic", &self.control_topic)
            .field("handoff_topic", &self.handoff_topic)
            .field("member", &self.member)
            .field("max_held", &self.max_held)
            .finish_non_exhaustive()
    }
}

impl DkgConsumerBuilder {
    fn new(config: ClientConfig) -> Self {
        Self {
            group: config.get("group.id").map(str::to_owned),
            config,
            topic: None,
            control_topic: DEFAULT_CONTROL_TOPIC.to_owned(),
            handoff_topic: DEFAULT_HANDOFF_TOPIC.to_owned(),
            hooks: Arc::new(NoHooks),
            registry: None,
            member: None,
            max_held: DEFAULT_MAX_HELD_RECORDS,
            stall_timeout: Duration::from_secs(5),
            commit_interval: Some(Duration::from_secs(5)),
            startup_timeout: Duration::from_secs(30),
            ensure_handoff_topic: true,
            handoff_topic_replication: -1,
            max_metadata_bytes: dkg_protocol::consumer::progress::DEFAULT_MAX_METADATA_BYTES,
            history_epochs: dkg_protocol::consumer::history::DEFAULT_KEEP,
        }
    }

    /// The data topic (required).
    #[must_use]
    pub fn topic(mut self, topic: impl Into<String>) -> Self {
        self.topic = Some(topic.into());
        self
    }

    /// The consumer group (required unless `group.id` is in the config).
    #[must_use]
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.group = Some(group.into());
        self
    }

    /// The control topic to follow. Default `_dkg.assignments`.
    #[must_use]
    pub fn control_topic(mut self, name: impl Into<String>) -> Self {
        self.control_topic = name.into();
        self
    }

    /// The handoff topic (leases, history, progress). Default `_dkg.handoff`; producers and
    /// consumers of a topic must use the same one.
    #[must_use]
    pub fn handoff_topic(mut self, name: impl Into<String>) -> Self {
        self.handoff_topic = name.into();
        self
    }

    /// State handoff hooks. Default: none.
    #[must_use]
    pub fn hooks(mut self, hooks: impl ConsumerHooks) -> Self {
        self.hooks = Arc::new(hooks);
        self
    }

    /// Register the `dkg_consumer_*` metrics in `registry` (see the metrics module docs).
    /// Default: not registered.
    #[must_use]
    pub fn metrics(mut self, registry: &Registry) -> Self {
        self.registry = Some(registry.clone());
        self
    }

    /// This member's name: the `member` label of its metrics (unique per registry). Default:
    /// `client.id` if set, else `dkg-consumer-<pid>-<n>`.
    #[must_use]
    pub fn member(mut self, name: impl Into<String>) -> Self {
        self.member = Some(name.into());
        self
    }

    /// Held records per partition above which the partition is paused. Default 10 000.
    #[must_use]
    pub fn max_held_records(mut self, max: usize) -> Self {
        self.max_held = max.max(1);
        self
    }

    /// A paused partition that released nothing for this long is resumed past the limit (see the
    /// module docs). Default 5 s.
    #[must_use]
    pub fn stall_timeout(mut self, timeout: Duration) -> Self {
        self.stall_timeout = timeout;
        self
    }

    /// Periodic commit of processed offsets (asynchronous). `None`: only on [`DkgConsumer::commit`],
    /// drained changes, revocation and close. Default 5 s.
    #[must_use]
    pub fn commit_interval(mut self, every: Option<Duration>) -> Self {
        self.commit_interval = every;
        self
    }

    /// Limit for `build` (reading the control and handoff topics to their ends). Default 30 s.
    #[must_use]
    pub fn startup_timeout(mut self, timeout: Duration) -> Self {
        self.startup_timeout = timeout;
        self
    }

    /// Create the handoff topic if missing and check its configuration. Default true.
    #[must_use]
    pub fn ensure_handoff_topic(mut self, ensure: bool) -> Self {
        self.ensure_handoff_topic = ensure;
        self
    }

    /// Replication factor used when creating the handoff topic. Default -1 (broker default).
    #[must_use]
    pub fn handoff_topic_replication(mut self, replication: i32) -> Self {
        self.handoff_topic_replication = replication;
        self
    }

    /// Commit metadata size limit; set it to the broker's `offset.metadata.max.bytes` if that was
    /// raised. Default 4096.
    #[must_use]
    pub fn max_metadata_bytes(mut self, max: usize) -> Self {
        self.max_metadata_bytes = max;
        self
    }

    /// Epochs of assignment history kept (a key's homes in older epochs count as unknown: its
    /// records wait for every partition). Default 32.
    #[must_use]
    pub fn history_epochs(mut self, epochs: usize) -> Self {
        self.history_epochs = epochs.max(2);
        self
    }

    /// Create the consumer: ensure the handoff topic, read the control and handoff topics to
    /// their ends, then subscribe to the topic and start following both in the background.
    ///
    /// The user's config is passed to librdkafka with `group.id`,
    /// `partition.assignment.strategy=cooperative-sticky` (another strategy is overridden with a
    /// warning), `enable.auto.commit=false`, `enable.auto.offset.store=false` and, if unset,
    /// `statistics.interval.ms=5000` (for the lag gauge). Needs a tokio runtime.
    pub async fn build(self) -> Result<DkgConsumer> {
        let topic = self.topic.clone().ok_or_else(|| Error::InvalidConfig {
            field: "topic",
            reason: "a DkgConsumer needs its data topic".into(),
        })?;
        let group = self.group.clone().ok_or_else(|| Error::InvalidConfig {
            field: "group",
            reason: "set .group(..) or group.id".into(),
        })?;
        if topic.is_empty() || topic.contains('/') {
            return Err(Error::InvalidTopic {
                topic,
                reason: "empty or contains '/'",
            });
        }
        let deadline = tokio::time::Instant::now() + self.startup_timeout;
        let remaining = || deadline.saturating_duration_since(tokio::time::Instant::now());
        let connection = control::connection_config(&self.config);

        if self.ensure_handoff_topic {
            topic::ensure(
                &connection,
                &control::control_topic_spec(&self.handoff_topic, self.handoff_topic_replication),
                remaining(),
            )
            .await?;
        }

        let mut config = self.config.clone();
        config
            .set("group.id", &group)
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false");
        match config.get("partition.assignment.strategy") {
            Some("cooperative-sticky") | None => {}
            Some(other) => warn!(
                strategy = other,
                "DkgConsumer uses partition.assignment.strategy=cooperative-sticky (overriding)"
            ),
        }
        config.set("partition.assignment.strategy", "cooperative-sticky");
        if config.get("statistics.interval.ms").is_none() {
            config.set("statistics.interval.ms", "5000");
        }
        let member = self
            .member
            .clone()
            .unwrap_or_else(|| default_member(&config));
        let metrics = ConsumerMetrics::new(&topic, &member, self.registry.as_ref())?;
        let topic_arc: Arc<str> = Arc::from(topic.as_str());
        let core = Core::new(
            &topic,
            &group,
            0,
            CoreConfig {
                max_held: self.max_held,
                stall_timeout: self.stall_timeout,
                max_metadata_bytes: self.max_metadata_bytes,
                history: self.history_epochs,
            },
        );
        let shared = Arc::new(Shared {
            topic: Arc::clone(&topic_arc),
            core: Mutex::new(core),
            hooks: Arc::clone(&self.hooks),
            abandoned: AtomicBool::new(false),
            closing: AtomicBool::new(false),
            final_commit: Mutex::new(None),
            notes: Mutex::new(Vec::new()),
            has_notes: AtomicBool::new(false),
            ends: Mutex::new(HashMap::new()),
            committed_timeout: Duration::from_secs(5),
        });
        let consumer: StreamConsumer<DkgContext> = config.create_with_context(DkgContext {
            shared: Arc::clone(&shared),
        })?;
        let consumer = Arc::new(consumer);

        // The topic's partition count (it must exist).
        let probe = Arc::clone(&consumer);
        let name = topic.clone();
        let timeout = remaining();
        let count = tokio::task::spawn_blocking(move || {
            use crate::kafka::router::PartitionCountSource as _;
            probe.partition_count(&name, timeout)
        })
        .await
        .map_err(|e| Error::Timeout {
            what: format!("metadata task failed: {e}"),
            millis: duration_millis(self.startup_timeout),
        })??;
        let Some(count) = count else {
            return Err(Error::InvalidConfig {
                field: "topic",
                reason: format!("topic {topic:?} does not exist"),
            });
        };
        let now = Instant::now();
        {
            let mut core = shared.core();
            core.set_partitions(count, now);
            core.tick(now, handoff::now_ms());
        }

        // Everything published so far, before joining the group.
        let mut control = ControlTopicReader::new(&connection, &self.control_topic)?;
        control
            .catch_up(remaining(), |r| {
                if let ControlUpdate::Adopted(a) = &r.update {
                    if *a.topic() == *topic {
                        shared.core().on_assignment(Arc::clone(a), Instant::now());
                    }
                }
            })
            .await?;
        let mut history_keys = BTreeSet::new();
        let mut handoff = HandoffReader::new(&connection, &self.handoff_topic)?;
        let read = handoff
            .catch_up(remaining(), |r| {
                if let Ok(entry) = r.entry {
                    if *entry.topic() == *topic {
                        apply(
                            &mut shared.core(),
                            BgEvent::Handoff(entry),
                            Instant::now(),
                            &mut history_keys,
                        );
                    }
                }
            })
            .await?;
        {
            let core = shared.core();
            info!(
                topic = %topic,
                group = %group,
                member = %member,
                partitions = core.partitions(),
                epoch = core.max_epoch(),
                leases = core.leases().count(),
                handoff_records = read,
                "DKG consumer starting"
            );
        }

        consumer.subscribe(&[&topic])?;
        let writer = HandoffWriter::new(&connection, &self.handoff_topic)?;
        let (tx, rx) = mpsc::unbounded_channel();
        let tasks = Tasks(vec![
            tokio::spawn(follow_control(control, Arc::clone(&topic_arc), tx.clone())),
            tokio::spawn(follow_handoff(handoff, Arc::clone(&topic_arc), tx)),
        ]);
        let now = Instant::now();
        let lanes = shared.core().lanes();
        Ok(DkgConsumer {
            consumer: Arc::clone(&consumer),
            inner: Inner {
                consumer,
                shared,
                topic: topic_arc,
                group,
                member,
                events: rx,
                writer,
                metrics,
                lanes,
                fetched_headers: false,
                _tasks: tasks,
                commit_interval: self.commit_interval,
                next_housekeeping: now,
                next_auto_commit: self.commit_interval.map(|d| now + d),
                next_gc: now + GC_EVERY,
                progress_retry_at: None,
                since_housekeeping: 0,
                history_keys,
                closed: false,
            },
        })
    }
}

fn default_member(config: &ClientConfig) -> String {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    config.get("client.id").map_or_else(
        || {
            format!(
                "dkg-consumer-{}-{}",
                std::process::id(),
                SEQ.fetch_add(1, Ordering::Relaxed)
            )
        },
        str::to_owned,
    )
}
