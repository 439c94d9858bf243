//! The assignment: the document the sampler publishes on the control topic, and the O(1) lookup
//! producers run for every record.
//!
//! Normative text: `docs/spec.md` sections 4 and 5 (every field, the decoding order, the reject
//! reasons, the lookup); golden vectors: `spec/vectors/` (`lookup.json`, `reject.json`, `random.json`).
//!
//! DKG (Rivetti et al., "Efficient Key Grouping for Near-Optimal Load Balancing in Stream Processing
//! Systems", DEBS 2015) deploys as `partition(key) = heavy[key]` if the key is a heavy hitter, else
//! `table[bucket(key)]`. An [`Assignment`] is that mapping plus what a reader needs to trust it:
//! topic, partition count, epoch, the bucket hash, the parameters it was learned with, its creation
//! time and the per-partition load it predicts.
//!
//! # Document (format `dkg.assignment`, version 1)
//!
//! ```json
//! {"format":"dkg.assignment","version":1,"topic":"orders","partitions":3,"epoch":7,
//!  "bucket_hash":{"function":"murmur2","seed":625341585},"buckets":4,"table":[0,1,2,0],
//!  "heavy":[{"key_b64":"aG90","partition":1,"weight":1200}],
//!  "params":{"theta":0.01,"epsilon":0.005,"mu":4.0,"window_records":100000},
//!  "created_at_ms":1700000000000,"predicted_load":[0.34,0.33,0.33]}
//! ```
//!
//! Keys are base64 (standard alphabet, canonical padding), so arbitrary bytes round-trip.
//!
//! **Strictness.** Decoding rejects unknown fields, at every level. The document decides where records
//! go and every producer must route identically: a v1 reader that silently skipped a field a newer
//! writer relies on (a salt, a second table) would route differently without noticing. So any change
//! of meaning or shape bumps `version`; an old reader then fails loudly with
//! [`Error::UnsupportedVersion`] and keeps its last good assignment. The version is read before the
//! rest of the document, so a newer document always gets that error, never a shape error.
//!
//! **Validation.** [`Assignment::new`] and [`Assignment::from_json`] check everything a lookup
//! relies on (see [`Assignment::new`]); an `Assignment` that exists is valid, which is what lets
//! [`Assignment::partition_for`] be branch-light and panic-free.
//!
//! The modules: this one holds the document's types, their validation and the lookup's entry
//! points; `json` decodes and encodes the document (the compact table of version 2 included),
//! `control` the other control-topic values (retraction, generation), `lookup` the private index
//! behind [`Assignment::partition_for`].

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicU64, Ordering};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde::de::value::MapAccessDeserializer;
use serde::de::{MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

use crate::error::{Error, Result};
use crate::hash::{BucketHash, to_positive};

mod control;
mod json;
mod lookup;

pub use control::{ControlDocument, GENERATION_KEY, Retraction, generation_record};
use control::{check_epoch, validate_generation};
use json::{Header, Obj, json_table_bytes, present};
use lookup::{BRANCHLESS_KEY_BYTES, Lookup, SPLIT_SENTINEL, key_words};

/// The `format` field of every assignment document.
pub const FORMAT_NAME: &str = "dkg.assignment";
/// The document version this build writes whenever no version 2 feature is used (so fleets with
/// version 1 readers keep working, `docs/spec.md` 11.1).
pub const FORMAT_VERSION: u64 = 1;
/// The newest document version this build reads (it reads versions 1 and 2) and the version it
/// writes for documents that use a version 2 feature (a split key).
pub const MAX_FORMAT_VERSION: u64 = 2;
/// Largest encoded document accepted (checked before parsing).
pub const MAX_ASSIGNMENT_BYTES: usize = 8 * 1024 * 1024;
/// Largest document that passes Kafka's default size limits on its whole way: librdkafka's producer
/// `message.max.bytes` (1,000,000, checked on the uncompressed value and key), the Java producer's
/// `max.request.size` (1,048,576) and a topic or broker `max.message.bytes` / `message.max.bytes` of
/// 1,048,588 (checked on the batch, which a value this size and its framing fit even uncompressed);
/// consumers' default `max.partition.fetch.bytes` (1 MiB) is not a hard limit since Kafka 0.10.1.
/// Documents up to this size therefore work with a control topic created with the broker's defaults.
pub const DEFAULT_LIMITS_DOCUMENT_BYTES: usize = 1_000_000;
/// Largest partition count accepted.
pub const MAX_PARTITIONS: u32 = 1_000_000;
/// Largest bucket count accepted.
pub const MAX_BUCKETS: u32 = 1 << 22;
/// Largest number of heavy keys accepted.
pub const MAX_HEAVY_KEYS: usize = 1_000_000;
/// Most heavy keys one bucket may hold (they are matched by a scan of the bucket's run). A learner
/// with `h` heavy keys over `b` buckets puts about `h^2 / (2 b)` buckets at two keys; 17 in one bucket
/// happens only when someone chose colliding keys, so documents with more are rejected (`invalid`) and
/// [`Sketch::build`](crate::Sketch::build) never writes one.
pub const MAX_HEAVY_KEYS_PER_BUCKET: usize = 16;
/// Longest heavy key accepted, in bytes. Longer keys cannot be heavy; they route by bucket.
pub const MAX_KEY_BYTES: usize = 64 * 1024;
/// Largest total size of all heavy keys, in bytes (bounds the lookup's key arena).
pub const MAX_HEAVY_KEY_BYTES_TOTAL: usize = 256 * 1024 * 1024;
/// [`Assignment::to_json_compact`] encodes the bucket table as `table_b64` (format version 2,
/// `docs/spec.md` 4.6) when its JSON text (`[0,1,...]`) would be longer than this; shorter
/// tables stay JSON, and the document version 1 unless a key is split.
pub const COMPACT_TABLE_ABOVE_BYTES: usize = 256 * 1024;
/// Longest legal Kafka topic name.
pub const MAX_TOPIC_LEN: usize = 249;
/// Largest epoch a document may carry, 2^53 - 1 (`docs/spec.md` 4.4 step 11b): exact in a float64
/// gauge, in JavaScript and in any JSON decoder. A larger one is `out_of_range`, so one forged record
/// cannot exhaust a topic's epochs (a `u64::MAX` epoch would leave no higher one to publish).
pub const MAX_EPOCH: u64 = (1 << 53) - 1;

/// How [`Assignment::route`] placed a key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Route {
    /// The key is a heavy hitter with its own placement.
    Heavy,
    /// The key went through the bucket table.
    Bucket,
    /// The key is a split heavy key (format version 2, `docs/spec.md` section 4.6): the partition
    /// is the next one of its spread schedule, so consecutive records of the key differ.
    Split,
}

