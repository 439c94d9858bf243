//! `reject.json` and `v2/reject.json`: documents a reader must reject, each with the label
//! `docs/spec.md` 4.4 gives it (version 1, then version 2).

use super::*;

#[derive(Serialize)]
struct RejectCase {
    name: String,
    description: String,
    document_b64: Option<String>,
    reason: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    generate: Option<Generate>,
}

#[derive(Serialize)]
struct Generate {
    valid_document_padded_to_bytes: usize,
}

/// The valid document every reject case edits.
pub const BASE_DOCUMENT: &str = concat!(
    r#"{"format":"dkg.assignment","version":1,"topic":"orders","partitions":3,"epoch":7,"#,
    r#""bucket_hash":{"function":"murmur2","seed":625341585},"buckets":4,"table":[0,1,2,0],"#,
    r#""heavy":[{"key_b64":"aG90","partition":1,"weight":1200}],"#,
    r#""params":{"theta":0.01,"epsilon":0.005,"mu":4.0,"window_records":100000},"#,
    r#""created_at_ms":1700000000000,"predicted_load":[0.5,0.25,0.25]}"#
);

/// `BASE_DOCUMENT` with `from` (which must occur exactly once) replaced by `to`.
fn edit(from: &str, to: &str) -> Vec<u8> {
    assert_eq!(
        BASE_DOCUMENT.matches(from).count(),
        1,
        "{from:?} must occur once in the base document"
    );
    BASE_DOCUMENT.replacen(from, to, 1).into_bytes()
}

/// `BASE_DOCUMENT` without the member `"name":value` (value as written in the base), with its
/// comma.
fn without(member: &str) -> Vec<u8> {
    let text = BASE_DOCUMENT;
    if text.contains(&format!("{member},")) {
        edit(&format!("{member},"), "")
    } else {
        edit(&format!(",{member}"), "")
    }
}

/// The document a reject case is applied as, under [`REJECT_RECORD_KEY`], to an empty book:
/// the rejection label, or a panic if the implementation accepts it.
pub fn reject_label(document: &[u8]) -> &'static str {
    match AssignmentBook::new().apply(Some(REJECT_RECORD_KEY.as_bytes()), Some(document)) {
        ControlUpdate::Rejected { reason, .. } => reason.as_str(),
        other => panic!(
            "document {:?} was not rejected: {other:?}",
            String::from_utf8_lossy(&document[..document.len().min(200)])
        ),
    }
}

/// A valid document followed by spaces up to `len` bytes.
pub fn padded_document(len: usize) -> Vec<u8> {
    let mut bytes = BASE_DOCUMENT.as_bytes().to_vec();
    bytes.resize(len, b' ');
    bytes
}

struct Reject {
    name: &'static str,
    description: &'static str,
    document: Vec<u8>,
    reason: &'static str,
}

fn reject(
    name: &'static str,
    reason: &'static str,
    description: &'static str,
    document: Vec<u8>,
) -> Reject {
    Reject {
        name,
        description,
        document,
        reason,
    }
}

