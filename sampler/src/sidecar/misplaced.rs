//! The misplacement detector: does each consumed record sit on the partition that the placement in
//! effect gives its key? A producer without the wrapper or plug-in, one with another partitioner, or
//! one stuck on an old control topic places its keys elsewhere and silently breaks co-location; the
//! wrapped producers' own metrics cannot see it.
//!
//! The check is pure ([`check`]): a record's key, partition, timestamp and (read only when needed)
//! `dkg-epoch` header against the [`Placements`] the control topic had in effect around that time.
//! It allows for
//! - **adoption lag**: producers adopt a publication within about a second, so for
//!   [`ADOPTION_LAG_MS`] after a change both the old and the new placement are right, and a new one is
//!   right from [`CLOCK_SKEW_MS`] before the sampler saw it (record timestamps are the producers' clocks);
//! - **the fallback**: with no assignment in effect (before epoch 1, after a retraction) or one for
//!   another partition count, the right partition is Kafka's murmur2 placement (`docs/spec.md` 5);
//! - **split keys** (format version 2): any of the key's parts is right;
//! - **older epochs**: a record stamped `dkg-epoch: E` (`docs/spec.md` 8; unstamped records are the
//!   default) is checked against epoch `E`'s assignment while the history still holds it, else skipped
//!   ([`Skip::UnknownEpoch`]), as is an unstamped record older than everything the history knows;
//! - **a partition-count change**: producers learn a new count within about 5 s (spec 7.2), so
//!   unstamped records until [`COUNT_SETTLE_MS`] after the sampler saw it are skipped
//!   ([`Skip::Unsettled`]).
//!
//! The common case costs one lookup and a comparison; the headers (a librdkafka parse) are read only
//! when the unstamped check fails. The history reaches the consume thread through a [`PlacementFeed`]:
//! one relaxed atomic load per record, a lock only when it changed.
//!
//! This module is also compiled into the benches (`benches/common/sidecar.rs`, via `#[path]`), so it
//! depends only on the partitioner crate.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use dkg_core::assignment::Assignment;
use dkg_core::hash::kafka_partition;

/// How long after a placement change the superseded placement is still right (ms): producers adopt a
/// publication within about a second (their reader polls every 100 ms), with margin for a slow one.
pub const ADOPTION_LAG_MS: u64 = 2_000;
/// How long before the sampler saw a change the new placement may already be right (ms): record
/// timestamps come from the producers' clocks, and a producer may have read the publication first.
pub const CLOCK_SKEW_MS: u64 = 1_000;
/// How long after a partition-count change unstamped records are not checked (ms): producers refresh
/// the count every 5 s (`docs/spec.md` 7.2).
pub const COUNT_SETTLE_MS: u64 = 10_000;
/// Placements kept for stamped records of older epochs and for records read late.
pub const HISTORY: usize = 16;

/// Unix time in milliseconds (for records without a timestamp and for partition-count changes).
pub fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// One placement in the history: an assignment (or none: Kafka's placement) and from when.
#[derive(Debug, Clone)]
pub struct Placement {
    /// The assignment in effect; `None`: no assignment (fallback).
    pub assignment: Option<Arc<Assignment>>,
    /// Unix ms from which it is in effect (when the sampler saw it; for the state found at start-up,
    /// the document's `created_at_ms`, or 0 with no assignment).
    pub since_ms: u64,
}

/// The placements a topic had, oldest first (at most [`HISTORY`]). Immutable: a change makes a new
/// one ([`Placements::then`]), which the [`PlacementFeed`] hands to the consume thread.
#[derive(Debug, Clone, Default)]
pub struct Placements {
    states: Vec<Placement>,
}

impl Placements {
    /// The history as of start-up: `current` in effect since its `created_at_ms` (nothing known
    /// before), or with no assignment the fallback since the beginning.
    #[must_use]
    pub fn starting(current: Option<Arc<Assignment>>) -> Self {
        let since_ms = current.as_ref().map_or(0, |a| a.created_at_ms());
        Self {
            states: vec![Placement {
                assignment: current,
                since_ms,
            }],
        }
    }

