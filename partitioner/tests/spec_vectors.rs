//! The golden vectors of `docs/spec.md` (`spec/vectors/`, see its README), checked two ways:
//!
//! 1. The committed files are exactly what the generator (`examples/spec_vectors`) writes, so
//!    nobody edits a vector by hand and no change of placement or validation goes unnoticed.
//! 2. Each file read back agrees with this implementation (decoding, lookup, Kafka's placement,
//!    the control-topic rules) and, for murmur2 and the lookup, with the spec's formulas
//!    recomputed here from the document text, so the vectors check the spec, not only the code.
//!
//! `random.json` holds 20 digests of 10^6 lookups each. An unoptimized build regenerates cases 1
//! (300 heavy keys) and 5 (partition-count mismatch) in full and checks the first 100 partitions of
//! every case; `cargo test --release` regenerates all 20.
#![allow(clippy::unwrap_used)]

#[path = "../examples/spec_vectors/vectors/mod.rs"]
mod vectors;

use std::collections::{BTreeSet, HashSet};
use std::path::PathBuf;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use dkg_kafka::Assignment;
use dkg_kafka::kafka::control::{AssignmentBook, RejectReason};
use dkg_kafka_core::{MAX_ASSIGNMENT_BYTES, kafka_partition, murmur2, to_positive};
use serde_json::Value;

const REGENERATE: &str = "regenerate with `cargo run -p dkg-kafka --example spec_vectors -- spec/vectors` \
     and review the diff: a change of placement or validation is a change of docs/spec.md";

fn vectors_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../spec/vectors")
}

fn committed(name: &str) -> String {
    let path = vectors_dir().join(name);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}; {REGENERATE}", path.display()))
}

fn cases(name: &str) -> Vec<Value> {
    let file: Value = serde_json::from_str(&committed(name)).unwrap();
    let cases = file["cases"].as_array().unwrap().clone();
    assert!(!cases.is_empty(), "{name} has no cases");
    cases
}

fn str_of<'a>(v: &'a Value, field: &str) -> &'a str {
    v[field]
        .as_str()
        .unwrap_or_else(|| panic!("{field} is not a string in {v}"))
}

fn u64_of(v: &Value, field: &str) -> u64 {
    v[field]
        .as_u64()
        .unwrap_or_else(|| panic!("{field} is not an unsigned integer in {v}"))
}

fn u32_of(v: &Value, field: &str) -> u32 {
    u32::try_from(u64_of(v, field)).unwrap()
}

fn bytes_of(v: &Value, field: &str) -> Vec<u8> {
    B64.decode(str_of(v, field)).unwrap()
}

/// The spec's murmur2 pseudo-code (docs/spec.md, "murmur2"), transcribed with Java's signed
/// 32-bit arithmetic rather than reusing `dkg_kafka_core::hash`.
fn spec_murmur2(data: &[u8], seed: u32) -> u32 {
    const M: i32 = 0x5bd1_e995_u32 as i32;
    let byte = |i: usize| i32::from(data[i]);
    let shr = |x: i32, n: u32| ((x as u32) >> n) as i32;
    let length = data.len();
    let mut h = (seed as i32) ^ (length as i32);
    for i in (0..length / 4).map(|w| w * 4) {
        let mut k = byte(i) | (byte(i + 1) << 8) | (byte(i + 2) << 16) | (byte(i + 3) << 24);
        k = k.wrapping_mul(M);
        k ^= shr(k, 24);
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M) ^ k;
    }
    let tail = length & !3;
    let rest = length % 4;
    if rest == 3 {
        h ^= byte(tail + 2) << 16;
    }
    if rest >= 2 {
        h ^= byte(tail + 1) << 8;
    }
    if rest >= 1 {
        h = (h ^ byte(tail)).wrapping_mul(M);
    }
    h ^= shr(h, 13);
    h = h.wrapping_mul(M);
    (h ^ shr(h, 15)) as u32
}

/// The spec's placement rule, from the document's JSON text (decoded here, not by the crate):
/// Kafka's placement if the partition counts differ, else the heavy key whose bytes equal the
/// key, else `table[to_positive(murmur2_seeded(seed, key)) % buckets]`. A split heavy key
/// (version 2) has its parts instead of a partition: see [`spec_split_picks`].
struct SpecDocument {
    partitions: u32,
    seed: u32,
    table: Vec<u32>,
    heavy: Vec<(Vec<u8>, SpecHeavy)>,
}

