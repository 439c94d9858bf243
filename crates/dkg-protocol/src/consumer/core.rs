//! The consumer's protocol state machine, without Kafka: records in, decisions out (deliver now,
//! hold, skip), plus the progress to commit and announce, the partitions to pause and
//! resume, and the records released from hold. `DkgConsumer` (the Kafka glue) drives it; the unit tests
//! below drive two simulated members through epoch switches.
//!
//! After every change the core publishes the fast path's view ([`Core::publish`], see
//! [`super::lane`]): records of quiet partitions then bypass it.
//!
//! This file holds the state, ownership, records and knowledge; the child modules the rest of the
//! same `impl`: `commits` (snapshots and progress to commit and announce), `flow` (pause and
//! resume) and `split_keys` (the split view and its transitions).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::Monotonic;

use crate::handoff::{Lease, Marker, MarkerReject, ProducerId, Progress};
use dkg_kafka_core::assignment::Assignment;

use super::history::{History, Homes};
use super::hold::{Held, HoldBuffer, Released, Wait};
use super::lane::{Lane, Lanes};
use super::progress::{CommitMeta, PartitionProgress};
use super::split::{SharedView, SplitChange, SplitView};

mod commits;
mod flow;
mod split_keys;

/// Limits of the state machine.
#[derive(Clone, Debug)]
pub struct CoreConfig {
    /// Held records per partition above which the partition is paused, once no marker awaits
    /// its position (C13: one a marker awaits reads on, over the limit if need be).
    pub max_held: usize,
    /// A paused partition that released nothing for this long is resumed anyway: the bound for
    /// waits that reading cannot end (a dead producer's lease holding moved keys).
    pub stall_timeout: Duration,
    /// Commit metadata size limit (the broker's `offset.metadata.max.bytes`).
    pub max_metadata_bytes: usize,
    /// Epochs of history kept.
    pub history: usize,
    /// A held record stamped with an epoch above every epoch this member knows is released after
    /// waiting this long if the epoch is still unknown (`docs/spec.md` 9.3, C19): an epoch from another control topic, a recreated
    /// one, or a bogus header would otherwise hold its key and its partition's commits forever.
    pub unknown_epoch_wait: Duration,
    /// A lease read at wall-clock time `t` counts as expiring at `t + max_lease` at the latest,
    /// whatever its `expires_at_ms` says (a skewed producer clock or a bad record would otherwise
    /// keep consumers waiting for that producer as long as it claims). Producers' lease
    /// durations must not exceed it.
    pub max_lease: Duration,
}

/// One record taken from Kafka. `msg` makes the owned message, only if the record must wait
/// (a record handed out at once is not copied).
#[derive(Debug)]
pub struct Incoming<'a, F> {
    pub partition: u32,
    pub offset: i64,
    pub key: Option<&'a [u8]>,
    /// The `dkg-epoch` header.
    pub epoch: Option<u64>,
    pub msg: F,
}

/// What [`Core::on_record`] decided.
#[derive(Debug)]
pub enum Outcome {
    /// Hand it to the application now.
    Deliver,
    /// Held until its key's earlier homes are drained, or queued behind released records of its
    /// partition: comes out of [`Core::next_ready`].
    Held,
    /// Processed by a previous owner (skip rule).
    Skipped,
    /// A record of a partition not owned (raced with a revocation): dropped, the next owner
    /// reads it.
    Unowned,
}

/// The record the application holds: processed when it asks for the next one.
#[derive(Clone, Copy, Debug)]
struct InApp {
    partition: u32,
    offset: i64,
    from_hold: bool,
}

/// A commit to make (offset = lowest unprocessed, metadata = passed map) and, after it succeeds,
/// the progress to announce.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub partition: u32,
    pub offset: i64,
    pub metadata: String,
    pub drained: u64,
    pub passed: BTreeMap<ProducerId, u64>,
    /// `Some(n)`: the metadata leaves out its skip window (`n` and `u`, with `n` unprocessed
    /// offsets) because it did not fit [`CoreConfig::max_metadata_bytes`]: a next owner would
    /// re-process the records processed above `offset` (C7; counted in
    /// [`Anomalies::windows_left_out`], for the driver's warning).
    pub window_left_out: Option<usize>,
}

/// An epoch a partition drained: the hooks run before its progress commit.
#[derive(Clone, Debug)]
pub struct Drained {
    pub partition: u32,
    pub prev: Option<Arc<Assignment>>,
    pub next: Arc<Assignment>,
}

#[derive(Debug)]
struct Part<M> {
    hold: HoldBuffer<M>,
    progress: PartitionProgress,
    /// The fast path's view of the partition, and its position (highest fetched offset + 1, or
    /// the offset of a record the application took through the lane).
    lane: Arc<Lane>,
    /// Drained by the current state (not committed yet).
    drained: u64,
    /// Drained as last committed: what release decisions use.
    durable: u64,
    /// The highest drained value this partition has had: committed by a previous owner, or
    /// reached here (a drained value can fall, when a lease this member had not read appears).
    /// A producer stops stamping a key only once the group settled the epoch it last stamped it
    /// in, so an unstamped record's producer's held records of its key are of epochs at most
    /// this, and its own epoch is at least this (see `on_record`).
    high: u64,
    /// Hooks ran for epochs up to this one.
    hooked: u64,
    paused: bool,
    /// Paused, or last released, at.
    quiet_since: Monotonic,
    /// Resumed by the stall timeout: not paused again until the buffer halves.
    overflow: bool,
}

/// The state machine of one consumer (one topic, one group member).
#[derive(Debug)]
pub struct Core<M> {
    topic: Arc<str>,
    group: Arc<str>,
    partitions: u32,
    cfg: CoreConfig,
    history: History,
    leases: BTreeMap<ProducerId, Lease>,
    /// The latest marker of each producer (applied again to partitions assigned
    /// later, and when the producer's lease is read again).
    markers: BTreeMap<ProducerId, Marker>,
    /// Drained of partitions owned by other members, as they announced it.
    remote: HashMap<u32, u64>,
    parts: BTreeMap<u32, Part<M>>,
    /// Minimum drained over all partitions: records of epochs up to it are never held.
    settled: u64,
    ready: VecDeque<(u32, i64, M)>,
    in_app: Option<InApp>,
    /// Hold durations of released records, drained by the caller into the histogram.
    hold_times: Vec<Duration>,
    /// Partitions resumed past the hold limit, drained by the caller into its log.
    stalled: Vec<(u32, usize)>,
    now_ms: u64,
    /// Something other than a fast-path delivery happened since [`Core::has_progress_due`]
    /// last found nothing due (a drained value may have changed).
    dirty: bool,
    /// Published: nothing for the consuming side to ask before fetching (see [`Lanes`]).
    idle: Arc<AtomicBool>,
    /// The split keys of the history (rebuilt when it changes) and where the lanes read it.
    split_view: Arc<SplitView>,
    shared_view: Arc<SharedView>,
    /// Split transitions were reported for epochs up to this one.
    split_seen: u64,
    split_changes: Vec<SplitChange>,
    /// Counted since the last [`Core::take_anomalies`].
    anomalies: Anomalies,
}

/// Input the protocol could not trust, handled by a documented bound and counted (the glue's
/// metrics): `docs/spec.md` 9.3, C2 (leases) and C19 (unknown epochs); and commits that had to
/// leave out their skip window (C7).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Anomalies {
    /// Records released because their epoch stayed unknown for
    /// [`CoreConfig::unknown_epoch_wait`].
    pub unknown_epoch_records: u64,
    /// Leases whose expiry was clamped to [`CoreConfig::max_lease`] after the time they were read.
    pub clamped_leases: u64,
    /// Marker records rejected, by reason (index: [`MarkerReject::index`]).
    pub rejected_markers: [u64; MarkerReject::ALL.len()],
    /// Commit snapshots ([`Core::snapshot`]) whose metadata left out the skip window (`n`, `u`)
    /// because it did not fit [`CoreConfig::max_metadata_bytes`] (C7): counted once per snapshot
    /// built, and every snapshot the driver builds goes into one commit.
    pub windows_left_out: u64,
}

/// Where `part`'s markers stand: every offset below it was fetched and is processed or tracked
/// (the application's record, `in_app`, is neither yet). `fetching`: the offset of a record being
/// fetched, not tracked yet.
fn marker_position<M>(part: &Part<M>, in_app: Option<i64>, fetching: Option<i64>) -> Option<i64> {
    let position = fetching.or_else(|| part.lane.position());
    match (position, in_app) {
        (Some(p), Some(a)) => Some(p.min(a)),
        (p, _) => p,
    }
}

/// Offer `marker` to `part` (see [`PartitionProgress::on_marker`]).
/// The least time a lease stays after its expiry before [`Core::collectable_leases`] offers it.
const LEASE_GC_MIN_MS: u64 = 60_000;

fn apply_marker<M>(part: &mut Part<M>, partition: u32, marker: &Marker, in_app: Option<i64>) {
    let Some(&end) = marker.ends.get(partition as usize) else {
        return;
    };
    let position = marker_position(part, in_app, None);
    let hold = &part.hold;
    part.progress
        .on_marker(&marker.producer, marker.epoch, end, position, |o| {
            hold.min_epoch_below(o)
        });
}

impl<M> Core<M> {
    pub fn new(topic: &str, group: &str, partitions: u32, cfg: CoreConfig) -> Self {
        let history = History::new(partitions, cfg.history);
        Self {
            topic: Arc::from(topic),
            group: Arc::from(group),
            partitions,
            cfg,
            history,
            leases: BTreeMap::new(),
            markers: BTreeMap::new(),
            remote: HashMap::new(),
            parts: BTreeMap::new(),
            settled: 0,
            ready: VecDeque::new(),
            in_app: None,
            hold_times: Vec::new(),
            stalled: Vec::new(),
            now_ms: 0,
            dirty: true,
            idle: Arc::new(AtomicBool::new(false)),
            split_view: Arc::new(SplitView::default()),
            shared_view: Arc::new(SharedView::default()),
            split_seen: 0,
            split_changes: Vec::new(),
            anomalies: Anomalies::default(),
        }
    }

    /// The consuming side's view of the fast path (one per consumer).
    pub fn lanes(&self) -> Lanes {
        Lanes::new(Arc::clone(&self.idle), Arc::clone(&self.shared_view))
    }

    /// The lane of an owned partition.
    pub fn lane(&self, partition: u32) -> Option<&Arc<Lane>> {
        self.parts.get(&partition).map(|p| &p.lane)
    }

    /// Publish the fast path's view of the current state: every owned partition's gate and the
    /// idle flag. Must run after every change before a record is fetched (the consumer's lock
    /// guard calls it on unlock). A gate opens only where [`Core::on_record`] would deliver any
    /// data record of the partition at once (stamped ones up to the settled epoch) and change
    /// nothing but the position.
    pub fn publish(&mut self) {
        let nothing_ready = self.ready.is_empty();
        let gate = self.settled.saturating_add(1);
        let splits = !self.split_view.is_empty();
        for (&p, part) in &self.parts {
            let quiet = nothing_ready
                && part.hold.held() == 0
                && part.progress.start().is_some()
                && !part.progress.has_skip_rules()
                && !part.progress.has_awaiting()
                && !(splits && self.split_view.in_transition(p, part.drained, self.settled));
            part.lane.set_drained(part.drained);
            part.lane.set_gate(if quiet { gate } else { 0 });
        }
        let idle = nothing_ready && !self.has_progress_due();
        self.idle.store(idle, Ordering::Release);
    }

    pub fn topic(&self) -> &str {
        &self.topic
    }

    pub fn partitions(&self) -> u32 {
        self.partitions
    }

    /// The topic's partition count changed.
    pub fn set_partitions(&mut self, partitions: u32, now: Monotonic) {
        if partitions != self.partitions && partitions > 0 {
            self.partitions = partitions;
            self.history.set_partitions(partitions);
            self.split_view_changed();
            self.refresh(now);
        }
    }

