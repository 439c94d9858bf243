//! `passed[P][y]` bookkeeping for one partition P: which producers' markers the group has passed,
//! what the partition has therefore drained, and the commit metadata that carries both across a
//! change of owner. Pure (no Kafka, no clock: callers pass `now_ms`). The rules are
//! `docs/spec.md` 9.3:
//!
//! - C4 (reached), C5 (passed, also partially for skipped epochs): a **marker** of producer `y`
//!   for `E` ending at `o` here ([`crate::handoff::Marker`]) is reached once every offset below
//!   `o` is fetched and processed or tracked (the committed offset counts), and passed once no
//!   record below `o` with an epoch below `E` is unprocessed. `passed[y]` is the highest passed
//!   epoch, recorded with its end `o`.
//! - C6 (drained): the partition has drained `E` when every producer awaited for `E`
//!   ([`Lease::awaited_for`]: a closed lease also after it expired) has `passed[y] >= E`; `drained` is the highest such `E`, capped at
//!   the newest epoch known.
//! - C11, C12 (skip rules after a change of owner): the metadata's window of unprocessed offsets,
//!   else the previous owner's `passed[y] = (E, o)`: every record below `o` with an epoch below
//!   `E` was processed.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::handoff::{Lease, ProducerId};

/// Commit metadata format version.
const META_VERSION: u64 = 1;

/// Kafka's default `offset.metadata.max.bytes`.
pub const DEFAULT_MAX_METADATA_BYTES: usize = 4096;

/// A passed marker: its epoch and its end on the partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "(u64, i64)", into = "(u64, i64)")]
pub struct PassedAt {
    pub epoch: u64,
    pub offset: i64,
}

impl From<(u64, i64)> for PassedAt {
    fn from((epoch, offset): (u64, i64)) -> Self {
        Self { epoch, offset }
    }
}

impl From<PassedAt> for (u64, i64) {
    fn from(p: PassedAt) -> Self {
        (p.epoch, p.offset)
    }
}

/// What the wrapper stores as the metadata of its offset commits:
/// `{"v":1,"d":<drained>,"p":{"<producer>":[<epoch>,<marker end>],...},"n":<next offset>,
/// "u":[<unprocessed offsets in [committed, n), as deltas from the committed offset>]}`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitMeta {
    #[serde(rename = "v")]
    pub version: u64,
    #[serde(rename = "d")]
    pub drained: u64,
    #[serde(rename = "p")]
    pub passed: BTreeMap<ProducerId, PassedAt>,
    /// Fetch position when committed.
    #[serde(rename = "n", default, skip_serializing_if = "Option::is_none")]
    pub next: Option<i64>,
    /// Unprocessed offsets in `[committed, next)`, ascending, as deltas from the committed offset.
    #[serde(rename = "u", default, skip_serializing_if = "Vec::is_empty")]
    pub unprocessed: Vec<i64>,
}

impl CommitMeta {
    /// Parse commit metadata; `None` for an empty string (fresh group, or offsets reset by a tool)
    /// and for anything this build does not read (logged by the caller). One trailing NUL is
    /// ignored (spec C7): confluent-kafka (Python) commits the C string's terminator with it.
    pub fn parse(s: &str) -> Option<Result<Self, String>> {
        let s = s.strip_suffix('\0').unwrap_or(s);
        if s.is_empty() {
            return None;
        }
        Some(
            serde_json::from_str::<CommitMeta>(s)
                .map_err(|e| e.to_string())
                .and_then(|m| {
                    if m.version == META_VERSION {
                        Ok(m)
                    } else {
                        Err(format!("unsupported metadata version {}", m.version))
                    }
                }),
        )
    }

