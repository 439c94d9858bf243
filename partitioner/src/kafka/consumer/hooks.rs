//! State handoff hooks: the application's per-key state follows its keys across rebalances and
//! epoch switches.

use std::fmt;

use crate::assignment::Assignment;
use dkg_kafka_protocol::consumer::history::{partition_under, split_under};

pub use dkg_kafka_protocol::consumer::split::SplitChange;

/// Callbacks of a [`DkgConsumer`](super::DkgConsumer). All run on the task that calls
/// [`recv`](super::DkgConsumer::recv) (or `commit`/`close`), synchronously, between two records:
/// the state they touch is never used concurrently by the consumer's own processing. Keep them
/// short; the partition assignment of the whole group waits for the revocation hook.
///
/// Every method has an empty default.
pub trait ConsumerHooks: Send + Sync + 'static {
    /// `partitions` of the topic now belong to this member. Called after their committed
    /// progress was loaded, before any of their records is handed out.
    fn on_partitions_assigned(&self, partitions: &[u32]) {
        let _ = partitions;
    }

    /// `partitions` are taken from this member (rebalance or [`close`](super::DkgConsumer::close)).
    /// Called before the final commit of their offsets: flush the state of their keys now. Not
    /// called when the consumer is dropped without `close` (that is a crash).
    fn on_partitions_revoked(&self, partitions: &[u32]) {
        let _ = partitions;
    }

    /// `change.partition()` has drained epoch `change.next()`: every record on it of an earlier
    /// epoch is processed (for every producer awaited). Keys that left it at this epoch for a
    /// partition of another member ([`EpochChange::moved_out`]) will be processed there next:
    /// flush and drop their state now. The other member hands out their first new record only
    /// after this hook returned and the progress it enables is committed.
    ///
    /// Keys that move in ([`EpochChange::moved_in`]) need no call: their first record reaches
    /// [`recv`](super::DkgConsumer::recv) only after their old partition's owner ran this hook, so
    /// loading a key's state when it is first seen is correct.
    fn on_epoch(&self, change: &EpochChange<'_>) {
        let _ = change;
    }

    /// A key became split over several partitions (`change.parts` non-empty), was split
    /// differently, or became whole again (`change.parts` empty, `change.partition` its
    /// partition), from epoch `change.epoch` on. Called once per key and transition, when this
    /// member learns the epoch, before it hands out any record it labels by that epoch; at start
    /// for the keys split in the first epoch it learns. Split records are
    /// [`DkgMessage::split_parts`](super::DkgMessage::split_parts)-marked: keep partial state
    /// per partition for them and merge it downstream.
    fn on_split_change(&self, change: &SplitChange) {
        let _ = change;
    }
}

/// Shared hooks: keep an `Arc` of your hooks to reach their state from the application.
impl<T: ConsumerHooks> ConsumerHooks for std::sync::Arc<T> {
    fn on_partitions_assigned(&self, partitions: &[u32]) {
        (**self).on_partitions_assigned(partitions);
    }

    fn on_partitions_revoked(&self, partitions: &[u32]) {
        (**self).on_partitions_revoked(partitions);
    }

    fn on_epoch(&self, change: &EpochChange<'_>) {
        (**self).on_epoch(change);
    }

    fn on_split_change(&self, change: &SplitChange) {
        (**self).on_split_change(change);
    }
}

/// Hooks that do nothing (the default).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoHooks;

impl ConsumerHooks for NoHooks {}

/// An epoch drained on one partition of this member (see [`ConsumerHooks::on_epoch`]).
pub struct EpochChange<'a> {
    pub(crate) prev: Option<&'a Assignment>,
    pub(crate) next: &'a Assignment,
    pub(crate) partition: u32,
    pub(crate) owned: &'a [u32],
    pub(crate) partitions: u32,
}

impl fmt::Debug for EpochChange<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EpochChange")
            .field("prev", &self.prev.map(Assignment::epoch))
            .field("next", &self.next.epoch())
            .field("partition", &self.partition)
            .field("owned", &self.owned)
            .finish()
    }
}

