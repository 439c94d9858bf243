//! The sampler's consumer: one OS thread running a librdkafka `BaseConsumer` in the topic's consumer group
//! and feeding every record into the [`Window`].
//!
//! Why a dedicated thread and `BaseConsumer` (not a `StreamConsumer` task): the loop is the sampler's only
//! hot path (the target is 500k records/s on one core), and a plain poll loop costs no future, no waker and
//! no channel per record. The driver talks to the thread through a command channel that the loop checks
//! between records via one relaxed atomic load, so the hot path never locks; the window is handed over as
//! an owned snapshot once per interval.
//!
//! Rebalances (the consumer group shares the topic's partitions between sampler instances) and librdkafka
//! statistics (the consumer's own lag per partition) arrive in [`SamplerContext`] callbacks, which run on
//! this thread inside `poll`, and are published in [`Shared`] state for the driver.
//!
//! With `--read-fraction F < 1` the loop reads chunks of each partition and seeks over the rest, following
//! the schedule of [`super::fraction`] (its docs say what that trades away); the log end it needs comes
//! from the same statistics, and a rebalance restarts the schedule.
//!
//! Each keyed record read is also checked against the placement in effect
//! ([`super::misplaced`], when [`ConsumeLoop::detect_misplacement`] turned it on).
//!
//! This module is also compiled into the benches (`benches/common/sidecar.rs`, via `#[path]`), so it
//! depends only on `window.rs`, `fraction.rs`, `misplaced.rs`, the partitioner crate and rdkafka.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender, TryRecvError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rdkafka::TopicPartitionList;
use rdkafka::client::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::{KafkaError, KafkaResult};
use rdkafka::message::{BorrowedMessage, Headers as _, Message};
use rdkafka::statistics::Statistics;
use rdkafka::topic_partition_list::Offset;

use super::fraction::{Schedule, Verdict, window_decay};
use super::misplaced::{Detector, PlacementFeed, wall_ms};
use super::window::{IntervalSnapshot, Weight, Window};

/// How long one `poll` waits when the topic is idle (bounds the command latency).
const IDLE_POLL: Duration = Duration::from_millis(50);

/// Partitions of the data topic this instance owns in its consumer group.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ownership {
    /// Owned partitions of the data topic.
    pub partitions: BTreeSet<u32>,
    /// Bumped at every assignment the group hands out (a new group generation as seen by this member).
    pub generation: u64,
}

impl Ownership {
    /// Whether this instance owns partition 0 (and therefore leads the topic's publishing).
    pub fn owns_partition_zero(&self) -> bool {
        self.partitions.contains(&0)
    }
}