    fn encode(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// A marker end reached (or awaited), not passed yet.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Pending {
    producer: ProducerId,
    epoch: u64,
    offset: i64,
}

/// Markers kept per producer while the position has not reached them: a later one covers the
/// earlier ones, so older ones are dropped beyond this (a hostile producer cannot grow the list).
const MAX_AWAITING_PER_PRODUCER: usize = 4;

/// The progress state of one owned partition.
#[derive(Debug, Default)]
pub struct PartitionProgress {
    passed: BTreeMap<ProducerId, PassedAt>,
    pending: Vec<Pending>,
    /// Markers whose end the position has not reached yet (`offset` = the end).
    awaiting: Vec<Pending>,
    /// The committed offset at assignment: every record below it was processed.
    committed: Option<i64>,
    /// From the committed metadata at assignment: `(E, b)` = records below `b` with an epoch below
    /// `E` were processed by a previous owner.
    skip: Vec<PassedAt>,
    /// From the committed metadata: below `.0`, only the offsets in `.1` were unprocessed.
    window: Option<(i64, std::collections::BTreeSet<i64>)>,
    /// First offset fetched since the assignment.
    start: Option<i64>,
}

impl PartitionProgress {
    /// The state of a newly assigned partition, from its committed offset and metadata.
    pub fn from_meta(meta: Option<&CommitMeta>, committed: Option<i64>) -> Self {
        let passed = meta.map(|m| m.passed.clone()).unwrap_or_default();
        let mut skip: Vec<PassedAt> = passed.values().copied().collect();
        skip.sort_by_key(|p| std::cmp::Reverse(p.offset));
        let window = match (meta, committed) {
            (Some(m), Some(c)) => m.next.filter(|&n| n > c).map(|n| {
                let unprocessed = m.unprocessed.iter().map(|d| c + d).collect();
                (n, unprocessed)
            }),
            _ => None,
        };
        Self {
            passed,
            pending: Vec::new(),
            awaiting: Vec::new(),
            committed,
            skip,
            window,
            start: None,
        }
    }

    /// `passed[producer]` (0 = none).
    pub fn passed(&self, producer: &ProducerId) -> u64 {
        self.passed.get(producer).map_or(0, |p| p.epoch)
    }

    /// Every producer's passed epoch.
    pub fn passed_epochs(&self) -> BTreeMap<ProducerId, u64> {
        self.passed
            .iter()
            .map(|(y, p)| (y.clone(), p.epoch))
            .collect()
    }

    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Whether a skip rule from the previous owner's commit still applies to records ahead
    /// ([`PartitionProgress::skip`] can be true only then).
    pub fn has_skip_rules(&self) -> bool {
        !self.skip.is_empty() || self.window.is_some()
    }

    /// Whether a re-delivered record was processed by a previous owner (skip rules, see the
    /// module docs). `epoch` is the record's `dkg-epoch` header: when the exact window is missing,
    /// only stamped records are skipped by the marker rule (an unstamped record held under an
    /// assumed epoch does not block the markers it would be skipped by).
    #[inline]
    pub fn skip(&self, offset: i64, epoch: Option<u64>) -> bool {
        if let Some((next, unprocessed)) = &self.window {
            return offset < *next && !unprocessed.contains(&offset);
        }
        let Some(epoch) = epoch else {
            return false;
        };
        // Sorted by offset descending: stop at the first rule whose offset is not above ours.
        self.skip
            .iter()
            .take_while(|s| offset < s.offset)
            .any(|s| epoch < s.epoch)
    }

    /// The window inherited from the previous owner's commit, while fetching has not passed it:
    /// its end and the offsets in it that were unprocessed. A commit made meanwhile must carry it
    /// on, or a second change of owner would re-process what the first owner had processed.
    pub fn inherited_window(&self) -> Option<(i64, &std::collections::BTreeSet<i64>)> {
        self.window.as_ref().map(|(n, u)| (*n, u))
    }

    /// Drop the skip rules once fetching is past all of them (they are dead weight afterwards).
    pub fn forget_skips_below(&mut self, next_offset: i64) {
        if self.skip.first().is_some_and(|s| s.offset <= next_offset) {
            self.skip.retain(|s| s.offset > next_offset);
        }
        if self.window.as_ref().is_some_and(|(n, _)| *n <= next_offset) {
            self.window = None;
        }
    }

    fn raise(&mut self, producer: &ProducerId, at: PassedAt) -> bool {
        match self.passed.get_mut(producer) {
            Some(p) if p.epoch >= at.epoch => false,
            Some(p) => {
                *p = at;
                true
            }
            None => {
                self.passed.insert(producer.clone(), at);
                true
            }
        }
    }