    /// The history with `next` in effect from `now_ms` (unchanged if `next` is what is in effect:
    /// the same epoch, or none after none).
    #[must_use]
    pub fn then(&self, next: Option<Arc<Assignment>>, now_ms: u64) -> Option<Self> {
        let same = match (self.latest(), &next) {
            (Some(Some(a)), Some(b)) => a.epoch() == b.epoch() && a.topic() == b.topic(),
            (Some(None), None) => true,
            _ => false,
        };
        if same {
            return None;
        }
        let mut states = self.states.clone();
        // Never before the previous change: times come from one clock but documents from another.
        let since_ms = states.last().map_or(now_ms, |p| p.since_ms.max(now_ms));
        states.push(Placement {
            assignment: next,
            since_ms,
        });
        if states.len() > HISTORY {
            states.drain(..states.len() - HISTORY);
        }
        Some(Self { states })
    }

    /// The placement in effect now (`None`: the history is empty).
    pub fn latest(&self) -> Option<Option<&Arc<Assignment>>> {
        self.states.last().map(|p| p.assignment.as_ref())
    }

    /// The known assignment of `epoch`, if the history holds it.
    fn epoch(&self, epoch: u64) -> Option<&Assignment> {
        self.states
            .iter()
            .rev()
            .filter_map(|p| p.assignment.as_deref())
            .find(|a| a.epoch() == epoch)
    }
}

/// What the check needs of one consumed record (besides its `dkg-epoch` header).
#[derive(Debug, Clone, Copy)]
pub struct Record<'a> {
    /// The record's key (keyless records are not placed by producers: never checked).
    pub key: &'a [u8],
    /// The partition it was read from.
    pub partition: u32,
    /// Its timestamp (Unix ms; the producer's create time, else when it was read).
    pub timestamp_ms: u64,
    /// The topic's partition count as the sampler knows it.
    pub topic_partitions: u32,
}

/// Why a record was not checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Skip {
    /// Stamped with an epoch the history does not hold, or older than everything it holds.
    UnknownEpoch,
    /// Within [`COUNT_SETTLE_MS`] of a partition-count change.
    Unsettled,
}

impl Skip {
    /// The `reason` label.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::UnknownEpoch => "unknown_epoch",
            Self::Unsettled => "count_changed",
        }
    }
}

/// The verdict on one record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Where a placement in effect puts its key.
    Placed,
    /// Where no placement in effect puts its key.
    Misplaced,
    /// Not checked.
    Skipped(Skip),
}

/// Whether `partition` is right for `key` under `assignment` (or none) with `topic_partitions`
/// partitions (`docs/spec.md` 5): Kafka's placement without an assignment or with a different count,
/// any part of a split key, else the key's heavy or bucket route.
#[inline]
#[must_use]
pub fn placed_by(
    assignment: Option<&Assignment>,
    topic_partitions: u32,
    key: &[u8],
    partition: u32,
) -> bool {
    match assignment {
        Some(a) if a.partitions() == topic_partitions => {
            if a.has_split_keys()
                && let Some(parts) = a.split_of(key)
            {
                return parts.iter().any(|p| p.partition == partition);
            }
            // Not split: the route depends on the key alone (no schedule is advanced).
            a.partition_for(key) == partition
        }
        _ => topic_partitions > 0 && kafka_partition(key, topic_partitions) == partition,
    }
}

/// Check one record against `book`. `epoch` reads its `dkg-epoch` header (`None`: unstamped); it is
/// called only when the placements in effect at the record's time do not explain its partition.
/// `settle_until_ms`: unstamped records before it are skipped (a partition-count change).
pub fn check(
    book: &Placements,
    rec: &Record<'_>,
    settle_until_ms: u64,
    epoch: impl FnOnce() -> Option<u64>,
) -> Verdict {
    let t = rec.timestamp_ms;
    let states = &book.states;
    // Placements in effect at t, newest first: [since - skew, next.since + lag].
    let mut known = false;
    let mut until = u64::MAX;
    for p in states.iter().rev() {
        let from = p.since_ms.saturating_sub(CLOCK_SKEW_MS);
        let to = until.saturating_add(ADOPTION_LAG_MS);
        if t > to {
            break;
        }
        if t >= from {
            known = true;
            if placed_by(
                p.assignment.as_deref(),
                rec.topic_partitions,
                rec.key,
                rec.partition,
            ) {
                return Verdict::Placed;
            }
        }
        until = p.since_ms;
    }
    match epoch() {
        // A stamp names the placement: the heavy or bucket route of that epoch's document.
        Some(e) => match book.epoch(e) {
            Some(a) if placed_by(Some(a), a.partitions(), rec.key, rec.partition) => {
                Verdict::Placed
            }
            Some(_) => Verdict::Misplaced,
            None => Verdict::Skipped(Skip::UnknownEpoch),
        },
        None if t < settle_until_ms => Verdict::Skipped(Skip::Unsettled),
        None if !known => Verdict::Skipped(Skip::UnknownEpoch),
        None => Verdict::Misplaced,
    }
}