/// A heavy entry's `partition`, or its `split` parts as `(partition, weight)`.
#[derive(Debug, PartialEq)]
enum SpecHeavy {
    Whole(u32),
    Split(Vec<(u32, u32)>),
}

/// The first `n` partitions of a split key with `parts` (spec 4.6, transcribed): counters
/// `c[i]` from 0; per record add each weight to its counter, pick the largest counter (the
/// lowest index on ties), subtract the weight sum from it.
fn spec_split_picks(parts: &[(u32, u32)], n: usize) -> Vec<u32> {
    let total: i64 = parts.iter().map(|&(_, w)| i64::from(w)).sum();
    let mut c = vec![0_i64; parts.len()];
    (0..n)
        .map(|_| {
            let mut best = 0;
            for (i, &(_, w)) in parts.iter().enumerate() {
                c[i] += i64::from(w);
                if c[i] > c[best] {
                    best = i;
                }
            }
            c[best] -= total;
            parts[best].0
        })
        .collect()
}

fn parts_of(parts: &Value) -> Vec<(u32, u32)> {
    parts
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (u32_of(p, "partition"), u32_of(p, "weight")))
        .collect()
}

impl SpecDocument {
    fn parse(text: &str) -> Self {
        let v: Value = serde_json::from_str(text).unwrap();
        let table: Vec<u32> = match v.get("table") {
            Some(table) => table
                .as_array()
                .unwrap()
                .iter()
                .map(|p| u32::try_from(p.as_u64().unwrap()).unwrap())
                .collect(),
            // Spec 4.6: little-endian entries of `table_width` bytes, base64.
            None => {
                let width = usize::try_from(u64_of(&v, "table_width")).unwrap();
                bytes_of(&v, "table_b64")
                    .chunks(width)
                    .map(|entry| {
                        entry
                            .iter()
                            .rev()
                            .fold(0_u32, |acc, &b| (acc << 8) | u32::from(b))
                    })
                    .collect()
            }
        };
        assert_eq!(table.len() as u64, u64_of(&v, "buckets"));
        Self {
            partitions: u32_of(&v, "partitions"),
            seed: u32_of(&v["bucket_hash"], "seed"),
            table,
            heavy: v["heavy"]
                .as_array()
                .unwrap()
                .iter()
                .map(|h| {
                    let heavy = match h.get("split") {
                        Some(split) => SpecHeavy::Split(parts_of(split)),
                        None => SpecHeavy::Whole(u32_of(h, "partition")),
                    };
                    (bytes_of(h, "key_b64"), heavy)
                })
                .collect(),
        }
    }

    fn place(&self, topic_partitions: u32, key: &[u8]) -> (u32, &'static str) {
        if self.partitions != topic_partitions {
            let p = to_positive(spec_murmur2(key, 0x9747_b28c)) % topic_partitions;
            return (p, "fallback");
        }
        match self.heavy.iter().find(|(k, _)| k == key) {
            Some((_, SpecHeavy::Whole(p))) => return (*p, "heavy"),
            Some((_, SpecHeavy::Split(_))) => panic!("split keys are placed by their schedule"),
            None => {}
        }
        let bucket = to_positive(spec_murmur2(key, self.seed)) % self.table.len() as u32;
        (self.table[bucket as usize], "bucket")
    }
}

// -------------------------------------------------------------------------------------------
// 1. The committed files are the generator's output.

#[test]
fn committed_vectors_are_what_the_generator_writes() {
    for (name, generate) in vectors::FILES {
        if name == "random.json" {
            continue; // below, case by case
        }
        assert!(
            committed(name) == generate(),
            "spec/vectors/{name} differs from the generator's output; {REGENERATE}"
        );
    }
}