    /// The position reached `offset`, the end of `producer`'s marker of `epoch` (C4).
    /// `min_epoch_below(o)` = the lowest epoch of an unprocessed record below `o`. Returns whether
    /// `passed` changed.
    pub(crate) fn end_reached(
        &mut self,
        producer: &ProducerId,
        epoch: u64,
        offset: i64,
        min_epoch_below: impl Fn(i64) -> Option<u64>,
    ) -> bool {
        if self.passed(producer) >= epoch {
            return false; // read again, or an older marker after a newer one
        }
        let (changed, done) = self.pass(producer, epoch, offset, min_epoch_below(offset));
        if !done {
            self.pending.push(Pending {
                producer: producer.clone(),
                epoch,
                offset,
            });
        }
        changed
    }

    /// Pass `producer`'s marker of `epoch` ending at `offset` as far as `low`, the lowest epoch
    /// of an unprocessed record below it, allows (C5). A marker of `E` is also one of every lower
    /// epoch `e` (the producer's records of epochs below `e` are below it too), so it passes
    /// `e = low` while records of `low` still wait: a producer that skipped epochs (adopted
    /// several before its marker was out) has only this marker, and its own held records of a
    /// skipped epoch may wait for other partitions to drain exactly that epoch. Returns (passed
    /// changed, marker fully passed).
    fn pass(
        &mut self,
        producer: &ProducerId,
        epoch: u64,
        offset: i64,
        low: Option<u64>,
    ) -> (bool, bool) {
        match low {
            Some(low) if low < epoch => {
                let partial = low > self.passed(producer)
                    && self.raise(producer, PassedAt { epoch: low, offset });
                (partial, false)
            }
            _ => (self.raise(producer, PassedAt { epoch, offset }), true),
        }
    }

    /// Whether a marker ending at `end` is reached at `position` (every offset below it fetched
    /// and processed or tracked; `None`: nothing fetched yet): the committed offset counts too.
    fn reached(&self, end: i64, position: Option<i64>) -> bool {
        let at = position.max(self.committed);
        end <= 0 || at.is_some_and(|p| end <= p)
    }

    /// A marker of `producer` for `epoch` ending at `end` here (see the module docs), with the
    /// partition's `position` now. Returns whether `passed` changed.
    pub fn on_marker(
        &mut self,
        producer: &ProducerId,
        epoch: u64,
        end: i64,
        position: Option<i64>,
        min_epoch_below: impl Fn(i64) -> Option<u64>,
    ) -> bool {
        if self.passed(producer) >= epoch {
            return false;
        }
        if self.reached(end, position) {
            return self.end_reached(producer, epoch, end, min_epoch_below);
        }
        if self
            .awaiting
            .iter()
            .any(|a| a.producer == *producer && a.epoch >= epoch)
        {
            return false;
        }
        self.awaiting.push(Pending {
            producer: producer.clone(),
            epoch,
            offset: end,
        });
        let mine = || self.awaiting.iter().filter(|a| a.producer == *producer);
        if mine().count() > MAX_AWAITING_PER_PRODUCER
            && let Some(oldest) = mine().map(|a| a.epoch).min()
        {
            self.awaiting
                .retain(|a| a.producer != *producer || a.epoch != oldest);
        }
        false
    }

    /// Whether some marker waits for the position.
    pub fn has_awaiting(&self) -> bool {
        !self.awaiting.is_empty()
    }

    /// Markers whose end the position has reached are passed as far as they can be. Returns
    /// whether `passed` changed.
    pub fn arrived(
        &mut self,
        position: Option<i64>,
        min_epoch_below: impl Fn(i64) -> Option<u64>,
    ) -> bool {
        if self.awaiting.is_empty() {
            return false;
        }
        let (due, rest): (Vec<Pending>, Vec<Pending>) = std::mem::take(&mut self.awaiting)
            .into_iter()
            .partition(|a| self.reached(a.offset, position));
        self.awaiting = rest;
        let mut changed = false;
        for a in due {
            changed |= self.end_reached(&a.producer, a.epoch, a.offset, &min_epoch_below);
        }
        changed
    }

    /// Forget awaited markers of producers `keep` rejects (no live or closed lease: nobody waits for them;
    /// the core applies a producer's latest marker again when its lease is read).
    pub fn retain_awaiting(&mut self, keep: impl Fn(&ProducerId) -> bool) {
        self.awaiting.retain(|a| keep(&a.producer));
    }

