//! The producer side's marker ends (`docs/spec.md` 9.2), without Kafka: which records of which
//! epoch are still unacknowledged, where the acknowledged ones landed, and when the marker of an
//! epoch may be written.
//!
//! A marker of epoch `E` says "every record this producer routed under an epoch below `E` to
//! partition `p` has an offset below `ends[p]`". It is true only once every such record is
//! acknowledged (idempotence makes the reported offsets final), so the tracker counts, per epoch
//! routed under, the records handed to the client and not yet reported, and keeps per partition 1 +
//! the largest acknowledged offset. The caller (the Kafka glue) reports each send and each delivery
//! report, and asks for the marker only after the grace period (9.2 step 2: every send that
//! started routing under an older epoch has been handed to the client, so no record of an older
//! epoch can still be counted in later).
//!
//! A real producer sends from many threads and learns outcomes on librdkafka's delivery thread,
//! so the glue counts into one lock-free [`EpochLedger`] per epoch (the concurrent form of
//! [`MarkerTracker::sent`], [`MarkerTracker::acked`] and [`MarkerTracker::failed`]) and its
//! background task hands each ledger's [`LedgerSnapshot`] to the tracker
//! ([`MarkerTracker::observe`]), which alone decides when a marker is due and what it says.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};

use crate::handoff::{Marker, ProducerId};

/// Records of one epoch not covered by a written marker yet.
#[derive(Debug, Clone, Default)]
struct EpochAcks {
    /// Handed to the client, no delivery report yet.
    outstanding: u64,
    /// Per partition: 1 + the largest acknowledged offset (0: none).
    ends: Vec<i64>,
}

/// The marker state of one ordering producer on one topic.
#[derive(Debug, Clone)]
pub struct MarkerTracker {
    producer: ProducerId,
    topic: String,
    /// The epoch of the latest marker written (the first epoch before any: nothing older was
    /// routed).
    epoch: u64,
    /// The latest marker's ends (zeros before any).
    base: Vec<i64>,
    /// Epochs routed under since the latest marker.
    epochs: BTreeMap<u64, EpochAcks>,
}

impl MarkerTracker {
    /// The tracker of `producer` on `topic` with `partitions` partitions, registered at
    /// `first_epoch` (it never routed a record of the topic under a lower epoch).
    #[must_use]
    pub fn new(producer: ProducerId, topic: &str, partitions: u32, first_epoch: u64) -> Self {
        Self {
            producer,
            topic: topic.to_owned(),
            epoch: first_epoch,
            base: vec![0; partitions as usize],
            epochs: BTreeMap::new(),
        }
    }

    /// The epoch of the latest marker written (or the first epoch).
    #[must_use]
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// A record routed under `epoch` was handed to the client.
    pub fn sent(&mut self, epoch: u64) {
        self.epochs.entry(epoch).or_default().outstanding += 1;
    }

    /// The record routed under `epoch` was acknowledged at `offset` of `partition`.
    pub fn acked(&mut self, epoch: u64, partition: u32, offset: i64) {
        let Some(e) = self.epochs.get_mut(&epoch) else {
            return; // not sent through this tracker
        };
        e.outstanding = e.outstanding.saturating_sub(1);
        let p = partition as usize;
        if e.ends.len() <= p {
            e.ends.resize(p + 1, 0);
        }
        e.ends[p] = e.ends[p].max(offset.saturating_add(1));
    }

    /// The record routed under `epoch` was not written (a definite delivery error only: a record
    /// whose outcome is unknown, such as a message timeout, may be in the log at an offset this
    /// tracker never learns, and must not be reported here; spec 9.2.1).
    pub fn failed(&mut self, epoch: u64) {
        if let Some(e) = self.epochs.get_mut(&epoch) {
            e.outstanding = e.outstanding.saturating_sub(1);
        }
    }

    /// The state of the records routed under `epoch` as counted elsewhere (an [`EpochLedger`]'s
    /// snapshot): `outstanding` replaces the count, `ends` raise the acknowledged ends. Use either
    /// this or `sent`/`acked`/`failed` for an epoch, not both. A ledger of an epoch below the
    /// latest marker's was opened after that marker (the caller drops covered ledgers): its
    /// records (Kafka's placement after a retraction, epoch 0) count for the next marker.
    pub fn observe(&mut self, epoch: u64, outstanding: u64, ends: &[i64]) {
        let e = self.epochs.entry(epoch).or_default();
        e.outstanding = outstanding;
        if e.ends.len() < ends.len() {
            e.ends.resize(ends.len(), 0);
        }
        for (end, &acked) in e.ends.iter_mut().zip(ends) {
            *end = (*end).max(acked);
        }
    }