    pub fn owned(&self) -> Vec<u32> {
        self.parts.keys().copied().collect()
    }

    pub fn owns(&self, partition: u32) -> bool {
        self.parts.contains_key(&partition)
    }

    pub fn settled(&self) -> u64 {
        self.settled
    }

    pub fn max_epoch(&self) -> u64 {
        self.history.max_epoch()
    }

    pub fn latest(&self) -> Option<&Arc<Assignment>> {
        self.history.get(self.history.max_epoch())
    }

    pub fn leases(&self) -> impl Iterator<Item = &Lease> {
        self.leases.values()
    }

    /// Leases to tombstone, each with its producer's marker (spec 9.1): expired for a while
    /// (`max(3 x lease_ms, 60 s)` past `expires_at_ms`) and, if closed, its `closed_at_epoch`
    /// settled in this group (every partition has drained it, so no member of the group waits
    /// for its markers any more; a closed lease stays awaited up to that epoch until it is
    /// tombstoned, C2).
    pub fn collectable_leases(&self, now_ms: u64) -> impl Iterator<Item = &Lease> {
        let settled = self.settled;
        self.leases.values().filter(move |l| {
            let grace = l.lease_ms.saturating_mul(3).max(LEASE_GC_MIN_MS);
            now_ms > l.expires_at_ms.saturating_add(grace)
                && l.closed_at_epoch.is_none_or(|c| c <= settled)
        })
    }

    pub fn history_gc_floor(&self) -> u64 {
        self.history.collectable_below()
    }