    /// Re-check reached, not yet passed markers after records were processed. Returns whether `passed` changed.
    pub fn recheck(&mut self, min_epoch_below: impl Fn(i64) -> Option<u64>) -> bool {
        if self.pending.is_empty() {
            return false;
        }
        let mut changed = false;
        let pending = std::mem::take(&mut self.pending);
        for p in pending {
            let (raised, done) =
                self.pass(&p.producer, p.epoch, p.offset, min_epoch_below(p.offset));
            changed |= raised;
            if !done && self.passed(&p.producer) < p.epoch {
                self.pending.push(p);
            }
        }
        changed
    }

    /// The first offset fetched since the assignment; `None` until a record arrived.
    pub fn start(&self) -> Option<i64> {
        self.start
    }

    /// Record the first fetched offset (once).
    pub fn set_start(&mut self, offset: i64) {
        if self.start.is_none() {
            self.start = Some(offset);
        }
    }

    /// The highest epoch this partition has drained (see the module docs), given the topic's
    /// leases, and capped at `max_epoch`, the newest epoch known.
    pub fn drained<'a>(
        &self,
        leases: impl IntoIterator<Item = &'a Lease>,
        now_ms: u64,
        max_epoch: u64,
    ) -> u64 {
        let mut drained = max_epoch;
        for lease in leases {
            if !lease.is_awaitable(now_ms) {
                continue;
            }
            // Covered up to `p`; epoch p + 1 is awaited unless the producer closed before it.
            let p = lease.first_epoch.max(self.passed(&lease.producer));
            if lease.closed_at_epoch.is_none_or(|c| p < c) {
                drained = drained.min(p);
            }
        }
        drained
    }