/// A heavy hitter and the partition it is pinned to, or, for a split key (format version 2,
/// `docs/spec.md` 4.6), the partitions it is spread over.
///
/// Serializes as `{"key_b64":"..","partition":N,"weight":N}`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeavyKey {
    /// The key bytes.
    #[serde(rename = "key_b64", with = "json::key_b64")]
    pub key: Vec<u8>,
    /// Its partition; for a split key, the partition of its first part (`split[0].partition`).
    pub partition: u32,
    /// Its estimated weight (guaranteed count) in the learning window.
    pub weight: u64,
    /// Empty for a whole key (strict key grouping). Otherwise the key is split: its records are
    /// spread over these parts (2 to [`MAX_SPLIT_PARTS`], distinct partitions) in proportion to
    /// their weights, and it gives up per-key order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub split: Vec<SplitPart>,
}

impl HeavyKey {
    /// A whole (not split) heavy key on `partition`.
    #[must_use]
    pub fn whole(key: impl Into<Vec<u8>>, partition: u32, weight: u64) -> Self {
        Self {
            key: key.into(),
            partition,
            weight,
            split: Vec::new(),
        }
    }

    /// Whether the key is split over several partitions.
    #[must_use]
    pub fn is_split(&self) -> bool {
        !self.split.is_empty()
    }
}

/// One part of a split heavy key: a partition and its relative weight.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SplitPart {
    /// The partition of this part (distinct within one key).
    pub partition: u32,
    /// Relative share of the key's records, at least 1.
    pub weight: u32,
}