#[test]
fn committed_random_vectors_are_what_the_generator_writes() {
    let text = committed("random.json");
    let mut lines = text.strip_prefix('{').unwrap_or_default().lines();
    for (field, value) in vectors::random_leading() {
        let want = format!("{}:{value},", serde_json::to_string(field).unwrap());
        assert_eq!(
            lines.next(),
            Some(want.as_str()),
            "random.json: {REGENERATE}"
        );
    }
    assert_eq!(lines.next(), Some("\"cases\":["));
    let case_lines: Vec<&str> = lines
        .by_ref()
        .take(vectors::RANDOM_CASES as usize)
        .map(|l| l.strip_suffix(',').unwrap_or(l))
        .collect();
    assert_eq!(case_lines.len() as u64, vectors::RANDOM_CASES);
    assert_eq!(lines.next(), Some("]}"));
    assert_eq!(lines.next(), None);
    let indexes: Vec<u64> = if cfg!(debug_assertions) {
        vec![1, 5]
    } else {
        (0..vectors::RANDOM_CASES).collect()
    };
    for index in indexes {
        assert!(
            case_lines[index as usize] == vectors::random_case_line(index),
            "random.json case {index} differs from the generator's output; {REGENERATE}"
        );
    }
}

// -------------------------------------------------------------------------------------------
// 2. The files agree with the implementation and the spec's formulas.

#[test]
fn murmur2_vectors_match_kafka_and_the_spec() {
    let cases = cases("murmur2.json");
    let counts: Vec<String> = vectors::MURMUR2_PARTITIONS
        .iter()
        .map(u32::to_string)
        .collect();
    let mut tails = BTreeSet::new();
    for case in &cases {
        let key = bytes_of(case, "key_b64");
        tails.insert(key.len() % 4);
        let want = case["murmur2"].as_i64().unwrap();
        assert_eq!(i64::from(murmur2(&key) as i32), want, "{case}");
        assert_eq!(
            i64::from(spec_murmur2(&key, 0x9747_b28c) as i32),
            want,
            "{case}"
        );
        let partitions = case["partitions"].as_object().unwrap();
        assert_eq!(
            partitions.keys().collect::<BTreeSet<_>>(),
            counts.iter().collect::<BTreeSet<_>>()
        );
        for count in &counts {
            let n: u32 = count.parse().unwrap();
            let p = partitions[count].as_u64().unwrap();
            assert_eq!(u64::from(kafka_partition(&key, n)), p, "{case}");
            assert_eq!(u64::from(to_positive(want as i32 as u32) % n), p, "{case}");
        }
    }
    assert_eq!(tails.len(), 4, "every tail length (len % 4) is covered");
    // Values from Apache Kafka's own `UtilsTest.testMurmur2` (Java ints): the file agrees with
    // the Java client, not only with this crate.
    let by_key: Vec<(Vec<u8>, i64)> = cases
        .iter()
        .map(|c| (bytes_of(c, "key_b64"), c["murmur2"].as_i64().unwrap()))
        .collect();
    for (key, java) in [
        (&b"21"[..], -973_932_308_i64),
        (b"foobar", -790_332_482),
        (b"a-little-bit-long-string", -985_981_536),
        (b"a-little-bit-longer-string", -1_486_304_829),
        (b"abc", 479_470_107),
    ] {
        assert!(by_key.contains(&(key.to_vec(), java)), "{key:?}");
    }
}

#[test]
fn lookup_vectors_match_the_implementation_and_the_spec() {
    let mut routes = HashSet::new();
    for case in cases("lookup.json") {
        let name = str_of(&case, "name");
        let text = str_of(&case, "document_json");
        let topic_partitions = u32_of(&case, "topic_partitions");
        let a = Assignment::from_json(text.as_bytes()).unwrap();
        let spec = SpecDocument::parse(text);
        routes.extend(check_keys(name, &case, &a, &spec, topic_partitions));
    }
    assert_eq!(routes.len(), 3, "heavy, bucket and fallback all covered");
}

/// Every entry of `case["keys"]` (at least one) is placed as listed, by the implementation and
/// by the spec's rule; returns the routes seen.
fn check_keys(
    name: &str,
    case: &Value,
    a: &Assignment,
    spec: &SpecDocument,
    topic_partitions: u32,
) -> HashSet<String> {
    let keys = case["keys"].as_array().unwrap();
    assert!(!keys.is_empty(), "{name}");
    let mut routes = HashSet::new();
    for k in keys {
        let key = bytes_of(k, "key_b64");
        let want = (u32_of(k, "partition"), str_of(k, "route"));
        assert_eq!(
            vectors::place(a, topic_partitions, &key),
            want,
            "{name}: key {k}"
        );
        assert_eq!(spec.place(topic_partitions, &key), want, "{name}: key {k}");
        if want.1 != "fallback" {
            assert_eq!(a.partition_for(&key), want.0);
        }
        routes.insert(want.1.to_owned());
    }
    routes
}

