//! The lookup index behind [`Assignment::partition_for`](super::Assignment::partition_for).
//!
//! One 32-bit hash `h = bucket_hash.hash(key)` serves both routes: `bucket = to_positive(h) %
//! buckets`, the modulo done by multiplication (Lemire, Kaser, Kurz, "Faster remainder by direct
//! computation", 2019) since buckets are fixed per assignment. A private index, rebuilt from the
//! document in [`Assignment::new`], then answers "heavy partition or bucket partition" without
//! branching on which it is (heavy and light keys interleave at random in a skewed stream, and
//! a mispredicted branch costs more than the whole lookup):
//!
//! - a slot table (1, 2 or 4 bytes per bucket, the narrowest that fits) names, per bucket, a
//!   32-byte *group*: the bucket's single heavy key (first and last 8 bytes, length) with the
//!   key's partition and the bucket's; buckets without a heavy key name a group with their
//!   partition;
//! - the key is compared with the group's key and one of the group's two partitions is read at
//!   an index given by the outcome. Up to 16 bytes the first and last 8 bytes and the length are
//!   the whole key (under 8 bytes the key's word comes from murmur2's own reads of it); for 17 to
//!   64 bytes a few 8-byte windows of the middle are also compared, without a branch, with a
//!   per-group table found from the slot; longer keys compare their middle in the key arena,
//!   out of line, only when the rest matched. Each length class is one straight path;
//! - buckets holding two or more heavy keys (rare: about `heavy^2 / (2 * buckets)` of them) name
//!   no group but a *run*: their heavy keys side by side, at most [`MAX_HEAVY_KEYS_PER_BUCKET`],
//!   matched by hash, length and bytes. The slot's value is past the last group, so the bounds
//!   check on the group index is the branch to the run, and the run's index is the slot's value
//!   minus the group count: O(1) to find, a bounded scan to match. Keys that collide in the bucket
//!   hash (murmur2 collisions are easy to craft) therefore cost at most that bounded scan, and a
//!   document's build stays O(n log n), whatever its heavy keys;
//! - a split key's bucket (format version 2) is a run too, even alone, and its run entry holds a
//!   sentinel instead of a partition: the run's out-of-line path takes the key's next pick
//!   (`docs/spec.md` 4.6: a precomputed smooth weighted round robin schedule indexed by an atomic
//!   count per key), so the whole-key path has no branch more than a document without splits.
//!
//! A key is heavy only if all its bytes match a heavy key's, so keys that collide in `h` are told
//! apart. Cost (BENCHMARKS.md, "Lookup speed"): 1.2-1.5x Kafka's own murmur2 placement of the
//! same keys of 16 to 64 bytes, 1.4-1.8x for shorter keys (where murmur2 itself is only a few
//! instructions).

use super::*;

/// `a % d` for a fixed `d` by two multiplications (Lemire, Kaser, Kurz 2019; exact for all u32).
#[derive(Clone, Copy, Debug)]
pub(super) struct FastRem {
    m: u64,
    pub(super) d: u32,
}

impl FastRem {
    fn new(d: NonZeroU32) -> Self {
        // For d == 1 this wraps to 0, and rem() then returns 0: still exact.
        Self {
            m: (u64::MAX / u64::from(d.get())).wrapping_add(1),
            d: d.get(),
        }
    }

    #[inline]
    pub(super) fn rem(self, a: u32) -> u32 {
        let low = self.m.wrapping_mul(u64::from(a));
        ((u128::from(low) * u128::from(self.d)) >> 64) as u32
    }
}

/// `Group::len` of a bucket's partition group (no heavy key). No key compared branch-free is that
/// long (they have at most [`BRANCHLESS_KEY_BYTES`]), and the longer keys' path checks for it.
const LIGHT: u32 = u32::MAX;
/// Keys up to this long are compared without branching on the outcome (see `Lookup::middle_diff`).
pub(super) const BRANCHLESS_KEY_BYTES: usize = 64;
/// Where a key of `N` windows' class reads its middle: 8-byte windows from offset 8 on and from the
/// end back, so that they cover bytes 8 to `len - 8` for every length of the class (`len` up to
/// `16 + 8 N`: 17 to 32 bytes for `N = 2`, 33 to 48 for 4, 49 to 64 for 6); windows of a
/// shorter key overlap. Fixed per length, so a key and a heavy key of its length read the same
/// offsets. (Three windows for 33 to 40 bytes, one for 17 to 24, measured slower: layout.)
#[inline(always)]
fn middle_offsets<const N: usize>(len: usize) -> [usize; N] {
    let mut at = [0; N];
    for (i, a) in at.iter_mut().enumerate() {
        *a = if i < N / 2 {
            8 + 8 * i
        } else {
            len.saturating_sub(16 + 8 * (N - 1 - i))
        };
    }
    at
}

