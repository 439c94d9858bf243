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
//! # Lookup
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
    #[serde(rename = "key_b64", with = "key_b64")]
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

/// A retraction that keeps its epoch (format version 2, `docs/spec.md` 6.4): producers of
/// `topic` return to Kafka's placement, and later documents need an epoch above `epoch`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Retraction {
    /// The data topic.
    pub topic: String,
    /// The retraction's epoch, the topic's epoch floor afterwards.
    pub epoch: u64,
    /// The control-topic generation it was published under, if it names one.
    pub generation: Option<String>,
    /// Creation time, Unix milliseconds (informational).
    pub created_at_ms: u64,
}

/// Any control-topic value of format `dkg.assignment` (`docs/spec.md` 4 and 6.4), by its `kind`.
#[derive(Clone, Debug, PartialEq)]
pub enum ControlDocument {
    /// An assignment (`kind` absent or `assignment`; every version 1 document). Boxed: the
    /// other kinds are small.
    Assignment(Box<Assignment>),
    /// `kind` `retraction` (version 2).
    Retraction(Retraction),
    /// `kind` `generation` (version 2): the control topic's generation id, the value of the
    /// record keyed [`GENERATION_KEY`].
    Generation(String),
}

/// The record key of the control topic's generation record (not a legal topic name).
pub const GENERATION_KEY: &str = "@generation";

impl ControlDocument {
    /// Decode and validate a control-topic value: the checks of [`Assignment::from_json`] in its
    /// order (`docs/spec.md` 4.4), the `kind` read right after the version.
    pub fn from_json(bytes: &[u8]) -> Result<Self> {
        if bytes.len() > MAX_ASSIGNMENT_BYTES {
            return Err(too_large(
                "assignment bytes",
                bytes.len() as u64,
                MAX_ASSIGNMENT_BYTES as u64,
            ));
        }
        // Format and version first, ignoring the rest, so a newer document reports its version
        // rather than whatever shape change came with it. An object only (gap G1, fixed in 2).
        let Obj(header): Obj<Header<'_>> = serde_json::from_slice(bytes)?;
        if header.format != FORMAT_NAME {
            return Err(Error::UnknownFormat {
                found: truncate_for_display(&header.format),
                expected: FORMAT_NAME,
            });
        }
        if !(FORMAT_VERSION..=MAX_FORMAT_VERSION).contains(&header.version) {
            return Err(Error::UnsupportedVersion {
                version: header.version,
                supported: MAX_FORMAT_VERSION,
            });
        }
        let v2 = header.version == 2;
        if v2 {
            let Obj(peek): Obj<KindPeek> = serde_json::from_slice(bytes)?;
            match peek.kind.as_deref() {
                None | Some("assignment") => {}
                Some("retraction") => return decode_retraction(bytes),
                Some("generation") => {
                    let Obj(g): Obj<GenerationIn<'_>> = serde_json::from_slice(bytes)?;
                    validate_generation(&g.generation)?;
                    return Ok(Self::Generation(g.generation.into_owned()));
                }
                Some(other) => {
                    return Err(malformed(format!(
                        "unknown kind {:?} (assignment, retraction or generation)",
                        truncate_for_display(other)
                    )));
                }
            }
        }
        let decoded = Assignment::decode(bytes, v2).map(|a| Self::Assignment(Box::new(a)));
        // Version 2 reports limits inside the document as `invalid` (gap G2): `oversize` is then
        // only the value's size, checked above.
        match decoded {
            Err(Error::TooLarge {
                what,
                actual,
                limit,
            }) if v2 => Err(invalid(format!("{what} is {actual}, limit {limit}"))),
            other => other,
        }
    }
}

