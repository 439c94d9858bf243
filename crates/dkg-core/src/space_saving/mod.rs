//! SpaceSaving heavy-hitter summary with the Stream-Summary structure.
//!
//! References:
//! - A. Metwally, D. Agrawal, A. El Abbadi, "Efficient Computation of Frequent and Top-k Elements in Data
//!   Streams", ICDT 2005: the algorithm and the Stream-Summary structure (counters grouped into buckets of
//!   equal count, buckets in a doubly linked list sorted by count), which makes a unit update O(1).
//! - P. K. Agarwal, G. Cormode, Z. Huang, J. M. Phillips, Z. Wei, K. Yi, "Mergeable Summaries", PODS 2012:
//!   the merge of two summaries with a bounded error.
//!
//! # Guarantees
//! With `N` = [`SpaceSaving::total`] and `c` = [`SpaceSaving::capacity`]:
//! - for every monitored key, `count - error <= true count <= count`;
//! - `error <= min_count <= N / c`;
//! - an unmonitored key has a true count `<= min_count` (which is 0 while the summary is not full), so every
//!   key whose true count exceeds `N / c` is monitored;
//! - these hold for weighted updates ([`SpaceSaving::insert_weighted`], e.g. the sampler's `--weight
//!   bytes`) with `N` the total weight: Metwally et al.'s proof only uses that an eviction's newcomer
//!   inherits the minimum count, which a weight `w` raises by `w` exactly as `w` unit updates of that key
//!   in a row would (the `weighted_updates_keep_the_bounds` proptest checks them against exact counts);
//! - memory is bounded by `c` whatever the number of distinct keys: at most `c` counters, at most `c + 1`
//!   count buckets, and an index of at most `c` entries. Evicting a key reuses its key buffer.
//!
//! # Layout
//! Counters live in an arena (`Vec`) and are linked by `u32` indices: each count bucket holds a circular
//! doubly linked list of its counters, and the buckets form a doubly linked list in increasing count order.
//! A [`hashbrown::HashTable`] of arena indices, hashed with `ahash` (process-local seeds: the summary's
//! in-memory index is never shared between processes), finds a key's counter. A unit update moves one
//! counter to the next bucket (or bumps its bucket in place), so it does no allocation once the summary is
//! full. A weighted update walks forward over the buckets it jumps past.

//!
//! The serde snapshot of a summary (what samplers ship and merge) is in the `snapshot` module.

use std::fmt;

use ahash::RandomState;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use hashbrown::HashTable;
use hashbrown::hash_table::Entry;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// Largest supported capacity (counters are addressed by `u32`; 2^30 counters is already tens of GiB).
mod snapshot;

pub const MAX_CAPACITY: usize = 1 << 30;

/// "No link" marker for the index-based lists.
const NIL: u32 = u32::MAX;

/// Index entries are `slot | tag`: the tag bit alternates each time a slot takes a new key, so during an
/// eviction the new key's entry can be inserted (at the slot found by its own lookup) before the old
/// key's entry is removed, and the two are still told apart. Saves one probe per eviction.
const TAG: u32 = 1 << 31;
const SLOT_MASK: u32 = !TAG;

/// One monitored key as seen through [`SpaceSaving::get`], [`SpaceSaving::iter`] and friends.
///
/// `count` over-estimates the key's true count by at most `error`: `count - error <= true <= count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Counter<'a> {
    /// The key bytes.
    pub key: &'a [u8],
    /// Upper bound of the key's true count.
    pub count: u64,
    /// Maximum over-estimation of `count` (`count - error` is a lower bound of the true count).
    pub error: u64,
}

impl Counter<'_> {
    /// The guaranteed (lower-bound) count, `count - error`.
    #[must_use]
    pub fn guaranteed(&self) -> u64 {
        self.count - self.error
    }
}

/// A counter in the arena. The count itself is stored once per bucket.
#[derive(Clone)]
struct Slot {
    key: Vec<u8>,
    /// `ahash` of `key` with the summary's `RandomState`; kept so the index never rehashes key bytes.
    hash: u64,
    /// The tag bit of this slot's index entry (see [`TAG`]).
    tag: u32,
    error: u64,
    /// The count bucket this counter is in.
    bucket: u32,
    /// Circular list of the counters of `bucket`.
    prev: u32,
    next: u32,
}

/// A count bucket: all counters with this count.
#[derive(Clone)]
struct Bucket {
    count: u64,
    /// First counter of the circular counter list (the oldest; evicted first), `NIL` for a free bucket.
    head: u32,
    /// Bucket list in increasing count order; `next` doubles as the free-list link for free buckets.
    prev: u32,
    next: u32,
}