    /// Records held per owned partition.
    pub fn held_counts(&self) -> impl Iterator<Item = (u32, usize)> + '_ {
        self.parts.iter().map(|(&p, s)| (p, s.hold.held()))
    }

    /// Lowest unprocessed offset per owned partition (`None` before the first record).
    pub fn positions(&self) -> impl Iterator<Item = (u32, Option<i64>)> + '_ {
        self.parts.keys().map(|&p| (p, self.lowest_unprocessed(p)))
    }

    /// The configuration this core runs with.
    pub fn config(&self) -> &CoreConfig {
        &self.cfg
    }

    /// Partitions (with their held count) that [`Core::flow`] resumed past the hold limit since
    /// the last call, for the driver's log.
    pub fn take_stalled(&mut self) -> Vec<(u32, usize)> {
        std::mem::take(&mut self.stalled)
    }

    /// What was counted since the last call (for the counters).
    pub fn take_anomalies(&mut self) -> Anomalies {
        std::mem::take(&mut self.anomalies)
    }

    /// Hold times of records released since the last call (for the histogram).
    pub fn take_hold_times(&mut self) -> Vec<Duration> {
        std::mem::take(&mut self.hold_times)
    }

    /// Drained as seen by this member: its own committed value for owned partitions, the last
    /// announcement for the others (0 = nothing known).
    fn drained_of(&self, partition: u32) -> u64 {
        match self.parts.get(&partition) {
            Some(p) => p.durable,
            None => self.remote.get(&partition).copied().unwrap_or(0),
        }
    }

    /// The offset of the application's record if it is of `partition`.
    fn in_app_on(&self, partition: u32) -> Option<i64> {
        self.in_app
            .filter(|a| a.partition == partition)
            .map(|a| a.offset)
    }

    fn compute_settled(&self) -> u64 {
        (0..self.partitions)
            .map(|p| self.drained_of(p))
            .min()
            .unwrap_or(0)
    }

    // ---------------------------------------------------------------- ownership

    /// A partition was assigned, with its committed offset and metadata (if any).
    pub fn assign(
        &mut self,
        partition: u32,
        committed: Option<i64>,
        meta: Option<&CommitMeta>,
        now: Monotonic,
    ) {
        let progress = PartitionProgress::from_meta(meta, committed);
        let drained = progress.drained(self.leases.values(), self.now_ms, self.history.max_epoch());
        let high = meta.map_or(0, |m| m.drained).max(drained);
        self.parts.insert(
            partition,
            Part {
                hold: HoldBuffer::default(),
                progress,
                lane: Arc::new(Lane::new()),
                drained,
                // The passed map is durable (committed) and the rest is the lease view: no
                // processing is claimed that a crash could undo.
                durable: drained,
                high,
                hooked: drained,
                paused: false,
                quiet_since: now,
                overflow: false,
            },
        );
        if let Some(part) = self.parts.get_mut(&partition) {
            for m in self.markers.values() {
                apply_marker(part, partition, m, None);
            }
        }
        self.remote.remove(&partition);
        self.refresh(now);
    }

    /// A partition was revoked (after its final commit, if any): its held and released records are
    /// dropped (they are above the committed offset: the next owner reads them).
    pub fn revoke(&mut self, partition: u32, now: Monotonic) {
        if let Some(part) = self.parts.remove(&partition) {
            // For good: the consuming side may still hold this lane; a re-assignment gets a new one.
            part.lane.set_gate(0);
            self.remote.insert(partition, part.durable);
        }
        self.ready.retain(|(p, _, _)| *p != partition);
        if self.in_app.is_some_and(|a| a.partition == partition) {
            self.in_app = None;
        }
        self.refresh(now);
    }

    // ---------------------------------------------------------------- records

    /// The record the application holds is processed (it asked for the next one, committed or
    /// closed).
    pub fn processed(&mut self) {
        let Some(app) = self.in_app.take() else {
            return;
        };
        let now_ms = self.now_ms;
        let max_epoch = self.history.max_epoch();
        let leases = &self.leases;
        let Some(part) = self.parts.get_mut(&app.partition) else {
            return;
        };
        if app.from_hold {
            part.hold.processed(app.offset);
            if part.progress.has_pending() {
                let hold = &part.hold;
                if part.progress.recheck(|o| hold.min_epoch_below(o)) {
                    part.drained = part.progress.drained(leases.values(), now_ms, max_epoch);
                    self.dirty = true;
                }
            }
        }
        if part.progress.has_awaiting() {
            // The application's record was what kept the position below a marker's end.
            let position = marker_position(part, None, None);
            let hold = &part.hold;
            if part.progress.arrived(position, |o| hold.min_epoch_below(o)) {
                part.drained = part.progress.drained(leases.values(), now_ms, max_epoch);
                self.dirty = true;
            }
        }
    }

    /// Bookkeeping for any record fetched from `partition`: position, start offset, stale skip
    /// rules. `None` if the partition is not owned.
    fn fetched(&mut self, partition: u32, offset: i64) -> Option<&mut Part<M>> {
        let now_ms = self.now_ms;
        let max_epoch = self.history.max_epoch();
        let in_app = self.in_app_on(partition);
        let part = self.parts.get_mut(&partition)?;
        if part.progress.has_awaiting() {
            // Everything below this record was fetched (the record itself is not tracked yet).
            let position = marker_position(part, in_app, Some(offset));
            let hold = &part.hold;
            if part.progress.arrived(position, |o| hold.min_epoch_below(o)) {
                part.drained = part
                    .progress
                    .drained(self.leases.values(), now_ms, max_epoch);
                self.dirty = true;
            }
        }
        part.lane.fetched(offset);
        part.progress.set_start(offset);
        part.progress.forget_skips_below(offset);
        Some(part)
    }

    /// Test shorthand for one partition of a marker: `offset` on `partition` is fetched (an
    /// entry the application never sees, as a transaction marker) and `producer`'s marker of
    /// `epoch` ends right after it, reached now. [`Core::on_marker`] sets every partition's end
    /// at once; this lets a test place each end at its own moment.
    #[cfg(test)]
    fn end_reached(&mut self, partition: u32, offset: i64, producer: ProducerId, epoch: u64) {
        if self.fetched(partition, offset).is_none() {
            return;
        }
        let now_ms = self.now_ms;
        let max_epoch = self.history.max_epoch();
        let leases = &self.leases;
        let Some(part) = self.parts.get_mut(&partition) else {
            return;
        };
        let hold = &part.hold;
        part.progress
            .end_reached(&producer, epoch, offset + 1, |o| hold.min_epoch_below(o));
        part.drained = part.progress.drained(leases.values(), now_ms, max_epoch);
        self.dirty = true;
    }

    /// Decide about one data record taken from Kafka. `now` is asked only when the record is
    /// held.
    pub fn on_record(
        &mut self,
        rec: Incoming<'_, impl FnOnce() -> M>,
        now: impl FnOnce() -> Monotonic,
    ) -> Outcome {
        let Incoming {
            partition,
            offset,
            key,
            epoch,
            msg,
        } = rec;
        let known = self.history.max_epoch();
        let Some(part) = self.fetched(partition, offset) else {
            return Outcome::Unowned;
        };
        if part.progress.skip(offset, epoch) {
            return Outcome::Skipped;
        }
        let Some(key) = key else {
            return self.deliver(partition, offset, 0, msg);
        };
        // Held records of an epoch never learnt (C19) are left out: they are
        // no producer's predecessor of a known epoch's record, and would lift this one above the
        // markers it must block.
        let held = part.hold.key_epochs(key, known);
        let drained = part.drained;
        part.high = part.high.max(drained);
        let floor = part.high.min(known);
        let held_to_floor = match epoch {
            None => part.hold.key_epochs(key, floor),
            Some(_) => None,
        };
        // A split record carries no epoch: the newest epoch it can be of that splits its key
        // over this partition (see `split`), if any.
        let split = match epoch {
            None if !self.split_view.is_empty() => self
                .split_view
                .split_epoch(key, partition, drained)
                .map(|(e, _)| e),
            _ => None,
        };
        let (epoch, wait_epoch) = match (epoch, split, held) {
            (Some(e), _, _) => (e, Some(e)),
            // Unstamped and whole: its producer's records of the key need no wait for other
            // partitions (not moved inside an open stamp window). Its epoch is at least `floor`,
            // the highest drained value this partition has had (everything an awaited producer
            // routed below that lies below its announcement, which this partition passed). Its
            // producer's earlier records of the key that may still be held have epochs at most
            // `floor` (an ordering producer stops
            // stamping a key only once the group settled the epoch it last stamped it in,
            // `docs/spec.md` 9.2.2; a producer of the previous release, stamping a key for its
            // whole epoch, only under its condition that each switch drains before the next):
            // it queues behind the held records of the key up to that epoch, counted as a record
            // of `floor`, never above its own epoch. Held records of higher epochs are then
            // other producers', ahead of its own: it need not wait for them, and must not count
            // as of their epoch (it would let this partition drain an epoch it belongs below).
            (None, None, _) if held_to_floor.is_none() => {
                return self.deliver(partition, offset, 0, msg);
            }
            (None, None, _) => (floor, None),
            // Split in epoch `e`: it waits for the key's whole homes of earlier epochs (the
            // transition whole -> split) to drain `e`. If it may as well be a record of the epoch
            // before, which placed its key here too, it counts as one of that epoch: it then
            // keeps the partition from draining `e` (as that record must), and waiting for a
            // drain one above its own epoch makes no cycle (what waits for this partition to
            // drain `e` counts as of `e` or later, and keeps no partition from draining `e`).
            (None, Some(e), held) => {
                let older = e > drained
                    && self
                        .history
                        .place(key, drained)
                        .is_some_and(|p| p.holds(partition));
                let own = if older { drained } else { e };
                (held.map_or(own, |(_, max)| max.max(own)), Some(e))
            }
        };
        // Earlier held records of the key with an epoch at most this one may be its producer's.
        let queued = held.is_some_and(|(min, _)| min <= epoch);
        if !queued && epoch <= self.settled {
            return self.deliver(partition, offset, epoch, msg);
        }
        let wait = match wait_epoch {
            Some(e) => self.wait_for(key, e, partition),
            None => Wait::Nothing,
        };
        let target = wait_epoch.unwrap_or(epoch);
        if !queued && self.can_go(&wait, target) {
            return self.deliver(partition, offset, epoch, msg);
        }
        let Some(part) = self.parts.get_mut(&partition) else {
            return Outcome::Unowned;
        };
        let since = now();
        if part.hold.held() == 0 {
            part.quiet_since = since;
        }
        part.hold.hold(
            key,
            Held {
                offset,
                epoch,
                wait,
                target,
                since,
                msg: msg(),
            },
        );
        Outcome::Held
    }

    /// Hand a record that may go to the application, unless released records of its partition
    /// still wait in the ready queue: then it queues behind them (a key's released records must
    /// not be overtaken by its next one).
    fn deliver(
        &mut self,
        partition: u32,
        offset: i64,
        epoch: u64,
        msg: impl FnOnce() -> M,
    ) -> Outcome {
        if !self.ready.is_empty()
            && self.ready.iter().any(|(p, _, _)| *p == partition)
            && let Some(part) = self.parts.get_mut(&partition)
        {
            part.hold.queued(offset, epoch);
            self.ready.push_back((partition, offset, msg()));
            return Outcome::Held;
        }
        self.in_app = Some(InApp {
            partition,
            offset,
            from_hold: false,
        });
        Outcome::Deliver
    }

    /// Which partitions must have drained `epoch` before a record of `key` with that epoch on
    /// `partition` may be processed: the key's homes in the epochs not yet settled everywhere
    /// (every part of a split epoch included). A record of a key split in `epoch` waits only for
    /// its whole homes: order among a split key's records is not kept.
    fn wait_for(&self, key: &[u8], epoch: u64, partition: u32) -> Wait {
        let homes = if self.history.split_parts(key, epoch).is_some() {
            self.history.whole_homes(key, self.settled, epoch)
        } else {
            self.history.homes(key, self.settled, epoch)
        };
        match homes {
            Homes::Known(homes) => {
                let others: Vec<u32> = homes.into_iter().filter(|&p| p != partition).collect();
                if others.is_empty() {
                    Wait::Nothing
                } else {
                    Wait::Partitions(others)
                }
            }
            Homes::Unknown => Wait::AllBut(partition),
        }
    }

    fn can_go(&self, wait: &Wait, epoch: u64) -> bool {
        match wait {
            Wait::Nothing => true,
            Wait::Partitions(ps) => ps.iter().all(|&p| self.drained_of(p) >= epoch),
            Wait::AllBut(own) => (0..self.partitions)
                .filter(|p| p != own)
                .all(|p| self.drained_of(p) >= epoch),
        }
    }

    /// The next released record, in release order; it becomes the application's record.
    pub fn next_ready(&mut self) -> Option<M> {
        let (partition, offset, msg) = self.ready.pop_front()?;
        self.in_app = Some(InApp {
            partition,
            offset,
            from_hold: true,
        });
        Some(msg)
    }

    /// Release every held record whose wait is over.
    fn release(&mut self, now: Monotonic) {
        if self.parts.values().all(|p| p.hold.held() == 0) {
            return;
        }
        let drained: Vec<u64> = (0..self.partitions).map(|p| self.drained_of(p)).collect();
        let max_epoch = self.history.max_epoch();
        let unknown_wait = self.cfg.unknown_epoch_wait;
        // No partition drains past the newest known epoch, so a record waiting for a higher one
        // waits until that epoch is learnt, or the bound runs out.
        let unknown_for_long =
            |h: &Held<M>| h.target > max_epoch && now.saturating_sub(h.since) >= unknown_wait;
        let drained_enough = |h: &Held<M>| match &h.wait {
            Wait::Nothing => true,
            Wait::Partitions(ps) => ps
                .iter()
                .all(|&p| drained.get(p as usize).is_some_and(|&d| d >= h.target)),
            Wait::AllBut(own) => drained
                .iter()
                .enumerate()
                .all(|(p, &d)| p == *own as usize || d >= h.target),
        };
        let unknown = &mut self.anomalies.unknown_epoch_records;
        for (&partition, part) in &mut self.parts {
            if part.hold.held() == 0 {
                continue;
            }
            let ready = &mut self.ready;
            let times = &mut self.hold_times;
            // Called only for a record that is released when it returns true (see `release`).
            let can_go = |h: &Held<M>| {
                drained_enough(h)
                    || (unknown_for_long(h) && {
                        *unknown += 1;
                        true
                    })
            };
            let n = part.hold.release(now, can_go, |r: Released<M>| {
                times.push(r.held_for);
                ready.push_back((partition, r.offset, r.msg));
            });
            if n > 0 {
                part.quiet_since = now;
            }
        }
    }

    // ---------------------------------------------------------------- knowledge

    /// Recompute drained values, the settled epoch and releases after any change of knowledge.
    fn refresh(&mut self, now: Monotonic) {
        self.dirty = true;
        let max_epoch = self.history.max_epoch();
        let (leases, now_ms, app) = (&self.leases, self.now_ms, self.in_app);
        for (&partition, part) in &mut self.parts {
            if part.progress.has_awaiting() {
                part.progress
                    .retain_awaiting(|y| leases.get(y).is_some_and(|l| l.is_awaitable(now_ms)));
                let in_app = app.filter(|a| a.partition == partition).map(|a| a.offset);
                let position = marker_position(part, in_app, None);
                let hold = &part.hold;
                part.progress.arrived(position, |o| hold.min_epoch_below(o));
            }
            part.drained = part.progress.drained(leases.values(), now_ms, max_epoch);
        }
        self.settled = self.compute_settled();
        self.release(now);
    }

    /// A lease was written (or re-read), read at the core's wall clock (see
    /// [`CoreConfig::max_lease`]).
    pub fn on_lease(&mut self, mut lease: Lease, now: Monotonic) {
        if *lease.topic != *self.topic {
            return;
        }
        let max_lease = u64::try_from(self.cfg.max_lease.as_millis()).unwrap_or(u64::MAX);
        let latest = self.now_ms.saturating_add(max_lease);
        if lease.expires_at_ms > latest {
            lease.expires_at_ms = latest;
            self.anomalies.clamped_leases += 1;
        }
        let app = self.in_app;
        let marker = self.markers.get(&lease.producer);
        for (&partition, part) in &mut self.parts {
            if let Some(m) = marker {
                let in_app = app.filter(|a| a.partition == partition).map(|a| a.offset);
                apply_marker(part, partition, m, in_app);
            }
        }
        self.leases.insert(lease.producer.clone(), lease);
        self.refresh(now);
    }

    /// A producer's marker (spec 9.2, C4 and C5 of 9.3): on every owned partition `p` it is
    /// reached once the position is at `ends[p]`, then passed as records below it are processed.
    pub fn on_marker(&mut self, marker: Marker, now: Monotonic) {
        if *marker.topic != *self.topic {
            return;
        }
        if marker.ends.len() != self.partitions as usize {
            self.on_marker_rejected(MarkerReject::PartitionCount);
            return;
        }
        if self
            .markers
            .get(&marker.producer)
            .is_some_and(|m| m.epoch >= marker.epoch)
        {
            return; // read again, or older than one already known
        }
        let app = self.in_app;
        for (&partition, part) in &mut self.parts {
            let in_app = app.filter(|a| a.partition == partition).map(|a| a.offset);
            apply_marker(part, partition, &marker, in_app);
        }
        self.markers.insert(marker.producer.clone(), marker);
        self.refresh(now);
    }

    /// A marker record of this topic did not decode (or named another partition count): counted.
    pub fn on_marker_rejected(&mut self, reason: MarkerReject) {
        self.anomalies.rejected_markers[reason.index()] += 1;
    }

    /// A lease was tombstoned.
    pub fn on_lease_removed(&mut self, producer: &ProducerId, now: Monotonic) {
        self.markers.remove(producer);
        if self.leases.remove(producer).is_some() {
            self.refresh(now);
        }
    }

    /// An epoch's assignment (control topic or history).
    pub fn on_assignment(&mut self, a: Arc<Assignment>, now: Monotonic) {
        if *a.topic() != *self.topic {
            return;
        }
        if self.history.insert(a) {
            self.split_view_changed();
            self.split_transitions();
            self.refresh(now);
        }
    }

    /// Another member's progress announcement (own partitions and other groups are ignored).
    pub fn on_progress(&mut self, p: &Progress, now: Monotonic) {
        if *p.topic != *self.topic
            || *p.group != *self.group
            || self.parts.contains_key(&p.partition)
        {
            return;
        }
        // Replace, do not max: a group whose offsets were reset announces lower values.
        self.remote.insert(p.partition, p.drained);
        let settled = self.compute_settled();
        if settled != self.settled {
            self.settled = settled;
        }
        self.release(now);
    }

    /// Time passes: leases expire.
    pub fn tick(&mut self, now: Monotonic, now_ms: u64) {
        self.now_ms = now_ms;
        self.refresh(now);
    }

    /// Set the wall clock used for lease expiry without re-evaluating.
    pub fn set_now_ms(&mut self, now_ms: u64) {
        self.now_ms = now_ms;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use dkg_kafka_core::fixtures;

    const P: u32 = 4;

    fn cfg() -> CoreConfig {
        CoreConfig {
            max_held: 4,
            stall_timeout: Duration::from_secs(5),
            max_metadata_bytes: 4096,
            history: 8,
            unknown_epoch_wait: Duration::from_secs(3),
            max_lease: Duration::from_secs(60),
        }
    }

    /// Every bucket on partition 0; `hot` on `hot_on`.
    fn assignment(epoch: u64, hot_on: u32) -> Arc<Assignment> {
        Arc::new(fixtures::with_hot_key(P, epoch, vec![0; 4], hot_on))
    }

    fn y() -> ProducerId {
        ProducerId::parse(&"a".repeat(32)).unwrap()
    }

    fn lease(first: u64) -> Lease {
        Lease {
            producer: y(),
            topic: "t".into(),
            first_epoch: first,
            lease_ms: 10_000,
            expires_at_ms: 10_000,
            closed_at_epoch: None,
        }
    }

    type Msg = Box<dyn FnOnce() -> i64>;

    fn rec(partition: u32, offset: i64, key: &'static [u8], epoch: u64) -> Incoming<'static, Msg> {
        Incoming {
            partition,
            offset,
            key: Some(key),
            epoch: Some(epoch),
            msg: Box::new(move || offset),
        }
    }

    /// The test producer's marker of `epoch` ends right after `offset` on `partition`, reached
    /// after the app's previous record was processed ([`Core::end_reached`]).
    fn end(c: &mut Core<i64>, partition: u32, offset: i64, epoch: u64) {
        c.processed();
        c.end_reached(partition, offset, y(), epoch);
    }

    /// A member owning `parts`, knowing epoch 1 (hot on 1) and one live producer from epoch 0.
    fn member(parts: &[u32]) -> Core<i64> {
        member_with(parts, cfg())
    }

    fn member_with(parts: &[u32], cfg: CoreConfig) -> Core<i64> {
        let now = Monotonic::ZERO;
        let mut c = Core::new("t", "g", P, cfg);
        c.tick(now, 1);
        c.on_assignment(assignment(1, 1), now);
        c.on_lease(lease(0), now);
        for &p in parts {
            c.assign(p, None, None, now);
        }
        c
    }

    fn deliver(c: &mut Core<i64>, r: Incoming<'static, Msg>) -> Option<i64> {
        c.processed();
        let offset = r.offset;
        match c.on_record(r, || Monotonic::ZERO) {
            Outcome::Deliver => Some(offset),
            _ => None,
        }
    }

    /// Commit everything due and return the progress records to "announce".
    fn commit_due(c: &mut Core<i64>) -> Vec<Progress> {
        let mut out = Vec::new();
        for p in c.progress_due() {
            let s = c.snapshot(p).unwrap().unwrap();
            c.committed(p, s.drained, Monotonic::ZERO);
            out.push(c.progress_record(&s));
        }
        out
    }

    fn announce(to: &mut Core<i64>, progress: &[Progress]) {
        for p in progress {
            to.on_progress(p, Monotonic::ZERO);
        }
    }

    #[test]
    fn a_moved_key_waits_for_its_old_partition_to_drain_across_members() {
        // Member A owns partition 1 (hot's home at epoch 1), member B owns 2 (hot's home at 2).
        let mut a = member(&[0, 1]);
        let mut b = member(&[2, 3]);
        // Everyone passes the marker of 1 on every partition.
        for (m, parts) in [(&mut a, [0, 1]), (&mut b, [2, 3])] {
            for p in parts {
                end(m, p, 0, 1);
            }
        }
        let pa = commit_due(&mut a);
        let pb = commit_due(&mut b);
        announce(&mut a, &pb);
        announce(&mut b, &pa);
        assert_eq!((a.settled(), b.settled()), (1, 1));

        // Epoch 1 records of hot on partition 1 flow.
        assert_eq!(deliver(&mut a, rec(1, 1, b"hot", 1)), Some(1));
        // Epoch 2 moves hot to partition 2.
        let now = Monotonic::ZERO;
        a.on_assignment(assignment(2, 2), now);
        b.on_assignment(assignment(2, 2), now);
        // B sees hot's epoch-2 record before A drained partition 1: held.
        b.processed();
        assert!(matches!(
            b.on_record(rec(2, 1, b"hot", 2), || Monotonic::ZERO),
            Outcome::Held
        ));
        // An unstamped hot record while partition 2 has drained only 1 is of epoch 1 or later,
        // and its producer's held records of hot would be of epochs at most 1 (a producer stops
        // stamping a key only once the group settled the epoch it last stamped it in): the held
        // epoch-2 record is another producer's, so it does not wait.
        b.processed();
        let unstamped = |offset: i64| Incoming {
            epoch: None,
            ..rec(2, offset, b"hot", 0)
        };
        assert!(matches!(
            b.on_record(unstamped(2), || Monotonic::ZERO),
            Outcome::Deliver
        ));
        // A key whose epoch-1 home is partition 0 waits for partition 0.
        assert_eq!(deliver(&mut b, rec(2, 3, b"cold", 2)), None);
        // Partition 2 drains 2 (the held records are of epoch 2, not below it); now an
        // unstamped hot record may be the held one's producer's: it queues behind it.
        end(&mut b, 2, 4, 2);
        assert_eq!(drained(&b, 2), 2);
        b.processed();
        assert!(matches!(
            b.on_record(unstamped(5), || Monotonic::ZERO),
            Outcome::Held
        ));
        assert_eq!(b.held_counts().find(|(p, _)| *p == 2).unwrap().1, 3);

        // A still has an epoch-1 hot record on 1 (offset 2) when the marker of 2 is reached at 3.
        assert_eq!(deliver(&mut a, rec(1, 2, b"hot", 1)), Some(2));
        // The app has not asked for the next record: marker processing happens after
        // `processed`, as in recv.
        end(&mut a, 1, 3, 2);
        end(&mut a, 0, 5, 2);
        let pa = commit_due(&mut a);
        assert_eq!(pa.len(), 2);
        assert!(pa.iter().all(|p| p.drained == 2));
        announce(&mut b, &pa);
        // Hot's records on 2 are released in order; cold (waiting for 0) too.
        let mut released: Vec<i64> = std::iter::from_fn(|| b.next_ready()).collect();
        let pos = |o: i64| released.iter().position(|&x| x == o).unwrap();
        assert!(pos(1) < pos(5), "per-key FIFO: {released:?}");
        released.sort_unstable();
        assert_eq!(released, vec![1, 3, 5]);
        assert_eq!(b.take_hold_times().len(), 3);
        let hooks = a.take_drained_epochs(1);
        assert!(hooks.is_empty(), "committed() already marks hooked");
    }

    #[test]
    fn held_records_below_a_marker_end_block_it_only_for_later_epochs() {
        // Partition 2 holds hot's epoch-2 record; a marker of 2 ending behind it passes (no
        // deadlock), a marker of 3 ending behind it waits until the record is processed.
        let mut b = member(&[2]);
        b.on_assignment(assignment(2, 2), Monotonic::ZERO);
        b.processed();
        assert!(matches!(
            b.on_record(rec(2, 10, b"hot", 2), || Monotonic::ZERO),
            Outcome::Held
        ));
        end(&mut b, 2, 11, 2);
        assert_eq!(b.progress_due(), vec![2]);
        let s = b.snapshot(2).unwrap().unwrap();
        assert_eq!(
            (s.offset, s.drained),
            (10, 2),
            "the held record keeps the commit below it"
        );
        b.on_assignment(assignment(3, 2), Monotonic::ZERO);
        end(&mut b, 2, 12, 3);
        assert_eq!(b.snapshot(2).unwrap().unwrap().drained, 2);
        // Partitions 0, 1, 3 drained epoch 2 (announced): the record goes; processing it passes
        // the marker of 3.
        announce(&mut b, &[progress(0, 2), progress(1, 2), progress(3, 2)]);
        assert_eq!(b.next_ready(), Some(10));
        b.processed();
        assert_eq!(b.snapshot(2).unwrap().unwrap().drained, 3);
        assert_eq!(b.snapshot(2).unwrap().unwrap().offset, 13);
    }

    fn progress(partition: u32, drained: u64) -> Progress {
        crate::window::tests::progress("g", partition, drained)
    }

    #[test]
    fn restart_skips_what_the_previous_owner_processed_below_its_markers() {
        // Epoch 2: hot on 2; epoch 3: hot back on 1. Partition 2 has drained 2 only, so hot's
        // epoch-3 records on 1 wait for it; the others drained 3.
        let setup = |parts: &[u32]| {
            let mut m = member(parts);
            m.on_assignment(assignment(2, 2), Monotonic::ZERO);
            m.on_assignment(assignment(3, 1), Monotonic::ZERO);
            announce(&mut m, &[progress(0, 3), progress(2, 2), progress(3, 3)]);
            m
        };
        let mut a = setup(&[1]);
        a.processed();
        assert!(matches!(
            a.on_record(rec(1, 5, b"hot", 3), || Monotonic::ZERO),
            Outcome::Held
        ));
        assert!(deliver(&mut a, rec(1, 6, b"x", 2)).is_some());
        end(&mut a, 1, 7, 3);
        let s = a.snapshot(1).unwrap().unwrap();
        assert_eq!((s.offset, s.drained), (5, 3));
        // A crashes; B takes partition 1 from the committed offset and metadata.
        let meta = CommitMeta::parse(&s.metadata).unwrap().unwrap();
        let mut b = setup(&[]);
        b.assign(1, Some(s.offset), Some(&meta), Monotonic::ZERO);
        assert!(b.snapshot(1).is_none());
        assert!(matches!(
            b.on_record(rec(1, 5, b"hot", 3), || Monotonic::ZERO),
            Outcome::Held
        ));
        b.processed();
        assert!(
            matches!(
                b.on_record(rec(1, 6, b"x", 2), || Monotonic::ZERO),
                Outcome::Skipped
            ),
            "epoch 2 below the marker of 3 was processed by A"
        );
        end(&mut b, 1, 7, 3);
        assert_eq!(b.snapshot(1).unwrap().unwrap().drained, 3);
        // Partition 2 drains 3: hot goes.
        announce(&mut b, &[progress(2, 3)]);
        assert_eq!(b.next_ready(), Some(5));
    }

    #[test]
    fn a_record_of_an_unknown_epoch_waits_a_bounded_time() {
        // The member knows epoch 1 only; a record stamped 99 (another control topic, a recreated
        // one, a bogus header) can never be matched by a drain: before the bound it waited forever.
        let t0 = Monotonic::ZERO;
        let mut c = member(&[2]);
        // Everything else is drained: the hold is only the unknown epoch's.
        announce(&mut c, &[progress(0, 1), progress(1, 1), progress(3, 1)]);
        c.processed();
        assert!(matches!(
            c.on_record(rec(2, 10, b"hot", 99), || t0),
            Outcome::Held
        ));
        // The key's unstamped records do not queue behind it (counted as of epoch 1 at most, they
        // cannot follow an epoch-99 record of their producer); other keys of the partition pass.
        let unstamped = Incoming {
            epoch: None,
            ..rec(2, 11, b"hot", 0)
        };
        assert_eq!(deliver(&mut c, unstamped), Some(11));
        assert_eq!(deliver(&mut c, rec(2, 12, b"cold", 1)), Some(12));
        c.processed();
        c.tick(Duration::from_secs(2), 2);
        assert!(c.next_ready().is_none(), "still within the bound");
        assert_eq!(c.take_anomalies().unknown_epoch_records, 0);
        c.tick(Duration::from_secs(3), 3);
        assert_eq!(c.next_ready(), Some(10));
        c.processed();
        assert_eq!(c.take_anomalies().unknown_epoch_records, 1);
        // Nothing left unprocessed: the commit passes every record.
        assert_eq!(c.snapshot(2).unwrap().unwrap().offset, 13);

        // An epoch learnt within the bound follows the normal rules: it waits for its drain.
        c.processed();
        assert!(matches!(
            c.on_record(rec(2, 13, b"hot", 5), || Duration::from_secs(3)),
            Outcome::Held
        ));
        c.on_assignment(assignment(5, 2), Duration::from_secs(4));
        c.tick(Duration::from_secs(10), 10);
        assert!(c.next_ready().is_none(), "known now: waits for partition 1");
        assert_eq!(c.take_anomalies().unknown_epoch_records, 0);
        announce(&mut c, &[progress(0, 5), progress(1, 5), progress(3, 5)]);
        assert_eq!(c.next_ready(), Some(13));
    }

    #[test]
    fn a_lease_counts_as_expired_max_lease_after_it_was_read() {
        // A producer's clock far ahead (or a bad record): expires_at_ms u64::MAX. Before the
        // clamp the member waited for its marker of epoch 2 for ever.
        let now = Monotonic::ZERO;
        let mut c = member(&[0]);
        assert_eq!(
            c.take_anomalies().clamped_leases,
            0,
            "member()'s lease is sane"
        );
        c.on_assignment(assignment(2, 2), now);
        let mut skewed = lease(0);
        skewed.expires_at_ms = u64::MAX;
        c.on_lease(skewed.clone(), now);
        assert_eq!(c.take_anomalies().clamped_leases, 1);
        end(&mut c, 0, 0, 1);
        c.tick(now, 60_000);
        assert_eq!(
            c.snapshot(0).unwrap().unwrap().drained,
            1,
            "read at 1: live"
        );
        // Renewed (re-read) at 60 000: live until 120 000.
        c.on_lease(skewed, now);
        c.tick(now, 119_999);
        assert_eq!(
            c.snapshot(0).unwrap().unwrap().drained,
            1,
            "renewal re-arms it"
        );
        c.tick(now, 120_000);
        assert_eq!(
            c.snapshot(0).unwrap().unwrap().drained,
            2,
            "max_lease after the last read: not awaited"
        );
        assert_eq!(c.take_anomalies().clamped_leases, 1);
    }

    #[test]
    fn a_snapshot_that_leaves_out_its_window_is_counted() {
        // Partition 2 holds `hot` at 10-12 (epoch 2 waits for partition 1): the commit at 10
        // carries the window `n` 13, `u` [0,1,2].
        let held = |max_metadata_bytes| {
            let now = Monotonic::ZERO;
            let mut c = member_with(
                &[2],
                CoreConfig {
                    max_metadata_bytes,
                    ..cfg()
                },
            );
            c.on_assignment(assignment(2, 2), now);
            for o in 10..13 {
                assert!(matches!(
                    c.on_record(rec(2, o, b"hot", 2), || now),
                    Outcome::Held
                ));
            }
            c.take_anomalies();
            c
        };
        let mut fits = held(4096);
        let s = fits.snapshot(2).unwrap().unwrap();
        assert!(
            s.metadata.contains(r#""n":13,"u":[0,1,2]"#),
            "{}",
            s.metadata
        );
        assert_eq!((s.offset, s.window_left_out), (10, None));
        assert_eq!(fits.take_anomalies().windows_left_out, 0, "it fits");

        let mut over = held(s.metadata.len() - 1);
        for _ in 0..2 {
            let s = over.snapshot(2).unwrap().unwrap();
            assert!(!s.metadata.contains(r#""n""#), "{}", s.metadata);
            assert_eq!((s.offset, s.window_left_out), (10, Some(3)));
        }
        assert_eq!(
            over.take_anomalies().windows_left_out,
            2,
            "once per snapshot built"
        );
        // Everything processed: no window, nothing left out.
        announce(&mut over, &[progress(1, 2)]);
        for o in 10..13 {
            assert_eq!(over.next_ready(), Some(o));
            over.processed();
        }
        let s = over.snapshot(2).unwrap().unwrap();
        assert_eq!((s.offset, s.window_left_out), (13, None));
        assert_eq!(over.take_anomalies().windows_left_out, 0);
    }

    fn marker(epoch: u64, ends: Vec<i64>) -> Marker {
        Marker {
            producer: y(),
            topic: "t".into(),
            epoch,
            ends,
        }
    }

    fn drained(c: &Core<i64>, partition: u32) -> u64 {
        c.parts[&partition].drained
    }

    #[test]
    fn a_marker_passes_once_the_position_reaches_it_and_its_records_are_processed() {
        let now = Monotonic::ZERO;
        let mut c = member(&[0, 3]);
        c.on_assignment(assignment(2, 2), now);
        let l = lease(0);
        c.on_lease(l.clone(), now);
        // Partition 0: offsets 0..=2 are the producer's (epoch 1); the marker of 2 ends at 3.
        assert_eq!(deliver(&mut c, rec(0, 0, b"k", 1)), Some(0));
        c.on_marker(marker(2, vec![3, 0, 0, 5]), now);
        assert_eq!(drained(&c, 0), 0, "offsets 1 and 2 not fetched yet");
        // Partition 3 fetched nothing, but its end is 5: it waits too (0 passes at once
        // elsewhere).
        assert_eq!(drained(&c, 3), 0);
        let lanes = c.lanes();
        c.publish();
        assert!(
            !lanes.admits(0, 1, None),
            "the fast path is shut while a marker waits"
        );
        assert_eq!(deliver(&mut c, rec(0, 1, b"k", 1)), Some(1));
        assert_eq!(deliver(&mut c, rec(0, 2, b"k", 1)), Some(2));
        // Offset 2 was fetched but the application still has it: not passed.
        c.tick(now, 1);
        assert_eq!(drained(&c, 0), 0);
        c.processed();
        assert_eq!(drained(&c, 0), 2);
        assert_eq!(drained(&c, 3), 0, "partition 3 still waits for offset 5");
        c.on_marker(marker(2, vec![3, 0, 0, 5]), now); // read again: nothing changes
        // The metadata records the marker with its end.
        let meta = c.snapshot(0).unwrap().unwrap().metadata;
        assert!(meta.contains(&format!(r#""{}":[2,3]"#, y())), "{meta}");

        // A partition assigned with a committed offset at or above the end passes at once.
        let mut d = member(&[3]);
        d.on_assignment(assignment(2, 2), now);
        d.on_lease(l, now);
        d.on_marker(marker(2, vec![3, 0, 0, 5]), now);
        d.revoke(3, now);
        d.assign(3, Some(5), None, now);
        assert_eq!(drained(&d, 3), 2);

        // A marker for another partition count is rejected and counted.
        d.on_marker(marker(3, vec![1, 1]), now);
        let a = d.take_anomalies();
        assert_eq!(a.rejected_markers[MarkerReject::PartitionCount.index()], 1);
        d.on_marker_rejected(MarkerReject::Invalid);
        assert_eq!(
            d.take_anomalies().rejected_markers[MarkerReject::Invalid.index()],
            1
        );
    }

    #[test]
    fn expired_and_late_producers() {
        let now = Monotonic::ZERO;
        let mut c = member(&[0]);
        c.on_assignment(assignment(2, 2), now);
        assert!(c.snapshot(0).is_none(), "nothing fetched yet");
        end(&mut c, 0, 0, 1);
        // The producer (live until 10 000) has not passed 2: drained stays 1.
        assert_eq!(c.snapshot(0).unwrap().unwrap().drained, 1);
        c.tick(now, 10_000);
        assert_eq!(
            c.snapshot(0).unwrap().unwrap().drained,
            2,
            "expired: not awaited"
        );
        // The producer renews its lease: awaited again, drained falls back to what it passed.
        c.on_assignment(assignment(3, 2), now);
        let mut l = lease(0);
        l.expires_at_ms = 20_000;
        c.on_lease(l, now);
        assert_eq!(c.snapshot(0).unwrap().unwrap().drained, 1);
        // Its marker of 3 ends at or below this owner's position everywhere: passed at once.
        c.on_marker(marker(3, vec![1, 0, 0, 0]), now);
        assert_eq!(c.snapshot(0).unwrap().unwrap().drained, 3);
    }

    #[test]
    fn a_closed_lease_is_awaited_after_expiry_and_collected_once_settled() {
        let now = Monotonic::ZERO;
        let mut c = member(&[0]);
        c.on_assignment(assignment(2, 2), now);
        end(&mut c, 0, 0, 1);
        // Closed at 2; its marker of 2 ends at 5 on partition 0, not reached yet.
        let mut l = lease(0);
        l.closed_at_epoch = Some(2);
        c.on_lease(l, now);
        c.on_marker(marker(2, vec![5, 0, 0, 0]), now);
        announce(&mut c, &[progress(1, 2), progress(2, 2), progress(3, 2)]);
        assert_eq!(drained(&c, 0), 1);
        // Expired (10 000), then past the collection grace (60 s): still awaited, not collected.
        c.tick(now, 10_000);
        assert_eq!(drained(&c, 0), 1, "closed at 2: awaited after expiry");
        c.tick(now, 80_000);
        assert_eq!(drained(&c, 0), 1);
        assert_eq!(c.collectable_leases(80_000).count(), 0, "2 not settled");
        // The marker is reached and passed: partition 0 drains 2, the group settles 2.
        for o in 0..5 {
            assert_eq!(deliver(&mut c, rec(0, o, b"cold", 1)), Some(o));
        }
        c.processed();
        c.tick(now, 80_001);
        assert_eq!(drained(&c, 0), 2);
        assert_eq!(c.collectable_leases(80_001).count(), 0, "not committed yet");
        commit_due(&mut c);
        assert_eq!(c.settled(), 2);
        assert_eq!(c.collectable_leases(80_001).count(), 1);
        // A lease that is not closed is collected on time alone.
        let mut c = member(&[0]);
        assert_eq!(c.collectable_leases(70_000).count(), 0);
        assert_eq!(c.collectable_leases(70_001).count(), 1);
        c.tick(now, 70_001);
        assert_eq!(c.collectable_leases(70_001).count(), 1);
    }

    #[test]
    fn quiet_partitions_take_the_lane_and_keep_their_position() {
        let now = Monotonic::ZERO;
        let mut c = member(&[0]);
        let mut lanes = c.lanes();
        c.publish();
        lanes.refresh(0, c.lane(0));
        // Nothing fetched yet: the first record goes through the core (it sets the start).
        assert!(!lanes.admits(0, 0, None));
        let unstamped = |offset: i64| -> Incoming<'static, Msg> {
            Incoming {
                partition: 0,
                offset,
                key: Some(b"k"),
                epoch: None,
                msg: Box::new(move || offset),
            }
        };
        assert!(matches!(
            c.on_record(unstamped(0), || now),
            Outcome::Deliver
        ));
        lanes.took_from_core();
        c.publish();
        assert!(lanes.processed(), "the core handed it out");
        c.processed();
        c.publish();

        // Quiet now: unstamped records take the lane; the one in the application is unprocessed.
        assert!(lanes.take(0, 1, None));
        assert_eq!(c.snapshot(0).unwrap().unwrap().offset, 1);
        assert!(!lanes.processed());
        assert_eq!(c.snapshot(0).unwrap().unwrap().offset, 2);
        // Not below the position (a re-fetch), not an epoch the group has not settled.
        assert_eq!(c.settled(), 0);
        assert!(!lanes.admits(0, 1, None));
        assert!(!lanes.admits(0, 2, Some(1)));

        // A moved key held on the partition closes its gate until released.
        c.on_assignment(assignment(2, 0), now);
        let hot = Incoming {
            partition: 0,
            offset: 2,
            key: Some(b"hot"),
            epoch: Some(2),
            msg: Box::new(|| 2_i64) as Msg,
        };
        assert!(matches!(c.on_record(hot, || now), Outcome::Held));
        c.publish();
        assert!(!lanes.admits(0, 3, None));
        assert_eq!(c.snapshot(0).unwrap().unwrap().offset, 2);

        // Revoked: the lane is closed for good.
        c.revoke(0, now);
        c.publish();
        assert!(!lanes.admits(0, 3, None));
    }

    #[test]
    fn split_transitions_are_reported_once_per_key_and_epoch() {
        use crate::consumer::split::tests::placed;
        let now = Monotonic::ZERO;
        let place = |e: u64, hot: &[u32]| {
            placed(
                P,
                e,
                &[(b"hot".to_vec(), hot.to_vec()), (b"cold".to_vec(), vec![0])],
            )
        };
        let mut c: Core<i64> = Core::new("t", "g", P, cfg());
        // The first epoch learnt: its split keys are reported (against nothing split).
        c.on_assignment(place(2, &[1, 2]), now);
        // An older epoch learnt later is not compared any more.
        c.on_assignment(place(1, &[0]), now);
        c.on_assignment(place(3, &[2, 3]), now);
        c.on_assignment(place(3, &[2, 3]), now);
        c.on_assignment(place(4, &[3]), now);
        c.on_assignment(place(5, &[3]), now);
        let got: Vec<(u64, Vec<u32>, Option<u32>)> = c
            .take_split_changes()
            .into_iter()
            .map(|ch| {
                assert_eq!(&*ch.key, b"hot");
                (ch.epoch, ch.parts.to_vec(), ch.partition)
            })
            .collect();
        assert_eq!(
            got,
            vec![
                (2, vec![1, 2], None),
                (3, vec![2, 3], None),
                (4, vec![], Some(3)),
            ]
        );
        assert!(c.take_split_changes().is_empty());
        // Labels: a stamped record by its epoch, an unstamped one by its partition's window.
        c.assign(3, None, None, now);
        assert_eq!(c.split_label(3, Some(b"hot"), Some(3)), Some(2));
        assert_eq!(c.split_label(3, Some(b"hot"), Some(4)), None);
        assert_eq!(c.split_label(3, Some(b"cold"), None), None);
        assert_eq!(c.split_label(0, Some(b"hot"), Some(3)), None, "not owned");
    }

    #[test]
    fn flow_control_pauses_and_resumes() {
        let t0 = Monotonic::ZERO;
        let mut b = member(&[2]);
        b.on_assignment(assignment(2, 2), t0);
        for o in 0..6 {
            b.processed();
            b.on_record(rec(2, o, b"hot", 2), || t0);
        }
        let (pause, resume) = b.flow(t0);
        assert_eq!((pause, resume), (vec![2], vec![]));
        assert_eq!(b.paused(), vec![2]);
        // Stalled: resumed past the limit, not re-paused.
        let (pause, resume) = b.flow(t0 + Duration::from_secs(6));
        assert_eq!((pause, resume), (vec![], vec![2]));
        let (pause, _) = b.flow(t0 + Duration::from_secs(7));
        assert!(pause.is_empty());
    }
}

/// A model of the whole protocol without Kafka: partitions are vectors, producers append records and
/// write markers once acknowledged (adopting epochs with independent lags and stamping moved keys
/// only), members fetch, process, commit, announce and crash, all in a random interleaving. Checks
/// what `docs/spec.md` 9.4 promises: nothing lost, each producer's order per key, and no record of a key processed after a
/// record of a later epoch of that key from another partition.
#[cfg(test)]
mod simulation {
    #![allow(clippy::unwrap_used)]

    use std::collections::{BTreeMap, BTreeSet, HashMap};

    use proptest::prelude::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::handoff::Lease;
    use crate::marker::MarkerTracker;

    const PARTS: u32 = 3;
    const KEYS: usize = 3;
    const EPOCHS: u64 = 4;
    /// The epoch of a stray record: no member ever learns it (a bogus header, another control
    /// topic). Written by the stray producer, index [`STRAY`].
    const STRAY_EPOCH: u64 = 1000;
    const STRAY: usize = usize::MAX;
    /// `CoreConfig::unknown_epoch_wait` in the simulation, in steps of its clock.
    const UNKNOWN_WAIT_MS: u64 = 40;
    /// How long a dead producer's last lease runs on, in steps of the wall clock.
    const DEAD_LEASE_MS: u64 = 25;
    /// The stall timeout of [`run_flow`]'s members: below [`UNKNOWN_WAIT_MS`], the clock's jump
    /// at each round of `finish`.
    const STALL_MS: u64 = 30;

    #[derive(Clone, Debug)]
    struct Rec {
        key: usize,
        epoch: u64,
        stamped: bool,
        /// Its key is split in its epoch: the number of parts.
        split: Option<u32>,
        producer: usize,
        partition: u32,
    }

    struct Producer {
        id: ProducerId,
        epoch: u64,
        prev: Option<u64>,
        /// Records of each split key sent in the current epoch (its round robin over the parts).
        spread: [usize; KEYS],
        /// Never routed under a lower epoch (a producer started late has a later one).
        first_epoch: u64,
        /// Its marker ends, and the records in the log whose acknowledgement has not reached
        /// the producer yet (epoch, partition, offset).
        tracker: MarkerTracker,
        unacked: Vec<(u64, u32, i64)>,
        /// Stopped without closing: its last lease expires at `expires_at_ms`.
        dead: bool,
        expires_at_ms: u64,
        /// Stamp windows (`crate::window`, worlds with [`World::windows`]): open ones, oldest
        /// first, with the epoch before each (0: none known).
        open: Vec<(u64, u64)>,
        /// The epochs whose placement a record of the current epoch is compared with while its
        /// window is open (`None`: not known, every key stamped): the predecessors of every
        /// window open when the epoch was adopted, and its own.
        befores: Vec<Option<u64>>,
        /// The highest epoch its markers announced.
        announced: u64,
    }

    /// What members read from the handoff topic besides progress, with a lag.
    #[derive(Clone, Debug)]
    enum HandoffItem {
        Lease(Lease),
        Marker(Marker),
    }

    struct Member {
        /// Messages are (record, split label at arrival).
        core: Core<(usize, Option<u32>)>,
        parts: Vec<u32>,
        pos: HashMap<u32, usize>,
        /// The fast path, taken for two records out of three its gates admit (the third goes
        /// through the core, which must then deliver it).
        lanes: Lanes,
        turn: u32,
        /// Partitions flow control paused (C13): not fetched until resumed.
        paused: BTreeSet<u32>,
    }

    impl Member {
        /// As the consumer does before anything else: the application's record is processed,
        /// and the core's view is published (the consumer's lock guard does it on every unlock).
        fn processed(&mut self) {
            if self.lanes.processed() {
                self.core.processed();
            }
            self.core.publish();
        }
    }

    struct World {
        /// Every record carries its epoch (`EpochHeader::All`); otherwise only moved keys'
        /// (`EpochHeader::Moved`), and producers adopt an epoch only once the previous switch has
        /// drained everywhere (the condition the default mode needs).
        stamp_all: bool,
        /// Key 0 goes whole -> split -> whole -> split over the epochs (the others stay whole);
        /// producers then adopt an epoch only once the previous switch drained, in every mode
        /// (split records carry no epoch: the condition their rule needs).
        split: bool,
        /// Producers stamp moved keys only inside stamp windows (`crate::window`): from adopting an
        /// epoch until the group settled it, as its announced progress says. They adopt epochs in
        /// any succession (nothing waits for a drain), and a producer started late stamps every
        /// record until its first window closes.
        windows: bool,
        /// places[e][k]: key k's partitions under epoch e (one: whole; more: split).
        places: Vec<[Vec<u32>; KEYS]>,
        assignments: Vec<Arc<Assignment>>,
        /// Each partition's log: indices into `recs`.
        logs: Vec<Vec<usize>>,
        recs: Vec<Rec>,
        producers: Vec<Producer>,
        members: Vec<Member>,
        committed: HashMap<u32, (i64, String)>,
        /// Announcements not yet delivered to the members.
        announcements: Vec<Progress>,
        /// The handoff topic after compaction: the latest announcement per partition (what a
        /// restarted member reads).
        compacted: HashMap<u32, Progress>,
        /// (record, time, split label) in processing order.
        processed: Vec<(usize, u64, Option<u32>)>,
        /// A member crashed in this run (labels after a resume may name a later epoch's split).
        crashed: bool,
        time: u64,
        /// A stray producer writes records stamped [`STRAY_EPOCH`] now and then.
        strays: bool,
        /// The members' monotonic clock (ms): one per step, and a jump at the end.
        clock: u64,
        /// The members' `max_held` and `stall_timeout` (C13).
        max_held: usize,
        stall_timeout_ms: u64,
        /// The wall clock (ms) that leases expire by.
        wall: u64,
        /// Leases and markers written and not yet read by the members.
        handoff: Vec<HandoffItem>,
        /// The latest marker per producer (what a restarted member reads after compaction).
        latest_markers: HashMap<usize, Marker>,
        /// Every announcement in order (what the producers of a windows world read).
        progress_log: Vec<Progress>,
    }

    fn key(k: usize) -> Vec<u8> {
        format!("k{k}").into_bytes()
    }

    fn assignment(epoch: u64, places: &[Vec<u32>; KEYS]) -> Arc<Assignment> {
        let heavy: Vec<(Vec<u8>, Vec<u32>)> = places
            .iter()
            .enumerate()
            .map(|(k, place)| (key(k), place.clone()))
            .collect();
        crate::consumer::split::tests::placed(PARTS, epoch, &heavy)
    }

    impl World {
        fn new(rng: &mut StdRng, stamp_all: bool, split: bool) -> Self {
            // places[e] for e in 1..=EPOCHS (index 0 unused).
            let places: Vec<[Vec<u32>; KEYS]> = (0..=EPOCHS)
                .map(|e| {
                    std::array::from_fn(|k| {
                        if split && k == 0 && e % 2 == 0 {
                            // 2 or 3 distinct parts, in a random order.
                            let mut parts: Vec<u32> = (0..PARTS).collect();
                            for i in (1..parts.len()).rev() {
                                parts.swap(i, rng.random_range(0..=i));
                            }
                            parts.truncate(rng.random_range(2..=PARTS as usize));
                            parts
                        } else {
                            vec![rng.random_range(0..PARTS)]
                        }
                    })
                })
                .collect();
            let assignments = (1..=EPOCHS)
                .map(|e| assignment(e, &places[e as usize]))
                .collect();
            let producers = (0..2)
                .map(|_| {
                    let id = ProducerId::random(rng.random::<u128>());
                    Producer {
                        tracker: MarkerTracker::new(id.clone(), "t", PARTS, 1),
                        id,
                        epoch: 1,
                        prev: None,
                        spread: [0; KEYS],
                        first_epoch: 1,
                        unacked: Vec::new(),
                        dead: false,
                        expires_at_ms: u64::MAX,
                        open: Vec::new(),
                        befores: Vec::new(),
                        announced: 1,
                    }
                })
                .collect();
            let mut w = World {
                stamp_all,
                split,
                windows: false,
                places,
                assignments,
                logs: vec![Vec::new(); PARTS as usize],
                recs: Vec::new(),
                producers,
                members: Vec::new(),
                committed: HashMap::new(),
                announcements: Vec::new(),
                compacted: HashMap::new(),
                processed: Vec::new(),
                crashed: false,
                time: 0,
                strays: false,
                clock: 0,
                max_held: 1_000_000,
                stall_timeout_ms: 3_600_000,
                wall: 1,
                handoff: Vec::new(),
                latest_markers: HashMap::new(),
                progress_log: Vec::new(),
            };
            // Member 0 owns partitions 0 and 1, member 1 owns 2.
            for parts in [vec![0, 1], vec![2]] {
                let m = w.member(parts);
                w.members.push(m);
            }
            w
        }

        fn lease(&self, p: usize) -> Lease {
            let pr = &self.producers[p];
            Lease {
                producer: pr.id.clone(),
                topic: "t".into(),
                first_epoch: pr.first_epoch,
                lease_ms: 1_000_000,
                expires_at_ms: pr.expires_at_ms,
                closed_at_epoch: None,
            }
        }

        /// A producer started now, at the epoch in effect (the newest any producer
        /// adopted): its lease is read before it routes anything. With `Moved` stamping it stamps
        /// nothing (no predecessor), so it starts only once that epoch drained, the condition
        /// that mode needs anyway.
        fn start_producer(&mut self, rng: &mut StdRng) {
            let epoch = self.producers.iter().map(|p| p.epoch).max().unwrap_or(1);
            if self.producers.len() > 2
                || ((!self.stamp_all || self.split)
                    && !self.windows
                    && !self.drained_everywhere(epoch))
            {
                return;
            }
            let id = ProducerId::random(rng.random::<u128>());
            self.producers.push(Producer {
                tracker: MarkerTracker::new(id.clone(), "t", PARTS, epoch),
                id,
                epoch,
                prev: None,
                spread: [0; KEYS],
                first_epoch: epoch,
                unacked: Vec::new(),
                dead: false,
                expires_at_ms: u64::MAX,
                // Its predecessor is not known: every key counts as moved in its first window.
                open: if self.windows {
                    vec![(epoch, 0)]
                } else {
                    Vec::new()
                },
                befores: vec![None],
                announced: epoch,
            });
            let l = self.lease(self.producers.len() - 1);
            let now = Duration::from_millis(self.clock);
            for m in &mut self.members {
                m.core.on_lease(l.clone(), now);
            }
        }

        /// A producer stops without closing, possibly with records unacknowledged
        /// and its marker outstanding: its last lease runs out [`DEAD_LEASE_MS`] from now.
        fn kill_producer(&mut self, rng: &mut StdRng) {
            if self.producers.iter().any(|p| p.dead) {
                return;
            }
            let p = rng.random_range(0..self.producers.len());
            let pr = &mut self.producers[p];
            pr.dead = true;
            pr.expires_at_ms = self.wall + DEAD_LEASE_MS;
            let l = self.lease(p);
            self.handoff.push(HandoffItem::Lease(l));
        }

        /// Some acknowledgements reach their producer (in any order).
        fn ack(&mut self, rng: &mut StdRng) {
            let p = rng.random_range(0..self.producers.len());
            let pr = &mut self.producers[p];
            for _ in 0..rng.random_range(1..=3) {
                if pr.unacked.is_empty() || pr.dead {
                    break;
                }
                let (epoch, partition, offset) = pr
                    .unacked
                    .swap_remove(rng.random_range(0..pr.unacked.len()));
                pr.tracker.acked(epoch, partition, offset);
            }
        }

        /// Every live producer whose marker is due (everything older acknowledged)
        /// writes it.
        fn write_markers(&mut self) {
            for (p, pr) in self.producers.iter_mut().enumerate() {
                if pr.dead {
                    continue;
                }
                if let Some(m) = pr.tracker.due(pr.epoch, PARTS) {
                    pr.tracker.written(&m);
                    pr.announced = pr.announced.max(m.epoch);
                    self.latest_markers.insert(p, m.clone());
                    self.handoff.push(HandoffItem::Marker(m));
                }
            }
        }

        /// The members read what was written to the handoff topic.
        fn deliver_handoff(&mut self) -> bool {
            let now = Duration::from_millis(self.clock);
            let items = std::mem::take(&mut self.handoff);
            // Read while the application may still hold a record (as the glue applies them).
            for m in &mut self.members {
                for item in &items {
                    match item {
                        HandoffItem::Lease(l) => m.core.on_lease(l.clone(), now),
                        HandoffItem::Marker(x) => m.core.on_marker(x.clone(), now),
                    }
                }
            }
            !items.is_empty()
        }

        /// A (re)started member: knows every epoch and lease, takes its partitions from the
        /// committed state, announces them.
        fn member(&mut self, parts: Vec<u32>) -> Member {
            let now = Monotonic::ZERO;
            let mut core = Core::new(
                "t",
                "g",
                PARTS,
                CoreConfig {
                    max_held: self.max_held,
                    stall_timeout: Duration::from_millis(self.stall_timeout_ms),
                    max_metadata_bytes: 4096,
                    history: 8,
                    unknown_epoch_wait: Duration::from_millis(UNKNOWN_WAIT_MS),
                    max_lease: Duration::from_secs(3600),
                },
            );
            core.tick(now, self.wall);
            for a in &self.assignments {
                core.on_assignment(Arc::clone(a), now);
            }
            // Markers before leases: a compacted topic may hold a renewal after the marker.
            for m in self.latest_markers.values() {
                core.on_marker(m.clone(), now);
            }
            for p in 0..self.producers.len() {
                core.on_lease(self.lease(p), now);
            }
            for a in self.compacted.values() {
                core.on_progress(a, now);
            }
            let mut pos = HashMap::new();
            for &p in &parts {
                let (offset, meta) = match self.committed.get(&p) {
                    Some((o, m)) => (Some(*o), CommitMeta::parse(m).and_then(Result::ok)),
                    None => (None, None),
                };
                core.assign(p, offset, meta.as_ref(), now);
                pos.insert(p, offset.unwrap_or(0) as usize);
                if let Some(r) = core.initial_progress(p) {
                    self.announce(r);
                }
            }
            let lanes = core.lanes();
            Member {
                core,
                parts,
                pos,
                lanes,
                turn: 0,
                paused: BTreeSet::new(),
            }
        }

        fn announce(&mut self, r: Progress) {
            self.compacted.insert(r.partition, r.clone());
            self.progress_log.push(r.clone());
            self.announcements.push(r);
        }

        fn produce(&mut self, p: usize, k: usize) {
            let pr = &mut self.producers[p];
            if pr.dead {
                return;
            }
            let place = &self.places[pr.epoch as usize][k];
            let split = (place.len() > 1).then_some(place.len() as u32);
            let partition = place[pr.spread[k] % place.len()];
            pr.spread[k] += 1;
            // Split records are never stamped; a key whole after a split always counts as moved.
            let places = &self.places;
            let moved_from =
                |prev: Option<u64>| prev.is_none_or(|prev| places[prev as usize][k] != [partition]);
            let stamped = split.is_none()
                && (self.stamp_all
                    || if self.windows {
                        pr.befores.iter().any(|&prev| moved_from(prev))
                    } else {
                        pr.prev.is_some_and(|prev| moved_from(Some(prev)))
                    });
            self.recs.push(Rec {
                key: k,
                epoch: pr.epoch,
                stamped,
                split,
                producer: p,
                partition,
            });
            let log = &mut self.logs[partition as usize];
            log.push(self.recs.len() - 1);
            pr.tracker.sent(pr.epoch);
            pr.unacked.push((pr.epoch, partition, log.len() as i64 - 1));
        }

        /// A record of key `k` stamped with an epoch nobody knows, on a random partition.
        fn produce_stray(&mut self, k: usize, partition: u32) {
            self.recs.push(Rec {
                key: k,
                epoch: STRAY_EPOCH,
                stamped: true,
                split: None,
                producer: STRAY,
                partition,
            });
            self.logs[partition as usize].push(self.recs.len() - 1);
        }

        /// Time passes for every member.
        fn tick(&mut self) {
            let now = Duration::from_millis(self.clock);
            for m in &mut self.members {
                m.processed();
                m.core.tick(now, self.wall);
            }
        }

        /// Every partition has durably drained `epoch` (as its owner knows it).
        fn drained_everywhere(&self, epoch: u64) -> bool {
            self.members.iter().all(|m| {
                m.parts
                    .iter()
                    .all(|&p| m.core.parts.get(&p).is_some_and(|x| x.durable >= epoch))
            })
        }

        fn adopt(&mut self, p: usize) {
            if (!self.stamp_all || self.split)
                && !self.windows
                && !self.drained_everywhere(self.producers[p].epoch)
            {
                return;
            }
            let pr = &mut self.producers[p];
            if pr.epoch >= EPOCHS || pr.dead {
                return;
            }
            pr.prev = Some(pr.epoch);
            pr.epoch += 1;
            pr.spread = [0; KEYS];
            if self.windows {
                if pr.open.is_empty() {
                    pr.befores.clear();
                }
                pr.befores.extend(pr.prev.map(Some));
                pr.open.push((pr.epoch, pr.prev.unwrap_or(0)));
            }
            // Nothing in the data topic: the marker follows the acknowledgements.
        }

        /// Each producer reads the group's announced progress (the compacted handoff topic) and
        /// closes the stamp windows it settled, by the producer rule (`crate::window`; no
        /// timeout here: the guarantee is checked for a group that keeps up).
        fn close_windows(&mut self) {
            // The group's progress as a producer reads it (the compacted topic, in order).
            let mut progress = crate::window::GroupProgress::new();
            for r in &self.progress_log {
                progress.on_progress(r);
            }
            let settled: Vec<crate::window::GroupSettled> = progress.settled("t", PARTS).collect();
            let now = Duration::from_millis(self.clock);
            for pr in &mut self.producers {
                let open: Vec<crate::window::OpenWindow> = pr
                    .open
                    .iter()
                    .map(|&(epoch, prev)| crate::window::OpenWindow { epoch, prev })
                    .collect();
                let mut rule = crate::window::StampWindows::new(Duration::MAX);
                if let Some((upto, _)) = rule.due("t", &open, pr.announced, &settled, now) {
                    pr.open.retain(|&(e, _)| e > upto);
                    // Closing older windows does not unstamp the current epoch's moved keys.
                    if upto >= pr.epoch {
                        pr.befores.clear();
                    }
                }
            }
        }

        fn log_processing(&mut self, id: usize, label: Option<u32>) {
            self.time += 1;
            self.processed.push((id, self.time, label));
        }

        /// Fetch the next record of partition `part` of member `m`. Returns whether it did
        /// anything.
        fn fetch(&mut self, m: usize, part: u32) -> bool {
            // Flow control as the glue applies it before a fetch.
            let now = Duration::from_millis(self.clock);
            let member = &mut self.members[m];
            let (pause, resume) = member.core.flow(now);
            member.paused.extend(pause);
            for p in resume {
                member.paused.remove(&p);
            }
            if member.paused.contains(&part) {
                return false;
            }
            let at = self.members[m].pos[&part];
            let Some(&id) = self.logs[part as usize].get(at) else {
                return false;
            };
            self.members[m].pos.insert(part, at + 1);
            let offset = at as i64;
            let member = &mut self.members[m];
            member.processed();
            let r = &self.recs[id];
            let epoch = r.stamped.then_some(r.epoch);
            let admitted = member.lanes.admits(part, offset, epoch);
            let k = key(r.key);
            member.turn += 1;
            if admitted && !member.turn.is_multiple_of(3) {
                let label = member.core.split_label(part, Some(&k), epoch);
                assert!(member.lanes.take(part, offset, epoch));
                let fast = member.lanes.split_label(part, Some(&k), epoch);
                assert_eq!(fast, label, "the lane labels as the core does");
                self.log_processing(id, fast);
                return true;
            }
            let core = &mut member.core;
            let label = core.label_record(part, offset, Some(&k), epoch);
            let now = Duration::from_millis(self.clock);
            let out = core.on_record(
                Incoming {
                    partition: part,
                    offset,
                    key: Some(&k),
                    epoch,
                    msg: || (id, label),
                },
                || now,
            );
            member.lanes.refresh(part, core.lane(part));
            match out {
                Outcome::Deliver => {
                    member.lanes.took_from_core();
                    self.log_processing(id, label);
                }
                other => assert!(
                    !admitted,
                    "a gate admitted a record the core decided {other:?} about"
                ),
            }
            true
        }

        fn ready(&mut self, m: usize) -> bool {
            let member = &mut self.members[m];
            member.processed();
            match member.core.next_ready() {
                Some((id, label)) => {
                    member.lanes.took_from_core();
                    self.log_processing(id, label);
                    true
                }
                None => false,
            }
        }

        /// Progress commits (hooks would run here), then announcements queued.
        fn commit_progress(&mut self, m: usize) -> bool {
            let now = Monotonic::ZERO;
            let due = self.members[m].core.progress_due();
            for &p in &due {
                let core = &mut self.members[m].core;
                core.take_drained_epochs(p);
                let r = match core.snapshot(p) {
                    Some(Ok(s)) => {
                        self.committed.insert(p, (s.offset, s.metadata.clone()));
                        core.committed(p, s.drained, now);
                        Some(core.progress_record(&s))
                    }
                    Some(Err(_)) => panic!("metadata over the limit"),
                    None => core.mark_durable(p, now),
                };
                if let Some(r) = r {
                    self.announce(r);
                }
            }
            !due.is_empty()
        }

        fn periodic_commit(&mut self, m: usize) {
            let core = &mut self.members[m].core;
            for p in core.owned() {
                if let Some(Ok(s)) = core.snapshot(p) {
                    self.committed.insert(p, (s.offset, s.metadata));
                }
            }
        }

        fn deliver_announcements(&mut self) -> bool {
            let now = Monotonic::ZERO;
            let sent = std::mem::take(&mut self.announcements);
            for m in &mut self.members {
                for a in &sent {
                    m.core.on_progress(a, now);
                }
            }
            !sent.is_empty()
        }

        fn crash(&mut self, m: usize) {
            self.crashed = true;
            let parts = self.members[m].parts.clone();
            self.members[m] = self.member(parts);
        }

        fn step(&mut self, rng: &mut StdRng, crashes: bool) {
            self.clock += 1;
            self.wall += 1;
            match rng.random_range(0..100) {
                0..20 => self.ack(rng),
                20..28 => self.write_markers(),
                28..36 => {
                    self.deliver_handoff();
                }
                36..40 => self.tick(),
                40 => self.kill_producer(rng),
                41 => self.start_producer(rng),
                _ => {}
            }
            if self.windows && rng.random_range(0..100) < 6 {
                self.close_windows();
            }
            if self.strays && rng.random_range(0..100) < 3 {
                let k = rng.random_range(0..KEYS);
                let partition = rng.random_range(0..PARTS);
                self.produce_stray(k, partition);
            }
            if self.strays && rng.random_range(0..100) < 5 {
                self.tick();
            }
            let m = rng.random_range(0..self.members.len());
            match rng.random_range(0..100) {
                0..35 => {
                    let p = rng.random_range(0..self.producers.len());
                    let k = rng.random_range(0..KEYS);
                    self.produce(p, k);
                }
                35..39 => {
                    let p = rng.random_range(0..self.producers.len());
                    self.adopt(p);
                }
                39..75 => {
                    let parts = self.members[m].parts.clone();
                    let part = parts[rng.random_range(0..parts.len())];
                    self.fetch(m, part);
                }
                75..83 => {
                    self.ready(m);
                }
                83..91 => {
                    self.commit_progress(m);
                }
                91..94 => self.periodic_commit(m),
                94..99 => {
                    self.deliver_announcements();
                }
                _ => {
                    if crashes {
                        self.crash(m);
                    }
                }
            }
        }

        /// Every producer on the last epoch, then run the members until nothing moves. `Err` if
        /// the producers cannot reach the last epoch (a switch never drains: a stall).
        fn finish(&mut self) -> Result<(), String> {
            for _ in 0..=EPOCHS {
                for p in 0..self.producers.len() {
                    self.adopt(p);
                }
                self.settle_markers();
                self.quiesce();
                // Long enough for every stray record to be released, and for a dead
                // producer's lease to run out.
                self.clock += UNKNOWN_WAIT_MS;
                self.wall += DEAD_LEASE_MS;
                self.tick();
                self.quiesce();
            }
            if let Some(p) = self.producers.iter().find(|p| p.epoch < EPOCHS && !p.dead) {
                return Err(format!("stalled: a producer stays at epoch {}", p.epoch));
            }
            for m in &mut self.members {
                m.processed();
            }
            Ok(())
        }

        /// Every acknowledgement reaches its live producer, the markers due are written.
        fn settle_markers(&mut self) {
            for pr in &mut self.producers {
                if !pr.dead {
                    for (epoch, partition, offset) in pr.unacked.drain(..) {
                        pr.tracker.acked(epoch, partition, offset);
                    }
                }
            }
            self.write_markers();
        }

        fn quiesce(&mut self) {
            for _ in 0..10_000 {
                let mut moved = false;
                for m in 0..self.members.len() {
                    for part in self.members[m].parts.clone() {
                        while self.fetch(m, part) {
                            moved = true;
                        }
                    }
                    while self.ready(m) {
                        moved = true;
                    }
                    moved |= self.commit_progress(m);
                }
                moved |= self.deliver_announcements();
                moved |= self.deliver_handoff();
                if !moved {
                    break;
                }
            }
        }

        fn check(&self) -> Result<(), String> {
            let mut first: BTreeMap<usize, u64> = BTreeMap::new();
            let mut last: BTreeMap<usize, u64> = BTreeMap::new();
            for &(id, t, _) in &self.processed {
                first.entry(id).or_insert(t);
                last.insert(id, t);
            }
            if let Some((id, r)) = self
                .recs
                .iter()
                .enumerate()
                .find(|(id, _)| !first.contains_key(id))
            {
                return Err(format!("record {id} lost: {r:?}"));
            }
            // Each producer's order per key: a record is first processed after every earlier one
            // of its key and producer. Split records may overtake each other (across the parts,
            // order is not kept), never a whole record of their key nor be overtaken by one.
            let mut by_source: HashMap<(usize, usize), Vec<usize>> = HashMap::new();
            // Stray records are spread over random partitions: no order among them to keep.
            // A producer that died has no order guarantee once its lease ran out.
            for (id, r) in self
                .recs
                .iter()
                .enumerate()
                .filter(|(_, r)| r.producer != STRAY && !self.producers[r.producer].dead)
            {
                by_source.entry((r.key, r.producer)).or_default().push(id);
            }
            for ids in by_source.values() {
                for (i, &a) in ids.iter().enumerate() {
                    for &b in &ids[i + 1..] {
                        let (ra, rb) = (&self.recs[a], &self.recs[b]);
                        if !(ra.split.is_some() && rb.split.is_some()) && first[&b] < first[&a] {
                            return Err(format!(
                                "order: {rb:?} processed before {ra:?} of its key and producer"
                            ));
                        }
                    }
                }
            }
            // Split records are marked split; a whole record only where its epoch is ambiguous
            // (an adjacent epoch splits its key over its partition). The part count is the
            // record's epoch's, or, where the adjacent epoch splits the key over the partition
            // too, possibly that one's (the rule labels by the newest candidate epoch). After a
            // crash, a member resumes at the committed offset with the committed drained epoch,
            // which held records may have left behind: records between the two are labelled by
            // a later window (a known limit of the rule), so after a crash labels are not exact
            // and only order and exclusivity are checked.
            let mut seen = std::collections::HashSet::new();
            for &(id, _, label) in &self.processed {
                let r = &self.recs[id];
                let again = !seen.insert(id);
                // An unstamped record's candidates run up to the newest epoch the member knows:
                // with markers, epochs can be adopted in quick succession, so an unstamped
                // record of epoch E may be labelled by any later epoch that splits its key over
                // its partition (spec 9.4, gap G-label).
                let newest = if r.stamped { r.epoch + 1 } else { EPOCHS };
                let near_parts: Vec<usize> = (r.epoch.saturating_sub(1)..=newest)
                    .filter(|&e| e != r.epoch && (1..=EPOCHS).contains(&e))
                    .map(|e| &self.places[e as usize][r.key])
                    .filter(|place| place.len() > 1 && place.contains(&r.partition))
                    .map(Vec::len)
                    .collect();
                let ok = match (r.split, label) {
                    (Some(n), Some(l)) => {
                        l == n
                            || near_parts.iter().any(|&m| u32::try_from(m) == Ok(l))
                            || (self.crashed && l >= 2)
                    }
                    // An unstamped split record's label is the newest candidate epoch's, which
                    // with markers may be any epoch the member knows, split or whole: not checked
                    // (spec 9.4, gap G-label; order and exclusivity still are).
                    (Some(_), None) => self.crashed || !r.stamped,
                    (None, None) => true,
                    (None, Some(_)) => !near_parts.is_empty(),
                };
                if !ok {
                    return Err(format!(
                        "label: {r:?} processed as split {label:?} (again: {again})"
                    ));
                }
            }
            // One owner at a time: an older-epoch record of a key on another partition is never
            // processed after a newer-epoch one (unless both are split records).
            for (a, ra) in self.recs.iter().enumerate() {
                for (b, rb) in self.recs.iter().enumerate() {
                    // Stray records have no guarantee; what matters is that nothing else loses
                    // it because of them.
                    if ra.key == rb.key
                        && ra.producer != STRAY
                        && rb.producer != STRAY
                        && !self.producers[ra.producer].dead
                        && ra.epoch < rb.epoch
                        && ra.partition != rb.partition
                        && !(ra.split.is_some() && rb.split.is_some())
                        && last[&a] > first[&b]
                    {
                        return Err(format!(
                            "exclusivity: {ra:?} processed at {} after {rb:?} at {}",
                            last[&a], first[&b]
                        ));
                    }
                }
            }
            Ok(())
        }
    }

    fn run(seed: u64, steps: usize, crashes: bool, stamp_all: bool) -> Result<(), String> {
        run_with(seed, steps, crashes, stamp_all, false)
    }

    /// With the stray producer: its records are delivered (bounded wait), and the others keep
    /// order and exclusivity.
    fn run_strays(seed: u64, steps: usize, crashes: bool, stamp_all: bool) -> Result<(), String> {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut w = World::new(&mut rng, stamp_all, false);
        w.strays = true;
        for _ in 0..steps {
            w.step(&mut rng, crashes);
        }
        w.finish()?;
        if !w.recs.iter().any(|r| r.producer == STRAY) {
            return Ok(()); // nothing stray in this run: the other tests cover it
        }
        w.check()
    }

    fn run_with(
        seed: u64,
        steps: usize,
        crashes: bool,
        stamp_all: bool,
        split: bool,
    ) -> Result<(), String> {
        let mut rng = StdRng::seed_from_u64(seed);
        let w = World::new(&mut rng, stamp_all, split);
        run_world(w, rng, steps, crashes)
    }

    /// Producers that stamp only inside stamp windows ([`World::windows`]), epochs in any
    /// succession.
    fn run_windows(seed: u64, steps: usize, crashes: bool) -> Result<(), String> {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut w = World::new(&mut rng, false, false);
        w.windows = true;
        for pr in &mut w.producers {
            pr.open = vec![(1, 0)];
            pr.befores = vec![None];
        }
        run_world(w, rng, steps, crashes)
    }

    /// Members with a small `max_held`: partitions pause and resume (C13) all the time; a cycle
    /// of paused partitions, each paused short of the marker end the other's held records wait
    /// for, ends at the stall timeout ([`STALL_MS`], within a run's reach).
    fn run_flow(
        seed: u64,
        steps: usize,
        crashes: bool,
        stamp_all: bool,
        max_held: usize,
    ) -> Result<(), String> {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut w = World::new(&mut rng, stamp_all, false);
        w.max_held = max_held;
        w.stall_timeout_ms = STALL_MS;
        w.members = [vec![0, 1], vec![2]]
            .into_iter()
            .map(|parts| w.member(parts))
            .collect();
        run_world(w, rng, steps, crashes)
    }

    fn run_world(mut w: World, mut rng: StdRng, steps: usize, crashes: bool) -> Result<(), String> {
        for _ in 0..steps {
            w.step(&mut rng, crashes);
        }
        w.finish()?;
        w.check()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]
        /// Every record stamped: any producer lag, any interleaving; markers written only once
        /// everything older is acknowledged, read late; a producer dying with its marker
        /// outstanding; a producer started after the others' epoch.
        #[test]
        fn protocol_keeps_order_and_exclusivity(seed in any::<u64>(), steps in 50_usize..400) {
            prop_assert_eq!(run(seed, steps, false, true), Ok(()));
        }

        #[test]
        fn protocol_survives_member_crashes(seed in any::<u64>(), steps in 50_usize..400) {
            prop_assert_eq!(run(seed, steps, true, true), Ok(()));
        }

        /// Only moved keys stamped (the default), switches draining before the next epoch.
        #[test]
        fn moved_stamping_keeps_order_and_exclusivity(
            seed in any::<u64>(),
            steps in 50_usize..400,
            crashes in any::<bool>(),
        ) {
            prop_assert_eq!(run(seed, steps, crashes, false), Ok(()));
        }

        /// Flow control with a hold limit of 1-4 records: partitions pause and resume all the
        /// time, and order, exclusivity and no loss hold; a cycle of paused partitions ends at
        /// the stall timeout (C13; without it, the run stalls: records are never processed).
        #[test]
        fn flow_control_keeps_order_and_ends_cycles_at_the_stall_timeout(
            seed in any::<u64>(),
            steps in 50_usize..400,
            crashes in any::<bool>(),
            stamp_all in any::<bool>(),
            max_held in 1_usize..=4,
        ) {
            prop_assert_eq!(run_flow(seed, steps, crashes, stamp_all, max_held), Ok(()));
        }

        /// Records stamped with an epoch no member learns are delivered after the bounded
        /// wait; every other record keeps order and exclusivity, in both stamping modes.
        #[test]
        fn unknown_epochs_neither_stall_nor_break_order(
            seed in any::<u64>(),
            steps in 50_usize..400,
            crashes in any::<bool>(),
            stamp_all in any::<bool>(),
        ) {
            prop_assert_eq!(run_strays(seed, steps, crashes, stamp_all), Ok(()));
        }
    }

    proptest! {
        // The CI budget; 8,000 cases passed when this was written.
        #![proptest_config(ProptestConfig::with_cases(500))]

        /// Moved keys stamped only until the group settled the switch, epochs adopted in quick
        /// succession (no waiting for drains), producers started late: the guarantee without
        /// the condition `EpochHeader::Moved` needed.
        #[test]
        fn stamp_windows_keep_order_and_exclusivity_with_epochs_in_quick_succession(
            seed in any::<u64>(),
            steps in 50_usize..400,
            crashes in any::<bool>(),
        ) {
            prop_assert_eq!(run_windows(seed, steps, crashes), Ok(()));
        }
    }

    proptest! {
        // Fewer cases than above (the CI budget): each one crosses two splits.
        #![proptest_config(ProptestConfig::with_cases(400))]

        /// Key 0 whole -> split -> whole -> split: split records never wait once the split
        /// settled, wait at whole -> split for the old home and at split -> whole for every
        /// part; order and exclusivity hold for every whole record; every split record is
        /// marked.
        #[test]
        fn split_keys_keep_order_at_their_transitions(
            seed in any::<u64>(),
            steps in 50_usize..400,
            crashes in any::<bool>(),
            stamp_all in any::<bool>(),
        ) {
            prop_assert_eq!(run_with(seed, steps, crashes, stamp_all, true), Ok(()));
        }
    }
}