/// One interval's verdicts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PlacementCounts {
    /// Records checked (placed + misplaced).
    pub checked: u64,
    /// Records checked and misplaced.
    pub misplaced: u64,
    /// Records not checked: stamped with an unknown epoch or older than the history.
    pub unknown_epoch: u64,
    /// Records not checked: within the settling time of a partition-count change.
    pub unsettled: u64,
}

impl PlacementCounts {
    /// Count one verdict.
    #[inline]
    pub fn add(&mut self, v: Verdict) {
        match v {
            Verdict::Placed => self.checked += 1,
            Verdict::Misplaced => {
                self.checked += 1;
                self.misplaced += 1;
            }
            Verdict::Skipped(Skip::UnknownEpoch) => self.unknown_epoch += 1,
            Verdict::Skipped(Skip::Unsettled) => self.unsettled += 1,
        }
    }

    /// Misplaced / checked (0 when nothing was checked).
    #[must_use]
    pub fn ratio(&self) -> f64 {
        if self.checked == 0 {
            0.0
        } else {
            self.misplaced as f64 / self.checked as f64
        }
    }
}

/// Fewest records an interval must have checked before its ratio warns (a handful of records in a
/// quiet interval says little).
pub const MIN_CHECKED_TO_WARN: u64 = 100;

/// The warning for an interval's counts if its misplaced share is above `threshold`
/// (`--misplaced-warn-ratio`), naming the likely causes.
#[must_use]
pub fn warning(c: &PlacementCounts, threshold: f64) -> Option<String> {
    (c.checked >= MIN_CHECKED_TO_WARN && c.ratio() > threshold).then(|| {
        format!(
            "{} of {} keyed records checked in the last interval ({:.1}%, above \
             --misplaced-warn-ratio {threshold}) are not on the partition the assignment in effect \
             gives their key: likely a producer without the DKG wrapper or plug-in, a producer with \
             another partitioner, or a producer stuck on an old control topic",
            c.misplaced,
            c.checked,
            100.0 * c.ratio()
        )
    })
}

/// The latest [`Placements`], from the control-topic view to the consume thread.
#[derive(Debug, Default)]
pub struct PlacementFeed {
    version: AtomicU64,
    latest: Mutex<Arc<Placements>>,
}

impl PlacementFeed {
    /// Hand over `placements` (the consume thread takes them before its next record) unless they are
    /// what was handed over last.
    pub fn offer(&self, placements: Arc<Placements>) {
        let mut latest = self
            .latest
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !Arc::ptr_eq(&latest, &placements) {
            *latest = placements;
            self.version.fetch_add(1, Ordering::Release);
        }
    }

    /// The latest placements if they changed since `seen` (updated). One relaxed load otherwise.
    #[inline]
    pub fn newer(&self, seen: &mut u64) -> Option<Arc<Placements>> {
        let v = self.version.load(Ordering::Acquire);
        if v == *seen {
            return None;
        }
        *seen = v;
        Some(Arc::clone(
            &self
                .latest
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        ))
    }
}

/// The consume thread's detector: the placements it knows, the topic's count and the interval's counts.
#[derive(Debug)]
pub struct Detector {
    feed: Arc<PlacementFeed>,
    seen: u64,
    book: Arc<Placements>,
    partitions: u32,
    settle_until_ms: u64,
    counts: PlacementCounts,
}

impl Detector {
    /// A detector fed by `feed` for a topic of `partitions` partitions.
    pub fn new(feed: Arc<PlacementFeed>, partitions: u32) -> Self {
        let mut seen = 0;
        let book = feed.newer(&mut seen).unwrap_or_default();
        Self {
            feed,
            seen,
            book,
            partitions,
            settle_until_ms: 0,
            counts: PlacementCounts::default(),
        }
    }