/// The middle words of `key` at `middle_offsets::<N>`; `None` if a window is out of the key
/// (not for the class's lengths).
#[inline(always)]
fn middle_words<const N: usize>(key: &[u8]) -> Option<[u64; N]> {
    let mut words = [0; N];
    for (w, at) in words.iter_mut().zip(middle_offsets::<N>(key.len())) {
        *w = u64::from_le_bytes(*key.get(at..)?.first_chunk()?);
    }
    Some(words)
}

/// What a bucket's slot names. A bucket with exactly one heavy key names that key's own group. A
/// bucket without heavy keys names any group whose bucket partition is its own: another bucket's
/// heavy-key group (its key cannot match: it hashes to that other bucket) or, if there is none, a
/// group made for the partition. Sharing keeps the groups few, so the slots fit in a byte for
/// small assignments.
///
/// 32 bytes, aligned so one never straddles a cache line.
#[derive(Clone, Copy, Debug)]
#[repr(C, align(32))]
struct Group {
    /// `key_words(key)`: the key's first and last 8 bytes (zero-padded below 8 bytes).
    words: [u64; 2],
    /// The key's length, or [`LIGHT`].
    len: u32,
    /// Offset of the key's bytes in the arena (read only by the build and for keys over 64 bytes).
    start: u32,
    /// `[partition of the key, partition of the bucket]`, indexed by "the key differs", which
    /// compiles to an indexed load instead of a branch.
    partitions: [u32; 2],
}

/// A heavy key of a bucket that holds other heavy keys too: one entry of that bucket's run.
#[derive(Clone, Copy, Debug)]
struct Shared {
    /// The key's bucket hash.
    hash: u32,
    /// Key length. Heavy keys are at most [`MAX_KEY_BYTES`] long.
    len: u32,
    /// Offset of the key bytes in the arena.
    start: u32,
    partition: u32,
}

/// Bucket -> group index, or past the groups a run index, in the narrowest width that holds them.
///
/// The lookup's cost follows its L1 footprint closely (measured: a `u8` slot table instead of `u16`
/// takes 3 points off the `partition_for` ratio), so small assignments get 1 byte per bucket.
#[derive(Clone)]
enum Slots {
    U8(Box<[u8]>),
    U16(Box<[u16]>),
    U32(Box<[u32]>),
}

impl Slots {
    /// `slots` hold indices `< targets` (groups, then runs).
    fn new(slots: Vec<u32>, targets: usize) -> Self {
        if targets <= usize::from(u8::MAX) + 1 {
            Self::U8(slots.iter().map(|&s| s as u8).collect())
        } else if targets <= usize::from(u16::MAX) + 1 {
            Self::U16(slots.iter().map(|&s| s as u16).collect())
        } else {
            Self::U32(slots.into_boxed_slice())
        }
    }

    /// The group index of `bucket` (`None` only past the end, which `FastRem` never yields).
    #[inline(always)]
    fn get(&self, bucket: usize) -> Option<usize> {
        match self {
            Self::U8(slots) => slots.get(bucket).map(|&s| usize::from(s)),
            Self::U16(slots) => slots.get(bucket).map(|&s| usize::from(s)),
            Self::U32(slots) => slots.get(bucket).map(|&s| s as usize),
        }
    }

    fn width(&self) -> usize {
        match self {
            Self::U8(_) => 1,
            Self::U16(_) => 2,
            Self::U32(_) => 4,
        }
    }

    fn len(&self) -> usize {
        match self {
            Self::U8(slots) => slots.len(),
            Self::U16(slots) => slots.len(),
            Self::U32(slots) => slots.len(),
        }
    }
}

/// Partitions are below [`MAX_PARTITIONS`] (< 2^20), so index values from here on name split
/// keys: `SPLIT_SENTINEL + s` is split key `s` of `Lookup::splits`.
pub(super) const SPLIT_SENTINEL: u32 = 1 << 31;

/// One split key's spread (`docs/spec.md` 4.6): the smooth weighted round robin sequence of its
/// weights over one period (their sum, at most [`MAX_SPLIT_WEIGHT_SUM`]), precomputed as part
/// indices, and the count of records this instance has placed.
#[derive(Debug)]
pub(super) struct SplitSchedule {
    /// Index of the key in the document's heavy list.
    pub(super) heavy: u32,
    /// The parts' partitions, in document order.
    partitions: Box<[u32]>,
    /// Per position of the period, the part index (at most [`MAX_SPLIT_PARTS`] parts: a byte).
    schedule: Box<[u8]>,
    /// Records of this key placed so far by this instance (all threads): record `n` takes
    /// `schedule[n % period]`. Relaxed: only the count matters, nothing is published through it.
    next: AtomicU64,
}

