//! The assignment document: exact shape, round trips, and hostile input (every bad document gets a
//! typed error, nothing panics).

use dkg_kafka::{Assignment, Error};
use dkg_kafka_core::assignment::{
    MAX_BUCKETS, MAX_FORMAT_VERSION, MAX_HEAVY_KEYS, MAX_KEY_BYTES, MAX_PARTITIONS, MAX_TOPIC_LEN,
};
use dkg_kafka_core::{BucketHash, HeavyKey, MAX_ASSIGNMENT_BYTES, MAX_EPOCH, Params};
use dkg_testkit::fixtures::{heavy, parts, sample, within_bucket_bound};
use proptest::prelude::*;
use serde_json::{Value, json};

/// The sample assignment, byte for byte. Pins field names, order and encodings (base64 keys,
/// bucket hash object); changing any of them is a format change and needs a version bump.
const SAMPLE_JSON: &str = concat!(
    r#"{"format":"dkg.assignment","version":1,"topic":"orders","partitions":3,"epoch":7,"#,
    r#""bucket_hash":{"function":"murmur2","seed":625341585},"buckets":8,"#,
    r#""table":[0,1,2,0,1,2,2,1],"heavy":[{"key_b64":"aG90","partition":1,"weight":1200},"#,
    r#"{"key_b64":"","partition":2,"weight":900},{"key_b64":"AP+AfyJc","partition":0,"weight":500}],"#,
    r#""params":{"theta":0.01,"epsilon":0.005,"mu":4.0,"window_records":100000},"#,
    r#""created_at_ms":1700000000000,"#,
    r#""predicted_load":[0.3333333333333333,0.3333333333333333,0.3333333333333333]}"#
);

fn sample_assignment() -> Assignment {
    Assignment::new(sample()).expect("sample is valid")
}

fn sample_value() -> Value {
    serde_json::from_slice(&sample_assignment().to_json()).expect("to_json emits JSON")
}

fn decode(v: &Value) -> Result<Assignment, Error> {
    Assignment::from_json(&serde_json::to_vec(v).expect("serialize test value"))
}

fn edited(edit: impl FnOnce(&mut Value)) -> Result<Assignment, Error> {
    let mut v = sample_value();
    edit(&mut v);
    decode(&v)
}

fn obj(v: &mut Value) -> &mut serde_json::Map<String, Value> {
    v.as_object_mut().expect("document is an object")
}

#[test]
fn encodes_the_documented_shape_byte_for_byte() {
    let a = sample_assignment();
    assert_eq!(String::from_utf8(a.to_json()).expect("utf-8"), SAMPLE_JSON);
}

#[test]
fn decodes_the_documented_shape() {
    let a = Assignment::from_json(SAMPLE_JSON.as_bytes()).expect("valid document");
    assert_eq!(a.topic(), "orders");
    assert_eq!(a.partitions(), 3);
    assert_eq!(a.epoch(), 7);
    assert_eq!(a.buckets(), 8);
    assert_eq!(a.bucket_hash(), BucketHash::Murmur2 { seed: 0x2545_f491 });
    assert_eq!(a.table(), &[0, 1, 2, 0, 1, 2, 2, 1]);
    assert_eq!(a.heavy()[2].key, vec![0x00, 0xff, 0x80, 0x7f, b'"', b'\\']);
    assert_eq!(a.heavy()[1].key, Vec::<u8>::new());
    assert_eq!(a.params().window_records, 100_000);
    assert_eq!(a.created_at_ms(), 1_700_000_000_000);
    assert_eq!(a.predicted_load().len(), 3);
    assert_eq!(a, sample_assignment());
}

#[test]
fn compact_and_pretty_round_trip() {
    let a = sample_assignment();
    assert_eq!(Assignment::from_json(&a.to_json()).expect("compact"), a);
    let pretty = a.to_json_pretty();
    assert!(pretty.contains('\n'));
    assert_eq!(Assignment::from_json(pretty.as_bytes()).expect("pretty"), a);
    assert_eq!(a.clone().into_parts(), sample());
}

#[test]
fn field_order_does_not_matter_when_decoding() {
    // serde_json::Value without preserve_order writes keys sorted, unlike to_json.
    let v = sample_value();
    let reordered = serde_json::to_vec(&v).expect("serialize");
    assert_ne!(reordered, sample_assignment().to_json());
    assert_eq!(
        Assignment::from_json(&reordered).expect("valid"),
        sample_assignment()
    );
}