/// State the consumer thread shares with the rest of the process.
#[derive(Debug, Default)]
pub struct Shared {
    ownership: Mutex<Ownership>,
    lag: Mutex<BTreeMap<u32, i64>>,
    last_error: Mutex<Option<String>>,
    /// The end of each owned partition's log (the next offset to be written, or the last stable offset
    /// if lower), as of the last statistics.
    log_end: Mutex<BTreeMap<u32, i64>>,
    /// Records between the application's position and the log end, summed over the owned partitions, as
    /// of the last statistics (the catch-up guard, `decide::CatchingUp`).
    unread: AtomicU64,
    /// Bumped at every rebalance callback (the read-fraction schedule restarts).
    rebalances: AtomicU64,
    /// Records polled and observed since start (monotonic; for liveness and the benches).
    pub polled: AtomicU64,
    /// Set by the first record polled (`polled` moves in steps of 1024): `--once` starts its interval
    /// there.
    pub first_record: AtomicBool,
    /// Offsets skipped unread since start (`--read-fraction`; monotonic, for the benches).
    pub skipped: AtomicU64,
    /// Records librdkafka fetched and parsed for this consumer, as of the last statistics (`rxmsgs`;
    /// with `--read-fraction` the excess over the records read is what a seek discarded).
    pub fetched: AtomicU64,
    /// Records delivered inside a skipped range and dropped (`--read-fraction`; for the benches).
    pub dropped: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere cannot leave these plain values inconsistent: keep going with them.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Shared {
    /// The current ownership.
    pub fn ownership(&self) -> Ownership {
        lock(&self.ownership).clone()
    }

    /// The consumer lag (records) of every owned partition, as of the last librdkafka statistics.
    pub fn lag(&self) -> BTreeMap<u32, i64> {
        lock(&self.lag).clone()
    }

    /// Records waiting unread on the owned partitions, as of the last statistics.
    pub fn unread(&self) -> u64 {
        self.unread.load(Ordering::Relaxed)
    }

    /// The known end of `partition`'s log, if the statistics reported one.
    pub fn log_end(&self, partition: i32) -> Option<i64> {
        let p = u32::try_from(partition).ok()?;
        lock(&self.log_end).get(&p).copied()
    }

    /// Ask the broker for `partition`'s end (before the first statistics: once per partition, a round
    /// trip of at most 1 s on the consumer thread) and remember it until the next statistics.
    fn query_log_end(
        &self,
        consumer: &BaseConsumer<SamplerContext>,
        topic: &str,
        partition: i32,
    ) -> Option<i64> {
        let p = u32::try_from(partition).ok()?;
        match consumer.fetch_watermarks(topic, partition, Duration::from_secs(1)) {
            Ok((_, high)) if high >= 0 => {
                lock(&self.log_end).insert(p, high);
                Some(high)
            }
            Ok(_) => None,
            Err(e) => {
                tracing::debug!(topic, partition, "cannot read the log end: {e}");
                None
            }
        }
    }

    /// The last consumer error, if any (cleared when records flow again).
    pub fn last_error(&self) -> Option<String> {
        lock(&self.last_error).clone()
    }
}

/// The consumer's librdkafka context: rebalance and statistics callbacks.
#[derive(Debug)]
pub struct SamplerContext {
    topic: String,
    shared: Arc<Shared>,
    last_error_log: Mutex<Option<std::time::Instant>>,
}

impl SamplerContext {
    /// A context tracking `topic`'s partitions in `shared`.
    pub fn new(topic: &str, shared: Arc<Shared>) -> Self {
        Self {
            topic: topic.to_owned(),
            shared,
            last_error_log: Mutex::new(None),
        }
    }
}

impl ClientContext for SamplerContext {
    fn stats(&self, statistics: Statistics) {
        let owned = lock(&self.shared.ownership).partitions.clone();
        let mut lag = BTreeMap::new();
        let mut log_end = BTreeMap::new();
        let mut unread: u64 = 0;
        if let Some(topic) = statistics.topics.get(&self.topic) {
            let fetched = topic.partitions.values().map(|p| p.rxmsgs).sum();
            self.shared.fetched.store(fetched, Ordering::Relaxed);
            for (p, stats) in &topic.partitions {
                // librdkafka reports -1 until it knows both ends; the internal UA partition is -1.
                let Ok(p) = u32::try_from(*p) else { continue };
                if !owned.contains(&p) {
                    continue;
                }
                if stats.consumer_lag >= 0 {
                    lag.insert(p, stats.consumer_lag);
                }
                // read_committed reads up to the last stable offset only: never skip past it.
                let end = match (stats.hi_offset, stats.ls_offset) {
                    (hi, ls) if ls >= 0 => hi.min(ls),
                    (hi, _) => hi,
                };
                if end >= 0 {
                    log_end.insert(p, end);
                    // app_offset: the offset after the last record handed to the loop (-1001 before one).
                    if stats.app_offset >= 0 {
                        unread += u64::try_from(end - stats.app_offset).unwrap_or(0);
                    }
                }
            }
        }
        self.shared.unread.store(unread, Ordering::Relaxed);
        *lock(&self.shared.lag) = lag;
        *lock(&self.shared.log_end) = log_end;
    }