impl SplitSchedule {
    /// `parts` are validated (2..=64 parts, weights >= 1, sum <= MAX_SPLIT_WEIGHT_SUM).
    fn new(heavy: u32, parts: &[SplitPart]) -> Self {
        let weights: Vec<u32> = parts.iter().map(|p| p.weight).collect();
        Self {
            heavy,
            partitions: parts.iter().map(|p| p.partition).collect(),
            schedule: swrr_schedule(&weights)
                .into_iter()
                .map(|i| i as u8)
                .collect(),
            next: AtomicU64::new(0),
        }
    }

    #[inline]
    fn pick(&self) -> u32 {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        // `schedule` is never empty (weights >= 1) and holds part indices; the fallbacks only
        // keep this panic-free.
        let period = self.schedule.len().max(1) as u64;
        let part = self
            .schedule
            .get((n % period) as usize)
            .copied()
            .unwrap_or(0);
        self.partitions
            .get(usize::from(part))
            .or(self.partitions.first())
            .copied()
            .unwrap_or(0)
    }

    fn heap_bytes(&self) -> usize {
        size_of_val::<[u32]>(&self.partitions) + self.schedule.len()
    }
}

/// Copies the counter's value: the clone continues the sequence where the original was, and
/// both then count on their own.
impl Clone for SplitSchedule {
    fn clone(&self) -> Self {
        Self {
            heavy: self.heavy,
            partitions: self.partitions.clone(),
            schedule: self.schedule.clone(),
            next: AtomicU64::new(self.next.load(Ordering::Relaxed)),
        }
    }
}

/// The smooth weighted round robin sequence of `weights` over one period (`sum(weights)` picks),
/// as indices into `weights` (`docs/spec.md` 4.6): counters `c[i]` start at 0; for each pick,
/// `c[i] += w[i]` for every `i`, the pick is the `i` with the largest `c[i]` (ties: the lowest
/// `i`), then `c[pick] -= sum(w)`. After one period every counter is 0 again, so the sequence
/// repeats, with exactly `w[i]` picks of `i` per period.
fn swrr_schedule(weights: &[u32]) -> Vec<usize> {
    let total: i64 = weights.iter().map(|&w| i64::from(w)).sum();
    let mut current = vec![0_i64; weights.len()];
    let mut out = Vec::with_capacity(usize::try_from(total).unwrap_or(0));
    for _ in 0..total {
        for (c, &w) in current.iter_mut().zip(weights) {
            *c += i64::from(w);
        }
        // `max_by_key` keeps the last maximum: reversed, that is the lowest index.
        let best = current
            .iter()
            .enumerate()
            .rev()
            .max_by_key(|&(_, &c)| c)
            .map_or(0, |(i, _)| i);
        if let Some(c) = current.get_mut(best) {
            *c -= total;
        }
        out.push(best);
    }
    out
}

/// The private lookup index. Built once in `Assignment::new`; read-only afterwards (but for the
/// split keys' counters).
#[derive(Clone)]
pub(super) struct Lookup {
    /// Bucket -> group index, or `groups.len() + r` for a bucket whose heavy keys are run `r`.
    slots: Slots,
    groups: Box<[Group]>,
    /// Heavy keys of buckets with several of them, each bucket's keys side by side (heaviest first).
    shared: Box<[Shared]>,
    /// Run `r` is `shared[runs[r].0..runs[r].1]`, at most [`MAX_HEAVY_KEYS_PER_BUCKET`] long.
    runs: Box<[(u32, u32)]>,
    /// All heavy key bytes, back to back.
    arena: Box<[u8]>,
    /// Per group (indexed like `groups`), the middle words ([`middle_words`]) of its heavy key if
    /// that has 17 to 32 bytes, else zeros; empty when no heavy key has such a length (then no
    /// key of those lengths is heavy).
    middles_2: Box<[[u64; 2]]>,
    /// The same for keys of 33 to 48 bytes, four windows.
    middles_4: Box<[[u64; 4]]>,
    /// The same for keys of 49 to [`BRANCHLESS_KEY_BYTES`] bytes, six windows.
    middles_6: Box<[[u64; 6]]>,
    pub(super) buckets: FastRem,
    /// The split keys, in document order; the run entry of split key `s` holds the partition
    /// `SPLIT_SENTINEL + s` (a split key's bucket is always a run, never a group).
    pub(super) splits: Box<[SplitSchedule]>,
}

/// A summary: the index mirrors `heavy` and `table` and would drown the document in `{:?}` output.
impl fmt::Debug for Lookup {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lookup")
            .field("buckets", &self.buckets.d)
            .field("slot_bytes", &self.slots.width())
            .field("groups", &self.groups.len())
            .field("shared_keys", &self.shared.len())
            .field("runs", &self.runs.len())
            .field("arena_bytes", &self.arena.len())
            .field("middles_2", &self.middles_2.len())
            .field("middles_4", &self.middles_4.len())
            .field("middles_6", &self.middles_6.len())
            .field("split_keys", &self.splits.len())
            .finish_non_exhaustive()
    }
}