/// Most parts one split key may have.
pub const MAX_SPLIT_PARTS: usize = 64;
/// Largest sum of one split key's part weights (the period of its deterministic spread, kept small
/// so the spread's schedule is a small table).
pub const MAX_SPLIT_WEIGHT_SUM: u64 = 4096;
/// Largest sum, over all split keys of one document, of their weight sums: the lookup keeps one
/// schedule byte per unit of weight, so this bounds what a hostile document can make a reader
/// allocate for schedules (1 MiB) far below what its 8 MiB could otherwise name (~88,000 split keys
/// of 4096 each).
pub const MAX_SPLIT_WEIGHT_TOTAL: u64 = 1 << 20;

/// The parameters an assignment was learned with (informational; the lookup does not use them).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Heavy-hitter threshold, as a share of the window.
    pub theta: f64,
    /// SpaceSaving error bound, as a share of the window.
    pub epsilon: f64,
    /// Buckets per partition.
    pub mu: f64,
    /// Records in the learning window.
    pub window_records: u64,
}

/// Everything needed to construct an [`Assignment`] (validated by [`Assignment::new`]).
#[derive(Clone, Debug, PartialEq)]
pub struct AssignmentParts {
    /// Kafka topic the assignment is for.
    pub topic: String,
    /// Partition count of the topic.
    pub partitions: u32,
    /// Monotonic assignment number (the sampler increments it per publication).
    pub epoch: u64,
    /// The hash mapping keys to buckets.
    pub bucket_hash: BucketHash,
    /// Bucket -> partition; its length is the bucket count.
    pub table: Vec<u32>,
    /// Heavy keys and their partitions.
    pub heavy: Vec<HeavyKey>,
    /// Learning parameters.
    pub params: Params,
    /// Creation time, unix milliseconds (supplied by the caller: the core reads no clock).
    pub created_at_ms: u64,
    /// Predicted share of records per partition; length = `partitions`.
    pub predicted_load: Vec<f64>,
}

/// A validated, immutable assignment with its lookup index.
///
/// Equality compares the document fields (the index is derived from them).
#[derive(Clone, Debug)]
pub struct Assignment {
    parts: AssignmentParts,
    index: Lookup,
    /// The table's JSON text would exceed [`COMPACT_TABLE_ABOVE_BYTES`]:
    /// [`Assignment::to_json_compact`] writes it as `table_b64`.
    large_table: bool,
    /// The control topic's generation the document was published under (format version 2,
    /// `docs/spec.md` 6.4), if it names one.
    generation: Option<String>,
}

impl PartialEq for Assignment {
    fn eq(&self, other: &Self) -> bool {
        self.parts == other.parts && self.generation == other.generation
    }
}

impl Assignment {
    /// Validate `parts` and build the lookup index.
    ///
    /// Checks: the topic is a legal Kafka topic name; `1 <= partitions <= MAX_PARTITIONS`;
    /// `1 <= table.len() <= MAX_BUCKETS`; `epoch <= MAX_EPOCH`; every table entry and heavy partition `< partitions`;
    /// at most [`MAX_HEAVY_KEYS`] heavy keys, each at most [`MAX_KEY_BYTES`] long, no key twice, at
    /// most [`MAX_HEAVY_KEYS_PER_BUCKET`] in one bucket;
    /// `predicted_load.len() == partitions`, every share finite and `>= 0`; params finite and `>= 0`.
    pub fn new(parts: AssignmentParts) -> Result<Self> {
        Self::validated(parts, &[])
    }

