//! Where a key lived in recent epochs: the assignments of the last epochs (from the control
//! topic and the handoff topic's `assignment/<topic>/<epoch>` records), plus epoch 0 = Kafka's
//! default placement (records without an epoch header). Pure.

use std::collections::BTreeMap;
use std::sync::Arc;

use dkg_core::assignment::Assignment;
use dkg_core::hash::kafka_partition;

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
    keep: usize,
}

impl History {
    pub fn new(partitions: u32, keep: usize) -> Self {
        Self {
            partitions,
            epochs: BTreeMap::new(),
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
        self.epochs.insert(epoch, a);
        while self.epochs.len() > self.keep {
            self.epochs.pop_first();
        }
        true
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

    /// Where `key` lived under `epoch` (`None` = unknown). Epoch 0 = Kafka's default placement.
    #[inline]
    pub fn home(&self, key: &[u8], epoch: u64) -> Option<u32> {
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

    /// Homes of `key` under every epoch in `from..to`. Unknown when the range is longer than the
    /// history kept or an epoch in it is missing (gaps are treated as unknown, never as "stayed").
    pub fn homes(&self, key: &[u8], from: u64, to: u64) -> Homes {
        if from >= to {
            return Homes::Known(Vec::new());
        }
        if to - from > self.keep as u64 + 1 {
            return Homes::Unknown;
        }
        let mut out: Vec<u32> = Vec::with_capacity(2);
        for epoch in from..to {
            match self.home(key, epoch) {
                Some(p) => {
                    if !out.contains(&p) {
                        out.push(p);
                    }
                }
                None => return Homes::Unknown,
            }
        }
        Homes::Known(out)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use dkg_core::fixtures;

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
