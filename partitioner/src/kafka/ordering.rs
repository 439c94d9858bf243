//! The producer side of ordering-safe migration (`docs/spec.md` 9.2; see
//! [`DkgConsumer`](crate::DkgConsumer) for the consumer side): a lease per topic, an
//! in-flight gate, offset markers and assignment history.
//!
//! # Sequence per adopted epoch `E` of a topic (`docs/spec.md` 9.2)
//!
//! 1. The router swaps the assignment in (arc-swap): new sends route by `E` at once. Nothing on
//!    the send path waits.
//! 2. **Grace**: the ordering task waits until every send that entered the in-flight gate before it
//!    noticed the adoption has been enqueued in librdkafka. Those are the only sends that can
//!    still carry a partition chosen by an older epoch.
//! 3. **Acknowledgement**: every record routed by the wrapper is counted in the ledger of the
//!    epoch it was routed under ([`EpochLedger`]: an atomic add on send, an atomic max and add in
//!    the delivery callback of the wrapper's own producer context, `kafka/delivery.rs`). The task
//!    waits until the ledgers of the epochs below `E` have no record outstanding. A partition
//!    where a delivery failed with an unknown outcome (a timeout: the record may be in the log)
//!    gets its end offset from the broker once nothing is outstanding.
//! 4. **Marker**: the pure [`MarkerTracker`] turns the ledgers into `marker/<topic>/<producer>` =
//!    `{E, ends}`, written and acknowledged, after `assignment/<topic>/<E>` (history: consumers
//!    need the previous epochs' assignments to know where a key used to live). History goes first
//!    so that a failed write fails the whole step, which the next loop retries. The lease is not
//!    rewritten for it.
//!
//! If epochs arrive faster than markers complete, intermediate epochs are skipped: a marker of
//! `G` covers every epoch below `G` too.
//!
//! A change of the topic's partition count is not an adoption: the router falls back to Kafka's
//! hash over the new count with no epoch, so no marker is written and the consumers' guarantee
//! does not cover the keys it moves (counted in `dkg_producer_partition_count_changes_total`).
//! Making it one needs an epoch for the fallback placement, which the protocol does not have.
//!
//! # Stamp windows (`docs/spec.md` 9.2.2)
//!
//! The router stamps the keys an epoch switch moved only while the switch's window is open
//! (its builder's `track_windows`); a task of its own (`follow_windows`)
//! reads the consumer groups' progress from the handoff topic and closes windows by the pure rule
//! of [`dkg_kafka_protocol::window`]: in epoch order, once this producer announced the epoch and every
//! followed group settled it, or after [`ProducerConfig::stamp_window`](crate::ProducerConfig::stamp_window).
//! It never closes one before its first complete read of the handoff topic. If reading fails, the
//! windows stay open (moved keys stay stamped: the safe side) and the read is retried.
//!
//! # The gate
//!
//! Two counters and a generation number, RCU style. A send enters by incrementing the counter of
//! the current generation's parity, re-checking the generation (retrying on the other counter if
//! it moved), and leaves after the enqueue. The task bumps the generation and waits for the old
//! parity's counter to reach zero. Cost on the send path: two loads and two read-modify-writes of
//! shared atomics; no lock, no wait (a send never waits for the task). A send holds the gate only
//! for one non-blocking enqueue attempt: `send`'s waits on a full queue happen outside it (the
//! record is routed again on the next attempt), so a grace period lasts microseconds.
//!
//! # Leases
//!
//! Written for every declared topic before the producer is returned ([`Lease::first_epoch`](crate::kafka::handoff::Lease::first_epoch) = the
//! epoch in effect then: nothing older was ever routed), for other topics on first use (first
//! epoch 0, and a marker for the current epoch right away), renewed every third of the lease
//! duration by a task of their own (the ordering task may wait for acknowledgements through an
//! outage; the lease must not lapse meanwhile), and on [`close`](crate::DkgProducer::close)
//! marked closed at the last announced epoch (consumers then stop waiting for this producer for
//! newer epochs at once; for older ones its markers are already in the log). A producer dropped
//! without `close` simply stops renewing: consumers stop waiting once the lease expires.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::{ArcSwap, ArcSwapOption};
use rdkafka::ClientContext;
use rdkafka::producer::Producer as _;
use tokio::sync::{Mutex as AsyncMutex, oneshot};
use tokio::task::{AbortHandle, JoinHandle};
use tracing::{debug, info, warn};