impl Assignment {
    /// [`Assignment::from_json`] after the version pre-read; `v2`: the document is version 2.
    fn decode(bytes: &[u8], v2: bool) -> Result<Self> {
        let Obj(doc): Obj<DocIn<'_>> = serde_json::from_slice(bytes)?;
        if !v2 && (doc.kind.is_some() || doc.generation.is_some()) {
            return Err(malformed(
                "unknown member `kind` or `generation` (version 1)".to_owned(),
            ));
        }
        let table = match (doc.table, doc.table_b64, doc.table_width) {
            (Some(table), None, None) => {
                if table.len() != doc.buckets as usize {
                    return Err(Error::TableLength {
                        expected: doc.buckets.into(),
                        actual: table.len() as u64,
                    });
                }
                table
            }
            (None, Some(b64), Some(width)) if v2 => {
                decode_compact_table(&b64, width, doc.buckets, doc.partitions)?
            }
            (_, b64, width) if !v2 => {
                let member = if b64.is_some() {
                    "table_b64"
                } else {
                    "table_width"
                };
                let member = if width.is_some() || b64.is_some() {
                    member
                } else {
                    "table"
                };
                return Err(malformed(format!(
                    "missing or unknown member `{member}` (version 1 has `table` only)"
                )));
            }
            (Some(_), Some(_), _) => {
                return Err(malformed(
                    "both `table` and `table_b64` (exactly one is allowed)".to_owned(),
                ));
            }
            (None, None, _) => return Err(malformed("missing member `table`".to_owned())),
            (_, b64, _) => {
                let (with, without) = if b64.is_some() {
                    ("table_b64", "table_width")
                } else {
                    ("table_width", "table_b64")
                };
                return Err(malformed(format!("`{with}` without `{without}`")));
            }
        };
        let mut heavy = Vec::with_capacity(doc.heavy.len());
        let mut empty_splits = Vec::new();
        for (index, Obj(h)) in doc.heavy.into_iter().enumerate() {
            let (partition, split) = match (h.partition, h.split) {
                (Some(p), None) => (p, Vec::new()),
                (None, Some(split)) if v2 => {
                    let split: Vec<SplitPart> = split.into_iter().map(|Obj(s)| s).collect();
                    if split.is_empty() {
                        empty_splits.push(index);
                    }
                    (split.first().map_or(0, |s| s.partition), split)
                }
                (_, Some(_)) if !v2 => {
                    return Err(malformed(format!(
                        "heavy entry #{index}: unknown member `split` (version 1 documents cannot \
                         split a key)"
                    )));
                }
                (Some(_), Some(_)) => {
                    return Err(malformed(format!(
                        "heavy entry #{index}: both `partition` and `split` (exactly one is allowed)"
                    )));
                }
                (None, _) => {
                    let want = if v2 {
                        "`partition` or `split`"
                    } else {
                        "`partition`"
                    };
                    return Err(malformed(format!(
                        "heavy entry #{index}: missing member {want}"
                    )));
                }
            };
            let key = B64
                .decode(h.key_b64.as_bytes())
                .map_err(|e| Error::InvalidKeyEncoding {
                    index,
                    reason: e.to_string(),
                })?;
            heavy.push(HeavyKey {
                key,
                partition,
                weight: h.weight,
                split,
            });
        }
        let parts = AssignmentParts {
            topic: doc.topic.into_owned(),
            partitions: doc.partitions,
            epoch: doc.epoch,
            bucket_hash: doc.bucket_hash.0,
            table,
            heavy,
            params: doc.params.0,
            created_at_ms: doc.created_at_ms,
            predicted_load: doc.predicted_load,
        };
        // The generation id before the document's own invariants (`docs/spec.md` 6.4: after the
        // key encoding of step 6, before the topic of step 7), as Java and Go check it: a document
        // with a bad id and an out-of-range table entry is `invalid`, not `out_of_range`.
        if let Some(g) = &doc.generation {
            validate_generation(g)?;
        }
        let mut a = Self::validated(parts, &empty_splits)?;
        a.generation = doc.generation;
        Ok(a)
    }