    /// [`Assignment::new`]; `empty_splits` lists (ascending) the heavy entries that were read
    /// with an empty `split` list, which [`HeavyKey`] cannot hold (it means a whole key there):
    /// rejected where their part count is checked.
    fn validated(parts: AssignmentParts, empty_splits: &[usize]) -> Result<Self> {
        validate_topic(&parts.topic)?;
        if parts.partitions == 0 {
            return Err(invalid("partitions must be at least 1"));
        }
        if parts.partitions > MAX_PARTITIONS {
            return Err(too_large(
                "partitions",
                parts.partitions.into(),
                MAX_PARTITIONS.into(),
            ));
        }
        if parts.table.is_empty() {
            return Err(invalid("the bucket table must have at least 1 bucket"));
        }
        if parts.table.len() > MAX_BUCKETS as usize {
            return Err(too_large(
                "buckets",
                parts.table.len() as u64,
                MAX_BUCKETS.into(),
            ));
        }
        check_epoch(parts.epoch)?;
        let out_of_range = |partition: u32| Error::PartitionOutOfRange {
            topic: parts.topic.clone(),
            partition,
            partitions: parts.partitions,
        };
        if let Some(&p) = parts.table.iter().find(|&&p| p >= parts.partitions) {
            return Err(out_of_range(p));
        }
        if parts.heavy.len() > MAX_HEAVY_KEYS {
            return Err(too_large(
                "heavy keys",
                parts.heavy.len() as u64,
                MAX_HEAVY_KEYS as u64,
            ));
        }
        let mut key_bytes = 0_usize;
        let mut split_weight = 0_u64;
        for (i, hk) in parts.heavy.iter().enumerate() {
            if hk.key.len() > MAX_KEY_BYTES {
                return Err(too_large(
                    "heavy key bytes",
                    hk.key.len() as u64,
                    MAX_KEY_BYTES as u64,
                ));
            }
            if hk.split.is_empty() && hk.partition >= parts.partitions {
                return Err(out_of_range(hk.partition));
            }
            if empty_splits.binary_search(&i).is_ok() {
                return Err(split_count(0));
            }
            validate_split(hk, parts.partitions, &out_of_range)?;
            key_bytes += hk.key.len();
            split_weight += hk.split.iter().map(|s| u64::from(s.weight)).sum::<u64>();
        }
        if key_bytes > MAX_HEAVY_KEY_BYTES_TOTAL {
            return Err(too_large(
                "total heavy key bytes",
                key_bytes as u64,
                MAX_HEAVY_KEY_BYTES_TOTAL as u64,
            ));
        }
        if split_weight > MAX_SPLIT_WEIGHT_TOTAL {
            return Err(too_large(
                "total split weight",
                split_weight,
                MAX_SPLIT_WEIGHT_TOTAL,
            ));
        }
        if parts.predicted_load.len() != parts.partitions as usize {
            return Err(invalid(format!(
                "predicted_load has {} entries, expected one per partition ({})",
                parts.predicted_load.len(),
                parts.partitions
            )));
        }
        if let Some((i, x)) = parts
            .predicted_load
            .iter()
            .enumerate()
            .find(|(_, x)| !(x.is_finite() && **x >= 0.0))
        {
            return Err(invalid(format!(
                "predicted_load[{i}] = {x} is not a finite non-negative share"
            )));
        }
        let p = &parts.params;
        for (name, x) in [("theta", p.theta), ("epsilon", p.epsilon), ("mu", p.mu)] {
            if !(x.is_finite() && x >= 0.0) {
                return Err(invalid(format!(
                    "params.{name} = {x} is not a finite non-negative number"
                )));
            }
        }
        let index = Lookup::build(&parts)?;
        let large_table = json_table_bytes(&parts.table) > COMPACT_TABLE_ABOVE_BYTES;
        Ok(Self {
            parts,
            index,
            large_table,
            generation: None,
        })
    }

    /// Decode and validate a JSON document.
    ///
    /// Errors, in the order checked: [`Error::TooLarge`] (over [`MAX_ASSIGNMENT_BYTES`], before any
    /// parsing); [`Error::MalformedAssignment`] (not JSON, wrong types, missing or unknown fields);
    /// [`Error::UnknownFormat`]; [`Error::UnsupportedVersion`]; [`Error::TableLength`] (`buckets`
    /// disagrees with `table`); [`Error::InvalidKeyEncoding`]; then everything [`Assignment::new`]
    /// checks.
    pub fn from_json(bytes: &[u8]) -> Result<Self> {
        match ControlDocument::from_json(bytes)? {
            ControlDocument::Assignment(a) => Ok(*a),
            ControlDocument::Retraction(_) | ControlDocument::Generation(_) => Err(malformed(
                "a retraction or generation document, not an assignment".to_owned(),
            )),
        }
    }

    /// This document published under control-topic generation `generation` (32 lowercase hex
    /// digits, `docs/spec.md` 6.4; the document is then written as version 2).
    pub fn with_generation(mut self, generation: &str) -> Result<Self> {
        validate_generation(generation)?;
        self.generation = Some(generation.to_owned());
        Ok(self)
    }

    /// The control-topic generation the document names, if any.
    #[must_use]
    pub fn generation(&self) -> Option<&str> {
        self.generation.as_deref()
    }
}

impl Assignment {
    /// The topic.
    #[must_use]
    pub fn topic(&self) -> &str {
        &self.parts.topic
    }