impl Lookup {
    /// `parts` is already validated except for duplicate keys, which this detects.
    pub(super) fn build(parts: &AssignmentParts) -> Result<Self> {
        let buckets = NonZeroU32::new(parts.table.len() as u32)
            .map(FastRem::new)
            .ok_or_else(|| invalid("the bucket table must have at least 1 bucket"))?;
        let mut arena = Vec::with_capacity(parts.heavy.iter().map(|h| h.key.len()).sum());
        // (bucket, key index, hash, arena offset), sorted by bucket then heaviest first (ties in
        // document order): each bucket's heavy keys are then one run.
        let mut keys: Vec<(u32, usize, u32, u32)> = Vec::with_capacity(parts.heavy.len());
        for (i, hk) in parts.heavy.iter().enumerate() {
            let hash = parts.bucket_hash.hash(&hk.key);
            // Fits in u32: total key bytes <= MAX_HEAVY_KEY_BYTES_TOTAL, checked in `new`.
            keys.push((buckets.rem(to_positive(hash)), i, hash, arena.len() as u32));
            arena.extend_from_slice(&hk.key);
        }
        let heavy = |i: usize| &parts.heavy[i];
        // What the index stores per heavy key: its partition, or a split key's sentinel.
        let mut splits = Vec::new();
        let stored: Vec<u32> = (0..parts.heavy.len())
            .map(|i| {
                let hk = heavy(i);
                if !hk.is_split() {
                    return hk.partition;
                }
                // At most MAX_HEAVY_KEYS split keys: far below 2^31.
                let sentinel = SPLIT_SENTINEL + splits.len() as u32;
                splits.push(SplitSchedule::new(i as u32, &hk.split));
                sentinel
            })
            .collect();
        let splits = splits.into_boxed_slice();
        keys.sort_by_key(|&(bucket, i, _, _)| (bucket, std::cmp::Reverse(heavy(i).weight), i));

        // Heavy-key groups first, one per bucket with exactly one heavy key; then every other
        // bucket names a group with its partition, made only for partitions no heavy-key group has.
        // Not yet assigned (distinct from RUN and from every index).
        const NONE: u32 = u32::MAX - 1;
        // A bucket of several heavy keys, until the group count is known.
        const RUN: u32 = u32::MAX - 2;
        let mut groups: Vec<Group> = Vec::new();
        let mut slots: Vec<u32> = vec![NONE; parts.table.len()];
        let mut partition_group = vec![NONE; parts.partitions as usize];
        let mut shared = Vec::new();
        // (bucket, run index): their slots are set once the group count is known.
        let mut runs: Vec<(u32, u32)> = Vec::new();
        let mut run_buckets: Vec<usize> = Vec::new();
        for run in keys.chunk_by(|a, b| a.0 == b.0) {
            let bucket = run[0].0 as usize;
            let bucket_partition = parts.table[bucket];
            if run.len() > MAX_HEAVY_KEYS_PER_BUCKET {
                return Err(invalid(format!(
                    "bucket {bucket} holds {} heavy keys, at most {MAX_HEAVY_KEYS_PER_BUCKET} are allowed",
                    run.len()
                )));
            }
            // A split key's bucket is a run even alone: the pick then stays off the groups' path.
            let single = match *run {
                [(_, i, _, start)] if !heavy(i).is_split() => Some((i, start)),
                _ => None,
            };
            if let Some((i, start)) = single {
                // At most buckets + partitions groups: far below u32::MAX.
                let index = groups.len() as u32;
                slots[bucket] = index;
                let shared = &mut partition_group[bucket_partition as usize];
                if *shared == NONE {
                    *shared = index;
                }
                let hk = heavy(i);
                groups.push(Group {
                    words: key_words(&hk.key),
                    len: hk.key.len() as u32,
                    start,
                    partitions: [hk.partition, bucket_partition],
                });
            } else {
                let first = shared.len();
                for &(_, i, hash, start) in run {
                    let key = &heavy(i).key;
                    // Equal keys share a bucket, so a duplicate meets its twin in this run (at
                    // most MAX_HEAVY_KEYS_PER_BUCKET long: the pairwise check is bounded).
                    let twin = shared[first..].iter().any(|s: &Shared| {
                        s.hash == hash && arena_key(&arena, s.start, s.len) == Some(key.as_slice())
                    });
                    if twin {
                        return Err(duplicate(key));
                    }
                    shared.push(Shared {
                        hash,
                        len: key.len() as u32,
                        start,
                        partition: stored[i],
                    });
                }
                slots[bucket] = RUN;
                run_buckets.push(bucket);
                // At most MAX_HEAVY_KEYS entries: fits in u32.
                runs.push((first as u32, shared.len() as u32));
            }
        }
        for (slot, &p) in slots.iter_mut().zip(&parts.table) {
            if *slot != NONE {
                continue;
            }
            let shared = &mut partition_group[p as usize];
            if *shared == NONE {
                *shared = groups.len() as u32;
                groups.push(Group {
                    words: [0; 2],
                    len: LIGHT,
                    start: 0,
                    partitions: [p, p],
                });
            }
            *slot = *shared;
        }
        for (r, &bucket) in run_buckets.iter().enumerate() {
            // groups + runs <= 2 * buckets + partitions: far below u32::MAX.
            slots[bucket] = (groups.len() + r) as u32;
        }
        let middles_2 = middles(&groups, &arena, 17..=32);
        let middles_4 = middles(&groups, &arena, 33..=48);
        let middles_6 = middles(&groups, &arena, 49..=BRANCHLESS_KEY_BYTES);
        Ok(Self {
            slots: Slots::new(slots, groups.len() + runs.len()),
            groups: groups.into_boxed_slice(),
            shared: shared.into_boxed_slice(),
            runs: runs.into_boxed_slice(),
            middles_2,
            middles_4,
            middles_6,
            arena: arena.into_boxed_slice(),
            buckets,
            splits,
        })
    }