    /// The format version [`Assignment::to_json`] writes: 2 if the document has a split key
    /// (a version 2 feature, `docs/spec.md` 4.6), else 1, byte for byte the version 1 encoding.
    #[must_use]
    pub fn format_version(&self) -> u64 {
        self.version_written(false)
    }

    /// The version of the encoding with (`compact`) or without the compact table.
    fn version_written(&self, compact: bool) -> u64 {
        if self.has_split_keys() || (compact && self.large_table) || self.generation.is_some() {
            MAX_FORMAT_VERSION
        } else {
            FORMAT_VERSION
        }
    }

    /// Encode as compact JSON (the control-topic payload), with a JSON `table`: version 1 unless
    /// a key is split, so readers of version 1 keep reading every document without split keys.
    #[must_use]
    pub fn to_json(&self) -> Vec<u8> {
        // Only strings, integers and finite floats (checked in `new`): serde_json cannot fail here.
        serde_json::to_vec(&self.doc_out(false)).expect("an assignment always serializes")
    }

    /// [`Assignment::to_json`] for a fleet that reads version 2 (`docs/spec.md` 11.1: the
    /// publisher's version 2 features are opt-in): the table as `table_b64` when its JSON text
    /// would exceed [`COMPACT_TABLE_ABOVE_BYTES`] (the document is then version 2), else the same
    /// bytes as `to_json`.
    #[must_use]
    pub fn to_json_compact(&self) -> Vec<u8> {
        serde_json::to_vec(&self.doc_out(true)).expect("an assignment always serializes")
    }

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

    /// Encode as indented JSON (for people: `dkg-sampler inspect`, docs).
    #[must_use]
    pub fn to_json_pretty(&self) -> String {
        serde_json::to_string_pretty(&self.doc_out(false)).expect("an assignment always serializes")
    }

    /// The document to encode; `compact`: a large table as `table_b64`.
    fn doc_out(&self, compact: bool) -> DocOut<'_> {
        let p = &self.parts;
        let compact = compact && self.large_table;
        DocOut {
            format: FORMAT_NAME,
            version: self.version_written(compact),
            topic: &p.topic,
            partitions: p.partitions,
            epoch: p.epoch,
            generation: self.generation.as_deref(),
            bucket_hash: p.bucket_hash,
            buckets: self.buckets(),
            table: (!compact).then_some(p.table.as_slice()),
            table_b64: compact.then(|| encode_compact_table(&p.table, p.partitions)),
            table_width: compact.then(|| compact_table_width(p.partitions)),
            heavy: HeavyOut(&p.heavy),
            params: &p.params,
            created_at_ms: p.created_at_ms,
            predicted_load: &p.predicted_load,
        }
    }

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

/// Length of `table` as JSON text (`[0,1,2]`: brackets, commas, decimal digits).
fn json_table_bytes(table: &[u32]) -> usize {
    let digits = |p: u32| p.checked_ilog10().map_or(1, |d| d as usize + 1);
    2 + table.len().saturating_sub(1) + table.iter().map(|&p| digits(p)).sum::<usize>()
}

/// The `table_width` of a compact table: the fewest bytes (1, 2 or 4) that hold `partitions - 1`.
fn compact_table_width(partitions: u32) -> u32 {
    match partitions.saturating_sub(1) {
        0..=0xff => 1,
        0x100..=0xffff => 2,
        _ => 4,
    }
}

/// `table_b64`: each entry little-endian in `compact_table_width(partitions)` bytes, base64.
fn encode_compact_table(table: &[u32], partitions: u32) -> String {
    let width = compact_table_width(partitions) as usize;
    let bytes: Vec<u8> = table
        .iter()
        .flat_map(|p| p.to_le_bytes().into_iter().take(width))
        .collect();
    B64.encode(bytes)
}