    /// The partition count.
    #[must_use]
    pub fn partitions(&self) -> u32 {
        self.parts.partitions
    }

    /// The epoch.
    #[must_use]
    pub fn epoch(&self) -> u64 {
        self.parts.epoch
    }

    /// The bucket count (`table().len()`).
    #[must_use]
    pub fn buckets(&self) -> u32 {
        self.index.buckets.d
    }

    /// The bucket hash.
    #[must_use]
    pub fn bucket_hash(&self) -> BucketHash {
        self.parts.bucket_hash
    }

    /// Bucket -> partition.
    #[must_use]
    pub fn table(&self) -> &[u32] {
        &self.parts.table
    }

    /// The heavy keys, in document order.
    #[must_use]
    pub fn heavy(&self) -> &[HeavyKey] {
        &self.parts.heavy
    }

    /// The learning parameters.
    #[must_use]
    pub fn params(&self) -> &Params {
        &self.parts.params
    }

    /// Creation time, unix milliseconds.
    #[must_use]
    pub fn created_at_ms(&self) -> u64 {
        self.parts.created_at_ms
    }

    /// Predicted share of records per partition.
    #[must_use]
    pub fn predicted_load(&self) -> &[f64] {
        &self.parts.predicted_load
    }

    /// The partition for `key`. O(1), allocation-free, never panics, always `< partitions()`.
    ///
    /// Always inlined, with [`Assignment::route`]: a call costs more than the lookup adds to
    /// the hash (BENCHMARKS.md, "Lookup speed"); the rare paths stay out of line.
    #[inline(always)]
    #[must_use]
    pub fn partition_for(&self, key: &[u8]) -> u32 {
        self.route(key).0
    }

    /// The partition for `key` and which route gave it.
    ///
    /// For a split key ([`Route::Split`]) each call takes the next partition of the key's
    /// schedule (`docs/spec.md` 4.6): record `n` of the key through this `Assignment`, counted by
    /// an atomic counter shared by every thread using it (no lock), goes to `schedule[n % period]`.
    /// Every other key's answer depends on the key alone.
    ///
    /// A split key's bucket is always a run (see `Lookup`), so the split keys' pick sits on the
    /// run's out-of-line path and the whole-key path has no branch more than without them.
    #[inline(always)]
    #[must_use]
    pub fn route(&self, key: &[u8]) -> (u32, Route) {
        // One complete path per length class, so each is laid out straight (a shared tail would
        // branch on the length again); the branches go the same way for all keys of a length.
        let (hash, parts) = (&self.parts.bucket_hash, &self.parts);
        match key.len() {
            0..=7 => {
                // The hash's reads give the comparison's word too (always `Some` here).
                let (h, word) = hash
                    .hash_short(key)
                    .unwrap_or_else(|| (hash.hash(key), key_words(key)[0]));
                self.index.partition::<0>(parts, h, [word, 0], key)
            }
            8..=16 => self
                .index
                .partition::<0>(parts, hash.hash(key), key_words(key), key),
            17..=32 => self
                .index
                .partition::<2>(parts, hash.hash(key), key_words(key), key),
            33..=48 => self
                .index
                .partition::<4>(parts, hash.hash(key), key_words(key), key),
            49..=BRANCHLESS_KEY_BYTES => {
                self.index
                    .partition::<6>(parts, hash.hash(key), key_words(key), key)
            }
            _ => self.index.long_partition(parts, key),
        }
    }

    /// The partition of `key` if it is a whole (not split) heavy key. `None` for a split key,
    /// which has no single partition (see [`Assignment::split_of`]).
    #[inline]
    #[must_use]
    pub fn heavy_partition(&self, key: &[u8]) -> Option<u32> {
        if self.split_index(key).is_some() {
            return None;
        }
        match self.route(key) {
            (p, Route::Heavy) => Some(p),
            _ => None,
        }
    }

    /// The parts of `key` if it is a split key of this document, else `None`. Does not take a
    /// pick of the key's schedule (consumers ask "is this key split in epoch E" with it).
    #[must_use]
    pub fn split_of(&self, key: &[u8]) -> Option<&[SplitPart]> {
        let split = self.index.splits.get(self.split_index(key)?)?;
        Some(&self.parts.heavy.get(split.heavy as usize)?.split)
    }