use crate::error::{Error, Result};
use crate::kafka::delivery::Backend;
use crate::kafka::handoff::{
    self, HandoffEntry, HandoffKey, HandoffReader, HandoffRecord, HandoffWriter, ProducerId, now_ms,
};
use crate::kafka::router::DkgRouter;
use crate::kafka::topic::duration_millis;
use dkg_kafka_protocol::lease::LeaseSchedule;
use dkg_kafka_protocol::marker::{EpochLedger, MarkerTracker};
use dkg_kafka_protocol::window::{GroupProgress, GroupSettled, StampWindows};

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The ledgers of one topic: the one sends use now on the send path's fast track, all of them
/// (epochs not yet covered by a marker) behind a lock.
#[derive(Debug, Default)]
struct TopicLedgers {
    hot: ArcSwapOption<EpochLedger>,
    all: Mutex<BTreeMap<u64, Arc<EpochLedger>>>,
}

impl TopicLedgers {
    #[inline]
    fn get(&self, epoch: u64, partitions: impl FnOnce() -> u32) -> Arc<EpochLedger> {
        if let Some(l) = &*self.hot.load()
            && l.epoch() == epoch
        {
            return Arc::clone(l);
        }
        self.get_slow(epoch, partitions())
    }

    #[cold]
    fn get_slow(&self, epoch: u64, partitions: u32) -> Arc<EpochLedger> {
        let mut all = lock(&self.all);
        let l = Arc::clone(
            all.entry(epoch)
                .or_insert_with(|| Arc::new(EpochLedger::new(epoch, partitions))),
        );
        // The fast track follows the epoch sends use now: after a switch (or a retraction, whose
        // fallback records count as epoch 0) every later send finds it there; only the few sends
        // still routed by the previous state come through here again.
        self.hot.store(Some(Arc::clone(&l)));
        l
    }

    /// The ledgers of epochs below `epoch`.
    fn below(&self, epoch: u64) -> Vec<Arc<EpochLedger>> {
        lock(&self.all)
            .range(..epoch)
            .map(|(_, l)| Arc::clone(l))
            .collect()
    }

    /// A marker of `epoch` is written: the ledgers below it are done. A record routed under a
    /// lower epoch after this (only Kafka's placement after a retraction, epoch 0: sends routed
    /// by an assignment below `epoch` all reached the client before the marker) opens a new
    /// ledger, which the next marker waits for; a send that loaded the old one an instant before
    /// may still count there (retractions are outside the guarantee, `docs/spec.md` 9.3).
    fn covered(&self, epoch: u64) {
        let mut all = lock(&self.all);
        *all = all.split_off(&epoch);
        if self.hot.load().as_ref().is_some_and(|l| l.epoch() < epoch) {
            self.hot.store(None);
        }
    }
}

/// Every topic's ledgers: a lock-free map on the send path, grown under a lock.
#[derive(Debug, Default)]
pub(crate) struct Ledgers {
    topics: ArcSwap<HashMap<String, Arc<TopicLedgers>, ahash::RandomState>>,
    grow: Mutex<()>,
}

impl Ledgers {
    #[inline]
    fn get(&self, router: &DkgRouter, topic: &str, epoch: u64) -> Arc<EpochLedger> {
        let count = || router.partition_count(topic).unwrap_or(0);
        if let Some(t) = self.topics.load().get(topic) {
            return t.get(epoch, count);
        }
        self.topic(topic).get(epoch, count)
    }