#[test]
fn heavy_key_serde_matches_the_document_encoding() {
    let hk = heavy(&[0xde, 0xad, 0xbe, 0xef], 4, 9);
    let text = serde_json::to_string(&hk).expect("serialize");
    assert_eq!(text, r#"{"key_b64":"3q2+7w==","partition":4,"weight":9}"#);
    assert_eq!(
        serde_json::from_str::<HeavyKey>(&text).expect("deserialize"),
        hk
    );
    assert!(
        serde_json::from_str::<HeavyKey>(r#"{"key_b64":"3q2+7w","partition":4,"weight":9}"#)
            .is_err()
    );
}

#[test]
fn every_truncation_is_an_error() {
    let bytes = sample_assignment().to_json();
    for len in 0..bytes.len() {
        match Assignment::from_json(&bytes[..len]) {
            Err(Error::MalformedAssignment { .. }) => {}
            other => panic!("prefix of {len} bytes: expected MalformedAssignment, got {other:?}"),
        }
    }
    assert!(Assignment::from_json(&bytes).is_ok());
}

#[test]
fn size_limit_is_checked_before_parsing_and_is_inclusive() {
    let mut padded = sample_assignment().to_json();
    padded.resize(MAX_ASSIGNMENT_BYTES, b' ');
    assert!(
        Assignment::from_json(&padded).is_ok(),
        "exactly the limit is fine"
    );
    padded.push(b' ');
    match Assignment::from_json(&padded) {
        Err(Error::TooLarge {
            what,
            actual,
            limit,
        }) => {
            assert_eq!(what, "assignment bytes");
            assert_eq!(actual, MAX_ASSIGNMENT_BYTES as u64 + 1);
            assert_eq!(limit, MAX_ASSIGNMENT_BYTES as u64);
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
    // Garbage over the limit is rejected as too large, not parsed.
    let garbage = vec![b'['; MAX_ASSIGNMENT_BYTES + 1];
    assert!(matches!(
        Assignment::from_json(&garbage),
        Err(Error::TooLarge { .. })
    ));
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    let mut doc = String::from(r#"{"format":"dkg.assignment","version":1,"topic":"#);
    doc.push_str(&"[".repeat(100_000));
    assert!(matches!(
        Assignment::from_json(doc.as_bytes()),
        Err(Error::MalformedAssignment { .. })
    ));
}

#[test]
fn not_an_assignment_at_all() {
    for bad in [
        &b""[..],
        b"null",
        b"[]",
        b"\"dkg.assignment\"",
        b"42",
        b"{}",
        b"\xff\xfe{",
        b"{\"format\":\"dkg.assignment\",\"version\":1}",
    ] {
        assert!(
            matches!(
                Assignment::from_json(bad),
                Err(Error::MalformedAssignment { .. })
            ),
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
}

#[test]
fn trailing_garbage_is_an_error() {
    let mut bytes = sample_assignment().to_json();
    bytes.extend_from_slice(b" {}");
    assert!(matches!(
        Assignment::from_json(&bytes),
        Err(Error::MalformedAssignment { .. })
    ));
}

#[test]
fn every_missing_field_is_an_error() {
    let fields: Vec<String> = obj(&mut sample_value()).keys().cloned().collect();
    assert_eq!(fields.len(), 12);
    for field in fields {
        let r = edited(|v| {
            obj(v).remove(&field);
        });
        assert!(
            matches!(r, Err(Error::MalformedAssignment { .. })),
            "without {field}: {r:?}"
        );
    }
    for (within, field) in [
        ("params", "theta"),
        ("params", "window_records"),
        ("bucket_hash", "seed"),
        ("bucket_hash", "function"),
    ] {
        let r = edited(|v| {
            v[within].as_object_mut().expect("object").remove(field);
        });
        assert!(
            matches!(r, Err(Error::MalformedAssignment { .. })),
            "without {within}.{field}: {r:?}"
        );
    }
    let r = edited(|v| {
        v["heavy"][0]
            .as_object_mut()
            .expect("object")
            .remove("weight");
    });
    assert!(matches!(r, Err(Error::MalformedAssignment { .. })), "{r:?}");
}

#[test]
fn unknown_fields_are_rejected_at_every_level() {
    type Edit = fn(&mut Value);
    let cases: [(&str, Edit); 4] = [
        ("top level", |v| {
            obj(v).insert("salt".into(), json!(1));
        }),
        ("heavy entry", |v| {
            v["heavy"][0]["extra"] = json!(true);
        }),
        ("params", |v| {
            v["params"]["alpha"] = json!(1.0);
        }),
        ("bucket_hash", |v| {
            v["bucket_hash"]["rounds"] = json!(2);
        }),
    ];
    for (name, edit) in cases {
        let r = edited(edit);
        assert!(
            matches!(r, Err(Error::MalformedAssignment { .. })),
            "{name}: {r:?}"
        );
    }
}

#[test]
fn duplicate_json_fields_are_rejected() {
    let doc = SAMPLE_JSON.replacen(
        r#""topic":"orders","#,
        r#""topic":"orders","topic":"other","#,
        1,
    );
    assert_ne!(doc, SAMPLE_JSON);
    assert!(matches!(
        Assignment::from_json(doc.as_bytes()),
        Err(Error::MalformedAssignment { .. })
    ));
}

#[test]
fn wrong_types_are_malformed() {
    let cases: Vec<(&str, Value)> = vec![
        ("partitions", json!("3")),
        ("partitions", json!(3.0)),
        ("partitions", json!(-1)),
        ("partitions", json!(null)),
        ("epoch", json!([7])),
        ("topic", json!(7)),
        ("table", json!({"0": 1})),
        ("table", json!([0, "1"])),
        ("table", json!([0, 1.5])),
        ("heavy", json!({})),
        (
            "heavy",
            json!([{"key_b64": 5, "partition": 0, "weight": 1}]),
        ),
        ("heavy", json!([["aG90", 0, 1]])),
        ("params", json!([0.1, 0.05, 2.0, 10])),
        (
            "params",
            json!({"theta": "0.1", "epsilon": 0.05, "mu": 2.0, "window_records": 10}),
        ),
        ("bucket_hash", json!("murmur2")),
        ("bucket_hash", json!(["murmur2", 1])),
        ("bucket_hash", json!({"function": "xxhash3", "seed": 1})),
        ("bucket_hash", json!({"function": "murmur2", "seed": -1})),
        ("created_at_ms", json!(-5)),
        ("predicted_load", json!(["0.3"])),
        ("version", json!("1")),
        ("version", json!(1.0)),
        ("format", json!(null)),
    ];
    for (field, value) in cases {
        let shown = value.to_string();
        let r = edited(|v| v[field] = value);
        assert!(
            matches!(r, Err(Error::MalformedAssignment { .. })),
            "{field} = {shown}: {r:?}"
        );
    }
}

#[test]
fn huge_numbers() {
    // Beyond the integer types: a parse error.
    for (field, raw) in [
        ("partitions", "4294967296"),
        ("epoch", "18446744073709551616"),
        ("created_at_ms", "1e30"),
        ("buckets", "99999999999999999999999"),
        ("version", "18446744073709551616"),
    ] {
        let doc = set_raw(field, raw);
        let r = Assignment::from_json(doc.as_bytes());
        assert!(
            matches!(r, Err(Error::MalformedAssignment { .. })),
            "{field} = {raw}: {r:?}"
        );
    }
    // A float beyond f64: serde_json refuses it rather than producing infinity.
    let doc = SAMPLE_JSON.replacen("0.3333333333333333", "1e400", 1);
    assert!(matches!(
        Assignment::from_json(doc.as_bytes()),
        Err(Error::MalformedAssignment { .. })
    ));
    // Representable but over our limits: TooLarge with the quantity named.
    let r = edited(|v| v["partitions"] = json!(MAX_PARTITIONS + 1));
    assert!(
        matches!(
            r,
            Err(Error::TooLarge {
                what: "partitions",
                ..
            })
        ),
        "{r:?}"
    );
    // An epoch above 2^53 - 1 is out of range (spec 4.4 step 11b), 2^53 - 1 itself is fine.
    for epoch in [MAX_EPOCH + 1, u64::MAX] {
        let r = edited(|v| v["epoch"] = json!(epoch));
        assert!(
            matches!(r, Err(Error::EpochOutOfRange { epoch: e, .. }) if e == epoch),
            "{r:?}"
        );
    }
    // The largest legal values pass.
    let r = edited(|v| {
        v["epoch"] = json!(MAX_EPOCH);
        v["created_at_ms"] = json!(u64::MAX);
        v["heavy"][0]["weight"] = json!(u64::MAX);
        v["params"]["window_records"] = json!(u64::MAX);
        v["bucket_hash"]["seed"] = json!(u32::MAX);
    });
    let a = r.expect("max integers are fine");
    assert_eq!(a.epoch(), MAX_EPOCH);
    assert_eq!(Assignment::from_json(&a.to_json()).expect("round trip"), a);
}

/// The sample document with `field`'s value replaced by raw JSON text.
fn set_raw(field: &str, raw: &str) -> String {
    let mut v = sample_value();
    v[field] = json!("__RAW__");
    serde_json::to_string(&v)
        .expect("serialize")
        .replacen("\"__RAW__\"", raw, 1)
}

#[test]
fn wrong_format_or_version() {
    let r = edited(|v| v["format"] = json!("dkg.assignmentx"));
    match r {
        Err(Error::UnknownFormat { found, expected }) => {
            assert_eq!(found, "dkg.assignmentx");
            assert_eq!(expected, "dkg.assignment");
        }
        other => panic!("expected UnknownFormat, got {other:?}"),
    }
    for version in [0_u64, 3, u64::MAX] {
        let r = edited(|v| v["version"] = json!(version));
        match r {
            Err(Error::UnsupportedVersion {
                version: found,
                supported,
            }) => {
                assert_eq!(found, version);
                assert_eq!(supported, MAX_FORMAT_VERSION);
            }
            other => panic!("version {version}: expected UnsupportedVersion, got {other:?}"),
        }
    }
    // A future version with a different shape still reports its version, not a shape error.
    let v3 = br#"{"version":3,"format":"dkg.assignment","tables":{"a":[1]},"topic":5}"#;
    assert!(matches!(
        Assignment::from_json(v3),
        Err(Error::UnsupportedVersion { version: 3, .. })
    ));
}

#[test]
fn out_of_range_partitions() {
    match edited(|v| v["table"][5] = json!(3)) {
        Err(Error::PartitionOutOfRange {
            topic,
            partition,
            partitions,
        }) => {
            assert_eq!((topic.as_str(), partition, partitions), ("orders", 3, 3));
        }
        other => panic!("expected PartitionOutOfRange, got {other:?}"),
    }
    let r = edited(|v| v["heavy"][1]["partition"] = json!(u32::MAX));
    assert!(
        matches!(
            r,
            Err(Error::PartitionOutOfRange {
                partition: u32::MAX,
                ..
            })
        ),
        "{r:?}"
    );
    let r = edited(|v| {
        v["partitions"] = json!(0);
        v["predicted_load"] = json!([]);
    });
    assert!(matches!(r, Err(Error::InvalidAssignment { .. })), "{r:?}");
}

#[test]
fn table_length_must_match_buckets() {
    match edited(|v| v["buckets"] = json!(9)) {
        Err(Error::TableLength { expected, actual }) => assert_eq!((expected, actual), (9, 8)),
        other => panic!("expected TableLength, got {other:?}"),
    }
    let r = edited(|v| v["table"].as_array_mut().expect("array").push(json!(0)));
    assert!(
        matches!(
            r,
            Err(Error::TableLength {
                expected: 8,
                actual: 9
            })
        ),
        "{r:?}"
    );
    let r = edited(|v| {
        v["buckets"] = json!(0);
        v["table"] = json!([]);
    });
    assert!(matches!(r, Err(Error::InvalidAssignment { .. })), "{r:?}");
}

#[test]
fn duplicate_heavy_keys() {
    let r = edited(|v| {
        let dup = v["heavy"][0].clone();
        v["heavy"].as_array_mut().expect("array").push(dup);
    });
    match r {
        Err(Error::DuplicateHeavyKey { key_b64 }) => assert_eq!(key_b64, "aG90"),
        other => panic!("expected DuplicateHeavyKey, got {other:?}"),
    }
    // Same bytes with a different partition is still a duplicate: which one would win?
    let r = edited(|v| {
        v["heavy"]
            .as_array_mut()
            .expect("array")
            .push(json!({"key_b64": "", "partition": 0, "weight": 1}));
    });
    assert!(matches!(r, Err(Error::DuplicateHeavyKey { .. })), "{r:?}");
}

#[test]
fn bad_base64_keys() {
    // Not base64; URL-safe alphabet; missing padding; non-zero trailing bits; whitespace.
    for bad in ["!!!!", "-_-_", "YQ", "YR==", "aG 90", "aG90\n"] {
        let r = edited(|v| v["heavy"][2]["key_b64"] = json!(bad));
        match r {
            Err(Error::InvalidKeyEncoding { index, .. }) => assert_eq!(index, 2, "{bad:?}"),
            other => panic!("{bad:?}: expected InvalidKeyEncoding, got {other:?}"),
        }
    }
}

#[test]
fn key_length_limit() {
    let long = vec![7_u8; MAX_KEY_BYTES + 1];
    let mut p = sample();
    p.heavy.push(heavy(&long, 0, 1));
    let json_doc = {
        let mut v = sample_value();
        v["heavy"]
            .as_array_mut()
            .expect("array")
            .push(serde_json::to_value(heavy(&long, 0, 1)).expect("value"));
        v
    };
    for r in [Assignment::new(p), decode(&json_doc)] {
        assert!(
            matches!(
                r,
                Err(Error::TooLarge {
                    what: "heavy key bytes",
                    ..
                })
            ),
            "{r:?}"
        );
    }
    let mut p = sample();
    p.heavy.push(heavy(&vec![7_u8; MAX_KEY_BYTES], 0, 1));
    assert!(Assignment::new(p).is_ok(), "exactly the limit is fine");
}

#[test]
fn heavy_count_limit() {
    let mut p = sample();
    p.heavy = (0..=MAX_HEAVY_KEYS as u32)
        .map(|i| heavy(&i.to_le_bytes(), 0, 1))
        .collect();
    assert!(matches!(
        Assignment::new(p),
        Err(Error::TooLarge {
            what: "heavy keys",
            ..
        })
    ));
}

#[test]
fn bucket_count_limit() {
    let p = parts(2, vec![0; MAX_BUCKETS as usize + 1], vec![]);
    assert!(matches!(
        Assignment::new(p),
        Err(Error::TooLarge {
            what: "buckets",
            ..
        })
    ));
    let p = parts(2, vec![1; MAX_BUCKETS as usize], vec![]);
    let a = Assignment::new(p).expect("exactly the limit is fine");
    assert_eq!(a.buckets(), MAX_BUCKETS);
    assert_eq!(a.partition_for(b"anything"), 1);
}

#[test]
fn predicted_load_must_be_one_finite_share_per_partition() {
    for (load, why) in [
        (json!([0.5, 0.5]), "too short"),
        (json!([0.25, 0.25, 0.25, 0.25]), "too long"),
        (json!([0.5, -0.1, 0.6]), "negative"),
        (json!([]), "empty"),
    ] {
        let r = edited(|v| v["predicted_load"] = load);
        assert!(
            matches!(r, Err(Error::InvalidAssignment { .. })),
            "{why}: {r:?}"
        );
    }
    for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.5] {
        let mut p = sample();
        p.predicted_load[1] = bad;
        assert!(
            matches!(Assignment::new(p), Err(Error::InvalidAssignment { .. })),
            "{bad}"
        );
    }
    // Shares need not sum to 1 (an empty window predicts zeros).
    let r = edited(|v| v["predicted_load"] = json!([0.0, 0.0, 0.0]));
    assert!(r.is_ok(), "{r:?}");
}

#[test]
fn params_must_be_finite_and_non_negative() {
    let r = edited(|v| v["params"]["mu"] = json!(-2.0));
    assert!(matches!(r, Err(Error::InvalidAssignment { .. })), "{r:?}");
    for bad in [f64::NAN, f64::INFINITY, -1.0] {
        for field in 0..3 {
            let mut p = sample();
            let Params {
                theta, epsilon, mu, ..
            } = &mut p.params;
            *[theta, epsilon, mu][field] = bad;
            assert!(
                matches!(Assignment::new(p), Err(Error::InvalidAssignment { .. })),
                "field {field} = {bad}"
            );
        }
    }
}

#[test]
fn topic_names_follow_kafka_rules() {
    let longest = "t".repeat(MAX_TOPIC_LEN);
    for ok in [
        "a",
        "orders.v2",
        "A_b-c.9",
        ".hidden",
        "..x",
        longest.as_str(),
    ] {
        let mut p = sample();
        p.topic = ok.to_owned();
        assert!(Assignment::new(p).is_ok(), "{ok:?}");
    }
    let too_long = "t".repeat(MAX_TOPIC_LEN + 1);
    for bad in [
        "",
        ".",
        "..",
        "a/b",
        "a b",
        "tópico",
        "a\0b",
        too_long.as_str(),
    ] {
        let r = edited(|v| v["topic"] = json!(bad));
        match r {
            Err(Error::InvalidTopic { topic, .. }) => assert!(topic.len() <= 70, "{topic}"),
            other => panic!("{bad:?}: expected InvalidTopic, got {other:?}"),
        }
    }
}

#[test]
fn errors_read_well() {
    let e = edited(|v| v["table"][0] = json!(9)).expect_err("out of range");
    assert_eq!(
        e.to_string(),
        "topic \"orders\": partition 9 out of range (topic has 3 partitions)"
    );
    let e = edited(|v| v["version"] = json!(3)).expect_err("version");
    assert!(e.to_string().contains("version 3"), "{e}");
}

fn arb_parts() -> impl Strategy<Value = dkg_kafka_core::AssignmentParts> {
    (1_u32..=40, 1_usize..=64, any::<u32>(), 0..=MAX_EPOCH).prop_flat_map(
        |(partitions, buckets, seed, epoch)| {
            (
                prop::collection::vec(0..partitions, buckets),
                prop::collection::btree_map(
                    prop::collection::vec(any::<u8>(), 0..24),
                    (0..partitions, any::<u64>()),
                    0..24,
                ),
                prop::collection::vec(0.0_f64..=1.0, partitions as usize),
                (
                    0.0_f64..1.0,
                    0.0_f64..1.0,
                    0.0_f64..1e6,
                    any::<u64>(),
                    any::<u64>(),
                ),
            )
                .prop_map(
                    move |(table, heavy, load, (theta, epsilon, mu, window, created))| {
                        let mut p = parts(partitions, table, vec![]);
                        p.bucket_hash = BucketHash::Murmur2 { seed };
                        p.epoch = epoch;
                        let buckets = p.table.len();
                        p.heavy = within_bucket_bound(heavy, p.bucket_hash, buckets)
                            .into_iter()
                            .map(|(key, (partition, weight))| HeavyKey {
                                key,
                                partition,
                                weight,
                                split: Vec::new(),
                            })
                            .collect();
                        p.predicted_load = load;
                        p.params = Params {
                            theta,
                            epsilon,
                            mu,
                            window_records: window,
                        };
                        p.created_at_ms = created;
                        p
                    },
                )
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Encode/decode is lossless for arbitrary binary keys (the empty key included) and floats.
    #[test]
    fn json_round_trip(p in arb_parts()) {
        let a = Assignment::new(p.clone()).expect("generated parts are valid");
        let bytes = a.to_json();
        let back = Assignment::from_json(&bytes).expect("own output decodes");
        prop_assert_eq!(&back, &a);
        prop_assert_eq!(back.to_json(), bytes);
        prop_assert_eq!(back.into_parts(), p);
    }

    /// Arbitrary bytes never panic the decoder.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        if let Ok(a) = Assignment::from_json(&bytes) {
            prop_assert!(a.partition_for(&bytes) < a.partitions());
        }
    }

    /// A valid document with one byte changed or removed decodes to a valid assignment or a typed
    /// error, never a panic.
    #[test]
    fn mutated_documents_never_panic(pos in any::<prop::sample::Index>(), byte in any::<u8>(), remove in any::<bool>()) {
        let mut bytes = SAMPLE_JSON.as_bytes().to_vec();
        let i = pos.index(bytes.len());
        if remove { bytes.remove(i); } else { bytes[i] = byte; }
        if let Ok(a) = Assignment::from_json(&bytes) {
            for key in [&b"hot"[..], b"", b"cold"] {
                prop_assert!(a.partition_for(key) < a.partitions());
            }
        }
    }
}

#[test]
fn objects_given_as_arrays_are_rejected() {
    // Serde's derive would accept structs as positional arrays; the document has one shape.
    let v = sample_value();
    let o = v.as_object().expect("object");
    let order = [
        "format",
        "version",
        "topic",
        "partitions",
        "epoch",
        "bucket_hash",
        "buckets",
        "table",
        "heavy",
        "params",
        "created_at_ms",
        "predicted_load",
    ];
    let positional = Value::Array(order.iter().map(|k| o[*k].clone()).collect());
    assert!(matches!(
        decode(&positional),
        Err(Error::MalformedAssignment { .. })
    ));
}
