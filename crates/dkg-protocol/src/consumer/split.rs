//! Split heavy keys on the consumer side (`docs/spec.md` 4.6; rules C14-C18 of 9.3): which records of a key are split, over how many partitions, and which
//! of them wait at a transition. Pure; the core ([`super::core`]) and the fast path
//! ([`super::lane`]) share one [`SplitView`].
//!
//! Split records carry no `dkg-epoch` header, so their epoch is bounded instead: a record fetched
//! from a partition that has drained `D` has an epoch of at least `D` (every awaited producer's
//! marker of `D` ends at or below it) and, since producers adopt an epoch only after the previous
//! switch drained (the condition the default `EpochHeader::Moved` already needs), at most `D + 1`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use super::history::History;

/// Key -> (epoch, parts) for every epoch kept in which the key is split, epochs ascending.
type ByKey = HashMap<Box<[u8]>, Vec<(u64, Box<[u32]>)>, ahash::RandomState>;

/// The split keys of every epoch kept, by key.
#[derive(Debug, Default)]
pub struct SplitView {
    keys: ByKey,
}

impl SplitView {
    /// The view of `history`'s split keys.
    pub fn new(history: &History) -> Self {
        let mut keys = ByKey::default();
        for (&epoch, split) in history.splits() {
            for key in split.keys() {
                // Through `split_parts`: an assignment for another partition count splits nothing.
                if let Some(parts) = history.split_parts(key, epoch) {
                    keys.entry(key.clone())
                        .or_default()
                        .push((epoch, Box::from(parts)));
                }
            }
        }
        Self { keys }
    }

    /// No key is split in any epoch kept (the common case: nothing to look up).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The newest epoch in `drained..=drained + 1` under which a record of `key` on `partition`
    /// can be a split record, with the number of parts.
    #[inline]
    pub fn split_epoch(&self, key: &[u8], partition: u32, drained: u64) -> Option<(u64, u32)> {
        if self.keys.is_empty() {
            return None;
        }
        self.keys
            .get(key)?
            .iter()
            .rev()
            .filter(|(e, parts)| {
                (drained..=drained.saturating_add(1)).contains(e) && parts.contains(&partition)
            })
            .map(|(e, parts)| (*e, parts.len() as u32))
            .next()
    }

    /// The number of partitions `key` is split over in the record's epoch, `None` if it is whole
    /// there: for a stamped record (`epoch`) its split in that epoch; for an unstamped one on a
    /// partition that drained `drained`, [`SplitView::split_epoch`]'s (when that epoch is
    /// ambiguous, split wins: treating a whole record as split is the safe mistake).
    #[inline]
    pub fn label(
        &self,
        key: &[u8],
        partition: u32,
        drained: u64,
        epoch: Option<u64>,
    ) -> Option<u32> {
        if self.keys.is_empty() {
            return None;
        }
        match epoch {
            Some(e) => self
                .keys
                .get(key)?
                .iter()
                .find(|(x, _)| *x == e)
                .map(|(_, parts)| parts.len() as u32),
            None => self.split_epoch(key, partition, drained).map(|(_, n)| n),
        }
    }

    /// Whether a split record on `partition` (drained `drained`) may have to wait: some key is
    /// split under an epoch it can be of that the group has not settled yet (the key's whole
    /// records of earlier epochs may still be unprocessed elsewhere). The fast path stays shut
    /// there until the transition settled.
    pub fn in_transition(&self, partition: u32, drained: u64, settled: u64) -> bool {
        self.keys.values().flatten().any(|(e, parts)| {
            *e > settled
                && (drained..=drained.saturating_add(1)).contains(e)
                && parts.contains(&partition)
        })
    }
}

/// A key became split, was split differently, or became whole again, in `epoch` (for the
/// consumer's hooks; see [`super::core::Core::take_split_changes`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitChange {
    pub key: Box<[u8]>,
    pub epoch: u64,
    /// The parts' partitions from `epoch` on; empty: the key is whole again.
    pub parts: Box<[u32]>,
    /// The whole key's partition from `epoch` on (when whole again).
    pub partition: Option<u32>,
}

/// The view as published to the consuming side: the core swaps it, the fast path re-reads it only
/// when the version moved (one atomic load per record otherwise).
#[derive(Debug, Default)]
pub struct SharedView {
    version: AtomicU64,
    view: Mutex<Arc<SplitView>>,
}

