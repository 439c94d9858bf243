//! The producer side of marker mode (`docs/spec.md` 9.2), without Kafka: which records of which
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

use std::collections::BTreeMap;

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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

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
