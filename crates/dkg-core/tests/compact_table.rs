//! The compact bucket table of format version 2 (`docs/spec.md` 4.6): `table_b64` +
//! `table_width`, written by `to_json_compact` only when the JSON table would exceed
//! `COMPACT_TABLE_ABOVE_BYTES`, read as the same assignment as its JSON-table twin.
#![allow(clippy::unwrap_used)]

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use dkg_kafka_core::assignment::COMPACT_TABLE_ABOVE_BYTES;
use dkg_kafka_core::{Assignment, AssignmentParts, BucketHash, Error, HeavyKey, Params};
use proptest::prelude::*;
use serde_json::Value;

fn with_table(partitions: u32, table: Vec<u32>) -> Assignment {
    Assignment::new(AssignmentParts {
        topic: "orders".to_owned(),
        partitions,
        epoch: 4,
        bucket_hash: BucketHash::default(),
        table,
        heavy: vec![HeavyKey::whole(b"hot".to_vec(), partitions - 1, 7)],
        params: Params {
            theta: 0.01,
            epsilon: 0.005,
            mu: 64.0,
            window_records: 10,
        },
        created_at_ms: 9,
        predicted_load: vec![0.0; partitions as usize],
    })
    .unwrap()
}

fn doc(a: &Assignment) -> Value {
    serde_json::from_slice(&a.to_json_compact()).unwrap()
}

/// `value` (a version 2 document with `table_b64`) rewritten with a JSON `table`, as version 1.
fn json_twin(mut value: Value) -> Vec<u8> {
    let bytes = B64.decode(value["table_b64"].as_str().unwrap()).unwrap();
    let width = value["table_width"].as_u64().unwrap() as usize;
    let table: Vec<u32> = bytes
        .chunks(width)
        .map(|c| {
            let mut le = [0_u8; 4];
            le[..width].copy_from_slice(c);
            u32::from_le_bytes(le)
        })
        .collect();
    let obj = value.as_object_mut().unwrap();
    obj.remove("table_b64");
    obj.remove("table_width");
    obj.insert("table".to_owned(), table.into());
    obj.insert("version".to_owned(), 1.into());
    serde_json::to_vec(&value).unwrap()
}

#[test]
fn the_writer_switches_above_256_kib_of_json_table() {
    // n entries "0" and one "10": brackets, n commas, n + 2 digits: 2n + 4 bytes of JSON text.
    let at_limit = (COMPACT_TABLE_ABOVE_BYTES - 4) / 2;
    let table = |n: usize| {
        let mut t = vec![0_u32; n];
        t.push(10);
        t
    };
    let json_len = |t: &[u32]| serde_json::to_vec(t).unwrap().len();
    let below = with_table(12, table(at_limit));
    assert_eq!(json_len(below.table()), COMPACT_TABLE_ABOVE_BYTES);
    assert_eq!(below.to_json_compact(), below.to_json());
    assert_eq!(doc(&below)["version"], 1);

    let above = with_table(12, table(at_limit + 1));
    assert!(json_len(above.table()) > COMPACT_TABLE_ABOVE_BYTES);
    // The default encoding stays version 1 for mixed fleets (spec 11.1).
    assert_eq!(above.format_version(), 1);
    let plain: Value = serde_json::from_slice(&above.to_json()).unwrap();
    assert_eq!(
        (plain["version"].as_u64(), plain["table"].is_array()),
        (Some(1), true)
    );
    let v = doc(&above);
    assert_eq!(v["version"], 2);
    assert!(v.get("table").is_none());
    assert_eq!(v["table_width"], 1);
    let back = Assignment::from_json(&above.to_json_compact()).unwrap();
    assert_eq!(back, above);
    assert_eq!(back.to_json_compact(), above.to_json_compact());
    let twin = Assignment::from_json(&json_twin(v)).unwrap();
    assert_eq!(twin, above, "a compact document equals its JSON-table twin");
}

#[test]
fn the_width_is_the_smallest_that_holds_the_last_partition() {
    for (partitions, width) in [(1, 1), (256, 1), (257, 2), (65_536, 2), (65_537, 4)] {
        // Enough buckets for a JSON table over the limit (each entry is at least "0,").
        let table: Vec<u32> = (0..140_000).map(|b| b % partitions).collect();
        let a = with_table(partitions, table);
        let v = doc(&a);
        assert_eq!(v["table_width"], width, "{partitions} partitions");
        let raw = B64.decode(v["table_b64"].as_str().unwrap()).unwrap();
        assert_eq!(raw.len(), 140_000 * width as usize);
        assert_eq!(Assignment::from_json(&a.to_json_compact()).unwrap(), a);
    }
}