#[test]
fn split_vectors_follow_the_schedule_and_the_spec() {
    let file: Value = serde_json::from_str(&committed("v2/split.json")).unwrap();
    let picks = usize::try_from(u64_of(&file, "picks_per_split_key")).unwrap();
    let mut routes = HashSet::new();
    let mut split_keys = 0;
    for case in cases("v2/split.json") {
        let name = str_of(&case, "name");
        let text = str_of(&case, "document_json");
        let topic_partitions = u32_of(&case, "topic_partitions");
        let a = Assignment::from_json(text.as_bytes()).unwrap();
        assert_eq!(a.format_version(), 2, "{name}");
        let spec = SpecDocument::parse(text);
        routes.extend(check_keys(name, &case, &a, &spec, topic_partitions));
        let listed = case["split_keys"].as_array().unwrap();
        let in_document = spec
            .heavy
            .iter()
            .filter(|(_, h)| matches!(h, SpecHeavy::Split(_)))
            .count();
        let in_effect = spec.partitions == topic_partitions;
        assert_eq!(
            listed.len(),
            if in_effect { in_document } else { 0 },
            "{name}"
        );
        for s in listed {
            let key = bytes_of(s, "key_b64");
            let parts = parts_of(&s["parts"]);
            let want: Vec<u32> = s["picks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| u32::try_from(p.as_u64().unwrap()).unwrap())
                .collect();
            assert_eq!(want.len(), picks, "{name}");
            let (_, heavy) = spec.heavy.iter().find(|(k, _)| *k == key).unwrap();
            assert_eq!(heavy, &SpecHeavy::Split(parts.clone()), "{name}");
            assert_eq!(
                spec_split_picks(&parts, picks),
                want,
                "{name}: the spec's sequence"
            );
            let got_parts: Vec<(u32, u32)> = a
                .split_of(&key)
                .unwrap()
                .iter()
                .map(|p| (p.partition, p.weight))
                .collect();
            assert_eq!(got_parts, parts, "{name}");
            // A fresh instance (only split_of and other keys were asked so far) gives the picks.
            let got: Vec<u32> = (0..picks)
                .map(|_| match vectors::place(&a, topic_partitions, &key) {
                    (p, "split") => p,
                    other => panic!("{name}: split key routed {other:?}"),
                })
                .collect();
            assert_eq!(got, want, "{name}: the implementation's sequence");
            split_keys += 1;
        }
    }
    assert_eq!(routes.len(), 3, "heavy, bucket and fallback all covered");
    assert!(split_keys >= 10, "{split_keys} split keys");
}

#[test]
fn compact_vectors_equal_their_twins_and_follow_the_spec() {
    let mut twins = 0;
    for case in cases("v2/compact.json") {
        let name = str_of(&case, "name");
        let text = str_of(&case, "document_json");
        let a = Assignment::from_json(text.as_bytes()).unwrap();
        let spec = SpecDocument::parse(text);
        assert_eq!(a.table(), spec.table, "{name}");
        if let Some(twin) = case["twin_document_json"].as_str() {
            assert_eq!(Assignment::from_json(twin.as_bytes()).unwrap(), a, "{name}");
            assert_eq!(SpecDocument::parse(twin).table, spec.table, "{name}");
            twins += 1;
        }
        check_keys(name, &case, &a, &spec, u32_of(&case, "topic_partitions"));
    }
    assert!(twins >= 2);
}

#[test]
fn reject_vectors_are_rejected_with_their_reason() {
    for file in ["reject.json", "v2/reject.json"] {
        check_reject_file(file);
    }
    // The size limit is inclusive: a padded document of exactly the limit is accepted.
    let at_limit = vectors::padded_document(MAX_ASSIGNMENT_BYTES);
    assert!(Assignment::from_json(&at_limit).is_ok());
}

/// Every case of `file` is rejected with its reason, and docs/spec.md lists it.
fn check_reject_file(file: &str) {
    let spec = std::fs::read_to_string(vectors_dir().join("../../docs/spec.md")).unwrap();
    let labels: HashSet<&str> = RejectReason::ALL.iter().map(|r| r.as_str()).collect();
    let mut names = HashSet::new();
    for case in cases(file) {
        let name = str_of(&case, "name");
        assert!(names.insert(name.to_owned()), "{name} twice");
        assert!(
            spec.contains(&format!("`{name}`")),
            "reject case {name} is not in docs/spec.md's table"
        );
        let reason = str_of(&case, "reason");
        assert!(labels.contains(reason), "{name}: unknown reason {reason}");
        let document = match &case["document_b64"] {
            Value::String(s) => B64.decode(s).unwrap(),
            _ => {
                let len = case["generate"]["valid_document_padded_to_bytes"]
                    .as_u64()
                    .unwrap();
                vectors::padded_document(usize::try_from(len).unwrap())
            }
        };
        assert!(
            Assignment::from_json(&document).is_err(),
            "{file} {name} decodes"
        );
        assert_eq!(vectors::reject_label(&document), reason, "{file} {name}");
    }
}

#[test]
fn control_vectors_follow_the_book_rules() {
    for case in cases("control.json")
        .into_iter()
        .chain(cases("v2/control.json"))
    {
        let name = str_of(&case, "name");
        let records = case["records"].as_array().unwrap();
        let expect = case["expect"].as_array().unwrap();
        assert_eq!(records.len(), expect.len(), "{name}");
        let mut book = AssignmentBook::new();
        for (i, (record, want)) in records.iter().zip(expect).enumerate() {
            let key: Option<Vec<u8>> = match (&record["key_utf8"], record.get("key_b64")) {
                (Value::String(k), _) => Some(k.as_bytes().to_vec()),
                (Value::Null, Some(Value::String(b))) => Some(B64.decode(b).unwrap()),
                (Value::Null, None | Some(Value::Null)) => None,
                other => panic!("{name} #{i}: bad key fields {other:?}"),
            };
            let value = record["value_json"].as_str().map(str::as_bytes);
            let (outcome, reason) = vectors::outcome_of(&book.apply(key.as_deref(), value));
            assert_eq!(outcome, str_of(want, "outcome"), "{name} #{i}");
            assert_eq!(reason, want["reason"].as_str(), "{name} #{i}");
            let topic = key.as_deref().and_then(|k| std::str::from_utf8(k).ok());
            let epoch = topic.and_then(|t| book.get(t)).map(|a| a.epoch());
            assert_eq!(epoch, want["epoch_after"].as_u64(), "{name} #{i}");
            let floor = topic.and_then(|t| book.retraction(t)).map(|r| r.epoch);
            assert_eq!(
                floor,
                want.get("floor_after").and_then(Value::as_u64),
                "{name} #{i}"
            );
        }
    }
}

#[test]
fn random_vectors_follow_the_spec_on_their_first_keys() {
    let file: Value = serde_json::from_str(&committed("random.json")).unwrap();
    assert_eq!(str_of(&file, "key_generator"), vectors::KEY_GENERATOR);
    assert_eq!(u64_of(&file, "key_count"), vectors::RANDOM_KEY_COUNT as u64);
    let cases = file["cases"].as_array().unwrap();
    assert_eq!(cases.len() as u64, vectors::RANDOM_CASES);
    let mut mismatched = 0;
    for (i, case) in cases.iter().enumerate() {
        let text = str_of(case, "document_json");
        let topic_partitions = u32_of(case, "topic_partitions");
        let spec = SpecDocument::parse(text);
        Assignment::from_json(text.as_bytes()).unwrap();
        assert!((1..=200).contains(&spec.partitions), "case {i}");
        assert!((1..=20_000).contains(&spec.table.len()), "case {i}");
        assert!(spec.heavy.len() <= 300, "case {i}");
        mismatched += usize::from(spec.partitions != topic_partitions);
        let digest = str_of(case, "digest");
        assert!(digest.len() == 16 && digest.bytes().all(|b| b.is_ascii_hexdigit()));
        let mut stream = vectors::SplitMix64(u64_of(case, "seed"));
        let mut key = Vec::new();
        let first: Vec<u64> = (0..vectors::RANDOM_FIRST)
            .map(|_| {
                stream.next_key(&mut key);
                u64::from(spec.place(topic_partitions, &key).0)
            })
            .collect();
        let want: Vec<u64> = case["first_partitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p.as_u64().unwrap())
            .collect();
        assert_eq!(first, want, "case {i}");
    }
    assert_eq!(mismatched, 2, "two cases exercise the fallback route");
}