impl<'a> EpochChange<'a> {
    /// The assignment before (`None`: Kafka's default placement, or unknown).
    #[must_use]
    pub fn prev(&self) -> Option<&'a Assignment> {
        self.prev
    }

    /// The assignment now drained.
    #[must_use]
    pub fn next(&self) -> &'a Assignment {
        self.next
    }

    /// The epoch now drained.
    #[must_use]
    pub fn epoch(&self) -> u64 {
        self.next.epoch()
    }

    /// The partition that drained it.
    #[must_use]
    pub fn partition(&self) -> u32 {
        self.partition
    }

    /// The partitions this member owns.
    #[must_use]
    pub fn owned(&self) -> &'a [u32] {
        self.owned
    }

    /// The key's partitions before the change if it was split then (see
    /// [`DkgMessage::split_parts`](super::DkgMessage::split_parts)): a split key's state is kept
    /// per partition, so [`EpochChange::moved_out`] and the partition of a split key (its first
    /// part) say little about it.
    #[must_use]
    pub fn split_before(&self, key: &[u8]) -> Option<Vec<u32>> {
        split_under(self.prev, key, self.partitions)
    }

    /// The key's partitions after the change if it is split now.
    #[must_use]
    pub fn split_after(&self, key: &[u8]) -> Option<Vec<u32>> {
        split_under(Some(self.next), key, self.partitions)
    }

    /// The key's partition before the change.
    #[must_use]
    pub fn partition_before(&self, key: &[u8]) -> u32 {
        partition_under(self.prev, key, self.partitions)
    }

    /// The key's partition after the change.
    #[must_use]
    pub fn partition_after(&self, key: &[u8]) -> u32 {
        partition_under(Some(self.next), key, self.partitions)
    }

    /// The key changed partition.
    #[must_use]
    pub fn moved(&self, key: &[u8]) -> bool {
        self.partition_before(key) != self.partition_after(key)
    }

    /// The key lived on [`partition`](Self::partition) and now lives on a partition this member
    /// does not own: another member processes it from now on.
    #[must_use]
    pub fn moved_out(&self, key: &[u8]) -> bool {
        self.partition_before(key) == self.partition
            && !self.owned.contains(&self.partition_after(key))
    }

    /// The key lived on a partition of another member and now lives on one of this member's.
    #[must_use]
    pub fn moved_in(&self, key: &[u8]) -> bool {
        !self.owned.contains(&self.partition_before(key))
            && self.owned.contains(&self.partition_after(key))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use dkg_kafka_core::fixtures;
    use dkg_kafka_core::hash::kafka_partition;

    fn a(epoch: u64, hot_on: u32) -> Assignment {
        fixtures::with_hot_key(4, epoch, vec![0; 4], hot_on)
    }

    #[test]
    fn moved_in_and_out_table() {
        let (prev, next) = (a(1, 1), a(2, 3));
        // (owned, drained partition, key, moved, moved_out, moved_in)
        type Case<'a> = (&'a [u32], u32, &'a [u8], bool, bool, bool);
        let cases: [Case<'_>; 5] = [
            (&[0, 1], 1, b"hot", true, true, false),
            (&[2, 3], 1, b"hot", true, false, true),
            (&[1, 3], 1, b"hot", true, false, false),
            (&[0, 1], 0, b"hot", true, false, false),
            (&[0, 1], 0, b"cold", false, false, false),
        ];
        for (owned, partition, key, moved, out, inn) in cases {
            let c = EpochChange {
                prev: Some(&prev),
                next: &next,
                partition,
                owned,
                partitions: 4,
            };
            assert_eq!(
                (c.moved(key), c.moved_out(key), c.moved_in(key)),
                (moved, out, inn),
                "{owned:?} {partition} {key:?}"
            );
        }
        let first = EpochChange {
            prev: None,
            next: &next,
            partition: 0,
            owned: &[0],
            partitions: 4,
        };
        assert_eq!(first.partition_before(b"hot"), kafka_partition(b"hot", 4));
        assert_eq!(first.epoch(), 2);
        assert_eq!(first.split_before(b"hot"), None);

        // A split key: its parts, and its first part as its partition (asking does not spread).
        let mut parts = a(3, 2).into_parts();
        parts.heavy[0].split = [2, 0]
            .map(|partition| dkg_kafka_core::assignment::SplitPart {
                partition,
                weight: 1,
            })
            .to_vec();
        let split = Assignment::new(parts).unwrap();
        let c = EpochChange {
            prev: Some(&split),
            next: &prev,
            partition: 2,
            owned: &[2],
            partitions: 4,
        };
        assert_eq!(c.split_before(b"hot"), Some(vec![2, 0]));
        assert_eq!(c.split_after(b"hot"), None);
        assert_eq!(c.split_before(b"cold"), None);
        for _ in 0..3 {
            assert_eq!(c.partition_before(b"hot"), 2);
        }
        assert!(c.moved(b"hot"), "split over 2 and 0, now whole on 1");
    }
}