    /// The topic now has `partitions` partitions (seen at `now_ms`).
    pub fn reset(&mut self, partitions: u32, now_ms: u64) {
        if partitions != self.partitions {
            self.partitions = partitions;
            self.settle_until_ms = now_ms.saturating_add(COUNT_SETTLE_MS);
        }
    }

    /// Check one keyed record (see [`check`]).
    #[inline]
    pub fn observe(
        &mut self,
        key: &[u8],
        partition: i32,
        timestamp_ms: u64,
        epoch: impl FnOnce() -> Option<u64>,
    ) {
        if let Some(book) = self.feed.newer(&mut self.seen) {
            self.book = book;
        }
        let Ok(partition) = u32::try_from(partition) else {
            return;
        };
        if partition >= self.partitions {
            // The topic grew before the driver's metadata said so: producers that know the new
            // count place by it from now on.
            self.settle_until_ms = self
                .settle_until_ms
                .max(wall_ms().saturating_add(COUNT_SETTLE_MS));
            self.counts.add(Verdict::Skipped(Skip::Unsettled));
            return;
        }
        let rec = Record {
            key,
            partition,
            timestamp_ms,
            topic_partitions: self.partitions,
        };
        self.counts
            .add(check(&self.book, &rec, self.settle_until_ms, epoch));
    }

    /// The interval's counts; the next interval starts from zero.
    pub fn take(&mut self) -> PlacementCounts {
        std::mem::take(&mut self.counts)
    }
}

#[cfg(test)]
mod tests {
    use dkg_core::assignment::{AssignmentParts, HeavyKey, SplitPart};
    use dkg_core::dkg::{DkgConfig, Sketch};
    use proptest::prelude::*;

    use super::*;

    const K: u32 = 4;

    /// An assignment of epoch `epoch` with a shuffled table (so most keys leave Kafka's placement),
    /// the heavy key `hot` on partition 3 and, if `split`, the key `wide` split over 1 and 2.
    fn assignment(epoch: u64, created_at_ms: u64, split: bool) -> Arc<Assignment> {
        let mut sketch = Sketch::new(&DkgConfig::default(), K).expect("a sketch");
        for i in 0..2000 {
            sketch.observe(if i % 3 == 0 { b"hot" } else { b"cold" });
        }
        let built = sketch
            .build("t", epoch, created_at_ms, None)
            .expect("built");
        let mut parts: AssignmentParts = built.assignment.into_parts();
        let shift = u32::try_from(epoch).expect("small");
        for (b, p) in parts.table.iter_mut().enumerate() {
            *p = (u32::try_from(b).expect("small") * 7 + shift) % K;
        }
        parts.heavy = vec![HeavyKey::whole(b"hot".to_vec(), 3, 100)];
        if split {
            parts.heavy.push(HeavyKey {
                key: b"wide".to_vec(),
                partition: 1,
                weight: 50,
                split: vec![
                    SplitPart {
                        partition: 1,
                        weight: 1,
                    },
                    SplitPart {
                        partition: 2,
                        weight: 1,
                    },
                ],
            });
        }
        Arc::new(Assignment::new(parts).expect("a valid assignment"))
    }

    /// A key `a` places on `want` (and, if `other` is given, not on it).
    fn key_where(a: &Assignment, want: u32, not_kafka: bool) -> Vec<u8> {
        (0..10_000)
            .map(|i| format!("k{i}").into_bytes())
            .find(|k| a.partition_for(k) == want && (!not_kafka || kafka_partition(k, K) != want))
            .expect("a key")
    }