    fn error(&self, error: KafkaError, reason: &str) {
        // librdkafka reports every failed reconnect while a broker is down: one line per 10 s is enough.
        let now = std::time::Instant::now();
        let mut last = lock(&self.last_error_log);
        if last.is_none_or(|t| now.duration_since(t) >= Duration::from_secs(10)) {
            tracing::warn!(topic = %self.topic, "kafka client error (librdkafka retries): {error}: {reason}");
            *last = Some(now);
        }
        *lock(&self.shared.last_error) = Some(format!("{error}: {reason}"));
    }
}

impl ConsumerContext for SamplerContext {
    fn post_rebalance(&self, consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        self.shared.rebalances.fetch_add(1, Ordering::Relaxed);
        match rebalance {
            Rebalance::Assign(_) | Rebalance::Revoke(_) => {
                // The authoritative full assignment (also right for incremental protocols).
                let partitions: BTreeSet<u32> = consumer
                    .assignment()
                    .map(|tpl| {
                        tpl.elements()
                            .iter()
                            .filter(|e| e.topic() == self.topic)
                            .filter_map(|e| u32::try_from(e.partition()).ok())
                            .collect()
                    })
                    .unwrap_or_default();
                let mut own = lock(&self.shared.ownership);
                if matches!(rebalance, Rebalance::Assign(_)) {
                    own.generation += 1;
                }
                if own.partitions != partitions {
                    tracing::info!(topic = %self.topic, partitions = ?partitions, "consumer group assignment");
                }
                own.partitions = partitions;
                lock(&self.shared.lag).retain(|p, _| own.partitions.contains(p));
            }
            Rebalance::Error(e) => {
                tracing::warn!(topic = %self.topic, "consumer group rebalance error: {e}")
            }
        }
    }

    fn commit_callback(&self, result: KafkaResult<()>, _offsets: &TopicPartitionList) {
        if let Err(e) = result {
            // NoOffset: nothing consumed since the last commit; not worth a line.
            if !matches!(
                e,
                KafkaError::ConsumerCommit(rdkafka::types::RDKafkaErrorCode::NoOffset)
            ) {
                tracing::warn!(topic = %self.topic, "offset commit failed: {e}");
            }
        }
    }
}

/// The consumer configuration of a sampler: `base` (connection settings and user overrides) plus the
/// group, offsets and fetch settings. Offsets are committed automatically (a sampler only estimates, so
/// at-most-once is fine) and once more on shutdown. `partition.assignment.strategy=range` only under
/// the classic group protocol: with `group.protocol=consumer` (KIP-848) librdkafka refuses it and the
/// broker's assignor (the group's, or `group.remote.assignor`) places partitions; a sampler needs no
/// particular assignment, only that each partition has one member.
pub fn consumer_config(
    base: &ClientConfig,
    group_id: &str,
    auto_offset_reset: &str,
    stats_ms: u64,
) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("group.id", group_id)
        .set("enable.auto.commit", "true")
        .set("auto.commit.interval.ms", "5000")
        .set("enable.auto.offset.store", "true")
        .set("auto.offset.reset", auto_offset_reset)
        .set("enable.partition.eof", "false")
        .set("statistics.interval.ms", stats_ms.to_string())
        .set("allow.auto.create.topics", "false")
        // New partitions are noticed (and rebalanced onto the group) within 10 s, not librdkafka's 5 min.
        .set("topic.metadata.refresh.interval.ms", "10000")
        // Big fetches: the loop is CPU-bound on observe, not on round trips.
        .set("fetch.min.bytes", "65536")
        .set("fetch.wait.max.ms", "100")
        .set("queued.min.messages", "200000");
    // User settings win. Values through `get`: `config_map` masks passwords.
    for k in base.config_map().into_keys() {
        if let Some(v) = base.get(k) {
            c.set(k, v);
        }
    }
    if !dkg_kafka::kafka::uses_consumer_group_protocol(&c)
        && c.get("partition.assignment.strategy").is_none()
    {
        c.set("partition.assignment.strategy", "range");
    }
    c
}

/// With `--read-fraction` < 1: prefetch about one chunk per partition instead of 200,000 records, since a
/// seek discards what librdkafka fetched beyond the chunk, and back off a full queue for 10 ms instead of
/// librdkafka's 1 s, since a chunk is read (and the seek asks for the next) well within that. The user's
/// settings (`base`) still win.
pub fn bound_prefetch(config: &mut ClientConfig, base: &ClientConfig, chunk: u64) {
    let prefetch = chunk.clamp(1, 10_000_000).to_string();
    for (key, value) in [
        ("queued.min.messages", prefetch.as_str()),
        ("fetch.queue.backoff.ms", "10"),
    ] {
        if base.get(key).is_none() {
            config.set(key, value);
        }
    }
}

/// A command from the driver.
#[derive(Debug)]
pub enum Command {
    /// Close the interval and send the snapshot back (the window decays by `decay`).
    Snapshot {
        /// Decay factor for the window.
        decay: f64,
        /// Where to send it.
        reply: tokio::sync::oneshot::Sender<IntervalSnapshot>,
    },
    /// Start a new window for another partition count.
    Reset {
        /// The new partition count.
        partitions: u32,
    },
    /// Commit offsets and leave the group.
    Shutdown,
}