/// The entries of a compact table (`docs/spec.md` 4.6), `invalid` unless `width` is the one
/// writers must use for `partitions`, `b64` canonical base64 and `buckets * width` bytes long.
/// Entries are range-checked later, with the JSON table's (`out_of_range`).
fn decode_compact_table(b64: &str, width: u32, buckets: u32, partitions: u32) -> Result<Vec<u32>> {
    let want = compact_table_width(partitions);
    if width != want {
        return Err(invalid(format!(
            "table_width {width}: {partitions} partitions take table_width {want}"
        )));
    }
    let bytes = B64
        .decode(b64.as_bytes())
        .map_err(|e| invalid(format!("table_b64 is not canonical base64: {e}")))?;
    let width = width as usize;
    if bytes.len() != buckets as usize * width {
        return Err(invalid(format!(
            "table_b64 holds {} bytes, {buckets} buckets of width {width} take {}",
            bytes.len(),
            buckets as usize * width
        )));
    }
    Ok(bytes
        .chunks_exact(width)
        .map(|entry| {
            let mut le = [0_u8; 4];
            le[..width].copy_from_slice(entry);
            u32::from_le_bytes(le)
        })
        .collect())
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

/// `a % d` for a fixed `d` by two multiplications (Lemire, Kaser, Kurz 2019; exact for all u32).
#[derive(Clone, Copy, Debug)]
struct FastRem {
    m: u64,
    d: u32,
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
    fn rem(self, a: u32) -> u32 {
        let low = self.m.wrapping_mul(u64::from(a));
        ((u128::from(low) * u128::from(self.d)) >> 64) as u32
    }
}

/// `Group::len` of a bucket's partition group (no heavy key). No key compared branch-free is that
/// long (they have at most [`BRANCHLESS_KEY_BYTES`]), and the longer keys' path checks for it.
const LIGHT: u32 = u32::MAX;
/// Keys up to this long are compared without branching on the outcome (see `Lookup::middle_diff`).
const BRANCHLESS_KEY_BYTES: usize = 64;
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
const SPLIT_SENTINEL: u32 = 1 << 31;

/// One split key's spread (`docs/spec.md` 4.6): the smooth weighted round robin sequence of its
/// weights over one period (their sum, at most [`MAX_SPLIT_WEIGHT_SUM`]), precomputed as part
/// indices, and the count of records this instance has placed.
#[derive(Debug)]
struct SplitSchedule {
    /// Index of the key in the document's heavy list.
    heavy: u32,
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
struct Lookup {
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
    buckets: FastRem,
    /// The split keys, in document order; the run entry of split key `s` holds the partition
    /// `SPLIT_SENTINEL + s` (a split key's bucket is always a run, never a group).
    splits: Box<[SplitSchedule]>,
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
    fn build(parts: &AssignmentParts) -> Result<Self> {
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
    fn partition<const MIDDLE: usize>(
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
    fn long_partition(&self, parts: &AssignmentParts, key: &[u8]) -> (u32, Route) {
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
    fn slot_of(&self, h: u32) -> usize {
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
    fn run_partition(
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
fn key_words(key: &[u8]) -> [u64; 2] {
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

/// The `kind` of a version 2 document, read after the version; other members are skipped.
#[derive(Deserialize)]
struct KindPeek {
    #[serde(default, deserialize_with = "present")]
    kind: Option<String>,
}

/// A retraction document (`docs/spec.md` 6.4), exactly these members.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RetractionIn<'a> {
    #[serde(borrow, rename = "format")]
    _format: Cow<'a, str>,
    #[serde(rename = "version")]
    _version: u64,
    #[serde(borrow, rename = "kind")]
    _kind: Cow<'a, str>,
    #[serde(borrow)]
    topic: Cow<'a, str>,
    epoch: u64,
    #[serde(default, deserialize_with = "present")]
    generation: Option<String>,
    created_at_ms: u64,
}

/// The generation record's value (`docs/spec.md` 6.4), exactly these members.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GenerationIn<'a> {
    #[serde(borrow, rename = "format")]
    _format: Cow<'a, str>,
    #[serde(rename = "version")]
    _version: u64,
    #[serde(borrow, rename = "kind")]
    _kind: Cow<'a, str>,
    #[serde(borrow)]
    generation: Cow<'a, str>,
}

#[derive(Serialize)]
struct RetractionOut<'a> {
    format: &'static str,
    version: u64,
    kind: &'static str,
    topic: &'a str,
    epoch: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    generation: Option<&'a str>,
    created_at_ms: u64,
}

#[derive(Serialize)]
struct GenerationOut<'a> {
    format: &'static str,
    version: u64,
    kind: &'static str,
    generation: &'a str,
}

fn decode_retraction(bytes: &[u8]) -> Result<ControlDocument> {
    let Obj(r): Obj<RetractionIn<'_>> = serde_json::from_slice(bytes)?;
    validate_topic(&r.topic)?;
    if let Some(g) = &r.generation {
        validate_generation(g)?;
    }
    check_epoch(r.epoch)?;
    Ok(ControlDocument::Retraction(Retraction {
        topic: r.topic.into_owned(),
        epoch: r.epoch,
        generation: r.generation,
        created_at_ms: r.created_at_ms,
    }))
}

/// `epoch <= MAX_EPOCH` ([`Error::EpochOutOfRange`], reject reason `out_of_range`, otherwise).
fn check_epoch(epoch: u64) -> Result<()> {
    if epoch <= MAX_EPOCH {
        Ok(())
    } else {
        Err(Error::EpochOutOfRange {
            epoch,
            max: MAX_EPOCH,
        })
    }
}

/// A generation id: exactly 32 lowercase hex digits (`invalid` otherwise).
fn validate_generation(generation: &str) -> Result<()> {
    let hex = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
    if generation.len() == 32 && generation.bytes().all(hex) {
        Ok(())
    } else {
        Err(invalid(format!(
            "generation {:?} is not 32 lowercase hex digits",
            truncate_for_display(generation)
        )))
    }
}

impl Retraction {
    /// Encode as compact JSON (a version 2 document, `docs/spec.md` 6.4).
    #[must_use]
    pub fn to_json(&self) -> Vec<u8> {
        let out = RetractionOut {
            format: FORMAT_NAME,
            version: MAX_FORMAT_VERSION,
            kind: "retraction",
            topic: &self.topic,
            epoch: self.epoch,
            generation: self.generation.as_deref(),
            created_at_ms: self.created_at_ms,
        };
        serde_json::to_vec(&out).expect("a retraction always serializes")
    }
}

/// The value of the generation record (key [`GENERATION_KEY`]) for `generation`, which must be
/// 32 lowercase hex digits.
pub fn generation_record(generation: &str) -> Result<Vec<u8>> {
    validate_generation(generation)?;
    let out = GenerationOut {
        format: FORMAT_NAME,
        version: MAX_FORMAT_VERSION,
        kind: "generation",
        generation,
    };
    Ok(serde_json::to_vec(&out).expect("a generation record always serializes"))
}

/// Read before the full document; other fields are skipped.
#[derive(Deserialize)]
struct Header<'a> {
    #[serde(borrow)]
    format: Cow<'a, str>,
    version: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DocIn<'a> {
    // Checked via `Header`; listed here so `deny_unknown_fields` knows them.
    #[serde(borrow, rename = "format")]
    _format: Cow<'a, str>,
    #[serde(rename = "version")]
    _version: u64,
    // `kind` is checked by the peek (`assignment` here); version 2 only, as `generation`.
    #[serde(default, deserialize_with = "present")]
    kind: Option<String>,
    #[serde(borrow)]
    topic: Cow<'a, str>,
    partitions: u32,
    epoch: u64,
    #[serde(default, deserialize_with = "present")]
    generation: Option<String>,
    bucket_hash: Obj<BucketHash>,
    buckets: u32,
    // Exactly one of `table` and `table_b64` (with `table_width`); checked in `decode`.
    #[serde(default, deserialize_with = "present")]
    table: Option<Vec<u32>>,
    #[serde(default, deserialize_with = "present")]
    table_b64: Option<String>,
    #[serde(default, deserialize_with = "present")]
    table_width: Option<u32>,
    #[serde(borrow)]
    heavy: Vec<Obj<HeavyIn<'a>>>,
    params: Obj<Params>,
    created_at_ms: u64,
    predicted_load: Vec<f64>,
}

/// Decodes `T` from a JSON object only. Serde's derived impls also accept an array (fields by
/// position); the document has one canonical shape, so the decoder refuses that.
struct Obj<T>(T);

impl<'de, T: Deserialize<'de>> Deserialize<'de> for Obj<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct ObjVisitor<T>(PhantomData<T>);
        impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjVisitor<T> {
            type Value = T;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
                T::deserialize(MapAccessDeserializer::new(map))
            }
        }
        d.deserialize_map(ObjVisitor(PhantomData)).map(Obj)
    }
}

/// Heavy key as read: base64 decoded by hand for a typed error.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HeavyIn<'a> {
    #[serde(borrow)]
    key_b64: Cow<'a, str>,
    // Exactly one of the two (checked in `decode`); `null` is no value for either (spec 4.3).
    #[serde(default, deserialize_with = "present")]
    partition: Option<u32>,
    #[serde(default, deserialize_with = "present")]
    split: Option<Vec<Obj<SplitPart>>>,
    weight: u64,
}