    #[cold]
    fn topic(&self, topic: &str) -> Arc<TopicLedgers> {
        let _grow = lock(&self.grow);
        let current = self.topics.load();
        if let Some(t) = current.get(topic) {
            return Arc::clone(t);
        }
        let mut next = HashMap::clone(&current);
        let t = Arc::new(TopicLedgers::default());
        next.insert(topic.to_owned(), Arc::clone(&t));
        self.topics.store(Arc::new(next));
        t
    }
}

#[repr(align(64))]
#[derive(Debug, Default)]
struct Padded(AtomicUsize);

/// The in-flight gate (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Gate {
    generation: AtomicU64,
    slots: [Padded; 2],
}

/// A send inside the gate; leaves on drop.
#[derive(Debug)]
pub(crate) struct GateGuard<'a> {
    slot: &'a AtomicUsize,
}

impl Drop for GateGuard<'_> {
    #[inline]
    fn drop(&mut self) {
        self.slot.fetch_sub(1, AtomicOrdering::Release);
    }
}

impl Gate {
    /// Enter before routing a record; drop the guard once it is enqueued.
    #[inline]
    pub(crate) fn enter(&self) -> GateGuard<'_> {
        loop {
            let g = self.generation.load(AtomicOrdering::SeqCst);
            let slot = &self.slots[(g & 1) as usize].0;
            slot.fetch_add(1, AtomicOrdering::SeqCst);
            if self.generation.load(AtomicOrdering::SeqCst) == g {
                return GateGuard { slot };
            }
            slot.fetch_sub(1, AtomicOrdering::SeqCst);
        }
    }

    /// Wait until every send that entered before this call has left. One caller at a time.
    pub(crate) async fn grace(&self) {
        let g = self.generation.fetch_add(1, AtomicOrdering::SeqCst);
        let slot = &self.slots[(g & 1) as usize].0;
        while slot.load(AtomicOrdering::SeqCst) != 0 {
            tokio::time::sleep(Duration::from_micros(200)).await;
        }
    }
}

/// Longest the acknowledgements and the writes of one marker may take before the attempt counts
/// as failed and is retried.
const MARKER_TIMEOUT: Duration = Duration::from_secs(30);

/// The ordering state of one producer instance: its id, the gate, the ledgers, the background
/// task.
pub(crate) struct Ordering {
    id: ProducerId,
    gate: Arc<Gate>,
    ledgers: Arc<Ledgers>,
    close: Mutex<Option<oneshot::Sender<oneshot::Sender<Result<()>>>>>,
    task: JoinHandle<()>,
    renewal: JoinHandle<()>,
    /// Follows the consumer groups' progress and closes stamp windows (with `EpochHeader::Moved`).
    windows: Option<JoinHandle<()>>,
}

impl fmt::Debug for Ordering {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ordering")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl Drop for Ordering {
    fn drop(&mut self) {
        // Dropped without close: stop renewing, the lease expires.
        self.task.abort();
        self.renewal.abort();
        if let Some(w) = &self.windows {
            w.abort();
        }
    }
}