/// The driver's handle on the consumer thread.
#[derive(Debug, Clone)]
pub struct ConsumerHandle {
    commands: Sender<Command>,
    pending: Arc<AtomicBool>,
}

impl ConsumerHandle {
    /// Send a command; `false` if the thread is gone.
    pub fn send(&self, command: Command) -> bool {
        let ok = self.commands.send(command).is_ok();
        self.pending.store(true, Ordering::Release);
        ok
    }
}

/// The consumer loop, owned by its thread.
pub struct ConsumeLoop {
    consumer: BaseConsumer<SamplerContext>,
    window: Window,
    topic: String,
    shared: Arc<Shared>,
    commands: Receiver<Command>,
    pending: Arc<AtomicBool>,
    /// `--read-fraction` < 1: the read/skip schedule (`None` reads every record).
    schedule: Option<Scheduled>,
    /// The misplacement detector (`None`: off).
    detector: Option<Detector>,
}

/// The read/skip schedule of `--read-fraction` < 1 and the rebalance it last restarted at.
#[derive(Debug)]
struct Scheduled {
    schedule: Schedule,
    /// `Shared::rebalances` as of the schedule's last restart.
    rebalances: u64,
    /// Store the offsets to commit by hand (`enable.auto.offset.store` is off): the seek targets, so that
    /// a restart resumes past a skipped range (an automatic store stops at the last record read).
    store: bool,
    /// Records read and offsets skipped in this interval (the window's decay, [`window_decay`]).
    interval: (u64, u64),
    /// The partition of the last record (its run ends when another partition's record comes).
    last: Option<i32>,
}

impl std::fmt::Debug for ConsumeLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConsumeLoop")
            .field("topic", &self.topic)
            .field("window", &self.window)
            .finish_non_exhaustive()
    }
}

impl ConsumeLoop {
    /// Create the consumer (subscribed to `topic`) and its loop; returns the loop and its handle.
    pub fn new(
        config: &ClientConfig,
        topic: &str,
        window: Window,
        shared: Arc<Shared>,
    ) -> KafkaResult<(Self, ConsumerHandle)> {
        let consumer: BaseConsumer<SamplerContext> =
            config.create_with_context(SamplerContext::new(topic, Arc::clone(&shared)))?;
        consumer.subscribe(&[topic])?;
        let (tx, rx) = std::sync::mpsc::channel();
        let pending = Arc::new(AtomicBool::new(false));
        Ok((
            Self {
                consumer,
                window,
                topic: topic.to_owned(),
                shared,
                commands: rx,
                pending: Arc::clone(&pending),
                schedule: None,
                detector: None,
            },
            ConsumerHandle {
                commands: tx,
                pending,
            },
        ))
    }

    /// Read each partition by `schedule` (`--read-fraction`; the sampler's reads on to the end of each
    /// fetched run, [`Schedule::extend_runs`]); a fraction of 1 keeps reading every record.
    /// `store_offsets`: the consumer was configured with `enable.auto.offset.store=false` and commits
    /// what this loop stores.
    pub fn read_fraction(&mut self, schedule: Schedule, store_offsets: bool) {
        self.schedule = (schedule.fraction() < 1.0).then_some(Scheduled {
            schedule,
            rebalances: self.shared.rebalances.load(Ordering::Relaxed),
            store: store_offsets,
            interval: (0, 0),
            last: None,
        });
    }

    /// Check every keyed record read against the placements `feed` hands over, for a topic of
    /// `partitions` partitions (the counts reach the driver in each [`IntervalSnapshot`]).
    pub fn detect_misplacement(&mut self, feed: Arc<PlacementFeed>, partitions: u32) {
        self.detector = Some(Detector::new(feed, partitions));
    }