    /// The marker of `epoch` (the epoch in effect, over `partitions` partitions), if one is due
    /// (`epoch` above the latest marker's) and every record routed under a lower epoch has been
    /// reported. Ask only after the grace period. Epochs adopted faster than markers complete are
    /// skipped: a marker of `G` covers every epoch below it.
    #[must_use]
    pub fn due(&self, epoch: u64, partitions: u32) -> Option<Marker> {
        if epoch <= self.epoch {
            return None;
        }
        let older = self.epochs.range(..epoch);
        if older.clone().any(|(_, e)| e.outstanding > 0) {
            return None;
        }
        let mut ends = self.base.clone();
        ends.resize((partitions as usize).max(ends.len()), 0);
        for (_, e) in older {
            for (end, &acked) in ends.iter_mut().zip(&e.ends) {
                *end = (*end).max(acked);
            }
        }
        ends.truncate(partitions as usize);
        Some(Marker {
            producer: self.producer.clone(),
            topic: self.topic.clone(),
            epoch,
            ends,
        })
    }

    /// `marker` (from [`MarkerTracker::due`]) is in the log: the epochs below it are covered.
    pub fn written(&mut self, marker: &Marker) {
        if marker.epoch <= self.epoch {
            return;
        }
        self.epoch = marker.epoch;
        self.base.clone_from(&marker.ends);
        self.epochs = self.epochs.split_off(&marker.epoch);
    }
}

/// The delivery accounting of one epoch of one topic, shared by the threads that send and the one
/// that reports deliveries: counters and per-partition maxima, no lock.
///
/// Order of a record's calls: [`EpochLedger::sent`] before the record is handed to the client (so
/// the count is in before any report can be), then exactly one of [`EpochLedger::withdrawn`] (the
/// client refused it: never written), [`EpochLedger::acked`] or [`EpochLedger::unknown`] (a
/// delivery error: the record may or may not be in the log, at an offset nobody reports; spec
/// 9.2.1). A snapshot whose `outstanding` is 0 has seen every report's effect on `ends`.
#[derive(Debug)]
pub struct EpochLedger {
    epoch: u64,
    sent: AtomicU64,
    reported: AtomicU64,
    /// Per partition: 1 + the largest acknowledged offset (0: none).
    ends: Box<[AtomicI64]>,
    /// Per partition: a delivery failed there with an unknown outcome.
    unknown: Box<[AtomicBool]>,
    /// A report named a partition outside `ends` (the topic grew): every partition counts as
    /// unknown.
    unknown_all: AtomicBool,
}

/// What an [`EpochLedger`] says at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerSnapshot {
    /// The epoch the records were routed under.
    pub epoch: u64,
    /// Records handed to the client without a report yet.
    pub outstanding: u64,
    /// Per partition: 1 + the largest acknowledged offset (0: none).
    pub ends: Vec<i64>,
    /// Partitions where a delivery failed with an unknown outcome: the caller must raise their
    /// ends above any record that might be there (for example to the partition's end offset read
    /// after `outstanding` reached 0) before the tracker sees them.
    pub unknown: Vec<u32>,
    /// As `unknown`, for every partition of the topic (a report named a partition the ledger
    /// does not have: the topic grew, or its count was not known yet).
    pub unknown_all: bool,
}

impl EpochLedger {
    /// An empty ledger of `epoch` for a topic of `partitions` partitions.
    #[must_use]
    pub fn new(epoch: u64, partitions: u32) -> Self {
        Self {
            epoch,
            sent: AtomicU64::new(0),
            reported: AtomicU64::new(0),
            ends: (0..partitions).map(|_| AtomicI64::new(0)).collect(),
            unknown: (0..partitions).map(|_| AtomicBool::new(false)).collect(),
            unknown_all: AtomicBool::new(false),
        }
    }

    /// The epoch its records were routed under.
    #[must_use]
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// A record is about to be handed to the client.
    #[inline]
    pub fn sent(&self) {
        self.sent.fetch_add(1, Ordering::AcqRel);
    }

    /// The client refused the record [`EpochLedger::sent`] announced, or purged it from its queue
    /// before sending it: it was never written.
    #[inline]
    pub fn withdrawn(&self) {
        self.reported.fetch_add(1, Ordering::AcqRel);
    }

    /// The record was acknowledged at `offset` of `partition`.
    #[inline]
    pub fn acked(&self, partition: i32, offset: i64) {
        match usize::try_from(partition)
            .ok()
            .and_then(|p| self.ends.get(p))
        {
            Some(end) => {
                end.fetch_max(offset.saturating_add(1), Ordering::AcqRel);
            }
            None => self.unknown_all.store(true, Ordering::Release),
        }
        // After the end: a reader that sees the report sees its offset.
        self.reported.fetch_add(1, Ordering::AcqRel);
    }

    /// The record's delivery failed on `partition` (negative: not known) with an outcome the
    /// client cannot tell: it may be in the log.
    #[cold]
    pub fn unknown(&self, partition: i32) {
        match usize::try_from(partition)
            .ok()
            .and_then(|p| self.unknown.get(p))
        {
            Some(flag) => flag.store(true, Ordering::Release),
            None => self.unknown_all.store(true, Ordering::Release),
        }
        self.reported.fetch_add(1, Ordering::AcqRel);
    }