impl Ordering {
    /// Register the leases of the declared `topics` (awaited), then start the task.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn start<C: ClientContext + 'static>(
        producer: Backend<C>,
        router: DkgRouter,
        writer: HandoffWriter,
        reader: HandoffReader,
        topics: &[String],
        lease: Duration,
        stamp_window: Duration,
    ) -> Result<Self> {
        let id = handoff::new_producer_id();
        let gate = Arc::new(Gate::default());
        let lease_ms = u64::try_from(lease.as_millis()).unwrap_or(u64::MAX);
        let ledgers = Arc::new(Ledgers::default());
        let schedule = Arc::new(AsyncMutex::new(LeaseSchedule::new(id.clone(), lease_ms)));
        let mut task = Task {
            producer,
            router: router.clone(),
            writer: writer.clone(),
            id: id.clone(),
            schedule: Arc::clone(&schedule),
            renewal: None,
            gate: Arc::clone(&gate),
            ledgers: Arc::clone(&ledgers),
            trackers: HashMap::new(),
        };
        for topic in topics {
            // Nothing was routed yet: the epoch in effect now is the oldest this producer uses.
            let epoch = task.epoch_in_effect(topic).unwrap_or(0);
            task.register(topic, epoch).await?;
        }
        info!(producer = %id, topics = ?topics, lease_ms = lease.as_millis() as u64,
            "ordering producer registered");
        // Renewal runs on its own: the task may wait long for acknowledgements (an outage), and
        // a lease must not expire meanwhile.
        let renewal = tokio::spawn(renew_leases(
            Arc::clone(&schedule),
            writer,
            id.clone(),
            lease,
        ));
        task.renewal = Some(renewal.abort_handle());
        // Moved keys' records carry their epoch only until the consumer groups settled the
        // switch: the router keeps windows open (built with `track_windows`), this task closes
        // them.
        let windows = router.tracks_windows().then(|| {
            tokio::spawn(follow_windows(
                router.clone(),
                schedule,
                reader,
                StampWindows::new(stamp_window),
            ))
        });
        let (close_tx, close_rx) = oneshot::channel();
        let handle = tokio::spawn(task.run(close_rx));
        Ok(Self {
            id,
            gate,
            ledgers,
            close: Mutex::new(Some(close_tx)),
            task: handle,
            renewal,
            windows,
        })
    }

    pub(crate) fn id(&self) -> &ProducerId {
        &self.id
    }

    #[inline]
    pub(crate) fn enter(&self) -> GateGuard<'_> {
        self.gate.enter()
    }

    /// The ledger to count a record routed under `epoch` to `topic` in. Call inside the gate.
    #[inline]
    pub(crate) fn ledger(&self, router: &DkgRouter, topic: &str, epoch: u64) -> Arc<EpochLedger> {
        self.ledgers.get(router, topic, epoch)
    }

    /// Complete pending markers, mark the leases closed, stop the task.
    pub(crate) async fn close(&self) -> Result<()> {
        let tx = self
            .close
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        let Some(tx) = tx else {
            return Ok(()); // closed already
        };
        let (reply_tx, reply_rx) = oneshot::channel();
        if tx.send(reply_tx).is_err() {
            return Err(Error::Timeout {
                what: "the ordering task is gone".into(),
                millis: 0,
            });
        }
        // Pending markers (bounded by MARKER_TIMEOUT) plus the lease writes.
        let limit = MARKER_TIMEOUT + Duration::from_secs(15);
        match tokio::time::timeout(limit, reply_rx).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(Error::Timeout {
                what: "the ordering task ended before closing".into(),
                millis: 0,
            }),
            Err(_) => Err(Error::Timeout {
                what: "closing the ordering producer (markers and leases)".into(),
                millis: duration_millis(limit),
            }),
        }
    }
}

struct Task<C: ClientContext + 'static> {
    producer: Backend<C>,
    router: DkgRouter,
    writer: HandoffWriter,
    id: ProducerId,
    /// Shared with the renewal task. Held across each lease write, so lease records land in the
    /// order the schedule produced them (a renewal never overwrites a closed lease).
    schedule: Arc<AsyncMutex<LeaseSchedule>>,
    /// The renewal task, stopped by a clean close before the closed leases are written.
    renewal: Option<AbortHandle>,
    gate: Arc<Gate>,
    /// The send path's ledgers, and per topic the tracker that decides markers.
    ledgers: Arc<Ledgers>,
    trackers: HashMap<String, MarkerTracker>,
}