/// The version 2 document of 3 partitions whose table `[0,1,2,0]` is compact (width 1).
fn small_compact() -> String {
    let a = with_table(3, vec![0, 1, 2, 0]);
    let text = String::from_utf8(a.to_json()).unwrap();
    text.replace(r#""version":1"#, r#""version":2"#).replace(
        r#""table":[0,1,2,0]"#,
        &format!(
            r#""table_b64":"{}","table_width":1"#,
            B64.encode([0, 1, 2, 0])
        ),
    )
}

#[test]
fn bad_compact_tables_are_rejected() {
    let base = small_compact();
    let a = Assignment::from_json(base.as_bytes()).unwrap();
    assert_eq!(a.table(), [0, 1, 2, 0]);
    assert_eq!(
        a.format_version(),
        1,
        "small tables are written as JSON again"
    );
    let edit = |from: &str, to: &str| {
        assert!(base.contains(from), "{from}");
        base.replacen(from, to, 1).into_bytes()
    };
    let member = format!(
        r#""table_b64":"{}","table_width":1"#,
        B64.encode([0, 1, 2, 0])
    );
    let malformed = |e: &Error| matches!(e, Error::MalformedAssignment { .. });
    let invalid = |e: &Error| matches!(e, Error::InvalidAssignment { .. });
    let out_of_range = |e: &Error| matches!(e, Error::PartitionOutOfRange { partition: 3, .. });
    type Case<'a> = (&'a str, Vec<u8>, &'a dyn Fn(&Error) -> bool);
    let cases: Vec<Case<'_>> = vec![
        (
            "width 2 for 3 partitions",
            edit(r#""table_width":1"#, r#""table_width":2"#),
            &invalid,
        ),
        (
            "width 3",
            edit(r#""table_width":1"#, r#""table_width":3"#),
            &invalid,
        ),
        (
            "width 0",
            edit(r#""table_width":1"#, r#""table_width":0"#),
            &invalid,
        ),
        (
            "too short",
            edit(&B64.encode([0, 1, 2, 0]), &B64.encode([0, 1, 2])),
            &invalid,
        ),
        (
            "not base64",
            edit(&B64.encode([0, 1, 2, 0]), "AAECAA"),
            &invalid,
        ),
        (
            "entry out of range",
            edit(&B64.encode([0, 1, 2, 0]), &B64.encode([0, 1, 3, 0])),
            &out_of_range,
        ),
        (
            "both",
            edit(&member, &format!(r#"{member},"table":[0,1,2,0]"#)),
            &malformed,
        ),
        (
            "width alone",
            edit(&member, r#""table_width":1"#),
            &malformed,
        ),
        ("b64 alone", edit(r#","table_width":1"#, ""), &malformed),
        (
            "width null",
            edit(r#""table_width":1"#, r#""table_width":null"#),
            &malformed,
        ),
        (
            "in version 1",
            edit(r#""version":2"#, r#""version":1"#),
            &malformed,
        ),
    ];
    for (name, document, want) in cases {
        match Assignment::from_json(&document) {
            Err(e) => assert!(want(&e), "{name}: {e:?}"),
            Ok(_) => panic!("{name}: accepted"),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    /// Any table over the limit round-trips compactly and equals its JSON-table twin.
    #[test]
    fn compact_documents_round_trip(partitions in 1_u32..70_000, seed in any::<u64>()) {
        let mut x = seed;
        let table: Vec<u32> = (0..140_000)
            .map(|_| {
                x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
                ((x >> 33) % u64::from(partitions)) as u32
            })
            .collect();
        let a = with_table(partitions, table);
        prop_assert_eq!(doc(&a)["version"].as_u64(), Some(2));
        let back = Assignment::from_json(&a.to_json_compact()).unwrap();
        prop_assert_eq!(&back, &a);
        let twin = Assignment::from_json(&json_twin(doc(&a))).unwrap();
        prop_assert_eq!(&twin, &a);
        for key in [&b"hot"[..], b"cold", b"", b"user-1"] {
            prop_assert_eq!(twin.route(key), a.route(key));
        }
    }
}