    /// The index of `key` in `Lookup::splits` if it is a split key (found without a pick).
    fn split_index(&self, key: &[u8]) -> Option<usize> {
        if !self.has_split_keys() {
            return None;
        }
        let h = self.parts.bucket_hash.hash(key);
        let slot = self.index.slot_of(h);
        let (p, _) = self.index.run_partition(slot, &self.parts, h, key);
        Some(p.checked_sub(SPLIT_SENTINEL)? as usize)
    }

    /// Whether any heavy key of the document is split (then [`Assignment::format_version`] is 2).
    #[must_use]
    pub fn has_split_keys(&self) -> bool {
        !self.index.splits.is_empty()
    }

    /// The bucket of `key` (whether or not the key is heavy): `to_positive(hash(key)) % buckets()`.
    #[inline]
    #[must_use]
    pub fn bucket(&self, key: &[u8]) -> u32 {
        self.index
            .buckets
            .rem(to_positive(self.parts.bucket_hash.hash(key)))
    }

    /// Give back the document fields.
    #[must_use]
    pub fn into_parts(self) -> AssignmentParts {
        self.parts
    }
}

/// A split key's parts: none (whole), or 2..=MAX_SPLIT_PARTS distinct partitions in range with
/// weights >= 1 summing to at most MAX_SPLIT_WEIGHT_SUM, the first being `partition`.
fn validate_split(
    hk: &HeavyKey,
    partitions: u32,
    out_of_range: &dyn Fn(u32) -> Error,
) -> Result<()> {
    if hk.split.is_empty() {
        return Ok(());
    }
    if hk.split.len() < 2 || hk.split.len() > MAX_SPLIT_PARTS {
        return Err(split_count(hk.split.len()));
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut sum = 0_u64;
    for part in &hk.split {
        if part.partition >= partitions {
            return Err(out_of_range(part.partition));
        }
        if !seen.insert(part.partition) {
            return Err(invalid(format!(
                "a split key names partition {} twice",
                part.partition
            )));
        }
        if part.weight == 0 {
            return Err(invalid("a split part's weight must be at least 1"));
        }
        sum += u64::from(part.weight);
    }
    if sum > MAX_SPLIT_WEIGHT_SUM {
        return Err(too_large("split weight sum", sum, MAX_SPLIT_WEIGHT_SUM));
    }
    if hk.partition != hk.split[0].partition {
        return Err(invalid(
            "a split key's partition must be its first part's partition",
        ));
    }
    Ok(())
}

fn split_count(parts: usize) -> Error {
    invalid(format!(
        "a split key has {parts} parts, it must have 2 to {MAX_SPLIT_PARTS}"
    ))
}

fn malformed(reason: String) -> Error {
    Error::MalformedAssignment {
        source: <serde_json::Error as serde::de::Error>::custom(reason),
    }
}

fn invalid(reason: impl Into<String>) -> Error {
    Error::InvalidAssignment {
        reason: reason.into(),
    }
}

fn too_large(what: &'static str, actual: u64, limit: u64) -> Error {
    Error::TooLarge {
        what,
        actual,
        limit,
    }
}

/// Errors echo strings from untrusted documents; keep them short.
fn truncate_for_display(s: &str) -> String {
    const MAX: usize = 64;
    match s.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}...", &s[..cut]),
        None => s.to_owned(),
    }
}

/// Kafka's `Topic.validate`: 1..=249 chars of `[a-zA-Z0-9._-]`, and not `.` or `..`.
fn validate_topic(topic: &str) -> Result<()> {
    let err = |reason| {
        Err(Error::InvalidTopic {
            topic: truncate_for_display(topic),
            reason,
        })
    };
    if topic.is_empty() {
        return err("empty");
    }
    if topic.len() > MAX_TOPIC_LEN {
        return err("longer than 249 characters");
    }
    if topic == "." || topic == ".." {
        return err("'.' and '..' are reserved");
    }
    if !topic
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    {
        return err("only ASCII letters, digits, '.', '_' and '-' are allowed");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_keeps_short_strings_and_cuts_long_ones_on_char_boundaries() {
        assert_eq!(truncate_for_display("abc"), "abc");
        let long = "é".repeat(100);
        let t = truncate_for_display(&long);
        assert_eq!(t.chars().count(), 64 + 3);
    }
}