impl<C: ClientContext + 'static> Task<C> {
    /// The epoch of `topic`'s assignment if it is in effect (its partition count is the topic's).
    fn epoch_in_effect(&self, topic: &str) -> Option<u64> {
        let a = self.router.assignment(topic)?;
        (self.router.partition_count(topic) == Some(a.partitions())).then(|| a.epoch())
    }

    async fn register(&mut self, topic: &str, first_epoch: u64) -> Result<()> {
        let mut schedule = self.schedule.lock().await;
        let lease = schedule.new_lease(topic, first_epoch, now_ms());
        self.writer.put_lease(&lease).await?;
        schedule.registered(lease);
        drop(schedule);
        let partitions = self.router.partition_count(topic).unwrap_or(0);
        self.trackers.insert(
            topic.to_owned(),
            MarkerTracker::new(self.id.clone(), topic, partitions, first_epoch),
        );
        Ok(())
    }

    async fn run(mut self, mut close: oneshot::Receiver<oneshot::Sender<Result<()>>>) {
        let mut adoptions = self.router.adoptions();
        // New topics in use, and retries of failed markers.
        let mut scan = tokio::time::interval(Duration::from_millis(200));
        scan.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                changed = adoptions.changed() => {
                    if changed.is_err() {
                        return; // the router is gone
                    }
                }
                _ = scan.tick() => {}
                reply = &mut close => {
                    let result = self.close().await;
                    if let Ok(reply) = reply {
                        let _ = reply.send(result);
                    }
                    return;
                }
            }
            self.register_new_topics().await;
            // A failure is logged there and retried on the next scan.
            let _ = self.markers_due().await;
        }
    }

    async fn register_new_topics(&mut self) {
        for topic in self.router.topics_in_use() {
            if self.schedule.lock().await.contains(&topic) {
                continue;
            }
            // Records may already have been routed under any epoch: first epoch 0, and the
            // marker of the current epoch follows at once.
            match self.register(&topic, 0).await {
                Ok(()) => {
                    debug!(producer = %self.id, topic = %topic, "lease registered on first use")
                }
                Err(e) => warn!(producer = %self.id, topic = %topic, error = %e,
                    "lease registration failed (retrying)"),
            }
        }
    }

    /// Write the markers due; `Err`: the last that failed (retried next loop).
    async fn markers_due(&mut self) -> Result<()> {
        let due = self.schedule.lock().await.due(|t| self.epoch_in_effect(t));
        if due.is_empty() {
            return Ok(());
        }
        let mut outcome = Ok(());
        // One grace period covers every topic: all sends routed by older states are enqueued.
        self.gate.grace().await;
        for (topic, epoch) in due {
            if let Err(e) = self.marker(&topic, epoch).await {
                warn!(producer = %self.id, topic = %topic, epoch, error = %e,
                    "announcing the epoch switch failed (retrying)");
                outcome = Err(e);
            }
        }
        outcome
    }

    /// Wait until every record routed to `topic` under an epoch below `epoch` is reported, then
    /// write the marker of `epoch` and the history (bounded by [`MARKER_TIMEOUT`]; on failure the
    /// next loop retries).
    async fn marker(&mut self, topic: &str, epoch: u64) -> Result<()> {
        match tokio::time::timeout(MARKER_TIMEOUT, self.marker_unbounded(topic, epoch)).await {
            Ok(r) => r,
            Err(_) => Err(Error::Timeout {
                what: format!("acknowledgements before the marker of epoch {epoch} on {topic:?}"),
                millis: duration_millis(MARKER_TIMEOUT),
            }),
        }
    }

    async fn marker_unbounded(&mut self, topic: &str, epoch: u64) -> Result<()> {
        let Some(count) = self.router.partition_count(topic) else {
            return Ok(());
        };
        let topic_ledgers = self.ledgers.topic(topic);
        let older = topic_ledgers.below(epoch);
        let mut snapshots = Vec::with_capacity(older.len());
        for l in &older {
            // Reports arrive within the round trip of a produce request; poll briefly.
            let mut s = l.snapshot();
            while s.outstanding > 0 {
                tokio::time::sleep(Duration::from_millis(2)).await;
                s = l.snapshot();
            }
            if s.unknown_all || !s.unknown.is_empty() {
                // Records whose outcome nobody reports: above them is the partition's end, read
                // now that every outcome is decided.
                let partitions: Vec<u32> = if s.unknown_all {
                    (0..count).collect()
                } else {
                    s.unknown.clone()
                };
                if s.ends.len() < count as usize {
                    s.ends.resize(count as usize, 0);
                }
                for p in partitions {
                    let end = self.log_end(topic, p).await?;
                    if let Some(e) = s.ends.get_mut(p as usize) {
                        *e = (*e).max(end);
                    }
                }
            }
            snapshots.push(s);
        }
        let tracker = self
            .trackers
            .entry(topic.to_owned())
            .or_insert_with(|| MarkerTracker::new(self.id.clone(), topic, count, 0));
        for s in &snapshots {
            tracker.observe(s.epoch, s.outstanding, &s.ends);
        }
        let Some(marker) = tracker.due(epoch, count) else {
            return Ok(());
        };
        // History first: a failure then fails the whole step, which the next loop retries (the
        // consumers take history records whenever they come, like the control topic's).
        self.history(topic, epoch).await?;
        self.writer.put_marker(&marker).await?;
        if let Some(t) = self.trackers.get_mut(topic) {
            t.written(&marker);
        }
        topic_ledgers.covered(epoch);
        self.schedule.lock().await.marker_written(topic, epoch);
        debug!(producer = %self.id, topic, epoch, ends = ?marker.ends, "marker written");
        Ok(())
    }

    /// Write `assignment/<topic>/<epoch>` if `epoch` is still `topic`'s assignment.
    async fn history(&self, topic: &str, epoch: u64) -> Result<()> {
        match self.router.assignment(topic).filter(|a| a.epoch() == epoch) {
            Some(a) => self.writer.put_history(&a).await,
            None => Ok(()),
        }
    }

    /// The end (high watermark) of `topic`'s `partition`, from the broker.
    async fn log_end(&self, topic: &str, partition: u32) -> Result<i64> {
        let producer = Arc::clone(&self.producer);
        let topic = topic.to_owned();
        let partition = i32::try_from(partition).unwrap_or(i32::MAX);
        let (_, high) = tokio::task::spawn_blocking(move || {
            producer
                .client()
                .fetch_watermarks(&topic, partition, Duration::from_secs(10))
        })
        .await
        .map_err(|e| Error::Timeout {
            what: format!("reading a partition's end: {e}"),
            millis: 0,
        })??;
        Ok(high)
    }

    /// Announce what is due, then mark the leases closed. `Err` if a marker or a
    /// closed lease could not be written: consumers then wait for this producer until its lease
    /// expires.
    async fn close(&mut self) -> Result<()> {
        self.register_new_topics().await;
        let mut result = self.markers_due().await;
        let mut schedule = self.schedule.lock().await;
        if let Some(renewal) = self.renewal.take() {
            renewal.abort(); // between writes: it waits for the lock or for its next tick
        }
        for lease in schedule.close(now_ms()) {
            if let Err(e) = self.writer.put_lease(&lease).await {
                result = Err(e);
            }
        }
        info!(producer = %self.id, ok = result.is_ok(), "ordering producer closed");
        result
    }
}