fn heavy_with_key(key_b64: &str) -> Vec<u8> {
    edit(r#""key_b64":"aG90""#, &format!(r#""key_b64":"{key_b64}""#))
}

fn with_topic(topic: &str) -> Vec<u8> {
    edit(
        r#""topic":"orders""#,
        &format!(r#""topic":{}"#, json(topic)),
    )
}

#[allow(clippy::too_many_lines)]
fn reject_cases() -> Vec<Reject> {
    const M: &str = "malformed_json";
    const V: &str = "unsupported_version";
    const I: &str = "invalid";
    const R: &str = "out_of_range";
    const O: &str = "oversize";
    let base = BASE_DOCUMENT.as_bytes();
    let cat = |a: &[u8], b: &[u8]| [a, b].concat();
    let long_key = b64(&vec![b'k'; MAX_KEY_BYTES + 1]);
    let long_topic = "t".repeat(MAX_TOPIC_LEN + 1);
    vec![
        // Not a JSON object of the right shape.
        reject("not_json", M, "Not JSON.", b"{not json".to_vec()),
        reject("empty_value", M, "Zero bytes (a tombstone is a null value, not an empty one).", Vec::new()),
        reject("whitespace_only", M, "Only whitespace.", b" \n\t ".to_vec()),
        reject("json_null", M, "The JSON literal null.", b"null".to_vec()),
        reject("json_string", M, "A JSON string.", br#""dkg.assignment""#.to_vec()),
        reject("json_number", M, "A JSON number.", b"1".to_vec()),
        reject("array_v1", M, "An array [format, version] of version 1: the document must be an object.", br#"["dkg.assignment",1]"#.to_vec()),
        reject("truncated", M, "The document without its final '}'.", base[..base.len() - 1].to_vec()),
        reject("trailing_garbage", M, "A valid document followed by a non-whitespace byte.", cat(base, b"x")),
        reject("two_documents", M, "Two valid documents back to back.", cat(base, base)),
        reject("trailing_comma", M, "A comma after the last member.", edit("0.25]}", "0.25],}")),
        reject("comment", M, "A /* comment */ (not JSON).", cat(b"/* v1 */", base)),
        reject("utf8_bom", M, "A UTF-8 byte order mark before the document.", cat(b"\xef\xbb\xbf", base)),
        reject("non_utf8_in_string", M, "A byte 0xff inside the topic string (not UTF-8).", {
            let mut d = base.to_vec();
            let at = BASE_DOCUMENT.find("orders").expect("topic") + 3;
            d[at] = 0xff;
            d
        }),
        reject("non_utf8_outside_string", M, "A byte 0xff between members.", {
            let at = BASE_DOCUMENT.find(r#","epoch""#).expect("epoch");
            [&base[..at], b"\xff", &base[at..]].concat()
        }),
        reject("single_quotes", M, "Single-quoted strings.", edit(r#""topic":"orders""#, "'topic':'orders'")),
        // format and version.
        reject("format_other", M, "format names another document type.", edit(r#""format":"dkg.assignment""#, r#""format":"dkg.plan""#)),
        reject("format_case", M, "format compared byte for byte: \"DKG.assignment\".", edit(r#""format":"dkg.assignment""#, r#""format":"DKG.assignment""#)),
        reject("format_missing", M, "No format member.", without(r#""format":"dkg.assignment""#)),
        reject("format_number", M, "format is a number.", edit(r#""format":"dkg.assignment""#, r#""format":1"#)),
        reject("format_null", M, "format is null.", edit(r#""format":"dkg.assignment""#, r#""format":null"#)),
        reject("format_other_version_2", M, "Wrong format and version 2: format is checked before version.", edit(r#""format":"dkg.assignment","version":1"#, r#""format":"dkg.plan","version":2"#)),
        reject("version_3", V, "version 3 (a newer format).", edit(r#""version":1"#, r#""version":3"#)),
        reject("version_0", V, "version 0.", edit(r#""version":1"#, r#""version":0"#)),
        reject("version_max_u64", V, "version 18446744073709551615.", edit(r#""version":1"#, r#""version":18446744073709551615"#)),
        reject("version_3_other_shape", V, "version 3 with members version 1 does not know and without table: the version is read first, so the reason is the version, not the shape.", br#"{"format":"dkg.assignment","version":3,"topic":"orders","table_u16_b64":"AAABAA==","generation":"x"}"#.to_vec()),
        reject("version_3_type_error", V, "version 3 and a member of the wrong type (partitions a string): still the version.", edit(r#""version":1,"topic":"orders","partitions":3"#, r#""version":3,"topic":"orders","partitions":"3""#)),
        reject("version_3_members_reordered", V, "version 3 written before format.", br#"{"version":3,"format":"dkg.assignment"}"#.to_vec()),
        reject("array_v2", M, "An array [\"dkg.assignment\", 2]: the document must be an object, also in the version pre-read (gap G1, fixed by readers of version 2).", br#"["dkg.assignment",2]"#.to_vec()),
        reject("array_v3", M, "An array [\"dkg.assignment\", 3]: the pre-read requires an object (gap G1 fixed), so the reason is not the version.", br#"["dkg.assignment",3]"#.to_vec()),
        reject("version_3_non_utf8_string", V, "version 3 and a byte 0xff inside the topic string: the pre-read skips members other than format and version without checking their strings for UTF-8 (known gap), so the reason is the version.", {
            let mut d = edit(r#""version":1"#, r#""version":3"#);
            let at = BASE_DOCUMENT.find("orders").expect("topic") + 3;
            d[at] = 0xff;
            d
        }),
        reject("version_3_lone_surrogate", V, "version 3 and a lone surrogate escape in the topic: not checked in skipped members (known gap).", edit(r#""version":1,"topic":"orders""#, r#""version":3,"topic":"\ud800""#)),
        reject("version_3_control_character", M, "version 3 and an unescaped control character in the topic: a JSON syntax error, which the pre-read does detect.", edit(r#""version":1,"topic":"orders""#, "\"version\":3,\"topic\":\"ord\u{1}ers\"")),
        reject("version_3_number_overflow", V, "version 3 and partitions 1e400: numbers of skipped members are not range-checked (known gap).", edit(r#""version":1,"topic":"orders","partitions":3"#, r#""version":3,"topic":"orders","partitions":1e400"#)),
        reject("version_3_invalid_escape", M, "version 3 and an invalid escape \\q in the topic: a syntax error.", edit(r#""version":1,"topic":"orders""#, r#""version":3,"topic":"ord\qers""#)),
        reject("version_3_short_unicode_escape", M, "version 3 and a truncated \\u escape in the topic: a syntax error.", edit(r#""version":1,"topic":"orders""#, r#""version":3,"topic":"ord\u12""#)),
        reject("version_3_leading_zero", M, "version 3 and partitions 03 (a leading zero): a syntax error.", edit(r#""version":1,"topic":"orders","partitions":3"#, r#""version":3,"topic":"orders","partitions":03"#)),
        reject("version_3_duplicate_member", V, "version 3 and topic twice: the pre-read allows repeated members other than format and version (known gap).", edit(r#""version":1,"topic":"orders""#, r#""version":3,"topic":"orders","topic":"orders""#)),
        reject("version_3_truncated", M, "version 3 but not well-formed JSON (truncated): syntax comes first.", {
            let d = edit(r#""version":1"#, r#""version":3"#);
            d[..d.len() - 1].to_vec()
        }),
        reject("version_string", M, "version is the string \"1\".", edit(r#""version":1"#, r#""version":"1""#)),
        reject("version_float", M, "version is 1.0 (integers only).", edit(r#""version":1"#, r#""version":1.0"#)),
        reject("version_exponent", M, "version is 1e0.", edit(r#""version":1"#, r#""version":1e0"#)),
        reject("version_negative", M, "version is -1.", edit(r#""version":1"#, r#""version":-1"#)),
        reject("version_overflow", M, "version is 2^64 (does not fit u64).", edit(r#""version":1"#, r#""version":18446744073709551616"#)),
        reject("version_missing", M, "No version member.", without(r#""version":1"#)),
        reject("version_null", M, "version is null.", edit(r#""version":1"#, r#""version":null"#)),
        reject("duplicate_version", M, "version twice (same value).", edit(r#""version":1"#, r#""version":1,"version":1"#)),
        reject("duplicate_member", M, "topic twice (same value).", edit(r#""topic":"orders""#, r#""topic":"orders","topic":"orders""#)),
        reject("duplicate_member_bucket_hash", M, "bucket_hash.seed twice.", edit(r#""seed":625341585"#, r#""seed":625341585,"seed":625341585"#)),
        reject("duplicate_member_heavy", M, "A heavy entry with partition twice.", edit(r#""partition":1"#, r#""partition":1,"partition":1"#)),
        reject("duplicate_member_params", M, "params.mu twice.", edit(r#""mu":4.0"#, r#""mu":4.0,"mu":4.0"#)),
        reject("array_v2_three_elements", M, "An array [\"dkg.assignment\", 2, 0]: not an object.", br#"["dkg.assignment",2,0]"#.to_vec()),
        reject("string_lone_surrogate", M, "A lone surrogate escape \\ud800 in the topic.", edit(r#""topic":"orders""#, r#""topic":"\ud800""#)),
        reject("string_control_character", M, "An unescaped control character (0x01) inside the topic string.", edit(r#""topic":"orders""#, "\"topic\":\"ord\u{1}ers\"")),
        reject("partitions_negative_zero", M, "partitions -0.", edit(r#""partitions":3"#, r#""partitions":-0"#)),
        // Unknown and missing members.
        reject("unknown_member", M, "An unknown top-level member.", edit(r#""epoch":7"#, r#""epoch":7,"salt":1"#)),
        reject("unknown_member_null", M, "An unknown top-level member with value null.", edit(r#""epoch":7"#, r#""epoch":7,"comment":null"#)),
        reject("unknown_member_bucket_hash", M, "An unknown member in bucket_hash.", edit(r#""seed":625341585}"#, r#""seed":625341585,"salt":1}"#)),
        reject("unknown_member_heavy", M, "An unknown member in a heavy entry.", edit(r#""weight":1200}"#, r#""weight":1200,"share":0.5}"#)),
        reject("unknown_member_params", M, "An unknown member in params.", edit(r#""window_records":100000}"#, r#""window_records":100000,"alpha":1}"#)),
        reject("missing_topic", M, "No topic.", without(r#""topic":"orders""#)),
        reject("missing_partitions", M, "No partitions.", without(r#""partitions":3"#)),
        reject("missing_epoch", M, "No epoch.", without(r#""epoch":7"#)),
        reject("missing_bucket_hash", M, "No bucket_hash.", without(r#""bucket_hash":{"function":"murmur2","seed":625341585}"#)),
        reject("missing_buckets", M, "No buckets.", without(r#""buckets":4"#)),
        reject("missing_table", M, "No table.", without(r#""table":[0,1,2,0]"#)),
        reject("missing_heavy", M, "No heavy (an empty list must be written as []).", without(r#""heavy":[{"key_b64":"aG90","partition":1,"weight":1200}]"#)),
        reject("missing_params", M, "No params.", without(r#""params":{"theta":0.01,"epsilon":0.005,"mu":4.0,"window_records":100000}"#)),
        reject("missing_created_at_ms", M, "No created_at_ms.", without(r#""created_at_ms":1700000000000"#)),
        reject("missing_predicted_load", M, "No predicted_load.", without(r#""predicted_load":[0.5,0.25,0.25]"#)),
        reject("missing_heavy_key_b64", M, "A heavy entry without key_b64.", edit(r#""key_b64":"aG90","#, "")),
        reject("missing_heavy_partition", M, "A heavy entry without partition.", edit(r#""partition":1,"#, "")),
        reject("missing_heavy_weight", M, "A heavy entry without weight.", edit(r#","weight":1200"#, "")),
        reject("missing_params_theta", M, "params without theta.", edit(r#""theta":0.01,"#, "")),
        reject("missing_params_window_records", M, "params without window_records.", edit(r#","window_records":100000"#, "")),
        reject("missing_bucket_hash_seed", M, "bucket_hash without seed.", edit(r#","seed":625341585"#, "")),
        reject("missing_bucket_hash_function", M, "bucket_hash without function.", edit(r#""function":"murmur2","#, "")),
        // Wrong types and numbers.
        reject("bucket_hash_unknown_function", M, "bucket_hash.function \"xxhash\".", edit(r#""function":"murmur2""#, r#""function":"xxhash""#)),
        reject("bucket_hash_function_case", M, "bucket_hash.function \"Murmur2\" (case matters).", edit(r#""function":"murmur2""#, r#""function":"Murmur2""#)),
        reject("bucket_hash_seed_negative", M, "bucket_hash.seed -1.", edit(r#""seed":625341585"#, r#""seed":-1"#)),
        reject("bucket_hash_seed_overflow", M, "bucket_hash.seed 2^32.", edit(r#""seed":625341585"#, r#""seed":4294967296"#)),
        reject("bucket_hash_seed_float", M, "bucket_hash.seed 7.0.", edit(r#""seed":625341585"#, r#""seed":7.0"#)),
        reject("bucket_hash_seed_string", M, "bucket_hash.seed \"7\".", edit(r#""seed":625341585"#, r#""seed":"7""#)),
        reject("bucket_hash_array", M, "bucket_hash as an array.", edit(r#"{"function":"murmur2","seed":625341585}"#, r#"["murmur2",625341585]"#)),
        reject("bucket_hash_string", M, "bucket_hash as a string.", edit(r#"{"function":"murmur2","seed":625341585}"#, r#""murmur2""#)),
        reject("topic_number", M, "topic is a number.", edit(r#""topic":"orders""#, r#""topic":7"#)),
        reject("topic_null", M, "topic is null.", edit(r#""topic":"orders""#, r#""topic":null"#)),
        reject("partitions_string", M, "partitions \"3\".", edit(r#""partitions":3"#, r#""partitions":"3""#)),
        reject("partitions_float", M, "partitions 3.0.", edit(r#""partitions":3"#, r#""partitions":3.0"#)),
        reject("partitions_exponent", M, "partitions 3e0.", edit(r#""partitions":3"#, r#""partitions":3e0"#)),
        reject("partitions_negative", M, "partitions -3.", edit(r#""partitions":3"#, r#""partitions":-3"#)),
        reject("partitions_overflow", M, "partitions 2^32 (does not fit u32).", edit(r#""partitions":3"#, r#""partitions":4294967296"#)),
        reject("partitions_null", M, "partitions null.", edit(r#""partitions":3"#, r#""partitions":null"#)),
        reject("epoch_negative", M, "epoch -7.", edit(r#""epoch":7"#, r#""epoch":-7"#)),
        reject("epoch_float", M, "epoch 7.5.", edit(r#""epoch":7"#, r#""epoch":7.5"#)),
        reject("epoch_overflow", M, "epoch 2^64.", edit(r#""epoch":7"#, r#""epoch":18446744073709551616"#)),
        reject("epoch_string", M, "epoch \"7\".", edit(r#""epoch":7"#, r#""epoch":"7""#)),
        // The epoch's range (step 11b): after the shape and the invalid/oversize steps 5-11, before the table entries.
        reject("epoch_2_pow_53", R, "epoch 2^53 = 9007199254740992 (the largest is 2^53 - 1).", edit(r#""epoch":7"#, r#""epoch":9007199254740992"#)),
        reject("epoch_max_u64", R, "epoch 18446744073709551615 (a u64, but above 2^53 - 1).", edit(r#""epoch":7"#, r#""epoch":18446744073709551615"#)),
        reject("epoch_out_of_range_after_invalid_topic", I, "An illegal topic and epoch 2^53: the topic (step 7) is checked first.", edit(r#""topic":"orders","partitions":3,"epoch":7"#, r#""topic":"..","partitions":3,"epoch":9007199254740992"#)),
        reject("epoch_out_of_range_after_buckets", I, "buckets 5 with a table of 4 and epoch 2^53: the table length (step 5) is checked first.", edit(r#""epoch":7,"bucket_hash":{"function":"murmur2","seed":625341585},"buckets":4"#, r#""epoch":9007199254740992,"bucket_hash":{"function":"murmur2","seed":625341585},"buckets":5"#)),
        reject("epoch_out_of_range_after_partitions_over_max", O, "partitions 1000001 and epoch 2^53: the partition limit (step 9, oversize in version 1) is checked first.", edit(r#""partitions":3,"epoch":7"#, r#""partitions":1000001,"epoch":9007199254740992"#)),
        reject("epoch_out_of_range_before_predicted_load", R, "epoch 2^53 and a predicted_load of 2 entries: the epoch (step 11b) is checked before predicted_load (step 16).", edit(r#""epoch":7,"bucket_hash":{"function":"murmur2","seed":625341585},"buckets":4,"table":[0,1,2,0],"heavy":[{"key_b64":"aG90","partition":1,"weight":1200}],"params":{"theta":0.01,"epsilon":0.005,"mu":4.0,"window_records":100000},"created_at_ms":1700000000000,"predicted_load":[0.5,0.25,0.25]"#, r#""epoch":9007199254740992,"bucket_hash":{"function":"murmur2","seed":625341585},"buckets":4,"table":[0,1,2,0],"heavy":[{"key_b64":"aG90","partition":1,"weight":1200}],"params":{"theta":0.01,"epsilon":0.005,"mu":4.0,"window_records":100000},"created_at_ms":1700000000000,"predicted_load":[0.5,0.5]"#)),
        reject("buckets_negative", M, "buckets -4.", edit(r#""buckets":4"#, r#""buckets":-4"#)),
        reject("table_object", M, "table as an object.", edit(r#""table":[0,1,2,0]"#, r#""table":{"0":0}"#)),
        reject("table_entry_negative", M, "A table entry -1.", edit("[0,1,2,0]", "[0,-1,2,0]")),
        reject("table_entry_float", M, "A table entry 1.0.", edit("[0,1,2,0]", "[0,1.0,2,0]")),
        reject("table_entry_string", M, "A table entry \"1\".", edit("[0,1,2,0]", r#"[0,"1",2,0]"#)),
        reject("table_entry_null", M, "A table entry null.", edit("[0,1,2,0]", "[0,null,2,0]")),
        reject("table_entry_overflow", M, "A table entry 2^32.", edit("[0,1,2,0]", "[0,4294967296,2,0]")),
        reject("heavy_object", M, "heavy as an object.", edit(r#"[{"key_b64":"aG90","partition":1,"weight":1200}]"#, "{}")),
        reject("heavy_null", M, "heavy null.", edit(r#"[{"key_b64":"aG90","partition":1,"weight":1200}]"#, "null")),
        reject("heavy_entry_array", M, "A heavy entry as an array [key_b64, partition, weight].", edit(r#"{"key_b64":"aG90","partition":1,"weight":1200}"#, r#"["aG90",1,1200]"#)),
        reject("heavy_entry_null", M, "A heavy entry null.", edit(r#"{"key_b64":"aG90","partition":1,"weight":1200}"#, "null")),
        reject("heavy_key_b64_number", M, "key_b64 a number.", edit(r#""key_b64":"aG90""#, r#""key_b64":7"#)),
        reject("heavy_key_b64_null", M, "key_b64 null.", edit(r#""key_b64":"aG90""#, r#""key_b64":null"#)),
        reject("heavy_partition_negative", M, "A heavy partition -1.", edit(r#""partition":1"#, r#""partition":-1"#)),
        reject("heavy_weight_negative", M, "A heavy weight -1.", edit(r#""weight":1200"#, r#""weight":-1"#)),
        reject("heavy_weight_float", M, "A heavy weight 1200.0.", edit(r#""weight":1200"#, r#""weight":1200.0"#)),
        reject("params_array", M, "params as an array.", edit(r#"{"theta":0.01,"epsilon":0.005,"mu":4.0,"window_records":100000}"#, "[0.01,0.005,4.0,100000]")),
        reject("params_theta_string", M, "params.theta \"0.01\".", edit(r#""theta":0.01"#, r#""theta":"0.01""#)),
        reject("params_theta_overflow", M, "params.theta 1e400 (beyond f64).", edit(r#""theta":0.01"#, r#""theta":1e400"#)),
        reject("params_window_records_negative", M, "params.window_records -1.", edit(r#""window_records":100000"#, r#""window_records":-1"#)),
        reject("params_window_records_float", M, "params.window_records 1.5.", edit(r#""window_records":100000"#, r#""window_records":1.5"#)),
        reject("created_at_ms_negative", M, "created_at_ms -1.", edit(r#""created_at_ms":1700000000000"#, r#""created_at_ms":-1"#)),
        reject("created_at_ms_float", M, "created_at_ms 1.5.", edit(r#""created_at_ms":1700000000000"#, r#""created_at_ms":1.5"#)),
        reject("predicted_load_object", M, "predicted_load as an object.", edit("[0.5,0.25,0.25]", r#"{"0":0.5}"#)),
        reject("predicted_load_entry_string", M, "A predicted_load entry \"0.5\".", edit("[0.5,0.25,0.25]", r#"["0.5",0.25,0.25]"#)),
        reject("predicted_load_entry_null", M, "A predicted_load entry null.", edit("[0.5,0.25,0.25]", "[null,0.25,0.25]")),
        reject("predicted_load_nan", M, "NaN (not a JSON token).", edit("[0.5,0.25,0.25]", "[NaN,0.25,0.25]")),
        reject("predicted_load_infinity", M, "Infinity (not a JSON token).", edit("[0.5,0.25,0.25]", "[Infinity,0.25,0.25]")),
        reject("predicted_load_overflow", M, "1e400 (beyond f64: not read as infinity).", edit("[0.5,0.25,0.25]", "[1e400,0.25,0.25]")),
        // Decoded, but the values break a rule.
        reject("partitions_zero", I, "partitions 0.", edit(r#""partitions":3"#, r#""partitions":0"#)),
        reject("partitions_over_max", O, "partitions 1000001 (limit 1000000): a size limit, so the reason is oversize (known gap).", edit(r#""partitions":3"#, &format!(r#""partitions":{}"#, MAX_PARTITIONS + 1))),
        reject("buckets_zero", I, "buckets 0 and an empty table.", edit(r#""buckets":4,"table":[0,1,2,0]"#, r#""buckets":0,"table":[]"#)),
        reject("table_shorter_than_buckets", I, "buckets 5, table of 4 entries.", edit(r#""buckets":4"#, r#""buckets":5"#)),
        reject("table_longer_than_buckets", I, "buckets 3, table of 4 entries.", edit(r#""buckets":4"#, r#""buckets":3"#)),
        reject("buckets_over_max", I, "buckets 4194305 (limit 4194304) with a table of 4: the length check comes first. A table that long cannot fit in 8 MiB, so too many buckets always shows as this.", edit(r#""buckets":4"#, r#""buckets":4194305"#)),
        reject("table_entry_out_of_range", R, "A table entry 3 with 3 partitions.", edit("[0,1,2,0]", "[0,1,3,0]")),
        reject("table_entry_max_u32", R, "A table entry 4294967295.", edit("[0,1,2,0]", "[0,1,4294967295,0]")),
        reject("heavy_partition_out_of_range", R, "A heavy partition 3 with 3 partitions.", edit(r#""partition":1"#, r#""partition":3"#)),
        reject("partitions_below_table_entries", R, "partitions 2 but a table entry 2 (and predicted_load of 3: the table is checked first).", edit(r#""partitions":3"#, r#""partitions":2"#)),
        reject("heavy_key_duplicate", I, "The same heavy key twice, same partition.", edit(r#"{"key_b64":"aG90","partition":1,"weight":1200}"#, r#"{"key_b64":"aG90","partition":1,"weight":1200},{"key_b64":"aG90","partition":1,"weight":1200}"#)),
        reject("heavy_key_duplicate_other_partition", I, "The same heavy key twice, different partitions.", edit(r#"{"key_b64":"aG90","partition":1,"weight":1200}"#, r#"{"key_b64":"aG90","partition":1,"weight":1200},{"key_b64":"aG90","partition":2,"weight":5}"#)),
        reject("heavy_key_duplicate_empty", I, "The empty key twice.", edit(r#"{"key_b64":"aG90","partition":1,"weight":1200}"#, r#"{"key_b64":"","partition":1,"weight":1},{"key_b64":"","partition":1,"weight":1}"#)),
        reject("heavy_key_duplicate_out_of_range", R, "A duplicate heavy key whose second partition is out of range: partitions are checked before duplicates.", edit(r#"{"key_b64":"aG90","partition":1,"weight":1200}"#, r#"{"key_b64":"aG90","partition":1,"weight":1200},{"key_b64":"aG90","partition":3,"weight":5}"#)),
        reject("heavy_key_too_long", O, "A heavy key of 65537 bytes (limit 65536): a size limit, so oversize (known gap).", heavy_with_key(&long_key)),
        reject("base64_bad_character", I, "key_b64 \"aG9!\".", heavy_with_key("aG9!")),
        reject("base64_missing_padding", I, "key_b64 \"aGk\" (canonical: \"aGk=\").", heavy_with_key("aGk")),
        reject("base64_extra_padding", I, "key_b64 \"aGk==\".", heavy_with_key("aGk==")),
        reject("base64_nonzero_trailing_bits", I, "key_b64 \"aGl=\" (decodes to \"hi\" with non-zero unused bits; canonical: \"aGk=\").", heavy_with_key("aGl=")),
        reject("base64_url_safe_alphabet", I, "key_b64 \"-_8=\" (URL-safe alphabet; standard: \"+/8=\").", heavy_with_key("-_8=")),
        reject("base64_whitespace", I, "key_b64 \"aG 90\".", heavy_with_key("aG 90")),
        reject("base64_line_break", I, "key_b64 with an escaped line break \"aG\\n90\".", heavy_with_key("aG\\n90")),
        reject("base64_padding_only", I, "key_b64 \"====\".", heavy_with_key("====")),
        reject("base64_bad_and_table_out_of_range", I, "Bad base64 and a table entry out of range: keys are decoded before the ranges are checked.", edit(r#""table":[0,1,2,0],"heavy":[{"key_b64":"aG90""#, r#""table":[0,1,9,0],"heavy":[{"key_b64":"aG9!""#)),
        reject("table_length_and_out_of_range", I, "buckets 5 with a table of 4 that has an entry out of range: the length is checked first.", edit(r#""buckets":4,"table":[0,1,2,0]"#, r#""buckets":5,"table":[0,1,9,0]"#)),
        reject("topic_empty", I, "topic \"\".", with_topic("")),
        reject("topic_dot", I, "topic \".\".", with_topic(".")),
        reject("topic_dot_dot", I, "topic \"..\".", with_topic("..")),
        reject("topic_slash", I, "topic \"orders/eu\".", with_topic("orders/eu")),
        reject("topic_space", I, "topic \"orders eu\".", with_topic("orders eu")),
        reject("topic_colon", I, "topic \"orders:eu\".", with_topic("orders:eu")),
        reject("topic_non_ascii", I, "topic \"ordérs\".", with_topic("ordérs")),
        reject("topic_nul", I, "topic \"orders\\u0000\".", with_topic("orders\0")),
        reject("topic_250_chars", I, "A topic of 250 characters (limit 249).", with_topic(&long_topic)),
        reject("topic_invalid_and_out_of_range", I, "An invalid topic and a table entry out of range: the topic is checked first.", edit(r#""topic":"orders","partitions":3,"epoch":7,"bucket_hash":{"function":"murmur2","seed":625341585},"buckets":4,"table":[0,1,2,0]"#, r#""topic":"..","partitions":3,"epoch":7,"bucket_hash":{"function":"murmur2","seed":625341585},"buckets":4,"table":[0,1,9,0]"#)),
        reject("predicted_load_too_short", I, "predicted_load of 2 entries for 3 partitions.", edit("[0.5,0.25,0.25]", "[0.5,0.5]")),
        reject("predicted_load_too_long", I, "predicted_load of 4 entries for 3 partitions.", edit("[0.5,0.25,0.25]", "[0.5,0.25,0.25,0]")),
        reject("predicted_load_negative", I, "A predicted_load entry -0.25.", edit("[0.5,0.25,0.25]", "[0.5,0.75,-0.25]")),
        reject("params_theta_negative", I, "params.theta -0.01.", edit(r#""theta":0.01"#, r#""theta":-0.01"#)),
        reject("params_epsilon_negative", I, "params.epsilon -0.005.", edit(r#""epsilon":0.005"#, r#""epsilon":-0.005"#)),
        reject("params_mu_negative", I, "params.mu -4.", edit(r#""mu":4.0"#, r#""mu":-4"#)),
        reject("heavy_keys_17_in_one_bucket", I, "17 heavy keys in one bucket (the limit is 16): keys that collide in the bucket hash cannot make a lookup scan long.", crowded_bucket(MAX_HEAVY_KEYS_PER_BUCKET + 1)),
    ]
}

/// `BASE_DOCUMENT` with its heavy list replaced by `n` keys that all fall in bucket 0 of its 4
/// buckets (seed 625341585), each on partition 1.
fn crowded_bucket(n: usize) -> Vec<u8> {
    let entries: Vec<String> = (0_u32..)
        .map(|i| format!("crowd-{i}").into_bytes())
        .filter(|k| BucketHash::default().bucket(k, 4) == 0)
        .take(n)
        .map(|k| {
            format!(
                r#"{{"key_b64":"{}","partition":1,"weight":10}}"#,
                B64.encode(k)
            )
        })
        .collect();
    edit(
        r#"[{"key_b64":"aG90","partition":1,"weight":1200}]"#,
        &format!("[{}]", entries.join(",")),
    )
}

pub(super) fn reject_file() -> String {
    let base = Assignment::from_json(BASE_DOCUMENT.as_bytes()).expect("the base document is valid");
    assert_eq!(
        base.to_json(),
        BASE_DOCUMENT.as_bytes(),
        "the base document is canonical"
    );
    let mut cases = checked_cases(reject_cases(), "reject case");
    let over = MAX_ASSIGNMENT_BYTES + 1;
    assert_eq!(reject_label(&padded_document(over)), "oversize");
    cases.push(RejectCase {
        name: "oversize".to_owned(),
        description: format!(
            "A valid document followed by spaces up to {over} bytes (the limit is \
             {MAX_ASSIGNMENT_BYTES}): rejected before parsing. Not stored; build it from \
             `generate`."
        ),
        document_b64: None,
        reason: "oversize",
        generate: Some(Generate {
            valid_document_padded_to_bytes: over,
        }),
    });
    cases_file(&[], &cases)
}

/// `cases` as file entries, each checked first: names unique, and the Rust decoder gives exactly the
/// expected label (so the vectors cannot say what the reference implementation does not do).
fn checked_cases(cases: Vec<Reject>, what: &str) -> Vec<RejectCase> {
    let mut names = std::collections::HashSet::new();
    cases
        .into_iter()
        .map(|r| {
            assert!(names.insert(r.name), "duplicate case name {}", r.name);
            let got = reject_label(&r.document);
            assert_eq!(got, r.reason, "{what} {}", r.name);
            RejectCase {
                name: r.name.to_owned(),
                description: r.description.to_owned(),
                document_b64: Some(b64(&r.document)),
                reason: r.reason,
                generate: None,
            }
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// v2/reject.json

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