    /// The partition of a key with bucket hash `h`, and its route. `parts` is the document.
    ///
    /// Heavy and light keys interleave at random in a skewed stream, so a branch on "is it heavy"
    /// would mispredict on a large share of records. Instead every key reads its bucket's slot and
    /// the group it names (a group with its partition if the bucket has no heavy key), compares itself
    /// with the group's key, and picks one of the group's two partitions by the outcome. The
    /// branches left depend only on the key's length (which a topic's keys tend to share) and on
    /// whether the bucket holds several heavy keys (rare: the bounds check of `groups` sends
    /// those to the bucket's run).
    ///
    /// `MIDDLE` is the key's count of middle windows (0 up to 16 bytes, else 2, 4 or 6: the
    /// caller dispatches on the length). Every instruction and dependent load here shows in the
    /// `partition_for` bench (murmur2 of a short key is only ~15 instructions), and so do branch
    /// layout and the L1 footprint; a select written as `if` or mask arithmetic was compiled into
    /// a branch (LLVM's cmov-to-branch conversion), hence the indexed read in `Group::partitions`.
    #[inline(always)]
    pub(super) fn partition<const MIDDLE: usize>(
        &self,
        parts: &AssignmentParts,
        h: u32,
        [w0, w1]: [u64; 2],
        key: &[u8],
    ) -> (u32, Route) {
        let bucket = self.buckets.rem(to_positive(h)) as usize;
        // The width is fixed per assignment: this branch always goes the same way.
        let slot = self.slots.get(bucket).unwrap_or(usize::MAX);
        let Some(group) = self.groups.get(slot) else {
            return self.run_route(slot, parts, h, key);
        };
        // Up to 16 bytes, the two words and the length are the whole key.
        let mut diff = (w0 ^ group.words[0])
            | (w1 ^ group.words[1])
            | (key.len() as u64 ^ u64::from(group.len));
        if MIDDLE > 0 {
            diff |= self.middle_diff::<MIDDLE>(slot, key);
        }
        let differs = diff != 0;
        let route = if differs { Route::Bucket } else { Route::Heavy };
        (group.partitions[usize::from(differs)], route)
    }

    /// Non-zero if the bytes of `key` (17 to [`BRANCHLESS_KEY_BYTES`] long, `N` windows of
    /// [`middle_offsets`]) between its first and last 8 differ from those of the group's key.
    ///
    /// Compared unconditionally: a branch on "the first and last bytes match" would go one way
    /// for heavy keys and the other for light ones, which interleave at random. The stored words
    /// are found from the slot alone, so their load does not wait for the group's; a light group
    /// (or one whose key has another length) has some words too, and `diff` holds the length
    /// mismatch. No table (no heavy key of the class): the key is not heavy.
    #[inline(always)]
    fn middle_diff<const N: usize>(&self, slot: usize, key: &[u8]) -> u64 {
        let stored = match N {
            2 => self.middles_2.get(slot).map(|m| m.as_slice()),
            4 => self.middles_4.get(slot).map(|m| m.as_slice()),
            _ => self.middles_6.get(slot).map(|m| m.as_slice()),
        };
        match (stored, middle_words::<N>(key)) {
            (Some(stored), Some(words)) => {
                words.iter().zip(stored).fold(0, |d, (w, s)| d | (w ^ s))
            }
            _ => 1,
        }
    }