    /// Run until [`Command::Shutdown`] (or the handle is dropped), or until `limit` offsets were consumed
    /// or skipped when given (benches). Commits offsets synchronously before returning; dropping the loop
    /// leaves the group.
    pub fn run(&mut self, limit: Option<u64>) {
        let mut consumed: u64 = 0;
        let mut skipped: u64 = 0;
        let mut error_logged = false;
        loop {
            if self.pending.load(Ordering::Relaxed) && !self.handle_commands() {
                break;
            }
            if limit.is_some_and(|l| consumed + skipped >= l) {
                break;
            }
            match self.consumer.poll(IDLE_POLL) {
                Some(Ok(msg)) => {
                    if let Some(scheduled) = self.schedule.as_mut() {
                        let (observed, skip) = scheduled.read(
                            &msg,
                            &mut self.window,
                            &self.shared,
                            &self.consumer,
                            &self.topic,
                        );
                        skipped += skip;
                        if !observed {
                            continue;
                        }
                    } else {
                        let bytes = record_bytes(&msg, self.window.weight());
                        self.window
                            .observe_sized(msg.partition(), msg.key(), 1, bytes);
                    }
                    if let Some(detector) = self.detector.as_mut() {
                        detect(detector, &msg);
                    }
                    consumed += 1;
                    if consumed == 1 {
                        self.shared.first_record.store(true, Ordering::Relaxed);
                    }
                    if error_logged {
                        error_logged = false;
                        *lock(&self.shared.last_error) = None;
                    }
                    // One counter write per 1024 records keeps the cache line quiet.
                    if consumed & 1023 == 0 {
                        self.shared.polled.fetch_add(1024, Ordering::Relaxed);
                    }
                }
                Some(Err(e)) => {
                    // librdkafka retries by itself (broker down, topic deleted, ...): report, keep polling.
                    let text = e.to_string();
                    if !error_logged {
                        tracing::warn!(topic = %self.topic, "consumer error (librdkafka retries): {text}");
                        error_logged = true;
                    }
                    *lock(&self.shared.last_error) = Some(text);
                    if matches!(e, KafkaError::MessageConsumptionFatal(_)) {
                        tracing::error!(topic = %self.topic, "fatal consumer error; the consumer stops");
                        break;
                    }
                }
                None => {
                    // Nothing queued: every partition's run is over.
                    if let Some(scheduled) = self.schedule.as_mut() {
                        skipped += scheduled.end_run(
                            None,
                            &mut self.window,
                            &self.shared,
                            &self.consumer,
                            &self.topic,
                        );
                    }
                }
            }
        }
        self.shared
            .polled
            .fetch_add(consumed & 1023, Ordering::Relaxed);
        if let Some(scheduled) = &self.schedule
            && scheduled.store
        {
            for (partition, next) in scheduled.schedule.positions() {
                store_next(&self.consumer, &self.topic, partition, next);
            }
        }
        match self.consumer.commit_consumer_state(CommitMode::Sync) {
            Ok(()) => tracing::debug!(topic = %self.topic, "committed offsets"),
            Err(KafkaError::ConsumerCommit(rdkafka::types::RDKafkaErrorCode::NoOffset)) => {}
            Err(e) => tracing::warn!(topic = %self.topic, "final offset commit failed: {e}"),
        }
    }

    /// Serve queued commands; `false` = stop.
    fn handle_commands(&mut self) -> bool {
        self.pending.store(false, Ordering::Relaxed);
        loop {
            match self.commands.try_recv() {
                Ok(Command::Snapshot { decay, reply }) => {
                    // With F < 1 the window keeps as many records read as full reading would.
                    let decay = self
                        .schedule
                        .as_mut()
                        .map_or(decay, |s| s.end_interval(decay));
                    let mut snapshot = self.window.end_interval(decay);
                    if let Some(detector) = self.detector.as_mut() {
                        snapshot.placement = detector.take();
                    }
                    // The driver may have given up waiting; nothing to do then.
                    let _ = reply.send(snapshot);
                }
                Ok(Command::Reset { partitions }) => {
                    if let Err(e) = self.window.reset(partitions) {
                        tracing::error!(topic = %self.topic, "cannot start a window for {partitions} partitions: {e}");
                    }
                    if let Some(detector) = self.detector.as_mut() {
                        detector.reset(partitions, wall_ms());
                    }
                }
                Ok(Command::Shutdown) | Err(TryRecvError::Disconnected) => return false,
                Err(TryRecvError::Empty) => return true,
            }
        }
    }
}

