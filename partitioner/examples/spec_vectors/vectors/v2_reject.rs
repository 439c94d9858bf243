//! `v2/reject.json`: version 2 documents a reader must reject, each with its label.

use super::*;

/// The valid version 2 document every `v2/reject.json` case edits: `BASE_DOCUMENT` with version
/// 2 and its heavy key split.
pub const V2_BASE_DOCUMENT: &str = concat!(
    r#"{"format":"dkg.assignment","version":2,"topic":"orders","partitions":3,"epoch":7,"#,
    r#""bucket_hash":{"function":"murmur2","seed":625341585},"buckets":4,"table":[0,1,2,0],"#,
    r#""heavy":[{"key_b64":"aG90","split":[{"partition":1,"weight":3},{"partition":2,"weight":1}],"weight":1200}],"#,
    r#""params":{"theta":0.01,"epsilon":0.005,"mu":4.0,"window_records":100000},"#,
    r#""created_at_ms":1700000000000,"predicted_load":[0.5,0.25,0.25]}"#
);

/// `V2_BASE_DOCUMENT` with `from` (exactly once) replaced by `to`.
fn edit_v2(from: &str, to: &str) -> Vec<u8> {
    assert_eq!(
        V2_BASE_DOCUMENT.matches(from).count(),
        1,
        "{from:?} must occur once in the version 2 base document"
    );
    V2_BASE_DOCUMENT.replacen(from, to, 1).into_bytes()
}