    /// [`Lookup::partition`] for keys longer than [`BRANCHLESS_KEY_BYTES`]: their middle is
    /// compared (in the arena) only if everything else matched. Out of line so the common lengths
    /// stay compact; hashing such a key costs more than the call.
    #[cold]
    #[inline(never)]
    pub(super) fn long_partition(&self, parts: &AssignmentParts, key: &[u8]) -> (u32, Route) {
        let h = parts.bucket_hash.hash(key);
        let bucket = self.buckets.rem(to_positive(h)) as usize;
        let slot = self.slots.get(bucket).unwrap_or(usize::MAX);
        let Some(group) = self.groups.get(slot) else {
            return self.run_route(slot, parts, h, key);
        };
        let [w0, w1] = key_words(key);
        let ends_match = w0 == group.words[0]
            && w1 == group.words[1]
            && key.len() as u64 == u64::from(group.len);
        let middle = key.get(8..key.len().saturating_sub(8)).unwrap_or_default();
        let heavy = ends_match
            && (group.start as usize)
                .checked_add(8)
                .and_then(|from| self.arena.get(from..))
                .and_then(|rest| rest.get(..middle.len()))
                == Some(middle);
        if heavy {
            (group.partitions[0], Route::Heavy)
        } else {
            (group.partitions[1], Route::Bucket)
        }
    }

    /// The slot of the bucket of bucket hash `h` (`usize::MAX`, past everything, only if out
    /// of range, which `FastRem` never yields).
    #[inline(always)]
    pub(super) fn slot_of(&self, h: u32) -> usize {
        let bucket = self.buckets.rem(to_positive(h)) as usize;
        self.slots.get(bucket).unwrap_or(usize::MAX)
    }

    /// [`Lookup::run_partition`], with a split key's next pick for its sentinel.
    #[cold]
    #[inline(never)]
    fn run_route(&self, slot: usize, parts: &AssignmentParts, h: u32, key: &[u8]) -> (u32, Route) {
        let (p, route) = self.run_partition(slot, parts, h, key);
        match p.checked_sub(SPLIT_SENTINEL) {
            // Only sentinels of existing split keys are stored; 0 is a valid partition regardless.
            Some(s) => (
                self.splits.get(s as usize).map_or(0, SplitSchedule::pick),
                Route::Split,
            ),
            None => (p, route),
        }
    }

    /// The partition of `key`, whose bucket holds several heavy keys or a split key (slot
    /// `slot`, past the groups): an exact match in the bucket's run, else the bucket's partition
    /// (also for a slot that names a group: no match then). A split key's partition is its
    /// sentinel. The run is at most [`MAX_HEAVY_KEYS_PER_BUCKET`] long, so colliding keys cannot
    /// make this slow.
    #[cold]
    #[inline(never)]
    pub(super) fn run_partition(
        &self,
        slot: usize,
        parts: &AssignmentParts,
        h: u32,
        key: &[u8],
    ) -> (u32, Route) {
        let bucket = parts
            .table
            .get(self.buckets.rem(to_positive(h)) as usize)
            .copied()
            .unwrap_or(0);
        let run = slot
            .checked_sub(self.groups.len())
            .and_then(|r| self.runs.get(r))
            .and_then(|&(from, to)| self.shared.get(from as usize..to as usize))
            .unwrap_or_default();
        for s in run {
            if s.hash == h
                && s.len as usize == key.len()
                && arena_key(&self.arena, s.start, s.len) == Some(key)
            {
                return (s.partition, Route::Heavy);
            }
        }
        (bucket, Route::Bucket)
    }
}

/// `Lookup::middles_2`, `middles_4` or `middles_6` of these groups: per group, the middle words of its heavy
/// key if the key's length is in `lens`, else zeros. Empty when no heavy key's length is.
fn middles<const N: usize>(
    groups: &[Group],
    arena: &[u8],
    lens: std::ops::RangeInclusive<usize>,
) -> Box<[[u64; N]]> {
    let middle = |g: &Group| {
        let key = arena_key(arena, g.start, g.len).unwrap_or_default();
        let inline = g.len != LIGHT && lens.contains(&key.len());
        inline.then(|| middle_words::<N>(key)).flatten()
    };
    if !groups.iter().any(|g| middle(g).is_some()) {
        return Box::default();
    }
    groups.iter().map(|g| middle(g).unwrap_or([0; N])).collect()
}

#[inline]
fn arena_key(arena: &[u8], start: u32, len: u32) -> Option<&[u8]> {
    let start = start as usize;
    arena.get(start..start.checked_add(len as usize)?)
}

fn duplicate(key: &[u8]) -> Error {
    Error::DuplicateHeavyKey {
        key_b64: truncate_for_display(&B64.encode(key)),
    }
}