impl SharedView {
    /// Publish a new view.
    pub fn set(&self, view: Arc<SplitView>) {
        *self
            .view
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = view;
        self.version.fetch_add(1, Ordering::AcqRel);
    }

    /// The current version.
    #[inline]
    pub fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// The current view.
    pub fn get(&self) -> Arc<SplitView> {
        Arc::clone(
            &self
                .view
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }
}

#[cfg(test)]
pub(crate) mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use dkg_kafka_core::assignment::{Assignment, AssignmentParts, HeavyKey, SplitPart};
    use dkg_kafka_core::fixtures;

    /// An assignment of topic `t` over `partitions` whose heavy keys are `places`: a key whole on
    /// its one partition, or split (weights 1) over several. Every bucket on partition 0.
    pub(crate) fn placed(
        partitions: u32,
        epoch: u64,
        places: &[(Vec<u8>, Vec<u32>)],
    ) -> Arc<Assignment> {
        let heavy = places
            .iter()
            .map(|(key, place)| HeavyKey {
                key: key.clone(),
                partition: place[0],
                weight: 1,
                split: if place.len() > 1 {
                    place
                        .iter()
                        .map(|&partition| SplitPart {
                            partition,
                            weight: 1,
                        })
                        .collect()
                } else {
                    Vec::new()
                },
            })
            .collect();
        Arc::new(
            Assignment::new(AssignmentParts {
                topic: "t".into(),
                partitions,
                epoch,
                bucket_hash: Default::default(),
                table: vec![0],
                heavy,
                params: fixtures::params(),
                created_at_ms: 1,
                predicted_load: vec![1.0 / f64::from(partitions); partitions as usize],
            })
            .unwrap(),
        )
    }

    /// Partitions 4; `hot` whole on `place[0]` if `place` has one entry, else split over them.
    fn assignment(epoch: u64, place: &[u32]) -> Arc<Assignment> {
        placed(4, epoch, &[(b"hot".to_vec(), place.to_vec())])
    }

    #[test]
    fn labels_follow_the_epoch_window() {
        // hot: whole on 0 (1), split over 1 and 2 (2), whole on 1 (3), split over 0 and 3 (4).
        let mut h = History::new(4, 8);
        for (e, place) in [(1, &[0][..]), (2, &[1, 2]), (3, &[1]), (4, &[0, 3])] {
            h.insert(assignment(e, place));
        }
        let v = SplitView::new(&h);
        assert!(!v.is_empty());
        // (partition, drained, stamped epoch, label)
        let cases: [(u32, u64, Option<u64>, Option<u32>); 9] = [
            (1, 1, None, Some(2)), // epoch 1 or 2: 2 splits it over 1
            (0, 1, None, None),    // 0 is no part of epoch 2
            (1, 2, None, Some(2)), // epoch 2 (split) or 3 (whole on 1): split wins
            (1, 3, None, None),    // epoch 3 or 4: whole on 1, 4 has no part on 1
            (3, 3, None, Some(2)), // epoch 4 splits it over 0 and 3
            (2, 4, None, None),    // past every split of partition 2
            (0, 0, Some(3), None), // stamped: the epoch is known
            (0, 0, Some(4), Some(2)),
            (0, 0, Some(9), None), // an epoch not kept: nothing known
        ];
        for (p, d, e, want) in cases {
            assert_eq!(v.label(b"hot", p, d, e), want, "p{p} d{d} e{e:?}");
            assert_eq!(v.label(b"cold", p, d, e), None);
        }
        assert_eq!(v.split_epoch(b"hot", 1, 1), Some((2, 2)));
        // Partition 1 in epochs 1..=2, group settled at 1: shut; settled at 2: open.
        assert!(v.in_transition(1, 1, 1));
        assert!(!v.in_transition(1, 1, 2));
        assert!(!v.in_transition(0, 1, 1), "0 is no part of epoch 2");
        // An assignment for another partition count splits nothing.
        h.set_partitions(8);
        assert!(SplitView::new(&h).is_empty());
    }

    #[test]
    fn shared_view_versions() {
        let s = SharedView::default();
        let v0 = s.version();
        assert!(s.get().is_empty());
        let mut h = History::new(4, 8);
        h.insert(assignment(2, &[1, 2]));
        s.set(Arc::new(SplitView::new(&h)));
        assert_ne!(s.version(), v0);
        assert_eq!(s.get().label(b"hot", 2, 2, None), Some(2));
    }
}
