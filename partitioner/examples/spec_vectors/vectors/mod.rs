//! The golden vectors of `docs/spec.md`, computed by this implementation.
//!
//! Shared by `examples/spec_vectors` (writes them) and `tests/spec_vectors.rs` (regenerates them
//! in memory and compares with the committed files). Each file has one case per line, so a diff
//! shows which case changed. Documents are built here and must decode; every reject case states
//! the label the spec gives it and generation stops if the implementation disagrees.
//!
//! One submodule per kind of vector file (`rejects` writes `reject.json` and `v2/reject.json`,
//! `control` both control files); this module holds the list of files and what they share: the key generator, the digest, the placement rule and the file layout.

use std::collections::HashMap;
use std::fmt::Write as _;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use dkg_kafka::Assignment;
use dkg_kafka::kafka::control::{AssignmentBook, ControlUpdate};
use dkg_kafka_core::assignment::{
    MAX_EPOCH, MAX_HEAVY_KEYS_PER_BUCKET, MAX_KEY_BYTES, MAX_PARTITIONS, MAX_TOPIC_LEN,
};
use dkg_kafka_core::{
    AssignmentParts, BucketHash, DEFAULT_BUCKET_SEED, HeavyKey, KAFKA_MURMUR2_SEED,
    MAX_ASSIGNMENT_BYTES, Params, Route, kafka_partition, murmur2, murmur2_seeded,
};
use serde::Serialize;
use serde::ser::{SerializeMap, Serializer};

mod compact;
mod control;
mod lookup;
mod murmur2;
mod random;
mod rejects;
mod split;

// The generators for FILES, and the helpers one file's module shares with another's (they `use super::*`).
use compact::compact_file;
use control::{control_file, v2_control_file};
use lookup::{
    LookupKey, assignment, doc_json, document, lookup_file, params, pattern_key, same_bucket,
    text_keys, with_misses,
};
use murmur2::murmur2_file;
use random::random_file;
use rejects::{reject_file, v2_reject_file};
use split::split_file;

// What tests/spec_vectors.rs reads besides the files (the example's main reads only FILES).
#[allow(unused_imports)]
pub use control::outcome_of;
#[allow(unused_imports)]
pub use random::{RANDOM_CASES, random_case_line, random_leading};
#[allow(unused_imports)]
pub use rejects::{padded_document, reject_label};

/// Writes one vector file.
pub type Generator = fn() -> String;

/// Every generated file: its name in `spec/vectors/` and how to write it.
pub const FILES: [(&str, Generator); 9] = [
    ("murmur2.json", murmur2_file),
    ("lookup.json", lookup_file),
    ("reject.json", reject_file),
    ("control.json", control_file),
    ("random.json", random_file),
    ("v2/split.json", split_file),
    ("v2/reject.json", v2_reject_file),
    ("v2/compact.json", compact_file),
    ("v2/control.json", v2_control_file),
];

/// Partition counts of `murmur2.json`.
pub const MURMUR2_PARTITIONS: [u32; 5] = [1, 7, 12, 100, 1000];

/// Keys per case of `random.json`.
pub const RANDOM_KEY_COUNT: usize = 1_000_000;

/// Leading partitions listed per case of `random.json`.
pub const RANDOM_FIRST: usize = 100;

/// The record key every `reject.json` document is applied under.
pub const REJECT_RECORD_KEY: &str = "orders";

/// The key rule of `random.json`, as written into the file.
pub const KEY_GENERATOR: &str = "splitmix64 with state = seed (u64, wrapping arithmetic): \
    next() { state += 0x9E3779B97F4A7C15; z = state; z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9; \
    z = (z ^ (z >> 27)) * 0x94D049BB133111EB; return z ^ (z >> 31) }. Key i (i = 0, 1, ...): \
    len = next() % 65 (0..=64 bytes), then ceil(len / 8) more next() values, each written as 8 \
    bytes little-endian, concatenated and truncated to len bytes. Digest: FNV-1a 64 (offset basis \
    0xcbf29ce484222325, prime 0x100000001b3) over each key's partition as 4 bytes little-endian, \
    in key order, written as 16 lowercase hex digits.";

/// splitmix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number generators", OOPSLA
/// 2014): the key stream of `random.json`, and the generator's own choices elsewhere.
#[derive(Clone, Debug)]
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform enough in `0..n` (`n > 0`) for picking test data.
    fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// The next key of the stream into `buf` (cleared first).
    pub fn next_key(&mut self, buf: &mut Vec<u8>) {
        let len = (self.next_u64() % 65) as usize;
        buf.clear();
        for _ in 0..len.div_ceil(8) {
            let word = self.next_u64();
            buf.extend_from_slice(&word.to_le_bytes());
        }
        buf.truncate(len);
    }
}

/// FNV-1a 64 over partitions as 4 bytes little-endian.
#[derive(Clone, Copy, Debug)]
pub struct Fnv1a(pub u64);

impl Default for Fnv1a {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv1a {
    pub fn add_partition(&mut self, partition: u32) {
        for byte in partition.to_le_bytes() {
            self.0 ^= u64::from(byte);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    pub fn hex(self) -> String {
        format!("{:016x}", self.0)
    }
}

/// Where a producer puts a keyed record for a topic with `topic_partitions` partitions: the
/// assignment's route if it was built for that count, else Kafka's default placement.
pub fn place(a: &Assignment, topic_partitions: u32, key: &[u8]) -> (u32, &'static str) {
    if a.partitions() != topic_partitions {
        return (kafka_partition(key, topic_partitions), "fallback");
    }
    match a.route(key) {
        (p, Route::Heavy) => (p, "heavy"),
        (p, Route::Bucket) => (p, "bucket"),
        (p, Route::Split) => (p, "split"),
    }
}

/// `{"cases":[` one case per line `]}` plus any leading fields (already JSON-encoded).
fn cases_file<T: Serialize>(leading: &[(&str, String)], cases: &[T]) -> String {
    let lines: Vec<String> = cases.iter().map(|c| json(c)).collect();
    lines_file(leading, &lines)
}

/// [`cases_file`] of cases already encoded, one per line.
fn lines_file(leading: &[(&str, String)], lines: &[String]) -> String {
    let mut out = String::from("{");
    for (name, value) in leading {
        let _ = writeln!(out, "{}:{value},", json(name));
    }
    out.push_str("\"cases\":[\n");
    out.push_str(&lines.join(",\n"));
    out.push_str("\n]}\n");
    out
}

fn json<T: Serialize + ?Sized>(value: &T) -> String {
    serde_json::to_string(value).expect("vector values serialize")
}

fn b64(bytes: &[u8]) -> String {
    B64.encode(bytes)
}