/// An optional member that, when present, must hold a `T` (serde's `Option` would take `null`).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// The heavy list as written: a whole key as `{"key_b64","partition","weight"}` (version 1), a
/// split key as `{"key_b64","split","weight"}`.
struct HeavyOut<'a>(&'a [HeavyKey]);

impl Serialize for HeavyOut<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeSeq, SerializeStruct};
        struct Entry<'a>(&'a HeavyKey);
        impl Serialize for Entry<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let hk = self.0;
                let mut entry = s.serialize_struct("HeavyKey", 3)?;
                entry.serialize_field("key_b64", &B64.encode(&hk.key))?;
                if hk.is_split() {
                    entry.serialize_field("split", &hk.split)?;
                } else {
                    entry.serialize_field("partition", &hk.partition)?;
                }
                entry.serialize_field("weight", &hk.weight)?;
                entry.end()
            }
        }
        let mut seq = s.serialize_seq(Some(self.0.len()))?;
        for hk in self.0 {
            seq.serialize_element(&Entry(hk))?;
        }
        seq.end()
    }
}

#[derive(Serialize)]
struct DocOut<'a> {
    format: &'static str,
    version: u64,
    topic: &'a str,
    partitions: u32,
    epoch: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    generation: Option<&'a str>,
    bucket_hash: BucketHash,
    buckets: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    table: Option<&'a [u32]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    table_b64: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    table_width: Option<u32>,
    heavy: HeavyOut<'a>,
    params: &'a Params,
    created_at_ms: u64,
    predicted_load: &'a [f64],
}

/// `Vec<u8>` as a standard, padded base64 string.
mod key_b64 {
    use std::borrow::Cow;

    use base64::Engine as _;
    use serde::{Deserialize, Deserializer, Serializer, de::Error as _};

    use super::B64;

    pub(super) fn serialize<S: Serializer>(key: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&B64.encode(key))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = Cow::<'de, str>::deserialize(d)?;
        B64.decode(text.as_bytes()).map_err(D::Error::custom)
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

    #[test]
    fn truncation_keeps_short_strings_and_cuts_long_ones_on_char_boundaries() {
        assert_eq!(truncate_for_display("abc"), "abc");
        let long = "é".repeat(100);
        let t = truncate_for_display(&long);
        assert_eq!(t.chars().count(), 64 + 3);
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