impl Scheduled {
    /// `--read-fraction`: observe `msg` with its chunk's weight or drop it, and seek past the chunk's
    /// skipped range when it ends. Returns whether it was observed and the offsets skipped.
    fn read(
        &mut self,
        msg: &BorrowedMessage<'_>,
        window: &mut Window,
        shared: &Shared,
        consumer: &BaseConsumer<SamplerContext>,
        topic: &str,
    ) -> (bool, u64) {
        let schedule = &mut self.schedule;
        let rebalances = shared.rebalances.load(Ordering::Relaxed);
        if rebalances != self.rebalances {
            // Positions restart from the committed offsets: so do the chunks.
            self.rebalances = rebalances;
            schedule.clear();
        }
        let partition = msg.partition();
        let mut skipped = self.end_run(Some(partition), window, shared, consumer, topic);
        let schedule = &mut self.schedule;
        let started = schedule.chunks_started();
        let (observed, seek_to) = match schedule.record(partition, msg.offset(), || {
            shared
                .log_end(partition)
                .or_else(|| shared.query_log_end(consumer, topic, partition))
        }) {
            Verdict::Read { weight, seek_to } => {
                let bytes = record_bytes(msg, window.weight());
                window.observe_sized(partition, msg.key(), weight, bytes);
                (true, seek_to)
            }
            Verdict::Drop { seek_to } => {
                shared.dropped.fetch_add(1, Ordering::Relaxed);
                (false, seek_to)
            }
        };
        if self.store && schedule.chunks_started() != started {
            // A chunk starts here: the log before it is accounted for (at the head, where nothing is
            // skipped, this is the only store; a crash re-reads at most the current chunk).
            store_next(consumer, topic, partition, msg.offset());
        }
        self.interval.0 += u64::from(observed);
        if let Some(to) = seek_to {
            skipped += self.seek(window, shared, (consumer, topic), partition, to);
        }
        (observed, skipped)
    }

    /// The interval ends: the window's decay for the share of offsets it read ([`window_decay`]).
    fn end_interval(&mut self, decay: f64) -> f64 {
        let (read, skipped) = std::mem::take(&mut self.interval);
        window_decay(decay, read, read + skipped)
    }

    /// A record of `next` (`None`: nothing queued) came: the previous partition's run is over if it was
    /// another's, so seek past its chunk if it read on. Returns the offsets skipped.
    fn end_run(
        &mut self,
        next: Option<i32>,
        window: &mut Window,
        shared: &Shared,
        consumer: &BaseConsumer<SamplerContext>,
        topic: &str,
    ) -> u64 {
        let previous = std::mem::replace(&mut self.last, next);
        let Some(previous) = previous.filter(|&p| Some(p) != next) else {
            return 0;
        };
        match self.schedule.run_ended(previous) {
            Some(to) => self.seek(window, shared, (consumer, topic), previous, to),
            None => 0,
        }
    }

    /// Seek `partition` to `to`, counting what the schedule skipped; returns that count.
    fn seek(
        &mut self,
        window: &mut Window,
        shared: &Shared,
        (consumer, topic): (&BaseConsumer<SamplerContext>, &str),
        partition: i32,
        to: i64,
    ) -> u64 {
        let skipped = self.schedule.take_skipped();
        self.interval.1 += skipped;
        window.note_skipped(skipped);
        shared.skipped.fetch_add(skipped, Ordering::Relaxed);
        // Asynchronous (timeout 0): the hot loop never waits. A lost seek is harmless: the records of the
        // skipped range are then dropped as they arrive.
        if let Err(e) = consumer.seek(topic, partition, Offset::Offset(to), Duration::ZERO) {
            tracing::debug!(topic = %topic, partition, offset = to, "seek failed: {e}");
        }
        if self.store {
            store_next(consumer, topic, partition, to);
        }
        skipped
    }
}

/// A record's size in bytes: key + value, and with [`Weight::Bytes`] the header names and values too
/// (what the producer sent, without the batch framing). Only `--weight bytes` parses the headers: that
/// costs librdkafka allocations per record, too much for a number that only feeds a gauge.
pub fn record_bytes<M: Message>(msg: &M, weight: Weight) -> u64 {
    let mut n = msg.key().map_or(0, <[u8]>::len) + msg.payload().map_or(0, <[u8]>::len);
    if weight == Weight::Bytes
        && let Some(headers) = msg.headers()
    {
        n += headers
            .iter()
            .map(|h| h.key.len() + h.value.map_or(0, <[u8]>::len))
            .sum::<usize>();
    }
    n as u64
}