    /// The commit metadata for a commit at `offset` with fetch position `next` and the
    /// `unprocessed` offsets (ascending, all in `offset..next`), within `max_bytes`. If needed,
    /// the unprocessed list goes first (only duplicates follow), then entries of producers no
    /// longer awaited (nothing relies on them). `Err` with the size if it still does not fit.
    /// With the metadata, whether it left out a skip window (`next > offset`: `n` and `u`
    /// dropped because they did not fit; a next owner re-processes what was processed above
    /// `offset`).
    #[allow(clippy::too_many_arguments)]
    pub fn meta<'a>(
        &self,
        drained: u64,
        offset: i64,
        next: i64,
        unprocessed: &[i64],
        leases: impl IntoIterator<Item = &'a Lease> + Clone,
        now_ms: u64,
        max_bytes: usize,
    ) -> Result<(String, bool), usize> {
        let mut meta = CommitMeta {
            version: META_VERSION,
            drained,
            passed: self.passed.clone(),
            next: (next > offset).then_some(next),
            unprocessed: unprocessed.iter().map(|o| o - offset).collect(),
        };
        let encoded = meta.encode();
        if encoded.len() <= max_bytes {
            return Ok((encoded, false));
        }
        let left_out = meta.next.is_some();
        meta.next = None;
        meta.unprocessed.clear();
        let encoded = meta.encode();
        if encoded.len() <= max_bytes {
            return Ok((encoded, left_out));
        }
        meta.passed.retain(|y, _| {
            leases
                .clone()
                .into_iter()
                .any(|l| &l.producer == y && l.is_awaitable(now_ms))
        });
        let encoded = meta.encode();
        if encoded.len() <= max_bytes {
            Ok((encoded, left_out))
        } else {
            Err(encoded.len())
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn id(c: char) -> ProducerId {
        ProducerId::parse(&c.to_string().repeat(32)).unwrap()
    }

    fn lease(c: char, first: u64, closed: Option<u64>) -> Lease {
        Lease {
            producer: id(c),
            topic: "t".into(),
            first_epoch: first,
            lease_ms: 1000,
            expires_at_ms: 1000,
            closed_at_epoch: closed,
        }
    }

    #[test]
    fn a_reached_marker_passes_once_nothing_older_below_it_is_unprocessed() {
        let mut p = PartitionProgress::default();
        // An unprocessed epoch-2 record at offset 5 blocks a marker of 3 ending at 10 but not one of 2 ending at 8.
        // A marker of 3 is one of epoch 2 as well: that part passes at once (a producer that
        // skipped epoch 2 has no other marker of it).
        let below = |o: i64| (o > 5).then_some(2);
        assert!(p.end_reached(&id('a'), 3, 10, below));
        assert!(p.has_pending());
        assert!(p.end_reached(&id('b'), 2, 8, below));
        assert_eq!((p.passed(&id('a')), p.passed(&id('b'))), (2, 2));
        // Still blocked.
        assert!(!p.recheck(below));
        // Records of epoch 1 below: nothing more passes.
        let mut q = PartitionProgress::default();
        assert!(!q.end_reached(&id('a'), 3, 10, |_| Some(0)));
        assert_eq!(q.passed(&id('a')), 0);
        // Processed: passes.
        assert!(p.recheck(|_| None));
        assert_eq!(p.passed(&id('a')), 3);
        assert!(!p.has_pending());
        // Markers read again or older ones change nothing.
        assert!(!p.end_reached(&id('a'), 3, 10, |_| None));
        assert!(!p.end_reached(&id('a'), 2, 12, |_| None));
        // A held record of the marker's own epoch does not block it (no deadlock between
        // partitions swapping keys).
        assert!(p.end_reached(&id('a'), 4, 20, |_| Some(4)));
    }

    #[test]
    fn drained_table() {
        let mut p = PartitionProgress::default();
        p.end_reached(&id('a'), 5, 1, |_| None);
        p.end_reached(&id('b'), 3, 2, |_| None);
        // (leases, expected drained) with max_epoch 6 and now 10
        let cases: Vec<(Vec<Lease>, u64)> = vec![
            (vec![], 6),
            (vec![lease('a', 0, None)], 5),
            (vec![lease('a', 0, None), lease('b', 0, None)], 3),
            // b started at epoch 4: nothing of it below epoch 4 to wait for; passed 3 < 4.
            (vec![lease('a', 0, None), lease('b', 4, None)], 4),
            // b closed after its marker of epoch 3: nothing to wait for after it.
            (vec![lease('a', 0, None), lease('b', 0, Some(3))], 5),
            // c closed at 4 without its marker of 4 passed here: wait until it is passed
            // (expired or not: its markers exist).
            (vec![lease('c', 0, Some(4))], 0),
            // an unknown producer that started at 6.
            (vec![lease('c', 6, None)], 6),
        ];
        for (leases, want) in cases {
            assert_eq!(p.drained(&leases, 10, 6), want, "{leases:?}");
        }
        let mut dead = lease('b', 0, None);
        dead.expires_at_ms = 5;
        assert_eq!(p.drained(&[lease('a', 0, None), dead], 10, 6), 5);
        // Closed at 6 and expired, its marker of 6 not passed (passed 3): still awaited for 4..=6.
        let mut closed = lease('b', 0, Some(6));
        closed.expires_at_ms = 5;
        assert_eq!(p.drained(&[lease('a', 0, None), closed.clone()], 10, 6), 3);
        // Closed at 3 and expired, passed 3: nothing more to wait for.
        closed.closed_at_epoch = Some(3);
        assert_eq!(p.drained(&[lease('a', 0, None), closed], 10, 6), 5);
    }

    #[test]
    fn metadata_round_trips_and_drives_the_skip_rule() {
        let mut p = PartitionProgress::default();
        p.end_reached(&id('a'), 4, 100, |_| None);
        p.end_reached(&id('b'), 3, 80, |_| None);
        let leases = [lease('a', 0, None), lease('b', 0, None)];
        let (json, left_out) = p.meta(3, 10, 10, &[], &leases, 10, 4096).unwrap();
        assert!(!left_out, "no window to leave out");
        let meta = CommitMeta::parse(&json).unwrap().unwrap();
        assert_eq!(meta.drained, 3);
        assert_eq!(
            meta.passed[&id('a')],
            PassedAt {
                epoch: 4,
                offset: 100
            }
        );
        assert_eq!((meta.next, meta.unprocessed.len()), (None, 0));

        let mut next = PartitionProgress::from_meta(Some(&meta), Some(10));
        assert_eq!(next.passed(&id('b')), 3);
        // (offset, epoch, skipped?)
        let cases = [
            (50, 2, true),
            (50, 3, true),
            (50, 4, false),
            (90, 3, true),
            (90, 2, true),
            (99, 4, false),
            (100, 0, false),
            (85, 3, true),
        ];
        for (offset, epoch, want) in cases {
            assert_eq!(next.skip(offset, Some(epoch)), want, "{offset} {epoch}");
        }
        // Fetching is past b's rule (80) but not a's (100): a's still applies.
        next.forget_skips_below(90);
        assert!(next.skip(95, Some(3)));
        // Unstamped records are never skipped by the marker rule.
        assert!(!next.skip(95, None));
        next.forget_skips_below(200);
        assert!(!next.skip(95, Some(3)));

        assert_eq!(CommitMeta::parse(""), None);
        assert!(CommitMeta::parse("{").unwrap().is_err());
        // confluent-kafka (Python) commits the C string's terminating NUL with the metadata.
        let plain = r#"{"v":1,"d":2,"p":{},"n":9,"u":[1]}"#;
        assert_eq!(
            CommitMeta::parse(&format!("{plain}\0")),
            CommitMeta::parse(plain)
        );
        assert!(CommitMeta::parse(plain).unwrap().is_ok());
        assert_eq!(CommitMeta::parse("\0"), None);
        assert!(CommitMeta::parse(&format!("{plain}\0\0")).unwrap().is_err());
        assert!(
            CommitMeta::parse(r#"{"v":9,"d":0,"p":{}}"#)
                .unwrap()
                .is_err()
        );
        // Too large: the unprocessed list goes first, then dead producers, then an error.
        assert!(p.meta(3, 10, 10, &[], &leases, 10, 20).is_err());
        let only_a = [lease('a', 0, None)];
        let (small, left_out) = p.meta(3, 10, 500, &[10, 300], &only_a, 10, 70).unwrap();
        assert!(!small.contains(&"b".repeat(32)), "{small}");
        assert!(!small.contains("\"u\""), "{small}");
        assert!(left_out, "the window was left out");
        // Over the limit without any window (nothing fetched above the offset): nothing left out.
        let (plain, left_out) = p.meta(3, 10, 10, &[], &only_a, 10, 70).unwrap();
        assert!(!left_out, "{plain}");
    }

    #[test]
    fn processed_window_skips_everything_but_the_unprocessed() {
        let p = PartitionProgress::default();
        let (json, left_out) = p.meta(0, 100, 110, &[100, 104, 107], &[], 0, 4096).unwrap();
        assert!(json.contains("\"u\":[0,4,7]"), "{json}");
        assert!(!left_out, "the window fits");
        let meta = CommitMeta::parse(&json).unwrap().unwrap();
        let mut next = PartitionProgress::from_meta(Some(&meta), Some(100));
        let skipped: Vec<i64> = (100..112).filter(|&o| next.skip(o, None)).collect();
        assert_eq!(skipped, vec![101, 102, 103, 105, 106, 108, 109]);
        next.forget_skips_below(110);
        assert!(!next.skip(101, None));
        // Without the committed offset (reset by a tool) the window is not trusted.
        assert!(!PartitionProgress::from_meta(Some(&meta), None).skip(101, None));
    }

    #[test]
    fn a_marker_end_below_the_position_or_the_committed_offset_is_reached_at_once() {
        let mut p = PartitionProgress::default();
        p.set_start(50);
        p.set_start(10); // only the first counts
        assert_eq!(p.start(), Some(50));
        // Position 50: an end at 40 is reached, one at 60 waits for the position.
        assert!(p.on_marker(&id('a'), 7, 40, Some(50), |_| None));
        assert!(!p.on_marker(&id('b'), 7, 60, Some(50), |_| None));
        assert!(p.has_awaiting());
        assert!(p.arrived(Some(60), |_| None));
        assert_eq!((p.passed(&id('a')), p.passed(&id('b'))), (7, 7));
        // Nothing fetched yet: the committed offset counts as the position.
        let mut q = PartitionProgress::from_meta(None, Some(60));
        assert!(q.on_marker(&id('a'), 3, 60, None, |_| None));
        assert!(!q.on_marker(&id('b'), 3, 61, None, |_| None));
    }
}