    #[test]
    fn verdict_table() {
        let a1 = assignment(1, 1_000, false);
        let a2 = assignment(2, 50_000, true);
        // Fallback since 0, epoch 1 seen at 10 s, epoch 2 at 60 s, retracted at 100 s.
        let book = Placements::starting(None)
            .then(Some(Arc::clone(&a1)), 10_000)
            .and_then(|b| b.then(Some(Arc::clone(&a2)), 60_000))
            .and_then(|b| b.then(None, 100_000))
            .expect("changes");
        // A key that epoch 1 places off Kafka's placement, and where each placement puts it.
        let k1 = key_where(&a1, 0, true);
        let (kafka, p1, p2) = (
            kafka_partition(&k1, K),
            a1.partition_for(&k1),
            a2.partition_for(&k1),
        );
        assert_ne!(kafka, p1);
        let wrong = (0..K)
            .find(|p| ![kafka, p1, p2].contains(p))
            .expect("a partition no placement gives");
        type Case<'a> = (&'a str, &'a [u8], u32, u64, Option<u64>, u64, Verdict);
        let unknown = Verdict::Skipped(Skip::UnknownEpoch);
        // (what, key, partition, timestamp, dkg-epoch, settle until, verdict)
        let cases: Vec<Case<'_>> = vec![
            (
                "fallback before epoch 1",
                &k1,
                kafka,
                5_000,
                None,
                0,
                Verdict::Placed,
            ),
            (
                "epoch 1's placement before it",
                &k1,
                p1,
                5_000,
                None,
                0,
                Verdict::Misplaced,
            ),
            ("epoch 1", &k1, p1, 20_000, None, 0, Verdict::Placed),
            (
                "Kafka's placement under epoch 1",
                &k1,
                kafka,
                20_000,
                None,
                0,
                Verdict::Misplaced,
            ),
            (
                "adoption lag: fallback just after epoch 1",
                &k1,
                kafka,
                11_500,
                None,
                0,
                Verdict::Placed,
            ),
            (
                "clock skew: epoch 1 just before it was seen",
                &k1,
                p1,
                9_500,
                None,
                0,
                Verdict::Placed,
            ),
            (
                "stamped epoch 1 long after",
                &k1,
                p1,
                80_000,
                Some(1),
                0,
                Verdict::Placed,
            ),
            (
                "stamped epoch 1, wrong partition",
                &k1,
                wrong,
                80_000,
                Some(1),
                0,
                Verdict::Misplaced,
            ),
            (
                "stamped unknown epoch",
                &k1,
                wrong,
                80_000,
                Some(9),
                0,
                unknown,
            ),
            (
                "heavy key in epoch 2",
                b"hot",
                3,
                70_000,
                None,
                0,
                Verdict::Placed,
            ),
            (
                "split key, first part",
                b"wide",
                1,
                70_000,
                None,
                0,
                Verdict::Placed,
            ),
            (
                "split key, second part",
                b"wide",
                2,
                70_000,
                None,
                0,
                Verdict::Placed,
            ),
            (
                "split key, no part",
                b"wide",
                if kafka_partition(b"wide", K) == 0 {
                    3
                } else {
                    0
                },
                70_000,
                None,
                0,
                Verdict::Misplaced,
            ),
            (
                "retracted: fallback",
                &k1,
                kafka,
                120_000,
                None,
                0,
                Verdict::Placed,
            ),
            (
                "retracted: epoch 2 after the lag",
                &k1,
                wrong,
                120_000,
                None,
                0,
                Verdict::Misplaced,
            ),
            (
                "count changing: unstamped skipped",
                &k1,
                wrong,
                120_000,
                None,
                130_000,
                Verdict::Skipped(Skip::Unsettled),
            ),
            (
                "count changing: stamped still checked",
                &k1,
                wrong,
                120_000,
                Some(2),
                130_000,
                if p2 == wrong {
                    Verdict::Placed
                } else {
                    Verdict::Misplaced
                },
            ),
        ];
        for (what, key, partition, t, epoch, settle, want) in cases {
            let rec = Record {
                key,
                partition,
                timestamp_ms: t,
                topic_partitions: K,
            };
            assert_eq!(check(&book, &rec, settle, || epoch), want, "{what}");
        }
        // An assignment for another count places nothing: Kafka's placement over the topic's count.
        let rec = Record {
            key: &k1,
            partition: kafka_partition(&k1, K + 2),
            timestamp_ms: 70_000,
            topic_partitions: K + 2,
        };
        assert_eq!(check(&book, &rec, 0, || None), Verdict::Placed);
    }

    #[test]
    fn records_older_than_the_history_are_skipped() {
        let a = assignment(5, 40_000, false);
        let book = Placements::starting(Some(Arc::clone(&a)));
        let k = key_where(&a, 1, true);
        let rec = |partition, timestamp_ms| Record {
            key: &k,
            partition,
            timestamp_ms,
            topic_partitions: K,
        };
        let kafka = kafka_partition(&k, K);
        // Before epoch 5 was created: its producer's placement is unknown.
        assert_eq!(
            check(&book, &rec(kafka, 10_000), 0, || None),
            Verdict::Skipped(Skip::UnknownEpoch)
        );
        assert_eq!(check(&book, &rec(1, 50_000), 0, || None), Verdict::Placed);
        assert_eq!(
            check(&book, &rec(kafka, 50_000), 0, || None),
            Verdict::Misplaced
        );
        // The history is bounded; the same epoch is no change.
        assert!(book.then(Some(Arc::clone(&a)), 60_000).is_none());
        let mut b = book;
        for e in 6..40 {
            b = b
                .then(Some(assignment(e, 0, false)), 60_000 + e)
                .expect("a change");
        }
        assert_eq!(b.states.len(), HISTORY);
        assert!(b.epoch(5).is_none());
    }

    #[test]
    fn the_feed_hands_over_changes_once() {
        let feed = Arc::new(PlacementFeed::default());
        let mut d = Detector::new(Arc::clone(&feed), K);
        let a = assignment(1, 0, false);
        feed.offer(Arc::new(Placements::starting(Some(Arc::clone(&a)))));
        let k = key_where(&a, 2, true);
        d.observe(&k, 2, 1_000, || None);
        d.observe(
            &k,
            i32::try_from(kafka_partition(&k, K)).expect("small"),
            1_000,
            || None,
        );
        assert_eq!(
            d.take(),
            PlacementCounts {
                checked: 2,
                misplaced: 1,
                ..PlacementCounts::default()
            }
        );
        assert_eq!(d.take(), PlacementCounts::default());
        // A partition beyond the known count: the topic grew before the driver said so.
        d.observe(&k, i32::try_from(K).expect("small"), 1_000, || None);
        assert_eq!(d.take().unsettled, 1);
        d.settle_until_ms = 0;
        d.reset(K + 1, 5_000);
        let off = (kafka_partition(&k, K + 1) + 1) % (K + 1);
        d.observe(&k, i32::try_from(off).expect("small"), 6_000, || None);
        assert_eq!(d.take().unsettled, 1);
    }

    #[test]
    fn warns_above_the_threshold_with_enough_records() {
        let c = |checked, misplaced| PlacementCounts {
            checked,
            misplaced,
            ..PlacementCounts::default()
        };
        // (counts, threshold, warns?)
        for (counts, threshold, warns) in [
            (c(1000, 11), 0.01, true),
            (c(1000, 10), 0.01, false),
            (c(99, 50), 0.01, false),
            (c(100, 2), 0.01, true),
            (c(1000, 1000), 1.0, false),
            (c(0, 0), 0.0, false),
        ] {
            let w = warning(&counts, threshold);
            assert_eq!(w.is_some(), warns, "{counts:?} {threshold}");
            if let Some(w) = w {
                assert!(w.contains("without the DKG wrapper") && w.contains("old control topic"));
            }
        }
    }

    proptest! {
        /// Records placed by the core's own lookup (or Kafka's placement where the spec says so) are
        /// never misplaced, whatever the key, the time or the history.
        #[test]
        fn placed_by_the_core_is_never_misplaced(
            keys in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 1..50),
            epochs in 1_u64..6,
            at in 0_u64..200_000,
            stamped in any::<bool>(),
        ) {
            let mut book = Placements::starting(None);
            let mut all = vec![None];
            for e in 1..=epochs {
                let a = assignment(e, 0, e % 2 == 0);
                book = book.then(Some(Arc::clone(&a)), e * 30_000).expect("a change");
                all.push(Some(a));
            }
            // The placement in effect at `at`.
            let idx = usize::try_from((at / 30_000).min(epochs)).expect("small");
            let a = all[idx].clone();
            for key in &keys {
                let partition = match &a {
                    Some(a) => a.partition_for(key),
                    None => kafka_partition(key, K),
                };
                let epoch = a.as_ref().filter(|a| stamped && a.split_of(key).is_none()).map(|a| a.epoch());
                let rec = Record { key, partition, timestamp_ms: at, topic_partitions: K };
                prop_assert_eq!(check(&book, &rec, 0, || epoch), Verdict::Placed);
            }
        }
    }
}