/// How often open stamp windows are checked against the groups' progress.
const WINDOW_CHECK: Duration = Duration::from_millis(100);

/// Read the consumer groups' progress from the handoff topic and close the stamp windows whose
/// switch they settled (`dkg_kafka_protocol::window`). Nothing closes before the first complete read:
/// a partial view of the groups could close a window a group still needs. Runs until aborted.
async fn follow_windows(
    router: DkgRouter,
    schedule: Arc<AsyncMutex<LeaseSchedule>>,
    mut reader: HandoffReader,
    mut windows: StampWindows,
) {
    let mut progress = GroupProgress::new();
    let feed = |progress: &mut GroupProgress, r: HandoffRecord| match r.entry {
        Ok(HandoffEntry::Progress(p)) => progress.on_progress(&p),
        Ok(HandoffEntry::Removed(HandoffKey::Progress {
            group,
            topic,
            partition,
        })) => progress.on_removed(&group, &topic, partition),
        _ => {}
    };
    loop {
        match reader
            .catch_up(Duration::from_secs(30), |r| feed(&mut progress, r))
            .await
        {
            Ok(_) => break,
            Err(e) => {
                warn!(error = %e, "reading the consumer groups' progress failed (retrying): \
                    moved keys stay stamped meanwhile");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
    let mut check = tokio::time::interval(WINDOW_CHECK);
    check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            r = reader.next_record() => feed(&mut progress, r),
            _ = check.tick() => {
                for (topic, open) in router.windows_by_topic() {
                    // Held across lease writes (possibly through an outage): try again later.
                    let Ok(announced) = schedule.try_lock().map(|s| s.announced(&topic)) else {
                        continue;
                    };
                    // No lease (a topic only on the control topic, or one whose registration is
                    // still to come): nothing announced, so its windows stay open and keep every
                    // placement since they opened, for when the topic is used.
                    let Some(announced) = announced else {
                        continue;
                    };
                    // Before the partition count is known no group can be judged: one that never
                    // settles stands in for them, so only the bound closes a window.
                    let groups: Vec<GroupSettled> = match router.partition_count(&topic) {
                        Some(count) => progress.settled(&topic, count).collect(),
                        None => vec![GroupSettled { now: 0, best: u64::MAX }],
                    };
                    let now = handoff::mono_now();
                    if let Some((upto, reason)) = windows.due(&topic, &open, announced, &groups, now)
                    {
                        router.close_windows(&topic, upto, reason.label());
                        debug!(topic = %topic, epoch = upto, reason = reason.label(),
                            groups = groups.len(), "stamp window closed");
                    }
                }
            }
        }
    }
}

/// Renew every lease of `schedule` every third of `lease` until aborted (by a clean close, or
/// when the producer is dropped).
async fn renew_leases(
    schedule: Arc<AsyncMutex<LeaseSchedule>>,
    writer: HandoffWriter,
    id: ProducerId,
    lease: Duration,
) {
    let mut renew = tokio::time::interval((lease / 3).max(Duration::from_millis(10)));
    renew.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    renew.tick().await;
    loop {
        renew.tick().await;
        let mut schedule = schedule.lock().await;
        for lease in schedule.renew(now_ms()) {
            if let Err(e) = writer.put_lease(&lease).await {
                warn!(producer = %id, topic = %lease.topic, error = %e,
                    "lease renewal failed: consumers stop waiting for this producer if it expires");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::atomic::AtomicBool;

    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn grace_waits_for_sends_that_entered_before_it() {
        let gate = Arc::new(Gate::default());
        let guard_a = gate.enter();
        let done = Arc::new(AtomicBool::new(false));
        let waiter = {
            let (gate, done) = (Arc::clone(&gate), Arc::clone(&done));
            tokio::spawn(async move {
                gate.grace().await;
                done.store(true, AtomicOrdering::SeqCst);
            })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        // A send entering after the grace began does not hold it up.
        let guard_b = gate.enter();
        assert!(
            !done.load(AtomicOrdering::SeqCst),
            "grace must wait for guard a"
        );
        drop(guard_a);
        tokio::time::timeout(Duration::from_secs(5), waiter)
            .await
            .unwrap()
            .unwrap();
        assert!(done.load(AtomicOrdering::SeqCst));
        // The next grace waits for b (now on the old parity).
        let gate2 = Arc::clone(&gate);
        let second = tokio::spawn(async move { gate2.grace().await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!second.is_finished());
        drop(guard_b);
        tokio::time::timeout(Duration::from_secs(5), second)
            .await
            .unwrap()
            .unwrap();
    }
}