/// The base with `n` split keys (`split-<i>`, parts 1 and 2 of weight 2048 each) over 1,024 buckets.
fn many_split_keys(n: usize) -> Vec<u8> {
    let heavy = (0..n)
        .map(|i| {
            format!(
                r#"{{"key_b64":"{}","split":[{{"partition":1,"weight":2048}},{{"partition":2,"weight":2048}}],"weight":1000}}"#,
                b64(format!("split-{i}").as_bytes())
            )
        })
        .collect::<Vec<_>>()
        .join(",");
    let table = (0..1024)
        .map(|b| (b % 3).to_string())
        .collect::<Vec<_>>()
        .join(",");
    let doc = String::from_utf8(edit_v2(
        r#"[{"key_b64":"aG90","split":[{"partition":1,"weight":3},{"partition":2,"weight":1}],"weight":1200}]"#,
        &format!("[{heavy}]"),
    ))
    .expect("UTF-8");
    doc.replacen(
        r#""buckets":4,"table":[0,1,2,0]"#,
        &format!(r#""buckets":1024,"table":[{table}]"#),
        1,
    )
    .into_bytes()
}

/// The base's split list replaced by `parts` (JSON text of the array's elements).
fn with_split_parts(parts: &str) -> Vec<u8> {
    edit_v2(
        r#"[{"partition":1,"weight":3},{"partition":2,"weight":1}]"#,
        &format!("[{parts}]"),
    )
}

#[allow(clippy::too_many_lines)]
fn v2_reject_cases() -> Vec<Reject> {
    const M: &str = "malformed_json";
    const I: &str = "invalid";
    const R: &str = "out_of_range";
    const V: &str = "unsupported_version";
    const SPLIT: &str = r#""split":[{"partition":1,"weight":3},{"partition":2,"weight":1}]"#;
    let parts = |n: u32| -> String {
        (0..n)
            .map(|i| format!(r#"{{"partition":{i},"weight":1}}"#))
            .collect::<Vec<_>>()
            .join(",")
    };
    let wide = |n: u32, partitions: u32| -> Vec<u8> {
        let doc = String::from_utf8(with_split_parts(&parts(n))).expect("UTF-8");
        let load = vec!["0.0"; partitions as usize].join(",");
        doc.replace(
            r#""partitions":3"#,
            &format!(r#""partitions":{partitions}"#),
        )
        .replace("[0.5,0.25,0.25]", &format!("[{load}]"))
        .into_bytes()
    };
    let long_key = b64(&vec![b'k'; MAX_KEY_BYTES + 1]);
    // The base with its table [0,1,2,0] replaced by `members`.
    let compact = |members: &str| edit_v2(r#""table":[0,1,2,0]"#, members);
    vec![
        reject(
            "both_partition_and_split",
            M,
            "A heavy entry with partition and split: exactly one is allowed.",
            edit_v2(SPLIT, &format!(r#""partition":1,{SPLIT}"#)),
        ),
        reject(
            "neither_partition_nor_split",
            M,
            "A heavy entry with neither partition nor split.",
            edit_v2(&format!("{SPLIT},"), ""),
        ),
        reject(
            "split_null",
            M,
            "split is null (null is no value: not the same as absent).",
            edit_v2(SPLIT, r#""partition":1,"split":null"#),
        ),
        reject(
            "partition_null_with_split",
            M,
            "partition null next to a split.",
            edit_v2(SPLIT, &format!(r#""partition":null,{SPLIT}"#)),
        ),
        reject(
            "split_object",
            M,
            "split is an object, not an array.",
            edit_v2(SPLIT, r#""split":{"partition":1,"weight":3}"#),
        ),
        reject(
            "split_part_array",
            M,
            "A split part written as an array [partition, weight].",
            with_split_parts(r#"[1,3],{"partition":2,"weight":1}"#),
        ),
        reject(
            "split_part_unknown_member",
            M,
            "A split part with an unknown member.",
            with_split_parts(
                r#"{"partition":1,"weight":3,"share":0.75},{"partition":2,"weight":1}"#,
            ),
        ),
        reject(
            "split_part_missing_weight",
            M,
            "A split part without weight.",
            with_split_parts(r#"{"partition":1},{"partition":2,"weight":1}"#),
        ),
        reject(
            "split_part_duplicate_member",
            M,
            "A split part with weight twice.",
            with_split_parts(r#"{"partition":1,"weight":3,"weight":3},{"partition":2,"weight":1}"#),
        ),
        reject(
            "split_part_weight_overflow",
            M,
            "A part weight of 2^32 (weights are u32).",
            with_split_parts(r#"{"partition":1,"weight":4294967296},{"partition":2,"weight":1}"#),
        ),
        reject(
            "split_part_weight_negative",
            M,
            "A part weight of -1.",
            with_split_parts(r#"{"partition":1,"weight":-1},{"partition":2,"weight":1}"#),
        ),
        reject(
            "split_in_version_1",
            M,
            "A split heavy entry in a version 1 document: split is an unknown member there.",
            edit_v2(r#""version":2"#, r#""version":1"#),
        ),
        reject(
            "unknown_member_v2",
            M,
            "Version 2 is as strict as version 1: an unknown top-level member.",
            edit_v2(r#""epoch":7,"#, r#""epoch":7,"salt":1,"#),
        ),
        reject(
            "split_no_parts",
            I,
            "An empty split list.",
            with_split_parts(""),
        ),
        reject(
            "split_one_part",
            I,
            "A split key with one part (2 to 64).",
            with_split_parts(r#"{"partition":1,"weight":3}"#),
        ),
        reject(
            "split_65_parts",
            I,
            "A split key with 65 parts over 65 partitions (2 to 64).",
            wide(65, 65),
        ),
        reject(
            "split_duplicate_partition",
            I,
            "Two parts on partition 1.",
            with_split_parts(r#"{"partition":1,"weight":3},{"partition":1,"weight":1}"#),
        ),
        reject(
            "split_weight_zero",
            I,
            "A part of weight 0 (weights are at least 1).",
            with_split_parts(r#"{"partition":1,"weight":0},{"partition":2,"weight":1}"#),
        ),
        reject(
            "split_weight_sum_over_limit",
            I,
            "Weights 4096 and 1: the sum 4097 is over 4096 (a limit inside the document: invalid in version 2).",
            with_split_parts(r#"{"partition":1,"weight":4096},{"partition":2,"weight":1}"#),
        ),
        reject(
            "split_weight_total_over_limit",
            I,
            "257 split keys of weights 2048 + 2048: 1,052,672 in all, over the document's 1,048,576 (2^20).",
            many_split_keys(257),
        ),
        reject(
            "split_part_out_of_range",
            R,
            "A part on partition 3 with 3 partitions.",
            with_split_parts(r#"{"partition":1,"weight":3},{"partition":3,"weight":1}"#),
        ),
        reject(
            "split_first_part_out_of_range",
            R,
            "The first part on partition 3.",
            with_split_parts(r#"{"partition":3,"weight":3},{"partition":2,"weight":1}"#),
        ),
        reject(
            "split_out_of_range_before_predicted_load",
            R,
            "A part out of range and predicted_load too short: the part is checked first (step 14 before 16).",
            {
                let d = String::from_utf8(with_split_parts(
                    r#"{"partition":1,"weight":3},{"partition":3,"weight":1}"#,
                ))
                .expect("UTF-8");
                d.replace("[0.5,0.25,0.25]", "[0.5,0.5]").into_bytes()
            },
        ),
        reject(
            "split_count_before_out_of_range",
            I,
            "One part, out of range: the part count is checked before the parts.",
            with_split_parts(r#"{"partition":3,"weight":3}"#),
        ),
        reject(
            "split_duplicate_before_out_of_range",
            I,
            "Parts 1, 1, 3 (3 out of range): parts are checked in order, the duplicate comes first.",
            with_split_parts(
                r#"{"partition":1,"weight":3},{"partition":1,"weight":1},{"partition":3,"weight":1}"#,
            ),
        ),
        reject(
            "partitions_over_max_v2",
            I,
            "partitions 1000001 in a version 2 document: invalid (version 1 reports oversize, gap G2).",
            edit_v2(r#""partitions":3"#, r#""partitions":1000001"#),
        ),
        reject(
            "epoch_2_pow_53_v2",
            R,
            "epoch 2^53 in a version 2 document: out_of_range, as in version 1.",
            edit_v2(r#""epoch":7"#, r#""epoch":9007199254740992"#),
        ),
        reject(
            "epoch_out_of_range_after_partitions_over_max_v2",
            I,
            "partitions 1000001 and epoch 2^53 in a version 2 document: the partition limit (step 9, invalid) first.",
            edit_v2(
                r#""partitions":3,"epoch":7"#,
                r#""partitions":1000001,"epoch":9007199254740992"#,
            ),
        ),
        reject(
            "heavy_key_too_long_v2",
            I,
            "A heavy key of 65537 bytes in a version 2 document: invalid (gap G2).",
            edit_v2(r#""key_b64":"aG90""#, &format!(r#""key_b64":"{long_key}""#)),
        ),
        reject(
            "version_3",
            V,
            "Version 3: not read by version 2 readers.",
            edit_v2(r#""version":2"#, r#""version":3"#),
        ),
        reject(
            "array_v2",
            M,
            "[\"dkg.assignment\",2]: the document, also in the pre-read, must be an object.",
            br#"["dkg.assignment",2]"#.to_vec(),
        ),
        reject(
            "compact_width_not_smallest",
            I,
            "table_width 2 for 3 partitions (writers and readers: the fewest bytes that hold partitions - 1, here 1).",
            compact(r#""table_b64":"AAABAAIAAAA=","table_width":2"#),
        ),
        reject(
            "compact_width_3",
            I,
            "table_width 3.",
            compact(r#""table_b64":"AAAAAQAAAgAAAAAA","table_width":3"#),
        ),
        reject(
            "compact_width_0",
            I,
            "table_width 0.",
            compact(r#""table_b64":"","table_width":0"#),
        ),
        reject(
            "compact_too_short",
            I,
            "table_b64 of 3 bytes for 4 buckets of width 1.",
            compact(r#""table_b64":"AAEC","table_width":1"#),
        ),
        reject(
            "compact_too_long",
            I,
            "table_b64 of 5 bytes for 4 buckets of width 1.",
            compact(r#""table_b64":"AAECAAA=","table_width":1"#),
        ),
        reject(
            "compact_not_canonical_base64",
            I,
            "table_b64 without its padding.",
            compact(r#""table_b64":"AAECAA","table_width":1"#),
        ),
        reject(
            "compact_entry_out_of_range",
            R,
            "A compact entry 3 with 3 partitions.",
            compact(r#""table_b64":"AAEDAA==","table_width":1"#),
        ),
        reject(
            "compact_and_table",
            M,
            "Both table and table_b64.",
            compact(r#""table":[0,1,2,0],"table_b64":"AAECAA==","table_width":1"#),
        ),
        reject(
            "compact_width_without_b64",
            M,
            "table_width without table_b64 (and no table).",
            compact(r#""table_width":1"#),
        ),
        reject(
            "compact_b64_without_width",
            M,
            "table_b64 without table_width.",
            compact(r#""table_b64":"AAECAA==""#),
        ),
        reject(
            "compact_width_null",
            M,
            "table_width null.",
            compact(r#""table_b64":"AAECAA==","table_width":null"#),
        ),
        reject(
            "compact_in_version_1",
            M,
            "A compact table in a version 1 document: unknown members there.",
            {
                let d = String::from_utf8(compact(r#""table_b64":"AAECAA==","table_width":1"#))
                    .expect("UTF-8");
                d.replacen(r#""version":2"#, r#""version":1"#, 1)
                    .replacen(
                        r#""split":[{"partition":1,"weight":3},{"partition":2,"weight":1}]"#,
                        r#""partition":1"#,
                        1,
                    )
                    .into_bytes()
            },
        ),
    ]
}

pub(super) fn v2_reject_file() -> String {
    let base = Assignment::from_json(V2_BASE_DOCUMENT.as_bytes())
        .expect("the version 2 base document is valid");
    assert_eq!(
        base.to_json(),
        V2_BASE_DOCUMENT.as_bytes(),
        "the version 2 base document is canonical"
    );
    let cases = checked_cases(v2_reject_cases(), "v2 reject case");
    cases_file(&[("base_document_json", json(V2_BASE_DOCUMENT))], &cases)
}