/// Check one record's placement: its timestamp (the producer's create time; the broker's append
/// time on such topics; else now) and, only if needed, its `dkg-epoch` header.
#[inline]
fn detect(detector: &mut Detector, msg: &BorrowedMessage<'_>) {
    let Some(key) = msg.key() else { return };
    let t = msg
        .timestamp()
        .to_millis()
        .and_then(|t| u64::try_from(t).ok())
        .unwrap_or_else(wall_ms);
    detector.observe(key, msg.partition(), t, || {
        msg.headers().and_then(dkg_kafka::kafka::epoch_of)
    });
}

/// Store `next` as the offset to commit for `partition` (`rd_kafka_offset_store` stores its argument + 1).
fn store_next(consumer: &BaseConsumer<SamplerContext>, topic: &str, partition: i32, next: i64) {
    if let Err(e) = consumer.store_offset(topic, partition, next - 1) {
        // After a revoke the partition is no longer ours: its new owner commits.
        tracing::debug!(
            topic,
            partition,
            offset = next,
            "cannot store the offset: {e}"
        );
    }
}

#[cfg(test)]
mod tests {
    // unused_imports: benches/consume_throughput.rs includes this file without the test harness.
    #![allow(unused_imports)]
    use rdkafka::message::{Header, OwnedHeaders, OwnedMessage, Timestamp};

    use super::*;

    #[test]
    fn range_strategy_only_under_the_classic_group_protocol() {
        let mut base = ClientConfig::new();
        base.set("bootstrap.servers", "127.0.0.1:1");
        let classic = consumer_config(&base, "g", "earliest", 1000);
        assert_eq!(classic.get("partition.assignment.strategy"), Some("range"));
        // The user's strategy wins under classic.
        base.set("partition.assignment.strategy", "roundrobin");
        let own = consumer_config(&base, "g", "earliest", 1000);
        assert_eq!(own.get("partition.assignment.strategy"), Some("roundrobin"));
        // KIP-848: nothing librdkafka refuses, and the consumer can be created.
        let mut base = ClientConfig::new();
        base.set("bootstrap.servers", "127.0.0.1:1")
            .set("group.protocol", "consumer");
        let kip848 = consumer_config(&base, "g", "earliest", 1000);
        for key in [
            "partition.assignment.strategy",
            "session.timeout.ms",
            "heartbeat.interval.ms",
        ] {
            assert_eq!(kip848.get(key), None, "{key}");
        }
        let created: rdkafka::error::KafkaResult<rdkafka::consumer::BaseConsumer> = kip848.create();
        assert!(created.is_ok(), "{:?}", created.err());
    }

    #[test]
    fn record_bytes_counts_key_value_and_headers() {
        let headers = OwnedHeaders::new()
            .insert(Header {
                key: "trace",
                value: Some(&b"0123456789"[..]),
            })
            .insert(Header {
                key: "flag",
                value: None::<&[u8]>,
            });
        let msg = |key: Option<&[u8]>, value: Option<&[u8]>, headers: Option<OwnedHeaders>| {
            OwnedMessage::new(
                value.map(<[u8]>::to_vec),
                key.map(<[u8]>::to_vec),
                "t".into(),
                Timestamp::NotAvailable,
                0,
                0,
                headers,
            )
        };
        let big = msg(Some(b"key"), Some(&[0; 100]), Some(headers));
        assert_eq!(record_bytes(&big, Weight::Bytes), 3 + 100 + 5 + 10 + 4);
        assert_eq!(record_bytes(&big, Weight::Records), 3 + 100);
        assert_eq!(record_bytes(&msg(None, Some(b"v"), None), Weight::Bytes), 1);
        assert_eq!(record_bytes(&msg(Some(b""), None, None), Weight::Bytes), 0);
    }

    #[test]
    fn each_interval_decays_by_its_own_share_read() {
        let mut s = super::Scheduled {
            schedule: super::Schedule::new(0.1, 10),
            rebalances: 0,
            store: false,
            interval: (10, 90),
            last: None,
        };
        assert!((s.end_interval(0.5) - 0.95).abs() < 1e-12);
        // The counts start again: an interval that skipped nothing (at the head) decays by --decay.
        assert_eq!(s.interval, (0, 0));
        s.interval = (40, 0);
        assert_eq!(s.end_interval(0.5), 0.5);
    }
}
