//! Where a key lived in recent epochs: the assignments of the last epochs (from the control
//! topic and the handoff topic's `assignment/<topic>/<epoch>` records), plus epoch 0 = Kafka's
//! default placement (records without an epoch header). A split heavy key (`docs/spec.md`
//! 4.6) lives on all of its parts at once: [`History::place`] says which. Pure.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use dkg_kafka_core::assignment::Assignment;
use dkg_kafka_core::hash::kafka_partition;

/// The split keys of one assignment: key -> the partitions of its parts (document order).
pub type SplitKeys = HashMap<Box<[u8]>, Box<[u32]>, ahash::RandomState>;

/// The split keys of `a` (empty for most assignments). Read from the heavy entries once per
/// epoch, so that asking never goes through the lookup (whose split route advances a spread).
pub fn split_keys(a: &Assignment) -> SplitKeys {
    a.heavy()
        .iter()
        .filter(|h| h.is_split())
        .map(|h| {
            let parts: Box<[u32]> = h.split.iter().map(|s| s.partition).collect();
            (Box::from(h.key.as_slice()), parts)
        })
        .collect()
}

/// Where a key's records went under one epoch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place<'a> {
    /// One partition (key grouping).
    Whole(u32),
    /// Spread over these partitions (a split heavy key).
    Split(&'a [u32]),
}

impl Place<'_> {
    /// Whether records of the key can be on `partition` under this placement.
    pub fn holds(&self, partition: u32) -> bool {
        match self {
            Place::Whole(p) => *p == partition,
            Place::Split(parts) => parts.contains(&partition),
        }
    }
}

/// Default number of epochs kept.
pub const DEFAULT_KEEP: usize = 32;

/// The key's homes over a range of epochs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Homes {
    /// Every home is known (deduplicated, any order).
    Known(Vec<u32>),
    /// Some epoch of the range is unknown (never seen, or older than the history kept).
    Unknown,
}

/// Recent assignments of one topic.
#[derive(Debug)]
pub struct History {
    partitions: u32,
    epochs: BTreeMap<u64, Arc<Assignment>>,
    /// The split keys of the epochs that have any (same keys as `epochs`, subset).
    splits: BTreeMap<u64, SplitKeys>,
    keep: usize,
}

impl History {
    pub fn new(partitions: u32, keep: usize) -> Self {
        Self {
            partitions,
            epochs: BTreeMap::new(),
            splits: BTreeMap::new(),
            keep: keep.max(2),
        }
    }

    /// The topic's partition count (homes under assignments for another count are Kafka's
    /// default placement: producers fall back to it).
    pub fn set_partitions(&mut self, partitions: u32) {
        self.partitions = partitions;
    }

    /// Add an epoch's assignment; `false` if it was known. Keeps the newest `keep` epochs.
    pub fn insert(&mut self, a: Arc<Assignment>) -> bool {
        let epoch = a.epoch();
        if epoch == 0 || self.epochs.contains_key(&epoch) {
            return false;
        }
        let splits = split_keys(&a);
        if !splits.is_empty() {
            self.splits.insert(epoch, splits);
        }
        self.epochs.insert(epoch, a);
        while self.epochs.len() > self.keep {
            if let Some((old, _)) = self.epochs.pop_first() {
                self.splits.remove(&old);
            }
        }
        true
    }

    /// Whether some epoch kept splits a key.
    pub fn has_splits(&self) -> bool {
        !self.splits.is_empty()
    }

    /// The split keys of every epoch kept that has any.
    pub fn splits(&self) -> &BTreeMap<u64, SplitKeys> {
        &self.splits
    }

    /// The parts of `key` if it is split under `epoch` (in effect only when the assignment is
    /// for the topic's partition count: otherwise producers place by Kafka's hash).
    #[inline]
    pub fn split_parts(&self, key: &[u8], epoch: u64) -> Option<&[u32]> {
        if self.splits.is_empty() {
            return None;
        }
        let parts = self.splits.get(&epoch)?.get(key)?;
        let a = self.epochs.get(&epoch)?;
        (a.partitions() == self.partitions).then_some(&**parts)
    }

