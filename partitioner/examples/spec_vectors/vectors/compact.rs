//! `v2/compact.json`: documents with the compact table (`table_b64`) and their JSON-table twins.

use super::*;

#[derive(Serialize)]
struct CompactCase {
    name: &'static str,
    description: &'static str,
    document_json: String,
    twin_document_json: Option<String>,
    topic_partitions: u32,
    keys: Vec<LookupKey>,
}

/// The compact table members of spec 4.6 for `table`, transcribed here (not the crate's
/// encoder): each entry little-endian in the fewest of 1, 2, 4 bytes that hold `partitions - 1`.
fn compact_members(table: &[u32], partitions: u32) -> String {
    let width = match partitions - 1 {
        0..=0xff => 1,
        0x100..=0xffff => 2,
        _ => 4,
    };
    let bytes: Vec<u8> = table
        .iter()
        .flat_map(|p| p.to_le_bytes().into_iter().take(width))
        .collect();
    format!(r#""table_b64":"{}","table_width":{width}"#, b64(&bytes))
}

/// `a`'s document (version 1, JSON table) with its table written compactly, as version 2.
fn compact_twin_of(a: &Assignment) -> String {
    let text = doc_json(a);
    assert!(
        text.contains(r#""version":1"#),
        "the twin is a version 1 document"
    );
    let table = format!(r#""table":{}"#, json(a.table()));
    text.replacen(r#""version":1"#, r#""version":2"#, 1)
        .replacen(&table, &compact_members(a.table(), a.partitions()), 1)
}

fn compact_case(
    name: &'static str,
    description: &'static str,
    document_json: String,
    twin_document_json: Option<String>,
    keys: &[Vec<u8>],
) -> CompactCase {
    let a = Assignment::from_json(document_json.as_bytes()).expect("compact documents are valid");
    if let Some(twin) = &twin_document_json {
        let twin = Assignment::from_json(twin.as_bytes()).expect("twins are valid");
        assert!(twin == a, "{name}: the twin decodes to the same assignment");
    }
    let partitions = a.partitions();
    let keys = keys
        .iter()
        .map(|key| {
            let (partition, route) = place(&a, partitions, key);
            LookupKey {
                key_b64: b64(key),
                partition,
                route,
            }
        })
        .collect();
    CompactCase {
        name,
        description,
        document_json,
        twin_document_json,
        topic_partitions: partitions,
        keys,
    }
}

pub(super) fn compact_file() -> String {
    let mut cases = Vec::new();
    let heavy = vec![b"hot".to_vec(), b"user-42".to_vec()];
    let mut keys = with_misses(&heavy);
    keys.extend(text_keys("user-", 0..30));

    let a = document(3, 8, DEFAULT_BUCKET_SEED, &heavy, 21);
    cases.push(compact_case(
        "width_1",
        "3 partitions, 8 buckets: table_width 1; twin_document_json is the same document with a \
         JSON table (version 1). A reader MUST accept a compact table of any size (writers use it \
         only above 256 KiB of JSON table).",
        compact_twin_of(&a),
        Some(doc_json(&a)),
        &keys,
    ));
    let a = document(300, 1_200, DEFAULT_BUCKET_SEED, &heavy, 22);
    cases.push(compact_case(
        "width_2",
        "300 partitions, 1200 buckets: table_width 2 (entries up to 299, little-endian).",
        compact_twin_of(&a),
        Some(doc_json(&a)),
        &keys,
    ));
    let a = document(65_537, 64, DEFAULT_BUCKET_SEED, &heavy, 23);
    let compact = compact_twin_of(&a);
    // predicted_load's 65537 shares as the integer 0 (legal for a number) keep the file small.
    let zero_load = format!("[{}]", vec!["0"; 65_537].join(","));
    let at = compact
        .find(r#""predicted_load":"#)
        .expect("predicted_load")
        + 17;
    let compact = format!("{}{zero_load}}}", &compact[..at]);
    cases.push(compact_case(
        "width_4",
        "65537 partitions (65536 is the largest partition number): table_width 4; predicted_load \
         written as 65537 integers 0. No twin stored.",
        compact,
        None,
        &keys,
    ));
    let partitions = 200;
    let mut rng = SplitMix64(24);
    let table: Vec<u32> = (0..80_000)
        .map(|_| rng.below(partitions.into()) as u32)
        .collect();
    let writer = assignment(AssignmentParts {
        table,
        ..document(partitions, 1, DEFAULT_BUCKET_SEED, &heavy, 24).into_parts()
    });
    let text = String::from_utf8(writer.to_json_compact()).expect("documents are UTF-8");
    assert!(
        text.contains(r#""version":2"#) && text.contains(r#""table_width":1"#),
        "the version 2 writer makes a table of 80000 entries compact"
    );
    cases.push(compact_case(
        "writer_output",
        "The reference writer's document (with version 2 features on) for 200 partitions and \
         80000 buckets: its JSON table would be over 256 KiB, so it is written as table_b64 \
         (width 1) and the document is version 2. No twin stored (decode table_b64 to get it).",
        text,
        None,
        &keys,
    ));
    cases_file(&[], &cases)
}