/// SpaceSaving summary over byte-string keys (Metwally et al. 2005) with mergeable-summary merge (Agarwal et
/// al. 2012). See the [module documentation](self) for the guarantees.
///
/// Serializes (serde) as a compact snapshot `{"capacity":c,"total":N,"counters":[[key,count,error],..]}`
/// with counters sorted by count descending, then key ascending; keys are standard padded base64 strings in
/// human-readable formats (JSON) and raw bytes otherwise. Deserialization validates the snapshot (capacity
/// in `1..=MAX_CAPACITY`, at most `capacity` counters, distinct keys, `1 <= count`, `error <= count`) and
/// rebuilds the structure.
#[derive(Clone)]
pub struct SpaceSaving {
    capacity: usize,
    total: u64,
    slots: Vec<Slot>,
    buckets: Vec<Bucket>,
    free_buckets: u32,
    /// Bucket with the smallest count (`NIL` when empty).
    min_bucket: u32,
    /// Bucket with the largest count (`NIL` when empty).
    max_bucket: u32,
    index: HashTable<u32>,
    hasher: RandomState,
}

impl fmt::Debug for SpaceSaving {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SpaceSaving")
            .field("capacity", &self.capacity)
            .field("len", &self.len())
            .field("total", &self.total)
            .field("min_count", &self.min_count())
            .field("top", &self.top(4))
            .finish_non_exhaustive()
    }
}