    /// The counts now. `outstanding` is read first, so when it is 0 every report is in `ends`.
    #[must_use]
    pub fn snapshot(&self) -> LedgerSnapshot {
        let reported = self.reported.load(Ordering::Acquire);
        let sent = self.sent.load(Ordering::Acquire);
        let all = self.unknown_all.load(Ordering::Acquire);
        LedgerSnapshot {
            epoch: self.epoch,
            outstanding: sent.saturating_sub(reported),
            ends: self
                .ends
                .iter()
                .map(|e| e.load(Ordering::Acquire))
                .collect(),
            unknown: self
                .unknown
                .iter()
                .enumerate()
                .filter(|(_, u)| u.load(Ordering::Acquire))
                .map(|(p, _)| u32::try_from(p).unwrap_or(u32::MAX))
                .collect(),
            unknown_all: all,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_ledger_counts_outstanding_records_and_their_ends() {
        let l = EpochLedger::new(4, 3);
        for _ in 0..4 {
            l.sent();
        }
        l.acked(1, 10);
        l.acked(1, 7);
        l.withdrawn();
        let s = l.snapshot();
        assert_eq!(
            (s.epoch, s.outstanding, s.ends.clone()),
            (4, 1, vec![0, 11, 0])
        );
        assert!(s.unknown.is_empty());
        l.unknown(2);
        let s = l.snapshot();
        assert_eq!((s.outstanding, s.unknown.clone()), (0, vec![2]));
        assert!(!s.unknown_all);
        // A partition beyond the ledger's count: every partition is unknown.
        l.sent();
        l.acked(5, 3);
        assert!(l.snapshot().unknown_all);
    }

    #[test]
    fn reports_from_many_threads_all_reach_the_snapshot() {
        let l = std::sync::Arc::new(EpochLedger::new(1, 4));
        let threads: Vec<_> = (0..4_i64)
            .map(|t| {
                let l = std::sync::Arc::clone(&l);
                std::thread::spawn(move || {
                    for i in 0..10_000_i64 {
                        l.sent();
                        l.acked(i32::try_from(t).unwrap(), t * 100_000 + i);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let s = l.snapshot();
        assert_eq!(s.outstanding, 0);
        assert_eq!(s.ends, vec![10_000, 110_000, 210_000, 310_000]);
    }

    #[test]
    fn observed_ledgers_decide_markers_like_counted_records() {
        let mut t = tracker();
        t.observe(1, 2, &[5, 0, 0]);
        assert_eq!(t.due(2, 3), None, "two records of epoch 1 outstanding");
        t.observe(1, 0, &[3, 9, 0]); // ends only rise
        t.observe(2, 7, &[0, 0, 50]);
        let m = t.due(2, 3).unwrap();
        assert_eq!(m.ends, vec![5, 9, 0]);
        t.written(&m);
        t.observe(2, 0, &[0, 0, 50]);
        assert_eq!(t.due(3, 3).unwrap().ends, vec![5, 9, 50]);
        // A ledger of a covered epoch opened after the marker counts for the next one.
        t.observe(1, 1, &[100, 0, 0]);
        assert_eq!(t.due(3, 3), None);
        t.observe(1, 0, &[100, 0, 0]);
        assert_eq!(t.due(3, 3).unwrap().ends, vec![100, 9, 50]);
    }

    fn tracker() -> MarkerTracker {
        MarkerTracker::new(ProducerId::parse(&"a".repeat(32)).unwrap(), "t", 3, 1)
    }

    #[test]
    fn a_marker_waits_for_every_older_record_and_ends_above_the_acknowledged_ones() {
        let mut t = tracker();
        assert_eq!(t.due(1, 3), None, "epoch 1 is the first epoch");
        t.sent(1);
        t.sent(1);
        t.sent(2);
        assert_eq!(t.due(2, 3), None, "two records of epoch 1 unacknowledged");
        t.acked(1, 0, 7);
        t.acked(2, 1, 100); // epoch 2: not covered by the marker of 2
        assert_eq!(t.due(2, 3), None);
        t.failed(1);
        let m = t.due(2, 3).unwrap();
        assert_eq!((m.epoch, m.ends.clone()), (2, vec![8, 0, 0]));
        t.written(&m);
        assert_eq!(t.epoch(), 2);
        assert_eq!(t.due(2, 3), None);
        // Nothing routed since on partition 0: the previous end stays; epoch 2's ack counts.
        let m = t.due(3, 3).unwrap();
        assert_eq!(m.ends, vec![8, 101, 0]);
        // Skipped epochs: the marker of 5 covers 3 and 4 as well.
        t.sent(3);
        t.sent(4);
        t.acked(3, 2, 4);
        assert_eq!(t.due(5, 3), None);
        t.acked(4, 2, 9);
        let m = t.due(5, 3).unwrap();
        assert_eq!(m.ends, vec![8, 101, 10]);
        t.written(&m);
        // A late report of a covered epoch changes nothing; more partitions: zeros.
        t.acked(4, 0, 1000);
        assert_eq!(t.due(6, 4).unwrap().ends, vec![8, 101, 10, 0]);
    }
}