/// A key's first and last 8 bytes as little-endian words; for keys under 8 bytes, the key
/// zero-padded and 0. Together with the length this is the whole key up to 16 bytes.
///
/// Short keys are read with overlapping loads (4 to 7 bytes: the first and the last 4; 1 to 3:
/// the first, middle and last byte), not a byte loop, which costs more than the rest of the
/// lookup. The branches depend only on the key's length.
#[inline(always)]
pub(super) fn key_words(key: &[u8]) -> [u64; 2] {
    let n = key.len();
    if let (Some(head), Some(last)) = (key.first_chunk(), key.last_chunk()) {
        return [u64::from_le_bytes(*head), u64::from_le_bytes(*last)];
    }
    let word = if let (Some(head), Some(last)) = (key.first_chunk(), key.last_chunk()) {
        let last = u64::from(u32::from_le_bytes(*last)) << (8 * (n - 4));
        u64::from(u32::from_le_bytes(*head)) | last
    } else {
        // 0 to 3 bytes: bytes 0, n / 2 and n - 1 are all of them.
        let byte = |i: usize| key.get(i).map_or(0, |&b| u64::from(b) << (8 * i));
        byte(0) | byte(n / 2) | byte(n.wrapping_sub(1))
    };
    [word, 0]
}

impl Assignment {
    /// Approximate heap memory of the lookup index ([`Assignment::partition_for`]'s data), in bytes:
    /// slot table, groups, runs, key arena and middle-word tables. The document fields are not counted
    /// (a producer needs only the index to route).
    #[must_use]
    pub fn lookup_heap_bytes(&self) -> usize {
        let i = &self.index;
        i.slots.width() * i.slots.len()
            + size_of_val::<[Group]>(&i.groups)
            + size_of_val::<[Shared]>(&i.shared)
            + size_of_val::<[(u32, u32)]>(&i.runs)
            + i.arena.len()
            + size_of_val::<[[u64; 2]]>(&i.middles_2)
            + size_of_val::<[[u64; 4]]>(&i.middles_4)
            + size_of_val::<[[u64; 6]]>(&i.middles_6)
            + i.splits
                .iter()
                .map(SplitSchedule::heap_bytes)
                .sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_rem_matches_remainder_on_edges() {
        let ds = [1_u32, 2, 3, 7, 64, 100, 1000, MAX_BUCKETS - 1, MAX_BUCKETS];
        let xs = [0_u32, 1, 2, 63, 64, 65, 0x7fff_fffe, 0x7fff_ffff, u32::MAX];
        for &d in &ds {
            let f = FastRem::new(NonZeroU32::new(d).expect("nonzero"));
            for &x in &xs {
                assert_eq!(f.rem(x), x % d, "{x} % {d}");
            }
        }
    }

    proptest::proptest! {
        /// The multiply-shift remainder is exact for every u32 and every legal bucket count.
        #[test]
        fn fast_rem_is_exact(x in proptest::prelude::any::<u32>(), d in 1_u32..=MAX_BUCKETS) {
            let f = FastRem::new(NonZeroU32::new(d).expect("nonzero"));
            proptest::prop_assert_eq!(f.rem(x), x % d);
        }

        /// ... and for u32 divisors beyond our limits too (the method holds for all of them).
        #[test]
        fn fast_rem_is_exact_for_any_divisor(x in proptest::prelude::any::<u32>(), d in 1_u32..) {
            let f = FastRem::new(NonZeroU32::new(d).expect("nonzero"));
            proptest::prop_assert_eq!(f.rem(x), x % d);
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(128))]

        /// Keys that share their first and last 8 bytes and their length differ only in the
        /// middle, which the lookup compares against `middles` (17 to 64 bytes) or the arena
        /// (longer): each heavy key routes heavy, its one-byte middle changes and the other keys
        /// of the same shape route by their bucket, whatever group their bucket names.
        #[test]
        fn keys_differing_only_in_the_middle_route_by_the_rule(
            len in 17_usize..=80,
            middles in proptest::collection::btree_set(
                proptest::collection::vec(proptest::prelude::any::<u8>(), 1..=64), 1..24),
            at in proptest::prelude::any::<proptest::sample::Index>(),
            buckets in 1_u32..=64,
        ) {
            let key = |middle: &[u8]| {
                let mut k = vec![b'k'; len];
                let n = middle.len().min(len - 16);
                k[8..8 + n].copy_from_slice(&middle[..n]);
                k
            };
            let keys: std::collections::BTreeSet<Vec<u8>> = middles.iter().map(|m| key(m)).collect();
            let keys: Vec<Vec<u8>> = keys.into_iter().collect();
            let (heavy_keys, light_keys) = keys.split_at(keys.len().div_ceil(2));
            let heavy = heavy_keys
                .iter()
                .enumerate()
                .map(|(i, k)| HeavyKey::whole(k.clone(), 1 + i as u32 % 3, 1))
                .collect();
            let parts = AssignmentParts {
                topic: "t".to_owned(),
                partitions: 4,
                epoch: 1,
                bucket_hash: BucketHash::default(),
                table: (0..buckets).map(|b| b % 2 * 3).collect(),
                heavy,
                params: Params { theta: 0.1, epsilon: 0.05, mu: 1.0, window_records: 1 },
                created_at_ms: 0,
                predicted_load: vec![0.25; 4],
            };
            let Ok(a) = Assignment::new(parts) else {
                // More than the per-bucket bound of heavy keys in one bucket: not a document.
                return Ok(());
            };
            let rule = |k: &[u8]| match a.heavy().iter().find(|h| h.key == k) {
                Some(h) => (h.partition, Route::Heavy),
                None => (a.table()[a.bucket(k) as usize], Route::Bucket),
            };
            for k in heavy_keys {
                proptest::prop_assert_eq!(a.route(k).1, Route::Heavy);
                let mut changed = k.clone();
                changed[8 + at.index(len - 16)] ^= 0x20;
                proptest::prop_assert_eq!(a.route(&changed), rule(&changed));
            }
            for k in light_keys {
                proptest::prop_assert_eq!(a.route(k), rule(k));
                proptest::prop_assert_eq!(a.route(k).1, Route::Bucket);
            }
        }
    }