impl SpaceSaving {
    /// An empty summary with `capacity` counters (clamped to `1..=MAX_CAPACITY`).
    ///
    /// Memory is allocated as keys arrive, never beyond `capacity` counters.
    #[must_use]
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.clamp(1, MAX_CAPACITY),
            total: 0,
            slots: Vec::new(),
            buckets: Vec::new(),
            free_buckets: NIL,
            min_bucket: NIL,
            max_bucket: NIL,
            index: HashTable::new(),
            hasher: RandomState::new(),
        }
    }

    /// A summary whose error is at most `eps * N`: capacity `ceil(1 / eps)`.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] unless `eps` is in `(0, 1]` and `ceil(1 / eps) <= MAX_CAPACITY`.
    pub fn with_epsilon(eps: f64) -> Result<Self> {
        if !(eps > 0.0 && eps <= 1.0) {
            return Err(Error::InvalidConfig {
                field: "epsilon",
                reason: format!("must be in (0, 1], got {eps}"),
            });
        }
        let capacity = (1.0 / eps).ceil();
        if capacity > MAX_CAPACITY as f64 {
            return Err(Error::InvalidConfig {
                field: "epsilon",
                reason: format!(
                    "{eps} needs {capacity} counters, more than the maximum {MAX_CAPACITY}"
                ),
            });
        }
        // In range by the check above; `as` on a finite, positive, bounded float is exact here.
        Ok(Self::new(capacity as usize))
    }

    /// Maximum number of counters.
    #[must_use]
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Number of monitored keys (`<= capacity`).
    #[must_use]
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True when no key has been inserted since creation or [`clear`](Self::clear).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// Sum of all inserted weights, `N` (saturating).
    #[must_use]
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Approximate heap memory used, in bytes: the counter arena, key buffers, buckets and index. Bounded by
    /// the capacity (and the longest keys), whatever the number of distinct keys inserted.
    #[must_use]
    pub fn heap_bytes(&self) -> usize {
        self.slots.capacity() * size_of::<Slot>()
            + self.slots.iter().map(|s| s.key.capacity()).sum::<usize>()
            + self.buckets.capacity() * size_of::<Bucket>()
            + self.index.allocation_size()
    }

    /// Number of count buckets allocated (live or free); at most `capacity + 1`.
    #[must_use]
    pub fn bucket_arena_len(&self) -> usize {
        self.buckets.len()
    }

    /// Count one occurrence of `key`. O(1); no allocation once the summary is full (evictions reuse the
    /// evicted key's buffer unless the new key is longer, and the index has room reserved for its
    /// tombstones).
    #[inline]
    pub fn insert(&mut self, key: &[u8]) {
        self.insert_weighted(key, 1);
    }

    /// Count `weight` occurrences of `key` (weight 0 is a no-op). Walks over the count buckets the counter
    /// jumps past, so it costs O(1) for small weights and at most O(number of distinct counts).
    #[inline]
    pub fn insert_weighted(&mut self, key: &[u8], weight: u64) {
        if weight == 0 {
            return;
        }
        self.total = self.total.saturating_add(weight);
        let hash = self.hasher.hash_one(key);
        let slots = &self.slots;
        // One probe finds the key or, on a miss, the index position for it.
        let vacant = match self.index.entry(
            hash,
            |&v| {
                let s = &slots[(v & SLOT_MASK) as usize];
                s.hash == hash && s.key == key
            },
            |&v| slots[(v & SLOT_MASK) as usize].hash,
        ) {
            Entry::Occupied(e) => {
                let i = *e.get() & SLOT_MASK;
                self.increment(i, weight);
                return;
            }
            Entry::Vacant(v) => v,
        };
        if self.slots.len() < self.capacity {
            let i = self.slots.len() as u32;
            vacant.insert(i);
            self.slots.push(Slot {
                key: key.to_vec(),
                hash,
                tag: 0,
                error: 0,
                bucket: NIL,
                prev: i,
                next: i,
            });
            self.place_from_min(i, weight);
            if self.slots.len() == self.capacity {
                self.reserve_index_headroom();
            }
        } else {
            // Full: take over the oldest counter of the minimum bucket (Metwally's replacement).
            let b = self.min_bucket;
            let i = self.buckets[b as usize].head;
            let min = self.buckets[b as usize].count;
            let (old_hash, old_tag) = (self.slots[i as usize].hash, self.slots[i as usize].tag);
            vacant.insert(i | (old_tag ^ TAG));
            if let Ok(old) = self.index.find_entry(old_hash, |&v| v == i | old_tag) {
                old.remove();
            }
            let slot = &mut self.slots[i as usize];
            slot.key.clear();
            slot.key.extend_from_slice(key);
            slot.hash = hash;
            slot.tag = old_tag ^ TAG;
            slot.error = min;
            self.increment(i, weight);
        }
    }

    /// The counter of `key`, if monitored.
    #[must_use]
    pub fn get(&self, key: &[u8]) -> Option<Counter<'_>> {
        let hash = self.hasher.hash_one(key);
        self.find(key, hash).map(|i| self.counter(i))
    }

    /// Upper bound of the true count of any key: its count if monitored, else [`min_count`](Self::min_count).
    #[must_use]
    pub fn upper_bound(&self, key: &[u8]) -> u64 {
        self.get(key).map_or_else(|| self.min_count(), |c| c.count)
    }

    /// Smallest count when the summary is full, 0 while it is not (an unmonitored key then has count 0).
    #[must_use]
    pub fn min_count(&self) -> u64 {
        if self.slots.len() < self.capacity || self.min_bucket == NIL {
            0
        } else {
            self.buckets[self.min_bucket as usize].count
        }
    }

    /// All monitored counters, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = Counter<'_>> + '_ {
        (0..self.slots.len()).map(move |i| self.counter(i as u32))
    }

    /// The `n` counters with the largest counts, by count descending, ties by key bytes ascending.
    #[must_use]
    pub fn top(&self, n: usize) -> Vec<Counter<'_>> {
        let mut out = Vec::with_capacity(n.min(self.len()));
        let mut b = self.max_bucket;
        // Walk buckets from the largest count; only the last bucket needed is sorted in full.
        while b != NIL && out.len() < n {
            let start = out.len();
            self.for_each_in_bucket(b, |i| out.push(self.counter(i)));
            out[start..].sort_unstable_by(|x, y| x.key.cmp(y.key));
            b = self.buckets[b as usize].prev;
        }
        out.truncate(n);
        out
    }

    /// Keys whose guaranteed count (`count - error`) is at least `threshold`, sorted by guaranteed count
    /// descending, ties by key bytes ascending.
    #[must_use]
    pub fn heavy_hitters(&self, threshold: u64) -> Vec<Counter<'_>> {
        let mut out = Vec::new();
        let mut b = self.max_bucket;
        // count >= guaranteed, so buckets below the threshold cannot hold a heavy hitter.
        while b != NIL && self.buckets[b as usize].count >= threshold {
            self.for_each_in_bucket(b, |i| {
                let c = self.counter(i);
                if c.guaranteed() >= threshold {
                    out.push(c);
                }
            });
            b = self.buckets[b as usize].prev;
        }
        out.sort_unstable_by(|x, y| {
            y.guaranteed()
                .cmp(&x.guaranteed())
                .then_with(|| x.key.cmp(y.key))
        });
        out
    }

    /// Merge `other` into `self` (mergeable summaries, Agarwal et al. 2012).
    ///
    /// For every key of either summary the merged count is `c1(x) + c2(x)`, where a key absent from a
    /// summary counts as that summary's [`min_count`](Self::min_count) (0 for a summary that is not full); the
    /// errors combine the same way. The `capacity` largest merged counts are kept (ties by key bytes
    /// ascending) and `total` becomes `N1 + N2`.
    ///
    /// Error bound: every kept key still satisfies `count - error <= true <= count` for the combined stream,
    /// and `error <= min1 + min2 <= N1 / c + N2 / c' <= (N1 + N2) / c` (with `c` = `self.capacity()`,
    /// `c'` = `other.capacity() >= c`); an unmonitored key has a true count `<= min_count <= (N1 + N2) / c`.
    /// So the merged summary has the same `eps = 1 / c` guarantee as one summary built over both streams.
    ///
    /// # Errors
    /// [`Error::IncompatibleMerge`] if `other` is full and has a smaller capacity than `self`: its error
    /// (up to `N2 / c'`) would exceed the bound `self` promises.
    pub fn merge(&mut self, other: &SpaceSaving) -> Result<()> {
        if other.capacity < self.capacity && other.len() >= other.capacity {
            return Err(Error::IncompatibleMerge {
                reason: format!(
                    "summary capacity {} cannot absorb a full summary of smaller capacity {}",
                    self.capacity, other.capacity
                ),
            });
        }
        let min1 = self.min_count();
        let min2 = other.min_count();
        let mut merged: Vec<(Vec<u8>, u64, u64)> = Vec::with_capacity(self.len() + other.len());
        for c in self.iter() {
            let (c2, e2) = other
                .get(c.key)
                .map_or((min2, min2), |o| (o.count, o.error));
            merged.push((
                c.key.to_vec(),
                c.count.saturating_add(c2),
                c.error.saturating_add(e2),
            ));
        }
        for o in other.iter() {
            if self.get(o.key).is_none() {
                merged.push((
                    o.key.to_vec(),
                    o.count.saturating_add(min1),
                    o.error.saturating_add(min1),
                ));
            }
        }
        merged.sort_unstable_by(|x, y| y.1.cmp(&x.1).then_with(|| x.0.cmp(&y.0)));
        merged.truncate(self.capacity);
        let total = self.total.saturating_add(other.total);
        self.rebuild(merged);
        self.total = total;
        Ok(())
    }

    /// Multiply every count and error, and the total, by `factor` (exponential decay for a drifting window).
    ///
    /// `factor` is clamped to `[0, 1]` (NaN counts as 1, i.e. no decay); 0 clears the summary. Rounding keeps
    /// the bounds against the decayed (real-valued) true counts: the count is rounded up, the guaranteed
    /// count `count - error` down, so `count - error <= factor * true <= count` still holds. The total is
    /// rounded to nearest.
    pub fn decay(&mut self, factor: f64) {
        let f = if factor.is_nan() {
            1.0
        } else {
            factor.clamp(0.0, 1.0)
        };
        if f >= 1.0 {
            return;
        }
        if f <= 0.0 {
            self.clear();
            return;
        }
        let mut counts = Vec::with_capacity(self.slots.len());
        for i in 0..self.slots.len() {
            let count = self.buckets[self.slots[i].bucket as usize].count;
            let guaranteed = count - self.slots[i].error;
            // `as u64` saturates; min() guards against float rounding above the original values.
            let new_count = ((count as f64 * f).ceil() as u64).clamp(1, count);
            let new_guaranteed = ((guaranteed as f64 * f).floor() as u64).min(new_count);
            self.slots[i].error = new_count - new_guaranteed;
            counts.push(new_count);
        }
        self.relink(&counts);
        self.total = (self.total as f64 * f).round() as u64;
    }

    /// Remove every counter and reset the total (keeps the allocations for reuse).
    pub fn clear(&mut self) {
        self.total = 0;
        self.slots.clear();
        self.buckets.clear();
        self.free_buckets = NIL;
        self.min_bucket = NIL;
        self.max_bucket = NIL;
        self.index.clear();
    }

    // ---- internals -------------------------------------------------------------------------------

    #[inline]
    fn find(&self, key: &[u8], hash: u64) -> Option<u32> {
        let slots = &self.slots;
        self.index
            .find(hash, |&v| {
                let s = &slots[(v & SLOT_MASK) as usize];
                s.hash == hash && s.key == key
            })
            .map(|&v| v & SLOT_MASK)
    }

    #[inline]
    fn counter(&self, i: u32) -> Counter<'_> {
        let s = &self.slots[i as usize];
        Counter {
            key: &s.key,
            count: self.buckets[s.bucket as usize].count,
            error: s.error,
        }
    }

    fn for_each_in_bucket(&self, b: u32, mut f: impl FnMut(u32)) {
        let head = self.buckets[b as usize].head;
        let mut i = head;
        loop {
            f(i);
            i = self.slots[i as usize].next;
            if i == head {
                break;
            }
        }
    }

    /// Raise counter `i` by `weight`, moving it to the bucket of its new count.
    #[inline]
    fn increment(&mut self, i: u32, weight: u64) {
        if weight == 1 {
            self.increment_one(i);
            return;
        }
        let b = self.slots[i as usize].bucket;
        let old = self.buckets[b as usize].count;
        let new_count = old.saturating_add(weight);
        if new_count == old {
            return;
        }
        // Find the first bucket with count >= new_count; `after` is the last bucket before it.
        let mut after = b;
        let mut nb = self.buckets[b as usize].next;
        while nb != NIL && self.buckets[nb as usize].count < new_count {
            after = nb;
            nb = self.buckets[nb as usize].next;
        }
        if nb != NIL && self.buckets[nb as usize].count == new_count {
            let emptied = self.detach(i);
            self.attach(i, nb);
            if emptied {
                self.free_bucket(b);
            }
        } else if after == b && self.slots[i as usize].next == i {
            // Alone in its bucket and no bucket in between: bump the bucket in place.
            self.buckets[b as usize].count = new_count;
        } else {
            let emptied = self.detach(i);
            let fresh = self.alloc_bucket(new_count, after, nb);
            self.attach(i, fresh);
            if emptied {
                self.free_bucket(b);
            }
        }
    }

    /// Once full, the index sees one insert and one removal per eviction; the removals leave tombstones.
    /// With room for twice the capacity, hashbrown clears them by rehashing in place instead of growing,
    /// so the summary allocates nothing more from here on.
    fn reserve_index_headroom(&mut self) {
        let slots = &self.slots;
        self.index
            .reserve(self.capacity, |&v| slots[(v & SLOT_MASK) as usize].hash);
    }

    /// `increment(i, 1)`: the Stream-Summary O(1) step (the next bucket is the only candidate).
    #[inline(always)]
    fn increment_one(&mut self, i: u32) {
        let b = self.slots[i as usize].bucket;
        let count = self.buckets[b as usize].count;
        if count == u64::MAX {
            return;
        }
        let target = count + 1;
        let nb = self.buckets[b as usize].next;
        let next_matches = nb != NIL && self.buckets[nb as usize].count == target;
        if !next_matches && self.slots[i as usize].next == i {
            // Alone in its bucket, and the next bucket (if any) is above `target`: bump in place.
            self.buckets[b as usize].count = target;
            return;
        }
        let emptied = self.detach(i);
        let dest = if next_matches {
            nb
        } else {
            self.alloc_bucket(target, b, nb)
        };
        self.attach(i, dest);
        if emptied {
            self.free_bucket(b);
        }
    }

    /// Put the bucket-less counter `i` into the bucket of `count`, searching from the minimum bucket.
    fn place_from_min(&mut self, i: u32, count: u64) {
        let mut before = NIL;
        let mut b = self.min_bucket;
        while b != NIL && self.buckets[b as usize].count < count {
            before = b;
            b = self.buckets[b as usize].next;
        }
        let target = if b != NIL && self.buckets[b as usize].count == count {
            b
        } else {
            self.alloc_bucket(count, before, b)
        };
        self.attach(i, target);
    }

    /// Unlink counter `i` from its bucket's list; true if the bucket became empty.
    #[inline(always)]
    fn detach(&mut self, i: u32) -> bool {
        let Slot {
            bucket, prev, next, ..
        } = self.slots[i as usize];
        if next == i {
            self.buckets[bucket as usize].head = NIL;
            return true;
        }
        self.slots[prev as usize].next = next;
        self.slots[next as usize].prev = prev;
        let bk = &mut self.buckets[bucket as usize];
        if bk.head == i {
            bk.head = next;
        }
        false
    }

    /// Append counter `i` at the tail of bucket `b`'s list.
    #[inline(always)]
    fn attach(&mut self, i: u32, b: u32) {
        let head = self.buckets[b as usize].head;
        if head == NIL {
            self.buckets[b as usize].head = i;
            let s = &mut self.slots[i as usize];
            s.prev = i;
            s.next = i;
        } else {
            let tail = self.slots[head as usize].prev;
            self.slots[tail as usize].next = i;
            self.slots[head as usize].prev = i;
            let s = &mut self.slots[i as usize];
            s.prev = tail;
            s.next = head;
        }
        self.slots[i as usize].bucket = b;
    }

    /// A new empty bucket linked between `prev` and `next` (either may be `NIL`).
    #[inline]
    fn alloc_bucket(&mut self, count: u64, prev: u32, next: u32) -> u32 {
        let bucket = Bucket {
            count,
            head: NIL,
            prev,
            next,
        };
        let b = if self.free_buckets != NIL {
            let b = self.free_buckets;
            self.free_buckets = self.buckets[b as usize].next;
            self.buckets[b as usize] = bucket;
            b
        } else {
            self.buckets.push(bucket);
            (self.buckets.len() - 1) as u32
        };
        self.join(prev, b, b, next);
        b
    }

    /// Make `after` follow bucket `prev` and `before` precede bucket `next` in the bucket list (a
    /// `NIL` end moves the list's minimum or maximum instead): linking a new bucket between `prev`
    /// and `next` joins `(prev, b)` and `(b, next)`, unlinking one joins `(prev, next)`.
    #[inline]
    fn join(&mut self, prev: u32, after: u32, before: u32, next: u32) {
        if prev == NIL {
            self.min_bucket = after;
        } else {
            self.buckets[prev as usize].next = after;
        }
        if next == NIL {
            self.max_bucket = before;
        } else {
            self.buckets[next as usize].prev = before;
        }
    }

    /// Unlink the empty bucket `b` from the bucket list and put it on the free list.
    #[inline]
    fn free_bucket(&mut self, b: u32) {
        let Bucket { prev, next, .. } = self.buckets[b as usize];
        self.join(prev, next, prev, next);
        let bk = &mut self.buckets[b as usize];
        bk.head = NIL;
        bk.prev = NIL;
        bk.next = self.free_buckets;
        self.free_buckets = b;
    }

    /// Rebuild the bucket structure for new per-slot counts (`counts[i]` for slot `i`, all >= 1). Slots keep
    /// their keys, errors and index entries. Within a bucket, counters keep their previous relative age.
    fn relink(&mut self, counts: &[u64]) {
        // Order: by new count, then by old position (bucket order, then age within the bucket).
        let mut order: Vec<u32> = Vec::with_capacity(self.slots.len());
        let mut b = self.min_bucket;
        while b != NIL {
            self.for_each_in_bucket(b, |i| order.push(i));
            b = self.buckets[b as usize].next;
        }
        // Slots not reachable from the bucket list (fresh slots from `rebuild`) follow in index order.
        if order.len() != self.slots.len() {
            order.clear();
            order.extend(0..self.slots.len() as u32);
        }
        order.sort_by_key(|&i| counts[i as usize]); // stable: keeps the previous order within equal counts
        self.buckets.clear();
        self.free_buckets = NIL;
        self.min_bucket = NIL;
        self.max_bucket = NIL;
        let mut last = NIL;
        for &i in &order {
            let c = counts[i as usize];
            if last == NIL || self.buckets[last as usize].count != c {
                last = self.alloc_bucket(c, last, NIL);
            }
            self.attach(i, last);
        }
    }

    /// Replace the content with `entries` (distinct keys, `1 <= count`, `error <= count`, at most
    /// `capacity` of them). `total` is left for the caller to set.
    fn rebuild(&mut self, entries: Vec<(Vec<u8>, u64, u64)>) {
        self.clear();
        let mut counts = Vec::with_capacity(entries.len());
        for (i, (key, count, error)) in entries.into_iter().enumerate() {
            let hash = self.hasher.hash_one(&key);
            let i = i as u32;
            self.slots.push(Slot {
                key,
                hash,
                tag: 0,
                error,
                bucket: NIL,
                prev: i,
                next: i,
            });
            let slots = &self.slots;
            self.index
                .insert_unique(hash, i, |&v| slots[(v & SLOT_MASK) as usize].hash);
            counts.push(count);
        }
        self.relink(&counts);
        if self.slots.len() == self.capacity {
            self.reserve_index_headroom();
        }
    }

    /// Check the internal invariants (tests only): bucket order, list links, index, counts and memory.
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        assert!(self.slots.len() <= self.capacity);
        assert!(self.buckets.len() <= self.capacity + 1);
        assert_eq!(self.index.len(), self.slots.len());
        let mut seen = 0;
        let mut prev = NIL;
        let mut b = self.min_bucket;
        while b != NIL {
            let bk = &self.buckets[b as usize];
            assert_eq!(bk.prev, prev);
            assert_ne!(bk.head, NIL, "live bucket without counters");
            if prev != NIL {
                assert!(self.buckets[prev as usize].count < bk.count, "bucket order");
            }
            self.for_each_in_bucket(b, |i| {
                let s = &self.slots[i as usize];
                assert_eq!(s.bucket, b);
                assert_eq!(self.slots[s.next as usize].prev, i);
                assert!(s.error <= bk.count);
                assert_eq!(self.hasher.hash_one(&s.key), s.hash);
                assert_eq!(self.find(&s.key, s.hash), Some(i));
                assert_eq!(
                    self.index.find(s.hash, |&v| v & SLOT_MASK == i),
                    Some(&(i | s.tag))
                );
                seen += 1;
            });
            prev = b;
            b = bk.next;
        }
        assert_eq!(self.max_bucket, prev);
        assert_eq!(seen, self.slots.len());
    }
}
#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn exact_check(s: &SpaceSaving, truth: &HashMap<Vec<u8>, u64>) {
        s.check_invariants();
        assert_eq!(s.total(), truth.values().sum::<u64>());
        for (k, &t) in truth {
            match s.get(k) {
                Some(c) => assert!(c.guaranteed() <= t && t <= c.count, "{c:?} true {t}"),
                None => assert!(
                    t <= s.min_count(),
                    "absent key true {t} > min {}",
                    s.min_count()
                ),
            }
        }
        for c in s.iter() {
            assert!(c.error <= s.min_count());
            assert!(c.error as u128 * s.capacity() as u128 <= s.total() as u128);
        }
    }

    proptest::proptest! {
        /// The guarantees of the module docs under weighted updates, against exact counts: weights from
        /// 1 (unit updates) to record sizes of a few kB, keys drawn from a small skewed alphabet so
        /// that evictions happen.
        #[test]
        fn weighted_updates_keep_the_bounds(
            capacity in 1usize..12,
            updates in proptest::collection::vec((0u8..40, 0u64..5000), 0..400),
        ) {
            let mut s = SpaceSaving::new(capacity);
            let mut truth: HashMap<Vec<u8>, u64> = HashMap::new();
            for (k, w) in updates {
                let key = [k % (1 + k / 8)]; // skewed: small ids are frequent
                s.insert_weighted(&key, w);
                if w > 0 {
                    *truth.entry(key.to_vec()).or_default() += w;
                }
            }
            exact_check(&s, &truth);
            proptest::prop_assert!(s.len() <= capacity);
            proptest::prop_assert!(s.min_count() as u128 * capacity as u128 <= u128::from(s.total()));
        }

        /// A weight `w` leaves the same counts as `w` unit updates of that key in a row.
        #[test]
        fn a_weight_is_a_run_of_unit_updates(
            capacity in 1usize..6,
            updates in proptest::collection::vec((0u8..10, 1u64..20), 0..60),
        ) {
            let mut weighted = SpaceSaving::new(capacity);
            let mut unit = SpaceSaving::new(capacity);
            for (k, w) in updates {
                weighted.insert_weighted(&[k], w);
                for _ in 0..w {
                    unit.insert(&[k]);
                }
            }
            weighted.check_invariants();
            proptest::prop_assert_eq!(weighted.total(), unit.total());
            let counts = |s: &SpaceSaving| {
                let mut v: Vec<_> = s.iter().map(|c| (c.key.to_vec(), c.count, c.error)).collect();
                v.sort();
                v
            };
            proptest::prop_assert_eq!(counts(&weighted), counts(&unit));
        }
    }

    #[test]
    fn counts_exactly_below_capacity() {
        let mut s = SpaceSaving::new(10);
        for (k, n) in [(b"a", 5u64), (b"b", 3), (b"c", 1)] {
            for _ in 0..n {
                s.insert(k);
            }
        }
        assert_eq!(s.len(), 3);
        assert_eq!(s.min_count(), 0);
        assert_eq!(
            s.get(b"a"),
            Some(Counter {
                key: b"a",
                count: 5,
                error: 0
            })
        );
        assert_eq!(s.get(b"z"), None);
        let top: Vec<_> = s.top(2).iter().map(|c| (c.key.to_vec(), c.count)).collect();
        assert_eq!(top, vec![(b"a".to_vec(), 5), (b"b".to_vec(), 3)]);
        s.check_invariants();
    }

    #[test]
    fn eviction_takes_the_oldest_minimum_counter() {
        let mut s = SpaceSaving::new(2);
        s.insert(b"a");
        s.insert(b"b");
        // The newcomer takes the evicted counter's place: count 1 + 1, error 1 (the minimum).
        let replaced = |s: &SpaceSaving, key: &'static [u8], evicted: &[u8]| {
            assert_eq!(s.get(evicted), None);
            let expected = Counter {
                key,
                count: 2,
                error: 1,
            };
            assert_eq!(s.get(key), Some(expected));
        };
        s.insert(b"c"); // evicts "a" (oldest among count 1)
        replaced(&s, b"c", b"a");
        assert_eq!(s.min_count(), 1);
        s.insert(b"d"); // evicts "b"
        replaced(&s, b"d", b"b");
        s.check_invariants();
    }

    #[test]
    fn weighted_updates_walk_buckets() {
        let mut s = SpaceSaving::new(4);
        s.insert_weighted(b"x", 10);
        s.insert_weighted(b"y", 3);
        s.insert_weighted(b"z", 7);
        s.insert_weighted(b"y", 5); // 8, jumps over z's bucket
        s.insert_weighted(b"w", 0); // ignored
        assert_eq!(s.len(), 3);
        assert_eq!(s.get(b"y").unwrap().count, 8);
        let order: Vec<_> = s.top(10).iter().map(|c| c.key.to_vec()).collect();
        assert_eq!(order, vec![b"x".to_vec(), b"y".to_vec(), b"z".to_vec()]);
        s.check_invariants();
    }

    #[test]
    fn saturating_counts_do_not_break_structure() {
        let mut s = SpaceSaving::new(2);
        s.insert_weighted(b"a", u64::MAX - 1);
        s.insert_weighted(b"a", 5);
        s.insert_weighted(b"b", u64::MAX);
        assert_eq!(s.get(b"a").unwrap().count, u64::MAX);
        assert_eq!(s.total(), u64::MAX);
        s.check_invariants();
    }

    #[test]
    fn with_epsilon_validates() {
        assert_eq!(SpaceSaving::with_epsilon(0.01).unwrap().capacity(), 100);
        assert_eq!(SpaceSaving::with_epsilon(1.0).unwrap().capacity(), 1);
        assert_eq!(SpaceSaving::with_epsilon(0.3).unwrap().capacity(), 4);
        for bad in [0.0, -1.0, 1.5, f64::NAN, f64::INFINITY, 1e-12] {
            assert!(matches!(
                SpaceSaving::with_epsilon(bad),
                Err(Error::InvalidConfig {
                    field: "epsilon",
                    ..
                })
            ));
        }
        assert_eq!(SpaceSaving::new(0).capacity(), 1);
    }

    #[test]
    fn heavy_hitters_use_guaranteed_count() {
        let mut s = SpaceSaving::new(2);
        s.insert_weighted(b"a", 10);
        s.insert_weighted(b"b", 4);
        s.insert_weighted(b"c", 1); // evicts b: count 5, error 4, guaranteed 1
        let hh: Vec<_> = s.heavy_hitters(2).iter().map(|c| c.key.to_vec()).collect();
        assert_eq!(hh, vec![b"a".to_vec()]);
        assert_eq!(s.heavy_hitters(0).len(), 2);
        assert!(s.heavy_hitters(11).is_empty());
    }

    #[test]
    fn a_frequent_key_survives_a_flood_of_distinct_keys() {
        // tests/space_saving_bounds.rs and the `space_saving` bench cover 10^6 and 10^7 distinct keys.
        let mut s = SpaceSaving::new(100);
        let mut truth_hot = 0u64;
        for i in 0u64..200_000 {
            s.insert(&i.to_le_bytes());
            if i % 10 == 0 {
                s.insert(b"hot-key");
                truth_hot += 1;
            }
        }
        assert_eq!(s.len(), 100);
        assert!(s.bucket_arena_len() <= 101);
        // 1/11 of the stream is far above N / capacity: monitored, with a bounded error.
        let hot = s.get(b"hot-key").unwrap();
        assert!(hot.guaranteed() <= truth_hot && truth_hot <= hot.count);
        assert!(hot.error <= s.total() / 100);
        assert_eq!(s.top(1)[0].key, b"hot-key");
        s.check_invariants();
    }

    #[test]
    fn merge_combines_and_bounds() {
        let mut a = SpaceSaving::new(3);
        let mut b = SpaceSaving::new(3);
        let mut truth: HashMap<Vec<u8>, u64> = HashMap::new();
        for (s, keys) in [(&mut a, &b"aaaabbcde"[..]), (&mut b, &b"aaffffgh"[..])] {
            for &k in keys {
                s.insert(&[k]);
                *truth.entry(vec![k]).or_default() += 1;
            }
        }
        a.merge(&b).unwrap();
        assert_eq!(a.len(), 3);
        assert_eq!(a.total(), 17);
        exact_check(&a, &truth);
        assert_eq!(a.top(1)[0].key, b"a");
    }

    #[test]
    fn merge_rejects_full_smaller_summary() {
        let mut a = SpaceSaving::new(4);
        let mut b = SpaceSaving::new(2);
        b.insert(b"x");
        a.merge(&b).unwrap(); // not full: fine
        b.insert(b"y");
        assert!(matches!(a.merge(&b), Err(Error::IncompatibleMerge { .. })));
        let mut big = SpaceSaving::new(8);
        big.merge(&a).unwrap();
        assert_eq!(big.capacity(), 8);
    }

    #[test]
    fn decay_keeps_bounds_and_structure() {
        let mut s = SpaceSaving::new(3);
        for (k, n) in [(b"a", 9u64), (b"b", 6), (b"c", 3), (b"d", 2)] {
            s.insert_weighted(k, n);
        }
        s.decay(0.5);
        s.check_invariants();
        assert_eq!(s.total(), 10);
        for c in s.iter() {
            assert!(c.count >= 1 && c.error <= c.count);
        }
        assert_eq!(s.get(b"a").unwrap().count, 5); // ceil(4.5)
        s.decay(f64::NAN);
        assert_eq!(s.total(), 10);
        s.decay(0.0);
        assert!(s.is_empty());
        assert_eq!(s.total(), 0);
    }
}