    /// Where `key`'s records went under `epoch` (`None` = the epoch is unknown).
    #[inline]
    pub fn place(&self, key: &[u8], epoch: u64) -> Option<Place<'_>> {
        if let Some(parts) = self.split_parts(key, epoch) {
            return Some(Place::Split(parts));
        }
        self.home(key, epoch).map(Place::Whole)
    }

    /// The newest epoch known (0 = none).
    pub fn max_epoch(&self) -> u64 {
        self.epochs.last_key_value().map_or(0, |(&e, _)| e)
    }

    /// The oldest epoch kept (0 = none).
    pub fn min_epoch(&self) -> u64 {
        self.epochs.first_key_value().map_or(0, |(&e, _)| e)
    }

    pub fn get(&self, epoch: u64) -> Option<&Arc<Assignment>> {
        self.epochs.get(&epoch)
    }

    /// The newest assignment of an epoch below `epoch`.
    pub fn before(&self, epoch: u64) -> Option<&Arc<Assignment>> {
        self.epochs.range(..epoch).next_back().map(|(_, a)| a)
    }

    /// History records of epochs strictly below this one may be removed from the handoff topic
    /// (garbage collection): they are older than the newest `keep` epochs.
    pub fn collectable_below(&self) -> u64 {
        self.epochs
            .keys()
            .rev()
            .nth(self.keep.saturating_sub(1))
            .copied()
            .unwrap_or(0)
    }

    /// Where `key` lived under `epoch` (`None` = unknown) if it was whole; for a split key the
    /// partition of its first part ([`History::place`] tells them apart). Epoch 0 = Kafka's
    /// default placement.
    #[inline]
    pub fn home(&self, key: &[u8], epoch: u64) -> Option<u32> {
        if let Some(parts) = self.split_parts(key, epoch) {
            return parts.first().copied();
        }
        if epoch == 0 {
            return Some(kafka_partition(key, self.partitions));
        }
        let a = self.epochs.get(&epoch)?;
        Some(if a.partitions() == self.partitions {
            a.partition_for(key)
        } else {
            kafka_partition(key, self.partitions)
        })
    }

    /// Homes of `key` under every epoch in `from..to`, every part of a split key included.
    /// Unknown when the range is longer than the history kept or an epoch in it is missing (gaps
    /// are treated as unknown, never as "stayed").
    pub fn homes(&self, key: &[u8], from: u64, to: u64) -> Homes {
        self.homes_where(key, from, to, true)
    }

    /// [`History::homes`] without the epochs in which `key` was split: what a split record waits
    /// for (order among a split key's records is not kept, only against its whole records).
    pub fn whole_homes(&self, key: &[u8], from: u64, to: u64) -> Homes {
        self.homes_where(key, from, to, false)
    }

    fn homes_where(&self, key: &[u8], from: u64, to: u64, with_split: bool) -> Homes {
        if from >= to {
            return Homes::Known(Vec::new());
        }
        if to - from > self.keep as u64 + 1 {
            return Homes::Unknown;
        }
        let mut out: Vec<u32> = Vec::with_capacity(2);
        let mut add = |p: u32| {
            if !out.contains(&p) {
                out.push(p);
            }
        };
        for epoch in from..to {
            match self.place(key, epoch) {
                Some(Place::Whole(p)) => add(p),
                Some(Place::Split(parts)) => {
                    if with_split {
                        parts.iter().copied().for_each(&mut add);
                    }
                }
                None => return Homes::Unknown,
            }
        }
        Homes::Known(out)
    }
}

/// The partition of `key` under `a` on a topic of `partitions` (`None`, or an assignment for another
/// partition count: Kafka's default placement); for a split key the partition of its first part, without
/// advancing its spread. One rule for every hook that says where a key was and is (the glue's
/// `EpochChange`, the Python binding's, the conformance driver's).
#[must_use]
pub fn partition_under(a: Option<&Assignment>, key: &[u8], partitions: u32) -> u32 {
    match a {
        Some(a) if a.partitions() == partitions => match a.split_of(key) {
            Some(parts) => parts.first().map_or(0, |s| s.partition),
            None => a.partition_for(key),
        },
        _ => kafka_partition(key, partitions),
    }
}

/// The partitions of `key` under `a` if `a` splits it on a topic of `partitions`.
#[must_use]
pub fn split_under(a: Option<&Assignment>, key: &[u8], partitions: u32) -> Option<Vec<u32>> {
    let a = a.filter(|a| a.partitions() == partitions)?;
    Some(a.split_of(key)?.iter().map(|s| s.partition).collect())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use dkg_kafka_core::fixtures;

    fn a(epoch: u64, hot_on: u32) -> Arc<Assignment> {
        Arc::new(fixtures::with_hot_key(4, epoch, vec![0, 1, 2, 3], hot_on))
    }

    #[test]
    fn homes_over_ranges() {
        let mut h = History::new(4, 3);
        assert!(h.insert(a(1, 0)));
        assert!(!h.insert(a(1, 0)));
        h.insert(a(2, 3));
        h.insert(a(3, 3));
        assert_eq!(h.max_epoch(), 3);
        assert_eq!(h.home(b"hot", 0), Some(kafka_partition(b"hot", 4)));
        // (from, to, expected)
        let cases = [
            (3, 3, Homes::Known(vec![])),
            (2, 3, Homes::Known(vec![3])),
            (1, 3, Homes::Known(vec![0, 3])),
            (1, 4, Homes::Known(vec![0, 3])),
            (1, 5, Homes::Unknown), // epoch 4 unknown
            (0, 2, Homes::Known(vec![kafka_partition(b"hot", 4), 0])),
        ];
        for (from, to, want) in cases {
            let mut got = h.homes(b"hot", from, to);
            if let Homes::Known(v) = &mut got {
                if from == 0 {
                    // order of first appearance
                } else {
                    v.sort_unstable();
                }
            }
            assert_eq!(got, want, "{from}..{to}");
        }
        // Keeps the newest 3: adding epoch 4 forgets epoch 1.
        h.insert(a(4, 1));
        assert_eq!(h.min_epoch(), 2);
        assert_eq!(h.homes(b"hot", 1, 3), Homes::Unknown);
        assert_eq!(h.before(4).unwrap().epoch(), 3);
        assert_eq!(h.collectable_below(), 2);
        // An assignment for another partition count places by Kafka's hash.
        h.set_partitions(8);
        assert_eq!(h.home(b"hot", 4), Some(kafka_partition(b"hot", 8)));
    }
}