    /// For every length the lookup compares branch-free, its class's windows stay inside the key
    /// and cover every byte between the first and last 8.
    #[test]
    fn middle_windows_cover_the_middle_of_every_length() {
        fn check<const N: usize>(lens: std::ops::RangeInclusive<usize>) {
            for len in lens {
                let mut covered = vec![false; len];
                for at in middle_offsets::<N>(len) {
                    assert!(at + 8 <= len, "len {len}: window at {at}");
                    covered[at..at + 8].iter_mut().for_each(|c| *c = true);
                }
                assert!(covered[8..len - 8].iter().all(|&c| c), "len {len}");
                let key: Vec<u8> = (0..len as u8).collect();
                assert!(middle_words::<N>(&key).is_some(), "len {len}");
            }
        }
        check::<2>(17..=32);
        check::<4>(33..=48);
        check::<6>(49..=BRANCHLESS_KEY_BYTES);
    }

    /// Parts with one bucket per partition (so one group per partition) plus one bucket holding
    /// two heavy keys (no group: a run, named by the slot past the last group).
    fn parts_with_groups(partitions: u32) -> (AssignmentParts, [Vec<u8>; 2]) {
        let mut table: Vec<u32> = (0..partitions).collect();
        table.push(0);
        let buckets = table.len() as u32;
        let hash = BucketHash::default();
        // Two keys of the last bucket.
        let mut in_last = (0_u32..)
            .map(|i| format!("k{i}").into_bytes())
            .filter(|k| hash.bucket(k, buckets) == buckets - 1);
        let pair = [
            in_last.next().expect("infinite"),
            in_last.next().expect("infinite"),
        ];
        let heavy = pair
            .iter()
            .map(|k| HeavyKey {
                key: k.clone(),
                partition: partitions - 1,
                weight: 1,
                split: Vec::new(),
            })
            .collect();
        let parts = AssignmentParts {
            topic: "t".to_owned(),
            partitions,
            epoch: 1,
            bucket_hash: hash,
            table,
            heavy,
            params: Params {
                theta: 0.1,
                epsilon: 0.05,
                mu: 1.0,
                window_records: 1,
            },
            created_at_ms: 0,
            predicted_load: vec![0.0; partitions as usize],
        };
        (parts, pair)
    }

    /// Around the width limits the slot of a bucket with several heavy keys must still be past
    /// the last group (the bounds check is what sends it to the run), and every other slot must
    /// name its group. Groups + runs = partitions + 1 indices must fit the width.
    #[test]
    fn slot_width_boundaries_keep_runs_past_the_last_group() {
        for (partitions, width) in [(254, 1), (255, 1), (256, 2), (65_535, 2), (65_536, 4)] {
            let (parts, pair) = parts_with_groups(partitions);
            let a = Assignment::new(parts).expect("valid");
            assert_eq!(a.index.slots.width(), width, "{partitions} partitions");
            assert_eq!(a.index.groups.len(), partitions as usize);
            let last = a.buckets() as usize - 1;
            assert!(a.index.slots.get(last).expect("in range") >= a.index.groups.len());
            for key in &pair {
                assert_eq!(a.route(key), (partitions - 1, Route::Heavy));
            }
            for i in 0..2_000_u32 {
                let key = format!("light-{i}");
                let bucket = a.bucket(key.as_bytes()) as usize;
                assert_eq!(a.route(key.as_bytes()), (a.table()[bucket], Route::Bucket));
            }
        }
    }
}
